/*
 * test_matvec.c: matvec.cu's kernels (a decoder step's products of few
 * columns) against the CPU backend, and their switches against each
 * other: mul_mat_vec (F32, 1-2 columns), mul_mat_vec_mma's tiles of 16
 * (1-32 columns by default, more where asked), mul_mat_vec_mma_wide
 * (blocks of 64 columns, where asked), blocks of rows looping over the
 * SMs, the bias and residual loaded before the wait, blocks of 8 rows,
 * weight rows staged in shared memory, the norm's parameters staged;
 * the same bits where a switch moves loads, not arithmetic.
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU.
 *
 * Not here: the fused graphs that reach these kernels from the model's
 * shapes (test_kernels.c), the cluster kernel (test_matvec_cl.c), the
 * step chain (test_chain.c).
 */
#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

/* -------------------------------------------------------------- builders */

/* A step at batch 24 and 32: tiles of 16 by default, the norm apart. */
static tg_tensor *build_ffn_mma24(tg_ctx *ctx) { return ffn_block(ctx, 24, 1024); }
static tg_tensor *build_ffn_mma32(tg_ctx *ctx) { return ffn_block(ctx, 32, 512); }
static tg_tensor *build_kv_step24(tg_ctx *ctx) { return kv_step_graph_b(ctx, 24); }
/* A step at batch 64 on mul_mat_vec_mma_wide where asked (one block of 64
 * columns) or as tiles of 16, and 150 as blocks of 64
 * (CT_CUDA_MATVEC_MMA_MAX=256; the last of 22) or 10 tiles. */
static tg_tensor *build_ffn_mma64(tg_ctx *ctx) { return ffn_block(ctx, 64, 512); }
static tg_tensor *build_ffn_mma150(tg_ctx *ctx) { return ffn_block(ctx, 150, 256); }
/* 4800 hidden rows: 300 blocks of 16 rows, more than the SMs, so each
 * block of the capped grid goes on to further rows (the normed columns
 * kept), at 3 columns (mul_mat_vec_mma) and 40 (the wide kernel); the
 * second product's K = 4800 takes 16 warps of several rounds. */
static tg_tensor *build_ffn_rows3(tg_ctx *ctx) { return ffn_block(ctx, 3, 4800); }
/* The step at batch 8 with its weights and biases marked as weights, as
 * the model's are: the second product (K = 1024, 256 threads) loads its
 * bias and its residual (an input, not the first product's) before its
 * wait (TG_MV_EPI_EARLY); the first (K = 256, 128 threads) too where it
 * runs on 8-row blocks (1024 rows on 132 SMs), not on blocks of 16. */
static tg_tensor *build_ffn_epi(tg_ctx *ctx) { return ffn_block_marked(ctx, 8, 256, 1024); }
/* The same shape with the residual the hidden layer h itself (K = N =
 * 1024): the second product's residual is what the launch just before it
 * wrote, so it must not be loaded before the wait. The first product's
 * bias is left unmarked (not a weight), so it loads nothing early either
 * (on 132 SMs it runs on 8-row blocks, where 128 threads may). */
static tg_tensor *build_ffn_res_prev(tg_ctx *ctx) {
    tg_tensor *x = in2(ctx, TG_F32, 256, 8);
    tg_tensor *w1 = in2(ctx, TG_BF16, 256, 1024), *b1 = in2(ctx, TG_F32, 1024, 1);
    tg_tensor *w2 = in2(ctx, TG_BF16, 1024, 1024), *b2 = in2(ctx, TG_F32, 1024, 1);
    tg_tensor *marked[3] = {w1, w2, b2};
    for (int i = 0; i < 3; i++) marked[i]->flags |= TG_FLAG_WEIGHT;
    tg_tensor *h = tg_layer_norm(ctx, x, NULL, NULL, 1e-5f);
    h = tg_relu(ctx, tg_add(ctx, tg_mul_mat(ctx, w1, h), tg_view_1d(ctx, b1, 1024, 0)));
    return tg_add(ctx, tg_add(ctx, tg_mul_mat(ctx, w2, h), tg_view_1d(ctx, b2, 1024, 0)), h);
}
static tg_tensor *build_ffn_rows40(tg_ctx *ctx) { return ffn_block(ctx, 40, 4800); }
/* 9000 hidden rows: 563 blocks of 16, more than twice what 132 (or 108)
 * SMs hold at once, so CT_CUDA_MATVEC_LOOP=3 loops them. */
static tg_tensor *build_ffn_rows9000(tg_ctx *ctx) { return ffn_block(ctx, 3, 9000); }

/* ------------------------------------------------------------------ tests */

/* With mul_mat_vec_mma off, the decoder step's products of 1-2 columns run
 * on mul_mat_vec (F32 x, the layer norm inside); at F32 precision they do
 * so anyway. */
static void test_matvec_f32_kernel_matches_cpu(void) {
    tg_backend *b = cuda_with("CT_CUDA_MATVEC_MMA", "0");
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    int normed = c->n_fused[TG_FUSED_NORM_MATVEC];
    compare_with_cpu(b, build_ffn_vec, 3, 5e-4, "ffn on 2 columns (mul_mat_vec, norm, bias+relu, bias+residual)");
    compare_with_cpu(b, build_half_ffn_vec, 3, 5e-4, "half ffn step on 2 columns (mul_mat_vec's alpha)");
    CHECK(c->n_matvec >= 3 && c->n_matvec_mma == 0);
    CHECK(c->n_fused[TG_FUSED_NORM_MATVEC] > normed);
    tg_backend_free(b);
}

/* Products of 17 and more columns on the mma kernels, against the CPU:
 * on mul_mat_vec_mma_wide (tiles false: 64 columns a block, its weights
 * read once for all of them) or as tiles of 16 on mul_mat_vec_mma (tiles
 * true, CT_CUDA_MATVEC_TILE16), each block its columns of x, out and the
 * residual, the norm of its own columns inside. Each graph's launches are
 * counted apart (a compare encodes every product at least twice: a plain
 * run and a capture). */
static void many_columns_match_cpu(tg_backend *b, bool tiles) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    if (c->dev->props.tc_level < 2) return;
    static const struct {
        build_fn fn;
        const char *what;
        bool norm, emit;
    } cases[] = {
        {build_ffn_mma40, "ffn on 40 columns", true, false},
        {build_ffn_mma64, "ffn on 64 columns", true, false},
        {build_ffn_mma150, "ffn on 150 columns", true, false},
        /* x stored BF16 by the silu (the emit fusion) */
        {build_ffn_silu, "ffn with silu on 29 columns (bf16 x)", false, true},
        {build_half_ffn, "half ffn on 37 columns (alpha, bf16 x, residual)", false, true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char what[96];
        snprintf(what, sizeof what, "%s, %s", cases[k].what, tiles ? "tiles of 16" : "wide");
        int mma = c->n_matvec_mma, wide = c->n_matvec_wide, normed = c->n_fused[TG_FUSED_NORM_MATVEC],
            emits = c->n_fused[TG_FUSED_EMIT];
        compare_with_cpu(b, cases[k].fn, 3, 5e-4, what);
        if (tiles)
            CHECK_MSG(c->n_matvec_mma >= mma + 4 && c->n_matvec_wide == wide, "%s: %d mma launches, %d wide", what,
                      c->n_matvec_mma - mma, c->n_matvec_wide - wide);
        else
            CHECK_MSG(c->n_matvec_wide >= wide + 4, "%s: %d wide launches", what, c->n_matvec_wide - wide);
        if (cases[k].norm) CHECK(c->n_fused[TG_FUSED_NORM_MATVEC] > normed);
        if (cases[k].emit) CHECK(c->n_fused[TG_FUSED_EMIT] > emits);
    }
}

/* mul_mat_vec_mma_wide where CT_CUDA_MATVEC_MMA_MAX allows it and
 * CT_CUDA_MATVEC_TILE16=0 asks for it, the norms inside
 * (CT_CUDA_MATVEC_LN_MAX=256): not the default, slower than cuBLASLt at
 * batch 64 (kernels/matvec.cu). */
static void test_matvec_mma_wide_match_cpu(void) {
    setenv("CT_CUDA_MATVEC_TILE16", "0", 1);
    setenv("CT_CUDA_MATVEC_LN_MAX", "256", 1);
    tg_backend *b = cuda_with("CT_CUDA_MATVEC_MMA_MAX", "256");
    unsetenv("CT_CUDA_MATVEC_TILE16");
    unsetenv("CT_CUDA_MATVEC_LN_MAX");
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    CHECK(c->matvec_mma_max == 256 && !c->matvec_tile16 && c->matvec_ln_max == 256);
    many_columns_match_cpu(b, false);
    tg_backend_free(b);
    /* the default: 17-32 columns as tiles of 16, norms apart; more on
     * cuBLASLt */
    if (!(b = cuda_or_skip())) return;
    c = (tg_cuda_ctx *)b->impl;
    CHECK(c->matvec_mma_max == TG_CUDA_MATVEC_MMA_MAX && c->matvec_tile16 && c->matvec_ln_max == TG_MVM_MAXM &&
          c->matvec_loop == 3 && c->matvec_tile_max == 256);
    tg_backend_free(b);
    /* the tiles to 32 columns, the wide kernel from 33 to 64, the norms
     * apart (CT_CUDA_MATVEC_MMA_MAX=64, CT_CUDA_MATVEC_TILE_MAX=32) */
    setenv("CT_CUDA_MATVEC_MMA_MAX", "64", 1);
    b = cuda_with("CT_CUDA_MATVEC_TILE_MAX", "32");
    unsetenv("CT_CUDA_MATVEC_MMA_MAX");
    if (!b) return;
    c = (tg_cuda_ctx *)b->impl;
    CHECK(c->matvec_mma_max == 64 && c->matvec_tile_max == 32 && c->matvec_tile16);
    if (c->dev->props.tc_level >= 2) {
        static const build_fn fns[3] = {build_ffn_mma24, build_ffn_mma40, build_ffn_mma64};
        static const char *what[3] = {"ffn on 24 columns, tiles to 32 (tiles)", "ffn on 40 columns, tiles to 32 (wide)",
                                      "ffn on 64 columns, tiles to 32 (wide)"};
        for (int k = 0; k < 3; k++) {
            const int mma = c->n_matvec_mma, wide = c->n_matvec_wide, normed = c->n_fused[TG_FUSED_NORM_MATVEC];
            compare_with_cpu(b, fns[k], 3, 5e-4, what[k]);
            CHECK_MSG(c->n_matvec_mma >= mma + 4 && (k > 0 ? c->n_matvec_wide >= wide + 4 : c->n_matvec_wide == wide) &&
                          c->n_fused[TG_FUSED_NORM_MATVEC] == normed,
                      "%s: %d mma launches, %d wide, %d normed inside", what[k], c->n_matvec_mma - mma,
                      c->n_matvec_wide - wide, c->n_fused[TG_FUSED_NORM_MATVEC] - normed);
        }
    }
    tg_backend_free(b);
}

/* The same products as tiles of 16 (CT_CUDA_MATVEC_TILE16=1): 2-10 tiles a
 * block of rows. */
static void test_matvec_mma_tiles16_match_cpu(void) {
    setenv("CT_CUDA_MATVEC_MMA_MAX", "256", 1);
    setenv("CT_CUDA_MATVEC_LN_MAX", "256", 1);
    tg_backend *b = cuda_with("CT_CUDA_MATVEC_TILE16", "1");
    unsetenv("CT_CUDA_MATVEC_MMA_MAX");
    unsetenv("CT_CUDA_MATVEC_LN_MAX");
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    CHECK(c->matvec_mma_max == 256 && c->matvec_tile16 && c->matvec_ln_max == 256);
    many_columns_match_cpu(b, true);
    tg_backend_free(b);
    /* the default: a step at 24 and 32 columns as tiles of 16 with the
     * norm launched apart (layer_norm_w4), at 40 on cuBLASLt; a step's
     * q/k/v at 24 with its cache write inside the tiles' launch */
    if (!(b = cuda_or_skip())) return;
    c = (tg_cuda_ctx *)b->impl;
    if (c->dev->props.tc_level >= 2) {
        static const build_fn fns[3] = {build_ffn_mma24, build_ffn_mma32, build_ffn_mma40};
        static const char *what[3] = {"ffn on 24 columns, the default (tiles, norm apart)",
                                      "ffn on 32 columns, the default (tiles, norm apart)",
                                      "ffn on 40 columns, the default (cuBLASLt)"};
        for (int k = 0; k < 3; k++) {
            const int mma = c->n_matvec_mma, wide = c->n_matvec_wide, normed = c->n_fused[TG_FUSED_NORM_MATVEC];
            compare_with_cpu(b, fns[k], 3, 5e-4, what[k]);
            CHECK_MSG((k < 2 ? c->n_matvec_mma >= mma + 4 : c->n_matvec_mma == mma) && c->n_matvec_wide == wide &&
                          c->n_fused[TG_FUSED_NORM_MATVEC] == normed,
                      "%s: %d mma launches, %d wide, %d normed inside", what[k], c->n_matvec_mma - mma,
                      c->n_matvec_wide - wide, c->n_fused[TG_FUSED_NORM_MATVEC] - normed);
        }
        const int kv = c->n_fused[TG_FUSED_KV_ROWS], mma = c->n_matvec_mma;
        compare_with_cpu(b, build_kv_step24, 3, 5e-4, "step at 24 columns, the default: cache write from the tiles");
        CHECK(c->n_fused[TG_FUSED_KV_ROWS] > kv && c->n_matvec_mma > mma);
    }
    tg_backend_free(b);
}

/* The mma kernels over more blocks of rows than the SMs: with
 * CT_CUDA_MATVEC_LOOP=1 the grid stops at the SMs and its blocks loop over
 * the rows; by default a block for each. Both against the CPU, at 3
 * columns and at 40 (the wide kernel, switched on). */
static void test_matvec_rows_loop_match_cpu(void) {
    for (int loop = 1; loop >= 0; loop--) {
        setenv("CT_CUDA_MATVEC_MMA_MAX", "64", 1);
        setenv("CT_CUDA_MATVEC_TILE16", "0", 1);
        setenv("CT_CUDA_MATVEC_LN_MAX", "256", 1);
        tg_backend *b = cuda_with("CT_CUDA_MATVEC_LOOP", loop ? "1" : "0");
        unsetenv("CT_CUDA_MATVEC_MMA_MAX");
        unsetenv("CT_CUDA_MATVEC_TILE16");
        unsetenv("CT_CUDA_MATVEC_LN_MAX");
        if (!b) return;
        tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
        CHECK(c->matvec_loop == (loop == 1));
        if (c->dev->props.tc_level >= 2) {
            int mma = c->n_matvec_mma, wide = c->n_matvec_wide, normed = c->n_fused[TG_FUSED_NORM_MATVEC];
            compare_with_cpu(b, build_ffn_rows3, 3, 5e-4,
                             loop ? "ffn of 4800 rows on 3 columns (blocks looping)" : "ffn of 4800 rows on 3 columns");
            CHECK(c->n_matvec_mma >= mma + 4 && c->n_fused[TG_FUSED_NORM_MATVEC] > normed);
            normed = c->n_fused[TG_FUSED_NORM_MATVEC];
            compare_with_cpu(b, build_ffn_rows40, 3, 5e-4,
                             loop ? "ffn of 4800 rows on 40 columns (wide, blocks looping)" : "ffn of 4800 rows on 40 columns (wide)");
            CHECK(c->n_matvec_wide >= wide + 4 && c->n_fused[TG_FUSED_NORM_MATVEC] > normed);
        }
        tg_backend_free(b);
    }
}

/* A product's bias and residual loaded before its wait (TG_MV_EPI_EARLY):
 * the same bits as loaded after it (the bias and residual are small
 * beside W h, so an NMSE against the CPU would not see one missing), the
 * counter saying which ran; and never where the residual is what the
 * launch before wrote (build_ffn_res_prev: against the CPU, no early
 * load counted). */
static void test_epilogue_early(void) {
    tg_backend *on = cuda_or_skip(), *off = on ? cuda_with("CT_CUDA_MATVEC_EPI_EARLY", "0") : NULL;
    if (on && off && ((tg_cuda_ctx *)on->impl)->dev->props.tc_level >= 2) {
        tg_cuda_ctx *c = (tg_cuda_ctx *)on->impl, *d = (tg_cuda_ctx *)off->impl;
        const int e_on = c->n_matvec_epi_early, e_off = d->n_matvec_epi_early;
        compare_cuda_exact(on, off, build_ffn_epi, "ffn on 8 columns, weights marked, early against late");
        CHECK_MSG(c->n_matvec_epi_early > e_on && d->n_matvec_epi_early == e_off, "early loads: %d on, %d off",
                  c->n_matvec_epi_early - e_on, d->n_matvec_epi_early - e_off);
        const int before = c->n_matvec_epi_early, mv = c->n_matvec_mma;
        compare_with_cpu(on, build_ffn_res_prev, 3, 5e-4, "ffn, residual from the launch before");
        CHECK_MSG(c->n_matvec_mma > mv && c->n_matvec_epi_early == before,
                  "residual from the launch before: %d products on matvec.cu, %d loaded it early",
                  c->n_matvec_mma - mv, c->n_matvec_epi_early - before);
    }
    tg_backend_free(on);
    tg_backend_free(off);
}

/* Blocks of 8 weight rows (mul_mat_vec_mma_r8, where blocks of 16 leave
 * SMs idle: the 256-row products, and on 132 SMs the 512- to 1024-row
 * ones) against
 * blocks of 16 (the default; CT_CUDA_MATVEC_R8=1 asks for 8): each output's warps take the same
 * steps in the same order and are summed in the same order, so the same
 * bits, with the bias and residual loaded before the wait and after it;
 * the counters say which kernel ran. */
static void test_matvec_r8_same_bits(void) {
    tg_backend *on = cuda_with("CT_CUDA_MATVEC_R8", "1"), *off = on ? cuda_or_skip() : NULL;
    if (on && off && ((tg_cuda_ctx *)on->impl)->dev->props.tc_level >= 2 &&
        ((tg_cuda_ctx *)on->impl)->dev->props.sm_count >= 32) {
        tg_cuda_ctx *c = (tg_cuda_ctx *)on->impl, *d = (tg_cuda_ctx *)off->impl;
        CHECK(c->matvec_r8 && !d->matvec_r8);
        const int r_on = c->n_matvec_r8, r_off = d->n_matvec_r8;
        compare_cuda_exact(on, off, build_ffn_epi, "ffn on 8 columns, weights marked, 8 rows a block against 16");
        compare_cuda_exact(on, off, build_ffn_mma13, "ffn on 13 columns, 8 rows a block against 16");
        compare_cuda_exact(on, off, build_ffn_vec, "ffn on 2 columns, 8 rows a block against 16");
        CHECK_MSG(c->n_matvec_r8 >= r_on + 3 && d->n_matvec_r8 == r_off, "8-row launches: %d on, %d off",
                  c->n_matvec_r8 - r_on, d->n_matvec_r8 - r_off);
        /* 4800 rows are 300 blocks of 16, more than the SMs: never 8 */
        const int before = c->n_matvec_r8, mv = c->n_matvec_mma;
        compare_with_cpu(on, build_ffn_rows3, 3, 5e-4, "ffn of 4800 rows on 3 columns, 8-row blocks allowed");
        CHECK_MSG(c->n_matvec_mma > mv && c->n_matvec_mma - mv == 2 * (c->n_matvec_r8 - before),
                  "4800 rows: %d launches on matvec.cu, %d of 8 rows (only the 256-row products)",
                  c->n_matvec_mma - mv, c->n_matvec_r8 - before);
    }
    tg_backend_free(on);
    tg_backend_free(off);
}

/* A decoder step's feed-forward at the model's size with its weights
 * marked (mul_mat_vec_mma_st16 for the down product's K = 4096, 16 warps),
 * at 1, 8 and 16 columns; 4096 hidden rows are 512 blocks of 8, so on 132
 * SMs the up product's blocks take 4 or 3 each. And one product of 1003
 * rows (the last block of 8 repeating row 1002 in shared memory) at 5
 * columns without a norm. */
static tg_tensor *build_ffn_st1(tg_ctx *ctx) { return ffn_block_marked(ctx, 1, 1024, 4096); }

static tg_tensor *build_ffn_st8(tg_ctx *ctx) { return ffn_block_marked(ctx, 8, 1024, 4096); }

static tg_tensor *build_ffn_st16(tg_ctx *ctx) { return ffn_block_marked(ctx, 16, 512, 2048); }

static tg_tensor *build_mv_rows1003(tg_ctx *ctx) {
    tg_tensor *x = in2(ctx, TG_F32, 1024, 5), *w = in2(ctx, TG_BF16, 1024, 1003), *b = in2(ctx, TG_F32, 1003, 1);
    w->flags |= TG_FLAG_WEIGHT;
    b->flags |= TG_FLAG_WEIGHT;
    return tg_add(ctx, tg_mul_mat(ctx, w, x), b);
}

/* Weight rows staged in shared memory before the wait
 * (mul_mat_vec_mma_st(16), CT_CUDA_MATVEC_STAGED=100; off by default)
 * against the CPU, and against mul_mat_vec_mma: the same warps take the same
 * steps in the same order, so the same bits; the counters say which ran.
 * Unmarked weights are never staged (a kernel before might write them). */
static void test_matvec_staged_same_bits(void) {
    tg_backend *on = cuda_with("CT_CUDA_MATVEC_STAGED", "100"), *off = on ? cuda_or_skip() : NULL;
    if (on && off && ((tg_cuda_ctx *)on->impl)->dev->props.tc_level >= 2 &&
        ((tg_cuda_ctx *)on->impl)->dev->props.smem_per_block_optin >= 100 * 1024) {
        tg_cuda_ctx *c = (tg_cuda_ctx *)on->impl, *d = (tg_cuda_ctx *)off->impl;
        CHECK(c->matvec_staged == 100 && d->matvec_staged == 0);
        const int s_off = d->n_matvec_staged;
        const build_fn fns[3] = {build_ffn_st1, build_ffn_st8, build_mv_rows1003};
        const char *names[3] = {"ffn 1024 x 4096 on 1 column", "ffn 1024 x 4096 on 8 columns", "1003 rows on 5 columns"};
        for (int i = 0; i < 3; i++) {
            char what[96];
            const int s_on = c->n_matvec_staged;
            snprintf(what, sizeof what, "%s, weights staged", names[i]);
            compare_with_cpu(on, fns[i], i == 2 ? 2 : 3, 5e-4, what);
            CHECK_MSG(c->n_matvec_staged > s_on, "%s: no launch staged", what);
        }
        compare_cuda_exact(on, off, build_ffn_st1, "ffn 1024 x 4096 on 1 column, staged against not");
        compare_cuda_exact(on, off, build_ffn_st8, "ffn 1024 x 4096 on 8 columns, staged against not");
        compare_cuda_exact(on, off, build_ffn_st16, "ffn 512 x 2048 on 16 columns, staged against not");
        compare_cuda_exact(on, off, build_mv_rows1003, "1003 rows on 5 columns, staged against not");
        compare_cuda_exact(on, off, build_ffn_epi, "ffn 256 x 1024 on 8 columns, staged against not");
        CHECK_MSG(d->n_matvec_staged == s_off, "staged launches with the switch off: %d", d->n_matvec_staged - s_off);
        const int before = c->n_matvec_staged, mv = c->n_matvec_mma;
        compare_with_cpu(on, build_ffn_mma8, 3, 5e-4, "ffn on 8 columns, weights not marked");
        CHECK_MSG(c->n_matvec_mma > mv && c->n_matvec_staged == before, "unmarked: %d staged of %d",
                  c->n_matvec_staged - before, c->n_matvec_mma - mv);
    }
    tg_backend_free(on);
    tg_backend_free(off);
}

/* ffn_block_marked with the norm's weight and bias marked too, as the
 * model's are: the first product's launch may copy them into shared
 * memory before its wait (mul_mat_vec_mma_ln). At 1 column (the block's
 * norm), 8 and 13 (a warp a column, one read), and 16 at K = 512. */
static tg_tensor *ffn_ln_marked(tg_ctx *ctx, int64_t cols, int64_t d, int64_t hidden) {
    tg_tensor *y = ffn_block_marked(ctx, cols, d, hidden);
    if (!y) return NULL;
    tg_tensor *ln = y->src[0]->src[0]->src[1]->src[0]->src[0]->src[1]; /* relu(mm1 + b1) <- mm1 <- ln */
    for (int k = 1; k < 3; k++) (ln->src[k]->view_src ? ln->src[k]->view_src : ln->src[k])->flags |= TG_FLAG_WEIGHT;
    return y;
}

static tg_tensor *build_ffn_ln1(tg_ctx *ctx) { return ffn_ln_marked(ctx, 1, 1024, 4096); }

static tg_tensor *build_ffn_ln8(tg_ctx *ctx) { return ffn_ln_marked(ctx, 8, 1024, 4096); }

static tg_tensor *build_ffn_ln13(tg_ctx *ctx) { return ffn_ln_marked(ctx, 13, 1024, 1024); }

static tg_tensor *build_ffn_ln16(tg_ctx *ctx) { return ffn_ln_marked(ctx, 16, 512, 2048); }

/* K = 2048 at 4 columns: the three-pass warp-a-column norm (the one-read
 * norm takes K <= 1024); 9000 hidden rows at 3 columns: the rows loop, as
 * the logits' product (the final norm inside) runs */
static tg_tensor *build_ffn_ln4_2048(tg_ctx *ctx) { return ffn_ln_marked(ctx, 4, 2048, 1024); }

static tg_tensor *build_ffn_ln3_rows(tg_ctx *ctx) { return ffn_ln_marked(ctx, 3, 256, 9000); }

/* The norm's parameters staged in shared memory before the wait
 * (CT_CUDA_MATVEC_LN_STAGE=2: for any columns) against the CPU and against
 * reading them after the statistics (=0): the same values in the same
 * arithmetic, so the same bits; =1 (the default) leaves one column alone;
 * the counters say which ran, and a norm whose parameters are not marked
 * is not staged. */
static void test_matvec_ln_stage_same_bits(void) {
    tg_backend *on = cuda_with("CT_CUDA_MATVEC_LN_STAGE", "2"), *off = on ? cuda_with("CT_CUDA_MATVEC_LN_STAGE", "0") : NULL;
    tg_backend *two = off ? cuda_or_skip() : NULL;
    if (on && off && two && ((tg_cuda_ctx *)on->impl)->dev->props.tc_level >= 2) {
        tg_cuda_ctx *c = (tg_cuda_ctx *)on->impl, *d = (tg_cuda_ctx *)off->impl, *e = (tg_cuda_ctx *)two->impl;
        CHECK(c->matvec_ln_stage == 2 && d->matvec_ln_stage == 0 && e->matvec_ln_stage == 1);
        const build_fn fns[6] = {build_ffn_ln1,  build_ffn_ln8,      build_ffn_ln13,
                                 build_ffn_ln16, build_ffn_ln4_2048, build_ffn_ln3_rows};
        const char *names[6] = {"1 column, K = 1024",  "8 columns, K = 1024", "13 columns, K = 1024",
                                "16 columns, K = 512", "4 columns, K = 2048", "3 columns, 9000 rows"};
        for (int i = 0; i < 6; i++) {
            char what[96];
            const int s_on = c->n_matvec_ln_stage, s_off = d->n_matvec_ln_stage, s_two = e->n_matvec_ln_stage;
            snprintf(what, sizeof what, "ffn, norm parameters staged, %s", names[i]);
            compare_with_cpu(on, fns[i], 3, 5e-4, what);
            snprintf(what, sizeof what, "ffn, norm parameters staged against not, %s", names[i]);
            compare_cuda_exact(on, off, fns[i], what);
            snprintf(what, sizeof what, "ffn, norm parameters staged from two columns, %s", names[i]);
            compare_cuda_exact(two, off, fns[i], what);
            CHECK_MSG(c->n_matvec_ln_stage > s_on && d->n_matvec_ln_stage == s_off &&
                          (e->n_matvec_ln_stage > s_two) == (i > 0),
                      "%s: staged launches %d (=2), %d (=0), %d (=1)", names[i], c->n_matvec_ln_stage - s_on,
                      d->n_matvec_ln_stage - s_off, e->n_matvec_ln_stage - s_two);
        }
        const int before = c->n_matvec_ln_stage;
        compare_with_cpu(on, build_ffn_epi, 3, 5e-4, "ffn, norm parameters not marked");
        CHECK_MSG(c->n_matvec_ln_stage == before, "unmarked norm parameters: %d staged", c->n_matvec_ln_stage - before);
    }
    tg_backend_free(on);
    tg_backend_free(off);
    tg_backend_free(two);
}

/* The rows loop over what the SMs hold at once (CT_CUDA_MATVEC_LOOP=3, the default)
 * against the CPU and against a block for every 16 rows: each output's
 * sums are the same steps in the same order, so the same bits. */
static void test_matvec_rows_loop_resident(void) {
    tg_backend *on = cuda_or_skip(), *off = on ? cuda_with("CT_CUDA_MATVEC_LOOP", "0") : NULL;
    if (on && off && ((tg_cuda_ctx *)on->impl)->dev->props.tc_level >= 2) {
        CHECK(((tg_cuda_ctx *)on->impl)->matvec_loop == 3 && ((tg_cuda_ctx *)off->impl)->matvec_loop == 0);
        compare_with_cpu(on, build_ffn_rows9000, 3, 5e-4, "ffn of 9000 rows on 3 columns (resident blocks looping)");
        compare_cuda_exact(on, off, build_ffn_rows9000, "ffn of 9000 rows, resident blocks looping against a block each");
    }
    tg_backend_free(on);
    tg_backend_free(off);
}

/* The step's switches away from their defaults, each against the CPU: the
 * fused norm reading its columns once (CT_CUDA_MATVEC_NORM1=1), attn_decode
 * without its early L2 requests (CT_CUDA_ATTN_PREFETCH=0), the rows loop
 * only past twice the SMs (CT_CUDA_MATVEC_LOOP=2: 4800 rows are 300
 * blocks, over 2 x 132), a product's bias and residual loaded after its
 * wait (CT_CUDA_MATVEC_EPI_EARLY=0; on by default, and taken by the
 * weight-marked ffn's second product), no wide block for short rows
 * (CT_CUDA_ATTN_DECODE_WIDE_SHORT=0). */
static void test_step_switches_match_cpu(void) {
    const char *sw[5][2] = {{"CT_CUDA_MATVEC_NORM1", "1"}, {"CT_CUDA_ATTN_PREFETCH", "0"}, {"CT_CUDA_MATVEC_LOOP", "2"},
                            {"CT_CUDA_MATVEC_EPI_EARLY", "0"}, {"CT_CUDA_ATTN_DECODE_WIDE_SHORT", "0"}};
    for (int i = 0; i < 5; i++) {
        tg_backend *b = cuda_with(sw[i][0], sw[i][1]);
        if (!b) return;
        tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
        CHECK(c->matvec_norm1 == (i == 0 ? 1 : 2) && c->attn_prefetch == (i != 1) && c->matvec_loop == (i == 2 ? 2 : 3) &&
              c->matvec_epi_early == (i != 3) && c->attn_decode_wide_short == (i != 4));
        char what[96];
        snprintf(what, sizeof what, "ffn on 8 columns, %s=%s", sw[i][0], sw[i][1]);
        if (c->dev->props.tc_level >= 2) compare_with_cpu(b, build_ffn_mma8, 3, 5e-4, what);
        snprintf(what, sizeof what, "ffn on 8 columns, weights marked, %s=%s", sw[i][0], sw[i][1]);
        const int early = c->n_matvec_epi_early;
        if (c->dev->props.tc_level >= 2) {
            compare_with_cpu(b, build_ffn_epi, 3, 5e-4, what);
            CHECK_MSG((c->n_matvec_epi_early > early) == (i != 3), "%s: %d products loaded bias and residual early",
                      what, c->n_matvec_epi_early - early);
        }
        snprintf(what, sizeof what, "ffn of 4800 rows on 3 columns, %s=%s", sw[i][0], sw[i][1]);
        if (c->dev->props.tc_level >= 2) compare_with_cpu(b, build_ffn_rows3, 3, 5e-4, what);
        snprintf(what, sizeof what, "attention step, bf16 kv, D=128, %s=%s", sw[i][0], sw[i][1]);
        int ad = c->n_attn_decode, wide = c->n_attn_decode_wide;
        compare_with_cpu(b, build_attn_step_bf16_128, 2, 5e-4, what);
        CHECK(c->n_attn_decode > ad);
        /* 12 short rows: the wide block unless CT_CUDA_ATTN_DECODE_WIDE_SHORT=0 */
        if (c->dev->props.sm_count >= 12) CHECK((c->n_attn_decode_wide > wide) == (i != 4));
        tg_backend_free(b);
    }
}

TEST_MAIN(T(test_matvec_f32_kernel_matches_cpu), T(test_matvec_mma_wide_match_cpu),
          T(test_matvec_mma_tiles16_match_cpu), T(test_matvec_rows_loop_match_cpu), T(test_epilogue_early),
          T(test_matvec_r8_same_bits), T(test_matvec_staged_same_bits), T(test_matvec_ln_stage_same_bits),
          T(test_matvec_rows_loop_resident), T(test_step_switches_match_cpu))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
