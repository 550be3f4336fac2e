# shellcheck shell=bash
# Shared by the tests on a simulated cluster (test_cluster.sh,
# test_multihost.sh): messages, the time budget, the preflight that skips
# (exit 77) where namespaces cannot be made, bounded cluster commands and
# the teardown on exit, failure included. The sourcing script sets
# $cluster (cluster.sh), $prefix and $deadline (the value of SECONDS at
# which its budget ends) before calling cluster_test_start, and may define
# cluster_test_cleanup, run after the cluster is down.

say() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }

# Seconds a step may take: at most $1, and never past the budget.
limit() {
  local left=$((deadline - SECONDS))
  [ "$left" -gt 0 ] || fail "the test's time budget is used up"
  if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}

# cluster_test_start STEP_LIMIT TOOL...: skips unless running as root with
# the tools installed and namespaces can be made here; each bounded cluster
# command (cl) then takes at most STEP_LIMIT seconds; the teardown runs on
# every exit.
cluster_test_start() {
  cl_limit="$1"
  shift
  [ "$(id -u)" -eq 0 ] || skip "needs root to create network, UTS and mount namespaces (run ctest as root)"
  local t reason
  for t in ip unshare nsenter mpirun timeout "$@"; do
    command -v "$t" >/dev/null 2>&1 || skip "'$t' is not installed"
  done
  if ! reason="$(timeout 30 "$cluster" check --prefix "$prefix" 2>&1)"; then
    skip "namespaces cannot be created on this machine: $reason"
  fi
  trap cluster_test_teardown EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM HUP
}

# Bounded cluster commands; `down` is always safe to repeat.
cl() { timeout --foreground -k 5 "$(limit "$cl_limit")" "$cluster" "$@"; }
down() { cl down --prefix "$prefix" >/dev/null; }

cluster_test_teardown() {
  local rc=$? out
  trap - EXIT INT TERM HUP
  # When ctest is gone, writing to its pipe would kill the teardown half-way:
  # SIGPIPE is ignored and the output collected. Outside the budget.
  trap '' PIPE
  if ! out="$(timeout -k 5 30 "$cluster" down --prefix "$prefix" 2>&1)"; then
    echo "cleanup: '$cluster down --prefix $prefix' failed; run it by hand: $out" >&2 || true
  fi
  if declare -F cluster_test_cleanup >/dev/null; then cluster_test_cleanup || true; fi
  exit "$rc"
}
