/*
 * softmax.cu: softmax over dim 0 of (a*scale + mask), scale and mask fused.
 *
 * One block per row: an online pass keeps the running max and the sum of
 * exponentials together (one read), a second pass writes. The mask broadcasts
 * over dims 2 and 3; -inf masks an entry, and a row masked entirely gives
 * zeros rather than NaN.
 *
 * Not here: attention (attention.cu fuses its own softmax).
 */
#include "common.cuh"

extern "C" __global__ void soft_max(const tg_args_soft_max args) {
    TG_PDL();
    const tg_t &d = args.d, &a = args.a, &mask = args.mask;
    const int has_mask = args.has_mask;
    const float scale = args.scale;
    __shared__ float shm[32], shs[32];
    i64 r = blockIdx.x;
    i64 i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
    const char *src = a.p + tg_off(a, 0, i1, i2, i3);
    const char *msk = has_mask ? mask.p + tg_off_bc(mask, 0, i1, i2, i3) : 0;
    char *dst = d.p + tg_off(d, 0, i1, i2, i3);
    i64 n = a.ne[0];
    float m = -TG_INF, s = 0.0f;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float x = tg_ld(src + i * a.nb[0], a.type) * scale;
        if (msk) x += tg_ld(msk + i * mask.nb[0], mask.type);
        if (x > m) {
            s = (m == -TG_INF ? 0.0f : s * expf(m - x)) + 1.0f;
            m = x;
        } else if (x != -TG_INF) {
            s += expf(x - m);
        }
    }
    float gm = tg_block_max(m, shm);
    float contrib = (m == -TG_INF) ? 0.0f : s * expf(m - gm);
    float gs = tg_block_sum(contrib, shs);
    float inv = (gm == -TG_INF || gs == 0.0f) ? 0.0f : 1.0f / gs;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float x = tg_ld(src + i * a.nb[0], a.type) * scale;
        if (msk) x += tg_ld(msk + i * mask.nb[0], mask.type);
        float y = (gm == -TG_INF || x == -TG_INF) ? 0.0f : expf(x - gm) * inv;
        tg_st(dst + i * d.nb[0], d.type, y);
    }
}

/* One warp per row, 8 rows per block, for F32 rows whose dim 0 is
 * contiguous and 16-byte aligned (mask too), ne0 = 4*n4 <= 4*32*TG_SM_WV:
 * the row (with the mask added) is read once into registers. */
#define TG_SM_WV 12
extern "C" __global__ void __launch_bounds__(256) soft_max_w4(const tg_args_soft_max_w4 args) {
    TG_PDL();
    const tg_t &d = args.d, &a = args.a, &mask = args.mask;
    const int has_mask = args.has_mask;
    const float scale = args.scale;
    const i64 rows = args.rows;
    i64 r = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    int lane = threadIdx.x & 31;
    i64 i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
    const float4 *src = (const float4 *)(a.p + tg_off(a, 0, i1, i2, i3));
    const float4 *msk = has_mask ? (const float4 *)(mask.p + tg_off_bc(mask, 0, i1, i2, i3)) : 0;
    float4 *dst = (float4 *)(d.p + tg_off(d, 0, i1, i2, i3));
    int n4 = (int)(a.ne[0] >> 2);
    float4 x[TG_SM_WV];
    float m = -TG_INF;
#pragma unroll
    for (int k = 0; k < TG_SM_WV; k++) {
        int i = lane + 32 * k;
        if (i < n4) {
            float4 v = src[i];
            v.x *= scale; v.y *= scale; v.z *= scale; v.w *= scale;
            if (msk) {
                float4 q = msk[i];
                v.x += q.x; v.y += q.y; v.z += q.z; v.w += q.w;
            }
            x[k] = v;
            m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
        } else {
            x[k] = make_float4(-TG_INF, -TG_INF, -TG_INF, -TG_INF);
        }
    }
    m = tg_warp_max(m);
    float s = 0.0f;
    if (m != -TG_INF) {
#pragma unroll
        for (int k = 0; k < TG_SM_WV; k++) {
            x[k].x = expf(x[k].x - m);
            x[k].y = expf(x[k].y - m);
            x[k].z = expf(x[k].z - m);
            x[k].w = expf(x[k].w - m);
            s += (x[k].x + x[k].y) + (x[k].z + x[k].w);
        }
    }
    s = tg_warp_sum(s);
    /* A row masked entirely (m = -inf) still holds -inf: it writes zeros. */
    bool dead = m == -TG_INF || s == 0.0f;
    float inv = dead ? 0.0f : 1.0f / s;
#pragma unroll
    for (int k = 0; k < TG_SM_WV; k++) {
        int i = lane + 32 * k;
        if (i < n4) {
            float4 y = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (!dead) {
                y.x = x[k].x * inv; y.y = x[k].y * inv; y.z = x[k].z * inv; y.w = x[k].w * inv;
            }
            dst[i] = y;
        }
    }
}
