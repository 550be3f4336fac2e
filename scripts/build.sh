#!/usr/bin/env bash
# Configures and builds npucache into ${BUILD_DIR:-build} (Release by default).
# Extra arguments are passed to cmake's configure step, e.g.
#   scripts/build.sh -DNPUCACHE_SANITIZE=address
# BUILD_TARGETS (space-separated) limits the build to those targets.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-2}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@" >/dev/null
if [ -n "${BUILD_TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$build" -j "$jobs" --target $BUILD_TARGETS
else
  cmake --build "$build" -j "$jobs"
fi
