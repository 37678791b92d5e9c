"""The simulated arm's physics: a MuJoCo model built from a URDF, plus what makes a plant real.

MuJoCo (PyPI `mujoco`), not this package's RNEA, integrates

    (M(q) + diag(armature)) qdd + h(q, qd) = tau + tau_friction(qd) - D qd

with a fixed time step (semi-implicit Euler, 1 ms by default). The URDF is loaded by MuJoCo's own
parser; with every realism option at zero the MuJoCo model is the URDF's rigid-body model exactly
(contacts are disabled, no armature, no damping), which `test/test_sim.py` checks against
Pinocchio. The realism options, all unknown to the controller's model:

- `armature`: rotor inertia reflected through the gear [kg·m²] (MuJoCo `armature`), added to
  the diagonal of M(q): geared arms have 0.07-0.2 kg·m² per joint (Menagerie's xArm7, FR3);
- `damping` D: viscous joint damping [N·m·s/rad] (MuJoCo `damping`);
- `friction`: Coulomb friction [N·m] (MuJoCo `frictionloss`, a soft dry-friction constraint);
- `payload_mass` [kg] at `payload_com` [m] in the frame of `payload_link` (default: the last
  link, the child of the last joint), added to the MuJoCo model as a welded body;
- `compensates_gravity`: the plant adds g(q) to every command itself, as Franka (libfranka,
  franka_ros2) and KUKA (FRI) torque interfaces do. g(q) is MuJoCo's (`qfrc_bias` at zero
  velocity) on the URDF's own model, without the hidden payload, as a robot knows only its own
  nominal model; never this package's RNEA;
- `link_errors` (seed, mass, inertia, com): every moving link's inertial parameters differ from
  the URDF's (`perturb_links`: mass and the principal second moments scaled by up to ±mass,
  ±inertia, the centre of mass moved by up to `com` [m]), physically consistent: a CAD model's
  guesses against the real arm. The controller is told the URDF; the plant is the perturbed one;
- sensor noise and a command delay, applied by `measure` and `CommandHold`;
- `obstacles`: boxes and spheres fixed in the world that the arm's links collide with (a
  collision of the arm: the world pushes back). The links' collision geometry is the URDF's
  primitive shapes (<collision>, else <visual>: box, cylinder, sphere), else, for a link with
  meshes or nothing, a capsule of radius `link_radius` from the link's frame to each child
  joint's origin (a sphere for the last link). Contacts are enabled only with obstacles, and
  only between a link and an obstacle (contype/conaffinity), never between links; the geoms
  carry no mass (the links' inertia stays the URDF's `<inertial>`). `contact_force` is the
  total force of the obstacles on the arm [N] (MuJoCo's constraint forces);
- `external` [N·m or N]: a generalized force of the world on the joints (a push, a collision),
  added to the command after the effort clamp: no drive limits it. The simulator node sets it
  for a time window (`push.*`).

This module never imports rclpy: the ROS node `rnea_controller.sim.node` is a thin layer on top.
"""
from collections import deque
from dataclasses import dataclass
import math
import xml.etree.ElementTree as ET

import mujoco
import numpy as np

from rnea_controller.dynamics.description import tree_order
from rnea_controller.dynamics.urdf import parse_urdf
from rnea_controller.errors import DimensionError, ParameterError, UrdfError

HINGE_OR_SLIDE = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


@dataclass(frozen=True)
class PlantOptions:
    """Plant parameters the controller does not know (all zero: the URDF exactly).

    timestep [s]; armature [kg·m²], damping [N·m·s/rad] and friction [N·m]: one value for
    every joint or one per joint (in plant joint order); payload_mass [kg]; payload_com [m] in
    payload_link's frame; payload_link: a URDF link name, or '' for the last link;
    clamp_effort: clip the applied effort to the URDF `<limit effort>` like a drive does;
    compensates_gravity: add the nominal g(q) to every command (the robot-side gravity
    compensation of Franka and KUKA FRI); link_errors: () for the URDF's links, or (seed,
    mass, inertia, com) for links perturbed by `perturb_links`; obstacles: boxes (centre [m],
    half sizes [m]) and spheres (centre, (radius,)) fixed in the world, in the base frame;
    link_radius [m]: see the module doc.
    """

    timestep: float = 0.001
    damping: tuple = (0.0,)
    friction: tuple = (0.0,)
    armature: tuple = (0.0,)
    payload_mass: float = 0.0
    payload_com: tuple = (0.0, 0.0, 0.0)
    payload_link: str = ''
    clamp_effort: bool = True
    compensates_gravity: bool = False
    link_errors: tuple = ()
    obstacles: tuple = ()  # (('box', (x, y, z), (hx, hy, hz)) | ('sphere', (x, y, z), (r,)))
    link_radius: float = 0.04  # [m] the capsules of links without primitive geometry


def _moving_links(root):
    """Names of the links that some non-fixed joint moves (a link fixed to the world is not)."""
    parent = {j.find('child').get('link'): (j.find('parent').get('link'), j.get('type'))
              for j in root.findall('joint')}
    moving = set()
    for link in parent:
        name = link
        while name in parent:
            name, kind = parent[name]
            if kind != 'fixed':
                moving.add(link)
                break
    return moving


def _perturbed_inertial(inertial, rng, mass, inertia, com):
    """Scale mass by 1 + U(±mass), the second moments Σ = tr(I)/2 1 - I about the centre
    of mass along their principal axes by 1 + U(±inertia) each (Σ stays positive
    semi-definite: the triangle inequality holds), move the com by a vector of length up to
    `com` [m] in a random direction, all in place on the <inertial> element."""
    element = inertial.find('mass')
    m = float(element.get('value')) * (1.0 + rng.uniform(-mass, mass))
    element.set('value', repr(m))
    origin = inertial.find('origin')
    if origin is None:
        origin = ET.SubElement(inertial, 'origin', xyz='0 0 0', rpy='0 0 0')
    c = np.array([float(x) for x in (origin.get('xyz') or '0 0 0').split()])
    direction = rng.normal(size=3)
    c = c + com * rng.uniform() * direction / np.linalg.norm(direction)
    origin.set('xyz', ' '.join(repr(float(x)) for x in c))
    element = inertial.find('inertia')
    names = ('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz')
    xx, xy, xz, yy, yz, zz = (float(element.get(k, 0.0)) for k in names)
    I = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    sigma, V = np.linalg.eigh(np.trace(I) / 2.0 * np.eye(3) - I)
    sigma = np.maximum(sigma, 0.0) * (1.0 + rng.uniform(-inertia, inertia, 3))
    Sigma = V @ np.diag(sigma) @ V.T
    I = np.trace(Sigma) * np.eye(3) - Sigma
    for name, value in zip(names, I[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]], strict=True):
        element.set(name, repr(float(value)))


def perturb_links(urdf_text, seed, mass=0.3, inertia=0.3, com=0.03):
    """The URDF with every moving link's <inertial> perturbed (seeded, `_perturbed_inertial`):
    the true arm when the URDF's inertias are CAD guesses. mass and inertia are relative
    (0.3: up to ±30 %), com [m]. Pinocchio and MuJoCo load the result."""
    try:
        root = ET.fromstring(urdf_text)
    except ET.ParseError as error:
        raise UrdfError(f'the URDF is not well-formed XML: {error}') from error
    for value, what in ((mass, 'mass'), (inertia, 'inertia'), (com, 'com')):
        if not (math.isfinite(value) and 0.0 <= value < (1.0 if what != 'com' else math.inf)):
            raise ParameterError(f'link error {what} must be finite, >= 0 (and < 1 for a '
                                 f'relative error), got {value}')
    rng = np.random.default_rng(seed)
    moving = _moving_links(root)
    for link in root.findall('link'):
        inertial = link.find('inertial')
        has_mass = inertial is not None and inertial.find('mass') is not None
        if link.get('name') in moving and has_mass:
            _perturbed_inertial(inertial, rng, mass, inertia, com)
    return ET.tostring(root, encoding='unicode')


def urdf_effort_limits(urdf_text):
    """{joint name: effort limit [N·m or N]} from the URDF's `<limit effort>` (inf if absent)."""
    root = ET.fromstring(urdf_text)
    limits = {}
    for joint in root.findall('joint'):
        limit = joint.find('limit')
        effort = limit.get('effort') if limit is not None else None
        limits[joint.get('name')] = float(effort) if effort else math.inf
    return limits


def per_joint(values, n, what):
    """Broadcast one value to n joints, or check that there are n; returns an (n,) array."""
    array = np.asarray(values, dtype=float).reshape(-1)
    if array.size == 1:
        array = np.full(n, array[0])
    if array.size != n:
        raise ParameterError(f'{what} has {array.size} values, but the plant has {n} joints')
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise ParameterError(f'{what} must be finite and >= 0, got {array.tolist()}')
    return array


def _last_link(spec):
    """Name of the body of the plant's last joint (the child link of the last joint)."""
    joints = [j for j in spec.joints if int(j.type) in HINGE_OR_SLIDE]
    if not joints:
        raise UrdfError('the URDF has no revolute, continuous or prismatic joint')
    return joints[-1].parent.name


def _add_payload(spec, options):
    """Weld a point mass `payload_mass` at `payload_com` to the payload link."""
    link = options.payload_link or _last_link(spec)
    body = spec.body(link)
    if body is None:
        raise ParameterError(f"payload link '{link}' is not a link of the URDF")
    com = np.asarray(options.payload_com, dtype=float)
    if com.shape != (3,) or not np.all(np.isfinite(com)):
        raise ParameterError(f'payload com must be 3 finite numbers [m], got {com.tolist()}')
    payload = body.add_body(name='rnea_sim_payload')
    payload.pos = [0.0, 0.0, 0.0]
    payload.ipos = com
    payload.mass = options.payload_mass
    payload.inertia = [0.0, 0.0, 0.0]
    payload.explicitinertial = True


def without_geometry(urdf_text):
    """The URDF without its <visual> and <collision> elements: the plant has no contacts and
    takes each link's mass from its <inertial> (as the controller's model does), and drivers'
    descriptions name meshes by package:// paths that MuJoCo cannot open. The links of the
    fixed base (welded to the root by fixed joints only) lose their <inertial> too: it never
    enters the dynamics, and the controller's model loads one that no rigid body has there
    with a warning (dynamics/description.py), where MuJoCo's compiler refuses it (a mobile
    manipulator's antenna or sensor mount: TIAGo's, PR2's)."""
    root = ET.fromstring(urdf_text)
    for link in root.iter('link'):
        for element in [e for e in link if e.tag in ('visual', 'collision')]:
            link.remove(element)
    moving = set()  # links below a joint that moves; tree_order: parents before children
    for joint in tree_order(parse_urdf(urdf_text))[1]:
        if joint.type != 'fixed' or joint.parent in moving:
            moving.add(joint.child)
    for link in root.findall('link'):
        inertial = link.find('inertial')
        if inertial is not None and link.get('name') not in moving:
            link.remove(inertial)
    return ET.tostring(root, encoding='unicode')


SHAPES = {'box': 3, 'sphere': 1}  # obstacle shape: number of size values


def check_obstacles(obstacles):
    """The obstacles as ((shape, centre (3,), size), ...) of floats, or ParameterError."""
    checked = []
    for k, obstacle in enumerate(obstacles):
        shape, centre, size = obstacle
        centre, size = np.asarray(centre, float).reshape(-1), np.asarray(size, float).reshape(-1)
        if shape not in SHAPES or centre.size != 3 or size.size != SHAPES[shape]:
            raise ParameterError(f'obstacle {k}: a box needs a centre (3 values [m]) and 3 half '
                                 'sizes [m], a sphere a centre and a radius [m]; got '
                                 f'{shape!r}, {centre.tolist()}, {size.tolist()}')
        if not (np.all(np.isfinite(centre)) and np.all(np.isfinite(size)) and np.all(size > 0)):
            raise ParameterError(f'obstacle {k} ({shape}): centre and sizes must be finite, '
                                 f'sizes > 0, got {centre.tolist()}, {size.tolist()}')
        checked.append((shape, tuple(centre), tuple(size)))
    return tuple(checked)


def _quaternion(rpy):
    """MuJoCo's quaternion (w, x, y, z) of a URDF rpy: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    quat = np.zeros(4)
    mujoco.mju_euler2Quat(quat, np.asarray(rpy, float), 'XYZ')
    return quat


def _floats(text, default='0 0 0'):
    return [float(x) for x in (text or default).split()]


def _primitive(geometry):
    """(MuJoCo geom type, size) of a URDF <geometry> primitive, or None (a mesh, nothing)."""
    shape = geometry[0] if geometry is not None and len(geometry) else None
    if shape is None:
        return None
    if shape.tag == 'box':
        return mujoco.mjtGeom.mjGEOM_BOX, [0.5 * x for x in _floats(shape.get('size'))]
    if shape.tag == 'cylinder':
        return mujoco.mjtGeom.mjGEOM_CYLINDER, [float(shape.get('radius')),
                                                0.5 * float(shape.get('length')), 0.0]
    if shape.tag == 'sphere':
        return mujoco.mjtGeom.mjGEOM_SPHERE, [float(shape.get('radius')), 0.0, 0.0]
    return None


def _add_collision_geometry(spec, root, radius):
    """Massless collision geoms on every moving link (module doc): contype 1, conaffinity 0
    (a link collides with obstacles only)."""
    children = {}
    for joint in root.findall('joint'):
        origin = joint.find('origin')
        xyz = _floats(origin.get('xyz') if origin is not None else None)
        children.setdefault(joint.find('parent').get('link'), []).append(xyz)
    for link in root.findall('link'):
        name = link.get('name')
        body = spec.body(name)
        if name not in _moving_links(root) or body is None:
            continue
        shapes = []
        for tag in ('collision', 'visual'):
            for element in link.findall(tag):
                primitive = _primitive(element.find('geometry'))
                if primitive is not None:
                    origin = element.find('origin')
                    shapes.append((*primitive, _floats(origin.get('xyz') if origin is not None
                                                       else None),
                                   _floats(origin.get('rpy') if origin is not None else None)))
            if shapes:
                break
        for kind, size, xyz, rpy in shapes:
            geom = body.add_geom(type=kind, size=size, pos=xyz, quat=_quaternion(rpy))
            geom.contype, geom.conaffinity = 1, 0
        if not shapes:
            ends = [xyz for xyz in children.get(name, []) if np.linalg.norm(xyz) > 1e-3]
            for xyz in ends or [None]:
                geom = body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[radius, 0, 0])
                if xyz is not None:
                    geom.type = mujoco.mjtGeom.mjGEOM_CAPSULE
                    geom.fromto = [0.0, 0.0, 0.0, *xyz]
                geom.contype, geom.conaffinity = 1, 0


def _add_obstacles(spec, obstacles):
    """The obstacles as geoms of the world: contype 0, conaffinity 1."""
    for k, (shape, centre, size) in enumerate(check_obstacles(obstacles)):
        kind = mujoco.mjtGeom.mjGEOM_BOX if shape == 'box' else mujoco.mjtGeom.mjGEOM_SPHERE
        geom = spec.worldbody.add_geom(name=f'rnea_sim_obstacle_{k}', type=kind,
                                       size=list(size) + [0.0] * (3 - len(size)), pos=centre)
        geom.contype, geom.conaffinity = 0, 1


def build_model(urdf_text, options=PlantOptions()):
    """MuJoCo model of the URDF (its geometry left out: `without_geometry`) with the plant
    options applied; returns mujoco.MjModel."""
    try:
        spec = mujoco.MjSpec.from_string(without_geometry(urdf_text))
    except ET.ParseError as error:
        raise UrdfError(f'the URDF is not well-formed XML: {error}') from error
    except (ValueError, mujoco.FatalError) as error:
        raise UrdfError(f'MuJoCo cannot load the URDF: {error}') from error
    spec.option.timestep = options.timestep
    # a moving link whose principal moments break the triangle inequality (loaded as given,
    # with a warning, by the controller's model): MuJoCo sets its three to their mean, else
    # refuses the URDF (PR2's, Romeo's; every other inertia is kept as it is)
    spec.compiler.balanceinertia = True
    if options.obstacles:
        spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
        _add_collision_geometry(spec, ET.fromstring(urdf_text), options.link_radius)
        _add_obstacles(spec, options.obstacles)
    else:
        spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    joints = [j for j in spec.joints if int(j.type) in HINGE_OR_SLIDE]
    damping = per_joint(options.damping, len(joints), 'damping')
    friction = per_joint(options.friction, len(joints), 'friction')
    armature = per_joint(options.armature, len(joints), 'armature')
    for joint, d, f, a in zip(joints, damping, friction, armature, strict=True):
        joint.damping = [d, 0.0, 0.0]
        joint.frictionloss = f
        joint.armature = a
    if not math.isfinite(options.payload_mass) or options.payload_mass < 0:
        raise ParameterError(f'payload mass must be finite and >= 0 [kg], got '
                             f'{options.payload_mass}')
    if options.payload_mass > 0:
        _add_payload(spec, options)
    return spec.compile()


class Plant:
    """A MuJoCo arm driven by joint efforts: `step(tau)` advances one time step.

    Joint order (`joint_names`) is MuJoCo's, which for a URDF is the tree order of its
    revolute, continuous and prismatic joints (the model order of this package for chains).
    """

    def __init__(self, urdf_text, options=PlantOptions()):
        errors = options.link_errors
        self.urdf = perturb_links(urdf_text, *errors) if errors else urdf_text  # the truth
        self.model = build_model(self.urdf, options)
        self.data = mujoco.MjData(self.model)
        ids = [j for j in range(self.model.njnt) if int(self.model.jnt_type[j]) in HINGE_OR_SLIDE]
        if self.model.nq != len(ids) or self.model.nv != len(ids):
            raise UrdfError('the simulated arm must have only 1-dof joints (no floating base)')
        self.joint_names = tuple(self.model.joint(j).name for j in ids)
        self.n = len(ids)
        limits = urdf_effort_limits(urdf_text)
        self.effort_limits = np.array([limits.get(name, math.inf) for name in self.joint_names])
        self.clamp_effort = options.clamp_effort
        self.applied = np.zeros(self.n)
        self.external = np.zeros(self.n)  # [N·m or N] the world's push on the joints
        self._nominal = build_model(urdf_text, PlantOptions(timestep=options.timestep))
        self._nominal_data = mujoco.MjData(self._nominal)
        self.compensates_gravity = options.compensates_gravity

    @property
    def q(self):
        """Joint positions [rad or m], a copy."""
        return self.data.qpos.copy()

    @property
    def qd(self):
        """Joint velocities [rad/s or m/s], a copy."""
        return self.data.qvel.copy()

    @property
    def time(self):
        """Simulated time since `reset` [s]."""
        return self.data.time

    def reset(self, q, qd=None):
        """Put the arm at rest (or at velocity qd) in configuration q."""
        self.data = mujoco.MjData(self.model)
        self.data.qpos[:] = self._vector(q, 'q')
        self.data.qvel[:] = 0.0 if qd is None else self._vector(qd, 'qd')
        mujoco.mj_forward(self.model, self.data)

    def step(self, tau):
        """Apply joint efforts tau [N·m] for one time step (zero-order hold over the step).

        With `compensates_gravity` the plant applies tau + g(q) (nominal model, see module doc).
        The total is clipped to the URDF limits; then `external` is added (the world's push,
        which no drive limits). Returns the commanded part of what was applied (the total minus
        the robot's own g(q)), which the simulator reports as effort.
        """
        tau = self._vector(tau, 'tau')
        g = self.gravity(self.data.qpos) if self.compensates_gravity else 0.0
        total = tau + g
        if self.clamp_effort:  # np.clip's, without its Python layers (~3 us a step)
            total = np.minimum(np.maximum(total, -self.effort_limits), self.effort_limits)
        self.applied = total - g
        self.data.qfrc_applied[:] = total + self.external
        mujoco.mj_step(self.model, self.data)
        return self.applied

    def contact_force(self):
        """|total force| [N] of the obstacles on the arm now (MuJoCo's contact forces, summed
        as vectors in the world frame); 0 without contact."""
        total, f = np.zeros(3), np.zeros(6)
        for i in range(self.data.ncon):
            mujoco.mj_contactForce(self.model, self.data, i, f)
            total += self.data.contact[i].frame.reshape(3, 3).T @ f[:3]
        return float(np.linalg.norm(total))

    def gravity(self, q):
        """g(q) [N·m] of the nominal model (the URDF without the hidden payload) by MuJoCo:
        its bias force `qfrc_bias` = C(q, qd) qd + g(q) at qd = 0."""
        data = self._nominal_data
        data.qpos[:] = self._vector(q, 'q')
        data.qvel[:] = 0.0
        mujoco.mj_fwdPosition(self._nominal, data)
        mujoco.mj_fwdVelocity(self._nominal, data)
        return data.qfrc_bias.copy()

    def inverse_dynamics(self, q, qd, qdd):
        """tau = M(q) qdd + h(q, qd) by MuJoCo's inverse dynamics (mj_inverse) [N·m]."""
        data = mujoco.MjData(self.model)
        data.qpos[:] = self._vector(q, 'q')
        data.qvel[:] = self._vector(qd, 'qd')
        data.qacc[:] = self._vector(qdd, 'qdd')
        mujoco.mj_inverse(self.model, data)
        return data.qfrc_inverse.copy()

    def _vector(self, values, what):
        array = np.asarray(values, dtype=float).reshape(-1)
        if array.shape != (self.n,):
            raise DimensionError(f'{what} has {array.size} values, but the plant has {self.n} '
                                 f'joints {list(self.joint_names)}')
        if not np.isfinite(array).all():
            raise DimensionError(f'{what} has non-finite values: {array.tolist()}')
        return array


def measure(q, qd, rng, position_std=0.0, velocity_std=0.0):
    """Sensor readings: q + N(0, position_std^2), qd + N(0, velocity_std^2) [rad, rad/s]."""
    if position_std > 0:
        q = q + rng.normal(0.0, position_std, q.shape)
    if velocity_std > 0:
        qd = qd + rng.normal(0.0, velocity_std, qd.shape)
    return q, qd


class CommandHold:
    """Last command wins, after a transport `delay` [s], forever or until `timeout` [s].

    Like ros2_control's JointGroupEffortController (a forward command controller), the newest
    command is applied until a newer one arrives, with no timeout of its own (timeout 0, the
    default). With timeout > 0 the effort drops to zero after `timeout` seconds without a
    command, as a hardware-side watchdog would. `status(t)` is 'waiting' before the first
    command, 'active', or 'timed out'.
    """

    def __init__(self, n, delay=0.0, timeout=0.0):
        self.n = n
        self.delay = delay
        self.timeout = timeout
        self.pending = deque()
        self.command = np.zeros(n)
        self.received = None
        self.applicable = None

    def push(self, t, tau):
        """A command tau [N·m] received at time t [s]."""
        self.pending.append((t + self.delay, np.array(tau, dtype=float)))
        self.received = t

    def status(self, t):
        """'waiting', 'active' or 'timed out' at time t [s]."""
        self._advance(t)
        if self.applicable is None:
            return 'waiting'
        if self.timeout > 0 and t - self.applicable > self.timeout:
            return 'timed out'
        return 'active'

    def current(self, t):
        """The effort to apply at time t [s]: the newest command due by t, or zero."""
        return self.command if self.status(t) == 'active' else np.zeros(self.n)

    def _advance(self, t):
        while self.pending and self.pending[0][0] <= t:
            self.applicable, self.command = self.pending.popleft()
