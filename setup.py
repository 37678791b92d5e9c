"""ament_python set-up: `colcon build` on a ROS 2 machine, `pip install -e .` in a venv.

`install` (colcon build) and `develop` (colcon build --symlink-install) then compile the node's
numba kernels into the installed package's cache (rnea_controller/warm.py, issue 35): the first
start loads them (~1 s) instead of compiling them (~40 s). Skipped when staged into another root
(a wheel, a distribution's package: they are compiled where they land, by
`python -m rnea_controller.warm` or at the first start) or with RNEA_CONTROLLER_NO_WARM=1.
"""
from glob import glob
import os
import subprocess
import sys

from setuptools import find_packages, setup
from setuptools.command.develop import develop
from setuptools.command.install import install

package_name = 'rnea_controller'


def warm(path):
    """Run `python -m rnea_controller.warm` on the package under `path`; never fails the
    install (without the cache the first start compiles, as before, and says so)."""
    if os.environ.get('RNEA_CONTROLLER_NO_WARM'):
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (os.path.abspath(path), os.environ.get('PYTHONPATH')) if p))
    try:
        done = subprocess.run([sys.executable, '-m', 'rnea_controller.warm'], env=env,
                              cwd=path, timeout=900, check=False)  # `-m`: cwd first on sys.path
        failed = done.returncode != 0
    except (OSError, subprocess.SubprocessError):
        failed = True
    if failed:
        print('rnea_controller: numba kernels not compiled ahead; the first start compiles '
              'them (~40 s), or run `python -m rnea_controller.warm`', file=sys.stderr)


class InstallAndWarm(install):
    def run(self):
        super().run()
        if not self.root:
            warm(self.install_lib)


class DevelopAndWarm(develop):
    def run(self):
        super().run()
        if not self.uninstall:
            warm(os.path.dirname(os.path.abspath(__file__)))


setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*', 'bench']),
    package_data={package_name: ['urdf/*.urdf', 'urdf/*.urdf.xacro', 'ros/*.xml']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', glob('launch/*.launch.py')),
        ('share/' + package_name + '/config', glob('config/*.yaml')),
        ('share/' + package_name + '/config/robots', glob('config/robots/*.yaml')),
        ('share/' + package_name + '/urdf', glob('rnea_controller/urdf/*.urdf*')),
    ],
    python_requires='>=3.10',
    install_requires=['setuptools', 'numpy', 'numba', 'pyyaml'],
    zip_safe=True,
    extras_require={'test': ['pytest']},  # colcon test runs pytest when the package names it
    maintainer='rnea_controller maintainers',
    maintainer_email='maintainers@rnea-controller.invalid',
    description='Computed-torque control with the recursive Newton-Euler algorithm, for ROS 2.',
    license='Apache-2.0',
    cmdclass={'install': InstallAndWarm, 'develop': DevelopAndWarm},
    entry_points={
        'console_scripts': [
            'rnea-controller = rnea_controller.ros.main:main',
            'rnea-sim = rnea_controller.sim.node:main',
            'rnea-send-trajectory = rnea_controller.tools.send_trajectory:main',
            'rnea-demo = rnea_controller.tools.demo:main',
            'rnea-validate = rnea_controller.analysis.validate:main',
        ],
    },
)
