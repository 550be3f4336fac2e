#!/usr/bin/env bash
# ctest mpi_regions_layouts: compiled regions shared across a job and
# across layouts (cache/region_library.h), with the 4-layer tiny config:
#   - a cold tp=2 x pp=4 warmup on 8 ranks compiles each unique region once
#     for the whole job (the job report's regions_compiled equals the
#     region files stored), whatever the number of stage programs calling it;
#   - inference at tp=2 x pp=2 (4 ranks) and tp=2 x pp=1 (2 ranks) on the
#     same cache compiles its new stage programs but no region (every region
#     taken compiled from the store: regions_reused) and tunes no kernel
#     (each compiling rank of the pp=4 job saved its decisions), and gives
#     the single-process eager tokens;
#   - a job whose ranks use two stores (ranks 0-1 one directory, ranks 2-3
#     another, as node-local stores on two hosts): the ranks of the store
#     that compiled nothing receive the stage programs and copy their
#     regions into their store (regions_copied), each region file the same
#     key as the compiling store's; a pp=1 inference on that store alone
#     then compiles no region and gives the eager tokens;
#   - a job whose two pipeline stages' owners use two stores (rank 0 one
#     directory, rank 1 another): the layer region both stages call is
#     compiled once for the job (the region waves, coord/region_plan.h),
#     sent to the other store and taken there; with --no-region-waves each
#     store's rank compiles it.
#   regions_layouts.sh NPUCACHE_BINARY LAUNCH_DIR CONFIG
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 NPUCACHE_BINARY LAUNCH_DIR CONFIG" >&2; exit 2; }
bin="$1"
launch="$2"
config="$3"
work="$(mktemp -d /tmp/npucache-regions-XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
cache="$work/cache"
run() {  # run NAME SCRIPT TP PP [ARGS...]: a bounded job
  local name="$1" script="$2" tp="$3" pp="$4"
  shift 4
  timeout --kill-after=10 300 "$launch/$script" --tp "$tp" --pp "$pp" --model "$config" --npucache "$bin" \
    --cache-dir "$cache" --report-json "$work/$name.json" "$@" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "job $name failed"; }
}
run cold warmup.sh 2 4
compiled=$(field "$work/cold.json" regions_compiled)
files=$(find "$cache/regions" -name '*.h5' | wc -l)
[ "$compiled" -ge 1 ] || fail "the cold job compiled no region"
[ "$compiled" = "$files" ] ||
  fail "the cold job compiled $compiled regions for $files unique regions stored (one compile per unique region per job)"
[ "$(field "$work/cold.json" compiled)" -gt 1 ] || fail "the cold job compiled fewer than 2 stage programs"
echo "tp=2 pp=4: $(field "$work/cold.json" compiled) programs compiled, $compiled regions compiled," \
  "$(field "$work/cold.json" regions_reused) taken from the store, $files stored"
for pp in 2 1; do
  run "pp$pp" infer.sh 2 "$pp" --tokens 3
  r="$work/pp$pp.json"
  [ "$(field "$r" compiled)" -ge 1 ] || fail "pp=$pp: no stage program compiled (the layout should be new)"
  [ "$(field "$r" regions_compiled)" = 0 ] || fail "pp=$pp: $(field "$r" regions_compiled) regions compiled, want 0"
  [ "$(field "$r" regions_reused)" -ge 1 ] || fail "pp=$pp: no region taken from the store"
  # Every kernel was tuned by the pp=4 job, whichever rank compiled it (each
  # compiling rank saves its decisions, writer of its store or not).
  [ "$(field "$r" kernels_tuned)" = 0 ] || fail "pp=$pp: $(field "$r" kernels_tuned) kernels tuned again"
  [ "$(field "$r" tokens_match_single_process)" = True ] || fail "pp=$pp: tokens differ from eager"
  echo "tp=2 pp=$pp: $(field "$r" compiled) programs compiled, 0 regions compiled, $(field "$r" regions_reused) taken"
done
[ "$(find "$cache/regions" -name '*.h5' | wc -l)" = "$files" ] || fail "other layouts stored new regions"
"$bin" verify "$cache" > "$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "verify"; }
for f in "$cache/regions/"*.h5; do  # h5dump reads the view: its region_key is the file's name
  key=$(basename "$f" .h5)
  h5dump -a region_key "$f" | grep -q "\"$key\"" || fail "h5dump -a region_key $f does not show $key"
done

# Two stores in one job (MPMD: each pair of ranks its own --cache-dir).
a="$work/store-a" b="$work/store-b"
timeout --kill-after=10 300 mpirun --oversubscribe \
  -np 2 "$bin" warmup --tp 1 --pp 2 --model "$config" --cache-dir "$a" --report-json "$work/two.json" : \
  -np 2 "$bin" warmup --tp 1 --pp 2 --model "$config" --cache-dir "$b" --report-json "$work/two.json" \
  > "$work/two.log" 2>&1 || { cat "$work/two.log"; fail "the job of two stores failed"; }
keys() { find "$1/regions" -name '*.h5' -printf '%f\n' 2>/dev/null | sort | tr '\n' ' '; }
compiled=$(field "$work/two.json" regions_compiled)
copied=$(field "$work/two.json" regions_copied)
[ -n "$(keys "$a")" ] || fail "store a holds no region"
# Whichever store's ranks compiled, the other store holds the same regions.
[ "$(keys "$a")" = "$(keys "$b")" ] || fail "the stores hold other regions: a: $(keys "$a"); b: $(keys "$b")"
[ "$copied" -ge 1 ] || fail "no region copied into the store whose ranks received the programs"
# `npucache stats` of the two stores counts the copies where they were written.
"$bin" stats "$a" --json > "$work/stats-a.json" && "$bin" stats "$b" --json > "$work/stats-b.json" || fail "stats"
counted=$(( $(field "$work/stats-a.json" region_copies) + $(field "$work/stats-b.json" region_copies) ))
[ "$counted" = "$copied" ] || fail "npucache stats counts $counted region copies in the two stores, the job $copied"
echo "two stores: $compiled regions compiled, $copied copied into the other store; both hold $(keys "$b")"
cache="$b"
run b-pp1 infer.sh 1 1 --tokens 3
r="$work/b-pp1.json"
[ "$(field "$r" regions_compiled)" = 0 ] || fail "pp=1 on the other store: $(field "$r" regions_compiled) regions compiled"
[ "$(field "$r" regions_reused)" -ge 1 ] || fail "pp=1 on the other store: no region taken"
[ "$(field "$r" tokens_match_single_process)" = True ] || fail "pp=1 on the other store: tokens differ from eager"
"$bin" verify "$b" > "$work/verify-b.log" 2>&1 || { cat "$work/verify-b.log"; fail "verify of the other store"; }
echo "tp=1 pp=1 on the other store: 0 regions compiled, $(field "$r" regions_reused) taken, tokens as eager"

# Two stores whose owners both call the layer: compiled once, sent.
c1="$work/store-c" c2="$work/store-d"
timeout --kill-after=10 300 mpirun --oversubscribe \
  -np 1 "$bin" warmup --tp 1 --pp 2 --model "$config" --cache-dir "$c1" --report-json "$work/waves.json" : \
  -np 1 "$bin" warmup --tp 1 --pp 2 --model "$config" --cache-dir "$c2" --report-json "$work/waves.json" \
  > "$work/waves.log" 2>&1 || { cat "$work/waves.log"; fail "the job of two owners on two stores failed"; }
files=$(find "$c1/regions" -name '*.h5' | wc -l)
[ "$files" -ge 1 ] || fail "no region stored"
[ "$(keys "$c1")" = "$(keys "$c2")" ] || fail "the two stores hold other regions: $(keys "$c1"); $(keys "$c2")"
[ "$(field "$work/waves.json" regions_compiled)" = "$files" ] ||
  fail "$(field "$work/waves.json" regions_compiled) regions compiled for $files unique regions (once per job across stores)"
[ "$(field "$work/waves.json" regions_copied)" = "$files" ] || fail "the other store did not receive each region once"
echo "two owners on two stores: $files regions compiled once, sent to the other store and taken there" \
  "($(field "$work/waves.json" regions_reused) taken)"
# --no-region-waves: each store's owner compiles the layer (in parallel).
c3="$work/store-e" c4="$work/store-f"
timeout --kill-after=10 300 mpirun --oversubscribe \
  -np 1 "$bin" warmup --tp 1 --pp 2 --model "$config" --cache-dir "$c3" --no-region-waves --report-json "$work/nowaves.json" : \
  -np 1 "$bin" warmup --tp 1 --pp 2 --model "$config" --cache-dir "$c4" --no-region-waves --report-json "$work/nowaves.json" \
  > "$work/nowaves.log" 2>&1 || { cat "$work/nowaves.log"; fail "the job with --no-region-waves failed"; }
[ "$(field "$work/nowaves.json" regions_compiled)" = "$((2 * files))" ] ||
  fail "--no-region-waves: $(field "$work/nowaves.json" regions_compiled) regions compiled, want $((2 * files)) (each store)"
echo "--no-region-waves: $((2 * files)) regions compiled, each store its own"
