/*
 * cpu_test.h: helpers shared by the CPU backend's tests (tests/cpu).
 *
 * The tests here are about the backend itself, not op semantics (that is
 * tests/ops): the same graph must give the same numbers on every ISA path
 * (scalar, AVX2, AVX-512, forced through CT_CPU_ISA) and every thread count,
 * the matrix products must match a float64 reference on awkward shapes, and
 * the abort callback must stop a compute and leave the backend usable.
 * Inputs are filled from a fixed PRNG so every run sees the same numbers.
 * Header-only: each test file is its own program.
 */
#ifndef CPU_TEST_H
#define CPU_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu_impl.h"
#include "tg.h"

/* cpu_test_backend: a CPU backend on the named ISA path ("scalar", "avx2",
 * "avx512") with n_threads threads, running even tiny ops on all of them;
 * NULL when this machine cannot run that path.
 * cpu_test_fill: fills every float leaf (op NONE, not a view) of ctx with
 * reproducible values uniform in [lo, hi); I32 leaves are left alone.
 * cpu_test_run: computes g and returns t's elements as a new f32 array in
 * logical order (caller frees), or NULL after a CHECK failure.
 * cpu_test_rel_err: max |a - b| / max |b|; NaN when NaN or inf disagree. */
static inline tg_backend *cpu_test_backend(const char *isa, int n_threads) {
    setenv("CT_CPU_ISA", isa, 1);
    tg_log_level old = tg_log_get_level();
    tg_log_set_level(TG_LOG_ERROR); /* an unavailable ISA warns; we check below */
    tg_backend *b = NULL;
    tg_status st = tg_backend_cpu_new(n_threads, &b);
    tg_log_set_level(old);
    unsetenv("CT_CPU_ISA");
    CHECK_OK(st);
    if (!b) return NULL;
    if (strcmp(((cpu_backend *)b)->k.name, isa) != 0) {
        tg_backend_free(b);
        return NULL;
    }
    /* Every op on the pool, however small: the tests' shapes are small and
     * the threaded code is what they are here to check. */
    ((cpu_backend *)b)->serial_work = 0;
    return b;
}

static inline uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void cpu_test_fill_tensor(tg_tensor *t, uint64_t seed, float lo, float hi) {
    uint64_t s = seed * 7919u + (uint64_t)t->id;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    float v = lo + (hi - lo) * (float)((double)(next(&s) >> 11) * 0x1p-53);
                    char *p = (char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                              i3 * t->nb[3];
                    switch (t->type) {
                    case TG_F32: *(float *)p = v; break;
                    case TG_F16: *(uint16_t *)p = tg_f32_to_f16(v); break;
                    case TG_BF16: *(uint16_t *)p = tg_f32_to_bf16(v); break;
                    default: break;
                    }
                }
}

static inline void cpu_test_fill(tg_ctx *ctx, uint64_t seed, float lo, float hi) {
    for (int i = 0; i < tg_ctx_n_tensors(ctx); i++) {
        tg_tensor *t = tg_ctx_tensor(ctx, i);
        if (t->op == TG_OP_NONE && !t->view_src && t->data) cpu_test_fill_tensor(t, seed, lo, hi);
    }
}

static inline float *cpu_test_read(const tg_tensor *t) {
    int64_t n = tg_nelements(t), k = 0;
    float *out = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
                    out[k++] = cpu_load_f32(t->type, cpu_at(t, i0, i1, i2, i3));
    return out;
}

static inline float *cpu_test_run(tg_backend *backend, tg_graph *g, tg_tensor *t) {
    tg_status st = tg_backend_graph_compute(backend, g);
    if (st) {
        CHECK_MSG(0, "compute on %s: %s", tg_backend_name(backend), tg_status_message(st));
        tg_status_free(st);
        return NULL;
    }
    return cpu_test_read(t);
}

static inline double cpu_test_rel_err(const float *a, const float *b, int64_t n) {
    double m = 0.0, e = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i])) return NAN;
        if (isnan(a[i])) continue;
        if (isinf(b[i]) || isinf(a[i])) {
            if (a[i] != b[i]) return NAN;
            continue;
        }
        double d = fabs((double)a[i] - b[i]);
        if (d > e) e = d;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return e / (m > 1e-30 ? m : 1e-30);
}

#endif
