"""Trajectory intake: planning time, and the controller's tick delay while it takes a trajectory.

    .venv/bin/python bench/bench_intake.py [--points 100 1000 10000] [--repeats 6] [--no-node]
        [--default-scheduler]

1. Planning alone, in this process, for a 6-joint trajectory with positions, velocities and
   accelerations of N points (best of 5, [ms]), side by side:
   - `message -> rows`: the node's cheap conversion of a rclpy JointTrajectory (times, and the
     points' float64 arrays as they are);
   - `plan_arrays(rows)` (what the node calls) and `plan_arrays(arrays)` from (N, 6) arrays;
   - `plan(points)`: the list of TrajectoryPoint that the node built before plan_arrays existed;
   - `rclpy deserialize`: what rclpy spends turning the CDR bytes into that message (the
     node's intake before issue 45; the action server's still);
   - `wire read`: `wire.read_trajectory`, the topic's intake since issue 45 (the points'
     numbers read where they lie, in blocks);
   - `+ limits`: `plan_arrays(arrays)` with the arm's limits checked (issue 45).
   And one `Trajectory.sample` [µs] at N = 100 and at the largest N: bisection, O(log N).
   1b. The interpreter's lock as the tick meets it (`lock_waits`): a thread waking every
   0.5 ms beside each step at the largest N, its worst wait, beside the same thread's while
   nothing runs (issue 45: a step that gives the lock back often starves the waiter).
2. The live node (`rnea-controller --urdf arm.urdf`, states at 200 Hz from test/state_feeder.py,
   state_timeout 1 s so that a stalled feeder on a loaded machine does not stop it, latency
   compensation off so that each `~/reference` stamp is its tick's): the fuzz's largest inputs
   (issue 45), each sent `--repeats` times: a trajectory of N points on the topic, an action
   goal of the largest N, a 100 kB joint state (2,500 extra joints), a burst of 20 parameter
   sets. The tick delay is the largest gap between consecutive `~/reference` stamps in the 2 s
   after the input, minus the 1 ms period; next to it, the same figure over the quiet 2 s just
   before (the peer, in the same run: what this machine does anyway). Bar (issue 45): the gap
   with the input at most one period over the quiet one.
   `--node-tree DIR` runs the node from another checkout's rnea_controller (e.g. a `git
   worktree` of an older commit), to measure a before and an after on the same machine.
   The node's loop runs at SCHED_FIFO 45, as on a real-time kernel (`--force-realtime`,
   ros/realtime.py), where the privilege allows: the other threads of a 2-core host (the
   node's intake and DDS, this process's feeder and sender) then no longer take the loop's
   core, and what is left of a gap is the loop waiting on its inputs (the interpreter's lock),
   which is what the bar is about. With the default scheduler (`--default-scheduler`, or where
   SCHED_FIFO is refused) a gap also holds the loop's wait for a core while the input's bytes
   are sent, reassembled and read, which any node on the host shares: measured at stop 68 on
   this 2-core VM, 10,000 points on the topic, medians of 8: 1.3 / 3.4 ms at the default
   scheduler, 0.4 / 0.4 at FIFO, the same node, the same hour. A repeat's worst gap is one draw
   of the host's own hiccups (quiet gaps of 2-4 ms at FIFO): the bar is read on the medians
   over the repeats (6 by default).
"""
import argparse
import array
import gc
import os
from pathlib import Path
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

os.environ.setdefault('ROS_DOMAIN_ID', str(10 + os.getpid() % 80))
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')

from builtin_interfaces.msg import Duration  # noqa: E402  (after the ROS environment)
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from rnea_controller import default_urdf_path, RobotModel, wire  # noqa: E402
from rnea_controller.control.trajectory import (  # noqa: E402
    Limits,
    plan,
    plan_arrays,
    TrajectoryPoint,
)
from rnea_controller.ros import raw_goal  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL = RobotModel.from_urdf_file(default_urdf_path())
STORE = wire.default_typestore()
LIMITS = Limits(MODEL.velocity_limits, MODEL.effort_limits, 0.0, MODEL, np.arange(MODEL.n))
JOINTS = list(MODEL.joint_names)
Q0 = np.array([0.1, -1.2, 1.0, -0.5, 0.3, 0.2])
PERIOD = 1e-3


LEAD = 0.5  # [s] the first point's time: from wherever the reference is, within the limits


def message(N, dt=1e-3, lead=0.0):
    """A JointTrajectory of N points dt apart: a slow sine around Q0 with its derivatives,
    its points `lead` [s] later (the sine's phase as without it)."""
    t = dt * np.arange(1, N + 1)
    w = 2 * np.pi / max(t[-1], 1.0)
    s, c = np.sin(w * t)[:, None], np.cos(w * t)[:, None]
    t = t + lead
    q, qd, qdd = Q0 + 0.1 * s, 0.1 * w * c * np.ones(6), -0.1 * w * w * s * np.ones(6)
    points = [JointTrajectoryPoint(
        positions=q[k].tolist(), velocities=qd[k].tolist(), accelerations=qdd[k].tolist(),
        time_from_start=Duration(sec=int(t[k]), nanosec=int(round(t[k] % 1 * 1e9))))
        for k in range(N)]
    return JointTrajectory(joint_names=JOINTS, points=points)


def to_rows(msg):
    """Times [s] and the points' arrays as they are: the node's conversion, N attribute reads."""
    points = msg.points
    times = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in points]
    return (times, [p.positions for p in points], [p.velocities for p in points],
            [p.accelerations for p in points])


def to_points(msg):
    """The TrajectoryPoint list the node built for `plan` (ros/node.py before plan_arrays)."""
    return [TrajectoryPoint(p.time_from_start.sec + p.time_from_start.nanosec * 1e-9,
                            tuple(p.positions), tuple(p.velocities), tuple(p.accelerations))
            for p in msg.points]


def best_ms(function, repeats=5):
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def planning(sizes):
    """Part 1: print the planning figures for each N."""
    kw = dict(joint_names=JOINTS, position_limits=MODEL.position_limits,
              current=np.array([Q0, np.zeros(6), np.zeros(6)]), now=0.0)
    print('planning alone, 6 joints, best of 5 [ms]')
    print(f'{"N":>7} {"rclpy deserialize":>18} {"wire read":>10} {"message -> rows":>16} '
          f'{"plan_arrays(rows)":>18} {"plan_arrays(arrays)":>20} {"+ limits":>9} '
          f'{"plan(points)":>13}')
    for N in sizes:
        figures = planning_row(message(N), kw)
        widths = (18, 10, 16, 18, 20, 9, 13)
        print(f'{N:>7} ' + ' '.join(f'{f:>{w}.2f}' for f, w in zip(figures, widths)))
    sampling(sizes, kw)


def planning_row(msg, kw):
    """[ms]: deserialize, wire read, message -> rows, plan_arrays(rows), plan_arrays(arrays),
    with the limits, plan(points)."""
    data = serialize_message(msg)
    rows = to_rows(msg)
    arrays = [np.asarray(rows[0])] + [np.array(r) for r in rows[1:]]
    assert all(type(r[0]) is array.array for r in rows[1:]), 'rclpy gives array.array rows'
    return [best_ms(lambda: deserialize_message(data, JointTrajectory)),
            best_ms(lambda: wire.read_trajectory(data, STORE)),
            best_ms(lambda: to_rows(msg)),
            best_ms(lambda: plan_arrays(JOINTS, *rows, **kw)),
            best_ms(lambda: plan_arrays(JOINTS, *arrays, **kw)),
            best_ms(lambda: plan_arrays(JOINTS, *arrays, **kw, limits=LIMITS)),
            best_ms(lambda: plan(JOINTS, to_points(msg), **kw), repeats=2)]


def lock_waits(N, repeats=10):
    """Part 1b: the interpreter's lock as the tick meets it. A thread of this process wakes
    every 0.5 ms, as the tick wakes (at SCHED_FIFO where allowed), while this thread runs one
    intake step; its worst wait for the lock during the step, median and worst over
    `repeats`, beside the same figure while this thread sleeps (the peer: what the host does
    anyway). A step that gives the lock back more often than the switch interval starves the
    waiter though it never holds the lock long (docs/timing.md, issue 45)."""
    msg = message(N, lead=LEAD)
    data = serialize_message(msg)
    arrays = wire.read_trajectory(data, STORE)
    kw = dict(joint_names=JOINTS, position_limits=MODEL.position_limits,
              current=np.array([Q0, np.zeros(6), np.zeros(6)]), now=0.0)
    fields = (arrays.names, arrays.times, arrays.positions, arrays.velocities,
              arrays.accelerations)

    def deserialize():
        with wire.collection_paused():
            deserialize_message(data, JointTrajectory)
    # an action goal of the same trajectory as rcl_action's take leaves it in C: rclpy turns it
    # whole into Python (the action server before raw_goal, issue 45), raw_goal.GoalTaker reads
    # it (the trajectory serialized without the lock, the rest converted without its points)
    taker = raw_goal.GoalTaker()
    request = FollowJointTrajectory.Impl.SendGoalService.Request()
    request.goal.trajectory = msg
    c_request = taker.request.create()
    taker.request.from_py(request, c_request)

    def rclpy_goal():
        with wire.collection_paused():
            taker.request.to_py(c_request)
    steps = [('sleep 30 ms (the peer)', lambda: time.sleep(0.03)),
             ('wire read', lambda: wire.read_trajectory(data, STORE)),
             ('plan_arrays', lambda: plan_arrays(*fields, **kw)),
             ('plan_arrays + limits', lambda: plan_arrays(*fields, **kw, limits=LIMITS)),
             ('rclpy deserialize (collector paused)', deserialize),
             ('goal request: rclpy to Python (paused)', rclpy_goal),
             ('goal request: raw_goal.read', lambda: taker.read(c_request))]
    for _, step in steps:
        step()  # compiled, loaded, warm
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # the node's intake thread's
    waits, stop = [], threading.Event()

    def probe():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(45))
        except OSError:
            pass
        while not stop.is_set():
            start = time.perf_counter()
            time.sleep(0.0005)
            waits.append(time.perf_counter() - start - 0.0005)
    gc.freeze()  # as the node, after its start
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    time.sleep(0.2)
    print(f'\nthe lock as the tick meets it: a thread waking every 0.5 ms beside one step of a '
          f'{N:,}-point trajectory, its worst wait [ms] during the step, median / worst of '
          f'{repeats}')
    try:
        for label, step in steps:
            worst = []
            for _ in range(repeats):
                time.sleep(0.02)
                waits.clear()
                step()
                worst.append(max(waits, default=0.0) * 1e3)
            print(f'{label:>40} {np.median(worst):6.2f} / {max(worst):6.2f}')
    finally:
        stop.set()
        thread.join()
        gc.unfreeze()
        sys.setswitchinterval(interval)
        taker.request.destroy(c_request)


def sampling(sizes, kw):
    """Part 1, end: one sample [µs] (best of 5 x 20,000 calls) at the smallest and largest N."""
    out = np.empty((3, 6))
    for N in (min(sizes), max(sizes)):
        traj = plan_arrays(JOINTS, *to_rows(message(N)), **kw)
        t = np.random.default_rng(0).uniform(0, traj.end_time, 20_000)
        per_call = best_ms(lambda traj=traj, t=t: sample_all(traj, t, out)) / len(t) * 1e3
        print(f'Trajectory.sample with N = {N}: {per_call:.2f} µs per call')


def sample_all(traj, times, out):
    for t in times:
        traj.sample(t, out)


class References:
    """This process's subscriber to the node's ~/reference stamps and /diagnostics' missed ticks.

    A SingleThreadedExecutor, as the tests'; on a loaded machine it may lose references (the node
    keeps 10), so the node's own count of missed ticks is read as well.
    """

    def __init__(self):
        from control_msgs.action import FollowJointTrajectory
        from diagnostic_msgs.msg import DiagnosticArray
        import rclpy
        from rclpy.action import ActionClient
        from rclpy.parameter_client import AsyncParameterClient
        from sensor_msgs.msg import JointState

        from rnea_controller.ros.realtime import BackgroundSpinner
        rclpy.init()
        self.node = rclpy.create_node('bench_intake')
        self.stamps, self.missed = [], []  # missed: (receive time [s], missed ticks so far)
        self.node.create_subscription(JointState, '/rnea_controller/reference', self._on, 10_000)
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 100)
        self.publisher = self.node.create_publisher(
            JointTrajectory, '/rnea_controller/joint_trajectory', 10)
        # every entity made before the spinner starts: an ActionClient added to a node another
        # thread spins can be waited on before its constructor ends (its `_lock` not yet made:
        # the spinner's thread died, and every figure was nan)
        self.action = ActionClient(self.node, FollowJointTrajectory,
                                   '/rnea_controller/follow_joint_trajectory')
        self.states = self.node.create_publisher(JointState, '/joint_states', 10)
        self.parameters = AsyncParameterClient(self.node, 'rnea_controller')
        self.spinner = BackgroundSpinner(self.node, 'bench intake', 'events', 0.05)

    def _on(self, msg):
        self.stamps.append(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)

    def _on_diagnostics(self, msg):
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if 'missed ticks' in values:
                self.missed.append((time.time(), int(values['missed ticks'])))

    def worst_gap_ms(self, start, end):
        """Largest gap between consecutive stamps in [start, end] (wall time [s]) - period."""
        s = np.array(self.stamps)
        s = s[(s >= start) & (s <= end)]
        return (np.max(np.diff(s)) - PERIOD) * 1e3 if len(s) > 1 else float('nan')

    def missed_ticks(self, start, end):
        """Ticks the node counts as missed between its reports nearest to start and end [s]."""
        if len(self.missed) < 2:
            return -1
        times, counts = np.array(self.missed).T
        first, last = np.searchsorted(times, [start, end])
        return int(counts[min(last, len(counts) - 1)] - counts[max(first - 1, 0)])

    def close(self):
        import rclpy
        self.spinner.stop()
        self.node.destroy_node()
        rclpy.shutdown()


def wait(predicate, timeout):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


def live_node(sizes, repeats, tree=None, only=None, force_realtime=True):
    """Part 2: the node's worst tick delay while it takes each input, next to a quiet stretch
    of the same run just before it (the peer)."""
    sys.path.insert(0, str(REPO / 'test'))
    from state_feeder import StateFeeder
    log = tempfile.NamedTemporaryFile('w+', suffix='.log', prefix='bench_intake_', delete=False)
    env = dict(os.environ, **({'PYTHONPATH': str(Path(tree).resolve())} if tree else {}))
    node = subprocess.Popen([str(Path(sys.executable).parent / 'rnea-controller'), '--urdf',
                             str(default_urdf_path()),
                             *(['--force-realtime'] if force_realtime else []),
                             '--ros-args', '-p', 'state_timeout:=1.0',
                             '-p', "latency_compensation:='off'"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    feeder, refs = StateFeeder(), References()
    try:
        feeder.set(JOINTS, Q0, np.zeros(6))
        if not wait(lambda: len(refs.stamps) > 100 and len(refs.missed) > 2, 60.0):
            raise RuntimeError(f'the node published no reference; its log:\n{read(log)}')
        fifo = os.sched_getscheduler(node.pid) == os.SCHED_FIFO  # its loop: the main thread
        if force_realtime and not fifo:
            print('\nthe node could not take SCHED_FIFO here (no privilege): its loop runs '
                  'with the default scheduler, and a gap holds its wait for a core as well')
        print('\nlive node' + (' (its loop at SCHED_FIFO 45)' if fifo else
                               ' (its loop at the default scheduler)') +
              ': worst tick delay [ms] (gap between ~/reference stamps - 1 ms) and '
              "the node's missed ticks, in the 2 s before the input (quiet) and the 2 s after; "
              'bar: the gap with the input at most one period over the quiet one')
        print(f'{"input":>34} {"gap quiet":>10} {"gap input":>10} {"missed quiet":>13} '
              f'{"missed input":>13} taken  bar')
        gaps = {}
        for label, send, taken in inputs(refs, sizes):
            if only and not any(word in label for word in only):
                continue
            for _ in range(repeats):
                quiet, loaded, line = one_send(refs, send, taken, log)
                print(f'{label:>34} {line}  {"met" if loaded <= quiet + 1.0 else "MISSED"}')
                gaps.setdefault(label.strip(), []).append((quiet, loaded))
        print('worst over the repeats [ms], quiet / with the input: ' + '; '.join(
            f'{label} {max(q for q, _ in rows):.1f} / {max(w for _, w in rows):.1f}'
            for label, rows in gaps.items()))
        # one repeat's worst gap is one sample of the host's worst (this VM's idle FIFO
        # thread sees 10-ms gaps now and then, in either window): the medians over the
        # repeats compare the input with the quiet without those single draws
        print('median over the repeats [ms], quiet / with the input, bar (one period over): '
              + '; '.join(f'{label} {np.median([q for q, _ in rows]):.1f} / '
                          f'{np.median([w for _, w in rows]):.1f} '
                          + ('met' if np.median([w for _, w in rows])
                             <= np.median([q for q, _ in rows]) + 1.0 else 'MISSED')
                          for label, rows in gaps.items()))
    finally:
        refs.close()
        feeder.close()
        node.send_signal(2)
        node.wait(10)
        log.close()
        os.unlink(log.name)


def inputs(refs, sizes):
    """(label, send(), what the node logs when it took it) of each input of the fuzz's
    largest kinds: trajectories on the topic, an action goal, a 100 kB joint state, a burst
    of parameter sets."""
    from control_msgs.action import FollowJointTrajectory
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState
    # serialized beforehand: this process's own work at the send (rclpy's serialization of
    # 10,000 points, ~0.1 s of a core) is not the node's
    raw = {N: serialize_message(message(N, lead=LEAD)) for N in sizes}
    rows = [(f'trajectory, {N:,} points (topic)', lambda N=N: refs.publisher.publish(raw[N]),
             f'trajectory accepted: {N} points') for N in sizes]
    action, states, parameters = refs.action, refs.states, refs.parameters
    goal = FollowJointTrajectory.Goal(trajectory=message(max(sizes), lead=LEAD))
    goal.trajectory.points[-1].velocities = [0.0] * 6
    goal.trajectory.points[-1].accelerations = [0.0] * 6
    names = JOINTS + [f'extra_joint_{k}' for k in range(2500)]
    big = JointState(name=names, position=list(Q0) + [0.0] * 2500)  # ~100 kB

    futures = []

    def burst():
        futures[:] = [parameters.set_parameters([Parameter(f'gains.{JOINTS[0]}.p',
                                                           value=400.0 + k % 2)])
                      for k in range(20)]

    def burst_taken():  # the node logs an accepted set at debug level only
        return len(futures) == 20 and all(
            f.done() and all(r.successful for r in f.result().results) for f in futures)
    action.wait_for_server(timeout_sec=10.0)
    parameters.wait_for_services(timeout_sec=10.0)
    return rows + [
        (f'action goal, {max(sizes):,} points', lambda: action.send_goal_async(goal),
         f'action goal accepted: {max(sizes)} points'),
        ('joint state, 100 kB', lambda: states.publish(big), None),
        ('parameter sets, a burst of 20', burst, burst_taken)]


def read(log):
    log.flush()
    return Path(log.name).read_text()


def one_send(refs, send, taken, log):
    """Send one input; (worst gap quiet, worst gap with the input [ms], the table's line)."""
    time.sleep(2.5)
    sent = time.time()
    if taken is not None and not callable(taken):  # a line the node logs when it took it
        before, line = read(log).count(taken), taken
        taken = lambda: read(log).count(line) > before  # noqa: E731
    send()
    wait(lambda: refs.missed and refs.missed[-1][0] > sent + 2.2, 30.0)
    wait(lambda: taken is None or taken(), 10.0)
    took = 'n/a' if taken is None else 'yes' if taken() else 'NO'
    quiet, loaded = refs.worst_gap_ms(sent - 2.0, sent - 0.1), refs.worst_gap_ms(sent - 0.1,
                                                                                 sent + 2.0)
    return quiet, loaded, (f'{quiet:>10.1f} {loaded:>10.1f} '
                           f'{refs.missed_ticks(sent - 2.0, sent):>13} '
                           f'{refs.missed_ticks(sent, sent + 2.0):>13} {took:>5}')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--points', type=int, nargs='+', default=[1000, 10000])
    parser.add_argument('--repeats', type=int, default=6)
    parser.add_argument('--no-node', action='store_true', help='planning figures only')
    parser.add_argument('--node-tree', help="run the node from this checkout's rnea_controller")
    parser.add_argument('--only', nargs='+', help='the live inputs whose label has one of these')
    parser.add_argument('--no-planning', action='store_true', help='the live node only')
    parser.add_argument('--default-scheduler', action='store_true',
                        help="the node's loop with the default scheduler (default: SCHED_FIFO "
                             '45 where the privilege allows)')
    # the default since stop 68; kept so that the commands in docs/benchmarks.md still run
    parser.add_argument('--force-realtime', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.no_planning:
        planning(args.points)
        lock_waits(max(args.points))
    if not args.no_node:
        live_node(args.points, args.repeats, args.node_tree, args.only,
                  not args.default_scheduler)


if __name__ == '__main__':
    main()
