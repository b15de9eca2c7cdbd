#!/usr/bin/env python3
"""test_gpu_summary.py: bench/gpu_summary.py's verdicts from made-up runs,
without a GPU: a target met and not met on each side of its line, the floor
and its reason printed for one not met, and the missing pieces (no
ceilings, no peer, a batch not run, bad JSON) said instead of numbers.

Usage: test_gpu_summary.py REPO_ROOT (ctest passes it).
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
SUMMARY = os.path.join(ROOT, "bench", "gpu_summary.py")
MODEL = os.path.join(ROOT, "tests", "data", "full", "config.json")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def row(b, total, enc, dec, step, rtfx, peak):
    return {"batch": b, "total_ms": total, "frontend_ms": 1.0, "encoder_ms": enc, "decoder_ms": dec,
            "step_ms": step, "rtfx": rtfx, "peak_gib": peak, "host_submit_share": 0.1, "runs": 3}


def run(files, extra=()):
    with tempfile.TemporaryDirectory() as d:
        for name, data in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(data if isinstance(data, str) else json.dumps(data))
        p = subprocess.run([sys.executable, SUMMARY, d, MODEL, "--tokens", "128", *extra], capture_output=True,
                           text=True)
        return p.returncode, p.stdout + p.stderr


def line(out, start):
    hits = [x for x in out.splitlines() if x.startswith(start)]
    return hits[0] if hits else ""


ceilings = {"product_tflops": 790.0, "product_model_shape_tflops": 600.0, "copy_tbs": 4.3}
peer = [{"batch": b, "total_s": 1.0, "rtfx": 100.0, "peak_mem_gib": 8.0} for b in (1, 8, 64)]

# batch 64 just above its line, batch 8 just below, batch 1 met on time and not on its step
ours = [row(64, 279.0, 180.0, 90.0, 0.70, 8029.0, 7.0), row(8, 71.0, 40.0, 25.0, 0.19, 3944.0, 8.5),
        row(1, 49.5, 20.0, 28.0, 0.26, 707.0, 4.0)]
rc, out = run({"ours.json": ours, "peer.json": peer, "ceilings.json": ceilings,
               "cold.json": [{"batch": 1, "open_ms": 900, "backends_ms": 200, "weights_ms": 600,
                              "weights_gb": 4.1, "first_ms": 300}],
               "warm.json": [{"batch": 1, "open_ms": 800, "backends_ms": 100, "weights_ms": 600,
                              "weights_gb": 4.1, "first_ms": 250}]})
check(rc == 0, "exit status %d" % rc)
check(line(out, "- batch 64, RTFx >= 8000: 8029.00, met") != "", "batch 64 met:\n" + out)
b8 = line(out, "- batch 8, RTFx >= 4000: 3944.00, not met")
check(b8 != "", "batch 8 not met:\n" + out)
check("floor " in b8 and "the most above its floor: the encoder" in b8, "batch 8's floor and reason: " + b8)
# the reason's rates: the encoder's FLOPs over its 40 ms, a share of this run's 790 TFLOP/s
check("the encoder, 40.0 ms against " in b8 and "its floor set by its FLOPs, done at " in b8 and "TFLOP/s against the ceiling's 790" in b8,
      "batch 8's reason names the rate the encoder reached: " + b8)
check(line(out, "- batch 1, <= 50 ms: 49.50 ms, met") != "", "batch 1 time met:\n" + out)
step = line(out, "- batch 1, step <= 0.25 ms: 0.2600 ms, not met; floor 0.0")
check(step != "", "batch 1 step not met with a floor:\n" + out)
check("the decoder: its floor set by its bytes, moved at " in step and "TB/s against the copy rate's 4.30" in step,
      "batch 1 step's reason names the decoder's rate:\n" + step)
check(line(out, "- peak GPU memory at or below transformers' at every batch: not met at batch 8") != "",
      "peak memory at batch 8:\n" + out)
check(line(out, "- cold start").endswith(": met"), "cold start 1200 ms with weights met:\n" + out)
check(line(out, "- warm start").endswith(": met"), "warm start 450 ms without weights met:\n" + out)
check("first transcription of all its tokens (an upper bound on the first token) 250 ms" in line(out, "- warm start"),
      "a first call without first_tokens is said to be an upper bound:\n" + out)
check("floors: the model's FLOPs and bytes" in out, "floors line:\n" + out)
# the floor column: a floor below every measured total, above zero
for b in (1, 8, 64):
    cols = line(out, "%5d |" % b).split("|")
    check(len(cols) == 5, "batch %d row has 5 parts: %r" % (b, cols))
    if len(cols) == 5:
        fl, x = cols[4].split()
        check(0 < float(fl) < float(cols[1].split()[0]) and float(x) > 1, "batch %d floor %s, x %s" % (b, fl, x))

# a first call that stopped at its first token is said to be that; judged on
# the same sum, 1 ms over the line is not met
rc, out = run({"ours.json": ours, "cold.json": [{"batch": 1, "open_ms": 900, "backends_ms": 200, "weights_ms": 600,
                                                 "weights_gb": 4.1, "first_ms": 601, "first_tokens": 1}],
               "warm.json": [{"batch": 1, "open_ms": 800, "backends_ms": 100, "weights_ms": 600,
                              "weights_gb": 4.1, "first_ms": 300, "first_tokens": 1}]})
cold, warm = line(out, "- cold start"), line(out, "- warm start")
check("first transcription to its first token 601 ms" in cold and cold.endswith(": not met"),
      "cold start 1501 ms to the first token not met:\n" + out)
check("first transcription to its first token 300 ms" in warm and warm.endswith(": met"),
      "warm start 500 ms to the first token met:\n" + out)

# a start not met says where its first call went (bench-transcribe_batch's
# first_*_ms): the stages, the encoder beside a timed call's, the rest; a
# start met says nothing more
parts = {"first_frontend_ms": 1.0, "first_encoder_ms": 300.0, "first_decoder_ms": 20.0, "encoder_ms": 13.5}
rc, out = run({"ours.json": ours, "cold.json": [dict({"batch": 1, "open_ms": 900, "backends_ms": 200, "weights_ms": 600,
                                                      "weights_gb": 4.1, "first_ms": 350, "first_tokens": 1}, **parts)],
               "warm.json": [dict({"batch": 1, "open_ms": 800, "backends_ms": 100, "weights_ms": 600,
                                   "weights_gb": 4.1, "first_ms": 350, "first_tokens": 1}, **parts)]})
cold, warm = line(out, "- cold start"), line(out, "- warm start")
check(cold.endswith(": met"), "cold start 1250 ms met, nothing after it:\n" + out)
check("not met; its first call: frontend 1.0 ms, encoder 300.0 (13.5 in a timed call), decoder 20.0, 29.0 outside "
      "the stages" in warm and "not FLOPs or bytes" in warm, "warm start 550 ms not met, with its first call's parts:\n" + out)
check("first-use host time" not in warm, "no setup parts without first_setup_ms:\n" + out)

# with the backend's own first-use count (first_setup_*_ms), a start not met
# says how much of its first call that was, by part, and what is left
setup = dict(parts, first_setup_ms=255.0, first_setup_kernels_ms=40.0, first_setup_plans_ms=10.0,
             first_setup_first_launch_ms=190.0, first_setup_graphs_ms=10.0, first_setup_wait_ms=5.0,
             first_alloc_ms=20.0)
rc, out = run({"ours.json": ours, "warm.json": [dict({"batch": 1, "open_ms": 800, "backends_ms": 100,
                                                      "weights_ms": 600, "weights_gb": 4.1, "first_ms": 350,
                                                      "first_tokens": 1}, **setup)]})
warm = line(out, "- warm start")
check("of it the backend's first-use host time 255.0 ms: kernel files and functions readied 40.0, product plans "
      "made 10.0, their first launches (cuBLASLt loads a kernel at its first use) 190.0, graphs captured 10.0, "
      "waiting for the prewarm 5.0; buffers allocated 20.0; the rest of the first call (75.0 ms)" in warm,
      "warm start's first-use parts:\n" + out)

# no ceilings, no peer, no batch 64, no cold or warm run
rc, out = run({"ours.json": [row(8, 300.0, 150.0, 140.0, 1.1, 933.0, 5.0), row(1, 90.0, 30.0, 55.0, 0.5, 389.0, 4.0)]})
check(rc == 0, "exit status %d without ceilings" % rc)
check("no ceilings measured in this run" in out, "no-ceilings line:\n" + out)
check(line(out, "- batch 64, RTFx >= 8000: not run") != "", "batch 64 not run:\n" + out)
check("not met; no floor (no ceilings in this run)" in line(out, "- batch 8"), "batch 8 without floor:\n" + out)
check(line(out, "- batch 1, step <= 0.25 ms: 0.5000 ms, not met; no floor (no ceilings in this run)") != "",
      "batch 1 step without floor:\n" + out)
check(line(out, "- peak GPU memory against transformers': no batch with both") != "", "no peer:\n" + out)
check(line(out, "- cold start (empty kernel cache): not run") != "", "no cold run:\n" + out)

# on the lines: exactly at a target is met; just short of it is not, and says
# by how much
ours = [row(64, 280.0, 180.0, 90.0, 0.70, 8000.0, 7.0), row(8, 70.0, 40.0, 25.0, 0.19, 3999.96, 7.0),
        row(1, 50.0, 20.0, 28.0, 0.25, 700.0, 4.0)]
rc, out = run({"ours.json": ours, "ceilings.json": ceilings})
check(line(out, "- batch 64, RTFx >= 8000: 8000.00, met") != "", "RTFx exactly 8000:\n" + out)
check(line(out, "- batch 8, RTFx >= 4000: 3999.96, not met") != "", "RTFx 3999.96:\n" + out)
check(line(out, "- batch 1, <= 50 ms: 50.00 ms, met") != "", "50 ms exactly:\n" + out)
check(line(out, "- batch 1, step <= 0.25 ms: 0.2500 ms, met") != "", "0.25 ms exactly:\n" + out)

# a trial off the GPU (BACKEND=cpu) prints its table and judges nothing
rc, out = run({"ours.json": ours}, ("--trial",))
check(rc == 0 and "not judged (a trial of the script" in out and "- batch" not in out and "   64 |" in out,
      "trial:\n" + out)
rc, out = run({"ours.json": ours}, ("--nonsense",))
check(rc != 0, "an unknown flag is an error")

# no batch 1 at all
rc, out = run({"ours.json": [row(8, 300.0, 150.0, 140.0, 1.1, 933.0, 5.0)]})
check(line(out, "- batch 1: not run") != "", "batch 1 not run:\n" + out)

# a broken JSON file is an error that names it, not a table of guesses
rc, out = run({"ours.json": "{\"batch\": 1,"})
check(rc != 0 and "ours.json" in out, "broken ours.json: rc %d:\n%s" % (rc, out))

for f in failures:
    print("FAIL: " + f)
print("test_gpu_summary: %s" % ("failed (%d)" % len(failures) if failures else "passed"))
sys.exit(1 if failures else 0)
