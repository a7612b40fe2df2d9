#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan; build-fuzz/) and runs each for a set time.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, every target)
#
# Targets are fuzz/fuzz_*.cpp (fuzz_gguf -> "gguf"). Seeds come from fuzz/make_corpus.sh
# (build-fuzz/seeds/TARGET, remade when missing); what the fuzzer finds grows the corpus in
# build-fuzz/corpus/TARGET, kept between runs. A crash, sanitizer report, leak, timeout (10 s)
# or out-of-memory (2 GiB) stops that target, leaves its input in build-fuzz/crashes/TARGET/ and
# makes the script fail; replay it with `build-fuzz/fuzz_TARGET FILE`. Prints one line per
# target: seconds, executions, executions/s, corpus size, result. AC_FUZZ_FORK=N runs N worker
# processes per target (libFuzzer -fork=N: N cores, N times the CPU time).
# AC_FUZZ_CLOCK=cpu counts SECONDS as CPU time of the fuzzer, not wall time (for long runs at low
# priority beside other work): the fuzzer is interrupted (SIGINT; it prints its final stats) once
# its CPU time reaches SECONDS, and its per-input timeout is AC_FUZZ_TIMEOUT (default 10 s wall;
# raise it when the fuzzer can be starved by other processes). Not with AC_FUZZ_FORK.
# AC_FUZZ_JOBS=N runs N targets at a time (default 1; .ci/run uses one per core): each target
# still gets its SECONDS, the pass takes 1/N of the wall time. Not with AC_FUZZ_CLOCK=cpu.
# docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# Under `nice -n N`, lower this session's autogroup too: with the kernel's autogroup scheduling
# (sched_autogroup_enabled) a niced process competes only inside its own session, and a fuzzer
# started from another terminal would still take a full core from a timing run.
if (($(nice) > 0)) && [ -w /proc/self/autogroup ]; then echo "$(nice)" >/proc/self/autogroup || true; fi
secs=${1:-60}
shift || true
source scripts/lib/phases.sh
[ -n "${AC_SETUP_DONE:-}" ] || scripts/setup.sh >/dev/null

build_fuzz() {
  cmake -S . -B build-fuzz -G Ninja -DAC_FUZZ=ON -DCMAKE_CXX_COMPILER="${AC_FUZZ_CXX:-clang++}" \
    -DCMAKE_BUILD_TYPE=None >/dev/null
  cmake --build build-fuzz -j"$(nproc)"
}
phase "build (fuzz targets)" build_fuzz

targets=("$@")
if ((${#targets[@]} == 0)); then
  for f in fuzz/fuzz_*.cpp; do t=$(basename "$f" .cpp); targets+=("${t#fuzz_}"); done
fi
[ -d build-fuzz/seeds ] || fuzz/make_corpus.sh build-fuzz/seeds "${AC_BIN:-build/autocompress}"

# halt_on_error with a stack trace for UBSan; LSan is on (libFuzzer's -detect_leaks=1).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_stack_use_after_return=1}
jobs=${AC_FUZZ_JOBS:-1}
if [ "${AC_FUZZ_CLOCK:-wall}" = cpu ] && ((jobs > 1)); then
  echo "AC_FUZZ_CLOCK=cpu does not work with AC_FUZZ_JOBS > 1" >&2; exit 2
fi
for t in "${targets[@]}"; do
  [ -x "build-fuzz/fuzz_$t" ] || { echo "no fuzz target '$t' (build-fuzz/fuzz_$t)" >&2; exit 2; }
done

# Runs one target; its result line goes to build-fuzz/fuzz_TARGET.result, its status is the
# fuzzer's (0 = ok).
run_target() {
  local t=$1 exe=build-fuzz/fuzz_$1 log=build-fuzz/fuzz_$1.log start rc took runs speed corpus
  local result pid tick cpu fork=() args
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/crashes/$t" "build-fuzz/seeds/$t"
  start=$(date +%s)
  [ -n "${AC_FUZZ_FORK:-}" ] && fork=(-fork="$AC_FUZZ_FORK")
  args=("build-fuzz/corpus/$t" "build-fuzz/seeds/$t" -timeout="${AC_FUZZ_TIMEOUT:-10}"
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -use_value_profile=1 -print_final_stats=1
    "${fork[@]}" -artifact_prefix="build-fuzz/crashes/$t/")
  set +e
  if [ "${AC_FUZZ_CLOCK:-wall}" = cpu ]; then
    [ -z "${AC_FUZZ_FORK:-}" ] || { echo "AC_FUZZ_CLOCK=cpu does not work with AC_FUZZ_FORK" >&2; exit 2; }
    "$exe" "${args[@]}" -max_total_time=0 >"$log" 2>&1 &
    pid=$!
    tick=$(getconf CLK_TCK)
    while kill -0 "$pid" 2>/dev/null; do  # utime + stime (fields 14, 15 of /proc/PID/stat)
      cpu=$(awk -v t="$tick" '{sub(/^.*\) /, ""); print int(($12 + $13) / t)}' /proc/$pid/stat 2>/dev/null || echo 0)
      if ((cpu >= secs)); then kill -INT "$pid" 2>/dev/null || true; break; fi
      sleep 5
    done
    wait "$pid"
    rc=$?
    ((rc == 72)) && rc=0  # libFuzzer's exit code after SIGINT (-interrupted_exitcode)
    took=$cpu
  else
    "$exe" "${args[@]}" -max_total_time="$secs" >"$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
  fi
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  if [ -z "$runs" ]; then  # fork mode: the last status line "#RUNS: cov: ..."
    runs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#' || true)
    [ -n "$runs" ] && ((took > 0)) && speed=$((runs / took))
  fi
  corpus=$(ls "build-fuzz/corpus/$t" | wc -l)
  if ((rc == 0)); then result=ok; else result="FAILED (rc $rc, see $log)"; fi
  printf '%-18s %8s %12s %9s %7s  %s\n' "$t" "$took" "${runs:-?}" "${speed:-?}" "$corpus" "$result" \
    >"build-fuzz/fuzz_$t.result"
  return "$rc"
}

failed=()
running=()  # targets started and not yet reported, oldest first
declare -A pids
report_oldest() {  # waits for the oldest running target and prints its line (targets in order)
  local t=${running[0]} rc=0
  wait "${pids[$t]}" || rc=$?
  running=("${running[@]:1}")
  cat "build-fuzz/fuzz_$t.result"
  if ((rc != 0)); then
    failed+=("$t")
    grep -m1 -A12 'ERROR: \|runtime error\|fuzz invariant\|does not name\|deadly signal\|uncaught' \
      "build-fuzz/fuzz_$t.log" | head -20 >&2 || true
  fi
}
run_all() {  # every target, `jobs` at a time
  printf '%-18s %8s %12s %9s %7s  %s\n' target seconds executions exec/s corpus result
  for t in "${targets[@]}"; do
    ((${#running[@]} < jobs)) || report_oldest
    run_target "$t" &
    pids[$t]=$!
    running+=("$t")
  done
  while ((${#running[@]})); do report_oldest; done
}
phase "fuzz ($secs s a target, $jobs at a time)" run_all
if ((${#failed[@]})); then
  echo "fuzz: failures in ${failed[*]}; inputs in build-fuzz/crashes/" >&2
  exit 1
fi
