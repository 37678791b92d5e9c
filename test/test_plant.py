"""The simulator's MuJoCo plant (rnea_controller/plant.py), without ROS.

Oracle: Pinocchio on the same URDF (its own parser, rnea and aba); with every realism option at
zero the plant must be the URDF's rigid-body model exactly, and each option must change it by
exactly its own physics (payload = Pinocchio with the same point mass appended; damping =
-D qd in the forward dynamics).
"""
import numpy as np
import pinocchio as pin
import pytest

from rnea_controller import default_urdf_path
from rnea_controller.errors import DimensionError, ParameterError
from rnea_controller.sim.plant import CommandHold, measure, Plant, PlantOptions

URDF_TEXT = default_urdf_path().read_text()
HOME = np.array([0.0, -np.pi / 2, np.pi / 2, -np.pi / 2, -np.pi / 2, 0.0])


@pytest.fixture(scope='module')
def oracle():
    model = pin.buildModelFromUrdf(str(default_urdf_path()))
    return model, model.createData()


def with_point_mass(model, mass, com):
    """Pinocchio model with a point mass at `com` [m] in wrist_3's frame."""
    heavier = pin.Model(model)
    joint = heavier.getJointId('wrist_3_joint')
    heavier.appendBodyToJoint(joint, pin.Inertia(mass, np.array(com), np.zeros((3, 3))),
                              pin.SE3.Identity())
    return heavier


def test_inverse_dynamics_is_pinocchios(oracle):
    model, data = oracle
    plant = Plant(URDF_TEXT)
    assert plant.model.opt.timestep == 0.001
    for q, qd, qdd in np.random.default_rng(0).uniform(-2, 2, (5, 3, 6)):
        np.testing.assert_allclose(plant.inverse_dynamics(q, qd, qdd),
                                   pin.rnea(model, data, q, qd, qdd), atol=1e-9)


def with_link(urdf_text, parent, name, moments):
    """The URDF with a link `name` of 0.2 kg and principal `moments` [kg·m²] fixed to `parent`."""
    ixx, iyy, izz = moments
    link = (f'<link name="{name}"><inertial><mass value="0.2"/><origin xyz="0 0 0.01"/>'
            f'<inertia ixx="{ixx}" iyy="{iyy}" izz="{izz}" ixy="0" ixz="0" iyz="0"/></inertial>'
            f'</link><joint name="{name}_joint" type="fixed"><parent link="{parent}"/>'
            f'<child link="{name}"/><origin xyz="0 0 0.05"/></joint>')
    return urdf_text.replace('</robot>', link + '</robot>')


def test_a_description_the_controller_loads_the_plant_loads(oracle):
    """A mobile manipulator's URDF (TIAGo's antennas, PR2's sensor mount): a link of the fixed
    base with an inertia that is not positive semi-definite never enters the dynamics (the
    controller's model loads it with a warning), and MuJoCo's compiler would refuse it: the
    plant is the arm without it. A moving link whose moments break the triangle inequality
    (loaded as given by the controller) is loaded with its moments balanced to their mean."""
    model, data = oracle
    antenna = with_link(URDF_TEXT, 'base_link', 'antenna', (-3.5e-8, 3.5e-8, 9.1e-8))
    plant = Plant(antenna)
    for q, qd, qdd in np.random.default_rng(2).uniform(-2, 2, (3, 3, 6)):
        np.testing.assert_allclose(plant.inverse_dynamics(q, qd, qdd),
                                   pin.rnea(model, data, q, qd, qdd), atol=1e-9)
    mount = Plant(with_link(URDF_TEXT, 'wrist_3_link', 'mount', (1e-3, 1e-3, 1e-2)))
    balanced = pin.buildModelFromXML(with_link(URDF_TEXT, 'wrist_3_link', 'mount',
                                               (4e-3, 4e-3, 4e-3)))
    for q, qd, qdd in np.random.default_rng(3).uniform(-2, 2, (3, 3, 6)):
        np.testing.assert_allclose(mount.inverse_dynamics(q, qd, qdd),
                                   pin.rnea(balanced, balanced.createData(), q, qd, qdd),
                                   atol=1e-9)


def test_payload_is_a_point_mass_at_its_com(oracle):
    model, _ = oracle
    com = (0.01, -0.02, 0.05)
    heavier = with_point_mass(model, 2.0, com)
    plant = Plant(URDF_TEXT, PlantOptions(payload_mass=2.0, payload_com=com))
    for q, qd, qdd in np.random.default_rng(1).uniform(-2, 2, (5, 3, 6)):
        np.testing.assert_allclose(plant.inverse_dynamics(q, qd, qdd),
                                   pin.rnea(heavier, heavier.createData(), q, qd, qdd),
                                   atol=1e-9)


def euler_step(model, data, q, qd, tau, damping, dt=0.001):
    """qd1 of one semi-implicit Euler step, damping implicit, by Pinocchio:
    (M + dt D) qd1 = M qd0 + dt (tau - h(q, qd0)) (M with the model's armature)."""
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    h = pin.rnea(model, data, q, qd, np.zeros(len(q)))
    return np.linalg.solve(M + dt * np.diag(damping), M @ qd + dt * (tau - h))


def test_one_step_follows_forward_dynamics_with_damping(oracle):
    """Semi-implicit Euler, damping implicit: (M + dt D) qd1 = M qd0 + dt (tau - h(q, qd0)),
    q1 = q0 + dt qd1."""
    model, data = oracle
    damping = np.array([2.0, 2.0, 1.0, 0.5, 0.5, 0.2])
    plant = Plant(URDF_TEXT, PlantOptions(damping=tuple(damping)))
    q, qd = HOME + 0.1, np.full(6, 0.3)
    tau = np.array([5.0, 40.0, 20.0, 2.0, 1.0, 0.1])
    plant.reset(q, qd)
    plant.step(tau)
    qd1 = euler_step(model, data, q, qd, tau, damping)
    np.testing.assert_allclose(plant.qd, qd1, atol=1e-10)
    np.testing.assert_allclose(plant.q, q + 0.001 * qd1, atol=1e-12)


def test_armature_is_pinocchios_model_armature(oracle):
    """MuJoCo's armature (issue 23) as Pinocchio's model.armature: inverse dynamics, and one
    step with damping: (M + diag(a) + dt D) qd1 = (M + diag(a)) qd0 + dt (tau - h)."""
    model, _ = oracle
    armature, damping = np.array([0.2, 0.2, 0.1, 0.07, 0.07, 0.07]), np.full(6, 1.0)
    geared = model.copy()
    geared.armature[:] = armature
    data = geared.createData()
    plant = Plant(URDF_TEXT, PlantOptions(armature=tuple(armature), damping=tuple(damping)))
    q, qd, qdd = HOME + 0.1, np.full(6, 0.3), np.linspace(-1.0, 1.0, 6)
    np.testing.assert_allclose(plant.inverse_dynamics(q, qd, qdd),
                               pin.rnea(geared, data, q, qd, qdd) + damping * qd, atol=1e-9)
    tau = np.array([5.0, 40.0, 20.0, 2.0, 1.0, 0.1])
    plant.reset(q, qd)
    plant.step(tau)
    np.testing.assert_allclose(plant.qd, euler_step(geared, data, q, qd, tau, damping),
                               atol=1e-10)


def test_gravity_torques_hold_the_arm_still(oracle):
    model, data = oracle
    plant = Plant(URDF_TEXT)
    plant.reset(HOME)
    g = pin.computeGeneralizedGravity(model, data, HOME)
    for _ in range(2000):
        plant.step(g)
    np.testing.assert_allclose(plant.q, HOME, atol=1e-9)
    assert plant.time == pytest.approx(2.0)


def test_commands_are_clipped_to_the_urdf_effort_limits():
    plant = Plant(URDF_TEXT)
    plant.reset(HOME)
    applied = plant.step([500.0, -500.0, 10.0, 100.0, -100.0, 1.0])
    np.testing.assert_array_equal(applied, [150.0, -150.0, 10.0, 28.0, -28.0, 1.0])


def test_an_external_push_is_added_after_the_effort_clamp(oracle):
    """`external` (the world's push, rnea-sim's push.*) is not clipped: a command at the limit
    plus 40 N·m on wrist_1 moves the arm as Pinocchio's step of tau = clamp(command) + push."""
    model, data = oracle
    plant = Plant(URDF_TEXT)
    q, qd = HOME + 0.1, np.full(6, 0.3)
    plant.reset(q, qd)
    plant.external[3] = 40.0
    applied = plant.step([5.0, 40.0, 20.0, 100.0, 1.0, 0.1])
    assert applied[3] == 28.0  # the drive's part, reported as the effort
    tau = np.array([5.0, 40.0, 20.0, 28.0 + 40.0, 1.0, 0.1])
    np.testing.assert_allclose(plant.qd, euler_step(model, data, q, qd, tau, np.zeros(6)),
                               atol=1e-10)


def test_bad_inputs_are_refused_with_the_reason():
    plant = Plant(URDF_TEXT)
    with pytest.raises(DimensionError, match='tau has 5 values, but the plant has 6'):
        plant.step(np.zeros(5))
    with pytest.raises(DimensionError, match='non-finite'):
        plant.step([0, 0, np.nan, 0, 0, 0])
    with pytest.raises(ParameterError, match='damping has 2 values'):
        Plant(URDF_TEXT, PlantOptions(damping=(1.0, 2.0)))
    with pytest.raises(ParameterError, match="payload link 'nowhere'"):
        Plant(URDF_TEXT, PlantOptions(payload_mass=1.0, payload_link='nowhere'))
    with pytest.raises(ParameterError, match='payload mass'):
        Plant(URDF_TEXT, PlantOptions(payload_mass=-1.0))


def test_command_hold_delay_and_timeout():
    hold = CommandHold(2, delay=0.01, timeout=0.1)
    assert hold.status(0.0) == 'waiting'
    hold.push(1.0, [1.0, 2.0])
    assert hold.status(1.005) == 'waiting'  # still in transit
    np.testing.assert_array_equal(hold.current(1.01), [1.0, 2.0])
    np.testing.assert_array_equal(hold.current(1.1), [1.0, 2.0])  # held
    assert hold.status(1.111) == 'timed out'
    np.testing.assert_array_equal(hold.current(1.2), [0.0, 0.0])
    hold.push(1.3, [3.0, 4.0])
    np.testing.assert_array_equal(hold.current(1.31), [3.0, 4.0])


def test_sensor_noise_has_the_requested_spread():
    rng = np.random.default_rng(7)
    q, qd = np.zeros((20000, 6)), np.ones((20000, 6))
    measured_q, measured_qd = measure(q, qd, rng, position_std=1e-3, velocity_std=2e-2)
    assert np.std(measured_q) == pytest.approx(1e-3, rel=0.02)
    assert np.std(measured_qd) == pytest.approx(2e-2, rel=0.02)
    assert np.mean(measured_qd) == pytest.approx(1.0, abs=1e-3)
    np.testing.assert_array_equal(measure(q, qd, rng)[0], q)  # no noise by default


def test_command_hold_has_no_timeout_by_default():
    """As JointGroupEffortController: the last command forever."""
    hold = CommandHold(1)
    hold.push(0.0, [2.0])
    np.testing.assert_array_equal(hold.current(3600.0), [2.0])


def test_a_gravity_compensating_arm_adds_its_nominal_gravity(oracle):
    """g(q) is MuJoCo's and equals Pinocchio's; with compensates_gravity a zero command holds
    the arm still, but a payload the robot does not know makes it sag."""
    model, data = oracle
    plant = Plant(URDF_TEXT, PlantOptions(compensates_gravity=True))
    q = HOME + np.array([0.3, 0.2, -0.4, 0.1, 0.5, 0.0])
    np.testing.assert_allclose(plant.gravity(q), pin.computeGeneralizedGravity(model, data, q),
                               atol=1e-9)
    plant.reset(q)
    for _ in range(1000):
        assert np.all(plant.step(np.zeros(6)) == 0.0)  # the reported effort is the command
    np.testing.assert_allclose(plant.q, q, atol=1e-9)
    loaded = Plant(URDF_TEXT, PlantOptions(compensates_gravity=True, payload_mass=1.5))
    loaded.reset(q)
    for _ in range(200):
        loaded.step(np.zeros(6))
    assert np.max(np.abs(loaded.q - q)) > 1e-3


def test_perturbed_links_are_a_consistent_arm_that_differs_from_the_urdf(oracle):
    """link_errors: the plant's truth (Pinocchio on the perturbed URDF is the oracle of its
    inverse dynamics), every moving link within the requested errors, each physically
    consistent (Pinocchio's pseudo-inertia positive semi-definite), seeded."""
    options = PlantOptions(link_errors=(7, 0.3, 0.3, 0.03))
    plant = Plant(URDF_TEXT, options)
    assert Plant(URDF_TEXT, options).urdf == plant.urdf  # the seed fixes the arm
    truth = pin.buildModelFromXML(plant.urdf)
    nominal, _ = oracle
    changed = 0
    for k in range(1, nominal.njoints):
        a, b = nominal.inertias[k], truth.inertias[k]
        assert abs(b.mass / a.mass - 1) <= 0.3 + 1e-12
        assert np.linalg.norm(b.lever - a.lever) <= 0.03 + 1e-12
        assert np.linalg.eigvalsh(pin.PseudoInertia.FromInertia(b).toMatrix())[0] >= -1e-12
        changed += not np.isclose(b.mass, a.mass)
    assert changed == nominal.njoints - 1
    q, qd, qdd = np.random.default_rng(3).uniform(-2, 2, (3, 6))
    true_tau = pin.rnea(truth, truth.createData(), q, qd, qdd)
    np.testing.assert_allclose(plant.inverse_dynamics(q, qd, qdd), true_tau, atol=1e-9)
    assert np.max(np.abs(true_tau - pin.rnea(nominal, nominal.createData(), q, qd, qdd))) > 0.5
    np.testing.assert_allclose(plant.gravity(q), pin.computeGeneralizedGravity(
        nominal, nominal.createData(), q), atol=1e-9)  # the robot's own g(q) stays nominal
