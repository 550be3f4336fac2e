# Shared by launch/warmup.sh and launch/infer.sh: parses the launcher's own
# options, builds the mpirun command line and runs `npucache <job>`.
#
#   --tp T --pp P [--dp D]     ranks = T * P * D (D defaults to 1)
#   --hostfile F               passed to mpirun
#   --env VAR                  exported to every rank (repeatable); the
#                              NPUCACHE_* variables are exported always
#   --npucache PATH            the npucache binary (default: build/src/npucache)
# Every other argument goes to `npucache <job>`.
set -euo pipefail

launch_job() {
  local job="$1"
  shift
  local here root tp=1 pp=1 dp=1 hostfile="" bin=""
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  root="$(cd "$here/.." && pwd)"
  local envs=() rest=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --tp) tp="$2"; rest+=(--tp "$2"); shift 2 ;;
      --pp) pp="$2"; rest+=(--pp "$2"); shift 2 ;;
      --dp) dp="$2"; shift 2 ;;
      --hostfile) hostfile="$2"; shift 2 ;;
      --env) envs+=("$2"); shift 2 ;;
      --npucache) bin="$2"; shift 2 ;;
      -h|--help) usage; return 0 ;;
      *) rest+=("$1"); shift ;;
    esac
  done
  for n in "$tp" "$pp" "$dp"; do
    case "$n" in ''|*[!0-9]*|0) echo "$(basename "$0"): --tp, --pp and --dp must be positive integers" >&2; usage >&2; return 2 ;; esac
  done
  bin="${bin:-${NPUCACHE_BIN:-$root/build/src/npucache}}"
  if [ ! -x "$bin" ]; then
    echo "$(basename "$0"): $bin not found; build first (scripts/build.sh) or pass --npucache PATH" >&2
    return 2
  fi
  local np=$((tp * pp * dp))
  local flags=()
  if mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    flags+=(--oversubscribe)
    if [ "$(id -u)" -eq 0 ]; then
      export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
    for v in $(env | sed -n 's/^\(NPUCACHE_[A-Z_]*\)=.*/\1/p') "${envs[@]}"; do flags+=(-x "$v"); done
  fi
  [ -n "$hostfile" ] && flags+=(--hostfile "$hostfile")
  exec mpirun -np "$np" "${flags[@]}" "$bin" "$job" "${rest[@]}"
}
