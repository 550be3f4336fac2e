#!/usr/bin/env python3
"""The coordinator's cost model (docs/SCALING.md): fits its constants to the
job reports of perf/multihost.py, checks predicted against measured time,
and extrapolates to 4,096 ranks (512 hosts x 8).

    perf/cost_model.py DATA_DIR [--markdown FILE] [--plot-data DIR]

Each step of one method's coordination is a function of the ranks W, the
hosts H (R = W / H ranks per host), the unique artifacts U of the method,
the artifact size S and the cores C the ranks share (here 2; one per rank
at scale). kappa(n) = max(1, n / C) is how much slower n ranks computing
at once run on C cores.

  setup    (once per job)   s0 + s1 ceil(log2 W)
                            communicators and the host map host by host: collectives of ~log W rounds
  lookup   trace + lookup   l kappa(W)               every rank, at once
  arrival  all-reduce       a ceil(log2 W)
  keys     host-by-host     k0 + ks (R - 1) + kn ceil(log2 H)
           (flat, before)   k0' + kf (W - 1)         MPI_Iallgatherv is linear
  plan                      p W
  produce  owners compile   t1 c_max + t2 c_sum / C    (c: the owners' compile CPU, measured;
                            at scale: one compile on its own core, as the one-rank job's)
  status   all-reduce       a' ceil(log2 W)
  exchange node-leader tree xs Ds + xn Dn + S (Ds / Bs + Dn / Bn)
                            Ds = ceil(log2 R), Dn = ceil(log2 H) hops
  load     bind the bytes   d kappa(W)
  persist  per store        w0 + we E kappa(H),      E entries per writer (R node-local, W shared)
  warm     lookup + arrival l0 + lw kappa(W) + aw ceil(log2 W) + ah ceil(log2 H)   (fitted on warm totals)

Constants are least-squares fits (non-negative) over the measured grid; the
measured value of a step is the slowest rank's for work (lookup, plan,
produce, load, persist, exchange) and the fastest rank's for a collective
(arrival, keys, status, setup: the last rank to arrive waits least, so its
time is the collective's own).
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys

C_HERE = 2  # cores of the machine the measurements ran on


def log2c(n):
    return math.ceil(math.log2(n)) if n > 1 else 0


def kappa(n, cores):
    return max(1.0, n / cores)


def lstsq(rows, ys):
    """Non-negative least squares for a few columns (drops a negative
    column and refits)."""
    cols = list(range(len(rows[0])))
    while True:
        k = len(cols)
        a = [[sum(r[cols[i]] * r[cols[j]] for r in rows) for j in range(k)] for i in range(k)]
        b = [sum(r[cols[i]] * y for r, y in zip(rows, ys)) for i in range(k)]
        # Gaussian elimination with a tiny ridge for rank-deficient columns.
        for i in range(k):
            a[i][i] += 1e-12
        for i in range(k):
            p = max(range(i, k), key=lambda r: abs(a[r][i]))
            a[i], a[p], b[i], b[p] = a[p], a[i], b[p], b[i]
            for r in range(i + 1, k):
                f = a[r][i] / a[i][i]
                for c in range(i, k):
                    a[r][c] -= f * a[i][c]
                b[r] -= f * b[i]
        x = [0.0] * k
        for i in reversed(range(k)):
            x[i] = (b[i] - sum(a[i][c] * x[c] for c in range(i + 1, k))) / a[i][i]
        neg = [i for i in range(k) if x[i] < 0]
        if not neg:
            out = [0.0] * len(rows[0])
            for i, c in enumerate(cols):
                out[c] = x[i]
            return out
        del cols[neg[0]]
        if not cols:
            return [0.0] * len(rows[0])


def layout(world):
    tp = 2 if world >= 2 else 1
    pp = min(world // tp, 4)
    return tp, pp, world // (tp * pp)


def stage_kinds(pp):
    return 1 if pp == 1 else 2 if pp == 2 else 3


def exchange_depth(world, hosts, tp, pp):
    """Hops of the deepest node-leader tree: a key group is the ranks of one
    stage kind, over tp, dp and (for middle stages) pp; ranks are placed
    host by host (R = W / H consecutive ranks per host)."""
    r = world // hosts
    worst = (0, 0)
    label = [0 if s == 0 else 2 if s == pp - 1 else 1 for s in range(pp)]
    for kind in set(label):
        ranks = [g for g in range(world) if label[(g // tp) % pp] == kind]
        by_host = {}
        for g in ranks:
            by_host.setdefault(g // r, []).append(g)
        dn = log2c(len(by_host))
        ds = max(log2c(len(v)) for v in by_host.values())
        worst = max(worst, (dn, ds), key=lambda d: d[0] + d[1])
    return worst


def load(data):
    """Median over trials of each configuration's report fields."""
    runs = {}
    for f in glob.glob(f"{data}/grid/*.json"):
        name = os.path.basename(f)[:-5]
        h, w, kind, _ = name.split("_")
        runs.setdefault((int(h[1:]), int(w[1:]), kind), []).append(json.load(open(f)))
    out = {}
    for (h, w, kind), reps in runs.items():
        def med(fn):
            return statistics.median(fn(r) for r in reps)
        methods = 2
        row = {"H": h, "W": w, "kind": kind, "trials": len(reps),
               "total": med(lambda r: r["coordination_s"]),
               "U": med(lambda r: r["unique_subgraphs"]) / methods,
               "S": med(lambda r: statistics.mean(m["artifact_bytes"] for p in r["per_rank"] for m in p["methods"])),
               "E": med(lambda r: r["entries_written"] / max(1, r["writers"])) if kind == "cold" else 0}
        # Compile CPU of the owners, per method: the largest one's and the sum.
        def owners(r):
            per = {}
            for p in r["per_rank"]:
                for m in p["methods"]:
                    if m["compiled"]:
                        per.setdefault(m["method"], []).append(m["compile_cpu_s"])
            return per
        row["compile"] = [(statistics.median(max(owners(r).get(mm, [0])) for r in reps),
                           statistics.median(sum(owners(r).get(mm, [0])) for r in reps)) for mm in ("prompt", "decode")]
        for st in ("setup", "lookup", "plan", "produce", "load", "persist", "exchange", "save"):
            row[st] = med(lambda r, st=st: r["steps_s"].get(st, 0.0))
        for st in ("arrival", "keys", "status"):
            row[st] = med(lambda r, st=st: r["steps_min_s"][st])
        # setup is once per job: the fastest rank's is the collective's time.
        row["setup"] = med(lambda r: r["steps_min_s"]["setup"])
        out[(h, w, kind)] = row
    return out


class Model:
    def __init__(self, cores=C_HERE):
        self.cores = cores
        self.k = {}

    # Each step: (feature vector, for a configuration).
    def f_setup(self, c):
        # Idup and two communicator splits (log W rounds), each host's
        # ranks to its leader and back, the leaders' Bruck exchange (log H
        # rounds): a few collectives of about log W rounds.
        return [1.0, log2c(c["W"])] if c["W"] > 1 else [0.0, 0.0]

    def f_lookup(self, c):
        return [kappa(c["W"], self.cores)]

    def f_arrival(self, c):
        return [log2c(c["W"])]

    def f_keys(self, c):
        if c["W"] == 1:
            return [0.0, 0.0, 0.0]
        r = c["W"] // c["H"]
        return [1.0, r - 1, log2c(c["H"])]

    def f_plan(self, c):
        return [c["W"]]

    def f_produce(self, c):
        # Both methods' owners (per method, summed; the step is fitted per
        # method, so halved): the slowest owner's compile, and all of the
        # compiles spread over the cores. Compile CPU counts the compiling
        # thread only; autotuning also runs kernels on stream workers, so
        # the factors exceed 1 when the owners share the cores.
        return [sum(mx for mx, _ in c["compile"]) / 2, sum(tot / self.cores for _, tot in c["compile"]) / 2]

    def f_status(self, c):
        return [log2c(c["W"])]

    def f_exchange(self, c):
        tp, pp, dp = layout(c["W"])
        dn, ds = exchange_depth(c["W"], c["H"], tp, pp)
        return [ds, dn]

    def f_load(self, c):
        return [kappa(c["W"], self.cores)]

    def f_persist(self, c):
        return [1.0, c["E"] * kappa(c["H"], self.cores)]

    def f_save(self, c):
        return [1.0, c["E"]]

    COLD = ["lookup", "arrival", "keys", "plan", "produce", "status", "exchange", "load", "persist"]

    def fit(self, rows):
        cold = [r for r in rows if r["kind"] == "cold"]
        warm = [r for r in rows if r["kind"] == "warm"]
        methods = 2
        for st in self.COLD + ["save"]:
            feats = [getattr(self, f"f_{st}")(r) for r in cold]
            self.k[st] = lstsq(feats, [r[st] / methods for r in cold])
        self.k["setup"] = lstsq([self.f_setup(r) for r in rows], [r["setup"] for r in rows])
        # A warm start is a lookup and an all-reduce per method; fitted on
        # the measured totals (the two overlap across ranks: the last rank
        # to start runs its lookup while the others wait in the all-reduce).
        x = lstsq([[1.0] + self.f_lookup(r) + self.f_arrival(r) + [log2c(r["H"])] for r in warm],
                  [(r["total"] - r["setup"]) / methods for r in warm])
        self.k["warm_lookup"], self.k["warm_arrival"] = [x[0], x[1]], [x[2], x[3]]
        # One compile on its own core, uncontended: the one-rank job's.
        one = [r for r in cold if r["W"] == 1]
        self.k["one_compile"] = [one[0]["produce"] / methods if one else 0.0]

    def step(self, st, c):
        return sum(a * b for a, b in zip(self.k[st], getattr(self, f"f_{st}")(c)))

    def predict(self, c, methods=2):
        if c["kind"] == "warm":
            per = {"lookup": self.warm_step("lookup", c), "arrival": self.warm_step("arrival", c)}
        else:
            per = {st: self.step(st, c) for st in self.COLD}
        return methods * sum(per.values()), per

    def warm_step(self, st, c):
        f = [1.0] + self.f_lookup(c) if st == "lookup" else self.f_arrival(c) + [log2c(c["H"])]
        return sum(a * b for a, b in zip(self.k[f"warm_{st}"], f))


def fmt_s(s):
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


def extrapolate(m, w, per_art, kb, per_host=8):
    """Each step at W ranks on hosts of `per_host`, one core per rank."""
    k = m.k
    h = max(1, w // per_host)
    out = {}
    out["setup (once per job)"] = k["setup"][0] + k["setup"][1] * log2c(w)
    out["lookup"] = k["lookup"][0]
    out["arrival"] = k["arrival"][0] * log2c(w)
    out["keys, host-by-host (now)"] = k["keys"][0] + k["keys"][1] * (per_host - 1) + k["keys"][2] * log2c(h)
    if kb:
        out["keys, flat MPI_Iallgatherv (before)"] = kb[1][0] + kb[1][1] * (w - 1)
    out["plan"] = k["plan"][0] * w
    out["produce"] = k["one_compile"][0]  # one owner per artifact, on its own core
    out["status"] = k["status"][0] * log2c(w)
    out["exchange"] = k["exchange"][0] * log2c(per_host) + k["exchange"][1] * log2c(h)
    out["load"] = k["load"][0]
    out["persist, node-local (8 entries per writer)"] = k["persist"][0] + k["persist"][1] * per_host
    out["persist, one shared store (W entries)"] = k["persist"][0] + k["persist"][1] * w
    out["warm: lookup + arrival"] = (k["warm_lookup"][0] + k["warm_lookup"][1] + k["warm_arrival"][0] * log2c(w)
                                     + k["warm_arrival"][1] * log2c(h))
    return out


def keys_bench(data):
    """Flat vs host-by-host key all-gather, from bench_keys."""
    rows = []
    for f in sorted(glob.glob(f"{data}/keys/*.json")):
        rows.append(json.load(open(f)))
    if not rows:
        return None
    # flat = b0 + kf (W - 1); host = h0 + hs (R - 1) + hn ceil(log2 H)
    flat = lstsq([[1.0, (r["world"] - 1) * kappa(r["world"], C_HERE)] for r in rows], [r["flat_s"] for r in rows])
    host = lstsq([[1.0, r["per_host"] - 1, log2c(r["hosts"])] for r in rows], [r["host_s"] for r in rows])
    return rows, flat, host


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--plot-data", default="")
    a = ap.parse_args()
    table = load(a.data)
    rows = sorted(table.values(), key=lambda r: (r["kind"], r["H"], r["W"]))
    if not rows:
        print("no grid data", file=sys.stderr)
        return 1
    m = Model()
    m.fit(rows)
    md = []
    md.append("### Constants (fitted to this run's grid)\n")
    md.append("| step | model (one method) | constants |")
    md.append("|---|---|---|")
    k = m.k
    md.append(f"| setup (once) | s0 + s1 ceil(log2 W) | s0 = {fmt_s(k['setup'][0])}, s1 = {fmt_s(k['setup'][1])} |")
    md.append(f"| lookup (cold) | l kappa(W) | l = {fmt_s(k['lookup'][0])} |")
    md.append(f"| arrival | a ceil(log2 W) | a = {fmt_s(k['arrival'][0])} |")
    md.append(f"| keys | k0 + ks (R-1) + kn ceil(log2 H) | k0 = {fmt_s(k['keys'][0])}, ks = {fmt_s(k['keys'][1])}, kn = {fmt_s(k['keys'][2])} |")
    md.append(f"| plan | p W | p = {fmt_s(k['plan'][0])} |")
    md.append(f"| produce | t1 c_max + t2 c_sum / C | t1 = {k['produce'][0]:.2f}, t2 = {k['produce'][1]:.2f} (x the "
              f"owners' compile CPU); one compile alone (1 rank) = {fmt_s(k['one_compile'][0])} |")
    md.append(f"| status | a' ceil(log2 W) | a' = {fmt_s(k['status'][0])} |")
    md.append(f"| exchange | xs Ds + xn Dn | xs = {fmt_s(k['exchange'][0])}, xn = {fmt_s(k['exchange'][1])} |")
    md.append(f"| load | d kappa(W) | d = {fmt_s(k['load'][0])} |")
    md.append(f"| persist | w0 + we E kappa(H) | w0 = {fmt_s(k['persist'][0])}, we = {fmt_s(k['persist'][1])} |")
    md.append(f"| (writer's save alone) | v0 + ve E | v0 = {fmt_s(k['save'][0])}, ve = {fmt_s(k['save'][1])} |")
    md.append(f"| warm lookup | l0 + lw kappa(W) | l0 = {fmt_s(k['warm_lookup'][0])}, lw = {fmt_s(k['warm_lookup'][1])} |")
    md.append(f"| warm arrival | aw ceil(log2 W) + ah ceil(log2 H) | aw = {fmt_s(k['warm_arrival'][0])}, "
              f"ah = {fmt_s(k['warm_arrival'][1])} |")
    md.append("")
    md.append("### Predicted vs measured\n")
    md.append("Per job: the coordination of both methods, from the moment the last rank began a method to the "
              "moment the last rank finished it, without the set-up (once per job, its own columns); medians of "
              f"{min(r['trials'] for r in rows)}+ trials.\n")
    md.append("| run | hosts | ranks | U | measured | predicted | error | set-up measured | predicted |")
    md.append("|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    plot = []
    for r in rows:
        p, _ = m.predict(r)
        meas = r["total"] - r["setup"]
        err = (p - meas) / meas
        worst = max(worst, abs(err))
        plot.append((r["kind"], r["H"], r["W"], meas, p))
        md.append(f"| {r['kind']} | {r['H']} | {r['W']} | {r['U']:g} | {fmt_s(meas)} | {fmt_s(p)} | {err * 100:+.0f}% | "
                  f"{fmt_s(r['setup'])} | {fmt_s(m.step('setup', r))} |")
    md.append(f"\nLargest error: {worst * 100:.0f}% (goal: within 30%).\n")
    # Extrapolation: one core per rank (kappa = 1), hosts of 8 ranks,
    # tp=8 x pp=4 (U = 3 stage kinds per method), the artifacts measured here.
    kb = keys_bench(a.data)
    per_art = max(mx for r in rows if r["kind"] == "cold" for mx, _ in r["compile"])
    at = {w: extrapolate(m, w, per_art, kb) for w in [2**i for i in range(4, 13)]}
    md.append("### Extrapolated to 4,096 ranks (512 hosts x 8, one core per rank; one method)\n")
    ws = (32, 256, 1024, 4096)
    md.append("| step | " + " | ".join(f"W={w}" for w in ws) + " |")
    md.append("|---|" + "---|" * len(ws))
    for st in at[32]:
        md.append(f"| {st} | " + " | ".join(fmt_s(at[w][st]) for w in ws) + " |")
    bn = 0.0
    try:
        ex = json.load(open(f"{a.data}/exchange/by-host.json"))
        bn = ex["mib"] * 2**20 / ex["variants"]["node-leader routes"]["s"]
    except (OSError, KeyError, ValueError):
        pass
    if bn:
        md.append(f"\nA 100 MB artifact at 4,096 ranks: {log2c(512)} hops between hosts + {log2c(8)} within, at the "
                  f"{bn / 1e9:.3f} GB/s of the node-leader tree measured here (bench_exchange, 4 hosts): "
                  f"{fmt_s((log2c(512) + log2c(8)) * 100e6 / bn)}.")
    if kb:
        rows_k, flat, host = kb
        md.append(f"\nKey all-gather alone (bench_keys, same records, interleaved trials): flat MPI_Iallgatherv = "
                  f"{fmt_s(flat[0])} + {fmt_s(flat[1])} x (W-1) kappa(W); host-by-host = {fmt_s(host[0])} + "
                  f"{fmt_s(host[1])} x (R-1) + {fmt_s(host[2])} x ceil(log2 H).\n")
        md.append("| ranks | hosts | flat | host-by-host |")
        md.append("|---|---|---|---|")
        for r in sorted(rows_k, key=lambda r: (r["hosts"], r["world"])):
            md.append(f"| {r['world']} | {r['hosts']} | {fmt_s(r['flat_s'])} | {fmt_s(r['host_s'])} |")
    text = "\n".join(md) + "\n"
    print(text)
    if a.markdown:
        open(a.markdown, "w").write(text)
    if a.plot_data:
        os.makedirs(a.plot_data, exist_ok=True)
        with open(f"{a.plot_data}/model_fit.dat", "w") as f:
            f.write("# kind hosts ranks measured_s predicted_s\n")
            for kind, h, w, meas, p in plot:
                f.write(f"{kind} {h} {w} {meas:.6f} {p:.6f}\n")
        with open(f"{a.plot_data}/model_extrapolation.dat", "w") as f:
            cols = list(at[32].keys())
            f.write("ranks " + " ".join('"' + c + '"' for c in cols) + "\n")
            for w, per in sorted(at.items()):
                f.write(f"{w} " + " ".join(f"{per[c]:.6g}" for c in cols) + "\n")
    return 0 if worst <= 0.30 else 3


if __name__ == "__main__":
    sys.exit(main())
