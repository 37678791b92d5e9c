"""An excitation for identification: a finite Fourier series per joint, optimised for the
condition number of the regressor it yields (Swevers, Ganseman, Tükel, De Schutter & Van
Brussel, IEEE T-RA 1997).

Each joint j moves about its centre c_j with period T (one period per run, ω = 2π / T):

    q_j(t) = c_j + s_j Σ_{l=1..L} (α_jl sin(l ω t) + β_jl (cos(l ω t) - 1))

with Σ_l l α_jl = 0 and Σ_l l² β_jl = 0, so that q, qd and qdd are c, 0 and 0 at t = 0 and
(periodic) at t = T: the motion starts and ends at rest. For a shape (α, β) each scale s_j is
the largest that keeps the joint `LIMIT_MARGIN` inside its position limits, within
`EXCITE_AMPLITUDE` of its centre, under `VELOCITY_SHARE` of its velocity limit and under
`EXCITE_MAX_ACCELERATION` (`scale`): every shape uses all the room the limits give.

The shape minimises cond(Y_b D): Y the stacked regressor of `CONDITION_SAMPLES` states along
the motion, with the columns identification fits (every moving link's 10 inertial parameters,
each joint's armature, viscous and Coulomb friction), reduced to the model's base parameters
(the columns independent over random states: `base_columns`, QR with column pivoting, Gautier
1990; link 1's Ixx or an armature that only adds to link 1's Izz are not base parameters), D
scaling each column to the norm it has over those random states. A direction the motion
does not reach makes the condition number large; a parameter that the motion excites only
weakly, compared with what random states would, too.

The optimisation is deterministic (seeded) and bounded: `STARTS` seeded random shapes, then
`ITERATIONS` steps of a (1+1) evolution strategy with the 1/5th success rule on the best. On
the bundled arm one evaluation takes 4-20 ms, the whole 0.5-4 s (docs/validation.md), so
the sender optimises for the model it is given, at its centre, each time it starts: nothing to
keep in step with the model (a process keeps its last few results: `excitation`).
"""
from dataclasses import dataclass
import math

import numpy as np
import scipy.linalg

from rnea_controller.dynamics.regressor import regressor_batch
from rnea_controller.errors import TrajectoryError

HARMONICS = 6  # L
EXCITE_AMPLITUDE = 1.5  # [rad or m] at most from the centre; the limits usually bind first
EXCITE_MAX_ACCELERATION = 8.0  # [rad/s^2], as the old sine-sum excitation
VELOCITY_SHARE = 0.4  # of the URDF velocity limit
LIMIT_MARGIN = 0.1  # [rad] inside the position limits
CONDITION_SAMPLES = 100  # states along the motion for the condition number
RANDOM_STATES = 400  # for the base parameters and the column scales
STARTS = 10
ITERATIONS = 120
SEED = 2026
RANK_TOLERANCE = 1e-6  # a column is dependent below this share of the largest |R_kk|
FINE = 2001  # samples of a period for the limits


@dataclass(frozen=True)
class Excitation:
    """An optimised excitation: coefficients alpha, beta (n, L) and scales (n,) of period [s];
    condition (the objective), and the columns it was computed on."""

    period: float
    alpha: np.ndarray
    beta: np.ndarray
    scales: np.ndarray
    condition: float
    columns: int
    evaluations: int

    def __call__(self, t):
        """(q - c, qd, qdd) at times t (K,) -> three (K, n) arrays."""
        return profile(self.alpha * self.scales[:, None], self.beta * self.scales[:, None],
                       self.period, t)


def profile(alpha, beta, period, t):
    """The Fourier series of coefficients (n, L) at times t (K,): (q - c, qd, qdd), (K, n)."""
    t = np.asarray(t, dtype=float)
    L = alpha.shape[1]
    w = 2 * math.pi / period * np.arange(1, L + 1)
    s, c = np.sin(np.outer(t, w)), np.cos(np.outer(t, w))
    q = s @ alpha.T + (c - 1.0) @ beta.T
    qd = (c * w) @ alpha.T - (s * w) @ beta.T
    qdd = -(s * w ** 2) @ alpha.T - (c * w ** 2) @ beta.T
    return q, qd, qdd


def _constrained(raw, L):
    """Shape coefficients (alpha, beta) (n, L) from raw (n, 2L): Σ l α_l = 0, Σ l² β_l = 0 by
    projection (rest at both ends)."""
    l = np.arange(1, L + 1, dtype=float)
    alpha, beta = raw[:, :L].copy(), raw[:, L:].copy()
    alpha -= np.outer(alpha @ l / (l @ l), l)
    beta -= np.outer(beta @ l ** 2 / (l ** 2 @ l ** 2), l ** 2)
    return alpha, beta


def scale(alpha, beta, period, centre, velocity_limits, position_limits,
          amplitude=EXCITE_AMPLITUDE, max_acceleration=EXCITE_MAX_ACCELERATION):
    """(n,) the largest s_j keeping joint j within its limits (module docstring)."""
    t = np.linspace(0.0, period, FINE)
    p, v, a = profile(alpha, beta, period, t)
    limits = np.asarray(position_limits, dtype=float)
    centre = np.asarray(centre, dtype=float)
    tiny = 1e-12
    up = np.maximum(p.max(axis=0), tiny)
    down = np.maximum(-p.min(axis=0), tiny)
    room_up = np.maximum(limits[:, 1] - LIMIT_MARGIN - centre, 0.0)
    room_down = np.maximum(centre - limits[:, 0] - LIMIT_MARGIN, 0.0)
    velocity = VELOCITY_SHARE * np.asarray(velocity_limits, dtype=float)
    return np.min([room_up / up, room_down / down,
                   amplitude / np.maximum(np.abs(p).max(axis=0), tiny),
                   velocity / np.maximum(np.abs(v).max(axis=0), tiny),
                   max_acceleration / np.maximum(np.abs(a).max(axis=0), tiny)], axis=0)


def regressor(model, q, qd, qdd):
    """(K, n, 10 n + 3 n): `dynamics.regressor.regressor_batch` (every body's 10 inertial
    parameters, Pinocchio's order), then per joint armature, viscous and Coulomb (sign)
    friction columns."""
    K, n = q.shape
    Y = np.zeros((K, n, 13 * n))
    Y[:, :, :10 * n] = regressor_batch(model, q, qd, qdd)
    joints = np.arange(n)
    Y[:, joints, 10 * n + joints] = qdd
    Y[:, joints, 11 * n + joints] = qd
    Y[:, joints, 12 * n + joints] = np.sign(qd)
    return Y


def random_states(model, count=RANDOM_STATES, seed=SEED):
    """(q, qd, qdd) (count, n): positions uniform within the limits (±π where unlimited),
    velocities within VELOCITY_SHARE of the limits, accelerations within the excitation's."""
    rng = np.random.default_rng(seed)
    limits = np.clip(np.asarray(model.position_limits, dtype=float), -math.pi, math.pi)
    n = model.n
    q = rng.uniform(limits[:, 0], limits[:, 1], (count, n))
    speed = VELOCITY_SHARE * np.minimum(np.asarray(model.velocity_limits, dtype=float), 10.0)
    qd = rng.uniform(-1.0, 1.0, (count, n)) * speed
    qdd = rng.uniform(-1.0, 1.0, (count, n)) * EXCITE_MAX_ACCELERATION
    return q, qd, qdd


def base_columns(model, states=None):
    """(indices of the base columns of `regressor`, their scales): the columns QR with column
    pivoting finds independent over random states, and each one's RMS over them."""
    Y = regressor(model, *(states or random_states(model)))
    A = Y.reshape(-1, Y.shape[-1])
    norms = np.sqrt(np.mean(A ** 2, axis=0))
    live = np.flatnonzero(norms > 1e-9 * norms.max())
    R, pivots = scipy.linalg.qr(A[:, live] / norms[live], mode='r', pivoting=True)
    d = np.abs(np.diag(R))
    rank = int(np.sum(d > RANK_TOLERANCE * d[0]))
    base = np.sort(live[pivots[:rank]])
    return base, norms[base]


def condition(model, centre, alpha, beta, scales, period, columns, column_scales,
              samples=CONDITION_SAMPLES):
    """cond(Y_b D) of the motion's regressor at `samples` instants (module docstring)."""
    t = (np.arange(samples) + 0.5) * period / samples
    p, v, a = profile(alpha * scales[:, None], beta * scales[:, None], period, t)
    Y = regressor(model, p + centre, v, a)[:, :, columns] / column_scales
    A = Y.reshape(-1, len(columns))
    values = np.linalg.eigvalsh(A.T @ A)  # the Gram matrix: a threaded SVD crawls when loaded
    return float(math.sqrt(values[-1] / values[0])) if values[0] > 0 else math.inf


_CACHE = {}


def excitation(model, centre, period, **options):
    """`optimise`, remembered for the same model, centre and period (the last 8)."""
    key = (id(model), np.asarray(centre, dtype=float).tobytes(), float(period),
           tuple(sorted(options.items())))
    if key not in _CACHE or _CACHE[key][0] is not model:
        while len(_CACHE) >= 8:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = (model, optimise(model, centre, period, **options))
    return _CACHE[key][1]


def optimise(model, centre, period, starts=STARTS, iterations=ITERATIONS, seed=SEED,
             amplitude=EXCITE_AMPLITUDE, max_acceleration=EXCITE_MAX_ACCELERATION):
    """The Excitation of least condition number (module docstring) for `model` about
    `centre` [rad], one period of `period` [s]."""
    centre = np.asarray(centre, dtype=float)
    columns, column_scales = base_columns(model)
    rng = np.random.default_rng(seed)
    n, L = model.n, HARMONICS
    limits = (model.velocity_limits, model.position_limits)
    decay = 1.0 / np.arange(1, L + 1)  # lower harmonics carry more of the position

    def evaluate(raw):
        alpha, beta = _constrained(raw, L)
        s = scale(alpha, beta, period, centre, *limits, amplitude, max_acceleration)
        if not np.all(s > 0):
            return math.inf, alpha, beta, s
        return condition(model, centre, alpha, beta, s, period, columns, column_scales), \
            alpha, beta, s

    best_raw, best = None, (math.inf,)
    for _ in range(starts):
        raw = rng.normal(size=(n, 2 * L)) * np.tile(decay, 2)
        result = evaluate(raw)
        if best_raw is None or result[0] < best[0]:
            best_raw, best = raw, result
    stuck = [name for name, s in zip(model.joint_names, best[3]) if not s > 0]
    if stuck:
        raise TrajectoryError(
            f'the excitation cannot move {", ".join(stuck)}: no room within the position '
            f'limits (less {LIMIT_MARGIN} rad) from the current position '
            f'{[round(float(c), 4) for c in centre]}; move the arm away from the limits')
    step = 0.3
    for _ in range(iterations):
        raw = best_raw + step * rng.normal(size=best_raw.shape) * np.tile(decay, 2)
        result = evaluate(raw)
        if result[0] < best[0]:
            best_raw, best = raw, result
            step *= 1.5
        else:
            step *= 1.5 ** -0.25
    cond, alpha, beta, s = best
    return Excitation(period, alpha, beta, s, cond, len(columns), starts + iterations)
