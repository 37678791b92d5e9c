"""URDF reading: every kind of bad input gets an error that names what and where."""
import re
import textwrap

import numpy as np
import pytest

from rnea_controller import DescriptionWarning, RobotModel, UrdfError
from rnea_controller.dynamics.urdf import parse_urdf

LINK = '<link name="{}"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ' \
       'ixy="0" ixz="0" iyz="0"/></inertial></link>'


def urdf(*elements):
    return '<robot name="t">\n' + '\n'.join(elements) + '\n</robot>'


def joint(name, parent, child, kind='revolute', axis='0 0 1', extra=''):
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/>'
            f'<child link="{child}"/><axis xyz="{axis}"/>{extra}</joint>')


def two_links(**kwargs):
    return urdf(LINK.format('base'), LINK.format('arm'), joint('j1', 'base', 'arm', **kwargs))


@pytest.mark.parametrize('text, message', [
    ('<robot name="t"><link name="a"></robot>', r'malformed XML at line 1, column \d+'),
    ('', 'URDF is empty'),
    ('<model/>', r'root element is <model> \(line 1\), expected <robot>'),
    (urdf(LINK.format('a'), LINK.format('b')), 'robot has 2 root links.*a, b'),
    (urdf(LINK.format('a'), LINK.format('b'), joint('j1', 'a', 'b'), joint('j2', 'b', 'a')),
     'no root link'),
    (urdf(LINK.format('r'), LINK.format('a'), LINK.format('b'), joint('j0', 'r', 'a'),
          joint('j1', 'a', 'b'), joint('j2', 'b', 'a')), "link 'a' has two parent joints"),
    (urdf(LINK.format('base'), joint('j1', 'base', 'ghost')),
     r"joint 'j1' \(line 3\): child link 'ghost' is not defined"),
    (urdf(LINK.format('base'), joint('j1', 'nowhere', 'base')),
     r"joint 'j1' \(line 3\): parent link 'nowhere' is not defined"),
    (two_links(axis='0 0 0'), r"joint 'j1' \(line 4\): axis \(0, 0, 0\) has zero length"),
    (two_links(axis='0 zero 1'), r"joint 'j1' \(line 4\): <axis xyz=\"0 zero 1\"> \(line 4\)"),
    (two_links(kind='floating'), r"joint 'j1' \(line 4\): type \"floating\" is not supported"),
    (two_links(kind='planar'), r"joint 'j1' \(line 4\): type \"planar\" is not supported"),
    (two_links(kind='ball'), r'unknown type "ball"'),
    (two_links(extra='<mimic multiplier="2"/>'),
     r"joint 'j1' \(line 4\): <mimic> \(line 4\) has no joint"),
    (two_links(extra='<mimic joint="j1" offset="nan"/>'),
     r"joint 'j1' \(line 4\): <mimic offset=\"nan\"> \(line 4\) must be 1 finite numbers"),
    (urdf(LINK.format('base'), LINK.format('a'), LINK.format('b'),
          joint('j1', 'base', 'a', extra='<mimic joint="j2"/>'),
          joint('j2', 'a', 'b', extra='<mimic joint="j1"/>')),
     r"mimic joints mimic one another in a cycle: joint 'j1' \(line 5\), joint 'j2' \(line 6\)"),
    (urdf(LINK.format('base'), LINK.format('base')), "link name 'base' is used twice"),
    (urdf(LINK.format('base'), '<link name="arm"><inertial><mass value="-2"/></inertial></link>',
          joint('j1', 'base', 'arm')), r"link 'arm' \(line 3\): mass -2.0 kg must be"),
    (urdf(LINK.format('base'), '<link name="arm"><inertial><mass value="1"/><inertia ixx="-0.1" '
          'iyy="0.1" izz="0.1"/></inertial></link>', joint('j1', 'base', 'arm')),
     r"link 'arm' \(line 3\): inertia is not positive semi-definite"),
    (urdf(LINK.format('base'), '<link name="arm"><inertial><mass value="1"/><inertia ixx="1" '
          'iyy="1" izz="1" ixy="5"/></inertial></link>', joint('j1', 'base', 'arm')),
     r"link 'arm' \(line 3\): inertia is not positive semi-definite"),
    (urdf(LINK.format('base'), LINK.format('arm'), joint('j1', 'base', 'arm', kind='fixed')),
     'has no actuated joint'),
    (urdf(LINK.format('base'), LINK.format('arm'),
          '<joint name="j1" type="revolute"><parent link="base"/></joint>'),
     r"joint 'j1' \(line 4\): missing <child"),
])
def test_bad_urdf_is_refused_with_what_and_where(text, message):
    with pytest.raises(UrdfError, match=message):
        RobotModel.from_urdf_string(text)


def arm_link(mass='1', inertia='ixx="0.1" iyy="0.1" izz="0.1"', origin=''):
    return (f'<link name="arm"><inertial>{origin}<mass value="{mass}"/><inertia {inertia}/>'
            '</inertial></link>')


def with_arm(arm, limit=''):
    """base (line 2), arm (line 3) and joint j1 (line 4) carrying `limit`."""
    return urdf(LINK.format('base'), arm, joint('j1', 'base', 'arm', extra=limit))


# Issue 11, defect 5: a description is checked before use; each refusal names the link or joint,
# the value and the line. 1e308 kg loads today and overflows the control law to inf.
@pytest.mark.parametrize('text, message', [
    (with_arm(arm_link(mass='1e308')),
     r"link 'arm' \(line 3\): mass 1e\+308 kg is above the bound of 10000 kg"),
    (with_arm(arm_link(mass='10000.5')), r"link 'arm' \(line 3\): mass 10000.5 kg is above"),
    (with_arm(arm_link(inertia='ixx="0.1" iyy="0.1" izz="-0.0101"')),
     r"link 'arm' \(line 3\): inertia is not positive semi-definite \(principal moments "
     r'\[-0.0101,  0.1   ,  0.1   \] kg·m²\)'),
    (with_arm(arm_link(inertia='ixx="1e12" iyy="1e12" izz="1e12"')),
     r"link 'arm' \(line 3\): inertia is above the bound of 1e\+10 kg·m²"),
    (with_arm(arm_link(origin='<origin xyz="0 2e3 0"/>')),
     r"link 'arm' \(line 3\): centre of mass \[   0., 2000.,    0.\] m is farther than 1000 m"),
    (with_arm(LINK.format('arm'), '<limit effort="-5" velocity="1"/>'),
     r"joint 'j1' \(line 4\): effort limit -5.0 N·m or N must be positive"),
    (with_arm(LINK.format('arm'), '<limit effort="5" velocity="-1e-3"/>'),
     r"joint 'j1' \(line 4\): velocity limit -0.001 rad/s or m/s must be positive"),
    (with_arm(LINK.format('arm'), '<limit effort="1e999" velocity="1"/>'),
     r'<limit effort="1e999"> \(line 4\) must be 1 finite numbers'),
    (with_arm(LINK.format('arm'), '<limit lower="1" upper="-1" effort="5" velocity="1"/>'),
     r"joint 'j1' \(line 4\): lower position limit 1.0 is above the upper limit -1.0"),
    (with_arm(LINK.format('arm'), '<origin xyz="0 0 1e5"/>'),
     r"joint 'j1' \(line 4\): origin .* m is farther than 1000 m from its parent"),
])
def test_physically_impossible_descriptions_are_refused(text, message):
    with pytest.raises(UrdfError, match=message):
        RobotModel.from_urdf_string(text)


def test_what_real_urdfs_have_still_loads():
    """CAD round-off, massless frame links, point masses, absent limits, and limits of 0 (many
    URDFs write 0 for "not given": read as absent), all without a warning."""
    round_off = 'ixx="0.1" iyy="0.1" izz="0.2000000001" ixy="0" ixz="0" iyz="0"'  # a + b - c < 0
    text = urdf(LINK.format('base'), arm_link(inertia=round_off), '<link name="tool"/>',
                '<link name="tip"><inertial><mass value="0.1"/></inertial></link>',
                joint('j1', 'base', 'arm', extra='<limit effort="5" velocity="1"/>'),
                joint('j2', 'arm', 'tool', kind='fixed'), joint('j3', 'tool', 'tip'))
    model = RobotModel.from_urdf_string(text)
    np.testing.assert_array_equal(model.effort_limits, [5.0, np.inf])
    np.testing.assert_array_equal(model.velocity_limits, [1.0, np.inf])
    fixed_with_zero_limits = text.replace('kind', '').replace(
        'type="fixed">', 'type="fixed"><limit effort="0" velocity="0"/>')
    assert RobotModel.from_urdf_string(fixed_with_zero_limits).n == 2  # Kinova has these
    zero = RobotModel.from_urdf_string(text.replace('effort="5" velocity="1"',
                                                    'effort="0" velocity="0"'))
    np.testing.assert_array_equal(zero.effort_limits, [np.inf, np.inf])
    np.testing.assert_array_equal(zero.velocity_limits, [np.inf, np.inf])


@pytest.mark.parametrize('inertia, moments', [
    ('ixx="0.1" iyy="0.1" izz="0.5"', r'\[0.1, 0.1, 0.5\]'),
    ('ixx="2.3e-6" iyy="3.5e-6" izz="7.3e-6"', r'\[2.3e-06, 3.5e-06, 7.3e-06\]'),  # Allegro
])
def test_an_inertia_no_rigid_body_has_loads_with_one_warning_naming_it(inertia, moments):
    with pytest.warns(DescriptionWarning) as caught:
        model = RobotModel.from_urdf_string(with_arm(arm_link(inertia=inertia)))
    assert len(caught) == 1 and model.n == 1
    assert re.match(rf"link 'arm' \(line 3\): inertia breaks the triangle inequality "
                    rf'\(principal moments {moments} kg·m²\)', str(caught[0].message))


@pytest.mark.parametrize('izz, loads', [('-1e-9', True), ('-0.0054', True),
                                         ('-0.0099', True), ('-0.0101', False)])
def test_a_negative_moment_beyond_round_off_warns_up_to_a_tenth_of_the_largest(izz, loads):
    """Published models have them (romeo_laas_small's hips: -5 %): loaded with a warning naming
    the link, its line and the moments, as Pinocchio loads them; a tenth or more is refused."""
    text = with_arm(arm_link(inertia=f'ixx="0.1" iyy="0.1" izz="{izz}"'))
    if not loads:
        with pytest.raises(UrdfError, match=r"link 'arm' \(line 3\): inertia is not positive"):
            RobotModel.from_urdf_string(text)
        return
    with pytest.warns(DescriptionWarning) as caught:
        assert RobotModel.from_urdf_string(text).n == 1
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and re.match(r"link 'arm' \(line 3\): inertia is not positive "
                                           r'semi-definite \(principal moments \[-', messages[0])


def test_the_fixed_base_may_hold_an_impossible_inertia_with_a_warning():
    """Legged robots' and Tiago's base links (-2e-22 and -3.5e-8 kg·m²): never in the dynamics.
    The same inertia on a moving link is refused."""
    bad = ('<link name="base"><inertial><mass value="1"/><inertia ixx="-0.02" iyy="0.1" '
           'izz="0.1"/></inertial></link>')
    text = urdf(bad, LINK.format('arm'), joint('j1', 'base', 'arm'))
    with pytest.warns(DescriptionWarning, match=r"link 'base' \(line 2\): inertia is not "
                      r'positive semi-definite .*fixed base never enters the dynamics'):
        assert RobotModel.from_urdf_string(text).n == 1
    moving = urdf(LINK.format('base'), bad.replace('"base"', '"arm"'), joint('j1', 'base', 'arm'))
    with pytest.raises(UrdfError, match=r"link 'arm' \(line 3\): inertia is not positive"):
        RobotModel.from_urdf_string(moving)


def test_mimic_joints_are_joints_of_the_model_with_their_relation():
    """Pinocchio's default: a mimic joint is an independent joint; the model records
    q_follower = multiplier · q_leader + offset, leaders first, even when the follower comes
    first in the tree; a mimic of a fixed joint has no relation, one of an unknown joint warns."""
    text = urdf(LINK.format('base'), LINK.format('a'), LINK.format('b'), LINK.format('c'),
                LINK.format('d'),
                joint('j1', 'base', 'a', extra='<mimic joint="j2" multiplier="-2" offset="0.1"/>'),
                joint('j2', 'base', 'b'), joint('j3', 'b', 'c', extra='<mimic joint="j1"/>'),
                joint('j4', 'c', 'd', kind='fixed'))
    model = RobotModel.from_urdf_string(text)
    assert model.joint_names == ('j1', 'j2', 'j3')
    assert model.mimic == ((0, 1, -2.0, 0.1), (2, 0, 1.0, 0.0))
    of_fixed = text.replace('<mimic joint="j1"/>', '<mimic joint="j4"/>')
    assert RobotModel.from_urdf_string(of_fixed).mimic == ((0, 1, -2.0, 0.1),)
    with pytest.warns(DescriptionWarning, match=r"joint 'j3' \(line 9\): mimics joint 'nope', "
                      'which is not a joint of the robot'):
        unknown = RobotModel.from_urdf_string(text.replace('"j1"/>', '"nope"/>'))
    assert unknown.mimic == ((0, 1, -2.0, 0.1),)


def test_cycle_below_a_root_is_named():
    text = urdf(LINK.format('r'), LINK.format('a'), LINK.format('b'), LINK.format('c'),
                joint('j0', 'r', 'a'), joint('j1', 'b', 'c'), joint('j2', 'c', 'b'))
    with pytest.raises(UrdfError, match='kinematic cycle: links b, c are not reachable'):
        RobotModel.from_urdf_string(text)


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(UrdfError, match='cannot read URDF file .*missing.urdf'):
        RobotModel.from_urdf_file(tmp_path / 'missing.urdf')
    bad = tmp_path / 'bad.urdf'
    bad.write_text(two_links(axis='0 0 0'))
    with pytest.raises(UrdfError, match=r'bad.urdf: joint .j1. \(line 4\)'):
        RobotModel.from_urdf_file(bad)


def test_mimic_joint_can_be_locked_and_locked_names_are_checked():
    text = two_links(extra='<mimic joint="j2"/>')
    text = text.replace('</robot>', LINK.format('tip') + joint('j2', 'arm', 'tip') + '</robot>')
    model = RobotModel.from_urdf_string(text, locked_joints=['j1'])
    assert model.joint_names == ('j2',)
    with pytest.raises(UrdfError, match="locked joint 'nope' is not a joint"):
        RobotModel.from_urdf_string(text, locked_joints=['nope'])


def test_parsed_values_units_and_defaults():
    text = textwrap.dedent("""\
        <robot name="r">
          <link name="base"/>
          <link name="arm">
            <inertial>
              <origin xyz="0.1 0 0" rpy="0 0 1.5707963267948966"/>
              <mass value="2"/>
              <inertia ixx="1" ixy="0" ixz="0" iyy="2" iyz="0" izz="3"/>
            </inertial>
          </link>
          <joint name="j" type="prismatic">
            <parent link="base"/><child link="arm"/>
            <axis xyz="0 0 2"/>
            <limit lower="-0.5" upper="0.5" effort="100" velocity="0.2"/>
          </joint>
        </robot>""")
    description = parse_urdf(text)
    arm = description.links[1]
    np.testing.assert_allclose(arm.inertia, np.diag([2.0, 1.0, 3.0]), atol=1e-12)  # rotated
    model = RobotModel.from_urdf_string(text)
    np.testing.assert_allclose(model.axes[0], (0, 0, 1))
    np.testing.assert_allclose(model.position_limits, [[-0.5, 0.5]])
    assert model.effort_limits[0] == 100 and model.velocity_limits[0] == 0.2
    assert model.urdf == text and model.joint_types == ('prismatic',)
