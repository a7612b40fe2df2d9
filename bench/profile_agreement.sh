#!/usr/bin/env bash
# How far apart two profiles of this machine, taken minutes apart, predict the teacher and 20
# prunes (issue 45's second goal), for two ways of profiling met in the same hour: every round
# takes one profile with FLAGS_A and one with FLAGS_B (their order alternating), rounds start
# INTERVAL_S apart, and each way's profiles PAIR_ROUNDS rounds apart are compared with
# `autocompress_bench agree` (stories15M and `--count 20` random prunes, seed 7). With MEASURE=1
# each round also measures those 21 models (`validate --count 20 --seed 7`, with the round's
# first-kind profile), so that the profiles' disagreement over a gap stands beside the machine's
# own over the same gap. Figures per pair (bench/profile_agreement.py): the largest TPOT / TTFT
# difference, the drift every model shares, what is left after it, and the difference as
# fractions of each one's teacher. Run it alone: every figure is a latency.
#   usage: bench/profile_agreement.sh [ROUNDS]      (default 7: 5 pairs 10 minutes apart)
#   BIN=build/autocompress, BENCH=build/autocompress_bench, OUT=out/profile_agreement,
#   FLAGS_A='--calibrate' (compress's profile), FLAGS_B='--calibrate --passes 3 --calibration-repeats 3'
#   (the profile before 2026-12-07),
#   INTERVAL_S=300, PAIR_ROUNDS=2 (2 x 300 s: profiles 10 minutes apart), MEASURE=1.
# Writes OUT/{a,b}_R.json (profiles), OUT/validate_R.json (measured), OUT/agree_{a,b}.json and
# OUT/summary.json; prints the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
bin=${BIN:-build/autocompress}
bench=${BENCH:-build/autocompress_bench}
out=${OUT:-out/profile_agreement}
interval=${INTERVAL_S:-300}
pair=${PAIR_ROUNDS:-2}
measure=${MEASURE:-1}
flags_a=${FLAGS_A:---calibrate}
flags_b=${FLAGS_B:---calibrate --passes 3 --calibration-repeats 3}
[ -x "$bin" ] && [ -x "$bench" ] || { echo "build $bin and $bench first (scripts/build.sh)" >&2; exit 1; }
mkdir -p "$out"
profile() {  # WAY ROUND FLAGS...
  local way=$1 r=$2
  shift 2
  local t0=$SECONDS
  "$bin" profile --scenario cpu-local "$@" --out "$out/${way}_$r.json" > "$out/${way}_$r.log" 2>&1
  echo "round $r $way: $((SECONDS - t0)) s ($(date -u +%H:%M:%S) UTC)"
}
start=$SECONDS
for r in $(seq 1 "$rounds"); do
  wait_s=$((start + (r - 1) * interval - SECONDS))
  ((wait_s > 0)) && sleep "$wait_s"
  # shellcheck disable=SC2086
  if ((r % 2)); then profile a "$r" $flags_a; profile b "$r" $flags_b
  else profile b "$r" $flags_b; profile a "$r" $flags_a; fi
  if ((measure)); then  # the machine itself, the same models, this round
    t0=$SECONDS
    "$bin" validate --scenario cpu-local --profile "$out/a_$r.json" --count 20 --seed 7 \
      --out "$out/validate_$r.json" > "$out/validate_$r.log" 2>&1
    echo "round $r measured: $((SECONDS - t0)) s"
  fi
done
for way in a b; do
  args=()
  for r in $(seq 1 "$rounds"); do args+=(--profile "$out/${way}_$r.json"); done
  "$bench" agree "${args[@]}" > "$out/agree_$way.json"
done
/usr/bin/env python3 bench/profile_agreement.py "$out" "$rounds" "$pair" "$flags_a" "$flags_b"
