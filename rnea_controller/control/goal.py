"""An action goal's rules, as ros2_controllers' joint_trajectory_controller (JTC) states them.

ROS-free: the action server (ros/action_server.py) converts messages into these plain values.
Source: ros2_controllers (kilted) joint_trajectory_controller.cpp `validate_trajectory_msg` and
`update`, and tolerances.hpp (`get_segment_tolerances`, `resolve_tolerance_source`,
`check_state_tolerance_per_joint`).

Tolerances are (3, n) arrays, rows position [rad], velocity [rad/s], acceleration [rad/s^2],
per controlled joint; 0 means "not checked". With e = desired - actual, a joint is within a
tolerance row when not (tol > 0 and |e| > tol). Defaults come from the parameters
`constraints.<joint>.trajectory` (path, position), `constraints.<joint>.goal` (goal, position),
`constraints.stopped_velocity_tolerance` (goal, velocity) and `constraints.goal_time` [s]
(0: no limit). A goal's own value overrides a default when > 0; -1 erases it (0: not checked);
0 keeps the default; any other negative value is illegal and the defaults are used (as JTC).

Outcome of a goal at time t, with t_end its last point's time (`GoalMonitor.update`):
    t < t_end and a joint outside the path tolerance  -> PATH_TOLERANCE_VIOLATED
    (also: the worst error of the control ticks before t_end since the last judgment,
    `keep_worst`, outside it: JTC checks the path at every update, the monitor only at
    action_monitor_rate, and a monitor starved for a whole short goal would see only its end)
    t >= t_end and every joint within goal tolerance   -> SUCCESSFUL
    t >= t_end, outside, goal_time > 0 and t - t_end > goal_time -> GOAL_TOLERANCE_VIOLATED
    otherwise: still running.
"""
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
import math

from numba import njit
import numpy as np

from rnea_controller.errors import TrajectoryError

SUCCESSFUL = 0  # control_msgs/action/FollowJointTrajectory Result codes
INVALID_GOAL = -1
INVALID_JOINTS = -2
OLD_HEADER_TIMESTAMP = -3
PATH_TOLERANCE_VIOLATED = -4
GOAL_TOLERANCE_VIOLATED = -5

SUCCESS_TEXT = 'Goal successfully reached!'
PATH_TEXT = 'Aborted due to path tolerance violation'
PREEMPTED_TEXT = 'Current goal preempted by new incoming action.'
DEACTIVATED_TEXT = 'Current goal cancelled during deactivate transition.'
ERASE = -1.0  # a goal tolerance of -1 removes the default
FINAL_VELOCITY_EPS = float(np.finfo(np.float32).eps)  # JTC: |v_final| > float epsilon refused


@dataclass(frozen=True)
class Tolerances:
    """path, goal: (3, n) tolerances (rows position, velocity, acceleration; 0: not checked);
    goal_time [s]: how long after the last point the goal tolerances may take (0: no limit)."""

    path: np.ndarray
    goal: np.ndarray
    goal_time: float


def default_tolerances(values: Mapping, joints: Sequence[str]) -> Tolerances:
    """The controller's tolerances from its parameter values (a dict; missing or None: JTC's
    defaults, stopped velocity 0.01 rad/s, the others 0)."""
    def value(name, default=0.0):
        v = values.get(name)
        return float(default if v is None else v)
    n = len(joints)
    path, goal = np.zeros((3, n)), np.zeros((3, n))
    for i, joint in enumerate(joints):
        path[0, i] = value(f'constraints.{joint}.trajectory')
        goal[0, i] = value(f'constraints.{joint}.goal')
    goal[1, :] = value('constraints.stopped_velocity_tolerance', 0.01)
    return Tolerances(path, goal, value('constraints.goal_time'))


def resolve(default: float, requested: float) -> float:
    """JTC's `resolve_tolerance_source`: requested > 0 wins, -1 erases (0), 0 keeps default;
    other negative values raise ValueError."""
    if requested > 0.0:
        return requested
    if abs(requested - ERASE) < FINAL_VELOCITY_EPS:
        return 0.0
    if requested < 0.0 or not math.isfinite(requested):
        raise ValueError(f'illegal tolerance {requested}')
    return default


def _override(table, rows, joints, field):
    """Apply (name, position, velocity, acceleration) rows onto a copy of table (3, n)."""
    table = table.copy()
    for name, *requested in rows:
        if name not in joints:
            raise ValueError(f'joint {name!r} in goal.{field} is not a controlled joint')
        i = joints.index(name)
        for k in range(3):
            try:
                table[k, i] = resolve(table[k, i], float(requested[k]))
            except ValueError as error:
                kind = ('position', 'velocity', 'acceleration')[k]
                raise ValueError(f'joint {name!r} in goal.{field}: {kind} {error}') from None
    return table


def goal_tolerances(defaults: Tolerances, joints: Sequence[str], path_tolerance: Iterable,
                    goal_tolerance: Iterable,
                    goal_time_tolerance: float) -> tuple[Tolerances, str | None]:
    """The tolerances of one goal: defaults overridden by the goal's (JTC's rules).

    path_tolerance, goal_tolerance: (name, position, velocity, acceleration) rows;
    goal_time_tolerance [s]. Returns (Tolerances, None), or (defaults, reason) when the goal's
    tolerances are illegal (JTC then logs the reason and uses the defaults).
    """
    joints = list(joints)
    try:
        goal_time = resolve(defaults.goal_time, float(goal_time_tolerance))
    except ValueError as error:
        return defaults, f'goal_time_tolerance: {error}; using the default tolerances'
    try:
        path = _override(defaults.path, path_tolerance, joints, 'path_tolerance')
        goal = _override(defaults.goal, goal_tolerance, joints, 'goal_tolerance')
    except ValueError as error:
        return defaults, f'{error}; using the default tolerances'
    return Tolerances(path, goal, goal_time), None


def within(error: np.ndarray, tolerance: np.ndarray) -> np.ndarray:
    """Per joint: True where no checked row of `error` (3, n) exceeds `tolerance` (3, n)."""
    return ~np.any((tolerance > 0.0) & (np.abs(error) > tolerance), axis=0)


@njit(cache=True)
def keep_worst(worst: np.ndarray, snapshot: np.ndarray, reset: bool) -> None:
    """Per row and joint, the error desired - actual of largest magnitude, in place: worst
    (3, m) [rad, rad/s, rad/s²]; snapshot (5+, m): desired position, velocity, acceleration,
    measured q, qd (the actual acceleration is 0, as the monitor takes it); reset: start over
    with this one. One compiled call in the control tick (~0.3 µs)."""
    for j in range(worst.shape[1]):
        for k in range(3):
            e = snapshot[k, j] - snapshot[3 + k, j] if k < 2 else snapshot[2, j]
            if reset or abs(e) > abs(worst[k, j]):
                worst[k, j] = e


def describe(error: np.ndarray, tolerance: np.ndarray, joints: Sequence[str]) -> str:
    """Text naming each joint outside `tolerance`, its errors and tolerances."""
    bad = (tolerance > 0.0) & (np.abs(error) > tolerance)
    kinds = ('position', 'velocity', 'acceleration')
    parts = [f'{joints[i]} {kinds[k]} error {error[k, i]:.6g} > {tolerance[k, i]:.6g}'
             for i in range(len(joints)) for k in range(3) if bad[k, i]]
    return '; '.join(parts)


def check_goal_trajectory(names: Sequence[str], final_velocities: Sequence[float],
                          has_multi_dof: bool) -> None:
    """What JTC refuses beyond `trajectory.validate`: a final point that is not at rest, and
    (here) any multi-DOF part, which this controller does not follow. Raises TrajectoryError."""
    if has_multi_dof:
        raise TrajectoryError('multi_dof_trajectory is not supported (leave it empty)')
    for name, v in zip(names, final_velocities, strict=False):
        if not abs(v) <= FINAL_VELOCITY_EPS:
            raise TrajectoryError(f'velocity of the last point of joint {name!r} is not zero: {v}')


class GoalMonitor:
    """Decides the outcome of one running goal from the desired and actual states (module doc).

    tolerances: Tolerances; point_times: the absolute times [s] of the goal's points on the
    node's time axis; joints: controlled joint names (for the messages).
    """

    def __init__(self, tolerances: Tolerances, point_times: Sequence[float],
                 joints: Sequence[str]) -> None:
        self.tolerances = tolerances
        self.point_times = np.asarray(point_times, dtype=float)
        self.end_time = float(self.point_times[-1])
        self.joints = list(joints)
        self.first = True
        self.detail = ''

    def index(self, t: float) -> int:
        """JTC's feedback index: how many of the goal's points are at or before t [s]."""
        return int(np.searchsorted(self.point_times, t, side='right'))

    def update(self, t: float, desired: np.ndarray, actual: np.ndarray,
               worst: np.ndarray | None = None) -> tuple[int, str] | None:
        """(code, text) once the goal ends at t [s], else None (`detail` then names the
        joints outside their tolerance, for the log).

        desired, actual: (3, n) rows position, velocity, acceleration of the controlled joints;
        worst: (3, n) the worst errors of the ticks before the goal's end since the last call
        (`keep_worst`), or None: judged against the path tolerance whatever t is.
        """
        error = np.asarray(desired) - np.asarray(actual)
        moving, path = t < self.end_time, self.tolerances.path
        if (moving or self.first) and not np.all(within(error, path)):
            self.first = False
            self.detail = describe(error, path, self.joints)
            return PATH_TOLERANCE_VIOLATED, PATH_TEXT
        self.first = False
        if worst is not None and not np.all(within(worst, path)):
            self.detail = describe(worst, path, self.joints) + ' (the worst since the last check)'
            return PATH_TOLERANCE_VIOLATED, PATH_TEXT
        if moving:
            return None
        if np.all(within(error, self.tolerances.goal)):
            return SUCCESSFUL, SUCCESS_TEXT
        late = t - self.end_time
        if self.tolerances.goal_time > 0.0 and late > self.tolerances.goal_time:
            self.detail = describe(error, self.tolerances.goal, self.joints)
            return GOAL_TOLERANCE_VIOLATED, (
                f'Aborted due to goal_time_tolerance exceeding by {late:.6f} seconds')
        return None
