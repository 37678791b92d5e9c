"""A second real robot's recordings: DFKI's double pendulum (Wiebe et al., RA-M 2024; ../shared/
data/wiebe_double_pendulum/README.md): two geared AK80-6 drives, 500 Hz, torques from the motor
currents (`--effort applied`), positions read behind the gear; its excitation (trajectory_03)
identified by `rnea-validate --identify`, its hold-out run (trajectory_01, another motion: other
torque frequencies and amplitudes) held out, and the same at 100 Hz (decimated here: the shared
recordings have no 100 Hz run).

Oracles: the measured torques, and the model its authors identified from 14 runs of the same day
(published_model.yaml, `published_models.wiebe_double_pendulum`), both independent of this
package; every model scored on the same rows with the same acceleration estimate (the
identification's chosen filter). Figures: docs/validation.md.
"""
from conftest import SHARED_DATA
import numpy as np
import published_models
import pytest

from rnea_controller.analysis import heldout
from rnea_controller.analysis.validate import _configured, main, validate_bag
from rnea_controller.dynamics.model import RobotModel

DATA = SHARED_DATA / 'wiebe_double_pendulum'
URDF = DATA / 'double_pendulum.urdf'
JOINTS = ['Joint1', 'Joint2']
pytestmark = pytest.mark.skipif(not (DATA / 'published_model.yaml').exists(), reason=(
    f'the real recording wiebe_double_pendulum is not at {DATA} (../shared/data beside the '
    'project root)'))
# NOT issue 44's bar (ours <= published), which one 10-s run does not reach here: a regression
# margin, ours / published held-out RMS on every row, measured at the window the data choose
# (docs/validation.md: 1.26, 1.42 at 500 Hz; 1.21, 1.43 at 100 Hz; 1.29, 1.39 and 1.25, 1.39
# before the Coulomb widths reached 0.1 and 0.3 rad/s). Why, measured: joint 1's hold-out run
# turns the shoulder at 3-6 rad/s in 13 % of its rows, the excitation in 1 % (the viscous
# friction fitted below 1.5 rad/s is extrapolated); joint 2's fit puts link 2's centre of mass
# 1 cm off its axis, the excitation's zero (each run zeroes its motors at a rest friction
# holds), a constant -0.07 N·m on the hold-out run. Even the published model's own five
# parameters fitted to this run predict the hold-out run 1.10x and 1.29x worse than the
# published ones (fitted to the day's 14 runs, this hold-out run among them). Beyond it fails.
WORSE_THAN_PUBLISHED = {500: {'Joint1': 1.3, 'Joint2': 1.45}, 100: {'Joint1': 1.25,
                                                                   'Joint2': 1.45}}
# the slow rows (|qd| < 0.1 rad/s) where a joint has SLOW_ROWS of them (joint 1 at 500 Hz, 43):
# measured 1.03, a margin too
WORSE_THAN_PUBLISHED_SLOW = {'Joint1': 1.08}
SLOW_ROWS = 30  # fewer slow rows than this are not a figure (as test_real_recording's)


@pytest.fixture(scope='module')
def model():
    return RobotModel.from_urdf_file(URDF)


def _identify(fit, held, out):
    return validate_bag(fit, out, urdf_path=URDF, identify=True, holdout=held, progress=False,
                        plots=False)


def _table(result, model, held):
    chosen = result.report['identification']['smoothing']
    rows = heldout.heldout_rows(held, model, window_s=chosen['window_s'],
                                decimate=chosen['decimate'], whole=True)
    identified, friction, _ = _configured(model, JOINTS, result.files['parameters'])
    ident = result.report['identification']
    options = {'width': ident['friction_velocity_width'],
               'stribeck_velocity': ident['friction_stribeck_velocity']}
    return heldout.compare(rows, {
        'urdf': heldout.model_torque(model, **options),
        'identified': heldout.model_torque(identified, *friction, **options),
        'published': published_models.wiebe_double_pendulum(model, URDF)}, JOINTS)


@pytest.fixture(scope='module')
def at_500(tmp_path_factory):
    out = tmp_path_factory.mktemp('pendulum')
    return _identify(DATA / 'excitation', DATA / 'holdout', out), DATA / 'holdout'


@pytest.fixture(scope='module')
def at_100(tmp_path_factory, model):
    """The same runs decimated to 100 Hz (every fifth state: a 100 Hz logger's)."""
    out = tmp_path_factory.mktemp('pendulum100')
    bags = [published_models.write_states(out / name, published_models.decimated(
        published_models.read_states(DATA / name, JOINTS), 100.0), JOINTS)
        for name in ('excitation', 'holdout')]
    return _identify(bags[0], bags[1], out / 'out'), bags[1]


def test_the_recordings_are_as_published():
    """4997 joint states at 500 Hz in each run; torques within the drives' ±12 N·m."""
    for name in ('excitation', 'holdout'):
        stamps, q, qd, tau = published_models.read_states(DATA / name, JOINTS)
        assert len(stamps) == 4997
        assert 1e-9 * (stamps[-1] - stamps[0]) == pytest.approx(10.0, abs=0.01)
        assert abs(tau).max() < 1.1


@pytest.mark.parametrize('rate', [500, 100])
def test_identified_on_one_run_predicts_another(rate, model, request):
    """The excitation identified (every row, the filter and each joint's friction model
    chosen by cross-validation of the excitation alone), the hold-out run predicted: better
    than the URDF's model on every joint (the URDF's inertias are another parameter set's);
    against the published model (fitted on the 14 runs of the same day, this hold-out run
    among them) within the measured ratios, on every row and on the slow rows where a joint
    has SLOW_ROWS of them; the report's held-out figures are those of `heldout.compare`."""
    result, held = request.getfixturevalue(f'at_{rate}')
    assert result.passed, result.failures
    ident = result.report['identification']
    assert ident['holdout']['source'] == 'second bag'
    assert 'held-out rows not used' in ident['selection']['method']
    table = _table(result, model, held)
    for joint in JOINTS:
        ours, theirs = table['identified'][joint], table['published'][joint]
        assert ours['rms'] == pytest.approx(ident['holdout']['joints'][joint]['rms_identified'],
                                            rel=1e-3), joint
        assert ours['rms'] < 0.5 * table['urdf'][joint]['rms'], joint
        assert ours['rms'] <= WORSE_THAN_PUBLISHED[rate][joint] * theirs['rms'], (joint, table)
        if ours['slow']['rows'] >= SLOW_ROWS:
            assert ours['slow']['rms'] <= WORSE_THAN_PUBLISHED_SLOW.get(joint, 1.0) * theirs[
                'slow']['rms'], (joint, table)


def test_the_report_says_where_the_holdout_run_is_faster(at_500):
    """The hold-out run turns the shoulder faster than the excitation did (4.8 against 3.4
    rad/s at most): the report says which share of joint 1's held-out rows is beyond the speed
    99 % of the fit's rows stay under, and that its friction there is extrapolated; the elbow
    moves within the same speeds in both runs, and nothing is said. Checked on the measured
    (unsmoothed) velocities of both bags."""
    result, held = at_500
    speeds = {joint: h['speeds'] for joint, h in
              result.report['identification']['holdout']['joints'].items()}
    fit_qd = published_models.read_states(DATA / 'excitation', JOINTS)[2]
    held_qd = published_models.read_states(held, JOINTS)[2]
    for j, joint in enumerate(JOINTS):
        bound = speeds[joint]['fit_speed_p99']
        assert np.mean(np.abs(fit_qd[:, j]) < bound) >= 0.99, joint
        beyond = np.mean(np.abs(held_qd[:, j]) >= bound)
        assert speeds[joint]['beyond'] == pytest.approx(beyond, abs=0.02), joint
    assert speeds['Joint1']['beyond'] > 0.05 > speeds['Joint2']['beyond']
    lines = {line.split(':')[0].strip(): line for line in result.table().splitlines()
             if line.strip().startswith(('Joint1:', 'Joint2:')) and 'rows); slow' in line}
    assert "faster than 99 % of the fit's (|qd| > 3.16 rad/s)" in lines['Joint1']
    assert 'extrapolated' not in lines['Joint2']


def test_masses_file_is_the_prior_and_the_report_says_so(tmp_path, capsys):
    """`rnea-validate --identify --masses FILE` with the published links' masses as the
    vendor's table (the URDF's are another parameter set's): the report names the file as the
    prior's source, and the bounds are about those masses (0.5-2x link 1's)."""
    published = published_models.spec('wiebe_double_pendulum')['links']
    masses = tmp_path / 'masses.yaml'
    masses.write_text(''.join(f"{link}: {v['mass']}\n" for link, v in published.items()))
    code = main([str(DATA / 'excitation'), '--urdf', str(URDF), '--identify', '--holdout',
                 str(DATA / 'holdout'), '--masses', str(masses), '-o', str(tmp_path / 'out'),
                 '--no-plots', '--no-progress'])
    out = capsys.readouterr().out
    assert code == 0, out
    assert (f'prior (masses, bounds, what the motion does not see): {masses} for Link1, Link2, '
            "the URDF's for the other bodies") in out
    link1 = published['Link1']['mass']  # Link2 carries the payload estimate: no upper bound
    assert f'mass bounds {0.5 * link1:.4g}-{2 * link1:.4g} kg' in out
