"""Weight averaging of exported demo models (a "model soup"): OUT = sum of w_i x MODEL_i.

Why: two fine-tunings from one ancestor sit in one basin, and a weighted mean of their
weights transcribes better than either (2026-12-03: the model then shipped, of run 2 and run 4's
fine-tune of it, 0.8 / 0.2, chosen on a validation set of other sentences, `data.py --seed 2
--heldout 300`: 12.34% and 12.60% alone, 10.84% averaged; on the 200 test clips 9.97%).
Every floating tensor is averaged, BatchNorm's running statistics too (an approximation:
they are not recomputed); integer tensors and config.json, generation_config.json and
tokenizer.model come from the first model. The models must share architecture and tokenizer.

usage: python3 average.py OUT MODEL_A WEIGHT_A MODEL_B WEIGHT_B [MODEL WEIGHT ...]
Not here: choosing the weights (eval.py on a validation set, never on the test clips).
"""
import json
import os
import shutil
import sys

from safetensors.torch import load_file, save_file


def main():
    if len(sys.argv) < 6 or len(sys.argv) % 2:
        raise SystemExit(__doc__.split("usage: ")[1].split("\n")[0])
    out = sys.argv[1]
    pairs = [(sys.argv[i], float(sys.argv[i + 1])) for i in range(2, len(sys.argv), 2)]
    if abs(sum(w for _, w in pairs) - 1.0) > 1e-6:
        raise SystemExit(f"the weights sum to {sum(w for _, w in pairs)}, not 1")
    first = pairs[0][0]
    cfg = json.load(open(os.path.join(first, "config.json")))
    models = []
    tok = open(os.path.join(first, "tokenizer.model"), "rb").read()
    for m, w in pairs:
        if json.load(open(os.path.join(m, "config.json"))) != cfg:
            raise SystemExit(f"{m}: config.json differs from {first}'s")
        if open(os.path.join(m, "tokenizer.model"), "rb").read() != tok:
            raise SystemExit(f"{m}: tokenizer.model differs from {first}'s (its weights mean other pieces)")
        models.append((load_file(os.path.join(m, "model.safetensors")), w, m))
    a = models[0][0]
    for t, _, m in models[1:]:
        if t.keys() != a.keys() or any(t[k].shape != a[k].shape for k in a):
            raise SystemExit(f"{m}: its tensors differ from {first}'s")
    soup = {k: sum(w * t[k].float() for t, w, _ in models).to(a[k].dtype) if a[k].is_floating_point() else a[k]
            for k in a}
    os.makedirs(out, exist_ok=True)
    save_file(soup, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    for f in ("config.json", "generation_config.json", "tokenizer.model"):
        shutil.copy(os.path.join(first, f), out)
    print(f"{out}: {len(soup)} tensors, " + " + ".join(f"{w:g} x {m}" for m, w in pairs))


if __name__ == "__main__":
    main()
