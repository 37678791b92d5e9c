"""The joint-torque regressor against Pinocchio's computeJointTorqueRegressor on real URDFs, and
Y θ against RNEA (ours and Pinocchio's)."""
import warnings

from conftest import robot_data_urdf
import numpy as np
import pinocchio as pin
from pinocchio_oracle import Oracle
import pytest

from rnea_controller import DimensionError, rnea, RobotModel
from rnea_controller.dynamics.regressor import (
    inertial_parameters,
    joint_torque_regressor,
    regressor_batch,
    with_inertial_parameters,
)

# a chain, a 7-joint arm with its prismatic fingers, xArm7, and a tree with a prismatic torso
ROBOTS = {
    'ur5': 'ur_description/urdf/ur5_robot.urdf',
    'panda': 'panda_description/urdf/panda.urdf',
    'xarm7': 'xarm_description/urdf/xarm7.urdf',
    'tiago': 'tiago_description/robots/tiago_no_hand.urdf',
}


@pytest.fixture(scope='module', params=sorted(ROBOTS))
def robot(request):
    path = robot_data_urdf(ROBOTS[request.param])
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # CAD round-off in some inertias: warned, not refused
        model = RobotModel.from_urdf_file(path)
    return model, Oracle(path, model)


def pinocchio_regressor(oracle, model, q, qd, qdd):
    """Pinocchio's Y, rows and 10-column blocks in our model's joint order."""
    Y = pin.computeJointTorqueRegressor(oracle.pin, oracle.data, oracle.q(q), oracle.v(qd),
                                        oracle.v(qdd))
    ids = [oracle.pin.getJointId(name) for name in model.joint_names]
    columns = np.concatenate([np.arange(10 * (j - 1), 10 * j) for j in ids])
    return Y[oracle.idx_v][:, columns]


def test_regressor_is_pinocchios(robot):
    model, oracle = robot
    rng = np.random.default_rng(7)
    for q, qd, qdd in rng.uniform(-2.0, 2.0, (4, 3, model.n)):
        expected = pinocchio_regressor(oracle, model, q, qd, qdd)
        np.testing.assert_allclose(joint_torque_regressor(model, q, qd, qdd), expected,
                                   rtol=0, atol=1e-10 * max(1.0, np.abs(expected).max()))


def test_parameters_are_pinocchios_and_y_theta_is_rnea(robot):
    model, oracle = robot
    ids = [oracle.pin.getJointId(name) for name in model.joint_names]
    theta = np.concatenate([oracle.pin.inertias[j].toDynamicParameters() for j in ids])
    np.testing.assert_allclose(inertial_parameters(model), theta, atol=1e-12)
    rng = np.random.default_rng(8)
    Q, QD, QDD = rng.uniform(-2.0, 2.0, (3, 50, model.n))
    Y = regressor_batch(model, Q, QD, QDD)
    assert Y.shape == (50, model.n, 10 * model.n)
    tau = Y @ theta
    np.testing.assert_allclose(tau, rnea(model, Q, QD, QDD), atol=1e-9)
    np.testing.assert_allclose(tau[3], oracle.rnea(Q[3], QD[3], QDD[3]), atol=1e-9)
    np.testing.assert_allclose(Y[5], joint_torque_regressor(model, Q[5], QD[5], QDD[5]),
                               atol=1e-12)


def test_a_model_built_from_other_parameters_has_their_torques(robot):
    """with_inertial_parameters: RNEA of the new model = Y θ' (and θ' read back)."""
    model, _ = robot
    rng = np.random.default_rng(9)
    theta = inertial_parameters(model) * rng.uniform(0.7, 1.3, 10 * model.n)
    changed = with_inertial_parameters(model, theta)
    np.testing.assert_allclose(inertial_parameters(changed), theta, atol=1e-15)
    q, qd, qdd = rng.uniform(-2.0, 2.0, (3, model.n))
    np.testing.assert_allclose(rnea(changed, q, qd, qdd),
                               joint_torque_regressor(model, q, qd, qdd) @ theta, atol=1e-9)


def test_sizes_are_checked(robot):
    model, _ = robot
    with pytest.raises(DimensionError, match=f'model has {model.n} bodies'):
        with_inertial_parameters(model, np.zeros(10 * model.n + 1))
    with pytest.raises(DimensionError, match='regressor_batch'):
        joint_torque_regressor(model, *np.zeros((3, 2, model.n)))
