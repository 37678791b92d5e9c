"""Serialized messages whose numbers are read and written in place: the package's one shortcut.

Where a full (de)serialization per message costs more than the work it serves, the float64
arrays and the header stamp of a serialized message are read from (or written into) its bytes
directly: the node's joint states in and its commands and references out at 1 kHz, and the
validator's 1.2 M joint states of a 10-minute bag (`./run bench node`, `./run bench validate`).

The layout (where the arrays lie in the bytes) is never computed here. rosbags deserializes a
template from a `memoryview`; its float64 arrays are then numpy views into those bytes, and
their addresses give the offsets. The one layout fact used is that a header stamp (int32 sec,
uint32 nanosec) follows the 4-byte CDR encapsulation header; it is checked on the template.
A message whose bytes equal the template's everywhere but in the stamp and the arrays has the
same names, frame id and array lengths, hence the same layout (`Layout.matches`); anything else
goes to a full deserialization, which decides. test/test_wire.py holds this against rosbags
and rclpy on random messages.

Trajectories (`read_trajectory`, issue 45) are read from the bytes the subscription takes raw,
without an object per point: rclpy's conversion builds ~30,000 objects for 10,000 points, and
the collections they set off scan them all holding the interpreter's lock (the control tick
waited 30-120 ms). Here is the one place where a layout is computed: points that all carry
the same array lengths (the usual case) lie at offsets CDR's alignment rules give (two shapes,
by the point's start modulo 8), which a loop over the points finds and every point's length
words check; numpy then gathers their numbers. Any other message goes to rosbags'
deserializer, its objects made with the garbage collector paused (`collection_paused`) and
freed before it resumes. test/test_wire.py holds both against rclpy's reading on random
messages.
"""
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
import gc
import struct
import threading

import numpy as np
from rosbags.typesys import get_typestore, Stores
from rosbags.typesys.store import Typestore

STAMP = slice(4, 12)  # int32 sec, uint32 nanosec after the CDR encapsulation header
_STAMP = struct.Struct('<iI')
_STORE_PREFERENCE = ('ROS2_KILTED', 'ROS2_JAZZY', 'LATEST')
JOINT_STATE = 'sensor_msgs/msg/JointState'
FLOAT64_ARRAY = 'std_msgs/msg/Float64MultiArray'
JOINT_STATE_ARRAYS = ('position', 'velocity', 'effort')  # a JointState's float64 arrays
JOINT_TRAJECTORY = 'trajectory_msgs/msg/JointTrajectory'
ROWS = 1024  # points stacked per numpy call (each call holds the interpreter's lock)


def default_typestore() -> Typestore:
    """The newest ROS 2 type store `rosbags` has (Kilted, else Jazzy)."""
    name = next(name for name in _STORE_PREFERENCE if name in Stores.__members__)
    return get_typestore(Stores[name])


@dataclass(frozen=True)
class Layout:
    """Where the float64 `fields` (and the stamp, if `stamped`) lie in a template's bytes.

    spans: {field: (byte offset, count)}, offset -1 for an empty array; fixed: the byte ranges
    outside the stamp and the arrays, as (slice, the template's bytes there)."""

    size: int
    spans: dict
    stamped: bool
    fixed: tuple

    def matches(self, raw: bytes) -> bool:
        """True if `raw` has this layout: same length, same bytes outside stamp and arrays."""
        if len(raw) != self.size:
            return False
        for where, expected in self.fixed:
            if raw[where] != expected:
                return False
        return True

    def variable(self) -> list:
        """(start, stop) byte ranges of the stamp and the arrays, in order."""
        return _variable(self.spans, self.stamped)

    def array(self, raw: bytes | bytearray, field: str) -> np.ndarray:
        """The float64 array `field` of a message of this layout (a view: writable if `raw`
        is, as a Writer's bytearray)."""
        start, count = self.spans[field]
        return np.frombuffer(raw, '<f8', count, max(start, 0))

    def stamp_ns(self, raw: bytes) -> int:
        """The header stamp [ns] of a message of this layout."""
        sec, nanosec = _STAMP.unpack_from(raw, STAMP.start)
        return sec * 1_000_000_000 + nanosec


def find_layout(raw: bytes, deserialize: Callable, fields: Sequence[str],
                stamped: bool = False) -> tuple | None:
    """(message, Layout) of the serialized `raw`, or None if it cannot serve as a template.

    deserialize: bytes or memoryview -> message (rosbags' typestore, which returns numpy views
    into a memoryview for little-endian float64 arrays). None if it fails, if an array is not
    such a view (big-endian CDR), or if the stamp is not where `STAMP` says.
    """
    raw = bytes(raw)
    try:
        msg = deserialize(memoryview(raw))
    except Exception:  # noqa: BLE001 - not a template; the full deserialization decides
        return None
    base = np.frombuffer(raw, np.uint8).ctypes.data
    spans = {}
    for name in fields:
        values = getattr(msg, name)
        start = values.ctypes.data - base if isinstance(values, np.ndarray) else -1
        if len(values) and not (0 <= start <= len(raw) - 8 * len(values)):
            return None  # not a view into raw (big-endian, or rosbags copied it)
        spans[name] = (start if len(values) else -1, len(values))
    if stamped:
        stamp = msg.header.stamp
        if _STAMP.unpack_from(raw, STAMP.start) != (stamp.sec, stamp.nanosec):
            return None
    fixed, at = [], 0
    for start, stop in _variable(spans, stamped):
        if start > at:
            fixed.append((slice(at, start), raw[at:start]))
        at = stop
    if at < len(raw):
        fixed.append((slice(at, len(raw)), raw[at:]))
    return msg, Layout(len(raw), spans, stamped, tuple(fixed))


def _variable(spans, stamped):
    ranges = [(STAMP.start, STAMP.stop)] if stamped else []
    ranges += [(start, start + 8 * count) for start, count in spans.values() if count]
    return sorted(ranges)


class Writer:
    """A message to publish again and again with new numbers: its serialized bytes, with a
    writable float64 view per field (`arrays`) and `set_stamp`; `raw()` gives the bytes.

    `msg` (a rosbags message of `typename`, arrays at their final lengths) is serialized once
    by rosbags; the layout is found by rosbags and checked by a round trip: distinct values
    written through the views must come back from rosbags' deserializer in the right fields.
    """

    def __init__(self, store: Typestore, typename: str, msg: object, fields: Sequence[str],
                 stamped: bool = False):
        raw = bytes(store.serialize_cdr(msg, typename))

        def deserialize(data):
            return store.deserialize_cdr(data, typename)

        found = find_layout(raw, deserialize, fields, stamped)
        if found is None:
            raise ValueError(f'no in-place layout for the fields {list(fields)} of this message')
        self.layout = found[1]
        self._buffer = bytearray(raw)
        self.arrays = {name: self.layout.array(self._buffer, name) for name in self.layout.spans}
        self._check(deserialize)

    def set_stamp(self, ns: int) -> None:
        _STAMP.pack_into(self._buffer, STAMP.start, *divmod(ns, 1_000_000_000))

    def raw(self) -> bytes:
        return bytes(self._buffer)

    def _check(self, deserialize):
        saved = self._buffer[:]
        for k, values in enumerate(self.arrays.values()):
            values[:] = 1000.0 * (k + 1) + np.arange(len(values))
        if self.layout.stamped:
            self.set_stamp(1_234_567_890_123_456_789)
        msg = deserialize(self.raw())
        for name, values in self.arrays.items():
            if not np.array_equal(np.asarray(getattr(msg, name), np.float64), values):
                raise ValueError(f'in-place layout of {name} does not round-trip')
        if self.layout.stamped and (msg.header.stamp.sec, msg.header.stamp.nanosec) != (
                1_234_567_890, 123_456_789):
            raise ValueError('in-place stamp does not round-trip')
        self._buffer[:] = saved


@dataclass(frozen=True)
class TrajectoryArrays:
    """A JointTrajectory as arrays: stamp [ns], joint names, times (N,) [s] and, per field,
    None (no point has it), an (N, k) array, or N rows of their own lengths (mixed points)."""

    stamp_ns: int
    names: list
    times: np.ndarray
    positions: object
    velocities: object
    accelerations: object


_paused = [0, False]  # holders, whether the collector was enabled before the first
_paused_lock = threading.Lock()


@contextmanager
def collection_paused():
    """No garbage collection inside (threads may nest it): a large message's objects are made
    and dropped (freed by their reference counts) without a collection scanning them."""
    with _paused_lock:
        if _paused[0] == 0:
            _paused[1] = gc.isenabled()
            gc.disable()
        _paused[0] += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused[0] -= 1
            if _paused[0] == 0 and _paused[1]:
                gc.enable()


def read_trajectory(raw: bytes, store: Typestore) -> TrajectoryArrays:
    """The arrays of a serialized JointTrajectory (as `ros.inputs.trajectory_arrays` gives them
    from rclpy's message), or ValueError saying why the bytes are not one. Points that all
    carry the same array lengths (the usual case) are read where they lie (`_uniform`): their
    places found by a loop over the points, their numbers gathered by numpy ROWS points at a
    time; other messages by rosbags' deserializer, with the collector paused (module doc)."""
    data = memoryview(raw)
    if len(data) < 4 or bytes(data[:2]) not in (b'\x00\x00', b'\x00\x01'):
        raise ValueError(f'{len(raw)} bytes that are not a CDR message')
    if data[1]:
        try:
            found = _uniform(data[4:])
        except (struct.error, UnicodeDecodeError, ValueError, IndexError):
            found = None  # rosbags decides, and says why
        if found is not None:
            return found
    return _read_rosbags(data, store)


_U32 = struct.Struct('<I')
_TRAJECTORY_FIELDS = 4  # a point's float64 arrays: positions, velocities, accelerations, effort


def _string(data, pos):
    """(text, position after it) of a CDR string at pos (4-aligned)."""
    (size,) = _U32.unpack_from(data, pos)
    if size == 0 or pos + 4 + size > len(data):
        raise ValueError('bad string')
    return bytes(data[pos + 4:pos + 3 + size]).decode(), (pos + 4 + size + 3) & ~3


def _point_layout(data, start, lengths=None):
    """Field offsets (4 length words, 4 array starts, the duration) of a point at `start` and its
    size; `lengths` as read there if None."""
    pos, words, arrays, read = start, [], [], []
    for f in range(_TRAJECTORY_FIELDS):
        pos = (pos + 3) & ~3
        n = _U32.unpack_from(data, pos)[0] if lengths is None else lengths[f]
        words.append(pos)
        read.append(n)
        pos += 4
        if n:
            pos = (pos + 7) & ~7
        arrays.append(pos)
        pos += 8 * n
    pos = (pos + 3) & ~3
    return read, np.array(words) - start, np.array(arrays) - start, pos - start, pos + 8 - start


def _uniform(data):
    """`read_trajectory` for little-endian points of one shape, or None if they are not."""
    sec, nanosec = struct.unpack_from('<iI', data, 0)
    _, pos = _string(data, 8)  # frame_id
    (count,) = _U32.unpack_from(data, pos)
    names, pos = [], pos + 4
    for _ in range(count):
        name, pos = _string(data, pos)
        names.append(name)
    (N,) = _U32.unpack_from(data, pos)
    pos += 4
    if N == 0 or N > len(data) // 8:
        return None
    lengths = _point_layout(data, pos)[0]
    shapes = {phase: _point_layout(data, pos - pos % 8 + phase, lengths) for phase in (0, 4)}
    starts = np.empty(N, np.int64)
    for k in range(N):
        starts[k] = pos
        pos += shapes[pos & 7][4]
    if pos > len(data):
        return None
    words = np.frombuffer(data[:len(data) & ~3], '<u4')
    f64 = np.frombuffer(data[:len(data) & ~7], '<f8')
    phase = starts & 7
    for f in range(_TRAJECTORY_FIELDS):
        at = starts + np.where(phase, shapes[4][1][f], shapes[0][1][f])
        if not np.all(words[at // 4] == lengths[f]):
            return None
    duration = starts + np.where(phase, shapes[4][3], shapes[0][3])
    times = (words[duration // 4].view('<i4') + 1e-9 * words[duration // 4 + 1])
    fields = [_gather(f64, starts + np.where(phase, shapes[4][2][f], shapes[0][2][f]),
                      lengths[f], optional=f > 0) for f in range(3)]
    return TrajectoryArrays(sec * 1_000_000_000 + nanosec, names, times, *fields)


def _gather(f64, starts, n, optional):
    """(N, n) float64 from byte offsets `starts` (8-aligned), ROWS points at a time."""
    if n == 0:
        return None if optional else [np.zeros(0)] * len(starts)
    out = np.empty((len(starts), n))
    index = np.arange(n)
    for first in range(0, len(starts), ROWS):
        block = starts[first:first + ROWS] // 8
        out[first:first + len(block)] = f64[block[:, None] + index]
    return out


def _read_rosbags(data, store):
    """`read_trajectory` by rosbags' deserializer, its objects made with the collector paused."""
    msgdef = store.get_msgdef(JOINT_TRAJECTORY)
    read = msgdef.deserialize_cdr_le if data[1] else msgdef.deserialize_cdr_be
    with collection_paused():
        try:
            msg, _ = read(data[4:], 0, msgdef.cls, store)
        except (struct.error, UnicodeDecodeError, ValueError, IndexError) as error:
            raise ValueError(f'{len(data)} bytes that do not deserialize as a JointTrajectory '
                             f'({type(error).__name__}: {error})') from None
        points = msg.points
        times = np.fromiter((p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec
                             for p in points), np.float64, len(points))
        fields = [_field_rows([getattr(p, f) for p in points], optional=f != 'positions')
                  for f in ('positions', 'velocities', 'accelerations')]
        stamp = msg.header.stamp
        names = list(msg.joint_names)
        del msg, points
    return TrajectoryArrays(stamp.sec * 1_000_000_000 + stamp.nanosec, names, times, *fields)


def _field_rows(rows, optional):
    """None if `optional` and no row has a value; an (N, k) array if all rows have k > 0
    values (stacked ROWS at a time); else the rows as they are (`plan_arrays` judges them)."""
    lengths = set(map(len, rows))
    if optional and lengths <= {0}:
        return None
    if len(lengths) != 1 or lengths == {0}:
        return rows
    out = np.empty((len(rows), lengths.pop()))
    for start in range(0, len(rows), ROWS):
        block = rows[start:start + ROWS]
        out[start:start + len(block)] = block
    return out
