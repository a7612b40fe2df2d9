#!/usr/bin/env bash
# How far apart two profiles of this machine, taken minutes apart, predict the teacher and 20
# prunes (issue 45's second goal), for two ways of profiling met in the same hour: every round
# takes one profile with FLAGS_A and one with FLAGS_B (their order alternating), rounds start
# INTERVAL_S apart, and each way's profiles PAIR_ROUNDS rounds apart are compared with
# `autocompress_bench agree` (stories15M and `--count 20` random prunes, seed 7): the largest
# TPOT / TTFT difference in ms, and as fractions of each profile's own teacher (how the search
# reads a limit given as a fraction of the teacher). Run it alone: every figure is a latency.
#   usage: bench/profile_agreement.sh [ROUNDS]      (default 7: 5 pairs 10 minutes apart)
#   BIN=build/autocompress, BENCH=build/autocompress_bench, OUT=out/profile_agreement,
#   FLAGS_A='--calibrate' (compress's profile), FLAGS_B='--calibrate --passes 6 --calibration-repeats 6',
#   INTERVAL_S=300, PAIR_ROUNDS=2 (2 x 300 s: profiles 10 minutes apart).
# Writes OUT/{a,b}_R.json (profiles), OUT/agree_{a,b}.json and OUT/summary.json; prints the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
bin=${BIN:-build/autocompress}
bench=${BENCH:-build/autocompress_bench}
out=${OUT:-out/profile_agreement}
interval=${INTERVAL_S:-300}
pair=${PAIR_ROUNDS:-2}
flags_a=${FLAGS_A:---calibrate}
flags_b=${FLAGS_B:---calibrate --passes 6 --calibration-repeats 6}
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
done
for way in a b; do
  args=()
  for r in $(seq 1 "$rounds"); do args+=(--profile "$out/${way}_$r.json"); done
  "$bench" agree "${args[@]}" > "$out/agree_$way.json"
done
/usr/bin/env python3 - "$out" "$rounds" "$pair" "$flags_a" "$flags_b" <<'EOF'
import json, sys
out, rounds, pair, flags = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:6]
summary = {}
for way, f in zip("ab", flags):
    a = json.load(open(f"{out}/agree_{way}.json"))
    def rnd(p): return int(p.rsplit("_", 1)[1].split(".")[0])
    ps = [p for p in a["pairs"] if abs(rnd(p["a"]) - rnd(p["b"])) == pair]
    prof = [json.load(open(f"{out}/{way}_{r}.json")) for r in range(1, rounds + 1)]
    keys = ["max_tpot_diff_percent", "max_relative_tpot_diff_percent", "teacher_tpot_diff_percent",
            "max_ttft_diff_percent", "max_relative_ttft_diff_percent"]
    s = {"flags": f, "pairs": len(ps), "seconds_per_profile": [round(p["elapsed_s"], 1) for p in prof]}
    for k in keys:
        v = [p[k] for p in ps]
        s[k] = {"each": [round(x, 2) for x in v], "max": round(max(v), 2),
                "mean": round(sum(v) / len(v), 2), "within_3": sum(x <= 3 for x in v)}
    summary[way] = s
    print(f"{way} ({f}): {len(ps)} pairs {pair} rounds apart; profile "
          f"{min(s['seconds_per_profile'])}-{max(s['seconds_per_profile'])} s")
    for k in keys:
        print(f"  {k:34s} mean {s[k]['mean']:5.2f}  max {s[k]['max']:5.2f}  within 3%: "
              f"{s[k]['within_3']}/{len(ps)}  {s[k]['each']}")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
EOF
