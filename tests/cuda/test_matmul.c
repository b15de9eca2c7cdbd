/*
 * test_matmul.c: the products' plans on a GPU with their algorithm timed
 * among the heuristic's candidates (CT_CUDA_LT_TUNE=1, cuda_matmul.c's
 * lt_tune) against the CPU: the encoder's shapes with a bias, a residual,
 * a BF16 result for unary readers, a scale, and the batched rel-pos
 * product; the counters say the plans were timed, and that a backend
 * without the switch times none. The timing's stand-in operands count in
 * the backend's peak and are freed after it: the memory in use after the
 * same computes is the same with the switch and without.
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU.
 *
 * Not here: which algorithm wins (bench-cuda_lt_candidates), products on
 * the few-column kernels (test_kernels.c).
 */
#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

/* out = W x + b + x: 1280 x 1280 over 700 columns (the encoder's out
 * projection, as at batch 64 its 28032 columns would be too long here) */
static tg_tensor *build_out_proj(tg_ctx *ctx) {
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 1280, 700);
    tg_tensor *w = in2(ctx, TG_BF16, 1280, 1280), *b = in2(ctx, TG_F32, 1280, 1);
    return tg_add(ctx, tg_add(ctx, tg_mul_mat(ctx, w, x), b), x);
}
/* the feed-forward: up with its bias to silu (a BF16 result for the silu),
 * down scaled by 0.5 with its bias */
static tg_tensor *build_ffn_silu_half(tg_ctx *ctx) {
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 512, 333);
    tg_tensor *w1 = in2(ctx, TG_BF16, 512, 2048), *b1 = in2(ctx, TG_F32, 2048, 1);
    tg_tensor *w2 = in2(ctx, TG_BF16, 2048, 512), *b2 = in2(ctx, TG_F32, 512, 1);
    w1->flags |= TG_FLAG_WEIGHT;
    b1->flags |= TG_FLAG_WEIGHT;
    tg_tensor *h = tg_silu(ctx, tg_add(ctx, tg_mul_mat(ctx, w1, x), b1));
    return tg_add(ctx, tg_scale(ctx, tg_mul_mat(ctx, w2, h), 0.5f), b2);
}
/* the rel-pos term's shape: r [hd, R, H, 1] against (q + v) [hd, T, H, B],
 * both F32 (rounded to BF16 for the tensor cores), one call a head batched
 * over the clips */
static tg_tensor *build_rel_pos(tg_ctx *ctx) {
    tg_tensor *r = tg_new_4d(ctx, TG_F32, 64, 152, 4, 1), *qv = tg_new_4d(ctx, TG_F32, 64, 75, 4, 3);
    return tg_mul_mat(ctx, r, qv);
}

/* Each builder against the CPU with the plans timed, the counters moving
 * only where the switch is on, the stand-ins counted in the peak and freed. */
static void test_tuned_plans_match_cpu(void) {
    static const build_fn fns[] = {build_out_proj, build_ffn_silu_half, build_rel_pos};
    static const char *names[] = {"out projection (bias, residual)", "feed-forward (silu in BF16, scale)",
                                  "rel-pos term (a call a head, batched)"};
    tg_backend *on = cuda_with("CT_CUDA_LT_TUNE", "1"), *off = on ? cuda_or_skip() : NULL;
    if (on && off) {
        tg_cuda_ctx *c = (tg_cuda_ctx *)on->impl, *d = (tg_cuda_ctx *)off->impl;
        CHECK(c->lt_tune && !d->lt_tune);
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s, plans timed", names[i]);
            compare_with_cpu(on, fns[i], 3, 5e-4, what);
            snprintf(what, sizeof what, "%s, the heuristic's first", names[i]);
            compare_with_cpu(off, fns[i], 2, 5e-4, what);
        }
        printf("  %d plans timed, %d off the heuristic's first\n", c->n_mm_tuned, c->n_mm_retuned);
        CHECK_MSG(c->n_mm_tuned > 0, "no plan was timed");
        CHECK(c->n_mm_retuned <= c->n_mm_tuned && d->n_mm_tuned == 0 && d->n_mm_retuned == 0);
        /* the same computes on both: the same memory in use after them (the
         * stand-ins freed), and a higher peak where they were counted */
        tg_backend_stats so, sf;
        tg_backend_get_stats(on, &so);
        tg_backend_get_stats(off, &sf);
        CHECK_MSG(so.mem_in_use == sf.mem_in_use, "memory in use %zu with the plans timed, %zu without",
                  so.mem_in_use, sf.mem_in_use);
        CHECK_MSG(c->n_mm_tuned == 0 || so.mem_peak > sf.mem_peak, "peak %zu with the stand-ins, %zu without",
                  so.mem_peak, sf.mem_peak);
    }
    tg_backend_free(off);
    tg_backend_free(on);
}

TEST_MAIN(T(test_tuned_plans_match_cpu))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
