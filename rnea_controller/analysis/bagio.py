"""Reading rosbag2 bags (a directory, .mcap or .db3) as numpy arrays, without ROS.

`BagReader` opens a bag with rosbags' `AnyReader`, which takes the message types from the
definitions recorded in the bag (the newest ROS 2 type store of rosbags for a bag without
any). `stream` reads the chosen topics in bag-time order and yields them in chunks of numpy
arrays, so memory depends on the chunk size, not on the bag's length:

    with BagReader('run/bag') as bag:
        bag.require('/joint_states', JOINT_STATE)
        for topic, chunk in bag.stream({'/joint_states': ('joint_state', names)}):
            ...  # chunk.stamps [ns], chunk.position (N, len(names)) [rad], ...

Decoding: JointState by `jointstates.decode_joint_states` (rosbags for the layout, one numpy
view for the numbers: `wire`, the one shortcut, measured necessary); Float64MultiArray and
DiagnosticArray by rosbags' deserializer, message by message.
"""
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rosbags.highlevel import AnyReader

from rnea_controller.analysis.jointstates import decode_joint_states, JointStates
from rnea_controller.errors import BagError
from rnea_controller.wire import default_typestore, FLOAT64_ARRAY, JOINT_STATE

STRING = 'std_msgs/msg/String'
DIAGNOSTIC_ARRAY = 'diagnostic_msgs/msg/DiagnosticArray'

__all__ = ['Arrays', 'BagReader', 'default_typestore', 'Diagnostic', 'FLOAT64_ARRAY',
           'JOINT_STATE', 'JointStates']


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


class BagReader:
    """A rosbag2 bag opened for streaming; a context manager. Failures raise `BagError`."""

    def __init__(self, path):
        self.path = Path(path)
        self._reader = None

    def __enter__(self):
        if not self.path.exists():
            raise BagError(f'bag {str(self.path)!r} does not exist')
        try:
            self._reader = AnyReader([self.path], default_typestore=default_typestore())
            self._reader.open()
        except Exception as err:  # noqa: BLE001 - any reader failure means a corrupt bag
            raise BagError(f'cannot read bag {str(self.path)!r}: {_describe(err)}') from None
        return self

    def __exit__(self, *exc):
        self._reader.close()

    @property
    def topics(self):
        """{topic: (message type, message count)} of every topic in the bag."""
        return {name: (info.msgtype, info.msgcount)
                for name, info in self._reader.topics.items()}

    @property
    def start_ns(self):
        """Bag time of the first message [ns]."""
        return self._reader.start_time

    def require_messages(self):
        """Raise `BagError` if the bag holds no message at all."""
        if self._reader.message_count == 0:
            raise BagError(f'bag {str(self.path)!r} is empty (no messages)')

    def require(self, topic, msgtype):
        """Raise `BagError` unless `topic` exists with `msgtype` and has messages."""
        self.require_messages()
        topics = self.topics
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
        """(connection, bag time [ns], raw bytes) of `topics`, in bag-time order."""
        conns = [c for c in self._reader.connections if c.topic in topics]
        if not conns:
            return
        try:
            yield from self._reader.messages(connections=conns)
        except Exception as err:  # noqa: BLE001 - truncated or corrupt storage
            raise BagError(f'cannot read bag {str(self.path)!r}: {_describe(err)}') from None

    def deserialize(self, raw, msgtype):
        """One message object, by rosbags' type store for this bag."""
        return self._reader.typestore.deserialize_cdr(raw, msgtype)

    def first(self, topic):
        """The first message of `topic`, deserialized, or None."""
        return self.first_stamped(topic)[1]

    def first_stamped(self, topic):
        """(bag time [ns], message deserialized) of the first message of `topic`, or
        (None, None)."""
        for conn, time_ns, raw in self._messages({topic}):
            try:
                return time_ns, self.deserialize(raw, conn.msgtype)
            except Exception as err:  # noqa: BLE001 - reported as a bag error
                raise BagError(f'cannot decode the first message of {topic!r} in '
                               f'{str(self.path)!r}: {_describe(err)}') from None
        return None, None

    def stream(self, specs, chunk_size=20000, progress=None):
        """Yield (topic, chunk) for the topics in `specs`, chunk by chunk, in time order.

        specs: {topic: ('joint_state', joint names) | ('array', width) | ('diagnostics', None)}
        chunk_size: messages buffered per topic before all buffers are decoded together, so the
            chunks of different topics cover about the same stretch of time.
        progress: called with the number of messages read since its previous call.
        """
        buffers = {topic: ([], []) for topic in specs}
        msgtypes = {}
        for conn, t, raw in self._messages(set(specs)):
            raws, recv = buffers[conn.topic]
            msgtypes[conn.topic] = conn.msgtype
            raws.append(raw)
            recv.append(t)
            if len(raws) >= chunk_size:
                yield from self._flush(specs, msgtypes, buffers, progress)
        yield from self._flush(specs, msgtypes, buffers, progress)

    def _flush(self, specs, msgtypes, buffers, progress):
        count = 0
        for topic, (raws, recv) in buffers.items():
            if raws:
                kind, arg = specs[topic]
                yield topic, self._decode(kind, arg, msgtypes[topic], raws, recv)
                count += len(raws)
                raws.clear()
                recv.clear()
        if progress is not None and count:
            progress(count)

    def _decode(self, kind, arg, msgtype, raws, recv):
        if kind == 'joint_state':
            return decode_joint_states(raws, recv, arg,
                                       lambda raw: self.deserialize(raw, msgtype))
        decode = _arrays if kind == 'array' else _diagnostics
        return decode([self._try_deserialize(raw, msgtype) for raw in raws], recv, arg)

    def _try_deserialize(self, raw, msgtype):
        try:
            return self.deserialize(raw, msgtype)
        except Exception:  # noqa: BLE001 - an undecodable message is dropped and counted
            return None


def _arrays(messages, recv, width):
    """Float64MultiArray messages (None: undecodable) with `width` values -> `Arrays`."""
    data = np.full((len(messages), width), np.nan)
    keep = np.zeros(len(messages), bool)
    for i, msg in enumerate(messages):
        if msg is not None and len(msg.data) == width:
            data[i] = msg.data
            keep[i] = True
    return Arrays(np.asarray(recv, np.int64)[keep], data[keep], int(len(keep) - keep.sum()))


def _diagnostics(messages, recv, _):
    """DiagnosticArray messages -> a flat list of `Diagnostic` (undecodable ones skipped)."""
    return [Diagnostic(int(t), status.name, int(status.level), status.message,
                       {kv.key: kv.value for kv in status.values})
            for msg, t in zip(messages, recv) if msg is not None for status in msg.status]


def _describe(err):
    text = str(err).strip() or type(err).__name__
    return text if len(text) < 300 else text[:300] + '...'
