#!/usr/bin/env python3
"""perf/regions_goals.py on outputs kept from one run: its figures are the
parsed ones, and a missing figure is an error, never a typed-in number.

    regions_goals_test.py SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

root = sys.argv[1]
script = os.path.join(root, "perf", "regions_goals.py")
outputs = os.path.join(root, "tests", "perf", "outputs")
bench, breakdown = os.path.join(outputs, "regions.txt"), os.path.join(outputs, "breakdown.md")


def run(b, d):
    return subprocess.run([sys.executable, script, b, d], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


r = run(bench, breakdown)
assert r.returncode == 0, r.stdout
text = open(bench).read()
ratio = [line.split()[-1] for line in text.splitlines() if line.startswith("32 layers ") and "steps" not in line][-1]
assert f"compile CPU {float(ratio):.2f}x" in r.stdout, r.stdout
assert "| 7.95x | MISSED |" in r.stdout, r.stdout  # the breakdown's warm 32/8
assert "14.42x" in r.stdout, r.stdout
assert "not measured yet" in r.stdout, r.stdout
reuse = os.path.join(outputs, "reuse.md")
r = subprocess.run([sys.executable, script, bench, breakdown, "--reuse", reuse], stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, text=True)
assert r.returncode == 0, r.stdout
assert "not measured yet" not in r.stdout, r.stdout
for line in open(reuse).read().splitlines():  # each reuse figure is the parsed one
    if "regions compiled" in line and line.startswith("| pp=2"):
        assert f"pp=2: {line.split('|')[2].strip()} region compiles" in r.stdout, r.stdout
with tempfile.TemporaryDirectory() as d:
    cut = os.path.join(d, "reuse.md")
    open(cut, "w").write("\n".join(l for l in open(reuse).read().splitlines() if not l.startswith("| pp=8")) + "\n")
    r = subprocess.run([sys.executable, script, bench, breakdown, "--reuse", cut], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    assert r.returncode != 0 and "pp=8" in r.stdout, r.stdout
with tempfile.TemporaryDirectory() as d:
    cut = os.path.join(d, "bench.txt")
    open(cut, "w").write("\n".join(l for l in text.splitlines() if not l.startswith("reduce-overhead")) + "\n")
    r = run(cut, breakdown)
    assert r.returncode != 0 and "reduce-overhead" in r.stdout, r.stdout
    cut = os.path.join(d, "breakdown.md")
    open(cut, "w").write("\n".join(l for l in open(breakdown).read().splitlines() if "cache bytes" not in l) + "\n")
    r = run(bench, cut)
    assert r.returncode != 0 and "cache bytes" in r.stdout, r.stdout
print("ok")
