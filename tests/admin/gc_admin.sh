#!/usr/bin/env bash
# ctest gc_admin: gc by model, by age and of orphaned objects, and the
# compression and orphan figures of stats, on real HDF5 stores.
#   gc_admin.sh NPUCACHE_BINARY CACHE_WORKER MPIRUN_SH
# The store holds a pipeline-parallel Decoder (pp=2 under mpirun: one index
# file per stage) and the seed example (cache_worker, class Model):
# - gc --model npucache.models.Decoder removes every stage file of the
#   Decoder and its objects, and leaves Model's entry serving;
# - gc --model with a name no entry has exits 2 listing the models;
# - gc --older-than 7d keeps entries saved now whose last use stats.json
#   records as 10 days ago (an entry is as old as its last use or its save,
#   whichever is later: tests/admin/test_entry_age.cpp evicts old ones);
# - objects no index references (their index file removed) are reported by
#   stats (text and JSON) and collected by gc --orphans, nothing else;
# - stats prints raw and stored bytes and their ratio.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 NPUCACHE_BINARY CACHE_WORKER MPIRUN_SH" >&2; exit 2; }
npucache="$1"
worker="$2"
mpirun_sh="$3"
# shellcheck source=tests/tools/tool_test_lib.sh
source "$(dirname "$0")/../tools/tool_test_lib.sh"
c="$work/c"

# The Decoder on 2 pipeline stages, and the seed example.
fill() {
  timeout 300 "$mpirun_sh" 2 "$npucache" warmup --pp 2 --cache-dir "$c" --autotune-candidates 1 > warm.txt 2>&1 ||
    fail "warmup --pp 2 failed: $(tail -5 warm.txt)"
  timeout 120 "$worker" run "$c" seed prompt > seed.txt 2>&1 || fail "cache_worker failed: $(tail -5 seed.txt)"
}
count() { "$npucache" ls "$c" --json | python3 -c "
import json, sys
l = json.load(sys.stdin)
print(sum(1 for e in l['entries'] if e['path'].startswith(sys.argv[1])))" "$1"; }

fill
[ "$(ls "$c"/npucache.models.Decoder_*.h5 | wc -l)" = 2 ] || fail "expected 2 stage index files: $(ls "$c")"
[ "$(count npucache.models.Decoder)" = 4 ] || fail "expected 4 Decoder entries: $("$npucache" ls "$c")"
[ "$(count Model_)" = 1 ] || fail "expected 1 entry of the seed example: $("$npucache" ls "$c")"
objects_before="$(ls "$c/objects" | wc -l)"

# 1. Compression figures and no orphans in a fresh store.
"$npucache" stats "$c" > stats.txt
grep -Eq "^compression +[0-9]+\.[0-9]{2}x \(raw / stored" stats.txt || fail "stats without a compression ratio: $(cat stats.txt)"
grep -Eq "^raw +[0-9.]+ (B|KiB|MiB) \([0-9]+ bytes\)" stats.txt || fail "stats without raw bytes: $(cat stats.txt)"
grep -Eq "^orphans +0 object" stats.txt || fail "orphans in a fresh store: $(cat stats.txt)"
"$npucache" stats "$c" --json > stats.json
python3 -c "
import json, sys
s = json.load(open('stats.json'))
assert s['raw_bytes'] > 0 and s['stored_bytes'] > 0, s
assert abs(s['compression_ratio'] - s['raw_bytes'] / s['stored_bytes']) < 1e-9, s
assert s['orphans'] == 0 and s['orphan_bytes'] == 0, s
" || fail "stats --json compression and orphan figures"

# 2. One model, every stage file.
rc=0
"$npucache" gc "$c" --model nosuch > gc.txt 2> gc.err || rc=$?
[ "$rc" = 2 ] || fail "gc --model nosuch exited $rc"
grep -q "no entry of that model.*its models are: Model, npucache.models.Decoder" gc.err ||
  fail "gc --model nosuch does not list the models: $(cat gc.err)"
[ "$(count npucache.models.Decoder)" = 4 ] || fail "a refused gc --model removed entries"
"$npucache" gc "$c" --model npucache.models.Decoder > gc.txt || fail "gc --model failed: $(cat gc.txt)"
grep -q "evicted 4 of 5 entries (2 layout(s)), removed 4 object(s)" gc.txt || fail "gc --model: $(cat gc.txt)"
if ls "$c"/npucache.models.Decoder_*.h5 > /dev/null 2>&1; then fail "stage index files left: $(ls "$c")"; fi
[ "$(count Model_)" = 1 ] || fail "gc --model Decoder removed the seed example's entry"
[ "$(ls "$c/objects" | wc -l)" = $((objects_before - 4)) ] || fail "the Decoder's objects were not all removed"
"$npucache" verify "$c" > verify.txt || fail "verify after gc --model: $(cat verify.txt)"
timeout 120 "$worker" run "$c" seed prompt > seed.txt 2>&1
grep -q "compiled 0" seed.txt || fail "the seed example's entry no longer serves: $(cat seed.txt)"
# The model_class spelling works as well.
fill
"$npucache" gc "$c" --model npucache::models::Decoder > gc.txt || fail "gc --model (class) failed"
[ "$(count npucache.models.Decoder)" = 0 ] || fail "gc --model npucache::models::Decoder left entries"

# 3. By age: entries saved now stay, though stats.json says their last use
# was 10 days ago (a job saving them again has not ended yet).
fill
python3 - "$c/stats.json" <<'EOF'
import json, sys, time
p = sys.argv[1]
s = json.load(open(p))
for k in s["last_used"]:
    if "/world2global_rank1/" in k:
        s["last_used"][k] = time.time() - 10 * 86400
open(p, "w").write(json.dumps(s))
EOF
rc=0
"$npucache" gc "$c" --older-than 7x > gc.txt 2> gc.err || rc=$?
[ "$rc" = 2 ] && grep -q "'7x' is not an age" gc.err || fail "gc --older-than 7x: exit $rc, $(cat gc.err)"
rc=0
"$npucache" gc "$c" --older-than '' > gc.txt 2> gc.err || rc=$?
[ "$rc" = 2 ] && grep -q "'' is not an age" gc.err || fail "gc --older-than '': exit $rc, $(cat gc.err)"
"$npucache" gc "$c" --older-than 7d > gc.txt || fail "gc --older-than failed: $(cat gc.txt)"
grep -q "evicted 0 of 5 entries" gc.txt || fail "gc --older-than 7d evicted entries saved now: $(cat gc.txt)"
[ "$(count npucache.models.Decoder)" = 4 ] || fail "gc --older-than 7d evicted Decoder entries saved now"
[ "$(count Model_)" = 1 ] || fail "gc --older-than 7d evicted the recent seed entry"
"$npucache" gc "$c" --older-than 1w > gc.txt
grep -q "evicted 0 of 5 entries" gc.txt || fail "gc --older-than 1w evicted recent entries: $(cat gc.txt)"

# 4. Orphans: the objects of a removed index are reported, then collected.
rm "$c"/Model_*.h5
"$npucache" stats "$c" > stats.txt
grep -Eq "^orphans +1 object\(s\), [0-9.]+ (B|KiB|MiB): used by no entry" stats.txt ||
  fail "stats does not report the orphaned object: $(cat stats.txt)"
n="$(ls "$c/objects" | wc -l)"
"$npucache" gc "$c" --orphans > gc.txt || fail "gc --orphans failed: $(cat gc.txt)"
grep -q "evicted 0 of 4 entries" gc.txt || fail "gc --orphans evicted entries: $(cat gc.txt)"
grep -Eq "^gc: 1 orphaned object\(s\) \([0-9.]+ (B|KiB|MiB)\) collected" gc.txt || fail "gc --orphans: $(cat gc.txt)"
[ "$(ls "$c/objects" | wc -l)" = $((n - 1)) ] || fail "gc --orphans did not remove exactly the orphan"
"$npucache" stats "$c" --json | python3 -c "import json,sys; s=json.load(sys.stdin); assert s['orphans']==0, s" ||
  fail "orphans left after gc --orphans"
"$npucache" verify "$c" > verify.txt || fail "verify after gc --orphans: $(cat verify.txt)"

end_checks gc_admin "by model, by age, orphans and compression figures checked"
