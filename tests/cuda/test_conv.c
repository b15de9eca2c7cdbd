/*
 * test_conv.c: the conv module's fused kernel (glu, depthwise conv, bias,
 * silu) with its taps staged a block at a time (conv_glu_dw_silu_ws,
 * CT_CUDA_CONV_WSTAGE=1) against the CPU and against the default kernel,
 * which must give the same bits: the same taps summed in the same order.
 * The shapes cover what the staging indexes: a block's 64 channel groups
 * full and partial, outputs past the last tile of 32, fewer taps than 9,
 * the taps a weight (staged before the wait) or an input (after it), the
 * source F32 or stored BF16 by the product before with its bias left to
 * the kernel.
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU.
 *
 * Not here: the fused kernel inside the other fused graphs and with exact
 * sigmoids (test_kernels.c).
 */
#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

/* glu .. silu over a [2C, T, B] input, taps [K, C], padding (K - 1) / 2;
 * the taps marked as a weight where `weight`; the F32 result read by the
 * host (so the kernel stores F32). */
static tg_tensor *conv_mid(tg_ctx *ctx, int64_t C, int64_t T, int64_t B, int K, bool weight) {
    tg_tensor *a = tg_new_3d(ctx, TG_F32, 2 * C, T, B);
    tg_tensor *kr = in2(ctx, TG_F32, K, C), *bias = tg_new_1d(ctx, TG_F32, C);
    if (weight) kr->flags |= TG_FLAG_WEIGHT;
    return tg_silu(ctx, tg_add(ctx, tg_conv_1d_dw(ctx, kr, tg_glu(ctx, a), 1, (K - 1) / 2), bias));
}
/* 320 channels: 80 groups of 4, a full block of 64 and one of 16; 75
 * frames: 3 tiles of 32 outputs and a part */
static tg_tensor *build_wide(tg_ctx *ctx) { return conv_mid(ctx, 320, 75, 2, 9, false); }
static tg_tensor *build_wide_weight(tg_ctx *ctx) { return conv_mid(ctx, 320, 75, 2, 9, true); }
/* 5 taps over 136 channels (34 groups: one partial block), 21 frames */
static tg_tensor *build_k5(tg_ctx *ctx) { return conv_mid(ctx, 136, 21, 3, 5, true); }
/* one frame: the padding on both sides of every tap window */
static tg_tensor *build_one_frame(tg_ctx *ctx) { return conv_mid(ctx, 64, 1, 2, 9, true); }

/* As the encoder (cuda_compare.h): W1's group stored BF16 without its
 * bias, which the kernel adds, and W2 reading the kernel's BF16 result;
 * 256 channels, one full block */
static tg_tensor *build_module(tg_ctx *ctx) { return conv_module_pw(ctx, 256, 45, 2); }

/* The staged kernel against the CPU and bit for bit against the default
 * one; the counters say which kernel each backend ran. */
static void test_conv_wstage_same_bits(void) {
    static const build_fn fns[] = {build_wide, build_wide_weight, build_k5, build_one_frame, build_module};
    static const char *names[] = {"320 channels, 75 frames, taps an input", "the same, taps a weight",
                                  "5 taps, 136 channels", "one frame", "W1 (BF16, bias left) .. W2"};
    tg_backend *on = cuda_with("CT_CUDA_CONV_WSTAGE", "1"), *off = on ? cuda_or_skip() : NULL;
    if (on && off) {
        tg_cuda_ctx *c = (tg_cuda_ctx *)on->impl, *d = (tg_cuda_ctx *)off->impl;
        CHECK(c->conv_wstage && !d->conv_wstage);
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
            const int ws = c->n_conv_wstage, glu = c->n_fused[TG_FUSED_CONV_GLU];
            const int ws_off = d->n_conv_wstage, glu_off = d->n_fused[TG_FUSED_CONV_GLU];
            char what[112];
            snprintf(what, sizeof what, "conv module, taps staged: %s", names[i]);
            /* 5e-4 where a BF16 product is in the graph; else the F32
             * arithmetic with fast sigmoids (test_kernels.c's bound) */
            compare_with_cpu(on, fns[i], 2, i == 4 ? 5e-4 : 1e-10, what);
            compare_cuda_exact(on, off, fns[i], what);
            CHECK_MSG(c->n_conv_wstage > ws && c->n_fused[TG_FUSED_CONV_GLU] > glu, "%s: %d staged of %d fused", what,
                      c->n_conv_wstage - ws, c->n_fused[TG_FUSED_CONV_GLU] - glu);
            CHECK_MSG(d->n_conv_wstage == ws_off && d->n_fused[TG_FUSED_CONV_GLU] > glu_off,
                      "%s: the default staged %d", what, d->n_conv_wstage - ws_off);
        }
    }
    tg_backend_free(off);
    tg_backend_free(on);
}

TEST_MAIN(T(test_conv_wstage_same_bits))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
