#!/usr/bin/env bash
# ctest cli_settings: the settings and the size limit as an operator meets
# them, on a real store of two models (the seed example, "Model", and
# "Other", by cache_worker):
# - config --show prints every setting with its source (a remote's
#   password hidden): default, the
#   user's npucache.conf (file:line), the environment, the command line,
#   the cache's own npucache.conf; a bad line is a usage error naming
#   file:line;
# - NPUCACHE_LOG_FILE (and log_file of the user's file) receives the log
#   lines, stderr none;
# - config max-size SIZE lists what it evicts; gc with no argument applies
#   the configured limit (and says when there is none);
# - --dry-run of gc, clear and verify --repair lists and removes nothing;
# - ls shows each entry's last use and filters by --model;
# - a cache's npucache.conf is trusted as its other files: a FIFO never
#   blocks, a link or a file others may write is ignored (warned); a bad
#   one is a warning for stats and gc, an error for config; a 400-digit
#   size names file:line; NPUCACHE_MAX_SIZE over config max-size is warned
#   about; a bad log_level of the user's file is named by file:line;
# - every cache command takes --cache-dir D as its positional D.
#   settings.sh NPUCACHE_BINARY CACHE_WORKER
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 NPUCACHE_BINARY CACHE_WORKER" >&2; exit 2; }
npucache="$1"
worker="$2"
# shellcheck source=tests/tools/tool_test_lib.sh
source "$(dirname "$0")/tool_test_lib.sh"
for v in $(env | sed -n 's/^\(NPUCACHE_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export XDG_CONFIG_HOME="$work/config"
conf="$XDG_CONFIG_HOME/npucache/npucache.conf"
mkdir -p "$(dirname "$conf")" "$work/shared"
c="$work/c"

fill() {
  timeout 60 "$worker" run "$c" seed prompt > seed.txt 2>&1 || fail "cache_worker failed: $(tail -5 seed.txt)"
  timeout 60 "$worker" run "$c" seed prompt --other > other.txt 2>&1 ||
    fail "cache_worker --other failed: $(tail -5 other.txt)"
}
entries() { "$npucache" ls --cache-dir "$1" --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)['entries']))"; }

# 1. config --show: every setting and where it came from.
expect_exit 0 "^\(default\) cache_dir = $work/.npucache$" "$npucache" config --show
grep -q "^(default) max_size = none$" out.txt || fail "config --show without max_size: $(cat out.txt)"
grep -q "^(default) log_level = info$" out.txt || fail "config --show without log_level: $(cat out.txt)"
printf '# the cache of this host\ncache_dir = %s\nremote = file://%s/shared\nmax_size = 2G\n' "$c" "$work" > "$conf"
expect_exit 0 "^\($conf:2\) cache_dir = $c$" "$npucache" config --show
grep -q "^($conf:3) remote = file://$work/shared$" out.txt || fail "remote not from the file: $(cat out.txt)"
grep -q "^($conf:4) max_size = 2G$" out.txt || fail "max_size not from the file: $(cat out.txt)"
expect_exit 0 "^\(environment NPUCACHE_LOG_LEVEL\) log_level = debug$" env NPUCACHE_LOG_LEVEL=debug "$npucache" config --show
expect_exit 0 "^\(environment NPUCACHE_CACHE_DIR\) cache_dir = $work/e$" env NPUCACHE_CACHE_DIR="$work/e" "$npucache" config --show
expect_exit 0 "^\(command line --cache-dir\) cache_dir = $work/d$" env NPUCACHE_CACHE_DIR="$work/e" "$npucache" config --show --cache-dir "$work/d"
# A remote's password is never printed (each shard's URL masked).
expect_exit 0 "^\(environment NPUCACHE_REMOTE\) remote = redis://u:\*\*\*@h1:6379,redis://:\*\*\*@h2:6380$" \
  env NPUCACHE_REMOTE='redis://u:Zq9Xw7@h1:6379,redis://:Pw2@h2:6380' "$npucache" config --show
expect_exit 0 "^remote redis://u:\*\*\*@h1:6379$" env NPUCACHE_REMOTE='redis://u:Zq9Xw7@h1:6379' "$npucache" config remote
if grep -q -e Zq9Xw7 -e Pw2 out.txt err.txt; then fail "config printed a remote's password: $(cat out.txt)"; fi
printf 'cache_dir = %s\nlog_levl = debug\n' "$c" > "$conf"
expect_exit 2 "$conf:2: unknown setting 'log_levl'; the settings are: cache_dir, remote, log_level, log_file, max_size" \
  "$npucache" config --show
expect_exit 2 "$conf:2: unknown setting 'log_levl'" "$npucache" ls
printf 'cache_dir = %s\n' "$c" > "$conf"

# 2. The log file: the cache's INFO lines of a save go to it, appended.
NPUCACHE_LOG_FILE="$work/log/npucache.log" NPUCACHE_LOG_LEVEL=debug fill
grep -Eq "^\[(INFO|DEBUG)\] NPUCACHE .* saved to $c/" "$work/log/npucache.log" ||
  fail "NPUCACHE_LOG_FILE has no save line: $(head -c 600 "$work/log/npucache.log" 2>&1)"
grep -q "NPUCACHE" seed.txt other.txt && fail "with a log file, log lines still on stderr: $(cat seed.txt)"
[ "$(grep -c "saved to" "$work/log/npucache.log")" -ge 2 ] || fail "the second process did not append"
printf 'cache_dir = %s\nlog_file = %s/log/from-conf.log\nlog_level = debug\n' "$c" "$work" > "$conf"
"$npucache" gc --orphans > /dev/null 2> gc.err || fail "gc --orphans with log_file"
timeout 60 "$worker" run "$c" seed prompt > seed.txt 2>&1 || fail "cache_worker failed: $(tail -5 seed.txt)"
grep -Eq "^\[(INFO|DEBUG)\] NPUCACHE .* loaded from" "$work/log/from-conf.log" ||
  fail "log_file of npucache.conf has no line: $(head -c 600 "$work/log/from-conf.log" 2>&1)"
printf 'cache_dir = %s\n' "$c" > "$conf"

# 3. ls: last use, and --model as gc names models.
"$npucache" ls > ls.txt || fail "ls (cache_dir from the user's file): $(cat ls.txt)"
head -1 ls.txt | grep -q "last use$" || fail "ls has no last use column: $(head -1 ls.txt)"
grep -Eq "^Model_.* [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}$" ls.txt || fail "no last use date: $(cat ls.txt)"
"$npucache" ls --model Other --json > ls.json
python3 - ls.json << 'EOF' || fail "ls --model Other: $(cat ls.json)"
import json, sys, time
l = json.load(open(sys.argv[1]))
assert len(l["entries"]) == 1 and l["entries"][0]["path"].startswith("Other_"), l
assert abs(l["entries"][0]["last_used"] - time.time()) < 600, l
EOF
expect_exit 2 "--model 'Nope': no entry of that model in .*; its models are: Model, Other" "$npucache" ls --model Nope

# 4. --dry-run removes nothing and says what it would.
before="$(find "$c" -type f | sort)"
expect_exit 0 "^would evict Model_" "$npucache" gc --max-size 1 --dry-run
grep -q "^would remove $c/objects/" out.txt || fail "gc --dry-run lists no object: $(cat out.txt)"
grep -q "^dry run: nothing was removed" out.txt || fail "gc --dry-run does not say so: $(cat out.txt)"
expect_exit 0 "^would remove $c/objects/" "$npucache" clear --dry-run
grep -q "^would remove $c/Other_" out.txt || fail "clear --dry-run lists no index: $(cat out.txt)"
obj="$(ls "$c/objects" | head -1)"
printf 'junk' | dd of="$c/objects/$obj" bs=1 seek=100 conv=notrunc 2> /dev/null
before="$(find "$c" -type f | sort)"
expect_exit 1 "^would repair $c/objects/$obj" "$npucache" verify --repair --dry-run
expect_exit 2 "--dry-run goes with --repair" "$npucache" verify --dry-run
[ "$(find "$c" -type f | sort)" = "$before" ] || fail "a dry run changed files"
"$npucache" verify --repair > /dev/null || fail "verify --repair"
[ "$(entries "$c")" = 1 ] || fail "verify --repair did not remove the damaged entry"
fill

# 5. The limit: config max-size lists what it evicts; gc alone applies it.
expect_exit 0 "^no size limit is configured|gc: no size limit is configured" "$npucache" gc
[ "$(entries "$c")" = 2 ] || fail "gc with no limit evicted entries"
expect_exit 0 "^would evict (Model|Other)_" "$npucache" config max-size 1 --dry-run
[ ! -e "$c/npucache.conf" ] || fail "config max-size --dry-run wrote npucache.conf"
expect_exit 0 "^evicted (Model|Other)_" "$npucache" config max-size 1
grep -q "^max-size 1 B for $c (in $c/npucache.conf)$" out.txt || fail "config max-size: $(cat out.txt)"
grep -q "^gc: evicted 2 of 2 entries" out.txt || fail "config max-size evicted other than 2: $(cat out.txt)"
grep -q "^max_size = 1$" "$c/npucache.conf" || fail "npucache.conf: $(cat "$c/npucache.conf")"
printf 'max_size = none\n' > "$c/npucache.conf"
fill
[ "$(entries "$c")" = 2 ] || fail "max_size = none: both entries stay"
printf 'max_size = 1\n' > "$c/npucache.conf"
expect_exit 0 "^gc: applying max_size 1 B \(from $c/npucache.conf:1\)" "$npucache" gc
grep -q "^gc: evicted 2 of 2 entries" out.txt || fail "gc with no argument did not apply the limit: $(cat out.txt)"
[ "$(entries "$c")" = 0 ] || fail "entries left after gc applied the limit"
rm "$c/npucache.conf"
fill

# 5b. The cache's own file, which others may plant in a shared cache
# directory: read as the cache's other files are.
mkfifo "$c/npucache.conf"
expect_exit 0 "the cache's settings are not used: refusing to use $c/npucache.conf: it is not a regular file" \
  timeout 20 "$npucache" stats
rm "$c/npucache.conf"
printf 'max_size = 1\n' > "$work/planted.conf"
ln -s "$work/planted.conf" "$c/npucache.conf"
expect_exit 0 "^gc: no size limit is configured" "$npucache" gc
grep -q "refusing to use $c/npucache.conf: it is a symbolic link" err.txt || fail "a linked npucache.conf: $(cat err.txt)"
rm "$c/npucache.conf"
printf 'max_size = 1\n' > "$c/npucache.conf"
chmod 664 "$c/npucache.conf"
expect_exit 0 "^gc: no size limit is configured" "$npucache" gc
grep -q "refusing to use $c/npucache.conf: other users can write to it" err.txt ||
  fail "a group-writable npucache.conf: $(cat err.txt)"
[ "$(entries "$c")" = 2 ] || fail "a planted npucache.conf evicted entries"
rm "$c/npucache.conf"
printf 'max_size = lots\n' > "$c/npucache.conf"
expect_exit 0 "no size limit applies: $c/npucache.conf:1: max_size: size 'lots' is not a size" "$npucache" stats
expect_exit 0 "no size limit applies: $c/npucache.conf:1: max_size: size 'lots'" "$npucache" gc
expect_exit 2 "$c/npucache.conf:1: max_size: size 'lots' is not a size" "$npucache" config --show
rm "$c/npucache.conf"
printf 'cache_dir = %s\nmax_size = %s\n' "$c" "$(printf '9%.0s' $(seq 400))" > "$conf"
expect_exit 2 "$conf:2: max_size: size '9{400}' is out of range" "$npucache" config --show
printf 'cache_dir = %s\n' "$c" > "$conf"
expect_exit 0 "warning: NPUCACHE_MAX_SIZE=1G overrides the max_size of $c/npucache.conf: the limit in effect is 1.0 GiB, not 1 B" \
  env NPUCACHE_MAX_SIZE=1G "$npucache" config max-size 1
grep -q "^max_size = 1$" "$c/npucache.conf" || fail "config max-size under NPUCACHE_MAX_SIZE: $(cat "$c/npucache.conf")"
[ "$(entries "$c")" = 2 ] || fail "config max-size 1 under NPUCACHE_MAX_SIZE=1G applied 1 B"
rm "$c/npucache.conf"
printf 'cache_dir = %s\nlog_level = loud\n' "$c" > "$conf"
expect_exit 0 "log settings of the configuration file are not used: $conf:2: log_level: 'loud' is not a log level" \
  "$npucache" stats --cache-dir "$c"
grep -q "NPUCACHE_LOG_LEVEL" err.txt && fail "a bad log_level of $conf named as the environment's: $(cat err.txt)"
printf 'cache_dir = %s\n' "$c" > "$conf"

# 6. --cache-dir on every cache command (and the positional, the same).
cd "$work/config"  # no cache here
for cmd in "ls" "verify" "stats" "explain" "gc --orphans" "clear --dry-run" "config max-size" "export -o $work/b.bundle"; do
  # shellcheck disable=SC2086
  "$npucache" $cmd --cache-dir "$c" > out.txt 2>&1 || fail "$cmd --cache-dir: $(cat out.txt)"
done
"$npucache" import "$work/b.bundle" --cache-dir "$work/imported" > out.txt 2>&1 || fail "import --cache-dir: $(cat out.txt)"
[ "$(entries "$work/imported")" = 2 ] || fail "import --cache-dir filled another directory"
"$npucache" remote push --cache-dir "$c" --remote "file://$work/shared" > out.txt 2>&1 || fail "remote push --cache-dir: $(cat out.txt)"
"$npucache" remote pull Model --cache-dir "$work/pulled" --remote "file://$work/shared" > out.txt 2>&1 ||
  fail "remote pull --cache-dir: $(cat out.txt)"
[ "$(entries "$work/pulled")" = 1 ] || fail "remote pull --cache-dir filled another directory"
entry="$("$npucache" ls --cache-dir "$c" | sed -n 2p | awk '{print $1}')"
expect_exit 0 "^# entry $entry$" "$npucache" readable "$entry" --cache-dir "$c"
expect_exit 0 "entries" "$npucache" ls "$c" --cache-dir "$c"
expect_exit 2 "two cache directories: $work/x and --cache-dir $c; give one" "$npucache" stats "$work/x" --cache-dir "$c"
for cmd in ls readable verify stats explain export import gc config clear; do
  "$npucache" "$cmd" --help | grep -q -- "--cache-dir" || fail "$cmd --help names no --cache-dir"
done
"$npucache" clear --cache-dir "$c" > /dev/null || fail "clear --cache-dir"
[ ! -e "$c/objects" ] || fail "clear --cache-dir left the objects"

end_checks cli_settings "config --show, log file, limits, --dry-run, ls, --cache-dir"
