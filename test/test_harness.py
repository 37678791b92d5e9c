"""The tests' own harness (conftest.py): what the other tests read of their processes is what
the processes wrote."""
import sys


def test_a_log_read_while_its_process_writes_keeps_every_line(processes):
    """`Processes.output` reads the log while the process writes it (the tests wait for a line
    by polling it). The process shares the file's offset, which a read moves: the log is opened
    for appending, else the process's writes landed where a read had left the offset, over the
    lines before (a test_warm run under colcon test lost its 'numba kernels:' line so, and
    waited for it in vain; this writer lost 370-390 of its 3,000 lines)."""
    lines = [f'line {i:05d} ' + 'x' * 200 for i in range(3000)]
    writer = processes.start([sys.executable, '-u', '-c',
                              'import time\nfor i in range(3000):\n'
                              '    print(f"line {i:05d} " + "x" * 200)\n    time.sleep(0.0002)'],
                             name='writer')
    reads = 0
    while writer.poll() is None:
        processes.output(writer)
        reads += 1
    assert writer.returncode == 0 and reads > 10
    assert processes.output(writer).splitlines() == lines
