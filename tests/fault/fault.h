/*
 * fault.h: what the fault sweeps of this folder share: one whole run (open a
 * session on the tiny model, transcribe one clip, close) and the stride
 * that keeps CI time small.
 *
 * A sweep fails the Nth operation (allocation or file I/O) for N = 0, 1,
 * 2, ... until a run no longer reaches the Nth operation, which then must
 * succeed; every run before must end in an error, never a crash, and
 * LeakSanitizer (make asan) proves at exit that the failed runs freed what
 * they took. Release builds sweep every N; sanitizer builds, about 20 times
 * slower, every FAULT_ASAN_STRIDE-th N (plus the first 64), so that the 2-core
 * CI stays in budget. CT_FAULT_STRIDE overrides the stride (1: all).
 */
#ifndef TEST_FAULT_H
#define TEST_FAULT_H

#include <stdio.h>
#include <stdlib.h>

#include "base.h"
#include "check.h"
#include "cohere_transcribe.h"

#define FAULT_ASAN_STRIDE 7

#if defined(__SANITIZE_ADDRESS__)
#define FAULT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FAULT_SANITIZED 1
#endif
#endif
#ifndef FAULT_SANITIZED
#define FAULT_SANITIZED 0
#endif

static inline long fault_stride(void) {
    const char *e = getenv("CT_FAULT_STRIDE");
    long s = e ? strtol(e, NULL, 10) : 0;
    if (s > 0) return s;
    return FAULT_SANITIZED ? FAULT_ASAN_STRIDE : 1;
}

/* The next N to try after n: every one at first, then by the stride. */
static inline long fault_next(long n, long stride) {
    return n < 64 ? n + 1 : n + stride;
}

/* Opens the tiny model on one CPU thread, transcribes clip a, closes.
 * Returns the first error; *out_text_ok says whether a text came back, and
 * out_text (when not NULL) gets a copy of it (tg_free). */
static inline tg_status fault_run_text(bool *out_text_ok, char **out_text) {
    ct_options o;
    ct_options_init(&o);
    o.model_dir = TEST_DATA_DIR "/tiny/hub";
    o.backend = CT_BACKEND_CPU;
    o.n_threads = 1;
    o.max_new_tokens = 8;
    ct_session *s = NULL;
    ct_result *r = NULL;
    *out_text_ok = false;
    tg_status st = ct_session_open(&o, &s);
    if (!st) st = ct_transcribe_file(s, TEST_DATA_DIR "/tiny/audio/a.wav", &r);
    if (!st) *out_text_ok = r && r->text;
    if (out_text) *out_text = *out_text_ok ? tg_strdup(r->text) : NULL;
    ct_result_free(r);
    ct_session_close(s);
    return st;
}

static inline tg_status fault_run_once(bool *out_text_ok) {
    return fault_run_text(out_text_ok, NULL);
}

#endif
