"""tools/arms.py and rnea-demo's --robot, without processes: every arm's URDF is found (or its
absence said, exit 2), its start pose and demo motion stay within its URDF's limits, away from
a singularity and from its effort limits, and --geared's figures scale by the effort limits.

Oracle: the URDFs' own <limit> elements (read with ElementTree here, not through our model),
MuJoCo's Jacobian and gravity (through `arms._Kinematics`), Menagerie's xArm7 figures.
"""
import math
from pathlib import Path
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from rnea_controller.description_file import read_description
from rnea_controller.tools import arms, demo
from rnea_controller.tools.send_trajectory import controlled_demo_motion, VELOCITY_SHARE

AVAILABLE = [name for name in arms.ARMS if name != 'gen3']
PANDA_ARM = tuple(f'panda_joint{k}' for k in range(1, 8))
FINGERS = ('panda_finger_joint1', 'panda_finger_joint2')


def urdf_limits(text):
    """{joint: (lower, upper, velocity, effort)} of the URDF's movable joints, by ElementTree;
    a continuous joint's position limits are ±inf."""
    limits = {}
    for joint in ET.fromstring(text).findall('joint'):  # the robot's, not transmissions'
        if joint.get('type') in ('revolute', 'continuous', 'prismatic'):
            limit = joint.find('limit')
            bounded = joint.get('type') != 'continuous' and limit.get('lower') is not None
            limits[joint.get('name')] = (
                float(limit.get('lower')) if bounded else -math.inf,
                float(limit.get('upper')) if bounded else math.inf,
                float(limit.get('velocity')), float(limit.get('effort')))
    return limits


@pytest.fixture(scope='module', params=AVAILABLE)
def arm(request):
    """(name, DemoArm, the URDF's limits) of every arm that --robot names and has here (the
    iiwa14's URDF is in ../shared/data, which a user's clone may lack: skipped, said why)."""
    try:
        setup = demo.demo_arm(request.param)
    except arms.ArmUnavailableError as error:
        if arms.ARMS[request.param].source != 'shared':
            raise
        pytest.skip(str(error))
    return request.param, setup, urdf_limits(read_description(setup.urdf))


def test_robot_names_parse_and_an_unknown_one_is_refused(capsys):
    assert demo.parse_args(['--robot', 'panda']).robot == 'panda'
    assert demo.parse_args([]).robot == 'arm' and demo.parse_args([]).urdf is None
    with pytest.raises(SystemExit) as refused:
        demo.parse_args(['--robot', 'puma560'])
    assert refused.value.code == 2 and "invalid choice: 'puma560'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        demo.parse_args(['--robot', 'panda', '--urdf', 'x.urdf'])
    assert 'not allowed with argument' in capsys.readouterr().err


def test_the_start_pose_is_inside_the_limits_away_from_a_singularity_and_gravity(arm):
    name, setup, limits = arm
    if name == 'arm':  # the bundled arm keeps the simulator's default, UR's home
        assert setup.start is None
        return
    start = dict(zip(setup.plant_joints, setup.start, strict=True))
    assert set(start) == set(limits), name
    for joint, q in start.items():
        lower, upper = limits[joint][:2]
        assert lower < q < upper, (name, joint, q, lower, upper)
    kinematics = arms._Kinematics(read_description(setup.urdf), setup.joints)
    sigma, gravity = kinematics.at(np.array(setup.start))
    middle, _ = arms.joint_ranges(setup.model, setup.plant_joints)
    sigma_middle, _ = kinematics.at(middle)
    # away from a singularity: 0.15-0.26 measured (mid-range: 0 for ur5, jaco2, iiwa14)
    assert sigma > 0.1 and sigma >= sigma_middle, (name, sigma, sigma_middle)
    efforts = np.array([limits[j][3] for j in setup.plant_joints])
    assert np.all(np.abs(gravity) <= arms.GRAVITY_SHARE * efforts), (name, gravity, efforts)


def test_the_demo_motion_stays_within_every_arms_limits(arm):
    """From the start pose, 6 s (test_demo's) and 10 s (the default): positions inside the
    URDF's limits by LIMIT_MARGIN, speeds within VELOCITY_SHARE of the limits, at rest at both
    ends; a gripper's fingers are not in it."""
    name, setup, limits = arm
    start = dict(zip(setup.plant_joints, setup.start or demo_home(setup), strict=True))
    centre = np.array([start[j] for j in setup.joints])
    for duration in (4.5, 8.5):
        motion = controlled_demo_motion(setup.model, setup.joints, centre, duration)
        assert motion.joint_names == setup.joints and not set(FINGERS) & set(setup.joints)
        for k, joint in enumerate(setup.joints):
            lower, upper, velocity, _ = limits[joint]
            q, qd = motion.positions[:, k], motion.velocities[:, k]
            assert lower + 0.099 <= q.min() and q.max() <= upper - 0.099, (name, joint)
            assert np.abs(qd).max() <= VELOCITY_SHARE * velocity * (1 + 1e-9), (name, joint)
            assert np.ptp(q) > 0.05, (name, joint, 'does not move')  # every joint moves
        np.testing.assert_allclose(motion.positions[-1], centre)
        assert not motion.velocities[-1].any()


def demo_home(setup):
    """The simulator's default start of the bundled arm (sim/node.py HOME)."""
    from rnea_controller.sim.node import HOME
    return HOME


def test_geared_figures_are_the_xarm7s_scaled_by_effort_limits():
    xarm = demo.demo_arm('xarm7')
    assert xarm.geared == {k: list(v) for k, v in arms.XARM7_GEARED.items()}  # ratio 1
    panda = demo.demo_arm('panda')
    efforts = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)  # panda.urdf's limit effort
    expected = [0.1 * e / x for e, x in zip(efforts, arms.XARM7_EFFORT, strict=True)] + [0, 0]
    np.testing.assert_allclose(panda.geared['armature'], expected)
    np.testing.assert_allclose(panda.geared['damping'][:2], [17.4, 17.4])
    assert panda.geared['friction'][7:] == [0.0, 0.0]  # the fingers: held, not geared
    assert demo.demo_arm('arm').geared is demo.GEARED  # the bundled arm's documented figures


def test_the_simulator_is_told_the_urdf_the_start_and_the_truth_options():
    args = demo.parse_args(['--robot', 'panda', '--geared', '--link-errors', '3', '--payload',
                            '1.5'])
    setup = demo.demo_arm('panda')
    params = dict(p.split(':=', 1) for p in demo.simulator_parameters(args, setup))
    assert Path(params['urdf_file']) == setup.urdf and setup.urdf.name == 'panda.urdf'
    start = eval(params['initial_positions'])  # noqa: S307 - a list literal of ours
    assert len(start) == 9 and start[7:] == [0.02, 0.02]  # fingers half open, still
    assert params['payload.link'] == 'panda_link7'  # the flange, not a finger
    assert params['payload.mass'] == '1.5' and params['link_errors.seed'] == '3'
    assert len(eval(params['damping'])) == 9  # noqa: S307
    bundled = dict(p.split(':=', 1) for p in demo.simulator_parameters(
        demo.parse_args(['--geared']), demo.demo_arm('arm')))
    assert 'urdf_file' not in bundled and eval(bundled['damping']) == demo.GEARED['damping']  # noqa: S307,E501


def test_a_missing_urdf_exits_2_naming_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(arms, 'SHARED_DATA', tmp_path)
    assert demo.main(['--robot', 'iiwa14', '--output', str(tmp_path / 'out')]) == 2
    err = capsys.readouterr().err
    assert f'no file {tmp_path / "iiwa14_drake.urdf"}' in err, err
    assert not (tmp_path / 'out').exists()  # nothing started
    assert demo.main(['--robot', 'gen3']) == 2
    err = capsys.readouterr().err
    assert 'Jaco2 (--robot jaco2)' in err and '--urdf FILE' in err, err
    monkeypatch.setattr(arms.importlib.metadata, 'distribution', missing_distribution)
    monkeypatch.delenv('AMENT_PREFIX_PATH', raising=False)
    assert demo.main(['--robot', 'ur5']) == 2
    assert 'pip install example-robot-data==6.0.0' in capsys.readouterr().err


def missing_distribution(name):
    raise arms.importlib.metadata.PackageNotFoundError(name)


def test_the_verdict_fails_on_each_bound(monkeypatch):
    """demo_verdict on figures as run_figures reads them from a bag: each bound fails alone."""
    setup = demo.demo_arm('panda')
    centre = np.array(setup.start[:7])
    motion = controlled_demo_motion(setup.model, setup.joints, centre, 4.0)

    class Result:
        failures = []
        report = {'loop': {'rate_hz': 1000.0}}

    def verdict(last=centre, share=0.4, modes=('tracking', 'hold'), counts=(0, 0)):
        figures = (np.array(last), np.full(7, share), list(modes),
                   dict(zip(('overspeeds', 'contacts'), counts, strict=True)))
        monkeypatch.setattr(demo, 'run_figures', lambda *_: figures)
        return demo.demo_verdict('bag', Result(), setup, motion)

    assert verdict()['passed'] and verdict()['joints'] == list(PANDA_ARM)
    off = centre + np.eye(7)[3] * 1.5e-3
    assert verdict(last=off)['failures'] == [
        'panda_joint4: ends -0.0015 rad from the goal (bound 0.001)']
    assert not verdict(last=centre + np.nan)['passed']  # a joint never measured
    assert 'measured at 1.60 x its velocity limit' in verdict(share=1.6)['failures'][0]
    braked = verdict(modes=('tracking', 'braking: overspeed'), counts=(1, 0))['failures']
    assert braked == ["the controller's mode was 'braking: overspeed'",
                      'the controller counted 1 overspeeds']
    assert verdict(counts=(0, 2))['failures'] == ['the controller counted 2 contacts']
