#!/usr/bin/env bash
# ctest mpi_job_progress: rank 0's progress line (coord/job_progress.h) on a
# real 4-rank job. With --progress always, a cold warmup says what it
# compiles before each method's compiles and, after each method, the
# rank-methods ready of the job's 8 with the same counts as its report; a
# warm rerun says every rank loaded; with --progress auto it is silent
# when the launcher's stderr is not a terminal, and speaks when it is (a
# pseudo-terminal from script(1)).
# Quiet by default: at the default log level the cold job's ranks print no
# line per entry saved or loaded, rank 0 prints one info line per method
# with the report's counts; at NPUCACHE_LOG_LEVEL=debug (the warm rerun)
# every rank's entry lines are there.
#   job_progress.sh NPUCACHE_BINARY LAUNCH_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 NPUCACHE_BINARY LAUNCH_DIR" >&2; exit 2; }
npucache="$1"
launch="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export NPUCACHE_LOG_LEVEL=warn
unset NPUCACHE_PROGRESS
fail() { echo "FAIL: $*"; exit 1; }
job() { timeout 300 "$launch/warmup.sh" --tp 2 --pp 2 --npucache "$npucache" --cache-dir "$work/cache" \
  --autotune-candidates 2 --timeout 60 "$@"; }

(unset NPUCACHE_LOG_LEVEL && job --progress always --report-json "$work/cold.json") > "$work/cold.txt" 2>&1 ||
  { cat "$work/cold.txt"; fail "cold warmup exited non-zero"; }
python3 - "$work/cold.json" "$work/cold.txt" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
per_entry = [l for l in text.splitlines() if re.search(r"saved to|loaded from|reusing the stored object|the writer of that store", l)]
assert not per_entry, f"per-rank entry lines at the default log level: {per_entry}"
summary = [re.search(r"^\[INFO\] NPUCACHE .* Cache (prompt|decode): (\d+) rank-methods loaded, (\d+) compiled, (\d+) received", l)
           for l in text.splitlines()]
summary = [m for m in summary if m]
assert [m.group(1) for m in summary] == ["prompt", "decode"], f"rank 0's line per method: {text}"
sums = [sum(int(m.group(k)) for m in summary) for k in (2, 3, 4)]
assert sums == [r["loaded"], r["compiled"], r["fetched"]], (sums, r["loaded"], r["compiled"], r["fetched"])
print(f"ok: cold, default log level: no per-rank entry lines; {len(summary)} summary lines")
lines = [l for l in text.splitlines() if l.startswith("npucache: ")]
done = [l for l in lines if re.match(r"npucache: \d/2 methods", l)]
assert len(done) == 2, f"one line after each of the 2 methods, got {lines}"
m = re.search(r"8/8 rank-methods ready: (\d+) loaded, (\d+) compiled, (\d+) received", done[-1])
assert m, done[-1]
loaded, compiled, received = map(int, m.groups())
assert compiled == r["compiled"] and received == r["fetched"] and loaded == r["loaded"], (done[-1], r["compiled"], r["fetched"], r["loaded"])
compiling = [l for l in lines if "compiling" in l]
assert len(compiling) == 2 and all("of 4 ranks" in l for l in compiling), compiling
print(f"ok: cold: {done[-1]}")
PY
NPUCACHE_LOG_LEVEL=debug job --progress always > "$work/warm.txt" 2>&1 ||
  { cat "$work/warm.txt"; fail "warm warmup exited non-zero"; }
[ "$(grep -Ec '^\[DEBUG\] NPUCACHE .* Cache ModelCacheMeta\(.*\) loaded from ' "$work/warm.txt")" = 8 ] ||
  { cat "$work/warm.txt"; fail "at debug, each of the 4 ranks should say it loaded each of its 2 entries"; }
grep -Eq '^\[INFO\] NPUCACHE .* Cache decode: 4 rank-methods loaded, 0 compiled, 0 received' "$work/warm.txt" ||
  { cat "$work/warm.txt"; fail "rank 0's line for decode should say its 4 rank-methods loaded"; }
echo "ok: warm, debug: every rank's entry lines"

grep -q "npucache: 2/2 methods (decode [0-9.]* s), 8/8 rank-methods ready: 8 loaded, 0 compiled, 0 received" "$work/warm.txt" ||
  { cat "$work/warm.txt"; fail "the warm rerun's line should say every rank-method loaded"; }
! grep -q "compiling" "$work/warm.txt" || fail "a warm job compiles nothing, yet said so"
echo "ok: warm: every rank-method loaded"
job > "$work/auto.txt" 2>&1 || { cat "$work/auto.txt"; fail "warmup exited non-zero"; }
! grep -q "^npucache: " "$work/auto.txt" || { cat "$work/auto.txt"; fail "--progress auto printed to a pipe"; }
echo "ok: auto: silent when stderr is a pipe"
cmd="$(printf '%q ' "$launch/warmup.sh" --tp 2 --pp 2 --npucache "$npucache" --cache-dir "$work/cache" --timeout 60)"
timeout 300 script -qec "$cmd" /dev/null > "$work/tty.txt" 2>&1 || { cat "$work/tty.txt"; fail "warmup on a terminal exited non-zero"; }
grep -q "npucache: 2/2 methods" "$work/tty.txt" || { cat "$work/tty.txt"; fail "--progress auto was silent on a terminal"; }
echo "ok: auto: the line on a terminal"
