"""LoopStats against numpy's own percentiles and a hand-made schedule with known misses."""
import numpy as np

from rnea_controller.control.loop_stats import LoopStats

T = 1e-3


def run(starts, computes, size=8192):
    stats = LoopStats(size)
    for t, c in zip(starts, computes, strict=True):
        stats.record(t, t + c, T)
    return stats


def test_summary_equals_numpy_on_jittered_ticks():
    rng = np.random.default_rng(3)
    starts = np.cumsum(T + rng.normal(0, 30e-6, 1000))
    computes = rng.uniform(10e-6, 90e-6, 1000)
    rate, jitter, p50, p99 = run(starts, computes).summary(T)
    periods = np.diff(starts)
    assert np.isclose(rate, len(periods) / periods.sum())
    assert np.isclose(jitter, np.percentile(np.abs(periods - T), 99) * 1e6)
    assert np.isclose(p50, np.percentile(computes[1:], 50) * 1e6)
    assert np.isclose(p99, np.percentile(computes[1:], 99) * 1e6)


def test_missed_ticks_overruns_and_ring_wrap():
    starts = np.arange(3000) * T
    starts[1500:] += 2 * T  # two ticks never came
    starts[2500:] += 1 * T  # one more
    computes = np.full(3000, 20e-6)
    computes[[7, 2000]] = 1.5e-3  # two overruns
    stats = run(starts, computes, size=1024)  # the ring wraps: only the newest ticks summarised
    rate, *_ = stats.summary(T)
    assert stats.overruns == 2
    assert stats.missed == 1  # the gap at 2500 is in the newest 1023 periods, 1500 is not
    assert np.isclose(rate, 1023 / (starts[-1] - starts[-1024]))
    assert stats.summary(T)[0] == 0.0  # nothing new since the last summary
