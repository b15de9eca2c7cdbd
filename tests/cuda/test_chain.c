/*
 * test_chain.c: a decoder step's launches run as the phases of one
 * step_chain kernel (CT_CUDA_STEP_CHAIN=1, cuda_chain.c) against the CPU
 * backend and against the same launches apart: a layer built as decoder.c
 * builds one (the norm and the packed q/k/v product with the cache write,
 * the self-attention over the cache, the out projection with its residual,
 * the feed-forward), at 1, 3 and 16 rows, with 16 and with 8 warps a block,
 * with and without the next phase's weights asked into L2, two layers in
 * one long chain (step_chain_long), at the released decoder's sizes, and
 * with an op no chain takes in the middle (what was recorded launches
 * first).
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU. On the stand-in driver (ctest's cuda/chain_fake, no GPU)
 * it checks what the chains record and launch, not their results.
 *
 * Not here: the bodies' own paths (test_kernels.c, test_attn_step.c).
 */
#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

static int64_t g_rows = 1, g_heads = 2, g_ff = 512, g_cache = 40;
static int g_layers = 1;
static bool g_broken;

static tg_tensor *weight(tg_ctx *ctx, tg_type t, int64_t a, int64_t b) {
    return as_weight(b > 1 ? tg_new_2d(ctx, t, a, b) : tg_new_1d(ctx, t, a), true);
}

/* A decoder layer's self-attention half (cuda_compare.h's, its weights
 * marked) and feed-forward at hd = 128, g_heads heads, a BF16 cache of
 * g_cache rows, a hidden size of g_ff, g_rows batch rows, on x; with
 * g_broken an add no product takes sits between the out projection and
 * the feed-forward. */
static tg_tensor *layer_of(tg_ctx *ctx, tg_tensor *x) {
    const int64_t hd = 128, H = g_heads, dd = hd * H, ff = g_ff, B = g_rows;
    tg_tensor *a = kv_step_attention(ctx, x, hd, H, g_cache, true);
    if (!a) return NULL;
    a = tg_reshape_3d(ctx, a, dd, 1, B);
    tg_tensor *y = tg_add(ctx, tg_add(ctx, tg_mul_mat(ctx, weight(ctx, TG_BF16, dd, dd), a), weight(ctx, TG_F32, dd, 1)), x);
    if (g_broken) y = tg_add(ctx, y, tg_new_3d(ctx, TG_F32, dd, 1, B));
    tg_tensor *h = tg_layer_norm(ctx, y, weight(ctx, TG_F32, dd, 1), weight(ctx, TG_F32, dd, 1), 1e-5f);
    h = tg_relu(ctx, tg_add(ctx, tg_mul_mat(ctx, weight(ctx, TG_BF16, dd, ff), h), weight(ctx, TG_F32, ff, 1)));
    return tg_add(ctx, tg_add(ctx, tg_mul_mat(ctx, weight(ctx, TG_BF16, ff, dd), h), weight(ctx, TG_F32, dd, 1)), y);
}

/* g_layers of them, one after the other. */
static tg_tensor *build_layer(tg_ctx *ctx) {
    tg_tensor *x = tg_new_3d(ctx, TG_F32, 128 * g_heads, 1, g_rows);
    for (int l = 0; l < g_layers && x; l++) x = layer_of(ctx, x);
    return x;
}

/* The computes that encoded their launches: the direct ones and the
 * captures (a replay encodes nothing). */
static int encodes_of(const tg_cuda_ctx *c) { return c->n_direct + c->n_graph_captures; }

/* The layers on a chained backend against the CPU, at 1, 3 and 16 rows:
 * the chains launched in each encode and their phases, five a layer: one
 * chain a layer, or one for both where a chain takes more than 8
 * (step_chain_long). */
static void chained_layer_matches_cpu(tg_backend *b, const char *how) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const int64_t rows[3] = {1, 3, 16};
    const int per_encode = c->chain_max >= 5 * g_layers ? 1 : g_layers;
    for (int i = 0; i < 3; i++) {
        g_rows = rows[i];
        const int chains = c->n_chains, phases = c->n_chain_phases, encodes = encodes_of(c);
        char what[96];
        snprintf(what, sizeof what, "%d layer(s), %lld rows, %s", g_layers, (long long)rows[i], how);
        compare_with_cpu(b, build_layer, 3, 5e-4, what);
        const int e = encodes_of(c) - encodes;
        CHECK_MSG(e >= 1 && c->n_chains - chains == e * per_encode, "%s: %d chains launched in %d encodes, want %d",
                  what, c->n_chains - chains, e, e * per_encode);
        CHECK_MSG(c->n_chain_phases - phases == 5 * e * g_layers, "%s: %d phases, want %d", what,
                  c->n_chain_phases - phases, 5 * e * g_layers);
    }
}

static void test_chain_layer_matches_cpu(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    const bool mma = ((tg_cuda_ctx *)b->impl)->dev->props.cc_major >= 8;
    tg_backend_free(b);
    if (!mma) {
        printf("  skipped: step chains need sm_80\n");
        return;
    }
    const char *how[5] = {"16 warps", "8 warps", "16 warps, no prefetch", "two layers a chain each",
                          "two layers, one long chain"};
    for (int v = 0; v < 5; v++) {
        setenv("CT_CUDA_STEP_CHAIN", "1", 1);
        if (v == 2) setenv("CT_CUDA_STEP_CHAIN_PREFETCH", "0", 1);
        if (v == 4) setenv("CT_CUDA_STEP_CHAIN_MAX", "66", 1);
        b = cuda_with("CT_CUDA_STEP_CHAIN_WARPS", v == 1 ? "8" : "16");
        unsetenv("CT_CUDA_STEP_CHAIN");
        unsetenv("CT_CUDA_STEP_CHAIN_PREFETCH");
        unsetenv("CT_CUDA_STEP_CHAIN_MAX");
        if (!b) return;
        CHECK(((tg_cuda_ctx *)b->impl)->chain_mode == 1);
        g_layers = v >= 3 ? 2 : 1;
        chained_layer_matches_cpu(b, how[v]);
        tg_backend_free(b);
    }
    g_layers = 1;
}

/* The released decoder's layer sizes (d = 1024 in 8 heads, a hidden size
 * of 4096, a cache of 140 rows) at 1 and 8 rows, on 16 and 8 warps: the
 * q/k/v product's 192 blocks of rows loop over the grid, the norm of one
 * column is the whole block's (TG_MV_NORM_BLOCK), and at 8 rows the normed
 * columns and the sums take 33 KB of shared memory beside the kernel's
 * own (past the 48 KB a launch gets without asking). */
static void test_chain_model_sizes(void) {
    tg_backend *b = cuda_or_skip();
    const bool mma = b && ((tg_cuda_ctx *)b->impl)->dev->props.cc_major >= 8;
    tg_backend_free(b);
    if (!mma) return;
    g_heads = 8, g_ff = 4096, g_cache = 140;
    for (int v = 0; v < 2; v++) {
        setenv("CT_CUDA_STEP_CHAIN", "1", 1);
        b = cuda_with("CT_CUDA_STEP_CHAIN_WARPS", v ? "8" : "16");
        unsetenv("CT_CUDA_STEP_CHAIN");
        if (!b) break;
        tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
        const int64_t rows[2] = {1, 8};
        for (int i = 0; i < 2; i++) {
            g_rows = rows[i];
            const int chains = c->n_chains, encodes = encodes_of(c);
            char what[96];
            snprintf(what, sizeof what, "model-sized layer, %lld rows, %s warps", (long long)rows[i], v ? "8" : "16");
            compare_with_cpu(b, build_layer, 2, 5e-4, what);
            const int e = encodes_of(c) - encodes;
            CHECK_MSG(e >= 1 && c->n_chains - chains == e, "%s: %d chains in %d encodes, want one each", what,
                      c->n_chains - chains, e);
        }
        tg_backend_free(b);
    }
    g_heads = 2, g_ff = 512, g_cache = 40, g_rows = 1;
}

/* Chained against the same graph's launches apart, same inputs: the
 * products split K over more warps in a chain (other partial sums, so not
 * the same bits), the attentions' keys over the same warps in other
 * rounds; within F32 rounding of each other. With an op no chain takes
 * between the phases, the chain before it launches first (two chains of
 * two and three phases, the add between). */
static void test_chain_against_launches(void) {
    tg_backend *off = cuda_or_skip();
    if (!off || ((tg_cuda_ctx *)off->impl)->dev->props.cc_major < 8) {
        tg_backend_free(off);
        return;
    }
    tg_backend *on = cuda_with("CT_CUDA_STEP_CHAIN", "1");
    tg_cuda_ctx *c = on ? (tg_cuda_ctx *)on->impl : NULL;
    for (int broken = 0; broken < 2 && on; broken++) {
        g_broken = broken != 0;
        g_rows = 3;
        const int chains = c->n_chains, phases = c->n_chain_phases, encodes = encodes_of(c);
        compare_cuda_pair(on, off, build_layer, 1e-9, broken ? "broken layer, chained / apart" : "layer, chained / apart");
        /* a chain of five an encode, or of three and two around the add */
        const int e = encodes_of(c) - encodes;
        CHECK_MSG(e >= 1 && c->n_chains - chains == (broken ? 2 : 1) * e, "%d chains in %d encodes",
                  c->n_chains - chains, e);
        CHECK_MSG(c->n_chain_phases - phases == 5 * e, "%d phases in %d encodes", c->n_chain_phases - phases, e);
    }
    g_broken = false;
    tg_backend_free(on);
    tg_backend_free(off);
}

TEST_MAIN(T(test_chain_layer_matches_cpu), T(test_chain_model_sizes), T(test_chain_against_launches))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
