"""The node's inputs, each taken whole or refused whole with the reason: joint states,
trajectories, wrenches and the robot description.

Joint states arrive serialized, as DDS delivers them, each with its arrival (the tick takes
them from the middleware's queue at their reception time: state_intake.py). A message with the
layout of one of the last TEMPLATES taken in full (its bytes equal that one's everywhere but in
the stamp and the numbers: the same names, frame id and array lengths, `wire.Layout`) is read
in place; any other is deserialized by rclpy and taken in full, and its layout, found by
rosbags and checked against rclpy's reading, serves the next ones. Several layouts are kept:
two drivers publishing on one topic (an arm's and a gripper's) alternate theirs. That search
runs off the tick, in a thread of its own that waits for work (`learn_off_tick`; a 100 kB
state's took 8.5 ms of the tick, and starting a thread for it 1.3 ms more, issue 45): the
states that come meanwhile are taken in full, as this one. Bytes that do not deserialize are
refused with their size. A JointState is refused whole if a name appears twice, a name is not
valid UTF-8 (rclpy turns undecodable bytes into U+FFFD), the position (or a non-empty velocity)
array does not match the names, a controlled joint is missing, or a model joint's value is not
finite. An EMPTY velocity array is fine: positions-only drivers exist. A joint of the model
that is not controlled (a gripper's fingers) may be absent: it enters at its mimic relation
(q = multiplier · q_leader + offset, qd = multiplier · qd_leader) if it has one, else at
q = qd = 0.

Velocities, by `velocity_source`: 'measured' (the message must carry them), 'estimated' or
'auto' (measured if present, else estimated): `timing` (control/timing.py) decides at the first
state. A positions-only state in a stream whose velocities are measured is refused (a second
source, e.g. joint_state_publisher beside the driver).

The jump gate (issue 26; issue 29: a fast state is a fact, not an intruder) is
control/jump_gate.py's JumpGate: every state is checked before anything is written, taken
whole or refused whole.
"""
import math
import threading
import time
import warnings
import weakref

import numpy as np
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

from rnea_controller import wire
from rnea_controller.control.jump_gate import JumpGate
from rnea_controller.control.trajectory import Limits, plan_arrays
from rnea_controller.dynamics.model import RobotModel
from rnea_controller.errors import DescriptionWarning, ModelError
from rnea_controller.wire import JOINT_STATE
from rnea_controller.wire import JOINT_STATE_ARRAYS as FIELDS

REPLACEMENT = '\ufffd'  # what rclpy decodes invalid UTF-8 bytes to


def check_names(names):
    """ValueError if a name is not valid UTF-8 or appears twice."""
    for k, name in enumerate(names):
        if REPLACEMENT in name:
            raise ValueError(f'name {k} ({name!r}) is not valid UTF-8')
    if len(set(names)) != len(names):
        twice = ', '.join(repr(n) for n in sorted({n for n in names if names.count(n) > 1}))
        raise ValueError(f'joint {twice} appears more than once')


NO_VELOCITY = np.zeros(0)
TEMPLATES = 4  # layouts read in place (the newest first)
LEARNER_IDLE = 1.0  # [s] the learner's wait between checks that its input still exists


class JointStateInput:
    """The newest valid joint state of the model's joints: q [rad], qd [rad/s], its arrival
    time [s] (perf_counter) and whether it carried velocities. `timing` (control/timing.py's
    LoopTiming, set by the node while active) takes each state's stamp and arrival, and gives
    the velocity to use: measured, or estimated from positions (velocity_source)."""

    def __init__(self, joint_names, timing=None, required=None, mimic=(),
                 velocity_limits=None, clock=time.perf_counter, wall_ns=time.time_ns,
                 learn_off_tick=True):
        n = len(joint_names)
        self._clock = clock  # [s] the arrivals' (the tick's clock; a test's own in tests)
        self._wall_ns = wall_ns  # [ns] the arrivals' on the stamps' clock
        self.gate = JumpGate(joint_names, velocity_limits)
        self.joint_names = list(joint_names)
        self.required = self.joint_names if required is None else list(required)
        self.mimic = mimic  # RobotModel.mimic: (follower, leader, multiplier, offset)
        self.q, self.qd = np.zeros(n), np.zeros(n)
        self.time = -math.inf
        self.valid = False
        self.measured_velocity = False
        self.timing = timing
        # the last names seen and their `_mapping` (model index, absent joints, their mimic
        # relations); the templates: (wire.Layout, mapping, names and sizes) of the last full
        # takes of distinct layouts, newest first (replaced whole by the learner: the tick
        # reads a tuple that never changes under it)
        self._names, self._mapping = None, None
        self._well_formed = False  # the last full take got past its names and sizes
        self._templates = ()
        self.learn_off_tick = learn_off_tick  # False: learnt in `take_serialized`'s call
        self._pending = None  # (raw, msg, mapping, shape, count) of the newest full take
        self._posted = self._done = 0  # layouts handed to the learner, and learnt
        self._learnt = threading.Condition()
        self._wake = threading.Event()
        self._learner = None  # the thread learning the layouts (`_learning`), once needed
        self._typestore = wire.default_typestore()
        self._typestore.get_msgdef(JOINT_STATE)  # rosbags compiles its reader here, not later

    def take_serialized(self, raw, velocity_source='auto', arrival=None):
        """Take a serialized JointState whole, or raise ValueError saying what is wrong.
        arrival: (on the tick's clock [s], on the stamps' clock [ns]) of a state that arrived
        before now (taken from the middleware's queue: state_intake.py); None: it arrives now."""
        for layout, mapping, _ in self._templates:
            if layout.matches(raw):
                velocity = layout.array(raw, 'velocity') if layout.spans['velocity'][1] else None
                self._take_arrays(layout.array(raw, 'position'), velocity, mapping,
                                  velocity_source, layout.stamp_ns(raw), arrival)
                return
        try:
            msg = deserialize_message(raw, JointState)
        except Exception as error:  # noqa: BLE001 - rclpy raises several kinds
            raise ValueError(f'{len(raw)} bytes that do not deserialize as a JointState '
                             f'({type(error).__name__}: {error})') from None
        self._well_formed = False
        try:
            self.take(msg, velocity_source, arrival)
        finally:
            # a state refused for its values (not its names or sizes: the in-place read
            # checks neither) has its layout learnt too: a second publisher's stream, refused
            # state after state, then costs a read in place, not rclpy's deserialization
            if self._well_formed:
                self._learn_later(raw, msg, self._mapping)

    def take(self, msg, velocity_source='auto', arrival=None):
        """Take a JointState whole, or raise ValueError saying what is wrong with it
        (arrival: as `take_serialized`'s)."""
        names = msg.name
        if names != self._names:
            check_names(names)
            self._mapping = self._model_index(names)
            self._names = list(names)
        position = np.frombuffer(msg.position, np.float64) if len(msg.position) else np.zeros(0)
        velocity = np.frombuffer(msg.velocity, np.float64) if len(msg.velocity) else None
        n = len(names)
        if len(position) != n or (velocity is not None and len(velocity) != n):
            raise ValueError(f'{len(position)} positions and {len(msg.velocity)} velocities for '
                             f'{n} names (velocities may also be empty)')
        self._well_formed = True  # names checked and mapped, sizes agree: only values remain
        stamp = msg.header.stamp
        self._take_arrays(position, velocity, self._mapping, velocity_source,
                          stamp.sec * 1_000_000_000 + stamp.nanosec, arrival)

    def _take_arrays(self, position, velocity, mapping, velocity_source, stamp_ns,
                     arrival=None):
        index, absent, followed = mapping
        if index is None:  # the names in model order, none absent: read as they are
            q, qd = position, velocity
        else:
            q = position[index]
            qd = velocity[index] if velocity is not None else None
            if absent:
                _fill_absent(q, qd, absent, followed)
        positions = q.tolist()
        velocities = None if qd is None else qd.tolist()
        # a sum is finite iff every term is (or it overflows, ~1e308): 0.7 µs against numpy's 2.6
        if not (math.isfinite(sum(positions))
                and (velocities is None or math.isfinite(sum(velocities)))):
            raise ValueError('non-finite position or velocity of a model joint')
        if qd is None and velocity_source == 'measured':
            raise ValueError('no velocities, and velocity_source is measured')
        if qd is None and self.timing is not None and self.timing.estimating is False:
            raise ValueError('no velocities in a stream whose velocities are measured '
                             '(a second joint-state publisher?)')
        now, wall_ns = (self._clock(), None) if arrival is None else arrival
        self.gate.check(positions, velocities, now, stamp_ns)
        self._store(q, qd, now, stamp_ns, wall_ns)
        self.gate.taken(positions, velocities, now, stamp_ns)

    @property
    def fresh_for(self):
        """[s] the jump gate compares a state with the previous one this recent."""
        return self.gate.fresh_for

    @fresh_for.setter
    def fresh_for(self, seconds):
        self.gate.fresh_for = seconds

    @property
    def jumps(self):
        """States the jump gate refused."""
        return self.gate.jumps

    @jumps.setter
    def jumps(self, count):
        self.gate.jumps = count

    @property
    def fast(self):
        """States beyond the gate's quick bounds taken: their motion continuous."""
        return self.gate.fast

    def reads_in_place(self, raw):
        """Whether `raw` has the layout of a template (read in place, not in full)."""
        return any(layout.matches(raw) for layout, _, _ in self._templates)

    def _learn_later(self, raw, msg, mapping):
        """After a full take of `msg` (its names' `mapping`): its layout is learnt, off the
        tick where `learn_off_tick` (module doc), unless a template has its shape (only
        padding differed). The newest such state is the one learnt; the tick only hands it
        over (the learner thread is started at the first)."""
        shape = (list(msg.name), msg.header.frame_id,
                 *(len(getattr(msg, field)) for field in FIELDS))
        if any(template[2] == shape for template in self._templates):
            return
        self._posted += 1
        self._pending = (raw, msg, mapping, shape, self._posted)
        if not self.learn_off_tick:
            return self._learn_pending()
        if self._learner is None:
            self._learner = threading.Thread(target=_learning,
                                             args=(weakref.ref(self), self._wake),
                                             name='state layout', daemon=True)
            self._learner.start()
        self._wake.set()

    def learned(self, timeout=None):
        """Wait until the layouts handed over are learnt (at most `timeout` [s]); whether a
        template serves states (tests)."""
        with self._learnt:
            self._learnt.wait_for(lambda: self._done == self._posted, timeout)
        return bool(self._templates)

    def _learn_pending(self):
        pending, self._pending = self._pending, None
        if pending is not None:
            self._learn(*pending[:4])
            with self._learnt:
                self._done = pending[4]
                self._learnt.notify_all()

    def _learn(self, raw, msg, mapping, shape):
        """`msg`'s layout (found by rosbags in its bytes `raw`, checked against rclpy's
        reading) serves the next messages like it, read with `mapping`; not if rosbags
        reads it otherwise."""
        store = self._typestore
        found = wire.find_layout(raw, lambda b: store.deserialize_cdr(b, JOINT_STATE), FIELDS,
                                 stamped=True)
        kept = tuple(template for template in self._templates if template[2] != shape)
        if found is None:
            self._templates = kept
            return
        read, layout = found
        same = (list(read.name) == shape[0] and read.header.frame_id == shape[1]
                and (read.header.stamp.sec, read.header.stamp.nanosec)
                == (msg.header.stamp.sec, msg.header.stamp.nanosec)
                and all(np.asarray(getattr(msg, f), np.float64).tobytes()
                        == layout.array(raw, f).tobytes() for f in FIELDS))
        self._templates = (((layout, mapping, shape),) + kept)[:TEMPLATES] if same else kept

    def _model_index(self, names):
        """(each model joint's place in `names`, -1 where absent, None if `names` are the model's
        joints in its order; the absent joints; the mimic relations of those that follow a
        leader), or ValueError if a required joint is absent.
        Kept with the names it was made for: an in-place message of another layout must never
        be read with the absent joints of the last names seen."""
        position = {name: i for i, name in enumerate(names)}
        missing = [j for j in self.required if j not in position]
        if missing:
            raise ValueError(f'joints {missing} of the model are missing')
        index = np.array([position.get(j, -1) for j in self.joint_names], dtype=np.intp)
        absent = tuple(np.flatnonzero(index < 0).tolist())
        if len(names) == len(index) and np.array_equal(index, np.arange(len(index))):
            return None, (), ()  # the model's order: no copy by index (`_take_arrays`)
        return index, absent, tuple(r for r in self.mimic if r[0] in absent)


    def _store(self, q, qd, now, stamp_ns, wall_ns=None):
        """Write a checked state: q, the velocity in use (measured, estimated or none).
        now, wall_ns: its arrival on the tick's clock [s] and the stamps' [ns] (None: now)."""
        if self.timing is not None:
            qd = self.timing.on_state(q, NO_VELOCITY if qd is None else qd, stamp_ns,
                                      self._wall_ns() if wall_ns is None else wall_ns, now)
        self.q[:] = q
        self.qd[:] = 0.0 if qd is None else qd
        self.measured_velocity = self.timing is not None and not self.timing.estimating
        self.time, self.valid = now, True



def _learning(state_ref, wake):
    """The learner thread of a JointStateInput (`state_ref`, a weak reference: the thread
    ends once the input is gone): learns each layout handed over, waiting for `wake`."""
    while True:
        woken = wake.wait(LEARNER_IDLE)
        state = state_ref()
        if state is None:
            return
        if woken:
            wake.clear()
            state._learn_pending()
        del state


def _fill_absent(q, qd, absent, followed):
    """Uncontrolled joints the names lack, in place: at their mimic relation, else 0."""
    for i in absent:
        q[i] = 0.0
        if qd is not None:
            qd[i] = 0.0
    for i, leader, multiplier, offset in followed:  # leaders first
        q[i] = multiplier * q[leader] + offset
        if qd is not None:
            qd[i] = multiplier * qd[leader]


def trajectory_arrays(msg):
    """The `wire.TrajectoryArrays` of a rclpy JointTrajectory, cheaply: one pass over the
    points; each point's arrays are passed as they are (array.array rows), for `plan_arrays`
    to check and stack in numpy."""
    points = msg.points
    times = np.fromiter((p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec
                         for p in points), np.float64, len(points))
    rows = [[getattr(p, field) for p in points]
            for field in ('positions', 'velocities', 'accelerations')]
    velocities, accelerations = (row if any(len(r) for r in row) else None for row in rows[1:])
    stamp = msg.header.stamp
    return wire.TrajectoryArrays(stamp.sec * 1_000_000_000 + stamp.nanosec,
                                 list(msg.joint_names), times, rows[0], velocities,
                                 accelerations)


def plan_trajectory_arrays(arrays, cfg, current, now, start):
    """The reference replacing the current one: `arrays` (wire.TrajectoryArrays) checked,
    within the arm's limits, and planned from `current` (3, m) at `now` [s], its points
    from `start` [s] (None: now)."""
    check_names(arrays.names)
    return plan_arrays(arrays.names, arrays.times, arrays.positions, arrays.velocities,
                       arrays.accelerations, joint_names=cfg.joints,
                       position_limits=cfg.model.position_limits[cfg.index], current=current,
                       now=now, start_time=start, allow_partial=cfg.allow_partial,
                       limits=trajectory_limits(cfg))


def trajectory_limits(cfg):
    """What the arm can do (trajectory.Limits): the URDF's velocity limits and the effort
    limits in force, through the config's model (armature, payload, links), with
    `trajectory_limit_margin`."""
    return Limits(cfg.model.velocity_limits[cfg.index], cfg.effort_limits,
                  float(cfg.values['trajectory_limit_margin']), cfg.model, cfg.index)


def wrench(msg, model):
    """{frame_id: [fx, fy, fz, mx, my, mz]} of a WrenchStamped, or ValueError / ModelError."""
    f, m = msg.wrench.force, msg.wrench.torque
    w = np.array([f.x, f.y, f.z, m.x, m.y, m.z])
    model.link_frame(msg.header.frame_id)
    if not np.all(np.isfinite(w)):
        raise ValueError(f'non-finite wrench {w.tolist()}')
    return {msg.header.frame_id: w}


def model_from_description(urdf, warn=None):
    """The RobotModel of a URDF text, checked by the dynamics layer (UrdfError / ModelError
    saying what is wrong). Its DescriptionWarnings go to `warn(text)` if given, else nowhere.
    (The controlled joints' effort limits are checked with the parameters: law.py.)"""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always', DescriptionWarning)
        model = RobotModel.from_urdf_string(urdf)
    for warning in caught:
        if warn is not None and issubclass(warning.category, DescriptionWarning):
            warn(str(warning.message))
    lower, upper = model.position_limits.T
    if np.any(lower > upper):
        raise ModelError('a joint has a lower position limit above its upper one')
    return model

