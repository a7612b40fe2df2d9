#!/usr/bin/env bash
# The one prepared run on a lent GPU machine (docs/gpu.md): build against its CUDA-enabled
# libtorch, profile the GPU for the native engine, validate the cost model on 20 random prunes
# of stories15M's shape and of TinyLlama-1.1B's shape, and write everything under $OUT.
# Needs build-cuda-headers/ (scripts/build_cuda.sh --headers, carried with the working tree).
#
#   OUT=/path scripts/device_cuda.sh [SCENARIO]      (default scenario: h200-native)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT to the folder that receives the results}
SCENARIO=${1:-h200-native}
mkdir -p "$OUT"
cd "$ROOT"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  scripts/build_cuda.sh
} > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
tail -3 "$OUT/build.log"
B=build-cuda/autocompress
export AC_QUIET=1
run() {  # name, then the command's arguments
  local name=$1; shift
  echo "== $name: $*" | tee -a "$OUT/commands.txt"
  local t0=$SECONDS
  "$B" "$@" > "$OUT/$name.txt" 2>&1 || { tail -20 "$OUT/$name.txt"; return 1; }
  echo "$name: $((SECONDS - t0)) s" | tee -a "$OUT/commands.txt"
  tail -6 "$OUT/$name.txt"
}
run profile   profile --device cuda --scenario "$SCENARIO" --calibrate --out "$OUT/P.json"
run validate  validate --profile "$OUT/P.json" --scenario "$SCENARIO" --count 20 --repeats 3 --seed 1 --out "$OUT/V.json"
run profile1b profile --device cuda --scenario "$SCENARIO" --model architectures/tinyllama-1.1b.json --calibrate --out "$OUT/P1B.json"
run validate1b validate --profile "$OUT/P1B.json" --scenario "$SCENARIO" --base architectures/tinyllama-1.1b.json --count 20 --repeats 3 --seed 1 --out "$OUT/V1B.json"
date -u >> "$OUT/commands.txt"
