"""The control_msgs types the node uses carry the distribution's type hashes, whoever built them.

Oracle: the RIHS01 hashes of the official control_msgs 6.8.0 (Kilted), read from an official
build, in ../shared/interfaces/control_msgs_kilted_hashes.json: every type the node uses (the
FollowJointTrajectory action with its generated types, JointTrajectoryControllerState and the
tolerances they contain). A mismatch would hide the action server from MoveIt (a client built
from the official package), so every one is checked: in the type descriptions of the
control_msgs that Python imports (share/control_msgs/**/*.json of its prefix: our subset built
into .venv from interfaces/, or the distribution's whole package on a ROS 2 machine, where the
other types are extra and fine) and, for the types that go on the wire as topics, as DDS
advertises them (the endpoint's type hash seen by a peer).
"""
import json
from pathlib import Path
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


def share_directory():
    """share/control_msgs of the installation Python imports control_msgs from:
    <prefix>/lib/pythonX.Y/site-packages/control_msgs -> <prefix>/share/control_msgs."""
    import control_msgs
    return Path(control_msgs.__file__).resolve().parents[4] / 'share' / 'control_msgs'


def built(share):
    """{type name: RIHS01 hash} of every type in the type descriptions under `share`."""
    hashes = {}
    for path in sorted(share.glob('*/*.json')):
        for entry in json.loads(path.read_text())['type_hashes']:
            if entry['type_name'].startswith('control_msgs/'):
                hashes[entry['type_name']] = entry['hash_string']
    return hashes


def differences(share):
    """(types the node uses that `share` lacks, {type: (its hash, the official one)})."""
    want, have = official(), built(share)
    missing = sorted(set(want) - set(have))
    wrong = {name: (have[name], want[name]) for name in want
             if name in have and have[name] != want[name]}
    return missing, wrong


def test_every_type_the_node_uses_has_the_official_hash():
    share = share_directory()
    missing, wrong = differences(share)
    assert not missing, f'{share} lacks types the node uses: {missing}'
    assert not wrong, f'type hashes in {share} differ from control_msgs 6.8.0: {wrong}'


def whole_package(tmp_path, hashes):
    """A share/control_msgs as a distribution's: the given types plus one the node never uses."""
    share = tmp_path / 'share' / 'control_msgs'
    (share / 'msg').mkdir(parents=True)
    entries = [{'type_name': name, 'hash_string': value} for name, value in hashes.items()]
    entries.append({'type_name': 'control_msgs/msg/AdmittanceControllerState',
                    'hash_string': 'RIHS01_' + '0' * 64})
    (share / 'msg' / 'All.json').write_text(json.dumps({'type_hashes': entries}))
    return share


def test_a_whole_control_msgs_passes_and_a_jazzy_feedback_does_not(tmp_path):
    """Extra types are fine (the distribution's ~180); a changed hash (Jazzy's 5.x feedback
    lacks two fields) and a missing type are found."""
    assert differences(whole_package(tmp_path / 'kilted', official())) == ([], {})
    jazzy = dict(official())
    feedback = 'control_msgs/action/FollowJointTrajectory_Feedback'
    jazzy[feedback] = 'RIHS01_' + '1' * 64
    del jazzy['control_msgs/msg/JointTolerance']
    missing, wrong = differences(whole_package(tmp_path / 'jazzy', jazzy))
    assert missing == ['control_msgs/msg/JointTolerance'] and list(wrong) == [feedback]


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
