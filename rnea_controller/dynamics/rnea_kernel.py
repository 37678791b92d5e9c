"""Compiled RNEA kernel (numba): the same recursion as `rnea.rnea_reference`, in 3-vector form.

The 6×6 transform ⁱX_λ(i) = [[E, -E[r×]], [0, E]] is kept as its rotation E (parent to child
coordinates) and the child origin r in the parent frame, so that

    X m   = [E (m_v - r × m_ω);  E m_ω]            (motion, parent -> child)
    Xᵀ f  = [Eᵀ f_f;  Eᵀ f_n + r × Eᵀ f_f]          (force, child -> parent)

Compiled on first use and cached on disk (numba `cache=True`); the install step compiles every
kernel the node uses (rnea_controller/warm.py). Each argument's type includes whether the
array may be written: the model's arrays and the external wrenches are passed read-only by
every caller, the fewer signatures to compile (each of `_law`'s ~10 s).
"""
from typing import TYPE_CHECKING
import weakref

from numba import njit
import numpy as np

if TYPE_CHECKING:  # the model imports nothing from here; only the hints name it
    from rnea_controller.dynamics.model import RobotModel

_ARRAYS = weakref.WeakKeyDictionary()
_CONSTANTS = weakref.WeakKeyDictionary()


def model_arrays(model: 'RobotModel') -> tuple[np.ndarray, ...]:
    """The model's constant arrays in the layout the kernel takes (cached per model)."""
    arrays = _ARRAYS.get(model)
    if arrays is None:
        arrays = (np.ascontiguousarray(model.parents, dtype=np.int64),
                  np.ascontiguousarray(model.prismatic, dtype=np.bool_),
                  np.ascontiguousarray(model.axes, dtype=np.float64),
                  np.ascontiguousarray(model.R_tree, dtype=np.float64),
                  np.ascontiguousarray(model.p_tree, dtype=np.float64),
                  np.ascontiguousarray(model.inertias, dtype=np.float64),
                  np.ascontiguousarray(model.armature, dtype=np.float64))
        for array in arrays:  # one signature whatever the model's arrays allow (module doc)
            array.setflags(write=False)
        _ARRAYS[model] = arrays
    return arrays


def model_base_motion(model: 'RobotModel') -> tuple[np.ndarray, np.ndarray]:
    """(v_0, a_0) = (0, -[g; 0]) for a base at rest under the model's gravity (cached)."""
    cached = _CONSTANTS.get(model, {}).get('base')
    if cached is None:
        a0 = np.zeros(6)
        a0[:3] = -np.asarray(model.gravity)
        cached = (np.zeros(6), a0)
        _CONSTANTS.setdefault(model, {})['base'] = cached
    return cached


def model_zero_forces(model: 'RobotModel') -> np.ndarray:
    """Zero external wrenches, shape (1, n, 6), shared by every call (cached)."""
    cached = _CONSTANTS.get(model, {}).get('zero_forces')
    if cached is None:
        cached = np.zeros((1, model.n, 6))
        cached.setflags(write=False)
        _CONSTANTS.setdefault(model, {})['zero_forces'] = cached
    return cached


@njit(cache=True, inline='always')
def _cross(a, b, out, sign):
    out[0] += sign * (a[1] * b[2] - a[2] * b[1])
    out[1] += sign * (a[2] * b[0] - a[0] * b[2])
    out[2] += sign * (a[0] * b[1] - a[1] * b[0])


@njit(cache=True, inline='always')
def _placement(prismatic, axis, R_tree, p_tree, q, E, r):
    """E = (R_tree R_J(q))ᵀ and r = p_tree + R_tree p_J(q) of one joint."""
    if prismatic:
        for j in range(3):
            r[j] = p_tree[j] + q * (R_tree[j, 0] * axis[0] + R_tree[j, 1] * axis[1]
                                    + R_tree[j, 2] * axis[2])
            for k in range(3):
                E[k, j] = R_tree[j, k]
        return
    c, s = np.cos(q), np.sin(q)
    x, y, z = axis[0], axis[1], axis[2]
    C = 1.0 - c
    # R_J: rotation by q about the axis (Rodrigues); E = (R_tree R_J)ᵀ
    R00, R01, R02 = c + x * x * C, x * y * C - z * s, x * z * C + y * s
    R10, R11, R12 = y * x * C + z * s, c + y * y * C, y * z * C - x * s
    R20, R21, R22 = z * x * C - y * s, z * y * C + x * s, c + z * z * C
    for j in range(3):
        r[j] = p_tree[j]
        T0, T1, T2 = R_tree[j, 0], R_tree[j, 1], R_tree[j, 2]
        E[0, j] = T0 * R00 + T1 * R10 + T2 * R20
        E[1, j] = T0 * R01 + T1 * R11 + T2 * R21
        E[2, j] = T0 * R02 + T1 * R12 + T2 * R22


@njit(cache=True, inline='always')
def _motion(E, r, m, out):
    """out = X m for a motion vector m = [m_v; m_ω]."""
    u0 = m[0] - (r[1] * m[5] - r[2] * m[4])
    u1 = m[1] - (r[2] * m[3] - r[0] * m[5])
    u2 = m[2] - (r[0] * m[4] - r[1] * m[3])
    for j in range(3):
        out[j] = E[j, 0] * u0 + E[j, 1] * u1 + E[j, 2] * u2
        out[3 + j] = E[j, 0] * m[3] + E[j, 1] * m[4] + E[j, 2] * m[5]


@njit(cache=True, inline='always')
def _force_to_parent(E, r, f, out):
    """out += Xᵀ f for a force vector f = [f_f; f_n]."""
    f0 = E[0, 0] * f[0] + E[1, 0] * f[1] + E[2, 0] * f[2]
    f1 = E[0, 1] * f[0] + E[1, 1] * f[1] + E[2, 1] * f[2]
    f2 = E[0, 2] * f[0] + E[1, 2] * f[1] + E[2, 2] * f[2]
    for j in range(3):
        out[3 + j] += E[0, j] * f[3] + E[1, j] * f[4] + E[2, j] * f[5]
    out[0] += f0
    out[1] += f1
    out[2] += f2
    out[3] += r[1] * f2 - r[2] * f1
    out[4] += r[2] * f0 - r[0] * f2
    out[5] += r[0] * f1 - r[1] * f0


@njit(cache=True, inline='always')
def _inertia_times(I, m, out):
    """out = I m for a 6×6 spatial inertia (no BLAS: 36 multiply-adds)."""
    for j in range(6):
        out[j] = (I[j, 0] * m[0] + I[j, 1] * m[1] + I[j, 2] * m[2]
                  + I[j, 3] * m[3] + I[j, 4] * m[4] + I[j, 5] * m[5])


@njit(cache=True)
def rnea_batch(parents: np.ndarray, prismatic: np.ndarray, axes: np.ndarray, R_tree: np.ndarray,
               p_tree: np.ndarray, I: np.ndarray, armature: np.ndarray, q: np.ndarray,
               qd: np.ndarray, qdd: np.ndarray, v0: np.ndarray, a0: np.ndarray,
               f_ext: np.ndarray, tau: np.ndarray) -> float:
    """tau[k] = RNEA(q[k], qd[k], qdd[k]) for every row k; returns Σ tau (non-finite if any is).

    armature: (n,) rotor inertias, tau_i += armature_i qdd_i (the diagonal of M grows by them).
    f_ext: (N, n, 6) wrenches in body frames, or (1, n, 6) shared by all rows.
    """
    N, n = q.shape
    shared = f_ext.shape[0] == 1
    total = 0.0
    E, r = np.empty((n, 3, 3)), np.empty((n, 3))
    v, a, f = np.empty((n, 6)), np.empty((n, 6)), np.empty((n, 6))
    Sqd, h = np.empty(3), np.empty(6)
    for k in range(N):
        for i in range(n):
            p = parents[i]
            _placement(prismatic[i], axes[i], R_tree[i], p_tree[i], q[k, i], E[i], r[i])
            _motion(E[i], r[i], v0 if p < 0 else v[p], v[i])
            _motion(E[i], r[i], a0 if p < 0 else a[p], a[i])
            s = 0 if prismatic[i] else 3  # S_i = [axis; 0] or [0; axis]
            for j in range(3):
                Sqd[j] = axes[i, j] * qd[k, i]
                v[i, s + j] += Sqd[j]
                a[i, s + j] += axes[i, j] * qdd[k, i]
            # a_i += v_i × S_i qd_i  (motion cross product, [linear; angular])
            if prismatic[i]:
                _cross(v[i, 3:], Sqd, a[i, 0:3], 1.0)
            else:
                _cross(v[i, 0:3], Sqd, a[i, 0:3], 1.0)
                _cross(v[i, 3:], Sqd, a[i, 3:], 1.0)
            # f_i = I_i a_i + v_i ×* I_i v_i - f_ext_i
            _inertia_times(I[i], v[i], h)
            _inertia_times(I[i], a[i], f[i])
            for j in range(6):
                f[i, j] -= f_ext[0 if shared else k, i, j]
            _cross(v[i, 3:], h[0:3], f[i, 0:3], 1.0)
            _cross(v[i, 0:3], h[0:3], f[i, 3:], 1.0)
            _cross(v[i, 3:], h[3:], f[i, 3:], 1.0)
        for i in range(n - 1, -1, -1):
            s = 0 if prismatic[i] else 3
            tau[k, i] = axes[i, 0] * f[i, s] + axes[i, 1] * f[i, s + 1] + axes[i, 2] * f[i, s + 2]
            tau[k, i] += armature[i] * qdd[k, i]
            total += tau[k, i]
            if parents[i] >= 0:
                _force_to_parent(E[i], r[i], f[i], f[parents[i]])
    return total
