"""Held-out torque prediction of several models on the same rows.

The rows are the ones `identify.Identification` holds out: a second bag's every sample
(`whole`), or the samples of one block of `HOLDOUT_BLOCK` s in every `HOLDOUT_EVERY` (the
third), smoothed by the same `Smoother` (the window and decimation the identification chose:
its report's 'smoothing'), every row of every joint, scored against the torques as measured
(unfiltered). On them a model from elsewhere (a paper's, another tool's, with its own friction
law) is compared with the URDF's and the identified one on equal terms, the same acceleration
estimate for every model:

    rows = heldout_rows('bag', model, window_s=0.16, decimate=5)
    rms = compare(rows, {'urdf': model_torque(model), 'paper': their_torque})
    rms['paper']['panda_joint2']  # {'rms': [N·m], 'relative': RMS(error) / RMS(tau), 'rows',
                                  #  'slow': the same on the rows where |qd| < SLIDING_SPEED}
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
    """Smoothed held-out samples: q [rad], qd [rad/s], qdd [rad/s²] (K, n) in model order, tau
    [N·m] as measured; mask (K, n): joint j's torque of sample k is a held-out row; slow (K, n):
    and the joint moves slower than SLIDING_SPEED."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    mask: np.ndarray
    slow: np.ndarray


def heldout_rows(bag_path, model, topic='/joint_states', window_s=0.02, decimate=None,
                 chunk_size=20000, whole=False, states=None):
    """The held-out rows of the joint states on `topic` of a bag (`HeldOut`); `whole`: a
    second bag's (`rnea-validate --holdout`), every sample of it held out; `states`: (stamps
    [ns], q, qd, tau) instead of a bag (a recording cut or decimated in memory)."""
    smoother, start, parts = Smoother(window_s, decimate), None, []
    for chunk in _chunks(bag_path, model, topic, chunk_size, states):
        out = smoother.update(*chunk)
        if out is None or not len(out[0]):
            continue
        t, q, qd, qdd, _ = out
        start = t[0] if start is None else start
        block = ((t - start) * 1e-9 // HOLDOUT_BLOCK).astype(np.int64)
        held = ((block % HOLDOUT_EVERY) == 2) | whole
        mask = np.repeat(held[:, None], model.n, axis=1)
        keep = held
        parts.append((q[keep], qd[keep], qdd[keep], smoother.raw_tau[keep], mask[keep],
                      mask[keep] & (np.abs(qd[keep]) < SLIDING_SPEED)))
    n = model.n
    empty = (np.zeros((0, n)),) * 4 + (np.zeros((0, n), bool),) * 2
    return HeldOut(*(np.concatenate(arrays) for arrays in zip(empty, *parts)))


def _chunks(bag_path, model, topic, chunk_size, states):
    if states is not None:
        yield states
        return
    with BagReader(bag_path) as bag:
        bag.require(topic, 'sensor_msgs/msg/JointState')
        for _, chunk in bag.stream({topic: ('joint_state', model.joint_names)}, chunk_size):
            yield chunk.stamps, chunk.position, chunk.velocity, chunk.effort


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
    'rows': count, 'slow': the same on the slow rows}}} of each predictor(q, qd, qdd) on the
    held-out rows."""
    out = {}
    for name, predict in predictors.items():
        error = rows.tau - predict(rows.q, rows.qd, rows.qdd)
        out[name] = {joint: {**_figures(error[:, j], rows.tau[:, j], rows.mask[:, j]),
                             'slow': _figures(error[:, j], rows.tau[:, j], rows.slow[:, j])}
                     for j, joint in enumerate(joint_names)}
    return out


def _figures(error, tau, m):
    rms = math.sqrt(np.mean(error[m] ** 2)) if m.any() else math.nan
    scale = math.sqrt(np.mean(tau[m] ** 2)) if m.any() else math.nan
    return {'rms': rms, 'relative': rms / scale if scale else math.nan, 'rows': int(m.sum())}
