#!/usr/bin/env python3
"""Benchmarks on the shapes of real models, side by side in one run.

For Llama-3-8B at tp=2 x pp=2 (4 ranks) and Llama-3-70B at tp=8 x pp=4 (32
ranks, oversubscribed on this machine), with meta weights (a warmup needs
none), each trial runs, in turn:
  - a cold coordinated warmup into an empty cache,
  - a cold independent warmup (every rank compiles) into another,
  - a warm warmup on the coordinated cache (every rank's trace proves the
    stored program matches before it is served);
and reports the medians: compile CPU (coordinated vs independent, against
unique/world + 10%), wall time (the goal at 32 ranks: at least 3x faster),
warm vs cold time to ready (goal at 32 ranks: at least 50x), bytes stored
against the unique artifacts, peak resident memory per rank.

The published figures the issue cites are printed beside ours, labelled as
theirs: other hardware and other work, so only ratios compare.

    perf/real_shapes.py OUT [--trials N] [--models 8b,70b] [--markdown F]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = {
    "8b": {"model": "llama-3-8b", "tp": 2, "pp": 2, "wall_goal": None, "warm_goal": None},
    "70b": {"model": "llama-3-70b", "tp": 8, "pp": 4, "wall_goal": 3.0, "warm_goal": 50.0},
}
ANCHORS = [
    ("vLLM #19824", "Llama-3-70B class, per rank", "70 s compile + 60 s graph capture per rank, repeated on every rank and restart"),
    ("vLLM PR #32191", "Qwen3-32B", "30.7 s of a 68.5 s cold start is compiling (45%)"),
    ("vllm-ascend #11514", "TP ranks on Ascend", "38 s of compile on each TP rank"),
    ("PyTorch (training jobs)", "large models", "5-30 minutes of redundant per-rank compiles"),
]


def warmup(out, name, run, cache, extra):
    report = os.path.join(out, name + ".json")
    cmd = [os.path.join(ROOT, "launch", "warmup.sh"), "--tp", str(run["tp"]), "--pp", str(run["pp"]),
           "--model", run["model"], "--max-seq", "64", "--cache-dir", cache, "--report-json", report] + extra
    env = dict(os.environ, NPUCACHE_LOG_LEVEL="warn")
    t = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, timeout=3600)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}")
    r = json.load(open(report))
    r["elapsed_s"] = time.monotonic() - t
    return r


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--models", default="8b,70b")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    md = ["## Real model shapes (meta weights)\n",
          f"Medians of {a.trials} trial(s); each trial runs the three jobs in turn. Compile CPU is summed over "
          "ranks; wall is the job's cache work until every rank is ready; time to ready compares a warm job with "
          "the cold coordinated one. Bytes stored are the cache's objects against the artifacts of the unique "
          "subgraphs (one object per unique subgraph).\n",
          "| model | ranks | unique | compile CPU coord. / indep. (s) | ratio | goal | wall coord. / indep. (s) | "
          "faster | warm / cold (s) | time to ready | objects / unique | peak RSS per rank |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key in a.models.split(","):
        run = RUNS[key]
        trials = []
        for t in range(a.trials):
            caches = [os.path.join(a.out, f"{key}-{n}") for n in ("coord", "indep")]
            for c in caches:
                shutil.rmtree(c, ignore_errors=True)
            print(f"{run['model']} tp={run['tp']} pp={run['pp']}: trial {t + 1}/{a.trials}", flush=True)
            cold = warmup(a.out, f"{key}-cold{t}", run, caches[0], [])
            indep = warmup(a.out, f"{key}-indep{t}", run, caches[1], ["--independent"])
            warm = warmup(a.out, f"{key}-warm{t}", run, caches[0], [])
            objects = len(os.listdir(os.path.join(caches[0], "objects")))
            trials.append((cold, indep, warm, objects))
        med = lambda f: statistics.median(f(c, i, w, o) for c, i, w, o in trials)
        c0 = trials[0][0]
        world = c0["world_size"]
        unique = c0["unique_subgraphs"]
        ccpu, icpu = med(lambda c, i, w, o: c["compile_cpu_s"]), med(lambda c, i, w, o: i["compile_cpu_s"])
        cwall, iwall = med(lambda c, i, w, o: c["wall_s"]), med(lambda c, i, w, o: i["wall_s"])
        wwall = med(lambda c, i, w, o: w["wall_s"])
        hits = min(sum(m["hit"] for p in w["per_rank"] for m in p["methods"]) for _, _, w, _ in trials)
        objects = trials[0][3]
        rss = max(c["max_peak_rss_bytes"] for c, _, _, _ in trials)
        goal = unique / (2 * world) + 0.10  # unique compiles of 2 methods over the independent job's 2 per rank
        ratio = ccpu / icpu
        faster = iwall / cwall
        ready = cwall / wwall
        wall_goal = f" (goal >= {run['wall_goal']:g}x {'ok' if faster >= run['wall_goal'] else 'MISSED'})" if run["wall_goal"] else ""
        ready_goal = f" (goal >= {run['warm_goal']:g}x {'ok' if ready >= run['warm_goal'] else 'MISSED'})" if run["warm_goal"] else ""
        md.append(f"| {run['model']} tp={run['tp']} pp={run['pp']} | {world} | {unique} | {ccpu:.2f} / {icpu:.2f} | "
                  f"{ratio:.3f} | <= {goal:.3f} {'ok' if ratio <= goal else 'MISSED'} | {cwall:.2f} / {iwall:.2f} | "
                  f"{faster:.2f}x{wall_goal} | {wwall:.3f} / {cwall:.2f} | {ready:.0f}x{ready_goal} "
                  f"({hits} of {2 * world} rank-methods hit) | {objects} / {unique} | {rss / 2**20:.0f} MiB |")
    md += ["\nPublished figures (theirs: other hardware, other work; the comparison is the ratio, not the seconds):\n",
           "| source | model | what they report |", "|---|---|---|"]
    md += [f"| {s} | {m} | {w} |" for s, m, w in ANCHORS]
    text = "\n".join(md) + "\n"
    if a.markdown:
        open(a.markdown, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
