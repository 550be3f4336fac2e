#!/usr/bin/env python3
"""Checks the labels and times of a ctest run (scripts/test.sh runs it).

  check_tests.py --build BUILD_DIR [--junit FILE] [--fast-limit SECONDS] [--no-times]

- Every test defined in BUILD_DIR carries exactly one cost label
  (cmake/Tests.cmake: fast, slow, mpi, install, multihost, stress) and no
  unknown label.
- Every `fast` test that ran (ctest's JUnit report, FILE) took at most
  --fast-limit seconds (default 5): a test that takes longer is labelled
  `slow` where it is declared (tests/CMakeLists.txt, CASES for a few cases
  of a GoogleTest program), or made faster.
Prints the time spent per cost label and the slowest tests. Exit status 0
when both hold, 1 otherwise, 2 on a usage or input error.
"""
import argparse
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

COSTS = ("fast", "slow", "mpi", "install", "multihost", "stress")
SELECTIONS = ("asan", "concurrent")


def defined_tests(build):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True, capture_output=True,
                         text=True).stdout
    tests = {}
    for t in json.loads(out).get("tests", []):
        labels = []
        for p in t.get("properties", []):
            if p.get("name") == "LABELS":
                labels = list(p.get("value", []))
        tests[t["name"]] = labels
    return tests


def run_times(junit):
    times = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.get("status", "run") not in ("run", "fail"):
            continue
        times[case.get("name")] = float(case.get("time", "0"))
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--junit")
    ap.add_argument("--fast-limit", type=float, default=5.0)
    ap.add_argument("--no-times", action="store_true", help="check labels only (sanitizer builds)")
    a = ap.parse_args()
    try:
        tests = defined_tests(a.build)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        print(f"check_tests: cannot list the tests of {a.build}: {e}", file=sys.stderr)
        return 2
    bad = []
    for name, labels in sorted(tests.items()):
        costs = [l for l in labels if l in COSTS]
        unknown = [l for l in labels if l not in COSTS and l not in SELECTIONS]
        if len(costs) != 1 or unknown:
            bad.append(f"  {name}: labels {labels or 'none'} (needs one of {', '.join(COSTS)}"
                       + (f"; unknown {unknown}" if unknown else "") + ")")
    ok = True
    if bad:
        ok = False
        print(f"check_tests: {len(bad)} of {len(tests)} tests lack exactly one cost label "
              "(declare it in tests/CMakeLists.txt, cmake/Tests.cmake):")
        print("\n".join(bad))
    if a.junit:
        try:
            times = run_times(a.junit)
        except (OSError, ET.ParseError) as e:
            print(f"check_tests: cannot read {a.junit}: {e}", file=sys.stderr)
            return 2
        per = {c: [0, 0.0] for c in COSTS}
        for name, t in times.items():
            for l in tests.get(name, []):
                if l in per:
                    per[l][0] += 1
                    per[l][1] += t
        print("check_tests: ran " + ", ".join(f"{c} {n} ({s:.0f} s)" for c, (n, s) in per.items() if n)
              + f"; {len(tests)} tests defined")
        slowest = sorted(times.items(), key=lambda kv: -kv[1])[:10]
        print("check_tests: slowest: " + ", ".join(f"{n} {t:.1f} s" for n, t in slowest))
        if not a.no_times:
            late = sorted((t, n) for n, t in times.items() if "fast" in tests.get(n, []) and t > a.fast_limit)
            if late:
                ok = False
                print(f"check_tests: {len(late)} tests labelled fast took more than {a.fast_limit:g} s "
                      "(label them slow where they are declared, or make them faster):")
                for t, n in reversed(late):
                    print(f"  {n}: {t:.1f} s")
    if ok:
        print(f"check_tests: every one of {len(tests)} tests has one cost label"
              + ("" if a.no_times or not a.junit else f"; every fast test within {a.fast_limit:g} s"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
