#!/usr/bin/env bash
# The main job: installs dependencies, builds, and runs tiny-llama greedy
# generation on the simulated NPU: once in one process, then sharded over
# tp=2 x pp=2 ranks under mpirun. Both print their tokens, which agree.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
bin="${BUILD_DIR:-$root/build}/src/npucache"
echo "== single process (tp=1, pp=1)"
"$bin" generate --tokens 16
echo "== 4 ranks (tp=2, pp=2) under mpirun"
"$root/scripts/mpirun.sh" 4 "$bin" generate --tp 2 --pp 2 --tokens 16
