"""Streaming analysis of a controller run: tracking, limits, loop timing, the dynamic model.

Plain numpy (no ROS). Every statistic is fed chunk by chunk (`update`) and read at the end
(`result`), and keeps memory bounded whatever the run's length:

- sums (RMS, mean, least squares) are running sums;
- percentiles come from fixed log-spaced histograms (`LogHistogram`, relative resolution
  `rel`, e.g. 0.1 %), not from the samples;
- gaps are counted from the period histogram; only the first `max_gaps` are listed;
- plotted series are min/max envelopes of at most `2 × max_points` buckets (`Envelope`): when
  full, neighbouring buckets merge and the bucket width doubles;
- accelerations use a Savitzky-Golay filter over a window of w samples, so only the last w - 1
  samples are carried from one chunk to the next.

Stamps are int64 nanoseconds; times in results are relative to `t0_ns` (the run's start).

Model residual (per joint) and unmodelled payload at the last link:

    r_k   = tau_meas_k - RNEA(q_k, qd_k, qdd_k)
    phi_k = RNEA_{+1 kg}(q_k, qd_k, qdd_k) - RNEA(q_k, qd_k, qdd_k)   (regressor of the mass)
    m     = Σ phi·r / Σ phi·phi            (least squares, r ≈ m phi since RNEA is linear in m)
"""
import numpy as np

from rnea_controller.dynamics.rnea import rnea

NS = 1e-9


class LogHistogram:
    """Counts of |x| in log-spaced bins per column: quantiles within `rel`, constant memory.

    Bin 0 holds |x| < lo, the last bin |x| >= hi; bin k in between covers
    [lo (1+rel)^(k-1), lo (1+rel)^k).

    >>> h = LogHistogram(lo=1e-6, hi=10.0, rel=1e-3)
    >>> h.add(np.arange(1, 101) * 0.01)
    >>> round(float(h.quantile(0.5)[0]), 3)
    0.5
    """

    def __init__(self, lo=1e-9, hi=1e3, rel=1e-3, columns=1):
        self.lo, self.hi, self.columns = lo, hi, columns
        self.log_step = np.log1p(rel)
        self.bins = int(np.ceil(np.log(hi / lo) / self.log_step)) + 2
        self.counts = np.zeros((columns, self.bins), np.int64)

    def add(self, x):
        """Add the finite values of x, shape (N,) or (N, columns)."""
        x = np.abs(np.asarray(x, float)).reshape(len(x), self.columns)
        ok = np.isfinite(x)
        with np.errstate(divide='ignore'):
            k = np.floor(np.log(np.maximum(x, 1e-300) / self.lo) / self.log_step) + 1
        k = np.clip(np.where(ok, k, 0), 0, self.bins - 1).astype(np.int64)
        flat = (k + np.arange(self.columns) * self.bins)[ok]
        self.counts += np.bincount(flat, minlength=self.counts.size).reshape(self.counts.shape)

    def centers(self):
        """Representative value of each bin (geometric middle; 0 for the underflow bin)."""
        k = np.arange(self.bins)
        mid = self.lo * np.exp((k - 0.5) * self.log_step)
        mid[0] = 0.0
        mid[-1] = self.hi
        return mid

    def quantile(self, p):
        """The p-quantile (0..1) of each column, NaN where a column is empty."""
        cum = np.cumsum(self.counts, axis=1)
        total = cum[:, -1]
        out = np.full(self.columns, np.nan)
        for c in np.flatnonzero(total):
            k = np.searchsorted(cum[c], p * total[c], side='left')
            out[c] = self.centers()[min(k, self.bins - 1)]
        return out


def weighted_quantile(values, weights, p):
    """The p-quantile of `values` repeated `weights` times (NaN if no weight)."""
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    if not len(cum) or cum[-1] == 0:
        return float('nan')
    return float(values[order][min(np.searchsorted(cum, p * cum[-1]), len(cum) - 1)])


class Envelope:
    """Min/max envelope of a series for plotting, at most 2 × max_points buckets of any length.

    add(t, x): t (N,) [s], x (N, m). Buckets hold `stride` samples; when there are more than
    2 × max_points, pairs merge and the stride doubles (memory stays O(max_points · m)).
    """

    def __init__(self, columns, max_points=1500):
        self.columns, self.max_points, self.stride = columns, max_points, 1
        self.t = np.zeros(0)
        self.lo = np.zeros((0, columns))
        self.hi = np.zeros((0, columns))
        self._pending_t = np.zeros(0)
        self._pending_x = np.zeros((0, columns))

    def add(self, t, x):
        t = np.concatenate([self._pending_t, np.asarray(t, float)])
        x = np.concatenate([self._pending_x, np.asarray(x, float).reshape(len(t) - len(
            self._pending_t), self.columns)])
        full = len(t) // self.stride * self.stride
        if full:
            buckets = x[:full].reshape(-1, self.stride, self.columns)
            self.t = np.concatenate([self.t, t[:full:self.stride]])
            self.lo = np.concatenate([self.lo, np.fmin.reduce(buckets, axis=1)])
            self.hi = np.concatenate([self.hi, np.fmax.reduce(buckets, axis=1)])
        self._pending_t, self._pending_x = t[full:], x[full:]
        while len(self.t) > 2 * self.max_points:
            self._merge()

    def _merge(self):
        even = len(self.t) // 2 * 2
        self.t = self.t[:even:2]
        self.lo = np.fmin(self.lo[:even:2], self.lo[1:even:2])
        self.hi = np.fmax(self.hi[:even:2], self.hi[1:even:2])
        self.stride *= 2

    def series(self):
        """(t [s], lo (K, m), hi (K, m)) including the last partial bucket."""
        if not len(self._pending_t):
            return self.t, self.lo, self.hi
        return (np.append(self.t, self._pending_t[0]),
                np.vstack([self.lo, np.fmin.reduce(self._pending_x, axis=0)]),
                np.vstack([self.hi, np.fmax.reduce(self._pending_x, axis=0)]))


class TimingStats:
    """Rate, period jitter, gaps and missed ticks of a stream of stamps [ns].

    The nominal period T is the median period. A gap is a period ≥ gap_factor × T, and it
    misses round(period / T) - 1 ticks. Jitter is |period - T|.
    """

    def __init__(self, t0_ns, gap_factor=1.5, max_gaps=1000):
        self.t0_ns, self.gap_factor, self.max_gaps = t0_ns, gap_factor, max_gaps
        self.periods = LogHistogram(lo=1e-7, hi=1e4, rel=2e-4)
        self.count = 0
        self.first = self.last = None
        self.backwards = 0
        self._early = []
        self._threshold = None
        self._candidates = []

    def update(self, stamps):
        stamps = np.asarray(stamps, np.int64)
        if not len(stamps):
            return
        self.count += len(stamps)
        self.first = int(stamps[0]) if self.first is None else self.first
        previous = stamps[:1] if self.last is None else np.array([self.last])
        dt = np.diff(np.concatenate([previous, stamps])) * NS
        starts = np.concatenate([previous, stamps[:-1]])
        self.last = int(stamps[-1])
        self.backwards += int(np.sum(dt < 0))
        keep = dt > 0
        self.periods.add(dt[keep])
        self._collect(dt[keep], starts[keep])

    def _collect(self, dt, starts):
        """Keep periods that may be gaps (> 1.2 × an early estimate of T), at most max_gaps."""
        if self._threshold is None:
            self._early.extend(zip(dt.tolist(), starts.tolist()))
            if len(self._early) < 100:
                return
            self._threshold = 1.2 * float(np.median([d for d, _ in self._early]))
            dt = np.array([d for d, _ in self._early])
            starts = np.array([s for _, s in self._early], np.int64)
            self._early = []
        big = np.flatnonzero(dt > self._threshold)[:self.max_gaps - len(self._candidates)]
        self._candidates.extend(zip(dt[big].tolist(), starts[big].tolist()))

    def result(self):
        """Dict: count, duration [s], rate [Hz], period [ms], jitter [µs], gaps, missed ticks."""
        if self._threshold is None and self._early:
            early, self._early = self._early, []
            self._threshold = 0.0
            self._collect(np.array([d for d, _ in early]), np.array([s for _, s in early]))
        span = (self.last - self.first) * NS if self.count > 1 else 0.0
        out = {'count': self.count, 'duration_s': span, 'backwards_stamps': self.backwards,
               'rate_hz': (self.count - 1) / span if span > 0 else float('nan')}
        counts = self.periods.counts[0]
        if not counts.sum():
            return {**out, 'period_ms': float('nan'), 'jitter_us': {}, 'gaps': [],
                    'gap_count': 0, 'missed_ticks': 0, 'gaps_listed': 0}
        centers = self.periods.centers()
        T = float(self.periods.quantile(0.5)[0])
        jitter = np.abs(centers - T) * 1e6
        out['period_ms'] = T * 1e3
        out['jitter_us'] = {f'p{p:g}': weighted_quantile(jitter, counts, p / 100)
                            for p in (50, 90, 99, 99.9)}
        out['jitter_us']['max'] = float(jitter[counts > 0].max())
        big = centers >= self.gap_factor * T
        out['gap_count'] = int(counts[big].sum())
        out['missed_ticks'] = int((counts[big] * (np.round(centers[big] / T) - 1)).sum())
        out['gaps'] = self._gaps(T)
        out['gaps_listed'] = len(out['gaps'])
        return out

    def _gaps(self, T):
        return [{'start_ms': (s - self.t0_ns) * NS * 1e3, 'duration_ms': d * 1e3,
                 'missed_ticks': int(round(d / T) - 1)}
                for d, s in self._candidates if d >= self.gap_factor * T]


class StampedSamples:
    """The tail of a stream being fed: samples x (N, m) at stamps t (N,) [ns], in time order
    (stable), whatever order they come in. The owner drops what it has used with `keep`."""

    def __init__(self, m: int) -> None:
        self.t = np.zeros(0, np.int64)
        self.x = np.zeros((0, m))

    def __len__(self) -> int:
        return len(self.t)

    def add(self, t: np.ndarray, x: np.ndarray) -> None:
        """Append samples x (K, m) at stamps t (K,) [ns]."""
        t = np.concatenate([self.t, np.asarray(t, np.int64)])
        x = np.vstack([self.x, x])
        if not np.all(t[1:] >= t[:-1]):
            order = np.argsort(t, kind='stable')
            t, x = t[order], x[order]
        self.t, self.x = t, x

    def keep(self, index: np.ndarray | slice) -> None:
        """Keep the samples at `index` (a mask, indices or a slice), drop the rest."""
        self.t, self.x = self.t[index], self.x[index]


class TrackingStats:
    """Tracking error e = q_d - q per joint, q interpolated at the reference stamps.

    A reference sample is compared only where joint states bracket it within
    `max_interval_factor` × their median period (not across a joint-state gap).
    """

    def __init__(self, names, t0_ns, max_interval_factor=3.0, max_points=1500):
        self.names = tuple(names)
        self.t0_ns = t0_ns
        self.factor = max_interval_factor
        m = len(self.names)
        self.count = np.zeros(m, np.int64)
        self.sum_sq = np.zeros(m)
        self.max_abs = np.zeros(m)
        self.max_at = np.full(m, np.nan)
        self.hist = LogHistogram(lo=1e-9, hi=1e2, rel=1e-3, columns=m)
        self.envelope = Envelope(m, max_points)
        self.desired = Envelope(m, max_points)  # q_d and q themselves, for the position plot
        self.measured = Envelope(m, max_points)
        self.unaligned = 0
        self.final = np.full(m, np.nan)  # the last error [rad]: where the run came to rest
        self._js = StampedSamples(m)
        self._ref = StampedSamples(m)

    def update(self, ref_stamps=None, q_d=None, js_stamps=None, q=None):
        """Feed any new reference samples (q_d (N, m)) and joint states (q (K, m)) [rad]."""
        if js_stamps is not None and len(js_stamps):
            self._js.add(js_stamps, q)
        if ref_stamps is not None and len(ref_stamps):
            self._ref.add(ref_stamps, q_d)
        if len(self._js) < 2 or not len(self._ref):
            return
        ready = self._ref.t <= self._js.t[-1]
        self._compare(self._ref.t[ready], self._ref.x[ready])
        self._ref.keep(~ready)
        self._js.keep(slice(max(0, len(self._js) - 2), None))

    def _compare(self, t, q_d):
        js_t = self._js.t
        k = np.searchsorted(js_t, t, side='right')
        inside = (k > 0) & (k < len(js_t)) | (t == js_t[-1])
        k = np.clip(k, 1, len(js_t) - 1)
        interval = js_t[k] - js_t[k - 1]
        typical = np.median(np.diff(js_t)) if len(js_t) > 2 else interval.max(initial=0)
        exact = (t == js_t[k - 1]) | (t == js_t[k])
        inside &= (interval <= self.factor * typical) | exact
        self.unaligned += int(np.sum(~inside))
        t, q_d, k = t[inside], q_d[inside], k[inside]
        if not len(t):
            return
        w = ((t - js_t[k - 1]) / np.maximum(js_t[k] - js_t[k - 1], 1))[:, None]
        q = (1 - w) * self._js.x[k - 1] + w * self._js.x[k]
        t = (t - self.t0_ns) * NS
        self.desired.add(t, q_d)
        self.measured.add(t, q)
        self._add(t, q_d - q)

    def _add(self, t, e):
        ok = np.isfinite(e)
        e0 = np.where(ok, e, 0.0)
        self.count += ok.sum(axis=0)
        self.sum_sq += (e0 ** 2).sum(axis=0)
        i = np.argmax(np.abs(e0), axis=0)
        peak = np.abs(e0[i, np.arange(e.shape[1])])
        better = peak > self.max_abs
        self.max_abs[better] = peak[better]
        self.max_at[better] = t[i[better]]
        last = len(e) - 1 - np.argmax(ok[::-1], axis=0)  # each joint's last finite error
        seen = ok.any(axis=0)
        self.final[seen] = e[last[seen], np.arange(e.shape[1])[seen]]
        self.hist.add(e)
        self.envelope.add(t, e)

    def result(self):
        """{joint: {rms, max, p99, final [rad], max_at_s, samples}} plus 'unaligned' reference
        count; final: the run's last error, where the arm came to rest."""
        rms = np.sqrt(self.sum_sq / np.maximum(self.count, 1))
        p99 = self.hist.quantile(0.99)
        joints = {name: {'rms': float(rms[j]) if self.count[j] else float('nan'),
                         'max': float(self.max_abs[j]) if self.count[j] else float('nan'),
                         'p99': float(p99[j]), 'final': float(self.final[j]),
                         'max_at_s': float(self.max_at[j]),
                         'samples': int(self.count[j])} for j, name in enumerate(self.names)}
        return {'joints': joints, 'unaligned': self.unaligned + len(self._ref)}


class SaturationStats:
    """Share of commands at a joint's effort limit, non-finite and over-limit commands.

    A command u_j is at the limit when |u_j| ≥ (1 - rel_tol) · limit_j and over it when
    |u_j| > (1 + rel_tol) · limit_j + abs_tol.
    """

    def __init__(self, names, limits, t0_ns, rel_tol=1e-6, abs_tol=1e-9, max_events=50,
                 max_points=1500):
        self.names, self.limits, self.t0_ns = tuple(names), np.asarray(limits, float), t0_ns
        self.rel_tol, self.abs_tol, self.max_events = rel_tol, abs_tol, max_events
        m = len(self.names)
        self.count = 0
        self.at_limit = np.zeros(m, np.int64)
        self.non_finite = np.zeros(m, np.int64)
        self.over = np.zeros(m, np.int64)
        self.max_abs = np.zeros(m)
        self.run = np.zeros(m, np.int64)
        self.longest = np.zeros(m, np.int64)
        self.events = []
        self.envelope = Envelope(m, max_points)

    def update(self, stamps, u):
        """Feed commands u (N, m) [N·m] published at stamps (N,) [ns]."""
        if not len(stamps):
            return
        t = (np.asarray(stamps, np.int64) - self.t0_ns) * NS
        finite = np.isfinite(u)
        size = np.where(finite, np.abs(u), 0.0)
        at = size >= (1 - self.rel_tol) * self.limits
        over = size > (1 + self.rel_tol) * self.limits + self.abs_tol
        self.count += len(u)
        self.at_limit += at.sum(axis=0)
        self.non_finite += (~finite).sum(axis=0)
        self.over += over.sum(axis=0)
        self.max_abs = np.maximum(self.max_abs, size.max(axis=0))
        self._runs(at)
        self._events(t, u, ~finite | over)
        self.envelope.add(t, u)

    def _runs(self, at):
        """Longest stretch of consecutive commands at the limit, carried across chunks."""
        for j in range(at.shape[1]):
            edges = np.flatnonzero(np.diff(np.concatenate([[0], at[:, j].astype(np.int8), [0]])))
            starts, ends = edges[::2], edges[1::2]
            if not len(starts):
                self.run[j] = 0
                continue
            lengths = ends - starts
            if starts[0] == 0:
                lengths[0] += self.run[j]
            self.longest[j] = max(self.longest[j], lengths.max())
            self.run[j] = lengths[-1] if ends[-1] == len(at) else 0

    def _events(self, t, u, bad):
        for k, j in np.argwhere(bad)[:self.max_events - len(self.events)]:
            self.events.append({'time_s': float(t[k]), 'joint': self.names[j],
                                'command': float(u[k, j]), 'limit': float(self.limits[j])})

    def result(self):
        """{joint: {share, at_limit, longest_run, non_finite, over_limit, max_abs, limit}}."""
        joints = {name: {'share': float(self.at_limit[j] / self.count) if self.count else 0.0,
                         'at_limit': int(self.at_limit[j]), 'longest_run': int(self.longest[j]),
                         'non_finite': int(self.non_finite[j]), 'over_limit': int(self.over[j]),
                         'max_abs': float(self.max_abs[j]), 'limit': float(self.limits[j])}
                  for j, name in enumerate(self.names)}
        return {'commands': self.count, 'joints': joints, 'events': self.events}


def savgol_coefficients(window, order, derivative):
    """Savitzky-Golay weights c, so that x^(d)(k) ≈ Σ_i c_i x(k + i - h) / dt^d, h = window//2.

    Least-squares polynomial of degree `order` over the window, evaluated at its centre.
    """
    h = window // 2
    A = np.vander(np.arange(-h, h + 1, dtype=float), order + 1, increasing=True)
    return np.linalg.pinv(A)[derivative] * float(np.prod(np.arange(1, derivative + 1)))


class ResidualStats:
    """Model residual r = tau_meas - RNEA(q, qd, qdd) per joint and the payload estimate.

    qd is smoothed and differentiated with a Savitzky-Golay filter (order 2, window of about
    `window_s` seconds) on the measured velocities; samples whose window spans non-uniform
    stamps (a gap) or a non-finite value are skipped. Joint arrays are in model order.
    """

    def __init__(self, model, payload_link, t0_ns, window_s=0.02, max_points=1500):
        self.model, self.t0_ns, self.window_s = model, t0_ns, window_s
        self.payload_link = payload_link
        self.loaded = model.with_payload(payload_link, 1.0)
        n = model.n
        self.count = np.zeros(n, np.int64)
        self.sum = np.zeros(n)
        self.sum_sq = np.zeros(n)
        self.sum_phi_r = np.zeros(n)
        self.sum_phi_sq = np.zeros(n)
        self.max_abs = np.zeros(n)
        self.hist = LogHistogram(lo=1e-9, hi=1e5, rel=1e-3, columns=n)
        self.envelope = Envelope(n, max_points)
        self.window = None
        self._tail = None

    def update(self, stamps, q, qd, tau):
        """Feed measured joint states: stamps (N,) [ns], q [rad], qd [rad/s], tau [N·m] (N, n)."""
        chunk = (np.asarray(stamps, np.int64), q, qd, tau)
        if self._tail is not None:
            chunk = tuple(np.concatenate([a, b]) for a, b in zip(self._tail, chunk))
        t = chunk[0]
        if self.window is None:
            if len(t) < 3:
                self._tail = chunk
                return
            dt = np.median(np.diff(t)) * NS
            self.window = max(5, 2 * int(round(self.window_s / dt / 2)) + 1)
        if len(t) < self.window:
            self._tail = chunk
            return
        self._process(*chunk)
        self._tail = tuple(a[len(t) - self.window + 1:] for a in chunk)

    def _process(self, t, q, qd, tau):
        w, h = self.window, self.window // 2
        dt = np.diff(t) * NS
        step = np.median(dt)
        uneven = np.abs(dt - step) > 0.25 * step
        bad_row = ~np.isfinite(np.hstack([q, qd, tau])).all(axis=1)
        windows = np.lib.stride_tricks.sliding_window_view
        bad = windows(np.concatenate([uneven, [False]]), w)[:, :-1].any(axis=1)
        bad |= windows(bad_row, w).any(axis=1)
        qd_win = windows(np.where(np.isfinite(qd), qd, 0.0), w, axis=0)
        qd_s = qd_win @ savgol_coefficients(w, 2, 0)
        qdd = qd_win @ savgol_coefficients(w, 2, 1) / step
        ok = ~bad
        centre = slice(h, len(t) - h)
        self.add(t[centre][ok], q[centre][ok], qd_s[ok], qdd[ok], tau[centre][ok])

    def add(self, t, q, qd, qdd, tau):
        """Add samples already filtered: t (K,) [ns], q [rad], qd [rad/s], qdd [rad/s²],
        tau [N·m] (K, n) (`update` filters measured states itself)."""
        if not len(t):
            return
        tau_model = rnea(self.model, q, qd, qdd)
        phi = rnea(self.loaded, q, qd, qdd) - tau_model
        r = tau - tau_model
        self.count += len(t)
        self.sum += r.sum(axis=0)
        self.sum_sq += (r ** 2).sum(axis=0)
        self.sum_phi_r += (phi * r).sum(axis=0)
        self.sum_phi_sq += (phi ** 2).sum(axis=0)
        self.max_abs = np.maximum(self.max_abs, np.abs(r).max(axis=0))
        self.hist.add(r)
        self.envelope.add((t - self.t0_ns) * NS, r)

    def payload(self):
        """(m [kg], standard error [kg]) of the least-squares payload, or (None, None)."""
        phi_sq = self.sum_phi_sq.sum()
        samples = self.count.sum()
        if samples < 2 or phi_sq <= 1e-12 * max(samples, 1):
            return None, None
        m = self.sum_phi_r.sum() / phi_sq
        sse = self.sum_sq.sum() - 2 * m * self.sum_phi_r.sum() + m * m * phi_sq
        return float(m), float(np.sqrt(max(sse, 0.0) / (samples - 1) / phi_sq))

    def result(self):
        """{samples, window, payload_kg, payload_std_kg, payload_link, joints: {name: {...}}}.

        Per joint [N·m]: rms, mean (a bias: friction, offsets), max, p99 of |r|, and
        rms_after_payload: the RMS of r - m phi (what the estimated payload leaves).
        """
        m, std = self.payload()
        k = np.maximum(self.count, 1)
        after = self.sum_sq - 2 * (m or 0.0) * self.sum_phi_r + (m or 0.0) ** 2 * self.sum_phi_sq
        p99 = self.hist.quantile(0.99)
        joints = {name: {'rms': float(np.sqrt(self.sum_sq[j] / k[j])),
                         'mean': float(self.sum[j] / k[j]), 'max': float(self.max_abs[j]),
                         'p99': float(p99[j]),
                         'rms_after_payload': float(np.sqrt(max(after[j], 0.0) / k[j]))}
                  for j, name in enumerate(self.model.joint_names) if self.count[j]}
        return {'samples': int(self.count.min()) if self.model.n else 0, 'window': self.window,
                'payload_link': self.payload_link, 'payload_kg': m, 'payload_std_kg': std,
                'joints': joints}


def last_link(model):
    """Name of the link moved by the last joint in model order (its own frame, not a tool)."""
    body = model.n - 1
    for link in model.link_names:
        b, R, p = model.link_frame(link)
        if b == body and np.allclose(R, np.eye(3)) and np.allclose(p, 0.0):
            return link
    return next(link for link in model.link_names if model.link_frame(link)[0] == body)
