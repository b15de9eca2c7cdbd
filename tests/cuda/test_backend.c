/*
 * test_backend.c: the CUDA backend's own behaviour on a GPU: properties,
 * buffers (device, host-mapped, out of memory), events with a timeout, the
 * sticky error and recovery, abort, CUDA-graph capture and replay (results
 * still right when the data or the addresses change), fusion and concurrent
 * runs against the CPU backend, the kernel cache across starts (cold, warm,
 * damaged entry, two processes at once), the graph dump, and copies between
 * two GPUs where there are two.
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU (CI, the development machine); on such a machine the test
 * still checks that tg_backend_cuda_new fails with TG_ERR_UNSUPPORTED and a
 * message that says why.
 *
 * Not here: per-op conformance (tests/ops runs every op on every backend).
 */
#include "check.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "cuda_internal.h"
#include "cuda_kernels.h"

extern char **environ;

static tg_backend *cuda_or_skip(void) {
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

/* ------------------------------------------------------ graph helpers */

typedef tg_tensor *(*build_fn)(tg_ctx *ctx);

typedef struct run {
    tg_ctx *ctx;
    tg_graph *g;
    tg_tensor *out;
    tg_buffer *buf;
} run;

static void run_free(run *r) {
    tg_buffer_free(r->buf);
    tg_ctx_free(r->ctx);
    memset(r, 0, sizeof *r);
}

static tg_status run_make(tg_backend *be, build_fn fn, run *r) {
    memset(r, 0, sizeof *r);
    r->ctx = tg_ctx_new();
    if (!r->ctx) return tg_status_new(TG_ERR_NO_MEMORY, "ctx");
    r->out = fn(r->ctx);
    r->g = tg_graph_new(r->ctx);
    tg_status st = tg_graph_build(r->g, r->out);
    if (!st) st = tg_ctx_alloc_tensors(r->ctx, be, &r->buf);
    return st;
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* Fills every leaf with values drawn from (seed, leaf index); I32 leaves
 * get small indices (the builders keep tables at least 4 rows long). */
static tg_status fill_leaves(run *r, uint64_t seed) {
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

static double *get_out(const tg_tensor *t) {
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

static double nmse(const double *a, const double *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) return INFINITY;
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

/* Computes fn's graph on the CPU and on CUDA `iters` times with fresh data
 * each time (the second compute captures a CUDA graph, later ones replay
 * it), checking NMSE <= limit every time. */
static void compare_with_cpu(tg_backend *cuda, build_fn fn, int iters, double limit, const char *what) {
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
            CHECK_MSG(e <= limit, "%s: iteration %d: NMSE %.3g > %.3g", what, it, e, limit);
            if (it == 0) printf("  %-40s NMSE %.3g\n", what, e);
        }
        tg_free(a);
        tg_free(b);
    }
    run_free(&rg);
    run_free(&rc);
    tg_backend_free(cpu);
}

/* -------------------------------------------------------------- builders */

static tg_tensor *in2(tg_ctx *ctx, tg_type t, int64_t a, int64_t b) {
    tg_tensor *x = tg_new_2d(ctx, t, a, b);
    if (x) x->flags |= TG_FLAG_INPUT;
    return x;
}

/* A feed-forward block on `cols` columns: norm, matmul+bias+relu (fused),
 * matmul+bias+residual (fused), with BF16 weights. */
static tg_tensor *ffn_block(tg_ctx *ctx, int64_t cols, int64_t hidden) {
    tg_tensor *x = in2(ctx, TG_F32, 256, cols);
    tg_tensor *w = in2(ctx, TG_F32, 256, 1), *b = in2(ctx, TG_F32, 256, 1);
    tg_tensor *w1 = in2(ctx, TG_BF16, 256, hidden), *b1 = in2(ctx, TG_F32, hidden, 1);
    tg_tensor *w2 = in2(ctx, TG_BF16, hidden, 256), *b2 = in2(ctx, TG_F32, 256, 1);
    tg_tensor *h = tg_layer_norm(ctx, x, tg_view_1d(ctx, w, 256, 0), tg_view_1d(ctx, b, 256, 0), 1e-5f);
    h = tg_relu(ctx, tg_add(ctx, tg_mul_mat(ctx, w1, h), b1));
    h = tg_add(ctx, tg_mul_mat(ctx, w2, h), b2);
    return tg_add(ctx, h, x);
}

/* The conformer-like block on 37 frames (cuBLASLt). */
static tg_tensor *build_ffn(tg_ctx *ctx) { return ffn_block(ctx, 37, 512); }

/* The decoder step's shape: two columns (one token of two batch rows),
 * products by matvec.cu with the bias (+ relu) added there, the first
 * with the layer norm before it inside its launch (mul_mat_vec_mma; the
 * second, K = 1000 not a multiple of 32, on mul_mat_vec). */
static tg_tensor *build_ffn_vec(tg_ctx *ctx) { return ffn_block(ctx, 2, 1000); }

/* A step at batch 8 and at 13: the products by mul_mat_vec_mma (K = 256
 * and 1024 or 512), the norm inside the first. */
static tg_tensor *build_ffn_mma8(tg_ctx *ctx) { return ffn_block(ctx, 8, 1024); }
static tg_tensor *build_ffn_mma13(tg_ctx *ctx) { return ffn_block(ctx, 13, 512); }
/* A step at batch 40 and 64 as tiles of 16 columns (CT_CUDA_MATVEC_MMA_MAX):
 * the last tile of 40 partly filled. */
static tg_tensor *build_ffn_mma40(tg_ctx *ctx) { return ffn_block(ctx, 40, 1024); }
static tg_tensor *build_ffn_mma64(tg_ctx *ctx) { return ffn_block(ctx, 64, 512); }

/* The encoder's half feed-forward step, x + (W2 h) / 2 + b2 / 2: the
 * product, scale, bias and residual as one launch (alpha), on cuBLASLt
 * (cols 29) and on matvec.cu (cols 2). */
static tg_tensor *half_ffn(tg_ctx *ctx, int64_t cols) {
    tg_tensor *x = in2(ctx, TG_F32, 256, cols);
    tg_tensor *w2 = in2(ctx, TG_BF16, 512, 256), *b2 = in2(ctx, TG_F32, 256, 1);
    tg_tensor *h = tg_silu(ctx, tg_mul_mat(ctx, in2(ctx, TG_BF16, 256, 512), x));
    return tg_add(ctx, x, tg_add(ctx, tg_scale(ctx, tg_mul_mat(ctx, w2, h), 0.5f), b2));
}
static tg_tensor *build_half_ffn(tg_ctx *ctx) { return half_ffn(ctx, 29); }
static tg_tensor *build_half_ffn_vec(tg_ctx *ctx) { return half_ffn(ctx, 2); }

/* The encoder's rel-pos attention as its graph has it: q, k, v strided
 * views of [D*H, T] projections (no head copies), and the mask a shifted
 * view of r·q, read in place: with 2T-1 rows of r (the spec's table; T - 1
 * odd, as at the released size's 438 frames, starts the view 4-byte, not
 * 8-byte, aligned) and with 2T+1 rows, the first at T (encoder.c's table
 * for even T: every mask row 8-byte aligned). */
static tg_tensor *attn_rel(tg_ctx *ctx, int64_t rows, int64_t first) {
    int64_t D = 160, T = 70, H = 2;
    tg_tensor *heads[3];
    for (int i = 0; i < 3; i++) {
        tg_tensor *x = tg_reshape_4d(ctx, in2(ctx, TG_F32, D * H, T), D, H, T, 1);
        heads[i] = tg_permute(ctx, x, 0, 2, 1, 3);
    }
    tg_tensor *r = tg_reshape_4d(ctx, in2(ctx, TG_F32, D * H, rows), D, H, rows, 1);
    tg_tensor *bd = tg_mul_mat(ctx, tg_permute(ctx, r, 0, 2, 1, 3), heads[0]);
    if (!bd) return NULL;
    const int64_t ne[4] = {T, T, H, 1};
    const size_t nb[4] = {4, bd->nb[1] - 4, bd->nb[2], bd->nb[3]};
    return tg_attention(ctx, heads[0], heads[1], heads[2], tg_view(ctx, bd, 4, ne, nb, (size_t)first * 4), 0.079f);
}
static tg_tensor *build_attn_rel(tg_ctx *ctx) { return attn_rel(ctx, 2 * 70 - 1, 70 - 1); }
static tg_tensor *build_attn_rel_even(tg_ctx *ctx) { return attn_rel(ctx, 2 * 70 + 1, 70); }

/* The conformer's conv module middle: glu, depthwise conv (9 taps), bias,
 * silu as one kernel (conv_glu_dw_silu_c4), storing BF16 for the product
 * after it, and F32 when the silu is the graph's result. */
static tg_tensor *conv_module_mid(tg_ctx *ctx) {
    int64_t C = 64, T = 37, B = 3;
    tg_tensor *a = tg_new_3d(ctx, TG_F32, 2 * C, T, B);
    tg_tensor *kr = in2(ctx, TG_F32, 9, C), *bias = tg_new_1d(ctx, TG_F32, C);
    return tg_silu(ctx, tg_add(ctx, tg_conv_1d_dw(ctx, kr, tg_glu(ctx, a), 1, 4), bias));
}
static tg_tensor *build_conv_module(tg_ctx *ctx) {
    return tg_mul_mat(ctx, in2(ctx, TG_BF16, 64, 48), conv_module_mid(ctx));
}
static tg_tensor *build_conv_module_f32(tg_ctx *ctx) { return conv_module_mid(ctx); }

/* One query per head over an F32 cache (attn_decode), and the same over
 * BF16 keys and values with D = 256 (two float4 groups a lane). */
static tg_tensor *build_attn_step(tg_ctx *ctx) {
    int64_t D = 128, Tk = 150, H = 4, B = 3;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, B), *k = tg_new_4d(ctx, TG_F32, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, Tk, H, B), *m = tg_new_4d(ctx, TG_F32, Tk, 1, 1, B);
    return tg_attention(ctx, q, k, v, m, 0.088f);
}

/* The decoder's cache as it is on a GPU: BF16 K/V at D = 128 (attn_decode_bf16,
 * 16 keys a warp's round), a key count that ends inside a round, a mask. */
static tg_tensor *build_attn_step_bf16_128(tg_ctx *ctx) {
    int64_t D = 128, Tk = 150, H = 4, B = 3;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, B), *k = tg_new_4d(ctx, TG_BF16, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_BF16, D, Tk, H, B), *m = tg_new_4d(ctx, TG_F32, Tk, 1, 1, B);
    return tg_attention(ctx, q, k, v, m, 0.088f);
}

static tg_tensor *build_attn_step_bf16(tg_ctx *ctx) {
    int64_t D = 256, Tk = 37, H = 2, B = 2;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, B), *k = tg_new_4d(ctx, TG_BF16, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_BF16, D, Tk, H, B);
    return tg_set_prec(tg_attention(ctx, q, k, v, NULL, 0.0625f), TG_PREC_F32);
}

/* The conformer's FFN shape with SiLU: the SiLU stores BF16 straight for
 * the second product (emit fusion), the biases ride the epilogue. */
static tg_tensor *build_ffn_silu(tg_ctx *ctx) {
    tg_tensor *x = in2(ctx, TG_F32, 256, 29);
    tg_tensor *w1 = in2(ctx, TG_BF16, 256, 1024), *b1 = in2(ctx, TG_F32, 1024, 1);
    tg_tensor *w2 = in2(ctx, TG_BF16, 1024, 256), *b2 = in2(ctx, TG_F32, 256, 1);
    tg_tensor *h = tg_silu(ctx, tg_add(ctx, tg_mul_mat(ctx, w1, x), b1));
    h = tg_add(ctx, tg_mul_mat(ctx, w2, h), b2);
    return tg_scale(ctx, tg_add(ctx, h, x), 0.5f);
}

/* Attention at the encoder's head size (160) with a relative-position bias,
 * and the decoder's (128) with F16 K/V over a longer cache. */
static tg_tensor *build_attn_enc(tg_ctx *ctx) {
    int64_t D = 160, T = 45, H = 2;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, T, H, 1), *k = tg_new_4d(ctx, TG_F32, D, T, H, 1);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, T, H, 1), *m = tg_new_4d(ctx, TG_F32, T, T, H, 1);
    return tg_attention(ctx, q, k, v, m, 0.079f);
}

static tg_tensor *build_attn_dec(tg_ctx *ctx) {
    int64_t D = 128, Tk = 70, H = 4;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, 2), *k = tg_new_4d(ctx, TG_F16, D, Tk, H, 2);
    tg_tensor *v = tg_new_4d(ctx, TG_F16, D, Tk, H, 2), *m = tg_new_4d(ctx, TG_F32, Tk, 1, 1, 2);
    return tg_set_prec(tg_attention(ctx, q, k, v, m, 0.088f), TG_PREC_F32);
}

static tg_tensor *build_attn_dec_mma(tg_ctx *ctx) {
    int64_t D = 128, Tk = 130, H = 4;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 3, H, 2), *k = tg_new_4d(ctx, TG_F16, D, Tk, H, 2);
    tg_tensor *v = tg_new_4d(ctx, TG_F16, D, Tk, H, 2), *m = tg_new_4d(ctx, TG_F32, Tk, 3, 1, 2);
    return tg_attention(ctx, q, k, v, m, 0.088f);
}

/* A mask of -inf over whole rows (a finished batch row): zeros, not NaN.
 * sigmoid > 0, so scaling it by -inf gives clean -inf rows. */
static tg_tensor *build_attn_masked_rows(tg_ctx *ctx) {
    int64_t D = 64, T = 70, H = 2;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, T, H, 1), *k = tg_new_4d(ctx, TG_F32, D, T, H, 1);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, T, H, 1), *m = tg_new_2d(ctx, TG_F32, T, T - 2);
    tg_tensor *dead = tg_scale(ctx, tg_sigmoid(ctx, tg_new_2d(ctx, TG_F32, T, 2)), -INFINITY);
    tg_tensor *full = tg_concat(ctx, dead, m, 1);
    return tg_attention(ctx, q, k, v, tg_reshape_4d(ctx, full, T, T, 1, 1), 0.125f);
}

/* Many independent branches (concurrent runs inside the capture): each
 * node 1 MiB, the size from which runs are spread over streams (smaller
 * ones run in turn, cuda_context.c). */
static tg_tensor *build_branches(tg_ctx *ctx) {
    tg_tensor *x = in2(ctx, TG_F32, 512, 512);
    tg_tensor *acc = NULL;
    for (int i = 0; i < 24; i++) {
        tg_tensor *y = tg_scale(ctx, tg_silu(ctx, tg_mul(ctx, x, x)), 0.5f + (float)i);
        y = tg_soft_max(ctx, y, NULL, 0.25f);
        acc = acc ? tg_add(ctx, acc, y) : y;
    }
    return acc;
}

/* Strided views, broadcasting both ways, a transposed product operand,
 * batched weights, a cast round trip, concat, pad and reductions. */
static tg_tensor *build_mixed(tg_ctx *ctx) {
    tg_tensor *a = tg_new_3d(ctx, TG_F32, 32, 24, 4);
    tg_tensor *row = tg_new_3d(ctx, TG_F32, 32, 1, 1), *col = tg_new_3d(ctx, TG_F32, 1, 24, 4);
    tg_tensor *x = tg_sub(ctx, tg_div(ctx, tg_add(ctx, a, row), tg_add(ctx, tg_scale(ctx, tg_relu(ctx, col), 1.0f),
                                                                   tg_new_1d(ctx, TG_F32, 1))),
                          row);
    x = tg_sigmoid(ctx, x);
    tg_tensor *wt = tg_new_3d(ctx, TG_F16, 32, 16, 2);            /* batched weights, broadcast x2 */
    tg_tensor *p = tg_mul_mat(ctx, wt, tg_cont(ctx, x));          /* [16, 24, 4] */
    tg_tensor *tr = tg_transpose(ctx, p);                         /* [24, 16, 4] view */
    tg_tensor *w2 = tg_new_2d(ctx, TG_F32, 16, 10);
    tg_tensor *q = tg_mul_mat(ctx, w2, tg_permute(ctx, tr, 1, 0, 2, 3)); /* non-contiguous b */
    q = tg_cast(ctx, tg_cast(ctx, q, TG_BF16), TG_F32);
    int lo[4] = {1, 0, 2, 0}, hi[4] = {0, 3, 0, 0};
    q = tg_pad(ctx, q, lo, hi);
    q = tg_concat(ctx, q, q, 1);
    tg_tensor *g = tg_glu(ctx, tg_concat(ctx, q, q, 0));
    return tg_add(ctx, tg_mean(ctx, g), tg_sum_rows(ctx, q));
}

static tg_tensor *build_rows_conv(tg_ctx *ctx) {
    tg_tensor *table = tg_new_2d(ctx, TG_BF16, 48, 6), *ids = tg_new_1d(ctx, TG_I32, 5);
    tg_tensor *e = tg_get_rows(ctx, table, ids);                  /* [48, 5] */
    tg_tensor *cache = tg_new_2d(ctx, TG_F32, 48, 9), *pos = tg_new_1d(ctx, TG_I32, 2);
    tg_tensor *src = tg_view_2d(ctx, e, 48, 2, e->nb[1], 0);
    tg_tensor *c2 = tg_set_rows(ctx, cache, tg_cont(ctx, src), pos);
    tg_tensor *k1 = tg_new_2d(ctx, TG_F32, 5, 48);
    tg_tensor *cv = tg_conv_1d_dw(ctx, k1, tg_reshape_3d(ctx, tg_cont(ctx, c2), 48, 9, 1), 1, 2); /* [48, 9, 1] */
    tg_tensor *img = tg_new_4d(ctx, TG_F32, 11, 9, 3, 2), *k2 = tg_new_4d(ctx, TG_F32, 3, 3, 3, 4);
    tg_tensor *k3 = tg_new_4d(ctx, TG_F32, 3, 3, 1, 4);
    tg_tensor *c = tg_conv_2d_dw(ctx, k3, tg_conv_2d(ctx, k2, img, 2, 2, 1, 1), 1, 1, 1, 1);
    tg_tensor *s = tg_sum_rows(ctx, tg_reshape_2d(ctx, tg_cont(ctx, c), 6 * 5, 4 * 2));
    return tg_concat(ctx, tg_reshape_2d(ctx, tg_cont(ctx, cv), 48 * 9, 1),
                     tg_reshape_2d(ctx, tg_cont(ctx, s), 8, 1), 0);
}

/* A conv's output, its bias [1, 1, C, 1] added, a frame mask [1, H, 1, B]
 * multiplied in and relu (the subsampling's chain, one ew_bias_mask_c4
 * pass); with the operands the other way round and no relu; with no mask. */
static tg_tensor *bias_mask_chain(tg_ctx *ctx, int kind) {
    tg_tensor *img = tg_new_4d(ctx, TG_F32, 15, 9, 1, 3), *k = tg_new_4d(ctx, TG_F32, 3, 3, 1, 4);
    tg_tensor *x = tg_conv_2d(ctx, k, img, 2, 2, 1, 1); /* [8, 5, 4, 3] */
    tg_tensor *bias = tg_new_4d(ctx, TG_F32, 1, 1, 4, 1), *mask = tg_new_4d(ctx, TG_F32, 1, 5, 1, 3);
    if (kind == 1) return tg_mul(ctx, mask, tg_add(ctx, bias, x));
    if (kind == 2) return tg_relu(ctx, tg_add(ctx, x, bias));
    return tg_relu(ctx, tg_mul(ctx, tg_add(ctx, x, bias), mask));
}
static tg_tensor *build_bias_mask_relu(tg_ctx *ctx) { return bias_mask_chain(ctx, 0); }
static tg_tensor *build_mask_bias(tg_ctx *ctx) { return bias_mask_chain(ctx, 1); }
static tg_tensor *build_bias_relu(tg_ctx *ctx) { return bias_mask_chain(ctx, 2); }

static tg_tensor *build_argmax(tg_ctx *ctx) { return tg_argmax(ctx, tg_new_2d(ctx, TG_F32, 1000, 7)); }

/* A chain of 200 small nodes: the decoder-step shape of graph. */
static tg_tensor *build_chain(tg_ctx *ctx) {
    tg_tensor *x = in2(ctx, TG_F32, 64, 4), *y = x;
    for (int i = 0; i < 100; i++) y = tg_mul(ctx, tg_add(ctx, y, x), tg_scale(ctx, x, 0.01f));
    return y;
}

/* ------------------------------------------------------------------ tests */

static void test_device_properties_or_clear_absence(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    const tg_cuda_props *p = tg_cuda_backend_props(b);
    CHECK(p && p->name[0] && p->cc_major >= 7 && p->sm_count > 0 && p->total_mem > 0);
    CHECK(strncmp(tg_backend_name(b), "cuda", 4) == 0 && !tg_backend_is_cpu(b));
    printf("  %s: cc %d.%d, %d SMs, bf16 %d, tensor cores %d\n", p->name, p->cc_major, p->cc_minor, p->sm_count,
           p->bf16, p->tc_level);
    tg_backend_free(b);
}

static void test_buffers_set_get_memset_and_host_memory(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *t = tg_new_1d(ctx, TG_I32, 3 << 20); /* larger than the staging buffer */
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, b, &buf));
    int32_t *h = tg_malloc((size_t)(3 << 20) * 4), *r = tg_malloc((size_t)(3 << 20) * 4);
    for (int i = 0; i < (3 << 20); i++) h[i] = i * 7 - 5;
    CHECK_OK(tg_tensor_set(t, h, 0, (size_t)(3 << 20) * 4));
    CHECK_OK(tg_tensor_get(t, r, 0, (size_t)(3 << 20) * 4));
    CHECK(memcmp(h, r, (size_t)(3 << 20) * 4) == 0);
    CHECK_OK(tg_tensor_get(t, r, 4 * 1000, 8));
    CHECK(r[0] == h[1000] && r[1] == h[1001]);
    /* A large copy takes the driver's direct path: round trip of 40 MB. */
    {
        tg_ctx *big_ctx = tg_ctx_new();
        tg_tensor *big = tg_new_1d(big_ctx, TG_I32, 10 << 20);
        tg_buffer *bb = NULL;
        CHECK_OK(tg_ctx_alloc_tensors(big_ctx, b, &bb));
        int32_t *hb = tg_malloc((size_t)(10 << 20) * 4), *rb = tg_malloc((size_t)(10 << 20) * 4);
        for (int i = 0; i < (10 << 20); i++) hb[i] = i ^ 0x5a5a;
        CHECK_OK(tg_tensor_set(big, hb, 0, (size_t)(10 << 20) * 4));
        CHECK_OK(tg_tensor_get(big, rb, 0, (size_t)(10 << 20) * 4));
        CHECK(memcmp(hb, rb, (size_t)(10 << 20) * 4) == 0);
        tg_free(hb);
        tg_free(rb);
        tg_buffer_free(bb);
        tg_ctx_free(big_ctx);
    }
    CHECK_OK(tg_buffer_clear(buf, 0xff));
    CHECK_OK(tg_tensor_get(t, r, 0, 16));
    CHECK(r[0] == -1 && r[3] == -1);
    tg_buffer_free(buf);

    /* Caller memory at an unaligned address, registered (or copied). */
    size_t n = 10000;
    uint8_t *host = tg_malloc(n + 64);
    for (size_t i = 0; i < n + 64; i++) host[i] = (uint8_t)(i * 13);
    tg_buffer *hb = NULL;
    CHECK_OK(tg_backend_buffer_from_host(b, host + 3, n, &hb));
    tg_tensor *u = tg_new_1d(ctx, TG_I32, 100);
    if (hb) {
        CHECK_OK(tg_tensor_place(u, hb, 400));
        CHECK_OK(tg_tensor_get(u, r, 0, 400));
        CHECK(memcmp(r, host + 3 + 400, 400) == 0);
        tg_buffer_free(hb);
    }
    tg_free(host);
    tg_free(h);
    tg_free(r);
    tg_ctx_free(ctx);
    tg_backend_free(b);
}

static void test_out_of_memory_is_an_error_and_the_backend_lives_on(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_buffer *buf = NULL;
    CHECK_ERR(tg_backend_buffer_alloc(b, (size_t)1 << 50, &buf), TG_ERR_NO_MEMORY, "cuda0");
    CHECK(buf == NULL);
    compare_with_cpu(b, build_argmax, 1, 0.0, "argmax after out-of-memory");
    tg_backend_free(b);
}

static void test_event_synchronize_times_out(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    CUfunction spin;
    CHECK_OK(tg_cuda_kernel(c->dev, "probe.cu", "", "spin", &spin));
    tg_cuda_event *e = NULL;
    CHECK_OK(tg_cuda_event_new(c->dev, false, &e));
    tg_args_spin a = {.cycles = 2000000000ll}; /* about a second at 2 GHz */
    void *params[] = {&a};
    CHECK(c->dev->cu->cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, c->stream, params, NULL) == CUDA_SUCCESS);
    CHECK_OK(tg_cuda_event_record(e, c->stream));
    CHECK_ERR(tg_cuda_event_synchronize(e, 20), TG_ERR_TIMEOUT, "20 ms");
    CHECK_OK(tg_cuda_event_synchronize(e, 30000));
    size_t fr = 0, tot = 0;
    CHECK_OK(tg_cuda_mem_info(c->dev, &fr, &tot));
    CHECK(fr > 0 && tot >= fr);
    tg_cuda_event_free(e);
    tg_backend_free(b);
}

static void test_sticky_error_then_recreate_recovers(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    compare_with_cpu(b, build_argmax, 1, 0.0, "argmax before the fault");
    run r;
    CHECK_OK(run_make(b, build_argmax, &r));
    CHECK_OK(fill_leaves(&r, 1));
    tg_cuda_test_fault_next(b, 1);
    CHECK_ERR(tg_backend_graph_compute(b, r.g), TG_ERR_DEVICE, "recreate");
    CHECK_ERR(tg_backend_graph_compute(b, r.g), TG_ERR_DEVICE, "failed earlier");
    CHECK_ERR(tg_backend_synchronize(b), TG_ERR_DEVICE, "failed earlier");
    float x = 0;
    CHECK_ERR(tg_tensor_get(r.out, &x, 0, 4), TG_ERR_DEVICE, "failed earlier");
    run_free(&r);
    tg_backend_free(b);
    b = cuda_or_skip();
    CHECK(b != NULL);
    if (!b) return;
    compare_with_cpu(b, build_argmax, 2, 0.0, "argmax after recreating");
    tg_backend_free(b);
}

static int g_abort_calls;
static bool abort_second(void *user) {
    (void)user;
    return ++g_abort_calls >= 2;
}

static void test_abort_between_segments_leaves_context_usable(void) {
    setenv("CT_CUDA_GRAPHS", "0", 1);
    tg_backend *b = cuda_or_skip();
    unsetenv("CT_CUDA_GRAPHS");
    if (!b) return;
    run r;
    CHECK_OK(run_make(b, build_chain, &r));
    CHECK_OK(fill_leaves(&r, 3));
    g_abort_calls = 0;
    tg_backend_set_abort(b, abort_second, NULL);
    CHECK_ERR(tg_backend_graph_compute(b, r.g), TG_ERR_ABORTED, "aborted");
    tg_backend_set_abort(b, NULL, NULL);
    run_free(&r);
    compare_with_cpu(b, build_chain, 2, 1e-10, "chain after abort");
    tg_backend_free(b);
}

static void test_graphs_capture_replay_and_update(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    compare_with_cpu(b, build_chain, 5, 1e-10, "chain, captured and replayed");
    CHECK(c->n_graph_captures >= 1);
    CHECK(c->n_graph_hits >= 3);
    /* Same topology in new buffers (a buffer held meanwhile keeps the
     * allocator from handing out the old addresses): the executable graph is
     * updated or re-instantiated, never replayed with stale addresses. */
    tg_buffer *hold = NULL;
    CHECK_OK(tg_backend_buffer_alloc(b, 1 << 20, &hold));
    compare_with_cpu(b, build_chain, 3, 1e-10, "chain at new addresses");
    tg_buffer_free(hold);
    CHECK(c->n_graph_updates + c->n_graph_captures >= 2);
    compare_with_cpu(b, build_branches, 3, 1e-10, "independent branches");
    printf("  graphs: %d captures, %d updates, %d replays, %d direct\n", c->n_graph_captures,
           c->n_graph_updates, c->n_graph_hits, c->n_direct);
    tg_backend_free(b);
}

static void test_fused_and_mixed_graphs_match_cpu(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    compare_with_cpu(b, build_ffn, 3, 5e-4, "ffn block (bf16, fused bias+relu, bias+residual)");
    CHECK(c->n_fused[1] >= 1);
    CHECK(c->n_fused[TG_FUSED_MM_BIAS_RESIDUAL] >= 1); /* the second product's residual (cuBLASLt's C) */
    CHECK(c->n_fused[6] >= 1); /* the layer norm stored BF16 for the product */
    int emitted = c->n_fused[6];
    compare_with_cpu(b, build_ffn_silu, 3, 5e-4, "ffn block (silu stores bf16)");
    CHECK(c->n_fused[6] > emitted);
    int scaled = c->n_fused[TG_FUSED_MM_SCALE];
    compare_with_cpu(b, build_half_ffn, 3, 5e-4, "half ffn step (scale as alpha, bias, residual)");
    CHECK(c->n_fused[TG_FUSED_MM_SCALE] > scaled);
    scaled = c->n_fused[TG_FUSED_MM_SCALE];
    int vecs = c->n_matvec;
    compare_with_cpu(b, build_half_ffn_vec, 3, 5e-4, "half ffn step on 2 columns (the matvec kernel's alpha)");
    CHECK(c->n_fused[TG_FUSED_MM_SCALE] > scaled);
    CHECK(c->n_matvec > vecs);
    /* 5e-4: the product's bf16 operands; 1e-5: the same f32 arithmetic
     * as the four kernels, only expf's and the FMA contraction's last bits */
    int convs = c->n_fused[TG_FUSED_CONV_GLU], emits = c->n_fused[TG_FUSED_EMIT];
    compare_with_cpu(b, build_conv_module, 2, 5e-4, "conv module: glu, dw conv, bias, silu (bf16 for the product)");
    CHECK(c->n_fused[TG_FUSED_CONV_GLU] > convs);
    CHECK(c->n_fused[TG_FUSED_EMIT] > emits); /* the fused kernel stored bf16 for the product */
    convs = c->n_fused[TG_FUSED_CONV_GLU];
    compare_with_cpu(b, build_conv_module_f32, 2, 1e-5, "conv module: glu, dw conv, bias, silu (f32 result)");
    CHECK(c->n_fused[TG_FUSED_CONV_GLU] > convs);
    compare_with_cpu(b, build_attn_enc, 2, 5e-4, "attention D=160 with bias");
    compare_with_cpu(b, build_attn_rel, 2, 5e-4, "attention on strided heads, rel-shifted mask view");
    compare_with_cpu(b, build_attn_rel_even, 2, 5e-4, "the same, mask rows 8-byte aligned");
    compare_with_cpu(b, build_attn_dec, 2, 5e-4, "attention D=128 f16 kv, f32 precision");
    compare_with_cpu(b, build_attn_dec_mma, 2, 5e-4, "attention D=128 f16 kv, tensor cores");
    compare_with_cpu(b, build_attn_masked_rows, 2, 5e-4, "attention with fully masked rows");
    int mv = c->n_matvec, ad = c->n_attn_decode;
    int res = c->n_fused[TG_FUSED_MM_BIAS_RESIDUAL];
    int normed = c->n_fused[TG_FUSED_NORM_MATVEC];
    compare_with_cpu(b, build_ffn_vec, 3, 5e-4, "ffn on 2 columns (matvec.cu: norm, bias+relu, bias+residual)");
    CHECK(c->n_matvec >= mv + 2); /* both products, encoded at least once */
    CHECK(c->n_fused[TG_FUSED_NORM_MATVEC] > normed); /* the norm inside the first */
    CHECK(c->n_fused[TG_FUSED_MM_BIAS_RESIDUAL] > res); /* matvec's residual */
    if (c->dev->props.tc_level >= 2) {
        int mma = c->n_matvec_mma;
        normed = c->n_fused[TG_FUSED_NORM_MATVEC];
        compare_with_cpu(b, build_ffn_mma8, 3, 5e-4, "ffn on 8 columns (mul_mat_vec_mma, norm, relu, residual)");
        compare_with_cpu(b, build_ffn_mma13, 3, 5e-4, "ffn on 13 columns (mul_mat_vec_mma)");
        CHECK(c->n_matvec_mma >= mma + 4); /* both products of both, encoded at least once */
        CHECK(c->n_fused[TG_FUSED_NORM_MATVEC] > normed);
    }
    compare_with_cpu(b, build_attn_step, 2, 5e-4, "attention step, f32 cache (attn_decode)");
    CHECK(c->n_attn_decode > ad);
    ad = c->n_attn_decode;
    compare_with_cpu(b, build_attn_step_bf16, 2, 5e-4, "attention step, bf16 kv, D=256");
    CHECK(c->n_attn_decode > ad);
    ad = c->n_attn_decode;
    compare_with_cpu(b, build_attn_step_bf16_128, 2, 5e-4, "attention step, bf16 kv, D=128");
    CHECK(c->n_attn_decode > ad);
    compare_with_cpu(b, build_mixed, 2, 5e-4, "views, broadcasting, casts");
    compare_with_cpu(b, build_rows_conv, 2, 1e-6, "rows and convolutions");
    /* the same f32 arithmetic in the same order as the three kernels */
    int bm = c->n_fused[TG_FUSED_BIAS_MASK];
    compare_with_cpu(b, build_bias_mask_relu, 2, 1e-6, "conv, bias, mask, relu (one pass)");
    CHECK(c->n_fused[TG_FUSED_BIAS_MASK] > bm);
    bm = c->n_fused[TG_FUSED_BIAS_MASK];
    compare_with_cpu(b, build_mask_bias, 2, 1e-6, "conv, bias, mask; operands swapped (one pass)");
    CHECK(c->n_fused[TG_FUSED_BIAS_MASK] > bm);
    bm = c->n_fused[TG_FUSED_BIAS_MASK];
    compare_with_cpu(b, build_bias_relu, 2, 1e-6, "conv, bias, relu (one pass)");
    CHECK(c->n_fused[TG_FUSED_BIAS_MASK] > bm);
    compare_with_cpu(b, build_argmax, 2, 0.0, "argmax");
    tg_backend_free(b);
}

/* With mul_mat_vec_mma off, the decoder step's products of 1-2 columns run
 * on mul_mat_vec (F32 x, the layer norm inside); at F32 precision they do
 * so anyway. */
static void test_matvec_f32_kernel_matches_cpu(void) {
    setenv("CT_CUDA_MATVEC_MMA", "0", 1);
    tg_backend *b = cuda_or_skip();
    unsetenv("CT_CUDA_MATVEC_MMA");
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    int normed = c->n_fused[TG_FUSED_NORM_MATVEC];
    compare_with_cpu(b, build_ffn_vec, 3, 5e-4, "ffn on 2 columns (mul_mat_vec, norm, bias+relu, bias+residual)");
    compare_with_cpu(b, build_half_ffn_vec, 3, 5e-4, "half ffn step on 2 columns (mul_mat_vec's alpha)");
    CHECK(c->n_matvec >= 3 && c->n_matvec_mma == 0);
    CHECK(c->n_fused[TG_FUSED_NORM_MATVEC] > normed);
    tg_backend_free(b);
}

/* mul_mat_vec_mma over more than 16 columns, as tiles (each block its
 * tile's columns of x, out and the residual, the norm of its own columns):
 * not the default until measured on a GPU, so switched on here. */
static void test_matvec_mma_tiles_match_cpu(void) {
    setenv("CT_CUDA_MATVEC_MMA_MAX", "64", 1);
    tg_backend *b = cuda_or_skip();
    unsetenv("CT_CUDA_MATVEC_MMA_MAX");
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    if (c->dev->props.tc_level >= 2) {
        int mma = c->n_matvec_mma, normed = c->n_fused[TG_FUSED_NORM_MATVEC];
        int res = c->n_fused[TG_FUSED_MM_BIAS_RESIDUAL];
        compare_with_cpu(b, build_ffn_mma40, 3, 5e-4, "ffn on 40 columns (mul_mat_vec_mma, 3 tiles)");
        compare_with_cpu(b, build_ffn_mma64, 3, 5e-4, "ffn on 64 columns (mul_mat_vec_mma, 4 tiles)");
        CHECK(c->n_matvec_mma >= mma + 4); /* both products of both */
        CHECK(c->n_fused[TG_FUSED_NORM_MATVEC] > normed);
        CHECK(c->n_fused[TG_FUSED_MM_BIAS_RESIDUAL] > res);
    }
    tg_backend_free(b);
}

/* A NaN in one query reaches that row's output as NaN (as on the CPU) and
 * no other row: attn_decode and the combine keep NaN through their maxima
 * (fmaxf would drop it and give a row of zeros, hiding where it began). */
static int64_t g_nan_tk = 150;
static tg_tensor *build_attn_step_nomask(tg_ctx *ctx) {
    int64_t D = 128, Tk = g_nan_tk, H = 4, B = 3;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, B), *k = tg_new_4d(ctx, TG_F32, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, Tk, H, B);
    return tg_attention(ctx, q, k, v, NULL, 0.088f);
}

static void attention_step_keeps_nan(int64_t tk) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    int ad = c->n_attn_decode;
    g_nan_tk = tk;
    run r;
    CHECK_OK(run_make(b, build_attn_step_nomask, &r));
    if (r.g && r.buf) {
        CHECK_OK(fill_leaves(&r, 7));
        const tg_tensor *q = r.out->src[0];
        float nan = NAN;
        /* q [128, 1, 4, 3]: element 5 of head 1, batch row 2 */
        CHECK_OK(tg_tensor_set((tg_tensor *)q, &nan, (size_t)((2 * 4 + 1) * 128 + 5) * 4, 4));
        CHECK_OK(tg_backend_graph_compute(b, r.g));
        CHECK(c->n_attn_decode > ad);
        double *o = get_out(r.out); /* [128, 4, 1, 3] */
        CHECK(o != NULL);
        int nan_rows = 0, bad = 0;
        for (int row = 0; o && row < 4 * 3; row++) {
            int n_nan = 0;
            for (int d = 0; d < 128; d++) n_nan += isnan(o[row * 128 + d]);
            if (row == 2 * 4 + 1) nan_rows += n_nan == 128;
            else bad += n_nan;
        }
        CHECK_MSG(nan_rows == 1, "Tk %d: the row with a NaN query is not all NaN", (int)tk);
        CHECK_MSG(bad == 0, "Tk %d: %d NaN outside the row with a NaN query", (int)tk, bad);
        tg_free(o);
    }
    run_free(&r);
    tg_backend_free(b);
}

/* 150 keys: several chunks a row and the combine; 20: one chunk a row,
 * whose block writes the output itself (attn_decode's direct path). */
static void test_attention_step_keeps_nan(void) {
    attention_step_keeps_nan(150);
    attention_step_keeps_nan(20);
}

/* Under the scheduler (split graphs) the fusions still apply when nothing
 * outside reads the fused-away intermediates, and stand down when something
 * does: here a tensor outside the graph reads the product, whose value must
 * then be real after the compute. */
static void test_fusion_under_the_scheduler_respects_outside_readers(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    tg_backend *cpu = NULL;
    CHECK_OK(tg_backend_cpu_new(2, &cpu));
    tg_backend *bes[2] = {b, cpu};
    for (int outside = 0; outside < 2; outside++) {
        tg_ctx *ctx[2] = {tg_ctx_new(), tg_ctx_new()};
        tg_tensor *mm[2], *out[2];
        tg_graph *g[2];
        tg_sched *sc[2] = {NULL, NULL};
        tg_buffer *wb[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            tg_tensor *w = tg_new_2d(ctx[k], TG_BF16, 128, 96), *x = tg_new_2d(ctx[k], TG_F32, 128, 21);
            tg_tensor *bias = tg_new_1d(ctx[k], TG_F32, 96);
            w->flags |= TG_FLAG_WEIGHT;
            bias->flags |= TG_FLAG_WEIGHT;
            x->flags |= TG_FLAG_INPUT;
            mm[k] = tg_mul_mat(ctx[k], w, x);
            out[k] = tg_relu(ctx[k], tg_add(ctx[k], mm[k], bias));
            if (outside) tg_scale(ctx[k], mm[k], 2.0f); /* a reader that is not in the graph */
            g[k] = tg_graph_new(ctx[k]);
            CHECK_OK(tg_graph_build(g[k], out[k]));
            /* k = 0: CUDA with the CPU as fallback; k = 1: the CPU reference. */
            tg_backend *list[2] = {bes[k], cpu};
            CHECK_OK(tg_sched_new(k == 0 ? list : &list[1], k == 0 ? 2 : 1, &sc[k]));
            /* The weights live in the first backend's buffer, so the product
             * and the bias add are placed there. */
            tg_tensor *ws[2] = {w, bias};
            size_t off = 0, sizes[2] = {tg_nbytes(w), tg_nbytes(bias)};
            CHECK_OK(tg_backend_buffer_alloc(bes[k], sizes[0] + sizes[1] + 512, &wb[k]));
            for (int q = 0; q < 2 && wb[k]; q++) {
                CHECK_OK(tg_tensor_place(ws[q], wb[k], off));
                off += (sizes[q] + 255) & ~(size_t)255;
            }
            CHECK_OK(tg_sched_alloc(sc[k], g[k]));
            run r = {ctx[k], g[k], out[k], NULL};
            CHECK_OK(fill_leaves(&r, 11));
        }
        int fused = c->n_fused[1];
        CHECK_OK(tg_sched_compute(sc[0], g[0]));
        CHECK_OK(tg_sched_compute(sc[1], g[1]));
        CHECK_MSG((c->n_fused[1] > fused) == !outside, "outside reader %d: fused %d -> %d", outside, fused,
                  c->n_fused[1]);
        const tg_tensor *cmp[2] = {out[0], mm[0]}, *ref[2] = {out[1], mm[1]};
        for (int q = 0; q < (outside ? 2 : 1); q++) {
            double *x0 = get_out(cmp[q]), *x1 = get_out(ref[q]);
            CHECK(x0 && x1 && nmse(x0, x1, tg_nelements(ref[q])) < 5e-4);
            tg_free(x0);
            tg_free(x1);
        }
        for (int k = 0; k < 2; k++) {
            tg_sched_free(sc[k]);
            tg_buffer_free(wb[k]);
            tg_ctx_free(ctx[k]);
        }
    }
    tg_backend_free(cpu);
    tg_backend_free(b);
}

static void test_graph_dump_and_profile(void) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/tg-cuda-dump-%ld.txt", (long)getpid());
    setenv("CT_CUDA_DUMP_GRAPH", path, 1);
    setenv("CT_CUDA_PROFILE", "1", 1);
    tg_backend *b = cuda_or_skip();
    unsetenv("CT_CUDA_DUMP_GRAPH");
    unsetenv("CT_CUDA_PROFILE");
    if (!b) return;
    compare_with_cpu(b, build_ffn, 2, 5e-4, "ffn block, dumped and profiled");
    char *text = NULL;
    size_t size = 0;
    CHECK_OK(tg_file_read(path, &text, &size));
    /* Nodes with their kernels and launch shapes, then per-kernel times. */
    CHECK(text && strstr(text, "layer_norm") && strstr(text, "cublasLtMatmul") && strstr(text, "grid (") &&
          strstr(text, "time "));
    tg_free(text);
    unlink(path);
    tg_backend_free(b);
}

/* Child mode: one backend start and compute in a fresh process. */
static int child_main(void) {
    tg_backend *b = NULL;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) {
        fprintf(stderr, "child: %s\n", tg_status_message(st));
        return 2;
    }
    check_failures_in_test = 0;
    compare_with_cpu(b, build_ffn, 1, 5e-4, "ffn block in a child");
    int compiled, hits;
    tg_cuda_test_counts(b, &compiled, &hits);
    printf("child: compiled %d, cache hits %d\n", compiled, hits);
    tg_backend_free(b);
    return check_failures_in_test ? 1 : 0;
}

/* Child mode 2: no NVRTC and no cache, so only kernels nvcc precompiled
 * into the build can run; without them the error must say what is missing. */
static int child_no_nvrtc(void) {
    tg_backend *b = NULL;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) {
        fprintf(stderr, "child: %s\n", tg_status_message(st));
        return 2;
    }
    run r;
    int rc = 0;
    st = run_make(b, build_ffn, &r);
    if (!st) st = fill_leaves(&r, 5);
    if (!st) st = tg_backend_graph_compute(b, r.g);
    printf("child without NVRTC: %d precompiled images, %d loaded: %s\n", tg_cuda_n_images,
           tg_cuda_test_precompiled(b), st ? tg_status_message(st) : "computed");
    if (tg_cuda_n_images > 0) rc = st ? 1 : 0;
    else rc = st && tg_status_code(st) == TG_ERR_UNSUPPORTED && strstr(tg_status_message(st), "NVRTC") ? 0 : 1;
    tg_status_free(st);
    run_free(&r);
    tg_backend_free(b);
    return rc;
}

static pid_t spawn_child(const char *dir) {
    setenv("CT_CUDA_CACHE_DIR", dir, 1);
    setenv("CT_TEST_CUDA_CHILD", "1", 1);
    char *argv[] = {(char *)"/proc/self/exe", NULL};
    pid_t pid = -1;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0) pid = -1;
    unsetenv("CT_TEST_CUDA_CHILD");
    unsetenv("CT_CUDA_CACHE_DIR");
    return pid;
}

static int wait_child(pid_t pid) {
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_kernel_cache_cold_warm_damaged_and_concurrent(void) {
    tg_backend *probe = cuda_or_skip();
    if (!probe) return;
    tg_backend_free(probe);
    char dir[128], cmd[256];
    snprintf(dir, sizeof dir, "/tmp/tg-cuda-cache-test-%ld", (long)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    setenv("CT_CUDA_CACHE_DIR", dir, 1);
    /* the disk cache holds what NVRTC compiles: no precompiled images here */
    setenv("CT_CUDA_PRECOMPILED", "0", 1);
    int cold = 0, warm = 0, hits = 0;
    tg_backend *b = cuda_or_skip();
    if (b) {
        compare_with_cpu(b, build_ffn, 1, 5e-4, "ffn block, cold cache");
        tg_cuda_test_counts(b, &cold, &hits);
        tg_backend_free(b);
    }
    b = cuda_or_skip();
    if (b) {
        compare_with_cpu(b, build_ffn, 1, 5e-4, "ffn block, warm cache");
        tg_cuda_test_counts(b, &warm, &hits);
        tg_backend_free(b);
    }
    printf("  cold start compiled %d kernel files; warm start compiled %d, read %d from the cache\n", cold, warm,
           hits);
    CHECK(cold > 0 && warm == 0 && hits >= cold);
    /* Damage every entry: each is recompiled with a warning, none is fatal. */
    snprintf(cmd, sizeof cmd, "for f in '%s'/*.cubin; do printf 'garbage' | dd of=\"$f\" bs=1 seek=200 conv=notrunc 2>/dev/null; done", dir);
    CHECK(system(cmd) == 0);
    b = cuda_or_skip();
    if (b) {
        compare_with_cpu(b, build_ffn, 1, 5e-4, "ffn block, damaged cache");
        int again;
        tg_cuda_test_counts(b, &again, &hits);
        CHECK_MSG(again == cold && hits == 0, "damaged cache: compiled %d (cold %d), hits %d", again, cold, hits);
        tg_backend_free(b);
    }
    unsetenv("CT_CUDA_CACHE_DIR");
    /* Two processes starting on an empty cache at once. */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    pid_t p1 = spawn_child(dir), p2 = spawn_child(dir);
    CHECK(wait_child(p1) == 0);
    CHECK(wait_child(p2) == 0);
    pid_t p3 = spawn_child(dir);
    CHECK(wait_child(p3) == 0);
    CHECK(system(cmd) == 0);
    unsetenv("CT_CUDA_PRECOMPILED");
}

/* A cold start (empty disk cache) on a GPU the build precompiled for loads
 * the nvcc images and compiles none of the block's kernel files. */
static void test_cold_start_uses_the_precompiled_kernels(void) {
    tg_backend *probe = cuda_or_skip();
    if (!probe) return;
    const tg_cuda_props *pp = tg_cuda_backend_props(probe);
    int cc = pp->cc_major * 10 + pp->cc_minor;
    tg_backend_free(probe);
    if (tg_cuda_n_images == 0 || (cc != 80 && cc != 86 && cc != 89 && cc != 90)) {
        printf("  skipped: %d precompiled images, sm_%d\n", tg_cuda_n_images, cc);
        return;
    }
    char dir[128], cmd[256];
    snprintf(dir, sizeof dir, "/tmp/tg-cuda-cold-test-%ld", (long)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    setenv("CT_CUDA_CACHE_DIR", dir, 1);
    tg_backend *b = cuda_or_skip();
    if (b) {
        compare_with_cpu(b, build_ffn, 1, 5e-4, "ffn block, cold cache, precompiled kernels");
        int compiled = -1, hits = -1;
        tg_cuda_test_counts(b, &compiled, &hits);
        printf("  cold start: %d precompiled images loaded, %d kernel files compiled\n",
               tg_cuda_test_precompiled(b), compiled);
        CHECK_MSG(compiled == 0 && tg_cuda_test_precompiled(b) > 0, "compiled %d, precompiled %d", compiled,
                  tg_cuda_test_precompiled(b));
        tg_backend_free(b);
    }
    unsetenv("CT_CUDA_CACHE_DIR");
    CHECK(system(cmd) == 0);
}

/* Child mode 3: a kernel fault. The driver refuses all further work in the
 * process; the backend must say so, fail fast after, and not crash. */
static int child_fault(void) {
    tg_backend *b = NULL;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) return 2;
    run r;
    int bad = 0;
    if ((st = run_make(b, build_argmax, &r)) || (st = fill_leaves(&r, 1))) bad++;
    tg_status_free(st);
    tg_cuda_test_fault_next(b, 2);
    st = tg_backend_graph_compute(b, r.g);
    printf("child fault: %s\n", tg_status_message(st));
    if (tg_status_code(st) != TG_ERR_DEVICE || !strstr(tg_status_message(st), "restart")) bad++;
    tg_status_free(st);
    st = tg_backend_graph_compute(b, r.g);
    if (!st || !strstr(tg_status_message(st), "failed earlier")) bad++;
    tg_status_free(st);
    run_free(&r);
    tg_backend_free(b);
    b = NULL;
    st = tg_backend_cuda_new(0, &b);
    printf("child fault: recreating: %s\n", st ? tg_status_message(st) : "ok");
    tg_status_free(st);
    tg_backend_free(b);
    return bad;
}

static void test_kernel_fault_is_reported_and_fails_fast(void) {
    tg_backend *probe = cuda_or_skip();
    if (!probe) return;
    tg_backend_free(probe);
    setenv("CT_TEST_CUDA_CHILD", "3", 1);
    char *argv[] = {(char *)"/proc/self/exe", NULL};
    pid_t pid = -1;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0) pid = -1;
    unsetenv("CT_TEST_CUDA_CHILD");
    CHECK(wait_child(pid) == 0);
}

static void test_precompiled_kernels_without_nvrtc(void) {
    tg_backend *probe = cuda_or_skip();
    if (!probe) return;
    tg_backend_free(probe);
    setenv("CT_TEST_CUDA_CHILD", "2", 1);
    setenv("CT_CUDA_NVRTC", "/nonexistent/libnvrtc.so", 1);
    setenv("CT_CUDA_CACHE", "0", 1);
    char *argv[] = {(char *)"/proc/self/exe", NULL};
    pid_t pid = -1;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0) pid = -1;
    unsetenv("CT_TEST_CUDA_CHILD");
    unsetenv("CT_CUDA_NVRTC");
    unsetenv("CT_CUDA_CACHE");
    CHECK(wait_child(pid) == 0);
}

static void test_copies_between_two_gpus(void) {
    tg_backend *b0 = cuda_or_skip();
    if (!b0) return;
    tg_backend *b1 = NULL;
    tg_status st = tg_backend_cuda_new(1, &b1);
    if (st) {
        printf("skipped: one GPU only (%s)\n", tg_status_message(st));
        tg_status_free(st);
        tg_backend_free(b0);
        return;
    }
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_1d(ctx, TG_F32, 1 << 20), *c = tg_new_1d(ctx, TG_F32, 1 << 20);
    tg_buffer *ba = NULL, *bc = NULL;
    CHECK_OK(tg_backend_buffer_alloc(b0, tg_nbytes(a), &ba));
    CHECK_OK(tg_backend_buffer_alloc(b1, tg_nbytes(c), &bc));
    CHECK_OK(tg_tensor_place(a, ba, 0));
    CHECK_OK(tg_tensor_place(c, bc, 0));
    float *h = tg_malloc(tg_nbytes(a)), *r = tg_malloc(tg_nbytes(a));
    for (int i = 0; i < (1 << 20); i++) h[i] = (float)i * 0.5f;
    CHECK_OK(tg_tensor_set(a, h, 0, tg_nbytes(a)));
    CHECK_OK(tg_tensor_copy(a, c));
    CHECK_OK(tg_tensor_get(c, r, 0, tg_nbytes(c)));
    CHECK(memcmp(h, r, tg_nbytes(a)) == 0);
    printf("  copied 4 MiB from %s to %s\n", tg_backend_name(b0), tg_backend_name(b1));
    tg_free(h);
    tg_free(r);
    tg_buffer_free(ba);
    tg_buffer_free(bc);
    tg_ctx_free(ctx);
    tg_backend_free(b1);
    tg_backend_free(b0);
}

int main(int argc, char **argv) {
    const char *child = getenv("CT_TEST_CUDA_CHILD");
    if (child) return strcmp(child, "2") == 0 ? child_no_nvrtc() : strcmp(child, "3") == 0 ? child_fault() : child_main();
    static const test_case tests[] = {
        T(test_device_properties_or_clear_absence),
        T(test_buffers_set_get_memset_and_host_memory),
        T(test_out_of_memory_is_an_error_and_the_backend_lives_on),
        T(test_event_synchronize_times_out),
        T(test_graphs_capture_replay_and_update),
        T(test_fused_and_mixed_graphs_match_cpu),
        T(test_matvec_f32_kernel_matches_cpu),
        T(test_matvec_mma_tiles_match_cpu),
        T(test_attention_step_keeps_nan),
        T(test_abort_between_segments_leaves_context_usable),
        T(test_fusion_under_the_scheduler_respects_outside_readers),
        T(test_graph_dump_and_profile),
        T(test_kernel_cache_cold_warm_damaged_and_concurrent), T(test_cold_start_uses_the_precompiled_kernels),
        T(test_precompiled_kernels_without_nvrtc),
        T(test_kernel_fault_is_reported_and_fails_fast),
        T(test_copies_between_two_gpus),
        T(test_sticky_error_then_recreate_recovers),
    };
    return check_run(tests, (int)(sizeof tests / sizeof tests[0]), argc, argv);
}
#else
static void test_skipped_without_cuda(void) {
    printf("skipped: built without the CUDA backend\n");
    tg_backend *b = NULL;
    CHECK_ERR(tg_backend_cuda_new(0, &b), TG_ERR_UNSUPPORTED, "CUDA");
}
TEST_MAIN(T(test_skipped_without_cuda))
#endif
