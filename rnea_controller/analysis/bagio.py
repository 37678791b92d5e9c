"""Reading and writing rosbag2 bags (sqlite3 or MCAP) as numpy arrays, without ROS.

Reading streams: messages of the selected topics are read raw with `rosbags`, buffered per topic
and decoded in chunks of `chunk_size` messages into numpy arrays (`JointStates`, `Arrays`), so
memory depends on the chunk size, not on the bag's length. Decoding uses a fast path: messages of
one chunk whose CDR bytes have the same length and the same non-numeric bytes (frame id, joint
names, sequence lengths) as a template message share its byte layout, so their stamps and doubles
are read with one numpy view of the joined bytes. The template's layout is verified against
`rosbags`' own deserializer; any message that does not match it is deserialized by `rosbags`.
Message types come from the bag's own definitions where it has them, else from the newest ROS 2
type store of `rosbags`.

Writing (`write_bag`) makes synthetic bags from numpy arrays for the tests and the benchmark:
JointState, Float64MultiArray, String (robot_description) and DiagnosticArray topics.

CDR layout (little endian, offsets from the 4-byte encapsulation header, alignment relative to
it): `string` = uint32 length (with NUL) + bytes; `sequence<T>` = uint32 count, then elements
aligned to sizeof(T) when count > 0.
"""
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
import shutil

import numpy as np
from rosbags.interfaces import MessageDefinitionFormat
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import get_types_from_idl, get_types_from_msg, get_typestore, Stores

from rnea_controller.errors import BagError

JOINT_STATE = 'sensor_msgs/msg/JointState'
FLOAT64_ARRAY = 'std_msgs/msg/Float64MultiArray'
STRING = 'std_msgs/msg/String'
DIAGNOSTIC_ARRAY = 'diagnostic_msgs/msg/DiagnosticArray'
_STORE_PREFERENCE = ('ROS2_KILTED', 'ROS2_JAZZY', 'LATEST')
_LITTLE_ENDIAN_CDR = b'\x00\x01'


def default_typestore():
    """The newest ROS 2 type store `rosbags` has (Kilted, else Jazzy)."""
    for name in _STORE_PREFERENCE:
        if name in Stores.__members__:
            return get_typestore(Stores[name])
    return get_typestore(Stores.LATEST)


@dataclass
class JointStates:
    """A chunk of JointState messages, columns in the order of the requested joint names.

    stamps: header stamps [ns] (the bag time where the header stamp is zero), shape (N,)
    recv: bag (receive) times [ns], shape (N,)
    position [rad], velocity [rad/s], effort [N·m]: shape (N, m), NaN where a message lacks the
    joint or the field.
    malformed: messages dropped because their arrays did not match their names.
    """

    stamps: np.ndarray
    recv: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    malformed: int = 0


@dataclass
class Arrays:
    """A chunk of Float64MultiArray messages: recv [ns] (N,), data (N, m); malformed = other m."""

    recv: np.ndarray
    data: np.ndarray
    malformed: int = 0


@dataclass
class Diagnostic:
    """One DiagnosticStatus: recv [ns], name, level (0 OK, 1 WARN, 2 ERROR, 3 STALE), values."""

    recv: int
    name: str
    level: int
    message: str
    values: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------- CDR layout


def _u32(raw, off):
    return int.from_bytes(raw[off:off + 4], 'little')


def _align(off, size):
    return off + (-(off - 4)) % size


def _skip_string(raw, off):
    off = _align(off, 4)
    return off + 4 + _u32(raw, off)


def _f64_sequence(raw, off):
    """(offset of the count, offset of the first double, count, end) of a sequence<float64>."""
    count_at = _align(off, 4)
    count = _u32(raw, count_at)
    start = _align(count_at + 4, 8) if count else count_at + 4
    return count_at, start, count, start + 8 * count


def _joint_state_layout(raw):
    """Byte layout of one JointState: numeric fields and the structural byte ranges."""
    off = _skip_string(raw, 12)
    names_at = _align(off, 4)
    off = names_at + 4
    for _ in range(_u32(raw, names_at)):
        off = _skip_string(raw, off)
    fields = {}
    structure = [(0, 2)]
    for name in ('position', 'velocity', 'effort'):
        count_at, start, count, off = _f64_sequence(raw, off)
        fields[name] = (start, count)
        structure.append((count_at, count_at + 4))
    structure[1] = (12, structure[1][1])
    return {'fields': fields, 'structure': structure, 'length': off}


def _float64_array_layout(raw):
    """Byte layout of one Float64MultiArray (layout dims, data_offset, data)."""
    dims_at = 4
    off = dims_at + 4
    for _ in range(_u32(raw, dims_at)):
        off = _align(_skip_string(raw, off), 4) + 8
    off = _align(off, 4) + 4
    count_at, start, count, end = _f64_sequence(raw, off)
    return {'fields': {'data': (start, count)}, 'structure': [(0, 2), (4, count_at + 4)],
            'length': end}


def _rows(raws, length):
    """Messages of equal length as a (N, length) uint8 array."""
    return np.frombuffer(b''.join(raws), np.uint8).reshape(len(raws), length)


def _f64_columns(rows, start, count):
    return rows[:, start:start + 8 * count].copy().view('<f8')


def _matches(rows, template, structure):
    """Rows whose structural bytes equal the template's."""
    ok = np.ones(len(rows), bool)
    for a, b in structure:
        ok &= (rows[:, a:b] == template[a:b]).all(axis=1)
    return ok


# ---------------------------------------------------------------------------- decoding


class _JointStateDecoder:
    """Decodes raw JointState messages into `JointStates` for a fixed list of joint names."""

    def __init__(self, typestore, msgtype, names):
        self.typestore = typestore
        self.msgtype = msgtype
        self.names = tuple(names)
        self.column = {name: i for i, name in enumerate(self.names)}

    def decode(self, raws, recv):
        n = len(raws)
        out = JointStates(np.asarray(recv, np.int64).copy(), np.asarray(recv, np.int64),
                          *(np.full((n, len(self.names)), np.nan) for _ in range(3)))
        keep = np.ones(n, bool)
        lengths = np.fromiter(map(len, raws), np.int64, n)
        for length in np.unique(lengths):
            index = np.flatnonzero(lengths == length)
            slow = self._decode_group([raws[i] for i in index], index, out)
            for i in slow:
                keep[i] = self._decode_one(raws[i], i, out)
        out.malformed = int(n - keep.sum())
        if out.malformed:
            out = JointStates(out.stamps[keep], out.recv[keep], out.position[keep],
                              out.velocity[keep], out.effort[keep], out.malformed)
        zero = out.stamps == 0
        out.stamps[zero] = out.recv[zero]
        return out

    def _decode_group(self, raws, index, out):
        """Fast path for messages of one length; returns the indices left to the slow path."""
        template = np.frombuffer(raws[0], np.uint8)
        layout = self._verified_layout(raws[0])
        if layout is None:
            return list(index)
        rows = _rows(raws, len(template))
        ok = _matches(rows, template, layout['structure'])
        good = index[ok]
        rows = rows[ok]
        sec = rows[:, 4:8].copy().view('<i4')[:, 0].astype(np.int64)
        nsec = rows[:, 8:12].copy().view('<u4')[:, 0].astype(np.int64)
        out.stamps[good] = sec * 1_000_000_000 + nsec
        cols, src = self._columns(layout['names'])
        for name, (start, count) in layout['fields'].items():
            if count == len(layout['names']):
                values = _f64_columns(rows, start, count)
                getattr(out, name)[np.ix_(good, cols)] = values[:, src]
        return list(index[~ok])

    def _verified_layout(self, raw):
        """The template's layout, if it is little-endian CDR that `rosbags` decodes the same."""
        if raw[:2] != _LITTLE_ENDIAN_CDR:
            return None
        try:
            layout = _joint_state_layout(raw)
            msg = self.typestore.deserialize_cdr(raw, self.msgtype)
        except Exception:  # noqa: BLE001 - a message the fast path cannot read goes slow
            return None
        template = np.frombuffer(raw, np.uint8)[None, :]
        for name, (start, count) in layout['fields'].items():
            expected = np.asarray(getattr(msg, name), float)
            if layout['length'] != len(raw) or expected.shape != (count,) or not np.array_equal(
                    _f64_columns(template, start, count)[0], expected, equal_nan=True):
                return None
        layout['names'] = tuple(msg.name)
        if any(count not in (0, len(msg.name)) for _, count in layout['fields'].values()):
            return None
        if len(msg.position) != len(msg.name):
            return None
        return layout

    def _columns(self, names):
        """Output columns and message indices of the requested joints present in `names`."""
        pairs = [(self.column[name], k) for k, name in enumerate(names) if name in self.column]
        cols = np.array([c for c, _ in pairs], np.int64)
        src = np.array([k for _, k in pairs], np.int64)
        return cols, src

    def _decode_one(self, raw, i, out):
        """Slow path for one message; returns False when it is malformed (and dropped)."""
        try:
            msg = self.typestore.deserialize_cdr(raw, self.msgtype)
        except Exception:  # noqa: BLE001 - undecodable message: dropped and counted
            return False
        names = list(msg.name)
        if len(msg.position) != len(names):
            return False
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        out.stamps[i] = stamp
        cols, src = self._columns(names)
        for name in ('position', 'velocity', 'effort'):
            values = np.asarray(getattr(msg, name), float)
            if len(values) == len(names):
                getattr(out, name)[i, cols] = values[src]
            elif len(values):
                return False
        return True


class _ArrayDecoder:
    """Decodes raw Float64MultiArray messages of `width` values into `Arrays`."""

    def __init__(self, typestore, msgtype, width):
        self.typestore = typestore
        self.msgtype = msgtype
        self.width = width

    def decode(self, raws, recv):
        n = len(raws)
        data = np.full((n, self.width), np.nan)
        keep = np.zeros(n, bool)
        lengths = np.fromiter(map(len, raws), np.int64, n)
        for length in np.unique(lengths):
            index = np.flatnonzero(lengths == length)
            group = [raws[i] for i in index]
            layout = self._verified_layout(group[0])
            if layout is not None:
                template = np.frombuffer(group[0], np.uint8)
                rows = _rows(group, length)
                ok = _matches(rows, template, layout['structure'])
                data[index[ok]] = _f64_columns(rows[ok], *layout['fields']['data'])
                keep[index[ok]] = True
                index = index[~ok]
            for i in index:
                keep[i] = self._decode_one(raws[i], i, data)
        recv = np.asarray(recv, np.int64)
        return Arrays(recv[keep], data[keep], int(n - keep.sum()))

    def _verified_layout(self, raw):
        if raw[:2] != _LITTLE_ENDIAN_CDR:
            return None
        try:
            layout = _float64_array_layout(raw)
            msg = self.typestore.deserialize_cdr(raw, self.msgtype)
        except Exception:  # noqa: BLE001 - the slow path decides
            return None
        start, count = layout['fields']['data']
        template = np.frombuffer(raw, np.uint8)[None, :]
        if (layout['length'] != len(raw) or count != self.width or len(msg.data) != count
                or not np.array_equal(_f64_columns(template, start, count)[0],
                                      np.asarray(msg.data, float), equal_nan=True)):
            return None
        return layout

    def _decode_one(self, raw, i, data):
        try:
            values = np.asarray(self.typestore.deserialize_cdr(raw, self.msgtype).data, float)
        except Exception:  # noqa: BLE001 - undecodable message: dropped and counted
            return False
        if values.shape != (self.width,):
            return False
        data[i] = values
        return True


class _DiagnosticsDecoder:
    """Decodes DiagnosticArray messages into a flat list of `Diagnostic`."""

    def __init__(self, typestore, msgtype):
        self.typestore = typestore
        self.msgtype = msgtype

    def decode(self, raws, recv):
        out = []
        for raw, t in zip(raws, recv):
            try:
                msg = self.typestore.deserialize_cdr(raw, self.msgtype)
            except Exception:  # noqa: BLE001 - a broken diagnostics message is skipped
                continue
            for status in msg.status:
                values = {kv.key: kv.value for kv in status.values}
                out.append(Diagnostic(int(t), status.name, int(status.level), status.message,
                                      values))
        return out


# ---------------------------------------------------------------------------- reading


class BagReader:
    """A rosbag2 bag (directory, .mcap or .db3 file) opened for streaming.

    Use as a context manager. Every failure to read is raised as `BagError` naming the bag.
    """

    def __init__(self, path):
        self.path = Path(path)
        self._stack = ExitStack()
        self._reader = None
        self.typestore = None

    def __enter__(self):
        if not self.path.exists():
            raise BagError(f'bag {str(self.path)!r} does not exist')
        try:
            self._reader = self._stack.enter_context(Reader(self.path))
            self.typestore = self._typestore()
        except BagError:
            self._stack.close()
            raise
        except Exception as err:  # noqa: BLE001 - any reader failure means a corrupt bag
            self._stack.close()
            raise BagError(f'cannot read bag {str(self.path)!r}: {_describe(err)}') from None
        return self

    def __exit__(self, *exc):
        self._stack.close()

    def _typestore(self):
        """Default ROS 2 types, overridden by the definitions recorded in the bag."""
        store = default_typestore()
        types = {}
        for conn in self._reader.connections:
            msgdef = conn.msgdef
            if msgdef.format == MessageDefinitionFormat.MSG and msgdef.data:
                types.update(get_types_from_msg(msgdef.data, conn.msgtype))
            elif msgdef.format == MessageDefinitionFormat.IDL and msgdef.data:
                types.update(_idl_types(msgdef.data))
        store.register(types)
        return store

    @property
    def topics(self):
        """{topic: (message type, message count)} of every topic in the bag."""
        out = {}
        for conn in self._reader.connections:
            msgtype, count = out.get(conn.topic, (conn.msgtype, 0))
            out[conn.topic] = (msgtype, count + conn.msgcount)
        return out

    @property
    def start_ns(self):
        """Bag time of the first message [ns]."""
        return self._reader.start_time

    @property
    def message_count(self):
        return sum(count for _, count in self.topics.values())

    def require_messages(self):
        """Raise `BagError` if the bag holds no message at all."""
        if self.message_count == 0:
            raise BagError(f'bag {str(self.path)!r} is empty (no messages)')

    def require(self, topic, msgtype):
        """Raise `BagError` unless `topic` exists with `msgtype` and has messages."""
        topics = self.topics
        self.require_messages()
        if topic not in topics:
            listing = ', '.join(f'{t} [{m}]' for t, (m, _) in sorted(topics.items()))
            raise BagError(f'bag {str(self.path)!r} has no topic {topic!r}; its topics: '
                           f'{listing}')
        found, count = topics[topic]
        if found != msgtype:
            raise BagError(f'topic {topic!r} in {str(self.path)!r} has type {found}, '
                           f'expected {msgtype}')
        if count == 0:
            raise BagError(f'topic {topic!r} in {str(self.path)!r} has no messages')

    def _messages(self, topics):
        conns = [c for c in self._reader.connections if c.topic in topics]
        if not conns:
            return
        try:
            yield from self._reader.messages(connections=conns)
        except Exception as err:  # noqa: BLE001 - truncated or corrupt storage
            raise BagError(f'cannot read bag {str(self.path)!r}: {_describe(err)}') from None

    def first(self, topic):
        """The first message of `topic`, deserialized, or None."""
        for conn, _, raw in self._messages({topic}):
            try:
                return self.typestore.deserialize_cdr(raw, conn.msgtype)
            except Exception as err:  # noqa: BLE001 - reported as a bag error
                raise BagError(f'cannot decode the first message of {topic!r} in '
                               f'{str(self.path)!r}: {_describe(err)}') from None
        return None

    def stream(self, specs, chunk_size=20000, progress=None):
        """Yield (topic, chunk) for the topics in `specs`, chunk by chunk, in time order.

        specs: {topic: ('joint_state', joint names) | ('array', width) | ('diagnostics', None)}
        chunk_size: messages buffered per topic before all buffers are decoded together, so the
            chunks of different topics cover about the same stretch of time.
        progress: called with the number of messages read since its previous call.
        """
        msgtypes = {c.topic: c.msgtype for c in self._reader.connections}
        decoders = {topic: self._decoder(kind, arg, msgtypes[topic])
                    for topic, (kind, arg) in specs.items()}
        raws = {topic: [] for topic in specs}
        recv = {topic: [] for topic in specs}
        for conn, t, raw in self._messages(set(specs)):
            buffer = raws[conn.topic]
            buffer.append(raw)
            recv[conn.topic].append(t)
            if len(buffer) >= chunk_size:
                yield from self._flush(decoders, raws, recv, progress)
        yield from self._flush(decoders, raws, recv, progress)

    def _decoder(self, kind, arg, msgtype):
        if kind == 'joint_state':
            return _JointStateDecoder(self.typestore, msgtype, arg)
        if kind == 'array':
            return _ArrayDecoder(self.typestore, msgtype, arg)
        return _DiagnosticsDecoder(self.typestore, msgtype)

    @staticmethod
    def _flush(decoders, raws, recv, progress):
        count = 0
        for topic, decoder in decoders.items():
            if raws[topic]:
                chunk = decoder.decode(raws[topic], recv[topic])
                count += len(raws[topic])
                raws[topic].clear()
                recv[topic].clear()
                yield topic, chunk
        if progress is not None and count:
            progress(count)


def _idl_types(data):
    sep = '=' * 80 + '\n'
    if not data.startswith(f'{sep}IDL: '):
        return get_types_from_idl(data)
    types = {}
    for part in data.split(sep)[1:]:
        types.update(get_types_from_idl(part.split('\n', 1)[1]))
    return types


def _describe(err):
    text = str(err).strip() or type(err).__name__
    return text if len(text) < 300 else text[:300] + '...'


# ---------------------------------------------------------------------------- writing


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


def _encoded_joint_states(typestore, series):
    """CDR bytes of every JointState in `series`: a template message, numbers patched in."""
    n_msg, m = np.shape(series.position)
    arrays = {name: getattr(series, name) for name in ('position', 'velocity', 'effort')}
    cls = typestore.types
    template = cls[JOINT_STATE](
        header=cls['std_msgs/msg/Header'](
            stamp=cls['builtin_interfaces/msg/Time'](sec=0, nanosec=0),
            frame_id=series.frame_id),
        name=list(series.names),
        **{k: np.zeros(0 if v is None else m) for k, v in arrays.items()})
    raw = bytes(typestore.serialize_cdr(template, JOINT_STATE))
    layout = _joint_state_layout(raw)
    rows = np.tile(np.frombuffer(raw, np.uint8), (n_msg, 1))
    stamps = np.asarray(series.stamps, np.int64)
    rows[:, 4:8] = (stamps // 1_000_000_000).astype('<i4')[:, None].view(np.uint8)
    rows[:, 8:12] = (stamps % 1_000_000_000).astype('<u4')[:, None].view(np.uint8)
    for name, values in arrays.items():
        if values is not None:
            start, count = layout['fields'][name]
            data = np.ascontiguousarray(values, '<f8').reshape(n_msg, count)
            rows[:, start:start + 8 * count] = data.view(np.uint8)
    return rows


def _encoded_arrays(typestore, series):
    n_msg, m = np.shape(series.data)
    cls = typestore.types
    template = cls[FLOAT64_ARRAY](layout=cls['std_msgs/msg/MultiArrayLayout'](
        dim=[], data_offset=0), data=np.zeros(m))
    raw = bytes(typestore.serialize_cdr(template, FLOAT64_ARRAY))
    start, count = _float64_array_layout(raw)['fields']['data']
    rows = np.tile(np.frombuffer(raw, np.uint8), (n_msg, 1))
    rows[:, start:start + 8 * count] = np.ascontiguousarray(series.data, '<f8').view(np.uint8)
    return rows


def _encoded_diagnostics(typestore, stamp, statuses):
    """statuses: [(name, level, message, {key: value})]."""
    cls = typestore.types
    sec, nsec = divmod(int(stamp), 1_000_000_000)
    msg = cls[DIAGNOSTIC_ARRAY](
        header=cls['std_msgs/msg/Header'](
            stamp=cls['builtin_interfaces/msg/Time'](sec=sec, nanosec=nsec), frame_id=''),
        status=[cls['diagnostic_msgs/msg/DiagnosticStatus'](
            level=level, name=name, message=message, hardware_id='',
            values=[cls['diagnostic_msgs/msg/KeyValue'](key=str(k), value=str(v))
                    for k, v in values.items()])
            for name, level, message, values in statuses])
    return bytes(typestore.serialize_cdr(msg, DIAGNOSTIC_ARRAY))


def write_bag(path, *, joint_states=None, reference=None, commands=None,
              robot_description=None, diagnostics=(), storage='mcap', topics=None,
              latency_ns=0):
    """Write a rosbag2 bag directory at `path` (replaced if it exists).

    joint_states, reference: `JointStateSeries`; commands: `ArraySeries`;
    robot_description: URDF text, written first; diagnostics: [(stamp [ns], statuses)] with
    statuses as in `_encoded_diagnostics`; storage: 'mcap' or 'sqlite3';
    topics: overrides of the default topic names, keyed like the arguments;
    latency_ns: bag (receive) time minus header stamp of every stamped message [ns].
    Returns the path.
    """
    names = {'joint_states': '/joint_states', 'reference': '/rnea_controller/reference',
             'commands': '/effort_controller/commands', 'diagnostics': '/diagnostics',
             'robot_description': '/robot_description', **(topics or {})}
    typestore = default_typestore()
    streams = []
    for key, series in (('joint_states', joint_states), ('reference', reference)):
        if series is not None:
            rows = _encoded_joint_states(typestore, series)
            times = np.asarray(series.stamps, np.int64) + latency_ns
            streams.append((names[key], JOINT_STATE, times, rows))
    if commands is not None:
        streams.append((names['commands'], FLOAT64_ARRAY,
                        np.asarray(commands.stamps, np.int64), _encoded_arrays(typestore,
                                                                               commands)))
    diag = [_encoded_diagnostics(typestore, t, s) for t, s in diagnostics]
    if diag:
        streams.append((names['diagnostics'], DIAGNOSTIC_ARRAY,
                        np.array([t for t, _ in diagnostics], np.int64) + latency_ns, diag))
    _write_streams(Path(path), storage, typestore, streams, names['robot_description'],
                   robot_description)
    return Path(path)


def _write_streams(path, storage, typestore, streams, description_topic, description):
    """Write every stream merged in bag-time order; the description first (as if latched)."""
    plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[storage]
    if path.exists():
        shutil.rmtree(path)
    times = np.concatenate([t for _, _, t, _ in streams]) if streams else np.zeros(0, np.int64)
    which = np.concatenate([np.full(len(t), k) for k, (_, _, t, _) in enumerate(streams)]
                           ) if streams else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(t) for _, _, t, _ in streams])])
    order = np.argsort(times, kind='stable')
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        if description is not None:
            conn = writer.add_connection(description_topic, STRING, typestore=typestore)
            raw = typestore.serialize_cdr(typestore.types[STRING](data=description), STRING)
            writer.write(conn, int(times.min()) - 1 if len(times) else 0, bytes(raw))
        conns = [writer.add_connection(topic, msgtype, typestore=typestore)
                 for topic, msgtype, _, _ in streams]
        for i in order:
            k = which[i]
            raw = streams[k][3][i - offsets[k]]
            writer.write(conns[k], int(times[i]), raw if isinstance(raw, bytes)
                         else raw.tobytes())
