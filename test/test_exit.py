"""The node's exit deletes its DDS participant (issue 35): nothing of it stays behind to delay
the next start.

A Fast DDS participant alive at its process's exit (the node's handles kept in reference
cycles by the start-up's gc.freeze()) left its shared-memory segment in /dev/shm and its
port registered; a running peer (the arm's driver, a simulator) went on writing into that
dead port for 1-3 s after the next start on the same participant id, and that start's first
state came 1.5-3 s late (14 of 14 restarts beside rnea-sim; 0.2-0.3 s once the exit deletes
it, ros/main.py `shut_down`). Checked without timing anything: the Fast DDS segments the node
made (those it maps that were not there before it started: its two participants', the
effort check's being the second) are gone after its exit. A participant deleted unlinks its
segment (a peer may still map it for a while); one leaked leaves it.
"""
from pathlib import Path
import signal

from conftest import console_script, wait_for
import pytest

from rnea_controller import default_urdf_path

pytestmark = pytest.mark.integration


def segments(pid):
    """The /dev/shm/fastdds_* segments (not the ports) mapped by process `pid`."""
    try:
        maps = Path(f'/proc/{pid}/maps').read_text()
    except OSError:  # the process ended meanwhile
        return set()
    return {line.split()[-1] for line in maps.splitlines()
            if '/dev/shm/fastdds_' in line and '/dev/shm/fastdds_port' not in line}


def existing():
    return {str(path) for path in Path('/dev/shm').glob('fastdds_*')}


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT], ids=['SIGTERM', 'Ctrl-C'])
def test_the_node_deletes_its_participant_at_exit(processes, sig):
    sim = processes.start([console_script('rnea-sim')])
    assert wait_for(lambda: segments(sim.pid), 60.0), processes.output(sim)[-3000:]
    before = existing()
    node = processes.start([console_script('rnea-controller'), '--urdf',
                            str(default_urdf_path()), '--ros-args', '-p',
                            'command_topic:=effort_controller/commands'])
    assert wait_for(lambda: 'first command' in processes.output(node), 120.0), \
        processes.output(node)[-3000:]
    made = segments(node.pid) - before
    assert made, 'no Fast DDS shared-memory segment of its own: is the SHM transport off?'
    assert processes.stop(node, sig) == 0, processes.output(node)[-3000:]
    left = sorted(made & existing())
    assert not left, (f'left in /dev/shm by the node: {left}', processes.output(node)[-2000:])
    assert sim.poll() is None, processes.output(sim)[-2000:]
