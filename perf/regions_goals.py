#!/usr/bin/env python3
"""The goals of compile regions, with this run's figures.

Reads this run's bench_regions output (regions on vs off, side by side) and
the warm-start breakdown's markdown (perf/warm_breakdown.py: 8 vs 32 layers,
and the 70B job), and writes the goals table. A figure the inputs do not
hold is an error; a goal nothing measures yet says so, never a number.
With --reuse, the reuse rows come from perf/region_reuse.py's markdown
(regions compiled by a job at another depth or layout, and its time to
ready against a same-layout warm start).

    perf/regions_goals.py BENCH_REGIONS_TXT BREAKDOWN_MD [--reuse REUSE_MD] [--markdown OUT]
"""
import argparse
import re
import sys


def fail(msg):
    sys.exit(f"regions_goals: {msg}")


def bench_rows(text):
    """{(section, label): (on, off, ratio)} from bench_regions' tables."""
    rows, section = {}, None
    for line in text.splitlines():
        m = re.match(r"^(\S.*?)\s{2,}regions on\s+off\s+on/off$", line)
        if m:
            section = m.group(1).strip()
            continue
        m = re.match(r"^(\S.*?)\s{2,}([\d.]+)\s+([\d.]+)\s+([\d.]+)$", line)
        if m and section:
            rows[(section, m.group(1).strip())] = tuple(float(m.group(i)) for i in (2, 3, 4))
    return rows


def need(rows, section, label):
    if (section, label) not in rows:
        fail(f"bench_regions has no line '{label}' under '{section}'")
    return rows[(section, label)]


def breakdown_ratio(md, label):
    m = re.search(r"^\| " + re.escape(label) + r" \| [^|]+ \| [^|]+ \| ([\d.]+)x \|$", md, re.M)
    if not m:
        fail(f"the breakdown has no 8 vs 32 layer row '{label}'")
    return float(m.group(1))


def reuse_value(md, label):
    m = re.search(r"^\| " + re.escape(label) + r" \| ([^|]+) \| ([^|]*) \|$", md, re.M)
    if not m:
        fail(f"the reuse table has no row '{label}'")
    return m.group(1).strip(), m.group(2).strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("breakdown")
    ap.add_argument("--reuse")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    rows = bench_rows(open(a.bench).read())
    md = open(a.breakdown).read()

    table = []

    def row(measure, now, goal, value, limit, below=True):
        if value is None:
            table.append((measure, now, goal, "not measured yet", "-"))
            return
        met = value <= limit if below else value >= limit
        table.append((measure, now, goal, value_text(value), "met" if met else "MISSED"))

    def value_text(v):
        return f"{v:.2f}x"

    row("warm time to ready, 32-layer vs 8-layer model of the same layer shapes", "about 3x", "<= 1.3x",
        breakdown_ratio(md, "warm time to ready (job wall)"), 1.3)
    row("cache bytes, the same pair", "2.7x", "<= 1.2x", breakdown_ratio(md, "cache bytes"), 1.2)
    m = re.search(r"^\| cold time to ready \(job wall\) \| [\d.]+ \(([\d.]+)x the warm\) \|$", md, re.M)
    row("Llama-3-70B tp=8 pp=4, 32 ranks, warm vs cold time to ready", "31x", ">= 50x",
        float(m.group(1)) if m else None, 50.0, below=False)
    layout_goal = ("warm start at pp=2 and pp=8 after a pp=4 warmup: region compiles; time to ready vs a same-layout "
                   "warm start", "every stage program compiles", "0; <= 1.5x")
    depth_goal = ("a 16-layer model after a 32-layer one of the same layer shapes: region compiles",
                  "every program compiles", "0")
    if not a.reuse:
        table.append(layout_goal + ("not measured yet (perf/region_reuse.py)", "-"))
        table.append(depth_goal + ("not measured yet (perf/region_reuse.py)", "-"))
    else:
        md_reuse = open(a.reuse).read()
        texts, met = [], True
        for pp in (2, 8):
            compiled, _ = reuse_value(md_reuse, f"pp={pp} after a pp=4 warmup: regions compiled")
            ratio, detail = reuse_value(md_reuse, f"pp={pp} after a pp=4 warmup: time to ready vs a same-layout "
                                                  "warm start")
            texts.append(f"pp={pp}: {compiled} region compiles, {ratio} ({detail})")
            met = met and int(compiled) == 0 and float(ratio.rstrip("x")) <= 1.5
        table.append(layout_goal + ("; ".join(texts), "met" if met else "MISSED"))
        compiled, detail = reuse_value(md_reuse, "a 16-layer model after a 32-layer one: regions compiled")
        table.append(depth_goal + (f"{compiled} ({detail})", "met" if int(compiled) == 0 else "MISSED"))
    compile32 = need(rows, "compile CPU (ms)", "32 layers")
    trace32 = need(rows, "trace (ms)", "32 layers, dynamic")
    program = need(rows, "decode step host time (us)", "max-autotune")
    replay = need(rows, "decode step host time (us)", "reduce-overhead")
    worst = max(compile32[2], program[2], replay[2])
    table.append(("cold compile CPU, decode-step host time (replay and program), regions on vs off", "-",
                  "<= 1.1x (no slower)",
                  f"compile CPU {compile32[2]:.2f}x (32 layers; trace {trace32[2]:.2f}x), program {program[2]:.2f}x, "
                  f"replay {replay[2]:.2f}x", "met" if worst <= 1.1 else "MISSED"))

    load_bytes = need(rows, "load a stored object", "32 layers: bytes")
    load_decode = need(rows, "load a stored object", "32 layers: decode (ms)")
    table.append(("a stored object at 32 layers, regions on vs off (not a goal: each region stored once)", "-", "-",
                  f"bytes {load_bytes[2]:.2f}x ({load_bytes[0]:.0f} vs {load_bytes[1]:.0f}), decode "
                  f"{load_decode[2]:.2f}x ({load_decode[0]:.2f} vs {load_decode[1]:.2f} ms)", "-"))

    out = ["| measure | before regions | goal | this run | met |", "|---|---|---|---|---|"]
    out += [f"| {m} | {n} | {g} | {v} | {ok} |" for m, n, g, v, ok in table]
    text = "\n".join(out) + "\n"
    print(text)
    if a.markdown:
        open(a.markdown, "w").write(text)


if __name__ == "__main__":
    main()
