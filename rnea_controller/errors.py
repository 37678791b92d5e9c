"""The package's exceptions: one base, one subclass per kind of bad input.

Messages name what is wrong and where, with the offending values, e.g.
``q has shape (5,), but the model has 6 joints`` or
``joint 'elbow' (line 42): axis (0, 0, 0) has zero length``.

A robot description comes from a URDF or a Denavit-Hartenberg table: both errors are
`DescriptionError`s, so ``except DescriptionError`` catches either; the checks the two sources
share (masses, inertias, limits, the tree) raise the error of the source being read.
"""


class RneaControllerError(Exception):
    """Base class of every error this package raises on purpose."""


class DescriptionError(RneaControllerError, ValueError):
    """A robot description cannot be turned into a model: syntax, tree, inertial data, limits."""


class UrdfError(DescriptionError):
    """The URDF cannot be turned into a model; the message names the element and its line."""


class DhError(DescriptionError):
    """The Denavit-Hartenberg table cannot be turned into a model; the message names the row."""


class DescriptionWarning(UserWarning):
    """A robot description loads, but part of it is implausible: an inertia that no rigid body
    has (triangle inequality), or an impossible one on a link that never moves."""


class ModelError(RneaControllerError, ValueError):
    """A request on a model is invalid: unknown link or joint, bad payload."""


class DimensionError(RneaControllerError, ValueError):
    """An array has the wrong shape for the model, or holds non-finite values."""


class TrajectoryError(RneaControllerError, ValueError):
    """A trajectory is refused (joint names, timing, lengths, limits)."""


class ParameterError(RneaControllerError, ValueError):
    """A controller parameter (gain, limit, law, payload, gravity) is invalid."""


class BagError(RneaControllerError, ValueError):
    """A bag cannot be validated: missing topic, empty, corrupt, or not matching the model."""
