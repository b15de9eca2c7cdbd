#!/usr/bin/env python3
"""products.py: one encoder pass's matrix products, each timed, by shape.

The twentieth session's profile by op (bench/README.md) put the encoder's
products at 507 TFLOP/s at batch 8 and 609 at 64, against the 766 that
bench-cuda_ceilings finds at the encoder's largest shape; which of a
layer's products lose it is what this says. It runs bench-transcribe_batch
twice at one batch size: first with CT_CUDA_PROFILE=2, to find the timed
encoder pass among the computes (the last graph of at least --min-nodes
nodes, after the warm-ups whose first pass also holds cuBLASLt's plan
making), then with CT_CUDA_PROFILE=2 and CT_CUDA_DUMP_GRAPH set to dump
that pass (CT_CUDA_DUMP_GRAPH_SKIP: the computes before it), every node
launched between two events. It prints each product shape's count, time,
share of the pass and rate (FLOPs from the dump's cuBLASLt launch shape:
grid (N, M, ...), block K, and the node's outputs: 2 K a output), the
most time first, then the pass by op.

Usage (repository root, on the GPU machine):
  bench/products.py --bench build-gpu/bench-transcribe_batch --model DIR
      [--backend cuda] [--batch 8] [--min-nodes 1000] [--timeout 120]
Exit status 0 when the dump was read, 1 when a run failed or no pass was
found, 2 for bad arguments.

Not here: the decoder's step (bench/stamps.py), whole-pass counters
(bench/ncu_passes.py). tests/py/test_products.py checks it with a
stand-in benchmark program, without a GPU.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HEADER = re.compile(r"\[profile\] .*?: (\d+) nodes \(")
NODE = re.compile(
    r"^\s*(\d+) (.{28}) (\S+)\s+(\S+)\s+\[(-?\d+),(-?\d+),(-?\d+),(-?\d+)\] run (-?\d+)(?: fused x(\d+))? "
    r"(\S+) grid \((\d+),(\d+),(\d+)\) block (\d+) smem (\d+)")
TIME = re.compile(r"^time\s+(\d+) .* ([\d.]+) ms$")


def run(args, env, timeout):
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def parse_dump(text):
    """Nodes {index: dict} and times {index: ms} of a dump with times."""
    nodes, times = {}, {}
    for line in text.splitlines():
        m = TIME.match(line)
        if m:
            times[int(m.group(1))] = float(m.group(2))
            continue
        m = NODE.match(line)
        if m:
            g = m.groups()
            nodes[int(g[0])] = {"op": g[2], "ne": [int(x) for x in g[4:8]], "fused": int(g[9] or 1),
                                "kernel": g[10], "grid": [int(x) for x in g[11:14]], "block": int(g[14])}
    return nodes, times


def shape_key(n):
    """A product's shape as its launch gives it, and its FLOPs (None where
    the launch shape does not give K: the matvec kernels)."""
    ne, g = n["ne"], n["grid"]
    if n["kernel"] == "cublasLtMatmul" and g[0] > 0 and g[1] > 0:
        K, outputs = n["block"], ne[0] * ne[1] * ne[2] * ne[3]
        return "N %d x M %d x K %d, x%d" % (g[0], g[1], K, max(1, outputs // (g[0] * g[1]))), 2.0 * outputs * K
    return "%s [%d,%d,%d,%d]" % (n["kernel"], ne[0], ne[1], ne[2], ne[3]), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--min-nodes", type=int, default=1000)
    ap.add_argument("--timeout", type=int, default=120)
    try:
        a = ap.parse_args()
    except SystemExit as e:
        return 2 if e.code else 0
    if a.batch < 1 or a.min_nodes < 1:
        print("products.py: --batch and --min-nodes want at least 1", file=sys.stderr)
        return 2
    cmd = [a.bench, "--model", a.model, "--backend", a.backend, "--batches", str(a.batch), "--tokens", "8",
           "--runs", "1"]
    env = dict(os.environ, CT_CUDA_PROFILE="2")
    try:
        rc, out = run(cmd, env, a.timeout)
    except subprocess.TimeoutExpired:
        print("products.py: the profiled run took more than %d s" % a.timeout, file=sys.stderr)
        return 1
    if rc != 0:
        print("products.py: the profiled run failed (status %d):\n%s" % (rc, out[-2000:]), file=sys.stderr)
        return 1
    sizes = [int(m.group(1)) for m in (HEADER.search(l) for l in out.splitlines()) if m]
    passes = [i for i, s in enumerate(sizes) if s >= a.min_nodes]
    if not passes:
        print("products.py: no compute of %d nodes or more among %d" % (a.min_nodes, len(sizes)), file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dump.txt")
        env = dict(os.environ, CT_CUDA_PROFILE="2", CT_CUDA_DUMP_GRAPH=path, CT_CUDA_DUMP_GRAPH_SKIP=str(passes[-1]))
        try:
            rc, out = run(cmd, env, a.timeout)
        except subprocess.TimeoutExpired:
            print("products.py: the dumping run took more than %d s" % a.timeout, file=sys.stderr)
            return 1
        text = open(path).read() if os.path.exists(path) else ""
    nodes, times = parse_dump(text)
    if rc != 0 or not nodes or not times:
        print("products.py: the dumping run (status %d) left %d nodes and %d times" % (rc, len(nodes), len(times)),
              file=sys.stderr)
        return 1
    total = sum(times.values())
    by_shape, by_op = {}, {}
    for i, n in nodes.items():
        ms = times.get(i)
        if ms is None:
            continue
        by_op.setdefault(n["op"], [0, 0.0])
        by_op[n["op"]][0] += 1
        by_op[n["op"]][1] += ms
        if n["op"] != "mul_mat":
            continue
        key, flops = shape_key(n)
        e = by_shape.setdefault(key, [0, 0.0, 0.0, True])
        e[0] += 1
        e[1] += ms
        if flops is None:
            e[3] = False
        else:
            e[2] += flops
    print("encoder pass at batch %d: compute %d of %d, %d nodes timed, %.3f ms in kernels" %
          (a.batch, passes[-1], len(sizes), len(times), total))
    print("%-44s %6s %9s %7s %9s" % ("product (launch shape)", "count", "ms", "share", "TFLOP/s"))
    for key, (cnt, ms, flops, known) in sorted(by_shape.items(), key=lambda kv: -kv[1][1]):
        rate = "%9.0f" % (flops / ms / 1e9) if known and ms > 0 else "%9s" % "-"
        print("%-44s %6d %9.3f %6.1f%% %s" % (key, cnt, ms, 100.0 * ms / total, rate))
    print("by op:")
    for op, (cnt, ms) in sorted(by_op.items(), key=lambda kv: -kv[1][1]):
        print("  %-12s x%-5d %9.3f ms %6.1f%%" % (op, cnt, ms, 100.0 * ms / total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
