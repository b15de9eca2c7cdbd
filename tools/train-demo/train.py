"""Trains a small Cohere Transcribe model (transformers' CohereAsrForConditionalGeneration).

The architecture is the released one at a small size (--size): the FastConformer encoder
with 8x depthwise-striding subsampling and relative-position attention, the Transformer
decoder, the decoder prompt of spec 5.2. What makes it learn, and why:
- features: common.Features, equal to transformers' extractor and to our engine's frontend
  (check_features.py), computed on the device from 16 kHz audio;
- masks: the encoder gets the feature mask (valid frames: floor(samples/160)), so the
  subsampling, attention, convolution module and cross-attention all see the valid lengths;
  the decoder is causal and right-padded, so padding never reaches a real position;
- initialisation (--init torch, the default): PyTorch's own init for every Linear and Conv
  layer. transformers' _init_weights gives all of them N(0, 0.02), under which the
  subsampling output is ~1e-6 (three convolutions of fan-in 9 and 64 at std 0.02), far below
  LayerNorm's eps (1e-5 on the variance), so the first blocks see almost nothing of the
  audio; --init hf keeps that for comparison;
- the decoder's position table is the original's fixed sinusoid (sin even, cos odd, divided
  by sqrt(hidden)), frozen;
- an auxiliary CTC head on the encoder output (--ctc, weight; blank = <unk> id 0), dropped at
  export; its loss is the first sign that the encoder hears the audio;
- --question: auxiliary question/statement classifiers, also dropped at export (a question
  is told only by its rising end, which no model here has learnt): --question-at enc, a
  linear one on the encoder's last frames (on the CPU at 5e-5 it stayed at the prior,
  tools/train-demo/README.md run 6); sub, one with a GRU on the subsampling's output, where
  question_cue.py learn --layer sub-fresh found the cue learnable; sub+enc, both;
- SpecAugment on the features (--specaug), a speed perturbation of each batch on the device
  (--speed-aug: clips seen again are heard at a new speed), a curriculum that starts with the shortest clips
  (--curriculum: the fraction of training over which the longest allowed clip grows to all),
  batches of similar lengths holding about --batch-seconds of audio;
- --grow: the training starts on the first shards while data.py is still writing the rest
  (on a fresh GPU machine the synthesis takes minutes) and reads new shards as they come;
- AdamW, linear warm-up, cosine decay over --steps or --minutes (whichever ends first);
  bf16 autocast on CUDA, fp32 on the CPU;
- --ema D: an exponential moving average of the weights (decay min(D, (1+n)/(10+n)) after n
  updates: D itself only after ~9/(1-D) of them, 9,000 for 0.999), which small.pt, the evaluations and so the export carry: an average of two runs'
  models (average.py) gained 1.7 points of WER, and this is the same idea within one run
  (run 5 used it; its own effect was not measured apart).

Checkpoints in --out: full.pt (fp32 weights + optimizer: resumes exactly; stays where it
was made) and small.pt (bf16 weights only, <= 16 MiB: it travels; resuming from it starts a
new optimizer with a short warm-up). --resume picks full.pt, else small.pt. --init-from
starts a new run (step 0, new optimizer and schedule) from another run's weights. --guard
keeps a divergence from costing the run: checkpoints are written only while the loss is
healthy, and a runaway window sends the run back to the last one at half the learning rate
(the first H200 call of 2026-12-02 diverged at 1.1e-3 and its saves overwrote the good
checkpoints).

usage: python3 train.py --data .demo/data --tokenizer .demo/data/tokenizer.model \
         --out .demo/ckpt [--size demo] [--minutes 20] [--steps N] [--batch-seconds 600]
         [--session-minutes 9 --resume]   (one run of at most 9 minutes; the next goes on)
Not here: the export to our engine's layout (export.py), the full evaluation (eval.py).
"""
import argparse
import glob
import json
import math
import os
import sys
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SR, Features, decoder_positions, encoder_lengths, prompt_ids, read_wav, wer  # noqa: E402

SIZES = {
    # encoder: width, layers, heads, ff, subsampling channels; decoder: width, layers, heads, ff
    "demo": dict(eh=192, el=6, ehd=4, eff=768, sc=64, dh=192, dl=2, dhd=4, dff=768),
    "small": dict(eh=144, el=4, ehd=4, eff=576, sc=32, dh=144, dl=2, dhd=4, dff=576),
    "tiny": dict(eh=96, el=2, ehd=4, eff=384, sc=32, dh=96, dl=1, dhd=4, dff=384),
    # deeper and narrower within the same 16 MB (run 6): 7.48 M and 7.59 M parameters
    # without the decoder's fixed position table (the count printed below includes it)
    "deep144": dict(eh=144, el=12, ehd=4, eff=576, sc=64, dh=144, dl=2, dhd=4, dff=576),
    "deep128": dict(eh=128, el=16, ehd=4, eff=512, sc=64, dh=128, dl=2, dhd=4, dff=512),
}
EOS, PAD = 3, 2
POS_KEY = "model.decoder.pos_emb.weight"


def make_model(size, vocab, start_id, dropout):
    from transformers import CohereAsrConfig, CohereAsrForConditionalGeneration
    c = SIZES[size]
    cfg = CohereAsrConfig(
        encoder_config=dict(hidden_size=c["eh"], num_hidden_layers=c["el"], num_attention_heads=c["ehd"],
                            intermediate_size=c["eff"], conv_kernel_size=9, subsampling_factor=8,
                            subsampling_conv_channels=c["sc"], num_mel_bins=128, dropout=dropout,
                            attention_dropout=dropout, activation_dropout=dropout),
        vocab_size=vocab, hidden_size=c["dh"], num_hidden_layers=c["dl"], num_attention_heads=c["dhd"],
        intermediate_size=c["dff"], max_position_embeddings=1024, attention_dropout=dropout,
        pad_token_id=PAD, eos_token_id=EOS, bos_token_id=4, decoder_start_token_id=start_id)
    return CohereAsrForConditionalGeneration(cfg)


def init_weights(model, how):
    if how == "torch":
        for mod in model.modules():
            if isinstance(mod, (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d)):
                mod.reset_parameters()
    pe = model.model.decoder.pos_emb.weight
    with torch.no_grad():
        pe.copy_(decoder_positions(*pe.shape))
    pe.requires_grad_(False)


class Data:
    """All clips of DATA/train-*.npz in memory (int16), their tokens, sorted by length.
    grow() reads the shards that have appeared since (data.py writing beside the training)."""

    def __init__(self, root, sp, limit=0):
        self.root, self.sp, self.limit = root, sp, limit
        self.audio, self.texts, self.tokens, self.seen = [], [], [], set()
        self.grow()
        if not self.texts:
            raise SystemExit(f"no clips in {root}/train-*.npz (run data.py)")

    def grow(self):
        """Reads new complete shards (data.py renames a shard into place when it is whole);
        returns how many clips were added."""
        n0 = len(self.texts)
        for f in sorted(glob.glob(os.path.join(self.root, "train-*.npz"))):
            if f in self.seen or (self.limit and len(self.texts) >= self.limit):
                continue
            self.seen.add(f)
            z = np.load(f)
            audio, off = z["audio"], z["offsets"]        # (each z[...] reads the file again)
            for i, t in enumerate(z["texts"]):
                if self.limit and len(self.texts) == self.limit:
                    break
                self.audio.append(audio[off[i]: off[i + 1]])
                self.texts.append(str(t))
                self.tokens.append(np.array(self.sp.encode(str(t)), dtype=np.int64))
        self.lens = np.array([len(a) for a in self.audio])
        self.order = np.argsort(self.lens, kind="stable")
        self.hours = self.lens.sum() / SR / 3600
        return len(self.texts) - n0

    def batch(self, rng, frac, seconds):
        """Indices of a batch: clips of similar length around a random place among the
        shortest `frac` of the data, padded length x count <= seconds of audio."""
        n = max(1, int(round(frac * len(self.order))))
        at = int(rng.integers(n))
        longest = self.lens[self.order[at]]
        k = max(1, int(seconds * SR // max(longest, 1)))
        lo = max(0, at - k + 1)
        idx = self.order[lo: lo + k]
        return idx


def collate(data, idx, prompt, device):
    """A batch on the device: padded audio [B, N] in [-1, 1) and lengths, decoder input and
    targets (prompt and padding not predicted), CTC targets. The clips go over as one
    concatenated array and are padded on the device by a gather: one copy and a few kernels
    whatever the clip count (a copy per clip cost ~40 ms a batch of 180 clips)."""
    lens_np = data.lens[idx]
    flat = torch.from_numpy(np.concatenate([data.audio[i] for i in idx])).to(device, non_blocking=True)
    starts = torch.from_numpy(np.concatenate([[0], np.cumsum(lens_np)[:-1]])).to(device)
    lens = torch.from_numpy(lens_np).to(device)
    t = torch.arange(int(lens_np.max()), device=device)
    valid = t[None, :] < lens[:, None]
    x = flat[(starts[:, None] + t[None, :]).clamp(max=flat.numel() - 1)].float().masked_fill(~valid, 0.0) / 32768.0
    toks = [data.tokens[i] for i in idx]
    n_tok = np.array([len(k) for k in toks])
    L = len(prompt) + int(n_tok.max()) + 1
    dec = np.full((len(idx), L), PAD, dtype=np.int64)
    dec[:, : len(prompt)] = prompt
    for j, k in enumerate(toks):
        dec[j, len(prompt): len(prompt) + len(k)] = k
        dec[j, len(prompt) + len(k)] = EOS
    dec = torch.from_numpy(dec)
    inp, tgt = dec[:, :-1].clone(), dec[:, 1:].clone()
    tgt[:, : len(prompt) - 1] = -100                 # the prompt is given, not predicted
    tgt[tgt == PAD] = -100
    return (x, lens, inp.to(device), tgt.to(device),
            torch.from_numpy(np.concatenate(toks)).to(device), torch.from_numpy(n_tok).to(device))


def speed_augment(x, lens, factor):
    """The batch played `factor` times as fast: every clip resampled (linear interpolation on
    the device) to 1/factor of its length, tempo, pitch and formants together, as data.py's
    --speed-perturb does once per clip; here a new factor each time a clip comes round again."""
    n = max(1, int(x.shape[1] / factor))
    y = F.interpolate(x[:, None, :], size=n, mode="linear", align_corners=False)[:, 0]
    lens = torch.clamp(torch.floor(lens.double() / factor).long(), 1, n)
    return y.masked_fill(torch.arange(n, device=x.device)[None, :] >= lens[:, None], 0.0), lens


def spec_augment(f, mask, gen, n_freq=2, max_f=15, time_frac=0.05, n_time=2):
    """SpecAugment (no time warping): per clip n_freq bands of up to max_f mel bins and
    n_time stretches of up to time_frac of its valid frames set to 0 (the per-bin mean of
    the normalised features). Vectorised: a few kernels per batch, whatever its size."""
    B, T, C = f.shape
    dev = f.device
    valid = mask.sum(1, keepdim=True).float()                              # [B, 1]
    keep = torch.ones(B, T, C, dtype=torch.bool, device=dev)
    bins = torch.arange(C, device=dev)[None, :]
    for _ in range(n_freq):
        w = torch.randint(0, max_f + 1, (B, 1), generator=gen, device=dev)
        s = (torch.rand(B, 1, generator=gen, device=dev) * (C - w + 1)).long()
        keep &= ~((bins >= s) & (bins < s + w))[:, None, :]
    frames = torch.arange(T, device=dev)[None, :]
    for _ in range(n_time):
        w = (torch.rand(B, 1, generator=gen, device=dev) * time_frac * valid).long()
        s = (torch.rand(B, 1, generator=gen, device=dev) * (valid - w + 1)).long()
        keep &= ~((frames >= s) & (frames < s + w))[:, :, None]
    return f * keep


@torch.no_grad()
def greedy(model, feats, prompt, wavs, device, max_new=64, batch=64):
    """Greedy transcripts of a list of float32 waveforms, through transformers' generate."""
    model.eval()
    out = []
    for s in range(0, len(wavs), batch):
        ws = wavs[s: s + batch]
        lens = torch.tensor([len(w) for w in ws])
        x = torch.zeros(len(ws), int(lens.max()))
        for j, w in enumerate(ws):
            x[j, : len(w)] = torch.from_numpy(w)
        f, m = feats(x.to(device), lens.to(device))
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            g = model.generate(input_features=f, attention_mask=m.long(),
                               decoder_input_ids=torch.tensor([prompt] * len(ws), device=device),
                               max_new_tokens=max_new, do_sample=False, num_beams=1)
        out += [row[len(prompt):].tolist() for row in g]
    model.train()
    return out


def decode(sp, ids):
    if EOS in ids:
        ids = ids[: ids.index(EOS)]
    return sp.decode([i for i in ids if i != PAD]).strip()


class Ema:
    """The moving average of the trainable weights, in fp32 beside them. Its decay is
    min(D, (1 + n) / (10 + n)) after n updates, so that it does not remember the start."""

    def __init__(self, model, decay):
        self.decay, self.n = decay, 0
        self.names = [k for k, p in model.named_parameters() if p.requires_grad]
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.avg = [p.detach().float().clone() for p in self.params]

    @torch.no_grad()
    def update(self):
        d = min(self.decay, (1 + self.n) / (10 + self.n))
        torch._foreach_lerp_(self.avg, [p.detach().float() for p in self.params], 1.0 - d)
        self.n += 1

    def state(self):
        return dict(n=self.n, avg=dict(zip(self.names, self.avg)))

    @torch.no_grad()
    def load(self, st):
        self.n = st["n"]
        for a, k in zip(self.avg, self.names):
            a.copy_(st["avg"][k])

    @torch.no_grad()
    def reset(self):
        """Back to the model's weights, e.g. after a run steps back to a checkpoint."""
        for a, p in zip(self.avg, self.params):
            a.copy_(p.detach().float())
        self.n = 0

    def weights(self, model):
        """The model's state dict with the averaged weights in place of the trained ones."""
        sd = dict(model.state_dict())
        sd.update(dict(zip(self.names, self.avg)))
        return sd


class QuestionHead(torch.nn.Module):
    """Question or statement from the last SPAN valid frames (2 s at 80 ms) of [B, T, d]
    frames, zeros in front of a shorter clip: one convolution over time, a GRU, a linear
    layer giving the question's logit. It is question_cue.py learn's network for a layer's
    output; a linear read of pooled frames cannot tell a rising end from a falling one
    unless the layers below have already done that work."""
    SPAN = 25

    def __init__(self, d, width=96):
        super().__init__()
        self.conv = torch.nn.Conv1d(d, width, 3, padding=1)
        self.gru = torch.nn.GRU(width, width, batch_first=True)
        self.out = torch.nn.Linear(width, 1)

    def forward(self, h, lens):
        at = lens[:, None] - self.SPAN + torch.arange(self.SPAN, device=h.device)[None, :]
        last = h.gather(1, at.clamp(min=0)[:, :, None].expand(-1, -1, h.shape[2]))
        last = last * (at >= 0)[:, :, None].to(h.dtype)
        _, hn = self.gru(F.relu(self.conv(last.transpose(1, 2))).transpose(1, 2))
        return self.out(hn[-1])[:, 0]


class PooledHead(torch.nn.Linear):
    """Question or statement, linearly, from the mean of the last 8 valid frames."""

    def forward(self, h, lens):
        at = torch.arange(h.shape[1], device=h.device)[None, :]
        last = ((at < lens[:, None]) & (at >= lens[:, None] - 8)).to(h.dtype)
        pooled = (h * last[:, :, None]).sum(1) / last.sum(1, keepdim=True).clamp(min=1.0)
        return super().forward(pooled)[:, 0]


def question_heads(where, d):
    """--question-at's heads by the layer each reads: 'sub' the subsampling's output (a
    GRU head), 'enc' the encoder's (linear, as in run 6's CPU fine-tune)."""
    heads = torch.nn.ModuleDict()
    for at in where.split("+"):
        heads[at] = QuestionHead(d) if at == "sub" else PooledHead(d, 1)
    return heads


def save(path, model, ctc, step, elapsed, args, opt=None, guard=None, ema=None, qhead=None):
    # small.pt: bf16, the averaged weights when there is an average, and without the fixed
    # position table (recomputed; keeps it < 16 MiB); full.pt: everything, to resume exactly
    src = ema.weights(model) if ema is not None and opt is None else model.state_dict()
    sd = {k: (v.to(torch.bfloat16) if opt is None and v.is_floating_point() else v)
          for k, v in src.items() if opt is not None or k != POS_KEY}
    ck = {"model": sd, "ctc": {k: (v.to(torch.bfloat16) if opt is None else v) for k, v in ctc.state_dict().items()},
          "step": step, "elapsed": elapsed, "args": vars(args), "config": model.config.to_dict(),
          "guard": guard or {}}
    if qhead is not None:
        ck["qhead"] = {k: (v.to(torch.bfloat16) if opt is None else v) for k, v in qhead.state_dict().items()}
    if opt is not None:
        ck["opt"] = opt.state_dict()
        if ema is not None:
            ck["ema"] = ema.state()
    torch.save(ck, path + ".tmp")
    os.replace(path + ".tmp", path)


def profile_start(device):
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
        torch.cuda.synchronize()
    prof = torch.profiler.profile(activities=acts)
    prof.__enter__()
    prof.t0 = time.time()
    return prof


def profile_end(prof, device):
    """Prints the profiled steps' wall time against the time their kernels ran, and the ops
    that took the most host time (is a step bound by the host or by the device?)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    wall = time.time() - prof.t0
    prof.__exit__(None, None, None)
    try:                         # a report, never a reason to stop the training
        ev = prof.key_averages()
        key = "self_device_time_total" if hasattr(ev[0], "self_device_time_total") else "self_cuda_time_total"
        dev = sum(getattr(e, key) for e in ev) / 1e6 if device.type == "cuda" else 0.0
        print(f"profile: 5 steps in {wall * 1000:.0f} ms wall, kernels {dev * 1000:.0f} ms", flush=True)
        print(ev.table(sort_by="self_cpu_time_total", row_limit=20), flush=True)
        if device.type == "cuda":
            print(ev.table(sort_by=key, row_limit=12), flush=True)
    except Exception as e:       # noqa: BLE001
        print(f"profile: no report ({e})", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--heldout", default=None, help="folder with heldout.tsv (default: --data)")
    ap.add_argument("--size", default="demo", choices=sorted(SIZES))
    ap.add_argument("--init", default="torch", choices=["torch", "hf"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    ap.add_argument("--minutes", type=float, default=0, help="stop after this much training time (in all, "
                    "over resumed runs; the learning-rate schedule ends there)")
    ap.add_argument("--session-minutes", type=float, default=0,
                    help="stop this run (saving checkpoints) after this much wall time; --resume goes on")
    ap.add_argument("--batch-seconds", type=float, default=600.0)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--wd", type=float, default=1e-2)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--ctc", type=float, default=0.3, help="weight of the CTC loss (0: no CTC head)")
    ap.add_argument("--ctc-warm", type=int, default=0,
                    help="for the first N steps of a run from --init-from a folder (a new CTC head), the CTC loss "
                         "trains only the head: its gradient does not reach the encoder, which a random head would "
                         "pull away from what it learned; over the next N steps its share of the encoder's gradient "
                         "grows from 0 to all (a head still far from trained, let in at once, made a fine-tune at "
                         "1e-4 diverge on 2026-12-03)")
    ap.add_argument("--question", type=float, default=0.0,
                    help="weight of an auxiliary loss (training only, dropped at export, as the CTC head is): "
                         "question/statement classifiers (--question-at), their gradient reaching the encoder; "
                         "the decoder's loss on the final '?' alone never made the encoder keep the rising end "
                         "(question_cue.py probe, runs 5 and 6). The heads start new with --init-from; keep the "
                         "flags the same across --resume (the optimizer's state holds the heads or not)")
    ap.add_argument("--question-at", choices=["enc", "sub", "sub+enc"], default="enc",
                    help="where --question's classifiers read: enc (linear, the mean of the encoder's last 8 "
                         "frames), sub (a convolution and a GRU over the subsampling's last 25 frames: "
                         "question_cue.py learn --layer sub-fresh, 2026-12-05), or both, each weighted --question")
    ap.add_argument("--front-lr", type=float, default=1.0,
                    help="the subsampling's and the question heads' learning rate as a multiple of the run's: "
                         "a fine-tune that must reshape the front end for the question cue (question_cue.py "
                         "learn --layer sub-model: the shipped subsampling learns it alone at 1e-3 in ~25,000 "
                         "clips) at a rate that keeps the rest of the model where it was. Its value may change "
                         "across --resume, but not whether it is 1 (the optimizer's groups)")
    ap.add_argument("--init-question", default=None,
                    help="at step 0, the subsampling (and with --question-at sub, its question head) from "
                         "question_cue.py learn --layer sub-fresh --save F: a front end that already carries the "
                         "question cue, so the sub head's loss asks the run to keep it rather than to find it")
    ap.add_argument("--punct-weight", type=float, default=1.0,
                    help="weight of the decoder's loss on the sentence-final '.' and '?' pieces against 1 for the "
                         "others: a question is told from a statement only by the pitch of its last word, a cue the "
                         "plain loss (one sentence in ten a question) never taught")
    ap.add_argument("--specaug", type=int, default=1)
    ap.add_argument("--speed-aug", type=float, default=0.0,
                    help="each batch resampled on the device by a random factor in [1-P, 1+P] (0: off)")
    ap.add_argument("--curriculum", type=float, default=0.3)
    ap.add_argument("--limit", type=int, default=0, help="use only the first N clips")
    ap.add_argument("--grow", type=int, default=0,
                    help="every N steps read the shards data.py has finished since, until its meta.json "
                         "appears (training beside the synthesis; which clips a step sees then depends on timing)")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--eval-n", type=int, default=50)
    ap.add_argument("--save-every", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--guard", type=float, default=0,
                    help="divergence guard: when a logged window's CE exceeds GUARD x the best window's + 0.3, "
                         "go back to the last checkpoint (saved only while healthy) at half the learning rate")
    ap.add_argument("--profile-step", type=int, default=0,
                    help="profile 5 steps from this one (torch.profiler) and print where the time went")
    ap.add_argument("--ema", type=float, default=0.0,
                    help="keep a moving average of the weights with this decay (e.g. 0.999; 0: none): small.pt "
                         "and the evaluations use it")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--init-from", default=None,
                    help="start from these weights at step 0 (a new schedule and optimizer): an exported model "
                         "folder (export.py's layout, e.g. models/cohere-demo-en; a new CTC head) or a checkpoint "
                         "of this script (small.pt/full.pt; its CTC head is kept); used when no checkpoint of "
                         "--out is resumed")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda" and hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        # cuDNN's attention builds a plan for each new shape on the host, and every batch here
        # has a new shape: profiled on the H200 (--profile-step), its 4 calls a step (the
        # decoder's self and cross attention) took ~55 ms of host time each, forward and
        # backward, for 0.1 ms of kernels, most of a ~390 ms step. Flash/efficient SDPA
        # need no plan.
        torch.backends.cuda.enable_cudnn_sdp(False)
    torch.manual_seed(args.seed)
    sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
    prompt = prompt_ids(sp)
    punct = torch.tensor([i for i in (sp.piece_to_id("."), sp.piece_to_id("?")) if i != sp.unk_id()])
    data = Data(args.data, sp, args.limit)
    print(f"data: {len(data.texts)} clips, {data.hours:.2f} h, longest {data.lens.max() / SR:.1f} s; "
          f"device {device}", flush=True)

    model = make_model(args.size, sp.get_piece_size(), prompt[0], args.dropout)
    init_weights(model, args.init)
    model.generation_config.decoder_start_token_id = prompt[0]
    model.generation_config.eos_token_id = EOS
    model.generation_config.pad_token_id = PAD
    model.generation_config.bos_token_id = 4
    ctc = torch.nn.Linear(model.config.encoder_config.hidden_size, sp.get_piece_size())
    model.to(device).train()
    ctc.to(device)
    feats = Features().to(device)
    n_par = sum(p.numel() for p in model.parameters())
    print(f"model {args.size}: {n_par / 1e6:.2f} M parameters ({2 * n_par / 2 ** 20:.1f} MiB in bf16)", flush=True)

    qhead = question_heads(args.question_at, model.config.encoder_config.hidden_size).to(device) \
        if args.question > 0 else None
    sub_out = {}
    if qhead is not None and "sub" in qhead:   # the subsampling's output, as the encoder computes it
        model.model.encoder.subsampling.register_forward_hook(lambda mod, inp, out: sub_out.__setitem__("h", out))
    params = [p for p in list(model.parameters()) + list(ctc.parameters()) +
              (list(qhead.parameters()) if qhead is not None else []) if p.requires_grad]
    # --front-lr: the subsampling and the question heads learn at that multiple of the rate
    # (at 1, two groups as before, so that older full.pt files resume)
    front = set()
    if args.front_lr != 1.0:
        front = {id(p) for p in model.model.encoder.subsampling.parameters()}
        front |= {id(p) for p in qhead.parameters()} if qhead is not None else set()
    groups = []
    for scale, mine in ((1.0, [p for p in params if id(p) not in front]),
                        (args.front_lr, [p for p in params if id(p) in front])):
        groups += [{"params": [p for p in mine if p.dim() >= 2], "weight_decay": args.wd, "scale": scale},
                   {"params": [p for p in mine if p.dim() < 2], "weight_decay": 0.0, "scale": scale}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    os.makedirs(args.out, exist_ok=True)
    step, elapsed, rewarm, lr_scale, backs0, best0 = 0, 0.0, 0, 1.0, 0, math.inf

    def load_weights(sd, where):
        """The model's weights from a state dict (the fixed position table is recomputed)."""
        bad = model.load_state_dict({k: v.float() for k, v in sd.items() if k != POS_KEY}, strict=False)
        if bad.unexpected_keys or set(bad.missing_keys) - {POS_KEY}:
            raise SystemExit(f"{where}: does not fit --size {args.size}: {bad}")

    ema = Ema(model, args.ema) if args.ema > 0 else None

    def load(path):
        """Model, CTC head, (full.pt) optimizer and average of a checkpoint; its step, time,
        guard state. (small.pt holds the average itself when there was one.)"""
        ck = torch.load(path, map_location=device, weights_only=False)
        load_weights(ck["model"], path)
        ctc.load_state_dict({k: v.float() for k, v in ck["ctc"].items()})
        if qhead is not None and "qhead" in ck:
            qs = {k if k.startswith(("enc.", "sub.")) else "enc." + k: v.float()
                  for k, v in ck["qhead"].items()}     # (before sub: one linear head, unprefixed)
            saved, asked = sorted({k.split(".")[0] for k in qs}), sorted(qhead.keys())
            if saved != asked and "opt" in ck:
                raise SystemExit(f"{path}: its question heads are {'+'.join(saved)}, --question-at asks for "
                                 f"{'+'.join(asked)}: resume with the same --question-at, or start a new run "
                                 f"from it with --init-from")
            bad = qhead.load_state_dict(qs, strict=False)
            if bad.missing_keys:
                print(f"{path}: no question head {'+'.join(sorted({k.split('.')[0] for k in bad.missing_keys}))} "
                      f"in it: that one starts new", flush=True)
        if "opt" in ck:
            try:
                opt.load_state_dict(ck["opt"])
            except ValueError as e:
                raise SystemExit(f"{path}: its optimizer does not fit this run's ({e}): resume with the same "
                                 f"--front-lr (1 or not), --question and --question-at, or start a new run from "
                                 f"it with --init-from")
            for g, built in zip(opt.param_groups, [g for g in groups if g["params"]]):
                g["scale"] = built["scale"]          # --front-lr as given now, not as saved
        if ema is not None and "ema" in ck:
            ema.load(ck["ema"])
        elif ema is not None:
            ema.reset()
        return ck["step"], ck["elapsed"], ck.get("guard", {}), "opt" in ck

    if args.resume:
        full, small = os.path.join(args.out, "full.pt"), os.path.join(args.out, "small.pt")
        path = full if os.path.exists(full) else small
        if os.path.exists(path):
            step, elapsed, g, has_opt = load(path)
            lr_scale, backs0, best0 = g.get("lr_scale", 1.0), g.get("backs", 0), g.get("best_ce", math.inf)
            rewarm = 0 if has_opt else step
            print(f"resumed from {path} at step {step} ({elapsed / 60:.1f} min)", flush=True)

    if args.init_from and step == 0:
        if os.path.isfile(args.init_from):
            ck = torch.load(args.init_from, map_location=device, weights_only=False)
            src, what = ck["model"], f"step {ck['step']} of {args.init_from}, its CTC head"
            ctc.load_state_dict({k: v.float() for k, v in ck["ctc"].items()})
        else:
            from export import load_hf
            src, what = load_hf(args.init_from).state_dict(), f"{args.init_from} (a new CTC head)"
        load_weights(src, args.init_from)
        model.to(device)
        if ema is not None:
            ema.reset()
        print(f"weights from {what}; a new optimizer and schedule from step 0", flush=True)

    if args.init_question and step == 0:
        fq = torch.load(args.init_question, map_location=device, weights_only=False)
        try:
            model.model.encoder.subsampling.load_state_dict({k: v.float() for k, v in fq["subsampling"].items()})
            if qhead is not None and "sub" in qhead:
                qhead["sub"].load_state_dict({k: v.float() for k, v in fq["head"].items()})
        except (KeyError, RuntimeError) as e:
            raise SystemExit(f"{args.init_question}: not a subsampling and head of --size {args.size} "
                             f"(question_cue.py learn --save): {e}")
        if ema is not None:
            ema.reset()
        print(f"subsampling{' and sub question head' if qhead is not None and 'sub' in qhead else ''} from "
              f"{args.init_question} (question_cue.py's epoch {fq['epoch']}, "
              f"{100 * fq['held_out_right']:.1f}% held out)", flush=True)

    held = []
    hdir = args.heldout or args.data
    tsv = os.path.join(hdir, "heldout.tsv")
    if os.path.exists(tsv):
        for line in open(tsv, encoding="utf-8"):
            f, text, _ = line.rstrip("\n").split("\t")
            held.append((read_wav(os.path.join(hdir, f)).astype(np.float32) / 32768.0, text))
        held = held[: args.eval_n]
    ev_idx = np.random.default_rng(args.seed + 7).choice(len(data.texts), size=min(args.eval_n, len(data.texts)),
                                                         replace=False)
    ev_train = [(data.audio[i].astype(np.float32) / 32768.0, data.texts[i]) for i in ev_idx]

    def evaluate():
        """WER of greedy transcripts, with the averaged weights when there are any."""
        if ema is not None:
            trained = {k: v.detach().clone() for k, v in model.state_dict().items()}
            model.load_state_dict(ema.weights(model))
        try:
            return evaluate_weights()
        finally:
            if ema is not None:
                model.load_state_dict(trained)

    def evaluate_weights():
        res = {}
        for name, items in (("train", ev_train), ("heldout", held)):
            if not items:
                continue
            hyps = [decode(sp, ids) for ids in greedy(model, feats, prompt, [w for w, _ in items], device)]
            refs = [t for _, t in items]
            res[name] = dict(wer=wer(refs, hyps), wer_norm=wer(refs, hyps, norm=True),
                             exact=sum(r == h for r, h in zip(refs, hyps)), n=len(refs),
                             example=[refs[0], hyps[0]])
        return res

    def lr_at(s, t):
        p = 0.0
        if args.steps:
            p = max(p, s / args.steps)
        if args.minutes:
            p = max(p, t / (60 * args.minutes))
        warm = min(1.0, (s + 1) / args.warmup) if not rewarm else min(1.0, (s - rewarm + 1) / 50)
        return args.lr * lr_scale * warm * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))

    use_amp = device.type == "cuda"
    punct = punct.to(device)
    growing = args.grow > 0
    best_ce, healthy, backs = best0, True, backs0

    def checkpoint():
        if not healthy:          # never replace a good checkpoint with a diverged one
            print(f"step {step}: not saved (diverged)", flush=True)
            return
        g = dict(lr_scale=lr_scale, backs=backs, best_ce=best_ce)
        save(os.path.join(args.out, "full.pt"), model, ctc, step, elapsed, args, opt, g, ema, qhead)
        save(os.path.join(args.out, "small.pt"), model, ctc, step, elapsed, args, guard=g, ema=ema, qhead=qhead)

    if args.guard and not os.path.exists(os.path.join(args.out, "full.pt")):
        checkpoint()             # something to go back to from the first step
    log = dict(ce=0.0, ctc=0.0, q=0.0, n=0, sec=0.0, t=time.time())
    t_last = t_start = time.time()
    while True:
        if (args.steps and step >= args.steps) or (args.minutes and elapsed >= 60 * args.minutes):
            break
        if args.session_minutes and time.time() - t_start >= 60 * args.session_minutes:
            checkpoint()
            print(f"session time up at step {step} ({elapsed / 60:.1f} min trained); go on with --resume",
                  flush=True)
            return
        if args.profile_step and step == args.profile_step:
            prof = profile_start(device)
        if args.profile_step and step == args.profile_step + 5:
            profile_end(prof, device)
        rng = np.random.default_rng([args.seed, step] + ([backs] if backs else []))   # new batches after a step back
        frac = 1.0
        if args.curriculum > 0:
            p = max(step / args.steps if args.steps else 0, elapsed / (60 * args.minutes) if args.minutes else 0)
            frac = min(1.0, 0.1 + 0.9 * p / args.curriculum)
        idx = data.batch(rng, frac, args.batch_seconds)
        x, lens, inp, tgt, ctc_t, ctc_l = collate(data, idx, prompt, device)
        if args.speed_aug > 0:
            x, lens = speed_augment(x, lens, float(rng.uniform(1 - args.speed_aug, 1 + args.speed_aug)))
        f, m = feats(x, lens)
        if args.specaug:
            f = spec_augment(f, m, torch.Generator(device=device).manual_seed(args.seed * 1000003 + step))
        for g in opt.param_groups:
            g["lr"] = lr_at(step, elapsed) * g.get("scale", 1.0)   # (older full.pt: no scale)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_amp):
            enc = model.model.encoder(f, attention_mask=m.long())
            out = model(encoder_outputs=enc, attention_mask=m.long(), decoder_input_ids=inp, use_cache=False)
        ce_tok = F.cross_entropy(out.logits.float().transpose(1, 2), tgt, ignore_index=-100, reduction="none")
        valid = (tgt != -100).float()
        ce = (ce_tok * valid).sum() / valid.sum()     # what the log shows, whatever --punct-weight is
        if args.punct_weight != 1.0:
            w = valid * torch.where(torch.isin(tgt, punct), args.punct_weight, 1.0)
            loss = (ce_tok * w).sum() / w.sum()
        else:
            loss = ce
        # the training-only heads (CTC, question) read the encoder's output in f32 and its valid frames
        h_enc, elen = enc.last_hidden_state.float(), encoder_lengths(m.sum(1))
        ctc_loss = torch.zeros(())
        if args.ctc > 0:
            with torch.autocast(device_type=device.type, enabled=False):
                h = h_enc
                if step < 2 * args.ctc_warm:       # the encoder gets this share of the CTC gradient
                    share = max(0.0, (step - args.ctc_warm) / args.ctc_warm)
                    h = h.detach() + share * (h - h.detach())
                lp = F.log_softmax(ctc(h), dim=-1).transpose(0, 1)
                ctc_loss = F.ctc_loss(lp, ctc_t, elen, ctc_l, blank=0, reduction="sum",
                                      zero_infinity=True) / ctc_l.sum()
            loss = loss + args.ctc * ctc_loss
        q_loss, q_ok = torch.zeros(()), {}
        if qhead is not None:
            with torch.autocast(device_type=device.type, enabled=False):
                y = torch.tensor([data.texts[i].endswith("?") for i in idx], dtype=torch.float32, device=device)
                q_loss = 0.0
                for at, head in qhead.items():
                    z = head(h_enc if at == "enc" else sub_out["h"].float(), elen)
                    q_loss = q_loss + F.binary_cross_entropy_with_logits(z, y)
                    q_ok[at] = ((z > 0).float() == y).float().mean()
            loss = loss + args.question * q_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if ema is not None:
            ema.update()
        step += 1
        now = time.time()
        elapsed += now - t_last
        t_last = now
        log["ce"] += ce.detach()                     # summed on the device: no wait for the GPU each step
        log["ctc"] += ctc_loss.detach()
        log["q"] += q_loss.detach()
        for at, ok in q_ok.items():
            log["qok-" + at] = log.get("qok-" + at, 0.0) + ok.detach()
        log["n"] += 1
        log["sec"] += float(data.lens[idx].sum()) / SR
        if step % args.log_every == 0:
            dt = time.time() - log["t"]
            window = float(log["ce"]) / log["n"]
            print(f"step {step} {elapsed / 60:.1f} min lr {lr_at(step, elapsed):.2e} "
                  f"ce {window:.3f} ctc {float(log['ctc']) / log['n']:.3f} "
                  + (f"q {float(log['q']) / log['n']:.3f} " + "".join(
                      f"q-right-{at} {float(log['qok-' + at]) / log['n']:.2f} " for at in qhead)
                     if qhead is not None else "") +
                  f"batch {len(idx)} frac {frac:.2f} "
                  f"{dt / log['n'] * 1000:.0f} ms/step {log['sec'] / dt:.0f} s audio/s", flush=True)
            log = dict(ce=0.0, ctc=0.0, q=0.0, n=0, sec=0.0, t=time.time())
            if args.guard:
                best_ce = min(best_ce, window)
                healthy = window <= args.guard * best_ce + 0.3
                full = os.path.join(args.out, "full.pt")
                if not healthy and os.path.exists(full):
                    backs += 1
                    if backs > 4:
                        raise SystemExit(f"diverged {backs} times; the last good checkpoint is {full}")
                    bad_step = step
                    step, elapsed, g, _ = load(full)
                    lr_scale = 0.5 * min(lr_scale, g.get("lr_scale", 1.0))
                    healthy = True
                    print(f"diverged at step {bad_step} (ce {window:.3f}, best {best_ce:.3f}): back to step {step}, "
                          f"learning rate x{lr_scale:g}", flush=True)
                    checkpoint()         # the good weights with the new scale: a killed call goes on from here
                    t_last = time.time()
                    continue
        if growing and step % args.grow == 0:
            growing = not os.path.exists(os.path.join(args.data, "meta.json"))   # then read the last shards
            added = data.grow()
            if added:
                print(f"data: +{added} clips, {len(data.texts)} in all ({data.hours:.1f} h)", flush=True)
        if args.eval_every and step % args.eval_every == 0:
            t0 = time.time()
            print(f"eval step {step}: {json.dumps(evaluate())} ({time.time() - t0:.0f} s)", flush=True)
            t_last = time.time()
        if args.save_every and step % args.save_every == 0:
            checkpoint()
            t_last = time.time()
    checkpoint()
    if not healthy:
        print(f"final step {step}: diverged; the last good checkpoint is in {args.out}, final.json not written",
              flush=True)
        sys.exit(1)
    r = evaluate()
    print(f"final step {step} ({elapsed / 60:.1f} min): {json.dumps(r)}", flush=True)
    json.dump(dict(step=step, minutes=elapsed / 60, eval=r), open(os.path.join(args.out, "final.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
