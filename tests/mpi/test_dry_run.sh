#!/usr/bin/env bash
# The dry run against the real run that follows it (ctest mpi_dry_run), on
# one store state each time, under real mpiexec with tiny-llama:
#  a. 8 ranks (tp 2, pp 4), an empty cache: the dry run predicts compiles and
#     no loads and writes nothing (the directory is not even created); the
#     real warmup (which also fills a real redis-server) does, rank-method
#     by rank-method, what it predicted;
#  b. the same cache at another layout (4 ranks, tp 2, pp 2): dry run and
#     real run agree, and the dry run leaves every file of the cache as it
#     was (listing and contents hashed), and its metrics file
#     (NPUCACHE_METRICS_FILE) too, which the real run writes;
#  c. the same cache at 8 ranks with its indexes lost (objects kept): the
#     dry run predicts reads of the store's objects, no compile, and agrees;
#  d. 8 ranks with a fresh cache directory and the remote warmed in a.,
#     through the launcher and `infer`: the dry run predicts reads from the
#     remote and no compile, writes nothing locally nor to the remote, and
#     the real infer agrees;
#  e. 2 ranks whose cache directory cannot be made (its parent is a regular
#     file): the dry run predicts the method runs uncached, as the real run
#     does, and agrees with it.
# "Agree": the same top-level counts (loaded, compiled, fetched,
# remote_reads) and, for every rank and method, the same outcome (hit,
# compiled, fetched, remote, read_store) and source rank (owner).
#   test_dry_run.sh NPUCACHE LAUNCH_DIR REDIS_SERVER
set -euo pipefail
cli=$1
launch=$2
redis=$3
work=$(mktemp -d /tmp/npucache-dry-run.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$redis" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --daemonize no \
  --logfile "$work/redis.log" &
rpid=$!
cleanup() {
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
# run NAME NP JOB [ARGS...]: NP ranks of `npucache JOB`, report $work/NAME.json.
run() {
  local name=$1 np=$2
  shift 2
  # shellcheck disable=SC2086  # the flags are words
  timeout 200 mpiexec -n "$np" ${NPUCACHE_MPIEXEC_FLAGS:---oversubscribe} "$cli" "$@" --timeout 60 \
    --report-json "$work/$name.json" >"$work/$name.log" 2>&1 || {
    cat "$work/$name.log" >&2
    fail "$name exited with an error"
  }
}
# The cache directory's state: every path with its contents' hash ("absent"
# when there is no directory).
state() {
  if [ -d "$1" ]; then
    (cd "$1" && find . -printf '%p %y %s\n' | sort && find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
  else
    echo absent
  fi
}
# agree DRY REAL: the dry run's report predicts the real one.
agree() {
  python3 - "$work/$1.json" "$work/$2.json" <<'EOF'
import json, sys
dry, real = (json.load(open(p)) for p in sys.argv[1:3])
assert dry.get("dry_run") is True, "the dry run's report lacks \"dry_run\": true"
assert "dry_run" not in real, "the real run's report says it is a dry run"
problems = []
for f in ("loaded", "compiled", "fetched", "remote_reads", "unique_subgraphs"):
    if dry[f] != real[f]:
        problems.append(f"{f}: predicted {dry[f]}, real {real[f]}")
def outcomes(rep):
    out = {}
    for r in rep["per_rank"]:
        for m in r["methods"]:
            out[(r["rank"], m["method"])] = {k: m[k] for k in ("hit", "compiled", "fetched", "remote", "read_store", "owner", "graph_key")}
    return out
d, r = outcomes(dry), outcomes(real)
if set(d) != set(r):
    problems.append(f"rank-methods differ: predicted {sorted(d)}, real {sorted(r)}")
for k in sorted(set(d) & set(r)):
    if d[k] != r[k]:
        problems.append(f"rank {k[0]} {k[1]}: predicted {d[k]}, real {r[k]}")
if problems:
    sys.exit("the dry run disagrees with the real run:\n  " + "\n  ".join(problems))
print(f"agree: {len(d)} rank-methods, {real['loaded']} loaded, {real['compiled']} compiled, "
      f"{real['fetched']} fetched, {real['remote_reads']} remote reads")
EOF
}
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$work/$1.json" "$2"; }

# a. An empty cache at 8 ranks.
cache="$work/cache"
run a_dry 8 warmup --tp 2 --pp 4 --cache-dir "$cache" --remote "$url" --dry-run
[ "$(state "$cache")" = absent ] || fail "the dry run on an empty cache created $cache"
[ "$(redis-cli -p "$port" dbsize)" = 0 ] || fail "the dry run wrote to the remote"
[ "$(field a_dry loaded)" = 0 ] || fail "the dry run predicts loads from an empty cache"
[ "$(field a_dry compiled)" -gt 0 ] || fail "the dry run predicts no compile on an empty cache"
grep -q "rank 0 prompt: compile (absent" "$work/a_dry.log" || {
  cat "$work/a_dry.log" >&2
  fail "the dry run does not say rank 0's prompt compiles and why"
}
grep -q "the job would compile" "$work/a_dry.log" || fail "the dry run does not say the job would compile"
run a_real 8 warmup --tp 2 --pp 4 --cache-dir "$cache" --remote "$url"
agree a_dry a_real

# b. A layout change: the same cache at 4 ranks, tp 2, pp 2.
before=$(state "$cache")
prom="$work/npucache.prom"
echo "known text" >"$prom"
NPUCACHE_METRICS_FILE="$prom" run b_dry 4 warmup --tp 2 --pp 2 --cache-dir "$cache" --dry-run
[ "$(state "$cache")" = "$before" ] || {
  diff <(echo "$before") <(state "$cache") >&2 || true
  fail "the dry run changed the cache"
}
[ "$(cat "$prom")" = "known text" ] || fail "the dry run rewrote the metrics file: $(cat "$prom")"
grep -q "nearest entry .*place: stored 'world8global_rank" "$work/b_dry.log" || {
  cat "$work/b_dry.log" >&2
  fail "the dry run after a layout change does not name the nearest entry of the other layout"
}
NPUCACHE_METRICS_FILE="$prom" run b_real 4 warmup --tp 2 --pp 2 --cache-dir "$cache"
agree b_dry b_real
grep -q '^npucache_hits_total{source="local"} ' "$prom" || fail "the real run did not write the metrics file"


# c. Lost indexes: the store keeps its objects, the entries are gone; the
# owners read their store's objects (new entries), nothing compiles.
rm -rf "$cache"/npucache.models.*.h5 "$cache/deltas"
before=$(state "$cache")
run c_dry 8 warmup --tp 2 --pp 4 --cache-dir "$cache" --dry-run
[ "$(state "$cache")" = "$before" ] || fail "the dry run changed the cache whose indexes were lost"
grep -q "load (the store's object of the same computation" "$work/c_dry.log" || {
  cat "$work/c_dry.log" >&2
  fail "the dry run does not say the owners read their store's objects"
}
[ "$(field c_dry compiled)" = 0 ] || fail "the dry run predicts compiles although the store holds every object"
run c_real 8 warmup --tp 2 --pp 4 --cache-dir "$cache"
agree c_dry c_real

# d. A fresh cache directory fed by the remote warmed in a., through the
# launcher and `infer`.
fresh="$work/fresh"
keys=$(redis-cli -p "$port" dbsize)
NPUCACHE_BIN="$cli" timeout 200 "$launch/infer.sh" --tp 2 --pp 4 --cache-dir "$fresh" --remote "$url" --tokens 2 \
  --timeout 60 --dry-run --report-json "$work/d_dry.json" >"$work/d_dry.log" 2>&1 || {
  cat "$work/d_dry.log" >&2
  fail "infer.sh --dry-run exited with an error"
}
[ "$(state "$fresh")" = absent ] || fail "the dry run created $fresh"
[ "$(redis-cli -p "$port" dbsize)" = "$keys" ] || fail "the dry run changed the remote"
[ "$(field d_dry compiled)" = 0 ] || fail "the dry run predicts compiles although the remote holds every object"
[ "$(field d_dry remote_reads)" -gt 0 ] || fail "the dry run predicts no read from the remote"
grep -q "fetch from the remote" "$work/d_dry.log" || fail "the dry run does not say it fetches from the remote"
grep -q "the job would start warm" "$work/d_dry.log" || fail "the dry run does not say the job would start warm"
run d_real 8 infer --tp 2 --pp 4 --cache-dir "$fresh" --remote "$url" --tokens 2
agree d_dry d_real

# e. A cache directory that cannot be made: every rank runs uncached.
: >"$work/a-file"
run e_dry 2 warmup --tp 2 --cache-dir "$work/a-file/cache" --dry-run
grep -q "rank 0 prompt: .*uncached: .*cannot be used" "$work/e_dry.log" || {
  cat "$work/e_dry.log" >&2
  fail "the dry run does not say the ranks whose cache cannot be made run uncached"
}
grep -q "rank-methods would run uncached" "$work/e_dry.log" || fail "the dry run's summary counts no uncached method"
run e_real 2 warmup --tp 2 --cache-dir "$work/a-file/cache"
grep -q "uncached" "$work/e_real.log" || fail "the real run with an unusable cache did not run uncached"
agree e_dry e_real
echo "mpi_dry_run: ok"
