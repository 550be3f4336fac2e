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
#     set by mpirun).
# It also fails on a page that misses any one of them when planted (the
# check must be able to fail).
#   man_page.sh NPUCACHE_BINARY MAN_PAGE SOURCE_DIR
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 NPUCACHE_BINARY MAN_PAGE SOURCE_DIR" >&2; exit 2; }
npucache="$1" page="$2" src="$3"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# subcommands ARGS...: the names in the "Subcommands:" list of `npucache ARGS --help`.
subcommands() {
  "$npucache" "$@" --help | awk '/^Subcommands:/{on=1; next} on && /^  [a-z]/{print $1} on && /^$/{on=0}'
}
# The page's ENVIRONMENT section.
environment() { awk '/^\.SH ENVIRONMENT/{on=1; next} /^\.SH/{on=0} on' "$1"; }

[ -r "$page" ] || { echo "FAIL: no man page at $page" >&2; exit 1; }
# What the page must name: commands ("cmd" or "cmd sub"), NPUCACHE_*
# variables, other variables.
commands=$(subcommands)
[ -n "$commands" ] || { echo "FAIL: npucache --help lists no commands" >&2; exit 1; }
nested=$(for cmd in $commands; do for sub in $(subcommands "$cmd"); do echo "$cmd $sub"; done; done)
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
  for var in $other_vars; do
    grep -qw "$var" "$p" || echo "the environment variable $var"
  done
}

gaps=$(missing "$page")
if [ -n "$gaps" ]; then
  fail "$page does not describe:"$'\n'"$gaps"
else
  echo "ok: $(wc -w <<< "$commands") commands and every variable the sources read are in $page"
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
((failures == 0)) || exit 1
echo "ok: a page missing a command, a subcommand or a variable fails the check"
