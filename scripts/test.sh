#!/usr/bin/env bash
# The README's test command: installs what is missing, fetches stories15M, builds build/
# (Release), runs every test.
#
#   scripts/test.sh                  every test, in three runs: the `unit` tier first under
#                                    scripts/hermetic.sh (no network, no model files, no node, no
#                                    chromium: what proves the tier needs none), then every other
#                                    test (ctest -LE unit), then the Python package's
#                                    (scripts/test_python.sh: pip install ./python, pytest)
#   scripts/test.sh CTEST_ARGS...    one ctest run with those arguments, e.g. `-L unit` (a couple
#                                    of minutes), `-L model`, `-R Prune`
#
# Tiers (ctest -L; tests/labels.cmake gives every test its labels): unit, model, client, e2e, slow,
# judge. The judge tier (gguf-py and transformers read our exports) runs in the second run where
# the Python environment of scripts/setup_torch_venv.sh is found (AC_TORCH_VENV, default
# ~/.cache/autocompress/torch-2.11); elsewhere ctest lists its tests as skipped, with the reason.
# AC_SETUP_DONE=1 skips the install steps (.ci/run runs them once for every build tree).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/phases.sh
if [ -z "${AC_SETUP_DONE:-}" ]; then
  phase setup scripts/setup_tests.sh
fi
phase "build (Release)" scripts/build.sh
mkdir -p build/test-artifacts
ctest_args=(--test-dir build --output-on-failure -j1 --timeout 900)
if (($#)); then
  phase tests ctest "${ctest_args[@]}" "$@"
  exit
fi
rc=0
phase "tests: unit, hermetic" scripts/hermetic.sh ctest "${ctest_args[@]}" -L unit || rc=1
phase "tests: model, client, e2e, slow" ctest "${ctest_args[@]}" -LE unit || rc=1
phase "tests: Python package" scripts/test_python.sh || rc=1
exit "$rc"
