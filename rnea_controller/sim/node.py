"""rnea_sim: the simulated arm as a ROS 2 node, standing in for a ros2_control stack.

MuJoCo integrates the arm (see `rnea_controller.sim.plant`); this node is the ROS glue. Topic
names are relative, so that a namespace (`--ros-args -r __ns:=/arm1`) applies to all of them:

- subscribes to effort commands (std_msgs/Float64MultiArray, `command_topic`, default
  `effort_controller/commands`, ordered as parameter `joints`; default: the joints the rnea
  controller controls by default (`control.law.default_joints`: every joint in URDF tree order
  but mimic joints and their leaders, as a gripper's fingers have their own controller on a
  real stack; joints not commanded are held still at their initial positions, as that
  controller holds them: `hold_uncommanded`, `held_joints`). Like ros2_control's
  JointGroupEffortController it applies the last command until a newer one arrives, forever:
  that controller has no timeout. `command_timeout` [s] > 0 adds a hardware-side watchdog (zero
  effort after that long without a command, logged). A command takes effect, after
  `command_delay` [s], from the first physics step that starts after its arrival (a zero-order
  hold, as a drive applies it at its next cycle). Commands of the wrong length or with
  non-finite values are refused and counted. Before the first command the
  joints are braked at `initial_positions` (`hold_until_first_command`), as a real arm waits on
  its brakes for its controller. With `compensates_gravity` the arm adds g(q) to every command
  itself, as Franka and KUKA FRI do (see the plant).
- publishes `joint_states` (sensor_msgs/JointState: position and velocity with optional sensor
  noise, effort = the applied command, clipped to the URDF limits), stamped with the instant
  the state was sampled, at `publish_rate` [Hz] (default: every physics step), each after a
  random delay U(0, `publish_jitter`) [s]; with `publish_velocity` false the velocity array is
  empty, as positions-only drivers send it. `robot_description` (std_msgs/String,
  transient-local) with the URDF as given, never with the plant-only payload; `/diagnostics`
  (absolute, as every ROS node publishes it) at 1 Hz (status 'rnea_sim: plant').
- an external push (issue 29): `push.torque` [N·m or N] on joint `push.joint` from
  `push.start` [s] of simulated time after the first command for `push.duration` [s] (never
  lost in the steps a late wake skips, see Timing), a generalized force of the
  world added after the effort clamp (`Plant.external`), logged when it starts and ends: a
  collision or a hand that drives a joint beyond its velocity limit.
- an obstacle (contact detection): `obstacle.shape` 'box' or 'sphere' fixed in the world at
  `obstacle.position` [m] (base frame) with `obstacle.size` (a box's three half sizes, a
  sphere's radius [m]); the arm's links collide with it (`PlantOptions.obstacles`: the URDF's
  primitive shapes, else capsules of radius `obstacle.link_radius`). The largest contact force
  so far is on /diagnostics ('contact force peak [N]') and logged when a contact starts.
- a second node named as ros2_control's effort controller would be (`<ns>/effort_controller`
  for the default command topic) with the read-only parameter `joints` (the command order), so
  that the rnea controller's activation check of its joints finds what it finds on a real stack.

Timing: sim time = wall time. A dedicated thread steps the physics at 1/timestep (1 kHz) against
absolute wall-clock deadlines t0 + k·dt. When it wakes late (the machine was busy) it catches up
by stepping the missed steps (each with the command due at its own time: the last one received,
as a real arm keeps moving under its last command), counted as 'late steps', and publishes the
newest state once (as a driver's realtime publisher does: it drops states, never bursts them).
It catches up at most `max_catch_up` steps (50: 50 ms at 1 kHz); the rest of the lag is dropped
(the arm frozen for that interval, its velocity kept), counted as 'skipped steps' and logged.
The steps caught up take the commands that came meanwhile at their own times: the command
subscription keeps 2 x `max_catch_up` of them, and a command taken at a late wake counts from
its publication plus the usual transit (`command_arrival`) if its reception stamp is later,
the stamp of this process's starved DDS thread rather than the time it reached the arm.

Why 50 ms (issue 35): this node stands for ros2_control's stack, whose read -> update -> write loop
runs at SCHED_FIFO 50 and never waits on a busy desktop; only its non-real-time paths (the effort
controller's command subscription, the joint-state broadcaster's realtime publisher) do, by up to a
few tens of ms (issue 35 measured commands 10-35 ms apart at worst on a loaded 2-core host, this
simulator's own lateness included). Within that bound a catch-up is what such a stack does: the arm
moves on under the last command that reached it. A Python simulator at 1 kHz beside two busy
processes is starved far longer (0.38 s measured); catching that up meant 0.38 s of an arm driven
by one held command, neither taking the controller's newer commands nor publishing states: a frozen
computer, not the stack. It drove the wrist to 3.49 rad/s (limit 3.14) and the node braked. Beyond
the bound the simulator runs below real time, as Gazebo does when it cannot keep up: the node sees
a stall of the states, then the arm where it stopped (docs/timing.md). `catch_up` splits a lag into
the steps skipped and those stepped. The process runs at SCHED_FIFO `physics_priority` (50)
where allowed, every thread of it, since the physics thread needs the GIL the others hold: an arm's
physics never waits for a busy computer (docs/simulator.md: 3-7 late steps and none skipped per
demo beside two busy processes, against 37-104 and 7-10 ms skipped at the default scheduler).
"""
import argparse
from collections import deque
from dataclasses import dataclass
import math
import sys
import threading
import time
import warnings

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
import numpy as np
from rcl_interfaces.msg import ParameterDescriptor
import rclpy
import rclpy.exceptions
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String

from rnea_controller.control.law import default_joints
from rnea_controller.description_file import read_description
from rnea_controller.dynamics.model import default_urdf_path, RobotModel
from rnea_controller.errors import (
    DescriptionWarning,
    ParameterError,
    RneaControllerError,
    UrdfError,
)
from rnea_controller.interrupt import interrupt_once
from rnea_controller.ros.realtime import process_threads, realtime_priority_refused
from rnea_controller.sim.plant import check_obstacles, CommandHold, measure, Plant, PlantOptions

# The bundled arm's start pose (UR 'home': upper arm up, forearm forward, tool down) [rad].
HOME = (0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0)
STATUS_NAME = 'rnea_sim: plant'

PARAMETERS = {  # name: (default or type when unset, description)
    'robot_description': ('', 'URDF text; empty: read urdf_file'),
    'urdf_file': ('', 'URDF or .xacro path; empty: the bundled arm'),
    'joints': (Parameter.Type.STRING_ARRAY, 'order of the command array; unset: the '
               "controller's default joints (a gripper's fingers left out)"),
    'command_topic': ('effort_controller/commands', 'effort command topic (relative)'),
    'initial_positions': (Parameter.Type.DOUBLE_ARRAY,
                          '[rad] in plant joint order; unset: home pose of the bundled arm, '
                          'zeros otherwise'),
    'timestep': (0.001, '[s] physics step'),
    'publish_rate': (0.0, '[Hz] joint-state rate, at most 1/timestep; 0: every physics step'),
    'publish_jitter': (0.0, '[s] each joint state is published after a random delay '
                       'U(0, publish_jitter), stamped when sampled; below 1/publish_rate'),
    'publish_velocity': (True, 'false: empty velocity arrays, as positions-only drivers'),
    'compensates_gravity': (False, 'add g(q) to every command, as Franka and KUKA FRI do'),
    'damping': ([0.0], '[N·m·s/rad] viscous joint damping, one value or one per joint'),
    'friction': ([0.0], '[N·m] Coulomb joint friction (MuJoCo frictionloss), one or per joint'),
    'armature': ([0.0], '[kg·m²] rotor inertia (MuJoCo armature), one value or one per joint'),
    'position_noise': (0.0, '[rad] std of the measured position noise'),
    'velocity_noise': (0.0, '[rad/s] std of the measured velocity noise'),
    'noise_seed': (0, 'seed of the sensor noise'),
    'payload.mass': (0.0, '[kg] payload unknown to the controller'),
    'payload.com': ([0.0, 0.0, 0.0], '[m] payload centre of mass in payload.link'),
    'payload.link': ('', 'link carrying the payload; empty: the last link'),
    'link_errors.seed': (-1, "seed of the links' inertial errors (plant.perturb_links); -1: "
                         'the links are as the URDF says'),
    'link_errors.mass': (0.3, "relative error of each moving link's mass, up to"),
    'link_errors.inertia': (0.3, 'relative error of each principal second moment, up to'),
    'link_errors.com': (0.03, '[m] displacement of each centre of mass, up to'),
    'push.joint': ('', 'joint an external push acts on; empty: no push'),
    'push.torque': (0.0, '[N·m or N] the push, added after the effort clamp'),
    'push.start': (1.0, '[s] after the first command the push starts'),
    'push.duration': (0.05, '[s] the push lasts'),
    'obstacle.shape': ('', "obstacle fixed in the world: 'box', 'sphere' or '' (none)"),
    'obstacle.position': ([0.0, 0.0, 0.0], '[m] its centre in the base frame'),
    'obstacle.size': ([0.05], "[m] a box's three half sizes, a sphere's radius"),
    'obstacle.link_radius': (0.04, '[m] the capsules of links without primitive geometry'),
    'command_delay': (0.0, '[s] transport delay before a command is applied'),
    'command_timeout': (0.0, '[s] without commands before applying zero effort; 0: never, '
                        'as JointGroupEffortController'),
    'hold_until_first_command': (True, 'brake the joints until the first command'),
    'hold_uncommanded': (True, "hold the joints not in 'joints' (a gripper's fingers) at their "
                         'initial positions, as their own controller does; false: no effort'),
    'max_catch_up': (50, 'steps the physics catches up after waking late (50: 50 ms at '
                     '1 kHz, the lag of a loaded stack); the rest of the lag is skipped'),
    'physics_priority': (50, 'SCHED_FIFO priority of the physics thread where allowed (50: '
                         "ros2_control's controller manager's); 0: the default scheduler"),
}


@dataclass(frozen=True)
class SimConfig:
    """Validated simulator parameters (see PARAMETERS)."""

    urdf: str
    joints: tuple | None
    command_topic: str
    initial_positions: tuple | None
    plant: PlantOptions
    position_noise: float
    velocity_noise: float
    noise_seed: int
    publish_period: float
    publish_jitter: float
    publish_velocity: bool
    command_delay: float
    command_timeout: float
    hold_until_first_command: bool
    max_catch_up: int
    physics_priority: int = 0
    hold_uncommanded: bool = True
    push: tuple = ()  # (joint, torque [N·m], start [s], duration [s]), or () for none


def _numeric(default):
    """Float parameters also accept integers (`-p payload.mass:=2`)."""
    return isinstance(default, float) or (isinstance(default, list) and bool(default) and
                                          isinstance(default[0], float))


def _nonnegative(values, name):
    value = values[name]
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ParameterError(f"parameter '{name}' must be finite and >= 0, got {value}")
    return float(value)


def catch_up(lag, max_catch_up):
    """(steps skipped, steps stepped) of a physics thread that wakes `lag` steps behind its
    deadline: the newest `max_catch_up` are stepped, the older rest skipped (the arm frozen
    over them, module doc). lag, max_catch_up: counts of steps, max_catch_up >= 1.

    >>> catch_up(3, 50), catch_up(380, 50)
    ((0, 3), (330, 50))
    """
    skipped = max(0, lag - max_catch_up)
    return skipped, lag - skipped


TRANSIT_GAIN = 0.01  # the usual command transit follows each on-time command by this share


def command_arrival(received, source, transit, late):
    """[s] when a command reached the arm: its reception stamp `received` [s]; but taken at a
    late wake (`late`), at most its publication stamp `source` [s] plus the usual transit
    `transit` [s] (None: unknown yet; source 0: none): a starved process's DDS thread stamps
    the command when it runs, not when a real stack's command path would have had it.

    >>> command_arrival(10.05, 10.0, 4e-4, late=True), command_arrival(10.05, 10.0, 4e-4, False)
    (10.0004, 10.05)
    """
    if late and source and transit is not None:
        return min(received, source + transit)
    return received


def read_urdf(robot_description, urdf_file):
    """The URDF: `robot_description` if set, else the file `urdf_file` (URDF, or .xacro run
    through xacro), else the bundled arm."""
    if robot_description:
        return robot_description
    try:
        return read_description(urdf_file or default_urdf_path())
    except UrdfError as error:
        raise ParameterError(f"parameter 'urdf_file': {error}") from error


def sim_config(values):
    """Validate a {parameter name: value} dict (values as declared) into a SimConfig."""
    timestep = _nonnegative(values, 'timestep')
    if not 1e-5 <= timestep <= 0.1:
        raise ParameterError(f"parameter 'timestep' must be in [1e-5, 0.1] s, got {timestep}")
    plant = PlantOptions(
        timestep=timestep, damping=tuple(values['damping']), friction=tuple(values['friction']),
        armature=tuple(values['armature']),
        payload_mass=_nonnegative(values, 'payload.mass'),
        payload_com=tuple(values['payload.com']), payload_link=values['payload.link'],
        compensates_gravity=bool(values['compensates_gravity']),
        link_errors=_link_errors(values), obstacles=_obstacles(values),
        link_radius=_nonnegative(values, 'obstacle.link_radius'))
    period, jitter = publish_timing(values, timestep)
    return SimConfig(
        urdf=read_urdf(values['robot_description'], values['urdf_file']),
        joints=tuple(values['joints']) if values['joints'] else None,
        command_topic=values['command_topic'],
        initial_positions=tuple(values['initial_positions']) if values['initial_positions']
        else None,
        plant=plant,
        position_noise=_nonnegative(values, 'position_noise'),
        velocity_noise=_nonnegative(values, 'velocity_noise'),
        noise_seed=int(values['noise_seed']),
        publish_period=period, publish_jitter=jitter,
        publish_velocity=bool(values['publish_velocity']),
        command_delay=_nonnegative(values, 'command_delay'),
        command_timeout=_nonnegative(values, 'command_timeout'),
        hold_until_first_command=bool(values['hold_until_first_command']),
        max_catch_up=max(1, int(values['max_catch_up'])),
        physics_priority=int(values['physics_priority']),
        hold_uncommanded=bool(values['hold_uncommanded']),
        push=_push(values))


def _push(values):
    """SimConfig.push from the `push.*` parameters: () without a joint."""
    if not values['push.joint']:
        return ()
    torque = values['push.torque']
    if not isinstance(torque, (int, float)) or not math.isfinite(torque):
        raise ParameterError(f"parameter 'push.torque' must be finite, got {torque}")
    return (values['push.joint'], float(torque), _nonnegative(values, 'push.start'),
            _nonnegative(values, 'push.duration'))


def _obstacles(values):
    """PlantOptions.obstacles from the `obstacle.*` parameters: () without a shape."""
    shape = values['obstacle.shape']
    if not shape:
        return ()
    try:
        return check_obstacles(((shape, values['obstacle.position'], values['obstacle.size']),))
    except ParameterError as error:
        raise ParameterError(f"parameters 'obstacle.*': {error}") from None


def _link_errors(values):
    """PlantOptions.link_errors from the `link_errors.*` parameters: () when the seed is -1."""
    seed = int(values['link_errors.seed'])
    if seed == -1:
        return ()
    if seed < 0:
        raise ParameterError(f"parameter 'link_errors.seed' must be >= 0 or -1, got {seed}")
    return (seed, *(_nonnegative(values, f'link_errors.{k}') for k in ('mass', 'inertia', 'com')))


def publish_timing(values, timestep):
    """(publish period [s], jitter [s]) from `publish_rate` and `publish_jitter`, checked."""
    rate = _nonnegative(values, 'publish_rate') or 1.0 / timestep
    if rate > 1.0 / timestep * (1 + 1e-9):
        raise ParameterError(f"parameter 'publish_rate' {rate} Hz is above the physics rate "
                             f'{1.0 / timestep:g} Hz (1/timestep): states are sampled at steps')
    jitter = _nonnegative(values, 'publish_jitter')
    if jitter >= 1.0 / rate:
        raise ParameterError(f"parameter 'publish_jitter' {jitter} s must be below the "
                             f'publish period {1.0 / rate} s')
    return 1.0 / rate, jitter


def commanded_by_default(urdf):
    """The joints the rnea controller controls when its `joints` is unset (`default_joints`),
    or None (every plant joint) if this package's model cannot read the URDF."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DescriptionWarning)
            return default_joints(RobotModel.from_urdf_string(urdf))
    except RneaControllerError:
        return None


def command_order(plant_joints, joints):
    """Index of each command entry in plant order; joints None means plant order itself."""
    if joints is None:
        return np.arange(len(plant_joints))
    unknown = [name for name in joints if name not in plant_joints]
    if unknown or len(set(joints)) != len(joints):
        raise ParameterError(f"parameter 'joints' {list(joints)}: unknown {unknown} or "
                             f'duplicate names; the arm has {list(plant_joints)}')
    return np.array([plant_joints.index(name) for name in joints])


def held_joints(n, order, hold):
    """Plant indices of the joints no command drives (not in `order`), held still when `hold`.

    A gripper's fingers have their own position controller on a real stack, which holds them
    where they are while the arm moves; unheld (no effort), the Panda's 15 g fingers slid from
    the middle of their range to a limit (20 mm) within 3 s of a 0.3 rad swing of the arm.
    Held kinematically: after each step their position is put back and their velocity zeroed,
    so they never move (within the step they are free joints, a coupling the arm feels as
    their own inertia's share: grams on a kilogram hand).

    >>> held_joints(9, [0, 1, 2, 3, 4, 5, 6], True).tolist(), held_joints(9, [0], False).size
    ([7, 8], 0)
    """
    if not hold:
        return np.array([], dtype=int)
    return np.setdiff1d(np.arange(n), order)


def initial_positions(plant, values):
    """Start configuration [rad]: the parameter, else HOME for 6 joints, else zeros."""
    if values is None:
        return np.array(HOME) if plant.n == len(HOME) else np.zeros(plant.n)
    if len(values) != plant.n or not all(math.isfinite(v) for v in values):
        raise ParameterError(f"parameter 'initial_positions' needs {plant.n} finite values "
                             f'(joints {list(plant.joint_names)}), got {list(values)}')
    return np.array(values, dtype=float)


class SimNode(Node):
    """The simulated arm: MuJoCo physics behind ros2_control-like topics."""

    def __init__(self):
        super().__init__('rnea_sim')
        values = {name: self.declare_parameter(name, default, ParameterDescriptor(
            description=text, dynamic_typing=_numeric(default))).value
            for name, (default, text) in PARAMETERS.items()}
        self.config = sim_config(values)
        self.plant = Plant(self.config.urdf, self.config.plant)
        self.order = command_order(self.plant.joint_names,
                                   self.config.joints or commanded_by_default(self.config.urdf))
        self.plant.reset(initial_positions(self.plant, self.config.initial_positions))
        self.held = held_joints(self.plant.n, self.order, self.config.hold_uncommanded)
        self.held_positions = self.plant.q[self.held]
        self._push_joint = self._pushed_joint()
        self._first_command, self._pushing = None, False
        self.hold = CommandHold(self.plant.n, self.config.command_delay,
                                self.config.command_timeout)
        self.rng = np.random.default_rng(self.config.noise_seed)
        self.counts = dict.fromkeys(('received', 'refused', 'late steps', 'skipped steps',
                                     'timeouts', 'states published',
                                     'contact force peak [N]'), 0)
        self._touching = False
        self._transit = None  # [s] the usual command transit, publication to reception
        self.status = 'waiting'
        self._outbox = deque()  # (wall time [s], JointState) publications due
        self._make_interfaces()
        self.running = True
        self.thread = threading.Thread(target=self._physics_loop, name='physics', daemon=True)
        self.thread.start()
        cfg = self.config
        self.get_logger().info(
            f'simulating {self.plant.n} joints {list(self.plant.joint_names)} at '
            f'{1 / cfg.plant.timestep:.0f} Hz, states at {1 / cfg.publish_period:.0f} Hz '
            f'(jitter {cfg.publish_jitter * 1e3:g} ms, velocities '
            f'{"yes" if cfg.publish_velocity else "no"}); payload {cfg.plant.payload_mass} kg, '
            f'link errors {cfg.plant.link_errors or "none"}, gravity compensated by the arm: '
            f'{cfg.plant.compensates_gravity}, command delay '
            f'{cfg.command_delay} s, timeout {cfg.command_timeout or "none"}, obstacles '
            f'{list(cfg.plant.obstacles) or "none"}')

    def _pushed_joint(self):
        """The plant index of `push.joint`, or None without a push."""
        if not self.config.push:
            return None
        name = self.config.push[0]
        if name not in self.plant.joint_names:
            raise ParameterError(f"parameter 'push.joint': {name!r} is not a joint of the arm "
                                 f'{list(self.plant.joint_names)}')
        return self.plant.joint_names.index(name)

    def _apply_push(self, t):
        """The external push in force at simulated time t [s] (the plant's: its window counts
        from the first command, and steps skipped after a late wake do not pass it by), logged
        as it starts and ends."""
        _, torque, start, duration = self.config.push
        pushing = (self._first_command is not None
                   and start <= t - self._first_command < start + duration)
        self.plant.external[self._push_joint] = torque if pushing else 0.0
        if pushing != self._pushing:
            self._pushing = pushing
            self.get_logger().info(f'push of {torque:g} on {self.config.push[0]} for '
                                   f'{duration:g} s: ' + ('started' if pushing else 'ended'))

    def _make_interfaces(self):
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        self.description_pub = self.create_publisher(String, 'robot_description', latched)
        self.description_pub.publish(String(data=self.config.urdf))
        self.state_pub = self.create_publisher(JointState, 'joint_states', 10)
        # Commands are taken by the physics thread itself, from a subscription of a second node
        # that no executor spins: no executor wake-up per 1 kHz command (a quarter of a core).
        # That node ignores the command line (a launch file's `__node:=` would give it this
        # node's name); it subscribes to the topic name as this node resolves it (namespace and
        # remappings applied).
        self.command_node = rclpy.create_node(
            f'{self.get_name()}_commands', namespace=self.get_namespace(), context=self.context,
            use_global_arguments=False)
        self.command_sub = self.command_node.create_subscription(
            Float64MultiArray, self.resolve_topic_name(self.config.command_topic),
            self.on_command, max(10, 2 * self.config.max_catch_up))  # every one a catch-up needs
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.create_timer(1.0, self.publish_diagnostics)
        self.controller_node = self._effort_controller_node()

    def _effort_controller_node(self):
        """A node named as ros2_control's effort controller would be (the command topic
        `<ns>/<controller>/commands`), whose parameter `joints` lists the command order: the
        rnea controller checks its joints against it on activation. None for another topic."""
        parent, leaf = self.resolve_topic_name(self.config.command_topic).rsplit('/', 1)
        if leaf != 'commands' or not parent:
            return None
        namespace, name = parent.rsplit('/', 1)
        node = rclpy.create_node(name, namespace=namespace or '/', context=self.context,
                                 use_global_arguments=False, enable_rosout=False)
        node.declare_parameter('joints', self._command_joints(), ParameterDescriptor(
            description='the joints of effort commands, in their order (read-only)',
            read_only=True))
        return node

    def _take_commands(self, late):
        """Take every command that arrived since the last step (physics thread), each at its
        `command_arrival`; on time (not `late`), the usual transit is learnt from them."""
        while (taken := self.command_sub.handle.take_message(Float64MultiArray, False)):
            msg, info = taken
            received = (info.get('received_timestamp') or time.time_ns()) * 1e-9
            source = (info.get('source_timestamp') or 0) * 1e-9
            if source and not late:
                transit = min(received - source, 0.1)
                self._transit = transit if self._transit is None else (
                    self._transit + TRANSIT_GAIN * (transit - self._transit))
            arrival = command_arrival(received, source, self._transit, late)
            last = self.hold.received  # in order: never before the command taken before it
            self.on_command(msg, arrival if last is None else max(arrival, last))

    def on_command(self, msg, received):
        """Store a valid command (plant order) received at time `received` [s]; refuse and
        count a malformed one."""
        tau = np.asarray(msg.data, dtype=float)
        if tau.shape != (len(self.order),) or not np.all(np.isfinite(tau)):
            self.counts['refused'] += 1
            self.get_logger().warning(
                f'refused command {self.counts["refused"]}: {tau.size} values '
                f'(need {len(self.order)} finite efforts for {self._command_joints()})',
                throttle_duration_sec=1.0)
            return
        ordered = np.zeros(self.plant.n)
        ordered[self.order] = tau
        self.hold.push(received, ordered)
        self.counts['received'] += 1

    def _command_joints(self):
        return [self.plant.joint_names[i] for i in self.order]

    def _physics_loop(self):
        """The physics thread; it ends quietly when Ctrl-C shuts the context under it."""
        self._realtime()
        try:
            self._run_physics()
        except (RuntimeError, rclpy.exceptions.InvalidHandle):
            if self.running and self.context.ok():
                raise

    def _realtime(self):
        """This process's threads (physics, executor, DDS) at SCHED_FIFO `physics_priority`
        where the process may: an arm's physics never waits for a busy computer (module doc,
        Timing); all of them, since the physics thread needs the GIL and the DDS writer the
        others hold. Said either way."""
        priority = self.config.physics_priority
        if priority <= 0:
            return
        error = realtime_priority_refused(priority, process_threads())
        if error is not None:
            self.get_logger().info(f'the default scheduler (SCHED_FIFO {priority} not '
                                   f'allowed: {error}): a busy host starves the physics')
            return
        self.get_logger().info(f'physics and its I/O at SCHED_FIFO {priority}')

    def _run_physics(self):
        """Step at t0 + k·dt of the wall clock; catch up when late, up to `max_catch_up`
        steps, the older lag skipped (`catch_up`); publish each state when its (jittered)
        publication time comes."""
        dt = self.config.plant.timestep
        t0, k = time.time(), 0
        self._next_sample = t0  # the next instant a state is sampled for publication [s]
        while self.running and self.context.ok():
            due = int((time.time() - t0) / dt)
            skipped, stepped = catch_up(due - k, self.config.max_catch_up)
            if skipped:
                self._skip(skipped, dt)
                k += skipped
                self._next_sample = t0 + k * dt
            self.counts['late steps'] += max(0, stepped - 1)
            self._take_commands(late=stepped > 1)
            snapshot = None
            while k < due:
                self._step(t0 + k * dt)  # the step [t_k, t_k+1] under the command due at t_k
                k += 1
                if t0 + k * dt >= self._next_sample - 1e-9:
                    snapshot = self._snapshot(t0 + k * dt)
            if snapshot is not None:  # after catching up: only the newest state
                self._outbox.append(self._sample(*snapshot))
            self._publish_due()
            wake = t0 + (k + 1) * dt
            if self._outbox:
                wake = min(wake, self._outbox[0][0])
            time.sleep(max(0.0, wake - time.time()))

    def _snapshot(self, t):
        """(t, q, qd, applied effort) now, a state due for publication at time t [s]."""
        while self._next_sample <= t + 1e-9:  # the publish grid t0 + j·period, never behind
            self._next_sample += self.config.publish_period
        return t, self.plant.q, self.plant.qd, self.plant.applied.copy()

    def _sample(self, t, q, qd, effort):
        """(publication time [s], JointState stamped t [s]) of a snapshot."""
        cfg = self.config
        delay = self.rng.uniform(0.0, cfg.publish_jitter) if cfg.publish_jitter > 0 else 0.0
        return t + delay, self._state_msg(t, q, qd, effort)

    def _publish_due(self):
        now = time.time()
        while self._outbox and self._outbox[0][0] <= now:
            self.state_pub.publish(self._outbox.popleft()[1])
            self.counts['states published'] += 1

    def _skip(self, steps, dt):
        self.counts['skipped steps'] += steps
        self.get_logger().warning(f'physics fell {steps * dt * 1e3:.0f} ms more than '
                                  f'max_catch_up behind the wall clock (this process was '
                                  f'starved): skipped {steps} steps (arm frozen meanwhile)',
                                  throttle_duration_sec=1.0)

    def _step(self, t):
        """One physics step from wall time t [s], under the command in force at t."""
        status = self.hold.status(t)
        tau = self.hold.current(t)
        self._log_status(status)
        if self._first_command is None and status != 'waiting':
            self._first_command = self.plant.time
        if self._push_joint is not None:
            self._apply_push(self.plant.time)
        if status == 'waiting' and self.config.hold_until_first_command:
            self.plant.applied = np.zeros(self.plant.n)
            return
        self.plant.step(tau)
        if self.held.size:  # still, as their own position controller holds them
            self.plant.data.qpos[self.held] = self.held_positions
            self.plant.data.qvel[self.held] = 0.0
        if self.config.plant.obstacles:
            force = self.plant.contact_force()
            if force > 0.0 and self._touching is False:
                self.get_logger().info(f'contact with the obstacle: {force:.1f} N')
            self._touching = force > 0.0
            self.counts['contact force peak [N]'] = max(self.counts['contact force peak [N]'],
                                                        round(force, 1))

    def _log_status(self, status):
        if status == self.status:
            return
        if status == 'timed out':
            self.counts['timeouts'] += 1
            self.get_logger().warning(f'no command for {self.config.command_timeout} s: '
                                      'applying zero effort')
        elif status == 'active':
            self.get_logger().info('commands received: applying them')
        self.status = status

    def _state_msg(self, t, q, qd, effort):
        """The measured joint state of true q, qd and the applied effort, stamped t [s]."""
        q, qd = measure(q, qd, self.rng, self.config.position_noise, self.config.velocity_noise)
        msg = JointState()
        msg.header.stamp.sec = int(t)
        msg.header.stamp.nanosec = int((t - int(t)) * 1e9)
        msg.name = list(self.plant.joint_names)
        msg.position = q.tolist()
        msg.velocity = qd.tolist() if self.config.publish_velocity else []
        msg.effort = effort.tolist()
        return msg

    def publish_diagnostics(self):
        """Plant status on /diagnostics (1 Hz)."""
        values = dict(self.counts, **{'command status': self.status,
                                      'sim time [s]': f'{self.plant.time:.3f}',
                                      'payload [kg]': self.config.plant.payload_mass})
        level = DiagnosticStatus.WARN if self.status == 'timed out' else DiagnosticStatus.OK
        status = DiagnosticStatus(level=level, name=STATUS_NAME, message=self.status,
                                  hardware_id='mujoco', values=[
                                      KeyValue(key=key, value=str(value))
                                      for key, value in values.items()])
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.diagnostics_pub.publish(msg)

    def stop(self):
        self.running = False
        self.thread.join(timeout=1.0)
        self.command_node.destroy_node()
        if self.controller_node is not None:
            self.controller_node.destroy_node()


def parse_arguments(argv):
    """`rnea-sim --help` lists the parameters and exits; ROS arguments are left to rclpy."""
    unset = type(Parameter.Type.STRING_ARRAY)
    epilog = 'parameters (--ros-args -p name:=value):\n' + '\n'.join(
        f'  {name} (default {"unset" if isinstance(default, unset) else repr(default)}): {text}'
        for name, (default, text) in PARAMETERS.items())
    parser = argparse.ArgumentParser(
        prog='rnea-sim', description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog)
    return parser.parse_args(remove_ros_args(argv)[1:])


def main(args=None):
    """Console script `rnea-sim` / `ros2 run rnea_controller rnea-sim`."""
    parse_arguments(sys.argv if args is None else args)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    interrupt_once()
    node = None
    try:
        node = SimNode()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        if node.controller_node is not None:
            executor.add_node(node.controller_node)
        while rclpy.ok():  # returns every 0.1 s at most: Ctrl-C is seen at once
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RneaControllerError as error:
        print(f'rnea_sim: {error}', flush=True)
        return 1
    finally:
        if node is not None:
            node.stop()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
