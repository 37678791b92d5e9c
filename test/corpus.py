"""The closed-loop corpus (issue 43): arms, truths, timings and simulators DRAWN, not picked.

A case is (arm, truth, timing, simulator, seed). Each runs the node's own tick (timed_loop.Node,
its defaults, told the URDF only) and, under the same timing on the same plant, the reference a
user would pick instead: PD + gravity tuned on the TRUE arm (`timed_loop.PdGravity`: Kp = ω²
m_i, Kd = 2ω m_i, m_i = 1 / (M⁻¹)_ii of the true arm, rotor inertia and payload included, at
the start pose; g(q) of the URDF). The figures of both: RMS error, final error, peak speed /
velocity limit, the largest command step / effort limit, contacts declared, brakes.

Arms (`ARMS`): every arm of example-robot-data with a serial chain of 6-7 actuated joints, one
description each (the joint-limited and gripper variants of a UR are the same arm), and the
iiwa14 of Drake's BSD-3 description in ../shared/data (left out, with the reason, where
../shared is absent). A gripper's joints (mimic, or named gripper or finger: z1's
jointGripper) are fixed (the corpus is about the arm's law);
continuous joints become revolute within ±2π (Pinocchio's continuous joint has two
coordinates; the node reads both the same).

Truths (`TRUTHS`), drawn per joint from the ranges real arms have, scaled by each joint's size
(its rated torque, the URDF's effort limit τ_max, and velocity limit qd_max):
- 'placeholders': the URDF's rigid bodies exactly, no friction (its <dynamics> tags are
  placeholders); the node is told nothing either way;
- 'friction': viscous b = β τ_max / qd_max, β log-uniform in [0.02, 0.6] (Menagerie's xArm7
  damping 10 on a 50 N·m / 3.14 rad/s joint is β 0.63; a UR5's identified 10.4 on 150 / 3.15 is
  0.22), Coulomb c = γ τ_max, γ log-uniform in [0.01, 0.08] (real arms: 5-13 N·m on big joints
  of 87-330 N·m, 1 N·m on the xArm7's 20-50 N·m);
- 'geared': the friction above plus rotor inertia reflected through the gear, J = ρ τ_max,
  ρ log-uniform in [1e-3, 6e-3] kg·m²/(N·m), at most 0.7 kg·m² (FR3: 0.195 on 87 N·m joints,
  0.074 on 12; xArm7 0.1 on 20-50; iiwa14 0.25-0.72 on 176-320);
- 'links': every moving link's mass and principal inertias off by up to 30 %, its centre of
  mass by up to 3 cm and 0.3 x the link's radius of gyration (`true_urdf`, seeded), and a
  payload at the last link of up to 10 % of the arm's moving mass, its centre 0-8 cm along the
  last joint's axis and up to 5 mm off it (a tool on the flange).

Simulators (`SIMULATORS`), whose friction differs: 'mujoco' (`sim.plant.Plant`: MuJoCo's
`damping` and its `frictionloss` dry-friction constraint, semi-implicit Euler at 1 kHz) and
'pinocchio' (`AbaPlant`: Pinocchio's ABA on the true URDF, rotor inertia as its armature, a
smooth Stribeck friction (c + s exp(-(qd / v_s)²)) tanh(qd / w) + b qd, s and w drawn, integrated
at 0.5 ms, the friction fully implicit through M (stiff near rest), by Newton's method).

Timings (`TIMINGS`): 'prompt' (commands act within the tick) and 'late' (commands 5-10 ms late
plus an exponential 1 ms, 15 % of the ticks missed, pauses up to 30 ticks, ±0.5 ms stamp
jitter: test_timing_matrix's columns), drawn per seed.

The arm stands on its brakes until the first command acts (`run`'s `braked`), for both laws:
falling under no torque for the 5-10 ms before any command can act measures the start, not a
law (the SO-100's elbow reached 1.42-1.95x its velocity limit in 9 ms under either, and the
brake ended the case). test_timing_matrix keeps that fall for the xArm7, where it is answered.
"""
from dataclasses import dataclass
from functools import cache
import math
from pathlib import Path
from types import SimpleNamespace
import xml.etree.ElementTree as ET

from conftest import ROBOTS
import mujoco
from numba import njit
import numpy as np
import pinocchio as pin
from timed_loop import command_steps, contacts, joint_inertias, Node, PdGravity, run, Timing

from rnea_controller import RobotModel
from rnea_controller.control.law import default_joints
from rnea_controller.control.trajectory import plan_arrays
from rnea_controller.sim.plant import build_model, perturb_links, Plant, PlantOptions
from rnea_controller.tools.send_trajectory import demo_motion

SHARED = Path(__file__).resolve().parents[2] / 'shared' / 'data'
ARMS = {  # name: URDF (example-robot-data's robots/, or an absolute path)
    'panda': 'panda_description/urdf/panda.urdf',
    'ur3': 'ur_description/urdf/ur3_robot.urdf',
    'ur5': 'ur_description/urdf/ur5_robot.urdf',
    'ur10': 'ur_description/urdf/ur10_robot.urdf',
    'kinova': 'kinova_description/robots/kinova.urdf',
    'xarm7': 'xarm_description/urdf/xarm7.urdf',
    'z1': 'z1_description/urdf/z1.urdf',
    'so100': 'so_arm_description/urdf/so100.urdf',
    'talos_left_arm': 'talos_data/robots/talos_left_arm.urdf',
    'iiwa14': str(SHARED / 'iiwa14_drake.urdf'),
}
CHAINS = {  # name: (URDF, its arm's joints): the 7-joint arms of example-robot-data's bigger
    # robots (dual-arm, mobile, humanoid), every other joint fixed; `./run bench corpus --chains`
    'baxter_right': ('baxter_description/urdf/baxter.urdf',
                     ['right_s0', 'right_s1', 'right_e0', 'right_e1', 'right_w0', 'right_w1',
                      'right_w2']),
    'pr2_right': ('pr2_description/urdf/pr2.urdf',
                  [f'r_{j}_joint' for j in ('shoulder_pan', 'shoulder_lift', 'upper_arm_roll',
                                            'elbow_flex', 'forearm_roll', 'wrist_flex',
                                            'wrist_roll')]),
    'tiago': ('tiago_description/robots/tiago_no_hand.urdf',
              [f'arm_{i}_joint' for i in range(1, 8)]),
    'romeo_left': ('romeo_description/urdf/romeo_small.urdf',
                   ['LShoulderPitch', 'LShoulderYaw', 'LElbowRoll', 'LElbowYaw', 'LWristRoll',
                    'LWristYaw', 'LWristPitch']),
}
HAND = ('gripper', 'finger')  # a joint so named is a hand's, not the arm's (z1's jointGripper)
TRUTHS = ('placeholders', 'friction', 'geared', 'links')
TIMINGS = ('prompt', 'late')
SIMULATORS = ('mujoco', 'pinocchio')
MOVE, HOLD = 3.0, 1.5  # [s] the demo motion, then at rest
OMEGA = 20.0  # [rad/s] the peer's bandwidth: the node's default gains'
FINAL = 1e-3  # [rad] issue 43: every case ends within this of its goal
FASTEST = 1.5  # x a velocity limit: beyond, a runaway


def available_arms(chains=False):
    """{name: URDF path} of the ARMS whose description is here (iiwa14 needs ../shared); with
    `chains`, the CHAINS too."""
    out = {}
    every = {**ARMS, **{name: path for name, (path, _) in CHAINS.items()}} if chains else ARMS
    for name, relative in every.items():
        path = Path(relative) if Path(relative).is_absolute() else ROBOTS / relative
        if path.exists():
            out[name] = path
    return out


def _serial(urdf_text, joints=None):
    """The URDF with every moving joint outside the controlled chain (`joints`, else the
    model's default chain less a gripper's) fixed, and continuous joints revolute within ±2π
    [rad]."""
    if joints is None:
        model = RobotModel.from_urdf_string(urdf_text)
        joints = [j for j in default_joints(model) if not any(w in j.lower() for w in HAND)]
    keep = set(joints)
    root = ET.fromstring(urdf_text)
    for joint in root.findall('joint'):
        kind = joint.get('type')
        if kind in ('revolute', 'continuous', 'prismatic', 'floating', 'planar') and \
                joint.get('name') not in keep:
            joint.set('type', 'fixed')
            for mimic in joint.findall('mimic'):
                joint.remove(mimic)
        elif kind == 'continuous':
            joint.set('type', 'revolute')
            limit = joint.find('limit')
            if limit is None:
                limit = ET.SubElement(joint, 'limit', effort='0', velocity='0')
            limit.set('lower', str(-2 * math.pi))
            limit.set('upper', str(2 * math.pi))
    return ET.tostring(root, encoding='unicode')


@dataclass(frozen=True)
class Arm:
    name: str
    urdf: str
    model: RobotModel
    start: np.ndarray

    @property
    def limits(self):
        return np.asarray(self.model.effort_limits, dtype=float)


@cache
def arm(name):
    """The Arm `name`: its serial URDF, model and start pose: each joint a fifth of its range
    (at most 0.8 rad) from its middle, the signs (of 8 alternating patterns) that load the arm
    least (the largest g(q) / effort limit: a pose it holds easily)."""
    text = _serial(available_arms(chains=True)[name].read_text(),
                   CHAINS[name][1] if name in CHAINS else None)
    model = RobotModel.from_urdf_string(text)
    low, high = (np.asarray(x, dtype=float) for x in np.asarray(model.position_limits).T)
    low, high = np.where(np.isfinite(low), low, -math.pi), np.where(np.isfinite(high), high,
                                                                    math.pi)
    pin_model = pin.buildModelFromXML(text)
    data, limits = pin_model.createData(), np.asarray(model.effort_limits, dtype=float)
    best = None
    for pattern in range(8):
        signs = np.array([1.0 if (j + (pattern >> (j % 3))) % 2 == 0 else -1.0
                          for j in range(model.n)])
        start = 0.5 * (low + high) + signs * np.minimum(0.2 * (high - low), 0.8)
        load = np.max(np.abs(pin.computeGeneralizedGravity(pin_model, data, start)) / limits)
        if best is None or load < best[0]:
            best = (load, start)
    return Arm(name, text, model, best[1])


@dataclass(frozen=True)
class Truth:
    """What the arm is beyond its URDF, per joint: rotor inertia [kg·m²], viscous [N·m·s/rad],
    Coulomb [N·m], Stribeck excess [N·m] and velocity [rad/s], the friction's width [rad/s]
    (the smooth simulator's); link errors (seed, mass, inertia, com) or (); payload [kg] and
    its centre [m] in the last link's frame."""

    kind: str
    armature: np.ndarray
    viscous: np.ndarray
    coulomb: np.ndarray
    stribeck: np.ndarray
    stribeck_velocity: np.ndarray
    width: np.ndarray
    link_errors: tuple = ()
    payload: float = 0.0
    payload_com: tuple = (0.0, 0.0, 0.0)


def _log_uniform(rng, low, high, size):
    return np.exp(rng.uniform(math.log(low), math.log(high), size))


def draw_truth(a, kind, seed):
    """The Truth of kind `kind` for Arm `a`, drawn from `seed` (module doc's ranges)."""
    rng = np.random.default_rng(seed)
    n = a.model.n
    tau_max = a.limits
    qd_max = np.asarray(a.model.velocity_limits, dtype=float)
    zero = np.zeros(n)
    friction = kind in ('friction', 'geared')
    viscous = _log_uniform(rng, 0.02, 0.6, n) * tau_max / qd_max if friction else zero
    coulomb = _log_uniform(rng, 0.01, 0.08, n) * tau_max if friction else zero
    stribeck = rng.uniform(0.0, 0.5, n) * coulomb
    v_s = _log_uniform(rng, 0.01, 0.1, n)
    width = _log_uniform(rng, 1e-3, 1e-2, n)
    armature = (np.minimum(_log_uniform(rng, 1e-3, 6e-3, n) * tau_max, 0.7) if kind == 'geared'
                else zero)
    if kind != 'links':
        return Truth(kind, armature, viscous, coulomb, stribeck, v_s, width)
    mass = sum(body.mass for body in _bodies(a))
    payload = float(rng.uniform(0.0, 0.1) * mass)
    axis = np.asarray(a.model.axes[-1], dtype=float)  # the last joint's axis
    lateral = np.cross(axis, rng.normal(size=3))
    com = tuple(rng.uniform(0.0, 0.08) * axis
                + rng.uniform(0.0, 0.005) * lateral / np.linalg.norm(lateral))
    return Truth(kind, armature, viscous, coulomb, stribeck, v_s, width,
                 (int(seed), 0.3, 0.3, 0.03), payload, com)


def _bodies(a):
    model = pin.buildModelFromXML(a.urdf)
    return [model.inertias[j] for j in range(1, model.njoints)]


def true_urdf(a, truth):
    """The true arm's URDF: every moving link's mass and principal inertias off by up to the
    truth's shares (`perturb_links`), its centre of mass moved by up to the truth's distance
    [m] and at most 0.3 x the link's radius of gyration (a CAD model's error grows with the
    link: 3 cm on a wrist-roll link of a few grams would be no CAD's error)."""
    if not truth.link_errors:
        return a.urdf
    seed, mass, inertia, com = truth.link_errors
    root = ET.fromstring(perturb_links(a.urdf, seed, mass, inertia, 0.0))
    rng = np.random.default_rng(seed + 1)
    for link in root.findall('link'):
        inertial = link.find('inertial')
        if inertial is None or inertial.find('mass') is None or inertial.find('inertia') is None:
            continue
        m = float(inertial.find('mass').get('value'))
        moments = [float(inertial.find('inertia').get(k, '0')) for k in ('ixx', 'iyy', 'izz')]
        radius = math.sqrt(max(max(moments), 0.0) / m) if m > 0.0 else 0.0
        origin = inertial.find('origin')
        if origin is None:
            origin = ET.SubElement(inertial, 'origin', xyz='0 0 0', rpy='0 0 0')
        xyz = np.array([float(x) for x in origin.get('xyz', '0 0 0').split()])
        direction = rng.normal(size=3)
        shift = rng.uniform(0.0, min(com, 0.3 * radius)) * direction / np.linalg.norm(direction)
        origin.set('xyz', ' '.join(f'{x:.9g}' for x in xyz + shift))
    return ET.tostring(root, encoding='unicode')


def mujoco_plant(a, truth):
    """The MuJoCo arm (`sim.plant.Plant`) on the true URDF: damping, frictionloss (its dry
    friction; no Stribeck, no width), armature and payload; its g(q) the URDF's."""
    plant = Plant(true_urdf(a, truth), PlantOptions(
        damping=tuple(truth.viscous), friction=tuple(truth.coulomb + truth.stribeck),
        armature=tuple(truth.armature), payload_mass=truth.payload,
        payload_com=truth.payload_com))
    plant._nominal = build_model(a.urdf, PlantOptions())
    plant._nominal_data = mujoco.MjData(plant._nominal)
    return plant


@njit(cache=True)
def _implicit_velocity(M, v_free, v_old, h, viscous, coulomb, stribeck, stribeck_velocity,
                       width):
    """v with M (v - v_free) + h F(v) = 0, F(v) = b v + (c + s exp(-(v_old / v_s)²)) tanh(v / w)
    per joint (the Stribeck level frozen at the step's start, so that F is monotone in v):
    the friction fully implicit over a step h [s] (stiff near rest: slopes up to c / w), by
    Newton's method with step halving on the residual's norm; M's upper triangle is read (as
    Pinocchio's crba writes it). Compiled (numba), in scalar loops (a short compile): the
    corpus's Pinocchio cases spent half their time in this loop's numpy calls on 6-7-vectors."""
    n = v_old.shape[0]
    A = np.empty((n, n))
    level = np.empty(n)
    scale = 0.0
    for i in range(n):
        for j in range(i, n):
            A[i, j] = A[j, i] = M[i, j]
        level[i] = coulomb[i] + stribeck[i] * math.exp(-(v_old[i] / stribeck_velocity[i]) ** 2)
    for i in range(n):
        row = 0.0
        for j in range(n):
            row += A[i, j] * v_free[j]
        scale += row * row
    tolerance = 1e-12 * (1.0 + math.sqrt(scale))
    v, trial, J, dv = v_old.copy(), np.empty(n), np.empty((n, n)), np.empty(n)
    r = np.empty(n)
    norm = _residual(A, v, v_free, h, viscous, level, width, r)
    for _ in range(30):
        for i in range(n):
            th = math.tanh(v[i] / width[i])
            for j in range(n):
                J[i, j] = A[i, j]
            J[i, i] += h * (viscous[i] + level[i] * (1.0 - th * th) / width[i])
            dv[i] = -r[i]
        _spd_solve(J, dv)
        step = 1.0
        while step > 1e-4:
            moved = _residual(A, v + step * dv, v_free, h, viscous, level, width, trial)
            if moved < norm:
                break
            step *= 0.5
        for i in range(n):
            v[i] += step * dv[i]
            r[i] = trial[i]
        norm = moved
        if norm <= tolerance:
            break
    return v


@njit(cache=True)
def _residual(M, x, v_free, h, viscous, level, width, out):
    """out = M (x - v_free) + h F(x); returns its norm."""
    n = x.shape[0]
    total = 0.0
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += M[i, j] * (x[j] - v_free[j])
        out[i] = s + h * (viscous[i] * x[i] + level[i] * math.tanh(x[i] / width[i]))
        total += out[i] * out[i]
    return math.sqrt(total)


@njit(cache=True)
def _spd_solve(A, b):
    """b = x with A x = b, A symmetric positive definite (n small), in place: Cholesky in A's
    lower triangle, in loops (no BLAS: the same digits on every host)."""
    n = b.shape[0]
    for j in range(n):
        for k in range(j):
            A[j, j] -= A[j, k] * A[j, k]
        A[j, j] = math.sqrt(A[j, j])
        for i in range(j + 1, n):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]
            A[i, j] /= A[j, j]
    for i in range(n):
        for k in range(i):
            b[i] -= A[i, k] * b[k]
        b[i] /= A[i, i]
    for i in range(n - 1, -1, -1):
        for k in range(i + 1, n):
            b[i] -= A[k, i] * b[k]
        b[i] /= A[i, i]


class AbaPlant:
    """The true arm by Pinocchio's ABA (module doc): `Plant`'s interface for timed_loop.run."""

    SUBSTEPS = 2

    def __init__(self, a, truth, timestep=1e-3):
        self.true = pin.buildModelFromXML(true_urdf(a, truth))
        if truth.payload > 0.0:
            last = self.true.njoints - 1
            r = 0.03  # [m] a solid sphere's radius
            load = pin.Inertia(truth.payload, np.array(truth.payload_com),
                               0.4 * truth.payload * r * r * np.eye(3))
            self.true.inertias[last] = self.true.inertias[last] + load
        self.true.armature = np.asarray(truth.armature, dtype=float).copy()
        self.data = self.true.createData()
        self.nominal = pin.buildModelFromXML(a.urdf)
        self.nominal_data = self.nominal.createData()
        self.truth, self.n = truth, self.true.nv
        self.model = SimpleNamespace(opt=SimpleNamespace(timestep=timestep))
        self.effort_limits = a.limits
        self.external = np.zeros(self.n)
        self._q, self._qd = np.zeros(self.n), np.zeros(self.n)

    @property
    def q(self):
        return self._q.copy()

    @property
    def qd(self):
        return self._qd.copy()

    def reset(self, q, qd=None):
        self._q = np.asarray(q, dtype=float).copy()
        self._qd = np.zeros(self.n) if qd is None else np.asarray(qd, dtype=float).copy()

    def step(self, tau):
        applied = np.clip(np.asarray(tau, dtype=float), -self.effort_limits, self.effort_limits)
        h = self.model.opt.timestep / self.SUBSTEPS
        t = self.truth
        for _ in range(self.SUBSTEPS):
            qdd = pin.aba(self.true, self.data, self._q, self._qd, applied + self.external)
            M = pin.crba(self.true, self.data, self._q)  # its upper triangle
            v = _implicit_velocity(M, self._qd + h * qdd, self._qd, h, t.viscous, t.coulomb,
                                   t.stribeck, t.stribeck_velocity, t.width)
            self._qd = v
            self._q = self._q + h * v
        return applied

    def gravity(self, q):
        return pin.computeGeneralizedGravity(self.nominal, self.nominal_data,
                                             np.asarray(q, dtype=float)).copy()

    def joint_inertias(self, q):
        """1 / (M⁻¹)_ii of the true arm at q [kg·m²]."""
        data = self.true.createData()
        return 1.0 / np.diag(pin.computeMinverse(self.true, data, np.asarray(q, dtype=float)))


def make_plant(a, truth, simulator):
    return mujoco_plant(a, truth) if simulator == 'mujoco' else AbaPlant(a, truth)


def draw_timing(kind, seed):
    """'prompt': commands act within the tick; 'late': 5-10 ms late (drawn), 15 % of the
    ticks missed in pauses up to 30 ticks, ±0.5 ms stamp jitter."""
    if kind == 'prompt':
        return Timing(seed=seed)
    delay = float(np.random.default_rng(seed + 7).uniform(0.005, 0.01))
    return Timing(delay=delay, delay_jitter=1e-3, missed=0.15, burst=30, jitter=5e-4, seed=seed)


def reference(a, duration=MOVE):
    """The demo motion (every joint, rest to rest) about the start, lasting `duration`."""
    names = a.model.joint_names
    w = demo_motion(names, a.start, a.model.velocity_limits, a.model.position_limits, duration)
    return plan_arrays(names, w.times, w.positions, w.velocities, w.accelerations,
                       joint_names=names, position_limits=a.model.position_limits,
                       current=np.vstack([a.start, np.zeros((2, a.model.n))]), now=0.0)


@dataclass(frozen=True)
class Figures:
    rms: float  # [rad] over the move and the hold, every joint
    final: float  # [rad] the largest |error| at the end
    fastest: float  # the largest |qd| / velocity limit
    step: float  # the largest command step / effort limit, outside the brake
    contacts: int
    brakes: int


def figures(a, result):
    e = result.desired - result.q
    brakes = sum(1 for mode in result.modes if mode.startswith('braking'))
    return Figures(float(np.sqrt(np.nanmean(e ** 2))), float(np.abs(e[-1]).max()),
                   float(np.max(np.abs(result.qd) / np.asarray(a.model.velocity_limits))),
                   float(command_steps(result, a.limits).max()), len(contacts(result)), brakes)


@dataclass(frozen=True)
class Case:
    arm: str
    truth: str
    timing: str
    simulator: str
    seed: int

    @property
    def name(self):
        return f'{self.arm}-{self.truth}-{self.timing}-{self.simulator}-{self.seed}'


def run_case(case, values=None):
    """(node's Figures, the peer's) of `case`; `values`: parameters the node is told."""
    a = arm(case.arm)
    truth = draw_truth(a, case.truth, case.seed)
    timing = draw_timing(case.timing, case.seed)
    out = []
    for law in ('node', 'peer'):
        plant, ref = make_plant(a, truth, case.simulator), reference(a)
        controller = (Node(a.model, dict(values or {}), ref) if law == 'node'
                      else PdGravity(plant, ref, a.start))
        result = run(plant, controller, MOVE + HOLD, timing, a.start, ref, braked=True)
        out.append(figures(a, result))
    return tuple(out)


def every_case(seed=1, arms=None):
    """The whole cross product: every arm here x truth x timing x simulator, one seed."""
    return [Case(name, truth, timing, simulator, seed)
            for name in (arms or available_arms()) for truth in TRUTHS for timing in TIMINGS
            for simulator in SIMULATORS]


def drawn_cases(count, seed=43):
    """`count` cases of the cross product, seeded: case i takes the arm i mod the arms, the
    truth i mod 4, the timing (i // 2) mod 2, the simulator (i // 4) mod 2 (so that every
    arm, every truth, both timings, both simulators and, with 20 cases or more, every pair
    of them appears), and a seed drawn from `seed` (the truth's figures, the timing's
    pauses). Drawn over every arm of ARMS, here or not (the draw is the same in a clone
    without ../shared: the iiwa14's cases are then skipped, the others unchanged)."""
    rng = np.random.default_rng(seed)
    names = sorted(ARMS)
    return [Case(names[i % len(names)], TRUTHS[i % len(TRUTHS)], TIMINGS[(i // 2) % 2],
                 SIMULATORS[(i // 4) % 2], int(rng.integers(1, 10_000))) for i in range(count)]


def failures(node, peer):
    """What the node's Figures break of issue 43's bar beside the peer's: a list of reasons."""
    out = []
    if node.fastest > FASTEST:
        out.append(f'runaway {node.fastest:.2f}x a velocity limit')
    if node.contacts:
        out.append(f'{node.contacts} false contact(s)')
    if node.brakes and not peer.fastest > 1.0:
        out.append(f'{node.brakes} brake(s)')
    if node.final > FINAL:
        out.append(f'final {node.final:.2e} rad')
    if node.rms > peer.rms:
        out.append(f"RMS {node.rms:.2e} > the peer's {peer.rms:.2e}")
    return out


def lateness(case):
    """[s] the case's loop lateness d: its commands' delay plus a period (the node's default
    1 kHz)."""
    return draw_timing(case.timing, case.seed).delay + 1e-3


def stribeck_slip(case):
    """[rad] `stribeck_slips`' largest: of the joint that slips farthest."""
    return float(stribeck_slips(case).max())


def stribeck_slips(case):
    """[rad] per joint, its slip past its breakaway where a command that breaks the joint
    free is taken back only when the loop sees it move (docs/controller.md, "The Stribeck
    slip"): once the command passes the static level c + s, friction falls to c, and the
    excess s drives the joint's true inertia m (M_ii with its rotor, the others standing)
    against its viscous friction b for the loop's lateness d (the timing's delay plus a
    period): x = (s / b) (d - (m / b)(1 - exp(-b d / m))), ½ (s / m) d² as b -> 0 (friction's
    fall to c taken at once and the stop after the command is taken back not counted: each
    a tenth of it on the UR10's wrist_2, opposite ways; test_corpus_closed_loop). 0 under
    MuJoCo, whose dry friction has no Stribeck excess. A joint that must slip to reach its
    goal ends where such a slip lands: where x exceeds FINAL, a command that answers only what
    the loop sees cannot be sure to stop within FINAL of the goal."""
    a = arm(case.arm)
    if case.simulator != 'pinocchio' or case.truth not in ('friction', 'geared'):
        return np.zeros(a.model.n)
    truth = draw_truth(a, case.truth, case.seed)
    model = pin.buildModelFromXML(true_urdf(a, truth))
    model.armature = np.asarray(truth.armature, dtype=float).copy()
    m = np.diag(pin.crba(model, model.createData(), a.start))
    d, s, b = lateness(case), truth.stribeck, truth.viscous  # b > 0: drawn log-uniform
    own = m / b  # [s] the joint's own time
    return s / b * (d - own * -np.expm1(-d / own))


class Pushed:
    """`plant` (a `sim.plant.Plant`) pushed by the world: `torque` [N·m] on joint `joint`
    from `start` [s] for `duration` [s], through the plant's own `external` (added after the
    drive's effort clamp)."""

    def __init__(self, plant, joint, torque, start, duration):
        self._plant, self._push, self._t = plant, (joint, torque, start, duration), 0.0

    def __getattr__(self, name):
        return getattr(self._plant, name)

    def step(self, tau):
        joint, torque, start, duration = self._push
        self._plant.external[joint] = torque if start <= self._t < start + duration else 0.0
        self._t += self._plant.model.opt.timestep
        return self._plant.step(tau)


def pushed_hold(name, timing_kind, seed, duration=2.5):
    """The exact arm `name` (its placeholders, MuJoCo) holding its start pose, one joint
    (drawn) pushed for 15 ms within the first second (before the loop has measured its
    actuation delay) with the torque that takes it to 2x its velocity limit on its own;
    `timing_kind`: 'delay' (commands 5-10 ms late, drawn, nothing else) or a TIMINGS entry.
    Returns (brakes, the largest |qd| / velocity limit from 0.2 s after the push, its time)."""
    a = arm(name)
    rng = np.random.default_rng(seed)
    timing = (Timing(delay=float(rng.uniform(0.005, 0.01)), seed=seed)
              if timing_kind == 'delay' else draw_timing(timing_kind, seed))
    joint = int(rng.integers(a.model.n))
    names, n = a.model.joint_names, a.model.n
    ref = plan_arrays(names, np.array([0.0, 0.1]), np.vstack([a.start, a.start]),
                      np.zeros((2, n)), np.zeros((2, n)), joint_names=names,
                      position_limits=a.model.position_limits,
                      current=np.vstack([a.start, np.zeros((2, n))]), now=0.0)
    plant = make_plant(a, draw_truth(a, 'placeholders', seed), 'mujoco')
    inertia = joint_inertias(plant, a.start)[joint]
    limit = a.model.velocity_limits[joint]
    torque = float(rng.choice([-1.0, 1.0]) * 2.0 * limit * inertia / 0.015)
    start = float(rng.uniform(0.3, 0.9))
    result = run(Pushed(plant, joint, torque, start, 0.015), Node(a.model, {}, ref), duration,
                 timing, a.start, ref)
    brakes = sum(1 for mode in result.modes if mode.startswith('braking'))
    after = result.t > start + 0.2
    speeds = np.abs(result.qd[after]) / np.asarray(a.model.velocity_limits)
    return brakes, float(speeds.max()), start
