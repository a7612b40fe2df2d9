#!/usr/bin/env bash
# Installs, once per machine, the Python environment of the field's reference code and of the GPU
# build: PyTorch 2.11.0 (PyPI's Linux wheel, the CUDA 13.0 build the GPU machine runs), CUDA's
# compiler from PyPI (nvcc, nvvm, crt and cccl of the same CUDA release) and
# tests/golden/requirements-hf.txt (transformers, safetensors, gguf-py, numpy, lm-eval). About
# 5 GB, outside the repository; never a step of CI or of the CLI, which need none of it.
#
#   scripts/setup_torch_venv.sh          install into AC_TORCH_VENV (default
#                                        ~/.cache/autocompress/torch-2.11) and print its python
#
# Then: scripts/build_cuda.sh --tests (finds this environment by itself; docs/gpu.md, "Building
# without a GPU"), HF_HUB_OFFLINE=1 $AC_TORCH_VENV/bin/python tests/golden/hf_golden.py, and the
# `judge` test tier (ctest -L judge: tests/golden/judge_exports.py on our exports,
# tests/golden/judge_lm_eval.py on our task scorer), which finds this environment through
# AC_TORCH_VENV or the default location.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${AC_TORCH_VENV:-$HOME/.cache/autocompress/torch-2.11}
TORCH=2.11.0
CUDA=13.0  # torch 2.11.0's PyPI wheel is built with CUDA 13.0 (torch.version.cuda)
# A Python the wheels exist for (3.10-3.13); the GPU machine's is 3.12.
PY=${PYTHON:-}
if [[ -z $PY ]]; then
  for p in python3.12 python3.13 python3.11 python3.10 python3; do
    command -v "$p" >/dev/null && "$p" -c 'import sys; assert (3, 10) <= sys.version_info[:2] <= (3, 13)' 2>/dev/null && { PY=$p; break; }
  done
fi
[[ -n $PY ]] || { echo "setup_torch_venv: no Python 3.10-3.13 found (set PYTHON)" >&2; exit 1; }
[[ -x $VENV/bin/python ]] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "torch==$TORCH" "nvidia-cuda-nvcc==$CUDA.*" "nvidia-nvvm==$CUDA.*" \
  "nvidia-cuda-crt==$CUDA.*" "nvidia-cuda-cccl==$CUDA.*" -r "$ROOT/tests/golden/requirements-hf.txt"
"$VENV/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "CUDA", torch.version.cuda, "transformers", transformers.__version__)'
echo "$VENV/bin/python"
