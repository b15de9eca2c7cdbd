/*
 * mvm.cuh: the device body of matvec.cu's tensor-core kernels (mvm_body:
 * 1 to 64 columns against BF16 weights on mma.sync, the layer norm, bias,
 * relu, residual and K/V cache write inside), apart from their entry
 * points so that step_chain.cu runs the same code as one phase of a
 * decoder layer. Its comments are those of the kernels it came from.
 *
 * Not here: the entry points and the F32 kernel (matvec.cu), the host's
 * choices (cuda_matvec.c).
 */
#ifndef TG_MVM_CUH
#define TG_MVM_CUH
#include "common.cuh"

/* What mvm_body waits with after its early loads, as a chain's phase (CH):
 * step_chain.cu defines it (its grid barrier) before including this. */
#ifndef TG_CHAIN_WAIT
#define TG_CHAIN_WAIT() TG_PDL()
#endif
/* ------------------------------------------------------ mul_mat_vec_mma
 * 1 to 16 columns (a decoder step at batch 1-16); 17 to 64 in the wide
 * kernel's block (matvec.cu). cuBLASLt ran these on
 * 16-64 blocks of a 132-SM GPU (H200, batch 8: ~6 us for a 2 MB matrix,
 * 0.4 TB/s), and the F32 kernel (matvec.cu) loses at 8 columns (its FMAs, not
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

/* x's 8 values k0..k0+7 of column m as four BF16 pairs (zeros past M).
 * CH (step_chain.cu): x was written by this kernel's phase before, so it
 * is read through L2 (ld.global.cg), never through the read-only path,
 * which is coherent only for what no part of the kernel writes. */
template <bool CH>
__device__ __forceinline__ uint4 mvm_x8(const tg_args_mul_mat_vec &args, const unsigned short *xs, int m, int k0) {
    if (m >= args.m) return make_uint4(0u, 0u, 0u, 0u);
    if (args.ln) return *(const uint4 *)(xs + m * ((int)args.k + 8) + k0);
    if (args.x_bf16) {
        const uint4 *p = (const uint4 *)(args.x + m * args.ldx) + k0 / 8;
        return CH ? __ldcg(p) : __ldg(p);
    }
    const float4 *p = (const float4 *)(args.x + m * args.ldx) + k0 / 4;
    float4 a = CH ? __ldcg(p) : __ldg(p), b = CH ? __ldcg(p + 1) : __ldg(p + 1);
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

/* The next launch's inputs (args.pf_a, pf_b) asked into L2, the grid's
 * threads taking a 128-byte line each in turn: before the wait, since a
 * prefetch is a hint (L2 holds every write, so a line asked for early is
 * read as written). */
__device__ __forceinline__ void mvm_prefetch_next(const tg_args_mul_mat_vec &args) {
    const i64 la = (args.pf_a_bytes + 127) / 128, lb = (args.pf_b_bytes + 127) / 128;
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < la + lb; i += step) {
        const char *p = i < la ? args.pf_a + 128 * i : args.pf_b + 128 * (i - la);
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
    }
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
template <int MT, int NT, int U, bool WIDE, bool ST = false, bool LNS = false, bool CH = false>
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
    if (args.pf_a_bytes + args.pf_b_bytes > 0) mvm_prefetch_next(args);
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
    if (CH) TG_CHAIN_WAIT();
    else TG_PDL();
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
                        xa[u] = mvm_x8<CH>(args, mvm_xs, 16 * mt + g, k0);
                        xb[u] = mvm_x8<CH>(args, mvm_xs, 16 * mt + g + 8, k0);
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

#endif /* TG_MVM_CUH */
