#!/usr/bin/env python3
"""perf/floor_table.py on benchmark outputs kept from one run (outputs/):
every figure of the table is computed from the lines it parsed (checked
here against the same lines), a goal missed says MISSED, a baseline is a
column of its own, and an output missing a line the table needs is an
error naming the row, never a table with a figure left out.

  floor_table_test.py PROJECT_SOURCE_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

root = sys.argv[1]
script = os.path.join(root, "perf", "floor_table.py")
here = os.path.join(root, "tests", "perf", "outputs")
surface, templates, cache = (os.path.join(here, f) for f in ("surface.txt", "templates.txt", "cache.txt"))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what)


def run(*args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)


r = run(surface, templates, cache)
check(r.returncode == 0, f"table from the kept outputs (exit {r.returncode}: {r.stderr})")
rows = [l for l in r.stdout.splitlines() if l.startswith("| ") and not l.startswith("| measure")]
check(len(rows) == 5, f"five rows, got {len(rows)}:\n{r.stdout}")
text = open(surface).read()
eager = float(re.search(r"^\s*eager\s+([0-9.]+) us/step", text, re.M).group(1))
replay = float(re.search(r"kv_len patched\s+([0-9.]+) us/step", text).group(1))
check(f"{eager / replay:.1f}x ({eager:.1f} / {replay:.1f} us)" in rows[0], f"row 1 from the parsed times: {rows[0]}")
check(rows[0].endswith("| MISSED |") == (eager / replay < 10), f"row 1 judged against >= 10x: {rows[0]}")
split = float(re.search(r"split at the break\s+([0-9.]+)", text).group(1))
whole = float(re.search(r"whole graph replayed\s+([0-9.]+)", text).group(1))
check(f"{split / whole:.2f}x" in rows[1], f"row 2 from the parsed times: {rows[1]}")
t = open(templates).read().split("with the capture-cost model:")[0]
cold = float(re.search(r"cold \(compile \+ capture\)\s+([0-9.]+)", t).group(1))
warm = float(re.search(r"warm \(restore templates\)\s+([0-9.]+)", t).group(1))
floor = float(re.search(r"floor \(read, decode, instantiate\)\s+([0-9.]+)", t).group(1))
check(f"{cold / warm:.1f}x ({cold:.1f} / {warm:.1f} ms)" in rows[2], f"row 3 without the cost model: {rows[2]}")
check(f"{warm / floor:.2f}x ({warm:.1f} / {floor:.1f} ms)" in rows[3], f"row 4 without the cost model: {rows[3]}")
ratios = [float(c) / float(w) for c, w in
          re.findall(r"^\s*reduce-overhead \S+(?: ge_cache)? (?:fast|verified)\s+([0-9.]+)\s+([0-9.]+)", open(cache).read(), re.M)]
check(len(ratios) == 8 and f"{min(ratios):.1f}x-{max(ratios):.1f}x" in rows[4], f"row 5 over the 8 combinations: {rows[4]}")

# A build that prints the calling thread's CPU time: shown beside the ratio
# (the goal is judged on the host time).
with tempfile.TemporaryDirectory() as d:
    cpu = os.path.join(d, "surface.txt")
    open(cpu, "w").write(re.sub(r"(^\s*eager / replay .*$)", r"\1\n   calling thread CPU: eager 300.0 us, replay 20.0 us: 15.0x",
                                text, count=1, flags=re.M))
    r = run(cpu, templates, cache)
    row = [l for l in r.stdout.splitlines() if l.startswith("| eager vs one capture")]
    check(r.returncode == 0 and row and "calling thread's CPU 15.0x (300.0 / 20.0 us)" in row[0]
          and row[0].endswith("| MISSED |") == (eager / replay < 10), f"row 1 with the CPU time: {row}")

# A baseline is a column of its own (the same outputs here: equal figures).
r = run(surface, templates, cache, "--baseline", surface, templates, cache)
head = r.stdout.splitlines()[0] if r.stdout else ""
check(r.returncode == 0 and "baseline build" in head, f"baseline column: {head}")

# Each output cut short: an error naming what is missing, no table.
with tempfile.TemporaryDirectory() as d:
    for name, path, cut in (("row 1", surface, "3. update at replay"), ("row 2", surface, "4. graph breaks"),
                            ("rows 3-4", templates, "without the capture-cost model"),
                            ("row 5", cache, "reduce-overhead static ge_cache fast")):
        bad = os.path.join(d, "bad.txt")
        content = open(path).read()
        open(bad, "w").write(content[: content.index(cut)])
        args = [bad if p == path else p for p in (surface, templates, cache)]
        out = os.path.join(d, "table.md")
        r = run(*args, "--markdown", out)
        check(r.returncode == 2 and name.split()[0] in r.stderr and not os.path.exists(out),
              f"{name} missing: exit {r.returncode}, stderr {r.stderr!r}")

print("ok" if not failures else f"{len(failures)} failed")
sys.exit(1 if failures else 0)
