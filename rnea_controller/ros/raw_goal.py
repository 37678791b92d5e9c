"""A FollowJointTrajectory goal request taken without rclpy building its points (issue 45).

rclpy's ActionServer takes a goal request and turns it whole into Python objects, holding the
interpreter's lock throughout: for a 10,000-point goal some 30,000 objects, 3.5-5 ms in which
the control tick cannot run. Here the same request is taken through rcl_action's own C calls
(rcl_action_take_goal_request, rmw_serialize: ctypes gives the lock back while C runs), into
the C message rclpy would have converted:

- its trajectory is serialized by the middleware (as a JointTrajectory on the topic would
  arrive), and read where its numbers lie, in pieces that give the lock back, by the topic's
  own reader (`wire.read_trajectory`);
- the rest (goal id, header, joint names, the multi-DOF part, tolerances) is converted by the
  message's own generated function with the points' count set to 0 for that one call.

Everything comes from the libraries rclpy itself runs on (its extension module's symbols) and
the messages' generated type support; the one layout fact used, where the trajectory's points
lie in the C request, is checked at start on a request built by the type support itself
(`GoalTaker.usable`), and where anything is not as expected the server keeps rclpy's own path.
The request id stays an opaque buffer, passed back to rcl_action_send_goal_response.
"""
import ctypes

from control_msgs.action import FollowJointTrajectory
import numpy as np
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.serialization import deserialize_message
from rclpy.type_support import check_for_type_support
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from rnea_controller import wire

# rcl_action's SendGoal_Request: goal_id (uint8[16]), then the Goal, whose first field is the
# JointTrajectory: header (stamp 8 bytes + a string: 3 words), joint_names (a sequence: data,
# size, capacity), points (data, size, capacity). Checked at start (`_layout_holds`).
TRAJECTORY = 16  # [bytes] the trajectory in the request
POINTS = TRAJECTORY + 8 + 3 * 8 + 3 * 8  # the points' sequence in the request
REQUEST_ID = 64  # [bytes] room for an rmw_request_id_t (16-byte guid + int64 in Kilted)


class _Allocator(ctypes.Structure):
    _fields_ = [('allocate', ctypes.c_void_p), ('deallocate', ctypes.c_void_p),
                ('reallocate', ctypes.c_void_p), ('zero_allocate', ctypes.c_void_p),
                ('state', ctypes.c_void_p)]


class _Bytes(ctypes.Structure):  # rcutils_uint8_array_t, rmw_serialized_message_t
    _fields_ = [('buffer', ctypes.c_void_p), ('buffer_length', ctypes.c_size_t),
                ('buffer_capacity', ctypes.c_size_t), ('allocator', _Allocator)]


class RequestId:
    """The request id rcl_action filled in (opaque bytes), for the goal's response."""

    def __init__(self):
        self.buffer = ctypes.create_string_buffer(REQUEST_ID)


class TakenGoal:
    """A goal request as `GoalTaker.take` gives it: `goal_id`, `goal` (the Goal message, its
    trajectory without points) and `trajectory_cdr` (the trajectory's serialized bytes, points
    included)."""

    def __init__(self, goal_id, goal, trajectory_cdr):
        self.goal_id, self.goal, self.trajectory_cdr = goal_id, goal, trajectory_cdr


def _capsule_pointer(capsule):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, None)


class _MessageFunctions:
    """A message class's generated create, destroy, convert_from_py, convert_to_py and type
    support (the functions rclpy calls)."""

    def __init__(self, cls):
        check_for_type_support(cls)
        meta = type(cls)
        self.create = ctypes.CFUNCTYPE(ctypes.c_void_p)(
            _capsule_pointer(meta._CREATE_ROS_MESSAGE))
        self.destroy = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
            _capsule_pointer(meta._DESTROY_ROS_MESSAGE))
        self.from_py = ctypes.PYFUNCTYPE(ctypes.c_bool, ctypes.py_object, ctypes.c_void_p)(
            _capsule_pointer(meta._CONVERT_FROM_PY))
        self.to_py = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p)(
            _capsule_pointer(meta._CONVERT_TO_PY))
        self.type_support = _capsule_pointer(meta._TYPE_SUPPORT)


class GoalTaker:
    """Takes FollowJointTrajectory goal requests of one rclpy action server and answers them.
    `usable` is False (and `reason` says why) where this rclpy or its messages are not as
    expected: the caller then keeps rclpy's own path. `store`: the rosbags type store the
    topic's reader uses (None: its own). `request`: the goal request's generated C functions
    (create, from_py, to_py, destroy; a C request for `read`, as bench_intake makes one)."""

    def __init__(self, store=None):
        self._store = store
        self.usable, self.reason = False, ''
        try:
            lib = ctypes.CDLL(_rclpy.__file__)  # rclpy's own libraries, by its module's links
            self._take = lib.rcl_action_take_goal_request
            self._send = lib.rcl_action_send_goal_response
            self._serialize = lib.rmw_serialize
            self._init_bytes, self._fini_bytes = lib.rcutils_uint8_array_init, \
                lib.rcutils_uint8_array_fini
            allocator = lib.rcutils_get_default_allocator
        except (OSError, AttributeError) as error:
            self.reason = f"rclpy's libraries lack what is needed: {error}"
            return
        for function in (self._take, self._send):
            function.restype = ctypes.c_int32
            function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self._serialize.restype = ctypes.c_int32
        self._serialize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(_Bytes)]
        self._init_bytes.restype = ctypes.c_int32
        self._init_bytes.argtypes = [ctypes.POINTER(_Bytes), ctypes.c_size_t,
                                     ctypes.POINTER(_Allocator)]
        self._fini_bytes.restype = ctypes.c_int32
        self._fini_bytes.argtypes = [ctypes.POINTER(_Bytes)]
        allocator.restype = _Allocator
        self._allocator = allocator()
        service = FollowJointTrajectory.Impl.SendGoalService
        try:
            self.request = _MessageFunctions(service.Request)
            self._response = _MessageFunctions(service.Response)
            self._trajectory = _MessageFunctions(JointTrajectory)
        except (AttributeError, TypeError, ValueError) as error:
            self.reason = f"the messages' generated functions are not as expected: {error}"
            return
        self.usable = self._layout_holds()
        if not self.usable:
            self.reason = ('the goal request is not laid out as expected (its trajectory '
                           "does not serialize as one the topic's reader reads)")

    def _layout_holds(self):
        """A request made by the type support from a known goal: at POINTS its points' count,
        at TRAJECTORY a trajectory whose bytes rclpy reads back as the same one (bytes are not
        compared: the middleware leaves its alignment padding unset), and so does
        `wire.read_trajectory`."""
        trajectory = JointTrajectory(joint_names=['a', 'bc'], points=[
            JointTrajectoryPoint(positions=[0.5 * k, -1.0], velocities=[float(k), 2.0])
            for k in range(3)])
        trajectory.header.frame_id = 'probe'
        request = FollowJointTrajectory.Impl.SendGoalService.Request()
        request.goal.trajectory = trajectory
        c = self.request.create()
        if not c:
            return False
        try:
            if not self.request.from_py(request, c):
                return False
            count = ctypes.c_size_t.from_address(c + POINTS + 8).value
            capacity = ctypes.c_size_t.from_address(c + POINTS + 16).value
            cdr = self._serialized(c + TRAJECTORY) if count == 3 and capacity >= 3 else None
            if cdr is None or deserialize_message(cdr, JointTrajectory) != trajectory:
                return False
            # and the topic's reader reads the middleware's bytes (another middleware may
            # encode otherwise: its goals would then all be refused)
            arrays = wire.read_trajectory(cdr, self._store or wire.default_typestore())
            return (arrays.names == ['a', 'bc']
                    and np.array_equal(np.vstack(arrays.positions),
                                       [p.positions for p in trajectory.points])
                    and np.array_equal(np.vstack(arrays.velocities),
                                       [p.velocities for p in trajectory.points]))
        except ValueError:
            return False
        finally:
            self.request.destroy(c)

    def _serialized(self, trajectory):
        """The CDR bytes of the C JointTrajectory at `trajectory`, or None."""
        out = _Bytes()
        if self._init_bytes(ctypes.byref(out), 0, ctypes.byref(self._allocator)) != 0:
            return None
        try:
            if self._serialize(trajectory, self._trajectory.type_support,
                               ctypes.byref(out)) != 0:
                return None
            return ctypes.string_at(out.buffer, out.buffer_length)
        finally:
            self._fini_bytes(ctypes.byref(out))

    def take(self, server):
        """(RequestId, TakenGoal) of the next goal request of `server` (rclpy's
        _rclpy.ActionServer), or (None, None) if none is there (rclpy's `take_goal_request`
        answers so too). A request taken but not readable (its trajectory not serialized)
        comes as (RequestId, the error), to be answered. The C calls run without the
        interpreter's lock."""
        c = self.request.create()
        if not c:
            raise MemoryError('no goal request message could be made')
        try:
            header = RequestId()
            if self._take(server.pointer, header.buffer, c) != 0:
                return None, None  # nothing taken (RCL_RET_ACTION_SERVER_TAKE_FAILED)
            try:
                return header, self.read(c)
            except (RuntimeError, ValueError, TypeError) as error:
                return header, error
        finally:
            self.request.destroy(c)

    def read(self, c):
        """The TakenGoal of the C goal request at address `c` (left as it was)."""
        cdr = self._serialized(c + TRAJECTORY)
        if cdr is None:
            raise RuntimeError("the goal's trajectory could not be serialized")
        points = ctypes.c_size_t.from_address(c + POINTS + 8)
        count, points.value = points.value, 0  # converted without its points ...
        try:
            request = self.request.to_py(c)
        finally:
            points.value = count  # ... and destroyed with them
        return TakenGoal(request.goal_id, request.goal, cdr)

    def respond(self, server, header, response):
        """Send `response` (a SendGoal Response message) to the request `header`; False if
        rcl_action could not (the client may have gone)."""
        c = self._response.create()
        if not c:
            raise MemoryError('no goal response message could be made')
        try:
            if not self._response.from_py(response, c):
                raise ValueError('the goal response could not be converted')
            return self._send(server.pointer, header.buffer, c) == 0
        finally:
            self._response.destroy(c)
