#!/usr/bin/env python3
"""test_levers.py: bench/levers.py without a GPU.

With a stand-in benchmark program whose rows follow its environment: the
default runs first in every round, each lever's step and total are read
against the default's (a lever 20% slower says +20.0%), a run that fails or
leaves out a batch is named in the table and makes the exit status 1, and
bad lever text is refused with status 2; a run's progress line carries its
figures, and --deadline starts no run past it. Then, where the real
bench-transcribe_batch is given, one round on the CPU with the tiny
checkpoint: its rows parse and fill the table.

Usage: test_levers.py REPO_ROOT [BENCH_TRANSCRIBE_BATCH] (ctest passes both).
"""
import os
import subprocess
import sys
import tempfile

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
REAL = sys.argv[2] if len(sys.argv) > 2 else None
LEVERS = os.path.join(ROOT, "bench", "levers.py")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


# Prints one JSON row per batch of --batches: step 0.5 ms (x1.2 with
# FAKE_SLOW=1), fails with FAKE_FAIL=1, leaves out batch 8 with FAKE_DROP=1;
# appends its FAKE_NAME to the file FAKE_LOG (the order of the runs).
FAKE = r'''#!/usr/bin/env python3
import json, os, sys
a = dict(zip(sys.argv[1::2], sys.argv[2::2]))
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(os.environ.get("FAKE_NAME", "default") + "\n")
if os.environ.get("FAKE_FAIL") == "1":
    print("bench: the device fell over", file=sys.stderr)
    sys.exit(1)
k = 1.2 if os.environ.get("FAKE_SLOW") == "1" else 1.0
for b in a["--batches"].split(","):
    if b == "8" and os.environ.get("FAKE_DROP") == "1":
        continue
    print(json.dumps({"batch": int(b), "step_ms": 0.5 * k, "total_ms": 100.0 * k, "encoder_ms": 30.0,
                      "decoder_ms": 64.0 * k, "runs": int(a["--runs"])}))
'''


def run(args, env=None):
    p = subprocess.run([sys.executable, LEVERS] + args, capture_output=True, text=True, env=env, timeout=120)
    return p.returncode, p.stdout + p.stderr


def row(out, name, batch):
    for line in out.splitlines():
        f = line.split()
        if len(f) > 3 and f[0] == name and f[2] == str(batch):
            return line
    return ""


with tempfile.TemporaryDirectory() as d:
    fake = os.path.join(d, "fake-bench")
    with open(fake, "w") as f:
        f.write(FAKE)
    os.chmod(fake, 0o755)
    log = os.path.join(d, "runs.txt")
    env = dict(os.environ, FAKE_LOG=log)
    base = ["--bench", fake, "--model", d, "--batches", "1,8", "--runs", "3", "--rounds", "2"]

    rc, out = run(base + ["slow=FAKE_SLOW=1,FAKE_NAME=slow", "same=FAKE_NAME=same"], env)
    check(rc == 0, "exit status %d:\n%s" % (rc, out))
    with open(log) as f:
        order = f.read().split()
    check(order == ["default", "slow", "same"] * 2, "runs in the order default, levers, each round: %r" % order)
    slow = row(out, "slow", 1)
    check("+20.0%" in slow and "0.6000 0.6000" in slow, "slow lever's step and its +20.0%%: %r\n%s" % (slow, out))
    check(row(out, "same", 8).count("+0.0%") == 2, "an unchanged lever reads +0.0%%: %r" % row(out, "same", 8))
    check("0.5000 0.5000" in row(out, "default", 8), "the default's rounds: %r" % row(out, "default", 8))

    os.remove(log)
    rc, out = run(base + ["--rounds", "1", "broken=FAKE_FAIL=1", "short=FAKE_DROP=1"], env)
    check(rc == 1, "a failed run gives exit status 1, not %d" % rc)
    check("failed: exit status 1: bench: the device fell over" in row(out, "broken", 1), "failure named:\n" + out)
    check("failed: no row for batch 8" in row(out, "short", 8) and row(out, "short", 1).count("%") == 2,
          "a missing batch named, the other kept:\n" + out)

    # BENCH names another program for its lever and stays out of its
    # environment: a copy of the stand-in that is 50% slower (as another
    # build might be), 9 times slower where it sees BENCH
    other = os.path.join(d, "other-bench")
    with open(other, "w") as f:
        f.write(FAKE.replace("k = 1.2 if os.environ.get(\"FAKE_SLOW\") == \"1\" else 1.0",
                             "k = 9.0 if 'BENCH' in os.environ else 1.5"))
    os.chmod(other, 0o755)
    os.remove(log)
    rc, out = run(base + ["--rounds", "1", "base=BENCH=%s" % other], env)
    check(rc == 0 and row(out, "base", 1).count("+50.0%") == 2,
          "a lever's own program (BENCH), 50%% slower, BENCH not in its environment:\n" + out)

    # each run's figures in its progress line; --deadline 0 starts no run
    check("round 1, base             ok: b1 step 0.7500 total 150.0; b8 step 0.7500 total 150.0" in out,
          "a run's progress line carries its figures:\n" + out)
    os.remove(log)
    rc, out = run(base + ["--deadline", "0", "late=FAKE_NAME=late"], env)
    check(rc == 1 and not os.path.exists(log), "nothing runs after the deadline, exit status 1 (%d)" % rc)
    check("failed: the deadline (0 s) came before round 1" in row(out, "late", 8), "the deadline named:\n" + out)

    for bad in (["nameonly"], ["x=NOVALUE"], ["default=A=1"], ["a=A=1", "a=B=2"], ["y=A=1,bad"]):
        rc, out = run(base + bad, env)
        check(rc == 2, "lever text %r refused with status 2, got %d: %s" % (bad, rc, out.strip()[-120:]))

if REAL and os.path.exists(REAL):
    tiny = os.path.join(ROOT, "tests", "data", "tiny", "hub")
    rc, out = run(["--bench", REAL, "--model", tiny, "--backend", "cpu", "--batches", "1", "--tokens", "4",
                   "--runs", "1", "--rounds", "1", "again=CT_LOG=error"])
    check(rc == 0 and row(out, "again", 1) != "" and row(out, "default", 1) != "",
          "one round on the CPU with the real program:\n" + out)

for f in failures:
    print("FAIL: " + f)
print("%d checks failed" % len(failures) if failures else "ok")
sys.exit(1 if failures else 0)
