"""Process set-up of the controller: executor, real-time priority, CPU affinity, signals.

`--executor events|single` (default events: rclpy's EventsExecutor, about half the CPU of the
SingleThreadedExecutor at 1 kHz, see bench/bench_node.py); `--realtime-priority N` (SCHED_FIFO
for the control loop's thread only, after warm-up; default 45, below the 50 of ros2_control's
controller manager, so that its read -> update -> write cycle always preempts our loop: a late
command of ours is applied one hardware cycle later, while a late hardware cycle can stop a real
arm; DDS threads stay at normal priority; 0 = off; without the privilege it warns once and runs
with the default scheduler). As ros2_control_node, the priority is set only on a real-time
(PREEMPT_RT) kernel, `/sys/kernel/realtime` = 1: on a stock kernel a Python loop that needs a
good part of a core would, in SCHED_FIFO, starve every normal process of that core (the driver's
non-real-time threads, a simulator, the planner); `--force-realtime` sets it anyway (for
measurements). `--cpu-affinity CPU [CPU ...]` (bind the process, DDS threads included, to these
cores, as ros2_control_node's `cpu_affinity`). A nonzero priority also makes the DDS participant
at SCHED_FIFO 1 where allowed (`unpreempted`: a peer's first answer is otherwise often lost).
SIGINT and SIGTERM only set a flag: the spin loop stops between callbacks.
"""
import inspect
import os
import signal
import sys
import threading

import rclpy
import rclpy.executors

STOP = []
IDLE_WAIT = 1.0  # [s] longest sleep of a helper thread without work (`stop` ends it at once)


def make_executor(kind, context=None):
    """'events': rclpy.experimental.EventsExecutor (default); 'single': SingleThreadedExecutor."""
    context = context or rclpy.get_default_context()
    if kind == 'events':
        from rclpy.experimental import EventsExecutor
        return EventsExecutor(context=context)
    return rclpy.executors.SingleThreadedExecutor(context=context)


def process_threads():
    """Ids of this process's threads (those already started, e.g. by numpy's BLAS, too)."""
    return [int(tid) for tid in os.listdir('/proc/self/task')]


def process_age():
    """Seconds since this process started (Linux: /proc; elsewhere None)."""
    try:
        with open('/proc/self/stat', encoding='ascii') as stat, open('/proc/uptime') as up:
            start_ticks = int(stat.read().rsplit(')', 1)[1].split()[19])
            return float(up.read().split()[0]) - start_ticks / os.sysconf('SC_CLK_TCK')
    except (OSError, ValueError, IndexError):
        return None


def since_start():
    """' (1.23 s after the process started)' for a log line, or '' where unknown."""
    age = process_age()
    return '' if age is None else f' ({age:.2f} s after the process started)'


def has_realtime_kernel():
    """True on a PREEMPT_RT kernel (/sys/kernel/realtime reads 1), as realtime_tools checks."""
    try:
        with open('/sys/kernel/realtime', encoding='ascii') as file:
            return file.read().strip() == '1'
    except OSError:
        return False


def apply_realtime_options(options, log):
    """The loop thread's SCHED_FIFO priority from the options, on a real-time kernel or forced;
    `log(text)` says what was decided."""
    if not options.realtime_priority:
        return
    if not (options.force_realtime or has_realtime_kernel()):
        log('no real-time kernel detected (/sys/kernel/realtime): the loop runs with the '
            "default scheduler, as ros2_control's controller_manager does; --force-realtime "
            f'sets SCHED_FIFO {options.realtime_priority} anyway')
        return
    if set_realtime_priority(options.realtime_priority):
        log(f'control loop thread: SCHED_FIFO priority {options.realtime_priority}')


def set_realtime_priority(priority, threads=None):
    """SCHED_FIFO at `priority` for `threads` (default: the calling thread only, the loop's).

    Called once the node is warm (numba compiled, DDS up), so that neither the compile nor the
    DDS threads run at real-time priority. Threads the calling thread starts later inherit it.
    """
    error = realtime_priority_refused(priority, threads)
    if error is not None:
        print(f'controller: cannot set SCHED_FIFO priority {priority}: {error}; '
              'running with the default scheduler', file=sys.stderr)
        return False
    return True


def realtime_priority_refused(priority, threads=None):
    """Set SCHED_FIFO `priority` for `threads` (default: the calling thread); None if done,
    else the error (no privilege, a bad priority)."""
    try:
        for tid in threads or [threading.get_native_id()]:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, ValueError) as error:
        return error
    return None


def unpreempted(make, priority=1):
    """`make()` with the calling thread at SCHED_FIFO `priority` [1-99], then that thread and the
    threads `make` started (which inherited it) back to the calling thread's former scheduling.
    Without the privilege, or if the thread already runs real-time, just `make()`.

    For the DDS participant (ros/main.py, issue 35): Fast DDS enables a participant by sending
    its first announcement (to 32 localhost ports under ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST)
    and only then starts handling what it receives (RTPSParticipantImpl::enable). The first send
    wakes the peer's receive thread, which often preempts this thread on its core and answers
    before reception starts: the answer is lost, and the peer is found only at its next periodic
    announcement (every 3 s by default), 0-3 s later, in about half of the starts on this host.
    A normal thread cannot preempt a SCHED_FIFO one.
    """
    try:
        policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
        if policy in (os.SCHED_FIFO, os.SCHED_RR):
            return make()
        before = set(process_threads())
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError):  # no privilege (or no such call): as before
        return make()
    try:
        return make()
    finally:
        for tid in [threading.get_native_id(), *(set(process_threads()) - before)]:
            try:
                os.sched_setscheduler(tid, policy, param)
            except OSError:  # a thread that has ended meanwhile
                pass


class BackgroundSpinner:
    """An executor for `node` (`kind` as `make_executor`'s), spun by a thread of its own
    (trajectory intake, action server, the bag recorder) with the default scheduler (a thread
    started from the real-time loop thread would inherit SCHED_FIFO), until `stop`.

    The thread sleeps in the middleware's wait until work comes (no polling: each empty
    spin_once of rclpy's SingleThreadedExecutor costs ~1 ms of Python here). `stop` ends it
    first, and shuts the executor down after: rclpy's Executor.shutdown, called while another
    thread spins, destroys the executor's guard condition under that thread's feet
    (InvalidHandle in the spinning thread), and the EventsExecutor's C++ thread must be shut
    down before its context. `stop` ends a sleeping spin_once at once with an empty task
    (`create_task`), which both executors run as work: `Executor.wake` does not (spin_once waits
    on until its timeout; a deactivation waited up to a second), and the EventsExecutor refuses
    a node with a guard condition.

    Kilted's EventsExecutor takes a 1 kHz topic at a fraction of the SingleThreadedExecutor's
    CPU (the tests' clients: 1,500-1,800 messages a second at 50-60 % of a core, against
    300-460 at 60-100 %), but it never delivers to a callback that asks for the MessageInfo,
    and its `spin()` in a thread of its own delivered nothing here: spin_once it is."""

    def __init__(self, node, name, kind='single', idle_wait=IDLE_WAIT):
        self.idle_wait = idle_wait
        self.executor = make_executor(kind, node.context)
        self.executor.add_node(node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=name, daemon=True)
        self._thread.start()

    def _spin(self):
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass
        try:
            while not self._stop.is_set() and self.executor.context.ok():
                self.executor.spin_once(timeout_sec=self.idle_wait)
        except (rclpy.executors.ExternalShutdownException, rclpy.executors.ShutdownException):
            pass

    def stop(self, timeout=None):
        """End the thread (at once, unless a callback is running; waits at most `timeout` [s],
        default idle_wait + 1 s), then shut the executor down."""
        self._stop.set()
        self.executor.create_task(_nothing)
        self._thread.join(self.idle_wait + 1.0 if timeout is None else timeout)
        self.executor.shutdown(0)


def _nothing():
    """The task `stop` hands the executor: running it ends the spinner's spin_once."""


class Slack:
    """The control period's slack, for a helper thread's short work (a parameter set's
    validation): `ticked()` as each tick ends; `wait(period)` blocks until the next tick has
    ended (at most two periods: a loop that does not run, or runs late, holds nothing up).

    A helper's work started anywhere in the period ran across the next tick: the tick waited
    for the interpreter's lock at each of its hand-overs (every call into rclpy or the
    middleware that lets it go), up to a switch interval each. Started as a tick ends, the
    work has the period's slack before the next tick (a tick takes a third of a period here):
    a burst of 20 parameter sets took the loop's worst gap from 3.1-4.7 ms to 2.1-3.5 ms
    (`./run bench intake`, median of six bursts, six runs each, docs/timing.md)."""

    def __init__(self):
        self._ended = threading.Event()

    def ticked(self):
        if not self._ended.is_set():  # the tick's cost: a flag read while nobody waits
            self._ended.set()

    def wait(self, period):
        self._ended.clear()
        self._ended.wait(2.0 * period)


def timer_callback(method):
    """`method` as a timer callback whose signature costs rclpy nothing to read.

    rclpy's executors (Kilted) call inspect.signature on a timer's callback at every call, to
    pass a TimerInfo to callbacks that ask for one: ~28 µs for a bound method on this host, at
    1 kHz 3 % of a core. A plain function with its signature stated takes ~3 µs."""
    def callback():
        method()
    callback.__signature__ = inspect.Signature()
    callback.__name__ = callback.__qualname__ = method.__name__
    return callback


def period_setter(timer):
    """`set(ns)`: the timer's period [ns] changed by its handle's own call, without rclpy's
    `Timer.timer_period_ns` property around it (a context manager on the handle's use count:
    half the call, every tick of the phase lock; issue 45). Safe as `outputs.raw_publish` is:
    the node destroys its timer on the loop's thread only. The property where the handle is
    not found (another rclpy, a test's timer)."""
    change = getattr(getattr(timer, '_Timer__timer', None), 'change_timer_period', None)
    if change is not None:
        return change

    def set_period(ns):
        timer.timer_period_ns = ns
    return set_period


def set_cpu_affinity(cpus):
    """Bind this process (its threads now and later) to `cpus`; SystemExit if it can't."""
    try:
        for tid in process_threads():
            os.sched_setaffinity(tid, cpus)
    except (OSError, ValueError) as error:
        allowed = sorted(os.sched_getaffinity(0))
        raise SystemExit(f'controller: --cpu-affinity {" ".join(map(str, cpus))}: {error} '
                         f'(this process may use CPUs {allowed})') from None


def _request_stop(signum, frame):
    """SIGINT/SIGTERM: ask the spin loop to stop (no exception inside a callback)."""
    STOP.append(signum)


def install_signal_handlers():
    signal.signal(signal.SIGINT, _request_stop)
    signal.signal(signal.SIGTERM, _request_stop)


def add_arguments(parser):
    """The process options of `rnea-controller` (see the module doc)."""
    parser.add_argument('--executor', choices=('events', 'single'), default='events',
                        help='rclpy executor (default: events, lower CPU; see bench_node.py)')
    parser.add_argument('--realtime-priority', type=int, default=45, metavar='N',
                        help='SCHED_FIFO priority N (1-99) of the control loop thread, set '
                             "after warm-up; default 45, below the 50 of ros2_control's "
                             'controller manager, whose cycle must preempt ours; DDS threads '
                             'stay normal; 0: default scheduler. Without the privilege '
                             '(CAP_SYS_NICE or an rtprio limit) it says so once and runs '
                             'normally. Set only on a real-time (PREEMPT_RT) kernel, as '
                             'ros2_control_node')
    parser.add_argument('--force-realtime', action='store_true',
                        help='set the priority on a kernel without PREEMPT_RT too (for '
                             'measurements: a busy loop then starves normal processes)')
    parser.add_argument('--cpu-affinity', type=int, nargs='+', metavar='CPU',
                        help="bind the process, DDS threads included, to these CPU cores, as "
                             "ros2_control_node's cpu_affinity (default: not bound)")
