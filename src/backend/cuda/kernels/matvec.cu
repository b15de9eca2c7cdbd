/*
 * matvec.cu: matrix products with few columns (the decoder's step: one
 * token per batch row: M columns, a few or, as tiles, up to a few dozen)
 * against BF16 weights:
 * out[n, m] = alpha sum_k W[k, n] x[k, m] (+ bias[n]) (relu) (+ res[n, m]),
 * the last the residual add that follows a decoder layer's output products.
 *
 * A step's products read each weight once for 1 to 16 columns: the work is
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
 * (F32).
 *
 * mul_mat_vec_mma (below) takes 1 to TG_MVM_MAXM columns at default
 * precision (the host's choice wherever the GPU has BF16 mma): x rounded to
 * BF16 as cuBLASLt's products do, the sums on the tensor cores; the kernel
 * above then serves F32-precision requests; with args.kv it also writes
 * the k and v rows of a packed q/k/v product into the cache (the set_rows
 * after it, fused: one launch fewer a layer); more columns (a decoder step
 * at batch 17-64) as tiles of 16, a block each, where the host asks
 * (CT_CUDA_MATVEC_MMA_MAX). Not here: products of many columns (cuBLASLt,
 * cuda_matmul.c), other weight types.
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

/* ------------------------------------------------------ mul_mat_vec_mma
 * 1 to 16 columns (a decoder step at batch 1-16), and more as tiles of 16
 * (below). cuBLASLt ran these on
 * 16-64 blocks of a 132-SM GPU (H200, batch 8: ~6 us for a 2 MB matrix,
 * 0.4 TB/s), and the F32 kernel above loses at 8 columns (its FMAs, not
 * its loads, set the time). Here the product is transposed onto mma.sync
 * m16n8k16: A = the columns of x (16 rows, those past M zero) by 16 k, B =
 * 8 weight rows by 16 k, so a warp's step of 32 k is one 16-byte weight
 * load a lane, one or two 16-byte loads of x and two mma. The order of k
 * inside a step is permuted the same way for A and B (lane (g, t) holds
 * k 8t..8t+7 of row g: the first mma takes 8t..8t+3, the second the rest),
 * which leaves every dot product the same sum.
 *
 * A block owns MVM_NT x 8 output rows; its warps split K (32 x 4 k a warp
 * and a round of loads at K = 1024 with 8 warps) and are summed through
 * shared memory, then bias, relu, alpha and the residual are applied as in
 * mul_mat_vec. With args.ln the block first layer-norms x's columns (a
 * warp a column, three passes over L2) into shared memory as BF16. */
#define MVM_NT (TG_MVM_ROWS / 8) /* 8-row weight tiles a block */
#define MVM_U 4  /* 32-k steps a warp loads at once */

/* x's 8 values k0..k0+7 of column m as four BF16 pairs (zeros past M). */
__device__ __forceinline__ uint4 mvm_x8(const tg_args_mul_mat_vec &args, const unsigned short *xs, int m, int k0) {
    if (m >= args.m) return make_uint4(0u, 0u, 0u, 0u);
    if (args.ln) return *(const uint4 *)(xs + m * ((int)args.k + 8) + k0);
    if (args.x_bf16) return __ldg((const uint4 *)(args.x + m * args.ldx) + k0 / 8);
    const float4 *p = (const float4 *)(args.x + m * args.ldx) + k0 / 4;
    float4 a = __ldg(p), b = __ldg(p + 1);
    return make_uint4(tg_pack_bf16(a.x, a.y), tg_pack_bf16(a.z, a.w), tg_pack_bf16(b.x, b.y), tg_pack_bf16(b.z, b.w));
}

/* args.ln: each column of x (F32) layer-normed into xs as BF16, rows of
 * K + 8 (the 16-byte fragment loads meet two-way bank conflicts: a pad of
 * 32 would remove them; not measured); a warp a
 * column: mean, then the variance of the centred values, as norm.cu. */
__device__ __forceinline__ void mvm_norm_columns(const tg_args_mul_mat_vec &args, unsigned short *xs) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5, K = (int)args.k;
    for (int m = warp; m < args.m; m += nw) {
        const float4 *xc = (const float4 *)(args.x + m * args.ldx);
        float s = 0.0f;
        for (int i = lane; i < K / 4; i += 32) {
            float4 v = xc[i];
            s += (v.x + v.y) + (v.z + v.w);
        }
        const float mean = tg_warp_sum(s) / (float)K;
        float q = 0.0f;
        for (int i = lane; i < K / 4; i += 32) {
            float4 v = xc[i];
            float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
            q += (a * a + b * b) + (c * c + d * d);
        }
        const float rstd = rsqrtf(tg_warp_sum(q) / (float)K + args.ln_eps);
        unsigned short *row = xs + m * (K + 8);
        for (int i = lane; i < K / 4; i += 32) {
            float4 v = xc[i];
            float y[4] = {(v.x - mean) * rstd, (v.y - mean) * rstd, (v.z - mean) * rstd, (v.w - mean) * rstd};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                if (args.ln_w) y[e] *= args.ln_w[4 * i + e];
                if (args.ln_b) y[e] += args.ln_b[4 * i + e];
            }
            *(uint2 *)(row + 4 * i) = make_uint2(tg_pack_bf16(y[0], y[1]), tg_pack_bf16(y[2], y[3]));
        }
    }
    __syncthreads();
}

/* args.kv: output (n, column mg) into the cache too, as set_rows would
 * store it (kargs.cuh). */
__device__ __forceinline__ void mv_kv_store(const tg_args_mul_mat_vec &args, i64 mg, i64 n, float r) {
    const i64 q = n - args.kv_n0;
    if (q < 0 || q >= (i64)args.kv_heads * args.kv_hd) return;
    const i64 j = q / args.kv_hd, e = q - j * args.kv_hd;
    const i64 id = *(const int *)(args.kv_ids + j * args.ids_nb1 + mg * args.ids_nb2);
    if (id < 0 || id >= args.kv_t) return;
    tg_st(args.kv + e * (args.kv_type == TG_KT_F32 ? 4 : 2) + id * args.kv_nb1 + j * args.kv_nb2 + mg * args.kv_nb3,
          args.kv_type, r);
}

extern "C" __global__ void __launch_bounds__(512) mul_mat_vec_mma(const tg_args_mul_mat_vec full) {
#if TG_CC >= 80
    extern __shared__ __align__(16) unsigned short mvm_xs[]; /* ln's columns; then the warps' sums */
    /* More than TG_MVM_MAXM columns come as tiles of that many, the tiles
     * of one block of rows next to each other in the grid (blockIdx.x =
     * row block * tiles + tile) so that they read its weights while L2
     * still holds them; args is this block's tile of x, out and res. */
    const int tiles = (full.m + TG_MVM_MAXM - 1) / TG_MVM_MAXM, tile = (int)(blockIdx.x % (unsigned)tiles);
    tg_args_mul_mat_vec args = full;
    args.x += (i64)tile * TG_MVM_MAXM * full.ldx;
    args.out += (i64)tile * TG_MVM_MAXM * full.ldo;
    if (full.res) args.res += (i64)tile * TG_MVM_MAXM * full.ldr;
    args.m = full.m - tile * TG_MVM_MAXM < TG_MVM_MAXM ? full.m - tile * TG_MVM_MAXM : TG_MVM_MAXM;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int g = lane >> 2, t = lane & 3, K = (int)args.k, S = K / 32;
    const i64 n0 = (i64)(blockIdx.x / (unsigned)tiles) * (8 * MVM_NT);
    const int per = (S + nw - 1) / nw, s0 = warp * per, s1 = s0 + per < S ? s0 + per : S;
    const char *wr[MVM_NT];
#pragma unroll
    for (int j = 0; j < MVM_NT; j++) {
        const i64 r = n0 + 8 * j + g < args.n ? n0 + 8 * j + g : args.n - 1;
        wr[j] = args.w + r * args.lda + 16 * t;
    }
    uint4 wv[MVM_U][MVM_NT];
#define MVM_LOAD_W(sb)                                                                                      \
    _Pragma("unroll") for (int u = 0; u < MVM_U; u++) _Pragma("unroll") for (int j = 0; j < MVM_NT; j++) \
        wv[u][j] = (sb) + u < s1 ? __ldg((const uint4 *)(wr[j] + (i64)((sb) + u) * 64)) : make_uint4(0u, 0u, 0u, 0u)
    /* a weight's first round goes out before the wait for the previous
     * kernel (args.w_early, as in mul_mat_vec) */
    if (args.w_early) MVM_LOAD_W(s0);
    TG_PDL();
    if (!args.w_early) MVM_LOAD_W(s0);
    if (args.ln) mvm_norm_columns(args, mvm_xs);
    float c[MVM_NT][4];
#pragma unroll
    for (int j = 0; j < MVM_NT; j++) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.0f;
    for (int sb = s0; sb < s1; sb += MVM_U) {
        if (sb != s0) MVM_LOAD_W(sb);
        uint4 xa[MVM_U], xb[MVM_U];
#pragma unroll
        for (int u = 0; u < MVM_U; u++) {
            const int k0 = 32 * (sb + u < s1 ? sb + u : s0) + 8 * t;
            xa[u] = mvm_x8(args, mvm_xs, g, k0);
            xb[u] = mvm_x8(args, mvm_xs, g + 8, k0);
        }
#pragma unroll
        for (int u = 0; u < MVM_U; u++) {
            if (sb + u >= s1) break;
            const unsigned a0[4] = {xa[u].x, xb[u].x, xa[u].y, xb[u].y};
            const unsigned a1[4] = {xa[u].z, xb[u].z, xa[u].w, xb[u].w};
#pragma unroll
            for (int j = 0; j < MVM_NT; j++) {
                tg_mma_bf16(c[j], a0, wv[u][j].x, wv[u][j].y);
                tg_mma_bf16(c[j], a1, wv[u][j].z, wv[u][j].w);
            }
        }
    }
#undef MVM_LOAD_W
    /* the warps' partial sums, then one thread an output */
    float *red = (float *)mvm_xs; /* [nw][MVM_NT][32][4] */
    if (args.ln) __syncthreads(); /* every warp is done with the columns */
#pragma unroll
    for (int j = 0; j < MVM_NT; j++)
        *(float4 *)(red + ((warp * MVM_NT + j) * 32 + lane) * 4) = make_float4(c[j][0], c[j][1], c[j][2], c[j][3]);
    __syncthreads();
    for (int o = threadIdx.x; o < MVM_NT * 128; o += blockDim.x) {
        const int j = o >> 7, ln = (o >> 2) & 31, e = o & 3;
        float sum = 0.0f;
        for (int w = 0; w < nw; w++) sum += red[((w * MVM_NT + j) * 32 + ln) * 4 + e];
        const int m = (ln >> 2) + ((e & 2) ? 8 : 0);
        const i64 n = n0 + 8 * j + 2 * (ln & 3) + (e & 1);
        if (m >= args.m || n >= args.n) continue;
        float r = args.alpha * sum + (args.bias ? args.bias[n] : 0.0f);
        if (args.relu) r = fmaxf(r, 0.0f);
        if (args.res) r += *(const float *)(args.res + m * args.ldr + n * 4);
        *(float *)(args.out + m * args.ldo + n * 4) = r;
        if (args.kv) mv_kv_store(args, (i64)tile * TG_MVM_MAXM + m, n, r);
    }
#endif
}
