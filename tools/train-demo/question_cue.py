"""Is a question audible in the synthesised speech, and does a model's encoder keep it?

A sentence ends in "?" or "." and nothing else tells them apart: a random word sequence has
no question words to go by. Two measurements:
- pairs (espeak-ng, no model): N sentences, each spoken twice by one voice, once ending in
  "." and once in "?"; the pitch (autocorrelation, 40-ms windows) of the last ~60 ms of voiced
  speech against the median of the rest, in octaves. If the "?" version ends higher in most
  pairs, the cue is in the audio;
- probe (a model): the mean of its encoder's last 8 valid frames and of all its frames, on
  the clips of a training shard, and a least-squares linear classifier, 5-fold: accuracy
  near the prior means the encoder keeps no linear trace of the cue;
- learn: is the cue in the model's input at all? A small network of its own (three
  convolutions over time with the 128 mel bins as channels, a GRU, a linear layer; ~0.2 M
  parameters) trained from scratch on the last 2 s of the same log-mel features of --n clips
  of data.py shards (85% to train, 15% held out), accuracy every epoch. With --model and
  --layer sub or enc, the same question of that model's frozen subsampling output (encoder
  layer 0's input) or encoder output, its last 25 frames (2 s), through one convolution and
  the GRU: a stronger probe than the linear one. --layer sub-fresh / sub-model: the features
  through a subsampling of the released architecture (deep144's, from scratch, or --model's
  as the start) trained with that convolution and GRU: can the model's own front end carry
  the cue when something asks it to?
- share: in a fine-tune from a checkpoint, how large the question loss's gradient on the
  subsampling is beside the ASR losses' (one batch of 40 clips, 12 of them questions).
Why: on 2026-12-03 the model shipped then gave back none of the 26 questions among its 200 test
clips (1.75 of its 9.97 points), and a fine-tune with 3 questions in 10 did not change that;
nor did run 6 (2026-12-04, one sentence in five a question): 0 of 26, probe 50.9% vs 51.7%.

usage: python3 question_cue.py pairs [--n 60]
       python3 question_cue.py probe --model models/cohere-demo-en --npz SHARD.npz [--n 1200]
       python3 question_cue.py learn --data FOLDER [--n 12000] [--epochs 25] [--model DIR --layer sub|enc|sub-fresh|sub-model] [--save F]
       (FOLDER: data.py's train-*.npz)
       (a shard with many questions: data.py --train 1200 --heldout 0 --questions 0.5)
       python3 question_cue.py share --ckpt small.pt --npz SHARD.npz [--weight 1]
Not here: teaching the cue (train.py --punct-weight, --questions in data.py).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data as D  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def f0_track(x, sr=D.ESPEAK_SR):
    """Pitch in Hz every 10 ms (NaN where unvoiced or too quiet)."""
    win, out = int(0.04 * sr), []
    lo, hi = int(sr / 400), int(sr / 60)
    for s in range(0, len(x) - win, sr // 100):
        seg = x[s: s + win] - x[s: s + win].mean()
        if np.sqrt(np.mean(seg ** 2)) < 0.02:
            out.append(np.nan)
            continue
        ac = np.correlate(seg, seg, "full")[win - 1:]
        lag = lo + int(np.argmax(ac[lo:hi]))
        out.append(sr / lag if ac[lag] > 0.3 * ac[0] else np.nan)
    return np.array(out)


def pairs(n, exe):
    words = D.load_words(0)
    probs = 1.0 / (np.arange(len(words)) + 30.0) ** 0.8
    probs /= probs.sum()
    rng = np.random.default_rng(3)
    rise = {".": [], "?": []}
    for _ in range(20 * n):
        if len(rise["?"]) == n:
            break
        s = D.make_sentence(rng, words, probs, 3, 8)[:-1]
        p = D.voice_params(rng, "train", False)
        got = {}
        for end in ".?":
            v = f0_track(D.espeak(exe, s + end, p))
            v = v[~np.isnan(v)]
            if len(v) >= 10:
                got[end] = np.log2(np.median(v[-3:]) / np.median(v[:-6]))
        if len(got) == 2:
            for end in ".?":
                rise[end].append(got[end])
    if len(rise["?"]) < n:
        raise SystemExit(f"{exe}: only {len(rise['?'])} of {20 * n} sentences had enough voiced speech to measure")
    for end in ".?":
        a = np.array(rise[end])
        print(f"'{end}': the end's pitch against the rest, octaves: median {np.median(a):+.2f}, mean {a.mean():+.2f}")
    d = np.array(rise["?"]) - np.array(rise["."])
    print(f"'?' ends higher than '.' in {100 * (d > 0).mean():.0f}% of {n} pairs (mean difference {d.mean():+.2f} octaves)")


def probe(model_dir, npz, n):
    import torch
    from common import Features, encoder_lengths
    from export import load_hf
    z = np.load(npz)
    off, texts, audio = z["offsets"], [str(t) for t in z["texts"]][:n], z["audio"]   # (each z[...] reads the file)
    y = np.array([t.endswith("?") for t in texts], dtype=np.float64)
    model, feats, X = load_hf(model_dir), Features(), []
    with torch.no_grad():
        for s in range(0, len(texts), 32):
            ws = [audio[off[i]: off[i + 1]].astype(np.float32) / 32768 for i in range(s, min(s + 32, len(texts)))]
            lens = torch.tensor([len(w) for w in ws])
            x = torch.zeros(len(ws), int(lens.max()))
            for j, w in enumerate(ws):
                x[j, : len(w)] = torch.from_numpy(w)
            f, m = feats(x, lens)
            enc = model.model.encoder(f, attention_mask=m.long()).last_hidden_state
            for j, t in enumerate(encoder_lengths(m.sum(1)).tolist()):
                X.append(torch.cat([enc[j, max(0, t - 8): t].mean(0), enc[j, :t].mean(0)]).numpy())
    X = np.array(X, dtype=np.float64)
    X = np.hstack([(X - X.mean(0)) / (X.std(0) + 1e-6), np.ones((len(X), 1))])
    fold = np.arange(len(y)) % 5
    right = 0
    for k in range(5):
        tr, te = fold != k, fold == k
        w = np.linalg.solve(X[tr].T @ X[tr] + 10.0 * np.eye(X.shape[1]), X[tr].T @ (2 * y[tr] - 1))
        right += int(((X[te] @ w > 0) == (y[te] > 0)).sum())
    prior = max(y.mean(), 1 - y.mean())
    print(f"{model_dir}: questions told from statements by its encoder's last frames, 5-fold: "
          f"{100 * right / len(y):.1f}% right (always the commoner answer: {100 * prior:.1f}%; {len(y)} clips)")


def learn(folder, n, epochs, model_dir=None, layer=None, save=None):
    import glob
    import time
    import torch
    import torch.nn as nn
    from common import Features
    torch.manual_seed(0)
    frozen = layer in ("sub", "enc")   # a trained model's frozen layer; else the features
    L = 25 if frozen else 200  # the last 2 s of frames (fewer are zero-padded in front)
    clips, y = [], []
    for shard in sorted(glob.glob(os.path.join(folder, "train-*.npz"))):
        z = np.load(shard)
        audio, off, texts = z["audio"], z["offsets"], z["texts"]   # (each z[...] reads the file)
        for i in range(min(len(texts), n - len(clips))):
            clips.append(audio[off[i]: off[i + 1]])
            y.append(str(texts[i]).endswith("?"))
        if len(clips) == n:
            break
    n, y = len(clips), np.array(y)
    model = None
    if frozen:
        from common import encoder_lengths
        from export import load_hf
        model = load_hf(model_dir)
    feats, X = Features(), None
    with torch.no_grad():
        for s in range(0, n, 64):
            ws = [c.astype(np.float32) / 32768 for c in clips[s: s + 64]]
            lens = torch.tensor([len(w) for w in ws])
            x = torch.zeros(len(ws), int(lens.max()))
            for j, w in enumerate(ws):
                x[j, : len(w)] = torch.from_numpy(w)
            f, m = feats(x, lens)
            frames, valid = f, m.sum(1)
            if model is not None:
                enc = model.model.encoder(f, attention_mask=m.long(), output_hidden_states=True)
                frames = enc.hidden_states[0] if layer == "sub" else enc.last_hidden_state
                valid = encoder_lengths(valid)
            if X is None:
                X = np.zeros((n, L, frames.shape[2]), np.float32)
            for j in range(len(ws)):
                t = int(valid[j])
                k = min(t, L)
                X[s + j, L - k:] = frames[j, t - k: t].numpy()

    sub = None
    if layer in ("sub-fresh", "sub-model"):
        # a subsampling of the released architecture, trained with the head: the deep144 size's
        # from scratch (train.py's torch init), or --model's own as the start
        import train as T
        if layer == "sub-model":
            from export import load_hf
            sub = load_hf(model_dir).model.encoder.subsampling
        else:
            m = T.make_model("deep144", 2048, 4, 0.0)
            T.init_weights(m, "torch")
            sub = m.model.encoder.subsampling
        sub.train()

    class Net(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.sub = sub
            if sub is not None:
                cin = sub.linear.out_features
            if frozen or sub is not None:  # 25 frames of 80 ms
                self.conv = nn.Sequential(nn.Conv1d(cin, 96, 3, padding=1), nn.ReLU())
            else:      # 200 frames of 10 ms
                self.conv = nn.Sequential(nn.Conv1d(cin, 96, 5, padding=2), nn.ReLU(),
                                          nn.Conv1d(96, 96, 5, padding=2, stride=2), nn.ReLU(),
                                          nn.Conv1d(96, 96, 5, padding=2, stride=2), nn.ReLU())
            self.gru = nn.GRU(96, 96, batch_first=True)
            self.out = nn.Linear(96, 2)

        def forward(self, x):
            if self.sub is not None:   # [B, mel, 200] features -> [B, d, 25] frames
                x = self.sub(x.transpose(1, 2)).transpose(1, 2)
            _, h = self.gru(self.conv(x).transpose(1, 2))
            return self.out(h[-1])

    xt, yt = torch.from_numpy(X).transpose(1, 2).contiguous(), torch.from_numpy(y.astype(np.int64))
    ntr = int(0.85 * n)
    net = Net(X.shape[2])
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    prior = max(y[ntr:].mean(), 1 - y[ntr:].mean())
    t0, best = time.time(), 0.0
    for ep in range(epochs):
        net.train()
        perm = torch.randperm(ntr)
        for b in range(0, ntr, 64):
            idx = perm[b: b + 64]
            loss = nn.functional.cross_entropy(net(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            held = (net(xt[ntr:]).argmax(1) == yt[ntr:]).float().mean().item()
            train = (net(xt[:2000]).argmax(1) == yt[:2000]).float().mean().item()
        print(f"epoch {ep + 1}: right on training clips {100 * train:.1f}%, on the {n - ntr} held out "
              f"{100 * held:.1f}% (always the commoner answer: {100 * prior:.1f}%), {time.time() - t0:.0f} s", flush=True)
        if save and sub is not None and held > best:
            best = held
            save_front(save, net, ep + 1, held)


def save_front(path, net, epoch, held):
    """The trained subsampling and its head as train.py --init-question reads them: the head
    as train.QuestionHead (one logit: the two classes' difference, the same decision)."""
    import torch
    w, b = net.out.weight.detach(), net.out.bias.detach()
    head = {"conv.weight": net.conv[0].weight.detach(), "conv.bias": net.conv[0].bias.detach(),
            **{"gru." + k: v.detach() for k, v in net.gru.state_dict().items()},
            "out.weight": (w[1] - w[0])[None, :], "out.bias": (b[1] - b[0])[None]}
    torch.save({"subsampling": {k: v.detach() for k, v in net.sub.state_dict().items()}, "head": head,
                "epoch": epoch, "held_out_right": held}, path + ".tmp")
    os.replace(path + ".tmp", path)
    print(f"{path}: the subsampling and head of epoch {epoch} ({100 * held:.1f}% held out)", flush=True)


def share(ckpt, npz, n_q, n_s, weight):
    """How much of the subsampling's gradient a question loss would be in a fine-tune from
    `ckpt` (train.py's small.pt, with its CTC head): the norm of the gradient of the ASR
    losses (decoder CE + CTC, weight 1 each) and of `weight` x the sub head's loss (a fresh
    head, as a run starts it) on the subsampling's weights, for one batch of n_q questions
    and n_s statements of a data.py shard, and the cosine between the two."""
    import sentencepiece as spm
    import torch
    import torch.nn.functional as F
    import train as T
    from common import Features, encoder_lengths, prompt_ids
    torch.manual_seed(0)
    ck = torch.load(ckpt, map_location="cpu", weights_only=False)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(HERE, "..", "..", "models", "cohere-demo-en",
                                                            "tokenizer.model"))   # every run's since run 2
    prompt = prompt_ids(sp)
    model = T.make_model(ck["args"]["size"], sp.get_piece_size(), prompt[0], 0.0)
    T.init_weights(model, "keep")                    # the fixed position table (small.pt leaves it out)
    bad = model.load_state_dict({k: v.float() for k, v in ck["model"].items()}, strict=False)
    if bad.unexpected_keys or set(bad.missing_keys) - {T.POS_KEY}:
        raise SystemExit(f"{ckpt}: does not fit --size {ck['args']['size']}: {bad}")
    ctc = torch.nn.Linear(model.config.encoder_config.hidden_size, sp.get_piece_size())
    ctc.load_state_dict({k: v.float() for k, v in ck["ctc"].items()})
    head, sub_out = T.QuestionHead(model.config.encoder_config.hidden_size), {}
    model.model.encoder.subsampling.register_forward_hook(lambda m, i, o: sub_out.__setitem__("h", o))

    class Shard:       # what train.collate reads
        pass
    z = np.load(npz)
    audio, off, texts = z["audio"], z["offsets"], [str(t) for t in z["texts"]]   # (each z[...] reads the file)
    d = Shard()
    d.audio = [audio[off[i]: off[i + 1]] for i in range(len(texts))]
    d.lens = np.array([len(a) for a in d.audio])
    d.tokens = [np.array(sp.encode(t), dtype=np.int64) for t in texts]
    idx = np.array([i for i, t in enumerate(texts) if t.endswith("?")][:n_q] +
                   [i for i, t in enumerate(texts) if t.endswith(".")][:n_s])
    x, lens, inp, tgt, ctc_t, ctc_l = T.collate(d, idx, prompt, torch.device("cpu"))
    f, m = Features()(x, lens)
    enc = model.model.encoder(f, attention_mask=m.long())
    out = model(encoder_outputs=enc, attention_mask=m.long(), decoder_input_ids=inp, use_cache=False)
    ce = F.cross_entropy(out.logits.transpose(1, 2), tgt, ignore_index=-100)
    elen = encoder_lengths(m.sum(1))
    lp = F.log_softmax(ctc(enc.last_hidden_state), -1).transpose(0, 1)
    ctc_loss = F.ctc_loss(lp, ctc_t, elen, ctc_l, blank=0, reduction="sum", zero_infinity=True) / ctc_l.sum()
    y = torch.tensor([texts[i].endswith("?") for i in idx], dtype=torch.float32)
    q = F.binary_cross_entropy_with_logits(head(sub_out["h"], elen), y)
    weights = list(model.model.encoder.subsampling.parameters())
    g_asr = torch.autograd.grad(ce + ctc_loss, weights, retain_graph=True)
    g_q = torch.autograd.grad(weight * q, weights)
    norm_asr = torch.sqrt(sum((g ** 2).sum() for g in g_asr)).item()
    norm_q = torch.sqrt(sum((g ** 2).sum() for g in g_q)).item()
    cos = (sum((a * b).sum() for a, b in zip(g_asr, g_q)) / (norm_asr * norm_q)).item()
    print(f"{ckpt}, {len(idx)} clips of {npz}: the subsampling's gradient norm from the ASR losses (CE "
          f"{ce.item():.3f} + CTC {ctc_loss.item():.3f}) {norm_asr:.4g}, from {weight:g} x the question loss "
          f"({q.item():.3f}, a fresh sub head) {norm_q:.4g}: {100 * norm_q / norm_asr:.1f}% of it, cosine {cos:+.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["pairs", "probe", "learn", "share"])
    ap.add_argument("--ckpt", default=None, help="share: train.py's small.pt to start from")
    ap.add_argument("--weight", type=float, default=1.0, help="share: the question loss's weight")
    ap.add_argument("--n", type=int, default=0, help="pairs (60) or clips (probe 1200, learn 12000)")
    ap.add_argument("--data", default=None, help="learn: a folder of data.py's train-*.npz shards")
    ap.add_argument("--epochs", type=int, default=25)
    ap.add_argument("--layer", choices=["sub", "enc", "sub-fresh", "sub-model"], default=None,
                    help="learn: the --model's frozen subsampling or encoder output instead of the "
                         "features; sub-fresh / sub-model: the features through a subsampling trained "
                         "with the head (deep144's from scratch, or --model's as the start)")
    ap.add_argument("--save", default=None,
                    help="learn with --layer sub-fresh/sub-model: write the subsampling and head of the best "
                         "held-out epoch here, for train.py --init-question")
    ap.add_argument("--model", default=os.path.join(HERE, "..", "..", "models", "cohere-demo-en"))
    ap.add_argument("--npz", default=None)
    default_exe = os.path.join(HERE, "..", "..", ".demo", "espeak", "espeak-ng")
    ap.add_argument("--espeak", default=default_exe if os.path.exists(default_exe) else "espeak-ng")
    a = ap.parse_args()
    if a.what == "pairs":
        pairs(a.n or 60, a.espeak)
    elif a.what == "share":
        if not a.ckpt or not a.npz:
            raise SystemExit("share needs --ckpt (train.py's small.pt) and --npz (a data.py training shard)")
        share(a.ckpt, a.npz, 12, 28, a.weight)
    elif a.what == "learn":
        if not a.data:
            raise SystemExit("learn needs --data (a folder of data.py's train-*.npz shards)")
        if a.save and a.layer not in ("sub-fresh", "sub-model"):
            raise SystemExit("--save keeps a trained subsampling: it needs --layer sub-fresh or sub-model")
        learn(a.data, a.n or 12000, a.epochs, a.model, a.layer, a.save)
    else:
        if not a.npz:
            raise SystemExit("probe needs --npz (a training shard of data.py)")
        probe(a.model, a.npz, a.n or 1200)


if __name__ == "__main__":
    main()
