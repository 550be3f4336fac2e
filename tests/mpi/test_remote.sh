#!/usr/bin/env bash
# The remote tier under mpiexec (ctest mpi_remote): a real redis-server on a
# free loopback port; 4 ranks (tp 2, pp 2), each with its own cache
# directory, warm it; 4 ranks with empty directories then start from it:
# nothing compiled, one remote read per object (all ranks share one host),
# the host's other ranks served over the exchange; infer from empty
# directories gives the single-process tokens; a stopped server (SIGSTOP)
# costs one timeout and the job compiles.
#   test_remote.sh NPUCACHE REDIS_SERVER
set -euo pipefail
cli=$1
redis=$2
work=$(mktemp -d /tmp/npucache-mpi-remote.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$redis" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --daemonize no \
  --logfile "$work/redis.log" &
rpid=$!
cleanup() {
  kill -CONT "$rpid" 2>/dev/null || true
  kill -9 "$rpid" 2>/dev/null || true
  wait "$rpid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 100); do
  [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
  sleep 0.05
done
url="redis://127.0.0.1:$port"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# run NAME COMMAND [ARGS...]: 4 ranks, rank r's cache in $work/NAME/r<r>.
run() {
  local name=$1
  shift
  timeout 200 mpiexec -n 4 ${NPUCACHE_MPIEXEC_FLAGS:---oversubscribe} sh -c \
    'exec "$@" --cache-dir "'"$work/$name"'/r$OMPI_COMM_WORLD_RANK"' sh "$cli" "$@" --tp 2 --pp 2 --timeout 60 \
    --report-json "$work/$name.json" >"$work/$name.log" 2>&1 || {
    cat "$work/$name.log" >&2
    fail "$name exited with an error"
  }
}
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$work/$1.json" "$2"; }

run warm warmup --remote "$url"
[ "$(field warm compiled)" -gt 0 ] || fail "the warming job compiled nothing"
[ "$(field warm remote_reads)" = 0 ] || fail "the warming job read the empty remote"
export NPUCACHE_METRICS_FILE="$work/job.prom"
run fresh warmup --remote "$url" --progress always
unset NPUCACHE_METRICS_FILE
keys=$(field fresh unique_subgraphs)
# Warm work counted as warm: the remote's readers and the ranks they served.
[ "$(field fresh schema_version)" = 2 ] || fail "report schema_version $(field fresh schema_version)"
[ "$(field fresh hit_remote)" = "$keys" ] || fail "$(field fresh hit_remote) hit_remote, $keys expected"
[ "$(field fresh received)" = "$((8 - keys))" ] || fail "$(field fresh received) received, $((8 - keys)) expected"
[ "$(field fresh warm)" = 8 ] || fail "$(field fresh warm) of 8 rank-methods warm"
grep -q "^  warm              8 of 8 rank-methods" "$work/fresh.log" || fail "the job table's warm line"
grep -q "^  served            0 hit_local, $keys hit_remote, 0 reused_other_layout, $((8 - keys)) received, 0 compiled" \
  "$work/fresh.log" || { cat "$work/fresh.log" >&2; fail "the job table does not split the rank-methods"; }
# `stats` of the ranks' directories says the same, summed.
split=$(for r in 0 1 2 3; do "$cli" stats "$work/fresh/r$r" --json; done | python3 -c '
import json, sys
d = json.JSONDecoder(); t = sys.stdin.read().strip(); s = [0, 0, 0, 0]; i = 0
while i < len(t):
    o, i = d.raw_decode(t, i)
    while i < len(t) and t[i].isspace(): i += 1
    for k, f in enumerate(("hit_remote", "received", "compiled", "hit_local")): s[k] += o[f]
print(*s)')
[ "$split" = "$keys $((8 - keys)) 0 0" ] || fail "stats of the fresh directories: hit_remote received compiled hit_local = $split"
# Rank 0's metrics file holds the job's figures, summed over its ranks.
promtool check metrics <"$work/job.prom" || fail "promtool rejects the job's metrics file"
grep -qx "npucache_hits_total{source=\"remote\"} $keys" "$work/job.prom" &&
  grep -qx "npucache_hits_total{source=\"rank\"} $((8 - keys))" "$work/job.prom" &&
  grep -qx "npucache_compiles_total 0" "$work/job.prom" ||
  fail "the job's metrics file: $(cat "$work/job.prom")"
# Rank 0's progress line says the same: the readers and receivers of the
# remote's objects received every rank-method, nothing compiled or loaded.
grep -q "npucache: 2/2 methods (decode [0-9.]* s), 8/8 rank-methods ready: 0 loaded, 0 compiled, 8 received" \
  "$work/fresh.log" || { cat "$work/fresh.log" >&2; fail "the progress line does not count the remote's rank-methods"; }
[ "$(field fresh compiled)" = 0 ] || fail "a warm remote still compiled $(field fresh compiled)"
[ "$(field fresh remote_reads)" = "$keys" ] ||
  fail "$(field fresh remote_reads) remote reads for $keys objects on one host (one each expected)"
[ "$(field fresh fetched)" -gt 0 ] || fail "the host's other ranks did not receive over the exchange"
[ "$(field fresh remote_bytes_read)" -gt 0 ] || fail "no remote bytes counted"
echo "fresh caches: $keys objects, $(field fresh remote_reads) remote reads, $(field fresh remote_bytes_read) bytes, 0 compiles"
# Each rank's directory now serves it locally.
run again warmup --remote off
# (again used new directories: it compiled; the fresh ones are now local)
run fresh warmup --remote off
[ "$(field fresh loaded)" = "$(( 4 * 2 ))" ] || fail "the fresh directories were not committed locally"
run infer infer --remote "$url" --tokens 4
[ "$(field infer compiled)" = 0 ] || fail "infer from an empty cache compiled"
[ "$(field infer tokens_match_single_process)" = True ] || fail "infer tokens differ from the single-process run"
# A stopped server: one timeout, then compiles; the job succeeds.
kill -STOP "$rpid"
start=$(date +%s)
run stopped warmup --remote "$url?timeout=1"
took=$(($(date +%s) - start))
kill -CONT "$rpid"
[ "$(field stopped compiled)" -gt 0 ] || fail "the job with a stopped remote did not compile"
grep -q "did not answer in time" "$work/stopped.log" || fail "no warning about the stopped remote"
[ "$took" -lt 40 ] || fail "a stopped remote cost $took s"
echo "mpi_remote: ok"
