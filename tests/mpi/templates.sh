#!/usr/bin/env bash
# ctest mpi_templates: captured graphs in the cache under MPI, with the
# 8-KV-head tiny config (configs/tiny-llama-kv8.json): for tp=8 and for
# tp=4 x pp=2 on 8 ranks, a reduce-overhead warmup with meta weights
# captures and keeps one template per stage and method (the TP ranks of a
# stage share it: the template bytes stored equal one rank's); an inference
# job on the same cache then restores every capture (zero captures recorded,
# none recaptured, zero compiles) and gives the single-process eager tokens;
# after export and import into an empty cache, the same.
#   templates.sh NPUCACHE_BINARY LAUNCH_DIR CONFIG
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 NPUCACHE_BINARY LAUNCH_DIR CONFIG" >&2; exit 2; }
bin="$1"
launch="$2"
config="$3"
work="$(mktemp -d /tmp/npucache-templates-XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
surface=(--backend inductor --mode reduce-overhead)
for layout in "8 1" "4 2"; do
  read -r tp pp <<< "$layout"
  cache="$work/tp${tp}pp${pp}"
  run() {  # run NAME SCRIPT [ARGS...]: a bounded 8-rank job
    local name="$1" script="$2"
    shift 2
    timeout --kill-after=10 300 "$launch/$script" --tp "$tp" --pp "$pp" --model "$config" --npucache "$bin" \
      "${surface[@]}" --report-json "$work/$name.json" "$@" > "$work/$name.log" 2>&1 ||
      { cat "$work/$name.log"; fail "job $name failed"; }
  }
  run "warm-$tp" warmup.sh --cache-dir "$cache"
  [ "$(field "$work/warm-$tp.json" captures_recorded)" -gt 0 ] || fail "tp=$tp pp=$pp: the warmup captured nothing"
  files=$(find "$cache/templates" -name '*.h5' | wc -l)
  [ "$files" = $((2 * pp)) ] || fail "tp=$tp pp=$pp: $files templates stored, expected one per stage and method ($((2 * pp)))"
  run "infer-$tp" infer.sh --cache-dir "$cache" --tokens 4
  for f in captures_recorded captures_recaptured compiled; do
    [ "$(field "$work/infer-$tp.json" "$f")" = 0 ] || fail "tp=$tp pp=$pp: infer $f = $(field "$work/infer-$tp.json" "$f")"
  done
  [ "$(field "$work/infer-$tp.json" captures_restored)" -ge 8 ] || fail "tp=$tp pp=$pp: fewer than 8 restores"
  [ "$(field "$work/infer-$tp.json" tokens_match_single_process)" = True ] || fail "tp=$tp pp=$pp: tokens differ from eager"
  # `stats` carries the two jobs' captures, as their reports counted them.
  "$bin" stats "$cache" --json > "$work/stats-$tp.json"
  for kind in recorded:captures restored:restores recaptured:recaptures; do
    want=$(( $(field "$work/warm-$tp.json" "captures_${kind%%:*}") + $(field "$work/infer-$tp.json" "captures_${kind%%:*}") ))
    [ "$(field "$work/stats-$tp.json" "${kind#*:}")" = "$want" ] ||
      fail "tp=$tp pp=$pp: stats counts $(field "$work/stats-$tp.json" "${kind#*:}") ${kind#*:}, the reports $want"
  done
  "$bin" export "$cache" -o "$work/b.bundle" > /dev/null
  "$bin" import "$work/b.bundle" "$cache-imported" > /dev/null
  run "imported-$tp" infer.sh --cache-dir "$cache-imported" --tokens 4
  [ "$(field "$work/imported-$tp.json" captures_recorded)" = 0 ] || fail "tp=$tp pp=$pp: the imported cache captured"
  [ "$(field "$work/imported-$tp.json" tokens_match_single_process)" = True ] || fail "tokens differ after import"
  bytes=$(du -cb "$cache"/templates/*.h5 | tail -1 | cut -f1)
  echo "ok: tp=$tp pp=$pp: $files templates ($bytes bytes) for 8 ranks; infer restored" \
    "$(field "$work/infer-$tp.json" captures_restored) captures, recorded 0"
done
echo "mpi templates: all checks passed"
