"""Random full-size Cohere Transcribe checkpoint in the Hub layout, without torch (numpy only).

Takes the tiny fixture's Hub checkpoint (tests/data/tiny/hub in the project) as the template of
names, scales every shape to the released widths (encoder 48 x 1280, 8 heads, FF 5120, conv 9,
subsampling 256 channels; decoder 8 x 1024, 8 heads, inner 4096; vocab 16384) and writes random
bf16 values (normal * 0.02; norms 1/0; batch-norm var 1). For timing only.

usage: python3 bench/make_full_random.py tests/data/tiny/hub OUTDIR [--enc-layers 48] [--dec-layers 8] [--pin-token 1000]
"""
import json, os, re, struct, sys, argparse
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("tiny"); ap.add_argument("out")
ap.add_argument("--enc-layers", type=int, default=48)
ap.add_argument("--dec-layers", type=int, default=8)
ap.add_argument("--pin-token", type=int, default=-1, help="raise this token's output bias by 10, so greedy decoding emits it every step and never end-of-text (fixed token counts for timing)")
a = ap.parse_args()

f = open(os.path.join(a.tiny, "model.safetensors"), "rb")
n = struct.unpack("<Q", f.read(8))[0]
hdr = json.loads(f.read(n)); base = 8 + n
cfg = json.load(open(os.path.join(a.tiny, "config.json")))

E = {64: 1280, 256: 5120, 128: 2560, 32: 256, 512: 4096, 4: 8, 16: 160}
D = {64: 1024, 128: 4096}

def full_shape(k, s):
    if k.startswith("encoder."):
        if k.endswith("pos_bias_u") or k.endswith("pos_bias_v"):
            return [8, 160]
        if ".pre_encode.conv." in k:
            return [E.get(x, x) if i == 0 or (i == 1 and x == 32) else x for i, x in enumerate(s)]
        return [E.get(x, x) if x != 9 and x != 1 and x != 3 else x for x in s]
    if k.startswith("transf_decoder."):
        if k.endswith("pos_enc"):
            return [1024, 1024]
        if k.endswith("token_embedding.weight"):
            return [16384, 1024]
        return [D.get(x, x) for x in s]
    if k.startswith("encoder_decoder_proj"):
        return [1024, 1280] if len(s) == 2 else [1024]
    if k.startswith("log_softmax"):
        return [16384, 1024] if len(s) == 2 else [16384]
    return s

rng = np.random.default_rng(0)
def rand_bf16(shape, kind):
    cnt = int(np.prod(shape)) if shape else 1
    if kind == "one":
        x = np.ones(cnt, np.float32)
    elif kind == "zero":
        x = np.zeros(cnt, np.float32)
    else:
        x = (rng.standard_normal(cnt, dtype=np.float32) * 0.02)
    return (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()

names = []
for k, v in hdr.items():
    if k == "__metadata__":
        continue
    m = re.match(r"(encoder\.layers\.|transf_decoder\._decoder\.layers\.)(\d+)\.(.*)", k)
    if m:
        if m.group(2) != "0":
            continue
        nl = a.enc_layers if m.group(1).startswith("encoder") else a.dec_layers
        for i in range(nl):
            names.append((f"{m.group(1)}{i}.{m.group(3)}", k, v))
    else:
        names.append((k, k, v))

os.makedirs(a.out, exist_ok=True)
meta = {}; off = 0; plan = []
for name, src, v in names:
    if v["dtype"] == "I64":
        shape, nbytes = v["shape"], 8
    elif name.startswith("preprocessor."):
        shape = v["shape"]; nbytes = 2 * int(np.prod(shape))
    else:
        shape = full_shape(name, v["shape"]); nbytes = 2 * int(np.prod(shape))
    meta[name] = {"dtype": v["dtype"], "shape": shape, "data_offsets": [off, off + nbytes]}
    plan.append((name, src, v, shape, nbytes)); off += nbytes
hj = json.dumps(meta).encode(); hj += b" " * ((8 - len(hj) % 8) % 8)
with open(os.path.join(a.out, "model.safetensors"), "wb") as o:
    o.write(struct.pack("<Q", len(hj))); o.write(hj)
    for name, src, v, shape, nbytes in plan:
        if v["dtype"] == "I64":
            o.write(struct.pack("<q", 0)); continue
        if name.startswith("preprocessor."):
            s, e = v["data_offsets"]; f.seek(base + s); o.write(f.read(e - s)); continue
        last = name.rsplit(".", 1)[-1]
        is_norm = ("norm" in name and "batch_norm" not in name) or name.endswith("layer_norm.weight") or name.endswith("layer_norm.bias")
        if name.endswith("running_var"):
            kind = "one"
        elif name.endswith("running_mean"):
            kind = "zero"
        elif is_norm or "batch_norm" in name:
            kind = "one" if last == "weight" else "zero"
        else:
            kind = "rand"
        if name == "log_softmax.mlp.layer0.bias" and a.pin_token >= 0:
            b = np.frombuffer(rand_bf16(shape, kind), np.uint16).copy()
            b[a.pin_token] = 0x4120  # bf16 10.0
            o.write(b.tobytes()); continue
        o.write(rand_bf16(shape, kind))

c = cfg
c["encoder"].update(n_layers=a.enc_layers, d_model=1280, n_heads=8, ff_expansion_factor=4,
                    conv_kernel_size=9, subsampling_conv_channels=256)
c["transf_decoder"]["config_dict"].update(hidden_size=1024, num_layers=a.dec_layers,
                                          num_attention_heads=8, inner_size=4096)
json.dump(c, open(os.path.join(a.out, "config.json"), "w"), indent=1)
for extra in ("tokenizer.model", "generation_config.json"):
    p = os.path.join(a.tiny, extra)
    if os.path.exists(p):
        open(os.path.join(a.out, extra), "wb").write(open(p, "rb").read())
print(f"wrote {a.out}: {len(meta)} tensors, {off/1e9:.2f} GB")
