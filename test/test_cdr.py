"""Reading serialized JointStates in place, against rclpy's own (de)serialization."""
from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from rnea_controller.ros.cdr import JointStateReader

text = st.text(st.characters(blacklist_characters='\x00', blacklist_categories=('Cs',)),
               max_size=12)  # C strings of valid UTF-8 (no lone surrogates)
names = st.lists(text, max_size=9)
doubles = st.lists(st.floats(allow_nan=False, width=64), max_size=9)


def serialized(name, position, velocity, effort=(), frame_id=''):
    msg = JointState(name=name, position=position, velocity=velocity, effort=list(effort))
    msg.header.frame_id = frame_id
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_795_262_202, 361_665_669
    return serialize_message(msg)


@settings(max_examples=200, deadline=None)
@given(names, doubles, doubles, doubles, text)
def test_reads_what_rclpy_serialized(name, position, velocity, effort, frame_id):
    reader = JointStateReader()
    for _ in range(2):  # second time: the names come from the cache
        got_names, got_position, got_velocity = reader.read(
            serialized(name, position, velocity, effort, frame_id))
        assert got_names == name
        np.testing.assert_array_equal(got_position, position)
        np.testing.assert_array_equal(got_velocity, velocity)


def test_names_are_decoded_again_when_they_change():
    reader = JointStateReader()
    assert reader.read(serialized(['a', 'b'], [1.0, 2.0], [0.0, 0.0]))[0] == ['a', 'b']
    assert reader.read(serialized(['b', 'a'], [1.0, 2.0], [0.0, 0.0]))[0] == ['b', 'a']
    assert reader.read(serialized(['b', 'a', 'c'], [1.0], []))[0] == ['b', 'a', 'c']


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_truncated_or_corrupted_bytes_raise_value_error_or_read_consistently(data):
    raw = bytearray(serialized(['joint_a', 'joint_b'], [1.0, 2.0], [3.0, 4.0], [5.0]))
    cut = data.draw(st.integers(0, len(raw)))
    flips = data.draw(st.lists(st.tuples(st.integers(4, len(raw) - 1), st.integers(0, 255)),
                               max_size=3))
    for index, value in flips:
        raw[index] = value
    try:
        result = JointStateReader().read(bytes(raw[:cut]))
    except ValueError:
        return
    if result is not None:
        names, position, velocity = result
        assert isinstance(names, list) and position.dtype == velocity.dtype == np.float64


def test_other_encodings_are_left_to_the_caller():
    raw = bytearray(serialized(['a'], [1.0], [2.0]))
    raw[1] = 0x00  # big endian
    assert JointStateReader().read(bytes(raw)) is None
    with pytest.raises(ValueError):
        JointStateReader().read(serialized(['a'], [1.0], [2.0])[:20])


unique_names = st.lists(text, min_size=1, max_size=9, unique=True)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=200, deadline=None)
@given(st.data(), unique_names, text)
def test_take_gathers_what_read_reads(data, name, frame_id):
    n = len(name)
    position = data.draw(st.lists(finite, min_size=n, max_size=n))
    velocity = data.draw(st.lists(finite, min_size=n, max_size=n))
    index = np.array(data.draw(st.permutations(range(n))), dtype=np.intp)
    raw = serialized(name, position, velocity, frame_id=frame_id)
    reader, out = JointStateReader(), np.zeros((2, n))
    assert not reader.take(raw, out)  # nothing remembered yet
    reader.read(raw)
    reader.remember(index)
    assert reader.take(raw, out)
    np.testing.assert_array_equal(out, [np.array(position)[index], np.array(velocity)[index]])
    other = serialized(name[::-1] + ['x'], position[::-1] + [0.0], velocity[::-1] + [0.0])
    assert not reader.take(other, out)  # other names: the caller reads them


def test_take_refuses_non_finite_and_mismatched_lengths():
    reader, out = JointStateReader(), np.full((2, 2), 7.0)
    reader.read(serialized(['a', 'b'], [1.0, 2.0], [3.0, 4.0]))
    reader.remember(np.array([1, 0]))
    assert not reader.take(serialized(['a', 'b'], [1.0, np.nan], [3.0, 4.0]), out)
    assert not reader.take(serialized(['a', 'b'], [1.0, 2.0], [3.0, np.inf]), out)
    assert not reader.take(serialized(['a', 'b'], [1.0, 2.0], [3.0]), out)
    assert not reader.take(serialized(['a', 'b'], [1.0, 2.0, 5.0], [3.0, 4.0]), out)
    np.testing.assert_array_equal(out, 7.0)  # untouched by every refusal
    assert reader.take(serialized(['a', 'b'], [1.0, 2.0], [3.0, 4.0]), out)
    np.testing.assert_array_equal(out, [[2.0, 1.0], [4.0, 3.0]])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_take_on_corrupted_bytes_agrees_with_read_or_declines(data):
    good = serialized(['joint_a', 'joint_b'], [1.0, 2.0], [3.0, 4.0], [5.0])
    reader, out = JointStateReader(), np.zeros((2, 2))
    reader.read(good)
    reader.remember(np.array([0, 1]))
    raw = bytearray(good)
    cut = data.draw(st.integers(0, len(raw)))
    for index, value in data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1),
                                                     st.integers(0, 255)), max_size=3)):
        raw[index] = value
    raw = bytes(raw[:cut])
    if not reader.take(raw, out):
        return
    names, position, velocity = JointStateReader().read(raw)  # must not raise
    assert names == ['joint_a', 'joint_b']
    np.testing.assert_array_equal(out, [position, velocity])


def test_nothing_compiles_when_the_first_real_message_is_taken():
    from rnea_controller.ros.cdr import _take
    reader = JointStateReader()
    before = len(_take.signatures)
    raw = serialized(['a', 'b'], [1.0, 2.0], [3.0, 4.0])
    reader.read(raw)
    reader.remember(np.array([0, 1]))
    assert reader.take(raw, np.zeros((2, 2)))
    assert len(_take.signatures) == before
