#!/usr/bin/env python3
"""stamps.py: a replayed decoder step's own timeline, from the kernels' timer
records (CT_CUDA_STAMPS=path, src/backend/cuda/cuda_profile.c).

Each record is one kernel launch: when its first thread arrived, when its
wait for the kernel before it returned (the moment the one before finished),
its name's hash, grid and block. A step is the run of records that ends at
the step's tail kernel (argmax_sum); the steps of the most common shape (the
same kernels in the same order: the replayed steps of one batch size) are
lined up and, for each position, the medians printed:
  - busy: this kernel's release to the next one's, i.e. how long the GPU
    spent from the end of the kernel before to the end of this one (its own
    critical path, including the release of the next);
  - early: release minus arrival: how long before its turn the kernel was
    resident (programmatic dependent launch), its early loads in flight.
A kernel without the records (cuBLASLt's) is inside the busy time of the
stamped kernel before it.

usage: bench/stamps.py RECORDS [--kernels src/backend/cuda/kernels] [--tail argmax_sum]
"""
import argparse
import collections
import glob
import os
import re
import statistics


def fnv1a(name):
    h = 0xCBF29CE484222325  # FNV-1a 64: offset basis, then xor and multiply by its prime
    for ch in name.encode():
        h = ((h ^ ch) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def kernel_names(folder):
    names = {}
    for path in glob.glob(os.path.join(folder, "*.cu")):
        # kernels, and the device functions that hold the wait for them
        # (__func__ there names the function: mvm_body for the mma products)
        for m in re.finditer(r'\bvoid\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(', open(path).read()):
            names[fnv1a(m.group(1))] = m.group(1)
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("records")
    ap.add_argument("--kernels", default=os.path.join(os.path.dirname(__file__), "..", "src", "backend",
                                                      "cuda", "kernels"))
    ap.add_argument("--tail", default="argmax_sum")
    ap.add_argument("--top", type=int, default=3, help="step shapes to print")
    ap.add_argument("--long", type=int, default=500, help="kernels past which a run is an encoder pass")
    ap.add_argument("--gap", type=float, default=300.0, help="us past which an interval is a host wait")
    a = ap.parse_args()
    names = kernel_names(a.kernels)
    recs = []
    for line in open(a.records):
        if line.startswith("#"):
            continue
        f = line.split()
        recs.append((int(f[0]), int(f[1]), names.get(int(f[2], 16), f[2][:8]), tuple(int(x) for x in f[3:7])))
    if not recs:
        print("stamps: no records")
        return
    # steps: from the record after one tail up to and including the next tail
    steps, cur = [], []
    for i, r in enumerate(recs):
        cur.append(i)
        if r[2] == a.tail:
            steps.append(cur)
            cur = []
    shapes = collections.Counter()
    by_shape = collections.defaultdict(list)
    for s in steps:
        key = tuple((recs[i][2], recs[i][3]) for i in s)
        shapes[key] += 1
        by_shape[key].append(s)
    print(f"stamps: {len(recs)} records, {len(steps)} steps ending in {a.tail}, {len(shapes)} step shapes")
    for key, count in shapes.most_common(a.top):
        ss = [s for s in by_shape[key] if s[-1] + 1 < len(recs)]
        if len(ss) < 3:
            continue
        # a step's length: its first kernel's release to the release after its tail
        lens = [(recs[s[-1] + 1][1] - recs[s[0]][1]) / 1e3 for s in ss]
        # replayed steps sit back to back: drop those with a host gap (over 2x the median)
        med = statistics.median(lens)
        ss = [s for s, l in zip(ss, lens) if l < 2 * med]
        lens = [l for l in lens if l < 2 * med]
        print(f"\nstep shape of {len(key)} kernels, {count} steps ({len(ss)} back to back): "
              f"median {statistics.median(lens):.1f} us a step")
        agg = collections.OrderedDict()
        print(f"{'#':>3} {'kernel':<28} {'grid':<16} {'block':>5} {'busy us':>8} {'early us':>9}")
        for p, (name, g) in enumerate(key):
            busy = statistics.median((recs[s[p] + 1][1] - recs[s[p]][1]) / 1e3 for s in ss)
            early = statistics.median((recs[s[p]][1] - recs[s[p]][0]) / 1e3 for s in ss)
            print(f"{p:>3} {name:<28} {str(g[:3]).replace(' ', ''):<16} {g[3]:>5} {busy:>8.2f} {early:>9.2f}")
            k = (name, g[:3])
            n, b = agg.get(k, (0, 0.0))
            agg[k] = (n + 1, b + busy)
        print("\nby kernel and grid: count, busy us in all")
        for (name, g), (n, b) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
            print(f"  {name:<28} {str(g).replace(' ', ''):<16} {n:>3} {b:>8.1f}")

    # the long runs between steps (an encoder pass and the prefill, the
    # process's first computes): busy time by kernel and grid, intervals
    # over --gap us (host waits) left out
    longs = [s for s in steps if len(s) > a.long]
    if longs:
        agg = collections.defaultdict(lambda: [0, 0.0])
        total = []
        for s in longs:
            t = 0.0
            for i in s:
                if i + 1 >= len(recs):
                    continue
                b = (recs[i + 1][1] - recs[i][1]) / 1e3
                if b > a.gap:
                    continue
                k = (recs[i][2], recs[i][3][:3])
                agg[k][0] += 1
                agg[k][1] += b
                t += b
            total.append(t)
        print(f"\n{len(longs)} runs of more than {a.long} kernels (encoder passes with their prefill): "
              f"median {statistics.median(total) / 1e3:.2f} ms busy a run, {len(longs[0])} kernels in the first")
        print("by kernel and grid, over all of them: count, busy ms, us each")
        for (name, g), (n, b) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:30]:
            print(f"  {name:<28} {str(g).replace(' ', ''):<16} {n:>6} {b / 1e3:>8.2f} {b / n:>7.2f}")


if __name__ == "__main__":
    main()
