"""wire: numbers read and written in place in serialized messages, against rclpy and rosbags.

The oracles: rclpy's own (de)serialization (`rclpy.serialization`) and rosbags' serializer, on
random messages. The node's joint-state input (`JointStateInput.take_serialized`, which reads
in place messages of the last full take's layout) must take and refuse exactly what taking
rclpy's deserialized message (`take`) takes and refuses, with the same q, qd and stamp.
"""
import threading

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from rnea_controller import wire
from rnea_controller.control.timing import LoopTiming
from rnea_controller.ros import inputs as inputs_module
from rnea_controller.ros.inputs import JointStateInput, TEMPLATES
from rnea_controller.ros.outputs import command_writer, joint_state_writer
from rnea_controller.wire import JOINT_STATE

STORE = wire.default_typestore()
MODEL = ['j1', 'j2', 'j3']

# names: any text but NUL (a ROS string ends at its first NUL) and lone surrogates (not text
# UTF-8 can carry: rclpy cannot encode them)
NAMES = st.lists(st.text(st.characters(exclude_characters='\x00', exclude_categories=('Cs',)),
                         max_size=12),
                 max_size=6, unique=True)
STAMPS = st.integers(0, 2**31 - 1).flatmap(lambda s: st.integers(0, 999_999_999).map(
    lambda n: (s, n)))


@settings(max_examples=60, deadline=None)
@given(NAMES, st.integers(0, 2**32 - 1), STAMPS)
def test_a_written_reference_reads_back_by_rclpy_as_written(names, seed, stamp):
    writer = joint_state_writer(STORE, names)
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(3, len(names))) * 10.0 ** rng.integers(-8, 8)
    for field, row in zip(('position', 'velocity', 'effort'), values, strict=True):
        writer.arrays[field][:] = row
    writer.set_stamp(stamp[0] * 1_000_000_000 + stamp[1])
    back = deserialize_message(writer.raw(), JointState)
    assert list(back.name) == names
    np.testing.assert_array_equal(
        np.reshape([back.position, back.velocity, back.effort], (3, len(names))), values)
    assert (back.header.stamp.sec, back.header.stamp.nanosec) == stamp
    rosbags = STORE.types[JOINT_STATE](
        header=STORE.types['std_msgs/msg/Header'](stamp=STORE.types[
            'builtin_interfaces/msg/Time'](sec=stamp[0], nanosec=stamp[1]), frame_id=''),
        name=names, position=values[0], velocity=values[1], effort=values[2])
    assert writer.raw() == bytes(STORE.serialize_cdr(rosbags, JOINT_STATE))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 64), st.integers(0, 2**32 - 1))
def test_a_written_command_reads_back_by_rclpy_as_written(m, seed):
    writer = command_writer(STORE, m)
    values = np.random.default_rng(seed).normal(size=m)
    writer.arrays['data'][:] = values
    back = deserialize_message(writer.raw(), Float64MultiArray)
    np.testing.assert_array_equal(np.asarray(back.data), values)
    assert not back.layout.dim and back.layout.data_offset == 0


def test_a_layout_rosbags_does_not_read_in_place_is_none():
    msg = STORE.types['std_msgs/msg/Float64MultiArray'](
        layout=STORE.types['std_msgs/msg/MultiArrayLayout'](dim=[], data_offset=0),
        data=np.arange(3.0))
    typename = 'std_msgs/msg/Float64MultiArray'

    def deserialize(raw):
        return STORE.deserialize_cdr(raw, typename)

    big = bytes(STORE.serialize_cdr(msg, typename, little_endian=False))
    assert deserialize(big).data.tolist() == [0.0, 1.0, 2.0]  # rosbags reads it, copied
    assert wire.find_layout(big, deserialize, ('data',)) is None
    assert wire.find_layout(b'\x00\x01\x00\x00\x07', deserialize, ('data',)) is None
    little = bytes(STORE.serialize_cdr(msg, typename))
    _, layout = wire.find_layout(little, deserialize, ('data',))
    assert layout.array(little, 'data').tolist() == [0.0, 1.0, 2.0]
    names = joint_state_writer(STORE, ['a', 'b'])
    assert names.arrays['position'].size == 2
    with pytest.raises(ValueError, match='no in-place layout'):  # names are not float64
        wire.Writer(STORE, JOINT_STATE, deserialize_rosbags(names.raw()), ('name',))


def deserialize_rosbags(raw):
    return STORE.deserialize_cdr(raw, JOINT_STATE)


# --- the node's input: in place against rclpy's deserialization ------------------------

LAYOUTS = st.tuples(
    st.permutations(MODEL + ['x', 'yy']).flatmap(
        lambda p: st.integers(2, 5).map(lambda k: p[:k])),   # names (may miss model joints)
    st.booleans(),                                            # velocities present
    st.booleans(),                                            # efforts present
    st.sampled_from(['', 'base', 'a_frame']))                 # frame id


def _joint_state(rng, layout, stamp_ns):
    names, with_velocity, with_effort, frame_id = layout
    m = len(names)
    msg = JointState(name=list(names), position=rng.normal(size=m).tolist(),
                     velocity=rng.normal(size=m).tolist() if with_velocity else [],
                     effort=rng.normal(size=m).tolist() if with_effort else [])
    if rng.random() < 0.1:
        msg.position[int(rng.integers(m))] = float('nan')
    if rng.random() < 0.05 and m > 1:
        msg.position = msg.position[:-1]
    msg.header.frame_id = frame_id
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    return msg


def _wire_bytes(msg):
    """A JointState's bytes as DDS delivers them: rosbags' CDR of the same fields (rclpy's
    serialize_message appends 4 bytes the wire does not carry; see the test below)."""
    types = STORE.types
    return bytes(STORE.serialize_cdr(types[JOINT_STATE](
        header=types['std_msgs/msg/Header'](stamp=types['builtin_interfaces/msg/Time'](
            sec=msg.header.stamp.sec, nanosec=msg.header.stamp.nanosec),
            frame_id=msg.header.frame_id),
        name=list(msg.name), position=np.array(msg.position, np.float64),
        velocity=np.array(msg.velocity, np.float64), effort=np.array(msg.effort, np.float64)),
        JOINT_STATE))


def _outcome(state, take, arg):
    try:
        take(arg, 'auto')
    except ValueError as error:
        return ('refused', str(error))
    return ('taken', state.q.copy(), state.qd.copy(), state.measured_velocity)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(LAYOUTS, min_size=1, max_size=3),
       st.integers(1, 60))
def test_joint_states_read_in_place_are_taken_as_rclpy_reads_them(seed, layouts, count):
    rng = np.random.default_rng(seed)
    fast, full = JointStateInput(MODEL), JointStateInput(MODEL)
    in_place = 0  # read in place, at most every message
    for k in range(count):
        msg = _joint_state(rng, layouts[rng.integers(len(layouts))], 10**18 + k * 10**6)
        raw = _wire_bytes(msg)
        if rng.random() < 0.05:
            raw = raw[:int(rng.integers(len(raw)))]  # truncated
        in_place += fast.reads_in_place(raw)
        got = _outcome(fast, fast.take_serialized, raw)
        fast.learned()  # the layout, learnt off the call (inputs.py)
        try:
            typed = deserialize_message(raw, JointState)
        except Exception:  # noqa: BLE001 - rclpy refuses the bytes: so must the node
            assert got[0] == 'refused' and 'do not deserialize as a JointState' in got[1]
            continue
        want = _outcome(full, full.take, typed)
        assert got[0] == want[0], (got, want)
        if got[0] == 'taken':
            for a, b in zip(got[1:], want[1:], strict=True):
                np.testing.assert_array_equal(a, b)
        else:
            assert got[1] == want[1]
    assert in_place <= count


def test_joint_states_of_one_layout_are_read_in_place_after_the_first():
    state, rng = JointStateInput(MODEL), np.random.default_rng(3)
    layout = (['yy', 'j3', 'j1', 'x', 'j2'], True, True, 'base')
    in_place = 0
    for k in range(50):
        msg = _joint_state(np.random.default_rng(k), layout, 10**18 + k)
        msg.position = rng.normal(size=5).tolist()
        raw = _wire_bytes(msg)
        in_place += state.reads_in_place(raw)
        state.take_serialized(raw)
        state.learned()
        np.testing.assert_array_equal(state.q, np.array(msg.position)[[2, 4, 1]])
        np.testing.assert_array_equal(state.qd, np.array(msg.velocity)[[2, 4, 1]])
    assert in_place == 49


def test_a_name_changed_in_place_is_not_read_with_the_old_mapping():
    """Same length, same everything but two names swapped: the full way, the new mapping."""
    state = JointStateInput(MODEL)
    first = JointState(name=['j1', 'j2', 'j3'], position=[1.0, 2.0, 3.0], velocity=[0.0] * 3)
    state.take_serialized(_wire_bytes(first))
    assert state.learned()
    state.take_serialized(_wire_bytes(first))
    swapped = JointState(name=['j2', 'j1', 'j3'], position=[1.0, 2.0, 3.0],
                         velocity=[0.0] * 3)
    raw = _wire_bytes(swapped)
    assert len(raw) == len(_wire_bytes(first)) and not state.reads_in_place(raw)
    state.take_serialized(raw)
    np.testing.assert_array_equal(state.q, [2.0, 1.0, 3.0])


def test_a_new_layout_is_learnt_off_the_tick(monkeypatch):
    """Issue 45: the search for a new layout (a 100 kB state's took 8.5 ms) is not in the
    tick's call. While the search is held, the call returns with the state taken, and the
    states after it are taken in full; once it ends, they are read in place."""
    release, searching = threading.Event(), threading.Event()
    find_layout = wire.find_layout

    def held(*args, **kwargs):
        searching.set()
        assert release.wait(30.0)
        return find_layout(*args, **kwargs)
    monkeypatch.setattr(inputs_module.wire, 'find_layout', held)
    state = JointStateInput(MODEL)
    extra = [f'extra_joint_{k}' for k in range(2500)]
    messages = [JointState(name=['j1', 'j2', 'j3', *extra], position=[0.1 * k, 0.2, 0.3, *[0.0]
                           * 2500], velocity=[0.0] * 2503) for k in range(3)]
    state.take_serialized(_wire_bytes(messages[0]))
    assert searching.wait(30.0)  # in its thread, held there
    np.testing.assert_array_equal(state.q, [0.0, 0.2, 0.3])
    state.take_serialized(_wire_bytes(messages[1]))  # meanwhile: in full
    np.testing.assert_array_equal(state.q, [0.1, 0.2, 0.3])
    assert not state.reads_in_place(_wire_bytes(messages[2]))
    release.set()
    assert state.learned(30.0)
    raw = _wire_bytes(messages[2])
    assert state.reads_in_place(raw)
    state.take_serialized(raw)
    np.testing.assert_array_equal(state.q, [0.2, 0.2, 0.3])


def test_two_drivers_layouts_alternating_on_one_topic_are_both_read_in_place():
    """An arm's driver and a gripper's on /joint_states: each layout is learnt once, by one
    thread that waits for work (not a thread per layout: starting one cost the tick 1.3 ms),
    and from then on both are read in place."""
    state = JointStateInput(MODEL)
    arm = JointState(name=['j1', 'j2', 'j3'], position=[0.1, 0.2, 0.3], velocity=[0.0] * 3)
    gripper = JointState(name=['j1', 'j2', 'j3', 'finger'], position=[0.4, 0.5, 0.6, 0.01],
                         velocity=[0.0] * 4)
    for msg in (arm, gripper, arm, gripper):
        state.take_serialized(_wire_bytes(msg))
        assert state.learned(30.0)
    learner = state._learner
    assert state.reads_in_place(_wire_bytes(arm)) and state.reads_in_place(_wire_bytes(gripper))
    for msg, q in ((arm, [0.1, 0.2, 0.3]), (gripper, [0.4, 0.5, 0.6]), (arm, [0.1, 0.2, 0.3])):
        state.take_serialized(_wire_bytes(msg))
        np.testing.assert_array_equal(state.q, q)
    for k in range(3, 3 + 2 * TEMPLATES):  # more layouts than it keeps: the newest stay
        state.take_serialized(_wire_bytes(JointState(name=['j1', 'j2', 'j3', *[
            f'x{i}' for i in range(k)]], position=[0.0] * (k + 3))))
        assert state.learned(30.0)
    assert not state.reads_in_place(_wire_bytes(arm))
    assert state._learner is learner and learner.is_alive()  # one thread learnt them all


def test_states_refused_for_their_values_are_read_in_place_and_refused_alike():
    """A second publisher's positions-only states in a stream whose velocities are measured
    are refused state after state: their layout is learnt (well formed: only the values
    refuse them), so each costs a read in place rather than rclpy's deserialization, with
    the same refusal. A state refused for its names or sizes is never a template."""
    state = JointStateInput(MODEL, timing=LoopTiming(len(MODEL), 0.001))
    arm = JointState(name=['j1', 'j2', 'j3'], position=[0.1, 0.2, 0.3], velocity=[0.0] * 3)
    state.take_serialized(_wire_bytes(arm))
    second = JointState(name=['j1', 'j2', 'j3'], position=[0.4, 0.5, 0.6])
    for _ in range(3):
        with pytest.raises(ValueError, match='no velocities in a stream whose velocities are '
                                             'measured'):
            state.take_serialized(_wire_bytes(second))
        assert state.learned(30.0)
        assert state.reads_in_place(_wire_bytes(second))
    np.testing.assert_array_equal(state.q, [0.1, 0.2, 0.3])
    short = JointState(name=['j1', 'j2', 'j3', 'j4'], position=[0.4, 0.5, 0.6])
    for _ in range(2):
        with pytest.raises(ValueError, match='3 positions and 0 velocities for 4 names'):
            state.take_serialized(_wire_bytes(short))
        state.learned(30.0)
    assert not state.reads_in_place(_wire_bytes(short))


def test_rclpy_serialized_bytes_with_a_tail_go_the_full_way_and_are_taken():
    """rclpy's serialize_message gives a JointState 4 bytes more than the wire (and than
    rosbags, which then refuses it as a template): taken every time by rclpy's reading."""
    state = JointStateInput(MODEL)
    msg = JointState(name=MODEL, position=[0.1, 0.2, 0.3], velocity=[1.0, 2.0, 3.0])
    raw = serialize_message(msg)
    assert len(raw) == len(_wire_bytes(msg)) + 4
    for _ in range(3):
        state.take_serialized(raw)
        np.testing.assert_array_equal(state.q, [0.1, 0.2, 0.3])
        np.testing.assert_array_equal(state.qd, [1.0, 2.0, 3.0])
    assert not state.learned()


def test_bytes_that_do_not_deserialize_are_refused_with_their_size():
    state = JointStateInput(MODEL)
    with pytest.raises(ValueError, match='7 bytes that do not deserialize as a JointState'):
        state.take_serialized(b'\x00\x01\x00\x00\xff\xff\xff')
    assert not state.valid


# --- trajectories read by rosbags from the raw bytes (issue 45) ----------------------------

def _rows_equal(mine, theirs):
    """A field of `wire.read_trajectory` against `inputs.trajectory_arrays`' (rclpy's)."""
    if theirs is None or mine is None:
        return mine is None and theirs is None
    return len(mine) == len(theirs) and all(
        np.array_equal(np.asarray(a, np.float64), np.asarray(b, np.float64), equal_nan=True)
        for a, b in zip(mine, theirs, strict=True))


POINT_SIZES = st.sampled_from([0, 1, 3, 6])


@settings(max_examples=80, deadline=None)
@given(NAMES, st.integers(0, 2**32 - 1), STAMPS, st.integers(0, 40), POINT_SIZES,
       st.booleans(), st.text(max_size=5))
def test_a_trajectory_read_from_its_bytes_is_what_rclpy_reads(names, seed, stamp, count, k,
                                                              mixed, frame):
    """Random JointTrajectory messages serialized by rclpy (its tail included): the node's
    reading (in place for points of one shape, else rosbags') gives the arrays that rclpy's
    message gives, field by field."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from rnea_controller.ros.inputs import trajectory_arrays
    rng = np.random.default_rng(seed)

    def values(n):
        return [float(x) for x in rng.choice([0.0, -1.5, np.nan, np.inf, 1e300], n)
                * rng.uniform(-2, 2, n)]
    points = []
    for _ in range(count):
        sizes = rng.choice([0, 1, k], 4) if mixed else (k, k * (seed % 2), 0, k * (seed % 3))
        points.append(JointTrajectoryPoint(
            positions=values(sizes[0]), velocities=values(sizes[1]),
            accelerations=values(sizes[2]), effort=values(sizes[3]),
            time_from_start=Duration(sec=int(rng.integers(-5, 5)),
                                     nanosec=int(rng.integers(0, 10**9)))))
    msg = JointTrajectory(joint_names=names, points=points)
    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
    msg.header.frame_id = frame
    raw = serialize_message(msg)
    if count and not mixed:  # read where the numbers lie, not by rosbags
        assert wire._uniform(memoryview(raw)[4:]) is not None
    mine = wire.read_trajectory(raw, STORE)
    theirs = trajectory_arrays(deserialize_message(raw, JointTrajectory))
    assert mine.stamp_ns == theirs.stamp_ns == stamp[0] * 1_000_000_000 + stamp[1]
    assert mine.names == theirs.names == names
    np.testing.assert_array_equal(mine.times, theirs.times)
    for field in ('positions', 'velocities', 'accelerations'):
        assert _rows_equal(getattr(mine, field), getattr(theirs, field)), field


def test_bytes_that_are_not_a_trajectory_are_refused_with_their_size():
    with pytest.raises(ValueError, match='7 bytes that do not deserialize as a JointTrajectory'):
        wire.read_trajectory(b'\x00\x01\x00\x00\xff\xff\xff', STORE)
    with pytest.raises(ValueError, match='3 bytes that are not a CDR message'):
        wire.read_trajectory(b'\x00\x01\x00', STORE)


def test_the_collector_stays_paused_until_the_last_holder_leaves():
    import gc
    assert gc.isenabled()
    with wire.collection_paused():
        with wire.collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with wire.collection_paused():
            pass
        assert not gc.isenabled()  # a collector the program had turned off stays off
    finally:
        gc.enable()
