"""Benchmark of the FollowJointTrajectory action beside the 1 kHz loop without goals.

    .venv/bin/python bench/bench_action.py [--duration 5] [--goal-period 0.1]

One controller node (subprocess `rnea-controller`, bundled 6-joint arm) with its joint states
from a feeder process (test/state_feeder.py, 200 Hz). Two windows of `duration` seconds, side by
side in the same run: first the loop alone (the peer), then with a goal sent every
`goal-period` seconds by a real rclpy ActionClient in this process, each a 20-point trajectory
that preempts the previous one. Printed: goal-to-accept latency (send to the server's answer)
p50 / max, feedback rate [Hz] of the running goal, and in both windows the loop's own timing
from its /diagnostics (measured in the node, once a second, so that nothing is lost to a slow
subscriber): loop rate, worst second's period jitter p99 [µs] and missed ticks. On a shared,
loaded machine the figures are noisy: compare the two windows, not the absolute numbers.

First, in this process: what the tick spends on the action (issue 31), `leave_snapshot` per call
[µs], best of 7: without a goal (the snapshot copy alone, the peer: what the tick spent before
the path errors were kept), and while a goal runs, with the worst errors kept (one compiled
`goal.keep_worst` call; the monitor judges them).
"""
import argparse
import os
from pathlib import Path
import signal
import subprocess
import sys
import threading
import time

import numpy as np

os.environ.setdefault('ROS_DOMAIN_ID', str(10 + os.getpid() % 80))
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'test'))
Q0 = np.array([0.1, -1.2, 1.0, -0.5, 0.3, 0.2])


def goal(joints, k):
    """A 20-point goal around Q0, different for each k, at rest at its end (3 s)."""
    from builtin_interfaces.msg import Duration
    from control_msgs.action import FollowJointTrajectory
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    points = []
    for i in range(1, 21):
        t = 0.15 * i
        q = Q0 + 0.1 * np.sin(0.5 * t + k) * (i < 20)
        points.append(JointTrajectoryPoint(
            positions=q.tolist(), time_from_start=Duration(sec=int(t), nanosec=int(t % 1 * 1e9))))
    trajectory = JointTrajectory(joint_names=joints, points=points)
    return FollowJointTrajectory.Goal(trajectory=trajectory)


class Bench:
    """This process's node: ~/reference stamps, the action client and its figures."""

    def __init__(self):
        from control_msgs.action import FollowJointTrajectory
        from diagnostic_msgs.msg import DiagnosticArray
        import rclpy
        from rclpy.action import ActionClient
        from rclpy.executors import SingleThreadedExecutor
        rclpy.init()
        self.node = rclpy.create_node('bench_action')
        self.seconds, self.feedback, self.latency = [], [], []
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 10)
        self.client = ActionClient(self.node, FollowJointTrajectory,
                                   '/rnea_controller/follow_joint_trajectory')
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        threading.Thread(target=self.executor.spin, daemon=True).start()

    def _on_diagnostics(self, msg):
        for status in msg.status:
            if status.name.startswith('rnea_controller'):
                self.seconds.append({kv.key: kv.value for kv in status.values})

    def _on_feedback(self, msg):
        self.feedback.append(time.monotonic())

    def send(self, request):
        sent = time.monotonic()
        future = self.client.send_goal_async(request, feedback_callback=self._on_feedback)
        future.add_done_callback(lambda f: self.latency.append(time.monotonic() - sent))

    def window(self, seconds, joints=None, goal_period=None):
        """Diagnostics seconds (and with joints: goals every goal_period) over `seconds`."""
        time.sleep(1.1)  # the diagnostics second that began before the window
        self.seconds.clear()
        self.feedback.clear()
        self.latency.clear()
        end, k = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            if joints is not None:
                self.send(goal(joints, k))
                k += 1
            time.sleep(goal_period or 0.1)
        return list(self.seconds), list(self.latency), list(self.feedback), k


def value(second, prefix):
    """A diagnostics value by its key's prefix, as a float (NaN if absent)."""
    for key, text in second.items():
        if key.startswith(prefix):
            return float(text)
    return float('nan')


def row(name, seconds):
    rate = np.median([value(s, 'loop rate') for s in seconds])
    jitter = np.max([value(s, 'period jitter p99') for s in seconds])
    missed = value(seconds[-1], 'missed ticks') - value(seconds[0], 'missed ticks')
    return f'{name:<24} {len(seconds):>7} {rate:>9.1f} {jitter:>12.1f} {missed:>8.0f}'


def tick_share(repeats=7, calls=20000):
    """[µs] per leave_snapshot call, best of `repeats`: {case: figure}."""
    from rnea_controller.ros.action_server import TrajectoryActionServer

    class Controller:
        trajectory = object()

    server = TrajectoryActionServer.__new__(TrajectoryActionServer)  # its tick side, no ROS
    server.controller, m = Controller(), 6
    server._snap, server._snap_ns, server._seq = np.zeros((6, m)), 0, 0
    server._worst = np.zeros((2, 3, m))
    server._windows, server._epoch, server._flip = (server._worst[0], server._worst[1]), 0, 0
    ref, q, qd, tau = np.ones((3, m)), np.zeros(7), np.zeros(7), np.zeros(m)
    index = np.arange(m)
    figures = {}
    for case, path in (('no goal (the copy alone)', None),
                       ('a goal running: worst errors kept', (Controller.trajectory, 2**62))):
        server._path = path
        best = np.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            for k in range(calls):
                server.leave_snapshot(k, ref, q, qd, index, tau)
            best = min(best, (time.perf_counter() - t0) / calls)
        figures[case] = best * 1e6
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=5.0)
    parser.add_argument('--goal-period', type=float, default=0.1)
    options = parser.parse_args()
    from state_feeder import StateFeeder

    figures = tick_share()
    peer = figures['no goal (the copy alone)']
    print("the tick's leave_snapshot [us per call], best of 7 x 20000:")
    for case, figure in figures.items():
        print(f'  {case:<36} {figure:6.2f}  ({figure / peer:.2f} x the copy alone)')

    from rnea_controller import default_urdf_path, RobotModel
    joints = list(RobotModel.from_urdf_file(default_urdf_path()).joint_names)
    controller = subprocess.Popen(
        [str(Path(sys.executable).parent / 'rnea-controller'), '--urdf', str(default_urdf_path()),
         '--ros-args', '-p', 'state_timeout:=0.5'],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    feeder = StateFeeder()
    try:
        feeder.set(joints, Q0, np.zeros(6))
        bench = Bench()
        if not bench.client.wait_for_server(timeout_sec=120.0):
            raise SystemExit('bench_action: no action server within 120 s')
        time.sleep(2.0)  # warm: compiled paths, discovery
        alone = bench.window(options.duration)
        goals = bench.window(options.duration, joints, options.goal_period)
        report(alone, goals, options)
    finally:
        feeder.close()
        os.killpg(controller.pid, signal.SIGINT)
        controller.wait(10)


def report(alone, goals, options):
    seconds, latency, feedback, sent = goals
    print(f'\nbench_action: {options.duration:g} s windows, a goal every '
          f'{options.goal_period * 1e3:g} ms ({sent} sent, {len(latency)} answered)')
    if latency:
        print(f'goal-to-accept latency: p50 {np.median(latency) * 1e3:.2f} ms, '
              f'max {np.max(latency) * 1e3:.2f} ms')
    rate = (len(feedback) - 1) / (feedback[-1] - feedback[0]) if len(feedback) > 1 else 0.0
    print(f'feedback rate: {rate:.1f} Hz (action_monitor_rate 20 Hz)')
    print(f'{"1 kHz loop":<24} {"seconds":>7} {"rate [Hz]":>9} {"jitter [us]":>12} '
          f'{"missed":>8}   (jitter: worst second\'s p99 of |period - 1 ms|)')
    print(row('alone', alone[0]))
    print(row('while goals arrive', seconds))


if __name__ == '__main__':
    main()
