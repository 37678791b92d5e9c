"""Checks of numbers shared by the core: finite values, with the place of the first bad one.

The entry points of the core (the model, RNEA, trajectories) check their inputs with these, so
that the messages read the same everywhere, e.g. ``qd has a non-finite value nan at index 2`` or
``gravity must be 3 finite numbers, got (0, 0)``.
"""
import numpy as np

from rnea_controller.errors import DimensionError, RneaControllerError


def first_non_finite(array: np.ndarray) -> tuple | None:
    """Index of the first NaN or ±inf of `array` (C order), or None when all are finite.

    >>> first_non_finite(np.array([[0.0, 1.0], [np.inf, np.nan]]))
    (1, 0)
    """
    finite = np.isfinite(array)
    if finite.all():
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmin(finite)), finite.shape))


def require_finite(values: object, name: str,
                   error: type[RneaControllerError] = DimensionError) -> np.ndarray:
    """`values` as a float array; raise `error` naming the first non-finite value and its index.

    >>> require_finite([0.0, 1.0, float('nan')], 'qd')
    Traceback (most recent call last):
    ...
    rnea_controller.errors.DimensionError: qd has a non-finite value nan at index 2
    """
    array = np.asarray(values, dtype=float)
    bad = first_non_finite(array)
    if bad is not None:
        place = bad[0] if len(bad) == 1 else bad
        raise error(f'{name} has a non-finite value {array[bad]} at index {place}')
    return array


def finite_vector(values: object, size: int, name: str,
                  error: type[RneaControllerError] = DimensionError) -> np.ndarray:
    """`values` as a (size,) float array, or raise `error`: '{name} must be {size} finite numbers'.

    >>> finite_vector((0, 0), 3, 'gravity')
    Traceback (most recent call last):
    ...
    rnea_controller.errors.DimensionError: gravity must be 3 finite numbers, got (0, 0)
    """
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        array = np.empty(0)
    if array.shape != (size,) or first_non_finite(array) is not None:
        raise error(f'{name} must be {size} finite numbers, got {values!r}')
    return array
