"""`<node>/follow_joint_trajectory` and `<node>/controller_state`, as joint_trajectory_controller.

The FollowJointTrajectory action server and the JointTrajectoryControllerState publisher of a
ControllerNode run on their own rclpy node (`<node>_action`, no global ROS arguments, entity
names spelled out under the controller's name) spun by their own executor in their own thread,
so that no control tick waits on a goal's validation, feedback or result; a goal request is
taken without rclpy building its points (`_ActionServer`, ros/raw_goal.py), its trajectory read
as the topic's. The tick touches this module twice, both O(1): `swap_in()` takes a trajectory
prepared here (planned by the topic path's own `ControllerNode._plan`, from the
reference the node had at that instant), and
`leave_snapshot()` copies (desired, actual, effort) into a buffer under a sequence counter
(a seqlock: the reader retries a torn copy) from which feedback and controller_state are built;
the tick leaves it once `wanted` (from the first goal or the first controller_state
subscriber on: until then nobody reads it). While a goal's trajectory runs and before its end,
the tick also keeps each joint's worst error (`goal.keep_worst`, one compiled call) in one of
two windows; the monitor reads both and asks the tick to open the other (the window it asks to
start over holds what the monitor has already read), so every tick's error is judged once the
monitor runs, however late.

Semantics (ros2_controllers kilted, joint_trajectory_controller.cpp; rules in control/goal.py):
an invalid goal is rejected when received, its reason logged; an accepted goal preempts the
running one (ABORTED, INVALID_GOAL, "Current goal preempted by new incoming action."); feedback
and the outcome are evaluated at `action_monitor_rate` [Hz] on the newest snapshot, the path
tolerance also on the worst error of every tick since the last evaluation (JTC checks it at
every update: a monitor starved for a whole short goal saw only its end, and reported success);
PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED and cancel (CANCELED) hold the measured
position; success holds the last point. Beyond JTC: a trajectory on ~/joint_trajectory, or the
node dropping the trajectory (stale joint states; braking: a joint beyond its velocity limit),
ends the goal ABORTED with INVALID_GOAL and the reason; deactivation ends it as JTC ("Current
goal cancelled during deactivate transition."). controller_state is published at
`state_publish_rate` [Hz] while it has subscribers.
"""
import gc
import sys
import threading
import time

from action_msgs.msg import GoalInfo
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTrajectoryControllerState
import numpy as np
import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.executors import await_or_execute
from rclpy.task import Future
from trajectory_msgs.msg import JointTrajectoryPoint

from rnea_controller import wire
from rnea_controller.control import goal as rules
from rnea_controller.control.trajectory import Trajectory
from rnea_controller.errors import TrajectoryError
from rnea_controller.ros import inputs, raw_goal, realtime

Result = FollowJointTrajectory.Result
#: [s] longest time the tick's thread waits for the GIL held by this thread (Python's default,
#: 5 ms, is five control periods); see bench/bench_action.py.
SWITCH_INTERVAL = 2e-4


class Goal:
    """One accepted goal: its handle, trajectory, monitor and the future its execution awaits."""

    def __init__(self, handle, trajectory, monitor, based_on=None):
        self.handle = handle
        self.trajectory = trajectory
        self.based_on = based_on  # the node's trajectory it was planned from
        self.monitor = monitor
        self.done = Future()

    def end(self, how, code, text):
        """Resolve the goal: how is 'succeed', 'abort' or 'canceled'."""
        if not self.done.done():
            self.done.set_result((how, Result(error_code=code, error_string=text)))


class TrajectoryActionServer:
    """The action server and state publisher of `controller` (an active ControllerNode).

    values: its parameter values, for the rates; the tolerances' defaults are read from the
    newest config at each goal (constraints.* may change at any time; one set before a goal
    applies to it even if no tick has swapped it in yet).
    """

    def __init__(self, controller, values):
        self.controller = controller
        self.joints = list(controller.config.joints)
        base = controller.get_fully_qualified_name().rstrip('/')
        self.node = rclpy.create_node(controller.get_name() + '_action',
                                      namespace=controller.get_namespace(),
                                      context=controller.context, use_global_arguments=False)
        self.log = controller.get_logger()
        self._snap = np.zeros((6, len(self.joints)))  # ref (3 rows), q, qd, tau
        self._snap_ns, self._seq = 0, 0
        self._worst = np.zeros((2, 3, len(self.joints)))  # two windows of the worst errors
        self._windows = (self._worst[0], self._worst[1])
        self._epoch = self._flip = 0  # the tick's window (parity), the monitor's request
        self._path = None  # (trajectory, end [ns]) whose path errors the tick keeps, or None
        rules.keep_worst(self._windows[0], self._snap, True)  # compiled (or loaded) here
        self.wanted = False  # the tick leaves snapshots from the first goal or subscriber on
        self._pending, self._active, self._planned = None, None, None
        # the goals' trajectories are read as the topic's (the intake's reader, when there)
        self._store = getattr(getattr(controller, 'intake', None), 'store', None) \
            or wire.default_typestore()
        self.state_pub = self.node.create_publisher(
            JointTrajectoryControllerState, base + '/controller_state', 10,
            event_callbacks=PublisherEventCallbacks(matched=self._on_state_matched))
        self.server = _ActionServer(
            self.node, FollowJointTrajectory, base + '/follow_joint_trajectory',
            execute_callback=self._execute, goal_callback=self._on_goal,
            handle_accepted_callback=self._on_accepted, cancel_callback=self._on_cancel,
            store=self._store)
        if not self.server.taker.usable:
            self.log.warning(f'action goals are taken by rclpy ({self.server.taker.reason}): '
                             'while it builds a long goal the loop waits (4 ms at 10,000 '
                             'points)')
        # both timers run only while needed: each callback of rclpy's executor costs ~1 ms here
        self._monitor_timer = self.node.create_timer(
            1.0 / _rate(values, 'action_monitor_rate', 20.0),
            realtime.timer_callback(self._monitor), autostart=False)
        self._state_timer = self.node.create_timer(
            1.0 / _rate(values, 'state_publish_rate', 50.0),
            realtime.timer_callback(self._publish_state), autostart=False)
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
        self.spinner = realtime.BackgroundSpinner(self.node, 'action')

    # --- called by the tick (O(1), never blocks) ------------------------------------------

    def swap_in(self):
        """Put a trajectory prepared here in place, if the node's is still the one it was
        planned from (else the node replaced it meanwhile; the monitor ends the goal)."""
        pending = self._pending
        if pending is not None:
            self._pending = None
            if self.controller.trajectory is pending[1]:
                self.controller.trajectory = pending[0]
                self._seq += 1
                self._worst[:] = 0.0
                self._path = pending[2]
                self._seq += 1

    def leave_snapshot(self, ref_ns, ref, q, qd, index, tau):
        """Copy this tick's reference (3, m) for instant ref_ns [ns], the measured q, qd (n,)
        at the controlled joints' model `index` and the command tau [N·m] for the action;
        before the running goal's end, its worst errors (`keep_worst`)."""
        self._seq += 1
        self._snap[0:3] = ref
        self._snap[3] = q[index]  # (np.take with out= costs 3x this)
        self._snap[4] = qd[index]
        self._snap[5] = tau
        self._snap_ns = ref_ns
        path = self._path
        if path is not None and ref_ns < path[1] and self.controller.trajectory is path[0]:
            reset = self._flip != self._epoch
            self._epoch = self._flip
            rules.keep_worst(self._windows[self._epoch % 2], self._snap, reset)
        self._seq += 1

    # --- the action's thread ----------------------------------------------------------------

    def snapshot(self):
        """(ref_ns, copy of the snapshot (6, m)) as one tick left it, or None before any."""
        for _ in range(100):
            seq = self._seq
            if seq % 2 == 0:
                data, ns = self._snap.copy(), self._snap_ns
                if self._seq == seq:
                    return (ns, data) if seq else None
            time.sleep(0)
        return None

    def path_errors(self, trajectory):
        """The worst errors (3, m) of the ticks that followed `trajectory` before its end
        since the last call, or None (no tick kept them for it: not yet swapped in)."""
        for _ in range(100):
            seq = self._seq
            if seq % 2 == 0:
                worst, epoch, path = self._worst.copy(), self._epoch, self._path
                if self._seq == seq:
                    break
            time.sleep(0)
        else:
            return None
        if path is None or path[0] is not trajectory:
            return None
        self._flip = epoch + 1  # the tick starts the other window over: this one is read
        return np.where(np.abs(worst[1]) > np.abs(worst[0]), worst[1], worst[0])

    def _plan(self, arrays):
        """Validate the goal's trajectory (`wire.TrajectoryArrays`) and plan it from the
        node's reference now, with the topic's own `ControllerNode._plan`. Returns
        (trajectory, based_on, absolute point times [s])."""
        node = self.controller
        based_on = node.trajectory
        if node._timer is None or based_on is None:
            raise TrajectoryError(f'controller is {node.mode}: no goal accepted')
        final = arrays.velocities[-1] if (arrays.velocities is not None
                                          and len(arrays.times)) else ()
        rules.check_goal_trajectory(arrays.names, final, False)
        trajectory, _, start = node._plan(arrays, based_on)
        return trajectory, based_on, start + np.asarray(arrays.times, dtype=float)

    def _on_goal(self, request):
        """Validate as JTC (plus finite values and position limits): ACCEPT or REJECT.
        `request`: a `raw_goal.TakenGoal` (its trajectory's bytes read as the topic's are), or
        the Goal message where rclpy took it (`_ActionServer`)."""
        self._planned = None
        self.wanted = True
        try:
            cdr = getattr(request, 'trajectory_cdr', None)
            goal = request if cdr is None else request.goal
            multi = goal.multi_dof_trajectory
            rules.check_goal_trajectory((), (), bool(multi.joint_names or multi.points))
            arrays = (inputs.trajectory_arrays(goal.trajectory) if cdr is None
                      else wire.read_trajectory(cdr, self._store))
            self._planned = (goal, *self._plan(arrays))
        except (TrajectoryError, ValueError, TypeError) as error:
            self.log.error(f'action goal rejected: {error}')
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_accepted(self, handle):
        """Preempt the running goal, hand the planned trajectory to the tick, start executing."""
        request, trajectory, based_on, times = self._planned
        self._planned = None
        if self._active is not None:
            self._active.end('abort', rules.INVALID_GOAL, rules.PREEMPTED_TEXT)
        # the newest config: a parameter set accepted before this goal applies to it, even
        # if no tick has swapped it in yet (a starved loop)
        config = self.controller._pending or self.controller.config
        defaults = rules.default_tolerances(config.values, self.joints)
        tolerances, reason = rules.goal_tolerances(
            defaults, self.joints,
            [(t.name, t.position, t.velocity, t.acceleration) for t in request.path_tolerance],
            [(t.name, t.position, t.velocity, t.acceleration) for t in request.goal_tolerance],
            request.goal_time_tolerance.sec + request.goal_time_tolerance.nanosec * 1e-9)
        if reason:
            self.log.error(f'action goal: {reason}')
        end_ns = self.controller._t0_ns + round(times[-1] * 1e9)
        self._pending = (trajectory, based_on, (trajectory, end_ns))
        self._active = Goal(handle, trajectory, rules.GoalMonitor(tolerances, times, self.joints),
                            based_on)
        self.log.info(f'action goal accepted: {len(times)} points, ends in '
                      f'{times[-1] - self.controller._seconds(self.controller._now_ns()):.3f} s')
        if self._monitor_timer.is_canceled():  # a running one keeps its phase (preemption)
            self._monitor_timer.reset()  # stopped again by the monitor once no goal runs
        handle.execute()

    async def _execute(self, handle):
        """Await the goal's end (decided by the monitor, a cancel or a new goal)."""
        goal = self._active
        if goal is None or goal.handle is not handle:
            handle.abort()
            return Result(error_code=rules.INVALID_GOAL, error_string=rules.PREEMPTED_TEXT)
        how, result = await goal.done
        if how == 'canceled' and not handle.is_cancel_requested:
            how = 'abort'
        getattr(handle, how)()
        if self._active is goal:
            self._active = None
        return result

    def _on_cancel(self, handle):
        """Cancel the running goal: hold the measured position (JTC accepts every request)."""
        goal = self._active
        if goal is not None and bytes(goal.handle.goal_id.uuid) == bytes(handle.goal_id.uuid):
            self._hold_measured()
            goal.end('canceled', rules.SUCCESSFUL, '')
            self.log.info('action goal canceled: holding the measured position')
        return CancelResponse.ACCEPT

    def _hold_measured(self):
        """Hand the tick a hold of the newest measured position (JTC's set_hold_position)."""
        snap = self.snapshot()
        if snap is not None:
            node = self.controller
            hold = Trajectory.hold(snap[1][3], node._seconds(node._now_ns()))
            self._pending = (hold, node.trajectory, None)

    def _replaced(self, goal):
        """Why the node's trajectory is no longer the goal's (None: it still is)."""
        pending = self._pending  # read before the node's: the tick may swap in between
        if (pending is not None and pending[0] is goal.trajectory) or (
                self.controller.trajectory is goal.trajectory):
            return None
        loop = self.controller.loop
        dropped = loop.modes.dropped if loop is not None else None
        if dropped is not None and (dropped[0] is goal.trajectory or dropped[0] is goal.based_on):
            return f'Aborted: the controller dropped the trajectory ({dropped[1]})'
        if self.controller.mode.startswith(('stale', 'braking')) or (
                self.controller.trajectory is None):
            return f'Aborted: the controller dropped the trajectory ({self.controller.mode})'
        return 'Current goal preempted by a trajectory on ~/joint_trajectory.'

    def _monitor(self):
        """At action_monitor_rate: feedback, then the goal's outcome (control/goal.py)."""
        goal, snap = self._active, self.snapshot()
        if goal is None or goal.done.done():
            return self._monitor_timer.cancel()
        if snap is None:
            return
        reason = self._replaced(goal)
        if reason:
            self.log.warning(reason)
            return goal.end('abort', rules.INVALID_GOAL, reason)
        ns, data = snap
        t = self.controller._seconds(ns)
        desired, actual = data[0:3], np.vstack([data[3:5], np.zeros(len(self.joints))])
        goal.handle.publish_feedback(self._feedback(ns, data, goal.monitor.index(t)))
        outcome = goal.monitor.update(t, desired, actual, self.path_errors(goal.trajectory))
        if outcome is None:
            return
        code, text = outcome
        if code == rules.SUCCESSFUL:
            self.log.info('action goal reached, success')
            return goal.end('succeed', code, text)
        self.log.warning(f'{text}: {goal.monitor.detail}; holding the measured position')
        self._hold_measured()
        goal.end('abort', code, text)

    def _points(self, data):
        """(reference, feedback, error, output) JointTrajectoryPoints of a snapshot."""
        ref, q, qd, tau = data[0:3], data[3], data[4], data[5]
        return (JointTrajectoryPoint(positions=ref[0].tolist(), velocities=ref[1].tolist(),
                                     accelerations=ref[2].tolist()),
                JointTrajectoryPoint(positions=q.tolist(), velocities=qd.tolist()),
                JointTrajectoryPoint(positions=(ref[0] - q).tolist(),
                                     velocities=(ref[1] - qd).tolist()),
                JointTrajectoryPoint(effort=tau.tolist()))

    def _feedback(self, ns, data, index):
        desired, actual, error, _ = self._points(data)
        feedback = FollowJointTrajectory.Feedback(
            joint_names=self.joints, desired=desired, actual=actual, error=error, index=index)
        feedback.header.stamp.sec, feedback.header.stamp.nanosec = divmod(ns, 1_000_000_000)
        return feedback

    def _on_state_matched(self, info):
        """controller_state is published while it has subscribers (its timer runs then)."""
        if info.current_count > 0:
            self.wanted = True
            self._state_timer.reset()
        else:
            self._state_timer.cancel()

    def _publish_state(self):
        """~/controller_state from the newest snapshot (stamped with the reference's instant)."""
        snap = self.snapshot()
        if snap is None:
            return
        ns, data = snap
        reference, feedback, error, output = self._points(data)
        msg = JointTrajectoryControllerState(
            joint_names=self.joints, reference=reference, feedback=feedback, error=error,
            output=output, speed_scaling_factor=1.0)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(ns, 1_000_000_000)
        self.state_pub.publish(msg)

    # --- end ----------------------------------------------------------------------------------

    def destroy(self, timeout=1.0):
        """End a running goal as JTC does on deactivate, deliver its result, stop the thread."""
        ended = threading.Event()

        def end_active():
            if self._active is not None:
                self._active.end('abort', rules.INVALID_GOAL, rules.DEACTIVATED_TEXT)
            ended.set()
        self.spinner.executor.create_task(end_active)
        ended.wait(timeout)
        deadline = time.monotonic() + timeout
        while self._active is not None and time.monotonic() < deadline:
            time.sleep(0.01)  # the execute coroutine returns the result, the server sends it
        time.sleep(0.05)
        self.spinner.stop(timeout)
        self.server.destroy()
        self.node.destroy_node()


class _ActionServer(ActionServer):
    """rclpy's ActionServer whose goal requests are taken by `raw_goal.GoalTaker` (issue 45):
    the C calls without the interpreter's lock, the points as the middleware's bytes, read
    in pieces by `_on_goal` (rclpy built a 10,000-point goal's 30,000 objects in one call,
    the loop waiting 3.5-5 ms; `./run bench intake`), and the response sent back to the
    request id taken with it. Where the taker is not usable (`GoalTaker.reason`), rclpy
    takes the request, with the garbage collector paused and the goal frozen once built (a
    collection that ran while rclpy built it scanned them all, holding the lock: the loop
    waited 30-70 ms; frozen objects are still freed when the goal is dropped). Cancel and
    result requests are rclpy's."""

    # what this class uses of rclpy's ActionServer (kilted's; jazzy's has the same)
    _RCLPY_PARTS = ('_goal_handles', '_result_futures', '_lock', '_logger', '_goal_callback',
                    '_handle_accepted_callback', '_action_type', '_node', 'add_future',
                    '_execute_goal_request')

    def __init__(self, *args, store=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.taker = raw_goal.GoalTaker(store)
        missing = [name for name in self._RCLPY_PARTS if not hasattr(self, name)]
        if not hasattr(self._handle, 'pointer'):
            missing.append('_handle.pointer')
        if missing and self.taker.usable:
            self.taker.usable = False
            self.taker.reason = f"this rclpy's ActionServer lacks {', '.join(missing)}"

    def take_data(self):
        if not self.taker.usable:
            with wire.collection_paused():
                data = super().take_data()
                if 'goal' in data:
                    gc.freeze()
            return data
        taken = None
        if self._is_goal_request_ready:
            with self._lock:
                taken = self.taker.take(self._handle)
            self._is_goal_request_ready = False  # taken here: rclpy's take_data skips it
        data = super().take_data()
        if taken is not None and isinstance(taken[1], Exception):
            self._refuse(*taken)
        elif taken is not None and taken[0] is not None:
            data['goal'] = taken
        return data

    def _refuse(self, header, error):
        """Answer a goal request that could not be read: rejected, the reason logged."""
        self._node.get_logger().error(f'action goal rejected: the request could not be read '
                                      f'({type(error).__name__}: {error})')
        answer = self._action_type.Impl.SendGoalService.Response(accepted=False)
        with self._lock:
            self.taker.respond(self._handle, header, answer)

    async def _execute_goal_request(self, request_header_and_message):
        """rclpy's (kilted, rclpy/action/server.py) for a request `GoalTaker.take` took: the
        goal callback gets the TakenGoal, the goal handle its Goal message, and the answer
        goes back through the taker."""
        header, request = request_header_and_message
        if not isinstance(header, raw_goal.RequestId):
            return await super()._execute_goal_request(request_header_and_message)
        goal_info = GoalInfo()
        goal_info.goal_id = request.goal_id
        with self._lock:
            exists = self._handle.goal_exists(goal_info)
        accepted = False
        if not exists:
            response = await await_or_execute(self._goal_callback, request)
            accepted = response == GoalResponse.ACCEPT
        if accepted:
            goal_info.stamp = self._node.get_clock().now().to_msg()
            try:
                with self._lock:
                    goal_handle = ServerGoalHandle(self, goal_info, request.goal)
            except RuntimeError as error:
                self._logger.error(f'Failed to accept new goal with ID '
                                   f'{request.goal_id.uuid}: {error}')
                accepted = False
            else:
                uuid = bytes(request.goal_id.uuid)
                self._goal_handles[uuid] = goal_handle
                self._result_futures[uuid] = Future()
                self.add_future(self._result_futures[uuid])
        answer = self._action_type.Impl.SendGoalService.Response(accepted=accepted,
                                                                 stamp=goal_info.stamp)
        with self._lock:
            sent = self.taker.respond(self._handle, header, answer)
        if not sent:
            self._logger.warning('Failed to send goal response (the client may have gone away)')
            return
        if not accepted:
            return
        self._handle.publish_status()
        await await_or_execute(self._handle_accepted_callback, goal_handle)


def _rate(values, name, default):
    """A rate parameter [Hz] (None or missing: JTC's default)."""
    value = values.get(name)
    return float(default if value is None else value)
