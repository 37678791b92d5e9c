"""A robot's description before it becomes a model: links, joints, and their checks.

Both sources of a model, URDF (`urdf.py`) and Denavit-Hartenberg tables (`dh.py`), produce a
`Description`; `model.py` turns any description into a `RobotModel`. The checks here are the
physical ones shared by both sources (mass, inertia, axis); the tree checks are in `tree_order`.
"""
from dataclasses import dataclass, field

import numpy as np

from rnea_controller.errors import UrdfError

JOINT_TYPES = ('revolute', 'continuous', 'prismatic', 'fixed')
# [kg·m²] A negative inertia eigenvalue smaller than this is CAD round-off, not an error: real
# URDFs have them (Tiago's antenna links: -3.5e-8). 1e-6 kg·m² is 1 g at 3 cm.
INERTIA_TOLERANCE = 1e-6


@dataclass(frozen=True)
class LinkSpec:
    """A rigid link: mass [kg], centre of mass [m] and inertia about it [kg·m²], in link axes."""

    name: str
    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    where: str = ''


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
    mimic: str | None = None
    where: str = ''


@dataclass(frozen=True)
class Description:
    """Links and joints of one robot, in source order, plus the source text if any."""

    name: str
    links: tuple
    joints: tuple
    source: str | None = None


def here(kind, name, where):
    """Message prefix naming an element and its place: "joint 'elbow' (line 42)"."""
    return f"{kind} '{name}'" + (f' ({where})' if where else '')


def check_inertial(link):
    """Raise UrdfError unless mass ≥ 0 and the inertia is finite, symmetric and PSD."""
    at = here('link', link.name, link.where)
    if not np.isfinite(link.mass) or link.mass < 0.0:
        raise UrdfError(f'{at}: mass {link.mass} kg must be finite and not negative')
    if not (np.all(np.isfinite(link.com)) and np.all(np.isfinite(link.inertia))):
        raise UrdfError(f'{at}: centre of mass or inertia has non-finite values')
    eigenvalues = np.linalg.eigvalsh(link.inertia)
    if eigenvalues[0] < -INERTIA_TOLERANCE:
        raise UrdfError(f'{at}: inertia is not positive semi-definite '
                        f'(eigenvalues {np.array2string(eigenvalues, precision=6)} kg·m²)')


def unit_axis(joint_name, axis, where):
    """The joint axis normalised to unit length; a zero-length axis is an error."""
    axis = np.asarray(axis, dtype=float)
    norm = np.linalg.norm(axis)
    if not np.isfinite(norm) or norm < 1e-12:
        raise UrdfError(f'{here("joint", joint_name, where)}: axis '
                        f'({", ".join(f"{x:g}" for x in axis)}) has zero length')
    return axis / norm


def tree_order(description):
    """Joints in depth-first order from the single root link, children in source order.

    Returns (root link name, ordered joints). Raises UrdfError for unknown links, a link with two
    parents, no root, several roots, or a cycle.
    """
    links = {link.name for link in description.links}
    parent_joint = {}
    for joint in description.joints:
        for role, link in (('parent', joint.parent), ('child', joint.child)):
            if link not in links:
                raise UrdfError(f'{here("joint", joint.name, joint.where)}: {role} link '
                                f"'{link}' is not defined")
        if joint.child in parent_joint:
            raise UrdfError(f"link '{joint.child}' has two parent joints: "
                            f"'{parent_joint[joint.child].name}' and '{joint.name}'")
        parent_joint[joint.child] = joint
    roots = [link.name for link in description.links if link.name not in parent_joint]
    if len(roots) > 1:
        raise UrdfError(f'robot has {len(roots)} root links (links with no parent joint): '
                        f'{", ".join(roots)}; a robot must be one tree')
    if not roots:
        raise UrdfError('robot has no root link: every link has a parent joint (a cycle)')
    ordered = _depth_first(roots[0], description.joints)
    if len(ordered) != len(description.joints):
        unreached = sorted({j.child for j in description.joints} - {j.child for j in ordered})
        raise UrdfError(f'kinematic cycle: links {", ".join(unreached)} '
                        f"are not reachable from the root '{roots[0]}'")
    return roots[0], ordered


def _depth_first(root, joints):
    children = {}
    for joint in joints:
        children.setdefault(joint.parent, []).append(joint)
    ordered, stack = [], list(reversed(children.get(root, [])))
    while stack:
        joint = stack.pop()
        ordered.append(joint)
        stack.extend(reversed(children.get(joint.child, [])))
    return ordered
