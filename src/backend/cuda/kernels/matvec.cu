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

#include "mvm.cuh"

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
