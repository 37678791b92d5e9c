"""The `rnea_controller` lifecycle node: thin ROS 2 glue around `trajectory` and `control`.

Subscribes to joint states, trajectories and (optionally) an F/T wrench; a fixed-rate timer
samples the reference one period ahead, computes the control law with one RNEA call, applies
the limits and publishes effort commands, the reference and (1 Hz) diagnostics.

Modes (diagnostics key 'mode'): 'unconfigured', 'inactive', 'waiting for joint states',
'hold' (no trajectory: hold the measured position at activation, or the last point),
'tracking', 'stale: gravity hold', 'stale: stopped', 'finished'.

Stale-state policy: when the newest valid joint state is older than `state_timeout` (its age is
measured on this node's steady clock, from its reception), tracking stops and the running
trajectory is dropped; then by `stale_policy`:
    hold_then_stop  (default) publish g(q_last), the torque that holds the last known position
                    against gravity, for `stale_hold_time` seconds, then publish nothing (the
                    effort controller's own command timeout takes over);
    hold            publish g(q_last) until states return;
    stop            publish nothing at once.
When fresh states return the node holds the measured position (gravity compensation + PD).

On deactivate, shutdown, Ctrl-C or SIGTERM the node publishes one final command chosen by
`final_command`: 'gravity_hold' (g(q) at the last measured position) or 'zero'.

Command line (besides --ros-args): `--executor events|single` (default events: rclpy's
EventsExecutor, about half the CPU of the SingleThreadedExecutor at 1 kHz, see
bench/bench_node.py), `--urdf FILE` (robot_description from a file), `--realtime-priority N`
(SCHED_FIFO priority for the loop; default 50 as ros2_control's controller manager, 0 = off;
without the privilege it warns once and runs with the default scheduler), `--cpu-affinity CPU
[CPU ...]` (bind the process, DDS threads included, to these cores, as ros2_control_node's
`cpu_affinity`; default: not bound).

Diagnostics ('rnea_controller: control loop', 1 Hz, published by the tick once a second right
after its command, in the slack of that period): mode, control law, loop rate [Hz], period
jitter p99 [us], tick compute p50/p99 [us] (tick start to reference published), overruns (ticks
longer than a period), missed ticks, ticks, state age [ms], joint states received, rejected
messages (and per input), non-finite fallbacks, saturation <joint> (ticks that joint's command
was limited), diagnostics publish [us] (the previous one's cost).
"""
import argparse
import array
import gc
import math
import os
import signal
import struct
import sys
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
import numpy as np
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
import rclpy
from rclpy.duration import Duration
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message, serialize_message
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from rnea_controller.control.law import (
    Controller,
    DEFAULTS,
    joint_of_parameter,
    validate_parameters,
)
from rnea_controller.control.loop_stats import LoopStats
from rnea_controller.control.trajectory import plan, Trajectory, TrajectoryPoint
from rnea_controller.dynamics.model import RobotModel
from rnea_controller.errors import ModelError, ParameterError, TrajectoryError, UrdfError
from rnea_controller.ros.action_server import TrajectoryActionServer
from rnea_controller.ros.cdr import JointStateReader

NODE_NAME = 'rnea_controller'
STATUS_NAME = 'rnea_controller: control loop'
HUGE = 1e9

#: name: (default, description, floating or integer range (low, high) or None)
PARAMETERS = {
    'autostart': (True, 'configure and activate by itself once a model is available', None),
    'robot_description': ('', 'URDF text; empty: take it from the robot_description topic',
                          None),
    'joints': (Parameter.Type.STRING_ARRAY, 'controlled joints, command order; unset or []: '
               'all actuated joints of the model (set while unconfigured)', None),
    'command_topic': ('/effort_controller/commands', 'std_msgs/Float64MultiArray effort '
                      'commands [N·m], ordered as joints (set while unconfigured)', None),
    'joint_states_topic': ('joint_states', 'sensor_msgs/JointState input', None),
    'update_rate': (DEFAULTS['update_rate'], 'control loop rate [Hz] (set while inactive)',
                    (1, 10000)),
    'control_law': (DEFAULTS['control_law'], 'computed_torque: tau = RNEA(q, qd, qdd_d + Kp e '
                    '+ Kd ed), Kp [1/s^2], Kd [1/s]; feedforward_pd: tau = RNEA(q_d, qd_d, '
                    'qdd_d) + Kp e + Kd ed, Kp [N·m/rad], Kd [N·m·s/rad]', None),
    'torque_rate_limit': (0.0, 'max |d tau/dt| per joint [N·m/s]; 0: no rate limit', (0, HUGE)),
    'payload.link': ('', 'link carrying a payload; empty: none', None),
    'payload.mass': (0.0, 'payload mass [kg]', (0, HUGE)),
    'payload.com': (DEFAULTS['payload.com'], 'payload centre of mass in the link frame [m]',
                    None),
    'payload.inertia': (DEFAULTS['payload.inertia'], 'payload inertia about its centre of '
                        'mass, link axes: ixx ixy ixz iyy iyz izz [kg·m^2]', None),
    'gravity': (DEFAULTS['gravity'], 'gravity in the base frame [m/s^2]', None),
    'allow_partial_joints_goal': (False, 'accept trajectories naming only some joints; the '
                                  'others keep their desired position', None),
    'state_timeout': (DEFAULTS['state_timeout'], 'a joint state older than this is stale [s]',
                      (1e-4, 60.0)),
    'stale_policy': (DEFAULTS['stale_policy'], 'on stale state: hold_then_stop (gravity hold '
                     'for stale_hold_time, then no command), hold, or stop', None),
    'stale_hold_time': (DEFAULTS['stale_hold_time'], 'gravity hold time of hold_then_stop [s]',
                        (0.0, 3600.0)),
    'final_command': (DEFAULTS['final_command'], 'command published on deactivate, shutdown '
                      'and Ctrl-C: gravity_hold or zero', None),
    'external_wrench_timeout': (DEFAULTS['external_wrench_timeout'], 'an ~/external_wrench '
                                'older than this is ignored [s]; 0: never', (0.0, 3600.0)),
}
PER_JOINT = {
    'gains.{}.p': 'proportional gain Kp, computed_torque [1/s^2], feedforward_pd [N·m/rad]; '
                  'unset: 400 1/s^2, or 400·M_ii(q0) N·m/rad',
    'gains.{}.d': 'derivative gain Kd, computed_torque [1/s], feedforward_pd [N·m·s/rad]; '
                  'unset: 40 1/s, or 40·M_ii(q0) N·m·s/rad',
    'effort_limits.{}': 'effort limit override [N·m], at most the URDF limit; unset: URDF',
}
WHILE_UNCONFIGURED = ('robot_description', 'joints', 'command_topic', 'joint_states_topic')


def _descriptor(description, bounds, read_only=False):
    descriptor = ParameterDescriptor(description=description, read_only=read_only)
    if bounds is not None and isinstance(bounds[0], int) and isinstance(bounds[1], int):
        descriptor.integer_range = [IntegerRange(from_value=bounds[0], to_value=bounds[1])]
    elif bounds is not None:
        descriptor.floating_point_range = [FloatingPointRange(
            from_value=float(bounds[0]), to_value=float(bounds[1]))]
    return descriptor


class Serialized:
    """A message serialized once (CDR), whose float64 arrays and header stamp are numpy views
    into the serialized bytes: a tick writes numbers in place and publishes the bytes, with no
    Python-to-C conversion and no serialization per message.

    arrays: {field: length}; the offsets are found by serializing the message with sentinel
    values (distinct doubles; stamp sec/nanosec) and locating them.
    """

    SENTINEL = 1.2345678901234567e300

    def __init__(self, msg, arrays):
        for k, (field, length) in enumerate(arrays.items()):
            setattr(msg, field, array.array('d', [self.SENTINEL * (k + 2)] * length))
        stamped = hasattr(msg, 'header')
        if stamped:
            msg.header.stamp.sec, msg.header.stamp.nanosec = 0x5A5A5A5A, 0x3C3C3C3C
        self._buffer = bytearray(serialize_message(msg))
        self.arrays = {}
        for k, (field, length) in enumerate(arrays.items()):
            offset = self._buffer.find(struct.pack('<d', self.SENTINEL * (k + 2)))
            self.arrays[field] = np.frombuffer(self._buffer, np.float64, length, offset)
            self.arrays[field][:] = 0.0
        if stamped:
            offset = self._buffer.find(struct.pack('<iI', 0x5A5A5A5A, 0x3C3C3C3C))
            self.stamp = np.frombuffer(self._buffer, np.uint32, 2, offset)
            self.stamp[:] = 0

    def bytes(self):
        """The serialized message as it is now."""
        return bytes(self._buffer)


class ControllerNode(LifecycleNode):
    """rnea_controller: computed-torque control of an arm over ROS 2 topics (see module doc)."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        for name, (default, description, bounds) in PARAMETERS.items():
            self.declare_parameter(name, default, _descriptor(description, bounds))
        self.config = None
        self.mode = 'unconfigured'
        self.rejected = {'joint_states': 0, 'joint_trajectory': 0, 'external_wrench': 0}
        self.states_received = 0
        self._urdf_from_topic = None
        self._base_model = None
        self._timer = None
        self.action_server = None
        self._publishers_, self._subscriptions_ = [], []
        self._declared = [name for name in PARAMETERS if name in DEFAULTS]
        self.add_on_set_parameters_callback(self._on_set_parameters)
        if not self.get_parameter('robot_description').value:
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                 reliability=ReliabilityPolicy.RELIABLE)
            self.create_subscription(String, 'robot_description', self._on_description, latched)

    # --- lifecycle ----------------------------------------------------------------------

    def autostart(self):
        """Configure and activate now if `autostart` is set and a model is available."""
        if self.get_parameter('autostart').value and self.mode == 'unconfigured':
            if self.get_parameter('robot_description').value or self._urdf_from_topic:
                if self.trigger_configure() == TransitionCallbackReturn.SUCCESS:
                    self.trigger_activate()

    def on_configure(self, state):
        try:
            self._base_model = RobotModel.from_urdf_string(self._urdf())
            self._declare_per_joint(self._base_model)
            self.config = validate_parameters(self._values(), self._base_model)
        except (UrdfError, ModelError, ParameterError) as error:
            self.get_logger().error(f'configure failed: {error}')
            return TransitionCallbackReturn.FAILURE
        self._allocate(self.config)
        self._create_entities()
        self.mode = 'inactive'
        self.get_logger().info(f'configured: {self.config.law} on {", ".join(self.config.joints)}'
                               f' at {self.config.update_rate:g} Hz')
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state):
        self.trajectory = None  # the first fresh state starts a hold at the measured position
        self.controller.reset()
        self._stale_since = None
        self.mode = 'waiting for joint states'
        self._timer = self.create_timer(self.config.period, self._tick)
        self.action_server = TrajectoryActionServer(self, dict(self.config.values))
        self._diagnostics_due = time.perf_counter() + 1.0
        self.get_logger().info('active')
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state):
        self._stop_loop()
        self.mode = 'inactive'
        return TransitionCallbackReturn.SUCCESS

    def on_cleanup(self, state):
        for publisher in self._publishers_:
            self.destroy_publisher(publisher)
        for subscription in self._subscriptions_:
            self.destroy_subscription(subscription)
        self._publishers_, self._subscriptions_ = [], []
        self.config = None
        self.mode = 'unconfigured'
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state):
        self.finish()
        return TransitionCallbackReturn.SUCCESS

    def finish(self):
        """Publish the final command once if the loop is running, and stop it (idempotent)."""
        if self._timer is not None:
            self._stop_loop()
            self.mode = 'finished'

    def _stop_loop(self):
        self.destroy_timer(self._timer)
        self._timer = None
        if self.have_state:
            cfg = self.config
            tau = (self.controller.gravity_hold(cfg, self.q, rate_limited=False)
                   if cfg.final_command == 'gravity_hold' else np.zeros(len(cfg.joints)))
            self.command_msg.arrays['data'][:] = tau
            self.command_pub.publish(self.command_msg.bytes())
            self.command_pub.wait_for_all_acked(Duration(seconds=0.2))  # before DDS goes
            self.get_logger().info(f'final command ({cfg.final_command}): '
                                   f'{np.array2string(tau, precision=3)} N·m')
        if self.action_server is not None:  # after the final command: its goal ends as JTC's
            self.action_server.destroy()
            self.action_server = None

    # --- set-up -------------------------------------------------------------------------

    def _urdf(self):
        urdf = self.get_parameter('robot_description').value or self._urdf_from_topic
        if not urdf:
            raise UrdfError('no robot_description yet (parameter empty, nothing on the topic)')
        return urdf

    def _declare_per_joint(self, model):
        joints = self.get_parameter_or('joints', Parameter('joints', value=None)).value
        for joint in (joints or model.joint_names):
            for pattern, description in PER_JOINT.items():
                name = pattern.format(joint)
                if not self.has_parameter(name):
                    self.declare_parameter(name, Parameter.Type.DOUBLE,
                                           _descriptor(description, (0.0, HUGE)))
                    self._declared.append(name)

    def _values(self, changes=()):
        """Controller parameter values (unset: None) with `changes` applied, for the joints."""
        values = {n: self.get_parameter_or(n, Parameter(n, value=None)).value
                  for n in self._declared}
        values.update({p.name: p.value for p in changes})
        values['joints'] = list(values.get('joints') or [])
        joints = values['joints'] or self._base_model.joint_names
        return {n: v for n, v in values.items()
                if joint_of_parameter(n) is None or joint_of_parameter(n) in joints}

    def _allocate(self, cfg):
        """Preallocated state, reference and messages (reused at every tick)."""
        n, m = cfg.model.n, len(cfg.joints)
        self.q, self.qd = np.zeros(n), np.zeros(n)
        self._scratch = np.zeros((2, n))
        self.have_state = False
        self._state_time = -math.inf
        self._names = None
        self._index = None
        self._reader = JointStateReader()
        self._ref = np.zeros((3, m))
        self._f_ext = None
        self._wrench_time = -math.inf
        self.controller = Controller(cfg)
        self._warm_up(cfg.model)
        self.command_msg = Serialized(Float64MultiArray(), {'data': m})
        self.reference_msg = Serialized(JointState(name=list(cfg.joints)),
                                        {'position': m, 'velocity': m, 'effort': m})
        sim_time = self.get_parameter('use_sim_time').value
        self._now_ns = (lambda: self.get_clock().now().nanoseconds) if sim_time else time.time_ns
        self._t0_ns = self._now_ns()
        self.stats = LoopStats()
        self._diagnostics_time = 0.0

    @staticmethod
    def _warm_up(model):
        """Compile the trajectory sampler now, not in a tick (the Controller warms the law)."""
        Trajectory.hold(np.zeros(model.n)).sample(0.0)

    def _create_entities(self):
        state_qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
        topic = self.get_parameter('command_topic').value
        self.command_pub = self.create_publisher(Float64MultiArray, topic, 10)
        self.reference_pub = self.create_publisher(JointState, '~/reference', 10)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self._publishers_ = [self.command_pub, self.reference_pub, self.diagnostics_pub]
        self._subscriptions_ = [
            self.create_subscription(JointState, self.get_parameter('joint_states_topic').value,
                                     self._on_joint_states, state_qos, raw=True),
            self.create_subscription(JointTrajectory, '~/joint_trajectory', self._on_trajectory,
                                     10),
            self.create_subscription(WrenchStamped, '~/external_wrench', self._on_wrench, 10),
        ]

    # --- the loop -----------------------------------------------------------------------

    def _tick(self):
        """One control period: newest state -> reference one period ahead -> law -> publish."""
        t_start = time.perf_counter()
        cfg = self.config  # swapped whole by _on_set_parameters, never mutated
        now_ns = self._now_ns()  # ROS time (system time unless use_sim_time)
        if t_start - self._state_time > cfg.state_timeout:
            self._stale_tick(cfg, t_start)
        else:
            if self.action_server is not None:
                self.action_server.swap_in()
            if self.trajectory is None:
                self._hold_measured(now_ns)
            t = (now_ns - self._t0_ns) * 1e-9 + cfg.period
            ref = self.trajectory.sample(t, self._ref)
            tau = self.controller.command(cfg, self.q, self.qd, ref, self._wrench(cfg, t_start))
            self.mode = 'hold' if self.trajectory.is_holding(t) else 'tracking'
            self._publish(tau, ref, now_ns + round(cfg.period * 1e9))
            if self.action_server is not None:
                self.action_server.leave_snapshot(now_ns + round(cfg.period * 1e9), ref, self.q,
                                                  self.qd, cfg.index, tau)
        t_end = time.perf_counter()
        self.stats.record(t_start, t_end, cfg.period)
        if t_end >= self._diagnostics_due:  # once a second, in the slack after the command
            self._diagnostics_due = max(self._diagnostics_due + 1.0, t_end)
            self._publish_diagnostics()
            self._diagnostics_time = time.perf_counter() - t_end

    def _publish(self, tau, ref, ref_ns):
        """Command and reference, written into their pre-serialized messages and published.

        The reference is stamped `ref_ns`, the instant its desired state is for (this tick plus
        one period), so that a bag pairs q_d(t) with the q(t) measured at that same instant.
        """
        self.command_msg.arrays['data'][:] = tau
        self.command_pub.publish(self.command_msg.bytes())
        reference = self.reference_msg.arrays
        reference['position'][:] = ref[0]
        reference['velocity'][:] = ref[1]
        reference['effort'][:] = self.controller.feedforward
        self.reference_msg.stamp[:] = divmod(ref_ns, 1_000_000_000)
        self.reference_pub.publish(self.reference_msg.bytes())

    def _wrench(self, cfg, t_start):
        """f_ext from the newest ~/external_wrench unless older than external_wrench_timeout."""
        timeout = cfg.external_wrench_timeout or math.inf
        return self._f_ext if t_start - self._wrench_time < timeout else None

    def _hold_measured(self, now_ns):
        """Hold the measured position from now on (activation, return of fresh states)."""
        self.trajectory = Trajectory.hold(self.q[self.config.index], self._seconds(now_ns))
        self._stale_since = None

    def _stale_tick(self, cfg, t_start):
        """No fresh state: drop the trajectory and act by `stale_policy` (module doc)."""
        if not self.have_state:
            self.mode = 'waiting for joint states'
            return
        if self._stale_since is None:
            self._stale_since = t_start
            self.trajectory = None
            self.get_logger().warning(f'joint states stale (> {cfg.state_timeout} s): '
                                      f'{cfg.stale_policy}')
        held = t_start - self._stale_since
        if cfg.stale_policy == 'hold' or (cfg.stale_policy == 'hold_then_stop'
                                          and held <= cfg.stale_hold_time):
            tau = self.controller.gravity_hold(cfg, self.q)
            self._ref[0] = self.q[cfg.index]
            self._ref[1:] = 0.0
            self.mode = 'stale: gravity hold'
            self._publish(tau, self._ref, self._now_ns())
        else:
            self.mode = 'stale: stopped'
            self.controller.reset()

    def _seconds(self, ns):
        return (ns - self._t0_ns) * 1e-9

    # --- inputs -------------------------------------------------------------------------

    def _on_joint_states(self, data):
        """Take the model's joints from a serialized JointState (any order, extras ignored).

        Read in place from the bytes: `JointStateReader.take`, one compiled call, for names
        already seen; otherwise the general path (other encodings are deserialized). A message
        with mismatched lengths, non-finite values or missing joints is dropped and counted.
        """
        self.states_received += 1
        if not self._reader.take(data, self._scratch):
            try:
                self._read_general(data)
            except (ValueError, TypeError, RuntimeError) as error:
                self._names = None
                return self._reject('joint_states', error)
        self.q[:] = self._scratch[0]
        self.qd[:] = self._scratch[1]
        self._state_time = time.perf_counter()
        self.have_state = True

    def _read_general(self, data):
        """Any JointState into self._scratch, or ValueError saying what is wrong with it."""
        state = self._reader.read(data)
        in_place = state is not None
        if not in_place:
            msg = deserialize_message(data, JointState)
            state = (list(msg.name), np.array(msg.position), np.array(msg.velocity))
        names, position, velocity = state
        if names != self._names:
            self._index = self._state_index(names)
            self._names = names
        n = len(names)
        if len(position) != n or len(velocity) != n:
            raise ValueError(f'{len(position)} positions and {len(velocity)} velocities '
                             f'for {n} names')
        np.take(position, self._index, out=self._scratch[0])
        np.take(velocity, self._index, out=self._scratch[1])
        if not math.isfinite(self._scratch.sum()):
            raise ValueError('non-finite position or velocity of a model joint')
        if in_place:
            self._reader.remember(self._index)  # the next ones with these names: fast path

    def _state_index(self, names):
        position = {name: i for i, name in enumerate(names)}
        missing = [j for j in self.config.model.joint_names if j not in position]
        if missing:
            raise ValueError(f'joints {missing} of the model are missing')
        return np.array([position[j] for j in self.config.model.joint_names], dtype=np.intp)

    def _on_trajectory(self, msg):
        """Replace the reference from the current desired state, or refuse with the reason."""
        try:
            if self._timer is None or self.trajectory is None:
                raise TrajectoryError(f'controller is {self.mode}: no trajectory accepted')
            now = self._seconds(self._now_ns())
            stamp = msg.header.stamp
            start = None if stamp.sec == 0 and stamp.nanosec == 0 else self._seconds(
                stamp.sec * 1_000_000_000 + stamp.nanosec)
            points = [TrajectoryPoint(p.time_from_start.sec + p.time_from_start.nanosec * 1e-9,
                                      tuple(p.positions), tuple(p.velocities),
                                      tuple(p.accelerations)) for p in msg.points]
            cfg = self.config
            self.trajectory = plan(
                list(msg.joint_names), points, joint_names=cfg.joints,
                position_limits=cfg.model.position_limits[cfg.index],
                current=self.trajectory.sample(now), now=now, start_time=start,
                allow_partial=cfg.allow_partial)
        except (TrajectoryError, ValueError, TypeError) as error:
            return self._reject('joint_trajectory', error)
        self.get_logger().info(f'trajectory accepted: {len(points)} points, ends in '
                               f'{self.trajectory.end_time - now:.3f} s')

    def _on_wrench(self, msg):
        """F/T sensor: the wrench the environment applies on link `frame_id` -> f_ext."""
        try:
            f, m = msg.wrench.force, msg.wrench.torque
            w = np.array([f.x, f.y, f.z, m.x, m.y, m.z])
            self.config.model.link_frame(msg.header.frame_id)
            if not np.all(np.isfinite(w)):
                raise ValueError(f'non-finite wrench {w.tolist()}')
        except (ModelError, ValueError) as error:
            return self._reject('external_wrench', error)
        self._f_ext = {msg.header.frame_id: w}
        self._wrench_time = time.perf_counter()

    def _on_description(self, msg):
        if self._urdf_from_topic is None or self.mode == 'unconfigured':
            self._urdf_from_topic = msg.data
            self.autostart()

    def _reject(self, kind, error):
        """Count a refused message and say why (joint-state warnings at most once a second)."""
        self.rejected[kind] += 1
        message = f'{kind} message refused ({self.rejected[kind]} so far): {error}'
        if kind == 'joint_states':
            self.get_logger().warning(message, throttle_duration_sec=1.0)
        else:
            self.get_logger().error(message)

    # --- parameters ---------------------------------------------------------------------

    def _on_set_parameters(self, parameters):
        """Validate a change as a whole; on success swap in the new config (between ticks)."""
        names = {p.name for p in parameters}
        frozen = sorted(names & set(WHILE_UNCONFIGURED))
        if self.config is not None and frozen:
            return SetParametersResult(
                successful=False, reason=f'{frozen} can only change while unconfigured')
        if self._timer is not None and 'update_rate' in names:
            return SetParametersResult(successful=False,
                                       reason='update_rate can only change while inactive')
        if self.config is None:
            return SetParametersResult(successful=True)  # checked as a whole at configure
        try:
            config = validate_parameters(self._values(parameters), self._base_model)
        except ParameterError as error:
            return SetParametersResult(successful=False, reason=str(error))
        self.config = config
        self.get_logger().info(f'parameters changed: {sorted(names)}')
        return SetParametersResult(successful=True)

    # --- diagnostics --------------------------------------------------------------------

    def _publish_diagnostics(self):
        """The 1 Hz status; called from the tick right after its command, so that its few
        hundred microseconds use the slack of that period and never delay a tick."""
        cfg = self.config
        rate, jitter, p50, p99 = self.stats.summary(cfg.period)
        age = (time.perf_counter() - self._state_time) * 1e3 if self.have_state else math.inf
        values = {
            'mode': self.mode, 'control law': cfg.law, 'loop rate [Hz]': f'{rate:.1f}',
            'period jitter p99 [us]': f'{jitter:.1f}', 'tick compute p50 [us]': f'{p50:.1f}',
            'tick compute p99 [us]': f'{p99:.1f}',
            'overruns': self.stats.overruns, 'missed ticks': self.stats.missed,
            'ticks': self.stats.count, 'state age [ms]': f'{age:.1f}',
            'joint states received': self.states_received,
            'rejected messages': sum(self.rejected.values()),
            **{f'rejected {kind}': count for kind, count in self.rejected.items()},
            'non-finite fallbacks': self.controller.fallbacks,
            **{f'saturation {j}': int(c) for j, c in zip(cfg.joints, self.controller.saturation,
                                                         strict=True)},
            'diagnostics publish [us]': f'{self._diagnostics_time * 1e6:.0f}',
        }
        stale = self.mode.startswith('stale') or self.mode.startswith('waiting')
        status = DiagnosticStatus(
            level=DiagnosticStatus.WARN if stale else DiagnosticStatus.OK, name=STATUS_NAME,
            message=self.mode, hardware_id=cfg.model.name,
            values=[KeyValue(key=k, value=str(v)) for k, v in values.items()])
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.diagnostics_pub.publish(msg)


def make_executor(kind):
    """'events': rclpy.experimental.EventsExecutor (default); 'single': SingleThreadedExecutor."""
    if kind == 'events':
        from rclpy.experimental import EventsExecutor
        return EventsExecutor()
    return rclpy.executors.SingleThreadedExecutor()


_STOP = []


def _threads():
    """Ids of this process's threads (those already started, e.g. by numpy's BLAS, too)."""
    return [int(tid) for tid in os.listdir('/proc/self/task')]


def set_realtime_priority(priority):
    """SCHED_FIFO at `priority` for this process: its threads now and those created later."""
    try:
        for tid in _threads():
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, ValueError) as error:
        print(f'controller: cannot set SCHED_FIFO priority {priority}: {error}; '
              'running with the default scheduler', file=sys.stderr)


def set_cpu_affinity(cpus):
    """Bind this process (its threads now and later) to `cpus`; SystemExit if it can't."""
    try:
        for tid in _threads():
            os.sched_setaffinity(tid, cpus)
    except (OSError, ValueError) as error:
        allowed = sorted(os.sched_getaffinity(0))
        raise SystemExit(f'controller: --cpu-affinity {" ".join(map(str, cpus))}: {error} '
                         f'(this process may use CPUs {allowed})') from None


def _request_stop(signum, frame):
    """SIGINT/SIGTERM: ask the spin loop to stop (no exception inside a callback)."""
    _STOP.append(signum)


def main(args=None):
    """Console script `controller` / `rnea-controller` (ROS arguments after --ros-args)."""
    argv = remove_ros_args(sys.argv if args is None else args)[1:]
    parser = argparse.ArgumentParser(prog='controller', description=__doc__.split('\n')[0])
    parser.add_argument('--executor', choices=('events', 'single'), default='events',
                        help='rclpy executor (default: events, lower CPU; see bench_node.py)')
    parser.add_argument('--realtime-priority', type=int, default=50, metavar='N',
                        help='SCHED_FIFO priority N (1-99) for the control loop, as '
                             "ros2_control's controller manager (thread_priority 50); default "
                             '50; 0: default scheduler. Without the privilege (CAP_SYS_NICE or '
                             'an rtprio limit) it says so once and runs normally')
    parser.add_argument('--cpu-affinity', type=int, nargs='+', metavar='CPU',
                        help="bind the process, DDS threads included, to these CPU cores, as "
                             "ros2_control_node's cpu_affinity (default: not bound). One "
                             'isolated core keeps the loop and its DDS threads on warm caches; '
                             'see bench/bench_node.py')
    parser.add_argument('--urdf', metavar='FILE',
                        help='read robot_description from this URDF file (instead of the '
                             'parameter or topic)')
    options = parser.parse_args(argv)
    overrides = []
    if options.urdf:
        with open(options.urdf, encoding='utf-8') as file:
            overrides.append(Parameter('robot_description', value=file.read()))
    if options.cpu_affinity:  # before rclpy.init: the DDS threads inherit it
        set_cpu_affinity(options.cpu_affinity)
    if options.realtime_priority:
        set_realtime_priority(options.realtime_priority)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGINT, _request_stop)
    signal.signal(signal.SIGTERM, _request_stop)
    node = ControllerNode(parameter_overrides=overrides)
    executor = make_executor(options.executor)
    executor.add_node(node)
    try:
        node.autostart()
        gc.freeze()  # objects made so far are never scanned again: shorter GC pauses in ticks
        while rclpy.ok() and not _STOP:  # spin_once returns to Python: Ctrl-C seen each tick
            executor.spin_once(timeout_sec=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        node.finish()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
