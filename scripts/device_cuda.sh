#!/usr/bin/env bash
# The prepared runs on a GPU machine (docs/gpu.md): build against its CUDA-enabled libtorch, then
# one part, each sized to finish within about 10 minutes (each builds first: a GPU machine may
# come fresh to every call):
#
#   OUT=/path scripts/device_cuda.sh stories [SCENARIO]   profile the GPU for the native engine and
#                                                         validate the cost model on 20
#                                                         stories15M-shaped prunes
#   OUT=/path scripts/device_cuda.sh 1b [SCENARIO]        the same, TinyLlama-1.1B-shaped prunes
#   OUT=/path scripts/device_cuda.sh compress [SCENARIO]  `compress --device cuda` end to end on
#                                                         stories15M, then on a random-weight
#                                                         TinyLlama-1.1B (import random), small
#                                                         budgets; writes summary.txt: stage
#                                                         times, distillation tokens/s, MFU
#                                                         against the GPU's bf16 peak, peak memory
#   scripts/device_cuda.sh prepare                        on the CPU machine, once: the headers
#                                                         (build-cuda-headers/) and stories15M in
#                                                         bf16 (build-cuda-inputs/, 30 MB), the
#                                                         ignored folders a GPU call carries
#
# SCENARIO defaults to h200-native (h200-compress for compress).
#
# REHEARSE=1 runs a part on a CPU machine with the same build (scripts/build_cuda.sh --tests,
# against the GPU machine's torch from PyPI): the same commands with --device cpu, the CPU
# scenarios (cpu-local; cpu-1b for the 1b part) and sizes cut so that each part takes minutes on
# two cores. It checks the build, the carried inputs, every flag and the summary before the GPU
# call; its figures are not the GPU's.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PART=${1:-stories}
INPUTS=$ROOT/build-cuda-inputs
if [[ $PART == prepare ]]; then
  set -e
  cd "$ROOT"
  scripts/build_cuda.sh --headers
  scripts/fetch_stories15m.sh >/dev/null
  scripts/build.sh --target autocompress >/dev/null
  src=$HOME/.cache/autocompress/stories15m
  rm -rf "$INPUTS.tmp" && mkdir -p "$INPUTS.tmp"
  build/autocompress import llama2c "$src/model.bin" "$src/tokenizer.bin" --out "$INPUTS.tmp/stories15m-f32"
  build/autocompress export --model "$INPUTS.tmp/stories15m-f32" --dtype bf16 --out "$INPUTS.tmp/stories15m-bf16"
  rm -rf "$INPUTS.tmp/stories15m-f32" "$INPUTS" && mv "$INPUTS.tmp" "$INPUTS"
  du -sh "$INPUTS" build-cuda-headers
  exit 0
fi
OUT=${OUT:?set OUT to the folder that receives the results}
BUILD_DIR=${BUILD_DIR:-$ROOT/build-cuda}
B=$BUILD_DIR/autocompress
# The sizes of each part: the GPU's, or the rehearsal's (REHEARSE=1, above).
if [[ ${REHEARSE:-0} == 1 ]]; then
  DEVICE=cpu BUILD_ARGS=--tests
  SCENARIO=${2:-$([[ $PART == 1b ]] && echo cpu-1b || echo cpu-local)}
  CAL=(--calibration-models 2 --calibration-repeats 1) COUNT=2 REPEATS=1
  C15=(--seq-len 64 --calibration-sequences 4 --train-sequences 8 --heldout-sequences 4
       --distill-tokens 2048 --distill-batch-size 4)
  C1B=(--seq-len 32 --calibration-sequences 2 --train-sequences 4 --heldout-sequences 2
       --distill-tokens 256 --distill-batch-size 2)
else
  DEVICE=cuda BUILD_ARGS=
  SCENARIO=${2:-$([[ $PART == compress ]] && echo h200-compress || echo h200-native)}
  CAL=() COUNT=20 REPEATS=3
  C15=(--seq-len 256 --calibration-sequences 16 --train-sequences 128 --heldout-sequences 16
       --distill-tokens 262144 --distill-batch-size 32)
  C1B=(--seq-len 512 --calibration-sequences 8 --train-sequences 64 --heldout-sequences 8
       --distill-tokens 131072 --distill-batch-size 8)
fi
mkdir -p "$OUT"
cd "$ROOT"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  BUILD_DIR=$BUILD_DIR scripts/build_cuda.sh $BUILD_ARGS
} > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
tail -2 "$OUT/build.log"
export AC_QUIET=1
# Each step appends to runs.log; a failed step is reported and the next one still runs.
# LIMIT_S (seconds, default 560) bounds each step, so that a slow one leaves the rest of the call.
run() {  # name, then the command's arguments
  local name=$1 t0=$SECONDS; shift
  echo "== $(date -u +%H:%M:%S) $name: autocompress $*" | tee -a "$OUT/commands.txt" >> "$OUT/runs.log"
  if timeout "${LIMIT_S:-560}" "$B" "$@" >> "$OUT/runs.log" 2>&1; then
    echo "$name: ok, $((SECONDS - t0)) s" | tee -a "$OUT/commands.txt"
  else
    echo "$name: FAILED after $((SECONDS - t0)) s" | tee -a "$OUT/commands.txt"
    tail -20 "$OUT/runs.log"
  fi
}
case $PART in
  stories)
    run profile profile --device $DEVICE --scenario "$SCENARIO" --calibrate "${CAL[@]}" --out "$OUT/P.json"
    run validate validate --profile "$OUT/P.json" --scenario "$SCENARIO" --count $COUNT --repeats $REPEATS --seed 1 --out "$OUT/V.json"
    ;;
  1b)
    [[ ${REHEARSE:-0} == 1 ]] || CAL=(--calibration-models 8 --calibration-repeats 2) REPEATS=2
    run profile1b profile --device $DEVICE --scenario "$SCENARIO" --model architectures/tinyllama-1.1b.json --calibrate "${CAL[@]}" --out "$OUT/P1B.json"
    run validate1b validate --profile "$OUT/P1B.json" --scenario "$SCENARIO" --base architectures/tinyllama-1.1b.json --count $COUNT --repeats $REPEATS --seed 1 --out "$OUT/V1B.json"
    ;;
  compress)
    # Small budgets: the stage times, tokens/s, MFU and memory are the figures, not the models.
    M15=$INPUTS/stories15m-bf16
    [[ -f $M15/config.json ]] || { echo "device_cuda: $M15 missing: run 'scripts/device_cuda.sh prepare' on the CPU machine and carry build-cuda-inputs" >&2; exit 1; }
    common=(--scenario "$SCENARIO" --device $DEVICE --precision bf16 --task-items 0 --fit-attempts 1
            --measure-rounds 2 --max-measure-rounds 4 --minitron-retrain-top-k 0
            --autocompress-retrain-top-k 0)
    LIMIT_S=170 run compress15 compress --model "$M15" --out "$OUT/c15" "${common[@]}" "${C15[@]}"
    LIMIT_S=60 run random1b import random architectures/tinyllama-1.1b.json --tokenizer-from "$M15" \
      --seed 1 --out "$BUILD_DIR/tinyllama-random"
    LIMIT_S=330 run compress1b compress --model "$BUILD_DIR/tinyllama-random" --out "$OUT/c1b" \
      "${common[@]}" "${C1B[@]}"
    for run_dir in "$OUT/c15" "$OUT/c1b"; do
      [[ -f $run_dir/report.json ]] || continue
      echo "== $run_dir"
      grep -A9 '"compute"' "$run_dir/report.json"
      grep -A40 '"stages"' "$run_dir/report.json" | grep -E '"stage"|"seconds"' | paste - - | tr -s ' '
    done | tee "$OUT/summary.txt"
    rm -rf "$OUT"/c15/model* "$OUT"/c15/gguf "$OUT"/c1b/model* "$OUT"/c1b/gguf "$OUT"/c*/data
    ;;
  *) echo "device_cuda: part '$PART': expected stories, 1b, compress or prepare" >&2; exit 2 ;;
esac
grep -h "MAPE over" "$OUT/runs.log" || true
