"""warm.py: after the install step, the node compiles no numba kernel; a read-only install too.

No test here times anything (the seconds are the bench's, bench_startup.py): each checks where
the node's compiled code came from, in numba's own counts (a dispatcher's cache hits, loaded
from the disk cache, and misses, compiled), which do not depend on the host's speed.
"""
import json
import os
from pathlib import Path
import re
import shutil
import subprocess
import sys

from conftest import console_script, Processes, wait_for
import numpy as np
import pytest

import rnea_controller
from rnea_controller import default_urdf_path, warm

PACKAGE = Path(rnea_controller.__file__).resolve().parent
KERNEL_LINE = re.compile(r'numba kernel ([\w.]+): (\d+) loaded, (\d+) compiled: (.*)$')


def install_step(package_root, report, env=None, prefix=()):
    """`python -m rnea_controller.warm --json report` on the package under package_root."""
    done = subprocess.run([*prefix, sys.executable, '-m', 'rnea_controller.warm', '--json',
                           str(report)], cwd=package_root, capture_output=True, text=True,
                          timeout=900, env=dict(os.environ, PYTHONPATH=str(package_root),
                                                **(env or {})))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(Path(report).read_text()), done.stdout


def test_every_module_with_a_cached_kernel_is_warmed():
    found = {'rnea_controller.' + '.'.join(path.relative_to(PACKAGE).with_suffix('').parts)
             for path in PACKAGE.rglob('*.py')
             if re.search(r'^@njit\(cache=True', path.read_text(), re.MULTILINE)}
    assert found == set(warm.KERNEL_MODULES)


def test_the_install_step_byte_compiles_the_package(tmp_path):
    """A copy of the package without bytecode: after `byte_compile`, every module's .pyc is
    there, one Python reads (its source's size and time): a read-only install, or a process
    with PYTHONDONTWRITEBYTECODE, imports the package without compiling it."""
    import importlib.util
    copy = tmp_path / 'rnea_controller'
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns('__pycache__'))
    done = subprocess.run([sys.executable, '-c', 'from rnea_controller import warm; '
                           'assert warm.byte_compile()'], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(tmp_path),
                                                           PYTHONDONTWRITEBYTECODE='1'))
    assert done.returncode == 0, done.stderr[-3000:]
    sources = sorted(copy.rglob('*.py'))
    assert sources
    for source in sources:
        header = Path(importlib.util.cache_from_source(source)).read_bytes()[:16]
        assert header[:4] == importlib.util.MAGIC_NUMBER, source
        stat = source.stat()
        assert int.from_bytes(header[8:12], 'little') == int(stat.st_mtime) & 0xFFFFFFFF
        assert int.from_bytes(header[12:16], 'little') == stat.st_size & 0xFFFFFFFF


def test_after_the_install_step_the_node_compiles_nothing(tmp_path):
    """The install step, then the node on the simulated arm: every kernel signature the node
    used by its activation is one the install step made, and each was loaded, none compiled."""
    made, _ = install_step(PACKAGE.parent, tmp_path / 'warm.json')
    procs = Processes(tmp_path)
    try:
        procs.start([console_script('rnea-sim')])
        controller = procs.start([console_script('rnea-controller'), '--urdf',
                                  str(default_urdf_path()), '--ros-args', '--log-level',
                                  'rnea_controller:=debug'])
        # the kernels' summary is logged at the end of the activation, which the first tick
        # may overtake: both awaited
        assert wait_for(lambda: all(text in procs.output(controller) for text in (
            'first command', 'numba kernels:')), 120), procs.output(controller)[-3000:]
        log = procs.output(controller)
    finally:
        procs.close()
    summary = re.search(r'numba kernels: (\d+) loaded from the cache, (\d+) compiled', log)
    assert summary and int(summary.group(1)) > 0 and summary.group(2) == '0', log[-3000:]
    used = [KERNEL_LINE.search(line).groups() for line in log.splitlines()
            if KERNEL_LINE.search(line)]
    assert {name for name, *_ in used} >= {'law._law', 'contact._observe', 'goal.keep_worst'}
    for name, loaded, compiled, signatures in used:
        assert (int(loaded), int(compiled)) == (len(signatures.split(' | ')), 0), name
        assert set(signatures.split(' | ')) <= set(made[name]['signatures']), name


def test_an_edit_of_a_module_a_kernel_calls_renews_the_compiled_kernels(tmp_path):
    """numba keys a kernel's cache entry by its own file: after an edit of a module it calls it
    loads the old code (law.py's _law inlines adaptation.py: `colcon build` after a pull left
    the install tree's _law without adaptation's new rule, 0 compiled). `clear_stale`, the
    install step's first act, deletes the kernels made from other sources; an unchanged
    package keeps them, and Python's bytecode is never touched."""
    package = tmp_path / 'toy'
    package.mkdir()
    (package / 'callee.py').write_text('from numba import njit\n\n\n@njit(cache=True)\n'
                                       'def g(x):\n    return x + 1\n')
    (package / 'caller.py').write_text('from numba import njit\n\nfrom toy import callee\n\n\n'
                                       '@njit(cache=True)\ndef f(x):\n'
                                       '    return callee.g(x) * 10\n')

    def f_of_1():
        done = subprocess.run([sys.executable, '-c', 'from toy import caller; print(caller.f(1))'],
                              capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, PYTHONPATH=str(tmp_path)))
        assert done.returncode == 0, done.stderr[-3000:]
        return int(done.stdout)

    assert warm.clear_stale(package) == 0  # nothing compiled yet; the sources noted
    assert f_of_1() == 20
    kernels = sorted(p.name for p in package.rglob('*.nb[ic]'))
    assert any(name.startswith('caller.f-') for name in kernels), kernels
    assert warm.clear_stale(package) == 0  # unchanged sources: the kernels stay
    assert sorted(p.name for p in package.rglob('*.nb[ic]')) == kernels
    (package / 'callee.py').write_text((package / 'callee.py').read_text().replace('+ 1', '+ 2'))
    assert f_of_1() == 20  # numba's own check: caller.py unchanged, the old f loaded
    bytecode = sorted(package.rglob('*.pyc'))
    present = len(list(package.rglob('*.nb[ic]')))
    assert warm.clear_stale(package) == present > 0
    assert not list(package.rglob('*.nb[ic]')) and sorted(package.rglob('*.pyc')) == bytecode
    assert f_of_1() == 30


def read_only_prefix():
    """How to run a process that the file modes bind: as is, or as root without the
    capability that overrides them (util-linux's setpriv)."""
    if os.geteuid() != 0:
        return ()
    if shutil.which('setpriv') is None:
        pytest.skip('root without setpriv: a read-only folder would still be writable')
    return ('setpriv', '--bounding-set=-dac_override,-dac_read_search', '--')


def test_a_read_only_install_loads_its_cache_from_the_users_first_start(tmp_path):
    """An install warmed at install time, then made read-only, started by a user whose numba
    cache is empty: numba caches in the user's folder, and `seed_user_cache` copies the
    install's there, so that nothing is compiled."""
    made, _ = install_step(PACKAGE.parent, tmp_path / 'made.json', {'NUMBA_CACHE_DIR': ''})
    root = tmp_path / 'install'
    shutil.copytree(PACKAGE, root / 'rnea_controller')  # with its cache, as installed
    prefix = read_only_prefix()
    for path in [root, *root.rglob('*')]:
        path.chmod(path.stat().st_mode & ~0o222)
    env = {'XDG_CACHE_HOME': str(tmp_path / 'user-cache'), 'NUMBA_CACHE_DIR': ''}
    try:
        probe = subprocess.run([*prefix, 'touch', str(root / 'probe')], capture_output=True)
        assert probe.returncode != 0, 'the install is still writable'
        report, out = install_step(root, tmp_path / 'user.json', env, prefix)
    finally:
        for path in [root, *root.rglob('*')]:
            path.chmod(path.stat().st_mode | 0o200)
    loaded, compiled = warm.totals(report)
    assert loaded > 0 and compiled == 0, out
    for name, entry in report.items():
        assert set(entry['signatures']) <= set(made[name]['signatures']), name
    assert 'files copied from the install' in out
    assert list((tmp_path / 'user-cache' / 'numba').rglob('law._law-*.nbi')), out
    assert not list(root.rglob('*.tmp.*'))


def python(code):
    """The standard output of `python -c code`, this checkout's package first on the path."""
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(PACKAGE.parent)))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_program_imports_no_numba_before_its_dds_participant():
    """ros/main.py's module imports hold no numba and no numpy-heavy core: `--help` and a bad
    argument answer at once, and main() orders numba's set-up, the participant and the
    kernels itself."""
    out = python('import sys; import rnea_controller.ros.main; import rnea_controller.errors; '
                 "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                 "('numba', 'llvmlite', 'rosbags', 'scipy')))")
    assert out.strip() == '[]'


def test_the_node_loads_its_kernels_without_scipy():
    """What the node imports, numba's set-up as the node does it (`prepare_numba`), then every
    kernel the node uses, called: no scipy.linalg (numba's BLAS probe skipped, and no kernel
    calls BLAS: its first call would import scipy.linalg.cython_blas), nor the analysis tools,
    the simulator or MuJoCo; a later import of scipy.linalg still works."""
    out = python(
        'import json, sys\n'
        'import rnea_controller.ros.main, rnea_controller.ros.node\n'
        'from rnea_controller import warm\n'
        'warm.prepare_numba()\n'
        'warm.warm()\n'
        "found = sorted(m for m in sys.modules if m.startswith(('scipy.linalg', 'mujoco', "
        "'rnea_controller.analysis', 'rnea_controller.sim', 'matplotlib')))\n"
        'import scipy.linalg\n'
        'print(json.dumps([found, callable(scipy.linalg.eigh)]))\n')
    assert json.loads(out.splitlines()[-1]) == [[], True]


def test_a_file_of_identified_links_types_the_law_as_the_warmed_one():
    """`links.<link>.*` (the file `rnea-validate --identify` writes) replace bodies of the model:
    its law's record has numba's type of the default's (every array read-only, as the URDF
    reader makes them), so the node started with that file loads the kernels the install
    step compiled (before, a writable inertia array compiled the law anew: ~30 s)."""
    import numba

    from rnea_controller import RobotModel
    from rnea_controller.control.law import validate_parameters
    model = RobotModel.from_urdf_file(default_urdf_path())
    links = {'links.forearm_link.mass': 2.0, 'links.forearm_link.com': [0.0, 0.0, 0.2],
             'links.forearm_link.inertia': [0.03, 0.0, 0.0, 0.03, 0.0, 0.004]}
    default, identified = (validate_parameters(values, model) for values in ({}, links))
    assert not np.array_equal(identified.model.inertias, default.model.inertias)
    assert numba.typeof(identified.law_model) == numba.typeof(default.law_model)
