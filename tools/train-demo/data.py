"""Synthesised English speech for the demo model: sentences of common words, spoken by espeak-ng.

Every clip is reproducible from (--seed, its index) alone, whatever --jobs is:
- a sentence of 3-12 words (--min-words/--max-words) drawn from words.txt with a weight
  1/(rank+30)^0.8 (common words often, the rest of the list still now and then), or from its
  first --vocab words; capitalised, ending in "." (or "?" one time in ten; --questions P:
  training sentences end in "?" with probability P, the held-out ones stay as they are);
- a voice: one of espeak-ng's English accents with a +m1..+m7 / +f1..+f5 variant (or none),
  or with --named P, for that fraction of the training clips, one of 69 named variants
  (NAMED_VARIANTS: Annie, klatt3, grandpa, ...); the held-out split uses variants
  (HELDOUT_VARIANTS) that training never hears;
- speed 120-220 words a minute, pitch 20-80, amplitude 70-150, sometimes a longer word gap;
- resampled from espeak-ng's 22,050 Hz to 16 kHz (polyphase, 320/441); training clips made
  with --speed-perturb P are also resampled by a random factor in [1-P, 1+P] (tempo, pitch
  and formants move together, Kaldi's speed perturbation: voices training never heard are
  what the held-out split tests), then a random gain,
  a short synthetic reverberation (exponentially decaying noise, RT60 50-350 ms) half of
  the time, white/pink/brown noise at 12-40 dB SNR most of the time, and 50-400 ms of
  leading and trailing room tone.
--clean turns off all of that variation (one voice, one speed, no noise): the overfit test.
The held-out clips are the same whatever --speed-perturb is (they draw nothing for it).

Output in --out: train-NNNN.npz shards (int16 audio concatenated, offsets, texts, voices) of
--shard clips each, and heldout/NNNN.wav (16 kHz mono 16-bit) with heldout.tsv (file, text,
voice). A shard is written under a temporary name and renamed when complete, so a reader
(train.py --grow) never sees half of one. The held-out sentences are drawn first from their own random stream and training
never uses the same word sequence, whatever its final mark.

usage: python3 data.py --out .demo/data --train 40000 --heldout 200 --seed 1 --jobs 16
       (espeak-ng from --espeak, default .demo/espeak/espeak-ng when espeak_bundle.sh made it)
Not here: features (train.py computes them on the fly), text normalisation beyond
capitalisation, digits (numbers are written as words), other languages.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from multiprocessing import Pool

import numpy as np
from scipy.signal import fftconvolve, resample_poly

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SR, write_wav  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ACCENTS = ["en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd",
           "en-029", "en-us-nyc"]
TRAIN_VARIANTS = ["", "m1", "m2", "m3", "m4", "m5", "m7", "f1", "f2", "f3", "f5"]
HELDOUT_VARIANTS = ["m6", "f4"]
# espeak-ng's named variants (voices/!v), for --named P of the training clips: more vocal
# tracts than the 11 numbered ones, so that the held-out voices are one more among many.
# Left out: the held-out m6 and f4; linda and belinda (f4's upper formants, copied);
# whisper, whisperf and caleb (no voicing); fast (a test of espeak-ng's speed limit); the
# robots and effects (robosoft*, UniRobot, anikaRobot, Demonic, croak, Tweaky, "Mr serious").
NAMED_VARIANTS = ["Alex", "Alicia", "Andrea", "Andy", "Annie", "AnxiousAndy", "Denis", "Diogo", "Gene",
                  "Gene2", "Henrique", "Hugo", "Jacky", "Lee", "Marco", "Mario", "Michael", "Mike", "Nguyen",
                  "RicishayMax", "RicishayMax2", "RicishayMax3", "Storm", "adam", "anika", "announcer",
                  "antonio", "aunty", "benjamin", "boris", "david", "ed", "edward", "edward2", "grandma",
                  "grandpa", "gustave", "iven", "iven2", "iven3", "iven4", "john", "kaukovalta", "klatt",
                  "klatt2", "klatt3", "klatt4", "klatt5", "klatt6", "m8", "marcelo", "max", "michel", "miguel",
                  "norbert", "pablo", "paul", "pedro", "quincy", "rob", "robert", "sandro", "shelby", "steph",
                  "steph2", "steph3", "travis", "victor", "zac"]
ESPEAK_SR = 22050


def load_words(vocab):
    words = [w.strip() for w in open(os.path.join(HERE, "words.txt"), encoding="utf-8") if w.strip()]
    return words[:vocab] if vocab else words


def make_sentence(rng, words, probs, lo, hi, questions=0.1):
    n = int(rng.integers(lo, hi + 1))
    ws = [words[i] for i in rng.choice(len(words), size=n, p=probs)]
    s = " ".join(ws)
    s = s[0].upper() + s[1:]
    return s + ("?" if rng.random() < questions else ".")


def item_rng(seed, split, i):
    return np.random.default_rng([seed, 0 if split == "train" else 1, i])


def voice_params(rng, split, clean, named=0.0):
    if clean:
        return dict(voice="en-us", speed=160, pitch=50, amp=100, gap=0)
    variants = TRAIN_VARIANTS if split == "train" else HELDOUT_VARIANTS
    if split == "train" and named > 0 and rng.random() < named:     # (the held-out draws stay as they were)
        variants = NAMED_VARIANTS
    acc = ACCENTS[int(rng.integers(len(ACCENTS)))]
    var = variants[int(rng.integers(len(variants)))]
    return dict(voice=acc + ("+" + var if var else ""), speed=int(rng.integers(120, 221)),
                pitch=int(rng.integers(20, 81)), amp=int(rng.integers(70, 151)),
                gap=int(rng.integers(1, 4)) if rng.random() < 0.15 else 0)


def espeak(exe, text, p):
    cmd = [exe, "-v", p["voice"], "-s", str(p["speed"]), "-p", str(p["pitch"]), "-a", str(p["amp"]),
           "-g", str(p["gap"]), "--stdout", text]
    raw = subprocess.run(cmd, check=True, capture_output=True).stdout
    # --stdout writes a streaming WAV header (sizes unknown): find the data chunk by hand
    k = raw.find(b"data")
    if raw[:4] != b"RIFF" or k < 0:
        raise RuntimeError(f"espeak-ng gave no WAV for {text!r}")
    return np.frombuffer(raw[k + 8:], dtype="<i2").astype(np.float32) / 32768.0


def coloured_noise(rng, n):
    white = rng.standard_normal(n)
    kind = rng.integers(3)
    if kind == 0:
        return white
    spec = np.fft.rfft(white)
    f = np.arange(len(spec), dtype=np.float64)
    f[0] = 1.0
    spec /= f ** (0.5 if kind == 1 else 1.0)        # pink or brown
    x = np.fft.irfft(spec, n)
    return x / (np.std(x) + 1e-12)


def augment(rng, x):
    """x with reverberation, padding, gain and noise; and what was drawn ("rt0.21 snr23",
    "rt- snr-" for neither), which the clip's voice string carries for breakdown.py."""
    rt60, snr = None, None
    if rng.random() < 0.5:                             # short reverberation
        rt60 = rng.uniform(0.05, 0.35)
        n = int(rt60 * SR)
        t = np.arange(n) / SR
        ir = rng.standard_normal(n) * np.exp(-6.9 * t / rt60)
        ir[0] = 1.0 / rng.uniform(0.3, 1.0)            # direct path against the tail
        wet = fftconvolve(x, ir)[: len(x) + n // 2]
        x = wet / (np.max(np.abs(wet)) + 1e-9) * np.max(np.abs(x))
    pad = [int(rng.uniform(0.05, 0.4) * SR), int(rng.uniform(0.05, 0.4) * SR)]
    x = np.concatenate([np.zeros(pad[0]), x, np.zeros(pad[1])])
    peak = rng.uniform(0.1, 0.95)                      # gain
    x = x / (np.max(np.abs(x)) + 1e-9) * peak
    if rng.random() < 0.85:                            # noise at 12-40 dB SNR (of the speech power)
        p_sig = np.mean(x[pad[0]: len(x) - pad[1]] ** 2)
        snr = rng.uniform(12, 40)
        x = x + coloured_noise(rng, len(x)) * np.sqrt(p_sig / 10 ** (snr / 10))
    else:                                              # a faint floor, as any recording has
        x = x + rng.standard_normal(len(x)) * peak * 1e-4
    return x, ("rt-" if rt60 is None else f"rt{rt60:.2f}") + " " + ("snr-" if snr is None else f"snr{snr:.0f}")


def synth_one(job):
    exe, split, seed, i, text, clean, perturb, named = job
    rng = item_rng(seed, split, i)
    p = voice_params(rng, split, clean, named)
    x = espeak(exe, text, p)
    x = resample_poly(x.astype(np.float64), 320, 441)
    if split == "train" and perturb > 0 and not clean:
        # factor f: the clip plays f times as fast (resampled to 1/f of its length)
        f = rng.uniform(1.0 - perturb, 1.0 + perturb)
        x = resample_poly(x, 200, int(round(200 * f)))
        p["voice"] += f" x{int(round(200 * f)) / 200:.3f}"
    drawn = ""
    if not clean:
        x, drawn = augment(rng, x)
        drawn = " " + drawn
    pcm = np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)
    return pcm, p["voice"] + f" s{p['speed']} p{p['pitch']} a{p['amp']} g{p['gap']}" + drawn


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--train", type=int, default=40000)
    ap.add_argument("--heldout", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--shard", type=int, default=4000)
    ap.add_argument("--vocab", type=int, default=0, help="use only the first N words (0: all)")
    ap.add_argument("--min-words", type=int, default=3)
    ap.add_argument("--max-words", type=int, default=12)
    ap.add_argument("--clean", action="store_true", help="one voice, one speed, no noise")
    ap.add_argument("--speed-perturb", type=float, default=0.0,
                    help="training clips: resample by a random factor in [1-P, 1+P] (0: off)")
    ap.add_argument("--named", type=float, default=0.0,
                    help="training clips: this fraction spoken with one of espeak-ng's named variants "
                         "(NAMED_VARIANTS) instead of +m1..+f5 (0: none)")
    ap.add_argument("--questions", type=float, default=0.1,
                    help="training sentences: the fraction that end in \"?\" (espeak-ng speaks them with a rising "
                         "end; the held-out sentences keep 0.1)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the shards already in --out that were made with the same settings (they are the "
                         "same clips: each depends on the seed and its index only) and make only the missing ones")
    default_exe = os.path.join(HERE, "..", "..", ".demo", "espeak", "espeak-ng")
    ap.add_argument("--espeak", default=default_exe if os.path.exists(default_exe) else "espeak-ng")
    a = ap.parse_args()

    words = load_words(a.vocab)
    probs = 1.0 / (np.arange(len(words)) + 30.0) ** 0.8
    probs /= probs.sum()
    srng_h = np.random.default_rng([a.seed, 100])
    srng_t = np.random.default_rng([a.seed, 200])
    held = []
    while len(held) < a.heldout:
        s = make_sentence(srng_h, words, probs, a.min_words, a.max_words)
        if s not in held:
            held.append(s)
    held_words = {s[:-1] for s in held}            # a held-out word sequence, asked or told, is never trained
    train = []
    while len(train) < a.train:
        s = make_sentence(srng_t, words, probs, a.min_words, a.max_words, a.questions)
        if s[:-1] not in held_words:
            train.append(s)

    os.makedirs(os.path.join(a.out, "heldout"), exist_ok=True)
    t0 = time.time()
    with Pool(a.jobs) as pool:
        tsv_path = os.path.join(a.out, "heldout.tsv")
        have = open(tsv_path, encoding="utf-8").read().splitlines() if os.path.exists(tsv_path) else []
        if not (a.keep and [ln.split("\t")[1] for ln in have] == held):
            jobs = [(a.espeak, "heldout", a.seed, i, s, a.clean, 0.0, 0.0) for i, s in enumerate(held)]
            with open(tsv_path + ".part", "w", encoding="utf-8") as tsv:
                for i, (pcm, voice) in enumerate(pool.imap(synth_one, jobs, chunksize=8)):
                    name = f"{i:04d}.wav"
                    write_wav(os.path.join(a.out, "heldout", name), pcm)
                    tsv.write(f"heldout/{name}\t{held[i]}\t{voice}\n")
            os.replace(tsv_path + ".part", tsv_path)
        seconds = 0.0
        for sh in range(0, a.train, a.shard):
            part = train[sh: sh + a.shard]
            shard = os.path.join(a.out, f"train-{sh // a.shard:04d}.npz")
            if a.keep and os.path.exists(shard):
                with np.load(shard) as z:
                    made = ((float(z["speed_perturb"]), bool(z["clean"]),
                             float(z["named"]) if "named" in z.files else 0.0) if "clean" in z.files else None)
                    if list(z["texts"]) == part and made == (a.speed_perturb, a.clean, a.named):
                        seconds += z["offsets"][-1] / SR
                        continue
            jobs = [(a.espeak, "train", a.seed, sh + i, s, a.clean, a.speed_perturb, a.named)
                    for i, s in enumerate(part)]
            res = pool.map(synth_one, jobs, chunksize=16)
            pcms = [r[0] for r in res]
            offsets = np.cumsum([0] + [len(p) for p in pcms]).astype(np.int64)
            seconds += offsets[-1] / SR
            part_file = os.path.join(a.out, f"part-{sh // a.shard:04d}.npz")
            np.savez(part_file, audio=np.concatenate(pcms),
                     offsets=offsets, texts=np.array(part), voices=np.array([r[1] for r in res]),
                     speed_perturb=np.float64(a.speed_perturb), clean=np.bool_(a.clean), named=np.float64(a.named))
            os.replace(part_file, shard)
            print(f"  {sh + len(part)}/{a.train} clips, {seconds / 3600:.2f} h, {time.time() - t0:.0f} s",
                  flush=True)
    meta = dict(seed=a.seed, train=a.train, heldout=a.heldout, vocab=len(words), clean=a.clean,
                speed_perturb=a.speed_perturb, named=a.named, questions=a.questions,
                min_words=a.min_words, max_words=a.max_words, train_hours=seconds / 3600,
                seconds=time.time() - t0)
    json.dump(meta, open(os.path.join(a.out, "meta.json"), "w"), indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
