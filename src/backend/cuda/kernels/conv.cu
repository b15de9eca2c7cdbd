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
 * The subsampling's first conv (one input channel, 3x3) has its own kernel,
 * conv_2d_c1_3x3, which reads each input window once for a tile of output
 * channels; the 1x1 convs run as cuBLASLt products (cuda_ops.c), no kernel.
 *
 * The depthwise convs have direct kernels for any strides and types and,
 * for the model's contiguous F32 shapes, conv_2d_dw_3x3 (32-bit indexing,
 * a plane per grid row) and conv_1d_dw_c4 (a float4 of channels times a
 * run of output steps per thread).
 *
 * conv_glu_dw_silu_c4 is the conv module's middle in one kernel: GLU,
 * depthwise conv, bias and SiLU (cuda_ops.c fuses the four nodes into it);
 * sub_conv_dw the subsampling's first conv and depthwise conv with their
 * biases, masks and relu (seven nodes).
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

/* One input channel, 3x3 (the subsampling's first conv; cuda_ops.c takes it
 * when every tensor is F32). Grid (ceil(OW*OH / 256), ceil(Cout /
 * TG_CONV_C1_TILE), N), 256 threads: a thread takes one output pixel (adjacent
 * threads adjacent pixels, so each channel's store is coalesced where the
 * result's pixels are contiguous), loads its 3x3 window once and writes that
 * pixel for the block's TG_CONV_C1_TILE channels, whose weights sit in shared
 * memory (every thread of a warp reads the same word: a broadcast).
 * The floor (NOTES.md) is the result's write: Cout floats per pixel against
 * 9 input reads shared by all channels. Taps in the padding multiply a zero,
 * as the CPU's im2col does. */
extern "C" __global__ void __launch_bounds__(256) conv_2d_c1_3x3(const tg_args_conv_2d_c1_3x3 a) {
    __shared__ float w[TG_CONV_C1_TILE * 9];
    TG_PDL();
    const i64 cout = a.o.ne[2], co0 = (i64)blockIdx.y * TG_CONV_C1_TILE;
    const int nc = (int)(cout - co0 < TG_CONV_C1_TILE ? cout - co0 : TG_CONV_C1_TILE);
    for (int i = threadIdx.x; i < nc * 9; i += blockDim.x) {
        int c = i / 9, t = i % 9; /* t = ky * 3 + kx */
        w[i] = *(const float *)(a.k.p + tg_off(a.k, t % 3, t / 3, 0, co0 + c));
    }
    __syncthreads();
    const i64 OW = a.o.ne[0], OH = a.o.ne[1], b = blockIdx.z;
    const i64 pix = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (pix >= OW * OH) return;
    const i64 ox = pix % OW, oy = pix / OW;
    float x[9];
#pragma unroll
    for (int ky = 0; ky < 3; ky++) {
        const i64 iy = oy * a.s1 - a.p1 + ky;
#pragma unroll
        for (int kx = 0; kx < 3; kx++) {
            const i64 ix = ox * a.s0 - a.p0 + kx;
            const bool in = iy >= 0 && iy < a.x.ne[1] && ix >= 0 && ix < a.x.ne[0];
            x[ky * 3 + kx] = in ? *(const float *)(a.x.p + tg_off(a.x, ix, iy, 0, b)) : 0.0f;
        }
    }
    char *dst = a.o.p + tg_off(a.o, ox, oy, co0, b);
#pragma unroll 4
    for (int c = 0; c < nc; c++) {
        const float *wc = w + c * 9;
        float s = 0.0f;
#pragma unroll
        for (int t = 0; t < 9; t++) s += wc[t] * x[t];
        *(float *)(dst + c * a.o.nb[2]) = s;
    }
}

/* The subsampling's first two convs (spec 2.1) in one pass, for a result
 * of ow x oh pixels and c channels:
 *   o = m2 (b1 + sum_{ky,kx} k1(kx, ky) v(2 ox - 1 + kx, 2 oy - 1 + ky)),
 *   v = relu(m1 (b0 + sum_{ty,tx} k0(tx, ty) x(2 X - 1 + tx, 2 Y - 1 + ty))),
 * v being conv0's result at (X, Y) (taps outside it skipped), x's taps
 * outside the input read as zeros. The same arithmetic in the same order as
 * conv_2d_c1_3x3, ew_bias_mask_c4, conv_2d_dw_3x3 and ew_bias_mask_c4 one
 * after another, which it replaces (cuda_fusion.c: sub_front_fuse_len):
 * conv0's result is the encoder's largest tensor (115 MB a 35 s row) and
 * those kernels wrote it twice and read it twice. Each output recomputes
 * the nine conv0 values under its taps (81 multiply-adds a channel, about
 * four times the unfused count), which at the model's sizes costs less
 * than those bytes. Grid (ceil(ow oh / 256), ceil(c / TG_SUB_TILE), N),
 * 256 threads: a thread takes one output pixel, loads its 7 x 7 input
 * window once, and writes that pixel for the block's channels, whose
 * parameters sit in shared memory (a broadcast: every thread of a warp
 * reads the same word). */
extern "C" __global__ void __launch_bounds__(256) sub_conv_dw(const tg_args_sub_conv_dw a) {
    __shared__ float w[TG_SUB_TILE * 20]; /* per channel: k0[9], b0, k1[9], b1 */
    TG_PDL();
    const int co0 = blockIdx.y * TG_SUB_TILE, nc = a.c - co0 < TG_SUB_TILE ? a.c - co0 : TG_SUB_TILE;
    for (int i = threadIdx.x; i < nc * 20; i += blockDim.x) {
        const int ch = co0 + i / 20, r = i % 20;
        w[i] = r < 9 ? a.k0[ch * 9 + r] : r == 9 ? a.b0[ch] : r < 19 ? a.k1[ch * 9 + r - 10] : a.b1[ch];
    }
    __syncthreads();
    const int pix = blockIdx.x * blockDim.x + threadIdx.x;
    if (pix >= a.ow * a.oh) return;
    const int ox = pix % a.ow, oy = pix / a.ow, b = blockIdx.z;
    const float *xb = a.x + (i64)b * a.w0 * a.h0;
    float xw[7][7];
#pragma unroll
    for (int r = 0; r < 7; r++) {
        const int iy = 4 * oy - 3 + r;
#pragma unroll
        for (int q = 0; q < 7; q++) {
            const int ix = 4 * ox - 3 + q;
            xw[r][q] = iy >= 0 && iy < a.h0 && ix >= 0 && ix < a.w0 ? xb[iy * a.w0 + ix] : 0.0f;
        }
    }
    bool vy[3], vx[3];
    float m1[3];
#pragma unroll
    for (int k = 0; k < 3; k++) {
        const int y1 = 2 * oy - 1 + k, x1 = 2 * ox - 1 + k;
        vy[k] = y1 >= 0 && y1 < a.h1;
        vx[k] = x1 >= 0 && x1 < a.w1;
        m1[k] = vy[k] && a.has_m1 ? *(const float *)(a.m1.p + tg_off_bc(a.m1, 0, y1, 0, b)) : 1.0f;
    }
    const float m2 = a.has_m2 ? *(const float *)(a.m2.p + tg_off_bc(a.m2, 0, oy, 0, b)) : 1.0f;
    float *dst = a.o + ((i64)b * a.c + co0) * a.ow * a.oh + pix;
    for (int cc = 0; cc < nc; cc++) {
        const float *wc = w + cc * 20;
        float acc = 0.0f;
#pragma unroll
        for (int ky = 0; ky < 3; ky++) {
            if (!vy[ky]) continue;
#pragma unroll
            for (int kx = 0; kx < 3; kx++) {
                if (!vx[kx]) continue;
                float s = 0.0f;
#pragma unroll
                for (int t = 0; t < 9; t++) s += wc[t] * xw[2 * ky + t / 3][2 * kx + t % 3];
                const float v = (s + wc[9]) * m1[ky];
                acc += wc[10 + ky * 3 + kx] * (v > 0.0f ? v : 0.0f);
            }
        }
        dst[(i64)cc * a.ow * a.oh] = (acc + wc[19]) * m2;
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

/* Depthwise 3x3 over contiguous F32 planes (the subsampling's two depthwise
 * convs; cuda_ops.c takes it when it applies). Grid (ceil(OW*OH / 256), C,
 * N), 256 threads, 32-bit index math: a thread takes one output pixel of
 * plane (c, b), adjacent threads adjacent pixels; the plane's 9 weights are
 * the same word for the whole block. Taps outside the input are skipped,
 * and the sum runs in the direct kernel's order (ky, then kx). */
extern "C" __global__ void __launch_bounds__(256) conv_2d_dw_3x3(const tg_args_conv_2d_dw_3x3 a) {
    TG_PDL();
    const int pix = blockIdx.x * blockDim.x + threadIdx.x;
    if (pix >= a.ow * a.oh) return;
    const int ox = pix % a.ow, oy = pix / a.ow, c = blockIdx.y;
    const i64 plane = (i64)blockIdx.z * gridDim.y + c;
    const float *src = a.in + plane * a.w * a.h, *wc = a.kr + c * 9;
    float s = 0.0f;
#pragma unroll
    for (int ky = 0; ky < 3; ky++) {
        const int iy = oy * a.s1 - a.p1 + ky;
        if (iy < 0 || iy >= a.h) continue;
#pragma unroll
        for (int kx = 0; kx < 3; kx++) {
            const int ix = ox * a.s0 - a.p0 + kx;
            if (ix < 0 || ix >= a.w) continue;
            s += wc[ky * 3 + kx] * src[iy * a.w + ix];
        }
    }
    a.o[plane * a.ow * a.oh + pix] = s;
}

/* Depthwise 1-D, stride 1, contiguous F32 with channels a multiple of 4
 * (the conv module's depthwise conv). Grid (ceil(c4 / 64), ceil(ot /
 * TG_DW1_TT), batch), 64 threads: a thread takes 4 adjacent channels (one
 * float4, so a warp's loads and stores are 512 contiguous bytes) for
 * TG_DW1_TT consecutive output steps; the inputs they share are re-read from
 * L1. Each output sums its taps in order k = 0..K-1, skipping taps outside
 * the input, as the direct kernel does. */
extern "C" __global__ void __launch_bounds__(64) conv_1d_dw_c4(const tg_args_conv_1d_dw_c4 a) {
    TG_PDL();
    const int c4 = blockIdx.x * blockDim.x + threadIdx.x;
    if (c4 >= a.c4) return;
    const int t0 = blockIdx.y * TG_DW1_TT, K = a.k;
    const float4 *src = a.in + (i64)blockIdx.z * a.t * a.c4 + c4;
    float4 *dst = a.o + (i64)blockIdx.z * a.ot * a.c4 + c4;
    const float *w0 = a.kr + (i64)(4 * c4) * K;
    float4 acc[TG_DW1_TT];
#pragma unroll
    for (int j = 0; j < TG_DW1_TT; j++) acc[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int k = 0; k < K; k++) {
        const float wx = w0[k], wy = w0[K + k], wz = w0[2 * K + k], ww = w0[3 * K + k];
#pragma unroll
        for (int j = 0; j < TG_DW1_TT; j++) {
            const int it = t0 + j - a.p + k;
            if (it < 0 || it >= a.t) continue;
            const float4 x = src[(i64)it * a.c4];
            acc[j].x += wx * x.x;
            acc[j].y += wy * x.y;
            acc[j].z += wz * x.z;
            acc[j].w += ww * x.w;
        }
    }
#pragma unroll
    for (int j = 0; j < TG_DW1_TT; j++)
        if (t0 + j < a.ot) dst[(i64)(t0 + j) * a.c4] = acc[j];
}

/* The conv module's middle (spec 2.5) in one pass, for the encoder: GLU
 * over a's channels, the depthwise conv (stride 1), its bias and SiLU:
 * out[c, t] = silu(bias[c] + sum_k w[k, c] glu[c, t - p + k]) with
 * glu[c, t] = a[c, t] sigmoid(a[c + C, t]); a [2C, T, batch] and out
 * [C, OT, batch] contiguous, out F32 or, for the product that reads it,
 * BF16/F16 (TG_OUT16); a read BF16 (a.in16) where the product before
 * stored it so for this kernel, with that product's bias (a.pre) added
 * here where it left it (CT_CUDA_EMIT_DEFER: cuBLASLt on an H100 has no
 * BF16 result with an F32 bias). Grid and threads as conv_1d_dw_c4; a thread's window
 * of TG_DW1_TT + K - 1 steps (K <= TG_DW1_KMAX) is GLU'd once into
 * registers. The same arithmetic, in the same order, as the glu,
 * conv_1d_dw_c4, add and silu kernels one after another (a tap outside
 * the input adds w * 0), which it replaces: 7 of their 9.5 passes over a
 * [C, T] tensor, and three launches a layer; except that with a.fast (the
 * host's default, CT_CUDA_CONV_FAST) its three sigmoids an output take
 * the approximate exp and divide (cg_gate): a batch-64 profile had the
 * kernel at 0.27 ms a layer where its bytes take ~0.1. */
/* x / (1 + e^-y): the GLU's gated half (x sigmoid(y)) and SiLU (y = x);
 * fast: __expf and __fdividef, a few ulp from expf and the IEEE divide
 * (0 where 1 + e^-y passes 2^126, as x / that is below F32's normal range
 * anyway), at a fraction of their instructions. */
__device__ __forceinline__ float cg_gate(float x, float y, bool fast) {
    return fast ? __fdividef(x, 1.0f + __expf(-y)) : x / (1.0f + expf(-y));
}

extern "C" __global__ void __launch_bounds__(64) conv_glu_dw_silu_c4(const tg_args_conv_glu_dw_silu_c4 a) {
    TG_PDL();
    const int c4 = blockIdx.x * blockDim.x + threadIdx.x;
    if (c4 >= a.c4) return;
    const int t0 = blockIdx.y * TG_DW1_TT, K = a.k;
    const bool fast = a.fast != 0;
    const i64 base = (i64)blockIdx.z * a.t * (2 * a.c4) + c4;
    const float4 *src = a.in + base;
    const ushort4 *src16 = (const ushort4 *)a.in + base;
    /* the product's bias, where it left it to this kernel */
    const float4 px = a.pre ? ((const float4 *)a.pre)[c4] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float4 py = a.pre ? ((const float4 *)a.pre)[a.c4 + c4] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float4 win[TG_DW1_TT + TG_DW1_KMAX - 1];
#pragma unroll
    for (int i = 0; i < TG_DW1_TT + TG_DW1_KMAX - 1; i++) {
        const int it = t0 - a.p + i;
        float4 g = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (i < TG_DW1_TT + K - 1 && it >= 0 && it < a.t) {
            float4 x, y;
            if (a.in16) {
                const ushort4 u = src16[(i64)it * 2 * a.c4], v = src16[(i64)it * 2 * a.c4 + a.c4];
                x = make_float4(tg_bf2f(u.x) + px.x, tg_bf2f(u.y) + px.y, tg_bf2f(u.z) + px.z, tg_bf2f(u.w) + px.w);
                y = make_float4(tg_bf2f(v.x) + py.x, tg_bf2f(v.y) + py.y, tg_bf2f(v.z) + py.z, tg_bf2f(v.w) + py.w);
            } else {
                x = src[(i64)it * 2 * a.c4], y = src[(i64)it * 2 * a.c4 + a.c4];
            }
            g.x = cg_gate(x.x, y.x, fast);
            g.y = cg_gate(x.y, y.y, fast);
            g.z = cg_gate(x.z, y.z, fast);
            g.w = cg_gate(x.w, y.w, fast);
        }
        win[i] = g;
    }
    const float *w0 = a.kr + (i64)(4 * c4) * K;
    float4 acc[TG_DW1_TT];
#pragma unroll
    for (int j = 0; j < TG_DW1_TT; j++) acc[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int k = 0; k < TG_DW1_KMAX; k++) {
        if (k >= K) break;
        const float wx = w0[k], wy = w0[K + k], wz = w0[2 * K + k], ww = w0[3 * K + k];
#pragma unroll
        for (int j = 0; j < TG_DW1_TT; j++) {
            const float4 x = win[j + k];
            acc[j].x += wx * x.x;
            acc[j].y += wy * x.y;
            acc[j].z += wz * x.z;
            acc[j].w += ww * x.w;
        }
    }
    const float4 bias = ((const float4 *)a.bias)[c4];
#pragma unroll
    for (int j = 0; j < TG_DW1_TT; j++) {
        if (t0 + j >= a.ot) break;
        float4 y = make_float4(acc[j].x + bias.x, acc[j].y + bias.y, acc[j].z + bias.z, acc[j].w + bias.w);
        y.x = cg_gate(y.x, y.x, fast);
        y.y = cg_gate(y.y, y.y, fast);
        y.z = cg_gate(y.z, y.z, fast);
        y.w = cg_gate(y.w, y.w, fast);
        tg_store4(a.o, ((i64)blockIdx.z * a.ot + t0 + j) * a.c4 + c4, y);
    }
}
