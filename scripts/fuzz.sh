#!/usr/bin/env bash
# Bounded mutation fuzzing of npucache's decoders (tests/fuzz/fuzz_decoders.cpp)
# under the ASan+UBSan build (build-address): replays tests/fuzz/corpus and
# tests/fuzz/regressions, then mutates them and fresh seeds for FUZZ_SECONDS (default 300) with seed FUZZ_SEED
# (default: the date, so each day explores differently; printed to rerun).
# A finding is written to build-address/fuzz-findings/ and fails the run;
# copy it into tests/fuzz/regressions/ with the fix.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$root/build-address}"
export BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}"
BUILD_TARGETS="fuzz_decoders" "$root/scripts/build.sh" -DNPUCACHE_BUILD_TESTS=ON -DNPUCACHE_SANITIZE=address
findings="$BUILD_DIR/fuzz-findings"
mkdir -p "$findings"
seed="${FUZZ_SEED:-$(date +%Y%m%d)}"
# Large allocations fail (std::bad_alloc, reported as a finding) instead of
# exhausting the machine; UBSan reports stop the run.
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:max_allocation_size_mb=2048:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}"
echo "fuzz: ${FUZZ_SECONDS:-300} s, seed $seed (rerun: FUZZ_SEED=$seed scripts/fuzz.sh)"
timeout --kill-after=30 $(( ${FUZZ_SECONDS:-300} + 600 )) \
  "$BUILD_DIR/tests/fuzz_decoders" --seconds "${FUZZ_SECONDS:-300}" --seed "$seed" --findings "$findings" \
  "$root/tests/fuzz/corpus" "$root/tests/fuzz/regressions"
