/*
 * test_kernels.c: the CUDA backend's kernels and fusions against the CPU
 * backend on small graphs shaped like the model's: the feed-forwards with
 * their fused bias, relu, scale, residual and emitted BF16; the decoder
 * step's products on matvec.cu with the layer norm inside, as the model's
 * graphs reach them; the conv module's and the subsampling's fused chains;
 * the decoder step's embedding lookups, sum and norm as one launch, and
 * its K/V cache write inside the q/k/v product's launch, its tail
 * (argmax, sums, feed, history writes) as one launch; an encoder layer's
 * last norm and the next layer's first as one launch;
 * attention at the encoder's shapes (rel-pos views, masked rows) and the
 * decoder's inside the graphs above; views, broadcasting, casts, rows and
 * convolutions; argmax.
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU.
 *
 * Not here: matvec.cu's kernels and their switches one by one
 * (test_matvec.c), the decoder step's attention kernels on their own
 * (test_attn_step.c), the encoder's attention kernel on each of its paths
 * (test_attn_mma.c), the backend's own behaviour (test_backend.c), per-op
 * conformance over every backend (tests/ops).
 */
#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

/* -------------------------------------------------------------- builders */

/* A step at batch 1: one column, normed by the whole block of the first
 * product (TG_MV_NORM_BLOCK), at K = 1024 (a float4 for each of its 256
 * threads, as the model's) and 512 (128 threads, 4 warps: each thread one). */
static tg_tensor *build_ffn_mma1(tg_ctx *ctx) { return ffn_block_d(ctx, 1, 1024, 512); }
static tg_tensor *build_ffn_mma1_512(tg_ctx *ctx) { return ffn_block_d(ctx, 1, 512, 1024); }

/* The rel-pos table's projection as encoder.c builds it: r = W_pos P (BF16
 * weights, no bias) scaled by 1/sqrt(160), then read by a product of two
 * F32 activations (the BD term): the scale as cuBLASLt's alpha alone. */
static tg_tensor *build_pos_projection(tg_ctx *ctx) {
    tg_tensor *r = tg_scale(ctx, tg_mul_mat(ctx, in2(ctx, TG_BF16, 320, 320), in2(ctx, TG_F32, 320, 139)), 0.0790569f);
    return tg_mul_mat(ctx, r, in2(ctx, TG_F32, 320, 70));
}

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

/* The conv module from its first pointwise conv on, as the encoder's: x
 * [C, T, B] (111 columns, cuBLASLt) times W1 [C, 2C] plus its bias, read
 * only by the fused glu .. silu kernel, then W2; weights and biases marked
 * as the model's are (the kernel adds W1's bias only where it is one). */
static tg_tensor *build_conv_module_pw(tg_ctx *ctx) {
    int64_t C = 64, T = 37, B = 3;
    tg_tensor *x = tg_new_3d(ctx, TG_F32, C, T, B);
    tg_tensor *w1 = in2(ctx, TG_BF16, C, 2 * C), *b1 = in2(ctx, TG_F32, 2 * C, 1);
    tg_tensor *kr = in2(ctx, TG_F32, 9, C), *bias = tg_new_1d(ctx, TG_F32, C), *w2 = in2(ctx, TG_BF16, C, C);
    tg_tensor *marked[5] = {w1, b1, kr, bias, w2};
    for (int i = 0; i < 5; i++) marked[i]->flags |= TG_FLAG_WEIGHT;
    tg_tensor *a = tg_add(ctx, tg_mul_mat(ctx, w1, x), b1);
    tg_tensor *h = tg_silu(ctx, tg_add(ctx, tg_conv_1d_dw(ctx, kr, tg_glu(ctx, a), 1, 4), bias));
    return tg_mul_mat(ctx, w2, h);
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
/* The subsampling's front (encoder.c, spec 2.1): conv0 (one input channel,
 * 3x3, stride 2, padding 1), bias, frame mask, relu, the depthwise 3x3
 * (stride 2, padding 1), bias, frame mask; 40 channels (two blocks of
 * sub_conv_dw's 32, the second holding 8), odd sizes so that edge taps
 * fall outside. kind 1: no masks; kind 2: the operands the other way round. */
static tg_tensor *sub_front_chain(tg_ctx *ctx, int kind) {
    const int64_t C = 40, B = 3;
    tg_tensor *img = tg_new_4d(ctx, TG_F32, 19, 13, 1, B), *k0 = tg_new_4d(ctx, TG_F32, 3, 3, 1, C);
    tg_tensor *k1 = tg_new_4d(ctx, TG_F32, 3, 3, 1, C);
    tg_tensor *b0 = tg_new_4d(ctx, TG_F32, 1, 1, C, 1), *b1 = tg_new_4d(ctx, TG_F32, 1, 1, C, 1);
    tg_tensor *m1 = tg_new_4d(ctx, TG_F32, 1, 7, 1, B), *m2 = tg_new_4d(ctx, TG_F32, 1, 4, 1, B);
    tg_tensor *x = tg_conv_2d(ctx, k0, img, 2, 2, 1, 1); /* [10, 7, C, B] */
    x = kind == 2 ? tg_add(ctx, b0, x) : tg_add(ctx, x, b0);
    if (kind != 1) x = kind == 2 ? tg_mul(ctx, m1, x) : tg_mul(ctx, x, m1);
    x = tg_conv_2d_dw(ctx, k1, tg_relu(ctx, x), 2, 2, 1, 1); /* [5, 4, C, B] */
    x = kind == 2 ? tg_add(ctx, b1, x) : tg_add(ctx, x, b1);
    return kind == 1 ? x : kind == 2 ? tg_mul(ctx, m2, x) : tg_mul(ctx, x, m2);
}
static tg_tensor *build_sub_front(tg_ctx *ctx) { return sub_front_chain(ctx, 0); }
static tg_tensor *build_sub_front_nomask(tg_ctx *ctx) { return sub_front_chain(ctx, 1); }
static tg_tensor *build_sub_front_swapped(tg_ctx *ctx) { return sub_front_chain(ctx, 2); }

static tg_tensor *build_bias_mask_relu(tg_ctx *ctx) { return bias_mask_chain(ctx, 0); }
static tg_tensor *build_mask_bias(tg_ctx *ctx) { return bias_mask_chain(ctx, 1); }
static tg_tensor *build_bias_relu(tg_ctx *ctx) { return bias_mask_chain(ctx, 2); }

/* The decoder step's head: token and position rows looked up from BF16
 * tables by ids on the device, summed, reshaped to [d, n_q, B] and
 * layer-normed: embed_norm, one launch for the four nodes. */
static tg_tensor *build_embed_norm(tg_ctx *ctx) {
    int64_t d = 96, B = 5;
    tg_tensor *tok = in2(ctx, TG_BF16, d, 40), *pos = in2(ctx, TG_BF16, d, 12);
    tg_tensor *it = tg_new_1d(ctx, TG_I32, B), *ip = tg_new_1d(ctx, TG_I32, B);
    tg_tensor *x = tg_add(ctx, tg_get_rows(ctx, tok, it), tg_get_rows(ctx, pos, ip));
    return tg_layer_norm(ctx, tg_reshape_3d(ctx, x, d, 1, B), tg_new_1d(ctx, TG_F32, d), tg_new_1d(ctx, TG_F32, d),
                         1e-5f);
}

/* A feed-forward with silu as the encoder's: x + W2 silu(W1 ln(x) + b1) / 2
 * + b2 on 29 columns (cuBLASLt), W1's group read only by the silu; the
 * weights and biases marked as weights, as the model's are (the silu adds
 * b1 only where it is one). */
static tg_tensor *build_ffn_silu_bias(tg_ctx *ctx) {
    tg_tensor *x = in2(ctx, TG_F32, 256, 37);
    tg_tensor *w1 = in2(ctx, TG_BF16, 256, 512), *b1 = in2(ctx, TG_F32, 512, 1);
    tg_tensor *w2 = in2(ctx, TG_BF16, 512, 256), *b2 = in2(ctx, TG_F32, 256, 1);
    tg_tensor *marked[4] = {w1, b1, w2, b2};
    for (int i = 0; i < 4; i++) marked[i]->flags |= TG_FLAG_WEIGHT;
    tg_tensor *h = tg_layer_norm(ctx, x, NULL, NULL, 1e-5f);
    h = tg_silu(ctx, tg_add(ctx, tg_mul_mat(ctx, w1, h), b1));
    return tg_add(ctx, x, tg_add(ctx, tg_scale(ctx, tg_mul_mat(ctx, w2, h), 0.5f), b2));
}

static tg_tensor *build_attn_proj_enc(tg_ctx *ctx) {
    tg_tensor *a = build_attn_rel150(ctx); /* [160, 2, 150, 1] */
    if (!a) return NULL;
    a = tg_reshape_2d(ctx, a, 320, 150);
    return tg_add(ctx, tg_mul_mat(ctx, in2(ctx, TG_BF16, 320, 256), a), in2(ctx, TG_F32, 256, 1));
}

/* ------------------------------------------------------------------ tests */

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
    int biased = c->n_fused[TG_FUSED_MM_BIAS];
    compare_with_cpu(b, build_pos_projection, 3, 5e-4, "rel-pos projection (scale as alpha, no bias)");
    CHECK(c->n_fused[TG_FUSED_MM_SCALE] > scaled && c->n_fused[TG_FUSED_MM_BIAS] == biased);
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
        CHECK(c->n_matvec_norm_block == 0); /* none of them one column */
        compare_with_cpu(b, build_ffn_mma1, 3, 5e-4, "ffn on 1 column, K = 1024 (the block's norm)");
        int blocks = c->n_matvec_norm_block;
        CHECK(blocks >= 1);
        compare_with_cpu(b, build_ffn_mma1_512, 3, 5e-4, "ffn on 1 column, K = 512 (the block's norm)");
        CHECK(c->n_matvec_norm_block > blocks);
        /* the k/v cache write inside the q/k/v product's launch (the cache
         * BF16, as the decoder's), the attention reading q from the
         * product and k, v from the cache */
        int kv = c->n_fused[TG_FUSED_KV_ROWS];
        compare_with_cpu(b, kv_step_graph, 3, 5e-4, "step: norm, q/k/v, cache write, attention");
        CHECK(c->n_fused[TG_FUSED_KV_ROWS] > kv);
    }
    /* 12 rows of 150 keys: fewer than a quarter of the SMs, so the 4-warp
     * kernel in chunks for F32 caches (the wide one:
     * test_attn_decode_wide_match_cpu); in BF16 150 keys are one round of
     * the wide block's 16 warps, which takes such short rows */
    int wide = c->n_attn_decode_wide;
    compare_with_cpu(b, build_attn_step, 2, 5e-4, "attention step, f32 cache (attn_decode)");
    CHECK(c->n_attn_decode > ad && (c->n_attn_decode_wide == wide || c->dev->props.sm_count < 48));
    ad = c->n_attn_decode;
    compare_with_cpu(b, build_attn_step_bf16, 2, 5e-4, "attention step, bf16 kv, D=256");
    CHECK(c->n_attn_decode > ad);
    ad = c->n_attn_decode;
    wide = c->n_attn_decode_wide;
    compare_with_cpu(b, build_attn_step_bf16_128, 2, 5e-4, "attention step, bf16 kv, D=128 (wide, short rows)");
    CHECK(c->n_attn_decode > ad && (c->n_attn_decode_wide > wide || c->dev->props.sm_count < 12));
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
    /* the same f32 arithmetic in the same order as the four kernels it
     * replaces; only conv0's summation may differ from the CPU's */
    const build_fn fronts[3] = {build_sub_front, build_sub_front_nomask, build_sub_front_swapped};
    const char *front_what[3] = {"subsampling front: conv0 .. dw, masks (one kernel)",
                                 "subsampling front without masks (one kernel)",
                                 "subsampling front, operands swapped (one kernel)"};
    for (int k = 0; k < 3; k++) {
        int sf = c->n_fused[TG_FUSED_SUB_FRONT];
        compare_with_cpu(b, fronts[k], 2, 1e-8, front_what[k]);
        CHECK_MSG(c->n_fused[TG_FUSED_SUB_FRONT] > sf, "%s: not fused", front_what[k]);
    }
    compare_with_cpu(b, build_argmax, 2, 0.0, "argmax");
    /* f32 arithmetic throughout; only the norm's summation order differs */
    int emb = c->n_fused[TG_FUSED_EMBED_NORM];
    compare_with_cpu(b, build_embed_norm, 2, 1e-9, "embeddings, sum, layer norm (one launch)");
    CHECK(c->n_fused[TG_FUSED_EMBED_NORM] > emb);
    tg_backend_free(b);
}

/* Results stored in 16 bits for the readers that take them: a product's
 * (or its group's) read only by its silu (CT_CUDA_EMIT_TAILS; the
 * encoder's feed-forward: with a bias, which the silu then adds, and
 * alone) or by the conv module's fused kernel (which adds the bias too),
 * or by the next product (a feed-forward's relu at 40 columns,
 * cuBLASLt, where it has an algorithm for that), and an attention's
 * read only by its out projection (CT_CUDA_EMIT_ATTN; a decoder step at 2
 * rows, the projection on matvec.cu, at 20 (its tiles) and 40 (cuBLASLt),
 * and the encoder's packed kernel). Each against the CPU with the switches on (the defaults: the
 * silu adds W1's bias, CT_CUDA_EMIT_DEFER) and off; the counters say which
 * ran. */
static void test_operands_stored_16_bits(void) {
    tg_backend *on = cuda_with("CT_CUDA_EMIT_DEFER", "1");
    if (!on || ((tg_cuda_ctx *)on->impl)->dev->props.tc_level < 2) {
        tg_backend_free(on);
        return;
    }
    setenv("CT_CUDA_EMIT_ATTN", "0", 1);
    tg_backend *off = cuda_with("CT_CUDA_EMIT_TAILS", "0");
    unsetenv("CT_CUDA_EMIT_ATTN");
    static const struct {
        build_fn fn;
        const char *what;
        int products, unary, attn; /* stores in 16 bits expected with the switches on (-1: not
                                    * counted: the rel-pos product stores its mask in BF16 either way;
                                    * a BF16 result with its F32 bias and relu only where cuBLASLt
                                    * has an algorithm, which an H100's has not) */
    } cases[] = {
        {build_ffn_silu_bias, "ffn, W1's group read by its silu (37 columns)", 1, 1, 0},
        {build_half_ffn, "half ffn, the product alone read by its silu", 1, 1, 0},
        {build_conv_module_pw, "conv module, W1's group read by the glu .. silu kernel", 1, 1, 0},
        {build_ffn_mma40, "ffn on 40 columns, the relu read by W2 (cuBLASLt)", -1, 0, 0},
        {build_attn_proj2, "attention step, 2 rows, read by its projection (matvec.cu)", 0, 0, 1},
        {build_attn_proj20, "attention step, 20 rows, read by its projection (tiles of 16)", 0, 0, 1},
        {build_attn_proj40, "attention step, 40 rows, read by its projection (cuBLASLt)", 0, 0, 1},
        {build_attn_proj_enc, "encoder attention (packed), read by its projection", -1, 0, 1},
    };
    for (int v = 0; v < 2 && off; v++) {
        tg_backend *b = v == 0 ? on : off;
        tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
        CHECK(c->emit_tails == (v == 0) && c->emit_attn == (v == 0));
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            const int mm = c->n_mm_out16, un = c->n_unary16, at = c->n_attn_out16;
            char what[160];
            snprintf(what, sizeof what, "%s, switches %s", cases[k].what, v == 0 ? "on" : "off");
            compare_with_cpu(b, cases[k].fn, 2, 5e-4, what);
            CHECK_MSG((cases[k].products < 0 || (c->n_mm_out16 > mm) == (v == 0 && cases[k].products)) &&
                          (c->n_unary16 > un) == (v == 0 && cases[k].unary) &&
                          (c->n_attn_out16 > at) == (v == 0 && cases[k].attn),
                      "%s: %d products, %d unary ops, %d attentions in 16 bits", what, c->n_mm_out16 - mm,
                      c->n_unary16 - un, c->n_attn_out16 - at);
        }
    }
    tg_backend_free(on);
    tg_backend_free(off);
}

/* Ids outside their tables in the step's fused kernels, which only a GPU
 * computes this way (the CPU reports such ids as errors): a K/V write
 * whose cache row is outside the cache writes nothing (checked against
 * the same launch with every row valid, and against the cache as filled),
 * and embed_norm reads an id outside its table as a row of zeros (checked
 * against the CPU's norm of the rows summed on the host). Then the K/V
 * write over 17 columns (two tiles of mul_mat_vec_mma). */
enum { KVB_T = 8, KVB_B = 3, KVB_G = 4, KVB_HD = 32 };
static tg_tensor *g_kvb_cache, *g_kvb_ids;
static tg_tensor *build_kv_write(tg_ctx *ctx) {
    const int64_t hd = KVB_HD, dd = hd * KVB_G / 2, B = KVB_B;
    tg_tensor *x = tg_new_3d(ctx, TG_F32, dd, 1, B);
    tg_tensor *h = tg_layer_norm(ctx, x, tg_new_1d(ctx, TG_F32, dd), tg_new_1d(ctx, TG_F32, dd), 1e-5f);
    tg_tensor *qkv = tg_add(ctx, tg_mul_mat(ctx, tg_new_2d(ctx, TG_BF16, dd, 3 * dd), h), tg_new_1d(ctx, TG_F32, 3 * dd));
    if (!qkv) return NULL;
    const int64_t ne[4] = {hd, 1, KVB_G, B};
    const size_t nb[4] = {4, (size_t)hd * 4, (size_t)hd * 4, qkv->nb[2]};
    g_kvb_cache = tg_new_4d(ctx, TG_BF16, hd, KVB_T, KVB_G, B);
    g_kvb_ids = tg_new_3d(ctx, TG_I32, 1, KVB_G, B);
    return tg_set_rows(ctx, g_kvb_cache, tg_view(ctx, qkv, 4, ne, nb, (size_t)dd * 4), g_kvb_ids);
}

/* run r's cache after a compute with these ids (the other leaves as seed 9
 * fills them); into out (KVB cache elements as uint16). */
static void kv_write_run(tg_backend *b, run *r, const int32_t *ids, uint16_t *filled, uint16_t *out) {
    const size_t n = (size_t)KVB_HD * KVB_T * KVB_G * KVB_B;
    CHECK_OK(fill_leaves(r, 9));
    CHECK_OK(tg_tensor_set(g_kvb_ids, ids, 0, sizeof(int32_t) * KVB_G * KVB_B));
    if (filled) CHECK_OK(tg_tensor_get(g_kvb_cache, filled, 0, n * 2));
    CHECK_OK(tg_backend_graph_compute(b, r->g));
    CHECK_OK(tg_tensor_get(r->out, out, 0, n * 2));
}

static void kv_write_keeps_bad_rows(tg_backend *b) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const size_t plane = (size_t)KVB_HD * KVB_T, n = plane * KVB_G * KVB_B;
    uint16_t *p0 = tg_malloc(n * 2), *r1 = tg_malloc(n * 2), *r2 = tg_malloc(n * 2);
    run r;
    CHECK_OK(run_make(b, build_kv_write, &r));
    int32_t good[KVB_G * KVB_B], bad[KVB_G * KVB_B];
    for (int k = 0; k < KVB_G * KVB_B; k++) {
        good[k] = 2;
        bad[k] = k % 4 == 0 ? -1 : k % 4 == 1 ? KVB_T : k % 4 == 2 ? 1 << 30 : 5; /* [j + G b] */
    }
    int kv = c->n_fused[TG_FUSED_KV_ROWS];
    if (p0 && r1 && r2 && r.g && r.buf) {
        kv_write_run(b, &r, good, NULL, r1);
        kv_write_run(b, &r, bad, p0, r2);
        CHECK(c->n_fused[TG_FUSED_KV_ROWS] >= kv + 2);
        int wrong = 0;
        for (int k = 0; k < KVB_G * KVB_B; k++) /* plane (j, b) = [hd, T] at k = j + G b */
            for (int t = 0; t < KVB_T; t++)
                for (int e = 0; e < KVB_HD; e++) {
                    size_t at = (size_t)k * plane + (size_t)t * KVB_HD + (size_t)e;
                    uint16_t want = t == bad[k] ? r1[(size_t)k * plane + 2 * KVB_HD + (size_t)e] : p0[at];
                    wrong += r2[at] != want;
                }
        CHECK_MSG(wrong == 0, "%d cache elements differ from the rows the ids allow", wrong);
        /* and the good run did write row 2 (not merely kept the fill) */
        int changed = 0;
        for (size_t e = 0; e < KVB_HD; e++) changed += r1[2 * KVB_HD + e] != p0[2 * KVB_HD + e];
        CHECK(changed > 0);
    }
    run_free(&r);
    tg_free(p0);
    tg_free(r1);
    tg_free(r2);
}

enum { EMB_D = 96, EMB_B = 5, EMB_TOK = 40, EMB_POS = 12 };
static tg_tensor *g_emb_tok, *g_emb_pos, *g_emb_it, *g_emb_ip, *g_emb_w, *g_emb_b;
static tg_tensor *build_embed_ids(tg_ctx *ctx) {
    g_emb_tok = tg_new_2d(ctx, TG_BF16, EMB_D, EMB_TOK);
    g_emb_pos = tg_new_2d(ctx, TG_BF16, EMB_D, EMB_POS);
    g_emb_it = tg_new_1d(ctx, TG_I32, EMB_B);
    g_emb_ip = tg_new_1d(ctx, TG_I32, EMB_B);
    g_emb_w = tg_new_1d(ctx, TG_F32, EMB_D);
    g_emb_b = tg_new_1d(ctx, TG_F32, EMB_D);
    tg_tensor *x = tg_add(ctx, tg_get_rows(ctx, g_emb_tok, g_emb_it), tg_get_rows(ctx, g_emb_pos, g_emb_ip));
    return tg_layer_norm(ctx, tg_reshape_3d(ctx, x, EMB_D, 1, EMB_B), g_emb_w, g_emb_b, 1e-5f);
}

/* the reference: the norm of the rows summed on the host */
static float g_emb_x[EMB_D * EMB_B], g_emb_wv[EMB_D], g_emb_bv[EMB_D];
static tg_tensor *g_ref_x, *g_ref_w, *g_ref_b;
static tg_tensor *build_norm_of_x(tg_ctx *ctx) {
    g_ref_x = tg_new_3d(ctx, TG_F32, EMB_D, 1, EMB_B);
    g_ref_w = tg_new_1d(ctx, TG_F32, EMB_D);
    g_ref_b = tg_new_1d(ctx, TG_F32, EMB_D);
    return tg_layer_norm(ctx, g_ref_x, g_ref_w, g_ref_b, 1e-5f);
}

static void embed_norm_reads_bad_ids_as_zeros(tg_backend *b) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const int32_t it[EMB_B] = {-1, EMB_TOK, 3, 7, 1 << 30}, ip[EMB_B] = {2, EMB_POS - 1, -5, EMB_POS, 0};
    run r, rc;
    CHECK_OK(run_make(b, build_embed_ids, &r));
    int emb = c->n_fused[TG_FUSED_EMBED_NORM];
    uint16_t tok[EMB_D * EMB_TOK], pos[EMB_D * EMB_POS];
    float got[EMB_D * EMB_B], want[EMB_D * EMB_B];
    if (r.g && r.buf) {
        CHECK_OK(fill_leaves(&r, 4));
        CHECK_OK(tg_tensor_set(g_emb_it, it, 0, sizeof it));
        CHECK_OK(tg_tensor_set(g_emb_ip, ip, 0, sizeof ip));
        CHECK_OK(tg_tensor_get(g_emb_tok, tok, 0, sizeof tok));
        CHECK_OK(tg_tensor_get(g_emb_pos, pos, 0, sizeof pos));
        CHECK_OK(tg_tensor_get(g_emb_w, g_emb_wv, 0, sizeof g_emb_wv));
        CHECK_OK(tg_tensor_get(g_emb_b, g_emb_bv, 0, sizeof g_emb_bv));
        CHECK_OK(tg_backend_graph_compute(b, r.g));
        CHECK_OK(tg_tensor_get(r.out, got, 0, sizeof got));
        CHECK(c->n_fused[TG_FUSED_EMBED_NORM] > emb);
        for (int row = 0; row < EMB_B; row++)
            for (int e = 0; e < EMB_D; e++) {
                float a = it[row] >= 0 && it[row] < EMB_TOK ? tg_bf16_to_f32(tok[it[row] * EMB_D + e]) : 0.0f;
                float p = ip[row] >= 0 && ip[row] < EMB_POS ? tg_bf16_to_f32(pos[ip[row] * EMB_D + e]) : 0.0f;
                g_emb_x[row * EMB_D + e] = a + p;
            }
        tg_backend *cpu = NULL;
        CHECK_OK(tg_backend_cpu_new(2, &cpu));
        CHECK_OK(run_make(cpu, build_norm_of_x, &rc));
        if (rc.g && rc.buf) {
            CHECK_OK(tg_tensor_set(g_ref_x, g_emb_x, 0, sizeof g_emb_x));
            CHECK_OK(tg_tensor_set(g_ref_w, g_emb_wv, 0, sizeof g_emb_wv));
            CHECK_OK(tg_tensor_set(g_ref_b, g_emb_bv, 0, sizeof g_emb_bv));
            CHECK_OK(tg_backend_graph_compute(cpu, rc.g));
            CHECK_OK(tg_tensor_get(rc.out, want, 0, sizeof want));
            double worst = 0;
            for (int k = 0; k < EMB_D * EMB_B; k++) worst = fmax(worst, fabs((double)got[k] - want[k]));
            CHECK_MSG(worst < 1e-5, "embed_norm with ids outside the tables: %.3g from the CPU's", worst);
        }
        run_free(&rc);
        tg_backend_free(cpu);
    }
    run_free(&r);
}

static tg_tensor *build_kv_step17(tg_ctx *ctx) { return kv_step_graph_b(ctx, 17); }
static tg_tensor *build_kv_step70(tg_ctx *ctx) { return kv_step_graph_b(ctx, 70); }

static void test_step_fusions_take_bad_ids_and_tiles(void) {
    /* the wide kernel past 16 columns, the norm inside */
    setenv("CT_CUDA_MATVEC_TILE16", "0", 1);
    setenv("CT_CUDA_MATVEC_LN_MAX", "256", 1);
    tg_backend *b = cuda_with("CT_CUDA_MATVEC_MMA_MAX", "128");
    unsetenv("CT_CUDA_MATVEC_TILE16");
    unsetenv("CT_CUDA_MATVEC_LN_MAX");
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    if (c->dev->props.tc_level >= 2) {
        kv_write_keeps_bad_rows(b);
        int kv = c->n_fused[TG_FUSED_KV_ROWS], wide = c->n_matvec_wide;
        compare_with_cpu(b, build_kv_step17, 3, 5e-4, "step at 17 columns: cache write from one wide block");
        compare_with_cpu(b, build_kv_step70, 3, 5e-4, "step at 70 columns: cache write from two wide blocks");
        CHECK(c->n_fused[TG_FUSED_KV_ROWS] > kv);
        CHECK(c->n_matvec_wide > wide);
    }
    embed_norm_reads_bad_ids_as_zeros(b);
    tg_backend_free(b);
}

/* Under the scheduler (split graphs) the fusions still apply when nothing
 * outside reads the fused-away intermediates, and stand down when something
 * does: here a tensor outside the graph reads the product, whose value must
 * then be real after the compute. */

/* One side of test_step_tail_in_one_launch: the tail as decoder.c builds
 * it over logits [V, 1, B], its leaves in a buffer of `be` (the feed and
 * the histories are written by the graph, so they are placed, as the
 * decoder places them), run by a scheduler over `list`. The histories hold
 * TAIL_SPARE rows past the `cols` the graph writes into (a view), so a
 * store past the graph's rows lands where the test reads it back. */
enum { TAIL_SPARE = 8 };
typedef struct tail_run {
    tg_ctx *ctx;
    tg_graph *g;
    tg_sched *sc;
    tg_buffer *buf;
    tg_tensor *L, *ids, *sums, *feed, *pos, *hi, *hs;
} tail_run;

static void tail_make(tail_run *r, tg_backend *be, tg_backend **list, int n_list, int64_t V, int64_t B, int64_t cols) {
    memset(r, 0, sizeof *r);
    tg_ctx *ctx = r->ctx = tg_ctx_new();
    r->L = tg_new_3d(ctx, TG_F32, V, 1, B);
    r->ids = tg_argmax(ctx, r->L);
    r->sums = tg_sum_rows(ctx, r->L);
    r->feed = tg_new_1d(ctx, TG_I32, B);
    r->pos = tg_new_1d(ctx, TG_I32, 1);
    r->hi = tg_new_2d(ctx, TG_F32, B, cols + TAIL_SPARE);
    r->hs = tg_new_2d(ctx, TG_F32, B, cols + TAIL_SPARE);
    r->g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(r->g, r->ids));
    CHECK_OK(tg_graph_build(r->g, r->sums));
    CHECK_OK(tg_graph_build(r->g, tg_cpy(ctx, tg_view_2d(ctx, r->ids, 1, B, r->ids->nb[1], 0),
                                          tg_reshape_2d(ctx, r->feed, 1, B))));
    tg_tensor *at = tg_view_1d(ctx, r->pos, 1, 0);
    tg_tensor *hi = tg_view_2d(ctx, r->hi, B, cols, r->hi->nb[1], 0), *hs = tg_view_2d(ctx, r->hs, B, cols, r->hs->nb[1], 0);
    CHECK_OK(tg_graph_build(r->g, tg_set_rows(ctx, hi, tg_reshape_2d(ctx, tg_cast(ctx, r->ids, TG_F32), B, 1), at)));
    CHECK_OK(tg_graph_build(r->g, tg_set_rows(ctx, hs, tg_reshape_2d(ctx, r->sums, B, 1), at)));
    tg_tensor *placed[5] = {r->L, r->feed, r->pos, r->hi, r->hs};
    size_t size = 0;
    for (int k = 0; k < 5; k++) size += (tg_nbytes(placed[k]) + 255) & ~(size_t)255;
    CHECK_OK(tg_backend_buffer_alloc(be, size, &r->buf));
    for (int k = 0, off = 0; k < 5 && r->buf; k++) {
        CHECK_OK(tg_tensor_place(placed[k], r->buf, (size_t)off));
        off += (int)((tg_nbytes(placed[k]) + 255) & ~(size_t)255);
    }
    CHECK_OK(tg_sched_new(list, n_list, &r->sc));
    if (r->sc) CHECK_OK(tg_sched_alloc(r->sc, r->g));
}

static void tail_free(tail_run *r) {
    tg_sched_free(r->sc);
    tg_buffer_free(r->buf);
    tg_ctx_free(r->ctx);
}

/* What one run of the tail left: ids, sums, feed, both whole histories. */
enum { TAIL_BMAX = 5, TAIL_COLS = 16, TAIL_HIST = TAIL_BMAX * (TAIL_COLS + TAIL_SPARE) };
typedef struct tail_out {
    int32_t ids[TAIL_BMAX], feed[TAIL_BMAX];
    float sums[TAIL_BMAX], hi[TAIL_HIST], hs[TAIL_HIST];
} tail_out;

/* Sets the run's inputs (logits, the feed to -1, the row id, the
 * histories to hist0), computes it and reads back what it wrote. */
static void tail_compute(tail_run *r, const float *logits, int64_t V, int64_t B, int32_t at, const float *hist0,
                         tail_out *o) {
    const int32_t fill[TAIL_BMAX] = {-1, -1, -1, -1, -1};
    const size_t hist = (size_t)(B * (TAIL_COLS + TAIL_SPARE)) * 4;
    memset(o, 0, sizeof *o);
    if (!r->sc) return;
    CHECK_OK(tg_tensor_set(r->L, logits, 0, (size_t)(V * B) * sizeof(float)));
    CHECK_OK(tg_tensor_set(r->feed, fill, 0, (size_t)B * 4));
    CHECK_OK(tg_tensor_set(r->pos, &at, 0, 4));
    CHECK_OK(tg_tensor_set(r->hi, hist0, 0, hist));
    CHECK_OK(tg_tensor_set(r->hs, hist0, 0, hist));
    CHECK_OK(tg_sched_compute(r->sc, r->g));
    CHECK_OK(tg_tensor_get(r->ids, o->ids, 0, (size_t)B * 4));
    CHECK_OK(tg_tensor_get(r->sums, o->sums, 0, (size_t)B * 4));
    CHECK_OK(tg_tensor_get(r->feed, o->feed, 0, (size_t)B * 4));
    CHECK_OK(tg_tensor_get(r->hi, o->hi, 0, hist));
    CHECK_OK(tg_tensor_get(r->hs, o->hs, 0, hist));
}

/* A decoder step's tail (argmax, sums, feed, the two history writes)
 * through the scheduler, so its view nodes are left out as they are for
 * decoder.c's graphs: one argmax_sum launch on CUDA. Its ids, sums, feed
 * and histories equal, bit for bit, those of the six launches it replaces
 * (a second CUDA backend with CT_CUDA_FUSE_PICK=0); its ids and feed equal
 * the CPU's, its sums within float rounding; the histories' other rows
 * (and the spare rows past them) untouched; a row id past the histories'
 * rows or negative writes nothing (the CPU reports such an id, so those
 * cases are checked against the values before). Row 0 holds its largest
 * value three times, across lanes and warps: the first index wins. V =
 * 16384 (the vocabulary: float4 loads, 1024 threads) and 1001 (element
 * loads). */
static void test_step_tail_in_one_launch(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_backend *apart = cuda_with("CT_CUDA_FUSE_PICK", "0");
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl, *ca = apart ? (tg_cuda_ctx *)apart->impl : NULL;
    tg_backend *cpu = NULL;
    CHECK_OK(tg_backend_cpu_new(2, &cpu));
    /* each scheduler: its backend, then the CPU (the fallback it needs) */
    tg_backend *fused_list[2] = {b, cpu}, *apart_list[2] = {apart, cpu}, *cpu_list[1] = {cpu};
    const int64_t stride = TAIL_COLS + TAIL_SPARE;
    /* encoded fused at least once and never with the switch off (a case
     * whose graph repeats an earlier one's shapes and addresses replays
     * that capture without encoding it again, so not once a case) */
    const int fused = c->n_fused[TG_FUSED_PICK], fused_apart = ca ? ca->n_fused[TG_FUSED_PICK] : 0;
    for (int v = 0; v < 4 && cpu && apart; v++) {
        const int64_t V = v == 1 ? 1001 : 16384, B = v == 1 ? 2 : TAIL_BMAX;
        const int32_t at = v == 2 ? TAIL_COLS + 2 : v == 3 ? -1 : 3, at_cpu = 3;
        const bool writes = v < 2;
        tail_run r[3];
        tail_make(&r[0], b, fused_list, 2, V, B, TAIL_COLS);
        tail_make(&r[1], apart, apart_list, 2, V, B, TAIL_COLS);
        tail_make(&r[2], cpu, cpu_list, 1, V, B, TAIL_COLS);
        float *logits = tg_malloc((size_t)(V * B) * sizeof(float)), hist0[TAIL_HIST];
        tail_out *o = tg_malloc(3 * sizeof *o);
        if (!logits || !o) {
            CHECK(0);
            tg_free(logits);
            tg_free(o);
            break;
        }
        uint64_t x = 0x1234567u + (uint64_t)v;
        for (int64_t i = 0; i < V * B; i++) {
            x = mix(x + 0x9e3779b97f4a7c15ull);
            logits[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 8.0 - 4.0);
        }
        const int64_t ties[3] = {V / 5 * 2 + 1, V / 2, V - 2}; /* the first is the answer */
        for (int k = 0; k < 3; k++) logits[ties[k]] = 10.0f;
        for (int i = 0; i < TAIL_HIST; i++) hist0[i] = (float)(i % 7) - 3.0f;
        tail_compute(&r[0], logits, V, B, at, hist0, &o[0]);
        tail_compute(&r[1], logits, V, B, at, hist0, &o[1]);
        tail_compute(&r[2], logits, V, B, at_cpu, hist0, &o[2]);
        CHECK_MSG(!memcmp(o[0].ids, o[1].ids, sizeof o[0].ids) && !memcmp(o[0].feed, o[1].feed, sizeof o[0].feed) &&
                      !memcmp(o[0].sums, o[1].sums, sizeof o[0].sums) && !memcmp(o[0].hi, o[1].hi, sizeof o[0].hi) &&
                      !memcmp(o[0].hs, o[1].hs, sizeof o[0].hs),
                  "case %d: one launch and six differ", v);
        CHECK_MSG(o[0].ids[0] == ties[0], "case %d: row 0's argmax %d, the first of its ties %lld", v, o[0].ids[0],
                  (long long)ties[0]);
        for (int64_t i = 0; i < B; i++) {
            CHECK_MSG(o[0].ids[i] == o[2].ids[i] && o[0].feed[i] == o[2].ids[i],
                      "case %d row %lld: id %d, feed %d, CPU %d", v, (long long)i, o[0].ids[i], o[0].feed[i],
                      o[2].ids[i]);
            double scale = 0;
            for (int64_t j = 0; j < V; j++) scale += fabs(logits[i * V + j]);
            CHECK_MSG(fabs(o[0].sums[i] - o[2].sums[i]) <= 1e-6 * scale, "case %d row %lld: sum %g, CPU %g", v,
                      (long long)i, o[0].sums[i], o[2].sums[i]);
        }
        for (int64_t i = 0; i < B * stride; i++) {
            bool row = writes && i / B == at;
            float want_i = row ? (float)o[2].ids[i % B] : hist0[i], want_s = row ? o[0].sums[i % B] : hist0[i];
            CHECK_MSG(o[0].hi[i] == want_i && o[0].hs[i] == want_s, "case %d: histories [%lld] %g, %g; want %g, %g",
                      v, (long long)i, o[0].hi[i], o[0].hs[i], want_i, want_s);
        }
        tg_free(o);
        tg_free(logits);
        for (int k = 0; k < 3; k++) tail_free(&r[k]);
    }
    CHECK_MSG(c->n_fused[TG_FUSED_PICK] > fused && ca && ca->n_fused[TG_FUSED_PICK] == fused_apart,
              "step tails encoded fused %d times, with the switch off %d", c->n_fused[TG_FUSED_PICK] - fused,
              ca ? ca->n_fused[TG_FUSED_PICK] - fused_apart : -1);
    tg_backend_free(cpu);
    tg_backend_free(apart);
    tg_backend_free(b);
}

/* A layer norm of 64 rows of 1024 (layer_norm_w4: a decoder step at batch
 * 64) whose affine is marked as weights, so its lines are asked into L2
 * before the kernel's wait (CT_CUDA_NORM_PREFETCH): a hint that changes
 * no value, against the CPU; and a width that ends inside a line. */
static tg_tensor *build_norm_weights(tg_ctx *ctx) {
    tg_tensor *x = in2(ctx, TG_F32, 1024, 64), *w = in2(ctx, TG_F32, 1024, 1), *b = in2(ctx, TG_F32, 1024, 1);
    tg_tensor *x2 = in2(ctx, TG_F32, 36, 5), *w2 = in2(ctx, TG_F32, 36, 1), *b2 = in2(ctx, TG_F32, 36, 1);
    tg_tensor *marked[4] = {w, b, w2, b2};
    for (int i = 0; i < 4; i++) marked[i]->flags |= TG_FLAG_WEIGHT;
    tg_tensor *y = tg_layer_norm(ctx, x, tg_view_1d(ctx, w, 1024, 0), tg_view_1d(ctx, b, 1024, 0), 1e-5f);
    tg_tensor *y2 = tg_layer_norm(ctx, x2, tg_view_1d(ctx, w2, 36, 0), tg_view_1d(ctx, b2, 36, 0), 1e-5f);
    return tg_concat(ctx, tg_reshape_2d(ctx, y, 1024 * 64, 1), tg_reshape_2d(ctx, y2, 36 * 5, 1), 0);
}

static void test_norm_prefetch_matches_cpu(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    CHECK(((tg_cuda_ctx *)b->impl)->norm_prefetch);
    compare_with_cpu(b, build_norm_weights, 2, 1e-9, "layer norms, affine marked as weights (prefetched)");
    tg_backend_free(b);
}

/* An encoder layer's output norm and the next layer's first norm
 * (layer_norm2_w4, CT_CUDA_FUSE_NORM_PAIR): a = LN(x), b = LN(a), the
 * first read again as the residual. At the model's width, 1280, with b
 * read by a BF16 product (b stored BF16) and the parameters marked as
 * weights (asked into L2), at 1024 with b read by an add (stored F32),
 * without marks, and at 512 with the first norm's bias alone and the
 * second's weight alone. Against the CPU, and against the two launches
 * (the switch off): the same arithmetic in the same order, so the same
 * bits; the counters say which ran. */
static tg_tensor *norm_pair_graph(tg_ctx *ctx, int64_t d, int64_t rows, bool product, unsigned parts) {
    tg_tensor *x = in2(ctx, TG_F32, d, rows), *par[4] = {NULL, NULL, NULL, NULL};
    for (int k = 0; k < 4; k++) {
        /* 1-D leaves, as the model's: a view node between the norms
         * would keep them apart in a whole graph */
        if (!(parts & (1u << k))) continue;
        par[k] = tg_new_1d(ctx, TG_F32, d);
        par[k]->flags |= TG_FLAG_INPUT | (product ? TG_FLAG_WEIGHT : 0);
    }
    tg_tensor *a = tg_layer_norm(ctx, x, par[0], par[1], 1e-5f);
    tg_tensor *b = tg_layer_norm(ctx, a, par[2], par[3], 1e-5f);
    if (!product) return tg_add(ctx, b, a);
    return tg_add(ctx, tg_mul_mat(ctx, in2(ctx, TG_BF16, d, d), b), a);
}
static tg_tensor *build_norm_pair_mm(tg_ctx *ctx) { return norm_pair_graph(ctx, 1280, 37, true, 15); }
static tg_tensor *build_norm_pair_f32(tg_ctx *ctx) { return norm_pair_graph(ctx, 1024, 21, false, 15); }
/* the first norm with a bias and no weight (where an FMA contraction
 * once split the two paths), the second with a weight and no bias */
static tg_tensor *build_norm_pair_part(tg_ctx *ctx) { return norm_pair_graph(ctx, 512, 9, false, 2 | 4); }

static void test_norm_pair_same_bits(void) {
    tg_backend *on = cuda_or_skip(), *off = on ? cuda_with("CT_CUDA_FUSE_NORM_PAIR", "0") : NULL;
    if (on && off) {
        tg_cuda_ctx *c = (tg_cuda_ctx *)on->impl, *d = (tg_cuda_ctx *)off->impl;
        CHECK(c->use_norm_pair && !d->use_norm_pair);
        const int p_on = c->n_fused[TG_FUSED_NORM_PAIR], p_off = d->n_fused[TG_FUSED_NORM_PAIR];
        compare_with_cpu(on, build_norm_pair_mm, 3, 5e-4, "two norms in one launch, the second for a bf16 product");
        compare_with_cpu(on, build_norm_pair_f32, 3, 1e-9, "two norms in one launch, both f32");
        compare_cuda_exact(on, off, build_norm_pair_mm, "two norms in one launch against two, bf16 product");
        compare_cuda_exact(on, off, build_norm_pair_f32, "two norms in one launch against two, f32");
        compare_with_cpu(on, build_norm_pair_part, 3, 1e-9, "two norms in one launch, a bias alone, a weight alone");
        compare_cuda_exact(on, off, build_norm_pair_part, "two norms in one launch against two, a bias alone, a weight alone");
        CHECK_MSG(c->n_fused[TG_FUSED_NORM_PAIR] >= p_on + 6 && d->n_fused[TG_FUSED_NORM_PAIR] == p_off,
                  "pairs in one launch: %d on, %d off", c->n_fused[TG_FUSED_NORM_PAIR] - p_on,
                  d->n_fused[TG_FUSED_NORM_PAIR] - p_off);
    }
    tg_backend_free(on);
    tg_backend_free(off);
}

/* The conv module's fused kernel with its sigmoids by __expf and
 * __fdividef (CT_CUDA_CONV_FAST, the default) and by expf and the IEEE
 * divide (=0), both against the CPU on its F32 result: a few ulp apart
 * from the CPU's arithmetic at most, where the BF16 store for a product
 * would hide any difference. */
static void test_conv_module_fast_match_cpu(void) {
    tg_backend *on = cuda_or_skip(), *off = on ? cuda_with("CT_CUDA_CONV_FAST", "0") : NULL;
    for (int v = 0; v < 2 && off; v++) {
        tg_backend *b = v == 0 ? on : off;
        tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
        CHECK(c->conv_fast == (v == 0));
        const int glu = c->n_fused[TG_FUSED_CONV_GLU];
        compare_with_cpu(b, build_conv_module_f32, 2, v == 0 ? 1e-10 : 1e-12,
                         v == 0 ? "conv module, fast sigmoids (f32 result)" : "conv module, expf and divide (f32 result)");
        CHECK(c->n_fused[TG_FUSED_CONV_GLU] > glu);
    }
    tg_backend_free(on);
    tg_backend_free(off);
}

TEST_MAIN(T(test_fused_and_mixed_graphs_match_cpu), T(test_operands_stored_16_bits),
          T(test_step_fusions_take_bad_ids_and_tiles), T(test_step_tail_in_one_launch),
          T(test_conv_module_fast_match_cpu), T(test_norm_prefetch_matches_cpu), T(test_norm_pair_same_bits))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
