#!/usr/bin/env bash
# The long run before a release (not part of .ci/run, which keeps within its
# time): what CI runs, then what it runs only briefly or not at all.
#   1. .ci/run (every test once, the ASan and TSan builds, 2 minutes of fuzzing)
#   2. the differential hunt for NPUCACHE_DIFF_SECONDS (default 1800) of
#      random models across processes on one cache, against eager results
#   3. the stress test of one shared cache (tests/stress/stress.py) for
#      NPUCACHE_STRESS_SECONDS (default 1200): writers, administration and
#      kills against its oracle
#   4. the big-model warmups: Llama-3-8B on 4 ranks and Llama-3-70B on 32
#      (tp=8 x pp=4, meta weights), cold coordinated and independent, then
#      warm, with their goals (perf/real_shapes.py; results in perf/out/long/)
#   5. the fast, slow and mpi tests under ASan+UBSan (not only those labelled
#      `asan`), with every UBSan check in every layer, and built without the
#      tests' precompiled header (a test source missing an include fails,
#      unless another source of its unity batch has it)
#   6. fuzzing of every decoder in that build for FUZZ_SECONDS (default 3600)
#   7. reduce-overhead decode threads (batch 1, 3, 8) under automatic dynamic on
#      NPUCACHE_DECODE_CACHES (default 20) fresh caches: every second start
#      captures nothing (CI runs 3)
# Each step's time is printed as it ends; a failing step ends the run.
#   scripts/long.sh [--skip-ci]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
start=$(date +%s)
step() {
  local name="$1" t0
  shift
  t0=$(date +%s)
  echo "long: == $name"
  "$@"
  echo "long: $name took $(($(date +%s) - t0)) s (total $(($(date +%s) - start)) s)"
}
[ "${1:-}" = "--skip-ci" ] || step ci bash .ci/run
step differential env NPUCACHE_DIFF_SECONDS="${NPUCACHE_DIFF_SECONDS:-1800}" build/tests/random_diff
step stress python3 tests/stress/stress.py --seconds "${NPUCACHE_STRESS_SECONDS:-1200}" --seed "$(date +%s)" \
  --cli build/src/npucache --cache-worker build/tests/cache_worker --serve-worker build/tests/serve_worker \
  --random-diff build/tests/random_diff --launch launch
mkdir -p perf/out/long
step big-models python3 perf/real_shapes.py perf/out/long --trials 1
step decode-starts env NPUCACHE_DECODE_CACHES="${NPUCACHE_DECODE_CACHES:-20}" build/tests/test_serving \
  --gtest_filter=Serving.ThreadedDecodeSecondStartCapturesNothing
step asan-all env NPUCACHE_SANITIZE=address NPUCACHE_TEST_PCH=OFF NPUCACHE_TEST_LABELS="fast slow mpi" BUILD_DIR="$root/build-address-all" scripts/test.sh
# The fuzzing in the build of every UBSan check (CI's ASan build leaves the
# heaviest to the decoding layers: NPUCACHE_UBSAN_LIGHT).
step fuzz env BUILD_DIR="$root/build-address-all" FUZZ_SECONDS="${FUZZ_SECONDS:-3600}" scripts/fuzz.sh
