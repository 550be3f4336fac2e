#!/usr/bin/env bash
# ctest man_page: the hand-written man page (docs/npucache.1) names
#   - every command `npucache --help` lists, as a section (.SS NAME), and
#     every subcommand of those (`npucache remote --help`: push, pull, ...)
#     as `.B npucache NAME SUB`;
#   - every NPUCACHE_* environment variable the sources read (a string
#     literal "NPUCACHE_..." in src/, a $NPUCACHE_... or ${NPUCACHE_... in
#     launch/*.sh) as an entry of its ENVIRONMENT section (.B NAME);
#   - every other variable src/ reads with getenv, anywhere in the page,
#     except those the tools only inspect (TERM; PMIX_NAMESPACE and OMPI_*,
#     set by mpirun);
#   - every long option `npucache CMD [SUB] --help` lists, by one of its
#     names, in the command's section (infer's: with warmup's, whose
#     options it takes; --cache-dir, which every cache command takes, is
#     said once).
# It also fails on a page that misses any one of them when planted (the
# check must be able to fail).
#   man_page.sh NPUCACHE_BINARY MAN_PAGE SOURCE_DIR
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 NPUCACHE_BINARY MAN_PAGE SOURCE_DIR" >&2; exit 2; }
npucache="$1" page="$2" src="$3"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# subcommands_of: the names in the "Subcommands:" list of a --help text.
subcommands_of() { awk '/^Subcommands:/{on=1; next} on && /^  [a-z]/{print $1} on && /^$/{on=0}'; }
# options ARGS...: the options of `npucache ARGS --help` (--help aside) with
# a long name, one a line, its names joined by | (-o|--output).
options() { "$npucache" "$@" --help | options_of; }
options_of() {
  awk '/^Options:/{on=1; next} /^[A-Z]/{on=0} on && /^  +-/{print $1}' | tr ',' '|' | grep -e '--' |
    grep -vx -e '-h|--help' || true
}
# The page's ENVIRONMENT section.
environment() { awk '/^\.SH ENVIRONMENT/{on=1; next} /^\.SH/{on=0} on' "$1"; }

[ -r "$page" ] || { echo "FAIL: no man page at $page" >&2; exit 1; }
# What the page must name: commands ("cmd" or "cmd sub"), NPUCACHE_*
# variables, other variables.
commands=$("$npucache" --help | subcommands_of)
[ -n "$commands" ] || { echo "FAIL: npucache --help lists no commands" >&2; exit 1; }
# Each command's subcommands ("cmd sub"), and its options or its
# subcommands' ("cmd --option": a subcommand's in its command's section).
nested="" command_options=""
for cmd in $commands; do
  help=$("$npucache" "$cmd" --help)
  subs=$(subcommands_of <<< "$help")
  [ -n "$subs" ] || command_options+=$(options_of <<< "$help" | sed "s/^/$cmd /")$'\n'
  for sub in $subs; do
    nested+="$cmd $sub"$'\n'
    command_options+=$(options "$cmd" "$sub" | sed "s/^/$cmd /")$'\n'
  done
done
nested=$(sed '/^$/d' <<< "$nested")
# --cache-dir: said once, for every cache command.
command_options=$(sed '/^$/d' <<< "$command_options" | grep -v ' --cache-dir$' | sort -u)
own_vars=$( (grep -rhoE '"NPUCACHE_[A-Z0-9_]+"' "$src/src" | tr -d '"'
  grep -hoE '\$\{?NPUCACHE_[A-Z0-9_]+' "$src"/launch/*.sh | tr -d '${') | sort -u)
other_vars=$(grep -rhoE 'getenv\("[A-Za-z_][A-Za-z0-9_]*"\)' "$src/src" | sed 's/getenv("\(.*\)")/\1/' | sort -u |
  grep -vE '^(NPUCACHE_.*|TERM|PMIX_NAMESPACE|OMPI_.*)$' || true)

# missing PAGE: prints what PAGE misses, one a line (few processes: the
# check runs on the page and on four planted pages).
missing() {
  local p="$1" var
  comm -23 <(printf '.SS %s\n' $commands | sort) <(grep '^\.SS ' "$p" | sort) | sed 's/^/the command section /'
  [ -z "$nested" ] ||
    comm -23 <(sed 's/^/.B npucache /' <<< "$nested" | sort) <(grep '^\.B npucache ' "$p" | sort) | sed 's/^/the command /'
  comm -23 <(printf '.B %s\n' $own_vars | sort) <(environment "$p" | grep '^\.B ' | sort) |
    sed 's/^/the environment variable (under ENVIRONMENT) /'
  local plain
  plain=$(sed 's/\\f[BIRP]//g' "$p")  # \fBNAME: NAME is a word
  for var in $other_vars; do
    grep -qw "$var" <<< "$plain" || echo "the environment variable $var"
  done
  # Each option in its command's section (escapes and fonts removed), by
  # any of its names.
  awk 'NR == FNR { want[NR] = $0; n = NR; next }
       /^\.S[SH]/ { name = ($1 == ".SS") ? $2 : ""; next }
       name != "" { line = $0; gsub(/\\-/, "-", line); gsub(/\\f[BIRP]/, "", line); text[name] = text[name] " " line " " }
       END {
         text["infer"] = text["infer"] text["warmup"]
         for (i = 1; i <= n; i++) {
           split(want[i], w, " "); k = split(w[2], names, "|"); found = 0
           for (j = 1; j <= k && !found; j++) {
             t = text[w[1]]
             while ((at = index(t, names[j])) > 0) {
               after = substr(t, at + length(names[j]), 1)
               if (after !~ /[a-z0-9-]/) { found = 1; break }
               t = substr(t, at + 1)
             }
           }
           if (!found) print "the option " w[2] " of " w[1] " (in its section)"
         }
       }' <(printf '%s\n' "$command_options") "$p"
}

gaps=$(missing "$page")
if [ -n "$gaps" ]; then
  fail "$page does not describe:"$'\n'"$gaps"
else
  echo "ok: $(wc -w <<< "$commands") commands, their $(wc -l <<< "$command_options") options and every variable the sources read are in $page"
fi

# The check fails on a page without one command, one subcommand, one variable.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
plant() {
  local what="$1" expr="$2"
  sed "$expr" "$page" > "$work/npucache.1"
  [ -n "$(missing "$work/npucache.1")" ] || fail "a page without $what passes the check"
}
plant "the section of gc" '/^\.SS gc$/d'
plant "remote keygen" 's/^\.B npucache remote keygen$/.B npucache remote/'
plant "NPUCACHE_REMOTE" '/^\.B NPUCACHE_REMOTE$/d'
plant "TMPDIR" 's/TMPDIR/TEMP/g'
plant "verify --dry-run" '/^\.SS verify$/,/^\.SS /s/dry\\-run/dry/g'
((failures == 0)) || exit 1
echo "ok: a page missing a command, a subcommand, a variable or an option fails the check"
