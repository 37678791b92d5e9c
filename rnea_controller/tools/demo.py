"""rnea-demo (`./run demo`): the whole mission with one command, no robot needed.

1. starts the simulated arm (`rnea-sim`, MuJoCo) and, once it publishes joint states, the
   controller (`rnea-controller`), as subprocesses, their logs in the output directory;
2. records joint states, commands, reference, trajectory, diagnostics and the robot description
   into an MCAP rosbag2 bag (`ros2 bag record` where it exists, else `tools.record`);
3. once the simulator applies the controller's commands (the controller holds the arm),
   records from then on and sends the demo motion (`tools.send_trajectory`: every joint,
   starting and ending at rest), and shows progress;
4. after --duration seconds stops everything and validates the bag with
   `analysis.validate.validate_bag`: the per-joint table (tracking error RMS and max,
   saturation, loop rate and jitter) on the terminal, report.json, report.md and PNG plots.

    rnea-demo [--robot NAME | --urdf FILE] [--payload KG] [--law feedforward_pd]
              [--duration S] [--output DIR] [--geared] [--link-errors SEED] [--excite]
              [--params-file FILE] [--param NAME:=VALUE ...]

--robot NAME runs it on another arm (`tools.arms.ARMS`: panda, ur5, xarm7, jaco2 from PyPI
example-robot-data, iiwa14 from Drake beside the project; arm, the bundled one, by default) and
--urdf FILE on any arm's URDF; both are told nothing but the URDF: the simulator reads the file,
the controller the description the simulator publishes. Such an arm starts in the pose
`tools.arms.start_pose` picks from its joints' ranges (the bundled arm: UR's home), the motion
moves the joints the controller controls by default (a gripper's fingers, which the simulator
holds still, left out) within their URDF limits.

--payload puts a mass at the arm's last link in the simulator only: the controller's model does
not know it, so the tracking error shows the model error. --geared gives the simulated arm the
rotor inertia and friction of a geared arm (`GEARED`, MuJoCo Menagerie's xArm7 figures; on an
arm other than the bundled one scaled by each joint's effort limit over the xArm7's:
`tools.arms.geared_figures`), also unknown to the controller unless told (--params-file,
--param). --link-errors SEED makes every moving link of the simulated arm differ from the
URDF (mass and principal inertias by up to 30 %, centre of mass by up to 3 cm, seeded:
rnea-sim's link_errors.*). --excite sends the identification motion instead of the demo motion
and identifies (`rnea-validate --identify`):
the output then holds identified_parameters.yaml for the controller's --params-file
(docs/validation.md, "Identification").

The verdict (`demo_verdict`, printed last and kept in report.json's 'demo'): PASS when every
controlled joint ends within FINAL_TOLERANCE of the motion's goal, none was measured beyond
OVERSPEED_SHARE of its velocity limit, and the controller declared no contact and never braked
(its /diagnostics); the validator's own failures (an idle run, non-finite or over-limit
commands) fail it too. Exit 0 when the demo ran (whatever its verdict: 'demo' in report.json
says), 1 when it could not run, 2 when the arm's URDF is not there (the message says why).
"""
import argparse
from dataclasses import dataclass
import datetime
import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import numpy as np

from rnea_controller.errors import RneaControllerError
from rnea_controller.interrupt import interrupt_once
from rnea_controller.tools.arms import ARMS, ArmUnavailableError
from rnea_controller.tools.programs import find_program
from rnea_controller.tools.record import BagRecorder, DEFAULT_TOPICS, fresh_path, record_command

SETTLE_BEFORE = 0.5  # [s] recorded hold before the motion starts
SETTLE_AFTER = 1.0  # [s] recorded hold after the motion ends
STARTUP_TIMEOUT = 30.0  # [s] for the simulator's and the controller's first messages
TRAJECTORY_TOPIC = '/rnea_controller/joint_trajectory'
# A geared arm (MuJoCo Menagerie's xArm7): rotor inertia [kg·m²], viscous [N·m·s/rad] and
# Coulomb [N·m] friction per joint
GEARED = {'armature': [0.1], 'damping': [10.0, 10.0, 5.0, 5.0, 5.0, 2.0], 'friction': [1.0]}
FINAL_TOLERANCE = 1e-3  # [rad] from the goal at the end: the controller's bound (README)
# a joint measured beyond this share of its velocity limit is an overspeed of the verdict: the
# controller brakes at its limit (mode 'braking: overspeed'); 1.5 x leaves the measured
# velocity's noise and a brake's own overshoot to that mode, which fails the verdict itself
OVERSPEED_SHARE = 1.5
CONTROLLER_STATUS = 'rnea_controller: control loop'  # ros/diagnostics.py STATUS_NAME


class DemoError(RneaControllerError):
    """The demo could not run: a process did not start or died."""


def parse_args(argv):
    parser = argparse.ArgumentParser(prog='rnea-demo', description=__doc__.split('\n')[0])
    arm = parser.add_mutually_exclusive_group()
    arm.add_argument('--robot', default='arm', choices=tuple(ARMS), metavar='NAME',
                     help='the arm: ' + '; '.join(f'{k}: {a.title}' for k, a in ARMS.items())
                     + ' (default arm)')
    arm.add_argument('--urdf', type=Path, metavar='FILE',
                     help="any arm's URDF (or .xacro), told to the simulator and the controller")
    parser.add_argument('--payload', type=float, default=0.0, metavar='KG',
                        help='mass at the last link, unknown to the controller [kg]')
    parser.add_argument('--law', default='computed_torque',
                        choices=('computed_torque', 'feedforward_pd'), help='control law')
    parser.add_argument('--duration', type=float, default=10.0, metavar='S',
                        help='recorded length of the run [s] (at least 3)')
    parser.add_argument('--output', type=Path, metavar='DIR',
                        help='output directory (default ./demo_output/<timestamp>)')
    parser.add_argument('--no-plots', action='store_true', help='skip the PNG plots')
    parser.add_argument('--via-action', action='store_true',
                        help='send the motion as a FollowJointTrajectory goal (not on the topic) '
                             'and show its result code')
    parser.add_argument('--geared', action='store_true', help='simulate rotor inertia and '
                        "friction (a geared arm: MuJoCo Menagerie's xArm7, armature 0.1 kg·m²"
                        ', damping 10/10/5/5/5/2/2 N·m·s/rad, Coulomb 1 N·m; on another arm '
                        "scaled by each joint's URDF effort limit over the xArm7's), unknown "
                        'to the controller unless told')
    parser.add_argument('--link-errors', type=int, metavar='SEED',
                        help="every moving link's mass, inertia and centre of mass off the "
                        "URDF's in the simulator (rnea-sim link_errors.seed: up to 30 %%, 30 %% "
                        'and 3 cm, seeded), unknown to the controller')
    parser.add_argument('--excite', action='store_true', help='send the identification motion '
                        'and identify: writes identified_parameters.yaml')
    parser.add_argument('--params-file', type=Path, metavar='FILE',
                        help="the controller's parameters file")
    parser.add_argument('--param', action='append', default=[], metavar='NAME:=VALUE',
                        help='a controller parameter (repeatable)')
    args = parser.parse_args(argv)
    if args.duration < 3.0:
        parser.error(f'--duration must be at least 3 s, got {args.duration}')
    if args.link_errors is not None and args.link_errors < 0:
        parser.error(f'--link-errors must be a seed >= 0, got {args.link_errors}')
    if not 0.0 <= args.payload <= 20.0:
        parser.error(f'--payload must be in [0, 20] kg, got {args.payload}')
    return args


class Processes:
    """The demo's child processes, each logging to <output>/<name>.log; stopped with Ctrl-C."""

    def __init__(self, output):
        self.output = output
        self.children = {}

    def start(self, name, args):
        log = open(self.output / f'{name}.log', 'w')
        self.children[name] = (subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True), log)

    def check_alive(self):
        for name, (proc, _) in self.children.items():
            if proc.poll() is not None:
                raise DemoError(f'{name} exited with code {proc.returncode}; its log '
                                f'{self.output / (name + ".log")} ends with:\n{self.tail(name)}')

    def tail(self, name, lines=15):
        path = self.output / f'{name}.log'
        return '\n'.join(path.read_text(errors='replace').splitlines()[-lines:])

    def stop_all(self, timeout=10.0):
        for proc, _ in self.children.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
        for proc, log in self.children.values():
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()


class Monitor:
    """The demo's own ROS node: records the bag and watches the first messages arrive."""

    def __init__(self, bag_path):
        import rclpy
        from rclpy.signals import SignalHandlerOptions
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        from rnea_controller.ros.realtime import BackgroundSpinner
        rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # Ctrl-C ends the demo
        self.node = rclpy.create_node('rnea_demo')
        self.state = None
        self.reference = None
        self.watchers = [
            self.node.create_subscription(JointState, '/joint_states', self._on_state, 10),
            self.node.create_subscription(JointState, '/rnea_controller/reference',
                                          self._on_reference, 10)]
        self.trajectory_pub = self.node.create_publisher(JointTrajectory, TRAJECTORY_TOPIC, 10)
        self.bag_path = bag_path
        self.ros2_bag = record_command(bag_path, list(DEFAULT_TOPICS))
        self.recorder = None if self.ros2_bag else BagRecorder(bag_path, start=False)
        self.spinner = BackgroundSpinner(self.node, 'demo monitor', 'events')

    def _on_state(self, msg):
        self.state = msg

    def _on_reference(self, msg):
        self.reference = msg

    def arm_driven(self):
        """Whether the simulator applies the controller's commands: its joint states carry the
        applied effort, zero while it waits on its brakes for the first command (which can
        come a while after the controller's first tick: DDS has to match them first)."""
        state = self.state
        return state is not None and any(effort != 0.0 for effort in state.effort)

    def start_recording(self, processes):
        """Record from now on: `ros2 bag record` if installed, else our rosbags recorder."""
        if self.ros2_bag:
            processes.start('ros2_bag', self.ros2_bag)
            wait_until(lambda: len(self.node.get_subscriptions_info_by_topic(
                '/effort_controller/commands')) > 1, 'subscription of ros2 bag record',
                processes)  # the simulator's and the recorder's
        else:
            self.recorder.start()

    def stop_watching(self):
        """Drop the start-up subscriptions (decoding 2 kHz of messages costs CPU)."""
        for subscription in self.watchers:
            self.node.destroy_subscription(subscription)
        self.watchers = []

    def counts(self):
        return self.recorder.counts if self.recorder else {}

    def close(self):
        import rclpy
        if self.recorder:
            self.recorder.close()
        self.spinner.stop()
        self.node.destroy_node()
        rclpy.try_shutdown()


def wait_until(predicate, what, processes, timeout=STARTUP_TIMEOUT):
    """Wait for predicate() while checking that the children live; DemoError on timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        processes.check_alive()
        if time.monotonic() > deadline:
            raise DemoError(f'no {what} within {timeout:.0f} s')
        time.sleep(0.05)


@dataclass(frozen=True)
class DemoArm:
    """The arm of a run: its URDF (path, model), the joints the controller controls by default,
    the simulator's joints (plant order) and what it is told about them."""

    label: str
    urdf: Path
    model: object  # RobotModel
    joints: tuple  # controlled, in the controller's order
    plant_joints: tuple
    start: tuple | None  # [rad] plant order; None: the simulator's default (the bundled arm's)
    geared: dict  # {'armature', 'damping', 'friction'}: one value or one per plant joint
    payload_link: str  # '' for the simulator's default (the last joint's link)


def demo_arm(robot, urdf=None):
    """The DemoArm of `--robot` (a key of ARMS) or `--urdf` (a path, taking precedence);
    ArmUnavailableError when its URDF is not there."""
    from rnea_controller.tools.arms import (
        arm_urdf,
        child_link,
        geared_figures,
        load_arm,
        start_pose,
    )
    if urdf is not None and not Path(urdf).is_file():
        raise ArmUnavailableError(f'--urdf {urdf}: no such file')
    path = Path(urdf) if urdf is not None else arm_urdf(robot)
    text, model, joints = load_arm(path)
    label = str(path) if urdf is not None else f'{robot} ({ARMS[robot].title})'
    if urdf is None and robot == 'arm':  # as before --robot: its home, its documented figures
        return DemoArm(label, path, model, joints, tuple(model.joint_names), None, GEARED, '')
    plant_joints, start = start_pose(text, model, joints)
    figures = geared_figures(model, plant_joints, joints)
    return DemoArm(label, path, model, joints, plant_joints, tuple(float(x) for x in start),
                   {k: [float(x) for x in v] for k, v in figures.items()},
                   child_link(text, joints[-1]))


def plan_motion(monitor, arm, duration, excite=False):
    """The demo motion of the arm's controlled joints (or with `excite` the excitation motion
    of every joint of the model, optimised for it: 0.5-4 s, done before recording) about the
    current desired position (no step at the start)."""
    from rnea_controller.tools.send_trajectory import (
        controlled_demo_motion,
        demo_centre,
        excitation_motion,
    )
    joints = arm.model.joint_names if excite else arm.joints
    centre = demo_centre(joints, monitor.reference, monitor.state)
    if centre is None:
        raise DemoError(f'no position of joints {list(joints)} on the reference or the joint '
                        'states')
    if excite:
        return excitation_motion(arm.model, centre, duration)
    return controlled_demo_motion(arm.model, arm.joints, centre, duration)


def send_demo_motion(monitor, plan, via_action=False):
    """Publish the waypoints `plan()` returns (`plan_motion`) to the controller, planned once
    it listens: about the reference of that instant, which the controller checks the motion's
    start against (planned 1 s earlier, a reference that moved meanwhile, as a starved host's
    stale states move it, had the motion refused). Returns (the future of the goal handle with
    `via_action`, which sends it as a FollowJointTrajectory goal, else None; the waypoints).
    """
    from rnea_controller.tools.send_trajectory import (
        subscriber_names,
        to_message,
        wait_for_subscribers,
    )
    deadline = time.monotonic() + 10.0
    while not any(info.node_name.startswith('rnea_controller') for info in
                  monitor.node.get_subscriptions_info_by_topic(TRAJECTORY_TOPIC)):
        if time.monotonic() > deadline:
            raise DemoError(f'the controller does not subscribe to {TRAJECTORY_TOPIC}')
        time.sleep(0.02)
    if via_action:
        waypoints = plan()
        return send_goal(monitor, to_message(waypoints)), waypoints
    # the controller and the recorder: `ros2 bag record` subscribes when it next polls the graph
    matched = wait_for_subscribers(monitor.node, monitor.trajectory_pub, 2, 10.0)
    if matched < 2:
        raise DemoError(f'{matched} of 2 subscribers (the controller and the recorder) on '
                        f'{TRAJECTORY_TOPIC} within 10 s: '
                        f'{subscriber_names(monitor.node, TRAJECTORY_TOPIC)}')
    waypoints = plan()
    monitor.trajectory_pub.publish(to_message(waypoints))
    monitor.stop_watching()
    return None, waypoints


def send_goal(monitor, trajectory):
    """Send `trajectory` to rnea_controller/follow_joint_trajectory; the goal handle's future."""
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import ActionClient
    client = ActionClient(monitor.node, FollowJointTrajectory,
                          'rnea_controller/follow_joint_trajectory')
    if not client.wait_for_server(timeout_sec=10.0):
        raise DemoError('no action server rnea_controller/follow_joint_trajectory')
    monitor.stop_watching()
    return client.send_goal_async(FollowJointTrajectory.Goal(trajectory=trajectory))


def show_result(goal, timeout=5.0):
    """Print the result code of the goal sent by `send_goal`."""
    deadline = time.monotonic() + timeout
    while not goal.done() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not goal.done() or not goal.result().accepted:
        print('action: the goal was not accepted (see controller.log)')
        return
    result = goal.result().get_result_async()
    while not result.done() and time.monotonic() < deadline:
        time.sleep(0.05)
    if result.done():
        print(f'action result: error_code {result.result().result.error_code} '
              f'{result.result().result.error_string!r}')
    else:
        print('action: no result yet (the goal is still running)')


def run_with_progress(seconds, monitor, processes, label):
    """Wait `seconds` [s] showing a progress bar (rich) with the recorded message counts."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    columns = (TextColumn('{task.description}'), BarColumn(), TextColumn('{task.fields[info]}'),
               TimeRemainingColumn())
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task(label, total=seconds, info='')
        start = time.monotonic()
        while (elapsed := time.monotonic() - start) < seconds:
            processes.check_alive()
            counts = monitor.counts()
            info = ' · '.join(f'{topic.rsplit("/", 1)[-1]} {counts[topic]}' for topic in (
                'joint_states', 'effort_controller/commands', 'rnea_controller/reference')
                if topic in counts)
            progress.update(task, completed=elapsed, info=info)
            time.sleep(0.1)
        progress.update(task, completed=seconds)


def simulator_parameters(args, arm):
    """The simulator's `name:=value` parameters for the run: the arm (its URDF, start pose,
    payload link) and the truth options (--payload, --geared, --link-errors)."""
    geared = [f'{k}:={v!r}' for k, v in arm.geared.items()] if args.geared else []
    links = [] if args.link_errors is None else [f'link_errors.seed:={args.link_errors}']
    where = [] if arm.start is None else [f'urdf_file:={arm.urdf}',
                                          f'initial_positions:={list(arm.start)!r}']
    payload = [f'payload.link:={arm.payload_link}'] if arm.payload_link else []
    return [*where, f'payload.mass:={float(args.payload)!r}', *payload, *geared, *links]


def start_simulator(processes, args, arm):
    processes.start('sim', [find_program('rnea-sim'), '--ros-args',
                            *_params(simulator_parameters(args, arm))])


def start_controller(processes, args):
    # state_timeout 0.25 s (default 0.1): the demo runs three Python processes on one machine,
    # whose simulator a busy 2-core host stalls for 100-250 ms now and then; a driver does not
    params_file = ['--params-file', str(args.params_file)] if args.params_file else []
    processes.start('controller', [find_program('rnea-controller'), '--ros-args', *params_file,
                                   *_params([f'control_law:={args.law}', 'state_timeout:=0.25',
                                             *args.param])])


def _params(assignments):
    """['-p', 'a:=1', '-p', 'b:=2'] for ['a:=1', 'b:=2']."""
    return [item for assignment in assignments for item in ('-p', assignment)]


def run(args):
    """The demo; returns (the validation result or None, output directory)."""
    arm = demo_arm(args.robot, args.urdf)  # before anything starts: its URDF may be missing
    output = args.output or Path('demo_output') / datetime.datetime.now().strftime(
        '%Y%m%d-%H%M%S')
    output.mkdir(parents=True, exist_ok=True)
    bag_path = fresh_path(output / 'bag')  # bag, else bag-1, bag-2, ...: never overwritten
    print(f'rnea-demo: {arm.label}, law {args.law}, payload {args.payload:g} kg (unknown to the '
          f'controller), {args.duration:g} s; output in {output}')
    if arm.start is not None:
        print('start pose [rad]: ' + ', '.join(
            f'{name} {q:.3f}' for name, q in zip(arm.plant_joints, arm.start, strict=True)))
    processes = Processes(output)
    monitor = Monitor(bag_path)
    try:
        # as on a robot: the hardware (here the simulator) runs before the controller starts
        print('starting the simulator...', flush=True)
        start_simulator(processes, args, arm)
        wait_until(lambda: monitor.state is not None, 'joint states from the simulator',
                   processes)
        print('starting the controller...', flush=True)
        start_controller(processes, args)
        wait_until(lambda: monitor.reference is not None, 'reference from the controller',
                   processes)
        wait_until(monitor.arm_driven, "the simulator applying the controller's commands",
                   processes)
        motion = args.duration - SETTLE_BEFORE - SETTLE_AFTER
        # the excitation is optimised (0.5-4 s) before the recording, the demo motion at once
        excitation = plan_motion(monitor, arm, motion, excite=True) if args.excite else None
        monitor.start_recording(processes)
        print(f'the controller holds the arm; recording {bag_path}', flush=True)
        time.sleep(SETTLE_BEFORE)
        goal, waypoints = send_demo_motion(
            monitor, lambda: excitation or plan_motion(monitor, arm, motion), args.via_action)
        run_with_progress(args.duration - SETTLE_BEFORE, monitor, processes,
                          f'{"excitation" if args.excite else "demo"} motion {motion:.1f} s')
        if goal is not None:
            show_result(goal)
    finally:
        monitor.close()
        processes.stop_all()
    result = validate(bag_path, output, args, arm.payload_link or None)
    verdict = demo_verdict(bag_path, result, arm, waypoints)
    print(verdict_text(verdict))
    keep_verdict(output, result, verdict)
    return result, output


def validate(bag_path, output, args, payload_link=None):
    """Validate the bag with rnea_controller.analysis.validate; print its table. payload_link:
    where the payload is estimated (None: the validator's default, the last joint's link,
    which on an arm with a gripper is a finger: the Panda's 1 kg on link7 read there 0.32 kg
    with --geared --link-errors 1; 1.001 kg on link7 alone)."""
    from rnea_controller.analysis.validate import validate_bag
    result = validate_bag(bag_path, output, progress=False, plots=not args.no_plots,
                          identify=args.excite, payload_link=payload_link)
    print(result.table())
    return result


def run_figures(bag_path, joints, velocity_limits):
    """From the bag: each joint's last measured position [rad], its largest measured speed
    over its velocity limit, and the controller's modes seen and its overspeed and contact
    counts (the largest its /diagnostics reported)."""
    from rnea_controller.analysis.bagio import BagReader
    last = np.full(len(joints), np.nan)
    speed = np.zeros(len(joints))
    modes, counts = [], {'overspeeds': 0, 'contacts': 0}
    with BagReader(bag_path) as bag:
        for topic, chunk in bag.stream({'/joint_states': ('joint_state', joints),
                                        '/diagnostics': ('diagnostics', None)}):
            if topic == '/joint_states':
                seen = ~np.isnan(chunk.position)
                rows = seen.any(axis=1)
                if rows.any():
                    last = np.where(seen[rows][-1], chunk.position[rows][-1], last)
                speed = np.fmax(speed, np.nanmax(np.abs(chunk.velocity), axis=0, initial=0.0))
                continue
            for status in (s for s in chunk if s.name == CONTROLLER_STATUS):
                mode = status.values.get('mode', status.message)
                if mode not in modes:
                    modes.append(mode)
                for key in counts:
                    counts[key] = max(counts[key], int(status.values.get(key, 0)))
    return last, speed / velocity_limits, modes, counts


def demo_verdict(bag_path, result, arm, waypoints):
    """{'robot', 'joints', 'final_error' [rad] (goal - last measured, per joint),
    'speed_share' (largest measured speed / velocity limit, per joint), 'modes', 'overspeeds',
    'contacts', 'loop_rate_hz', 'failures', 'passed'} of the run (module doc)."""
    joints = tuple(waypoints.joint_names)
    index = [arm.model.joint_index(name) for name in joints]
    last, share, modes, counts = run_figures(bag_path, joints,
                                             arm.model.velocity_limits[index])
    final = waypoints.positions[-1] - last
    failures = [f'{j}: ends {e:+.3g} rad from the goal (bound {FINAL_TOLERANCE:g})'
                for j, e in zip(joints, final, strict=True) if not abs(e) <= FINAL_TOLERANCE]
    failures += [f'{j}: measured at {r:.2f} x its velocity limit (bound {OVERSPEED_SHARE:g} x)'
                 for j, r in zip(joints, share, strict=True) if r > OVERSPEED_SHARE]
    failures += [f"the controller's mode was {m!r}" for m in modes
                 if m.startswith(('braking', 'holding: contact'))]
    failures += [f'the controller counted {counts[k]} {k}' for k in counts if counts[k]]
    failures += [f'validation: {f}' for f in result.failures]
    return {'robot': arm.label, 'joints': list(joints),
            'final_error': dict(zip(joints, final.tolist(), strict=True)),
            'speed_share': dict(zip(joints, share.tolist(), strict=True)), 'modes': modes,
            **counts, 'loop_rate_hz': result.report['loop'].get('rate_hz'),
            'failures': failures, 'passed': not failures}


def verdict_text(verdict):
    """The verdict's lines for the terminal and report.md."""
    rate = verdict['loop_rate_hz']
    lines = [f"demo on {verdict['robot']}: final error [rad] " + ', '.join(
        f'{j} {e:+.1e}' for j, e in verdict['final_error'].items()),
        'largest speed / velocity limit: ' + ', '.join(
        f'{j} {r:.2f}' for j, r in verdict['speed_share'].items()),
        f"controller modes: {', '.join(verdict['modes']) or 'none recorded'}; overspeeds "
        f"{verdict['overspeeds']}, contacts {verdict['contacts']}; loop rate "
        f"{'?' if rate is None else format(rate, '.1f')} Hz",
        f"demo verdict: {'PASS' if verdict['passed'] else 'FAIL'}"]
    return '\n'.join(lines + [f'  FAIL {f}' for f in verdict['failures']])


def keep_verdict(output, result, verdict):
    """The verdict into report.json ('demo', NaN as null as the validator writes it) and
    report.md (a last section)."""
    result.report['demo'] = verdict
    path = output / 'report.json'
    report = json.loads(path.read_text())
    report['demo'] = json.loads(json.dumps(verdict).replace('NaN', 'null'))
    path.write_text(json.dumps(report, indent=2) + '\n')
    with open(output / 'report.md', 'a', encoding='utf-8') as markdown:
        markdown.write(f'\n## Demo verdict\n\n```\n{verdict_text(verdict)}\n```\n')


def main(argv=None):
    """Console script `rnea-demo`; exit 0 when the demo ran, 1 otherwise."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    interrupt_once()  # Ctrl-C or SIGTERM: stop the children, undisturbed by a second one
    started = time.monotonic()
    try:
        result, output = run(args)
    except ArmUnavailableError as error:
        print(f'rnea-demo: {error}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print('rnea-demo: interrupted', file=sys.stderr)
        return 1
    except RneaControllerError as error:
        print(f'rnea-demo: {error}', file=sys.stderr)
        return 1
    print(f'\nrnea-demo finished in {time.monotonic() - started:.1f} s. Files in {output}/:')
    for path in sorted(output.iterdir()):
        print(f'  {path}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
