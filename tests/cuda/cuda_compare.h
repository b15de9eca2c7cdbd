/*
 * cuda_compare.h: what the CUDA tests share: a backend or a clear skip
 * where there is no GPU, graphs built from a builder function and filled
 * with seeded values, and the comparison of a graph's result on CUDA with
 * the CPU backend's (NMSE over several computes, so capture and replay are
 * both checked); the graph builders more than one test file uses (the
 * decoder step's attention, the encoder's rel-pos attention and masks).
 * Header-only (static inline) for the CUDA test programs. Not here: the
 * tests themselves.
 */
#ifndef TESTS_CUDA_COMPARE_H
#define TESTS_CUDA_COMPARE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "check.h"
#include "tg.h"

static inline tg_backend *cuda_or_skip(void) {
    tg_backend *b = NULL;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) {
        printf("skipped: no CUDA device (%s)\n", tg_status_message(st));
        CHECK(tg_status_code(st) == TG_ERR_UNSUPPORTED || tg_status_code(st) == TG_ERR_DEVICE);
        CHECK(b == NULL);
        tg_status_free(st);
        return NULL;
    }
    return b;
}

/* A CUDA backend made while the environment variable `name` is `value`
 * (a switch the context reads once, at its making), or NULL as
 * cuda_or_skip. */
static inline tg_backend *cuda_with(const char *name, const char *value) {
    setenv(name, value, 1);
    tg_backend *b = cuda_or_skip();
    unsetenv(name);
    return b;
}

/* A CUDA test program's main in a build without the CUDA backend: one test,
 * that the backend says so (TG_ERR_UNSUPPORTED naming CUDA). */
#define TEST_MAIN_WITHOUT_CUDA()                                            \
    static void test_skipped_without_cuda(void) {                           \
        printf("skipped: built without the CUDA backend\n");                \
        tg_backend *b = NULL;                                               \
        CHECK_ERR(tg_backend_cuda_new(0, &b), TG_ERR_UNSUPPORTED, "CUDA");  \
    }                                                                       \
    TEST_MAIN(T(test_skipped_without_cuda))

typedef tg_tensor *(*build_fn)(tg_ctx *ctx);

typedef struct run {
    tg_ctx *ctx;
    tg_graph *g;
    tg_tensor *out;
    tg_buffer *buf;
} run;

static inline void run_free(run *r) {
    tg_buffer_free(r->buf);
    tg_ctx_free(r->ctx);
    memset(r, 0, sizeof *r);
}

static inline tg_status run_make(tg_backend *be, build_fn fn, run *r) {
    memset(r, 0, sizeof *r);
    r->ctx = tg_ctx_new();
    if (!r->ctx) return tg_status_new(TG_ERR_NO_MEMORY, "ctx");
    r->out = fn(r->ctx);
    r->g = tg_graph_new(r->ctx);
    tg_status st = tg_graph_build(r->g, r->out);
    if (!st) st = tg_ctx_alloc_tensors(r->ctx, be, &r->buf);
    return st;
}

static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* Fills every leaf with values drawn from (seed, leaf index); I32 leaves
 * get small indices (the builders keep tables at least 4 rows long). */
static inline tg_status fill_leaves(run *r, uint64_t seed) {
    for (int i = 0; i < tg_graph_n_leafs(r->g); i++) {
        tg_tensor *t = tg_graph_leaf(r->g, i);
        int64_t n = tg_nelements(t);
        size_t es = tg_type_size(t->type);
        uint8_t *buf = tg_malloc((size_t)n * es + 1);
        if (!buf) return tg_status_new(TG_ERR_NO_MEMORY, "fill");
        for (int64_t k = 0; k < n; k++) {
            uint64_t h = mix(seed * 1000003u + (uint64_t)i * 7919u + (uint64_t)k);
            float f = (float)((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
            switch (t->type) {
            case TG_F32: memcpy(buf + k * 4, &f, 4); break;
            case TG_F16: { uint16_t v = tg_f32_to_f16(f); memcpy(buf + k * 2, &v, 2); } break;
            case TG_BF16: { uint16_t v = tg_f32_to_bf16(f); memcpy(buf + k * 2, &v, 2); } break;
            case TG_I32: { int32_t v = (int32_t)(h % 4); memcpy(buf + k * 4, &v, 4); } break;
            default: { int64_t v = (int64_t)(h % 4); memcpy(buf + k * 8, &v, 8); } break;
            }
        }
        tg_status st = tg_tensor_set(t, buf, 0, (size_t)n * es);
        tg_free(buf);
        if (st) return st;
    }
    return NULL;
}

static inline double *get_out(const tg_tensor *t) {
    int64_t n = tg_nelements(t);
    float *f = tg_malloc((size_t)n * 4 + 4);
    double *d = tg_malloc((size_t)n * 8 + 8);
    if (f && d && !tg_tensor_get(t, f, 0, (size_t)n * 4)) {
        for (int64_t i = 0; i < n; i++) {
            if (t->type == TG_I32) {
                int32_t v;
                memcpy(&v, &f[i], 4);
                d[i] = v;
            } else {
                d[i] = f[i];
            }
        }
    } else {
        tg_free(d);
        d = NULL;
    }
    tg_free(f);
    return d;
}

static inline double nmse(const double *a, const double *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) return INFINITY;
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

/* True on the stand-in driver (tests/common/fakecuda, CT_TEST_FAKE_CUDA):
 * no kernel runs there, so no result may be checked. */
static inline bool fake_cuda(void) {
    const char *e = getenv("CT_TEST_FAKE_CUDA");
    return e && *e && strcmp(e, "0") != 0;
}

/* Computes fn's graph on the CPU and on CUDA `iters` times with fresh data
 * each time (the second compute captures a CUDA graph, later ones replay
 * it), checking NMSE <= limit every time (not on the stand-in driver). */
static inline void compare_with_cpu(tg_backend *cuda, build_fn fn, int iters, double limit, const char *what) {
    tg_backend *cpu = NULL;
    CHECK_OK(tg_backend_cpu_new(2, &cpu));
    run rc, rg;
    tg_status st = run_make(cpu, fn, &rc);
    CHECK_OK(st);
    st = run_make(cuda, fn, &rg);
    CHECK_OK(st);
    for (int it = 0; it < iters && rc.g && rg.g && rg.buf && rc.buf; it++) {
        CHECK_OK(fill_leaves(&rc, 100 + (uint64_t)it));
        CHECK_OK(fill_leaves(&rg, 100 + (uint64_t)it));
        CHECK_OK(tg_backend_graph_compute(cpu, rc.g));
        tg_status cs = tg_backend_graph_compute(cuda, rg.g);
        if (cs) {
            CHECK_MSG(0, "%s: compute %d: %s", what, it, tg_status_message(cs));
            tg_status_free(cs);
            break;
        }
        double *a = get_out(rg.out), *b = get_out(rc.out);
        CHECK(a && b);
        if (a && b) {
            double e = nmse(a, b, tg_nelements(rc.out));
            CHECK_MSG(e <= limit || fake_cuda(), "%s: iteration %d: NMSE %.3g > %.3g", what, it, e, limit);
            if (it == 0) printf("  %-40s NMSE %.3g\n", what, e);
        }
        tg_free(a);
        tg_free(b);
    }
    run_free(&rg);
    run_free(&rc);
    tg_backend_free(cpu);
}

static inline tg_tensor *in2(tg_ctx *ctx, tg_type t, int64_t a, int64_t b) {
    tg_tensor *x = tg_new_2d(ctx, t, a, b);
    if (x) x->flags |= TG_FLAG_INPUT;
    return x;
}

/* A feed-forward block on `cols` columns of d: norm, matmul+bias+relu
 * (fused), matmul+bias+residual (fused), with BF16 weights; ffn_block at
 * d = 256. */
static inline tg_tensor *ffn_block_d(tg_ctx *ctx, int64_t cols, int64_t d, int64_t hidden) {
    tg_tensor *x = in2(ctx, TG_F32, d, cols);
    tg_tensor *w = in2(ctx, TG_F32, d, 1), *b = in2(ctx, TG_F32, d, 1);
    tg_tensor *w1 = in2(ctx, TG_BF16, d, hidden), *b1 = in2(ctx, TG_F32, hidden, 1);
    tg_tensor *w2 = in2(ctx, TG_BF16, hidden, d), *b2 = in2(ctx, TG_F32, d, 1);
    tg_tensor *h = tg_layer_norm(ctx, x, tg_view_1d(ctx, w, d, 0), tg_view_1d(ctx, b, d, 0), 1e-5f);
    h = tg_relu(ctx, tg_add(ctx, tg_mul_mat(ctx, w1, h), b1));
    h = tg_add(ctx, tg_mul_mat(ctx, w2, h), b2);
    return tg_add(ctx, h, x);
}
static inline tg_tensor *ffn_block(tg_ctx *ctx, int64_t cols, int64_t hidden) {
    return ffn_block_d(ctx, cols, 256, hidden);
}

/* The same with its weights and biases marked as weights, as the model's
 * are (what lets a matvec.cu product load its bias and residual before
 * its wait, TG_MV_EPI_EARLY). */
static inline tg_tensor *ffn_block_marked(tg_ctx *ctx, int64_t cols, int64_t d, int64_t hidden) {
    tg_tensor *y = ffn_block_d(ctx, cols, d, hidden); /* (w2 h + b2) + x, h = relu(w1 ln(x) + b1) */
    if (!y) return NULL;
    tg_tensor *mm2 = y->src[0]->src[0], *h = mm2->src[1], *mm1 = h->src[0]->src[0];
    tg_tensor *marked[4] = {mm2->src[0], y->src[0]->src[1], mm1->src[0], h->src[0]->src[1]};
    for (int i = 0; i < 4; i++) marked[i]->flags |= TG_FLAG_WEIGHT;
    return y;
}

/* The conformer-like block on 37 frames (cuBLASLt). */
static inline tg_tensor *build_ffn(tg_ctx *ctx) { return ffn_block(ctx, 37, 512); }

/* t marked as a weight (the model's are: what lets a product load early). */
static inline tg_tensor *as_weight(tg_tensor *t, bool mark) {
    if (t && mark) t->flags |= TG_FLAG_WEIGHT;
    return t;
}

/* A decoder step's self-attention as decoder.c builds it on x [hd H, 1,
 * B]: the layer norm, one packed q/k/v product with its bias ([3 dd, 1,
 * B]), q and the k, v heads as views of it, the k and v heads written into
 * a BF16 cache [hd, T, 2H, B] at rows from ids [1, 2H, B] (one set_rows),
 * and the attention of q over the cache's two halves; the norm's
 * parameters, the product and its bias marked as weights where `mark`.
 * kv_step_graph_dims on an x of its own with T = 8, kv_step_graph_b at
 * hd = 32, H = 2. */
static inline tg_tensor *kv_step_attention(tg_ctx *ctx, tg_tensor *x, int64_t hd, int64_t H, int64_t T, bool mark) {
    const int64_t dd = hd * H, B = x->ne[2];
    tg_tensor *h = tg_layer_norm(ctx, x, as_weight(tg_new_1d(ctx, TG_F32, dd), mark),
                                 as_weight(tg_new_1d(ctx, TG_F32, dd), mark), 1e-5f);
    tg_tensor *qkv = tg_add(ctx, tg_mul_mat(ctx, as_weight(tg_new_2d(ctx, TG_BF16, dd, 3 * dd), mark), h),
                            as_weight(tg_new_1d(ctx, TG_F32, 3 * dd), mark));
    if (!qkv) return NULL;
    const size_t es = sizeof(float);
    const int64_t qne[4] = {hd, 1, H, B}, kvne[4] = {hd, 1, 2 * H, B};
    const size_t nb[4] = {es, (size_t)hd * es, (size_t)hd * es, qkv->nb[2]};
    tg_tensor *q = tg_view(ctx, qkv, 4, qne, nb, 0);
    tg_tensor *cache = tg_new_4d(ctx, TG_BF16, hd, T, 2 * H, B);
    tg_tensor *kv = tg_set_rows(ctx, cache, tg_view(ctx, qkv, 4, kvne, nb, (size_t)dd * es),
                                tg_new_3d(ctx, TG_I32, 1, 2 * H, B));
    if (!kv) return NULL;
    const int64_t hne[4] = {hd, T, H, B};
    tg_tensor *kc = tg_view(ctx, kv, 4, hne, kv->nb, 0), *vc = tg_view(ctx, kv, 4, hne, kv->nb, (size_t)H * kv->nb[2]);
    return tg_attention(ctx, q, kc, vc, tg_new_4d(ctx, TG_F32, T, 1, 1, B), 0.17f);
}
/* The cross half of a decoder layer at hd = 128: q = W LN(x) + b from
 * x [128 H, 1, B] (one matvec launch with the norm; the norm's
 * parameters, the product and its bias marked as weights), its heads as a
 * view [128, 1, H, B], the attention over K and V [128, T, H, B] (BF16
 * leaves) with a mask [T, 1, 1, B]. *out_q (or NULL): q's add, for a test
 * that gives it another reader. */
static inline tg_tensor *cross_step_attention(tg_ctx *ctx, int64_t H, int64_t T, int64_t B, tg_tensor **out_q) {
    const int64_t hd = 128, dd = hd * H;
    tg_tensor *x = tg_new_3d(ctx, TG_F32, dd, 1, B);
    tg_tensor *h = tg_layer_norm(ctx, x, as_weight(tg_new_1d(ctx, TG_F32, dd), true),
                                 as_weight(tg_new_1d(ctx, TG_F32, dd), true), 1e-5f);
    tg_tensor *add = tg_add(ctx, tg_mul_mat(ctx, as_weight(tg_new_2d(ctx, TG_BF16, dd, dd), true), h),
                            as_weight(tg_new_1d(ctx, TG_F32, dd), true));
    if (out_q) *out_q = add;
    if (!add) return NULL;
    tg_tensor *q = tg_reshape_4d(ctx, add, hd, 1, H, B);
    tg_tensor *k = tg_new_4d(ctx, TG_BF16, hd, T, H, B), *v = tg_new_4d(ctx, TG_BF16, hd, T, H, B);
    return tg_attention(ctx, q, k, v, tg_new_4d(ctx, TG_F32, T, 1, 1, B), 0.088f);
}
static inline tg_tensor *kv_step_graph_dims(tg_ctx *ctx, int64_t B, int64_t hd, int64_t H) {
    tg_tensor *x = tg_new_3d(ctx, TG_F32, hd * H, 1, B);
    return x ? kv_step_attention(ctx, x, hd, H, 8, false) : NULL;
}
static inline tg_tensor *kv_step_graph_b(tg_ctx *ctx, int64_t B) { return kv_step_graph_dims(ctx, B, 32, 2); }
static inline tg_tensor *kv_step_graph(tg_ctx *ctx) { return kv_step_graph_b(ctx, 3); }

/* ------------------------------------------ the decoder step's attention */

/* One query per head over an F32 cache (attn_decode), and the same over
 * BF16 keys and values with D = 256 (two float4 groups a lane). */
static inline tg_tensor *build_attn_step(tg_ctx *ctx) {
    int64_t D = 128, Tk = 150, H = 4, B = 3;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, B), *k = tg_new_4d(ctx, TG_F32, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, Tk, H, B), *m = tg_new_4d(ctx, TG_F32, Tk, 1, 1, B);
    return tg_attention(ctx, q, k, v, m, 0.088f);
}

/* The decoder's cache as it is on a GPU: BF16 K/V at D = 128 (attn_decode_bf16,
 * 16 keys a warp's round), a key count that ends inside a round, a mask. */
static inline tg_tensor *build_attn_step_bf16_128(tg_ctx *ctx) {
    int64_t D = 128, Tk = 150, H = 4, B = 3;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, B), *k = tg_new_4d(ctx, TG_BF16, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_BF16, D, Tk, H, B), *m = tg_new_4d(ctx, TG_F32, Tk, 1, 1, B);
    return tg_attention(ctx, q, k, v, m, 0.088f);
}

static inline tg_tensor *build_attn_step_bf16(tg_ctx *ctx) {
    int64_t D = 256, Tk = 100, H = 2, B = 2; /* past one round: the wide kernel would take D = 128 */
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, B), *k = tg_new_4d(ctx, TG_BF16, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_BF16, D, Tk, H, B);
    return tg_set_prec(tg_attention(ctx, q, k, v, NULL, 0.0625f), TG_PREC_F32);
}

/* An attention read only by its out projection (reshaped, W o + b): a
 * decoder step of B rows over a BF16 cache of 150 keys (attn_decode; at 2
 * rows the projection on matvec.cu, at 20 on its tiles of 16, at 40 on
 * cuBLASLt), or the encoder's
 * (packed tensor-core kernel, 150 frames, rel-pos mask). */
static inline tg_tensor *attn_proj_step(tg_ctx *ctx, int64_t B) {
    const int64_t D = 128, Tk = 150, H = 4;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, B), *k = tg_new_4d(ctx, TG_BF16, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_BF16, D, Tk, H, B), *m = tg_new_4d(ctx, TG_F32, Tk, 1, 1, B);
    tg_tensor *a = tg_reshape_2d(ctx, tg_attention(ctx, q, k, v, m, 0.088f), D * H, B);
    return tg_add(ctx, tg_mul_mat(ctx, in2(ctx, TG_BF16, D * H, 256), a), in2(ctx, TG_F32, 256, 1));
}
static inline tg_tensor *build_attn_proj2(tg_ctx *ctx) { return attn_proj_step(ctx, 2); }
static inline tg_tensor *build_attn_proj20(tg_ctx *ctx) { return attn_proj_step(ctx, 20); }
static inline tg_tensor *build_attn_proj40(tg_ctx *ctx) { return attn_proj_step(ctx, 40); }

/* ------------------------------------------------- the encoder's attention */

/* Attention over heads [D, T, H, 1] (q, k, v) with the mask a shifted
 * view of r·q for a table r of `rows` rows, the view's first row at
 * `first` (bd_view in encoder.c), read in place. */
static inline tg_tensor *rel_attention_of(tg_ctx *ctx, tg_tensor *const heads[3], int64_t D, int64_t H, int64_t T,
                                   int64_t rows, int64_t first, float scale) {
    tg_tensor *r = tg_reshape_4d(ctx, in2(ctx, TG_F32, D * H, rows), D, H, rows, 1);
    tg_tensor *bd = tg_mul_mat(ctx, tg_permute(ctx, r, 0, 2, 1, 3), heads[0]);
    if (!bd) return NULL;
    const int64_t ne[4] = {T, T, H, 1};
    const size_t nb[4] = {4, bd->nb[1] - 4, bd->nb[2], bd->nb[3]};
    return tg_attention(ctx, heads[0], heads[1], heads[2], tg_view(ctx, bd, 4, ne, nb, (size_t)first * 4), scale);
}
/* The encoder's rel-pos attention as its graph has it: q, k, v strided
 * views of [D*H, T] projections (no head copies), and the mask a shifted
 * view of r·q, read in place: with 2T-1 rows of r (the spec's table; T - 1
 * odd, as at the released size's 438 frames, starts the view 4-byte, not
 * 8-byte, aligned) and with 2T+1 rows, the first at T (encoder.c's table
 * for even T: every mask row 8-byte aligned). */
static inline tg_tensor *attn_rel_scaled(tg_ctx *ctx, int64_t rows, int64_t first, float scale) {
    int64_t D = 160, T = 70, H = 2;
    tg_tensor *heads[3];
    for (int i = 0; i < 3; i++) {
        tg_tensor *x = tg_reshape_4d(ctx, in2(ctx, TG_F32, D * H, T), D, H, T, 1);
        heads[i] = tg_permute(ctx, x, 0, 2, 1, 3);
    }
    return rel_attention_of(ctx, heads, D, H, T, rows, first, scale);
}
static inline tg_tensor *attn_rel(tg_ctx *ctx, int64_t rows, int64_t first) {
    return attn_rel_scaled(ctx, rows, first, 0.079f);
}
static inline tg_tensor *build_attn_rel(tg_ctx *ctx) { return attn_rel(ctx, 2 * 70 - 1, 70 - 1); }
static inline tg_tensor *build_attn_rel_even(tg_ctx *ctx) { return attn_rel(ctx, 2 * 70 + 1, 70); }
/* ... and the table's rows a multiple of 8 (144), as encoder.c's are at
 * 35 s (880): what a BF16 rel-pos product needs (CT_CUDA_ATTN_BD16) */
static inline tg_tensor *build_attn_rel144(tg_ctx *ctx) { return attn_rel(ctx, 144, 70); }
/* ... with a negative scale: the mask added after the products */
static inline tg_tensor *build_attn_rel144_neg(tg_ctx *ctx) {
    return attn_rel_scaled(ctx, 144, 70, -0.079f);
}

/* The encoder's attention as its graph has it at 150 frames: q, k, v parts
 * of one packed projection [D * H * 3, T] (strided heads), the mask a
 * shifted view of r·q with the table's rows a multiple of 8 (encoder.c),
 * so its rows start at every 4-byte offset of a 16-byte piece; three key
 * tiles, two for one key group and one for the other. */
static inline tg_tensor *build_attn_rel150(tg_ctx *ctx) {
    const int64_t D = 160, T = 150, H = 2, first = T, rows = (2 * T + 1 + 3) / 4 * 4;
    tg_tensor *qkv = in2(ctx, TG_F32, D * H * 3, T), *heads[3];
    for (int i = 0; i < 3; i++) {
        const int64_t ne[4] = {D, H, T, 1};
        const size_t nb[4] = {4, (size_t)D * 4, qkv->nb[1], qkv->nb[1] * (size_t)T};
        heads[i] = tg_permute(ctx, tg_view(ctx, qkv, 4, ne, nb, (size_t)i * D * H * 4), 0, 2, 1, 3);
    }
    return rel_attention_of(ctx, heads, D, H, T, rows, first, 0.079f);
}

/* A mask [71, 130] of rows 71 floats long, so its rows start at every
 * offset of a 16-byte piece and its last row ends inside one: the piece
 * that would reach past the mask's end comes a key at a time. */
static inline tg_tensor *build_attn_mask_odd(tg_ctx *ctx) {
    const int64_t D = 128, Tq = 130, Tk = 71, H = 3;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, Tq, H, 1), *k = tg_new_4d(ctx, TG_F32, D, Tk, H, 1);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, Tk, H, 1), *m = tg_new_4d(ctx, TG_F32, Tk, Tq, 1, 1);
    return tg_attention(ctx, q, k, v, m, 0.088f);
}

/* Rows whose unmasked keys all lie in one key group's tiles (150 keys,
 * three tiles: two for the first group, one for the second): queries
 * 0-49 see only keys 128-149, queries 50-99 only keys 0-85. The -inf
 * come from sigmoid (> 0) scaled by -inf. With a negative scale too, so
 * the mask is added after the products instead of starting them. */
static inline tg_tensor *attn_mask_halves(tg_ctx *ctx, float scale) {
    const int64_t D = 160, Tq = 100, Tk = 150, H = 2;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, Tq, H, 1), *k = tg_new_4d(ctx, TG_F32, D, Tk, H, 1);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, Tk, H, 1);
    tg_tensor *dead0 = tg_scale(ctx, tg_sigmoid(ctx, tg_new_2d(ctx, TG_F32, 128, 50)), -INFINITY);
    tg_tensor *dead1 = tg_scale(ctx, tg_sigmoid(ctx, tg_new_2d(ctx, TG_F32, 64, 50)), -INFINITY);
    tg_tensor *late = tg_concat(ctx, dead0, tg_new_2d(ctx, TG_F32, 22, 50), 0);
    tg_tensor *early = tg_concat(ctx, tg_new_2d(ctx, TG_F32, 86, 50), dead1, 0);
    tg_tensor *m = tg_reshape_4d(ctx, tg_concat(ctx, late, early, 1), Tk, Tq, 1, 1);
    return tg_attention(ctx, q, k, v, m, scale);
}
static inline tg_tensor *build_attn_mask_halves(tg_ctx *ctx) { return attn_mask_halves(ctx, 0.079f); }
static inline tg_tensor *build_attn_mask_halves_neg(tg_ctx *ctx) {
    return attn_mask_halves(ctx, -0.079f);
}

/* A mask over keys only: [Tk, 1, H, B] seen as [Tk, Tq, H, B] with a row
 * stride of 0, so every query row reads the same row. */
static inline tg_tensor *build_attn_mask_keys(tg_ctx *ctx) {
    const int64_t D = 160, Tq = 100, Tk = 200, H = 2, B = 2;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, Tq, H, B), *k = tg_new_4d(ctx, TG_F32, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, Tk, H, B), *m = tg_new_4d(ctx, TG_F32, Tk, 1, H, B);
    const int64_t ne[4] = {Tk, Tq, H, B};
    const size_t nb[4] = {4, 0, m->nb[2], m->nb[3]};
    return tg_attention(ctx, q, k, v, tg_view(ctx, m, 4, ne, nb, 0), 0.079f);
}

/* A mask of -inf over whole rows (a finished batch row): zeros, not NaN.
 * sigmoid > 0, so scaling it by -inf gives clean -inf rows. */
static inline tg_tensor *build_attn_masked_rows(tg_ctx *ctx) {
    int64_t D = 64, T = 70, H = 2;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, T, H, 1), *k = tg_new_4d(ctx, TG_F32, D, T, H, 1);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, T, H, 1), *m = tg_new_2d(ctx, TG_F32, T, T - 2);
    tg_tensor *dead = tg_scale(ctx, tg_sigmoid(ctx, tg_new_2d(ctx, TG_F32, T, 2)), -INFINITY);
    tg_tensor *full = tg_concat(ctx, dead, m, 1);
    return tg_attention(ctx, q, k, v, tg_reshape_4d(ctx, full, T, T, 1, 1), 0.125f);
}

/* fn's graph on two CUDA backends a switch apart, from the same leaves,
 * three times: with limit < 0 the same bits (for a switch that moves a
 * load, not arithmetic), else NMSE <= limit (not on the stand-in driver,
 * where no kernel runs), printed the first time. */
static inline void compare_cuda_pair(tg_backend *a, tg_backend *b, build_fn fn, double limit, const char *what) {
    run ra, rb;
    CHECK_OK(run_make(a, fn, &ra));
    CHECK_OK(run_make(b, fn, &rb));
    for (int it = 0; it < 3 && ra.g && rb.g && ra.buf && rb.buf; it++) {
        CHECK_OK(fill_leaves(&ra, 300 + (uint64_t)it));
        CHECK_OK(fill_leaves(&rb, 300 + (uint64_t)it));
        CHECK_OK(tg_backend_graph_compute(a, ra.g));
        CHECK_OK(tg_backend_graph_compute(b, rb.g));
        double *x = get_out(ra.out), *y = get_out(rb.out);
        CHECK(x && y);
        int64_t n = tg_nelements(ra.out), differ = 0;
        if (limit < 0) {
            for (int64_t i = 0; x && y && i < n; i++) differ += memcmp(&x[i], &y[i], sizeof x[i]) != 0;
            CHECK_MSG(differ == 0, "%s: iteration %d: %lld of %lld outputs differ", what, it, (long long)differ,
                      (long long)n);
        } else if (x && y) {
            double e = nmse(x, y, n);
            CHECK_MSG(e <= limit || fake_cuda(), "%s: iteration %d: NMSE %.3g > %.3g", what, it, e, limit);
            if (it == 0) printf("  %-40s NMSE %.3g\n", what, e);
        }
        tg_free(x);
        tg_free(y);
    }
    run_free(&ra);
    run_free(&rb);
}

static inline void compare_cuda_exact(tg_backend *a, tg_backend *b, build_fn fn, const char *what) {
    compare_cuda_pair(a, b, fn, -1.0, what);
}

/* ------------------------------------- feed-forwards shared by test_kernels.c
 * and test_matvec.c */

/* The decoder step's shape: two columns (one token of two batch rows),
 * products by matvec.cu with the bias (+ relu) added there, the first
 * with the layer norm before it inside its launch (mul_mat_vec_mma; the
 * second, K = 1000 not a multiple of 32, on mul_mat_vec). */
static inline tg_tensor *build_ffn_vec(tg_ctx *ctx) { return ffn_block(ctx, 2, 1000); }
/* A step at batch 8 and at 13: the products by mul_mat_vec_mma (K = 256
 * and 1024 or 512), the norm inside the first. */
static inline tg_tensor *build_ffn_mma8(tg_ctx *ctx) { return ffn_block(ctx, 8, 1024); }
static inline tg_tensor *build_ffn_mma13(tg_ctx *ctx) { return ffn_block(ctx, 13, 512); }
/* A step at batch 40: on cuBLASLt by default; on mul_mat_vec_mma_wide
 * where asked (one block of 64 columns: 40 fills two tiles of 16 and half
 * a third, the fourth skipped) or as tiles of 16. */
static inline tg_tensor *build_ffn_mma40(tg_ctx *ctx) { return ffn_block(ctx, 40, 1024); }

/* The encoder's half feed-forward step, x + (W2 h) / 2 + b2 / 2: the
 * product, scale, bias and residual as one launch (alpha), on cuBLASLt
 * (cols 37: matvec.cu takes at most 32 by default) and on matvec.cu (cols
 * 2). */
static inline tg_tensor *half_ffn(tg_ctx *ctx, int64_t cols) {
    tg_tensor *x = in2(ctx, TG_F32, 256, cols);
    tg_tensor *w2 = in2(ctx, TG_BF16, 512, 256), *b2 = in2(ctx, TG_F32, 256, 1);
    tg_tensor *h = tg_silu(ctx, tg_mul_mat(ctx, in2(ctx, TG_BF16, 256, 512), x));
    return tg_add(ctx, x, tg_add(ctx, tg_scale(ctx, tg_mul_mat(ctx, w2, h), 0.5f), b2));
}
static inline tg_tensor *build_half_ffn(tg_ctx *ctx) { return half_ffn(ctx, 37); }
static inline tg_tensor *build_half_ffn_vec(tg_ctx *ctx) { return half_ffn(ctx, 2); }

/* The conformer's FFN shape with SiLU: the SiLU stores BF16 straight for
 * the second product (emit fusion), the biases ride the epilogue. */
static inline tg_tensor *build_ffn_silu(tg_ctx *ctx) {
    tg_tensor *x = in2(ctx, TG_F32, 256, 29);
    tg_tensor *w1 = in2(ctx, TG_BF16, 256, 1024), *b1 = in2(ctx, TG_F32, 1024, 1);
    tg_tensor *w2 = in2(ctx, TG_BF16, 1024, 256), *b2 = in2(ctx, TG_F32, 256, 1);
    tg_tensor *h = tg_silu(ctx, tg_add(ctx, tg_mul_mat(ctx, w1, x), b1));
    h = tg_add(ctx, tg_mul_mat(ctx, w2, h), b2);
    return tg_scale(ctx, tg_add(ctx, h, x), 0.5f);
}

/* argmax over 7 rows of 1000 */
static inline tg_tensor *build_argmax(tg_ctx *ctx) { return tg_argmax(ctx, tg_new_2d(ctx, TG_F32, 1000, 7)); }

#endif /* TESTS_CUDA_COMPARE_H */
