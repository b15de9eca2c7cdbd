#!/usr/bin/env python3
"""test_products.py: bench/products.py without a GPU.

With a stand-in benchmark program that prints CT_CUDA_PROFILE's compute
headers (graphs of 1815, 66 and 189 nodes, three passes) and, when asked
for a dump, writes one as the CUDA backend does (nodes with their launch
shapes, then a time a node): the dump is asked of the last large pass
(the skip is the computes before it), the products are grouped by launch
shape with their count, time and rate (a 1280 x 3504 x 5120 product in
0.1 ms is 459 TFLOP/s), the most time first, and the pass by op follows.
A failing run, a dump without times and a run with no large pass give
status 1; bad arguments 2.

Usage: test_products.py REPO_ROOT (ctest passes it).
"""
import os
import subprocess
import sys
import tempfile

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
PRODUCTS = os.path.join(ROOT, "bench", "products.py")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


# FAKE_FAIL=1: exits 1. FAKE_SMALL=1: no graph of 1000 nodes. FAKE_NOTIMES=1:
# the dump has no time lines. FAKE_SKIPS: the file that records the skip.
FAKE = r'''#!/usr/bin/env python3
import os, sys
if os.environ.get("FAKE_FAIL") == "1":
    print("bench: the device fell over", file=sys.stderr)
    sys.exit(1)
sizes = [66, 189, 189] if os.environ.get("FAKE_SMALL") == "1" else [1815, 66, 189, 1815, 66, 189, 1815, 66, 189]
for n in sizes:
    print("[profile] cuda0: %d nodes (direct): host submit 1.0 us, GPU 1.000 ms, wall 1.000 ms" % n, file=sys.stderr)
    print("[profile]   mul_mat      x1         0.100 ms", file=sys.stderr)
path = os.environ.get("CT_CUDA_DUMP_GRAPH")
if path:
    with open(os.environ["FAKE_SKIPS"], "w") as f:
        f.write(os.environ.get("CT_CUDA_DUMP_GRAPH_SKIP", ""))
    rows = [
        (0, "mul_mat", "[1280,438,8,1] run 1 fused x3", "cublasLtMatmul grid (1280,3504,1) block 5120 smem 0", 0.1),
        (1, "mul_mat", "[1280,438,8,1] run 2 fused x3", "cublasLtMatmul grid (1280,3504,1) block 5120 smem 0", 0.1),
        (2, "mul_mat", "[880,438,8,8] run 3", "cublasLtMatmul grid (880,438,8) block 160 smem 0", 0.05),
        (3, "layer_norm", "[1280,438,8,1] run 4", "layer_norm_w4 grid (3504,1,1) block 256 smem 0", 0.02),
        (4, "mul_mat", "[1024,1,8,1] run 5", "mul_mat_vec_mma grid (64,1,1) block 256 smem 4096", 0.01),
    ]
    with open(path, "w") as f:
        f.write("# cuda0: graph of 5 nodes, 5 concurrency runs\n")
        for i, op, ne, launch, ms in rows:
            f.write("%4d %-28.28s %-10s %-4s %s %s\n" % (i, "-", op, "f32", ne, launch))
        if os.environ.get("FAKE_NOTIMES") != "1":
            for i, op, ne, launch, ms in rows:
                f.write("time %4d %-28.28s %.4f ms\n" % (i, "-", ms))
'''


def run(args, env):
    p = subprocess.run([sys.executable, PRODUCTS] + args, capture_output=True, text=True, env=env, timeout=60)
    return p.returncode, p.stdout + p.stderr


with tempfile.TemporaryDirectory() as tmp:
    fake = os.path.join(tmp, "fake_bench")
    with open(fake, "w") as f:
        f.write(FAKE)
    os.chmod(fake, 0o755)
    skips = os.path.join(tmp, "skip.txt")
    env = dict(os.environ, FAKE_SKIPS=skips)
    base = ["--bench", fake, "--model", tmp]
    rc, out = run(base, env)
    check(rc == 0, "status %d on a good run:\n%s" % (rc, out))
    check(open(skips).read() == "6" if os.path.exists(skips) else False, "the dump was not asked of compute 6")
    lines = out.splitlines()
    big = [l for l in lines if l.startswith("N 1280 x M 3504 x K 5120, x1")]
    check(len(big) == 1 and big[0].split()[9] == "2" and big[0].split()[-1] == "459",
          "the 1280 x 3504 x 5120 row (2 of them, 459 TFLOP/s): %s" % big)
    bd = [l for l in lines if l.startswith("N 880 x M 438 x K 160, x64")]
    check(len(bd) == 1 and bd[0].split()[-1] == "158", "the rel-pos row (x64, 158 TFLOP/s): %s" % bd)
    mv = [l for l in lines if l.startswith("mul_mat_vec_mma [1024,1,8,1]")]
    check(len(mv) == 1 and mv[0].split()[-1] == "-", "a matvec row without a rate: %s" % mv)
    order = [l.split(",")[0] for l in lines if l.startswith("N ")]
    check(order == ["N 1280 x M 3504 x K 5120", "N 880 x M 438 x K 160"], "most time first: %s" % order)
    check(any(l.strip().startswith("layer_norm") and "x1" in l for l in lines), "the pass by op:\n%s" % out)
    for name, extra in (("FAKE_FAIL", {}), ("FAKE_SMALL", {}), ("FAKE_NOTIMES", {})):
        rc, out = run(base, dict(env, **{name: "1"}))
        check(rc == 1, "%s: status %d, 1 expected:\n%s" % (name, rc, out))
    rc, out = run(base + ["--batch", "0"], env)
    check(rc == 2, "--batch 0: status %d" % rc)
    rc, out = run(["--model", tmp], env)
    check(rc == 2, "no --bench: status %d" % rc)

for f in failures:
    print("FAIL:", f)
print("%d failed" % len(failures) if failures else "ok")
sys.exit(1 if failures else 0)
