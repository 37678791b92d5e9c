"""Zero-phase smoothing and differentiation of joint states, streamed, for identification.

Savitzky-Golay filter (Savitzky & Golay 1964): over a centred window of w samples, the least-
squares polynomial of degree 2 is fitted and evaluated (or differentiated) at the centre. The
window is symmetric, so the filter has zero phase: smoothed qd, qdd and tau stay aligned in
time with q, which the regressor needs (a delay between tau and qdd would bias the inertial
parameters). Window: `window_s` = 20 ms, 21 samples at 1 kHz, -3 dB at 51 Hz: above the
arm's motion (a few Hz) and its 20 rad/s servo loop, below most of the sensor noise.

    qd_f  = SG_0(qd),  qdd_f = SG_1(qd) / dt       (measured velocity present, order 2)
    qd_f  = SG_1(q) / dt, qdd_f = SG_2(q) / dt²    (no velocity: from q, order 3)

q and tau are taken as measured at the centre sample. tau is not smoothed: the Coulomb term
fc·tanh(qd / w) switches within a few milliseconds at a velocity reversal, and smoothing tau
but not that regressor column biased fc by 2-3 % in the tests. Every `decimate`-th sample is
kept (half the window by default), so the residuals kept are about independent and the
standard errors computed from them are honest. Samples whose window spans a gap (a period
off by > 25 %) or a non-finite value are skipped. Only w - 1 samples are carried from one
chunk to the next.
"""
import numpy as np

from rnea_controller.analysis.metrics import savgol_coefficients

NS = 1e-9


class Smoother:
    """Feed joint-state chunks; get back the filtered samples whose window is complete."""

    def __init__(self, window_s=0.02, decimate=None):
        self.window_s, self.decimate = window_s, decimate
        self.window = None
        self._tail = None
        self._index = 0  # index in the run of the first sample of the tail

    def update(self, stamps, q, qd, tau):
        """stamps (N,) [ns], q [rad], qd [rad/s], tau [N·m] (N, n) -> (t, q, qd, qdd, tau).

        Returns the filtered centre samples now complete (possibly none): t [ns] (K,), and
        (K, n) arrays.
        """
        chunk = (np.asarray(stamps, np.int64), q, qd, tau)
        if self._tail is not None:
            chunk = tuple(np.concatenate([a, b]) for a, b in zip(self._tail, chunk))
        t = chunk[0]
        if self.window is None and len(t) >= 3:
            dt = np.median(np.diff(t)) * NS
            self.window = max(5, 2 * int(round(self.window_s / dt / 2)) + 1)
            self.decimate = self.decimate or max(1, self.window // 2)
        if self.window is None or len(t) < self.window:
            self._tail = chunk
            return None
        out = self._filter(*chunk)
        drop = len(t) - self.window + 1
        self._tail = tuple(a[drop:] for a in chunk)
        self._index += drop
        return out

    def _filter(self, t, q, qd, tau):
        w, h = self.window, self.window // 2
        windows = np.lib.stride_tricks.sliding_window_view
        dt = np.diff(t) * NS
        step = np.median(dt)
        uneven = np.abs(dt - step) > 0.25 * step
        use_q = not np.isfinite(qd).all()
        bad_row = ~np.isfinite(np.hstack([q, tau] if use_q else [q, qd, tau])).all(axis=1)
        bad = windows(np.concatenate([uneven, [False]]), w)[:, :-1].any(axis=1)
        bad |= windows(bad_row, w).any(axis=1)
        centre = np.arange(h, len(t) - h)
        keep = ~bad & ((self._index + centre) % self.decimate == 0)
        if use_q:
            x = windows(np.where(np.isfinite(q), q, 0.0), w, axis=0)[keep]
            qd_f = x @ savgol_coefficients(w, 3, 1) / step
            qdd_f = x @ savgol_coefficients(w, 3, 2) / step ** 2
        else:
            x = windows(np.where(np.isfinite(qd), qd, 0.0), w, axis=0)[keep]
            qd_f = x @ savgol_coefficients(w, 2, 0)
            qdd_f = x @ savgol_coefficients(w, 2, 1) / step
        return t[centre][keep], q[centre][keep], qd_f, qdd_f, tau[centre][keep]
