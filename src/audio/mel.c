/*
 * mel.c: the log-mel frontend of spec section 4, computed to match the
 * transformers CohereAsrFeatureExtractor (and the fixtures it made).
 *
 * The pipeline for one clip of n samples at 16 kHz:
 *   pre-emphasis 0.97 (y[0] = x[0]), done in float32 as torch does;
 *   centred STFT: 256 zeros each side, n_fft 512, hop 160, the symmetric Hann
 *   window of 400 zero-padded centred in 512 (offset 56), n/160 + 1 frames;
 *   power |X|², Slaney mel filters (128 × 257, librosa's float32 numbers),
 *   log(mel + 2^-24), then per-bin normalisation over the n/160 valid frames
 *   with the unbiased variance and eps 1e-5 on the standard deviation; the
 *   last (invalid) frame is zero.
 *
 * Precision: the spectrum, the mel sums, the logs and the statistics are in
 * double (the reference ran torch in float32, so we are the more exact of the
 * two; the fixtures agree within about 1e-5). The filter bank is built exactly
 * as librosa builds it (float64 formulas, float32 storage, the normalisation
 * multiplied in double and rounded again), which reproduces the fixture's
 * `mel_filters` to a few 1e-9.
 *
 * Speed (about 45 ms per 35 s clip before this shape): frames go through the
 * FFT CT_FFT_LANES at a time, interleaved, so that the FFT, the power, the
 * sparse filter sums (each filter only over its [band_lo, band_hi)) and the
 * log are loops over lanes of constant length that the compiler vectorises;
 * the log is our own branch-free one (log_inplace) because libm's is a call
 * per value; the normalisation walks logmel frame by frame. Each lane's
 * arithmetic is what the frame-by-frame code did, in the same order, except
 * the FFT's butterflies and the log's last ulps: the features agree with the
 * previous code to float32 rounding.
 *
 * Deliberately not here: dither. transformers adds 1e-5·randn from torch's CPU
 * generator by default; it cannot be reproduced in C and only perturbs the
 * features at the noise floor, so this frontend is the reference with
 * dither = 0 (spec 4). ct_mel_compute_batch runs whole clips in parallel
 * (one clip per task, taken from a shared counter so uneven lengths
 * balance), each thread reusing its own buffers (mel_work) from clip to
 * clip; ct_mel_compute_padded does the same straight into a padded batch
 * (a padded row is the single clip's features followed by zero frames), so
 * the pipeline neither allocates nor copies a clip's features apart.
 * ct_mel_grid_padded writes, instead of features, each clip's window grid
 * (pre-emphasis and placement only) for the same arithmetic as graph nodes
 * on a GPU (src/model/frontend.c), and ct_mel_dft_table and
 * ct_mel_filter_pairs give that graph its constants. Not here either: any
 * other sample rate (resample first, resample.c).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "audio.h"
#include "base.h"
#include "fft.h"

#define MEL_SR 16000
#define MEL_N_MELS 128
#define MEL_N_FFT 512
#define MEL_WIN 400
#define MEL_HOP 160
#define MEL_PREEMPH 0.97f
#define MEL_LOG_GUARD 5.9604644775390625e-08 /* 2^-24 */
#define MEL_NORM_EPS 1e-5

/* librosa's Slaney mel scale (htk = False): linear below 1 kHz, logarithmic
 * above, in float64 with the same operation order as librosa. */
static const double slaney_f_sp = 200.0 / 3.0;

static double hz_to_mel(double hz) {
    double min_log_mel = (1000.0 - 0.0) / slaney_f_sp;
    double logstep = log(6.4) / 27.0;
    if (hz >= 1000.0) return min_log_mel + log(hz / 1000.0) / logstep;
    return (hz - 0.0) / slaney_f_sp;
}

static double mel_to_hz(double mel) {
    double min_log_mel = (1000.0 - 0.0) / slaney_f_sp;
    double logstep = log(6.4) / 27.0;
    if (mel >= min_log_mel) return 1000.0 * exp(logstep * (mel - min_log_mel));
    return 0.0 + slaney_f_sp * mel;
}

/* librosa.filters.mel(sr, n_fft, n_mels, fmin 0, fmax sr/2, norm "slaney"),
 * dtype float32: weights are stored as float32 as soon as the triangles are
 * made, then multiplied in place by the float64 area normalisation
 * 2/(f[i+2] - f[i]) and rounded to float32 again. */
static tg_status build_filters(float *w, int n_mels, int n_fft, int sr) {
    int n_bins = n_fft / 2 + 1;
    double *fftfreq = tg_malloc((size_t)n_bins * sizeof *fftfreq);
    double *mel_f = tg_malloc((size_t)(n_mels + 2) * sizeof *mel_f);
    if (!fftfreq || !mel_f) {
        tg_free(fftfreq);
        tg_free(mel_f);
        return tg_status_new(TG_ERR_NO_MEMORY, "mel filter bank: out of memory");
    }
    /* numpy.fft.rfftfreq(n_fft, 1/sr): k · (1 / (n_fft · (1/sr))) */
    double val = 1.0 / (n_fft * (1.0 / sr));
    for (int k = 0; k < n_bins; k++) fftfreq[k] = k * val;
    /* mel_frequencies: numpy.linspace(min_mel, max_mel, n_mels + 2) in mel,
     * back to Hz; linspace computes start + i·step and pins the last point */
    double min_mel = hz_to_mel(0.0), max_mel = hz_to_mel(sr / 2.0);
    int n_pts = n_mels + 2;
    double step = (max_mel - min_mel) / (n_pts - 1);
    for (int i = 0; i < n_pts; i++) {
        double m = i == n_pts - 1 ? max_mel : i * step + min_mel;
        mel_f[i] = mel_to_hz(m);
    }
    for (int i = 0; i < n_mels; i++) {
        double fdiff_lo = mel_f[i + 1] - mel_f[i];
        double fdiff_hi = mel_f[i + 2] - mel_f[i + 1];
        double enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
        for (int k = 0; k < n_bins; k++) {
            double lower = -(mel_f[i] - fftfreq[k]) / fdiff_lo;
            double upper = (mel_f[i + 2] - fftfreq[k]) / fdiff_hi;
            double tri = fmax(0.0, fmin(lower, upper));
            float tri32 = (float)tri;
            w[(size_t)i * n_bins + k] = (float)((double)tri32 * enorm);
        }
    }
    tg_free(fftfreq);
    tg_free(mel_f);
    return NULL;
}

void ct_mel_free(ct_mel *mel) {
    if (!mel) return;
    tg_free(mel->filters);
    tg_free(mel->window);
    tg_free(mel->band_lo);
    tg_free(mel->band_hi);
    if (mel->fft) ct_fft_free(mel->fft);
    tg_free(mel->fft);
    memset(mel, 0, sizeof *mel);
}

tg_status ct_mel_init(ct_mel *mel) {
    tg_status st = NULL;
    memset(mel, 0, sizeof *mel);
    mel->n_mels = MEL_N_MELS;
    mel->n_fft = MEL_N_FFT;
    mel->win = MEL_WIN;
    mel->hop = MEL_HOP;
    int n_bins = MEL_N_FFT / 2 + 1;
    mel->filters = tg_malloc((size_t)MEL_N_MELS * n_bins * sizeof *mel->filters);
    mel->window = tg_malloc(MEL_WIN * sizeof *mel->window);
    mel->band_lo = tg_malloc(MEL_N_MELS * sizeof *mel->band_lo);
    mel->band_hi = tg_malloc(MEL_N_MELS * sizeof *mel->band_hi);
    mel->fft = tg_calloc(1, sizeof *mel->fft);
    if (!mel->filters || !mel->window || !mel->band_lo || !mel->band_hi || !mel->fft) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "mel frontend: out of memory");
        goto fail;
    }
    if ((st = ct_fft_init(mel->fft, MEL_N_FFT))) goto fail;
    if ((st = build_filters(mel->filters, MEL_N_MELS, MEL_N_FFT, MEL_SR))) goto fail;
    for (int b = 0; b < MEL_N_MELS; b++) {
        const float *row = mel->filters + (size_t)b * n_bins;
        int lo = 0, hi = 0;
        for (int k = 0; k < n_bins; k++)
            if (row[k] != 0.0f) {
                if (hi == 0) lo = k;
                hi = k + 1;
            }
        mel->band_lo[b] = lo;
        mel->band_hi[b] = hi;
    }
    /* torch.hann_window(400, periodic=False): 0.5 − 0.5·cos(2πn/399) */
    for (int i = 0; i < MEL_WIN; i++)
        mel->window[i] = (float)(0.5 - 0.5 * cos(6.283185307179586476925286766559 * i /
                                                  (MEL_WIN - 1)));
    return NULL;
fail:
    ct_mel_free(mel);
    return tg_status_wrap(st, "initialising the mel frontend");
}

/* log(x) for x positive and normal (here x >= 2^-24), written so that the
 * loop over an array vectorises: no libm call, no branch, integer work only
 * in 64-bit add/and/or/shift. x = 2^k·z with z in [√½, √2); log z =
 * 2·atanh(s), s = (z−1)/(z+1), |s| <= 0.1716, summed to s^17 (truncation
 * below 1e-15 relative); k·ln 2 in two parts. Agrees with libm's log to a
 * few ulps of double, far below what the float32 output can show. */
static void log_inplace(double *restrict x, int n) {
    const uint64_t off = 0x3fe6a09e667f3bcdull;     /* bits of √½ */
    const uint64_t bias = 1ull << 62, emask = 0xfffull << 52;
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    for (int i = 0; i < n; i++) {
        union { double d; uint64_t u; } xv, zv, kv;
        xv.d = x[i];
        uint64_t t = xv.u - off + bias;             /* (k + 1024) in the exponent field */
        zv.u = xv.u - (t & emask) + bias;           /* z = x·2^-k */
        kv.u = 0x4330000000000000ull | (t >> 52);   /* 2^52 + k + 1024 */
        double kd = kv.d - (4503599627370496.0 + 1024.0);
        double f = zv.d - 1.0, sv = f / (2.0 + f), s2 = sv * sv;
        double p = 1.0 / 17;
        p = p * s2 + 1.0 / 15;
        p = p * s2 + 1.0 / 13;
        p = p * s2 + 1.0 / 11;
        p = p * s2 + 1.0 / 9;
        p = p * s2 + 1.0 / 7;
        p = p * s2 + 1.0 / 5;
        p = p * s2 + 1.0 / 3;
        x[i] = kd * ln2_hi + (kd * ln2_lo + 2.0 * sv * (1.0 + s2 * p));
    }
}

/* One thread's buffers for clips, grown as a clip needs and kept from clip
 * to clip (a batch's threads each reuse theirs instead of mapping ~6 MB of
 * fresh pages per 35 s clip): the padded signal, the log-mel frames in
 * double, the per-block scratch. The scratch's frame rows outside the
 * window stay zero from its calloc (nothing writes them). */
typedef struct mel_work {
    float *pad;
    double *logmel, *scratch;
    size_t cap_samples, cap_frames;
} mel_work;

static void mel_work_free(mel_work *w) {
    tg_free(w->pad);
    tg_free(w->logmel);
    tg_free(w->scratch);
    memset(w, 0, sizeof *w);
}

static tg_status mel_work_reserve(mel_work *w, size_t n) {
    size_t frames = n / MEL_HOP + 1;
    if (!w->scratch) {
        size_t n_scratch =
            ((size_t)2 * MEL_N_FFT + 2 * (size_t)(MEL_N_FFT / 2 + 1) + (size_t)MEL_N_MELS) * CT_FFT_LANES;
        if (!(w->scratch = tg_calloc(n_scratch, sizeof *w->scratch))) goto oom;
    }
    if (n > w->cap_samples) {
        tg_free(w->pad);
        if (!(w->pad = tg_malloc((n + (size_t)MEL_N_FFT) * sizeof *w->pad))) goto oom;
        w->cap_samples = n;
    }
    if (frames > w->cap_frames) {
        tg_free(w->logmel);
        if (!(w->logmel = tg_malloc(frames * MEL_N_MELS * sizeof *w->logmel))) goto oom;
        w->cap_frames = frames;
    }
    return NULL;
oom:
    mel_work_free(w);
    return tg_status_new(TG_ERR_NO_MEMORY, "mel features of %zu samples: out of memory", n);
}

/* What ct_mel_compute refuses, before anything is allocated. */
static tg_status mel_check(const float *samples, size_t n) {
    if (n == 0) return tg_status_new(TG_ERR_INVALID_ARG, "empty audio (0 samples)");
    /* the unbiased variance divides by (valid frames - 1) */
    if (n / (size_t)MEL_HOP < 2)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "audio too short: %zu samples (need at least %d, %d ms at 16 kHz)",
                             n, 2 * MEL_HOP, 2 * MEL_HOP * 1000 / MEL_SR);
    if (n / (size_t)MEL_HOP + 1 > (size_t)INT32_MAX / (size_t)MEL_N_MELS)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "audio too long for one frontend call: %zu samples", n);
    size_t i = ct_audio_first_nonfinite(samples, n);
    if (i < n)
        return tg_status_new(TG_ERR_INVALID_ARG, "audio sample %zu is %s", i,
                             isnan(samples[i]) ? "NaN" : "infinite");
    return NULL;
}

int ct_mel_frames(size_t n) {
    return n / MEL_HOP + 1 > (size_t)INT32_MAX ? INT32_MAX : (int)(n / MEL_HOP + 1);
}

/* The features of one checked clip into feat ([n/160 + 1][128]), with w's
 * buffers (mw, reserved for n). */
static void mel_into(const ct_mel *mel, const float *samples, size_t n, mel_work *mw, float *feat) {
    enum { L = CT_FFT_LANES };
    /* the sizes are ct_mel_init's constants, not mel's fields, so that the
     * loops below have trip counts the compiler knows (at -O2 it vectorises
     * only loops that need no remainder) */
    enum { n_mels = MEL_N_MELS, n_fft = MEL_N_FFT, hop = MEL_HOP, win = MEL_WIN };
    enum { n_bins = n_fft / 2 + 1, half = n_fft / 2, win_off = (n_fft - win) / 2 };
    float *pad = mw->pad;
    double *logmel = mw->logmel, *scratch = mw->scratch;
    /* the pre-emphasised signal with the STFT's n_fft/2 zeros on each side,
     * so that every frame reads n_fft samples without bounds checks */
    memset(pad, 0, half * sizeof *pad);
    memset(pad + half + n, 0, half * sizeof *pad);
    const int n_valid = (int)(n / (size_t)hop);
    const int n_frames = n_valid + 1;
    /* per block of L frames: the windowed frames [n_fft][L], the FFT's work
     * [n_fft][L], the spectrum's real and imaginary parts (the real part
     * becomes the power) [n_bins][L] each, the mel sums [n_mels][L] */
    double *frames = scratch, *work = frames + (size_t)n_fft * L;
    double *restrict spec_re = work + (size_t)n_fft * L, *restrict spec_im = spec_re + (size_t)n_bins * L;
    double *melv = spec_im + (size_t)n_bins * L;

    /* pre-emphasis in float32, as torch computes x[t] - 0.97·x[t-1] */
    float *pre = pad + half;
    pre[0] = samples[0];
    for (size_t i = 1; i < n; i++) {
        float p = MEL_PREEMPH * samples[i - 1];
        pre[i] = samples[i] - p;
    }

    for (int t0 = 0; t0 < n_frames; t0 += L) {
        /* frame t covers padded samples [t·hop, t·hop + n_fft); only the
         * win samples under the window are nonzero (the rest of `frames`
         * stays zero from the calloc). Lanes past the last frame repeat
         * it and are dropped. */
        const float *src[L];
        for (int l = 0; l < L; l++) {
            int t = t0 + l < n_frames ? t0 + l : n_frames - 1;
            src[l] = pad + (size_t)t * hop;
        }
        for (int k = win_off; k < win_off + win; k++) {
            double w = mel->window[k - win_off];
            for (int l = 0; l < L; l++) frames[(size_t)k * L + l] = (double)src[l][k] * w;
        }
        ct_fft_real_forward_lanes(mel->fft, frames, spec_re, spec_im, work);
        /* power = |X|² (torch forms sqrt(re²+im²) then squares it) */
        double *power = spec_re;
        for (int i = 0; i < n_bins * L; i++)
            power[i] = spec_re[i] * spec_re[i] + spec_im[i] * spec_im[i];
        /* the filters are sparse: each sums only its [band_lo, band_hi) */
        for (int b = 0; b < n_mels; b++) {
            const float *row = mel->filters + (size_t)b * n_bins;
            double acc[L] = {0};
            for (int k = mel->band_lo[b]; k < mel->band_hi[b]; k++) {
                double w = row[k];
                for (int l = 0; l < L; l++) acc[l] += w * power[(size_t)k * L + l];
            }
            for (int l = 0; l < L; l++) melv[(size_t)b * L + l] = acc[l] + MEL_LOG_GUARD;
        }
        log_inplace(melv, n_mels * L);
        int n_lanes = n_frames - t0 < L ? n_frames - t0 : L;
        for (int l = 0; l < n_lanes; l++) {
            double *out = logmel + (size_t)(t0 + l) * n_mels;
            for (int b = 0; b < n_mels; b++) out[b] = melv[(size_t)b * L + l];
        }
    }

    /* per-feature normalisation over the valid frames (spec 4), frame by
     * frame so that every pass reads logmel in order; each bin's sums run
     * over t in order, as a bin-by-bin loop would. The mean is taken about
     * the first value, so a constant bin (digital silence: log of the
     * guard) has mean and deviations exactly 0 and normalises to exact
     * zeros rather than to rounding noise / 1e-5. */
    double *shift = melv, *mean = melv + n_mels, *denom = melv + 2 * n_mels;
    double *sum = melv + 3 * n_mels, *ss = melv + 4 * n_mels;   /* 5·n_mels <= n_mels·L */
    for (int b = 0; b < n_mels; b++) {
        shift[b] = logmel[b];
        sum[b] = 0.0;
        ss[b] = 0.0;
    }
    for (int t = 0; t < n_valid; t++) {
        const double *row = logmel + (size_t)t * n_mels;
        for (int b = 0; b < n_mels; b++) sum[b] += row[b] - shift[b];
    }
    for (int b = 0; b < n_mels; b++) mean[b] = shift[b] + sum[b] / n_valid;
    for (int t = 0; t < n_valid; t++) {
        const double *row = logmel + (size_t)t * n_mels;
        for (int b = 0; b < n_mels; b++) {
            double d = row[b] - mean[b];
            ss[b] += d * d;
        }
    }
    for (int b = 0; b < n_mels; b++) denom[b] = sqrt(ss[b] / (n_valid - 1)) + MEL_NORM_EPS;
    for (int t = 0; t < n_valid; t++) {
        const double *row = logmel + (size_t)t * n_mels;
        float *o = feat + (size_t)t * n_mels;
        for (int b = 0; b < n_mels; b++) o[b] = (float)((row[b] - mean[b]) / denom[b]);
    }
    for (int t = n_valid; t < n_frames; t++)
        memset(feat + (size_t)t * n_mels, 0, (size_t)n_mels * sizeof *feat);
}

tg_status ct_mel_compute(const ct_mel *mel, const float *samples, size_t n,
                         float **out_features, int *out_frames, int *out_valid) {
    tg_status st = mel_check(samples, n);
    if (st) return st;
    mel_work w = {0};
    if ((st = mel_work_reserve(&w, n))) return st;
    int n_frames = ct_mel_frames(n);
    float *feat = tg_malloc((size_t)n_frames * MEL_N_MELS * sizeof *feat);
    if (!feat) {
        mel_work_free(&w);
        return tg_status_new(TG_ERR_NO_MEMORY, "mel features of %zu samples: out of memory", n);
    }
    mel_into(mel, samples, n, &w, feat);
    mel_work_free(&w);
    *out_features = feat;
    *out_frames = n_frames;
    *out_valid = n_frames - 1;
    return NULL;
}

_Static_assert(CT_MEL_GRID_WIN == MEL_WIN && CT_MEL_GRID_HOP == MEL_HOP &&
                   CT_MEL_SPEC == 2 * (MEL_N_FFT / 2 + 1),
               "audio.h's grid sizes are mel.c's");

size_t ct_mel_grid_len(int pad_frames) {
    return (size_t)MEL_HOP * (size_t)(pad_frames > 1 ? pad_frames - 1 : 0) + MEL_WIN;
}

/* Grid index p holds padded sample p + (n_fft - win)/2, that is
 * pre-emphasised sample p - lead: the first lead values are the centring
 * zeros the window reaches, then the clip, then zeros to the row's end. */
static void grid_into(const float *x, size_t n, int pad_frames, float *row) {
    const size_t lead = MEL_N_FFT / 2 - (MEL_N_FFT - MEL_WIN) / 2;
    size_t len = ct_mel_grid_len(pad_frames);
    memset(row, 0, lead * sizeof *row);
    float *pre = row + lead;
    pre[0] = x[0];
    for (size_t i = 1; i < n; i++) { /* as mel_into: float32, torch's order */
        float p = MEL_PREEMPH * x[i - 1];
        pre[i] = x[i] - p;
    }
    memset(pre + n, 0, (len - lead - n) * sizeof *row);
}

void ct_mel_dft_table(const ct_mel *mel, float *dft) {
    const int n_bins = MEL_N_FFT / 2 + 1, off = (MEL_N_FFT - MEL_WIN) / 2;
    const double two_pi = 6.283185307179586476925286766559;
    for (int k = 0; k < n_bins; k++)
        for (int i = 0; i < MEL_WIN; i++) {
            /* the angle's index reduced mod n_fft first: exact in integers */
            int r = (int)(((long)k * (off + i)) % MEL_N_FFT);
            double a = two_pi * r / MEL_N_FFT, w = mel->window[i];
            dft[(size_t)k * MEL_WIN + i] = (float)(w * cos(a));
            dft[(size_t)(n_bins + k) * MEL_WIN + i] = (float)(-w * sin(a));
        }
}

void ct_mel_filter_pairs(const ct_mel *mel, float *pairs) {
    const int n_bins = MEL_N_FFT / 2 + 1;
    for (int b = 0; b < MEL_N_MELS; b++)
        for (int k = 0; k < 2 * n_bins; k++)
            pairs[(size_t)b * 2 * n_bins + k] = mel->filters[(size_t)b * n_bins + k % n_bins];
}

typedef struct batch_job {
    const ct_mel *mel;
    const float *const *clips;
    const size_t *lens;
    int n;
    atomic_int next;        /* the next clip to take */
    mel_work *works;        /* [threads] each thread's buffers */
    int n_works;
    float **feats;          /* [n] results, ours until success (NULL when padded) */
    float *padded;          /* or all clips into [n][pad_frames][128] */
    int pad_frames;
    bool grid;              /* padded rows hold window grids, not features */
    int *frames, *valid;
    tg_status *status;      /* [n] each clip's error, NULL if none */
} batch_job;

static tg_status batch_clip(batch_job *j, mel_work *w, int i) {
    const float *x = j->clips[i];
    size_t n = j->lens[i];
    tg_status st = mel_check(x, n);
    if (st) return st;
    int frames = ct_mel_frames(n);
    float *out;
    if (j->grid) {
        if (frames > j->pad_frames)
            return tg_status_new(TG_ERR_INVALID_ARG, "%d frames, more than the batch's %d", frames,
                                 j->pad_frames);
        grid_into(x, n, j->pad_frames, j->padded + (size_t)i * ct_mel_grid_len(j->pad_frames));
        j->frames[i] = frames;
        j->valid[i] = frames - 1;
        return NULL;
    }
    if (j->padded) {
        if (frames > j->pad_frames)
            return tg_status_new(TG_ERR_INVALID_ARG, "%d frames, more than the batch's %d", frames,
                                 j->pad_frames);
        out = j->padded + (size_t)i * j->pad_frames * MEL_N_MELS;
    } else if (!(out = j->feats[i] = tg_malloc((size_t)frames * MEL_N_MELS * sizeof *out))) {
        return tg_status_new(TG_ERR_NO_MEMORY, "mel features of %zu samples: out of memory", n);
    }
    if ((st = mel_work_reserve(w, n))) return st;
    mel_into(j->mel, x, n, w, out);
    if (j->padded)
        memset(out + (size_t)frames * MEL_N_MELS, 0,
               (size_t)(j->pad_frames - frames) * MEL_N_MELS * sizeof *out);
    j->frames[i] = frames;
    j->valid[i] = frames - 1;
    return NULL;
}

static void batch_task(void *arg, int ith, int nth) {
    (void)nth;
    batch_job *j = arg;
    mel_work *w = &j->works[ith < j->n_works ? ith : 0];
    for (int i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) j->status[i] = batch_clip(j, w, i);
}

/* Runs the job's clips on pool; on success hands the features (when not
 * padded), frames and valid counts to the out arrays, else leaves them
 * alone. Frees everything the job allocated either way. */
static tg_status batch_run(batch_job *j, struct tg_threadpool *pool, float **out_feats, int *out_frames,
                           int *out_valid) {
    tg_status st = NULL;
    int n = j->n;
    atomic_init(&j->next, 0);
    j->n_works = pool ? tg_threadpool_size(pool) : 1;
    if (j->n_works < 1) j->n_works = 1;
    j->works = tg_calloc((size_t)j->n_works, sizeof *j->works);
    j->frames = tg_calloc((size_t)n, sizeof *j->frames);
    j->valid = tg_calloc((size_t)n, sizeof *j->valid);
    j->status = tg_calloc((size_t)n, sizeof *j->status);
    if (!j->padded) j->feats = tg_calloc((size_t)n, sizeof *j->feats);
    if (!j->works || !j->frames || !j->valid || !j->status || (!j->padded && !j->feats)) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "mel batch of %d clips: out of memory", n);
    } else {
        if (pool && j->n_works > 1)
            tg_threadpool_run(pool, batch_task, j);
        else
            batch_task(j, 0, 1);
        for (int i = 0; i < n; i++)
            if (j->status[i] && !st) {
                st = tg_status_wrap(j->status[i], "mel batch: clip %d", i);
                j->status[i] = NULL;
            }
    }
    if (!st) {
        if (out_feats) memcpy(out_feats, j->feats, (size_t)n * sizeof *out_feats);
        memcpy(out_frames, j->frames, (size_t)n * sizeof *out_frames);
        memcpy(out_valid, j->valid, (size_t)n * sizeof *out_valid);
    }
    for (int i = 0; st && j->feats && i < n; i++) tg_free(j->feats[i]);
    for (int i = 0; j->works && i < j->n_works; i++) mel_work_free(&j->works[i]);
    for (int i = 0; j->status && i < n; i++) tg_status_free(j->status[i]);
    tg_free(j->feats);
    tg_free(j->frames);
    tg_free(j->valid);
    tg_free(j->works);
    tg_free(j->status);
    return st;
}

static tg_status batch_args(const float *const *clips, const size_t *lens, int n) {
    if (n < 1) return tg_status_new(TG_ERR_INVALID_ARG, "mel batch of %d clips (need at least 1)", n);
    if (!clips || !lens) return tg_status_new(TG_ERR_INVALID_ARG, "mel batch: NULL clips or lengths");
    for (int i = 0; i < n; i++)
        if (!clips[i]) return tg_status_new(TG_ERR_INVALID_ARG, "mel batch: clip %d is NULL", i);
    return NULL;
}

tg_status ct_mel_compute_batch(const ct_mel *mel, const float *const *clips, const size_t *lens,
                               int n, struct tg_threadpool *pool, float **out_feats,
                               int *out_frames, int *out_valid) {
    tg_status st = batch_args(clips, lens, n);
    if (st) return st;
    batch_job j = {.mel = mel, .clips = clips, .lens = lens, .n = n};
    return batch_run(&j, pool, out_feats, out_frames, out_valid);
}

/* A padded batch of features or (grid) of window grids into out. */
static tg_status padded_run(const ct_mel *mel, const float *const *clips, const size_t *lens, int n,
                            struct tg_threadpool *pool, int pad_frames, float *out, bool grid,
                            int *out_frames, int *out_valid) {
    tg_status st = batch_args(clips, lens, n);
    if (st) return st;
    if (!out || pad_frames < 1)
        return tg_status_new(TG_ERR_INVALID_ARG, "mel batch: no output (%d frames a clip)", pad_frames);
    batch_job j = {.mel = mel, .clips = clips, .lens = lens, .n = n, .padded = out,
                   .pad_frames = pad_frames, .grid = grid};
    return batch_run(&j, pool, NULL, out_frames, out_valid);
}

tg_status ct_mel_compute_padded(const ct_mel *mel, const float *const *clips, const size_t *lens,
                                int n, struct tg_threadpool *pool, int pad_frames, float *out,
                                int *out_frames, int *out_valid) {
    return padded_run(mel, clips, lens, n, pool, pad_frames, out, false, out_frames, out_valid);
}

tg_status ct_mel_grid_padded(const ct_mel *mel, const float *const *clips, const size_t *lens,
                             int n, struct tg_threadpool *pool, int pad_frames, float *out,
                             int *out_frames, int *out_valid) {
    return padded_run(mel, clips, lens, n, pool, pad_frames, out, true, out_frames, out_valid);
}
