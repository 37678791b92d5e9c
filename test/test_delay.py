"""delay: the effective delay of known lags, against the definition evaluated on the whole
series (numpy interpolation, a fine grid of τ)."""
import numpy as np
import pytest

from rnea_controller.analysis.delay import DelayStats, refine

T0 = 1_700_000_000_000_000_000
LAGS = np.array([2.1, 0.37, 0.0, 6.66, -1.8, 9.2]) * 1e-3  # [s]


def _series(duration=20.0, noise=1e-4, seed=0):
    """Reference at 1 kHz; joint states 0.3 ms off its stamps, each joint q_ref(t - lag)."""
    rng = np.random.default_rng(seed)
    n = len(LAGS)
    A, w, phi = rng.uniform(0.3, 0.8, n), 2 * np.pi * rng.uniform(0.3, 0.8, n), rng.uniform(
        0, 6, n)
    t = np.arange(int(duration * 1000)) / 1000

    def q_ref(tt):
        return A * np.sin(np.outer(tt, w) + phi)
    t_js = t + 3e-4
    q = A * np.sin((t_js[:, None] - LAGS) * w + phi) + rng.normal(0, noise, (len(t), n))
    return t, q_ref, t_js, q


def _stats(t, q_d, t_js, q, chunk):
    """DelayStats fed reference (t [s], q_d) and joint states (t_js, q) in chunks."""
    stats = DelayStats([f'j{k}' for k in range(q.shape[1])], T0)
    stamps = T0 + np.round(t * 1e9).astype(np.int64)
    js = T0 + np.round(t_js * 1e9).astype(np.int64)
    for a in range(0, len(t), chunk):
        stats.update(stamps[a:a + chunk], q_d[a:a + chunk], js[a:a + chunk], q[a:a + chunk])
    return stats.result()


@pytest.mark.parametrize('chunk', [997, 20000])
def test_known_lags_found_within_0_05_ms(chunk):
    t, q_ref, t_js, q = _series()
    q_d = q_ref(t)
    r = _stats(t, q_d, t_js, q, chunk)
    for k, lag in enumerate(LAGS):
        j = r['joints'][f'j{k}']
        assert j['tau_ms'] == pytest.approx(lag * 1e3, abs=0.05), k
        assert j['rms_shifted'] == pytest.approx(1e-4, rel=0.05)  # the noise is what is left
        assert not j['at_edge']
    # overall: the τ minimising the sum over joints, by brute force on a 0.02 ms grid
    taus = np.arange(0, 6.001, 0.02) * 1e-3
    inside = (t_js > t[0] + 0.011) & (t_js < t[-1] - 0.006)
    sse = [sum(np.sum((q[inside, j] - np.interp(t_js[inside] - tau, t, q_d[:, j])) ** 2)
               for j in range(len(LAGS))) for tau in taus]
    assert r['overall']['tau_ms'] == pytest.approx(taus[np.argmin(sse)] * 1e3, abs=0.05)
    assert r['samples'] == pytest.approx(inside.sum(), abs=3)


def test_lag_beyond_the_search_is_flagged():
    t, q_ref, t_js, q = _series(duration=5.0)
    r = _stats(t + 0.02, q_ref(t), t_js, q, 2000)  # the reference stamped 20 ms late
    assert r['overall']['at_edge'] and r['overall']['tau_ms'] == pytest.approx(-5.0)


def test_refine_finds_the_vertex_between_grid_points():
    taus = np.arange(-5, 11) * 1e-3
    tau, value = refine(taus, 3.0 * (taus - 2.37e-3) ** 2 + 0.5, 7)
    assert tau == pytest.approx(2.37e-3, abs=1e-9) and value == pytest.approx(0.5)
