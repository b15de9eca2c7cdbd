/*
 * elementwise.cu: binary ops with broadcasting (add, sub, mul, div) and unary
 * ops (scale, relu, silu, sigmoid, log, sqrt).
 *
 * Specialised at compile time by TG_OP (the op, see the table below), so each
 * op is its own small kernel. Two shapes of kernel: a general one that walks
 * the destination's flat index and applies any strides (views, permutes,
 * broadcasting in every dim), a row kernel for F32 rows broadcast along
 * the other dims (a warp per row), and a contiguous F32 one that moves 16
 * bytes per thread for the large, common case; the host picks.
 *
 * ew_unary_b4 is ew_unary_c4 reading a BF16 source (a product's result
 * stored BF16 because unary ops are its only readers: the encoder's
 * feed-forward silu).
 *
 * ew_bias_mask_c4 is a fused chain (cuda_ops.c: the subsampling's conv
 * bias add, frame mask and relu) in one pass; it does not depend on TG_OP.
 *
 * Not here: other fused variants (layer norm, softmax and attention are
 * their own ops).
 */
#include "common.cuh"

/* TG_OP: one of kargs.cuh's TG_EW_* codes. */
#ifndef TG_OP
#define TG_OP TG_EW_ADD
#endif

__device__ __forceinline__ float bin(float a, float b) {
#if TG_OP == TG_EW_ADD
    return a + b;
#elif TG_OP == TG_EW_SUB
    return a - b;
#elif TG_OP == TG_EW_MUL
    return a * b;
#else
    return a / b;
#endif
}

__device__ __forceinline__ float un(float x, float s) {
#if TG_OP == TG_EW_SCALE
    return x * s;
#elif TG_OP == TG_EW_RELU
    return x > 0.0f ? x : 0.0f;
#elif TG_OP == TG_EW_SILU
    return x / (1.0f + expf(-x));
#elif TG_OP == TG_EW_LOG
    return logf(x);
#elif TG_OP == TG_EW_SQRT
    return sqrtf(x);
#else
    return 1.0f / (1.0f + expf(-x));
#endif
}

extern "C" __global__ void ew_binary(const tg_args_ew_binary args) {
    TG_PDL();
    const tg_t &d = args.d, &a = args.a, &b = args.b;
    const i64 n = args.n;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 i0, i1, i2, i3;
        tg_unravel(d, i, i0, i1, i2, i3);
        float x = tg_ld(a.p + tg_off_bc(a, i0, i1, i2, i3), a.type);
        float y = tg_ld(b.p + tg_off_bc(b, i0, i1, i2, i3), b.type);
        tg_st(d.p + tg_off(d, i0, i1, i2, i3), d.type, bin(x, y));
    }
}

/* Rows of d (dim 0 contiguous, F32) from rows of a and b (F32, dim 0
 * contiguous or of length 1: a value broadcast along the row; any strides
 * and broadcasting in dims 1-3), args.n rows. A warp per row, so the row's
 * coordinates are worked out once per 32 lanes (32-bit when they fit), not
 * per element as in ew_binary: the broadcast bias and masks of the
 * encoder's large tensors. */
extern "C" __global__ void ew_binary_rows(const tg_args_ew_binary_rows args) {
    TG_PDL();
    const tg_t &d = args.d, &a = args.a, &b = args.b;
    const i64 rows = args.n;
    const int ne0 = (int)d.ne[0], lane = threadIdx.x & 31;
    const bool a1 = a.ne[0] == 1, b1 = b.ne[0] == 1;
    const i64 w0 = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5, nw = ((i64)gridDim.x * blockDim.x) >> 5;
    const bool small = rows <= 0x7fffffff && d.ne[1] <= 0x7fffffff && d.ne[2] <= 0x7fffffff;
    for (i64 r = w0; r < rows; r += nw) {
        i64 i1, i2, i3;
        if (small) {
            unsigned u = (unsigned)r, n1 = (unsigned)d.ne[1], n2 = (unsigned)d.ne[2];
            i1 = u % n1;
            u /= n1;
            i2 = u % n2;
            i3 = u / n2;
        } else {
            i1 = r % d.ne[1];
            i2 = (r / d.ne[1]) % d.ne[2];
            i3 = r / (d.ne[1] * d.ne[2]);
        }
        const float *pa = (const float *)(a.p + tg_off_bc(a, 0, i1, i2, i3));
        const float *pb = (const float *)(b.p + tg_off_bc(b, 0, i1, i2, i3));
        float *pd = (float *)(d.p + tg_off(d, 0, i1, i2, i3));
        const float sa = a1 ? pa[0] : 0.0f, sb = b1 ? pb[0] : 0.0f;
        for (int i0 = lane; i0 < ne0; i0 += 32) pd[i0] = bin(a1 ? sa : pa[i0], b1 ? sb : pb[i0]);
    }
}

__device__ __forceinline__ void ew_binary4(void *d, const float4 *a, const float4 *b, i64 i, i64 ia, i64 ib) {
    float4 x = a[ia], y = b[ib], r;
    r.x = bin(x.x, y.x);
    r.y = bin(x.y, y.y);
    r.z = bin(x.z, y.z);
    r.w = bin(x.w, y.w);
    tg_store4(d, i, r);
}

/* d, a, b contiguous F32; a and b repeat with periods na and nb (the whole
 * tensor, or one row for a broadcast bias). n4 counts float4 groups. Below
 * 2^31 groups the index math is 32-bit: a broadcast's modulo then costs a
 * fraction of the 64-bit one, which matters for the small kernels of a
 * decoder step, where a node's time is mostly its latency. */
extern "C" __global__ void ew_binary_c4(const tg_args_ew_binary_c4 args) {
    TG_PDL();
    void *d = args.d;
    const float4 *a = args.a, *b = args.b;
    const i64 n4 = args.n4, na4 = args.na4, nb4 = args.nb4;
    if (n4 <= 0x7fffffff) {
        unsigned n = (unsigned)n4, na = (unsigned)na4, nb = (unsigned)nb4;
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
            ew_binary4(d, a, b, i, na == n ? i : i % na, nb == n ? i : i % nb);
        return;
    }
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (i64)gridDim.x * blockDim.x)
        ew_binary4(d, a, b, i, na4 == n4 ? i : i % na4, nb4 == n4 ? i : i % nb4);
}

extern "C" __global__ void ew_unary(const tg_args_ew_unary args) {
    TG_PDL();
    const tg_t &d = args.d, &a = args.a;
    const float s = args.s;
    const i64 n = args.n;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 i0, i1, i2, i3;
        tg_unravel(d, i, i0, i1, i2, i3);
        float x = tg_ld(a.p + tg_off(a, i0, i1, i2, i3), a.type);
        tg_st(d.p + tg_off(d, i0, i1, i2, i3), d.type, un(x, s));
    }
}

extern "C" __global__ void ew_unary_c4(const tg_args_ew_unary_c4 args) {
    TG_PDL();
    void *d = args.d;
    const float4 *a = args.a;
    const float s = args.s;
    const i64 n4 = args.n4;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (i64)gridDim.x * blockDim.x) {
        float4 x = a[i];
        float4 r;
        r.x = un(x.x, s);
        r.y = un(x.y, s);
        r.z = un(x.z, s);
        r.w = un(x.w, s);
        tg_store4(d, i, r);
    }
}

/* ew_unary_c4 over a BF16 source (its producer's emit): 8 bytes in, the
 * product's bias added where it left it out (args.row), the op in F32, 16
 * or 8 bytes out (TG_OUT16). */
extern "C" __global__ void ew_unary_b4(const tg_args_ew_unary_b4 args) {
    TG_PDL();
    void *d = args.d;
    const ushort4 *a = (const ushort4 *)args.a;
    const float4 *bias = (const float4 *)args.bias;
    const float s = args.s;
    const i64 n4 = args.n4, row4 = args.row / 4;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (i64)gridDim.x * blockDim.x) {
        const ushort4 x = a[i];
        float4 v = make_float4(tg_bf2f(x.x), tg_bf2f(x.y), tg_bf2f(x.z), tg_bf2f(x.w)), r;
        if (row4 > 0) {
            const float4 b = bias[i % row4];
            v.x += b.x, v.y += b.y, v.z += b.z, v.w += b.w;
        }
        r.x = un(v.x, s);
        r.y = un(v.y, s);
        r.z = un(v.z, s);
        r.w = un(v.w, s);
        tg_store4(d, i, r);
    }
}

__device__ __forceinline__ float bias_mask_act(float x, float b, float m, bool relu) {
    float y = (x + b) * m;
    return relu && !(y > 0.0f) ? 0.0f : y;
}

/* The bias add, mask mul and relu of a conv's output in one pass, the same
 * arithmetic in the same order as the three kernels (a row's bias and mask
 * are one value each: rows are the innermost dim, a conv's width). */
extern "C" __global__ void ew_bias_mask_c4(const tg_args_ew_bias_mask_c4 a) {
    TG_PDL();
    const i64 n4 = a.n4;
    const bool small = n4 <= 0x7fffffff;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (i64)gridDim.x * blockDim.x) {
        i64 i1, i2, i3;
        if (small) {
            unsigned r = (unsigned)i / (unsigned)a.q4, n1 = (unsigned)a.ne1, n2 = (unsigned)a.ne2;
            i1 = r % n1;
            r /= n1;
            i2 = r % n2;
            i3 = r / n2;
        } else {
            i64 r = i / a.q4;
            i1 = r % a.ne1;
            i2 = (r / a.ne1) % a.ne2;
            i3 = r / (a.ne1 * a.ne2);
        }
        const float b = *(const float *)(a.bias.p + tg_off_bc(a.bias, 0, i1, i2, i3));
        const float m = a.has_mask ? *(const float *)(a.mask.p + tg_off_bc(a.mask, 0, i1, i2, i3)) : 1.0f;
        const bool relu = a.relu != 0;
        float4 x = a.x[i], r;
        r.x = bias_mask_act(x.x, b, m, relu);
        r.y = bias_mask_act(x.y, b, m, relu);
        r.z = bias_mask_act(x.z, b, m, relu);
        r.w = bias_mask_act(x.w, b, m, relu);
        tg_store4(a.d, i, r);
    }
}
