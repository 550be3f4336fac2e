#!/usr/bin/env bash
# Compile-and-cache job: warms prompt and decode of a model on tp*pp*dp ranks.
#   launch/warmup.sh --tp 2 --pp 4 [--dp 1] [--model M] [--cache-dir D] [--mode max-autotune|reduce-overhead]
#                    [--ge-cache] [--independent] [--report-json F] [--hostfile F] [--iface X]
#                    [--mpirun-arg ARG]... [--env VAR]... [--npucache PATH]
usage() { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; }
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
launch_job warmup "$@"
