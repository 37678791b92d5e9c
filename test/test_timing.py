"""control/timing.py: each piece without ROS, then the real node on the real simulator's stream.

Oracles: the discrete filter's transfer function and a sinusoid's exact derivative; a stream of
arrivals simulated with a known period, drift and jitter; Taylor's formula for the prediction.
"""
import math
import time

from builtin_interfaces.msg import Duration
from conftest import console_script, stamp, wait_for
from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
import pytest
import rclpy
from sensor_msgs.msg import JointState
import starvation
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from rnea_controller.control.parameters import check, latency_setting, ParameterError
from rnea_controller.control.timing import (
    _shifted_means,
    ActuationDelay,
    LatencyEstimator,
    LoopTiming,
    PhaseLock,
    predict,
    predict_into,
    StampClock,
    VelocityEstimator,
)
from rnea_controller.ros.realtime import BackgroundSpinner


def run_estimator(cutoff, h, omega, seconds=2.0, sigma=0.0, seed=0):
    """Estimates for q = sin(omega t) sampled every h [s] (+ noise); returns t, qd_hat."""
    t = np.arange(0.0, seconds, h)
    q = np.sin(omega * t) + np.random.default_rng(seed).normal(0.0, sigma, t.shape)
    estimator = VelocityEstimator(1, cutoff)
    return t, np.array([estimator.update(q[k:k + 1], t[k])[0] for k in range(len(t))]), estimator


@pytest.mark.parametrize('cutoff, h', [(100.0, 1e-3), (50.0, 2e-3), (200.0, 1e-3)])
def test_velocity_estimate_of_a_sinusoid_has_the_stated_gain_and_lag(cutoff, h):
    omega = 2 * math.pi * 2.0  # 2 Hz
    t, qd_hat, estimator = run_estimator(cutoff, h, omega)
    H = VelocityEstimator.response(omega, h, cutoff) / (1j * omega)  # relative to qd
    steady = t > 0.5
    expected = np.abs(H) * omega * np.cos(omega * t + np.angle(H))
    np.testing.assert_allclose(qd_hat[steady], expected[steady], atol=1e-6 * omega)
    # the stated lag is the phase delay at low frequency, within 1 %
    assert -np.angle(H) / omega == pytest.approx(estimator.lag, rel=0.01)
    # and removing it leaves a small error: qd(t - lag) matches to O((omega lag)^2)
    lagged = omega * np.cos(omega * (t - estimator.lag))
    assert np.max(np.abs(qd_hat - lagged)[steady]) < 0.01 * omega


def test_velocity_estimate_noise_is_the_stated_figure():
    cutoff, h, sigma = 100.0, 1e-3, 1e-5
    _, qd_hat, _ = run_estimator(cutoff, h, 0.0, seconds=20.0, sigma=sigma, seed=3)
    alpha = 1 - math.exp(-2 * math.pi * cutoff * h)
    stated = sigma * alpha / h * math.sqrt(2 / (2 - alpha))
    assert np.std(qd_hat[100:]) == pytest.approx(stated, rel=0.03)


def test_velocity_estimate_with_jitter_and_drops_follows_a_ramp():
    """Stamps every 2 ms +-0.3 ms with 10 % dropped: a constant velocity is exact."""
    rng = np.random.default_rng(1)
    t = np.cumsum(rng.uniform(1.7e-3, 2.3e-3, 500))
    t = t[rng.uniform(size=t.size) > 0.1]
    estimator = VelocityEstimator(2, 100.0)
    for s in t:
        qd = estimator.update(np.array([0.3 * s, -2.0 * s]), s)
    np.testing.assert_allclose(qd, [0.3, -2.0], rtol=1e-9)
    with pytest.raises(ValueError, match='cut-off must be finite and > 0 Hz, got 0'):
        VelocityEstimator(1, 0.0)


def simulate_lock(period, stream_period, seconds, jitter=0.0, lock=True, seed=0):
    """Ticks driven by PhaseLock against a stream; returns (tick times, x of fresh ticks)."""
    rng = np.random.default_rng(seed)
    arrivals = np.arange(0.00037, seconds, stream_period)
    arrivals = arrivals + rng.uniform(0.0, jitter, arrivals.shape)
    phase_lock = PhaseLock(period)
    ticks, xs, tick, next_period, a = [], [], 0.0, period, 0
    while tick < seconds:
        while a < len(arrivals) and arrivals[a] <= tick:
            phase_lock.on_state(arrivals[a])
            fresh = arrivals[a]
            a += 1
        if a and tick - fresh < period:
            xs.append(tick - fresh)
        ticks.append(tick)
        # the period set at this tick applies after the next one (rcl's timer: next call due)
        tick, next_period = tick + next_period, (
            phase_lock.next_period(tick) if lock else period)
    return np.array(ticks), np.array(xs), phase_lock


def test_phase_lock_places_ticks_just_after_the_arrivals_and_keeps_the_rate():
    ticks, xs, lock = simulate_lock(1e-3, 1e-3, 4.0)
    assert np.all(np.abs(xs[-1000:] - lock.min_offset) < 5e-6)  # 0.1 ms after each arrival
    assert np.mean(np.diff(ticks[-1000:])) == pytest.approx(1e-3, rel=1e-6)
    assert np.all(np.abs(np.diff(ticks) - 1e-3) <= 0.02e-3 + 1e-12)  # never beyond the slew


def test_phase_lock_follows_a_drifting_stream_with_a_small_steady_error():
    """The stream's clock 100 ppm slow: the ticks follow at its rate, 2 us behind the target."""
    ticks, xs, lock = simulate_lock(1e-3, 1e-3 * (1 + 1e-4), 6.0)
    assert np.all(np.abs(xs[-1000:] - lock.offset) < 5e-6)
    assert np.mean(np.diff(ticks[-1000:])) == pytest.approx(1e-3 * (1 + 1e-4), rel=1e-5)


def test_phase_lock_with_a_jittered_500_hz_stream_ticks_after_almost_every_arrival():
    ticks, xs, lock = simulate_lock(1e-3, 2e-3, 6.0, jitter=0.3e-3, seed=2)
    late = xs[-1000:]
    assert np.mean(late > 0) > 0.99 and np.median(late) < 0.5e-3
    assert np.mean(np.diff(ticks[-2000:])) == pytest.approx(1e-3, rel=1e-3)


def test_without_states_the_phase_lock_keeps_the_nominal_period():
    lock = PhaseLock(1e-3)
    assert [lock.next_period(k * 1e-3) for k in range(5)] == [1e-3] * 5
    lock.on_state(0.0)
    assert lock.next_period(0.005) == 1e-3  # a state older than a period: stale, no change


def test_latency_is_the_next_cycle_after_the_command_arrives():
    estimator = LatencyEstimator(1e-3)
    for k in range(2000):  # a 1 kHz stream, 80 us transit
        estimator.on_state(10.0 + k * 1e-3, 10.0 + k * 1e-3 + 80e-6)
    assert estimator.stream_period == pytest.approx(1e-3)
    assert estimator.transit == pytest.approx(80e-6)
    s = 10.0 + 1999e-3
    assert estimator.latency(s + 0.5e-3, s) == pytest.approx(1e-3)  # arrives before s + 1 ms
    assert estimator.latency(s + 0.95e-3, s) == pytest.approx(2e-3)  # arrives after it


def test_latency_of_a_500_hz_stream_uses_the_loop_period_and_ignores_drops():
    estimator = LatencyEstimator(1e-3)
    stamps = np.arange(0.0, 2.0, 2e-3)
    for s in np.delete(stamps, np.arange(5, len(stamps), 7)):  # one in 7 lost
        estimator.on_state(s, s + 1e-4)
    assert estimator.stream_period == pytest.approx(2e-3, rel=1e-6)
    assert estimator.latency(1.0 + 0.4e-3, 1.0) == pytest.approx(1e-3)


def test_prediction_is_exact_for_a_constant_acceleration():
    q0, qd0, qdd = np.array([0.1, -0.2]), np.array([0.5, 0.0]), np.array([2.0, -3.0])
    dt, lag = 1.5e-3, 2e-3
    qd_lagging = qd0 - qdd * lag  # what a velocity estimate `lag` behind reports
    out = predict(q0, qd_lagging, qdd, dt, lag)
    np.testing.assert_allclose(out[0], q0 + qd0 * dt + 0.5 * qdd * dt ** 2, rtol=1e-12)
    np.testing.assert_allclose(out[1], qd0 + qdd * dt, rtol=1e-12)


@pytest.mark.parametrize('seed', range(5))
def test_the_tick_s_prediction_and_error_are_predict_s_at_the_controlled_joints(seed):
    """predict_into (the loop's one call) against predict with the reference's acceleration at
    the controlled joints and 0 elsewhere, and the error there; bit for bit."""
    rng = np.random.default_rng(seed)
    n = 9
    index = np.sort(rng.choice(n, 6, replace=False))  # a gripper's joints among them
    q, qd, ref = rng.normal(size=n), rng.normal(size=n), rng.normal(size=(3, 6))
    dt, lag = rng.uniform(0.0, 5e-3, 2)
    qdd = np.zeros(n)
    qdd[index] = ref[2]
    expected = predict(q, qd, qdd, dt, lag)
    out, error = np.full((2, n), np.nan), np.full((2, 6), np.nan)
    predict_into(q, qd, ref, index, dt, lag, out, error)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(error, ref[:2] - expected[:, index])
    untouched = out.copy()
    predict_into(q, qd, ref, index, dt, lag, out, error, carried=False)
    np.testing.assert_array_equal(out, untouched)
    np.testing.assert_array_equal(error, ref[:2] - np.vstack((q, qd))[:, index])


def test_the_delay_measurement_s_shifted_means_are_numpy_s_bit_for_bit():
    """The actuation delay's one compiled call against the same integral of the commands in
    numpy: np.searchsorted, the piecewise-constant integral at each bin's ends moved back by
    each candidate delay, their difference over the bin's time."""
    rng = np.random.default_rng(7)
    t = np.sort(rng.uniform(0.0, 0.6, 560))
    t[100:103] = t[100]  # equal times
    tau = rng.normal(size=(560, 7)) * 50.0
    integral = np.vstack((np.zeros(7), np.cumsum(tau[:-1] * np.diff(t)[:, None], axis=0)))
    start = np.sort(rng.uniform(-0.1, 0.7, 40))  # some before the first command, after the last
    end = start + rng.uniform(1e-3, 2e-2, 40)
    candidates = ActuationDelay.CANDIDATES

    def at(x):
        i = np.clip(np.searchsorted(t, x, 'right') - 1, 0, len(t) - 1)
        return integral[i] + tau[i] * (x - t[i])[..., None]
    expected = (at(end[None, :] - candidates[:, None]) - at(start[None, :] - candidates[:, None])
                ) / (end - start)[None, :, None]
    out = np.empty_like(expected)
    _shifted_means(t, tau, integral, start, end, end - start, candidates, out)
    np.testing.assert_array_equal(out, expected)


def test_latency_parameter_values_as_users_type_them():
    """YAML and `ros2 param set` turn `off` into false and `0.002` into a double."""
    assert latency_setting('auto') == 'auto' and latency_setting('off') == 'off'
    assert latency_setting(False) == 'off'
    assert latency_setting('0.002') == 0.002 and latency_setting(0.002) == 0.002
    assert latency_setting(0) == 0.0
    for bad in ('soon', True, -0.001, 0.5, float('nan'), [0.002]):
        with pytest.raises(ValueError):
            latency_setting(bad)
        with pytest.raises(ParameterError, match="latency_compensation = .*: must be 'auto'"):
            check('latency_compensation', bad)
    assert check('latency_compensation', False) is False


# --- over DDS: the real controller on the real simulator's stream --------------------------

class Probe:
    """Joint states, references and the controller's diagnostics; a trajectory publisher."""

    def __init__(self):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node('timing_probe', context=self.context)
        self.states, self.references, self.diagnostics = [], [], []
        self.node.create_subscription(JointState, '/joint_states', self.states.append, 100)
        self.node.create_subscription(JointState, '/rnea_controller/reference',
                                      self.references.append, 1000)
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._diagnostic, 10)
        self.trajectories = self.node.create_publisher(
            JointTrajectory, '/rnea_controller/joint_trajectory', 10)
        self.spinner = BackgroundSpinner(self.node, 'test client', 'events', 0.05)

    def _diagnostic(self, msg):
        for status in msg.status:
            if status.name == 'rnea_controller: control loop':
                self.diagnostics.append({kv.key: kv.value for kv in status.values})

    def send(self, names, start, goal, seconds):
        end = Duration(sec=int(seconds), nanosec=int(seconds % 1 * 1e9))
        self.trajectories.publish(JointTrajectory(joint_names=list(names), points=[
            JointTrajectoryPoint(positions=list(start), time_from_start=Duration()),
            JointTrajectoryPoint(positions=list(goal), velocities=[0.0] * len(goal),
                                 time_from_start=end)]))

    def close(self):
        self.spinner.stop()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.fixture
def probe():
    p = Probe()
    yield p
    p.close()


def start_arm(processes, *sim_parameters):
    sim = processes.start([console_script('rnea-sim'), '--ros-args',
                           *[a for p in sim_parameters for a in ('-p', p)]])
    # state_timeout 0.5 s: a simulator stalled for 0.1 s by a loaded host would rightly make
    # the controller drop its trajectory (stale), which these tests do not check.
    # NUMBA_DEBUG_CACHE: numba prints each compiled function it loads from its disk cache or
    # compiles and saves, so the log shows whether any of that happens in a tick
    controller = processes.start([console_script('rnea-controller'), '--realtime-priority',
                                  '0', '--ros-args', '-p', 'state_timeout:=0.5'],
                                 env={'NUMBA_DEBUG_CACHE': '1', 'PYTHONUNBUFFERED': '1'})
    return sim, controller


def streaming(probe, processes, sim, controller, states=None):
    """Wait until the probe has both streams: 200 references and 200 joint states (`states`:
    the probe's list of them). The controller's references can reach this probe before the
    simulator's first state does (two publishers, discovered one after the other on a loaded
    host): waiting for the references alone left `probe.states` empty at times (IndexError in
    `colcon test` beside other tests). A wait that fails says what is missing and shows each
    program's log under its name, the controller's first: the message began with the
    simulator's own first line before (as root, 'physics and its I/O at SCHED_FIFO 50'), and
    read as if that line were the failure (issue 45)."""
    states = probe.states if states is None else states
    meter = starvation.CpuWait({'rnea-sim': sim, 'rnea-controller': controller})
    came = wait_for(lambda: len(probe.references) > 200 and len(states) > 200, 90.0)
    starvation.check(came, f'in 90 s the probe got {len(probe.references)} references and '
                     f'{len(states)} joint states (200 of each wanted)\n'
                     + logs(processes, controller=controller, sim=sim), meter)


def logs(processes, **programs):
    """Each program's log (its last 3000 characters), under its name."""
    return '\n'.join(f'--- {name} (exit code {proc.poll()}) ---\n'
                      f'{processes.output(proc)[-3000:]}' for name, proc in programs.items())


def compiled_while_active(output):
    """numba's cache lines logged after the node went active: compiles (or cache loads) in the
    loop, which stall a tick (a cold compile of the prediction took ~0.36 s)."""
    active = output.find(']: active')
    assert active >= 0 and '[cache]' in output[:active], output[-3000:]  # the debug output works
    return [line for line in output[active:].splitlines() if line.startswith('[cache]')]


@pytest.mark.integration
def test_positions_only_stream_goes_active_estimates_velocities_and_tracks(processes, probe):
    sim, controller = start_arm(processes, 'publish_velocity:=false')
    streaming(probe, processes, sim, controller)
    assert len(probe.states[-1].velocity) == 0
    start = np.array(probe.references[-1].position)
    goal = start + np.array([0.2, -0.15, 0.1, 0.0, 0.0, 0.0])
    meter = starvation.CpuWait({'rnea-sim': sim, 'rnea-controller': controller})
    probe.send(probe.references[-1].name, start, goal, 2.0)
    # a starved controller (a run at load 4 beside two busy processes) lets the arm run away
    # under its last command. Its fast positions-only states were then refused as jumps and
    # the node went blind until stale (issue 29); now they are taken (test_inputs, and
    # test_overspeed's positions-only push), the estimate shows the overspeed and the node
    # brakes the arm to rest, which drops the trajectory all the same: the goal is not
    # reached in a run that starved, so this stays said to be, by the run's figures
    kept = wait_for(lambda: np.allclose(probe.references[-1].position, goal, atol=1e-9), 20.0)
    starvation.check(kept, 'the reference did not reach the goal: '
                     + processes.output(controller)[-3000:], meter)
    reached = wait_for(lambda: np.allclose(probe.states[-1].position, goal, atol=2e-3), 20.0)
    (processes.tmp_path / 'logs.txt').write_text(processes.output(controller) + '\n' +
                                                  processes.output(sim))
    starvation.check(reached, f'the arm ends {np.array(probe.states[-1].position) - goal} rad '
                     f'from the goal (logs: {processes.tmp_path / "logs.txt"})', meter)
    assert 'joint velocities: estimated from positions' in processes.output(controller)
    assert wait_for(lambda: probe.diagnostics and
                    probe.diagnostics[-1]['velocity source'] == 'estimated', 5.0)
    # tracking with latency compensation and velocity estimation compiled nothing in the loop
    assert compiled_while_active(processes.output(controller)) == []


@pytest.mark.integration
def test_a_500_hz_jittered_stream_keeps_the_loop_at_1_khz(processes, probe):
    sim, controller = start_arm(processes, 'publish_rate:=500.0', 'publish_jitter:=0.0003')
    streaming(probe, processes, sim, controller)
    meter = starvation.CpuWait({'rnea-sim': sim, 'rnea-controller': controller})
    probe.diagnostics.clear()
    assert wait_for(lambda: len(probe.diagnostics) >= 4, 20.0)
    # the stream: 2 ms between stamps (this Python subscriber may miss some on a loaded machine)
    steps = np.diff([stamp(m) for m in probe.states[-200:]])
    assert np.percentile(steps, 10) == pytest.approx(2e-3, abs=1e-4)
    # the loop ticks at its own rate, not the stream's 500 Hz (generous: on a slow, loaded
    # 2-core host the node, the simulator and this probe together drop ticks: 630-760 Hz seen)
    # (a starved run, whose processes waited for a CPU, is said to be: starvation.check)
    rates = [float(d['loop rate [Hz]']) for d in probe.diagnostics[1:]]
    starvation.check(np.median(rates) > 560.0, f'loop rates {rates} Hz', meter)
    # the delay from a state's stamp to its command's effect: a few stream periods, measured
    # 2-5 ms; a loaded CI host showed running means up to 20 ms, so the median of the run is
    # bounded, generously (what it rules out: a clock offset, seconds, or a non-positive value)
    latencies = [float(d['latency [ms]']) for d in probe.diagnostics[1:]]
    assert all(latency > 0 for latency in latencies), latencies
    starvation.check(np.median(latencies) < 30, f'latencies {latencies} ms', meter)


def tracking_rms(references, states, start, end):
    """The worst joint's RMS [rad] of q(t) - q_ref(t) over [start, end] [s]: the states at their
    stamps, the references (stamped with the instant they are for) interpolated there."""
    references, states = list(references), list(states)  # the subscribers append meanwhile
    t_ref = np.array([stamp(r) for r in references])
    order = np.argsort(t_ref)
    q_ref = np.array([r.position for r in references])[order]
    t = np.array([stamp(s) for s in states])
    inside = (t >= start) & (t <= end) & (t >= t_ref.min()) & (t <= t_ref.max())
    q = np.array([s.position for s in states])[inside]
    errors = [q[:, j] - np.interp(t[inside], t_ref[order], q_ref[:, j])
              for j in range(q.shape[1])]
    return max(np.sqrt(np.mean(e ** 2)) for e in errors), int(inside.sum())


@pytest.mark.integration
@pytest.mark.long  # not in ./run test (the suite's 10 minutes): ./run test -m long
def test_tracking_with_stamps_50_ms_early_or_late_is_as_good_as_with_synchronised_ones(
        processes, probe):
    """Issue 26, case 2: the simulator's states reach the controller through a relay that puts
    their stamps 50 ms behind or ahead (a driver on another computer, no PTP/chrony). The same
    2 s motion with each offset in turn, the simulator's own states (true stamps) against the
    references (the worst joint's RMS). Measured on a quiet host: 2.0-2.8e-5 rad unskewed,
    6.7-8.3e-5 with the offsets: 1.5 x the unskewed plus what the link's smallest one-way
    transit costs at the motion's peak speed (unobservable without synchronised clocks: the
    re-based stamps are late by it; ~0.3-0.5 ms over this relay). Under load (4 on 2 cores)
    single runs vary tenfold (2.4e-4 unskewed, 5.6e-4 skewed seen), so the bound is the one
    that separates the fix from the fault robustly: a tenth of what a 50 ms misplacement costs
    at the peak speed (1.1e-3 rad; the code before: 8.5e-3 and 8.6e-3, against 1.5e-5)."""
    from stamp_relay import StampRelay
    relay = StampRelay('/sim_states', '/joint_states')
    true_states = []
    probe.node.create_subscription(JointState, '/sim_states', true_states.append, 2000)
    try:
        relay.set(0.0)
        sim = processes.start([console_script('rnea-sim'), '--ros-args', '-r',
                               'joint_states:=sim_states'])
        controller = processes.start([console_script('rnea-controller'), '--realtime-priority',
                                      '0', '--ros-args', '-p', 'state_timeout:=0.5'])
        streaming(probe, processes, sim, controller, true_states)
        rms = {}
        meter = starvation.CpuWait({'rnea-sim': sim, 'rnea-controller': controller,
                                    'relay': relay.proc})
        for k, offset in enumerate((0.0, -0.05, 0.05)):
            relay.set(offset)
            time.sleep(2.5)  # StampClock: the window of the switch, then a whole one (< 2 s)
            names = probe.references[-1].name
            start = np.array(probe.references[-1].position)
            goal = start + (-1) ** k * np.array([0.3, -0.2, 0.2, 0.3, 0.3, 0.3])
            t0 = time.time()
            probe.send(names, start, goal, 2.0)
            time.sleep(2.5)
            rms[offset], count = tracking_rms(probe.references, true_states, t0 + 0.1, t0 + 2.0)
            starvation.check(count > 500, f'{count} states in 1.9 s at offset {offset}', meter)
            probe.references.clear()
            true_states.clear()
        misplaced = 1.5 * 0.3 / 2.0 * 0.05  # [rad] the cubic's peak speed x 50 ms
        starvation.check(all(rms[offset] < 0.1 * misplaced for offset in rms),
                         f'tracking RMS {rms} rad by stamp offset', meter)
        assert 'ms from their arrival' in processes.output(controller)
    finally:
        relay.close()


def test_loop_timing_estimates_velocities_of_a_positions_only_stream_and_predicts():
    timing = LoopTiming(2, 1e-3, velocity_source='auto', cutoff=100.0)
    assert timing.horizon(1.0) is None  # no state yet: nothing to predict from
    for k in range(200):  # 1 kHz, stamps on this clock, 0.1 ms transit, q = (t, -2 t)
        stamp_ns = 1_000_000_000_000 + k * 1_000_000
        qd = timing.on_state(np.array([1.0, -2.0]) * stamp_ns * 1e-9, np.zeros(0), stamp_ns,
                             stamp_ns + 100_000, stamp_ns * 1e-9)
    assert timing.estimating and timing.lag == pytest.approx(1.64e-3, rel=0.01)
    np.testing.assert_allclose(qd, [1.0, -2.0], rtol=1e-6)
    # published 0.5 ms after the newest stamp: the command acts at the next 1 ms cycle
    assert timing.horizon(stamp_ns * 1e-9 + 0.5e-3) == pytest.approx(1e-3)
    # a state stamped far from its arrival (another clock, or zero): its arrival stands for it
    timing.on_state(np.zeros(2), np.zeros(2), 0, stamp_ns + 2_000_000, 0.0)
    assert timing.stamp_ns == stamp_ns + 2_000_000 and timing.unstamped == 1
    fixed = LoopTiming(2, 1e-3, latency=0.004, velocity_source='measured')
    assert fixed.on_state(np.zeros(2), np.ones(2), 5, 5, 0.0).tolist() == [1.0, 1.0]
    assert fixed.horizon(0.0) == 0.004 and not fixed.estimating
    assert LoopTiming(2, 1e-3, latency='off').horizon(1.0) is None


def effect_instants(skew, seconds=3.0, seed=0):
    """Issue 26: a 1 kHz stream sampled at t, arriving at t + 0.2-0.6 ms, stamped t + skew(t);
    each tick 0.1 ms after an arrival asks when its command takes effect. Returns the
    instants [s] on the true clock (stamp in use + L, less the skew if the raw stamps were
    used; re-based ones are on the true clock) and the LoopTiming."""
    rng = np.random.default_rng(seed)
    timing = LoopTiming(1, 1e-3, phase_lock=False)
    instants, timing.usable = [], []
    for t in np.arange(100.0, 100.0 + seconds, 1e-3):
        arrival = t + rng.uniform(2e-4, 6e-4)
        stamp_ns, arrival_ns = round((t + skew(t)) * 1e9), round(arrival * 1e9)
        timing.on_state(np.zeros(1), np.zeros(1), stamp_ns, arrival_ns, arrival)
        L = timing.horizon(arrival + 1e-4)  # published on this clock, as the node does
        used = timing.stamp_ns * 1e-9 - (skew(t) if timing.clock.usable else 0.0)
        instants.append(used + L - t)
        timing.usable.append(timing.clock.usable)
    return np.array(instants), timing


@pytest.mark.parametrize('skew', [-0.9, -0.05, -0.006, -0.001, 0.001, 0.006, 0.05, 0.9])
def test_stamps_on_an_offset_clock_are_re_based_by_the_offset(skew):
    """Stamps 1-900 ms early or late: the offset is measured; beyond the plausible range
    (-1, +5 ms), after the first 1 s window, the command's effect is placed as without the
    offset (within one 1 kHz cycle); within it the stamps are kept (off by the offset)."""
    straight, _ = effect_instants(lambda t: 0.0)
    skewed, timing = effect_instants(lambda t: skew)
    assert np.all(np.abs(straight[1000:] - 1.5e-3) < 1e-3)  # the next cycle after arrival
    assert timing.clock.offset == pytest.approx(2e-4 - skew, abs=1e-5)
    assert timing.clock.usable == (abs(skew) < 5e-3)
    bound = 1e-3 + (abs(skew) if timing.clock.usable else 0.0)
    assert np.all(np.abs(skewed[1001:] - straight[1001:]) <= bound + 1e-9)


def test_a_drifting_clock_is_found_when_its_offset_leaves_the_plausible_range():
    """200 ppm of drift (0.2 ms/s, a poor crystal) from a synchronised start: the stamps are
    used until the offset is beyond 5 ms (at most one 1 s window later), re-based after that,
    by an offset at most one window old (0.2 ms)."""
    instants, timing = effect_instants(lambda t: -2e-4 * (t - 100.0), seconds=30.0)
    found = timing.usable.index(False) * 1e-3  # [s] into the stream
    assert 24.0 < found < 26.2
    assert np.all(np.abs(instants[round(found * 1e3):] - 1.5e-3) < 1e-3 + 2e-4)
    assert timing.clock.offset > 5e-3


def test_stamp_clock_windows_and_bounds():
    clock = StampClock()
    for k in range(1000):
        assert clock.on_state(k * 1e-3 - 0.05, k * 1e-3)  # no full window yet: 1 s of states
    assert not clock.on_state(1.0 - 0.05, 1.0)  # the window closes: 50 ms, implausible
    assert clock.offset == pytest.approx(0.05)
    for k in range(1001, 2003):  # synchronised again: usable after the next 1 s window
        usable = clock.on_state(k * 1e-3 - 3e-4, k * 1e-3)
    assert usable and clock.offset == pytest.approx(3e-4)


def measured_delay(command, true_delay, seed=3, error=lambda t: np.array([1.5, -0.3])):
    """An ActuationDelay fed 1.2 s of commands `command(t)` published every ms (irregular),
    the arm's motion asking for the command of `true_delay` [s] before, plus the model's
    error `error(t)` (constant unless given) and noise, states stamped with ±0.5 ms of
    jitter; returns it after `estimate`."""
    from rnea_controller.control.timing import ActuationDelay
    rng = np.random.default_rng(seed)
    delay = ActuationDelay(np.array([50.0, 10.0]), 1e-3)
    t_state = 0.0
    for k in range(1200):
        t = k * 1e-3 + rng.uniform(0.0, 3e-4)
        delay.on_command(t, command(t))
        stamp = k * 1e-3 + rng.uniform(-5e-4, 5e-4)
        asked = command(k * 1e-3 - 0.5e-3 - true_delay) + error(k * 1e-3)
        if k:
            delay.on_state(stamp, stamp - t_state, asked + rng.normal(0.0, 0.05, 2))
        t_state = stamp
    delay.measured_now = delay.estimate()
    return delay


@pytest.mark.parametrize('true_delay', [0.0, 0.004, 0.012, 0.03])
def test_the_actuation_delay_is_measured_from_the_arm_s_motion(true_delay):
    """Within a period (the commands are held for one: the arm acts on each for its ms)."""
    delay = measured_delay(lambda t: np.array([20.0 * math.sin(7.0 * t),
                                               4.0 * math.sin(11.0 * t + 1.0)]), true_delay)
    assert delay.measured_now and abs(delay.delay - true_delay) <= 1.5e-3, delay.delay


def test_commands_that_do_not_change_tell_no_delay():
    delay = measured_delay(lambda t: np.array([3.0, -1.0]), 0.012)
    assert not delay.measured_now and delay.delay is None


@pytest.mark.parametrize('true_delay', [0.004, 0.012, 0.03])
def test_a_friction_the_model_lacks_does_not_pass_for_a_delay(true_delay):
    """The arm's motion asks for the command of `true_delay` before plus what the model lacks:
    a Coulomb friction of 8 % of each effort limit (real arms' most, corpus.py), flipping
    with each joint's motion, and a slow error of the pose. It is in phase with the motion,
    as the commands' change over a delay is: a delay that moved the commands over it read
    up to 16 ms short (the variance of the commands' difference from the motion's torque).
    The commands' tick-to-tick change (the feedback's) is where the delay shows, and a
    friction's steps or a pose's error hardly change from one bin to the next: the
    measurement compares the bins' changes. Within 2.5 ms (the friction still takes up to 2)."""
    def command(t):
        return np.array([20.0 * math.sin(7.0 * t) + math.sin(90.0 * t) + 0.7 * math.sin(170 * t),
                         4.0 * math.sin(11.0 * t + 1.0) + 0.3 * math.sin(130.0 * t)])

    def error(t):
        return np.array([4.0 * np.sign(math.cos(7.0 * t - 0.3)) + 2.0 * math.sin(1.3 * t),
                         0.8 * np.sign(math.cos(11.0 * t + 0.7)) + 0.3 * math.sin(2.1 * t)])
    delay = measured_delay(command, true_delay, error=error)
    assert delay.measured_now and abs(delay.delay - true_delay) <= 2.5e-3, delay.delay
