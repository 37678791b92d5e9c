"""Reading sensor_msgs/JointState straight from its serialized bytes (CDR), for the 1 kHz input.

ROS-free. A serialized ROS 2 message is a 4-byte encapsulation header (00 01 00 00: plain CDR,
little endian) and the fields in order, each aligned to its own size counted from the end of
that header: JointState = header (stamp sec int32, nanosec uint32, frame_id string), name
(uint32 count, then per string: uint32 length including the NUL, the bytes), position,
velocity, effort (uint32 count, float64 values). Strings carry a uint32 length first.

`JointStateReader.read(data)` returns (names key, position, velocity) without building a
Python message: the names are decoded only when their bytes differ from the previous message's.
Anything else than little-endian plain CDR returns None (the caller deserializes it normally).

`JointStateReader.take(data, out)` is the 1 kHz fast path, one compiled call: once the caller
has `remember`ed which message entries it wants for the names last read, a message with the
same name bytes has its positions and velocities gathered into `out` after every check
(encoding, bounds, lengths, finiteness); anything else returns False and the caller takes the
general path above, which says what is wrong.
"""
import struct

from numba import njit
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
        self._known = np.zeros(0, np.uint8)  # name bytes (count, strings) whose index is known
        self._index = np.zeros(0, np.intp)
        self.take(bytes(24), np.zeros((2, 0)))  # compile for the types of a message's bytes

    def remember(self, index):
        """For messages with the names last `read`: take entries `index` (np.intp) in `take`."""
        self._known = np.frombuffer(self._names_bytes, np.uint8).copy()
        self._index = np.ascontiguousarray(index, dtype=np.intp)

    def take(self, data, out):
        """out[0], out[1] = position[index], velocity[index] of a serialized JointState with
        the remembered names, all finite; True if done, False if `read` must handle it."""
        if len(data) < 16:
            return False
        return _take(np.frombuffer(data, np.uint8),
                     np.frombuffer(data, np.float64, (len(data) - 4) // 8, 4),
                     self._known, self._index, out)

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


@njit(cache=True, inline='always')
def _u32(b, offset):
    """Little-endian uint32 at byte `offset` of the uint8 array b."""
    return (np.int64(b[offset]) | (np.int64(b[offset + 1]) << 8)
            | (np.int64(b[offset + 2]) << 16) | (np.int64(b[offset + 3]) << 24))


@njit(cache=True, inline='always')
def _aligned(offset, size):
    return 4 + ((offset - 4 + size - 1) // size) * size


@njit(cache=True)
def _take(b, f, known, index, out):
    """`JointStateReader.take` compiled. b: the bytes as uint8; f: the same bytes from offset 4
    as float64 (CDR aligns doubles to 8 from there); known: the expected name bytes."""
    size, m = b.shape[0], known.shape[0]
    if m == 0 or size < 16 or b[0] != 0 or b[1] != 1:
        return False
    start = _aligned(16 + _u32(b, 12), 4)  # after stamp and frame_id
    if start + m > size:
        return False
    for k in range(m):
        if b[start + k] != known[k]:
            return False
    count = _u32(known, 0)
    first = np.zeros(2, np.int64)
    offset = start + m
    for row in range(2):  # position, velocity
        offset = _aligned(offset, 4)
        if offset + 4 > size or _u32(b, offset) != count:
            return False
        offset = _aligned(offset + 4, 8) if count else offset + 4
        if offset + 8 * count > size:
            return False
        first[row] = (offset - 4) // 8
        offset += 8 * count
    for j in range(index.shape[0]):
        if not (np.isfinite(f[first[0] + index[j]]) and np.isfinite(f[first[1] + index[j]])):
            return False
    for j in range(index.shape[0]):
        out[0, j] = f[first[0] + index[j]]
        out[1, j] = f[first[1] + index[j]]
    return True
