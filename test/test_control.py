"""Control law and limits against Pinocchio (rnea, crba) on real URDFs; parameter validation."""
from conftest import robot_data_urdf
import numpy as np
import pinocchio as pin
import pytest

from rnea_controller import DescriptionWarning, gravity_torques, RobotModel
from rnea_controller.control import law
from rnea_controller.control.law import Controller, default_gains, validate_parameters
from rnea_controller.control.parameters import defaults
from rnea_controller.errors import ParameterError

PANDA_FINGERS = ['panda_finger_joint1', 'panda_finger_joint2']
ROBOTS = {
    'ur5': ('ur_description/urdf/ur5_robot.urdf', []),
    'panda': ('panda_description/urdf/panda.urdf', PANDA_FINGERS),
}
TOOL = {'ur5': 'tool0', 'panda': 'panda_hand'}


class Oracle:
    """Pinocchio's model of the same URDF, indexed in our model's joint order."""

    def __init__(self, path, locked, names):
        full = pin.buildModelFromUrdf(str(path))
        locked_ids = [full.getJointId(name) for name in locked]
        self.model = (pin.buildReducedModel(full, locked_ids, pin.neutral(full))
                      if locked_ids else full)
        self.data = self.model.createData()
        self.order = np.array([self.model.joints[self.model.getJointId(n)].idx_q for n in names])

    def to_pin(self, x):
        out = np.zeros(self.model.nq)
        out[self.order] = x
        return out

    def rnea(self, q, qd, qdd, fext=None):
        args = [self.to_pin(q), self.to_pin(qd), self.to_pin(qdd)]
        if fext is not None:
            args.append(fext)
        return pin.rnea(self.model, self.data, *args)[self.order]

    def friction(self, qd_d, index=slice(None)):
        """The law's friction feedforward with `friction_source: urdf` (FROZEN below): the
        URDF's <dynamics> as Pinocchio reads it (model.damping, model.friction), at the
        default width 0.01 rad/s."""
        b, c = (x[self.order][index] for x in (self.model.damping, self.model.friction))
        return b * qd_d + c * np.tanh(qd_d / 0.01)

    def crba_and_bias(self, q, qd):
        M = pin.crba(self.model, self.data, self.to_pin(q))
        M = np.triu(M) + np.triu(M, 1).T
        h = pin.nonLinearEffects(self.model, self.data, self.to_pin(q), self.to_pin(qd))
        return M[np.ix_(self.order, self.order)], h[self.order]

    def link_wrench(self, link, wrench):
        """Our f_ext {link: wrench in the link frame} as Pinocchio's per-joint local forces."""
        frame = self.model.frames[self.model.getFrameId(link)]
        fext = [pin.Force.Zero() for _ in range(self.model.njoints)]
        fext[frame.parentJoint] = frame.placement.act(pin.Force(np.asarray(wrench)))
        return fext


# One tick's law against the oracle: the URDF friction applied (issue 13's opt-in) and the law's
# state frozen (no estimation, no integral), so that each tick is the formula of the module doc.
FROZEN = {'friction_source': 'urdf', 'estimation.forgetting_time': 0.0, 'integral_gain': 0.0}


def frozen(values=None):
    return {**FROZEN, **(values or {})}


@pytest.fixture(scope='module', params=sorted(ROBOTS))
def robot(request):
    relative, locked = ROBOTS[request.param]
    path = robot_data_urdf(relative)
    model = RobotModel.from_urdf_file(path, locked_joints=locked)
    oracle = Oracle(path, locked, model.joint_names)
    oracle.tool = TOOL[request.param]
    return model, oracle


def random_state(model, rng, scale=0.3):
    lower, upper = model.position_limits.T
    q = rng.uniform(np.maximum(lower, -3.0), np.minimum(upper, 3.0))
    ref = np.stack([q + rng.normal(0, scale, model.n), rng.normal(0, 1, model.n),
                    rng.normal(0, 2, model.n)])
    return q, rng.normal(0, 1, model.n), ref


def assert_computed_torque(controller, tau, cfg, q, qd, ref, rnea, friction):
    """tau and the controller's feedforward are the oracle's computed torque: `rnea` (the
    oracle's inverse dynamics) at qdd = qdd_d + Kp e + Kd ed, plus `friction`, clamped."""
    qdd = ref[2] + cfg.kp * (ref[0] - q) + cfg.kd * (ref[1] - qd)
    np.testing.assert_allclose(tau, np.clip(rnea(q, qd, qdd) + friction, -cfg.effort_limits,
                                            cfg.effort_limits), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(controller.feedforward, rnea(*ref) + friction, atol=1e-9)


def test_computed_torque_equals_pinocchio_rnea_and_crba(robot):
    model, oracle = robot
    cfg = validate_parameters(frozen({'gains.' + model.joint_names[0] + '.p': 90.0}), model)
    controller, rng = Controller(cfg), np.random.default_rng(1)
    for _ in range(20):
        q, qd, ref = random_state(model, rng)
        tau = controller.command(cfg, q, qd, ref).copy()
        qdd = ref[2] + cfg.kp * (ref[0] - q) + cfg.kd * (ref[1] - qd)
        expected = oracle.rnea(q, qd, qdd)
        np.testing.assert_allclose(tau, np.clip(expected + oracle.friction(ref[1]),
                                                -cfg.effort_limits, cfg.effort_limits),
                                   rtol=1e-9, atol=1e-9)
        M, h = oracle.crba_and_bias(q, qd)
        np.testing.assert_allclose(expected, M @ qdd + h, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(controller.feedforward,
                                   oracle.rnea(*ref) + oracle.friction(ref[1]), atol=1e-9)
    assert cfg.kp[0] == 90.0 and cfg.kp[1] == 400.0 and cfg.kd[0] == 40.0


def test_a_tick_passing_the_same_arrays_written_in_place_equals_pinocchio(robot):
    """As the node's tick: the same q, qd, ref objects, new values in place each call (the
    controller then calls the compiled law without numba's dispatch); between them, calls
    with other arrays (the dispatcher's way)."""
    model, oracle = robot
    cfg = validate_parameters(frozen(), model)
    controller, rng = Controller(cfg), np.random.default_rng(4)
    q, qd, ref = (np.zeros(model.n), np.zeros(model.n), np.zeros((3, model.n)))
    for k in range(12):
        q[:], qd[:], ref[:] = random_state(model, rng)
        args = (q, qd, ref) if k % 4 != 3 else (q.copy(), qd.copy(), ref.copy())
        tau = controller.command(cfg, *args).copy()
        assert_computed_torque(controller, tau, cfg, q, qd, ref, oracle.rnea,
                               oracle.friction(ref[1]))
    assert controller._entry is not None and controller._entry[1][3] is q  # taken


def test_feedforward_pd_equals_pinocchio_rnea_plus_pd(robot):
    model, oracle = robot
    cfg = validate_parameters(frozen({'control_law': 'feedforward_pd'}), model)
    controller, rng = Controller(cfg), np.random.default_rng(2)
    for _ in range(20):
        q, qd, ref = random_state(model, rng)
        tau = controller.command(cfg, q, qd, ref)
        expected = (oracle.rnea(*ref) + cfg.kp * (ref[0] - q) + cfg.kd * (ref[1] - qd)
                    + oracle.friction(ref[1]))
        np.testing.assert_allclose(tau, np.clip(expected, -cfg.effort_limits, cfg.effort_limits),
                                   rtol=1e-9, atol=1e-9)


def test_feedforward_pd_default_gains_scale_with_the_joint_inertia(robot):
    model, oracle = robot
    cfg = validate_parameters({'control_law': 'feedforward_pd'}, model)
    q0 = np.clip(np.zeros(model.n), *model.position_limits.T)
    M, _ = oracle.crba_and_bias(q0, np.zeros(model.n))
    inertia = np.maximum(np.diag(M), 1e-3)
    np.testing.assert_allclose(cfg.kp, 400.0 * inertia, rtol=1e-9)
    np.testing.assert_allclose(cfg.kd, 40.0 * inertia, rtol=1e-9)
    np.testing.assert_array_equal(default_gains(model, np.arange(model.n), 'computed_torque')[0],
                                  np.full(model.n, 400.0))


def test_joints_not_controlled_enter_rnea_at_their_measured_state(robot):
    model, oracle = robot
    joints = [model.joint_names[1], model.joint_names[0], model.joint_names[3]]
    cfg = validate_parameters(frozen({'joints': joints}), model)
    q, qd, full_ref = random_state(model, np.random.default_rng(3))
    ref = full_ref[:, cfg.index]
    tau = Controller(cfg).command(cfg, q, qd, ref)
    qdd = np.zeros(model.n)
    qdd[cfg.index] = ref[2] + 400.0 * (ref[0] - q[cfg.index]) + 40.0 * (ref[1] - qd[cfg.index])
    expected = oracle.rnea(q, qd, qdd)[cfg.index] + oracle.friction(ref[1], cfg.index)
    np.testing.assert_allclose(tau, np.clip(expected, -cfg.effort_limits, cfg.effort_limits),
                               rtol=1e-9, atol=1e-9)


def test_arrays_of_any_layout_take_the_law_s_one_compiled_signature(robot):
    """A reference sliced from a wider array (`full[:, index]` is Fortran-ordered) and states
    read with a stride: the same torques as C-ordered copies, and no new compiled signature
    of the law (one would compile inside the tick: 10 s on a quiet host)."""
    model, _ = robot
    joints = [model.joint_names[1], model.joint_names[0], model.joint_names[3]]
    cfg = validate_parameters(frozen({'joints': joints}), model)
    q, qd, full_ref = random_state(model, np.random.default_rng(5))
    ref = full_ref[:, cfg.index]
    assert ref.flags.f_contiguous and not ref.flags.c_contiguous
    wide = np.vstack((q, qd)).T.copy()  # (n, 2): its columns are strided
    expected = Controller(cfg).command(cfg, q.copy(), qd.copy(), np.ascontiguousarray(ref))
    signatures = len(law._law.signatures)
    tau = Controller(cfg).command(cfg, wide[:, 0], wide[:, 1], ref)
    np.testing.assert_array_equal(tau, expected)
    assert len(law._law.signatures) == signatures


def test_payload_gravity_and_external_wrench_match_pinocchio(robot):
    model, oracle = robot
    link = oracle.tool
    payload = {'payload.link': link, 'payload.mass': 1.5, 'payload.com': [0.01, 0.02, 0.05],
               'payload.inertia': [0.01, 0.0, 0.0, 0.02, 0.0, 0.03], 'gravity': [0.5, 0, -9.7]}
    cfg = validate_parameters(frozen(payload), model)
    frame = oracle.model.frames[oracle.model.getFrameId(link)]
    inertia = pin.Inertia(1.5, np.array([0.01, 0.02, 0.05]), np.diag([0.01, 0.02, 0.03]))
    pin_model = oracle.model.copy()
    pin_model.inertias[frame.parentJoint] += frame.placement.act(inertia)
    pin_model.gravity.linear = np.array([0.5, 0, -9.7])
    with_payload = Oracle.__new__(Oracle)
    with_payload.model, with_payload.data = pin_model, pin_model.createData()
    with_payload.order = oracle.order
    q, qd, ref = random_state(model, np.random.default_rng(4), scale=0.01)
    wrench = np.array([3.0, -2.0, 5.0, 0.2, 0.1, -0.3])
    tau = Controller(cfg).command(cfg, q, qd, ref, f_ext={link: wrench})
    qdd = ref[2] + cfg.kp * (ref[0] - q) + cfg.kd * (ref[1] - qd)
    expected = (with_payload.rnea(q, qd, qdd, with_payload.link_wrench(link, wrench))
                + oracle.friction(ref[1]))
    np.testing.assert_allclose(tau, np.clip(expected, -cfg.effort_limits, cfg.effort_limits),
                               rtol=1e-9, atol=1e-9)


@pytest.fixture(scope='module')
def ur5():
    return RobotModel.from_urdf_file(robot_data_urdf(ROBOTS['ur5'][0]))


@pytest.fixture(scope='module')
def xarm7():
    return RobotModel.from_urdf_file(robot_data_urdf('xarm_description/urdf/xarm7.urdf'))


def test_effort_clamp_takes_the_smaller_limit_and_counts_saturation(ur5):
    wrist = ur5.joint_names[-1]
    cfg = validate_parameters({f'effort_limits.{wrist}': 5.0}, ur5)
    assert cfg.effort_limits[-1] == 5.0 and cfg.effort_limits[0] == ur5.effort_limits[0]
    controller = Controller(cfg)
    q = np.zeros(ur5.n)
    ref = np.zeros((3, ur5.n))
    ref[0] = np.linspace(1.0, 3.0, ur5.n)  # large errors: every joint wants more than its limit
    for _ in range(3):
        tau = controller.command(cfg, q, q, ref)
    np.testing.assert_allclose(np.abs(tau), cfg.effort_limits)
    assert controller.saturation.tolist() == [3] * ur5.n


def test_torque_rate_limit_bounds_the_step_between_ticks(ur5):
    cfg = validate_parameters({'torque_rate_limit': 1000.0}, ur5)  # 1 N·m per 1 ms tick
    controller = Controller(cfg)
    q = np.zeros(ur5.n)
    first = controller.gravity_hold(cfg, q).copy()  # the first command is not rate limited
    ref = np.zeros((3, ur5.n))
    ref[0] = 0.5
    second = controller.command(cfg, q, q, ref).copy()
    assert np.all(np.abs(second - first) <= 1.0 + 1e-12)
    assert np.any(np.abs(second - first) > 0.99)


def _step_bounds(model, delay, damped=False):
    """Issue 43's step bound per joint from Pinocchio: (M_ii(q0) / max(delay, 1 ms) + b) qd_max
    [N·m], q0 the zero position clipped into the limits, M by CRBA on the URDF, b its
    <dynamics damping> where the law is told it (`damped`), else 0."""
    pm = pin.buildModelFromXML(model.urdf)
    q0 = np.clip(np.zeros(model.n), model.position_limits[:, 0], model.position_limits[:, 1])
    M = pin.crba(pm, pm.createData(), q0)
    b = np.asarray(pm.damping) if damped else np.zeros(model.n)
    return (np.diag(M) / max(delay, 1e-3) + b) * np.asarray(model.velocity_limits)


@pytest.mark.parametrize('delay', [0.0, 0.01])
def test_the_step_bound_holds_on_commands_the_law_was_never_meant_to_make(ur5, delay):
    """Issue 43: between two ticks a joint's command changes by at most M_ii(q0) qd_max / d,
    d the loop's lateness (at least a period): the torque that takes the joint from rest to its
    velocity limit before the loop can see it answer. A law gone bang-bang (gains 1e5 1/s²,
    the error flipping sign every tick: the raw command swings between the effort limits)
    reaches the arm as a ramp within that bound; the bound acts, and is counted per joint."""
    values = {'estimation.forgetting_time': 0.0, 'integral_gain': 0.0,
              **{f'gains.{j}.p': 1e5 for j in ur5.joint_names}}
    cfg = validate_parameters(values, ur5)
    controller = Controller(cfg)
    controller.lateness = delay
    bounds = _step_bounds(ur5, delay)
    q, ref = np.zeros(ur5.n), np.zeros((3, ur5.n))
    previous = controller.gravity_hold(cfg, q).copy()
    steps = []
    for k in range(40):
        ref[0] = 0.5 if k % 2 else -0.5
        tau = controller.command(cfg, q, q, ref).copy()
        steps.append(np.abs(tau - previous))
        previous = tau
    steps = np.array(steps)
    assert np.all(steps <= bounds * (1 + 1e-9) + 1e-12), (steps.max(axis=0), bounds)
    held = bounds < 2.0 * cfg.effort_limits  # the joints whose bound is below the swing
    assert held.any() and np.all(controller.stepped[held] > 0), controller.stepped
    np.testing.assert_allclose(controller.step_bounds, bounds, rtol=1e-9)


def test_the_step_bound_holds_over_the_loop_s_lateness_not_per_tick(ur5):
    """The bound is what the joint can take within the time the loop needs to see it answer,
    d: a command that changed by a bound at each of d / dt ticks would have moved the joint
    d / dt times further unwatched (stop 57: the xArm7's stuck joint7, commands 9 ms late,
    broke away under 1.5 N·m, 0.6 beyond what moved it, and braked). A law ramping far faster
    (gains 1e5 1/s², its reference running away 5 mrad a tick), commands 10 ms late: every
    published command is within one bound of each of the ten before it (M_ii by Pinocchio),
    where the bound per tick let the wrist's command move five bounds within d (to its
    effort limit)."""
    values = {'estimation.forgetting_time': 0.0, 'integral_gain': 0.0,
              **{f'gains.{j}.p': 1e5 for j in ur5.joint_names}}
    cfg = validate_parameters(values, ur5)
    controller = Controller(cfg)
    controller.lateness = 0.01
    bounds = _step_bounds(ur5, 0.01)
    q, ref = np.zeros(ur5.n), np.zeros((3, ur5.n))
    commands = [controller.gravity_hold(cfg, q).copy()]
    for k in range(60):
        ref[0] = -0.005 * k  # a pull of Kp M 5e-3 N·m more each tick, the same way
        commands.append(controller.command(cfg, q, q, ref).copy())
    commands = np.array(commands)
    within = np.max([np.abs(commands[10:] - commands[10 - j:len(commands) - j]).max(axis=0)
                     / bounds for j in range(1, 11)], axis=0)  # per joint, over the last d
    assert np.all(within <= 1 + 1e-9), within
    held = controller.stepped > 0  # the joints whose bound acts (the wrist's: 5.5 N·m)
    moved = np.abs(commands[-1] - commands[1]) / bounds  # a ramp, one bound per d
    assert held.any() and np.all(moved[held] >= 4.0), (controller.stepped, moved)


def test_a_joint_its_friction_damps_may_step_by_what_the_damping_takes(xarm7):
    """The step bound of a joint told a viscous friction b adds b qd_max: its velocity answers
    a torque step Δ by at most Δ / b however light it is (the SO-100's wrist, 1e-5 kg·m² under
    2 N·m·s/rad, had its command held at 0.01 N·m per tick by the inertia's bound alone, and
    driven away from its goal for half a second by a command the law had left; issue 43's
    corpus). The xArm7 told its URDF's damping (10/10/5/5/5/2/2), the estimate off: the bound
    is (M_ii(q0) / d + b) qd_max, M and b by Pinocchio."""
    values = {'estimation.forgetting_time': 0.0, 'integral_gain': 0.0,
              'friction_source': 'urdf'}
    cfg = validate_parameters(values, xarm7)
    controller = Controller(cfg)
    controller.lateness = 0.01
    q, ref = np.zeros(xarm7.n), np.zeros((3, xarm7.n))
    controller.command(cfg, q, q, ref)
    bounds = _step_bounds(xarm7, 0.01, damped=True)
    assert np.all(bounds > _step_bounds(xarm7, 0.01) + 1.0)
    np.testing.assert_allclose(controller.step_bounds, bounds, rtol=1e-9)


def test_the_brake_is_not_held_by_the_step_bound(ur5):
    """Into the brake the command may change at once: M(q)(-rate qd) + g(q), clamped."""
    cfg = validate_parameters({}, ur5)
    controller = Controller(cfg)
    controller.lateness = 0.01
    q, ref = np.zeros(ur5.n), np.zeros((3, ur5.n))
    previous = controller.command(cfg, q, q, ref).copy()
    qd = np.full(ur5.n, 10.0)  # [rad/s] beyond every limit: the brake damps M(q) 40 qd
    tau = controller.brake(cfg, q, qd).copy()
    pm = pin.buildModelFromXML(ur5.urdf)
    expected = pin.rnea(pm, pm.createData(), q, np.zeros(ur5.n), -40.0 * qd)
    np.testing.assert_allclose(tau, np.clip(expected, -cfg.effort_limits, cfg.effort_limits),
                               rtol=1e-9, atol=1e-9)
    assert np.abs(tau - previous)[-1] > _step_bounds(ur5, 0.01)[-1]  # the wrist's, at once


@pytest.mark.parametrize('bad', ['q', 'ref'])
def test_non_finite_input_falls_back_to_a_finite_hold(ur5, bad):
    cfg = validate_parameters({}, ur5)
    controller = Controller(cfg)
    q = np.full(ur5.n, 0.3)
    ref = np.zeros((3, ur5.n))
    if bad == 'ref':
        ref[1, 2] = np.nan
        tau = controller.command(cfg, q, q, ref)
        hold = np.clip(gravity_torques(ur5, q), -cfg.effort_limits, cfg.effort_limits)
        np.testing.assert_allclose(tau, hold, rtol=1e-12)
        assert np.any(np.abs(hold) > 1.0)
    else:
        q_bad = q.copy()
        q_bad[0] = np.inf
        tau = controller.command(cfg, q_bad, q, ref)
        np.testing.assert_array_equal(tau, np.zeros(ur5.n))
    assert np.all(np.isfinite(tau)) and controller.fallbacks >= 1


@pytest.mark.parametrize('values, message', [
    ({'control_law': 'pid'}, "control_law = 'pid': must be one of computed_torque"),
    ({'gains.elbow_joint.p': -1.0}, r'gains.elbow_joint.p = -1.0: is out of range \[0, 1e\+06\]'),
    ({'gains.elbow_joint.d': float('nan')}, 'gains.elbow_joint.d = nan'),
    ({'gains.nope.p': 1.0}, "gains.nope.p: 'nope' is not a controlled joint"),
    ({'effort_limits.elbow_joint': 1000.0}, 'above the URDF limit 150 N·m'),
    ({'effort_limits.elbow_joint': 0.0},
     r'effort_limits.elbow_joint = 0.0: is out of range \(0,'),
    ({'torque_rate_limit': -5.0}, 'torque_rate_limit = -5.0'),
    ({'payload.link': 'moon', 'payload.mass': 1.0}, "payload.link = 'moon': unknown link"),
    ({'payload.link': 'tool0', 'payload.mass': -1.0}, 'payload.mass = -1.0'),
    ({'payload.link': 'tool0', 'payload.mass': 1.0, 'payload.inertia': [-1, 0, 0, 1, 0, 1]},
     'not positive semi-definite'),
    ({'payload.com': [0.0, 0.0]}, r'payload.com = \[0.0, 0.0\]: must be 3 finite numbers'),
    ({'gravity': [0.0, float('nan'), -9.81]}, 'gravity = .*must be 3 finite numbers'),
    ({'joints': ['elbow_joint', 'wrist']}, "joints: 'wrist' is not a joint of the model"),
    ({'joints': ['elbow_joint', 'elbow_joint']}, 'listed twice'),
    ({'update_rate': 0}, r'update_rate = 0: is out of range \[10, 10000\] Hz'),
    ({'state_timeout': 0.0}, 'state_timeout'),
    ({'stale_policy': 'panic'}, "stale_policy = 'panic': must be one of hold_then_stop"),
    ({'final_command': 'brake'}, "final_command = 'brake'"),
])
def test_validate_parameters_refuses_with_the_parameter_and_value(ur5, values, message):
    with pytest.raises(ParameterError, match=message):
        validate_parameters(values, ur5)


def test_defaults_are_valid_and_control_every_joint_in_model_order(ur5):
    cfg = validate_parameters(defaults(), ur5)
    assert cfg.joints == ur5.joint_names and cfg.law == 'computed_torque'
    assert cfg.period == pytest.approx(1e-3) and cfg.torque_rate_limit == 0.0


def test_nothing_compiles_in_a_tick_after_the_controller_is_built(ur5):
    """Every compiled signature a tick can use (with and without a wrench, the gravity hold,
    a non-finite state) exists once Controller() returns: no compile pause in the loop."""
    from rnea_controller.control import law as control
    kernels = (control._law, control._limit)
    cfg = validate_parameters({'torque_rate_limit': 1000.0}, ur5)
    controller = Controller(cfg)
    assert controller.fallbacks == 0 and not controller.saturation.any()  # warm-up uncounted
    before = [len(kernel.signatures) for kernel in kernels]
    q, ref = np.full(ur5.n, 0.3), np.zeros((3, ur5.n))
    controller.command(cfg, q, q, ref)
    controller.command(cfg, q, q, ref, f_ext={ur5.link_names[-1]: np.ones(6)})
    controller.command(cfg, np.full(ur5.n, np.nan), q, ref)
    controller.gravity_hold(cfg, q)
    assert [len(kernel.signatures) for kernel in kernels] == before
    assert controller.fallbacks == 1


def test_mimic_joints_are_never_controlled_and_uncontrolled_ones_need_no_effort_limit():
    """Panda with its hand as published: the default controls the seven arm joints (not the
    fingers: a mimic pair); a mimic joint cannot be listed; a finger's absent effort limit
    matters only if it is controlled, and then the message names the parameter for it."""
    text = robot_data_urdf('panda_description/urdf/panda.urdf').read_text()
    model = RobotModel.from_urdf_string(text)
    assert validate_parameters({}, model).joints == model.joint_names[:7]
    with pytest.raises(ParameterError, match="joints: 'panda_finger_joint2' is a mimic joint of "
                       "'panda_finger_joint1' in the URDF"):
        validate_parameters({'joints': ['panda_joint1', 'panda_finger_joint2']}, model)
    no_limit = RobotModel.from_urdf_string(text.replace('effort="100"', 'effort="0"'))
    arm = [f'panda_joint{k}' for k in range(1, 8)]
    assert validate_parameters({'joints': arm}, no_limit).effort_limits.tolist() == [
        87.0] * 4 + [12.0] * 3
    with pytest.raises(ParameterError, match="joint 'panda_finger_joint1' has no effort limit in "
                       r'the URDF \(no <limit effort> or effort="0"\): set '
                       r'effort_limits.panda_finger_joint1 \[N·m\]'):
        validate_parameters({'joints': [*arm, 'panda_finger_joint1']}, no_limit)
    cfg = validate_parameters({'joints': [*arm, 'panda_finger_joint1'],
                               'effort_limits.panda_finger_joint1': 20.0}, no_limit)
    assert cfg.effort_limits[-1] == 20.0


def one_link_arm(izz):
    """A revolute joint about z carrying a 1 kg link whose centre of mass is on the axis, so
    that M = izz exactly [kg·m²] (the oracle: the physics of a body spinning about its com)."""
    return ('<robot name="one"><link name="base"/><link name="arm"><inertial><mass value="1"/>'
            f'<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="{izz}"/>'
            '</inertial></link>'
            '<joint name="j" type="revolute"><parent link="base"/><child link="arm"/>'
            '<axis xyz="0 0 1"/><limit effort="10" velocity="1" lower="-1" upper="1"/>'
            '</joint></robot>')


def test_an_inertia_that_turns_computed_torque_around_is_refused_at_configure():
    """A negative moment within the description's warning band (romeo_laas_small's hips) loads
    with a warning; where it makes M(q0) of a controlled joint negative, the controller refuses:
    computed torque M (Kp e) would push away from the goal."""
    with pytest.warns(DescriptionWarning, match='not positive semi-definite'):
        model = RobotModel.from_urdf_string(one_link_arm(-0.005))
    oracle = pin.buildModelFromXML(one_link_arm(-0.005))
    assert pin.crba(oracle, oracle.createData(), np.zeros(1))[0, 0] == pytest.approx(-0.005)
    with pytest.raises(ParameterError, match=r'M\(q0\) of the controlled joints is not positive '
                       r'definite \(eigenvalues -0.005 to -0.005 kg·m²\)'):
        validate_parameters({}, model)
    validate_parameters({}, RobotModel.from_urdf_string(one_link_arm(0.005)))


def test_romeo_with_its_warned_hip_inertias_configures():
    """Its hips' -5 % moments are outweighed in M(q) by the legs below them."""
    with pytest.warns(DescriptionWarning, match="'LHipPitch_link'"):
        model = RobotModel.from_urdf_file(
            robot_data_urdf('romeo_description/urdf/romeo_laas_small.urdf'))
    assert validate_parameters({}, model).joints


def test_armature_parameters_enter_every_law_row_as_pinocchio_model_armature(robot):
    """armature.<joint> (issue 23): computed torque, the feedforward and the feedforward_pd
    default gains use M + diag(armature), as Pinocchio does with `model.armature` set."""
    model, oracle = robot
    armature = np.random.default_rng(5).uniform(0.07, 0.2, model.n)
    values = {f'armature.{j}': a for j, a in zip(model.joint_names, armature)}
    geared = Oracle.__new__(Oracle)
    geared.model, geared.order = oracle.model.copy(), oracle.order
    geared.model.armature[oracle.order] = armature
    geared.data = geared.model.createData()
    cfg = validate_parameters(frozen(values), model)
    controller, rng = Controller(cfg), np.random.default_rng(6)
    for _ in range(5):
        q, qd, ref = random_state(model, rng)
        tau = controller.command(cfg, q, qd, ref).copy()
        assert_computed_torque(controller, tau, cfg, q, qd, ref, geared.rnea,
                               oracle.friction(ref[1]))
    pd = validate_parameters({**values, 'control_law': 'feedforward_pd'}, model)
    q0 = np.clip(np.zeros(model.n), *model.position_limits.T)
    M, _ = geared.crba_and_bias(q0, np.zeros(model.n))
    np.testing.assert_allclose(pd.kp, 400.0 * np.maximum(np.diag(M), 1e-3), rtol=1e-9)


def test_urdf_friction_is_reported_applied_only_with_friction_source_urdf(robot):
    """Issue 29: the URDF's <dynamics> are read and named at configure, fed forward only with
    friction_source: urdf; friction.<joint>.* (identification) apply with either source."""
    model, oracle = robot
    damping = oracle.model.damping[oracle.order]
    first = model.joint_names[0]
    default = validate_parameters({}, model)
    np.testing.assert_array_equal(default.viscous, 0.0)
    np.testing.assert_array_equal(default.coulomb, 0.0)
    identified = validate_parameters({f'friction.{first}.viscous': 2.5}, model)
    assert identified.viscous[0] == 2.5 and not np.any(identified.viscous[1:])
    cfg = validate_parameters({'friction_source': 'urdf'}, model)
    np.testing.assert_array_equal(cfg.viscous, damping)
    override = validate_parameters({'friction_source': 'urdf',
                                    f'friction.{first}.viscous': 2.5}, model)
    assert override.viscous[0] == 2.5
    np.testing.assert_array_equal(override.viscous[1:], damping[1:])
    if np.any(damping):  # panda: <dynamics damping="0.003">
        name = f'{model.joint_names[1]} viscous {damping[1]:g}'
        assert cfg.notes and name in cfg.notes[0] and 'friction_source: urdf' in cfg.notes[0]
        assert default.notes and name in default.notes[0] and 'not applied' in default.notes[0]
        assert f'{first} viscous' not in override.notes[0]
    else:
        assert cfg.notes == () and default.notes == ()


def test_feedback_inertia_floor_adds_the_missing_inertia_to_the_feedback(robot):
    """feedback_inertia_floor (issue 23): computed torque = Pinocchio's RNEA with the law's qdd
    plus max(0, floor - M_ii(q0))·(Kp e + Kd ed), M_ii by Pinocchio's crba; feedforward_pd's
    default gains scale by max(M_ii(q0), floor)."""
    model, oracle = robot
    floor = 0.5
    cfg = validate_parameters(frozen({'feedback_inertia_floor': floor}), model)
    q0 = np.clip(np.zeros(model.n), *model.position_limits.T)
    M, _ = oracle.crba_and_bias(q0, np.zeros(model.n))
    boost = np.maximum(floor - np.diag(M), 0.0)
    assert np.any(boost > 0) and np.any(boost == 0)  # both kinds of joint on these arms
    q, qd, ref = random_state(model, np.random.default_rng(7))
    tau = Controller(cfg).command(cfg, q, qd, ref)
    feedback = cfg.kp * (ref[0] - q) + cfg.kd * (ref[1] - qd)
    expected = (oracle.rnea(q, qd, ref[2] + feedback) + boost * feedback
                + oracle.friction(ref[1]))
    np.testing.assert_allclose(tau, np.clip(expected, -cfg.effort_limits, cfg.effort_limits),
                               rtol=1e-9, atol=1e-9)
    pd = validate_parameters({'feedback_inertia_floor': floor, 'control_law': 'feedforward_pd'},
                             model)
    np.testing.assert_allclose(pd.kp, 400.0 * np.maximum(np.diag(M), floor), rtol=1e-9)
