"""Start-up of the controller: from `rnea-controller` starting to its first command (issue 26).

    .venv/bin/python bench/bench_startup.py [--runs 5]

The simulator (`rnea-sim`, the bundled arm) publishes joint states at 1 kHz throughout; the
controller is started `--runs` times with the simulator's stand-in for ros2_control's effort
controller (a node named `effort_controller` with the parameter `joints`) and as many times
without one (the simulator's command topic renamed: a topic-level driver). Figures from the
node's own log, seconds after its process started: `active` and `first command`. Side by side
with each start, the peer: a bare rclpy process that subscribes to the same joint states and
exits at the first one (interpreter, rclpy and DDS discovery: the floor of any node).
Printed: the median and the worst of the runs, and the first command's median over the peer's.
"""
import argparse
import os
from pathlib import Path
import re
import sys
import tempfile
import time

import numpy as np
from processes import start, stop

os.environ.setdefault('ROS_DOMAIN_ID', str(10 + os.getpid() % 80))
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')

VENV_BIN = Path(sys.executable).parent
AGE = r' \(([0-9.]+) s after the process started\)'
TIMEOUT = 30.0  # [s] for one start


def peer():
    """The bare rclpy subscriber: prints its process age at its first joint state."""
    import rclpy
    from sensor_msgs.msg import JointState

    from rnea_controller.ros.realtime import process_age
    rclpy.init()
    node = rclpy.create_node('bench_startup_peer')
    got = []
    node.create_subscription(JointState, '/joint_states', got.append, 10)
    while not got:
        rclpy.spin_once(node, timeout_sec=0.01)
    print(f'first state ({process_age():.2f} s after the process started)', flush=True)


def wait_for_line(log, pattern, proc):
    """The first match of `pattern` in the file `log`, waiting for it (None: timeout, exit)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        found = re.search(pattern, Path(log.name).read_text())
        if found:
            return found
        if proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def one_start(tmp, k, command_topic):
    """(active, first command, peer's first state) [s after each process started]."""
    logs = [open(Path(tmp) / f'{name}-{k}.log', 'w+') for name in ('controller', 'peer')]
    from rnea_controller import default_urdf_path
    controller = start([str(VENV_BIN / 'rnea-controller'), '--urdf', str(default_urdf_path()),
                        '--ros-args', '-p', f'command_topic:={command_topic}'], logs[0])
    bare = start([sys.executable, __file__, '--peer'], logs[1])
    try:
        first = wait_for_line(logs[0], 'first command: holding the measured position' + AGE,
                              controller)
        if first is None:
            raise RuntimeError(Path(logs[0].name).read_text())
        active = re.search(r'\]: active' + AGE, Path(logs[0].name).read_text())
        state = wait_for_line(logs[1], 'first state' + AGE, bare)
        return float(active.group(1)), float(first.group(1)), float(state.group(1))
    finally:
        stop(controller)
        stop(bare)


def case(tmp, runs, effort_controller):
    """Starts of the controller next to a running simulator; returns (runs, 3) figures."""
    command_topic = 'effort_controller/commands' if effort_controller else 'arm_efforts'
    sim_log = open(Path(tmp) / f'sim-{effort_controller}.log', 'w+')
    sim = start([str(VENV_BIN / 'rnea-sim'), '--ros-args', '-p',
                 f'command_topic:={command_topic}'], sim_log)
    try:
        time.sleep(3.0)  # the simulator up and publishing: states flowing
        if sim.poll() is not None:
            raise RuntimeError(Path(sim_log.name).read_text())
        return np.array([one_start(tmp, f'{effort_controller}-{k}', command_topic)
                         for k in range(runs)])
    finally:
        stop(sim)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runs', type=int, default=5, help='starts per case')
    parser.add_argument('--peer', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        return peer()
    print(f'\nstart-up, bundled arm, simulator at 1 kHz, {args.runs} starts per case '
          '[s after the process started], median / worst:')
    print(f'{"":32s}{"active":>14s}{"first command":>16s}{"peer: 1st state":>18s}'
          f'{"ratio":>8s}')
    with tempfile.TemporaryDirectory() as tmp:
        for effort_controller in (True, False):
            figures = case(tmp, args.runs, effort_controller)
            median, worst = np.median(figures, axis=0), figures.max(axis=0)
            label = 'with an effort controller' if effort_controller else 'without one'
            cells = ''.join(f'{f"{m:.2f} / {w:.2f}":>{width}s}' for m, w, width in zip(
                median, worst, (14, 16, 18), strict=True))
            print(f'{label:32s}{cells}{median[1] / median[2]:>8.2f}')


if __name__ == '__main__':
    main()
