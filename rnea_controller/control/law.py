"""The control law, its limits and its parameters (ROS-free; the node is thin glue around it).

Two laws, each ONE call of `rnea` per tick (never the mass matrix in the loop), with
e = q_d - q and ed = qd_d - qd on the controlled joints:

    computed_torque:  tau = RNEA(q, qd, qdd_d + Kp e + Kd ed)        Kp [1/s²], Kd [1/s]
    feedforward_pd:   tau = RNEA(q_d, qd_d, qdd_d) + Kp e + Kd ed     Kp [N·m/rad], Kd [N·m·s/rad]

With an exact model, computed torque gives each joint the error dynamics ë + Kd ė + Kp e = 0.
Joints of the model that are not controlled enter RNEA at their measured q, qd and qdd = 0.
The same RNEA call also evaluates the feedforward RNEA(q_d, qd_d, qdd_d) published on
~/reference: both states go in as one batch of two (`rnea` on shape (2, n)).

Limits, in this order: optional torque-rate limit |tau - tau_prev| <= rate·dt; effort clamp
|tau| <= min(URDF <limit effort>, effort_limits.<joint>); a non-finite result falls back to
holding the measured position against gravity (then to the previous command, then to zero),
so a published command is always finite and within limits. Every tick a joint is limited
counts in `saturation[joint]`.

Parameters are validated by `validate_parameters(values, model)`, which returns an immutable
`ControllerConfig` (or raises ParameterError naming the parameter and the value); the node
swaps the whole config between two ticks.

Default gains (a joint without `gains.<joint>.p/.d`): critically damped error dynamics with
natural frequency ω = 20 rad/s. computed_torque: Kp = ω² = 400 1/s², Kd = 2ω = 40 1/s.
feedforward_pd: the same scaled by the joint's own inertia, Kp = ω² M_ii(q0), Kd = 2ω M_ii(q0)
[N·m/rad, N·m·s/rad], with M(q0) computed ONCE when the config is built (q0 = the zero
position clipped into the joint limits; M_ii at least 1e-3 kg·m²).
"""
from dataclasses import dataclass
import math

from numba import njit
import numpy as np

from rnea_controller.dynamics import rnea_kernel
from rnea_controller.dynamics.rnea import body_forces, mass_matrix, rnea
from rnea_controller.errors import DimensionError, ModelError, ParameterError

LAWS = ('computed_torque', 'feedforward_pd')
STALE_POLICIES = ('hold_then_stop', 'hold', 'stop')
FINAL_COMMANDS = ('gravity_hold', 'zero')
NATURAL_FREQUENCY = 20.0  # ω [rad/s] of the default gains
MIN_JOINT_INERTIA = 1e-3  # [kg·m²] floor of M_ii for the feedforward_pd default gains

#: Every parameter the controller reads, with its default (None: unset).
DEFAULTS = {
    'joints': [],
    'update_rate': 1000,
    'control_law': 'computed_torque',
    'torque_rate_limit': 0.0,
    'payload.link': '',
    'payload.mass': 0.0,
    'payload.com': [0.0, 0.0, 0.0],
    'payload.inertia': [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    'gravity': [0.0, 0.0, -9.81],
    'allow_partial_joints_goal': False,
    'state_timeout': 0.05,
    'stale_policy': 'hold_then_stop',
    'stale_hold_time': 1.0,
    'final_command': 'gravity_hold',
    'external_wrench_timeout': 0.1,
}
PER_JOINT = ('gains.{}.p', 'gains.{}.d', 'effort_limits.{}')


@dataclass(frozen=True)
class ControllerConfig:
    """Everything one tick needs, immutable; replaced whole when a parameter changes.

    model: the RobotModel with payload and gravity applied; joints: controlled joint names;
    index: their model indices; kp, kd: per controlled joint (units per law, see module doc);
    effort_limits [N·m]; torque_rate_limit [N·m/s] (0 = off); period = 1 / update_rate [s];
    state_timeout, stale_hold_time, external_wrench_timeout [s]; values: the parameter values.
    """

    model: object
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
    values: dict


def _number(values, name, low=0.0, strict=False):
    """values[name] as a finite float >= low (> low if strict), or ParameterError."""
    value = values[name]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < low or (strict and value == low):
        relation = '>' if strict else '>='
        raise ParameterError(f'{name} = {value!r}: must be a finite number {relation} {low:g}')
    return float(value)


def _vector(values, name, size):
    """values[name] as `size` finite floats, or ParameterError."""
    value = values[name]
    try:
        array = np.array(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        array = np.array([np.nan])
    if array.shape != (size,) or not np.all(np.isfinite(array)):
        raise ParameterError(f'{name} = {value!r}: must be {size} finite numbers')
    return array


def _choice(values, name, choices):
    if values[name] not in choices:
        raise ParameterError(f'{name} = {values[name]!r}: must be one of {", ".join(choices)}')
    return values[name]


def _controlled_joints(values, model):
    """The `joints` parameter checked against the model; [] means every joint in model order."""
    joints = list(values['joints']) or list(model.joint_names)
    for name in joints:
        if name not in model.joint_names:
            raise ParameterError(f'joints: {name!r} is not a joint of the model '
                                 f'({", ".join(model.joint_names)})')
    if len(set(joints)) != len(joints):
        raise ParameterError(f'joints = {joints}: a joint is listed twice')
    return tuple(joints)


def _with_payload_and_gravity(values, model):
    """The model with `payload.*` attached and `gravity` set, or ParameterError."""
    gravity = _vector(values, 'gravity', 3)
    mass = _number(values, 'payload.mass')
    com = _vector(values, 'payload.com', 3)
    ixx, ixy, ixz, iyy, iyz, izz = _vector(values, 'payload.inertia', 6)
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    link = values['payload.link']
    if link:
        try:
            model = model.with_payload(link, mass, com, inertia)
        except ModelError as error:
            raise ParameterError(f'payload.link = {link!r}: {error}') from None
    return model.with_gravity(gravity)


def joint_of_parameter(name):
    """The joint named in 'gains.<joint>.p', 'gains.<joint>.d' or 'effort_limits.<joint>'."""
    if name.startswith('gains.') and name.endswith(('.p', '.d')):
        return name[len('gains.'):-2]
    if name.startswith('effort_limits.'):
        return name[len('effort_limits.'):]
    return None


def default_gains(model, index, law):
    """Gains of joints without configured ones: ω = NATURAL_FREQUENCY, critically damped.

    computed_torque: (ω², 2ω) [1/s², 1/s]; feedforward_pd: (ω² M_ii, 2ω M_ii) at q0.
    """
    scale = np.ones(len(index))
    if law == 'feedforward_pd':
        q0 = np.clip(np.zeros(model.n), model.position_limits[:, 0], model.position_limits[:, 1])
        scale = np.maximum(np.diag(mass_matrix(model, q0))[index], MIN_JOINT_INERTIA)
    return NATURAL_FREQUENCY**2 * scale, 2.0 * NATURAL_FREQUENCY * scale


def _gains_and_limits(values, model, joints, index, law):
    """Per-joint kp, kd (configured or default) and effort limits (URDF, or a lower override)."""
    kp, kd = default_gains(model, index, law)
    limits = np.array(model.effort_limits, dtype=float)[index]
    for k, joint in enumerate(joints):
        for name, target in (('gains.{}.p', kp), ('gains.{}.d', kd)):
            if values.get(name.format(joint)) is not None:
                target[k] = _number(values, name.format(joint))
        name = f'effort_limits.{joint}'
        if values.get(name) is not None:
            override = _number(values, name, strict=True)
            if override > limits[k]:
                raise ParameterError(f'{name} = {override:g} N·m is above the URDF limit '
                                     f'{limits[k]:g} N·m of joint {joint!r}')
            limits[k] = override
    return kp, kd, limits


def validate_parameters(values, model):
    """Check parameter values and build the ControllerConfig they describe.

    values: {parameter name: value} (missing names take DEFAULTS; per-joint names
    'gains.<joint>.p', 'gains.<joint>.d', 'effort_limits.<joint>' may be absent or None);
    model: the RobotModel from robot_description (without payload).
    Raises ParameterError naming the parameter and the value.
    """
    values = {**DEFAULTS, **values}
    joints = _controlled_joints(values, model)
    law = _choice(values, 'control_law', LAWS)
    for name in values:
        joint = joint_of_parameter(name)
        if joint is not None and joint not in joints:
            raise ParameterError(f'{name}: {joint!r} is not a controlled joint')
    model = _with_payload_and_gravity(values, model)
    index = np.array([model.joint_index(name) for name in joints], dtype=int)
    kp, kd, limits = _gains_and_limits(values, model, joints, index, law)
    rate = _number(values, 'update_rate', strict=True)
    return ControllerConfig(
        model=model, joints=joints, index=index, law=law, kp=kp, kd=kd, effort_limits=limits,
        torque_rate_limit=_number(values, 'torque_rate_limit'), update_rate=rate,
        period=1.0 / rate, allow_partial=bool(values['allow_partial_joints_goal']),
        state_timeout=_number(values, 'state_timeout', strict=True),
        stale_policy=_choice(values, 'stale_policy', STALE_POLICIES),
        stale_hold_time=_number(values, 'stale_hold_time'),
        final_command=_choice(values, 'final_command', FINAL_COMMANDS),
        external_wrench_timeout=_number(values, 'external_wrench_timeout'),
        values=values)


class Controller:
    """The per-tick computation with preallocated work arrays and the limiter's memory.

    `command(config, q, qd, ref, f_ext)` returns the limited torque of the controlled joints;
    `feedforward` then holds RNEA(q_d, qd_d, qdd_d) of the same tick. `saturation` counts, per
    controlled joint, the ticks its command was limited; `fallbacks` the non-finite results.
    """

    def __init__(self, config):
        n, m = config.model.n, len(config.joints)
        self._Q, self._QD, self._QDD = np.zeros((2, n)), np.zeros((2, n)), np.zeros((2, n))
        self._e = np.zeros((2, m))  # rows e, ed
        self._nan = np.full((2, n), np.nan)
        self.tau = np.zeros(m)
        self.feedforward = np.zeros(m)
        self.saturation = np.zeros(m, dtype=np.int64)
        self.fallbacks = 0
        self._previous = np.zeros(m)
        self._has_previous = False
        self._T = np.zeros((2, n))
        self._config = None
        self._compile(config)

    def _compile(self, cfg):
        """Compile (or load from numba's disk cache) the tick kernel now, not in a tick, and
        check it once against `rnea` on a moving state: numba's cache does not see edits to
        rnea_kernel.py, which `_tick` calls, so a stale cached `_tick` is recompiled."""
        n, m = cfg.model.n, len(cfg.joints)
        q, qd = 0.3 * np.sin(np.arange(1.0, n + 1)), 0.2 * np.cos(np.arange(1.0, n + 1))
        ref = np.vstack((q[cfg.index] + 0.01, qd[cfg.index], np.full(m, 0.5)))
        self._bind(cfg)
        for attempt in range(2):
            self._call_tick(cfg, self._zero_forces, q, qd, ref)
            if np.allclose(self._T, rnea(cfg.model, self._Q, self._QD, self._QDD)) or attempt:
                break
            _tick.recompile()
        self._call_tick(cfg, np.zeros((2, n, 6)), q, qd, ref)  # with an external wrench
        self.gravity_hold(cfg, q)
        self.reset()
        self.saturation[:] = 0
        self.fallbacks = 0

    def _call_tick(self, cfg, f_body, q, qd, ref):
        """`_tick` on scratch outputs (no limits, no memory): compiles and checks it."""
        m = len(cfg.joints)
        _tick(*self._arrays, f_body, cfg.index, q, qd, ref, cfg.kp, cfg.kd, False,
              np.full(m, np.inf), 0.0, self._Q, self._QD, self._QDD, self._T, self._e,
              np.zeros(m), np.zeros(m), np.zeros(m), np.zeros(m, dtype=np.int64))

    def _bind(self, cfg):
        """The kernel's model arrays (parents ... inertias, v_0, a_0) for this config's model."""
        if cfg is not self._config:
            self._arrays = (*rnea_kernel.model_arrays(cfg.model),
                            *rnea_kernel.model_base_motion(cfg.model))
            self._zero_forces = rnea_kernel.model_zero_forces(cfg.model)
            self._config = cfg
        return self._arrays

    def reset(self):
        """Forget the previous command (the rate limit restarts from the next command)."""
        self._has_previous = False

    def command(self, cfg, q, qd, ref, f_ext=None):
        """Limited tau [N·m] for measured q [rad], qd [rad/s] (model size) and ref (3, m).

        ref rows: q_d, qd_d, qdd_d of the controlled joints (a `Trajectory.sample`). One RNEA
        call on two rows: [q, qd, qdd_d + Kp e + Kd ed] (computed_torque) and the reference
        [q_d, qd_d, qdd_d] (the feedforward, and the whole model torque of feedforward_pd),
        assembled, computed and limited in ONE compiled call (`_tick`).
        """
        n = cfg.model.n
        if q.shape != (n,) or qd.shape != (n,) or ref.shape != (3, len(cfg.index)):
            raise DimensionError(f'command: q {q.shape}, qd {qd.shape} and ref {ref.shape} '
                                 f'do not fit {n} joints, {len(cfg.index)} controlled')
        arrays = self._bind(cfg)
        f_body = self._zero_forces if not f_ext else body_forces(cfg.model, f_ext, 2)
        step = cfg.torque_rate_limit * cfg.period if self._has_previous else 0.0
        finite = _tick(*arrays, f_body, cfg.index, q, qd, ref, cfg.kp, cfg.kd,
                       cfg.law == 'feedforward_pd', cfg.effort_limits, step, self._Q, self._QD,
                       self._QDD, self._T, self._e, self._previous, self.tau, self.feedforward,
                       self.saturation)
        return self._checked(cfg, finite, q)

    def gravity_hold(self, cfg, q, rate_limited=True):
        """Limited g(q) = RNEA(q, 0, 0) [N·m]: holds the measured position q against gravity."""
        zeros = np.zeros((2, cfg.model.n))
        try:
            T = rnea(cfg.model, np.vstack((q, q)), zeros, zeros)
        except DimensionError:
            T = self._nan
        return self._finish(cfg, T, q, False, rate_limited)

    def _finish(self, cfg, T, q, pd, rate_limited):
        """Law output, rate limit, effort clamp, non-finite guard and saturation count."""
        step = cfg.torque_rate_limit * cfg.period if rate_limited and self._has_previous else 0.0
        finite = _limit(cfg.index, T, self._e, cfg.kp, cfg.kd, pd, cfg.effort_limits, step,
                        self._previous, self.tau, self.feedforward, self.saturation)
        return self._checked(cfg, finite, q)

    def _checked(self, cfg, finite, q):
        """self.tau, or the fallback if the law was not finite; remembered for the rate limit."""
        if not finite:
            self._fall_back(cfg, q)
        self._previous[:] = self.tau
        self._has_previous = True
        return self.tau

    def _fall_back(self, cfg, q):
        """A non-finite command becomes gravity hold at q, else the previous command, else 0."""
        self.fallbacks += 1
        tau = _gravity(cfg, q)
        if not np.all(np.isfinite(tau)):
            tau = self._previous if self._has_previous else np.zeros(len(cfg.index))
        np.clip(tau, -cfg.effort_limits, cfg.effort_limits, out=self.tau)
        self.tau[~np.isfinite(self.tau)] = 0.0


def _gravity(cfg, q):
    """g(q) = RNEA(q, 0, 0) on the controlled joints [N·m]; NaN if q is not usable."""
    zeros = np.zeros(cfg.model.n)
    try:
        return rnea(cfg.model, q, zeros, zeros)[cfg.index]
    except DimensionError:
        return np.full(len(cfg.index), np.nan)


@njit(cache=True)
def _assemble(index, q, qd, ref, kp, kd, Q, QD, QDD, e):
    """The two RNEA rows of a tick, in place; e = [q_d - q; qd_d - qd] of the controlled joints.

    Row 0: (q, qd, qdd_d + Kp e + Kd ed); row 1: (q_d, qd_d, qdd_d). Joints not controlled
    enter both rows at their measured q, qd and qdd = 0.
    """
    for i in range(q.shape[0]):
        Q[0, i] = q[i]
        Q[1, i] = q[i]
        QD[0, i] = qd[i]
        QD[1, i] = qd[i]
        QDD[0, i] = 0.0
        QDD[1, i] = 0.0
    for k in range(index.shape[0]):
        i = index[k]
        e[0, k] = ref[0, k] - q[i]
        e[1, k] = ref[1, k] - qd[i]
        Q[1, i] = ref[0, k]
        QD[1, i] = ref[1, k]
        QDD[1, i] = ref[2, k]
        QDD[0, i] = ref[2, k] + kp[k] * e[0, k] + kd[k] * e[1, k]


@njit(cache=True)
def _limit(index, T, e, kp, kd, pd, limits, step, previous, tau, feedforward, saturation):
    """tau = clamp(law, ±limits) after |tau - previous| <= step (if step > 0), in place.

    law: T[0] (computed_torque) or T[1] + Kp e + Kd ed (feedforward_pd, pd=True); feedforward
    = T[1]. Counts saturation per joint; returns False if any law value is not finite.
    """
    finite = True
    for k in range(index.shape[0]):
        i = index[k]
        feedforward[k] = T[1, i]
        raw = T[1, i] + kp[k] * e[0, k] + kd[k] * e[1, k] if pd else T[0, i]
        if not np.isfinite(raw):
            finite = False
            continue
        t = raw
        if step > 0.0:
            t = min(max(t, previous[k] - step), previous[k] + step)
        t = min(max(t, -limits[k]), limits[k])
        saturation[k] += t != raw
        tau[k] = t
    return finite


@njit(cache=True)
def _tick(parents, prismatic, axes, R_tree, p_tree, I, v0, a0, f_ext, index, q, qd, ref, kp,
          kd, pd, limits, step, Q, QD, QDD, T, e, previous, tau, feedforward, saturation):
    """One tick's law in one compiled call: `_assemble`, RNEA on the two rows, `_limit`.

    A non-finite RNEA result (from non-finite q or qd) makes both rows NaN, so that `_limit`
    reports it and the caller falls back. Returns False if the law was not finite.
    (numba's disk cache does not see edits to rnea_kernel.py: `Controller._compile` checks
    this kernel against `rnea` once and recompiles a stale one.)
    """
    _assemble(index, q, qd, ref, kp, kd, Q, QD, QDD, e)
    total = rnea_kernel.rnea_batch(parents, prismatic, axes, R_tree, p_tree, I, Q, QD, QDD, v0,
                                   a0, f_ext, T)
    if not np.isfinite(total):
        T[:] = np.nan
    return _limit(index, T, e, kp, kd, pd, limits, step, previous, tau, feedforward, saturation)
