"""Record ROS 2 topics into a rosbag2 bag (MCAP storage), with or without a ROS 2 installation.

Where the `ros2` command exists, `ros2 bag record -s mcap` does it (`record_command`). Otherwise
`BagRecorder` subscribes with rclpy *raw* subscriptions, which hand over the serialized CDR bytes
untouched, and writes them with the `rosbags` library's rosbag2 Writer (MCAP plugin, bag format
version 9), declaring each topic's type with the message definition from rosbags' newest ROS 2
type store. Timestamps are receive times [ns], as rosbag2 records them.

    python -m rnea_controller.tools.record -o my_bag /joint_states /effort_controller/commands
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
POLL = 0.005  # [s] between two takes from the queues


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

    It owns a node (`rnea_record`) that no executor spins: a thread takes the raw messages every
    `POLL` seconds straight from the subscriptions' queues (deep, reliable) and writes them with
    their DDS receive times. That costs a fraction of an executor's per-message wake-ups at 3 kHz.
    With `start=False` it writes nothing until `start()`, except that it keeps the newest message
    of each latched topic and writes it first when started. `close()` finishes the bag (it is
    unreadable before). Counts per topic in `counts`.
    """

    def __init__(self, path, topics=None, start=True, context=None):
        import rclpy
        from rosbags.rosbag2 import StoragePlugin, Writer
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f'{self.path} exists already: rosbag2 writes a new directory')
        self.topics = dict(topics or DEFAULT_TOPICS)
        typestore = newest_typestore()
        self.writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self.writer.open()
        self.node = rclpy.create_node('rnea_record', context=context)
        self.counts = dict.fromkeys(self.topics, 0)
        self.latched = {}
        self.subscriptions = [(topic, self.writer.add_connection(topic, msgtype,
                                                                 typestore=typestore),
                               self._subscribe(topic, msgtype))
                              for topic, msgtype in self.topics.items()]
        self.recording = start
        self.lock = threading.Lock()
        self.running = True
        self.thread = threading.Thread(target=self._poll, name='recorder', daemon=True)
        self.thread.start()

    def _subscribe(self, topic, msgtype):
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        latched = topic in LATCHED
        qos = QoSProfile(depth=1 if latched else DEPTH, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL if latched
                         else DurabilityPolicy.VOLATILE)
        return self.node.create_subscription(message_class(msgtype), topic, lambda _: None, qos,
                                             raw=True)

    def _poll(self):
        while self.running:
            with self.lock:
                self._drain()
            time.sleep(POLL)
        with self.lock:
            self._drain()

    def _drain(self):
        """Take and write (or keep, before start) every message waiting in the queues."""
        for topic, connection, subscription in self.subscriptions:
            while (taken := subscription.handle.take_message(subscription.msg_type, True)):
                data, info = taken
                stamp = info.get('received_timestamp') or time.time_ns()
                if self.recording:
                    self.writer.write(connection, stamp, data)
                    self.counts[topic] += 1
                elif topic in LATCHED:
                    self.latched[topic] = data

    def start(self):
        """Start writing (after `start=False`), first the latched messages kept so far."""
        connections = {topic: connection for topic, connection, _ in self.subscriptions}
        with self.lock:
            self._drain()  # what arrived before now is not recorded (the latched are kept)
            for topic, data in self.latched.items():
                self.writer.write(connections[topic], time.time_ns(), data)
                self.counts[topic] += 1
            self.recording = True

    def close(self):
        """Write what is still queued and finish the bag (MCAP summary and metadata.yaml)."""
        if self.running:
            self.running = False
            self.thread.join()
            self.writer.close()
            self.node.destroy_node()


def main(argv=None):
    """Record until Ctrl-C: `python -m rnea_controller.tools.record -o DIR [topics...]`."""
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
    from rclpy.signals import SignalHandlerOptions
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    recorder = BagRecorder(args.output, topics)
    try:
        while not stop.wait(0.2):  # wake up now and then: signals reach the main thread
            pass
    finally:
        recorder.close()
        rclpy.try_shutdown()
    print(f'record: {sum(recorder.counts.values())} messages in {args.output}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
