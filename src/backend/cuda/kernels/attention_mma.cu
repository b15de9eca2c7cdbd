/*
 * attention_mma.cu: attention on the tensor cores (bf16 mma.sync m16n8k16,
 * f32 accumulation), flash-attention order: a warp owns 16 queries, a block
 * 64; keys come in tiles of 64 staged in shared memory as bf16 (K as rows,
 * V transposed, both padded so the fragment loads hit 32 distinct banks).
 * Scores are scaled, biased by the mask and soft-maxed online in f32; the
 * probabilities go back into the tensor cores as bf16 for P·V.
 *
 * Specialised by the head sizes (TG_AD for q/k, TG_ADV for v; multiples of
 * 16 up to 160, the model's 128 and 160), so every fragment index is a
 * compile-time constant and lives in registers. The host uses this kernel
 * for default-precision attention on sm_80 and newer; F32-precision requests
 * and other head sizes take attention.cu.
 *
 * Not here: wgmma (sm_90a) or TMA staging.
 */
#include "common.cuh"

#ifndef TG_AD
#define TG_AD 128
#endif
#ifndef TG_ADV
#define TG_ADV TG_AD
#endif
#define AM_BK 64                 /* keys per tile          */
#define AM_KS (TG_AD + 8)        /* K row stride, bf16     */
#define AM_VS (AM_BK + 8)        /* V^T row stride, bf16   */

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    return (unsigned)tg_f2bf(lo) | ((unsigned)tg_f2bf(hi) << 16);
}

__device__ __forceinline__ void mma_bf16(float *c, const unsigned *a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(128) attention_mma(tg_t o, tg_t q, tg_t k, tg_t v, tg_t mask,
                                                                int has_mask, float scale) {
    TG_PDL();
#if TG_CC >= 80
    extern __shared__ unsigned short smem16[];
    unsigned short *Ks = smem16;                 /* [AM_BK][AM_KS]  */
    unsigned short *Vt = smem16 + AM_BK * AM_KS; /* [TG_ADV][AM_VS] */
    const i64 Tq = q.ne[1], Tk = k.ne[1];
    const int h = blockIdx.y, b = blockIdx.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const i64 r0 = (i64)blockIdx.x * 64 + warp * 16 + g; /* this thread's rows: r0 and r0 + 8 */
    const i64 r1 = r0 + 8;

    /* Q fragments (A operand), straight from global memory. */
    unsigned qa[TG_AD / 16][4];
#pragma unroll
    for (int kc = 0; kc < TG_AD / 16; kc++) {
#pragma unroll
        for (int part = 0; part < 4; part++) {
            i64 row = (part & 1) ? r1 : r0;
            int col = kc * 16 + t * 2 + ((part & 2) ? 8 : 0);
            float x0 = 0.0f, x1 = 0.0f;
            if (row < Tq) {
                const char *p = q.p + tg_off(q, col, row, h, b);
                x0 = tg_ld(p, q.type);
                x1 = tg_ld(p + q.nb[0], q.type);
            }
            qa[kc][part] = pack_bf16(x0, x1);
        }
    }

    float acc[TG_ADV / 8][4];
#pragma unroll
    for (int nc = 0; nc < TG_ADV / 8; nc++) acc[nc][0] = acc[nc][1] = acc[nc][2] = acc[nc][3] = 0.0f;
    float m0 = -TG_INF, m1 = -TG_INF, l0 = 0.0f, l1 = 0.0f;

    for (i64 k0 = 0; k0 < Tk; k0 += AM_BK) {
        __syncthreads();
        for (int e = threadIdx.x; e < AM_BK * (TG_AD / 2); e += blockDim.x) {
            int j = e / (TG_AD / 2), dp = e % (TG_AD / 2);
            i64 kj = k0 + j;
            unsigned w = 0;
            if (kj < Tk) {
                const char *p = k.p + tg_off(k, 2 * dp, kj, h, b);
                w = pack_bf16(tg_ld(p, k.type), tg_ld(p + k.nb[0], k.type));
            }
            *(unsigned *)(Ks + j * AM_KS + 2 * dp) = w;
        }
        for (int e = threadIdx.x; e < AM_BK * TG_ADV; e += blockDim.x) {
            int j = e / TG_ADV, d = e % TG_ADV;
            i64 kj = k0 + j;
            float x = kj < Tk ? tg_ld(v.p + tg_off(v, d, kj, h, b), v.type) : 0.0f;
            Vt[d * AM_VS + j] = tg_f2bf(x);
        }
        __syncthreads();

        /* S = Q·Kᵀ for 64 keys: 8 chunks of 8. */
        float s[AM_BK / 8][4];
#pragma unroll
        for (int nc = 0; nc < AM_BK / 8; nc++) {
            s[nc][0] = s[nc][1] = s[nc][2] = s[nc][3] = 0.0f;
            const unsigned short *kr = Ks + (nc * 8 + g) * AM_KS + t * 2;
#pragma unroll
            for (int kc = 0; kc < TG_AD / 16; kc++) {
                unsigned b0 = *(const unsigned *)(kr + kc * 16);
                unsigned b1 = *(const unsigned *)(kr + kc * 16 + 8);
                mma_bf16(s[nc], qa[kc], b0, b1);
            }
        }
        /* Scale, mask, and the running max per row. */
        float mt0 = -TG_INF, mt1 = -TG_INF;
#pragma unroll
        for (int nc = 0; nc < AM_BK / 8; nc++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                i64 kj = k0 + nc * 8 + t * 2 + (e & 1);
                i64 row = (e & 2) ? r1 : r0;
                float x = s[nc][e] * scale;
                if (kj >= Tk || row >= Tq) x = -TG_INF;
                else if (has_mask) x += tg_ld(mask.p + tg_off_bc(mask, kj, row, h, b), mask.type);
                s[nc][e] = x;
                if (e & 2) mt1 = fmaxf(mt1, x);
                else mt0 = fmaxf(mt0, x);
            }
        }
        mt0 = fmaxf(mt0, __shfl_xor_sync(0xffffffffu, mt0, 1));
        mt0 = fmaxf(mt0, __shfl_xor_sync(0xffffffffu, mt0, 2));
        mt1 = fmaxf(mt1, __shfl_xor_sync(0xffffffffu, mt1, 1));
        mt1 = fmaxf(mt1, __shfl_xor_sync(0xffffffffu, mt1, 2));
        float mn0 = fmaxf(m0, mt0), mn1 = fmaxf(m1, mt1);
        float c0 = (m0 == -TG_INF) ? (mn0 == -TG_INF ? 1.0f : 0.0f) : expf(m0 - mn0);
        float c1 = (m1 == -TG_INF) ? (mn1 == -TG_INF ? 1.0f : 0.0f) : expf(m1 - mn1);
        m0 = mn0;
        m1 = mn1;
        float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
        for (int nc = 0; nc < AM_BK / 8; nc++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float mm = (e & 2) ? mn1 : mn0;
                float p = (s[nc][e] == -TG_INF || mm == -TG_INF) ? 0.0f : expf(s[nc][e] - mm);
                s[nc][e] = p;
                if (e & 2) ps1 += p;
                else ps0 += p;
            }
        }
        l0 = l0 * c0 + ps0;
        l1 = l1 * c1 + ps1;
#pragma unroll
        for (int nc = 0; nc < TG_ADV / 8; nc++) {
            acc[nc][0] *= c0;
            acc[nc][1] *= c0;
            acc[nc][2] *= c1;
            acc[nc][3] *= c1;
        }
        /* O += P·V: P from the score fragments, V^T rows from shared memory. */
#pragma unroll
        for (int kc = 0; kc < AM_BK / 16; kc++) {
            unsigned pa[4];
            pa[0] = pack_bf16(s[2 * kc][0], s[2 * kc][1]);
            pa[1] = pack_bf16(s[2 * kc][2], s[2 * kc][3]);
            pa[2] = pack_bf16(s[2 * kc + 1][0], s[2 * kc + 1][1]);
            pa[3] = pack_bf16(s[2 * kc + 1][2], s[2 * kc + 1][3]);
#pragma unroll
            for (int nc = 0; nc < TG_ADV / 8; nc++) {
                const unsigned short *vr = Vt + (nc * 8 + g) * AM_VS + kc * 16 + t * 2;
                unsigned b0 = *(const unsigned *)vr;
                unsigned b1 = *(const unsigned *)(vr + 8);
                mma_bf16(acc[nc], pa, b0, b1);
            }
        }
    }

    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    float i0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, i1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
    for (int nc = 0; nc < TG_ADV / 8; nc++) {
        int d = nc * 8 + t * 2;
        if (r0 < Tq) {
            tg_st(o.p + tg_off(o, d, h, r0, b), o.type, acc[nc][0] * i0);
            tg_st(o.p + tg_off(o, d + 1, h, r0, b), o.type, acc[nc][1] * i0);
        }
        if (r1 < Tq) {
            tg_st(o.p + tg_off(o, d, h, r1, b), o.type, acc[nc][2] * i1);
            tg_st(o.p + tg_off(o, d + 1, h, r1, b), o.type, acc[nc][3] * i1);
        }
    }
#endif
}
