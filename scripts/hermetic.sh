#!/usr/bin/env bash
# Runs a command the way the `unit` test tier must be able to run: no network, no model files,
# no node and no chromium.
#
#   scripts/hermetic.sh COMMAND [ARGS...]
#
# - network: a new network namespace holding only the loopback device (`unshare -n` as root,
#   `unshare -rn` otherwise); where namespaces are not allowed it says so and runs without one;
# - model files: AC_CACHE_DIR is an empty temporary folder and AC_STORIES15M_DIR is unset, so
#   scripts/fetch_stories15m.sh's cache is out of reach;
# - node, npm and chromium: PATH is a folder of links to every program on the current PATH
#   except those;
# - the npm packages installed into the tree (tools/*/node_modules: node-llama-cpp;
#   tests/*/node_modules: the tokenizer parity kit): an empty folder is mounted over each, where
#   a mount namespace is allowed (as root).
# The command's exit status is returned. Used by .ci/run for `ctest -L unit`.
set -euo pipefail
(($# > 0)) || { echo "usage: scripts/hermetic.sh COMMAND [ARGS...]" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ac-hermetic.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/cache"
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -d "$d" ] || continue
  for f in "$d"/*; do
    name=${f##*/}
    case "$name" in
      node | nodejs | npm | npx | chromium | chromium-browser | google-chrome*) continue ;;
    esac
    [ -x "$f" ] && [ ! -e "$work/bin/$name" ] && ln -s "$f" "$work/bin/$name"
  done
done

unset AC_STORIES15M_DIR
export AC_CACHE_DIR="$work/cache" PATH="$work/bin"

# The loopback device comes up inside the namespace (some tests talk to themselves over it).
inner='command -v ip >/dev/null && ip link set lo up 2>/dev/null; exec "$@"'
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" -eq 0 ] && unshare -n -m true 2>/dev/null; then
  hide=""
  for d in "$root"/tools/*/node_modules "$root"/tests/*/node_modules; do
    [ -d "$d" ] && hide+="mount -t tmpfs -o ro,size=1m none '$d' || exit 97; "
  done
  inner="mount --make-rprivate / && $hide$inner"
  exec_ns=(unshare -n -m)
elif [ "$(id -u)" -eq 0 ] && unshare -n true 2>/dev/null; then
  echo "[hermetic] no mount namespace: tools/*/node_modules and tests/*/node_modules stay visible" >&2
  exec_ns=(unshare -n)
elif unshare -rn true 2>/dev/null; then
  exec_ns=(unshare -rn)
else
  echo "[hermetic] network namespaces are not allowed here: running with the network" >&2
  exec_ns=()
fi
set +e
"${exec_ns[@]}" bash -c "$inner" hermetic "$@"
rc=$?
exit $rc
