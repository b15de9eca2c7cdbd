/*
 * mel.c (bench-mel): how long the log-mel frontend (src/audio/mel.c) takes
 * for one 35 s clip, the longest the model is given at once (spec 5.4), on
 * one core.
 *
 * The clip is synthetic (a few swept tones, an amplitude envelope and white
 * noise, deterministic): the frontend's cost does not depend on the content,
 * only on the length, so a WAV file would add nothing but a path to find.
 * One warm-up, then repeated runs; the median and the minimum are printed,
 * with the CPU time of the process beside the wall time (on a shared machine
 * wall time also measures how much CPU we were given).
 *
 * Then ct_mel_compute_batch on a batch of 35 s clips (64 by default, the
 * batch the problem was seen at) with 1 and with N threads of the project's
 * pool, in clips per second (median of a few runs), and ct_mel_compute_padded
 * (what the pipeline calls: one padded batch, allocated per call) beside it.
 *
 * Usage: bench-mel [reps] [threads] [batch]; threads 0 or absent means one
 * per core. Not a test: it checks nothing but that every
 * compute succeeds.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "audio.h"
#include "base.h"

#define CLIP_SAMPLES (35 * 16000)

static double now_s(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void make_clip(float *x, size_t n, uint32_t seed) {
    uint32_t s = seed;
    for (size_t i = 0; i < n; i++) {
        double t = (double)i / 16000.0;
        s = s * 1664525u + 1013904223u;
        double noise = (double)(s >> 8) / (double)(1 << 24) - 0.5;
        double env = 0.5 + 0.5 * sin(6.283 * 0.7 * t);
        double tone = sin(6.283 * (220.0 + 40.0 * t) * t) + 0.5 * sin(6.283 * 1375.0 * t);
        x[i] = (float)(0.2 * env * tone + 0.01 * noise);
    }
}

static int fail(tg_status st, const char *what) {
    fprintf(stderr, "bench-mel: %s: %s\n", what, tg_status_message(st));
    tg_status_free(st);
    return 1;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 30;
    if (reps < 1) reps = 1;
    ct_mel mel;
    tg_status st = ct_mel_init(&mel);
    if (st) return fail(st, "ct_mel_init");
    float *clip = tg_malloc(CLIP_SAMPLES * sizeof *clip);
    double *wall = tg_malloc((size_t)reps * sizeof *wall);
    if (!clip || !wall) {
        fprintf(stderr, "bench-mel: out of memory\n");
        return 1;
    }
    make_clip(clip, CLIP_SAMPLES, 7);

    double cpu0 = 0.0;
    for (int r = -1; r < reps; r++) {   /* r = -1: the warm-up */
        float *feat = NULL;
        int frames = 0, valid = 0;
        if (r == 0) cpu0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
        double t0 = now_s(CLOCK_MONOTONIC);
        st = ct_mel_compute(&mel, clip, CLIP_SAMPLES, &feat, &frames, &valid);
        double t1 = now_s(CLOCK_MONOTONIC);
        if (st) return fail(st, "ct_mel_compute");
        tg_free(feat);
        if (r >= 0) wall[r] = t1 - t0;
    }
    double cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    qsort(wall, (size_t)reps, sizeof *wall, cmp_double);
    printf("mel frontend, one 35 s clip (%d samples, %d frames), one thread, %d runs:\n",
           CLIP_SAMPLES, CLIP_SAMPLES / 160 + 1, reps);
    printf("  median %.3f ms, min %.3f ms, CPU %.3f ms/clip\n", 1e3 * wall[reps / 2],
           1e3 * wall[0], 1e3 * cpu / reps);

    int n_threads = argc > 2 ? atoi(argv[2]) : 0;
    if (n_threads <= 0) n_threads = tg_cpu_count();
    int batch = argc > 3 ? atoi(argv[3]) : 64;
    if (batch < 1) batch = 1;
    const float **clips = tg_malloc((size_t)batch * sizeof *clips);
    size_t *lens = tg_malloc((size_t)batch * sizeof *lens);
    float **feats = tg_malloc((size_t)batch * sizeof *feats);
    int *frames = tg_malloc((size_t)batch * sizeof *frames);
    int *valid = tg_malloc((size_t)batch * sizeof *valid);
    if (!clips || !lens || !feats || !frames || !valid) {
        fprintf(stderr, "bench-mel: out of memory\n");
        return 1;
    }
    for (int i = 0; i < batch; i++) {
        clips[i] = clip;   /* the same clip: the cost depends on the length only */
        lens[i] = CLIP_SAMPLES;
    }
    int counts[2] = {1, n_threads};
    for (int c = 0; c < (n_threads > 1 ? 2 : 1); c++) {
        tg_threadpool *pool = NULL;
        st = tg_threadpool_new(counts[c], &pool);
        if (st) return fail(st, "tg_threadpool_new");
        enum { BATCH_REPS = 5 };
        double bw[BATCH_REPS];
        for (int r = -1; r < BATCH_REPS; r++) {
            double t0 = now_s(CLOCK_MONOTONIC);
            st = ct_mel_compute_batch(&mel, clips, lens, batch, pool, feats, frames, valid);
            double t1 = now_s(CLOCK_MONOTONIC);
            if (st) return fail(st, "ct_mel_compute_batch");
            for (int i = 0; i < batch; i++) tg_free(feats[i]);
            if (r >= 0) bw[r] = t1 - t0;
        }
        qsort(bw, BATCH_REPS, sizeof *bw, cmp_double);
        printf("batch of %d x 35 s, %d thread%s: median %.1f ms, %.1f clips/s (%.2f ms/clip)\n",
               batch, counts[c], counts[c] > 1 ? "s" : "", 1e3 * bw[BATCH_REPS / 2],
               batch / bw[BATCH_REPS / 2], 1e3 * bw[BATCH_REPS / 2] / batch);
        /* the pipeline's path: into one padded batch, a fresh one per call
         * as the pipeline allocates it */
        int pad = ct_mel_frames(CLIP_SAMPLES);
        for (int r = -1; r < BATCH_REPS; r++) {
            double t0 = now_s(CLOCK_MONOTONIC);
            float *out = tg_malloc((size_t)batch * pad * 128 * sizeof *out);
            if (!out) return fail(tg_status_new(TG_ERR_NO_MEMORY, "padded batch"), "tg_malloc");
            st = ct_mel_compute_padded(&mel, clips, lens, batch, pool, pad, out, frames, valid);
            tg_free(out);
            double t1 = now_s(CLOCK_MONOTONIC);
            if (st) return fail(st, "ct_mel_compute_padded");
            if (r >= 0) bw[r] = t1 - t0;
        }
        qsort(bw, BATCH_REPS, sizeof *bw, cmp_double);
        printf("  padded batch (ct_mel_compute_padded), %d thread%s: median %.1f ms (%.2f ms/clip)\n",
               counts[c], counts[c] > 1 ? "s" : "", 1e3 * bw[BATCH_REPS / 2], 1e3 * bw[BATCH_REPS / 2] / batch);
        tg_threadpool_free(pool);
    }
    tg_free(clips);
    tg_free(lens);
    tg_free(feats);
    tg_free(frames);
    tg_free(valid);
    tg_free(wall);
    tg_free(clip);
    ct_mel_free(&mel);
    return 0;
}
