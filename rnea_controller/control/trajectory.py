"""Joint-trajectory sampling with the semantics of ros2_controllers' joint_trajectory_controller.

ROS-free: the node converts trajectory_msgs/JointTrajectory into plain arrays and times in
seconds on one time axis (the node's clock), and this module does the rest: `plan_arrays` checks
and builds a trajectory with numpy on whole arrays (a 10,000-point trajectory in milliseconds,
not in the 1 kHz loop's way), `plan` is the same for a list of `TrajectoryPoint`s, and
`Trajectory.sample` finds the segment by bisection, O(log N), compiled.

A trajectory is a list of knots (t_k, q_k, qd_k, qdd_k). Between two knots the reference is

- linear when the end point carries positions only:      q(s) = c0 + c1 s
- cubic when it carries velocities too:                   q(s) = c0 + c1 s + c2 s^2 + c3 s^3
- quintic when it carries velocities and accelerations:   q(s) = c0 + ... + c5 s^5

with s = t - t_k, matching positions (and velocities, accelerations) at both ends. The first
knot is the current desired state at the moment the trajectory is accepted, so a new trajectory
replaces the running one from where the reference is, with no jump in position (and, for cubic
and quintic segments, none in velocity; a positions-only trajectory is piecewise linear, so its
velocity steps at every point, exactly as in joint_trajectory_controller). Before the first knot
the reference is the first knot; after the last knot it holds the last position with zero
velocity and acceleration.

Refusal rules (TrajectoryError, message naming the joint, point and value): no joint names, no
points, unknown or duplicate joints, a partial joint set unless allowed, array lengths that do
not match the joint names, accelerations without velocities, time_from_start negative or not
strictly increasing, non-finite values, positions outside the joint limits, a trajectory that
ends in the past. The first broken rule is reported as a point-by-point check would find it:
the earliest point, and in it the first rule in the order above (timing, positions, velocities,
accelerations, limits).

Beyond what the arm can do (issue 45; JTC has no such check: a planner's trajectory beyond the
URDF's limits is a planner's bug, and the arm should not be the one to find out), with
`Limits`, on the planned reference itself (so a positions-only trajectory's segment velocities
count too), the trajectory is refused whole:
- a joint's velocity beyond (1 + margin) x its velocity limit, at a point or between two
  (each segment's velocity polynomial sampled at SAMPLES instants, its ends included);
- at a point, the torque the model needs for the reference there, RNEA(q_d, qd_d, qdd_d)
  (gravity, armature and payload included: what computed torque feeds forward), beyond
  (1 + margin) x the joint's effort limit. That is the acceleration the torque limits allow,
  stated where it is known: through the model's inertia at that point, not a fixed figure.
The message names the joint, the point and the value.
"""
import array
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from numba import njit
import numpy as np
from numpy.typing import ArrayLike

from rnea_controller.dynamics import rnea_kernel
from rnea_controller.dynamics.rnea import rnea
from rnea_controller.errors import DimensionError, TrajectoryError

_TYPECODE = attrgetter('typecode')
CHUNK = 1024  # segments computed at once: (1024, 6) float temporaries are 48 kB


@dataclass(frozen=True)
class TrajectoryPoint:
    """One waypoint as a JointTrajectoryPoint carries it, in the message's joint order.

    time_from_start [s]; positions [rad or m]; velocities [rad/s or m/s] and accelerations
    [rad/s^2 or m/s^2] are empty or one value per joint name.
    """

    time_from_start: float
    positions: tuple
    velocities: tuple = ()
    accelerations: tuple = ()


SAMPLES = 9  # instants per segment where its velocity is checked against the limits, ends included
TORQUE_CHUNK = 64  # points per RNEA call inside the torque check's kernel


@dataclass(frozen=True)
class Limits:
    """What the arm can do, per controlled joint (`check_limits`).

    velocity [rad/s], effort [N·m]: (n,), inf where there is none; margin: a trajectory may go
    (1 + margin) x beyond them; model, index: the RobotModel whose RNEA gives the torques and
    the controlled joints' indices in it (None: torques not checked).
    """

    velocity: np.ndarray
    effort: np.ndarray
    margin: float = 0.0
    model: Any = None
    index: np.ndarray | None = None


STOP_MARGIN = 1.5  # a stop's duration over the constant-deceleration one (Trajectory.stop)
STOP_SHORTEST = 0.05  # [s] the shortest stop

def _coefficients(T, p0, v0, a0, p1, v1, a1, order):
    """Polynomial coefficients c[:, 0..5] of m segments of durations T (m, 1) [s].

    order 1: linear; 3: cubic (Hermite); 5: quintic; all m segments have the same order.
    p0 ... a1 are (m, n), h = p1 - p0, and with u = 1/T:
        linear:  c1 = h u
        cubic:   c1 = v0, c2 = (3h - (2 v0 + v1) T) u², c3 = (-2h + (v0 + v1) T) u³
        quintic: c1 = v0, c2 = a0 / 2,
                 c3 = (20h - (8 v1 + 12 v0) T - (3 a0 - a1) T²) u³ / 2,
                 c4 = (-30h + (14 v1 + 16 v0) T + (3 a0 - 2 a1) T²) u⁴ / 2,
                 c5 = (12h - 6 (v1 + v0) T + (a1 - a0) T²) u⁵ / 2.
    Returns (m, 6, n).
    """
    c = np.zeros((p0.shape[0], 6, p0.shape[1]))
    h = p1 - p0
    u = 1.0 / T
    c[:, 0] = p0
    if order == 1:
        c[:, 1] = h * u
        return c
    c[:, 1] = v0
    if order == 3:
        c[:, 2] = (3.0 * h - (2.0 * v0 + v1) * T) * u**2
        c[:, 3] = (-2.0 * h + (v0 + v1) * T) * u**3
        return c
    T2, half_u3 = T * T, 0.5 * u**3
    c[:, 2] = 0.5 * a0
    c[:, 3] = (20.0 * h - (8.0 * v1 + 12.0 * v0) * T - (3.0 * a0 - a1) * T2) * half_u3
    c[:, 4] = (-30.0 * h + (14.0 * v1 + 16.0 * v0) * T + (3.0 * a0 - 2.0 * a1) * T2) * (
        half_u3 * u)
    c[:, 5] = (12.0 * h - 6.0 * (v1 + v0) * T + (a1 - a0) * T2) * (half_u3 * u * u)
    return c


class Trajectory:
    """An immutable piecewise-polynomial reference q_d(t), qd_d(t), qdd_d(t) for n joints.

    Build one with `Trajectory.hold(q, t)` or `plan(...)`; read it with `sample(t)`.
    """

    def __init__(self, times: ArrayLike, coefficients: ArrayLike,
                 final_position: ArrayLike) -> None:
        self.times = np.ascontiguousarray(times, dtype=float)  # (m+1,) knot times [s]
        self.coefficients = np.ascontiguousarray(coefficients, dtype=float)  # (m, 6, n)
        self.final_position = np.ascontiguousarray(final_position, dtype=float)  # (n,)
        self.n = self.final_position.shape[0]
        self._t_last = float(self.times[-1]) if len(self.coefficients) else -np.inf

    @classmethod
    def hold(cls, q: ArrayLike, t: float = 0.0) -> 'Trajectory':
        """Hold position q [rad] from time t [s] on, with zero velocity and acceleration."""
        q = np.array(q, dtype=float)
        return cls([t], np.zeros((0, 6, q.shape[0])), q)

    @classmethod
    def stop(cls, current: ArrayLike, t: float, deceleration: ArrayLike) -> 'Trajectory':
        """Bring a desired state to rest: from `current` (3, n) = (q_d, qd_d, qdd_d) at t [s]
        to rest at q_d + qd_d T / 2, along one quintic of duration T = max over the joints of
        STOP_MARGIN |qd_d| / `deceleration` [rad/s²] (at least STOP_SHORTEST): each joint
        slows down at about its deceleration, none stops abruptly (the loop's stop when its
        states stall, control/modes.py)."""
        current = np.array(current, dtype=float)
        p0, v0, a0 = current
        decel = np.maximum(np.asarray(deceleration, dtype=float), 1e-9)
        T = max(STOP_SHORTEST, float(np.max(STOP_MARGIN * np.abs(v0) / decel, initial=0.0)))
        p1 = p0 + 0.5 * v0 * T
        zeros = np.zeros_like(p0)
        c = _coefficients(np.array([[T]]), p0[None], v0[None], a0[None], p1[None],
                          zeros[None], zeros[None], 5)
        return cls([t, t + T], c, p1)

    @property
    def start_time(self) -> float:
        """Time of the first knot [s]."""
        return float(self.times[0])

    @property
    def end_time(self) -> float:
        """Time of the last knot [s]; after it the trajectory holds its last position."""
        return float(self.times[-1])

    def is_holding(self, t: float) -> bool:
        """True when t [s] is at or after the last knot (the reference is a constant hold)."""
        return t >= self._t_last

    def sample(self, t: float, out: np.ndarray | None = None) -> np.ndarray:
        """Desired (q_d, qd_d, qdd_d) at time t [s] as rows of a (3, n) array.

        On segment k, with s = t - t_k and its coefficients c_0..c_5 (Horner's scheme):
        q_d = Σ c_j s^j, qd_d = Σ j c_j s^(j-1), qdd_d = Σ j (j-1) c_j s^(j-2).
        `out` (3, n) is filled in place if given.
        """
        if out is None:
            out = np.empty((3, self.n))
        _sample(self.times, self.coefficients, self.final_position, float(t), out)
        return out


@njit(cache=True)
def _sample(times, coefficients, final_position, t, out):
    """`Trajectory.sample` compiled: (3, n) rows q_d, qd_d, qdd_d at t [s] into `out`."""
    m = coefficients.shape[0]
    if m == 0 or t >= times[m]:
        for j in range(final_position.shape[0]):
            out[0, j] = final_position[j]
            out[1, j] = 0.0
            out[2, j] = 0.0
        return
    k = max(np.searchsorted(times, t, side='right') - 1, 0)
    s = max(t - times[k], 0.0)
    c = coefficients[k]
    for j in range(c.shape[1]):
        out[0, j], out[1, j], out[2, j] = _quintic(c, j, s)


@njit(cache=True, inline='always')
def _quintic(c, j, s):
    """(q, qd, qdd) of joint j of one segment's coefficients c (6, n) at s [s] into it
    (Horner's scheme; `_horner` is the same in numpy, over many segments)."""
    c0, c1, c2, c3, c4, c5 = c[0, j], c[1, j], c[2, j], c[3, j], c[4, j], c[5, j]
    return (c0 + s * (c1 + s * (c2 + s * (c3 + s * (c4 + s * c5)))),
            c1 + s * (2.0 * c2 + s * (3.0 * c3 + s * (4.0 * c4 + s * 5.0 * c5))),
            2.0 * c2 + s * (6.0 * c3 + s * (12.0 * c4 + s * 20.0 * c5)))


def _check_names(names, joint_names, allow_partial):
    """Map the message's joint names onto controlled-joint indices, or raise TrajectoryError."""
    if len(names) == 0:
        raise TrajectoryError('trajectory has no joint names')
    index = {name: i for i, name in enumerate(joint_names)}
    seen = set()
    for name in names:
        if name not in index:
            raise TrajectoryError(
                f'joint {name!r} is not a controlled joint (controlled: {list(joint_names)})')
        if name in seen:
            raise TrajectoryError(f'joint {name!r} appears more than once in joint_names')
        seen.add(name)
    missing = [name for name in joint_names if name not in seen]
    if missing and not allow_partial:
        raise TrajectoryError(
            f'trajectory lacks joints {missing} and allow_partial_joints_goal is false')
    return np.array([index[name] for name in names], dtype=int)


@dataclass(frozen=True)
class _Rows:
    """One field of N points as an (N, n) array; rows of another length are zeros in `values`.

    lengths (N,): how many values each point gave; present (N,): it gave exactly n.
    """

    values: np.ndarray
    lengths: np.ndarray
    present: np.ndarray


def _rows(field, rows, N, n):
    """`rows`: None (no point has this field), an (N, n') array, or N rows of any lengths."""
    if rows is None:
        return _Rows(np.zeros((N, n)), np.zeros(N, dtype=np.intp), np.zeros(N, dtype=bool))
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        lengths = np.full(rows.shape[0], rows.shape[1], dtype=np.intp)
    else:
        try:
            lengths = np.fromiter(map(len, rows), dtype=np.intp, count=len(rows))
        except TypeError:
            raise TrajectoryError(f'{field} must be one row of numbers per point') from None
    if len(lengths) != N:
        raise TrajectoryError(f'{field} has {len(lengths)} rows for {N} points')
    present = lengths == n
    try:
        if present.all():
            values = _stack(rows, N, n)
        else:
            values = np.zeros((N, n))
            if present.any():
                values[present] = _stack([rows[k] for k in np.flatnonzero(present)], -1, n)
    except (TypeError, ValueError):
        raise TrajectoryError(f'{field} must be numbers') from None
    return _Rows(values, lengths, present)


def _stack(rows, N, n):
    """Rows of n numbers as an (N, n) float array; float64 array.array rows (as rclpy gives
    them) are joined as bytes, 20 times faster than numpy's conversion of a list of them."""
    if isinstance(rows, np.ndarray):
        return rows.astype(float, copy=False)
    if set(map(type, rows)) == {array.array} and set(map(_TYPECODE, rows)) == {'d'}:
        return np.frombuffer(b''.join(rows), dtype=float).reshape(N, n)
    return np.array(rows, dtype=float).reshape(N, n)


def _first_refusal(rules):
    """Message of the earliest point breaking a rule, the first rule in order at that point.

    rules: (mask (N,) of the points breaking it, message(k)) in the order a point is checked.
    """
    firsts = [int(np.argmax(mask)) if mask.any() else None for mask, _ in rules]
    broken = [(k, order) for order, k in enumerate(firsts) if k is not None]
    if broken:
        k, order = min(broken)
        raise TrajectoryError(rules[order][1](k))


def _timing_rules(times):
    """time_from_start finite, >= 0 and strictly increasing (`_first_refusal` rules)."""
    with np.errstate(invalid='ignore'):
        bad = ~np.isfinite(times) | (times < 0.0)
        not_after = np.concatenate([[False], times[1:] <= times[:-1]])
    return [
        (bad, lambda k: f'point {k}: time_from_start {times[k]} s must be finite and >= 0'),
        (not_after, lambda k: f'point {k}: time_from_start {times[k]} s is not after point '
                              f'{k - 1} ({times[k - 1]} s)'),
    ]


def _field_rules(field, rows, names, optional):
    """Length (n, or 0 if optional) and finiteness of one field (`_first_refusal` rules)."""
    n = len(names)
    allowed = rows.present | ((rows.lengths == 0) if optional else False)
    finite = np.isfinite(rows.values)
    bad_value = ~finite.all(axis=1)
    return [
        (~allowed, lambda k: f'point {k}: {field} has {rows.lengths[k]} values, expected {n} '
                             f'(one per joint name{", or none" if optional else ""})'),
        (bad_value, lambda k: f'point {k}: {field} of joint {names[np.argmin(finite[k])]!r} '
                              f'is {rows.values[k, np.argmin(finite[k])]}'),
    ]


def _limit_rule(positions, names, limits):
    """Positions within [lower, upper] of their joint (a `_first_refusal` rule)."""
    lower, upper = limits[:, 0], limits[:, 1]
    with np.errstate(invalid='ignore'):
        outside = (positions.values < lower) | (positions.values > upper)
    bad = outside.any(axis=1) & positions.present

    def message(k):
        j = int(np.argmax(outside[k]))
        return (f'point {k}: position {positions.values[k, j]} of joint {names[j]!r} is '
                f'outside its limits [{lower[j]}, {upper[j]}]')
    return [(bad, message)]


def _checked_arrays(names, times, positions, velocities, accelerations, joint_names,
                    position_limits, allow_partial):
    """Check a trajectory given as arrays; return (index, times, positions, velocities, accel.).

    index: the controlled-joint index of each of `names`; the fields are `_Rows`.
    """
    names = list(names)
    index = _check_names(names, joint_names, allow_partial)
    times = np.asarray(times, dtype=float)
    if times.ndim != 1:
        raise TrajectoryError(f'times must be one value per point, got shape {times.shape}')
    if len(times) == 0:
        raise TrajectoryError('trajectory has no points')
    N, n = len(times), len(names)
    fields = [_rows(field, rows, N, n) for field, rows in (
        ('positions', positions), ('velocities', velocities), ('accelerations', accelerations))]
    p, v, a = fields
    rules = _timing_rules(times) + _field_rules('positions', p, names, optional=False)
    rules += _field_rules('velocities', v, names, optional=True)
    rules += _field_rules('accelerations', a, names, optional=True)
    rules.append((a.present & ~v.present,
                  lambda k: f'point {k}: accelerations are given without velocities'))
    limits = np.asarray(position_limits, dtype=float)[index]
    _first_refusal(rules + _limit_rule(p, names, limits))
    return index, times, p, v, a


def plan_arrays(names: Sequence[str], times: ArrayLike, positions: ArrayLike,
                velocities: ArrayLike | None = None, accelerations: ArrayLike | None = None, *,
                joint_names: Sequence[str], position_limits: ArrayLike, current: ArrayLike,
                now: float, start_time: float | None = None,
                allow_partial: bool = False, limits: Limits | None = None) -> Trajectory:
    """Validate a trajectory given as arrays and build the reference replacing the current one.

    Args:
        names: the message's joint names (any order, k of them)
        times: (N,) time_from_start of each point [s]
        positions: (N, k) [rad or m], or N rows (e.g. the messages' arrays) of any length
        velocities, accelerations: None when no point has them, an (N, k) array, or N rows of
            k values or none (per point, as JointTrajectoryPoint) [rad/s, rad/s²]
        joint_names: the controlled joints (n); position_limits: (n, 2) lower, upper of them
        current: the current desired state (3, n): rows q_d, qd_d, qdd_d (`old.sample(now)`)
        now: [s]; start_time: the header stamp on the same time axis [s], None meaning now
        allow_partial: joints the message lacks keep their current desired position
        limits: what the arm can do (`check_limits`), None: not checked

    Points at or before `now` are skipped; the first knot is (now, current). Raises
    TrajectoryError for the first broken rule (module docstring), all checked on whole arrays.
    """
    index, times, p, v, a = _checked_arrays(names, times, positions, velocities, accelerations,
                                            joint_names, position_limits, allow_partial)
    start = now if start_time is None else float(start_time)
    end = start + float(times[-1])
    if end <= now:
        raise TrajectoryError(f'trajectory ends {now - end:.6f} s in the past (at {end:.6f} s)')
    t = start + times
    keep = t > now  # a suffix: the times increase
    order = np.where(a.present, 5, np.where(v.present, 3, 1))[keep]
    current = np.asarray(current, dtype=float)
    fills = (current[0], 0.0, 0.0)  # joints the message lacks: hold the position, at rest
    p, v, a = (_knots(current[row], fills[row], index, rows.values[keep])
               for row, rows in enumerate((p, v, a)))
    knot_times = np.concatenate([[now], t[keep]])
    planned = Trajectory(knot_times, _segments(np.diff(knot_times), p, v, a, order), p[-1])
    if limits is not None:
        check_limits(planned, limits, joint_names, first_point=len(times) - int(keep.sum()))
    return planned


def check_limits(trajectory: Trajectory, limits: Limits, joint_names: Sequence[str],
                 first_point: int = 0) -> None:
    """TrajectoryError if the planned `trajectory` goes beyond `limits` (module docstring):
    velocities along every segment, then the torques at every point. first_point: the message
    point that ends the trajectory's first segment (points before `now` were skipped)."""
    c, T = trajectory.coefficients, np.diff(trajectory.times)
    scale = 1.0 + limits.margin
    _check_velocities(c, T, limits.velocity * scale, joint_names, first_point, scale)
    if limits.model is not None:
        _check_torques(c, T, limits, joint_names, first_point, scale)


def _check_velocities(c, T, bound, names, first_point, scale):
    """Each segment's velocity at SAMPLES instants against `bound` (n,), in blocks."""
    f = np.roll(np.linspace(0.0, 1.0, SAMPLES), 1)  # its end first: a point's own value wins
    for start in range(0, len(T), CHUNK):
        s = (T[start:start + CHUNK, None] * f)[:, :, None]  # (m, SAMPLES, 1) [s]
        qd = _speed(c[start:start + CHUNK, None], s)  # (m, SAMPLES, n)
        over = ~(np.abs(qd) <= bound)
        if over.any():
            k, sample, j = np.argwhere(over)[0]
            linear = not c[start + k, 2:].any()  # its points give no velocity
            raise TrajectoryError(
                f'{_where(first_point + start + int(k), start + k, sample == 0 and not linear)}: '
                f'velocity {qd[k, sample, j]:.6g} rad/s of joint {names[j]!r} is beyond its '
                f'limit {bound[j] / scale:.6g} rad/s' + _margin_text(scale))


def _where(point, segment, at_end):
    """Where a segment's sample is, in the message's points."""
    if at_end:
        return f'point {point}'
    if segment == 0:
        return f'between the current reference and point {point}'
    return f'between point {point - 1} and point {point}'


def _speed(c, s):
    """qd of coefficients c (..., 6, n) at s (broadcast against c[..., 0, :])."""
    c1, c2, c3, c4, c5 = (c[..., j, :] for j in range(1, 6))
    return c1 + s * (2.0 * c2 + s * (3.0 * c3 + s * (4.0 * c4 + s * 5.0 * c5)))


def _horner(c, s):
    """(q, qd, qdd) of coefficients c (..., 6, n) at s (broadcast against c[..., 0, :])."""
    c0, c1, c2, c3, c4, c5 = (c[..., j, :] for j in range(6))
    q = c0 + s * (c1 + s * (c2 + s * (c3 + s * (c4 + s * c5))))
    qd = c1 + s * (2.0 * c2 + s * (3.0 * c3 + s * (4.0 * c4 + s * 5.0 * c5)))
    qdd = 2.0 * c2 + s * (6.0 * c3 + s * (12.0 * c4 + s * 20.0 * c5))
    return q, qd, qdd


def _check_torques(c, T, limits, names, first_point, scale):
    """The model's RNEA at each point (each segment's end) against the effort limits, in one
    compiled call that runs without the interpreter's lock (`_first_torque_beyond`).

    Issue 45: the check ran in blocks of 64 points, each a few numpy calls and an RNEA call
    that give the lock back for an instant and take it again; each such give-back restarts the
    control thread's wait for the lock (CPython's waiter asks the holder to drop it only after a
    whole switch interval with no hand-over), so the loop waited 5-25 ms on a 10,000-point
    trajectory though no block took 0.3 ms (`./run bench intake`; docs/timing.md). One call
    that releases the lock for its whole run lets the loop through at once."""
    bound = limits.effort * scale
    model, index = limits.model, np.asarray(limits.index, dtype=np.int64)
    k, j = _first_torque_beyond(
        np.ascontiguousarray(c), np.ascontiguousarray(T, dtype=np.float64), index,
        *rnea_kernel.model_arrays(model), *rnea_kernel.model_base_motion(model),
        rnea_kernel.model_zero_forces(model), np.ascontiguousarray(bound, dtype=np.float64))
    if k < 0:
        return
    q, qd, qdd = _horner(c[k], T[k])
    tau = _torques(limits, q[None], qd[None], qdd[None])[0]
    fastest = int(np.argmax(np.abs(qdd)))
    raise TrajectoryError(
        f'point {first_point + int(k)}: joint {names[j]!r} needs '
        f'{tau[j]:.6g} N·m there, beyond its effort limit {bound[j] / scale:.6g} N·m'
        f'{_margin_text(scale)}: accelerations {_numbers(qdd)} rad/s² (joint '
        f'{names[fastest]!r} at {qdd[fastest]:.6g}), velocities {_numbers(qd)} '
        'rad/s, more than the arm can make')


@njit(cache=True, nogil=True)
def _first_torque_beyond(c, T, index, parents, prismatic, axes, R_tree, p_tree, I, armature,
                         v0, a0, f_ext, bound):
    """(k, j): the first segment end k whose RNEA torque of controlled joint j is not within
    ±bound[j] (non-finite included), or (-1, -1). c (N, 6, m) the segments' coefficients, T (N,)
    their durations, index (m,) the controlled joints in the model (its others at rest at 0).
    Compiled with nogil: the interpreter's lock is free while it runs."""
    N, m = c.shape[0], c.shape[2]
    n = parents.shape[0]
    rows = TORQUE_CHUNK
    q, qd, qdd = np.zeros((rows, n)), np.zeros((rows, n)), np.zeros((rows, n))
    tau = np.empty((rows, n))
    for start in range(0, N, rows):
        count = min(rows, N - start)
        for k in range(count):
            for jj in range(m):
                i = index[jj]
                q[k, i], qd[k, i], qdd[k, i] = _quintic(c[start + k], jj, T[start + k])
        rnea_kernel.rnea_batch(parents, prismatic, axes, R_tree, p_tree, I, armature,
                               q[:count], qd[:count], qdd[:count], v0, a0, f_ext, tau[:count])
        for k in range(count):
            for jj in range(m):
                if not abs(tau[k, index[jj]]) <= bound[jj]:
                    return start + k, jj
    return -1, -1


def _torques(limits, q, qd, qdd):
    """RNEA torques (m, n) of the controlled joints at m states of them (the model's other
    joints at rest at 0); inf where they overflow."""
    model, index = limits.model, limits.index
    states = [np.zeros((len(q), model.n)) for _ in range(3)]
    for full, part in zip(states, (q, qd, qdd), strict=True):
        full[:, index] = part
    try:
        return rnea(model, *states)[:, index]
    except DimensionError:  # a sum overflowed: find the points, one at a time
        return np.array([_torque_or_inf(model, index, *row) for row in zip(*states, strict=True)])


def _torque_or_inf(model, index, q, qd, qdd):
    try:
        return rnea(model, q, qd, qdd)[index]
    except DimensionError:
        return np.full(len(index), np.inf)


def _numbers(row):
    return '[' + ', '.join(f'{x:.3g}' for x in row) + ']'


def _margin_text(scale):
    return f' x {scale:g} (trajectory_limit_margin)' if scale != 1.0 else ''


def _knots(value_now, fill, index, values):
    """(m+1, n) knot values: now's, then the m points' (absent values are zeros in `values`)."""
    knots = np.empty((len(values) + 1, len(value_now)))
    knots[0] = value_now
    knots[1:] = fill
    knots[1:, index] = values
    return knots


def _segments(T, p, v, a, order):
    """Coefficients (m, 6, n) of the m segments between the knots, each of its own order.

    Computed in blocks of CHUNK segments: numpy's temporaries then stay small enough to be
    reused from the heap rather than be fresh pages (whose faults took most of the time).
    """
    c = np.empty((len(T), 6, p.shape[1]))
    for start in range(0, len(T), CHUNK):
        block = np.arange(start, min(start + CHUNK, len(T)))
        for k in (1, 3, 5):
            s = block[order[block] == k]
            if len(s) == 0:
                continue
            e = s + 1  # the segments' end knots
            if len(s) == len(block):  # one order in the block (the usual case): views
                s, e = slice(s[0], s[-1] + 1), slice(s[0] + 1, s[-1] + 2)
            c[s] = _coefficients(T[s, None], p[s], v[s], a[s], p[e], v[e], a[e], k)
    return c


def _point_arrays(points):
    """(times, positions, velocities, accelerations) of `TrajectoryPoint`s, rows as given."""
    times = [float(point.time_from_start) for point in points]
    return (times, [point.positions for point in points], [point.velocities for point in points],
            [point.accelerations for point in points])


def validate(names: Sequence[str], points: Sequence[TrajectoryPoint],
             joint_names: Sequence[str], position_limits: ArrayLike,
             allow_partial: bool = False) -> np.ndarray:
    """Check a trajectory message; return the controlled-joint index of each message joint.

    names: the message's joint names; points: TrajectoryPoint list in the message's joint order;
    joint_names: the controlled joints; position_limits (n, 2) [rad or m] lower/upper of them.
    Raises TrajectoryError naming the rule, the point, the joint and the value.
    """
    return _checked_arrays(names, *_point_arrays(points), joint_names, position_limits,
                           allow_partial)[0]


def plan(names: Sequence[str], points: Sequence[TrajectoryPoint], *,
         joint_names: Sequence[str], position_limits: ArrayLike, current: ArrayLike, now: float,
         start_time: float | None = None, allow_partial: bool = False) -> Trajectory:
    """`plan_arrays` for a list of `TrajectoryPoint`s (the message's points, any joint order).

    position_limits (n, 2); current: the current desired state (3, n) rows q_d [rad],
    qd_d [rad/s], qdd_d [rad/s^2] (e.g. `old.sample(now)`); now [s]; start_time [s] is the
    header stamp on the same time axis, None (stamp zero) meaning now.
    Points at or before `now` are skipped; the first knot is (now, current).
    Joints the message lacks (allow_partial) keep their current desired position.
    """
    return plan_arrays(names, *_point_arrays(points), joint_names=joint_names,
                       position_limits=position_limits, current=current, now=now,
                       start_time=start_time, allow_partial=allow_partial)
