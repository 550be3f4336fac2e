#!/usr/bin/env bash
# Compile-and-cache job: warms prompt and decode of a model on tp*pp*dp ranks.
#   launch/warmup.sh --tp 2 --pp 4 [--dp 1] [--model M] [--cache-dir D] [--backend npu|inductor|npugraphs]
#                    [--mode M] [--dynamic true|false|auto] [--ge-cache] [--independent] [--remote URL]
#                    [--report-json F] [--dry-run] [--hostfile F] [--iface X]
#                    [--mpirun-arg ARG]... [--env VAR]... [--npucache PATH]
usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; }
# Installed as the command npucache-warmup (next to the npucache binary); the
# installed copy finds common.sh in <prefix>/share/npucache/launch.
launch_dir="$(dirname "$(readlink -f "$0")")"
# shellcheck source=launch/common.sh
source "$launch_dir/common.sh"
launch_job warmup "$@"
