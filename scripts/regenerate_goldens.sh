#!/usr/bin/env bash
# Regenerates every golden fixture from the field's own code, in one command on a clean machine:
# installs (once) the pinned Python environment of scripts/setup_torch_venv.sh, then runs each
# generator offline (HF_HUB_OFFLINE=1: nothing is downloaded; the models are built from configs
# with transformers' own classes and random weights of fixed seeds). The outputs are
# deterministic: on an unchanged tree, `git status` shows nothing afterwards.
#
#   scripts/regenerate_goldens.sh          every generator below
#   scripts/regenerate_goldens.sh NAME...  only these (hf_golden, hf_golden_moe, ...)
#
# Never a step of CI: CI reads the committed fixtures (tests/golden/hf*/) and needs no PyPI.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${AC_TORCH_VENV:-$HOME/.cache/autocompress/torch-2.11}
[[ -x $VENV/bin/python ]] || AC_TORCH_VENV=$VENV "$ROOT/scripts/setup_torch_venv.sh"
names=("$@")
if ((${#names[@]} == 0)); then
  for g in "$ROOT"/tests/golden/hf_golden*.py; do names+=("$(basename "$g" .py)"); done
fi
for n in "${names[@]}"; do
  script=$ROOT/tests/golden/$n.py
  [[ -f $script ]] || { echo "regenerate_goldens: no generator $script" >&2; exit 2; }
  echo "== $n"
  (cd "$ROOT" && HF_HUB_OFFLINE=1 "$VENV/bin/python" "$script")
done
