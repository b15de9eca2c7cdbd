/*
 * attention_split.cu: attention for a few queries over many keys (the
 * decoder's step: one query per head against the self-attention cache or
 * the encoder's frames; its prefill: the prompt's queries), split over the
 * keys ("flash-decoding").
 *
 * One query block per head holds too little work for a 132-SM GPU: a step's
 * 16 calls ran 8 blocks each, ~211 us apiece, while the bytes they read take
 * a few microseconds. Here a block takes one chunk of ATS_CHUNK keys of one
 * (head, batch row) for every query (Tq <= ATS_TQ), so a call has
 * ceil(Tk / ATS_CHUNK) x H x B blocks:
 *   1. the scores: in attn_split_kt (CT_CUDA_ATTN_SPLIT_KT=1) the chunk's keys
 *      staged in shared memory 16 at a time, a warp a query and two lanes
 *      a key, each lane summing half the dot product itself; in
 *      attn_split each warp scores keys of the chunk, several at a time
 *      (their K rows loaded before any reduction, so the loads overlap),
 *      lanes over the head dimension (coalesced), one warp sum per key and
 *      query;
 *   2. per query, the chunk's max and the exponentials (online softmax's
 *      first half);
 *   3. threads over the value dimension accumulate p . V for every query.
 * The chunk's unnormalised output, max and sum go to the scratch, and
 * attn_split_combine rescales the chunks of a query by exp(m_s - M) and
 * divides by the total sum. Everything is F32 arithmetic on F32 (or
 * converted F16/BF16) loads, so a TG_PREC_F32 request is met as asked. A
 * query whose keys are all masked gets zeros, as in attention.cu.
 *
 * Layouts (tg_attention): q [D, Tq, H, B], k [D, Tk, H, B], v [Dv, Tk, H, B],
 * mask broadcast over [Tk, Tq, H, B], out [Dv, H, Tq, B]. Head sizes up to
 * 256 (ATS_DL lanes' worth of 32).
 *
 * Not here: many queries (attention.cu, attention_mma.cu), tensor cores.
 */
#include "common.cuh"

#define ATS_TQ TG_ATS_TQ /* queries per call at most (kargs.cuh; a decoder prefill's prompt: 10) */
#define ATS_CHUNK 32  /* keys per block                        */
#define ATS_KPW 4     /* keys a warp scores at once            */
#define ATS_DL 8      /* head dimension / 32, at most          */
#define ATS_THREADS 128

#define ATS_KH 16      /* keys a half chunk stages for attn_split_kt */

/* Partial results of chunk s for query row r = (qi, h, b): part[(s * rows + r) * (Dv + 2) + ...]:
 * Dv outputs, then the chunk's max and sum. KT: the scores with keys on
 * the lanes (attn_split_kt, below), else with the head dimension on them. */
template <bool KT> __device__ __forceinline__ void ats_body(const tg_args_attn_split &args) {
    TG_PDL();
    float *part = (float *)args.part;
    const tg_t &q = args.q, &k = args.k, &v = args.v, &mask = args.mask;
    const int has_mask = args.has_mask;
    const float scale = args.scale;
    __shared__ float qs[ATS_TQ][ATS_DL * 32];
    __shared__ float ps[ATS_TQ][ATS_CHUNK];
    const int D = (int)q.ne[0], Dv = (int)v.ne[0], Tq = (int)q.ne[1];
    const int H = (int)q.ne[2], B = (int)q.ne[3];
    const i64 Tk = k.ne[1];
    const int s = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const i64 j0 = (i64)s * ATS_CHUNK;
    const int nj = (int)(Tk - j0 < ATS_CHUNK ? Tk - j0 : ATS_CHUNK);

    for (int e = threadIdx.x; e < Tq * D; e += blockDim.x) {
        int qi = e / D, d = e % D;
        qs[qi][d] = tg_ld(q.p + tg_off(q, d, qi, h, b), q.type) * scale;
    }
    __syncthreads();

    if (KT) {
        /* 1: scores, a half chunk of ATS_KH keys at a time staged in
         * shared memory (rows padded by one word); a warp a query, lane
         * (kk, dh) the half dh of key kk's dot product, the second half
         * begun 16 dims in so that the two halves' reads fall in other
         * banks, then one shuffle adds the halves. */
        __shared__ float ks[ATS_KH][ATS_DL * 32 + 1];
        const int kk = lane & (ATS_KH - 1), dh = lane >> 4;
        const int h0 = (D + 1) / 2, h1 = D - h0, rot = h1 > 16 ? 16 : 0;
        for (int jh = 0; jh < nj; jh += ATS_KH) {
            const int nh = nj - jh < ATS_KH ? nj - jh : ATS_KH;
            if (jh) __syncthreads(); /* the half before read */
            for (int e = threadIdx.x; e < nh * D; e += blockDim.x) {
                int kj = e / D, d = e % D;
                ks[kj][d] = tg_ld(k.p + tg_off(k, d, j0 + jh + kj, h, b), k.type);
            }
            __syncthreads();
            for (int qi = warp; qi < Tq; qi += ATS_THREADS / 32) {
                float acc = 0.0f;
                if (kk < nh) {
                    const float *qr = qs[qi], *kr = ks[kk];
                    if (dh == 0) {
#pragma unroll 8
                        for (int d = 0; d < h0; d++) acc += qr[d] * kr[d];
                    } else {
#pragma unroll 8
                        for (int d = h0 + rot; d < D; d++) acc += qr[d] * kr[d];
                        for (int d = h0; d < h0 + rot; d++) acc += qr[d] * kr[d];
                    }
                }
                acc += __shfl_xor_sync(0xffffffffu, acc, ATS_KH);
                const int j = jh + kk;
                if (dh == 0 && kk < nh) {
                    if (has_mask) acc += tg_ld(mask.p + tg_off_bc(mask, j0 + j, qi, h, b), mask.type);
                    ps[qi][j] = acc;
                }
            }
        }
    } else {
        /* 1: scores, ATS_KPW keys per warp at a time */
        for (int jb = warp * ATS_KPW; jb < nj; jb += (ATS_THREADS / 32) * ATS_KPW) {
            float kr[ATS_KPW][ATS_DL];
#pragma unroll
            for (int u = 0; u < ATS_KPW; u++) {
                const int j = jb + u;
                const char *row = k.p + tg_off(k, 0, j0 + (j < nj ? j : 0), h, b);
#pragma unroll
                for (int c = 0; c < ATS_DL; c++) {
                    const int d = lane + 32 * c;
                    kr[u][c] = d < D && j < nj ? tg_ld(row + (i64)d * k.nb[0], k.type) : 0.0f;
                }
            }
            for (int qi = 0; qi < Tq; qi++) {
#pragma unroll
                for (int u = 0; u < ATS_KPW; u++) {
                    float acc = 0.0f;
#pragma unroll
                    for (int c = 0; c < ATS_DL; c++) {
                        const int d = lane + 32 * c;
                        if (d < D) acc += qs[qi][d] * kr[u][c];
                    }
                    acc = tg_warp_sum(acc);
                    const int j = jb + u;
                    if (lane == 0 && j < nj) {
                        if (has_mask) acc += tg_ld(mask.p + tg_off_bc(mask, j0 + j, qi, h, b), mask.type);
                        ps[qi][j] = acc;
                    }
                }
            }
        }
    }
    __syncthreads();

    /* 2: per query, the chunk's max and exponentials (one warp a query) */
    const int rows = Tq * H * B;
    for (int qi = warp; qi < Tq; qi += ATS_THREADS / 32) {
        float sc = lane < nj ? ps[qi][lane] : -TG_INF;
        float m = tg_warp_max(sc);
        float p = sc == -TG_INF ? 0.0f : expf(sc - m);
        if (lane < nj) ps[qi][lane] = p;
        float l = tg_warp_sum(p);
        if (lane == 0) {
            float *pr = part + ((i64)s * rows + ((i64)b * H + h) * Tq + qi) * (Dv + 2);
            pr[Dv] = m;
            pr[Dv + 1] = l;
        }
    }
    __syncthreads();

    /* 3: p . V, threads over the value dimension */
    for (int d = threadIdx.x; d < Dv; d += blockDim.x) {
        float acc[ATS_TQ];
#pragma unroll
        for (int qi = 0; qi < ATS_TQ; qi++) acc[qi] = 0.0f;
        const char *col = v.p + tg_off(v, d, j0, h, b);
#pragma unroll 8
        for (int j = 0; j < nj; j++) {
            float x = tg_ld(col + (i64)j * v.nb[1], v.type);
#pragma unroll
            for (int qi = 0; qi < ATS_TQ; qi++)
                if (qi < Tq) acc[qi] += ps[qi][j] * x;
        }
        if (KT) { /* a constant index, or attn_split_kt keeps acc in local memory */
#pragma unroll
            for (int qi = 0; qi < ATS_TQ; qi++)
                if (qi < Tq) part[((i64)s * rows + ((i64)b * H + h) * Tq + qi) * (Dv + 2) + d] = acc[qi];
        } else {
            for (int qi = 0; qi < Tq; qi++)
                part[((i64)s * rows + ((i64)b * H + h) * Tq + qi) * (Dv + 2) + d] = acc[qi];
        }
    }
}

extern "C" __global__ void __launch_bounds__(ATS_THREADS) attn_split(const tg_args_attn_split args) {
    ats_body<false>(args);
}

/* attn_split with each score a lane's own dot product (two lanes a key)
 * over the chunk's keys staged in shared memory, not a warp sum a key and
 * query: a decoder prefill's 10 queries made 40 dependent 5-shuffle sums a
 * round of 4 keys, 60 us a block on an H100 (the prefill's cross-attention
 * 0.53 ms a layer at batch 64). The same softmax and p . V; the dot
 * products summed in another order. */
extern "C" __global__ void __launch_bounds__(ATS_THREADS) attn_split_kt(const tg_args_attn_split args) {
    ats_body<true>(args);
}

#include "atd.cuh"

/* F32 K and V: kpw a multiple of 8 (D = 128) or 4 (D = 256). BF16 (the
 * _bf16 entries): twice the keys a round in the same registers (a round
 * is one trip to memory), kpw a multiple of 16 or 8. */
extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32, 4) attn_decode(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<1, 8, false, ATD_WARPS>(args, blockIdx.x, blockIdx.y, blockIdx.z);
}

extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32, 4) attn_decode_bf16(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<1, 16, true, ATD_WARPS>(args, blockIdx.x, blockIdx.y, blockIdx.z);
}

extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32) attn_decode_d256(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<2, 4, false, ATD_WARPS>(args, blockIdx.x, blockIdx.y, blockIdx.z);
}

extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32) attn_decode_d256_bf16(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<2, 8, true, ATD_WARPS>(args, blockIdx.x, blockIdx.y, blockIdx.z);
}

/* D = 128 with a row's chunks as one cluster of at most 8 blocks (sm_90,
 * launched with the cluster's size; cuda_attention.c), no combine
 * launch. */
extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32, 4) attn_decode_cl(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<1, 8, false, ATD_WARPS, true>(args, blockIdx.x, blockIdx.y, blockIdx.z);
}

extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32, 4) attn_decode_cl_bf16(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<1, 16, true, ATD_WARPS, true>(args, blockIdx.x, blockIdx.y, blockIdx.z);
}

/* attn_decode_cl_bf16 with the product that makes its q inside it
 * (tg_attn_decode_q_args; CT_CUDA_ATTN_CROSS_Q, cuda_attention.c): a
 * decoder step's cross q = W LN(x) + b for the cluster's (head, row), then
 * the attention. Each of the cluster's n blocks copies its share of the
 * head's 128 weight rows (ceil(128 / n) rows: the dynamic shared memory)
 * by cp.async before its wait, as they are weights that nothing before it
 * writes, and asks its keys into L2 as attn_decode does; after the wait it
 * norms x's column as mul_mat_vec_mma's whole-block norm does (the mean,
 * then the variance of the centred values; the normed values rounded to
 * BF16, the product's operand type), and a warp a row sums its rows in
 * F32. The rows go to the block's shared memory, the cluster's barrier
 * makes them visible, and each block reads the head's 128 from their
 * owners (distributed shared memory) before its chunk of keys;
 * atd_cluster_combine's two barriers keep every block's rows alive until
 * all have read them. It replaces the q product's launch before the
 * attention (at batch 1: 64 blocks, 3.6 us stamped, 8 a step), yet took
 * 12.7-13.3 us a layer against 3.6 + 6.2 apart on an H100 (twentieth
 * session; resident late, its weights arriving after the wait): off. */
#define ATQ_R 2 /* float4 rounds of x a thread: K <= 8 x the block's threads */

#if TG_CC >= 90
/* The head's q into qfull (the block's shared memory, 128 floats), every
 * block of the cluster alike. */
__device__ __forceinline__ void atq_head_q(const tg_attn_decode_q_args &args, float *qfull) {
    extern __shared__ __align__(16) unsigned char atq_dyn[];
    __shared__ float qpart[128], red[2][32];
    const int K = args.k, n = (int)gridDim.x, s = (int)blockIdx.x, h = (int)blockIdx.y, b = (int)blockIdx.z;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = (int)(blockDim.x >> 5);
    const int bd = (int)blockDim.x;
    const int rpb = (128 + n - 1) / n, r0 = s * rpb, nr = 128 - r0 < rpb ? 128 - r0 : rpb, pieces = K / 8;
    /* the block's weight rows, 16 bytes a copy, before the wait */
    const char *w0 = args.w + (i64)(h * 128 + r0) * args.lda;
    const unsigned ws = smem_addr(atq_dyn);
    for (int i = tid; i < nr * pieces; i += bd) {
        const int r = i / pieces, c = i - r * pieces;
        cp_async16_s(ws + (unsigned)(r * K * 2 + 16 * c), w0 + (i64)r * args.lda + 16 * c);
    }
    cp_async_commit();
    atd_prefetch<ATD_WARPS>(args.a);
    TG_PDL();
    /* x's column b: a float4 a thread a round, ATQ_R rounds */
    float *ys = (float *)(atq_dyn + (size_t)rpb * K * 2);
    const float4 *x4 = (const float4 *)(args.x + (i64)b * args.ldx);
    const int n4 = K / 4;
    float4 v[ATQ_R];
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < ATQ_R; u++) {
        v[u] = tid + u * bd < n4 ? x4[tid + u * bd] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        sum += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    const float mean = tg_block_sum(sum, red[0]) / (float)K;
    float sq = 0.0f;
#pragma unroll
    for (int u = 0; u < ATQ_R; u++) {
        const float a = v[u].x - mean, c = v[u].y - mean, d = v[u].z - mean, e = v[u].w - mean;
        if (tid + u * bd < n4) sq += (a * a + c * c) + (d * d + e * e);
    }
    const float rstd = rsqrtf(tg_block_sum(sq, red[1]) / (float)K + args.eps);
#pragma unroll
    for (int u = 0; u < ATQ_R; u++) {
        const int j = tid + u * bd;
        if (j < n4) {
            const float4 w = args.ln_w ? ((const float4 *)args.ln_w)[j] : make_float4(1.0f, 1.0f, 1.0f, 1.0f);
            const float4 c = args.ln_b ? ((const float4 *)args.ln_b)[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            *(float4 *)(ys + 4 * j) = make_float4(tg_bf2f(tg_f2bf((v[u].x - mean) * rstd * w.x + c.x)),
                                                  tg_bf2f(tg_f2bf((v[u].y - mean) * rstd * w.y + c.y)),
                                                  tg_bf2f(tg_f2bf((v[u].z - mean) * rstd * w.z + c.z)),
                                                  tg_bf2f(tg_f2bf((v[u].w - mean) * rstd * w.w + c.w)));
        }
    }
    cp_async_wait<0>();
    __syncthreads();
    /* a warp a row, its lanes over the row's 16-byte pieces */
    const unsigned short *wsm = (const unsigned short *)atq_dyn;
    for (int r = warp; r < nr; r += nw) {
        float acc = 0.0f;
        for (int c = lane; c < pieces; c += 32) {
            const uint4 wv = *(const uint4 *)(wsm + (size_t)r * K + 8 * c);
            const float4 ya = *(const float4 *)(ys + 8 * c), yb = *(const float4 *)(ys + 8 * c + 4);
            float wa[4], wb[4];
            atd_unpack(make_uint2(wv.x, wv.y), wa);
            atd_unpack(make_uint2(wv.z, wv.w), wb);
            acc += (wa[0] * ya.x + wa[1] * ya.y) + (wa[2] * ya.z + wa[3] * ya.w) + (wb[0] * yb.x + wb[1] * yb.y) +
                   (wb[2] * yb.z + wb[3] * yb.w);
        }
        acc = tg_warp_sum(acc);
        if (lane == 0) qpart[r] = acc + (args.bias ? args.bias[h * 128 + r0 + r] : 0.0f);
    }
    tg_cluster_sync();
    for (int d = tid; d < 128; d += bd) {
        const int o = d / rpb;
        qfull[d] = tg_dsmem(&qpart[d - o * rpb], (unsigned)o);
    }
    __syncthreads();
}
#endif

extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32, 4)
    attn_decode_clq_bf16(const tg_args_attn_decode_clq_bf16 args) {
#if TG_CC >= 90
    __shared__ float qfull[128];
    atq_head_q(args, qfull);
    atd_body<1, 16, true, ATD_WARPS, true, true>(args.a, blockIdx.x, blockIdx.y, blockIdx.z, qfull);
#else
    __trap(); /* the host launches it only where clusters exist */
#endif
}

/* D = 128, one block of TG_ATD_WIDE warps a row (grid (1, H, B), args.direct):
 * where the rows are no more than the SMs and more than a quarter of them
 * (a step at batch 5-16 on 132 SMs: tg_cuda_attn_decode_wide_kpw), a row's
 * keys in at most four rounds a warp (two for the cross-attention's 438
 * frames in BF16, four in F32) and its warps merged in shared memory,
 * instead of chunks of 4-warp blocks and a combine launch. */
extern "C" __global__ void __launch_bounds__(TG_ATD_WIDE * 32, 1) attn_decode_wide(const tg_args_attn_decode args) {
    atd_prefetch<TG_ATD_WIDE>(args);
    TG_PDL();
    atd_body<1, 8, false, TG_ATD_WIDE>(args, blockIdx.x, blockIdx.y, blockIdx.z);
}

extern "C" __global__ void __launch_bounds__(TG_ATD_WIDE * 32, 1) attn_decode_wide_bf16(const tg_args_attn_decode args) {
    atd_prefetch<TG_ATD_WIDE>(args);
    TG_PDL();
    atd_body<1, 16, true, TG_ATD_WIDE>(args, blockIdx.x, blockIdx.y, blockIdx.z);
}

/* BF16, D = 128: a row's keys split over a cluster of 2-8 wide blocks
 * (grid (P, H, B), launched with clusters of P; cuda_attention.c), their
 * partials combined in distributed shared memory as attn_decode_cl_bf16's:
 * where the wide block's rows leave SMs idle (a step at batch 5-8 on 132
 * SMs: the cross-attention's 438 frames, 224 KB a (head, row), on 40-64
 * SMs) the rows' bytes come through P times the SMs, a round a warp
 * (the step 1.2% faster at batch 6 and 8 on an H100). */
extern "C" __global__ void __launch_bounds__(TG_ATD_WIDE * 32, 1) attn_decode_wcl_bf16(const tg_args_attn_decode args) {
    atd_prefetch<TG_ATD_WIDE>(args);
    TG_PDL();
    atd_body<1, 16, true, TG_ATD_WIDE, true>(args, blockIdx.x, blockIdx.y, blockIdx.z);
}

/* One block per query row (qi, h, b): the chunks rescaled to the common
 * max. The chunks' maxima and sums are read by the first warp at once (a
 * lane per chunk), their weights exp(m_s - M) kept in shared memory, so
 * the output's sums over chunks are loads in flight, not a chain. */
#define ATS_MAX_SPLIT 512
extern "C" __global__ void __launch_bounds__(ATS_THREADS) attn_split_combine(const tg_args_attn_split_combine args) {
    TG_PDL();
    const tg_t &o = args.o;
    const float *part = args.part;
    const int n_split = args.n_split, Tq = args.tq, H = args.h;
    const int Dv = (int)o.ne[0];
    const int qi = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const i64 rows = (i64)Tq * H * o.ne[3];
    const i64 r = ((i64)b * H + h) * Tq + qi;
    __shared__ float wsh[ATS_MAX_SPLIT];
    __shared__ float inv_sh;
    const bool cached = n_split <= ATS_MAX_SPLIT;
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        float M = -TG_INF;
        for (int s = lane; s < n_split; s += 32) M = atd_max(M, part[((i64)s * rows + r) * (Dv + 2) + Dv]);
        for (int o = 16; o > 0; o >>= 1) M = atd_max(M, __shfl_xor_sync(0xffffffffu, M, o));
        float L = 0.0f;
        for (int s = lane; s < n_split; s += 32) {
            const float *pr = part + ((i64)s * rows + r) * (Dv + 2);
            const float w = pr[Dv] == -TG_INF ? 0.0f : expf(pr[Dv] - M);
            if (cached) wsh[s] = w;
            L += pr[Dv + 1] * w;
        }
        L = tg_warp_sum(L);
        if (lane == 0) inv_sh = M == -TG_INF ? 0.0f : 1.0f / L; /* NaN stays NaN */
        if (!cached && lane == 0) wsh[0] = M;
    }
    __syncthreads();
    const float inv = inv_sh;
    for (int d = threadIdx.x; d < Dv; d += blockDim.x) {
        float acc = 0.0f;
        if (inv != 0.0f) { /* true for NaN too */
            if (cached) {
#pragma unroll 8
                for (int s = 0; s < n_split; s++) acc += part[((i64)s * rows + r) * (Dv + 2) + d] * wsh[s];
            } else {
                const float M = wsh[0];
                for (int s = 0; s < n_split; s++) {
                    const float *pr = part + ((i64)s * rows + r) * (Dv + 2);
                    if (pr[Dv] != -TG_INF) acc += pr[d] * expf(pr[Dv] - M);
                }
            }
        }
        tg_st(o.p + tg_off(o, d, h, qi, b), o.type, acc * inv);
    }
}
