#!/usr/bin/env bash
# Builds the project's own control_msgs definitions (interfaces/control_msgs) and installs them
# into a virtual environment's prefix, beside the ros-* wheels, whose start-up hook
# (ros_wheels_bootstrapper) puts <venv>/lib on LD_LIBRARY_PATH.
#   interfaces/build.sh VENV
# Needs the wheels of requirements/interfaces.txt in VENV, cmake and g++. About a minute on 2 cores.
# The wheels' exported CMake files name the include folders of the machine that built them
# (/opt/python/...); they are rewritten to this venv's Python and numpy headers first.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=$(cd "$1" && pwd)
PY="$VENV/bin/python"
BUILD="$VENV/.control_msgs-build"

py_include=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
np_include=$("$PY" -c 'import numpy; print(numpy.get_include())')

# Rewrite the wheel builder's header folders to ours (only files that name them).
{ grep -rlE '/opt/python/cp[0-9]+-cp[0-9]+' --include='*.cmake' "$VENV/share" || true; } |
while read -r f; do
    sed -i -E \
        -e "s#/opt/python/cp[0-9]+-cp[0-9]+/lib/python[0-9.]+/site-packages/numpy/_core/include#$np_include#g" \
        -e "s#/opt/python/cp[0-9]+-cp[0-9]+/include/python[0-9.]+#$py_include#g" "$f"
done

rm -rf "$BUILD"
mkdir -p "$BUILD"
cmake -S "$HERE/control_msgs" -B "$BUILD" \
    -DCMAKE_INSTALL_PREFIX="$VENV" -DCMAKE_PREFIX_PATH="$VENV" \
    -DPython3_EXECUTABLE="$PY" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release >"$BUILD/cmake.log"
cmake --build "$BUILD" -j "$(nproc)" >"$BUILD/build.log"
cmake --install "$BUILD" >"$BUILD/install.log"
rm -rf "$BUILD"
