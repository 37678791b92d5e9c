"""Start-up of the controller: from `rnea-controller` starting to its first command (issue 26).

    .venv/bin/python bench/bench_startup.py [--runs 5]

The simulator (`rnea-sim`, the bundled arm) publishes joint states at 1 kHz throughout; the
controller is started `--runs` times with the simulator's stand-in for ros2_control's effort
controller (a node named `effort_controller` with the parameter `joints`) and as many times
without one (the simulator's command topic renamed: a topic-level driver). Figures from the
node's own log, seconds after its process started: `active` and `first command`. Side by side
with each start, the peer: a bare rclpy process that subscribes to the same joint states and
exits at the first one (interpreter, rclpy and DDS discovery: the floor of any node; its clock,
`ros.realtime.process_age`, imports no numba since issue 35).
Printed: the median and the worst of the runs, and the first command's median over the peer's.

Then the first start of a fresh install, numba's cache as an install leaves it (issue 35), once
each, without a peer, on a copy of the package in a temporary folder (the repository's cache
untouched): `cold`, no cache at all (the node compiles its kernels); `after the install step`,
the cache cleared and then filled by `python -m rnea_controller.warm` (what `./run` and
`colcon build` do; its duration printed); `read-only install`, that copy made read-only and
started by a user whose numba cache is empty (a fresh XDG_CACHE_HOME; as root, without the
capability that overrides file modes). `--no-cold` leaves these out.
"""
import argparse
import math
import os
from pathlib import Path
import re
import shutil
import subprocess
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
COLD_TIMEOUT = 600.0  # [s] for one start that compiles numba's kernels


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
    node.destroy_node()  # its participant deleted: one left at exit delays the next start's
    rclpy.shutdown()  # first message by 1-3 s (ros/main.py)


def wait_for_line(log, pattern, proc, timeout=TIMEOUT):
    """The first match of `pattern` in the file `log`, waiting for it (None: timeout, exit)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, Path(log.name).read_text())
        if found:
            return found
        if proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def one_start(tmp, k, command_topic, package=None, prefix=(), env=None):
    """(active, first command, peer's first state) [s after each process started]; package:
    the folder holding the rnea_controller to start (None: the installed one, with a peer);
    prefix: of the command line; env: more environment."""
    logs = [open(Path(tmp) / f'{name}-{k}.log', 'w+') for name in ('controller', 'peer')]
    from rnea_controller import default_urdf_path
    program = ([str(VENV_BIN / 'rnea-controller')] if package is None
               else [sys.executable, '-m', 'rnea_controller.ros.main'])
    controller = start([*prefix, *program, '--urdf', str(default_urdf_path()), '--ros-args',
                        '-p', f'command_topic:={command_topic}'], logs[0], cwd=package,
                       env=dict(env or {}, **({'PYTHONPATH': str(package)} if package else {})))
    bare = start([sys.executable, __file__, '--peer'], logs[1]) if package is None else None
    try:
        first = wait_for_line(logs[0], 'first command: holding the measured position' + AGE,
                              controller, TIMEOUT if package is None else COLD_TIMEOUT)
        if first is None:
            raise RuntimeError(Path(logs[0].name).read_text())
        active = re.search(r'\]: active' + AGE, Path(logs[0].name).read_text())
        state = wait_for_line(logs[1], 'first state' + AGE, bare) if bare else None
        return (float(active.group(1)), float(first.group(1)),
                float(state.group(1)) if state else math.nan)
    finally:
        stop(controller)
        if bare is not None:
            stop(bare)


def package_copy(folder):
    """A copy of the rnea_controller package under `folder`, without numba's cache."""
    import rnea_controller
    source = Path(rnea_controller.__file__).parent
    shutil.copytree(source, Path(folder) / 'rnea_controller',
                    ignore=shutil.ignore_patterns('*.nbi', '*.nbc'))
    return Path(folder)


def install_step(package):
    """`python -m rnea_controller.warm` on `package`: its duration [s]."""
    start_time = time.monotonic()
    subprocess.run([sys.executable, '-m', 'rnea_controller.warm'], cwd=package, check=True,
                   env=dict(os.environ, PYTHONPATH=str(package)), stdout=subprocess.DEVNULL)
    return time.monotonic() - start_time


def read_only(package):
    """Make `package` read-only; the command-line prefix that starts a process which cannot
    override that (root: without CAP_DAC_OVERRIDE, util-linux's setpriv)."""
    for path in [package, *package.rglob('*')]:
        path.chmod(path.stat().st_mode & ~0o222)
    if os.geteuid() != 0:
        return ()
    if shutil.which('setpriv') is None:
        raise RuntimeError('as root, the read-only case needs setpriv (util-linux)')
    return ('setpriv', '--bounding-set=-dac_override,-dac_read_search', '--')


def first_starts(tmp):
    """{case: (install step [s] or nan, active, first command)} of the fresh-install cases."""
    command_topic = 'effort_controller/commands'
    sim_log = open(Path(tmp) / 'sim-cold.log', 'w+')
    sim = start([str(VENV_BIN / 'rnea-sim')], sim_log)
    rows = {}
    try:
        time.sleep(3.0)
        cold = package_copy(Path(tmp) / 'cold')
        rows['cold (no numba cache)'] = (math.nan, *one_start(tmp, 'cold', command_topic,
                                                              cold)[:2])
        installed = package_copy(Path(tmp) / 'installed')
        step = install_step(installed)
        rows['after the install step'] = (step, *one_start(tmp, 'installed', command_topic,
                                                           installed)[:2])
        prefix = read_only(installed)
        home = Path(tmp) / 'user-cache'
        rows['read-only install, new user'] = (math.nan, *one_start(
            tmp, 'read-only', command_topic, installed, prefix,
            {'XDG_CACHE_HOME': str(home)})[:2])
    finally:
        stop(sim)
        for path in Path(tmp).rglob('*'):  # writable again: the temporary folder's clean-up
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o200)
    return rows


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
    parser.add_argument('--no-cold', action='store_true',
                        help='leave out the first starts of a fresh install (~2 min)')
    parser.add_argument('--rows', action='store_true',
                        help="print each start's figures too (active, first command, peer)")
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
            for row in figures if args.rows else ():
                print(f'{"":32s}' + ''.join(f'{value:>{width}.2f}' for value, width in zip(
                    row, (14, 16, 18), strict=True)))
        if args.no_cold:
            return
        print('\nfirst start of a fresh install, with an effort controller, once each '
              '[s after the process started]:')
        print(f'{"":32s}{"install step":>14s}{"active":>10s}{"first command":>16s}')
        for label, (step, active, first) in first_starts(tmp).items():
            step_text = '-' if math.isnan(step) else f'{step:.1f}'
            print(f'{label:32s}{step_text:>14s}{active:>10.2f}{first:>16.2f}')


if __name__ == '__main__':
    main()
