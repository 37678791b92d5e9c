"""A robot's description before it becomes a model: links, joints, and their checks.

Both sources of a model, URDF (`urdf.py`) and Denavit-Hartenberg tables (`dh.py`), produce a
`Description`; `model.py` turns any description into a `RobotModel`. The checks here are the
physical ones shared by both sources (mass, inertia, axis, limits); the tree checks are in
`tree_order`. A refusal is the source's error (`Description.error`: UrdfError or DhError) naming
the link or joint, the value and its place (URDF line or DH row).
"""
from dataclasses import dataclass, field
import warnings

import numpy as np
from numpy.typing import ArrayLike

from rnea_controller.dynamics.spatial import inertia_matrix
from rnea_controller.errors import DescriptionWarning, RneaControllerError, UrdfError

JOINT_TYPES = ('revolute', 'continuous', 'prismatic', 'fixed')
# [kg·m²] Tolerance of an inertia matrix's symmetry (CAD exports round their six parts).
INERTIA_TOLERANCE = 1e-6
# A principal moment below -(INERTIA_RELATIVE × the largest + INERTIA_FLOOR) is not round-off:
# the link has no positive kinetic energy. Relative to the link's own scale, as Allegro's links
# are 1e-6 kg·m² and legged robots' base links 3e-6 with moments of ±2e-22 (CAD round-off).
INERTIA_RELATIVE = 1e-9
INERTIA_FLOOR = 1e-12  # [kg·m²] 1 mg at 1 mm
# Beyond round-off but above -INERTIA_INVALID × the largest: a published model's error (Romeo's
# hip links: -5 %), loaded with a warning as Pinocchio loads it; below, refused (a negated
# moment, -100 %, is what a hostile or broken description has).
INERTIA_INVALID = 0.1
# Bounds of a plausible arm, far above any real one, so that the law cannot overflow:
MAX_LINK_MASS = 1e4  # [kg]
MAX_LENGTH = 1e3  # [m] centre of mass offsets and joint placements
MAX_PRINCIPAL_MOMENT = MAX_LINK_MASS * MAX_LENGTH**2  # [kg·m²]

ErrorType = type[RneaControllerError]


@dataclass(frozen=True)
class LinkSpec:
    """A rigid link: mass [kg], centre of mass [m] and inertia about it [kg·m²], in link axes."""

    name: str
    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    where: str = ''


@dataclass(frozen=True)
class Mimic:
    """URDF `<mimic joint multiplier offset>`: q = multiplier · q_joint + offset [rad or m]."""

    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class JointSpec:
    """A joint placing `child` in `parent` by (R, p) at q = 0, moving about/along unit `axis`."""

    name: str
    type: str
    parent: str
    child: str
    R: np.ndarray
    p: np.ndarray
    axis: np.ndarray
    lower: float = -np.inf
    upper: float = np.inf
    effort: float = np.inf
    velocity: float = np.inf
    mimic: Mimic | None = None
    where: str = ''
    damping: float = 0.0  # URDF <dynamics damping> [N·m·s/rad or N·s/m]
    friction: float = 0.0  # URDF <dynamics friction> [N·m or N]


@dataclass(frozen=True)
class Description:
    """Links and joints of one robot, in source order, plus the source text if any.

    `error` is the exception its checks raise: UrdfError for a URDF, DhError for a DH table.
    """

    name: str
    links: tuple
    joints: tuple
    source: str | None = None
    error: ErrorType = UrdfError


def here(kind: str, name: str, where: str) -> str:
    """Message prefix naming an element and its place: "joint 'elbow' (line 42)"."""
    return f"{kind} '{name}'" + (f' ({where})' if where else '')


def inertia_3x3(values: ArrayLike, what: str, error: ErrorType = UrdfError) -> np.ndarray:
    """Symmetric 3×3 inertia [kg·m²] from a 3×3 matrix or [ixx, ixy, ixz, iyy, iyz, izz].

    Raises `error` naming `what` when the shape is neither or the matrix is not symmetric
    (within round-off: the mean of it and its transpose is returned).
    """
    array = np.asarray(values, dtype=float)
    if array.shape == (6,):
        array = inertia_matrix(*array)
    if array.shape != (3, 3):
        raise error(f'{what}: inertia has shape {array.shape}, expected 3×3 or its 6 parts '
                    '[ixx, ixy, ixz, iyy, iyz, izz] [kg·m²]')
    if not np.allclose(array, array.T, atol=INERTIA_TOLERANCE):
        raise error(f'{what}: inertia {array.tolist()} kg·m² is not symmetric')
    return 0.5 * (array + array.T)


def check_inertial(link: LinkSpec, error: ErrorType = UrdfError, on_base: bool = False) -> None:
    """Raise `error` unless the link's mass, centre of mass and inertia are usable numbers;
    warn (DescriptionWarning) where they are usable but no rigid body has them.

    Refused: a mass m not finite, negative or above MAX_LINK_MASS [kg] (0: a massless frame
    link); a centre of mass not finite or beyond MAX_LENGTH [m]; an inertia about it not finite,
    above MAX_PRINCIPAL_MOMENT [kg·m²], or not positive semi-definite beyond what a published
    model has: a principal moment below -INERTIA_INVALID × the largest. Warned: a principal
    moment below -(INERTIA_RELATIVE × the largest + INERTIA_FLOOR), round-off, but not that far;
    principal moments I1 ≤ I2 ≤ I3 with I3 > I1 + I2 beyond that tolerance (the triangle
    inequality, which any real mass distribution obeys; textbooks' diag(0.2, 0.2, 0.8) breaks
    it); and, on a link of the fixed base (`on_base`: its inertia never enters the dynamics),
    any inertia not positive semi-definite. The controller also checks that the joint-space
    inertia M(q0) is positive definite (`control.law.validate_parameters`).
    """
    at = here('link', link.name, link.where)
    if not np.isfinite(link.mass) or link.mass < 0.0:
        raise error(f'{at}: mass {link.mass} kg must be finite and not negative')
    if link.mass > MAX_LINK_MASS:
        raise error(f'{at}: mass {link.mass:g} kg is above the bound of {MAX_LINK_MASS:g} kg')
    if not (np.all(np.isfinite(link.com)) and np.all(np.isfinite(link.inertia))):
        raise error(f'{at}: centre of mass or inertia has non-finite values')
    if np.linalg.norm(link.com) > MAX_LENGTH:
        raise error(f'{at}: centre of mass {_text(link.com)} m is farther than '
                    f'{MAX_LENGTH:g} m from the link origin')
    _check_principal_moments(at, np.linalg.eigvalsh(link.inertia), error, on_base)


def _check_principal_moments(at, moments, error, on_base):
    """Bounded and positive semi-definite, else refused; the triangle inequality, else warned:
    see `check_inertial`."""
    shown = f'(principal moments {_text(moments)} kg·m²)'
    if moments[2] > MAX_PRINCIPAL_MOMENT:
        raise error(f'{at}: inertia is above the bound of {MAX_PRINCIPAL_MOMENT:g} kg·m² '
                    f'{shown}')
    largest = np.max(np.abs(moments))
    tolerance = INERTIA_RELATIVE * largest + INERTIA_FLOOR
    if moments[0] < -tolerance:
        if on_base:
            return warn(f'{at}: inertia is not positive semi-definite {shown}; loaded, as a '
                        'link of the fixed base never enters the dynamics')
        if moments[0] < -INERTIA_INVALID * largest:
            raise error(f'{at}: inertia is not positive semi-definite {shown}')
        return warn(f'{at}: inertia is not positive semi-definite {shown}, which no rigid body '
                    f'is; loaded as given (its negative moment is within {INERTIA_INVALID:.0%} '
                    'of the largest, as published models have: fix the URDF)')
    if moments[2] > moments[0] + moments[1] + tolerance:
        warn(f'{at}: inertia breaks the triangle inequality {shown}: the largest exceeds the '
              'sum of the other two, which no rigid body can; loaded as given')


def warn(message: str) -> None:
    """A DescriptionWarning: the description loads, but `message` says what is implausible."""
    warnings.warn(message, DescriptionWarning, stacklevel=2)


def check_joint(joint: JointSpec, error: ErrorType = UrdfError) -> None:
    """Raise `error` unless a moving joint's placement and limits are usable.

    Placement within MAX_LENGTH [m]; effort [N·m or N] and velocity [rad/s or m/s] limits
    positive (inf: absent, no limit; the URDF reader takes 0 as absent); lower ≤ upper
    position limits [rad or m].
    """
    at = here('joint', joint.name, joint.where)
    if not np.linalg.norm(joint.p) <= MAX_LENGTH:
        raise error(f'{at}: origin {_text(joint.p)} m is farther than {MAX_LENGTH:g} m '
                    'from its parent')
    for kind, value, unit in (('effort', joint.effort, 'N·m or N'),
                              ('velocity', joint.velocity, 'rad/s or m/s')):
        if not value > 0.0:
            raise error(f'{at}: {kind} limit {value} {unit} must be positive '
                        '(leave it out, or write 0 in a URDF, for no limit)')
    if not joint.lower <= joint.upper:
        raise error(f'{at}: lower position limit {joint.lower} is above the upper limit '
                    f'{joint.upper}')


def unit_axis(joint_name: str, axis: ArrayLike, where: str,
              error: ErrorType = UrdfError) -> np.ndarray:
    """The joint axis normalised to unit length; a zero-length axis is an error."""
    axis = np.asarray(axis, dtype=float)
    norm = np.linalg.norm(axis)
    if not np.isfinite(norm) or norm < 1e-12:
        raise error(f'{here("joint", joint_name, where)}: axis '
                    f'({", ".join(f"{x:g}" for x in axis)}) has zero length')
    return axis / norm


def _text(values):
    return np.array2string(np.asarray(values), precision=6, separator=', ')


def tree_order(description: Description) -> tuple[str, list]:
    """Joints in depth-first order from the single root link, children in source order.

    Returns (root link name, ordered joints). Raises `description.error` for unknown links, a
    link with two parents, no root, several roots, or a cycle.
    """
    error = description.error
    links = {link.name for link in description.links}
    parent_joint = {}
    for joint in description.joints:
        for role, link in (('parent', joint.parent), ('child', joint.child)):
            if link not in links:
                raise error(f'{here("joint", joint.name, joint.where)}: {role} link '
                            f"'{link}' is not defined")
        if joint.child in parent_joint:
            raise error(f"link '{joint.child}' has two parent joints: "
                        f"'{parent_joint[joint.child].name}' and '{joint.name}'")
        parent_joint[joint.child] = joint
    roots = [link.name for link in description.links if link.name not in parent_joint]
    if len(roots) > 1:
        raise error(f'robot has {len(roots)} root links (links with no parent joint): '
                    f'{", ".join(roots)}; a robot must be one tree')
    if not roots:
        raise error('robot has no root link: every link has a parent joint (a cycle)')
    ordered = _depth_first(roots[0], description.joints)
    if len(ordered) != len(description.joints):
        unreached = sorted({j.child for j in description.joints} - {j.child for j in ordered})
        raise error(f'kinematic cycle: links {", ".join(unreached)} '
                    f"are not reachable from the root '{roots[0]}'")
    return roots[0], ordered


def _depth_first(root, joints):
    """Joints below link `root`, depth first, children in source order."""
    children = {}
    for joint in joints:
        children.setdefault(joint.parent, []).append(joint)
    ordered, stack = [], list(reversed(children.get(root, [])))
    while stack:
        joint = stack.pop()
        ordered.append(joint)
        stack.extend(reversed(children.get(joint.child, [])))
    return ordered
