"""Proves common.Features equal to transformers' CohereAsrFeatureExtractor (dither 0) and to
the features of the engine's fixtures (tests/data/tiny/reference.safetensors, which our C
engine matches within 1e-4), on single clips and on a padded batch.

usage: python3 tools/train-demo/check_features.py
Not here: the engine itself (eval.py runs it on trained weights, the end-to-end check).
"""
import os
import sys

import numpy as np
import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Features, mel_filters, read_wav  # noqa: E402

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
tiny = os.path.join(root, "tests", "data", "tiny")
ref = load_file(os.path.join(tiny, "reference.safetensors"))
feat = Features()
worst = 0.0
print("mel filters vs fixture: max|d| = %.3g" % (mel_filters() - ref["mel_filters"].numpy()).__abs__().max())
wavs = {k: torch.from_numpy(read_wav(os.path.join(tiny, "audio", k + ".wav")).astype(np.float32) / 32768.0)
        for k in ("a", "b")}
for tag, names in (("a", ["a"]), ("b", ["b"]), ("ab", ["a", "b"])):
    ws = [wavs[n] for n in names]
    lens = torch.tensor([w.shape[0] for w in ws])
    x = torch.zeros(len(ws), int(lens.max()))
    for i, w in enumerate(ws):
        x[i, :w.shape[0]] = w
    f, m = feat(x, lens)
    d = float((f - ref[f"{tag}.features"]).abs().max())
    md = int((m.int() != ref[f"{tag}.features_mask"]).sum())
    worst = max(worst, d)
    print(f"{tag}: features {tuple(f.shape)} max|d| vs fixture = {d:.3g}, mask differences {md}")
    assert md == 0

from transformers import CohereAsrFeatureExtractor  # noqa: E402
fe = CohereAsrFeatureExtractor(dither=0.0)
rs = np.random.RandomState(0)
clips = [rs.randn(n).astype(np.float32) * 0.1 for n in (16000, 20480, 33333, 7001)]
out = fe(clips, sampling_rate=16000, return_tensors="pt", return_attention_mask=True)
lens = torch.tensor([len(c) for c in clips])
x = torch.zeros(len(clips), int(lens.max()))
for i, c in enumerate(clips):
    x[i, :len(c)] = torch.from_numpy(c)
f, m = feat(x, lens)
hf_f, hf_m = out["input_features"], out["attention_mask"].bool()
assert f.shape == hf_f.shape, (f.shape, hf_f.shape)
d = float((f - hf_f).abs().max())
print(f"vs transformers' extractor, batch of 4 padded clips: max|d| = {d:.3g}, mask differences "
      f"{int((m != hf_m).sum())}")
assert (m == hf_m).all()
worst = max(worst, d)
assert worst < 1e-4, worst
print("features OK (within 1e-4)")
