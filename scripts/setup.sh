#!/usr/bin/env bash
# Installs what autocompress needs on Debian 12 (safe to rerun: installs only what is missing).
#   libtorch-dev + libopenblas0-openmp (NOT libopenblas-dev: it would make the pthread OpenBLAS
#   the default and torch 1.13 would run its BLAS single-threaded), nlohmann-json, CLI11, fmt,
#   GoogleTest, cmake, ninja, ccache, and python3-torch (the float64 reference of the tests).
#   libjemalloc-dev: the allocator linked into the CLI (peak memory that does not grow with the
#   calibration size; docs/benchmarks.md, "Importance: peak memory vs calibration size").
#   libdnnl-dev: oneDNN's sgemm, which runs the fp32 GEMMs (src/common/gemm.h; libtorch links
#   the same libdnnl).
#   libgloo-dev: headers of Gloo, which libtorch's c10d ProcessGroupGloo (data-parallel distill) needs.
set -euo pipefail

packages=(build-essential cmake ninja-build ccache pkg-config
          libtorch-dev libopenblas0-openmp nlohmann-json3-dev libcli11-dev libfmt-dev libgloo-dev
          libjemalloc-dev libdnnl-dev libgtest-dev python3-torch python3-numpy
          chromium)  # headless browser: the test that renders report.html (test_report_html.cpp)
# PCRE2 (the tokenizer.json regexes, with Unicode properties) and utf8proc (the NFC/NFKC
# normalizers): src/io/hf_tokenizer.cpp.
packages+=(libpcre2-dev libutf8proc-dev)
# The Python package (python/, `pip install ./python`): the headers of Python and its venv.
packages+=(python3-dev python3-venv)
# clang + compiler-rt (libFuzzer, ASan, UBSan runtimes): the fuzz targets (scripts/fuzz.sh).
packages+=(clang libclang-rt-dev)
# node + npm run llama.cpp (node-llama-cpp) in the export tests; a machine may already have them
# from another source (e.g. NodeSource), whose packages conflict with Debian's npm.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "[setup] installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[setup] all Debian packages present"
fi

# torch must use the OpenMP OpenBLAS (the reference BLAS is ~50x slower).
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)
case "$blas" in
  *openblas-openmp*) ;;
  *) echo "[setup] warning: libblas.so.3 is $blas, expected the openblas-openmp build" >&2 ;;
esac
