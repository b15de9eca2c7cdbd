/*
 * reduce.cu: reductions over dim 0 (argmax, sum_rows, mean, GLU's halves).
 *
 * One block per row (up to 1024 threads for long rows such as the
 * vocabulary's logits, float4 loads where the row is contiguous F32). argmax keeps the first index of the largest value, so
 * the decoder's greedy choice matches the CPU's on ties; only the chosen ids
 * need to leave the device. argmax_sum is a decoder step's last six nodes
 * in one launch: both reductions over one read of the logits, the feed for
 * the next step and the two history writes, from the same loops as argmax
 * and sum_rows.
 *
 * Not here: reductions over other dims (the graph permutes first).
 */
#include "common.cuh"

/* A row read as float4s: contiguous F32, 16-byte aligned, a multiple of 4. */
__device__ __forceinline__ bool rd_vec(const tg_t &a, const char *row) {
    return a.type == TG_KT_F32 && a.nb[0] == 4 && a.ne[0] % 4 == 0 && ((unsigned long long)row & 15) == 0;
}

/* This thread's share of row src of a: with ARG, the first index of its
 * largest value (bi < 0 while it has seen none); with SUM, its sum. The
 * loops are argmax's and sum_rows' own, so argmax_sum's results are theirs
 * bit for bit (same block size, same order). */
template <bool ARG, bool SUM>
__device__ __forceinline__ void row_scan(const tg_t &a, const char *src, float &best, i64 &bi, float &s) {
    if (rd_vec(a, src)) {
        /* contiguous F32 (the decoder's logits): float4 loads, 4 in flight */
        const float4 *s4 = (const float4 *)src;
#pragma unroll 4
        for (i64 i = threadIdx.x; i < a.ne[0] / 4; i += blockDim.x) {
            float4 x = s4[i];
            if (ARG) {
                float e[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
                for (int k = 0; k < 4; k++)
                    if (bi < 0 || e[k] > best) {
                        best = e[k];
                        bi = 4 * i + k;
                    }
            }
            if (SUM) s += (x.x + x.y) + (x.z + x.w);
        }
    } else {
        for (i64 i = threadIdx.x; i < a.ne[0]; i += blockDim.x) {
            float x = tg_ld(src + i * a.nb[0], a.type);
            if (ARG && (bi < 0 || x > best)) {
                best = x;
                bi = i;
            }
            if (SUM) s += x;
        }
    }
}

/* The block's first index of the largest value, in thread 0 (a warp's
 * shuffles, then the warps' results in order; ties to the lower index). */
__device__ __forceinline__ i64 block_argmax(float best, i64 bi, float *sv, i64 *si) {
    for (int off = 16; off > 0; off >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, off);
        i64 oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (oi >= 0 && (bi < 0 || ov > best || (ov == best && oi < bi))) {
            best = ov;
            bi = oi;
        }
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    if (lane == 0) {
        sv[warp] = best;
        si[warp] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < nw; w++)
            if (si[w] >= 0 && (bi < 0 || sv[w] > best || (sv[w] == best && si[w] < bi))) {
                best = sv[w];
                bi = si[w];
            }
    return bi < 0 ? 0 : bi;
}

/* Row r of a (rows counted over dims 1-3): with ARG, its argmax (argmax's
 * rule) in bi; with SUM, its sum in s; both valid in thread 0. */
template <bool ARG, bool SUM>
__device__ __forceinline__ void row_reduce(const tg_t &a, i64 r, i64 &bi, float &s) {
    __shared__ float sv[32];
    __shared__ i64 si[32];
    i64 i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
    float best = -TG_INF;
    bi = -1;
    s = 0.0f;
    row_scan<ARG, SUM>(a, a.p + tg_off(a, 0, i1, i2, i3), best, bi, s);
    if (SUM) s = tg_block_sum(s, sv);
    if (SUM && ARG) __syncthreads(); /* sv is block_argmax's next */
    if (ARG) bi = block_argmax(best, bi, sv, si);
}

extern "C" __global__ void argmax(const tg_args_argmax args) {
    TG_PDL();
    const tg_t &o = args.o, &a = args.a;
    i64 r = blockIdx.x, bi;
    float s;
    row_reduce<true, false>(a, r, bi, s);
    if (threadIdx.x == 0)
        *(int *)(o.p + tg_off(o, r % a.ne[1], (r / a.ne[1]) % a.ne[2], r / (a.ne[1] * a.ne[2]), 0)) = (int)bi;
}

/* Sum (div = 1) or mean (div = ne0) over dim 0; out [1, ne1, ne2, ne3]. */
extern "C" __global__ void sum_rows(const tg_args_sum_rows args) {
    TG_PDL();
    const tg_t &o = args.o, &a = args.a;
    i64 r = blockIdx.x, bi;
    float s;
    row_reduce<false, true>(a, r, bi, s);
    if (threadIdx.x == 0)
        tg_st(o.p + tg_off(o, 0, r % a.ne[1], (r / a.ne[1]) % a.ne[2], r / (a.ne[1] * a.ne[2])), o.type,
              s / args.div);
}

/* A decoder step's tail in one launch (kargs.cuh: tg_pick_args), a block a
 * row as argmax and sum_rows. */
extern "C" __global__ void argmax_sum(const tg_args_argmax_sum args) {
    TG_PDL();
    i64 r = blockIdx.x, bi;
    float s;
    row_reduce<true, true>(args.a, r, bi, s);
    if (threadIdx.x != 0) return;
    ((int *)args.ids)[r] = (int)bi;
    ((int *)args.feed)[r] = (int)bi;
    ((float *)args.sums)[r] = s;
    i64 at = args.at_i64 ? *(const i64 *)args.at : (i64) * (const int *)args.at;
    if (at < 0 || at >= args.hist_rows) return;
    *(float *)(args.hist_ids + at * args.hist_ids_ld + 4 * r) = (float)(int)bi;
    *(float *)(args.hist_sums + at * args.hist_sums_ld + 4 * r) = s;
}

/* GLU over dim 0: out[i] = a[i] * sigmoid(a[i + n/2]). */
extern "C" __global__ void glu(const tg_args_glu args) {
    TG_PDL();
    const tg_t &o = args.d, &a = args.a;
    const i64 n = args.n;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
        i64 i0, i1, i2, i3;
        tg_unravel(o, e, i0, i1, i2, i3);
        const char *row = a.p + tg_off(a, 0, i1, i2, i3);
        float x = tg_ld(row + i0 * a.nb[0], a.type);
        float g = tg_ld(row + (i0 + o.ne[0]) * a.nb[0], a.type);
        tg_st(o.p + tg_off(o, i0, i1, i2, i3), o.type, x / (1.0f + expf(-g)));
    }
}
