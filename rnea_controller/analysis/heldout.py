"""Held-out torque prediction of several models on the same rows.

The rows are the ones `identify.Identification` holds out of its fit when no second bag is
given: the samples of one block of `HOLDOUT_BLOCK` s in every `HOLDOUT_EVERY` (the third),
smoothed by the same `Smoother`, and for joint j only where it slides steadily (|qd_j| ≥
`SLIDING_SPEED`, no velocity reversal in the filter's window). On them a model from
elsewhere (a paper's, another tool's, with its own friction law) is compared with the URDF's
and the identified one on equal terms:

    rows = heldout_rows('bag', model)
    rms = compare(rows, {'urdf': model_torque(model), 'paper': their_torque})
    rms['paper']['panda_joint2']  # {'rms': [N·m], 'relative': RMS(error) / RMS(tau)}
"""
from dataclasses import dataclass
import math

import numpy as np

from rnea_controller.analysis.bagio import BagReader
from rnea_controller.analysis.identify import (
    DEFAULT_WIDTH,
    HOLDOUT_BLOCK,
    HOLDOUT_EVERY,
    SLIDING_SPEED,
)
from rnea_controller.analysis.smoothing import Smoother
from rnea_controller.control.friction import friction_torque
from rnea_controller.control.parameters import defaults
from rnea_controller.dynamics.rnea import rnea


@dataclass
class HeldOut:
    """Smoothed held-out samples: q [rad], qd [rad/s], qdd [rad/s²], tau [N·m] (K, n) in
    model order; mask (K, n): joint j's torque of sample k is a held-out row."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    mask: np.ndarray


def heldout_rows(bag_path, model, topic='/joint_states', window_s=0.02, chunk_size=20000,
                 whole=False):
    """The held-out rows of the joint states on `topic` of a bag (`HeldOut`); `whole`: a
    second bag's (`rnea-validate --holdout`), every sample of it held out."""
    smoother, start, parts = Smoother(window_s), None, []
    with BagReader(bag_path) as bag:
        bag.require(topic, 'sensor_msgs/msg/JointState')
        for _, chunk in bag.stream({topic: ('joint_state', model.joint_names)}, chunk_size):
            out = smoother.update(chunk.stamps, chunk.position, chunk.velocity, chunk.effort)
            if out is None or not len(out[0]):
                continue
            t, q, qd, qdd, tau = out
            start = t[0] if start is None else start
            block = ((t - start) * 1e-9 // HOLDOUT_BLOCK).astype(np.int64)
            held = ((block % HOLDOUT_EVERY) == 2) | whole
            mask = held[:, None] & smoother.steady & (np.abs(qd) >= SLIDING_SPEED)
            keep = mask.any(axis=1)
            parts.append((q[keep], qd[keep], qdd[keep], tau[keep], mask[keep]))
    n = model.n
    empty = (np.zeros((0, n)),) * 4 + (np.zeros((0, n), bool),)
    return HeldOut(*(np.concatenate(arrays) for arrays in zip(empty, *parts)))


STRIBECK_VELOCITY = defaults()['friction_stribeck_velocity']  # [rad/s], the node's default


def model_torque(model, viscous=None, coulomb=None, offset=None, stribeck=None,
                 width=DEFAULT_WIDTH, stribeck_velocity=STRIBECK_VELOCITY):
    """predict(q, qd, qdd) -> tau [N·m] of the node's model: RNEA (with the model's armature)
    + the node's friction model (`control.friction.friction_torque`); viscous, coulomb
    default the model's <dynamics>, offset and stribeck 0, each (n,)."""
    viscous = np.asarray(model.damping if viscous is None else viscous, float)
    coulomb = np.asarray(model.friction if coulomb is None else coulomb, float)
    offset = np.zeros(model.n) if offset is None else np.asarray(offset, float)
    stribeck = np.zeros(model.n) if stribeck is None else np.asarray(stribeck, float)

    def predict(q, qd, qdd):
        return rnea(model, q, qd, qdd) + friction_torque.py_func(
            viscous, coulomb, offset, stribeck, width, stribeck_velocity, qd)
    return predict


def compare(rows, predictors, joint_names):
    """{name: {joint: {'rms': RMS(tau - prediction) [N·m], 'relative': that / RMS(tau),
    'rows': count}}} of each predictor(q, qd, qdd) on the held-out rows."""
    out = {}
    for name, predict in predictors.items():
        error = rows.tau - predict(rows.q, rows.qd, rows.qdd)
        out[name] = {}
        for j, joint in enumerate(joint_names):
            m = rows.mask[:, j]
            rms = math.sqrt(np.mean(error[m, j] ** 2)) if m.any() else math.nan
            scale = math.sqrt(np.mean(rows.tau[m, j] ** 2)) if m.any() else math.nan
            out[name][joint] = {'rms': rms, 'relative': rms / scale if scale else math.nan,
                                'rows': int(m.sum())}
    return out
