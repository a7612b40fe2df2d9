#!/usr/bin/env bash
# Everything the tests need, each step installing only what is missing: the Debian packages
# (scripts/setup.sh), node-llama-cpp (scripts/setup_node.sh), the tokenizer parity kit
# (scripts/setup_tokenizers.sh) and stories15M (scripts/fetch_stories15m.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/setup_node.sh
scripts/setup_tokenizers.sh
scripts/fetch_stories15m.sh >/dev/null
