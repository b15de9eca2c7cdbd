#!/usr/bin/env python3
"""test_stamps.py: bench/stamps.py without a GPU.

Writes made-up timer records (CT_CUDA_STAMPS's format): a long run (an
encoder pass with its prefill, ending at the step tail), then steps of four
kernels whose intervals are known, one step after a host wait; checks that
the reading names the kernels from their hashes, finds the steps, leaves the
step with the wait out, and prints each position's busy and early times and
the encoder run's busy time by kernel.

Usage: test_stamps.py REPO_ROOT (ctest passes it).
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
failures = []


def fnv(name):
    h = 0xCBF29CE484222325
    for ch in name.encode():
        h = ((h ^ ch) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


STEP = [("embed_norm", 3000, 1, 256), ("mul_mat_vec_mma", 7000, 192, 512), ("attn_decode_bf16", 5000, 8, 128),
        ("argmax_sum", 4000, 1, 1024)]
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "stamps.txt")
    t = 1_000_000
    lines = ["# arrive_ns release_ns fnv1a(kernel) grid_x grid_y grid_z block"]
    # an encoder pass: 600 kernels of 2 us, then the tail (the prefill's pick)
    for i in range(600):
        lines.append(f"{t - 1000} {t} {fnv('ew_binary_c4'):016x} 96 1 1 256")
        t += 2000
    lines.append(f"{t - 500} {t} {fnv('argmax_sum'):016x} 1 1 1 1024")
    t += 4000
    for s in range(12):
        if s == 6:
            t += 5_000_000  # a host wait before this step
        for name, busy, gx, blk in STEP:
            lines.append(f"{t - 2000} {t} {fnv(name):016x} {gx} 1 1 {blk}")
            t += busy
    lines.append(f"{t - 2000} {t} {fnv('embed_norm'):016x} 1 1 1 256")
    open(path, "w").write("\n".join(lines) + "\n")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "stamps.py"), path], capture_output=True, text=True)
    out = r.stdout
    if r.returncode != 0:
        failures.append(f"exit status {r.returncode}: {r.stderr}")
    if "13 steps ending in argmax_sum" not in out:  # the encoder run's and the 12 steps'
        failures.append("the steps were not found")
    m = re.search(r"step shape of (\d+) kernels, (\d+) steps \((\d+) back to back\): median ([\d.]+) us", out)
    if not m or (m.group(1), m.group(2), m.group(3)) != ("4", "12", "11") or abs(float(m.group(4)) - 19.0) > 0.01:
        failures.append("the step shape (4 kernels, 12 steps, 11 back to back) or its median (19 us) is wrong")
    for name, busy, gx, blk in STEP:
        if not re.search(rf"{name}\s+\({gx},1,1\)\s+{blk}\s+{busy / 1000:.2f}\s+2\.00", out):
            failures.append(f"{name}'s busy {busy / 1000:.2f} us and early 2.00 us not printed")
    if not re.search(r"ew_binary_c4\s+\(96,1,1\)\s+600\s+1\.20\s+2\.00", out):
        failures.append("the encoder run's busy time by kernel (600 x 2 us) not printed")
# the kernels' hash is FNV-1a 64 (common.cuh): its published test vectors
sys.path.insert(0, os.path.join(ROOT, "bench"))
import stamps  # noqa: E402
if stamps.fnv1a("") != 0xcbf29ce484222325 or stamps.fnv1a("a") != 0xaf63dc4c8601ec8c:
    failures.append("stamps.fnv1a is not FNV-1a 64")
if failures:
    print("test_stamps: FAILED\n  " + "\n  ".join(failures))
    print(out)
    sys.exit(1)
print("test_stamps: ok")
