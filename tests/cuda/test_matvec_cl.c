/*
 * test_matvec_cl.c: mul_mat_vec_mma_cl (kernels/matvec.cu), the products
 * of 17 to 64 columns as clusters of blocks that split K
 * (CT_CUDA_MATVEC_CL=1; mul_mat_vec_mma_cl2 where a warp's half of a
 * block's slice is more than 4 steps of 32), against the CPU backend: the layer norm inside
 * (its statistics gathered across the cluster), x in F32 or stored BF16 by
 * its producer, the bias, relu, scale and residual, the K/V cache write of
 * a decoder step's q/k/v product, K from 512 to 4096, weight rows past a
 * cluster's last, 1 to 16 columns
 * where its minimum is lowered; the same bits from
 * run to run; and which products it takes (not the wide kernel's when
 * that is asked for, not past 64 columns, not F32-precision requests, not
 * without cluster launches).
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU; those that need clusters say so and pass on GPUs without.
 *
 * Not here: the kernels of 1-16 columns and the wide kernel
 * (test_kernels.c), the decoder step's attention (test_attn_step.c).
 */
#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

/* -------------------------------------------------------------- builders */

/* ffn_block_d (norm, W1 + b1, relu, W2 + b2, + x) at a step's batch sizes.
 * The cluster kernel takes K a multiple of 512 up to 4096 (the norm inside
 * up to 1024): d = 1024 and 512 (the norm inside W1's launch, a quarter
 * column of 32 or 16 a thread), the hidden layer's K from 512 to 4096
 * (mul_mat_vec_mma_cl2 past 2048), 1000 hidden rows (the last cluster's
 * rows past the end; W2's K = 1000 then on cuBLASLt), 8192 (W2 past the
 * kernel's K: cuBLASLt). */
static tg_tensor *build_ffn17(tg_ctx *ctx) { return ffn_block_d(ctx, 17, 1024, 1024); }
static tg_tensor *build_ffn32(tg_ctx *ctx) { return ffn_block_d(ctx, 32, 512, 512); }
static tg_tensor *build_ffn40_1000(tg_ctx *ctx) { return ffn_block_d(ctx, 40, 1024, 1000); }
static tg_tensor *build_ffn64_2048(tg_ctx *ctx) { return ffn_block_d(ctx, 64, 1024, 2048); }
static tg_tensor *build_ffn64_4096(tg_ctx *ctx) { return ffn_block_d(ctx, 64, 512, 4096); }
static tg_tensor *build_ffn20_8192(tg_ctx *ctx) { return ffn_block_d(ctx, 20, 512, 8192); }
static tg_tensor *build_ffn65(tg_ctx *ctx) { return ffn_block_d(ctx, 65, 512, 512); }
/* A step at batch 1 and 8 (the cluster kernel where its minimum is
 * lowered); 9000 hidden rows at 2 (141 clusters, the last past the end). */
static tg_tensor *build_ffn1(tg_ctx *ctx) { return ffn_block_d(ctx, 1, 1024, 1024); }
static tg_tensor *build_ffn2_9000(tg_ctx *ctx) { return ffn_block_d(ctx, 2, 512, 9000); }

/* ffn_block_d on 8 columns with its weights and biases marked as weights,
 * as the model's are: mul_mat_vec_mma would load the second product's
 * bias and residual before its wait (TG_MV_EPI_EARLY); the cluster kernel
 * does not. */
static tg_tensor *build_ffn8_marked(tg_ctx *ctx) { return ffn_block_marked(ctx, 8, 1024, 1024); }

/* x + (W2 silu(W1 x + b1) + b2) / 2 on 48 columns: W1's x in F32 (no
 * norm, K = 512), W2's stored BF16 by the silu (the emit fusion, K =
 * 1024), the scale as alpha, the residual. */
static tg_tensor *build_silu48(tg_ctx *ctx) {
    tg_tensor *x = in2(ctx, TG_F32, 512, 48);
    tg_tensor *w1 = in2(ctx, TG_BF16, 512, 1024), *b1 = in2(ctx, TG_F32, 1024, 1);
    tg_tensor *w2 = in2(ctx, TG_BF16, 1024, 512), *b2 = in2(ctx, TG_F32, 512, 1);
    tg_tensor *h = tg_silu(ctx, tg_add(ctx, tg_mul_mat(ctx, w1, x), b1));
    return tg_add(ctx, x, tg_add(ctx, tg_scale(ctx, tg_mul_mat(ctx, w2, h), 0.5f), b2));
}

/* The decoder step's self-attention (norm, packed q/k/v product, cache
 * write, attention) at 3, 24 (hd 128, 4 heads: K = 512) and 64 rows (hd
 * 128, 8 heads: K = 1024, the model's). */
static tg_tensor *build_kv3(tg_ctx *ctx) { return kv_step_graph_dims(ctx, 3, 128, 4); }
static tg_tensor *build_kv24(tg_ctx *ctx) { return kv_step_graph_dims(ctx, 24, 128, 4); }
static tg_tensor *build_kv64(tg_ctx *ctx) { return kv_step_graph_dims(ctx, 64, 128, 8); }

/* An attention read only by its out projection at 20 rows: x stored BF16
 * by the attention (K = 512). */
static tg_tensor *build_proj20(tg_ctx *ctx) { return attn_proj_step(ctx, 20); }

/* The same ffn at 40 columns with its products asked for F32 precision. */
static tg_tensor *build_ffn40_f32(tg_ctx *ctx) {
    tg_tensor *y = ffn_block_d(ctx, 40, 512, 512); /* (w2 h + b2) + x, h = relu(w1 ln(x) + b1) */
    tg_tensor *mm2 = y->src[0]->src[0], *mm1 = mm2->src[1]->src[0]->src[0];
    tg_set_prec(mm1, TG_PREC_F32);
    tg_set_prec(mm2, TG_PREC_F32);
    return y;
}

/* A backend with CT_CUDA_MATVEC_CL=1 and the products' split of before
 * 17-32 columns went to the tiles by default (one tile on
 * mul_mat_vec_mma, more on the cluster kernel, the norms inside:
 * CT_CUDA_MATVEC_MMA_MAX=16, CT_CUDA_MATVEC_LN_MAX=256,
 * CT_CUDA_MATVEC_TILE16=0), and `name`=`value` over those when name is not
 * NULL. */
static tg_backend *cl_with(const char *name, const char *value) {
    static const char *const vars[3][2] = {
        {"CT_CUDA_MATVEC_MMA_MAX", "16"}, {"CT_CUDA_MATVEC_LN_MAX", "256"}, {"CT_CUDA_MATVEC_TILE16", "0"}};
    for (int k = 0; k < 3; k++) setenv(vars[k][0], vars[k][1], 1);
    if (name) setenv(name, value, 1);
    tg_backend *b = cuda_with("CT_CUDA_MATVEC_CL", "1");
    for (int k = 0; k < 3; k++) unsetenv(vars[k][0]);
    if (name) unsetenv(name);
    return b;
}

/* cl_with's backend on a GPU that launches clusters and has BF16 mma;
 * NULL (after saying why) otherwise. */
static tg_backend *cl_backend(const char *name, const char *value) {
    tg_backend *b = cl_with(name, value);
    if (!b) return NULL;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    CHECK(c->matvec_cl);
    if (!c->dev->props.clusters || c->dev->props.tc_level < 2) {
        printf("  (no cluster launches or no BF16 tensor cores: skipped)\n");
        tg_backend_free(b);
        return NULL;
    }
    return b;
}

/* ----------------------------------------------------------------- tests */

/* Each shape against the CPU (NMSE at most 5e-4, the limit of the other
 * BF16 product tests: x rounded to BF16 against the CPU's F32; 5e-5 below
 * for F32-precision requests), the counters saying the cluster kernel ran
 * (a compare encodes every product at least twice: a plain run and a
 * capture) with the norm, the emit or the cache write inside where the
 * graph has one. */
static void test_matvec_cl_match_cpu(void) {
    tg_backend *b = cl_backend(NULL, NULL);
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    static const struct {
        build_fn fn;
        const char *what;
        int launches; /* cluster launches a compute at least */
        bool norm, emit, kv;
    } cases[] = {
        {build_ffn17, "ffn on 17 columns (d 1024, norm inside; K 1024 twice)", 2, true, false, false},
        {build_ffn32, "ffn on 32 columns (d 512: K 512 twice)", 2, true, false, false},
        {build_ffn40_1000, "ffn on 40 columns, 1000 hidden rows (the last cluster's rows past the end)", 1, true,
         false, false},
        {build_ffn64_2048, "ffn on 64 columns (K 2048: four steps a warp)", 2, true, false, false},
        {build_ffn64_4096, "ffn on 64 columns (K 4096: eight steps a warp, mul_mat_vec_mma_cl2)", 2, true, false,
         false},
        {build_ffn20_8192, "ffn on 20 columns (W2's K 8192 on cuBLASLt)", 1, true, false, false},
        {build_silu48, "silu ffn on 48 columns (F32 x, then BF16 x; alpha, residual)", 2, false, true, false},
        {build_kv24, "step at 24 rows: norm, q/k/v product, cache write inside", 1, true, false, true},
        {build_kv64, "step at 64 rows: norm, q/k/v product, cache write inside", 1, true, false, true},
        {build_proj20, "out projection at 20 rows of a BF16 attention", 1, false, false, false},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int cl = c->n_matvec_cl, normed = c->n_fused[TG_FUSED_NORM_MATVEC];
        const int emits = c->n_fused[TG_FUSED_EMIT], kv = c->n_fused[TG_FUSED_KV_ROWS];
        compare_with_cpu(b, cases[k].fn, 3, 5e-4, cases[k].what);
        CHECK_MSG(c->n_matvec_cl >= cl + 2 * cases[k].launches, "%s: %d cluster launches", cases[k].what,
                  c->n_matvec_cl - cl);
        if (cases[k].norm) CHECK_MSG(c->n_fused[TG_FUSED_NORM_MATVEC] > normed, "%s: norm not inside", cases[k].what);
        if (cases[k].emit) CHECK_MSG(c->n_fused[TG_FUSED_EMIT] > emits, "%s: x not stored BF16", cases[k].what);
        if (cases[k].kv) CHECK_MSG(c->n_fused[TG_FUSED_KV_ROWS] > kv, "%s: cache write not inside", cases[k].what);
    }
    tg_backend_free(b);
}

/* With CT_CUDA_MATVEC_CL_MIN=1 the cluster kernel takes 1 to 16 columns
 * too, in place of mul_mat_vec_mma (one tile of 16 columns, the rows past
 * the columns zeros), without its early bias and residual. */
static void test_matvec_cl_few_columns(void) {
    tg_backend *b = cl_backend("CT_CUDA_MATVEC_CL_MIN", "1");
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    CHECK(c->matvec_cl_min == 1);
    static const struct {
        build_fn fn;
        const char *what;
        int launches;
        bool kv;
    } cases[] = {
        {build_ffn1, "ffn on 1 column", 2, false},
        {build_ffn8_marked, "ffn on 8 columns, weights marked", 2, false},
        {build_ffn2_9000, "ffn on 2 columns, 9000 hidden rows", 1, false},
        {build_kv3, "step at 3 rows: norm, q/k/v product, cache write inside", 1, true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int cl = c->n_matvec_cl, early = c->n_matvec_epi_early;
        const int normed = c->n_fused[TG_FUSED_NORM_MATVEC], kv = c->n_fused[TG_FUSED_KV_ROWS];
        compare_with_cpu(b, cases[k].fn, 3, 5e-4, cases[k].what);
        CHECK_MSG(c->n_matvec_cl >= cl + 2 * cases[k].launches, "%s: %d cluster launches", cases[k].what,
                  c->n_matvec_cl - cl);
        CHECK_MSG(c->n_fused[TG_FUSED_NORM_MATVEC] > normed, "%s: norm not inside", cases[k].what);
        if (cases[k].kv) CHECK_MSG(c->n_fused[TG_FUSED_KV_ROWS] > kv, "%s: cache write not inside", cases[k].what);
        CHECK_MSG(c->n_matvec_epi_early == early, "%s: %d launches asked for the early epilogue", cases[k].what,
                  c->n_matvec_epi_early - early);
    }
    tg_backend_free(b);
}

/* The partial sums meet in rank order, so two backends (and each compute)
 * give the same bits. */
static void test_matvec_cl_same_bits_each_run(void) {
    tg_backend *a = cl_backend(NULL, NULL), *b = a ? cl_backend(NULL, NULL) : NULL;
    if (a && b) {
        compare_cuda_exact(a, b, build_ffn64_4096, "ffn on 64 columns, two cluster backends");
        compare_cuda_exact(a, b, build_kv24, "step at 24 rows, two cluster backends");
    }
    tg_backend_free(a);
    tg_backend_free(b);
}

/* What the cluster kernel takes: nothing by default (until measured);
 * with it on, not the columns the wide kernel is asked for
 * (CT_CUDA_MATVEC_MMA_MAX), not 65 columns, not F32-precision requests;
 * and on GPUs without cluster launches, never. */
static void test_matvec_cl_choice(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    CHECK(!c->matvec_cl);
    compare_with_cpu(b, build_ffn40_1000, 2, 5e-4, "ffn on 40 columns, cluster kernel off");
    CHECK_MSG(c->n_matvec_cl == 0, "%d cluster launches with the switch off", c->n_matvec_cl);
    tg_backend_free(b);

    if (!(b = cl_with(NULL, NULL))) return;
    c = (tg_cuda_ctx *)b->impl;
    const bool can = c->dev->props.clusters && c->dev->props.tc_level >= 2;
    compare_with_cpu(b, build_ffn65, 2, 5e-4, "ffn on 65 columns, cluster kernel on");
    compare_with_cpu(b, build_ffn40_f32, 2, 5e-5, "ffn on 40 columns at F32 precision, cluster kernel on");
    CHECK_MSG(c->n_matvec_cl == 0, "%d cluster launches for 65 columns or F32 precision", c->n_matvec_cl);
    compare_with_cpu(b, build_ffn32, 2, 5e-4, "ffn on 32 columns, cluster kernel on");
    CHECK_MSG((c->n_matvec_cl > 0) == can, "%d cluster launches for 32 columns (clusters %d)", c->n_matvec_cl,
              (int)c->dev->props.clusters);
    tg_backend_free(b);

    if (!(b = cl_backend("CT_CUDA_MATVEC_MMA_MAX", "64"))) return;
    c = (tg_cuda_ctx *)b->impl;
    compare_with_cpu(b, build_ffn32, 2, 5e-4, "ffn on 32 columns, wide kernel asked for");
    CHECK_MSG(c->n_matvec_cl == 0 && c->n_matvec_wide > 0, "wide kernel asked for: %d cluster, %d wide launches",
              c->n_matvec_cl, c->n_matvec_wide);
    tg_backend_free(b);
}

TEST_MAIN(T(test_matvec_cl_match_cpu), T(test_matvec_cl_few_columns), T(test_matvec_cl_same_bits_each_run),
          T(test_matvec_cl_choice))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
