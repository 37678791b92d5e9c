"""What the controller node publishes: effort commands, its reference, /diagnostics.

The command and reference messages are made once per configuration; each tick writes its
numbers into numpy views of their float64 arrays and rclpy serializes them (no codec of ours).
A failed publish is counted and logged, never fatal (see `Outputs.send`).
"""
import array

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from rclpy.duration import Duration
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray


def float_view(msg, field, size):
    """Set msg.field to `size` zeros and return a numpy view of the array the message holds,
    written in place every tick (the setter may copy: the view is taken after it)."""
    setattr(msg, field, array.array('d', bytes(8 * size)))
    return np.frombuffer(getattr(msg, field), np.float64)


class Outputs:
    """The node's three publishers and the two messages written in place, for `joints`."""

    def __init__(self, node, command_topic, joints):
        self._node = node
        self.failures = 0
        self.command_pub = node.create_publisher(Float64MultiArray, command_topic, 10)
        self.reference_pub = node.create_publisher(JointState, '~/reference', 10)
        self.diagnostics_pub = node.create_publisher(DiagnosticArray, '/diagnostics', 10)
        m = len(joints)
        self.command_msg = Float64MultiArray()
        self._command = float_view(self.command_msg, 'data', m)
        self.reference_msg = JointState(name=list(joints))
        self._reference = [float_view(self.reference_msg, field, m)
                           for field in ('position', 'velocity', 'effort')]

    def command(self, tau):
        self._command[:] = tau
        self.send(self.command_pub, self.command_msg)

    def reference(self, ref, feedforward, ref_ns):
        """q_d, qd_d (rows of `ref`) and the feedforward torque, stamped `ref_ns` [ns]."""
        position, velocity, effort = self._reference
        position[:], velocity[:], effort[:] = ref[0], ref[1], feedforward
        stamp = self.reference_msg.header.stamp
        stamp.sec, stamp.nanosec = divmod(ref_ns, 1_000_000_000)
        self.send(self.reference_pub, self.reference_msg)

    def diagnostics(self, msg):
        self.send(self.diagnostics_pub, msg)

    def final_command(self, tau):
        """The last command, waited for until acknowledged (at most 0.2 s) before DDS goes."""
        self.command(tau)
        self.command_pub.wait_for_all_acked(Duration(seconds=0.2))

    def send(self, publisher, msg):
        """Publish; a failure of the middleware is counted and logged, never fatal.

        Fast DDS can fail a reliable write when a subscriber lags far behind (ros2/rmw#209):
        a slow `ros2 topic echo` of the reference must not stop the loop. The next tick sends
        a new command; /diagnostics counts the failures."""
        try:
            publisher.publish(msg)
        except RuntimeError as error:  # rclpy's RCLError
            self.failures += 1
            self._node.get_logger().warning(f'publishing on {publisher.topic_name} failed '
                                            f'({self.failures} so far): {error}',
                                            throttle_duration_sec=1.0)

    def destroy(self):
        for publisher in (self.command_pub, self.reference_pub, self.diagnostics_pub):
            self._node.destroy_publisher(publisher)
