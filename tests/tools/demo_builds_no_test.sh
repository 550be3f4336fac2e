#!/usr/bin/env bash
# ctest demo_builds_no_test: the README's main command (scripts/demo.sh)
# builds the target npucache_demo only, and that target compiles nothing
# but the library and the command (src/): no test, benchmark or example.
# Asks the build system for the commands it would run from scratch; builds
# nothing.
#   demo_builds_no_test.sh SOURCE_DIR BUILD_DIR MAKE_PROGRAM
set -euo pipefail
source_dir="$(cd "$1" && pwd)" build="$(cd "$2" && pwd)" make_program="$3"
if [ -f "$build/build.ninja" ]; then
  commands="$("$make_program" -C "$build" -t commands npucache_demo)"
else
  # -n prints the commands, -B as if nothing were built yet; the recursive
  # makes of CMake's Makefiles run (they are what prints the compile lines).
  commands="$(cd "$build" && "$make_program" -n -B npucache_demo 2>/dev/null)"
fi
# Each compiled file, relative to the build or source tree (a unity batch
# lives in the build tree, under its target's folder).
compiled="$(grep -oE -- '-c [^ ]+\.(cpp|cc|c|cxx)' <<<"$commands" | sed 's/^-c //' |
  sed -e "s|^$build/||" -e "s|^$source_dir/||" | sort -u || true)"
count="$(grep -c . <<<"$compiled" || true)"
if [ "$count" -eq 0 ]; then
  echo "FAIL: the build system listed no compile step for npucache_demo (the check would pass on anything)" >&2
  exit 1
fi
outside="$(grep -v '^src/' <<<"$compiled" || true)"
if [ -n "$outside" ]; then
  echo "FAIL: npucache_demo compiles what the demo does not run:" >&2
  echo "$outside" >&2
  exit 1
fi
if ! grep -qE '^src/(tools/main\.cpp|CMakeFiles/npucache_cli\.dir/)' <<<"$compiled"; then
  echo "FAIL: npucache_demo does not build the npucache command (src/tools/main.cpp)" >&2
  exit 1
fi
echo "npucache_demo: $count compile steps, all of src/ (none of tests/, perf/ or examples/)"
