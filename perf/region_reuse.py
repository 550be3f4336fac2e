#!/usr/bin/env python3
"""Compiled regions reused across depths and pipeline layouts, side by side in
one run (Llama-3-8B layer shapes, meta weights, tp=1, launch/warmup.sh).

- Depth: a cold 32-layer warmup, then a 16-layer warmup on the same cache
  (another model: its programs compile, its layer region is taken from
  regions/), beside a cold 16-layer warmup in an empty cache. The figures
  are the job reports' regions_compiled and wall (start of cache work to
  ready).
- Layout: a cold pp=4 warmup (4 ranks) of 32 layers, then for pp=2 and pp=8
  a warmup on the same cache (new stage programs, no region compiled) and
  at once a second one (a same-layout warm start: all hits). The ratio is
  the first's wall to the second's.

    perf/region_reuse.py OUT [--npucache BIN] [--markdown F]

The table (markdown) is the last thing printed; every figure comes from a
report of this run, and a missing report or field is an error.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

from warm_breakdown import ROOT, config_of_depth


def job(a, name, config, cache, pp):
    """Runs one warmup; returns its job report."""
    report = os.path.join(a.out, name + ".json")
    cmd = [os.path.join(ROOT, "launch", "warmup.sh"), "--tp", "1", "--pp", str(pp), "--model", config,
           "--max-seq", "64", "--autotune-candidates", "2", "--cache-dir", cache, "--report-json", report]
    if a.npucache:
        cmd += ["--npucache", a.npucache]
    env = dict(os.environ, NPUCACHE_LOG_LEVEL="warn")
    env.pop("NPUCACHE_PROGRESS", None)
    print(f"{name}: pp={pp}", flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, timeout=3600)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}")
    r = json.load(open(report))
    for k in ("wall_s", "compiled", "regions_compiled", "regions_reused"):
        if k not in r:
            sys.exit(f"{report}: no field {k}")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--npucache")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    c32, c16 = config_of_depth(a.out, 32), config_of_depth(a.out, 16)
    fresh = lambda name: (shutil.rmtree(os.path.join(a.out, name), ignore_errors=True), os.path.join(a.out, name))[1]

    rows = []
    deep = fresh("cache-depth")
    cold32 = job(a, "depth-cold32", c32, deep, 1)
    after = job(a, "depth-16-after-32", c16, deep, 1)
    alone = job(a, "depth-16-cold", c16, fresh("cache-16"), 1)
    rows.append(("a 16-layer model after a 32-layer one: regions compiled", f"{after['regions_compiled']}",
                 f"{alone['regions_compiled']} in an empty cache; the 32-layer job compiled {cold32['regions_compiled']}"))
    rows.append(("a 16-layer model after a 32-layer one: time to ready vs cold", f"{after['wall_s'] / alone['wall_s']:.2f}x",
                 f"{after['wall_s']:.2f} vs {alone['wall_s']:.2f} s"))
    lay = fresh("cache-layout")
    cold4 = job(a, "layout-cold-pp4", c32, lay, 4)
    for pp in (2, 8):
        first = job(a, f"layout-pp{pp}-after-pp4", c32, lay, pp)
        again = job(a, f"layout-pp{pp}-warm", c32, lay, pp)
        if again["compiled"] != 0:
            sys.exit(f"the second pp={pp} job compiled {again['compiled']} programs: not a warm start")
        rows.append((f"pp={pp} after a pp=4 warmup: regions compiled", f"{first['regions_compiled']}",
                     f"{first['compiled']} stage programs compiled, {first['regions_reused']} regions taken; "
                     f"the pp=4 job compiled {cold4['regions_compiled']}"))
        rows.append((f"pp={pp} after a pp=4 warmup: time to ready vs a same-layout warm start",
                     f"{first['wall_s'] / again['wall_s']:.2f}x", f"{first['wall_s']:.2f} vs {again['wall_s']:.2f} s"))
    md = ["## Compiled regions reused across depths and layouts (perf/region_reuse.py)\n",
          "Llama-3-8B layer shapes, meta weights, tp=1; one run, side by side.\n",
          "| measure | value | detail |", "|---|---|---|"]
    md += [f"| {m} | {v} | {d} |" for m, v, d in rows]
    text = "\n".join(md) + "\n"
    print(text)
    if a.markdown:
        open(a.markdown, "w").write(text)


if __name__ == "__main__":
    main()
