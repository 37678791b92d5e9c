"""Goal requests taken without rclpy building their points (ros/raw_goal.py, issue 45).

A real rclpy ActionClient sends FollowJointTrajectory goals over DDS (in this process) to the
node's action server class (`action_server._ActionServer`), which takes them through
`raw_goal.GoalTaker`. Oracles: rclpy's own reading of the taken trajectory's bytes (the
goal's trajectory as sent), the message fields as sent, and the client's own
view of the answer (accepted or rejected as the server decided; an accepted goal's result).
"""
import threading
import time

from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance
import numpy as np
import pytest
import rclpy
from rclpy.action import ActionClient, GoalResponse
from rclpy.executors import SingleThreadedExecutor
from rclpy.serialization import deserialize_message
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from rnea_controller import wire
from rnea_controller.ros import raw_goal
from rnea_controller.ros.action_server import _ActionServer

pytestmark = pytest.mark.integration

JOINTS = ['shoulder', 'elbow', 'wrist']


def a_goal(points, mixed=False):
    """A goal of `points` points with a stamp, a frame, tolerances and a goal time; `mixed`:
    only every other point has velocities (points of two shapes)."""
    rng = np.random.default_rng(points)
    trajectory = JointTrajectory(joint_names=JOINTS, points=[
        JointTrajectoryPoint(
            positions=rng.normal(size=3).tolist(),
            velocities=rng.normal(size=3).tolist() if not mixed or k % 2 else [],
            time_from_start=Duration(sec=k // 100, nanosec=(k % 100) * 10_000_000))
        for k in range(1, points + 1)])
    trajectory.header.stamp.sec, trajectory.header.stamp.nanosec = 12, 345
    trajectory.header.frame_id = 'base_link'
    return FollowJointTrajectory.Goal(
        trajectory=trajectory,
        path_tolerance=[JointTolerance(name='elbow', position=0.1, velocity=0.2)],
        goal_tolerance=[JointTolerance(name='wrist', position=0.01, acceleration=3.0)],
        goal_time_tolerance=Duration(sec=1, nanosec=500_000_000))


@pytest.fixture
def server_and_client():
    """(requests the server's goal callback saw, the client, the executor's nodes): the
    server accepts a goal of more than 100 points, rejects the others."""
    rclpy.init()
    server_node = rclpy.create_node('raw_goal_server')
    # the second node without /rosout (ros2/rclcpp#2147: its rosout writer, made under rcl's
    # logging mutex, can deadlock with discovery's logging in Fast DDS; test_node's stand-in)
    client_node = rclpy.create_node('raw_goal_client', enable_rosout=False)
    seen = []

    def on_goal(request):
        seen.append(request)
        return (GoalResponse.ACCEPT if len(wire.read_trajectory(
            request.trajectory_cdr, wire.default_typestore()).times) > 100
            else GoalResponse.REJECT)

    def execute(handle):
        handle.succeed()
        return FollowJointTrajectory.Result(error_string='done')

    server = _ActionServer(server_node, FollowJointTrajectory, '/raw_goal/follow',
                           goal_callback=on_goal, execute_callback=execute)
    client = ActionClient(client_node, FollowJointTrajectory, '/raw_goal/follow')
    executor = SingleThreadedExecutor()
    executor.add_node(server_node)
    executor.add_node(client_node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        assert client.wait_for_server(timeout_sec=20.0), 'the action server was not found'
        yield server, seen, client
    finally:
        executor.shutdown()
        thread.join(5.0)
        client.destroy()
        server.destroy()
        rclpy.shutdown()


def wait(future, timeout=20.0):
    end = time.monotonic() + timeout
    while not future.done() and time.monotonic() < end:
        time.sleep(0.01)
    assert future.done(), 'no answer in time'
    return future.result()


def test_the_taker_is_usable_with_this_rclpy():
    taker = raw_goal.GoalTaker()
    assert taker.usable, taker.reason


@pytest.mark.parametrize('points, mixed', [(2000, False), (301, True), (5, False)],
                         ids=['2,000 uniform points', 'points of two shapes', '5 points'])
def test_a_taken_goal_is_the_goal_sent_and_is_answered(server_and_client, points, mixed):
    server, seen, client = server_and_client
    assert server.taker.usable, server.taker.reason
    sent = a_goal(points, mixed)
    handle = wait(client.send_goal_async(sent))
    assert len(seen) == 1
    taken = seen[0]
    assert isinstance(taken, raw_goal.TakenGoal)
    # the trajectory: bytes rclpy reads as what was sent (not compared byte by byte: the
    # middleware leaves its alignment padding unset)
    assert deserialize_message(taken.trajectory_cdr, JointTrajectory) == sent.trajectory
    arrays = wire.read_trajectory(taken.trajectory_cdr, wire.default_typestore())
    assert arrays.names == JOINTS and len(arrays.times) == points
    assert np.array_equal(np.vstack(arrays.positions),
                          np.array([p.positions for p in sent.trajectory.points]))
    # the rest, converted without the points
    assert taken.goal.trajectory.points == []
    assert taken.goal.trajectory.joint_names == JOINTS
    assert taken.goal.trajectory.header == sent.trajectory.header
    for field in ('path_tolerance', 'goal_tolerance', 'goal_time_tolerance',
                  'multi_dof_trajectory'):
        assert getattr(taken.goal, field) == getattr(sent, field), field
    assert bytes(taken.goal_id.uuid) == bytes(handle.goal_id.uuid)
    # the answer reached the client: accepted (then executed to its result) or rejected
    assert handle.accepted == (points > 100)
    if handle.accepted:
        result = wait(handle.get_result_async())
        assert result.status == GoalStatus.STATUS_SUCCEEDED
        assert result.result.error_string == 'done'


def test_a_goal_that_cannot_be_read_is_answered_rejected_and_the_server_goes_on(
        server_and_client, monkeypatch):
    server, seen, client = server_and_client
    read = server.taker.read

    def unreadable(c):  # as when the middleware cannot serialize the trajectory
        raise RuntimeError("the goal's trajectory could not be serialized")
    monkeypatch.setattr(server.taker, 'read', unreadable)
    handle = wait(client.send_goal_async(a_goal(200)))
    assert not handle.accepted and seen == []
    monkeypatch.setattr(server.taker, 'read', read)
    handle = wait(client.send_goal_async(a_goal(200)))  # the next goal is served
    assert handle.accepted and len(seen) == 1
