/*
 * test_paths.c: every op gives the same numbers on every ISA path and every
 * thread count.
 *
 * Each case builds a small graph with awkward sizes (odd lengths that leave
 * vector tails, transposed and strided views, broadcasting both ways, fully
 * masked rows), runs it on the scalar path with one thread as the reference,
 * then on scalar/AVX2/AVX-512 (those this CPU has) with 1, 2 and 3 threads.
 * Tolerances: the paths differ only in summation order, FMA contraction and
 * a polynomial exp (about 1 ulp), so results agree to a few ulps of the
 * largest value (tol is relative to max |ref|); exact where no rounding is
 * involved (copies, conversions, argmax, elementwise add/mul). Thread counts
 * on one path must agree bit for bit: a work split never changes the order
 * of any sum.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_test.h"

typedef struct path_case {
    const char *name;
    tg_tensor *(*build)(tg_ctx *ctx);
    void (*init)(tg_ctx *ctx); /* after the random fill: ids, special values */
    double tol;
} path_case;

static void set_ids(tg_ctx *ctx, const char *name, int32_t mod, int32_t mul) {
    tg_tensor *t = tg_ctx_find(ctx, name);
    CHECK(t != NULL);
    if (!t) return;
    for (int64_t i = 0; i < tg_nelements(t); i++) ((int32_t *)t->data)[i] = (int32_t)((i * mul + 3) % mod);
}

/* ------------------------------------------------------------------ cases */

static tg_tensor *b_binary_bcast(tg_ctx *ctx) {
    tg_tensor *a = tg_new_4d(ctx, TG_F32, 37, 5, 3, 1);
    tg_tensor *b = tg_new_4d(ctx, TG_F32, 1, 5, 1, 2);
    tg_tensor *c = tg_new_4d(ctx, TG_F32, 37, 1, 3, 2);
    tg_tensor *x = tg_add(ctx, a, b);          /* [37,5,3,2] */
    x = tg_mul(ctx, x, c);
    x = tg_sub(ctx, c, x);
    return tg_div(ctx, x, tg_add(ctx, b, tg_new_4d(ctx, TG_F32, 1, 1, 1, 1)));
}

static tg_tensor *b_binary_strided(tg_ctx *ctx) {
    tg_tensor *a = tg_new_2d(ctx, TG_F32, 13, 29);
    tg_tensor *b = tg_new_2d(ctx, TG_F32, 29, 13);
    /* a transposed: dim 0 strided */
    return tg_mul(ctx, tg_transpose(ctx, a), b);
}

static tg_tensor *b_unary(tg_ctx *ctx) {
    tg_tensor *a = tg_new_3d(ctx, TG_F32, 45, 7, 3);
    tg_tensor *x = tg_silu(ctx, tg_scale(ctx, a, 12.0f));
    x = tg_add(ctx, x, tg_sigmoid(ctx, tg_scale(ctx, a, -9.0f)));
    return tg_add(ctx, x, tg_relu(ctx, a));
}

static tg_tensor *b_unary_strided(tg_ctx *ctx) {
    tg_tensor *a = tg_new_2d(ctx, TG_F32, 9, 33);
    return tg_silu(ctx, tg_transpose(ctx, a));
}

static tg_tensor *b_glu(tg_ctx *ctx) {
    tg_tensor *a = tg_new_3d(ctx, TG_F32, 2 * 43, 5, 2);
    return tg_glu(ctx, tg_scale(ctx, a, 8.0f));
}

static tg_tensor *b_layer_norm(tg_ctx *ctx) {
    tg_tensor *a = tg_new_3d(ctx, TG_F32, 301, 6, 2);
    tg_tensor *w = tg_new_1d(ctx, TG_F32, 301), *b = tg_new_1d(ctx, TG_F32, 301);
    tg_tensor *x = tg_layer_norm(ctx, tg_add(ctx, a, tg_new_1d(ctx, TG_F32, 1)), w, b, 1e-5f);
    return tg_add(ctx, x, tg_layer_norm(ctx, a, NULL, NULL, 1e-3f));
}

static tg_tensor *b_soft_max(tg_ctx *ctx) {
    tg_tensor *a = tg_new_4d(ctx, TG_F32, 53, 9, 2, 2);
    tg_set_name(tg_new_4d(ctx, TG_F32, 53, 9, 1, 2), "mask");
    tg_tensor *x = tg_soft_max(ctx, a, tg_ctx_find(ctx, "mask"), 3.5f);
    return tg_add(ctx, x, tg_soft_max(ctx, a, NULL, 0.25f));
}

static void i_mask(tg_ctx *ctx) {
    tg_tensor *m = tg_ctx_find(ctx, "mask");
    float *p = m->data;
    int64_t n0 = m->ne[0];
    for (int64_t r = 0; r < tg_nrows(m); r++)
        for (int64_t j = 0; j < n0; j++)
            if (r % 4 == 1 || (j * 7 + r) % 5 == 0) p[r * n0 + j] = -INFINITY;
}

static tg_tensor *b_attention(tg_ctx *ctx) {
    tg_tensor *q = tg_new_4d(ctx, TG_F32, 40, 70, 3, 2);
    tg_tensor *k = tg_new_4d(ctx, TG_F16, 40, 51, 3, 2);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, 24, 51, 3, 2);
    tg_set_name(tg_new_4d(ctx, TG_F32, 51, 70, 1, 2), "mask");
    return tg_attention(ctx, q, k, v, tg_ctx_find(ctx, "mask"), 0.3f);
}

static tg_tensor *b_attention_f16v(tg_ctx *ctx) {
    tg_tensor *q = tg_new_4d(ctx, TG_F32, 16, 3, 4, 1);
    tg_tensor *k = tg_new_4d(ctx, TG_F32, 16, 37, 4, 1);
    tg_tensor *v = tg_new_4d(ctx, TG_F16, 20, 37, 4, 1);
    return tg_attention(ctx, q, k, v, NULL, 0.25f);
}

static tg_tensor *b_mul_mat_bf16(tg_ctx *ctx) {
    tg_tensor *a = tg_new_3d(ctx, TG_BF16, 131, 67, 2);
    tg_tensor *b = tg_new_3d(ctx, TG_F32, 131, 45, 4);
    return tg_mul_mat(ctx, a, b);
}

static tg_tensor *b_mul_mat_small(tg_ctx *ctx) {
    tg_tensor *a = tg_new_2d(ctx, TG_F16, 300, 77);
    tg_tensor *b = tg_new_2d(ctx, TG_F32, 300, 3);
    return tg_mul_mat(ctx, a, b);
}

static tg_tensor *b_mul_mat_view(tg_ctx *ctx) {
    tg_tensor *a = tg_new_2d(ctx, TG_F32, 70, 90);
    tg_tensor *b = tg_new_2d(ctx, TG_F32, 80, 33);
    /* rows of a and b strided: every other row, 64 of 70 / 80 columns */
    tg_tensor *av = tg_view_2d(ctx, a, 64, 45, 2 * a->nb[1], 0);
    tg_tensor *bv = tg_view_2d(ctx, b, 64, 33, b->nb[1], 8 * sizeof(float));
    return tg_mul_mat(ctx, av, bv);
}

static tg_tensor *b_conv_2d(tg_ctx *ctx) {
    tg_tensor *k = tg_new_4d(ctx, TG_F32, 3, 3, 5, 11);
    tg_tensor *x = tg_new_4d(ctx, TG_F32, 19, 14, 5, 2);
    tg_tensor *y = tg_conv_2d(ctx, k, x, 2, 2, 1, 1);
    tg_tensor *k1 = tg_new_4d(ctx, TG_F32, 1, 1, 11, 7);
    return tg_conv_2d(ctx, k1, y, 1, 1, 0, 0);
}

static tg_tensor *b_conv_dw(tg_ctx *ctx) {
    tg_tensor *k = tg_new_4d(ctx, TG_F32, 3, 3, 1, 6);
    tg_tensor *x = tg_new_4d(ctx, TG_F32, 17, 12, 6, 2);
    return tg_conv_2d_dw(ctx, k, x, 2, 2, 1, 1);
}

static tg_tensor *b_conv_dw_odd(tg_ctx *ctx) {
    /* stride 3 with padding 2 along W, 5 taps: every phase edge case */
    tg_tensor *k = tg_new_4d(ctx, TG_F32, 5, 2, 1, 3);
    tg_tensor *x = tg_new_4d(ctx, TG_F32, 10, 7, 3, 2);
    tg_tensor *y = tg_conv_2d_dw(ctx, k, x, 3, 1, 2, 0);
    tg_tensor *k1 = tg_new_4d(ctx, TG_F32, 1, 1, 3, 4);
    return tg_conv_2d(ctx, k1, y, 1, 1, 0, 0);
}

static tg_tensor *b_conv_1d_dw(tg_ctx *ctx) {
    tg_tensor *k = tg_new_2d(ctx, TG_F32, 9, 35);
    tg_tensor *x = tg_new_3d(ctx, TG_F32, 35, 40, 2);
    return tg_conv_1d_dw(ctx, k, x, 1, 4);
}

static tg_tensor *b_rows(tg_ctx *ctx) {
    tg_tensor *tab = tg_new_3d(ctx, TG_BF16, 33, 20, 2);
    tg_tensor *ids = tg_set_name(tg_new_2d(ctx, TG_I32, 7, 2), "ids");
    tg_tensor *g = tg_get_rows(ctx, tab, ids);           /* [33, 7, 2] f32 */
    tg_tensor *dst = tg_new_3d(ctx, TG_F16, 33, 12, 2);
    tg_tensor *ids2 = tg_set_name(tg_new_2d(ctx, TG_I32, 7, 2), "ids2");
    tg_tensor *s = tg_set_rows(ctx, dst, g, ids2);
    return tg_cast(ctx, s, TG_F32);
}

static void i_rows(tg_ctx *ctx) {
    set_ids(ctx, "ids", 20, 7);
    set_ids(ctx, "ids2", 12, 5);
}

static tg_tensor *b_cpy(tg_ctx *ctx) {
    tg_tensor *a = tg_new_3d(ctx, TG_F32, 21, 13, 3);
    tg_tensor *p = tg_permute(ctx, a, 2, 0, 1, 3);        /* strided dim 0 */
    tg_tensor *h = tg_cast(ctx, p, TG_BF16);
    tg_tensor *f = tg_cast(ctx, tg_scale(ctx, a, 1000.0f), TG_F16);
    tg_tensor *i = tg_cast(ctx, tg_scale(ctx, a, 100.0f), TG_I32);
    tg_tensor *x = tg_add(ctx, tg_cont(ctx, tg_cast(ctx, h, TG_F32)),
                          tg_permute(ctx, tg_cast(ctx, f, TG_F32), 2, 0, 1, 3));
    return tg_add(ctx, x, tg_permute(ctx, tg_cast(ctx, i, TG_F32), 2, 0, 1, 3));
}

static tg_tensor *b_concat_pad(tg_ctx *ctx) {
    tg_tensor *a = tg_new_3d(ctx, TG_F32, 5, 4, 3), *b = tg_new_3d(ctx, TG_F32, 5, 4, 3);
    tg_tensor *c0 = tg_concat(ctx, a, b, 0);  /* [10,4,3] */
    tg_tensor *c1 = tg_concat(ctx, a, b, 1);  /* [5,8,3]  */
    int lo[4] = {1, 0, 2, 0}, hi[4] = {2, 3, 0, 0};
    tg_tensor *p = tg_pad(ctx, c1, lo, hi);   /* [8,11,5] */
    tg_tensor *c2 = tg_concat(ctx, tg_transpose(ctx, c0), tg_new_3d(ctx, TG_F32, 4, 10, 3), 2);
    tg_tensor *s = tg_sum_rows(ctx, tg_reshape_2d(ctx, tg_cont(ctx, c2), 40, 6));
    tg_tensor *m = tg_mean(ctx, tg_reshape_2d(ctx, p, 88, 5));
    return tg_concat(ctx, s, m, 1);
}

static tg_tensor *b_argmax(tg_ctx *ctx) {
    tg_tensor *a = tg_new_3d(ctx, TG_F32, 97, 11, 3);
    return tg_cast(ctx, tg_argmax(ctx, a), TG_F32);
}

/* silu, sigmoid and glu far out, where exp(-x) overflows (x below about
 * -88.7): 1 / (1 + inf) is 0 on every path, never NaN (i_far sets the
 * values; the scalar reference takes libm's expf). */
static tg_tensor *b_unary_far(tg_ctx *ctx) {
    tg_tensor *a = tg_new_2d(ctx, TG_F32, 37, 3), *g = tg_new_2d(ctx, TG_F32, 74, 3);
    tg_set_name(a, "far");
    tg_set_name(g, "far_glu");
    return tg_add(ctx, tg_add(ctx, tg_silu(ctx, a), tg_sigmoid(ctx, a)), tg_glu(ctx, g));
}

static void i_far(tg_ctx *ctx) {
    static const float v[] = {-1000.0f, -200.0f, -104.5f, -100.0f, -89.0f, -88.8f, -88.5f, -87.0f,
                              -30.0f,   -1.0f,   0.0f,    2.0f,    88.5f,  89.0f,  100.0f, 1000.0f};
    const char *names[2] = {"far", "far_glu"};
    for (int k = 0; k < 2; k++) {
        tg_tensor *t = tg_ctx_find(ctx, names[k]);
        CHECK(t != NULL);
        for (int64_t i = 0; t && i < tg_nelements(t); i++)
            ((float *)t->data)[i] = v[(i * 7 + k) % (int64_t)(sizeof v / sizeof v[0])];
    }
}

static const path_case cases[] = {
    {"binary broadcast", b_binary_bcast, NULL, 1e-6},
    {"binary strided", b_binary_strided, NULL, 0},
    {"unary", b_unary, NULL, 1e-5},
    {"unary strided", b_unary_strided, NULL, 1e-5},
    {"glu", b_glu, NULL, 1e-5},
    {"silu sigmoid glu far out", b_unary_far, i_far, 1e-6},
    {"layer_norm", b_layer_norm, NULL, 1e-5},
    {"soft_max", b_soft_max, i_mask, 1e-5},
    {"attention", b_attention, i_mask, 1e-5},
    {"attention f16 v", b_attention_f16v, NULL, 1e-5},
    {"mul_mat bf16 batched", b_mul_mat_bf16, NULL, 1e-5},
    {"mul_mat f16 few rows", b_mul_mat_small, NULL, 1e-5},
    {"mul_mat strided views", b_mul_mat_view, NULL, 1e-5},
    {"conv_2d", b_conv_2d, NULL, 1e-5},
    {"conv_2d_dw", b_conv_dw, NULL, 1e-5},
    {"conv_2d_dw odd stride", b_conv_dw_odd, NULL, 1e-5},
    {"conv_1d_dw", b_conv_1d_dw, NULL, 1e-5},
    {"get_rows set_rows", b_rows, i_rows, 0},
    {"cpy cast", b_cpy, NULL, 0},
    {"concat pad sum mean", b_concat_pad, NULL, 1e-6},
    {"argmax", b_argmax, NULL, 0},
};

static const char *const isas[] = {"scalar", "avx2", "avx512"};

static void run_case(const path_case *c) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *out = c->build(ctx);
    tg_status st = tg_ctx_check(ctx);
    CHECK_MSG(st == NULL, "%s: %s", c->name, tg_status_message(st));
    tg_status_free(st);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, out));
    tg_backend *ref_be = cpu_test_backend("scalar", 1);
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, ref_be, &buf));
    cpu_test_fill(ctx, 42, -2.0f, 2.0f);
    if (c->init) c->init(ctx);
    int64_t n = tg_nelements(out);
    float *ref = cpu_test_run(ref_be, g, out);
    for (int ii = 0; ref && ii < 3; ii++) {
        float *one = NULL;
        for (int nt = 1; nt <= 3; nt++) {
            tg_backend *be = cpu_test_backend(isas[ii], nt);
            if (!be) break; /* this CPU lacks the ISA */
            float *r = cpu_test_run(be, g, out);
            if (r) {
                double e = cpu_test_rel_err(r, ref, n);
                if (getenv("CPU_TEST_VERBOSE"))
                    printf("  %-24s %-6s x%d  n=%-6lld rel err %.3g\n", c->name, isas[ii], nt,
                           (long long)n, e);
                CHECK_MSG(e <= c->tol, "%s: %s x%d vs scalar: rel err %g > %g", c->name, isas[ii],
                          nt, e, c->tol);
                if (!one) {
                    one = r;
                    r = NULL;
                } else {
                    CHECK_MSG(memcmp(one, r, (size_t)n * sizeof(float)) == 0,
                              "%s: %s with %d threads differs from 1 thread", c->name, isas[ii], nt);
                }
            }
            free(r);
            tg_backend_free(be);
        }
        free(one);
    }
    free(ref);
    tg_buffer_free(buf);
    tg_backend_free(ref_be);
    tg_ctx_free(ctx);
}

static void test_isa_paths_and_threads_agree(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
}

/* Sanity of the comparison itself: the reference must carry the expected
 * values, or agreement would prove nothing. */
static void test_reference_values(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_2d(ctx, TG_F32, 3, 2);
    tg_tensor *m = tg_new_2d(ctx, TG_F32, 3, 2);
    tg_tensor *s = tg_soft_max(ctx, a, m, 1.0f);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, s));
    tg_backend *be = cpu_test_backend("scalar", 2);
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf));
    float av[6] = {1, 2, 3, 1, 2, 3}, mv[6] = {0, 0, 0, -INFINITY, -INFINITY, -INFINITY};
    memcpy(a->data, av, sizeof av);
    memcpy(m->data, mv, sizeof mv);
    float *r = cpu_test_run(be, g, s);
    if (r) {
        double e1 = exp(1.0), e2 = exp(2.0), e3 = exp(3.0), z = e1 + e2 + e3;
        CHECK_NEAR(r[0], e1 / z, 1e-7);
        CHECK_NEAR(r[2], e3 / z, 1e-7);
        CHECK(r[3] == 0.0f && r[4] == 0.0f && r[5] == 0.0f); /* fully masked row: zeros */
    }
    free(r);
    tg_buffer_free(buf);
    tg_backend_free(be);
    tg_ctx_free(ctx);
}

/* The depthwise convolution's phase layout has edge cases (stride above the
 * padding, taps past the input) that agreement between paths cannot see:
 * check it against the direct sum. */
static void test_conv_2d_dw_matches_direct_sum(void) {
    static const int cfg[][4] = {{1, 1, 0, 0}, {2, 2, 1, 1}, {3, 1, 2, 0}, {1, 3, 4, 1}, {4, 2, 0, 2}};
    for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
        int s0 = cfg[ci][0], s1 = cfg[ci][1], p0 = cfg[ci][2], p1 = cfg[ci][3];
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *k = tg_new_4d(ctx, TG_F32, 5, 3, 1, 3);
        tg_tensor *x = tg_new_4d(ctx, TG_F32, 11, 8, 3, 2);
        tg_tensor *y = tg_conv_2d_dw(ctx, k, x, s0, s1, p0, p1);
        tg_graph *g = tg_graph_new(ctx);
        CHECK_OK(tg_graph_build(g, y));
        tg_backend *be = NULL;
        CHECK_OK(tg_backend_cpu_new(2, &be));
        tg_buffer *buf = NULL;
        CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf));
        cpu_test_fill(ctx, 3, -1.0f, 1.0f);
        float *r = cpu_test_run(be, g, y);
        for (int64_t i = 0; r && i < tg_nelements(y); i++) {
            int64_t ox = i % y->ne[0], oy = (i / y->ne[0]) % y->ne[1];
            int64_t c = (i / (y->ne[0] * y->ne[1])) % 3, b = i / (y->ne[0] * y->ne[1] * 3);
            double s = 0.0;
            for (int64_t ky = 0; ky < 3; ky++)
                for (int64_t kx = 0; kx < 5; kx++) {
                    int64_t ix = ox * s0 - p0 + kx, iy = oy * s1 - p1 + ky;
                    if (ix < 0 || ix >= 11 || iy < 0 || iy >= 8) continue;
                    s += (double)*(float *)cpu_at(x, ix, iy, c, b) * *(float *)cpu_at(k, kx, ky, 0, c);
                }
            CHECK_MSG(fabs(r[i] - s) <= 1e-5, "s=(%d,%d) p=(%d,%d) out %lld: %g vs %g", s0, s1, p0,
                      p1, (long long)i, r[i], s);
        }
        free(r);
        tg_buffer_free(buf);
        tg_backend_free(be);
        tg_ctx_free(ctx);
    }
}

TEST_MAIN(T(test_reference_values), T(test_isa_paths_and_threads_agree),
          T(test_conv_2d_dw_matches_direct_sum))
