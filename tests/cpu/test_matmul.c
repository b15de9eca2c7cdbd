/*
 * test_matmul.c: the CPU backend's matrix product against a float64
 * reference, on shapes chosen to hit every edge of the blocked GEMM: sizes
 * of 1, sizes just past a register tile (MR = 6, NR = 16/64) or a k block
 * (KC = 512), the few-rows dot-product path, batches with broadcast weights,
 * strided views, and every ISA path with 1-3 threads.
 *
 * Tolerance: the reference is the exact product of the stored values (bf16
 * and f16 widen to f64 exactly), so the only error is f32 accumulation:
 * |c - ref| <= K * 2^-23 * sum_k |a_k b_k|, the classical bound for a
 * K-term f32 sum (with FMA), per element.
 *
 * Also: precision F32 gives bit-identical results to the default (the
 * default is already exact), and the scratch a bf16 product uses stays far
 * below an f32 copy of the weight.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_test.h"

static const char *const isas[] = {"scalar", "avx2", "avx512"};

typedef struct mm_shape {
    int64_t M, N, K, A2, B2, B3;
} mm_shape;

static const mm_shape shapes[] = {
    {1, 1, 1, 1, 1, 1},     {5, 7, 3, 1, 1, 1},     {7, 65, 129, 1, 1, 1},
    {13, 17, 257, 1, 1, 1}, {45, 67, 131, 2, 4, 1}, {3, 77, 300, 1, 1, 1},
    {8, 130, 64, 1, 2, 2},  {9, 64, 513, 1, 1, 1},  {61, 129, 40, 1, 1, 1},
};

/* Checks c (the node's result) against the f64 product of a and b. */
static int check_product(const tg_tensor *a, const tg_tensor *b, const float *c, const char *what) {
    int64_t K = a->ne[0], N = a->ne[1], M = b->ne[1];
    int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    int bad = 0;
    for (int64_t i3 = 0; i3 < b->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < b->ne[2]; i2++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) {
                    double s = 0.0, sa = 0.0;
                    for (int64_t k = 0; k < K; k++) {
                        double x = cpu_load_f32(a->type, cpu_at(a, k, n, i2 / r2, i3 / r3));
                        double y = *(const float *)cpu_at(b, k, m, i2, i3);
                        s += x * y;
                        sa += fabs(x * y);
                    }
                    double got = c[((i3 * b->ne[2] + i2) * M + m) * N + n];
                    double tol = (double)K * 0x1p-23 * sa + 1e-30;
                    if (!(fabs(got - s) <= tol) && bad++ < 3)
                        CHECK_MSG(0, "%s: out[%lld,%lld,%lld,%lld] = %.9g, f64 %.9g (tol %.3g)", what,
                                  (long long)n, (long long)m, (long long)i2, (long long)i3, got, s,
                                  tol);
                }
    return bad;
}

static void run_shape(const mm_shape *s, tg_type wt, bool strided) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_4d(ctx, wt, s->K, s->N, s->A2, 1);
    tg_tensor *b, *bb = NULL;
    if (strided) {
        /* b's rows 3 floats apart from their natural place: a view into a
         * wider tensor, so dims >= 1 are strided */
        bb = tg_new_4d(ctx, TG_F32, s->K + 3, s->M, s->B2, s->B3);
        b = tg_view(ctx, bb, 4, (int64_t[]){s->K, s->M, s->B2, s->B3},
                    (size_t[]){4, bb->nb[1], bb->nb[2], bb->nb[3]}, 3 * sizeof(float));
    } else {
        b = tg_new_4d(ctx, TG_F32, s->K, s->M, s->B2, s->B3);
    }
    tg_tensor *c = tg_mul_mat(ctx, a, b);
    tg_status st = tg_ctx_check(ctx);
    CHECK_MSG(!st, "%s", tg_status_message(st));
    tg_status_free(st);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, c));
    tg_backend *be0 = cpu_test_backend("scalar", 1);
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, be0, &buf));
    cpu_test_fill(ctx, (uint64_t)(s->M * 131 + s->N * 7 + s->K), -1.0f, 1.0f);
    for (int ii = 0; ii < 3; ii++) {
        for (int nt = 1; nt <= 3; nt++) {
            tg_backend *be = cpu_test_backend(isas[ii], nt);
            if (!be) break;
            memset(c->data, 0xff, tg_nbytes(c)); /* NaN: every element must be written */
            float *r = cpu_test_run(be, g, c);
            if (r) {
                char what[128];
                snprintf(what, sizeof what, "%s M=%lld N=%lld K=%lld %s%s x%d", tg_type_name(wt),
                         (long long)s->M, (long long)s->N, (long long)s->K, isas[ii],
                         strided ? " strided" : "", nt);
                check_product(a, b, r, what);
            }
            free(r);
            tg_backend_free(be);
        }
    }
    tg_buffer_free(buf);
    tg_backend_free(be0);
    tg_ctx_free(ctx);
}

static void test_bf16_matches_f64_on_odd_shapes(void) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run_shape(&shapes[i], TG_BF16, false);
}

static void test_f16_f32_match_f64(void) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i += 2) {
        run_shape(&shapes[i], TG_F16, false);
        run_shape(&shapes[i], TG_F32, false);
    }
}

static void test_strided_activations(void) {
    for (size_t i = 1; i < sizeof shapes / sizeof shapes[0]; i += 2) run_shape(&shapes[i], TG_BF16, true);
}

/* Default precision is exact already: asking for F32 changes nothing. */
static void test_prec_f32_is_identical(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_2d(ctx, TG_BF16, 300, 70);
    tg_tensor *b = tg_new_2d(ctx, TG_F32, 300, 20);
    tg_tensor *c1 = tg_mul_mat(ctx, a, b);
    tg_tensor *c2 = tg_set_prec(tg_mul_mat(ctx, a, b), TG_PREC_F32);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, c1));
    CHECK_OK(tg_graph_build(g, c2));
    tg_backend *be = cpu_test_backend("scalar", 2);
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf));
    cpu_test_fill(ctx, 5, -1.0f, 1.0f);
    tg_backend *fast = NULL;
    CHECK_OK(tg_backend_cpu_new(0, &fast));
    CHECK_OK(tg_backend_graph_compute(fast, g));
    CHECK(memcmp(c1->data, c2->data, tg_nbytes(c1)) == 0);
    tg_backend_free(fast);
    tg_buffer_free(buf);
    tg_backend_free(be);
    tg_ctx_free(ctx);
}

/* The rule: never an f32 copy of a bf16 weight beyond one panel per thread.
 * With few activation rows the scratch must stay far below N*K*4 bytes. */
static void test_no_f32_copy_of_weights(void) {
    int64_t M = 64, N = 2048, K = 1024;
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_2d(ctx, TG_BF16, K, N);
    tg_tensor *b = tg_new_2d(ctx, TG_F32, K, M);
    tg_tensor *c = tg_mul_mat(ctx, a, b);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, c));
    tg_backend *be = NULL;
    CHECK_OK(tg_backend_cpu_new(2, &be));
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf));
    cpu_test_fill(ctx, 9, -1.0f, 1.0f);
    CHECK_OK(tg_backend_graph_compute(be, g));
    cpu_backend *cb = (cpu_backend *)be;
    size_t scratch = cb->scratch_size[0] + cb->scratch_size[1];
    CHECK_MSG(scratch < (size_t)(N * K * 4) / 4, "scratch %zu bytes vs f32 weight copy %lld", scratch,
              (long long)(N * K * 4));
    tg_buffer_free(buf);
    tg_backend_free(be);
    tg_ctx_free(ctx);
}

/* The GEMM under mul_mat, attention and convolution also takes operands
 * strided in k (attention's V, a patch matrix, a transposed B): every
 * combination of layouts, few rows and many, against f64. */
static void test_gemm_strided_operands(void) {
    static const int64_t Ms[] = {3, 8, 9, 40};
    const int64_t N = 70, K = 75;
    float *a = calloc((size_t)(2 * N * K), sizeof(float));
    float *b = calloc((size_t)(2 * 40 * K), sizeof(float));
    float *c = calloc((size_t)(40 * N), sizeof(float));
    for (int64_t i = 0; i < 2 * N * K; i++) a[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int64_t i = 0; i < 2 * 40 * K; i++) b[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
    for (int ii = 0; ii < 3; ii++) {
        tg_backend *be = cpu_test_backend(isas[ii], 2);
        if (!be) break;
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
            int64_t M = Ms[mi];
            /* A layouts: k-contiguous, n-contiguous, both strided by 2. */
            const cpu_mat As[3] = {
                {a, TG_F32, 4, (size_t)K * 4},
                {a, TG_F32, (size_t)N * 4, 4},
                {a, TG_F32, (size_t)N * 8, 8},
            };
            /* B layouts: k-contiguous rows, k-strided (transposed). */
            const cpu_mat Bs[2] = {
                {b, TG_F32, 4, (size_t)K * 4},
                {b, TG_F32, (size_t)M * 4, 4},
            };
            for (int ai = 0; ai < 3; ai++)
                for (int bi = 0; bi < 2; bi++) {
                    memset(c, 0xff, (size_t)(M * N) * sizeof(float));
                    CHECK_OK(cpu_gemm((cpu_backend *)be, M, N, K, &As[ai], &Bs[bi], c, N, false));
                    int bad = 0;
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t n = 0; n < N; n++) {
                            double s = 0.0, sa = 0.0;
                            for (int64_t k = 0; k < K; k++) {
                                double x = *(const float *)((const char *)a + k * As[ai].sk +
                                                            n * As[ai].sj);
                                double y = *(const float *)((const char *)b + k * Bs[bi].sk +
                                                            m * Bs[bi].sj);
                                s += x * y;
                                sa += fabs(x * y);
                            }
                            if (!(fabs(c[m * N + n] - s) <= K * 0x1p-23 * sa + 1e-30) && bad++ < 2)
                                CHECK_MSG(0, "%s M=%lld A layout %d B layout %d: [%lld,%lld] %g vs %g",
                                          isas[ii], (long long)M, ai, bi, (long long)m,
                                          (long long)n, c[m * N + n], s);
                        }
                }
        }
        tg_backend_free(be);
    }
    free(a);
    free(b);
    free(c);
}

TEST_MAIN(T(test_bf16_matches_f64_on_odd_shapes), T(test_f16_f32_match_f64),
          T(test_gemm_strided_operands),
          T(test_strided_activations), T(test_prec_f32_is_identical),
          T(test_no_f32_copy_of_weights))
