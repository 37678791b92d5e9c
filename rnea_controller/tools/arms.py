"""The arms `rnea-demo --robot NAME` runs, each told nothing but its URDF: where the URDF is,
the pose the arm starts in and its geared figures, all from the URDF.

Where: `ARMS`. The bundled arm is this package's; panda, ur5, xarm7 and jaco2 are PyPI
`example-robot-data`'s (a test requirement, data only: `robot_data_dir` finds it through its
installed distribution, else the ament index); iiwa14 is Drake's, a file beside the project
(`<project root>/../shared/data/iiwa14_drake.urdf`). gen3 has no URDF here (example-robot-data's
Kinova is a Jaco2): `--urdf FILE` runs any arm's URDF, a Gen3's too. A missing one is an
`ArmUnavailableError` naming what to install or where to put it.

Start pose (`start_pose`): from each joint's range alone. A joint with limits starts from the
middle of its range (away from both limits); a continuous one, or one of a range of a full turn
or more, from 0, its range taken as one turn about it. Each controlled joint may then be moved
by `START_STEP` of its half range (at most π/2) either way: of the 3^n poses, the arm starts in
the one farthest from a singularity (the largest smallest singular value of its flange's
Jacobian, rotation and translation over the arm's length, by MuJoCo) among those whose gravity
torques stay within `GRAVITY_SHARE` of every effort limit. A stretched or folded arm (UR's
zero, the iiwa's and Gen3's upright 0) is singular; the mid range alone gives those poses.
Joints not controlled (a gripper's fingers) start at the middle of their range, a mimic joint
at its leader's relation.

Geared figures (`geared_figures`): MuJoCo Menagerie's xArm7 (ufactory_xarm7: armature
0.1 kg·m², damping 10 10 5 5 5 2 2 N·m·s/rad, frictionloss 1 N·m), scaled for another arm by
each joint's rated torque (its URDF effort limit) over the xArm7's joint at the same place in
the chain (first to first, last to last): a drive built for twice the torque has about twice
the gear, rotor and friction. Joints not controlled get none.
"""
from dataclasses import dataclass
import importlib.metadata
import itertools
import math
import os
from pathlib import Path
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from rnea_controller.control.law import default_joints
from rnea_controller.description_file import read_description
from rnea_controller.dynamics.model import default_urdf_path, RobotModel
from rnea_controller.errors import DescriptionWarning, RneaControllerError

ROBOT_DATA = 'example-robot-data'
ROBOT_DATA_PIN = 'example-robot-data==6.0.0'  # requirements/test.txt
# <project root>/../shared/data: data kept beside the project, not in it (Drake's iiwa14)
SHARED_DATA = Path(__file__).resolve().parents[2].parent / 'shared' / 'data'
START_STEP = 0.5  # share of a joint's half range the start may move it off its middle
MAX_START_STEP = math.pi / 2  # [rad] a quarter turn: a continuous joint's elbow-up pose
GRAVITY_SHARE = 0.5  # of each effort limit the start's gravity torque may take: the rest moves
MAX_SEARCHED = 10  # controlled joints searched (3^10 poses, ~1 s); more start at their middle
# MuJoCo Menagerie ufactory_xarm7/xarm7.xml: armature [kg·m²], damping [N·m·s/rad],
# frictionloss [N·m] of joints 1-7; and example-robot-data's xarm7.urdf effort limits [N·m]
XARM7_GEARED = {'armature': (0.1,) * 7, 'damping': (10.0, 10.0, 5.0, 5.0, 5.0, 2.0, 2.0),
                'friction': (1.0,) * 7}
XARM7_EFFORT = (50.0, 50.0, 30.0, 30.0, 30.0, 20.0, 20.0)


class ArmUnavailableError(RneaControllerError):
    """An arm's URDF is not where it is looked for: the message says what to install."""


@dataclass(frozen=True)
class Arm:
    """One arm of `rnea-demo --robot`: what it is, and its URDF as (source, relative path)."""

    title: str
    source: str  # 'bundled', ROBOT_DATA, 'shared', or '' (none known)
    path: str = ''


ARMS = {
    'arm': Arm('the bundled arm (UR5e figures, rnea_controller/urdf/arm.urdf)', 'bundled'),
    'panda': Arm('Franka Emika Panda with its hand', ROBOT_DATA,
                 'panda_description/urdf/panda.urdf'),
    'ur5': Arm('Universal Robots UR5', ROBOT_DATA, 'ur_description/urdf/ur5_robot.urdf'),
    'xarm7': Arm('UFactory xArm7', ROBOT_DATA, 'xarm_description/urdf/xarm7.urdf'),
    'jaco2': Arm('Kinova Jaco2 6-DoF (j2s6s200)', ROBOT_DATA,
                 'kinova_description/robots/kinova.urdf'),
    'iiwa14': Arm("KUKA LBR iiwa 14 (Drake's iiwa14_no_collision.urdf)", 'shared',
                  'iiwa14_drake.urdf'),
    'gen3': Arm('Kinova Gen3 7-DoF', ''),
}


def robot_data_dir():
    """The robots/ directory of PyPI `example-robot-data` (its distribution's files), else of
    the ament index's example-robot-data (a ROS 2 machine); ArmUnavailableError if neither."""
    candidates = []
    try:
        dist = importlib.metadata.distribution(ROBOT_DATA)
        candidates.append(Path(dist.locate_file('cmeel.prefix/share/example-robot-data/robots')))
    except importlib.metadata.PackageNotFoundError:
        pass
    for prefix in filter(None, os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep)):
        candidates.append(Path(prefix) / 'share' / 'example-robot-data' / 'robots')
    for path in candidates:
        if path.is_dir():
            return path
    looked = ', '.join(str(c) for c in candidates) or 'no distribution, no AMENT_PREFIX_PATH'
    raise ArmUnavailableError(f'{ROBOT_DATA} is not installed (looked in: {looked}): '
                              f'`pip install {ROBOT_DATA_PIN}` (data only: the URDFs and meshes;'
                              ' ./run installs it with requirements/test.txt)')


def arm_urdf(name):
    """Path of arm `name`'s URDF (a key of ARMS); ArmUnavailableError if it is not there."""
    arm = ARMS[name]
    if arm.source == 'bundled':
        return default_urdf_path()
    if arm.source == ROBOT_DATA:
        path = robot_data_dir() / arm.path
    elif arm.source == 'shared':
        path = SHARED_DATA / arm.path
    else:
        raise ArmUnavailableError(
            f"no URDF of the {arm.title} here: {ROBOT_DATA}'s Kinova is a Jaco2 (--robot "
            'jaco2). Give the Gen3 URDF with --urdf FILE (e.g. ros2_kortex kortex_description/'
            'arms/gen3/7dof/urdf/GEN3_URDF_V12_vision.urdf)')
    if not path.is_file():
        where = 'beside the project' if arm.source == 'shared' else f'in {ROBOT_DATA}'
        raise ArmUnavailableError(f'the {arm.title} URDF is not {where}: no file {path}')
    return path


def load_arm(urdf_path):
    """(URDF text, RobotModel, controlled joints) of the URDF file as the demo's processes read
    it (xacro run); the model's warnings on CAD figures are the node's to log, not ours."""
    text = read_description(urdf_path)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DescriptionWarning)
        model = RobotModel.from_urdf_string(text)
    return text, model, default_joints(model)


def joint_ranges(model, names):
    """(middle, half range) [rad or m] of each joint in `names`: a continuous joint, or one
    whose range is a full turn or more, is taken as one turn about 0."""
    lower, upper = (model.position_limits[[model.joint_index(n) for n in names], k]
                    for k in (0, 1))
    full = ~np.isfinite(lower) | ~np.isfinite(upper) | (upper - lower >= 2 * math.pi)
    lower, upper = np.where(full, -math.pi, lower), np.where(full, math.pi, upper)
    return 0.5 * (lower + upper), 0.5 * (upper - lower)


def child_link(urdf_text, joint):
    """The child link of `joint` in the URDF."""
    for element in ET.fromstring(urdf_text).findall('joint'):  # not transmissions'
        if element.get('name') == joint:
            return element.find('child').get('link')
    raise RneaControllerError(f'the URDF has no joint {joint!r}')


class _Kinematics:
    """MuJoCo's model of the URDF (the simulator's, `sim.plant.build_model`) for the start
    pose's Jacobian and gravity torques, in plant joint order."""

    def __init__(self, urdf_text, controlled):
        import mujoco

        from rnea_controller.sim.plant import build_model, HINGE_OR_SLIDE
        self.mujoco = mujoco
        self.m = build_model(urdf_text)
        self.d = mujoco.MjData(self.m)
        ids = [j for j in range(self.m.njnt) if int(self.m.jnt_type[j]) in HINGE_OR_SLIDE]
        self.names = tuple(self.m.joint(j).name for j in ids)
        self.columns = [int(self.m.jnt_dofadr[ids[self.names.index(n)]]) for n in controlled]
        self.flange = int(self.m.jnt_bodyid[ids[self.names.index(controlled[-1])]])
        first = int(self.m.jnt_bodyid[ids[self.names.index(controlled[0])]])
        self.reach = self._length(first)

    def _length(self, first):
        """[m] the arm's length: the offsets of the bodies from the first controlled joint's
        body out to the flange's, summed (the scale of the Jacobian's translation)."""
        length, body = 0.0, self.flange
        while body not in (first, 0):
            length += float(np.linalg.norm(self.m.body_pos[body]))
            body = int(self.m.body_parentid[body])
        return max(length, 1e-3)

    def at(self, q):
        """(smallest singular value of the flange's Jacobian [translation / reach; rotation]
        in the controlled joints' columns, gravity torques [N·m]) at q (plant order)."""
        mujoco, m, d = self.mujoco, self.m, self.d
        d.qpos[:] = q
        d.qvel[:] = 0.0
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mujoco.mj_jacBody(m, d, jacp, jacr, self.flange)
        J = np.vstack([jacp / self.reach, jacr])[:, self.columns]
        gravity = np.zeros(m.nv)
        mujoco.mj_rne(m, d, 0, gravity)
        return float(np.linalg.svd(J, compute_uv=False)[-1]), gravity


def start_pose(urdf_text, model, controlled):
    """(plant joint names, start positions [rad or m]) of the arm (module doc): the controlled
    joints' pose farthest from a singularity among the 3^n about their middles whose gravity
    torques stay within GRAVITY_SHARE of the effort limits; the others at their middles, a mimic
    joint at its leader's relation."""
    kin = _Kinematics(urdf_text, controlled)
    middle, half = joint_ranges(model, kin.names)
    q0 = middle.copy()
    index = [kin.names.index(n) for n in controlled]
    steps = np.minimum(START_STEP * half[index], MAX_START_STEP)
    efforts = model.effort_limits[[model.joint_index(n) for n in kin.names]]
    efforts = np.where(efforts > 0, efforts, np.inf)  # effort="0": not given
    signs = itertools.product((0, -1, 1), repeat=len(index)) if len(index) <= MAX_SEARCHED \
        else [(0,) * len(index)]
    best, chosen = None, q0
    for s in signs:
        q = q0.copy()
        q[index] += np.array(s) * steps
        _follow_leaders(q, model, kin.names)
        sigma, gravity = kin.at(q)
        load = float(np.max(np.abs(gravity) / efforts))
        key = (load <= GRAVITY_SHARE, round(sigma, 9) if load <= GRAVITY_SHARE else -load,
               -np.count_nonzero(s))
        if best is None or key > best:
            best, chosen = key, q
    return kin.names, chosen


def _follow_leaders(q, model, names):
    """Set each mimic joint of `names` (plant order) in q to its leader's relation."""
    for follower, leader, multiplier, offset in model.mimic:
        f, ld = model.joint_names[follower], model.joint_names[leader]
        if f in names and ld in names:
            q[names.index(f)] = multiplier * q[names.index(ld)] + offset


def geared_figures(model, names, controlled):
    """{'armature', 'damping', 'friction'}: per joint of `names` (plant order), the xArm7's
    figures (XARM7_GEARED) scaled by the joint's effort limit over the xArm7's at the same
    place in the chain; 0 on joints not controlled and on joints without an effort limit."""
    figures = {kind: np.zeros(len(names)) for kind in XARM7_GEARED}
    m = len(controlled)
    for k, joint in enumerate(controlled):
        place = round(k * (len(XARM7_EFFORT) - 1) / max(m - 1, 1))
        effort = model.effort_limits[model.joint_index(joint)]
        ratio = effort / XARM7_EFFORT[place] if 0 < effort < math.inf else 0.0
        for kind, values in XARM7_GEARED.items():
            figures[kind][names.index(joint)] = values[place] * ratio
    return figures
