"""Shared test fixtures.

Integration tests talk to real processes over DDS on loopback. The whole pytest process gets
its own ROS_DOMAIN_ID (set before anything imports rclpy), and every subprocess inherits it.

`./run test` runs the suite on two pytest-xdist workers (`-n 2`), each with a ROS_DOMAIN_ID of
its own: the integration tests (marker `integration`: real processes over DDS, some timed) one
after the other on one worker, in file order; every other file whole on a worker, its module
fixtures and caches made once (pytest_xdist_make_scheduler). The worker of the in-process
files keeps to one core (`pytest_runtest_setup`), its own closed loops included
(`parallel_map`): the integration tests' processes (the node at 1 kHz, the state feeder, the
simulator) always have the other (beside three CPU-bound processes they missed their state
timeout). `-n 0`: one process, as before.
"""
import ast
import contextlib
import multiprocessing
import os
from pathlib import Path
import signal
import subprocess
import sysconfig
import time

import pytest

from rnea_controller import warm
from rnea_controller.analysis.identify import flatten  # noqa: F401 - the tests' reader of a parameters YAML
from rnea_controller.tools.programs import find_program, ProgramNotFoundError

# The kernels the tests load are the present sources': numba keys a kernel's cache entry by its
# own file, so after an edit of a module it calls the old code would load (warm.py, Stale
# kernels). `./run` renews the cache before the tests; `colcon test` runs them on the source
# tree, whose cache only the tests fill: a stale one is deleted, then made anew (where the
# programs the tests start import this tree, as ./run's editable install, they would otherwise
# compile at start, ~40 s).
# (Once, in the process that starts pytest-xdist's workers: they start after it.)
if 'PYTEST_XDIST_WORKER' not in os.environ and warm.clear_stale():
    warm.warm()


def ros_domain_id():
    """This process's ROS_DOMAIN_ID: the environment's if set, else 10-89 from the pid. A
    pytest-xdist worker (k of n) takes the k-th of a block of n domains from its run's (set by
    the run's first process, whose environment the workers inherit): no two workers of a run
    share one, and two runs' blocks do not half overlap."""
    worker = os.environ.get('PYTEST_XDIST_WORKER')  # 'gw0', 'gw1', ... in a worker
    if worker is None:
        return os.environ.get('ROS_DOMAIN_ID', str(10 + os.getpid() % 80))
    count = int(os.environ['PYTEST_XDIST_WORKER_COUNT'])
    run = int(os.environ.get('ROS_DOMAIN_ID', 10 + os.getppid() % 80))
    return str(run - run % count + int(worker[2:]))


os.environ['ROS_DOMAIN_ID'] = ros_domain_id()
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')

REPO = Path(__file__).resolve().parents[1]


def integration_tests(folder=Path(__file__).parent):
    """{(file name, test function name, or '*' for every test of the file)} marked
    `integration`, read from the sources: the process that schedules pytest-xdist's workers
    collects no test."""
    marked = set()
    for path in folder.glob('test_*.py'):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and 'pytestmark' in map(ast.unparse, node.targets):
                if 'mark.integration' in ast.unparse(node.value):
                    marked.add((path.name, '*'))
            elif isinstance(node, ast.FunctionDef) and any(
                    'mark.integration' in ast.unparse(d) for d in node.decorator_list):
                marked.add((path.name, node.name))
    return marked


def is_integration(nodeid, marked):
    """Whether the test `nodeid` ('test/test_x.py::test_y[param]') is in `marked`."""
    path, _, name = nodeid.partition('::')
    return bool({(Path(path).name, '*'), (Path(path).name, name.split('[')[0])} & marked)


INTEGRATION = integration_tests()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`./run test`'s two workers: the integration tests (real processes over DDS, some timed)
    one unit of work, on one worker, one after the other in file order, so that their timed
    bounds never meet another's node; every other file a unit of its own (its module fixtures
    and caches made once), on whichever worker is free. (Not for another --dist given.)"""
    from xdist.scheduler import LoadScopeScheduling
    if config.getvalue('dist') != 'load':
        return None

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return 'integration' if is_integration(nodeid, INTEGRATION) else nodeid.split(
                '::')[0]
    return Groups(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """In a pytest-xdist worker, an in-process test keeps the worker on one core from then on
    (module doc), worker k on the k-th it may use: the integration tests' worker, which never
    runs an in-process file before them (the scheduler gives it their unit first, the
    largest), takes the in-process files left when they are done on a core of its own, not on
    the other worker's (a loaded run's last files ran both on one core)."""
    worker = os.environ.get('PYTEST_XDIST_WORKER')
    if worker is not None and not is_integration(item.nodeid, INTEGRATION):
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) > 1:
            os.sched_setaffinity(0, [cpus[int(worker[2:]) % len(cpus)]])


def parallel_map(function, items):
    """[function(item) for item in items], on as many processes as this one may use cores
    (at most 2: the host's), in this process where that is one (no pool to start)."""
    processes = min(2, len(os.sched_getaffinity(0)))
    if processes == 1:
        return [function(item) for item in items]
    with multiprocessing.get_context('spawn').Pool(processes) as pool:
        return pool.map(function, items)


def pytest_itemcollected(item):
    """A worker holds the sources' reading of the markers to the markers themselves."""
    if 'PYTEST_XDIST_WORKER' in os.environ:
        marked = item.get_closest_marker('integration') is not None
        assert marked == is_integration(item.nodeid, INTEGRATION), (
            f'{item.nodeid}: marked integration where integration_tests() cannot read it '
            '(at module or function level only)')


# Real recordings (each with its README, licence and published model) live beside the project,
# never in it: ../shared/data relative to the project root. A test that reads one skips where
# it is absent.
SHARED_DATA = REPO.parent / 'shared' / 'data'


def shared_recording(name):
    """Path of the real recording `name` in ../shared/data; the test skips, saying where it
    looked, when it is not there."""
    path = SHARED_DATA / name
    if not (path / 'published_model.yaml').exists():
        pytest.skip(f'real recording {name!r} not found at {path} (the shared data folder '
                    '../shared/data beside the project root is absent)')
    return path


ROBOTS = Path(sysconfig.get_paths()['purelib']) / 'cmeel.prefix/share/example-robot-data/robots'


def robot_data_urdf(relative):
    """Path of a URDF from PyPI `example-robot-data`, e.g. 'ur_description/urdf/ur5_robot.urdf'."""
    path = ROBOTS / relative
    if not path.exists():
        pytest.fail(f'example-robot-data has no {relative} (is requirements/test.txt installed?)')
    return path


def console_script(name):
    """Absolute path of one of this package's console scripts: through the ament index
    (<prefix>/lib/rnea_controller/, where `colcon build` puts them), next to the running Python
    (a venv's bin/), or PATH."""
    try:
        return find_program(name)
    except ProgramNotFoundError as error:
        pytest.fail(str(error))


class Processes:
    """Starts real processes (a node, the simulator) and always stops them at teardown."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.procs = []

    def start(self, args, name=None, env=None):
        """Start `args` with this environment plus `env`, its output into a log file."""
        name = name or Path(args[0]).name
        path = self.tmp_path / f'{name}-{len(self.procs)}.log'
        path.unlink(missing_ok=True)  # a fresh file: another Processes of this test may hold one
        # for appending (O_APPEND): the process shares this file's offset, which `output` moves
        # to read; without it a write between `output`'s seek(0) and the end of its read landed
        # there, over the log's earlier lines (test_harness; a test_warm run lost its 'numba
        # kernels:' line so, and waited for it in vain)
        log = open(path, 'a+')
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, **(env or {})), start_new_session=True)
        proc.log = log
        self.procs.append(proc)
        return proc

    @staticmethod
    def output(proc):
        proc.log.flush()
        proc.log.seek(0)
        return proc.log.read()

    def stop(self, proc, sig=signal.SIGINT, timeout=10.0):
        """Send `sig` (Ctrl-C by default) and wait; returns the exit code."""
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        return proc.returncode

    def close(self):
        for proc in self.procs:
            self.stop(proc)
            proc.log.close()


@pytest.fixture
def processes(tmp_path):
    procs = Processes(tmp_path)
    yield procs
    procs.close()


@contextlib.contextmanager
def arm_and_controller(tmp_path, sim_args, controller_args, client, controller_env=None):
    """`rnea-sim` and `rnea-controller` started with these arguments, then `client()` (this
    process's node: a probe, a recorder): yields (client, processes, sim, controller), and
    closes the client and stops both processes after, also when the client fails to start."""
    procs = Processes(tmp_path)
    try:
        sim = procs.start([console_script('rnea-sim'), *sim_args])
        controller = procs.start([console_script('rnea-controller'), *controller_args],
                                 env=controller_env)
        node = client()
        try:
            yield node, procs, sim, controller
        finally:
            node.close()
    finally:
        procs.close()


def stamp(msg):
    """A stamped message's header.stamp in seconds (system time, as time.time())."""
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def wait_for(predicate, timeout, period=0.01, spin=None):
    """Poll `predicate()` (spinning `spin()` between polls) until true or `timeout` [s]."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if spin is not None:
            spin()
        if predicate():
            return True
        time.sleep(period)
    return predicate()


def send_goal(action, goal, timeout=30.0, attempts=3, **kwargs):
    """Send an action goal; the goal handle once the server answered (accepted or not), or
    None after `attempts` tries of `timeout` / `attempts` [s] each. A try that gets no answer
    sends the goal again: DDS drops a server's answer sent before it has matched the client's
    reader of answers, which `wait_for_server` (the client's side of the match) does not show
    (a loaded run's first goal went unanswered for 10 s; the node's log had it accepted). A
    goal accepted without its answer is preempted by the next, as any new goal is."""
    for _ in range(attempts):
        future = action.send_goal_async(goal, **kwargs)
        if wait_for(future.done, timeout / attempts):
            return future.result()
    return None


@pytest.fixture(scope='session', autouse=True)
def one_blas_thread():
    """OpenBLAS (numpy's and scipy's own copies) on one thread in this process and, through
    OPENBLAS_NUM_THREADS, in every process the tests start (issue 45). The identification's
    matrices are small (about 100 columns): split over two threads, each product waits for
    the other thread, which on a loaded 2-core host is often off its core, and spins
    meanwhile: three identifications of test_identify took 20 s of CPU beside two busy
    processes, 5.5 s on one thread; the estimates the same to the bit, the cross-validation's
    errors to 1e-12 (another order of the sums)."""
    import ctypes
    threads = int(os.environ.setdefault('OPENBLAS_NUM_THREADS', '1'))
    try:
        with open('/proc/self/maps') as maps:  # the libraries loaded (Linux)
            libraries = {line.split()[-1] for line in maps if 'openblas' in line.lower()}
    except OSError:
        libraries = set()
    for path in sorted(libraries):
        library = ctypes.CDLL(path)
        for name in ('openblas_set_num_threads', 'scipy_openblas_set_num_threads',
                     'openblas_set_num_threads64_', 'scipy_openblas_set_num_threads64_'):
            if hasattr(library, name):
                getattr(library, name)(threads)
    yield
