"""The published models of the real recordings in ../shared/data (each folder's
published_model.yaml and README), as predict(q, qd, qdd) -> tau [N·m] on a model's joints, and
the recordings themselves, cut and decimated as the tests and the bench use them.

- `gaz_panda`: Gaz et al. (RA-L 2019), the Panda's links in the URDF's frames and a shifted
  sigmoid friction per joint.
- `wiebe_double_pendulum`: Wiebe et al. (RA-M 2024), the double pendulum's links, the rotors'
  inertia (a per-joint armature and the off-diagonal -gr Ir), viscous and atan friction.
Independent of this package's identification: only the URDF reader, RNEA and `corrected_urdf`
(held to Pinocchio in test_identify.py) place the published links.
"""
from pathlib import Path

from conftest import SHARED_DATA
import numpy as np
from synthetic_bags import JointStateSeries, write_bag
import yaml

from rnea_controller.analysis import heldout
from rnea_controller.analysis.bagio import BagReader
from rnea_controller.analysis.identify import corrected_urdf
from rnea_controller.dynamics.model import RobotModel

PANDA_FINGERS = {'panda_finger_joint1': 0.0, 'panda_finger_joint2': 0.0}


def spec(name):
    return yaml.safe_load((SHARED_DATA / name / 'published_model.yaml').read_text())


def _links_model(model, urdf, links, locked=None):
    return RobotModel.from_urdf_string(corrected_urdf(Path(urdf).read_text(), model, links),
                                       locked_joints=locked)


def gaz_panda(model, urdf):
    """predict(q, qd, qdd) of Gaz et al.'s Panda: its links (no hand), its sigmoid friction."""
    published = spec('gaz_panda')
    arm = _links_model(model, urdf, published['links'], PANDA_FINGERS)
    phi1, phi2, phi3 = (np.array(published['friction'][k]) for k in ('phi1', 'phi2', 'phi3'))
    rigid = heldout.model_torque(arm, np.zeros(model.n), np.zeros(model.n))

    def predict(q, qd, qdd):
        friction = phi1 / (1 + np.exp(-phi2 * (qd + phi3))) - phi1 / (1 + np.exp(-phi2 * phi3))
        return rigid(q, qd, qdd) + friction
    return predict


def wiebe_double_pendulum(model, urdf):
    """predict(q, qd, qdd) of Wiebe et al.'s double pendulum (model_2.0): its links, the
    rotors' inertia (armature and the coupling -gr Ir in M12), b qd + cf atan(100 qd)."""
    published = spec('wiebe_double_pendulum')
    arm = _links_model(model, urdf, published['links'])
    names = model.joint_names
    armature = np.array([published['armature'][j] for j in names])
    viscous = np.array([published['friction']['viscous'][j] for j in names])
    coulomb = np.array([published['friction']['coulomb_atan'][j] for j in names])
    coupling = published['rotor_coupling']['inertia']
    rigid = heldout.model_torque(arm, np.zeros(model.n), np.zeros(model.n))

    def predict(q, qd, qdd):
        return (rigid(q, qd, qdd) + armature * qdd + coupling * qdd[:, ::-1]
                + viscous * qd + coulomb * np.arctan(100 * qd))
    return predict


def read_states(bag, joints):
    """(stamps [ns], q, qd, tau) of a bag's /joint_states in `joints` order."""
    with BagReader(bag) as reader:
        (_, states), = reader.stream({'/joint_states': ('joint_state', list(joints))}, 10 ** 6)
    return states.stamps, states.position, states.velocity, states.effort


def decimated(states, rate_hz):
    """The states kept at about `rate_hz`: the first sample of each 1/rate_hz interval of
    their stamps (as a logger at that rate would have read them), nothing filtered."""
    stamps = states[0]
    tick = ((stamps - stamps[0]) * rate_hz * 1e-9).astype(np.int64)
    keep = np.flatnonzero(np.diff(np.concatenate([[-1], tick])) > 0)
    return tuple(a[keep] for a in states)


def write_states(path, states, joints):
    stamps, q, qd, tau = states
    return write_bag(path, joint_states=JointStateSeries(stamps, tuple(joints), q, qd, tau))
