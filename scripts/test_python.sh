#!/usr/bin/env bash
# The Python package's tests (python/tests, pytest): installs the package with
# `pip install ./python` into the virtual environment build/python-venv and runs pytest, which
# compares it with the CLI of build/ (scripts/build.sh builds it; $AC_BIN overrides) and runs
# stories15M (scripts/fetch_stories15m.sh). From PyPI: scikit-build-core, nanobind and pytest
# (never torch: the package links Debian's libtorch, as the CLI does). The package's build
# folder build/python/ persists and its compiles go through ccache, so a second run rebuilds
# only what changed.
# Usage: scripts/test_python.sh [PYTEST_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/python-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install scikit-build-core nanobind pytest  # nothing when already there
# Without build isolation: the persistent build folder keeps finding this venv's nanobind.
"${pip[@]}" install --no-build-isolation ./python
"$venv/bin/python" -m pytest -q python/tests "$@"
