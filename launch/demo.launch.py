"""The demo on a ROS 2 machine: simulated arm, controller, recorder, demo motion and verdict.

    ros2 launch rnea_controller demo.launch.py [payload:=2.0] [law:=feedforward_pd]
        [duration:=10.0] [output:=demo_output/run1] [start_controller:=false]

1. starts `rnea-sim` (MuJoCo arm, with `payload` kg at its last link that the controller does
   not know), `rnea-controller` (`control_law` = `law`) and a recorder into `<output>/bag`
   (`ros2 bag record -s mcap` where rosbag2 is installed, else rnea_controller.tools.record);
   `output` defaults to demo_output/<date-time>, and an existing bag folder is never reused
   (bag-1, bag-2, ... instead);
2. `rnea-send-trajectory --demo --wait-active --subscribers 2` sends the motion once the
   controller's lifecycle state is active (lifecycle_msgs GetState), not after a fixed delay,
   and once both the controller and the recorder have subscribed to the trajectory topic
   (`ros2 bag record` subscribes to a topic only after it has discovered a publisher of it:
   polling every 100 ms);
3. `duration` seconds later it stops the recorder and runs `rnea-validate` on the bag;
4. ends by itself. The launch exits non-zero (an exception names the step) when the sender
   gives up (no active controller), the simulator or the controller dies during the run, the
   recorder fails, or the validator's verdict is FAIL (e.g. the arm did not follow the motion).

`start_controller:=false` leaves the controller out: the run must then fail.
(`rnea-demo`, i.e. `./run demo`, does the same in one program, without `ros2 launch`.)
"""
import datetime
from pathlib import Path

from launch import LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    ExecuteProcess,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
    TimerAction,
)
from launch.event_handlers import OnProcessExit
from launch.events import matches_action, Shutdown
from launch.events.process import ShutdownProcess
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.substitutions import ExecutableInPackage

PACKAGE = 'rnea_controller'
SETTLE_AFTER = 1.5  # [s] recorded after the motion ends
ARGUMENTS = {
    'payload': ('0.0', '[kg] at the last link, unknown to the controller'),
    'law': ('computed_torque', 'computed_torque or feedforward_pd'),
    'duration': ('10.0', '[s] of motion'),
    'output': ('', 'output folder; empty: demo_output/<date-time>'),
    'start_controller': ('true', 'false: no controller (the run must fail)'),
    'startup_timeout': ('300', '[s] for the controller to become active (numba compiles its '
                               'kernels on the first run of an install: minutes on a busy host)'),
}


class DemoFailed(RuntimeError):  # noqa: N818 - launch prints the message as the reason
    """Raised in an event handler: `ros2 launch` then shuts down and exits with 1."""


def bag_folder(context):
    """<output>/bag, or bag-1, bag-2, ... if taken: a fresh folder for the recorder."""
    from rnea_controller.tools.record import fresh_path
    output = LaunchConfiguration('output').perform(context) or str(
        Path('demo_output') / datetime.datetime.now().strftime('%Y%m%d-%H%M%S'))
    Path(output).mkdir(parents=True, exist_ok=True)
    return fresh_path(Path(output).resolve() / 'bag')


def recorder(bag):
    """`ros2 bag record` where rosbag2 is installed, else our rosbags recorder."""
    from rnea_controller.tools.record import recording_command
    return ExecuteProcess(cmd=recording_command(bag), name='recorder', output='screen',
                          sigterm_timeout='30')


def fail_if(what, run):
    """An on_exit handler: DemoFailed when the process ended with an error (or too early)."""
    def handler(event, context):
        if run['phase'] != 'failed' and (event.returncode != 0 or run['phase'] != 'done'):
            run['phase'] = 'failed'
            raise DemoFailed(f'demo FAILED: {what} exited with code {event.returncode}')
    return handler


def after_motion(recorder_action, motion, run):
    """Sender done: stop the recorder once the motion and the settle time are over."""
    def handler(event, context):
        if run['phase'] == 'failed':
            return None
        if event.returncode != 0:
            run['phase'] = 'failed'
            raise DemoFailed('demo FAILED: the trajectory sender exited with code '
                             f'{event.returncode} (is the controller running and active?)')
        run['phase'] = 'recording'
        return [TimerAction(period=motion + SETTLE_AFTER, actions=[
            OpaqueFunction(function=lambda _: run.update(phase='stopping')),
            EmitEvent(event=ShutdownProcess(process_matcher=matches_action(recorder_action)))])]
    return handler


def validate_when_recorded(bag, run):
    """Recorder done: validate the bag; its verdict ends the launch."""
    def handler(event, context):
        if run['phase'] == 'failed':
            return None
        if event.returncode != 0 or run['phase'] != 'stopping':
            run['phase'] = 'failed'
            raise DemoFailed(f'demo FAILED: the recorder exited with code {event.returncode}')
        run['phase'] = 'validating'
        validator = ExecuteProcess(cmd=[ExecutableInPackage('rnea-validate', PACKAGE), str(bag),
                                        '--no-progress'], name='validator', output='screen')
        return [validator, RegisterEventHandler(OnProcessExit(
            target_action=validator, on_exit=verdict(bag, run)))]
    return handler


def verdict(bag, run):
    def handler(event, context):
        run['phase'] = 'done'
        if event.returncode != 0:
            raise DemoFailed(f'demo FAILED: rnea-validate {bag} exited with code '
                             f'{event.returncode}')
        return [LogInfo(msg=f'demo PASSED; bag and report in {bag.parent}'),
                EmitEvent(event=Shutdown(reason='demo finished'))]
    return handler


def demo(context):
    run = {'phase': 'running'}
    bag = bag_folder(context)
    motion = float(LaunchConfiguration('duration').perform(context))
    arm = [Node(package=PACKAGE, executable='rnea-sim', name='rnea_sim', output='screen',
                parameters=[{'payload.mass': float(LaunchConfiguration('payload').perform(
                    context))}])]
    if LaunchConfiguration('start_controller').perform(context).lower() in ('true', '1'):
        arm.append(Node(package=PACKAGE, executable='rnea-controller', name='rnea_controller',
                        output='screen', arguments=['--realtime-priority', '0'],
                        parameters=[{'control_law': LaunchConfiguration('law')}]))
    record = recorder(bag)
    sender = Node(package=PACKAGE, executable='rnea-send-trajectory', output='screen',
                  arguments=['--demo', '--duration', str(motion), '--wait-active',
                             '--subscribers', '2', '--wait',
                             LaunchConfiguration('startup_timeout').perform(context)])
    watchers = [RegisterEventHandler(OnProcessExit(target_action=action, on_exit=fail_if(
        action.node_executable, run))) for action in arm]
    return [LogInfo(msg=f'demo: recording into {bag}'), *arm, record, sender, *watchers,
            RegisterEventHandler(OnProcessExit(target_action=sender,
                                               on_exit=after_motion(record, motion, run))),
            RegisterEventHandler(OnProcessExit(target_action=record,
                                               on_exit=validate_when_recorded(bag, run)))]


def generate_launch_description():
    return LaunchDescription([
        *(DeclareLaunchArgument(name, default_value=default, description=text)
          for name, (default, text) in ARGUMENTS.items()),
        OpaqueFunction(function=demo),
    ])
