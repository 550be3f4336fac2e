#!/usr/bin/env bash
# mpirun wrapper used by the project's scripts: adds --oversubscribe (more
# ranks than cores) and the Open MPI opt-in for running as root, then runs
# `mpirun -np N "$@"`. Usage: scripts/mpirun.sh N command [args...]
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 NUM_RANKS command [args...]" >&2
  exit 2
fi
np="$1"
shift
flags=()
if mpirun --version 2>/dev/null | grep -q "Open MPI"; then
  flags+=(--oversubscribe)
  if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
fi
exec mpirun -np "$np" "${flags[@]}" "$@"
