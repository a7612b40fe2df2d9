#!/usr/bin/env bash
# The prepared runs on a GPU machine (docs/gpu.md): build against its CUDA-enabled libtorch,
# profile the GPU for the native engine and validate the cost model on 20 random prunes, writing
# at most 7 files under $OUT. Two parts, one command each (each sized to finish within about 10
# minutes; the second reuses the first's build):
#
#   OUT=/path scripts/device_cuda.sh stories [SCENARIO]   build; stories15M-shaped prunes
#   OUT=/path scripts/device_cuda.sh 1b [SCENARIO]        TinyLlama-1.1B-shaped prunes
#
# SCENARIO defaults to h200-native. Needs build-cuda-headers/ (made by scripts/build_cuda.sh
# --headers on a machine with the Debian packages, copied beside the sources).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT to the folder that receives the results}
PART=${1:-stories}
SCENARIO=${2:-h200-native}
BUILD_DIR=${BUILD_DIR:-$ROOT/build-cuda}
B=$BUILD_DIR/autocompress
mkdir -p "$OUT"
cd "$ROOT"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  BUILD_DIR=$BUILD_DIR scripts/build_cuda.sh
} > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
tail -2 "$OUT/build.log"
export AC_QUIET=1
# Each step appends to runs.log; a failed step is reported and the next one still runs.
run() {  # name, then the command's arguments
  local name=$1 t0=$SECONDS; shift
  echo "== $(date -u +%H:%M:%S) $name: autocompress $*" | tee -a "$OUT/commands.txt" >> "$OUT/runs.log"
  if "$B" "$@" >> "$OUT/runs.log" 2>&1; then
    echo "$name: ok, $((SECONDS - t0)) s" | tee -a "$OUT/commands.txt"
  else
    echo "$name: FAILED after $((SECONDS - t0)) s" | tee -a "$OUT/commands.txt"
    tail -20 "$OUT/runs.log"
  fi
}
case $PART in
  stories)
    run profile profile --device cuda --scenario "$SCENARIO" --calibrate --out "$OUT/P.json"
    run validate validate --profile "$OUT/P.json" --scenario "$SCENARIO" --count 20 --repeats 3 --seed 1 --out "$OUT/V.json"
    ;;
  1b)
    run profile1b profile --device cuda --scenario "$SCENARIO" --model architectures/tinyllama-1.1b.json --calibrate --calibration-models 8 --calibration-repeats 2 --out "$OUT/P1B.json"
    run validate1b validate --profile "$OUT/P1B.json" --scenario "$SCENARIO" --base architectures/tinyllama-1.1b.json --count 20 --repeats 2 --seed 1 --out "$OUT/V1B.json"
    ;;
  *) echo "device_cuda: part '$PART': expected stories or 1b" >&2; exit 2 ;;
esac
grep -h "MAPE over" "$OUT/runs.log" || true
