/*
 * atd.cuh: the device body of attention_split.cu's attn_decode kernels
 * (atd_body: one query a (head, batch row) over its keys, a warp's online
 * softmax, the block's warps merged in shared memory), apart from their
 * entry points so that step_chain.cu runs the same code as one phase of a
 * decoder layer. Its comments are those of the kernels it came from.
 *
 * Not here: the entry points and the combine (attention_split.cu), the
 * host's choices (cuda_attention.c).
 */
#ifndef TG_ATD_CUH
#define TG_ATD_CUH
#include "common.cuh"
/* attn_decode: the step's common case, one query per (head, batch row)
 * (Tq == 1), D == Dv = 128 (attn_decode) or 256 (attn_decode_d256), K and
 * V rows contiguous F32 or BF16 (both the same) and 16/8-byte aligned. attn_split (attention_split.cu) is
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
/* atd_xreduce's halvings written out by templates (SEL): no loop left for
 * the compiler to keep rolled. In attn_decode_clq_bf16, whose product's
 * loops come before atd_body, the inner loop stayed a loop over d[], which
 * then lived in local memory (64 bytes of stack a thread). The same
 * sums in the same order. */
template <int KU, int C, int O, int I> struct atd_xr_pairs {
    static __device__ __forceinline__ void run(float (&d)[KU], bool hi) {
        const float send = hi ? d[I] : d[I + C / 2], keep = hi ? d[I + C / 2] : d[I];
        d[I] = keep + __shfl_xor_sync(0xffffffffu, send, O);
        atd_xr_pairs<KU, C, O, I + 1>::run(d, hi);
    }
};
template <int KU, int C, int O> struct atd_xr_pairs<KU, C, O, C / 2> {
    static __device__ __forceinline__ void run(float (&)[KU], bool) {}
};
template <int KU, int C, int O> struct atd_xr_stages {
    static __device__ __forceinline__ void run(float (&d)[KU], int lane) {
        atd_xr_pairs<KU, C, O, 0>::run(d, (lane & O) != 0);
        atd_xr_stages<KU, C / 2, O / 2>::run(d, lane);
    }
};
template <int KU, int O> struct atd_xr_stages<KU, 1, O> {
    static __device__ __forceinline__ void run(float (&)[KU], int) {}
};

template <int KU, bool SEL = false>
__device__ __forceinline__ void atd_xreduce(float (&d)[KU], int lane) {
    if (SEL) {
        atd_xr_stages<KU, KU, 16>::run(d, lane);
    } else {
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

/* The block's chunk s of keys for head h of batch row b: the kernels pass
 * their blockIdx, step_chain.cu the (head, row) its block takes. With QS,
 * the query comes from qs (the block's shared memory, D floats: the
 * clq kernel's product) instead of args.q. */
template <int G, int KU, bool BF, int W, bool CL = false, bool QS = false>
__device__ __forceinline__ void atd_body(const tg_args_attn_decode &args, int s, int h, int b,
                                         const float *qs = nullptr) {
    float *part = (float *)args.part;
    const tg_t &q = args.q, &k = args.k, &v = args.v, &mask = args.mask;
    constexpr int D = 128 * G;
    const int H = (int)q.ne[2], B = (int)q.ne[3];
    const i64 Tk = k.ne[1];
    const int kpw = args.kpw;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __shared__ float os[W][D];
    __shared__ float ms[W], ls[W];

    float qr[G][4], acc[G][4];
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            qr[g][i] = (QS ? qs[128 * g + 4 * lane + i] : tg_ld(q.p + tg_off(q, 128 * g + 4 * lane + i, 0, h, b), q.type)) *
                       args.scale;
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
            atd_xreduce<KU, QS>(d, lane);
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

#endif /* TG_ATD_CUH */
