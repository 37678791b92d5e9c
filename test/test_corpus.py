"""The world's corpus: every example-robot-data URDF that Pinocchio loads and that has an
actuated joint loads in RobotModel with no option, and its RNEA agrees with Pinocchio's.

Pinocchio's default reading of a URDF is the oracle: a mimic joint is an independent joint (the
convention of `RobotModel`, docs/dynamics.md), so both models have the same joints. Where a
URDF is refused, it is listed below with the reason, which Pinocchio does not check.
"""
import warnings

from conftest import ROBOTS
import numpy as np
import pinocchio as pin
from pinocchio_oracle import Oracle
import pytest

from rnea_controller import DescriptionWarning, rnea, rnea_reference, RobotModel, UrdfError

# Refused URDFs and the reason (none: romeo_laas_small's hip links, whose principal moment of
# -0.0027 kg·m² is -5 % of the largest, load with a warning; test_urdf holds the bound).
REFUSED = {}
RTOL = 1e-12
STATES = 3  # random states per robot, fixed seed
REFERENCE_JOINTS = 40  # the readable 6×6 reference runs on robots up to this size


def pinocchio_loads(path):
    """True if Pinocchio reads the URDF as a fixed-base model with an actuated joint."""
    try:
        return pin.buildModelFromUrdf(str(path)).nv > 0
    except (RuntimeError, ValueError):
        return False


def corpus():
    paths = sorted(ROBOTS.rglob('*.urdf'))
    assert len(paths) > 60, f'example-robot-data has only {len(paths)} URDFs under {ROBOTS}'
    return [str(p.relative_to(ROBOTS)) for p in paths if pinocchio_loads(p)]


CORPUS = corpus()


def assert_close(ours, oracle, what):
    """Agreement within RTOL of the oracle's magnitude (at least 1 N·m)."""
    scale = max(1.0, float(np.max(np.abs(oracle))))
    np.testing.assert_allclose(ours, oracle, rtol=0.0, atol=RTOL * scale, err_msg=what)


def test_the_corpus_is_the_whole_of_example_robot_data():
    print(f'{len(CORPUS)} URDFs of example-robot-data that Pinocchio loads with an actuated '
          f'joint; {len(CORPUS) - len(REFUSED)} load in RobotModel')
    assert len(CORPUS) == 66
    assert set(REFUSED) <= set(CORPUS)


@pytest.mark.parametrize('relative', CORPUS)
def test_urdf_loads_and_rnea_matches_pinocchio(relative):
    path = ROBOTS / relative
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DescriptionWarning)
        if relative in REFUSED:
            with pytest.raises(UrdfError, match=REFUSED[relative]):
                RobotModel.from_urdf_file(path)
            return
        model = RobotModel.from_urdf_file(path)
    oracle = Oracle(path, model)
    assert oracle.pin.nv == model.n, 'Pinocchio has joints that the model does not'
    rng = np.random.default_rng(25)
    for k in range(STATES):
        q, qd, qdd = rng.uniform(-2.0, 2.0, (3, model.n))
        expected = oracle.rnea(q, qd, qdd)
        assert_close(rnea(model, q, qd, qdd), expected, f'{relative}, state {k}: rnea')
        if model.n <= REFERENCE_JOINTS:
            assert_close(rnea_reference(model, q, qd, qdd), expected,
                         f'{relative}, state {k}: rnea_reference')


def pinocchio_mimic_relations(path):
    """{follower: (leader, multiplier, offset)} of Pinocchio's mimic reading of the URDF."""
    full = pin.buildModelFromUrdf(str(path), mimic=True)
    by_q = {j.idx_q: full.names[j.id] for j in full.joints[1:]
            if j.shortname() != 'JointModelMimic'}
    return {full.names[j.id]: (by_q[j.idx_q], j.extract().scaling, j.extract().offset)
            for j in full.joints[1:] if j.shortname() == 'JointModelMimic'}


MIMIC = [r for r in CORPUS if '<mimic' in (ROBOTS / r).read_text() and r not in REFUSED]


@pytest.mark.parametrize('relative', MIMIC)
def test_mimic_relations_are_pinocchios(relative):
    """The relation a model records for each mimic joint is the one Pinocchio's mimic=True
    model holds: same leader, multiplier and offset."""
    path = ROBOTS / relative
    try:
        expected = pinocchio_mimic_relations(path)
    except (RuntimeError, ValueError, KeyError):
        pytest.skip("Pinocchio's mimic=True reading refuses this URDF")
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DescriptionWarning)
        model = RobotModel.from_urdf_file(path)
    names = model.joint_names
    ours = {names[i]: (names[leader], m, o) for i, leader, m, o in model.mimic}
    assert ours == expected  # both read the same decimal text
