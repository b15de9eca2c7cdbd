/*
 * cuda_chain.c: a decoder step's launches run as the phases of one
 * step_chain kernel (kernels/step_chain.cu), a grid barrier between them,
 * where CT_CUDA_STEP_CHAIN=1 asks it.
 *
 * Why: at batch 1 a step was 67 dependent launches in ~350 us stamped,
 * each a product or an attention of 2-8 us whose weights arrive only after
 * the wait for the launch before (the seventeenth session's notes). A chain
 * keeps one resident grid through up to TG_CHAIN_MAX of them (a decoder
 * layer: q/k/v, self-attention, out projection, cross q, cross-attention,
 * cross out, up, down), asks each phase's weights into L2 while the phase
 * before runs, and pays a barrier where it paid a launch.
 *
 * How: the encode loop (cuda_context.c) sets c->chain_may for node groups
 * whose launches a chain may take (products, attentions, the norms fused
 * into products) and flushes before any other. Every launch goes through
 * tg_cuda_launch_cluster, which offers it here first: a mul_mat_vec_mma(_ln)
 * of weights and at most 16 columns, or an attn_decode_wide(_bf16), on the
 * chain's stream, is recorded with its argument struct as it is; anything
 * else launches what was recorded, then itself. cuBLASLt calls flush too
 * (cuda_matmul.c). A chain of one launches as it came. So the graph, the
 * plan and every kernel's arguments are what they are without chains; only
 * the launches change. For the attentions, chain mode makes the wide kernel
 * the choice for every row count up to the SMs (cuda_attention.c), since a
 * chain runs only that one.
 *
 * Measured on an H100 (eighteenth session; NOTES.md): correct, and the
 * step 79% slower at batch 1 and 67% at 8 than with the launches apart: a
 * phase boundary cost ~4.6 us more than a launch's. Off by default.
 *
 * What it leaves out: batches past 16 rows (cuBLASLt products), the
 * prefill's attention (attn_split), forked streams, profiling and the
 * finite checks (each wants its launches apart). The first phase of a
 * chain loads what it loads before its wait as its own launch would: the
 * launch before the chain is the one before that phase. The launches after
 * a chain see what it wrote as the launch before (the hazard record grows
 * with each phase recorded, cuda_matvec.c), so they load nothing early
 * that a phase wrote.
 */
#include "cuda_internal.h"

#include <string.h>

/* The barrier's words, and room to spare for a second chain stream. */
enum { CHAIN_BAR_BYTES = 256 };

static void chain_probe(tg_cuda_ctx *c);

tg_status tg_cuda_chain_init(tg_cuda_ctx *c) {
    if (!c->chain_mode) return NULL;
    const tg_cu_api *cu = c->dev->cu;
    CUresult r = cu->cuMemAlloc(&c->chain_bar, CHAIN_BAR_BYTES);
    if (r != CUDA_SUCCESS) return tg_cuda_status(r, "cuMemAlloc (the step chain's barrier)");
    if ((r = cu->cuMemsetD8Async(c->chain_bar, 0, CHAIN_BAR_BYTES, c->stream)) == CUDA_SUCCESS)
        r = cu->cuStreamSynchronize(c->stream);
    if (r != CUDA_SUCCESS) return tg_cuda_status(r, "zeroing the step chain's barrier");
    chain_probe(c);
    return NULL;
}

void tg_cuda_chain_free(tg_cuda_ctx *c) {
    if (c->chain_bar) c->dev->cu->cuMemFree(c->chain_bar);
    c->chain_bar = 0;
}

/* The bytes from t's first element to past its last. */
static int64_t span_bytes(const tg_t *t) {
    int64_t b = t->type == TG_KT_F32 ? 4 : 2;
    for (int d = 0; d < 4; d++)
        if (t->ne[d] > 1) b += (t->ne[d] - 1) * t->nb[d];
    return b;
}

/* The phase a launch becomes, and its dynamic shared memory at the chain's
 * warps; false for a launch no chain runs. */
static bool phase_of(const tg_cuda_ctx *c, const char *module, const char *defines, const char *name, unsigned gy,
                     unsigned gz, const void *args, tg_chain_phase *ph, unsigned *smem) {
    memset(ph, 0, sizeof *ph);
    if (defines[0] || gy == 0 || gz == 0) return false;
    if (!strcmp(module, "matvec.cu") && (!strcmp(name, "mul_mat_vec_mma") || !strcmp(name, "mul_mat_vec_mma_ln"))) {
        const tg_mul_mat_vec_args *a = args;
        /* weights only: the phase reads them through the read-only path */
        if (!a->w_early || a->m < 1 || a->m > TG_MVM_MAXM || gy != 1 || gz != 1) return false;
        ph->kind = TG_CHAIN_MVM;
        ph->u.mv = *a;
        ph->pf[0] = a->w;
        ph->pf_bytes[0] = a->n * a->lda;
        /* mvm.cuh's layout: the normed columns, then the warps' sums */
        const int64_t xs = a->ln ? ((a->m * (a->k + 8) + 7) & ~(int64_t)7) * 2 : 0;
        *smem = (unsigned)(xs + (int64_t)c->chain_warps * (TG_MVM_ROWS / 8) * 32 * 4 * 4);
        return true;
    }
    /* BF16 K and V (the decoder's caches and the encoder's K/V on a GPU)
     * only: one attention body in the kernel, not two */
    if (!strcmp(module, "attention_split.cu") && !strcmp(name, "attn_decode_wide_bf16")) {
        const tg_attn_decode_args *a = args;
        const int64_t ku = 16, Tk = a->k.ne[1], w = c->chain_warps;
        if (!a->direct || Tk < 1 || (int64_t)gy * gz != a->q.ne[2] * a->q.ne[3]) return false;
        ph->kind = TG_CHAIN_ATD_BF16;
        ph->u.ad = *a;
        /* a block of the chain's warps takes a row's keys in whole rounds */
        const int64_t kpw = (Tk + w * ku - 1) / (w * ku) * ku;
        if (kpw > INT32_MAX) return false;
        ph->u.ad.kpw = (int32_t)kpw;
        ph->u.ad.prefetch = 0;
        /* K and V into L2 a phase ahead where they take at most half of it */
        const int64_t kb = span_bytes(&a->k), vb = span_bytes(&a->v);
        if (tg_cuda_l2_half(c, (double)(kb + vb))) {
            ph->pf[0] = a->k.p, ph->pf_bytes[0] = kb;
            ph->pf[1] = a->v.p, ph->pf_bytes[1] = vb;
        }
        *smem = 0;
        return true;
    }
    return false;
}

/* The kernel for n phases: step_chain, or step_chain_long past
 * TG_CHAIN_MAX; the index of its entry in c->chain_fn. */
static int chain_kernel(int n) { return n > TG_CHAIN_MAX ? 1 : 0; }
static const char *const chain_names[2] = {"step_chain", "step_chain_long"};

static const char *chain_defines(const tg_cuda_ctx *c) { return c->chain_warps == 8 ? "-DTG_CHAIN_WARPS=8" : ""; }

/* Blocks of the chain kernel k for smem bytes of dynamic shared memory:
 * the SMs where one block fits each, else 0 (no chain). The dynamic
 * shared memory is always allowed explicitly: the kernel's static 9-17 KB
 * count against the 48 KB a launch gets without asking (a chain at batch
 * 8 with a norm inside asks ~33 KB more). */
static tg_status chain_grid(tg_cuda_ctx *c, int k, unsigned smem, int *out_grid) {
    *out_grid = 0;
    if (c->chain_fn[k].known && c->chain_fn[k].smem == smem) {
        *out_grid = c->chain_fn[k].grid;
        return NULL;
    }
    CUfunction fn;
    tg_status st = tg_cuda_kernel(c->dev, "step_chain.cu", chain_defines(c), chain_names[k], &fn);
    if (st) return st;
    const tg_cu_api *cu = c->dev->cu;
    int per_sm = 0;
    CUresult r = cu->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem);
    if (r == CUDA_SUCCESS)
        r = cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, 32 * c->chain_warps, smem);
    if (r != CUDA_SUCCESS) per_sm = 0; /* more than a block may have: no chain, asked once */
    TG_DEBUG("%s: %s: %d blocks of %d threads an SM with %u bytes of shared memory (%s)", c->name, chain_names[k],
             per_sm, 32 * c->chain_warps, smem, tg_cuda_result_text(r));
    if (per_sm < 1)
        TG_WARN("%s: %s: no block of %d threads with %u bytes of shared memory fits an SM (%s); its phases "
                "launch apart", c->name, chain_names[k], 32 * c->chain_warps, smem, tg_cuda_result_text(r));
    c->chain_fn[k].known = true;
    c->chain_fn[k].smem = smem;
    c->chain_fn[k].grid = per_sm >= 1 ? c->dev->props.sm_count : 0;
    *out_grid = c->chain_fn[k].grid;
    return NULL;
}

/* One launch of chain kernel k on the chain's stream: programmatic
 * dependent launch as any kernel's, and cooperative (c->chain_coop) so
 * that the driver starts it only with every block resident at once, which
 * its grid barrier needs: two sessions' chains on their own streams, or
 * an SM limit (MPS), could otherwise leave blocks of both waiting for the
 * other's to end, for ever. The driver's answer as it is. */
static CUresult chain_submit(tg_cuda_ctx *c, CUfunction fn, int k, unsigned grid, unsigned smem, void *args) {
    const unsigned bx = 32u * (unsigned)c->chain_warps;
    c->last_kernel = chain_names[k];
    c->last_grid[0] = grid, c->last_grid[1] = c->last_grid[2] = 1;
    c->last_block = bx;
    c->last_smem = smem;
    CUlaunchAttribute at[2];
    CUlaunchConfig cfg;
    tg_cuda_launch_config(&cfg, &at[0], grid, 1, 1, bx, smem, c->chain_stream, c->use_pdl);
    if (c->chain_coop) {
        CUlaunchAttribute *co = &at[cfg.numAttrs];
        memset(co, 0, sizeof *co);
        co->id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        co->value.cooperative = 1;
        cfg.numAttrs++;
    }
    void *params[] = {args};
    return c->dev->cu->cuLaunchKernelEx(&cfg, fn, params, NULL);
}

static tg_status chain_launch(tg_cuda_ctx *c, int k, unsigned grid, unsigned smem, void *args) {
    CUfunction fn;
    tg_status st = tg_cuda_kernel(c->dev, "step_chain.cu", chain_defines(c), chain_names[k], &fn);
    if (st) return st;
    CUresult r = chain_submit(c, fn, k, grid, smem, args);
    return r == CUDA_SUCCESS ? NULL : tg_cuda_ctx_fail(c, r, chain_names[k]);
}

/* Launches step_chain and step_chain_long with no phases, each as chains
 * launch, and waits: a driver that refuses the long one's 31.7 KB of
 * parameters (before CUDA 12.1) keeps chains to a layer; one that refuses
 * the cooperative launch beside programmatic dependent launch gets no
 * chains. */
static void chain_probe(tg_cuda_ctx *c) {
    c->chain_stream = c->stream;
    for (int k = 0; k < 2 && c->chain_mode; k++) {
        tg_step_chain_long_args a; /* the larger struct: the short kernel reads its head */
        memset(&a, 0, sizeof a);
        a.bar = (uint64_t)c->chain_bar;
        int grid = 0;
        CUfunction fn;
        tg_status st = chain_grid(c, k, 0, &grid);
        if (!st && grid > 0) st = tg_cuda_kernel(c->dev, "step_chain.cu", chain_defines(c), chain_names[k], &fn);
        if (!st && grid > 0) {
            CUresult r = chain_submit(c, fn, k, (unsigned)grid, 0, &a);
            if (r == CUDA_SUCCESS) r = c->dev->cu->cuStreamSynchronize(c->stream);
            if (r == CUDA_SUCCESS) continue;
            TG_WARN("%s: %s refused (%s)", c->name, chain_names[k], tg_cuda_result_text(r));
        } else if (st) {
            TG_WARN("%s: %s unavailable: %s", c->name, chain_names[k], tg_status_message(st));
            tg_status_free(st);
        }
        if (k == 1) {
            c->chain_max = c->chain_max < TG_CHAIN_MAX ? c->chain_max : TG_CHAIN_MAX;
        } else {
            TG_WARN("%s: step chains off", c->name);
            c->chain_mode = 0;
        }
    }
}

tg_status tg_cuda_chain_flush(tg_cuda_ctx *c) {
    const int n = c->chain.n;
    if (n == 0) return NULL;
    c->chain.n = 0;
    const int k = chain_kernel(n);
    int grid = 0;
    tg_status st = n > 1 ? chain_grid(c, k, c->chain_smem, &grid) : NULL;
    if (st) return st;
    TG_DEBUG("%s: chain of %d phases, %u bytes of shared memory, %d blocks", c->name, n, c->chain_smem, grid);
    if (grid > 0) {
        c->n_chains++;
        c->n_chain_phases += n;
        if (k == 1) {
            c->chain.n = n;
            c->chain.bar = (uint64_t)c->chain_bar;
            c->chain.pf_ahead = c->chain_pf;
            st = chain_launch(c, k, (unsigned)grid, c->chain_smem, &c->chain);
            c->chain.n = 0;
        } else {
            /* the layer-sized struct: the same header, its phases */
            tg_step_chain_args a;
            a.bar = (uint64_t)c->chain_bar, a.n = n, a.pf_ahead = c->chain_pf;
            a.tail_pf = c->chain.tail_pf, a.tail_pf_bytes = c->chain.tail_pf_bytes;
            memcpy(a.ph, c->chain.ph, (size_t)n * sizeof a.ph[0]);
            if (n < TG_CHAIN_MAX) memset(a.ph + n, 0, (size_t)(TG_CHAIN_MAX - n) * sizeof a.ph[0]);
            st = chain_launch(c, k, (unsigned)grid, c->chain_smem, &a);
        }
    } else {
        /* one phase, or no block fits: the launches as they came */
        for (int i = 0; i < n && !st; i++)
            st = tg_cuda_launch_now(c, c->chain_stream, c->chain_own[i].module, "", c->chain_own[i].name,
                                    c->chain_own[i].gx, c->chain_own[i].gy, c->chain_own[i].gz, c->chain_own[i].bx,
                                    c->chain_own[i].smem, &c->chain_own[i].args, 1);
    }
    c->chain.tail_pf = 0;
    c->chain.tail_pf_bytes = 0;
    return st;
}

void tg_cuda_chain_drop(tg_cuda_ctx *c) {
    c->chain.n = 0;
    c->chain.tail_pf = 0;
    c->chain.tail_pf_bytes = 0;
}

tg_status tg_cuda_chain_offer(tg_cuda_ctx *c, CUstream s, const char *module, const char *defines, const char *name,
                              unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem, const void *args,
                              unsigned cluster_x, bool *out_taken) {
    *out_taken = false;
    tg_chain_phase ph;
    unsigned ph_smem = 0;
    if (!c->chain_may || cluster_x != 1 || !c->chain_bar || (c->chain.n > 0 && s != c->chain_stream) ||
        !phase_of(c, module, defines, name, gy, gz, args, &ph, &ph_smem)) {
        if (c->chain_may) TG_DEBUG("%s: %s%s%s not chained", c->name, module, defines[0] ? " " : "", name);
        return tg_cuda_chain_flush(c);
    }
    tg_status st = NULL;
    if (c->chain.n == c->chain_max) {
        /* full: the chain asks this launch's weights into L2 as it ends */
        c->chain.tail_pf = ph.pf[0];
        c->chain.tail_pf_bytes = ph.pf_bytes[0];
        if ((st = tg_cuda_chain_flush(c))) return st;
    }
    const int i = c->chain.n++;
    if (i == 0) {
        c->chain_stream = s;
        c->chain_smem = 0;
    }
    c->chain.ph[i] = ph;
    /* after the first, a phase's wait is the barrier after the phase
     * before, whose writes the host's record of that launch does not hold:
     * no residual before it */
    if (i > 0 && ph.kind == TG_CHAIN_MVM) c->chain.ph[i].u.mv.opt &= ~TG_MV_EPI_EARLY;
    TG_DEBUG("%s: %s recorded as phase %d", c->name, name, i);
    if (ph_smem > c->chain_smem) c->chain_smem = ph_smem;
    c->chain_own[i].module = module;
    c->chain_own[i].name = name;
    c->chain_own[i].gx = gx, c->chain_own[i].gy = gy, c->chain_own[i].gz = gz;
    c->chain_own[i].bx = bx, c->chain_own[i].smem = smem;
    memcpy(&c->chain_own[i].args, args,
           ph.kind == TG_CHAIN_MVM ? sizeof(tg_mul_mat_vec_args) : sizeof(tg_attn_decode_args));
    *out_taken = true;
    return st;
}
