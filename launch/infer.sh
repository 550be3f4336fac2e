#!/usr/bin/env bash
# Multi-card greedy generation using the cache, on tp*pp*dp ranks.
#   launch/infer.sh --tp 2 --pp 4 [--dp 1] [--model M] [--cache-dir D] [--tokens N] [--report-json F]
#                   [--hostfile F] [--iface X] [--mpirun-arg ARG]... [--env VAR]... [--npucache PATH]
usage() { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; }
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
launch_job infer "$@"
