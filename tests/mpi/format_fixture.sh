#!/usr/bin/env bash
# ctest mpi_format_fixture (the previous format) and mpi_format_fixture_N
# (format N.0.0): the 2-rank cache written by that format
# (tests/fixtures/format-VERSION/mpi-tp1-pp2) under a job of today's
# format: every rank's entries are reported stale with the version and
# rebuilt, nothing is loaded from it, the files of that format are left as
# they were, the tokens equal the single-process eager ones; the next job is
# served entirely from the rebuilt cache.
# The tuning table, of no format, may gain decisions and keeps every old
# one (read with Debian's h5py through the zstd plugin in PLUGIN_DIR).
#   format_fixture.sh NPUCACHE_BINARY LAUNCH_DIR FIXTURES_DIR VERSION PLUGIN_DIR
set -euo pipefail
[ $# -eq 5 ] || { echo "usage: $0 NPUCACHE_BINARY LAUNCH_DIR FIXTURES_DIR VERSION PLUGIN_DIR" >&2; exit 2; }
bin="$1"
launch="$2"
fixtures="$3"
version="$4"
export HDF5_PLUGIN_PATH="$5"
work="$(mktemp -d /tmp/npucache-fixture-XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cp -r "$fixtures/format-$version/mpi-tp1-pp2" "$work/cache"
chmod -R go-rwx "$work/cache"
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
job() {  # job NAME: a 2-rank tp=1 x pp=2 inference, bounded in time
  timeout --kill-after=10 300 "$launch/infer.sh" --tp 1 --pp 2 --tokens 3 --cache-dir "$work/cache" --npucache "$bin" \
    --report-json "$work/$1.json" > "$work/$1.log" 2>&1 || { cat "$work/$1.log"; fail "job $1 failed"; }
}
job old
grep -q "is of another version; format_version: stored '$version', now '" "$work/old.log" ||
  { cat "$work/old.log"; fail "no stale report naming the format versions"; }
[ "$(field "$work/old.json" loaded)" = 0 ] || fail "entries of format $version were loaded"
[ "$(field "$work/old.json" compiled)" -gt 0 ] || fail "nothing was rebuilt"
[ "$(field "$work/old.json" tokens_match_single_process)" = True ] || fail "tokens differ from the eager ones"
for f in "$fixtures/format-$version/mpi-tp1-pp2"/*.h5 "$fixtures/format-$version/mpi-tp1-pp2"/objects/*.h5; do
  rel="${f#"$fixtures/format-$version/mpi-tp1-pp2/"}"
  [ "$rel" = tuning.h5 ] && continue  # of no format: checked below
  cmp -s "$f" "$work/cache/$rel" || fail "$rel of format $version was rewritten or removed"
done
# The tuning table is of no format version (decisions by kernel signature
# and runtime): the job may add its decisions, and keeps every old one.
if [ -f "$fixtures/format-$version/mpi-tp1-pp2/tuning.h5" ]; then
  /usr/bin/python3 - "$fixtures/format-$version/mpi-tp1-pp2/tuning.h5" "$work/cache/tuning.h5" <<'PY' ||
import h5py, sys
def lines(path):
    out = set()
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.update((n, bytes(x).rstrip(b"\0")) for x in o[()].ravel())
                     if isinstance(o, h5py.Dataset) else None)
    return out
old, new = lines(sys.argv[1]), lines(sys.argv[2])
missing = old - new
print(f"tuning.h5: {len(old)} decisions of format's file, {len(new)} now, {len(missing)} lost")
sys.exit(1 if missing or not old else 0)
PY
    fail "tuning.h5 of format $version lost decisions"
fi
job new
[ "$(field "$work/new.json" compiled)" = 0 ] || fail "the rebuilt cache did not serve the next job"
[ "$(field "$work/new.json" tokens_match_single_process)" = True ] || fail "tokens differ from the eager ones"
# The administration commands of this build beside that format's files (a
# rolling upgrade: jobs of that build may still use them): verify reports
# its entries and regions stale, not damaged; gc and verify --repair leave
# every file of it as it was. (Objects of formats 3.0.0 and earlier are of
# another record encoding: verify names them stale and --repair removes
# them, as since format 4.0.0.)
if [ "${version%%.*}" -lt 4 ]; then
  echo "format $version cache: reported stale and rebuilt; its files untouched by the job; the next job compiled nothing"
  exit 0
fi
"$bin" verify "$work/cache" > "$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "verify called format $version's cache bad"; }
grep -q "^STALE .*saved by cache format $version" "$work/verify.log" ||
  { cat "$work/verify.log"; fail "verify did not report format $version's entries stale"; }
if grep -q "^BAD" "$work/verify.log"; then cat "$work/verify.log"; fail "verify reported format $version's files as damage"; fi
"$bin" gc "$work/cache" > "$work/gc.log" 2>&1 || { cat "$work/gc.log"; fail "gc failed"; }
"$bin" verify --repair "$work/cache" > "$work/repair.log" 2>&1 || { cat "$work/repair.log"; fail "verify --repair failed"; }
for f in "$fixtures/format-$version/mpi-tp1-pp2"/*.h5 "$fixtures/format-$version/mpi-tp1-pp2"/objects/*.h5 \
  "$fixtures/format-$version/mpi-tp1-pp2"/regions/*.h5; do
  [ -e "$f" ] || continue
  rel="${f#"$fixtures/format-$version/mpi-tp1-pp2/"}"
  [ "$rel" = tuning.h5 ] && continue
  cmp -s "$f" "$work/cache/$rel" || { cat "$work/gc.log" "$work/repair.log"; fail "$rel of format $version was rewritten or removed by gc or verify --repair"; }
done
echo "format $version cache: reported stale and rebuilt; its files untouched (by the job, verify, gc and verify --repair); the next job compiled nothing"
