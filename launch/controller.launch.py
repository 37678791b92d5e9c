"""The controller next to an arm's ros2_control stack (or, with use_sim:=true, the simulated arm).

    ros2 launch rnea_controller controller.launch.py [robot:=fr3|ur5e|gen3|xarm7|arm]
        [urdf:=/path/arm.urdf|/path/arm.urdf.xacro] [params_file:=/path/more.yaml]
        [namespace:=arm1] [use_sim:=true] [realtime_priority:=45] [cpu_affinity:='2 3']

The description: `urdf` empty (the default) → the controller reads the `robot_description`
topic (transient-local), as robot_state_publisher publishes it on a real arm (the simulator
publishes it too); a file ending in .xacro → run through `xacro`; any other file → read as URDF.
Parameters, later files overriding earlier: share/rnea_controller/config/controller.yaml,
config/robots/<robot>.yaml (the preset), then `params_file`. `namespace` puts every topic,
service and node of this arm under it (the package's names are relative).

Real time: the control loop runs at SCHED_FIFO `realtime_priority` (default 45: below
controller_manager's 50, so that ros2_control's read → update → write cycle, which feeds the
hardware with hard deadlines, always preempts us; a command of ours delayed by it is applied one
cycle later as the last one, while a late hardware cycle can stop a real arm; 0: normal
scheduling) on the CPUs `cpu_affinity` (space-separated; empty: not bound).
"""
from pathlib import Path

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from rnea_controller.description_file import read_description

PACKAGE = 'rnea_controller'
ARGUMENTS = {
    'robot': ('', 'preset in config/robots/ (fr3, ur5e, gen3, xarm7, arm); empty: none'),
    'urdf': ('', 'URDF or .xacro file; empty: the robot_description topic'),
    'params_file': ('', 'more controller parameters (YAML, /**: ros__parameters:)'),
    'namespace': ('', 'ROS namespace of this arm (topics, services, nodes)'),
    'use_sim': ('false', 'also start the simulated arm (rnea-sim)'),
    'realtime_priority': ('45', "SCHED_FIFO priority of the loop, below controller_manager's "
                                '50; 0: normal scheduling'),
    'cpu_affinity': ('', 'CPU cores for the controller, e.g. "2 3"; empty: not bound'),
}


def description(urdf):
    """robot_description parameter value from a file: xacro's output or the URDF's text
    (rnea_controller.description_file, which the programs' --urdf use too); None: the topic."""
    return read_description(urdf) if urdf else None


def parameter_files(context, share):
    """controller.yaml, then the robot preset, then the user's file."""
    files = [str(Path(share) / 'config' / 'controller.yaml')]
    robot = LaunchConfiguration('robot').perform(context)
    if robot:
        preset = Path(share) / 'config' / 'robots' / f'{robot}.yaml'
        if not preset.is_file():
            known = sorted(p.stem for p in preset.parent.glob('*.yaml'))
            raise RuntimeError(f'robot:={robot}: no preset {preset} (known: {known})')
        files.append(str(preset))
    extra = LaunchConfiguration('params_file').perform(context)
    return files + ([extra] if extra else [])


def realtime_arguments(context):
    """--realtime-priority N [--cpu-affinity CPU ...] for rnea-controller."""
    priority = LaunchConfiguration('realtime_priority').perform(context)
    cpus = LaunchConfiguration('cpu_affinity').perform(context).replace(',', ' ').split()
    return ['--realtime-priority', priority] + (['--cpu-affinity', *cpus] if cpus else [])


def nodes(context):
    share = FindPackageShare(PACKAGE).perform(context)
    namespace = LaunchConfiguration('namespace').perform(context)
    text = description(LaunchConfiguration('urdf').perform(context))
    given = {'robot_description': text} if text is not None else {}
    actions = [Node(package=PACKAGE, executable='rnea-controller', name='rnea_controller',
                    namespace=namespace, output='screen', arguments=realtime_arguments(context),
                    parameters=[*parameter_files(context, share), given])]
    if LaunchConfiguration('use_sim').perform(context).lower() in ('true', '1', 'yes'):
        actions.append(Node(package=PACKAGE, executable='rnea-sim', name='rnea_sim',
                            namespace=namespace, output='screen', parameters=[given]))
    return actions


def generate_launch_description():
    return LaunchDescription([
        *(DeclareLaunchArgument(name, default_value=default, description=text)
          for name, (default, text) in ARGUMENTS.items()),
        OpaqueFunction(function=nodes),
    ])
