"""Reading sensor_msgs/JointState straight from its serialized bytes (CDR), for the 1 kHz input.

ROS-free. A serialized ROS 2 message is a 4-byte encapsulation header (00 01 00 00: plain CDR,
little endian) and the fields in order, each aligned to its own size counted from the end of
that header: JointState = header (stamp sec int32, nanosec uint32, frame_id string), name
(uint32 count, then per string: uint32 length including the NUL, the bytes), position,
velocity, effort (uint32 count, float64 values). Strings carry a uint32 length first.

`JointStateReader.read(data)` returns (names key, position, velocity) without building a
Python message: the names are decoded only when their bytes differ from the previous message's.
Anything else than little-endian plain CDR returns None (the caller deserializes it normally).
"""
import struct

import numpy as np

from rnea_controller.errors import RneaControllerError

_UINT32 = struct.Struct('<I')
PLAIN_CDR_LE = b'\x00\x01'


class MalformedMessageError(RneaControllerError, ValueError):
    """The bytes are not a well-formed serialized JointState."""


def _align(offset, size):
    """offset rounded up to a multiple of `size`, counted from the end of the 4-byte header."""
    return 4 + ((offset - 4 + size - 1) // size) * size


def _uint32(data, offset):
    offset = _align(offset, 4)
    if offset + 4 > len(data):
        raise MalformedMessageError(f'message ends at byte {len(data)}, inside a length field')
    return _UINT32.unpack_from(data, offset)[0], offset + 4


def _doubles(data, offset):
    """(float64 view, next offset) of a sequence<double> at `offset`."""
    count, offset = _uint32(data, offset)
    offset = _align(offset, 8) if count else offset
    if offset + 8 * count > len(data):
        raise MalformedMessageError(f'{count} doubles at byte {offset} overrun {len(data)} bytes')
    return np.frombuffer(data, np.float64, count, offset), offset + 8 * count


def _skip_strings(data, offset, count):
    for _ in range(count):
        length, offset = _uint32(data, offset)
        offset += length
    if offset > len(data):
        raise MalformedMessageError('a joint name overruns the message')
    return offset


def decode_names(data):
    """The names of a serialized JointState's `name` bytes (count, then strings)."""
    count, offset = _uint32(data, 4)
    names = []
    for _ in range(count):
        length, offset = _uint32(data, offset)
        names.append(bytes(data[offset:offset + length - 1]).decode('utf-8'))
        offset += length
    return names


class JointStateReader:
    """Positions and velocities of serialized JointStates; names decoded once per change."""

    def __init__(self):
        self._names_bytes = None
        self.names = None

    def read(self, data):
        """(names, position, velocity) views into `data`, or None if not plain CDR LE.

        Raises MalformedMessageError when lengths do not fit the bytes.
        """
        if len(data) < 16 or data[:2] != PLAIN_CDR_LE:
            return None
        length, offset = _uint32(data, 12)  # after stamp (sec, nanosec): frame_id
        start = _align(offset + length, 4)
        cached = self._names_bytes
        if cached is not None and data[start:start + len(cached)] == cached:
            offset = start + len(cached)
        else:
            count, offset = _uint32(data, start)
            offset = _skip_strings(data, offset, count)
            self._names_bytes = bytes(data[start:offset])
            self.names = decode_names(b'\x00\x01\x00\x00' + self._names_bytes)
        position, offset = _doubles(data, offset)
        velocity, _ = _doubles(data, offset)
        return self.names, position, velocity
