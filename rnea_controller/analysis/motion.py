"""Did the run move? The checks that refuse to pass an idle run (issue 14).

Bounds on the tracking error alone pass a run in which nothing happened: a reference that never
moves is tracked perfectly by an arm at rest. So a run fails, whatever the thresholds, when

- no motion was commanded: the reference's range (max - min) is below `MIN_REFERENCE_RANGE`
  on every joint; or
- the arm did not follow a joint's moving reference: its measured range is below
  `MIN_FOLLOW_FRACTION` of the reference's, or its tracking error, once shifted by the
  effective delay, has an RMS above `MAX_ERROR_FRACTION` of the reference's standard deviation
  (the arm explains less than 75 % of the reference's variance).

A bag of joint states alone (no reference: `recording_failures`) fails when no joint's measured
range reaches `MIN_REFERENCE_RANGE`: nothing moved, nothing to identify or validate.
"""
import math

import numpy as np

MIN_REFERENCE_RANGE = 0.01  # [rad or m]
MIN_FOLLOW_FRACTION = 0.5
MAX_ERROR_FRACTION = 0.5


class RangeStats:
    """Running min, max, mean and standard deviation of each column of a series."""

    def __init__(self, columns):
        self.lo = np.full(columns, np.inf)
        self.hi = np.full(columns, -np.inf)
        self.count = np.zeros(columns, np.int64)
        self.sum = np.zeros(columns)
        self.sum_sq = np.zeros(columns)

    def update(self, x):
        """Add the finite values of x (N, columns)."""
        ok = np.isfinite(x)
        if not len(x):
            return
        self.lo = np.fmin(self.lo, np.where(ok, x, np.inf).min(axis=0))
        self.hi = np.fmax(self.hi, np.where(ok, x, -np.inf).max(axis=0))
        x0 = np.where(ok, x, 0.0)
        self.count += ok.sum(axis=0)
        self.sum += x0.sum(axis=0)
        self.sum_sq += (x0 ** 2).sum(axis=0)

    def result(self):
        """(range, standard deviation) per column; NaN where a column had no value."""
        n = np.maximum(self.count, 1)
        var = np.maximum(self.sum_sq / n - (self.sum / n) ** 2, 0.0)
        empty = self.count == 0
        return np.where(empty, np.nan, self.hi - self.lo), np.where(empty, np.nan, np.sqrt(var))


def motion_report(names, reference, measured, delay):
    """{joint: {reference_range, reference_std, measured_range, rms_shifted}} [rad]."""
    ref_range, ref_std = reference.result()
    q_range, _ = measured.result()
    return {name: {'reference_range': float(ref_range[j]), 'reference_std': float(ref_std[j]),
                   'measured_range': float(q_range[j]),
                   'rms_shifted': delay['joints'][name]['rms_shifted']}
            for j, name in enumerate(names)}


def motion_failures(motion):
    """Failure messages of an idle run (see the module docstring); [] when it moved."""
    moving = {name: m for name, m in motion.items()
              if not math.isnan(m['reference_range'])
              and m['reference_range'] >= MIN_REFERENCE_RANGE}
    if not moving:
        largest = max((m['reference_range'] for m in motion.values()
                       if not math.isnan(m['reference_range'])), default=0.0)
        return [f'no motion commanded: the reference moves {largest * 1e3:.3g} mrad at most '
                f'(needs {MIN_REFERENCE_RANGE * 1e3:g} mrad on one joint); nothing to validate']
    failures = []
    for name, m in moving.items():
        ratio = m['measured_range'] / m['reference_range']
        if not ratio >= MIN_FOLLOW_FRACTION:
            failures.append(f"{name}: the arm does not follow the reference: it moves "
                            f"{m['measured_range'] * 1e3:.3g} mrad, the reference "
                            f"{m['reference_range'] * 1e3:.3g} mrad ({ratio * 100:.0f} % < "
                            f'{MIN_FOLLOW_FRACTION * 100:.0f} %)')
        elif m['rms_shifted'] is not None and (
                m['rms_shifted'] > MAX_ERROR_FRACTION * m['reference_std']):
            failures.append(f"{name}: the arm does not follow the reference: tracking error "
                            f"RMS {m['rms_shifted'] * 1e3:.3g} mrad (once shifted by the "
                            f"effective delay) > {MAX_ERROR_FRACTION:g} × the reference's "
                            f"standard deviation {m['reference_std'] * 1e3:.3g} mrad")
    return failures


def recording_failures(measured_range):
    """Failure messages of a recording of joint states alone that did not move; [] when one
    joint's measured range {joint: range [rad or m]} reaches `MIN_REFERENCE_RANGE`."""
    ranges = [r for r in measured_range.values() if r is not None and not math.isnan(r)]
    if max(ranges, default=0.0) >= MIN_REFERENCE_RANGE:
        return []
    return [f'no motion recorded: the joints move {max(ranges, default=0.0) * 1e3:.3g} mrad at '
            f'most (needs {MIN_REFERENCE_RANGE * 1e3:g} mrad on one joint); nothing to validate']
