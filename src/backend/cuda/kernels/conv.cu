/*
 * conv.cu: direct convolutions (PyTorch semantics, cross-correlation, zero
 * padding): 2-D with groups = 1, 2-D depthwise, 1-D depthwise along time with
 * channels innermost.
 *
 * One thread per output element, summing over the receptive field. The model
 * runs these once per clip on the subsampling front (small channel counts) and
 * in the conformer's depthwise conv, where the memory traffic, not the
 * arithmetic, decides the time.
 *
 * Not here: im2col or implicit-GEMM tensor-core convolution.
 */
#include "common.cuh"

/* kernel [KW, KH, Cin, Cout], input [W, H, Cin, N], out [OW, OH, Cout, N] */
extern "C" __global__ void conv_2d(const tg_args_conv_2d args) {
    TG_PDL();
    const tg_t &o = args.o, &kr = args.kr, &in = args.in;
    const int s0 = args.s0, s1 = args.s1, p0 = args.p0, p1 = args.p1;
    const i64 n = args.n;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 ox, oy, co, b;
        tg_unravel(o, i, ox, oy, co, b);
        float s = 0.0f;
        for (i64 ci = 0; ci < in.ne[2]; ci++) {
            for (i64 ky = 0; ky < kr.ne[1]; ky++) {
                i64 iy = oy * s1 - p1 + ky;
                if (iy < 0 || iy >= in.ne[1]) continue;
                for (i64 kx = 0; kx < kr.ne[0]; kx++) {
                    i64 ix = ox * s0 - p0 + kx;
                    if (ix < 0 || ix >= in.ne[0]) continue;
                    s += tg_ld(kr.p + tg_off(kr, kx, ky, ci, co), kr.type) *
                         tg_ld(in.p + tg_off(in, ix, iy, ci, b), in.type);
                }
            }
        }
        tg_st(o.p + tg_off(o, ox, oy, co, b), o.type, s);
    }
}

/* kernel [KW, KH, 1, C], input [W, H, C, N], out [OW, OH, C, N] */
extern "C" __global__ void conv_2d_dw(const tg_args_conv_2d_dw args) {
    TG_PDL();
    const tg_t &o = args.o, &kr = args.kr, &in = args.in;
    const int s0 = args.s0, s1 = args.s1, p0 = args.p0, p1 = args.p1;
    const i64 n = args.n;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 ox, oy, c, b;
        tg_unravel(o, i, ox, oy, c, b);
        float s = 0.0f;
        for (i64 ky = 0; ky < kr.ne[1]; ky++) {
            i64 iy = oy * s1 - p1 + ky;
            if (iy < 0 || iy >= in.ne[1]) continue;
            for (i64 kx = 0; kx < kr.ne[0]; kx++) {
                i64 ix = ox * s0 - p0 + kx;
                if (ix < 0 || ix >= in.ne[0]) continue;
                s += tg_ld(kr.p + tg_off(kr, kx, ky, 0, c), kr.type) *
                     tg_ld(in.p + tg_off(in, ix, iy, c, b), in.type);
            }
        }
        tg_st(o.p + tg_off(o, ox, oy, c, b), o.type, s);
    }
}

/* kernel [K, C], input [C, T, N], out [C, OT, N]; adjacent threads take
 * adjacent channels, so every load is coalesced. */
extern "C" __global__ void conv_1d_dw(const tg_args_conv_1d_dw args) {
    TG_PDL();
    const tg_t &o = args.o, &kr = args.kr, &in = args.in;
    const int s = args.s, p = args.p;
    const i64 n = args.n;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 c, ot, b, u;
        tg_unravel(o, i, c, ot, b, u);
        float acc = 0.0f;
        for (i64 k = 0; k < kr.ne[0]; k++) {
            i64 it = ot * s - p + k;
            if (it < 0 || it >= in.ne[1]) continue;
            acc += tg_ld(kr.p + tg_off(kr, k, c, 0, 0), kr.type) *
                   tg_ld(in.p + tg_off(in, c, it, b, u), in.type);
        }
        tg_st(o.p + tg_off(o, c, ot, b, u), o.type, acc);
    }
}
