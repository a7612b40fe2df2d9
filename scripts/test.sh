#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, fetches stories15M, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/setup_node.sh
scripts/fetch_stories15m.sh >/dev/null
scripts/build.sh
mkdir -p build/test-artifacts
ctest --test-dir build --output-on-failure -j1 --timeout 900 "$@"
