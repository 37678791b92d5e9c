"""Convert Gaz et al.'s Panda excitation recording (plain text) into the rosbag2 fixture here.

The recording (FrankaEmikaPandaDynModel, matlab/data/Exciting_Traj/Trajectory_1/rbt_log/)
is four text files with one number per line: exciting_traj_time.txt [s] (N lines, the
instants the robot's log sampled), and exciting_traj_positions.txt [rad],
exciting_traj_velocity.txt [rad/s], exciting_traj_torques.txt [N·m] (7 N lines: sample by
sample, joints 1-7 within a sample). The torques are the joint torque sensors' (Franka's
link-side tau_J).

Written: one sensor_msgs/JointState per sample on /joint_states (MCAP, zstd-compressed
chunks), header stamp = bag time = EPOCH + the recording's time, names panda_joint1..7
(example-robot-data's panda.urdf), position, velocity (with --velocity, as the fixture
here; default none, as many drivers publish), effort = the measured torques. Nothing is
resampled, filtered or dropped.

    python convert.py RBT_LOG_DIR OUT_BAG [--velocity]
"""
import argparse
from pathlib import Path
import shutil

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

from rnea_controller.wire import default_typestore, JOINT_STATE

EPOCH_NS = 1_565_000_000 * 10**9  # the recording's time 0 (it gives times from its start)
NAMES = [f'panda_joint{j}' for j in range(1, 8)]


def read(directory):
    """(t [s] (N,), q [rad], qd [rad/s], tau [N·m] (N, 7)) of the text files."""
    directory = Path(directory)
    t = np.loadtxt(directory / 'exciting_traj_time.txt')
    arrays = [np.loadtxt(directory / f'exciting_traj_{kind}.txt').reshape(len(t), 7)
              for kind in ('positions', 'velocity', 'torques')]
    return (t, *arrays)


def write(path, t, q, qd, tau, velocity):
    """The bag at `path` (replaced), one JointState per sample."""
    store = default_typestore()
    msg, header, time = (store.types[k] for k in (
        JOINT_STATE, 'std_msgs/msg/Header', 'builtin_interfaces/msg/Time'))
    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    stamps = EPOCH_NS + np.round(t * 1e9).astype(np.int64)
    empty = np.zeros(0)
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)  # MCAP's chunks
    with writer:
        conn = writer.add_connection('/joint_states', JOINT_STATE, typestore=store)
        for k, stamp in enumerate(stamps):
            sec, nanosec = divmod(int(stamp), 10**9)
            state = msg(header=header(stamp=time(sec=sec, nanosec=nanosec), frame_id=''),
                        name=NAMES, position=q[k], velocity=qd[k] if velocity else empty,
                        effort=tau[k])
            writer.write(conn, int(stamp), store.serialize_cdr(state, JOINT_STATE))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('rbt_log', help='the directory of the exciting_traj_*.txt files')
    parser.add_argument('bag', help='the bag directory to write')
    parser.add_argument('--velocity', action='store_true', help="write the log's velocities")
    args = parser.parse_args()
    write(args.bag, *read(args.rbt_log), velocity=args.velocity)


if __name__ == '__main__':
    main()
