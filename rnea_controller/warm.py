"""Compile the node's numba kernels ahead of its first start (issue 35).

    python -m rnea_controller.warm [--json FILE]

numba compiles a `@njit(cache=True)` kernel at its first call with a new signature (argument
types) and saves the machine code in a cache folder (`__pycache__/*.nbi, *.nbc` next to the
source when that is writable), keyed by the source file (numba 0.68: its content; older
releases: its modification time and size), the signature and the CPU;
a later process loads it: all of the node's kernels in ~1 s, against ~40 s to compile them.
The node compiles (or loads) its kernels while it configures and activates, in the objects it
builds then: Controller, ContactObserver, LoopTiming, LoopStats, the action server's
`keep_worst`, the trajectory sampler and the trajectory's limits' check. `warm()` builds the
same objects on the bundled arm (the types do not depend on the robot: the same signatures for
any URDF), so that every kernel the node uses is in the cache before the node first starts.
`./run` calls it after installing and whenever a source changed; setup.py after `install`
and `develop` (`colcon build`, with or without --symlink-install). test_warm checks that a node
started after it compiles nothing.

A read-only install (the package's folder not writable by the user who runs the node): numba
then caches in the user's cache folder (~/.cache/numba, or NUMBA_CACHE_DIR if set), empty the
first time. `seed_user_cache()` (the node calls it before building anything) copies the
install's cache there first, so that the first start of each user loads instead of compiling.

At the first load of any cached kernel numba sets itself up once (`prepare_numba()`, ~0.3-0.6 s:
it imports its typing and lowering registries). Among them `numba.np.arraymath` probes for BLAS
by importing `scipy.linalg` (0.25-0.3 s of the node's start); the node calls `prepare_numba()`
first, which does the set-up without that import: numba then takes BLAS to be absent, which
changes only how it would compile `np.correlate` and `np.convolve` (a loop), never a kernel
already compiled. The node's kernels call no BLAS (test_warm), and a later `import scipy.linalg`
in the same process works as usual.

The install step also byte-compiles the package (`byte_compile`, Python's `__pycache__/*.pyc`):
an install whose folder the node cannot write, or a process run with PYTHONDONTWRITEBYTECODE,
otherwise compiles every module of the package from source at each start (0.1-0.25 s of the
node's first command on a loaded 2-core host, issue 35).

Stale kernels: numba keys a kernel's cache entry by its own source file only, so an edit of a
module it calls (law.py's `_law` inlines adaptation.py, friction.py and rnea_kernel.py) leaves
the entry valid and the old code loaded, silently (`colcon build` after a pull: the install
tree's kernels stayed those of the sources before). The install step therefore first deletes
the package's compiled kernels whenever any of its sources changed since they were made
(`clear_stale`: a hash of the sources, kept beside them in `__pycache__`); `./run` calls this
module whenever a source changed, and the tests' conftest does the same for the package they
import (`colcon test` runs them on the source tree, whose cache the tests themselves fill).
"""
import argparse
import compileall
import glob
import hashlib
import importlib
import inspect
import json
import os
from pathlib import Path
import shutil
import sys
import time

from numba import __version__ as numba_version
from numba.core.dispatcher import Dispatcher
import numpy as np

# every module with an @njit(cache=True) kernel (test_warm checks the list against the sources;
# adaptation.py's and friction.py's are compiled as parts of law.py's _law)
KERNEL_MODULES = ('rnea_controller.dynamics.rnea_kernel', 'rnea_controller.control.law',
                  'rnea_controller.control.adaptation', 'rnea_controller.control.friction',
                  'rnea_controller.control.contact', 'rnea_controller.control.goal',
                  'rnea_controller.control.trajectory', 'rnea_controller.control.timing',
                  'rnea_controller.control.loop_stats', 'rnea_controller.control.records')


PACKAGE = Path(__file__).resolve().parent
SOURCES_KEY = Path('__pycache__') / 'numba-kernels.key'  # in the package's folder


def sources_key(package=PACKAGE) -> str:
    """A hash of every module of the package (path and content) and of numba's version: what
    the package's compiled kernels were made from."""
    digest = hashlib.sha256(f'numba {numba_version}\n'.encode())
    for path in sorted(package.rglob('*.py')):
        digest.update(path.relative_to(package).as_posix().encode() + b'\0')
        digest.update(path.read_bytes() + b'\0')
    return digest.hexdigest()


def clear_stale(package=PACKAGE) -> int:
    """Delete the package's compiled kernels (numba's *.nbi and *.nbc files in its folders)
    unless they were made from its present sources (module doc, Stale kernels), and note the
    sources they are made from from now on. Returns the number of files deleted; 0 where the
    folder cannot be written (numba caches elsewhere then, seed_user_cache)."""
    key = sources_key(package)
    stamp = package / SOURCES_KEY
    try:
        if stamp.read_text() == key:
            return 0
    except OSError:  # no stamp yet: kernels of unknown sources
        pass
    deleted = 0
    try:
        for path in [*package.rglob('*.nbi'), *package.rglob('*.nbc')]:
            path.unlink(missing_ok=True)
            deleted += 1
        stamp.parent.mkdir(exist_ok=True)
        stamp.write_text(key)
    except OSError:  # a read-only install: its owner's install step cleared it
        pass
    return deleted


def kernels() -> dict:
    """{module.function: numba dispatcher} of every kernel in KERNEL_MODULES."""
    found = {}
    for name in KERNEL_MODULES:
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if isinstance(value, Dispatcher) and value.py_func.__module__ == name:
                found[f'{name.rsplit(".", 1)[1]}.{attribute}'] = value
    return found


def cache_report() -> dict:
    """{kernel: {'loaded': n, 'compiled': n, 'signatures': [str]}} of the kernels this process
    has used so far: overloads loaded from numba's disk cache, and compiled (not in it)."""
    report = {}
    for name, kernel in kernels().items():
        stats = getattr(kernel, 'stats', None)  # numba's counts (None: another numba)
        if kernel.signatures and stats is not None:
            report[name] = {'loaded': sum(stats.cache_hits.values()),
                            'compiled': sum(stats.cache_misses.values()),
                            'signatures': sorted(str(s) for s in kernel.signatures)}
    return report


def totals(report: dict) -> tuple[int, int]:
    """(loaded, compiled) overloads of a `cache_report`."""
    return (sum(k['loaded'] for k in report.values()),
            sum(k['compiled'] for k in report.values()))


def warm() -> dict:
    """Compile (or load) every kernel the node uses, with the node's own objects on the bundled
    arm and the default parameters; returns the `cache_report`."""
    from rnea_controller.control.contact import ContactObserver
    from rnea_controller.control.goal import keep_worst
    from rnea_controller.control.law import Controller, validate_parameters
    from rnea_controller.control.loop_stats import LoopStats
    from rnea_controller.control.timing import ActuationDelay, LoopTiming
    from rnea_controller.control.trajectory import check_limits, Limits, Trajectory
    from rnea_controller.dynamics.model import default_urdf_path, RobotModel

    model = RobotModel.from_urdf_file(default_urdf_path())
    cfg = validate_parameters({}, model)
    Controller(cfg)  # the law (with and without a wrench), the gravity hold: node.py configure
    ContactObserver(cfg)  # loop.py, at activation
    LoopTiming(model.n, cfg.period)
    ActuationDelay(cfg.effort_limits, cfg.period)  # loop.py, at activation
    LoopStats()
    Trajectory.hold(np.zeros(model.n)).sample(0.0)
    index = np.arange(model.n)  # the limits' check (trajectory_intake.py, at configure)
    check_limits(Trajectory.hold(np.zeros(model.n)),
                 Limits(model.velocity_limits, cfg.effort_limits, 0.0, model, index), cfg.joints)
    m = len(cfg.joints)
    keep_worst(np.zeros((3, m)), np.zeros((6, m)), True)  # action_server.py
    return cache_report()


def prepare_numba() -> None:
    """numba's one-time set-up for loading (and compiling) kernels, done now and without its
    BLAS probe's `import scipy.linalg` where scipy.linalg is not imported yet (module doc)."""
    from numba.core.registry import cpu_target
    if 'scipy.linalg' in sys.modules:
        return cpu_target.target_context.refresh()
    sys.modules['scipy.linalg'] = None  # an import of it fails meanwhile (ImportError)
    try:
        cpu_target.target_context.refresh()
    finally:
        del sys.modules['scipy.linalg']


def seed_user_cache() -> int:
    """Where numba caches elsewhere than next to the sources (the package's folder is not
    writable, or NUMBA_CACHE_DIR is set), copy each kernel's install-time cache there, unless
    the index there is as new or newer. Returns the number of files copied."""
    copied = 0
    for kernel in kernels().values():
        cache = getattr(kernel, '_cache', None)
        index = getattr(getattr(cache, '_cache_file', None), '_index_name', None)
        if index is None:  # not cached, or another numba's internals: it compiles, as before
            continue
        try:
            copied += _seed(Path(inspect.getfile(kernel.py_func)).with_name('__pycache__'),
                            Path(cache.cache_path), index)
        except OSError:  # an unreadable install: numba compiles, as without this
            continue
    return copied


def _seed(source, target, index):
    """Copy the index file `index` and its data files from folder `source` to `target` unless
    they are the same folder, `source` has none, or the index in `target` is as new."""
    if source == target or not (source / index).is_file():
        return 0
    if (target / index).is_file() and (
            (target / index).stat().st_mtime >= (source / index).stat().st_mtime):
        return 0
    data = sorted(source.glob(glob.escape(index[:-len('.nbi')]) + '.*.nbc'))
    return sum(_copy(path, target / path.name)
               for path in [*data, source / index])  # the index last: it names the data files


def _copy(source, target):
    """Copy a file with its times, atomically (a reader sees the old file or the new one)."""
    partial = target.with_name(f'{target.name}.tmp.{os.getpid()}')
    try:
        shutil.copy2(source, partial)
        os.replace(partial, target)
    except OSError:
        partial.unlink(missing_ok=True)
        return 0
    return 1


def byte_compile() -> bool:
    """Byte-compile the package's modules into their `__pycache__` (where the folder is
    writable; the .pyc files Python would write at a first import, ahead of it). Returns True
    if every module compiled or was up to date."""
    package = Path(__file__).resolve().parent
    try:
        return bool(compileall.compile_dir(package, quiet=2, workers=1))
    except OSError:  # a read-only install: Python compiles in memory, as without this
        return False


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m rnea_controller.warm',
                                     description=__doc__.split('\n')[0])
    parser.add_argument('--json', metavar='FILE', help='write the cache report there')
    args = parser.parse_args(argv)
    start = time.perf_counter()
    stale = clear_stale()
    seeded = seed_user_cache()
    byte_compile()
    report = warm()
    loaded, compiled = totals(report)
    folders = sorted({str(Path(k._cache.cache_path)) for k in kernels().values()
                      if getattr(k, '_cache', None) is not None and k.signatures})
    print(f'rnea_controller.warm: {compiled} kernels compiled, {loaded} loaded from the cache'
          + (f' ({seeded} files copied from the install)' if seeded else '')
          + (f' ({stale} files of kernels compiled from other sources deleted first)'
             if stale else '')
          + f' in {time.perf_counter() - start:.1f} s; cache: {", ".join(folders)}')
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
