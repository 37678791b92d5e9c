"""DH tables: the same arm from DH and from URDF gives the same torques, and textbook values."""
import numpy as np
import pinocchio as pin
import pytest

from rnea_controller import (
    DescriptionError,
    DhError,
    mass_matrix,
    rnea,
    RobotModel,
    UrdfError,
)
from rnea_controller.dynamics.dh import rot, trans, X_AXIS, Z_AXIS

# Seed 002's 2-DOF planar arm: link lengths 0.6 and 0.5 m, masses 1.0 and 0.8 kg, centres of
# mass at mid-length, I_zz 0.05 and 0.03 kg·m² about the centre of mass. Each link is a slender
# rod along its x axis (I_xx = 0, I_yy = I_zz): the textbook needs only I_zz, and a link with
# I_zz alone breaks the triangle inequality of the principal moments, which the model warns of.
L1, L2, LC1, LC2, M1, M2, I1, I2 = 0.6, 0.5, 0.3, 0.25, 1.0, 0.8, 0.05, 0.03
PLANAR_URDF = f"""<robot name="planar2">
  <link name="base"/>
  <link name="link1"><inertial><origin xyz="{LC1} 0 0"/><mass value="{M1}"/>
    <inertia ixx="0" ixy="0" ixz="0" iyy="{I1}" iyz="0" izz="{I1}"/></inertial></link>
  <link name="link2"><inertial><origin xyz="{LC2} 0 0"/><mass value="{M2}"/>
    <inertia ixx="0" ixy="0" ixz="0" iyy="{I2}" iyz="0" izz="{I2}"/></inertial></link>
  <joint name="joint1" type="revolute"><parent link="base"/><child link="link1"/>
    <axis xyz="0 0 1"/></joint>
  <joint name="joint2" type="revolute"><parent link="link1"/><child link="link2"/>
    <origin xyz="{L1} 0 0"/><axis xyz="0 0 1"/></joint>
</robot>"""
# Standard DH: frame {i} sits at the end of link i, so the centre of mass is at -(L - LC) on x_i.
PLANAR_DH = [
    dict(a=L1, alpha=0.0, d=0.0, theta=0.0, mass=M1, com=(LC1 - L1, 0, 0),
         inertia=np.diag([0, I1, I1])),
    dict(a=L2, alpha=0.0, d=0.0, theta=0.0, mass=M2, com=(LC2 - L2, 0, 0),
         inertia=np.diag([0, I2, I2])),
]
GRAVITY = np.array([0.0, -9.81, 0.0])  # the arm moves in a vertical plane


def textbook_planar(q, qd, qdd, g=9.81):
    """Closed-form dynamics of the two-link planar arm (Spong, Hutchinson, Vidyasagar, §7.3)."""
    c2, s2 = np.cos(q[1]), np.sin(q[1])
    M = np.array([
        [M1 * LC1**2 + M2 * (L1**2 + LC2**2 + 2 * L1 * LC2 * c2) + I1 + I2,
         M2 * (LC2**2 + L1 * LC2 * c2) + I2],
        [M2 * (LC2**2 + L1 * LC2 * c2) + I2, M2 * LC2**2 + I2]])
    h = -M2 * L1 * LC2 * s2
    coriolis = np.array([h * (2 * qd[0] * qd[1] + qd[1]**2), -h * qd[0]**2])
    c1, c12 = np.cos(q[0]), np.cos(q[0] + q[1])
    gravity = np.array([(M1 * LC1 + M2 * L1) * g * c1 + M2 * LC2 * g * c12, M2 * LC2 * g * c12])
    return M @ qdd + coriolis + gravity


def test_seed_002_planar_arm_from_urdf_and_dh_matches_the_textbook():
    from_urdf = RobotModel.from_urdf_string(PLANAR_URDF)
    from_dh = RobotModel.from_dh(PLANAR_DH, 'standard')
    rng = np.random.default_rng(1)
    for q, qd, qdd in rng.uniform(-3, 3, size=(20, 3, 2)):
        expected = textbook_planar(q, qd, qdd)
        np.testing.assert_allclose(rnea(from_urdf, q, qd, qdd, gravity=GRAVITY), expected,
                                   atol=1e-12)
        np.testing.assert_allclose(rnea(from_dh, q, qd, qdd, gravity=GRAVITY), expected,
                                   atol=1e-12)


# Seed 003's MANIPULATOR-H in modified DH (Craig): α_{i-1}, a_{i-1}, d_i, θ_i offsets. The seed
# gives five link masses [g], centres of mass [mm] and inertias [g·mm²]; they are used here as
# links 1-5, converted to SI, and link 6 gets a small 0.2 kg tool. Any inertial data will do for
# the comparison: both sides must agree for whatever the arm is.
MANIPULATOR_H = [
    dict(alpha=0.0, a=0.0, d=0.159, theta=0.0),
    dict(alpha=-np.pi / 2, a=0.0, d=0.0, theta=-np.arctan2(264, 30)),
    dict(alpha=0.0, a=np.hypot(0.264, 0.03), d=0.0, theta=np.arctan2(264, 30)),
    dict(alpha=np.pi / 2, a=-0.03, d=0.258, theta=0.0),
    dict(alpha=-np.pi / 2, a=0.0, d=0.0, theta=0.0),
    dict(alpha=np.pi / 2, a=0.0, d=0.123, theta=0.0),
]
MASSES_G = [1030, 1404, 1236, 491, 454]
COMS_MM = [(0, 1, -1.1), (17.9, 0.3, 206.9), (0.2, 0.3, 387.9), (0, -1.5, 514.3), (0, 0.8, 591.5)]
INERTIAS_G_MM2 = [
    [[1.4957303e6, 0, 0], [0, 4.5009641e5, -1.0959043e4], [0, -1.0959043e4, 1.4874997e6]],
    [[1.0627201e7, 1.2357497e4, -1.2920605e6], [1.2357497e4, 1.0014640e7, 1.5798255e5],
     [-1.2920605e6, 1.5798255e5, 1.9568681e6]],
    [[3.1318491e6, -6.0760429e3, 2.4765806e4], [-6.0760429e3, 2.9193915e6, 4.2823763e4],
     [2.4765806e4, 4.2823763e4, 9.2402606e5]],
    [[3.9670485e5, -3.3867048, -4.7608394e1], [-3.3867048, 2.3556702e5, 3.9098238e3],
     [-4.7608394e1, 3.9098238e3, 2.9647894e5]],
    [[4.7548066e5, 0, 0], [0, 3.9961989e5, 1.4840847e4], [0, 1.4840847e4, 1.9795791e5]],
]


def manipulator_h_rows():
    rows = []
    for i, row in enumerate(MANIPULATOR_H):
        if i < 5:
            inertial = dict(mass=MASSES_G[i] / 1e3, com=np.array(COMS_MM[i]) / 1e3,
                            inertia=np.array(INERTIAS_G_MM2[i]) * 1e-9)
        else:
            inertial = dict(mass=0.2, com=(0, 0, 0.02), inertia=np.eye(3) * 1e-4)
        rows.append({**row, **inertial})
    return rows


def manipulator_h_urdf(rows):
    """The same arm written as URDF: origins from Craig's Rx(α) Tx(a) Rz(θ) Tz(d)."""
    parts = ['<robot name="manipulator_h"><link name="link0"/>']
    for i, row in enumerate(rows, start=1):
        T = rot(X_AXIS, row['alpha']) @ trans(X_AXIS, row['a']) @ rot(Z_AXIS, row['theta']) \
            @ trans(Z_AXIS, row['d'])
        xyz = ' '.join(repr(float(x)) for x in T[:3, 3])
        rpy = ' '.join(repr(float(x)) for x in pin.rpy.matrixToRpy(T[:3, :3]))
        I = np.asarray(row['inertia']).tolist()
        com = ' '.join(repr(float(x)) for x in row['com'])
        parts.append(
            f'<link name="link{i}"><inertial><origin xyz="{com}"/><mass value="{row["mass"]}"/>'
            f'<inertia ixx="{I[0][0]!r}" ixy="{I[0][1]!r}" ixz="{I[0][2]!r}" iyy="{I[1][1]!r}" '
            f'iyz="{I[1][2]!r}" izz="{I[2][2]!r}"/></inertial></link>'
            f'<joint name="joint{i}" type="revolute"><parent link="link{i - 1}"/>'
            f'<child link="link{i}"/><origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="0 0 1"/>'
            '<limit effort="100" velocity="3"/></joint>')
    return ''.join(parts) + '</robot>'


def test_seed_003_modified_dh_arm_equals_its_urdf_and_pinocchio():
    rows = manipulator_h_rows()
    urdf = manipulator_h_urdf(rows)
    from_dh = RobotModel.from_dh(rows, 'modified')
    from_urdf = RobotModel.from_urdf_string(urdf)
    oracle = pin.buildModelFromXML(urdf)
    data = oracle.createData()
    rng = np.random.default_rng(4)
    for q, qd, qdd in rng.uniform(-3, 3, size=(20, 3, 6)):
        expected = pin.rnea(oracle, data, q, qd, qdd)
        np.testing.assert_allclose(rnea(from_dh, q, qd, qdd), expected, atol=1e-10)
        np.testing.assert_allclose(rnea(from_urdf, q, qd, qdd), expected, atol=1e-10)
    np.testing.assert_allclose(mass_matrix(from_dh, q), mass_matrix(from_urdf, q), atol=1e-12)


def test_prismatic_dh_row_moves_along_z():
    """A vertical prismatic joint carrying 3 kg needs 3 (g + qdd) N, whatever its position."""
    model = RobotModel.from_dh([dict(type='prismatic', a=0.0, alpha=0.0, d=0.2, theta=0.0,
                                     mass=3.0, com=(0, 0, 0), inertia=np.eye(3) * 0.01)])
    for q, qdd in [(0.0, 0.0), (0.5, 2.0), (-0.3, -1.0)]:
        assert rnea(model, [q], [0.4], [qdd])[0] == pytest.approx(3.0 * (9.81 + qdd))


@pytest.mark.parametrize('rows, convention, message', [
    ([], 'standard', 'DH table has no rows'),
    ([dict(a=1.0)], 'craig', "DH convention 'craig'"),
    ([dict(a=1.0, lenght=2)], 'standard', r"DH row 1: unknown keys \['lenght'\]"),
    ([dict(a=np.nan)], 'standard', 'DH row 1: a = nan is not finite'),
    ([dict(a=1.0), dict(type='helical')], 'standard', "DH row 2: type 'helical'"),
    ([dict(a=1.0, mass=-1)], 'modified', r"link 'link1' \(DH row 1\): mass -1.0 kg"),
    ([dict(a=1.0, inertia=np.eye(2))], 'standard', 'DH row 1: inertia has shape'),
    ([dict(a=1.0, mass='heavy')], 'standard', "DH row 1: mass = 'heavy' is not a number"),
    ([dict(a=1.0, mass=2e4)], 'standard', r"link 'link1' \(DH row 1\): mass 20000 kg is above"),
    ([dict(a=1.0, mass=1.0, inertia=np.diag([0.1, -0.1, 0.5]))], 'standard',
     r"link 'link1' \(DH row 1\): inertia is not positive semi-definite"),
    ([dict(a=1.0), dict(a=1.0, effort=0.0)], 'standard',
     r"joint 'joint2' \(DH row 2\): effort limit 0.0 N·m or N must be positive"),
    ([dict(a=1.0, velocity=-1.0)], 'modified',
     r"joint 'joint1' \(DH row 1\): velocity limit -1.0"),
    ([dict(a=1.0, lower=1.0, upper=-1.0)], 'standard',
     r"joint 'joint1' \(DH row 1\): lower position limit 1.0 is above the upper limit -1.0"),
    ([dict(a=1e4)], 'modified', r"joint 'joint1' \(DH row 1\): origin .* is farther than 1000 m"),
])
def test_bad_dh_tables_are_refused(rows, convention, message):
    """A DH table's refusal is a DhError (a DescriptionError, not a UrdfError) naming the row."""
    with pytest.raises(DhError, match=message) as refusal:
        RobotModel.from_dh(rows, convention)
    assert isinstance(refusal.value, DescriptionError)
    assert not isinstance(refusal.value, UrdfError)
