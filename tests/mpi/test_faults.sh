#!/usr/bin/env bash
# ctest mpi_faults_ops / mpi_faults_jobs: faults on one host, each run bounded.
#   test_faults.sh ops|jobs FAULT_WORKER NPUCACHE
# ops:  each bounded operation of mpi::Comm (and the watchdog of a blocking
#       one) with a rank that never joins: every other rank reports the step
#       and the missing rank within timeout + 5 s, and mpirun exits.
# jobs: `npucache warmup` with --timeout 0, -1, nan, inf, junk (exit 2
#       before MPI starts); an MPMD launch with different --pp, another
#       --mode, another model config, another subcommand (every rank names the differing ranks and
#       fields, exit non-zero, no raw MPI error); a rank stopped (SIGSTOP)
#       mid-warmup (the others report it within timeout + 5 s, mpirun exits).
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 ops|jobs FAULT_WORKER NPUCACHE" >&2; exit 2; }
part="$1" worker="$2" npucache="$3"
here="$(cd "$(dirname "$0")" && pwd)"
stop_rank="$here/../support/stop_rank.py"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NPUCACHE_LOG_LEVEL="${NPUCACHE_LOG_LEVEL:-warn}"
work="$(mktemp -d /tmp/npucache-faults-XXXXXX)"
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
say() { echo "== $*"; }

# run LIMIT CMD...: runs CMD bounded by LIMIT seconds; sets $out, $rc, $took.
run() {
  local limit="$1" start
  shift
  start=$(date +%s.%N)
  rc=0
  out="$(timeout -k 5 "$limit" "$@" 2>&1)" || rc=$?
  took=$(python3 -c "import sys; print(round($(date +%s.%N) - $start, 2))")
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "$* did not end within $limit s (hung): $out"
}

# count PATTERN: lines of $out matching PATTERN (fixed string).
count() { grep -cF -- "$1" <<<"$out" || true; }

ops() {
  local t=2 op np victim want
  for op in allgather broadcast barrier allreduce recv dup split split_shared watchdog gather; do
    np=3 victim=2
    [ "$op" = gather ] && np=2 victim=1  # rank 0 gathers; a non-root's part of a gather may complete without it
    say "$op: $np ranks, rank $victim never joins, timeout $t s"
    run 60 mpirun -np "$np" --oversubscribe "$worker" "$op" "$victim" "$t"
    echo "$out" | grep -E "rank|step" | head -n 4
    [ "$rc" -ne 0 ] || fail "$op: the job exited 0"
    want="step 'test $op' did not complete within $t s"
    [ "$(count "$want")" -eq $((np - 1)) ] || fail "$op: expected $((np - 1)) ranks to say \"$want\": $out"
    [ "$(count "rank $victim did not answer")" -eq $((np - 1)) ] || fail "$op: rank $victim not named by every other rank: $out"
    if [ "$op" = watchdog ]; then
      [ "$(count "aborting the job")" -ge 1 ] || fail "watchdog: no abort message: $out"
    fi
    python3 -c "import sys; sys.exit(0 if $took <= $t + 5 + 3 else 1)" ||
      fail "$op: took $took s, more than timeout $t + 5 s (+ 3 s to start)"
    echo "ok: $op reported by $((np - 1)) ranks, job ended in $took s"
  done
}

jobs() {
  local t
  for t in 0 -1 nan inf junk ""; do
    say "--timeout '$t'"
    run 30 "$npucache" warmup --tp 1 --pp 1 --cache-dir "$work/never" --timeout "$t"
    [ "$rc" -eq 2 ] || fail "--timeout '$t' exited $rc, not 2: $out"
    grep -qF -- "--timeout '$t' is not a positive number of seconds" <<<"$out" || fail "--timeout '$t': unclear error: $out"
    [ ! -e "$work/never" ] || fail "--timeout '$t': the job started anyway"
  done
  echo "ok: every invalid --timeout is refused with exit 2 before MPI starts"

  say "MPMD: ranks 0, 1 with --pp 1, ranks 2, 3 with --pp 2"
  run 60 mpirun --oversubscribe -np 2 "$npucache" warmup --tp 2 --pp 1 --cache-dir "$work/c" --timeout 20 : \
    -np 2 "$npucache" warmup --tp 2 --pp 2 --cache-dir "$work/c" --timeout 20
  [ "$rc" -ne 0 ] || fail "mismatched --pp: exit 0"
  [ "$(count "ranks 0, 1 have --pp 1, ranks 2, 3 have --pp 2")" -eq 4 ] || fail "mismatched --pp not named on every rank: $out"
  ! grep -qE "MPI_ERR|MPI_ABORT" <<<"$out" || fail "mismatched --pp: a raw MPI error or abort: $out"
  echo "ok: every rank names the ranks and --pp (exit $rc, $took s)"

  say "MPMD: rank 3 with --mode reduce-overhead"
  run 60 mpirun --oversubscribe -np 3 "$npucache" warmup --tp 2 --pp 2 --cache-dir "$work/c" --timeout 20 : \
    -np 1 "$npucache" warmup --tp 2 --pp 2 --cache-dir "$work/c" --timeout 20 --mode reduce-overhead
  [ "$rc" -ne 0 ] || fail "mismatched --mode: exit 0"
  [ "$(count "ranks 0-2 have --mode max-autotune, rank 3 has --mode reduce-overhead")" -eq 4 ] ||
    fail "mismatched --mode not named on every rank: $out"
  echo "ok: every rank names rank 3's --mode"

  say "MPMD: ranks 2, 3 with another model config (--max-seq 32)"
  run 60 mpirun --oversubscribe -np 2 "$npucache" warmup --tp 2 --cache-dir "$work/c" --timeout 20 : \
    -np 2 "$npucache" warmup --tp 2 --cache-dir "$work/c" --timeout 20 --max-seq 32
  [ "$rc" -ne 0 ] || fail "mismatched model config: exit 0"
  [ "$(count "ranks 0, 1 have no --max-seq, ranks 2, 3 have --max-seq 32")" -eq 4 ] ||
    fail "mismatched --max-seq not named on every rank: $out"
  [ "$(count "ranks 0, 1 have model config ")" -eq 4 ] || fail "the differing model config not named on every rank: $out"
  echo "ok: every rank names the ranks with another model config"

  say "MPMD: rank 3 runs generate beside warmup"
  run 60 mpirun --oversubscribe -np 3 "$npucache" warmup --tp 2 --pp 2 --cache-dir "$work/c" --timeout 20 : \
    -np 1 "$npucache" generate --tp 2 --pp 2
  [ "$rc" -ne 0 ] || fail "generate beside warmup: exit 0"
  [ "$(count 'ranks 0-2 run `npucache warmup`, rank 3 runs `npucache generate`')" -eq 4 ] ||
    fail "generate beside warmup not named on every rank: $out"
  echo "ok: no hang, every rank names rank 3's subcommand ($took s)"

  t=5
  say "rank 3 of 4 stopped (SIGSTOP) mid-warmup, --timeout $t"
  local json
  out="$(NPUCACHE_LOG_LEVEL=info python3 "$stop_rank" --match "$work/stop" --ranks 3 --after-line "saved to" \
    --limit 90 -- mpirun --oversubscribe -np 4 -x NPUCACHE_LOG_LEVEL "$npucache" warmup --tp 2 --pp 2 \
    --autotune-candidates 2 --cache-dir "$work/stop" --timeout "$t")" || fail "could not stop rank 3: $out"
  json="$(tail -n 1 <<<"$out")"
  grep -E "npucache: error" <<<"$out" | cut -c1-300
  echo "$json"
  python3 - "$json" "$t" <<'PY' || fail "stopped rank: $out"
import json, sys
r, t = json.loads(sys.argv[1]), float(sys.argv[2])
assert not r["limit_hit"], "the job hung"
assert r["rc"] != 0, "the job exited 0"
late = {k: v for k, v in r["errors"].items() if v > t + 5}
assert set(r["errors"]) == {"0", "1", "2"}, f"ranks reporting: {sorted(r['errors'])}, expected 0, 1, 2"
assert not late, f"reported later than timeout + 5 s: {late}"
assert r["exit_after"] <= t + 5 + 2, f"mpirun exited {r['exit_after']:.1f} s after the stop"
print(f"ok: ranks 0-2 reported within {max(r['errors'].values()):.1f} s of the stop, mpirun exited after {r['exit_after']:.1f} s")
PY
  [ "$(count "rank 3 did not answer")" -eq 3 ] || fail "the stopped rank 3 is not named by ranks 0-2: $out"
}

case "$part" in
  ops) ops ;;
  jobs) jobs ;;
  *) fail "unknown part '$part'" ;;
esac
echo PASS
