#!/usr/bin/env bash
# How well do cheap signals rank pruned candidates by the quality they reach after the final
# distillation? (docs/benchmarks.md, "The ranking of candidates".) Per setting, a pool of
# feasible candidates from every source a search has, each distilled with the final recipe while
# its held-out KL is recorded along the way; bench/ranking.py then scores each proxy by its
# Kendall tau and Spearman rho against the final KL and the final task accuracy, its top-1 hit
# and its regret, and writes OUT/ranking.json and OUT/ranking.svg (JSON, SVG: e.g. the committed
# docs/ranking*.json, .svg).
#
#   bench/ranking.sh                  (settings: SETTINGS, default "stories15m-game stories15m-serving")
#
# The pool of a setting (bench/ranking.py pool), at least POOL (12) distinct feasible candidates:
#   - the differentiable search's pick and its ranked proposals, Gumbel seeds SEEDS (1 2 3);
#   - the same search with attention removable in at most 1, 2, 3 layers (--max-attention-free-layers;
#     a capped space that cannot reach the limits is recorded as infeasible and left out);
#   - Minitron's uniform grid shapes, best first by KL after pruning.
# Every search runs without its retraining, so that the pool is what the searches propose.
# Per candidate (OUT/SETTING/cand-NN/):
#   r = 0           held-out KL right after pruning (eval --teacher)
#   short-R         a distillation of R tokens with its own schedule (SHORT_TOKENS, default 8192:
#                   compress's lightweight retraining, 1/8 of the final budget), its held-out KL
#   bld-B           blockwise local distillation alone (distill --tokens 0 --bld-tokens B, B in
#                   BLD_TOKENS, default "8192 32768"), its held-out KL
#   final-bld-B     with FINAL_BLD=B: the final recipe started from a blockwise distillation of B
#                   tokens (distill --bld-tokens B), its learning curve (does BLD help the result?)
#   final           FINAL_TOKENS (65536) with the final recipe (compress's: batch 8 x 256 tokens,
#                   lr 1e-3 cosine to 1e-4, 10 warm-up steps), held-out KL after 2k, 4k, 8k, 16k,
#                   32k and 64k tokens (distill --eval-at-tokens), then the task files (eval --tasks)
# Shared by every setting: training text (256 stories), held-out text (HELDOUT stories), the task
# files (TASK_ITEMS items per family from 512 task stories), 32 calibration stories and the
# teacher's importance on them; cpu-local also a profile of this CPU.
#
# Resumable: every output is written atomically and skipped when present.
# Environment: OUT (out/ranking), SETTINGS, SEEDS, POOL, SHORT_TOKENS, FINAL_TOKENS, HELDOUT (64),
# TASK_ITEMS (1000), DISTILL_SEED (1), BLD_TOKENS, FINAL_BLD, BIN, JSON and SVG (where the report
# goes; default OUT/ranking.json, .svg), SHARD=I/N (this process distills only the candidates whose
# number is I modulo N and writes no report: start N of them once OUT/SETTING/pool.json exists, then
# run once more without SHARD for the report).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/ranking}
settings=(${SETTINGS:-stories15m-game stories15m-serving})
seeds=(${SEEDS:-1 2 3})
pool=${POOL:-12}
short_tokens=(${SHORT_TOKENS:-8192})
final_tokens=${FINAL_TOKENS:-65536}
heldout=${HELDOUT:-64}
task_items=${TASK_ITEMS:-1000}
distill_seed=${DISTILL_SEED:-1}
bld_tokens=(${BLD_TOKENS:-8192 32768})
final_bld=${FINAL_BLD:-}
shard=${SHARD:-}
if [ -n "$shard" ] && ! [[ "$shard" =~ ^[0-9]+/[1-9][0-9]*$ && ${shard%/*} -lt ${shard#*/} ]]; then
  echo "bench/ranking.sh: SHARD must be I/N with 0 <= I < N (e.g. 0/2), found '$shard'" >&2; exit 2
fi
curve=2048,4096,8192,16384,32768,65536

scripts/setup.sh >/dev/null
scripts/setup_tokenizers.sh >/dev/null
model_dir=$(scripts/fetch_stories15m.sh)
if [ -z "${BIN:-}" ]; then scripts/build.sh --target autocompress >/dev/null; fi
bin=${BIN:-build/autocompress}
ckpt=${AC_CACHE_DIR:-$HOME/.cache/autocompress}/stories15m/hf
[ -f "$ckpt/config.json" ] || $bin import llama2c "$model_dir/model.bin" "$model_dir/tokenizer.bin" --out "$ckpt"

log() { echo "[ranking $(date -u +%H:%M:%S)] $*"; }
# Writes FILE through a temporary name, so that an interrupted step leaves nothing half-written.
atomic() { local f=$1; shift; "$@" "$f.tmp" && mv "$f.tmp" "$f"; }
sample() { $bin sample --model "$ckpt" --count "$1" --seed "$2" "${@:3:$#-3}" --out "${@: -1}" >/dev/null; }
# The final recipe: compress's distillation (pipeline/stages.cpp distill_options).
recipe=(--batch-size 8 --seq-len 256 --lr 1e-3 --min-lr 1e-4 --seed "$distill_seed")

data=$out/data
mkdir -p "$data"
[ -f "$data/train.tokens" ] || { log "sampling 256 training stories"; atomic "$data/train.tokens" sample 256 20261; }
[ -f "$data/heldout.tokens" ] || { log "sampling $heldout held-out stories"; atomic "$data/heldout.tokens" sample "$heldout" 20262 --exclude "$data/train.tokens"; }
[ -f "$data/calibration.tokens" ] || { log "sampling 32 calibration stories"; atomic "$data/calibration.tokens" sample 32 20271 --exclude "$data/heldout.tokens"; }
[ -f "$data/tasks.tokens" ] || { log "sampling 512 task stories"; atomic "$data/tasks.tokens" sample 512 20263 --exclude "$data/train.tokens"; }
if [ ! -d "$data/tasks" ]; then
  log "building the task files (at most $task_items items per family)"
  rm -rf "$data/tasks.tmp"
  $bin make-tasks --model "$ckpt" --data "$data/tasks.tokens" --seed 20264 --cloze-items "$task_items" \
    --ending-items "$task_items" --character-items "$task_items" --out "$data/tasks.tmp" >/dev/null
  mv "$data/tasks.tmp" "$data/tasks"
fi
tasks=()
for f in "$data"/tasks/*.jsonl; do tasks+=(--tasks "$f"); done
[ -f "$data/teacher_tasks.json" ] || atomic "$data/teacher_tasks.json" $bin eval --model "$ckpt" "${tasks[@]}" --out >/dev/null
[ -f "$data/importance.safetensors" ] || { log "importance"; $bin importance --model "$ckpt" --data "$data/calibration.tokens" --out "$data/importance.safetensors" >/dev/null; }

for setting in "${settings[@]}"; do
  dir=$out/$setting
  mkdir -p "$dir/searches"
  prof=()
  if [ "$setting" = cpu-local ]; then
    [ -f "$data/profile.json" ] || { log "profiling this CPU"; $bin profile --device cpu --scenario cpu-local --calibrate --out "$data/profile.json" >/dev/null; }
    prof=(--profile "$data/profile.json")
  fi
  search() {  # NAME [search options...]
    local name=$1; shift
    [ -f "$dir/searches/$name.json" ] || [ -f "$dir/searches/$name.infeasible" ] && return
    log "$setting: search $name"
    if ! $bin search --model "$ckpt" --importance "$data/importance.safetensors" --scenario "$setting" \
      "${prof[@]}" --data "$data/calibration.tokens" --out "$dir/searches/$name.json" "$@" \
      >"$dir/searches/$name.log" 2>&1; then
      # A capped space may not reach the limits: recorded, and the pool does without it.
      grep -q "no architecture meets the limits" "$dir/searches/$name.log" || { tail -5 "$dir/searches/$name.log" >&2; exit 1; }
      log "  infeasible: $(grep -o 'no architecture meets.*' "$dir/searches/$name.log" | head -1)"
      touch "$dir/searches/$name.infeasible"
    fi
  }
  for s in "${seeds[@]}"; do search "autocompress-s$s" --method autocompress --seed "$s"; done
  for n in 1 2 3; do search "autocompress-attnfree$n" --method autocompress --seed 1 --max-attention-free-layers "$n"; done
  search minitron --method minitron
  [ -f "$dir/pool.json" ] || python3 bench/ranking.py pool "$dir" --size "$pool"
  for arch in "$dir"/cand-*/arch.json; do
    c=$(dirname "$arch")
    if [ -n "$shard" ]; then ((10#${c##*cand-} % ${shard#*/} == ${shard%/*})) || continue; fi
    [ -d "$c/pruned" ] || $bin prune --model "$ckpt" --importance "$data/importance.safetensors" --arch "$arch" --out "$c/pruned" >/dev/null
    # Blockwise local distillation alone (distill --tokens 0 --bld-tokens B), then held-out KL.
    for b in "${bld_tokens[@]}"; do
      [ -f "$c/bld-$b.json" ] && continue
      rm -rf "$c/bld-$b" "$c/bld-$b.state"
      $bin distill --teacher "$ckpt" --student "$c/pruned" --data "$data/train.tokens" --tokens 0 \
        --bld-tokens "$b" --seq-len 256 --seed "$distill_seed" --out "$c/bld-$b" >"$c/bld-$b.log" 2>&1
      atomic "$c/bld-$b.json" $bin eval --model "$c/bld-$b" --teacher "$ckpt" --data "$data/heldout.tokens" --out >/dev/null
      cp "$c/bld-$b/bld.json" "$c/bld-$b.blocks.json"
      rm -rf "$c/bld-$b"
    done
    # The final recipe started from the blockwise distillation of FINAL_BLD tokens.
    if [ -n "$final_bld" ] && [ ! -f "$c/final-bld-$final_bld/eval_log.csv" ]; then
      resume=()
      [ -d "$c/final-bld-$final_bld.state" ] && resume=(--resume)
      $bin distill --teacher "$ckpt" --student "$c/pruned" --data "$data/train.tokens" --tokens "$final_tokens" \
        "${recipe[@]}" --warmup 10 --bld-tokens "$final_bld" --eval-data "$data/heldout.tokens" --eval-at-tokens "$curve" \
        --out "$c/final-bld-$final_bld" "${resume[@]}" >"$c/final-bld-$final_bld.log" 2>&1 || { tail -5 "$c/final-bld-$final_bld.log" >&2; exit 1; }
      rm -f "$c/final-bld-$final_bld/model.safetensors"
    fi
    [ -f "$c/final/eval_log.csv" ] && [ -f "$c/tasks.json" ] && continue
    log "$setting: $(basename "$c") $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["describe"])' "$arch")"
    [ -f "$c/r0.json" ] || atomic "$c/r0.json" $bin eval --model "$c/pruned" --teacher "$ckpt" --data "$data/heldout.tokens" --out >/dev/null
    for r in "${short_tokens[@]}"; do
      if [ ! -f "$c/short-$r.json" ]; then
        rm -rf "$c/short-$r" "$c/short-$r.state"
        $bin distill --teacher "$ckpt" --student "$c/pruned" --data "$data/train.tokens" --tokens "$r" \
          "${recipe[@]}" --warmup $((r / 2048 / 6 > 1 ? r / 2048 / 6 : 1)) --out "$c/short-$r" >"$c/short-$r.log" 2>&1
        atomic "$c/short-$r.json" $bin eval --model "$c/short-$r" --teacher "$ckpt" --data "$data/heldout.tokens" --out >/dev/null
        rm -rf "$c/short-$r"
      fi
    done
    if [ ! -f "$c/final/eval_log.csv" ]; then
      resume=()
      [ -d "$c/final.state" ] && resume=(--resume)
      $bin distill --teacher "$ckpt" --student "$c/pruned" --data "$data/train.tokens" --tokens "$final_tokens" \
        "${recipe[@]}" --warmup 10 --eval-data "$data/heldout.tokens" --eval-at-tokens "$curve" \
        --out "$c/final" "${resume[@]}" >"$c/final.log" 2>&1 || { tail -5 "$c/final.log" >&2; exit 1; }
    fi
    [ -f "$c/tasks.json" ] || atomic "$c/tasks.json" $bin eval --model "$c/final" "${tasks[@]}" --out >/dev/null
  done
done
[ -z "$shard" ] || { log "shard $shard done: run again without SHARD for the report"; exit 0; }
python3 bench/ranking.py report "$out" --json "${JSON:-$out/ranking.json}" --svg "${SVG:-$out/ranking.svg}"
