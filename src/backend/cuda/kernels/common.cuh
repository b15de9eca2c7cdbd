/*
 * common.cuh: what every kernel file shares (types, loads and stores of the
 * runtime's element types, reductions).
 *
 * Kernels are compiled by NVRTC at run time without the CUDA toolkit's
 * headers, so half and bfloat16 are handled here as raw 16-bit patterns with
 * PTX conversions. A tensor crosses to the device as tg_t (pointer, shape,
 * byte strides, type), inside each kernel's argument struct (kargs.cuh, the
 * one header the host shares).
 * Capability macros come from the host: TG_CC (compute capability, e.g. 90),
 * TG_HAS_BF16_CVT (the bf16 conversion instruction passed its probe).
 *
 * Not here: any kernel.
 */
#pragma once

/* nvcc builds (precompiled kernels) name no TG_CC: take the target's. */
#ifndef TG_CC
#ifdef __CUDA_ARCH__
#define TG_CC (__CUDA_ARCH__ / 10)
#else
#define TG_CC 0
#endif
#endif

#include "kargs.cuh"

#define TG_INF __int_as_float(0x7f800000)

typedef long long i64;

__device__ __forceinline__ float tg_h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ unsigned short tg_f2h(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ float tg_bf2f(unsigned short b) { return __uint_as_float(((unsigned)b) << 16); }

__device__ __forceinline__ unsigned short tg_f2bf(float f) {
#if TG_HAS_BF16_CVT
    unsigned short b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
    return b;
#else
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
#endif
}

__device__ __forceinline__ float tg_ld(const char *p, int type) {
    switch (type) {
    case TG_KT_F32: return *(const float *)p;
    case TG_KT_F16: return tg_h2f(*(const unsigned short *)p);
    case TG_KT_BF16: return tg_bf2f(*(const unsigned short *)p);
    case TG_KT_I32: return (float)*(const int *)p;
    default: return (float)*(const i64 *)p;
    }
}

__device__ __forceinline__ void tg_st(char *p, int type, float v) {
    switch (type) {
    case TG_KT_F32: *(float *)p = v; break;
    case TG_KT_F16: *(unsigned short *)p = tg_f2h(v); break;
    case TG_KT_BF16: *(unsigned short *)p = tg_f2bf(v); break;
    case TG_KT_I32: *(int *)p = (int)v; break;
    default: *(i64 *)p = (i64)v; break;
    }
}

/* Programmatic dependent launch (sm_90; launches carry the attribute when
 * the host enables it): the first statement of every graph kernel. It waits
 * until the kernels before it in the stream have finished and their writes
 * are visible, then lets the next kernel begin launching, so the next
 * launch's latency hides behind this kernel's work (letting it launch
 * before the wait kept short kernels resident several deep, their weights
 * loaded, but made a decoder step no faster: NOTES.md, sixteenth session).
 * A no-op for a kernel launched without the attribute. */
#if TG_CC >= 90 && defined(TG_STAMPS)
/* CT_CUDA_STAMPS (cuda_profile.c, a diagnostic build: the host adds
 * -DTG_STAMPS and compiles every file by NVRTC): block (0,0,0)'s thread 0
 * of each kernel records the global timer when it arrives and when its wait
 * returns, its kernel's name hash (FNV-1a of __func__), grid and block, so
 * a replayed graph's own timeline can be read without events between its
 * kernels. The host points tg_stamps at a buffer: word 0 counts records,
 * then 4 words a record (TG_STAMPS_CAP of them, kargs.cuh), the grid's x,
 * y, z and the block's threads packed in 24, 16, 12 and 12 bits. The hash
 * of __func__ folds to a constant; a record costs two timer reads and an
 * atomic, in one thread a kernel. */
extern "C" {
__device__ unsigned long long *tg_stamps;
}
__device__ __forceinline__ unsigned long long tg_gtime(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void tg_pdl_stamped(const char *fn) {
    const bool first = (blockIdx.x | blockIdx.y | blockIdx.z | threadIdx.x | threadIdx.y | threadIdx.z) == 0;
    unsigned long long h = 0xcbf29ce484222325ull, t0 = 0ull;
    if (first) {
        for (const char *q = fn; *q; q++) h = (h ^ (unsigned char)*q) * 1099511628211ull;
        t0 = tg_gtime();
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (first && tg_stamps) {
        const unsigned long long t1 = tg_gtime();
        const unsigned long long i = atomicAdd(tg_stamps, 1ull);
        if (i < TG_STAMPS_CAP) {
            unsigned long long *r = tg_stamps + 1 + 4 * i;
            r[0] = t0, r[1] = t1, r[2] = h;
            r[3] = (unsigned long long)(gridDim.x & 0xffffffu) | (unsigned long long)(gridDim.y & 0xffffu) << 24 |
                   (unsigned long long)(gridDim.z & 0xfffu) << 40 |
                   (unsigned long long)(blockDim.x * blockDim.y & 0xfffu) << 52;
        }
    }
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
#define TG_PDL() tg_pdl_stamped(__func__)
#elif TG_CC >= 90
#define TG_PDL() asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory")
#else
#define TG_PDL() ((void)0)
#endif

/* Byte offset of element (i0, i1, i2, i3); a dim of extent 1 broadcasts. */
__device__ __forceinline__ i64 tg_off_bc(const tg_t &t, i64 i0, i64 i1, i64 i2, i64 i3) {
    return (t.ne[0] == 1 ? 0 : i0 * t.nb[0]) + (t.ne[1] == 1 ? 0 : i1 * t.nb[1]) +
           (t.ne[2] == 1 ? 0 : i2 * t.nb[2]) + (t.ne[3] == 1 ? 0 : i3 * t.nb[3]);
}

__device__ __forceinline__ i64 tg_off(const tg_t &t, i64 i0, i64 i1, i64 i2, i64 i3) {
    return i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

/* Flat index (dim 0 fastest) to coordinates of t's shape. */
__device__ __forceinline__ void tg_unravel(const tg_t &t, i64 i, i64 &i0, i64 &i1, i64 &i2, i64 &i3) {
    i0 = i % t.ne[0];
    i /= t.ne[0];
    i1 = i % t.ne[1];
    i /= t.ne[1];
    i2 = i % t.ne[2];
    i3 = i / t.ne[2];
}

/* TG_OUT16 (a specialisation): the vectorised kernels store BF16 (1) or
 * F16 (2) instead of F32, when their only readers are matrix products that
 * take that type (the backend's "emit for the product" fusion). */
#ifndef TG_OUT16
#define TG_OUT16 TG_EMIT_F32
#endif

__device__ __forceinline__ void tg_store4(void *d, i64 i, float4 y) {
#if TG_OUT16 == TG_EMIT_F32
    ((float4 *)d)[i] = y;
#else
    ushort4 o;
#if TG_OUT16 == TG_EMIT_BF16
    o.x = tg_f2bf(y.x); o.y = tg_f2bf(y.y); o.z = tg_f2bf(y.z); o.w = tg_f2bf(y.w);
#else
    o.x = tg_f2h(y.x); o.y = tg_f2h(y.y); o.z = tg_f2h(y.z); o.w = tg_f2h(y.w);
#endif
    ((ushort4 *)d)[i] = o;
#endif
}

__device__ __forceinline__ float tg_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float tg_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide sum; every thread gets the result. sh: 32 floats of shared memory. */
__device__ __forceinline__ float tg_block_sum(float v, float *sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = tg_warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.0f;
    return tg_warp_sum(v);
}

__device__ __forceinline__ float tg_block_max(float v, float *sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = tg_warp_max(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -TG_INF;
    return tg_warp_max(v);
}

#if TG_CC >= 90
/* Thread block clusters (sm_90): the barrier every thread of every block
 * of the cluster reaches (release, then acquire: shared memory written
 * before it is seen by the cluster's other blocks after it), its two
 * halves apart (arrive early, wait late), this block's rank, and a float
 * (or four) of the shared memory of block `rank` at this block's address
 * p of the same variable. */
__device__ __forceinline__ void tg_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void tg_cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void tg_cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ __forceinline__ unsigned tg_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ float tg_dsmem(const float *p, unsigned rank) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p), r;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r) : "memory");
    return v;
}
__device__ __forceinline__ float4 tg_dsmem4(const float4 *p, unsigned rank) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p), r;
    float4 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(r)
                 : "memory");
    return v;
}
#endif

#if TG_CC >= 80
/* Copies global -> shared without passing through registers (cp.async,
 * sm_80): a generic pointer into shared memory as the 32-bit shared
 * address; 16 bytes to such an address (so that a run of copies adds
 * constants to one register); 4 bytes (any alignment: the attention's
 * F32 mask rows); closing a group of copies, and waiting until at most N
 * groups are still in flight. */
__device__ __forceinline__ unsigned smem_addr(const void *p) {
    unsigned a;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
__device__ __forceinline__ void cp_async16_s(unsigned saddr, const void *gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(saddr), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async4(void *smem, const void *gmem) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_addr(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
#endif

/* Two floats as the low and high BF16 halves of a word (an mma operand). */
__device__ __forceinline__ unsigned tg_pack_bf16(float lo, float hi) {
    return (unsigned)tg_f2bf(lo) | ((unsigned)tg_f2bf(hi) << 16);
}

#if TG_CC >= 80
/* c += a b on the tensor cores: mma.sync m16n8k16, BF16 operands (a: 16x16
 * row-major, four words a lane; b: 16x8 column-major, two), F32 sums. */
__device__ __forceinline__ void tg_mma_bf16(float *c, const unsigned *a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif
