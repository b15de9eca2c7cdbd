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
template <int MT, int NT, int U, bool WIDE>
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
    const char *wr[NT];
#define MVM_ROWS(rb_)                                                          \
    _Pragma("unroll") for (int j = 0; j < NT; j++) {                       \
        const i64 n0_ = (rb_) * (8 * NT), r = n0_ + 8 * j + g < args.n ? n0_ + 8 * j + g : args.n - 1; \
        wr[j] = args.w + r * args.lda + 16 * t;                                \
    }
    MVM_ROWS(rb);
    uint4 wv[U][NT], wn[WIDE ? U : 1][NT];
#define MVM_LOAD_W(dst, sb)                                                                              \
    _Pragma("unroll") for (int u = 0; u < U; u++) _Pragma("unroll") for (int j = 0; j < NT; j++) \
        dst[u][j] = (sb) + u < s1 ? __ldg((const uint4 *)(wr[j] + (i64)((sb) + u) * 64)) : make_uint4(0u, 0u, 0u, 0u)
    /* a weight's first round goes out before the wait for the previous
     * kernel (args.w_early, as in mul_mat_vec); so do requests for the
     * first rows' bias and the norm's parameters into L2 (TG_MV_PREFETCH),
     * which are read after the wait */
    if (args.w_early) MVM_LOAD_W(wv, s0);
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
    if (!args.w_early) MVM_LOAD_W(wv, s0);
    /* the normed columns, then the warps' sums after them (a block keeps
     * the columns for further rows) */
    float *red = (float *)mvm_xs; /* [nw][MT][NT][32][4] */
    if (args.ln) {
        if ((WIDE || (args.opt & TG_MV_NORM1)) && K % 128 == 0 && K <= 1024) mvm_norm_columns_1pass(args, mvm_xs);
        else mvm_norm_columns(args, mvm_xs);
        red = (float *)(mvm_xs + (((i64)args.m * (K + 8) + 7) & ~(i64)7));
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
            MVM_ROWS(next);
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
