/*
 * rows.cu: get_rows (embedding lookup) and set_rows (the KV-cache write, the
 * position given as data).
 *
 * Row ids come from device memory, so a decoder step's graph keeps its shape
 * while the positions change. An id outside the table reads as zeros
 * (get_rows) or writes nothing (set_rows): no out-of-bounds access, whatever
 * the ids hold.
 *
 * Not here: checks that report bad ids (the CPU backend reports them).
 */
#include "common.cuh"

__device__ __forceinline__ i64 ld_id(const tg_t &ids, i64 i, i64 i2, i64 i3) {
    const char *p = ids.p + tg_off_bc(ids, i, i2, i3, 0);
    return ids.type == TG_KT_I64 ? *(const i64 *)p : (i64) * (const int *)p;
}

/* a [n, rows, d2, d3], ids [k, d2, d3], out [n, k, d2, d3] */
extern "C" __global__ void get_rows(const tg_args_get_rows args) {
    TG_PDL();
    const tg_t &o = args.d, &a = args.a, &ids = args.ids;
    const i64 n = args.n;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
        i64 i0, i, i2, i3;
        tg_unravel(o, e, i0, i, i2, i3);
        i64 r = ld_id(ids, i, i2, i3);
        float x = 0.0f;
        if (r >= 0 && r < a.ne[1])
            x = tg_ld(a.p + i0 * a.nb[0] + r * a.nb[1] + (a.ne[2] == 1 ? 0 : i2 * a.nb[2]) +
                          (a.ne[3] == 1 ? 0 : i3 * a.nb[3]), a.type);
        tg_st(o.p + tg_off(o, i0, i, i2, i3), o.type, x);
    }
}

/* d [n, rows, d2, d3] (the destination's view), s [n, k, d2, d3], ids [k, d2, d3] */
extern "C" __global__ void set_rows(const tg_args_set_rows args) {
    TG_PDL();
    const tg_t &d = args.d, &s = args.a, &ids = args.ids;
    const i64 n = args.n;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
        i64 i0, i, i2, i3;
        tg_unravel(s, e, i0, i, i2, i3);
        i64 r = ld_id(ids, i, i2, i3);
        if (r < 0 || r >= d.ne[1]) continue;
        float x = tg_ld(s.p + tg_off(s, i0, i, i2, i3), s.type);
        tg_st(d.p + i0 * d.nb[0] + r * d.nb[1] + (d.ne[2] == 1 ? 0 : i2 * d.nb[2]) +
                  (d.ne[3] == 1 ? 0 : i3 * d.nb[3]), d.type, x);
    }
}
