/*
 * kargs.cuh: what the host and the kernels must agree on, in one place: the
 * element type codes, the elementwise op codes, the emit fusion's store
 * kinds, the tensor descriptor, and one argument struct per kernel, which
 * the kernel takes as its single by-value parameter and the host fills and
 * launches with `void *params[] = {&args}`.
 *
 * Included as a plain C11 header by the host (cuda_ops.c and the others),
 * and by the kernels under NVRTC (no system headers) and nvcc (the
 * precompiled fatbins). So it holds only what C and CUDA C++ lay out
 * alike: 32- and 64-bit integers, float, device pointers (tg_dp_*: typed
 * pointers in the kernels, uint64_t on the host, 8 bytes either way), structs of
 * those with every padding word spelled out. Each struct's size is asserted
 * here, so the host and every kernel compile check it against the same
 * number; TG_KERNELS pairs each kernel with its struct, and the host
 * launches through that pairing (cuda_internal.h: LAUNCH) while
 * tests/cuda/test_compile.c checks every compiled kernel's one parameter
 * against it.
 *
 * Not here: the specialisations that are precompiled (variants.def), device
 * helpers (common.cuh), anything only one side uses.
 */
#ifndef TG_KARGS_CUH
#define TG_KARGS_CUH

/* Device pointers: typed in the kernels, uint64_t on the host. Types, not
 * a macro, so `tg_dp_cfloat4 a, b;` makes two pointers on both sides. */
#if defined(__CUDACC__)
typedef int tg_i32;
typedef long long tg_i64;
typedef void *tg_dp_void;
typedef char *tg_dp_char;
typedef const char *tg_dp_cchar;
typedef const float *tg_dp_cfloat;
typedef const float4 *tg_dp_cfloat4;
typedef float4 *tg_dp_float4;
typedef float *tg_dp_float;
typedef ushort4 *tg_dp_ushort4;
typedef const unsigned short *tg_dp_cu16;
typedef unsigned *tg_dp_uint;
#else
#include <stdint.h>
typedef int32_t tg_i32;
typedef int64_t tg_i64;
typedef uint64_t tg_dp_void, tg_dp_char, tg_dp_cchar, tg_dp_cfloat, tg_dp_cfloat4, tg_dp_float4, tg_dp_float, tg_dp_ushort4,
    tg_dp_cu16, tg_dp_uint;
#endif

#ifdef __cplusplus
#define TG_KARGS_SIZE(type, n) static_assert(sizeof(type) == (n), #type ": host and kernels disagree")
#else
#define TG_KARGS_SIZE(type, n) _Static_assert(sizeof(type) == (n), #type ": host and kernels disagree")
#endif

/* Element types, the runtime's tg_type values (checked in cuda_ops.c). */
#define TG_KT_F32 0
#define TG_KT_F16 1
#define TG_KT_BF16 2
#define TG_KT_I32 3
#define TG_KT_I64 4

/* Elementwise ops: elementwise.cu's TG_OP specialisation. */
#define TG_EW_ADD 0
#define TG_EW_SUB 1
#define TG_EW_MUL 2
#define TG_EW_DIV 3
#define TG_EW_SCALE 4
#define TG_EW_RELU 5
#define TG_EW_SILU 6
#define TG_EW_SIGMOID 7
#define TG_EW_LOG 8
#define TG_EW_SQRT 9
#define TG_EW_COUNT 10

/* The emit fusion (TG_OUT16, a specialisation of the vectorised
 * elementwise and layer norm kernels): what they store for their
 * matrix-product readers. */
#define TG_EMIT_F32 0
#define TG_EMIT_BF16 1
#define TG_EMIT_F16 2

/* Fusions, as counted per context (CT_CUDA_DEBUG). */
enum {
    TG_FUSED_MM_BIAS = 0,
    TG_FUSED_MM_BIAS_RELU,
    TG_FUSED_NORM_AFFINE,
    TG_FUSED_SOFTMAX,
    TG_FUSED_ATTENTION,
    TG_FUSED_GLU,
    TG_FUSED_EMIT,
    TG_FUSED_MM_BIAS_RESIDUAL,
    TG_FUSED_MM_SCALE,   /* products with a scale as alpha (with a bias: also counted above) */
    TG_FUSED_NORM_MATVEC, /* a layer norm inside its product's matvec launch */
    TG_FUSED_CONV_GLU,    /* glu, depthwise conv, bias, silu as one kernel */
    TG_FUSED_BIAS_MASK,   /* a row bias add, row mask mul, relu as one pass */
    TG_FUSED_EMBED_NORM,  /* two embedding lookups, their sum and its layer norm */
    TG_FUSED_KV_ROWS,     /* a set_rows of a matvec product's rows (the K/V cache write) in its launch */
    TG_FUSED_PICK,        /* a step's tail: argmax, logit sums, the feed, both history writes */
    TG_FUSED_SUB_FRONT,   /* the subsampling's conv0, bias, mask, relu, depthwise conv, bias, mask */
    TG_FUSED_NORM_PAIR,   /* a layer norm of a layer norm's result, both in one pass */
    TG_FUSED_KINDS
};

/* A tensor on the device: data pointer, shape, byte strides, type. */
typedef struct tg_t {
    tg_dp_char p;
    tg_i64 ne[4];
    tg_i64 nb[4];
    tg_i32 type, pad_;
} tg_t;
TG_KARGS_SIZE(tg_t, 80);

/* ----------------------------------------------------- elementwise.cu */

/* ew_binary: n elements; ew_binary_rows: n rows of d. */
typedef struct tg_ew_binary_args { tg_t d, a, b; tg_i64 n; } tg_ew_binary_args;
TG_KARGS_SIZE(tg_ew_binary_args, 248);

/* Contiguous F32: a and b repeat with periods na4, nb4 (float4 groups). */
typedef struct tg_ew_binary4_args {
    tg_dp_void d;
    tg_dp_cfloat4 a, b;
    tg_i64 n4, na4, nb4;
} tg_ew_binary4_args;
TG_KARGS_SIZE(tg_ew_binary4_args, 48);

typedef struct tg_ew_unary_args { tg_t d, a; float s; tg_i32 pad_; tg_i64 n; } tg_ew_unary_args;
TG_KARGS_SIZE(tg_ew_unary_args, 176);

typedef struct tg_ew_unary4_args {
    tg_dp_void d;
    tg_dp_cfloat4 a;
    float s;
    tg_i32 pad_;
    tg_i64 n4;
} tg_ew_unary4_args;
TG_KARGS_SIZE(tg_ew_unary4_args, 32);

/* ew_unary_b4: the same op over a source its producer stored BF16 (the
 * emit fusion: a product's result read only by unary ops), 4 elements a
 * thread (8 bytes in); with row > 0 (a multiple of 4), bias[e % row] (F32)
 * added to element e first: the product's bias, which it left out. */
typedef struct tg_ew_unary_b4_args {
    tg_dp_void d;
    tg_dp_cu16 a;
    tg_dp_cfloat bias;
    float s;
    tg_i32 pad_;
    tg_i64 n4, row;
} tg_ew_unary_b4_args;
TG_KARGS_SIZE(tg_ew_unary_b4_args, 48);

/* ew_bias_mask_c4: d = relu?((x + bias) * mask?) over contiguous F32 rows
 * of 4 q4 floats (n4 float4 groups); bias and mask F32 with ne[0] == 1, a
 * value per row (dims 1-3 of ne1 x ne2 x .., broadcast where their ne is 1). */
typedef struct tg_ew_bias_mask_args {
    tg_t bias, mask;
    tg_dp_void d;
    tg_dp_cfloat4 x;
    tg_i64 n4, ne1, ne2;
    tg_i32 q4, has_mask, relu, pad_;
} tg_ew_bias_mask_args;
TG_KARGS_SIZE(tg_ew_bias_mask_args, 216);

/* ------------------------------------------------------------ norm.cu */

/* w, b: the affine, 0 when absent. */
typedef struct tg_norm_args {
    tg_t d, a;
    tg_dp_cfloat w, b;
    float eps;
    tg_i32 pad_;
} tg_norm_args;
TG_KARGS_SIZE(tg_norm_args, 184);

/* embed_norm: row r of d (contiguous F32) = the layer norm (eps, affine
 * w, b: 0 when absent) of ta's row ia[r] plus tb's row ib[r] (ia, ib
 * contiguous I32, one id per row of d; a table row outside the table
 * counts as zeros, as get_rows reads it). */
typedef struct tg_embed_norm_args {
    tg_t d, ta, tb, ia, ib;
    tg_dp_cfloat w, b;
    float eps;
    tg_i32 pad_;
} tg_embed_norm_args;
TG_KARGS_SIZE(tg_embed_norm_args, 424);

/* Contiguous F32 rows of 4*n4 floats; rows: layer_norm_w4 only.
 * prefetch (layer_norm_w4): w and b are weights (no kernel writes them),
 * so each block asks their lines into L2 before its wait. */
typedef struct tg_norm4_args {
    tg_dp_void d;
    tg_dp_cfloat4 a, w, b;
    tg_i64 rows;
    tg_i32 n4;
    float eps;
    tg_i32 prefetch, pad_;
} tg_norm4_args;
TG_KARGS_SIZE(tg_norm4_args, 56);

/* The most float4s a row of layer_norm_w4 and layer_norm2_w4 holds (a
 * warp a row, 16 a lane in registers). */
#define TG_NORM_WARP_N4 512

/* layer_norm2_w4: two layer norms in a row, d1 = LN(a; w1, b1) stored
 * F32 and d = LN(d1; w2, b2) stored as TG_OUT16 says; contiguous rows of
 * 4*n4 floats (an encoder layer's output norm and the next layer's first
 * norm). prefetch: the four parameters are weights, asked into L2 before
 * the wait. */
typedef struct tg_norm2_args {
    tg_dp_void d;
    tg_dp_float4 d1;
    tg_dp_cfloat4 a, w1, b1, w2, b2;
    tg_i64 rows;
    tg_i32 n4;
    float eps1, eps2;
    tg_i32 prefetch;
} tg_norm2_args;
TG_KARGS_SIZE(tg_norm2_args, 80);

/* --------------------------------------------------------- softmax.cu */

/* rows: soft_max_w4 only. */
typedef struct tg_softmax_args {
    tg_t d, a, mask;
    tg_i64 rows;
    tg_i32 has_mask;
    float scale;
} tg_softmax_args;
TG_KARGS_SIZE(tg_softmax_args, 256);

/* ------------------------------------- attention.cu, attention_mma.cu */

typedef struct tg_attention_args {
    tg_t o, q, k, v, mask;
    tg_i32 has_mask;
    float scale;
} tg_attention_args;
TG_KARGS_SIZE(tg_attention_args, 408);

/* K and V packed first (kp, vtp: bf16, Tkp keys); k and v give the shapes.
 * opt: TG_AM_MASK16, the mask tile staged in 16-byte pieces (its keys
 * contiguous), none of which reaches past mask_end, the address one past
 * the mask's last element. attention_mma_packed2 is the same kernel with
 * two groups of 4 warps a block, each over half the key tiles, merged at
 * the end (TG_AM_GROUPS). */
#define TG_AM_MASK16 1
#define TG_AM_GROUPS 2
/* attention_mma_packed_qs: the same kernel with the block's 64 rows of Q
 * (F32, contiguous, rows 16-byte aligned) staged into shared memory by
 * cp.async ahead of the first key tile (one key group), the rows at
 * TG_AM_QSTAGE_OFF bytes past the group's tiles, TG_AD + 8 floats each. */
#define TG_AM_QSTAGE_OFF (64 * 8)
typedef struct tg_attention_packed_args {
    tg_t o, q, k, v;
    tg_dp_cu16 kp, vtp;
    tg_t mask;
    tg_i32 tkp, has_mask;
    float scale;
    tg_i32 opt;
    tg_dp_cchar mask_end;
} tg_attention_packed_args;
TG_KARGS_SIZE(tg_attention_packed_args, 440);

/* attn_pack_k (t = K) and attn_pack_vt (t = V) into dst. */
typedef struct tg_attn_pack_args {
    tg_dp_void dst;
    tg_t t;
    tg_i32 tkp, pad_;
} tg_attn_pack_args;
TG_KARGS_SIZE(tg_attn_pack_args, 96);

/* ---------------------------------------------------- attention_split.cu */

/* Chunk partials: part[(s * rows + r) * (Dv + 2) + ...], floats. */
typedef struct tg_attn_split_args {
    tg_dp_void part;
    tg_t q, k, v, mask;
    tg_i32 has_mask;
    float scale;
} tg_attn_split_args;
TG_KARGS_SIZE(tg_attn_split_args, 336);

typedef struct tg_attn_split_combine_args {
    tg_t o;
    tg_dp_cfloat part;
    tg_i32 n_split, tq, h, pad_;
} tg_attn_split_combine_args;
TG_KARGS_SIZE(tg_attn_split_combine_args, 104);

/* attn_decode(_d256): kpw keys per warp, TG_ATD_WARPS warps a block.
 * direct: the grid has one chunk per row, so the block writes the
 * normalised output into o itself and no attn_split_combine follows.
 * attn_decode_wide(_bf16): one block of TG_ATD_WIDE warps a row, always
 * direct. prefetch: each block asks its keys' K and V rows into L2 before
 * its wait for the kernel before (the host sets it where the call's K and
 * V fit well inside L2). */
/* CT_CUDA_STAMPS: the records the buffer holds (common.cuh writes them,
 * cuda_profile.c reads them; 4 words each after a count). */
#define TG_STAMPS_CAP (1 << 18)

/* attn_split: the most queries a call takes (its shared arrays and its
 * per-thread sums are sized by it; the host's limit never exceeds it) */
#define TG_ATS_TQ 16
#define TG_ATD_WARPS 4
#define TG_ATD_WIDE 16
typedef struct tg_attn_decode_args {
    tg_dp_void part;
    tg_t q, k, v, mask;
    tg_i32 has_mask;
    float scale;
    tg_i32 kpw, direct, prefetch;
    tg_i32 xr; /* D = 128: a round's dot products summed by a transposed reduction (atd_xreduce) */
    tg_i32 skip; /* with xr: a round whose keys the mask hides, seen a round ahead, loads nothing */
    tg_i32 pad_;
    tg_t o;
} tg_attn_decode_args;
TG_KARGS_SIZE(tg_attn_decode_args, 440);

/* attn_decode_clq_bf16: attn_decode_cl_bf16 (a row's chunks as one
 * cluster; a's q unread) with the product that makes q inside it, the
 * decoder step's cross q: q = W LN(x) + bias for the row's head, each
 * block of the cluster computing its share of the head's 128 rows and the
 * cluster sharing them through distributed shared memory. x: the norm's
 * input, F32 columns ldx floats apart (column = batch row); w: BF16
 * weights, the head's rows lda bytes apart; bias, ln_w, ln_b: F32 or 0;
 * k: the columns' length (a multiple of 8, at most 8 x the block's
 * threads). */
typedef struct tg_attn_decode_q_args {
    tg_attn_decode_args a;
    tg_dp_cfloat x;
    tg_dp_cchar w;
    tg_dp_cfloat bias, ln_w, ln_b;
    tg_i64 ldx, lda;
    tg_i32 k;
    float eps;
} tg_attn_decode_q_args;
TG_KARGS_SIZE(tg_attn_decode_q_args, 504);

/* ---------------------------------------------------------- matvec.cu */

/* Columns mul_mat_vec takes at most; for mul_mat_vec_mma (same
 * arguments) the columns and the weight rows a block, which set the
 * host's grid (a block for each tile of TG_MVM_MAXM columns of each
 * TG_MVM_ROWS rows) and the block's shared memory for its warps' sums;
 * mul_mat_vec_mma_wide's block takes TG_MVM_WIDE columns (a multiple of
 * 16) the same way. */
#define TG_MV_MAXM 8
#define TG_MVM_MAXM 16
#define TG_MVM_WIDE 64
#define TG_MVM_ROWS 16
#define TG_MVM_ROWS8 8 /* mul_mat_vec_mma_r8's rows a block */
/* mul_mat_vec_mma_st(16): a block's staged weight rows are 2 k + this
 * many bytes apart in shared memory, so that the two rows a quarter warp
 * reads (64 bytes of each) fall on different banks */
#define TG_MVS_PAD 64
/* mul_mat_vec_mma_cl: the blocks of a cluster (K split over them, K a
 * multiple of 64 times it) and the weight rows a cluster (16 a group of
 * two warps, each over half the block's slice) */
#define TG_MVC_S 8
#define TG_MVC_ROWS 64

/* out[n, m] = relu?(alpha sum_k w[k, n] x[k, m] + bias[n]) + res[n, m]:
 * byte strides lda (rows of w), ldx, ldo and ldr (columns of x, out and
 * res); bias and res 0 when absent (res may be out itself, element for
 * element). With ln, x's columns (F32) are layer-normed first (eps,
 * optional affine ln_w, ln_b) into dynamic shared memory (k * m floats for
 * mul_mat_vec, min(m, its columns a block) rows of k + 8 BF16 a block for
 * mul_mat_vec_mma(_wide), whose blocks each norm their tile): the layer norm
 * before a decoder step's product, one launch fewer.
 * w_early: w is a weight (no kernel writes it), so its first loads may go
 * out before the wait for the previous kernel. opt (mul_mat_vec_mma's):
 * TG_MV_PREFETCH, bias and the norm's ln_w and ln_b are weights too, so
 * they are asked into L2 before that wait (their loads come after it, on
 * the launch's critical path); TG_MV_NORM1, the norm reads each column
 * once, into registers (k % 128 == 0, k <= 1024), where it made three
 * passes over L2 (the host asks for it from two columns on: on an H100 the
 * step at batch 1 was 1.7-2.5% slower with it, at batch 8 1.6-1.8% faster;
 * the wide kernel always takes it); TG_MV_EPI_EARLY, the bias is a weight
 * and res was written by a launch before the previous one (or by none of
 * this graph's), so both are loaded before the wait, and the grid has a
 * block for every block of rows (no rows loop); TG_MV_NORM_BLOCK, one
 * column (k % 128 == 0, k / 4 no more than the block's threads) is normed
 * by all the block's threads, a float4 each, instead of by one warp. */
#define TG_MV_PREFETCH 1
#define TG_MV_NORM1 2
#define TG_MV_EPI_EARLY 4
#define TG_MV_NORM_BLOCK 8
typedef struct tg_mul_mat_vec_args {
    tg_dp_cchar w, x;
    tg_dp_char out;
    tg_dp_cfloat bias;
    tg_dp_cchar res;
    tg_dp_cfloat ln_w, ln_b;
    tg_i64 n, k, lda, ldx, ldo, ldr;
    float alpha, ln_eps;
    tg_i32 m, x_bf16, relu, ln, w_early, opt;
    /* kv (0: none): output rows kv_n0 .. kv_n0 + kv_heads kv_hd - 1 (head
     * j, element e) of column m are also stored, as type kv_type, at
     * kv + e es + id kv_nb1 + j kv_nb2 + m kv_nb3 where id is the I32 at
     * kv_ids + j ids_nb1 + m ids_nb2, when 0 <= id < kv_t: the set_rows
     * that writes a decoder step's k and v into the cache, in the launch */
    tg_dp_char kv;
    tg_dp_cchar kv_ids;
    tg_i64 kv_nb1, kv_nb2, kv_nb3, ids_nb1, ids_nb2, kv_n0;
    tg_i32 kv_hd, kv_heads, kv_t, kv_type;
    /* mul_mat_vec_mma_st(16) only: the byte offset in dynamic shared
     * memory of the block's weight rows (after the normed columns and the
     * warps' sums), rows of 2 k + TG_MVS_PAD bytes */
    tg_i32 ws_off, ws_pad_;
    /* pf_a, pf_b (bytes 0: none): what the launch after this one reads (a
     * decoder step's cross-attention K and V, which no launch of the graph
     * writes; with CT_CUDA_ATTN_PREFETCH_AHEAD=2 any attention's), asked into L2 by the grid's threads, a 128-byte line each in
     * turn, before the wait: a hint, so that those bytes come from memory
     * while this product runs, not while the attention waits for them */
    tg_dp_cchar pf_a, pf_b;
    tg_i64 pf_a_bytes, pf_b_bytes;
} tg_mul_mat_vec_args;
TG_KARGS_SIZE(tg_mul_mat_vec_args, 256);

/* ------------------------------------------------------ step_chain.cu */

/* step_chain: up to TG_CHAIN_MAX launches of a decoder step (its products
 * of 1-16 columns on mul_mat_vec_mma's body, its one-query attentions on
 * attn_decode_wide_bf16's) run in order by one grid of blocks of 8 or 16 warps
 * (its variants), one an SM, a grid barrier between them (bar: two words, the
 * arrivals and a generation, zero at the start and again after every
 * launch). Each phase keeps its kernel's argument struct; pf[i] and
 * pf_bytes[i] are what it reads that no phase writes (weights, the
 * encoder's K/V) or a hint only, asked into L2 while the phase before it
 * runs (pf_ahead); tail_pf: the same for the launch after the chain. */
#define TG_CHAIN_MAX 8
enum { TG_CHAIN_MVM = 1, TG_CHAIN_ATD_BF16 = 2 };
typedef struct tg_chain_phase {
    tg_i32 kind, pad_;
    tg_dp_cchar pf[2];
    tg_i64 pf_bytes[2];
    union {
        tg_mul_mat_vec_args mv;
        tg_attn_decode_args ad;
    } u;
} tg_chain_phase;
TG_KARGS_SIZE(tg_chain_phase, 480);
typedef struct tg_step_chain_args {
    tg_dp_uint bar;
    tg_i32 n, pf_ahead;
    tg_dp_cchar tail_pf;
    tg_i64 tail_pf_bytes;
    tg_chain_phase ph[TG_CHAIN_MAX];
} tg_step_chain_args;
TG_KARGS_SIZE(tg_step_chain_args, 32 + 480 * TG_CHAIN_MAX);
/* step_chain_long: the same for up to TG_CHAIN_LONG phases (a whole step
 * at batch 1-16: 8 layers of 8, then the logits), 31.7 KB of parameters:
 * past the 4 KB of old, within the 32 KB that sm_70 and later take since
 * CUDA 12.1. Apart, so that the chains of a layer copy 3.9 KB a launch. */
#define TG_CHAIN_LONG 66
typedef struct tg_step_chain_long_args {
    tg_dp_uint bar;
    tg_i32 n, pf_ahead;
    tg_dp_cchar tail_pf;
    tg_i64 tail_pf_bytes;
    tg_chain_phase ph[TG_CHAIN_LONG];
} tg_step_chain_long_args;
TG_KARGS_SIZE(tg_step_chain_long_args, 32 + 480 * TG_CHAIN_LONG);

/* ------------------------------------------------------------ conv.cu */

/* Output channels per block of conv_2d_c1_3x3: their 9 weights sit in
 * shared memory. */
#define TG_CONV_C1_TILE 32

/* conv_2d with one input channel and a 3x3 kernel: stride and padding
 * along W (dim 0) and H (dim 1). */
typedef struct tg_conv_c1_args {
    tg_t o, k, x;
    tg_i32 s0, s1, p0, p1;
} tg_conv_c1_args;
TG_KARGS_SIZE(tg_conv_c1_args, 256);

typedef struct tg_conv2d_args {
    tg_t o, kr, in;
    tg_i32 s0, s1, p0, p1;
    tg_i64 n;
} tg_conv2d_args;
TG_KARGS_SIZE(tg_conv2d_args, 264);

typedef struct tg_conv1d_args { tg_t o, kr, in; tg_i32 s, p; tg_i64 n; } tg_conv1d_args;
TG_KARGS_SIZE(tg_conv1d_args, 256);

/* Output steps per thread of conv_1d_dw_c4. */
#define TG_DW1_TT 8

/* conv_1d_dw_c4: stride 1, all F32 and contiguous; in [4 c4, t, batch],
 * o [4 c4, ot, batch], kernel [k, 4 c4]; padding p. */
typedef struct tg_conv1d_c4_args {
    tg_dp_float4 o;
    tg_dp_cfloat4 in;
    tg_dp_cfloat kr;
    tg_i32 c4, t, ot, k, p, pad_;
} tg_conv1d_c4_args;
TG_KARGS_SIZE(tg_conv1d_c4_args, 48);

/* Taps at most of conv_glu_dw_silu_c4 (the model's conv kernel is 9). */
#define TG_DW1_KMAX 9

/* conv_glu_dw_silu_c4: in [8 c4, t, batch] (GLU's input: F32, or BF16
 * where in16, as the product before it stored it for this kernel, then
 * plus pre [8 c4] where that product left its bias to it), o [4 c4, ot,
 * batch] (F32 or 16-bit, the TG_OUT16 variant), kernel [k, 4 c4], bias
 * [4 c4]; stride 1, padding p; fast: the sigmoids by the hardware's
 * approximate exp and divide (__expf, __fdividef). */
typedef struct tg_conv_glu_dw_args {
    tg_dp_char o;
    tg_dp_cfloat4 in;
    tg_dp_cfloat kr, bias, pre;
    tg_i32 c4, t, ot, k, p, in16, fast, pad_;
} tg_conv_glu_dw_args;
TG_KARGS_SIZE(tg_conv_glu_dw_args, 72);

/* conv_2d_dw_3x3: all F32 and contiguous; in [w, h, C, N] planes, o [ow, oh,
 * C, N], kernel [3, 3, 1, C]. */
typedef struct tg_conv2d_dw3_args {
    tg_dp_float o;
    tg_dp_cfloat in, kr;
    tg_i32 w, h, ow, oh, s0, s1, p0, p1;
} tg_conv2d_dw3_args;
TG_KARGS_SIZE(tg_conv2d_dw3_args, 56);

/* Output channels per block of sub_conv_dw: their 20 parameters (conv0's
 * 9 weights and bias, the depthwise conv's 9 and bias) sit in shared
 * memory. */
#define TG_SUB_TILE 32

/* sub_conv_dw: the subsampling's conv0 (one input channel, 3x3, stride 2,
 * padding 1) + bias + frame mask + relu, then the depthwise 3x3 (stride 2,
 * padding 1) + bias + frame mask. x [w0, h0, 1, N], o [ow, oh, c, N], both
 * contiguous F32; conv0's result (never stored) is [w1, h1, c, N]; k0 and
 * k1 [3, 3, 1, c], b0 and b1 [c], contiguous; m1 and m2 a value per row
 * (ne[0] == 1; broadcast where ne is 1), read only where has_m1 / has_m2. */
typedef struct tg_sub_front_args {
    tg_t m1, m2;
    tg_dp_float o;
    tg_dp_cfloat x, k0, b0, k1, b1;
    tg_i32 w0, h0, w1, h1, ow, oh, c, has_m1, has_m2, pad_;
} tg_sub_front_args;
TG_KARGS_SIZE(tg_sub_front_args, 248);

/* ------------------------------------------------- copy.cu, reduce.cu */

/* n elements of d (cpy) or of o (glu) from a. */
typedef struct tg_flat2_args { tg_t d, a; tg_i64 n; } tg_flat2_args;
TG_KARGS_SIZE(tg_flat2_args, 168);

/* Both contiguous: types and element sizes. */
typedef struct tg_cvt_args {
    tg_dp_char d;
    tg_dp_cchar s;
    tg_i32 dt, dsz, st, ssz;
    tg_i64 n;
} tg_cvt_args;
TG_KARGS_SIZE(tg_cvt_args, 40);

typedef struct tg_cvt16_args {
    tg_dp_ushort4 d;
    tg_dp_cfloat4 s;
    tg_i64 n4;
    tg_i32 to_bf16, pad_;
} tg_cvt16_args;
TG_KARGS_SIZE(tg_cvt16_args, 32);

typedef struct tg_concat_args { tg_t o, a, b; tg_i32 dim, pad_; tg_i64 n; } tg_concat_args;
TG_KARGS_SIZE(tg_concat_args, 256);

typedef struct tg_pad_args { tg_t o, a; tg_i32 lo[4]; tg_i64 n; } tg_pad_args;
TG_KARGS_SIZE(tg_pad_args, 184);

/* argmax and sum_rows (div: 1 for the sum, ne0 for the mean). */
typedef struct tg_reduce_args { tg_t o, a; float div; tg_i32 pad_; } tg_reduce_args;
TG_KARGS_SIZE(tg_reduce_args, 168);

/* argmax_sum (a decoder step's tail, cuda_fusion.c: pick_fuse_len): for row r
 * of a, its argmax (argmax's rule) as I32 into ids[r] and feed[r], its sum
 * (sum_rows' order) into sums[r]; and where 0 <= *at < hist_rows (at: I32,
 * or I64 when at_i64), the id as F32 at hist_ids + at hist_ids_ld + 4 r and
 * the sum at hist_sums + at hist_sums_ld + 4 r (set_rows' rule: an id
 * outside the history writes nothing). */
typedef struct tg_pick_args {
    tg_t a;
    tg_dp_char ids, sums, feed, hist_ids, hist_sums;
    tg_dp_cchar at;
    tg_i64 hist_ids_ld, hist_sums_ld, hist_rows;
    tg_i32 at_i64, pad_;
} tg_pick_args;
TG_KARGS_SIZE(tg_pick_args, 160);

/* ------------------------------------------------------------ rows.cu */

typedef struct tg_rows_args { tg_t d, a, ids; tg_i64 n; } tg_rows_args;
TG_KARGS_SIZE(tg_rows_args, 248);

/* ----------------------------------------------------------- probe.cu */

/* probe_bf16_cvt (x), probe_mma_bf16, fault, chain_step: one pointer. */
typedef struct tg_probe_args { tg_dp_void out; float x; tg_i32 pad_; } tg_probe_args;
TG_KARGS_SIZE(tg_probe_args, 16);

typedef struct tg_spin_args { tg_i64 cycles; } tg_spin_args;
TG_KARGS_SIZE(tg_spin_args, 8);

/* Every kernel with its file and its argument struct: X(file stem, kernel,
 * struct). Each kernel's one parameter has type tg_args_<kernel>, made
 * below. probe.cu's nop takes no parameter and is not listed. */
#define TG_KERNELS(X)                                        \
    X(elementwise, ew_binary, tg_ew_binary_args)             \
    X(elementwise, ew_binary_c4, tg_ew_binary4_args)         \
    X(elementwise, ew_binary_rows, tg_ew_binary_args)        \
    X(elementwise, ew_unary, tg_ew_unary_args)               \
    X(elementwise, ew_unary_c4, tg_ew_unary4_args)           \
    X(elementwise, ew_unary_b4, tg_ew_unary_b4_args)         \
    X(elementwise, ew_bias_mask_c4, tg_ew_bias_mask_args)    \
    X(norm, layer_norm, tg_norm_args)                        \
    X(norm, layer_norm_c4, tg_norm4_args)                    \
    X(norm, layer_norm_w4, tg_norm4_args)                    \
    X(norm, layer_norm2_w4, tg_norm2_args)                   \
    X(norm, embed_norm, tg_embed_norm_args)                  \
    X(softmax, soft_max, tg_softmax_args)                    \
    X(softmax, soft_max_w4, tg_softmax_args)                 \
    X(attention, attention, tg_attention_args)               \
    X(attention_mma, attention_mma, tg_attention_args)       \
    X(attention_mma, attention_mma_packed, tg_attention_packed_args) \
    X(attention_mma, attention_mma_packed2, tg_attention_packed_args) \
    X(attention_mma, attention_mma_packed_qs, tg_attention_packed_args) \
    X(attention_mma, attn_pack_k, tg_attn_pack_args)         \
    X(attention_mma, attn_pack_vt, tg_attn_pack_args)        \
    X(conv, conv_2d, tg_conv2d_args)                         \
    X(conv, conv_2d_dw, tg_conv2d_args)                      \
    X(conv, conv_2d_c1_3x3, tg_conv_c1_args)                 \
    X(attention_split, attn_split, tg_attn_split_args)       \
    X(attention_split, attn_split_kt, tg_attn_split_args)    \
    X(attention_split, attn_split_combine, tg_attn_split_combine_args) \
    X(attention_split, attn_decode, tg_attn_decode_args)     \
    X(attention_split, attn_decode_d256, tg_attn_decode_args) \
    X(attention_split, attn_decode_bf16, tg_attn_decode_args) \
    X(attention_split, attn_decode_d256_bf16, tg_attn_decode_args) \
    X(attention_split, attn_decode_wide, tg_attn_decode_args) \
    X(attention_split, attn_decode_cl, tg_attn_decode_args)  \
    X(attention_split, attn_decode_cl_bf16, tg_attn_decode_args) \
    X(attention_split, attn_decode_clq_bf16, tg_attn_decode_q_args) \
    X(attention_split, attn_decode_wide_bf16, tg_attn_decode_args) \
    X(attention_split, attn_decode_wcl_bf16, tg_attn_decode_args) \
    X(matvec, mul_mat_vec, tg_mul_mat_vec_args)             \
    X(matvec, mul_mat_vec_mma, tg_mul_mat_vec_args)         \
    X(matvec, mul_mat_vec_mma_wide, tg_mul_mat_vec_args)    \
    X(matvec, mul_mat_vec_mma_r8, tg_mul_mat_vec_args)      \
    X(matvec, mul_mat_vec_mma_st, tg_mul_mat_vec_args)      \
    X(matvec, mul_mat_vec_mma_st16, tg_mul_mat_vec_args)    \
    X(matvec, mul_mat_vec_mma_ln, tg_mul_mat_vec_args)      \
    X(matvec, mul_mat_vec_mma_cl, tg_mul_mat_vec_args)      \
    X(matvec, mul_mat_vec_mma_cl2, tg_mul_mat_vec_args)     \
    X(step_chain, step_chain, tg_step_chain_args)           \
    X(step_chain, step_chain_long, tg_step_chain_long_args) \
    X(conv, conv_1d_dw, tg_conv1d_args)                      \
    X(conv, conv_1d_dw_c4, tg_conv1d_c4_args)                \
    X(conv, conv_glu_dw_silu_c4, tg_conv_glu_dw_args)        \
    X(conv, conv_2d_dw_3x3, tg_conv2d_dw3_args)              \
    X(conv, sub_conv_dw, tg_sub_front_args)                  \
    X(copy, cpy, tg_flat2_args)                              \
    X(copy, cpy_rows4, tg_flat2_args)                        \
    X(copy, cvt_c, tg_cvt_args)                              \
    X(copy, concat, tg_concat_args)                          \
    X(copy, pad, tg_pad_args)                                \
    X(copy, cvt_f32_16_c4, tg_cvt16_args)                    \
    X(copy, cvt_rows_16, tg_flat2_args)                      \
    X(reduce, argmax, tg_reduce_args)                        \
    X(reduce, sum_rows, tg_reduce_args)                      \
    X(reduce, argmax_sum, tg_pick_args)                      \
    X(reduce, glu, tg_flat2_args)                            \
    X(rows, get_rows, tg_rows_args)                          \
    X(rows, set_rows, tg_rows_args)                          \
    X(probe, probe_bf16_cvt, tg_probe_args)                  \
    X(probe, probe_mma_bf16, tg_probe_args)                  \
    X(probe, fault, tg_probe_args)                           \
    X(probe, spin, tg_spin_args)                             \
    X(probe, chain_step, tg_probe_args)

#define TG_KARGS_TYPEDEF(file, kernel, type) typedef type tg_args_##kernel;
TG_KERNELS(TG_KARGS_TYPEDEF)
#undef TG_KARGS_TYPEDEF

#endif /* TG_KARGS_CUH */
