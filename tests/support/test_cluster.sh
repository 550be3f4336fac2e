#!/usr/bin/env bash
# ctest multihost_cluster: MPI across simulated hosts (tests/support/cluster.sh).
#   test_cluster.sh TEST_MPI_MODELS_BINARY
# As root, on a 2-host cluster:
#   1. mpirun -np 4 runs 2 ranks on each host (host name, rank, network
#      namespace of every rank);
#   2. --storage shared: a file written at the cache path on host0 is seen
#      on host1; --storage local: it is not (nor on the machine itself);
#   3. the project's MPI test binary runs with 4 ranks across the hosts and
#      its traffic crosses the cluster's bridge;
#   4. after `down`, no namespace, link, mount or directory of the cluster is left.
# Exits 77 (skipped) when not root or when namespaces cannot be made here.
#
# The cluster's prefix is $NPUCACHE_CLUSTER_TEST_PREFIX, else npt<hash of the
# binary's path>-h: stable for one build tree, so a run removes what a
# killed earlier run of the same tree left, and two build trees never share
# a cluster. Every step is bounded; all of them together by the budget
# $NPUCACHE_CLUSTER_TEST_BUDGET seconds (default 480, below ctest's TIMEOUT,
# so the teardown on exit always gets to run).
set -euo pipefail
# shellcheck source=cluster_test_lib.sh
. "$(dirname "$0")/cluster_test_lib.sh"

[ $# -eq 1 ] || { echo "usage: $0 TEST_MPI_MODELS_BINARY" >&2; exit 2; }
mpi_test="$1"
[ -x "$mpi_test" ] || fail "$mpi_test is not an executable (build the test_mpi_models target)"

here="$(cd "$(dirname "$0")" && pwd)"
cluster="$here/cluster.sh"
sum="$(printf '%s' "$(cd "$(dirname "$mpi_test")" && pwd)" | cksum | cut -d' ' -f1)"
prefix="${NPUCACHE_CLUSTER_TEST_PREFIX:-$(printf 'npt%04x-h' $((sum % 65536)))}"
cache="/tmp/npucache-cluster-test-$prefix"
h0="${prefix}0"
h1="${prefix}1"
deadline=$((SECONDS + ${NPUCACHE_CLUSTER_TEST_BUDGET:-480}))

cluster_test_start 30

say "cluster $prefix; removing any leftover of an earlier run"
down
rm -rf "$cache"

# ---- 1. ranks across hosts (shared storage)
say "up: 2 hosts, shared storage at $cache"
cl up 2 --prefix "$prefix" --storage shared --cache-path "$cache"
say "mpirun -np 4 across $h0 and $h1"
# shellcheck disable=SC2016 # expanded by each rank's shell
out="$(timeout --foreground -k 5 "$(limit 60)" "$cluster" mpirun --prefix "$prefix" -np 4 \
  sh -c 'echo "rank=$OMPI_COMM_WORLD_RANK host=$(hostname) net=$(readlink /proc/self/ns/net)"')" ||
  fail "mpirun across the cluster failed (exit $?); output: $out"
echo "$out" | sort
[ "$(echo "$out" | grep -c '^rank=')" -eq 4 ] || fail "expected 4 ranks to report, got: $out"
[ "$(echo "$out" | sed -n 's/^rank=\([0-9]*\) .*/\1/p' | sort -n | tr '\n' ' ')" = "0 1 2 3 " ] ||
  fail "expected ranks 0 1 2 3"
hosts="$(echo "$out" | sed -n 's/.* host=\([^ ]*\) .*/\1/p' | sort | uniq -c | awk '{print $2 "x" $1}' | paste -sd' ')"
[ "$hosts" = "${h0}x2 ${h1}x2" ] || fail "expected 2 ranks on each of $h0 and $h1, got: $hosts"
nets="$(echo "$out" | sed -n 's/.* net=//p' | sort | uniq -c | awk '{print $1}' | paste -sd' ')"
[ "$nets" = "2 2" ] || fail "expected 2 network namespaces with 2 ranks each, got counts: $nets"
echo "ok: 2 ranks on each of 2 hosts ($hosts), in 2 network namespaces"

# ---- 2. storage
say "shared storage: a file written on $h0 is visible on $h1"
cl exec "$h0" sh -c "echo from-$h0 >'$cache/marker'"
got="$(cl exec "$h1" cat "$cache/marker" 2>&1)" || fail "$h1 does not see $cache/marker with shared storage: $got"
[ "$got" = "from-$h0" ] || fail "$h1 read '$got' from $cache/marker"
echo "ok: $h1 reads '$got'"
down

say "up: 2 hosts, local storage at $cache"
cl up 2 --prefix "$prefix" --storage local --cache-path "$cache"
say "local storage: a file written on $h0 is not visible on $h1"
cl exec "$h0" sh -c "echo from-$h0 >'$cache/marker'"
[ "$(cl exec "$h0" cat "$cache/marker")" = "from-$h0" ] || fail "$h0 cannot read back its own $cache/marker"
if cl exec "$h1" test -e "$cache/marker"; then fail "$h1 sees $h0's $cache/marker with local storage"; fi
if [ -e "$cache/marker" ]; then fail "the machine sees $h0's $cache/marker with local storage"; fi
echo "ok: only $h0 sees it"

# ---- 3. the project's MPI test across the hosts
say "$(basename "$mpi_test") with 4 ranks across $h0 and $h1"
rx_before="$(cat "/sys/class/net/${h1}-v/statistics/rx_bytes")"
start=$SECONDS
rc=0
timeout --foreground -k 10 "$(limit 180)" "$cluster" mpirun --prefix "$prefix" -np 4 "$mpi_test" || rc=$?
[ "$rc" -eq 0 ] || fail "$(basename "$mpi_test") across the cluster exited $rc"
rx=$(($(cat "/sys/class/net/${h1}-v/statistics/rx_bytes") - rx_before))
echo "ok: exit 0 in $((SECONDS - start)) s; $rx bytes went from $h1 onto the bridge"
# Launching alone sends about 3 KB; the test's collectives about 30 KB.
[ "$rx" -gt 10000 ] || fail "only $rx bytes left $h1: the ranks did not talk across the bridge"

# ---- 4. nothing left
say "down"
down
left="$(ip netns list | awk '{print $1}' | grep -E "^${prefix}" || true)"
left+="$(ip -o link show | awk -F': ' '{print $2}' | grep -E "^${prefix}" || true)"
left+="$(findmnt -rn -o TARGET | grep -E "/npucache-cluster/${prefix}(/|\$)" || true)"
[ -e "/run/npucache-cluster/$prefix" ] && left+=" /run/npucache-cluster/$prefix"
[ -e "$cache" ] && left+=" $cache"
[ -z "$left" ] || fail "left behind after down: $left"
echo "ok: no namespace, link, mount or directory of $prefix is left"
echo "PASS"
