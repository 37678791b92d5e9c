"""Identification of every moving body's inertial parameters, and each joint's rotor inertia
(armature), viscous and Coulomb friction, from a run: physically consistent weighted least
squares on the RNEA regressor, regularised toward the URDF.

The measured torque of joint j is linear in the parameters x = (θ, a, b, fc, f0, s):

    tau_j = Y_j(q, qd, qdd) θ + a_j qdd_j + friction_torque(b_j, fc_j, f0_j, s_j, w, v_s, qd_j)

- θ (10n): each body's 10 inertial parameters (m, h, I_O) about its frame origin, Pinocchio's
  order (`dynamics/regressor.py`, Y from our RNEA). A body is the link moved by a joint with
  everything fixed to it; a payload carried during the run is part of its link's body (its
  mass merges with that link's: the file then states the sum, and no payload).
- a_j [kg·m²] rotor inertia; b_j [N·m·s/rad] viscous, fc_j [N·m] Coulomb, f0_j [N·m] offset
  (= asymmetric Coulomb), s_j [N·m] Stribeck friction: the node's model (`control/friction.py`,
  w = `friction_velocity_width`, v_s = `friction_stribeck_velocity`). Per joint the friction
  model (viscous + Coulomb, + offset, + offset + Stribeck) is chosen, with the smoothing
  window, w and v_s, by blocked cross-validation of the identification's own rows (`select`;
  never the held-out ones); a kind not chosen stays at its prior.

Rows: q, qd and qdd are filtered by `smoothing.Smoother` (zero-phase), the target is the torque
as measured; every row counts, slow ones included (issue 44). Memory is bounded: per candidate
window, fold and joint, the Gram matrix of its rows [A_j | tau_j] over the candidate columns
((size+1)² numbers), and a histogram of each joint's speeds; nothing else.

The solve (`solve`):
1. Weights: per joint 1/σ_j², σ_j the RMS residual of a first fit weighted by 1/RMS(tau_j)
   (Gautier & Poignet 2001): the wrist's small torques count as much as the shoulder's.
2. What the motion tells (`base_parameters`): pivoted QR of the column-scaled weighted
   regressor gives its rank r and condition number, r base parameters (each a parameter plus
   the combination of the unidentifiable ones that regroup into it) and their standard
   errors σ²(A_Bᵀ W A_B)⁻¹, in % of the estimate.
3. The estimate (`consistent_fit`): a convex program (cvxpy, solved by Clarabel, an interior
   point solver for its semidefinite and exponential cones):

       minimise  Σ_j ‖A_j x - tau_j‖² / σ_j²  +  λ Σ_i D(J_i ‖ J_i⁰)  +  Σ_k ((x_k - x⁰_k) / s_k)²
       subject to a, b, fc, s ≥ 0   (J_i ≻ 0 by the domain of D)
                  `Plausibility`: tr(Q_i J_i) ≥ 0 (body i's mass inside the bounding ellipsoid
                  of its links' geometry, `bounds.py`), its mass in MASS_RANGE × the URDF's,
                  the total within ±TOTAL_RANGE unless the held-out rows say otherwise
                  x_k = x⁰_k for each parameter the motion does not see at all

   J_i = [[½ tr(I_O) 1 - I_O, h], [hᵀ, m]] is body i's pseudo-inertia: J_i ⪰ 0 exactly when
   a mass distribution has these parameters (Wensing, Kim & Slotine, RA-L 2018): positive
   mass, the triangle inequality, the com within the body's extent. D(J ‖ J⁰) = -log det(J⁰⁻¹J)
   + tr(J⁰⁻¹J) - 4 is the entropic (log-det Bregman) divergence (Lee, Wensing & Park, T-RO
   2020): invariant to the frame and the units, zero only at the URDF's J⁰, and a barrier that
   keeps J positive definite. What the motion cannot see (link 1's I_xx; how an armature and
   its link's I_zz share a sum) is set by D alone: it stays as the URDF says. λ = `PRIOR_WEIGHT`
   (a prior that is worth one row's weighted residual per unit divergence: data dominate
   wherever they say something). The last term (`_prior_scales`: 1e-6 row's worth) holds a
   joint's friction and armature at their prior (0, or the file given) where it never moved.
   The variable is preconditioned by the objective's Hessian at the prior.
   A cvxpy convex program rather than an unconstrained log-Cholesky solve (Rucker & Wensing
   2022): it is convex, so its optimum is global and no starting point, step or iteration
   count is chosen; the 90 unknowns of a 6-joint arm take 0.2-3 s.

4. Held-out check: the relative RMS per joint, RMS(tau - prediction) / RMS(tau), of the URDF's
   model (with the prior's armature and friction) and of the identified one, on rows left out
   of the fit: a second bag (`rnea-validate --holdout BAG2`), else one block of
   `HOLDOUT_BLOCK` seconds of recorded time (gaps shortened to MAX_STEP) in every
   `HOLDOUT_EVERY` of the bag (the third: 4-6 s, 14-16 s, ...); on every row and on the slow
   ones apart, and the share of held-out rows faster than 99 % of the fit's (`_coverage`:
   there a model's friction is extrapolated).
5. The fit's own checks (`checks`): rank below what the arm's parameters reach, a joint that
   barely slid, held-out rows missing or worse than the prior's, an implausible body: any one
   and `rnea-validate` writes no parameters file, and says what the motion lacked.
"""
import copy
import math
import time

import numpy as np
import scipy.linalg
import yaml

from rnea_controller.analysis.bounds import bounding_ellipsoids
from rnea_controller.analysis.smoothing import Smoother
from rnea_controller.control import parameters
from rnea_controller.control.friction import friction_columns
from rnea_controller.control.friction import KINDS as FRICTION_KINDS
from rnea_controller.control.law import default_joints, validate_parameters
from rnea_controller.control.parameters import joint_of_parameter
from rnea_controller.dynamics.regressor import (
    body_link_names,
    inertial_parameters,
    link_inertial,
    PARAMETER_NAMES,
    regressor_batch,
)
from rnea_controller.errors import ParameterError, RneaControllerError

SLIDING_SPEED = 0.1  # [rad/s] a joint's rows enter the fit only while it moves this fast
DEFAULT_WIDTH = 0.01  # [rad/s], the node's default friction_velocity_width
PRIOR_WEIGHT = 1.0  # λ of the entropic divergence, in units of one row's weighted residual²
PRIOR_JOINT = 1e-3  # armature and friction: a prior of 1e-6 row (the links' D decides a split)
VERBOSE = False  # the solver's log (debugging)
UNSEEN = 1e-6  # a parameter whose unit vector is in the null space within this is not seen
# a pivot of the scaled regressor below this × the largest: dependent. The fit's factor comes
# from Gram matrices (R = Λ^½ Vᵀ, `_rows_of`), whose small singular values are rounding below
# about 3e-7 of the largest (a cut-short excitation's spectrum falls smoothly from 2.3e-7 to
# 2e-9, under a gap from 3.7e-6): counted at 1e-7 the rank followed the rounding (54 or 56 with
# the same data, only the candidate list changed)
RANK_TOLERANCE = 1e-6
# the least-squares steps on normal equations (`_least_squares`: the weights, the
# cross-validation) ignore the column-scaled Gram's eigenvalues below this × the largest: its
# rounding reaches 1e-10 (the pendulum's 160-ms Gram, the same data and choices: an eigenvalue
# of 1.1e-10 or 2.4e-12 by the candidate list), and a step along such a direction (|step| 5e4)
# fitted joint 2's torque to 0.007 N·m instead of 0.06, its weight 70x too large
GRAM_RCOND = 1e-8
HOLDOUT_BLOCK = 2.0  # [s]
HOLDOUT_EVERY = 5  # without a second bag, the 3rd of every 5 blocks of 2 s is held out
MAX_STEP = 0.05  # [s] a longer interval between samples is a gap: counts as this in blocks
JOINT_KINDS = ('armature',) + FRICTION_KINDS  # each joint's columns after the bodies'
# prior scale floors: a column's RMS [its torque per unit] taken as at least this
MIN_COLUMN_RMS = {'armature': 0.5, 'viscous': 0.05, 'coulomb': 0.5, 'offset': 0.5,
                  'stribeck': 0.5}
SIGNED = ('offset', 'stribeck')  # may be negative (a Stribeck curve falls or rises to c)
DEFAULT_STRIBECK_VELOCITY = 0.3  # [rad/s], the node's default friction_stribeck_velocity
# the friction models per joint, simplest first (control/friction.py): each adds its kinds
FRICTION_MODELS = {'viscous+coulomb': (), '+offset': ('offset',),
                   '+offset+stribeck': ('offset', 'stribeck')}
SELECT_GAIN = 0.02  # a richer model is chosen when it lowers the cross-validated error this much
# Candidates the data choose among (`select`, blocked cross-validation of the identification's
# own rows): the smoothing window [s]: issue 30's 20 ms (-3 dB at 51 Hz) and its doublings to
# 320 ms (-3 dB at about 3 Hz, still above an excitation's harmonics, <= 0.5 Hz);
WINDOWS = (0.02, 0.04, 0.08, 0.16, 0.32)
# the Coulomb term's width w [rad/s], half decades from the creep of a joint held still while
# others move (1e-4 rad/s, issue 44) to 3x SLIDING_SPEED (a harmonic drive's friction turns
# over 0.1-0.4 rad/s: Gaz et al.'s Panda sigmoids, 2 / phi2 = 0.12-0.39 rad/s);
WIDTHS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3)
# the Stribeck velocity v_s [rad/s], half decades from a third of SLIDING_SPEED to 1 rad/s;
STRIBECK_VELOCITIES = (0.03, 0.1, 0.3, 1.0)
FOLDS = 5  # the identification's blocks (HOLDOUT_BLOCK s) go to this many folds, in turn
HOLDOUT_SLACK = 0.1  # the fit fails when a joint's held-out error exceeds the prior's by this
MASS_RANGE = (0.5, 2.0)  # a body's mass within these multiples of the URDF's
# a bound the optimum sits on is met within this (relative; Clarabel's "optimal_inaccurate"
# stops at a feasibility of about 1e-5, a physically meaningless excess)
BOUND_SLACK = 1e-4
TOTAL_RANGE = 0.2  # the total mass within ±20 % of the URDF's, unless held-out rows say not
TOTAL_EVIDENCE = 0.01  # ...: the held-out relative error 1 % lower without that bound
# |qd| histograms [rad/s] of the fit's and the held-out rows: 10 bins a decade
SPEED_EDGES = np.geomspace(1e-4, 100.0, 61)
# a joint's held-out rows beyond the speed 99 % of its fit rows stay under (`_coverage`): with
# this share of them (5x the fit's own 1 %) the report says its friction there is extrapolated
EXTRAPOLATED_SHARE = 0.05
MIN_SLIDING_SHARE = 0.1  # a joint sliding in fewer of the samples was not excited
MIN_RANGE = 0.5  # [rad] the advice's range of a joint
MIN_DURATION = 12.0  # [s] the advice's excitation length
NOT_SEEN = 'not seen by this motion'
COMBINED = 'only in combination with others'
IDENTIFIED = 'identified'
NOT_IN_MODEL = "not in the joint's friction model"


class SolverError(RneaControllerError):
    """The convex program found no solution (a message says what the solver reported)."""


def parameter_names(model):
    """Names of the columns: '<link>.m' ... per body, then '<joint>.armature', '.viscous',
    '.coulomb' per joint."""
    names = [f'{link}.{p}' for link in body_link_names(model) for p in PARAMETER_NAMES]
    for kind in JOINT_KINDS:
        names += [f'{joint}.{kind}' for joint in model.joint_names]
    return names


class _Rows:
    """The triangular factor of a set of rows [A_j | tau_j], one per joint, and counts."""

    def __init__(self, n, p):
        self.R = [np.zeros((0, p + 1)) for _ in range(n)]
        self.rows = np.zeros(n, dtype=np.int64)

    def add(self, j, A, b):
        stacked = np.vstack([self.R[j], np.column_stack([A, b])])
        self.R[j] = scipy.linalg.qr(stacked, mode='r', check_finite=False)[0][:stacked.shape[1]]
        self.rows[j] += len(b)

    def normal(self, weights):
        """(G, g, bb) = Σ_j w_j (AᵀA, Aᵀb, bᵀb) of the joints' rows."""
        p = self.R[0].shape[1] - 1
        M = np.zeros((p + 1, p + 1))
        for w, R in zip(weights, self.R):
            M += w * R.T @ R
        return M[:p, :p], M[:p, p], M[p, p]

    def sse(self, x):
        """Σ (tau_j - A_j x)² per joint (n,)."""
        return np.array([np.sum((R[:, :-1] @ x - R[:, -1]) ** 2) for R in self.R])

    def without(self, columns):
        """The same rows with the `columns` (mask (p,)) zeroed: the parameters not in the
        model (RᵀR = AᵀA holds column by column)."""
        other = copy.copy(self)
        other.R = [R * np.append(~columns, True) for R in self.R]
        return other

    def tau_squares(self):
        return np.array([np.sum(R[:, -1] ** 2) for R in self.R])


class _Grams:
    """Per part (a fold, or a held-out set) and joint, the Gram matrix [A_j | tau_j]ᵀ[A_j |
    tau_j] of the joint's rows over its candidate columns (`_candidates`), and the counts."""

    def __init__(self, parts, n, size):
        self.C = np.zeros((parts, n, size + 1, size + 1))
        self.rows = np.zeros((parts, n), dtype=np.int64)

    def add(self, part, j, A, b):
        M = np.column_stack([A, b])
        self.C[part, j] += M.T @ M
        self.rows[part, j] += len(b)


class _Stream:
    """One candidate smoothing window: its `Smoother`s (the bag's, the second bag's), the rows
    of each fold of the fit, of the held-out rows (every row, and the slow ones apart), and the
    samples that slid."""

    def __init__(self, window_s, n, size):
        self.window_s, self.smoothers = window_s, None
        self.fit = _Grams(FOLDS, n, size)
        self.held = _Grams(2, n, size)  # 0: every held-out row, 1: the slow ones
        self.speeds = np.zeros((2, n, len(SPEED_EDGES) + 1), dtype=np.int64)  # fit, held out
        self.sliding = np.zeros(n, dtype=np.int64)
        self.samples = 0
        self.start, self.data_time = None, 0.0  # the last stamp [ns], data time [s]

    def data_times(self, t):
        """[s] of recorded data before each stamp t [ns]: time with each gap between samples
        longer than MAX_STEP counted as MAX_STEP, so that the blocks fall where the data is (a
        gap would have emptied a block of wall time)."""
        previous = t[0] if self.start is None else self.start
        steps = np.minimum(np.diff(np.concatenate([[previous], t])) * 1e-9, MAX_STEP)
        data_time = self.data_time + np.cumsum(np.maximum(steps, 0.0))
        self.start, self.data_time = t[-1], float(data_time[-1])
        return data_time


def _count_speeds(histogram, qd):
    """Add each joint's |qd| [rad/s] (N, n) to its row of `histogram` (n, bins)."""
    for j in range(qd.shape[1]):
        histogram[j] += np.bincount(np.searchsorted(SPEED_EDGES, np.abs(qd[:, j])),
                                    minlength=histogram.shape[1])


def _coverage(speeds):
    """Per joint {fit_speed_p99 [rad/s]: the speed 99 % of the fit's rows stay under (a bin's
    upper edge), beyond: the share of held-out rows at or above it}, from `_Stream.speeds`."""
    out = []
    for fit, held in zip(*speeds):
        if not fit.sum() or not held.sum():
            out.append({'fit_speed_p99': None, 'beyond': None})
            continue
        k = int(np.searchsorted(np.cumsum(fit) / fit.sum(), 0.99))
        edge = float(SPEED_EDGES[min(k, len(SPEED_EDGES) - 1)])
        out.append({'fit_speed_p99': edge, 'beyond': float(held[k + 1:].sum() / held.sum())})
    return out


def block_folds(data_time, second_bag):
    """(held (N,) bool, fold (N,)) of samples at data times [s]: without a second bag the 3rd
    of every HOLDOUT_EVERY blocks of HOLDOUT_BLOCK s is held out (of everything: fit and
    choice); the others go to FOLDS folds, block by block, for the choice of the filter and
    the friction model (`select`)."""
    block = (data_time // HOLDOUT_BLOCK).astype(np.int64)
    held = ((block % HOLDOUT_EVERY) == 2) & (not second_bag)
    return held, (block + block // HOLDOUT_EVERY) % FOLDS


class Identification:
    """Every body's inertial parameters and each joint's armature and friction, from a run.

    model: RobotModel (joint arrays in model order): its inertias and armature are the prior;
    link: the link a payload was carried on (reported: its body's mass change), or None;
    width: friction_velocity_width [rad/s], or None: chosen by the data among WIDTHS;
    window_s: the smoothing window [s], or None: chosen by the data among WINDOWS;
    prior_friction: (viscous, coulomb[, offset, stribeck]) each (n,), the prior of the friction
    (default the URDF's <dynamics>, no offset nor Stribeck); holdout: True when a second bag
    feeds `update(..., held_out=True)`, else blocks of this bag are held out;
    stribeck_velocity: friction_stribeck_velocity [rad/s], or None: chosen among
    STRIBECK_VELOCITIES; mesh_dirs: where to look for a mesh's path (`bounds`); masses:
    {link: mass [kg]} of a vendor's table (`--masses FILE`), the prior's masses and bounds
    instead of the URDF's (each such body scaled to it: its com kept, its inertia scaled);
    prior_source: where the prior comes from (said in the report).
    """

    def __init__(self, model, link=None, width=None, window_s=None, prior_friction=None,
                 holdout=False, stribeck_velocity=None, mesh_dirs=(), masses=None,
                 prior_source='URDF'):
        self.model, self.link, self.mesh_dirs = model, link, tuple(mesh_dirs)
        self.fixed = {'window': window_s, 'width': width, 'stribeck': stribeck_velocity}
        self.widths = WIDTHS if width is None else (float(width),)
        self.stribeck_velocities = (STRIBECK_VELOCITIES if stribeck_velocity is None
                                    else (float(stribeck_velocity),))
        windows = WINDOWS if window_s is None else (float(window_s),)
        n = model.n
        self.p = (10 + len(JOINT_KINDS)) * n
        self.size = 10 * n + 3 + len(self.widths) * (1 + len(self.stribeck_velocities))
        self.streams = [_Stream(w, n, self.size) for w in windows]
        self.decimate = None
        self.second_bag, self.prior_source = holdout, prior_source
        self.width = DEFAULT_WIDTH if width is None else float(width)
        self.stribeck_velocity = (DEFAULT_STRIBECK_VELOCITY if stribeck_velocity is None
                                  else float(stribeck_velocity))
        self.window_s = windows[0]
        self.friction_models = [next(iter(FRICTION_MODELS))] * n
        self.excluded = _left_out(n, [()] * n)
        self.selection = None
        self.q_low, self.q_high = np.full(n, np.inf), np.full(n, -np.inf)
        friction = list((model.damping, model.friction) if prior_friction is None
                        else prior_friction)
        friction += [np.zeros(n)] * (len(FRICTION_KINDS) - len(friction))
        self.prior = np.concatenate([_scaled_bodies(model, masses or {}), model.armature,
                                     *friction])

    @property
    def names(self):
        return parameter_names(self.model)

    @property
    def samples(self):
        return self._stream().samples

    def _stream(self):
        return next(s for s in self.streams if s.window_s == self.window_s)

    def update(self, stamps, q, qd, tau, held_out=False):
        """Feed joint states (model order): stamps [ns], q [rad], qd [rad/s], tau [N·m];
        `held_out`: rows of the second bag (prediction check only)."""
        if self.decimate is None and len(stamps) >= 3:
            self.decimate = _common_decimation(stamps, WINDOWS[0])
        if self.decimate is None:
            return
        for stream in self.streams:
            self._update(stream, stamps, q, qd, tau, held_out)

    def _update(self, stream, stamps, q, qd, tau, held_out):
        if stream.smoothers is None:
            stream.smoothers = {b: Smoother(stream.window_s, self.decimate) for b in (0, 1)}
        smoother = stream.smoothers[held_out]
        out = smoother.update(stamps, q, qd, tau)
        if out is None or not len(out[0]):
            return
        t, q, qd, qdd, _ = out
        tau = smoother.raw_tau
        A = self.candidates(q, qd, qdd)
        slow = np.abs(qd) < SLIDING_SPEED
        if held_out:
            self._add(stream.held, A, tau, 0, np.ones(len(t), bool), slow)
            _count_speeds(stream.speeds[1], qd)
            return
        if stream is self.streams[0]:
            self.q_low = np.minimum(self.q_low, q.min(axis=0))
            self.q_high = np.maximum(self.q_high, q.max(axis=0))
        stream.samples += len(t)
        stream.sliding += np.sum(~slow, axis=0)
        held, fold = block_folds(stream.data_times(t), self.second_bag)
        for f in range(FOLDS):
            self._add(stream.fit, A, tau, f, ~held & (fold == f))
        self._add(stream.held, A, tau, 0, held, slow)
        _count_speeds(stream.speeds[0], qd[~held])
        _count_speeds(stream.speeds[1], qd[held])

    def _add(self, grams, A, tau, part, mask, slow=None):
        """Every joint's rows where `mask` to `grams`' part `part`; with `slow` (N, n), joint
        j's where also slow[:, j] to part 1."""
        if not mask.any():
            return
        for j in range(self.model.n):
            grams.add(part, j, A[mask, j], tau[mask, j])
            both = mask & slow[:, j] if slow is not None else np.zeros(0, bool)
            if both.any():
                grams.add(1, j, A[both, j], tau[both, j])

    def q_range(self):
        """(n,) [rad or m] each joint's range over the fit's samples (0 before any)."""
        return np.maximum(self.q_high - self.q_low, 0.0)

    @property
    def data_time(self):
        return self._stream().data_time

    def candidates(self, q, qd, qdd):
        """A (N, n, size): per joint its rows over the candidate columns: the regressor Y,
        then qdd (armature), qd (viscous), 1 (offset), the Coulomb column per width of
        `widths`, the Stribeck column per (width, Stribeck velocity), each
        `friction.friction_columns`'s."""
        N, n = q.shape
        own = [qdd, qd, np.ones_like(qd)]
        own += [friction_columns(qd, w, 1.0, ('coulomb',))[..., 0] for w in self.widths]
        own += [friction_columns(qd, w, v, ('stribeck',))[..., 0] for w in self.widths
                for v in self.stribeck_velocities]
        return np.concatenate([regressor_batch(self.model, q, qd, qdd),
                               np.stack(own, axis=-1)], axis=2)

    def local_columns(self, width_index, velocity_index):
        """(local (10n + 5,), global (10n + 5, n)) indices: joint j's candidate columns of
        the (width, Stribeck velocity) pair, and where each goes in x (JOINT_KINDS' order)."""
        n, nw, nv = self.model.n, len(self.widths), len(self.stribeck_velocities)
        base = 10 * n
        local = list(range(base)) + [base, base + 1, base + 3 + width_index, base + 2,
                                     base + 3 + nw + width_index * nv + velocity_index]
        glob = np.array([list(range(base)) + [base + m * n + j for m in range(5)]
                         for j in range(n)]).T
        return np.array(local), glob

    def rows(self, q, qd, qdd):
        """A (N, n, p): the regressor Y, then per joint kind (JOINT_KINDS) a column per joint:
        armature (qdd), then the friction's (`friction.friction_columns`) at the chosen
        width and Stribeck velocity."""
        N, n = q.shape
        joint = np.zeros((N, n, len(JOINT_KINDS) * n))
        joint[:, np.arange(n), np.arange(n)] = qdd
        columns = friction_columns(qd, self.width, self.stribeck_velocity)
        for m in range(len(FRICTION_KINDS)):
            joint[:, np.arange(n), (m + 1) * n + np.arange(n)] = columns[..., m]
        return np.concatenate([regressor_batch(self.model, q, qd, qdd), joint], axis=2)

    def result(self):
        """The fit: see `solve`."""
        return solve(self)


def read_masses(path, model):
    """{'masses': {link: [kg]}, 'prior_source': ...} of a YAML file of link masses (a vendor's
    table: `link: kg` lines, or under a `masses:` key), or {} without a file. ParameterError
    naming the file and what is wrong."""
    if path is None:
        return {}
    try:
        tree = yaml.safe_load(open(path).read())
    except (OSError, yaml.YAMLError) as error:
        raise ParameterError(f'--masses {path}: cannot read it: {error}') from None
    tree = tree.get('masses', tree) if isinstance(tree, dict) else tree
    if not isinstance(tree, dict) or not all(isinstance(v, (int, float)) for v in tree.values()):
        raise ParameterError(f'--masses {path}: expected lines `link: mass_in_kg`, got {tree!r}')
    masses = {str(k): float(v) for k, v in tree.items()}
    _scaled_bodies(model, masses)  # checks the names and values
    return {'masses': masses, 'prior_source': f'{path} for ' + ', '.join(masses)
            + ", the URDF's for the other bodies"}


def _scaled_bodies(model, masses):
    """θ (10n,) of the model's bodies, each one named in `masses` {link: [kg]} scaled to that
    mass (a uniform change of density: the com stays, the inertia scales with the mass).
    ParameterError naming a link that is no moving body, or a mass that is not positive."""
    theta = inertial_parameters(model).copy()
    links = body_link_names(model)
    unknown = sorted(set(masses) - set(links))
    if unknown:
        raise ParameterError(f'masses given for {unknown}, which are not moving bodies of the '
                             f'model (its bodies: {links})')
    for link, mass in masses.items():
        i = links.index(link)
        if not (isinstance(mass, (int, float)) and mass > 0 and theta[10 * i] > 0):
            raise ParameterError(f"{link}: mass {mass!r} kg (the URDF's {theta[10 * i]:g} "
                                 'kg): a body to scale needs a positive mass on both sides')
        theta[10 * i:10 * i + 10] *= mass / theta[10 * i]
    return theta


def _common_decimation(stamps, window_s):
    """Every how many samples a row is kept: half the smallest candidate window's samples
    (`Smoother`'s own rule for it), the same for every window, given or chosen, so that they
    are compared on the same instants."""
    dt = np.median(np.diff(np.asarray(stamps, np.int64))) * 1e-9
    return max(1, max(5, 2 * int(round(window_s / dt / 2)) + 1) // 2)


# ---------------------------------------------------------------------------- the solve


def solve(ident):
    """Weights, base parameters, the plausible fit, the held-out check and the fit's own
    checks of an `Identification`; a dict (report.json's 'identification'). 'failures' lists
    what a file of this fit must not be written for (`checks`), 'lacking' what the motion
    lacked."""
    started = time.perf_counter()
    if ident._stream().fit.rows.sum():
        select(ident)
    else:  # nothing recorded: the prior, and the checks say why
        empty = _Rows(ident.model.n, ident.p)
        ident.fit = ident.held = ident.held_slow = empty
        ident.validation = None
    model, fit, x0, n = ident.model, ident.fit, ident.prior, ident.model.n
    weights, base, x, limits = _estimate(ident)
    x, stayed = _snap_stayed(x, x0, ident.names, n)
    status = _status(base['null_share'], ident.excluded)
    result = {
        'samples': ident.samples, 'rows': int(fit.rows.sum()),
        'rank': base['rank'], 'parameters_count': ident.p,
        'condition_number': base['condition_number'],
        'weights_sigma': dict(zip(model.joint_names, (1.0 / np.sqrt(weights)).tolist())),
        'base_parameters': base['base'],
        'parameters': {name: {'urdf': float(x0[k]), 'estimate': float(x[k]),
                              'status': status[k]} for k, name in enumerate(ident.names)},
        'stayed_at_urdf': stayed, 'links': body_inertials(model, x, stayed),
        'armature': dict(zip(model.joint_names, x[10 * n:11 * n].tolist())),
        'friction': {joint: {kind: float(x[(11 + m) * n + j])
                             for m, kind in enumerate(FRICTION_KINDS)}
                     for j, joint in enumerate(model.joint_names)},
        'friction_models': dict(zip(model.joint_names, ident.friction_models)),
        'friction_velocity_width': ident.width,
        'friction_stribeck_velocity': ident.stribeck_velocity,
        'smoothing': {'window_s': ident.window_s, 'decimate': ident.decimate,
                      'chosen_by': {k: 'given' if v is not None else 'the data'
                                    for k, v in ident.fixed.items()}},
        'selection': ident.selection, 'prior_source': ident.prior_source,
        'residual_rms_before': _rms(fit, x0, model), 'residual_rms_after': _rms(fit, x, model),
        'holdout': _holdout(ident, x, x0),
        'payload': _payload_change(model, ident.link, x, x0, status),
        'plausibility': limits.report(x),
        'unseen_change': _unseen_change(base, x, x0),
    }
    result.update(checks(ident, result, base))
    result['solve_time_s'] = time.perf_counter() - started
    return result


def _estimate(ident):
    """(weights (n,), base parameters, x (13n,), Plausibility); the prior when no joint ever
    slid."""
    fit, x0, n = ident.fit, ident.prior, ident.model.n
    limits = Plausibility(ident.model, x0, ident.link, ident.mesh_dirs)
    if fit.rows.sum() == 0:
        return np.ones(n), {'rank': 0, 'condition_number': math.nan, 'base': [],
                            'null_share': np.ones(ident.p), 'null': np.eye(ident.p),
                            'scale': np.ones(ident.p)}, x0.copy(), limits
    weights = _weights(fit, x0)
    fit = fit.without(ident.excluded)
    base = base_parameters(fit, weights, ident.names)
    R, scales = _combined_factor(fit, weights), _prior_scales(fit, weights)
    x = consistent_fit(R, x0, n, scales, base, limits)
    if limits.total_active(x):
        relaxed = consistent_fit(R, x0, n, scales, base, limits.without_total())
        x = limits.judge_total(x, relaxed, _total_evidence(ident, weights, scales, base,
                                                           limits))
    return weights, base, x, limits


def _total_evidence(ident, weights, scales, base, limits):
    """(validation rows, the fit with the total's bound, without it), both fitted on the
    other folds (`_validation_split`), or None: the total's bound is judged on the
    identification's own data, never on the held-out rows."""
    if ident.validation is None:
        return None
    train, validation = (rows.without(ident.excluded) for rows in ident.validation)
    R = _combined_factor(train, weights)
    n, x0 = ident.model.n, ident.prior
    bounded = consistent_fit(R, x0, n, scales, base, limits)
    free = consistent_fit(R, x0, n, scales, base, limits.without_total())
    return validation, bounded, free


def _unseen_change(base, x, x0):
    """‖component of D(x - x0) in the column-scaled regressor's null space‖ / ‖D(x - x0)‖:
    the share of the change that no prediction of this motion tests (set by the divergence,
    where consistency needs it: a payload's second moments, a combination's split)."""
    delta = base['scale'] * (x - x0)
    norm = np.linalg.norm(delta)
    return float(np.linalg.norm(base['null'] @ delta) / norm) if norm > 0 else 0.0


def _global_grams(ident, C, width_index, velocity_index):
    """(n, p+1, p+1): each joint's Gram `C[j]` over its candidate columns, placed in x's
    layout for one (width, Stribeck velocity) pair (`Identification.local_columns`)."""
    local, glob = ident.local_columns(width_index, velocity_index)
    n, p = ident.model.n, ident.p
    out = np.zeros((n, p + 1, p + 1))
    li = np.append(local, ident.size)
    for j in range(n):
        gi = np.append(glob[:, j], p)
        out[j][np.ix_(gi, gi)] = C[j][np.ix_(li, li)]
    return out


def _rows_of(grams, rows):
    """`_Rows` with RᵀR = each joint's Gram (n, p+1, p+1): R = Λ^½ Vᵀ of its eigenpairs."""
    n, size = grams.shape[0], grams.shape[1] - 1
    out = _Rows(n, size)
    for j in range(n):
        values, vectors = np.linalg.eigh(grams[j])
        out.R[j] = np.sqrt(np.maximum(values, 0.0))[:, None] * vectors.T
        out.rows[j] = rows[j]
    return out


def _sse(grams, x):
    """(n,) Σ (tau_j - A_j x)² per joint from its Gram [A | tau]ᵀ[A | tau]."""
    z = np.append(x, -1.0)
    return np.maximum(np.einsum('a,jab,b->j', z, grams, z), 0.0)


def _cv_errors(ident, stream, pair, kinds_per_joint, weights):
    """(n,) each joint's relative squared error over the folds, Σ_f SSE_f / Σ_f tau²_f, every
    fold predicted by the weighted least-squares fit of the others (the joints' friction
    kinds `kinds_per_joint`, the (width, Stribeck velocity) `pair` of indices)."""
    n, p, x0 = ident.model.n, ident.p, ident.prior
    folds = [_global_grams(ident, stream.fit.C[f], *pair) for f in range(FOLDS)]
    weighted = [np.einsum('j,jab->ab', weights, g) for g in folds]
    total = sum(weighted)
    out = _left_out(n, kinds_per_joint)
    keep = ~out
    sse, tau2 = np.zeros(n), np.zeros(n)
    for f, grams in enumerate(folds):
        if not stream.fit.rows[f].any() or stream.fit.rows[f].sum() == stream.fit.rows.sum():
            continue
        train = total - weighted[f]
        G, g = train[:p, :p], train[:p, p]
        x = x0.copy()
        x[keep] = _least_squares(G[np.ix_(keep, keep)],
                                 g[keep] - G[np.ix_(keep, out)] @ x0[out], x0[keep])
        sse += _sse(grams, x)
        tau2 += grams[:, p, p]
    return sse / np.maximum(tau2, 1e-300)


def _nearest(values, value):
    return int(np.argmin(np.abs(np.log(np.asarray(values) / value))))


def select(ident):
    """Choose, by blocked cross-validation of the identification's own rows (`_cv_errors`;
    never the held-out ones): the smoothing window (WINDOWS), then the Coulomb width and the
    Stribeck velocity (WIDTHS × STRIBECK_VELOCITIES), each with the richest friction model
    on every joint, then per joint its friction model (the simplest of FRICTION_MODELS unless
    a richer one lowers its cross-validated squared error by SELECT_GAIN). Sets them on
    `ident` with its fit rows (`fit`, every fold) and held-out rows (`held`, `held_slow`);
    `ident.selection` says what each choice weighed."""
    n = ident.model.n
    richest = [list(FRICTION_MODELS.values())[-1]] * n
    default = (_nearest(ident.widths, DEFAULT_WIDTH),
               _nearest(ident.stribeck_velocities, DEFAULT_STRIBECK_VELOCITY))
    weights = {}
    for stream in ident.streams:
        fit = _global_grams(ident, stream.fit.C.sum(axis=0), *default)
        weights[stream.window_s] = _weights(_rows_of(fit, stream.fit.rows.sum(axis=0)),
                                            ident.prior)
    by_window = {s.window_s: float(np.mean(_cv_errors(ident, s, default, richest,
                                                      weights[s.window_s])))
                 for s in ident.streams}
    ident.window_s = min(by_window, key=by_window.get)
    stream, w = ident._stream(), weights[ident.window_s]
    pairs = [(a, b) for a in range(len(ident.widths))
             for b in range(len(ident.stribeck_velocities))]
    by_pair = {pair: float(np.mean(_cv_errors(ident, stream, pair, richest, w)))
               for pair in pairs}
    pair = min(by_pair, key=by_pair.get)
    ident.width = ident.widths[pair[0]]
    ident.stribeck_velocity = ident.stribeck_velocities[pair[1]]
    errors = {name: _cv_errors(ident, stream, pair, [kinds] * n, w)
              for name, kinds in FRICTION_MODELS.items()}
    ident.friction_models = [_simplest(errors, j) for j in range(n)]
    ident.excluded = _left_out(n, [FRICTION_MODELS[m] for m in ident.friction_models])
    total = stream.fit.rows.sum(axis=0)
    ident.fit = _rows_of(_global_grams(ident, stream.fit.C.sum(axis=0), *pair), total)
    ident.held, ident.held_slow = (_rows_of(_global_grams(ident, stream.held.C[k], *pair),
                                            stream.held.rows[k]) for k in (0, 1))
    ident.validation = _validation_split(ident, stream, pair)
    ident.selection = {
        'method': f'blocked cross-validation: {HOLDOUT_BLOCK:g}-s blocks of the '
                  f'identification data in {FOLDS} folds (held-out rows not used)',
        'window_s': {f'{k:g}': v for k, v in by_window.items()},
        'width_stribeck': {f'{ident.widths[a]:g}, {ident.stribeck_velocities[b]:g}': v
                           for (a, b), v in by_pair.items()},
        'models': {name: dict(zip(ident.model.joint_names, e.tolist()))
                   for name, e in errors.items()}}


def _simplest(errors, j):
    """The simplest friction model of joint j unless a richer one's error is SELECT_GAIN
    lower."""
    names = list(errors)
    best = names[0]
    for name in names[1:]:
        if errors[name][j] < (1 - SELECT_GAIN) * errors[best][j]:
            best = name
    return best


def _validation_split(ident, stream, pair):
    """(training rows, validation rows): every fold but the one with the most rows, and that
    one (`Plausibility.judge_total`'s evidence), or None with fewer than two folds."""
    counts = stream.fit.rows.sum(axis=1)
    if np.count_nonzero(counts) < 2:
        return None
    f = int(np.argmax(counts))
    train = np.delete(stream.fit.C, f, axis=0).sum(axis=0)
    rows = stream.fit.rows.sum(axis=0) - stream.fit.rows[f]
    return (_rows_of(_global_grams(ident, train, *pair), rows),
            _rows_of(_global_grams(ident, stream.fit.C[f], *pair), stream.fit.rows[f]))


def _left_out(n, kinds_per_joint):
    """Mask (p,) of the optional friction columns (FRICTION_MODELS' kinds) a joint's model
    does not have."""
    optional = {kind for kinds in FRICTION_MODELS.values() for kind in kinds}
    mask = np.zeros((10 + len(JOINT_KINDS)) * n, dtype=bool)
    for j, kinds in enumerate(kinds_per_joint):
        for kind in optional - set(kinds):
            mask[(10 + JOINT_KINDS.index(kind)) * n + j] = True
    return mask


def _snap_stayed(x, x0, names, n):
    """(x with each body that stayed whole set to the prior's exactly, as the file omits it;
    the names of the parameters that stayed)."""
    same = [_same(x[k], x0[k], x0[10 * (k // 10):10 * (k // 10) + 10] if k < 10 * n
                  else x0[k:k + 1]) for k in range(len(x))]
    for i in range(n):
        if all(same[10 * i:10 * i + 10]):
            x[10 * i:10 * i + 10] = x0[10 * i:10 * i + 10]
    return x, [name for name, kept in zip(names, same) if kept]


def _weights(fit, x0):
    """1/σ_j² per joint: σ_j the RMS residual of the fit weighted by 1/RMS(tau_j)."""
    rows = np.maximum(fit.rows, 1)
    tau_ms = np.maximum(fit.tau_squares() / rows, 1e-12)
    G, g, _ = fit.normal(1.0 / tau_ms)
    x = _least_squares(G, g, x0)
    sigma2 = fit.sse(x) / rows
    floor = 1e-6 * tau_ms  # a noise-free run: as if a residual of 1e-3 of the torque
    return 1.0 / np.maximum(sigma2, floor)


def _least_squares(G, g, x0):
    """Minimum-norm (column-scaled) least-squares step from x0 on the normal equations."""
    d = np.sqrt(np.maximum(np.diag(G), 1e-300))
    Gs = G / np.outer(d, d)
    step = np.linalg.lstsq(Gs, (g - G @ x0) / d, rcond=GRAM_RCOND)[0]
    return x0 + step / d


def _combined_factor(fit, weights):
    """R (p, p+1) with RᵀR = Σ_j w_j [A_j | tau_j]ᵀ[A_j | tau_j]."""
    stacked = np.vstack([math.sqrt(w) * R for w, R in zip(weights, fit.R)])
    return scipy.linalg.qr(stacked, mode='r', check_finite=False)[0][:stacked.shape[1]]


def base_parameters(fit, weights, names):
    """Rank, condition number and the base parameters with their standard errors.

    Pivoted QR of the column-scaled weighted regressor A D (D = column norms⁻¹): its first r
    pivots B are independent, the others D' regroup into them, A_{D'} = A_B K, so the base
    parameters are β = x_B + K x_{D'}. Their OLS estimate and covariance: β̂ = (A_BᵀWA_B)⁻¹
    A_BᵀW tau, s²(A_BᵀWA_B)⁻¹, s² the weighted residual per degree of freedom.
    """
    R = _combined_factor(fit, weights)
    A, b = R[:, :-1], R[:, -1]
    norms = np.linalg.norm(A, axis=0)
    scale = np.where(norms > 1e-12 * norms.max(), norms, 1.0)
    Rq, pivots = scipy.linalg.qr(A / scale, mode='r', pivoting=True, check_finite=False)
    diag = np.abs(np.diag(Rq))
    rank = int(np.sum(diag > RANK_TOLERANCE * diag[0]))
    B, rest = pivots[:rank], pivots[rank:]
    K = np.linalg.solve(Rq[:rank, :rank], Rq[:rank, rank:])  # scaled regrouping
    K = K * scale[rest][None, :] / scale[B][:, None]
    A_B = A[:, B]
    beta, *_ = np.linalg.lstsq(A_B, b, rcond=None)
    dof = max(int(fit.rows.sum()) - rank, 1)
    s2 = float(np.sum((A_B @ beta - b) ** 2)) / dof
    cov = s2 * np.linalg.inv(A_B.T @ A_B)
    std = np.sqrt(np.maximum(np.diag(cov), 0.0))
    singular = np.linalg.svd(A_B / scale[B], compute_uv=False)
    base = []
    for k, column in enumerate(B):
        regrouped = {names[rest[m]]: float(K[k, m]) for m in range(len(rest))
                     if abs(K[k, m]) > 1e-9}
        base.append({'name': names[column], 'regrouped': regrouped, 'estimate': float(beta[k]),
                     'std_error': float(std[k]),
                     'std_percent': float(100 * std[k] / abs(beta[k])) if beta[k] else math.inf})
    _, s, Vt = np.linalg.svd(A / scale, full_matrices=True)
    seen = int(np.sum(s > RANK_TOLERANCE * s[0]))
    null = Vt[seen:]  # scaled directions the motion does not see
    return {'rank': rank, 'condition_number': float(singular[0] / singular[-1]), 'base': base,
            'null_share': np.linalg.norm(null, axis=0) if len(null) else np.zeros(A.shape[1]),
            'null': null, 'scale': scale}


def _prior_scales(fit, weights):
    """s_k of the armature and friction columns: 1 / (ε √w_j max(RMS(column), floor)), so
    that the prior counts as ε² = 1e-6 row of the column's weighted effect: it holds what a
    joint that never moved cannot tell, and leaves to the links' D how an armature and its
    link's I_zz share a sum the motion sees (the link stays as the URDF says)."""
    n = len(fit.R)
    scales = np.empty(len(JOINT_KINDS) * n)
    for j, R in enumerate(fit.R):
        rows = max(fit.rows[j], 1)
        for m, floor in enumerate(MIN_COLUMN_RMS.values()):
            rms = math.sqrt(np.sum(R[:, 10 * n + m * n + j] ** 2) / rows)
            scales[m * n + j] = 1.0 / (PRIOR_JOINT * math.sqrt(weights[j]) * max(rms, floor))
    return scales


# pseudo-inertia J = [[Σ, h], [hᵀ, m]], Σ = ½ tr(I_O) 1 - I_O, as a linear map of θ (16, 10)
_J_MAP = np.zeros((4, 4, 10))
_J_MAP[3, 3, 0] = 1.0
for _a in range(3):
    _J_MAP[_a, 3, 1 + _a] = _J_MAP[3, _a, 1 + _a] = 1.0
for _k, (_r, _c) in enumerate(((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))):
    if _r == _c:
        _J_MAP[:3, :3, 4 + _k] += 0.5 * np.eye(3)
        _J_MAP[_r, _c, 4 + _k] -= 1.0
    else:
        _J_MAP[_r, _c, 4 + _k] = _J_MAP[_c, _r, 4 + _k] = -1.0
J_MAP = _J_MAP.reshape(16, 10)


def pseudo_inertia(theta):
    """J (4×4) of a body's 10 parameters: J ⪰ 0 iff some mass distribution has them."""
    return (J_MAP @ np.asarray(theta, float)).reshape(4, 4)


def _prior_pseudo_inertia(theta, mass_scale):
    """J⁰ of the URDF, made positive definite if it is not (a point mass, a massless link):
    plus a sphere of 1e-3 × `mass_scale` kg, radius 5 cm, at the origin."""
    J = pseudo_inertia(theta)
    m = 1e-3 * mass_scale
    sphere = np.diag([m * 0.05 ** 2 / 5] * 3 + [m])  # Σ = ∫ x xᵀ dm = m r²/5 · 1
    d = np.sqrt(np.diag(J + sphere))
    if np.linalg.eigvalsh(J / np.outer(d, d))[0] < 1e-6:
        J = J + sphere
    return J


def consistent_fit(R, x0, n, scales, base=None, limits=None):
    """The convex program of the module docstring; x (13n,). SolverError if none found.

    R (p+1, p+1): the weighted rows' factor, ‖R [x; -1]‖² = Σ_j w_j ‖A_j x - tau_j‖². The
    data weigh 1e5-1e8 times more than the prior where they see something, and not at all
    where they do not: the variable is preconditioned by the objective's Hessian H at the
    prior, x = x0 + L⁻ᵀ z (H = L Lᵀ), so the solver sees a unit curvature in every direction.
    `base` (`base_parameters`): each parameter the motion does not see at all (its unit
    vector in the regressor's null space) is held at the prior exactly (x = x0 + M y, M the
    other coordinates), the preconditioner is H's restricted to them; `limits`
    (`Plausibility`): each body's bounding ellipsoid and mass bounds, and the total's.
    """
    import cvxpy as cp
    A, residual0 = R[:, :-1], R[:, :-1] @ x0 - R[:, -1]
    blocks = [_divergence_block(x0[10 * i:10 * i + 10], x0[0:10 * n:10]) for i in range(n)]
    H = A.T @ A + np.diag(np.concatenate([np.zeros(10 * n), scales ** -2.0]))
    for i, affine in enumerate(blocks):
        H[10 * i:10 * i + 10, 10 * i:10 * i + 10] += PRIOR_WEIGHT * affine.T @ affine
    M = np.eye(len(x0))
    if base is not None:
        M = M[:, base['null_share'] <= 1 - UNSEEN]
    L = np.linalg.cholesky(M.T @ H @ M)
    P = M @ scipy.linalg.solve_triangular(L, np.eye(len(L)), lower=True).T
    z = cp.Variable(len(L))
    step = P @ z
    divergence = 0
    for i, affine in enumerate(blocks):
        J = cp.reshape(affine @ (x0[10 * i:10 * i + 10] + step[10 * i:10 * i + 10]), (4, 4),
                       order='C')
        divergence += -cp.log_det((J + J.T) / 2) + cp.trace(J) - 4.0
    extra = (x0[10 * n:] + step[10 * n:])[np.flatnonzero(_nonnegative(n))]
    objective = (cp.sum_squares((A @ P) @ z + residual0) + PRIOR_WEIGHT * divergence
                 + cp.sum_squares(cp.multiply(step[10 * n:], 1.0 / scales)))
    constraints = [extra >= 0]
    if limits is not None:
        G, h = limits.inequalities()  # G x >= h
        constraints.append((G @ P) @ z >= h - G @ x0)
    problem = cp.Problem(cp.Minimize(objective), constraints)
    try:
        problem.solve(solver=cp.CLARABEL, verbose=VERBOSE)
    except cp.SolverError as error:
        raise SolverError(f'the identification program failed: {error}') from None
    if z.value is None or problem.status not in ('optimal', 'optimal_inaccurate'):
        raise SolverError(f'the identification program ended {problem.status!r}')
    x = x0 + P @ np.asarray(z.value, dtype=float)
    x[10 * n:][_nonnegative(n)] = np.maximum(x[10 * n:][_nonnegative(n)], 0.0)  # a -1e-18
    return x


# ---------------------------------------------------------------------------- plausibility


class Plausibility:
    """Where each body's mass may be and how much there may be: its bounding ellipsoid
    (`bounds.bounding_ellipsoids`: tr(Q_i J_i) ≥ 0), its mass within MASS_RANGE × the URDF's
    (a massless URDF body: up to the mean body mass; the body carrying `link`, where a payload
    may be: no upper bound but the total's, and a lower one of MASS_RANGE[0] × its own link's
    mass, as a hand or tool the URDF fixes to that link may be off the arm), and the total
    within 1 ± TOTAL_RANGE of the URDF's, unless the held-out rows say otherwise
    (`judge_total`)."""

    def __init__(self, model, x0, link=None, mesh_dirs=()):
        self.model, self.n = model, model.n
        self.Q, self.sources = zip(*bounding_ellipsoids(model, x0[:10 * model.n],
                                                        pseudo_inertia, mesh_dirs))
        m0 = x0[0:10 * self.n:10]
        typical = float(np.mean(m0[m0 > 0])) if np.any(m0 > 0) else 1.0
        self.low = MASS_RANGE[0] * m0
        self.high = np.where(m0 > 0, MASS_RANGE[1] * m0, typical)
        self.payload_body = None if link is None else model.link_frame(link)[0]
        if self.payload_body is not None and self.payload_body >= 0:
            self.high[self.payload_body] = np.inf
            own = _own_mass(model, body_link_names(model)[self.payload_body])
            if own is not None and own > 0:  # a hand or tool the URDF fixes to it may be off
                self.low[self.payload_body] = MASS_RANGE[0] * min(own, m0[self.payload_body])
        self.total0 = float(np.sum(m0))
        self.total = (1 - TOTAL_RANGE) * self.total0, (1 + TOTAL_RANGE) * self.total0
        self.note = None

    def without_total(self):
        other = copy.copy(self)
        other.total = None
        return other

    def inequalities(self):
        """(G, h): the limits as G x ≥ h on x (13n,), rows scaled to unit norm."""
        rows, h = [], []
        p = (10 + len(JOINT_KINDS)) * self.n
        for i, Q in enumerate(self.Q):
            row = np.zeros(p)
            row[10 * i:10 * i + 10] = Q.reshape(16) @ J_MAP  # tr(Q J) = vec(Q)·vec(J)
            rows.append(row), h.append(0.0)
            for sign, bound in ((1.0, self.low[i]), (-1.0, -self.high[i])):
                if math.isfinite(bound):
                    row = np.zeros(p)
                    row[10 * i] = sign
                    rows.append(row), h.append(bound)
        if self.total is not None:
            row = np.zeros(p)
            row[0:10 * self.n:10] = 1.0
            rows += [row, -row]
            h += [self.total[0], -self.total[1]]
        G, h = np.array(rows), np.array(h)
        norms = np.linalg.norm(G, axis=1)
        return G / norms[:, None], h / norms

    def total_active(self, x):
        total = float(np.sum(x[0:10 * self.n:10]))
        return self.total is not None and min(abs(total - b) for b in self.total) <= (
            1e-4 * self.total0)

    def judge_total(self, x, relaxed, evidence):
        """x, or `relaxed` (the fit without the total's bound) when, fitted on all folds but
        one, it predicts that fold's rows with a relative torque error TOTAL_EVIDENCE lower
        (`_total_evidence`: the data say the total is not the prior's; the note says so)."""
        if evidence is None:
            self.note = 'total mass at its bound (too few blocks to judge beyond it)'
            return x
        rows, bounded_fit, free_fit = evidence
        tau2 = np.maximum(rows.tau_squares(), 1e-300)
        seen = rows.rows > 0
        bounded, free = (float(np.sum(rows.sse(v)[seen] / tau2[seen]))
                         for v in (bounded_fit, free_fit))
        total = float(np.sum(relaxed[0:10 * self.n:10]))
        if free < (1 - TOTAL_EVIDENCE) * bounded:
            self.total = None
            self.note = (f'the cross-validated torques put the total mass at {total:.4g} kg, '
                         f"{100 * (total / self.total0 - 1):+.1f} % from the prior's "
                         f'{self.total0:.4g} kg, beyond ±{100 * TOTAL_RANGE:g} %')
            return relaxed
        self.note = (f'total mass at its bound; without it ({total:.4g} kg) the cross-validated '
                     'torques were no better')
        return x

    def violations(self, x):
        """What of x is not plausible (beyond the solver's tolerance)."""
        out = []
        names = body_link_names(self.model)
        for i, Q in enumerate(self.Q):
            theta = x[10 * i:10 * i + 10]
            J = pseudo_inertia(theta)
            scale = max(abs(theta[0]), 1e-9)
            if np.linalg.eigvalsh(J)[0] < -1e-9 * max(np.abs(J).max(), 1e-9):
                out.append(f'{names[i]}: no mass distribution has these parameters')
            if np.trace(Q @ J) < -BOUND_SLACK * scale:
                out.append(f'{names[i]}: mass outside its bounding ellipsoid '
                           f'({self.sources[i]})')
            if not self.low[i] * (1 - BOUND_SLACK) <= theta[0] <= self.high[i] * (1 + BOUND_SLACK):
                out.append(f'{names[i]}: mass {theta[0]:.4g} kg outside '
                           f'[{self.low[i]:.4g}, {self.high[i]:.4g}]')
        total = float(np.sum(x[0:10 * self.n:10]))
        if self.total is not None and not (self.total[0] * (1 - BOUND_SLACK) <= total
                                           <= self.total[1] * (1 + BOUND_SLACK)):
            out.append(f'total mass {total:.4g} kg outside [{self.total[0]:.4g}, '
                       f'{self.total[1]:.4g}]')
        return out

    def report(self, x):
        """{bodies: {link: mass [kg], mass_bounds [kg], at_bound ('lower', 'upper' or None),
        com [m] (body frame), ellipsoid (its source), com_inside (the com inside the
        ellipsoid), inside (all of the mass: tr(Q J) ≥ 0)}, total_mass [kg],
        total_mass_urdf [kg], total_bounds, note, violations}."""
        bodies = {}
        for i, link in enumerate(body_link_names(self.model)):
            theta = x[10 * i:10 * i + 10]
            scale = max(abs(theta[0]), 1e-9)
            com = theta[1:4] / scale
            near = [side for side, bound in (('lower', self.low[i]), ('upper', self.high[i]))
                    if math.isfinite(bound) and abs(theta[0] - bound) <= 1e-4 * scale]
            bodies[link] = {'mass': float(theta[0]),
                            'mass_bounds': [float(self.low[i]), float(self.high[i])],
                            'at_bound': near[0] if near else None,
                            'com': com.tolist(), 'ellipsoid': self.sources[i],
                            'com_inside': bool(np.append(com, 1.0) @ self.Q[i]
                                               @ np.append(com, 1.0) >= -BOUND_SLACK),
                            'inside': bool(np.trace(self.Q[i] @ pseudo_inertia(theta))
                                           >= -BOUND_SLACK * scale)}
        return {'bodies': bodies, 'total_mass': float(np.sum(x[0:10 * self.n:10])),
                'total_mass_urdf': self.total0,
                'total_bounds': None if self.total is None else list(self.total),
                'note': self.note, 'violations': self.violations(x)}


def _own_mass(model, link):
    """[kg] the URDF's mass of `link` alone (not of the links fixed to it), or None."""
    import xml.etree.ElementTree as ET
    if not model.urdf:
        return None
    for element in ET.fromstring(model.urdf).findall('link'):
        if element.get('name') == link:
            mass = element.find('inertial/mass')
            return 0.0 if mass is None else float(mass.get('value'))
    return None


# ---------------------------------------------------------------------------- the checks


def checks(ident, result, base):
    """{'failures': [...], 'lacking': {...}, 'reachable_rank': r*}: what keeps this fit from
    being written (rank below what this arm's parameters reach, r* of a regressor at random
    states; a controlled joint that barely slid; held-out torques missing or worse than the
    URDF's; an implausible body) and what the motion lacked, with how to record a better one.
    """
    model = ident.model
    reachable, share = _reachable(ident)
    failures = []
    sliding = ident._stream().sliding
    quiet = [joint for j, joint in enumerate(model.joint_names)
             if sliding[j] < MIN_SLIDING_SHARE * max(ident.samples, 1)]
    unexcited = [name for k, name in enumerate(ident.names)
                 if base['null_share'][k] > share[k] + 1e-3 and not ident.excluded[k]]
    if result['rank'] < reachable:
        failures.append(f"regressor rank {result['rank']} of the {reachable} this arm's "
                        f"parameters reach ({ident.p} columns): the motion did not excite "
                        f'{_grouped(unexcited)}')
    if quiet:
        failures.append(f'joints that slid (|qd| >= {SLIDING_SPEED:g} rad/s) in less than '
                        f'{100 * MIN_SLIDING_SHARE:g} % of the samples: {", ".join(quiet)}')
    for joint, h in result['holdout']['joints'].items():
        if h['identified'] is None:
            failures.append(f'{joint}: no held-out rows')
        elif h['identified'] > (1 + HOLDOUT_SLACK) * h['urdf']:
            failures.append(f"{joint}: held-out torque error {100 * h['identified']:.3g} % "
                            f"worse than the prior's (URDF's) {100 * h['urdf']:.3g} %")
    failures += [f'implausible: {v}' for v in result['plausibility']['violations']]
    ranges = {joint: float(r) for joint, r in zip(model.joint_names, ident.q_range())}
    return {'failures': failures, 'reachable_rank': reachable,
            'lacking': {'joints': quiet, 'parameters': unexcited, 'ranges': ranges,
                        'advice': _advice(failures, quiet, ranges, ident)}}


def _reachable(ident, samples=120):
    """(rank, null share per column) of the regressor at random states within the position
    limits (velocities and accelerations ±1): what a motion exciting everything would see."""
    model = ident.model
    rng = np.random.default_rng(0)
    low, high = np.clip(model.position_limits, -np.pi, np.pi).T
    q = low + (high - low) * rng.uniform(0.05, 0.95, (samples, model.n))
    qd = rng.choice([-1.0, 1.0], (samples, model.n)) * rng.uniform(0.2, 1.0, (samples, model.n))
    qdd = rng.uniform(-1.0, 1.0, (samples, model.n))
    A = ident.rows(q, qd, qdd).reshape(-1, ident.p) * ~ident.excluded
    norms = np.linalg.norm(A, axis=0)
    scale = np.where(norms > 1e-12 * norms.max(), norms, 1.0)
    _, s, Vt = np.linalg.svd(A / scale, full_matrices=True)
    rank = int(np.sum(s > RANK_TOLERANCE * s[0]))
    null = Vt[rank:]
    return rank, (np.linalg.norm(null, axis=0) if len(null) else np.zeros(ident.p))


def _grouped(names, shown=8):
    """'link_a (m, h_x), joint_b (viscous)' of '<owner>.<kind>' names."""
    groups = {}
    for name in names:
        owner, _, kind = name.rpartition('.')
        groups.setdefault(owner, []).append(kind)
    items = [f"{owner} ({', '.join(kinds)})" for owner, kinds in groups.items()]
    more = f' and {len(items) - shown} more' if len(items) > shown else ''
    return (', '.join(items[:shown]) + more) or 'nothing identifiable'


def _advice(failures, quiet, ranges, ident):
    if not failures:
        return ''
    narrow = [joint for joint, r in ranges.items() if r < MIN_RANGE]
    seconds = ident.data_time
    parts = [f'record an excitation (rnea-send-trajectory --excite) longer than this '
             f'{seconds:.1f} s (at least {MIN_DURATION:g} s)']
    if quiet or narrow:
        parts.append('moving ' + ', '.join(sorted(set(quiet) | set(narrow)))
                     + f' faster than {SLIDING_SPEED:g} rad/s over at least {MIN_RANGE:g} rad')
    else:
        parts.append('over wider ranges of every joint')
    return '; '.join(parts)


def _nonnegative(n):
    """(len(JOINT_KINDS) n,) True where a joint parameter may not be negative."""
    return np.repeat([kind not in SIGNED for kind in JOINT_KINDS], n)


def _divergence_block(theta0, masses):
    """(T ⊗ T) J_MAP of one body, vec(T J(θ) T) per unit of θ: D is invariant to
    J -> T J Tᵀ, and with T = J⁰^(-1/2) the cone sees T J T = 1 at the prior."""
    J0 = _prior_pseudo_inertia(theta0, max(float(np.mean(masses)), 1e-3))
    values, vectors = np.linalg.eigh(J0)
    T = vectors @ np.diag(values ** -0.5) @ vectors.T
    return np.kron(T, T) @ J_MAP


def _status(null_share, excluded):
    """Per parameter, from the share of its unit vector in the regressor's null space: not
    seen (all of it), identified (none of it), only in combination with others."""
    return [NOT_IN_MODEL if out else IDENTIFIED if share < 1e-3 else
            NOT_SEEN if share > 1 - UNSEEN else COMBINED
            for share, out in zip(null_share, excluded)]


def _same(value, prior, group):
    """value equals prior within 1e-4 of the group's scale (a body's largest |θ|)."""
    return abs(value - prior) <= 1e-4 * max(np.max(np.abs(group)), 1e-9)


def _rms(rows, x, model):
    """{joint: RMS residual [N·m]} of x on these rows."""
    return {j: float(math.sqrt(e / max(c, 1))) for j, e, c in zip(
        model.joint_names, rows.sse(x), rows.rows)}


def _holdout(ident, x, x0):
    """Relative RMS per joint on the held-out rows, the URDF's (prior) and the identified:
    on every row, and apart on the slow ones (|qd| < SLIDING_SPEED: creep, stops, reversals)
    and the moving ones (the others); and how far the held-out rows go beyond the speeds of
    the fit's (`_coverage`: a model's friction there is extrapolated)."""
    out = {'source': 'second bag' if ident.second_bag else
           f'one {HOLDOUT_BLOCK:g}-s block in {HOLDOUT_EVERY} of this bag', 'joints': {},
           'slow_speed': SLIDING_SPEED}
    every, slow = (_errors(rows, x, x0) for rows in (ident.held, ident.held_slow))
    moving = tuple(a - b for a, b in zip(every, slow))
    coverage = _coverage(ident._stream().speeds)
    for j, joint in enumerate(ident.model.joint_names):
        out['joints'][joint] = {**_relative(every, j), 'slow': _relative(slow, j),
                                'moving': _relative(moving, j), 'speeds': coverage[j]}
    return out


def _errors(rows, x, x0):
    """(rows, Σ tau², SSE of the prior, SSE of x) per joint (n,) of a set of rows."""
    return (rows.rows.astype(float), rows.tau_squares() if rows.rows.any() else
            np.zeros(len(rows.rows)), rows.sse(x0), rows.sse(x))


def _relative(errors, j):
    """{rows, urdf, identified (relative RMS), rms_urdf, rms_identified [N·m]} of joint j."""
    count, tau2, before, after = (float(e[j]) for e in errors)
    if count < 0.5 or tau2 <= 0:
        return {'rows': 0, 'urdf': None, 'identified': None, 'rms_urdf': None,
                'rms_identified': None}
    before, after = max(before, 0.0), max(after, 0.0)
    return {'rows': int(round(count)), 'urdf': math.sqrt(before / tau2),
            'identified': math.sqrt(after / tau2), 'rms_urdf': math.sqrt(before / count),
            'rms_identified': math.sqrt(after / count)}


def body_inertials(model, x, stayed=()):
    """{link: {mass, com, inertia (ixx ixy ixz iyy iyz izz about the com)}} of each body that
    moved from the prior (a body whose 10 parameters all stayed is left out)."""
    out = {}
    for i, link in enumerate(body_link_names(model)):
        if all(f'{link}.{p}' in stayed for p in PARAMETER_NAMES) or x[10 * i] <= 0:
            continue
        mass, com, inertia = link_inertial(x[10 * i:10 * i + 10])
        out[link] = {'mass': mass, 'com': com.tolist(),
                     'inertia': inertia[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]].tolist()}
    return out


def _payload_change(model, link, x, x0, status):
    """The mass [kg] and first moment identified on `link`'s body beyond the URDF's."""
    if link is None:
        return None
    body = model.link_frame(link)[0]
    if body < 0:
        return None
    k = 10 * body
    return {'link': link, 'body_link': body_link_names(model)[body],
            'mass_change': float(x[k] - x0[k]), 'mass_status': status[k],
            'first_moment_change': (x[k + 1:k + 4] - x0[k + 1:k + 4]).tolist()}


# ---------------------------------------------------------------------------- the file


def parameters_yaml(result, model=None, joints=None, clear_payload=False):
    """The identified parameters as a ROS 2 parameters file for the node (`--params-file`).

    links.<link>.mass/.com/.inertia of every moving body (the link moved by a joint with what
    is fixed to it, a payload carried included), armature.<joint> and friction.<joint>.* of
    the controlled `joints` (default the node's default joints), friction_velocity_width, and
    with `clear_payload` (the prior had one) payload.link '': a payload carried during the run
    is inside its link's body now, and must not be added twice. Each value is checked against
    the parameter table and, with `model`, the whole against `validate_parameters`: the node
    always starts with the file. ParameterError if it would not.
    """
    if joints is None and model is not None:
        joints = default_joints(model)
    entries = [(('links', link, key), value) for link, values in result['links'].items()
               for key, value in (('mass', values['mass']), ('com', values['com']),
                                  ('inertia', values['inertia']))]
    if clear_payload:
        entries.append((('payload', 'link'), ''))
    for joint, value in result['armature'].items():
        entries.append((('armature', joint), float(value)))
    for joint, friction in result['friction'].items():
        entries += [(('friction', joint, kind), float(v)) for kind, v in friction.items()]
    entries.append((('friction_velocity_width',), result['friction_velocity_width']))
    if 'friction_stribeck_velocity' in result:
        entries.append((('friction_stribeck_velocity',), result['friction_stribeck_velocity']))
    entries = [(path, value) for path, value in entries if _controlled(path, joints)]
    for path, value in entries:
        parameters.check('.'.join(path), value)
    if model is not None:
        validate_parameters({**{'.'.join(p): v for p, v in entries},
                             'joints': list(joints)}, model)
    tree = {}
    for path, value in entries:
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    body = yaml.safe_dump({'/**': {'ros__parameters': tree}}, sort_keys=False,
                          default_flow_style=None, width=99)
    return _header(result) + body


def _controlled(path, joints):
    joint = joint_of_parameter('.'.join(path))
    return joint is None or joints is None or joint in joints


def _header(result):
    stayed = result['stayed_at_urdf']
    held = result['holdout']['joints']
    lines = ['# Identified by rnea-validate --identify: every moving body (a link with what is',
             "# fixed to it, a payload carried included) and each joint's armature and friction",
             f"# ({result['samples']} samples, regressor rank {result['rank']} of "
             f"{result['parameters_count']}, condition number {result['condition_number']:.3g}).",
             '# Held-out relative torque RMS per joint, URDF -> identified:']
    lines += [f"#   {joint}: {_pct(h['urdf'])} -> {_pct(h['identified'])}"
              for joint, h in held.items()]
    plausible = result.get('plausibility')
    if plausible:
        lines.append(f"# Total mass {plausible['total_mass']:.4g} kg (prior "
                     f"{plausible['total_mass_urdf']:.4g}); each body inside its bounding "
                     f'ellipsoid, its mass within {MASS_RANGE[0]:g}-{MASS_RANGE[1]:g}x the prior.')
    if result.get('friction_models'):
        lines.append('# Friction models: ' + ', '.join(
            f'{joint} {model}' for joint, model in result['friction_models'].items()))
    lines.append(f'# Stayed at the prior (URDF) value: {len(stayed)} parameters, e.g. '
                 + ', '.join(stayed[:6]) if stayed else '# Every parameter moved from the prior.')
    return '\n'.join(lines) + '\n'


def _pct(value):
    return '-' if value is None else f'{100 * value:.2f} %'


def parameters_from_file(path):
    """{name: value} of a ROS 2 parameters file's '/**' (or any node's) ros__parameters."""
    try:
        tree = yaml.safe_load(open(path).read())
    except (OSError, yaml.YAMLError) as error:
        raise ParameterError(f'cannot read parameters file {path}: {error}') from None
    if not isinstance(tree, dict):
        raise ParameterError(f'{path}: not a ROS 2 parameters file (no mapping)')
    values = {}
    for node in tree.values():
        if isinstance(node, dict) and isinstance(node.get('ros__parameters'), dict):
            values.update(dict(flatten(node['ros__parameters'])))
    return values


def flatten(tree, prefix=''):
    """A ROS parameters YAML's nested dict as (dotted name, value) pairs, as ROS reads it."""
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from flatten(value, f'{prefix}{key}.')
        else:
            yield f'{prefix}{key}', value


def corrected_urdf(urdf_text, model, links):
    """The URDF with each identified body's <inertial> on its link and none on the links
    fixed to it (their inertia is in the body's): `links` {link: {mass, com, inertia}} as in
    the result. Pinocchio and MuJoCo load it; their dynamics are the node's with the file."""
    import xml.etree.ElementTree as ET
    root = ET.fromstring(urdf_text)
    bodies = body_link_names(model)
    elements = {link.get('name'): link for link in root.findall('link')}
    for name, values in links.items():
        body = bodies.index(name)
        for other, (b, _, _) in model.link_frames.items():
            if b == body and other != name and other in elements:
                for inertial in elements[other].findall('inertial'):
                    elements[other].remove(inertial)
        for inertial in elements[name].findall('inertial'):
            elements[name].remove(inertial)
        inertial = ET.SubElement(elements[name], 'inertial')
        ET.SubElement(inertial, 'origin', xyz=' '.join(repr(float(c)) for c in values['com']),
                      rpy='0 0 0')
        ET.SubElement(inertial, 'mass', value=repr(float(values['mass'])))
        ET.SubElement(inertial, 'inertia', **{k: repr(float(v)) for k, v in zip(
            ('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz'), values['inertia'])})
    return ET.tostring(root, encoding='unicode')
