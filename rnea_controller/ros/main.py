"""Console script `rnea-controller`: the controller node (node.py) in its executor.

Command-line options come before `--ros-args` (`--urdf FILE`, a URDF or .xacro file, and
realtime.py's scheduling options); ROS arguments after it. Start-up: an out-of-range parameter
or an unreadable --urdf ends the program with one line naming it (exit code 1). Ctrl-C or
SIGTERM: the final command, then exit 0. Without a DDS configuration of the user's, Fast DDS
announces the node quicker (`quick_discovery`).
"""
import argparse
import gc
import os
from pathlib import Path
import sys

import rclpy
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args

from rnea_controller.description_file import read_description
from rnea_controller.errors import ParameterError, UrdfError
from rnea_controller.ros import realtime
from rnea_controller.ros.node import ControllerNode
from rnea_controller.warm import seed_user_cache


def _options(args):
    parser = argparse.ArgumentParser(prog='rnea-controller',
                                     description=ControllerNode.__doc__.split(' (')[0])
    realtime.add_arguments(parser)
    parser.add_argument('--urdf', metavar='FILE',
                        help='read robot_description from this URDF or .xacro file (instead '
                             'of the parameter or topic)')
    return parser.parse_args(remove_ros_args(sys.argv if args is None else args)[1:])


DDS_SETTINGS = ('FASTDDS_DEFAULT_PROFILES_FILE', 'FASTRTPS_DEFAULT_PROFILES_FILE',
                'ROS_DISCOVERY_SERVER', 'FASTDDS_ENVIRONMENT_FILE')
# the profiles Fast DDS loads by itself from the working directory
DDS_FILES = ('DEFAULT_FASTDDS_PROFILES.xml', 'DEFAULT_FASTRTPS_PROFILES.xml')


def quick_discovery():
    """Fast DDS (Kilted's default RMW) with more, quicker initial announcements
    (fast_discovery.xml), unless the user configured DDS: states reach a new node in ~0.1 s,
    not 0.1-3 s (issue 26)."""
    if os.environ.get('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp') != 'rmw_fastrtps_cpp':
        return
    if not any(os.environ.get(name) for name in DDS_SETTINGS) and not any(
            Path(name).is_file() for name in DDS_FILES):
        os.environ['FASTDDS_DEFAULT_PROFILES_FILE'] = str(
            Path(__file__).with_name('fast_discovery.xml'))


def main(args=None):
    """Console script `rnea-controller` (ROS arguments after --ros-args)."""
    options = _options(args)
    overrides = []
    if options.urdf:
        try:
            text = read_description(options.urdf)
        except UrdfError as error:
            sys.exit(f'rnea-controller: --urdf: {error}')
        overrides.append(Parameter('robot_description', value=text))
    if options.cpu_affinity:  # before rclpy.init: the DDS threads inherit it
        realtime.set_cpu_affinity(options.cpu_affinity)
    quick_discovery()
    seed_user_cache()  # a read-only install: its compiled kernels into the user's cache (warm.py)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    # Ctrl-C and SIGTERM set a flag, seen between callbacks, from now on: under ros2 launch a
    # terminal's Ctrl-C comes twice (to the group, and forwarded), and neither may cut short
    # the activation or the final command
    realtime.install_signal_handlers()
    try:
        node = ControllerNode(parameter_overrides=overrides)
    except ParameterError as error:
        rclpy.try_shutdown()
        sys.exit(f'rnea-controller: {error}')  # exit code 1, the reason on stderr
    executor = realtime.make_executor(options.executor)
    executor.add_node(node)
    try:
        node.autostart()
        realtime.apply_realtime_options(options, node.get_logger().info)  # warm: loop thread
        gc.freeze()  # objects made so far are never scanned again: shorter GC pauses in ticks
        while rclpy.ok() and not realtime.STOP:  # spin_once returns: Ctrl-C seen each tick
            executor.spin_once(timeout_sec=0.1)
            node.after_spin()
    finally:
        node.finish()
        executor.shutdown()  # the EventsExecutor's C++ thread: joined, else std::terminate (-6)
        node.release_helpers()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
