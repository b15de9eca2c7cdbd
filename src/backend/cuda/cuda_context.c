/*
 * cuda_context.c: the CUDA backend's table (tg_backend_cuda_new): graph
 * compute on a stream, CUDA-graph capture and replay, concurrency of
 * independent nodes, the sticky error, abort, copies between backends and
 * GPUs.
 *
 * Launches are asynchronous already, so what costs is the host side of each
 * launch. A graph seen with the same addresses as at its last sighting
 * (every decoder step) is captured into a CUDA graph and replayed from then
 * on; when only addresses changed and then repeat, it is re-captured and the
 * executable graph updated in place; a graph whose addresses changed since
 * its last sighting launches directly (a capture would not be replayed),
 * and one updated at every call goes back to direct launches for good. Runs of independent nodes
 * (src/tensor/hazard.c) are spread over several streams, forked and joined
 * by events: inside a capture they become parallel branches of the graph,
 * in direct launches they overlap on the GPU the same way.
 *
 * A device error (a failed launch, a faulting kernel) marks the context
 * failed with the error text; later computes fail fast with it until the
 * backend is freed and made again. That recovers from every error the driver
 * itself recovers from; after a kernel fault (illegal address and the like)
 * the driver refuses all further work in the process, so the message says
 * to restart it (the device is still reset when its last backend goes, for
 * drivers that allow it). Out-of-memory on an allocation is an ordinary
 * error, not a failure of the context.
 *
 * Environment: CT_CUDA_GRAPHS=0 (no capture), CT_CUDA_CONCURRENCY=0,
 * CT_CUDA_PDL=0 (no programmatic dependent launch on sm_90), CT_CUDA_MATVEC=0,
 * CT_CUDA_ATTN_DECODE=0 (the decoder step's kernels: cuda_ops.c), CT_CUDA_ATTN_MMA=0
 * (attention on the F32 FMA kernel even where the tensor-core one applies),
 * CT_CUDA_FUSION=0, CT_CUDA_PROFILE=1 (per compute: host submit and GPU
 * time; =2 adds per-op kernel times, which launches directly), CT_CUDA_DEBUG=1
 * (fusion and graph counts at free), CT_CUDA_CHECK_FINITE=N (the first N
 * nodes whose results hold NaN or Inf, named; launches directly),
 * CT_CUDA_DUMP_GRAPH=path (the next
 * computed graph: nodes, kernels, launch shapes, times; NVTX ranges mark
 * computes and ops for Nsight when it is attached), CT_CUDA_SYNC_TIMEOUT_MS,
 * CT_CUDA_HOST_BUFFERS=1 (buffers in pinned host memory); the fusions' own
 * switches are CT_CUDA_FUSE_SCALE, _NORM, _CONV, _BIAS_MASK, _SUB, _EMBED,
 * _KV and _PICK (=0: off).
 *
 * Not here: what a compute decides before it encodes (cuda_plan.c: readers,
 * fused groups, stored types, concurrency runs), buffers and host copies
 * (cuda_buffer.c), the profile, dump and debug output (cuda_profile.c),
 * kernels and their launch shapes (cuda_ops.c), the matrix products
 * (cuda_matmul.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NVTX ranges (header-only NVTX 3: inert unless a profiler injects itself). */
#if __has_include(<nvtx3/nvToolsExt.h>)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#include <nvtx3/nvToolsExt.h>
#pragma GCC diagnostic pop
#define RANGE_PUSH(name) nvtxRangePushA(name)
#define RANGE_POP() nvtxRangePop()
#else
#define RANGE_PUSH(name) ((void)0)
#define RANGE_POP() ((void)0)
#endif

#include "cuda_internal.h"
#include "op_params.h"

static const struct tg_backend_iface cuda_iface;

double tg_cuda_now_us(void) { return tg_clock_now_ms() * 1e3; }

int tg_cuda_env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static tg_cuda_ctx *ctx_of(tg_backend *b) { return (tg_cuda_ctx *)b->impl; }

/* The context's switches (the environment table in NOTES.md), read once
 * when it is made; props: its device's. */
static void read_switches(tg_cuda_ctx *c, const tg_cuda_props *props) {
    c->use_graphs = tg_cuda_env_int("CT_CUDA_GRAPHS", 1) != 0;
    c->use_concurrency = tg_cuda_env_int("CT_CUDA_CONCURRENCY", 1) != 0;
    c->use_fusion = tg_cuda_env_int("CT_CUDA_FUSION", 1) != 0;
    c->use_pdl = props->cc_major >= 9 && tg_cuda_env_int("CT_CUDA_PDL", 1) != 0;
    c->use_attn_mma = tg_cuda_env_int("CT_CUDA_ATTN_MMA", 1) != 0;
    c->attn_mask16 = tg_cuda_env_int("CT_CUDA_ATTN_MASK16", 1) != 0;
    c->attn_groups = tg_cuda_env_int("CT_CUDA_ATTN_GROUPS", 1) != 0;
    c->attn_qstage = tg_cuda_env_int("CT_CUDA_ATTN_QSTAGE", 1) != 0;
    c->attn_cluster = tg_cuda_env_int("CT_CUDA_ATTN_CLUSTER", 1) != 0;
    c->attn_cross_q = tg_cuda_env_int("CT_CUDA_ATTN_CROSS_Q", 0) != 0;
    c->attn_xr = tg_cuda_env_int("CT_CUDA_ATTN_DECODE_XR", 1) != 0;
    c->attn_skip = tg_cuda_env_int("CT_CUDA_ATTN_DECODE_SKIP", 1) != 0;
    c->attn_bd16 = tg_cuda_env_int("CT_CUDA_ATTN_BD16", 1) != 0;
    c->emit_tails = tg_cuda_env_int("CT_CUDA_EMIT_TAILS", 1) != 0;
    c->emit_attn = tg_cuda_env_int("CT_CUDA_EMIT_ATTN", 1) != 0;
    c->emit_defer = tg_cuda_env_int("CT_CUDA_EMIT_DEFER", 1) != 0;
    c->use_matvec = tg_cuda_env_int("CT_CUDA_MATVEC", 1) != 0;
    c->use_matvec_mma = tg_cuda_env_int("CT_CUDA_MATVEC_MMA", 1) != 0;
    c->matvec_mma_min = tg_cuda_env_int("CT_CUDA_MATVEC_MMA_MIN", 1);
    /* 17-32 columns (a decoder step at batch 17-32) as tiles of 16 on
     * mul_mat_vec_mma, the layer norms launched apart; more on cuBLASLt
     * (an H100, twenty-fifth session: the step -3.6% at batch 24, -8.4% at
     * 32; +8.1% at 40, +7.6% at 64, so not there) */
    c->matvec_mma_max = tg_cuda_env_int("CT_CUDA_MATVEC_MMA_MAX", TG_CUDA_MATVEC_MMA_MAX);
    c->matvec_tile16 = tg_cuda_env_int("CT_CUDA_MATVEC_TILE16", 1) != 0;
    c->matvec_tile_max = tg_cuda_env_int("CT_CUDA_MATVEC_TILE_MAX", 256);
    c->matvec_ln_max = tg_cuda_env_int("CT_CUDA_MATVEC_LN_MAX", TG_MVM_MAXM);
    c->matvec_loop = tg_cuda_env_int("CT_CUDA_MATVEC_LOOP", 3);
    c->matvec_prefetch = tg_cuda_env_int("CT_CUDA_MATVEC_PREFETCH", 1) != 0;
    c->matvec_norm1 = tg_cuda_env_int("CT_CUDA_MATVEC_NORM1", 2);
    c->matvec_norm_block = tg_cuda_env_int("CT_CUDA_MATVEC_NORM_BLOCK", 1) != 0;
    c->attn_prefetch = tg_cuda_env_int("CT_CUDA_ATTN_PREFETCH", 1) != 0;
    c->attn_pf_ahead = tg_cuda_env_int("CT_CUDA_ATTN_PREFETCH_AHEAD", 0);
    c->matvec_epi_early = tg_cuda_env_int("CT_CUDA_MATVEC_EPI_EARLY", 1) != 0;
    c->matvec_r8 = tg_cuda_env_int("CT_CUDA_MATVEC_R8", 0) != 0;
    c->matvec_staged = tg_cuda_env_int("CT_CUDA_MATVEC_STAGED", 0);
    if (c->matvec_staged < 0) c->matvec_staged = 0;
    c->matvec_ln_stage = tg_cuda_env_int("CT_CUDA_MATVEC_LN_STAGE", 1);
    c->matvec_cl = tg_cuda_env_int("CT_CUDA_MATVEC_CL", 0) != 0;
    c->matvec_cl_min = tg_cuda_env_int("CT_CUDA_MATVEC_CL_MIN", TG_MVM_MAXM + 1);
    if (c->matvec_cl_min < 1) c->matvec_cl_min = 1;
    c->attn_split_tq = tg_cuda_env_int("CT_CUDA_ATTN_SPLIT_TQ", TG_ATS_TQ);
    /* both written in the fifteenth session, measured in the sixteenth (an
     * H100, ncu, the prefill at batch 8): attn_split_kt 97-99 us a call
     * against attn_split's 72-73, so off; the lone bias add 37.9 us against
     * ew_binary's 122.7, so on (NOTES.md) */
    c->use_attn_split_kt = tg_cuda_env_int("CT_CUDA_ATTN_SPLIT_KT", 0) != 0;
    c->use_bias_add_c4 = tg_cuda_env_int("CT_CUDA_BIAS_ADD_C4", 1) != 0;
    if (c->attn_split_tq < 1 || c->attn_split_tq > TG_ATS_TQ) c->attn_split_tq = TG_ATS_TQ;
    if (c->matvec_mma_min < 1) c->matvec_mma_min = 1;
    /* 1 to 256 columns (4 wide blocks): past that the products are the
     * encoder's, where cuBLASLt's tiles reuse the weights */
    if (c->matvec_mma_max < 1 || c->matvec_mma_max > 256) c->matvec_mma_max = TG_CUDA_MATVEC_MMA_MAX;
    c->use_residual = tg_cuda_env_int("CT_CUDA_FUSE_RESIDUAL", 1) != 0;
    c->use_scale = tg_cuda_env_int("CT_CUDA_FUSE_SCALE", 1) != 0;
    c->use_ln_matvec = tg_cuda_env_int("CT_CUDA_FUSE_NORM", 1) != 0;
    c->use_conv_glu = tg_cuda_env_int("CT_CUDA_FUSE_CONV", 1) != 0;
    c->use_bias_mask = tg_cuda_env_int("CT_CUDA_FUSE_BIAS_MASK", 1) != 0;
    c->use_sub_front = tg_cuda_env_int("CT_CUDA_FUSE_SUB", 1) != 0;
    c->conv_fast = tg_cuda_env_int("CT_CUDA_CONV_FAST", 1) != 0;
    c->norm_prefetch = tg_cuda_env_int("CT_CUDA_NORM_PREFETCH", 1) != 0;
    c->use_embed_norm = tg_cuda_env_int("CT_CUDA_FUSE_EMBED", 1) != 0;
    c->use_norm_pair = tg_cuda_env_int("CT_CUDA_FUSE_NORM_PAIR", 1) != 0;
    c->use_kv_rows = tg_cuda_env_int("CT_CUDA_FUSE_KV", 1) != 0;
    c->use_pick = tg_cuda_env_int("CT_CUDA_FUSE_PICK", 1) != 0;
    /* a decoder step's launches as the phases of one kernel (cuda_chain.c;
     * the mma products' body needs sm_80) */
    c->chain_mode = props->cc_major >= 8 ? tg_cuda_env_int("CT_CUDA_STEP_CHAIN", 0) != 0 : 0;
    c->chain_warps = tg_cuda_env_int("CT_CUDA_STEP_CHAIN_WARPS", 16) == 8 ? 8 : 16;
    c->chain_pf = tg_cuda_env_int("CT_CUDA_STEP_CHAIN_PREFETCH", 1) != 0;
    c->chain_coop = tg_cuda_env_int("CT_CUDA_STEP_CHAIN_COOP", 1) != 0;
    c->chain_max = tg_cuda_env_int("CT_CUDA_STEP_CHAIN_MAX", TG_CHAIN_MAX);
    if (c->chain_max < 2 || c->chain_max > TG_CHAIN_LONG) c->chain_max = TG_CHAIN_MAX;
    c->use_attn_decode_wide = tg_cuda_env_int("CT_CUDA_ATTN_DECODE_WIDE", 1) != 0;
    c->use_attn_decode_wcl = tg_cuda_env_int("CT_CUDA_ATTN_DECODE_WCL", 1) != 0;
    c->attn_decode_wide_min = tg_cuda_env_int("CT_CUDA_ATTN_DECODE_WIDE_MIN", 0);
    c->attn_decode_wide_short = tg_cuda_env_int("CT_CUDA_ATTN_DECODE_WIDE_SHORT", 1) != 0;
    c->matvec_columns = tg_cuda_env_int("CT_CUDA_MATVEC_COLUMNS", 2);
    if (c->matvec_columns < 1) c->matvec_columns = 1;
    if (c->matvec_columns > TG_MV_MAXM) c->matvec_columns = TG_MV_MAXM;
    c->use_attn_decode = tg_cuda_env_int("CT_CUDA_ATTN_DECODE", 1) != 0;
    c->attn_decode_fill = tg_cuda_env_int("CT_CUDA_ATTN_DECODE_FILL", 2);
    if (c->attn_decode_fill < 0 || c->attn_decode_fill > 2) c->attn_decode_fill = 2;
}

/* Errors after which the driver refuses all further work in this process
 * (a kernel fault): no backend made again in the process can recover. */
static bool context_lost(CUresult r) {
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
        return true;
    default:
        return false;
    }
}

tg_status tg_cuda_ctx_fail(tg_cuda_ctx *c, CUresult r, const char *what) {
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return tg_status_new(TG_ERR_NO_MEMORY, "%s: %s: out of device memory", c->name, what);
    bool lost = context_lost(r);
    if (lost) c->dev->failed = true;
    if (!c->error) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s: %s", what, tg_cuda_result_text(r));
        c->error = tg_strdup(buf);
        TG_ERROR("%s: device error, the context is now failed: %s", c->name, buf);
    }
    return tg_status_new(TG_ERR_DEVICE, "%s: %s: %s (%s)", c->name, what, tg_cuda_result_text(r),
                         lost ? "a GPU fault: the driver refuses further work in this process; restart it"
                              : "the backend has failed; free and recreate it");
}

tg_status tg_cuda_ctx_sticky(const tg_cuda_ctx *c) {
    if (!c->error) return NULL;
    return tg_status_new(TG_ERR_DEVICE, "%s: the CUDA context failed earlier (%s); free and recreate the backend",
                         c->name, c->error);
}

tg_status tg_cuda_ctx_wait(tg_cuda_ctx *c, CUstream s) {
    const tg_cu_api *cu = c->dev->cu;
    CUresult r = cu->cuEventRecord(c->fork_ev, s);
    if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "cuEventRecord");
    tg_cuda_event e = {c->dev, c->fork_ev};
    tg_status st = tg_cuda_event_synchronize(&e, c->sync_timeout_ms);
    if (st && tg_status_code(st) == TG_ERR_DEVICE) {
        tg_status_free(st);
        r = cu->cuEventQuery(c->fork_ev);
        return tg_cuda_ctx_fail(c, r, "running the graph");
    }
    return tg_status_wrap(st, "%s", c->name);
}

/* ---------------------------------------------------------- graph cache */

/* Two hashes of a graph: `topo` covers what a CUDA-graph update keeps
 * (ops, types, shapes, strides, params, which sources), `full` adds every
 * address, so an equal `full` means the captured graph replays as is. Runs
 * on every compute, so it hashes a compact word record per node (no unused
 * sources, nothing to clear first). */
static void graph_hash(const tg_cuda_ctx *c, tg_graph *g, uint64_t *topo, uint64_t *full) {
    uint64_t ht = 0x9e3779b97f4a7c15ull ^ (uint64_t)g->n_nodes, hf = ht;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *n = g->nodes[i];
        _Static_assert(sizeof n->op_params == TG_MAX_OP_PARAMS * 4 && TG_MAX_OP_PARAMS % 2 == 0, "params");
        uint64_t w[1 + 8 + TG_MAX_OP_PARAMS / 2 + TG_MAX_SRC * 9];
        int k = 0;
        w[k++] = (uint64_t)n->op | (uint64_t)n->type << 16 | (uint64_t)(n->flags & TG_FLAG_OUTPUT) << 32;
        for (int d = 0; d < 4; d++) {
            w[k++] = (uint64_t)n->ne[d];
            w[k++] = (uint64_t)n->nb[d];
        }
        memcpy(&w[k], n->op_params, sizeof n->op_params);
        k += TG_MAX_OP_PARAMS / 2; /* int32 params, two to a word */
        for (int s = 0; s < TG_MAX_SRC; s++) {
            const tg_tensor *t = n->src[s];
            if (!t) {
                w[k++] = 0;
                continue;
            }
            /* a weight source changes the kernels' arguments (loads before
             * the wait: w_early, TG_MV_EPI_EARLY), so it is part of the
             * topology: a graph of the same shapes and addresses whose
             * tensors are not weights must not replay the capture */
            const tg_tensor *root = t;
            while (root->view_src) root = root->view_src;
            w[k++] = 1 | (uint64_t)t->type << 8 | (uint64_t)((root->flags & TG_FLAG_WEIGHT) != 0) << 16;
            for (int d = 0; d < 4; d++) {
                w[k++] = (uint64_t)t->ne[d];
                w[k++] = (uint64_t)t->nb[d];
            }
            hf = tg_hash_combine(hf, (uint64_t)(uintptr_t)t->data);
        }
        hf = tg_hash_combine(hf, (uint64_t)(uintptr_t)n->data);
        ht = tg_hash_combine(ht, tg_hash64(w, (size_t)k * sizeof w[0], 17));
    }
    *topo = ht;
    *full = tg_hash_combine(tg_hash_combine(hf, ht), (uint64_t)c->scratch);
}

static void graphs_drop(tg_cuda_ctx *c) {
    for (int i = 0; i < CUDA_MAX_GRAPHS; i++) {
        if (c->graphs[i].exec) c->dev->cu->cuGraphExecDestroy(c->graphs[i].exec);
        memset(&c->graphs[i], 0, sizeof c->graphs[i]);
    }
}

static cuda_graph_entry *graph_entry(tg_cuda_ctx *c, uint64_t topo) {
    cuda_graph_entry *lru = &c->graphs[0];
    for (int i = 0; i < CUDA_MAX_GRAPHS; i++) {
        cuda_graph_entry *e = &c->graphs[i];
        if (e->n_seen && e->topo == topo) return e;
        if (e->last_use < lru->last_use) lru = e;
    }
    if (lru->exec) c->dev->cu->cuGraphExecDestroy(lru->exec);
    memset(lru, 0, sizeof *lru);
    lru->topo = topo;
    return lru;
}

/* ------------------------------------------------------------- compute */

/* The bytes the launch of the group at node j computes, for the rule on
 * large runs: its last node's result, or for a product whose group ends in
 * a fused cache write (which the last node spans: the whole cache) the
 * product's. */
static size_t group_bytes(const tg_graph *g, const tg_cuda_plan *p, int j) {
    for (int k = j; k < j + p->fuse[j] - 1; k++)
        if (p->writes[k]) return tg_nbytes(g->nodes[k]);
    return tg_nbytes(g->nodes[j + p->fuse[j] - 1]);
}

static tg_status ensure_scratch(tg_cuda_ctx *c, tg_graph *g) {
    size_t need = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        size_t s = tg_cuda_op_scratch(c, g->nodes[i]);
        if (s > need) need = s;
    }
    if (need <= c->scratch_size) return NULL;
    const tg_cu_api *cu = c->dev->cu;
    if (c->scratch) {
        CUresult r = cu->cuStreamSynchronize(c->stream);
        if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "cuStreamSynchronize");
        cu->cuMemFree(c->scratch);
        tg_backend_note_memory(c->backend, -(int64_t)c->scratch_size);
        c->scratch = 0;
        c->scratch_size = 0;
        graphs_drop(c); /* they hold the old address */
    }
    size_t sz = need + need / 4;
    const double t0 = tg_clock_now_ms();
    CUresult r = cu->cuMemAlloc(&c->scratch, sz);
    c->backend->stats.alloc_us += (tg_clock_now_ms() - t0) * 1e3; /* a buffer of the backend's own */
    if (r != CUDA_SUCCESS) {
        c->scratch = 0;
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: cannot allocate %.1f MiB of scratch memory: %s", c->name,
                             sz / 1048576.0, tg_cuda_result_text(r));
    }
    c->scratch_size = sz;
    tg_backend_note_memory(c->backend, (int64_t)sz);
    return NULL;
}

/* The output size from which a node counts as large for concurrency. */
#define CUDA_RUN_BIG_BYTES ((size_t)1 << 20)

static tg_status join_streams(tg_cuda_ctx *c) {
    const tg_cu_api *cu = c->dev->cu;
    for (int k = 0; k < CUDA_N_STREAMS - 1; k++) {
        CUresult r = cu->cuEventRecord(c->join_ev[k], c->aux[k]);
        if (r == CUDA_SUCCESS) r = cu->cuStreamWaitEvent(c->stream, c->join_ev[k], 0);
        if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "joining streams");
    }
    return NULL;
}

/* Enqueues the nodes. With `streams`, runs of independent nodes are spread
 * over the auxiliary streams, forked from and joined back into the main
 * stream by events (inside captures these become the CUDA graph's edges).
 * Whatever happens, everything enqueued is ordered before the main stream's
 * later work when this returns. */
static tg_status encode_all_inner(tg_cuda_ctx *c, tg_graph *g, const tg_cuda_plan *p, bool streams, cuda_prof *pf,
                                  int *out_done);

static tg_status encode_all(tg_cuda_ctx *c, tg_graph *g, const tg_cuda_plan *p, bool streams, cuda_prof *pf,
                            int *out_done) {
    c->emit = p->emit;
    c->mask16 = p->mask16;
    c->bias16 = p->bias16;
    tg_status st = encode_all_inner(c, g, p, streams, pf, out_done);
    c->emit = NULL;
    c->mask16 = NULL;
    c->bias16 = NULL;
    return st;
}

static tg_status encode_loop(tg_cuda_ctx *c, tg_graph *g, const tg_cuda_plan *p, bool streams, cuda_prof *pf, bool chains,
                             int *out_done);

static tg_status encode_all_inner(tg_cuda_ctx *c, tg_graph *g, const tg_cuda_plan *p, bool streams, cuda_prof *pf,
                                  int *out_done) {
    *out_done = 0;
    c->prev_n = -1; /* the launch before the first is the last compute's */
    /* step chains (cuda_chain.c) on the main stream, each launch apart when
     * profiled or checked */
    const bool chains = c->chain_mode && !tg_cuda_prof_direct(pf) && c->check_finite <= 0;
    tg_cuda_chain_drop(c);
    tg_status st = encode_loop(c, g, p, streams, pf, chains, out_done);
    if (!st) st = tg_cuda_chain_flush(c);
    c->chain_may = false;
    tg_cuda_chain_drop(c);
    return st;
}

static tg_status encode_loop(tg_cuda_ctx *c, tg_graph *g, const tg_cuda_plan *p, bool streams, cuda_prof *pf, bool chains,
                             int *out_done) {
    const tg_cu_api *cu = c->dev->cu;
    tg_backend *b = c->backend;
    int n = g->n_nodes;
    tg_status st = NULL;
    int cur_run = -2, slot = 0;
    bool forked = false, prev_forked = false;
    for (int i = 0; i < n;) {
        tg_tensor *t = g->nodes[i];
        if (tg_op_is_view(t->op)) {
            i++;
            continue;
        }
        /* Segments of 32 nodes: the abort callback is asked between them. */
        if (!c->capturing && i > 0 && (i % 32) == 0 && tg_backend_should_abort(b)) {
            *out_done = i;
            if ((st = tg_cuda_chain_flush(c))) return st; /* the nodes before i are done */
            if (forked && (st = join_streams(c))) return st;
            return tg_status_new(TG_ERR_ABORTED, "%s: aborted by the caller after %d of %d nodes", c->name, i, n);
        }
        int len = p->fuse[i] > 0 ? p->fuse[i] : 1;
        CUstream s = c->stream;
        /* products, their norms and attentions may join a step chain; before
         * anything else (and before a run forks streams, below) what the
         * chain recorded is launched */
        const bool may = chains && (t->op == TG_OP_MUL_MAT || t->op == TG_OP_LAYER_NORM || t->op == TG_OP_ATTENTION);
        if (!may && (st = tg_cuda_chain_flush(c))) {
            *out_done = i;
            if (forked && !c->error) tg_status_free(join_streams(c));
            return tg_status_wrap(st, "%s: before node %d '%s'", c->name, i, t->name);
        }
        if (streams && p->run[i] != cur_run) {
            if (forked) {
                if ((st = join_streams(c))) return st;
                forked = false;
            }
            cur_run = p->run[i];
            slot = 0;
            /* Only nodes that fill a good part of the GPU gain from running
             * beside each other; for small ones the fork and join cost more
             * than the overlap, and their events break the programmatic
             * dependent launch chain (a full-size decoder step: 0.77 -> 0.72
             * ms at batch 1, 1.12 -> 0.98 at batch 8 launched in turn), so a
             * run with fewer than two large launches stays on the main
             * stream. A fused group is one launch (counted at its first
             * node, by what its last node writes). */
            int run_big = 0;
            for (int j = i; j < n && (p->run[j] == cur_run || p->run[j] < 0); j++)
                run_big += p->run[j] == cur_run && p->fuse[j] > 0 && group_bytes(g, p, j) >= CUDA_RUN_BIG_BYTES;
            if (run_big > 1) {
                /* no chain is recorded while forked (chain_may), so one
                 * recorded now must go before the fork */
                if ((st = tg_cuda_chain_flush(c))) {
                    *out_done = i;
                    return tg_status_wrap(st, "%s: before node %d '%s'", c->name, i, t->name);
                }
                CUresult r = cu->cuEventRecord(c->fork_ev, c->stream);
                for (int k = 0; k < CUDA_N_STREAMS - 1 && r == CUDA_SUCCESS; k++)
                    r = cu->cuStreamWaitEvent(c->aux[k], c->fork_ev, 0);
                if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "forking streams");
                forked = true;
            }
        }
        if (forked) {
            s = slot == 0 ? c->stream : c->aux[slot - 1];
            slot = (slot + 1) % CUDA_N_STREAMS;
        }
        tg_cuda_prof_node_begin(c, pf, i, s);
        c->last_kernel = NULL;
        memset(c->last_grid, 0, sizeof c->last_grid);
        c->last_block = c->last_smem = 0;
        RANGE_PUSH(tg_op_name(t->op));
        if (forked || prev_forked) c->prev_n = -1; /* the launch before may be on another stream */
        c->chain_may = may && !forked;
        tg_cuda_next_prefetch(c, g->nodes, n, i, len);
        st = tg_cuda_op_encode(c, s, g->nodes, i, len);
        RANGE_POP();
        tg_cuda_record_launch(c, g->nodes, p->writes, i, len);
        prev_forked = forked;
        if (st) {
            *out_done = i;
            if (forked && !c->error) tg_status_free(join_streams(c));
            return tg_status_wrap(st, "%s: node %d '%s' (%s)", c->name, i, t->name, tg_op_name(t->op));
        }
        tg_cuda_prof_node_end(c, pf, i, s, t, len, p->run[i]);
        if (c->check_finite > 0 && !c->capturing) {
            for (int k = i; k < i + len - 1; k++) /* what the launch also stored */
                if (p->writes[k]) tg_cuda_check_finite(c, s, g, p->emit, k);
            tg_cuda_check_finite(c, s, g, p->emit, i + len - 1);
        }
        i += len;
    }
    c->chain_may = false;
    if (forked && (st = join_streams(c))) return st;
    *out_done = n;
    return NULL;
}

/* Captures the graph's launches; NULL graph when capture is not possible. */
static tg_status capture(tg_cuda_ctx *c, tg_graph *g, const tg_cuda_plan *p, CUgraph *out_graph) {
    const tg_cu_api *cu = c->dev->cu;
    *out_graph = NULL;
    CUresult r = cu->cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_RELAXED);
    if (r != CUDA_SUCCESS) return NULL;
    c->capturing = true;
    cuda_prof none = {0};
    int done;
    tg_status st = encode_all(c, g, p, c->use_concurrency, &none, &done);
    c->capturing = false;
    CUgraph graph = NULL;
    r = cu->cuStreamEndCapture(c->stream, &graph);
    if (st || r != CUDA_SUCCESS) {
        if (graph) cu->cuGraphDestroy(graph);
        if (st) {
            /* A capture error is not a device error: launch directly instead. */
            tg_free(c->error);
            c->error = NULL;
            c->dev->failed = false;
            TG_DEBUG("%s: capture failed (%s); launching directly", c->name, tg_status_message(st));
            tg_status_free(st);
        }
        return NULL;
    }
    *out_graph = graph;
    return NULL;
}

/* Launches e's executable graph as it stands. */
static tg_status replay(tg_cuda_ctx *c, cuda_graph_entry *e) {
    CUresult r = c->dev->cu->cuGraphLaunch(e->exec, c->stream);
    if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "cuGraphLaunch");
    e->n_replays++;
    e->n_updates_in_row = 0;
    c->n_graph_hits++;
    return NULL;
}

/* A sighting whose previous one had the same addresses: captured into e's
 * executable graph (instantiated, or updated in place when only addresses
 * changed since the capture) and launched. *out_done false: capture was not possible, launch
 * directly (e may now be marked to always launch directly). */
static tg_status encode_captured(tg_cuda_ctx *c, tg_graph *g, const tg_cuda_plan *p, cuda_graph_entry *e, uint64_t full,
                                 bool *out_done) {
    const tg_cu_api *cu = c->dev->cu;
    *out_done = false;
    if (e->exec && e->full == full) {
        tg_status st = replay(c, e);
        *out_done = st == NULL;
        return st;
    }
    CUgraph graph;
    /* the graph's own time: what the capture's encode readies, plans or
     * first-launches is counted in those parts, not here */
    double t0 = tg_clock_now_ms(), nested0 = tg_cuda_library_ms(c->dev) + c->plan_ms + c->lt_first_ms;
    tg_status st = capture(c, g, p, &graph);
    if (st || !graph) {
        e->direct = true;
        return st;
    }
    CUresult r;
    if (e->exec) {
        CUgraphExecUpdateResultInfo info;
        r = cu->cuGraphExecUpdate(e->exec, graph, &info);
        if (r != CUDA_SUCCESS) {
            cu->cuGraphExecDestroy(e->exec);
            e->exec = NULL;
        } else {
            e->n_updates++;
            e->n_updates_in_row++;
            c->n_graph_updates++;
        }
    }
    if (!e->exec) {
        r = cu->cuGraphInstantiate(&e->exec, graph, 0);
        if (r != CUDA_SUCCESS) {
            e->exec = NULL;
            e->direct = true;
            cu->cuGraphDestroy(graph);
            return NULL;
        }
        c->n_graph_captures++;
    }
    cu->cuGraphDestroy(graph);
    c->graph_make_ms +=
        tg_clock_now_ms() - t0 - (tg_cuda_library_ms(c->dev) + c->plan_ms + c->lt_first_ms - nested0);
    e->full = full;
    /* Updated again and again with no replay between (addresses that
     * repeat once and then move, A A B B C C): the captures cost what direct
     * launches would, plus the updates, so this topology launches directly
     * from now. */
    if (e->n_updates_in_row >= 3 && e->n_replays == 0) e->direct = true;
    r = cu->cuGraphLaunch(e->exec, c->stream);
    if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "cuGraphLaunch");
    *out_done = true;
    return NULL;
}

/* The graph-cache entry of g's topology, counted as seen, and g's full
 * hash; NULL where this compute launches directly whatever it is (capture
 * off, or the profile or the dump wanting every launch). *out_again: the
 * sighting before this one had the same addresses. */
static cuda_graph_entry *graph_lookup(tg_cuda_ctx *c, tg_graph *g, uint64_t *out_full, bool *out_again) {
    *out_full = 0;
    *out_again = false;
    if (!c->use_graphs || c->profile || c->dump_path || c->check_finite > 0) return NULL;
    uint64_t topo;
    graph_hash(c, g, &topo, out_full);
    cuda_graph_entry *e = graph_entry(c, topo);
    e->last_use = c->n_computes;
    *out_again = e->n_seen > 0 && e->seen_full == *out_full;
    e->seen_full = *out_full;
    e->n_seen++;
    return e;
}

static bool exact_repeat(const cuda_graph_entry *e, uint64_t full) {
    return e && e->exec && e->full == full && !e->direct;
}

/* Every node launched directly; after a failure nothing of this compute is
 * left running, so the context stays usable. */
static tg_status encode_direct(tg_cuda_ctx *c, tg_graph *g, const tg_cuda_plan *p, cuda_prof *pf) {
    int n_done;
    c->n_direct++;
    tg_status st = encode_all(c, g, p, c->use_concurrency, pf, &n_done);
    if (st) tg_status_free(c->error ? NULL : tg_cuda_ctx_wait(c, c->stream));
    return st;
}

/* Plans g (readers, fusions, concurrency runs) and enqueues it: captured
 * into a CUDA graph when the topology's sighting before this one had the
 * same addresses (again), else (or when capture fails) launched directly;
 * then waits for it. A capture costs the direct launches' host time, and
 * the GPU starts only when it is launched, so it pays only where the next
 * call replays it: a graph whose addresses changed since its last sighting
 * (the encoder when the scheduler's arena moved between calls) launches
 * directly, host and GPU overlapping. t0: when the compute began, for the
 * profile. */
static tg_status plan_and_encode(tg_cuda_ctx *c, tg_graph *g, cuda_graph_entry *e, uint64_t full, bool again,
                                 double t0) {
    tg_cuda_plan p;
    tg_status st = tg_cuda_plan_make(c, g, &p);
    if (st) return st;
    cuda_prof pf;
    tg_cuda_prof_begin(c, g, p.n_runs, &pf);
    bool done = false;
    const char *mode = "direct";
    if (e && !tg_cuda_prof_direct(&pf) && again && !e->direct) {
        if ((st = encode_captured(c, g, &p, e, full, &done))) goto out;
        if (done) mode = "graph";
    }
    if (!done && (st = encode_direct(c, g, &p, &pf))) goto out;
    double t_submit = tg_cuda_now_us() - t0;
    tg_backend_note_submit(c->backend, t_submit);
    tg_cuda_prof_stop(c, &pf);
    if (!(st = tg_cuda_ctx_wait(c, c->stream))) tg_cuda_prof_report(c, g, &pf, mode, t_submit, t0);
out:
    tg_cuda_prof_end(c, &pf);
    tg_cuda_plan_free(&p);
    return st;
}

/* Test hook (tg_cuda_test_fault_next): 1 = a launch the driver rejects
 * (invalid block size), 2 = a kernel that writes outside any allocation. */
static tg_status launch_test_fault(tg_cuda_ctx *c) {
    int kind = c->force_fault;
    c->force_fault = 0;
    CUfunction fn;
    tg_status st = tg_cuda_kernel(c->dev, "probe.cu", "", "fault", &fn);
    if (st) return st;
    tg_args_fault a = {.out = c->scratch ? c->scratch : c->lt_ws};
    void *params[] = {&a};
    CUresult r = c->dev->cu->cuLaunchKernel(fn, 1, 1, 1, kind == 1 ? 4096 : 1, 1, 1, 0, c->stream, params, NULL);
    if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "fault");
    return tg_cuda_ctx_wait(c, c->stream);
}

/* An exact repeat of a captured graph replays it before anything else is
 * done on the host (the decoder step's path), and returns without waiting
 * where the scheduler says the caller will (b->enqueue_only); anything
 * else is planned and encoded, captured or direct, and waited for. */
static tg_status graph_compute(tg_backend *b, tg_graph *g) {
    tg_cuda_ctx *c = ctx_of(b);
    tg_status st = tg_cuda_ctx_sticky(c);
    if (st || (st = tg_cuda_device_bind(c->dev))) return st;
    double t0 = tg_cuda_now_us();
    c->n_computes++;
    if (c->force_fault) return launch_test_fault(c);
    if (g->n_nodes == 0) return NULL;
    if ((st = ensure_scratch(c, g))) return st;
    if (tg_backend_should_abort(b))
        return tg_status_new(TG_ERR_ABORTED, "%s: aborted by the caller before the first node", c->name);
    uint64_t full;
    bool again;
    cuda_graph_entry *e = graph_lookup(c, g, &full, &again);
    if (exact_repeat(e, full)) {
        st = replay(c, e);
        tg_backend_note_submit(b, tg_cuda_now_us() - t0);
        /* queued only, when the scheduler asked (tg_sched_compute_async):
         * a decoder queues its next step while this one runs */
        return st || b->enqueue_only ? st : tg_cuda_ctx_wait(c, c->stream);
    }
    return plan_and_encode(c, g, e, full, again, t0);
}

static tg_status cuda_graph_compute(tg_backend *b, tg_graph *g) {
    RANGE_PUSH("tg cuda graph compute");
    tg_cuda_ctx *c = ctx_of(b);
    tg_backend_stats *s = &b->stats;
    /* the prewarm's thread owns the plans until now: stopped after its
     * current item (what it has not reached, this compute makes as it
     * needs it; a session's upload usually outlasts the whole list), the
     * wait counted as this compute's first-use time (and submit time) */
    const double wait = tg_cuda_prewarm_join(c, true);
    tg_backend_note_submit(b, 1e3 * wait);
    s->setup_wait_us += 1e3 * wait;
    /* first-use host time inside this compute, by part, into the stats
     * (the kernel table is the device's: another context's loads in the
     * meantime would count here too; a backend has one context a device) */
    double k0 = tg_cuda_library_ms(c->dev), p0 = c->plan_ms, f0 = c->lt_first_ms, g0 = c->graph_make_ms;
    tg_status st = graph_compute(b, g);
    double k = tg_cuda_library_ms(c->dev) - k0, p = c->plan_ms - p0, f = c->lt_first_ms - f0, gr = c->graph_make_ms - g0;
    s->setup_kernels_us += 1e3 * k;
    s->setup_plans_us += 1e3 * p;
    s->setup_first_us += 1e3 * f;
    s->setup_graphs_us += 1e3 * gr;
    s->setup_us += 1e3 * (wait + k + p + f + gr);
    RANGE_POP();
    return st;
}

static tg_status cuda_synchronize(tg_backend *b) {
    tg_cuda_ctx *c = ctx_of(b);
    tg_status st = tg_cuda_ctx_sticky(c);
    if (st || (st = tg_cuda_device_bind(c->dev))) return st;
    return tg_cuda_ctx_wait(c, c->stream);
}

/* dst lives in this backend; src in another backend's buffer. */
static tg_status cuda_copy_tensor(tg_backend *b, const tg_tensor *src, tg_tensor *dst) {
    tg_cuda_ctx *c = ctx_of(b);
    const tg_cu_api *cu = c->dev->cu;
    size_t n = tg_nbytes(src);
    tg_status st = tg_cuda_ctx_sticky(c);
    if (st || (st = tg_cuda_device_bind(c->dev))) return st;
    const tg_tensor *sr = src, *dr = dst;
    while (sr->view_src) sr = sr->view_src;
    while (dr->view_src) dr = dr->view_src;
    tg_buffer *sb = sr->buffer, *db = dr->buffer;
    if (!tg_cuda_is_buffer(db)) return tg_status_new(TG_ERR_INTERNAL, "%s: copy_tensor into a foreign buffer", c->name);
    if (tg_cuda_is_buffer(sb)) {
        tg_cuda_ctx *sc = ((cuda_buffer *)sb->impl)->ctx;
        if ((st = tg_cuda_ctx_sticky(sc))) return st;
        /* Ordered by events: after the source's queued work, before ours. */
        CUresult r = cu->cuCtxSetCurrent(sc->dev->ctx);
        if (r == CUDA_SUCCESS) r = cu->cuEventRecord(sc->join_ev[0], sc->stream);
        if (r == CUDA_SUCCESS) r = cu->cuCtxSetCurrent(c->dev->ctx);
        if (r == CUDA_SUCCESS) r = cu->cuStreamWaitEvent(c->stream, sc->join_ev[0], 0);
        if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "ordering a copy between contexts");
        CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst->data, s = (CUdeviceptr)(uintptr_t)src->data;
        if (sc->dev == c->dev) r = cu->cuMemcpyDtoDAsync(d, s, n, c->stream);
        else r = cu->cuMemcpyPeerAsync(d, c->dev->ctx, s, sc->dev->ctx, n, c->stream);
        if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "copy between GPUs");
        /* The source's later work must not overwrite it before we read. */
        if ((r = cu->cuEventRecord(c->join_ev[0], c->stream)) == CUDA_SUCCESS &&
            (r = cu->cuCtxSetCurrent(sc->dev->ctx)) == CUDA_SUCCESS)
            r = cu->cuStreamWaitEvent(sc->stream, c->join_ev[0], 0);
        cu->cuCtxSetCurrent(c->dev->ctx);
        if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "ordering a copy between contexts");
        return NULL;
    }
    if (sb && sb->host) return db->iface->set(db, dst->data, src->data, n);
    void *tmp = tg_malloc(n ? n : 1);
    if (!tmp) return tg_status_new(TG_ERR_NO_MEMORY, "%s: copy bounce buffer of %zu bytes", c->name, n);
    st = tg_tensor_get(src, tmp, 0, n);
    if (!st) st = db->iface->set(db, dst->data, tmp, n);
    tg_free(tmp);
    return st;
}

/* ------------------------------------------------------------- backend */

static const char *cuda_name(tg_backend *b) { return ctx_of(b)->name; }

static size_t cuda_alignment(tg_backend *b) { return 256; }

static bool cuda_supports_op(tg_backend *b, const tg_tensor *node) {
    return tg_cuda_supports(ctx_of(b)->dev, node);
}

static void ctx_destroy(tg_cuda_ctx *c) {
    if (!c) return;
    tg_cuda_device *dev = c->dev;
    const tg_cu_api *cu = dev->cu;
    cu->cuCtxSetCurrent(dev->ctx);
    if (c->stream && !c->error) cu->cuStreamSynchronize(c->stream);
    (void)tg_cuda_prewarm_join(c, true);
    if (!c->error && c->n_computes > 0 && tg_cuda_prewarm_enabled()) {
        tg_status ws = tg_cuda_prewarm_save(c);
        if (ws) {
            /* a read-only or full cache: the next start is not prewarmed,
             * nothing else (not worth a warning at every close) */
            TG_DEBUG("%s: the prewarm list: %s", c->name, tg_status_message(ws));
            tg_status_free(ws);
        }
    }
    tg_cuda_debug_report(c);
    TG_DEBUG("%s: first-use host time: %d matmul plans made in %.1f ms, %d first launches %.1f ms; "
             "%d graphs captured (%d updated) in %.1f ms; kernels: %d files ready in %.1f ms (%d compiled, %d from "
             "the cache, %d precompiled)",
             c->name, c->n_plans, c->plan_ms, c->n_lt_first, c->lt_first_ms, c->n_graph_captures,
             c->n_graph_updates, c->graph_make_ms,
             dev->n_mods, tg_cuda_library_ms(dev), dev->n_compiled, dev->n_cache_hits, dev->n_precompiled);
    graphs_drop(c);
    tg_free(c->prewarm_list);
    tg_cuda_mm_free(c);
    if (c->scratch) cu->cuMemFree(c->scratch);
    tg_cuda_chain_free(c);
    if (c->lt_ws) cu->cuMemFree(c->lt_ws);
    if (c->stage) cu->cuMemFreeHost(c->stage);
    for (int k = 0; k < CUDA_STAGE_SLOTS; k++)
        if (c->stage_ev[k]) cu->cuEventDestroy(c->stage_ev[k]);
    if (c->fork_ev) cu->cuEventDestroy(c->fork_ev);
    for (int k = 0; k < CUDA_N_STREAMS - 1; k++) {
        if (c->join_ev[k]) cu->cuEventDestroy(c->join_ev[k]);
        if (c->aux[k]) cu->cuStreamDestroy(c->aux[k]);
    }
    if (c->stream) cu->cuStreamDestroy(c->stream);
    tg_free(c->error);
    tg_free(c->dump_path);
    tg_free(c);
    tg_cuda_device_release(dev);
}

static void cuda_free(tg_backend *b) {
    if (!b) return;
    ctx_destroy(ctx_of(b));
    tg_free(b);
}

static const char *cuda_failed(tg_backend *b) { return ctx_of(b)->error; }

/* tg_backend_fail_after on this backend: a launch the driver rejects, as
 * tg_cuda_test_fault_next(b, 1), so the context fails by a real CUDA error. */
static void cuda_inject_fault(tg_backend *b) { ctx_of(b)->force_fault = 1; }

static const struct tg_backend_iface cuda_iface = {
    .name = cuda_name,
    .free = cuda_free,
    .is_cpu = false,
    .alignment = cuda_alignment,
    .buffer_alloc = tg_cuda_buffer_alloc,
    .buffer_from_host = tg_cuda_buffer_from_host,
    .host_alloc = tg_cuda_host_alloc,
    .host_free = tg_cuda_host_free,
    .supports_op = cuda_supports_op,
    .graph_compute = cuda_graph_compute,
    .synchronize = cuda_synchronize,
    .copy_tensor = cuda_copy_tensor,
    .failed = cuda_failed,
    .inject_fault = cuda_inject_fault,
};

tg_status tg_backend_cuda_new(int device, tg_backend **out_backend) {
    if (!out_backend) return tg_status_new(TG_ERR_INVALID_ARG, "tg_backend_cuda_new: NULL output");
    *out_backend = NULL;
    tg_cuda_device *dev;
    tg_status st = tg_cuda_device_acquire(device, &dev);
    if (st) return st;
    tg_cuda_ctx *c = tg_calloc(1, sizeof *c);
    tg_backend *b = tg_calloc(1, sizeof *b);
    if (!c || !b) {
        tg_free(c);
        tg_free(b);
        tg_cuda_device_release(dev);
        return tg_status_new(TG_ERR_NO_MEMORY, "cuda backend");
    }
    c->dev = dev;
    c->backend = b;
    b->iface = &cuda_iface;
    b->impl = c;
    snprintf(c->name, sizeof c->name, "cuda%d", device);
    const tg_cu_api *cu = dev->cu;
    CUresult r = CUDA_SUCCESS;
    if ((st = tg_cuda_device_bind(dev))) goto fail;
    if ((r = cu->cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) goto cu_fail;
    for (int k = 0; k < CUDA_N_STREAMS - 1; k++) {
        if ((r = cu->cuStreamCreate(&c->aux[k], CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) goto cu_fail;
        if ((r = cu->cuEventCreate(&c->join_ev[k], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) goto cu_fail;
    }
    if ((r = cu->cuEventCreate(&c->fork_ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) goto cu_fail;
    for (int k = 0; k < CUDA_STAGE_SLOTS; k++)
        if ((r = cu->cuEventCreate(&c->stage_ev[k], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) goto cu_fail;
    c->stage_size = (size_t)4 << 20;
    if ((r = cu->cuMemAllocHost(&c->stage, c->stage_size)) != CUDA_SUCCESS) goto cu_fail;
    if (dev->lt) {
        c->lt_ws_size = (size_t)32 << 20;
        if ((r = cu->cuMemAlloc(&c->lt_ws, c->lt_ws_size)) != CUDA_SUCCESS) goto cu_fail;
    }
    read_switches(c, &dev->props);
    if ((st = tg_cuda_chain_init(c))) goto fail;
    c->profile = tg_cuda_env_int("CT_CUDA_PROFILE", 0);
    c->debug = tg_cuda_env_int("CT_CUDA_DEBUG", 0);
    c->check_finite = tg_cuda_env_int("CT_CUDA_CHECK_FINITE", 0);
    c->sync_timeout_ms = tg_cuda_env_int("CT_CUDA_SYNC_TIMEOUT_MS", 600000);
    const char *dump = getenv("CT_CUDA_DUMP_GRAPH");
    if (dump && *dump) c->dump_path = tg_strdup(dump);
    c->dump_skip = tg_cuda_env_int("CT_CUDA_DUMP_GRAPH_SKIP", 0);
    /* the workspace counts as the backend's memory (tg_backend_stats) */
    tg_backend_note_memory(b, (int64_t)c->lt_ws_size);
    tg_cuda_prewarm_start(c); /* CT_CUDA_PREWARM: the last run's first-use work, on a thread */
    *out_backend = b;
    return NULL;
cu_fail:
    st = tg_cuda_status(r, "starting the CUDA backend");
fail:
    b->impl = c;
    cuda_free(b);
    return tg_status_wrap(st, "cuda%d", device);
}

/* ---------------------------------------------------------- test hooks */

tg_status tg_cuda_test_plan(const tg_cuda_props *props, tg_graph *g, int *out_fuse, uint8_t *out_writes,
                            tg_type *out_emit) {
    tg_cuda_device *dev = tg_calloc(1, sizeof *dev);
    tg_cuda_ctx *c = tg_calloc(1, sizeof *c);
    tg_status st = NULL;
    if (!dev || !c) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "tg_cuda_test_plan: out of memory");
        goto done;
    }
    dev->props = *props;
    c->dev = dev;
    snprintf(c->name, sizeof c->name, "cuda (plan only)");
    read_switches(c, props);
    tg_cuda_plan p;
    if ((st = tg_cuda_plan_make(c, g, &p))) goto done;
    for (int i = 0; i < g->n_nodes; i++) {
        out_fuse[i] = p.fuse[i];
        out_writes[i] = p.writes[i];
        if (out_emit) out_emit[i] = p.emit[i];
    }
    tg_cuda_plan_free(&p);
done:
    tg_free(c);
    tg_free(dev);
    return st;
}

void tg_cuda_test_fault_next(tg_backend *b, int kind) {
    if (b && b->iface == &cuda_iface) ctx_of(b)->force_fault = kind;
}

void tg_cuda_test_counts(tg_backend *b, int *out_compiled, int *out_cache_hits) {
    *out_compiled = *out_cache_hits = 0;
    if (!b || b->iface != &cuda_iface) return;
    *out_compiled = ctx_of(b)->dev->n_compiled;
    *out_cache_hits = ctx_of(b)->dev->n_cache_hits;
}

int tg_cuda_test_precompiled(tg_backend *b) {
    return b && b->iface == &cuda_iface ? ctx_of(b)->dev->n_precompiled : 0;
}

double tg_cuda_test_library_ms(tg_backend *b) {
    return b && b->iface == &cuda_iface ? tg_cuda_library_ms(ctx_of(b)->dev) : 0.0;
}

const tg_cuda_props *tg_cuda_backend_props(tg_backend *b) {
    return b && b->iface == &cuda_iface ? &ctx_of(b)->dev->props : NULL;
}
