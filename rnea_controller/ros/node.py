"""The `rnea_controller` lifecycle node: thin ROS 2 glue around `control.law`.

A fixed-rate timer on the STEADY clock (whatever `use_sim_time` says: a simulated clock that
stops must not stop the commands) calls the tick of the node's `loop` (loop.py's ControlLoop,
made at each activation, holding the modes of control/modes.py): reference one period ahead,
the law in one compiled call, limits, effort command, reference and (1 Hz) diagnostics. Stamps
and the trajectory time base follow system time, or ROS time if use_sim_time was set when the
node was configured (a later change takes effect at the next configure). This file: the
lifecycle, the set-up, the inputs' callbacks and parameter changes. The other pieces, one per
module: loop.py (the tick and its timing), control/modes.py (the modes and their transitions:
stale states, braking, law failure), inputs.py (joint states, trajectories, wrench,
description), state_intake.py (the joint states' subscription, which no executor serves: the
tick takes the states queued at its start, a slow timer while inactive), outputs.py (command,
reference, diagnostics publishers), parameters.py (declarations from the table, change rules),
diagnostics.py, realtime.py (executor, priority, affinity, signals, timer callbacks),
effort_check.py (the effort controller's `joints`, checked on activation),
trajectory_intake.py, action_server.py and parameters.py's ParameterServices (their own
threads); main.py is the program.

Modes (diagnostics 'mode'): the lifecycle's 'unconfigured' and 'inactive'; while active the
loop's (control/modes.py): 'waiting for joint states', 'hold', 'tracking', 'braking:
overspeed', 'holding: contact', 'stale: stopping', 'stale: stopped', 'law failure: gravity
hold', 'refused: effort controller joints', 'finished'.

A parameter change is validated whole in the on-set callback (table ranges, model rules, and
the law at the current state and reference must be finite), on the parameter services' own
thread, and swapped in by the tick at its start. On deactivate, shutdown, Ctrl-C or SIGTERM:
one final command, `final_command`.
"""
import math
import threading
import time

from geometry_msgs.msg import WrenchStamped
import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from rnea_controller import warm
from rnea_controller.control.law import (
    Controller,
    default_joints,
    law_is_finite,
    validate_parameters,
)
from rnea_controller.control.loop_stats import LoopStats
from rnea_controller.control.parameters import GLOBAL
from rnea_controller.control.trajectory import Trajectory
from rnea_controller.dynamics.regressor import body_link_names
from rnea_controller.errors import ParameterError, RneaControllerError, UrdfError
from rnea_controller.ros import diagnostics, inputs, realtime
from rnea_controller.ros import parameters as ros_parameters
from rnea_controller.ros.action_server import TrajectoryActionServer
from rnea_controller.ros.effort_check import EffortControllerCheck
from rnea_controller.ros.loop import ControlLoop
from rnea_controller.ros.outputs import Outputs
from rnea_controller.ros.state_intake import DRAIN_PERIODS, StateIntake
from rnea_controller.ros.trajectory_intake import TrajectoryIntake

NODE_NAME = 'rnea_controller'
PARAMETERS = {spec.name: spec for spec in GLOBAL}  # the node's global parameters (the table)
SOURCES_PERIOD = 0.2  # [s] between two looks at the joint states' publishers
STATE_WARNING_PERIOD = 1.0  # [s] at most one warning of a refused joint state per this time
UNKNOWN = '_NODE_NAME_UNKNOWN_'  # rmw's name of a node not discovered yet
INPUTS = ('joint_states', 'joint_trajectory', 'external_wrench', 'robot_description',
          'parameters')


class ControllerNode(LifecycleNode):
    """rnea_controller: computed-torque control of an arm over ROS 2 topics (see module doc)."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, start_parameter_services=False, **kwargs)
        ros_parameters.declare_global(self)
        self.config, self._pending, self._timer = None, None, None
        self._pending_lock = threading.Lock()  # the parameters' thread hands configs to the tick
        self.slack = realtime.Slack()  # a parameter set's work starts as a tick ends
        self.action_server, self.intake, self.effort_check = None, None, None
        self.loop = None  # the ControlLoop, from activation to deactivation
        self._lifecycle = 'unconfigured'
        self.sources = None  # while active: why the joint states come from several sources
        self.rejected = dict.fromkeys(INPUTS, 0)
        self._state_warned = -math.inf  # [s] monotonic, the last refused state's warning
        self.states_received = 0
        self._kernels_logged = False
        self._urdf_from_topic, self._base_model = None, None
        self._input_subscriptions, self.outputs = [], None
        self.states, self._drain = None, None  # StateIntake; its timer while inactive
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(String, 'robot_description', self._on_description, latched)
        self.create_timer(1.0, self._log_waiting, clock=self._steady)
        self.parameter_services = ros_parameters.ParameterServices(self)

    def destroy_node(self):
        self.parameter_services.destroy()
        if self.states is not None:
            self.states.destroy()
            self.states = None
        super().destroy_node()

    @property
    def mode(self):
        """The diagnostics 'mode': the loop's while it exists, else the lifecycle state."""
        return self._lifecycle if self.loop is None else self.loop.mode

    @property
    def trajectory(self):
        """The loop's reference (a Trajectory); None while none (inactive, stale, braking)."""
        return None if self.loop is None else self.loop.trajectory

    @trajectory.setter
    def trajectory(self, trajectory):
        self.loop.trajectory = trajectory

    @property
    def timing(self):
        """The loop's LoopTiming (phase lock, latency, velocity source); None while inactive."""
        return None if self.loop is None else self.loop.timing

    # --- lifecycle ----------------------------------------------------------------------

    def autostart(self):
        """Configure and activate now if `autostart` is set and a model is available."""
        if self.get_parameter('autostart').value and self.mode == 'unconfigured':
            if self.get_parameter('robot_description').value or self._urdf_from_topic:
                if self.trigger_configure() == TransitionCallbackReturn.SUCCESS:
                    self.trigger_activate()

    def on_configure(self, state):
        try:
            self._base_model = inputs.model_from_description(self._urdf(),
                                                             self.get_logger().warning)
            ros_parameters.declare_joints(self, self._joints())
            ros_parameters.declare_links(self, body_link_names(self._base_model))
            ros_parameters.check_link_overrides(self, body_link_names(self._base_model))
            # endpoints first: DDS matches them while numba loads the law (~0.2 s after its
            # set-up in main.py; no callback runs during a transition, each checks for a config)
            self._create_entities(self._joints())
            self.effort_check = EffortControllerCheck(self)  # discovery runs from now on
            self.config = validate_parameters(self._values(), self._base_model)
        except RneaControllerError as error:
            self.get_logger().error(f'configure failed: {error}')
            self._destroy_entities()
            return TransitionCallbackReturn.FAILURE
        self._allocate(self.config)
        self.intake = TrajectoryIntake(self)
        self._drain_states()
        self._lifecycle = 'inactive'
        self.get_logger().info(f'configured: {self.config.law} on {", ".join(self.config.joints)}'
                               f' at {self.config.update_rate:g} Hz')
        for note in self.config.notes:
            self.get_logger().info(note)
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state):
        mismatch = self.effort_check.mismatch(self.config.joints, self.get_logger())
        if mismatch:
            self.get_logger().error(f'activation refused: {mismatch}')
            return TransitionCallbackReturn.FAILURE
        self._drain_states(False)  # the tick takes them from its first on
        self.controller.reset()
        self._timer = self.create_timer(self.config.period, realtime.timer_callback(self._tick),
                                        clock=self._steady)
        self.action_server = TrajectoryActionServer(self, dict(self.config.values))
        self.loop = ControlLoop(  # the first fresh state starts a hold at the measured position
            self.config, self.state, self.controller, self.outputs, self.stats,
            timer=self._timer, now_ns=self._now_ns, t0_ns=self._t0_ns,
            logger=self.get_logger(), status=self._status, action_server=self.action_server,
            intake=self.intake)
        self._velocity_logged = False
        self.sources, self._offset_logged = None, False
        self._sources_timer = self.create_timer(
            SOURCES_PERIOD, realtime.timer_callback(self._check_sources), clock=self._steady)
        self.get_logger().info('active' + realtime.since_start())
        self._log_kernels()
        return TransitionCallbackReturn.SUCCESS

    def _log_kernels(self):
        """How the numba kernels came, at the first activation: loaded from the cache, or
        compiled (warm.py); each kernel's signatures at debug level."""
        if self._kernels_logged:
            return
        self._kernels_logged = True
        report = warm.cache_report()
        loaded, compiled = warm.totals(report)
        text = f'numba kernels: {loaded} loaded from the cache, {compiled} compiled'
        if compiled:
            self.get_logger().warning(
                f'{text} (none cached for them: the first start after an install without '
                '`python -m rnea_controller.warm`, or after an edit; docs/install.md)')
        else:
            self.get_logger().info(text)
        for name, entry in report.items():
            self.get_logger().debug(f"numba kernel {name}: {entry['loaded']} loaded, "
                                    f"{entry['compiled']} compiled: "
                                    + ' | '.join(entry['signatures']))

    def on_deactivate(self, state):
        self._stop_loop()
        self.loop = None
        self._drain_states()
        self._lifecycle = 'inactive'
        return TransitionCallbackReturn.SUCCESS

    def on_cleanup(self, state):
        self.release_helpers()
        self._destroy_entities()
        self.config = None
        self._lifecycle = 'unconfigured'
        return TransitionCallbackReturn.SUCCESS

    def _destroy_entities(self):
        if self.outputs is not None:
            self.outputs.destroy()
        for subscription in self._input_subscriptions:
            self.destroy_subscription(subscription)
        self._drain_states(False)
        if self.states is not None:
            self.states.destroy()
        self._input_subscriptions, self.outputs, self.states = [], None, None
        if self.effort_check is not None and self.intake is None:  # a failed configure's
            self.effort_check.close()
            self.effort_check = None

    def release_helpers(self):
        """The intake's thread and the effort check's context (cleanup, and program exit)."""
        if self.intake is not None:
            self.intake.destroy()
            self.effort_check.close()
            self.intake, self.effort_check = None, None

    def on_shutdown(self, state):
        self.finish()
        return TransitionCallbackReturn.SUCCESS

    def finish(self):
        """Publish the final command once if the loop is running, and stop it (idempotent)."""
        if self._timer is not None:
            self._stop_loop()
            self.loop.modes.finish()

    def after_spin(self):
        """Called by the spin loop between callbacks: a deactivation the tick asked for."""
        if self.loop is not None and self.loop.modes.deactivate:
            self.loop.modes.deactivate = False
            self.trigger_deactivate()

    def _tick(self):
        """The control timer's callback: the loop's tick, with this tick's inputs."""
        if self._timer is None:  # the executor had queued this tick before the loop stopped
            return
        refusal = self.effort_check.refusal
        if self._pending is not None and refusal is None:
            self._swap_pending()
        self.states.take()  # the states queued since the last tick, in order (state_intake.py)
        self.loop.tick(self.config, self.state, wrench=self._wrench(), refusal=refusal)
        self.slack.ticked()

    def _swap_pending(self):
        """A parameter change validated by the on-set callback (the parameters' thread), in
        force from now on."""
        with self._pending_lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            self.config = pending
            if self.loop is not None:  # the timing parameters that may change while active
                self.loop.configure(self.config, self.state)

    def _wrench(self):
        """f_ext from the newest ~/external_wrench unless older than external_wrench_timeout."""
        if self._f_ext is None:
            return None
        timeout = self.config.external_wrench_timeout or math.inf
        return self._f_ext if time.perf_counter() - self._wrench_time < timeout else None

    def _seconds(self, ns):
        """Trajectory time [s] of a stamp [ns] (the intake and the action server plan in it)."""
        return (ns - self._t0_ns) * 1e-9

    def _plan(self, arrays, based_on):
        """(the reference planned from `based_on` now, now [s], the points' start [s]: the
        header's stamp, or now where it is 0): the topic's and the action's one way from
        read arrays (wire.TrajectoryArrays) to a checked Trajectory (inputs.py)."""
        now = self._seconds(self._now_ns())
        start = self._seconds(arrays.stamp_ns) if arrays.stamp_ns else now
        return (inputs.plan_trajectory_arrays(arrays, self.config, based_on.sample(now), now,
                                              start), now, start)

    def _status(self):
        """The /diagnostics message of the node now (diagnostics.py)."""
        return diagnostics.make_status(self, self.get_clock().now().to_msg())

    def _stop_loop(self):
        self.destroy_timer(self._timer)
        self.destroy_timer(self._sources_timer)
        self._timer = None
        self._swap_pending()
        self.states.take()  # the final command at the newest state
        if self.state.valid and self.effort_check.refusal is None:
            cfg = self.config
            tau = (self.controller.gravity_hold(cfg, self.state.q, rate_limited=False)
                   if cfg.final_command == 'gravity_hold' else np.zeros(len(cfg.joints)))
            self.outputs.final_command(tau)
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

    def _joints(self):
        if self.config is not None:
            return self.config.joints
        return ros_parameters.value(self, 'joints') or default_joints(self._base_model)

    def _values(self, changes=()):
        links = body_link_names(self._base_model) if self._base_model is not None else ()
        return ros_parameters.values(self, self._joints(), changes, links)

    def _allocate(self, cfg):
        """Preallocated state and reference (reused at every tick)."""
        self.state = inputs.JointStateInput(cfg.model.joint_names, required=cfg.joints,
                                            mimic=cfg.model.mimic,
                                            velocity_limits=cfg.model.velocity_limits)
        self._f_ext, self._wrench_time = None, -math.inf
        self.controller = Controller(cfg)
        Trajectory.hold(np.zeros(cfg.model.n)).sample(0.0)  # compile the sampler now
        sim_time = self.get_parameter('use_sim_time').value
        self._now_ns = (lambda: self.get_clock().now().nanoseconds) if sim_time else time.time_ns
        self._t0_ns = self._now_ns()
        self.stats = LoopStats()

    def _create_entities(self, joints):
        value = self.get_parameter
        self.outputs = Outputs(self, value('command_topic').value, joints)
        self.states = StateIntake(self, value('joint_states_topic').value, self._on_joint_states)
        self._input_subscriptions = [
            self.create_subscription(WrenchStamped, '~/external_wrench', self._on_wrench, 10)]

    def _drain_states(self, inactive=True):
        """While configured and inactive (no tick), a timer takes the states every
        DRAIN_PERIODS periods (state_intake.py); `inactive=False`: no more (the tick takes them,
        or the subscription goes)."""
        if self._drain is not None:
            self.destroy_timer(self._drain)
            self._drain = None
        if inactive:
            self._drain = self.create_timer(DRAIN_PERIODS * self.config.period,
                                            realtime.timer_callback(self._take_while_inactive),
                                            clock=self._steady)

    def _take_while_inactive(self):
        """The drain timer's callback: the states queued, taken; its period follows an
        update_rate changed while inactive."""
        if self._drain is None:  # queued before a transition destroyed its timer
            return
        self.states.take()
        period_ns = round(DRAIN_PERIODS * self.config.period * 1e9)
        if self._drain.timer_period_ns != period_ns:
            self._drain.timer_period_ns = period_ns

    # --- inputs -------------------------------------------------------------------------

    def _on_joint_states(self, raw, arrival):
        """A serialized JointState, taken whole or refused whole (inputs.JointStateInput);
        arrival: (on the tick's clock [s], on the stamps' clock [ns])."""
        self.states_received += 1
        try:
            self.state.take_serialized(raw, self.config.values['velocity_source'], arrival)
        except ValueError as error:
            return self._reject('joint_states', error)
        timing = self.state.timing
        if timing is not None and not self._velocity_logged:
            self._velocity_logged = True
            cutoff = timing.velocity.cutoff
            self.get_logger().info('joint velocities: ' + (
                f'estimated from positions (low-pass {cutoff:g} Hz, lag '
                f'{timing.lag * 1e3:.2f} ms)' if timing.estimating
                else 'measured (the joint states)'))

    def _check_sources(self):
        """Every SOURCES_PERIOD while active: more than one publisher of the joint states
        (`sources`, an error in the log and /diagnostics while it lasts; the states of the
        stream the arm's motion does not explain are refused by JointStateInput's gates), and
        stamps on another clock (a warning, once); the publishers in /diagnostics from the next
        tick, the offset at the next 1 Hz status."""
        if self.loop is None:  # queued before the loop stopped
            return
        topic = self.states.topic
        sources = None
        if self.count_publishers(topic) > 1:
            names = sorted(f'{i.node_namespace.rstrip("/")}/{i.node_name}'
                           for i in self.get_publishers_info_by_topic(topic))
            if any(UNKNOWN in name for name in names):
                return  # an endpoint discovered before its node's name: look again soon
            sources = f'{len(names)} publishers on {topic}: {", ".join(names)}'
        if sources != self.sources:
            if sources is not None:
                self.get_logger().error(f'{sources}: one source of joint states needed; '
                                        'states the motion does not explain are refused')
            else:
                self.get_logger().info(f'one publisher on {topic} again')
            self.sources = sources
            self.loop.publish_status_soon()
        clock = self.loop.timing.clock
        if not clock.usable and not self._offset_logged:
            self._offset_logged = True
            self.get_logger().warning(
                f'joint-state stamps are {clock.offset * 1e3:.1f} ms from their arrival (a '
                f"local link takes < {clock.high * 1e3:g} ms): the sender's clock is not "
                "this host's; stamps re-based by the offset meanwhile. Synchronise the "
                'clocks (PTP or chrony)')

    def _on_wrench(self, msg):
        """F/T sensor: the wrench the environment applies on link `frame_id` -> f_ext."""
        if self.config is None:  # queued before a cleanup destroyed the subscription
            return
        try:
            self._f_ext = inputs.wrench(msg, self.config.model)
        except (inputs.ModelError, ValueError) as error:
            return self._reject('external_wrench', error)
        self._wrench_time = time.perf_counter()

    def _on_description(self, msg):
        """robot_description from the topic: checked before use, a refusal always logged."""
        if self.mode != 'unconfigured':
            self.get_logger().info('robot_description received: used at the next configure')
        try:
            inputs.model_from_description(msg.data)
        except RneaControllerError as error:
            return self._reject('robot_description', error)
        self._urdf_from_topic = msg.data
        self.autostart()

    def _reject(self, kind, error, say=None):
        """Count a refused message and say why (joint-state warnings at most once a second);
        say(level, text), if given, says it (the tick's log)."""
        self.rejected[kind] += 1
        message = f'{kind} message refused ({self.rejected[kind]} so far): {error}'
        if say is not None:
            return say('error', message)
        if kind != 'joint_states':
            return self.get_logger().error(message)
        now = time.monotonic()  # throttled here: rclpy's throttled call costs the tick
        if now - self._state_warned >= STATE_WARNING_PERIOD:  # 0.7-0.9 ms even when it
            self._state_warned = now  # logs nothing (issue 45)
            self.get_logger().warning(message)

    def _log_waiting(self):
        """Once a second, while there is no model: what the node waits for."""
        if self.mode == 'unconfigured' and not self._urdf_from_topic and not self.get_parameter(
                'robot_description').value:
            self.get_logger().info('waiting for a robot description: parameter '
                                   'robot_description is empty and nothing arrived on '
                                   f'{self.resolve_topic_name("robot_description")}')

    # --- parameters ---------------------------------------------------------------------

    def _on_set_parameters(self, parameters):
        """Validate a change as a whole (from the slack after a tick, while the loop runs);
        the tick swaps the new config in at its start."""
        if self._timer is not None:
            self.slack.wait(self.config.period)
        reason = ros_parameters.refusal(parameters, self.config is not None,
                                        self._timer is not None)
        if reason is None and self.config is not None:
            reason = self._prepare(parameters)
        if reason is not None:
            self.rejected['parameters'] += 1
            self.get_logger().warning(f'parameter change refused: {reason}')
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _prepare(self, parameters):
        """The config of these changes, pending for the tick; or why it is refused."""
        try:
            config = validate_parameters(self._values(parameters), self._base_model)
        except ParameterError as error:
            return str(error)
        if self._timer is not None and self.state.valid and self.trajectory is not None:
            ref = self.trajectory.sample(self._seconds(self._now_ns()))
            if not law_is_finite(config, self.state.q, self.state.qd, ref):
                return 'the control law with these values is not finite at the current state'
        if self._timer is None:
            self.config = config
        else:
            with self._pending_lock:
                self._pending = config
        # rclpy publishes every change on /parameter_events; an info line here cost 0.3 ms of
        # the interpreter's lock (rclpy's logger finds its caller's source line at each call)
        self.get_logger().debug(f'parameters changed: {sorted(p.name for p in parameters)}')
        return None
