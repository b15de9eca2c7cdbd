#!/usr/bin/env python3
"""test_ncu_passes.py: bench/ncu_passes.py without a GPU.

Writes a made-up raw page as `ncu --csv --page raw` prints it (a header, a
units row, one row a kernel, template and parameter text in the names):
two encoder passes, the second with its subsampling's front unfused, each
with a prefill ending at argmax, and a decoder step. Checks that the last
pass is summed by name in the units row's unit (ms here), with its share
and time each; that the step after it is listed with its grids; that a
report without the metric, or with no pass start, is refused with a
message and a non-zero status.

Usage: test_ncu_passes.py REPO_ROOT (ctest passes it).
"""
import csv
import os
import subprocess
import sys
import tempfile

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
TOOL = os.path.join(ROOT, "bench", "ncu_passes.py")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def write(path, rows, unit="ms", metric="gpu__time_duration.sum"):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(["ID", "Kernel Name", "Grid Size", metric])
        w.writerow(["", "", "", unit])
        for i, (name, t, grid) in enumerate(rows):
            w.writerow([i, name, grid, "%.4f" % t])


def run(*args):
    p = subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


PASS1 = [("sub_conv_dw", 0.5, "(110, 8, 8)"), ("void cutlass::Kernel2<cutlass_80_simt>(Params)", 0.6, "(16, 14, 8)"),
         ("layer_norm_w4", 0.07, "(3504, 1, 1)"), ("argmax", 0.01, "(8, 1, 1)")]
PASS2 = [("conv_2d_c1_3x3", 0.3, "(438, 8, 8)"), ("ew_binary_rows", 1.1, "(4224, 1, 1)"),
         ("ew_binary_rows", 1.2, "(4224, 1, 1)"), ("layer_norm_w4", 0.2, "(438, 1, 1)"),
         ("layer_norm_w4", 0.2, "(438, 1, 1)"), ("argmax", 0.01, "(8, 1, 1)")]
STEP = [("embed_norm", 0.009, "(8, 1, 1)"), ("mul_mat_vec_mma", 0.007, "(192, 1, 1)"),
        ("argmax_sum", 0.015, "(8, 1, 1)"), ("embed_norm", 0.009, "(8, 1, 1)")]

with tempfile.TemporaryDirectory() as d:
    good = os.path.join(d, "k.csv")
    write(good, [("probe_bf16_cvt", 0.002, "(1, 1, 1)")] + PASS1 + PASS2 + STEP)
    rc, out = run(good)
    check(rc == 0, "exit status %d:\n%s" % (rc, out))
    check("2 encoder passes" in out, "both passes found:\n" + out)
    check("6 kernels, 3.01 ms" in out, "the last pass (unfused front) and its prefill, in ms:\n" + out)
    rows = {l.split()[0]: l.split() for l in out.splitlines() if l.startswith("  ")}
    check(rows.get("ew_binary_rows", [])[1:3] == ["2", "2.300"], "summed by name: %r" % rows.get("ew_binary_rows"))
    check("200.0" in rows.get("layer_norm_w4", []), "time each, in us: %r" % rows.get("layer_norm_w4"))
    check("sub_conv_dw" not in rows, "the first pass left out:\n" + out)
    check("a decoder step: 3 kernels, 31.0 us" in out and "(192, 1, 1)" in out, "the step after it:\n" + out)
    check(out.index("ew_binary_rows") < out.index("conv_2d_c1_3x3"), "largest first:\n" + out)

    us = os.path.join(d, "us.csv")
    write(us, [(n, t * 1000, g) for n, t, g in PASS1], unit="us")
    rc, out = run(us)
    check(rc == 0 and "4 kernels, 1.18 ms" in out, "a report in us read as such:\n" + out)

    bad = os.path.join(d, "bad.csv")
    write(bad, PASS1, metric="sm__cycles_elapsed.avg")
    rc, out = run(bad)
    check(rc == 2 and "gpu__time_duration.sum" in out, "a report without the metric refused:\n" + out)
    none = os.path.join(d, "none.csv")
    write(none, STEP)
    rc, out = run(none)
    check(rc == 1 and "no pass starts at" in out, "no pass start named:\n" + out)
    rc, out = run(os.path.join(d, "missing.csv"))
    check(rc == 2 and "missing.csv" in out, "a missing file named:\n" + out)

for f in failures:
    print("FAIL: " + f)
print("%d checks failed" % len(failures) if failures else "ok")
sys.exit(1 if failures else 0)
