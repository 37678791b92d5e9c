"""The bundled arm (rnea_controller/urdf/arm.urdf): loads everywhere, physically valid, UR5e data.

Oracles: MuJoCo's and Pinocchio's own URDF parsers, UR's published DH table (forward kinematics)
and the physical conditions on rigid-body inertias.
"""
import warnings
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pinocchio as pin
from pinocchio_oracle import Oracle
import pytest

from rnea_controller import default_urdf_path, rnea, rnea_reference, RobotModel
from rnea_controller.description_file import read_description

URDF = default_urdf_path()
JOINTS = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
          'wrist_2_joint', 'wrist_3_joint')
# UR5e, Universal Robots' DH table: (d [m], a [m], alpha [rad]) per joint.
UR5E_DH = ((0.1625, 0.0, np.pi / 2), (0.0, -0.425, 0.0), (0.0, -0.3922, 0.0),
           (0.1333, 0.0, np.pi / 2), (0.0997, 0.0, -np.pi / 2), (0.0996, 0.0, 0.0))
UR5E_MASSES = (3.761, 8.058, 2.846, 1.37, 1.3, 0.365)


def links_with_inertia():
    """(name, mass, 3x3 inertia) of every URDF link that has an <inertial>, parsed here."""
    for link in ET.parse(URDF).getroot().findall('link'):
        inertial = link.find('inertial')
        if inertial is None:
            continue
        i = {k: float(v) for k, v in inertial.find('inertia').attrib.items()}
        inertia = np.array([[i['ixx'], i['ixy'], i['ixz']], [i['ixy'], i['iyy'], i['iyz']],
                            [i['ixz'], i['iyz'], i['izz']]])
        yield link.get('name'), float(inertial.find('mass').get('value')), inertia


def dh_forward_kinematics(q):
    """Flange pose from the standard DH table: prod Rz(q) Tz(d) Tx(a) Rx(alpha)."""
    T = np.eye(4)
    for (d, a, alpha), theta in zip(UR5E_DH, q, strict=True):
        ct, st, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
        T = T @ np.array([[ct, -st * ca, st * sa, a * ct], [st, ct * ca, -ct * sa, a * st],
                          [0.0, sa, ca, d], [0.0, 0.0, 0.0, 1.0]])
    return T


def test_our_model_loads_it_with_the_ur5e_limits():
    model = RobotModel.from_urdf_file(URDF)
    assert model.joint_names == JOINTS
    np.testing.assert_array_equal(model.effort_limits, [150, 150, 150, 28, 28, 28])
    np.testing.assert_allclose(model.velocity_limits, np.pi)
    np.testing.assert_allclose(model.position_limits[2], [-np.pi, np.pi])
    assert np.all(model.position_limits[:, 0] < 0) and np.all(model.position_limits[:, 1] > 0)


def test_masses_and_inertias_are_physical():
    links = list(links_with_inertia())
    assert [mass for _, mass, _ in links] == list(UR5E_MASSES)
    for name, mass, inertia in links:
        eigenvalues = np.linalg.eigvalsh(inertia)
        assert mass > 0 and np.all(eigenvalues > 0), name
        a, b, c = eigenvalues  # principal moments: each at most the sum of the other two
        assert a + b >= c and a + c >= b and b + c >= a, name


def test_kinematics_are_ur5e_dh_table():
    pinocchio_model = pin.buildModelFromUrdf(str(URDF))
    data = pinocchio_model.createData()
    flange = pinocchio_model.getFrameId('tool0')
    for q in np.random.default_rng(4).uniform(-np.pi, np.pi, (20, 6)):
        pin.framesForwardKinematics(pinocchio_model, data, q)
        np.testing.assert_allclose(data.oMf[flange].homogeneous, dh_forward_kinematics(q),
                                   atol=1e-12)


@pytest.mark.parametrize('seed', range(3))
def test_mujoco_pinocchio_and_our_rnea_agree(seed):
    """Inverse dynamics of the same URDF by three independent implementations."""
    mj_model = mujoco.MjModel.from_xml_path(str(URDF))
    mj_data = mujoco.MjData(mj_model)
    pinocchio_model = pin.buildModelFromUrdf(str(URDF))
    model = RobotModel.from_urdf_file(URDF)
    q, qd, qdd = np.random.default_rng(seed).uniform(-2.0, 2.0, (3, 6))
    mj_data.qpos[:], mj_data.qvel[:], mj_data.qacc[:] = q, qd, qdd
    mujoco.mj_inverse(mj_model, mj_data)
    expected = pin.rnea(pinocchio_model, pinocchio_model.createData(), q, qd, qdd)
    np.testing.assert_allclose(mj_data.qfrc_inverse, expected, atol=1e-9)
    np.testing.assert_allclose(rnea(model, q, qd, qdd), expected, atol=1e-9)
    assert [mj_model.joint(j).name for j in range(mj_model.njnt)] == list(JOINTS)


def test_arm_gripper_xacro_runs_through_xacro_loads_and_matches_pinocchio(tmp_path):
    """rnea_controller/urdf/arm_gripper.urdf.xacro through the `xacro` program (PyPI xacro, run
    by description_file as the launch files and --urdf run it): the arm's six joints, two
    fingers, the second a mimic of the first; it loads without a warning and agrees with
    Pinocchio reading the same text."""
    path = tmp_path / 'arm_gripper.urdf'
    path.write_text(read_description(default_urdf_path().with_name('arm_gripper.urdf.xacro')))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        model = RobotModel.from_urdf_file(path)
    assert model.joint_names == (*JOINTS, 'finger_left_joint', 'finger_right_joint')
    assert model.joint_types[6:] == ('prismatic', 'prismatic')
    assert model.mimic == ((7, 6, 1.0, 0.0),)
    oracle = Oracle(path, model)
    for q, qd, qdd in np.random.default_rng(24).uniform(-1.0, 1.0, (10, 3, model.n)):
        expected = oracle.rnea(q, qd, qdd)
        scale = max(1.0, np.max(np.abs(expected)))
        np.testing.assert_allclose(rnea(model, q, qd, qdd), expected, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(rnea_reference(model, q, qd, qdd), expected, rtol=0,
                                   atol=1e-12 * scale)
    arm = RobotModel.from_urdf_file(default_urdf_path())
    np.testing.assert_array_equal(model.inertias[:5], arm.inertias[:5])  # the arm's figures
