"""control/friction.py: one friction model for the law's feedforward and the identification.

The model's identities (its symmetric and antisymmetric parts), the identification's columns
against it, and the law's feedforward against Pinocchio's RNEA plus the model written out
independently here."""
from conftest import robot_data_urdf
import numpy as np
import pytest
from test_control import frozen, Oracle, random_state, ROBOTS

from rnea_controller import RobotModel
from rnea_controller.control.friction import friction_columns, friction_torque, KINDS
from rnea_controller.control.law import Controller, validate_parameters


def written_out(b, c, f0, s, w, vs, qd):
    """The docstring's formula, term by term."""
    return b * qd + c * np.tanh(qd / w) + f0 + s * np.tanh(qd / w) * np.exp(-(qd / vs) ** 2)


def test_the_columns_are_the_torque_per_unit_of_each_parameter():
    rng = np.random.default_rng(3)
    qd = rng.uniform(-2.0, 2.0, (50, 3))
    params = rng.uniform(-1.0, 1.0, (4,))
    columns = friction_columns(qd, 0.02, 0.3)
    assert columns.shape == (50, 3, len(KINDS))
    np.testing.assert_allclose(columns @ params, written_out(*params, 0.02, 0.3, qd),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(friction_torque(*params, 0.02, 0.3, qd),
                               written_out(*params, 0.02, 0.3, qd), rtol=1e-12, atol=1e-12)


def test_the_offset_is_the_asymmetry_of_coulomb_friction():
    """Well above w: tau(v) + tau(-v) = 2 f0 (the even part), and while moving up the Coulomb
    level is c + f0, down c - f0 (fc+ / fc-)."""
    b, c, f0, s, w, vs = 0.3, 2.0, 0.4, 0.8, 0.01, 0.2
    v = np.array([0.5, 1.0, 3.0])
    up, down = friction_torque(b, c, f0, s, w, vs, v), friction_torque(b, c, f0, s, w, vs, -v)
    np.testing.assert_allclose(up + down, 2 * f0, atol=1e-12)
    fast = 5.0  # the Stribeck excess has faded: exp(-625)
    assert friction_torque(b, c, f0, s, w, vs, fast) - b * fast == pytest.approx(c + f0)
    assert friction_torque(b, c, f0, s, w, vs, -fast) + b * fast == pytest.approx(-(c - f0))
    assert friction_torque(0.0, 0.0, 0.0, s, w, vs, 0.1) == pytest.approx(
        s * np.exp(-0.25), rel=1e-6)  # the excess at v_s / 2 (tanh(10): 1 - 4e-9)


@pytest.mark.parametrize('name', ['ur5', 'panda'])
def test_the_law_feeds_forward_the_whole_model(name):
    """Computed torque with friction.<joint>.* set equals Pinocchio's RNEA at the law's
    acceleration plus the written-out model at the desired velocity, at the desired position
    (the Coulomb terms act on the sliding reference qd_d + (Kp / Kd) e: control/adaptation.py
    rule 5)."""
    path, locked = ROBOTS[name]
    model = RobotModel.from_urdf_file(robot_data_urdf(path), locked_joints=locked)
    oracle = Oracle(robot_data_urdf(path), locked, model.joint_names)
    rng = np.random.default_rng(5)
    joints = model.joint_names
    b, c, f0, s = (rng.uniform(0.1, 1.0, model.n) for _ in range(4))
    f0 = f0 * rng.choice([-1.0, 1.0], model.n)
    values = frozen({'friction_source': 'none', 'friction_stribeck_velocity': 0.4,
                     'friction_velocity_width': 0.05,
                     **{f'friction.{j}.viscous': float(v) for j, v in zip(joints, b)},
                     **{f'friction.{j}.coulomb': float(v) for j, v in zip(joints, c)},
                     **{f'friction.{j}.offset': float(v) for j, v in zip(joints, f0)},
                     **{f'friction.{j}.stribeck': float(v) for j, v in zip(joints, s)}})
    cfg = validate_parameters(values, model)
    controller = Controller(cfg)
    for _ in range(5):
        q, qd, ref = random_state(model, rng)
        ref[0] = q
        tau = controller.command(cfg, q, qd, ref).copy()
        qdd = ref[2] + cfg.kp * (ref[0] - q) + cfg.kd * (ref[1] - qd)
        expected = oracle.rnea(q, qd, qdd) + written_out(b, c, f0, s, 0.05, 0.4, ref[1])
        np.testing.assert_allclose(tau, np.clip(expected, -cfg.effort_limits,
                                                cfg.effort_limits), rtol=1e-9, atol=1e-9)
