"""Where this package's programs (console scripts) are, in a venv and on a ROS 2 machine.

`colcon build` (ament_python) installs them into `<prefix>/lib/rnea_controller/`, which is not
on PATH: `ros2 run` finds them through the ament index (AMENT_PREFIX_PATH). `pip install` puts
them next to the Python that runs them (`.venv/bin`). `find_program` looks in that order:
the ament index, next to `sys.executable`, then PATH.
"""
import os
from pathlib import Path
import shutil
import sys

from rnea_controller.errors import RneaControllerError

PACKAGE = 'rnea_controller'
PROGRAMS = ('rnea-controller', 'rnea-sim', 'rnea-send-trajectory', 'rnea-demo', 'rnea-validate')


class ProgramNotFoundError(RneaControllerError):
    """A console script of this package is not installed where it is looked for."""


def _ament_candidates(name):
    """<prefix>/lib/rnea_controller/<name> for each prefix of AMENT_PREFIX_PATH that has us."""
    for prefix in filter(None, os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep)):
        marker = Path(prefix) / 'share/ament_index/resource_index/packages' / PACKAGE
        if marker.is_file():
            yield Path(prefix) / 'lib' / PACKAGE / name


def candidates(name):
    """Every place `find_program` looks for `name`, in order."""
    yield from _ament_candidates(name)
    yield Path(sys.executable).parent / name
    found = shutil.which(name)
    if found:
        yield Path(found)


def find_program(name):
    """Absolute path of the console script `name` (e.g. 'rnea-sim'); raises if none."""
    for path in candidates(name):
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise ProgramNotFoundError(
        f"cannot find the program {name!r}: not in <prefix>/lib/{PACKAGE}/ of AMENT_PREFIX_PATH "
        f"({os.environ.get('AMENT_PREFIX_PATH') or 'unset'}), nor next to {sys.executable}, nor "
        'on PATH (source install/setup.bash after colcon build, or pip install -e .)')
