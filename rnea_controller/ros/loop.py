"""The control loop of the `rnea_controller` node: its timer's tick, in its own file.

`ControlLoop` is a part of `ControllerNode` (a mixin: the node is `ControlLoop` +
LifecycleNode): the tick and what it calls, read here in one piece. It uses what the node sets
up at configure (`config` and a `_pending` one, `state`, `controller`, `outputs`, `stats`,
`intake`, `_ref`, `_now_ns`, `_t0_ns`, `_f_ext`, `_wrench_time`) and at activate (`_timer` and
`_timer_period_ns`, `_diagnostics_due`, `_stale_since`, `_failure_logged`, `action_server`, and
the timing state made by `_start_timing`); it sets `mode`, `trajectory`, `diagnostics_time`,
and `deactivate_requested` for the spin loop.

One tick: a pending configuration is swapped in; with a fresh state (newer than
`state_timeout`), the reference is sampled where the command will act (one period ahead, or
the latency L ahead of the state's stamp with latency compensation, docs/timing.md), the law
is computed with one compiled call (`control.law`), command and reference are published, the
action server's snapshot left (once it has a reader); then the phase lock nudges the timer's
period and, once a second, /diagnostics go out in the slack of the period.

Stale state (newest valid joint state older than `state_timeout`, by arrival on the steady
clock): the trajectory is dropped; `stale_policy` hold_then_stop publishes g(q_last) for
`stale_hold_time` then nothing, hold publishes g(q_last) until states return, stop publishes
nothing at once. Fresh states then hold the measured position. A second source of joint states
(issue 26) is kept out by inputs.py's gates, and shown by node.py's `_check_sources`.

Effort controller of other joints, seen after activation (effort_check.py): no command from
that tick on, and the node deactivates without a final command.

Law failure (non-finite law at runtime): the gravity hold of the last good configuration at the
measured position, logged once, counted in 'non-finite fallbacks'; after `law_failure_timeout`
the node deactivates with its final command.
"""
import math
import time

import numpy as np

from rnea_controller.control.parameters import latency_setting
from rnea_controller.control.timing import LoopTiming, predict
from rnea_controller.control.trajectory import Trajectory
from rnea_controller.ros import diagnostics, realtime


class ControlLoop:
    """The tick of ControllerNode and its timing state (see the module doc)."""

    def _start_timing(self, cfg):
        """Phase lock, latency compensation and velocity estimate (control/timing.py, issue
        12), from the parameters in force at activation; the first state says once which
        velocity source is used."""
        values = cfg.values
        self.timing = LoopTiming(
            cfg.model.n, cfg.period, phase_lock=values['phase_lock'],
            latency=latency_setting(values['latency_compensation']),
            velocity_source=values['velocity_source'], cutoff=values['velocity_filter_cutoff'])
        self.state.timing = self.timing
        self.state.fresh_for = cfg.state_timeout  # the jump gate's window (inputs.py)
        self._qdd = np.zeros(cfg.model.n)
        self._predicted = np.zeros((2, cfg.model.n))
        self._predicted_q, self._predicted_qd = self._predicted  # the same objects each tick
        self._publish_delay = 2e-4  # [s] tick start to command published, running mean
        self._velocity_logged = self._commanding_logged = False
        self._period_ns = round(cfg.period * 1e9)

    def _tick(self):
        """One control period: pending config -> newest state -> reference one period ahead
        -> law -> publish."""
        if self._timer is None:  # the executor had queued this tick before the loop stopped
            return
        if self.effort_check.refusal is not None:  # a mismatching effort controller appeared
            return self._refuse_effort_controller()
        t_start = time.perf_counter()
        self._swap_pending()
        cfg, state = self.config, self.state
        now_ns = self._now_ns()
        if t_start - state.time > cfg.state_timeout:
            self._stale_tick(cfg, t_start)
        else:
            self._control_tick(cfg, state, now_ns, t_start)
        self._lock_phase(t_start)
        self._after_tick(t_start)

    def _control_tick(self, cfg, state, now_ns, t_start):
        """Fresh state: the law towards the reference where the command acts, published."""
        if self.action_server is not None:
            self.action_server.swap_in()
        self.intake.swap_in()
        if self.trajectory is None:
            self._hold_measured(now_ns)
        ref_ns, q, qd = self._timed_state(cfg, now_ns)
        t, ref = self._seconds(ref_ns), self._ref
        tau = self.controller.command(cfg, q, qd, ref, self._wrench(cfg, t_start))
        self.mode = 'hold' if self.trajectory.is_holding(t) else 'tracking'
        if self.controller.failing_since is not None:
            self._law_failure(cfg, t_start)
        self._publish(tau, ref, ref_ns)
        self._publish_delay += 0.01 * (time.perf_counter() - t_start - self._publish_delay)
        if self.action_server is not None and self.action_server.wanted:
            self.action_server.leave_snapshot(ref_ns, ref, state.q, state.qd, cfg.index, tau)

    def _timed_state(self, cfg, now_ns):
        """(instant the command acts [ns], q, qd there), the reference sampled there.

        With latency compensation (docs/timing.md) that instant is L after the newest state's
        stamp, and the state is predicted to it from its own age; without, the reference is
        sampled one period after the tick and the state used as it is."""
        L = self.timing.horizon(now_ns * 1e-9 + self._publish_delay)
        if L is None:
            ref_ns = now_ns + self._period_ns
            self.trajectory.sample(self._seconds(ref_ns), self._ref)
            return ref_ns, self.state.q, self.state.qd
        ref_ns = self.timing.stamp_ns + round(L * 1e9)
        self.trajectory.sample(self._seconds(ref_ns), self._ref)
        self._qdd[cfg.index] = self._ref[2]
        predict(self.state.q, self.state.qd, self._qdd, L, self.timing.lag, out=self._predicted)
        return ref_ns, self._predicted_q, self._predicted_qd

    def _lock_phase(self, t_start):
        """Phase lock: the timer's next period, nudged within +-2 % (control/timing.py)."""
        period = self.timing.next_period(t_start)
        if period is not None and round(period * 1e9) != self._timer_period_ns:
            self._timer_period_ns = self._timer.timer_period_ns = round(period * 1e9)

    def _swap_pending(self):
        if self._pending is not None:
            self.config, self._pending = self._pending, None
            if self._timer is not None:  # the timing parameters that may change while active
                self.timing.velocity.cutoff = self.config.values['velocity_filter_cutoff']
                self.state.fresh_for = self.config.state_timeout

    def _after_tick(self, t_start):
        """Loop statistics, and the 1 Hz diagnostics in the slack after the command."""
        t_end = time.perf_counter()
        self.stats.record(t_start, t_end, self.config.period)
        if t_end >= self._diagnostics_due:
            self._diagnostics_due = max(self._diagnostics_due + 1.0, t_end)
            stamp = self.get_clock().now().to_msg()
            self.outputs.diagnostics(diagnostics.make_status(self, stamp))
            self.diagnostics_time = time.perf_counter() - t_end

    def _publish(self, tau, ref, ref_ns):
        """Command and reference (stamped `ref_ns`, the instant its desired state is for)."""
        self.outputs.command(tau)
        self.outputs.reference(ref, self.controller.feedforward, ref_ns)

    def _law_failure(self, cfg, t_start):
        """The law is not finite: gravity hold meanwhile (Controller), deactivate when late."""
        self.mode = 'law failure: gravity hold'
        failing = t_start - self.controller.failing_since
        if not self._failure_logged:
            self._failure_logged = True
            self.get_logger().error('control law not finite: gravity hold of the last good '
                                    'configuration; deactivating if it lasts '
                                    f'{cfg.law_failure_timeout} s')
        if failing > cfg.law_failure_timeout and not self.deactivate_requested:
            self.get_logger().error(f'control law not finite for {failing:.3f} s: deactivating')
            self.deactivate_requested = True

    def _wrench(self, cfg, t_start):
        """f_ext from the newest ~/external_wrench unless older than external_wrench_timeout."""
        timeout = cfg.external_wrench_timeout or math.inf
        return self._f_ext if t_start - self._wrench_time < timeout else None

    def _hold_measured(self, now_ns):
        """Hold the measured position from now on (activation, return of fresh states)."""
        self.trajectory = Trajectory.hold(self.state.q[self.config.index], self._seconds(now_ns))
        self._stale_since = None
        if not self._commanding_logged:
            self._commanding_logged = True
            self.get_logger().info('first command: holding the measured position'
                                   + realtime.since_start())

    def _refuse_effort_controller(self):
        """No command to a controller of other joints: the loop ends, without a final command
        (effort_check.py)."""
        if not self.deactivate_requested:
            self.get_logger().error(f'commands stopped, deactivating: '
                                    f'{self.effort_check.refusal}')
            self.mode = 'refused: effort controller joints'
            self.deactivate_requested = True

    def _stale_tick(self, cfg, t_start):
        """No fresh state: drop the trajectory and act by `stale_policy` (module doc)."""
        if not self.state.valid:
            self.mode = 'waiting for joint states'
            return
        if self._stale_since is None:
            self._stale_since, self.trajectory = t_start, None
            self.get_logger().warning(f'joint states stale (> {cfg.state_timeout} s): '
                                      f'{cfg.stale_policy}')
        held = t_start - self._stale_since
        if cfg.stale_policy == 'hold' or (cfg.stale_policy == 'hold_then_stop'
                                          and held <= cfg.stale_hold_time):
            tau = self.controller.gravity_hold(cfg, self.state.q)
            self._ref[0], self._ref[1:] = self.state.q[cfg.index], 0.0
            self.mode = 'stale: gravity hold'
            self._publish(tau, self._ref, self._now_ns())
        else:
            self.mode = 'stale: stopped'
            self.controller.reset()

    def _seconds(self, ns):
        return (ns - self._t0_ns) * 1e-9
