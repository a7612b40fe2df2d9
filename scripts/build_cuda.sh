#!/usr/bin/env bash
# Builds the CLI (and, with --tests, the tests and benchmarks) against the CUDA-enabled libtorch
# inside PyTorch 2.x's Python package, as on a GPU machine that has CUDA, PyTorch and a compiler
# but not this project's Debian packages (the H200 image of docs/gpu.md). The header-only
# libraries (nlohmann/json, CLI11, fmt), and PCRE2 and utf8proc as static libraries, come from
# AC_HEADERS_DIR: copies made on a machine that has them by `scripts/build_cuda.sh --headers`.
# oneDNN and jemalloc are optional there.
#
#   scripts/build_cuda.sh --headers [DIR]   copy the headers to DIR (default build-cuda-headers)
#   scripts/build_cuda.sh                   configure and build build-cuda/autocompress
#   scripts/build_cuda.sh --tests           the same, and the tests and benchmarks (GoogleTest
#                                           from the Debian packages), without oneDNN and
#                                           jemalloc even where they are installed: the GPU
#                                           image's build rehearsed on a CPU machine
#
# Without a CUDA toolkit (no nvcc on PATH or in /usr/local/cuda) the toolkit comes from PyPI's
# wheels beside torch (nvidia-cuda-nvcc, -nvvm, -crt and -cccl of torch's CUDA release, as
# scripts/setup_torch_venv.sh installs them), linked into $BUILD_DIR/cuda-toolkit (docs/gpu.md,
# "Building without a GPU").
#
# Environment: BUILD_DIR (default build-cuda), AC_HEADERS_DIR (default build-cuda-headers), PYTHON
# (default python3 where it imports torch, else scripts/setup_torch_venv.sh's environment
# AC_TORCH_VENV, default ~/.cache/autocompress/torch-2.11),
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
  # PCRE2 and utf8proc as headers and static libraries: a GPU image may have neither their
  # development packages nor pkg-config (CMakeLists.txt takes these when pkg-config finds none).
  lib=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  mkdir -p "$dest.tmp/lib"
  for f in /usr/include/pcre2.h /usr/include/utf8proc.h "$lib/libpcre2-8.a" "$lib/libutf8proc.a"; do
    [[ -f $f ]] || { echo "build_cuda: $f missing (scripts/setup.sh installs libpcre2-dev and libutf8proc-dev)" >&2; exit 1; }
  done
  cp /usr/include/pcre2.h /usr/include/utf8proc.h "$dest.tmp/"
  cp "$lib/libpcre2-8.a" "$lib/libutf8proc.a" "$dest.tmp/lib/"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  echo "headers copied to $dest"
  exit 0
fi
TESTS=OFF
if [[ ${1:-} == --tests ]]; then TESTS=ON; shift; fi
[[ $# == 0 ]] || { echo "build_cuda: unknown argument '$1' (expected --headers [DIR] or --tests)" >&2; exit 2; }

BUILD_DIR=${BUILD_DIR:-$ROOT/build-cuda}
# The Python that holds PyTorch: python3 where it has it (the GPU image), else the environment
# scripts/setup_torch_venv.sh installs.
if [[ -z ${PYTHON:-} ]]; then
  PYTHON=python3
  venv=${AC_TORCH_VENV:-$HOME/.cache/autocompress/torch-2.11}
  python3 -c 'import torch' 2>/dev/null || { [[ -x $venv/bin/python ]] && PYTHON=$venv/bin/python; }
fi
for d in nlohmann CLI fmt; do
  [[ -d $HEADERS/$d ]] || { echo "build_cuda: $HEADERS/$d missing: run 'scripts/build_cuda.sh --headers' where the packages are and bring the folder" >&2; exit 1; }
done
"$PYTHON" -c 'import torch' 2>/dev/null || { echo "build_cuda: '$PYTHON' cannot import torch (set PYTHON to the Python that has PyTorch, or run scripts/setup_torch_venv.sh)" >&2; exit 1; }

# A CUDA toolkit root made of PyPI's wheels, for machines without one: torch's CMake
# (FindCUDAToolkit, Caffe2's cuda.cmake) wants a toolkit's layout (bin/nvcc, include/,
# lib64/libcudart.so, lib64/stubs/libcuda.so), while the wheels ship nvidia/cu13/{bin,include,
# lib,nvvm} with versioned sonames only. The driver's libcuda.so (absent without a GPU) is an empty
# stub, as the toolkit's own stubs/libcuda.so is: torch's libraries load the driver at run time.
pip_toolkit() {  # destination; prints the root
  local dest=$1 site cu d f base
  site=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  cu=$(ls -d "$site"/nvidia/cu1[0-9] 2>/dev/null | sort -V | tail -1)
  [[ -n $cu && -x $cu/bin/nvcc ]] || { echo "build_cuda: no nvcc on PATH, in /usr/local/cuda or in $site/nvidia/cu*/bin: install CUDA's toolkit, or 'pip install nvidia-cuda-nvcc==X.Y.* nvidia-nvvm==X.Y.* nvidia-cuda-crt==X.Y.* nvidia-cuda-cccl==X.Y.*' (X.Y: torch.version.cuda) beside torch" >&2; return 1; }
  rm -rf "$dest" && mkdir -p "$dest/include" "$dest/lib64/stubs"
  # nvcc takes its root to be its own folder's parent (nvcc.profile: TOP = $(_HERE_)/..), so bin/
  # is a real folder of hard links (copies across file systems), not a link into the wheel.
  cp -al "$cu/bin" "$dest/bin" 2>/dev/null || { rm -rf "$dest/bin"; cp -a "$cu/bin" "$dest/bin"; }
  ln -s "$cu/nvvm" "$dest/nvvm"
  for d in "$cu/include" "$site/nvidia/nccl/include" "$site/nvidia/cudnn/include"; do
    [[ -d $d ]] || continue
    for f in "$d"/*; do ln -sfn "$f" "$dest/include/"; done
  done
  for d in "$cu/lib" "$site"/nvidia/{nccl,cudnn,cusparselt,nvshmem}/lib; do
    [[ -d $d ]] || continue
    for f in "$d"/*.so* "$d"/*.a; do
      [[ -f $f ]] || continue
      ln -sfn "$f" "$dest/lib64/"
      base=${f##*/}
      [[ $base == *.so.* ]] && { base=${base%%.so*}.so; [[ -e $dest/lib64/$base ]] || ln -s "$f" "$dest/lib64/$base"; }
    done
  done
  printf '' | "${CC:-cc}" -shared -x c - -o "$dest/lib64/stubs/libcuda.so" -Wl,-soname,libcuda.so.1
  echo "$dest"
}
TOOLKIT=()
if ! command -v nvcc >/dev/null; then
  if [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export PATH=/usr/local/cuda/bin:$PATH
  else
    root=$(pip_toolkit "$BUILD_DIR/cuda-toolkit")
    export PATH=$root/bin:$PATH
    TOOLKIT=(-DCUDAToolkit_ROOT="$root" -DCUDA_TOOLKIT_ROOT_DIR="$root")
    echo "CUDA toolkit from PyPI's wheels: $root"
  fi
fi
nvcc --version | tail -1
# Torch's own folder in the prefix path too: TorchConfig finds libc10.so and libtorch.so with
# find_library, which would otherwise prefer a system libtorch (Debian's libtorch-dev) to the wheel's.
TORCH_DIR=$("$PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)
TORCH_PREFIX="$TORCH_DIR/share/cmake;$TORCH_DIR"
"$PYTHON" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPUs", torch.cuda.device_count())' 2>/dev/null
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S "$ROOT" -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DAC_HEADERS_DIR="$HEADERS" "${TOOLKIT[@]}" \
  -DAC_OPTIONAL_CPU_LIBS=ON -DAC_WITHOUT_CPU_LIBS=$TESTS -DAC_BUILD_TESTS=$TESTS \
  ${CXX_STANDARD:+-DCMAKE_CXX_STANDARD=$CXX_STANDARD}
if [[ $TESTS == ON ]]; then
  cmake --build "$BUILD_DIR" -j "$(nproc)"
  echo "built $BUILD_DIR/autocompress and $BUILD_DIR/autocompress_tests"
else
  cmake --build "$BUILD_DIR" --target autocompress -j "$(nproc)"
  echo "built $BUILD_DIR/autocompress"
fi
