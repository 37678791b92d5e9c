"""Serial chains from Denavit-Hartenberg tables, standard or modified (Craig).

Standard DH (seed 002's arms; Spong): frame {i} in {i-1} is

    ⁱ⁻¹T_i = Rz(θ_i + q_i) Tz(d_i) Tx(a_i) Rx(α_i),

so joint i turns about z_{i-1}; the row's mass, centre of mass and inertia are in frame {i}.

Modified DH (seed 003's MANIPULATOR-H; Craig): row i holds α_{i-1}, a_{i-1}, θ_i, d_i and

    ⁱ⁻¹T_i = Rx(α_{i-1}) Tx(a_{i-1}) Rz(θ_i + q_i) Tz(d_i),

so joint i turns about z_i; the inertial data are in frame {i}. For a prismatic row, q_i adds
to d_i instead of θ_i.

Each row is a mapping with keys `a` [m], `alpha` [rad], `d` [m], `theta` (offset) [rad], and
optional `type` ('revolute' | 'prismatic'), `mass` [kg], `com` (3,) [m], `inertia` (3×3 or
[ixx, ixy, ixz, iyy, iyz, izz] about the com) [kg·m²], `name`, `effort`, `velocity`, `lower`,
`upper` (absent: no limit). Errors are `DhError`s naming the row; the physical checks shared
with URDF (mass, inertia, limits) are `description.check_inertial` and `check_joint`.
"""
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from rnea_controller.dynamics.description import Description, inertia_3x3, JointSpec, LinkSpec
from rnea_controller.dynamics.spatial import rotation_about
from rnea_controller.errors import DhError

X_AXIS, Z_AXIS = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
KEYS = {'a', 'alpha', 'd', 'theta', 'type', 'mass', 'com', 'inertia', 'name', 'effort',
        'velocity', 'lower', 'upper'}
DEFAULTS = {'a': 0.0, 'alpha': 0.0, 'd': 0.0, 'theta': 0.0, 'mass': 0.0, 'lower': -np.inf,
            'upper': np.inf, 'effort': np.inf, 'velocity': np.inf}


def transform(R: np.ndarray | None = None, p: ArrayLike | None = None) -> np.ndarray:
    """Homogeneous 4×4 transform from rotation R and translation p [m] (default: identity)."""
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def rot(axis: np.ndarray, angle: float) -> np.ndarray:
    """Homogeneous rotation of `angle` [rad] about unit `axis`."""
    return transform(rotation_about(axis, angle))


def trans(axis: np.ndarray, distance: float) -> np.ndarray:
    """Homogeneous translation of `distance` [m] along unit `axis`."""
    return transform(p=axis * distance)


def description_from_dh(rows: Sequence[dict], convention: str = 'standard',
                        name: str = 'dh_arm') -> Description:
    """A `Description` of the serial chain in `rows` (see the module docstring)."""
    if convention not in ('standard', 'modified'):
        raise DhError(f"DH convention '{convention}': expected 'standard' or 'modified'")
    if len(rows) == 0:
        raise DhError('DH table has no rows')
    links, joints = [LinkSpec('base')], []
    for i, row in enumerate(rows, start=1):
        row = _checked(row, i)
        before, after = _split(row, convention)
        joint_link = f'joint{i}_frame' if convention == 'standard' else f'link{i}'
        joints.append(_joint(row, i, links[-1].name if i == 1 else f'link{i - 1}',
                             joint_link, before))
        if convention == 'standard':
            links.append(LinkSpec(joint_link))
            joints.append(JointSpec(f'joint{i}_to_link{i}', 'fixed', joint_link, f'link{i}',
                                    after[:3, :3], after[:3, 3], np.zeros(3)))
        links.append(_link(row, i))
    return Description(name, tuple(links), tuple(joints), error=DhError)


def _split(row, convention):
    """(placement before the joint motion, fixed transform after it)."""
    theta, d = rot(Z_AXIS, row['theta']), trans(Z_AXIS, row['d'])
    a, alpha = trans(X_AXIS, row['a']), rot(X_AXIS, row['alpha'])
    if convention == 'standard':
        return theta @ d, a @ alpha
    return alpha @ a @ theta @ d, np.eye(4)


def _joint(row, i, parent, child, before):
    kind = row.get('type', 'revolute')
    if kind not in ('revolute', 'prismatic'):
        raise DhError(f"DH row {i}: type '{kind}' must be 'revolute' or 'prismatic'")
    return JointSpec(row.get('name', f'joint{i}'), kind, parent, child,
                     before[:3, :3], before[:3, 3], Z_AXIS.copy(),
                     row['lower'], row['upper'], row['effort'], row['velocity'],
                     where=f'DH row {i}')


def _link(row, i):
    inertia = inertia_3x3(row.get('inertia', np.zeros((3, 3))), f'DH row {i}', DhError)
    com = np.asarray(row.get('com', np.zeros(3)), dtype=float)
    if com.shape != (3,):
        raise DhError(f'DH row {i}: com has shape {com.shape}, expected (3,)')
    return LinkSpec(f'link{i}', row['mass'], com, inertia, f'DH row {i}')


def _checked(row, i):
    """The row with its defaults, numbers as floats; DhError for unknown keys or bad numbers."""
    unknown = set(row) - KEYS
    if unknown:
        raise DhError(f'DH row {i}: unknown keys {sorted(unknown)}; known: {sorted(KEYS)}')
    row = {**DEFAULTS, **row}
    for key in ('a', 'alpha', 'd', 'theta', 'mass', 'lower', 'upper', 'effort', 'velocity'):
        try:
            row[key] = float(row[key])
        except (TypeError, ValueError):
            raise DhError(f'DH row {i}: {key} = {row[key]!r} is not a number') from None
    for key in ('a', 'alpha', 'd', 'theta'):
        if not np.isfinite(row[key]):
            raise DhError(f'DH row {i}: {key} = {row[key]} is not finite')
    return row
