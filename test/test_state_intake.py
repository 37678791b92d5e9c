"""The joint states taken by the tick from the middleware's queue (ros/state_intake.py), over
DDS: the real node as a subprocess, states published by this process at a low rate, counted
exactly, across its lifecycle (inactive, active, inactive, active again)."""
import time

from conftest import console_script, Processes, wait_for
from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
import numpy as np
import pinocchio as pin
import pytest
import rclpy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from test_node import JOINTS, LIMITS, PIN, PIN_DATA  # the bundled arm and its oracle

from rnea_controller import default_urdf_path
from rnea_controller.ros.realtime import BackgroundSpinner

pytestmark = pytest.mark.integration

RATE = 50.0  # [Hz] of the states: a few dozen a phase, every one of them counted
STEP = 1e-5  # [rad] each state's positions move by this from the previous one
PARAMS = """/**:
  ros__parameters:
    autostart: false
    state_timeout: 1.0  # the slow stream's states stay fresh over a transition
    latency_compensation: 'off'  # the law at the measured state, not a prediction
    external_wrench_timeout: 0.0
    effort_controller: ''
"""
Q0 = np.array([0.1, -1.2, 1.0, -0.5, 0.3, 0.2])


class Client:
    """Publishes states one by one; records the node's commands, references and the joint
    states it counted."""

    def __init__(self):
        self.node = rclpy.create_node('test_state_intake_client')
        self.commands, self.references, self.received = [], [], []
        self.node.create_subscription(Float64MultiArray, '/effort_controller/commands',
                                      lambda msg: self.commands.append(np.array(msg.data)),
                                      10_000)
        self.node.create_subscription(JointState, '/rnea_controller/reference',
                                      self.references.append, 10_000)
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._on_status, 10)
        self.states = self.node.create_publisher(JointState, '/joint_states', 10)
        self.lifecycle = self.node.create_client(ChangeState, '/rnea_controller/change_state')
        self.spinner = BackgroundSpinner(self.node, 'test client', 'events', 0.05)
        self.sent = 0
        self.q = Q0.copy()

    def _on_status(self, msg):
        for status in msg.status:
            if status.name == 'rnea_controller: control loop':
                values = {kv.key: kv.value for kv in status.values}
                self.received.append(int(values['joint states received']))

    def publish(self, count):
        """`count` states at RATE, each STEP further on every joint; returns the last one's
        positions."""
        for _ in range(count):
            self.q = self.q + STEP
            msg = JointState(name=JOINTS, position=self.q.tolist(),
                             velocity=[0.0] * len(JOINTS))
            now = time.time_ns()
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
            self.states.publish(msg)
            self.sent += 1
            time.sleep(1.0 / RATE)
        return self.q.copy()

    def change_state(self, transition):
        assert self.lifecycle.wait_for_service(10.0)
        request = ChangeState.Request()
        request.transition.id = transition
        future = self.lifecycle.call_async(request)
        assert wait_for(future.done, 15.0) and future.result().success

    def close(self):
        self.spinner.stop()
        self.node.destroy_node()


def gravity(q):
    return np.clip(pin.computeGeneralizedGravity(PIN, PIN_DATA, q), -LIMITS, LIMITS)


def activate_and_hold(client, procs, proc, q):
    """Activation starts a hold at `q`, the newest state, taken while inactive."""
    client.commands.clear()
    client.references.clear()
    client.change_state(Transition.TRANSITION_ACTIVATE)
    assert wait_for(lambda: client.references, 10.0), procs.output(proc)[-2000:]
    np.testing.assert_allclose(client.references[0].position, q, atol=1e-12)


def test_every_state_is_taken_once_while_inactive_and_active_and_the_newest_commands(
        tmp_path):
    (tmp_path / 'params.yaml').write_text(PARAMS)
    procs = Processes(tmp_path)
    proc = procs.start([console_script('rnea-controller'), '--urdf', str(default_urdf_path()),
                        '--ros-args', '--params-file', str(tmp_path / 'params.yaml')])
    rclpy.init()
    client = Client()
    try:
        client.change_state(Transition.TRANSITION_CONFIGURE)
        assert wait_for(lambda: client.states.get_subscription_count() > 0, 30.0)
        assert wait_for(lambda: client.node.count_subscribers('/diagnostics') > 0
                        and client.node.count_publishers('/rnea_controller/reference') > 0,
                        30.0)
        q = client.publish(20)  # inactive: taken by the drain timer
        activate_and_hold(client, procs, proc, q)
        q = client.publish(40)  # active: taken by the tick
        time.sleep(0.1)  # the tick has taken it
        client.change_state(Transition.TRANSITION_DEACTIVATE)
        # the final command: gravity at the newest state (a state older by one differs by
        # ~1e-4 N·m)
        assert not np.allclose(gravity(q - STEP), gravity(q), atol=1e-6)
        assert wait_for(lambda: np.allclose(client.commands[-1], gravity(q), atol=1e-6), 10.0)
        q = client.publish(20)  # inactive again
        activate_and_hold(client, procs, proc, q)
        client.received.clear()
        assert wait_for(lambda: client.received and client.received[-1] == client.sent, 5.0), (
            client.received, client.sent)
        time.sleep(1.5)  # none is counted twice, later
        assert client.received[-1] == client.sent == 80, (client.received, client.sent)
        assert 'Traceback' not in procs.output(proc)
        client.change_state(Transition.TRANSITION_DEACTIVATE)
        client.change_state(Transition.TRANSITION_CLEANUP)  # the helper node goes cleanly
        assert proc.poll() is None
        assert procs.stop(proc) == 0, procs.output(proc)[-3000:]
        assert 'Traceback' not in procs.output(proc), procs.output(proc)[-3000:]
    finally:
        client.close()
        rclpy.shutdown()
        procs.close()
