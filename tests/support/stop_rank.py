#!/usr/bin/env python3
"""Stops (or kills) ranks of a running MPI job and times what the others do.

    stop_rank.py --match TEXT --ranks 3[,4] [--signal STOP|KILL] [--after-line REGEX]
                 [--delay S] [--limit S] -- COMMAND...

Runs COMMAND (an mpirun), finds the processes of the given world ranks (a
process whose command line contains TEXT and whose environment has
OMPI_COMM_WORLD_RANK=R; simulated hosts share the machine's process ids),
waits until a line of the job's output matches REGEX (if given) and DELAY
seconds more, sends the signal, and records when each other rank's error line
("npucache: error on rank R: ..." or "fault_worker rank R: ...") arrives and
when COMMAND exits. Prints the job's output, then one JSON line:

    {"signalled": [pids], "signal_at": t, "errors": {"0": dt, ...},
     "exit_after": dt, "rc": rc, "limit_hit": false}

(dt: seconds after the signal). COMMAND is killed at LIMIT seconds (default
120) after it started; a stopped process is continued and killed at the end
so nothing is left behind. Exit status 0 unless the job could not be run or
the ranks were never found.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

ERROR_LINE = re.compile(r"(?:npucache: error on rank|fault_worker rank) (\d+):")


def rank_pids(match, ranks):
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            if match not in cmd or "stop_rank.py" in cmd or "mpirun" in cmd or "orted" in cmd:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for e in env:
            if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                r = int(e.split(b"=", 1)[1])
                if r in ranks:
                    found[r] = int(pid)
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--match", required=True)
    ap.add_argument("--ranks", required=True)
    ap.add_argument("--signal", default="STOP", choices=["STOP", "KILL"])
    ap.add_argument("--after-line", default="")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--limit", type=float, default=120.0)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    if not cmd:
        ap.error("no command")
    ranks = {int(r) for r in a.ranks.split(",")}
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    lines = []
    errors = {}
    state = {"signal_at": None, "trigger": not a.after_line}
    trigger = re.compile(a.after_line) if a.after_line else None
    lock = threading.Lock()

    def reader():
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            now = time.monotonic()
            with lock:
                lines.append(line)
                m = ERROR_LINE.search(line)
                if m and state["signal_at"] is not None:
                    errors.setdefault(m.group(1), now - state["signal_at"])
                if trigger and trigger.search(line):
                    state["trigger"] = True

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    pids = {}
    while time.monotonic() - t0 < a.limit and proc.poll() is None:
        if len(pids) < len(ranks):
            pids.update(rank_pids(a.match, ranks))
        with lock:
            ready = state["trigger"]
        if ready and len(pids) == len(ranks):
            break
        time.sleep(0.005)
    signalled = []
    if len(pids) == len(ranks) and proc.poll() is None:
        time.sleep(a.delay)
        sig = signal.SIGSTOP if a.signal == "STOP" else signal.SIGKILL
        with lock:
            state["signal_at"] = time.monotonic()
        for r, pid in sorted(pids.items()):
            try:
                os.kill(pid, sig)
                signalled.append(pid)
            except ProcessLookupError:
                pass
    limit_hit = False
    try:
        proc.wait(timeout=max(0.1, a.limit - (time.monotonic() - t0)))
    except subprocess.TimeoutExpired:
        limit_hit = True
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    end = time.monotonic()
    for pid in signalled:  # nothing stays stopped
        for s in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, s)
            except ProcessLookupError:
                pass
    th.join(timeout=5)
    with lock:
        print("\n".join(lines))
        sa = state["signal_at"]
        out = {"signalled": signalled, "signal_at": None if sa is None else sa - t0,
               "errors": errors, "exit_after": None if sa is None else end - sa,
               "rc": proc.returncode, "limit_hit": limit_hit}
    print(json.dumps(out))
    sys.stdout.flush()
    return 0 if signalled else 1


if __name__ == "__main__":
    sys.exit(main())
