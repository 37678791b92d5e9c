"""A robot description from a file, as the launch files and the programs read it: a file whose
name ends in `.xacro` is run through the `xacro` program (ROS's own, `ros-<distro>-xacro`; PyPI
`xacro` in a venv), exactly what ros2 launch's `Command(['xacro', path])` does; any other file
is read as URDF text.

    read_description('arm_gripper.urdf.xacro')      # xacro's output
    read_description('arm.urdf')                    # the file's text

`xacro` is looked for next to the running Python first (a venv's bin/), then on PATH (a sourced
ROS 2 installation). Its failure is a UrdfError with the file and xacro's own message.
"""
import os
from pathlib import Path
import shutil
import subprocess
import sys

from rnea_controller.errors import UrdfError

XACRO_TIMEOUT = 60.0  # [s] a large description (a humanoid with meshes) takes a few seconds


def xacro_program() -> str:
    """Absolute path of the `xacro` program, or UrdfError saying where it was looked for."""
    beside = Path(sys.executable).parent / 'xacro'
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which('xacro')
    if found is None:
        raise UrdfError(f'cannot find the xacro program (next to {sys.executable}, nor on PATH):'
                        ' install ros-<distro>-xacro, or `pip install xacro` in a venv')
    return found


def read_description(path: str | Path, mappings: dict | None = None) -> str:
    """The URDF text of `path`: xacro's output for a `.xacro` file, else the file's text.

    mappings: xacro arguments {name: value} (`name:=value` on xacro's command line).
    Raises UrdfError naming the file when it cannot be read or xacro fails.
    """
    path = Path(path)
    if path.suffix != '.xacro':
        try:
            return path.read_text(encoding='utf-8')
        except OSError as error:
            raise UrdfError(f'cannot read {path}: {error.strerror}') from None
        except UnicodeDecodeError as error:
            raise UrdfError(f'cannot read {path}: not UTF-8 text ({error.reason})') from None
    command = [xacro_program(), str(path),
               *(f'{name}:={value}' for name, value in (mappings or {}).items())]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=XACRO_TIMEOUT,
                              check=False)
    except subprocess.TimeoutExpired:
        raise UrdfError(f'xacro {path}: no output within {XACRO_TIMEOUT:g} s') from None
    if done.returncode != 0:
        message = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise UrdfError(f'xacro {path} failed (exit code {done.returncode}): '
                        + ' / '.join(message[-3:]))
    return done.stdout
