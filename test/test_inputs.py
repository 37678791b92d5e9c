"""ros/inputs.py's JointStateInput as the node uses it while active (a LoopTiming attached):
a state is taken whole or refused whole, and the jump gate (issue 26).

The oracle is the state before the refused message: nothing of a refused state may be written.
The gate's bound is the joints' velocity limits over the real time between arrivals, so these
tests time their states by the clock they run on (a loaded host only widens the bound).
"""
import time

import numpy as np
import pytest
from sensor_msgs.msg import JointState

from rnea_controller.control.timing import LoopTiming
from rnea_controller.ros.inputs import JointStateInput, JUMP_SLACK

NAMES = ['j1', 'j2', 'j3']
VMAX = np.array([1.0, 2.0, 3.0])  # [rad/s]
Q = np.array([0.1, -0.2, 0.3])


def active_input(velocity_source='auto'):
    """A JointStateInput with the node's LoopTiming, after one state with velocities."""
    state = JointStateInput(NAMES, velocity_limits=VMAX)
    state.timing = LoopTiming(3, 1e-3, velocity_source=velocity_source)
    state.fresh_for = 0.1
    state.take(message(Q, [0.5, 0.5, 0.5]))
    return state


def message(q, qd=(), stamp_ns=None):
    msg = JointState(name=NAMES, position=list(q), velocity=list(qd))
    stamp_ns = time.time_ns() if stamp_ns is None else stamp_ns
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    return msg


def test_a_refused_positions_only_state_writes_nothing():
    """Issue 26, case 3: after states with velocities, a positions-only state 3 rad away was
    refused by numpy's broadcast error raised after q had been written (the next tick computed
    the law 3 rad away from the arm)."""
    state = active_input()
    before = state.q.copy(), state.qd.copy(), state.time
    with pytest.raises(ValueError) as refused:
        state.take(message(Q + 3.0))
    np.testing.assert_array_equal(state.q, before[0])
    np.testing.assert_array_equal(state.qd, before[1])
    assert state.time == before[2]
    assert 'no velocities in a stream whose velocities are measured' in str(refused.value)


def test_a_3_rad_jump_is_refused_and_counted():
    state = active_input()
    with pytest.raises(ValueError, match=r"joint 'j1' jumps 3 rad in .* ms, more than its "
                                         r'velocity limit 1 rad/s allows'):
        state.take(message(Q + 3.0, [0.5, 0.5, 0.5]))
    np.testing.assert_array_equal(state.q, Q)
    assert state.jumps == 1


def test_motion_within_the_velocity_limits_is_taken_bursts_included():
    """0.95 of each limit, positions by the real elapsed time; then two states of 1 ms of
    motion arriving together (a burst after a stall): every one is taken."""
    state = active_input()
    t0 = time.perf_counter()
    for _ in range(50):
        time.sleep(0.002)
        q = Q + 0.95 * VMAX * (time.perf_counter() - t0)
        state.take(message(q, 0.95 * VMAX))
        np.testing.assert_array_equal(state.q, q)
    state.take(message(q + 0.95 * VMAX * 1e-3, 0.95 * VMAX))
    state.take(message(q + 0.95 * VMAX * 2e-3, 0.95 * VMAX))
    assert state.jumps == 0


def test_the_gate_bound_is_the_velocity_limit_over_the_arrival_step():
    """Just beyond the bound at once: refused; the same step after the previous state went
    stale (older than fresh_for): taken, a new start."""
    state = active_input()
    step = VMAX * (JUMP_SLACK + 0.01)  # beyond the bound for the next ~10 ms
    with pytest.raises(ValueError, match=r"joint 'j\d' jumps"):
        state.take(message(Q + step, [0.0] * 3))
    time.sleep(state.fresh_for)
    state.take(message(Q + step, [0.0] * 3))
    np.testing.assert_array_equal(state.q, Q + step)
    assert state.jumps == 1


def test_positions_only_states_are_taken_when_velocities_are_estimated():
    state = JointStateInput(NAMES, velocity_limits=VMAX)
    state.timing = LoopTiming(3, 1e-3)
    state.take(message(Q))
    time.sleep(0.002)
    state.take(message(Q + 1e-3))
    assert state.timing.estimating and np.all(state.qd > 0)


def test_a_velocity_beyond_twice_its_limit_is_refused_and_counted():
    state = active_input()
    with pytest.raises(ValueError, match=r"joint 'j2' velocity -4.5 rad/s is beyond 2 x its "
                                         r'limit 2 rad/s'):
        state.take(message(Q, [0.5, -4.5, 0.5]))
    np.testing.assert_array_equal(state.qd, [0.5, 0.5, 0.5])
    assert state.jumps == 1
