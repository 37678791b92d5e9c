"""Timing statistics of a fixed-rate loop (ROS-free): rate, period jitter, compute time, misses.

`LoopStats.record(t_start, t_end, period)` is called once per tick (a few array writes);
`summary(period)` summarises the ticks since its previous call in one compiled pass and numpy's
percentiles, so that the node's once-a-second diagnostics cost tens of microseconds, not a
control period (numba's own np.percentile took 7 s of the install step's compiling).

Definitions, over the ticks of one summary: period_k = start_k - start_(k-1); rate = number
of periods / Σ period_k [Hz]; jitter p99 = 99th percentile of |period_k - T| [µs]; compute
p50/p99 = percentiles of t_end - t_start [µs]; a period of about j·T (rounded) counts j - 1
missed ticks; an overrun is a tick whose compute time exceeds T.
"""
import math

from numba import njit
import numpy as np


class LoopStats:
    """Ring buffer of tick start times and compute times [s], summarised once a second."""

    def __init__(self, size: int = 8192) -> None:
        self.start = np.zeros(size)
        self.compute = np.zeros(size)
        self.count = 0
        self.overruns = 0
        self.missed = 0
        self._reported = 0
        _summary(self.start, self.compute, 0, 2, 1.0)  # compile (or load the cache) now

    def record(self, t_start: float, t_end: float, period: float) -> None:
        """One tick: started at t_start, done at t_end [s] (any one clock), period T [s]."""
        i = self.count % len(self.start)
        self.start[i] = t_start
        self.compute[i] = t_end - t_start
        self.count += 1
        self.overruns += t_end - t_start > period

    def summary(self, period: float) -> tuple[float, float, float, float]:
        """(rate [Hz], jitter p99, compute p50 and p99 [µs]) of the ticks since the last call.

        Also adds the missed ticks of those periods to `missed`. NaN figures (and rate 0) when
        fewer than two ticks came.
        """
        # the ticks since the last summary, and the one before them (their first period's start)
        ticks = min(self.count - self._reported + 1, self.count, len(self.start))
        self._reported = self.count
        if ticks < 3:
            return 0.0, math.nan, math.nan, math.nan
        rate, deviation, compute, missed = _summary(self.start, self.compute,
                                                    self.count - ticks, self.count, period)
        self.missed += missed
        jitter = np.percentile(deviation, 99.0)
        p50, p99 = np.percentile(compute, (50.0, 99.0))
        return rate, float(jitter) * 1e6, float(p50) * 1e6, float(p99) * 1e6


@njit(cache=True)
def _summary(start, compute, first, end, period):
    """(rate [Hz], |period - T| [s], compute times [s], missed) of ring entries first..end-1."""
    size = start.shape[0]
    m = end - first - 1
    deviation, compute_time = np.empty(m), np.empty(m)
    total, missed = 0.0, 0
    previous = start[first % size]
    for k in range(m):
        i = (first + 1 + k) % size
        p = start[i] - previous
        previous = start[i]
        total += p
        deviation[k] = abs(p - period)
        compute_time[k] = compute[i]
        missed += max(int(np.round(p / period)) - 1, 0)
    rate = m / max(total, 1e-9)
    return rate, deviation, compute_time, missed
