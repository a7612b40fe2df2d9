#!/usr/bin/env bash
# Configures and builds autocompress in ./build: everything (CLI, benchmarks, tests), or only the
# targets named with --target (scripts/run_default.sh builds the CLI alone).
# Usage: scripts/build.sh [--target NAME ...] [cmake configure args]
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
while [ $# -gt 0 ] && [ "$1" = --target ]; do
  [ $# -ge 2 ] || { echo "scripts/build.sh: --target needs a target name" >&2; exit 2; }
  targets+=(--target "$2")
  shift 2
done
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)" "${targets[@]}"
