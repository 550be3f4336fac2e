#!/usr/bin/env python3
"""The replay and warm-start figures against their goals, as one table.

Reads the printed output of three benchmarks of one run and writes a
markdown table (measure | goal | figure | met), every figure parsed from
that output (nothing typed in; the goals are the specification):

  1. eager vs one capture with kv_len patched at replay, host time per
     8-layer decode step (bench_surface, section 3)
  2. a method split at one graph break vs the whole graph replayed, per
     call (bench_surface, section 4)
  3. reduce-overhead start, 25 captures, warm vs cold without the
     capture-cost model (bench_templates)
  4. the same warm start vs its floor: read, decode, instantiate
     (bench_templates)
  5. reduce-overhead warm vs cold through cache_compile, the 8 option
     combinations (bench_cache)

  floor_table.py SURFACE TEMPLATES CACHE [--baseline SURFACE TEMPLATES CACHE]
                 [--markdown OUT]

With --baseline, the same outputs of another build (measured in the same
run) are a column of their own. A benchmark output missing a line the table
needs is an error naming the line: the benchmark's format changed and this
parser must follow it.
"""
import argparse
import re
import sys


class Missing(Exception):
    pass


def find(text, pattern, what):
    m = re.search(pattern, text, re.M)
    if not m:
        raise Missing(f"{what}: no line matching /{pattern}/ in the benchmark output")
    return m


def section(text, start, end, what):
    i = text.find(start)
    if i < 0:
        raise Missing(f"{what}: no '{start}' in the benchmark output")
    j = text.find(end, i + len(start)) if end else -1
    return text[i:j] if j >= 0 else text[i:]


def rows(surface, templates, cache):
    """[(measure, goal text, met(value), value, shown text)] for one build."""
    out = []
    s3 = section(surface, "3. update at replay", "4. graph breaks", "row 1")
    eager = float(find(s3, r"^\s*eager\s+([0-9.]+) us/step", "row 1").group(1))
    replay = float(find(s3, r"^\s*one capture, kv_len patched\s+([0-9.]+) us/step", "row 1").group(1))
    r1 = eager / replay
    shown = f"{r1:.1f}x ({eager:.1f} / {replay:.1f} us)"
    cpu = re.search(r"^\s*calling thread CPU: eager ([0-9.]+) us, replay ([0-9.]+) us", s3, re.M)
    if cpu:  # printed by builds that measure it
        ce, cr = float(cpu.group(1)), float(cpu.group(2))
        shown += f"; calling thread's CPU {ce / cr:.1f}x ({ce:.1f} / {cr:.1f} us)"
    out.append((r1, shown))
    s4 = section(surface, "4. graph breaks", None, "row 2")
    split = float(find(s4, r"^\s*split at the break\s+([0-9.]+) us/call", "row 2").group(1))
    whole = float(find(s4, r"^\s*whole graph replayed\s+([0-9.]+) us/call", "row 2").group(1))
    r2 = split / whole
    out.append((r2, f"{r2:.2f}x ({split:.1f} / {whole:.1f} us)"))
    t = section(templates, "without the capture-cost model:", "with the capture-cost model:", "rows 3-4")
    cold = float(find(t, r"^\s*cold \(compile \+ capture\)\s+([0-9.]+) ms", "row 3").group(1))
    warm = float(find(t, r"^\s*warm \(restore templates\)\s+([0-9.]+) ms", "row 3").group(1))
    floor = float(find(t, r"^\s*floor \(read, decode, instantiate\)\s+([0-9.]+) ms", "row 4").group(1))
    out.append((cold / warm, f"{cold / warm:.1f}x ({cold:.1f} / {warm:.1f} ms)"))
    out.append((warm / floor, f"{warm / floor:.2f}x ({warm:.1f} / {floor:.1f} ms)"))
    combos = re.findall(r"^\s*(reduce-overhead \S+(?: ge_cache)? (?:fast|verified))\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+x",
                        cache, re.M)
    if len(combos) != 8:
        raise Missing(f"row 5: {len(combos)} reduce-overhead combinations in the bench_cache output, expected 8")
    ratios = [float(c) / float(w) for _, c, w in combos]
    out.append((min(ratios), f"{min(ratios):.1f}x-{max(ratios):.1f}x (worst: {combos[ratios.index(min(ratios))][0]})"))
    return out


MEASURES = [
    ("eager vs one capture with `kv_len` patched at replay, host time per 8-layer decode step", ">= 10x",
     lambda v: v >= 10),
    ("method split at one graph break vs the whole graph replayed, per call", "<= 1.3x", lambda v: v <= 1.3),
    ("reduce-overhead start, 25 captures, warm vs cold without the capture-cost model", ">= 10x", lambda v: v >= 10),
    ("same, warm vs its floor (read, decode, instantiate)", "<= 1.5x", lambda v: v <= 1.5),
    ("reduce-overhead warm vs cold through cache_compile (bench_cache, 8 combinations; worst)", ">= 10x",
     lambda v: v >= 10),
]


def table(this, baseline=None):
    head = "| measure | goal |" + (" baseline build |" if baseline else "") + " this build | met |"
    lines = [head, "|---|---|" + ("---|" if baseline else "") + "---|---|"]
    for i, (measure, goal, met) in enumerate(MEASURES):
        value, shown = this[i]
        base = f" {baseline[i][1]} |" if baseline else ""
        lines.append(f"| {measure} | {goal} |{base} {shown} | {'ok' if met(value) else 'MISSED'} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("surface")
    ap.add_argument("templates")
    ap.add_argument("cache")
    ap.add_argument("--baseline", nargs=3, metavar=("SURFACE", "TEMPLATES", "CACHE"))
    ap.add_argument("--markdown", help="write the table here (default: stdout)")
    a = ap.parse_args()
    read = lambda p: open(p, encoding="utf-8").read()
    try:
        this = rows(read(a.surface), read(a.templates), read(a.cache))
        base = rows(*(read(p) for p in a.baseline)) if a.baseline else None
    except (Missing, OSError) as e:
        print(f"floor_table.py: {e}", file=sys.stderr)
        return 2
    md = table(this, base)
    if a.markdown:
        open(a.markdown, "w", encoding="utf-8").write(md)
    else:
        sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
