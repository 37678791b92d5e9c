"""The layers hold: the core (dynamics, control) never imports rclpy nor the ROS-side layers.

The core's modules are imported one after the other in a fresh interpreter, which reports
after each whether its import brought rclpy (or any `rclpy.*`) into sys.modules; and every
import statement of the core's sources is parsed (ast) and checked against the layers it may
not reach (ros, sim, analysis, tools). Public functions of the core carry type hints (ruff's
ANN rules check partly typed ones; this checks all).
"""
import ast
from functools import cache
import importlib
import inspect
import json
from pathlib import Path
import subprocess
import sys

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / 'rnea_controller'
CORE = ('dynamics', 'control')
GLUE = ('ros', 'sim', 'analysis', 'tools')


def core_modules():
    """Dotted names of rnea_controller, its top-level modules and every module of the core."""
    names = ['rnea_controller', 'rnea_controller.errors']
    for layer in CORE:
        names += [f'rnea_controller.{layer}' + ('' if path.stem == '__init__' else f'.{path.stem}')
                  for path in sorted((PACKAGE / layer).glob('*.py'))]
    return names


def test_the_core_has_modules_to_check():
    modules = core_modules()
    assert {'rnea_controller.dynamics.rnea', 'rnea_controller.control.trajectory',
            'rnea_controller.control.law'} <= set(modules)


@cache
def rclpy_brought_in():
    """{module: the rclpy modules its import brought in} for every core module, imported one
    after the other in one fresh interpreter (one per module cost the suite 8 s of CPU, each
    starting numpy and numba anew). Once a module has brought rclpy in, the later ones cannot
    be told apart: they are reported as not checked."""
    probe = ('import importlib, json, sys\n'
             'rclpy = lambda: sorted(m for m in sys.modules if m == "rclpy"'
             ' or m.startswith("rclpy."))\n'
             'out = {}\n'
             f'for name in {core_modules()!r}:\n'
             '    before = set(rclpy())\n'
             '    importlib.import_module(name)\n'
             '    out[name] = "not checked" if before else [m for m in rclpy()'
             ' if m not in before]\n'
             'print(json.dumps(out))')
    result = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize('module', core_modules())
def test_importing_the_core_never_imports_rclpy(module):
    brought = rclpy_brought_in()[module]
    assert brought == [], (f'{module}: not checked, an earlier module brought rclpy in'
                           if brought == 'not checked' else f'{module} imports {brought}')


def imported_names(path, package=None):
    """(line, module) of every import in a source file, relative imports made absolute."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = package or '.'.join(path.relative_to(PACKAGE.parent).parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                base = '.'.join(package.split('.')[:len(package.split('.')) - node.level + 1]
                                + ([base] if base else []))
            yield from ((node.lineno, f'{base}.{alias.name}') for alias in node.names)


@pytest.mark.parametrize('layer', CORE)
def test_the_core_imports_no_ros_side_layer(layer):
    forbidden = tuple(f'rnea_controller.{glue}' for glue in GLUE) + ('rclpy',)
    found = [f'{path.relative_to(PACKAGE.parent)}:{line} imports {name}'
             for path in sorted((PACKAGE / layer).glob('*.py'))
             for line, name in imported_names(path)
             if any(name == f or name.startswith(f + '.') for f in forbidden)]
    assert not found, '\n'.join(found)


def test_the_import_parser_sees_imports_of_every_form(tmp_path):
    """The check above can fail: each form of import of a forbidden layer is found."""
    sample = tmp_path / 'probe.py'
    sample.write_text('import rnea_controller.ros.node\nfrom rnea_controller.sim import plant\n'
                      'from ..analysis import bagio\nfrom . import spatial\n'
                      'def f():\n    import rclpy\n')
    names = [name for _, name in imported_names(sample, 'rnea_controller.dynamics')]
    assert names == ['rnea_controller.ros.node', 'rnea_controller.sim.plant',
                     'rnea_controller.analysis.bagio', 'rnea_controller.dynamics.spatial',
                     'rclpy']


@pytest.mark.parametrize('module', [m for m in core_modules()
                                    if m.startswith(('rnea_controller.dynamics',
                                                     'rnea_controller.control'))])
def test_public_functions_of_the_core_carry_type_hints(module):
    """Every public function and method defined in the module: arguments and return annotated."""
    loaded = importlib.import_module(module)
    missing = []
    for name, function in public_functions(loaded):
        signature = inspect.signature(function)
        unannotated = [p for p in signature.parameters.values()
                       if p.annotation is p.empty and p.name not in ('self', 'cls')]
        if unannotated or (signature.return_annotation is signature.empty
                           and function.__name__ != '__init__'):
            missing.append(f'{module}.{name}')
    assert not missing, f'without type hints: {missing}'


def public_functions(module):
    """(qualified name, function) of public functions and methods defined in `module`."""
    for name, item in vars(module).items():
        if name.startswith('_') or getattr(item, '__module__', None) != module.__name__:
            continue
        if inspect.isclass(item):
            for attribute, member in vars(item).items():
                function = getattr(member, '__func__', member)  # classmethod, staticmethod
                function = getattr(function, 'fget', function)  # property
                if inspect.isfunction(function) and not attribute.startswith('_'):
                    yield f'{name}.{attribute}', function
        elif inspect.isfunction(item) or hasattr(item, 'py_func'):  # numba's njit
            yield name, getattr(item, 'py_func', item)


def test_imports_inside_the_core_run_one_way():
    """No module of the core imports, directly or through others, a module that imports it
    back (issue 43: the law composes its adaptation; the adaptation never imports the law),
    annotations under TYPE_CHECKING included: the ast sees every import statement."""
    graph = {}
    for name in core_modules():
        path = PACKAGE.parent / (name.replace('.', '/') + '.py')
        if not path.exists():
            path = PACKAGE.parent / name.replace('.', '/') / '__init__.py'
        targets = set()
        for _, imported in imported_names(path):
            for candidate in (imported, imported.rsplit('.', 1)[0]):
                if candidate in core_modules() and candidate != name:
                    targets.add(candidate)
                    break
        graph[name] = targets
    inits = {name for name in graph if name.count('.') <= 1}

    def reaches(start, goal, seen):
        for nxt in graph[start] - inits:
            if nxt == goal or (nxt not in seen and (seen.add(nxt) or reaches(nxt, goal, seen))):
                return True
        return False

    circles = [name for name in graph if name not in inits and reaches(name, name, set())]
    assert not circles, f'imports in a circle through: {circles}'


CONSTANT_MODULES = ('control/law.py', 'control/adaptation.py', 'control/contact.py',
                    'control/modes.py')


def test_every_constant_of_the_control_layer_is_in_the_docs_table():
    """Issue 43: docs/controller.md lists every numeric constant of the law, its adaptation,
    the contact observer and the modes, with its unit and its derivation or meaning."""
    table = (PACKAGE.parent / 'docs' / 'controller.md').read_text()
    section = table[table.index('### Every constant of the control layer'):]
    missing = []
    for relative in CONSTANT_MODULES:
        tree = ast.parse((PACKAGE / relative).read_text())
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                continue
            name = node.targets[0].id
            numeric = isinstance(node.value, (ast.Constant, ast.BinOp)) and not (
                isinstance(node.value, ast.Constant) and isinstance(node.value.value, str))
            if name.isupper() and numeric and f'`{name}`' not in section:
                missing.append(f'{relative}: {name}')
    structural = {'control/law.py: ROWS', 'control/law.py: GRAVITY',
                  'control/adaptation.py: ESTIMATED'}
    assert not set(missing) - structural, sorted(set(missing) - structural)
