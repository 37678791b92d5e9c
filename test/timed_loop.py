"""The node's tick on a simulated arm under the timing of a loaded host, in process and
deterministic (issue 35): no DDS, no wall clock, one seed per run.

What runs is the node's own loop (`ros.loop.ControlLoop`: modes, latency compensation, phase
lock, contact observer, the law) and its own state intake (`ros.inputs.JointStateInput`: the
jump gate, the stamps, the velocity in use), on simulated clocks; the arm is a MuJoCo plant
(`sim.plant.Plant`) stepping at 1 kHz. What a loaded stock-kernel host does to them, each drawn
from `Timing`'s seed:

- the arm's driver samples a state every step, stamped with ±`jitter` [s] of error, which
  reaches the node `transit` later;
- the node's process is descheduled for a while (`missed`: the share of ticks that fall in such
  a pause, `burst`: the longest pause [ticks]); during a pause nothing of the node runs (its
  states are received at the pause's end); the tick takes the states received by its start,
  in order, each at its arrival, as the node's tick takes them from the middleware's queue
  (ros/state_intake.py), then computes once (an rclpy timer that is late fires once and skips
  the periods it missed);
- a command published at t acts on the arm from t + `delay` [s] (DDS, the driver, the
  controller_manager's own period) plus an exponential extra of mean `delay_jitter` [s] (in
  order: never before the previous command), the newest one that arrived, held (zero-order);
  until the first command acts the arm gets no torque (an effort interface's initial command)
  and falls, or, `braked`, stands at its start on its brakes (released as commands flow);
- `stall` (start [s], duration [s]): the state stream stops (a dropped network, a starved
  driver) while the node goes on ticking and its commands go on acting.
- `blackout` (start [s], duration [s]): the command path stops (the arm's driver or its DDS
  thread starved) while states go on: the commands published meanwhile never act, the arm
  moves on under the last one before (a writer's history of 10 keeps only the newest, and a
  loaded demo's simulator took none for ~0.3 s while the node published at 1 kHz).
- `ticks_first`: at a pause's end the tick runs before the states that queued up are
  received (the middleware's receive thread, paused with the process, wakes beside the tick),
  and takes them at the next tick; else they are received first.

A controller under test is an object with `take(q, qd, stamp [s], now [s])` (a state arrives)
and `tick(now [s]) -> tau or None` (the timer fires): `Node` (the node's tick with a parameter
set) or `PdGravity` (the reference a user would pick instead: PD + gravity tuned on the true
arm, as joint_trajectory_controller's effort PID with a gravity feedforward). `run` returns a
`Result`.
"""
import bisect
from dataclasses import dataclass, field
import math

import mujoco
import numpy as np

from rnea_controller.control.law import Controller, validate_parameters
from rnea_controller.control.loop_stats import LoopStats
from rnea_controller.ros.inputs import JointStateInput
from rnea_controller.ros.loop import ControlLoop

EPOCH_NS = 1_700_000_000 * 10**9  # the stamps' clock at simulated time 0
COMPUTE = 1e-4  # [s] from a tick to its command published


@dataclass(frozen=True)
class Timing:
    """A host's timing (module doc). Times in [s]."""

    delay: float = 0.0
    delay_jitter: float = 0.0
    missed: float = 0.0
    burst: int = 1
    long_pauses: float = 0.1
    jitter: float = 0.0
    transit: float = 2e-4
    stall: tuple | None = None
    blackout: tuple | None = None
    seed: int = 0
    ticks_first: bool = False

    def pauses(self, duration, period):
        """[(start, end)] [s] of the node's pauses: `missed` of the ticks fall in one, each
        1 to 3 periods long, `long_pauses` of them (one in ten) up to `burst` periods, at
        random times."""
        rng = np.random.default_rng(self.seed)
        out, t = [], 0.05
        if self.missed <= 0.0:
            return out
        share = self.long_pauses
        mean_length = ((1.0 - share) * 2.0 + share * (1 + self.burst) / 2.0) * period
        gap = mean_length / self.missed  # the mean time from one pause's start to the next
        while t < duration:
            t += rng.exponential(gap)
            longest = self.burst if rng.random() < share else min(3, self.burst)
            length = rng.integers(1, longest + 1) * period - rng.uniform(0.0, 0.5 * period)
            out.append((t, t + length))
            t += length
        return out


@dataclass
class Result:
    """One run: per plant step the time [s], positions, velocities, applied effort, the
    desired position (NaN where the controller had no trajectory); the commands as
    published (time [s], tau); the modes the node went through and its log."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    applied: np.ndarray
    desired: np.ndarray
    commands: list
    modes: list = field(default_factory=list)
    log: list = field(default_factory=list)


class _Timer:
    def __init__(self, period):
        self.timer_period_ns = round(period * 1e9)


class _Outputs:
    def __init__(self, now):
        self.now, self.sent = now, []

    def command(self, tau):
        self.sent.append((self.now(), np.array(tau, dtype=float)))

    def reference(self, ref, feedforward, ref_ns):
        pass

    def diagnostics(self, status):
        pass


class _Logger:
    def __init__(self, log):
        self.log = log

    def info(self, text):
        self.log.append(('info', text))

    def warning(self, text):
        self.log.append(('warning', text))

    def error(self, text):
        self.log.append(('error', text))


class Node:
    """The node's tick (ControlLoop) and state intake, configured by `values` on `model`,
    on the simulated clock; `trajectory` is swapped in at the first tick (as the intake
    does). `period()` is the timer's period now [s] (the phase lock nudges it)."""

    def __init__(self, model, values, trajectory=None):
        self.cfg = cfg = validate_parameters(values, model)
        self.now = 0.0
        self.log = []
        clock = lambda: self.now  # noqa: E731 - the simulated perf_counter
        now_ns = lambda: EPOCH_NS + round(self.now * 1e9)  # noqa: E731
        self.state = JointStateInput(model.joint_names, required=cfg.joints, mimic=model.mimic,
                                     velocity_limits=model.velocity_limits, clock=clock,
                                     wall_ns=now_ns)
        self.controller = Controller(cfg)
        self.outputs = _Outputs(clock)
        self.timer = _Timer(cfg.period)
        self.loop = ControlLoop(cfg, self.state, self.controller, self.outputs, LoopStats(),
                                timer=self.timer, now_ns=now_ns, t0_ns=EPOCH_NS,
                                logger=_Logger(self.log), status=lambda: None, clock=clock)
        self._trajectory = trajectory
        self.refused = 0
        # the states' names are the model's, in its order: mapped once (the node maps a
        # state's names when they change: JointStateInput.take)
        self._mapping = self.state._model_index(self.state.joint_names)

    def period(self):
        return self.timer.timer_period_ns * 1e-9

    def take(self, q, qd, stamp, now):
        self.now = now  # the tick takes it later, at this arrival: nothing runs between
        try:
            self.state._take_arrays(q, qd, self._mapping, 'auto', EPOCH_NS + round(stamp * 1e9),
                                    (now, EPOCH_NS + round(now * 1e9)))
        except ValueError as error:
            self.refused += 1
            self.log.append(('refused', str(error)))

    def tick(self, now):
        self.now = now
        sent = len(self.outputs.sent)
        self.loop.tick(self.cfg, self.state)
        if self._trajectory is not None and self.loop.trajectory is not None:
            self.loop.trajectory, self._trajectory = self._trajectory, None
        if len(self.outputs.sent) == sent:
            return None
        tau = np.zeros(self.cfg.model.n)
        tau[self.cfg.index] = self.outputs.sent[-1][1]
        return tau

    @property
    def mode(self):
        return self.loop.mode


class PdGravity:
    """PD + gravity tuned on the true arm (the reference a user would pick instead):
    tau = g(q) + Kp e + Kd ed from the newest state, g the plant's on the URDF, Kp = ω² m_i,
    Kd = 2ω m_i, m_i = 1 / (M⁻¹)_ii of the TRUE arm (armature included) at `start` (the
    plant's `joint_inertias` where it has one, else MuJoCo's), ω = 20 rad/s (the node's
    default), clamped to the effort limits."""

    def __init__(self, plant, trajectory, start, omega=20.0):
        inertias = getattr(plant, 'joint_inertias', None)  # another simulator's own
        m = inertias(start) if inertias is not None else joint_inertias(plant, start)
        self.kp, self.kd = omega**2 * m, 2.0 * omega * m
        self.plant, self.trajectory = plant, trajectory
        self.q = self.qd = None
        self.mode, self.log, self.refused, self.now = 'tracking', [], 0, 0.0

    def period(self):
        return 1e-3

    def take(self, q, qd, stamp, now):
        self.q, self.qd = q, qd

    def tick(self, now):
        if self.q is None:
            return None
        ref = self.trajectory.sample(now + 1e-3)
        tau = self.plant.gravity(self.q) + self.kp * (ref[0] - self.q) + self.kd * (ref[1]
                                                                                   - self.qd)
        return np.clip(tau, -self.plant.effort_limits, self.plant.effort_limits)


def joint_inertias(plant, q):
    """m_i = 1 / (M⁻¹)_ii of a MuJoCo plant (the true arm, armature included) at q [kg·m²]."""
    data = mujoco.MjData(plant.model)
    data.qpos[:] = q
    mujoco.mj_forward(plant.model, data)
    M = np.zeros((plant.n, plant.n))
    mujoco.mj_fullM(plant.model, data, M)
    return 1.0 / np.diag(np.linalg.inv(M))


def _awake(pauses, t):
    """The time the node runs something due at t [s]: t, or the end of the pause holding t."""
    i = bisect.bisect_right(pauses, (t, math.inf)) - 1
    return pauses[i][1] if i >= 0 and pauses[i][0] <= t < pauses[i][1] else t


def run(plant, controller, duration, timing, start, reference=None, braked=False):
    """`controller` on `plant` (reset to `start`) for `duration` [s] under `timing`; returns
    a Result. `reference` (a Trajectory): the desired position recorded per step; `braked`:
    the arm is held at `start` until the first command acts (module doc)."""
    dt = plant.model.opt.timestep
    plant.reset(start)
    steps = int(round(duration / dt))
    rng = np.random.default_rng(timing.seed + 1)
    pauses = timing.pauses(duration, controller.period())
    arrivals = []  # (taken at [s], q, qd, stamp [s]) not yet taken
    sent = []  # (acts from [s], tau)
    held = np.zeros(plant.n)
    next_tick = 0.5 * dt
    out = Result(np.zeros(steps), np.zeros((steps, plant.n)), np.zeros((steps, plant.n)),
                 np.zeros((steps, plant.n)), np.full((steps, plant.n), np.nan), [])
    for k in range(steps):
        t = k * dt
        stalled = timing.stall is not None and (timing.stall[0] <= t
                                                < timing.stall[0] + timing.stall[1])
        if not stalled:
            stamp = t + (rng.uniform(-timing.jitter, timing.jitter) if timing.jitter else 0.0)
            arrivals.append((_awake(pauses, t + timing.transit), plant.q, plant.qd, stamp))
        while True:  # the node's events before t + dt, in time order
            at = _awake(pauses, next_tick)  # a late timer fires once, at the pause's end
            first = min(at, arrivals[0][0]) if arrivals else at
            if first >= t + dt:
                break
            if arrivals and (arrivals[0][0] < at or arrivals[0][0] == at
                             and not timing.ticks_first):
                taken, q, qd, stamp = arrivals.pop(0)
                controller.take(q, qd, stamp, taken)
                continue
            tau = controller.tick(at)
            blacked = timing.blackout is not None and (
                timing.blackout[0] <= at < timing.blackout[0] + timing.blackout[1])
            if tau is not None:
                out.commands.append((at + COMPUTE, tau.copy()))
            if tau is not None and not blacked:
                acts = at + COMPUTE + timing.delay + (rng.exponential(timing.delay_jitter)
                                                      if timing.delay_jitter else 0.0)
                sent.append((max(acts, sent[-1][0]) if sent else acts, tau.copy()))
            if not out.modes or out.modes[-1] != controller.mode:
                out.modes.append(controller.mode)
            period = controller.period()
            next_tick += period
            while next_tick <= at:  # the periods a pause swallowed are skipped
                next_tick += period
        while sent and sent[0][0] <= t:
            held, braked = sent.pop(0)[1], False
        if braked:  # on its brakes until the first command acts (module doc): not stepped
            out.applied[k] = 0.0
        else:
            out.applied[k] = plant.step(held)
        out.t[k], out.q[k], out.qd[k] = t + dt, plant.q, plant.qd
        if reference is not None:
            out.desired[k] = reference.sample(t + dt)[0]
        if not np.all(np.isfinite(plant.q)) or np.max(np.abs(plant.qd)) > 1000.0:
            out.t, out.q, out.qd = out.t[:k + 1], out.q[:k + 1], out.qd[:k + 1]
            break
    out.log = controller.log
    return out


def command_steps(result, limits):
    """Per joint, the largest change between consecutive published commands, as a share of
    its effort limit."""
    taus = np.array([tau for _, tau in result.commands])
    if len(taus) < 2:
        return np.zeros(len(limits))
    return np.max(np.abs(np.diff(taus, axis=0)), axis=0) / limits


def contacts(result):
    """The log lines of contacts the node declared."""
    return [text for _, text in result.log if 'contact' in text and 'external torque' in text]

