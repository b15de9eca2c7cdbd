#!/usr/bin/env python3
"""floors.py: the least time the model's work can take on a card, stage by
stage, from the FLOPs and bytes that work cannot avoid and two rates measured
on that card (bench-cuda_ceilings: the BF16 product rate and the copy rate).

Why it is shaped this way: issue 9 asks, for a speed target not met, for the
measured floor: FLOPs and bytes over the ceilings measured in the same run.
bench/gpu-vs-transformers.sh imports this module to print that floor beside
each measured row; run alone it prints one batch's breakdown.

The counts follow ../shared/cohere-asr-spec.md and are taken from config.json
alone (parameter counts are checked against the spec's section 6.3 by
--self-test, and against the checkpoint's safetensors header where one is
given). A stage's floor is max(FLOPs / product rate, bytes / copy rate): the
work at the tensor cores' rate or the bytes at the copy rate, whichever is
longer. Each count is the least the model needs, not what an engine does:
- the encoder: every product at its shapes, the attention's three T x T
  terms (AC, BD after the rel shift: T dot products a row, AV), the rel-pos
  projection over 2T-1 positions once a batch (the table is the same for
  every clip of a length), the subsampling's convolutions; bytes: its weights
  once, the features in, the encoder states out (BF16);
- the decoder: the cross K/V projections once, a prefill over the prompt,
  then one step per new token after the first (the first comes from the
  prefill); a step reads every decoder weight but the cross K/V projections
  and the token table (it reads B rows of that), and every cached K and V
  row of self- and cross-attention (BF16);
- the frontend: a real FFT of 512 and the sparse filter bank a frame; bytes:
  the samples in and the features out.
Left out, which only makes the floor lower than the truth: activations
between layers (as if they stayed on chip), norms, softmax and elementwise
work, launch and synchronisation costs, the host. Kept, which makes it a
little higher than a strict bound (a few percent at most, the largest at
batch 1): a step's K/V caches charged at the memory rate though at batch 1
they would fit in the L2 (~15 MB), biases and norm weights counted as
product FLOPs, and the memory rate a copy's (read plus write), which a
read-only stream can beat slightly.
"""
import argparse
import json
import math
import os
import struct
import sys

PROMPT = 10                       # spec 5.2: [13764, 7, 4, 16, L, L, 5|6, 9, 11, 13]
SAMPLE_RATE, HOP, N_FFT = 16000, 160, 512
KV_BYTES = 2                      # K/V caches and encoder states in BF16
WEIGHT_BYTES = 2                  # the checkpoint's BF16


def load_config(path):
    """The model's config: a checkpoint folder or a config.json path."""
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path) as f:
        c = json.load(f)
    try:
        e, d = c["encoder"], c["transf_decoder"]["config_dict"]
        return {
            "feat": e["feat_in"], "enc_layers": e["n_layers"], "enc_d": e["d_model"],
            "enc_ff": e["d_model"] * e["ff_expansion_factor"], "conv_k": e["conv_kernel_size"],
            "sub_c": e["subsampling_conv_channels"], "sub_factor": e["subsampling_factor"],
            "dec_layers": d["num_layers"], "dec_d": d["hidden_size"], "dec_ff": d["inner_size"],
            "dec_ctx": d["max_sequence_length"], "vocab": c["vocab_size"],
        }
    except KeyError as k:
        raise SystemExit("floors: %s: no %s in the config" % (path, k))


def mel_frames(seconds):
    return int(seconds * SAMPLE_RATE) // HOP + 1


def sub_lengths(t, stages):
    """spec 2.1: each stride-2 stage maps L to floor((L - 1) / 2) + 1."""
    out = []
    for _ in range(stages):
        t = (t - 1) // 2 + 1
        out.append(t)
    return out


def params(c):
    """Parameter counts by part, from the config (spec 6.3's table)."""
    d, ff, k, ch = c["enc_d"], c["enc_ff"], c["conv_k"], c["sub_c"]
    stages = int(round(math.log2(c["sub_factor"])))
    feat_out = sub_lengths(c["feat"], stages)[-1]
    sub = (ch * 9 + ch)                                   # conv 0: 1 -> ch, 3x3
    sub += (stages - 1) * ((ch * 9 + ch) + (ch * ch + ch))  # depthwise 3x3 + pointwise
    sub += ch * feat_out * d + d                          # the linear to d
    layer = 2 * (d * ff + ff + ff * d + d)                # two feed-forwards
    layer += 4 * (d * d + d) + d * d + 2 * d              # q, k, v, out; pos (no bias); u, v biases
    layer += (d * 2 * d + 2 * d) + (d * k + d) + (d * d + d) + 2 * d  # conv module + batch norm's scale, shift
    layer += 5 * 2 * d                                    # five layer norms
    D, F, V = c["dec_d"], c["dec_ff"], c["vocab"]
    dec_layer = 8 * (D * D + D) + (D * F + F + F * D + D) + 3 * 2 * D
    dec_cross_kv = 2 * (D * D + D)                        # read once a clip, not a step
    dec_rest = V * D + 2 * D + d * D + D + V * D + V + 2 * D  # tokens, emb norm, enc->dec proj, head, final norm
    return {
        "sub": sub, "enc_layer": layer, "encoder": sub + c["enc_layers"] * layer,
        "dec_layer": dec_layer, "dec_cross_kv": dec_cross_kv,
        "decoder": c["dec_layers"] * dec_layer + dec_rest,
    }


def cost(c, batch, seconds=35.0, tokens=128):
    """FLOPs and bytes each stage cannot avoid for `batch` clips of `seconds`
    with `tokens` new tokens each: {stage: {"flops", "bytes"}}."""
    B, d, ff, ch = batch, c["enc_d"], c["enc_ff"], c["sub_c"]
    stages = int(round(math.log2(c["sub_factor"])))
    t0 = mel_frames(seconds)
    ts = sub_lengths(t0, stages)
    fs = sub_lengths(c["feat"], stages)
    T = ts[-1]
    p = params(c)

    # frontend: a real FFT (~2.5 N log2 N), power, ~2 filters a bin
    fl_front = B * t0 * (2.5 * N_FFT * math.log2(N_FFT) + 3 * (N_FFT // 2 + 1) + 4 * (N_FFT // 2 + 1))
    by_front = B * (int(seconds * SAMPLE_RATE) * 4 + t0 * c["feat"] * 4)

    # encoder
    fl = 2 * 9 * ch * ts[0] * fs[0]                                   # conv 0
    for i in range(1, stages):
        fl += 2 * 9 * ch * ts[i] * fs[i] + 2 * ch * ch * ts[i] * fs[i]  # depthwise + pointwise
    fl += 2 * ch * fs[-1] * d * T                                     # the linear to d
    per_frame = 2 * (2 * d * ff + 2 * ff * d) + 2 * 4 * d * d          # feed-forwards, q k v out
    per_frame += 2 * (d * 2 * d + d * d) + 2 * d * c["conv_k"]         # conv module
    layer = per_frame * T + 3 * 2 * T * T * d                          # + AC, BD, AV
    fl_enc = B * (fl + c["enc_layers"] * layer) + c["enc_layers"] * 2 * (2 * T - 1) * d * d
    fl_enc += B * 2 * d * c["dec_d"] * T                               # the encoder -> decoder projection
    by_enc = (p["encoder"] + d * c["dec_d"] + c["dec_d"]) * WEIGHT_BYTES
    by_enc += B * (t0 * c["feat"] * 4 + T * c["dec_d"] * KV_BYTES)

    # decoder
    D, L, V = c["dec_d"], c["dec_layers"], c["vocab"]
    step_weights = L * (p["dec_layer"] - p["dec_cross_kv"]) + V * D + V + 2 * D + 2 * D
    fl_dec = B * L * 2 * 2 * D * D * T                                 # cross K and V, once
    by_dec = L * p["dec_cross_kv"] * WEIGHT_BYTES + B * L * T * D * 2 * KV_BYTES
    # the prefill: P rows a clip through the layers, causal attention, and
    # the head for the last row only (its logits give the first token)
    head = V * D + V
    fl_dec += B * (PROMPT * 2 * (step_weights - head) + 2 * head +
                   L * 2 * 2 * D * (PROMPT * (PROMPT + 1) // 2 + PROMPT * T))
    by_dec += step_weights * WEIGHT_BYTES + B * L * T * D * 2 * KV_BYTES
    steps = []
    for s in range(1, tokens):
        keys = PROMPT + s                                              # self-attention's keys this step
        f = B * (2 * step_weights + L * 2 * 2 * D * (keys + T))
        b = step_weights * WEIGHT_BYTES + B * (L * (keys + T) * D * 2 * KV_BYTES + 2 * D * WEIGHT_BYTES)
        steps.append((f, b))
    return {"frontend": {"flops": fl_front, "bytes": by_front},
            "encoder": {"flops": fl_enc, "bytes": by_enc},
            "decoder": {"flops": fl_dec, "bytes": by_dec, "steps": steps},
            "frames": {"mel": t0, "encoder": T}}


def floors(c, batch, product_flops, copy_bytes, seconds=35.0, tokens=128):
    """The floor of each stage in ms for rates in FLOP/s and bytes/s, with
    the counts: {"frontend_ms", "encoder_ms", "decoder_ms", "step_ms",
    "total_ms", "rtfx", "cost"}."""
    k = cost(c, batch, seconds, tokens)

    def ms(f, b):
        return 1e3 * max(f / product_flops, b / copy_bytes)
    front = ms(k["frontend"]["flops"], k["frontend"]["bytes"])
    enc = ms(k["encoder"]["flops"], k["encoder"]["bytes"])
    steps = [ms(f, b) for f, b in k["decoder"]["steps"]]
    dec = ms(k["decoder"]["flops"], k["decoder"]["bytes"]) + sum(steps)
    total = front + enc + dec
    return {"frontend_ms": front, "encoder_ms": enc, "decoder_ms": dec,
            "step_ms": sum(steps) / len(steps) if steps else 0.0,
            "total_ms": total, "rtfx": batch * seconds / (total * 1e-3), "cost": k}


def header_params(folder):
    """Parameters in a checkpoint's safetensors header by part, or None where
    the folder has none: {"encoder", "decoder"}."""
    path = os.path.join(folder, "model.safetensors")
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    enc = dec = 0
    for name, t in h.items():
        # not parameters: the feature extractor's tables, the batch norms'
        # running statistics, the decoder's sinusoidal position table
        if (name == "__metadata__" or name.startswith("preprocessor.") or ".running_" in name or
                name.endswith("num_batches_tracked") or name.endswith("position_embedding.pos_enc")):
            continue
        count = math.prod(t["shape"])
        if name.startswith("encoder."):
            enc += count
        else:
            dec += count
    return {"encoder": enc, "decoder": dec}


def self_test(config_path):
    """The parameter counts of the released size against the spec's 6.3 and
    the encoder's FLOPs against a count written out by hand; exits 1 on a
    mismatch."""
    c = load_config(config_path)
    p = params(c)
    bad = []
    # spec 6.3: encoder 1,895,339,264; decoder incl. embeddings, norms, proj
    # and head bias 152,482,816, plus the head weight stored apart
    # (16,777,216); per layer 39,374,080 / 16,796,672.
    for what, got, want in (("encoder layer", p["enc_layer"], 39374080), ("encoder", p["encoder"], 1895339264),
                            ("decoder layer", p["dec_layer"], 16796672),
                            ("decoder with the head", p["decoder"], 152482816 + 16777216)):
        if got != want:
            bad.append("%s: %d parameters, the spec says %d" % (what, got, want))
    # By hand, one 35 s clip (3501 mel frames; 1751 x 64, 876 x 32, 438 x 16
    # after the stride-2 convs; T = 438): a layer's products are
    # 2 x 37,694,720 FLOPs a frame (feed-forwards 26,214,400 MACs, q k v out
    # 6,553,600, pointwise convs 4,915,200, depthwise 11,520), attention
    # 3 x 2 x 438^2 x 1280, the rel-pos table 2 x 875 x 1280^2.
    T = 438
    layer = 2 * 37694720 * T + 6 * T * T * 1280 + 2 * 875 * 1280 * 1280
    sub = 2 * 9 * 256 * (1751 * 64 + 876 * 32 + 438 * 16) + 2 * 256 * 256 * (876 * 32 + 438 * 16)
    sub += 2 * 4096 * 1280 * T
    want = 48 * layer + sub + 2 * 1280 * 1024 * T
    got = cost(c, 1)["encoder"]["flops"]
    if got != want:
        bad.append("encoder FLOPs at batch 1: %d, by hand %d" % (got, want))
    if cost(c, 1)["frames"]["encoder"] != T:
        bad.append("encoder frames of 35 s: %d, the spec says 438" % cost(c, 1)["frames"]["encoder"])
    # A floor grows with the batch and never falls below either rate's share.
    f1, f64 = floors(c, 1, 790e12, 4.3e12), floors(c, 64, 790e12, 4.3e12)
    if not (0 < f1["total_ms"] < f64["total_ms"] and f1["rtfx"] < f64["rtfx"]):
        bad.append("floors do not grow with the batch: %s / %s" % (f1["total_ms"], f64["total_ms"]))
    # A batch-1 step by hand: it reads 134,377,472 BF16 parameters (8 layers
    # of 16,796,672 less their cross K/V projections' 2 x 1,049,600, the
    # 16384 x 1024 head, its bias, the final and embedding norms), 2 table
    # rows, and the caches: 8 layers x (10 + s + 438) keys x 1024 x K and V
    # x 2 bytes at step s = 1 .. 127; memory-bound at 4.3 TB/s.
    kv = sum(8 * (10 + s + 438) * 1024 * 2 * 2 for s in range(1, 128)) / 127
    want_step = 1e3 * (134377472 * 2 + kv + 2 * 1024 * 2) / 4.3e12
    if abs(f1["step_ms"] - want_step) > 1e-9 * want_step:
        bad.append("a batch-1 step's floor %.6f ms, by hand %.6f" % (f1["step_ms"], want_step))
    for b in bad:
        print("floors self-test: " + b)
    print("floors self-test: %s (encoder %.1f TFLOP at batch 64; floors at 790 TFLOP/s and 4.3 TB/s: "
          "batch 1 %.1f ms, step %.3f ms; batch 64 %.1f ms, RTFx %.0f)" % (
              "failed" if bad else "passed", cost(c, 64)["encoder"]["flops"] / 1e12, f1["total_ms"],
              f1["step_ms"], f64["total_ms"], f64["rtfx"]))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description="the model's floor on a card, stage by stage")
    ap.add_argument("model", help="a checkpoint folder or a config.json")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=35.0)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--product-tflops", type=float, default=790.0, help="BF16 product rate (bench-cuda_ceilings)")
    ap.add_argument("--copy-tbs", type=float, default=4.3, help="copy rate, read + write (bench-cuda_ceilings)")
    ap.add_argument("--self-test", action="store_true", help="check the counts against the spec (released size)")
    a = ap.parse_args()
    if not os.path.exists(a.model):
        raise SystemExit("floors: %s: no such file or folder" % a.model)
    if a.self_test:
        return self_test(a.model)
    if a.batch < 1 or a.tokens < 1 or a.seconds <= 0 or a.product_tflops <= 0 or a.copy_tbs <= 0:
        raise SystemExit("floors: --batch, --tokens, --seconds and both rates must be positive")
    c = load_config(a.model)
    if os.path.isdir(a.model):
        h = header_params(a.model)
        p = params(c)
        if h and (h["encoder"] != p["encoder"] or h["decoder"] != p["decoder"]):
            print("floors: warning: %s holds %d + %d parameters, the config's count is %d + %d" % (
                a.model, h["encoder"], h["decoder"], p["encoder"], p["decoder"]), file=sys.stderr)
    f = floors(c, a.batch, a.product_tflops * 1e12, a.copy_tbs * 1e12, a.seconds, a.tokens)
    k = f["cost"]
    print("batch %d, %.0f s clips, %d new tokens, at %.0f TFLOP/s and %.2f TB/s:" % (
        a.batch, a.seconds, a.tokens, a.product_tflops, a.copy_tbs))
    for s in ("frontend", "encoder", "decoder"):
        print("  %-8s %9.3f ms  (%.3f TFLOP, %.3f GB)" % (s, f[s + "_ms"], k[s]["flops"] / 1e12,
                                                         (k[s]["bytes"] + sum(b for _, b in k[s].get("steps", []))) / 1e9))
    print("  step     %9.4f ms on average" % f["step_ms"])
    print("  total    %9.3f ms, RTFx %.0f" % (f["total_ms"], f["rtfx"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
