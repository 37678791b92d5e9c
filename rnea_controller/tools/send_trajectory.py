"""rnea-send-trajectory: publish a JointTrajectory from a waypoint file, or the demo motion.

    rnea-send-trajectory waypoints.yaml            # or .csv
    rnea-send-trajectory --demo [--duration 8]     # every joint, about the current position
    rnea-send-trajectory --excite [--duration 12]  # an identification run (docs/validation.md)

Waypoint files (times are time_from_start [s], strictly increasing and > 0; positions [rad];
velocities [rad/s] and accelerations [rad/s^2] optional, all points alike):

    # YAML
    joint_names: [shoulder_pan_joint, elbow_joint]
    points:
      - {time: 1.0, positions: [0.1, 1.2], velocities: [0.0, 0.0]}
      - {time: 2.0, positions: [0.2, 1.0], velocities: [0.0, 0.0]}

    # CSV: a header row `time,<joint>,...[,<joint>.velocity,...][,<joint>.acceleration,...]`
    time,shoulder_pan_joint,elbow_joint
    1.0,0.1,1.2

The demo motion moves every joint of the model about its current position c (the controller's
desired position from /rnea_controller/reference, else the measured one from /joint_states):
q_j(t) = c_j + A_j w(t) sin(2π k_j t / T), with the window w = sin^4(π t / T), so it starts and
ends at rest with zero velocity and acceleration. Points every 0.1 s carry exact
positions, velocities and accelerations (the controller interpolates quintics between them).
Amplitudes are scaled so |qd| stays under 40 % of each joint's velocity limit, |qdd| under
`DEMO_MAX_ACCELERATION`, and positions 0.1 rad inside the position limits.

The excitation motion (--excite, for `rnea-validate --identify`) moves every joint at once
about the same centre along a finite Fourier series of 6 harmonics whose period is the
duration, optimised for the condition number of the identification's regressor (every link's
inertial parameters, armature and friction) within the joints' position limits (0.1 rad
inside), 40 % of their velocity limits and `EXCITE_MAX_ACCELERATION`, starting and ending at
rest (`analysis/excitation.py`; it takes 0.5-4 s before sending).

With --via-action it goes as a FollowJointTrajectory goal instead, and the result code is
printed (exit 0 on SUCCESSFUL).
The trajectory is published once, with header.stamp zero (start now), once --subscribers
subscriptions (default 1, the controller) and every subscription the graph shows on the topic
have matched, so that a recorder started for the run holds it: `ros2 bag record` subscribes
only after it has discovered this publisher (it polls the graph every 100 ms), so a run to be
recorded passes `--subscribers 2`, as demo.launch.py does. With --wait-active, only once the
controller's lifecycle state is `active` (lifecycle_msgs GetState on `<controller>/get_state`),
as a launch file needs. Topic and service names are
relative: `--ros-args -r __ns:=/arm1` (what launch's `namespace` passes) moves them all.
"""
import argparse
import csv
from dataclasses import dataclass
from functools import partial
import math
from pathlib import Path
import sys
import time

import numpy as np
import yaml

from rnea_controller.errors import TrajectoryError
from rnea_controller.interrupt import interrupt_once

DEMO_AMPLITUDES = (0.5, 0.35, 0.5, 0.6, 0.7, 0.9)  # [rad], then 0.6 rad for further joints
DEMO_FREQUENCIES = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4)  # [Hz] before rounding to whole periods
DEMO_MAX_ACCELERATION = 3.0  # [rad/s^2]
DEMO_STEP = 0.1  # [s] between points
VELOCITY_SHARE = 0.4  # of the URDF velocity limit
LIMIT_MARGIN = 0.1  # [rad] inside the position limits


@dataclass(frozen=True)
class Waypoints:
    """A trajectory as arrays: times (N,) [s], positions (N, n); velocities and accelerations
    (N, n) or None."""

    joint_names: tuple
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None = None
    accelerations: np.ndarray | None = None


def check(waypoints, where):
    """Check names, shapes, times and finiteness; raise TrajectoryError naming `where`."""
    names = waypoints.joint_names
    if not names or len(set(names)) != len(names):
        raise TrajectoryError(f'{where}: joint names must be non-empty and unique, got {names}')
    if len(waypoints.times) == 0:
        raise TrajectoryError(f'{where}: no points')
    if waypoints.times[0] <= 0 or np.any(np.diff(waypoints.times) <= 0):
        raise TrajectoryError(f'{where}: times must be > 0 and strictly increasing, got '
                              f'{waypoints.times.tolist()}')
    for what in ('positions', 'velocities', 'accelerations'):
        values = getattr(waypoints, what)
        if values is not None and not np.all(np.isfinite(values)):
            row = int(np.argwhere(~np.isfinite(values))[0][0])
            raise TrajectoryError(f'{where}: point {row}: {what} are not finite')
    if waypoints.accelerations is not None and waypoints.velocities is None:
        raise TrajectoryError(f'{where}: accelerations need velocities too')
    return waypoints


def _yaml_points(text, path):
    """The YAML document and the line of each point, for messages."""
    try:
        data = yaml.safe_load(text)
        node = yaml.compose(text)
    except yaml.YAMLError as error:
        raise TrajectoryError(f'{path}: not valid YAML: {error}') from error
    if not isinstance(data, dict) or 'joint_names' not in data or 'points' not in data:
        raise TrajectoryError(f"{path}: expected a mapping with 'joint_names' and 'points'")
    points_node = next(v for k, v in node.value if k.value == 'points')
    lines = [item.start_mark.line + 1 for item in getattr(points_node, 'value', [])]
    if not isinstance(data['points'], list) or not data['points']:
        raise TrajectoryError(f"{path}: 'points' must be a non-empty list")
    return data, lines


def _yaml_vector(point, key, n, where, required):
    value = point.get(key)
    if value is None:
        if required:
            raise TrajectoryError(f"{where}: missing '{key}'")
        return None
    try:
        vector = [float(v) for v in value]
    except (TypeError, ValueError) as error:
        raise TrajectoryError(f"{where}: '{key}' must be a list of numbers, got {value!r}") \
            from error
    if len(vector) != n:
        raise TrajectoryError(f"{where}: '{key}' has {len(vector)} values for {n} joints")
    return vector


def load_yaml(path):
    """Waypoints from a YAML file (format in the module docstring)."""
    data, lines = _yaml_points(Path(path).read_text(encoding='utf-8'), path)
    names = tuple(str(name) for name in data['joint_names'] or ())
    columns = {'time': [], 'positions': [], 'velocities': [], 'accelerations': []}
    for k, point in enumerate(data['points']):
        where = f'{path}, point {k} (line {lines[k]})'
        if not isinstance(point, dict) or not isinstance(point.get('time'), (int, float)):
            raise TrajectoryError(f"{where}: expected a mapping with a numeric 'time'")
        columns['time'].append(float(point['time']))
        for key in ('positions', 'velocities', 'accelerations'):
            columns[key].append(_yaml_vector(point, key, len(names), where, key == 'positions'))
    return check(_waypoints(names, columns, path), path)


def _waypoints(names, columns, path):
    """Waypoints from per-point lists; optional columns must be given at all points or none."""
    optional = {}
    for key in ('velocities', 'accelerations'):
        given = [value is not None for value in columns[key]]
        if any(given) and not all(given):
            raise TrajectoryError(f'{path}: {key} given at point {given.index(True)} but not at '
                                  f'point {given.index(False)}: give them at all points or none')
        optional[key] = np.array(columns[key], dtype=float) if all(given) else None
    return Waypoints(names, np.array(columns['time']), np.array(columns['positions']),
                     optional['velocities'], optional['accelerations'])


def _csv_header(header, path, line):
    """Joint names and column indices {(kind, joint): column} from the CSV header row."""
    header = [cell.strip() for cell in header]
    if not header or header[0] != 'time':
        raise TrajectoryError(f"{path}, line {line}: the first column must be 'time', got "
                              f'{header[:1]}')
    names = [cell for cell in header[1:] if '.' not in cell]
    index = {}
    for column, cell in enumerate(header[1:], start=1):
        joint, _, kind = cell.partition('.')
        if kind not in ('', 'velocity', 'acceleration') or joint not in names:
            raise TrajectoryError(f"{path}, line {line}: column {column + 1} '{cell}': expected a "
                                  f'joint name, <joint>.velocity or <joint>.acceleration')
        index[(kind or 'position', joint)] = column
    return tuple(names), index


def load_csv(path):
    """Waypoints from a CSV file (format in the module docstring; '#' lines are comments)."""
    with open(path, newline='', encoding='utf-8') as file:
        rows = [(line, row) for line, row in enumerate(csv.reader(file), start=1)
                if row and not row[0].lstrip().startswith('#')]
    if not rows:
        raise TrajectoryError(f'{path}: empty file')
    names, index = _csv_header(rows[0][1], path, rows[0][0])
    kinds = {kind for kind, _ in index}
    columns = {'time': [], 'positions': [], 'velocities': [], 'accelerations': []}
    for line, row in rows[1:]:
        if len(row) != len(rows[0][1]):
            raise TrajectoryError(f'{path}, line {line}: {len(row)} values, the header has '
                                  f'{len(rows[0][1])}')
        numbers = [_number(cell, path, line, rows[0][1][c]) for c, cell in enumerate(row)]
        columns['time'].append(numbers[0])
        for kind, key in (('position', 'positions'), ('velocity', 'velocities'),
                          ('acceleration', 'accelerations')):
            columns[key].append([numbers[index[(kind, j)]] for j in names]
                                if kind in kinds else None)
    return check(_waypoints(names, columns, path), path)


def _number(cell, path, line, column):
    try:
        return float(cell)
    except ValueError:
        raise TrajectoryError(f"{path}, line {line}, column '{column.strip()}': "
                              f'{cell!r} is not a number') from None


def load_waypoints(path):
    """Waypoints from a .yaml/.yml or .csv file."""
    suffix = Path(path).suffix.lower()
    if not Path(path).is_file():
        raise TrajectoryError(f'{path}: no such file')
    if suffix in ('.yaml', '.yml'):
        return load_yaml(path)
    if suffix == '.csv':
        return load_csv(path)
    raise TrajectoryError(f'{path}: unknown file type {suffix!r} (use .yaml, .yml or .csv)')


def _demo_profile(t, T, k):
    """Shape w(t) sin(2π k t/T) with w = sin^4(π t/T), and its first two time derivatives."""
    a, b = math.pi / T, 2 * math.pi * k / T
    s, c = np.sin(a * t), np.cos(a * t)
    w, wd, wdd = s**4, 4 * a * s**3 * c, a**2 * (12 * s**2 * c**2 - 4 * s**4)
    g, gd, gdd = np.sin(b * t), b * np.cos(b * t), -b**2 * np.sin(b * t)
    return w * g, wd * g + w * gd, wdd * g + 2 * wd * gd + w * gdd


def demo_motion(joint_names, centre, velocity_limits, position_limits, duration=8.0):
    """The demo Waypoints about `centre` [rad] lasting `duration` [s] (see module docstring)."""
    periods = [max(1, round(DEMO_FREQUENCIES[j % 6] * duration)) for j in range(len(joint_names))]
    profiles = [partial(_demo_profile, T=duration, k=k) for k in periods]
    amplitudes = [DEMO_AMPLITUDES[j] if j < len(DEMO_AMPLITUDES) else 0.6
                  for j in range(len(joint_names))]
    return _scaled_motion(joint_names, centre, velocity_limits, position_limits, duration,
                          profiles, amplitudes, DEMO_MAX_ACCELERATION)


def excitation_motion(model, centre, duration=12.0):
    """The identification Waypoints of `model` (RobotModel) about `centre` [rad], one period
    of `duration` [s] (see module docstring and `analysis.excitation`)."""
    from rnea_controller.analysis.excitation import excitation
    motion = excitation(model, np.asarray(centre, dtype=float), duration)
    times = np.arange(1, int(round(duration / DEMO_STEP)) + 1) * DEMO_STEP
    p, v, a = motion(times)
    q, qd, qdd = np.asarray(centre, dtype=float) + p, v, a
    q[-1], qd[-1], qdd[-1] = centre, 0.0, 0.0  # exactly at rest (a whole period)
    return Waypoints(tuple(model.joint_names), times, q, qd, qdd)


def _scaled_motion(joint_names, centre, velocity_limits, position_limits, duration, profiles,
                   amplitudes, max_acceleration):
    """Waypoints every DEMO_STEP of q_j = c_j + A_j p_j(t), each A_j the largest within
    `amplitudes`, the position limits (less LIMIT_MARGIN), VELOCITY_SHARE of the velocity
    limit and `max_acceleration`; `profiles[j](t)` gives (p, p', p'')."""
    times = np.arange(1, int(round(duration / DEMO_STEP)) + 1) * DEMO_STEP
    fine = np.linspace(0.0, duration, 4001)
    n = len(joint_names)
    q, qd, qdd = (np.empty((len(times), n)) for _ in range(3))
    for j in range(n):
        p, v, acc = profiles[j](fine)
        room = min(centre[j] - position_limits[j][0], position_limits[j][1] - centre[j])
        amplitude = min(amplitudes[j], max(0.0, room - LIMIT_MARGIN) / np.abs(p).max(),
                        VELOCITY_SHARE * velocity_limits[j] / np.abs(v).max(),
                        max_acceleration / np.abs(acc).max())
        p, v, acc = profiles[j](times)
        q[:, j], qd[:, j], qdd[:, j] = centre[j] + amplitude * p, amplitude * v, amplitude * acc
    q[-1], qd[-1], qdd[-1] = centre, 0.0, 0.0  # exactly at rest (the window ends at 0)
    return Waypoints(tuple(joint_names), times, q, qd, qdd)


def to_message(waypoints):
    """trajectory_msgs/JointTrajectory with header.stamp zero (start now)."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    msg = JointTrajectory(joint_names=list(waypoints.joint_names))
    for k, t in enumerate(waypoints.times):
        point = JointTrajectoryPoint(positions=waypoints.positions[k].tolist())
        if waypoints.velocities is not None:
            point.velocities = waypoints.velocities[k].tolist()
        if waypoints.accelerations is not None:
            point.accelerations = waypoints.accelerations[k].tolist()
        nanoseconds = int(round(t * 1e9))
        point.time_from_start = Duration(sec=nanoseconds // 10**9, nanosec=nanoseconds % 10**9)
        msg.points.append(point)
    return msg


def parse_args(argv):
    parser = argparse.ArgumentParser(prog='rnea-send-trajectory', description=__doc__.split(
        '\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('file', nargs='?', help='waypoints, .yaml/.yml or .csv')
    source.add_argument('--demo', action='store_true', help='the built-in demo motion')
    source.add_argument('--excite', action='store_true', help='the identification motion '
                        "(every joint at once, optimised for the identification's condition "
                        'number)')
    parser.add_argument('--duration', type=float, help='length of the demo (default 8 s) or '
                        'of the excitation (12 s) [s]')
    parser.add_argument('--urdf', help='model for the demo joints and limits (default: the '
                        'bundled arm)')
    parser.add_argument('--topic', default='rnea_controller/joint_trajectory')
    parser.add_argument('--joint-states', default='joint_states',
                        help='where the demo reads the measured position')
    parser.add_argument('--reference', default='rnea_controller/reference',
                        help="where the demo reads the controller's desired position (first)")
    parser.add_argument('--controller', default='rnea_controller',
                        help='node name of the controller (its lifecycle services)')
    parser.add_argument('--wait-active', action='store_true',
                        help="send only once the controller's lifecycle state is active")
    parser.add_argument('--via-action', action='store_true',
                        help='send it as a FollowJointTrajectory goal to '
                             '<controller>/follow_joint_trajectory and wait for the result code')
    parser.add_argument('--subscribers', type=int, default=1, metavar='N',
                        help='send only once N subscribers are matched: the controller, and a '
                             'recorder started for it (ros2 bag record subscribes when it next '
                             'polls, after this publisher appears): 2')
    parser.add_argument('--wait', type=float, default=10.0,
                        help='seconds to wait for the controller, a subscriber and a joint '
                             'state [s]')
    return parser.parse_args(argv)


def demo_centre(joint_names, *messages):
    """Position [rad] of each joint from the first JointState message that has it, or None.

    Pass the controller's reference before the measured joint states: starting the motion at
    the desired position avoids a step where the arm sags under an unknown load.
    """
    centre = []
    for name in joint_names:
        found = [m.position[list(m.name).index(name)] for m in messages
                 if m is not None and name in m.name]
        if not found:
            return None
        centre.append(found[0])
    return np.array(centre)


def demo_waypoints(node, args):
    """The demo (or, with --excite, the excitation) motion about the current desired (else
    measured) position of the model."""
    from rnea_controller.control.law import default_joints
    from rnea_controller.dynamics.model import default_urdf_path, RobotModel
    model = RobotModel.from_urdf_file(args.urdf or default_urdf_path())
    reference = wait_for_message(node, args.reference, min(args.wait, 2.0))
    state = wait_for_message(node, args.joint_states, args.wait)
    if args.excite:
        return excitation_motion(model, _centre(model.joint_names, args, reference, state),
                                 args.duration or 12.0)
    joints = default_joints(model)  # the controller's: a gripper's fingers left out
    return controlled_demo_motion(model, joints, _centre(joints, args, reference, state),
                                  args.duration or 8.0)


def _centre(joints, args, *messages):
    centre = demo_centre(joints, *messages)
    if centre is None:
        raise TrajectoryError(f'no position of joints {list(joints)} on {args.reference} or '
                              f'{args.joint_states} within {args.wait} s: the demo starts from '
                              'the current position')
    return centre


def controlled_demo_motion(model, joints, centre, duration=8.0):
    """The demo Waypoints of `joints` of `model` (RobotModel) about `centre` [rad], within
    those joints' URDF limits (`demo_motion`)."""
    index = [model.joint_index(name) for name in joints]
    return demo_motion(tuple(joints), centre, model.velocity_limits[index],
                       model.position_limits[index], duration)


def wait_for_message(node, topic, timeout):
    """The first sensor_msgs/JointState on `topic` within `timeout` [s], or None."""
    import rclpy
    from sensor_msgs.msg import JointState
    received = []
    subscription = node.create_subscription(JointState, topic, received.append, 10)
    deadline = time.monotonic() + timeout
    while not received and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    node.destroy_subscription(subscription)
    return received[0] if received else None


GRAPH_GRACE = 2.0  # [s] for subscribers the graph shows to match, once enough have
ACK_WAIT = 5.0  # [s] at most for the subscribers to acknowledge the trajectory


def wait_for_subscribers(node, publisher, count, wait, grace=GRAPH_GRACE):
    """Wait until `publisher` has matched at least `count` subscriptions (at most `wait` [s]),
    then until it has matched every one the graph shows on its topic (at most `grace` [s] more:
    a subscriber discovered but not yet matched would miss a message published now); the
    number matched."""
    def poll(enough, seconds):
        deadline = time.monotonic() + seconds
        while not enough(matched := publisher.get_subscription_count()):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        return matched
    matched = poll(lambda m: m >= count, wait)
    if matched < count:
        return matched
    return poll(lambda m: m >= node.count_subscribers(publisher.topic_name), grace)


def subscriber_names(node, topic):
    """The nodes subscribed to `topic` as the graph shows them: '/ns/name, ...'."""
    return ', '.join(sorted(f'{info.node_namespace.rstrip("/")}/{info.node_name}'
                            for info in node.get_subscriptions_info_by_topic(topic))) or 'none'


def publish(node, topic, msg, wait, subscribers=1):
    """Publish msg once `subscribers` subscriptions are matched (the controller, and a recorder
    that was started for it: 2) and every one the graph shows; then wait until each reliable
    subscriber has acknowledged it. Returns the number matched at the deadline `wait` [s] when
    it is below `subscribers` (nothing sent), else None.

    A recorder that discovers topics by polling, as `ros2 bag record` does (every 100 ms, only
    topics that have a publisher), subscribes only after this publisher exists: publishing as
    soon as the controller alone matched left the trajectory out of its bag (issue 31)."""
    from rclpy.duration import Duration
    from trajectory_msgs.msg import JointTrajectory
    publisher = node.create_publisher(JointTrajectory, topic, 10)
    matched = wait_for_subscribers(node, publisher, subscribers, wait)
    if matched < subscribers:
        return matched
    publisher.publish(msg)
    # delivered before we exit: each reliable subscriber acknowledges (not a fixed wait)
    publisher.wait_for_all_acked(Duration(seconds=ACK_WAIT))
    return None


def send_goal(node, controller, msg, wait):
    """Send msg as a FollowJointTrajectory goal; (error_code, error_string) of its result.

    TrajectoryError when no server within `wait` [s] or the goal is rejected (the reason is in
    the controller's log).
    """
    from control_msgs.action import FollowJointTrajectory
    import rclpy
    from rclpy.action import ActionClient
    client = ActionClient(node, FollowJointTrajectory, f'{controller}/follow_joint_trajectory')
    if not client.wait_for_server(timeout_sec=wait):
        raise TrajectoryError(f'no action server {controller}/follow_joint_trajectory '
                              f'within {wait:g} s')
    future = client.send_goal_async(FollowJointTrajectory.Goal(trajectory=msg))
    rclpy.spin_until_future_complete(node, future)
    if not future.result().accepted:
        raise TrajectoryError('the goal was rejected (its reason is in the controller log)')
    result = future.result().get_result_async()
    rclpy.spin_until_future_complete(node, result)
    return result.result().result.error_code, result.result().result.error_string


def wait_until_active(node, controller, timeout):
    """Return once `<controller>/get_state` says active; TrajectoryError after `timeout` [s]."""
    from lifecycle_msgs.msg import State
    from lifecycle_msgs.srv import GetState
    import rclpy
    client = node.create_client(GetState, f'{controller}/get_state')
    name = node.resolve_service_name(f'{controller}/get_state').rsplit('/', 1)[0]
    deadline = time.monotonic() + timeout
    label = 'no get_state service'
    try:
        while time.monotonic() < deadline:
            if client.wait_for_service(timeout_sec=0.2):
                future = client.call_async(GetState.Request())
                rclpy.spin_until_future_complete(node, future, timeout_sec=1.0)
                if future.done() and future.result() is not None:
                    state = future.result().current_state
                    if state.id == State.PRIMARY_STATE_ACTIVE:
                        return
                    label = state.label
                time.sleep(0.1)
    finally:
        node.destroy_client(client)
    raise TrajectoryError(f'the controller {name} is not active '
                          f'within {timeout:g} s (its state: {label}); is it running?')


def main(argv=None):
    """Console script `rnea-send-trajectory`; exit 0 when sent, 1 on a bad file or no listener,
    130 on Ctrl-C.

    ROS arguments (`--ros-args ...`, which launch always appends) go to rclpy, the rest to
    argparse.
    """
    from rnea_controller.ros import dds
    dds.use_profiles('quick_acks.xml')  # acknowledged in ~50 ms, not ~3 s (the file's note)
    import rclpy
    from rclpy.signals import SignalHandlerOptions
    from rclpy.utilities import remove_ros_args
    argv = sys.argv if argv is None else ['rnea-send-trajectory', *argv]
    args = parse_args(remove_ros_args(argv)[1:])
    try:
        waypoints = None if args.demo or args.excite else load_waypoints(args.file)
    except TrajectoryError as error:
        print(f'rnea-send-trajectory: {error}', file=sys.stderr)
        return 1
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    interrupt_once()  # Ctrl-C: KeyboardInterrupt once; rclpy's context stays valid meanwhile
    node = rclpy.create_node('rnea_send_trajectory')
    try:
        if args.wait_active:
            wait_until_active(node, args.controller, args.wait)
        waypoints = waypoints or demo_waypoints(node, args)
        if args.via_action:
            code, text = send_goal(node, args.controller, to_message(waypoints), args.wait)
            print(f'result: error_code {code} {text!r}')
            return 0 if code == 0 else 1
        matched = publish(node, args.topic, to_message(waypoints), args.wait, args.subscribers)
        if matched is not None:
            topic = node.resolve_topic_name(args.topic)
            if matched == 0:
                raise TrajectoryError(f'no subscriber on {topic} within {args.wait} s '
                                      '(is the controller running?)')
            raise TrajectoryError(f'{matched} of {args.subscribers} subscribers on {topic} '
                                  f'within {args.wait} s ({subscriber_names(node, topic)}): '
                                  'is the recorder running? Nothing sent')
        print(f'sent {len(waypoints.times)} points for {len(waypoints.joint_names)} joints, '
              f'{waypoints.times[-1]:.2f} s, on {node.resolve_topic_name(args.topic)}')
        return 0
    except TrajectoryError as error:
        print(f'rnea-send-trajectory: {error}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: the shell's code for it
        print('rnea-send-trajectory: interrupted', file=sys.stderr)
        return 130
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    raise SystemExit(main())
