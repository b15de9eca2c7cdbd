/*
 * chunk.c: the energy-based split of long audio (spec 5.4), as the
 * transformers CohereAsrFeatureExtractor makes it.
 *
 * Audio of at most max_clip_s − overlap_s seconds is one chunk. Longer audio
 * is cut into pieces of at most max_clip_s seconds: from each start idx, if
 * idx + chunk reaches the end the rest is the last piece; otherwise the cut
 * goes at the start of the quietest non-overlapping 1600-sample window in
 * [idx + chunk − ctx, idx + chunk) (RMS, first strict minimum, the window
 * loop being Python's range(0, len − 1600, 1600), which skips the last
 * aligned window), clamped to [idx + 1, N]. A search span of at most 1600
 * samples cuts in its middle. The pieces do not overlap and cover every
 * sample once.
 *
 * The RMS is computed in double; the reference uses float32, which can only
 * matter for windows whose energies tie to float32 precision.
 *
 * Deliberately not here: voice-activity detection or any other split rule.
 */
#include <math.h>
#include <stdint.h>

#include "audio.h"
#include "base.h"

#define ENERGY_WINDOW 1600   /* min_energy_window_samples */

static size_t quietest_window(const float *x, size_t start, size_t end) {
    size_t len = end - start;
    if (len <= ENERGY_WINDOW) return (start + end) / 2;
    double best = INFINITY;
    size_t best_idx = start;
    for (size_t i = 0; i < len - ENERGY_WINDOW; i += ENERGY_WINDOW) {
        double ss = 0.0;
        for (size_t j = 0; j < ENERGY_WINDOW; j++) {
            double v = x[start + i + j];
            ss += v * v;
        }
        double rms = sqrt(ss / ENERGY_WINDOW);
        if (rms < best) {
            best = rms;
            best_idx = start + i;
        }
    }
    return best_idx;
}

tg_status ct_split_chunks(const float *samples, size_t n, int sample_rate,
                          double max_clip_s, double overlap_s,
                          size_t (**out_bounds)[2], int *out_n_chunks) {
    *out_bounds = NULL;
    *out_n_chunks = 0;
    if (n == 0) return tg_status_new(TG_ERR_INVALID_ARG, "splitting empty audio");
    if (sample_rate <= 0 || !(max_clip_s > 0) || !(overlap_s >= 0) || overlap_s >= max_clip_s ||
        max_clip_s * sample_rate > 1e15)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "splitting audio: bad parameters (rate %d, max clip %g s, "
                             "search %g s)", sample_rate, max_clip_s, overlap_s);
    size_t chunk = (size_t)fmax(1.0, round(max_clip_s * sample_rate));
    size_t ctx = (size_t)fmax(1.0, round(overlap_s * sample_rate));
    double duration = (double)n / sample_rate;
    /* every piece but the last is at least chunk − ctx long (the cut lies in
     * the search span), which bounds the count */
    size_t cap = 1;
    if (duration > max_clip_s - overlap_s && n > chunk)
        cap = n / (chunk > ctx ? chunk - ctx : 1) + 2;
    if (cap > INT32_MAX / 2)
        return tg_status_new(TG_ERR_INVALID_ARG, "splitting audio: %zu samples into pieces of "
                             "%zu gives too many chunks", n, chunk);
    size_t (*b)[2] = tg_malloc((size_t)cap * sizeof *b);
    if (!b) return tg_status_new(TG_ERR_NO_MEMORY, "splitting audio: out of memory");
    int nb = 0;
    if (cap == 1) {
        b[0][0] = 0;
        b[0][1] = n;
        nb = 1;
    } else {
        size_t idx = 0;
        while (idx < n) {
            if (idx + chunk >= n) {
                b[nb][0] = idx;
                b[nb][1] = n;
                nb++;
                break;
            }
            size_t s = idx + chunk - ctx > idx ? idx + chunk - ctx : idx;
            size_t e = idx + chunk < n ? idx + chunk : n;
            size_t split = e <= s ? idx + chunk : quietest_window(samples, s, e);
            if (split > n) split = n;
            if (split < idx + 1) split = idx + 1;
            if ((size_t)nb >= cap) {
                tg_free(b);
                return tg_status_new(TG_ERR_INTERNAL, "splitting audio: more than %zu chunks",
                                     cap);
            }
            b[nb][0] = idx;
            b[nb][1] = split;
            nb++;
            idx = split;
        }
    }
    *out_bounds = b;
    *out_n_chunks = nb;
    return NULL;
}
