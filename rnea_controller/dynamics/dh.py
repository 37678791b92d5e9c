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
`upper`.
"""
import numpy as np

from rnea_controller.dynamics.description import Description, JointSpec, LinkSpec
from rnea_controller.dynamics.spatial import rotation_about
from rnea_controller.errors import UrdfError

X_AXIS, Z_AXIS = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
KEYS = {'a', 'alpha', 'd', 'theta', 'type', 'mass', 'com', 'inertia', 'name', 'effort',
        'velocity', 'lower', 'upper'}


def transform(R=None, p=None):
    """Homogeneous 4×4 transform from rotation R and translation p [m] (default: identity)."""
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def rot(axis, angle):
    return transform(rotation_about(axis, angle))


def trans(axis, distance):
    return transform(p=axis * distance)


def description_from_dh(rows, convention='standard', name='dh_arm'):
    """A `Description` of the serial chain in `rows` (see the module docstring)."""
    if convention not in ('standard', 'modified'):
        raise UrdfError(f"DH convention '{convention}': expected 'standard' or 'modified'")
    if len(rows) == 0:
        raise UrdfError('DH table has no rows')
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
    return Description(name, tuple(links), tuple(joints))


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
        raise UrdfError(f"DH row {i}: type '{kind}' must be 'revolute' or 'prismatic'")
    return JointSpec(row.get('name', f'joint{i}'), kind, parent, child,
                     before[:3, :3], before[:3, 3], Z_AXIS.copy(),
                     float(row.get('lower', -np.inf)), float(row.get('upper', np.inf)),
                     float(row.get('effort', np.inf)), float(row.get('velocity', np.inf)),
                     where=f'DH row {i}')


def _link(row, i):
    inertia = np.asarray(row.get('inertia', np.zeros((3, 3))), dtype=float)
    if inertia.shape == (6,):
        ixx, ixy, ixz, iyy, iyz, izz = inertia
        inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    if inertia.shape != (3, 3):
        raise UrdfError(f'DH row {i}: inertia has shape {inertia.shape}, expected 3×3 or 6')
    com = np.asarray(row.get('com', np.zeros(3)), dtype=float)
    if com.shape != (3,):
        raise UrdfError(f'DH row {i}: com has shape {com.shape}, expected (3,)')
    return LinkSpec(f'link{i}', float(row.get('mass', 0.0)), com, inertia, f'DH row {i}')


def _checked(row, i):
    unknown = set(row) - KEYS
    if unknown:
        raise UrdfError(f'DH row {i}: unknown keys {sorted(unknown)}; known: {sorted(KEYS)}')
    for key in ('a', 'alpha', 'd', 'theta'):
        value = row.get(key, 0.0)
        if not np.isfinite(value):
            raise UrdfError(f'DH row {i}: {key} = {value} is not finite')
    return {'a': 0.0, 'alpha': 0.0, 'd': 0.0, 'theta': 0.0, **row}
