#!/usr/bin/env bash
# ctest cli_options: what the help texts list is what the commands take.
#   cli_options.sh NPUCACHE_BINARY LAUNCH_DIR
# - every tiny-llama size that `generate --help` (and warmup's) lists is
#   accepted by generate, warmup and infer; an unknown size is a usage error
#   listing the sizes;
# - `launch/warmup.sh --help` and `launch/infer.sh --help` name every option
#   their parser (launch/common.sh) accepts and every option of the job they
#   pass on (`npucache warmup|infer --help`);
# - readable takes each entry exactly as ls prints it (with --cache-dir or
#   $NPUCACHE_CACHE_DIR) as well as the seed's path, and names the input
#   dimensions in its shape guards.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 NPUCACHE_BINARY LAUNCH_DIR" >&2; exit 2; }
npucache="$1"
launch="$2"
# shellcheck source=tests/tools/tool_test_lib.sh
source "$(dirname "$0")/tool_test_lib.sh"


# 1. Sizes: the ones the help lists ("tiny-llama size: small, large").
sizes="$("$npucache" generate --help | sed -n 's/.*tiny-llama size: \(.*\)$/\1/p' | tr -d ',')"
[ -n "$sizes" ] || fail "generate --help lists no sizes: $("$npucache" generate --help)"
n=0
for size in $sizes; do
  n=$((n + 1))
  expect_exit 0 "^tokens:( [0-9]+){2}$" "$npucache" generate --size "$size" --tokens 2
  grep -q "^tiny-llama$([ "$size" = small ] || echo "-$size") eager generation" out.txt \
    || fail "generate --size $size did not run tiny-llama $size: $(head -3 out.txt)"
  for job in warmup infer; do
    "$npucache" "$job" --help | grep -q "tiny-llama size: ${sizes// /, }$" \
      || fail "$job --help lists other sizes than generate's ($sizes)"
    "$npucache" "$job" --size "$size" --check-args > out.txt 2>&1 || fail "$job --size $size: $(cat out.txt)"
  done
done
[ "$n" -ge 2 ] || fail "generate --help lists $n size(s), expected small and large: $sizes"
list="${sizes// /, }"
expect_exit 2 "--size: 'huge' is not a size of tiny-llama; the sizes are: $list" "$npucache" generate --size huge
expect_exit 2 "the sizes are: $list" "$npucache" warmup --size huge --check-args
expect_exit 2 "--size large applies to tiny-llama only" "$npucache" generate --size large --model llama-3-8b

# 2. The launchers' --help names every option they accept.
launcher_options="$(sed -n '/^launch_job()/,/^}/p' "$launch/common.sh" | grep -Eo '^ +(-[-a-z|]+)+\)' |
  tr -d ' )' | tr '|' '\n' | sort -u)"
[ -n "$launcher_options" ] || fail "no options found in the parser of $launch/common.sh"
for script in warmup infer; do
  NPUCACHE_BIN="$npucache" "$launch/$script.sh" --help > help.txt 2>&1 || fail "$script.sh --help exited $?"
  job_options="$("$npucache" "$script" --help | grep -Eo '^ +(-[a-z],)?--[a-z][-a-z]*' | sed 's/.*,//; s/ //g')"
  [ -n "$job_options" ] || fail "npucache $script --help lists no options"
  for opt in $launcher_options $job_options; do
    grep -Eq -- "(^|[^-a-z])$opt([^-a-z]|$)" help.txt || fail "$script.sh --help does not list $opt"
  done
  # Its own usage errors still refer to it.
  expect_exit 2 "needs a value" "$launch/$script.sh" --hostfile
done

# 3. readable takes the entries as ls prints them, and its shape guards
# name the input dimensions they constrain (not the trace's own symbol
# numbers, which the signature above them renumbers).
timeout 300 "$npucache" warmup --cache-dir "$work/c" --autotune-candidates 1 > warm.txt 2>&1 ||
  fail "warmup failed: $(tail -5 warm.txt)"
"$npucache" ls "$work/c" > ls.txt
entries="$(sed '1d;$d' ls.txt | awk '{print $1}')"
[ "$(echo "$entries" | wc -w)" = 2 ] || fail "ls printed other than 2 entries: $(cat ls.txt)"
for entry in $entries; do
  expect_exit 0 "^# entry $entry$" "$npucache" readable "$entry" --cache-dir "$work/c"
  cp out.txt "readable-$(basename "$entry").txt"
  expect_exit 0 "^# entry $entry$" env NPUCACHE_CACHE_DIR="$work/c" "$npucache" readable "$entry"
  expect_exit 0 "^# entry $entry$" "$npucache" readable "$work/c/$entry/compiled_module"
  (cd "$work/c" && "$npucache" readable "$entry" --cache-dir . > /dev/null) || fail "readable $entry --cache-dir ."
done
expect_exit 1 "no cache entry 'nomodel/prompt'.*npucache ls $work/c" "$npucache" readable nomodel/prompt --cache-dir "$work/c"
guards="$(grep '^shape guard' readable-decode.txt || true)"
[ -n "$guards" ] || fail "the decode entry (dynamic KV cache) shows no shape guards: $(head -40 readable-decode.txt)"
if echo "$guards" | grep -Eq '\bs[0-9]+\b'; then
  fail "shape guards in the trace's symbol numbers: $guards"
fi
echo "$guards" | grep -Eq '^shape guard arg2\[0\]\.shape\[2\] == 2$' ||
  fail "no guard naming the dimension arg2[0].shape[2]: $guards"
echo "$guards" | grep -Eq '^shape guard arg2\[0\]\.shape\[1\] == arg2\[1\]\.shape\[1\]$' ||
  fail "no guard tying the lengths of arg2[0] and arg2[1]: $guards"

end_checks cli_options "sizes ($sizes) accepted, launcher help complete"
