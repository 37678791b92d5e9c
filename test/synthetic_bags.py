"""Synthetic controller runs with known answers, written as bags (tests and bench/).

Bags are written with rosbags' Writer, every message serialized by rosbags' type store.

The measured efforts come from Pinocchio's RNEA (the oracle), never from this package's.

Run (rate 1 kHz by default, stamps t_k = T0 + k / rate):
    q_d(t)  = q0 + A sin(w t + phi)                            reference (exact derivatives)
    q(t)    = q_d(t - delay) - error                           measured: a set lag and error
    tau(t)  = Pinocchio RNEA(q, qd, qdd) with `payload` kg at the last joint's link origin
    u(t)    = tau_ff clipped to ±0.6 · limit, except joint `saturate[0]` held at +limit over
              [saturate[1], saturate[1] + saturate[2]) s
    gap:    no reference, joint state or command in [gap[0], gap[0] + gap[1]) s
"""
from dataclasses import dataclass
from heapq import merge
from pathlib import Path
import shutil

import numpy as np
import pinocchio as pin
from rosbags.rosbag2 import StoragePlugin, Writer

from rnea_controller.analysis.bagio import (
    default_typestore,
    DIAGNOSTIC_ARRAY,
    FLOAT64_ARRAY,
    JOINT_STATE,
    STRING,
)

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


def motion(n, duration, rate=1000.0, seed=0, delay=0.0):
    """(stamps [ns], q, qd, qdd) of smooth sinusoids, ±0.8 rad around a bent posture.

    delay [s]: the values are those of the undelayed motion `delay` earlier, q(t - delay).
    """
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(duration * rate))) / rate
    stamps = T0_NS + np.round(t * 1e9).astype(np.int64)
    t = t - delay
    A = rng.uniform(0.3, 0.8, n)
    w = 2 * np.pi * rng.uniform(0.3, 0.8, n)
    phi = rng.uniform(0, 2 * np.pi, n)
    q0 = np.array([0.0, -1.2, 1.2, -1.0, 1.2, 0.0, 0.5][:n] + [0.0] * max(0, n - 7))
    s = np.sin(np.outer(t, w) + phi)
    c = np.cos(np.outer(t, w) + phi)
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
             saturate=None, seed=0, delay=0.0):
    """A `Run` without gaps (see `write_run` for those); the arm lags by `delay` [s]."""
    n = len(names)
    stamps, q_d, qd_d, _ = motion(n, duration, seed=seed)
    _, q, qd, qdd = motion(n, duration, seed=seed, delay=delay)
    error = np.zeros(n) if error is None else np.asarray(error, float)
    q = q - error
    tau = pinocchio_efforts(urdf_path, names, q, qd, qdd, payload)
    commands = np.clip(tau, -0.6 * limits, 0.6 * limits)
    if saturate is not None:
        joint, start, length = saturate
        t = (stamps - T0_NS) * 1e-9
        commands[(t >= start) & (t < start + length), joint] = limits[joint]
    return Run(tuple(names), stamps, q_d, qd_d, q, qd, qdd, tau, commands,
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


# ---------------------------------------------------------------------------- writing bags


@dataclass
class JointStateSeries:
    """JointState messages to write: stamps [ns] (N,), names (m,), arrays (N, m) or None."""

    stamps: np.ndarray
    names: tuple
    position: np.ndarray
    velocity: np.ndarray = None
    effort: np.ndarray = None
    frame_id: str = ''


@dataclass
class ArraySeries:
    """Float64MultiArray messages to write: stamps [ns] (N,) (bag time), data (N, m)."""

    stamps: np.ndarray
    data: np.ndarray


def _time(store, stamp):
    sec, nanosec = divmod(int(stamp), 1_000_000_000)
    return store.types['builtin_interfaces/msg/Time'](sec=sec, nanosec=nanosec)


def _row(values, k, m):
    return np.zeros(0) if values is None else np.asarray(values[k], float).reshape(m)


def _joint_states(store, series):
    """JointState messages of `series`, one by one."""
    cls = store.types
    m = len(series.names)
    for k, stamp in enumerate(series.stamps):
        yield cls[JOINT_STATE](
            header=cls['std_msgs/msg/Header'](stamp=_time(store, stamp),
                                              frame_id=series.frame_id),
            name=list(series.names), position=_row(series.position, k, m),
            velocity=_row(series.velocity, k, m), effort=_row(series.effort, k, m))


def _arrays(store, series):
    cls = store.types
    layout = cls['std_msgs/msg/MultiArrayLayout'](dim=[], data_offset=0)
    for row in series.data:
        yield cls[FLOAT64_ARRAY](layout=layout, data=np.asarray(row, float))


def _diagnostics(store, diagnostics):
    """diagnostics: [(stamp [ns], [(name, level, message, {key: value})])]."""
    cls = store.types
    for stamp, statuses in diagnostics:
        yield cls[DIAGNOSTIC_ARRAY](
            header=cls['std_msgs/msg/Header'](stamp=_time(store, stamp), frame_id=''),
            status=[cls['diagnostic_msgs/msg/DiagnosticStatus'](
                level=level, name=name, message=message, hardware_id='',
                values=[cls['diagnostic_msgs/msg/KeyValue'](key=str(k), value=str(v))
                        for k, v in values.items()])
                for name, level, message, values in statuses])


def write_bag(path, *, joint_states=None, reference=None, commands=None,
              robot_description=None, diagnostics=(), storage='mcap', topics=None,
              latency_ns=0):
    """Write a rosbag2 bag directory at `path` (replaced if it exists); return the path.

    joint_states, reference: `JointStateSeries`; commands: `ArraySeries`;
    robot_description: URDF text, written first (as if latched); diagnostics: see
    `_diagnostics`; storage: 'mcap' or 'sqlite3'; topics: overrides of the default topic
    names, keyed like the arguments; latency_ns: bag (receive) time minus header stamp of every
    stamped message [ns].
    """
    names = {'joint_states': '/joint_states', 'reference': '/rnea_controller/reference',
             'commands': '/effort_controller/commands', 'diagnostics': '/diagnostics',
             'robot_description': '/robot_description', **(topics or {})}
    store = default_typestore()
    streams = []  # (topic, type, bag times, messages)
    for key, series in (('joint_states', joint_states), ('reference', reference)):
        if series is not None:
            streams.append((names[key], JOINT_STATE, np.asarray(series.stamps) + latency_ns,
                            _joint_states(store, series)))
    if commands is not None:
        streams.append((names['commands'], FLOAT64_ARRAY, commands.stamps,
                        _arrays(store, commands)))
    if diagnostics:
        streams.append((names['diagnostics'], DIAGNOSTIC_ARRAY,
                        np.array([t for t, _ in diagnostics]) + latency_ns,
                        _diagnostics(store, diagnostics)))
    _write(Path(path), storage, store, streams, names['robot_description'], robot_description)
    return Path(path)


def _tagged(k, times, messages):
    """(bag time [ns], stream index, message) of one stream, for merging in time order."""
    return ((int(t), k, msg) for t, msg in zip(times, messages))


def _write(path, storage, store, streams, description_topic, description):
    plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[storage]
    if path.exists():
        shutil.rmtree(path)
    first = min((int(np.min(times)) for _, _, times, _ in streams if len(times)), default=1)
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        if description is not None:
            conn = writer.add_connection(description_topic, STRING, typestore=store)
            writer.write(conn, first - 1, store.serialize_cdr(store.types[STRING](
                data=description), STRING))
        conns = [writer.add_connection(topic, msgtype, typestore=store)
                 for topic, msgtype, _, _ in streams]
        ordered = merge(*[_tagged(k, times, messages)
                          for k, (_, _, times, messages) in enumerate(streams)],
                        key=lambda item: (item[0], item[1]))
        for t, k, msg in ordered:
            writer.write(conns[k], t, store.serialize_cdr(msg, streams[k][1]))
