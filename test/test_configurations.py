"""Any configuration the parameter checks accept runs: the law's tick never raises and never
commands a non-finite torque or one beyond an effort limit, whatever the numbers (hypothesis).

A number inside its range is the user's to choose (`ros2 param set` accepts it), so the compiled
law must hold at every one of them, the ranges' ends included: an exception in it ends the node
(its final command published), a NaN in it would reach the arm. Before this test,
`estimation.forgetting_time` at or under one window of the estimate (0.01 s at 1 kHz; the range
starts at 0) divided by a forgetting factor of 0 in the first window: ZeroDivisionError.

Each example: one to four numbers drawn from the whole table (the per-joint families on one
joint) and maybe one of its choices (the law, the friction's source, a bool), set on the xArm7
in MuJoCo with its URDF friction true (the estimate, the integral and the Coulomb feedforward
all busy), the node's tick (test/timed_loop.py) through a quick move from rest to rest and
half a second at rest, with commands 2 ms late.
"""
import math

from hypothesis import example, given, HealthCheck, settings
from hypothesis import strategies as st
import numpy as np
from test_robustness import JOINTS, MODEL, START, URDF
from timed_loop import Node, run, Timing

from rnea_controller.control import parameters
from rnea_controller.control.law import validate_parameters
from rnea_controller.control.trajectory import plan_arrays
from rnea_controller.errors import ParameterError
from rnea_controller.sim.plant import Plant, PlantOptions
from rnea_controller.tools.send_trajectory import demo_motion

NUMBERS = [spec for spec in parameters.TABLE
           if spec.kind in ('int', 'double') and spec.low is not None and spec.high is not None]
CHOICES = [spec for spec in parameters.TABLE if spec.choices or spec.kind == 'bool']
JOINT = JOINTS[4]  # the per-joint families on a light wrist joint
MOVE, REST = 0.6, 0.5  # [s]
ARM = PlantOptions(damping=tuple(MODEL.damping), friction=tuple(MODEL.friction))


@st.composite
def number(draw, spec):
    """A value inside `spec`'s range, its ends and their neighbourhood often (a choice or a
    bool: any)."""
    if spec.kind == 'bool':
        return draw(st.booleans())
    if spec.choices:
        return draw(st.sampled_from(spec.choices))
    low, high = spec.low, spec.high
    if spec.kind == 'int':
        return draw(st.one_of(st.sampled_from([int(low), int(high)]),
                              st.integers(int(low), int(high))))
    ends = [high, low if not spec.low_exclusive else math.nextafter(low, math.inf)]
    if low <= 0.0 < high:
        ends += [1e-9, 1e-3]  # just above 0: where a 0 would turn a feature off
    return draw(st.one_of(st.sampled_from(ends), st.floats(
        low, high, exclude_min=spec.low_exclusive, allow_nan=False)))


@st.composite
def configuration(draw):
    """{parameter: value} of one to four numbers of the table, and maybe a choice."""
    specs = draw(st.lists(st.sampled_from(NUMBERS), min_size=1, max_size=4,
                          unique_by=lambda s: s.name))
    specs += draw(st.lists(st.sampled_from(CHOICES), max_size=1))
    return {spec.name.replace(parameters.JOINT, JOINT): draw(number(spec)) for spec in specs}


def reference():
    w = demo_motion(JOINTS, START, MODEL.velocity_limits, MODEL.position_limits, MOVE)
    return plan_arrays(JOINTS, w.times, w.positions, w.velocities, w.accelerations,
                       joint_names=JOINTS, position_limits=MODEL.position_limits,
                       current=np.vstack([START, np.zeros((2, len(JOINTS)))]), now=0.0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=configuration())
@example(values={'estimation.forgetting_time': 0.01})  # one window: it divided by 0
@example(values={'effort_limits.joint5': 5e-324})  # the residual's unit and the contact
# threshold underflowed to 0: both divided by it
@example(values={'update_rate': 10, 'gains.joint5.p': 0.0})
@example(values={'gains.joint5.d': 0.0})  # rule 6's breakaway divided by Kd d (stop 52)
def test_any_accepted_configuration_commands_finite_torques_within_the_limits(values):
    try:
        validate_parameters(values, MODEL)
    except ParameterError:
        return  # a combination the checks refuse (e.g. a gain against its law): not run
    ref = reference()
    node = Node(MODEL, values, ref)
    result = run(Plant(URDF, ARM), node, MOVE + REST, Timing(delay=0.002), START, ref)
    taus = np.array([tau for _, tau in result.commands])
    limits = np.asarray(node.cfg.effort_limits)
    index = node.cfg.index
    assert len(taus) > 0.5 * (MOVE + REST) / node.cfg.period, (values, len(taus))
    assert np.all(np.isfinite(taus)), values
    assert np.all(np.abs(taus[:, index]) <= limits * (1 + 1e-9)), values
