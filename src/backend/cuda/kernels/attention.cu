/*
 * attention.cu: out = softmax(q·kᵀ·scale + mask)·v in one kernel.
 *
 * Flash-attention's order of work without its tensor-core tiles: a block holds
 * 16 queries of one head (4 warps × 4 queries) and walks the keys in tiles of
 * 32 staged in shared memory; lane j scores key j of the tile (K rows padded by
 * one float, so the 32 lanes hit 32 banks), the running max and sum are kept
 * per query (online softmax), and each lane accumulates Dv/32 output
 * dimensions. Everything is F32 with F32 accumulation, so a TG_PREC_F32
 * request is met as asked. The additive mask carries both the relative
 * position bias and -inf masking; a query whose keys are all masked gets zeros.
 * Head sizes 16..256 (TG_DVL = max(2, ceil(Dv/32)) is the specialisation
 * constant).
 *
 * Not here: tensor-core (mma/wgmma) tiles; see cuda_ops.c for the launch.
 */
#include "common.cuh"

#ifndef TG_DVL
#define TG_DVL 8
#endif
#define ATT_QW 4   /* queries per warp */
#define ATT_BQ 16  /* queries per block */
#define ATT_BK 32  /* keys per tile */

extern "C" __global__ void __launch_bounds__(128) attention(const tg_args_attention args) {
    TG_PDL();
    const tg_t &o = args.o, &q = args.q, &k = args.k, &v = args.v, &mask = args.mask;
    const int has_mask = args.has_mask;
    const float scale = args.scale;
    extern __shared__ float smem[];
    const int D = (int)q.ne[0], Dv = (int)v.ne[0];
    const i64 Tq = q.ne[1], Tk = k.ne[1];
    const int h = blockIdx.y, b = blockIdx.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float *Ks = smem;                      /* [ATT_BK][D + 1] */
    float *Vs = Ks + ATT_BK * (D + 1);     /* [ATT_BK][Dv]    */
    float *Qs = Vs + ATT_BK * Dv;          /* [ATT_BQ][D]     */

    const i64 q0 = (i64)blockIdx.x * ATT_BQ;
    for (int e = threadIdx.x; e < ATT_BQ * D; e += blockDim.x) {
        int r = e / D, d = e % D;
        i64 iq = q0 + r;
        Qs[e] = iq < Tq ? tg_ld(q.p + tg_off(q, d, iq, h, b), q.type) : 0.0f;
    }

    float acc[ATT_QW][TG_DVL];
    float m[ATT_QW], l[ATT_QW];
#pragma unroll
    for (int qi = 0; qi < ATT_QW; qi++) {
        m[qi] = -TG_INF;
        l[qi] = 0.0f;
#pragma unroll
        for (int c = 0; c < TG_DVL; c++) acc[qi][c] = 0.0f;
    }

    for (i64 t0 = 0; t0 < Tk; t0 += ATT_BK) {
        __syncthreads();
        for (int e = threadIdx.x; e < ATT_BK * D; e += blockDim.x) {
            int j = e / D, d = e % D;
            i64 ik = t0 + j;
            Ks[j * (D + 1) + d] = ik < Tk ? tg_ld(k.p + tg_off(k, d, ik, h, b), k.type) : 0.0f;
        }
        for (int e = threadIdx.x; e < ATT_BK * Dv; e += blockDim.x) {
            int j = e / Dv, d = e % Dv;
            i64 ik = t0 + j;
            Vs[e] = ik < Tk ? tg_ld(v.p + tg_off(v, d, ik, h, b), v.type) : 0.0f;
        }
        __syncthreads();
        const i64 ik = t0 + lane;
#pragma unroll
        for (int qi = 0; qi < ATT_QW; qi++) {
            const int r = warp * ATT_QW + qi;
            const i64 iq = q0 + r;
            if (iq >= Tq) continue; /* uniform across the warp */
            const float *qrow = Qs + r * D;
            const float *krow = Ks + lane * (D + 1);
            float s = 0.0f;
#pragma unroll 4
            for (int d = 0; d < D; d++) s += qrow[d] * krow[d];
            s *= scale;
            if (ik >= Tk) s = -TG_INF;
            else if (has_mask) s += tg_ld(mask.p + tg_off_bc(mask, ik, iq, h, b), mask.type);
            float mt = tg_warp_max(s);
            float mn = fmaxf(m[qi], mt);
            if (mn == -TG_INF) continue;
            float p = s == -TG_INF ? 0.0f : expf(s - mn);
            float corr = m[qi] == -TG_INF ? 0.0f : expf(m[qi] - mn);
            l[qi] = l[qi] * corr + tg_warp_sum(p);
            m[qi] = mn;
#pragma unroll
            for (int c = 0; c < TG_DVL; c++) acc[qi][c] *= corr;
#pragma unroll 8
            for (int jj = 0; jj < ATT_BK; jj++) {
                float pj = __shfl_sync(0xffffffffu, p, jj);
                const float *vrow = Vs + jj * Dv;
#pragma unroll
                for (int c = 0; c < TG_DVL; c++) {
                    int d = lane + 32 * c;
                    if (d < Dv) acc[qi][c] += pj * vrow[d];
                }
            }
        }
    }

#pragma unroll
    for (int qi = 0; qi < ATT_QW; qi++) {
        const i64 iq = q0 + warp * ATT_QW + qi;
        if (iq >= Tq) continue;
        float inv = l[qi] > 0.0f ? 1.0f / l[qi] : 0.0f;
#pragma unroll
        for (int c = 0; c < TG_DVL; c++) {
            int d = lane + 32 * c;
            if (d < Dv) tg_st(o.p + tg_off(o, d, h, iq, b), o.type, acc[qi][c] * inv);
        }
    }
}
