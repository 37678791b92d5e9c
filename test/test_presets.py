"""config/robots/*.yaml against a URDF of each arm (the oracle: the makers' descriptions).

Checked against a URDF: fr3 (example-robot-data's Panda, joints renamed panda_jointN ->
fr3_jointN: same torque limits 87/12 N·m, not the same kinematics or position limits), ur5e
(example-robot-data's UR5: same joint names and torque limits 150/28 N·m as the UR5e), xarm7
(example-robot-data's xarm7.urdf, from xarm_ros2), arm (the bundled URDF). Not checked: gen3
(example-robot-data's Kinova is a Jaco2 6-DoF, not a Gen3): its file is only checked for form.
"""
from pathlib import Path
import re

from conftest import flatten, REPO, robot_data_urdf
import pytest
import yaml

from rnea_controller import default_urdf_path, RobotModel

try:  # the parameter table's validation (control/parameters.py), else the law's
    from rnea_controller.control.parameters import validate_parameters
except ImportError:
    from rnea_controller.control.law import validate_parameters

PRESETS = Path(REPO / 'config' / 'robots')
# preset: (URDF of example-robot-data or None for the bundled arm, joint renaming, locked)
URDFS = {
    'fr3': ('panda_description/urdf/panda.urdf', ('panda_joint', 'fr3_joint'),
            ['panda_finger_joint1', 'panda_finger_joint2']),  # the gripper: not the arm's
    'ur5e': ('ur_description/urdf/ur5_robot.urdf', None, None),
    'xarm7': ('xarm_description/urdf/xarm7.urdf', None, None),
    'arm': (None, None, None),
}
NAMES = ('fr3', 'ur5e', 'gen3', 'xarm7', 'arm')


def load(name):
    data = yaml.safe_load((PRESETS / f'{name}.yaml').read_text())
    assert list(data) == ['/**'] and list(data['/**']) == ['ros__parameters'], name
    return dict(flatten(data['/**']['ros__parameters']))


def model_of(name):
    relative, rename, locked = URDFS[name]
    path = default_urdf_path() if relative is None else robot_data_urdf(relative)
    text = Path(path).read_text()
    if rename:
        text = text.replace(*rename)
    return RobotModel.from_urdf_string(text, locked_joints=locked)


def test_one_preset_per_arm():
    assert sorted(p.stem for p in PRESETS.glob('*.yaml')) == sorted(NAMES)


@pytest.mark.parametrize('name', NAMES)
def test_preset_form_each_value_with_a_comment(name):
    values = load(name)
    assert not values['command_topic'].startswith('/'), 'relative: a namespace moves it'
    assert isinstance(values['robot_compensates_gravity'], bool)
    assert values['torque_rate_limit'] >= 0.0 and 0.0 < values['state_timeout'] <= 0.1
    joints = values.get('joints', [])
    limits = {k.split('.', 1)[1]: v for k, v in values.items() if k.startswith('effort_limits.')}
    assert sorted(limits) == sorted(joints)  # every joint limited, nothing else
    assert all(v > 0 for v in limits.values())
    lines = (PRESETS / f'{name}.yaml').read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r'^\s{4}\w+:', line):  # a parameter of ros__parameters
            assert lines[i - 1].strip().startswith('#'), f'{name}: no comment above {line}'


@pytest.mark.parametrize('name', sorted(URDFS))
def test_preset_matches_the_arms_urdf_and_validates(name):
    values = load(name)
    model = model_of(name)
    for joint in values.get('joints', []):
        assert joint in model.joint_names, f'{name}: {joint} not in {model.joint_names}'
        limit = values[f'effort_limits.{joint}']
        urdf = model.effort_limits[model.joint_index(joint)]
        assert limit <= urdf, f'{name}: {joint} {limit} N·m above the URDF {urdf} N·m'
    validate_parameters(values, model)


def test_gravity_conventions():
    """FR3 (libfranka) and UR (direct torque) add g(q) on the robot side; the others do not."""
    assert {n: load(n)['robot_compensates_gravity'] for n in NAMES} == {
        'fr3': True, 'ur5e': True, 'gen3': False, 'xarm7': False, 'arm': False}
