"""Contact detection: the world pushes back (a collision reflex, as Franka's), ROS-free.

The external torque tau_ext on each controlled joint is estimated by the generalized-momentum
observer of De Luca & Mattone (2003, 2005),

    r = K_O (p(t) - p(0) - ∫ (tau + Cᵀ(q, qd) qd - g(q) + r) dt),    p = M(q) qd,

whose output obeys ṙ = K_O (tau_ext - r): a first-order low-pass of tau_ext with bandwidth K_O
[1/s] (`contact.bandwidth`), no acceleration needed. In discrete time, with ṗ = tau + tau_ext
+ Cᵀqd - g and Ṁ qd taken over the same interval as Δp, the integral's increment between two
states k-1 and k is

    Δp - Ṁ qd Δt = M Δqd = (tau + tau_ext - n(q, qd)) Δt,     n = C qd + g,

so that the observer is, exactly in that discretisation, r += (1 - exp(-K_O Δt)) (tau_ext_k -
r) with tau_ext_k = RNEA(q, qd, Δqd / Δt) - tau: ONE RNEA row of our own model per new state
(Δqd / Δt only enters through M Δqd, the momentum's change: velocity noise is not
differentiated, it is the change of p). q and qd are the new state's (qd the mean of the two
states'), Δt the time between their stamps, tau the mean of the commands published between
them (the torque that acted; with `robot_compensates_gravity` plus the arm's own g(q)).
What the model knows beyond RNEA is part of n: the told friction b qd + c tanh(qd / w) and,
with the online estimate on (control/law.py), a^ qdd + b^ qd (what the arm showed in motion;
not the bias d^, which a steady push would become): the residual is what the model, as far as
it is known, does not explain. Detection acts while the joint states change (`armed`): a
stream of one unchanging state (a test's feeder, a driver repeating its last state) answers no
command, and an observer would read any command as a blocked arm. An interval between states
over GAP x the stream's usual one is not judged (`_regular`: over a gap which commands acted,
and from when, is unknown).

Detection: a controlled joint whose |r| exceeds its threshold (`contact.<joint>.threshold`,
default `contact.threshold_share` × its effort limit) plus two allowances for what a model
error shows while the joint moves: an untold viscous friction of up to
`contact.velocity_allowance` × effort limit / velocity limit (times |qd|: a geared joint's
friction, which no URDF states, grows with its speed) and what the URDF's `<dynamics damping
friction>` would explain and the law does not feed forward, (b_urdf - b_told)⁺ |qd| + (c_urdf
- c_told)⁺ (such tags are often placeholders, so the law leaves them out by default, issue 29,
but where they are true the arm shows them). A third: the estimate's a^ qdd, low-passed as
the residual is: a^ is learnt, not known, and one learnt from a joint's friction (the law's
rule 8, control/adaptation.py: a^ 0.73 kg·m² on the friction-true xArm7's joint3) read its
own error at a sharp deceleration as a contact (-24.8 N·m against 22.6). A model error is
not a contact; an arm blocked by an obstacle is at rest, where only the first term counts.
`update` returns the joint (the largest share of its threshold). The loop's modes
(control/modes.py) then drop the trajectory and hold.
"""
import math
from typing import TYPE_CHECKING

from numba import njit, typeof
import numpy as np

from rnea_controller.control.friction import friction_torque
from rnea_controller.dynamics import rnea_kernel
from rnea_controller.dynamics.rnea import body_forces

if TYPE_CHECKING:
    from rnea_controller.control.law import ControllerConfig


class ContactObserver:
    """Momentum observer of the controlled joints (module doc).

    cfg: the ControllerConfig in force (model, index, friction, effort limits, values). Read:
    `residual` (m,) [N·m] the estimate of tau_ext, `thresholds` (m,) [N·m] at rest,
    `threshold` (m,) [N·m] those of the last state (with the URDF friction's allowance),
    `peak` (m,) the largest |residual| since `reset`. One compiled call per new state, on the
    law's own constant record (`cfg.law_model`: model arrays, index, told friction).
    """

    def __init__(self, cfg: 'ControllerConfig') -> None:
        n, m = cfg.model.n, len(cfg.joints)
        self._joint = np.zeros((len(ROWS), m))  # per joint: ROWS
        (self.residual, self.peak, self.thresholds, self.threshold, _, _,
         self._applied, _, self.expected, self._inertial) = self._joint
        self.judged = False  # the last `update` judged its interval (`expected` is its)
        self._recent = np.zeros((1, m))  # the last commands, a ring (`configure` sizes it)
        self._newest = 0  # the ring's row of the newest command
        self._delay = 0.0  # [s] the delay allowance's window before the state's age (set_delay)
        self._rows = np.zeros((4, 2, n))  # Q, QD, QDD, T
        self._last = np.zeros((2, n))  # q, qd of the previous state
        self._count, self._started = 0, False
        self._usual, self._unusual = None, 0  # the usual interval between states [s] (_regular)
        self._entry = self._seen = None
        self._q = None  # the previous state's q (bytes), and how many states in a row repeated it
        self.frozen = FROZEN
        self.configure(cfg)
        self.reset()
        self._warm_up(cfg)

    def _warm_up(self, cfg):
        """Compile (or load from numba's disk cache) the observer now, not in a tick: on
        copies, the state untouched."""
        n = cfg.model.n
        _observe(cfg.law_model, self._forces, self._rows.copy(), self._last.copy(), np.zeros(n),
                 np.zeros(n), self._joint.copy(), self._recent.copy(), _NO_ESTIMATES, False,
                 1e-3, 1.0, self.bandwidth, 0, 1)

    def configure(self, cfg: 'ControllerConfig') -> None:
        """Take a (new) configuration: model, thresholds, bandwidth, friction."""
        values = cfg.values
        self.enabled = bool(values['contact.detection'])
        self.bandwidth = float(values['contact.bandwidth'])
        share = float(values['contact.threshold_share'])
        self.thresholds[:] = share * np.asarray(cfg.effort_limits, dtype=float)
        for k, joint in enumerate(cfg.joints):
            value = values.get(f'contact.{joint}.threshold')
            if value is not None:
                self.thresholds[k] = value
        index = cfg.index
        velocity = np.asarray(cfg.model.velocity_limits, float)[index]
        slope = np.where(np.isfinite(velocity) & (velocity > 0), np.asarray(
            cfg.effort_limits, float) / np.where(velocity > 0, velocity, 1.0), 0.0)
        self._joint[4] = (float(values['contact.velocity_allowance']) * slope + np.maximum(
            np.asarray(cfg.model.damping, float)[index] - cfg.viscous, 0.0))
        self._joint[5] = np.maximum(np.asarray(cfg.model.friction, float)[index] - cfg.coulomb,
                                    0.0)
        self.threshold[:] = self.thresholds + self._joint[5]
        self._cfg = cfg
        rows = 1 + int(np.ceil(MAX_DELAY / cfg.period))
        if self._recent.shape != (rows, len(cfg.joints)):
            self._recent = np.resize(self._recent, (rows, len(cfg.joints)))
            self._newest %= rows
        self.set_delay(0.0)
        self._forces = np.zeros((1, cfg.model.n, 6))
        self._entry = self._seen = None

    def reset(self) -> None:
        """Forget the residual and the previous state (activation, a gap in the states, a
        command that was not published by the law)."""
        self.residual[:] = 0.0
        self.peak[:] = 0.0
        self._applied[:] = 0.0
        self._inertial[:] = 0.0
        self._count, self._started = 0, False
        self._recent[:] = 0.0  # before the law's first command the arm may have had none

    def commanded(self, tau: np.ndarray) -> None:
        """A command tau (m,) [N·m] was published: it acts until the next state (or, late,
        within `contact.command_delay`: the delay allowance, `_observe`)."""
        self._count += 1
        self._newest = (self._newest + 1) % self._recent.shape[0]
        self._recent[self._newest] = tau
        self._applied += tau

    def set_delay(self, measured: float) -> None:
        """The window of the delay allowance (`_observe`): `contact.command_delay`, or the
        command delay the loop measured [s] if longer (control/timing.py's ActuationDelay: a
        late loop's commands act later still), plus each state's age (`update`). The commands
        already seen stay in it."""
        self._delay = max(float(self._cfg.values['contact.command_delay']), measured)

    def update(self, q: np.ndarray, qd: np.ndarray, dt: float,
               estimates: np.ndarray | None = None, f_ext: dict | None = None,
               age: float = 0.0) -> int:
        """A new state q [rad], qd [rad/s] (model size), dt [s] after the previous one (its
        stamps): the residual updated; returns the controlled joint's position k (in
        `cfg.joints`) whose |residual| is the largest share of its threshold beyond it, else
        -1. estimates: the law's (4, m) a^, b^, d^, c^ (None: off); f_ext: the known wrenches
        {link: wrench} the law compensates (~/external_wrench), part of the model here; age
        [s]: from the state's stamp to now. The commands paired with its interval are those
        published since the previous state was judged: a state `age` old describes motion
        that commands published `age` earlier drove, so the delay allowance's window reaches
        that much further back (states queued 20 ms in a starved node, the demo move: joint2
        31.6 N·m against 31.3 read as a contact on a free arm; test_timing_matrix)."""
        count = self._count
        self._count = 0
        self.judged = False
        self._watch_frozen(q)
        if not self._started or count == 0 or not self._regular(dt):
            self._last[0], self._last[1] = q, qd
            self._applied[:] = 0.0
            self._started = True
            return -1
        forces = self._forces
        if f_ext:
            forces = body_forces(self._cfg.model, f_ext, 2)
            forces[1] = 0.0  # g(q) is gravity alone
        window = 1 + math.ceil(min(self._delay + max(age, 0.0), MAX_DELAY) / self._cfg.period)
        args = (self._cfg.law_model, forces, self._rows, self._last, q, qd, self._joint,
                self._recent, _NO_ESTIMATES if estimates is None else estimates,
                estimates is not None, float(dt), float(count), self.bandwidth, self._newest,
                min(window, self._recent.shape[0]))
        worst = self._call(args)
        self.judged = True
        return worst if self.enabled and self.armed else -1

    def _regular(self, dt):
        """True if the interval dt [s] since the previous state can be judged: at most GAP
        times the usual one (a running mean of the intervals under 1.5 x it; after
        RATE_CHANGE longer ones in a row the stream has a new rate, and the last is the
        usual). Over a longer one (a driver or a simulator stalled on a busy host, states
        lost) which of the node's commands acted, and from when, is unknown: a simulator
        woken late catches up on the last command it received, not on those the node
        published meanwhile, and judging that interval read the difference as a contact. The
        residual keeps its value across it; the next regular interval is judged."""
        if not 0.0 < dt < 1.0:
            return False
        usual = self._usual
        if usual is None or self._unusual >= RATE_CHANGE:
            self._usual, self._unusual = dt, 0
            return True
        if dt < 1.5 * usual:
            self._usual = usual + 0.05 * (dt - usual)
            self._unusual = 0
        else:
            self._unusual += 1
        return dt <= GAP * usual

    def _watch_frozen(self, q):
        """Count the new states that repeat the previous one exactly."""
        raw = q.tobytes()  # 0.2 µs; np.array_equal and a copy took ~3 µs per state
        if raw == self._q:
            self.frozen += 1
        else:
            self.frozen = 0 if self._q is not None else FROZEN
            self._q = raw

    @property
    def armed(self) -> bool:
        """Detection acts while the states change: fewer than FROZEN new states in a row
        repeated the previous one exactly. A stream of one unchanging state (a test's
        feeder, a driver repeating its last state) answers no command: to the observer any
        command would be an arm held by the world. A real arm's readings move (noise, an
        elastic gear under a changing torque), blocked or not."""
        return self.frozen < FROZEN

    def _call(self, args):
        """_observe(*args), through the overload numba chose once the same objects came twice
        in a row (its dispatcher types every argument at every call: ~1 µs of ~3), as
        `Controller._law` does."""
        entry, seen = self._entry, self._seen
        if entry is not None and _same(args, entry[1]):
            return entry[0](*args)
        worst = _observe(*args)
        if seen is not None and _same(args, seen):
            try:
                self._entry = (_observe.overloads[tuple(typeof(a) for a in args)].entry_point,
                               args[:9])
            except (AttributeError, KeyError):  # another numba: the dispatcher every time
                self._entry = None
        self._seen = args[:9]
        return worst


def _same(args, last):
    """The observer's array arguments are the objects of `last` (the rest are its own)."""
    return (args[0] is last[0] and args[1] is last[1] and args[4] is last[4]
            and args[5] is last[5] and args[7] is last[7] and args[8] is last[8])


ROWS = ('residual', 'peak', 'thresholds', 'threshold', 'allowance b', 'allowance c',
        'applied', 'allowance delay', 'expected',
        'allowance estimate')  # the rows of ContactObserver._joint
_NO_ESTIMATES = np.zeros((4, 1))
FROZEN = 50  # new states in a row that repeat the previous one exactly: no arm answers
MAX_DELAY = 0.5  # [s] the longest window of the delay allowance
GAP = 3.0  # an interval between states over this x the usual one is not judged (_regular)
RATE_CHANGE = 20  # ... and after this many such in a row, the stream has a new rate


@njit(cache=True)
def _observe(model, forces, rows, last, q, qd, joint, recent, theta, estimating, dt, count,
             bandwidth, newest, window):
    """The observer's step (ContactObserver.update), in place; the worst joint or -1. model:
    the law's LawModel (its model arrays, index, told friction, `compensate`); recent: the
    ring of the last commands (rows, m) [N·m], its newest at row `newest`.

    The delay allowance (row 7 of `joint`): per joint, how much the commands changed over the
    last `contact.command_delay` and the state's age [N·m] (the largest minus the smallest of
    the `window` newest rows of `recent`; NaN if one is). A command acts on the arm some time
    after it is published: DDS, the driver, the controller_manager's period, and on a busy host
    a loop or a driver late by milliseconds (measured on a loaded 2-core host: the arm's motion
    lagged its commands by over 6 ms, intervals between commands up to 35 ms); and a state
    reaches the node some time after its stamp. The ring counts commands, not time: a pause of
    the loop itself publishes none and keeps the last ones in it. The observer pairs each
    interval between states with the commands published meanwhile; if others acted, its
    residual is off by at most this spread (the residual is a low-pass of the error: it never
    exceeds its input's bound). While a joint's commands are steady (an arm held by an
    obstacle) the allowance is zero; at the first commands it is their size (what the arm got
    before them is not known). Here, not with numpy in Python: ~6 µs a tick less."""
    Q, QD, QDD, T = rows[0], rows[1], rows[2], rows[3]
    n = q.shape[0]
    for i in range(n):
        Q[0, i] = Q[1, i] = q[i]
        QD[0, i] = 0.5 * (qd[i] + last[1, i])
        QDD[0, i] = (qd[i] - last[1, i]) / dt
        QD[1, i] = QDD[1, i] = 0.0
    compensate = model.compensate
    used = 2 if compensate else 1
    rnea_kernel.rnea_batch(model.parents, model.prismatic, model.axes, model.R_tree,
                           model.p_tree, model.I, model.armature, Q[:used], QD[:used],
                           QDD[:used], model.v0, model.a0, forces, T[:used])
    alpha = 1.0 - np.exp(-bandwidth * dt)
    residual, peak, thresholds, threshold = joint[0], joint[1], joint[2], joint[3]
    worst, share = -1, 1.0
    for k in range(model.index.shape[0]):
        i = model.index[k]
        v = QD[0, i]
        expected = T[0, i] + friction_torque(model.viscous[k], model.coulomb[k],
                                             model.offset[k], model.stribeck[k], model.width,
                                             model.stribeck_velocity, v)
        inertial = 0.0
        if estimating:  # what the arm showed in motion; not d^, a bias: a push is one
            inertial = theta[0, k] * QDD[0, i]
            expected += inertial + theta[1, k] * v + theta[3, k] * np.tanh(v / model.width)
        applied = joint[6, k] / count + (T[1, i] if compensate else 0.0)
        joint[6, k] = 0.0
        joint[8, k] = expected - (T[1, i] if compensate else 0.0)  # as a command would be
        external = expected - applied
        if np.isfinite(external):
            residual[k] += alpha * (external - residual[k])
            joint[9, k] += alpha * (abs(inertial) - joint[9, k])
        peak[k] = max(peak[k], abs(residual[k]))
        joint[7, k] = _spread(recent, k, newest, window)
        threshold[k] = (thresholds[k] + joint[4, k] * abs(v) + joint[5, k] + joint[7, k]
                        + joint[9, k])
        if abs(residual[k]) > share * threshold[k]:  # a threshold of 0: any torque is over
            worst = k
            share = abs(residual[k]) / threshold[k] if threshold[k] > 0.0 else np.inf
    for i in range(n):
        last[0, i], last[1, i] = q[i], qd[i]
    return worst


@njit(cache=True)
def _spread(recent, k, newest, window):
    """max - min [N·m] of column k over the `window` rows of the ring `recent` up to its row
    `newest`, as numpy's `max(axis=0) - min(axis=0)`: NaN if one is NaN."""
    rows = recent.shape[0]
    high = low = recent[newest, k]
    for i in range(1, window):
        x = recent[(newest - i) % rows, k]
        if x > high:
            high = x
        elif x < low:
            low = x
        elif x != x:
            return np.nan
    return high - low
