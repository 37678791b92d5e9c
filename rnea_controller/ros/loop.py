"""The control loop of the `rnea_controller` node: its timer's tick, an object the node holds.

`ControlLoop` is made at each activation from named parts (the config in force, the
Controller, the outputs, the loop statistics, the timer, the clocks, the logger, the action
server and trajectory intake) and called once a timer period: `tick(cfg, state, wrench,
refusal)`. The mode, the reference and every transition between modes are the ROS-free state
machine `control.modes.Modes` it holds; the loop does what the mode's command says and keeps
the timing (control/timing.py: phase lock, latency compensation, velocity estimate).

One tick: the mode of this tick (`Modes.step`); for the law, the reference is sampled where the
command will act (one period ahead, or the latency L ahead of the state's stamp with latency
compensation, docs/timing.md), the law is computed with one compiled call (`control.law`),
command and reference are published, the action server's snapshot left (once it has a
reader); for braking, `Controller.brake` at the newest state (damping toward rest plus
gravity); then the phase lock nudges the timer's period and, once a second (and at once when
braking starts or ends), /diagnostics go out in the slack of the period.

The other paths (modes.py): stale states drop the trajectory, the law brings it to rest
blind (`Trajectory.stop`, the loop's dead reckoning) and `stale_policy` decides the rest; a law
that is not finite gets the Controller's gravity fallback and deactivates after
`law_failure_timeout`; an effort controller of other joints (effort_check.py) stops the
commands at once and deactivates without a final command.
"""
import math
import time

import numpy as np

from rnea_controller.control import modes
from rnea_controller.control.adaptation import ANSWER_TIME, CHATTER, HUNT_RATIO, VIBRATION
from rnea_controller.control.contact import ContactObserver
from rnea_controller.control.parameters import latency_setting
from rnea_controller.control.timing import ActuationDelay, LoopTiming, predict_into
from rnea_controller.ros import realtime

LATE = 5.0  # the newest state is believed while younger than this x the usual interval ...
LATE_FLOOR = 0.01  # [s] ... or than this
FADE = 0.05  # [s] the time constant of the last feedback's fading while blind
MEASURE_EVERY = 0.25  # [s] the actuation delay is measured this often
PAIRED = ANSWER_TIME  # [s] the adaptation pauses while the actuation delay measured is this+
SURE = 3  # measurements before the delay is said and acted on (one alone can be wrong)
RECOVER_PAUSE = 0.01  # [s] a pause of the loop itself this long, or a blind stretch, ends ...
RECOVER_TIME = 0.05  # [s] ... in this long of commands changing at most RECOVER_STEP ...
RECOVER_STEP = 0.2  # ... x the smallest effort limit per tick (the arm moved unwatched)
LATE_MEMORY = 0.5  # [s] the brake remembers the loop's lateness this long (`_lateness`)


class ControlLoop:
    """The tick of an active ControllerNode (see the module doc).

    cfg: the ControllerConfig at activation; state: the node's JointStateInput (its `timing`
    and `fresh_for` are set here); controller: the node's Controller; outputs: its Outputs;
    stats: its LoopStats; timer: the control timer (its period is nudged by the phase lock);
    now_ns: the stamps' clock [ns]; t0_ns: the trajectory time base [ns]; logger: the node's;
    status: a callable returning the /diagnostics message now; action_server, intake: the
    helpers whose prepared trajectories the tick swaps in; clock: the tick's clock [s]
    (perf_counter; a simulated one in the in-process timing tests, test/timed_loop.py).
    """

    def __init__(self, cfg, state, controller, outputs, stats, *, timer, now_ns, t0_ns, logger,
                 status, action_server=None, intake=None, clock=time.perf_counter):
        self.clock = clock
        self.controller, self.outputs, self.stats = controller, outputs, stats
        self.timer, self._timer_period_ns = timer, timer.timer_period_ns
        self._set_period = realtime.period_setter(timer)
        self.now_ns, self._t0_ns = now_ns, t0_ns
        self.logger, self.status = logger, status
        self.action_server, self.intake = action_server, intake
        self.modes = modes.Modes(cfg.joints, cfg.index, cfg.model.velocity_limits[cfg.index],
                                 clock=lambda: self.seconds(now_ns()), log=self._log,
                                 started=realtime.since_start)
        values = cfg.values
        self.observer = ContactObserver(cfg)  # the world pushing back (control/contact.py)
        self.timing = LoopTiming(
            cfg.model.n, cfg.period, phase_lock=values['phase_lock'],
            latency=latency_setting(values['latency_compensation']),
            velocity_source=values['velocity_source'], cutoff=values['velocity_filter_cutoff'])
        state.timing = self.timing
        state.fresh_for = cfg.state_timeout  # the jump gate's window (inputs.py)
        self._ref = np.zeros((3, len(cfg.joints)))
        self._error = np.zeros((2, len(cfg.joints)))  # e, ed at the newest state believed
        self._least_limit = (None, 0.0)  # (cfg, its smallest effort limit [N·m]): RECOVER_STEP
        self._interval = cfg.period  # [s] the usual interval between new states (`_late`)
        controller.set_schedule()
        self.adaptation = 'adaptation on: command delay not measured yet (needs motion)'
        self._calmed = None  # the law's rule-8 counts when last looked at (_watch_chatter)
        self.actuation = ActuationDelay(cfg.effort_limits, cfg.period)  # publication to effect
        self._actuation_due = clock() + MEASURE_EVERY
        self._predicted = np.zeros((2, cfg.model.n))
        self._predicted_q, self._predicted_qd = self._predicted  # the same objects each tick
        self._publish_delay = 2e-4  # [s] tick start to command published, running mean
        self._last_state = (None, 0)  # (arrival [s], stamp [ns]) of the last state the law saw
        self._last_tick = None  # [s] the previous tick's start (`_seen`)
        self._recover_until = -math.inf  # [s] commands change slowly until then (RECOVER_*)
        self._blind = False  # the last law tick ran blind (`_dead_reckoned`)
        self._holding = True  # the reference rests: no actuation delay measured (friction holds)
        self._gap = 0.0  # [s] between the stamps of the law's last two states (`_state_dt`)
        self._lateness_seen = (None, 0.0)  # (last arrival [s], recent worst gap [s]): `_lateness`
        self._period_ns = round(cfg.period * 1e9)
        self._diagnostics_due = clock() + 1.0
        self.diagnostics_time = 0.0  # [s] the last /diagnostics publish
        self._said = []  # a tick's log lines, said after its command (`_log`)
        self._ticking = False

    @property
    def mode(self):
        return self.modes.mode

    @property
    def trajectory(self):
        """The reference (a Trajectory), None while dropped (stale, braking)."""
        return self.modes.trajectory

    @trajectory.setter
    def trajectory(self, trajectory):
        self.modes.trajectory = trajectory

    def seconds(self, ns):
        """Trajectory time [s] of a stamp [ns]."""
        return (ns - self._t0_ns) * 1e-9

    def tick(self, cfg, state, wrench=None, refusal=None):
        """One control period: the mode, then what it commands, then the timing.

        cfg: the ControllerConfig in force; state: the newest valid joint state (q, qd,
        arrival `time` [s], `valid`); wrench: f_ext {link: wrench} or None; refusal: why the
        effort controller's joints forbid any command (None: they do not)."""
        if refusal is not None:
            return self.modes.refuse(refusal)
        self._ticking = True
        try:
            self._tick(cfg, state, wrench)
        finally:
            self._ticking = False
            if self._said:
                said, self._said = self._said, []
                for level, text in said:
                    self._log(level, text)

    def _tick(self, cfg, state, wrench):
        t_start = self.clock()
        now_ns = self.now_ns()
        before = self.modes.mode
        tick_gap = t_start - self._last_tick if self._last_tick is not None else None
        lateness = self._lateness(cfg, state, tick_gap)
        self.controller.lateness = lateness  # the step bound's time to see an answer
        command = self.modes.step(cfg, t_start, self._seen(cfg, state, t_start, tick_gap),
                                  state.q, state.qd)
        self._last_tick = t_start
        if before is modes.STALE_HOLD and self.modes.mode is not before:
            self.observer.reset()  # states again: which commands acted meanwhile is unknown
        if command is modes.LAW:
            self._control(cfg, state, now_ns, t_start, wrench)
        elif command is modes.BRAKE:
            tau = self.controller.brake(cfg, state.q, state.qd, lateness, state.time)
            self._hold_still(cfg, state, tau, now_ns)
        elif state.valid:
            self.controller.reset()
        if command is not modes.LAW:
            self.observer.reset()  # it pairs states with the law's commands only
        after = self.modes.mode
        if after is not before and (modes.BRAKING in (before, after) or after is modes.CONTACT):
            self._diagnostics_due = 0.0  # the fault, and its end, at once
        self._lock_phase(t_start)
        self._after_tick(cfg, t_start)

    def _lateness(self, cfg, state, tick_gap):
        """How late the loop sees the arm answer its commands [s], for the brake's rate
        (`Controller.brake`): the measured actuation delay, or the worst gap of the last
        LATE_MEMORY between new states or between this loop's own ticks, if more (a starved
        simulator catches up under one held command, a paused node publishes none); at most
        modes.LATE_MOST. A gap beyond `state_timeout` is a stream that stopped, not a late one.
        The delay counts once SURE measurements are in (one alone can be wrong).
        tick_gap [s]: since the previous tick's start (None: the first tick)."""
        last, worst = self._lateness_seen
        if tick_gap is not None:
            worst *= math.exp(-tick_gap / LATE_MEMORY)
            worst = max(worst, tick_gap if tick_gap <= cfg.state_timeout else 0.0)
        if state.valid and state.time != last:
            if last is not None and state.time - last <= cfg.state_timeout:
                worst = max(worst, state.time - last)
            last = state.time
        self._lateness_seen = (last, worst)
        actuation = self.actuation
        measured = actuation.delay if len(actuation.measured) >= SURE else 0.0
        return min(max(worst, measured), modes.LATE_MOST)

    def _seen(self, cfg, state, t_start, tick_gap):
        """The arrival [s] by which the modes judge the state's age (None: no valid state):
        its own, moved on by how long this loop itself did not run beyond a period. A process
        the host paused (tens of ms on a busy stock kernel) wakes its tick beside the
        middleware's receive thread, paused with it: the tick takes the states received so far
        (state_intake.py), and those that waited in the transport are received beside it or
        after it, so the newest state this tick has can be as old as the pause. That is not a
        stream gone stale; the next tick, with them taken, judges it (a loaded demo went
        'stale: stopping' and dropped its trajectory with the simulator publishing on time).
        A pause over RECOVER_PAUSE also starts the gentle return (RECOVER_*, `_control`).
        tick_gap [s]: since the previous tick's start (None: the first tick)."""
        if not state.valid:
            return None
        paused = tick_gap - cfg.period if tick_gap is not None else 0.0
        if paused > RECOVER_PAUSE:
            self._recover_until = t_start + RECOVER_TIME
        return state.time + max(paused, 0.0)

    def _control(self, cfg, state, now_ns, t_start, wrench):
        """The law towards the reference where the command acts, published."""
        if self.action_server is not None:
            self.action_server.swap_in()
        if self.intake is not None:
            self.intake.swap_in(self._log)
        state_dt = self._state_dt(cfg, state)
        if state_dt > 0.0:
            self._watch_contact(cfg, state, self._gap, wrench, now_ns)
        blind = t_start - state.time - self._late(state_dt)
        if self._blind and blind <= 0.0:  # seeing again: the arm moved unwatched
            self._recover_until = t_start + RECOVER_TIME
        self._blind = blind > 0.0
        recovery = (RECOVER_STEP * self._least(cfg) if t_start < self._recover_until else 0.0)
        if blind > 0.0:
            ref_ns, q, qd = self._dead_reckoned(cfg, now_ns, blind)
        else:  # the error there is kept (`_error`) for a blind stretch
            ref_ns, q, qd = self._timed_state(cfg, state, now_ns)
        t, ref = self.seconds(ref_ns), self._ref
        # held where it met an obstacle: no estimate, no integral pushing into it; blind: no
        # state to learn from
        self.controller.adapting = self.modes.mode is not modes.CONTACT and blind <= 0.0
        tau = self.controller.command(cfg, q, qd, ref, wrench, state_dt, (state.q, state.qd),
                                      recovery)
        if self.controller.handed:
            self._handed(self.controller.handed)
        self.observer.commanded(tau)
        self._holding = self.modes.trajectory.is_holding(t)
        self.modes.commanded(cfg, t_start, self._holding, self.controller.failing_since)
        self._publish(tau, ref, ref_ns)
        self._publish_delay += 0.01 * (self.clock() - t_start - self._publish_delay)
        self.actuation.on_command(now_ns * 1e-9 + self._publish_delay, tau)
        if self.action_server is not None and self.action_server.wanted:
            self.action_server.leave_snapshot(ref_ns, ref, state.q, state.qd, cfg.index, tau)

    def _handed(self, handed):
        """Say what the brake found the model missing, now the law's estimate d^."""
        self.controller.handed = None
        torques = ', '.join(f'{joint!r} {value:+.3g} N·m' for joint, value in handed.items())
        self._log('warning', f'after the brake: the model misses a torque at {torques} (a '
                             'payload or links it does not know?), held by the law as its '
                             'estimate d^')

    def _watch_contact(self, cfg, state, state_dt, wrench, now_ns):
        """A new state: the contact observer's residual (the state's age, from its stamp to
        now_ns [ns], widening its delay allowance); beyond a threshold, holding: contact (the
        trajectory dropped; the integral and the estimates cleared: a spring-like hold reads
        as inertia to the estimate) before this tick's law."""
        observer = self.observer
        stamp_ns = self.timing.stamp_ns
        k = observer.update(state.q, state.qd, state_dt,
                            self.controller.estimates if cfg.forget < 1.0 else None, wrench,
                            (now_ns - stamp_ns) * 1e-9 if stamp_ns else 0.0)
        if observer.judged:  # the torque the arm's motion asked for over the interval
            self.actuation.on_state(self.timing.stamp_ns * 1e-9, state_dt, observer.expected)
        if k >= 0 and self.modes.touched(cfg, state.q, cfg.joints[k],
                                         float(observer.residual[k]), observer.threshold[k]):
            self.controller.reset()  # the integral, and estimates a blocked arm corrupts

    def _state_dt(self, cfg, state):
        """The law's online estimate takes new states only, at their real time step [s]:
        0 if this tick's state is the one of the last law tick (states are not in lockstep
        with the ticks), else the time from that state's stamp to this one's (the arrivals'
        if the stamps do not advance within `state_timeout`; a period if neither does).
        `_gap` [s]: the same without the bound, for the contact observer, which must not
        judge a gap (a paused node takes the newest of its queued states: 150 ms counted as
        one period read the arm's motion over them as a contact, joint3 -22.4 N·m)."""
        arrival, stamp_ns = state.time, self.timing.stamp_ns
        last_arrival, last_stamp_ns = self._last_state
        if arrival == last_arrival:
            return 0.0
        self._last_state = (arrival, stamp_ns)
        stamps = (stamp_ns - last_stamp_ns) * 1e-9
        arrivals = arrival - last_arrival if last_arrival is not None else 0.0
        self._gap = stamps if stamps > 0.0 else arrivals if arrivals > 0.0 else cfg.period
        timeout = cfg.state_timeout
        return (stamps if 0.0 < stamps <= timeout else arrivals if 0.0 < arrivals <= timeout
                else cfg.period)

    def _measure_actuation(self, cfg):
        """Every MEASURE_EVERY, in the slack after the command: the actuation delay from the
        arm's motion (control/timing.py's ActuationDelay), on /diagnostics and in the contact
        observer's delay allowance. The estimate pairs a window of 10 states with the
        commands published meanwhile: at PAIRED (four windows) or more the pairing means
        nothing, and the adaptation pauses (issue 23's law with what it learnt: its floor)
        and says so, until the delay is back under it. The delay is the median of the last
        measurements, used once there are SURE of them (here and in `_lateness`), measured only
        while the reference moves (at rest a joint its friction holds does not move with its
        commands: any delay fits), and the adaptation pauses only when
        every one of them is at PAIRED or more: on an arm whose friction the model lacks,
        single measurements of 60 ms came out of a 3 ms delay, and the geared demo arm
        beside two busy processes measured 34 ms."""
        actuation = self.actuation
        if self._holding or not actuation.estimate() or len(actuation.measured) < SURE:
            return
        delay = actuation.delay
        paired = delay < PAIRED or min(actuation.measured) < PAIRED
        said = (f'adaptation {"on" if paired else "paused"}: command delay {delay * 1e3:.0f} ms'
                + ('' if paired else ' (beyond what the estimate can pair)'))
        if said.split(':')[0] != self.adaptation.split(':')[0]:
            self._log('info' if paired else 'warning', said)
            self._diagnostics_due = 0.0
            if paired:
                self.controller.set_schedule()
            else:
                self.controller.set_schedule(0.0, 0.0, False)
        self.adaptation = said
        self.observer.set_delay(delay)

    def _watch_chatter(self, cfg):
        """Say which joints' commands chattered since the last look (the law's rule 8,
        control/adaptation.py: their estimated inertia and friction were halved)."""
        calmed = self.controller.calmed
        seen = self._calmed
        if seen is None or seen.shape != calmed.shape:
            self._calmed = calmed.copy()
            return
        for k in np.flatnonzero(calmed > seen):
            a, b = self.controller.estimates[0, k], self.controller.estimates[1, k]
            self._log('warning', f"joint '{cfg.joints[k]}': its command chattered (it or the "
                      f'velocity swinging back and forth by over {100 * CHATTER:g} % of its '
                      f'effort limit or {100 * VIBRATION:g} % of its velocity limit per '
                      f'tick, or the joint hunting about its goal at about {HUNT_RATIO:g}x its '
                      f"gains' natural frequency): its estimated rotor inertia and viscous "
                      f'friction halved, now {a:.3g} kg·m² and {b:.3g} N·m·s/rad')
        seen[:] = calmed

    def _late(self, state_dt):
        """[s] how old the newest state may be before the law stops believing it: LATE times
        the stream's usual interval (a running mean of the new states' intervals), at least
        LATE_FLOOR (a stock kernel's driver or DDS late by a few ms is ordinary)."""
        if state_dt > 0.0:
            self._interval += 0.05 * (min(state_dt, 0.1) - self._interval)
        return max(LATE_FLOOR, LATE * self._interval)

    def _dead_reckoned(self, cfg, now_ns, blind):
        """(instant the command acts [ns], q, qd) while the states stall: the arm taken to
        follow its reference with the error it last showed, fading with time constant FADE
        (nothing is known of it any more): feedforward along the reference (the stale
        stop's, modes.py) and the last feedback, fading. Predicting the last state onwards
        instead grew a phantom error as the reference moved on, and its feedback drove the
        arm off (issue 35: 3x a velocity limit after a 0.2 s stall)."""
        ref_ns = now_ns + self._period_ns
        self.modes.trajectory.sample(self.seconds(ref_ns), self._ref)
        fade = math.exp(-blind / FADE)
        q, qd = self._predicted_q, self._predicted_qd
        q[cfg.index] = self._ref[0] - fade * self._error[0]
        qd[cfg.index] = self._ref[1] - fade * self._error[1]
        return ref_ns, q, qd

    def _hold_still(self, cfg, state, tau, now_ns):
        """A command of no trajectory (the brake): the reference published is the measured
        position at rest."""
        self._ref[0], self._ref[1:] = state.q[cfg.index], 0.0
        self._publish(tau, self._ref, now_ns)

    def _timed_state(self, cfg, state, now_ns):
        """(instant the command acts [ns], q, qd there), the reference sampled there.

        With latency compensation (docs/timing.md) that instant is L after the newest state's
        stamp, and the state is predicted to it from its own age; without, the reference is
        sampled one period after the tick and the state used as it is."""
        trajectory, timing, ref = self.modes.trajectory, self.timing, self._ref
        L = timing.horizon(now_ns * 1e-9 + self._publish_delay)
        if L is None:
            ref_ns = now_ns + self._period_ns
            trajectory.sample(self.seconds(ref_ns), ref)
            predict_into(state.q, state.qd, ref, cfg.index, 0.0, 0.0, self._predicted, self._error,
                         carried=False)
            return ref_ns, state.q, state.qd
        ref_ns = timing.stamp_ns + round(L * 1e9)
        trajectory.sample(self.seconds(ref_ns), ref)
        predict_into(state.q, state.qd, ref, cfg.index, L, timing.lag, self._predicted,
                     self._error)
        return ref_ns, self._predicted_q, self._predicted_qd

    def _least(self, cfg):
        """The smallest effort limit of `cfg` [N·m] (RECOVER_STEP's unit), kept per config."""
        if self._least_limit[0] is not cfg:
            self._least_limit = (cfg, float(np.min(cfg.effort_limits)))
        return self._least_limit[1]

    def _lock_phase(self, t_start):
        """Phase lock: the timer's next period, nudged within +-2 % (control/timing.py)."""
        period = self.timing.next_period(t_start)
        if period is not None:
            ns = round(period * 1e9)
            if ns != self._timer_period_ns:
                self._timer_period_ns = ns
                self._set_period(ns)

    def configure(self, cfg, state):
        """A new config swapped in while active: the timing parameters that may change."""
        self.timing.velocity.cutoff = cfg.values['velocity_filter_cutoff']
        self.observer.configure(cfg)
        state.fresh_for = cfg.state_timeout

    def publish_status_soon(self):
        """/diagnostics at the next tick (a second source of states appeared or went)."""
        self._diagnostics_due = 0.0

    def _after_tick(self, cfg, t_start):
        """Loop statistics, and the 1 Hz diagnostics in the slack after the command."""
        t_end = self.clock()
        self.stats.record(t_start, t_end, cfg.period)
        if t_end >= self._actuation_due:
            self._actuation_due = t_end + MEASURE_EVERY
            self._measure_actuation(cfg)
            self._watch_chatter(cfg)
            t_end = self.clock()
        if t_end >= self._diagnostics_due:
            self._diagnostics_due = max(self._diagnostics_due + 1.0, t_end)
            self.outputs.diagnostics(self.status())
            self.diagnostics_time = self.clock() - t_end

    def _publish(self, tau, ref, ref_ns):
        """Command and reference (stamped `ref_ns`, the instant its desired state is for)."""
        self.outputs.command(tau)
        self.outputs.reference(ref, self.controller.feedforward, ref_ns)

    def _log(self, level, text):
        """The machine's events in the node's log (rclpy wants one severity per call site).
        Said during a tick, a line waits until the tick has published its command: rclpy's
        logger looks up its caller's source line at each call, ~0.3 ms, which a command (the
        brake's first, the law's with a new trajectory) would otherwise wait for."""
        if self._ticking:
            return self._said.append((level, text))
        if level == 'error':
            self.logger.error(text)
        elif level == 'warning':
            self.logger.warning(text)
        else:
            self.logger.info(text)
