"""jointstates: the batch JointState decoder against rosbags' deserializer on random messages."""
from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

from rnea_controller.analysis.bagio import default_typestore, JOINT_STATE
from rnea_controller.analysis.jointstates import decode_joint_states

STORE = default_typestore()
JOINTS = ('a', 'b', 'c', 'd')
T0 = 1_700_000_000_000_000_000


def _message(rng, layout):
    """A random JointState: names a permutation of a subset, fields present or absent."""
    names, with_velocity, with_effort, frame_id = layout
    m = len(names)
    stamp = int(T0 + rng.integers(-10**12, 10**12))
    cls = STORE.types
    return cls[JOINT_STATE](
        header=cls['std_msgs/msg/Header'](stamp=cls['builtin_interfaces/msg/Time'](
            sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id=frame_id),
        name=list(names), position=rng.normal(size=m) * 10.0 ** rng.integers(-6, 6),
        velocity=rng.normal(size=m if with_velocity else 0),
        effort=rng.normal(size=m if with_effort else 0))


LAYOUTS = st.tuples(st.permutations(JOINTS).flatmap(
    lambda p: st.integers(1, 4).map(lambda k: tuple(p[:k]))), st.booleans(), st.booleans(),
    st.sampled_from(['', 'base', 'a_longer_frame_id']))


def _expected(msgs, names):
    """Columns as rosbags' deserializer gives them, NaN where a message lacks the joint."""
    out = {f: np.full((len(msgs), len(names)), np.nan) for f in ('position', 'velocity',
                                                                  'effort')}
    for k, msg in enumerate(msgs):
        for field, values in out.items():
            got = getattr(msg, field)
            for j, name in enumerate(names):
                if name in msg.name and len(got):
                    values[k, j] = got[list(msg.name).index(name)]
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(LAYOUTS, min_size=1, max_size=4),
       st.integers(1, 200))
def test_batch_decoding_equals_rosbags(seed, layouts, count):
    rng = np.random.default_rng(seed)
    msgs = [_message(rng, layouts[rng.integers(len(layouts))]) for _ in range(count)]
    raws = [bytes(STORE.serialize_cdr(m, JOINT_STATE)) for m in msgs]
    decoded = [STORE.deserialize_cdr(raw, JOINT_STATE) for raw in raws]  # the oracle
    names = ('d', 'b', 'x', 'a', 'c')
    out = decode_joint_states(raws, np.arange(count), names,
                              lambda raw: STORE.deserialize_cdr(raw, JOINT_STATE))
    assert out.malformed == 0
    for field, values in _expected(decoded, names).items():
        np.testing.assert_array_equal(getattr(out, field), values)
    np.testing.assert_array_equal(out.stamps, [m.header.stamp.sec * 10**9
                                               + m.header.stamp.nanosec for m in decoded])


def test_uniform_messages_take_one_view_not_rosbags_per_message():
    rng = np.random.default_rng(3)
    layout = (JOINTS, True, True, 'base')
    msgs = [_message(rng, layout) for _ in range(500)]
    raws = [bytes(STORE.serialize_cdr(m, JOINT_STATE)) for m in msgs]
    calls = []

    def deserialize(raw):
        calls.append(1)
        return STORE.deserialize_cdr(raw, JOINT_STATE)

    out = decode_joint_states(raws, np.zeros(500), JOINTS, deserialize)
    assert len(calls) == 1  # the template only
    np.testing.assert_array_equal(out.position, [m.position for m in msgs])
    np.testing.assert_array_equal(out.effort, [m.effort for m in msgs])
    np.testing.assert_array_equal(out.stamps, [m.header.stamp.sec * 10**9
                                               + m.header.stamp.nanosec for m in msgs])


def test_malformed_and_big_endian_messages():
    rng = np.random.default_rng(4)
    good = _message(rng, (JOINTS, True, False, ''))
    short = _message(rng, (JOINTS, False, False, ''))
    short.position = short.position[:2]  # 4 names, 2 positions: malformed
    raws = [bytes(STORE.serialize_cdr(good, JOINT_STATE)),
            bytes(STORE.serialize_cdr(short, JOINT_STATE)),
            bytes(STORE.serialize_cdr(good, JOINT_STATE, little_endian=False)), b'\x00\x01xx']
    out = decode_joint_states(raws, np.arange(4), JOINTS,
                              lambda raw: STORE.deserialize_cdr(raw, JOINT_STATE))
    assert out.malformed == 2
    np.testing.assert_array_equal(out.position, [good.position, good.position])
    assert out.effort.shape == (2, 4) and np.isnan(out.effort).all()
    assert out.stamps[1] == pytest.approx(out.stamps[0])
