"""Word error rates of our C engine and of transformers on the same held-out clips.

Both run the exported folder (export.py): our engine as a user runs it
(`cohere-transcribe --model FOLDER --text-only --device cpu --vad none`; `--vad none` is the
model's own chunking, one chunk for clips of at most 30 s, which is what transformers
sees), transformers through export.load_hf in float32 on the CPU with common.Features and
greedy generate from the standard prompt. Reported for each: WER (%), WER with punctuation
and casing normalised away, exact matches; and how many clips the two transcribed
identically (the end-to-end parity check: the same weights must give the same words).

usage: python3 eval.py --model models/cohere-demo-en --data .demo/data [--n 200]
         [--engine build/cohere-transcribe] [--json out.json] [--no-hf | --no-engine]
       --data is a folder with heldout.tsv (file, text, voice); --train-npz FILE --n 50 evaluates
       the first clips of a training shard instead (written to a temporary folder as WAV).
Not here: training-time evaluation (train.py prints its own on a subset).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Features, prompt_ids, read_wav, wer, write_wav  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def run_engine(exe, model, files, threads, max_new=96, beams=1):
    cmd = [exe, "--model", model, "--text-only", "--device", "cpu", "--vad", "none", "--quiet",
           "--max-new-tokens", str(max_new), "--max-retry-tokens", "0", "--beam-size", str(beams),
           "--threads", str(threads), "--"] + files
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:8])} ... failed ({p.returncode}):\n{p.stderr}")
    lines = p.stdout.splitlines()
    if len(files) == 1:
        return [p.stdout.strip()], time.time() - t0
    out = {}
    for line in lines:
        f, _, text = line.partition(": ")
        out[f] = text.strip()
    missing = [f for f in files if f not in out]
    if missing:
        raise SystemExit(f"engine output has no line for {missing[:3]}:\n{p.stdout[:2000]}")
    return [out[f] for f in files], time.time() - t0


def run_hf(folder, files, batch=16, max_new=96, beams=1):
    import sentencepiece as spm
    from export import load_hf
    model = load_hf(folder)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
    prompt = prompt_ids(sp)
    feats = Features()
    hyps = []
    t0 = time.time()
    with torch.no_grad():
        for s in range(0, len(files), batch):
            ws = [read_wav(f).astype(np.float32) / 32768.0 for f in files[s: s + batch]]
            lens = torch.tensor([len(w) for w in ws])
            x = torch.zeros(len(ws), int(lens.max()))
            for j, w in enumerate(ws):
                x[j, : len(w)] = torch.from_numpy(w)
            f, m = feats(x, lens)
            g = model.generate(input_features=f, attention_mask=m.long(),
                               decoder_input_ids=torch.tensor([prompt] * len(ws)), max_new_tokens=max_new,
                               do_sample=False, num_beams=beams)
            for row in g.tolist():
                ids = row[len(prompt):]
                if 3 in ids:
                    ids = ids[: ids.index(3)]
                hyps.append(sp.decode([i for i in ids if i != 2]).strip())
    return hyps, time.time() - t0


def summary(refs, hyps):
    return dict(wer=round(wer(refs, hyps), 2), wer_normalised=round(wer(refs, hyps, norm=True), 2),
                exact=sum(r == h for r, h in zip(refs, hyps)), n=len(refs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", default=None)
    ap.add_argument("--train-npz", default=None)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--engine", default=os.path.join(HERE, "..", "..", "build", "cohere-transcribe"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--show", type=int, default=5, help="print this many clips where a system erred")
    ap.add_argument("--beams", type=int, default=1, help="beam width of both systems (1: greedy)")
    ap.add_argument("--no-hf", action="store_true")
    ap.add_argument("--no-engine", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    tmp = None
    if a.train_npz:
        z = np.load(a.train_npz)
        tmp = tempfile.mkdtemp(prefix="ct-eval-")
        files, refs = [], []
        for i in range(min(a.n, len(z["texts"]))):
            f = os.path.join(tmp, f"{i:04d}.wav")
            write_wav(f, z["audio"][z["offsets"][i]: z["offsets"][i + 1]])
            files.append(f)
            refs.append(str(z["texts"][i]))
    else:
        rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(a.data, "heldout.tsv"), encoding="utf-8")]
        rows = rows[: a.n]
        files = [os.path.abspath(os.path.join(a.data, r[0])) for r in rows]
        refs = [r[1] for r in rows]

    res = {"clips": len(files)}
    hyp = {}
    if not a.no_engine:
        hyp["engine"], t = run_engine(os.path.abspath(a.engine), a.model, files, a.threads, beams=a.beams)
        res["engine"] = summary(refs, hyp["engine"]) | {"seconds": round(t, 1)}
    if not a.no_hf:
        hyp["transformers"], t = run_hf(a.model, files, beams=a.beams)
        res["transformers"] = summary(refs, hyp["transformers"]) | {"seconds": round(t, 1)}
    if len(hyp) == 2:
        res["identical_transcripts"] = sum(x == y for x, y in zip(hyp["engine"], hyp["transformers"]))
    shown = 0
    for i, r in enumerate(refs):
        if shown < a.show and any(h[i] != r for h in hyp.values()):
            print(f"[{os.path.basename(files[i])}] ref: {r}")
            for k, h in hyp.items():
                print(f"   {k:>12}: {h[i]}")
            shown += 1
    print(json.dumps(res, indent=1))
    if a.json:
        json.dump(res | {"refs": refs, "hyps": hyp, "files": files}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
