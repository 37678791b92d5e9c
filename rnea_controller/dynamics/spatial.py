"""Spatial (6D) vector algebra: Plücker transforms, cross products, rigid-body inertia.

Follows Featherstone, *Rigid Body Dynamics Algorithms* (2008), chapter 2, with one change of
convention: spatial vectors are ordered **[linear; angular]**, as in Pinocchio and as ROS
orders wrenches (geometry_msgs/Wrench: force, then torque). So a motion vector is v = [v_O; ω]
(velocity of the frame origin O, angular velocity) and a force vector is f = [f; n_O] (force,
moment about O).

A frame B placed in frame A by rotation R (columns: B's axes in A) and origin p (in A) has the
motion transform from A coordinates to B coordinates

    ᴮX_A = [[E, -E [p×]],      with E = Rᵀ,
            [0,  E     ]]

and forces transform from B back to A by ᴮX_Aᵀ (Featherstone eq. 2.26, reordered).
"""
import numpy as np
from numpy.typing import ArrayLike


def skew(p: ArrayLike) -> np.ndarray:
    """Matrix [p×] with [p×] @ x = p × x."""
    return np.array([[0.0, -p[2], p[1]],
                     [p[2], 0.0, -p[0]],
                     [-p[1], p[0], 0.0]])


def rotation_about(axis: ArrayLike, angle: float) -> np.ndarray:
    """Rotation matrix of `angle` [rad] about the unit vector `axis` (Rodrigues' formula)."""
    K = skew(axis)
    return np.eye(3) + np.sin(angle) * K + (1.0 - np.cos(angle)) * (K @ K)


def rpy_matrix(rpy: ArrayLike) -> np.ndarray:
    """URDF roll-pitch-yaw [rad] to a rotation matrix: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    x = rotation_about((1.0, 0.0, 0.0), rpy[0])
    y = rotation_about((0.0, 1.0, 0.0), rpy[1])
    z = rotation_about((0.0, 0.0, 1.0), rpy[2])
    return z @ y @ x


def plucker(R: np.ndarray, p: ArrayLike) -> np.ndarray:
    """Motion transform ᴮX_A (6×6) for frame B placed in A by rotation R and origin p [m]."""
    E = R.T
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[:3, 3:] = -E @ skew(p)
    X[3:, 3:] = E
    return X


def crm(v: np.ndarray) -> np.ndarray:
    """Motion cross-product matrix: crm(v) @ m = v × m = [ω×m_v + v×m_ω; ω×m_ω]."""
    C = np.zeros((6, 6))
    C[:3, :3] = skew(v[3:])
    C[:3, 3:] = skew(v[:3])
    C[3:, 3:] = skew(v[3:])
    return C


def crf(v: np.ndarray) -> np.ndarray:
    """Force cross-product matrix: crf(v) @ f = v ×* f = -crm(v)ᵀ @ f."""
    return -crm(v).T


def inertia_matrix(ixx: float, ixy: float, ixz: float, iyy: float, iyz: float,
                   izz: float) -> np.ndarray:
    """Symmetric 3×3 rotational inertia [kg·m²] from its six parts, as URDF's <inertia> gives them.

    >>> inertia_matrix(1.0, 0.1, 0.0, 2.0, 0.0, 3.0)[0].tolist()
    [1.0, 0.1, 0.0]
    """
    return np.array([[ixx, ixy, ixz],
                     [ixy, iyy, iyz],
                     [ixz, iyz, izz]], dtype=float)


def spatial_inertia(mass: float, com: ArrayLike, inertia_com: ArrayLike) -> np.ndarray:
    """Spatial inertia (6×6) about the frame origin.

    Args:
        mass: m [kg]
        com: c, centre of mass in this frame [m]
        inertia_com: I_c, rotational inertia about the centre of mass, this frame's axes [kg·m²]

    Returns:
        I = [[m 1, -m [c×]], [m [c×], I_c - m [c×][c×]]], so that I @ [v; ω] = [p; L_O].
    """
    C = skew(com)
    I = np.zeros((6, 6))
    I[:3, :3] = mass * np.eye(3)
    I[:3, 3:] = -mass * C
    I[3:, :3] = mass * C
    I[3:, 3:] = np.asarray(inertia_com, dtype=float) - mass * C @ C
    return I


def transform_inertia(I: np.ndarray, R: np.ndarray, p: ArrayLike) -> np.ndarray:
    """Inertia given in frame B, expressed in frame A, where B is placed in A by (R, p).

    I_A = ᴮX_Aᵀ I_B ᴮX_A  (Featherstone eq. 2.66).
    """
    X = plucker(R, p)
    return X.T @ I @ X
