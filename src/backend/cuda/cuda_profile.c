/*
 * cuda_profile.c: what the backend tells about its own work: the profile
 * (CT_CUDA_PROFILE=1: per compute, host submit time and GPU time; =2 adds
 * every node's kernel time from a pair of events around it, summed per op),
 * the graph dump (CT_CUDA_DUMP_GRAPH=path: the next computed graph's nodes,
 * kernels, launch shapes, and times when profiling), and the debug counts
 * printed when a backend is freed (CT_CUDA_DEBUG=1), and the kernels'
 * timer records (CT_CUDA_STAMPS=path, per device: its buffer, the modules
 * pointed at it, the file written at the device's end).
 *
 * One compute's profile is a cuda_prof the compute owns from begin to end:
 * begin opens the dump and makes the events, the node hooks record around
 * each launch, report prints once the stream has finished. Per-node events
 * and the dump need every node launched by itself, so a compute that has
 * either launches directly (tg_cuda_prof_direct); the whole-compute times
 * alone do not stop a replay.
 *
 * Not here: NVTX ranges (cuda_context.c marks computes and ops where it
 * launches them), the counters themselves (kept by the context and ops).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "op_params.h"

void tg_cuda_prof_begin(tg_cuda_ctx *c, const tg_graph *g, int n_runs, cuda_prof *out_pf) {
    const tg_cu_api *cu = c->dev->cu;
    cuda_prof *pf = out_pf;
    memset(pf, 0, sizeof *pf);
    if (c->dump_path && c->dump_skip > 0) {
        c->dump_skip--;
    } else if (c->dump_path) {
        pf->dump = fopen(c->dump_path, "w");
        if (!pf->dump) TG_WARN("%s: cannot write the graph dump to %s", c->name, c->dump_path);
        else fprintf(pf->dump, "# %s: graph of %d nodes, %d concurrency runs\n", c->name, g->n_nodes, n_runs);
        tg_free(c->dump_path);
        c->dump_path = NULL;
    }
    if (!c->profile) return;
    bool per_kernel = c->profile >= 2 || pf->dump;
    cu->cuEventCreate(&pf->begin, CU_EVENT_DEFAULT);
    cu->cuEventCreate(&pf->end, CU_EVENT_DEFAULT);
    if (pf->begin) cu->cuEventRecord(pf->begin, c->stream);
    if (per_kernel && (pf->ev = tg_calloc((size_t)g->n_nodes * 2, sizeof *pf->ev))) {
        pf->n = g->n_nodes * 2;
        for (int i = 0; i < pf->n; i++) cu->cuEventCreate(&pf->ev[i], CU_EVENT_DEFAULT);
    }
}

void tg_cuda_prof_node_begin(const tg_cuda_ctx *c, cuda_prof *pf, int i, CUstream s) {
    if (pf->ev) c->dev->cu->cuEventRecord(pf->ev[2 * i], s);
}

static void dump_node(FILE *f, const tg_cuda_ctx *c, int i, const tg_tensor *t, int len, int run, float ms) {
    fprintf(f, "%4d %-28.28s %-10s %-4s [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] run %d", i,
            t->name[0] ? t->name : "-", tg_op_name(t->op), tg_type_name(t->type), t->ne[0], t->ne[1], t->ne[2],
            t->ne[3], run);
    if (len > 1) fprintf(f, " fused x%d", len);
    fprintf(f, " %s grid (%u,%u,%u) block %u smem %u", c->last_kernel ? c->last_kernel : "-", c->last_grid[0],
            c->last_grid[1], c->last_grid[2], c->last_block, c->last_smem);
    if (ms >= 0) fprintf(f, " %.3f ms", ms);
    fputc('\n', f);
}

void tg_cuda_prof_node_end(const tg_cuda_ctx *c, cuda_prof *pf, int i, CUstream s, const tg_tensor *t, int len,
                           int run) {
    if (pf->ev) c->dev->cu->cuEventRecord(pf->ev[2 * i + 1], s);
    if (pf->dump) dump_node(pf->dump, c, i, t, len, run, -1.0f);
}

void tg_cuda_prof_stop(const tg_cuda_ctx *c, cuda_prof *pf) {
    if (pf->end) c->dev->cu->cuEventRecord(pf->end, c->stream);
}

void tg_cuda_prof_report(const tg_cuda_ctx *c, const tg_graph *g, const cuda_prof *pf, const char *mode,
                         double t_submit_us, double t0_us) {
    if (!c->profile) return;
    const tg_cu_api *cu = c->dev->cu;
    float gpu_ms = 0;
    if (pf->begin && pf->end) cu->cuEventElapsedTime(&gpu_ms, pf->begin, pf->end);
    fprintf(stderr, "[profile] %s: %d nodes (%s): host submit %.1f us, GPU %.3f ms, wall %.3f ms\n", c->name,
            g->n_nodes, mode, t_submit_us, gpu_ms, (tg_cuda_now_us() - t0_us) / 1e3);
    if (!pf->ev) return;
    double by_op[TG_OP_COUNT] = {0};
    int cnt[TG_OP_COUNT] = {0};
    for (int i = 0; i < g->n_nodes; i++) {
        float ms = 0;
        if (tg_op_is_view(g->nodes[i]->op)) continue;
        if (cu->cuEventElapsedTime(&ms, pf->ev[2 * i], pf->ev[2 * i + 1]) != CUDA_SUCCESS) continue;
        by_op[g->nodes[i]->op] += ms;
        cnt[g->nodes[i]->op]++;
        if (pf->dump) fprintf(pf->dump, "time %4d %-28.28s %.4f ms\n", i, g->nodes[i]->name, ms);
    }
    for (int o = 0; o < TG_OP_COUNT; o++)
        if (cnt[o]) fprintf(stderr, "[profile]   %-12s x%-5d %9.3f ms\n", tg_op_name((tg_op)o), cnt[o], by_op[o]);
}

void tg_cuda_prof_end(const tg_cuda_ctx *c, cuda_prof *pf) {
    const tg_cu_api *cu = c->dev->cu;
    if (pf->dump) fclose(pf->dump);
    if (pf->ev) {
        for (int i = 0; i < pf->n; i++)
            if (pf->ev[i]) cu->cuEventDestroy(pf->ev[i]);
        tg_free(pf->ev);
    }
    if (pf->begin) cu->cuEventDestroy(pf->begin);
    if (pf->end) cu->cuEventDestroy(pf->end);
    memset(pf, 0, sizeof *pf);
}

void tg_cuda_debug_report(const tg_cuda_ctx *c) {
    if (!c->debug) return;
    const tg_cuda_device *dev = c->dev;
    fprintf(stderr,
            "[debug] %s: %" PRIu64 " computes: %d direct, %d graph replays, %d captures, %d updates; fused: "
            "%d matmul+bias, %d matmul+bias+relu, %d layer norm+affine, %d softmax+scale/mask, %d attention, "
            "%d glu, %d norm/elementwise storing bf16/f16 for a product, %d matmul+bias+residual (%d of the "
            "matmul groups with a scale), %d layer norm+matvec, %d glu+conv+bias+silu, %d bias+mask(+relu), %d embedding+norm, %d product+cache write, %d step tail (argmax+sums+feed+history), %d subsampling front, %d layer norm pairs; encoded: "
            "%d matvec (%d on the wide kernel), %d attention "
            "decode (%d on one wide block a row, %d on wide blocks in a cluster, %d with the q product inside), %d products asking the next attention's K and V into L2, %d step "
            "chains of %d launches; %d kernel files compiled, %d from the cache\n",
            c->name, c->n_computes, c->n_direct, c->n_graph_hits, c->n_graph_captures, c->n_graph_updates,
            c->n_fused[TG_FUSED_MM_BIAS], c->n_fused[TG_FUSED_MM_BIAS_RELU], c->n_fused[TG_FUSED_NORM_AFFINE],
            c->n_fused[TG_FUSED_SOFTMAX], c->n_fused[TG_FUSED_ATTENTION], c->n_fused[TG_FUSED_GLU],
            c->n_fused[TG_FUSED_EMIT], c->n_fused[TG_FUSED_MM_BIAS_RESIDUAL], c->n_fused[TG_FUSED_MM_SCALE],
            c->n_fused[TG_FUSED_NORM_MATVEC], c->n_fused[TG_FUSED_CONV_GLU], c->n_fused[TG_FUSED_BIAS_MASK],
            c->n_fused[TG_FUSED_EMBED_NORM], c->n_fused[TG_FUSED_KV_ROWS], c->n_fused[TG_FUSED_PICK], c->n_fused[TG_FUSED_SUB_FRONT],
            c->n_fused[TG_FUSED_NORM_PAIR], c->n_matvec, c->n_matvec_wide, c->n_attn_decode,
            c->n_attn_decode_wide, c->n_attn_decode_wcl, c->n_attn_cross_q, c->n_pf_ahead, c->n_chains, c->n_chain_phases, dev->n_compiled, dev->n_cache_hits);
}

/* ------------------------------------------------------ finite check */

/* Counts the NaN and Inf among t's elements read as type `stored` from the
 * device (contiguous tensors only); -1 when t cannot be read that way. The
 * first bad element's index goes to *first. */
static int64_t count_nonfinite(const tg_cu_api *cu, const tg_tensor *t, tg_type stored, int64_t *first) {
    if (!t->data || !tg_is_contiguous(t) || (stored != TG_F32 && stored != TG_BF16 && stored != TG_F16)) return -1;
    int64_t n = tg_nelements(t), bad = 0, chunk = n < ((int64_t)1 << 24) ? n : (int64_t)1 << 24;
    size_t es = tg_type_size(stored);
    if (chunk <= 0) return 0;
    void *buf = tg_malloc((size_t)chunk * es);
    if (!buf) return -1;
    *first = -1;
    for (int64_t at = 0; at < n; at += chunk) {
        int64_t m = n - at < chunk ? n - at : chunk;
        if (cu->cuMemcpyDtoH(buf, (CUdeviceptr)(uintptr_t)t->data + (size_t)at * es, (size_t)m * es) != CUDA_SUCCESS) {
            bad = -1;
            break;
        }
        for (int64_t k = 0; k < m; k++) {
            float v = stored == TG_F32    ? ((const float *)buf)[k]
                      : stored == TG_BF16 ? tg_bf16_to_f32(((const uint16_t *)buf)[k])
                                          : tg_f16_to_f32(((const uint16_t *)buf)[k]);
            if (!isfinite(v)) {
                if (*first < 0) *first = at + k;
                bad++;
            }
        }
    }
    tg_free(buf);
    return bad;
}

void tg_cuda_check_finite(tg_cuda_ctx *c, CUstream s, const tg_graph *g, const tg_type *emit, int i) {
    const tg_tensor *t = g->nodes[i];
    if (c->dev->cu->cuStreamSynchronize(s) != CUDA_SUCCESS) return;
    tg_type st = emit[i] != TG_F32 ? emit[i] : t->type;
    int64_t first = -1, bad = count_nonfinite(c->dev->cu, t, st, &first);
    if (bad <= 0) return;
    c->check_finite--;
    char srcs[512];
    size_t used = 0;
    srcs[0] = 0;
    for (int k = 0; k < TG_MAX_SRC && t->src[k] && used < sizeof srcs - 64; k++) {
        const tg_tensor *r = t->src[k];
        const int j = tg_cuda_stored_node(emit, g->nodes, i, i, r);
        const tg_type rt = j < 0 ? r->type : emit[j];
        int64_t f2 = -1, b2 = count_nonfinite(c->dev->cu, r, rt, &f2);
        used += (size_t)snprintf(srcs + used, sizeof srcs - used, " src%d '%s' (%s %s): %s", k,
                                 r->name[0] ? r->name : "-", tg_op_name(r->op), tg_type_name(rt),
                                 b2 < 0 ? "not read" : b2 == 0 ? "finite" : "NOT finite");
    }
    TG_WARN("%s: node %d '%s' (%s, %s [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "]) holds %" PRId64
            " non-finite values of %" PRId64 ", the first at %" PRId64 ";%s",
            c->name, i, t->name[0] ? t->name : "-", tg_op_name(t->op), tg_type_name(st), t->ne[0], t->ne[1],
            t->ne[2], t->ne[3], bad, tg_nelements(t), first, srcs);
}

/* ------------------------------------------------------------ the stamps */

void tg_cuda_stamps_open(tg_cuda_device *d) {
    const char *path = getenv("CT_CUDA_STAMPS");
    if (!path || !*path) return;
    size_t bytes = (1 + 4 * (size_t)TG_STAMPS_CAP) * sizeof(uint64_t);
    CUresult r = d->cu->cuMemAlloc(&d->stamps, bytes);
    if (r == CUDA_SUCCESS) r = d->cu->cuMemsetD8Async(d->stamps, 0, bytes, NULL);
    if (r == CUDA_SUCCESS) r = d->cu->cuCtxSynchronize();
    if (r != CUDA_SUCCESS || !(d->stamps_path = tg_strdup(path))) {
        TG_WARN("cuda%d: CT_CUDA_STAMPS=%s: no buffer for the records (%s); the stamps are off", d->ordinal, path,
                tg_cuda_result_text(r));
        if (d->stamps) d->cu->cuMemFree(d->stamps);
        d->stamps = 0;
        return;
    }
    TG_INFO("cuda%d: kernel timer records to %s (CT_CUDA_STAMPS; every kernel file by NVRTC)", d->ordinal, path);
}

void tg_cuda_stamps_bind(tg_cuda_device *d, CUmodule mod) {
    if (!d->stamps) return;
    CUdeviceptr at = 0;
    size_t size = 0;
    if (d->cu->cuModuleGetGlobal(&at, &size, mod, "tg_stamps") != CUDA_SUCCESS || size != sizeof d->stamps)
        return; /* built for compute capability below 9.0: no records */
    CUresult r = d->cu->cuMemcpyHtoD(at, &d->stamps, sizeof d->stamps);
    if (r != CUDA_SUCCESS)
        TG_WARN("cuda%d: a kernel module could not be pointed at the timer records (%s); its kernels record nothing",
                d->ordinal, tg_cuda_result_text(r));
}

void tg_cuda_stamps_close(tg_cuda_device *d) {
    if (!d->stamps) return;
    uint64_t n = 0, kept;
    uint64_t *rec = NULL;
    FILE *f = NULL;
    char path[4096];
    /* device N > 0 writes path.N, so devices do not overwrite each other */
    if (d->ordinal > 0) snprintf(path, sizeof path, "%s.%d", d->stamps_path, d->ordinal);
    else snprintf(path, sizeof path, "%s", d->stamps_path);
    if (d->cu->cuCtxSynchronize() != CUDA_SUCCESS || d->cu->cuMemcpyDtoH(&n, d->stamps, sizeof n) != CUDA_SUCCESS)
        goto unread;
    kept = n > TG_STAMPS_CAP ? TG_STAMPS_CAP : n;
    if (kept && (!(rec = tg_malloc(kept * 4 * sizeof *rec)) ||
                 d->cu->cuMemcpyDtoH(rec, d->stamps + sizeof n, kept * 4 * sizeof *rec) != CUDA_SUCCESS))
        goto unread;
    if (!n)
        TG_WARN("cuda%d: CT_CUDA_STAMPS: no kernel recorded its timer (the records need compute capability 9.0; "
                "this device has %d.%d)", d->ordinal, d->props.cc_major, d->props.cc_minor);
    if (n > kept)
        TG_WARN("cuda%d: CT_CUDA_STAMPS: %" PRIu64 " kernel timer records, the first %" PRIu64 " kept", d->ordinal,
                n, kept);
    if (!(f = fopen(path, "w"))) {
        TG_WARN("cuda%d: cannot write the kernels' timer records to %s", d->ordinal, path);
        goto done;
    }
    fprintf(f, "# arrive_ns release_ns fnv1a(kernel) grid_x grid_y grid_z block\n");
    for (uint64_t i = 0; i < kept; i++) {
        const uint64_t *r = rec + 4 * i, g = r[3];
        fprintf(f, "%" PRIu64 " %" PRIu64 " %016" PRIx64 " %u %u %u %u\n", r[0], r[1], r[2],
                (unsigned)(g & 0xffffff), (unsigned)(g >> 24 & 0xffff), (unsigned)(g >> 40 & 0xfff),
                (unsigned)(g >> 52));
    }
    bool bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    f = NULL;
    if (bad) TG_WARN("cuda%d: the kernels' timer records could not all be written to %s", d->ordinal, path);
    else TG_INFO("cuda%d: %" PRIu64 " kernel timer records written to %s", d->ordinal, kept, path);
    goto done;
unread:
    TG_WARN("cuda%d: the kernels' timer records could not be read back", d->ordinal);
done:
    if (f) fclose(f);
    tg_free(rec);
    d->cu->cuMemFree(d->stamps);
    d->stamps = 0;
    tg_free(d->stamps_path);
    d->stamps_path = NULL;
}
