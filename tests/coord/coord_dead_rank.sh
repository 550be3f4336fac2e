#!/usr/bin/env bash
# ctest mpi_coord_dead_rank: a rank that never arrives at a step of the
# coordinator (the key all-gather; injected through the coordinator's
# transport, tests/coord/fault_transport.h) is named by every other rank
# within the coordinator's timeout (4 s) plus the roll call's grace, and the
# job ends.
#   coord_dead_rank.sh TEST_MPI_COORD_FAULTS MPIEXEC [MPIEXEC FLAGS...]
set -euo pipefail

[ $# -ge 2 ] || { echo "usage: $0 TEST_MPI_COORD_FAULTS MPIEXEC [FLAGS...]" >&2; exit 2; }
bin="$1" mpiexec="$2"
shift 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NPUCACHE_TEST_COORD_DEAD=1 NPUCACHE_LOG_LEVEL="${NPUCACHE_LOG_LEVEL:-warn}"
np=8 dead=3 timeout=4 grace=5

fail() { echo "FAIL: $*" >&2; exit 1; }
# The job ends in an abort, which skips the test's own clean-up: its
# temporary directories go in one of this run's, removed on exit.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export TMPDIR="$scratch"

start=$(date +%s.%N)
rc=0
out="$(timeout -k 5 120 "$mpiexec" -np "$np" "$@" "$bin" --gtest_filter=CoordFaults.ADeadRankIsNamedByEveryOtherRank 2>&1)" ||
  rc=$?
took=$(python3 -c "print(round($(date +%s.%N) - $start, 2))")
compgen -G "$scratch/npucache-coordfaults-*-ADeadRankIsNamedByEveryOtherRank-*" >/dev/null ||
  fail "the job left no temporary directory in TMPDIR ($scratch): it did not run the test: $out"
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "the job did not end within 120 s (hung): $out"
[ "$rc" -ne 0 ] || fail "the job exited 0: $out"
grep "coord dead rank:" <<<"$out" || true
named=0
for ((r = 0; r < np; ++r)); do
  [ "$r" -eq "$dead" ] && continue
  line="$(grep -F "coord dead rank: rank $r: " <<<"$out" || true)"
  [ -n "$line" ] || fail "rank $r said nothing: $out"
  grep -qF "TimeoutError after" <<<"$line" || fail "rank $r did not stop with a TimeoutError: $line"
  grep -qE "rank $dead[ ,(].*did not answer|rank $dead did not answer" <<<"$line" || fail "rank $r did not name rank $dead: $line"
  secs="$(sed -E 's/.*TimeoutError after ([0-9.]+) s.*/\1/' <<<"$line")"
  python3 -c "import sys; sys.exit(0 if $secs <= $timeout + $grace else 1)" ||
    fail "rank $r named rank $dead after $secs s, more than the timeout $timeout s + $grace s"
  named=$((named + 1))
done
[ "$named" -eq $((np - 1)) ] || fail "$named ranks named rank $dead, expected $((np - 1))"
echo "ok: rank $dead named by the $named other ranks within $timeout + $grace s; the job ended in $took s"
