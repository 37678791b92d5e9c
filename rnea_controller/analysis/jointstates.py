"""sensor_msgs/JointState messages of a bag to numpy columns, fast, with `wire`'s shortcut.

rosbags deserializes one JointState in 20-45 µs; a 10-minute 1 kHz run has 1.2M of them (joint
states and references), more than the validator's budget (`./run bench validate`). So messages
are decoded in batches:

1. messages of one batch that have the same length are a group; the layout of its first
   message, the template, is found by `wire.find_layout` (rosbags, from a memoryview).
2. every other message of the group whose bytes equal the template's everywhere but in the
   stamp and the numbers has the same names, frame id and sequence lengths, hence the same
   layout: their stamps and numbers are read with one numpy view of the joined bytes.
3. anything else (other layouts, big-endian CDR, a template rosbags rejects) is deserialized
   by rosbags one message at a time. test_jointstates.py holds both paths to rosbags.
"""
from dataclasses import dataclass

import numpy as np

from rnea_controller import wire
from rnea_controller.wire import JOINT_STATE_ARRAYS as FIELDS
from rnea_controller.wire import STAMP


@dataclass
class JointStates:
    """A batch of JointState messages, columns in the order of the requested joint names.

    stamps: header stamps [ns] (the bag time where the header stamp is zero), shape (N,)
    recv: bag (receive) times [ns], shape (N,)
    position [rad], velocity [rad/s], effort [N·m]: shape (N, m), NaN where a message lacks the
    joint or the field.
    malformed: messages dropped because they did not decode or their arrays did not match
    their names.
    """

    stamps: np.ndarray
    recv: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    malformed: int = 0

    @classmethod
    def empty(cls, recv, m):
        """N messages of m joints, every number NaN, stamps = receive times [ns]."""
        recv = np.asarray(recv, np.int64)
        n = len(recv)
        return cls(recv.copy(), recv, *(np.full((n, m), np.nan) for _ in FIELDS))

    def rows(self, keep):
        """The rows where `keep` is True (the same malformed count)."""
        return JointStates(self.stamps[keep], self.recv[keep], self.position[keep],
                           self.velocity[keep], self.effort[keep], self.malformed)

    def select(self, keep):
        """The rows where `keep` is True; the others counted as malformed."""
        chosen = self.rows(keep)
        chosen.malformed += int(len(keep) - np.sum(keep))
        return chosen


def decode_joint_states(raws, recv, names, deserialize):
    """Decode raw CDR JointState messages into `JointStates` with columns `names`.

    Args:
        raws: serialized messages (bytes), as a bag holds them
        recv: their bag times [ns]
        names: the joints to extract, in column order; joints a message lacks stay NaN
        deserialize: raw bytes or memoryview -> message object (rosbags' typestore)
    """
    out = JointStates.empty(recv, len(names))
    column = {name: i for i, name in enumerate(names)}
    keep = np.ones(len(raws), bool)
    lengths = np.fromiter(map(len, raws), np.int64, len(raws))
    for length in np.unique(lengths):
        group = np.flatnonzero(lengths == length)
        for i in _decode_group([raws[i] for i in group], group, column, deserialize, out):
            keep[i] = _decode_one(raws[i], i, column, deserialize, out)
    out = out.select(keep) if not keep.all() else out
    unstamped = out.stamps == 0
    out.stamps[unstamped] = out.recv[unstamped]
    return out


def _layout(raw, deserialize):
    """(message, Layout) of a template (`wire.find_layout`), or None if it cannot serve."""
    found = wire.find_layout(raw, deserialize, FIELDS, stamped=True)
    if found is None:
        return None
    msg, layout = found
    counts = [count for _, count in layout.spans.values()]
    if not msg.name or counts[0] != len(msg.name) or any(c not in (0, len(msg.name))
                                                         for c in counts):
        return None
    return msg, layout


def _decode_group(raws, index, column, deserialize, out):
    """Messages of one length: fill `out` where they share the template's layout.

    Returns the indices left to the one-by-one path.
    """
    found = _layout(raws[0], deserialize)
    if found is None:
        return list(index)
    msg, layout = found
    rows = np.frombuffer(b''.join(raws), np.uint8).reshape(len(raws), -1)
    fixed = np.ones(rows.shape[1], bool)
    for start, stop in layout.variable():
        fixed[start:stop] = False
    same = (rows[:, fixed] == rows[0, fixed]).all(axis=1)
    good, rows = index[same], rows[same]
    stamp = rows[:, STAMP].copy()
    out.stamps[good] = (stamp[:, :4].view('<i4')[:, 0].astype(np.int64) * 1_000_000_000
                        + stamp[:, 4:].view('<u4')[:, 0])
    cols, src = _columns(msg.name, column)
    for name, (start, count) in layout.spans.items():
        if count:
            values = rows[:, start:start + 8 * count].copy().view('<f8')
            getattr(out, name)[np.ix_(good, cols)] = values[:, src]
    return list(index[~same])


def _columns(names, column):
    """(output columns, message indices) of the requested joints present in `names`."""
    pairs = [(column[name], k) for k, name in enumerate(names) if name in column]
    return np.array([c for c, _ in pairs], np.int64), np.array([k for _, k in pairs], np.int64)


def _decode_one(raw, i, column, deserialize, out):
    """One message by rosbags; False when it is malformed (then dropped and counted)."""
    try:
        msg = deserialize(raw)
    except Exception:  # noqa: BLE001 - an undecodable message is dropped and counted
        return False
    if len(msg.position) != len(msg.name):
        return False
    out.stamps[i] = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
    cols, src = _columns(msg.name, column)
    for name in FIELDS:
        values = np.asarray(getattr(msg, name), float)
        if len(values) == len(msg.name):
            getattr(out, name)[i, cols] = values[src]
        elif len(values):
            return False
    return True
