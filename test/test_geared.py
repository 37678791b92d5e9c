"""Geared arms (issue 23): rotor inertia and friction on the simulated arm, told and not told,
and the identification round trip (excite, identify, restart with the file, track).

The plant is MuJoCo (`sim.plant`) with MuJoCo Menagerie's xArm7 figures: armature 0.1 kg·m² on
every joint, viscous friction 10, 10, 5, 5, 5, 2 N·m·s/rad, Coulomb 1 N·m (frictionloss), none
of which the URDF states. In process: the plant steps at 1 kHz with the controller's command of
the state at the step's start, so the figures are deterministic. Then the same with the real
programs (rnea-demo: simulator, controller, recorder and validator over DDS).
"""
import json
import math
import subprocess

from conftest import console_script, flatten, Processes, wait_for
from lockstep import lockstep
import numpy as np
import pytest
import yaml

from rnea_controller import default_urdf_path, RobotModel
from rnea_controller.analysis.identify import Identification, parameters_yaml
from rnea_controller.control.law import Controller, validate_parameters
from rnea_controller.control.trajectory import plan_arrays
from rnea_controller.sim.node import HOME
from rnea_controller.sim.plant import Plant, PlantOptions
from rnea_controller.tools.demo import GEARED
from rnea_controller.tools.send_trajectory import demo_motion, excitation_motion

URDF = default_urdf_path().read_text()
MODEL = RobotModel.from_urdf_string(URDF)
JOINTS = MODEL.joint_names
PLAIN = PlantOptions()
GEARED_PLANT = PlantOptions(armature=tuple(GEARED['armature']),
                            damping=tuple(GEARED['damping']), friction=tuple(GEARED['friction']))
TOLD = {**{f'armature.{j}': GEARED['armature'][0] for j in JOINTS},
        **{f'friction.{j}.viscous': b for j, b in zip(JOINTS, GEARED['damping'])},
        **{f'friction.{j}.coulomb': GEARED['friction'][0] for j in JOINTS}}
FRICTION_ONLY = {name: value for name, value in TOLD.items() if name.startswith('friction')}
STATIC = {'estimation.forgetting_time': 0.0, 'integral_gain': 0.0}  # the law of issue 23
ESTIMATING = {'estimation.forgetting_time': 1.0, 'integral_gain': 4000.0}  # issue 29, opt-in


def track(values, plant_options, motion=demo_motion, duration=3.0, log=None, rest=0.0):
    """RMS tracking error [rad] over the motion and `rest` [s] at rest after it, all joints;
    `log` gets (step, q, qd, applied effort) of every step."""
    plant = Plant(URDF, plant_options)
    plant.reset(HOME)
    cfg = validate_parameters(values, MODEL)
    controller = Controller(cfg)
    w = motion(JOINTS, np.array(HOME), MODEL.velocity_limits, MODEL.position_limits, duration)
    reference = plan_arrays(JOINTS, w.times, w.positions, w.velocities, w.accelerations,
                            joint_names=JOINTS, position_limits=MODEL.position_limits,
                            current=np.vstack([HOME, np.zeros((2, len(JOINTS)))]), now=0.0)
    steps = int(round((duration + rest) / plant_options.timestep))
    errors, _ = lockstep(plant, lambda q, qd, ref: controller.command(cfg, q, qd, ref),
                         reference, steps, log=log)
    return math.sqrt(np.mean(errors ** 2))


@pytest.fixture(scope='module')
def plain():
    return track(STATIC, PLAIN)


@pytest.fixture(scope='module')
def told():
    return track({**TOLD, **STATIC}, GEARED_PLANT)


def test_told_the_true_values_tracks_within_2x_of_the_plain_arm(plain, told):
    """Measured over the 3 s motion: plain 7.0e-5 rad, geared told 1.18e-4 (1.7×: MuJoCo's
    soft frictionloss is not the law's fc·tanh(qd/w)); told the friction only 7.7e-3; told
    nothing 8.1e-2. With 1 s at rest after the motion, told 2.3× plain: the Coulomb friction
    holds a small error at rest that PD alone does not remove. Those figures are the law
    without the online estimate (STATIC, the defaults: this file checks what telling does);
    with it (ESTIMATING, issue 29), told nothing 6.4e-2 (the Coulomb friction it does not
    estimate is most of what is left)."""
    assert told <= 2.0 * plain
    friction_only = track({**FRICTION_ONLY, **STATIC}, GEARED_PLANT)
    nothing = track(STATIC, GEARED_PLANT)
    assert 20 * told < friction_only < nothing / 5
    assert nothing > 0.03  # issue 23, item 1: the arm does not follow
    assert track(ESTIMATING, GEARED_PLANT) < 0.9 * nothing  # issue 29: it learns some


def test_a_feedback_inertia_floor_holds_the_untold_arm_closer():
    """Measured without the online estimate: 8.1e-2 rad without, 3.2e-2 with a floor of 0.1 kg·m²
    (the true armature)."""
    without = track(STATIC, GEARED_PLANT)
    with_floor = track({**STATIC, 'feedback_inertia_floor': 0.1}, GEARED_PLANT)
    assert with_floor < 0.5 * without


def identify(log):
    """Feed a run's log to the identification; the parameters file's values."""
    identification = Identification(MODEL, 'wrist_3_link')
    k, q, qd, tau = (np.array(column) for column in zip(*log))
    for s in range(0, len(k), 2000):
        identification.update(k[s:s + 2000] * 1_000_000, q[s:s + 2000], qd[s:s + 2000],
                              tau[s:s + 2000])
    text = parameters_yaml(identification.result(), MODEL)
    return dict(flatten(yaml.safe_load(text)['/**']['ros__parameters']))


def test_excite_identify_restart_tracks_within_2x_of_told(told):
    """Issue 23's round trip in process: told nothing but a feedback floor, the excitation
    moves every joint; the fit finds friction within 3 % and the armature the plant's step has,
    a + dt·D (MuJoCo integrates damping implicitly: (M + diag(a) + dt D) qd1 = ..., see
    test_plant), and the restarted controller tracks as the told one (measured 1.17e-4
    against 1.18e-4 rad)."""
    log = []
    track({'feedback_inertia_floor': 0.1}, GEARED_PLANT, excitation_motion, 12.0, log, 1.0)
    values = identify(log)
    for name, true in TOLD.items():
        if name.startswith('armature'):
            viscous = TOLD[name.replace('armature', 'friction') + '.viscous']
            true = true + GEARED_PLANT.timestep * viscous
        assert values[name] == pytest.approx(true, rel=0.03), name
    assert not any(name.startswith('payload') for name in values)
    assert track({**values, **STATIC}, GEARED_PLANT) <= 2.0 * told


MAX_GAP_MS = 100.0  # longest gap of reference or joint states in a run (a stalled host)


def demo(tmp_path, name, *options, duration=5.0, attempts=3):
    """rnea-demo (real simulator, controller, recorder, validator): the RMS [rad] over joints
    and the output directory. A run with a gap over MAX_GAP_MS is recorded again, as a user
    re-records a run `rnea-validate --max-gap` fails: a 2-core host loaded by other test runs
    stalled the controller 0.4 s in a 14 s excitation, the arm swung into its joint limits,
    whose constraint torques no recorded effort holds, and the fit read nonsense."""
    for attempt in range(attempts):
        output = tmp_path / f'{name}-{attempt}'
        done = subprocess.run([console_script('rnea-demo'), '--duration', str(duration),
                               '--no-plots', '--output', str(output), *options],
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        report = json.loads((output / 'report.json').read_text())
        gaps = report['loop']['gaps'] + report['joint_states']['gaps']
        longest = max((gap['duration_ms'] for gap in gaps), default=0.0)
        if longest <= MAX_GAP_MS:
            joints = report['tracking']['joints'].values()
            return math.sqrt(np.mean([j['rms'] ** 2 for j in joints])), output
    pytest.fail(f'{name}: each of {attempts} runs had a gap over {MAX_GAP_MS:g} ms (last: '
                f'{longest:.0f} ms): the host stalls the programs')


@pytest.mark.integration
@pytest.mark.slow
def test_the_round_trip_with_the_real_programs(tmp_path):
    """Record an excitation (`rnea-demo --geared --excite`: the controller told nothing but
    feedback_inertia_floor), identify, restart with the written file, track. Measured on a
    2-core host: told 1.36-1.49e-4 rad, identified 1.42e-4, plain 0.59-0.95e-4, told
    nothing 3.4e-2 (told within 1.5-2.4× of plain: MuJoCo's soft friction and host load; the
    deterministic bound is the in-process test's)."""
    params = tmp_path / 'told.yaml'
    tree = {}
    for name, value in TOLD.items():
        *path, leaf = name.split('.')
        node = tree
        for key in path:
            node = node.setdefault(key, {})
        node[leaf] = value
    params.write_text(yaml.safe_dump({'/**': {'ros__parameters': tree}}))
    told, _ = demo(tmp_path, 'told', '--geared', '--params-file', str(params))
    _, excited = demo(tmp_path, 'excite', '--geared', '--excite', '--param',
                      'feedback_inertia_floor:=0.1', duration=14.5)
    identified, _ = demo(tmp_path, 'identified', '--geared', '--params-file',
                         str(excited / 'identified_parameters.yaml'))
    assert identified <= 2.0 * told, (identified, told)
    plain, _ = demo(tmp_path, 'plain')
    assert told <= 3.0 * plain, (told, plain)


@pytest.mark.integration
def test_the_node_takes_and_logs_the_urdf_friction_a_parameter_overrides(tmp_path):
    """<dynamics damping friction> are read and named at configure, not applied (issue 29:
    friction_source none); a friction.<joint> parameter's joint is not listed."""
    urdf = tmp_path / 'arm.urdf'
    urdf.write_text(URDF.replace('<child link="forearm_link"/>', '<child link="forearm_link"/>'
                                 '<dynamics damping="4.5" friction="0.75"/>'))
    procs = Processes(tmp_path)
    try:
        proc = procs.start([console_script('rnea-controller'), '--urdf', str(urdf),
                            '--ros-args', '-r', '__ns:=/urdf_friction', '-p',
                            'friction.elbow_joint.coulomb:=0.5'])
        assert wait_for(lambda: 'active' in procs.output(proc), 120.0), procs.output(proc)
        log = procs.output(proc)
        assert 'the URDF <dynamics> states friction, not applied (friction_source: none' in log
        assert 'elbow_joint viscous 4.5' in log, log
        assert 'coulomb 0.75' not in log
    finally:
        procs.close()
