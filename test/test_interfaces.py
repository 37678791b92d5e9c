"""The control_msgs types built into .venv from interfaces/ carry the distribution's type hashes.

Oracle: the RIHS01 hashes of the official control_msgs 6.8.0 (Kilted), read from an official
build, in ../shared/interfaces/control_msgs_kilted_hashes.json. A mismatch would hide the
action server from MoveIt (a client built from the official package), so every type is checked:
in the generated type descriptions (share/control_msgs/**/*.json) and, for the types that go
on the wire as topics, as DDS advertises them (the endpoint's type hash seen by a peer).
"""
import json
from pathlib import Path
import sys
import time

import pytest

REPO = Path(__file__).resolve().parents[1]
OFFICIAL = REPO.parent / 'shared' / 'interfaces' / 'control_msgs_kilted_hashes.json'
if not OFFICIAL.exists():  # a worktree: shared/ is beside the main checkout
    OFFICIAL = Path('/work/shared/interfaces/control_msgs_kilted_hashes.json')


def official():
    if not OFFICIAL.exists():
        pytest.fail(f'the official hash table {OFFICIAL} is missing')
    return json.loads(OFFICIAL.read_text())['type_hashes']


def built():
    """{type name: RIHS01 hash} of every type in the installed control_msgs descriptions."""
    share = Path(sys.prefix) / 'share' / 'control_msgs'
    hashes = {}
    for path in sorted(share.glob('*/*.json')):
        for entry in json.loads(path.read_text())['type_hashes']:
            if entry['type_name'].startswith('control_msgs/'):
                hashes[entry['type_name']] = entry['hash_string']
    return hashes


def test_every_built_type_has_the_official_hash():
    want, have = official(), built()
    assert sorted(have) == sorted(want), 'built types differ from the official table'
    wrong = {name: (have[name], want[name]) for name in want if have[name] != want[name]}
    assert not wrong, f'type hashes differ from control_msgs 6.8.0: {wrong}'


def test_the_wire_carries_the_official_hashes():
    """A publisher's type hash as a peer discovers it over DDS (what MoveIt's client sees)."""
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointTrajectoryControllerState
    import rclpy

    want = official()
    rclpy.init()
    try:
        node = rclpy.create_node('hash_probe')
        topics = {'/probe_state': (JointTrajectoryControllerState,
                                   'control_msgs/msg/JointTrajectoryControllerState'),
                  '/probe_feedback': (FollowJointTrajectory.Impl.FeedbackMessage,
                                      'control_msgs/action/FollowJointTrajectory_FeedbackMessage')}
        for topic, (kind, _) in topics.items():
            node.create_publisher(kind, topic, 1)
        deadline = time.monotonic() + 5.0
        for topic, (_, name) in topics.items():
            infos = []
            while not infos and time.monotonic() < deadline:
                infos = node.get_publishers_info_by_topic(topic)
                time.sleep(0.05)
            assert infos, f'no publisher seen on {topic}'
            assert str(infos[0].topic_type_hash) == want[name], name
        node.destroy_node()
    finally:
        rclpy.shutdown()
