"""Trajectory sampling: joint_trajectory_controller semantics, boundary conditions, refusals."""
import array

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

from rnea_controller.control import trajectory
from rnea_controller.control.trajectory import (
    Limits,
    plan,
    plan_arrays,
    Trajectory,
    TrajectoryPoint,
    validate,
)
from rnea_controller.dynamics.model import default_urdf_path, RobotModel
from rnea_controller.dynamics.rnea import mass_matrix, rnea
from rnea_controller.errors import TrajectoryError

JOINTS = ('a', 'b', 'c')
LIMITS = np.array([[-3.0, 3.0], [-2.0, 2.0], [-np.inf, np.inf]])
REST = np.zeros((3, 3))


def make(points, names=JOINTS, current=REST, now=10.0, start_time=None, allow_partial=False):
    return plan(names, points, joint_names=JOINTS, position_limits=LIMITS, current=current,
                now=now, start_time=start_time, allow_partial=allow_partial)


def numeric_derivative(traj, t, row, h=1e-6):
    return (traj.sample(t + h)[row] - traj.sample(t - h)[row]) / (2 * h)


def test_hold_is_constant_with_zero_velocity_and_acceleration():
    traj = Trajectory.hold([0.1, -0.2, 0.3], 5.0)
    for t in (0.0, 5.0, 1e6):
        np.testing.assert_array_equal(traj.sample(t), [[0.1, -0.2, 0.3], [0, 0, 0], [0, 0, 0]])


def test_positions_only_is_linear_from_the_current_desired_state():
    current = np.array([[0.5, 0.0, 1.0], [0.3, 0.0, 0.0], [0.0, 0.0, 0.0]])
    traj = make([TrajectoryPoint(2.0, (1.5, -1.0, 1.0)), TrajectoryPoint(3.0, (1.5, 0.0, 0.0))],
                current=current)
    np.testing.assert_allclose(traj.sample(11.0)[0], [1.0, -0.5, 1.0])
    np.testing.assert_allclose(traj.sample(11.0)[1], [0.5, -0.5, 0.0])
    np.testing.assert_allclose(traj.sample(12.5), [[1.5, -0.5, 0.5], [0, 1, -1], [0, 0, 0]])


def test_cubic_matches_positions_and_velocities_at_every_knot():
    current = np.array([[0.1, 0.2, 0.3], [0.5, -0.5, 0.0], [9.0, 9.0, 9.0]])
    pts = [TrajectoryPoint(1.0, (1.0, 1.0, 1.0), (0.2, 0.0, -1.0)),
           TrajectoryPoint(2.5, (0.0, -1.0, 2.0), (0.0, 0.1, 0.0))]
    traj = make(pts, current=current)
    np.testing.assert_allclose(traj.sample(10.0)[:2], current[:2], atol=1e-12)
    for point in pts:
        t = 10.0 + point.time_from_start
        np.testing.assert_allclose(traj.sample(t - 1e-12)[0], point.positions, atol=1e-9)
        np.testing.assert_allclose(traj.sample(t - 1e-12)[1], point.velocities, atol=1e-9)
    for t in (10.3, 11.7, 12.2):
        np.testing.assert_allclose(numeric_derivative(traj, t, 0), traj.sample(t)[1], atol=1e-6)
        np.testing.assert_allclose(numeric_derivative(traj, t, 1), traj.sample(t)[2], atol=1e-5)


def test_quintic_matches_positions_velocities_and_accelerations_at_every_knot():
    current = np.array([[0.1, 0.2, 0.3], [0.5, -0.5, 0.0], [1.0, 2.0, -3.0]])
    pts = [TrajectoryPoint(1.0, (1.0, 1.0, 1.0), (0.2, 0.0, -1.0), (0.0, 1.0, 2.0)),
           TrajectoryPoint(2.0, (0.0, -1.0, 2.0), (0.0, 0.1, 0.0), (-1.0, 0.0, 0.5))]
    traj = make(pts, current=current)
    np.testing.assert_allclose(traj.sample(10.0), current, atol=1e-12)
    for point in pts:
        state = traj.sample(10.0 + point.time_from_start - 1e-12)
        expected = [point.positions, point.velocities, point.accelerations]
        np.testing.assert_allclose(state, expected, atol=1e-8)
    np.testing.assert_allclose(numeric_derivative(traj, 10.6, 1), traj.sample(10.6)[2], atol=1e-5)


def test_after_the_last_point_holds_it_at_rest():
    pts = [TrajectoryPoint(1.0, (1.0, 1.0, 1.0), (0.2, 0.3, -1.0))]
    traj = make(pts)
    np.testing.assert_array_equal(traj.sample(11.0), [[1, 1, 1], [0, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(traj.sample(100.0), [[1, 1, 1], [0, 0, 0], [0, 0, 0]])
    assert traj.is_holding(11.0) and not traj.is_holding(10.999)


def test_joint_order_in_the_message_does_not_matter():
    pts = [TrajectoryPoint(1.0, (0.1, 0.2, 0.3), (1.0, 2.0, 3.0))]
    permuted = [TrajectoryPoint(1.0, (0.3, 0.1, 0.2), (3.0, 1.0, 2.0))]
    a, b = make(pts), make(permuted, names=('c', 'a', 'b'))
    for t in (10.2, 10.7, 11.5):
        np.testing.assert_array_equal(a.sample(t), b.sample(t))


@pytest.mark.parametrize('velocities', [(), (0.5, -0.5, 0.2)])
def test_replacement_starts_from_the_current_desired_state_without_a_jump(velocities):
    old = make([TrajectoryPoint(1.0, (1.0, 1.0, 1.0), (0.5, 0.5, 0.5), (0.0, 0.0, 0.0)),
                TrajectoryPoint(2.0, (2.0, 0.0, -1.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))])
    t = 10.4
    accelerations = (0.0, 0.0, 0.0) if velocities else ()
    new = make([TrajectoryPoint(1.0, (-1.0, 0.5, 0.0), velocities, accelerations)],
               current=old.sample(t), now=t)
    before, after = old.sample(t), new.sample(t)
    np.testing.assert_allclose(after[0], before[0], atol=1e-12)
    if velocities:  # cubic and quintic segments also keep the velocity
        np.testing.assert_allclose(after[1], before[1], atol=1e-12)
    np.testing.assert_allclose(new.sample(t + 1e-6)[0], before[0], atol=1e-5)


def test_a_future_start_interpolates_from_now_to_the_first_point():
    traj = make([TrajectoryPoint(0.0, (1.0, 1.0, 1.0))], start_time=12.0)
    np.testing.assert_allclose(traj.sample(10.0)[0], 0.0)
    np.testing.assert_allclose(traj.sample(11.0)[0], 0.5)
    np.testing.assert_allclose(traj.sample(12.0)[0], 1.0)


def test_points_already_in_the_past_are_skipped_without_a_jump():
    pts = [TrajectoryPoint(1.0, (1.0, 1.0, 1.0)), TrajectoryPoint(3.0, (2.0, 2.0, 2.0))]
    traj = make(pts, start_time=8.5)  # point 0 at 9.5 is past, point 1 at 11.5
    np.testing.assert_allclose(traj.sample(10.0)[0], 0.0)
    np.testing.assert_allclose(traj.sample(11.5)[0], 2.0)
    assert traj.times.tolist() == [10.0, 11.5]


def test_partial_goal_keeps_the_missing_joints_where_they_are_desired():
    current = np.array([[0.1, 0.2, 0.3], [0, 0, 0], [0, 0, 0]])
    with pytest.raises(TrajectoryError, match=r"lacks joints \['c'\].*allow_partial"):
        make([TrajectoryPoint(1.0, (1.0, 1.0))], names=('b', 'a'), current=current)
    traj = make([TrajectoryPoint(1.0, (1.0, -1.0))], names=('b', 'a'), current=current,
                allow_partial=True)
    np.testing.assert_allclose(traj.sample(11.0)[0], [-1.0, 1.0, 0.3])
    np.testing.assert_allclose(traj.sample(10.5)[0], [-0.45, 0.6, 0.3])


nan, inf = float('nan'), float('inf')
P = TrajectoryPoint


@pytest.mark.parametrize('names, points, message', [
    ((), [P(1.0, ())], 'no joint names'),
    (JOINTS, [], 'no points'),
    (('a', 'b', 'x'), [P(1.0, (0, 0, 0))], "joint 'x' is not a controlled joint"),
    (('a', 'b', 'a'), [P(1.0, (0, 0, 0))], "joint 'a' appears more than once"),
    (JOINTS, [P(1.0, (0, 0))], 'point 0: positions has 2 values, expected 3'),
    (JOINTS, [P(1.0, (0, 0, 0), (1, 2))], 'point 0: velocities has 2 values, expected 3'),
    (JOINTS, [P(1.0, (0, 0, 0), (0, 0, 0), (1,))], 'point 0: accelerations has 1 values'),
    (JOINTS, [P(1.0, (0, 0, 0), (), (1, 1, 1))], 'accelerations are given without velocities'),
    (JOINTS, [P(1.0, (0, 0, 0)), P(1.0, (1, 1, 1))],
     r'point 1: time_from_start 1.0 s is not after point 0 \(1.0 s\)'),
    (JOINTS, [P(2.0, (0, 0, 0)), P(1.0, (1, 1, 1))], 'point 1: time_from_start 1.0 s'),
    (JOINTS, [P(-1.0, (0, 0, 0))], 'point 0: time_from_start -1.0 s must be finite'),
    (JOINTS, [P(nan, (0, 0, 0))], 'point 0: time_from_start nan s'),
    (JOINTS, [P(1.0, (0, nan, 0))], "point 0: positions of joint 'b' is nan"),
    (JOINTS, [P(1.0, (0, 0, 0), (0, 0, inf))], "point 0: velocities of joint 'c' is inf"),
    (JOINTS, [P(1.0, (0, 0, 0)), P(2.0, (0, 2.5, 0))],
     r"point 1: position 2.5 of joint 'b' is outside its limits \[-2.0, 2.0\]"),
])
def test_each_refusal_rule_names_what_and_where(names, points, message):
    with pytest.raises(TrajectoryError, match=message):
        make(points, names=names)


def test_a_trajectory_that_ends_in_the_past_is_refused():
    with pytest.raises(TrajectoryError, match='ends 0.500000 s in the past'):
        make([TrajectoryPoint(1.0, (0, 0, 0))], start_time=8.5)
    with pytest.raises(TrajectoryError, match='in the past'):
        make([TrajectoryPoint(0.0, (0, 0, 0))])  # stamp zero, a single point at t = 0


def test_continuous_joints_have_no_position_limit():
    assert validate(JOINTS, [P(1.0, (0, 0, 1e3))], JOINTS, LIMITS).tolist() == [0, 1, 2]


finite = st.floats(-1.5, 1.5)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.05, 2.0), st.lists(finite, min_size=9, max_size=9)),
                min_size=1, max_size=5), st.sampled_from([1, 3, 5]))
def test_position_is_continuous_at_every_knot(segments, order):
    t, points = 0.0, []
    for dt, values in segments:
        t += dt
        v = tuple(values[3:6]) if order >= 3 else ()
        a = tuple(values[6:9]) if order == 5 else ()
        points.append(P(t, tuple(values[:3]), v, a))
    traj = make(points)
    for knot in traj.times[1:]:
        left, right = traj.sample(knot - 1e-9), traj.sample(knot + 1e-9)
        assert np.all(np.isfinite(left)) and np.all(np.isfinite(right))
        np.testing.assert_allclose(left[0], right[0], atol=1e-6)
        if order >= 3 and knot < traj.end_time:
            np.testing.assert_allclose(left[1], right[1], atol=1e-5)


# --- plan_arrays: the same rules on whole arrays (issue 11, defect 8) -----------------------

def make_arrays(times, positions, velocities=None, accelerations=None, names=JOINTS, now=10.0,
                start_time=None, allow_partial=False):
    return plan_arrays(names, times, positions, velocities, accelerations, joint_names=JOINTS,
                       position_limits=LIMITS, current=REST, now=now, start_time=start_time,
                       allow_partial=allow_partial)


def long_trajectory(N, seed=0):
    """N points 10 to 20 ms apart, positions within the limits, velocities, accelerations."""
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.uniform(1e-2, 2e-2, N))
    return times, rng.uniform(-1.5, 1.5, (3, N, 3))


@pytest.mark.parametrize('fields', [1, 2, 3])
def test_arrays_rows_and_message_arrays_give_the_trajectory_of_the_points(fields):
    times, (q, qd, qdd) = long_trajectory(50)
    given = (q, qd, qdd)[:fields] + (None,) * (3 - fields)
    points = [P(t, *(tuple(x[k]) for x in given if x is not None)) for k, t in enumerate(times)]
    expected = make(points)
    as_rows = [None if x is None else [array.array('d', row) for row in x] for x in given]
    for traj in (make_arrays(times, *given), make_arrays(list(times), *as_rows)):
        np.testing.assert_array_equal(traj.times, expected.times)
        np.testing.assert_array_equal(traj.coefficients, expected.coefficients)


def test_ten_thousand_points_pass_through_every_point():
    times, (q, qd, qdd) = long_trajectory(10_000)
    traj = make_arrays(times, q, qd, qdd)
    assert traj.times.shape == (10_001,) and traj.coefficients.shape == (10_000, 6, 3)
    for k in np.random.default_rng(1).integers(0, 9_999, 50):
        t = 10.0 + times[k]
        np.testing.assert_allclose(traj.sample(t), [q[k], qd[k], qdd[k]], atol=1e-12)  # start
        left = traj.sample(t - 1e-12)  # the end of the previous segment, by its polynomial
        np.testing.assert_allclose(left[:2], [q[k], qd[k]], atol=1e-6)
        np.testing.assert_allclose(left[2], qdd[k], atol=1e-3)  # jerk up to 1e8 rad/s³


def test_points_may_mix_positions_only_cubic_and_quintic_segments():
    """Per point, as in a JointTrajectory: velocities and accelerations given or not."""
    velocities = [(), (0.5, 0.0, -0.5), (0.1, 0.2, 0.3), ()]
    accelerations = [(), (), (1.0, 1.0, 1.0), ()]
    positions = [(0.5, 0.5, 0.5), (1.0, 0.0, -1.0), (0.0, 0.5, 1.0), (0.2, 0.2, 0.2)]
    traj = make_arrays([1.0, 2.0, 3.0, 4.0], positions, velocities, accelerations)
    for k, t in enumerate((11.0, 12.0, 13.0, 14.0)):
        end = traj.sample(t - 1e-12)
        np.testing.assert_allclose(end[0], positions[k], atol=1e-9)
        np.testing.assert_allclose(end[1], velocities[k] or end[1], atol=1e-9)
        np.testing.assert_allclose(end[2], accelerations[k] or end[2], atol=1e-8)
    np.testing.assert_allclose(traj.sample(10.5)[1], [0.5, 0.5, 0.5])  # linear: h / T
    np.testing.assert_allclose(numeric_derivative(traj, 11.5, 0), traj.sample(11.5)[1], atol=1e-6)


@pytest.mark.parametrize('points, message', [
    # the earliest point wins, whatever the rule
    ([P(1.0, (0, 0, 0), (0, 0, 0), (1,)), P(2.0, (0, 9, 0))], 'point 0: accelerations has 1'),
    ([P(1.0, (0, 9, 0)), P(2.0, (0, 0, 0), (nan, 0, 0))], r'point 0: position 9.0 of joint .b.'),
    ([P(1.0, (0, 0, 0)), P(0.5, (0, 0)), P(3.0, (nan, 0, 0))], 'point 1: time_from_start 0.5'),
    # within a point: timing, positions, velocities, accelerations, limits
    ([P(1.0, (0, 0, 0)), P(2.0, (9, nan, 0), (1,))], "point 1: positions of joint 'b' is nan"),
    ([P(1.0, (9, 0, 0), (0, inf, 0), (0, 0, 0))], "point 0: velocities of joint 'b' is inf"),
    ([P(1.0, (9, 0, 0), (), (0, 0, 0))], 'point 0: accelerations are given without velocities'),
    ([P(1.0, (0, 0, 0)), P(2.0, (0, 0, 0)), P(nan, (9, 9, 9), (1,))],
     'point 2: time_from_start nan s must be finite'),
    ([P(1.0, (0, 0, 0), (0, 0, 0)), P(2.0, (0, -2.5, 9), (0, 0, 0))],
     r"point 1: position -2.5 of joint 'b' is outside its limits \[-2.0, 2.0\]"),
])
def test_the_first_broken_rule_is_reported_as_point_by_point(points, message):
    with pytest.raises(TrajectoryError, match=message):
        make(points)


@pytest.mark.parametrize('arguments, message', [
    (([1.0, 2.0], np.zeros((3, 3))), 'positions has 3 rows for 2 points'),
    (([1.0], np.zeros((1, 3)), np.zeros((2, 3))), 'velocities has 2 rows for 1 points'),
    (([[1.0]], np.zeros((1, 3))), r'times must be one value per point, got shape \(1, 1\)'),
    (([1.0], np.zeros((1, 2))), 'point 0: positions has 2 values, expected 3'),
    (([1.0], [('a', 'b', 'c')]), 'positions must be numbers'),
    (([1.0, 2.0], np.zeros(2)), 'positions must be one row of numbers per point'),
    (([], np.zeros((0, 3))), 'trajectory has no points'),
])
def test_arrays_that_do_not_fit_the_points_are_refused(arguments, message):
    with pytest.raises(TrajectoryError, match=message):
        make_arrays(*arguments)


# --- beyond what the arm can do (issue 45) ------------------------------------------------

ARM = RobotModel.from_urdf_file(default_urdf_path())  # UR5e figures: 3.14 rad/s, 150 / 28 N·m
ARM_JOINTS = ARM.joint_names
ARM_INDEX = np.arange(ARM.n)


def arm_limits(margin=0.0, torques=True, velocity=ARM.velocity_limits):
    return Limits(velocity, ARM.effort_limits, margin,
                  ARM if torques else None, ARM_INDEX if torques else None)


def plan_arm(times, positions, velocities=None, accelerations=None, margin=0.0, torques=True,
             current=None, velocity=ARM.velocity_limits):
    current = np.zeros((3, ARM.n)) if current is None else current
    return plan_arrays(ARM_JOINTS, np.asarray(times, float), np.asarray(positions, float),
                       velocities, accelerations, joint_names=ARM_JOINTS,
                       position_limits=ARM.position_limits, current=current, now=0.0,
                       limits=arm_limits(margin, torques, velocity))


def test_a_point_beyond_the_velocity_limit_is_refused_naming_joint_point_and_value():
    q = np.zeros((3, ARM.n))
    qd = np.zeros((3, ARM.n))
    qd[1, 4] = 1e6  # the issue's fuzz: 1e6 rad/s at a point
    with pytest.raises(TrajectoryError, match=r"point 1: velocity 1e\+06 rad/s of joint "
                                              r"'wrist_2_joint' is beyond its limit 3.14159"):
        plan_arm([1.0, 2.0, 3.0], q, qd, torques=False)


def test_velocities_between_points_count_too_a_positions_only_jump():
    q = np.zeros((2, ARM.n))
    q[1, 0] = 1.0  # 1 rad in 0.1 s: 10 rad/s on a linear segment
    with pytest.raises(TrajectoryError, match=r"between point 0 and point 1: velocity 10 rad/s "
                                              r"of joint 'shoulder_pan_joint'"):
        plan_arm([1.0, 1.1], q)
    q[1, 0] = 0.3  # 3 rad/s: within
    plan_arm([1.0, 1.1], q)


def test_a_cubic_segment_that_overshoots_the_limit_between_its_points_is_refused():
    """Rest to 1 rad in 0.45 s as a cubic: 1.5 h / T = 3.33 rad/s at its middle only."""
    q = np.zeros((1, ARM.n))
    q[0, 3] = 1.0
    with pytest.raises(TrajectoryError, match=r"between the current reference and point 0: "
                                              r"velocity 3.3\d* rad/s of joint 'wrist_1_joint'"):
        plan_arm([0.45], q, np.zeros((1, ARM.n)))
    plan_arm([0.45], q, np.zeros((1, ARM.n)), margin=0.07)  # the margin allows it
    q[0, 3] = 0.9  # 3.0 rad/s at its middle
    plan_arm([0.45], q, np.zeros((1, ARM.n)))


@pytest.mark.parametrize('joint', [1, 4])
def test_an_acceleration_is_refused_exactly_where_the_model_needs_more_than_the_effort_limit(
        joint):
    """At a point at rest, a joint accelerating alone needs tau = M[:, j] qdd + g(q): the
    largest acceleration the limits allow is where one joint's torque reaches its limit (the
    velocity limits left out: the quintics through that point overshoot them)."""
    free = np.full(ARM.n, np.inf)
    q = np.array([0.0, -0.8, 1.2, -0.4, 0.7, 0.0])
    M, g = mass_matrix(ARM, q), rnea(ARM, q, np.zeros(ARM.n), np.zeros(ARM.n))
    share = (np.sign(M[:, joint]) * ARM.effort_limits - g) / M[:, joint]  # per joint's limit
    allowed = float(np.min(share[np.abs(M[:, joint]) > 1e-9]))
    times, rest = [1.0, 2.0, 3.0], np.zeros((3, ARM.n))
    positions = np.tile(q, (3, 1))
    current = np.stack([q, np.zeros(ARM.n), np.zeros(ARM.n)])
    for factor, refused in ((0.99, False), (1.01, True)):
        qdd = rest.copy()
        qdd[1, joint] = factor * allowed
        if refused:
            with pytest.raises(TrajectoryError, match=r"point 1: joint '\w+' needs .* N·m there, "
                                                      r'beyond its effort limit .*joint '
                                                      f"'{ARM_JOINTS[joint]}' at "):
                plan_arm(times, positions, rest, qdd, current=current, velocity=free)
        else:
            plan_arm(times, positions, rest, qdd, current=current, velocity=free)


def test_the_issues_point_at_1e9_rad_s2_is_refused_by_its_torque():
    """(With the velocity limits the segment into it is refused first: 1.6e7 rad/s.)"""
    q, qd, qdd = np.zeros((3, 3, ARM.n))
    qdd[1, 2] = 1e9
    with pytest.raises(TrajectoryError, match=r"point 1: joint '\w+' needs .* beyond its effort "
                                              r"limit .* \(joint 'elbow_joint' at 1e\+09\)"):
        plan_arm([1.0, 2.0, 3.0], q, qd, qdd, velocity=np.full(ARM.n, np.inf))
    with pytest.raises(TrajectoryError, match=r"between point 0 and point 1: velocity .* of "
                                              r"joint 'elbow_joint'"):
        plan_arm([1.0, 2.0, 3.0], q, qd, qdd)


def test_a_torque_beyond_the_limit_deep_in_a_long_trajectory_is_found_at_its_point():
    """The check runs in blocks inside one compiled call: the first point beyond, wherever it
    lies, is the one named (a later block's offset, not its index in the block)."""
    times = np.arange(1, 10_001) * 0.01
    q = 0.5 * np.sin(np.outer(times, np.ones(ARM.n)))
    qd, qdd = 0.5 * np.cos(np.outer(times, np.ones(ARM.n))), -q
    qdd[7777, 2] = 1e4  # the elbow, at rest elsewhere in its limits
    qdd[9000, 1] = 1e4  # a later one, not named
    with pytest.raises(TrajectoryError, match=r"^point 7777: joint '\w+' needs .* beyond its "
                                              r"effort limit .* \(joint 'elbow_joint' at "):
        plan_arm(times, q, qd, qdd, velocity=np.full(ARM.n, np.inf))


def test_the_torque_check_releases_the_interpreters_lock_while_it_runs():
    """Issue 45: compiled with nogil, so that the control thread never waits on a long
    trajectory's check (its give-backs in blocks made the loop wait 5-25 ms)."""
    assert trajectory._first_torque_beyond.targetoptions.get('nogil') is True


def test_ten_thousand_points_within_the_limits_are_accepted():
    times = np.arange(1, 10_001) * 0.01
    q = 0.5 * np.sin(np.outer(times, np.ones(ARM.n)))
    qd = 0.5 * np.cos(np.outer(times, np.ones(ARM.n)))
    plan_arm(times, q, qd, -q)
