#!/usr/bin/env bash
# ctest mpi_faults_ops / _jobs / _init: faults on one host, each run bounded.
#   test_faults.sh ops|jobs|init FAULT_WORKER NPUCACHE
# ops:  each bounded operation of mpi::Comm (and the watchdog of a blocking
#       one) with a rank that never joins: every other rank reports the step
#       and the missing rank within timeout + 5 s, and mpirun exits.
# jobs: `npucache warmup` with --timeout 0, -1, nan, inf, junk (exit 2
#       before MPI starts); an MPMD launch with different --pp, another
#       --mode, another model config, another subcommand, --report-json on
#       some ranks only, --independent on some, generate with another
#       --model (every rank names the differing ranks and fields, exit 2,
#       no raw MPI error); a rank stopped (SIGSTOP)
#       mid-warmup (the others report it within timeout + 5 s, mpirun exits).
# init: a rank stopped (SIGSTOP) before MPI initialisation (by a launch
#       wrapper, before the program starts) or inside it (after its mark):
#       every other rank names it within the bound + 3 s and mpirun exits,
#       for a program using MpiSession (NPUCACHE_INIT_TIMEOUT) and for
#       launch/warmup.sh and `npucache generate` (their --timeout); marks
#       are cleaned up after a job that started, and a marks directory
#       writable by others is not used (the bound still holds).
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 ops|jobs|init FAULT_WORKER NPUCACHE" >&2; exit 2; }
part="$1" worker="$2" npucache="$3"
here="$(cd "$(dirname "$0")" && pwd)"
stop_rank="$here/../support/stop_rank.py"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NPUCACHE_LOG_LEVEL="${NPUCACHE_LOG_LEVEL:-warn}"
work="$(mktemp -d /tmp/npucache-faults-XXXXXX)"
# Processes a wrapper stopped are continued and killed, whatever happened.
cleanup() {
  local f pid
  for f in "$work"/stopped.*; do
    [ -e "$f" ] || continue
    pid="$(cat "$f")"
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

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

# op_case OP: one bounded operation with a rank that never joins.
op_case() {
  local op="$1" t=2 np=3 victim=2 want
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
}

# The cases mostly wait out their timeouts: two jobs run at once (each in
# its own subshell, its output kept and printed in order). Each stays
# within its bound with other tests beside it (ctest -j2; checked with
# both cores busy).
ops() {
  local ops=(allgather broadcast barrier allreduce recv dup split split_shared watchdog gather) i j failed=0
  for ((i = 0; i < ${#ops[@]}; i += 2)); do
    local pids=()
    for ((j = i; j < i + 2 && j < ${#ops[@]}; ++j)); do
      (op_case "${ops[j]}") >"$work/op.${ops[j]}" 2>&1 &
      pids+=($!)
    done
    for ((j = i; j < i + 2 && j < ${#ops[@]}; ++j)); do
      wait "${pids[j - i]}" || failed=1
      cat "$work/op.${ops[j]}"
    done
  done
  [ "$failed" -eq 0 ] || fail "a bounded operation was not reported as expected (above)"
}

# mismatch WHAT MESSAGE: the MPMD job in $out was refused by the job
# identity handshake: every one of its 4 ranks says MESSAGE, the job exits
# with status 2, and no raw MPI error, abort or timeout shows.
mismatch() {
  [ "$rc" -eq 2 ] || fail "$1: exit status $rc, not 2: $out"
  [ "$(count "$2")" -eq 4 ] || fail "$1: expected every rank to say \"$2\": $out"
  ! grep -qE "MPI_ERR|MPI_ABORT|did not complete within" <<<"$out" || fail "$1: a raw MPI error, abort or timeout: $out"
  echo "ok: $1: every rank names it, exit 2 ($took s)"
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

  # Options that change which collectives run (the report path's check,
  # the coordinator's steps, the model) must agree too.
  say "MPMD: rank 3 alone with --report-json"
  run 60 mpirun --oversubscribe -np 3 "$npucache" warmup --tp 2 --pp 2 --cache-dir "$work/c" --timeout 20 : \
    -np 1 "$npucache" warmup --tp 2 --pp 2 --cache-dir "$work/c" --timeout 20 --report-json "$work/r.json"
  mismatch "--report-json on rank 3 only" "ranks 0-2 have no --report-json, rank 3 has --report-json $work/r.json"
  [ ! -e "$work/r.json" ] || fail "a report was written by a refused job"

  say "MPMD: rank 0 alone with --report-json"
  run 60 mpirun --oversubscribe -np 1 "$npucache" infer --tp 2 --pp 2 --cache-dir "$work/c" --timeout 20 \
    --report-json "$work/r.json" : -np 3 "$npucache" infer --tp 2 --pp 2 --cache-dir "$work/c" --timeout 20
  mismatch "--report-json on rank 0 only" "rank 0 has --report-json $work/r.json, ranks 1-3 have no --report-json"

  say "MPMD: ranks 2, 3 with --independent"
  run 60 mpirun --oversubscribe -np 2 "$npucache" warmup --tp 2 --pp 2 --cache-dir "$work/c" --timeout 20 : \
    -np 2 "$npucache" warmup --tp 2 --pp 2 --cache-dir "$work/c" --timeout 20 --independent
  mismatch "--independent on ranks 2, 3" "ranks 0, 1 have no --independent, ranks 2, 3 have --independent"

  say "MPMD: generate with another --model on ranks 2, 3"
  run 60 mpirun --oversubscribe -np 2 "$npucache" generate --tp 2 --pp 2 --timeout 20 : \
    -np 2 "$npucache" generate --tp 2 --pp 2 --timeout 20 --model tiny-llama-large
  mismatch "generate --model" "ranks 0, 1 have --model tiny-llama, ranks 2, 3 have --model tiny-llama-large"

  t=5
  say "rank 3 of 4 stopped (SIGSTOP) mid-warmup, --timeout $t"
  local json
  out="$(NPUCACHE_LOG_LEVEL=info python3 "$stop_rank" --match "$work/stop" --ranks 3 --after-line "rank-methods loaded" \
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
late = {k: v for k, v in r["errors"].items() if k != "3" and v > t + 5}
# Rank 3 may report too: mpirun continues a stopped rank as it ends the
# job, and its own bound may then pass before the abort reaches it. It can
# only do so after ranks 0-2 have reported (it was stopped until then).
assert {"0", "1", "2"} <= set(r["errors"]), f"ranks reporting: {sorted(r['errors'])}, expected 0, 1, 2"
assert set(r["errors"]) <= {"0", "1", "2", "3"}, f"ranks reporting: {sorted(r['errors'])}"
if "3" in r["errors"]:
    first = min(r["errors"][k] for k in ("0", "1", "2"))
    assert r["errors"]["3"] >= first, f"the stopped rank 3 reported before ranks 0-2: {r['errors']}"
assert not late, f"reported later than timeout + 5 s: {late}"
assert r["exit_after"] <= t + 5 + 2, f"mpirun exited {r['exit_after']:.1f} s after the stop"
print(f"ok: ranks 0-2 reported within {max(r['errors'][k] for k in ('0', '1', '2')):.1f} s of the stop, mpirun exited after {r['exit_after']:.1f} s")
PY
  [ "$(count "rank 3 did not answer")" -eq 3 ] || fail "the stopped rank 3 is not named by ranks 0-2: $out"
  [ "$(count "did not answer")" -eq 3 ] || fail "a rank other than 0-2 named a rank that did not answer: $out"
}

# stop_wrapper NAME PROGRAM RANK: a launch wrapper that runs PROGRAM, except
# that world rank RANK first stops itself (as a rank stopped or stalled
# before MPI initialisation) after leaving its process id in stopped.NAME.
stop_wrapper() {
  cat >"$work/$1" <<EOF
#!/bin/sh
if [ "\${OMPI_COMM_WORLD_RANK:-}" = "$3" ]; then
  echo \$\$ >"$work/stopped.$1"
  kill -STOP \$\$
fi
exec "$2" "\$@"
EOF
  chmod +x "$work/$1"
}

# Whether the process in stopped.NAME is gone (mpirun ended it; a zombie
# not yet reaped counts as gone).
gone() {
  local state
  state="$(ps -o stat= -p "$(cat "$work/stopped.$1")" 2>/dev/null || true)"
  [ -z "$state" ] || [[ "$state" == Z* ]]
}

# init_check WHAT T N MESSAGE: $out holds the bound T and MESSAGE on N
# ranks, the job failed, and it ended within T + 3 s (+ 3 s to start).
init_check() {
  local what="$1" t="$2" n="$3" msg="$4"
  echo "$out" | grep -F "MPI initialisation" | head -n 3 | cut -c1-400
  [ "$rc" -ne 0 ] || fail "$what: the job exited 0: $out"
  # (The stopped rank, continued by mpirun as it ends the job, may print
  # that it was stopped itself; it names no other rank.)
  [ "$(count "MPI initialisation did not complete within $t s")" -ge "$n" ] ||
    fail "$what: expected $n ranks to report the bound of $t s: $out"
  [ "$(count "$msg")" -eq "$n" ] || fail "$what: expected $n ranks to say \"$msg\": $out"
  [ "$(grep -cE "(has|have) not started it|stopped answering|which ranks are missing" <<<"$out")" -eq "$n" ] ||
    fail "$what: a rank named other ranks: $out"
  ! grep -qF "MPI initialised without" <<<"$out" || fail "$what: a rank initialised without the stopped one: $out"
  python3 -c "import sys; sys.exit(0 if $took <= $t + 3 + 3 else 1)" ||
    fail "$what: took $took s, more than the bound $t + 3 s (+ 3 s to start)"
  echo "ok: $what: $n ranks named it, the job ended in $took s"
}

init() {
  local uid t=3
  uid="$(id -u)"
  export NPUCACHE_INIT_DIR="$work/init"
  mkdir -p "$NPUCACHE_INIT_DIR"

  say "a program with MpiSession: rank 1 of 3 stopped before it starts, NPUCACHE_INIT_TIMEOUT=$t"
  stop_wrapper worker "$worker" 1
  NPUCACHE_INIT_TIMEOUT=$t run 60 mpirun -np 3 --oversubscribe -x NPUCACHE_INIT_TIMEOUT -x NPUCACHE_INIT_DIR \
    "$work/worker" init 1 "$t"
  init_check "stopped before MPI_Init" "$t" 2 "rank 1 has not started it"
  gone worker || fail "mpirun left the stopped rank behind"

  say "a program with MpiSession: rank 2 of 3 stopped inside initialisation, NPUCACHE_INIT_TIMEOUT=$t"
  NPUCACHE_INIT_TIMEOUT=$t run 60 mpirun -np 3 --oversubscribe -x NPUCACHE_INIT_TIMEOUT -x NPUCACHE_INIT_DIR \
    "$worker" stop_in_init 2 "$t"
  init_check "stopped inside MPI_Init" "$t" 2 "rank 2 started it and stopped answering"

  say "launch/warmup.sh --timeout $t: rank 2 of 4 stopped before it starts (NPUCACHE_INIT_TIMEOUT=60 is not the bound)"
  stop_wrapper npucache_w "$npucache" 2
  NPUCACHE_INIT_TIMEOUT=60 run 60 "$here/../../launch/warmup.sh" --npucache "$work/npucache_w" --tp 2 --pp 2 \
    --cache-dir "$work/c" --timeout "$t"
  init_check "launch/warmup.sh" "$t" 3 "rank 2 has not started it"
  gone npucache_w || fail "mpirun left the stopped rank of warmup behind"

  say "npucache generate --timeout $t: rank 0 of 2 stopped before it starts"
  stop_wrapper npucache_g "$npucache" 0
  run 60 mpirun -np 2 --oversubscribe -x NPUCACHE_INIT_DIR "$work/npucache_g" generate --tp 2 --tokens 1 --timeout "$t"
  init_check "npucache generate" "$t" 1 "rank 0 has not started it"

  say "marks are removed once a job has started"
  rm -rf "$NPUCACHE_INIT_DIR/npucache-init-$uid"
  run 60 mpirun -np 2 --oversubscribe -x NPUCACHE_INIT_DIR "$npucache" generate --tp 2 --tokens 1 --timeout 20
  [ "$rc" -eq 0 ] || fail "generate on 2 ranks failed: $out"
  [ -d "$NPUCACHE_INIT_DIR/npucache-init-$uid" ] || fail "no marks directory was made"
  [ -z "$(ls -A "$NPUCACHE_INIT_DIR/npucache-init-$uid")" ] ||
    fail "marks left behind: $(ls -laR "$NPUCACHE_INIT_DIR/npucache-init-$uid")"
  echo "ok: the job's marks were removed"

  say "a marks directory writable by others is not used; the bound still holds"
  chmod 0777 "$NPUCACHE_INIT_DIR/npucache-init-$uid"
  NPUCACHE_INIT_TIMEOUT=$t run 60 mpirun -np 3 --oversubscribe -x NPUCACHE_INIT_TIMEOUT -x NPUCACHE_INIT_DIR \
    "$work/worker" init 1 "$t"
  init_check "unsafe marks directory" "$t" 2 "which ranks are missing is unknown (no marks: "
  [ "$(count "npucache-init-$uid is writable by others")" -eq 2 ] || fail "the unsafe directory is not named: $out"
  [ -z "$(ls -A "$NPUCACHE_INIT_DIR/npucache-init-$uid")" ] || fail "marks were written into the unsafe directory"
}

case "$part" in
  ops) ops ;;
  jobs) jobs ;;
  init) init ;;
  *) fail "unknown part '$part'" ;;
esac
echo PASS
