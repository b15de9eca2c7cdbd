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
 * after it, fused: one launch fewer a layer); mul_mat_vec_mma_wide takes
 * 17 to 64 columns (a decoder step at batch 17-64) in one block, and more
 * as blocks of 64, only where CT_CUDA_MATVEC_MMA_MAX is raised past 16
 * (not the default: slower than cuBLASLt, cuda_matvec.c). Not here:
 * products of many columns (cuBLASLt,
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
 * 1 to 16 columns (a decoder step at batch 1-16); 17 to 64 in the wide
 * kernel's block (below). cuBLASLt ran these on
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

/* One column (m = 1, K % 128 == 0, K / 4 no more than the block's threads)
 * normed by the whole block (TG_MV_NORM_BLOCK): a thread one float4 of x
 * and of the norm's parameters, all loaded at once, the sums over the block
 * through shared memory (its warps' partials added in order by every
 * thread), mean then the variance of the centred values as above. The
 * warp-a-column norms leave all but one warp idle at one column and walk
 * x three times, eight loads a lane each (a decoder step at batch 1: the
 * products with the norm inside took ~2.3 us longer than those without). */
__device__ __forceinline__ void mvm_norm_column_block(const tg_args_mul_mat_vec &args, unsigned short *xs) {
    __shared__ float nb_sum[32], nb_sq[32];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5, K = (int)args.k;
    const bool mine = tid < K / 4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float w[4] = {1.0f, 1.0f, 1.0f, 1.0f}, b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (mine) {
        v = ((const float4 *)args.x)[tid];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            if (args.ln_w) w[e] = args.ln_w[4 * tid + e];
            if (args.ln_b) b[e] = args.ln_b[4 * tid + e];
        }
    }
    float s = tg_warp_sum((v.x + v.y) + (v.z + v.w));
    if (lane == 0) nb_sum[warp] = s;
    __syncthreads();
    s = 0.0f;
    for (int i = 0; i < nw; i++) s += nb_sum[i];
    const float mean = s / (float)K;
    const float y[4] = {v.x - mean, v.y - mean, v.z - mean, v.w - mean};
    float q = mine ? (y[0] * y[0] + y[1] * y[1]) + (y[2] * y[2] + y[3] * y[3]) : 0.0f;
    q = tg_warp_sum(q);
    if (lane == 0) nb_sq[warp] = q;
    __syncthreads();
    q = 0.0f;
    for (int i = 0; i < nw; i++) q += nb_sq[i];
    const float rstd = rsqrtf(q / (float)K + args.ln_eps);
    if (mine)
        *(uint2 *)(xs + 4 * tid) = make_uint2(tg_pack_bf16(y[0] * rstd * w[0] + b[0], y[1] * rstd * w[1] + b[1]),
                                              tg_pack_bf16(y[2] * rstd * w[2] + b[2], y[3] * rstd * w[3] + b[3]));
    __syncthreads();
}

/* The same norm from one read of each column (its K / 4 float4 in a lane's
 * registers, K % 128 == 0 and K <= 1024): always for the wide kernel,
 * whose blocks each read all their columns from L2 (64 columns of K = 1024
 * are 256 KB a block), and for the one-tile kernel where the host asks
 * (TG_MV_NORM1: from two columns on). Same sums in the same order as
 * above; the last loop repeats the one above it over registers. */
__device__ __forceinline__ void mvm_norm_columns_1pass(const tg_args_mul_mat_vec &args, unsigned short *xs) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5, K = (int)args.k;
    const int n4 = K / 128; /* float4 a lane */
    for (int m = warp; m < args.m; m += nw) {
        const float4 *xc = (const float4 *)(args.x + m * args.ldx);
        float4 v[8];
#pragma unroll
        for (int u = 0; u < 8; u++)
            if (u < n4) v[u] = xc[lane + 32 * u];
        float s = 0.0f;
#pragma unroll
        for (int u = 0; u < 8; u++)
            if (u < n4) s += (v[u].x + v[u].y) + (v[u].z + v[u].w);
        const float mean = tg_warp_sum(s) / (float)K;
        float q = 0.0f;
#pragma unroll
        for (int u = 0; u < 8; u++) {
            if (u >= n4) break;
            float a = v[u].x - mean, b = v[u].y - mean, c = v[u].z - mean, d = v[u].w - mean;
            q += (a * a + b * b) + (c * c + d * d);
        }
        const float rstd = rsqrtf(tg_warp_sum(q) / (float)K + args.ln_eps);
        unsigned short *row = xs + m * (K + 8);
#pragma unroll
        for (int u = 0; u < 8; u++) {
            if (u >= n4) break;
            const int i = lane + 32 * u;
            float y[4] = {(v[u].x - mean) * rstd, (v[u].y - mean) * rstd, (v[u].z - mean) * rstd,
                          (v[u].w - mean) * rstd};
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

/* The lines of bias[n0 .. n0 + rows) and of the norm's ln_w and ln_b
 * asked into L2 (a thread a 128-byte line): weights, so this may come
 * before the wait for the previous kernel, whose end the loads after it
 * would otherwise meet at memory's latency. */
__device__ __forceinline__ void mvm_prefetch(const tg_args_mul_mat_vec &args, i64 n0) {
    const int tid = threadIdx.x, kl = args.ln ? (int)((args.k * 4 + 127) / 128) : 0;
    const char *p = NULL;
    if (tid < kl && args.ln_w) p = (const char *)args.ln_w + 128 * (i64)tid;
    else if (tid >= kl && tid < 2 * kl && args.ln_b) p = (const char *)args.ln_b + 128 * (i64)(tid - kl);
    else if (tid == 2 * kl && args.bias && n0 < args.n) p = (const char *)(args.bias + n0);
    if (p) asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

/* A weight fragment: from global memory through the read-only path, or
 * (ST) from the block's rows in shared memory. */
template <bool ST> __device__ __forceinline__ uint4 mvm_ldw(const char *p) {
    return ST ? *(const uint4 *)p : __ldg((const uint4 *)p);
}

#if TG_CC >= 80
/* mul_mat_vec_mma_st(16): every weight row of this block's blocks of rows
 * (rb0, rb0 + stride, ... below row_blocks; 8 NT rows each, the last
 * block's rows past n repeating row n - 1 as MVM_ROWS reads them) copied
 * by cp.async into shared memory at ws, rows lds bytes apart, one group
 * the kernel waits for after its norm. Weights only (no kernel writes
 * them), so this goes before the wait for the kernel before: with that
 * kernel's blocks leaving room on the SMs, the copies run while it does. */
template <int NT>
__device__ __forceinline__ void mvm_stage(const tg_args_mul_mat_vec &args, unsigned ws, i64 rb0, i64 stride,
                                          i64 row_blocks, int lds) {
    const int cpr = (int)(args.k / 8); /* 16-byte pieces a row */
    int li = 0;
    for (i64 rb = rb0; rb < row_blocks; rb += stride, li++)
        for (int c = threadIdx.x; c < 8 * NT * cpr; c += blockDim.x) {
            const int rr = c / cpr, ch = c - rr * cpr;
            const i64 r = rb * (8 * NT) + rr < args.n ? rb * (8 * NT) + rr : args.n - 1;
            cp_async16_s(ws + (unsigned)((li * 8 * NT + rr) * lds + 16 * ch), args.w + r * args.lda + 16 * ch);
        }
    cp_async_commit();
}

/* mul_mat_vec_mma_ln: the norm's K weights and K biases as 16-byte pieces
 * into shared memory at ws (the weights, then the biases), one group. */
__device__ __forceinline__ void mvm_stage_ln(const tg_args_mul_mat_vec &args, unsigned ws) {
    const int q = (int)(args.k / 4);
    for (int c = threadIdx.x; c < 2 * q; c += blockDim.x)
        cp_async16_s(ws + 16u * (unsigned)c, c < q ? args.ln_w + 4 * c : args.ln_b + 4 * (c - q));
    cp_async_commit();
}
#endif

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

/* The body of the mma kernels: a block holds MT tiles of 16 columns (MT *
 * 16 a block, more as blocks of that many) and NT tiles of 8 weight rows,
 * and loads each weight once for all of them; U 32-k steps a warp loads at
 * once; WIDE: the next round's
 * weights go out before this round's mma (registers for a second set of
 * weights, which the one-tile kernel at 512 threads does not have) and the
 * norm always reads x once (the one-tile kernel where args.opt asks it,
 * TG_MV_NORM1). Where the grid has fewer
 * blocks than blocks of rows (the host caps it at what the SMs hold at
 * once where a product's blocks are more than twice that: the logits,
 * CT_CUDA_MATVEC_LOOP=3, the default; 1 and 2 cap it at the SMs, slower
 * on an H100; cuda_matvec.c), a block goes
 * on to further blocks of rows (gridDim.x / tiles apart) with its normed
 * columns kept in shared memory, its warps' sums after them, and the next
 * rows' first weights loaded before this one's sums. */
template <int MT, int NT, int U, bool WIDE, bool ST = false, bool LNS = false>
__device__ __forceinline__ void mvm_body(const tg_args_mul_mat_vec &full, unsigned short *mvm_xs) {
#if TG_CC >= 80
    /* More than MT x 16 columns come as tiles of that many, the tiles of
     * one block of rows next to each other in the grid (blockIdx.x = row
     * block * tiles + tile) so that they read its weights while L2 still
     * holds them; args is this block's tile of x, out and res. */
    constexpr int TM = 16 * MT;
    const int tiles = (full.m + TM - 1) / TM, tile = (int)(blockIdx.x % (unsigned)tiles);
    tg_args_mul_mat_vec args = full;
    args.x += (i64)tile * TM * full.ldx;
    args.out += (i64)tile * TM * full.ldo;
    if (full.res) args.res += (i64)tile * TM * full.ldr;
    args.m = full.m - tile * TM < TM ? full.m - tile * TM : TM;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int g = lane >> 2, t = lane & 3, K = (int)args.k, S = K / 32;
    const i64 row_blocks = (args.n + 8 * NT - 1) / (8 * NT), stride = (i64)(gridDim.x / (unsigned)tiles);
    const int per = (S + nw - 1) / nw, s0 = warp * per, s1 = s0 + per < S ? s0 + per : S;
    i64 rb = (i64)(blockIdx.x / (unsigned)tiles);
    int li = 0; /* ST: rb's place among the block's staged blocks of rows */
    const char *wr[NT];
    /* ST: the block's weight rows in shared memory (mvm_stage) */
    const char *wsp = (const char *)mvm_xs + (ST ? args.ws_off : 0);
    const int lds = 2 * K + TG_MVS_PAD;
#define MVM_ROWS(rb_, li_)                                                     \
    _Pragma("unroll") for (int j = 0; j < NT; j++) {                       \
        const i64 n0_ = (rb_) * (8 * NT), r = n0_ + 8 * j + g < args.n ? n0_ + 8 * j + g : args.n - 1; \
        wr[j] = ST ? wsp + ((li_) * 8 * NT + 8 * j + g) * lds + 16 * t : args.w + r * args.lda + 16 * t; \
    }
    MVM_ROWS(rb, li);
    uint4 wv[U][NT], wn[WIDE ? U : 1][NT];
#define MVM_LOAD_W(dst, sb)                                                                              \
    _Pragma("unroll") for (int u = 0; u < U; u++) _Pragma("unroll") for (int j = 0; j < NT; j++) \
        dst[u][j] = (sb) + u < s1 ? mvm_ldw<ST>(wr[j] + (i64)((sb) + u) * 64) : make_uint4(0u, 0u, 0u, 0u)
    /* a weight's first round goes out before the wait for the previous
     * kernel (args.w_early, as in mul_mat_vec), or with ST all of the
     * block's rows, into shared memory; so do requests for the
     * first rows' bias and the norm's parameters into L2 (TG_MV_PREFETCH),
     * which are read after the wait */
    if (ST) mvm_stage<NT>(args, smem_addr(wsp), rb, stride, row_blocks, lds);
    else if (args.w_early) MVM_LOAD_W(wv, s0);
    /* LNS: the norm's ln_w and ln_b (weights, both present, 16-byte
     * aligned: the host checks) copied into shared memory after the warps'
     * sums, so that the norm reads them there, not from L2 or memory after
     * its statistics */
    float *lnp = LNS ? (float *)(mvm_xs + (((i64)args.m * (K + 8) + 7) & ~(i64)7)) + nw * MT * NT * 128 : NULL;
    if (LNS) mvm_stage_ln(args, smem_addr(lnp));
    if (args.opt & TG_MV_PREFETCH) mvm_prefetch(args, rb * (8 * NT));
    /* the epilogue's bias and residual for the one output this thread
     * writes, loaded before the wait where the host allows it
     * (TG_MV_EPI_EARLY, one tile, a thread for every output: NT x 128
     * threads or more: K >= 1024 on 16 rows, any K on 8): the bias is a weight, and the residual was
     * written by a launch before the previous one, which has ended once
     * this kernel runs (the previous one let it start only after its own
     * wait). One block of rows a block (no rows loop: the host checks) */
    const bool epi_early = !WIDE && MT == 1 && (args.opt & TG_MV_EPI_EARLY) &&
                           blockDim.x >= (unsigned)(MT * NT * 128) && stride >= row_blocks;
    float eb = 0.0f, er = 0.0f;
    if (epi_early && threadIdx.x < MT * NT * 128) {
        const int o = threadIdx.x, j = (o >> 7) % NT, ln = (o >> 2) & 31, e = o & 3;
        const int m = (ln >> 2) + ((e & 2) ? 8 : 0);
        const i64 n = rb * (8 * NT) + 8 * j + 2 * (ln & 3) + (e & 1);
        if (m < args.m && n < args.n) {
            if (args.bias) eb = args.bias[n];
            /* from L2 (another kernel wrote it; this one has not waited) */
            if (args.res) er = __ldcg((const float *)(args.res + m * args.ldr + n * 4));
        }
    }
    TG_PDL();
    if (!ST && !args.w_early) MVM_LOAD_W(wv, s0);
    if (LNS) {
        cp_async_wait<0>();
        __syncthreads();
        args.ln_w = lnp;
        args.ln_b = lnp + K;
    }
    /* the normed columns, then the warps' sums after them (a block keeps
     * the columns for further rows) */
    float *red = (float *)mvm_xs; /* [nw][MT][NT][32][4] */
    if (args.ln) {
        if (!WIDE && (args.opt & TG_MV_NORM_BLOCK) && args.m == 1 && K % 128 == 0 && K / 4 <= (int)blockDim.x)
            mvm_norm_column_block(args, mvm_xs);
        else if ((WIDE || (args.opt & TG_MV_NORM1)) && K % 128 == 0 && K <= 1024) mvm_norm_columns_1pass(args, mvm_xs);
        else mvm_norm_columns(args, mvm_xs);
        red = (float *)(mvm_xs + (((i64)args.m * (K + 8) + 7) & ~(i64)7));
    }
    if (ST) { /* this thread's copies landed; the barrier: everyone's */
        cp_async_wait<0>();
        __syncthreads();
        MVM_LOAD_W(wv, s0);
    }
    for (;;) {
        const i64 n0 = rb * (8 * NT);
        float c[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int j = 0; j < NT; j++) c[mt][j][0] = c[mt][j][1] = c[mt][j][2] = c[mt][j][3] = 0.0f;
        for (int sb = s0; sb < s1; sb += U) {
            if (WIDE && sb + U < s1) MVM_LOAD_W(wn, sb + U);
            if (!WIDE && sb != s0) MVM_LOAD_W(wv, sb);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                if (16 * mt >= args.m) break; /* the same for the whole block */
                /* x's fragments at most 4 steps at a time (the registers
                 * of a round of 8 steps go to the weights) */
                constexpr int XU = U < 4 ? U : 4;
#pragma unroll
                for (int u0 = 0; u0 < U; u0 += XU) {
                    if (sb + u0 >= s1) break;
                    uint4 xa[XU], xb[XU];
#pragma unroll
                    for (int u = 0; u < XU; u++) {
                        const int k0 = 32 * (sb + u0 + u < s1 ? sb + u0 + u : s0) + 8 * t;
                        xa[u] = mvm_x8(args, mvm_xs, 16 * mt + g, k0);
                        xb[u] = mvm_x8(args, mvm_xs, 16 * mt + g + 8, k0);
                    }
#pragma unroll
                    for (int u = 0; u < XU; u++) {
                        if (sb + u0 + u >= s1) break;
                        const unsigned a0[4] = {xa[u].x, xb[u].x, xa[u].y, xb[u].y};
                        const unsigned a1[4] = {xa[u].z, xb[u].z, xa[u].w, xb[u].w};
#pragma unroll
                        for (int j = 0; j < NT; j++) {
                            tg_mma_bf16(c[mt][j], a0, wv[u0 + u][j].x, wv[u0 + u][j].y);
                            tg_mma_bf16(c[mt][j], a1, wv[u0 + u][j].z, wv[u0 + u][j].w);
                        }
                    }
                }
            }
            if (WIDE && sb + U < s1) {
#pragma unroll
                for (int u = 0; u < U; u++)
#pragma unroll
                    for (int j = 0; j < NT; j++) wv[u][j] = wn[u][j];
            }
        }
        const i64 next = rb + stride;
        if (next < row_blocks) {
            MVM_ROWS(next, li + 1);
            MVM_LOAD_W(wv, s0);
        }
        /* the warps' partial sums, then one thread an output */
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int j = 0; j < NT; j++)
                *(float4 *)(red + (((warp * MT + mt) * NT + j) * 32 + lane) * 4) =
                    make_float4(c[mt][j][0], c[mt][j][1], c[mt][j][2], c[mt][j][3]);
        __syncthreads();
        for (int o = threadIdx.x; o < MT * NT * 128; o += blockDim.x) {
            const int mt = o / (NT * 128), j = (o >> 7) % NT, ln = (o >> 2) & 31, e = o & 3;
            float sum = 0.0f;
            for (int w = 0; w < nw; w++) sum += red[(((w * MT + mt) * NT + j) * 32 + ln) * 4 + e];
            const int m = 16 * mt + (ln >> 2) + ((e & 2) ? 8 : 0);
            const i64 n = n0 + 8 * j + 2 * (ln & 3) + (e & 1);
            if (m >= args.m || n >= args.n) continue;
            /* (epi_early: o is this thread's one output) */
            float r = args.alpha * sum + (epi_early ? eb : args.bias ? args.bias[n] : 0.0f);
            if (args.relu) r = fmaxf(r, 0.0f);
            if (args.res) r += epi_early ? er : *(const float *)(args.res + m * args.ldr + n * 4);
            *(float *)(args.out + m * args.ldo + n * 4) = r;
            if (args.kv) mv_kv_store(args, (i64)tile * TM + m, n, r);
        }
        if (next >= row_blocks) break;
        rb = next;
        li++;
        __syncthreads(); /* the sums read before the next rows write them */
    }
#undef MVM_LOAD_W
#undef MVM_ROWS
#endif
}

extern "C" __global__ void __launch_bounds__(512) mul_mat_vec_mma(const tg_args_mul_mat_vec full) {
    extern __shared__ __align__(16) unsigned short mvm_xs[]; /* ln's columns; then the warps' sums */
    mvm_body<1, MVM_NT, MVM_U, false>(full, mvm_xs);
}

/* The same for blocks of 8 weight rows (TG_MVM_ROWS8), where blocks of 16
 * would leave SMs idle and the host asks (CT_CUDA_MATVEC_R8=1; measured
 * 2.2-2.6% slower a step at batch 1-8 on an H100, tenth session): a decoder step's 1024-row products (self and cross
 * output, cross q, the feed-forward's down) were 64 blocks on a 132-SM
 * GPU, each reading 32 KB (K = 1024) or 128 KB (K = 4096) on its own SM.
 * Here 128 blocks read half that each, and a warp's eight 32-k steps (K =
 * 4096 on 16 warps) are one round of loads, not two; with args.w_early
 * all of a block's weights are asked for before the wait. */
extern "C" __global__ void __launch_bounds__(512) mul_mat_vec_mma_r8(const tg_args_mul_mat_vec full) {
    extern __shared__ __align__(16) unsigned short mvm_xs[];
    mvm_body<1, TG_MVM_ROWS8 / 8, 2 * MVM_U, false>(full, mvm_xs);
}

/* mul_mat_vec_mma with the norm's parameters staged in shared memory
 * before the wait (cuda_matvec.c's CT_CUDA_MATVEC_LN_STAGE; by default
 * from two columns on): a decoder step's normed products found them
 * evicted by the step's 260 MB of weights streaming through L2, and the
 * warp-a-column norm read them after the columns' statistics, a trip to
 * memory more after the wait. */
extern "C" __global__ void __launch_bounds__(512) mul_mat_vec_mma_ln(const tg_args_mul_mat_vec full) {
    extern __shared__ __align__(16) unsigned short mvm_xs[];
    mvm_body<1, MVM_NT, MVM_U, false, false, true>(full, mvm_xs);
}

/* The same for 1 to TG_MVM_MAXM columns with the block's weight rows staged
 * in shared memory before the wait (mvm_stage, cuda_matvec.c's
 * CT_CUDA_MATVEC_STAGED): blocks of 8 rows, at most one block an SM, each
 * going on to further blocks of rows, and at most half an SM's registers
 * (two blocks' worth at 128 registers for K <= 1024, 64 at up to 16
 * warps), so that the next kernel of a decoder step finds room on every
 * SM while this one runs and copies its own weights then. The other
 * kernels' blocks fill an SM (mul_mat_vec_mma at K = 1024 is two blocks of
 * 256 threads at 128 registers), so a kernel's weights came after the one
 * before had ended: a step's products ran 2.5-8 us each for 2-8 MB, their
 * time the trips to memory after the wait. Same warps, steps and order as
 * mul_mat_vec_mma for the same K, so the same sums. */
extern "C" __global__ void __launch_bounds__(256, 2) mul_mat_vec_mma_st(const tg_args_mul_mat_vec full) {
    extern __shared__ __align__(16) unsigned short mvm_xs[];
    mvm_body<1, 1, MVM_U, false, true>(full, mvm_xs);
}

/* K of 1152 to 4096 (9 to 16 warps, the feed-forward's down), two 32-k
 * steps a round (registers for 64 a thread). */
extern "C" __global__ void __launch_bounds__(512, 2) mul_mat_vec_mma_st16(const tg_args_mul_mat_vec full) {
    extern __shared__ __align__(16) unsigned short mvm_xs[];
    mvm_body<1, 1, 2, false, true>(full, mvm_xs);
}

/* 17 to TG_MVM_WIDE columns (a decoder step at batch 17-64) in one block:
 * the weights read once where tiles of 16 read them once a tile (which
 * lost to cuBLASLt on an H100: the step at batch 64 1.92 against 1.35 ms,
 * 2026-12-05), the layer norm inside as for 16. Two 32-k steps a round,
 * the next round's weights loaded during this round's mma. It lost too
 * (2.00 against 1.37 ms, sixth session: every block reads all of x's
 * columns from L2), so it runs only where CT_CUDA_MATVEC_MMA_MAX asks. */
extern "C" __global__ void __launch_bounds__(512) mul_mat_vec_mma_wide(const tg_args_mul_mat_vec full) {
    extern __shared__ __align__(16) unsigned short mvm_xs[];
    mvm_body<TG_MVM_WIDE / 16, MVM_NT, 2, true>(full, mvm_xs);
}

/* ------------------------------------------------------ mul_mat_vec_mma_cl
 * 17 to 64 columns (a decoder step at batch 17-64) on sm_90, as clusters
 * of TG_MVC_S blocks that split K (CT_CUDA_MATVEC_CL=1, off: slower than
 * cuBLASLt on an H100, cuda_matvec.c). The kernels above give a block
 * every 16 weight rows and all of x's columns, so at 64 columns each of a
 * 1024-row product's 64 blocks read 128-256 KB of x (and normed it) for
 * 32 KB of weights. Here a cluster owns TG_MVC_ROWS weight rows and block
 * r of it the slice of K / S k's from r K / S on: it reads that slice of
 * the weights once and only that slice of x's columns, into shared memory
 * as BF16 (as mul_mat_vec_mma rounds x), so the product's blocks together
 * read x S times less, the weights once, on 8 times as many blocks as the
 * 1024-row products had. A block's 8 warps: warp w takes rows 16 (w % 4)
 * on, over half the slice (w / 4); the halves meet in shared memory.
 *
 * The layer norm inside (args.ln, K / S <= 128, on mul_mat_vec_mma_cl;
 * mul_mat_vec_mma_cl2 takes K / S up to 512 without it): four threads a column,
 * each with its quarter of the slice in registers; the cluster's blocks
 * read one another's sums through distributed shared memory (in rank
 * order), then the same for the centred squares, so every block norms its
 * slice with the whole column's statistics. The partial products meet the
 * same way: after the cluster's barrier block r adds, in rank order, the S
 * partial sums of its share of the outputs and applies the epilogue
 * (alpha, bias, relu, residual, the cache write of args.kv) as
 * mul_mat_vec_mma does, its bias and residual loaded while the slice
 * comes. Deterministic; not the same bits as the other kernels (the sums
 * of k meet in another order, and the norm's too). A warp's mma are as in
 * mvm_body (x's columns the A rows, 8 weight rows the B columns). Not
 * here: more than 64 columns, F32 precision requests, GPUs without
 * clusters (cuBLASLt takes those). */
#define MVC_W 8 /* warps a block: 4 groups of 16 rows by 2 halves of the slice */

#if TG_CC >= 90
/* Output e (0-3) of lane ln's fragment j of 16 columns mt in row group w
 * (the mma's C layout): column *m, weight row *n from n0. */
__device__ __forceinline__ void mvc_out(i64 n0, int w, int mt, int j, int ln, int e, int *m, i64 *n) {
    *m = 16 * mt + (ln >> 2) + ((e & 2) ? 8 : 0);
    *n = n0 + 16 * w + 8 * j + 2 * (ln & 3) + (e & 1);
}
#endif

/* U: the most 32-k steps of a warp's half slice (K <= 64 S U), all its
 * weights loaded at once; the norm only where U is 4 (the host asks it
 * only for K / S <= 128), so the kernel of 8 keeps its registers for the
 * weights. */
template <int U> __device__ __forceinline__ void mvc_body(const tg_args_mul_mat_vec &args, unsigned short *mvm_xs) {
#if TG_CC >= 90
    __shared__ float st_sum[TG_MVM_WIDE], st_sq[TG_MVM_WIDE];
    constexpr int S = TG_MVC_S;
    const unsigned rank = tg_cluster_rank();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int rw = warp & 3, kh = warp >> 2;
    const int M = args.m, Kc = (int)(args.k / S), kc0 = (int)rank * Kc, Sh = Kc / 64, XR = Kc + 8;
    /* x's slice as BF16 rows of Kc + 8, then the partial sums
     * [rows group][mt][j][lane] (float4) */
    float4 *red = (float4 *)(mvm_xs + (((i64)M * XR + 7) & ~(i64)7));
    const i64 n0 = (i64)(blockIdx.x / S) * TG_MVC_ROWS;
    const char *wr[2];
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const i64 r0 = n0 + 16 * rw + 8 * j + g, r = r0 < args.n ? r0 : args.n - 1;
        wr[j] = args.w + r * args.lda + 2 * (i64)(kc0 + kh * (Kc / 2)) + 16 * t;
    }
    const bool ln = U == 4 && Kc <= 128 && args.ln;
    if (args.ln && !ln) __trap(); /* the host never asks it (cuda_matvec.c) */
    uint4 wv[U][2];
#define MVC_LOAD_W()                                                                                     \
    _Pragma("unroll") for (int u = 0; u < U; u++) _Pragma("unroll") for (int j = 0; j < 2; j++) wv[u][j] = \
        u < Sh ? __ldg((const uint4 *)(wr[j] + (i64)u * 64)) : make_uint4(0u, 0u, 0u, 0u)
    if (args.w_early) MVC_LOAD_W();
    if (args.opt & TG_MV_PREFETCH) mvm_prefetch(args, n0);
    TG_PDL();

    /* the layer norm's quarter column (four threads a column) in
     * registers, or x's slice into shared memory: BF16 by cp.async, F32
     * rounded on the way, four 16-byte loads in flight a thread */
    const int lm = tid >> 2, lq = tid & 3, q4 = Kc / 16; /* float4 of a quarter: <= 8 */
    const bool llive = ln && lm < M;
    float4 v[U == 4 ? 8 : 1];
    if (ln) {
        const float4 *xc = (const float4 *)(args.x + (llive ? lm : 0) * args.ldx) + (kc0 + lq * (Kc / 4)) / 4;
#pragma unroll
        for (int c = 0; c < (U == 4 ? 8 : 1); c++) v[c] = llive && c < q4 ? xc[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    } else if (args.x_bf16) {
        const int per_row = Kc / 8;
        for (int i = tid; i < M * per_row; i += blockDim.x) {
            const int m = i / per_row, c = i - m * per_row;
            cp_async16_s(smem_addr(mvm_xs + m * XR + 8 * c), args.x + m * args.ldx + 2 * (i64)kc0 + 16 * (i64)c);
        }
        cp_async_commit();
    } else {
        const int per_row = Kc / 4, n4 = M * per_row;
        for (int i0 = tid; i0 < n4; i0 += 4 * blockDim.x) {
            float4 f[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int i = i0 + u * blockDim.x, m = i / per_row, c = i - m * per_row;
                if (i < n4) f[u] = __ldg((const float4 *)(args.x + m * args.ldx + 4 * (i64)kc0) + c);
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int i = i0 + u * blockDim.x, m = i / per_row, c = i - m * per_row;
                if (i < n4)
                    *(uint2 *)(mvm_xs + m * XR + 4 * c) =
                        make_uint2(tg_pack_bf16(f[u].x, f[u].y), tg_pack_bf16(f[u].z, f[u].w));
            }
        }
    }
    if (!args.w_early) MVC_LOAD_W();
    /* this thread's share of the outputs (below): its bias and residual
     * loaded now, while the slice comes (res was written by an earlier
     * launch, which has ended: this one has waited) */
    const int mtn = (M + 15) / 16, total = 4 * mtn * 64, per = (total + S - 1) / S; /* per <= 128 */
    const int o = (int)rank * per + tid;
    const bool owns = tid < per && o < total;
    const int ow = o / (mtn * 64), omt = (o / 64) % mtn, oj = (o >> 5) & 1, oln = o & 31;
    float eb[4] = {0.0f, 0.0f, 0.0f, 0.0f}, er[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (owns) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int m;
            i64 n;
            mvc_out(n0, ow, omt, oj, oln, e, &m, &n);
            if (m >= M || n >= args.n) continue;
            if (args.bias) eb[e] = args.bias[n];
            if (args.res) er[e] = *(const float *)(args.res + m * args.ldr + n * 4);
        }
    }
    if (ln) {
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < (U == 4 ? 8 : 1); c++) s += (v[c].x + v[c].y) + (v[c].z + v[c].w);
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        if (llive && lq == 0) st_sum[lm] = s;
        tg_cluster_sync();
        float mean = 0.0f, q = 0.0f;
        if (llive) {
            float p[S];
#pragma unroll
            for (int r = 0; r < S; r++) p[r] = tg_dsmem(&st_sum[lm], (unsigned)r);
#pragma unroll
            for (int r = 0; r < S; r++) mean += p[r];
            mean /= (float)args.k;
#pragma unroll
            for (int c = 0; c < (U == 4 ? 8 : 1); c++) {
                if (c >= q4) break;
                const float a = v[c].x - mean, b = v[c].y - mean, d = v[c].z - mean, e = v[c].w - mean;
                q += (a * a + b * b) + (d * d + e * e);
            }
        }
        q += __shfl_xor_sync(0xffffffffu, q, 1);
        q += __shfl_xor_sync(0xffffffffu, q, 2);
        if (llive && lq == 0) st_sq[lm] = q;
        tg_cluster_sync();
        if (llive) {
            float p[S], var = 0.0f;
#pragma unroll
            for (int r = 0; r < S; r++) p[r] = tg_dsmem(&st_sq[lm], (unsigned)r);
#pragma unroll
            for (int r = 0; r < S; r++) var += p[r];
            const float rstd = rsqrtf(var / (float)args.k + args.ln_eps);
#pragma unroll
            for (int c = 0; c < (U == 4 ? 8 : 1); c++) {
                if (c >= q4) break;
                float y[4] = {(v[c].x - mean) * rstd, (v[c].y - mean) * rstd, (v[c].z - mean) * rstd,
                              (v[c].w - mean) * rstd};
                const int k = kc0 + lq * (Kc / 4) + 4 * c;
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    if (args.ln_w) y[e] *= args.ln_w[k + e];
                    if (args.ln_b) y[e] += args.ln_b[k + e];
                }
                *(uint2 *)(mvm_xs + lm * XR + lq * (Kc / 4) + 4 * c) =
                    make_uint2(tg_pack_bf16(y[0], y[1]), tg_pack_bf16(y[2], y[3]));
            }
        }
    } else if (args.x_bf16) {
        cp_async_wait<0>();
    }
    __syncthreads();

    /* the warp's 16 rows by its half of the block's slice, for every 16
     * columns */
    float c[4][2][4];
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int j = 0; j < 2; j++) c[mt][j][0] = c[mt][j][1] = c[mt][j][2] = c[mt][j][3] = 0.0f;
    const unsigned short *xk = mvm_xs + kh * (Kc / 2) + 8 * t;
    {
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (u >= Sh) break;
            const int k0 = 32 * u;
#pragma unroll
            for (int mt = 0; mt < 4; mt++) {
                if (16 * mt >= M) break; /* the same for the whole block */
                const int ra = 16 * mt + g, rb = ra + 8;
                const uint4 z = make_uint4(0u, 0u, 0u, 0u);
                const uint4 xa = ra < M ? *(const uint4 *)(xk + ra * XR + k0) : z;
                const uint4 xb = rb < M ? *(const uint4 *)(xk + rb * XR + k0) : z;
                const unsigned a0[4] = {xa.x, xb.x, xa.y, xb.y}, a1[4] = {xa.z, xb.z, xa.w, xb.w};
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    tg_mma_bf16(c[mt][j], a0, wv[u][j].x, wv[u][j].y);
                    tg_mma_bf16(c[mt][j], a1, wv[u][j].z, wv[u][j].w);
                }
            }
        }
    }
    /* the second half's sums onto the first's, then the block's into red */
    if (kh == 1) {
#pragma unroll
        for (int mt = 0; mt < 4; mt++) {
            if (16 * mt >= M) break;
#pragma unroll
            for (int j = 0; j < 2; j++)
                red[((rw * 4 + mt) * 2 + j) * 32 + lane] =
                    make_float4(c[mt][j][0], c[mt][j][1], c[mt][j][2], c[mt][j][3]);
        }
    }
    __syncthreads();
    if (kh == 0) {
#pragma unroll
        for (int mt = 0; mt < 4; mt++) {
            if (16 * mt >= M) break;
#pragma unroll
            for (int j = 0; j < 2; j++) {
                float4 *p = red + ((rw * 4 + mt) * 2 + j) * 32 + lane;
                const float4 h = *p;
                *p = make_float4(c[mt][j][0] + h.x, c[mt][j][1] + h.y, c[mt][j][2] + h.z, c[mt][j][3] + h.w);
            }
        }
    }
    tg_cluster_sync();

    /* this thread's float4 of the cluster's partial sums (one lane's
     * fragment), the S blocks' added in rank order, then the epilogue */
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (owns) {
        const float4 *p = red + ((ow * 4 + omt) * 2 + oj) * 32 + oln;
        float4 w4[S];
#pragma unroll
        for (int r = 0; r < S; r++) w4[r] = tg_dsmem4(p, (unsigned)r);
#pragma unroll
        for (int r = 0; r < S; r++) sum[0] += w4[r].x, sum[1] += w4[r].y, sum[2] += w4[r].z, sum[3] += w4[r].w;
    }
    tg_cluster_arrive(); /* this block has read the others' sums (every thread, converged) */
    if (owns) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int m;
            i64 n;
            mvc_out(n0, ow, omt, oj, oln, e, &m, &n);
            if (m >= M || n >= args.n) continue;
            float r = args.alpha * sum[e] + eb[e];
            if (args.relu) r = fmaxf(r, 0.0f);
            r += er[e];
            *(float *)(args.out + m * args.ldo + n * 4) = r;
            if (args.kv) mv_kv_store(args, m, n, r);
        }
    }
    /* every block's partial sums stay until the cluster has read them */
    tg_cluster_wait();
#undef MVC_LOAD_W
#else
    __trap(); /* clusters are sm_90's: the host launches this nowhere else */
#endif
}

extern "C" __global__ void __launch_bounds__(32 * MVC_W, 2) mul_mat_vec_mma_cl(const tg_args_mul_mat_vec args) {
    extern __shared__ __align__(16) unsigned short mvm_xs[];
    mvc_body<4>(args, mvm_xs);
}
/* K / S up to 512 (the feed-forward's down, K = 4096), no norm */
extern "C" __global__ void __launch_bounds__(32 * MVC_W, 2) mul_mat_vec_mma_cl2(const tg_args_mul_mat_vec args) {
    extern __shared__ __align__(16) unsigned short mvm_xs[];
    mvc_body<8>(args, mvm_xs);
}
