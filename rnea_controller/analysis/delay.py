"""Effective delay of the arm behind its reference (issue 12), streamed over a run.

The effective delay τ* is the lag that minimises the RMS of q(t) - q_ref(t - τ): how late the
arm follows its reference, per joint and over all joints. τ > 0: the arm lags.

- For each τ of a grid (`step`, default 1 ms, over -5..+10 ms), the sum of squares of
  q(t_k) - q_ref(t_k - τ) is accumulated over the joint states t_k, q_ref linearly
  interpolated between reference samples. Only the t_k for which every τ of the grid falls
  between two reference samples at most `max_interval_factor` periods apart are used, so every
  τ is judged on the same samples.
- The grid minimum is refined to a fraction of the step by the vertex of the parabola through
  the grid points within ±2 steps of it: near its minimum SSE(τ) is quadratic, since
  q(t) - q_ref(t - τ) ≈ e(t) + qd_ref(t) (τ - τ*) (the cubic term, Σ qd·qdd, averages out over
  a motion that comes back). A 1 ms grid costs a quarter of a 0.25 ms one and gives the same
  τ* to 0.01 ms on the tests' runs.

Memory: the grid's sums, a tail of the reference as long as the grid, and the joint states
still waiting for the reference after them (at most `max_pending`), not the run.
"""
import numpy as np

from rnea_controller.analysis.metrics import StampedSamples

NS = 1e-9


class DelayStats:
    """Sums of squares of q(t) - q_ref(t - τ) on a grid of τ, per joint.

    names: the controlled joints (columns of q and q_ref); t0_ns: the run's start [ns].
    """

    def __init__(self, names, t0_ns, lo=-5e-3, hi=10e-3, step=1e-3,
                 max_interval_factor=3.0, block=2000, max_pending=100_000):
        self.names, self.t0_ns = tuple(names), t0_ns
        count = int(round((hi - lo) / step)) + 1
        self.taus_ns = np.round(np.linspace(lo, hi, count) / NS).astype(np.int64)
        self.factor, self.block, self.max_pending = max_interval_factor, block, max_pending
        m = len(self.names)
        self.sse = np.zeros((count, m))
        self.count = 0
        self.period_ns = None
        self._ref = StampedSamples(m)
        self._js = StampedSamples(m)

    def update(self, ref_stamps=None, q_d=None, js_stamps=None, q=None):
        """Feed new reference samples q_d (N, m) and joint states q (K, m) [rad], stamps [ns]."""
        if ref_stamps is not None and len(ref_stamps):
            self._ref.add(ref_stamps, q_d)
            if self.period_ns is None and len(self._ref) > 2:
                self.period_ns = float(np.median(np.diff(self._ref.t)))
        if js_stamps is not None and len(js_stamps):
            self._js.add(js_stamps, q)
        if self.period_ns is None or not len(self._js):
            return
        ready = self._js.t - self.taus_ns[0] <= self._ref.t[-1]  # every t - τ is covered
        t, q = self._js.t[ready], self._js.x[ready]
        for start in range(0, len(t), self.block):
            self._add(t[start:start + self.block], q[start:start + self.block])
        # the states still waiting, at most max_pending (a reference that stopped: not for ever)
        self._js.keep(np.flatnonzero(~ready)[-self.max_pending:])
        oldest = (self._js.t[0] if len(self._js) else self._ref.t[-1]) - self.taus_ns[-1]
        self._ref.keep(slice(max(0, int(np.searchsorted(self._ref.t, oldest)) - 1), None))

    def _add(self, t, q):
        """Accumulate the squared differences for the joint states (t, q) at every τ."""
        ref_t = self._ref.t
        if len(ref_t) < 2:
            return
        x = t[:, None] - self.taus_ns[None, :]
        k = np.clip(np.searchsorted(ref_t, x, side='right'), 1, len(ref_t) - 1)
        interval = ref_t[k] - ref_t[k - 1]
        inside = (x >= ref_t[0]) & (x <= ref_t[-1]) & (interval <= self.factor * self.period_ns)
        w = ((x - ref_t[k - 1]) / np.maximum(interval, 1))[..., None]
        before = self._ref.x[k - 1]
        e = q[:, None, :] - before - w * (self._ref.x[k] - before)
        ok = inside.all(axis=1) & np.isfinite(e).all(axis=(1, 2))
        self.sse += np.einsum('ngj,ngj->gj', e[ok], e[ok])
        self.count += int(ok.sum())

    def result(self):
        """Effective delays: per joint and overall, tau_ms, rms at τ* and at 0 [rad], the grid.

        {'samples', 'taus_ms': grid, 'rms_curve': {joint: [rad per τ]}, 'overall': {...},
        'joints': {name: {'tau_ms', 'rms_shifted', 'rms_unshifted', 'at_edge'}}}; None
        values where no sample was usable.
        """
        taus = self.taus_ns * NS
        joints = {name: _minimum(taus, self.sse[:, j], self.count)
                  for j, name in enumerate(self.names)}
        overall = _minimum(taus, self.sse.sum(axis=1), self.count * len(self.names))
        curves = np.sqrt(self.sse / max(self.count, 1))
        return {'samples': self.count, 'taus_ms': (taus * 1e3).tolist(),
                'rms_curve': {name: curves[:, j].tolist() for j, name in enumerate(self.names)},
                'rms_curve_overall': np.sqrt(self.sse.sum(axis=1) / max(
                    self.count * len(self.names), 1)).tolist(),
                'overall': overall, 'joints': joints}


def _minimum(taus, sse, count):
    """{tau_ms, rms_shifted, rms_unshifted, at_edge} of one SSE(τ) curve (count samples)."""
    if count == 0:
        return {'tau_ms': None, 'rms_shifted': None, 'rms_unshifted': None, 'at_edge': None}
    i = int(np.argmin(sse))
    tau, best = refine(taus, sse, i)
    zero = int(np.argmin(np.abs(taus)))
    return {'tau_ms': tau * 1e3, 'rms_shifted': float(np.sqrt(max(best, 0.0) / count)),
            'rms_unshifted': float(np.sqrt(sse[zero] / count)),
            'at_edge': i in (0, len(taus) - 1)}


def refine(taus, sse, i, half=2):
    """(τ, SSE) at the vertex of the parabola through the points i-half..i+half.

    >>> taus = np.arange(-5, 6) * 1e-3
    >>> tau, value = refine(taus, (taus - 0.0021) ** 2 + 1.0, 2 + 5)
    >>> round(tau * 1e3, 6), round(value, 9)
    (2.1, 1.0)
    """
    lo, hi = max(0, i - half), min(len(taus), i + half + 1)
    if hi - lo < 3:
        return float(taus[i]), float(sse[i])
    scale = taus[hi - 1] - taus[lo]
    a, b, c = np.polyfit((taus[lo:hi] - taus[i]) / scale, sse[lo:hi], 2)
    if a <= 0:
        return float(taus[i]), float(sse[i])
    u = float(np.clip(-b / (2 * a), (taus[lo] - taus[i]) / scale, (taus[hi - 1] - taus[i])
                      / scale))
    return float(taus[i] + u * scale), float(min(np.polyval([a, b, c], u), sse[i]))
