/*
 * attention_mma.cu: attention on the tensor cores (bf16 mma.sync m16n8k16,
 * f32 accumulation), flash-attention order: a warp owns 16 queries, a block
 * 64; keys come in tiles of 64 staged in shared memory as bf16 (K as rows,
 * V transposed, both padded so the fragment loads hit 32 distinct banks).
 * Scores are scaled, biased by the mask and soft-maxed online in f32 (in
 * base 2); the probabilities go back into the tensor cores as bf16 for P·V.
 *
 * K and V are packed first, once per head, by attn_pack_k and attn_pack_vt
 * into the backend's scratch: bf16, K as [B][H][Tkp][D] and V transposed as
 * [B][H][Dv][Tkp], Tkp the key count rounded up to the tile with zeros. The
 * main kernel then stages a tile with 16-byte copies and no bounds checks;
 * converting K and V from their strided F32 source inside it instead made
 * every block of queries convert its head's keys again, and that staging,
 * not the products, was most of its time.
 *
 * The K and V^T fragments come from shared memory by ldmatrix (one x4
 * load gives the B operands of two mma, where 32-bit loads took four), and
 * in the packed path the block's 64 x 64 tile of the mask (the encoder's
 * rel-pos term, F32, rows not 8-byte aligned in general) is staged by
 * cp.async beside each K tile, so its loads are in flight during the
 * previous tile's softmax and P·V instead of stalling the scores. At the
 * released size (H200, batch 64) the kernel was issue-stalled at 8.4
 * cycles an instruction with 2 blocks an SM; the mask's global loads and
 * the fragments' 32-bit shared loads sat in front of every mma. The mask
 * rows (the rel-shifted view's start at every offset of a 16-byte piece)
 * come in 16-byte pieces from the aligned address at or below each row's
 * first key, each row read from its own offset in the tile: 17 copies a
 * row where 4-byte copies took 64 (TG_AM_MASK16).
 *
 * A tile's scores are its eight 8-key chunks taking turns over D (eight
 * independent accumulators, not one chain of ten mma a chunk), and its
 * copies and fragment loads add constants to 32-bit shared addresses. At
 * the released size (an H100, batch 64, 2026-12-06) these took the kernel
 * from 792 to ~725 us a layer (ncu) and its executed instructions from 163
 * to 98 million, the warps then waiting ~11 cycles an issue, ~40% of it
 * on L1TEX; two stages of tiles in flight (the next tile's copies issued
 * as a tile began, 107 KB a block) changed nothing (729 us) and were not
 * kept. The 2 blocks (8 warps) an SM that 255 registers allow stay; held
 * to 168 (three blocks) the kernel spilled and was slower. Its stall
 * samples then put 43% on instructions run once a block, most on the
 * loads of Q into registers (~40 a thread, in dependent batches): with
 * attention_mma_packed_qs (CT_CUDA_ATTN_QSTAGE, on by default) the
 * block's Q rows come by cp.async ahead of the first key tile: on an H100
 * (fourteenth session, ncu on one batch-64 layer) 729 -> 544 us.
 *
 * attention_mma_packed2 runs two groups of 4 warps a block over the same
 * 64 queries, each over half of the key tiles with its own tiles in shared
 * memory and its own barrier, merged at the end: where the blocks are
 * fewer than the SMs (the encoder at batch 1: 56 blocks on 132 SMs), a
 * warp's tiles in turn are the kernel's time, and this halves them.
 *
 * Specialised by the head sizes (TG_AD for q/k, TG_ADV for v; multiples of
 * 16 up to 160, the model's 128 and 160), so every fragment index is a
 * compile-time constant and lives in registers. The host uses this kernel
 * for default-precision attention on sm_80 and newer; F32-precision requests
 * and other head sizes take attention.cu.
 *
 * Not here: wgmma (sm_90a) or TMA staging.
 */
#include "common.cuh"

#ifndef TG_AD
#define TG_AD 128
#endif
#ifndef TG_ADV
#define TG_ADV TG_AD
#endif
#define AM_BK 64                 /* keys per tile          */
#define AM_KS (TG_AD + 8)        /* K row stride, bf16     */
#define AM_VS (AM_BK + 8)        /* V^T row stride, bf16   */
#define AM_MS (AM_BK + 8)        /* mask tile row stride, floats (float2 reads spread over the banks) */
#define AM_MS16 (AM_BK + 8)      /* ... for a BF16 mask in pieces: 9 pieces of 8 keys, bf16 */
#define AM_QS (TG_AD + 8)        /* staged Q row stride, floats (a warp's float2 loads on 32 banks) */

#define AM_LOG2E 1.4426950408889634f
#define AM_GT 128 /* threads of a key group, which stage its tiles */

/* K (any strides, F32 or F16) to bf16 [B][H][Tkp][D], zero rows past Tk.
 * Grid: (x, H*B); two elements a thread, 32-bit index math within a head. */
extern "C" __global__ void attn_pack_k(const tg_args_attn_pack_k args) {
    TG_PDL();
    unsigned *dst = (unsigned *)args.dst;
    const tg_t &k = args.t;
    const int Tkp = args.tkp;
    const int D2 = (int)(k.ne[0] / 2), Tk = (int)k.ne[1];
    const int bh = blockIdx.y, h = bh % (int)k.ne[2], b = bh / (int)k.ne[2];
    unsigned *out = dst + (i64)bh * Tkp * D2;
    const char *base = k.p + h * k.nb[2] + b * k.nb[3];
    /* Rows of contiguous F32 pairs (the usual case) load as float2. */
    const bool f2 = k.type == TG_KT_F32 && k.nb[0] == 4 && (k.nb[1] & 7) == 0 && ((unsigned long long)base & 7) == 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < Tkp * D2; i += gridDim.x * blockDim.x) {
        int j = i / D2, d = 2 * (i % D2);
        unsigned w = 0;
        if (j < Tk) {
            const char *p = base + j * k.nb[1] + d * k.nb[0];
            if (f2) {
                float2 x = *(const float2 *)p;
                w = tg_pack_bf16(x.x, x.y);
            } else {
                w = tg_pack_bf16(tg_ld(p, k.type), tg_ld(p + k.nb[0], k.type));
            }
        }
        out[i] = w;
    }
}

/* V (any strides, F32 or F16) to bf16 transposed, [B][H][Dv][Tkp], zero
 * columns past Tk, through a 32x32 tile in shared memory so both the reads
 * (along d) and the writes (along keys) are coalesced. Grid: (Tkp/32,
 * ceil(Dv/32), H*B), block 32x8 as 256 threads. */
extern "C" __global__ void attn_pack_vt(const tg_args_attn_pack_vt args) {
    TG_PDL();
    unsigned short *dst = (unsigned short *)args.dst;
    const tg_t &v = args.t;
    const int Tkp = args.tkp;
    __shared__ float tile[32][33];
    const int Dv = (int)v.ne[0], Tk = (int)v.ne[1];
    const int bh = blockIdx.z, h = bh % (int)v.ne[2], b = bh / (int)v.ne[2];
    const int j0 = blockIdx.x * 32, d0 = blockIdx.y * 32, tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    const char *base = v.p + h * v.nb[2] + b * v.nb[3];
    for (int r = ty; r < 32; r += 8) {
        int j = j0 + r, d = d0 + tx;
        tile[r][tx] = (j < Tk && d < Dv) ? tg_ld(base + j * v.nb[1] + d * v.nb[0], v.type) : 0.0f;
    }
    __syncthreads();
    unsigned short *out = dst + (i64)bh * Dv * Tkp;
    for (int r = ty; r < 32; r += 8) {
        int d = d0 + r, j = j0 + tx;
        if (d < Dv) out[(i64)d * Tkp + j] = tg_f2bf(tile[tx][r]);
    }
}

#if TG_CC >= 80
/* Four 8x8 BF16 matrices from shared memory: lane l gives the address of
 * row l % 8 of matrix l / 8 (16 bytes), and gets in r[i] row l / 4, columns
 * 2 (l % 4) and + 1 of matrix i: the B fragment of mma m16n8k16 when the
 * matrices' rows are its n and their columns its k. The address is a
 * 32-bit shared one (smem_addr): the tile loops add constants to one base,
 * which ptxas folds into the instruction, where a generic pointer cost a
 * 64-bit add and a conversion a load. x2: the first two matrices. */
__device__ __forceinline__ void ldmatrix_x4_s(unsigned *r, unsigned saddr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(saddr));
}
__device__ __forceinline__ void ldmatrix_x2_s(unsigned *r, unsigned saddr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(saddr));
}
#endif

/* The larger of a and b, NaN if either is (PTX max.NaN, sm_80): a NaN
 * score makes its row's running maximum NaN, so the row's output is NaN
 * whichever tile, and whichever key group, met it. fmaxf drops NaN, and a
 * tile of NaN scores met while the maximum was still -inf then gave
 * probabilities of 0: a finite output that depended on where the tiles
 * (now the groups) began. */
__device__ __forceinline__ float am_max(float a, float b) {
#if TG_CC >= 80
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return fmaxf(a, b);
#endif
}

/* 2^x by the special-function unit, results below 2^-126 flushed to 0
 * (ex2.approx.ftz; exp2f also takes care of subnormal results, a few
 * instructions more a key, for probabilities then rounded to BF16). */
__device__ __forceinline__ float am_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

/* A block-level barrier for the warps of one key group: __syncthreads
 * where the block is one group, else named barrier 1 + group over its 128
 * threads (the groups run different tile counts, so they never meet at a
 * block-wide one inside the loop). */
template <int KG> __device__ __forceinline__ void am_group_sync(int gi) {
    static_assert(KG <= 2, "named barriers 1 and 2 only");
    if (KG == 1) __syncthreads();
    else if (gi == 0) asm volatile("bar.sync 1, 128;" ::: "memory");
    else asm volatile("bar.sync 2, 128;" ::: "memory");
}

/* Where the block's mask tile comes from: row r of the block (query q0 +
 * r) and key k at base + min(q0 + r, Tq - 1) * rs + min(k, Tk - 1) * ks
 * (past the ends it repeats an element in range: keys past Tk the softmax
 * sets to -inf, rows past Tq are computed and never stored); base NULL
 * when there is no mask. row: where the tile goes in
 * 16-byte pieces (TG_AM_MASK16, keys contiguous), the block's 64 rows'
 * addresses of key 0 in shared memory; NULL for 4-byte copies. */
struct am_mask_src {
    const char *base;
    i64 rs, ks;
    int q0, tq, tk;
    const unsigned long long *row;
    const char *end; /* one past the mask's last element (row only) */
    bool bf16;       /* BF16 elements (row only: its producer stored them so, CT_CUDA_ATTN_BD16) */
};

/* A key's mask value in a tile row staged in pieces: element i from b
 * (the thread's first key in the row), F32 or BF16. */
__device__ __forceinline__ float am_mask_at(const char *b, int i, bool bf16) {
    return bf16 ? __uint_as_float((unsigned)*(const unsigned short *)(b + 2 * i) << 16) : *(const float *)(b + 4 * i);
}

/* The scores' initial values from a mask tile staged in pieces: this
 * thread's two rows from b0 and b1 (keys t * 2 and + 1 of each chunk of
 * 8), times inv_scale; BF16 (the element type fixed, so that no load
 * waits on a select between the two). */
template <bool BF16>
__device__ __forceinline__ void am_mask_tile_init(float (&s)[AM_BK / 8][4], const char *b0, const char *b1,
                                                  float inv_scale) {
#pragma unroll
    for (int nc = 0; nc < AM_BK / 8; nc++) {
        s[nc][0] = inv_scale * am_mask_at(b0, nc * 8, BF16);
        s[nc][1] = inv_scale * am_mask_at(b0, nc * 8 + 1, BF16);
        s[nc][2] = inv_scale * am_mask_at(b1, nc * 8, BF16);
        s[nc][3] = inv_scale * am_mask_at(b1, nc * 8 + 1, BF16);
    }
}

/* A tile's mask rows in 16-byte pieces, ES-byte elements: 64 keys from an
 * ES-aligned address take one more piece than 64 keys fill (17 for F32,
 * 9 for BF16), a row of the tile AM_MS floats (F32) or AM_MS16 BF16. A
 * piece wholly past the tile's last key is not copied (the softmax drops
 * those keys, whatever the tile holds), and one that would reach past the
 * mask's end comes in 4-byte words, those holding a needed key (for BF16
 * a word may take 2 bytes past the end: inside the producer's F32-sized
 * storage, whose first half the BF16 mask is). */
template <int ES>
__device__ __forceinline__ void stage_mask_pieces(float *Ms, const am_mask_src &m, int k0, int tid) {
#if TG_CC >= 80
    constexpr int NP = AM_BK * ES / 16 + 1, ROWB = ES == 4 ? AM_MS * 4 : AM_MS16 * 2;
    const int kend = k0 + AM_BK < m.tk ? k0 + AM_BK : m.tk;
    const unsigned long long end = (unsigned long long)m.end;
    /* a row to two threads (of AM_GT), pieces c0, c0 + 2, ..; the row's
     * addresses once, then a piece is a compare and a copy */
    const int r = tid >> 1, c0 = tid & 1;
    const unsigned long long rp = m.row[r], a = rp + (unsigned long long)ES * (unsigned)k0,
                             lim = rp + (unsigned long long)ES * (unsigned)kend;
    const unsigned long long p0 = (a & ~15ull) + 16ull * (unsigned)c0;
    char *dst0 = (char *)Ms + r * ROWB + 16 * c0;
    const unsigned sdst0 = smem_addr(dst0);
    if (p0 + 16ull * NP <= end) {
        /* every piece inside the mask (all rows but the last few) */
#pragma unroll
        for (int i = 0; i < (NP + 1) / 2; i++) {
            if (c0 + 2 * i >= NP) break;
            const unsigned long long p = p0 + 32ull * (unsigned)i;
            if (p >= lim) break; /* and every later piece */
            cp_async16_s(sdst0 + 32 * i, (const void *)p);
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < (NP + 1) / 2; i++) {
        if (c0 + 2 * i >= NP) break;
        const unsigned long long p = p0 + 32ull * (unsigned)i;
        if (p >= lim) break; /* and every later piece */
        if (p + 16 <= end) {
            cp_async16_s(sdst0 + 32 * i, (const void *)p);
        } else {
            char *dst = dst0 + 32 * i;
            for (int j = 0; j < 4; j++)
                if (p + 4 * j + 4 > a && p + 4 * j < lim) cp_async4(dst + 4 * j, (const void *)(p + 4 * j));
        }
    }
#endif
}

/* The packed tiles of K rows k0.. and V^T columns k0.., issued as cp.async
 * groups (one each) by the tid-th of a group's AM_GT threads (a block of
 * AM_GT or TG_AM_GROUPS groups of them); the K group also carries the
 * mask's 64 x 64 tile at keys k0.. . With m.row, a row's keys come in
 * 16-byte pieces from the aligned address at or below key k0 (so key k0
 * lands at the row's offset (address & 15) / 4 in the tile, the same for
 * every tile: k0 is a multiple of 64); a piece wholly past the tile's
 * last key is not copied (the softmax drops those keys, whatever the tile
 * holds there), and one that would reach past the mask's end comes a key
 * at a time. Else a row's 64 keys by two warps, 4 bytes a copy. */
__device__ __forceinline__ void stage_k_async(unsigned short *Ks, const uint4 *kg, int k0, float *Ms,
                                              const am_mask_src &m, int tid) {
#if TG_CC >= 80
    {
        /* row tid / 2 of the tile, its pieces tid % 2 + 2i: both addresses
         * a constant step apart (a piece's row and column by division took
         * ~20 instructions a copy) */
        const int r = tid >> 1, c0 = tid & 1;
        const unsigned d = smem_addr(Ks + r * AM_KS + c0 * 8);
        const uint4 *g = kg + (i64)(k0 + r) * (TG_AD / 8) + c0;
#pragma unroll
        for (int i = 0; i < TG_AD / 16; i++) cp_async16_s(d + 32 * i, g + 2 * i);
    }
    if (m.row) {
        if (m.bf16) stage_mask_pieces<2>(Ms, m, k0, tid);
        else stage_mask_pieces<4>(Ms, m, k0, tid);
    } else if (m.base) {
        const int kk = tid & (AM_BK - 1), k = k0 + kk < m.tk ? k0 + kk : m.tk - 1;
        const char *col = m.base + (i64)k * m.ks;
#pragma unroll 8
        for (int r = tid / AM_BK; r < 64; r += AM_GT / AM_BK) {
            const int q = m.q0 + r < m.tq ? m.q0 + r : m.tq - 1;
            cp_async4(Ms + r * AM_MS + kk, col + (i64)q * m.rs);
        }
    }
    cp_async_commit();
#endif
}

__device__ __forceinline__ void stage_v_async(unsigned short *Vt, const unsigned short *vg, int Tkp, int k0, int tid) {
#if TG_CC >= 80
    /* rows tid / 8 + 16i of V^T, piece tid % 8 of each */
    const int d0 = tid >> 3, c8 = tid & 7;
    const unsigned d = smem_addr(Vt + d0 * AM_VS + c8 * 8);
    const unsigned short *g = vg + (i64)d0 * Tkp + k0 + c8 * 8;
    const i64 step = (i64)16 * Tkp;
#pragma unroll
    for (int i = 0; i < TG_ADV / 16; i++) cp_async16_s(d + 32 * i * AM_VS, g + i * step);
    cp_async_commit();
#endif
}

/* The block's 64 rows of Q from query q0 (F32, contiguous, 16-byte
 * aligned rows: the host's condition for attention_mma_packed_qs) into
 * Qs, rows of AM_QS floats, as one cp.async group: a row to two of the AM_GT threads,
 * pieces tid % 2 + 2i. Rows past Tq repeat row Tq - 1 (never past Q's
 * end; their fragments are zeros). Where each warp loaded its own rows into
 * registers, the block's first tile waited on ~40 dependent global loads a
 * thread: at the released size (an H100, batch 64) 43% of the kernel's
 * stall samples sat on instructions run once a block, most of them on
 * those loads. */
__device__ __forceinline__ void stage_q_async(const float *Qs, const tg_t &q, int h, int b, int q0, int Tq, int tid) {
#if TG_CC >= 80
    const int r = tid >> 1, c0 = tid & 1, row = q0 + r < Tq ? q0 + r : Tq - 1;
    const char *src = q.p + tg_off(q, 0, row, h, b) + 16 * c0;
    const unsigned dst = smem_addr(Qs + r * AM_QS) + 16 * c0;
#pragma unroll
    for (int i = 0; i < TG_AD / 8; i++) cp_async16_s(dst + 32 * i, src + 32 * i);
    cp_async_commit();
#endif
}

/* The tiles from the strided F32/F16 sources, converted on the way (one
 * block of queries per head: nothing is converted twice). */
__device__ __forceinline__ void stage_kv_convert(unsigned short *Ks, unsigned short *Vt, const tg_t &k,
                                                 const tg_t &v, int h, int b, i64 k0) {
    const i64 Tk = k.ne[1];
    for (int e = threadIdx.x; e < AM_BK * (TG_AD / 2); e += blockDim.x) {
        int j = e / (TG_AD / 2), dp = e % (TG_AD / 2);
        i64 kj = k0 + j;
        unsigned w = 0;
        if (kj < Tk) {
            const char *p = k.p + tg_off(k, 2 * dp, kj, h, b);
            w = tg_pack_bf16(tg_ld(p, k.type), tg_ld(p + k.nb[0], k.type));
        }
        *(unsigned *)(Ks + j * AM_KS + 2 * dp) = w;
    }
    for (int e = threadIdx.x; e < AM_BK * TG_ADV; e += blockDim.x) {
        int j = e / TG_ADV, d = e % TG_ADV;
        i64 kj = k0 + j;
        float x = kj < Tk ? tg_ld(v.p + tg_off(v, d, kj, h, b), v.type) : 0.0f;
        Vt[d * AM_VS + j] = tg_f2bf(x);
    }
}

/* A key group's shared memory: the K tile, the V^T tile and, with a mask
 * in the packed path, the mask tile (bytes; cuda_attention.c sizes the
 * same). The table of mask rows (TG_AM_MASK16) follows the groups. */
__device__ __forceinline__ int am_group_bytes(bool mask_tile) {
    return (AM_BK * AM_KS + TG_ADV * AM_VS) * 2 + (mask_tile ? 64 * AM_MS * 4 : 0);
}

/* The kernel body. PACKED: K and V^T come packed (kp, vtp), staged with
 * cp.async so that the next K tile loads during P·V and the V tile during
 * Q·Kᵀ and the softmax; else they come from k and v, converted while
 * staged. KG (packed only): key groups of 4 warps a block, each over its
 * share of the key tiles for the block's 64 queries, with its own tiles in
 * shared memory; at the end the other groups' running maxima, sums and
 * outputs are merged into group 0's, which writes the result (where one
 * block a head and 64 queries leaves SMs idle, 2 groups put 8 warps on
 * each block's SM). opt: TG_AM_MASK16 (packed only). QS (packed, one key
 * group): the block's Q rows staged in shared memory by cp.async first
 * (stage_q_async), at TG_AM_QSTAGE_OFF bytes past the group's tiles. */
template <bool PACKED, int KG, bool QS = false>
__device__ __forceinline__ void attention_body(const tg_t &o, const tg_t &q, const tg_t &k, const tg_t &v,
                                               const unsigned short *kp, const unsigned short *vtp, int Tkp,
                                               const tg_t &mask, int has_mask, float scale, int opt,
                                               const char *mask_end) {
#if TG_CC >= 80
    extern __shared__ __align__(16) unsigned short smem16[];
    const i64 Tq = q.ne[1];
    const int Tk = (int)k.ne[1];
    const int h = blockIdx.y, b = blockIdx.z, bh = b * (int)q.ne[2] + h;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int gi = KG == 1 ? 0 : warp >> 2, wq = KG == 1 ? warp : warp & 3; /* key group, query warp */
    const int tid = KG == 1 ? (int)threadIdx.x : (int)threadIdx.x & (AM_GT - 1); /* in its group */
    const bool mask_tile = PACKED && has_mask;
    unsigned short *Ks = (unsigned short *)((char *)smem16 + gi * am_group_bytes(mask_tile)); /* [AM_BK][AM_KS] */
    unsigned short *Vt = Ks + AM_BK * AM_KS;                                                   /* [TG_ADV][AM_VS] */
    float *Ms = (float *)(Vt + TG_ADV * AM_VS); /* [64][AM_MS], packed path with a mask */
    const int g = lane >> 2, t = lane & 3;
    const i64 r0 = (i64)blockIdx.x * 64 + wq * 16 + g; /* this thread's rows: r0 and r0 + 8 */
    const i64 r1 = r0 + 8;
    const float sl2 = scale * AM_LOG2E;
    const uint4 *kg = (const uint4 *)(kp + (i64)bh * Tkp * TG_AD);
    const unsigned short *vg = vtp + (i64)bh * TG_ADV * Tkp;
    am_mask_src msrc = {NULL, 0, 0, (int)blockIdx.x * 64, (int)Tq, Tk, NULL, mask_end, mask.type == TG_KT_BF16};
    if (mask_tile) {
        msrc.base = mask.p + tg_off_bc(mask, 0, 0, h, b);
        msrc.rs = mask.ne[1] == 1 ? 0 : mask.nb[1];
        msrc.ks = mask.ne[0] == 1 ? 0 : mask.nb[0];
        if ((opt & TG_AM_MASK16) && msrc.ks == (msrc.bf16 ? 2 : 4)) {
            /* the rows' addresses, once for every tile of either group */
            unsigned long long *row = (unsigned long long *)((char *)smem16 + KG * am_group_bytes(true));
            if (threadIdx.x < 64) {
                const int qr = msrc.q0 + (int)threadIdx.x < msrc.tq ? msrc.q0 + (int)threadIdx.x : msrc.tq - 1;
                row[threadIdx.x] = (unsigned long long)(msrc.base + (i64)qr * msrc.rs);
            }
            __syncthreads();
            msrc.row = row;
        }
    }
    /* this group's share of the key tiles, [kb, ke) */
    const int n_tiles = (Tk + AM_BK - 1) / AM_BK, per = (n_tiles + KG - 1) / KG;
    const int kb = gi * per * AM_BK, ke = (gi + 1) * per * AM_BK < Tk ? (gi + 1) * per * AM_BK : Tk;
    /* Q staged (QS): its own copy group, first in line */
    const bool qstage = PACKED && KG == 1 && QS;
    const float *Qs = (const float *)((char *)smem16 + KG * am_group_bytes(mask_tile) + TG_AM_QSTAGE_OFF);
    if (qstage) stage_q_async(Qs, q, h, b, (int)blockIdx.x * 64, (int)Tq, tid);
    if (PACKED && kb < ke) {
        stage_k_async(Ks, kg, kb, Ms, msrc, tid);
        stage_v_async(Vt, vg, Tkp, kb, tid);
    }
    /* this lane's ldmatrix row: row lane % 8 of matrix lane / 8 */
    const int lm = lane >> 3, lr = lane & 7;
    /* its rows' shared addresses in the K tile (x4: two 16-wide chunks of
     * D; x2: one) and the V^T tile (x4: two 8-wide chunks of Dv) */
    const unsigned ks_lane = smem_addr(Ks + lr * AM_KS + lm * 8), ks_lane2 = smem_addr(Ks + lr * AM_KS + (lm & 1) * 8),
                   vt_lane = smem_addr(Vt + ((lm >> 1) * 8 + lr) * AM_VS + (lm & 1) * 8);
    /* this thread's two rows of the mask tile from the tile's first key:
     * mw0/mw1 for 4-byte copies (float2 pairs), mb0/mb1 for a row staged
     * in 16-byte pieces, which starts at its offset in the first piece */
    const int ra = wq * 16 + g;
    const float *mw0 = Ms + ra * AM_MS + t * 2, *mw1 = mw0 + 8 * AM_MS;
    const bool m16 = msrc.row != NULL, mb16 = m16 && msrc.bf16;
    const char *mb0 = NULL, *mb1 = NULL;
    if (m16) {
        const int es = mb16 ? 2 : 4, rowb = mb16 ? AM_MS16 * 2 : AM_MS * 4;
        mb0 = (const char *)Ms + ra * rowb + es * ((int)(msrc.row[ra] & 15) / es + 2 * t);
        mb1 = (const char *)Ms + (ra + 8) * rowb + es * ((int)(msrc.row[ra + 8] & 15) / es + 2 * t);
    }

    /* Q fragments (A operand), straight from global memory: from the two
     * rows' starts, a column pair as one float2 where the rows' columns
     * are contiguous and 8-byte aligned (q is F32, the op's contract). */
    unsigned qa[TG_AD / 16][4];
    if (qstage) {
        /* from the staged rows once they are in (the first tile's K and V
         * groups may still be on their way), a column pair a load; rows
         * past Tq zero, as below (the two loops apart, not one helper, so
         * that the register path compiles as it did before QS) */
        if (kb < ke) cp_async_wait<2>();
        else cp_async_wait<0>();
        __syncthreads();
        const float *q0 = Qs + (wq * 16 + g) * AM_QS, *q1 = q0 + 8 * AM_QS;
#pragma unroll
        for (int kc = 0; kc < TG_AD / 16; kc++) {
#pragma unroll
            for (int part = 0; part < 4; part++) {
                const bool in = ((part & 1) ? r1 : r0) < Tq;
                const int col = kc * 16 + t * 2 + ((part & 2) ? 8 : 0);
                const float2 x = *(const float2 *)(((part & 1) ? q1 : q0) + col);
                qa[kc][part] = in ? tg_pack_bf16(x.x, x.y) : 0u;
            }
        }
    } else {
        const char *q0 = q.p + tg_off(q, 0, r0 < Tq ? r0 : 0, h, b), *q1 = q.p + tg_off(q, 0, r1 < Tq ? r1 : 0, h, b);
        const i64 qn = q.nb[0];
        const bool pairs = qn == 4 && (((unsigned long long)q0 | (unsigned long long)q1) & 7) == 0;
#pragma unroll
        for (int kc = 0; kc < TG_AD / 16; kc++) {
#pragma unroll
            for (int part = 0; part < 4; part++) {
                const bool in = ((part & 1) ? r1 : r0) < Tq;
                const int col = kc * 16 + t * 2 + ((part & 2) ? 8 : 0);
                const char *p = ((part & 1) ? q1 : q0) + col * qn;
                float x0 = 0.0f, x1 = 0.0f;
                if (in && pairs) {
                    const float2 x = *(const float2 *)p;
                    x0 = x.x, x1 = x.y;
                } else if (in) {
                    x0 = *(const float *)p;
                    x1 = *(const float *)(p + qn);
                }
                qa[kc][part] = tg_pack_bf16(x0, x1);
            }
        }
    }
    /* This thread's two mask rows (a dim of extent 1 broadcasts). With a
     * positive scale the mask enters as the products' initial value,
     * mask / scale, so its loads are issued ahead of the tensor-core work:
     * (q·k + mask / scale) * scale = q·k * scale + mask. */
    const char *mr0 = NULL, *mr1 = NULL;
    i64 mstep = 0;
    const bool mask_in_acc = has_mask && scale > 0.0f && scale < TG_INF;
    const float inv_scale = mask_in_acc ? 1.0f / scale : 0.0f;
    if (has_mask) {
        mr0 = mask.p + tg_off_bc(mask, 0, r0 < Tq ? r0 : 0, h, b);
        mr1 = mask.p + tg_off_bc(mask, 0, r1 < Tq ? r1 : 0, h, b);
        mstep = mask.ne[0] == 1 ? 0 : mask.nb[0];
    }
    /* Mask rows of contiguous, 8-byte aligned floats: a thread's two keys
     * per chunk come in one load. The same for every thread of the block. */
    const bool mask_pairs = mask_in_acc && mstep == 4 && ((unsigned long long)mask.p & 7) == 0 &&
                            (mask.ne[1] == 1 || (mask.nb[1] & 7) == 0) && (mask.ne[2] == 1 || (mask.nb[2] & 7) == 0) &&
                            (mask.ne[3] == 1 || (mask.nb[3] & 7) == 0);

    float acc[TG_ADV / 8][4];
#pragma unroll
    for (int nc = 0; nc < TG_ADV / 8; nc++) acc[nc][0] = acc[nc][1] = acc[nc][2] = acc[nc][3] = 0.0f;
    float m0 = -TG_INF, m1 = -TG_INF, l0 = 0.0f, l1 = 0.0f;

    for (int k0 = kb; k0 < ke; k0 += AM_BK) {
        const bool more = k0 + AM_BK < ke;
        if (PACKED) {
            cp_async_wait<1>(); /* K(k0) in; V(k0) may still be on its way */
        } else {
            __syncthreads();
            stage_kv_convert(Ks, Vt, k, v, h, b, k0);
        }
        am_group_sync<KG>(gi);

        /* S = Q·Kᵀ (+ mask / scale) for 64 keys: 8 chunks of 8. */
        float s[AM_BK / 8][4];
        /* The chunks' initial values (the mask) first, the mode tested
         * once a tile; then the products with the D loop outside the
         * chunks, so that eight independent accumulators take turns. A
         * chunk at a time, each the next's dependency chain of ten mma
         * (and the mask's branch between chunks), the warps stalled on
         * the mma's latency: 2 warps a scheduler at 217 registers could
         * not hide it (the released size, an H100: 5.3 cycles an issue,
         * most of them that stall). The same sums in the same order. */
        if (PACKED && mask_in_acc && m16) {
            /* the staged tile, a key at a time (a row's offset in its
             * pieces is any of 0-3; keys past Tk hold anything, dropped
             * below) */
            if (mb16) am_mask_tile_init<true>(s, mb0, mb1, inv_scale);
            else am_mask_tile_init<false>(s, mb0, mb1, inv_scale);
        } else if (PACKED && mask_in_acc) {
            /* the staged tile (keys past Tk hold a repeat, dropped below) */
#pragma unroll
            for (int nc = 0; nc < AM_BK / 8; nc++) {
                float2 a = *(const float2 *)(mw0 + nc * 8), c = *(const float2 *)(mw1 + nc * 8);
                s[nc][0] = inv_scale * a.x, s[nc][1] = inv_scale * a.y;
                s[nc][2] = inv_scale * c.x, s[nc][3] = inv_scale * c.y;
            }
        } else {
#pragma unroll
            for (int nc = 0; nc < AM_BK / 8; nc++) {
                int kj = k0 + nc * 8 + t * 2;
                if (mask_pairs && kj + 1 < Tk) {
                    float2 a = *(const float2 *)(mr0 + kj * 4), c = *(const float2 *)(mr1 + kj * 4);
                    s[nc][0] = inv_scale * a.x, s[nc][1] = inv_scale * a.y;
                    s[nc][2] = inv_scale * c.x, s[nc][3] = inv_scale * c.y;
                } else {
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        s[nc][e] = mask_in_acc && kj + (e & 1) < Tk
                                       ? inv_scale * *(const float *)(((e & 2) ? mr1 : mr0) + (kj + (e & 1)) * mstep)
                                       : 0.0f;
                }
            }
        }
        /* the K fragments of two 16-wide chunks of D per ldmatrix */
#pragma unroll
        for (int kc = 0; kc + 1 < TG_AD / 16; kc += 2) {
#pragma unroll
            for (int nc = 0; nc < AM_BK / 8; nc++) {
                unsigned f[4];
                ldmatrix_x4_s(f, ks_lane + 2 * (nc * 8 * AM_KS + kc * 16));
                tg_mma_bf16(s[nc], qa[kc], f[0], f[1]);
                tg_mma_bf16(s[nc], qa[kc + 1], f[2], f[3]);
            }
        }
        if ((TG_AD / 16) & 1) {
#pragma unroll
            for (int nc = 0; nc < AM_BK / 8; nc++) {
                unsigned f[2];
                ldmatrix_x2_s(f, ks_lane2 + 2 * (nc * 8 * AM_KS + (TG_AD / 16 - 1) * 16));
                tg_mma_bf16(s[nc], qa[TG_AD / 16 - 1], f[0], f[1]);
            }
        }
        /* Scale (and mask, when not in the products), in base 2, and the
         * running max per row. Keys past Tk exist only in the last tile,
         * whose loop alone checks them; the usual tile (mask in the
         * products, or none) only scales. Rows past Tq are computed from
         * clamped mask rows (the packed tile's at Tq - 1, mr0 and mr1 at
         * row 0) and zero queries, and never stored. (Per-key tests and
         * exp2f's subnormal handling were ~19% of the main loop's static
         * instructions, sm_90, D = 160.) */
        float mt0 = -TG_INF, mt1 = -TG_INF;
        if (k0 + AM_BK <= Tk && !(has_mask && !mask_in_acc)) {
#pragma unroll
            for (int nc = 0; nc < AM_BK / 8; nc++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float x = s[nc][e] * sl2;
                    s[nc][e] = x;
                    if (e & 2) mt1 = am_max(mt1, x);
                    else mt0 = am_max(mt0, x);
                }
            }
        } else {
#pragma unroll
            for (int nc = 0; nc < AM_BK / 8; nc++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int kj = k0 + nc * 8 + t * 2 + (e & 1);
                    float x = s[nc][e] * sl2;
                    if (kj >= Tk) x = -TG_INF;
                    else if (has_mask && !mask_in_acc)
                        x += AM_LOG2E * (PACKED ? (m16 ? am_mask_at((e & 2) ? mb1 : mb0, nc * 8 + (e & 1), mb16)
                                                       : ((e & 2) ? mw1 : mw0)[nc * 8 + (e & 1)])
                                                : *(const float *)(((e & 2) ? mr1 : mr0) + kj * mstep));
                    s[nc][e] = x;
                    if (e & 2) mt1 = am_max(mt1, x);
                    else mt0 = am_max(mt0, x);
                }
            }
        }
        if (PACKED) {
            am_group_sync<KG>(gi); /* every warp of the group is done with K(k0) and the mask tile */
            if (more) stage_k_async(Ks, kg, k0 + AM_BK, Ms, msrc, tid);
        }
        mt0 = am_max(mt0, __shfl_xor_sync(0xffffffffu, mt0, 1));
        mt0 = am_max(mt0, __shfl_xor_sync(0xffffffffu, mt0, 2));
        mt1 = am_max(mt1, __shfl_xor_sync(0xffffffffu, mt1, 1));
        mt1 = am_max(mt1, __shfl_xor_sync(0xffffffffu, mt1, 2));
        float mn0 = am_max(m0, mt0), mn1 = am_max(m1, mt1);
        float c0 = (m0 == -TG_INF) ? (mn0 == -TG_INF ? 1.0f : 0.0f) : am_exp2(m0 - mn0);
        float c1 = (m1 == -TG_INF) ? (mn1 == -TG_INF ? 1.0f : 0.0f) : am_exp2(m1 - mn1);
        m0 = mn0;
        m1 = mn1;
        /* a row whose maximum is -inf has every score -inf: subtracting 0
         * gives its probabilities 0 without a test a key (NaN stays NaN) */
        const float ms0 = mn0 == -TG_INF ? 0.0f : mn0, ms1 = mn1 == -TG_INF ? 0.0f : mn1;
        float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
        for (int nc = 0; nc < AM_BK / 8; nc++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = am_exp2(s[nc][e] - ((e & 2) ? ms1 : ms0));
                s[nc][e] = p;
                if (e & 2) ps1 += p;
                else ps0 += p;
            }
        }
        l0 = l0 * c0 + ps0;
        l1 = l1 * c1 + ps1;
#pragma unroll
        for (int nc = 0; nc < TG_ADV / 8; nc++) {
            acc[nc][0] *= c0;
            acc[nc][1] *= c0;
            acc[nc][2] *= c1;
            acc[nc][3] *= c1;
        }
        if (PACKED) {
            if (more) cp_async_wait<1>(); /* V(k0) in; K(k0 + 64) may still be on its way */
            else cp_async_wait<0>();
            am_group_sync<KG>(gi);
        }
        /* O += P·V: P from the score fragments, V^T rows from shared memory. */
#pragma unroll
        for (int kc = 0; kc < AM_BK / 16; kc++) {
            unsigned pa[4];
            pa[0] = tg_pack_bf16(s[2 * kc][0], s[2 * kc][1]);
            pa[1] = tg_pack_bf16(s[2 * kc][2], s[2 * kc][3]);
            pa[2] = tg_pack_bf16(s[2 * kc + 1][0], s[2 * kc + 1][1]);
            pa[3] = tg_pack_bf16(s[2 * kc + 1][2], s[2 * kc + 1][3]);
            /* the V fragments of two 8-wide chunks of Dv per ldmatrix */
#pragma unroll
            for (int nc = 0; nc < TG_ADV / 8; nc += 2) {
                unsigned f[4];
                ldmatrix_x4_s(f, vt_lane + 2 * (nc * 8 * AM_VS + kc * 16));
                tg_mma_bf16(acc[nc], pa, f[0], f[1]);
                tg_mma_bf16(acc[nc + 1], pa, f[2], f[3]);
            }
        }
        if (PACKED && more) {
            am_group_sync<KG>(gi); /* every warp of the group is done with V(k0) */
            stage_v_async(Vt, vg, Tkp, k0 + AM_BK, tid);
        }
    }

    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (KG > 1) {
        /* Groups 1.. leave their maxima, sums and outputs in shared memory
         * (every group is past its loop: the tiles are free), a float4 a
         * thread and column pair so a warp's stores and loads are
         * contiguous; group 0 rescales both sides to the larger maximum
         * and adds. A side with no unmasked key has max -inf and sums 0;
         * a side that met a NaN score has max NaN, which the other takes. */
        float4 *X = (float4 *)smem16;
        constexpr int NC = TG_ADV / 8;
        __syncthreads();
        for (int gs = 1; gs < KG; gs++) {
            if (gi == gs) {
#pragma unroll
                for (int nc = 0; nc < NC; nc++) X[nc * 128 + tid] = make_float4(acc[nc][0], acc[nc][1], acc[nc][2], acc[nc][3]);
                X[NC * 128 + tid] = make_float4(m0, m1, l0, l1);
            }
            __syncthreads();
            if (gi == 0) {
                const float4 ml = X[NC * 128 + tid];
                const float M0 = am_max(m0, ml.x), M1 = am_max(m1, ml.y);
                const float a0 = m0 == -TG_INF ? 0.0f : exp2f(m0 - M0), b0 = ml.x == -TG_INF ? 0.0f : exp2f(ml.x - M0);
                const float a1 = m1 == -TG_INF ? 0.0f : exp2f(m1 - M1), b1 = ml.y == -TG_INF ? 0.0f : exp2f(ml.y - M1);
                l0 = l0 * a0 + ml.z * b0;
                l1 = l1 * a1 + ml.w * b1;
                m0 = M0;
                m1 = M1;
#pragma unroll
                for (int nc = 0; nc < NC; nc++) {
                    const float4 x = X[nc * 128 + tid];
                    acc[nc][0] = acc[nc][0] * a0 + x.x * b0;
                    acc[nc][1] = acc[nc][1] * a0 + x.y * b0;
                    acc[nc][2] = acc[nc][2] * a1 + x.z * b1;
                    acc[nc][3] = acc[nc][3] * a1 + x.w * b1;
                }
            }
            if (gs + 1 < KG) __syncthreads(); /* X read before the next group writes it */
        }
        if (gi != 0) return;
    }
    float i0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, i1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    /* a row's column pair as one 4-byte BF16 pair or 8-byte float2 where
     * the columns are contiguous and the rows aligned (the encoder's
     * output, BF16 for its projection), else element by element */
    char *o0 = o.p + tg_off(o, 0, h, r0 < Tq ? r0 : 0, b), *o1 = o.p + tg_off(o, 0, h, r1 < Tq ? r1 : 0, b);
    const i64 on = o.nb[0];
    const unsigned long long oa = (unsigned long long)o0 | (unsigned long long)o1;
    if (o.type == TG_KT_BF16 && on == 2 && (oa & 3) == 0) {
#pragma unroll
        for (int nc = 0; nc < TG_ADV / 8; nc++) {
            const int d = nc * 8 + t * 2;
            if (r0 < Tq) *(unsigned *)(o0 + 2 * d) = tg_pack_bf16(acc[nc][0] * i0, acc[nc][1] * i0);
            if (r1 < Tq) *(unsigned *)(o1 + 2 * d) = tg_pack_bf16(acc[nc][2] * i1, acc[nc][3] * i1);
        }
    } else if (o.type == TG_KT_F32 && on == 4 && (oa & 7) == 0) {
#pragma unroll
        for (int nc = 0; nc < TG_ADV / 8; nc++) {
            const int d = nc * 8 + t * 2;
            if (r0 < Tq) *(float2 *)(o0 + 4 * d) = make_float2(acc[nc][0] * i0, acc[nc][1] * i0);
            if (r1 < Tq) *(float2 *)(o1 + 4 * d) = make_float2(acc[nc][2] * i1, acc[nc][3] * i1);
        }
    } else {
#pragma unroll
        for (int nc = 0; nc < TG_ADV / 8; nc++) {
            const int d = nc * 8 + t * 2;
            if (r0 < Tq) {
                tg_st(o0 + d * on, o.type, acc[nc][0] * i0);
                tg_st(o0 + (d + 1) * on, o.type, acc[nc][1] * i0);
            }
            if (r1 < Tq) {
                tg_st(o1 + d * on, o.type, acc[nc][2] * i1);
                tg_st(o1 + (d + 1) * on, o.type, acc[nc][3] * i1);
            }
        }
    }
#endif
}

/* K and V converted while staged: for one block of queries per head. */
extern "C" __global__ void __launch_bounds__(AM_GT) attention_mma(const tg_args_attention_mma args) {
    TG_PDL();
    attention_body<false, 1>(args.o, args.q, args.k, args.v, NULL, NULL, 0, args.mask, args.has_mask, args.scale, 0,
                             NULL);
}

/* K and V packed by attn_pack_k / attn_pack_vt (k and v give the shapes). */
extern "C" __global__ void __launch_bounds__(AM_GT) attention_mma_packed(const tg_args_attention_mma_packed args) {
    TG_PDL();
    attention_body<true, 1>(args.o, args.q, args.k, args.v, args.kp, args.vtp, args.tkp, args.mask, args.has_mask,
                            args.scale, args.opt, args.mask_end);
}

/* The same with the block's Q rows staged by cp.async ahead of the first
 * key tile (CT_CUDA_ATTN_QSTAGE; cuda_attention.c: q_stageable). */
extern "C" __global__ void __launch_bounds__(AM_GT)
    attention_mma_packed_qs(const tg_args_attention_mma_packed_qs args) {
    TG_PDL();
    attention_body<true, 1, true>(args.o, args.q, args.k, args.v, args.kp, args.vtp, args.tkp, args.mask,
                                  args.has_mask, args.scale, args.opt, args.mask_end);
}

/* The same with the key tiles shared by TG_AM_GROUPS groups of 4 warps. */
extern "C" __global__ void __launch_bounds__(AM_GT * TG_AM_GROUPS)
    attention_mma_packed2(const tg_args_attention_mma_packed2 args) {
    TG_PDL();
    attention_body<true, TG_AM_GROUPS>(args.o, args.q, args.k, args.v, args.kp, args.vtp, args.tkp, args.mask,
                                       args.has_mask, args.scale, args.opt, args.mask_end);
}
