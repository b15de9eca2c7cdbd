/*
 * attention_split.cu: attention for a few queries over many keys (the
 * decoder's step: one query per head against the self-attention cache or
 * the encoder's frames), split over the keys ("flash-decoding").
 *
 * One query block per head holds too little work for a 132-SM GPU: a step's
 * 16 calls ran 8 blocks each, ~211 us apiece, while the bytes they read take
 * a few microseconds. Here a block takes one chunk of ATS_CHUNK keys of one
 * (head, batch row) for every query (Tq <= ATS_TQ), so a call has
 * ceil(Tk / ATS_CHUNK) x H x B blocks:
 *   1. each warp scores keys of the chunk, several at a time (their K rows
 *      loaded before any reduction, so the loads overlap), lanes over the
 *      head dimension (coalesced), one warp sum per key and query;
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

#define ATS_TQ 8      /* queries per call at most              */
#define ATS_CHUNK 32  /* keys per block                        */
#define ATS_KPW 4     /* keys a warp scores at once            */
#define ATS_DL 8      /* head dimension / 32, at most          */
#define ATS_THREADS 128

/* Partial results of chunk s for query row r = (qi, h, b): part[(s * rows + r) * (Dv + 2) + ...]:
 * Dv outputs, then the chunk's max and sum. */
extern "C" __global__ void __launch_bounds__(ATS_THREADS) attn_split(const tg_args_attn_split args) {
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
        for (int qi = 0; qi < Tq; qi++)
            part[((i64)s * rows + ((i64)b * H + h) * Tq + qi) * (Dv + 2) + d] = acc[qi];
    }
}

/* One block per query row (qi, h, b): the chunks rescaled to the common max. */
extern "C" __global__ void __launch_bounds__(ATS_THREADS) attn_split_combine(const tg_args_attn_split_combine args) {
    TG_PDL();
    const tg_t &o = args.o;
    const float *part = args.part;
    const int n_split = args.n_split, Tq = args.tq, H = args.h;
    const int Dv = (int)o.ne[0];
    const int qi = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const i64 rows = (i64)Tq * H * o.ne[3];
    const i64 r = ((i64)b * H + h) * Tq + qi;
    float M = -TG_INF;
    for (int s = 0; s < n_split; s++) M = fmaxf(M, part[((i64)s * rows + r) * (Dv + 2) + Dv]);
    float L = 0.0f;
    if (M != -TG_INF)
        for (int s = 0; s < n_split; s++) {
            const float *pr = part + ((i64)s * rows + r) * (Dv + 2);
            if (pr[Dv] != -TG_INF) L += pr[Dv + 1] * expf(pr[Dv] - M);
        }
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int d = threadIdx.x; d < Dv; d += blockDim.x) {
        float acc = 0.0f;
        if (M != -TG_INF)
            for (int s = 0; s < n_split; s++) {
                const float *pr = part + ((i64)s * rows + r) * (Dv + 2);
                if (pr[Dv] != -TG_INF) acc += pr[d] * expf(pr[Dv] - M);
            }
        tg_st(o.p + tg_off(o, d, h, qi, b), o.type, acc * inv);
    }
}
