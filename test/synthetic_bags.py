"""Synthetic controller runs with known answers, written as bags (tests and bench/).

Bags are written with rosbags' Writer; each stream's messages share one layout, serialized
by rosbags' type store (`_serialized`).

The measured efforts come from Pinocchio's RNEA (the oracle), never from this package's.

Run (rate 1 kHz by default, stamps t_k = T0 + k / rate):
    q_d(t)  = q0 + A sin(w t + phi)                            reference (exact derivatives)
    q(t)    = q_d(t - delay) - error                           measured: a set lag and error
    tau(t)  = Pinocchio RNEA(q, qd, qdd) with `payload` kg at the last joint's link origin
    u(t)    = tau_ff clipped to ±0.6 · limit, except joint `saturate[0]` held at +limit over
              [saturate[1], saturate[1] + saturate[2]) s
    gap:    no reference, joint state or command in [gap[0], gap[0] + gap[1]) s
"""
from dataclasses import dataclass, replace
from heapq import merge
from itertools import repeat
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


def _joint_state(store, series, k):
    """The JointState message k of `series`."""
    cls, m = store.types, len(series.names)
    return cls[JOINT_STATE](
        header=cls['std_msgs/msg/Header'](stamp=_time(store, series.stamps[k]),
                                          frame_id=series.frame_id),
        name=list(series.names), position=_row(series.position, k, m),
        velocity=_row(series.velocity, k, m), effort=_row(series.effort, k, m))


def _joint_states(store, series):
    """(message k -> its object, every message's fields: [(dtype, (N, width))]) of `series`:
    the stamp's seconds and nanoseconds, then each array (absent: empty in every message)."""
    N, m = len(series.stamps), len(series.names)
    sec, nanosec = np.divmod(np.asarray(series.stamps, np.int64), 1_000_000_000)
    fields = [('<i4', sec[:, None]), ('<u4', nanosec[:, None])]
    fields += [('<f8', np.asarray(values, float).reshape(N, m))
               for values in (series.position, series.velocity, series.effort)
               if values is not None and m]
    return lambda k: _joint_state(store, series, k), fields


def _arrays(store, series):
    """(message k -> its Float64MultiArray, fields) of `series` (`_joint_states`)."""
    cls = store.types
    layout = cls['std_msgs/msg/MultiArrayLayout'](dim=[], data_offset=0)
    data = np.asarray(series.data, float).reshape(len(series.data), -1)
    return (lambda k: cls[FLOAT64_ARRAY](layout=layout, data=np.asarray(data[k], float)),
            [('<f8', data)])


def _serialized(store, msgtype, message, fields):
    """Every message of a stream serialized, (N, size) bytes: rosbags' serialization of the
    first, whose layout every message shares (the same names, the same array lengths), with
    each message's numbers written where a probe's serialization by rosbags puts them; checked
    against rosbags' own serialization of the first, a middle and the last message. (rosbags
    takes ~50 µs a message: 1.5 s a 30-s bag of three streams.)"""
    N = len(fields[0][1])
    if not N:
        return np.zeros((0, 0), np.uint8)
    first = np.frombuffer(bytes(store.serialize_cdr(message(0), msgtype)), np.uint8)
    rng = np.random.default_rng(12345)  # numbers whose bytes occur once in the probe
    probe = [rng.integers(1 << 20, 1 << 30, (1, a.shape[1])).astype(dtype) if 'f' not in dtype
             else rng.uniform(1.0, 2.0, (1, a.shape[1])).astype(dtype) for dtype, a in fields]
    raw = bytes(store.serialize_cdr(_probe_message(message(0), fields, probe), msgtype))
    rows = np.tile(first, (N, 1))
    for (dtype, values), numbers in zip(fields, probe):
        pattern = numbers.tobytes()
        at = raw.find(pattern)
        assert at >= 0 and raw.find(pattern, at + 1) < 0, (msgtype, dtype)
        rows[:, at:at + len(pattern)] = np.ascontiguousarray(values, dtype).view(np.uint8)
    for k in sorted({0, N // 2, N - 1}):
        assert rows[k].tobytes() == bytes(store.serialize_cdr(message(k), msgtype)), (msgtype, k)
    return rows


def _probe_message(message, fields, probe):
    """`message` with the probe's numbers in the fields of `_joint_states` or `_arrays`."""
    if len(fields) == 1:  # Float64MultiArray
        return replace(message, data=probe[0][0])
    stamp = replace(message.header.stamp, sec=int(probe[0][0, 0]), nanosec=int(probe[1][0, 0]))
    arrays = iter(probe[2:])
    return replace(message, header=replace(message.header, stamp=stamp), **{
        name: next(arrays)[0] for name in ('position', 'velocity', 'effort')
        if len(getattr(message, name))})


def _diagnostics(store, diagnostics):
    """diagnostics: [(stamp [ns], [(name, level, message, {key: value})])]: each message
    serialized by rosbags."""
    cls = store.types
    for stamp, statuses in diagnostics:
        yield store.serialize_cdr(cls[DIAGNOSTIC_ARRAY](
            header=cls['std_msgs/msg/Header'](stamp=_time(store, stamp), frame_id=''),
            status=[cls['diagnostic_msgs/msg/DiagnosticStatus'](
                level=level, name=name, message=message, hardware_id='',
                values=[cls['diagnostic_msgs/msg/KeyValue'](key=str(k), value=str(v))
                        for k, v in values.items()])
                for name, level, message, values in statuses]), DIAGNOSTIC_ARRAY)


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
                            _serialized(store, JOINT_STATE, *_joint_states(store, series))))
    if commands is not None:
        streams.append((names['commands'], FLOAT64_ARRAY, commands.stamps,
                        _serialized(store, FLOAT64_ARRAY, *_arrays(store, commands))))
    if diagnostics:
        streams.append((names['diagnostics'], DIAGNOSTIC_ARRAY,
                        np.array([t for t, _ in diagnostics]) + latency_ns,
                        list(_diagnostics(store, diagnostics))))
    _write(Path(path), storage, store, streams, names['robot_description'], robot_description)
    return Path(path)


def _tagged(k, times):
    """(bag time [ns], stream index, message index) of one stream, for merging in time
    order."""
    return zip(np.asarray(times, np.int64).tolist(), repeat(k), range(len(times)))


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
        payloads = [[bytes(row) for row in data] for _, _, _, data in streams]
        for t, k, i in merge(*[_tagged(k, times) for k, (_, _, times, _) in enumerate(streams)]):
            writer.write(conns[k], t, payloads[k][i])
