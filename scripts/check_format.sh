#!/usr/bin/env bash
# Fails when a C++ file of the repository differs from what clang-format
# (.clang-format at the root) makes of it, and names the files. Run with
# --fix to format them in place.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = "--fix" ] && fix=1
if ! command -v clang-format >/dev/null 2>&1; then
  echo "check_format: clang-format not found (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h')
if [ "$fix" = 1 ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
# One clang-format per batch of files, two at a time: it names each file
# that differs in a "<file>:<line>:<col>: error:" line, and fails.
rc=0
out="$(printf '%s\0' "${files[@]}" | xargs -0 -n 40 -P 2 clang-format --dry-run -Werror 2>&1)" || rc=$?
mapfile -t bad < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' <<<"$out" | sort -u)
if [ "$rc" -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
  echo "check_format: clang-format failed (exit $rc) without naming a file:" >&2
  printf '%s\n' "$out" | head -20 >&2
  exit 1
fi
if [ ${#bad[@]} -ne 0 ]; then
  echo "check_format: ${#bad[@]} file(s) not formatted as .clang-format says; run scripts/check_format.sh --fix:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
