"""The demo on a ROS 2 machine: simulated arm, controller, recorder and the demo motion.

    ros2 launch rnea_controller demo.launch.py [payload:=2.0] [law:=feedforward_pd]
        [duration:=10.0] [output:=demo_output/bag]

Starts `sim` (MuJoCo arm, with `payload` kg at its last link that the controller does not
know), `controller` (`control_law` = `law`), `ros2 bag record -s mcap` of the topics the
validator reads, and after the controller is up sends the demo motion (`send_trajectory --demo`).
Everything stops `duration` seconds after the motion was sent; then validate the bag:

    ros2 run rnea_controller validate demo_output/bag

(`rnea-demo`, i.e. `./run demo`, does all of this plus the validation in one command, with or
without a ROS 2 installation.)
"""
from launch import LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    ExecuteProcess,
    LogInfo,
    RegisterEventHandler,
    TimerAction,
)
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import Node

TOPICS = ['/joint_states', '/effort_controller/commands', '/rnea_controller/reference',
          '/rnea_controller/joint_trajectory', '/diagnostics', '/robot_description']
STARTUP = 5.0  # [s] before the motion is sent: the nodes start and the controller holds the arm


def generate_launch_description():
    payload = LaunchConfiguration('payload')
    law = LaunchConfiguration('law')
    duration = LaunchConfiguration('duration')
    output = LaunchConfiguration('output')
    sender = Node(package='rnea_controller', executable='rnea-send-trajectory', output='screen',
                  arguments=['--demo', '--duration',
                             PythonExpression([duration, ' - 1.5'])])
    return LaunchDescription([
        DeclareLaunchArgument('payload', default_value='0.0',
                              description='[kg] at the last link, unknown to the controller'),
        DeclareLaunchArgument('law', default_value='computed_torque',
                              description='computed_torque or feedforward_pd'),
        DeclareLaunchArgument('duration', default_value='10.0', description='[s] of motion'),
        DeclareLaunchArgument('output', default_value='demo_output/bag',
                              description='bag directory (must not exist)'),
        Node(package='rnea_controller', executable='rnea-sim', name='rnea_sim', output='screen',
             parameters=[{'payload.mass': payload}]),
        Node(package='rnea_controller', executable='rnea-controller', name='rnea_controller',
             output='screen', parameters=[{'control_law': law}]),
        ExecuteProcess(cmd=['ros2', 'bag', 'record', '-s', 'mcap', '-o', output, *TOPICS],
                       output='screen'),
        TimerAction(period=STARTUP, actions=[sender]),
        RegisterEventHandler(OnProcessExit(target_action=sender, on_exit=[
            TimerAction(period=duration, actions=[
                LogInfo(msg=['demo done; validate with: ros2 run rnea_controller validate ',
                             output]),
                EmitEvent(event=Shutdown(reason='demo finished'))])])),
    ])
