"""rnea-demo end to end, shortened: real simulator, real controller, bag, validation.

The tracking figures come from the bag by the validator, aligned by header stamps; the bound of
issue 4 is 1e-3 rad RMS on every joint with the exact model (computed torque).
"""
import json
import subprocess

from conftest import console_script
import numpy as np
import pytest
from starvation import check, RunGaps

from rnea_controller.analysis.bagio import BagReader

pytestmark = [pytest.mark.integration, pytest.mark.slow]
JOINTS = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
          'wrist_2_joint', 'wrist_3_joint')
PANDA_ARM = tuple(f'panda_joint{k}' for k in range(1, 8))
FINGERS = ('panda_finger_joint1', 'panda_finger_joint2')


def run_demo(output, *options):
    done = subprocess.run([console_script('rnea-demo'), '--duration', '4', '--output',
                           str(output), *options], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, json.loads((output / 'report.json').read_text())


def test_demo_tracks_within_1e_3_rad_and_writes_bag_and_plots(tmp_path):
    """The bound holds on a run that ran in real time; a run the host starved (its own loop
    and joint states show it: starvation.RunGaps) is said to be, not failed (issue 31: 1.09e-3
    on wrist_2 with 180 ms stalls beside two busy processes)."""
    stdout, report = run_demo(tmp_path)
    tracking = report['tracking']['joints']
    assert set(tracking) == set(JOINTS)
    for joint in JOINTS:
        # ~4000 aligned samples in 4 s; on a loaded 2-core host the Python simulator and
        # recorder stall and fewer align (978 seen once): half a second of them is enough
        assert tracking[joint]['samples'] > 500, (joint, tracking[joint])
    worst = max(JOINTS, key=lambda joint: tracking[joint]['rms'])
    check(tracking[worst]['rms'] <= 1e-3, f'{worst}: RMS {tracking[worst]["rms"]:.2e} rad',
          RunGaps(report))
    assert report['saturation']['joints']['shoulder_lift_joint']['max_abs'] > 10.0  # it moved
    assert all(s['non_finite'] == 0 and s['over_limit'] == 0
               for s in report['saturation']['joints'].values())
    bag = tmp_path / 'bag'
    assert (bag / 'metadata.yaml').is_file() and list(bag.glob('*.mcap'))
    for png in ('position.png', 'tracking_error.png', 'torque.png'):
        assert (tmp_path / png).stat().st_size > 10_000, png
    assert 'err rms' in stdout and str(tmp_path) in stdout
    # the simulator's effort controller node answered the activation check
    assert 'effort controller /effort_controller has the same joints' in (
        tmp_path / 'controller.log').read_text()


def test_an_unknown_payload_shows_in_the_error_and_the_estimate(tmp_path):
    _, report = run_demo(tmp_path, '--payload', '2')
    estimate = report['residual']['payload_kg']
    check(abs(estimate - 2.0) <= 0.3, f'payload estimate {estimate:.3f} kg for 2 kg',
          RunGaps(report))
    worst = max(j['rms'] for j in report['tracking']['joints'].values())
    assert worst > 1e-3  # the model error shows (exact model: <= 1e-3 on every joint)


def test_the_demo_runs_on_the_panda_told_only_its_urdf(tmp_path):
    """`--robot panda`: example-robot-data's Panda with its hand, nothing told but the URDF.
    The controller controls the seven arm joints (the fingers, a mimic pair, are left out and
    the simulator holds them still), and the verdict's figures hold: every joint within 1e-3
    rad of the goal, none beyond 1.5 x its velocity limit, no contact, no brake. Measured on a
    loaded 2-core host: final errors 2e-9-3e-7 rad, speeds 0.22-0.39 of the limits."""
    stdout, report = run_demo(tmp_path, '--robot', 'panda', '--no-plots')
    assert report['model']['joints'] == [*PANDA_ARM, *FINGERS]
    assert report['model']['controlled_joints'] == list(PANDA_ARM)
    verdict = report['demo']
    assert verdict['joints'] == list(PANDA_ARM) and verdict['robot'].startswith('panda')
    assert f"demo verdict: {'PASS' if verdict['passed'] else 'FAIL'}" in stdout
    assert verdict['passed'] == (not verdict['failures'])
    gaps = RunGaps(report)
    # it moved: a tenth of its velocity limit at least, in the recorded states (a recorder the
    # host starved records part of the motion: every joint at 0.06 of its limit, seen once
    # beside two busy processes, the verdict's other figures holding)
    slowest = min(PANDA_ARM, key=lambda joint: verdict['speed_share'][joint])
    check(0.1 < verdict['speed_share'][slowest],
          f"{slowest} recorded at {verdict['speed_share'][slowest]:.2f} x its velocity limit at "
          'most', gaps)
    worst = max(PANDA_ARM, key=lambda joint: abs(verdict['final_error'][joint]))
    check(abs(verdict['final_error'][worst]) <= 1e-3,
          f"{worst} ends {verdict['final_error'][worst]:.2e} rad from the goal", gaps)
    fastest = max(PANDA_ARM, key=lambda joint: verdict['speed_share'][joint])
    check(verdict['speed_share'][fastest] <= 1.5,
          f"{fastest} at {verdict['speed_share'][fastest]:.2f} x its velocity limit", gaps)
    check(verdict['overspeeds'] == 0 and verdict['contacts'] == 0 and not any(
        mode.startswith(('braking', 'holding: contact')) for mode in verdict['modes']),
        f'modes {verdict["modes"]}, overspeeds {verdict["overspeeds"]}, contacts '
        f'{verdict["contacts"]}', gaps)
    check(verdict['passed'], f'verdict: {verdict["failures"]}', gaps)
    assert finger_travel(tmp_path / 'bag') == [0.0, 0.0]  # held where they started


def finger_travel(bag_path):
    """[m] how far each Panda finger moved over the recorded run."""
    low, high = np.full(2, np.inf), np.full(2, -np.inf)
    with BagReader(bag_path) as bag:
        for _, chunk in bag.stream({'/joint_states': ('joint_state', FINGERS)}):
            low = np.fmin(low, chunk.position.min(axis=0))
            high = np.fmax(high, chunk.position.max(axis=0))
    return (high - low).tolist()
