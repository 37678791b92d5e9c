"""The loop in time with the joint-state stream: velocity estimate, phase lock, latency,
prediction.

ROS-free; the node calls these from its state callback and its fixed-rate tick (issue 12).
Times are seconds: `stamp` on the stream's clock (the JointState header, the instant the state
was sampled), `arrival` and `tick` on this node's clocks. The latency estimate needs the stamps
on this host's clock (same machine, or clocks synchronised by PTP/chrony); StampClock finds
when they are not (issue 26), and the stamps are then re-based by the measured offset.

- VelocityEstimator: qd from positions and their stamps, a first-order low-pass on the finite
  difference (lag and noise below), for positions-only drivers.
- PhaseLock: places the fixed-rate ticks `offset` after the states' arrivals by nudging the
  timer's next period within +-max_slew, never changing its nominal rate.
- LatencyEstimator: the delay L from a state's stamp to the instant its command takes effect.
- StampClock: the offset of the stamps' clock from ours, and whether the stamps are usable.
- predict: the state carried forward from its stamp to that instant.
"""
import math

from numba import njit
import numpy as np

MAX_HORIZON = 0.1  # [s] the longest prediction (a state this old is stale long before)


class VelocityEstimator:
    """qd [rad/s] from positions q [rad] and stamps t [s]: a first-order low-pass filter of
    cut-off fc [Hz] on the finite difference,

        u_k = (q_k - q_k-1) / h_k,    v_k = v_k-1 + alpha_k (u_k - v_k-1),
        alpha_k = 1 - exp(-2 pi fc h_k)

    (h_k the stamp step, any rate, drops and jitter included). Figures at a steady step h:
    - lag: for a motion slower than fc the estimate is qd(t - lag), lag = h/2 + (1 - alpha) h /
      alpha (100 Hz, 1 kHz: 0.5 + 1.14 = 1.64 ms; 1 / (2 pi fc) + h/2 for fc << 1/h); `lag`
      gives it and `predict` removes it with the desired acceleration;
    - noise: white position noise of std sigma [rad] gives a velocity std of
      sigma alpha / h sqrt(2 / (2 - alpha)) [rad/s] (100 Hz, 1 kHz: 0.53 sigma / h, i.e.
      1e-5 rad -> 5.3e-3 rad/s).
    The first state gives no estimate (zeros); the second starts the filter at the finite
    difference, without a transient from zero.
    """

    def __init__(self, n: int, cutoff: float) -> None:
        if not math.isfinite(cutoff) or cutoff <= 0:
            raise ValueError(f'velocity filter cut-off must be finite and > 0 Hz, got {cutoff}')
        self.cutoff = cutoff
        self.qd = np.zeros(n)
        self._q = np.zeros(n)
        self._t = None
        self._started = False
        self._h = math.nan

    def update(self, q: np.ndarray, t: float) -> np.ndarray:
        """Take position q [rad] stamped t [s]; returns the velocity estimate [rad/s]."""
        if self._t is not None and t > self._t:
            h = t - self._t
            u = (q - self._q) / h
            alpha = 1.0 - math.exp(-2.0 * math.pi * self.cutoff * h) if self._started else 1.0
            self.qd += alpha * (u - self.qd)
            self._started = True
            self._h = h
        if self._t is None or t > self._t:
            self._q[:] = q
            self._t = t
        return self.qd

    @property
    def lag(self) -> float:
        """Low-frequency lag of the estimate at the last step h [s]: h/2 + (1 - alpha) h/alpha."""
        if not self._started:
            return 0.0
        alpha = 1.0 - math.exp(-2.0 * math.pi * self.cutoff * self._h)
        return self._h / 2 + (1.0 - alpha) * self._h / alpha

    @staticmethod
    def response(omega: np.ndarray | float, h: float, cutoff: float) -> np.ndarray | complex:
        """The filter's frequency response at omega [rad/s] for step h [s] (complex)."""
        alpha = 1.0 - math.exp(-2.0 * math.pi * cutoff * h)
        z = np.exp(1j * omega * h)
        return alpha * (1 - 1 / z) / (h * (1 - (1 - alpha) / z))


class PhaseLock:
    """Ticks `offset` [s] after the states' arrival, at the fixed nominal `period` [s].

    How the phase is found: every tick that has a state which arrived since the previous tick
    measures x = tick - arrival; the phase error is x - offset wrapped into [-period/2,
    period/2). The next timer period is period - gain * error, clipped to +-max_slew: a
    proportional loop that moves the ticks by a few microseconds a period, so the nominal rate
    never changes. Ticks without a new state (a slower stream, a pause) measure nothing and
    keep the nominal period. `offset` = min_offset + 2 std(x): the tick waits for the states'
    arrival jitter (std(x) from a running mean of the squared error).

    Drift: a stream whose clock runs r [s/s] fast or slow against ours moves the phase by
    r * period a tick; the loop follows it with a steady error of r * period / gain (100 ppm at
    1 kHz, gain 0.05: 2 us), and at most max_slew / period (2 %) of drift is followed.
    """

    def __init__(self, period: float, min_offset: float = 1e-4, gain: float = 0.05,
                 max_slew: float | None = None) -> None:
        self.period = period
        self.min_offset = min_offset
        self.gain = gain
        self.max_slew = 0.02 * period if max_slew is None else max_slew
        self.error = 0.0  # smoothed phase error [s]
        self.variance = 0.0  # running mean of the squared deviation of x [s^2]
        self._arrival = None
        self._x = None

    @property
    def offset(self) -> float:
        """The target delay of a tick after the state's arrival [s]."""
        return self.min_offset + 2.0 * math.sqrt(self.variance)

    def on_state(self, arrival: float) -> None:
        """A state arrived at `arrival` [s] (the tick's clock)."""
        self._arrival = arrival

    def next_period(self, tick: float) -> float:
        """The timer period [s] to set at the tick at time `tick` [s]."""
        if self._arrival is None or tick - self._arrival >= self.period:
            return self.period  # no fresh state since the last tick: nothing to measure
        x = tick - self._arrival
        self._arrival = None
        error = (x - self.offset + self.period / 2) % self.period - self.period / 2
        self.variance += 0.02 * ((error - self.error) ** 2 - self.variance)
        self.error += 0.1 * (error - self.error)
        return self.period - min(max(self.gain * error, -self.max_slew), self.max_slew)


class LatencyEstimator:
    """The delay L [s] from a state's stamp to the instant its command takes effect.

    A command takes effect at the arm's first cycle after it arrives (ros2_control reads,
    updates and writes once a cycle; the bundled simulator steps so). The cycles are taken on
    the grid of the state stamps, at the stream's period or the loop's `period` if shorter
    (a 500 Hz stream from a 1 kHz drive), so for a state stamped s and a command published at
    p (this host's clock) and arriving after the transit d:

        L = G ceil((p + d - s) / G),    G = min(stream period, loop period)

    The stream period is a running mean of the stamp steps (steps over 1.5 x it, drops, are
    left out); d is the states' smallest transit arrival - stamp of the last second, the same
    way back. `mean` is a running mean of L, for /diagnostics.
    """

    def __init__(self, period: float) -> None:
        self.period = period
        self.stream_period = None
        self.transit = 0.0
        self.mean = math.nan
        self._last_stamp = None
        self._rejected = 0
        self._transits = []

    def on_state(self, stamp: float, arrival: float) -> None:
        """A state stamped `stamp` [s] arrived at `arrival` [s] (same clock)."""
        if self._last_stamp is not None and stamp > self._last_stamp:
            self._track_period(stamp - self._last_stamp)
        self._last_stamp = stamp
        self._transits.append(arrival - stamp)
        if len(self._transits) >= max(10, round(1.0 / (self.stream_period or self.period))):
            self.transit = max(0.0, min(self._transits))
            self._transits.clear()

    def _track_period(self, step):
        if self.stream_period is None or self._rejected > 20:
            self.stream_period, self._rejected = step, 0
        elif step < 1.5 * self.stream_period:
            self.stream_period += 0.05 * (step - self.stream_period)
            self._rejected = 0
        else:
            self._rejected += 1

    def latency(self, publish: float, stamp: float) -> float:
        """L [s] for a command published at `publish` [s] from the state stamped `stamp` [s]."""
        grid = min(self.stream_period or self.period, self.period)
        L = grid * max(1, math.ceil((publish + self.transit - stamp) / grid))
        self.mean = L if math.isnan(self.mean) else self.mean + 0.01 * (L - self.mean)
        return L


class StampClock:
    """Are the stamps on this host's clock? The offset is the smallest transit arrival - stamp
    [s] over a window (1 s of arrivals and at least `first` states: the first states after
    activation can all wait more than 5 ms in a queue, and 10 of them were once taken for
    another clock), which on one host, or with clocks synchronised by PTP/chrony, is a local
    link's: a
    fraction of a millisecond. Outside [low, high] (a driver on another computer without time
    synchronisation, its clock behind or ahead), `usable` is False until a window measures a
    plausible offset again: the loop then re-bases the stamps on its clock, stamp + offset
    (the sample instants, late by the link's smallest transit; arrival times instead would add
    the link's whole transit and its jitter: 6-12 x the tracking error over a relay, issue 26).
    While re-basing, the offset follows a smaller window minimum at once and a larger one by at
    most `drift` [s] a window (200 ppm): one window's minimum taken in a loaded spell, 2 ms
    late, would otherwise move every stamp of the next second by 2 ms.
    """

    def __init__(self, low: float = -1e-3, high: float = 5e-3, first: int = 10,
                 drift: float = 2e-4) -> None:
        self.low, self.high, self.first, self.drift = low, high, first, drift
        self.offset = math.nan  # of the last full window [s]
        self.usable = True
        self._transits = []
        self._start = None

    def on_state(self, stamp: float, arrival: float) -> bool:
        """A state stamped `stamp` [s] arrived at `arrival` [s]; returns `usable`."""
        self._transits.append(arrival - stamp)
        if self._start is None:
            self._start = arrival
        if len(self._transits) >= self.first and arrival - self._start >= 1.0:
            smallest, re_basing = min(self._transits), not self.usable
            self.usable = self.low <= smallest <= self.high
            # a window's smallest transit is late by a loaded spell's delay: while re-basing,
            # the offset follows a smaller one at once and a larger one by `drift` at most
            self.offset = (min(smallest, self.offset + self.drift)
                           if re_basing and not self.usable else smallest)
            self._transits.clear()
            self._start = None
        return self.usable


def predict(q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, dt: float, lag: float = 0.0,
            out: np.ndarray | None = None) -> np.ndarray:
    """The state carried forward by dt [s] under the desired acceleration qdd [rad/s^2]:

        qd(s) = qd + qdd lag                    (an estimate lagging by `lag` [s])
        q(s + dt) = q + qd(s) dt + qdd dt^2 / 2,   qd(s + dt) = qd(s) + qdd dt

    Returns (2, n): positions [rad] and velocities [rad/s] (written into `out` if given).
    """
    out = np.empty((2, len(q))) if out is None else out
    _predict(q, qd, qdd, float(dt), float(lag), out)
    return out


def predict_into(q: np.ndarray, qd: np.ndarray, ref: np.ndarray, index: np.ndarray,
                 dt: float, lag: float, out: np.ndarray, error: np.ndarray,
                 carried: bool = True) -> None:
    """The loop's tick in one compiled call: the state (q [rad], qd [rad/s], model size)
    carried forward by dt [s] under the reference's acceleration (ref (3, m): q_d, qd_d, qdd_d
    of the controlled joints at model `index`; 0 at the others) as `predict` does, into `out`
    (2, n), and the error there, error (2, m) = ref[:2] - (q, qd)[index]. carried False: the
    state as it is (out untouched, dt and lag unused)."""
    _predict_into(q, qd, ref, index, float(dt), float(lag), out, error, carried)


@njit(cache=True)
def _predict_into(q, qd, ref, index, dt, lag, out, error, carried):
    """`predict_into`: `_predict`'s arithmetic with qdd = ref[2] at `index`, 0 elsewhere."""
    if not carried:
        for k in range(index.shape[0]):
            error[0, k] = ref[0, k] - q[index[k]]
            error[1, k] = ref[1, k] - qd[index[k]]
        return
    for i in range(q.shape[0]):
        out[0, i], out[1, i] = _carried(q[i], qd[i], 0.0, dt, lag)
    for k in range(index.shape[0]):
        i = index[k]
        out[0, i], out[1, i] = _carried(q[i], qd[i], ref[2, k], dt, lag)
        error[0, k] = ref[0, k] - out[0, i]
        error[1, k] = ref[1, k] - out[1, i]


@njit(cache=True)
def _predict(q, qd, qdd, dt, lag, out):
    """`predict` in one compiled call (the node's tick: ~8 numpy temporaries otherwise)."""
    for i in range(q.shape[0]):
        out[0, i], out[1, i] = _carried(q[i], qd[i], qdd[i], dt, lag)


@njit(inline='always')
def _carried(q, qd, qdd, dt, lag):
    """One joint of `predict`: (q(s + dt), qd(s + dt)), qd(s) = qd + qdd lag."""
    v = qd + qdd * lag
    return q + v * dt + 0.5 * qdd * dt * dt, v + qdd * dt


class LoopTiming:
    """The node's timing in one object: its state callback calls `on_state`, its tick
    `next_period` (phase lock) and `horizon` (latency compensation).

    phase_lock: bool; latency: 'auto', 'off' or a fixed L [s]; velocity_source: 'auto'
    (measured when the state has velocities, else estimated), 'measured' or 'estimated';
    cutoff: the velocity filter's [Hz]; period: the loop's [s].
    """

    def __init__(self, n: int, period: float, phase_lock: bool = True,
                 latency: str | float = 'auto', velocity_source: str = 'auto',
                 cutoff: float = 100.0) -> None:
        self.period = period
        self.phase_lock = PhaseLock(period) if phase_lock else None
        self.latency = latency
        self.estimator = LatencyEstimator(period)
        self.velocity = VelocityEstimator(n, cutoff)
        self.velocity_source = velocity_source
        self.estimating = None  # decided by the first state: True, False
        self.lag = 0.0  # of the velocity in use [s]
        self.stamp_ns = 0  # of the newest state [ns]
        self.unstamped = 0  # states whose stamp was zero or more than 1 s from their arrival
        self.clock = StampClock()
        zeros = np.zeros(n)  # compile (or load the cache) now: a tick must not wait for numba
        predict(zeros, zeros, zeros, 0.0, out=np.empty((2, n)))
        predict_into(zeros, zeros, np.zeros((3, n)), np.arange(n), 0.0, 0.0, np.empty((2, n)),
                     np.empty((2, n)))

    def on_state(self, q: np.ndarray, qd: np.ndarray, stamp_ns: int, arrival_ns: int,
                 tick_clock: float) -> np.ndarray:
        """A state: positions q [rad], velocities qd [rad/s] (empty: none), stamp [ns],
        arrival [ns] on the stamps' clock and [s] on the tick's clock. A stamp that is zero or
        more than 1 s away from the arrival is not usable: the arrival stands for it; one on a
        clock offset from ours (StampClock) is re-based by that offset.
        Returns the velocity to use [rad/s]."""
        if self.estimating is None:
            self.estimating = self.velocity_source == 'estimated' or (
                self.velocity_source == 'auto' and len(qd) == 0)
        if abs(arrival_ns - stamp_ns) > 1_000_000_000:
            stamp_ns = arrival_ns
            self.unstamped += 1
        else:
            usable = self.clock.usable
            if self.clock.on_state(stamp_ns * 1e-9, arrival_ns * 1e-9) != usable:
                self.estimator = LatencyEstimator(self.period)  # its transit: the other times'
            if not self.clock.usable:  # another clock: re-based on ours (StampClock)
                stamp_ns += round(self.clock.offset * 1e9)
        self.stamp_ns = stamp_ns
        stamp = stamp_ns * 1e-9
        self.estimator.on_state(stamp, arrival_ns * 1e-9)
        if self.phase_lock is not None:
            self.phase_lock.on_state(tick_clock)
        if self.estimating:
            qd = self.velocity.update(q, stamp)
            self.lag = self.velocity.lag
        return qd

    def next_period(self, tick_clock: float) -> float | None:
        """The timer period [s] to set now, or None without phase lock."""
        return None if self.phase_lock is None else self.phase_lock.next_period(tick_clock)

    def horizon(self, publish: float) -> float | None:
        """L [s] from the newest state's stamp to its command's effect for a command published
        at `publish` [s] (stamps' clock), at most MAX_HORIZON; None when compensation is off
        or no state was taken yet."""
        if self.latency == 'off' or self.stamp_ns == 0:
            return None
        if self.latency == 'auto':
            return min(self.estimator.latency(publish, self.stamp_ns * 1e-9), MAX_HORIZON)
        self.estimator.mean = self.latency
        return self.latency


class ActuationDelay:
    """How long after its publication a command acts on the arm [s], measured from the arm's
    own motion (issue 35): DDS, the driver, the controller_manager's cycle and a loaded host
    add milliseconds that no stamp shows (the arm's motion lagged its commands by over 6 ms
    on a loaded 2-core host). The loop reports it, widens the contact observer's delay
    allowance to it and pauses the adaptation where it is beyond what the estimate can pair
    (ros/loop.py).

    `on_command(t, tau)`: a command published at t [s] (the stamps' clock); `on_state(t, dt,
    torque)`: over the dt [s] up to the state stamped t [s], the arm's motion asked for
    `torque` (m,) [N·m] (the contact observer's model torque: its momentum change M Δqd / dt
    plus the rest of the model, what the commands must have been, but for a contact and the
    model's error). `estimate()` (once a second, in the tick's slack) compares them over BIN
    states at a time (a bin's torque is its impulse over its time: exact in the momentum,
    and the stamps' jitter stays at its ends): for each delay δ of CANDIDATES, the mean
    command over the bin's time moved back by δ against the bin's torque, per joint; the δ
    whose difference changes least from one bin to the next over the last HORIZON (each
    joint scaled by its effort limit: what the model lacks, a friction or a pose's error,
    hardly changes from one bin to the next, while the commands' tick-to-tick change shows
    the delay; compared on the difference itself, a friction in phase with the motion read
    as a shift of the commands, docs/timing.md; fitting out what a rotor inertia or a
    friction would add was tried and absorbed the delay itself) is a measurement, if the
    commands moved enough to tell (a spread of MOVING of a limit) and it leaves at most CLEAR
    of the variance the worst candidate leaves. `delay` is the median of the last MEDIAN
    measurements (None before the first); `ticks(period)` it in whole periods.
    """

    CANDIDATES = np.arange(0.0, 0.0605, 0.001)  # [s]
    HORIZON = 0.5  # [s] of states and commands compared
    BIN = 10  # states per comparison
    MOVING = 0.01  # the commands' spread (std / effort limit) needed to measure
    CLEAR = 0.8  # the best delay's variance at most this x the worst's
    MEDIAN = 5  # measurements

    def __init__(self, limits: np.ndarray, period: float) -> None:
        m = len(limits)
        self.limits = np.asarray(limits, dtype=float)
        size = int(round((self.HORIZON + self.CANDIDATES[-1]) / period)) + 64
        self._commands = (np.full(size, -np.inf), np.zeros((size, m)))
        self._states = (np.full(size, -np.inf), np.zeros(size), np.zeros((size, m)))
        self._c = self._s = 0
        self.measured = []
        self.delay = None
        one = np.zeros(1)  # compile (or load the cache) now: a tick must not wait for numba
        _shifted_means(one, np.zeros((1, m)), np.zeros((1, m)), one, one, one, one,
                       np.empty((1, 1, m)))

    def on_command(self, t: float, tau: np.ndarray) -> None:
        times, values = self._commands
        i = self._c % len(times)
        times[i], values[i] = t, tau
        self._c += 1

    def on_state(self, t: float, dt: float, torque: np.ndarray) -> None:
        times, spans, torques = self._states  # the impulse torque * dt made in `_bins`
        i = self._s % len(times)
        times[i], spans[i], torques[i] = t, dt, torque
        self._s += 1

    def estimate(self) -> bool:
        """One measurement (see the class doc); True if it was made."""
        bins = self._bins()
        if bins is None:
            return False
        start, end, asked = bins
        order = np.argsort(self._commands[0])
        t, tau = self._commands[0][order], self._commands[1][order]
        known = np.isfinite(t)
        t, tau = t[known], tau[known]
        if len(t) < 2 or not np.any(np.std(tau[t > end[-1] - self.HORIZON], axis=0)
                                    / self.limits > self.MOVING):
            return False
        integral = np.vstack((np.zeros(tau.shape[1]),
                              np.cumsum(tau[:-1] * np.diff(t)[:, None], axis=0)))
        inside = (start - self.CANDIDATES[-1] >= t[0])
        if inside.sum() < 20:
            return False
        mean = np.empty((len(self.CANDIDATES), len(start), tau.shape[1]))
        _shifted_means(t, tau, integral, start, end, end - start, self.CANDIDATES, mean)
        gap = (mean[:, inside] - asked[inside]) / self.limits  # (candidates, bins, m)
        cost = np.var(np.diff(gap, axis=1), axis=1).sum(axis=1)
        best = int(np.argmin(cost))
        if not cost[best] <= self.CLEAR * cost.max():
            return False
        self.measured = (self.measured + [float(self.CANDIDATES[best])])[-self.MEDIAN:]
        self.delay = float(np.median(self.measured))
        return True

    def _bins(self):
        """(start, end [s], mean torque asked (bins, m)) of the states of the last HORIZON,
        BIN at a time in stamp order; None if too few."""
        times, spans, torques = self._states
        order = np.argsort(times)
        times, spans = times[order], spans[order]
        impulses = torques[order] * spans[:, None]
        count = int((times > times[-1] - self.HORIZON).sum()) // self.BIN * self.BIN
        if count < 20 * self.BIN:
            return None
        times, spans, impulses = times[-count:], spans[-count:], impulses[-count:]
        first = np.arange(0, count, self.BIN)
        start, end = times[first] - spans[first], times[first + self.BIN - 1]
        asked = np.add.reduceat(impulses, first, axis=0) / (end - start)[:, None]
        return start, end, asked

    def ticks(self, period: float) -> int:
        """The delay in whole periods (0 before the first measurement)."""
        return 0 if self.delay is None else int(round(self.delay / period))


@njit(cache=True, error_model='numpy')  # a span of 0 divides as numpy does, not raising
def _shifted_means(t, tau, integral, start, end, span, candidates, out):
    """out (candidates, bins, m): the mean command over each bin [start, end] (span = end -
    start [s]) moved back by each candidate delay, (the integral of
    the piecewise-constant commands at the end - at the start) / span, element by element as
    numpy would (one call: twice 61 x bins x m temporaries less,
    ~half the measurement's time, issue 45)."""
    last = t.shape[0] - 1
    for c in range(candidates.shape[0]):
        for b in range(start.shape[0]):
            x0, x1 = start[b] - candidates[c], end[b] - candidates[c]
            i0 = min(max(np.searchsorted(t, x0, side='right') - 1, 0), last)
            i1 = min(max(np.searchsorted(t, x1, side='right') - 1, 0), last)
            for k in range(tau.shape[1]):
                a = integral[i0, k] + tau[i0, k] * (x0 - t[i0])
                e = integral[i1, k] + tau[i1, k] * (x1 - t[i1])
                out[c, b, k] = (e - a) / span[b]
