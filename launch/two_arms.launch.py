"""Two simulated arms side by side, each with its controller, under namespaces arm1 and arm2.

    ros2 launch rnea_controller two_arms.launch.py
    ros2 run rnea_controller rnea-send-trajectory --demo --wait-active --ros-args -r __ns:=/arm2

Every topic, service and node of one arm is under its namespace (/arm1/joint_states,
/arm1/effort_controller/commands, /arm1/rnea_controller/get_state, ...); /diagnostics is shared.
Each is controller.launch.py with use_sim:=true.
"""
from launch import LaunchDescription
from launch.actions import GroupAction, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

NAMESPACES = ('arm1', 'arm2')


def generate_launch_description():
    controller = PathJoinSubstitution(
        [FindPackageShare('rnea_controller'), 'launch', 'controller.launch.py'])
    return LaunchDescription([GroupAction(scoped=True, actions=[IncludeLaunchDescription(
        PythonLaunchDescriptionSource(controller), launch_arguments={
            'namespace': namespace, 'use_sim': 'true', 'realtime_priority': '0'}.items())])
        for namespace in NAMESPACES])
