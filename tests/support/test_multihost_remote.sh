#!/usr/bin/env bash
# ctest multihost_remote: the remote tier across simulated hosts
# (tests/support/cluster.sh): a redis-server listens inside host 0's
# network namespace; 4 hosts x 2 ranks with node-local caches.
#   test_multihost_remote.sh NPUCACHE_BINARY
# 1. A cold job (tp 2, pp 2, dp 2) writes what it compiles to the remote.
# 2. The same job with empty node-local caches compiles nothing: each host
#    reads each object its ranks need from the remote once (the remote reads
#    equal the distinct (object, host) pairs), no artifact crosses between
#    hosts over MPI, and every host's store gets them.
# 3. The remote stopped (SIGSTOP): the job compiles and succeeds within its
#    bound; every rank that tried warns.
# 4. Three shards (a redis-server in each of hosts 1-3), one killed after a
#    cold job wrote through them: a job with empty node-local caches
#    succeeds, compiles only the dead shard's objects and reads each other
#    object once per host from the live shard holding it.
# Exits 77 (skipped) when not root or when namespaces cannot be made here.
set -euo pipefail
# shellcheck source=cluster_test_lib.sh
. "$(dirname "$0")/cluster_test_lib.sh"

[ $# -eq 1 ] || { echo "usage: $0 NPUCACHE_BINARY" >&2; exit 2; }
npucache="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
[ -x "$npucache" ] || fail "$npucache is not an executable (build the npucache_cli target)"

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cluster="$here/cluster.sh"
sum="$(printf '%s' "$(dirname "$npucache")" | cksum | cut -d' ' -f1)"
prefix="${NPUCACHE_CLUSTER_TEST_PREFIX:-$(printf 'npr%04x-h' $((sum % 65536)))}"
cache="/tmp/npucache-multihost-cache-$prefix"
work="/tmp/npucache-multihost-work-$prefix"
deadline=$((SECONDS + ${NPUCACHE_MULTIHOST_TEST_BUDGET:-400}))
export NPUCACHE_LOG_LEVEL="${NPUCACHE_LOG_LEVEL:-warn}"

redis_pid() { cat "$work/redis${1:-}.pid" 2>/dev/null || true; }
cluster_test_cleanup() {
  local p h
  for h in "" 1 2 3; do
    p="$(redis_pid "$h")"
    if [ -n "$p" ]; then kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; fi
  done
  rm -rf "$work"
}
cluster_test_start 60 python3 redis-server

say "cluster $prefix; removing any leftover of an earlier run"
down
rm -rf "$cache" "$work"
mkdir -p "$work"
start=$SECONDS
cl up 4 --prefix "$prefix" --storage local --cache-path "$cache" >/dev/null
mapfile -t launch < <("$cluster" launch-args --prefix "$prefix")
cl exec "${prefix}0" redis-server --port 6390 --bind 0.0.0.0 --protected-mode no --save "" --appendonly no \
  --daemonize yes --pidfile "$work/redis.pid" --logfile "$work/redis.log" --dir "$work" >/dev/null
for _ in $(seq 100); do
  [ "$(cl exec "${prefix}1" redis-cli -h "${prefix}0" -p 6390 ping 2>/dev/null)" = PONG ] && break
  sleep 0.1
done
url="redis://${prefix}0:6390"
echo "up: 4 hosts, node-local caches, remote $url (host 0's namespace)"

# warmup LIMIT ARGS...: launch/warmup.sh inside host0 across the cluster; sets $out and $rc.
warmup() {
  local lim="$1"
  shift
  rc=0
  out="$(timeout --foreground -k 10 "$(limit "$lim")" "$cluster" exec "${prefix}0" "$root/launch/warmup.sh" \
    "${launch[@]}" --npucache "$npucache" --env NPUCACHE_LOG_LEVEL --autotune-candidates 2 \
    --tp 2 --pp 2 --dp 2 "$@" 2>&1)" || rc=$?
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "warmup $* did not end within $lim s: $out"
}
check() {
  python3 - "$1" "$2" "$3" <<'PY' || fail "$3 (report $1)"
import json, sys
r = json.load(open(sys.argv[1]))
# ranks are placed host by host, 2 per host: the (object, host) pairs some rank needs
pairs = {(m["graph_key"], p["rank"] // 2) for p in r["per_rank"] for m in p["methods"]}
if not eval(sys.argv[2], {"r": r, "pairs": pairs}):
    print(f"not true: {sys.argv[2]}\n" + json.dumps({k: v for k, v in r.items() if k != "per_rank"}, indent=1))
    sys.exit(1)
PY
}

say "1. a cold job writes its compiles to the remote"
warmup 180 --cache-dir "$cache/a" --remote "$url" --report-json "$work/a.json"
[ "$rc" -eq 0 ] || fail "cold warmup exited $rc: $out"
check "$work/a.json" 'r["hosts"] == 4 and r["compiled"] == r["unique_subgraphs"] > 0' "each unique subgraph compiled once"

say "2. empty node-local caches, warm remote"
warmup 180 --cache-dir "$cache/b" --remote "$url" --report-json "$work/b.json"
[ "$rc" -eq 0 ] || fail "warm-remote warmup exited $rc: $out"
check "$work/b.json" 'r["compiled"] == 0' "nothing the remote holds is compiled"
check "$work/b.json" 'r["remote_reads"] == len(pairs)' "one remote read per object per host"
check "$work/b.json" 'r["bytes_between_hosts"] == 0' "no artifact crosses between hosts over MPI"
for h in 0 1 2 3; do
  n="$(cl exec "${prefix}$h" sh -c "ls '$cache/b/objects' 2>/dev/null | grep -c '\\.h5\$' || true")"
  [ "$n" -ge 1 ] || fail "host $h's store got no object"
done
python3 -c "import json; r = json.load(open('$work/b.json')); print(f'ok: 0 compiles, {r[\"remote_reads\"]} remote reads ({r[\"remote_bytes_read\"]} bytes) for {r[\"unique_subgraphs\"]} objects on 4 hosts')"

say "3. the remote stopped (SIGSTOP): one timeout, then compiles"
kill -STOP "$(redis_pid)"
t0=$SECONDS
warmup 120 --cache-dir "$cache/c" --remote "$url?timeout=1" --report-json "$work/c.json"
took=$((SECONDS - t0))
kill -CONT "$(redis_pid)"
[ "$rc" -eq 0 ] || fail "warmup with a stopped remote exited $rc: $out"
check "$work/c.json" 'r["compiled"] == r["unique_subgraphs"]' "the job compiles when the remote does not answer"
grep -q "did not answer in time" <<<"$out" || fail "no warning names the stopped remote: $out"
echo "ok: a stopped remote cost the job $took s in all"

say "4. three shards, one killed: only its keys are misses"
shards=""
for h in 1 2 3; do
  cl exec "${prefix}$h" redis-server --port 6391 --bind 0.0.0.0 --protected-mode no --save "" --appendonly no \
    --daemonize yes --pidfile "$work/redis$h.pid" --logfile "$work/redis$h.log" --dir "$work" >/dev/null
  shards="$shards${shards:+,}redis://${prefix}$h:6391?timeout=1"
done
for h in 1 2 3; do
  for _ in $(seq 100); do
    [ "$(cl exec "${prefix}0" redis-cli -h "${prefix}$h" -p 6391 ping 2>/dev/null)" = PONG ] && break
    sleep 0.1
  done
done
warmup 180 --cache-dir "$cache/d" --remote "$shards" --report-json "$work/d.json"
[ "$rc" -eq 0 ] || fail "cold warmup through the shards exited $rc: $out"
for h in 1 2 3; do
  cl exec "${prefix}0" redis-cli -h "${prefix}$h" -p 6391 --scan --pattern 'npucache:*:obj:*' | sed 's/.*:obj://' \
    >"$work/objects$h"
done
# The shard holding the most objects dies.
d=1
for h in 2 3; do [ "$(wc -l <"$work/objects$h")" -gt "$(wc -l <"$work/objects$d")" ] && d=$h; done
[ -s "$work/objects$d" ] || fail "the shards hold no object"
kill -9 "$(redis_pid "$d")"
warmup 180 --cache-dir "$cache/e" --remote "$shards" --report-json "$work/e.json"
[ "$rc" -eq 0 ] || fail "warmup with a killed shard exited $rc: $out"
grep -q "remote cache shard redis://${prefix}$d:6391" <<<"$out" || fail "no warning names the killed shard: $out"
dead="$(cat "$work/objects$d")"
check "$work/e.json" "r['compiled'] == len({k for k, h in pairs if k in '''$dead'''.split()})" \
  "only the dead shard's objects are compiled"
check "$work/e.json" "r['remote_reads'] == len({(k, h) for k, h in pairs if k not in '''$dead'''.split()})" \
  "one read per object per host on the live shards"
python3 -c "import json; r = json.load(open('$work/e.json')); print(f'ok: a killed shard: {r[\"compiled\"]} compiled, {r[\"remote_reads\"]} remote reads from the live shards')"

down
echo "PASS in $((SECONDS - start)) s"
