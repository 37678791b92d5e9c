"""The model is never the arm (issue 29): the node's law with its DEFAULT parameters against a
PD + gravity controller tuned on the TRUE arm, on a simulated xArm7 (MuJoCo, `sim.plant`) whose
truth differs from its URDF in one way at a time.

In process, lockstep simulated time (load-proof): the plant steps at 1 kHz; the command
computed from the state at step k acts during step k + 1 (one tick of delay, as a command
published after its state arrives); both controllers get the same states, reference and delay.
The node's law is `Controller` with the `ControllerConfig` of `validate_parameters` (what the
node runs), told the URDF only, with its defaults (the online estimate and the integral at
rest on since issue 29 d1; docs/controller.md). The reference: tau = g(q) + Kp e + Kd ed, g by
MuJoCo on the URDF (`Plant.gravity`), Kp = 400 m_i, Kd = 40 m_i, m_i = 1 / (M^-1)_ii of the
TRUE arm at the start pose (MuJoCo's `mj_fullM` on the plant, armature included). Both also
with the states as the node gets them: not in lockstep with the ticks (`lockstep`'s arrivals:
a new state every one or two ticks, ±0.2 ms of stamp jitter; the law gets each new state's
time step, 0 for a repeat). Issue 29's bounds in every row: never above 1.5× the velocity
limits, final error ≤ 1e-3 rad, RMS no worse than the reference; on the exact model ≥ 10×
better. `pytest -s` prints the table.
"""
import math

from conftest import robot_data_urdf
from lockstep import lockstep
import numpy as np
import pytest
from timed_loop import joint_inertias

from rnea_controller import RobotModel
from rnea_controller.control.law import Controller, validate_parameters
from rnea_controller.control.trajectory import plan_arrays
from rnea_controller.sim.plant import Plant, PlantOptions
from rnea_controller.tools.send_trajectory import demo_motion

URDF = robot_data_urdf('xarm_description/urdf/xarm7.urdf').read_text()
MODEL = RobotModel.from_urdf_string(URDF)  # its joints say <dynamics damping=10|5|2 friction=1>
JOINTS = MODEL.joint_names
START = np.array([0.0, 0.7, 0.0, 1.3, 0.0, 0.8, 0.0])  # no two joint axes aligned
MOVE, HOLD, DT = 3.0, 1.5, 0.001  # [s]
TOLD_NO_FRICTION = {f'friction.{j}.{kind}': 0.0 for j in JOINTS for kind in ('viscous', 'coulomb')}
ROWS = {  # name: (what the plant is, what the node is told)
    'exact (told friction 0)': (PlantOptions(), TOLD_NO_FRICTION),
    'URDF friction tags are placeholders': (PlantOptions(), {}),
    'URDF friction true': (PlantOptions(damping=tuple(MODEL.damping),
                                        friction=tuple(MODEL.friction)), {}),
    'geared: + armature 0.1 kg·m²': (PlantOptions(armature=(0.1,)), {}),
    'links off 30 % / 3 cm': (PlantOptions(link_errors=(7, 0.3, 0.3, 0.03)), {}),
}
ARRIVALS = 29  # the seed of the asynchronous states (`lockstep`)
FINAL = 1e-3  # [rad] issue 29: every row ends within this of its goal
ISSUE_23 = {'estimation.forgetting_time': 0.0, 'integral_gain': 0.0}  # the law before issue 29


def reference():
    """The demo motion (every joint, from rest to rest) about START, lasting MOVE."""
    w = demo_motion(JOINTS, START, MODEL.velocity_limits, MODEL.position_limits, MOVE)
    return plan_arrays(JOINTS, w.times, w.positions, w.velocities, w.accelerations,
                       joint_names=JOINTS, position_limits=MODEL.position_limits,
                       current=np.vstack([START, np.zeros((2, len(JOINTS)))]), now=0.0)


def true_joint_inertias(plant):
    """m_i = 1 / (M^-1)_ii at START, M by MuJoCo on the plant (the true arm) [kg·m²]."""
    return joint_inertias(plant, START)


def closed_loop(options, control, delay=1, arrivals=None):
    """Run `control(plant, q, qd, ref, state_dt) -> tau` on the plant (`lockstep`: the
    reference sampled one tick ahead, each command acting `delay` ticks after its state; with
    `arrivals` (a seed) the states come every one or two ticks with jitter, as to the node);
    returns (RMS error [rad] over move and hold, final |error| per joint [rad], largest |qd| /
    velocity limit)."""
    plant = Plant(URDF, options)
    plant.reset(START)
    steps = int(round((MOVE + HOLD) / DT))
    rng = None if arrivals is None else np.random.default_rng(arrivals)
    errors, fastest = lockstep(plant, lambda q, qd, ref, state_dt=-1.0: control(
        plant, q, qd, ref, state_dt), reference(), steps, delay=delay, lead=DT, arrivals=rng)
    finite = errors[np.all(np.isfinite(errors), axis=1)]
    return (math.sqrt(np.mean(finite ** 2)), np.abs(errors[-1]),
            np.max(fastest / MODEL.velocity_limits))


def node_law(told):
    cfg = validate_parameters(told, MODEL)
    controller = Controller(cfg)
    return lambda plant, q, qd, ref, state_dt: controller.command(cfg, q, qd, ref,
                                                                  state_dt=state_dt)


def pd_gravity(plant):
    m = true_joint_inertias(plant)
    kp, kd = 400.0 * m, 40.0 * m
    return lambda plant, q, qd, ref, state_dt: (plant.gravity(q) + kp * (ref[0] - q)
                                                + kd * (ref[1] - qd))


def pd_gravity_law():
    gains = {}

    def control(plant, q, qd, ref, state_dt):
        if id(plant) not in gains:
            gains[id(plant)] = pd_gravity(plant)
        return gains[id(plant)](plant, q, qd, ref, state_dt)
    return control


@pytest.fixture(scope='module')
def table():
    """{row: (node lockstep, PD + gravity lockstep, node asynchronous, PD + gravity
    asynchronous)}, each `closed_loop`'s; PD + gravity is told nothing, so the rows of one
    plant (the exact arm's two) share its runs."""
    reference_runs = {}

    def pd_gravity_run(options, arrivals=None):
        if (options, arrivals) not in reference_runs:
            reference_runs[options, arrivals] = closed_loop(options, pd_gravity_law(),
                                                            arrivals=arrivals)
        return reference_runs[options, arrivals]
    rows = {name: (closed_loop(options, node_law(told)), pd_gravity_run(options),
                   closed_loop(options, node_law(told), arrivals=ARRIVALS),
                   pd_gravity_run(options, ARRIVALS))
            for name, (options, told) in ROWS.items()}
    print('\n| the simulated arm | node, defaults: RMS / final error [rad] | PD + gravity | '
          'asynchronous states: node, defaults | PD + gravity |\n|---|---|---|---|---|')
    for name, runs in rows.items():
        print(f'| {name} | ' + ' | '.join(f'{rms:.2e} / {final.max():.1e}'
                                          for rms, final, _ in runs) + ' |')
    return rows


@pytest.mark.parametrize('arrivals', [0, 2], ids=['lockstep', 'asynchronous states'])
@pytest.mark.parametrize('row', list(ROWS))
def test_with_its_defaults_it_tracks_no_worse_than_pd_gravity_on_the_true_arm_and_reaches_its_goal(
        table, row, arrivals):
    """Asynchronous: as the node gets them, a new state every one or two ticks, with jitter
    (`lockstep`); the estimate takes new states only, at their stamps' time step."""
    (rms, final, fastest), (pd_rms, _, _) = table[row][arrivals:arrivals + 2]
    assert fastest <= 1.5, f'{row}: {fastest:.2f} x the velocity limit'
    assert final.max() <= FINAL, f'{row}: final error {final}'
    assert rms <= pd_rms, f'{row}: RMS {rms:.3g} rad, PD + gravity {pd_rms:.3g}'


@pytest.mark.parametrize('arrivals', [0, 2], ids=['lockstep', 'asynchronous states'])
def test_on_the_exact_model_at_least_10x_better_than_pd_gravity(table, arrivals):
    for row in ('exact (told friction 0)', 'URDF friction tags are placeholders'):
        (rms, final, _), (pd_rms, _, _) = table[row][arrivals:arrivals + 2]
        assert 10.0 * rms <= pd_rms and final.max() <= FINAL, (row, rms, final, pd_rms)


@pytest.mark.parametrize('seed', [1, 2, 3])
def test_other_wrong_links_stay_stable_reach_the_goal_and_beat_pd_gravity(seed):
    """The links row with other seeds: the estimate must not turn a model error into an
    instability (a tracking-error adaptation tried first did, 11-29× the velocity limit)."""
    options = PlantOptions(link_errors=(seed, 0.3, 0.3, 0.03))
    rms, final, fastest = closed_loop(options, node_law({}))
    pd_rms, _, _ = closed_loop(options, pd_gravity_law())
    print(f'\nlinks seed {seed}: node {rms:.2e} / {final.max():.1e}, PD + gravity {pd_rms:.2e}')
    assert fastest <= 1.5 and final.max() <= FINAL and rms <= pd_rms, (fastest, final, rms)


def test_the_law_of_issue_23_does_not_reach_the_goal_where_the_model_is_wrong(table):
    """The harness can fail: without the estimate and the integral (issue 23's law, the
    defaults before) the geared row tracks worse than the reference (the table's run of it)
    and the friction row stops short of the goal."""
    geared, friction = ROWS['geared: + armature 0.1 kg·m²'], ROWS['URDF friction true']
    rms, _, _ = closed_loop(geared[0], node_law({**geared[1], **ISSUE_23}))
    pd_rms, _, _ = table['geared: + armature 0.1 kg·m²'][1]
    _, final, _ = closed_loop(friction[0], node_law({**friction[1], **ISSUE_23}))
    assert rms > pd_rms and final.max() > FINAL, (rms, pd_rms, final)


def held_then_released(joint, stiffness, damping, release, values):
    """The exact arm's demo motion with one joint held at its start by a spring of the
    environment (`stiffness` [N·m/rad], `damping` [N·m·s/rad], added to the applied torque,
    unseen by the controller) until `release` [s]: the largest |qd| / velocity limit after the
    release and the final error [rad]."""
    plant = Plant(URDF, PlantOptions())
    plant.reset(START)
    cfg = validate_parameters({**TOLD_NO_FRICTION, **values}, MODEL)
    controller, ref = Controller(cfg), reference()
    previous, fastest = None, 0.0
    for k in range(int(round((MOVE + HOLD) / DT))):
        t = k * DT
        tau = controller.command(cfg, plant.q, plant.qd, ref.sample(t + DT))
        applied = np.array(tau if previous is None else previous)
        previous = tau.copy()
        if t < release:
            applied[joint] += (stiffness * (START[joint] - plant.q[joint])
                               - damping * plant.qd[joint])
        plant.step(applied)
        if t >= release:
            fastest = max(fastest, np.max(np.abs(plant.qd) / MODEL.velocity_limits))
    return fastest, np.abs(ref.sample(MOVE + HOLD)[0] - plant.q).max()


@pytest.mark.parametrize('joint, stiffness, damping, release', [
    (4, 1000.0, 3.0, 1.5), (4, 100.0, 0.5, 2.5), (6, 50.0, 0.1, 1.5)],
    ids=['joint5 stiff hold', 'joint5 soft hold', 'joint7 hold'])
def test_a_joint_held_while_its_reference_moves_then_released_does_not_overspeed(
        joint, stiffness, damping, release):
    """What the estimate grows while a joint does not follow (an untold geared joint's
    friction, or here a hold the controller does not see) is bounded: released, the joint
    stays under 1.5× its velocity limit (measured 1.09, 0.32, 1.29; the law of issue 23 0.40,
    0.10, 0.29; the rule before its bounds up to 3.3×; the Coulomb estimate fed forward
    without its bound on joint7's 1.4e-4 kg·m² 1.77: the hold's torque it took flipped at each
    reversal) and ends at its goal (2e-4, 6e-4, 7e-4 rad after 1.5 s at rest; before the
    integral ran while a joint far off crept towards it, 1.0e-3, 1.9e-2, 1.3e-2: the hold's
    d^ held it off)."""
    fastest, final = held_then_released(joint, stiffness, damping, release, {})
    print(f'\nheld joint{joint + 1} {stiffness:g} N·m/rad to {release} s: {fastest:.2f} x the '
          f'velocity limit, final {final:.1e} rad')
    assert fastest <= 1.5 and final <= 5e-3, (fastest, final)
