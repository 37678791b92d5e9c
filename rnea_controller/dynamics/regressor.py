"""The joint-torque regressor of RNEA: tau = Y(q, qd, qdd) θ, linear in the inertial parameters.

Source: Atkeson, An & Hollerbach (1986); Featherstone, *Rigid Body Dynamics Algorithms* (2008),
Table 5.1 and §9.4; the seeds' RNEA (shared/seeds/000). Spatial vectors are [linear; angular].

Each body's inertia about its frame origin is linear in its 10 parameters, in Pinocchio's order
(`pin.Inertia.toDynamicParameters`):

    θ_i = (m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz),   h = m c,
    I_i = [[m 1, -[h×]], [[h×], I_O]],   I_O the rotational inertia about the origin.

So is the RNEA body force: with the forward pass's v_i = [v; ω] and a_i = [a; ω̇],

    f_i = I_i a_i + v_i ×* I_i v_i = A(v_i, a_i) θ_i,

    A = [[ â,  [ω̇×] + [ω×][ω×],  0               ],      â = a + ω × v (the origin's
         [ 0,  -[â×],             L(ω̇) + [ω×] L(ω)]]      classical acceleration)

where L(x) ι = I_O x for ι = (I_xx, I_xy, I_yy, I_xz, I_yz, I_zz). The backward pass
f_λ(i) += X_iᵀ f_i carries each body's columns to its ancestors, so the columns of body j on
joint i (i = j or an ancestor of j) are

    Y[i, j] = S_iᵀ ʲX_iᵀ A(v_j, a_j),     ʲX_i = X_j X_λ(j) ... down to i,

zero otherwise. Armature (rotor inertia) is not in θ: RNEA adds armature_i qdd_i on its own.
Y θ(model) equals `rnea` of a model without armature; Pinocchio's
`computeJointTorqueRegressor` is the tests' oracle.
"""
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike

from rnea_controller.dynamics.model import RobotModel
from rnea_controller.dynamics.rnea import _base_motion, _states
from rnea_controller.dynamics.spatial import skew
from rnea_controller.errors import DimensionError, ModelError

PARAMETER_NAMES = ('m', 'h_x', 'h_y', 'h_z', 'I_xx', 'I_xy', 'I_yy', 'I_xz', 'I_yz', 'I_zz')
# (row, column) of I_O for ι = (I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)
_IOTA = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))


def inertia_of_parameters(theta: ArrayLike) -> np.ndarray:
    """Spatial inertia (6×6) about the body origin of its 10 parameters θ (Pinocchio's order).

    >>> inertia_of_parameters([2.0, 0, 0, 0.2, 1, 0, 1, 0, 0, 1])[0, 4]
    0.2
    """
    m, h, iota = theta[0], np.asarray(theta[1:4], float), theta[4:10]
    I = np.zeros((6, 6))
    I[:3, :3] = m * np.eye(3)
    I[:3, 3:] = -skew(h)
    I[3:, :3] = skew(h)
    for value, (r, c) in zip(iota, _IOTA):
        I[3 + r, 3 + c] = I[3 + c, 3 + r] = value
    return I


def parameters_of_inertia(I: np.ndarray) -> np.ndarray:
    """The 10 parameters θ (Pinocchio's order) of a spatial inertia about the body origin."""
    h = np.array([I[5, 1], I[3, 2], I[4, 0]])  # [h×] = I[3:, :3]
    return np.concatenate([[I[0, 0]], h, [I[3 + r, 3 + c] for r, c in _IOTA]])


def inertial_parameters(model: RobotModel) -> np.ndarray:
    """θ (10n,): every body's 10 parameters, bodies in model order [kg, kg·m, kg·m²]."""
    return np.concatenate([parameters_of_inertia(I) for I in model.inertias])


def body_link_names(model: RobotModel) -> tuple:
    """The link of each body (n,): the child link of joint i, whose frame is body i's frame.

    A body is that link with every link fixed to it (their inertias merged at load)."""
    names = [None] * model.n
    for link, (body, _, _) in model.link_frames.items():  # tree order: a joint's child first
        if body >= 0 and names[body] is None:
            names[body] = link
    return tuple(names)


def link_inertial(theta: ArrayLike) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass [kg], com c [m], inertia about the com I_c (3×3) [kg·m²]) of 10 parameters θ.

    I_c = I_O - m [c×][c×]ᵀ (parallel axis), c = h / m; m must be > 0.
    """
    m, h = float(theta[0]), np.asarray(theta[1:4], float)
    if not m > 0:
        raise ModelError(f'mass {m} kg: a body with parameters {list(theta)} has no com')
    c = h / m
    I_O = inertia_of_parameters(theta)[3:, 3:]
    C = skew(c)
    return m, c, I_O - m * C @ C.T


def with_inertial_parameters(model: RobotModel, theta: ArrayLike) -> RobotModel:
    """New model whose bodies have the inertial parameters θ (10n,); nothing else changes."""
    theta = np.asarray(theta, dtype=float)
    if theta.shape != (10 * model.n,):
        raise DimensionError(f'theta has shape {theta.shape}, but the model has {model.n} '
                             f'bodies: expected ({10 * model.n},)')
    inertias = np.array([inertia_of_parameters(t) for t in theta.reshape(model.n, 10)])
    inertias.setflags(write=False)
    return replace(model, inertias=inertias)


def body_regressor(v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """A(v, a) (N, 6, 10): f = I a + v ×* I v = A θ for N motions v, a (N, 6)."""
    N = len(v)
    w, wd = v[:, 3:], a[:, 3:]
    a_hat = a[:, :3] + np.cross(w, v[:, :3])
    A = np.zeros((N, 6, 10))
    A[:, :3, 0] = a_hat
    A[:, :3, 1:4] = _skew(wd) + _skew(w) @ _skew(w)
    A[:, 3:, 1:4] = -_skew(a_hat)
    A[:, 3:, 4:] = _iota_map(wd) + _skew(w) @ _iota_map(w)
    return A


def joint_torque_regressor(model: RobotModel, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, *,
                           gravity: ArrayLike | None = None) -> np.ndarray:
    """Y (n, 10n) with tau = Y θ (`inertial_parameters`) at one state (no armature).

    q, qd, qdd: (n,) [rad | m, /s, /s²]; gravity: (3,) [m/s²], default the model's.
    """
    q, qd, qdd, batched = _states(model, q, qd, qdd)
    if batched:
        raise DimensionError(f'q has shape {np.shape(q)}: one state (n,) here; '
                             'regressor_batch takes (N, n)')
    return regressor_batch(model, q, qd, qdd, gravity=gravity)[0]


def regressor_batch(model: RobotModel, Q: ArrayLike, QD: ArrayLike, QDD: ArrayLike, *,
                    gravity: ArrayLike | None = None) -> np.ndarray:
    """Y (N, n, 10n) of N states Q, QD, QDD (N, n): tau[k] = Y[k] θ (no armature)."""
    Q, QD, QDD, _ = _states(model, Q, QD, QDD)
    v0, a0 = _base_motion(model, gravity, None, None)
    X, v, a = _forward(model, Q, QD, QDD, v0, a0)
    N, n, S = len(Q), model.n, model.S
    Y = np.zeros((N, n, 10 * n))
    for j in range(n):
        F = body_regressor(v[j], a[j])  # (N, 6, 10): body j's force per unit parameter
        i, columns = j, slice(10 * j, 10 * j + 10)
        while i >= 0:
            Y[:, i, columns] = np.einsum('k,nkc->nc', S[i], F)  # tau_i = S_iᵀ f
            F = np.swapaxes(X[i], 1, 2) @ F  # f_λ(i) += X_iᵀ f_i
            i = model.parents[i]
    return Y


def _forward(model, Q, QD, QDD, v0, a0):
    """The RNEA forward pass for N states: X_i (n, N, 6, 6), v_i and a_i (n, N, 6)."""
    N, n, S = len(Q), model.n, model.S
    X, v, a = np.empty((n, N, 6, 6)), np.empty((n, N, 6)), np.empty((n, N, 6))
    for i in range(n):
        p = model.parents[i]
        X[i] = _joint_transforms(model, i, Q[:, i])
        v_p, a_p = (np.broadcast_to(v0, (N, 6)), np.broadcast_to(a0, (N, 6))) if p < 0 else (
            v[p], a[p])
        Sqd = S[i] * QD[:, i:i + 1]
        v[i] = _apply(X[i], v_p) + Sqd
        a[i] = _apply(X[i], a_p) + S[i] * QDD[:, i:i + 1] + _crm_apply(v[i], Sqd)
    return X, v, a


def _joint_transforms(model, i, q):
    """ⁱX_λ(i)(q) (N, 6, 6) for N positions q of joint i."""
    axis = model.axes[i]
    if model.joint_types[i] == 'prismatic':
        R_j = np.broadcast_to(np.eye(3), (len(q), 3, 3))
        p_j = q[:, None] * axis
    else:
        K = skew(axis)
        R_j = (np.eye(3) + np.sin(q)[:, None, None] * K
               + (1.0 - np.cos(q))[:, None, None] * (K @ K))
        p_j = np.zeros((len(q), 3))
    R = model.R_tree[i] @ R_j
    p = p_j @ model.R_tree[i].T + model.p_tree[i]
    E = np.swapaxes(R, 1, 2)
    X = np.zeros((len(q), 6, 6))
    X[:, :3, :3] = E
    X[:, :3, 3:] = -E @ _skew(p)
    X[:, 3:, 3:] = E
    return X


def _apply(X, m):
    """X m for (N, 6, 6) and (N, 6)."""
    return np.einsum('nij,nj->ni', X, m)


def _crm_apply(v, m):
    """v × m (motion cross product) for (N, 6) rows: [ω × m_v + v × m_ω; ω × m_ω]."""
    out = np.empty_like(m)
    out[:, :3] = np.cross(v[:, 3:], m[:, :3]) + np.cross(v[:, :3], m[:, 3:])
    out[:, 3:] = np.cross(v[:, 3:], m[:, 3:])
    return out


def _skew(x):
    """[x×] (N, 3, 3) of rows x (N, 3)."""
    S = np.zeros((len(x), 3, 3))
    S[:, 0, 1], S[:, 0, 2], S[:, 1, 2] = -x[:, 2], x[:, 1], -x[:, 0]
    S[:, 1, 0], S[:, 2, 0], S[:, 2, 1] = x[:, 2], -x[:, 1], x[:, 0]
    return S


def _iota_map(x):
    """L(x) (N, 3, 6) with L(x) ι = I_O x, ι = (I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)."""
    L = np.zeros((len(x), 3, 6))
    for column, (r, c) in enumerate(_IOTA):
        L[:, r, column] += x[:, c]
        if r != c:
            L[:, c, column] += x[:, r]
    return L
