"""Where a model's word errors are: eval.py's transcripts grouped by how each clip was made.

data.py writes into each held-out clip's voice string what it drew (accent+variant, speed,
and since 2026-12-03 the reverberation time and the noise's SNR: "... rt0.21 snr23"); this
groups the clips by each of those and prints the WER with punctuation and casing normalised
away (so that a group's figure is about words), the words it holds, and how many of the
questions came back as questions. Why: one WER over 200 clips says how good a model is, not
what to change in the data or the training; the groups do (2026-12-03: reverberation
doubled the errors, and no question came back as one).

usage: python3 breakdown.py --json .demo/eval.json [--system engine|transformers]
       (--json is eval.py's output; the clips' heldout.tsv is found beside their files)
Not here: the transcription (eval.py), choosing a model (validation clips, eval.py).
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import wer  # noqa: E402


def groups(voice):
    """The groups a clip belongs to, from its voice string."""
    f = voice.split()
    acc, _, var = f[0].partition("+")
    out = [f"accent {acc}", f"variant {var or 'none'}"]
    for x in f[1:]:
        if x.startswith("s") and x[1:].isdigit():
            out.append("speed > 180 wpm" if int(x[1:]) > 180 else "speed <= 180 wpm")
        elif x.startswith("rt"):
            out.append("reverb none" if x == "rt-" else "reverb RT60 < 0.2 s" if float(x[2:]) < 0.2
                       else "reverb RT60 >= 0.2 s")
        elif x.startswith("snr"):
            out.append("noise none" if x == "snr-" else f"noise SNR {min(36, int(x[3:]) // 6 * 6)}+ dB")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True, help="eval.py --json output")
    ap.add_argument("--system", default="engine", choices=["engine", "transformers"])
    a = ap.parse_args()
    d = json.load(open(a.json))
    refs, hyps = d["refs"], d["hyps"].get(a.system)
    if not hyps:
        raise SystemExit(f"{a.json}: no transcripts of {a.system}")
    voices = {}
    for folder in sorted({os.path.dirname(os.path.dirname(f)) for f in d["files"]}):
        tsv = os.path.join(folder, "heldout.tsv")
        if not os.path.exists(tsv):
            raise SystemExit(f"{tsv}: missing (breakdown.py reads the clips' voices from it)")
        for k, line in enumerate(open(tsv, encoding="utf-8"), 1):
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 3:
                raise SystemExit(f"{tsv}:{k}: {len(cols)} columns, not 3 (file, text, voice)")
            voices[os.path.join(folder, cols[0])] = cols[2]
    by = collections.defaultdict(list)
    for f, r, h in zip(d["files"], refs, hyps):
        if f not in voices:
            raise SystemExit(f"{f}: not in its folder's heldout.tsv")
        for g in ["all"] + groups(voices[f]):
            by[g].append((r, h))
    if not any(k.startswith("noise") for k in by):
        print("(these clips' heldout.tsv has no rt/snr fields: data.py made them before 2026-12-03; "
              "run it again with the same seed into a new folder, without --keep: the audio is the same)")
    print(f"{'group':24s} {'clips':>5s} {'words':>6s} {'WER norm %':>10s}")
    for g in sorted(by):
        rs, hs = zip(*by[g])
        print(f"{g:24s} {len(rs):5d} {sum(len(r.split()) for r in rs):6d} {wer(list(rs), list(hs), norm=True):10.1f}")
    q = [(r, h) for r, h in zip(refs, hyps) if r.endswith("?")]
    false_q = sum(h.endswith("?") and not r.endswith("?") for r, h in zip(refs, hyps))
    print(f"questions: {sum(h.endswith('?') for _, h in q)} of {len(q)} came back as questions; "
          f"{false_q} statements came back as questions")


if __name__ == "__main__":
    main()
