# shellcheck shell=bash
# Shared by launch/warmup.sh and launch/infer.sh: parses the launcher's own
# options, builds the mpirun command line and runs `npucache <job>`.
#
#   --tp T --pp P [--dp D]     ranks = T * P * D (D defaults to 1)
#   --hostfile F               passed to mpirun (hosts and their slots)
#   --iface X                  network for MPI and Open MPI's out-of-band
#                              traffic: a subnet (10.0.0.0/24) or interface
#                              names (eth1), comma-separated; becomes
#                              --mca btl_tcp_if_include X --mca oob_tcp_if_include X
#   --mpirun-arg ARG           one extra mpirun argument (repeatable, in order),
#                              e.g. --mpirun-arg --mca --mpirun-arg plm_rsh_agent
#                              --mpirun-arg /path/agent
#   --env VAR[=VALUE]          exported to every rank (repeatable); the
#                              NPUCACHE_* variables are exported always
#   --npucache PATH            the npucache binary (default: $NPUCACHE_BIN, else
#                              the npucache next to the launcher when installed
#                              (npucache-warmup, npucache-infer), else the source
#                              tree's build/src/npucache)
# Every other argument goes to `npucache <job>`, which checks them all
# (`npucache <job> ... --check-args`) before mpirun starts any rank.
set -euo pipefail

# --help: the launcher's usage and its own options, then every option of
# `npucache <job>` (the launcher passes them on), from that binary's --help.
launch_help() {
  local job="$1" bin="$2" me
  me="$(basename "$0")"
  [ -n "$bin" ] || bin="$(launch_binary)"
  usage
  cat <<EOF

Options of $me itself:
  --tp T --pp P [--dp D]   ranks = T * P * D (D defaults to 1); --tp and --pp go to npucache $job too
  --hostfile F             passed to mpirun (hosts and their slots)
  --iface X                network for MPI: a subnet (10.0.0.0/24) or interface names (eth1), comma-separated
  --mpirun-arg ARG         one extra mpirun argument (repeatable, in order)
  --env VAR[=VALUE]        exported to every rank (repeatable); NPUCACHE_* variables always are
  --npucache PATH          the npucache binary (default: \$NPUCACHE_BIN, else the one next to $me)
  -h, --help               this text

Every other option goes to npucache $job (checked with --check-args before mpirun starts):
EOF
  if [ -x "$bin" ] && [ ! -d "$bin" ]; then
    "$bin" "$job" --help | sed -n '/^O[Pp][Tt][Ii][Oo][Nn][Ss]:/,$p' | sed '1d'
  else
    echo "  ($bin not found; npucache $job --help lists them)"
  fi
}

# The npucache binary the launcher runs when --npucache is not given.
launch_binary() {
  local here root launcher_dir
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  root="$(cd "$here/.." && pwd)"
  if [ -n "${NPUCACHE_BIN:-}" ]; then
    echo "$NPUCACHE_BIN"
    return
  fi
  # An installed launcher sits next to the installed npucache; the source
  # tree's launch/ is next to build/.
  launcher_dir="$(dirname "$(readlink -f "$0")")"
  if [ -x "$launcher_dir/npucache" ] && [ ! -d "$launcher_dir/npucache" ]; then
    echo "$launcher_dir/npucache"
  else
    echo "$root/build/src/npucache"
  fi
}

launch_job() {
  local job="$1"
  shift
  local tp=1 pp=1 dp=1 hostfile="" bin="" iface="" me
  me="$(basename "$0")"
  local envs=() rest=() extra=() help=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --tp|--pp|--dp|--hostfile|--env|--npucache|--iface|--mpirun-arg)
        if [ $# -lt 2 ]; then
          echo "$me: $1 needs a value" >&2
          usage >&2
          return 2
        fi
        ;;
    esac
    case "$1" in
      --tp) tp="$2"; rest+=(--tp "$2"); shift 2 ;;
      --pp) pp="$2"; rest+=(--pp "$2"); shift 2 ;;
      --dp) dp="$2"; shift 2 ;;
      --hostfile) hostfile="$2"; shift 2 ;;
      --iface) iface="$2"; shift 2 ;;
      --mpirun-arg) extra+=("$2"); shift 2 ;;
      --env) envs+=("$2"); shift 2 ;;
      --npucache) bin="$2"; shift 2 ;;
      -h|--help) help=1; shift ;;
      *) rest+=("$1"); shift ;;
    esac
  done
  if [ "$help" = 1 ]; then
    launch_help "$job" "$bin"
    return 0
  fi
  local name n
  for name in tp pp dp; do
    n="${!name}"
    case "$n" in
      ''|*[!0-9]*|0) echo "$me: --$name needs a positive whole number, got '$n'" >&2; return 2 ;;
    esac
  done
  if [ -n "$hostfile" ] && [ ! -r "$hostfile" ]; then
    echo "$me: hostfile $hostfile is not a readable file" >&2
    return 2
  fi
  if [ -n "$iface" ] && ! [[ "$iface" =~ ^[A-Za-z0-9_.:/@,-]+$ ]]; then
    echo "$me: --iface '$iface' is not a subnet or interface list (e.g. 10.0.0.0/24 or eth1,eth2)" >&2
    return 2
  fi
  local v
  for v in "${envs[@]}"; do
    if ! [[ "$v" =~ ^[A-Za-z_][A-Za-z0-9_]*(=.*)?$ ]]; then
      echo "$me: --env takes a variable name (or NAME=value), got '$v'" >&2
      return 2
    fi
  done
  [ -n "$bin" ] || bin="$(launch_binary)"
  if [ ! -x "$bin" ]; then
    echo "$me: $bin not found; build first (scripts/build.sh), install npucache, or pass --npucache PATH" >&2
    return 2
  fi
  if ! command -v mpirun >/dev/null 2>&1; then
    echo "$me: mpirun not found; install Open MPI (scripts/install-deps.sh)" >&2
    return 2
  fi
  # Every argument of the job is checked once, here, before any rank
  # starts: one message instead of one per rank and mpirun's abort banner.
  local rc=0
  "$bin" "$job" "${rest[@]}" --check-args || rc=$?
  [ "$rc" = 0 ] || return "$rc"
  local np=$((tp * pp * dp))
  local flags=()
  # A rank's stderr is mpirun's pipe: rank 0's progress line (--progress
  # auto) learns from here whether the user's is a terminal.
  if [ -t 2 ]; then export NPUCACHE_STDERR_IS_TTY=1; else unset NPUCACHE_STDERR_IS_TTY; fi
  if mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    flags+=(--oversubscribe)
    if [ "$(id -u)" -eq 0 ]; then
      export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
    for v in $(env | sed -n 's/^\(NPUCACHE_[A-Z_]*\)=.*/\1/p') "${envs[@]}"; do flags+=(-x "$v"); done
  fi
  [ -n "$hostfile" ] && flags+=(--hostfile "$hostfile")
  [ -n "$iface" ] && flags+=(--mca btl_tcp_if_include "$iface" --mca oob_tcp_if_include "$iface")
  exec mpirun -np "$np" "${flags[@]}" "${extra[@]}" "$bin" "$job" "${rest[@]}"
}
