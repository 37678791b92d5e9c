"""A joint-state relay in its own process that shifts every stamp: a driver whose clock is off
this host's (issue 26), for test_timing.

It takes the serialized JointStates of one topic, adds the offset to header.stamp in place
(the first field after the 4-byte CDR header: sec int32, nanosec uint32) and publishes the
bytes on another topic. The test sets the offset, one JSON number [s] per line on the relay's
stdin, acknowledged with a line once in force.

Run as a script: `python stamp_relay.py FROM TO`.
"""
import json
import struct
import subprocess
import sys

STAMP = struct.Struct('<iI')  # header.stamp, little-endian CDR, after the encapsulation header


class StampRelay:
    """Test side: start the relay process and set its offset."""

    def __init__(self, source, target):
        self.proc = subprocess.Popen([sys.executable, __file__, source, target],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def set(self, offset):
        """Shift the stamps by `offset` [s] from now on (positive: a clock ahead of ours)."""
        self.proc.stdin.write(json.dumps(offset) + '\n')
        self.proc.stdin.flush()
        if not self.proc.stdout.readline():
            raise RuntimeError(f'the stamp relay exited ({self.proc.poll()})')

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5.0)


def shifted(raw, offset_ns):
    """The serialized JointState `raw` with its stamp moved by `offset_ns` [ns]."""
    data = bytearray(raw)
    sec, nanosec = STAMP.unpack_from(data, 4)
    STAMP.pack_into(data, 4, *divmod(sec * 1_000_000_000 + nanosec + offset_ns, 1_000_000_000))
    return bytes(data)


def main(source, target):
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from rnea_controller.ros.realtime import BackgroundSpinner
    rclpy.init()
    node = rclpy.create_node('test_stamp_relay')
    publisher = node.create_publisher(JointState, target, 10)
    offset_ns = [0]
    node.create_subscription(
        JointState, source, lambda raw: publisher.publish(shifted(raw, offset_ns[0])),
        QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT), raw=True)
    spinner = BackgroundSpinner(node, 'stamp relay', 'events', 0.05)
    for line in sys.stdin:
        offset_ns[0] = round(json.loads(line) * 1e9)  # one store: the callback sees old or new
        print('ok', flush=True)
    spinner.stop()
    node.destroy_node()
    rclpy.shutdown()


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
