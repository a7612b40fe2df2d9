#!/usr/bin/env bash
# Installs node-llama-cpp 3.21.1 (llama.cpp with prebuilt linux-x64 CPU binaries) into
# tools/llamacpp/node_modules: the llama.cpp client autocompress runs (calibrate / validate
# --engine llama.cpp, compress's llama.cpp stage, bench/gguf_types.sh) and the llama.cpp tests use.
# Safe to rerun: does nothing when the pinned version is already there. Never builds llama.cpp.
# The CUDA/Vulkan/other-platform prebuilts (optional dependencies) are skipped: CPU only.
set -euo pipefail
cd "$(dirname "$0")/../tools/llamacpp"
want=3.21.1
have=$(node -p "try { require('./node_modules/node-llama-cpp/package.json').version } catch (e) { '' }" 2>/dev/null || true)
if [ "$have" = "$want" ] && [ -d node_modules/@node-llama-cpp/linux-x64 ]; then
  echo "[setup_node] node-llama-cpp $want present"
  exit 0
fi
echo "[setup_node] installing node-llama-cpp $want (CPU prebuilt binaries)"
if [ -f package-lock.json ]; then
  npm ci --omit=optional --no-audit --no-fund
else
  npm i -E --omit=optional --no-audit --no-fund node-llama-cpp@$want @node-llama-cpp/linux-x64@$want
fi
