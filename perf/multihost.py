#!/usr/bin/env python3
"""Benchmarks on simulated hosts (tests/support/cluster.sh, needs root).

    perf/multihost.py OUT_DIR [--trials N] [--parts grid,independent,exchange,keys,stop,remote,shards]

Every figure comes from this run; each part writes JSON files under OUT_DIR:
  grid         cold and warm `npucache warmup` (tiny-llama, tp=2, pp up to 4)
               at 1-16 ranks on 1, 2 and 4 hosts, node-local caches: the job
               reports with per-step times (the data of perf/cost_model.py)
  independent  cold warmups at 8 and 16 ranks on 2 and 4 hosts, coordinated
               and independent, alternated (compile CPU and wall)
  exchange     bench_exchange at 8 ranks on 4 hosts, ranks placed by host and
               round-robin: bytes between hosts, node-leader vs flat vs MPI_Bcast
  keys         bench_keys at 2-16 ranks on 1-4 hosts: flat vs host-by-host key all-gather
  stop         a rank stopped (SIGSTOP) mid-warmup: time to every other rank's error
  remote       Llama-3-8B shapes on 4 hosts x 2 ranks with empty node-local caches
               and a warm remote tier (redis-server in host 0): remote bytes read vs
               one copy per host, warm-from-remote vs cold wall time
  shards       4 hosts x 8 ranks (tp 2, pp 4, dp 4), empty node-local caches, a
               remote tier of 3 shards (a redis-server in each of hosts 1-3): a cold
               job writes through them, the shard holding the most objects is
               killed, then a job with empty caches: it succeeds, compiles only the
               dead shard's objects and reads each other object once per host
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "tests/support/cluster.sh")
STOP = os.path.join(ROOT, "tests/support/stop_rank.py")
PREFIX = "npbench-h"
CACHE = "/tmp/npucache-bench-cache"
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build"))
NPUCACHE = os.path.join(BUILD, "src/npucache")


def sh(args, limit=600, check=True, env=None):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=limit, env=env)
    out = r.stdout.decode(errors="replace")
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {r.returncode}:\n{out[-3000:]}")
    return out


class Cluster:
    def __init__(self, hosts):
        self.hosts = hosts

    def __enter__(self):
        sh([CLUSTER, "down", "--prefix", PREFIX], check=False)
        shutil.rmtree(CACHE, ignore_errors=True)
        sh([CLUSTER, "up", str(self.hosts), "--prefix", PREFIX, "--storage", "local", "--cache-path", CACHE, "--slots", "16"])
        state = open(f"/run/npucache-cluster/{PREFIX}/state").read()
        self.subnet = [l.split("=", 1)[1] for l in state.splitlines() if l.startswith("SUBNET=")][0]
        self.agent = f"/run/npucache-cluster/{PREFIX}/rsh-agent"
        return self

    def __exit__(self, *exc):
        sh([CLUSTER, "down", "--prefix", PREFIX], check=False)

    def hostfile(self, hosts, per_host, path):
        with open(path, "w") as f:
            for i in range(hosts):
                f.write(f"{PREFIX}{i} slots={per_host}\n")
        return path

    def launch_args(self, hostfile):
        # As cluster.sh launch-args, with our own hostfile.
        return ["--hostfile", hostfile, "--iface", self.subnet,
                "--mpirun-arg", "--mca", "--mpirun-arg", "plm_rsh_agent", "--mpirun-arg", self.agent,
                "--mpirun-arg", "--mca", "--mpirun-arg", "mpi_yield_when_idle", "--mpirun-arg", "1"]

    def mpirun_args(self, hostfile):
        return ["--hostfile", hostfile, "--mca", "plm_rsh_agent", self.agent, "--mca", "btl", "tcp,vader,self",
                "--mca", "btl_tcp_if_include", self.subnet, "--mca", "oob_tcp_if_include", self.subnet,
                "--mca", "mpi_yield_when_idle", "1", "--oversubscribe", "--allow-run-as-root"]

    def warmup(self, hostfile, args, limit=300):
        env = dict(os.environ, NPUCACHE_LOG_LEVEL="warn")
        return sh([CLUSTER, "exec", f"{PREFIX}0", os.path.join(ROOT, "launch/warmup.sh"), *self.launch_args(hostfile),
                   "--npucache", NPUCACHE, *args], limit=limit, env=env)

    def mpirun(self, hostfile, args, limit=300):
        return sh([CLUSTER, "exec", f"{PREFIX}0", "mpirun", *self.mpirun_args(hostfile), *args], limit=limit)


def layout(world):
    tp = 2 if world >= 2 else 1
    pp = min(world // tp, 4)
    return tp, pp, world // (tp * pp)


GRID = [(1, 1), (1, 2), (1, 4), (1, 8), (1, 16), (2, 2), (2, 4), (2, 8), (2, 16), (4, 4), (4, 8), (4, 16)]


def part_grid(out, trials):
    # One cluster of 4 hosts; each configuration picks its hosts with its
    # own hostfile, and each trial runs every configuration in turn, so a
    # change in the machine's load over the run touches them alike.
    os.makedirs(f"{out}/grid", exist_ok=True)
    with Cluster(4) as c:
        for t in range(trials):
            for h, w in GRID:
                hf = c.hostfile(h, w // h, f"{out}/hosts")
                tp, pp, dp = layout(w)
                d = f"{CACHE}/g{h}_{w}_{t}"
                for kind in ("cold", "warm"):
                    rep = f"{out}/grid/H{h}_W{w}_{kind}_{t}.json"
                    c.warmup(hf, ["--tp", str(tp), "--pp", str(pp), "--dp", str(dp), "--cache-dir", d,
                                  "--report-json", rep])
            print(f"grid: trial {t + 1}/{trials} of {len(GRID)} configurations (1-16 ranks on 1-4 hosts)", flush=True)


def part_independent(out, trials):
    os.makedirs(f"{out}/independent", exist_ok=True)
    for hosts in (2, 4):
        with Cluster(hosts) as c:
            for w in (8, 16):
                hf = c.hostfile(hosts, w // hosts, f"{out}/hosts")
                tp, pp, dp = layout(w)
                for t in range(trials):
                    for mode in ("coordinated", "independent"):
                        d = f"{CACHE}/i{w}_{t}_{mode}"
                        extra = ["--independent"] if mode == "independent" else []
                        c.warmup(hf, ["--tp", str(tp), "--pp", str(pp), "--dp", str(dp), "--cache-dir", d,
                                      "--report-json", f"{out}/independent/H{hosts}_W{w}_{mode}_{t}.json", *extra])
                    print(f"independent: {w} ranks on {hosts} hosts, trial {t + 1}/{trials}", flush=True)


def part_exchange(out, trials):
    os.makedirs(f"{out}/exchange", exist_ok=True)
    with Cluster(4) as c:
        hf = c.hostfile(4, 2, f"{out}/hosts")
        for placement, extra in (("by-host", []), ("round-robin", ["--map-by", "node"])):
            text = c.mpirun(hf, [*extra, "-np", "8", os.path.join(BUILD, "perf/bench_exchange"), "4", str(2 * trials + 1),
                                 "--json", f"{out}/exchange/{placement}.json"])
            with open(f"{out}/exchange/{placement}.txt", "w") as f:
                f.write(text)
            print(f"exchange: {placement}", flush=True)


def part_keys(out, trials):
    os.makedirs(f"{out}/keys", exist_ok=True)
    with Cluster(4) as c:
        for h, w in GRID:
            if w < 2:
                continue
            hf = c.hostfile(h, w // h, f"{out}/hosts")
            c.mpirun(hf, ["-np", str(w), os.path.join(BUILD, "perf/bench_keys"), str(10 * trials + 1),
                          "--json", f"{out}/keys/H{h}_W{w}.json"])
        print("keys: 2-16 ranks on 1-4 hosts", flush=True)


def part_stop(out, trials):
    os.makedirs(f"{out}/stop", exist_ok=True)
    for hosts, w, t_out in ((2, 4, 5), (4, 8, 5), (4, 8, 10)):
        with Cluster(hosts) as c:
            hf = c.hostfile(hosts, w // hosts, f"{out}/hosts")
            tp, pp, dp = layout(w)
            for t in range(trials):
                d = f"{CACHE}/stop{w}_{t_out}_{t}"
                env = dict(os.environ, NPUCACHE_LOG_LEVEL="info")
                text = sh(["python3", STOP, "--match", d, "--ranks", str(w - 1), "--after-line", "rank-methods loaded",
                           "--limit", "120", "--", CLUSTER, "exec", f"{PREFIX}0", os.path.join(ROOT, "launch/warmup.sh"),
                           *c.launch_args(hf), "--npucache", NPUCACHE, "--env", "NPUCACHE_LOG_LEVEL", "--tp", str(tp),
                           "--pp", str(pp), "--dp", str(dp), "--cache-dir", d, "--timeout", str(t_out)],
                          limit=180, env=env)
                r = json.loads(text.strip().splitlines()[-1])
                r.update({"hosts": hosts, "world": w, "timeout": t_out})
                with open(f"{out}/stop/H{hosts}_W{w}_T{t_out}_{t}.json", "w") as f:
                    json.dump(r, f)
                print(f"stop: {w} ranks on {hosts} hosts, timeout {t_out}, trial {t + 1}/{trials}: "
                      f"errors after {max(r['errors'].values(), default=float('nan')):.1f} s", flush=True)


def part_remote(out, trials):
    os.makedirs(f"{out}/remote", exist_ok=True)
    with Cluster(4) as c:
        hf = c.hostfile(4, 2, f"{out}/hosts")
        work = f"{out}/remote"
        sh([CLUSTER, "exec", f"{PREFIX}0", "redis-server", "--port", "6390", "--bind", "0.0.0.0", "--protected-mode",
            "no", "--save", "", "--appendonly", "no", "--daemonize", "yes", "--pidfile", f"{work}/redis.pid",
            "--logfile", f"{work}/redis.log", "--dir", work])
        url = f"redis://{PREFIX}0:6390"
        try:
            time.sleep(0.5)
            # Llama-3-8B shapes (meta weights), as perf/real_shapes.py: a compile
            # of real size, so the ratio is not the coordinator's fixed cost.
            job = ["--tp", "2", "--pp", "2", "--dp", "2", "--model", "llama-3-8b", "--max-seq", "64"]
            c.warmup(hf, [*job, "--cache-dir", f"{CACHE}/seed", "--remote", url])  # the remote, warmed once
            for t in range(trials):
                c.warmup(hf, [*job, "--cache-dir", f"{CACHE}/cold{t}", "--remote", "off",
                              "--report-json", f"{work}/cold_{t}.json"])
                c.warmup(hf, [*job, "--cache-dir", f"{CACHE}/warm{t}", "--remote", url,
                              "--report-json", f"{work}/remote_{t}.json"])
                print(f"remote: 8 ranks on 4 hosts, trial {t + 1}/{trials}", flush=True)
        finally:
            try:
                os.kill(int(open(f"{work}/redis.pid").read()), 9)
            except (OSError, ValueError):
                pass


def part_shards(out, trials):
    work = f"{out}/shards"
    os.makedirs(work, exist_ok=True)
    with Cluster(4) as c:
        hf = c.hostfile(4, 8, f"{out}/hosts")
        pids = {}
        try:
            for h in (1, 2, 3):
                sh([CLUSTER, "exec", f"{PREFIX}{h}", "redis-server", "--port", "6391", "--bind", "0.0.0.0",
                    "--protected-mode", "no", "--save", "", "--appendonly", "no", "--daemonize", "yes",
                    "--pidfile", f"{work}/redis{h}.pid", "--logfile", f"{work}/redis{h}.log", "--dir", work])
            time.sleep(0.5)
            for h in (1, 2, 3):
                pids[h] = int(open(f"{work}/redis{h}.pid").read())
            url = ",".join(f"redis://{PREFIX}{h}:6391?timeout=1" for h in (1, 2, 3))
            job = ["--tp", "2", "--pp", "4", "--dp", "4"]
            c.warmup(hf, [*job, "--cache-dir", f"{CACHE}/shards-cold", "--remote", url,
                          "--report-json", f"{work}/cold.json"], limit=900)
            held = {}
            for h in (1, 2, 3):
                keys = sh([CLUSTER, "exec", f"{PREFIX}0", "redis-cli", "-h", f"{PREFIX}{h}", "-p", "6391", "--scan",
                           "--pattern", "npucache:*:obj:*"]).split()
                held[h] = {k.split(":obj:", 1)[1] for k in keys}
            dead = max(held, key=lambda h: len(held[h]))
            os.kill(pids.pop(dead), 9)
            t0 = time.time()
            c.warmup(hf, [*job, "--cache-dir", f"{CACHE}/shards-warm", "--remote", url,
                          "--report-json", f"{work}/killed.json"], limit=900)
            wall = time.time() - t0
            r = json.load(open(f"{work}/killed.json"))
            pairs = {(m["graph_key"], p["rank"] // 8) for p in r["per_rank"] for m in p["methods"]}
            live_pairs = {(k, h) for k, h in pairs if k not in held[dead]}
            summary = {"hosts": 4, "ranks": 32, "shards": 3, "killed": f"{PREFIX}{dead}",
                       "objects_per_shard": {f"{PREFIX}{h}": len(v) for h, v in held.items()},
                       "compiled": r["compiled"], "dead_shard_objects_needed": len({k for k, _ in pairs if k in held[dead]}),
                       "remote_reads": r["remote_reads"], "live_object_host_pairs": len(live_pairs),
                       "one_read_per_object_per_host": r["remote_reads"] == len(live_pairs), "wall_s": wall}
            json.dump(summary, open(f"{work}/summary.json", "w"), indent=1)
            print(f"shards: {json.dumps(summary)}", flush=True)
        finally:
            for p in pids.values():
                try:
                    os.kill(p, 9)
                except OSError:
                    pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--parts", default="grid,independent,exchange,keys,stop,remote,shards")
    a = ap.parse_args()
    if os.getuid() != 0:
        print("perf/multihost.py: needs root (simulated hosts are namespaces); skipped", file=sys.stderr)
        return 77
    os.makedirs(a.out, exist_ok=True)
    parts = {"grid": part_grid, "independent": part_independent, "exchange": part_exchange, "keys": part_keys,
             "stop": part_stop, "remote": part_remote, "shards": part_shards}
    for p in a.parts.split(","):
        t0 = time.time()
        parts[p](a.out, a.trials)
        print(f"{p}: {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
