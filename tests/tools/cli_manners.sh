#!/usr/bin/env bash
# ctest cli_manners: the command line as a user meets it.
#   cli_manners.sh NPUCACHE_BINARY LAUNCH_DIR
# - usage errors (an unknown command, option or value) name the word and
#   exit 2; --help shows defaults;
# - --json of ls, stats, verify and explain is one JSON document with the
#   facts of the text; explain always ends with a verdict line;
# - a report path that cannot be written is an error before the job starts
#   (no cache is made);
# - the job table and stats say in plain words what they count (persist,
#   compile time avoided);
# - log lines have the seed's format, ModelCacheMeta with the cache format
#   version; colour only on a terminal and never with NO_COLOR; an unknown
#   NPUCACHE_LOG_LEVEL is a warning and the default;
# - the launch scripts reject bad arguments before starting mpirun;
# - hostile model configs (absurd sizes, numbers no double holds, devices,
#   pipes) exit 2 at once naming the file and the field, and make no cache;
# - torch.compile's surface on the jobs (--backend, --mode, --dynamic):
#   contradictions exit 2 naming them; warmup then infer of each backend on
#   2 ranks give the eager tokens, the warm infer compiling nothing; a
#   layout change (tp 2 to pp 2) prints one miss line by cause in the job
#   table, the report has the misses by cause, explain names the change.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 NPUCACHE_BINARY LAUNCH_DIR" >&2; exit 2; }
npucache="$1"
launch="$2"
# shellcheck source=tests/tools/tool_test_lib.sh
source "$(dirname "$0")/tool_test_lib.sh"

# 1. Usage errors: exit status 2, the word named.
expect_exit 2 "unknown command 'lss'; did you mean 'ls'\?" "$npucache" lss
expect_exit 2 "the commands are: .*verify.*warmup" "$npucache" frobnicate
expect_exit 2 "not expected: --bogus" "$npucache" ls --bogus
expect_exit 2 "--tp: 'x' is not a positive whole number" "$npucache" warmup --tp x
expect_exit 2 "--tp: '0' is not a positive whole number" "$npucache" warmup --tp 0
expect_exit 2 "unknown compile mode 'fast'; expected 'max-autotune' or 'reduce-overhead'" "$npucache" warmup --mode fast
expect_exit 2 "--timeout 'nan' is not a positive number" "$npucache" warmup --timeout nan
# gc alone applies the configured limit (none here, and no cache).
expect_exit 1 "no cache in $work/.npucache" "$npucache" gc
expect_exit 2 "'12Q'" "$npucache" gc --max-size 12Q "$work/none"
expect_exit 0 "--tp INT:POSITIVE=1" "$npucache" warmup --help
expect_exit 0 "--backend TEXT:\{npu,inductor,npugraphs\}=npu" "$npucache" warmup --help
expect_exit 0 "--timeout TEXT=120" "$npucache" warmup --help
expect_exit 0 "default: \\\$NPUCACHE_CACHE_DIR" "$npucache" stats --help

# 2. A report path that cannot be written: exit 2 before the job (no cache).
expect_exit 2 "--report-json $work/missing/r.json cannot be written \(its directory $work/missing does not exist\)" \
  "$npucache" warmup --cache-dir "$work/never" --report-json "$work/missing/r.json"
[ ! -e "$work/never" ] || fail "the job started (made $work/never) before the report path was refused"
mkdir "$work/adir"
expect_exit 2 "cannot be written \(it is a directory\)" \
  "$npucache" warmup --cache-dir "$work/never" --report-json "$work/adir"

# 3. A job (one process) with the seed's log lines; an unknown log level
# is a warning and the default (info).
rc=0
NPUCACHE_LOG_LEVEL=verbose timeout 300 "$npucache" warmup --cache-dir "$work/c" --autotune-candidates 1 \
  --report-json "$work/report.json" > job.out 2> job.err || rc=$?
[ "$rc" = 0 ] || fail "warmup exited $rc: $(tail -5 job.err)"
grep -Eq "^\[WARNING\] NPUCACHE [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} NPUCACHE_LOG_LEVEL='verbose' is not a level .*; using info" job.err \
  || fail "no warning for an unknown log level: $(head -3 job.err)"
# The cache format version, as src/format/names.h states it.
fmt="$(sed -n 's/.*kFormatVersion = "\([0-9.]*\)".*/\1/p' "$(dirname "$0")/../../src/format/names.h" | sed 's/\./\\./g')"
[ -n "$fmt" ] || fail "cannot read kFormatVersion from src/format/names.h"
meta="^\[INFO\] NPUCACHE [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} Cache ModelCacheMeta\(name='Decoder\.(prompt|decode)\(arg0, arg1, arg2\)', date='[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+[-+][0-9]{4}', version='$fmt', fx=None\) saved to $work/c/.+/(prompt|decode)/compiled_module$"
[ "$(grep -Ec "$meta" job.err)" = 2 ] || fail "expected 2 ModelCacheMeta save lines in the seed's format: $(cat job.err)"
if grep -q $'\033' job.err; then fail "colour codes in a log that is not a terminal"; fi
# The job table says what its persist figures count (no bare "2 writers").
grep -Eq "^  persist +[0-9.]+ ms, 2 entries written to the index in 2 writes \(one rank per cache directory and method\)$" \
  job.out || fail "the persist line does not say what it counts: $(grep persist job.out)"
if grep -Eq "[0-9]+ writers?," job.out; then fail "the job table prints an undefined 'writers': $(grep persist job.out)"; fi
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert r['compiled'] == 2, r
for m in r['per_rank'][0]['methods']:
    p = m['pass_times_s']
    assert {'decompose', 'fusion', 'lower', 'autotune'} <= set(p) and all(v >= 0 for v in p.values()), p
" "$work/report.json" || fail "the job report is not the JSON of 2 compiles with their pass times"

# A link planted at the report path is replaced, never followed.
ln -s "$work/victim" "$work/linked.json"
timeout 300 "$npucache" warmup --cache-dir "$work/c" --autotune-candidates 1 --report-json "$work/linked.json" \
  > /dev/null 2>&1 || fail "warmup with a linked report path failed"
[ ! -e "$work/victim" ] || fail "the report was written through a planted link"
[ -f "$work/linked.json" ] && [ ! -L "$work/linked.json" ] || fail "the report did not replace the planted link"

# Colour: on a terminal (script gives one) the level is coloured, never
# with NO_COLOR.
if command -v script > /dev/null; then
  rm -rf "$work/c2"
  script -qec "'$npucache' warmup --cache-dir '$work/c2' --autotune-candidates 1" /dev/null > tty.txt 2>&1 || true
  grep -q $'\033\[[0-9;]*m' tty.txt || fail "no colour on a terminal: $(head -c 300 tty.txt | od -c | head)"
  rm -rf "$work/c2"
  NO_COLOR=1 script -qec "'$npucache' warmup --cache-dir '$work/c2' --autotune-candidates 1" /dev/null > tty.txt 2>&1 || true
  grep -q 'ModelCacheMeta' tty.txt || fail "the terminal run logged nothing: $(head -c 300 tty.txt)"
  if grep -q $'\033\[[0-9;]*m' tty.txt; then fail "colour on a terminal with NO_COLOR"; fi
else
  fail "script (util-linux) is missing: it gives the colour checks a terminal"
fi

# 4. --json: ls, stats, verify, explain; explain's verdict.
"$npucache" ls "$work/c" --json > ls.json
"$npucache" stats "$work/c" --json > stats.json
"$npucache" verify "$work/c" --json > verify.json
"$npucache" explain "$work/c" --json > explain.json
python3 - "$work" <<'EOF' || fail "JSON output"
import json, sys
w = sys.argv[1]
ls = json.load(open(f"{w}/ls.json"))
assert len(ls["entries"]) == 2 and ls["objects"] == 2, ls
assert all(e["stored_bytes"] > 0 and len(e["object"]) == 32 for e in ls["entries"]), ls
st = json.load(open(f"{w}/stats.json"))
assert st["entries"] == 2 and st["misses"] >= 2 and st["stored_bytes"] > 0 and st["max_size_bytes"] is None, st
assert 0.0 <= st["hit_rate"] <= 1.0, st
v = json.load(open(f"{w}/verify.json"))
assert v["ok"] is True and v["bad"] == [] and v["entries"] == 2, v
x = json.load(open(f"{w}/explain.json"))
assert [m["reason"] for m in x["misses"]].count("absent") >= 2 and x["verdict"].startswith("2 recent miss"), x
EOF
"$npucache" explain "$work/c" > explain.txt
tail -1 explain.txt | grep -q "^verdict: .*absent (first run of that entry" || fail "explain's last line: $(tail -1 explain.txt)"
entry="$(python3 -c "import json; print(json.load(open('ls.json'))['entries'][0]['path'])")"
"$npucache" explain "$work/c" --entry "$entry" > explain.txt
tail -1 explain.txt | grep -q "^verdict: 2 key component(s) differ from the nearest entry (method, graph_key)" \
  || fail "explain --entry's last line: $(tail -1 explain.txt)"
"$npucache" stats "$work/c" > stats.txt
grep -Eq "^stored +[0-9.]+ (B|KiB|MiB)" stats.txt || fail "stats without units: $(cat stats.txt)"
grep -Eq "^hit rate +[0-9.]+ %" stats.txt || fail "stats without a hit rate: $(cat stats.txt)"
# Plain words: what the compile time figure is, said where it is printed.
grep -Eq "^compile avoided +[0-9.]+ s \(the recorded compile time of each entry, summed over its hits\)$" stats.txt \
  || fail "stats does not say what its compile time figure is: $(cat stats.txt)"
if grep -q "compile saved" stats.txt; then fail "stats prints the undefined 'compile saved': $(cat stats.txt)"; fi
"$npucache" stats --zero "$work/c" > /dev/null
"$npucache" stats "$work/c" --json | python3 -c "import json,sys; s=json.load(sys.stdin); assert s['hits']==0 and s['misses']==0, s" \
  || fail "stats --zero did not zero the counters"
# verify --json exits 1 on damage, with the damage in the document.
obj="$(ls "$work/c/objects/"*.h5 | head -1)"
printf 'X' | dd of="$obj" bs=1 seek=600 conv=notrunc status=none
rc=0
"$npucache" verify "$work/c" --json > verify.json || rc=$?
[ "$rc" = 1 ] || fail "verify --json of a damaged cache exited $rc"
python3 -c "import json; v=json.load(open('verify.json')); assert not v['ok'] and v['bad'], v" || fail "verify --json of a damaged cache"

# 5. The launch scripts check their arguments before mpirun starts any rank.
for script in warmup infer; do
  expect_exit 2 "--tp needs a positive whole number, got 'two'" "$launch/$script.sh" --tp two
  grep -q "mpirun\|prterun\|exited on signal\|rank 1" err.txt && fail "$script.sh started ranks for a bad --tp"
  expect_exit 2 "not expected: --colour" "$launch/$script.sh" --colour
  expect_exit 2 "unknown model 'llama-9'" "$launch/$script.sh" --model llama-9
  expect_exit 2 "num_attention_heads|heads" "$launch/$script.sh" --tp 3
  expect_exit 2 "cannot be written" "$launch/$script.sh" --tp 1 --pp 1 --report-json "$work/missing/r.json"
done

# 6. Hostile model configs: exit 2 within a second, naming the file and the
# field; nothing is built and no cache directory is made.
python3 - "$work" <<'EOF' || fail "writing the hostile configs"
import json, sys
w = sys.argv[1]
base = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
        "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8,
        "num_key_value_heads": 2, "vocab_size": 1024, "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5}
for name, field, value in [("layers", "num_hidden_layers", 10000000), ("vocab", "vocab_size", 1 << 40),
                           ("hidden", "hidden_size", -4096)]:
    json.dump(dict(base, **{field: value}), open(f"{w}/{name}.json", "w"))
open(f"{w}/huge.json", "w").write(json.dumps(dict(base, hidden_size=7)).replace(": 7", ": 1e999"))
EOF
mkfifo "$work/pipe.json"
for spec in "layers.json:field 'num_hidden_layers' is 10000000, more than 4096" \
  "vocab.json:field 'vocab_size' is 1099511627776, more than" \
  "hidden.json:field 'hidden_size' must be a positive integer, not -4096" \
  "huge.json:field 'hidden_size' \(1e999\) is out of range" \
  "pipe.json:'$work/pipe.json' is a named pipe" "/dev/zero:'/dev/zero' is a device"; do
  file="${spec%%:*}"
  case "$file" in /*) ;; *) file="$work/$file" ;; esac
  start=$(date +%s%N)
  expect_exit 2 "${spec#*:}" timeout 5 "$npucache" warmup --model "$file" --cache-dir "$work/hostile"
  ms=$((($(date +%s%N) - start) / 1000000))
  [ "$ms" -lt 1000 ] || fail "refusing $file took $ms ms"
  case "$file" in /dev/*) ;; *) grep -q "$file" err.txt || fail "the error does not name $file: $(cat err.txt)" ;; esac
  [ ! -e "$work/hostile" ] || fail "a cache directory was made for the hostile config $file"
done
expect_exit 2 "field 'num_hidden_layers' is 10000000" "$launch/warmup.sh" --model "$work/layers.json"

# 9. torch.compile's surface on the jobs.
expect_exit 2 "backend 'npugraphs' takes no mode" "$npucache" warmup --backend npugraphs --mode max-autotune --check-args
expect_exit 2 "unknown mode 'fast' for the inductor backend" "$npucache" warmup --backend inductor --mode fast \
  --check-args
expect_exit 2 "unknown compile mode 'default'" "$npucache" warmup --backend npu --mode default --check-args
expect_exit 2 "dynamic" "$npucache" warmup --dynamic maybe --check-args
mpirun_sh="$(dirname "$launch")/scripts/mpirun.sh"
for args in "--backend inductor --mode reduce-overhead --dynamic auto" "--backend npugraphs" \
  "--backend inductor --mode max-autotune-no-cudagraphs --dynamic false"; do
  dir="$work/surface-$(echo "$args" | tr -c 'a-z0-9' '_')"
  # shellcheck disable=SC2086
  timeout 120 "$mpirun_sh" 2 "$npucache" warmup --tp 2 --cache-dir "$dir" $args > warm.txt 2>&1 ||
    fail "warmup $args failed: $(tail -5 warm.txt)"
  # shellcheck disable=SC2086
  timeout 120 "$mpirun_sh" 2 "$npucache" infer --tp 2 --tokens 4 --cache-dir "$dir" $args \
    --report-json "$work/infer.json" > infer.txt 2>&1 || fail "infer $args failed: $(tail -5 infer.txt)"
  grep -q "tokens equal the single-process eager result: yes" infer.txt ||
    fail "infer $args: tokens differ from eager: $(grep tokens infer.txt)"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r['compiled'] == 0 else 1)" \
    "$work/infer.json" || fail "infer $args compiled after its warmup"
done
# A layout change on the last cache (its world 2 tp 2 entries): the job
# table says why the job was cold in one line, and the report by cause.
# shellcheck disable=SC2086
timeout 120 "$mpirun_sh" 2 "$npucache" warmup --tp 1 --pp 2 --cache-dir "$dir" $args \
  --report-json "$work/layout.json" > layout.txt 2>&1 || fail "warmup --pp 2 failed: $(tail -5 layout.txt)"
cause="absent: another layout \(stored world 2 tp 2 pp 1, now world 2 tp 1 pp 2\)"
grep -Eq "^  misses +[0-9]+ $cause; npucache explain $dir$" layout.txt ||
  fail "no miss line naming the layout change: $(grep -A1 -B1 'cache hits' layout.txt)"
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
m = r['misses']
n = sum(len(x['methods']) for x in r['per_rank'])
assert m == {'absent: another layout (stored world 2 tp 2 pp 1, now world 2 tp 1 pp 2)': n}, m
assert all(x['cause'] == list(m)[0] for rank in r['per_rank'] for x in rank['methods']), r['per_rank']
" "$work/layout.json" || fail "the report's misses by cause"
"$npucache" explain "$dir" > explain.txt
grep -q "^  pp: stored 1, now 2$" explain.txt || fail "explain does not name the pp change: $(cat explain.txt)"
grep -q "absent, another layout" explain.txt || fail "explain's verdict: $(tail -1 explain.txt)"

end_checks "cli manners" "all checks passed"
