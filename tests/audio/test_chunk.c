/*
 * test_chunk.c: the energy-based long-audio split (spec 5.4) on the fixture's
 * 71 s clip (boundaries from transformers, and each chunk's features against
 * reference_long.safetensors) and on synthetic signals that pin the rule's
 * corners: the 30 s fast path, 30-35 s audio, first strict minimum, the
 * skipped last aligned window, and bad arguments.
 *
 * Feature tolerance: 1e-4 absolute, as for the short clips (test_mel.c).
 */
#include <stdint.h>

#include "audio_fixture.h"

#define SR 16000

static void split(const float *x, size_t n, size_t (**b)[2], int *nb) {
    CHECK_OK(ct_split_chunks(x, n, SR, 35.0, 5.0, b, nb));
}

static void test_long_fixture_boundaries_and_features(void) {
    static const size_t want[3][2] = {{0, 502400}, {502400, 990400}, {990400, 1140800}};
    ct_audio a;
    if (!fixture_wav("long.wav", &a)) return;
    size_t(*b)[2] = NULL;
    int nb = 0;
    split(a.samples, a.n, &b, &nb);
    CHECK_MSG(nb == 3, "%d chunks", nb);
    for (int i = 0; i < nb && i < 3; i++)
        CHECK_MSG(b[i][0] == want[i][0] && b[i][1] == want[i][1], "chunk %d: [%zu, %zu)", i,
                  b[i][0], b[i][1]);

    st_set *set = NULL;
    CHECK_OK(st_open_file(FIXTURE_DIR "/reference_long.safetensors", &set));
    int64_t shape[ST_MAX_DIMS];
    int nd = 0;
    float *ref = set ? fixture_f32(set, "long.features", shape, &nd) : NULL;
    ct_mel mel;
    CHECK_OK(ct_mel_init(&mel));
    if (ref && nb == 3) {
        CHECK(nd == 3 && shape[0] == 3 && shape[2] == 128);
        for (int i = 0; i < 3; i++) {
            float *feat = NULL;
            int frames = 0, valid = 0;
            CHECK_OK(ct_mel_compute(&mel, a.samples + b[i][0], b[i][1] - b[i][0], &feat, &frames,
                                    &valid));
            char what[64];
            snprintf(what, sizeof what, "long.features chunk %d", i);
            if (feat && frames <= shape[1])
                compare_features(feat, frames, valid, ref, shape[1], i, 1e-4, what);
            tg_free(feat);
        }
    }
    ct_mel_free(&mel);
    tg_free(ref);
    st_close(set);
    tg_free(b);
    ct_audio_free(&a);
}

/* Deterministic noise of the given amplitude. */
static void noise(float *x, size_t n, float amp, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = amp * ((float)(seed >> 8) / (float)(1 << 24) * 2.0f - 1.0f);
    }
}

static void test_short_audio_is_one_chunk(void) {
    size_t n = 35 * SR;
    float *x = tg_calloc(n, sizeof *x);
    if (!x) return;
    noise(x, n, 0.3f, 1);
    size_t lens[] = {1, 1000, 30 * SR, 30 * SR + 1, 32 * SR, 35 * SR};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t(*b)[2] = NULL;
        int nb = 0;
        split(x, lens[k], &b, &nb);
        /* ≤ 30 s: the fast path; 30-35 s: the split function keeps it whole */
        CHECK_MSG(nb == 1 && b && b[0][0] == 0 && b[0][1] == lens[k], "%zu samples: %d chunks",
                  lens[k], nb);
        tg_free(b);
    }
    tg_free(x);
}

static void test_cut_at_quietest_window(void) {
    size_t n = 40 * SR;
    float *x = tg_malloc(n * sizeof *x);
    if (!x) return;
    size_t(*b)[2] = NULL;
    int nb = 0;
    /* search span [480000, 560000): one silent window at 480000 + 10·1600 */
    noise(x, n, 0.5f, 7);
    memset(x + 496000, 0, 1600 * sizeof *x);
    split(x, n, &b, &nb);
    CHECK(nb == 2 && b[0][0] == 0 && b[0][1] == 496000 && b[1][0] == 496000 && b[1][1] == n);
    tg_free(b);
    /* silence that starts mid-window: the first window wholly inside it
     * wins over the half-silent one before it */
    noise(x, n, 0.5f, 7);
    /* [500000, 504000): window 12 half silent, 13 and 14 wholly (a tie: 13) */
    memset(x + 500000, 0, 4000 * sizeof *x);
    split(x, n, &b, &nb);
    CHECK_MSG(nb == 2 && b[0][1] == 480000 + 13 * 1600, "cut at %zu", nb ? b[0][1] : 0);
    tg_free(b);
    /* the last aligned window [558400, 560000) is never examined */
    noise(x, n, 0.5f, 7);
    memset(x + 558400, 0, 1600 * sizeof *x);
    noise(x + 480000 + 3 * 1600, 1600, 0.4f, 9);
    split(x, n, &b, &nb);
    CHECK_MSG(nb == 2 && b[0][1] == 484800, "cut at %zu", nb ? b[0][1] : 0);
    tg_free(b);
    tg_free(x);
}

static void test_ties_take_the_first_window(void) {
    size_t n = 70 * SR;
    float *x = tg_calloc(n, sizeof *x);
    if (!x) return;
    size_t(*b)[2] = NULL;
    int nb = 0;
    split(x, n, &b, &nb);
    /* all silent: each cut at the start of its search span */
    CHECK(nb == 3);
    if (nb == 3) {
        CHECK(b[0][0] == 0 && b[0][1] == 480000);
        CHECK(b[1][0] == 480000 && b[1][1] == 960000);
        CHECK(b[2][0] == 960000 && b[2][1] == n);
    }
    tg_free(b);
    tg_free(x);
}

static void test_bad_arguments(void) {
    float x[4] = {0};
    size_t(*b)[2] = (void *)x;
    int nb = 9;
    CHECK_ERR(ct_split_chunks(x, 0, SR, 35.0, 5.0, &b, &nb), TG_ERR_INVALID_ARG, "empty audio");
    CHECK(b == NULL && nb == 0);
    CHECK_ERR(ct_split_chunks(x, 4, 0, 35.0, 5.0, &b, &nb), TG_ERR_INVALID_ARG, "rate 0");
    CHECK_ERR(ct_split_chunks(x, 4, SR, 5.0, 5.0, &b, &nb), TG_ERR_INVALID_ARG, "bad parameters");
    CHECK_ERR(ct_split_chunks(x, 4, SR, NAN, 5.0, &b, &nb), TG_ERR_INVALID_ARG, "bad parameters");
}

TEST_MAIN(T(test_long_fixture_boundaries_and_features), T(test_short_audio_is_one_chunk),
          T(test_cut_at_quietest_window), T(test_ties_take_the_first_window),
          T(test_bad_arguments))
