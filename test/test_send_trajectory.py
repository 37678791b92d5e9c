"""rnea-send-trajectory: waypoint files, the demo motion, and the real command over DDS."""
import subprocess

from conftest import console_script, wait_for
import numpy as np
import pytest
import rclpy
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from rnea_controller import default_urdf_path, RobotModel
from rnea_controller.errors import TrajectoryError
from rnea_controller.ros.realtime import BackgroundSpinner
from rnea_controller.sim.node import HOME
from rnea_controller.tools.send_trajectory import (
    _demo_profile,
    demo_motion,
    excitation_motion,
    load_waypoints,
    to_message,
)

YAML = """\
joint_names: [shoulder_pan_joint, elbow_joint]
points:
  - {time: 1.0, positions: [0.1, 1.2], velocities: [0.0, 0.5]}
  - time: 2.5
    positions: [0.2, 1.0]
    velocities: [0.0, 0.0]
"""
CSV = """\
# a comment
time,shoulder_pan_joint,elbow_joint,shoulder_pan_joint.velocity,elbow_joint.velocity
1.0,0.1,1.2,0.0,0.5
2.5,0.2,1.0,0.0,0.0
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize('name, text', [('w.yaml', YAML), ('w.csv', CSV)])
def test_yaml_and_csv_give_the_same_waypoints(tmp_path, name, text):
    waypoints = load_waypoints(write(tmp_path, name, text))
    assert waypoints.joint_names == ('shoulder_pan_joint', 'elbow_joint')
    np.testing.assert_array_equal(waypoints.times, [1.0, 2.5])
    np.testing.assert_array_equal(waypoints.positions, [[0.1, 1.2], [0.2, 1.0]])
    np.testing.assert_array_equal(waypoints.velocities, [[0.0, 0.5], [0.0, 0.0]])
    assert waypoints.accelerations is None
    msg = to_message(waypoints)
    assert msg.points[1].time_from_start.sec == 2 and msg.points[1].time_from_start.nanosec == 5e8
    assert list(msg.points[0].velocities) == [0.0, 0.5] and list(msg.points[0].accelerations) == []


@pytest.mark.parametrize('name, text, message', [
    ('bad.yaml', YAML.replace('[0.2, 1.0]', '[0.2]'),
     r"bad.yaml, point 1 \(line 4\): 'positions' has 1 values for 2 joints"),
    ('bad.yaml', YAML.replace('time: 2.5', 'time: 0.5'), 'strictly increasing'),
    ('bad.yaml', YAML.replace('1.2]', 'x]'), "'positions' must be a list of numbers"),
    ('bad.yaml', 'points: []', "expected a mapping with 'joint_names' and 'points'"),
    ('bad.yaml', 'joint_names: [a\n', 'not valid YAML'),
    ('bad.yaml', YAML.replace('    velocities: [0.0, 0.0]\n', ''),
     'velocities given at point 0 but not at point 1'),
    ('bad.csv', CSV.replace('2.5,0.2', '2.5,abc'),
     r"bad.csv, line 4, column 'shoulder_pan_joint': 'abc' is not a number"),
    ('bad.csv', CSV.replace('1.0,0.1,1.2,0.0,0.5', '1.0,0.1'), 'line 3: 2 values, the header'),
    ('bad.csv', CSV.replace('time,', 't,'), "line 2: the first column must be 'time'"),
    ('bad.csv', CSV.replace('elbow_joint.velocity', 'elbow_joint.jerk'),
     "column 5 'elbow_joint.jerk'"),
    ('bad.csv', CSV.replace('1.0,0.1,1.2', '1.0,nan,1.2'), 'point 0: positions are not finite'),
    ('bad.txt', CSV, "unknown file type '.txt'"),
])
def test_bad_files_say_where_and_what(tmp_path, name, text, message):
    with pytest.raises(TrajectoryError, match=message):
        load_waypoints(write(tmp_path, name, text))


def test_missing_file():
    with pytest.raises(TrajectoryError, match='no such file'):
        load_waypoints('/nonexistent/w.yaml')


def test_profile_derivatives_are_consistent():
    t = np.linspace(0.0, 4.0, 40001)
    p, v, a = _demo_profile(t, 4.0, 2)
    np.testing.assert_allclose(np.gradient(p, t), v, atol=1e-5)
    np.testing.assert_allclose(np.gradient(v, t), a, atol=1e-4)


@pytest.mark.parametrize('duration', [2.5, 8.0, 30.0])
def test_demo_motion_moves_every_joint_within_limits_from_rest_to_rest(duration):
    model = RobotModel.from_urdf_file(default_urdf_path())
    centre = np.array(HOME)
    w = demo_motion(model.joint_names, centre, model.velocity_limits, model.position_limits,
                    duration)
    assert w.times[0] > 0 and w.times[-1] == pytest.approx(duration)
    assert np.all(np.ptp(w.positions, axis=0) > 0.1)  # every joint moves
    assert np.all(np.abs(w.velocities) <= 0.4 * model.velocity_limits + 1e-12)
    assert np.all(w.positions >= model.position_limits[:, 0])
    assert np.all(w.positions <= model.position_limits[:, 1])
    np.testing.assert_array_equal(w.positions[-1], centre)
    np.testing.assert_array_equal(w.velocities[-1], 0.0)
    np.testing.assert_array_equal(w.accelerations[-1], 0.0)
    first = _demo_profile(np.array([0.0]), duration, 1)
    assert all(abs(x[0]) < 1e-12 for x in first)  # starts at rest, zero acceleration


@pytest.fixture
def listener():
    """A node in this process: receives trajectories, publishes a joint state at 100 Hz."""
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node('trajectory_listener', context=context)
    received = []
    node.create_subscription(JointTrajectory, '/rnea_controller/joint_trajectory',
                             received.append, 10)
    states = node.create_publisher(JointState, '/joint_states', 10)
    state = JointState(name=list(RobotModel.from_urdf_file(default_urdf_path()).joint_names),
                       position=list(HOME), velocity=[0.0] * 6)
    node.create_timer(0.01, lambda: states.publish(state))
    spinner = BackgroundSpinner(node, 'test client', 'events', 0.05)
    yield received
    spinner.stop()
    node.destroy_node()
    rclpy.shutdown(context=context)


@pytest.mark.integration
def test_sends_a_file_and_the_demo_over_dds(tmp_path, listener):
    path = write(tmp_path, 'w.yaml', YAML)
    done = subprocess.run([console_script('rnea-send-trajectory'), str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert wait_for(lambda: len(listener) == 1, 5.0)
    msg = listener[0]
    assert list(msg.joint_names) == ['shoulder_pan_joint', 'elbow_joint']
    assert msg.header.stamp.sec == 0 and msg.header.stamp.nanosec == 0  # start now
    assert [list(p.positions) for p in msg.points] == [[0.1, 1.2], [0.2, 1.0]]
    done = subprocess.run([console_script('rnea-send-trajectory'), '--demo', '--duration', '3'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert wait_for(lambda: len(listener) == 2, 5.0)
    demo = listener[1]
    assert len(demo.points) == 30 and len(demo.joint_names) == 6
    np.testing.assert_allclose(demo.points[-1].positions, HOME)  # about the current position
    done = subprocess.run([console_script('rnea-send-trajectory'), '--excite', '--duration', '6'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert wait_for(lambda: len(listener) == 3, 5.0)
    sent = np.array([p.positions for p in listener[2].points])
    model = RobotModel.from_urdf_file(default_urdf_path())
    np.testing.assert_allclose(sent, excitation_motion(model, np.array(HOME), 6.0).positions,
                               atol=1e-12)  # the same optimised motion: deterministic


@pytest.mark.integration
def test_bad_file_and_missing_listener_exit_1_with_a_message(tmp_path):
    bad = write(tmp_path, 'bad.csv', CSV.replace('2.5,0.2', '2.5,abc'))
    done = subprocess.run([console_script('rnea-send-trajectory'), str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "'abc' is not a number" in done.stderr
    assert 'Traceback' not in done.stderr
    good = write(tmp_path, 'good.yaml', YAML)
    done = subprocess.run([console_script('rnea-send-trajectory'), str(good), '--wait', '0.5',
                           '--topic', '/nobody/listens'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and 'no subscriber on /nobody/listens' in done.stderr


@pytest.mark.integration
def test_ros_arguments_as_launch_appends_them_move_the_topic(tmp_path):
    good = write(tmp_path, 'good.yaml', YAML)
    done = subprocess.run([console_script('rnea-send-trajectory'), str(good), '--wait', '0.5',
                           '--ros-args', '-r', '__ns:=/nobody', '-r', '__node:=sender'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert 'no subscriber on /nobody/rnea_controller/joint_trajectory' in done.stderr


@pytest.fixture
def lifecycle_controller():
    """A lifecycle node named rnea_controller under /lc (unconfigured), spun in a thread."""
    from rclpy.lifecycle import LifecycleNode
    context = rclpy.Context()
    rclpy.init(context=context)
    node = LifecycleNode('rnea_controller', namespace='/lc', context=context)
    received = []
    node.create_subscription(JointTrajectory, 'rnea_controller/joint_trajectory',
                             received.append, 10)
    spinner = BackgroundSpinner(node, 'test client', 'events', 0.05)
    yield node, received
    spinner.stop()
    node.destroy_node()
    rclpy.shutdown(context=context)


@pytest.mark.integration
def test_wait_active_sends_only_to_an_active_controller(tmp_path, lifecycle_controller):
    node, received = lifecycle_controller
    good = write(tmp_path, 'good.yaml', YAML)
    command = [console_script('rnea-send-trajectory'), str(good), '--wait-active', '--wait',
               '15', '--ros-args', '-r', '__ns:=/lc']  # discovery can take seconds when busy
    unconfigured = command[:4] + ['8'] + command[5:]  # it waits all of it: the suite's time
    done = subprocess.run(unconfigured, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and 'its state: unconfigured' in done.stderr, done.stderr
    assert received == []
    node.trigger_configure()
    node.trigger_activate()
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert wait_for(lambda: len(received) == 1, 5.0)


@pytest.mark.integration
def test_wait_active_without_a_controller_says_so():
    done = subprocess.run([console_script('rnea-send-trajectory'), '--demo', '--wait-active',
                           '--wait', '1', '--ros-args', '-r', '__ns:=/nobody'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert 'controller /nobody/rnea_controller is not active within 1 s (its state: no ' \
           'get_state service)' in done.stderr, done.stderr
