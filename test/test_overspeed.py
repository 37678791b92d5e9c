"""Overspeed is a fault answered while watching (issue 29): the real node over DDS, the MuJoCo
arm of `rnea-sim` pushed beyond a joint's velocity limit.

The simulator (1 kHz states with velocities) pushes wrist_1 with 11 N·m for 15 ms, 4 s after
the first command (`push.*`: a generalized force of the world, added after the drive's effort
clamp): it spins to ~3.5 x its limit (~11 rad/s; its inertia with the arm free is ~0.02 kg·m²,
the hold's feedback a fraction of a N·m there), a speed at which the node refused every state
before. An action goal is running meanwhile. Oracles: the simulator's own joint states
(MuJoCo's), the node's /diagnostics and log, the action's result. state_timeout is 1 s (its
largest value): a loaded host stalls the simulator for a few hundred ms now and then, which
the node rightly calls stale; the test is about states that keep coming. Twice: the
simulator's states with velocities, and positions only (the node estimates the velocities; the
jump gate follows the positions' steps).
"""
import os
import threading
import time

from conftest import arm_and_controller, send_goal, wait_for
from control_msgs.action import FollowJointTrajectory
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
import numpy as np
import pytest
import rclpy
from rclpy.action import ActionClient
from sensor_msgs.msg import JointState
from starvation import check, CpuWait
from std_msgs.msg import Float64MultiArray
from test_action import goal_of, move

from rnea_controller import default_urdf_path, RobotModel
from rnea_controller.ros.realtime import BackgroundSpinner
from rnea_controller.sim.node import HOME

pytestmark = pytest.mark.integration

NS = '/pushed'
JOINT = 'wrist_1_joint'
MODEL = RobotModel.from_urdf_file(default_urdf_path())
J = MODEL.joint_names.index(JOINT)
VMAX = MODEL.velocity_limits[J]  # [rad/s] pi
STATUS = 'rnea_controller: control loop'


class Probe:
    """This process's node: the simulator's joint states (stamp, q, qd, the effort it applies:
    the last command), the commands, the controller's /diagnostics statuses, an action
    client."""

    def __init__(self):
        rclpy.init()
        self.node = rclpy.create_node('overspeed_probe')
        self.lock = threading.Lock()
        self.states, self.commands, self.statuses = [], [], []
        self.node.create_subscription(JointState, f'{NS}/joint_states', self._on_state, 10_000)
        self.node.create_subscription(Float64MultiArray, f'{NS}/effort_controller/commands',
                                      self._on_command, 10_000)
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 100)
        self.action = ActionClient(self.node, FollowJointTrajectory,
                                   f'{NS}/rnea_controller/follow_joint_trajectory')
        self.spinner = BackgroundSpinner(self.node, 'test client', 'events', 0.05)

    def _on_state(self, msg):
        with self.lock:
            self.states.append((msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec,
                                np.array(msg.position), np.array(msg.velocity),
                                np.array(msg.effort)))

    def _on_command(self, msg):
        with self.lock:
            self.commands.append(np.array(msg.data))

    def _on_diagnostics(self, msg):
        with self.lock:
            self.statuses += [s for s in msg.status if s.name == STATUS]

    def status(self, key):
        """The newest status's value of `key` (None before any status)."""
        with self.lock:
            status = self.statuses[-1] if self.statuses else None
        return None if status is None else {kv.key: kv.value for kv in status.values}[key]

    def speeds(self):
        """(stamps [s], |qd| of the pushed joint [rad/s], its effort applied [N·m]) of the
        states so far; of a positions-only stream, each state's step velocity since the one
        before (MuJoCo's positions: the mean velocity over the step)."""
        with self.lock:
            states = list(self.states)
        stamps = np.array([s[0] for s in states])
        efforts = np.array([s[3][J] for s in states])
        if not states or len(states[0][2]):
            return stamps, np.array([abs(s[2][J]) for s in states]), efforts
        q, steps = np.array([s[1][J] for s in states]), np.diff(stamps)
        moved = steps > 0  # a state the probe received twice has no step
        v = np.abs(np.diff(q)[moved] / steps[moved])
        return stamps[1:][moved], v, efforts[1:][moved]

    def close(self):
        self.spinner.stop()
        self.action.destroy()
        self.node.destroy_node()
        rclpy.shutdown()


@pytest.fixture(params=['velocities', 'positions only'])
def pushed(tmp_path, request):
    with arm_and_controller(
            tmp_path, ['--ros-args', '-r', f'__ns:={NS}', '-p', f'push.joint:={JOINT}',
                       '-p', 'push.torque:=11.0', '-p', 'push.start:=4.0',
                       '-p', 'push.duration:=0.015', '-p',
                       f'publish_velocity:={str(request.param == "velocities").lower()}'],
            ['--ros-args', '-r', f'__ns:={NS}', '-p', 'state_timeout:=1.0'], Probe) as setup:
        yield setup


def test_a_push_beyond_the_velocity_limit_is_braked_to_rest_while_watching(pushed):
    probe, procs, sim, controller = pushed
    assert wait_for(lambda: probe.status('mode') == 'hold', 60.0), procs.output(controller)
    assert probe.action.wait_for_server(timeout_sec=20.0)
    handle = send_goal(probe.action, goal_of(move(np.array(HOME), np.full(6, 0.1), 20.0)))
    assert handle is not None and handle.accepted, procs.output(controller)[-3000:]
    result = handle.get_result_async()
    meter = CpuWait({'rnea-sim': sim, 'rnea-controller': controller, 'test': os.getpid()})
    before = {key: int(probe.status(key)) for key in ('rejected joint_states',
                                                      'joint state jumps', 'fast states taken')}
    # fast states before the push are not the push's (18 once in a loaded run, the host
    # starving the hold before the goal): the push's are counted from here
    # the probe is this process's subscriber: starved beside two busy processes, it lost the
    # push's states once (no speed over the limit seen in 30 s, the push logged by the sim)
    check(wait_for(lambda: np.any(probe.speeds()[1] > VMAX), 30.0),
          'no speed beyond the limit seen in 30 s: ' + procs.output(sim), meter)
    assert 'braking' not in str(before) and 'push of 11' in procs.output(sim)
    # braked to rest, then a hold where it stopped (the status at once when braking ends)
    check(wait_for(lambda: 'at rest after braking' in procs.output(controller), 10.0),
          'not at rest 10 s after the push: ' + procs.output(controller)[-3000:], meter)
    check(wait_for(lambda: probe.status('mode') == 'hold', 5.0), 'no hold after braking', meter)
    time.sleep(1.0)
    log = procs.output(controller)
    stamps, speeds, efforts = probe.speeds()
    peak = int(np.argmax(speeds))
    assert speeds[peak] > 2.0 * VMAX, speeds[peak]  # the push made the case: refused before

    after = {key: int(probe.status(key)) for key in before}
    check(after['fast states taken'] > before['fast states taken'],
          'no fast state taken: ' + log[-3000:],
          meter)  # the fast ones shown by their positions

    # the fault named: ERROR in the log and on /diagnostics, the goal aborted with the reason
    assert f"joint '{JOINT}' at " in log and 'beyond its velocity limit 3.14159 rad/s: braking' \
        in log
    with probe.lock:
        errors = [s.message for s in probe.statuses if s.level == DiagnosticStatus.ERROR]
    assert any(m.startswith(f"braking: overspeed: joint '{JOINT}' at ") for m in errors), errors
    # one overspeed; a starved controller (beside two busy processes) braked late and the arm
    # ran beyond the limit again: 3
    check(probe.status('overspeeds') == '1', f"overspeeds {probe.status('overspeeds')}: "
          + log[-3000:], meter)
    assert wait_for(result.done, 5.0)
    outcome = result.result().result
    assert outcome.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    # a starved simulator (no state for state_timeout, 1 s, beside two busy processes) drops
    # the goal as stale before the push: what the host did, not the node
    check(outcome.error_string.startswith('Aborted: the controller dropped the trajectory '
                                          f"(braking: overspeed: joint '{JOINT}' at "),
          f'the goal ended {outcome.error_string!r}', meter)

    # never blind, never silent while it moved: no stale state, and a new command (the brake
    # of each new state) reached the arm within every 0.1 s of its motion, by the simulator's
    # clock: the effort it applies changed
    check('stale' not in log, 'the states went stale', meter)
    moving = list(zip(stamps[speeds > 0.05 * VMAX], efforts[speeds > 0.05 * VMAX]))
    with probe.lock:
        taus = np.array(probe.commands)
    assert np.all(np.abs(taus) <= MODEL.effort_limits)
    changes = [t for (t, e), (_, e_prev) in zip(moving[1:], moving) if e != e_prev]
    assert changes
    # a starved host held one command for 0.22 s once (beside two busy processes)
    silent = np.diff([moving[0][0], *changes, moving[-1][0]]).max()
    check(silent < 0.1, f'the effort the arm applies did not change for {silent:.3f} s '
          'while it moved', meter)

    # the brake: once the push is over (the peak), the speed falls and stays under 1.5 x the
    # limit once it is there; at rest at the end, and held still
    # (a controller starved beside two busy processes braked late: 5.8 rad/s after 4.7)
    below = peak + int(np.argmax(speeds[peak:] < 1.5 * VMAX))
    check(np.all(speeds[below:] < 1.5 * VMAX), f'the speed rose again to '
          f'{speeds[below:].max():.3g} rad/s after it fell under 1.5 x the limit', meter)
    with probe.lock:
        last = [q[J] for t, q, *_ in probe.states if t > stamps[-1] - 0.5]
    check(speeds[-1] < 0.05 * VMAX, f'the arm ends at {speeds[-1]:.3g} rad/s', meter)
    # held where it stopped: within 1 mrad over 0.5 s (a run beside two busy processes moved
    # 1.2 mrad: the hold's commands late; said to be, by the figures of the run)
    check(np.ptp(last) < 1e-3, f'the held joint moved {np.ptp(last):.3g} rad in 0.5 s', meter)
    assert controller.poll() is None and sim.poll() is None

    # every state taken but one at most: when a stall of the host loses the states of the
    # push's peak, the mean of the two velocities over the gap may not say how far it went, nor
    # (positions only) the step before the gap the one after it; the next state, continuing
    # that one, is taken (test_inputs). Before, every state beyond twice the limit was refused
    # (~20 with velocities, 67 with positions only). A host that starves the simulator makes a
    # gap of every late step it catches up, and the brake changes the speed across each (a
    # run beside two busy processes: 3 and 6 refused, the arm braked to rest all the same):
    # said to be, by the figures of the run
    refused = (after['rejected joint_states'] - before['rejected joint_states'],
               after['joint state jumps'] - before['joint state jumps'])
    check(max(refused) <= 1, f'{refused[0]} states refused, {refused[1]} as jumps: {log}',
          meter)
    over = stamps[speeds > VMAX]
    rest = stamps[(stamps > over[0]) & (speeds < 0.05 * VMAX)]
    print(f'peak {speeds[peak] / VMAX:.2f} x the limit; beyond it {over[-1] - over[0]:.3f} s; '
          f'at rest {rest[0] - over[0]:.3f} s after crossing it; '
          f'{after["fast states taken"]} fast states taken, '
          f'{after["rejected joint_states"] - before["rejected joint_states"]} refused')
