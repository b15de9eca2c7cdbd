/*
 * test_finite.c: the first non-finite sample (finite.c), one clip and many.
 *
 * The scan tests blocks of samples as bits and walks only a bad block, and
 * splits a large batch into tasks that a pool's threads take in any order,
 * so the cases pin the corners of both: a bad sample at the first and last
 * index of a block, in the tail after the last whole block, two in one
 * clip found by different threads (the lower wins), bad samples in two
 * clips (the lower clip wins), and the largest finite floats and
 * subnormals, which are not bad. Each batch case runs without a pool and
 * on a pool of 4 threads, which must agree.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "audio.h"
#include "base.h"
#include "check.h"

static void test_one_clip(void) {
    enum { N = 5000 }; /* four whole blocks of 1024 and a tail of 904 */
    float *x = tg_calloc(N, sizeof *x);
    if (!x) return;
    for (int i = 0; i < N; i++) x[i] = (float)((i % 17) - 8) / 8.0f;
    CHECK(ct_audio_first_nonfinite(x, N) == N);
    CHECK(ct_audio_first_nonfinite(x, 0) == 0);
    x[7] = FLT_MAX, x[8] = -FLT_MAX, x[9] = FLT_MIN / 4, x[10] = -0.0f;
    CHECK_MSG(ct_audio_first_nonfinite(x, N) == N, "largest floats and subnormals are finite");
    const size_t at[] = {0, 1023, 1024, 2047, 4095, 4096, 4999};
    const float bad[] = {NAN, INFINITY, -INFINITY, -NAN};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
        for (size_t v = 0; v < sizeof bad / sizeof bad[0]; v++) {
            float keep = x[at[k]];
            x[at[k]] = bad[v];
            size_t got = ct_audio_first_nonfinite(x, N);
            CHECK_MSG(got == at[k], "bad value %zu at %zu: found at %zu", v, at[k], got);
            /* a scan that stops short of it sees nothing */
            CHECK(ct_audio_first_nonfinite(x, at[k]) == at[k]);
            x[at[k]] = keep;
        }
    x[3000] = NAN;
    x[2000] = INFINITY;
    CHECK(ct_audio_first_nonfinite(x, N) == 2000);
    tg_free(x);
}

/* find_nonfinite on the clips without a pool and with one: both must say
 * clip want_clip (-1: none) and index want_index. */
static void expect(const float *const *clips, const size_t *lens, int n, tg_threadpool *pool,
                   int want_clip, size_t want_index, const char *what) {
    for (int p = 0; p < 2; p++) {
        int c = -2;
        size_t i = 0;
        CHECK_OK(ct_audio_find_nonfinite(clips, lens, n, p ? pool : NULL, &c, &i));
        CHECK_MSG(c == want_clip && (c < 0 || i == want_index), "%s (%s): clip %d index %zu, want %d %zu",
                  what, p ? "pool" : "no pool", c, i, want_clip, want_index);
    }
}

static void test_many_clips(void) {
    /* 6 clips of 35 s and one short: 3.4 M samples, so the pool is used */
    enum { CLIPS = 7 };
    const size_t len[CLIPS] = {560000, 560000, 320, 560000, 560000, 560000, 560000};
    float *x[CLIPS] = {0};
    tg_threadpool *pool = NULL;
    CHECK_OK(tg_threadpool_new(4, &pool));
    bool ok = pool != NULL;
    for (int c = 0; c < CLIPS && ok; c++) {
        ok = (x[c] = tg_malloc(len[c] * sizeof(float))) != NULL;
        for (size_t i = 0; ok && i < len[c]; i++) x[c][i] = 0.1f * sinf(0.001f * (float)(i + 7 * c));
    }
    if (ok) {
        const float *const *clips = (const float *const *)x;
        expect(clips, len, CLIPS, pool, -1, 0, "all finite");
        x[4][559999] = NAN; /* the last sample of the batch's largest clip index but two */
        expect(clips, len, CLIPS, pool, 4, 559999, "last sample");
        x[3][300000] = INFINITY; /* a lower clip wins */
        expect(clips, len, CLIPS, pool, 3, 300000, "two clips");
        x[3][65536 * 7 + 5] = -INFINITY; /* in a later task of the same clip: still 300000 */
        expect(clips, len, CLIPS, pool, 3, 300000, "two in one clip, the first kept");
        x[3][65535] = NAN; /* the last sample of clip 3's first task */
        expect(clips, len, CLIPS, pool, 3, 65535, "end of a task");
        x[2][319] = NAN; /* the short clip's last sample */
        expect(clips, len, CLIPS, pool, 2, 319, "short clip");
        x[0][0] = INFINITY;
        expect(clips, len, CLIPS, pool, 0, 0, "first sample");
    }
    for (int c = 0; c < CLIPS; c++) tg_free(x[c]);
    tg_threadpool_free(pool);
}

TEST_MAIN(T(test_one_clip), T(test_many_clips))
