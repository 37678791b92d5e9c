"""Ctrl-C as a terminal delivers it under `ros2 launch`: to the whole process group, and again
forwarded by launch. The programs that run under launch must end cleanly (exit 0, no
traceback) whatever the number of SIGINTs during their clean-up."""
import os
import signal
import time

from conftest import console_script, wait_for
import pytest

from rnea_controller import default_urdf_path

pytestmark = pytest.mark.integration


def ctrl_c_repeatedly(proc):
    """SIGINT to its process group 5 times, 0-100 ms apart: the later ones land in clean-up."""
    for gap in (0.0, 0.002, 0.01, 0.03, 0.1):
        if proc.poll() is not None:
            break
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(gap)


@pytest.mark.parametrize('program, ready', [
    (['rnea-sim'], 'simulating'),
    (['rnea-controller', '--urdf', str(default_urdf_path())], 'configured'),
])
def test_repeated_ctrl_c_ends_the_program_cleanly(processes, program, ready):
    proc = processes.start([console_script(program[0]), *program[1:], '--ros-args', '-r',
                            '__ns:=/signals'])
    assert wait_for(lambda: ready in processes.output(proc), 30.0), processes.output(proc)
    time.sleep(0.5)
    ctrl_c_repeatedly(proc)
    assert proc.wait(15) == 0, processes.output(proc)
    assert 'Traceback' not in processes.output(proc), processes.output(proc)


def test_ctrl_c_while_the_sender_waits_for_the_controller_ends_it_quietly(processes):
    """Ctrl-C is not a success: exit code 130, as shells report it, and no traceback."""
    proc = processes.start([console_script('rnea-send-trajectory'), '--demo', '--wait-active',
                            '--wait', '60', '--ros-args', '-r', '__ns:=/signals_sender'])
    time.sleep(3.0)  # rclpy is up and waiting for a controller that never comes
    assert proc.poll() is None, processes.output(proc)
    ctrl_c_repeatedly(proc)
    assert proc.wait(15) == 130, processes.output(proc)
    assert 'rnea-send-trajectory: interrupted' in processes.output(proc)
    assert 'Traceback' not in processes.output(proc), processes.output(proc)
