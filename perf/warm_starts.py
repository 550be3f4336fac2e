#!/usr/bin/env python3
"""Warm starts against cold ones, this build beside a baseline build, in one run.

Each figure is measured for both builds in the same run, the builds
alternated trial by trial (this machine is shared and noisy, so only
figures measured side by side compare):

  1. single process, tiny-llama small and large, max-autotune + ge_cache:
     cold vs warm time to ready with the verifying hit check, and the warm
     load path against its floor (perf/bench_cache);
  2. 8 ranks, tiny-llama tp=2 pp=4, `infer`: cold vs warm time to ready;
  3. 32 ranks, Llama-3-70B shapes tp=8 pp=4 (meta weights), `warmup`: cold
     vs warm wall (start of cache work to every rank ready);
  4. index commit, one model of 1,000 entries vs one of 10 (perf/bench_store).

The cost model's error and the cold warmup across simulated hosts need root
and minutes; perf/report measures them for this build (perf/multihost.py).

    perf/warm_starts.py OUT [--baseline BUILD_DIR] [--trials N] [--markdown F]

BUILD_DIR is another build of npucache (e.g. a worktree of an earlier commit
built with scripts/build.sh): its src/npucache and perf/ binaries are run
with this tree's launch scripts.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, NPUCACHE_LOG_LEVEL="warn")
ENV.pop("NPUCACHE_PROGRESS", None)


def run(cmd, timeout=1800):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}")
    return p.stdout


def job(build, kind, out, name, cache, args):
    report = os.path.join(out, name + ".json")
    run([os.path.join(ROOT, "launch", kind + ".sh"), "--npucache", os.path.join(build, "src", "npucache"),
         "--cache-dir", cache, "--report-json", report] + args)
    return json.load(open(report))


def bench_cache(build):
    text = run([os.path.join(build, "perf", "bench_cache"), "3"])
    r = {}
    for size in ("small", "large"):
        block = text.split(f"\n{size} model")[1].split("\n\n")[0]
        num = lambda label: float(re.search(re.escape(label) + r"[^\n]*?([0-9.]+) ms", block).group(1))
        r[size] = {"cold": num("cold time-to-ready"), "warm": num("warm time-to-ready, verified"),
                   "load": num("warm load path"), "floor": num("floor (read")}
    return r


def bench_store(build):
    text = run([os.path.join(build, "perf", "bench_store"), "--total-mb", "40", "--trials", "7"])
    m = re.search(r"commit at 1000 entries / at 10: ([0-9.]+)x \(models of 8 entries\), ([0-9.]+)x", text)
    return {"spread": float(m.group(1)), "one_model": float(m.group(2))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--baseline", help="another npucache build directory to measure beside this one")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="this build (default: build/)")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--markdown")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    builds = {"new": a.build}
    if a.baseline:
        builds["baseline"] = a.baseline
    for b in builds.values():
        if not os.access(os.path.join(b, "src", "npucache"), os.X_OK):
            sys.exit(f"{b}/src/npucache not found: build it first (scripts/build.sh)")
    got = {k: {"cache": [], "store": [], "r8": [], "r32": []} for k in builds}
    for t in range(a.trials):
        for name, b in builds.items():
            print(f"trial {t + 1}/{a.trials}: {name} ({b})", flush=True)
            got[name]["cache"].append(bench_cache(b))
            got[name]["store"].append(bench_store(b))
            c8 = os.path.join(a.out, f"c8-{name}")
            shutil.rmtree(c8, ignore_errors=True)
            args8 = ["--tp", "2", "--pp", "4", "--tokens", "4"]
            cold = job(b, "infer", a.out, f"{name}-8-cold{t}", c8, args8)
            warm = [job(b, "infer", a.out, f"{name}-8-warm{t}-{i}", c8, args8) for i in range(3)]
            got[name]["r8"].append((cold["time_to_ready_s"], statistics.median(w["time_to_ready_s"] for w in warm)))
            c32 = os.path.join(a.out, f"c32-{name}")
            shutil.rmtree(c32, ignore_errors=True)
            args32 = ["--tp", "8", "--pp", "4", "--model", "llama-3-70b", "--max-seq", "64"]
            cold = job(b, "warmup", a.out, f"{name}-32-cold{t}", c32, args32)
            warm = [job(b, "warmup", a.out, f"{name}-32-warm{t}-{i}", c32, args32) for i in range(2)]
            got[name]["r32"].append((cold["wall_s"], statistics.median(w["wall_s"] for w in warm)))
            shutil.rmtree(c8, ignore_errors=True)
            shutil.rmtree(c32, ignore_errors=True)

    med = statistics.median

    def figures(name):
        g = got[name]
        f = {}
        for size in ("small", "large"):
            cold = med(c[size]["cold"] for c in g["cache"])
            warm = med(c[size]["warm"] for c in g["cache"])
            f[f"sp_{size}"] = (cold / warm, f"{warm:.1f} vs {cold:.0f} ms")
            f[f"floor_{size}"] = (med(c[size]["load"] / c[size]["floor"] for c in g["cache"]),
                                  f"{med(c[size]['load'] for c in g['cache']):.2f} vs "
                                  f"{med(c[size]['floor'] for c in g['cache']):.2f} ms")
        for k in ("r8", "r32"):
            cold, warm = med(c for c, _ in g[k]), med(w for _, w in g[k])
            f[k] = (cold / warm, f"{warm * 1e3:.1f} vs {cold * 1e3:.0f} ms")
        f["commit"] = (med(s["one_model"] for s in g["store"]), "")
        return f

    rows = [
        ("single process tiny-llama small, warm vs cold time to ready (verifying hit check)", "sp_small", ">= 30x", True),
        ("single process tiny-llama large, warm vs cold time to ready (verifying hit check)", "sp_large", ">= 30x", True),
        ("8 ranks tiny-llama tp=2 pp=4, infer warm vs cold time to ready", "r8", ">= 20x", True),
        ("Llama-3-70B shapes tp=8 pp=4, 32 ranks, warm vs cold", "r32", ">= 50x", True),
        ("warm load path vs floor (read + zstd + deserialise), small model", "floor_small", "<= 1.5x", False),
        ("warm load path vs floor, large model", "floor_large", "<= 1.5x", False),
        ("index commit, one model with 1,000 entries vs 10", "commit", "<= 1.5x", False),
    ]
    new = figures("new")
    base = figures("baseline") if "baseline" in got else None
    head = "| measure | " + ("baseline | " if base else "") + "this build | goal |"
    md = ["## Warm starts: this build" + (" beside the baseline" if base else "") + "\n",
          f"Medians of {a.trials} trial(s), the builds alternated trial by trial in one run"
          + (f" (baseline: `{a.baseline}`)" if base else "") + ". Ratios with their times (warm vs cold).\n",
          head, "|---|" + ("---|" if base else "") + "---|---|"]
    for label, key, goal, higher in rows:
        limit = float(goal.split()[1].rstrip("x"))
        ok = new[key][0] >= limit if higher else new[key][0] <= limit
        cell = lambda f: f"{f[key][0]:.2f}x" + (f" ({f[key][1]})" if f[key][1] else "")
        md.append(f"| {label} | " + (cell(base) + " | " if base else "") + f"{cell(new)} | {goal} "
                  f"{'ok' if ok else 'MISSED'} |")
    text = "\n".join(md) + "\n"
    json.dump(got, open(os.path.join(a.out, "warm_starts.json"), "w"), indent=1)
    if a.markdown:
        open(a.markdown, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
