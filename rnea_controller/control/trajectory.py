"""Joint-trajectory sampling with the semantics of ros2_controllers' joint_trajectory_controller.

ROS-free: the node converts trajectory_msgs/JointTrajectory into plain arrays and times in
seconds on one time axis (the node's clock), and this module does the rest.

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
ends in the past.
"""
from dataclasses import dataclass
import math

from numba import njit
import numpy as np

from rnea_controller.errors import TrajectoryError


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


def _coefficients(T, p0, v0, a0, p1, v1, a1, order):
    """Polynomial coefficients c[0..5] (rows) of one segment of duration T [s].

    order 1: linear; 3: cubic (Hermite); 5: quintic. h = p1 - p0.
    """
    c = np.zeros((6, p0.shape[0]))
    h = p1 - p0
    c[0] = p0
    if order == 1:
        c[1] = h / T
        return c
    c[1] = v0
    if order == 3:
        c[2] = (3.0 * h - (2.0 * v0 + v1) * T) / T**2
        c[3] = (-2.0 * h + (v0 + v1) * T) / T**3
        return c
    c[2] = 0.5 * a0
    c[3] = (20.0 * h - (8.0 * v1 + 12.0 * v0) * T - (3.0 * a0 - a1) * T**2) / (2.0 * T**3)
    c[4] = (-30.0 * h + (14.0 * v1 + 16.0 * v0) * T + (3.0 * a0 - 2.0 * a1) * T**2) / (2.0 * T**4)
    c[5] = (12.0 * h - 6.0 * (v1 + v0) * T + (a1 - a0) * T**2) / (2.0 * T**5)
    return c


class Trajectory:
    """An immutable piecewise-polynomial reference q_d(t), qd_d(t), qdd_d(t) for n joints.

    Build one with `Trajectory.hold(q, t)` or `plan(...)`; read it with `sample(t)`.
    """

    def __init__(self, times, coefficients, final_position):
        self.times = np.ascontiguousarray(times, dtype=float)  # (m+1,) knot times [s]
        self.coefficients = np.ascontiguousarray(coefficients, dtype=float)  # (m, 6, n)
        self.final_position = np.ascontiguousarray(final_position, dtype=float)  # (n,)
        self.n = self.final_position.shape[0]
        self._t_last = float(self.times[-1]) if len(self.coefficients) else -np.inf

    @classmethod
    def hold(cls, q, t=0.0):
        """Hold position q [rad] from time t [s] on, with zero velocity and acceleration."""
        q = np.array(q, dtype=float)
        return cls([t], np.zeros((0, 6, q.shape[0])), q)

    @property
    def start_time(self):
        """Time of the first knot [s]."""
        return float(self.times[0])

    @property
    def end_time(self):
        """Time of the last knot [s]; after it the trajectory holds its last position."""
        return float(self.times[-1])

    def is_holding(self, t):
        """True when t [s] is at or after the last knot (the reference is a constant hold)."""
        return t >= self._t_last

    def sample(self, t, out=None):
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
        c0, c1, c2, c3, c4, c5 = c[0, j], c[1, j], c[2, j], c[3, j], c[4, j], c[5, j]
        out[0, j] = c0 + s * (c1 + s * (c2 + s * (c3 + s * (c4 + s * c5))))
        out[1, j] = c1 + s * (2.0 * c2 + s * (3.0 * c3 + s * (4.0 * c4 + s * 5.0 * c5)))
        out[2, j] = 2.0 * c2 + s * (6.0 * c3 + s * (12.0 * c4 + s * 20.0 * c5))


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


def _check_point(k, point, names, limits, previous_time):
    """Check one point's lengths, timing, finiteness and position limits; raise TrajectoryError."""
    n = len(names)
    tfs = float(point.time_from_start)
    if not math.isfinite(tfs) or tfs < 0.0:
        raise TrajectoryError(f'point {k}: time_from_start {tfs} s must be finite and >= 0')
    if previous_time is not None and tfs <= previous_time:
        raise TrajectoryError(
            f'point {k}: time_from_start {tfs} s is not after point {k - 1} ({previous_time} s)')
    for field in ('positions', 'velocities', 'accelerations'):
        values = getattr(point, field)
        if len(values) not in ((n,) if field == 'positions' else (0, n)):
            raise TrajectoryError(
                f'point {k}: {field} has {len(values)} values, expected {n} '
                f'(one per joint name{"" if field == "positions" else ", or none"})')
        for name, value in zip(names, values, strict=False):
            if not math.isfinite(value):
                raise TrajectoryError(f'point {k}: {field} of joint {name!r} is {value}')
    if len(point.accelerations) and not len(point.velocities):
        raise TrajectoryError(f'point {k}: accelerations are given without velocities')
    for name, value, (lower, upper) in zip(names, point.positions, limits, strict=True):
        if not lower <= value <= upper:
            raise TrajectoryError(
                f'point {k}: position {value} of joint {name!r} is outside its limits '
                f'[{lower}, {upper}]')
    return tfs


def validate(names, points, joint_names, position_limits, allow_partial=False):
    """Check a trajectory message; return the controlled-joint index of each message joint.

    names: the message's joint names; points: TrajectoryPoint list in the message's joint order;
    joint_names: the controlled joints; position_limits (n, 2) [rad or m] lower/upper of them.
    Raises TrajectoryError naming the rule, the point, the joint and the value.
    """
    index = _check_names(list(names), joint_names, allow_partial)
    if len(points) == 0:
        raise TrajectoryError('trajectory has no points')
    limits = np.asarray(position_limits, dtype=float)[index]
    previous = None
    for k, point in enumerate(points):
        previous = _check_point(k, point, list(names), limits, previous)
    return index


def plan(names, points, *, joint_names, position_limits, current, now, start_time=None,
         allow_partial=False):
    """Validate a trajectory and build the reference that replaces the current one at `now`.

    names, points: as in the message (any joint order); joint_names: the controlled joints;
    position_limits (n, 2); current: the current desired state (3, n) rows q_d [rad],
    qd_d [rad/s], qdd_d [rad/s^2] (e.g. `old.sample(now)`); now [s]; start_time [s] is the
    header stamp on the same time axis, None (stamp zero) meaning now.
    Points at or before `now` are skipped; the first knot is (now, current).
    Joints the message lacks (allow_partial) keep their current desired position.
    """
    index = validate(names, points, joint_names, position_limits, allow_partial)
    start = now if start_time is None else float(start_time)
    end = start + float(points[-1].time_from_start)
    if end <= now:
        raise TrajectoryError(f'trajectory ends {now - end:.6f} s in the past (at {end:.6f} s)')
    current = np.asarray(current, dtype=float)
    times, coefficients = [now], []
    p0, v0, a0 = current[0], current[1], current[2]
    for point in points:
        t1 = start + float(point.time_from_start)
        if t1 <= now:
            continue
        p1, v1, a1, order = _knot(point, index, current[0])
        coefficients.append(_coefficients(t1 - times[-1], p0, v0, a0, p1, v1, a1, order))
        times.append(t1)
        p0, v0, a0 = p1, v1, a1
    return Trajectory(times, coefficients, p0)


def _knot(point, index, hold_position):
    """Full-size (p, v, a, order) of a point; joints it lacks keep hold_position at rest."""
    p = hold_position.copy()
    v = np.zeros_like(p)
    a = np.zeros_like(p)
    p[index] = point.positions
    order = 1
    if len(point.velocities):
        v[index] = point.velocities
        order = 3
    if len(point.accelerations):
        a[index] = point.accelerations
        order = 5
    return p, v, a, order
