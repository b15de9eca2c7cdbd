#!/usr/bin/env python3
"""levers.py: each lever against the default in the same call, interleaved.

A lever is a switch (an environment variable) that turns one change off or
on. Its effect is only read where the default runs beside it on the same
machine, in turn, more than once: the encoder column alone moves 5-15 ms
between runs of one tree (bench/README.md), so a lever measured in another
call, or after all the default's runs, says little. This runs
bench-transcribe_batch (the engine through its public API, as
bench/gpu-vs-transformers.sh does) once per lever per round, the default
first in every round, and prints one table: each lever's ms per decoder
step, total, encoder and decoder, the median over the rounds of each
round's medians, and its step and total against the default's.

Usage (repository root):
  bench/levers.py --bench build-gpu/bench-transcribe_batch --model DIR
      [--backend cuda] [--batches 1,8] [--tokens 128] [--runs 3]
      [--rounds 2] [--timeout 120] [--deadline S] [--json FILE] NAME=VAR=VALUE[,VAR=VALUE] ...
e.g. `wide_off=CT_CUDA_ATTN_DECODE_WIDE=0 mvm64=CT_CUDA_MATVEC_MMA_MAX=64 loop=CT_CUDA_MATVEC_LOOP=1`.
The variable BENCH is not put in the environment: it names another build's
bench-transcribe_batch to run for that lever (`base=BENCH=build-base/bench-
transcribe_batch`: the tree before a change that has no switch, beside it;
a path without commas, which separate a lever's variables).
Each run's progress line carries its step and total ms, so a call cut off
still leaves its figures. --deadline S starts no run once S seconds have
passed since the start, and prints the table of the rounds done (a device
call has a hard end; a run killed there would lose every round).
Exit status 0 when every run gave its rows, 1 when any failed or the
deadline left runs out (the table says which), 2 for bad arguments.

Not here: transformers (gpu-vs-transformers.sh), floors and targets
(gpu_summary.py). tests/py/test_levers.py checks it with a stand-in
benchmark program, without a GPU.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

FIELDS = ("step_ms", "total_ms", "encoder_ms", "decoder_ms")


def parse_lever(text):
    """NAME=VAR=VALUE[,VAR=VALUE...] -> (name, {VAR: VALUE}); ValueError on bad text."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest or name == "default":
        raise ValueError("lever '%s': want NAME=VAR=VALUE[,VAR=VALUE] (NAME not 'default')" % text)
    env = {}
    for part in rest.split(","):
        var, sep, value = part.partition("=")
        if not sep or not var or not var.replace("_", "").isalnum():
            raise ValueError("lever '%s': '%s' is not VAR=VALUE" % (text, part))
        env[var] = value
    return name, env


def run_once(a, env_extra):
    """One bench-transcribe_batch process; its JSON rows by batch, or an error string."""
    env = dict(os.environ)
    env.setdefault("CT_LOG", "warn")
    env_extra = dict(env_extra)
    bench = env_extra.pop("BENCH", a.bench)
    env.update(env_extra)
    cmd = [bench, "--model", a.model, "--backend", a.backend, "--batches", a.batches, "--tokens", str(a.tokens),
           "--runs", str(a.runs)]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % a.timeout
    except OSError as e:
        return None, "cannot run %s: %s" % (bench, e)
    rows = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            try:
                r = json.loads(line)
                rows[int(r["batch"])] = r
            except (ValueError, KeyError, TypeError):
                return None, "a row it printed is not JSON: %s" % line[:80]
    if p.returncode != 0 or not rows:
        err = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return None, "exit status %d: %s" % (p.returncode, err[:160])
    return rows, None


def main(argv=None):
    ap = argparse.ArgumentParser(description="each lever against the default, interleaved, in one call")
    ap.add_argument("--bench", required=True, help="bench-transcribe_batch")
    ap.add_argument("--model", required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--deadline", type=float, help="start no run after this many seconds")
    ap.add_argument("--json", help="write every run's rows here")
    ap.add_argument("levers", nargs="+", help="NAME=VAR=VALUE[,VAR=VALUE]")
    a = ap.parse_args(argv)
    try:
        levers = [("default", {})] + [parse_lever(t) for t in a.levers]
        batches = [int(b) for b in a.batches.split(",")]
    except ValueError as e:
        print("levers.py: %s" % e, file=sys.stderr)
        return 2
    if len({n for n, _ in levers}) != len(levers) or a.rounds < 1 or a.runs < 1 or not batches:
        print("levers.py: lever names must differ; --rounds, --runs and --batches want at least one", file=sys.stderr)
        return 2

    got = {n: {b: [] for b in batches} for n, _ in levers}  # per lever, batch: one row a round
    failed = {}
    t0 = time.monotonic()
    for rnd in range(a.rounds):
        for name, env in levers:
            if a.deadline is not None and time.monotonic() - t0 >= a.deadline:
                failed.setdefault(name, "the deadline (%g s) came before round %d" % (a.deadline, rnd + 1))
                continue
            rows, err = run_once(a, env)
            figs = "; ".join("b%d step %.4f total %.1f" % (b, rows[b].get("step_ms", float("nan")),
                                                         rows[b].get("total_ms", float("nan")))
                             for b in batches if not err and b in rows)
            print("round %d, %-16s %s" % (rnd + 1, name, err or "ok: " + figs), flush=True)
            if err:
                failed.setdefault(name, err)
                continue
            for b in batches:
                if b in rows:
                    got[name][b].append(rows[b])
                else:
                    failed.setdefault(name, "no row for batch %d" % b)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({n: {str(b): v for b, v in per.items()} for n, per in got.items()}, f, indent=1)

    def med(rows, key):
        vals = [r[key] for r in rows if key in r]
        return statistics.median(vals) if vals else None

    print()
    print("%-16s %-34s %5s | %-20s %8s %9s | %9s %9s %9s %9s" % (
        "lever", "environment", "batch", "step ms, each round", "step", "vs def", "total ms", "vs def", "encoder",
        "decoder"))
    for name, env in levers:
        envs = ",".join("%s=%s" % kv for kv in env.items()) or "-"
        for b in batches:
            rows = got[name][b]
            if not rows:
                print("%-16s %-34s %5d | %s" % (name, envs[:34], b, "failed: " + failed.get(name, "no rows")))
                continue
            step, total = med(rows, "step_ms"), med(rows, "total_ms")
            d_step, d_total = med(got["default"][b], "step_ms"), med(got["default"][b], "total_ms")
            rel = lambda x, d: "-" if name == "default" or x is None or not d else "%+.1f%%" % (100.0 * (x / d - 1))
            print("%-16s %-34s %5d | %-20s %8.4f %9s | %9.1f %9s %9.1f %9.1f" % (
                name, envs[:34], b, " ".join("%.4f" % r["step_ms"] for r in rows), step, rel(step, d_step), total,
                rel(total, d_total), med(rows, "encoder_ms"), med(rows, "decoder_ms")))
    print("medians over %d round(s) of bench-transcribe_batch's medians of %d run(s); the default runs first in "
          "every round; %d new tokens per clip" % (a.rounds, a.runs, a.tokens))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
