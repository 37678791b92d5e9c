"""Reading serialized JointStates in place, against rclpy's own (de)serialization."""
from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from rnea_controller.cdr import JointStateReader

text = st.text(st.characters(blacklist_characters='\x00'), max_size=12)  # C strings
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
