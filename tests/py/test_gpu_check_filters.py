#!/usr/bin/env python3
"""test_gpu_check_filters.py: every test scripts/gpu-check.sh runs under
compute-sanitizer names a built program and a filter that selects at
least one of its tests.

gpu-check.sh's memcheck stage runs each "program filter" pair of its list
(`for mc in ...`) under the sanitizer. A filter that selects nothing (a
test renamed since) makes the sanitizer stop with "terminated before first
instrumented API call", and a program that is not built is skipped without
a row: both were found only on the GPU machine (the nineteenth session).
Here each pair runs without the sanitizer on this machine, where the
CUDA tests skip their GPU work but still count as passed, so a filter
that matches a test reports at least one; a made-up filter must report
none (that the check can fail).

Usage: test_gpu_check_filters.py REPO_ROOT BUILD_DIR (ctest passes both).
"""
import os
import re
import subprocess
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
BUILD = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build")
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed\s*$", re.M)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def pairs(script):
    """The quoted "program filter" pairs of the memcheck loop."""
    m = re.search(r"for mc in (.*?); do", script, re.S)
    if not m:
        return []
    return [tuple(q.split()) for q in re.findall(r'"([^"]+)"', m.group(1))]


def selected(prog, flt):
    """How many tests the filter selects, or None when the run gave no summary."""
    env = dict(os.environ, CT_LOG="error")
    env.pop("CT_CUDA_DRIVER", None)
    env.pop("CT_TEST_FAKE_CUDA", None)
    p = subprocess.run([prog, flt], capture_output=True, text=True, timeout=300, env=env)
    found = SUMMARY.findall(p.stdout + p.stderr)
    if p.returncode != 0 or not found:
        return None
    ok, bad = found[-1]
    return int(ok) + int(bad)


def main():
    script = open(os.path.join(ROOT, "scripts", "gpu-check.sh")).read()
    ps = pairs(script)
    check(len(ps) >= 5, "gpu-check.sh: %d memcheck pairs found (its loop moved?)" % len(ps))
    for pair in ps:
        if len(pair) != 2:
            check(False, "gpu-check.sh: %r is not a program and a filter" % (pair,))
            continue
        prog = os.path.join(BUILD, pair[0])
        if not os.access(prog, os.X_OK):
            check(False, "%s: not built in %s" % (pair[0], BUILD))
            continue
        n = selected(prog, pair[1])
        check(n is not None and n >= 1, "%s %s: selects %s tests" % (pair[0], pair[1], n))
    # the check itself can fail: a filter that matches nothing selects none
    if ps and os.access(os.path.join(BUILD, ps[0][0]), os.X_OK):
        n = selected(os.path.join(BUILD, ps[0][0]), "no_such_test_of_gpu_check")
        check(n == 0, "a made-up filter selected %s tests" % n)
    for f in failures:
        print("FAIL", f)
    print("%d memcheck pairs, %d failures" % (len(ps), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
