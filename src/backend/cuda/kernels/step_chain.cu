/*
 * step_chain.cu: a decoder step's launches run by one kernel, a phase each,
 * a grid barrier between them (cuda_chain.c records them and launches this).
 *
 * Why: a step at batch 1 is ~67 dependent launches of 2-8 us each for 260
 * MB of weights that take ~90 us at the copy rate. A product's weights come
 * after the wait for the launch before, so every launch pays a trip to
 * memory on the critical path, and a kernel's blocks cannot ask early for
 * them while the one before holds the SMs' registers (the staged kernel of
 * the seventeenth session: NOTES.md). Here the grid stays resident, one
 * block of 8 or 16 warps an SM, and while phase p runs its blocks ask
 * the weights of phase p + 1 into L2 (prefetch.global.L2, a thread a
 * 128-byte line, each block a slice), so a phase after the first reads
 * them from L2; the boundary between two phases is a barrier of ~1 us
 * instead of a launch's drain and wait.
 *
 * The phases run the very bodies of the kernels they replace (mvm.cuh's
 * mvm_body for mul_mat_vec_mma, atd.cuh's atd_body for
 * attn_decode_wide_bf16), with TG_CHAIN_WARPS warps a block: a product's
 * warps split K that many ways (at 16 and K = 1024 the sums of 16
 * partials, not 8: not the same bits as the launch, within F32 rounding),
 * and an attention's (head, row) pairs go one a block in turn. What one phase writes, a later one reads through L2 (mvm.cuh's CH:
 * never through the read-only path, which is coherent only for what no
 * part of the kernel writes).
 *
 * The barrier: every block's thread 0 makes the block's writes visible
 * (__threadfence), counts its arrival, and the last to arrive resets the
 * count and advances the generation (release); the others wait for the
 * generation to move (acquire). It needs every block resident at once:
 * the host launches no more blocks than the SMs hold together
 * (cuOccupancy), and a launch after this one starts (programmatic
 * dependent launch) only once every block of this one has passed its
 * first wait, so it cannot take an SM a block of this one still needs.
 *
 * Not here: which launches are chained (cuda_chain.c), the bodies
 * (mvm.cuh, atd.cuh). On an H100 (eighteenth session) chains were correct
 * and 67-79% slower a step than the launches they replace (NOTES.md).
 */
#include "common.cuh"

/* The wait of phase p (ch_p, in shared memory): the launch's own for the
 * first (programmatic dependent launch), the grid barrier after it. A
 * product's phase calls it where its own kernel would wait (mvm.cuh's
 * TG_CHAIN_WAIT), so that its first weights are loaded, as there, while
 * the blocks of the phase before finish: between them is a barrier where a
 * launch was. */
__device__ void ch_wait(void);
#define TG_CHAIN_WAIT() ch_wait()
#include "mvm.cuh"
#include "atd.cuh"

/* Warps a block: 16 (the default) or 8 (-DTG_CHAIN_WARPS=8, a variant).
 * At 16 the block may hold 128 registers a thread and the bodies spill
 * ~340 bytes; at 8 it holds 255 and spills none, but has half the loads
 * in flight. */
#ifndef TG_CHAIN_WARPS
#define TG_CHAIN_WARPS 16
#endif

__device__ __forceinline__ unsigned ch_ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void ch_st_release(unsigned *p, unsigned v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned ch_arrive(unsigned *p) {
    unsigned v;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned long long ch_now(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* A barrier no block has passed in this long ends the kernel with a trap
 * (an error the host reports) instead of a hang: a block that never came
 * (the launch is cooperative, so the driver started them all at once; this
 * is for what that does not foresee). */
#define CH_BARRIER_TIMEOUT_NS 20000000000ull

/* bar[0]: arrivals, bar[1]: the generation. */
__device__ __forceinline__ void ch_barrier(unsigned *bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        /* the generation cannot move before this block arrives */
        const unsigned gen = ch_ld_acquire(bar + 1);
        __threadfence();
        if (ch_arrive(bar) == gridDim.x - 1) {
            atomicExch(bar, 0u);
            ch_st_release(bar + 1, gen + 1);
        } else {
            const unsigned long long t0 = ch_now();
            while (ch_ld_acquire(bar + 1) == gen)
                if (ch_now() - t0 > CH_BARRIER_TIMEOUT_NS) __trap();
        }
        __threadfence();
    }
    __syncthreads();
}

__shared__ int ch_p;         /* the phase running */
__shared__ unsigned *ch_bar; /* the barrier's words */

__device__ void ch_wait(void) {
    if (ch_p == 0) TG_PDL();
    else ch_barrier(ch_bar);
}

/* This block's slice of bytes at p asked into L2, a thread a line. */
__device__ __forceinline__ void ch_prefetch(const char *p, i64 bytes) {
    if (!p || bytes <= 0) return;
    const i64 lines = (bytes + 127) / 128, per = (lines + gridDim.x - 1) / gridDim.x;
    const i64 l0 = (i64)blockIdx.x * per, l1 = l0 + per < lines ? l0 + per : lines;
    for (i64 l = l0 + threadIdx.x; l < l1; l += blockDim.x) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + 128 * l));
}

__device__ __forceinline__ void ch_prefetch_phase(const tg_chain_phase &ph) {
    ch_prefetch(ph.pf[0], ph.pf_bytes[0]);
    ch_prefetch(ph.pf[1], ph.pf_bytes[1]);
}

/* attn_decode_wide_bf16's (head, row) pairs, one a block in turn
 * (args.direct: each writes its row's output); BF16 K and V only, so the
 * kernel holds one attention body. */
__device__ __forceinline__ void ch_attention(const tg_attn_decode_args &a) {
    const int H = (int)a.q.ne[2], rows = H * (int)a.q.ne[3];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        atd_body<1, 16, true, TG_CHAIN_WARPS>(a, 0, r % H, r / H);
        __syncthreads(); /* its shared sums are the next pair's */
    }
}

/* The phases of args (a tg_step_chain_args or tg_step_chain_long_args,
 * the kernel's parameter), in order, each waiting for the one before at
 * its own wait (ch_wait). */
template <typename A> __device__ __forceinline__ void ch_run(const A &args) {
    extern __shared__ __align__(16) unsigned short ch_smem[]; /* the products' normed columns and sums */
    /* the phase running, copied from the parameters: the bodies read their
     * arguments from here (read where the parameters are indexed by p, the
     * bodies held them in registers: 288-400 bytes of spills) */
    __shared__ tg_chain_phase ph;
    for (int p = 0; p < args.n; p++) {
        __syncthreads(); /* every thread is done with the phase before's ph */
        const unsigned *src = (const unsigned *)&args.ph[p];
        for (int i = threadIdx.x; i < (int)(sizeof(tg_chain_phase) / 4); i += blockDim.x) ((unsigned *)&ph)[i] = src[i];
        if (threadIdx.x == 0) ch_p = p, ch_bar = args.bar;
        __syncthreads();
        /* the next phase's weights (or K and V) into L2 while this one runs:
         * weights or hints, so before this phase's wait too */
        if (args.pf_ahead) {
            if (p + 1 < args.n) ch_prefetch_phase(args.ph[p + 1]);
            else ch_prefetch(args.tail_pf, args.tail_pf_bytes);
        }
        if (ph.kind == TG_CHAIN_MVM) {
            /* its early loads, then ch_wait, where its own kernel waits */
            mvm_body<1, MVM_NT, MVM_U, false, false, false, true>(ph.u.mv, ch_smem);
        } else {
            ch_wait();
            ch_attention(ph.u.ad);
        }
    }
}

extern "C" __global__ void __launch_bounds__(TG_CHAIN_WARPS * 32, 1)
    step_chain(const __grid_constant__ tg_step_chain_args args) {
    ch_run(args);
}

extern "C" __global__ void __launch_bounds__(TG_CHAIN_WARPS * 32, 1)
    step_chain_long(const __grid_constant__ tg_step_chain_long_args args) {
    ch_run(args);
}
