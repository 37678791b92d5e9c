"""The node on an ordinary computer (issue 35): its tick under a loaded host's timing, in
process and deterministic (test/timed_loop.py), on a simulated xArm7 whose truth differs from
its URDF, beside PD + gravity tuned on the true arm under the same timing.

Timing per column: commands acting 0, 2, 5 or 10 ms late (plus an exponential extra of mean
1 ms), 15 % of the ticks missed (pauses of 1-3 ticks, one in ten up to 30), ±0.5 ms of stamp
jitter. Rows: the arm as its URDF says but for one thing (test_robustness's rows and issue 35's
geared arm: rotor 0.1 kg·m², damping 10/10/5/5/5/2/2, frictionloss 1 N·m, told nothing; and
the friction told exactly). Two motions: the demo's 3 s move (then 1.5 s at rest) under every
column, and the excitation (6 s, then 1 s at rest) under 5 ms (the suite's time). What
never happens, in every cell: a contact declared on the free arm, a joint beyond 1.5x its
velocity limit, a command step over half an effort limit in one tick. What the law is for:
RMS error no worse than the reference's and the goal within 1e-3 rad, in every cell. The
geared arm reaches it (2-5e-4) since the estimate takes Coulomb friction apart from the
rotor's inertia and feeds it forward towards the goal (control/adaptation.py rules 2 and 5;
before, 2-5e-3 rad off), the arm told its friction exactly (5-7e-5, its RMS 7.7e-3-1.0e-2)
since its told Coulomb friction acts the same way and the estimate corrects a told friction
down (MuJoCo's dry friction creeps on the light wrists; before, their excitation braked on
one host, RMS 0.4 rad: rules 2 and 3); so does the geared arm whose friction is another
simulator's smooth tanh, where PD + gravity does not.
(PD + gravity ends 1e-2-7e-2 off: MuJoCo's dry friction creeps, and its integral-free law
stops where its stiffness balances the friction.)

The identified file: on the arm unlike its URDF in everything (geared, links off), the node
told nothing records the excitation under the 5 ms column's timing; the file identified from
it (analysis/identify.py) runs the demo move under each column: the user's way to the goal.

The stall: states stop for 0.2 s in the middle of a fast excitation (links 30 % off, told
nothing): the node goes on blind, then stops (ros/loop.py, control/modes.py). The blackout:
commands stop acting while the states go on (a loaded demo's simulator took none for ~0.3 s).
`pytest -s` prints the matrix.
"""
from dataclasses import replace
from functools import cache

from conftest import flatten, parallel_map
import numpy as np
import pytest
from test_robustness import HOLD, JOINTS, MODEL, MOVE, reference, START, URDF
from timed_loop import command_steps, contacts, Node, PdGravity, run, Timing
import yaml

from rnea_controller.analysis.identify import Identification, parameters_yaml
from rnea_controller.control.law import Controller, validate_parameters
from rnea_controller.control.trajectory import plan_arrays
from rnea_controller.sim.plant import Plant, PlantOptions
from rnea_controller.tools.send_trajectory import excitation_motion

DELAYS = (0.0, 0.002, 0.005, 0.01)  # [s]
# [s] the excitation's column: the late one of the demo's; its 0-ms column (lockstep, which
# the demo's first column, test_robustness and the corpus's prompt cases cover) left out for
# the suite's time on a loaded host (12 s of CPU)
EXCITED = (0.005,)
GEARED = PlantOptions(armature=(0.1,), damping=(10.0, 10.0, 5.0, 5.0, 5.0, 2.0, 2.0),
                      friction=(1.0,))
TOLD_EXACT = {f'friction.{j}.{kind}': value for j in JOINTS
              for kind, value in (('viscous', 0.8), ('coulomb', 1.5))}
ROWS = {  # name: (the arm, what the node is told)
    'URDF friction tags are placeholders': (PlantOptions(), {}),
    'URDF friction true': (PlantOptions(damping=tuple(MODEL.damping),
                                        friction=tuple(MODEL.friction)), {}),
    'geared (xArm7 Menagerie figures)': (GEARED, {}),
    'links off 30 % / 3 cm': (PlantOptions(link_errors=(7, 0.3, 0.3, 0.03)), {}),
    'friction told exactly': (PlantOptions(damping=(0.8,), friction=(1.5,)), TOLD_EXACT),
}
FINAL = 1e-3  # [rad]
FASTEST = 1.5  # x the velocity limits
STEP = 0.5  # x the effort limits, per tick


def timing(delay, stall=None):
    return Timing(delay=delay, delay_jitter=1e-3, missed=0.15, burst=30, jitter=5e-4,
                  stall=stall, seed=1)


def figures(result, desired):
    """(RMS error [rad], final |error| [rad], largest |qd| / velocity limit, largest command
    step / effort limit, contacts declared)."""
    e = result.desired - result.q
    return (float(np.sqrt(np.nanmean(e ** 2))), float(np.abs(e[-1]).max()),
            float(np.max(np.abs(result.qd) / MODEL.velocity_limits)),
            float(command_steps(result, np.array(MODEL.effort_limits)).max()),
            contacts(result))


def side_by_side(options, told, make, duration, delay):
    """(node's figures told `told`, PD + gravity's) on the arm `options`, following the
    trajectory `make()` for `duration` [s] under the column `delay`'s timing."""
    out = []
    for law in ('node', 'reference'):
        plant, ref = Plant(URDF, options), make()
        controller = (Node(MODEL, told, ref) if law == 'node'
                      else PdGravity(plant, ref, START))
        out.append(figures(run(plant, controller, duration, timing(delay), START, ref), ref))
    return tuple(out)


def _cell(row, delay, motion):
    """(node's figures, PD + gravity's) for a row under a column's timing, on `motion`."""
    return side_by_side(*ROWS[row], *MOTIONS[motion], delay)


@cache
def _all_cells():
    """{(motion, row, delay): _cell's figures} of every cell, two at a time where this process
    may use two cores (conftest.parallel_map; the suite's time: 38 s one by one); each cell is
    its own seeded run, so the figures are those of one by one."""
    return dict(zip(CELLS, parallel_map(_cell_of, CELLS)))


def _cell_of(key):
    motion, row, delay = key
    return _cell(row, delay, motion)


def cell(row, delay, motion='demo'):
    """(node's figures, PD + gravity's) for a row under a column's timing, on `motion`."""
    return _all_cells()[(motion, row, delay)]


CELLS = [('demo', row, delay) for row in ROWS for delay in DELAYS] + [
    ('excitation', row, delay) for row in ROWS for delay in EXCITED]
IDS = [f'{motion}-{row}-{1e3 * delay:g} ms' for motion, row, delay in CELLS]


def test_print_the_matrix():
    for motion, delays in (('demo', DELAYS), ('excitation', EXCITED)):
        print(f'\n{motion}:\n| the arm | ' + ' | '.join(
            f'{1e3 * d:g} ms late: node / PD + gravity, RMS (final) [rad]' for d in delays)
            + ' |')
        print('|---' * (len(delays) + 1) + '|')
        for row in ROWS:
            print(f'| {row} | ' + ' | '.join(
                f'{node[0]:.1e} ({node[1]:.0e}) / {pd[0]:.1e} ({pd[1]:.0e})'
                for node, pd in (cell(row, d, motion) for d in delays)) + ' |')


@pytest.mark.parametrize('motion, row, delay', CELLS, ids=IDS)
def test_never_a_false_contact_an_overspeed_or_a_command_jump(motion, row, delay):
    (rms, final, fastest, step, declared), _ = cell(row, delay, motion)
    where = f'{motion}, {row}, {delay} s'
    assert not declared, f'{where}: {declared}'
    assert fastest <= FASTEST, f'{where}: {fastest:.2f} x a velocity limit'
    assert step <= STEP, f'{where}: a command step of {step:.2f} x an effort limit'


@pytest.mark.parametrize('motion, row, delay', CELLS, ids=IDS)
def test_no_worse_than_pd_gravity_on_the_true_arm_and_at_the_goal(motion, row, delay):
    (rms, final, *_), (pd_rms, *_) = cell(row, delay, motion)
    where = f'{motion}, {row}, {delay} s'
    assert rms <= pd_rms, f'{where}: RMS {rms:.3g} rad, PD + gravity {pd_rms:.3g}'
    assert final <= FINAL, f'{where}: final error {final:.2e} rad'


def test_an_untold_rotor_keeps_its_inertia_through_the_decelerations():
    """Rule 2's Coulomb estimate c^: on the geared xArm7 (rotor 0.1 kg·m², frictionloss 1 N·m,
    told neither), a^ of the forearm and wrist joints at the end of the demo move is still
    at least half the rotor's inertia, and c^ is of the order of the friction. Without c^ the
    friction's constant torque, taken by b^ qd at speed, read as -a^ qdd in each deceleration:
    a^ ended at 2e-3-6e-2 kg·m², and the wrists ended 3-5e-3 rad from the goal."""
    plant, ref = Plant(URDF, GEARED), reference()
    node = Node(MODEL, {}, ref)
    seen, tick = {}, node.tick

    def recording(now):
        tau = tick(now)
        if now <= MOVE:
            seen['estimates'] = node.controller.estimates.copy()
        return tau
    node.tick = recording
    run(plant, node, MOVE, timing(0.0), START, ref)
    a, c = seen['estimates'][0, 3:], seen['estimates'][3, 3:]
    assert np.all(a >= 0.05), a
    assert np.all((c >= 0.5) & (c <= 2.5)), c


class SmoothFriction(Plant):
    """The arm with its Coulomb friction as a smooth F tanh(qd / width) [N·m] added to its
    joint torques each step: another simulator's model than MuJoCo's frictionloss
    constraint (which creeps at v ~ tau / (1000 M_eff) instead)."""

    def __init__(self, urdf, options, coulomb, width):
        super().__init__(urdf, options)
        self.coulomb, self.width = coulomb, width

    def step(self, tau):
        self.external = -self.coulomb * np.tanh(self.qd / self.width)
        return super().step(tau)


def test_the_geared_arm_with_a_smooth_friction_reaches_its_goal_where_pd_gravity_does_not():
    """The geared row's arm (rotor 0.1 kg·m², damping 10/10/5/5/5/2/2, told neither) with 1 N·m
    of Coulomb friction as F tanh(qd / 0.01 rad/s), commands 5 ms late: the node ends at its
    goal (measured 2.3e-4 rad; 0.03 and 0.1 rad/s: 4e-5; without the Coulomb estimate 4.9e-3)
    where PD + gravity tuned on the true arm ends 1.3e-2 off."""
    options = replace(GEARED, friction=(0.0,))
    out = []
    for law in ('node', 'reference'):
        plant, ref = SmoothFriction(URDF, options, 1.0, 0.01), reference()
        controller = (Node(MODEL, {}, ref) if law == 'node'
                      else PdGravity(plant, ref, START))
        out.append(figures(run(plant, controller, MOVE + HOLD, timing(0.005), START, ref),
                           ref))
    (rms, final, fastest, step, declared), (pd_rms, pd_final, *_) = out
    assert not declared and fastest <= FASTEST and step <= STEP, (declared, fastest, step)
    assert rms <= pd_rms and final <= FINAL < pd_final, (rms, final, pd_rms, pd_final)


@cache
def excitation(duration=6.0):
    w = excitation_motion(MODEL, START, duration)
    return plan_arrays(JOINTS, w.times, w.positions, w.velocities, w.accelerations,
                       joint_names=JOINTS, position_limits=MODEL.position_limits,
                       current=np.vstack([START, np.zeros((2, len(JOINTS)))]), now=0.0)


MOTIONS = {'demo': (reference, MOVE + HOLD),  # name: (its trajectory, the run [s])
           'excitation': (excitation, 7.0)}  # 6 s of excitation, 1 s at rest


IDENTIFIED_ARM = replace(GEARED, link_errors=ROWS['links off 30 % / 3 cm'][0].link_errors)


@cache
def identified_file():
    """The parameters file a user makes on this host for the arm that differs from its URDF in
    everything (geared as GEARED and its links 30 % / 3 cm off): 6 s of excitation recorded
    with the node told nothing, commands 5 ms late, identified from the joint states and the
    applied efforts (analysis/identify.py, as `rnea-validate --identify` does); its values."""
    ref = excitation()
    record = run(Plant(URDF, IDENTIFIED_ARM), Node(MODEL, {}, ref), 7.0, timing(0.005), START,
                 ref)
    identification = Identification(MODEL)
    stamps = np.round(record.t * 1e9).astype(np.int64)
    for s in range(0, len(stamps), 2000):
        identification.update(stamps[s:s + 2000], record.q[s:s + 2000], record.qd[s:s + 2000],
                              record.applied[s:s + 2000])
    fit = identification.result()
    assert not fit['failures'], fit['failures']
    return dict(flatten(yaml.safe_load(parameters_yaml(fit, MODEL))['/**']['ros__parameters']))


@cache
def identified_cell(delay):
    """(node's figures told the identified file, PD + gravity's) on IDENTIFIED_ARM."""
    return side_by_side(IDENTIFIED_ARM, identified_file(), reference, MOVE + HOLD, delay)


@pytest.mark.parametrize('delay', DELAYS, ids=[f'{1e3 * d:g} ms' for d in DELAYS])
def test_told_the_file_identified_on_this_host_it_beats_pd_gravity_and_reaches_the_goal(delay):
    """The user's way with an arm unlike its URDF: identify it, then run with the file. The
    excitation was recorded under the 5 ms column's timing; the file runs under each."""
    (rms, final, fastest, step, declared), (pd_rms, *_) = identified_cell(delay)
    print(f'\nidentified file, {1e3 * delay:g} ms late: node {rms:.1e} ({final:.0e}) / '
          f'PD + gravity {pd_rms:.1e} rad')
    assert not declared, declared
    assert fastest <= FASTEST and step <= STEP, (fastest, step)
    assert rms <= pd_rms, (rms, pd_rms)
    assert final <= FINAL, final


def test_a_stall_of_the_states_in_a_fast_excitation_is_no_contact_and_no_runaway():
    """0.2 s without states at 3 s into the excitation, commands 5 ms late: the node goes on
    blind and stops; the states return with the arm near the stop."""
    options, told = ROWS['links off 30 % / 3 cm']
    ref = excitation()
    plant = Plant(URDF, options)
    result = run(plant, Node(MODEL, told, ref), 7.5, timing(0.005, (3.0, 0.2)), START, ref)
    *_, fastest, step, declared = figures(result, ref)
    print(f'\nstall: {fastest:.2f} x a velocity limit, steps {step:.2f}, modes {result.modes}')
    assert 'stale: stopping' in result.modes
    assert fastest <= FASTEST, f'{fastest:.2f} x a velocity limit'
    assert step <= STEP, f'a command step of {step:.2f} x an effort limit'  # 0.54 before
    assert not declared, declared  # the RECOVER_* ramp (ros/loop.py); now 0.22


def braked(told, acting=0.045, steps=1500):
    """(largest, last 0.5 s's largest) |qd| / velocity limit of the xArm7 braked from 0.9 x
    its velocity limit at joints 4 and 6 by `Controller.brake` told the delay `told` [s], its
    commands acting `acting` [s] late."""
    plant, limits = Plant(URDF, PlantOptions()), np.array(MODEL.velocity_limits)
    qd = np.zeros(len(limits))
    qd[3], qd[5] = 0.9 * limits[3], -0.9 * limits[5]
    plant.reset(START, qd)
    cfg = validate_parameters({}, MODEL)
    controller, pending, speeds = Controller(cfg), [], []
    for _ in range(steps):
        tau = controller.brake(cfg, plant.q, plant.qd, told).copy()
        pending = pending + [tau] if pending else [tau] * (round(acting / 1e-3) + 1)
        plant.step(pending.pop(0))
        speeds.append(np.max(np.abs(plant.qd) / limits))
    return max(speeds), max(speeds[-500:])


def test_the_brake_told_how_late_its_commands_act_stops_the_arm():
    """The brake is a damper through the model's inertia at 40 1/s, stable with a delay d
    only while d < π / (2 x 40) = 39 ms: a simulator starved by 50 ms catches up under one
    held brake command (a loaded demo swung between the effort limits). With commands 45 ms
    late it ran away (over 100 x the velocity limit); told the delay (the loop's lateness:
    its measured actuation delay, its worst recent gap of states or ticks) its rate is
    π / (4 d): the arm never goes faster than it started and is at rest within 1.5 s. With
    commands on time the lateness changes nothing."""
    fastest, last = braked(told=0.0)
    assert fastest > 10.0, fastest  # the case: the fixed rate runs away
    for acting in (0.045, 0.03, 0.001):
        fastest, last = braked(told=0.045, acting=acting)
        assert fastest < 0.9 and last < 0.05, (acting, fastest, last)
    assert braked(told=0.0, acting=0.001) == braked(told=0.001, acting=0.001)


@pytest.mark.parametrize('seed', (2, 3, 6))
def test_a_wrong_model_with_commands_10_ms_late_holds_its_first_commands_without_overspeed(seed):
    """The arm's links 30 % / 3 cm off (three other draws of the row's errors), commands
    10 ms late: the arm falls under no command until the first one acts, and its wrist, whose
    gravity the model has wrong by 0.2-0.5 N·m, sags 0.1-0.2 rad at the default gains. The
    estimate must not take that fall as the arm's answer to commands that had not acted yet:
    its first window made d^ 6.0 N·m on joint4 (the true error 1.8) and 9.4 on joint2 (3.7),
    which flung the wrist past its velocity limit (1.13-1.15x: the brake, the trajectory
    dropped) on these three draws of seven. The adaptation now starts ANSWER_TIME after the
    first command (control/adaptation.py)."""
    plant, ref = Plant(URDF, PlantOptions(link_errors=(seed, 0.3, 0.3, 0.03))), reference()
    result = run(plant, Node(MODEL, {}, ref), 0.5, timing(0.01), START, ref)
    fastest = float(np.max(np.abs(result.qd) / MODEL.velocity_limits))
    print(f'\nfirst commands, links drawn with seed {seed}: {fastest:.2f} x a velocity limit, '
          f'modes {result.modes}')
    assert not any(mode.startswith('braking') for mode in result.modes), result.modes
    assert fastest < 1.0, f'{fastest:.2f} x a velocity limit'


def test_states_that_reach_the_node_10_ms_late_are_no_contact():
    """The geared arm, its states reaching the node 10 ms after their stamps (a starved
    node's queue; a loaded demo's diagnostics said 23 ms), commands 5 ms late: the commands
    paired with a state's interval were published 10 ms after the motion they are paired
    with, and the delay allowance reaches that far back (control/contact.py, `age`). Before,
    joint4 read -8.46 N·m against 8.28: a contact on the free arm, RMS 9.4e-2 rad; now RMS
    1.1e-2 rad as with the states on time."""
    options, told = ROWS['geared (xArm7 Menagerie figures)']
    plant, ref = Plant(URDF, options), reference()
    result = run(plant, Node(MODEL, told, ref), MOVE + HOLD,
                 replace(timing(0.005), transit=0.01), START, ref)
    rms, final, fastest, step, declared = figures(result, ref)
    print(f'\nstates 10 ms late: RMS {rms:.1e} rad, {fastest:.2f} x a velocity limit, steps '
          f'{step:.2f}, {declared}')
    assert not declared, declared
    assert fastest <= FASTEST and step <= STEP, (fastest, step)
    assert rms <= 2e-2, rms


@pytest.mark.parametrize('seed', (3, 5))
def test_a_frictionless_arm_does_not_hunt_at_its_goal_under_other_pauses(seed):
    """The links-off row 10 ms late under other seeds of the same timing (other pauses):
    c^'s slope in e, a stiff spring at the goal that only friction keeps still, set joints 1
    and 3 of this frictionless arm hunting in antiphase at 20 Hz, ±1-3 mrad (final 1.2-2.2e-3
    rad in 5 of 8 seeds). Rule 8 halves c^ of a joint that crosses its goal at 10 Hz or
    faster (control/adaptation.py): within 0.2 mrad over the last 0.3 s at rest, and no larger
    in the 0.2 s before than a ring that dies out: 0.7 of the smallest hunt's amplitude, 0.7
    mrad (since the integral acts through c^'s slope at rest too (issue 43, rule 7), joints 1
    and 3 ring to 0.28-0.38 mrad after the last pause, 0.53 since a crossing of the goal takes
    the estimated friction out of the integral (rule 7's reset; its b^ and c^ are not zero on
    this frictionless arm), and are under 0.06 mrad 0.2 s later; the hunting guarded against
    held ±1-3 mrad and did not die out)."""
    options, told = ROWS['links off 30 % / 3 cm']
    plant, ref = Plant(URDF, options), reference()
    result = run(plant, Node(MODEL, told, ref), MOVE + HOLD, replace(timing(0.01), seed=seed),
                 START, ref)
    rms, final, fastest, step, declared = figures(result, ref)
    error = np.abs(result.desired - result.q)
    ring = float(error[result.t > MOVE + HOLD - 0.5].max())
    late = float(error[result.t > MOVE + HOLD - 0.3].max())
    print(f'\nseed {seed}: final {final:.1e} rad, at most {ring:.1e} over the last 0.5 s, '
          f'{late:.1e} over the last 0.3 s')
    assert not declared and final <= FINAL, (declared, final)
    assert late <= 2e-4 and ring <= 7e-4, (late, ring)


@pytest.mark.parametrize('length', (0.05, 0.3))
def test_an_arm_that_stops_taking_commands_for_long_is_held_as_a_contact(length):
    """The command path blacked out in the demo move (states on time, commands 5 ms late, 15 %
    of the ticks missed): the arm moves on under the last command that reached it (the
    simulator of a loaded demo took none for ~0.3 s while the node published at 1 kHz; its
    observer read 43.3 N·m, the commands' change meanwhile, against 42.9). For tens of ms (the
    ros2_control stack's own lateness) the delay allowance covers it: no contact. For 0.3 s
    the arm runs off the reference and the residual is the commands' change since: the node
    holds ('contact'), an arm that does not answer its commands being no free arm."""
    options, told = ROWS['URDF friction tags are placeholders']
    plant, ref = Plant(URDF, options), reference()
    result = run(plant, Node(MODEL, told, ref), MOVE + HOLD,
                 replace(timing(0.005), blackout=(1.5, length)), START, ref)
    rms, final, fastest, step, declared = figures(result, ref)
    off = float(np.nanmax(np.abs(result.desired - result.q)))
    print(f'\nblackout {length} s: {off:.3f} rad off at most, {fastest:.2f} x a velocity '
          f'limit, steps {step:.2f}, modes {result.modes}, {declared}')
    if length < 0.1:
        assert not declared and final <= FINAL, (declared, final)
        assert fastest <= 1.0 and step <= STEP, (fastest, step)
    else:
        assert declared and off > 0.1, (declared, off)


def test_after_a_command_blackout_of_0_2_s_the_estimate_does_not_set_the_hold_swinging():
    """0.2 s of commands that never act at 1.5 s into the demo move, as above: no contact
    (the residual stays under the thresholds), and what follows must not swing: at most one
    brake. The online estimate took the blackout's mismatch as rotor inertia (a^ of joint3 0.035
    -> 0.19 kg·m², 1/(M⁻¹)_33 0.06; joint7's 9e-4 on M_77 1e-4): their gains x4 and x10, the
    hold unstable 5 ms late, 3-25 brakes, 1.9-4.5x a velocity limit. Since a^ grows at half its
    pace in decelerations (control/adaptation.py rule 3): one brake as the commands act again,
    1.03x, then a steady hold."""
    options, told = ROWS['URDF friction tags are placeholders']
    plant, ref = Plant(URDF, options), reference()
    result = run(plant, Node(MODEL, told, ref), MOVE + HOLD,
                 replace(timing(0.005), blackout=(1.5, 0.2)), START, ref)
    rms, final, fastest, step, declared = figures(result, ref)
    brakes = result.modes.count('braking: overspeed')
    print(f'\nblackout 0.2 s: {fastest:.2f} x a velocity limit, {brakes} brakes, final '
          f'{final:.1e} rad')
    assert not declared, declared
    assert fastest <= FASTEST and brakes <= 1, (fastest, brakes)


@pytest.mark.parametrize('seed', (2, 3))
def test_a_node_paused_beyond_its_state_timeout_goes_on_and_takes_the_arm_back_gently(seed):
    """The node itself paused up to 150 ms (3 % of its ticks, every pause long), waking with
    its timer before its queued states (rclpy's order): the states came on time, so no stale
    stop (before: both seeds 'stale: stopping', seed 3 ending 0.15 rad off with a command step
    of 1.06 x an effort limit), no contact over the gap (the observer judged 150 ms as one
    period: joint3 -22.4 N·m), and the command after the pause changes at most RECOVER_STEP of
    the smallest effort limit per tick."""
    options, told = ROWS['links off 30 % / 3 cm']
    plant, ref = Plant(URDF, options), reference()
    paused = Timing(delay=0.002, delay_jitter=1e-3, missed=0.03, burst=150, long_pauses=1.0,
                    jitter=5e-4, seed=seed, ticks_first=True)
    result = run(plant, Node(MODEL, told, ref), MOVE + HOLD, paused, START, ref)
    rms, final, fastest, step, declared = figures(result, ref)
    print(f'\npaused, seed {seed}: RMS {rms:.1e} rad, final {final:.0e}, steps {step:.2f}, '
          f'modes {result.modes}')
    assert 'stale: stopping' not in result.modes
    assert not declared, declared
    assert fastest <= FASTEST and step <= STEP, (fastest, step)
    assert final <= FINAL, final


def test_the_node_measures_how_late_its_commands_act():
    """Commands acting 10 ms late (+1 ms mean jitter, + up to a period before the arm's next
    step), on the xArm7 with its URDF's friction true: the node measures it from the arm's
    motion (control/timing.py's ActuationDelay), while the reference moves; /diagnostics
    says it once three measurements agree (the adaptation stays on). (With no friction the
    model is exact, the commands follow the reference smoothly and only the start's window
    moves them enough to be measured: the arm's motion tells little, and nothing needs it.)"""
    options, told = ROWS['URDF friction true']
    plant, ref = Plant(URDF, options), reference()
    node = Node(MODEL, told, ref)
    run(plant, node, MOVE + HOLD, timing(0.01), START, ref)
    delay = node.loop.actuation.delay
    print(f'\nmeasured {node.loop.actuation.measured}: {node.loop.adaptation}')
    assert delay is not None and 0.009 <= delay <= 0.016, node.loop.actuation.measured
    assert node.loop.adaptation.startswith('adaptation on')


def test_a_delay_beyond_what_the_estimate_can_pair_pauses_it_until_it_is_back():
    """The decision, on the node's loop: a delay measured at 40 ms or more pauses the
    estimate, the integral and the stuck rule (a warning, /diagnostics WARN) and the
    estimates stay (but for a joint whose command chatters meanwhile: rule 8 halves its a^
    and b^ and the node says so); under it again, the adaptation is back."""
    options, told = ROWS['URDF friction true']
    plant, ref = Plant(URDF, options), reference()
    node = Node(MODEL, told, ref)
    measured = [0.005] * 4 + [0.05] * 6 + [0.006] * 10
    estimate = node.loop.actuation.estimate

    def fake():
        estimate()
        value = measured.pop(0) if measured else 0.006
        node.loop.actuation.measured = [value] * 5
        node.loop.actuation.delay = value
        return True
    node.loop.actuation.estimate = fake
    schedules, estimates, calmings = [], [], []
    tick = node.tick

    def watched(now):
        tau = tick(now)
        schedules.append(node.controller.schedule['estimate'])
        estimates.append(node.controller.estimates.copy())
        calmings.append(node.controller.calmed.copy())
        return tau
    node.tick = watched
    result = run(plant, node, MOVE + HOLD, timing(0.002), START, ref)
    said = [text for level, text in result.log if 'adaptation' in text]
    assert said == ['adaptation paused: command delay 50 ms (beyond what the estimate can '
                    'pair)', 'adaptation on: command delay 6 ms'], said
    paused = [k for k, gain in enumerate(schedules) if gain == 0.0]
    before, after = estimates[paused[0]], estimates[paused[-1]]
    named = {text.split("'")[1] for level, text in result.log if 'chattered' in text}
    calmed = {JOINTS[k] for k in np.flatnonzero(calmings[paused[-1]] > calmings[paused[0]])}
    assert calmed <= named, (calmed, named)  # the node says so
    for k, joint in enumerate(JOINTS):  # kept, but where the law's rule 8 calmed a chatter
        if joint in calmed:  # (halved: a^ 0.78 kg·m² on joint1 chattered in the paused law)
            assert np.array_equal(before[2, k], after[2, k]), joint
            assert np.all(after[:2, k] <= 0.5 * before[:2, k]), joint
        else:
            assert np.array_equal(before[:, k], after[:, k]), joint
    assert schedules[-1] == 1.0
