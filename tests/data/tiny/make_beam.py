"""Beam-search references for the tiny fixture model: what transformers' generate chooses
with num_beams = K (do_sample False, length_penalty 1, early_stopping False: its defaults)
on the fixture features of `a`, `b` and the padded batch `ab`, in float32 on the CPU.
Writes beam.safetensors beside this script: for each case "X.kK", "X.kK.sequences" (I32
[B, cols], prompt included) and "X.kK.scores" (F32 [B], each hypothesis' summed
log-probability over its generated length: sequences_scores). tests/model/test_beam.c
compares our beam search with them.

usage: python3 tests/data/tiny/make_beam.py        (transformers, torch, safetensors)
"""
import json
import os

import torch
from safetensors.torch import load_file, save_file
from transformers import CohereAsrForConditionalGeneration

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_NEW = 24

meta = json.load(open(os.path.join(HERE, "reference.json")))
ref = load_file(os.path.join(HERE, "reference.safetensors"))
prompt = meta["prompt_en_pnc"]
model = CohereAsrForConditionalGeneration.from_pretrained(os.path.join(HERE, "hf"), dtype=torch.float32).eval()
out = {}
with torch.no_grad():
    for tag in ("a", "b", "ab"):
        f = ref[f"{tag}.features"]
        am = ref[f"{tag}.features_mask"].long()
        for k in (2, 4):
            g = model.generate(input_features=f, attention_mask=am,
                               decoder_input_ids=torch.tensor([prompt] * f.shape[0]),
                               max_new_tokens=MAX_NEW, do_sample=False, num_beams=k,
                               output_scores=True, return_dict_in_generate=True)
            out[f"{tag}.k{k}.sequences"] = g.sequences.to(torch.int32).contiguous()
            out[f"{tag}.k{k}.scores"] = g.sequences_scores.to(torch.float32).contiguous()
            print(tag, k, g.sequences.tolist(), g.sequences_scores.tolist())
save_file(out, os.path.join(HERE, "beam.safetensors"),
          metadata={"transformers": __import__("transformers").__version__, "max_new_tokens": str(MAX_NEW)})
