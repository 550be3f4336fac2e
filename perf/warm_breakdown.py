#!/usr/bin/env python3
"""Where a warm start's time goes: the phases of a warm start at 8 and at 32
layers of Llama-3-8B shapes, side by side in one run.

Each trial runs, for a copy of the shipped llama-3-8b config with 8 and
with 32 hidden layers in turn, a cold warmup into an empty cache and then a
warm one on it (one rank, tp=1 pp=1, meta weights: the warmup prepares the
methods and runs nothing, so the first run is 0). The table gives, for the
warm jobs, each phase's seconds (the rank's prompt and decode summed;
MethodReport::warm in the job report's `warm_phases`), at 8 and at 32
layers and the ratio 32/8, with the warm time to ready (the job's wall:
start of cache work to ready) and the cache's bytes. Medians over trials.
With --70b it also runs, once, the Llama-3-70B tp=8 pp=4 job of
perf/real_shapes.py (32 ranks, cold then warm: minutes) and gives each
phase's median across its ranks. The table is the last thing printed.

    perf/warm_breakdown.py OUT [--trials N] [--70b] [--npucache BIN] [--markdown F]
    perf/warm_breakdown.py --table OUT [--markdown F]

The second form makes the table from the reports a run kept in OUT
(OUT/runs.json names them): a report lacking a phase, or a run lacking a
report, is an error naming it, never a table with a figure left out.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The phases of MethodReport::warm, in the order of a warm start, with the
# table's names.
PHASES = [("trace_s", "trace"), ("key_s", "key hash"), ("read_s", "read (file, checks, decompression)"),
          ("decode_s", "decode (deserialize, validate)"), ("own_key_s", "own key (stored trace hashed again)"),
          ("bind_s", "bind (tuning, call, parameters)"),
          ("first_run_s", "first run")]
DEPTHS = (8, 32)


class ReportError(Exception):
    pass


def run_job(out, name, model, cache, tp, pp, npucache):
    report = os.path.join(out, name + ".json")
    cmd = [os.path.join(ROOT, "launch", "warmup.sh"), "--tp", str(tp), "--pp", str(pp), "--model", model,
           "--max-seq", "64", "--cache-dir", cache, "--report-json", report]
    if npucache:
        cmd += ["--npucache", npucache]
    env = dict(os.environ, NPUCACHE_LOG_LEVEL="warn")
    env.pop("NPUCACHE_PROGRESS", None)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, timeout=3600)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}")
    return os.path.basename(report)


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def config_of_depth(out, layers):
    """A copy of the shipped llama-3-8b config with `layers` hidden layers."""
    cfg = json.load(open(os.path.join(ROOT, "configs", "llama-3-8b.json")))
    cfg["num_hidden_layers"] = layers
    path = os.path.join(out, f"llama-3-8b-{layers}l.json")
    json.dump(cfg, open(path, "w"), indent=2)
    return path


def measure(a):
    os.makedirs(a.out, exist_ok=True)
    runs = []
    configs = {d: config_of_depth(a.out, d) for d in DEPTHS}
    for t in range(a.trials):
        for d in DEPTHS:  # alternated within each trial: side by side
            cache = os.path.join(a.out, f"cache-{d}")
            shutil.rmtree(cache, ignore_errors=True)
            print(f"Llama-3-8B shapes, {d} layers: trial {t + 1}/{a.trials}", flush=True)
            cold = run_job(a.out, f"{d}l-cold{t}", configs[d], cache, 1, 1, a.npucache)
            warm = run_job(a.out, f"{d}l-warm{t}", configs[d], cache, 1, 1, a.npucache)
            runs.append({"job": f"{d}", "trial": t, "cold": cold, "warm": warm, "cache_bytes": dir_bytes(cache)})
    if a.with_70b:
        cache = os.path.join(a.out, "cache-70b")
        shutil.rmtree(cache, ignore_errors=True)
        print("Llama-3-70B tp=8 pp=4, 32 ranks: cold then warm", flush=True)
        cold = run_job(a.out, "70b-cold", "llama-3-70b", cache, 8, 4, a.npucache)
        warm = run_job(a.out, "70b-warm", "llama-3-70b", cache, 8, 4, a.npucache)
        runs.append({"job": "70b", "trial": 0, "cold": cold, "warm": warm, "cache_bytes": dir_bytes(cache)})
    json.dump({"runs": runs}, open(os.path.join(a.out, "runs.json"), "w"), indent=2)


def load_report(out, name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        raise ReportError(f"{path}: the report is missing")
    try:
        return json.load(open(path))
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not a job report ({e})")


def rank_phases(report, name):
    """Each rank's phases, its methods summed: [{phase: seconds}, ...]."""
    ranks = report.get("per_rank")
    if not ranks:
        raise ReportError(f"{name}: no per_rank reports")
    out = []
    for p in ranks:
        if not p.get("methods"):
            raise ReportError(f"{name}: rank {p.get('rank')} has no methods")
        sums = {k: 0.0 for k, _ in PHASES + [("ready_s", "")]}
        for m in p["methods"]:
            w = m.get("warm_phases")
            if w is None:
                raise ReportError(f"{name}: rank {p.get('rank')} method {m.get('method')} has no warm_phases")
            for k in sums:
                if k not in w:
                    raise ReportError(f"{name}: rank {p.get('rank')} method {m.get('method')} lacks warm_phases.{k}")
                sums[k] += float(w[k])
        out.append(sums)
    return out


def field(report, key, name):
    if key not in report:
        raise ReportError(f"{name}: lacks {key}")
    return report[key]


def summarise(out, runs, job):
    """Medians over trials (of medians over ranks) of one job's warm starts."""
    mine = [r for r in runs if r.get("job") == job]
    if not mine:
        raise ReportError(f"{out}/runs.json: no run of the {job} job")
    rows = {k: [] for k, _ in PHASES}
    ready, cold_ready, cache, hits, methods = [], [], [], 0, 0
    for r in mine:
        for key in ("cold", "warm", "cache_bytes"):
            if key not in r:
                raise ReportError(f"{out}/runs.json: a run of the {job} job lacks {key}")
        warm, cold = load_report(out, r["warm"]), load_report(out, r["cold"])
        per_rank = rank_phases(warm, r["warm"])
        for k in rows:
            rows[k].append(statistics.median(p[k] for p in per_rank))
        ready.append(float(field(warm, "wall_s", r["warm"])))
        cold_ready.append(float(field(cold, "wall_s", r["cold"])))
        cache.append(int(r["cache_bytes"]))
        hits += sum(bool(m.get("hit")) for p in warm["per_rank"] for m in p["methods"])
        methods += sum(len(p["methods"]) for p in warm["per_rank"])
    med = statistics.median
    return {"phases": {k: med(v) for k, v in rows.items()}, "ready": med(ready), "cold": med(cold_ready),
            "bytes": med(cache), "trials": len(mine), "hits": hits, "methods": methods,
            "ranks": len(load_report(out, mine[0]["warm"])["per_rank"])}


def ratio(a, b):
    return f"{a / b:.2f}x" if b > 0 else "-"


def table(out):
    runs_path = os.path.join(out, "runs.json")
    if not os.path.exists(runs_path):
        raise ReportError(f"{runs_path}: missing (run perf/warm_breakdown.py OUT first)")
    runs = json.load(open(runs_path)).get("runs", [])
    s8, s32 = summarise(out, runs, "8"), summarise(out, runs, "32")
    md = ["## Where a warm start's time goes (perf/warm_breakdown.py)\n",
          f"Llama-3-8B layer shapes at 8 and at 32 layers, one rank, meta weights (a warmup runs nothing: first run "
          f"0); medians of {s8['trials']} trial(s), the two depths alternated. Seconds of each phase of the warm "
          f"start, its methods (prompt, decode) summed; rank-methods served from their own entry: "
          f"{s8['hits']}/{s8['methods']} at 8 layers, {s32['hits']}/{s32['methods']} at 32.\n",
          "| phase | 8 layers (s) | 32 layers (s) | 32 / 8 |", "|---|---|---|---|"]
    for k, label in PHASES:
        a, b = s8["phases"][k], s32["phases"][k]
        md.append(f"| {label} | {a:.4f} | {b:.4f} | {ratio(b, a)} |")
    total8, total32 = sum(s8["phases"].values()), sum(s32["phases"].values())
    md.append(f"| sum of the phases | {total8:.4f} | {total32:.4f} | {ratio(total32, total8)} |")
    md.append(f"| warm time to ready (job wall) | {s8['ready']:.4f} | {s32['ready']:.4f} | "
              f"{ratio(s32['ready'], s8['ready'])} |")
    md.append(f"| cold time to ready (job wall) | {s8['cold']:.3f} | {s32['cold']:.3f} | "
              f"{ratio(s32['cold'], s8['cold'])} |")
    md.append(f"| cache bytes | {s8['bytes']:.0f} | {s32['bytes']:.0f} | {ratio(s32['bytes'], s8['bytes'])} |")
    if any(r.get("job") == "70b" for r in runs):
        s = summarise(out, runs, "70b")
        md += ["", f"Llama-3-70B tp=8 pp=4 ({s['ranks']} ranks, meta weights): each phase's median across the "
               f"ranks (a rank's methods summed); {s['hits']}/{s['methods']} rank-methods served from their own "
               "entry.\n", "| phase | median across ranks (s) |", "|---|---|"]
        for k, label in PHASES:
            md.append(f"| {label} | {s['phases'][k]:.4f} |")
        md.append(f"| sum of the phases | {sum(s['phases'].values()):.4f} |")
        md.append(f"| warm time to ready (job wall) | {s['ready']:.4f} |")
        md.append(f"| cold time to ready (job wall) | {s['cold']:.3f} ({ratio(s['cold'], s['ready'])} the warm) |")
        md.append(f"| cache bytes | {s['bytes']:.0f} |")
    return "\n".join(md) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--table", action="store_true", help="only make the table from the reports kept in OUT")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--70b", dest="with_70b", action="store_true",
                    help="also the Llama-3-70B tp=8 pp=4 job (32 ranks; minutes)")
    ap.add_argument("--npucache", help="the npucache binary (default: the launcher's)")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    if a.trials < 1:
        sys.exit("--trials must be at least 1")
    if not a.table:
        measure(a)
    try:
        text = table(a.out)
    except ReportError as e:
        sys.exit(f"warm_breakdown: {e}")
    if a.markdown:
        open(a.markdown, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
