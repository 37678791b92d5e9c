"""A recorder that discovers topics as rosbag2's `ros2 bag record` does, for the tests.

rosbag2 (Jazzy, Kilted) looks at the ROS graph every `--polling-interval` (100 ms by default)
and subscribes to a requested topic only once it has discovered a publisher of it
(`--include-unpublished-topics` is off by default), with the QoS the publishers offer (reliable
if all of them are, transient-local if all of them are). A message published before that poll
and match is not in its bag. rosbag2 has no wheel, so this stands in for it where `ros2 bag` is
absent: rclpy raw subscriptions and the rosbags library's rosbag2 Writer (MCAP), independent
of rnea_controller.tools.record (whose recorder subscribes to every topic when it starts).

    python polling_recorder.py -o BAG topic [topic ...] [--ros-args ...]

Records until SIGINT or SIGTERM; prints 'recording into BAG' once started and, at the end, the
number of messages per topic.
"""
import argparse
import importlib
import signal
import sys
import threading
import time

POLL = 0.1  # [s] rosbag2's default --polling-interval
DEPTH = 1000  # a deep queue: the test is about discovery, not about a slow writer


def message_class(msgtype):
    """The rclpy class of 'pkg/msg/Name'."""
    package, _, name = msgtype.split('/')
    return getattr(importlib.import_module(f'{package}.msg'), name)


def offered_qos(infos):
    """The QoS rosbag2 requests of publishers `infos`: what all of them offer."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    reliable = all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
    latched = all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos)
    return QoSProfile(depth=DEPTH, reliability=ReliabilityPolicy.RELIABLE if reliable
                      else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if latched
                      else DurabilityPolicy.VOLATILE)


class PollingRecorder:
    """Subscribes to each of `topics` once a poll finds a publisher of it; writes an MCAP bag."""

    def __init__(self, path, topics):
        import rclpy
        from rclpy.experimental import EventsExecutor
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import get_typestore, Stores
        self.node = rclpy.create_node('polling_recorder')
        self.executor = EventsExecutor()  # 3 kHz at a fraction of a core
        self.executor.add_node(self.node)
        self.typestore = get_typestore(Stores.ROS2_KILTED if 'ROS2_KILTED' in Stores.__members__
                                       else Stores.LATEST)
        self.writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
        self.writer.open()
        self.lock = threading.Lock()
        self.waiting = [self.node.resolve_topic_name(topic) for topic in topics]
        self.connections, self.counts, self.subscriptions = {}, {}, []

    def poll(self):
        """Subscribe to the waiting topics that now have a publisher."""
        for topic in list(self.waiting):
            infos = self.node.get_publishers_info_by_topic(topic)
            if not infos:
                continue
            msgtype = infos[0].topic_type
            with self.lock:
                self.connections[topic] = self.writer.add_connection(
                    topic, msgtype, typestore=self.typestore)
                self.counts[topic] = 0
            self.subscriptions.append(self.node.create_subscription(
                message_class(msgtype), topic, lambda data, t=topic: self._write(t, data),
                offered_qos(infos), raw=True))
            self.waiting.remove(topic)

    def _write(self, topic, data):
        with self.lock:
            self.writer.write(self.connections[topic], time.time_ns(), data)
            self.counts[topic] += 1

    def run(self, stop):
        """Spin, polling the graph every POLL seconds (between spins: one thread creates the
        subscriptions and takes the messages), until `stop` is set."""
        due = time.monotonic()
        while not stop.is_set():
            if time.monotonic() >= due:
                self.poll()
                due += POLL
            self.executor.spin_once(timeout_sec=max(0.0, min(0.02, due - time.monotonic())))

    def close(self):
        with self.lock:
            self.writer.close()
        self.executor.shutdown(0)
        self.node.destroy_node()


def main(argv):
    import rclpy
    from rclpy.signals import SignalHandlerOptions
    from rclpy.utilities import remove_ros_args
    parser = argparse.ArgumentParser(prog='polling_recorder.py')
    parser.add_argument('-o', '--output', required=True)
    parser.add_argument('topics', nargs='+')
    args = parser.parse_args(remove_ros_args(argv)[1:])
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    recorder = PollingRecorder(args.output, args.topics)
    print(f'recording into {args.output}', flush=True)
    try:
        recorder.run(stop)
    finally:
        recorder.close()
        rclpy.try_shutdown()
    print(f'recorded {recorder.counts}', flush=True)
    return 0


if __name__ == '__main__':
    raise SystemExit(main(sys.argv))
