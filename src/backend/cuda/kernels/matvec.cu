/*
 * matvec.cu: matrix products with few columns (the decoder's step: one
 * token per batch row, M <= TG_MV_MAXM columns) against BF16 weights:
 * out[n, m] = alpha sum_k W[k, n] x[k, m] (+ bias[n]) (relu) (+ res[n, m]),
 * the last the residual add that follows a decoder layer's output products.
 *
 * A step's products read each weight once for 1 to 8 columns: the work is
 * the weight bytes, and cuBLASLt spent ~10 us a call on them (65 calls a
 * step) where a 2 MB matrix takes ~0.5 us at the copy rate. Here a warp
 * owns one output row: its lanes stream the row's K weights 8 at a time
 * (16-byte loads, several in flight), multiply by the M columns of x (F32,
 * or BF16 when the producer stored them so for the product, the emit
 * fusion), reduce across the warp and add the bias. Every sum is F32, so
 * a TG_PREC_F32 request is met (the weights are exact in F32).
 *
 * The layer norm before such a product can come in too (args.ln): every
 * block normalises x's columns into shared memory first (K * M floats, a
 * few KB, read from L2 by every block), which costs less than the norm's
 * own launch at a decoder step (25 of them a step at 8 layers).
 *
 * Layouts: W rows of K BF16 at byte stride lda (16-byte aligned, K % 8 ==
 * 0); x column m at x + m * ldx bytes; out column m at out + m * ldo bytes
 * (F32). Not here: more columns (cuBLASLt, cuda_matmul.c), other weight types.
 */
#include "common.cuh"

#define MV_WARPS 8
#define MV_U 8 /* 16-byte weight loads a lane issues at once */

__device__ __forceinline__ void mv_unpack(uint4 w, float f[8]) {
    f[0] = __uint_as_float(w.x << 16), f[1] = __uint_as_float(w.x & 0xffff0000u);
    f[2] = __uint_as_float(w.y << 16), f[3] = __uint_as_float(w.y & 0xffff0000u);
    f[4] = __uint_as_float(w.z << 16), f[5] = __uint_as_float(w.z & 0xffff0000u);
    f[6] = __uint_as_float(w.w << 16), f[7] = __uint_as_float(w.w & 0xffff0000u);
}

/* The layer norm of x's M columns (K floats each, F32) into xs, K * M
 * floats: mean, then the variance of the centred values, as norm.cu does. */
__device__ __forceinline__ void mv_norm_columns(const tg_args_mul_mat_vec &args, float *xs) {
    __shared__ float sh[32];
    const int K = (int)args.k;
    for (int m = 0; m < args.m; m++) {
        const float *xc = (const float *)(args.x + m * args.ldx);
        float s = 0.0f;
        for (int k = threadIdx.x; k < K; k += blockDim.x) s += xc[k];
        const float mean = tg_block_sum(s, sh) / (float)K;
        float v = 0.0f;
        for (int k = threadIdx.x; k < K; k += blockDim.x) {
            float c = xc[k] - mean;
            v += c * c;
        }
        const float rstd = rsqrtf(tg_block_sum(v, sh) / (float)K + args.ln_eps);
        for (int k = threadIdx.x; k < K; k += blockDim.x) {
            float y = (xc[k] - mean) * rstd;
            if (args.ln_w) y *= args.ln_w[k];
            if (args.ln_b) y += args.ln_b[k];
            xs[m * K + k] = y;
        }
    }
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(MV_WARPS * 32) mul_mat_vec(const tg_args_mul_mat_vec args) {
    extern __shared__ __align__(16) float mv_xs[];
    const int lane = threadIdx.x & 31;
    const i64 n = (i64)blockIdx.x * MV_WARPS + (threadIdx.x >> 5);
    const bool live = n < args.n;
    const int K8 = (int)(args.k / 8), M = args.m;
    const uint4 *w = (const uint4 *)(args.w + (live ? n : 0) * args.lda);
    /* For a weight (no kernel writes one: args.w_early) the first round of
     * loads goes out before the wait for the previous kernel, so it is in
     * flight while that finishes and while the norm below runs; at K = 1024
     * that round is the whole row. Any other w is loaded after the wait. */
    uint4 wv[MV_U];
    if (args.w_early) {
#pragma unroll
        for (int u = 0; u < MV_U; u++) {
            const int i = lane + 32 * u;
            wv[u] = live && i < K8 ? __ldg(w + i) : make_uint4(0u, 0u, 0u, 0u);
        }
    }
    TG_PDL();
    if (!args.w_early) {
#pragma unroll
        for (int u = 0; u < MV_U; u++) {
            const int i = lane + 32 * u;
            wv[u] = live && i < K8 ? __ldg(w + i) : make_uint4(0u, 0u, 0u, 0u);
        }
    }
    if (args.ln) mv_norm_columns(args, mv_xs);
    if (!live) return;
    float acc[TG_MV_MAXM];
#pragma unroll
    for (int m = 0; m < TG_MV_MAXM; m++) acc[m] = 0.0f;
    for (int i0 = lane; i0 < K8; i0 += 32 * MV_U) {
        if (i0 != lane) {
            /* MV_U weight loads a lane in flight before any is used */
#pragma unroll
            for (int u = 0; u < MV_U; u++) {
                const int i = i0 + 32 * u;
                wv[u] = i < K8 ? __ldg(w + i) : make_uint4(0u, 0u, 0u, 0u);
            }
        }
#pragma unroll
        for (int u = 0; u < MV_U; u++) {
            const int i = i0 + 32 * u;
            if (i >= K8) break;
            float wf[8];
            mv_unpack(wv[u], wf);
#pragma unroll
            for (int m = 0; m < TG_MV_MAXM; m++) {
                if (m >= M) break;
                float xf[8];
                if (args.ln) {
                    const float4 *xp = (const float4 *)(mv_xs + m * (i64)args.k) + 2 * i;
                    float4 a = xp[0], b = xp[1];
                    xf[0] = a.x, xf[1] = a.y, xf[2] = a.z, xf[3] = a.w;
                    xf[4] = b.x, xf[5] = b.y, xf[6] = b.z, xf[7] = b.w;
                } else if (args.x_bf16) {
                    mv_unpack(__ldg((const uint4 *)(args.x + m * args.ldx) + i), xf);
                } else {
                    const float4 *xp = (const float4 *)(args.x + m * args.ldx) + 2 * (i64)i;
                    float4 a = __ldg(xp), b = __ldg(xp + 1);
                    xf[0] = a.x, xf[1] = a.y, xf[2] = a.z, xf[3] = a.w;
                    xf[4] = b.x, xf[5] = b.y, xf[6] = b.z, xf[7] = b.w;
                }
                float s = acc[m];
#pragma unroll
                for (int e = 0; e < 8; e++) s = fmaf(wf[e], xf[e], s);
                acc[m] = s;
            }
        }
    }
    const float bias = args.bias ? args.bias[n] : 0.0f;
#pragma unroll
    for (int m = 0; m < TG_MV_MAXM; m++) {
        if (m >= M) break;
        float r = args.alpha * tg_warp_sum(acc[m]) + bias;
        if (args.relu) r = fmaxf(r, 0.0f);
        /* the residual: read and written by the same lane, so res may be out */
        if (args.res && lane == 0) r += *(const float *)(args.res + m * args.ldr + n * 4);
        if (lane == 0) *(float *)(args.out + m * args.ldo + n * 4) = r;
    }
}
