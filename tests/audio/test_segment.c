/*
 * test_segment.c: ct_segment_audio on signals made here, whose segments are
 * known: silence gives none, tone bursts give one segment each with its
 * boundaries within one 10 ms window, gaps under max_silence are bridged,
 * long speech is cut at max_dur, short blips are dropped, and "none" gives
 * the spec 5.4 chunks. Also the defaults, the parser and bad parameters.
 *
 * Tolerance: boundaries are window-aligned, so a burst's start lies in the
 * window that holds it (<= 160 samples early) and its end may include up to
 * max_silence of trailing silence, as auditok keeps it.
 */
#include <math.h>
#include <stdint.h>

#include "audio.h"
#include "base.h"
#include "check.h"

#define SR 16000
#define WIN 160

/* n samples of silence with tone bursts (440 Hz, amplitude 0.1, about 67 dB
 * on auditok's scale) over [on[i], off[i]) seconds. */
static float *bursts(size_t n, const double *on, const double *off, int k) {
    float *x = tg_calloc(n, sizeof *x);
    for (int b = 0; x && b < k; b++)
        for (size_t i = (size_t)(on[b] * SR); i < (size_t)(off[b] * SR) && i < n; i++)
            x[i] = 0.1f * (float)sin(2 * M_PI * 440.0 * (double)i / SR);
    return x;
}

static void test_defaults_and_parse(void) {
    ct_vad_options o;
    ct_vad_options_init(&o);
    CHECK(o.kind == CT_VAD_ENERGY);
    CHECK(o.min_dur_s == 0.5 && o.max_dur_s == 30.0 && o.max_silence_s == 0.6);
    CHECK(o.energy_threshold_db == 50.0 && o.analysis_window_s == 0.01);
    ct_vad_kind k = CT_VAD_NONE;
    CHECK_OK(ct_vad_parse("energy", &k));
    CHECK(k == CT_VAD_ENERGY);
    CHECK_OK(ct_vad_parse("none", &k));
    CHECK(k == CT_VAD_NONE);
    CHECK_ERR(ct_vad_parse("silero", &k), TG_ERR_INVALID_ARG, "unknown VAD 'silero'");
}

static void test_silence_gives_no_segment(void) {
    size_t n = 4 * SR;
    float *x = tg_calloc(n, sizeof *x);
    /* faint noise at about 30 dB, under the 50 dB threshold */
    uint32_t r = 1;
    for (size_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 0.002f;
    }
    ct_vad_options o;
    ct_vad_options_init(&o);
    ct_span *s = NULL;
    int ns = -1;
    CHECK_OK(ct_segment_audio(x, n, &o, &s, &ns));
    CHECK_MSG(ns == 0, "4 s of silence gave %d segments", ns);
    CHECK(s != NULL);
    ct_spans_free(s);
    CHECK_OK(ct_segment_audio(NULL, 0, &o, &s, &ns));
    CHECK(ns == 0);
    ct_spans_free(s);
    tg_free(x);
}

static void test_bursts_boundaries(void) {
    /* 0.7 s gap > max_silence: two segments; 0.3 s gap: bridged; 0.2 s
     * blip: dropped (under min_dur) */
    const double on[] = {0.5, 2.2, 2.8, 4.5};
    const double off[] = {1.5, 2.5, 3.6, 4.7};
    size_t n = 6 * SR;
    float *x = bursts(n, on, off, 4);
    ct_vad_options o;
    ct_vad_options_init(&o);
    ct_span *s = NULL;
    int ns = 0;
    CHECK_OK(ct_segment_audio(x, n, &o, &s, &ns));
    CHECK_MSG(ns == 2, "%d segments, expected 2", ns);
    if (ns == 2) {
        CHECK_MSG(s[0].first <= 8000 && 8000 - s[0].first < WIN, "first %zu", s[0].first);
        /* end: the burst's end plus at most max_silence of kept silence */
        CHECK_MSG(s[0].last >= 24000 && s[0].last <= 24000 + 9600 + WIN, "last %zu",
                  s[0].last);
        CHECK_MSG(s[1].first <= 35200 && 35200 - s[1].first < WIN, "second first %zu",
                  s[1].first);
        CHECK_MSG(s[1].last >= 57600 && s[1].last <= 57600 + 9600 + WIN, "second last %zu",
                  s[1].last);
        CHECK_NEAR(s[0].start_s, s[0].first / 16000.0, 1e-12);
        CHECK_NEAR(s[1].end_s, s[1].last / 16000.0, 1e-12);
    }
    ct_spans_free(s);
    tg_free(x);
}

static void test_max_dur_splits(void) {
    /* 70 s of tone: cut at 30 s, 30 s, then the 10 s rest */
    const double on[] = {0.0};
    const double off[] = {70.0};
    size_t n = 70 * SR;
    float *x = bursts(n, on, off, 1);
    ct_vad_options o;
    ct_vad_options_init(&o);
    ct_span *s = NULL;
    int ns = 0;
    CHECK_OK(ct_segment_audio(x, n, &o, &s, &ns));
    CHECK_MSG(ns == 3, "%d segments, expected 3", ns);
    if (ns == 3) {
        CHECK(s[0].first == 0 && s[0].last == 30 * SR);
        CHECK(s[1].first == 30 * SR && s[1].last == 60 * SR);
        CHECK(s[2].first == 60 * SR && s[2].last == n);
    }
    ct_spans_free(s);
    /* a short tail after a cut is kept (auditok's non-strict min_dur) */
    o.max_dur_s = 69.8;
    CHECK_OK(ct_segment_audio(x, n, &o, &s, &ns));
    CHECK_MSG(ns == 2 && s[1].last - s[1].first == (size_t)(0.2 * SR), "%d segments", ns);
    ct_spans_free(s);
    tg_free(x);
}

static void test_none_is_the_spec_chunks(void) {
    size_t n = 3 * SR;
    float *x = tg_calloc(n, sizeof *x);
    ct_vad_options o;
    ct_vad_options_init(&o);
    o.kind = CT_VAD_NONE;
    ct_span *s = NULL;
    int ns = 0;
    CHECK_OK(ct_segment_audio(x, n, &o, &s, &ns));
    CHECK(ns == 1 && s[0].first == 0 && s[0].last == n && s[0].end_s == 3.0);
    ct_spans_free(s);
    tg_free(x);
    n = 80 * SR;
    x = tg_calloc(n, sizeof *x);
    CHECK_OK(ct_segment_audio(x, n, &o, &s, &ns));
    size_t(*b)[2] = NULL;
    int nb = 0;
    CHECK_OK(ct_split_chunks(x, n, SR, 35, 5, &b, &nb));
    CHECK(ns == nb && ns >= 3);
    for (int i = 0; i < ns && i < nb; i++) CHECK(s[i].first == b[i][0] && s[i].last == b[i][1]);
    tg_free(b);
    ct_spans_free(s);
    tg_free(x);
}

static void test_bad_parameters(void) {
    float x[160] = {0};
    ct_vad_options o;
    ct_vad_options_init(&o);
    ct_span *s = (ct_span *)x;
    int ns = 7;
    o.max_silence_s = 40;
    CHECK_ERR(ct_segment_audio(x, 160, &o, &s, &ns), TG_ERR_INVALID_ARG, "max_silence");
    CHECK(s == NULL && ns == 0);
    ct_vad_options_init(&o);
    o.min_dur_s = 31;
    CHECK_ERR(ct_segment_audio(x, 160, &o, &s, &ns), TG_ERR_INVALID_ARG, "bad parameters");
    ct_vad_options_init(&o);
    o.energy_threshold_db = NAN;
    CHECK_ERR(ct_segment_audio(x, 160, &o, &s, &ns), TG_ERR_INVALID_ARG, "bad parameters");
    CHECK_ERR(ct_segment_audio(x, 160, NULL, &s, &ns), TG_ERR_INVALID_ARG, "NULL");
}

TEST_MAIN(T(test_defaults_and_parse), T(test_silence_gives_no_segment), T(test_bursts_boundaries),
          T(test_max_dur_splits), T(test_none_is_the_spec_chunks), T(test_bad_parameters))
