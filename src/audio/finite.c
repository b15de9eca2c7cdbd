/*
 * finite.c: the first sample that is not finite (Inf or NaN) in one clip or
 * in many, so that bad audio is refused with its clip and sample index.
 *
 * Why its own file: every clip is checked twice on its way in, once by the
 * session before any batch runs (an error must come before any work) and
 * once by the frontend, which may be called alone. Both ran `isfinite` a
 * sample at a time, a branch per sample that the compiler cannot vectorise:
 * ~0.33 ns a sample on the development CPU, 12 ms for 64 clips of 35 s on
 * one thread before anything else ran. Here a block of CT_FINITE_BLOCK
 * samples is first tested as bits (exponent all ones), an OR over a loop of
 * fixed length that compiles to vector code (5.5 ms for the same 64 clips,
 * the read rate of one core); only a block that holds a bad sample is
 * walked again for its index. Many clips are split into blocks that the
 * threads of a pool take in turn, so a batch is checked at the memory's
 * rate, not one core's.
 *
 * The answer does not depend on the threads: every block is scanned and
 * each clip keeps the lowest bad index any thread found in it.
 *
 * Not here: what the caller says about a bad sample (its own error text).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "audio.h"
#include "base.h"

enum {
    CT_FINITE_BLOCK = 1024,      /* samples tested as bits at once               */
    CT_FINITE_TASK = 1 << 16,    /* samples a thread takes at a time             */
    CT_FINITE_SERIAL = 1 << 20,  /* fewer samples in all: no pool (its wake-up
                                    costs more than the scan)                     */
};

/* Whether x[0..CT_FINITE_BLOCK) holds an Inf or a NaN: their exponent bits
 * are all ones. A fixed trip count and no branch, so it vectorises. */
static bool block_bad(const float *x) {
    uint32_t any = 0;
    for (int i = 0; i < CT_FINITE_BLOCK; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        any |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return any != 0;
}

size_t ct_audio_first_nonfinite(const float *x, size_t n) {
    size_t i = 0;
    for (; i + CT_FINITE_BLOCK <= n; i += CT_FINITE_BLOCK)
        if (block_bad(x + i)) break;
    for (; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

typedef struct finite_job {
    const float *const *clips;
    const size_t *lens;
    int n;
    const size_t *start;   /* [n + 1] each clip's first task, over all clips */
    atomic_size_t next;    /* the next task                                  */
    atomic_size_t *bad;    /* [n] each clip's lowest bad index, or its length */
} finite_job;

/* Each thread takes tasks of CT_FINITE_TASK samples in turn; a clip's tasks
 * are start[c] .. start[c + 1] - 1. */
static void finite_task(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    finite_job *j = arg;
    int c = 0;
    for (size_t t; (t = atomic_fetch_add(&j->next, 1)) < j->start[j->n];) {
        while (t >= j->start[c + 1]) c++; /* tasks rise, so the clip only moves on */
        size_t lo = (t - j->start[c]) * CT_FINITE_TASK, len = j->lens[c] - lo;
        if (len > CT_FINITE_TASK) len = CT_FINITE_TASK;
        size_t k = ct_audio_first_nonfinite(j->clips[c] + lo, len);
        if (k == len) continue;
        size_t found = lo + k, seen = atomic_load(&j->bad[c]);
        while (found < seen && !atomic_compare_exchange_weak(&j->bad[c], &seen, found)) {
        }
    }
}

tg_status ct_audio_find_nonfinite(const float *const *clips, const size_t *lens, int n,
                                  tg_threadpool *pool, int *out_clip, size_t *out_index) {
    *out_clip = -1;
    *out_index = 0;
    size_t total = 0;
    for (int c = 0; c < n; c++) total += lens[c];
    if (!pool || tg_threadpool_size(pool) < 2 || total < CT_FINITE_SERIAL) {
        for (int c = 0; c < n; c++) {
            size_t k = ct_audio_first_nonfinite(clips[c], lens[c]);
            if (k < lens[c]) {
                *out_clip = c;
                *out_index = k;
                return NULL;
            }
        }
        return NULL;
    }
    size_t *start = tg_malloc(((size_t)n + 1) * sizeof *start);
    atomic_size_t *bad = tg_malloc((size_t)n * sizeof *bad);
    if (!start || !bad) {
        tg_free(start);
        tg_free(bad);
        return tg_status_new(TG_ERR_NO_MEMORY, "checking %d clips' samples: out of memory", n);
    }
    start[0] = 0;
    for (int c = 0; c < n; c++) {
        start[c + 1] = start[c] + (lens[c] + CT_FINITE_TASK - 1) / CT_FINITE_TASK;
        atomic_init(&bad[c], lens[c]);
    }
    finite_job j = {.clips = clips, .lens = lens, .n = n, .start = start, .bad = bad};
    atomic_init(&j.next, 0);
    tg_threadpool_run(pool, finite_task, &j);
    for (int c = 0; c < n; c++) {
        size_t k = atomic_load(&bad[c]);
        if (k < lens[c]) {
            *out_clip = c;
            *out_index = k;
            break;
        }
    }
    tg_free(start);
    tg_free(bad);
    return NULL;
}
