#!/usr/bin/env bash
# Builds the CLI against the CUDA-enabled libtorch inside PyTorch 2.x's Python package, for a GPU
# machine that has CUDA, PyTorch and a compiler but not this project's Debian packages (such as
# the H200 image of docs/gpu.md). The header-only libraries (nlohmann/json, CLI11, fmt) come from
# AC_HEADERS_DIR: copies made on a machine that has them by `scripts/build_cuda.sh --headers`.
# oneDNN and jemalloc are optional there, the tests are left out (they run on the CPU build).
#
#   scripts/build_cuda.sh --headers [DIR]   copy the headers to DIR (default build-cuda-headers)
#   scripts/build_cuda.sh                   configure and build build-cuda/autocompress
#
# Environment: BUILD_DIR (default build-cuda), AC_HEADERS_DIR (default build-cuda-headers), PYTHON
# (default python3; a PyTorch image may have its own, e.g. /opt/torch/.venv/bin/python3),
# CXX_STANDARD (default 17, or what libtorch's CMake target requires).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HEADERS=${AC_HEADERS_DIR:-$ROOT/build-cuda-headers}

if [[ ${1:-} == --headers ]]; then
  dest=${2:-$HEADERS}
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  for d in nlohmann CLI fmt; do
    [[ -d /usr/include/$d ]] || { echo "build_cuda: /usr/include/$d missing (scripts/setup.sh installs it)" >&2; exit 1; }
    cp -r "/usr/include/$d" "$dest.tmp/"
  done
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  echo "headers copied to $dest"
  exit 0
fi

BUILD_DIR=${BUILD_DIR:-$ROOT/build-cuda}
PYTHON=${PYTHON:-python3}
for d in nlohmann CLI fmt; do
  [[ -d $HEADERS/$d ]] || { echo "build_cuda: $HEADERS/$d missing: run 'scripts/build_cuda.sh --headers' where the packages are and bring the folder" >&2; exit 1; }
done
# find_package(Torch) of a CUDA wheel needs the toolkit (nvcc).
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
TORCH_PREFIX=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
"$PYTHON" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPUs", torch.cuda.device_count())'
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S "$ROOT" -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DAC_HEADERS_DIR="$HEADERS" \
  -DAC_OPTIONAL_CPU_LIBS=ON -DAC_BUILD_TESTS=OFF ${CXX_STANDARD:+-DCMAKE_CXX_STANDARD=$CXX_STANDARD}
cmake --build "$BUILD_DIR" --target autocompress -j "$(nproc)"
echo "built $BUILD_DIR/autocompress"
