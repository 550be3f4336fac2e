#!/usr/bin/env bash
# The main job: installs dependencies, builds what the demo runs (the
# npucache command: target npucache_demo, no test, benchmark or example),
# then on 8 ranks (tiny-llama, tp=2 x pp=4): a cold coordinated warmup into
# an empty cache, then a warm inference run that loads every rank's entry.
# Both print their tables.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
BUILD_TARGETS=npucache_demo "$root/scripts/build.sh"
cache="${NPUCACHE_DEMO_CACHE:-$root/build/demo-cache}"
rm -rf "$cache"
# (rank 0 logs one line per method; NPUCACHE_LOG_LEVEL=debug: every rank's)
echo "== cold warmup: tiny-llama, tp=2 pp=4, 8 ranks, cache $cache"
"$root/launch/warmup.sh" --tp 2 --pp 4 --cache-dir "$cache" --report-json "$root/build/demo-warmup.json"
echo
echo "== warm inference: a new job on the same cache"
"$root/launch/infer.sh" --tp 2 --pp 4 --cache-dir "$cache" --tokens 16 --report-json "$root/build/demo-infer.json"
