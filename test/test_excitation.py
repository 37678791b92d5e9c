"""The identification excitation (`rnea-send-trajectory --excite`, analysis/excitation.py):
at rest at both ends, within the limits, deterministic, and every base parameter excited,
its condition number measured on Pinocchio's regressor (the oracle), not ours."""
import math

import numpy as np
import pinocchio as pin
from pinocchio_oracle import Oracle
import pytest

from rnea_controller import default_urdf_path, RobotModel
from rnea_controller.analysis.excitation import (
    excitation,
    EXCITE_MAX_ACCELERATION,
    LIMIT_MARGIN,
)
from rnea_controller.errors import TrajectoryError
from rnea_controller.sim.node import HOME
from rnea_controller.tools.send_trajectory import excitation_motion

MODEL = RobotModel.from_urdf_file(default_urdf_path())
ORACLE = Oracle(default_urdf_path(), MODEL)


def oracle_regressor(q, qd, qdd):
    """(K n, 13 n): Pinocchio's joint torque regressor, then armature, viscous and Coulomb
    columns, stacked."""
    rows = []
    for x, v, a in zip(q, qd, qdd):
        Y = pin.computeJointTorqueRegressor(ORACLE.pin, ORACLE.data, ORACLE.q(x), ORACLE.v(v),
                                            ORACLE.v(a))
        rows.append(np.hstack([Y[ORACLE.idx_v], np.diag(a), np.diag(v), np.diag(np.sign(v))]))
    return np.vstack(rows)


def conditioning(A, reference):
    """cond of A's columns scaled by their RMS over `reference`, over the rank of
    `reference` (the base parameters' dimension): s_0 / s_{r-1}."""
    scales = np.sqrt(np.mean(reference ** 2, axis=0))
    live = scales > 1e-9 * scales.max()
    s_ref = np.linalg.svd(reference[:, live] / scales[live], compute_uv=False)
    rank = int(np.sum(s_ref > 1e-6 * s_ref[0]))
    s = np.linalg.svd(A[:, live] / scales[live], compute_uv=False)
    return s[0] / s[rank - 1], rank


@pytest.fixture(scope='module')
def random_reference():
    rng = np.random.default_rng(7)
    K = 300
    q = rng.uniform(-math.pi, math.pi, (K, MODEL.n))
    qd = rng.uniform(-1.2, 1.2, (K, MODEL.n))
    qdd = rng.uniform(-8, 8, (K, MODEL.n))
    return oracle_regressor(q, qd, qdd)


def test_the_excitation_starts_and_ends_at_rest_within_the_limits_and_is_deterministic():
    centre = np.array(HOME)
    w = excitation_motion(MODEL, centre, 12.0)
    again = excitation_motion(RobotModel.from_urdf_file(default_urdf_path()), centre, 12.0)
    np.testing.assert_array_equal(w.positions, again.positions)
    assert w.times[-1] == pytest.approx(12.0)
    np.testing.assert_allclose(w.positions[-1], centre)
    for x in excitation(MODEL, centre, 12.0)(np.array([0.0, 12.0])):  # q - c, qd, qdd
        np.testing.assert_allclose(x, 0.0, atol=1e-9)
    assert np.all(np.abs(w.velocities) <= 0.4 * MODEL.velocity_limits + 1e-9)
    assert np.all(np.abs(w.accelerations) <= EXCITE_MAX_ACCELERATION + 1e-9)
    limits = MODEL.position_limits
    assert np.all(w.positions >= limits[:, 0] + LIMIT_MARGIN - 1e-9)
    assert np.all(w.positions <= limits[:, 1] - LIMIT_MARGIN + 1e-9)
    # every joint moves both ways, through most of its room or its amplitude
    assert np.all(w.velocities.max(axis=0) > 0.5) and np.all(w.velocities.min(axis=0) < -0.5)


def test_every_base_parameter_is_excited_better_than_by_the_old_sine_sum(random_reference):
    """On Pinocchio's regressor (+ armature and friction columns) at the 120 waypoints:
    the rank of random states (every base parameter), condition number measured 29 against
    the old sine sum's 85 (the column-scaled regressor over the base dimension)."""
    w = excitation_motion(MODEL, np.array(HOME), 12.0)
    cond, rank = conditioning(oracle_regressor(w.positions, w.velocities, w.accelerations),
                              random_reference)
    old = old_sine_sum(np.array(HOME), 12.0)
    cond_old, _ = conditioning(oracle_regressor(*old), random_reference)
    print(f'condition number: optimised {cond:.1f}, old sine sum {cond_old:.1f}, rank {rank}')
    assert cond < 40 and cond < cond_old / 2


def old_sine_sum(centre, T, step=0.1):
    """The excitation before issue 30 (three sines per joint in a quintic window, at most
    3 rad, 40 % of the velocity limit, 8 rad/s²), for comparison."""
    t = np.arange(1, int(round(T / step)) + 1) * step
    fine = np.linspace(0.0, T, 4001)

    def shape(x, j):
        ramp = np.clip(np.minimum(x, T - x), 0.0, 1.0)
        w = 10 * ramp ** 3 - 15 * ramp ** 4 + 6 * ramp ** 5
        return w * sum(np.sin(2 * math.pi * f * (1 + 0.17 * j) * x + 1.3 * m * (j + 1))
                       for m, f in enumerate((0.13, 0.37, 0.83)))

    q = np.empty((len(t), MODEL.n))
    for j in range(MODEL.n):
        p = shape(fine, j)
        v, a = np.gradient(p, fine), np.gradient(np.gradient(p, fine), fine)
        s = min(3.0 / np.abs(p).max(), 0.4 * MODEL.velocity_limits[j] / np.abs(v).max(),
                8.0 / np.abs(a).max())
        q[:, j] = centre[j] + s * shape(t, j)
    qd = np.gradient(q, t, axis=0)
    return q, qd, np.gradient(qd, t, axis=0)


def test_a_joint_at_its_limit_is_named():
    centre = np.array(HOME)
    centre[2] = MODEL.position_limits[2, 1] - 0.05  # the elbow within the margin of its limit
    with pytest.raises(TrajectoryError, match='cannot move elbow_joint: no room'):
        excitation_motion(MODEL, centre, 12.0)
