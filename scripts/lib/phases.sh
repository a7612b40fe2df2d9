# Sourced by the scripts that run the build and the tests: `phase NAME COMMAND [ARGS...]` runs the
# command, prints how long it took, and appends "NAME<TAB>SECONDS<TAB>STATUS" to $AC_PHASE_LOG
# when that is set (.ci/run prints the table of every phase at the end). Returns the command's
# status.
phase() {
  local name=$1 start rc=0 took
  shift
  start=$(date +%s)
  echo "[phase] $name: started $(date -u +%H:%M:%S) UTC"
  "$@" || rc=$?
  took=$(($(date +%s) - start))
  echo "[phase] $name: $((took / 60)) min $((took % 60)) s$( ((rc == 0)) || echo ", FAILED (status $rc)")"
  if [ -n "${AC_PHASE_LOG:-}" ]; then
    printf '%s\t%s\t%s\n' "$name" "$took" "$( ((rc == 0)) && echo ok || echo "failed ($rc)")" >>"$AC_PHASE_LOG"
  fi
  return "$rc"
}
