#!/usr/bin/env bash
# A simulated multi-host cluster on one Linux machine, for running MPI jobs
# "across hosts" in tests. Needs root, iproute2 and util-linux.
#
#   cluster.sh check  [--prefix P]        can this machine make namespaces? (exit 0 = yes)
#   cluster.sh up N   [--prefix P] [--storage local|shared] [--cache-path PATH] [--slots S]
#   cluster.sh down   [--prefix P]        remove everything `up` made (idempotent)
#   cluster.sh exec HOST CMD...           run CMD inside HOST
#   cluster.sh mpirun-args [--prefix P]   the mpirun options for the cluster, one a line
#   cluster.sh mpirun [--prefix P] ARGS...   mpirun inside host0 with those options + ARGS
#   cluster.sh launch-args [--prefix P]   the same as options of launch/warmup.sh and infer.sh
#   cluster.sh status [--prefix P]
#
# Hosts are named P0 .. P{N-1} (P defaults to npc-host, or $NPUCACHE_CLUSTER_PREFIX;
# letters, digits and '-', at most 11 characters, not ending in a digit).
# `exec` takes the prefix from the host name.
#
# Each host is:
#   - a network namespace P<i> (`ip netns`), its eth0 a veth whose other end
#     P<i>-v is on the bridge P-br, address 10.251.X.<i+1>/24 (X from the
#     prefix), loopback up. The bridge has no address and no route is added
#     anywhere, so the machine itself cannot reach the subnet and no traffic
#     leaves the namespaces; clusters of different prefixes are separate
#     bridges and never see each other.
#   - a UTS namespace whose host name is P<i>;
#   - a mount namespace (created with private propagation) in which
#     <rundir>/hosts, naming every host of the cluster, is bind-mounted over
#     /etc/hosts, so host names resolve inside the cluster as on a real one.
#     With --storage local a fresh tmpfs is mounted at the cache path, so the
#     same path is a different, empty file system on every host; with
#     --storage shared (the default) every host sees the machine's directory.
#     (/sys is the machine's: /sys/class/net lists its interfaces; use `ip`.)
# The namespaces persist as files bind-mounted under <rundir>/ns
# (<rundir> = /run/npucache-cluster/P, itself a private bind mount). `up`
# creates the cache path if it is missing, and then `down` removes it.
# Hosts are entered with nsenter (--net=/run/netns/HOST is what
# `ip netns exec` enters; its extra mount namespace with /sys remounted
# would be replaced by the host's own mount namespace anyway).
#
# <rundir>/hostfile lists "P<i> slots=S"; <rundir>/rsh-agent is an Open MPI
# plm_rsh_agent: `rsh-agent [ssh options] HOST COMMAND...` runs COMMAND with
# /bin/sh inside HOST, with a login-like environment (like ssh: nothing of
# the caller's environment but what Open MPI passes on the command line).
#
# mpirun runs inside host0 (`cluster.sh mpirun ...` does that), so the
# daemons, the out-of-band and the MPI traffic all stay on the private
# bridge, and host0's ranks (which mpirun starts itself) see host0's
# storage. From inside a host the other hosts' mount-namespace files are not
# visible: binds of mount-namespace files are never copied into a new mount
# namespace, and the kernel lets a mount namespace hold another only if the
# other has a larger id, and ids did not follow creation order on Linux 6.18
# (so no order of creation lets host0 hold all the others). So `up` keeps an
# anchor, a sleeping process (<rundir>/anchor.pid) in the machine's mount
# namespace and in host0's network namespace (so `down` ends it with host0's
# processes); `exec` and the agent enter the anchor's mount namespace first,
# where every host's files are bound, then the host's. So any host can reach
# any host, and Open MPI's tree spawn works too.
#
# up, down and check hold a lock (flock on this script), so a `down` never
# races another `up` or `down`.
set -eEuo pipefail

PROG="cluster.sh"
RUN_BASE="${NPUCACHE_CLUSTER_RUN:-/run/npucache-cluster}"
DEFAULT_CACHE_PATH="/tmp/npucache-cluster-cache"

# No silent exit: an unexpected failure (set -e) is reported with its line.
DIED=""
FAILED_AT=""
trap 'FAILED_AT="line $LINENO: $BASH_COMMAND"' ERR
report_exit() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ -z "$DIED" ] && [ -n "$FAILED_AT" ]; then
    echo "$PROG: unexpected failure at $FAILED_AT (exit $rc)" >&2
  fi
}
trap report_exit EXIT

# (A closed stderr must not stop a teardown half-way.)
die() { DIED=1; echo "$PROG: $*" >&2 || true; exit 1; }
note() { echo "$PROG: $*" >&2 || true; }

# Serializes up, down and check (fd 9; closed for the anchor).
take_lock() {
  exec 9<"$0"
  flock -w 60 9 || die "another cluster.sh up/down has held the lock on $0 for 60 s; try again"
}

usage() { sed -n '5,12p' "$0" | sed 's/^# \{0,1\}//'; }

# ---------------------------------------------------------------- naming

check_prefix() {
  local p="$1"
  [[ "$p" =~ ^[a-z][a-z0-9-]{0,10}$ ]] ||
    die "prefix '$p' must be 1-11 characters of a-z, 0-9 and '-', starting with a letter"
  [[ "$p" =~ [0-9]$ ]] && die "prefix '$p' must not end in a digit (host names are prefix + index)"
  return 0
}

# Sets the globals describing the cluster of prefix $1.
set_names() {
  PREFIX="$1"
  check_prefix "$PREFIX"
  RUNDIR="$RUN_BASE/$PREFIX"
  NSDIR="$RUNDIR/ns"
  BRIDGE="$PREFIX-br"
  ANCHOR_NAME="npucache-cluster-anchor:$PREFIX"
  local sum
  sum="$(printf '%s' "$PREFIX" | cksum | cut -d' ' -f1)"
  OCTET=$((sum % 250 + 1))
  SUBNET="10.251.$OCTET.0/24"
}

host_name() { echo "$PREFIX$1"; }
host_ip() { echo "10.251.$OCTET.$(($1 + 1))"; }
veth_name() { echo "$PREFIX$1-v"; }

# Hosts of the cluster that exist in any form (netns, namespace files).
existing_hosts() {
  {
    ip netns list 2>/dev/null | awk '{print $1}'
    if [ -d "$NSDIR" ]; then
      find "$NSDIR" -maxdepth 1 \( -name '*.uts' -o -name '*.mnt' \) 2>/dev/null |
        sed 's|.*/||; s|\.[a-z]*$||'
    fi
  } | grep -E "^${PREFIX}[0-9]+\$" | sort -u || true
}

existing_veths() {
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
    grep -E "^${PREFIX}[0-9]+-v\$" || true
}

link_exists() { ip link show "$1" >/dev/null 2>&1; }

# Everything of the cluster the machine still has, on one line (empty if none).
leftovers() {
  local all
  all="$(existing_hosts; existing_veths; if link_exists "$BRIDGE"; then echo "$BRIDGE"; fi
    if [ -e "$RUNDIR" ]; then echo "$RUNDIR"; fi
    if [ -e "/run/netns/$PREFIX-probe" ]; then echo "$PREFIX-probe"; fi
    if link_exists "$PREFIX-pb"; then echo "$PREFIX-pb"; fi
    if link_exists "$PREFIX-pv"; then echo "$PREFIX-pv"; fi)"
  echo "$all" | tr '\n' ' ' | sed 's/ *$//'
}

# The pid of the cluster's anchor, if it is running (and really is it).
anchor_pid() {
  local pid cmdline
  pid="$(cat "$RUNDIR/anchor.pid" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  cmdline="$( { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null)" || return 1
  [ "$cmdline" = "$ANCHOR_NAME infinity " ] || return 1
  echo "$pid"
}

# The anchor's mount namespace (the machine's, where the host files are bound).
anchor_ns() {
  local pid
  pid="$(anchor_pid)" || die "the anchor process of cluster '$PREFIX' is gone; run: $0 down --prefix $PREFIX, then up again"
  echo "/proc/$pid/ns/mnt"
}

# ---------------------------------------------------------------- checks

need_root() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (network, UTS and mount namespaces need CAP_SYS_ADMIN); try sudo"
  local t
  for t in ip unshare nsenter mount umount findmnt mountpoint cksum flock; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' not found; install iproute2 and util-linux"
  done
}

# The throw-away objects of `check` (also removed by `down`, in case
# `check` was killed half-way).
remove_probe() {
  if link_exists "$PREFIX-pv"; then ip link del "$PREFIX-pv" 2>/dev/null || true; fi
  if link_exists "$PREFIX-pb"; then ip link del "$PREFIX-pb" 2>/dev/null || true; fi
  if [ -e "/run/netns/$PREFIX-probe" ]; then ip netns del "$PREFIX-probe" 2>/dev/null || true; fi
}

# Tries each kind of object `up` makes, on throw-away names; prints what failed.
cmd_check() {
  need_root
  local ns="$PREFIX-probe" br="$PREFIX-pb" veth="$PREFIX-pv" ok=0 err
  remove_probe
  if ! err="$(ip netns add "$ns" 2>&1)"; then
    echo "cannot create a network namespace (ip netns add: $err)"; ok=1
  elif ! err="$(ip link add "$br" type bridge 2>&1)"; then
    echo "cannot create a bridge (ip link add type bridge: $err)"; ok=1
  elif ! err="$(ip link add "$veth" type veth peer name eth0 netns "$ns" 2>&1)"; then
    echo "cannot create a veth pair (ip link add type veth: $err)"; ok=1
  elif ! err="$(unshare --uts --mount --propagation private true 2>&1)"; then
    echo "cannot create UTS or mount namespaces (unshare: $err)"; ok=1
  fi
  remove_probe
  return "$ok"
}

# ---------------------------------------------------------------- up

up_failed() {
  local rc=$?
  trap report_exit EXIT
  trap - INT TERM HUP
  if [ -z "$DIED" ] && [ -n "$FAILED_AT" ]; then note "failed at $FAILED_AT"; fi
  DIED=1
  note "up failed (exit $rc); tearing down what was made"
  (cmd_down) >/dev/null 2>&1 || note "teardown failed too; run: $0 down --prefix $PREFIX"
  exit "$rc"
}

# The topmost directory `mkdir -p "$1"` would create (empty if $1 exists).
first_missing_dir() {
  local d="$1" top=""
  while [ ! -e "$d" ]; do top="$d"; d="$(dirname "$d")"; done
  echo "$top"
}

write_agent() {
  cat >"$RUNDIR/rsh-agent" <<EOF
#!/usr/bin/env bash
# Open MPI plm_rsh_agent for the simulated cluster $PREFIX (made by cluster.sh up).
# Called as: rsh-agent [ssh-style options] HOST COMMAND...
# Runs COMMAND (joined with spaces, like ssh) with /bin/sh inside HOST's
# network, UTS and mount namespaces, in a login-like environment.
set -euo pipefail
ns="$NSDIR"
anchor="\$(cat "$RUNDIR/anchor.pid" 2>/dev/null || true)"
if [ -z "\$anchor" ] || [ "\$( { tr '\\0' ' ' <"/proc/\$anchor/cmdline"; } 2>/dev/null || true)" != "$ANCHOR_NAME infinity " ]; then
  echo "rsh-agent: the anchor process of cluster $PREFIX is gone; run cluster.sh down --prefix $PREFIX, then up again" >&2
  exit 255
fi
while [ \$# -gt 0 ]; do
  case "\$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;   # ssh options taking a value
    -*) shift ;;                           # -x, -T, -n, ...
    *) break ;;
  esac
done
if [ \$# -lt 2 ]; then
  echo "rsh-agent: usage: rsh-agent [options] HOST COMMAND..." >&2
  exit 255
fi
host="\$1"
shift
# An address of the cluster names its host.
name="\$(awk -v h="\$host" '\$1 == h { print \$2; exit }' "$RUNDIR/hosts")"
[ -n "\$name" ] && host="\$name"
if [ ! -e "\$ns/\$host.uts" ]; then
  echo "rsh-agent: no host '\$host' in cluster $PREFIX (see $RUNDIR/hostfile)" >&2
  exit 255
fi
# The machine's mount namespace first (where the host's files are), then
# the host's. ssh starts the command in the home directory with a fresh
# environment.
exec env -i HOME="\${HOME:-/root}" USER="\$(id -un)" LOGNAME="\$(id -un)" SHELL=/bin/sh \\
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
  nsenter --mount="/proc/\$anchor/ns/mnt" -- \\
  nsenter --net="/run/netns/\$host" --uts="\$ns/\$host.uts" --mount="\$ns/\$host.mnt" \\
  --wdns="\${HOME:-/}" -- /bin/sh -c "\$*"
EOF
  chmod 755 "$RUNDIR/rsh-agent"
}

cmd_up() {
  local n="$1" storage="$2" cache_path="$3" slots="$4"
  need_root
  if ! [[ "$n" =~ ^[1-9][0-9]?$ ]]; then die "up: N must be 1..99, got '$n'"; fi
  if ! [[ "$slots" =~ ^[1-9][0-9]*$ ]]; then die "up: --slots must be a positive integer, got '$slots'"; fi
  case "$storage" in local|shared) ;; *) die "up: --storage must be local or shared, got '$storage'" ;; esac
  case "$cache_path" in /*) ;; *) die "up: --cache-path must be absolute, got '$cache_path'" ;; esac
  [ "$cache_path" != / ] || die "up: --cache-path cannot be /"
  if [ -e "$RUNDIR" ] || [ -n "$(existing_hosts)" ] || link_exists "$BRIDGE"; then
    die "cluster '$PREFIX' already exists (or is left over); run: $0 down --prefix $PREFIX"
  fi
  local reason
  if ! reason="$(cmd_check 2>&1)"; then
    die "up: this machine cannot make the cluster: $reason"
  fi

  # From here on a failure (or a signal) tears down what was made.
  trap up_failed EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM HUP

  mkdir -p "$NSDIR"
  # Namespace files may only be bind-mounted on a private mount.
  mount --bind "$RUNDIR" "$RUNDIR"
  mount --make-private "$RUNDIR"

  local created_cache
  created_cache="$(first_missing_dir "$cache_path")"
  mkdir -p "$cache_path"
  [ -d "$cache_path" ] || die "up: --cache-path $cache_path is not a directory"
  if [ "$storage" = shared ] && [ -z "$created_cache" ]; then
    note "shared storage: every host sees the existing directory $cache_path"
  fi
  cat >"$RUNDIR/state" <<EOF
N=$n
SUBNET=$SUBNET
STORAGE=$storage
CACHE_PATH=$cache_path
CREATED_CACHE=$created_cache
EOF

  local i h
  {
    echo "127.0.0.1 localhost"
    echo "::1 localhost ip6-localhost ip6-loopback"
    for ((i = 0; i < n; i++)); do echo "$(host_ip "$i") $(host_name "$i")"; done
  } >"$RUNDIR/hosts"
  for ((i = 0; i < n; i++)); do echo "$(host_name "$i") slots=$slots"; done >"$RUNDIR/hostfile"
  write_agent

  # Network: one bridge, one veth per host, no address on the machine's side.
  ip link add "$BRIDGE" type bridge
  sysctl -qw "net.ipv6.conf.$BRIDGE.disable_ipv6=1" 2>/dev/null || true
  ip link set "$BRIDGE" up
  for ((i = 0; i < n; i++)); do
    h="$(host_name "$i")"
    ip netns add "$h"
    ip link add "$(veth_name "$i")" type veth peer name eth0 netns "$h"
    ip link set "$(veth_name "$i")" master "$BRIDGE"
    sysctl -qw "net.ipv6.conf.$(veth_name "$i").disable_ipv6=1" 2>/dev/null || true
    ip link set "$(veth_name "$i")" up
    ip -n "$h" link set lo up
    ip -n "$h" addr add "$(host_ip "$i")/24" dev eth0
    ip -n "$h" link set eth0 up
    # Host name: a persistent UTS namespace.
    touch "$NSDIR/$h.uts"
    unshare --uts="$NSDIR/$h.uts" hostname "$h"
  done

  # Mount namespaces: /etc/hosts of the cluster, and the host's own tmpfs.
  # shellcheck disable=SC2016 # expanded by the inner sh, from its arguments
  local setup='mount --bind "$1" /etc/hosts'
  # shellcheck disable=SC2016
  [ "$storage" = local ] && setup+=' && mount -t tmpfs -o mode=1777 npucache-cluster "$2"'
  for ((i = 0; i < n; i++)); do
    h="$(host_name "$i")"
    touch "$NSDIR/$h.mnt"
    unshare --mount="$NSDIR/$h.mnt" --propagation private sh -c "$setup" sh "$RUNDIR/hosts" "$cache_path"
  done

  # The anchor (see the header): its own session, so no signal to the
  # caller's process group reaches it; only `down` ends it.
  # shellcheck disable=SC2016 # expanded by the inner bash
  nsenter --net="/run/netns/$(host_name 0)" -- setsid bash -c \
    'echo $$ >"$2.tmp" && mv "$2.tmp" "$2" && exec -a "$1" sleep infinity' \
    _ "$ANCHOR_NAME" "$RUNDIR/anchor.pid" </dev/null >/dev/null 2>&1 9<&- &
  local tries
  for ((tries = 0; tries < 50; tries++)); do
    [ -s "$RUNDIR/anchor.pid" ] && break
    sleep 0.1
  done
  anchor_ns >/dev/null || die "up: the anchor process did not start"

  trap report_exit EXIT
  trap - INT TERM HUP
  echo "$PREFIX: $n hosts $(host_name 0)..$(host_name $((n - 1))) on $SUBNET, storage $storage at $cache_path"
  echo "hostfile $RUNDIR/hostfile, agent $RUNDIR/rsh-agent"
}

# ---------------------------------------------------------------- down

kill_host_processes() {
  local h="$1" pids sig tries
  [ -e "/run/netns/$h" ] || return 0
  for sig in TERM KILL; do
    pids="$(ip netns pids "$h" 2>/dev/null | tr '\n' ' ' || true)"
    [ -z "${pids// /}" ] && return 0
    note "$h: sending SIG$sig to $pids"
    # shellcheck disable=SC2086 # a list of pids
    kill -s "$sig" $pids 2>/dev/null || true
    for ((tries = 0; tries < 30; tries++)); do
      [ -z "$(ip netns pids "$h" 2>/dev/null)" ] && return 0
      sleep 0.1
    done
  done
  pids="$(ip netns pids "$h" 2>/dev/null | tr '\n' ' ' || true)"
  [ -z "${pids// /}" ] || note "$h: processes $pids did not exit"
}

unmount_all() {
  local f="$1" tries
  for ((tries = 0; tries < 10; tries++)); do
    mountpoint -q "$f" 2>/dev/null || return 0
    umount "$f" 2>/dev/null || umount -l "$f" 2>/dev/null || true
  done
  mountpoint -q "$f" 2>/dev/null && note "cannot unmount $f" && return 1
  return 0
}

cmd_down() {
  need_root
  local h v f rc=0 created=""
  if [ -f "$RUNDIR/state" ]; then
    created="$(sed -n 's/^CREATED_CACHE=//p' "$RUNDIR/state")"
  fi
  local pid tries
  if pid="$(anchor_pid)"; then
    kill "$pid" 2>/dev/null || true
    for ((tries = 0; tries < 30; tries++)); do
      anchor_pid >/dev/null || break
      sleep 0.1
    done
  fi
  for h in $(existing_hosts); do kill_host_processes "$h"; done
  if [ -d "$NSDIR" ]; then
    for f in "$NSDIR"/*; do
      [ -e "$f" ] || continue
      unmount_all "$f" || rc=1
    done
  fi
  for h in $(existing_hosts); do
    if [ -e "/run/netns/$h" ]; then
      ip netns del "$h" || { note "cannot delete network namespace $h"; rc=1; }
    fi
  done
  for v in $(existing_veths); do ip link del "$v" 2>/dev/null || true; done
  if link_exists "$BRIDGE"; then
    ip link del "$BRIDGE" || { note "cannot delete bridge $BRIDGE"; rc=1; }
  fi
  remove_probe
  # The cache directory, when `up` created it (never one that existed
  # before); before the run directory, which records that.
  if [ -n "$created" ] && [ -d "$created" ]; then
    case "$created" in
      /*/*) rm -rf "$created" ;;
      *) note "not removing $created" ;;
    esac
  fi
  if [ -d "$RUNDIR" ]; then
    unmount_all "$RUNDIR" || rc=1
    if mountpoint -q "$RUNDIR" 2>/dev/null; then
      rc=1
    else
      rm -rf "$RUNDIR"
    fi
  fi
  rmdir "$RUN_BASE" 2>/dev/null || true
  # Whatever is left is reported.
  local left
  left="$(leftovers)"
  if [ -n "$left" ]; then
    note "down: left behind: $left"
    rc=1
  fi
  [ "$rc" -eq 0 ] || die "down: could not remove everything of cluster '$PREFIX' (see above); run down again or remove by hand"
  echo "$PREFIX: down"
}

# ---------------------------------------------------------------- use

require_up() {
  [ -f "$RUNDIR/state" ] || die "cluster '$PREFIX' is not up (no $RUNDIR/state); run: $0 up N --prefix $PREFIX"
}

cmd_exec() {
  [ $# -ge 2 ] || die "usage: $PROG exec HOST CMD..."
  local host="$1"
  shift
  if [ -z "${PREFIX:-}" ]; then
    [[ "$host" =~ ^(.*[^0-9])[0-9]+$ ]] || die "exec: '$host' is not a host name (prefix + index)"
    set_names "${BASH_REMATCH[1]}"
  fi
  need_root
  require_up
  if [ ! -e "$NSDIR/$host.uts" ] || [ ! -e "$NSDIR/$host.mnt" ]; then
    die "exec: no host '$host' in cluster '$PREFIX' (hosts: $(existing_hosts | paste -sd' '))"
  fi
  local outer
  outer="$(anchor_ns)"
  # Via the machine's mount namespace, so this works from inside a host too.
  exec nsenter --mount="$outer" -- \
    nsenter --net="/run/netns/$host" --uts="$NSDIR/$host.uts" --mount="$NSDIR/$host.mnt" \
    --wdns="$PWD" -- "$@"
}

mpirun_args() {
  require_up
  local subnet
  subnet="$(sed -n 's/^SUBNET=//p' "$RUNDIR/state")"
  printf '%s\n' \
    --hostfile "$RUNDIR/hostfile" \
    --mca plm_rsh_agent "$RUNDIR/rsh-agent" \
    --mca btl tcp,vader,self \
    --mca btl_tcp_if_include "$subnet" \
    --mca oob_tcp_if_include "$subnet" \
    --mca mpi_yield_when_idle 1 \
    --oversubscribe
  [ "$(id -u)" -ne 0 ] || echo --allow-run-as-root
}

# For launch/common.sh: the hostfile, the interface, and the agent (the
# launcher adds --oversubscribe and the root opt-in itself).
# mpi_yield_when_idle: the simulated hosts share the machine's few cores,
# while their slots say otherwise, so Open MPI would not know it is
# oversubscribed; a rank blocked in MPI (MPI_Comm_split_type, say) must
# yield the core instead of spinning on it (measured: the coordinator's
# set-up took 0.7 s instead of 0.05 s at 8 ranks on one simulated host).
launch_args() {
  require_up
  printf '%s\n' \
    --hostfile "$RUNDIR/hostfile" \
    --iface "$(sed -n 's/^SUBNET=//p' "$RUNDIR/state")" \
    --mpirun-arg --mca --mpirun-arg plm_rsh_agent --mpirun-arg "$RUNDIR/rsh-agent" \
    --mpirun-arg --mca --mpirun-arg mpi_yield_when_idle --mpirun-arg 1
}

cmd_mpirun() {
  require_up
  local args
  mapfile -t args < <(mpirun_args)
  cmd_exec "$(host_name 0)" mpirun "${args[@]}" "$@"
}

cmd_status() {
  if [ ! -f "$RUNDIR/state" ]; then
    echo "$PREFIX: not up"
    local left
    left="$(leftovers)"
    if [ -n "$left" ]; then echo "left over (run down): $left"; fi
    return 0
  fi
  echo "$PREFIX: up ($RUNDIR)"
  cat "$RUNDIR/state"
  cat "$RUNDIR/hostfile"
}

# ---------------------------------------------------------------- main

main() {
  [ $# -ge 1 ] || { usage >&2; exit 2; }
  local cmd="$1"
  shift
  local prefix="" n="" storage=shared cache_path="$DEFAULT_CACHE_PATH" slots=2
  case "$cmd" in
    -h|--help|help) usage; return 0 ;;
    exec)
      if [ "${1:-}" = --prefix ]; then
        [ $# -ge 2 ] || die "--prefix needs a value"
        set_names "$2"
        shift 2
      fi
      cmd_exec "$@"
      ;;
    mpirun)
      if [ "${1:-}" = --prefix ]; then
        [ $# -ge 2 ] || die "--prefix needs a value"
        prefix="$2"
        shift 2
      fi
      set_names "${prefix:-${NPUCACHE_CLUSTER_PREFIX:-npc-host}}"
      need_root
      cmd_mpirun "$@"
      ;;
    up|down|check|mpirun-args|launch-args|status)
      while [ $# -gt 0 ]; do
        case "$1" in
          --prefix|--storage|--cache-path|--slots)
            [ $# -ge 2 ] || die "$cmd: $1 needs a value"
            case "$1" in
              --prefix) prefix="$2" ;;
              --storage) storage="$2" ;;
              --cache-path) cache_path="$2" ;;
              --slots) slots="$2" ;;
            esac
            [ "$cmd" = up ] || [ "$1" = --prefix ] || die "$cmd: $1 applies to up only"
            shift 2
            ;;
          -*) die "$cmd: unknown option $1 (see $PROG --help)" ;;
          *)
            if [ "$cmd" != up ] || [ -n "$n" ]; then die "$cmd: unexpected argument '$1'"; fi
            n="$1"
            shift
            ;;
        esac
      done
      set_names "${prefix:-${NPUCACHE_CLUSTER_PREFIX:-npc-host}}"
      case "$cmd" in
        up) [ -n "$n" ] || die "usage: $PROG up N [--prefix P] [--storage local|shared] [--cache-path PATH]"
            need_root; take_lock; cmd_up "$n" "$storage" "$cache_path" "$slots" ;;
        down) need_root; take_lock; cmd_down ;;
        check) need_root; take_lock; cmd_check ;;
        mpirun-args) mpirun_args ;;
        launch-args) launch_args ;;
        status) cmd_status ;;
      esac
      ;;
    *) echo "$PROG: unknown command '$cmd'" >&2; usage >&2; exit 2 ;;
  esac
}

main "$@"
