"""Console script `rnea-controller`: the controller node (node.py) in its executor.

Command-line options come before `--ros-args` (`--urdf FILE`, a URDF or .xacro file, and
realtime.py's scheduling options); ROS arguments after it. Start-up: an out-of-range parameter
or an unreadable --urdf ends the program with one line naming it (exit code 1). Ctrl-C or
SIGTERM: the final command, then exit 0. Without a DDS configuration of the user's, Fast DDS
announces the node quicker (`quick_discovery`).

Start-up order (issue 35): numba's own set-up first (warm.prepare_numba: it compiles numba's
runtime with LLVM; after the DDS participant, beside a busy host's discovery traffic, that
took 20-90 s in 3 of 5 loaded runs of test_action), then the process's DDS participant
(`dds_first`), so that DDS discovers the states' publisher while the node loads its kernels;
the kernels before the node configures (warm.py): the node commands only once every kernel is
loaded. The garbage collector waits until the loop starts.
"""
import argparse
import gc
import os
import sys
import threading

import rclpy
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args

from rnea_controller.description_file import read_description
from rnea_controller.errors import ParameterError, UrdfError
from rnea_controller.ros import dds, realtime

DESCRIPTION = 'rnea_controller: computed-torque control of an arm over ROS 2 topics'


def _options(args):
    parser = argparse.ArgumentParser(prog='rnea-controller',
                                     description=DESCRIPTION)
    realtime.add_arguments(parser)
    parser.add_argument('--urdf', metavar='FILE',
                        help='read robot_description from this URDF or .xacro file (instead '
                             'of the parameter or topic)')
    return parser.parse_args(remove_ros_args(sys.argv if args is None else args)[1:])


def quick_discovery():
    """Fast DDS (Kilted's default RMW) with more, quicker initial announcements
    (fast_discovery.xml), unless the user configured DDS: states reach a new node in ~0.1 s,
    not 0.1-3 s (issue 26)."""
    dds.use_profiles('fast_discovery.xml')


def dds_first():
    """A node without ROS arguments, services or rosout, made before anything heavy is imported:
    rmw makes the context's DDS participant with its first node, and discovery starts. The
    caller destroys it once the controller's node exists (which keeps the participant)."""
    return rclpy.create_node('rnea_controller_starting', use_global_arguments=False,
                             enable_rosout=False, start_parameter_services=False)


EXIT_WITHIN = 5.0  # [s] from the final command to the process's end, at most
OK_EVERY = 256  # spins of the executor between two looks at rclpy's context (~0.1 s)


def exit_watchdog(seconds):
    """The final command is out: the process ends within `seconds` even if a clean-up after it
    (the effort check's context, rclpy's shutdown, the participant's deletion) hangs; it then
    says so and ends without the rest (a Ctrl-C that took over 10 s was killed by a test's
    harness, once in ~20 runs of test_node, its cause not found)."""
    def end():
        sys.stderr.write(f'rnea-controller: the clean-up after the final command took over '
                         f'{seconds:g} s; ending now\n')
        sys.stderr.flush()
        os._exit(0)
    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()


def shut_down():
    """rclpy shut down and the DDS participant deleted now, not left to the process's end:
    with the garbage collector off and then frozen (main) the node's handles stay in reference
    cycles for good, and a participant alive at exit leaves its shared-memory port registered,
    into which a running peer (the driver, a simulator) went on writing for 1-3 s after the
    next start on the same participant id: that start's first state came 1.5-3 s late (14 of
    14 restarts; 0.2-0.3 s with this; issue 35, docs/benchmarks.md)."""
    rclpy.try_shutdown()
    gc.unfreeze()
    gc.collect()


def main(args=None):
    """Console script `rnea-controller` (ROS arguments after --ros-args)."""
    # no garbage collection until the loop starts: the start-up makes ~200,000 objects (numba,
    # rosbags' types), which the collector would scan again and again (0.1-0.6 s of the start)
    gc.disable()
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
    from rnea_controller import warm  # numba's set-up first (module doc)
    warm.seed_user_cache()  # a read-only install: its compiled kernels into the user's cache
    warm.prepare_numba()  # numba's set-up for its first kernel, without importing scipy
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    # Ctrl-C and SIGTERM set a flag, seen between callbacks, from now on: under ros2 launch a
    # terminal's Ctrl-C comes twice (to the group, and forwarded), and neither may cut short
    # the activation or the final command
    realtime.install_signal_handlers()
    # the participant made at SCHED_FIFO where allowed (realtime.unpreempted: a peer's first
    # answer is otherwise often lost, and the peer found only 0-3 s later); 0 = off, as the loop
    starting = (realtime.unpreempted(dds_first) if options.realtime_priority else dds_first())
    from rnea_controller.ros.node import ControllerNode
    try:
        node = ControllerNode(parameter_overrides=overrides)
    except ParameterError as error:
        shut_down()
        sys.exit(f'rnea-controller: {error}')  # exit code 1, the reason on stderr
    starting.destroy_node()  # the participant stays: the controller's node holds it
    executor = realtime.make_executor(options.executor)
    executor.add_node(node)
    try:
        node.autostart()
        realtime.apply_realtime_options(options, node.get_logger().info)  # warm: loop thread
        gc.freeze()  # objects made so far are never scanned again: shorter GC pauses in ticks
        gc.enable()
        spins = 0
        while not realtime.STOP:  # spin_once returns: Ctrl-C seen each tick
            executor.spin_once(timeout_sec=0.1)
            node.after_spin()
            spins += 1
            # the context, now and then: rclpy.ok() at every spin (2,000 a second) took 5 %
            # of the loop thread's time (py-spy, issue 45); only this program shuts it down
            if spins % OK_EVERY == 0 and not rclpy.ok():
                break
    finally:
        node.finish()
        exit_watchdog(EXIT_WITHIN)
        executor.shutdown()  # the EventsExecutor's C++ thread: joined, else std::terminate (-6)
        node.release_helpers()
        node.destroy_node()
        shut_down()


if __name__ == '__main__':
    main()
