"""Run the suite on a loaded host: `./run test` with N CPU-bound processes beside it.

    python test/load.py [--busy 2] [--runs 1] [--log results.txt] [-- pytest args]
    python test/load.py --only -- test/test_timing.py -k dds    # pytest alone, some tests
    python test/load.py --command 'colcon test --return-code-on-test-failure' --cwd ~/ws

Each busy process is a pure-Python loop (one core each while it runs), started before the
suite and stopped (by its own pid) when the suite ends, so a 2-core host with two of them has
a load of 2 beside the tests: what CI and users see on a busy machine (issue 31). For each run
it prints one line: exit code, wall time, the load averages (1, 5, 15 min) at the start and at
the end, and pytest's summary line. Independent of `./run` itself: it only calls it.
"""
import argparse
import multiprocessing
import os
from pathlib import Path
import subprocess
import sys
import time

REPO = Path(__file__).resolve().parents[1]


def busy():
    """Burn one core until killed (also when this script dies: PR_SET_PDEATHSIG)."""
    import ctypes
    import signal
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2147483648


def load_average():
    return '/'.join(f'{x:.2f}' for x in os.getloadavg())


def run_once(busy_count, pytest_args, out=sys.stdout, only=False, command=None, cwd=REPO):
    """`./run test` (with `only`: pytest alone, on the paths given; with `command`: that shell
    command, in `cwd`) beside `busy_count` busy processes, its output copied to `out` as it
    comes: (code, seconds, load before, load after, summary line)."""
    workers = [multiprocessing.Process(target=busy, daemon=True) for _ in range(busy_count)]
    for worker in workers:
        worker.start()
    before = load_average()
    started = time.monotonic()
    lines = []
    try:
        argv = (['bash', '-c', command] if command else [
            str(REPO / '.venv' / 'bin' / 'python'), '-m', 'pytest'] if only else [
            str(REPO / 'run'), 'test'])
        with subprocess.Popen([*argv, *pytest_args], cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) as proc:
            for line in proc.stdout:
                lines.append(line.rstrip('\n'))
                out.write(line)
                out.flush()
    finally:
        after = load_average()
        for worker in workers:
            worker.terminate()
            worker.join(5)
    seconds = time.monotonic() - started
    summary = next((line for line in reversed(lines) if ' in ' in line and ('passed' in line
                    or 'failed' in line or 'error' in line)), lines[-1] if lines else '')
    return proc.returncode, seconds, before, after, summary


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = (argv[:argv.index('--')], argv[argv.index('--') + 1:]) if '--' in argv \
        else (argv, [])
    parser = argparse.ArgumentParser(prog='python test/load.py', description=__doc__.split(
        '\n')[0])
    parser.add_argument('--busy', type=int, default=2, help='CPU-bound processes (default 2)')
    parser.add_argument('--runs', type=int, default=1, help='runs of the suite (default 1)')
    parser.add_argument('--log', type=Path, help="append each run's result line here")
    parser.add_argument('--only', action='store_true', help='run pytest alone on the pytest '
                        'args (e.g. some test files), not the whole ./run test')
    parser.add_argument('--command', help='a shell command to run instead of ./run test (e.g. '
                        'colcon test on a ROS 2 workspace: give it --return-code-on-test-failure '
                        'and --event-handlers console_direct+)')
    parser.add_argument('--cwd', type=Path, default=REPO, help="the command's directory")
    args = parser.parse_args(ours)
    status = 0
    for k in range(args.runs):
        code, seconds, before, after, summary = run_once(args.busy, pytest_args,
                                                         only=args.only,
                                                         command=args.command, cwd=args.cwd)
        line = (f'{time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())} UTC run {k + 1}/'
                f'{args.runs}: {args.busy} busy, exit {code}, {seconds:.0f} s, load average '
                f'{before} at start, {after} at end; {summary}')
        print(line, flush=True)
        if args.log:
            with open(args.log, 'a') as log:
                log.write(line + '\n')
        status = status or code
    return status


if __name__ == '__main__':
    raise SystemExit(main())
