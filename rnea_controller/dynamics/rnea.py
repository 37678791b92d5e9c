"""Inverse dynamics by the recursive Newton-Euler algorithm (RNEA), and what derives from it.

Source: Featherstone, *Rigid Body Dynamics Algorithms* (2008), Table 5.1; the seeds'
pseudocode (shared/seeds/000, "Recursive Newton-Euler algorithm"):

    v_0 = v_base,   a_0 = a_base - [g; 0]
    for i = 1..n:   v_i = X_i v_λ(i) + S_i qd_i
                    a_i = X_i a_λ(i) + S_i qdd_i + v_i × S_i qd_i
                    f_i = I_i a_i + v_i ×* I_i v_i - f_i^ext
    for i = n..1:   tau_i = S_iᵀ f_i + armature_i qdd_i      (rotor inertia, Pinocchio's)
                    f_λ(i) += X_iᵀ f_i

`rnea_reference` is that pseudocode line by line (numpy, 6×6 matrices). `rnea` computes the
same with a compiled kernel (`rnea_kernel.py`) and is what the controller calls at 1 kHz; the
tests hold both to Pinocchio. Spatial vectors are [linear; angular] (see `spatial.py`).
"""
import math

import numpy as np
from numpy.typing import ArrayLike

from rnea_controller.dynamics import rnea_kernel
from rnea_controller.dynamics.checks import finite_vector, require_finite
from rnea_controller.dynamics.model import joint_motion, RobotModel
from rnea_controller.dynamics.spatial import crf, crm, plucker
from rnea_controller.errors import DimensionError


def rnea(model: RobotModel, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, *,
         gravity: ArrayLike | None = None, f_ext: dict | None = None,
         base_velocity: ArrayLike | None = None,
         base_acceleration: ArrayLike | None = None) -> np.ndarray:
    """Joint torques [N·m] / forces [N] that produce `qdd` at (q, qd).

    Args:
        model: RobotModel
        q, qd, qdd: joint positions [rad | m], velocities [/s], accelerations [/s²]; shape (n,),
            or (N, n) for N states at once (the result then has shape (N, n))
        gravity: (3,) [m/s²] in the base frame; default `model.gravity`
        f_ext: {link name: [fx, fy, fz, mx, my, mz]}, the wrench [N, N·m] the environment applies
            ON that link, in the link frame about its origin ((N, 6) when batched). A wrench that
            pushes the arm the way it moves lowers the torque needed: f_i = I a + v ×* I v - f_ext.
        base_velocity, base_acceleration: spatial motion [v; ω] of the base in its own frame
            [m/s, rad/s] and [m/s², rad/s²], for an arm on a moving base (default: at rest)

    Returns:
        tau, shape like q:  tau = M(q) qdd + C(q, qd) qd + g(q) - Σ J_linkᵀ f_ext, M including
        diag(model.armature)
    """
    q, qd, qdd, batched = _states(model, q, qd, qdd, check_finite=False)
    v0, a0 = _base_motion(model, gravity, base_velocity, base_acceleration)
    tau = np.empty_like(q)
    forces = body_forces(model, f_ext, len(q))
    forces.setflags(write=False)  # one signature of the kernel (rnea_kernel doc)
    total = rnea_kernel.rnea_batch(*rnea_kernel.model_arrays(model), q, qd, qdd, v0, a0,
                                   forces, tau)
    if not math.isfinite(total):  # NaN and inf in any input propagate to tau
        original = (q, qd, qdd) if batched else (q[0], qd[0], qdd[0])
        _states(model, *original, check_finite=True)
        raise DimensionError(f'torques overflow to non-finite values at q={q.tolist()}')
    return tau if batched else tau[0]


def rnea_reference(model: RobotModel, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, *,
                   gravity: ArrayLike | None = None, f_ext: dict | None = None,
                   base_velocity: ArrayLike | None = None,
                   base_acceleration: ArrayLike | None = None) -> np.ndarray:
    """Same as `rnea`, one state at a time, written as the seeds' pseudocode (slow, readable)."""
    q, qd, qdd, batched = _states(model, q, qd, qdd)
    v0, a0 = _base_motion(model, gravity, base_velocity, base_acceleration)
    f_body = body_forces(model, f_ext, len(q))
    tau = np.array([_rnea_one(model, *state, v0, a0) for state in zip(q, qd, qdd, f_body)])
    return tau if batched else tau[0]


def _rnea_one(model, q, qd, qdd, f_ext, v0, a0):
    """One state through the seeds' pseudocode, 6×6 matrices as written."""
    n, S, I = model.n, model.S, model.inertias
    X, v, a, f = np.zeros((n, 6, 6)), np.zeros((n, 6)), np.zeros((n, 6)), np.zeros((n, 6))
    tau = np.zeros(n)
    for i in range(n):
        p = model.parents[i]
        X[i] = joint_transform(model, i, q[i])
        v_p, a_p = (v0, a0) if p < 0 else (v[p], a[p])
        v[i] = X[i] @ v_p + S[i] * qd[i]
        a[i] = X[i] @ a_p + S[i] * qdd[i] + crm(v[i]) @ (S[i] * qd[i])
        f[i] = I[i] @ a[i] + crf(v[i]) @ I[i] @ v[i] - f_ext[i]
    for i in reversed(range(n)):
        p = model.parents[i]
        tau[i] = S[i] @ f[i] + model.armature[i] * qdd[i]
        if p >= 0:
            f[p] += X[i].T @ f[i]
    return tau


def joint_transform(model: RobotModel, i: int, q_i: float) -> np.ndarray:
    """ⁱX_λ(i)(q_i): motion transform from body λ(i) to body i."""
    R_j, p_j = joint_motion(model.joint_types[i], model.axes[i], q_i)
    R = model.R_tree[i] @ R_j
    p = model.R_tree[i] @ p_j + model.p_tree[i]
    return plucker(R, p)


def gravity_torques(model: RobotModel, q: ArrayLike) -> np.ndarray:
    """g(q) = RNEA(q, 0, 0): torques [N·m] that hold the arm still against gravity."""
    q = np.asarray(q, dtype=float)
    return rnea(model, q, np.zeros_like(q), np.zeros_like(q))


def bias_torques(model: RobotModel, q: ArrayLike, qd: ArrayLike) -> np.ndarray:
    """h(q, qd) = C(q, qd) qd + g(q) = RNEA(q, qd, 0): Coriolis, centrifugal and gravity."""
    q = np.asarray(q, dtype=float)
    return rnea(model, q, qd, np.zeros_like(q))


def mass_matrix(model: RobotModel, q: ArrayLike) -> np.ndarray:
    """Joint-space inertia matrix M(q) (n, n) by the composite-rigid-body algorithm.

    Featherstone (2008), Table 6.2:  I^c_i = I_i + Σ_children X_jᵀ I^c_j X_j,
    F = I^c_i S_i,  H_ii = S_iᵀ F + armature_i,  then F ← X_jᵀ F up the tree, H_ij = H_ji = S_jᵀ F.
    """
    q, _, _, batched = _states(model, q, q, q)
    if batched:
        return np.array([mass_matrix(model, state) for state in q])
    q = q[0]
    n, S = model.n, model.S
    X = np.array([joint_transform(model, i, q[i]) for i in range(n)])
    Ic = np.array(model.inertias)
    for i in reversed(range(n)):
        p = model.parents[i]
        if p >= 0:
            Ic[p] += X[i].T @ Ic[i] @ X[i]
    M = np.zeros((n, n))
    for i in range(n):
        F = Ic[i] @ S[i]
        M[i, i] = S[i] @ F + model.armature[i]
        j = i
        while model.parents[j] >= 0:
            F = X[j].T @ F
            j = model.parents[j]
            M[i, j] = M[j, i] = S[j] @ F
    return M


def _states(model, q, qd, qdd, check_finite=True):
    """Check shapes (and finiteness) at the entry point; return C-contiguous (N, n) floats."""
    arrays = []
    for name, value in (('q', q), ('qd', qd), ('qdd', qdd)):
        array = np.asarray(value, dtype=float)
        if array.ndim not in (1, 2) or array.shape[-1] != model.n:
            raise DimensionError(f'{name} has shape {array.shape}, but the model has '
                                 f'{model.n} joints: expected ({model.n},) or (N, {model.n})')
        if check_finite:
            require_finite(array, name)
        arrays.append(array)
    if not arrays[0].shape == arrays[1].shape == arrays[2].shape:
        raise DimensionError('q, qd, qdd must have the same shape, got '
                             f'{arrays[0].shape}, {arrays[1].shape}, {arrays[2].shape}')
    batched = arrays[0].ndim == 2
    return (*(np.ascontiguousarray(a.reshape(-1, model.n)) for a in arrays), batched)


def _base_motion(model, gravity, base_velocity, base_acceleration):
    """v_0 and a_0 = a_base - [g; 0]: gravity as a fictitious upward acceleration of the base."""
    if gravity is None and base_velocity is None and base_acceleration is None:
        return rnea_kernel.model_base_motion(model)
    g = model.gravity if gravity is None else finite_vector(gravity, 3, 'gravity')
    v0 = np.zeros(6) if base_velocity is None else finite_vector(base_velocity, 6,
                                                                 'base_velocity')
    a0 = np.zeros(6) if base_acceleration is None else finite_vector(
        base_acceleration, 6, 'base_acceleration')
    a0 = a0.copy()
    a0[:3] -= g
    return v0, a0


def body_forces(model: RobotModel, f_ext: dict | None, N: int) -> np.ndarray:
    """External wrenches per body in body coordinates, shape (N, n, 6) (or (1, n, 6) zeros)."""
    if not f_ext:
        return rnea_kernel.model_zero_forces(model)
    f_body = np.zeros((N, model.n, 6))
    for link, wrench in f_ext.items():
        body, R, p = model.link_frame(link)
        w = require_finite(wrench, f"f_ext['{link}']")
        if w.shape not in ((6,), (N, 6)):
            raise DimensionError(f"f_ext['{link}'] has shape {w.shape}; expected (6,) or "
                                 f'({N}, 6) values [fx, fy, fz, mx, my, mz]')
        if body >= 0:
            X_T = plucker(R, p)  # body -> link coordinates; forces go back by X_Tᵀ
            f_body[:, body] += np.atleast_2d(w) @ X_T
    return f_body  # writable: made read-only before it goes to a kernel (rnea_kernel doc)

