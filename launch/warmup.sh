#!/usr/bin/env bash
# Compile-and-cache job: warms prompt and decode of a model on tp*pp*dp ranks.
#   launch/warmup.sh --tp 2 --pp 4 [--dp 1] [--model M] [--cache-dir D] [--mode max-autotune|reduce-overhead]
#                    [--ge-cache] [--independent] [--report-json F] [--hostfile F] [--env VAR]
usage() { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; }
source "$(dirname "$0")/common.sh"
launch_job warmup "$@"
