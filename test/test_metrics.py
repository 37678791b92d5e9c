"""metrics: streaming statistics against numpy on the whole series, and the model residual
against efforts from Pinocchio's RNEA (the oracle)."""
from conftest import robot_data_urdf
from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest
from synthetic_bags import make_run, T0_NS

from rnea_controller import default_urdf_path, RobotModel
from rnea_controller.analysis.metrics import (
    Envelope,
    last_link,
    LogHistogram,
    ResidualStats,
    SaturationStats,
    savgol_coefficients,
    TimingStats,
    TrackingStats,
)


def _chunks(n, size):
    return [slice(a, min(a + size, n)) for a in range(0, n, size)]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([0.5, 0.9, 0.99, 0.999]))
def test_log_histogram_quantile_within_resolution(seed, p):
    x = np.random.default_rng(seed).lognormal(-7, 2, size=(3000, 2))
    h = LogHistogram(lo=1e-12, hi=1e3, rel=1e-3, columns=2)
    for s in _chunks(len(x), 700):
        h.add(x[s])
    exact = np.quantile(x, p, axis=0, method='inverted_cdf')
    assert h.quantile(p) == pytest.approx(exact, rel=1.1e-3)


def test_envelope_covers_every_sample_in_bounded_memory():
    rng = np.random.default_rng(1)
    t = np.arange(100_000) * 1e-3
    x = rng.normal(size=(len(t), 2))
    x[54_321, 1] = 40.0  # a one-sample spike must survive decimation
    env = Envelope(2, max_points=300)
    for s in _chunks(len(t), 3333):
        env.add(t[s], x[s])
    tb, lo, hi = env.series()
    assert len(tb) <= 2 * 300 + 1
    k = np.searchsorted(tb, t, side='right') - 1
    assert np.all(lo[k] <= x) and np.all(x <= hi[k])
    assert hi[:, 1].max() == 40.0 and lo.min() == x.min()


def test_timing_finds_rate_gaps_and_jitter():
    rng = np.random.default_rng(2)
    jitter_ns = rng.normal(0, 20_000, 10_000).astype(np.int64)  # σ = 20 µs
    stamps = T0_NS + np.arange(10_000, dtype=np.int64) * 1_000_000 + jitter_ns
    gap = (stamps >= stamps[3000]) & (stamps < stamps[3040])  # 40 ticks lost after tick 2999
    stamps = stamps[~gap]
    timing = TimingStats(T0_NS)
    for s in _chunks(len(stamps), 997):
        timing.update(stamps[s])
    r = timing.result()
    dt = np.diff(stamps) * 1e-9
    assert r['period_ms'] == pytest.approx(1.0, abs=2e-3)
    assert r['rate_hz'] == pytest.approx((len(stamps) - 1) / (stamps[-1] - stamps[0]) * 1e9)
    expected = np.quantile(np.abs(dt - np.median(dt)), 0.99, method='inverted_cdf') * 1e6
    assert r['jitter_us']['p99'] == pytest.approx(expected, abs=0.5)
    (g,) = r['gaps']
    assert g['start_ms'] == pytest.approx((stamps[2999] - T0_NS) * 1e-6)
    assert g['duration_ms'] == pytest.approx((stamps[3000] - stamps[2999]) * 1e-6)
    assert g['missed_ticks'] == 40 and r['missed_ticks'] == 40 and r['gap_count'] == 1


def test_timing_lists_a_bounded_number_of_gaps():
    stamps = T0_NS + np.cumsum(np.tile([1_000_000] * 9 + [5_000_000], 3000)).astype(np.int64)
    timing = TimingStats(T0_NS, max_gaps=100)
    for s in _chunks(len(stamps), 5000):
        timing.update(stamps[s])
    r = timing.result()
    assert r['gap_count'] == 3000
    assert r['missed_ticks'] == 4 * r['gap_count']
    assert len(r['gaps']) == 100


def test_tracking_error_interpolates_joint_states_at_reference_stamps():
    """q(t) is linear, sampled half a period off the reference: the error is exact."""
    t_ref = T0_NS + np.arange(5000, dtype=np.int64) * 1_000_000
    t_js = t_ref[:-1] + 500_000
    slope = np.array([0.3, -1.0])
    offset = np.array([1e-3, -2e-4])
    q_d = ((t_ref - T0_NS) * 1e-9)[:, None] * slope + offset
    q = ((t_js - T0_NS) * 1e-9)[:, None] * slope
    q[2000:2010] += [0.0, 0.01]  # a disturbance of 10 samples on joint 2
    tracking = TrackingStats(('j1', 'j2'), T0_NS)
    for a, b in zip(_chunks(len(t_ref), 1234), _chunks(len(t_js), 1234)):
        tracking.update(t_ref[a], q_d[a], t_js[b], q[b])
    r = tracking.result()
    assert r['unaligned'] == 2  # before the first and after the last joint state
    assert r['joints']['j1']['rms'] == pytest.approx(1e-3, rel=1e-9)
    assert r['joints']['j1']['max'] == pytest.approx(1e-3, rel=1e-9)
    assert r['joints']['j1']['p99'] == pytest.approx(1e-3, rel=1e-3)
    assert r['joints']['j2']['max'] == pytest.approx(0.01 + 2e-4, rel=1e-6)
    assert r['joints']['j2']['max_at_s'] == pytest.approx(2.001, abs=1.1e-3)
    assert r['joints']['j1']['final'] == pytest.approx(1e-3, rel=1e-9)  # the last error
    assert r['joints']['j2']['final'] == pytest.approx(-2e-4, rel=1e-6)
    # the position plot's series: desired and measured, bucket by bucket, differ by the error
    t, d_lo, d_hi = tracking.desired.series()
    t_m, m_lo, m_hi = tracking.measured.series()
    np.testing.assert_array_equal(t, t_m)
    np.testing.assert_allclose((d_lo - m_lo)[:, 0], 1e-3, atol=1e-9)
    assert d_lo[:, 0].min() == pytest.approx(q_d[1:-1, 0].min(), abs=1e-9)
    assert d_hi[:, 0].max() == pytest.approx(q_d[1:-1, 0].max(), abs=1e-9)


def test_tracking_skips_references_inside_a_joint_state_gap():
    t = T0_NS + np.arange(1000, dtype=np.int64) * 1_000_000
    keep = (t < t[400]) | (t >= t[450])
    tracking = TrackingStats(('j',), T0_NS)
    tracking.update(t, np.ones((1000, 1)), t[keep], np.where(np.arange(1000) < 425, 1.0, 0.0)[
        keep, None])
    r = tracking.result()
    assert r['unaligned'] == 50 and r['joints']['j']['max'] == pytest.approx(1.0)
    assert r['joints']['j']['samples'] == 950


def test_saturation_share_runs_and_unsafe_commands():
    limits = np.array([10.0, 2.0])
    u = np.zeros((3000, 2))
    u[1000:1250, 0] = -10.0  # a saturated stretch of 250 ticks across chunk boundaries
    u[2000, 1] = np.nan
    u[2100, 1] = 2.5
    sat = SaturationStats(('a', 'b'), limits, T0_NS)
    stamps = T0_NS + np.arange(3000, dtype=np.int64) * 1_000_000
    for s in _chunks(3000, 97):
        sat.update(stamps[s], u[s])
    r = sat.result()
    assert r['joints']['a']['share'] == pytest.approx(250 / 3000)
    assert r['joints']['a']['longest_run'] == 250
    assert r['joints']['b'] == {'share': pytest.approx(1 / 3000), 'at_limit': 1,
                                'longest_run': 1, 'non_finite': 1, 'over_limit': 1,
                                'max_abs': 2.5, 'limit': 2.0}
    assert [e['time_s'] for e in r['events']] == pytest.approx([2.0, 2.1])


def test_savgol_derivative_is_exact_on_a_quadratic():
    x = 3.0 + 2.0 * np.arange(-5, 6) + 0.5 * np.arange(-5, 6) ** 2
    assert savgol_coefficients(11, 2, 1) @ x == pytest.approx(2.0)
    assert savgol_coefficients(11, 2, 0) @ x == pytest.approx(3.0)


def _residual(urdf, payload, chunk=700, duration=4.0):
    model = RobotModel.from_urdf_file(urdf)
    run = make_run(urdf, model.joint_names, model.effort_limits, duration=duration,
                   payload=payload)
    stats = ResidualStats(model, last_link(model), T0_NS)
    for s in _chunks(len(run.stamps), chunk):
        stats.update(run.stamps[s], run.q[s], run.qd[s], run.tau[s])
    return stats.result(), run


@pytest.mark.parametrize('urdf', ['arm', 'ur5'])
def test_payload_estimated_from_pinocchio_efforts(urdf):
    path = default_urdf_path() if urdf == 'arm' else robot_data_urdf(
        'ur_description/urdf/ur5_robot.urdf')
    free, _ = _residual(path, 0.0)
    loaded, run = _residual(path, 2.0)
    assert abs(free['payload_kg']) < 0.02
    assert loaded['payload_kg'] == pytest.approx(2.0, rel=0.05)
    scale = np.sqrt(np.mean(run.tau ** 2, axis=0))
    for name, j in free['joints'].items():
        assert j['rms'] < 2e-3 * max(scale.max(), 1.0), name
    worst = max(j['rms'] for j in loaded['joints'].values())
    assert worst > 10 * max(j['rms'] for j in free['joints'].values())
    assert all(j['rms_after_payload'] < 0.05 * worst for j in loaded['joints'].values())


def test_residual_skips_windows_across_gaps_and_nan():
    model = RobotModel.from_urdf_file(default_urdf_path())
    run = make_run(default_urdf_path(), model.joint_names, model.effort_limits, duration=2.0)
    keep = np.ones(len(run.stamps), bool)
    keep[800:900] = False
    tau = run.tau.copy()
    tau[1500] = np.nan
    stats = ResidualStats(model, last_link(model), T0_NS)
    for s in _chunks(len(run.stamps), 333):
        k = keep[s]
        stats.update(run.stamps[s][k], run.q[s][k], run.qd[s][k], tau[s][k])
    r = stats.result()
    w = r['window']
    assert r['samples'] == len(run.stamps) - 100 - 2 * (w - 1) - w
    assert abs(r['payload_kg']) < 0.02
