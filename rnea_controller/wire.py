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
"""
from collections.abc import Callable, Sequence
from dataclasses import dataclass
import struct

import numpy as np
from rosbags.typesys import get_typestore, Stores
from rosbags.typesys.store import Typestore

STAMP = slice(4, 12)  # int32 sec, uint32 nanosec after the CDR encapsulation header
_STAMP = struct.Struct('<iI')
_STORE_PREFERENCE = ('ROS2_KILTED', 'ROS2_JAZZY', 'LATEST')
JOINT_STATE = 'sensor_msgs/msg/JointState'
FLOAT64_ARRAY = 'std_msgs/msg/Float64MultiArray'
JOINT_STATE_ARRAYS = ('position', 'velocity', 'effort')  # a JointState's float64 arrays


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
