"""`~/joint_trajectory` taken off the control thread, in pieces that give the lock back.

The topic is subscribed by a helper node (`<node>_trajectory`, no global ROS arguments, the
topic spelled out under the controller's name) spun by its own executor in its own thread:
reading and planning run there, and the tick only swaps the planned trajectory in (O(1)), if
the reference it was planned from is still the current one. The interpreter's switch interval
is shortened so that the tick gets the GIL back within about half a millisecond, and nothing
here holds the lock much longer than that: the subscription takes the message's bytes (raw),
`wire.read_trajectory` reads their numbers where they lie, without an object per point,
planning and the limits' checks go in blocks (`trajectory.plan_arrays`).
Before (issue 45), rclpy's deserialization, and the collections its objects set off, made the
loop wait 100-124 ms after a 10,000-point trajectory in a fuzz; `./run bench intake` measures
the loop's worst gap with and without such inputs.
"""
import sys
import time

import numpy as np
import rclpy
from trajectory_msgs.msg import JointTrajectory

from rnea_controller import wire
from rnea_controller.control.trajectory import check_limits, Trajectory
from rnea_controller.errors import TrajectoryError
from rnea_controller.ros import inputs, realtime

SWITCH_INTERVAL = 0.0005  # [s] the GIL is handed over at least this often


class TrajectoryIntake:
    """Receives and plans trajectories in its own thread; `swap_in(say)` is called by the tick."""

    def __init__(self, controller):
        self.controller = controller
        self.pending = None  # (planned trajectory, the trajectory it was planned from, msg)
        self.store = wire.default_typestore()
        self.store.get_msgdef(wire.JOINT_TRAJECTORY)  # rosbags compiles its reader now
        # the limits' check kernel loaded now, not at the first trajectory (in the loop's time)
        check_limits(Trajectory.hold(np.zeros(len(controller.config.joints))),
                     inputs.trajectory_limits(controller.config), controller.config.joints)
        sys.setswitchinterval(SWITCH_INTERVAL)
        base = controller.get_fully_qualified_name().rstrip('/')
        self.node = rclpy.create_node(controller.get_name() + '_trajectory',
                                      namespace=controller.get_namespace(),
                                      context=controller.context, use_global_arguments=False)
        self.node.create_subscription(JointTrajectory, base + '/joint_trajectory',
                                      self._on_trajectory, 100, raw=True)  # bursts kept
        self.spinner = realtime.BackgroundSpinner(self.node, 'intake')

    def _on_trajectory(self, raw):
        """Read the message's bytes and plan from the current reference, or refuse with the
        reason (logged, counted)."""
        node = self.controller
        try:
            t0 = time.perf_counter()
            arrays = wire.read_trajectory(raw, self.store)
            based_on = node.trajectory
            if node.mode in ('unconfigured', 'inactive', 'finished') or based_on is None:
                raise TrajectoryError(f'controller is {node.mode}: no trajectory accepted')
            planned, now, _ = node._plan(arrays, based_on)
        except (TrajectoryError, ValueError, TypeError) as error:
            return node._reject('joint_trajectory', error)
        self.pending = (planned, based_on, len(arrays.times), now, time.perf_counter() - t0)

    def swap_in(self, say):
        """At the start of a tick: the planned trajectory replaces the reference it was planned
        from; if the reference changed meanwhile (a stale state, an action goal), refused.
        say(level, text): the tick's log (its lines go out after its command)."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        planned, based_on, count, now, seconds = pending
        node = self.controller
        if node.trajectory is not based_on:
            return node._reject('joint_trajectory', 'the reference changed while it was '
                                'planned (stale state or another trajectory): send it again',
                                say)
        node.trajectory = planned
        say('info', f'trajectory accepted: {count} points, ends in '
                    f'{planned.end_time - now:.3f} s (intake {seconds * 1e3:.2f} ms)')

    def destroy(self):
        self.spinner.stop()
        self.node.destroy_node()
