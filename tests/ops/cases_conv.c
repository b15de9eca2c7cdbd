/*
 * cases_conv.c: conformance cases for conv_2d, conv_2d_dw and conv_1d_dw.
 *
 * The encoder's subsampling is modelled with fewer channels: a 3x3 conv,
 * stride 2, pad 1, over [128 mel, T, 1 channel], then a depthwise 3x3 stride 2
 * and a pointwise 1x1 conv; the conformer's conv module is a depthwise 1-D conv
 * of kernel 9, pad 4, over channels-innermost [C, T], at C = 1280 too. Around
 * them: odd sizes, asymmetric strides and pads, inputs smaller than the
 * kernel, batches, and a strided input. conv_2d's GPU paths each get cases,
 * including shapes next to them that must take the direct kernel: 1x1
 * stride-1 unpadded convs over contiguous pixels (a cuBLASLt product), and
 * one-input-channel 3x3 convs (conv_2d_c1_3x3).
 * Limit: LIM_ELEM. Every conv here takes F32 kernels and inputs and has no
 * precision request, so a backend must compute it in f32 as it would an
 * elementwise op: the sums are at most 9*16 products long, whose f32 rounding
 * gives an NMSE near 1e-13, far inside the limit; tf32 or bf16 shortcuts
 * (~1e-7 .. 1e-5) are meant to fail here; the 256-channel 1x1 case sums 256
 * products, still ~1e-13 in f32. The 1x1 cases marked TG_PREC_TF32 (the
 * encoder's pointwise subsampling convs ask it) are held to LIM_MATMUL, as a
 * product at default precision: tf32 inputs on the GPU, f32 on the CPU.
 */
#include <stdio.h>

#include "ops_test.h"

/* i[0..3]: s0, s1, p0, p1 (conv_1d_dw: s, p); ne[0] kernel; ne[1] input (layout[1]);
 * i[4]: the op; i[5]: conv_2d's precision request. */
tg_tensor *build_conv(case_env *e, const case_params *p) {
    tg_tensor *k = env_input(e, TG_F32, p->ne[0], L_CONT, fill_u(-1, 1));
    tg_tensor *x = env_input(e, TG_F32, p->ne[1], (layout)p->layout[1], fill_u(-1, 1));
    tg_ctx *ctx = env_ctx(e);
    tg_tensor *out;
    int n = 4;
    switch ((tg_op)p->i[4]) {
    case TG_OP_CONV_2D:
        out = tg_conv_2d(ctx, k, x, p->i[0], p->i[1], p->i[2], p->i[3]);
        if (p->i[5]) tg_set_prec(out, (tg_prec)p->i[5]);
        break;
    case TG_OP_CONV_2D_DW: out = tg_conv_2d_dw(ctx, k, x, p->i[0], p->i[1], p->i[2], p->i[3]); break;
    default: out = tg_conv_1d_dw(ctx, k, x, p->i[0], p->i[1]); n = 2; break;
    }
    int32_t want[4] = {p->i[0], p->i[1], p->i[2], p->i[3]};
    env_expect_i32(e, out, 0, want, n);
    return out;
}

typedef struct cv {
    tg_op op;
    int64_t k[4];
    int64_t x[4];
    layout lx;
    int s0, s1, p0, p1;
} cv;

void cases_conv(case_list *l) {
    static const cv cs[] = {
        {TG_OP_CONV_2D, {3, 3, 1, 16}, {128, 50, 1, 1}, L_CONT, 2, 2, 1, 1}, /* subsampling 1 */
        {TG_OP_CONV_2D, {1, 1, 16, 16}, {32, 13, 16, 1}, L_CONT, 1, 1, 0, 0}, /* pointwise */
        {TG_OP_CONV_2D, {3, 3, 3, 2}, {7, 5, 3, 2}, L_CONT, 1, 1, 0, 0},
        {TG_OP_CONV_2D, {1, 1, 4, 5}, {9, 4, 4, 1}, L_CONT, 1, 1, 0, 0},
        {TG_OP_CONV_2D, {3, 2, 2, 3}, {11, 6, 2, 1}, L_CONT, 2, 1, 1, 0},
        {TG_OP_CONV_2D, {3, 3, 1, 2}, {1, 1, 1, 1}, L_CONT, 1, 1, 1, 1},
        {TG_OP_CONV_2D, {3, 3, 2, 4}, {8, 7, 2, 1}, L_ROWPAD, 2, 2, 1, 1},
        {TG_OP_CONV_2D, {3, 3, 8, 8}, {33, 17, 8, 1}, L_CONT, 2, 2, 1, 1},
        /* 1x1, stride 1, no padding, pixels contiguous: the GPU's product path */
        {TG_OP_CONV_2D, {1, 1, 7, 5}, {5, 3, 7, 3}, L_CONT, 1, 1, 0, 0},
        {TG_OP_CONV_2D, {1, 1, 33, 17}, {13, 11, 33, 2}, L_CONT, 1, 1, 0, 0},
        {TG_OP_CONV_2D, {1, 1, 256, 256}, {16, 11, 256, 2}, L_CONT, 1, 1, 0, 0}, /* subsampling 3, 5 */
        {TG_OP_CONV_2D, {1, 1, 1, 3}, {9, 7, 1, 1}, L_CONT, 1, 1, 0, 0},
        {TG_OP_CONV_2D, {1, 1, 5, 1}, {1, 1, 5, 4}, L_CONT, 1, 1, 0, 0},
        /* 1x1 that the product path leaves to the direct kernel: padded or
         * transposed pixel rows, a stride, a padding */
        {TG_OP_CONV_2D, {1, 1, 6, 4}, {10, 5, 6, 2}, L_ROWPAD, 1, 1, 0, 0},
        {TG_OP_CONV_2D, {1, 1, 6, 4}, {10, 5, 6, 1}, L_T12, 1, 1, 0, 0},
        {TG_OP_CONV_2D, {1, 1, 8, 8}, {17, 9, 8, 1}, L_CONT, 2, 1, 0, 0},
        {TG_OP_CONV_2D, {1, 1, 4, 4}, {6, 5, 4, 1}, L_CONT, 1, 1, 1, 1},
        /* one input channel, 3x3: the GPU's conv_2d_c1_3x3 (channel tiles of
         * 32: full, partial, one), any stride and padding, strided input */
        {TG_OP_CONV_2D, {3, 3, 1, 256}, {128, 40, 1, 1}, L_CONT, 2, 2, 1, 1}, /* subsampling 1 */
        {TG_OP_CONV_2D, {3, 3, 1, 37}, {31, 20, 1, 2}, L_CONT, 2, 2, 1, 1},
        {TG_OP_CONV_2D, {3, 3, 1, 5}, {9, 8, 1, 3}, L_CONT, 1, 1, 0, 0},
        {TG_OP_CONV_2D, {3, 3, 1, 33}, {2, 3, 1, 1}, L_CONT, 2, 2, 1, 1},
        {TG_OP_CONV_2D, {3, 3, 1, 8}, {15, 9, 1, 1}, L_ROWPAD, 2, 1, 0, 1},
        {TG_OP_CONV_2D, {3, 3, 1, 4}, {12, 7, 1, 1}, L_CONT, 3, 2, 2, 0},
        /* one input channel, not 3x3: the direct kernel */
        {TG_OP_CONV_2D, {5, 5, 1, 6}, {20, 12, 1, 1}, L_CONT, 2, 2, 2, 2},
        {TG_OP_CONV_2D_DW, {3, 3, 1, 16}, {64, 25, 16, 1}, L_CONT, 2, 2, 1, 1}, /* subsampling 2 */
        {TG_OP_CONV_2D_DW, {3, 3, 1, 3}, {7, 5, 3, 2}, L_CONT, 1, 1, 1, 1},
        {TG_OP_CONV_2D_DW, {5, 3, 1, 4}, {9, 9, 4, 1}, L_CONT, 2, 1, 0, 1},
        {TG_OP_CONV_2D_DW, {3, 3, 1, 4}, {1, 1, 4, 1}, L_CONT, 2, 2, 1, 1},
        {TG_OP_CONV_2D_DW, {3, 3, 1, 5}, {10, 6, 5, 1}, L_ROWPAD, 2, 2, 1, 1},
        {TG_OP_CONV_1D_DW, {9, 64, 1, 1}, {64, 33, 1, 1}, L_CONT, 1, 0, 4, 0},  /* conv module */
        {TG_OP_CONV_1D_DW, {9, 1280, 1, 1}, {1280, 7, 1, 1}, L_CONT, 1, 0, 4, 0},
        {TG_OP_CONV_1D_DW, {9, 3, 1, 1}, {3, 1, 2, 1}, L_CONT, 1, 0, 4, 0},     /* T < K */
        {TG_OP_CONV_1D_DW, {3, 7, 1, 1}, {7, 65, 1, 1}, L_CONT, 2, 0, 1, 0},
        {TG_OP_CONV_1D_DW, {9, 16, 1, 1}, {16, 20, 2, 1}, L_ROWPAD, 1, 0, 4, 0},
        {TG_OP_CONV_1D_DW, {9, 33, 1, 1}, {33, 17, 1, 1}, L_T01, 1, 0, 4, 0},
        /* the GPU's conv_1d_dw_c4 (stride 1, channels a multiple of 4):
         * several batch rows, steps past a run of 8, a long kernel */
        {TG_OP_CONV_1D_DW, {9, 128, 1, 1}, {128, 45, 3, 1}, L_CONT, 1, 0, 4, 0},
        {TG_OP_CONV_1D_DW, {31, 8, 1, 1}, {8, 40, 2, 1}, L_CONT, 1, 0, 15, 0},
        {TG_OP_CONV_1D_DW, {4, 260, 1, 1}, {260, 9, 2, 1}, L_CONT, 1, 0, 0, 0},
        /* the GPU's conv_2d_dw_3x3: several planes and batch rows, odd sizes */
        {TG_OP_CONV_2D_DW, {3, 3, 1, 8}, {33, 17, 8, 3}, L_CONT, 2, 2, 1, 1},
        {TG_OP_CONV_2D_DW, {3, 3, 1, 6}, {20, 11, 6, 2}, L_CONT, 1, 2, 0, 1},
    };
    /* 1x1 convs with tf32 allowed: the subsampling's, odd sizes, and one the
     * product path leaves to the direct kernel (padded rows) */
    static const cv tf32[] = {
        {TG_OP_CONV_2D, {1, 1, 256, 256}, {16, 11, 256, 2}, L_CONT, 1, 1, 0, 0},
        {TG_OP_CONV_2D, {1, 1, 33, 17}, {13, 11, 33, 2}, L_CONT, 1, 1, 0, 0},
        {TG_OP_CONV_2D, {1, 1, 6, 4}, {10, 5, 6, 2}, L_ROWPAD, 1, 1, 0, 0},
    };
    const size_t n_cs = sizeof cs / sizeof cs[0], n_all = n_cs + sizeof tf32 / sizeof tf32[0];
    char s0[96], s1[96];
    for (size_t k = 0; k < n_all; k++) {
        const cv *c = k < n_cs ? &cs[k] : &tf32[k - n_cs];
        const int prec = k < n_cs ? TG_PREC_DEFAULT : TG_PREC_TF32;
        case_params p = cp_new();
        memcpy(p.ne[0], c->k, sizeof c->k);
        memcpy(p.ne[1], c->x, sizeof c->x);
        p.layout[1] = c->lx;
        bool one = c->op == TG_OP_CONV_1D_DW;
        /* conv_1d_dw's (s, p) sit in i[0], i[1] */
        int v[6] = {c->s0, one ? c->p0 : c->s1, one ? 0 : c->p0, c->p1, c->op, prec};
        memcpy(p.i, v, sizeof v);
        if (one)
            cases_add(l, c->op, LIM_ELEM, build_conv, &p, "conv_1d_dw kernel=%s input=%s s=%d p=%d",
                      cp_shape(&p, 0, s0, sizeof s0), cp_shape(&p, 1, s1, sizeof s1), c->s0, c->p0);
        else
            cases_add(l, c->op, prec == TG_PREC_TF32 ? LIM_MATMUL : LIM_ELEM, build_conv, &p,
                      "%s kernel=%s input=%s s=%d,%d p=%d,%d%s", tg_op_name(c->op), cp_shape(&p, 0, s0, sizeof s0),
                      cp_shape(&p, 1, s1, sizeof s1), c->s0, c->s1, c->p0, c->p1,
                      prec == TG_PREC_TF32 ? " tf32" : "");
    }
}
