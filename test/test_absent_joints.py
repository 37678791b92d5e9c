"""Joint states that lack the joints the node does not control (a gripper's fingers): the
controlled joints are required, the others enter at their mimic relation or at 0."""
from conftest import robot_data_urdf
import numpy as np
import pytest
from sensor_msgs.msg import JointState
from test_wire import _wire_bytes as wire_bytes

from rnea_controller import RobotModel
from rnea_controller.ros.inputs import JointStateInput

PANDA = RobotModel.from_urdf_file(robot_data_urdf('panda_description/urdf/panda.urdf'))
ARM = [f'panda_joint{k}' for k in range(1, 8)]
Q_ARM = np.linspace(-0.6, 0.6, 7)


def state(names, position, velocity=None):
    msg = JointState(name=list(names), position=list(position))
    msg.velocity = [] if velocity is None else list(velocity)
    return msg


def panda_input():
    return JointStateInput(PANDA.joint_names, required=ARM, mimic=PANDA.mimic)


def test_panda_hand_mimic_relation_is_recorded():
    assert PANDA.joint_names[7:] == ('panda_finger_joint1', 'panda_finger_joint2')
    assert PANDA.mimic == ((8, 7, 1.0, 0.0),)


def test_absent_mimic_joint_follows_its_leader_and_absent_others_are_zero():
    inputs = panda_input()
    names = [*ARM, 'panda_finger_joint1', 'camera']
    inputs.take(state(names, [*Q_ARM, 0.03, np.nan], [*Q_ARM / 10, 0.2, np.nan]))
    np.testing.assert_array_equal(inputs.q, [*Q_ARM, 0.03, 0.03])
    np.testing.assert_array_equal(inputs.qd, [*Q_ARM / 10, 0.2, 0.2])
    inputs.take(state(ARM[::-1], Q_ARM[::-1], Q_ARM[::-1]))  # the arm's driver alone
    np.testing.assert_array_equal(inputs.q, [*Q_ARM, 0.0, 0.0])
    np.testing.assert_array_equal(inputs.qd, [*Q_ARM, 0.0, 0.0])


def test_measured_uncontrolled_joints_are_taken_as_measured():
    inputs = panda_input()
    fingers = ['panda_finger_joint2', 'panda_finger_joint1']
    inputs.take(state([*fingers, *ARM], [0.01, 0.03, *Q_ARM]))
    np.testing.assert_array_equal(inputs.q, [*Q_ARM, 0.03, 0.01])
    with pytest.raises(ValueError, match='non-finite position or velocity of a model joint'):
        inputs.take(state([*fingers, *ARM], [np.nan, 0.03, *Q_ARM]))


def test_a_missing_controlled_joint_is_refused_by_name():
    inputs = panda_input()
    with pytest.raises(ValueError, match=r"joints \['panda_joint4'\] of the model are missing"):
        inputs.take(state([j for j in ARM if j != 'panda_joint4'], Q_ARM[:6]))
    assert not inputs.valid


def test_the_in_place_reading_fills_the_same_way():
    """The second message of a layout is read in place (wire.Layout): filled like the first."""
    inputs, rng = panda_input(), np.random.default_rng(25)
    names = [*ARM, 'panda_finger_joint1']
    in_place = 0
    for k in range(5):
        q, qd = rng.normal(size=(2, 8))
        msg = state(names, q, qd)
        msg.header.stamp.sec, msg.header.stamp.nanosec = 1_700_000_000 + k, 1000 * k
        raw = wire_bytes(msg)
        in_place += inputs.reads_in_place(raw)
        inputs.take_serialized(raw)
        inputs.learned()  # the layout, learnt off the call (inputs.py)
        np.testing.assert_array_equal(inputs.q, [*q, q[7]])
        np.testing.assert_array_equal(inputs.qd, [*qd, qd[7]])
    assert in_place == 4


def test_a_refused_message_of_other_names_leaves_the_in_place_reading_as_it_was():
    """The driver's layout (the arm only: fingers absent) is read in place; a message naming
    every joint in another order is refused (8 positions for 9 names); the driver's next
    message, read in place, still fills the fingers: it never reads them from its bytes (there,
    the old code read the last arm joint as both fingers, 0.6 m, and its jump gate then refused
    every state of the driver: the arm went stale)."""
    inputs = JointStateInput(PANDA.joint_names, required=ARM, mimic=PANDA.mimic,
                             velocity_limits=PANDA.velocity_limits)

    def driver(k):
        msg = state(ARM, Q_ARM + 1e-4 * k, np.zeros(7))
        msg.header.stamp.sec = 1_700_000_000 + k
        return wire_bytes(msg)

    for k in range(2):
        inputs.take_serialized(driver(k))
    assert inputs.learned()
    assert inputs.reads_in_place(driver(2))
    other = state([*ARM[::-1], 'panda_finger_joint2', 'panda_finger_joint1'], [*Q_ARM, 0.04])
    with pytest.raises(ValueError, match='8 positions and 0 velocities for 9 names'):
        inputs.take_serialized(wire_bytes(other))
    inputs.take_serialized(driver(2))
    np.testing.assert_array_equal(inputs.q, [*(Q_ARM + 2e-4), 0.0, 0.0])
