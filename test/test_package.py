"""package.xml against what the package imports and runs; setup.py's executables and layout.

The oracle for imports is the sources themselves (ast over every module and launch file); for
the ament_python layout, ament's conventions (resource marker, script_dir, share/ data files).
Whether each key exists in rosdistro was checked by hand (docs/install.md says where).
"""
import ast
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

from conftest import console_script, REPO
import pytest

from rnea_controller.tools.programs import PROGRAMS

# Python module -> rosdep key, where they differ (ROS packages: the module is the key).
KEYS = {'numpy': 'python3-numpy', 'numba': 'python3-numba', 'yaml': 'python3-yaml',
        'matplotlib': 'python3-matplotlib', 'rich': 'python3-rich',
        'mujoco': 'python3-mujoco-pip', 'rosbags': 'python3-rosbags-pip',
        'scipy': 'python3-scipy', 'cvxpy': 'python3-cvxpy-pip',
        'pytest': 'python3-pytest', 'xdist': 'python3-pytest-xdist',
        'hypothesis': 'python3-hypothesis',
        'pinocchio': 'pinocchio',
        'markdown_it': 'python3-rich'}  # markdown-it-py: rich's parser, installed with it
# Keys needed at run time without an import: each with where it is used.
RUN_ONLY = {
    'ros2launch': '`ros2 launch` of launch/*.launch.py',
    'xacro': 'controller.launch.py runs `xacro` on a .xacro description',
    'robot_state_publisher': 'the hardware default: publishes the robot_description topic',
    'ros2bag': 'demo.launch.py and rnea-demo record with `ros2 bag record`',
    'rosbag2_storage_mcap': '`ros2 bag record -s mcap`',
    'control_msgs': 'the FollowJointTrajectory action server and controller_state',
    'action_msgs': 'rclpy.action (the action server)',
    'ament_index_python': 'launch_ros finds the executables through the ament index',
}


def package_keys(kind):
    root = ET.parse(REPO / 'package.xml').getroot()
    return [e.text.strip() for e in root.iter(kind)]


def imported_modules(paths):
    """{top-level module: first file importing it} over the sources (absolute imports)."""
    found = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split('.')[0], path.relative_to(REPO))
    return found


def third_party(found):
    helpers = {path.stem for path in (REPO / 'test').glob('*.py')}  # test modules import them
    skip = set(sys.stdlib_module_names) | {'rnea_controller'} | helpers
    return {module: path for module, path in found.items() if module not in skip}


def runtime_sources():
    return sorted((REPO / 'rnea_controller').rglob('*.py')) + sorted(
        (REPO / 'launch').glob('*.launch.py'))


def test_every_import_of_the_package_has_an_exec_depend():
    keys = set(package_keys('exec_depend'))
    for module, path in third_party(imported_modules(runtime_sources())).items():
        key = KEYS.get(module, module)
        assert key in keys, f'{path} imports {module}: package.xml has no <exec_depend>{key}'


def test_every_import_of_the_tests_has_a_depend():
    keys = set(package_keys('exec_depend')) | set(package_keys('test_depend'))
    tests = sorted((REPO / 'test').glob('*.py'))
    for module, path in third_party(imported_modules(tests)).items():
        key = KEYS.get(module, module)
        assert key in keys, f'{path} imports {module}: package.xml has no depend on {key}'


def test_every_exec_depend_is_imported_or_run():
    imported = {KEYS.get(m, m) for m in third_party(imported_modules(runtime_sources()))}
    for key in package_keys('exec_depend'):
        assert key in imported or key in RUN_ONLY, f'package.xml: {key} is neither imported ' \
                                                   'nor in RUN_ONLY (drop it or say why)'


def test_keys_are_unique_and_no_unused_linter():
    keys = package_keys('exec_depend') + package_keys('test_depend')
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    assert 'ament_flake8' not in keys  # ruff lints (ament's settings); flake8 is not run
    root = ET.parse(REPO / 'package.xml').getroot()
    assert root.get('format') == '3'
    assert root.find('export/build_type').text == 'ament_python'


def console_scripts():
    """{name: 'module:function'} from setup.py's entry points."""
    text = (REPO / 'setup.py').read_text()
    return dict(re.findall(r"'([\w-]+) = ([\w.]+:\w+)'", text))


def test_one_name_per_program_and_each_target_exists():
    scripts = console_scripts()
    assert sorted(scripts) == sorted(PROGRAMS)
    assert len(set(scripts.values())) == len(scripts), 'a program installed under two names'
    for name, target in scripts.items():
        module, function = target.split(':')
        source = REPO / (module.replace('.', '/') + '.py')
        assert f'def {function}(' in source.read_text(), f'{name}: no {target}'


def test_ament_python_layout():
    assert (REPO / 'resource' / 'rnea_controller').is_file()
    setup_cfg = (REPO / 'setup.cfg').read_text()
    assert 'script_dir=$base/lib/rnea_controller' in setup_cfg
    assert 'install_scripts=$base/lib/rnea_controller' in setup_cfg
    setup = (REPO / 'setup.py').read_text()
    for share in ('launch', 'config', 'config/robots', 'urdf'):
        assert f"'share/' + package_name + '/{share}'" in setup, share
    assert "'share/ament_index/resource_index/packages'" in setup


@pytest.mark.parametrize('name', PROGRAMS)
def test_every_program_answers_help_without_starting(name):
    done = subprocess.run([console_script(name), '--help'], capture_output=True, text=True,
                          timeout=60, env={**os.environ, 'ROS_DOMAIN_ID': '231'})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith('usage:'), done.stdout[:500]


def test_programs_are_found_through_the_ament_index(tmp_path, monkeypatch):
    """As `colcon build` installs them: <prefix>/lib/rnea_controller/, found before PATH."""
    from rnea_controller.tools.programs import find_program, ProgramNotFoundError
    prefix = tmp_path / 'install'
    (prefix / 'share/ament_index/resource_index/packages').mkdir(parents=True)
    (prefix / 'share/ament_index/resource_index/packages/rnea_controller').write_text('')
    script = prefix / 'lib/rnea_controller/rnea-sim'
    script.parent.mkdir(parents=True)
    script.write_text('#!/bin/sh\n')
    script.chmod(0o755)
    monkeypatch.setenv('AMENT_PREFIX_PATH', f'/nonexistent{os.pathsep}{prefix}')
    assert find_program('rnea-sim') == str(script)
    script.chmod(0o644)  # not executable: not a program
    try:
        found = find_program('rnea-sim')
    except ProgramNotFoundError:
        found = None
    assert found != str(script)
