"""The control loop's modes: one state machine, ROS-free (issue 29; libfranka's robot modes).

What the arm gets in each mode (the diagnostics 'mode' strings; `COMMAND`):

| mode | the command |
|---|---|
| 'waiting for joint states' | nothing (no valid state since activation) |
| 'hold' | the law towards a resting reference (the measured position, or a trajectory's end) |
| 'tracking' | the law towards the trajectory |
| 'braking: overspeed' | `Controller.brake`: damping toward rest plus gravity, each new state |
| 'holding: contact' | the law towards the measured position where the contact was detected |
| 'stale: stopping' | the law, blind, towards the reference brought to rest, by `stale_policy` |
| 'stale: stopped' | nothing (the effort controller keeps the last command: the stop's hold) |
| 'law failure: gravity hold' | the Controller's fallback: g(q) of the last good configuration |
| 'refused: effort controller joints' | nothing; the node deactivates without a final command |
| 'finished' | nothing (the final command was sent) |

Transitions, all here (`step` once a tick before the command, `commanded` after the law):

- no valid state yet -> waiting; a state older than `state_timeout` -> stale (the reference
  dropped): the desired state at that instant brought to rest (`Trajectory.stop`, each joint
  decelerating at most at its velocity limit per STOP_TIME) and held there, commanded by the
  law without states (the loop's dead reckoning, ros/loop.py: feedforward along the stop, the
  last feedback fading), then stopped after `stale_hold_time` (`hold_then_stop`), at once
  (`stop`) or never (`hold`). Only states that stop coming lead here. A gravity hold of the
  last state instead let an arm in fast motion coast: on a stall of 0.2 s in an excitation
  the states came back at 2.7x a velocity limit (the brake then took over, 1.7 rad off).
- a fresh state after waiting or stale -> hold of the measured position.
- a new state with a controlled joint beyond its velocity limit (measured or estimated: the
  velocity in use), from any commanding mode -> braking: the reference dropped (a trajectory
  or action goal ends aborted, `dropped` says why), ERROR naming the joint and its speed.
- a contact (`contact`: a joint's external torque beyond its threshold, control/contact.py)
  while holding or tracking -> holding: contact: the reference dropped (as braking), ERROR
  naming the joint and its torque, and a hold of the measured position at detection (the
  integral and estimates cleared by the loop); left only for a new trajectory (-> tracking),
  an overspeed (-> braking) or stale states.
- braking, every controlled joint below its rest speed (REST_FRACTION of its limit, or
  REST_SPEED where it has none), or braking for BRAKE_LONGEST -> hold of the measured position
  (issue 43: on an arm whose gravity the model gets wrong, a payload or links off, the brake's
  g(q) does not hold it, and it sank at the brake's terminal speed, above the rest speed,
  braking to the end of the run: 1.37 rad off on the corpus's Jaco2 with a payload; the hold's
  law, its estimate and integral, corrects what the brake cannot).
- after the law: the trajectory's end reached -> hold, else tracking; the law not finite ->
  law failure (logged once an activation), and after `law_failure_timeout` -> `deactivate`.
- the effort controller of other joints -> refused; the loop stopped -> finished (both final).

ROS-free: plain Python and the core's Trajectory; the node's loop (ros/loop.py) calls it and
does what `COMMAND` says. `log(level, text)` ('info', 'warning', 'error') receives the events.
"""
from collections.abc import Callable, Sequence
import math

import numpy as np

from rnea_controller.control.law import ControllerConfig, REST_FRACTION, REST_SPEED, rest_speeds
from rnea_controller.control.trajectory import Trajectory

WAITING = 'waiting for joint states'
HOLD = 'hold'
TRACKING = 'tracking'
BRAKING = 'braking: overspeed'
CONTACT = 'holding: contact'
STALE_HOLD = 'stale: stopping'
STALE_STOPPED = 'stale: stopped'
LAW_FAILURE = 'law failure: gravity hold'
REFUSED = 'refused: effort controller joints'
FINISHED = 'finished'

LAW, BRAKE, NOTHING = 'law', 'brake', 'nothing'  # what the loop computes
COMMAND = {WAITING: NOTHING, HOLD: LAW, TRACKING: LAW, BRAKING: BRAKE, STALE_HOLD: LAW,
           STALE_STOPPED: NOTHING, LAW_FAILURE: LAW, REFUSED: NOTHING, FINISHED: NOTHING,
           CONTACT: LAW}

LATE_MOST = 0.1  # [s] the most lateness the brake allows for: it damps at π / (4 x) at least
# [s] the longest brake: twice what the slowest brake (π / (4 LATE_MOST)) takes to slow a joint
# from twice its limit to its rest speed
BRAKE_LONGEST = 2.0 * math.log(2.0 / REST_FRACTION) / (math.pi / (4.0 * LATE_MOST))
STOP_TIME = 0.5  # [s] a stale stop decelerates a joint by at most its velocity limit in this


def _quiet(level: str, text: str) -> None:
    """The default `log`: events go nowhere."""


class Modes:
    """The loop's mode, its reference `trajectory` and the transitions between them.

    velocity_limits [rad/s]: of the controlled joints `joints` (inf where absent), at model
    `index`. `clock()` is the trajectory time now [s] (a new hold starts there); `log(level,
    text)` gets the events; `started()` a note for the first command's line. Read: `mode`,
    `trajectory` (None while dropped), `fault` (the last overspeed, text), `overspeeds`
    (their count), `dropped` ((trajectory, reason) of the last reference dropped),
    `deactivate` (the node should deactivate), `contact` (the last contact, text) and
    `contacts` (their count).
    """

    def __init__(self, joints: Sequence[str], index: Sequence[int],
                 velocity_limits: Sequence[float], clock: Callable[[], float],
                 log: Callable[[str, str], None] = _quiet,
                 started: Callable[[], str] = lambda: '') -> None:
        self.joints = tuple(joints)
        self._index = [int(i) for i in index]
        self._limits = [float(v) for v in velocity_limits]
        self._rest = rest_speeds(self._limits).tolist()
        self._slowest = min(self._limits, default=math.inf)  # below it: no joint is over
        self._clock, self._log, self._started = clock, log, started
        self.mode = WAITING
        self.trajectory = None
        self.fault, self.overspeeds, self.dropped = None, 0, None
        self._braking_since = -math.inf
        self.contact, self.contacts, self._contact_hold = None, 0, None
        self.deactivate = False
        self._stale_since = None
        self._seen = None  # the arrival time of the last state watched for overspeed
        self._commanding = self._failure_logged = False

    def step(self, cfg: ControllerConfig, now: float, arrival: float | None, q: np.ndarray,
             qd: np.ndarray) -> str:
        """The mode of this tick, and the command it gets (`COMMAND`).

        cfg: the ControllerConfig in force; now [s]: the tick's start (the state's clock);
        arrival [s]: of the newest valid state, None before any; q [rad], qd [rad/s]: that
        state, model size.
        """
        if self.mode in (REFUSED, FINISHED):
            return NOTHING
        if arrival is None:
            self.mode = WAITING
            return NOTHING
        if now - arrival > cfg.state_timeout:
            return self._stale(cfg, now, q)
        if self.mode in (WAITING, STALE_HOLD, STALE_STOPPED):
            self._hold(cfg, q)
        if arrival != self._seen:  # a new state: watched for overspeed once
            self._seen = arrival
            speeds, slowest = qd.tolist(), self._slowest
            if self.mode is BRAKING or not (-slowest <= min(speeds) and max(speeds) <= slowest):
                self._watch(cfg, q, speeds, now)  # else every joint is below every limit
        return COMMAND[self.mode]

    def commanded(self, cfg: ControllerConfig, now: float, holding: bool,
                  failing_since: float | None) -> None:
        """After the law: hold or tracking (`holding`: the trajectory's end is reached), or
        law failure while the law is not finite (`failing_since` [s], None while finite)."""
        if failing_since is None:
            if self.mode is STALE_HOLD or (self.mode is CONTACT
                                           and self.trajectory is self._contact_hold):
                return  # held until a new trajectory replaces the contact's hold; stale
            self.mode = HOLD if holding else TRACKING
            return
        self.mode = LAW_FAILURE
        if not self._failure_logged:
            self._failure_logged = True
            self._log('error', 'control law not finite: gravity hold of the last good '
                               f'configuration; deactivating if it lasts '
                               f'{cfg.law_failure_timeout} s')
        failing = now - failing_since
        if failing > cfg.law_failure_timeout and not self.deactivate:
            self._log('error', f'control law not finite for {failing:.3f} s: deactivating')
            self.deactivate = True

    def touched(self, cfg: ControllerConfig, q: np.ndarray, joint: str,
                torque: float, threshold: float) -> bool:
        """A contact: joint's external torque [N·m] beyond its threshold at the measured q
        (model size). While holding or tracking: the reference dropped, ERROR, a hold of q
        (-> holding: contact); returns True then, False in any other mode (ignored)."""
        if self.mode not in (HOLD, TRACKING):
            return False
        self.contacts += 1
        self.contact = (f'joint {joint!r} external torque {torque:.3g} N·m, beyond its '
                        f'threshold {threshold:.3g} N·m')
        self._drop(f'{CONTACT}: {self.contact}')
        self.trajectory = self._contact_hold = Trajectory.hold(q[cfg.index], self._clock())
        self.mode = CONTACT
        self._log('error', f'contact: {self.contact}: trajectory dropped, holding the measured '
                           'position until a new trajectory')
        return True

    def refuse(self, reason: str) -> None:
        """An effort controller of other joints: no command from now on, deactivate."""
        if self.mode != REFUSED:
            self._log('error', f'commands stopped, deactivating: {reason}')
            self.mode, self.deactivate = REFUSED, True

    def finish(self) -> None:
        """The loop stopped with its final command."""
        self.mode = FINISHED

    def _hold(self, cfg, q):
        """Hold the measured position from now on (activation, return of fresh states)."""
        self.trajectory = Trajectory.hold(q[cfg.index], self._clock())
        self.mode, self._stale_since, self._contact_hold = HOLD, None, None
        if not self._commanding:
            self._commanding = True
            self._log('info', 'first command: holding the measured position' + self._started())

    def _drop(self, reason):
        """The reference is dropped: a trajectory or goal running ends, `dropped` says why."""
        self.dropped = (self.trajectory, reason)
        self.trajectory = None

    def _watch(self, cfg, q, speeds, now):
        """A new state (speeds: a list, model order): overspeed -> braking; braking and at rest,
        or braking for BRAKE_LONGEST [s] -> hold where it is."""
        if self.mode is BRAKING:
            if all(abs(speeds[i]) < rest for i, rest in zip(self._index, self._rest)):
                self._log('info', 'at rest after braking: holding the measured position')
                self._hold(cfg, q)
            elif now - self._braking_since > BRAKE_LONGEST:
                self._log('warning', f'braked {BRAKE_LONGEST:.2f} s and still moving (the '
                                     "model's gravity does not hold the arm): holding the "
                                     'measured position')
                self._hold(cfg, q)
            return
        for name, i, limit in zip(self.joints, self._index, self._limits):
            if abs(speeds[i]) > limit:
                self.overspeeds += 1
                self.fault = (f'joint {name!r} at {speeds[i]:.3g} rad/s, beyond its velocity '
                              f'limit {limit:g} rad/s')
                self._drop(f'{BRAKING}: {self.fault}')
                self.mode, self._braking_since = BRAKING, now
                self._log('error', f'{self.fault}: braking to rest (trajectory dropped), then '
                                   'holding where it stops')
                return

    def _stale(self, cfg, now, q):
        """No fresh state: the reference dropped and brought to rest, then `stale_policy`."""
        if self._stale_since is None:
            self._stale_since = now
            t, trajectory = self._clock(), self.trajectory
            self._drop(f'stale: no joint state for {cfg.state_timeout} s')
            current = (trajectory.sample(t) if trajectory is not None else np.vstack(
                (q[cfg.index], np.zeros((2, len(self._index))))))
            limits = np.array(self._limits)
            decel = np.where(np.isfinite(limits), limits, REST_SPEED * 100.0) / STOP_TIME
            self.trajectory = Trajectory.stop(current, t, decel)
            self._log('warning', f'joint states stale (> {cfg.state_timeout} s): '
                                 f'{cfg.stale_policy}')
        held = now - self._stale_since
        if cfg.stale_policy == 'hold' or (cfg.stale_policy == 'hold_then_stop'
                                          and held <= cfg.stale_hold_time):
            self.mode = STALE_HOLD
        else:
            self.mode = STALE_STOPPED
        return COMMAND[self.mode]
