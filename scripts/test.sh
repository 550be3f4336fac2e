#!/usr/bin/env bash
# Installs dependencies, builds npucache, and runs the whole ctest suite
# (unit tests, MPI tests under mpiexec, the install/consumer test).
# Set NPUCACHE_SANITIZE=address or thread to run the suite under a sanitizer
# build (in build-address / build-thread).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
san="${NPUCACHE_SANITIZE:-}"
if [ -n "$san" ]; then
  export BUILD_DIR="${BUILD_DIR:-$root/build-$san}"
  export BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}"
  "$root/scripts/build.sh" -DNPUCACHE_BUILD_TESTS=ON -DNPUCACHE_SANITIZE="$san"
else
  "$root/scripts/build.sh" -DNPUCACHE_BUILD_TESTS=ON
fi
build="${BUILD_DIR:-$root/build}"
cd "$build"
ctest --output-on-failure -j "${JOBS:-2}" --timeout 600 "$@"
