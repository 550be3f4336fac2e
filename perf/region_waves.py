#!/usr/bin/env python3
"""The region waves side by side: a cold job whose two pipeline stages'
ranks use two cache directories (rank 0 one, rank 1 another: node-local
caches on two hosts), with the waves (each shared region compiled once for
the job, then sent) and with --no-region-waves (each directory's rank
compiles it), alternated in one run.

Llama-3-8B layer shapes, --layers hidden layers (default 4), tp=1 pp=2,
meta weights, one mpirun of 2 ranks (MPMD: one --cache-dir each) per job,
each into empty directories. The table gives the medians over trials of
the job report's regions_compiled, compile_cpu_s (summed over ranks) and
wall_s (start of cache work to every rank ready), and the ratio
waves / no waves. The table is the last thing printed.

    perf/region_waves.py OUT [--trials N] [--layers L] [--npucache BIN] [--markdown F]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def config(out, layers):
    cfg = json.load(open(os.path.join(ROOT, "configs", "llama-3-8b.json")))
    cfg["num_hidden_layers"] = layers
    path = os.path.join(out, f"llama-3-8b-{layers}l.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def job(out, name, model, npucache, waves):
    a, b = os.path.join(out, name + "-a"), os.path.join(out, name + "-b")
    for d in (a, b):
        shutil.rmtree(d, ignore_errors=True)
    report = os.path.join(out, name + ".json")
    common = ["warmup", "--tp", "1", "--pp", "2", "--model", model, "--max-seq", "64", "--report-json", report]
    if not waves:
        common.append("--no-region-waves")
    cmd = (["mpirun", "--oversubscribe", "-np", "1", npucache] + common + ["--cache-dir", a] +
           [":", "-np", "1", npucache] + common + ["--cache-dir", b])
    env = dict(os.environ, NPUCACHE_LOG_LEVEL="warn", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("NPUCACHE_PROGRESS", None)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}")
    r = json.load(open(report))
    for key in ("regions_compiled", "compile_cpu_s", "wall_s", "regions_copied"):
        if key not in r:
            sys.exit(f"the report {report} has no {key}")
    regions = sorted(os.listdir(os.path.join(b, "regions"))) if os.path.isdir(os.path.join(b, "regions")) else []
    if waves and sorted(os.listdir(os.path.join(a, "regions"))) != regions:
        sys.exit(f"{name}: the two directories hold other regions")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--npucache", default=os.path.join(ROOT, "build", "src", "npucache"))
    ap.add_argument("--markdown")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    model = config(a.out, a.layers)
    runs = {True: [], False: []}
    for t in range(a.trials):
        for waves in ((True, False) if t % 2 == 0 else (False, True)):
            print(f"trial {t + 1}/{a.trials}: {'waves' if waves else 'no waves'}", flush=True)
            runs[waves].append(job(a.out, f"{'waves' if waves else 'parallel'}{t}", model, a.npucache, waves))
    med = {w: {k: statistics.median(r[k] for r in runs[w]) for k in ("regions_compiled", "compile_cpu_s", "wall_s")}
           for w in runs}
    lines = [
        "## Region waves across two cache directories (perf/region_waves.py)", "",
        f"Llama-3-8B layer shapes, {a.layers} layers, tp=1 pp=2, one rank per cache directory (MPMD), cold; "
        f"medians of {a.trials} trial(s), alternated.", "",
        "| | waves | no waves (--no-region-waves) | waves / no waves |", "|---|---|---|---|"
    ]
    for key, label in (("regions_compiled", "regions compiled (job)"), ("compile_cpu_s", "compile CPU, s (summed)"),
                       ("wall_s", "wall to ready, s")):
        w, p = med[True][key], med[False][key]
        ratio = f"{w / p:.2f}x" if p else "-"
        lines.append(f"| {label} | {w:.3g} | {p:.3g} | {ratio} |")
    text = "\n".join(lines) + "\n"
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
