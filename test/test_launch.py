"""Launch files and the shipped config: what they name exists; the real node accepts the config.

`launch`/`launch_ros` are not installable here: the launch-description test skips without them;
the file checks read the launch files as text (ast) and always run.
"""
import ast
import importlib.util
from pathlib import Path
import re

from conftest import console_script, REPO, wait_for
import pytest
import yaml

from rnea_controller import default_urdf_path, RobotModel
from rnea_controller.control.law import validate_parameters
from rnea_controller.ros.node import PARAMETERS

LAUNCH_FILES = sorted((REPO / 'launch').glob('*.launch.py'))
CONFIG = REPO / 'config' / 'controller.yaml'


def share_layout():
    """{share subdirectory: repository glob} from setup.py's data_files."""
    text = (REPO / 'setup.py').read_text()
    pairs = re.findall(r"'share/' \+ package_name \+ '/(\w+)', glob\('([^']+)'\)", text)
    return dict(pairs)


def string_lists(tree):
    """Every list of string literals in a module, e.g. [share, 'urdf', 'arm.urdf'] -> parts."""
    for node in ast.walk(tree):
        if isinstance(node, ast.List):
            parts = [e.value for e in node.elts if isinstance(e, ast.Constant)
                     and isinstance(e.value, str)]
            if len(parts) >= 2:
                yield parts


def executables(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == 'executable':
            yield node.value.value


def test_there_are_launch_files():
    assert REPO / 'launch' / 'controller.launch.py' in LAUNCH_FILES


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_every_file_and_executable_a_launch_file_names_exists(path):
    tree = ast.parse(path.read_text())
    layout = share_layout()
    named = [parts for parts in string_lists(tree) if parts[0] in layout]
    for subdirectory, *rest in named:
        pattern = layout[subdirectory]
        candidates = {p.name for p in REPO.glob(pattern)}
        assert rest[-1] in candidates, f'{path.name} names share/{subdirectory}/{rest[-1]}, ' \
                                       f'but setup.py installs only {sorted(candidates)}'
    setup = (REPO / 'setup.py').read_text()
    for name in executables(tree):
        assert f"'{name} = rnea_controller." in setup, f'{path.name}: no executable {name!r}'
        console_script(name)


def test_the_controller_launch_file_names_the_arm_and_the_config():
    tree = ast.parse((REPO / 'launch' / 'controller.launch.py').read_text())
    assert ['urdf', 'arm.urdf'] in [p[-2:] for p in string_lists(tree)]
    assert ['config', 'controller.yaml'] in [p[-2:] for p in string_lists(tree)]
    assert default_urdf_path() == REPO / 'rnea_controller' / 'urdf' / 'arm.urdf'


def test_launch_description_builds_where_launch_is_installed():
    if importlib.util.find_spec('launch') is None or importlib.util.find_spec('launch_ros') \
            is None:
        pytest.skip('launch / launch_ros are not installed here (no ROS 2 installation)')
    spec = importlib.util.spec_from_file_location('controller_launch',
                                                  REPO / 'launch' / 'controller.launch.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    arguments = {a.name for a in description.get_launch_arguments()}
    assert arguments == {'urdf', 'params_file', 'namespace', 'use_sim'}


def flatten(tree, prefix=''):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from flatten(value, f'{prefix}{key}.')
        else:
            yield f'{prefix}{key}', value


def test_the_config_has_every_parameter_each_with_a_comment_and_is_valid():
    text = CONFIG.read_text()
    values = dict(flatten(yaml.safe_load(text)['/**']['ros__parameters']))
    for name in PARAMETERS:
        assert name in values or f'# {name}:' in text, f'{name} missing from {CONFIG.name}'
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r'^\s+\w+:', line) and 'ros__parameters' not in line:
            assert lines[i - 1].strip().startswith('#'), f'no comment above: {line.strip()}'
    validate_parameters(values, RobotModel.from_urdf_file(default_urdf_path()))


@pytest.mark.integration
def test_the_real_node_accepts_the_shipped_config(processes):
    proc = processes.start([console_script('rnea-controller'), '--urdf', str(default_urdf_path()),
                            '--ros-args', '--params-file', str(CONFIG)])
    assert wait_for(lambda: 'active' in processes.output(proc), 15.0), processes.output(proc)
    assert 'computed_torque on shoulder_pan_joint' in processes.output(proc)
    assert processes.stop(proc) == 0


def test_share_layout_matches_setup_py():
    layout = share_layout()
    assert {'launch', 'config', 'urdf'} <= set(layout)
    assert Path(REPO / 'config' / 'controller.yaml') in list(REPO.glob(layout['config']))
