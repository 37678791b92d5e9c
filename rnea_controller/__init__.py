"""rnea_controller: computed-torque control with the recursive Newton-Euler algorithm.

The core (this namespace) is plain Python + numpy and never imports rclpy; the ROS 2 node
(`rnea_controller.node`), the simulator (`rnea_controller.sim`) and the tools import it.
"""
from rnea_controller.errors import (
    BagError,
    DimensionError,
    ModelError,
    ParameterError,
    RneaControllerError,
    TrajectoryError,
    UrdfError,
)
from rnea_controller.model import default_urdf_path, RobotModel
from rnea_controller.rnea import bias_torques, gravity_torques, mass_matrix, rnea, rnea_reference

__all__ = [
    'BagError',
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
