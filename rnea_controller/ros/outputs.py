"""What the controller node publishes: effort commands, its reference, /diagnostics.

The command and reference are serialized once per configuration (by rosbags); each tick writes
its numbers and stamp into their bytes in place (`wire.Writer`, the package's one shortcut:
rclpy's typed publish cost 12 + 21 µs a tick here, the bytes ~6 µs each) and publishes the
bytes. A failed publish is counted and logged, never fatal (see `Outputs.send`).
"""
from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from rclpy.duration import Duration
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from rnea_controller import wire
from rnea_controller.wire import FLOAT64_ARRAY, JOINT_STATE, JOINT_STATE_ARRAYS


def command_writer(store, m):
    """A Float64MultiArray of m numbers (no layout dimensions), written in place."""
    types = store.types
    msg = types[FLOAT64_ARRAY](layout=types['std_msgs/msg/MultiArrayLayout'](
        dim=[], data_offset=0), data=np.zeros(m))
    return wire.Writer(store, FLOAT64_ARRAY, msg, ('data',))


def joint_state_writer(store, joints):
    """A JointState of `joints` with position, velocity and effort, written in place."""
    types = store.types
    zeros = np.zeros(len(joints))
    msg = types[JOINT_STATE](
        header=types['std_msgs/msg/Header'](stamp=types['builtin_interfaces/msg/Time'](
            sec=0, nanosec=0), frame_id=''),
        name=list(joints), position=zeros, velocity=zeros, effort=zeros)
    return wire.Writer(store, JOINT_STATE, msg, JOINT_STATE_ARRAYS, stamped=True)


def raw_publish(publisher):
    """The publisher's own `publish_raw` (bytes), without rclpy's `Publisher.publish` around it:
    a type test and its handle's use count, 40 % of a publish's time (issue 45, cProfile of the
    tick). The handle is safe here: the node destroys these publishers on its loop's thread
    only (cleanup). rclpy's Publisher where its inner object is not found (another version)."""
    inner = getattr(publisher, '_Publisher__publisher', None)
    return getattr(inner, 'publish_raw', None) or publisher.publish


class Outputs:
    """The node's three publishers and the two messages written in place, for `joints`."""

    def __init__(self, node, command_topic, joints):
        self._node = node
        self.failures = 0
        self.command_pub = node.create_publisher(Float64MultiArray, command_topic, 10)
        self.reference_pub = node.create_publisher(JointState, '~/reference', 10)
        self.diagnostics_pub = node.create_publisher(DiagnosticArray, '/diagnostics', 10)
        store = wire.default_typestore()
        self._command = command_writer(store, len(joints))
        self._reference = joint_state_writer(store, joints)
        self._command_data = self._command.arrays['data']
        self._reference_rows = [self._reference.arrays[field] for field in JOINT_STATE_ARRAYS]
        self._raw = [raw_publish(p) for p in (self.command_pub, self.reference_pub)]

    def command(self, tau):
        self._command_data[:] = tau
        self.send(self.command_pub, self._command.raw(), self._raw[0])

    def reference(self, ref, feedforward, ref_ns):
        """q_d, qd_d (rows of `ref`) and the feedforward torque, stamped `ref_ns` [ns]."""
        position, velocity, effort = self._reference_rows
        position[:], velocity[:], effort[:] = ref[0], ref[1], feedforward
        self._reference.set_stamp(ref_ns)
        self.send(self.reference_pub, self._reference.raw(), self._raw[1])

    def diagnostics(self, msg):
        self.send(self.diagnostics_pub, msg)

    def final_command(self, tau):
        """The last command, waited for until acknowledged (at most 0.2 s) before DDS goes."""
        self.command(tau)
        self.command_pub.wait_for_all_acked(Duration(seconds=0.2))

    def send(self, publisher, msg, publish=None):
        """Publish (by `publish`, a `raw_publish`, if given); a failure of the middleware is
        counted and logged, never fatal.

        Fast DDS can fail a reliable write when a subscriber lags far behind (ros2/rmw#209):
        a slow `ros2 topic echo` of the reference must not stop the loop. The next tick sends
        a new command; /diagnostics counts the failures."""
        try:
            (publish or publisher.publish)(msg)
        except RuntimeError as error:  # rclpy's RCLError
            self.failures += 1
            self._node.get_logger().warning(f'publishing on {publisher.topic_name} failed '
                                            f'({self.failures} so far): {error}',
                                            throttle_duration_sec=1.0)

    def destroy(self):
        for publisher in (self.command_pub, self.reference_pub, self.diagnostics_pub):
            self._node.destroy_publisher(publisher)
