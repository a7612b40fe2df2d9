#!/usr/bin/env bash
# Benchmarks against PyTorch eager, measured in the same run (a shared machine is noisy: only
# ratios of interleaved runs mean something).
#   train       one distillation step on stories15M-sized models (teacher 288-d, student 192-d)
#   importance  importance scoring of stories15M-sized random weights vs the plain forward
#   gemm        the train step's GEMM shapes, oneDNN's sgemm (ours) against OpenBLAS
# Each side runs ROUNDS times, alternating; the ratio is of the medians. Also prints achieved
# GFLOP/s against this CPU's fp32 peak, three ways: measured (`autocompress_bench peak`: FMA chains
# on every thread at once, the instruction peak of the cores this process gets, taken right before
# each of our rounds, since a shared VM's speed can drift by 20% and more within minutes; the share
# is the median over rounds of round / its peak), the best GEMM torch reaches here, and the nominal
# figure from /proc/cpuinfo (cores x MHz x FLOP/cycle: 64 with AVX-512 = 2 FMA units x 16 lanes x 2,
# 32 with AVX2+FMA; an upper bound that a VM's cores need not reach).
# usage: bench/run.sh [train|importance|gemm|all] [ROUNDS]   (builds build/ first if needed)
# AC_CPU_ISA=avx2 bench/run.sh ... runs what an AVX2 + FMA machine (AMD EPYC Zen 3) runs on an
# AVX-512 one, on both sides: our hand-written kernels at AVX2 (common/simd.h), and for ours and
# PyTorch eager alike oneDNN (ONEDNN_MAX_CPU_ISA=AVX2), PyTorch's own kernels
# (ATEN_CPU_CAPABILITY=avx2) and OpenBLAS (OPENBLAS_CORETYPE=Haswell); the FMA peak is then the
# AVX2 one. BUILD_DIR picks another build folder (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
rounds=${2:-3}
build=${BUILD_DIR:-build}
bench=$build/autocompress_bench
[ -x "$bench" ] || { echo "build $bench first (scripts/build.sh)" >&2; exit 1; }
threads=${AC_NUM_THREADS:-$(nproc)}
py=/usr/bin/python3
case "${AC_CPU_ISA:-}" in
  ""|avx512) ;;
  avx2|scalar)
    export ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell ;;
  *) echo "AC_CPU_ISA=$AC_CPU_ISA: expected avx512, avx2 or scalar" >&2; exit 2 ;;
esac
# The same OpenBLAS kernels on both sides: ours re-executes itself with OPENBLAS_CORETYPE set when
# OpenBLAS does not know this CPU (common/runtime.h, ensure_fast_blas_kernels); PyTorch eager
# gets the core ours reports.
peak_json=$(AC_QUIET=1 "$bench" peak)
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  core=$(echo "$peak_json" | $py -c 'import json,sys; b=json.load(sys.stdin)["blas"]; print(b.split(" core ")[-1] if " core " in b else "")')
  [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
fi
echo "BLAS kernels: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset, OpenBLAS default}"
# Which kernels ran (autocompress_bench's "kernels", bench_main.cpp kernels_json).
echo "$peak_json" | $py -c '
import json, sys
k = json.load(sys.stdin)["kernels"]
forced = " (forced by AC_CPU_ISA; the CPU has %s)" % k["cpu_isa"] if k["isa_forced"] else ""
caps = ", ".join(f"{n}={k[n]}" for n in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY") if k[n])
isa, kl, gemm, dnnl = k["isa"], k["fused_kl"], k["gemm"], k.get("onednn_isa", "")
print(f"kernels: hand-written {isa}{forced} | fused KL {kl} | GEMM {gemm}"
      + (f" | oneDNN ISA {dnnl}" if dnnl else "")
      + (f" | caps {caps}" if caps else ""))'

peak=$($py - "$threads" <<'EOF'
import os, re, sys, time, torch
threads = int(sys.argv[1])
flags = open("/proc/cpuinfo").read()
mhz = max(float(m) for m in re.findall(r"cpu MHz\s*:\s*([\d.]+)", flags))
per_cycle = 64 if " avx512f" in flags else (32 if " fma" in flags else 8)
if os.environ.get("AC_CPU_ISA") in ("avx2", "scalar"):  # capped at AVX2 + FMA
    per_cycle = min(per_cycle, 32)
theory = threads * mhz * 1e6 * per_cycle
torch.set_num_threads(threads)
a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
best = 0
for _ in range(5):
    t0 = time.perf_counter(); a @ b; dt = time.perf_counter() - t0
    best = max(best, 2 * 2048 ** 3 / dt)
print(f"{theory / 1e9:.1f} {best / 1e9:.1f} {mhz:.0f} {per_cycle}")
EOF
)
read -r peak_theory peak_gemm mhz per_cycle <<<"$peak"
fma_peak() { AC_NUM_THREADS=$threads echo "$peak_json" | $py -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["gflops_per_s"])'; }
peak_fma=$(fma_peak)
echo "threads $threads | fp32 peak: measured FMA $peak_fma GFLOP/s, best 2048^3 GEMM in torch $peak_gemm GFLOP/s, nominal $peak_theory GFLOP/s ($threads x $mhz MHz x $per_cycle FLOP/cycle)"

run_one() {  # which side -> tokens/s (and GFLOP/s for ours)
  local w=$1 side=$2
  if [ "$side" = ours ]; then
    AC_NUM_THREADS=$threads AC_QUIET=1 "$bench" "$w" --steps 5 --warmup 1
  else
    $py bench/torch_eager.py "$w" --steps 5 --warmup 1 --threads "$threads"
  fi
}

for w in train importance; do
  [ "$which" = all ] || [ "$which" = "$w" ] || continue
  ours=() theirs=() gf=() pk=()
  for ((r = 0; r < rounds; r++)); do
    pk+=("$(fma_peak)")
    o=$(run_one "$w" ours); t=$(run_one "$w" torch)
    ours+=("$($py -c 'import json,sys; print(json.loads(sys.argv[1])["tokens_per_s"])' "$o")")
    gf+=("$($py -c 'import json,sys; print(json.loads(sys.argv[1])["gflops_per_s"])' "$o")")
    theirs+=("$($py -c 'import json,sys; print(json.loads(sys.argv[1])["tokens_per_s"])' "$t")")
  done
  if [ "$w" = train ]; then  # where our step's time goes (last round, phases timed one by one)
    $py -c 'import json,sys; k=json.loads(sys.argv[1])["kernels"]; print("train step GEMM library: " + k["gemm_choice"] + " -> " + k["gemm"])' "$o"
    $py -c 'import json,sys; b=json.loads(sys.argv[1])["breakdown"]; print("train step phases (s): " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in b.items()))' "$o"
    $py -c 'import json,sys; j=json.loads(sys.argv[1]); print("train step: %.0f MB allocated at the peak (weights excluded)" % (j.get("train_peak_bytes", -1) / 1e6))' "$o"
  fi
  $py - "$w" "$peak_theory" "$peak_gemm" "${ours[*]}" "${theirs[*]}" "${gf[*]}" "${pk[*]}" <<'EOF'
import statistics, sys
w, theory, gemm = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
ours, theirs, gf, pk = ([float(x) for x in s.split()] for s in sys.argv[4:8])
o, t, g = statistics.median(ours), statistics.median(theirs), statistics.median(gf)
share = statistics.median(a / b for a, b in zip(gf, pk))
print(f"{w}: autocompress {o:.0f} tok/s, PyTorch eager {t:.0f} tok/s, ratio {o / t:.2f}x | "
      f"{g:.1f} GFLOP/s = {100 * share:.0f}% of the measured FMA peak (median over rounds; peaks "
      f"{' '.join('%.1f' % x for x in pk)}), {100 * g / gemm:.0f}% of best GEMM, "
      f"{100 * g / theory:.0f}% of nominal"
      f" | rounds ours {['%.0f' % x for x in ours]} torch {['%.0f' % x for x in theirs]}")
EOF
done

# gemm: the training step's GEMM shapes through oneDNN's sgemm (our default, src/common/gemm.h)
# and OpenBLAS, alternating; GFLOP/s of the median round.
if [ "$which" = all ] || [ "$which" = gemm ]; then
  gemm_json=$(mktemp)
  AC_NUM_THREADS=$threads AC_QUIET=1 "$bench" gemm > "$gemm_json"
  $py - "$gemm_json" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"gemm ({j['gemm']}, {j['threads']} threads, median of {j['rounds']} alternating rounds), "
      "GFLOP/s oneDNN / OpenBLAS:")
for r in j["shapes"]:
    cells = "  ".join(f"{p} {r[p]['onednn_gflops_per_s']:6.1f} / {r[p]['openblas_gflops_per_s']:6.1f}"
                      for p in ("forward", "dx", "dw"))
    print(f"  M={r['M']} N={r['N']:>5} K={r['K']:>4}: {cells}")
EOF2
  rm -f "$gemm_json"
fi
