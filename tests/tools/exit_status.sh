#!/usr/bin/env bash
# ctest exit_status: the man page's EXIT STATUS section is true.
#   exit_status.sh NPUCACHE_BINARY MAN_PAGE LAUNCH_DIR
# The section lists each status as ".TP / .B N / meaning". Every invocation
# below (one of each kind of outcome the command has: success, a parse
# error, a config error, a failed command, damage found) must exit with a
# status the page documents, with the status expected for its kind, and the
# page must document no status that none of them produces.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 NPUCACHE_BINARY MAN_PAGE LAUNCH_DIR" >&2; exit 2; }
npucache="$1"
man="$2"
launch="$3"
# shellcheck source=tests/tools/tool_test_lib.sh
source "$(dirname "$0")/tool_test_lib.sh"

[ -r "$man" ] || { echo "FAIL: no man page at $man" >&2; exit 1; }
# The statuses the page documents: the ".B N" right after a ".TP" in the
# EXIT STATUS section.
documented="$(awk '/^\.SH EXIT STATUS/{on=1; next} /^\.SH/{on=0} on && prev==".TP" && /^\.B [0-9]+$/{print $2} {prev=$0}' "$man" | sort -n | tr '\n' ' ')"
[ -n "$documented" ] || fail "the EXIT STATUS section of $man lists no status as .TP/.B N: $(sed -n '/^\.SH EXIT STATUS/,/^\.SH SEE/p' "$man")"
if sed -n '/^\.SH EXIT STATUS/,/^\.SH SEE/p' "$man" | grep -qi "above 100\|CLI11"; then
  fail "the EXIT STATUS section still speaks of parser codes above 100"
fi

produced=" "
# check KIND EXPECTED CMD...: runs CMD; its status must be EXPECTED and
# documented.
check() {
  local kind="$1" expected="$2"
  shift 2
  local rc=0
  timeout 120 "$@" > out.txt 2> err.txt || rc=$?
  [ "$rc" = "$expected" ] || fail "$kind: '$*' exited $rc, expected $expected; stderr: $(head -c 400 err.txt)"
  case " $documented " in
    *" $rc "*) ;;
    *) fail "$kind: '$*' exited $rc, which the man page does not document (it documents: $documented)" ;;
  esac
  produced="$produced$rc "
}

# Success.
check "success" 0 "$npucache" --version
check "help" 0 "$npucache" ls --help
check "plugin path" 0 "$npucache" --plugin-path
mkdir -p "$work/empty"
check "clear of a folder without a cache" 0 "$npucache" clear "$work/empty"
# Command lines that do not parse: the usage status, not CLI11's own codes.
check "parse error: unknown option" 2 "$npucache" ls --bogus
check "parse error: unknown command" 2 "$npucache" lss
check "parse error: missing required option" 2 "$npucache" export
check "parse error: value not in the set" 2 "$npucache" warmup --backend gpu
check "parse error: not a number" 2 "$npucache" warmup --tp x
check "parse error: extra argument" 2 "$npucache" ls a b c
# Invalid values and settings (ConfigError).
check "config error: timeout" 2 "$npucache" warmup --timeout nan --check-args
check "config error: size" 2 "$npucache" gc --max-size 12Q "$work/empty"
check "config error: model config" 2 "$npucache" warmup --model "$work/none.json" --check-args
check "config error: setting" 2 "$npucache" config colour red --cache-dir "$work/empty"
# Failed commands.
check "failure: no such cache" 1 "$npucache" ls "$work/none"
check "failure: no such entry" 1 "$npucache" readable "$work/none/m/f"
# Damage found by verify.
mkdir -p "$work/bad"
echo junk > "$work/bad/m.h5"
check "verify found damage" 1 "$npucache" verify "$work/bad"
# The launchers' own bad options.
check "launcher: bad --dp" 2 env NPUCACHE_BIN="$npucache" "$launch/warmup.sh" --dp 0
check "launcher: job arguments fail --check-args" 2 env NPUCACHE_BIN="$npucache" "$launch/infer.sh" --timeout nan

for code in $documented; do
  case "$produced" in
    *" $code "*) ;;
    *) fail "the man page documents status $code, which no invocation here produced" ;;
  esac
done

end_checks exit_status "statuses $documented documented and produced"
