#!/usr/bin/env bash
# ctest multihost_coordinator: the coordinator across simulated hosts
# (tests/support/cluster.sh), 2 ranks per host.
#   test_multihost.sh NPUCACHE_BINARY
# 1. 2 hosts, node-local caches: one writer per host's store; the artifact
#    crosses between hosts once per host (bytes_between_hosts at most half
#    of a flat broadcast's, + 10%); a warm rerun hits on every rank of every
#    host; ranks started with different --pp (MPMD) are named on every rank;
#    a stopped rank (SIGSTOP) and a stopped host are reported by every other
#    rank within timeout + 5 s and mpirun exits; the ranks of one host killed
#    mid-warmup end the job with an error within the timeout.
# 2. 2 hosts, one directory shared by both: one writer per file.
# 3. 4 hosts, node-local caches: a job on 2 hosts compiles each region once
#    for both stores (the region waves); then the same model on 4
#    hosts compiles nothing (the new hosts get the artifacts from the old
#    ones' stores, and copy the regions they hold into their own), one
#    writer per host's store; a warm rerun hits everywhere.
# 4. 4 hosts, one shared directory: one writer per file, each object once.
# Exits 77 (skipped) when not root or when namespaces cannot be made here.
# Every step is bounded; all of them by $NPUCACHE_MULTIHOST_TEST_BUDGET
# seconds (default 480, below ctest's TIMEOUT, so the teardown on exit
# always runs). The prefix is stable per build tree (a rerun removes what a
# killed run left) and differs between build trees.
set -euo pipefail
# shellcheck source=cluster_test_lib.sh
. "$(dirname "$0")/cluster_test_lib.sh"

[ $# -eq 1 ] || { echo "usage: $0 NPUCACHE_BINARY" >&2; exit 2; }
npucache="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
[ -x "$npucache" ] || fail "$npucache is not an executable (build the npucache_cli target)"

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cluster="$here/cluster.sh"
stop_rank="$here/stop_rank.py"
sum="$(printf '%s' "$(dirname "$npucache")" | cksum | cut -d' ' -f1)"
prefix="${NPUCACHE_CLUSTER_TEST_PREFIX:-$(printf 'npm%04x-h' $((sum % 65536)))}"
cache="/tmp/npucache-multihost-cache-$prefix"
work="/tmp/npucache-multihost-work-$prefix"
deadline=$((SECONDS + ${NPUCACHE_MULTIHOST_TEST_BUDGET:-480}))
export NPUCACHE_LOG_LEVEL="${NPUCACHE_LOG_LEVEL:-warn}"

cluster_test_cleanup() { rm -rf "$work"; }
cluster_test_start 60 python3

up() {  # up N STORAGE
  down
  rm -rf "$cache"
  cl up "$1" --prefix "$prefix" --storage "$2" --cache-path "$cache" >/dev/null
  mapfile -t launch < <("$cluster" launch-args --prefix "$prefix")
  echo "up: $1 hosts, $2 storage at $cache"
}

# warmup LIMIT ARGS...: launch/warmup.sh inside host0 across the cluster;
# sets $out and $rc.
warmup() {
  local lim="$1"
  shift
  rc=0
  out="$(timeout --foreground -k 10 "$(limit "$lim")" "$cluster" exec "${prefix}0" "$root/launch/warmup.sh" \
    "${launch[@]}" --npucache "$npucache" --env NPUCACHE_LOG_LEVEL --autotune-candidates 2 "$@" 2>&1)" || rc=$?
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "warmup $* did not end within $lim s: $out"
}

# check REPORT PYTHON-EXPRESSION MESSAGE: the expression over the report r.
check() {
  python3 - "$1" "$2" "$3" <<'PY' || fail "$3 (report $1)"
import json, sys
r = json.load(open(sys.argv[1]))
methods = [m for p in r["per_rank"] for m in p["methods"]]
if not eval(sys.argv[2], {"r": r, "methods": methods}):
    print(f"not true: {sys.argv[2]}\n" + json.dumps({k: v for k, v in r.items() if k != "per_rank"}, indent=1))
    sys.exit(1)
PY
}

# regions HOST DIR: the region files in DIR of the cache path as HOST sees
# it, sorted, on one line.
regions() { cl exec "${prefix}$1" sh -c "ls '$cache/$2/regions' 2>/dev/null | grep '\\.h5\$' | sort | tr '\\n' ' ' || true"; }

# objects HOST DIR: object files in DIR of the cache path as HOST sees it.
objects() { cl exec "${prefix}$1" sh -c "ls '$cache/$2/objects' 2>/dev/null | grep -c '\\.h5\$' || true"; }

# fault NAME RANKS SIGNAL TIMEOUT EXPECTED_REPORTERS: a fault mid-warmup.
fault() {
  local name="$1" ranks="$2" sig="$3" t="$4" want="$5" json
  out="$(NPUCACHE_LOG_LEVEL=info timeout --foreground -k 10 "$(limit 90)" python3 "$stop_rank" \
    --match "$cache/$name" --ranks "$ranks" --signal "$sig" --after-line "rank-methods loaded" --limit 80 -- \
    "$cluster" exec "${prefix}0" "$root/launch/warmup.sh" "${launch[@]}" --npucache "$npucache" \
    --env NPUCACHE_LOG_LEVEL --autotune-candidates 2 --tp 2 --pp 2 --cache-dir "$cache/$name" --timeout "$t" 2>&1)" ||
    fail "$name: could not signal ranks $ranks: $out"
  json="$(tail -n 1 <<<"$out")"
  grep -E "npucache: error|mpirun noticed" <<<"$out" | cut -c1-240 || true
  echo "$json"
  python3 - "$json" "$t" "$want" <<'PY' || fail "$name: $out"
import json, sys
r, t, want = json.loads(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
assert not r["limit_hit"], "the job hung"
assert r["rc"] != 0, "the job exited 0"
if want:
    assert set(r["errors"]) == set(want.split(",")), f"ranks reporting: {sorted(r['errors'])}, expected {want}"
    late = {k: round(v, 1) for k, v in r["errors"].items() if v > t + 5}
    assert not late, f"reported later than timeout + 5 s: {late}"
    assert r["exit_after"] <= t + 5 + 2, f"mpirun exited {r['exit_after']:.1f} s after the signal"
    print(f"ok: ranks {want} reported within {max(r['errors'].values()):.1f} s, mpirun exited after {r['exit_after']:.1f} s")
else:
    assert r["exit_after"] <= t, f"mpirun exited {r['exit_after']:.1f} s after the signal, beyond the timeout {t} s"
    print(f"ok: the job ended {r['exit_after']:.1f} s after the signal (timeout {t} s), exit {r['rc']}")
PY
}

say "cluster $prefix; removing any leftover of an earlier run"
down
rm -rf "$cache" "$work"
mkdir -p "$work"
start=$SECONDS

# ---- 1. 2 hosts, node-local caches
say "2 hosts x 2 ranks, node-local caches"
up 2 local
warmup 120 --tp 2 --pp 1 --dp 2 --cache-dir "$cache/a" --report-json "$work/a1.json" --progress always
[ "$rc" -eq 0 ] || fail "cold warmup exited $rc: $out"
grep -Eq 'npucache: 2/2 methods \(decode [0-9.]+ s\), 8/8 rank-methods ready: 0 loaded, 2 compiled, 6 received; [^ ]+ 4 \([^)]*\); [^ ]+ 4 \(' <<<"$out" ||
  fail "rank 0's progress line should count the 8 rank-methods, 4 on each host: $out"
check "$work/a1.json" 'r["hosts"] == 2 and r["compiled"] == r["unique_subgraphs"] == 2' "each unique subgraph compiled once"
check "$work/a1.json" 'r["writers"] == 4 and r["entries_written"] == 8' "one writer per host store and method"
check "$work/a1.json" '0 < r["bytes_between_hosts"] <= r["flat_bytes_between_hosts"] * (1 / 2 + 0.10)' \
  "the artifacts cross between hosts once per host"
for h in 0 1; do
  [ "$(objects "$h" a)" -eq 2 ] || fail "host $h's store should hold the 2 objects its ranks use, holds $(objects "$h" a)"
done
python3 -c "import json; r = json.load(open('$work/a1.json')); print(f'ok: 2 compiles, 4 writers, {r[\"bytes_between_hosts\"]} bytes between hosts (flat: {r[\"flat_bytes_between_hosts\"]})')"
warmup 120 --tp 2 --pp 1 --dp 2 --cache-dir "$cache/a" --report-json "$work/a2.json"
[ "$rc" -eq 0 ] || fail "warm warmup exited $rc: $out"
check "$work/a2.json" 'r["loaded"] == 8 and r["compiled"] == 0 and all(p["hit"] for p in r["per_rank"])' \
  "the warm rerun hits on every rank of every host"
echo "ok: warm rerun: 8 of 8 hits on both hosts"

say "MPMD across hosts: host 0's ranks --pp 1, host 1's --pp 2"
rc=0
out="$(timeout --foreground -k 10 "$(limit 60)" "$cluster" mpirun --prefix "$prefix" -x NPUCACHE_LOG_LEVEL \
  -np 2 "$npucache" warmup --tp 2 --pp 1 --cache-dir "$cache/m" --timeout 20 : \
  -np 2 "$npucache" warmup --tp 2 --pp 2 --cache-dir "$cache/m" --timeout 20 2>&1)" || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "mismatched ranks: exit $rc: $out"
[ "$(grep -cF "ranks 0, 1 have --pp 1, ranks 2, 3 have --pp 2" <<<"$out")" -eq 4 ] ||
  fail "mismatched ranks not named on every rank: $out"
! grep -qE "MPI_ERR|MPI_ABORT" <<<"$out" || fail "mismatched ranks: a raw MPI error: $out"
echo "ok: every rank on both hosts names ranks 0, 1 and 2, 3 and --pp"

say "rank 3 (host 1) stopped mid-warmup, --timeout 5"
fault stop1 3 STOP 5 0,1,2
grep -qF "rank 3 (${prefix}1: rank 3) did not answer" <<<"$out" || fail "rank 3 and its host not named: $out"
say "host 1 stopped (ranks 2, 3) mid-warmup, --timeout 5"
fault stop2 2,3 STOP 5 0,1
grep -qF "ranks 2, 3 (${prefix}1: all of its ranks) did not answer" <<<"$out" || fail "host 1 not named: $out"
say "host 1's ranks killed (SIGKILL) mid-warmup, --timeout 10"
fault kill1 2,3 KILL 10 ""
grep -qE "exited on signal 9|did not answer" <<<"$out" || fail "no error names the killed ranks: $out"

# ---- 2. 2 hosts, one shared directory
say "2 hosts x 2 ranks, one directory shared by both"
up 2 shared
warmup 120 --tp 2 --pp 2 --cache-dir "$cache/s" --report-json "$work/s2.json"
[ "$rc" -eq 0 ] || fail "cold warmup exited $rc: $out"
check "$work/s2.json" 'r["writers"] == 2 and r["entries_written"] == 8' "one writer per method for the shared store"
n="$(objects 1 s)"
check "$work/s2.json" "r['unique_subgraphs'] == $n == r['compiled']" "each object written once"
echo "ok: 2 writers (one per method) for both hosts, $n objects for $n unique subgraphs"

# ---- 3. 4 hosts, node-local caches: elastic reuse
say "4 hosts x 2 ranks, node-local caches"
up 4 local
warmup 120 --tp 2 --pp 2 --cache-dir "$cache/e" --report-json "$work/e1.json"
[ "$rc" -eq 0 ] || fail "cold warmup on 2 hosts exited $rc: $out"
check "$work/e1.json" 'r["hosts"] == 2 and r["compiled"] == r["unique_subgraphs"]' "the first job runs on 2 hosts"
e1_regions="$(regions 0 e)"
check "$work/e1.json" "r['regions_compiled'] == len('$e1_regions'.split()) > 0" \
  "each unique region compiled once for the job across the 2 hosts' stores (the region waves)"
[ "$(regions 1 e)" = "$e1_regions" ] || fail "host 1's regions/ holds '$(regions 1 e)', host 0's '$e1_regions'"
echo "ok: $(wc -w <<<"$e1_regions") regions compiled once for 2 node-local stores"
warmup 180 --tp 2 --pp 2 --dp 2 --cache-dir "$cache/e" --report-json "$work/e2.json"
[ "$rc" -eq 0 ] || fail "warmup on 4 hosts exited $rc: $out"
check "$work/e2.json" 'r["hosts"] == 4 and r["compiled"] == 0' "the same model on more hosts compiles nothing"
check "$work/e2.json" 'r["fetched"] >= 8 and r["writers"] == 8' "the new hosts fetch; one writer per host store and method"
check "$work/e2.json" '0 < r["bytes_between_hosts"] <= r["flat_bytes_between_hosts"] * (1 / 2 + 0.10)' \
  "the artifacts cross between hosts once per host"
for h in 2 3; do
  [ "$(objects "$h" e)" -eq 2 ] || fail "new host $h's store should hold 2 objects, holds $(objects "$h" e)"
done
echo "ok: 0 compiles on 4 hosts; the new hosts' stores got their objects"
# The new hosts' stores got the regions those objects hold, as the old
# hosts' compiles stored them: a later layout there compiles none.
check "$work/e2.json" 'r["regions_compiled"] == 0 and r["regions_copied"] >= 2' \
  "the new hosts copy the regions of the programs they received"
want="$(regions 0 e)"
[ -n "$want" ] || fail "host 0's store holds no compiled region"
for h in 1 2 3; do
  [ "$(regions "$h" e)" = "$want" ] || fail "host $h's regions/ holds '$(regions "$h" e)', host 0's '$want'"
done
echo "ok: every host's store holds the regions $want"
warmup 180 --tp 2 --pp 2 --dp 2 --cache-dir "$cache/e" --report-json "$work/e3.json"
[ "$rc" -eq 0 ] || fail "warm warmup on 4 hosts exited $rc: $out"
check "$work/e3.json" 'r["loaded"] == 16 and all(p["hit"] for p in r["per_rank"])' "the warm rerun hits on every host"
echo "ok: warm rerun: 16 of 16 hits on 4 hosts"

# ---- 4. 4 hosts, one shared directory
say "4 hosts x 2 ranks, one directory shared by all"
up 4 shared
warmup 180 --tp 2 --pp 2 --dp 2 --cache-dir "$cache/s" --report-json "$work/s4.json"
[ "$rc" -eq 0 ] || fail "cold warmup exited $rc: $out"
check "$work/s4.json" 'r["writers"] == 2 and r["entries_written"] == 16' "one writer per method for the shared store"
n="$(objects 3 s)"
check "$work/s4.json" "r['unique_subgraphs'] == $n == r['compiled']" "each object written once"
echo "ok: 2 writers for 4 hosts, $n objects for $n unique subgraphs"

down
echo "PASS in $((SECONDS - start)) s"
