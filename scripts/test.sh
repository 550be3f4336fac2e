#!/usr/bin/env bash
# Installs dependencies, builds npucache with its tests, runs the ctest
# suite (unit tests, MPI tests under mpiexec, the install tests...), then
# checks the labels and times of what ran (scripts/check_tests.py): every
# test has one cost label, and no `fast` test took more than a few seconds.
# Arguments go to ctest, e.g. `scripts/test.sh -L fast`, `-R test_cache`.
#
#   NPUCACHE_SANITIZE=address|thread  the suite under a sanitizer build
#                                     (build-address / build-thread, at -O0)
#   NPUCACHE_TEST_LABELS="asan"       define and build only the tests with
#                                     one of these labels (cmake/Tests.cmake);
#                                     the benchmarks and examples are not built
#   BUILD_DIR, JOBS                   where to build (default build/), ctest -j
#   NPUCACHE_BUILD_ONLY=1             build what the suite runs, run nothing
#   NPUCACHE_TEST_ONLY=1              run the suite on what BUILD_DIR holds,
#                                     configuring and building nothing (CI,
#                                     whose benchmarks build beside it)
#   NPUCACHE_UBSAN_LIGHT=ON           (address) UBSan's heaviest checks only in
#                                     the decoding layers (cmake/Settings.cmake)
#   NPUCACHE_TEST_PCH=OFF             test programs without the precompiled
#                                     header (each source includes what it uses)
#   NPUCACHE_WERROR=ON                a warning fails the build (CI)
#   NPUCACHE_PERF_IN_ALL=OFF          the benchmarks are not built with the
#                                     rest (target npucache_benchmarks; CI)
# NPUCACHE_SANITIZE, _TEST_LABELS, _UBSAN_LIGHT, _TEST_PCH, _WERROR and _PERF_IN_ALL go to cmake on
# every run (unset: the default), replacing what an earlier configure of the
# same build directory set.
# ctest's JUnit report is left in BUILD_DIR/junit.xml.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
san="${NPUCACHE_SANITIZE:-}"
labels="${NPUCACHE_TEST_LABELS:-}"
args=(-DNPUCACHE_BUILD_TESTS=ON "-DNPUCACHE_SANITIZE=$san" "-DNPUCACHE_TEST_LABELS=${labels// /;}"
  "-DNPUCACHE_UBSAN_LIGHT=${NPUCACHE_UBSAN_LIGHT:-OFF}" "-DNPUCACHE_TEST_PCH=${NPUCACHE_TEST_PCH:-ON}"
  "-DNPUCACHE_WERROR=${NPUCACHE_WERROR:-OFF}" "-DNPUCACHE_PERF_IN_ALL=${NPUCACHE_PERF_IN_ALL:-ON}")
if [ -n "$san" ]; then
  export BUILD_DIR="${BUILD_DIR:-$root/build-$san}"
  export BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}"
fi
if [ -n "$labels" ]; then
  args+=(-DNPUCACHE_BUILD_PERF=OFF -DNPUCACHE_BUILD_EXAMPLES=OFF)
else
  args+=(-DNPUCACHE_BUILD_PERF=ON -DNPUCACHE_BUILD_EXAMPLES=ON)
fi
build="${BUILD_DIR:-$root/build}"
if [ "${NPUCACHE_TEST_ONLY:-}" = 1 ]; then
  [ -f "$build/CTestTestfile.cmake" ] || { echo "test.sh: NPUCACHE_TEST_ONLY: $build holds no build of the tests" >&2; exit 2; }
else
  "$root/scripts/build.sh" "${args[@]}"
fi
[ "${NPUCACHE_BUILD_ONLY:-}" != 1 ] || exit 0
junit="$build/junit.xml"
rm -f "$junit"
rc=0
(cd "$build" && ctest --output-on-failure -j "${JOBS:-2}" --timeout 600 --output-junit "$junit" "$@") || rc=$?
check=(--build "$build" --junit "$junit")
# Times say what a test costs only in the plain build.
[ -z "$san" ] || check+=(--no-times)
python3 "$root/scripts/check_tests.py" "${check[@]}" || rc=1
exit "$rc"
