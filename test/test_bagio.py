"""bagio: the streaming bag reader, held to rosbags' own reader and deserializer (the bags
come from test/synthetic_bags.py, written by rosbags)."""
from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from synthetic_bags import ArraySeries, JointStateSeries, write_bag

from rnea_controller.analysis.bagio import (
    BagReader,
    default_typestore,
    FLOAT64_ARRAY,
    JOINT_STATE,
)
from rnea_controller.errors import BagError

NAMES = ('a', 'b', 'c')
T0 = 1_700_000_000_000_000_000


def _series(n_msg, seed=0):
    rng = np.random.default_rng(seed)
    stamps = T0 + np.arange(n_msg, dtype=np.int64) * 1_000_000 + rng.integers(0, 1000, n_msg)
    arrays = rng.normal(size=(3, n_msg, len(NAMES)))
    return JointStateSeries(stamps, NAMES, *arrays), ArraySeries(stamps + 5, rng.normal(
        size=(n_msg, 2)))


def _read_all(path, specs, chunk_size=20000):
    out = {topic: [] for topic in specs}
    with BagReader(path) as bag:
        for topic, chunk in bag.stream(specs, chunk_size):
            out[topic].append(chunk)
    return out


def _cat(chunks, name):
    return np.concatenate([getattr(c, name) for c in chunks])


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_written_bag_reads_back_as_rosbags_deserializes_it(tmp_path, storage):
    states, commands = _series(500)
    path = write_bag(tmp_path / 'bag', joint_states=states, commands=commands, storage=storage,
                     robot_description='<robot name="x"/>')
    expected = {'/joint_states': [], '/effort_controller/commands': []}
    with AnyReader([path]) as reader:
        for conn, _, raw in reader.messages():
            if conn.topic in expected:
                expected[conn.topic].append(reader.deserialize(raw, conn.msgtype))
    js = expected['/joint_states']
    out = _read_all(path, {'/joint_states': ('joint_state', NAMES),
                           '/effort_controller/commands': ('array', 2)}, chunk_size=64)
    chunks = out['/joint_states']
    assert len(chunks) > 5
    assert np.array_equal(_cat(chunks, 'position'), np.array([m.position for m in js]))
    assert np.array_equal(_cat(chunks, 'velocity'), np.array([m.velocity for m in js]))
    assert np.array_equal(_cat(chunks, 'effort'), np.array([m.effort for m in js]))
    assert np.array_equal(_cat(chunks, 'stamps'), np.array(
        [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in js]))
    assert np.array_equal(_cat(chunks, 'stamps'), states.stamps)
    cmds = expected['/effort_controller/commands']
    assert np.array_equal(_cat(out['/effort_controller/commands'], 'data'),
                          np.array([m.data for m in cmds]))
    assert np.array_equal(_cat(out['/effort_controller/commands'], 'recv'), commands.stamps)


def _joint_state(store, stamp, names, position, velocity=(), effort=(), frame_id=''):
    cls = store.types
    return cls[JOINT_STATE](
        header=cls['std_msgs/msg/Header'](stamp=cls['builtin_interfaces/msg/Time'](
            sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id=frame_id),
        name=list(names), position=np.array(position, float),
        velocity=np.array(velocity, float), effort=np.array(effort, float))


def test_mixed_messages_take_the_slow_path_and_match(tmp_path):
    """Joint order changes, missing fields, other frame ids, zero stamps, malformed arrays."""
    store = default_typestore()
    msgs = []
    for k in range(40):
        stamp = T0 + k * 1_000_000
        v = [k + 0.1, k + 0.2, k + 0.3]
        if k % 7 == 3:
            msgs.append(_joint_state(store, stamp, ('c', 'a', 'b', 'x'), [v[2], v[0], v[1], 9],
                                     effort=[1, 2, 3, 4], frame_id='base'))
        elif k % 11 == 5:
            msgs.append(_joint_state(store, stamp, NAMES, v[:2]))  # malformed: 2 positions
        elif k == 20:
            msgs.append(_joint_state(store, 0, NAMES, v, v, v))  # unstamped: bag time
        else:
            msgs.append(_joint_state(store, stamp, NAMES, v, v))
    path = tmp_path / 'mixed'
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection('/js', JOINT_STATE, typestore=store)
        for k, msg in enumerate(msgs):
            writer.write(conn, T0 + k * 1_000_000 + 77, store.serialize_cdr(msg, JOINT_STATE))
    chunks = _read_all(path, {'/js': ('joint_state', ('b', 'a', 'c', 'zz'))})['/js']
    position, velocity, effort = (_cat(chunks, f) for f in ('position', 'velocity', 'effort'))
    stamps = _cat(chunks, 'stamps')
    kept = [k for k in range(40) if k % 11 != 5 or k % 7 == 3]
    assert sum(c.malformed for c in chunks) == 40 - len(kept)
    for row, k in enumerate(kept):
        assert position[row, :3] == pytest.approx([k + 0.2, k + 0.1, k + 0.3])
        assert stamps[row] == (T0 + k * 1_000_000 + 77 if k == 20 else T0 + k * 1_000_000)
        if k % 7 == 3:
            assert np.isnan(velocity[row]).all() and effort[row, :3] == pytest.approx([3, 2, 1])
        else:
            assert velocity[row, :3] == pytest.approx(position[row, :3])
    assert np.isnan(position[:, 3]).all()


def test_single_storage_files_are_read(tmp_path):
    states, _ = _series(50)
    for storage, suffix in (('mcap', '.mcap'), ('sqlite3', '.db3')):
        path = write_bag(tmp_path / storage, joint_states=states, storage=storage)
        (single,) = Path(path).glob(f'*{suffix}')
        with BagReader(single) as bag:
            assert bag.topics['/joint_states'] == (JOINT_STATE, 50)
            assert list(bag.first('/joint_states').name) == list(NAMES)


def test_missing_topic_lists_the_topics_that_exist(tmp_path):
    states, commands = _series(10)
    path = write_bag(tmp_path / 'bag', joint_states=states, commands=commands)
    with BagReader(path) as bag, pytest.raises(BagError) as error:
        bag.require('/rnea_controller/reference', JOINT_STATE)
    assert "no topic '/rnea_controller/reference'" in str(error.value)
    assert '/joint_states [sensor_msgs/msg/JointState]' in str(error.value)
    assert f'/effort_controller/commands [{FLOAT64_ARRAY}]' in str(error.value)


def test_empty_bag_is_reported(tmp_path):
    path = tmp_path / 'empty'
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        writer.add_connection('/joint_states', JOINT_STATE, typestore=default_typestore())
    with BagReader(path) as bag, pytest.raises(BagError, match='is empty'):
        bag.require('/joint_states', JOINT_STATE)


@pytest.mark.parametrize('damage', ['garbage', 'truncated'])
def test_corrupt_files_raise_bag_error(tmp_path, damage):
    states, _ = _series(3000)
    (file,) = write_bag(tmp_path / 'bag', joint_states=states).glob('*.mcap')
    data = file.read_bytes()
    bad = tmp_path / 'bad.mcap'
    bad.write_bytes(b'\x89MCAP0\r\n' + bytes(range(256)) * 40 if damage == 'garbage'
                    else data[:len(data) // 2])
    with pytest.raises(BagError, match='bad.mcap'):
        with BagReader(bad) as bag:
            for _ in bag.stream({'/joint_states': ('joint_state', NAMES)}):
                pass


def test_missing_path_raises_bag_error(tmp_path):
    with pytest.raises(BagError, match='does not exist'):
        with BagReader(tmp_path / 'nothing'):
            pass
