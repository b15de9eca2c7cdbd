/*
 * norm.cu: layer norm over dim 0 with the optional affine (w, b) fused in.
 *
 * One block per row. The contiguous F32 kernel keeps the row in registers
 * (up to TG_NORM_VEC float4 per thread), so the row crosses device memory once
 * each way; the general kernel re-reads it (the second and third reads hit the
 * cache) and accepts any strides. Mean, then the variance of the centred
 * values (two passes, not E[x^2]-E[x]^2, which cancels badly).
 *
 * embed_norm is the decoder step's first four nodes as one launch: two
 * embedding lookups (token and position), their sum and its layer norm,
 * a block per row, with get_rows's and the add's arithmetic (F32 loads of
 * the tables' stored values, one F32 add) and this file's norm.
 *
 * Not here: RMS norm (the model has none).
 */
#include "common.cuh"

#define TG_NORM_VEC 8

/* The vectorised kernels' last step: element group i of a row,
 * normalised, the affine applied. Each operation rounded on its own
 * (__fsub_rn, __fmul_rn, __fadd_rn: never contracted into an FMA, which
 * the compiler may or may not do depending on what surrounds an inlined
 * copy), so layer_norm2_w4's first norm gives layer_norm_w4's bits. */
__device__ __forceinline__ float4 norm_affine4(float4 x, float mean, float rstd, const float4 *w, const float4 *b,
                                               int i) {
    float4 y;
    y.x = __fmul_rn(__fsub_rn(x.x, mean), rstd);
    y.y = __fmul_rn(__fsub_rn(x.y, mean), rstd);
    y.z = __fmul_rn(__fsub_rn(x.z, mean), rstd);
    y.w = __fmul_rn(__fsub_rn(x.w, mean), rstd);
    if (w) {
        const float4 g = w[i];
        y.x = __fmul_rn(y.x, g.x);
        y.y = __fmul_rn(y.y, g.y);
        y.z = __fmul_rn(y.z, g.z);
        y.w = __fmul_rn(y.w, g.w);
    }
    if (b) {
        const float4 c = b[i];
        y.x = __fadd_rn(y.x, c.x);
        y.y = __fadd_rn(y.y, c.y);
        y.z = __fadd_rn(y.z, c.z);
        y.w = __fadd_rn(y.w, c.w);
    }
    return y;
}

/* ... stored at group `at` of d, in TG_OUT16's type. */
__device__ __forceinline__ void norm_store4(void *d, i64 at, float4 x, float mean, float rstd, const float4 *w,
                                            const float4 *b, int i) {
    tg_store4(d, at, norm_affine4(x, mean, rstd, w, b, i));
}

extern "C" __global__ void layer_norm(const tg_args_layer_norm args) {
    TG_PDL();
    const tg_t &d = args.d, &a = args.a;
    const float *w = args.w, *b = args.b;
    const float eps = args.eps;
    __shared__ float sh[32];
    i64 r = blockIdx.x;
    i64 i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
    const char *src = a.p + tg_off(a, 0, i1, i2, i3);
    char *dst = d.p + tg_off(d, 0, i1, i2, i3);
    i64 n = a.ne[0];
    float s = 0.0f;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) s += tg_ld(src + i * a.nb[0], a.type);
    float mean = tg_block_sum(s, sh) / (float)n;
    float v = 0.0f;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float x = tg_ld(src + i * a.nb[0], a.type) - mean;
        v += x * x;
    }
    float rstd = rsqrtf(tg_block_sum(v, sh) / (float)n + eps);
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float y = (tg_ld(src + i * a.nb[0], a.type) - mean) * rstd;
        if (w) y *= w[i];
        if (b) y += b[i];
        tg_st(dst + i * d.nb[0], d.type, y);
    }
}

/* a and d contiguous F32 rows of n = 4*n4 floats, n4 <= blockDim.x * TG_NORM_VEC. */
extern "C" __global__ void layer_norm_c4(const tg_args_layer_norm_c4 args) {
    TG_PDL();
    void *d = args.d;
    const float4 *a = args.a, *w = args.w, *b = args.b;
    const int n4 = args.n4;
    const float eps = args.eps;
    __shared__ float sh[32];
    const float4 *src = a + (i64)blockIdx.x * n4;
    const i64 dst = (i64)blockIdx.x * n4;
    float4 x[TG_NORM_VEC];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < TG_NORM_VEC; k++) {
        int i = threadIdx.x + k * blockDim.x;
        x[k] = i < n4 ? src[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        s += (x[k].x + x[k].y) + (x[k].z + x[k].w);
    }
    float n = 4.0f * (float)n4;
    float mean = tg_block_sum(s, sh) / n;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < TG_NORM_VEC; k++) {
        int i = threadIdx.x + k * blockDim.x;
        if (i < n4) {
            float p = x[k].x - mean, q = x[k].y - mean, u = x[k].z - mean, t = x[k].w - mean;
            v += (p * p + q * q) + (u * u + t * t);
        }
    }
    float rstd = rsqrtf(tg_block_sum(v, sh) / n + eps);
#pragma unroll
    for (int k = 0; k < TG_NORM_VEC; k++) {
        int i = threadIdx.x + k * blockDim.x;
        if (i < n4) norm_store4(d, dst + i, x[k], mean, rstd, w, b, i);
    }
}

/* The warp-a-row kernels' float4s a lane. */
#define TG_NORM_WV (TG_NORM_WARP_N4 / 32)

/* A warp's row of n4 <= 32*TG_NORM_WV float4s in registers (lane's
 * element groups lane, lane + 32, ...; zeros past n4): its mean and
 * 1/sqrt(variance + eps), the variance from the centred values, its
 * squares summed by explicit FMAs (what the compiler made of
 * (p*p + q*q) + (u*u + t*t) before: now every copy is the same). */
__device__ __forceinline__ void warp_row_stats(const float4 (&x)[TG_NORM_WV], int lane, int n4, float eps,
                                               float &mean, float &rstd) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < TG_NORM_WV; k++) s += (x[k].x + x[k].y) + (x[k].z + x[k].w);
    const float n = 4.0f * (float)n4;
    mean = tg_warp_sum(s) / n;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < TG_NORM_WV; k++) {
        if (lane + 32 * k < n4) {
            const float p = __fsub_rn(x[k].x, mean), q = __fsub_rn(x[k].y, mean), u = __fsub_rn(x[k].z, mean),
                        t = __fsub_rn(x[k].w, mean);
            v = __fadd_rn(v, __fadd_rn(__fmaf_rn(p, p, __fmul_rn(q, q)), __fmaf_rn(u, u, __fmul_rn(t, t))));
        }
    }
    rstd = rsqrtf(tg_warp_sum(v) / n + eps);
}

/* A warp's row of src into registers, zeros past n4. */
__device__ __forceinline__ void warp_row_load(float4 (&x)[TG_NORM_WV], const float4 *src, int lane, int n4) {
#pragma unroll
    for (int k = 0; k < TG_NORM_WV; k++) {
        int i = lane + 32 * k;
        x[k] = i < n4 ? src[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
}

/* A warp's normed row (its mean and rstd) with the affine (w, b) stored
 * from group `at` of d, in TG_OUT16's type. */
__device__ __forceinline__ void warp_row_store(void *d, i64 at, const float4 (&x)[TG_NORM_WV], int lane, int n4,
                                               float mean, float rstd, const float4 *w, const float4 *b) {
#pragma unroll
    for (int k = 0; k < TG_NORM_WV; k++) {
        int i = lane + 32 * k;
        if (i < n4) norm_store4(d, at + i, x[k], mean, rstd, w, b, i);
    }
}

/* The 128-byte lines of a row's parameters (w or b) of n4 float4s. */
__device__ __forceinline__ int norm_lines(int n4) { return (n4 * 16 + 127) / 128; }

/* Threads base .. base + 2 lines - 1 of the block ask w's lines, then b's,
 * into L2, a line a thread (NULL parameters skipped). */
__device__ __forceinline__ void norm_prefetch(int n4, const float4 *w, const float4 *b, int base) {
    const int lines = norm_lines(n4), t = (int)threadIdx.x - base;
    const char *p = t >= 0 && t < lines && w                 ? (const char *)w + 128 * t
                    : t >= lines && t < 2 * lines && b       ? (const char *)b + 128 * (t - lines)
                                                             : NULL;
    if (p) asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

/* One warp per row, 8 rows per block: contiguous F32 rows of n = 4*n4
 * floats, n4 <= 32*TG_NORM_WV. No block barriers; the row lives in
 * registers, so it crosses device memory once each way. With
 * args.prefetch the affine's w and b lines are asked into L2 before the
 * wait for the kernel before (a thread a 128-byte line): their loads come
 * after the row's sums, a second trip to memory that then ends in L2 (a
 * decoder step's 25 norms at batch 17 and more, on cuBLASLt's side). */
extern "C" __global__ void layer_norm_w4(const tg_args_layer_norm_w4 args) {
    if (args.prefetch) norm_prefetch(args.n4, args.w, args.b, 0);
    TG_PDL();
    const int n4 = args.n4;
    const i64 r = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= args.rows) return;
    const int lane = threadIdx.x & 31;
    float4 x[TG_NORM_WV];
    warp_row_load(x, args.a + r * n4, lane, n4);
    float mean, rstd;
    warp_row_stats(x, lane, n4, args.eps, mean, rstd);
    warp_row_store(args.d, r * n4, x, lane, n4, mean, rstd, args.w, args.b);
}

/* Two layer norms in a row as one pass (an encoder layer's output norm,
 * then the next layer's first norm, spec 2.2): d1 = LN(a; w1, b1), stored
 * F32 for its other readers (the residual), and d = LN(d1; w2, b2), stored
 * as TG_OUT16 says, from the normed row still in registers: the
 * arithmetic of two layer_norm_w4 launches, so the same bits, with one read
 * of the row where the two launches made two. A warp a row, as
 * layer_norm_w4; d1 may be a itself (each warp reads its row before it
 * writes it), d lies apart from both. */
extern "C" __global__ void layer_norm2_w4(const tg_args_layer_norm2_w4 args) {
    if (args.prefetch) {
        norm_prefetch(args.n4, args.w1, args.b1, 0);
        norm_prefetch(args.n4, args.w2, args.b2, 2 * norm_lines(args.n4));
    }
    TG_PDL();
    const int n4 = args.n4;
    const i64 r = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= args.rows) return;
    const int lane = threadIdx.x & 31;
    float4 x[TG_NORM_WV];
    warp_row_load(x, args.a + r * n4, lane, n4);
    float mean, rstd;
    warp_row_stats(x, lane, n4, args.eps1, mean, rstd);
    float4 *y = args.d1 + r * n4;
#pragma unroll
    for (int k = 0; k < TG_NORM_WV; k++) {
        int i = lane + 32 * k;
        if (i < n4) {
            x[k] = norm_affine4(x[k], mean, rstd, args.w1, args.b1, i);
            y[i] = x[k];
        }
    }
    warp_row_stats(x, lane, n4, args.eps2, mean, rstd);
    warp_row_store(args.d, r * n4, x, lane, n4, mean, rstd, args.w2, args.b2);
}

/* Row r of d = LN(ta[:, ia[r]] + tb[:, ib[r]]): the sum is formed three
 * times (mean, variance, store) from the tables' rows, which stay in L1
 * after the first pass; a row is the model's width (1024 at the released
 * size), one row of the batch a block. */
extern "C" __global__ void embed_norm(const tg_args_embed_norm args) {
    TG_PDL();
    const tg_t &d = args.d, &ta = args.ta, &tb = args.tb;
    __shared__ float sh[32];
    const i64 r = blockIdx.x, n = d.ne[0];
    const i64 ra = ((const int *)args.ia.p)[r], rb = ((const int *)args.ib.p)[r];
    const char *pa = ra >= 0 && ra < ta.ne[1] ? ta.p + ra * ta.nb[1] : nullptr;
    const char *pb = rb >= 0 && rb < tb.ne[1] ? tb.p + rb * tb.nb[1] : nullptr;
    float *dst = (float *)d.p + r * n;
#define EMB_X(i) ((pa ? tg_ld(pa + (i) * ta.nb[0], ta.type) : 0.0f) + (pb ? tg_ld(pb + (i) * tb.nb[0], tb.type) : 0.0f))
    float s = 0.0f;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) s += EMB_X(i);
    const float mean = tg_block_sum(s, sh) / (float)n;
    float v = 0.0f;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float x = EMB_X(i) - mean;
        v += x * x;
    }
    const float rstd = rsqrtf(tg_block_sum(v, sh) / (float)n + args.eps);
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float y = (EMB_X(i) - mean) * rstd;
        if (args.w) y *= args.w[i];
        if (args.b) y += args.b[i];
        dst[i] = y;
    }
#undef EMB_X
}
