/*
 * copy.cu: cpy/cast between any two layouts and types, concat and pad.
 *
 * cpy walks the flat element order of both tensors (they may differ in shape
 * with equal counts, as ggml's cpy allows). Equal types copy the bytes, so
 * I64 stays exact; different types go through float, except integers to
 * integers, which go through i64. Floats to integers truncate toward zero.
 * cvt_c is the contiguous fast path (the activations' conversion to BF16 in
 * front of a matrix product runs on it, four at a time in cvt_f32_16_c4),
 * cvt_rows_16 the one for F32 rows at any strides (the encoder's heads,
 * strided views of their projections), and cpy_rows4 copies such rows.
 *
 * Not here: quantized types.
 */
#include "common.cuh"

__device__ __forceinline__ void copy_elem(char *dp, int dt, const char *sp, int st) {
    if (dt == st) {
        switch (dt) {
        case TG_KT_F16: case TG_KT_BF16: *(unsigned short *)dp = *(const unsigned short *)sp; break;
        case TG_KT_I64: *(i64 *)dp = *(const i64 *)sp; break;
        default: *(unsigned *)dp = *(const unsigned *)sp; break;
        }
    } else if ((dt == TG_KT_I32 || dt == TG_KT_I64) && (st == TG_KT_I32 || st == TG_KT_I64)) {
        i64 x = st == TG_KT_I64 ? *(const i64 *)sp : (i64) * (const int *)sp;
        if (dt == TG_KT_I64) *(i64 *)dp = x;
        else *(int *)dp = (int)x;
    } else {
        tg_st(dp, dt, tg_ld(sp, st));
    }
}

extern "C" __global__ void cpy(const tg_args_cpy args) {
    TG_PDL();
    const tg_t &d = args.d, &s = args.a;
    const i64 n = args.n;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 a0, a1, a2, a3, b0, b1, b2, b3;
        tg_unravel(s, i, a0, a1, a2, a3);
        tg_unravel(d, i, b0, b1, b2, b3);
        copy_elem(d.p + tg_off(d, b0, b1, b2, b3), d.type, s.p + tg_off(s, a0, a1, a2, a3), s.type);
    }
}

/* Same shape, 4-byte elements, rows contiguous in dim 0 on both sides (a
 * permuted view made contiguous: heads split or merged, rel_shift): a warp
 * per row, lanes along it, so reads and writes are coalesced and the row's
 * coordinates are found once (32-bit) instead of two 64-bit unravels per
 * element. */
extern "C" __global__ void cpy_rows4(const tg_args_cpy_rows4 args) {
    TG_PDL();
    const tg_t &d = args.d, &s = args.a;
    const int ne0 = (int)s.ne[0];
    const unsigned n1 = (unsigned)s.ne[1], n2 = (unsigned)s.ne[2];
    const unsigned rows = n1 * n2 * (unsigned)s.ne[3];
    const int lane = threadIdx.x & 31;
    const unsigned nw = (gridDim.x * blockDim.x) >> 5;
    for (unsigned r = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows; r += nw) {
        const unsigned i1 = r % n1, t = r / n1, i2 = t % n2, i3 = t / n2;
        const float *sp = (const float *)(s.p + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3]);
        float *dp = (float *)(d.p + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3]);
        for (int e = lane; e < ne0; e += 32) dp[e] = sp[e];
    }
}

/* Four floats to BF16 (to_bf16) or F16. */
__device__ __forceinline__ ushort4 f32x4_to_16(float4 v, int to_bf16) {
    ushort4 o;
    if (to_bf16) {
        o.x = tg_f2bf(v.x); o.y = tg_f2bf(v.y); o.z = tg_f2bf(v.z); o.w = tg_f2bf(v.w);
    } else {
        o.x = tg_f2h(v.x); o.y = tg_f2h(v.y); o.z = tg_f2h(v.z); o.w = tg_f2h(v.w);
    }
    return o;
}

/* F32 rows of ne0 (a multiple of 4) floats, 16-byte aligned, at any row
 * strides (a strided view: the encoder's heads) into d, contiguous BF16 or
 * F16 (d.type), a warp per row, four elements a lane: the conversion in
 * front of a product whose operand is such a view. */
extern "C" __global__ void cvt_rows_16(const tg_args_cvt_rows_16 args) {
    TG_PDL();
    const tg_t &d = args.d, &s = args.a;
    const int n4 = (int)(s.ne[0] / 4);
    const unsigned n1 = (unsigned)s.ne[1], n2 = (unsigned)s.ne[2];
    const unsigned rows = n1 * n2 * (unsigned)s.ne[3];
    const int lane = threadIdx.x & 31, to_bf16 = d.type == TG_KT_BF16;
    const unsigned nw = (gridDim.x * blockDim.x) >> 5;
    for (unsigned r = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows; r += nw) {
        const unsigned i1 = r % n1, t = r / n1, i2 = t % n2, i3 = t / n2;
        const float4 *sp = (const float4 *)(s.p + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3]);
        ushort4 *dp = (ushort4 *)(d.p + (i64)r * n4 * 8);
        for (int e = lane; e < n4; e += 32) {
            dp[e] = f32x4_to_16(sp[e], to_bf16);
        }
    }
}

/* Both contiguous, n elements. */
extern "C" __global__ void cvt_c(const tg_args_cvt_c args) {
    TG_PDL();
    char *d = args.d;
    const char *s = args.s;
    const int dt = args.dt, dsz = args.dsz, st = args.st, ssz = args.ssz;
    const i64 n = args.n;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        copy_elem(d + i * dsz, dt, s + i * ssz, st);
}

/* out = a ++ b along dim; 4-byte elements (F32 or I32). */
extern "C" __global__ void concat(const tg_args_concat args) {
    TG_PDL();
    const tg_t &o = args.o, &a = args.a, &b = args.b;
    const int dim = args.dim;
    const i64 n = args.n;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 c[4];
        tg_unravel(o, i, c[0], c[1], c[2], c[3]);
        const char *src;
        if (c[dim] < a.ne[dim]) {
            src = a.p + tg_off(a, c[0], c[1], c[2], c[3]);
        } else {
            c[dim] -= a.ne[dim];
            src = b.p + tg_off(b, c[0], c[1], c[2], c[3]);
            c[dim] += a.ne[dim];
        }
        *(unsigned *)(o.p + tg_off(o, c[0], c[1], c[2], c[3])) = *(const unsigned *)src;
    }
}

extern "C" __global__ void pad(const tg_args_pad args) {
    TG_PDL();
    const tg_t &o = args.o, &a = args.a;
    const i64 n = args.n;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 c[4];
        tg_unravel(o, i, c[0], c[1], c[2], c[3]);
        bool in = true;
        i64 s[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s[k] = c[k] - args.lo[k];
            in = in && s[k] >= 0 && s[k] < a.ne[k];
        }
        float x = in ? tg_ld(a.p + tg_off(a, s[0], s[1], s[2], s[3]), a.type) : 0.0f;
        tg_st(o.p + tg_off(o, c[0], c[1], c[2], c[3]), o.type, x);
    }
}

/* Contiguous F32 to BF16 (to_bf16 = 1) or F16, four elements a thread: the
 * activations' conversion in front of a matrix product. */
extern "C" __global__ void cvt_f32_16_c4(const tg_args_cvt_f32_16_c4 args) {
    TG_PDL();
    ushort4 *d = args.d;
    const float4 *s = args.s;
    const i64 n4 = args.n4;
    const int to_bf16 = args.to_bf16;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (i64)gridDim.x * blockDim.x) {
        d[i] = f32x4_to_16(s[i], to_bf16);
    }
}
