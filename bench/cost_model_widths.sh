#!/usr/bin/env bash
# The cost model at every width, as a new user meets it: RUNS times in a row, `profile
# --calibrate` then `validate --count 20` (random prunes of stories15M's shape, seed 7, half of
# them at reduced hidden sizes), each run's errors in total, without the shared bias and per
# hidden size; then how far the RUNS profiles predict the same 21 architectures apart
# (`autocompress_bench agree`). Run it alone: every figure is a latency.
#   usage: bench/cost_model_widths.sh [RUNS]      (default 3)
#   BIN=build/autocompress (the CLI), BENCH=build/autocompress_bench, OUT=out/cost_model_widths,
#   GAP_S=0 (seconds to wait between runs, for profiles taken minutes apart),
#   AC_CPU_ISA=avx2 forces the AVX2 paths on an AVX-512 CPU (profile and validate alike),
#   PROFILE_FLAGS='--no-in-forward' profiles as before the in-forward ratios (a baseline).
#   RUNS may alternate: ALTERNATE=1 runs odd runs with PROFILE_FLAGS and even ones without, so
#   that two models meet the same hour of the machine.
# Prints one JSON line per run and a summary; writes OUT/summary.json.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
bin=${BIN:-build/autocompress}
bench=${BENCH:-build/autocompress_bench}
out=${OUT:-out/cost_model_widths}
gap=${GAP_S:-0}
[ -x "$bin" ] || { echo "build $bin first (scripts/build.sh)" >&2; exit 1; }
mkdir -p "$out"
profiles=()
for r in $(seq 1 "$runs"); do
  [ "$r" -gt 1 ] && [ "$gap" -gt 0 ] && sleep "$gap"
  flags=${PROFILE_FLAGS:-}
  [ "${ALTERNATE:-0}" = 1 ] && [ $((r % 2)) = 0 ] && flags=
  # shellcheck disable=SC2086
  "$bin" profile --scenario cpu-local --calibrate $flags --out "$out/profile_$r.json" > "$out/profile_$r.log" 2>&1
  "$bin" validate --scenario cpu-local --profile "$out/profile_$r.json" --count 20 --seed 7 \
    --out "$out/validate_$r.json" > "$out/validate_$r.log" 2>&1
  profiles+=(--profile "$out/profile_$r.json")
  /usr/bin/env python3 bench/cost_model_widths.py run "$out/validate_$r.json" "$out/profile_$r.json"
done
if [ -x "$bench" ] && [ "$runs" -gt 1 ]; then
  "$bench" agree "${profiles[@]}" > "$out/agree.json" 2> "$out/agree.log" || rm -f "$out/agree.json"
fi
/usr/bin/env python3 bench/cost_model_widths.py summary "$out" "$runs"
