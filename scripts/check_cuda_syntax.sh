#!/usr/bin/env bash
# Compiles every source with CUDA-only code (#ifdef AC_WITH_CUDA) as a CUDA build would, without a
# GPU and without a CUDA-enabled libtorch: -fsyntax-only against Debian's libtorch headers (which
# include c10/cuda and c10d's ProcessGroupNCCL.hpp) and the CUDA toolkit's headers (cuda_runtime_api.h,
# nccl.h). What it checks is that the GPU code is well-formed C++ against those APIs; linking and
# running wait for a GPU machine (scripts/build_cuda.sh, scripts/device_cuda.sh; docs/gpu.md).
#
#   scripts/check_cuda_syntax.sh            CUDA_HOME defaults to /usr/local/cuda
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CXX=${CXX:-g++}
for h in cuda_runtime_api.h nccl.h; do
  [[ -f $CUDA_HOME/include/$h ]] || { echo "check_cuda_syntax: $CUDA_HOME/include/$h missing (set CUDA_HOME to a CUDA toolkit)" >&2; exit 1; }
done
[[ -d /usr/include/c10/cuda ]] || { echo "check_cuda_syntax: /usr/include/c10/cuda missing (scripts/setup.sh installs libtorch-dev)" >&2; exit 1; }
# Debian's headers lack the one c10/cuda header CMake generates (c10/cuda/impl/
# cuda_cmake_macros.h, from cuda_cmake_macros.h.in in PyTorch's source): supplied here as the
# CUDA wheels ship it.
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
mkdir -p "$stub/c10/cuda/impl"
printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > "$stub/c10/cuda/impl/cuda_cmake_macros.h"
# The definitions of the CPU build's compile line (TorchConfig, c10d), and the two a CUDA build adds.
flags=(-std=gnu++17 -fsyntax-only -DAC_WITH_CUDA=1 -DUSE_C10D_NCCL -DUSE_C10D_GLOO -DUSE_DISTRIBUTED
       -DUSE_RPC -D_GLIBCXX_USE_CXX11_ABI=1 -Isrc -isystem /usr/include/torch/csrc/api/include
       -isystem "$CUDA_HOME/include" -isystem "$stub")
mapfile -t files < <(grep -rl --include='*.cpp' 'AC_WITH_CUDA' src)
for f in "${files[@]}"; do
  echo "check_cuda_syntax: $f"
  "$CXX" "${flags[@]}" "$f"
done
echo "check_cuda_syntax: ${#files[@]} files compile as a CUDA build"
