"""Record ROS 2 topics into a rosbag2 bag (MCAP storage), with or without a ROS 2 installation.

Where `ros2 bag` exists (rosbag2's ros2bag package), `ros2 bag record -s mcap` does it
(`record_command`). Otherwise `BagRecorder` subscribes with rclpy *raw* subscriptions
(`raw=True`: the callback gets the serialized CDR bytes untouched) and writes them with the
`rosbags` library's rosbag2 Writer (MCAP plugin, bag format version 9), declaring each topic's
type with the message definition from rosbags' newest ROS 2 type store. Timestamps [ns] are the
times the recorder takes the messages (rosbag2's are the DDS receive times: see BagRecorder).

Topic names are relative (but /diagnostics): `--ros-args -r __ns:=/arm1` records one arm's.
An existing output folder is never overwritten: `fresh_path` picks `<name>-1`, `<name>-2`, ...

    python -m rnea_controller.tools.record -o my_bag joint_states effort_controller/commands
"""
import argparse
import importlib
import importlib.util
from pathlib import Path
import shutil
import signal
import sys
import threading
import time

from rnea_controller.errors import BagError

# The topics a run needs for validation, and their types.
DEFAULT_TOPICS = {
    'joint_states': 'sensor_msgs/msg/JointState',
    'effort_controller/commands': 'std_msgs/msg/Float64MultiArray',
    'rnea_controller/reference': 'sensor_msgs/msg/JointState',
    'rnea_controller/joint_trajectory': 'trajectory_msgs/msg/JointTrajectory',
    '/diagnostics': 'diagnostic_msgs/msg/DiagnosticArray',
    'robot_description': 'std_msgs/msg/String',
}
LATCHED = ('robot_description', '/robot_description')  # transient-local publishers
DEPTH = 1000  # reliable, deep queue: a recorder must not lose 1 kHz messages on a hiccup


def fresh_path(path):
    """`path` if it does not exist, else the first free `<path>-1`, `<path>-2`, ..."""
    path = Path(path)
    k = 0
    while (candidate := path if k == 0 else path.with_name(f'{path.name}-{k}')).exists():
        k += 1
    return candidate


def newest_typestore():
    """rosbags' type store of the newest ROS 2 distribution it knows (Kilted, else Jazzy)."""
    from rosbags.typesys import get_typestore, Stores
    for name in ('ROS2_KILTED', 'ROS2_JAZZY'):
        if name in Stores.__members__:
            return get_typestore(Stores[name])
    return get_typestore(Stores.LATEST)


def message_class(msgtype):
    """The rclpy message class of 'pkg/msg/Name'."""
    package, _, name = msgtype.split('/')
    return getattr(importlib.import_module(f'{package}.msg'), name)


def record_command(path, topics):
    """The `ros2 bag record` command line for MCAP, or None without rosbag2's `ros2 bag`."""
    ros2 = shutil.which('ros2')
    if ros2 is None or importlib.util.find_spec('ros2bag') is None:
        return None
    return [ros2, 'bag', 'record', '-s', 'mcap', '-o', str(path), *topics]


def own_record_command(path, topics):
    """This module as a program, recording `topics` into a new MCAP bag at `path`."""
    return [sys.executable, '-m', 'rnea_controller.tools.record', '-o', str(path), *topics]


def recording_command(path, topics=None):
    """What demo.launch.py runs to record `topics` (default DEFAULT_TOPICS) into `path`:
    `ros2 bag record` where rosbag2 is installed, else this module (`own_record_command`)."""
    topics = list(topics or DEFAULT_TOPICS)
    return record_command(path, topics) or own_record_command(path, topics)


class BagRecorder:
    """Writes messages of `topics` {name: 'pkg/msg/Type'} to a new MCAP bag at `path`.

    It owns a node (`rnea_record`, in the namespace of the context's --ros-args) spun by rclpy's
    EventsExecutor in a thread. It takes 3 kHz of raw messages at about a quarter of a core; on
    the SingleThreadedExecutor it needed a whole one, and in the demo on a loaded 2-core host it
    lost a quarter to a third of the 1 kHz messages (the publishers keep only their last few)
    and starved the controller and the simulator. Each message is written with the time this
    thread takes it: rosbag2 writes the DDS receive time, which Kilted's EventsExecutor does not
    pass (it fails on a MessageInfo callback). The validator reads header stamps. With
    `start=False` it writes nothing until `start()`, except that it keeps the newest message of
    each latched topic and writes it first when started. `close()` finishes the bag (it is
    unreadable before). Counts per topic (keys as given) in `counts`.
    """

    def __init__(self, path, topics=None, start=True, context=None):
        import rclpy
        from rosbags.rosbag2 import StoragePlugin, Writer

        from rnea_controller.ros.realtime import BackgroundSpinner
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f'{self.path} exists already: rosbag2 writes a new directory')
        self.topics = dict(topics or DEFAULT_TOPICS)
        self.writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self.writer.open()
        self.node = rclpy.create_node('rnea_record', context=context)
        self.counts = dict.fromkeys(self.topics, 0)
        self.latched = {}
        self.recording = start
        self.lock = threading.Lock()
        self.connections = {topic: self._subscribe(topic, msgtype, newest_typestore())
                            for topic, msgtype in self.topics.items()}
        self.spinner = BackgroundSpinner(self.node, 'recorder', 'events')

    def _subscribe(self, topic, msgtype, typestore):
        """A raw subscription to `topic` and the bag connection of its resolved name."""
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        latched = topic in LATCHED
        qos = QoSProfile(depth=1 if latched else DEPTH, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL if latched
                         else DurabilityPolicy.VOLATILE)
        subscription = self.node.create_subscription(
            message_class(msgtype), topic, lambda data: self._on_message(topic, data), qos,
            raw=True)
        return self.writer.add_connection(subscription.topic_name, msgtype, typestore=typestore)

    def _on_message(self, topic, data):
        """Write one serialized message (or keep it, latched, before start)."""
        stamp = time.time_ns()
        with self.lock:
            if self.recording:
                self.writer.write(self.connections[topic], stamp, data)
                self.counts[topic] += 1
            elif topic in LATCHED:
                self.latched[topic] = data

    def start(self):
        """Start writing (after `start=False`): first the latched messages kept so far, then
        every message received from now on, none received before, even if this thread takes
        it later (a thread lagging a 1 kHz topic holds a backlog). The switch is a task queued
        in the executor behind the messages already received, and the EventsExecutor runs its
        queue in order."""
        self.spinner.executor.create_task(self._begin)

    def _begin(self):
        with self.lock:
            for topic, data in self.latched.items():
                self.writer.write(self.connections[topic], time.time_ns(), data)
                self.counts[topic] += 1
            self.recording = True

    def close(self):
        """Stop taking messages and finish the bag (MCAP summary and metadata.yaml)."""
        if self.spinner is not None:
            self.spinner.stop(2.0)
            self.spinner = None
            with self.lock:
                self.recording = False
                self.writer.close()
            self.node.destroy_node()


def main(argv=None):
    """Record until Ctrl-C: `python -m rnea_controller.tools.record -o DIR [topics...]`."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions
    from rclpy.utilities import remove_ros_args
    argv = sys.argv if argv is None else ['record', *argv]
    parser = argparse.ArgumentParser(prog='python -m rnea_controller.tools.record',
                                     description='record topics to an MCAP rosbag2 bag')
    parser.add_argument('-o', '--output', required=True,
                        help='bag directory to create (if it exists: <output>-1, -2, ...)')
    parser.add_argument('topics', nargs='*', help=f'default: {" ".join(DEFAULT_TOPICS)}')
    args = parser.parse_args(remove_ros_args(argv)[1:])
    topics = {topic: DEFAULT_TOPICS.get(topic) for topic in args.topics} or DEFAULT_TOPICS
    unknown = [topic for topic, msgtype in topics.items() if msgtype is None]
    if unknown:
        print(f'record: unknown types for {unknown}; known: {list(DEFAULT_TOPICS)}',
              file=sys.stderr)
        return 2
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    output = fresh_path(args.output)
    recorder = BagRecorder(output, topics)
    print(f'record: recording into {output}', flush=True)
    try:
        while not stop.wait(0.2):  # wake up now and then: signals reach the main thread
            pass
    finally:
        recorder.close()
        rclpy.try_shutdown()
    print(f'record: {sum(recorder.counts.values())} messages in {output}', flush=True)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
