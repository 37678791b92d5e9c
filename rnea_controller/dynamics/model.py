"""The robot model: an immutable kinematic tree with spatial inertias, indexed by joint.

Body i is the link moved by actuated joint i; links attached by fixed (or locked) joints are
merged into the body they hang from, their inertia moved onto it. λ(i) = `parents[i]` is the
body that joint i hangs from (-1: the fixed base), with λ(i) < i (Featherstone 2008, §4.1.2).
A URDF mimic joint is an independent joint of the model, as in Pinocchio's default; the model
records its relation q_i = multiplier · q_leader + offset for states that do not carry it.
Joint i is placed in body λ(i) at q = 0 by rotation `R_tree[i]` and origin `p_tree[i]`, and
moves about (revolute) or along (prismatic) the unit vector `axes[i]` of its own frame, so

    ⁱX_λ(i)(q_i) = X_J(q_i) X_T(i),   S_i = [0; axis] (revolute) or [axis; 0] (prismatic).

Spatial vectors are [linear; angular] (see `spatial.py`).
"""
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from rnea_controller.dynamics import spatial
from rnea_controller.dynamics.checks import finite_vector
from rnea_controller.dynamics.description import (
    check_inertial,
    check_joint,
    Description,
    here,
    inertia_3x3,
    LinkSpec,
    tree_order,
    warn,
)
from rnea_controller.errors import DimensionError, ModelError, UrdfError

STANDARD_GRAVITY = (0.0, 0.0, -9.81)


def default_urdf_path() -> Path:
    """Path of the arm URDF bundled with the package (the default model everywhere)."""
    return Path(__file__).resolve().parents[1] / 'urdf' / 'arm.urdf'


def _frozen(array, dtype=float):
    array = np.array(array, dtype=dtype)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class RobotModel:
    """Immutable kinematic tree of a fixed-base robot, as read from URDF or a DH table.

    Attributes (n actuated joints, in model order: depth-first from the root):
        joint_names, joint_types: tuples of n names and URDF types
        link_names: every link of the source, the names `f_ext` and `with_payload` accept
        parents: λ(i), shape (n,), -1 for the base
        axes, R_tree, p_tree: joint axes (n, 3), placements (n, 3, 3) and (n, 3) [m]
        inertias: spatial inertia of each body about its frame origin, (n, 6, 6) [kg, kg·m, kg·m²]
        effort_limits [N·m or N], velocity_limits [rad/s or m/s]: (n,), inf where absent
        position_limits: (n, 2) lower and upper [rad or m], ±inf where absent
        gravity: (3,) in the base frame [m/s²]
        mimic: (follower index, leader index, multiplier, offset) of each mimic joint whose
            leader is a joint of the model, leaders before their followers (docs/dynamics.md)
        urdf: the source URDF text, or None
        armature: (n,) rotor inertia reflected through the gear [kg·m² or kg], added to the
            diagonal of M(q) (Pinocchio's `model.armature`, MuJoCo's `armature`); zeros unless
            set by `with_armature` (a URDF cannot state it)
        damping, friction: (n,) the URDF's `<dynamics damping friction>` [N·m·s/rad, N·m]
            (Pinocchio's `model.damping`, `model.friction`), zeros where absent; the controller
            takes them as its friction defaults, RNEA ignores them
    """

    name: str
    joint_names: tuple
    joint_types: tuple
    link_names: tuple
    parents: np.ndarray
    axes: np.ndarray
    R_tree: np.ndarray
    p_tree: np.ndarray
    inertias: np.ndarray
    effort_limits: np.ndarray
    velocity_limits: np.ndarray
    position_limits: np.ndarray
    gravity: np.ndarray = field(default_factory=lambda: _frozen(STANDARD_GRAVITY))
    mimic: tuple = ()
    urdf: str | None = None
    link_frames: dict = field(default_factory=dict, repr=False)
    armature: np.ndarray | None = None
    damping: np.ndarray | None = None
    friction: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ('armature', 'damping', 'friction'):
            if getattr(self, name) is None:
                object.__setattr__(self, name, _frozen(np.zeros(self.n)))
        # every array read-only, also one given to `dataclasses.replace` (a model of identified
        # links): numba types a read-only array apart from a writable one, and the kernels the
        # cache holds (`rnea_controller.warm`) take the read-only one; a writable array would
        # compile the law anew at the node's start (~30 s)
        for name, value in vars(self).items():
            if isinstance(value, np.ndarray) and value.flags.writeable:
                object.__setattr__(self, name, _frozen(value, value.dtype))

    @property
    def n(self) -> int:
        """Number of actuated joints (nq = nv = n)."""
        return len(self.joint_names)

    @property
    def prismatic(self) -> np.ndarray:
        """Boolean mask (n,): True where the joint is prismatic."""
        return np.array([t == 'prismatic' for t in self.joint_types])

    @property
    def S(self) -> np.ndarray:
        """Motion subspace vectors S_i, shape (n, 6): [0; axis] revolute, [axis; 0] prismatic."""
        S = np.zeros((self.n, 6))
        for i, axis in enumerate(self.axes):
            S[i, :3] = axis if self.joint_types[i] == 'prismatic' else 0.0
            S[i, 3:] = 0.0 if self.joint_types[i] == 'prismatic' else axis
        return S

    def joint_index(self, name: str) -> int:
        """Index of joint `name` in model order; ModelError if unknown."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ModelError(f"unknown joint '{name}'; the model's joints are "
                             f'{", ".join(self.joint_names)}') from None

    def link_frame(self, link: str) -> tuple[int, np.ndarray, np.ndarray]:
        """(body index, R, p): where link `link` sits in its body (-1 = the fixed base)."""
        if link not in self.link_frames:
            raise ModelError(f"unknown link '{link}'; the model's links are "
                             f'{", ".join(self.link_names)}')
        return self.link_frames[link]

    # --- construction -------------------------------------------------------------------

    @classmethod
    def from_urdf_string(cls, xml: str, *,
                         locked_joints: Iterable[str] | dict | None = None) -> 'RobotModel':
        """Model from URDF text. `locked_joints`: names (locked at 0) or {name: value}."""
        from rnea_controller.dynamics.urdf import parse_urdf
        return cls.from_description(parse_urdf(xml), locked_joints=locked_joints)

    @classmethod
    def from_urdf_file(cls, path: str | Path, *,
                       locked_joints: Iterable[str] | dict | None = None) -> 'RobotModel':
        """Model from a URDF file; see `from_urdf_string`."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as error:
            raise UrdfError(f'cannot read URDF file {path}: {error.strerror}') from None
        try:
            return cls.from_urdf_string(text, locked_joints=locked_joints)
        except UrdfError as error:
            raise UrdfError(f'{path}: {error}') from None

    @classmethod
    def from_dh(cls, rows: Sequence[dict], convention: str = 'standard', *,
                name: str = 'dh_arm') -> 'RobotModel':
        """Serial chain from a Denavit-Hartenberg table; see `dh.description_from_dh`."""
        from rnea_controller.dynamics.dh import description_from_dh
        return cls.from_description(description_from_dh(rows, convention, name))

    @classmethod
    def from_description(cls, description: Description, *,
                         locked_joints: Iterable[str] | dict | None = None) -> 'RobotModel':
        """Build the tree: order joints, merge fixed and locked joints, move inertias.

        Every link's inertial data and every actuated joint's placement and limits are checked
        first (`description.check_inertial`, `check_joint`): a refusal is `description.error`.
        """
        root, ordered = tree_order(description)
        error = description.error
        locked = _locked_values(locked_joints, ordered, error)
        frames = {root: (-1, np.eye(3), np.zeros(3))}
        joints = []
        for joint in ordered:
            body, R_b, p_b = frames[joint.parent]
            R_o, p_o = R_b @ joint.R, R_b @ joint.p + p_b
            if joint.type == 'fixed' or joint.name in locked:
                R_j, p_j = joint_motion(joint.type, joint.axis, locked.get(joint.name, 0.0))
                frames[joint.child] = (body, R_o @ R_j, R_o @ p_j + p_o)
                continue
            check_joint(joint, error)
            frames[joint.child] = (len(joints), np.eye(3), np.zeros(3))
            joints.append((joint, body, R_o, p_o))
        if not joints:
            raise error(f"robot '{description.name}' has no actuated joint")
        inertias = np.zeros((len(joints), 6, 6))
        for link in description.links:
            check_inertial(link, error, on_base=frames[link.name][0] < 0)
            _add_link_inertia(inertias, frames[link.name], link)
        model = cls._from_parts(description, joints, inertias, frames)
        return replace(model, mimic=_mimic_relations(ordered, model.joint_names, error))

    @classmethod
    def _from_parts(cls, description, joints, inertias, frames):
        spec = [j for j, *_ in joints]
        return cls(
            name=description.name,
            joint_names=tuple(j.name for j in spec),
            joint_types=tuple(j.type for j in spec),
            link_names=tuple(link.name for link in description.links),
            parents=_frozen([body for _, body, _, _ in joints], dtype=np.int64),
            axes=_frozen([j.axis for j in spec]),
            R_tree=_frozen([R for *_, R, _ in joints]),
            p_tree=_frozen([p for *_, p in joints]),
            inertias=_frozen(inertias),
            effort_limits=_frozen([j.effort for j in spec]),
            velocity_limits=_frozen([j.velocity for j in spec]),
            position_limits=_frozen([[j.lower, j.upper] for j in spec]),
            urdf=description.source,
            link_frames=frames,
            damping=_frozen([j.damping for j in spec]),
            friction=_frozen([j.friction for j in spec]),
        )

    # --- variations ---------------------------------------------------------------------

    def with_payload(self, link: str, mass: float, com: ArrayLike = (0.0, 0.0, 0.0),
                     inertia: ArrayLike | None = None) -> 'RobotModel':
        """New model with a rigid payload fixed to `link`.

        Args:
            link: name of the link carrying it
            mass: [kg], ≥ 0
            com: its centre of mass in the link frame [m]
            inertia: 3×3 or [ixx, ixy, ixz, iyy, iyz, izz] about its centre of mass, link axes
                [kg·m²] (default: a point mass)
        Raises ModelError (DimensionError for a com or inertia of the wrong shape) for a payload
        no rigid body can be, with the bounds of `description.check_inertial`.
        """
        body, R, p = self.link_frame(link)
        if body < 0:
            raise ModelError(f"link '{link}' is part of the fixed base: a payload there "
                             'loads no joint')
        name = f'payload on {link}'
        payload = LinkSpec(name, float(mass), finite_vector(com, 3, 'payload com'),
                           np.zeros((3, 3)) if inertia is None else inertia_3x3(
                               inertia, name, DimensionError))
        check_inertial(payload, ModelError)
        inertias = np.array(self.inertias)
        _add_link_inertia(inertias, (body, R, p), payload)
        return replace(self, inertias=_frozen(inertias))

    def with_armature(self, armature: ArrayLike) -> 'RobotModel':
        """New model with rotor inertias `armature` (n,) [kg·m² or kg], each finite, ≥ 0."""
        armature = finite_vector(armature, self.n, 'armature')
        if np.any(armature < 0):
            raise ModelError(f'armature {armature.tolist()} must not be negative [kg·m²]')
        return replace(self, armature=_frozen(armature))

    def with_gravity(self, gravity: ArrayLike) -> 'RobotModel':
        """New model with gravity `gravity` (3,) in the base frame [m/s²]."""
        return replace(self, gravity=_frozen(finite_vector(gravity, 3, 'gravity')))

    def __repr__(self) -> str:
        return (f'RobotModel({self.name!r}, {self.n} joints: {", ".join(self.joint_names)}; '
                f'parents {self.parents.tolist()})')


def joint_motion(kind: str, axis: ArrayLike, q: float) -> tuple[np.ndarray, np.ndarray]:
    """(R, p) of a joint's child frame in its joint frame at position q [rad or m]."""
    if kind == 'prismatic':
        return np.eye(3), np.asarray(axis) * q
    if kind in ('revolute', 'continuous'):
        return spatial.rotation_about(axis, q), np.zeros(3)
    return np.eye(3), np.zeros(3)


def _add_link_inertia(inertias, frame, link):
    body, R, p = frame
    if body >= 0:
        I_link = spatial.spatial_inertia(link.mass, link.com, link.inertia)
        inertias[body] += spatial.transform_inertia(I_link, R, p)


def _mimic_relations(ordered, names, error):
    """RobotModel.mimic: each model joint mimicking a model joint, leaders before followers.

    A mimic of a locked or fixed joint has no relation (its state, if absent, is 0), nor has
    one of an unknown joint (with a DescriptionWarning). Raises `error` for a cycle.
    """
    followers = _mimic_followers(ordered, names)
    relations, resolved = [], set(names) - set(followers)
    while followers:
        ready = [j for j in followers.values() if j.mimic.joint in resolved]
        if not ready:
            raise error('mimic joints mimic one another in a cycle: ' + ', '.join(
                here('joint', j.name, j.where) for j in followers.values()))
        for joint in ready:
            relations.append((names.index(joint.name), names.index(joint.mimic.joint),
                              float(joint.mimic.multiplier), float(joint.mimic.offset)))
            resolved.add(joint.name)
            del followers[joint.name]
    return tuple(relations)


def _mimic_followers(ordered, names):
    """{name: JointSpec} of the model's joints that mimic another joint of the model."""
    known = {j.name for j in ordered}
    followers = {}
    for joint in ordered:
        if joint.mimic is None or joint.name not in names:
            continue
        if joint.mimic.joint not in known:
            warn(f'{here("joint", joint.name, joint.where)}: mimics joint '
                 f"'{joint.mimic.joint}', which is not a joint of the robot: it is independent")
        elif joint.mimic.joint in names:
            followers[joint.name] = joint
    return followers


def _locked_values(locked_joints, ordered, error):
    """{name: value [rad or m]} of the joints to lock; raise `error` for unknown or non-finite."""
    if locked_joints is None:
        return {}
    if not isinstance(locked_joints, dict):
        locked_joints = {name: 0.0 for name in locked_joints}
    known = {j.name for j in ordered}
    for name, value in locked_joints.items():
        if name not in known:
            raise error(f"locked joint '{name}' is not a joint of the robot")
        if not np.isfinite(value):
            raise error(f"locked joint '{name}': value {value} is not finite")
    return {name: float(value) for name, value in locked_joints.items()}
