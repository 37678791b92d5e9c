"""ament_python set-up: `colcon build` on a ROS 2 machine, `pip install -e .` in a venv."""
from glob import glob

from setuptools import find_packages, setup

package_name = 'rnea_controller'

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
