"""Synthetic controller runs with known answers, written as bags (tests and bench/).

The measured efforts come from Pinocchio's RNEA (the oracle), never from this package's.

Run (rate 1 kHz by default, stamps t_k = T0 + k / rate):
    q_d(t)  = q0 + A sin(w t + phi)                            reference (exact derivatives)
    q(t)    = q_d(t) - error                                   measured: a set tracking error
    tau(t)  = Pinocchio RNEA(q, qd, qdd) with `payload` kg at the last joint's link origin
    u(t)    = tau_ff clipped to ±0.6 · limit, except joint `saturate[0]` held at +limit over
              [saturate[1], saturate[1] + saturate[2]) s
    gap:    no reference, joint state or command in [gap[0], gap[0] + gap[1]) s
"""
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from rnea_controller.analysis.bagio import ArraySeries, JointStateSeries, write_bag

T0_NS = 1_700_000_000_000_000_000


@dataclass
class Run:
    """The arrays of a synthetic run and the answers a validator must find."""

    names: tuple
    stamps: np.ndarray
    q_d: np.ndarray
    qd_d: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    commands: np.ndarray
    limits: np.ndarray


def motion(n, duration, rate=1000.0, seed=0):
    """(stamps [ns], q, qd, qdd) of smooth sinusoids, ±0.8 rad around a bent posture."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(duration * rate))) / rate
    A = rng.uniform(0.3, 0.8, n)
    w = 2 * np.pi * rng.uniform(0.3, 0.8, n)
    phi = rng.uniform(0, 2 * np.pi, n)
    q0 = np.array([0.0, -1.2, 1.2, -1.0, 1.2, 0.0, 0.5][:n] + [0.0] * max(0, n - 7))
    s = np.sin(np.outer(t, w) + phi)
    c = np.cos(np.outer(t, w) + phi)
    stamps = T0_NS + np.round(t * 1e9).astype(np.int64)
    return stamps, q0 + A * s, A * w * c, -A * w ** 2 * s


def pinocchio_efforts(urdf_path, names, q, qd, qdd, payload=0.0):
    """tau = Pinocchio RNEA (columns in `names` order), with `payload` kg at the last joint."""
    model = pin.buildModelFromUrdf(str(urdf_path))
    last = model.getJointId(names[-1])
    model.inertias[last] = model.inertias[last] + pin.Inertia(
        payload, np.zeros(3), np.zeros((3, 3)))
    data = model.createData()
    idx = [model.joints[model.getJointId(name)].idx_q for name in names]
    tau = np.empty_like(q)
    for k in range(len(q)):
        x = [np.zeros(model.nq) for _ in range(3)]
        for a, b in zip(x, (q[k], qd[k], qdd[k])):
            a[idx] = b
        tau[k] = pin.rnea(model, data, *x)[idx]
    return tau


def make_run(urdf_path, names, limits, duration=3.0, error=None, payload=0.0,
             saturate=None, seed=0):
    """A `Run` without gaps (see `write_run` for those)."""
    n = len(names)
    stamps, q_d, qd_d, qdd = motion(n, duration, seed=seed)
    error = np.zeros(n) if error is None else np.asarray(error, float)
    q = q_d - error
    tau = pinocchio_efforts(urdf_path, names, q, qd_d, qdd, payload)
    commands = np.clip(tau, -0.6 * limits, 0.6 * limits)
    if saturate is not None:
        joint, start, length = saturate
        t = (stamps - T0_NS) * 1e-9
        commands[(t >= start) & (t < start + length), joint] = limits[joint]
    return Run(tuple(names), stamps, q_d, qd_d, q, qd_d, qdd, tau, commands,
               np.asarray(limits, float))


def write_run(path, run, urdf_text, gap=None, storage='mcap', effort=True):
    """Write `run` as a bag; `gap` = (start [s], length [s]) drops every message in it.

    Commands are received 0.2 ms after their tick; `effort=False` leaves JointState.effort empty.
    """
    keep = np.ones(len(run.stamps), bool)
    if gap is not None:
        t = (run.stamps - T0_NS) * 1e-9
        keep = ~((t >= gap[0] - 1e-9) & (t < gap[0] + gap[1] - 1e-9))
    s = run.stamps[keep]
    states = JointStateSeries(s, run.names, run.q[keep], run.qd[keep],
                              run.tau[keep] if effort else None)
    reference = JointStateSeries(s, run.names, run.q_d[keep], run.qd_d[keep], run.tau[keep])
    return write_bag(path, joint_states=states, reference=reference,
                     commands=ArraySeries(s + 200_000, run.commands[keep]),
                     robot_description=urdf_text, storage=storage,
                     diagnostics=[(int(s[0]), [('rnea_controller: control loop', 0, 'ok',
                                                {'mode': 'tracking'})])])
