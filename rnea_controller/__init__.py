"""rnea_controller: computed-torque control with the recursive Newton-Euler algorithm.

The core (this namespace) is plain Python + numpy and never imports rclpy; the ROS 2 node
(`rnea_controller.ros.node`), the simulator (`rnea_controller.sim.node`) and the tools import it.
"""
from rnea_controller.dynamics.model import default_urdf_path, RobotModel
from rnea_controller.dynamics.rnea import (
    bias_torques,
    gravity_torques,
    mass_matrix,
    rnea,
    rnea_reference,
)
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
