"""A description nobody here wrote: the Panda with its hand, as franka_description and MoveIt
publish it (seven arm joints, two fingers, one of them a mimic joint), drives the real node.

`rnea-sim` (MuJoCo, which keeps the mimic finger on its leader by an equality constraint) plays
the arm with the same URDF as published (the plant leaves out its geometry, whose package://
meshes MuJoCo cannot open: it has no contacts). The controller reads the URDF as published,
controls the seven arm joints only, and takes the fingers, which it does not command, at their
measured state. Oracle: the simulated arm follows the trajectory sent, and each command has
seven values, also with `joints` unset: its default leaves out mimic joints and their leaders
(a gripper's fingers).

Real time (issue 31): the simulator steps against the wall clock, so a host that starves it
and the controller moves the arm under stale commands. The controller's state_timeout is 0.5 s
(a stall of the simulator then does not drop the trajectory: the other DDS tests' setting); the
settled error is read once the arm has settled, not at a fixed time; and the tracking bound,
which a starved run cannot hold, is asserted with starvation.check: a failure on a run whose
processes waited over a tenth of it for a CPU is reported as such (skipped, with the figures).
"""

from conftest import arm_and_controller, robot_data_urdf, wait_for
from control_msgs.msg import JointTrajectoryControllerState
import numpy as np
import pytest
import rclpy
from rclpy.duration import Duration
from sensor_msgs.msg import JointState
from starvation import check, CpuWait
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from rnea_controller.ros.realtime import BackgroundSpinner

pytestmark = pytest.mark.integration

PANDA = robot_data_urdf('panda_description/urdf/panda.urdf')
ARM = [f'panda_joint{k}' for k in range(1, 8)]
READY = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]  # franka's "ready" pose [rad]
FINGERS = [0.02, 0.02]  # [m]
MOVE = np.array([0.3, 0.2, -0.3, 0.3, 0.3, -0.3, 0.3])  # [rad] in DURATION
DURATION = 2.0  # [s]


def yaml_list(values):
    return '[' + ', '.join(repr(v) for v in values) + ']'


def parameters(joints):
    """A ROS parameters YAML file's first lines, with `joints` if not None."""
    lines = ['/**:', '  ros__parameters:', '    autostart: true']
    return '\n'.join(lines + ([f'    joints: {yaml_list(joints)}'] if joints else [])) + '\n'


class Recorder:
    """The test's node: commands, controller states and joint states; sends trajectories."""

    def __init__(self):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node('panda_test', context=self.context)
        self.commands, self.errors, self.states = [], [], []
        self.node.create_subscription(Float64MultiArray, '/effort_controller/commands',
                                      lambda m: self.commands.append(np.array(m.data)), 10_000)
        self.node.create_subscription(JointTrajectoryControllerState,
                                      '/rnea_controller/controller_state', self.errors.append,
                                      1000)
        self.node.create_subscription(JointState, '/joint_states', self.states.append, 100)
        self.trajectory = self.node.create_publisher(JointTrajectory,
                                                     '/rnea_controller/joint_trajectory', 10)
        self.spinner = BackgroundSpinner(self.node, 'panda test', 'events', 0.05)

    def close(self):
        self.spinner.stop()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.fixture(params=[ARM, None], ids=['arm joints', 'joints unset'])
def panda(request, tmp_path):
    """rnea-sim with the Panda and hand, and rnea-controller on the same URDF as published,
    with `joints` the arm's or unset."""
    sim_urdf = PANDA  # as published: package:// meshes, which the plant leaves out
    (tmp_path / 'sim.yaml').write_text(parameters(ARM) + '    initial_positions: '
                                       f'{yaml_list(READY + FINGERS)}\n')
    (tmp_path / 'controller.yaml').write_text(parameters(request.param))
    with arm_and_controller(
            tmp_path, ['--ros-args', '-p', f'urdf_file:={sim_urdf}', '--params-file',
                       str(tmp_path / 'sim.yaml')],
            ['--urdf', str(PANDA), '--ros-args', '--params-file',
             str(tmp_path / 'controller.yaml'), '-p', 'state_timeout:=0.5'], Recorder) as setup:
        yield setup


def test_panda_with_its_hand_configures_activates_and_tracks(panda):
    recorder, processes, sim, controller = panda
    logs = lambda: processes.output(controller) + processes.output(sim)  # noqa: E731
    assert wait_for(lambda: len(recorder.commands) > 100, 60.0), logs()
    assert 'configured: computed_torque on ' + ', '.join(ARM) in processes.output(controller)
    assert wait_for(lambda: recorder.trajectory.get_subscription_count() > 0, 10.0)
    assert wait_for(lambda: recorder.states, 10.0)
    names = list(recorder.states[-1].name)
    assert names[7:] == ['panda_finger_joint1', 'panda_finger_joint2']  # the sim's states
    goal = np.array(READY) + MOVE
    meter = CpuWait({'rnea-sim': sim, 'rnea-controller': controller})
    recorder.trajectory.publish(JointTrajectory(joint_names=ARM, points=[JointTrajectoryPoint(
        positions=list(goal), velocities=[0.0] * 7,
        time_from_start=Duration(seconds=DURATION).to_msg())]))
    recorder.errors.clear()
    recorder.commands.clear()
    # on a starved host the simulator catches up in bursts, its states then look like jumps
    # to the node's gate and it goes stale and drops the trajectory (issue 29's case): said so
    check(wait_for(lambda: len(recorder.errors) > 0 and np.allclose(
        recorder.errors[-1].reference.positions, goal, atol=1e-9), 20.0),
        f'the reference never reached the goal: {logs()[-1500:]}', meter)
    moving = [np.array(m.error.positions) for m in recorder.errors]
    rms = np.sqrt(np.mean(np.square(moving), axis=0))
    settled = lambda: np.array(recorder.errors[-1].feedback.positions) - goal  # noqa: E731
    wait_for(lambda: np.all(np.abs(settled()) < 2e-3), 10.0)
    assert {len(c) for c in recorder.commands} == {7}
    assert list(recorder.errors[-1].joint_names) == ARM
    print(f'{len(moving)} controller states while moving: RMS error {rms} rad; settled at '
          f'{settled()} rad from the goal; {meter.describe()}')
    assert len(moving) > 10
    check(np.all(rms < 0.01), f'RMS error {rms} rad while moving 0.3 rad in 2 s', meter)
    check(np.all(np.abs(settled()) < 2e-3), f'settled {settled()} rad from the goal', meter)
    assert controller.poll() is None and sim.poll() is None, logs()
