"""RNEA, mass matrix, gravity and bias against Pinocchio on real URDFs, and physics identities."""
from conftest import robot_data_urdf
from hypothesis import given, HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
import numpy as np
from pinocchio_oracle import Oracle
import pytest

from rnea_controller import (
    bias_torques,
    DescriptionWarning,
    DimensionError,
    gravity_torques,
    mass_matrix,
    ModelError,
    rnea,
    rnea_reference,
    RobotModel,
)

# (URDF, joints locked at 0): a chain, a 7-joint arm with mimic fingers, a mobile manipulator with
# a prismatic torso and continuous wheels, two two-arm trees, and an arm with continuous joints.
ROBOTS = {
    'ur5': ('ur_description/urdf/ur5_robot.urdf', ()),
    'panda': ('panda_description/urdf/panda.urdf', ('panda_finger_joint1', 'panda_finger_joint2')),
    'tiago': ('tiago_description/robots/tiago_no_hand.urdf', ()),
    'tiago_dual': ('tiago_description/robots/tiago_dual.urdf', ()),
    'baxter': ('baxter_description/urdf/baxter.urdf',
               ('l_gripper_l_finger_joint', 'l_gripper_r_finger_joint',
                'r_gripper_l_finger_joint', 'r_gripper_r_finger_joint')),
    'kinova': ('kinova_description/robots/kinova.urdf', ()),
}
SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope='module', params=sorted(ROBOTS))
def robot(request):
    path, locked = ROBOTS[request.param]
    path = robot_data_urdf(path)
    model = RobotModel.from_urdf_file(path, locked_joints=list(locked))
    return request.param, model, Oracle(path, model, locked)


def states(n, count=None):
    shape = (n,) if count is None else (count, n)
    return arrays(np.float64, shape, elements=st.floats(-3.0, 3.0, allow_subnormal=False))


def assert_close(ours, oracle, rtol=1e-9):
    """Agreement within `rtol`, relative to the oracle's magnitude (at least 1)."""
    scale = max(1.0, float(np.max(np.abs(oracle))))
    np.testing.assert_allclose(ours, oracle, rtol=0.0, atol=rtol * scale)


def test_robots_cover_the_joint_types_and_trees(robot):
    name, model, _ = robot
    kinds = {'tiago': {'prismatic', 'continuous'}, 'kinova': {'continuous'}}
    assert kinds.get(name, set()) <= set(model.joint_types)
    if name in ('tiago_dual', 'baxter'):
        assert len(model.parents) - len(set(model.parents.tolist())) > 1, 'expected branches'


@given(data=st.data())
@SETTINGS
def test_rnea_matches_pinocchio(robot, data):
    _, model, oracle = robot
    q, qd, qdd = (data.draw(states(model.n)) for _ in range(3))
    assert_close(rnea(model, q, qd, qdd), oracle.rnea(q, qd, qdd))


@given(data=st.data())
@SETTINGS
def test_reference_matches_pinocchio_and_fast_path(robot, data):
    name, model, oracle = robot
    if model.n > 40:
        pytest.skip('the readable reference is slow on 100 joints; the fast path covers it')
    q, qd, qdd = (data.draw(states(model.n)) for _ in range(3))
    expected = oracle.rnea(q, qd, qdd)
    assert_close(rnea_reference(model, q, qd, qdd), expected)
    np.testing.assert_allclose(rnea(model, q, qd, qdd), rnea_reference(model, q, qd, qdd),
                               rtol=0, atol=1e-10 * max(1.0, np.max(np.abs(expected))))


@given(data=st.data())
@SETTINGS
def test_rnea_without_gravity_matches_pinocchio(robot, data):
    _, model, oracle = robot
    q, qd, qdd = (data.draw(states(model.n)) for _ in range(3))
    oracle.pin.gravity.linear[:] = 0.0
    try:
        assert_close(rnea(model, q, qd, qdd, gravity=np.zeros(3)), oracle.rnea(q, qd, qdd))
    finally:
        oracle.pin.gravity.linear[:] = (0.0, 0.0, -9.81)


@given(data=st.data())
@SETTINGS
def test_external_wrenches_match_pinocchio(robot, data):
    """f_ext is the wrench the environment applies on a link, in the link frame at its origin."""
    _, model, oracle = robot
    q, qd, qdd = (data.draw(states(model.n)) for _ in range(3))
    links = [link for link in model.link_names if model.link_frame(link)[0] >= 0]
    chosen = data.draw(st.lists(st.sampled_from(links), min_size=1, max_size=3, unique=True))
    wrenches = {link: data.draw(arrays(np.float64, 6, elements=st.floats(-50, 50)))
                for link in chosen}
    expected = oracle.rnea(q, qd, qdd, fext=oracle.link_wrenches(wrenches))
    assert_close(rnea(model, q, qd, qdd, f_ext=wrenches), expected)
    assert_close(rnea_reference(model, q, qd, qdd, f_ext=wrenches), expected)


def test_batched_equals_single_and_pinocchio(robot):
    _, model, oracle = robot
    rng = np.random.default_rng(7)
    Q, QD, QDD = rng.uniform(-3, 3, size=(3, 50, model.n))
    link = model.link_names[-1]
    F = rng.uniform(-20, 20, size=(50, 6))
    tau = rnea(model, Q, QD, QDD, f_ext={link: F})
    assert tau.shape == (50, model.n)
    for k in range(0, 50, 7):
        single = rnea(model, Q[k], QD[k], QDD[k], f_ext={link: F[k]})
        np.testing.assert_allclose(tau[k], single, rtol=1e-13, atol=1e-12)
        expected = oracle.rnea(Q[k], QD[k], QDD[k], fext=oracle.link_wrenches({link: F[k]}))
        assert_close(tau[k], expected)


def test_mass_matrix_and_gravity_match_pinocchio(robot):
    _, model, oracle = robot
    rng = np.random.default_rng(3)
    for q in rng.uniform(-3, 3, size=(5, model.n)):
        assert_close(mass_matrix(model, q), oracle.mass_matrix(q))
        assert_close(gravity_torques(model, q), oracle.gravity(q))


def test_moving_base_matches_pinocchio_free_flyer():
    """base_velocity / base_acceleration against Pinocchio with a free-flyer root joint."""
    path = robot_data_urdf(ROBOTS['ur5'][0])
    model = RobotModel.from_urdf_file(path)
    oracle = Oracle(path, model, free_flyer=True)
    rng = np.random.default_rng(11)
    for _ in range(10):
        q, qd, qdd = rng.uniform(-2, 2, size=(3, model.n))
        v0, a0 = rng.uniform(-2, 2, size=(2, 6))
        expected = oracle.rnea(q, qd, qdd, base_velocity=v0, base_acceleration=a0)
        got = rnea(model, q, qd, qdd, base_velocity=v0, base_acceleration=a0)
        assert_close(got, expected)
        assert_close(rnea_reference(model, q, qd, qdd, base_velocity=v0,
                                    base_acceleration=a0), expected)


@given(data=st.data())
@SETTINGS
def test_rnea_is_mass_matrix_times_qdd_plus_bias(robot, data):
    """Identity: RNEA(q, qd, qdd) = M(q) qdd + h(q, qd)."""
    _, model, _ = robot
    q, qd, qdd = (data.draw(states(model.n)) for _ in range(3))
    expected = mass_matrix(model, q) @ qdd + bias_torques(model, q, qd)
    assert_close(rnea(model, q, qd, qdd), expected)


@pytest.mark.parametrize('name', ['ur5', 'panda', 'tiago'])
def test_energy_rate_equals_joint_power(name):
    """Identity: qdᵀ tau = d/dt (½ qdᵀ M qd + V) along the motion that tau produces."""
    path, locked = ROBOTS[name]
    path = robot_data_urdf(path)
    model = RobotModel.from_urdf_file(path, locked_joints=list(locked))
    oracle = Oracle(path, model, locked)  # only for the potential energy V(q)
    rng = np.random.default_rng(5)
    for _ in range(5):
        q, qd, qdd = rng.uniform(-1.5, 1.5, size=(3, model.n))

        def energy(t, q=q, qd=qd, qdd=qdd):
            q_t, qd_t = q + qd * t + 0.5 * qdd * t * t, qd + qdd * t
            return 0.5 * qd_t @ mass_matrix(model, q_t) @ qd_t + oracle.potential_energy(q_t)

        h = 1e-5
        rate = (energy(h) - energy(-h)) / (2 * h)
        power = qd @ rnea(model, q, qd, qdd)
        assert power == pytest.approx(rate, rel=1e-6, abs=1e-6)


# A worked RRR example as textbooks give it: 1 m links of 1 kg, centres of mass at mid-length,
# and each link's inertia simplified to diag(0.2, 0.2, 0.8) kg·m², which no rigid body has
# (0.8 > 0.2 + 0.2). Course material computes its tables on such data, and so does Pinocchio.
TEXTBOOK_LINK = ('<link name="link{k}"><inertial><origin xyz="0.5 0 0"/><mass value="1"/>'
                 '<inertia ixx="0.2" iyy="0.2" izz="0.8" ixy="0" ixz="0" iyz="0"/></inertial>'
                 '</link>')
TEXTBOOK_JOINT = ('<joint name="joint{k}" type="revolute"><parent link="{parent}"/>'
                  '<child link="link{k}"/><origin xyz="{x} 0 0"/><axis xyz="0 0 1"/>'
                  '<limit effort="50" velocity="2" lower="-3" upper="3"/></joint>')


def textbook_rrr():
    parents = ['base', 'link1', 'link2']
    lines = ['<robot name="textbook_rrr">', '<link name="base"/>']
    lines += [TEXTBOOK_LINK.format(k=k) for k in (1, 2, 3)]
    lines += [TEXTBOOK_JOINT.format(k=k, parent=parents[k - 1], x=0 if k == 1 else 1)
              for k in (1, 2, 3)]
    return '\n'.join(lines + ['</robot>'])


def test_textbook_inertias_load_with_one_warning_per_link_and_match_pinocchio(tmp_path):
    path = tmp_path / 'textbook_rrr.urdf'
    path.write_text(textbook_rrr())
    with pytest.warns(DescriptionWarning) as caught:
        model = RobotModel.from_urdf_file(path)
    assert sorted(str(w.message) for w in caught) == [
        f"link 'link{k}' (line {k + 2}): inertia breaks the triangle inequality (principal "
        'moments [0.2, 0.2, 0.8] kg·m²): the largest exceeds the sum of the other two, which no '
        'rigid body can; loaded as given' for k in (1, 2, 3)]
    oracle = Oracle(path, model)
    rng = np.random.default_rng(2)
    for q, qd, qdd in rng.uniform(-2.0, 2.0, (10, 3, 3)):
        assert_close(rnea(model, q, qd, qdd), oracle.rnea(q, qd, qdd), rtol=1e-12)
        assert_close(rnea_reference(model, q, qd, qdd), oracle.rnea(q, qd, qdd), rtol=1e-12)


def test_shapes_and_non_finite_values_are_refused_with_the_place():
    model = RobotModel.from_urdf_file(robot_data_urdf(ROBOTS['ur5'][0]))
    zeros = np.zeros(6)
    with pytest.raises(DimensionError, match=r'q has shape \(5,\), but the model has 6 joints'):
        rnea(model, np.zeros(5), zeros, zeros)
    with pytest.raises(DimensionError, match=r'qd has a non-finite value nan at index 2'):
        rnea(model, zeros, np.array([0, 0, np.nan, 0, 0, 0]), zeros)
    with pytest.raises(DimensionError, match=r'qdd has a non-finite value inf at index \(1, 4\)'):
        bad = np.zeros((3, 6))
        bad[1, 4] = np.inf
        rnea(model, np.zeros((3, 6)), np.zeros((3, 6)), bad)
    with pytest.raises(DimensionError, match='same shape'):
        rnea(model, np.zeros((2, 6)), np.zeros((3, 6)), np.zeros((3, 6)))
    with pytest.raises(ModelError, match="unknown link 'gripper'"):
        rnea(model, zeros, zeros, zeros, f_ext={'gripper': np.zeros(6)})
    with pytest.raises(DimensionError, match=r"f_ext\['ee_link'\] has shape \(3,\)"):
        rnea(model, zeros, zeros, zeros, f_ext={'ee_link': np.zeros(3)})
    with pytest.raises(DimensionError, match='gravity must be 3 finite numbers'):
        rnea(model, zeros, zeros, zeros, gravity=[0, np.nan, 0])


def _pinocchio_with_armature(model, oracle, armature):
    """A copy of the oracle whose Pinocchio model has `armature` (ours, model order) set."""
    geared = Oracle.__new__(Oracle)
    geared.__dict__.update(oracle.__dict__)
    geared.pin = oracle.pin.copy()
    geared.pin.armature[geared.idx_v] = armature
    geared.data = geared.pin.createData()
    return geared


def test_armature_matches_pinocchio_model_armature(robot):
    """Rotor inertia (issue 23): RNEA, its reference, M(q) and tau = M qdd + h against
    Pinocchio with `model.armature` set, at Menagerie's magnitudes (0.07-0.2 kg·m²)."""
    _, model, oracle = robot
    rng = np.random.default_rng(23)
    armature = rng.uniform(0.07, 0.2, model.n)
    geared, pin_geared = model.with_armature(armature), _pinocchio_with_armature(
        model, oracle, armature)
    for _ in range(5):
        q, qd, qdd = rng.uniform(-2.0, 2.0, (3, model.n))
        expected = pin_geared.rnea(q, qd, qdd)
        assert_close(rnea(geared, q, qd, qdd), expected)
        assert_close(rnea_reference(geared, q, qd, qdd), expected)
        M = mass_matrix(geared, q)
        assert_close(M, pin_geared.mass_matrix(q))
        assert_close(M @ qdd + bias_torques(geared, q, qd), expected)
        assert_close(np.diag(M - mass_matrix(model, q)), armature)


def test_urdf_dynamics_are_pinocchios_damping_and_friction(robot):
    """<dynamics damping friction> as Pinocchio reads it (model.damping, model.friction)."""
    _, model, oracle = robot
    np.testing.assert_array_equal(model.damping, oracle.pin.damping[oracle.idx_v])
    np.testing.assert_array_equal(model.friction, oracle.pin.friction[oracle.idx_v])
    np.testing.assert_array_equal(model.armature, np.zeros(model.n))


def test_with_armature_refuses_negative_or_misshapen_values(robot):
    _, model, _ = robot
    with pytest.raises(ModelError, match='must not be negative'):
        model.with_armature(np.full(model.n, -0.1))
    with pytest.raises(DimensionError, match=f'armature must be {model.n} finite numbers'):
        model.with_armature([0.1])
