#!/usr/bin/env python3
"""perf/warm_breakdown.py --table on job reports kept from one run
(outputs/warm_breakdown/): every figure of the table is computed from the
reports it parsed (checked here against the same reports), and a report
lacking a phase, a run lacking a report or a depth lacking its run is an
error naming what is missing, never a table with a figure left out.

  warm_breakdown_test.py PROJECT_SOURCE_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

root = sys.argv[1]
script = os.path.join(root, "perf", "warm_breakdown.py")
kept = os.path.join(root, "tests", "perf", "outputs", "warm_breakdown")
failures = []
PHASES = ["trace_s", "key_s", "read_s", "decode_s", "own_key_s", "bind_s", "first_run_s"]


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what)


def table(out):
    return subprocess.run([sys.executable, script, "--table", out], capture_output=True, text=True)


def phase_sum(report, phase):  # the one rank's methods summed
    return sum(m["warm_phases"][phase] for m in report["per_rank"][0]["methods"])


r = table(kept)
check(r.returncode == 0, f"table from the kept reports (exit {r.returncode}: {r.stderr})")
rows = [l for l in r.stdout.splitlines() if l.startswith("| ") and not l.startswith("| phase")]
check(len(rows) == 11, f"eleven rows (seven phases, their sum, warm, cold, bytes), got {len(rows)}:\n{r.stdout}")
runs = json.load(open(os.path.join(kept, "runs.json")))["runs"]
by_job = {x["job"]: x for x in runs}
w8, w32 = (json.load(open(os.path.join(kept, by_job[d]["warm"]))) for d in ("8", "32"))
for i, phase in enumerate(PHASES):
    a, b = phase_sum(w8, phase), phase_sum(w32, phase)
    want = f"| {a:.4f} | {b:.4f} | {b / a:.2f}x |" if a > 0 else f"| {a:.4f} | {b:.4f} | - |"
    check(len(rows) > i and rows[i].endswith(want), f"row {phase} from the parsed reports: {rows[i] if len(rows) > i else ''} (want {want})")
check(len(rows) > 8 and f"| {w8['wall_s']:.4f} | {w32['wall_s']:.4f} |" in rows[8], f"warm wall row: {rows[8:9]}")
check(len(rows) > 10 and f"| {by_job['8']['cache_bytes']:.0f} | {by_job['32']['cache_bytes']:.0f} |" in rows[10],
      f"cache bytes row: {rows[10:11]}")
check(all(phase_sum(w, p) > 0 for w in (w8, w32) for p in ("read_s", "decode_s", "own_key_s")),
      "the kept warm starts recorded their read, decode and own key")


def broken(edit, expect, what):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out")
        shutil.copytree(kept, out)
        edit(out)
        r = table(out)
        check(r.returncode != 0 and expect in r.stderr, f"{what}: exit {r.returncode}, stderr {r.stderr!r}")


def drop_phase(out):
    path = os.path.join(out, by_job["32"]["warm"])
    rep = json.load(open(path))
    del rep["per_rank"][0]["methods"][1]["warm_phases"]["decode_s"]
    json.dump(rep, open(path, "w"))


def drop_report(out):
    os.remove(os.path.join(out, by_job["8"]["cold"]))


def drop_depth(out):
    path = os.path.join(out, "runs.json")
    json.dump({"runs": [x for x in runs if x["job"] != "32"]}, open(path, "w"))


def drop_wall(out):
    path = os.path.join(out, by_job["8"]["warm"])
    rep = json.load(open(path))
    del rep["wall_s"]
    json.dump(rep, open(path, "w"))


broken(drop_phase, "lacks warm_phases.decode_s", "a report lacking a phase")
broken(drop_report, "the report is missing", "a run lacking its cold report")
broken(drop_depth, "no run of the 32 job", "a depth lacking its run")
broken(drop_wall, "lacks wall_s", "a report lacking its wall")
if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("ok")
