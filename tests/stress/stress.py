#!/usr/bin/env python3
"""The model-based stress test of one shared cache (docs/FORMAT.md, "Lock
protocol"): writer processes and administration commands run at once on one
cache directory, and SIGKILL stops some of them at random moments; an oracle
then checks what must hold.

Writers (each checks its own results against eager code):
  - the differential hunt's random models (random_diff --worker, generator 3:
    compile regions, graph-break pieces, capture templates, automatic dynamic, two hit
    checks' worth of options), every result compared with eager;
  - serve_worker: a server's calls in every mode (pieces, same-shaped layers
    read between breaks, reduce-overhead templates, automatic dynamic),
    maxdiff against eager;
  - cache_worker: the seed example on both hit checks, static, ge_cache;
  - 2-rank MPI jobs (launch/infer.sh, tp 1 x pp 2): tokens equal to a
    single process's.
Administration: verify (must be clean: the cache is busy, never damaged),
verify --repair, gc --orphans / --older-than / --model / --max-size, the
size limit (config max-size, enforced after saves), export and import into
the same cache, clear.

The oracle:
  1. every writer that was not killed exited 0 (so every hit, compile and
     recompile equalled eager);
  2. every entry a writer reported saved ("... saved to DIR/<entry>/...")
     and that no command removed on purpose is present at the end: the
     last part of the run (--quiet-fraction) has no clear, gc eviction or
     size limit, so the entries saved then must all be there, whatever
     verify --repair, gc --orphans, export, import and the kills did;
  3. once quiet, `verify` is clean and `verify --repair` finds nothing.

  stress.py --cli NPUCACHE --cache-worker W --serve-worker W --random-diff W
            --launch DIR [--seconds 60] [--seed N] [--no-mpi] [--keep]

Prints what ran, what was killed and what the oracle found; exit status 1 on
a violation (with the command that replays the run: the same seed draws the
same schedule, though the machine decides the interleaving).
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SAVED = re.compile(r"saved to (\S+)/compiled_module")
REMOVED = re.compile(r"removed its cache entry (\S+)")


class Proc:
    """A process of the run, in a session of its own (a kill reaches mpirun's ranks)."""

    def __init__(self, kind, argv, log_path, env, started_phase):
        self.kind, self.argv, self.log_path = kind, argv, log_path
        self.phase = started_phase
        self.killed = False
        self.log = open(log_path, "wb")
        self.p = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env=env, start_new_session=True)
        self.t0 = time.monotonic()

    def poll(self):
        return self.p.poll()

    def kill(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.killed = True

    def finish(self, timeout):
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.p.wait()
            return False
        finally:
            self.log.close()
        return True

    def text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--cache-worker", required=True)
    ap.add_argument("--serve-worker", required=True)
    ap.add_argument("--random-diff", required=True)
    ap.add_argument("--launch", required=True)
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("NPUCACHE_STRESS_SECONDS", 60)))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("NPUCACHE_STRESS_SEED", 1)))
    ap.add_argument("--quiet-fraction", type=float, default=0.35)
    ap.add_argument("--writers", type=int, default=3)
    ap.add_argument("--no-mpi", action="store_true")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="npucache-stress-")
    os.chmod(work, 0o700)
    cache = os.path.join(work, "cache")
    env = dict(os.environ, NPUCACHE_LOG_LEVEL="info", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    procs, n = [], [0]
    counts = {}
    problems = []
    t_start = time.monotonic()
    quiet_at = t_start + a.seconds * (1 - a.quiet_fraction)

    def log_path(kind):
        n[0] += 1
        return os.path.join(work, "%03d-%s.log" % (n[0], kind))

    # A coordinated job's ranks say "saved to" at debug (rank 0 summarises).
    mpi_env = dict(env, NPUCACHE_LOG_LEVEL="debug")

    def spawn(kind, argv):
        counts[kind] = counts.get(kind, 0) + 1
        p = Proc(kind, argv, log_path(kind), mpi_env if kind == "mpi" else env,
                 "quiet" if time.monotonic() >= quiet_at else "removals")
        procs.append(p)
        return p

    epoch = rng.getrandbits(63)
    next_model = [0]

    def writer():
        r = rng.random()
        if r < 0.45:
            first = next_model[0]
            next_model[0] += 3
            return spawn("hunt", [a.random_diff, "--worker", "--epoch-seed", hex(epoch), "--first", str(first),
                                  "--count", "3", "--dir", cache, "--generator", "3"])
        if r < 0.75:
            opts = rng.choice([["--breaks"], ["--routed"], ["--mode", "reduce-overhead"],
                               ["--mode", "reduce-overhead", "--breaks"], ["--dynamic", "true"], [],
                               ["--routed", "--mode", "reduce-overhead"]])
            dyn = [] if "--dynamic" in opts else ["--dynamic", rng.choice(["auto", "true", "false"])]
            batches = ",".join(str(rng.choice([1, 2, 4, 6, 8])) for _ in range(3))
            return spawn("serve", [a.serve_worker, cache, "--batches", batches] + dyn + opts)
        if r < 0.93 or a.no_mpi:
            flags = rng.choice([[], ["--code-version", "v1", "--fast"], ["--static"], ["--ge-cache"],
                                ["--reduce-overhead"], ["--world", "2", "--rank", "1"]])
            return spawn("seed", [a.cache_worker, "run", cache, "seed", rng.choice(["prompt", "decode"])] + flags)
        return spawn("mpi", [os.path.join(a.launch, "infer.sh"), "--tp", "1", "--pp", "2", "--tokens", "2",
                             "--cache-dir", cache, "--npucache", a.cli, "--report-json",
                             os.path.join(work, "mpi-%d.json" % n[0])])

    def admin(quiet):
        cli = a.cli
        safe = [["verify", cache], ["verify", "--repair", cache], ["gc", "--orphans", cache],
                ["export", cache, "-o", os.path.join(work, "bundle.npuc")], "import", ["stats", cache]]
        removing = [["clear", cache], ["gc", "--max-size", rng.choice(["64K", "256K", "1M"]), cache],
                    ["gc", "--older-than", "2s", cache], ["gc", cache, "--model", rng.choice(["Model", "Server"])],
                    ["config", "max-size", rng.choice(["200K", "1M"]), "--cache-dir", cache],
                    ["config", "max-size", "none", "--cache-dir", cache]]
        choice = rng.choice(safe + ([] if quiet else removing))
        if choice == "import":
            bundle = os.path.join(work, "bundle.npuc")
            if not os.path.exists(bundle):
                choice = ["stats", cache]
            else:
                return spawn("admin", [cli, "import", bundle, cache])
        return spawn("admin", [cli] + choice)

    # ---- the run ---------------------------------------------------------
    kills = 0
    quiet_done = False
    while time.monotonic() - t_start < a.seconds:
        now = time.monotonic()
        if now >= quiet_at and not quiet_done:
            # The quiet part: no removal on purpose from here; the size limit off.
            for p in procs:
                if p.kind == "admin" and p.poll() is None:
                    p.finish(120)
            subprocess.run([a.cli, "config", "max-size", "none", "--cache-dir", cache], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            quiet_done = True
        live = [p for p in procs if p.poll() is None]
        if sum(1 for p in live if p.kind != "admin") < a.writers:
            writer()
        if not any(p.kind == "admin" for p in live):
            admin(now >= quiet_at)
        if live and rng.random() < 0.04:
            victim = rng.choice(live)
            if time.monotonic() - victim.t0 > 0.05:
                victim.kill()
                kills += 1
        time.sleep(0.05)
    for p in procs:
        if not p.finish(300):
            problems.append("%s did not finish within 300 s after the run: %s" % (p.kind, " ".join(p.argv)))
    # ---- the oracle ------------------------------------------------------
    saved, removed = {}, set()
    for p in procs:
        text = p.text()
        st = p.p.returncode
        if not p.killed and st != 0:
            # Busy beyond --wait (said, nothing changed), a model gc found
            # none of, no cache yet or any more (cleared): the command's
            # answer, no damage.
            ok_admin = p.kind == "admin" and any(
                why in text for why in ("is in use", "no entry of that model", "no cache in " + cache))
            if p.kind == "admin" and p.argv[1] == "verify" and "--repair" not in p.argv and st == 1:
                problems.append("verify of a busy, healthy cache reported damage (%s):\n%s" % (p.log_path, text[-3000:]))
            elif not ok_admin:
                problems.append("%s exited %s (%s):\n%s" % (p.kind, st, " ".join(p.argv), text[-3000:]))
        if p.kind == "serve" and not p.killed and st == 0:
            m = re.search(r"maxdiff ([0-9.eE+-]+)", text)
            if not m or float(m.group(1)) > 1e-4:
                problems.append("serve_worker's results differ from eager (%s):\n%s" % (p.log_path, text[-2000:]))
        for m in SAVED.finditer(text):
            path = m.group(1)
            if path.startswith(cache + "/"):
                saved.setdefault(path[len(cache) + 1:], []).append(p)
        for m in REMOVED.finditer(text):  # a recompile removes its entry on purpose (the seed's behaviour)
            path = m.group(1)
            removed.add(path[len(cache) + 1:] if path.startswith(cache + "/") else path)
        if p.kind == "mpi" and not p.killed and st == 0:
            js = [f for f in p.argv if f.endswith(".json")]
            try:
                with open(js[0]) as f:
                    if json.load(f).get("tokens_match_single_process") is not True:
                        problems.append("an MPI job's tokens differ from a single process's (%s)" % p.log_path)
            except (OSError, ValueError) as e:
                problems.append("an MPI job wrote no report (%s): %s" % (p.log_path, e))
    ls = subprocess.run([a.cli, "ls", cache, "--json"], env=env, capture_output=True, text=True)
    present = set()
    try:
        present = {e["path"] for e in json.loads(ls.stdout).get("entries", [])}
    except ValueError:
        problems.append("ls --json of the cache failed: %s %s" % (ls.stdout[-500:], ls.stderr[-500:]))
    expected = [path for path, ps in saved.items() if any(q.phase == "quiet" for q in ps) and path not in removed]
    missing = [path for path in expected if path not in present]
    for path in missing:
        problems.append("entry %s was reported saved in the quiet part and is gone" % path)
    v = subprocess.run([a.cli, "verify", cache], env=env, capture_output=True, text=True)
    if v.returncode != 0:
        problems.append("verify of the quiet cache is not clean:\n%s%s" % (v.stdout[-3000:], v.stderr[-1000:]))
    r = subprocess.run([a.cli, "verify", "--repair", cache], env=env, capture_output=True, text=True)
    if "removed" in r.stdout and "temporary file" not in r.stdout:
        problems.append("verify --repair of the quiet cache removed something:\n%s" % r.stdout[-3000:])
    took = time.monotonic() - t_start
    summary = ", ".join("%d %s" % (c, k) for k, c in sorted(counts.items()))
    print("stress: seed %d, %.0f s: %s processes; %d killed; %d entries reported saved (%d in the quiet part, "
          "checked present), %d present at the end" % (a.seed, took, summary, kills, len(saved), len(expected),
                                                          len(present)))
    if problems:
        for p in problems:
            print("FAIL: " + p)
        print("logs kept in %s; replay: %s --seed %d --seconds %g" % (work, sys.argv[0], a.seed, a.seconds))
        return 1
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("kept %s" % work)
    print("PASS: every writer's results equalled eager, nothing reported saved was lost, verify is clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
