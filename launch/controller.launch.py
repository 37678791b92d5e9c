"""The controller next to an arm's ros2_control stack (or, with use_sim:=true, the simulated arm).

    ros2 launch rnea_controller controller.launch.py [urdf:=/path/arm.urdf]
        [params_file:=/path/controller.yaml] [namespace:=arm1] [use_sim:=true]

`urdf` (default: this package's share/rnea_controller/urdf/arm.urdf) becomes the controller's
`robot_description` parameter; `params_file` (default: share/rnea_controller/config/
controller.yaml) holds every other parameter. With `use_sim`, `sim` (MuJoCo) plays the arm.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import Command, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

PACKAGE = 'rnea_controller'


def generate_launch_description():
    share = FindPackageShare(PACKAGE)
    urdf = LaunchConfiguration('urdf')
    namespace = LaunchConfiguration('namespace')
    description = ParameterValue(Command(['cat ', urdf]), value_type=str)
    return LaunchDescription([
        DeclareLaunchArgument('urdf', default_value=PathJoinSubstitution(
            [share, 'urdf', 'arm.urdf']), description='URDF file of the arm'),
        DeclareLaunchArgument('params_file', default_value=PathJoinSubstitution(
            [share, 'config', 'controller.yaml']), description='controller parameters'),
        DeclareLaunchArgument('namespace', default_value='', description='ROS namespace'),
        DeclareLaunchArgument('use_sim', default_value='false',
                              description='also start the simulated arm (sim)'),
        Node(package=PACKAGE, executable='rnea-controller', name='rnea_controller',
             namespace=namespace, output='screen',
             parameters=[LaunchConfiguration('params_file'), {'robot_description': description}]),
        Node(package=PACKAGE, executable='rnea-sim', name='rnea_sim', namespace=namespace,
             output='screen', parameters=[{'urdf_file': urdf}],
             condition=IfCondition(LaunchConfiguration('use_sim'))),
    ])
