#!/usr/bin/env bash
# Configures and builds npucache into ${BUILD_DIR:-build} (Release by default).
# Extra arguments are passed to cmake's configure step, e.g.
#   scripts/build.sh -DNPUCACHE_SANITIZE=address
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-2}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@" >/dev/null
cmake --build "$build" -j "$jobs"
