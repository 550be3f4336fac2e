#!/usr/bin/env bash
# ctest mpi_concurrent_jobs: two MPI warmup jobs of the same model write one
# cache at the same time (each compiles and stores its own artifacts for the
# same graph keys), then:
#   - both succeed and `npucache verify` is clean (every entry records the
#     checksum of the object the store kept: later writers adopted it);
#   - a third job is served entirely from the cache (every rank a hit);
#   - one artifact file per unique graph key, no temporaries left.
#   concurrent_jobs.sh NPUCACHE_BINARY LAUNCH_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 NPUCACHE_BINARY LAUNCH_DIR" >&2; exit 2; }
bin="$1"
launch="$2"
work="$(mktemp -d /tmp/npucache-concurrent-XXXXXX)"
trap 'rm -rf "$work"' EXIT
cache="$work/cache"
fail() { echo "FAIL: $*" >&2; exit 1; }

run_job() {  # run_job NAME: a 4-rank tp=2 x pp=2 warmup, bounded in time
  timeout --kill-after=10 300 "$launch/warmup.sh" --tp 2 --pp 2 --cache-dir "$cache" --npucache "$bin" \
    --report-json "$work/$1.json" > "$work/$1.log" 2>&1
}

field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# The two jobs must overlap (both compile some of the same keys): retried in
# a fresh cache, at most 3 times, when one finished before the other began.
for attempt in 1 2 3; do
  rm -rf "$cache"
  run_job a & a=$!
  run_job b & b=$!
  wait $a || { cat "$work/a.log"; fail "job a failed"; }
  wait $b || { cat "$work/b.log"; fail "job b failed"; }
  ca=$(field "$work/a.json" compiled); cb=$(field "$work/b.json" compiled); u=$(field "$work/a.json" unique_subgraphs)
  echo "attempt $attempt: job a compiled $ca, job b compiled $cb, of $u unique subgraphs"
  [ $((ca + cb)) -gt "$u" ] && break
  [ "$attempt" -lt 3 ] || fail "the two jobs never overlapped in 3 attempts"
done

"$bin" verify "$cache" > "$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "verify is not clean after two concurrent jobs"; }
cat "$work/verify.log"

run_job c || { cat "$work/c.log"; fail "job c failed"; }
read -r got total unique <<< "$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
methods = [m for p in r["per_rank"] for m in p["methods"]]
print(sum(1 for m in methods if m["hit"]), len(methods), r["unique_subgraphs"])' "$work/c.json")"
[ "$total" -gt 0 ] && [ "$got" -eq "$total" ] || { cat "$work/c.log"; fail "the third job was not served from the cache ($got of $total methods hit)"; }
echo "third job: $got of $total methods hit"

objects=$(find "$cache/objects" -name '*.h5' | wc -l)
temps=$(find "$cache" -name '.*.tmp.*' | wc -l)
[ "$temps" -eq 0 ] || fail "$temps temporary files left"
echo "objects $objects, unique subgraphs $unique"
[ "$objects" -eq "$unique" ] || fail "$objects object files for $unique unique subgraphs (one file per unique artifact)"
echo "PASS"
