"""The one parameter table: the shipped YAML, the docs and the ROS descriptors agree with it;
each range refuses what is physically absurd; property tests of the checks (hypothesis)."""
import math
from pathlib import Path
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest
import yaml

from rnea_controller import default_urdf_path, RobotModel
from rnea_controller.control import parameters
from rnea_controller.control.law import validate_parameters
from rnea_controller.control.parameters import check, PER_JOINT, spec_of, TABLE
from rnea_controller.dynamics.rnea import rnea
from rnea_controller.errors import ParameterError

REPO = Path(__file__).resolve().parents[1]
MODEL = RobotModel.from_urdf_file(default_urdf_path())
NUMBERS = [spec for spec in TABLE if spec.kind in ('int', 'double') and spec.low is not None]


def test_the_shipped_yaml_is_the_table_rendered_and_loads_as_ros_parameters():
    text = (REPO / 'config' / 'controller.yaml').read_text()
    assert text == parameters.render_yaml(), 'regenerate: python -m ' \
        'rnea_controller.control.parameters --yaml > config/controller.yaml'
    values = yaml.safe_load(text)['/**']['ros__parameters']
    assert values == {s.name: s.default for s in TABLE if s.default is not None
                      and not s.per_joint}
    assert all(max(map(len, text.splitlines())) <= 99 for _ in [0])
    validate_parameters(values, MODEL)


def test_the_docs_table_is_the_table_rendered():
    out = subprocess.run([sys.executable, '-m', 'rnea_controller.control.parameters',
                          '--markdown'], capture_output=True, text=True, check=True).stdout
    assert out == parameters.render_markdown()
    assert (REPO / 'docs' / 'parameters.md').read_text().endswith(out)
    for spec in TABLE:
        assert f'| `{spec.name}` |' in out


@pytest.mark.parametrize('spec', TABLE, ids=lambda s: s.name)
def test_each_entry_is_complete_and_its_default_passes_its_own_check(spec):
    assert spec.kind in ('bool', 'int', 'double', 'string', 'string_array', 'double_array')
    assert spec.change in parameters.CHANGES and spec.description
    if spec.kind in ('int', 'double', 'double_array'):
        assert spec.unit and spec.low is not None and spec.low < spec.high
    name = spec.name.replace(parameters.JOINT, 'elbow_joint')
    assert check(name, spec.default) == spec.default
    assert spec_of(name) == (spec, 'elbow_joint' if spec.per_joint else None)


@pytest.mark.parametrize('values, message', [
    ({'update_rate': 50000}, r'update_rate = 50000: is out of range \[10, 10000\] Hz'),
    ({'update_rate': 0.5}, 'update_rate = 0.5: must be an integer'),
    ({'state_timeout': 100.0}, r'state_timeout = 100.0: is out of range \[0.001, 1\] s'),
    ({'payload.link': 'tool0', 'payload.mass': 1e12},
     r'payload.mass = 1000000000000.0: is out of range \[0, 1000\] kg'),
    ({'payload.com': [0.0, 1e200, 0.0]}, r'payload.com = \[0.0, 1e\+200, 0.0\]: is out of range'),
    ({'gravity': [0.0, 0.0, -1e308]}, 'gravity = .*is out of range'),
    ({'gains.elbow_joint.p': 1e9}, 'gains.elbow_joint.p = 1000000000.0: is out of range'),
    ({'latency_compensation': 'soon'}, "latency_compensation = 'soon': must be 'auto', 'off'"),
    ({'latency_compensation': '0.5'}, 'latency_compensation'),
    ({'velocity_source': 'guess'}, "velocity_source = 'guess': must be one of auto"),
    ({'friction.elbow_joint.coulomb': -1.0}, 'friction.elbow_joint.coulomb = -1.0'),
    ({'friction_velocity_width': 0.0}, 'friction_velocity_width = 0.0: is out of range'),
    ({'armature.elbow_joint': -0.1}, r'armature.elbow_joint = -0.1: is out of range \[0, '),
    ({'robot_compensates_gravity': 1}, 'robot_compensates_gravity = 1: must be true or false'),
    ({'constraints.goal_time': -1.0}, 'constraints.goal_time = -1.0'),
    ({'nonsense': 1.0}, 'nonsense: not a parameter of the controller'),
])
def test_absurd_values_are_refused_with_the_name_and_the_value(values, message):
    with pytest.raises(ParameterError, match=message):
        validate_parameters(values, MODEL)


def test_the_issue_parameters_exist_with_their_contract_defaults():
    expected = {
        'phase_lock': True, 'latency_compensation': 'auto', 'velocity_source': 'auto',
        'velocity_filter_cutoff': 100.0, 'robot_compensates_gravity': False,
        'friction_velocity_width': 0.01, 'constraints.stopped_velocity_tolerance': 0.01,
        'constraints.goal_time': 0.0, 'state_publish_rate': 50.0, 'action_monitor_rate': 20.0,
        'effort_controller': 'effort_controller', 'command_topic': 'effort_controller/commands',
        # issue 29: the URDF's <dynamics> only when asked (friction_source: urdf); the online
        # estimate and the integral at rest on by default (docs/controller.md)
        'friction_source': 'none', 'friction.<joint>.viscous': None,
        'friction.<joint>.coulomb': None, 'estimation.forgetting_time': 1.0,
        'estimation.max_armature': 1.0, 'integral_gain': 4000.0, 'integral_clamp': 0.2,
        'armature.<joint>': 0.0,
        'constraints.<joint>.trajectory': 0.0, 'constraints.<joint>.goal': 0.0,
    }
    assert {name: parameters.SPECS[name].default for name in expected} == expected
    assert check('latency_compensation', '0.002') == '0.002'


def test_ros_descriptors_carry_the_table_ranges():
    from rnea_controller.ros.parameters import descriptor
    for spec in NUMBERS:
        d = descriptor(spec)
        ranges = d.integer_range if spec.kind == 'int' else d.floating_point_range
        assert (ranges[0].from_value, ranges[0].to_value) == (spec.low, spec.high), spec.name
        assert spec.change in d.additional_constraints


@settings(max_examples=200, deadline=None)
@given(spec=st.sampled_from(NUMBERS), x=st.floats(allow_nan=True, allow_infinity=True))
def test_a_number_is_accepted_exactly_when_finite_and_within_its_range(spec, x):
    value = int(x) if spec.kind == 'int' and math.isfinite(x) and abs(x) < 1e15 else x
    name = spec.name.replace(parameters.JOINT, 'elbow_joint')
    inside = (isinstance(value, int) if spec.kind == 'int' else math.isfinite(value)) and (
        spec.low < value <= spec.high if spec.low_exclusive else spec.low <= value <= spec.high)
    try:
        check(name, value)
        accepted = True
    except ParameterError as error:
        accepted = False
        assert str(error).startswith(f'{name} = {value!r}: ')
    assert accepted == inside


@settings(max_examples=60, deadline=None)
@given(values=st.fixed_dictionaries({}, optional={
    'gains.elbow_joint.p': st.floats(-10, 2e6), 'payload.mass': st.floats(-1, 2e3),
    'gravity': st.lists(st.floats(-200, 200), min_size=3, max_size=3),
    'state_timeout': st.floats(0, 2), 'control_law': st.sampled_from(
        ['computed_torque', 'feedforward_pd', 'pid']),
    'friction.wrist_1_joint.viscous': st.floats(-1, 2e4)}))
def test_validate_parameters_accepts_exactly_what_each_check_accepts(values):
    values = {'payload.link': 'tool0', **values}
    each = True
    for name, value in values.items():
        try:
            check(name, value)
        except ParameterError:
            each = False
    try:
        cfg = validate_parameters(values, MODEL)
    except ParameterError:
        assert not each
        return
    assert each and cfg.law == values.get('control_law', 'computed_torque')


def test_arrays_as_rclpy_hands_them_over_are_checked_as_lists():
    import array
    assert check('gravity', array.array('d', [0.0, 0.0, -9.81])) == [0.0, 0.0, -9.81]
    with pytest.raises(ParameterError, match=r'gravity = \[0.0, 0.0, -1e\+308\]: is out of'):
        check('gravity', array.array('d', [0.0, 0.0, -1e308]))


def test_per_joint_families_expand_for_each_joint():
    names = parameters.per_joint_names('elbow_joint')
    assert len(names) == len(PER_JOINT) and 'gains.elbow_joint.p' in names
    assert parameters.joint_of_parameter('constraints.elbow_joint.goal') == 'elbow_joint'
    assert parameters.joint_of_parameter('constraints.goal_time') is None


def test_a_model_kept_across_validations_is_the_model_of_the_values_each_time():
    """validate_parameters keeps the last model it built (issue 45: a change of gains does not
    rebuild it); a change of payload, gravity or armature builds the model of the new values.
    The payload's gravity torque is linear in its mass, and none is left without gravity."""
    q, zero = np.linspace(-0.5, 0.5, MODEL.n), np.zeros(MODEL.n)

    def gravity_torque(**values):
        return rnea(validate_parameters({'payload.link': 'tool0', **values}, MODEL).model,
                    q, zero, zero)

    base = validate_parameters({'payload.link': 'tool0'}, MODEL)
    assert validate_parameters({'payload.link': 'tool0', 'gains.elbow_joint.p': 123.0},
                               MODEL).model is base.model
    g0, g1 = gravity_torque(), gravity_torque(**{'payload.mass': 1.0})
    g2 = gravity_torque(**{'payload.mass': 2.0, 'gains.elbow_joint.p': 50.0})
    assert np.abs(g1 - g0).max() > 0.1
    np.testing.assert_allclose(g2 - g0, 2.0 * (g1 - g0), atol=1e-9)
    np.testing.assert_allclose(gravity_torque(), g0, atol=1e-12)
    np.testing.assert_allclose(gravity_torque(**{'payload.mass': 2.0, 'gravity': [0.0] * 3}),
                               0.0, atol=1e-12)
    armed = validate_parameters({'payload.link': 'tool0', 'armature.elbow_joint': 0.5}, MODEL)
    assert armed.model.armature[MODEL.joint_index('elbow_joint')] == 0.5
    assert validate_parameters({'payload.link': 'tool0'}, MODEL).model.armature[
        MODEL.joint_index('elbow_joint')] == MODEL.armature[MODEL.joint_index('elbow_joint')]
