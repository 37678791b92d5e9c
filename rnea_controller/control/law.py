"""The control law, its limits and its configuration (ROS-free; the node is thin glue around it).

Two laws, each ONE RNEA pass per tick (never the mass matrix in the loop), with e = q_d - q and
ed = qd_d - qd on the controlled joints:

    computed_torque:  tau = RNEA(q, qd, qdd_d + Kp e + Kd ed) + tau_f     Kp [1/s²], Kd [1/s]
    feedforward_pd:   tau = RNEA(q_d, qd_d, qdd_d) + Kp e + Kd ed + tau_f  Kp [N·m/rad], ...

With an exact model, computed torque gives each joint the error dynamics ë + Kd ė + Kp e = 0.
Joints of the model that are not controlled enter RNEA at their measured q, qd and qdd = 0.
The same compiled call evaluates, as rows of one batch: the law, the feedforward
RNEA(q_d, qd_d, qdd_d) published on ~/reference and, with `robot_compensates_gravity`, the
gravity g(q) = RNEA(q, 0, 0) at the measured q.

Friction feedforward (issue 13): tau_f = b·qd_d + c·tanh(qd_d / w) + f0 + s·tanh(qd_d / w)·
exp(-(qd_d / v_s)²) (`friction.friction_torque`, the identification's model too), with b =
friction.<joint>.viscous [N·m·s/rad], c = friction.<joint>.coulomb [N·m], f0 = .offset [N·m],
s = .stribeck [N·m], w = friction_velocity_width [rad/s], v_s = friction_stribeck_velocity.
It uses the DESIRED velocity: noise-free and known ahead;
the measured qd would feed sensor noise through the (smoothed) sign function and chatter.
Unset, b and c are 0 (issue 29: `<dynamics>` tags are often a simulator's placeholders; a 1 N·m
Coulomb term on a 1.4e-4 kg·m² wrist spun it to 6.7 rad/s in 40 ms), or with `friction_source:
urdf` the URDF's `<dynamics damping friction>`; the notes report the URDF's values either way.

The law adapts (issue 29; control/adaptation.py, which states each rule, its reason and its
constant): per controlled joint the estimates a^ (rotor inertia) [kg·m²], b^ (viscous friction)
[N·m·s/rad] and d^ (a slow torque) [N·m], learnt online from the arm's residual, enter the law
as armature in every RNEA row, as (b + b^)·qd_d plus a stiffness Kp·(b^ / Kd)·e, and as d^; an
integral at rest is added. The estimator's RNEA row (row 2, set by `adaptation.window`) is
one more row of the law's batch; `adaptation.adapt` updates the estimates and the integral
after the limits, in the same compiled call, as `Controller.set_schedule` allows.

Rotor inertia (issue 23): `armature.<joint>` [kg·m²] is set on the model
(`RobotModel.with_armature`), whose RNEA adds armature_i·qdd_i: every row above, and the
feedforward_pd default gains' M_ii, include it. A geared joint's rotor inertia (~0.1 kg·m²)
can be 100-1000× its wrist link's, and computed torque's gains act through M: untold, the
stiffness the joint gets is a fraction of Kp.

`robot_compensates_gravity` (arms that add g(q) themselves: Franka, KUKA FRI): the published
effort is the law's torque minus g(q) at the measured q (g of this model, payload included:
the arm must be told the same load); the limits apply to what is published. The gravity hold
then publishes zero, as the arm holds itself.

Limits, in this order: optional torque-rate limit |tau - tau_prev| <= rate·dt; effort clamp
|tau| <= min(URDF <limit effort>, effort_limits.<joint>); the step bound (issue 43, always on,
`_bounded`): |tau - tau_j| <= ((M_ii(q0) + a^) / d + b + b^) qd_max per joint for every command
tau_j published within the last d, d the loop's lateness (`Controller.lateness`, at least a
period), whatever the law computed (the brake and the gravity hold excepted). A non-finite
law falls back to the gravity hold of the last configuration whose law was finite, at the
measured q (else to the previous command, else to zero), so a published command is always
finite and within limits; `fallbacks` counts them and `failing_since` tells the node how long
it has lasted. Every tick a joint is limited counts in `saturation[joint]`.

The compiled law takes two records, as Pinocchio's Model/Data split: `LawModel` (constant
arrays of the configured model, gains, limits, friction) and `LawWork` (preallocated rows,
outputs and the limiter's memory), each a numba structref: made once per configuration
(resp. controller) and passed to the compiled code as one pointer.

The brake (issue 29; the loop's braking mode, control/modes.py): `Controller.brake` =
RNEA(q, 0, -BRAKE_RATE qd) + e = M(q)(-BRAKE_RATE qd) + g(q) + e at the measured state, damping
toward rest through the model's inertia plus gravity and what its observer e found the model
missing (issue 43, acting on the joints the model's brake fails to slow), with the same limits
and fallback; the law after it starts with d^ = e where it lasted and mattered
(`_after_brake`).

Parameters: `validate_parameters(values, model)` checks each value against the one table
(control/parameters.py) and the model-dependent rules here, and returns an immutable
`ControllerConfig`; the node swaps the whole config at the start of a tick.

Default gains (a joint without `gains.<joint>.p/.d`): critically damped error dynamics with
natural frequency ω = 20 rad/s. computed_torque: Kp = ω² = 400 1/s², Kd = 2ω = 40 1/s.
feedforward_pd: the same scaled by the joint's own inertia, Kp = ω² M_ii(q0), Kd = 2ω M_ii(q0)
[N·m/rad, N·m·s/rad], with M(q0) computed ONCE when the config is built (q0 = the zero
position clipped into the joint limits; M_ii at least 1e-3 kg·m²).

`feedback_inertia_floor` (issue 23, default off): the least inertia [kg·m²] through which a
joint's feedback v = Kp e + Kd ed acts. computed_torque adds boost_i·v_i, boost_i =
max(0, floor - M_ii(q0)); feedforward_pd's default gains scale by max(M_ii(q0), floor). For a
geared arm whose rotor inertia is not (yet) told: the stiffness it keeps is Kp·floor.
"""
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
import math
import time
import weakref

from numba import njit, typeof
import numpy as np

from rnea_controller.control import adaptation, parameters, records
from rnea_controller.control.friction import friction_torque
from rnea_controller.control.parameters import joint_of_parameter, link_of_parameter
from rnea_controller.control.records import LawModel
from rnea_controller.dynamics import rnea_kernel, spatial
from rnea_controller.dynamics.model import RobotModel
from rnea_controller.dynamics.regressor import body_link_names
from rnea_controller.dynamics.rnea import body_forces, mass_matrix, rnea
from rnea_controller.errors import DimensionError, ModelError, ParameterError

NATURAL_FREQUENCY = 20.0  # ω [rad/s] of the default gains
MIN_JOINT_INERTIA = 1e-3  # [kg·m²] floor of M_ii for the feedforward_pd default gains
BRAKE_RATE = 2.0 * NATURAL_FREQUENCY  # [1/s] the brake's damping per unit of model inertia
REST_FRACTION = 0.05  # a joint below this x its velocity limit is at rest (the brake's end)
REST_SPEED = 0.1  # [rad/s or m/s] the rest speed of a joint without a velocity limit
ROWS = 4  # law, feedforward, the estimator's inverse dynamics, g(q)
HISTORY = 64  # commands the step bound's window can hold: a lateness of up to 64 periods
GRAVITY = 3  # the row of g(q)


@dataclass(frozen=True)
class ControllerConfig:
    """Everything one tick needs, immutable; replaced whole when a parameter changes.

    model: the RobotModel with payload and gravity applied; joints: controlled joint names;
    index: their model indices; kp, kd: per controlled joint (units per law, see module doc);
    effort_limits [N·m]; torque_rate_limit [N·m/s] (0 = off); period = 1 / update_rate [s];
    viscous [N·m·s/rad], coulomb [N·m], friction_width [rad/s]; boost [kg·m²]: the inertia
    computed torque's feedback gets on top of M (`feedback_boost`); forget: the estimator's
    forgetting factor per window (1: off); floors, ceilings (4, m): the estimates' bounds;
    scales (4, m): 1 / the reference acceleration, 1 / the reference velocity, 1 and 1
    (`adaptation.config_entries`);
    integral_gain [1/s³], integral_clamp [N·m]; inertia: M_ii(q0) [kg·m²] (the step bound's,
    and feedforward_pd's integral acts through it); timeouts [s];
    law_model: the compiled law's LawModel; values: the parameter values; notes: what the
    configuration took from the URDF rather than from a parameter (the node logs them).
    """

    model: RobotModel
    joints: tuple
    index: np.ndarray
    law: str
    kp: np.ndarray
    kd: np.ndarray
    effort_limits: np.ndarray
    torque_rate_limit: float
    update_rate: float
    period: float
    allow_partial: bool
    state_timeout: float
    stale_policy: str
    stale_hold_time: float
    final_command: str
    external_wrench_timeout: float
    law_failure_timeout: float
    compensates_gravity: bool
    viscous: np.ndarray
    coulomb: np.ndarray
    friction_width: float
    offset: np.ndarray
    stribeck: np.ndarray
    stribeck_velocity: float
    boost: np.ndarray
    forget: float
    floors: np.ndarray
    ceilings: np.ndarray
    scales: np.ndarray
    integral_gain: float
    integral_clamp: np.ndarray
    inertia: np.ndarray
    law_model: LawModel
    values: dict
    notes: tuple = ()


def default_joints(model: RobotModel) -> tuple:
    """The controlled joints when `joints` is unset or []: every joint in model order but the
    mimic joints and their leaders (a gripper's fingers). A mimic joint follows its leader and
    is never controlled; a leader may be listed, but its torque then lacks its followers' load,
    which the mechanism passes to it and the model, whose mimic joints are independent, does not
    (on the simulated Panda hand: 9 mm of error on the finger)."""
    grouped = {i for relation in model.mimic for i in relation[:2]}
    return tuple(j for i, j in enumerate(model.joint_names) if i not in grouped)


def _controlled_joints(values, model):
    """The `joints` parameter checked against the model (`default_joints` if unset or [])."""
    leaders = {model.joint_names[i]: model.joint_names[leader] for i, leader, *_ in model.mimic}
    joints = list(values['joints'] or []) or list(default_joints(model))
    for name in joints:
        if name not in model.joint_names:
            raise ParameterError(f'joints: {name!r} is not a joint of the model '
                                 f'({", ".join(model.joint_names)})')
        if name in leaders:
            raise ParameterError(f'joints: {name!r} is a mimic joint of {leaders[name]!r} in '
                                 'the URDF: it follows its leader and cannot be controlled')
    return tuple(joints)


def _with_armature(values, model, joints):
    """The model with `armature.<joint>` [kg·m²] set on the joints that have one."""
    armature = np.array(model.armature)
    for joint in joints:
        value = values.get(f'armature.{joint}')
        if value is not None:
            armature[model.joint_index(joint)] = value
    return model.with_armature(armature)


def _friction(values, model, joints, index):
    """(viscous, coulomb, notes): `friction.<joint>.*`; unset ones 0, or with
    `friction_source: urdf` the URDF's `<dynamics damping friction>`. The notes report the
    URDF's values either way: taken, or read and not applied (the documented opt-in)."""
    urdf = values['friction_source'] == 'urdf'
    zeros = np.zeros(len(index))
    damping, friction = model.damping[index], model.friction[index]
    viscous = _per_joint(values, joints, 'friction.{}.viscous', damping if urdf else zeros)
    coulomb = _per_joint(values, joints, 'friction.{}.coulomb', friction if urdf else zeros)
    found = [(joint, kind, value) for k, joint in enumerate(joints)
             for kind, value in (('viscous', damping[k]), ('coulomb', friction[k]))
             if value and values.get(f'friction.{joint}.{kind}') is None]
    listed = ', '.join(f'{joint} {kind} {value:g}' for joint, kind, value in found)
    if not found:
        return viscous, coulomb, ()
    if urdf:
        return viscous, coulomb, ('friction from the URDF <dynamics> (friction_source: urdf, '
                                  f'no friction.<joint> parameter): {listed}',)
    return viscous, coulomb, ('the URDF <dynamics> states friction, not applied '
                              '(friction_source: none; set friction_source: urdf to feed it '
                              f'forward, or friction.<joint>.*): {listed}',)


def _with_links(values, model):
    """The model with `links.<link>.mass/.com/.inertia` replacing those bodies' inertias.

    A body is the link moved by a joint with every link fixed to it (issue 30: what
    `rnea-validate --identify` identifies); the three are given together, and physically
    consistent (mass > 0; principal moments about the com positive, each at most the sum of
    the other two: the triangle inequality, i.e. the pseudo-inertia is positive semi-definite).
    """
    links = body_link_names(model)
    given = {link_of_parameter(name) for name, value in values.items()
             if value is not None and link_of_parameter(name) is not None}
    unknown = sorted(given - set(links))
    if unknown:
        raise ParameterError(f'links.{unknown[0]}: {unknown[0]!r} is not a link moved by a joint '
                             f'of the model (those are {", ".join(links)})')
    inertias = np.array(model.inertias)
    for link in given:
        mass, com, inertia = (values.get(f'links.{link}.{key}')
                              for key in ('mass', 'com', 'inertia'))
        if mass is None or com is None or inertia is None:
            raise ParameterError(f'links.{link}: set .mass, .com and .inertia together (an '
                                 'identified body is all three)')
        ixx, ixy, ixz, iyy, iyz, izz = inertia
        I_c = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]], dtype=float)
        moments = np.linalg.eigvalsh(np.trace(I_c) / 2 * np.eye(3) - I_c)
        if moments[0] < -1e-9 * max(np.trace(I_c), 1e-12):
            raise ParameterError(f'links.{link}.inertia = {list(inertia)}: no mass distribution '
                                 'has it (a principal moment is negative or larger than the '
                                 'sum of the other two)')
        inertias[links.index(link)] = spatial.spatial_inertia(float(mass), np.array(com, float),
                                                              I_c)
    return replace(model, inertias=inertias) if given else model


def _links_note(values):
    """The configure note naming the bodies whose inertia `links.<link>.*` replaced."""
    links = sorted({link_of_parameter(name) for name, value in values.items()
                    if value is not None and link_of_parameter(name) is not None})
    return (f'inertial parameters from links.<link> (identified): {", ".join(links)}',) if (
        links) else ()


def _with_payload_and_gravity(values, model):
    """The model with `payload.*` attached and `gravity` set, or ParameterError."""
    ixx, ixy, ixz, iyy, iyz, izz = values['payload.inertia']
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]], dtype=float)
    link = values['payload.link']
    if link:
        try:
            model = model.with_payload(link, float(values['payload.mass']),
                                       np.array(values['payload.com'], dtype=float), inertia)
        except ModelError as error:
            raise ParameterError(f'payload.link = {link!r}: {error}') from None
    return model.with_gravity(np.array(values['gravity'], dtype=float))


_MODEL_PARTS = ('armature.', 'links.', 'payload.', 'gravity')  # the values a model is built of
_BUILT = weakref.WeakKeyDictionary()  # {URDF model: (its values, the model they build)}


def _built_model(values, model, joints):
    """The model of the values (links, armature, payload, gravity) on the URDF's `model`; the
    last one built is kept: a change of gains or of the adaptation keeps the same model, and
    what is computed once per model (M(q0)) is not computed again (issue 45)."""
    key = (joints, tuple((name, _frozen(v)) for name, v in sorted(values.items())
                         if name.startswith(_MODEL_PARTS)))
    kept = _BUILT.get(model)
    if kept is not None and kept[0] == key:
        return kept[1]
    built = _with_payload_and_gravity(values, _with_armature(values, _with_links(values, model),
                                                             joints))
    _BUILT[model] = (key, built)
    return built


def _frozen(value):
    """A value as compared in `_built_model`'s key (an array as its shape and numbers)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    array = np.asarray(value)
    return array.shape, tuple(array.ravel().tolist())


def default_gains(model: RobotModel, index: np.ndarray, law: str,
                  floor: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Gains of joints without configured ones: ω = NATURAL_FREQUENCY, critically damped.

    computed_torque: (ω², 2ω) [1/s², 1/s]; feedforward_pd: (ω² M_ii, 2ω M_ii) at q0, M_ii at
    least MIN_JOINT_INERTIA and `floor` (feedback_inertia_floor) [kg·m²].
    """
    scale = np.ones(len(index))
    if law == 'feedforward_pd':
        scale = np.maximum(_joint_inertias(model, index), max(MIN_JOINT_INERTIA, floor))
    return NATURAL_FREQUENCY**2 * scale, 2.0 * NATURAL_FREQUENCY * scale


def feedback_boost(model: RobotModel, index: np.ndarray, law: str,
                   floor: float) -> np.ndarray:
    """max(0, floor - M_ii(q0)) [kg·m²] per controlled joint for computed_torque (else 0):
    its feedback v = Kp e + Kd ed then acts through at least `floor`, tau += boost·v.

    Computed torque's gains act through the model's M: a joint whose true inertia the model
    misses (a geared joint's rotor, ~0.1 kg·m², against 1e-4 for a wrist link) gets a
    stiffness Kp·M_ii that cannot move it against its friction.
    """
    if law != 'computed_torque' or floor <= 0.0:
        return np.zeros(len(index))
    return np.maximum(floor - _joint_inertias(model, index), 0.0)


def _joint_inertias(model, index):
    """M_ii(q0) [kg·m²] of the controlled joints, q0 = 0 clipped into the limits."""
    return np.diag(_mass_q0(model))[index]


_MASS_Q0 = weakref.WeakKeyDictionary()  # {RobotModel: M(q0)}: a model is immutable


def _mass_q0(model):
    """M(q0) of a model, computed once per model (`validate_parameters` asks for it up to
    four times: a parameter set's validation runs beside the loop, issue 45)."""
    M = _MASS_Q0.get(model)
    if M is None:
        M = _MASS_Q0[model] = mass_matrix(model, _q0(model))
        M.setflags(write=False)
    return M


def _per_joint(values, joints, pattern, fallback):
    """Array of values[pattern.format(joint)] per joint; unset entries keep `fallback`."""
    out = np.array(fallback, dtype=float)
    for k, joint in enumerate(joints):
        value = values.get(pattern.format(joint))
        if value is not None:
            out[k] = value
    return out


def _effort_limits(values, model, joints, index):
    """URDF effort limits, or a lower `effort_limits.<joint>` override [N·m]; a controlled
    joint needs one of the two (the URDF's may be absent: no attribute, or 0)."""
    limits = np.array(model.effort_limits, dtype=float)[index]
    for k, joint in enumerate(joints):
        name = f'effort_limits.{joint}'
        override = values.get(name)
        if override is not None and override > limits[k]:
            raise ParameterError(f'{name} = {override:g} N·m is above the URDF limit '
                                 f'{limits[k]:g} N·m of joint {joint!r}')
        limits[k] = limits[k] if override is None else override
        if not np.isfinite(limits[k]):
            raise ParameterError(f'joint {joint!r} has no effort limit in the URDF (no '
                                 f'<limit effort> or effort="0"): set {name} [N·m]')
    return limits


def _check_each(values, joints):
    """Every value against the table; per-joint names must name a controlled joint."""
    for name, value in values.items():
        parameters.check(name, value)
        joint = joint_of_parameter(name)
        if joint is not None and joint not in joints:
            raise ParameterError(f'{name}: {joint!r} is not a controlled joint')


def validate_parameters(values: Mapping, model: RobotModel) -> ControllerConfig:
    """Check parameter values and build the ControllerConfig they describe.

    values: {parameter name: value} (missing names take the table's defaults; per-joint names
    'gains.<joint>.p' ... may be absent or None = unset); model: the RobotModel from
    robot_description (without payload). Raises ParameterError naming the parameter and the
    value; also if the gravity torque of the resulting model at q0 is not finite.
    """
    values = {**parameters.defaults(), **values}
    joints = _controlled_joints(values, model)
    _check_each(values, joints)
    law = values['control_law']
    model = _built_model(values, model, joints)
    index = np.array([model.joint_index(name) for name in joints], dtype=np.int64)
    floor = float(values['feedback_inertia_floor'])
    kp0, kd0 = default_gains(model, index, law, floor)
    viscous, coulomb, notes = _friction(values, model, joints, index)
    offset = _per_joint(values, joints, 'friction.{}.offset', np.zeros(len(index)))
    stribeck = _per_joint(values, joints, 'friction.{}.stribeck', np.zeros(len(index)))
    config = dict(
        model=model, joints=joints, index=index, law=law,
        kp=_per_joint(values, joints, 'gains.{}.p', kp0),
        kd=_per_joint(values, joints, 'gains.{}.d', kd0),
        effort_limits=_effort_limits(values, model, joints, index),
        torque_rate_limit=float(values['torque_rate_limit']),
        update_rate=float(values['update_rate']), period=1.0 / values['update_rate'],
        allow_partial=values['allow_partial_joints_goal'],
        state_timeout=values['state_timeout'], stale_policy=values['stale_policy'],
        stale_hold_time=values['stale_hold_time'], final_command=values['final_command'],
        external_wrench_timeout=values['external_wrench_timeout'],
        law_failure_timeout=values['law_failure_timeout'],
        compensates_gravity=values['robot_compensates_gravity'],
        viscous=viscous, coulomb=coulomb, boost=feedback_boost(model, index, law, floor),
        friction_width=float(values['friction_velocity_width']), offset=offset,
        stribeck=stribeck, stribeck_velocity=float(values['friction_stribeck_velocity']),
        values=values,
        notes=notes + _links_note(values))
    config.update(adaptation.config_entries(values, model, index, config['effort_limits'],
                                            _joint_inertias(model, index), viscous, coulomb))
    config['law_model'] = law_model(config)
    _check_gravity_finite(model)
    _check_inertia_positive(model, index)
    return ControllerConfig(**config)


def _q0(model):
    """The zero position clipped into the joint limits [rad or m]."""
    return np.clip(np.zeros(model.n), model.position_limits[:, 0], model.position_limits[:, 1])


def _check_gravity_finite(model):
    if not np.all(np.isfinite(_gravity_rows(model, _q0(model)))):
        raise ParameterError('the gravity torque of this configuration is not finite '
                             '(payload and gravity too large together)')


def _check_inertia_positive(model, index):
    """ParameterError if M(q0) of the controlled joints has a negative eigenvalue beyond
    round-off: computed torque would then accelerate a joint against its error. A link's
    inertia that no rigid body has (a description warning) can do that; payloads cannot."""
    M = _mass_q0(model)[np.ix_(index, index)]
    eigenvalues = np.linalg.eigvalsh(M)
    if eigenvalues[0] < -1e-9 * max(eigenvalues[-1], 0.0):
        raise ParameterError('the joint-space inertia M(q0) of the controlled joints is not '
                             f'positive definite (eigenvalues {eigenvalues[0]:.3g} to '
                             f'{eigenvalues[-1]:.3g} kg·m²): a link inertia of the description '
                             'is wrong (see its warnings); computed torque would push the '
                             'wrong way')


def law_model(cfg: dict | ControllerConfig) -> LawModel:
    """The LawModel record of a config (dict or ControllerConfig fields)."""
    get = cfg.get if isinstance(cfg, dict) else lambda name: getattr(cfg, name)
    model = get('model')
    return records.new_law_model(*rnea_kernel.model_arrays(model),
                          *rnea_kernel.model_base_motion(model), get('index'), get('kp'),
                          get('kd'), get('boost'), get('effort_limits'), get('viscous'),
                          get('coulomb'), float(get('friction_width')), get('offset'),
                          get('stribeck'), float(get('stribeck_velocity')),
                          get('law') == 'feedforward_pd', bool(get('compensates_gravity')),
                          float(get('forget')), get('floors'), get('ceilings'), get('scales'),
                          float(get('integral_gain')), get('integral_clamp'), get('inertia'),
                          float(get('period')),
                          adaptation.velocity_scale(model, get('index')))


def _gravity_rows(model, q):
    """g(q) = RNEA(q, 0, 0) of every model joint [N·m]; NaN if q is not usable."""
    zeros = np.zeros(model.n)
    try:
        return rnea(model, q, zeros, zeros)
    except DimensionError:
        return np.full(model.n, np.nan)


def _rnea_rows(model, q, qd, qdd):
    """RNEA(q, qd, qdd) of every model joint [N·m]; NaN if the arguments are not usable."""
    try:
        return rnea(model, q, qd, qdd)
    except DimensionError:
        return np.full(model.n, np.nan)


def law_is_finite(cfg: ControllerConfig, q: np.ndarray, qd: np.ndarray,
                  ref: np.ndarray) -> bool:
    """True if the law of `cfg` at measured q, qd and reference ref (3, m) is finite (one
    uncompiled evaluation, used to accept a parameter change at the current state)."""
    work, _ = _workspace(cfg.model.n, len(cfg.joints))
    return bool(_law(cfg.law_model, work, rnea_kernel.model_zero_forces(cfg.model), q, qd, ref,
                     q, qd, 0.0, -1.0))


def _workspace(n, m):
    """A LawWork for n model joints, m controlled, and its arrays by field name."""
    rows, joints = (ROWS, n), (m,)
    shapes = dict(Q=rows, QD=rows, QDD=rows, T=rows, e=(2, m), raw=joints, previous=joints,
                  tau=joints, feedforward=joints, saturation=joints, armature=(n,),
                  bound=joints, stepped=joints, delay=(1,), history=(HISTORY, m), kept=(2,),
                  **adaptation.work_shapes(n, m))
    integers = ('saturation', 'stepped', 'kept') + adaptation.INTEGER_FIELDS
    arrays = {name: np.zeros(shapes[name], dtype=np.int64 if name in integers else float)
              for name in records.LAW_WORK_FIELDS}
    adaptation.initial(arrays)
    return records.new_law_work(*arrays.values()), arrays


class Controller:
    """The per-tick computation: the compiled law with its workspace and the fallback.

    `command(config, q, qd, ref, f_ext)` returns the limited torque of the controlled joints;
    `feedforward` then holds RNEA(q_d, qd_d, qdd_d) + tau_f of the same tick. `saturation`
    counts, per controlled joint, the ticks its command was limited; `fallbacks` the
    non-finite results; `failing_since` the perf_counter time the law became non-finite (None
    while it is finite).

    The adaptation (control/adaptation.py) runs as its schedule says: `set_schedule` (the
    caller's, between ticks; kept by `reset`), times 0 until the measured positions have
    changed since `reset` (`responding`) and while `adapting` is False (the node's holding:
    contact). At 0 the law is issue 23's plus what was learnt so far.
    """

    def __init__(self, config: ControllerConfig) -> None:
        n, m = config.model.n, len(config.joints)
        self.work, arrays = _workspace(n, m)
        self.tau, self.feedforward = arrays['tau'], arrays['feedforward']
        self.saturation, self._previous = arrays['saturation'], arrays['previous']
        self.estimates, self.integral = arrays['theta'], arrays['integral']
        self.calmed = arrays['calmed']  # per joint, how often rule 8 calmed it
        self._arrays = arrays
        self._delay = arrays['delay']  # the step bound's d (`lateness`)
        self._rows = arrays['Q'], arrays['QD'], arrays['QDD'], arrays['T']
        self._entry = None  # (compiled _law, the arguments it was typed for)
        self._seen = None  # the arguments of the last call
        self.fallbacks = 0
        self.failing_since = None
        self._has_previous = False
        self._good = config
        self._first = None  # the first measured q since `reset` (`_watch`)
        self._moved = False  # the measured positions changed since `reset`
        self._commands = 0  # commands since `reset`
        self.responding = False  # moved, and commanded for adaptation.ANSWER_TIME
        self._adapting = True  # False: the adaptation paused (`adapting`)
        self._schedule = np.ones(3)  # the caller's (`set_schedule`); the work's is in force
        self._braking = None  # the brake's observer (`_brake_observer`), None: not braking
        self.handed = None  # {controlled joint: d^ [N·m]} the last brake left (`_after_brake`)
        self._compile(config)

    @property
    def adapting(self) -> bool:
        """False pauses the adaptation (the node's holding: contact: an arm held by an
        obstacle is not one to learn from, nor to push by an integral); estimates kept."""
        return self._adapting

    @adapting.setter
    def adapting(self, value: bool) -> None:
        if value != self._adapting:
            self._adapting = bool(value)
            self._gate()

    @property
    def schedule(self) -> dict:
        """The caller's schedule (`set_schedule`): {'estimate', 'integral': gains in [0, 1],
        'unstick': bool}."""
        estimate, integral, unstick = self._schedule
        return {'estimate': float(estimate), 'integral': float(integral),
                'unstick': bool(unstick)}

    def set_schedule(self, estimate: float = 1.0, integral: float = 1.0,
                     unstick: bool = True) -> None:
        """Set the adaptation's schedule from the next tick on (no new config): `estimate`
        in [0, 1] scales the estimator's step (0: paused, estimates kept), `integral` in
        [0, 1] scales the integral's gain Ki (0: paused, its value kept), `unstick` turns the
        stuck-joint growth on or off (control/adaptation.py). The defaults are the law as
        measured, bit for bit. Raises ParameterError for a gain outside [0, 1]."""
        for name, gain in (('estimate', estimate), ('integral', integral)):
            if not 0.0 <= gain <= 1.0:
                raise ParameterError(f'set_schedule: {name} = {gain!r} is not in [0, 1]')
        self._schedule[:] = (estimate, integral, 1.0 if unstick else 0.0)
        self._gate()

    def _gate(self):
        """The schedule in force: the caller's while the arm answers and `adapting`, else 0."""
        active = self.responding and self._adapting
        self._arrays['schedule'][:] = self._schedule if active else 0.0

    def _watch(self, qm, period):
        """`responding` once the measured positions qm [rad] differ from the first since
        `reset` and the law has commanded for adaptation.ANSWER_TIME (`period` [s] a tick).
        A stream of one unchanging state is not an arm answering its commands (a test's
        constant feeder, a driver repeating its last state): what the estimate would learn
        from it (d^ taking the feedback, a^ grown on a joint that 'does not follow') and an
        integral on its error are not the arm's. A real arm's states change from the first
        command on (its noise, its motion). And a command acts only after the actuation
        delay, unknown until measured (control/timing.py's ActuationDelay, after a second):
        before ANSWER_TIME the arm may still be moving as it did without the law."""
        if self.responding:
            return
        self._commands += 1
        if self._first is None:
            self._first = qm.copy()
        elif not self._moved and not np.array_equal(qm, self._first):
            self._moved = True
        if self._moved and self._commands * period >= adaptation.ANSWER_TIME:
            self.responding, self._first = True, None
            self._gate()

    def _compile(self, cfg):
        """Compile (or load from numba's disk cache) the law now, not in a tick, and check it
        once against `rnea`: numba's cache does not see edits to rnea_kernel.py, which `_law`
        calls, so a stale cached `_law` is recompiled."""
        n, m = cfg.model.n, len(cfg.joints)
        q, qd = 0.3 * np.sin(np.arange(1.0, n + 1)), 0.2 * np.cos(np.arange(1.0, n + 1))
        ref = np.vstack((q[cfg.index] + 0.01, qd[cfg.index], np.full(m, 0.5)))
        w, (Q, QD, QDD, T) = self.work, self._rows
        for attempt in range(2):
            _law(cfg.law_model, w, rnea_kernel.model_zero_forces(cfg.model), q, qd, ref, q,
                 qd, 0.0, -1.0)
            if np.allclose(T[:2], rnea(cfg.model, Q[:2], QD[:2], QDD[:2])) or attempt:
                break
            _law.recompile()
        wrench = np.zeros((ROWS, n, 6))
        wrench.setflags(write=False)  # as `command` passes it (rnea_kernel doc)
        _law(cfg.law_model, w, wrench, q, qd, ref, q, qd, 0.0, -1.0)  # with a wrench
        self.gravity_hold(cfg, q)
        self.reset()
        self.saturation[:] = 0
        self.stepped[:] = 0
        self.fallbacks = 0

    def reset(self) -> None:
        """Forget the previous command (the rate limit restarts from the next command), the
        integral and the estimates (armature, friction, bias), and pause the adaptation until
        the arm answers (`responding`; the schedule is kept): the node calls it on activation
        and when it stops commanding (stale states)."""
        self._has_previous, self._braking = False, None
        self._first, self.responding, self._moved, self._commands = None, False, False, 0
        adaptation.reset(self._arrays)
        self._gate()

    def reset_integral(self) -> None:
        """Forget the integral term and restart the estimator's window (kept: the estimates,
        properties of the arm). A command that is not the law's (`gravity_hold`) calls it."""
        adaptation.clear_integral(self._arrays)

    @property
    def lateness(self) -> float:
        """How late the loop sees the arm answer its commands [s] (the caller's measure, the
        node's loop: the command delay measured, recent gaps of states and ticks); the step
        bound's d (`_bounded`) is it, at least a period."""
        return float(self._arrays['delay'][0])

    @lateness.setter
    def lateness(self, value: float) -> None:
        self._delay[0] = value if 0.0 < value < math.inf else 0.0  # every tick: no numpy

    @property
    def step_bounds(self) -> np.ndarray:
        """The step bound of each controlled joint at the last tick [N·m] (`_bounded`)."""
        return self._arrays['bound']

    @property
    def stepped(self) -> np.ndarray:
        """Per controlled joint, the ticks its command was held by the step bound."""
        return self._arrays['stepped']

    def _step(self, cfg, rate_limited=True, recovery=0.0):
        """Largest command change this tick [N·m] (0: no rate limit): the rate limit's, or
        `recovery` [N·m] if smaller (0: none; the node's loop after a pause or a blind
        stretch, when the arm moved unwatched)."""
        if not (rate_limited and self._has_previous):
            return 0.0
        step = cfg.torque_rate_limit * cfg.period
        return min(step, recovery) if step > 0.0 and recovery > 0.0 else max(step, recovery)

    def command(self, cfg: ControllerConfig, q: np.ndarray, qd: np.ndarray, ref: np.ndarray,
                f_ext: dict | None = None, state_dt: float = -1.0,
                measured: tuple | None = None, recovery: float = 0.0) -> np.ndarray:
        """Limited tau [N·m] for measured q [rad], qd [rad/s] (model size) and ref (3, m).

        ref rows: q_d, qd_d, qdd_d of the controlled joints (a `Trajectory.sample`). One
        compiled call (`_law`): assemble the rows, RNEA on them, friction, gravity offset,
        limits; f_ext: {link: wrench [N, N·m] in the link frame} or None. state_dt [s]: for
        the online estimate, the time from the previous new state to this tick's state if it
        is new, 0 if it is not (a repeat: the estimator waits for a new one); negative (the
        default): every call a new state one period after the last (lockstep simulation).
        measured: (q, qd) of the state as it came, for the estimate, when q and qd are
        predicted to where the command acts (latency compensation); None: q and qd.
        recovery [N·m]: the most the command may change from the last one (0: only the rate
        limit bounds it).
        """
        n = cfg.model.n
        if q.shape != (n,) or qd.shape != (n,) or ref.shape != (3, len(cfg.index)):
            raise DimensionError(f'command: q {q.shape}, qd {qd.shape} and ref {ref.shape} '
                                 f'do not fit {n} joints, {len(cfg.index)} controlled')
        f_body = rnea_kernel.model_zero_forces(cfg.model)
        if f_ext:
            f_body = body_forces(cfg.model, f_ext, ROWS)
            f_body[GRAVITY] = 0.0  # g(q) is gravity alone
            f_body.setflags(write=False)  # the law's one signature (rnea_kernel doc)
        qm, qdm = (q, qd) if measured is None else measured
        # C-ordered float arrays, the law's one compiled signature: another layout (a
        # caller's `full[:, index]` is Fortran-ordered) would compile the law anew inside the
        # tick, 10 s on a quiet host (no copy where they are already)
        q, qd, ref, qm, qdm = (np.ascontiguousarray(a, dtype=float)
                               for a in (q, qd, ref, qm, qdm))
        if qm.shape != (n,) or qdm.shape != (n,):
            raise DimensionError(f'command: measured q {qm.shape} and qd {qdm.shape} do not '
                                 f'fit {n} joints')
        self._watch(qm, cfg.period)
        if self._braking is not None:
            self._after_brake(cfg)
        step = self._step(cfg, recovery=recovery) if self._has_previous else -1.0
        finite = self._law((cfg.law_model, self.work, f_body, q, qd, ref, qm, qdm), step,
                           float(state_dt))
        return self._checked(cfg, finite, q)

    def _after_brake(self, cfg):
        """The law follows the brake: on each joint where the brake found its model wrong
        (its observer's e acting: `brake`), e as it acts, e.g. an untold payload's gravity,
        becomes the estimate d^ (within its bounds), if the estimate is on. Without it the
        law's hold let such a joint sink again at its stiffness Kp·M_ii, back past its
        velocity limit within 30 ms: the corpus's iiwa14 with an untold 2.5 kg payload,
        commands 10 ms late, went brake - hold - brake six times, 1.3 rad off. Elsewhere d^
        is left as it was: e there is the observer's noise (on the SO-100, whose wrist is
        1.1e-3 kg·m², 2.4e-3 N·m of it handed over on a model that was exact swung its hold
        into 18 brakes). And only what still acts: e where the residual of the last states
        (low-passed over the loop's lateness, not e's 1 / L) agrees with it, at most as much:
        a push the brake stopped is over when the brake ends, 40 ms after it on the UR5's
        wrist, and e, which forgets it at L, still held 0.78 N·m of it (handed over, the held
        joint drifted 15 mrad in 0.5 s: test_overspeed); only where it outlived e's own time
        1 / L since the joint failed (a model's error does: the brake runs until e has it; a
        push is over sooner: its leftovers of 0.05-0.14 N·m on the UR5's wrist_1, handed over,
        drifted it 1.6-2.4 mrad); and only where it matters to the brake, above the torque its
        damping holds at the joint's rest speed, M_ii(q0) rate x rest.
        `handed` names the joints and their d^ for the caller to report."""
        memory, self._braking = self._braking, None
        acting = memory.acting
        if not (cfg.forget < 1.0 and self._schedule[adaptation.ESTIMATE] > 0.0
                and np.all(np.isfinite(acting)) and memory.failed.any()):
            return
        # what still acts: e where the residual of the last states agrees, at most as much (a
        # push that is over has left e, which forgets it at L, not the last states)
        kept = np.where(acting * memory.recent > 0.0, np.sign(acting) * np.minimum(
            np.abs(acting), np.abs(memory.recent)), 0.0)
        # where it outlived e's own time 1 / L since the joint failed (a push is over sooner),
        # and where it matters to the brake: without it the joint would sink faster than its
        # rest speed under the brake's damping (|kept| / (M_ii rate) above it)
        rest = rest_speeds(np.asarray(cfg.model.velocity_limits)[cfg.index])
        on = (memory.failed & (memory.last - memory.failed_at > 2.0 / memory.rate)
              & (np.abs(kept) > cfg.inertia * memory.rate * rest))
        self.estimates[2] = np.where(on, np.clip(kept, cfg.floors[2], cfg.ceilings[2]),
                                     self.estimates[2])
        if on.any():
            self.handed = {cfg.joints[k]: float(self.estimates[2, k])
                           for k in np.flatnonzero(on)}

    def _law(self, args, step, state_dt):
        """_law(*args, step, state_dt). numba's dispatcher types its arguments at every call
        (~5 µs of a tick here, the two records through Python). A tick passes the very same
        objects each time: once the same objects came twice in a row, the overload the
        dispatcher chose for them is called directly while they keep coming (step and state_dt
        are always floats)."""
        entry = self._entry
        if entry is not None and _same_objects(args, entry[1]):
            return entry[0](*args, step, state_dt)
        finite = _law(*args, step, state_dt)
        if self._seen is not None and _same_objects(args, self._seen):
            try:
                signature = tuple(typeof(a) for a in (*args, step, state_dt))
                self._entry = (_law.overloads[signature].entry_point, args)
            except (AttributeError, KeyError):  # another numba: the dispatcher every time
                self._entry = None
        self._seen = args
        return finite

    def gravity_hold(self, cfg: ControllerConfig, q: np.ndarray,
                     rate_limited: bool = True) -> np.ndarray:
        """Limited g(q) [N·m], the torque that holds the measured q against gravity; zero if
        the robot compensates gravity itself."""
        self.reset_integral()
        self._braking = None
        g = _gravity_rows(cfg.model, q)[cfg.index]
        if cfg.compensates_gravity and np.all(np.isfinite(g)):
            g = np.zeros(len(cfg.index))
        finite = _limit(g, self._previous, cfg.effort_limits, self._step(cfg, rate_limited),
                        self.tau, self.saturation)
        return self._checked(cfg, finite, q)

    def brake(self, cfg: ControllerConfig, q: np.ndarray, qd: np.ndarray,
              delay: float = 0.0, t: float | None = None) -> np.ndarray:
        """Limited braking torque [N·m] at measured q [rad], qd [rad/s] (model size):

            tau = RNEA(q, 0, a) + e = M(q) a + g(q) + e,   a = -rate qd (controlled joints)

        rate = BRAKE_RATE, or π / (4 delay) if that is less: `delay` [s] is how late the loop
        sees the arm answer its commands (the caller's measure: command delay, state gaps),
        half the delay a damper is stable with.

        damping toward rest through the model's inertia, plus gravity (minus g(q) if the robot
        compensates gravity). On the model the arm's energy falls as dE/dt = qd·(tau - g) =
        -BRAKE_RATE qd·M qd <= 0 whatever C(q, qd), and each joint's speed as
        exp(-BRAKE_RATE t): 25 ms at 40 1/s, the default Kd; per 1 kHz tick 4 % of the speed
        (a sampled damper is stable up to 2/period, and with a delay d while d < π / (2
        rate) = 39 ms at 40 1/s: a simulator starved by 50 ms, catching up under one held
        brake command, made it swing between the effort limits). Limits and the fallback as
        `command`.

        e [N·m], the brake's disturbance observer (issue 43), from the states of this brake
        only, when `t` [s] gives each state's time (the node's loop; None: e = 0, each call on
        its own): what the model misses, the command that acted minus the model's inverse
        dynamics RNEA(q, qd, qdd) at the measured acceleration (the difference of two new
        states' velocities), low-passed at L = rate / 2 [1/s]. A payload or links the model
        has wrong leave g(q) short by Δg: without e the brake let the joint sink at its
        terminal speed Δg / (M_ii rate) (the corpus's iiwa14 with an untold 2.5 kg payload,
        commands 10 ms late: its wrist at 1.41x its velocity limit into its joint limit,
        1.3 rad off). With e the speed decays at L once e has Δg, and the joint stops. Why
        L = rate / 2: the residual answers e a delay d late, and a first-order loop of gain L
        and delay d keeps π/2 - L d >= 3π/8 of phase at rate <= π / (4 d); and e settles
        after the damping, the two poles (rate, L) apart. e is learnt from the command the
        brake sent (the limited one: no windup at an effort limit) and acts only on a joint
        the model's brake failed to slow (`_brake_observer`): while a joint is fast, e is
        noisy (answers paired with commands a jittered delay apart: about M rate² |qd| x the
        jitter), and on a model that holds the brake is the model's alone.
        """
        rate = BRAKE_RATE if delay <= 0.0 else min(BRAKE_RATE, np.pi / (4.0 * delay))
        q, qd = np.ascontiguousarray(q, dtype=float), np.ascontiguousarray(qd, dtype=float)
        a = np.zeros(cfg.model.n)
        a[cfg.index] = -rate * qd[cfg.index]
        tau = _rnea_rows(cfg.model, q, np.zeros(cfg.model.n), a)[cfg.index]
        if t is not None:
            tau += self._brake_observer(cfg, q, qd, rate, max(delay, cfg.period), t)
        if cfg.compensates_gravity:
            tau -= _gravity_rows(cfg.model, q)[cfg.index]
        finite = _limit(tau, self._previous, cfg.effort_limits, self._step(cfg), self.tau,
                        self.saturation)
        tau = self._checked(cfg, finite, q)
        if t is not None:
            self._braking.sent.append((t, tau.copy()))
        return tau

    def _brake_observer(self, cfg, q, qd, rate, delay, t):
        """The brake's e [N·m] as it acts (`brake`) at the state of time t [s]: e from the
        new state's velocity against the previous one's and the command that acted between
        them, the brake's own sent `delay` [s] before; low-passed at L = rate / 2, within the
        effort limits. It acts on a joint the model's brake has failed: from `delay` after the
        brake began at |qd0|, faster than both its rest speed and |qd0| exp(-L t) (on the
        model the brake slows it as exp(-rate t), twice as fast); from then on, faded in at L.
        Started by the first call after a command that was not the brake's (`_braking`
        None)."""
        memory = self._braking
        m = len(cfg.index)
        if memory is None:
            self._braking = _BrakeMemory(t, qd.copy(), np.zeros(m), deque(
                maxlen=int(1.0 / cfg.period) + 2), np.zeros(m), np.abs(qd[cfg.index]),
                np.zeros(m, bool), np.zeros(m))
            return self._braking.acting
        e, sent = memory.e, memory.sent
        dt = t - memory.last
        if dt > 0.0:
            gain = min(0.5 * rate * dt, 1.0)
            while len(sent) > 1 and sent[1][0] <= t - delay:
                sent.popleft()
            if sent and sent[0][0] <= t - delay:
                qdd = np.zeros(cfg.model.n)
                qdd[cfg.index] = (qd[cfg.index] - memory.qd[cfg.index]) / dt
                missed = sent[0][1] - _rnea_rows(cfg.model, q, qd, qdd)[cfg.index]
                if cfg.compensates_gravity:
                    missed += _gravity_rows(cfg.model, q)[cfg.index]
                if np.all(np.isfinite(missed)):
                    e += gain * (missed - e)
                    np.clip(e, -cfg.effort_limits, cfg.effort_limits, out=e)
                    memory.recent += min(dt / delay, 1.0) * (missed - memory.recent)
                    memory.rate = rate
            since = t - memory.last0 - delay
            if since > 0.0:
                bound = np.maximum(memory.speed * math.exp(-0.5 * rate * since),
                                   rest_speeds(np.asarray(cfg.model.velocity_limits)[cfg.index]))
                failing = ~memory.failed & (np.abs(qd[cfg.index]) > bound)
                memory.failed |= failing
                memory.failed_at[failing] = t
            memory.weight = np.where(memory.failed, np.minimum(memory.weight + gain, 1.0), 0.0)
            memory.acting = memory.weight * e
            memory.last, memory.qd = t, qd.copy()
        return memory.acting

    def _checked(self, cfg, finite, q):
        """self.tau, or the fallback if the law was not finite; remembered for the rate limit."""
        if finite:
            self._good, self.failing_since = cfg, None
        else:
            self._fall_back(q)
        self._previous[:] = self.tau
        self._has_previous = True
        return self.tau

    def _fall_back(self, q):
        """Non-finite law: the gravity hold of the last good configuration at q, else the
        previous command, else 0; clamped to that configuration's limits."""
        self.fallbacks += 1
        if self.failing_since is None:
            self.failing_since = time.perf_counter()
        cfg = self._good
        tau = _gravity_rows(cfg.model, q)[cfg.index]
        if cfg.compensates_gravity:
            tau = np.zeros(len(cfg.index))
        if not np.all(np.isfinite(tau)):
            tau = self._previous if self._has_previous else np.zeros(len(cfg.index))
        np.clip(tau, -cfg.effort_limits, cfg.effort_limits, out=self.tau)
        self.tau[~np.isfinite(self.tau)] = 0.0


def rest_speeds(limits: Sequence[float]) -> np.ndarray:
    """The rest speed of each joint [rad/s or m/s] of velocity limits `limits` (inf where
    absent, as the model has them): REST_FRACTION x its limit, or REST_SPEED where it has
    none. The brake's end (control/modes.py) and its observer (`Controller.brake`)."""
    limits = np.asarray(limits, dtype=float)
    return np.where(np.isfinite(limits), REST_FRACTION * limits, REST_SPEED)


@dataclass
class _BrakeMemory:
    """The brake's observer (`Controller._brake_observer`) over one brake: the last new
    state's time `last` [s] and velocity `qd` (model size), the estimate `e` [N·m], the
    commands `sent` ((t, command)), what acts of e (`acting`), the controlled joints' speeds
    at the start (`speed`), those the model's brake failed to slow (`failed`) and how far e
    is faded in on each (`weight`, 0 to 1); `last0` the start [s]; `recent`, the residual
    low-passed over the loop's lateness (what the model misses now)."""

    last: float
    qd: np.ndarray
    e: np.ndarray
    sent: deque
    acting: np.ndarray
    speed: np.ndarray
    failed: np.ndarray
    weight: np.ndarray

    def __post_init__(self):
        self.last0 = self.last
        self.recent = np.zeros(len(self.e))  # the residual over the last delay: the handover's
        self.rate = BRAKE_RATE  # [1/s] the brake's rate at the last new state
        self.failed_at = np.zeros(len(self.e))  # [s] when each joint failed


def _same_objects(args, last):
    """The law's arguments are the objects of `last` (the workspace never changes)."""
    return (args[0] is last[0] and args[2] is last[2] and args[3] is last[3]
            and args[4] is last[4] and args[5] is last[5] and args[6] is last[6]
            and args[7] is last[7])


@njit(cache=True)
def _assemble(model, work, q, qd, ref):
    """The RNEA rows 0, 1 and 3 of a tick, in place; e = [q_d - q; qd_d - qd] of the
    controlled joints. Row 0: (q, qd, qdd_d + Kp e + Kd ed); row 1: (q_d, qd_d, qdd_d); row 3:
    (q, 0, 0). Joints not controlled enter rows 0 and 1 at their measured q, qd and qdd = 0.
    (Row 2 is the estimator's: `adaptation.window`.)
    """
    Q, QD, QDD, e = work.Q, work.QD, work.QDD, work.e
    for i in range(q.shape[0]):
        Q[0, i] = Q[1, i] = Q[3, i] = q[i]
        QD[0, i] = QD[1, i] = qd[i]
        QD[3, i] = QDD[0, i] = QDD[1, i] = QDD[3, i] = 0.0
    for k in range(model.index.shape[0]):
        i = model.index[k]
        e[0, k] = ref[0, k] - q[i]
        e[1, k] = ref[1, k] - qd[i]
        Q[1, i] = ref[0, k]
        QD[1, i] = ref[1, k]
        QDD[1, i] = ref[2, k]
        QDD[0, i] = ref[2, k] + model.kp[k] * e[0, k] + model.kd[k] * e[1, k]


@njit(cache=True)
def _limit(raw, previous, limits, step, tau, saturation):
    """tau = clamp(raw, ±limits) after |tau - previous| <= step (if step > 0), in place.

    Counts saturation per joint; returns False (tau untouched) if any raw value is not finite.
    """
    for k in range(raw.shape[0]):
        if not np.isfinite(raw[k]):
            return False
    for k in range(raw.shape[0]):
        t = raw[k]
        if step > 0.0:
            t = min(max(t, previous[k] - step), previous[k] + step)
        t = min(max(t, -limits[k]), limits[k])
        saturation[k] += t != raw[k]
        tau[k] = t
    return True


@njit(cache=True)
def _bounded(model, work, step):
    """The step bound (issue 43), in place on work.tau after `_limit`: per controlled joint
    |tau - tau_j| <= bound = ((M_ii(q0) + a^) / d + b + b^) qd_max [N·m] for every command tau_j
    of the last d (`history`, the last round(d / dt) commands published, at most HISTORY), d =
    max(the loop's lateness, a period) [s] (`Controller.lateness`), b + b^ the viscous
    friction told and measured (at least 0): the torque that takes the joint, as the law knows
    it, from rest to its velocity limit within the time the loop needs to see the arm answer,
    so the command moves by at most that within that time, not per tick (per tick a late
    loop's command could gain d / dt bounds before the loop saw the answer: the xArm7's
    joint7, stuck by 0.9 N·m of friction and pushed by rule 6, broke away under 1.5 N·m with
    commands 9 ms late and braked at 1.12x its velocity limit; over the lateness 0.98x, no
    brake; corpus seeds 1-3 446 -> 447 of 480, brakes 25 -> 24). Its inertia's share, and
    its damping's: a joint its friction damps answers a step Δ by at most Δ / b;
    without it the SO-100's 1e-5 kg·m² wrist under 2 N·m·s/rad could change its command by
    0.01 N·m per tick, and a command the law had left drove it from its goal for 0.5 s).
    A command the law changes faster would move the joint further
    than the loop can watch; a law that misjudges an arm (chatter, a wrong estimate) is so kept
    from a bang-bang command. The brake and the gravity hold do not pass here. Where the
    bound acts, `stepped` counts it (and `saturation`). step < 0: no previous command (the
    first after a reset), no bound."""
    d = adaptation.lateness(model, work)
    history, kept = work.history, work.kept
    size = history.shape[0]
    if step < 0.0:
        kept[0] = 0  # no previous command: the window starts over
    else:
        kept[1] = (kept[1] + 1) % size
        history[kept[1]] = work.previous  # the command published last
        kept[0] = min(kept[0] + 1, size)
    span = min(kept[0], max(1, int(round(d / model.dt))))  # the window: the last d
    for k in range(model.index.shape[0]):
        bound = adaptation.reach_torque(model, work, k, model.inertia[k] + work.theta[0, k], d)
        work.bound[k] = bound
        if step < 0.0:
            continue
        high = low = work.previous[k]
        for j in range(1, span):
            past = history[(kept[1] - j) % size, k]
            high, low = max(high, past), min(low, past)
        upper, lower = low + bound, high - bound
        if lower > upper:  # the window spans more than 2 bounds (a bound just cut): per tick
            upper, lower = work.previous[k] + bound, work.previous[k] - bound
        if work.tau[k] > upper or work.tau[k] < lower:
            work.tau[k] = min(max(work.tau[k], lower), upper)
            work.stepped[k] += 1
            work.saturation[k] += 1


@njit(cache=True)
def _law(model, work, f_body, q, qd, ref, qm, qdm, step, state_dt):
    """One tick's law in one compiled call; returns False if it was not finite.

    tau_law = T[0] + boost (Kp e + Kd ed) (computed_torque) or T[1] + Kp e + Kd ed
    (feedforward_pd), plus the friction feedforward (b + b^)·qd_d + c·tanh(qd_d / w), the
    estimated bias d^ and the integral; minus g(q) = T[3] if the robot compensates
    gravity; then `_limit`; then `adaptation.adapt` (the next tick's estimates and integral).
    The RNEA rows use the model's armature plus the estimated a^; row 2 is the estimator's
    (`adaptation.window`: qm, qdm the state as measured, state_dt as `Controller.command`).
    feedforward = T[1] + friction.
    (numba's disk cache does not see edits to rnea_kernel.py: `Controller._compile` checks
    this kernel against `rnea` once.)
    """
    closing = adaptation.window(model, work, state_dt, qm, qdm)
    _assemble(model, work, q, qd, ref)
    adaptation.armature(model, work)
    theta, armature = work.theta, work.armature
    rows = 4 if model.compensate else (3 if closing and model.forget < 1.0 else 2)
    T = work.T
    rnea_kernel.rnea_batch(model.parents, model.prismatic, model.axes, model.R_tree,
                           model.p_tree, model.I, armature, work.Q[:rows],
                           work.QD[:rows], work.QDD[:rows], model.v0, model.a0, f_body[:rows],
                           T[:rows])
    raw = work.raw
    for k in range(model.index.shape[0]):
        i = model.index[k]
        e, ed, qd_d = work.e[0, k], work.e[1, k], ref[1, k]
        damped = adaptation.damped(model, theta, k)
        friction = (theta[1, k] * qd_d + adaptation.coulomb(model, theta, k, qd_d, e, damped)
                    + friction_torque(model.viscous[k], model.coulomb[k], model.offset[k],
                                      model.stribeck[k], model.width, model.stribeck_velocity,
                                      qd_d))
        work.feedforward[k] = T[1, i] + friction
        feedback = model.kp[k] * e + model.kd[k] * ed
        stiffness = damped * model.kp[k] * e
        law = T[1, i] + feedback if model.pd else T[0, i] + model.boost[k] * feedback + stiffness
        raw[k] = (law + friction + theta[2, k] + work.integral[k]
                  - (T[3, i] if model.compensate else 0.0))
    if not _limit(raw, work.previous, model.limits, max(step, 0.0), work.tau, work.saturation):
        return False
    _bounded(model, work, step)
    adaptation.adapt(model, work, qm, qdm, closing, ref)
    return True
