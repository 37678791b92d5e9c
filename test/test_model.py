"""RobotModel: attributes from URDF, trees, payloads and gravity, checked against Pinocchio."""
from conftest import robot_data_urdf
import numpy as np
import pinocchio as pin
from pinocchio_oracle import Oracle
import pytest

from rnea_controller import DimensionError, ModelError, rnea, RobotModel
from rnea_controller.dynamics.model import default_urdf_path

UR5 = 'ur_description/urdf/ur5_robot.urdf'


@pytest.fixture(scope='module')
def ur5():
    return RobotModel.from_urdf_file(robot_data_urdf(UR5))


def test_ur5_attributes_come_from_the_urdf(ur5):
    assert ur5.joint_names == ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint',
                               'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint')
    assert ur5.parents.tolist() == [-1, 0, 1, 2, 3, 4]
    np.testing.assert_allclose(ur5.effort_limits, [150, 150, 150, 28, 28, 28])
    np.testing.assert_allclose(ur5.velocity_limits, [3.15] * 3 + [3.2] * 3)
    upper = [2 * np.pi, 2 * np.pi, np.pi, 2 * np.pi, 2 * np.pi, 2 * np.pi]
    np.testing.assert_allclose(ur5.position_limits[:, 1], upper, rtol=1e-6)
    np.testing.assert_allclose(ur5.gravity, (0, 0, -9.81))
    assert {'base_link', 'ee_link', 'world'} <= set(ur5.link_names)
    assert ur5.joint_index('elbow_joint') == 2
    with pytest.raises(ModelError, match="unknown joint 'knee'"):
        ur5.joint_index('knee')


def test_model_is_immutable(ur5):
    with pytest.raises(ValueError):
        ur5.inertias[0, 0, 0] = 1.0
    with pytest.raises(AttributeError):
        ur5.gravity = np.zeros(3)


def test_tree_parents_follow_the_urdf():
    model = RobotModel.from_urdf_file(robot_data_urdf('tiago_description/robots/tiago_dual.urdf'))
    left, right = model.joint_index('arm_left_1_joint'), model.joint_index('arm_right_1_joint')
    torso = model.joint_index('torso_lift_joint')
    assert model.parents[left] == model.parents[right] == torso
    assert all(p < i for i, p in enumerate(model.parents)), 'λ(i) < i'
    assert model.joint_types[torso] == 'prismatic'
    wheel = model.joint_index('wheel_left_joint')
    assert model.joint_types[wheel] == 'continuous'
    assert np.all(np.isinf(model.position_limits[wheel]))


def test_payload_matches_pinocchio_with_the_body_appended(ur5):
    path = robot_data_urdf(UR5)
    mass, com = 2.5, np.array([0.01, -0.02, 0.05])
    inertia = np.array([[0.01, 0.001, 0.0], [0.001, 0.02, 0.0], [0.0, 0.0, 0.015]])
    loaded = ur5.with_payload('ee_link', mass, com, inertia)
    oracle = Oracle(path, ur5)
    frame = oracle.pin.frames[oracle.pin.getFrameId('ee_link')]
    body = pin.Inertia(mass, com, inertia)
    oracle.pin.appendBodyToJoint(frame.parentJoint, frame.placement.act(body), pin.SE3.Identity())
    oracle.data = oracle.pin.createData()
    rng = np.random.default_rng(2)
    for q, qd, qdd in rng.uniform(-2, 2, size=(5, 3, 6)):
        np.testing.assert_allclose(rnea(loaded, q, qd, qdd), oracle.rnea(q, qd, qdd), atol=1e-9)
    assert not np.allclose(rnea(loaded, q, qd, qdd), rnea(ur5, q, qd, qdd)), 'original unchanged'


def test_payload_of_seed_002_exercise_grows_linearly_with_mass(ur5):
    """Seed 002's exercise: 0-5 kg at the end effector; static torque is affine in the mass."""
    q = np.array([0.3, -1.0, 1.2, -0.5, 0.4, 0.0])
    zeros = np.zeros(6)
    tau = [rnea(ur5.with_payload('ee_link', m), q, zeros, zeros) for m in (0, 1, 2, 5)]
    np.testing.assert_allclose(tau[2] - tau[0], 2 * (tau[1] - tau[0]), atol=1e-9)
    np.testing.assert_allclose(tau[3] - tau[0], 5 * (tau[1] - tau[0]), atol=1e-9)
    # 1 kg at the flange, shoulder lift: g·m·(horizontal lever arm) is a few N·m
    assert 1.0 < abs(tau[1][1] - tau[0][1]) < 9.81 * 1.0


@pytest.mark.parametrize('args, error, message', [
    (('nowhere', 1.0), ModelError, "unknown link 'nowhere'"),
    (('base_link', 1.0), ModelError, "link 'base_link' is part of the fixed base"),
    (('ee_link', -1.0), ModelError, 'mass -1.0 kg must be finite and not negative'),
    (('ee_link', 1.0, (0, 0)), DimensionError, 'payload com must be 3 finite numbers'),
    (('ee_link', 1.0, (0, 0, 0), -np.eye(3)), ModelError, 'not positive semi-definite'),
])
def test_bad_payload_is_refused(ur5, args, error, message):
    with pytest.raises(error, match=message):
        ur5.with_payload(*args)


def test_gravity_can_be_changed(ur5):
    q = np.array([0.0, -0.5, 0.5, 0.0, 0.0, 0.0])
    zeros = np.zeros(6)
    moon = ur5.with_gravity((0, 0, -1.62))
    np.testing.assert_allclose(rnea(moon, q, zeros, zeros),
                               rnea(ur5, q, zeros, zeros) * 1.62 / 9.81, atol=1e-9)
    with pytest.raises(DimensionError, match='gravity must be 3 finite numbers'):
        ur5.with_gravity((0, 0))


def test_bundled_arm_loads_everywhere_it_is_promised():
    path = default_urdf_path()
    assert path.is_file(), f'bundled arm missing at {path}'
    model = RobotModel.from_urdf_file(path)
    assert model.n in (6, 7)
    assert np.all(np.isfinite(model.effort_limits)) and np.all(model.effort_limits > 0)
    assert np.all(np.isfinite(model.velocity_limits))
    assert np.all(model.position_limits[:, 0] < model.position_limits[:, 1])
