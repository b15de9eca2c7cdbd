/*
 * probe.cu: tiny kernels compiled at device start to test a capability
 * before it is enabled (the seed probes its tensor API the same way), and a
 * kernel that faults on purpose, for the sticky-error test.
 *
 * Not here: anything the graph runs.
 */
#include "common.cuh"

extern "C" __global__ void probe_bf16_cvt(const tg_args_probe_bf16_cvt args) {
    unsigned short b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(args.x));
    *(unsigned short *)args.out = b;
}

#if TG_CC >= 80
/* One warp-wide bf16 tensor-core product, the instruction flash attention
 * would build on. */
extern "C" __global__ void probe_mma_bf16(const tg_args_probe_mma_bf16 args) {
    float *out = (float *)args.out;
    unsigned a0 = 0x3f803f80u, a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0;
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    if (threadIdx.x == 0) *out = c0;
}
#endif

extern "C" __global__ void fault(const tg_args_fault args) {
    volatile float *bad = (volatile float *)((float *)args.out + (1ll << 40));
    *bad = 1.0f;
}

/* Busy for about `cycles` clock ticks (the event-timeout test). */
extern "C" __global__ void spin(const tg_args_spin args) {
    long long t0 = clock64();
    while (clock64() - t0 < args.cycles) {
    }
}

/* The graph-replay benchmark's floors (bench/cuda_graph.c): a chain of
 * nop, captured into a CUDA graph, is the cost of dependent launches alone;
 * a chain of chain_step adds the least real work a dependent node can do
 * (read what the node before wrote, write it back changed). */
extern "C" __global__ void nop(void) { TG_PDL(); }

extern "C" __global__ void chain_step(const tg_args_chain_step args) {
    TG_PDL();
    ((float *)args.out)[threadIdx.x] += 1.0f;
}
