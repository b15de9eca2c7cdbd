/*
 * cuda_common.h: what the CUDA benchmarks share: a backend or a clean skip,
 * timing, filling tensors with random values (never zeros, which run faster
 * than real data), and the one-line result format that gpu-check.sh gathers
 * into its table ("RESULT <name> <value> <unit> <ceiling> <ratio> <target>").
 *
 * Header-only so each CUDA benchmark stays one program (CMake builds one
 * program per .c file in bench/).
 */
#ifndef BENCH_CUDA_COMMON_H
#define BENCH_CUDA_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "tg.h"

static inline double bench_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline tg_backend *bench_cuda_or_skip(const char *what) {
    tg_backend *b = NULL;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) {
        printf("%s: skipped: no CUDA device (%s)\n", what, tg_status_message(st));
        tg_status_free(st);
        return NULL;
    }
    return b;
}

/* Random values in [-1, 1) of t's type. */
static inline tg_status bench_fill(tg_tensor *t, uint64_t seed) {
    int64_t n = tg_nelements(t);
    size_t es = tg_type_size(t->type);
    uint8_t *buf = tg_malloc((size_t)n * es);
    if (!buf) return tg_status_new(TG_ERR_NO_MEMORY, "bench fill");
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        float f = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        if (t->type == TG_F32) memcpy(buf + i * 4, &f, 4);
        else if (t->type == TG_BF16) { uint16_t v = tg_f32_to_bf16(f); memcpy(buf + i * 2, &v, 2); }
        else if (t->type == TG_F16) { uint16_t v = tg_f32_to_f16(f); memcpy(buf + i * 2, &v, 2); }
        else { int32_t v = (int32_t)(x % 4); memcpy(buf + i * 4, &v, 4); }
    }
    tg_status st = tg_tensor_set(t, buf, 0, (size_t)n * es);
    tg_free(buf);
    return st;
}

static inline void bench_result(const char *name, double value, const char *unit, double ceiling, double ratio,
                                const char *target) {
    printf("RESULT %-34s %10.3f %-8s ceiling %10.3f  ratio %6.3f  target %s\n", name, value, unit, ceiling, ratio,
           target);
}

#define BENCH_TRY(expr)                                                          \
    do {                                                                         \
        tg_status bench_st_ = (expr);                                            \
        if (bench_st_) {                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,        \
                    tg_status_message(bench_st_));                               \
            tg_status_free(bench_st_);                                           \
            exit(1);                                                             \
        }                                                                        \
    } while (0)


#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

/* One timed step: enqueues (or runs) work on stream s. */
typedef void (*bench_step_fn)(void *arg, CUstream s);

/* The shortest GPU time, in ms, of `trials` runs of step on the backend's
 * stream, each between two events, after `warm` untimed runs. */
static inline double bench_gpu_best_ms(tg_backend *b, int warm, int trials, bench_step_fn step, void *arg) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const tg_cu_api *cu = c->dev->cu;
    CUevent e0, e1;
    if (cu->cuEventCreate(&e0, 0) || cu->cuEventCreate(&e1, 0)) BENCH_TRY(tg_status_new(TG_ERR_DEVICE, "events"));
    for (int i = 0; i < warm; i++) step(arg, c->stream);
    float best = 1e30f;
    for (int t = 0; t < trials; t++) {
        cu->cuEventRecord(e0, c->stream);
        step(arg, c->stream);
        cu->cuEventRecord(e1, c->stream);
        cu->cuEventSynchronize(e1);
        float f = 0;
        cu->cuEventElapsedTime(&f, e0, e1);
        if (f < best) best = f;
    }
    cu->cuEventDestroy(e0);
    cu->cuEventDestroy(e1);
    return best;
}

/* Device-to-device copies, `chain` in a row of `bytes` each (arg: a
 * bench_copy_arg). */
typedef struct bench_copy_arg {
    const tg_cu_api *cu;
    CUdeviceptr dst, src;
    size_t bytes;
    int chain;
} bench_copy_arg;

static inline void bench_copy_step(void *arg, CUstream s) {
    bench_copy_arg *a = arg;
    for (int i = 0; i < a->chain; i++) a->cu->cuMemcpyDtoDAsync(a->dst, a->src, a->bytes, s);
}

/* The device-to-device copy rate, bytes read plus bytes written per second,
 * of `chain` copies of `bytes` in a row (the best of 5 timed runs). The copy
 * is the ceiling the benchmarks hold memory-bound work to. */
static inline double bench_copy_bytes_per_s(tg_backend *b, size_t bytes, int chain) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const tg_cu_api *cu = c->dev->cu;
    CUdeviceptr src, dst;
    if (cu->cuMemAlloc(&src, bytes)) BENCH_TRY(tg_status_new(TG_ERR_NO_MEMORY, "copy source of %zu bytes", bytes));
    if (cu->cuMemAlloc(&dst, bytes)) BENCH_TRY(tg_status_new(TG_ERR_NO_MEMORY, "copy target of %zu bytes", bytes));
    cu->cuMemsetD8Async(src, 0x3c, bytes, c->stream);
    bench_copy_arg ca = {cu, dst, src, bytes, chain};
    double ms = bench_gpu_best_ms(b, 1, 5, bench_copy_step, &ca);
    cu->cuMemFree(src);
    cu->cuMemFree(dst);
    return 2.0 * (double)bytes * chain / (ms * 1e-3);
}

/* cuBLASLt called directly (arg: a bench_lt_arg): `reps` products of the
 * same operands, writing outs[0..reps) in turn. */
typedef struct bench_lt_arg {
    tg_cuda_ctx *c;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulHeuristicResult_t res;
    CUdeviceptr A, B;
    const CUdeviceptr *outs;
    int reps;
} bench_lt_arg;

static inline void bench_lt_step(void *arg, CUstream s) {
    bench_lt_arg *r = arg;
    const tg_cublaslt_api *lt = r->c->dev->lt;
    float alpha = 1, beta = 0;
    for (int i = 0; i < r->reps; i++)
        lt->cublasLtMatmul(r->c->dev->lt_handle, r->op, &alpha, (void *)r->A, r->la, (void *)r->B, r->lb, &beta,
                           (void *)r->outs[i], r->ld, (void *)r->outs[i], r->ld, &r->res.algo, (void *)r->c->lt_ws,
                           r->res.workspaceSize, s);
}

/* ms per product of cuBLASLt's first heuristic choice for D[M, N] = B[M, K]
 * A[N, K]^T with BF16 operands, F32 accumulation and an `out` (CUDA_R_32F or
 * CUDA_R_16BF) result, the best of 5 timed runs of `reps` products; -1 when
 * cuBLASLt offers no algorithm or its first product fails. */
static inline double bench_lt_ms(tg_backend *b, int64_t K, int64_t N, int64_t M, CUdeviceptr A, CUdeviceptr B,
                                 const CUdeviceptr *outs, int reps, cudaDataType_t out) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const tg_cublaslt_api *lt = c->dev->lt;
    bench_lt_arg r = {.c = c, .A = A, .B = B, .outs = outs, .reps = reps};
    cublasLtMatmulPreference_t pref;
    lt->cublasLtMatmulDescCreate(&r.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    lt->cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    lt->cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    lt->cublasLtMatrixLayoutCreate(&r.la, CUDA_R_16BF, (uint64_t)K, (uint64_t)N, K);
    lt->cublasLtMatrixLayoutCreate(&r.lb, CUDA_R_16BF, (uint64_t)K, (uint64_t)M, K);
    lt->cublasLtMatrixLayoutCreate(&r.ld, out, (uint64_t)N, (uint64_t)M, N);
    lt->cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = c->lt_ws_size;
    lt->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    int n = 0;
    lt->cublasLtMatmulAlgoGetHeuristic(c->dev->lt_handle, r.op, r.la, r.lb, r.ld, r.ld, pref, 1, &r.res, &n);
    /* one product first, its status checked: the timed ones are not, and
     * events around failed calls would time nothing */
    float alpha = 1, beta = 0;
    bool ok = n > 0 && lt->cublasLtMatmul(c->dev->lt_handle, r.op, &alpha, (void *)A, r.la, (void *)B, r.lb, &beta,
                                          (void *)outs[0], r.ld, (void *)outs[0], r.ld, &r.res.algo,
                                          (void *)c->lt_ws, r.res.workspaceSize, c->stream) == CUBLAS_STATUS_SUCCESS;
    double ms = ok ? bench_gpu_best_ms(b, 1, 5, bench_lt_step, &r) / reps : -1;
    lt->cublasLtMatmulPreferenceDestroy(pref);
    lt->cublasLtMatrixLayoutDestroy(r.la);
    lt->cublasLtMatrixLayoutDestroy(r.lb);
    lt->cublasLtMatrixLayoutDestroy(r.ld);
    lt->cublasLtMatmulDescDestroy(r.op);
    return ms;
}

/* A step that computes a graph (arg: a bench_graph_arg). */
typedef struct bench_graph_arg {
    tg_backend *b;
    tg_graph *g;
} bench_graph_arg;

static inline void bench_step_graph(void *arg, CUstream s) {
    (void)s;
    bench_graph_arg *a = arg;
    BENCH_TRY(tg_backend_graph_compute(a->b, a->g));
}

/* bench_gpu_best_ms of a graph compute. */
static inline double bench_graph_best_ms(tg_backend *b, tg_graph *g, int warm, int trials) {
    bench_graph_arg a = {b, g};
    return bench_gpu_best_ms(b, warm, trials, bench_step_graph, &a);
}
#endif

#endif
