"""What the demo-model scripts share: the log-mel features, the prompt, WAV files.

The features are the ones our C engine and transformers' CohereAsrFeatureExtractor compute
(spec section 4: pre-emphasis 0.97, 512-point STFT of a 400-sample symmetric Hann window,
hop 160, power spectrum, Slaney mel bank of 128 filters, log(x + 2^-24), per-bin
normalisation over the floor(N/160) valid frames with unbiased variance and eps on the std),
written here as a batched torch function so that training computes them on the GPU.
`check_features.py` proves them equal to transformers' extractor and to the fixtures that
our engine is tested against. There is no dither (our engine has none).

The prompt is built by name from the tokenizer, as the engine builds it (spec 5.2).
Not here: resampling (data.py makes 16 kHz audio), SpecAugment (train.py).
"""
import math
import wave

import numpy as np
import torch

SR = 16000
N_FFT, WIN, HOP, NMEL, PREEMPH, GUARD, EPS = 512, 400, 160, 128, 0.97, 2.0 ** -24, 1e-5

PROMPT_PIECES = ["\u2581", "<|startofcontext|>", "<|startoftranscript|>", "<|emo:undefined|>",
                 "<|en|>", "<|en|>", "<|pnc|>", "<|noitn|>", "<|notimestamp|>", "<|nodiarize|>"]


def mel_filters() -> np.ndarray:
    """librosa.filters.mel(sr=16000, n_fft=512, n_mels=128, norm="slaney", htk=False), float32,
    in librosa's order of arithmetic (the fixtures' mel_filters; [128, 257])."""
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, math.log(6.4) / 27.0

    def hz_to_mel(f):
        return min_log_mel + math.log(f / min_log_hz) / logstep if f >= min_log_hz else f / f_sp

    def mel_to_hz(m):
        m = np.asarray(m, dtype=np.float64)
        f = f_sp * m
        t = m >= min_log_mel
        f[t] = min_log_hz * np.exp(logstep * (m[t] - min_log_mel))
        return f

    fft_f = np.fft.rfftfreq(n=N_FFT, d=1.0 / SR)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(SR / 2), NMEL + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fft_f)
    w = np.zeros((NMEL, 1 + N_FFT // 2), dtype=np.float32)
    for i in range(NMEL):
        w[i] = np.maximum(0, np.minimum(-ramps[i] / fdiff[i], ramps[i + 2] / fdiff[i + 1]))
    w *= (2.0 / (mel_f[2:NMEL + 2] - mel_f[:NMEL]))[:, None]
    return w


class Features(torch.nn.Module):
    """Batched features: waveforms [B, N] float (zero-padded on the right) and their lengths
    [B] -> (features [B, T, 128] with padded frames 0, mask [B, T] bool: t < floor(len/160)),
    T = 1 + floor(N/160). Runs in float32 whatever autocast says."""

    def __init__(self):
        super().__init__()
        self.register_buffer("fb", torch.from_numpy(mel_filters()), persistent=False)
        self.register_buffer("window", torch.hann_window(WIN, periodic=False), persistent=False)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, lens: torch.Tensor):
        with torch.autocast(device_type=x.device.type, enabled=False):
            x = x.float()
            n = x.shape[1]
            tm = torch.arange(n, device=x.device)[None, :] < lens[:, None]
            x = torch.cat([x[:, :1], x[:, 1:] - PREEMPH * x[:, :-1]], dim=1).masked_fill(~tm, 0.0)
            st = torch.stft(x, N_FFT, hop_length=HOP, win_length=WIN, window=self.window,
                            return_complex=True, pad_mode="constant")
            power = torch.sqrt(torch.view_as_real(st).pow(2).sum(-1)).pow(2)
            mel = torch.log(self.fb @ power + GUARD).transpose(1, 2)          # [B, T, 128]
            flen = torch.div(lens, HOP, rounding_mode="floor")
            mask = torch.arange(mel.shape[1], device=x.device)[None, :] < flen[:, None]
            m = mask.unsqueeze(-1)
            xm = mel * m
            mean = (xm.sum(1) / flen.unsqueeze(-1)).unsqueeze(1)
            var = (((xm - mean) ** 2) * m).sum(1) / (flen - 1).clamp(min=1).unsqueeze(-1)
            f = ((mel - mean) / (torch.sqrt(var).unsqueeze(1) + EPS)) * m
        return f, mask


def decoder_positions(n: int, d: int) -> torch.Tensor:
    """The decoder's fixed position table as the original model computes it (spec 3.1:
    sin at even dims, cos at odd, frequency exp(-ln(10000)/d * 2i), divided by sqrt(d))."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe / math.sqrt(d)


def encoder_lengths(mel_lens: torch.Tensor) -> torch.Tensor:
    """Valid encoder frames for valid mel frames (spec 2.1: three times floor((L-1)/2)+1)."""
    L = mel_lens
    for _ in range(3):
        L = torch.div(L - 1, 2, rounding_mode="floor") + 1
    return L


def prompt_ids(sp) -> list:
    """The 10-token English prompt with punctuation, looked up by name (spec 5.2)."""
    ids = [sp.piece_to_id(p) for p in PROMPT_PIECES]
    for p, i in zip(PROMPT_PIECES, ids):
        if sp.id_to_piece(i) != p:
            raise ValueError(f"tokenizer has no piece {p!r}")
    return ids


def write_wav(path, pcm: np.ndarray):
    """16 kHz mono 16-bit WAV from int16 samples."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(np.ascontiguousarray(pcm, dtype="<i2").tobytes())


def read_wav(path) -> np.ndarray:
    """int16 samples of a 16 kHz mono 16-bit WAV."""
    with wave.open(str(path), "rb") as w:
        if (w.getnchannels(), w.getsampwidth(), w.getframerate()) != (1, 2, SR):
            raise ValueError(f"{path}: not 16 kHz mono 16-bit")
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").copy()


def edit_distance(a: list, b: list) -> int:
    """Levenshtein distance between two token lists."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def normalise(text: str) -> str:
    """Lower case, punctuation removed: the WER "with punctuation and casing normalised away"."""
    return " ".join("".join(c for c in text.lower() if c.isalnum() or c.isspace() or c == "'").split())


def wer(refs: list, hyps: list, norm: bool = False) -> float:
    """Word error rate in percent over a corpus (errors / reference words)."""
    e = n = 0
    for r, h in zip(refs, hyps):
        if norm:
            r, h = normalise(r), normalise(h)
        r, h = r.split(), h.split()
        e += edit_distance(r, h)
        n += len(r)
    return 100.0 * e / max(1, n)
