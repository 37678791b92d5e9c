"""Record ROS 2 topics into a rosbag2 bag (MCAP storage), with or without a ROS 2 installation.

Where the `ros2` command exists, `ros2 bag record -s mcap` does it (`record_command`). Otherwise
`BagRecorder` subscribes with rclpy *raw* subscriptions, which hand over the serialized CDR bytes
untouched, and writes them with the `rosbags` library's rosbag2 Writer (MCAP plugin, bag format
version 9), declaring each topic's type with the message definition from rosbags' newest ROS 2
type store. Timestamps are receive times [ns], as rosbag2 records them.

    python -m rnea_controller.record -o my_bag /joint_states /effort_controller/commands
"""
import argparse
import importlib
from pathlib import Path
import shutil
import signal
import sys
import threading
import time

from rnea_controller.errors import BagError

# The topics a run needs for validation, and their types.
DEFAULT_TOPICS = {
    '/joint_states': 'sensor_msgs/msg/JointState',
    '/effort_controller/commands': 'std_msgs/msg/Float64MultiArray',
    '/rnea_controller/reference': 'sensor_msgs/msg/JointState',
    '/rnea_controller/joint_trajectory': 'trajectory_msgs/msg/JointTrajectory',
    '/diagnostics': 'diagnostic_msgs/msg/DiagnosticArray',
    '/robot_description': 'std_msgs/msg/String',
}
LATCHED = ('/robot_description',)  # transient-local publishers: subscribe alike
DEPTH = 1000  # reliable, deep queue: a recorder must not lose 1 kHz messages on a hiccup


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
    """The `ros2 bag record` command line for MCAP, or None when `ros2` is not installed."""
    ros2 = shutil.which('ros2')
    if ros2 is None:
        return None
    return [ros2, 'bag', 'record', '-s', 'mcap', '-o', str(path), *topics]


class BagRecorder:
    """Writes messages of `topics` {name: 'pkg/msg/Type'} to a new MCAP bag at `path`.

    Subscribes at once; with `start=False` it writes nothing until `start()` except that it keeps
    the newest message of each latched topic and writes it first when started. Call `close()` to
    finish the bag (it is unreadable before). Counts per topic in `counts`.
    """

    def __init__(self, node, path, topics=None, start=True):
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from rosbags.rosbag2 import StoragePlugin, Writer
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f'{self.path} exists already: rosbag2 writes a new directory')
        self.topics = dict(topics or DEFAULT_TOPICS)
        typestore = newest_typestore()
        self.writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self.writer.open()
        self.lock = threading.Lock()
        self.counts = dict.fromkeys(self.topics, 0)
        self.connections = {}
        for topic, msgtype in self.topics.items():
            self.connections[topic] = self.writer.add_connection(topic, msgtype,
                                                                 typestore=typestore)
            durability = (DurabilityPolicy.TRANSIENT_LOCAL if topic in LATCHED
                          else DurabilityPolicy.VOLATILE)
            qos = QoSProfile(depth=1 if topic in LATCHED else DEPTH, durability=durability,
                             reliability=ReliabilityPolicy.RELIABLE)
            node.create_subscription(message_class(msgtype), topic, self._writer_for(topic), qos,
                                     raw=True)
        self.closed = False
        self.recording = start
        self.latched = {}

    def _writer_for(self, topic):
        connection = self.connections[topic]

        def write(data):
            with self.lock:
                if self.recording and not self.closed:
                    self.writer.write(connection, time.time_ns(), data)
                    self.counts[topic] += 1
                elif topic in LATCHED:
                    self.latched[topic] = data
        return write

    def start(self):
        """Start writing (after `start=False`), first the latched messages kept so far."""
        with self.lock:
            for topic, data in self.latched.items():
                self.writer.write(self.connections[topic], time.time_ns(), data)
                self.counts[topic] += 1
            self.recording = True

    def close(self):
        """Finish the bag (writes the MCAP summary and metadata.yaml)."""
        with self.lock:
            if not self.closed:
                self.closed = True
                self.writer.close()


def main(argv=None):
    """Record until Ctrl-C: `python -m rnea_controller.record -o DIR [topics...]`."""
    parser = argparse.ArgumentParser(description='record topics to an MCAP rosbag2 bag')
    parser.add_argument('-o', '--output', required=True, help='bag directory to create')
    parser.add_argument('topics', nargs='*', help=f'default: {" ".join(DEFAULT_TOPICS)}')
    args = parser.parse_args(argv)
    topics = {topic: DEFAULT_TOPICS.get(topic) for topic in args.topics} or DEFAULT_TOPICS
    unknown = [topic for topic, msgtype in topics.items() if msgtype is None]
    if unknown:
        print(f'record: unknown types for {unknown}; known: {list(DEFAULT_TOPICS)}',
              file=sys.stderr)
        return 2
    import rclpy
    rclpy.init()
    node = rclpy.create_node('rnea_record')
    recorder = BagRecorder(node, args.output, topics)
    signal.signal(signal.SIGTERM, lambda *_: rclpy.try_shutdown())
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, Exception):  # Ctrl-C or shutdown: finish the bag in any case
        pass
    finally:
        recorder.close()
        node.destroy_node()
        rclpy.try_shutdown()
    print(f'record: {sum(recorder.counts.values())} messages in {args.output}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
