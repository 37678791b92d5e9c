"""The joint states, taken from the middleware's queue by the control loop's own thread.

The subscription lives on a helper node (`<node>_states`, the controller's namespace, no
global ROS arguments: the topic is resolved, remappings included, by the controller's node)
that no executor serves. An executor serving it woke the loop's thread twice a period, once
to deliver the state and once for the tick; a wake-up of rclpy's executor costs that thread
more Python than the tick's own difference from a bare node (issue 45: ~28 µs a tick in a
probe). Instead the tick takes, at its start, every state queued since the previous one
(`take`), in order, each at its arrival: the middleware's reception time
(MessageInfo.received_timestamp, on the system clock, the stamps'), converted onto the tick's
clock (perf_counter). A reception time that is missing (0: an rmw that does not fill it) or in
the future (the system clock stepped back) counts as now.

While the node is inactive no tick runs: a timer of the controller's node takes them every
DRAIN_PERIODS periods (ros/node.py), so that activation starts at the measured position and
every state is counted (`joint states received`). The queue keeps DEPTH states, as the
executor's subscription did: a tick takes up to DEPTH states that came during a pause.
"""
import time

import rclpy
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

DEPTH = 10  # states the queue keeps (KEEP_LAST, best effort: the newest matter)
DRAIN_PERIODS = DEPTH // 2  # while inactive, taken every this many periods: a stream at twice
# the loop's rate fills half the queue meanwhile


class StateIntake:
    """The joint-state subscription of `controller` (a Node) on `topic`, no executor's;
    `take()` hands each queued state to `handle(raw, arrival)`: raw, its serialized bytes;
    arrival, (on the tick's clock [s], on the stamps' clock [ns])."""

    def __init__(self, controller, topic, handle):
        self.node = rclpy.create_node(
            controller.get_name() + '_states', namespace=controller.get_namespace(),
            context=controller.context, use_global_arguments=False, enable_rosout=False,
            start_parameter_services=False,  # no executor would answer a service of its own
            parameter_overrides=[Parameter('start_type_description_service', value=False)])
        qos = QoSProfile(depth=DEPTH, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.subscription = self.node.create_subscription(
            JointState, controller.resolve_topic_name(topic), _served_by_no_executor, qos,
            raw=True)
        self.topic = self.subscription.topic_name
        # the handle's own call, without rclpy's use count around it: safe as
        # `outputs.raw_publish` is, the node destroys this on the loop's thread only
        self._take = self.subscription.handle.take_message
        self._handle = handle

    def take(self):
        """Every state queued, in order, to `handle` at its arrival; how many were taken."""
        take, handle, count = self._take, self._handle, 0
        taken = take(JointState, True)
        while taken is not None:
            raw, info = taken
            received = info['received_timestamp']
            wall, now = time.time_ns(), time.perf_counter()
            if 0 < received < wall:
                now -= (wall - received) * 1e-9
                wall = received
            handle(raw, (now, wall))
            count += 1
            taken = take(JointState, True)
        return count

    def destroy(self):
        """The subscription and its node; states still queued are dropped."""
        self.node.destroy_node()


def _served_by_no_executor(raw):
    """The subscription's callback: never called (no executor has the helper node)."""
