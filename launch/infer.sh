#!/usr/bin/env bash
# Multi-card greedy generation using the cache, on tp*pp*dp ranks.
#   launch/infer.sh --tp 2 --pp 4 [--dp 1] [--model M] [--cache-dir D] [--tokens N] [--remote URL] [--report-json F]
#                   [--backend B] [--mode M] [--dynamic D] [--dry-run] (as the warmup's) [--hostfile F] [--iface X]
#                   [--mpirun-arg ARG]... [--env VAR]... [--npucache PATH]
usage() { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; }
# Installed as the command npucache-infer (next to the npucache binary); the
# installed copy finds common.sh in <prefix>/share/npucache/launch.
launch_dir="$(dirname "$(readlink -f "$0")")"
# shellcheck source=launch/common.sh
source "$launch_dir/common.sh"
launch_job infer "$@"
