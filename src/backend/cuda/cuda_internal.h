/*
 * cuda_internal.h: the CUDA backend's shared structures (device, context,
 * buffers, events) and the seams between its files.
 *
 * The split follows the seed: a device (one per GPU ordinal, shared by every
 * backend on it, reference-counted) owns the CUDA context, the properties,
 * the kernel library and its disk cache and the cuBLASLt handle; a context
 * (one per tg_backend) owns a stream, the scratch memory, the matmul plans,
 * the captured CUDA graphs and the sticky error. cuda_device.c implements
 * the device half, cuda_context.c the context half and the backend table,
 * cuda_buffer.c the buffers, cuda_profile.c the profile and dump,
 * cuda_ops.c one encode function per op (with cuda_attention.c the
 * attention's, cuda_matvec.c the few-column products'), cuda_matmul.c the
 * cuBLASLt products.
 *
 * Not here: the public entry point (tg_backend_cuda_new, in tg.h).
 */
#ifndef TG_CUDA_INTERNAL_H
#define TG_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend_impl.h"
#include "base.h"
#include "cuda_cache.h"
#include "cuda_loader.h"
#include "hazard.h"
#include "kernels/kargs.cuh"

/* ------------------------------------------------------------- device */

typedef struct tg_cuda_props {
    char name[256];
    int cc_major, cc_minor; /* compute capability            */
    int sm_count;
    size_t total_mem;
    int l2_bytes;
    int smem_per_block;       /* default limit                  */
    int smem_per_block_optin; /* with the opt-in attribute      */
    bool integrated;          /* shares memory with the host    */
    bool unified;             /* pageable memory access (HMM/ATS) */
    bool can_map_host;
    bool clusters;            /* thread block cluster launches (sm_90) */
    bool bf16;                /* bf16 conversion instruction passed its probe */
    int tc_level;             /* 0 none, 1 mma (sm_70+), 2 bf16 mma (sm_80+, probed), 3 wgmma (sm_90) */
    int driver_version;       /* e.g. 13000                     */
    int nvrtc_major, nvrtc_minor;
    size_t lt_version;        /* cuBLASLt, 0 when absent        */
} tg_cuda_props;

typedef struct cuda_kernel_entry {
    uint64_t hash;
    char *key;        /* "module|defines|name" */
    CUfunction fn;
    bool used;        /* asked for by a compute, not only readied ahead (cuda_prewarm.c) */
} cuda_kernel_entry;

typedef struct cuda_module_entry {
    uint64_t hash;
    char *key;        /* "module|defines" */
    CUmodule mod;
} cuda_module_entry;

typedef struct tg_cuda_device {
    int ordinal;
    int refs;
    const tg_cu_api *cu;
    const tg_nvrtc_api *nvrtc;     /* NULL: precompiled kernels only */
    const tg_cublaslt_api *lt;     /* NULL: matrix products go to the CPU */
    CUdevice dev;
    CUcontext ctx;                 /* the device's primary context */
    tg_cuda_props props;
    bool strict_fp;                /* CT_CUDA_STRICT_FP: no FMA contraction */
    char *stamps_path;             /* CT_CUDA_STAMPS: where the kernels' timer records go */
    CUdeviceptr stamps;            /* their buffer (cuda_profile.c) */

    pthread_mutex_t lock;          /* guards the two tables and compile stats */
    cuda_module_entry *mods;
    int n_mods, cap_mods;
    cuda_kernel_entry *kerns;
    int n_kerns, cap_kerns;
    tg_kcache *cache;              /* NULL: disabled */
    char *kernels_dir;             /* CT_CUDA_KERNELS_DIR, or NULL */
    int n_compiled, n_cache_hits, n_precompiled;
    double compile_ms;             /* NVRTC alone                          */
    uint64_t library_ns;           /* getting kernels ready: compile or cache read, module load,
                                      function (atomic: read without the lock, tg_cuda_library_ms) */

    struct {                       /* where device_create's time went (ms) */
        double driver_ms;          /* libcuda loaded, cuInit (first device only) */
        double context_ms;         /* primary context retained */
        double libraries_ms;       /* waiting for NVRTC and cuBLASLt after that */
        double probes_ms;          /* cache opened, capability probes */
        double cublaslt_ms;        /* cublasLtCreate */
        double total_ms;
    } start;

    cublasLtHandle_t lt_handle;
    bool failed;                   /* a context on it hit a device error */
} tg_cuda_device;

/* Returns the device for ordinal, starting it on first use (one reference
 * per call); release with tg_cuda_device_release. The last release unloads
 * the kernels and releases the CUDA context, so a device whose context died
 * of an error starts afresh next time. */
tg_status tg_cuda_device_acquire(int ordinal, tg_cuda_device **out_dev);
void tg_cuda_device_release(tg_cuda_device *dev);
/* Makes dev's context current on the calling thread. */
tg_status tg_cuda_device_bind(tg_cuda_device *dev);

/* The kernel `name` of kernel file `module` (e.g. "norm.cu") compiled with
 * the extra options `defines` ("-DTG_OP=2", may be ""), compiled (or read
 * from the disk cache) on first use. Thread-safe. The function lives as
 * long as the device. */
tg_status tg_cuda_kernel(tg_cuda_device *dev, const char *module, const char *defines,
                         const char *name, CUfunction *out_fn);
/* The host time dev has spent readying kernels so far (ms). */
double tg_cuda_library_ms(const tg_cuda_device *dev);
/* tg_cuda_kernel for the prewarm thread (cuda_prewarm.c): the kernel is
 * readied but not marked as one a compute asked for. */
tg_status tg_cuda_kernel_ready(tg_cuda_device *dev, const char *module, const char *defines, const char *name);
/* True when `module` is one of the embedded kernel files. */
bool tg_cuda_source_known(const char *module);
/* Compiles arbitrary source to a loaded module (capability probes, tests);
 * the caller unloads it with cuModuleUnload. Not cached on disk. */
tg_status tg_cuda_compile_source(tg_cuda_device *dev, const char *name, const char *source,
                                 const char *defines, CUmodule *out_mod);
/* Compiles one kernel file with NVRTC (no device needed): opts as made by
 * tg_cuda_compile_options; *out_image (CUBIN, or PTX when ptx) is freed by
 * the caller with tg_free. kernels_dir NULL: the embedded headers. */
tg_status tg_cuda_nvrtc_build(const tg_nvrtc_api *nv, const char *kernels_dir, const char *name,
                              const char *text, const char *opts, bool ptx, char **out_image,
                              size_t *out_size);
/* The NVRTC options for compute capability cc (e.g. 90) plus `defines`. */
void tg_cuda_compile_options(int cc, bool ptx, bool bf16, int tc_level, bool strict_fp,
                             const char *defines, char *out, size_t out_size);
/* Device memory free/total, bytes. */
tg_status tg_cuda_mem_info(tg_cuda_device *dev, size_t *out_free, size_t *out_total);

/* ------------------------------------------------------------- events */

typedef struct tg_cuda_event {
    tg_cuda_device *dev;
    CUevent ev;
} tg_cuda_event;

tg_status tg_cuda_event_new(tg_cuda_device *dev, bool timing, tg_cuda_event **out_event);
void tg_cuda_event_free(tg_cuda_event *e);
tg_status tg_cuda_event_record(tg_cuda_event *e, CUstream stream);
/* Makes stream wait for the event (no host wait). */
tg_status tg_cuda_event_wait(tg_cuda_event *e, CUstream stream);
/* Waits on the host for at most timeout_ms; TG_ERR_TIMEOUT past it. */
tg_status tg_cuda_event_synchronize(tg_cuda_event *e, int timeout_ms);

/* ------------------------------------------------------------- buffers */

typedef enum cuda_buf_kind {
    CUDA_BUF_DEVICE = 0,   /* cuMemAlloc                                  */
    CUDA_BUF_PINNED,       /* cuMemAllocHost: host memory the GPU maps     */
    CUDA_BUF_REGISTERED,   /* cuMemHostRegister of caller memory           */
    CUDA_BUF_COPY,         /* caller memory the driver would not register:
                              a device copy of it                          */
} cuda_buf_kind;

typedef struct cuda_buffer {
    cuda_buf_kind kind;
    struct tg_cuda_ctx *ctx;
    CUdeviceptr dptr;      /* device address of byte 0                    */
    void *host;            /* host address of byte 0 (pinned/registered)  */
    void *reg_base;        /* page-aligned start that was registered      */
} cuda_buffer;

/* --------------------------------------------------------- matmul plans */

typedef struct cuda_mm_key {
    int32_t atype, btype, compute, epilogue;
    int64_t m, n, k, lda, ldb, ldd, batch, sa, sb, sd;
    int32_t align_a, align_b, align_d;
    int32_t a_plain; /* 1: A stored n x k, not transposed, no workspace (1x1 convs) */
    int32_t dtype;   /* D's cudaDataType_t (0: CUDA_R_32F) */
} cuda_mm_key;

typedef struct cuda_mm_plan {
    cuda_mm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    size_t ws;
    bool none; /* cuBLASLt refused this key: asked once, refused after without asking */
    int none_status; /* with none: cuBLASLt's status (0: the heuristic found no algorithm; only
                      * statuses that refuse the key are kept, cuda_matmul.c's lt_refusal) */
    bool launched; /* launched once (its first launch's host time counted) */
    bool used;     /* asked for by a compute, not only made ahead (cuda_prewarm.c) */
} cuda_mm_plan;

/* ---------------------------------------------------- captured graphs */

/* Slots of the pinned staging ring (cuda_buffer.c). */
#define CUDA_STAGE_SLOTS 32

typedef struct cuda_graph_entry {
    uint64_t topo;        /* ops, types, shapes, params: what a graph update keeps */
    uint64_t full;        /* topo plus every address: an exact replay          */
    uint64_t seen_full;   /* the full hash of the last sighting                */
    CUgraphExec exec;     /* NULL until captured                               */
    int n_seen, n_replays, n_updates, n_updates_in_row;
    bool direct;          /* updates every time: launching directly pays more  */
    uint64_t last_use;
} cuda_graph_entry;

/* The most columns a product takes on matvec.cu by default: a decoder
 * step at batch 1-32 (17-32 as tiles of TG_MVM_MAXM, cuda_context.c). */
#define TG_CUDA_MATVEC_MMA_MAX 32
#define CUDA_MAX_GRAPHS 16
#define CUDA_N_STREAMS 4

/* ----------------------------------------------------------- context */

typedef struct tg_cuda_ctx {
    tg_backend *backend;
    tg_cuda_device *dev;
    char name[32];
    CUstream stream;
    CUstream aux[CUDA_N_STREAMS - 1]; /* for independent nodes (captured graphs) */
    CUevent fork_ev, join_ev[CUDA_N_STREAMS - 1];

    char *error;               /* sticky: set by a failed device call        */

    CUdeviceptr scratch;       /* per-node temporaries (conversions)         */
    size_t scratch_size;
    CUdeviceptr lt_ws;         /* cuBLASLt workspace                         */
    size_t lt_ws_size;

    void *stage;               /* pinned staging for host copies: a ring of   */
    size_t stage_size;         /* CUDA_STAGE_SLOTS slots of stage_size / slots */
    CUevent stage_ev[CUDA_STAGE_SLOTS]; /* each slot's last copy              */
    bool stage_busy[CUDA_STAGE_SLOTS];
    int stage_next;            /* the slot the next copy takes                */

    cuda_mm_plan *plans;
    int n_plans, cap_plans;
    /* first-use host time (ms), which a repeated call does not pay: plans
     * made, their first launches (cuBLASLt loads kernels lazily), graphs
     * captured and instantiated */
    double plan_ms, lt_first_ms, graph_make_ms;
    int n_lt_first;
    struct tg_cuda_prewarm *prewarm; /* its thread, until the first compute (cuda_prewarm.c) */
    void *prewarm_list;              /* the list this context started on, owned; NULL if none */
    size_t prewarm_list_size;
    bool in_prewarm;                 /* that thread is making plans: not marked used */
    int prewarm_done, prewarm_refused, prewarm_skipped, prewarm_failed; /* what the last one did (tests) */

    cuda_graph_entry graphs[CUDA_MAX_GRAPHS];
    uint64_t n_computes;
    bool use_graphs, use_concurrency, use_fusion;
    bool use_pdl;              /* programmatic dependent launch (sm_90)      */
    bool use_matvec;           /* CT_CUDA_MATVEC: few-column products (matvec.cu) */
    bool use_matvec_mma;       /* CT_CUDA_MATVEC_MMA: few columns on matvec.cu's tensor-core kernel */
    bool use_residual;         /* CT_CUDA_FUSE_RESIDUAL: a product's residual add in its epilogue */
    bool use_scale;            /* CT_CUDA_FUSE_SCALE: a scale after a product as its alpha */
    bool use_ln_matvec;        /* CT_CUDA_FUSE_NORM: a layer norm inside its product's matvec */
    bool use_conv_glu;         /* CT_CUDA_FUSE_CONV: the conv module's glu .. silu as one kernel */
    bool use_bias_mask;        /* CT_CUDA_FUSE_BIAS_MASK: a conv's bias, mask, relu as one pass */
    bool use_sub_front;        /* CT_CUDA_FUSE_SUB: the subsampling's conv0 .. depthwise conv's mask as one kernel */
    bool conv_fast;            /* CT_CUDA_CONV_FAST: conv_glu_dw_silu_c4's sigmoids by __expf and __fdividef */
    bool norm_prefetch;        /* CT_CUDA_NORM_PREFETCH: layer_norm_w4 asks its weights' lines into L2 before its wait */
    bool use_embed_norm;       /* CT_CUDA_FUSE_EMBED: a step's embedding lookups, sum and norm as one kernel */
    bool use_norm_pair;        /* CT_CUDA_FUSE_NORM_PAIR: a layer norm of a layer norm's result in its launch */
    bool use_kv_rows;          /* CT_CUDA_FUSE_KV: a step's K/V cache write inside its q/k/v product */
    bool use_pick;             /* CT_CUDA_FUSE_PICK: a step's argmax, sums, feed and history writes as one kernel */
    bool use_attn_decode_wide; /* CT_CUDA_ATTN_DECODE_WIDE: a row's one-query attention on one 16-warp block */
    bool use_attn_decode_wcl;  /* CT_CUDA_ATTN_DECODE_WCL (default 1): a row's keys over a cluster of 16-warp
                                  blocks where the wide block's rows leave SMs idle */
    int attn_decode_wide_min;  /* CT_CUDA_ATTN_DECODE_WIDE_MIN: the fewest rows it takes (0: a quarter of the SMs) */
    bool attn_decode_wide_short; /* CT_CUDA_ATTN_DECODE_WIDE_SHORT: fewer rows too when their keys are one round */
    int matvec_columns;        /* CT_CUDA_MATVEC_COLUMNS: the most mul_mat_vec takes (1..TG_MV_MAXM, default 2) */
    int matvec_mma_min;        /* CT_CUDA_MATVEC_MMA_MIN: the fewest columns mul_mat_vec_mma takes (default 1) */
    int matvec_loop;           /* CT_CUDA_MATVEC_LOOP=1: the mma kernels' grid at most the SMs, blocks looping over
                                * rows; =2: only where the rows' blocks are more than twice the SMs (the logits);
                                * =3 (default): a grid of what the SMs hold at once where the blocks are more than
                                * twice that; 0: a block for every 16 rows */
    bool matvec_prefetch;      /* CT_CUDA_MATVEC_PREFETCH: bias and norm parameters asked into L2 before the wait */
    int matvec_norm1;          /* CT_CUDA_MATVEC_NORM1: the fused norm reads its columns once, into registers: 0
                                * never, 1 always, 2 (default) for two columns or more */
    bool matvec_norm_block;    /* CT_CUDA_MATVEC_NORM_BLOCK: one column's norm by the whole block (TG_MV_NORM_BLOCK) */
    bool attn_prefetch;        /* CT_CUDA_ATTN_PREFETCH: attn_decode's K and V rows asked into L2 before its wait */
    int attn_pf_ahead;         /* CT_CUDA_ATTN_PREFETCH_AHEAD: ... by the matvec product before the attention
                                  (1: K and V no node writes; 2: any) */
    int attn_split_tq;         /* CT_CUDA_ATTN_SPLIT_TQ: the most queries attn_split takes (1-16) */
    bool use_attn_split_kt;    /* CT_CUDA_ATTN_SPLIT_KT: attn_split's scores with keys on lanes */
    bool use_bias_add_c4;      /* CT_CUDA_BIAS_ADD_C4: a lone row-bias add on ew_bias_mask_c4 */
    bool matvec_r8;            /* CT_CUDA_MATVEC_R8=1: blocks of 8 rows where those of 16 leave SMs idle (off:
                                * measured slower on an H100, tenth session; only for K >= 2048, the
                                * feed-forward's down product, no faster in the sixteenth) */
    int matvec_staged;         /* CT_CUDA_MATVEC_STAGED: the most shared memory (KB) a block of
                                * mul_mat_vec_mma_st(16) may take, its weight rows staged before the wait; 0: off */
    int matvec_ln_stage;       /* CT_CUDA_MATVEC_LN_STAGE: a fused norm's parameters (weights) staged in shared
                                * memory before the wait (mul_mat_vec_mma_ln): 0 never, 1 (default) from two
                                * columns on, 2 for any */
    bool matvec_cl;            /* CT_CUDA_MATVEC_CL=1: 17-64 columns on mul_mat_vec_mma_cl (clusters splitting K)
                                * where cuBLASLt took them (off: slower on an H100, fourteenth session) */
    int matvec_cl_min;         /* CT_CUDA_MATVEC_CL_MIN: the fewest columns it takes (default 17; below, in place
                                * of mul_mat_vec_mma) */
    bool matvec_epi_early;     /* CT_CUDA_MATVEC_EPI_EARLY: mul_mat_vec_mma loads its bias and residual before
                                * its wait where tg_cuda_written_before says the residual is not the previous
                                * launch's */
    /* while a node is encoded: what the launch before it (on the same
     * stream, in this encode) wrote, prev_n of them; -1: unknown (the
     * encode's first launch, or streams forked) */
    const tg_tensor *prev_w[TG_HAZARD_GROUP_MAX];
    int prev_n;
    int matvec_mma_max;        /* CT_CUDA_MATVEC_MMA_MAX: the most (default TG_CUDA_MATVEC_MMA_MAX) */
    int matvec_tile_max;       /* CT_CUDA_MATVEC_TILE_MAX (default 256): with tile16, the most columns taken as
                                  tiles; more on the wide kernel (a lever: 33-64 there, the norms apart) */
    bool matvec_tile16;        /* CT_CUDA_MATVEC_TILE16 (default 1): more than TG_MVM_MAXM columns as tiles of
                                  that many, not on the wide kernel */
    int matvec_ln_max;         /* CT_CUDA_MATVEC_LN_MAX: the most columns a matvec.cu product norms inside
                                  (default TG_MVM_MAXM; 256: any it takes); past it the layer norm is a launch of
                                  its own */
    bool use_attn_decode;      /* CT_CUDA_ATTN_DECODE: attention_split.cu's attn_decode */
    int attn_decode_fill;      /* CT_CUDA_ATTN_DECODE_FILL: attn_decode's keys a warp by the waves its blocks make (2,
                                  the default), by filling the slots (1, the rule of before), one round (0) */
    bool use_attn_mma;         /* tensor-core attention (default precision)  */
    bool attn_mask16;          /* CT_CUDA_ATTN_MASK16: attention_mma's mask tile staged in 16-byte pieces */
    bool attn_bd16;            /* CT_CUDA_ATTN_BD16 (default on): a product read only as packed attentions' mask
                                * stores BF16 */
    bool emit_tails;           /* CT_CUDA_EMIT_TAILS (default on): a cuBLASLt product group (bias, relu, scale)
                                * read only by unary ops or products stores BF16 */
    bool emit_attn;            /* CT_CUDA_EMIT_ATTN (default on): an attention read only by products stores their
                                * type */
    bool emit_defer;           /* CT_CUDA_EMIT_DEFER (default on): a product group read only by unary ops
                                * stores BF16 without its bias, which they add */
    bool mm_dry;               /* tg_cuda_encode_mul_mat makes its plans and launches nothing */
    bool attn_skip;            /* CT_CUDA_ATTN_DECODE_SKIP (default on): with xr, a round of keys the mask
                                * hides (seen a round ahead) loads nothing */
    bool attn_xr;              /* CT_CUDA_ATTN_DECODE_XR (default on): attn_decode's round of dot products
                                * (D = 128) summed by one transposed reduction, a key's score and exp a lane */
    bool attn_cluster;         /* CT_CUDA_ATTN_CLUSTER: a step attention's chunks of a row as one cluster,
                                * no combine launch (sm_90) */
    bool attn_cross_q;         /* CT_CUDA_ATTN_CROSS_Q=1: a step's normed q product inside its clustered
                                * attention (attn_decode_clq_bf16; tg_cuda_attn_cross_q_ok) */
    bool attn_groups;          /* CT_CUDA_ATTN_GROUPS: attention_mma's key tiles over two groups of 4 warps
                                * where its blocks are no more than the SMs (tg_cuda_attn_mma_groups) */
    bool attn_qstage;          /* CT_CUDA_ATTN_QSTAGE (default on since the fourteenth session's H100 call):
                                * attention_mma_packed stages Q's rows by cp.async ahead of the first key tile */
    bool capturing;            /* encoding into a stream capture              */

    int sync_timeout_ms;
    int profile;               /* CT_CUDA_PROFILE                            */
    int debug;                 /* CT_CUDA_DEBUG                              */
    int check_finite;          /* CT_CUDA_CHECK_FINITE: nodes still to report */
    char *dump_path;           /* CT_CUDA_DUMP_GRAPH: the next graph goes here */
    int dump_skip;             /* CT_CUDA_DUMP_GRAPH_SKIP: computes before it */
    int n_fused[TG_FUSED_KINDS]; /* fusion counts by kind (cuda_ops.c)        */
    int n_graph_hits, n_graph_updates, n_graph_captures, n_direct;
    int n_matvec, n_matvec_mma, n_attn_decode; /* encodes of matvec.cu (its mma kernels) and attn_decode */
    int n_matvec_norm_block;   /* encodes with TG_MV_NORM_BLOCK */
    int n_matvec_wide;                         /* ... of them on mul_mat_vec_mma_wide */
    int n_matvec_r8;                           /* ... of them on mul_mat_vec_mma_r8 */
    int n_matvec_staged;                       /* ... of them on mul_mat_vec_mma_st(16) */
    int n_matvec_ln_stage;                     /* ... of them on mul_mat_vec_mma_ln */
    int n_matvec_cl;                           /* ... of them on mul_mat_vec_mma_cl */
    int n_attn_decode_wide;    /* of those attn_decode encodes, on attn_decode_wide */
    int n_attn_decode_wcl;     /* of those, on attn_decode_wcl_bf16 (wide blocks in a cluster) */
    int n_pf_ahead;            /* matvec products asking the next attention's K and V into L2 */
    /* while a group is encoded: the K and V of the attention after it
     * (tg_cuda_next_prefetch), for a matvec product to ask into L2 (bytes
     * 0: nothing) */
    struct {
        CUdeviceptr a, b;
        size_t a_bytes, b_bytes;
    } next_pf;
    int n_attn_split;          /* encodes of attn_split (a few queries over many keys) */
    int n_matvec_epi_early;    /* mul_mat_vec_mma launches loading bias and residual before their wait */
    int n_attn_cluster;        /* attn_decode encodes with a row's chunks as one cluster */
    int n_attn_cross_q;        /* ... of them with the q product inside (attn_decode_clq_bf16) */
    int n_attn_out16;          /* attention encodes storing 16 bits for their products (CT_CUDA_EMIT_ATTN) */
    int n_mm_out16;            /* product encodes storing BF16 (CT_CUDA_EMIT_TAILS, or as a mask: ATTN_BD16) */
    int n_unary16;             /* unary ops reading a BF16 source (ew_unary_b4), and conv module kernels */
    int n_attn_groups;         /* encodes of attention_mma_packed2 (key tiles over two groups) */
    int n_attn_mask16;         /* encodes of the packed kernels staging their mask in 16-byte pieces */
    int n_attn_mask_bf16;      /* ... of them reading a BF16 mask (CT_CUDA_ATTN_BD16) */
    int n_attn_qstage;         /* ... of them with Q staged (CT_CUDA_ATTN_QSTAGE) */
    int force_fault;           /* test hook: the next compute faults         */
    const char *last_kernel;   /* the last launch, for dumps and profiles     */
    const tg_type *emit;       /* while encoding: per node, the type it stores
                                  for its matrix-product readers (F32: as is) */
    const uint8_t *mask16;     /* while encoding: per node, an attention whose mask's producer stores BF16 */
    const uint8_t *bias16;     /* while encoding: per node, a product group stored BF16 without its bias,
                                * which its unary readers add (plan_emit) */
    unsigned last_grid[3], last_block, last_smem;
    /* step chains (cuda_chain.c): a decoder step's launches recorded and run
     * as the phases of one step_chain kernel */
    int chain_mode;            /* CT_CUDA_STEP_CHAIN: 0 off, 1 on            */
    int chain_warps;           /* CT_CUDA_STEP_CHAIN_WARPS: 16 (default) or 8 */
    bool chain_pf;             /* CT_CUDA_STEP_CHAIN_PREFETCH (default on): the next phase's weights into L2 */
    bool chain_may;            /* while a node group is encoded: its launches may join the chain */
    CUdeviceptr chain_bar;     /* the grid barrier's two words (zero between launches) */
    CUstream chain_stream;     /* where the recorded phases go              */
    bool chain_coop;           /* CT_CUDA_STEP_CHAIN_COOP (default on): chains launch cooperatively */
    struct {                   /* step_chain, step_chain_long: blocks (the SMs, if one fits each) for smem */
        bool known;
        unsigned smem;
        int grid;
    } chain_fn[2];
    unsigned chain_smem;       /* the recorded phases' dynamic shared memory at chain_warps */
    int chain_max;             /* CT_CUDA_STEP_CHAIN_MAX: phases a chain takes (default TG_CHAIN_MAX, a
                                * layer; up to TG_CHAIN_LONG, a step, on step_chain_long) */
    tg_step_chain_long_args chain; /* the recorded phases, chain.n of them   */
    struct {                   /* each phase's own launch, for a chain of one */
        const char *module, *name;
        unsigned gx, gy, gz, bx, smem;
        union {
            tg_mul_mat_vec_args mv;
            tg_attn_decode_args ad;
        } args;
    } chain_own[TG_CHAIN_LONG];
    int n_chains, n_chain_phases; /* step_chain launches and the phases they ran */
} tg_cuda_ctx;

/* Records the first device error of ctx (sticky) and returns a status that
 * carries it. */
tg_status tg_cuda_ctx_fail(tg_cuda_ctx *c, CUresult r, const char *what);
/* The sticky error as a new status, NULL while the context is healthy. */
tg_status tg_cuda_ctx_sticky(const tg_cuda_ctx *c);
/* Waits for everything queued on stream s, at most sync_timeout_ms. */
tg_status tg_cuda_ctx_wait(tg_cuda_ctx *c, CUstream s);
/* An integer environment variable, dflt when unset or empty. */
int tg_cuda_env_int(const char *name, int dflt);
/* Monotonic clock, microseconds. */
double tg_cuda_now_us(void);

/* ------------------------------------------------- buffers (cuda_buffer.c) */

/* The backend table's buffer_alloc and buffer_from_host; the buffers hold
 * a reference to b's context, not to b. */
tg_status tg_cuda_buffer_alloc(tg_backend *b, size_t size, tg_buffer **out);
tg_status tg_cuda_buffer_from_host(tg_backend *b, void *ptr, size_t size, tg_buffer **out);
void *tg_cuda_host_alloc(tg_backend *b, size_t size);
void tg_cuda_host_free(tg_backend *b, void *ptr);
/* True when buf is a CUDA buffer (of any context, any device). */
bool tg_cuda_is_buffer(const tg_buffer *buf);

/* ---------------------------------------- profile and dump (cuda_profile.c) */

/* One compute's profile and dump; all zero when neither is on. */
typedef struct cuda_prof {
    FILE *dump;        /* CT_CUDA_DUMP_GRAPH: this compute writes it    */
    CUevent begin, end; /* around the compute (CT_CUDA_PROFILE)         */
    CUevent *ev;       /* two per node in per-kernel profile mode       */
    int n;
} cuda_prof;

/* CT_CUDA_STAMPS=path (a diagnostic): every kernel file compiled by NVRTC
 * with -DTG_STAMPS, so each kernel's first thread records the global timer
 * at its arrival and at the end of its wait for the kernel before it
 * (common.cuh; sm_90 and later); at the device's end the records go to
 * path (path.N for device N > 0) as text, one a line: arrival ns, release
 * ns, kernel-name hash, grid, block. Open takes
 * the buffer (a failure turns the stamps off with a warning), bind points a
 * loaded module at it, close writes the file and frees the buffer. */
void tg_cuda_stamps_open(tg_cuda_device *d);
void tg_cuda_stamps_bind(tg_cuda_device *d, CUmodule mod);
void tg_cuda_stamps_close(tg_cuda_device *d);

/* Opens the dump (taking c->dump_path: only the next compute dumps) and
 * makes and starts the events; n_runs is the plan's, for the dump. */
void tg_cuda_prof_begin(tg_cuda_ctx *c, const tg_graph *g, int n_runs, cuda_prof *out_pf);
/* True when the profile needs every node launched by itself (no capture). */
static inline bool tg_cuda_prof_direct(const cuda_prof *pf) { return pf->ev || pf->dump; }
/* Around node i's launch on stream s (len nodes fused, in concurrency run
 * `run`): events, and the dump's line. */
void tg_cuda_prof_node_begin(const tg_cuda_ctx *c, cuda_prof *pf, int i, CUstream s);
void tg_cuda_prof_node_end(const tg_cuda_ctx *c, cuda_prof *pf, int i, CUstream s, const tg_tensor *t, int len,
                           int run);
/* Records the end event once everything is enqueued. */
void tg_cuda_prof_stop(const tg_cuda_ctx *c, cuda_prof *pf);
/* Prints the compute's profile once the stream has finished: mode is
 * "graph" or "direct", t0_us when the compute began. */
void tg_cuda_prof_report(const tg_cuda_ctx *c, const tg_graph *g, const cuda_prof *pf, const char *mode,
                         double t_submit_us, double t0_us);
/* Closes the dump, frees the events; pf is all zero after. */
void tg_cuda_prof_end(const tg_cuda_ctx *c, cuda_prof *pf);
/* CT_CUDA_CHECK_FINITE=N: after node i of g (stored as emit[i] where the
 * emit fusion changed its type, else as its own type) has run on s, waits for it
 * and warns when its result holds NaN or Inf, naming the node and which of
 * its sources are finite, for the first N such nodes. A finder of where non-finite
 * values start; every compute launches directly while it is on. */
void tg_cuda_check_finite(tg_cuda_ctx *c, CUstream s, const tg_graph *g, const tg_type *emit, int i);
/* CT_CUDA_DEBUG: the context's counts, printed when it is freed. */
void tg_cuda_debug_report(const tg_cuda_ctx *c);

/* ------------------------------------------------------------- ops */

/* Why an op can or cannot run here (supports_op); full op/type matrix. */
bool tg_cuda_supports(const tg_cuda_device *dev, const tg_tensor *node);
/* Scratch bytes the node needs while it runs (type conversions). */
size_t tg_cuda_op_scratch(const tg_cuda_ctx *c, const tg_tensor *node);

/* ------------------------------------------------------------- fusion (cuda_fusion.c) */

/* How many nodes starting at nodes[i] one launch covers (1 when nothing
 * fuses); the fused sequence's result is nodes[i + n - 1]. */
int tg_cuda_fuse_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i,
                     const int *n_uses);
/* Marks in writes[] the nodes of the fused group of len nodes at nodes[i]
 * whose results its launch stores besides the last one (a product whose
 * result other nodes read, before the set_rows fused after it; a step
 * tail's ids, sums, feed and history of ids; the first of two layer
 * norms in one launch), for the hazard runs
 * (tg_hazard_runs_grouped). */
void tg_cuda_group_writes(tg_tensor *const *nodes, int i, int len, uint8_t *writes);
/* The index of the node of the group at nodes[i] (ending in a fused
 * set_rows) whose result the set_rows' rows view: the product group's
 * last node; -1 when none. */
int tg_cuda_kv_rows_source(tg_tensor *const *nodes, int i, int len);
/* A value per row of n: F32, ne[0] == 1, every other dim 1 or n's (a conv
 * bias [1, 1, C, 1], a frame mask [1, T, 1, B]). */
bool tg_cuda_row_value(const tg_tensor *t, const tg_tensor *n);
/* An add of a row bias that ew_bias_mask_c4 takes alone (no mask, no relu
 * after it: the subsampling's third conv, whose rows are too short for
 * ew_binary_rows), the arithmetic of ew_binary's; CT_CUDA_BIAS_ADD_C4=0
 * leaves it to ew_binary. */
bool tg_cuda_bias_add_c4(const tg_cuda_ctx *c, const tg_tensor *add);
/* The operand of binary node n that is not `from`, when n reads `from` as
 * one operand and a row value as the other; else NULL. */
const tg_tensor *tg_cuda_row_operand(const tg_tensor *n, const tg_tensor *from);

/* ------------------------------------------------------- plans (cuda_plan.c) */

/* What a graph's compute decides before it encodes: each node's readers,
 * its fused group, the type it stores and its concurrency run. Arrays of
 * g->n_nodes + 1, owned by the plan. */
typedef struct tg_cuda_plan {
    tg_type *emit; /* the type each node stores (emit fusion), F32 = as is */
    int *uses;     /* readers of each node inside this graph */
    int *run;      /* concurrency run of each node, -1 for views */
    uint8_t *cls;  /* hazard class of each node (TG_HAZARD_*) */
    int *fuse;     /* nodes one launch covers from here (tg_cuda_fuse_len), 0 inside a group */
    uint8_t *writes; /* nodes inside a group whose results its launch stores too (tg_cuda_group_writes) */
    uint8_t *mask16; /* attention nodes whose mask's producer stores BF16 (plan_emit, CT_CUDA_ATTN_BD16) */
    uint8_t *bias16; /* product groups storing BF16 without their bias, which their unary readers add */
    int n_runs;
} tg_cuda_plan;

/* Plans g for context c (its switches and device): every array filled, or
 * an error (out of memory) with nothing left to free. The caller frees a
 * made plan with tg_cuda_plan_free. */
tg_status tg_cuda_plan_make(tg_cuda_ctx *c, tg_graph *g, tg_cuda_plan *p);
void tg_cuda_plan_free(tg_cuda_plan *p);

/* ------------------------------------------------------------- ops */

/* True when node's kernel can store BF16/F16 instead of F32 (its readers
 * being matrix products that take that type): the emit fusion. */
bool tg_cuda_can_emit16(const tg_tensor *node);
/* A layer norm on the vectorised kernels' path: contiguous F32 rows of a
 * multiple of 4 floats, 16-byte aligned, as its parameters. */
bool tg_cuda_norm_vec_ok(const tg_tensor *node);
/* True when unary node n can read a source its producer stored BF16
 * (ew_unary_b4: both contiguous, 4-element groups, 16-byte aligned). */
bool tg_cuda_unary_takes16(const tg_tensor *n);
/* The emit fusion's one rule for where a source was stored: the index of
 * the node among nodes[i - reach .. i - 1] that stored src, its own node's
 * or, where that is a view storing as is, the node its view chain starts
 * from (the plan lets a node that stores 16 bits be read only through
 * views that keep its elements where they are); -1 when none of those
 * stores 16 bits, or emit is NULL. emit: each node's stored type. */
int tg_cuda_stored_node(const tg_type *emit, tg_tensor *const *nodes, int i, int reach, const tg_tensor *src);
/* How far back the encode looks for a source's node (the plan keeps every
 * 16-bit store's readers within it), and the type src was stored in by
 * that rule: F32 where no node in reach stored 16 bits. */
#define TG_CUDA_STORED_REACH 256
tg_type tg_cuda_stored_type(const tg_type *emit, tg_tensor *const *nodes, int i, const tg_tensor *src);
/* Enqueues nodes[i .. i+len) (as fused by tg_cuda_fuse_len) on stream;
 * c->emit, when set, says which nodes store 16-bit results. */
tg_status tg_cuda_op_encode(tg_cuda_ctx *c, CUstream stream, tg_tensor *const *nodes, int i,
                            int len);
/* Converts (and makes contiguous) t into dst as type dt: the conversion
 * pass in front of a matrix product. */
tg_status tg_cuda_convert(tg_cuda_ctx *c, CUstream s, const tg_tensor *t, tg_type dt, CUdeviceptr dst);

/* Launch helper: grid-stride grid size for n items. */
unsigned tg_cuda_grid(const tg_cuda_ctx *c, int64_t n, unsigned block);
/* Fills cfg (and at, which cfg points to) for cuLaunchKernelEx of a 1-D
 * block on stream s, with programmatic dependent launch when pdl. */
void tg_cuda_launch_config(CUlaunchConfig *cfg, CUlaunchAttribute *at, unsigned gx, unsigned gy, unsigned gz,
                           unsigned bx, unsigned smem, CUstream s, bool pdl);

/* Offsets into the scratch: every piece starts 256-byte aligned. */
static inline size_t tg_cuda_align256(size_t x) { return (x + 255) & ~(size_t)255; }

/* ------------------------------ the op encoders' shared parts (cuda_ops.c) */

static inline uint64_t tg_cuda_dptr(const void *p) { return (uint64_t)(uintptr_t)p; }

/* Whether `bytes` asked into L2 ahead of their reader leave room for what
 * the launches in between read: at most half of L2 (attn_decode's own
 * requests, the product before an attention, a step chain's phases). */
static inline bool tg_cuda_l2_half(const tg_cuda_ctx *c, double bytes) {
    return c->dev->props.l2_bytes > 0 && bytes <= 0.5 * (double)c->dev->props.l2_bytes;
}
/* t as the kernels see it; NULL: a 1x1x1x1 placeholder at address 0. */
tg_t tg_cuda_desc(const tg_tensor *t);
/* Launches kernel `name` of `module` with its argument struct at args (its
 * one by-value parameter). Called through LAUNCH, which checks the type. */
tg_status tg_cuda_launch(tg_cuda_ctx *c, CUstream s, const char *module, const char *defines, const char *name,
                         unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem, void *args);
/* The same with blocks of cluster_x along x (gx a multiple of it, at most
 * 8) launched as thread block clusters (props.clusters), through
 * LAUNCH_CLUSTER. */
tg_status tg_cuda_launch_cluster(tg_cuda_ctx *c, CUstream s, const char *module, const char *defines,
                                 const char *name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem,
                                 void *args, unsigned cluster_x);
#define LAUNCH_CLUSTER(c, s, module, defines, kernel, gx, gy, gz, bx, smem, args, cluster_x)         \
    tg_cuda_launch_cluster(c, s, module, defines, #kernel, gx, gy, gz, bx, smem,                    \
                           _Generic(&(args), tg_args_##kernel *: &(args)), cluster_x)
/* Launches `kernel` (a name, not a string) with args, which must be its
 * argument struct, tg_args_<kernel> (kernels/kargs.cuh): another type does
 * not compile. */
#define LAUNCH(c, s, module, defines, kernel, gx, gy, gz, bx, smem, args)                            \
    tg_cuda_launch(c, s, module, defines, #kernel, gx, gy, gz, bx, smem,                            \
                   _Generic(&(args), tg_args_##kernel *: &(args)))
/* A grid-stride kernel over args.n items, 256 threads a block. */
#define LAUNCH_FLAT(c, s, module, kernel, args) \
    ((args).n == 0 ? NULL : LAUNCH(c, s, module, "", kernel, tg_cuda_grid(c, (args).n, 256), 1, 1, 256, 0, args))

/* ------------------------------------------------ step chains (cuda_chain.c) */

/* Called by tg_cuda_launch_cluster before it launches: where c->chain_may
 * holds and the launch is one a chain runs (mul_mat_vec_mma(_ln) of at
 * most 16 columns on weights, attn_decode_wide_bf16) on the chain's
 * stream, records it as the next phase (*out_taken true); otherwise
 * launches what was recorded first. */
tg_status tg_cuda_chain_offer(tg_cuda_ctx *c, CUstream s, const char *module, const char *defines, const char *name,
                              unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem, const void *args,
                              unsigned cluster_x, bool *out_taken);
/* Launches the recorded phases (one step_chain, or the one launch
 * recorded as it came); nothing when none are. */
tg_status tg_cuda_chain_flush(tg_cuda_ctx *c);
/* Drops the recorded phases unlaunched (an encode that failed). */
void tg_cuda_chain_drop(tg_cuda_ctx *c);
/* The barrier's memory, made when c->chain_mode is on (the context's
 * creation); freed with tg_cuda_chain_free. */
tg_status tg_cuda_chain_init(tg_cuda_ctx *c);
void tg_cuda_chain_free(tg_cuda_ctx *c);
/* Launches a kernel without offering it to the chain. */
tg_status tg_cuda_launch_now(tg_cuda_ctx *c, CUstream s, const char *module, const char *defines, const char *name,
                             unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem, void *args,
                             unsigned cluster_x);

/* ------------------------------------------------ attention (cuda_attention.c) */

/* Scratch bytes an attention node needs (partials of a split, packed K/V). */
size_t tg_cuda_attention_scratch(const tg_cuda_ctx *c, const tg_tensor *n);
/* An attention node: attn_decode (one query a row), the split over keys
 * (a few queries), the tensor-core kernel (K/V packed first beyond 64
 * queries) or the F32 one. mask_stored: the type the mask's producer
 * mask_root (the root of the mask's view chain) stored (the emit fusion:
 * BF16 only where tg_cuda_attn_mask_bf16_ok). out_stored: the type n
 * itself stores (the emit fusion: BF16 where products alone read it; every
 * path writes through its output's descriptor). */
tg_status tg_cuda_encode_attention(tg_cuda_ctx *c, CUstream s, const tg_tensor *n, tg_type mask_stored,
                                   const tg_tensor *mask_root, tg_type out_stored);
/* True when attention node n reads its mask m (a view, n->src[3]) through
 * the packed tensor-core kernel in 16-byte pieces, so the mask's producer
 * may store it as BF16 (CT_CUDA_ATTN_BD16; the emit plan asks). */
bool tg_cuda_attn_mask_bf16_ok(const tg_cuda_ctx *c, const tg_tensor *n);
/* attn_decode's keys a warp (a multiple of ku, the keys of one round of
 * loads) for Tk keys and `rows` (head, batch row) pairs on a GPU of
 * sm_count SMs, by the rule `fill` picks (CT_CUDA_ATTN_DECODE_FILL: 2 the
 * waves, 1 filling the slots, 0 one round); a pure function, so tests
 * check the choice without a GPU. */
int64_t tg_cuda_attn_decode_kpw(int sm_count, int fill, int64_t ku, int64_t Tk, int64_t rows);
/* attn_decode_wide's keys a warp (one 16-warp block a row), or 0 where the
 * 4-warp kernel of tg_cuda_attn_decode_kpw runs instead (cuda_attention.c). */
int64_t tg_cuda_attn_decode_wide_kpw(int sm_count, int min_rows, bool short_rows, int64_t ku, int64_t Tk,
                                     int64_t rows);
/* attn_decode_wcl_bf16's wide blocks a row (2-8, their cluster), or 0 where
 * one wide block a row stays (cuda_attention.c); *out_kpw its keys a warp
 * (a whole number of ku-key rounds, every block with keys). */
int64_t tg_cuda_attn_decode_wcl(int sm_count, int64_t ku, int64_t Tk, int64_t rows, int64_t *out_kpw);

/* attention_mma's key groups a block (1 or TG_AM_GROUPS) for `blocks`
 * blocks of 64 queries over Tk keys on a GPU of sm_count SMs: two where
 * the blocks are no more than the SMs (one block an SM either way, so the
 * SM gets 8 warps instead of 4), there are two key tiles to share and the
 * groups' shared memory (smem bytes) is within a block's (smem_max: 99 KB
 * on sm_86/sm_89, under the 126 KB two groups take at D = 160 with a
 * mask); allow: CT_CUDA_ATTN_GROUPS. A pure function, so tests check the
 * choice without a GPU. */
int tg_cuda_attn_mma_groups(int sm_count, int64_t blocks, int64_t Tk, bool allow, int64_t smem, int64_t smem_max);

/* After the node group nodes[i .. i + len) was encoded: records what it
 * wrote (its last node's result and each node k with writes[k]) as the
 * launch before the next, in c->prev_w. Where it launched no kernel
 * (c->last_kernel NULL: nothing to do) the record is added to the one
 * before, whose kernel is then still the one before the next; after a
 * cuBLASLt launch (its kernels' own waits unknown) or past
 * TG_HAZARD_GROUP_MAX tensors the record is unknown (prev_n -1), as it is
 * at an encode's start and in forked runs (the encode loop's part). */
void tg_cuda_record_launch(tg_cuda_ctx *c, tg_tensor *const *nodes, const uint8_t *writes, int i, int len);
/* True when t lies apart from everything the launch before the one being
 * encoded wrote (c->prev_w), so a kernel started early by programmatic
 * dependent launch may read it before its wait: the launch before has
 * passed its own wait, so everything before it has ended. False when that
 * launch is unknown (c->prev_n < 0). */
bool tg_cuda_written_before(const tg_cuda_ctx *c, const tg_tensor *t);
/* Sets c->next_pf for the group nodes[i .. i + len): where the next node
 * that is not a view is an attention whose K and V are leaves' storage (no
 * node computes them: a decoder step's cross-attention over the encoder's
 * K/V; with CT_CUDA_ATTN_PREFETCH_AHEAD=2 any K and V) and take at most
 * half of L2, their spans; else nothing. 0, the default, turns it off
 * (measured slower on an H100, twentieth session: the step +0.5-3.6%). */
void tg_cuda_next_prefetch(tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i, int len);

/* A decoder step's cross q as one launch with its attention (CT_CUDA_ATTN_CROSS_Q,
 * off: the step 6-9% slower at batch 1-4 on an H100, twentieth session):
 * ln the layer norm of x, mm the product of its result by BF16 weights,
 * bias (or NULL) the add after it, att the attention whose q is that
 * add's result seen as [128, 1, H, B]. True where attn_decode_clq_bf16
 * computes exactly what they would: the attention takes a row's chunks as
 * one cluster (tg_cuda_encode_attention's own choice), and the shapes,
 * types and alignments are the kernel's. The matcher (cuda_fusion.c)
 * checks readers and overlaps. */
bool tg_cuda_attn_cross_q_ok(const tg_cuda_ctx *c, const tg_tensor *ln, const tg_tensor *mm, const tg_tensor *add,
                             const tg_tensor *bias, const tg_tensor *att);
/* Launches such a group, nodes[i] the norm and nodes[i + len - 1] the
 * attention; out_stored: the attention's result as its readers take it. */
tg_status tg_cuda_encode_attn_cross_q(tg_cuda_ctx *c, CUstream s, tg_tensor *const *nodes, int i, int len,
                                      tg_type out_stored);

/* ------------------------------------------ matrix products (cuda_matmul.c) */

/* True when cuBLASLt takes node's operands as BF16 with F32 sums (the
 * products of two activations at default precision on a BF16 GPU, and BF16
 * weights): those for which it has BF16 results. */
bool tg_cuda_mm_bf16_operands(const tg_cuda_ctx *c, const tg_tensor *node);
/* True when cuBLASLt has an algorithm for the product group nodes[head ..
 * head + len) storing a BF16 result (with its F32 bias, or without it:
 * drop_bias), b_stored its activations' stored type: the plans made (and
 * kept, refusals too), nothing launched; true where there is no device (a
 * plan only). */
bool tg_cuda_mm_d16_ok(tg_cuda_ctx *c, tg_tensor *const *nodes, int head, int len, tg_type b_stored,
                       bool drop_bias);

/* Scratch bytes node's operand conversions need. */
size_t tg_cuda_mm_scratch(const tg_cuda_ctx *c, const tg_tensor *node);
/* What a fused product group (tg_cuda_fuse_len) adds to the product:
 * out = relu?(alpha * a·b + bias) + res, from mul_mat [, scale alpha]
 * [, add bias [, relu | add res]]; bias and res NULL when absent. */
typedef struct tg_cuda_fused {
    const tg_tensor *bias, *res;
    float alpha;
    bool relu;
    const tg_tensor *rows; /* a set_rows of some of the result's rows into a cache, after the
                              group (mul_mat_vec_mma only: tg_cuda_kv_rows_len) */
    tg_type d_type;        /* what the product stores: F32 (0), or BF16 where the emit
                              fusion asks it (cuBLASLt only; the first half of out) */
} tg_cuda_fused;
/* The product of node = mul_mat(a, b) with f's parts: alpha as cuBLASLt's,
 * the bias (and relu) by its epilogue, the residual (out's shape and
 * layout) as its C operand (beta = 1); the result goes to out. b_stored:
 * the type b's producer stored it in (the emit fusion), F32 when as is. */
tg_status tg_cuda_encode_mul_mat(tg_cuda_ctx *c, CUstream s, const tg_tensor *node, const tg_cuda_fused *f,
                                 const tg_tensor *out, tg_type b_stored);
/* The parts of the fused group of len nodes from nodes[i] (tg_cuda_fuse_len's
 * groups only; len 1 gives a plain product). */
tg_cuda_fused tg_cuda_fused_parts(tg_tensor *const *nodes, int i, int len);
/* Frees the matmul plans. */
void tg_cuda_mm_free(tg_cuda_ctx *c);
/* The first-use work of n product plans by key (cuda_prewarm.c): each
 * plan made and launched once on scratch memory of its own (at most
 * max_scratch bytes; a key needing more, or not tg_cuda_mm_key_ok, is
 * skipped) on a stream of its own, waited for; stops between keys once
 * *stop is set. Counts into *out_counts; returns the wait's result (a
 * launch's fault shows there). */
typedef struct tg_cuda_prewarm_counts {
    int done, refused, skipped, failed; /* refused: cuBLASLt refused the key again, kept as refused */
} tg_cuda_prewarm_counts;
CUresult tg_cuda_mm_prewarm(tg_cuda_ctx *c, const cuda_mm_key *keys, int n, size_t max_scratch, const int *stop,
                            tg_cuda_prewarm_counts *out_counts);
/* True when key k is one mm_plan could have made: known types and
 * epilogue, positive sizes, leading dimensions that hold their rows,
 * power-of-two alignments, and operand spans that fit a size_t (a list
 * read from disk is checked with it). */
bool tg_cuda_mm_key_ok(const cuda_mm_key *k);

/* cuda_prewarm.c. On unless CT_CUDA_PREWARM=0 (read at each call). */
typedef struct tg_cuda_prewarm tg_cuda_prewarm;
bool tg_cuda_prewarm_enabled(void);
/* Starts c's prewarm thread where the kernel cache holds a list for this
 * GPU and driver; nothing otherwise. */
void tg_cuda_prewarm_start(tg_cuda_ctx *c);
/* Waits for c's prewarm thread, if any (with `stop`, after its current
 * item), and frees it: before anything touches c's plans (the first
 * compute) and at c's end. Returns the ms it waited. A fault of the
 * prewarm's launches fails c (tg_cuda_ctx_fail) and empties the list. */
double tg_cuda_prewarm_join(tg_cuda_ctx *c, bool stop);
/* Writes the kernels c's device readied and the plans c made as the
 * kernel cache's prewarm list for this GPU and driver, unless that is the
 * list c started on (c->prewarm_list). */
tg_status tg_cuda_prewarm_save(tg_cuda_ctx *c);
/* The kernel cache key of dev's prewarm list (tests damage it). */
void tg_cuda_prewarm_key(const tg_cuda_device *dev, char *buf, size_t size);
/* conv_2d 1x1 (stride 1, no padding, F32, pixels contiguous) as one f32
 * cuBLASLt product per batch entry (cuda_matmul.c). */
bool tg_cuda_conv_1x1_ok(const tg_cuda_ctx *c, const tg_tensor *n);
tg_status tg_cuda_conv_1x1(tg_cuda_ctx *c, CUstream s, const tg_tensor *n);
/* F32 with 4-byte aligned data and strides. */
static inline bool tg_cuda_f32_words(const tg_tensor *t) {
    return t->type == TG_F32 && ((uintptr_t)t->data & 3) == 0 && t->nb[0] % 4 == 0 && t->nb[1] % 4 == 0 &&
           t->nb[2] % 4 == 0 && t->nb[3] % 4 == 0;
}

/* ------------------------------------- few-column products (cuda_matvec.c) */

/* A layer norm whose only reader is the product mm after it, which runs
 * on matvec.cu, writing out: the norm can go into that launch. */
bool tg_cuda_ln_matvec_ok(const tg_cuda_ctx *c, const tg_tensor *ln, const tg_tensor *mm, const tg_tensor *out);
/* Whether product mm, on matvec.cu, runs on the mma kernels (BF16 operands,
 * its normed columns rounded to BF16) rather than mul_mat_vec (F32). */
bool tg_cuda_matvec_mma_takes(const tg_cuda_ctx *c, const tg_tensor *mm);
/* The product n (its group's parts f) into out: on matvec.cu where it
 * takes it, else cuBLASLt (tg_cuda_encode_mul_mat); ln, when not NULL, the
 * layer norm producing n's x, done inside the matvec launch (the caller
 * checked tg_cuda_ln_matvec_ok). stored: the type x's producer stored. */
tg_status tg_cuda_encode_product(tg_cuda_ctx *c, CUstream s, const tg_tensor *n, const tg_cuda_fused *f,
                                 const tg_tensor *out, tg_type stored, const tg_tensor *ln);
/* True when product n writing out (F32) could run on matvec.cu, whatever
 * its x's producer stored: a result matvec.cu stores F32 only, so the emit
 * plan leaves such a product's group alone. */
bool tg_cuda_product_on_matvec(const tg_cuda_ctx *c, const tg_tensor *n, const tg_tensor *out);
/* True when t, or the root of its view chain, is a weight (TG_FLAG_WEIGHT):
 * its contents do not change between computes. */
bool tg_cuda_is_weight(const tg_tensor *t);
/* After a product group whose product is nodes[p] and whose last node is
 * nodes[end - 1] (ln: a layer norm leads it, so x is the norm's input): up
 * to two view nodes and a set_rows storing rows of that group's result
 * into a cache (the decoder step's k and v, one write a layer), which the
 * group's mul_mat_vec_mma launch can make itself. Returns how many nodes
 * that adds to the group, 0 when it cannot. */
int tg_cuda_kv_rows_len(const tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int p, int end, bool ln);

/* Test hook: the plan a context on a device of these properties would
 * make for g (its switches from the environment, as a real context reads
 * them), without a device: out_fuse[i] (tg_cuda_fuse_len's group lengths,
 * 0 inside a group), out_writes[i] and, when out_emit is not NULL,
 * out_emit[i] (the type the node stores, the emit fusion) for g's nodes.
 * The graph's tensors need addresses (allocated, on any backend). */
tg_status tg_cuda_test_plan(const tg_cuda_props *props, tg_graph *g, int *out_fuse, uint8_t *out_writes,
                            tg_type *out_emit);

/* Test hooks (tests/cuda): make the next compute fail: kind 1 with a launch
 * the driver rejects, kind 2 with a kernel that faults; read compile/cache
 * counters. */
void tg_cuda_test_fault_next(tg_backend *b, int kind);
void tg_cuda_test_counts(tg_backend *b, int *out_compiled, int *out_cache_hits);
/* Kernel files loaded from the images nvcc precompiled. */
int tg_cuda_test_precompiled(tg_backend *b);
/* Milliseconds the device has spent making kernels ready (compiling or
 * reading the cache, loading modules). */
double tg_cuda_test_library_ms(tg_backend *b);
/* The device properties of a CUDA backend (NULL for another backend). */
const tg_cuda_props *tg_cuda_backend_props(tg_backend *b);

#endif /* TG_CUDA_INTERNAL_H */
