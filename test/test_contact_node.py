"""The world pushes back, in the real node over DDS: `rnea-sim` with an obstacle on the arm's
path (`obstacle.*`), the controller with its defaults, a FollowJointTrajectory goal that drives
the wrist into it. Oracles: the simulator's contact force (MuJoCo, its /diagnostics), the
node's /diagnostics and log, the action's result. state_timeout 1 s as in test_overspeed (a
loaded host stalls the simulator now and then).
"""
import threading

from conftest import arm_and_controller, send_goal, wait_for
from control_msgs.action import FollowJointTrajectory
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
import numpy as np
import pytest
import rclpy
from rclpy.action import ActionClient
from starvation import check, CpuWait
from test_action import goal_of, move
from test_contact import ISO_TS_15066, obstacle_on_the_path

from rnea_controller.ros.realtime import BackgroundSpinner
from rnea_controller.sim.node import HOME

pytestmark = pytest.mark.integration

NS = '/touched'
CONTROLLER, SIM = 'rnea_controller: control loop', 'rnea_sim: plant'


class Probe:
    """This process's node: /diagnostics of both, an action client."""

    def __init__(self):
        rclpy.init()
        self.node = rclpy.create_node('contact_probe')
        self.lock = threading.Lock()
        self.statuses = {CONTROLLER: [], SIM: []}
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 100)
        self.action = ActionClient(self.node, FollowJointTrajectory,
                                   f'{NS}/rnea_controller/follow_joint_trajectory')
        self.spinner = BackgroundSpinner(self.node, 'test client', 'events', 0.05)

    def _on_diagnostics(self, msg):
        with self.lock:
            for status in msg.status:
                if status.name in self.statuses:
                    self.statuses[status.name].append(status)

    def value(self, name, key):
        """The newest status's value of `key` (None before any)."""
        with self.lock:
            status = self.statuses[name][-1] if self.statuses[name] else None
        return None if status is None else {kv.key: kv.value for kv in status.values}.get(key)

    def close(self):
        self.spinner.stop()
        self.action.destroy()
        self.node.destroy_node()
        rclpy.shutdown()


@pytest.fixture
def touched(tmp_path):
    (_, centre, (radius,)), = obstacle_on_the_path()
    with arm_and_controller(
            tmp_path, ['--ros-args', '-r', f'__ns:={NS}', '-p', 'obstacle.shape:=sphere',
                       '-p', f'obstacle.position:={[round(x, 4) for x in centre]}',
                       '-p', f'obstacle.size:=[{radius}]'],
            ['--ros-args', '-r', f'__ns:={NS}', '-p', 'state_timeout:=1.0'], Probe) as setup:
        yield setup


def test_a_goal_driving_the_arm_into_an_obstacle_is_aborted_and_the_arm_held(touched):
    probe, procs, sim, controller = touched
    assert wait_for(lambda: probe.value(CONTROLLER, 'mode') == 'hold', 60.0), (
        procs.output(controller))
    assert probe.action.wait_for_server(timeout_sec=20.0)
    delta = np.zeros(6)
    delta[0] = 1.0
    meter = CpuWait({'rnea-sim': sim, 'rnea-controller': controller})
    handle = send_goal(probe.action, goal_of(move(np.array(HOME), delta, 4.0)))
    assert handle is not None and handle.accepted, procs.output(controller)[-3000:]
    result = handle.get_result_async()
    assert wait_for(result.done, 20.0), procs.output(controller)
    outcome = result.result().result
    assert outcome.error_code == FollowJointTrajectory.Result.INVALID_GOAL, outcome.error_string
    # a host that starves the simulator drops the goal as stale instead: said so, by its figures
    check(outcome.error_string.startswith(
        'Aborted: the controller dropped the trajectory (holding: contact: joint '
        "'shoulder_pan_joint' external torque "), outcome.error_string, meter)
    # ERROR on /diagnostics and in the log, naming the joint and its torque; still commanding
    assert wait_for(lambda: probe.value(CONTROLLER, 'mode') == 'holding: contact', 5.0)
    with probe.lock:
        errors = [s.message for s in probe.statuses[CONTROLLER]
                  if s.level == DiagnosticStatus.ERROR]
    assert any(m.startswith("holding: contact: joint 'shoulder_pan_joint' external torque ")
               for m in errors), errors
    log = procs.output(controller)
    assert "contact: joint 'shoulder_pan_joint' external torque " in log, log
    assert 'contact with the obstacle' in procs.output(sim)
    assert probe.value(CONTROLLER, 'contacts') == '1'
    ticks = int(probe.value(CONTROLLER, 'ticks'))
    assert wait_for(lambda: int(probe.value(CONTROLLER, 'ticks')) > ticks + 500, 5.0)
    assert probe.value(CONTROLLER, 'mode') == 'holding: contact'  # until a new trajectory
    assert wait_for(lambda: probe.value(SIM, 'contact force peak [N]') is not None, 5.0)
    peak = float(probe.value(SIM, 'contact force peak [N]'))
    print(f'contact force peak {peak} N (MuJoCo); {outcome.error_string}')
    assert 0.0 < peak < ISO_TS_15066
    thresholds = [float(x) for x in probe.value(CONTROLLER, 'contact thresholds [N·m]').split()]
    assert thresholds == [30.0, 30.0, 30.0, 5.6, 5.6, 5.6]  # 0.2 x the effort limits
    torque = [float(x) for x in probe.value(CONTROLLER, 'external torque [N·m]').split()]
    assert abs(torque[0]) < 0.5 * thresholds[0], torque  # held, no longer pushing
    assert controller.poll() is None and sim.poll() is None
