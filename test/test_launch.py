"""Launch files and the shipped config: what they name exists; the real node accepts the config.

`launch`/`launch_ros` are not installable here: the launch-description test skips without them;
the file checks read the launch files as text (ast) and always run.
"""
import ast
import importlib.util
from pathlib import Path
import re
import subprocess

from conftest import console_script, flatten, REPO, wait_for
import pytest
import yaml

from rnea_controller import default_urdf_path, RobotModel
from rnea_controller.control.law import validate_parameters
from rnea_controller.control.parameters import SPECS
from rnea_controller.description_file import read_description
from rnea_controller.errors import UrdfError

LAUNCH_FILES = sorted((REPO / 'launch').glob('*.launch.py'))
CONFIG = REPO / 'config' / 'controller.yaml'
ARM_GRIPPER = default_urdf_path().with_name('arm_gripper.urdf.xacro')


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
    """Programs a launch file starts: Node(executable=...) and ExecutableInPackage('name', ...)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == 'executable':
            yield node.value.value
        if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == 'ExecutableInPackage':
            yield node.args[0].value


def test_there_are_launch_files():
    assert {p.name for p in LAUNCH_FILES} == {'controller.launch.py', 'demo.launch.py',
                                              'two_arms.launch.py'}


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


def launch_module(name):
    """The launch file as a module, or skip where launch/launch_ros are not installed."""
    if importlib.util.find_spec('launch') is None or importlib.util.find_spec('launch_ros') \
            is None:
        pytest.skip('launch / launch_ros are not installed here (no ROS 2 installation)')
    spec = importlib.util.spec_from_file_location(name.replace('.', '_'), REPO / 'launch' / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_controller_launch_arguments_where_launch_is_installed():
    description = launch_module('controller.launch.py').generate_launch_description()
    arguments = {a.name: a.default_value for a in description.get_launch_arguments()}
    assert set(arguments) == {'robot', 'urdf', 'params_file', 'namespace', 'use_sim',
                              'realtime_priority', 'cpu_affinity'}


def test_controller_launch_reads_urdf_xacro_or_topic_where_launch_is_installed(tmp_path):
    module = launch_module('controller.launch.py')
    assert module.description('') is None  # the robot_description topic
    assert module.description(str(default_urdf_path())) == default_urdf_path().read_text()
    assert module.description(str(ARM_GRIPPER)) == read_description(ARM_GRIPPER)


def test_xacro_runs_the_real_xacro_on_a_description_with_properties_and_macros(tmp_path):
    """The launch files' urdf:= path (description_file.read_description) on the real xacro."""
    path = tmp_path / 'arm.urdf.xacro'
    path.write_text('<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="x">'
                    '<xacro:arg name="mass" default="2.5"/><xacro:property name="m" '
                    'value="$(arg mass)"/><xacro:macro name="link" params="name">'
                    '<link name="${name}"><inertial><mass value="${m}"/></inertial></link>'
                    '</xacro:macro><xacro:link name="l"/></robot>')
    assert '<mass value="2.5"/>' in read_description(path)
    assert '<mass value="4.0"/>' in read_description(path, {'mass': 4.0})
    (tmp_path / 'bad.urdf.xacro').write_text('<robot xmlns:xacro="http://www.ros.org/wiki/'
                                             'xacro" name="x">${undefined_property}</robot>')
    with pytest.raises(UrdfError, match=r'xacro .*bad\.urdf\.xacro failed.*undefined'):
        read_description(tmp_path / 'bad.urdf.xacro')


def test_demo_launch_arguments_where_launch_is_installed():
    description = launch_module('demo.launch.py').generate_launch_description()
    arguments = {a.name for a in description.get_launch_arguments()}
    assert arguments == {'payload', 'law', 'duration', 'output', 'start_controller',
                         'startup_timeout'}


def test_realtime_priority_below_controller_manager():
    """ros2_control's controller_manager loop runs at SCHED_FIFO 50: ours must be below."""
    text = (REPO / 'launch' / 'controller.launch.py').read_text()
    priority = int(re.search(r"'realtime_priority': \('(\d+)'", text).group(1))
    assert 0 < priority < 50


def test_the_config_has_every_parameter_each_with_a_comment_and_is_valid():
    text = CONFIG.read_text()
    values = dict(flatten(yaml.safe_load(text)['/**']['ros__parameters']))
    for name in SPECS:
        if '<joint>' in name or '<link>' in name:  # a family: an example in a comment
            assert name.split('.')[0] in text, f'{name} missing from {CONFIG.name}'
            continue
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
    assert wait_for(lambda: 'active' in processes.output(proc), 120.0), processes.output(proc)
    assert 'computed_torque on shoulder_pan_joint' in processes.output(proc)
    assert processes.stop(proc) == 0


@pytest.mark.integration
def test_the_real_node_reads_the_arm_gripper_xacro_as_launch_passes_it(processes):
    """What `controller.launch.py urdf:=arm_gripper.urdf.xacro use_sim:=true` starts: both
    programs read the xacro (the same reader as the launch file's), the real xacro runs; the
    gripper's fingers (a mimic pair) are neither controlled nor in the simulated effort
    controller's joints by default, so the activation check passes."""
    processes.start([console_script('rnea-sim'), '--ros-args', '-p',
                     f'urdf_file:={ARM_GRIPPER}'])
    proc = processes.start([console_script('rnea-controller'), '--realtime-priority', '0',
                            '--urdf', str(ARM_GRIPPER)])
    assert wait_for(lambda: ']: active' in processes.output(proc), 120.0), processes.output(proc)
    assert 'activation refused' not in processes.output(proc)
    configured = [line for line in processes.output(proc).splitlines() if 'configured:' in line]
    assert configured and 'on shoulder_pan_joint' in configured[0], configured
    assert 'wrist_3_joint' in configured[0] and 'finger' not in configured[0], configured
    assert processes.stop(proc) == 0


def test_an_unreadable_xacro_ends_the_node_with_one_line(tmp_path):
    bad = tmp_path / 'bad.urdf.xacro'
    bad.write_text('<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="x">${nope}</robot>')
    done = subprocess.run([console_script('rnea-controller'), '--urdf', str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith('rnea-controller: --urdf: xacro '), done.stderr
    assert 'bad.urdf.xacro' in done.stderr, done.stderr


def test_share_layout_matches_setup_py():
    layout = share_layout()
    assert {'launch', 'config', 'urdf'} <= set(layout)
    assert Path(REPO / 'config' / 'controller.yaml') in list(REPO.glob(layout['config']))


@pytest.mark.integration
def test_one_arm_under_a_namespace_started_directly(processes):
    """What `namespace:=arm7` does, without launch: every name of the arm under /arm7."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from std_msgs.msg import Float64MultiArray
    ns = '/arm7'
    processes.start([console_script('rnea-sim'), '--ros-args', '-r', f'__ns:={ns}'])
    controller = processes.start([console_script('rnea-controller'), '--realtime-priority', '0',
                                  '--ros-args', '-r', f'__ns:={ns}'])
    context = rclpy.Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node('namespace_probe', context=context)
    commands = []
    node.create_subscription(Float64MultiArray, f'{ns}/effort_controller/commands',
                             commands.append, 10)
    try:
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        spin = lambda: executor.spin_once(timeout_sec=0.05)  # noqa: E731
        assert wait_for(lambda: len(commands) > 10, 120.0, spin=spin), \
            processes.output(controller)[-3000:]
        topics = {name for name, _ in node.get_topic_names_and_types()}
        for name in ('joint_states', 'effort_controller/commands', 'robot_description',
                     'rnea_controller/reference'):
            assert f'{ns}/{name}' in topics, (name, sorted(topics))
            assert f'/{name}' not in topics, (name, sorted(topics))
        # node names come by a discovery topic of their own, later than the topics' endpoints
        names = lambda: set(node.get_node_names_and_namespaces())  # noqa: E731
        assert wait_for(lambda: {('rnea_controller', ns), ('rnea_sim', ns)} <= names(), 10.0,
                        spin=spin), names()
        services = {name for name, _ in node.get_service_names_and_types()}
        assert f'{ns}/rnea_controller/get_state' in services
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
