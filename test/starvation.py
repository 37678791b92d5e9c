"""How long the processes of a real-time run waited for a CPU: the measure that tells a loaded
host from a fault, for the closed-loop tests over DDS (issue 31).

The simulator steps its physics against the wall clock and the controller ticks at 1 kHz; on a
host whose cores are busy (other test runs, a build) both wait in the kernel's run queue while
the arm keeps moving under the last command, and a bound set on a quiet host breaks for a
reason the code does not control. Linux counts, per thread, the time it was runnable but not
running (/proc/<pid>/task/<tid>/schedstat, second field, ns). `CpuWait` sums it over every
thread of the processes given, over the test's window, per second of wall time.

`check(ok, what, meter)` is the tests' assertion for a figure a starved run cannot hold: it
passes when `ok`; when not, it fails, unless the window shows the run starved (a process of
the loop waited more than STARVED of the window for a CPU), and then the test is skipped with
the figures as its reason. A quiet run's failure is a failure; a figure that holds under load
passes under load. `RunGaps` asks the same of a run already recorded, from its own figures.
"""
from pathlib import Path
import threading
import time

import pytest

STARVED = 0.1  # [s of run-queue wait per s of wall time] of one process: the run was starved


def run_queue_wait(pid):
    """Seconds the threads of process `pid` have waited for a CPU since they started (0 once
    it has exited)."""
    total = 0
    for stat in Path(f'/proc/{pid}/task').glob('*/schedstat'):
        try:
            total += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total * 1e-9


class Meter:
    """What a meter says: `figures()` ({name: run-queue wait [s] per second of the window,
    which began at `t0`}) as a sentence, and whether the run starved."""

    def describe(self):
        seconds = time.monotonic() - self.t0
        waits = ', '.join(f'{name} {1e3 * w:.0f} ms/s' for name, w in self.figures().items())
        load = open('/proc/loadavg').read().split()[:3]
        return (f'over {seconds:.1f} s the threads waited for a CPU: {waits} (load average '
                f'{"/".join(load)})')

    def starved(self):
        """The figures as a sentence if a process waited more than STARVED of the window."""
        if max(self.figures().values(), default=0.0) > STARVED:
            return f'the host starved the run: {self.describe()}'
        return None


class CpuWait(Meter):
    """Run-queue wait of named processes ({name: pid or Popen}) from `start()` on."""

    def __init__(self, processes):
        self.pids = {name: getattr(p, 'pid', p) for name, p in processes.items()}
        self.start()

    def start(self):
        """Begin the window now."""
        self.t0 = time.monotonic()
        self.waited = {name: run_queue_wait(pid) for name, pid in self.pids.items()}

    def figures(self):
        """{name: run-queue wait [s] per second of the window so far}."""
        seconds = max(time.monotonic() - self.t0, 1e-3)
        return {name: (run_queue_wait(pid) - self.waited[name]) / seconds
                for name, pid in self.pids.items()}


class TreeWait(Meter):
    """The run-queue wait of a process and of every process it starts (rnea-demo's
    simulator, controller and recorder), for a program whose processes this test does not
    hold: a thread looks for them every PERIOD s while the root runs and keeps each one's
    last figure (a process's wait counts from its start, so one started in the window is
    whole; its figure stays once it has exited). `stop()` ends the watch."""

    PERIOD = 0.25

    def __init__(self, root):
        self.root = getattr(root, 'pid', root)
        self.seen = {}  # pid: (name, run-queue wait [s] since it started)
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        while not self._stop.wait(self.PERIOD):
            self._sample()

    def _sample(self):
        children = {}
        for stat in Path('/proc').glob('[0-9]*/stat'):
            try:
                fields = stat.read_text().rsplit(')', 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
            except (OSError, IndexError, ValueError):
                pass
        pids, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            todo += children.get(pid, [])
        for pid in pids:
            wait = run_queue_wait(pid)
            if wait > 0:
                try:
                    name = Path(f'/proc/{pid}/comm').read_text().strip()
                except OSError:
                    name = str(pid)
                self.seen[pid] = (f'{name} ({pid})', wait)

    def stop(self):
        self._sample()
        self._stop.set()
        self._thread.join(5)

    def figures(self):
        seconds = max(time.monotonic() - self.t0, 1e-3)
        return {name: wait / seconds for name, wait in self.seen.values()}


class RunGaps:
    """The same question asked of a recorded run: the validator's report (report.json) of a run
    whose processes are gone. The run shows it was starved when its control loop or its joint
    states stopped for GAP_MS or more (the simulator catching up, late steps; the loop's missed
    ticks), or when it missed over MISSED of its ticks."""

    GAP_MS = 20.0
    MISSED = 0.01

    def __init__(self, report):
        self.report = report

    def describe(self):
        figures = []
        for stream in ('loop', 'joint_states'):
            r = self.report[stream]
            longest = max((g['duration_ms'] for g in r['gaps']), default=0.0)
            figures.append(f'{stream}: {r["missed_ticks"]} missed of {r["count"]}, longest gap '
                           f'{longest:.0f} ms')
        return f'the run shows {"; ".join(figures)}'

    def starved(self):
        for stream in ('loop', 'joint_states'):
            r = self.report[stream]
            longest = max((g['duration_ms'] for g in r['gaps']), default=0.0)
            if longest >= self.GAP_MS or r['missed_ticks'] > self.MISSED * max(r['count'], 1):
                return f'the host starved the run: {self.describe()}'
        return None


def check(ok, what, meter):
    """Assert `ok` (`what` says what failed), unless it failed on a run `meter` (a CpuWait or
    a RunGaps) shows starved: then skip, with the measured reason."""
    if ok:
        return
    starved = meter.starved()
    if starved:
        pytest.skip(f'{what}; {starved}')
    pytest.fail(f'{what}; not starved: {meter.describe()}')
