#!/usr/bin/env bash
# ctest report_json: the job report is valid JSON however large the job's
# output. `npucache infer --tokens 1000 --report-json` on a small model with
# a 152,064-word vocabulary (tests/fixtures/big-vocab-tiny.json: hidden size
# 32, one layer) writes a report that parses, holds the 1,000 generated
# tokens, each a word of the vocabulary, and says what the job did.
#   report_json.sh NPUCACHE_BINARY FIXTURES_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 NPUCACHE_BINARY FIXTURES_DIR" >&2; exit 2; }
npucache="$1"
fixtures="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

NPUCACHE_LOG_LEVEL=warn timeout 240 "$npucache" infer --model "$fixtures/big-vocab-tiny.json" \
  --cache-dir "$work/cache" --tokens 1000 --report-json "$work/report.json" > "$work/out.txt" 2>&1 ||
  { cat "$work/out.txt"; echo "FAIL: infer exited non-zero"; exit 1; }
python3 - "$work/report.json" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    r = json.load(f)  # a truncated report fails here
tokens = r.get("tokens")
assert isinstance(tokens, list), f"no token list in the report: {sorted(r)}"
assert len(tokens) == 1000, f"{len(tokens)} tokens in the report, 1000 generated"
assert all(isinstance(t, int) and 0 <= t < 152064 for t in tokens), "a token outside the vocabulary"
assert r.get("compiled", 0) > 0, f"the cold job compiled nothing: {r.get('compiled')}"
print(f"report_json: {len(tokens)} tokens, {len(json.dumps(r))} bytes of valid JSON")
PY
