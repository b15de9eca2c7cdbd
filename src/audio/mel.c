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
 * Deliberately not here: dither. transformers adds 1e-5·randn from torch's CPU
 * generator by default; it cannot be reproduced in C and only perturbs the
 * features at the noise floor, so this frontend is the reference with
 * dither = 0 (spec 4). Also not here: batching (a padded batch row equals the
 * single clip's features followed by zero frames, so callers pad) and any
 * other sample rate (resample first, resample.c).
 */
#include <math.h>
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

tg_status ct_mel_compute(const ct_mel *mel, const float *samples, size_t n,
                         float **out_features, int *out_frames, int *out_valid) {
    tg_status st = NULL;
    float *pre = NULL, *feat = NULL;
    double *logmel = NULL, *frame = NULL;
    const int n_mels = mel->n_mels, n_fft = mel->n_fft, hop = mel->hop, win = mel->win;
    const int n_bins = n_fft / 2 + 1, pad = n_fft / 2, win_off = (n_fft - win) / 2;

    if (n == 0) return tg_status_new(TG_ERR_INVALID_ARG, "empty audio (0 samples)");
    /* the unbiased variance divides by (valid frames - 1) */
    if (n / (size_t)hop < 2)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "audio too short: %zu samples (need at least %d, %d ms at 16 kHz)",
                             n, 2 * hop, 2 * hop * 1000 / MEL_SR);
    if (n / (size_t)hop + 1 > (size_t)INT32_MAX / (size_t)n_mels)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "audio too long for one frontend call: %zu samples", n);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(samples[i]))
            return tg_status_new(TG_ERR_INVALID_ARG, "audio sample %zu is %s", i,
                                 isnan(samples[i]) ? "NaN" : "infinite");

    const int n_valid = (int)(n / (size_t)hop);
    const int n_frames = n_valid + 1;
    pre = tg_malloc(n * sizeof *pre);
    logmel = tg_malloc((size_t)n_frames * n_mels * sizeof *logmel);
    frame = tg_malloc((size_t)(n_fft + n_fft + 2 * n_bins) * sizeof *frame);
    feat = tg_malloc((size_t)n_frames * n_mels * sizeof *feat);
    if (!pre || !logmel || !frame || !feat) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "mel features of %zu samples: out of memory", n);
        goto fail;
    }

    /* pre-emphasis in float32, as torch computes x[t] - 0.97·x[t-1] */
    pre[0] = samples[0];
    for (size_t i = 1; i < n; i++) {
        float p = MEL_PREEMPH * samples[i - 1];
        pre[i] = samples[i] - p;
    }

    double *work = frame + n_fft, *spec = work + n_fft;
    for (int t = 0; t < n_frames; t++) {
        /* frame t covers padded samples [t·hop, t·hop + n_fft), i.e. signal
         * samples from t·hop − pad; only the 400 windowed ones are nonzero */
        long base = (long)t * hop - pad;
        memset(frame, 0, (size_t)n_fft * sizeof *frame);
        for (int k = win_off; k < win_off + win; k++) {
            long i = base + k;
            if (i >= 0 && i < (long)n) frame[k] = (double)pre[i] * mel->window[k - win_off];
        }
        ct_fft_real_forward(mel->fft, frame, spec, work);
        /* power = |X|² (torch forms sqrt(re²+im²) then squares it) */
        double *power = frame;   /* the frame is consumed: reuse it */
        for (int k = 0; k < n_bins; k++)
            power[k] = spec[2 * k] * spec[2 * k] + spec[2 * k + 1] * spec[2 * k + 1];
        double *out = logmel + (size_t)t * n_mels;
        for (int b = 0; b < n_mels; b++) {
            const float *row = mel->filters + (size_t)b * n_bins;
            double s = 0.0;
            for (int k = mel->band_lo[b]; k < mel->band_hi[b]; k++) s += (double)row[k] * power[k];
            out[b] = log(s + MEL_LOG_GUARD);
        }
    }

    /* per-feature normalisation over the valid frames (spec 4) */
    for (int b = 0; b < n_mels; b++) {
        /* the mean is taken about the first value, so a constant bin (digital
         * silence: log of the guard) has mean and deviations exactly 0 and
         * normalises to exact zeros rather than to rounding noise / 1e-5 */
        double shift = logmel[b], sum = 0.0;
        for (int t = 0; t < n_valid; t++) sum += logmel[(size_t)t * n_mels + b] - shift;
        double mean = shift + sum / n_valid;
        double ss = 0.0;
        for (int t = 0; t < n_valid; t++) {
            double d = logmel[(size_t)t * n_mels + b] - mean;
            ss += d * d;
        }
        double denom = sqrt(ss / (n_valid - 1)) + MEL_NORM_EPS;
        for (int t = 0; t < n_valid; t++)
            feat[(size_t)t * n_mels + b] = (float)((logmel[(size_t)t * n_mels + b] - mean) / denom);
    }
    for (int t = n_valid; t < n_frames; t++)
        memset(feat + (size_t)t * n_mels, 0, (size_t)n_mels * sizeof *feat);

    tg_free(pre);
    tg_free(logmel);
    tg_free(frame);
    *out_features = feat;
    *out_frames = n_frames;
    *out_valid = n_valid;
    return NULL;
fail:
    tg_free(pre);
    tg_free(logmel);
    tg_free(frame);
    tg_free(feat);
    return st;
}
