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

/* attn_decode: the step's common case, one query per (head, batch row)
 * (Tq == 1), D == Dv = 128 (attn_decode) or 256 (attn_decode_d256), K and
 * V rows contiguous F32 or BF16 (both the same) and 16/8-byte aligned. attn_split above is
 * general but reads element by element with a type switch and an offset
 * per load; here each lane holds 4 (or 8) dimensions, so one key's row is a
 * float4 (or 8-byte) load per lane, coalesced, and each warp runs its own
 * online softmax over kpw keys, KU at a time with all their K and V rows
 * and mask values loaded before any reduction: a block's time is its trips
 * to memory (measured at batch 64 on the H200, gating the rows' loads on
 * the mask, a second trip, kept the cross-attention at ~1.6 TB/s), so a
 * round is one trip, and a masked key (-inf) is loaded and dropped. The
 * block's warps are merged in shared memory and the chunk's
 * partial (attn_split's layout) goes to the scratch for attn_split_combine,
 * or, when the row has one chunk (args.direct), the normalised output goes
 * straight to o and no combine follows.
 * G: float4 groups per lane (D / 128). */
#define ATD_WARPS TG_ATD_WARPS

/* One lane's slice of a K or V row, as loaded: a float4 (F32) or four
 * BF16 in a uint2, kept packed in registers until used, so a BF16 round
 * can hold twice the keys in the same registers. */
template <bool BF> struct atd_raw { typedef float4 t; };
template <> struct atd_raw<true> { typedef uint2 t; };

__device__ __forceinline__ void atd_load(const char *p, int g, int lane, float4 &x) {
    x = ((const float4 *)p)[lane + 32 * g];
}
__device__ __forceinline__ void atd_load(const char *p, int g, int lane, uint2 &x) {
    x = ((const uint2 *)p)[lane + 32 * g];
}
__device__ __forceinline__ void atd_unpack(const float4 &x, float r[4]) {
    r[0] = x.x, r[1] = x.y, r[2] = x.z, r[3] = x.w;
}
__device__ __forceinline__ void atd_unpack(const uint2 &x, float r[4]) {
    r[0] = __uint_as_float(x.x << 16), r[1] = __uint_as_float(x.x & 0xffff0000u);
    r[2] = __uint_as_float(x.y << 16), r[3] = __uint_as_float(x.y & 0xffff0000u);
}

/* max that keeps a NaN (fmaxf drops it): a NaN score reaches the output as
 * NaN, as on the CPU, instead of vanishing behind -inf. */
__device__ __forceinline__ float atd_max(float a, float b) { return a != a ? a : b != b ? b : fmaxf(a, b); }

/* A row's chunks as one thread block cluster (sm_90; the grid's x is the
 * cluster, and args.part is not read): each block keeps its chunk's output, max and sum
 * in its own shared memory, and after the cluster's barrier the first
 * block reads them all through distributed shared memory and writes the
 * row, as attn_split_combine would from the scratch: the same weights
 * exp(m_s - M), the same sums in chunk order, so the same bits. The
 * second barrier keeps every block's shared memory alive until the first
 * has read it. Instead of a combine launch after the chunks (at batch 1 a
 * cross-attention's 7 chunks a head, then 8 blocks of attn_split_combine:
 * 4.2 us of the 431 us step, 8 times). */

template <int D, int W>
__device__ __forceinline__ void atd_cluster_combine(const tg_args_attn_decode &args, float (*os)[D], const float *sw,
                                                    float M, float L, int h, int b) {
#if TG_CC >= 90
    __shared__ float ob[D], mlb[2];
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float o = 0.0f;
#pragma unroll
        for (int w = 0; w < W; w++) o += os[w][d] * sw[w];
        ob[d] = o;
    }
    if (threadIdx.x == 0) mlb[0] = M, mlb[1] = M == -TG_INF ? 0.0f : L;
    tg_cluster_sync();
    if (blockIdx.x == 0) {
        /* the first warp as attn_split_combine's: a lane a chunk, the max
         * and the sum over lanes in the same shuffle order */
        __shared__ float wsh[8], inv_sh;
        const int n = (int)gridDim.x;
        if (threadIdx.x < 32) {
            const int lane = threadIdx.x;
            const float m = lane < n ? tg_dsmem(&mlb[0], (unsigned)lane) : -TG_INF;
            const float l = lane < n ? tg_dsmem(&mlb[1], (unsigned)lane) : 0.0f;
            float Mg = m;
            for (int o = 16; o > 0; o >>= 1) Mg = atd_max(Mg, __shfl_xor_sync(0xffffffffu, Mg, o));
            const float w = m == -TG_INF ? 0.0f : expf(m - Mg);
            if (lane < n) wsh[lane] = w;
            const float Lg = tg_warp_sum(lane < n ? l * w : 0.0f);
            if (lane == 0) inv_sh = Mg == -TG_INF ? 0.0f : 1.0f / Lg; /* NaN stays NaN */
        }
        __syncthreads();
        const float inv = inv_sh;
        for (int d = threadIdx.x; d < D; d += blockDim.x) {
            /* every rank's value asked for before the first sum (the
             * loads are volatile, so in the order written) */
            float ov[8];
#pragma unroll
            for (int r = 0; r < 8; r++) ov[r] = r < n ? tg_dsmem(&ob[d], (unsigned)r) : 0.0f;
            float acc = 0.0f;
            if (inv != 0.0f) /* true for NaN too */
#pragma unroll
                for (int r = 0; r < 8; r++)
                    if (r < n) acc += ov[r] * wsh[r];
            tg_st(args.o.p + tg_off(args.o, d, h, 0, b), args.o.type, acc * inv);
        }
    }
    tg_cluster_sync();
#else
    __trap(); /* the host launches it only where clusters exist */
#endif
}

/* A round's KU dot products (KU a power of two, at most 32), each lane
 * holding its partial of every key in d, summed over the warp by a
 * transposed reduction: at each of log2(KU) halvings a lane keeps one half
 * of its keys and hands the other half to its partner (lane ^ o), so
 * 16 keys take 8 + 4 + 2 + 1 + 1 shuffles instead of 16 x 5; d[0] ends
 * as the full sum of key atd_xkey(lane), which every lane of that key
 * holds (a + b and b + a are the same). */
template <int KU>
__device__ __forceinline__ void atd_xreduce(float (&d)[KU], int lane) {
    int o = 16;
#pragma unroll
    for (int c = KU; c > 1; c >>= 1, o >>= 1) {
        const bool hi = (lane & o) != 0;
#pragma unroll
        for (int i = 0; i < c / 2; i++) {
            const float send = hi ? d[i] : d[i + c / 2], keep = hi ? d[i + c / 2] : d[i];
            d[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
    }
#pragma unroll
    for (int r = 32 / KU / 2; r > 0; r >>= 1) d[0] += __shfl_xor_sync(0xffffffffu, d[0], r);
}

/* The key whose sum lane holds after atd_xreduce<KU>, and a lane holding
 * key u's. */
template <int KU> __device__ __forceinline__ int atd_xkey(int lane) {
    int key = 0;
#pragma unroll
    for (int c = KU, o = 16; c > 1; c >>= 1, o >>= 1) key = 2 * key + ((lane & o) != 0);
    return key;
}
template <int KU> __device__ __forceinline__ int atd_xlane(int u) {
    int lane = 0;
#pragma unroll
    for (int c = KU, o = 16, bit = KU / 2; c > 1; c >>= 1, o >>= 1, bit >>= 1) lane |= (u & bit) ? o : 0;
    return lane;
}

template <int G, int KU, bool BF, int W, bool CL = false>
__device__ __forceinline__ void atd_body(const tg_args_attn_decode &args) {
    float *part = (float *)args.part;
    const tg_t &q = args.q, &k = args.k, &v = args.v, &mask = args.mask;
    constexpr int D = 128 * G;
    const int H = (int)q.ne[2], B = (int)q.ne[3];
    const i64 Tk = k.ne[1];
    const int s = blockIdx.x, h = blockIdx.y, b = blockIdx.z, kpw = args.kpw;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __shared__ float os[W][D];
    __shared__ float ms[W], ls[W];

    float qr[G][4], acc[G][4];
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            qr[g][i] = tg_ld(q.p + tg_off(q, 128 * g + 4 * lane + i, 0, h, b), q.type) * args.scale;
            acc[g][i] = 0.0f;
        }
    float m = -TG_INF, l = 0.0f;
    const char *kb = k.p + (i64)h * k.nb[2] + (i64)b * k.nb[3];
    const char *vb = v.p + (i64)h * v.nb[2] + (i64)b * v.nb[3];
    const i64 j0 = ((i64)s * W + warp) * kpw;
    /* a wide block's warp whose keys start past Tk loads nothing (a round
     * of keys all past the end changes nothing); the 4-warp kernels keep
     * the loop they were measured with */
    /* args.xr (D = 128): the round's scores by atd_xreduce, each lane
     * scoring (and loading the mask value of) one key, one exponential a
     * lane, the p's handed out by shuffles */
    const bool xr = G == 1 && args.xr != 0;
    /* args.skip (with xr and a mask): each lane loads its key's mask value
     * for the next round too, and a round whose keys are all masked (or
     * past the row's end) loads nothing and is skipped: the decoder's
     * self-attention reads its whole cache every step, the keys past the
     * step's position masked. Skipping such a round changes no bit (its
     * p's are 0, its max leaves m, so corr is 1). The first round is
     * never skipped: its mask comes in the same trip as its rows. */
    const bool skip = xr && args.skip != 0 && args.has_mask;
    const int xkey = atd_xkey<KU>(lane);
    float sl_next = 0.0f;
    for (int jj = 0; jj < kpw && (W == ATD_WARPS || j0 + jj < Tk); jj += KU) {
        typename atd_raw<BF>::t kr[KU][G], vr[KU][G];
        float sc[KU];
        bool ok[KU];
        if (xr) {
            const i64 j = j0 + jj + xkey;
            const bool in = j < Tk && jj + xkey < kpw;
            float sl = skip && jj > 0 ? sl_next
                       : args.has_mask && in ? tg_ld(mask.p + tg_off_bc(mask, j, 0, h, b), mask.type) : 0.0f;
            if (skip) {
                const bool in_next = j + KU < Tk && jj + KU + xkey < kpw;
                sl_next = in_next ? tg_ld(mask.p + tg_off_bc(mask, j + KU, 0, h, b), mask.type) : -TG_INF;
                if (jj > 0 && !__any_sync(0xffffffffu, in && sl != -TG_INF)) continue;
            }
#pragma unroll
            for (int u = 0; u < KU; u++) {
                const i64 ju = j0 + jj + u < Tk ? j0 + jj + u : Tk - 1;
                atd_load(kb + ju * k.nb[1], 0, lane, kr[u][0]);
                atd_load(vb + ju * v.nb[1], 0, lane, vr[u][0]);
            }
            float d[KU];
#pragma unroll
            for (int u = 0; u < KU; u++) {
                float kf[4];
                atd_unpack(kr[u][0], kf);
                d[u] = 0.0f;
#pragma unroll
                for (int i = 0; i < 4; i++) d[u] += qr[0][i] * kf[i];
            }
            atd_xreduce<KU>(d, lane);
            const bool okl = in && sl != -TG_INF;
            sl = okl ? sl + d[0] : -TG_INF;
            float mx = sl;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) mx = atd_max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            mx = atd_max(m, mx);
            if (mx == -TG_INF) continue; /* every key so far masked */
            const float corr = m == -TG_INF ? 0.0f : expf(m - mx);
            l *= corr;
#pragma unroll
            for (int i = 0; i < 4; i++) acc[0][i] *= corr;
            const unsigned okb = __ballot_sync(0xffffffffu, okl);
            const float pl = okl ? expf(sl - mx) : 0.0f;
#pragma unroll
            for (int u = 0; u < KU; u++) {
                const int src = atd_xlane<KU>(u);
                if (!((okb >> src) & 1u)) continue;
                const float p = __shfl_sync(0xffffffffu, pl, src);
                l += p;
                float vf[4];
                atd_unpack(vr[u][0], vf);
#pragma unroll
                for (int i = 0; i < 4; i++) acc[0][i] += p * vf[i];
            }
            m = mx;
            continue;
        }
#pragma unroll
        for (int u = 0; u < KU; u++) {
            /* every load of the round at once: the mask does not gate the
             * rows' loads (that would cost a second trip to memory) */
            const i64 j = j0 + jj + u < Tk ? j0 + jj + u : Tk - 1;
            ok[u] = j0 + jj + u < Tk && jj + u < kpw;
            sc[u] = args.has_mask ? tg_ld(mask.p + tg_off_bc(mask, j, 0, h, b), mask.type) : 0.0f;
#pragma unroll
            for (int g = 0; g < G; g++) {
                atd_load(kb + j * k.nb[1], g, lane, kr[u][g]);
                atd_load(vb + j * v.nb[1], g, lane, vr[u][g]);
            }
        }
#pragma unroll
        for (int u = 0; u < KU; u++)
            if (sc[u] == -TG_INF) ok[u] = false;
        float mx = m;
#pragma unroll
        for (int u = 0; u < KU; u++) {
            float dot = 0.0f;
            if (ok[u]) {
#pragma unroll
                for (int g = 0; g < G; g++) {
                    float kf[4];
                    atd_unpack(kr[u][g], kf);
#pragma unroll
                    for (int i = 0; i < 4; i++) dot += qr[g][i] * kf[i];
                }
            }
            dot = tg_warp_sum(dot);
            sc[u] = ok[u] ? sc[u] + dot : -TG_INF;
            mx = atd_max(mx, sc[u]);
        }
        if (mx == -TG_INF) continue; /* every key so far masked */
        const float corr = m == -TG_INF ? 0.0f : expf(m - mx);
        l *= corr;
#pragma unroll
        for (int g = 0; g < G; g++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[g][i] *= corr;
#pragma unroll
        for (int u = 0; u < KU; u++) {
            if (!ok[u]) continue;
            const float p = expf(sc[u] - mx);
            l += p;
#pragma unroll
            for (int g = 0; g < G; g++) {
                float vf[4];
                atd_unpack(vr[u][g], vf);
#pragma unroll
                for (int i = 0; i < 4; i++) acc[g][i] += p * vf[i];
            }
        }
        m = mx;
    }
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int i = 0; i < 4; i++) os[warp][128 * g + 4 * lane + i] = acc[g][i];
    if (lane == 0) ms[warp] = m, ls[warp] = l;
    __syncthreads();
    float M = -TG_INF;
#pragma unroll
    for (int w = 0; w < W; w++) M = atd_max(M, ms[w]);
    const i64 rows = (i64)H * B, r = (i64)b * H + h;
    float *pr = part + ((i64)s * rows + r) * (D + 2);
    float L = 0.0f, sw[W];
#pragma unroll
    for (int w = 0; w < W; w++) {
        sw[w] = ms[w] == -TG_INF ? 0.0f : expf(ms[w] - M);
        L += ls[w] * sw[w];
    }
    if (args.direct) {
        /* the row's only chunk: normalised here, as attn_split_combine
         * would (all keys masked: zeros; a NaN stays NaN) */
        const float inv = M == -TG_INF ? 0.0f : 1.0f / L;
        for (int d = threadIdx.x; d < D; d += blockDim.x) {
            float o = 0.0f;
            if (inv != 0.0f) {
#pragma unroll
                for (int w = 0; w < W; w++) o += os[w][d] * sw[w];
            }
            tg_st(args.o.p + tg_off(args.o, d, h, 0, b), args.o.type, o * inv);
        }
        return;
    }
    if (CL) {
        atd_cluster_combine<D, W>(args, os, sw, M, L, h, b);
    } else {
        for (int d = threadIdx.x; d < D; d += blockDim.x) {
            float o = 0.0f;
#pragma unroll
            for (int w = 0; w < W; w++) o += os[w][d] * sw[w];
            pr[d] = o;
        }
        if (threadIdx.x == 0) pr[D] = M, pr[D + 1] = M == -TG_INF ? 0.0f : L;
    }
}

/* The block's keys' K and V rows asked into L2, a thread a 128-byte line
 * (args.prefetch): before the wait for the kernel before, which at a
 * decoder step is the product making q, so the rows come from memory while
 * it runs and the rounds after the wait find them in L2. A hint only: L2
 * is where every write lands, so a row the kernel before writes (the
 * self-attention's newest key) is read as written whatever was asked. */
template <int W>
__device__ __forceinline__ void atd_prefetch(const tg_args_attn_decode &args) {
    if (!args.prefetch) return;
    const tg_t &k = args.k, &v = args.v;
    const i64 Tk = k.ne[1], j0 = (i64)blockIdx.x * W * args.kpw;
    const i64 nj = Tk - j0 < (i64)W * args.kpw ? Tk - j0 : (i64)W * args.kpw;
    const int lk = (int)((k.ne[0] * (k.type == TG_KT_F32 ? 4 : 2) + 127) / 128);
    const int lv = (int)((v.ne[0] * (v.type == TG_KT_F32 ? 4 : 2) + 127) / 128);
    const char *kb = k.p + (i64)blockIdx.y * k.nb[2] + (i64)blockIdx.z * k.nb[3] + j0 * k.nb[1];
    const char *vb = v.p + (i64)blockIdx.y * v.nb[2] + (i64)blockIdx.z * v.nb[3] + j0 * v.nb[1];
    const int n = (int)nj * (lk + lv); /* at most a few thousand lines */
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int j = i / (lk + lv), l = i - j * (lk + lv);
        const char *p = l < lk ? kb + (i64)j * k.nb[1] + 128 * l : vb + (i64)j * v.nb[1] + 128 * (l - lk);
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
    }
}

/* F32 K and V: kpw a multiple of 8 (D = 128) or 4 (D = 256). BF16 (the
 * _bf16 entries): twice the keys a round in the same registers (a round
 * is one trip to memory), kpw a multiple of 16 or 8. */
extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32, 4) attn_decode(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<1, 8, false, ATD_WARPS>(args);
}

extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32, 4) attn_decode_bf16(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<1, 16, true, ATD_WARPS>(args);
}

extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32) attn_decode_d256(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<2, 4, false, ATD_WARPS>(args);
}

extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32) attn_decode_d256_bf16(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<2, 8, true, ATD_WARPS>(args);
}

/* D = 128 with a row's chunks as one cluster of at most 8 blocks (sm_90,
 * launched with the cluster's size; cuda_attention.c), no combine
 * launch. */
extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32, 4) attn_decode_cl(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<1, 8, false, ATD_WARPS, true>(args);
}

extern "C" __global__ void __launch_bounds__(ATD_WARPS * 32, 4) attn_decode_cl_bf16(const tg_args_attn_decode args) {
    atd_prefetch<ATD_WARPS>(args);
    TG_PDL();
    atd_body<1, 16, true, ATD_WARPS, true>(args);
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
    atd_body<1, 8, false, TG_ATD_WIDE>(args);
}

extern "C" __global__ void __launch_bounds__(TG_ATD_WIDE * 32, 1) attn_decode_wide_bf16(const tg_args_attn_decode args) {
    atd_prefetch<TG_ATD_WIDE>(args);
    TG_PDL();
    atd_body<1, 16, true, TG_ATD_WIDE>(args);
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
