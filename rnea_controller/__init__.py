"""rnea_controller: computed-torque control with the recursive Newton-Euler algorithm.

The core (this namespace) is plain Python + numpy and never imports rclpy; the ROS 2 node
(`rnea_controller.ros.node`), the simulator (`rnea_controller.sim.node`) and the tools import it.
The model and the RNEA functions are imported at their first use (PEP 562): importing any of
the package's modules does not import numba (~0.3 s), so that the node starts DDS before it
(ros/main.py).
"""
import importlib

from rnea_controller.errors import (
    BagError,
    DescriptionError,
    DescriptionWarning,
    DhError,
    DimensionError,
    ModelError,
    ParameterError,
    RneaControllerError,
    TrajectoryError,
    UrdfError,
)

_LAZY = {'RobotModel': 'rnea_controller.dynamics.model',
         'default_urdf_path': 'rnea_controller.dynamics.model',
         **dict.fromkeys(('bias_torques', 'gravity_torques', 'mass_matrix', 'rnea',
                          'rnea_reference'), 'rnea_controller.dynamics.rnea')}


def __getattr__(name):
    """The model and RNEA names, imported at their first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'rnea_controller' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = [
    'BagError',
    'DescriptionError',
    'DescriptionWarning',
    'DhError',
    'DimensionError',
    'ModelError',
    'ParameterError',
    'RneaControllerError',
    'RobotModel',
    'TrajectoryError',
    'UrdfError',
    'bias_torques',
    'default_urdf_path',
    'gravity_torques',
    'mass_matrix',
    'rnea',
    'rnea_reference',
]
