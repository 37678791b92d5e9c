"""identify: payload and friction recovered from bags whose efforts come from Pinocchio's RNEA
(the oracle) plus known friction and noise; the parameters file read by rclpy's own parser."""
import subprocess

from conftest import console_script, flatten, Processes, wait_for
import numpy as np
import pinocchio as pin
import pytest
from synthetic_bags import ArraySeries, JointStateSeries, motion, write_bag
import yaml

from rnea_controller import default_urdf_path, RobotModel
from rnea_controller.analysis.identify import PayloadRegressor, point_mass_inertia
from rnea_controller.analysis.validate import validate_bag
from rnea_controller.control.law import validate_parameters

LINK = 'wrist_3_link'
MASS, COM = 2.0, np.array([0.02, -0.03, 0.05])  # [kg], [m] in the link frame
VISCOUS = np.array([0.5, 0.8, 0.4, 0.1, 0.1, 0.05])  # [N·m·s/rad]
COULOMB = np.array([2.0, 3.0, 1.5, 0.5, 0.4, 0.3])  # [N·m]
ARMATURE = np.array([0.2, 0.2, 0.1, 0.07, 0.07, 0.07])  # [kg·m²], Menagerie's FR3-like
WIDTH = 0.01  # [rad/s]
ISSUE_COM = np.array([-1.1, -3.2, -16.6])  # [m], issue 23's identified_parameters.yaml


@pytest.fixture(scope='module')
def model():
    return RobotModel.from_urdf_file(default_urdf_path())


def pinocchio_torques(model, q, qd, qdd, mass=MASS, com=COM, armature=0.0, origin_free=False):
    """RNEA by Pinocchio with the payload (a point mass, or with `origin_free` one whose inertia
    about the link origin is zero) on the last joint's link and rotor inertias `armature`."""
    pmodel = pin.buildModelFromUrdf(str(default_urdf_path()))
    pmodel.armature[:] = armature
    last = pmodel.getJointId(model.joint_names[-1])
    com = np.asarray(com, float)
    payload = (pin.Inertia.FromDynamicParameters(np.r_[mass, mass * com, np.zeros(6)])
               if origin_free else pin.Inertia(mass, com, np.zeros((3, 3))))
    pmodel.inertias[last] = pmodel.inertias[last] + payload
    data = pmodel.createData()
    idx = [pmodel.joints[pmodel.getJointId(n)].idx_q for n in model.joint_names]
    tau = np.empty_like(q)
    for k in range(len(q)):
        x = [np.zeros(pmodel.nq) for _ in range(3)]
        for a, b in zip(x, (q[k], qd[k], qdd[k])):
            a[idx] = b
        tau[k] = pin.rnea(pmodel, data, *x)[idx]
    return tau


def test_regressor_column_sum_is_pinocchio_payload_torque(model):
    """Y θ(point mass) = RNEA with the payload - RNEA without, both by Pinocchio."""
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.uniform(-2, 2, (3, 20, model.n))
    _, Y = PayloadRegressor(model, LINK)(q, qd, qdd)
    theta = np.concatenate([[MASS], MASS * COM, point_mass_inertia(MASS, MASS * COM)])
    expected = (pinocchio_torques(model, q, qd, qdd)
                - pinocchio_torques(model, q, qd, qdd, mass=0.0))
    np.testing.assert_allclose(Y @ theta, expected, atol=1e-9)


def _write(path, model, q, qd, qdd, seed=0, mass=MASS, com=COM, origin_free=False):
    """A bag whose measured effort is Pinocchio's RNEA with armature + friction + noise
    (0.05 N·m)."""
    rng = np.random.default_rng(seed)
    stamps = 1_700_000_000_000_000_000 + np.arange(len(q), dtype=np.int64) * 1_000_000
    tau = (pinocchio_torques(model, q, qd, qdd, mass, com, ARMATURE, origin_free) + VISCOUS * qd
           + COULOMB * np.tanh(qd / WIDTH) + rng.normal(0, 0.05, q.shape))
    measured_qd = qd + rng.normal(0, 1e-3, q.shape)
    names = model.joint_names
    return write_bag(path, joint_states=JointStateSeries(stamps, names, q, measured_qd, tau),
                     reference=JointStateSeries(stamps, names, q, qd),
                     commands=ArraySeries(stamps, np.zeros_like(q)),
                     robot_description=default_urdf_path().read_text())


@pytest.fixture(scope='module')
def moving(model, tmp_path_factory):
    _, q, qd, qdd = motion(model.n, 40.0, seed=1)
    bag = _write(tmp_path_factory.mktemp('bags') / 'moving', model, q, qd, qdd)
    out = tmp_path_factory.mktemp('out')
    return validate_bag(bag, out, progress=False, plots=False, identify=True,
                        payload_link=LINK), bag


def test_payload_and_friction_recovered_within_5_percent(moving, model):
    result, _ = moving
    ident = result.report['identification']
    payload = ident['payload']
    assert payload['mass'] == pytest.approx(MASS, rel=0.05)
    assert abs(payload['mass'] - MASS) < 4 * payload['mass_std']
    for c, s, true in zip(payload['com'], payload['com_std'], COM):
        assert c == pytest.approx(true, rel=0.05) and abs(c - true) < 4 * s
    for j, joint in enumerate(model.joint_names):
        for kind, true in (('viscous', VISCOUS[j]), ('coulomb', COULOMB[j])):
            p = ident['parameters'][f'{joint}.{kind}']
            assert p['identifiable'], (joint, kind, p)
            assert p['estimate'] == pytest.approx(true, rel=0.05), (joint, kind)
            assert abs(p['estimate'] - true) < 4 * p['std_error'], (joint, kind, p)
        assert ident['armature'][joint] == pytest.approx(ARMATURE[j], rel=0.05), joint
    assert 1 <= ident['condition_number'] < 1e3
    table = result.table()
    assert f"payload on {LINK}: mass {payload['mass']:.4g} ± " in table
    assert 'not identifiable' not in table


def test_parameters_file_is_read_by_rclpy_with_the_node_names(moving, model, tmp_path):
    from rclpy.parameter import Parameter, parameter_dict_from_yaml_file
    result, _ = moving
    params = parameter_dict_from_yaml_file(str(result.files['parameters']), use_wildcard=True)
    values = {name: Parameter.from_parameter_msg(p).value for name, p in params.items()}
    ident = result.report['identification']
    assert values['payload.link'] == LINK
    assert values['payload.mass'] == pytest.approx(ident['payload']['mass'], abs=1e-6)
    assert list(values['payload.com']) == pytest.approx(ident['payload']['com'], abs=1e-6)
    joint = model.joint_names[1]
    assert values[f'friction.{joint}.viscous'] == pytest.approx(VISCOUS[1], rel=0.05)
    assert values[f'friction.{joint}.coulomb'] == pytest.approx(COULOMB[1], rel=0.05)
    assert values['friction_velocity_width'] == WIDTH
    assert values[f'armature.{joint}'] == pytest.approx(ARMATURE[1], rel=0.05)


def test_cli_identify_writes_the_parameters_file(moving, tmp_path):
    _, bag = moving
    out = subprocess.run([console_script('rnea-validate'), str(bag), '--identify',
                          '--payload-link', LINK, '-o', str(tmp_path / 'cli'), '--no-plots',
                          '--no-progress'], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert 'identification (' in out.stdout and 'centre of mass [m]: x 0.0' in out.stdout
    assert (tmp_path / 'cli' / 'identified_parameters.yaml').read_text().count('viscous') == 6


def test_a_motion_exciting_nothing_is_refused(model, tmp_path):
    """The arm held still at one posture: no friction, and not the com along gravity."""
    q = np.tile([0.3, -1.2, 1.2, -1.0, 1.2, 0.4], (3000, 1))
    zeros = np.zeros_like(q)
    bag = _write(tmp_path / 'still', model, q, zeros, zeros)
    result = validate_bag(bag, tmp_path / 'out', progress=False, plots=False, identify=True,
                          payload_link=LINK)
    params = result.report['identification']['parameters']
    for joint in model.joint_names:
        for kind in ('viscous', 'coulomb'):
            assert params[f'{joint}.{kind}'] == {
                'estimate': None, 'std_error': None, 'identifiable': False,
                'reason': 'not excited by this motion'}
    assert sum(not params[f'h_{a}']['identifiable'] for a in 'xyz') >= 1
    table = result.table()
    assert 'viscous not identifiable from this motion (not excited by this motion)' in table
    text = result.files['parameters'].read_text()
    assert 'friction' not in text.split('ros__parameters')[1]
    assert '#   shoulder_pan_joint.viscous' in text


def _one_joint(q, qd, qdd, j):
    """The motion of joint j alone, the others still at their first position."""
    still = [np.tile(q[0], (len(q), 1)), np.zeros_like(qd), np.zeros_like(qdd)]
    for array, moving in zip(still, (q, qd, qdd)):
        array[:, j] = moving[:, j]
    return still


GRAMS_FAR_AWAY = {'mass': 0.0072, 'com': ISSUE_COM, 'origin_free': True}


def test_an_ill_conditioned_centre_of_mass_leaves_the_payload_out(model, tmp_path):
    """Issue 23's file: 7.2 g 'at' (-1.1, -3.2, -16.6) m, here an unmodelled torque that is
    exactly such a mass and first moment (no inertia about the link origin: what the fit's
    point mass farther than 1 m carries). Fitted well, but c = h / m of a few grams is no
    payload: left out whole, and said why."""
    _, q, qd, qdd = motion(model.n, 20.0, seed=1)
    bag = _write(tmp_path / 'grams', model, q, qd, qdd, **GRAMS_FAR_AWAY)
    result = validate_bag(bag, tmp_path / 'out', progress=False, plots=False, identify=True,
                          payload_link=LINK)
    ident = result.report['identification']
    assert ident['payload']['mass'] is None and ident['payload']['com'] is None
    assert ident['parameters']['mass']['reason'].startswith('centre of mass ill-conditioned')
    assert 'mass not identifiable from this motion (centre of mass ill' in result.table()
    text = result.files['parameters'].read_text()
    assert 'payload' not in text.split('ros__parameters')[1]
    assert ident['armature'][model.joint_names[0]] == pytest.approx(ARMATURE[0], rel=0.05)


def _bags(model, tmp_path):
    """Runs a user may record, each written as a bag: {name: path}."""
    _, q, qd, qdd = motion(model.n, 20.0, seed=1)
    held = np.tile([0.3, -1.2, 1.2, -1.0, 1.2, 0.4], (3000, 1))
    runs = {'moving': (q, qd, qdd, {}), 'held still': (held, 0 * held, 0 * held, {}),
            'pan only': (*_one_joint(q, qd, qdd, 0), {}),
            'last joint only, no payload': (*_one_joint(q, qd, qdd, 5), {'mass': 0.0}),
            'grams far away': (q, qd, qdd, GRAMS_FAR_AWAY)}
    return {name: _write(tmp_path / name.replace(' ', '_').replace(',', ''), model, q, qd,
                         qdd, **kw) for name, (q, qd, qdd, kw) in runs.items()}


@pytest.mark.integration
def test_the_node_starts_with_every_file_identify_writes(model, tmp_path):
    """Issue 23: `rnea-validate --identify`, then `--params-file` always ends with a running
    controller, whatever the motion excited. Each file is validated, then the real node (one
    per file, under its own namespace) must reach 'active' with it."""
    files = {}
    for name, bag in _bags(model, tmp_path).items():
        result = validate_bag(bag, tmp_path / f'{bag.name}_out', progress=False, plots=False,
                              identify=True, payload_link=LINK)
        files[name] = result.files['parameters']
        tree = yaml.safe_load(files[name].read_text())['/**']['ros__parameters']
        validate_parameters(dict(flatten(tree)), model)
    assert 'payload' in files['moving'].read_text()
    assert 'payload' not in files['last joint only, no payload'].read_text().split('ros__')[1]
    procs = Processes(tmp_path)
    try:
        started = {name: procs.start([console_script('rnea-controller'), '--urdf',
                                      str(default_urdf_path()), '--ros-args', '-r',
                                      f'__ns:=/identified{k}', '--params-file', str(path)])
                   for k, (name, path) in enumerate(files.items())}
        for name, proc in started.items():
            assert wait_for(lambda p=proc: 'active' in procs.output(p), 120.0), (
                name, procs.output(proc))
    finally:
        procs.close()
