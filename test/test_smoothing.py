"""smoothing: the streamed Savitzky-Golay filter against analytic derivatives of a sinusoid."""
import numpy as np
import pytest

from rnea_controller.analysis.smoothing import Smoother

T0 = 1_700_000_000_000_000_000


def _feed(smoother, stamps, q, qd, tau, chunk):
    parts = [smoother.update(stamps[a:a + chunk], q[a:a + chunk], qd[a:a + chunk],
                             tau[a:a + chunk]) for a in range(0, len(stamps), chunk)]
    parts = [p for p in parts if p is not None]
    return [np.concatenate([p[k] for p in parts]) for k in range(5)]


@pytest.mark.parametrize('with_velocity', [True, False])
def test_derivatives_in_phase_and_the_same_samples_whatever_the_chunks(with_velocity):
    t = np.arange(5000) / 1000
    w = 2 * np.pi * np.array([0.5, 2.0])
    q = np.sin(np.outer(t, w))
    qd = np.cos(np.outer(t, w)) * w if with_velocity else np.full_like(q, np.nan)
    tau = q + 1.0
    stamps = T0 + np.arange(5000, dtype=np.int64) * 1_000_000
    runs = [_feed(Smoother(), stamps, q, qd, tau, chunk) for chunk in (137, 5000)]
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)
    ts, q_s, qd_s, qdd_s, tau_s = runs[0]
    assert np.all(np.diff(ts) == 10_000_000)  # every 10th sample: half the 21-sample window
    x = (ts - T0) * 1e-9
    np.testing.assert_allclose(q_s, np.sin(np.outer(x, w)), atol=2e-6)
    np.testing.assert_allclose(qd_s / w, np.cos(np.outer(x, w)), atol=2e-3)
    np.testing.assert_allclose(qdd_s / w ** 2, -np.sin(np.outer(x, w)), atol=1e-2)
    np.testing.assert_allclose(tau_s, q_s + 1.0, atol=1e-12)  # the same filter as q's


def test_windows_across_a_gap_or_nan_are_skipped():
    stamps = T0 + np.arange(3000, dtype=np.int64) * 1_000_000
    keep = np.ones(3000, bool)
    keep[1000:1050] = False
    q = np.zeros((3000, 1))
    tau = np.zeros((3000, 1))
    tau[2000] = np.nan
    ts, *_ = _feed(Smoother(decimate=1), stamps[keep], q[keep], q[keep], tau[keep], 400)
    t = (ts - T0) // 1_000_000
    assert not np.any((t > 989) & (t < 1060)) and not np.any((t > 1989) & (t < 2011))
    assert len(ts) == 3000 - 50 - 20 - 20 - 21  # the hole, both ends, across it, the NaN


def test_samples_near_a_velocity_reversal_are_not_steady_and_late_states_change_nothing():
    """A joint reversing at t = 1 s (qd = t - 1): the samples whose 21-sample window holds
    the reversal, and only those, are not steady. A repeated state, two swapped and a dropped
    one are left out or fitted on their own stamps: the same samples come out (but the
    dropped one) with the same exact derivative."""
    t = np.arange(2000) / 1000
    qd = (t - 1.0)[:, None] + 1e-9
    q, tau = (t - 1.0)[:, None] ** 2 / 2, np.sign(qd)
    stamps = T0 + np.arange(2000, dtype=np.int64) * 1_000_000
    smoother = Smoother(decimate=1)
    ts, _, qd_s, qdd_s, _ = _feed(smoother, stamps, q, qd, tau, 5000)
    centre = (ts - T0) // 1_000_000
    np.testing.assert_array_equal(~smoother.steady[:, 0], (centre >= 990) & (centre < 1010))
    np.testing.assert_allclose(qdd_s, 1.0, atol=1e-9)
    order = np.r_[0:500, 499, 501, 500, 502:1500, 1501:2000]  # repeat, swap, drop
    again = _feed(Smoother(decimate=1), stamps[order], q[order], qd[order], tau[order], 300)
    np.testing.assert_array_equal(again[0], ts[~np.isin(centre, (500, 1500))])
    np.testing.assert_allclose(again[2], qd_s[~np.isin(centre, (500, 1500))], atol=1e-9)
    np.testing.assert_allclose(again[3], 1.0, atol=1e-9)
