"""control/jump_gate.py on plain floats, ROS-free: the gate's decisions for a positions-only
stream (issue 29) and a stream with velocities back from a stall (issue 35), each with the
stream's own times (stamps and arrivals given, not measured).
The node's input runs the same gate on real messages: test_inputs.py, test_overspeed.py."""
import numpy as np
import pytest

from rnea_controller.control.jump_gate import JUMP_SLACK, JumpGate, VELOCITY_MARGIN

LIMIT = 2.0  # [rad/s]


def gate():
    g = JumpGate(['a', 'b'], [LIMIT, LIMIT])
    g.fresh_for = 0.1
    return g


def offer(g, q, t):
    """A positions-only state [rad] stamped and arriving at t [s]: True if taken."""
    try:
        g.check(q, None, t, round(1e9 + t * 1e9))
    except ValueError:
        return False
    g.taken(q, None, t, round(1e9 + t * 1e9))
    return True


@pytest.mark.parametrize('speed', [4.0, 5.0])  # x the limit
def test_a_steady_fast_motion_is_taken_from_its_third_state(speed):
    """Two states show no step; from the third on, each step continues the last."""
    g = gate()
    taken = [offer(g, [speed * LIMIT * k * 1e-3, 0.0], k * 1e-3) for k in range(20)]
    assert taken == [True, False] + [True] * 18
    assert g.fast == 18 and g.jumps == 1


def test_a_stream_that_starts_beyond_the_speed_cap_is_refused():
    """At 20 x the limit from its first state: the third state is taken only across the
    refused second one (the gap rules), where no step beyond SPEED_CAP (6) x the limit is an
    arm's: a second source's poses are (the DDS fuzz: 0.1 rad then 3 rad, 2 ms apart, beside a
    driver at rest, taken before the cap)."""
    g = gate()
    taken = [offer(g, [20.0 * LIMIT * k * 1e-3, 0.0], k * 1e-3) for k in range(20)]
    assert taken == [True] + [False] * 19


def test_two_poses_of_a_second_source_beside_a_driver_at_rest_are_refused():
    """The driver at rest (200 Hz), a second source 0.1 then 3 rad away 2 ms apart: the
    candidate's mean velocity lies between the driver's (0) and the step after it, but 1450
    rad/s is no arm's: refused, and the driver's next state taken."""
    g = gate()
    for k in range(5):
        assert offer(g, [0.0, 0.0], k * 5e-3)
    assert not offer(g, [0.1, 0.0], 0.022)
    assert not offer(g, [3.0, 0.0], 0.024)
    assert offer(g, [0.0, 0.0], 0.025)


def test_a_jump_from_rest_is_refused_and_named():
    g = gate()
    assert offer(g, [0.0, 0.0], 0.0) and offer(g, [0.0, 0.0], 1e-3)
    with pytest.raises(ValueError, match=r"joint 'b' jumps 0.1 rad in 1 ms, more than its "
                                         r'velocity limit 2 rad/s allows'):
        g.check([0.0, 0.1], None, 2e-3, round(1e9 + 2e6))
    assert g.jumps == 1 and offer(g, [0.0, 0.0], 3e-3)


def test_a_jump_back_and_forth_between_two_sources_never_continues():
    """A second source between the states of a driver at 4 x the limit, 0.05 rad ahead of it:
    the driver's every state taken, the other's none. (From the driver's third state on: until
    then its states show no step, and a second source from the start keeps it unconfirmed until
    the gate reopens.)"""
    g = gate()
    assert [offer(g, [4 * LIMIT * k * 1e-3, 0.0], k * 1e-3) for k in range(3)] == [
        True, False, True]
    for k in range(3, 30):
        t = k * 1e-3
        assert offer(g, [4 * LIMIT * t, 0.0], t), k
        assert not offer(g, [4 * LIMIT * t + 0.05, 0.0], t + 5e-4)


def test_a_changing_speed_within_the_continuity_is_followed():
    """From 10 rad/s (5 x the limit), accelerating at 1000 rad/s² (1 rad/s a 1 ms step, 10 %
    of the speed) to 29 rad/s: taken; the relative change per step bounds it, not the speed
    (beyond SPEED_CAP once the stream's own steps show it)."""
    g = gate()
    taken = [offer(g, [10.0 * t + 500.0 * t * t, 0.0], t) for t in (k * 1e-3 for k in range(20))]
    assert taken == [True, False] + [True] * 18


def test_stamps_the_arrivals_contradict_are_no_motion():
    """A step whose stamps are 20 ms apart arriving 1 ms after the previous state (the stamps
    more than 10 ms ahead of the arrivals): it times nothing, refused."""
    g = gate()
    for k in range(3):
        assert offer(g, [8.0 * k * 1e-3, 0.0], k * 1e-3) == (k != 1)
    q = [8.0 * 22e-3, 0.0]
    with pytest.raises(ValueError, match="joint 'a' jumps"):
        g.check(q, None, 3e-3, round(1e9 + 22e-3 * 1e9))


def test_a_stream_back_from_a_stall_is_taken_once_its_motion_fits_the_time_since():
    """Issue 35, a loaded host: the node starved (the last state before the stall, stamped
    10 ms, arrives at 45 ms), the simulator starved too (its next state, stamped 60 ms after
    50 ms caught up under the last command, arrives at 60.7 ms), the arm at half its limit
    throughout, velocities sent. The stamps' 50 ms do not fit the arrivals' 15.7 ms, so the
    motion is refused as a jump until the quick bound, growing with the arrivals, covers it:
    j ms later, v (50 + j) <= v_max (15.7 + j + 2): j >= 14.6 by hand. Then the stream is taken
    back as it is: no brake (every speed within its limit), no stale (30.7 ms without a state
    taken, fresh_for 100)."""
    g, v = gate(), 0.5 * LIMIT

    def offer_with_velocity(stamp, arrival):
        q, qd, stamp_ns = [v * stamp, 0.0], [v, 0.0], round(1e9 + stamp * 1e9)
        try:
            g.check(q, qd, arrival, stamp_ns)
        except ValueError:
            return False
        g.taken(q, qd, arrival, stamp_ns)
        return True

    assert all(offer_with_velocity(k * 1e-3, k * 1e-3) for k in range(10))
    assert offer_with_velocity(0.010, 0.045)
    taken = [offer_with_velocity(0.060 + j * 1e-3, 0.0607 + j * 1e-3) for j in range(40)]
    assert taken == [False] * 15 + [True] * 25
    assert g.jumps == 15 and g.fast == 0


@pytest.mark.parametrize('seed', range(3))
def test_the_quick_look_finds_the_suspects_one_by_one_would(seed):
    """`_suspects` looks at each joint only when one is beyond the slowest joint's bound: the
    joints it names are those of the rule applied to every joint, on states near the bounds
    (limits apart, one infinite, steps back in time)."""
    rng = np.random.default_rng(seed)
    limits = [1.0, 2.5, np.inf, 0.5]
    g = JumpGate(['a', 'b', 'c', 'd'], limits)
    g.fresh_for = 0.1
    for _ in range(2000):
        q_ref = rng.normal(size=4).tolist()
        now, arrival = rng.uniform(0.0, 0.2), rng.uniform(0.0, 0.2)
        reach = now - arrival + JUMP_SLACK
        q = (np.array(q_ref) + rng.uniform(-1.2, 1.2, 4) * np.array([1.0, 2.5, 3.0, 0.5])
             * abs(reach)).tolist()
        qd = (rng.uniform(-1.2, 1.2, 4) * VELOCITY_MARGIN * np.array([1.0, 2.5, 9.0, 0.5])
              ).tolist() if rng.random() < 0.8 else None
        reference = (q_ref, None, 1, arrival)
        one_by_one = [] if qd is None else [j for j in range(4)
                                            if abs(qd[j]) > VELOCITY_MARGIN * limits[j]]
        if now - arrival < g.fresh_for:
            one_by_one += [j for j in range(4) if abs(q[j] - q_ref[j]) > limits[j] * reach
                           and j not in one_by_one]
        assert g._suspects(q, qd, now, reference) == one_by_one
