#!/usr/bin/env bash
# Multi-card greedy generation using the cache, on tp*pp*dp ranks.
#   launch/infer.sh --tp 2 --pp 4 [--dp 1] [--model M] [--cache-dir D] [--tokens N] [--report-json F]
#                   [--hostfile F] [--env VAR]
usage() { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; }
source "$(dirname "$0")/common.sh"
launch_job infer "$@"
