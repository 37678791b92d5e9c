"""Zero-phase smoothing and differentiation of joint states, streamed, for identification.

Savitzky-Golay filter (Savitzky & Golay 1964): over a centred window of w samples, the least-
squares polynomial of degree 2 is fitted and evaluated (or differentiated) at the centre, on
the samples' own stamps: a state dropped or late (a loaded driver, a lossy link) changes the
abscissae of the fit, not the instant the result belongs to; evenly spaced, it is the classic
filter. The
window is symmetric, so the filter has zero phase: smoothed q, qd, qdd and tau stay aligned in
time, which the regressor needs (a delay between tau and qdd would bias the inertial
parameters). Window: `window_s` = 20 ms, 21 samples at 1 kHz, -3 dB at 51 Hz: above the
arm's motion (a few Hz) and its 20 rad/s servo loop, below most of the sensor noise.

Positions, velocities and torques go through the SAME filter SG_0 (issue 30), so that their
amplitude responses match and the regressor of the filtered states meets the filtered torque:

    q_f = SG_0(q), qd_f = SG_0(qd), qdd_f = SG_1(qd) / dt, tau_f = SG_0(tau)   (order 2)
    q_f = SG_0(q), qd_f = SG_1(q) / dt, qdd_f = SG_2(q) / dt², tau_f = SG_0(tau) (order 3: no
                                                                               velocity)

A smoothed torque mixes the two signs of Coulomb friction across a velocity reversal (which
fc·tanh(qd / w) of the smoothed velocity does not): `steady` (K, n) marks the samples whose
window holds no reversal (every measured velocity of the joint in the window, or every
difference of its positions without velocities, of one sign); the identification keeps only
those rows. Every `decimate`-th sample is kept (half the window by default), so the residuals
kept are about independent and the standard errors computed from them are honest. Samples
whose window spans a gap (more than 1.5× its nominal time: a stalled driver) or a non-finite
value are skipped; so are
stamps that do not increase (a repeated or reordered state: the stamps are the states' own,
the instants the driver sampled them, not arrival times). Only w - 1 samples are carried from
one chunk to the next.
"""
import math

import numpy as np

NS = 1e-9
SPAN_TOLERANCE = 1.5  # a window spanning more than 1.5× its nominal time is a gap: skipped


class Smoother:
    """Feed joint-state chunks; get back the filtered samples whose window is complete.

    After each `update`, `steady` is the (K, n) mask of its samples without a velocity
    reversal in their window (module docstring), and `raw_tau` (K, n) the torques as measured
    at the returned instants, unfiltered (the identification's target: a filter's width then
    changes the prediction, not what it is scored against).
    """

    def __init__(self, window_s=0.02, decimate=None):
        self.window_s, self.decimate = window_s, decimate
        self.window = None
        self.steady = None
        self.raw_tau = None
        self._tail = None
        self._last = None  # the last stamp taken [ns]
        self._index = 0  # index in the run of the first sample of the tail

    def update(self, stamps, q, qd, tau):
        """stamps (N,) [ns], q [rad], qd [rad/s], tau [N·m] (N, n) -> (t, q, qd, qdd, tau).

        Returns the filtered centre samples now complete (possibly none): t [ns] (K,), and
        (K, n) arrays.
        """
        chunk = self._increasing(np.asarray(stamps, np.int64), q, qd, tau)
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

    def _increasing(self, t, q, qd, tau):
        """The chunk without the states whose stamp does not exceed every earlier one."""
        if not len(t):
            return t, q, qd, tau
        previous = np.maximum.accumulate(np.concatenate([[self._last if self._last is not None
                                                          else t[0] - 1], t]))[:-1]
        keep = t > previous
        self._last = int(max(t.max(), self._last if self._last is not None else t.max()))
        if keep.all():
            return t, q, qd, tau
        return t[keep], q[keep], qd[keep], tau[keep]

    def _filter(self, t, q, qd, tau):
        w, h = self.window, self.window // 2
        windows = np.lib.stride_tricks.sliding_window_view
        step = np.median(np.diff(t)) * NS
        use_q = not np.isfinite(qd).all()
        bad_row = ~np.isfinite(np.hstack([q, tau] if use_q else [q, qd, tau])).all(axis=1)
        span = (t[w - 1:] - t[:len(t) - w + 1]) * NS
        bad = (span > SPAN_TOLERANCE * (w - 1) * step) | windows(bad_row, w).any(axis=1)
        centre = np.arange(h, len(t) - h)
        keep = ~bad & ((self._index + centre) % self.decimate == 0)
        order = 3 if use_q else 2
        tau_s = (windows(t, w)[keep] - t[centre][keep, None]) * NS / step  # [steps]
        weights = _local_polynomial(tau_s, order)  # (K, order + 1, w)
        xq = windows(np.where(np.isfinite(q), q, 0.0), w, axis=0)[keep]
        xt = windows(np.where(np.isfinite(tau), tau, 0.0), w, axis=0)[keep]

        def fit(x, d):  # d-th derivative at the centre of the polynomial fitted to x (K, n, w)
            return np.einsum('kw,knw->kn', weights[:, d], x) * math.factorial(d) / step ** d

        if use_q:
            qd_f, qdd_f = fit(xq, 1), fit(xq, 2)
            sign = np.sign(np.diff(xq, axis=-1))
        else:
            x = windows(np.where(np.isfinite(qd), qd, 0.0), w, axis=0)[keep]
            qd_f, qdd_f = fit(x, 0), fit(x, 1)
            sign = np.sign(x)
        self.steady = np.all(sign == sign[..., :1], axis=-1) & (sign[..., 0] != 0)
        self.raw_tau = tau[centre][keep]
        return t[centre][keep], fit(xq, 0), qd_f, qdd_f, fit(xt, 0)


def _local_polynomial(x, order):
    """Least-squares weights (K, order + 1, w): the coefficients of the polynomial of degree
    `order` fitted to each window's samples at abscissae x (K, w) are weights @ values.
    Savitzky-Golay's on evenly spaced samples; the same fit on the stamps as they are. Windows
    whose abscissae are all the first's (evenly spaced stamps) share its weights, solved once.
    """
    if len(x) > 1 and np.array_equal(x, np.broadcast_to(x[0], x.shape)):
        return np.broadcast_to(_local_polynomial(x[:1], order), (len(x), order + 1, x.shape[1]))
    V = x[..., None] ** np.arange(order + 1)  # (K, w, order + 1)
    return np.linalg.solve(np.swapaxes(V, 1, 2) @ V, np.swapaxes(V, 1, 2))
