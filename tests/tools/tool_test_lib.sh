# Sourced by the command-line tests (tests/tools/*.sh): a scratch directory,
# made current and removed on exit; a failure counter, so a test reports
# every check that failed instead of the first; expect_exit; and
# end_checks, which fails the test when any check did.

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect_exit CODE PATTERN CMD...: runs CMD (bounded in time), checks its
# exit status and that its stderr (or stdout) matches the extended regular
# expression PATTERN. Leaves the output in out.txt and err.txt.
expect_exit() {
  local code="$1" pattern="$2"
  shift 2
  local rc=0
  timeout 120 "$@" > out.txt 2> err.txt || rc=$?
  [ "$rc" = "$code" ] || fail "'$*' exited $rc, expected $code; stderr: $(head -c 600 err.txt)"
  grep -Eq -- "$pattern" err.txt out.txt || fail "'$*': no match for /$pattern/ in: $(head -c 600 err.txt out.txt)"
}

# end_checks NAME SUMMARY: exits 1 naming the count of failed checks, or
# prints "NAME: SUMMARY".
end_checks() {
  if [ "$fails" -ne 0 ]; then
    echo "$1: $fails check(s) failed" >&2
    exit 1
  fi
  echo "$1: $2"
}
