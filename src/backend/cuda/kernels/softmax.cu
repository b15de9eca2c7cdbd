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

extern "C" __global__ void soft_max(tg_t d, tg_t a, tg_t mask, int has_mask, float scale) {
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
