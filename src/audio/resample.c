/*
 * resample.c: any sample rate to the model's 16 kHz, with libsoxr.
 *
 * One call of soxr_oneshot over the whole clip at SOXR_HQ (20-bit precision,
 * a steep linear-phase low-pass at 95% of the lower Nyquist). Whole-clip
 * processing keeps the output length exact (round(n · out / in)) and needs no
 * streaming state; clips are minutes, not hours, so the memory is fine.
 *
 * Deliberately not here: streaming resampling, channel handling (the WAV
 * reader already averaged to mono), dither or clipping of the output.
 */
#include <math.h>
#include <soxr.h>
#include <string.h>

#include "audio.h"
#include "base.h"

tg_status ct_audio_resample(ct_audio *a, int rate) {
    if (rate <= 0) return tg_status_new(TG_ERR_INVALID_ARG, "resampling to rate %d", rate);
    if (a->sample_rate <= 0)
        return tg_status_new(TG_ERR_INVALID_ARG, "resampling audio of sample rate %d",
                             a->sample_rate);
    if (a->sample_rate == rate) return NULL;
    if (a->n == 0) {
        a->sample_rate = rate;
        return NULL;
    }
    double ratio = (double)rate / a->sample_rate;
    double want = (double)a->n * ratio;
    if (want > (double)(SIZE_MAX / sizeof(float)) - 16)
        return tg_status_new(TG_ERR_INVALID_ARG, "resampling %zu samples from %d Hz to %d Hz: "
                             "output too large", a->n, a->sample_rate, rate);
    size_t olen = (size_t)ceil(want) + 1;
    float *out = tg_malloc(olen * sizeof *out);
    if (!out)
        return tg_status_new(TG_ERR_NO_MEMORY, "resampling %zu samples from %d Hz to %d Hz: "
                             "out of memory", a->n, a->sample_rate, rate);
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    size_t idone = 0, odone = 0;
    soxr_error_t err = soxr_oneshot(a->sample_rate, rate, 1, a->samples, a->n, &idone, out,
                                    olen, &odone, &io, &q, NULL);
    if (err) {
        tg_free(out);
        return tg_status_new(TG_ERR_INTERNAL, "resampling %zu samples from %d Hz to %d Hz: "
                             "libsoxr: %s", a->n, a->sample_rate, rate, err);
    }
    if (odone == 0) {
        tg_free(out);
        return tg_status_new(TG_ERR_INVALID_ARG, "resampling %zu samples from %d Hz to %d Hz "
                             "gives no samples", a->n, a->sample_rate, rate);
    }
    tg_free(a->samples);
    a->samples = out;
    a->n = odone;
    a->sample_rate = rate;
    return NULL;
}
