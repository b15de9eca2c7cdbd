/*
 * audio_fixture.h: helpers the audio tests share (header-only, static), to
 * read the transformers fixtures in tests/data/tiny and compare features.
 *
 * Not a test program itself: only tests/audio/test_*.c are built.
 */
#ifndef TEST_AUDIO_FIXTURE_H
#define TEST_AUDIO_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "audio.h"
#include "base.h"
#include "check.h"
#include "safetensors.h"

#define FIXTURE_DIR TEST_DATA_DIR "/tiny"

/* A float32 fixture tensor copied out of the file; free with tg_free. NULL
 * (and a failed check) when it is missing or not float32. */
static inline float *fixture_f32(const st_set *set, const char *name, int64_t shape[ST_MAX_DIMS],
                          int *n_dims) {
    const st_tensor *t = st_find(set, name);
    CHECK_MSG(t != NULL, "fixture tensor %s missing", name);
    if (!t) return NULL;
    CHECK_MSG(t->dtype == ST_F32, "fixture tensor %s is %s", name, st_dtype_name(t->dtype));
    if (t->dtype != ST_F32) return NULL;
    float *v = tg_malloc(t->size ? t->size : 1);
    CHECK(v != NULL);
    if (!v) return NULL;
    memcpy(v, t->data, t->size);
    memcpy(shape, t->shape, sizeof t->shape);
    *n_dims = t->n_dims;
    return v;
}

/* Reads a fixture WAV at 16 kHz. */
static inline int fixture_wav(const char *name, ct_audio *a) {
    char path[1024];
    snprintf(path, sizeof path, "%s/audio/%s", FIXTURE_DIR, name);
    tg_status st = ct_wav_read(path, a);
    CHECK_OK(st);
    if (!a->samples) return 0;
    CHECK(a->sample_rate == 16000);
    return 1;
}

/* Compares our features [frames][128] with row `row` of a reference
 * [B, T, 128]: frames < n_valid within tol, every other reference frame of
 * the row zero, and ours zero from n_valid on. Returns the max abs error over
 * the valid frames. */
static inline double compare_features(const float *ours, int frames, int n_valid, const float *ref,
                               int64_t ref_t, int row, double tol, const char *what) {
    const float *r = ref + (size_t)row * (size_t)ref_t * 128;
    double max_err = 0.0;
    size_t bad = 0;
    CHECK_MSG(frames <= ref_t, "%s: %d frames, reference has %lld", what, frames,
              (long long)ref_t);
    for (int t = 0; t < n_valid && t < ref_t; t++)
        for (int b = 0; b < 128; b++) {
            double e = fabs((double)ours[(size_t)t * 128 + b] - r[(size_t)t * 128 + b]);
            if (!(e <= max_err)) max_err = e;
            if (!(e <= tol)) bad++;
        }
    CHECK_MSG(bad == 0, "%s: %zu values beyond %g (max abs error %.3g)", what, bad, tol, max_err);
    size_t nz_ref = 0, nz_ours = 0;
    for (int64_t t = n_valid; t < ref_t; t++)
        for (int b = 0; b < 128; b++) nz_ref += r[(size_t)t * 128 + b] != 0.0f;
    for (int t = n_valid; t < frames; t++)
        for (int b = 0; b < 128; b++) nz_ours += ours[(size_t)t * 128 + b] != 0.0f;
    CHECK_MSG(nz_ref == 0, "%s: reference has %zu nonzero values past frame %d", what, nz_ref,
              n_valid);
    CHECK_MSG(nz_ours == 0, "%s: ours has %zu nonzero values past frame %d", what, nz_ours,
              n_valid);
    printf("  %s: max abs error %.3g over %d valid frames\n", what, max_err, n_valid);
    return max_err;
}

#endif
