"""The goal rules of control/goal.py against joint_trajectory_controller's, case by case.

Oracle: the rules as ros2_controllers (kilted) tolerances.hpp and joint_trajectory_controller.cpp
state them (resolve_tolerance_source, check_state_tolerance_per_joint, the update's outcome).
"""
import numpy as np
import pytest

from rnea_controller.control import goal
from rnea_controller.errors import TrajectoryError

JOINTS = ['a', 'b']


def test_defaults_follow_jtc_parameters():
    values = {'constraints.a.trajectory': 0.1, 'constraints.b.goal': 0.02,
              'constraints.goal_time': 0.5, 'constraints.stopped_velocity_tolerance': None}
    tol = goal.default_tolerances(values, JOINTS)
    np.testing.assert_array_equal(tol.path, [[0.1, 0.0], [0, 0], [0, 0]])
    np.testing.assert_array_equal(tol.goal, [[0.0, 0.02], [0.01, 0.01], [0, 0]])
    assert tol.goal_time == 0.5


@pytest.mark.parametrize('default, requested, expected', [
    (0.3, 0.1, 0.1), (0.3, 0.0, 0.3), (0.3, -1.0, 0.0), (0.0, 2.0, 2.0)])
def test_resolve_as_jtc(default, requested, expected):
    assert goal.resolve(default, requested) == expected


@pytest.mark.parametrize('requested', [-0.5, -2.0, float('nan')])
def test_resolve_refuses_illegal(requested):
    with pytest.raises(ValueError, match='illegal tolerance'):
        goal.resolve(0.1, requested)


def test_goal_overrides_defaults_per_joint():
    defaults = goal.default_tolerances({'constraints.a.trajectory': 0.1}, JOINTS)
    tol, reason = goal.goal_tolerances(defaults, JOINTS, [('b', 0.2, 0.0, 0.0),
                                                          ('a', -1.0, 0.0, 0.0)],
                                       [('a', 0.05, 0.0, 0.0)], 1.5)
    assert reason is None
    np.testing.assert_array_equal(tol.path[0], [0.0, 0.2])
    np.testing.assert_array_equal(tol.goal[:2], [[0.05, 0.0], [0.01, 0.01]])
    assert tol.goal_time == 1.5


@pytest.mark.parametrize('path, time, words', [
    ([('c', 0.1, 0, 0)], 0.0, "joint 'c' in goal.path_tolerance"),
    ([('a', 0.1, -3.0, 0)], 0.0, 'velocity illegal tolerance -3.0'),
    ([], -2.0, 'goal_time_tolerance')])
def test_illegal_goal_tolerances_fall_back_to_defaults(path, time, words):
    defaults = goal.default_tolerances({'constraints.goal_time': 0.25}, JOINTS)
    tol, reason = goal.goal_tolerances(defaults, JOINTS, path, [], time)
    assert tol is defaults
    assert words in reason and 'using the default tolerances' in reason


def test_within_checks_only_positive_tolerances():
    tolerance = np.array([[0.1, 0.0], [0.0, 0.2], [0.0, 0.0]])
    error = np.array([[0.05, 5.0], [9.0, -0.3], [1.0, 1.0]])
    np.testing.assert_array_equal(goal.within(error, tolerance), [True, False])
    assert goal.describe(error, tolerance, JOINTS) == 'b velocity error -0.3 > 0.2'


def test_final_point_must_be_at_rest_and_no_multi_dof():
    goal.check_goal_trajectory(JOINTS, [0.0, 1e-9], False)
    with pytest.raises(TrajectoryError, match="joint 'b' is not zero: 0.001"):
        goal.check_goal_trajectory(JOINTS, [0.0, 1e-3], False)
    with pytest.raises(TrajectoryError, match='multi_dof_trajectory'):
        goal.check_goal_trajectory(JOINTS, [], True)


def _monitor(path=0.1, goal_pos=0.01, goal_time=0.5):
    tol = goal.Tolerances(np.array([[path, path], [0, 0], [0, 0]]),
                          np.array([[goal_pos, goal_pos], [0.01, 0.01], [0, 0]]), goal_time)
    return goal.GoalMonitor(tol, [1.0, 2.0], JOINTS)


def _state(position, velocity=0.0):
    state = np.zeros((3, 2))
    state[0, 1] = position
    state[1, 1] = velocity
    return state


def test_outcomes_in_time():
    zero = np.zeros((3, 2))
    monitor = _monitor()
    assert monitor.update(0.5, zero, _state(0.05)) is None  # on the path, within 0.1
    assert monitor.index(0.5) == 0 and monitor.index(1.5) == 1 and monitor.index(2.0) == 2
    assert monitor.update(2.1, zero, _state(0.05)) is None  # late, still within goal_time
    code, text = monitor.update(2.6, zero, _state(0.05))
    assert code == goal.GOAL_TOLERANCE_VIOLATED
    assert text.startswith('Aborted due to goal_time_tolerance exceeding by 0.6')
    assert 'b position error -0.05 > 0.01' in monitor.detail


def test_path_violation_and_success():
    zero = np.zeros((3, 2))
    monitor = _monitor()
    assert monitor.update(1.0, zero, _state(0.2)) == (goal.PATH_TOLERANCE_VIOLATED,
                                                      'Aborted due to path tolerance violation')
    monitor = _monitor()
    assert monitor.update(1.0, zero, _state(0.0)) is None
    assert monitor.update(2.0, zero, _state(0.005, 0.02)) is None  # still moving: not stopped
    assert monitor.update(2.01, zero, _state(0.005, 0.001)) == (goal.SUCCESSFUL,
                                                                'Goal successfully reached!')


def test_no_goal_time_waits_forever_and_path_not_checked_after_end():
    monitor = _monitor(goal_time=0.0)
    assert monitor.update(1.0, np.zeros((3, 2)), _state(0.0)) is None
    assert monitor.update(1e6, np.zeros((3, 2)), _state(0.5)) is None


def test_keep_worst_keeps_the_signed_error_of_largest_magnitude():
    """keep_worst against numpy over random ticks: per row and joint, the error desired -
    actual of largest |e| (actual acceleration 0), from the last reset on."""
    rng = np.random.default_rng(7)
    ticks = rng.normal(size=(50, 6, 2))  # rows: desired q, qd, qdd, measured q, qd, tau
    worst = np.full((3, 2), np.nan)
    for k, snapshot in enumerate(ticks):
        goal.keep_worst(worst, snapshot, k in (0, 30))
    errors = np.stack([ticks[30:, 0] - ticks[30:, 3], ticks[30:, 1] - ticks[30:, 4],
                       ticks[30:, 2]], axis=1)  # (ticks, 3, 2)
    picked = np.take_along_axis(errors, np.abs(errors).argmax(axis=0)[None], axis=0)[0]
    np.testing.assert_array_equal(worst, picked)


def test_the_worst_error_before_the_end_violates_the_path_when_judged_late():
    """A monitor that runs only after the goal's end (starved, or a slow action_monitor_rate)
    sees the arm at rest within the goal tolerance; the ticks' worst error on the way, 0.2 >
    0.1, is a path violation all the same (JTC checks every update). Within: success."""
    zero = np.zeros((3, 2))
    worst = np.array([[0.0, -0.2], [0.0, 0.0], [0.0, 0.0]])
    monitor = _monitor()
    assert monitor.update(2.5, zero, _state(0.0), worst) == (
        goal.PATH_TOLERANCE_VIOLATED, 'Aborted due to path tolerance violation')
    assert monitor.detail == 'b position error -0.2 > 0.1 (the worst since the last check)'
    monitor = _monitor()
    assert monitor.update(2.5, zero, _state(0.0), 0.5 * worst) == (goal.SUCCESSFUL,
                                                                   'Goal successfully reached!')
