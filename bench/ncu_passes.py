#!/usr/bin/env python3
"""ncu_passes.py: where an encoder pass goes, kernel by kernel, including
cuBLASLt's (which bench/stamps.py cannot see).

Reads the raw page of an Nsight Compute report of whole
bench-transcribe_batch runs that timed every kernel alone:
  ncu -o R --clock-control none --cache-control none \\
      --metrics gpu__time_duration.sum ./build-gpu/bench-transcribe_batch ...
  ncu --import R.ncu-rep --csv --page raw > R.csv
(the units row under the header is read: us, ms, ns). A pass starts at the
encoder's first kernel (sub_conv_dw, or conv_2d_c1_3x3 where the
subsampling's front runs unfused, or --start) and runs to the first argmax
after it (the prefill's tail). The last pass is printed by kernel name
(count, total ms, share, us each), then the first decoder step after it
(embed_norm to argmax_sum) kernel by kernel with its grids. The frontend's
kernels (where it runs in the encoder's graph) come before the pass's first
kernel and are left out.

ncu serializes the kernels: each reads 1-3 us longer than in a replayed
graph (a batch-1 step 500 us against 377 stamped), so read shares and the
large kernels, not the small ones' sums.

usage: bench/ncu_passes.py R.csv [--start NAME] [--top N]
"""
import argparse
import csv
import re
import sys

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def kernels(path):
    """(name, us, grid) of every kernel in the report, in launch order."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    for col in ("gpu__time_duration.sum", "Kernel Name", "Grid Size"):
        if len(rows) < 2 or col not in rows[0]:
            raise ValueError("%s: no %s column (ncu --csv --page raw)" % (path, col))
    h = rows[0]
    ti, ki, gi = h.index("gpu__time_duration.sum"), h.index("Kernel Name"), h.index("Grid Size")
    unit = rows[1][ti]
    if unit not in UNITS:
        raise ValueError("%s: unknown time unit '%s'" % (path, unit))
    out = []
    for r in rows[2:]:
        try:
            t = float(r[ti].replace(",", "")) * UNITS[unit]
        except (ValueError, IndexError):
            continue
        name = re.sub(r"[(<].*", "", re.sub(r"^void ", "", r[ki])).strip()
        out.append((name, t, r[gi]))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description="an encoder pass by kernel, from ncu's raw CSV")
    ap.add_argument("csv")
    ap.add_argument("--start", help="the kernel a pass starts at (default: sub_conv_dw or conv_2d_c1_3x3)")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args(argv)
    try:
        ks = kernels(a.csv)
    except (OSError, ValueError) as e:
        print("ncu_passes.py: %s" % e, file=sys.stderr)
        return 2
    firsts = (a.start,) if a.start else ("sub_conv_dw", "conv_2d_c1_3x3")
    starts = [i for i, k in enumerate(ks) if k[0] in firsts]
    print("%d kernels, %d encoder passes" % (len(ks), len(starts)))
    if not starts:
        print("ncu_passes.py: no pass starts at %s" % " or ".join(firsts), file=sys.stderr)
        return 1
    s = starts[-1]
    e = next((i for i in range(s, len(ks)) if ks[i][0].startswith("argmax")), len(ks) - 1)
    seg = ks[s:e + 1]
    by = {}
    for n, t, _ in seg:
        c, tot = by.get(n, (0, 0.0))
        by[n] = (c + 1, tot + t)
    total = sum(t for _, t, _ in seg)
    print("== the last encoder pass and its prefill: %d kernels, %.2f ms" % (len(seg), total / 1e3))
    for n, (c, tot) in sorted(by.items(), key=lambda x: -x[1][1])[:a.top]:
        print("  %-56s %5d %9.3f ms %5.1f%% %9.1f us each" % (n[:56], c, tot / 1e3, 100 * tot / total, tot / c))
    b = next((i for i in range(e + 1, len(ks)) if ks[i][0] == "embed_norm"), None)
    z = next((i for i in range(b, len(ks)) if ks[i][0] == "argmax_sum"), None) if b is not None else None
    if z is None:
        print("(no decoder step after it: embed_norm .. argmax_sum)")
    else:
        step = ks[b:z + 1]
        print("== a decoder step: %d kernels, %.1f us" % (len(step), sum(t for _, t, _ in step)))
        for n, t, g in step:
            print("  %-50s %16s %8.1f" % (n[:50], g, t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
