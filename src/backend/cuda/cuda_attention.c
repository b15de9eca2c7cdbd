/*
 * cuda_attention.c: the attention op's kernel choice, scratch and launches.
 *
 * Four paths, chosen per node from its shapes: attn_decode (one query a
 * row over whole K/V rows: the decoder's step; its keys a warp chosen by
 * the waves its blocks make), the split over keys with a combine (a few
 * queries over many keys), the tensor-core kernel (bf16 operands, F32
 * sums; beyond 64 queries K and V^T packed into the scratch first: the
 * encoder), and the F32 kernel for the rest (and F32-precision requests).
 * The scratch each needs is sized here too, before encoding starts
 * (tg_cuda_op_scratch asks), so a launch never allocates.
 *
 * Not here: the other ops (cuda_ops.c), device code
 * (kernels/attention*.cu).
 */
#include "cuda_internal.h"
#include "cuda_variants.h"
#include "op_params.h"

static bool attn_use_mma(const tg_cuda_ctx *c, const tg_tensor *n) {
    const tg_tensor *q = n->src[0], *v = n->src[2];
    int64_t D = q->ne[0], Dv = v->ne[0];
    return c->use_attn_mma && c->dev->props.tc_level >= 2 && tg_node_prec(n) == TG_PREC_DEFAULT && D % 16 == 0 &&
           D <= 160 && Dv % 16 == 0 && Dv <= 160 && q->ne[2] * q->ne[3] <= 65535 && n->src[1]->ne[1] <= (1 << 24);
}

static int64_t attn_keys_padded(const tg_tensor *n) { return (n->src[1]->ne[1] + 63) / 64 * 64; }

/* At batch 1 on the released model (438 frames, 8 heads) the packed kernel
 * ran 7 x 8 blocks of 4 warps on 132 SMs, 56 us a layer (stamps, eighth
 * session): each warp's 7 key tiles in turn, most SMs idle. Splitting the
 * queries finer would leave each warp's tiles as many; two groups of 4
 * warps a block, each over half the tiles, halve them. Past the SMs the
 * blocks of one group fit two an SM (by registers), the blocks of two one. */
int tg_cuda_attn_mma_groups(int sm_count, int64_t blocks, int64_t Tk, bool allow, int64_t smem, int64_t smem_max) {
    return allow && blocks > 0 && blocks <= sm_count && Tk > 64 && smem <= smem_max ? TG_AM_GROUPS : 1;
}

/* One past the last byte of the last element of a descriptor. */
static uint64_t desc_end(const tg_t *d) {
    uint64_t off = 0;
    for (int k = 0; k < 4; k++)
        if (d->ne[k] > 1) off += (uint64_t)(d->ne[k] - 1) * (uint64_t)d->nb[k];
    return d->p + off + (d->type == TG_KT_BF16 ? 2u : 4u);
}

/* t as a kernel reads or writes it: its own descriptor, or where its
 * producer root stored 16 bits (the emit fusion; t root or a view of it,
 * strides in F32 bytes), the same elements at half the strides and
 * offset, in the first half of root's storage. */
static tg_t stored_desc(const tg_tensor *t, tg_type stored, const tg_tensor *root) {
    tg_t d = tg_cuda_desc(t);
    if (!t || stored == TG_F32 || !root) return d;
    d.type = stored == TG_BF16 ? TG_KT_BF16 : TG_KT_F16;
    d.p = tg_cuda_dptr(root->data) + (uint64_t)((const char *)t->data - (const char *)root->data) / 2;
    for (int k = 0; k < 4; k++) d.nb[k] /= 2;
    return d;
}

/* The packed kernel stages mask m in 16-byte pieces (TG_AM_MASK16): its
 * keys contiguous F32 (the kernel asks the same of its descriptor). The
 * one definition for the launch and for a BF16 mask's plan
 * (tg_cuda_attn_mask_bf16_ok), which must agree. */
static bool mask_in_pieces(const tg_cuda_ctx *c, const tg_tensor *m) {
    return m && c->attn_mask16 && m->type == TG_F32 && m->ne[0] > 1 && m->nb[0] == 4;
}

/* The packed kernel stages Q's rows in 16-byte pieces
 * (attention_mma_packed_qs, CT_CUDA_ATTN_QSTAGE) where they are contiguous
 * F32 with every row's start 16-byte aligned, a row a whole number of a
 * thread pair's pieces (D a multiple of 8; the kernel's head sizes are of
 * 16). */
static bool q_stageable(const tg_cuda_ctx *c, const tg_tensor *q, int64_t D) {
    if (!c->attn_qstage || q->type != TG_F32 || q->nb[0] != 4 || D % 8 != 0 || (tg_cuda_dptr(q->data) & 15) != 0)
        return false;
    for (int d = 1; d < 4; d++)
        if (q->ne[d] > 1 && q->nb[d] % 16 != 0) return false;
    return true;
}

/* Packing K and V first pays when several blocks of 64 queries would
 * convert the same keys. */
static bool attn_packs(const tg_cuda_ctx *c, const tg_tensor *n) {
    return attn_use_mma(c, n) && n->src[0]->ne[1] > 64 && n->src[1]->ne[1] > 0;
}

/* A few queries over many keys split over the keys (attention_split.cu):
 * chunks of 32 keys, partials in the scratch. F32 arithmetic, so any
 * precision request is met. Up to c->attn_split_tq queries (at most
 * TG_ATS_TQ, 16; CT_CUDA_ATTN_SPLIT_TQ): the decoder's prefill, whose 10
 * prompt queries over the encoder's 438 frames took the tensor-core
 * kernel's one block a head (8 blocks at batch 1: 123 us a call, this
 * session's stamps) before the limit was 8. */
enum { ATS_CHUNK = 32 };

static bool attn_splits(const tg_cuda_ctx *c, const tg_tensor *n) {
    const tg_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2];
    return q->ne[1] <= c->attn_split_tq && k->ne[1] >= 2 * ATS_CHUNK && q->ne[0] <= 256 && v->ne[0] <= 256 &&
           q->ne[2] <= 65535 && q->ne[3] <= 65535 && (k->ne[1] + ATS_CHUNK - 1) / ATS_CHUNK <= 65535;
}

static size_t attn_split_scratch(const tg_tensor *n) {
    const tg_tensor *q = n->src[0];
    size_t n_split = (size_t)((n->src[1]->ne[1] + ATS_CHUNK - 1) / ATS_CHUNK);
    return tg_cuda_align256(n_split * (size_t)(q->ne[1] * q->ne[2] * q->ne[3]) * (size_t)(n->src[2]->ne[0] + 2) * 4);
}

/* One query per row over K/V rows that load as whole vectors
 * (attention_split.cu's attn_decode): the decoder's step. */
static bool kv_rows_ok(const tg_tensor *t) {
    size_t es = t->type == TG_F32 ? 4 : 2, al = 4 * es;
    if ((t->type != TG_F32 && t->type != TG_BF16) || t->nb[0] != es || ((uintptr_t)t->data % al) != 0) return false;
    for (int d = 1; d < 4; d++)
        if (t->ne[d] > 1 && t->nb[d] % al != 0) return false;
    return true;
}

static bool attn_decodes(const tg_cuda_ctx *c, const tg_tensor *n) {
    const tg_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2];
    return c->use_attn_decode && q->ne[1] == 1 && q->ne[0] == v->ne[0] && (q->ne[0] == 128 || q->ne[0] == 256) && k->ne[1] >= 1 &&
           q->ne[2] <= 65535 && q->ne[3] <= 65535 && k->type == v->type && kv_rows_ok(k) && kv_rows_ok(v);
}

/* Keys per warp. A round of loads is ku keys (8 at D = 128, 4 at 256;
 * twice that for BF16 K and V, the same bytes a round), and a call has
 * ceil(Tk / (4 kpw)) x H x B blocks of 4 warps. A block is a few trips to
 * memory and ~8 us whatever its keys (H200, batch 8: 448 blocks of one
 * round, one wave, 10.4 us), so with many (head, row) pairs one-round
 * chunks made waves of such blocks: at batch 64 the cross-attention's 3584
 * blocks took 67 us for 115 MB (1.7 TB/s).
 *
 * kpw = r ku is therefore chosen by the waves the blocks make: the r of
 * least waves(r) x (r + 1/2), plus 1/2 when a row has more than one chunk
 * (the combine launch), the fewest rounds on a tie; a wave is the GPU's
 * block slots, 4 an SM (the kernel's bound). That keeps what the rule of
 * before chose at batch 1, 8, 32 and 64 on the released model's shapes
 * (self-attention over 11-138 keys, cross over 438; bench/README.md): one
 * round a warp where the rows are few, one chunk a row where they fill
 * the GPU alone (batch 64: no combine launch). The rule of before filled
 * the slots with rounded-down splits, so row counts just past the slots
 * made a short second wave of long blocks: at batch 67 (536 rows, one
 * chunk each for 528 slots) the step took 1.626 ms against 1.498 with one
 * round a warp, which is what the waves pick there (2026-12-04, second
 * session; NOTES.md). CT_CUDA_ATTN_DECODE_FILL=1 keeps the rule of before,
 * =0 one round a warp (both for measuring); past 65535 chunks kpw grows. */
enum { ATD_WARPS = TG_ATD_WARPS };
int64_t tg_cuda_attn_decode_kpw(int sm_count, int fill, int64_t ku, int64_t Tk, int64_t rows) {
    const int64_t slots = (int64_t)sm_count * 4;
    int64_t kpw = ku;
    if (fill == 1 && rows > 0) {
        int64_t splits = slots / rows > 1 ? slots / rows : 1;
        int64_t per_warp = (Tk + splits * ATD_WARPS - 1) / (splits * ATD_WARPS);
        kpw = (per_warp + ku - 1) / ku * ku;
        if (kpw < ku) kpw = ku;
    } else if (fill == 2 && rows > 0 && slots > 0) {
        /* costs doubled: waves x (2r + 1) + (a combine ? 1 : 0) */
        int64_t best = -1, rounds = (Tk + ATD_WARPS * ku - 1) / (ATD_WARPS * ku);
        for (int64_t r = 1; r <= rounds; r++) {
            int64_t chunks = (Tk + ATD_WARPS * r * ku - 1) / (ATD_WARPS * r * ku);
            if (chunks > 65535) continue;
            int64_t waves = (chunks * rows + slots - 1) / slots, cost = waves * (2 * r + 1) + (chunks > 1);
            if (best < 0 || cost < best) best = cost, kpw = r * ku;
        }
    }
    while ((Tk + ATD_WARPS * kpw - 1) / (ATD_WARPS * kpw) > 65535) kpw += ku;
    return kpw;
}

/* One 16-warp block a row (attn_decode_wide): where the rows are no more
 * than the SMs, so the blocks make one wave of one a SM, but at least a
 * quarter of them, and a 4-warp block would need more than one round (or
 * chunks and a combine launch) for the row's keys, but 16 warps need at
 * most 4. In the decoder's step at batch 5-16 (132 SMs): the
 * cross-attention over 438 frames in 2 rounds, the self-attention past 64
 * keys in 1, each one launch instead of a chunked call of ~56-448 blocks
 * and its combine. On an H100 (2026-12-05, sixth session; each against
 * CT_CUDA_ATTN_DECODE_WIDE=0, interleaved) the step at batch 8 took 0.615
 * against 0.623 ms, but at batch 1 0.560 against 0.528: 8 blocks each
 * reading a row's 224 KB on one SM lose to the chunks spread over 56,
 * hence the quarter. min_rows > 0 puts the least rows elsewhere (tests,
 * measuring). Below the quarter, with `short_rows`, a row whose keys are
 * one round of the 16 warps (the self-attention at batch 1-4: up to 256
 * BF16 keys, 64 KB a head) also takes the wide block: it reads little on
 * one SM, and a 4-warp call would be chunks and a combine launch
 * (CT_CUDA_ATTN_DECODE_WIDE_SHORT; seventh session's timeline at batch 1:
 * 3 chunks at 6.7 us and their combine at 2.9-3.1). The kpw it takes, or 0. */
int64_t tg_cuda_attn_decode_wide_kpw(int sm_count, int min_rows, bool short_rows, int64_t ku, int64_t Tk,
                                     int64_t rows) {
    const int64_t least = min_rows > 0 ? min_rows : sm_count / 4 + 1;
    if (rows > sm_count || Tk <= (int64_t)ATD_WARPS * ku) return 0;
    if (rows < least) return short_rows && rows > 0 && Tk <= (int64_t)TG_ATD_WIDE * ku ? ku : 0;
    int64_t rounds = (Tk + (int64_t)TG_ATD_WIDE * ku - 1) / ((int64_t)TG_ATD_WIDE * ku);
    return rounds <= 4 ? rounds * ku : 0;
}

static int64_t attn_decode_wide(const tg_cuda_ctx *c, const tg_tensor *n) {
    if (!c->use_attn_decode_wide || n->src[0]->ne[0] != 128) return 0;
    const int64_t ku = 8 * (n->src[1]->type == TG_BF16 ? 2 : 1);
    /* step chains (cuda_chain.c) run the wide kernel only, so it takes
     * every row count up to the SMs there, its keys in up to 4 rounds (a
     * chain's phase takes them in as many as its warps need) */
    if (c->chain_mode) {
        const int64_t rows = n->src[0]->ne[2] * n->src[0]->ne[3], Tk = n->src[1]->ne[1];
        const int64_t rounds = (Tk + (int64_t)TG_ATD_WIDE * ku - 1) / ((int64_t)TG_ATD_WIDE * ku);
        if (rows <= c->dev->props.sm_count && rounds <= 4) return rounds * ku;
    }
    return tg_cuda_attn_decode_wide_kpw(c->dev->props.sm_count, c->attn_decode_wide_min, c->attn_decode_wide_short,
                                        ku, n->src[1]->ne[1],
                                        n->src[0]->ne[2] * n->src[0]->ne[3]);
}

static int attn_decode_kpw(const tg_cuda_ctx *c, const tg_tensor *n) {
    const int64_t ku = (n->src[0]->ne[0] == 128 ? 8 : 4) * (n->src[1]->type == TG_BF16 ? 2 : 1);
    return (int)tg_cuda_attn_decode_kpw(c->dev->props.sm_count, c->attn_decode_fill, ku, n->src[1]->ne[1],
                                        n->src[0]->ne[2] * n->src[0]->ne[3]);
}

static int64_t attn_decode_splits(const tg_cuda_ctx *c, const tg_tensor *n) {
    int64_t chunk = (int64_t)ATD_WARPS * attn_decode_kpw(c, n);
    return (n->src[1]->ne[1] + chunk - 1) / chunk;
}

/* The wide blocks a row where a row's keys split over a cluster of them
 * (attn_decode_wcl_bf16), or 0: where the wide block takes the rows and
 * a row's keys are more than one round of its warps, as many blocks a row
 * as the SMs hold one each (at most 8, the cluster's portable size, and
 * no more than the rounds), then the fewest that keep the rounds a warp
 * (so no block is left without keys): at batch 8 on 132 SMs the
 * cross-attention's 64 (head, row) pairs as 128 blocks of one round a warp,
 * not 64 of two. The self-attention's keys (one round) keep the wide
 * block. On an H100 (twenty-third session, three rounds against the switch
 * off) the step at batch 6 took 0.4752 ms against 0.4812, at 8 0.4831
 * against 0.4888 (-1.2% each, every round). */
int64_t tg_cuda_attn_decode_wcl(int sm_count, int64_t ku, int64_t Tk, int64_t rows, int64_t *out_kpw) {
    *out_kpw = 0;
    if (rows <= 0 || ku <= 0 || Tk <= 0) return 0;
    const int64_t rounds = (Tk + (int64_t)TG_ATD_WIDE * ku - 1) / ((int64_t)TG_ATD_WIDE * ku);
    int64_t p = sm_count / rows;
    if (p > rounds) p = rounds;
    if (p > 8) p = 8;
    if (p < 2) return 0;
    const int64_t r = (rounds + p - 1) / p; /* rounds a warp */
    p = (rounds + r - 1) / r;
    if (p < 2) return 0;
    *out_kpw = r * ku;
    return p;
}

/* The wide blocks' cluster for n (tg_cuda_attn_decode_wcl), or 0: BF16 K
 * and V at D = 128 where the wide block takes the rows (wide_kpw > 0),
 * clusters there, and not in a step chain (which runs the wide kernel
 * alone). CT_CUDA_ATTN_DECODE_WCL=0, or CT_CUDA_ATTN_CLUSTER=0, keeps one
 * wide block a row. */
static int64_t attn_decode_wcl(const tg_cuda_ctx *c, const tg_tensor *n, int64_t wide_kpw, int64_t *out_kpw) {
    *out_kpw = 0;
    if (!c->use_attn_decode_wcl || !c->attn_cluster || !c->dev->props.clusters || wide_kpw <= 0 || c->chain_mode ||
        n->src[1]->type != TG_BF16 || n->src[0]->ne[0] != 128)
        return 0;
    return tg_cuda_attn_decode_wcl(c->dev->props.sm_count, 16, n->src[1]->ne[1], n->src[0]->ne[2] * n->src[0]->ne[3],
                                   out_kpw);
}

/* A row's 2 to 8 chunks as one thread block cluster (attn_decode_cl*,
 * D = 128, sm_90), which combine in distributed shared memory instead of
 * the scratch and a combine launch (CT_CUDA_ATTN_CLUSTER): the chunks a
 * row, or 0. At batch 1-4 the cross-attention (438 frames in 7 chunks on
 * 132 SMs), where the wide block does not take it. */
static int64_t attn_decode_cluster(const tg_cuda_ctx *c, const tg_tensor *n) {
    if (!c->attn_cluster || !c->dev->props.clusters || n->src[0]->ne[0] != 128 || attn_decode_wide(c, n) > 0)
        return 0;
    const int64_t splits = attn_decode_splits(c, n);
    return splits >= 2 && splits <= 8 ? splits : 0;
}

size_t tg_cuda_attention_scratch(const tg_cuda_ctx *c, const tg_tensor *n) {
    if (attn_decodes(c, n)) {
        /* one chunk a row writes the output itself, or a cluster's chunks
         * combine among themselves: no partials */
        if (attn_decode_wide(c, n) > 0 || attn_decode_cluster(c, n) > 0) return 0;
        int64_t splits = attn_decode_splits(c, n);
        return splits == 1 ? 0
                           : tg_cuda_align256((size_t)splits * (size_t)(n->src[0]->ne[2] * n->src[0]->ne[3]) *
                                              (size_t)(n->src[0]->ne[0] + 2) * 4);
    }
    if (attn_splits(c, n)) return attn_split_scratch(n);
    if (!attn_packs(c, n)) return 0;
    const tg_tensor *q = n->src[0], *v = n->src[2];
    size_t heads = (size_t)(q->ne[2] * q->ne[3]), tkp = (size_t)attn_keys_padded(n);
    return tg_cuda_align256(heads * tkp * (size_t)q->ne[0] * 2) +
           tg_cuda_align256(heads * tkp * (size_t)v->ne[0] * 2);
}


/* attn_decode's blocks ask their K and V rows into L2 before their wait
 * (CT_CUDA_ATTN_PREFETCH, default on) where the call's K and V take at
 * most half of L2: a step at batch 1-8 (the cross-attention's 438 frames
 * in BF16 are 1.8 MB a batch row), not 64 (115 MB), whose early requests
 * would push each other out before they are read. */
static bool attn_decode_prefetch(const tg_cuda_ctx *c, const tg_tensor *k, const tg_tensor *v) {
    double bytes = ((double)k->ne[0] * (double)tg_type_size(k->type) + (double)v->ne[0] * (double)tg_type_size(v->type)) *
                   (double)k->ne[1] * (double)k->ne[2] * (double)k->ne[3];
    return c->attn_prefetch && tg_cuda_l2_half(c, bytes);
}

/* attn_decode's arguments for node n: kpw keys a warp, direct where a row
 * is one chunk (or block), its output od; no chunks' scratch (part 0). */
static tg_args_attn_decode decode_args(const tg_cuda_ctx *c, const tg_tensor *n, tg_t od, int kpw, bool direct) {
    const tg_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *m = n->src[3];
    return (tg_args_attn_decode){.q = tg_cuda_desc(q), .k = tg_cuda_desc(k), .v = tg_cuda_desc(v),
                                 .mask = tg_cuda_desc(m), .has_mask = m != NULL, .scale = tg_param_f32(n, 0),
                                 .kpw = kpw, .direct = direct, .prefetch = attn_decode_prefetch(c, k, v),
                                 .xr = c->attn_xr, .skip = c->attn_skip, .o = od};
}

/* The attention's output as stored: F32, or 16 bits in the first half of
 * n's own storage (n is contiguous where plan_emit allows that). */
static tg_status out_desc(tg_cuda_ctx *c, const tg_tensor *n, tg_type out_stored, tg_t *od) {
    if (out_stored != TG_F32) {
        if (!tg_is_contiguous(n))
            return tg_status_new(TG_ERR_INTERNAL, "cuda: attention '%s': a 16-bit result not contiguous", n->name);
        c->n_attn_out16++;
    }
    *od = stored_desc(n, out_stored, n);
    return NULL;
}

/* t is a leaf's storage seen through views only: no node of the graph
 * computes it (a set_rows' result is a view of its cache, but computed). */
static bool leaf_storage(const tg_tensor *t) {
    for (; t->view_src; t = t->view_src)
        if (t->op != TG_OP_VIEW) return false;
    return t->op == TG_OP_NONE;
}

void tg_cuda_next_prefetch(tg_cuda_ctx *c, tg_tensor *const *nodes, int n, int i, int len) {
    memset(&c->next_pf, 0, sizeof c->next_pf);
    if (!c->attn_pf_ahead) return;
    int j = i + len;
    while (j < n && tg_op_is_view(nodes[j]->op)) j++;
    if (j >= n || nodes[j]->op != TG_OP_ATTENTION) return;
    const tg_tensor *k = nodes[j]->src[1], *v = nodes[j]->src[2];
    if (!k || !v || !k->data || !v->data) return;
    /* 2: also K and V the graph writes (the self-attention's cache, whose
     * newest row the product before it stores: a line asked for early is
     * still read as written, L2 holding every write) */
    if (c->attn_pf_ahead < 2 && (!leaf_storage(k) || !leaf_storage(v))) return;
    const size_t kb = tg_nbytes(k), vb = tg_nbytes(v);
    if (!tg_cuda_l2_half(c, (double)kb + (double)vb)) return;
    c->next_pf.a = tg_cuda_dptr(k->data);
    c->next_pf.a_bytes = kb;
    c->next_pf.b = tg_cuda_dptr(v->data);
    c->next_pf.b_bytes = vb;
}

/* The cross q inside the clustered attention (CT_CUDA_ATTN_CROSS_Q,
 * attn_decode_clq_bf16). A decoder step's cross-attention at batch 1-4
 * runs as one cluster of chunks a (head, row) (attn_decode_cluster), and
 * the q product before it (the layer norm inside, 64 blocks at 1024 rows)
 * is a launch of its own whose only reader is that attention: 8 launches a
 * step of the 67 (at batch 1, 3.6 us each stamped, against ~1-2 us a
 * launch boundary costs). Here each block of a (head, row)'s cluster
 * computes its share of the head's 128 q rows from the normed column,
 * its weight rows in shared memory before its wait. What it needs:
 * BF16 K and V of head size 128 on the cluster path; the product's BF16
 * weights (a weight: nothing of the graph writes them) of H x 128 rows,
 * contiguous within a row, rows and start 16-byte aligned, on the mma
 * kernels when apart; x F32 contiguous, a column a batch row, K a multiple
 * of 8 and at most 8 x the block's threads (two float4 a thread), 16-byte
 * aligned, as the norm's parameters; q the add's result itself or a view
 * of all of it in [128, 1, H, B] order; the weights' share and the
 * normed column in the block's shared memory. */
enum { ATQ_THREADS = ATD_WARPS * 32, ATQ_STATIC = 4096 };
static bool f32_flat(const tg_tensor *t, int64_t n) {
    return t && t->type == TG_F32 && tg_is_contiguous(t) && tg_nelements(t) == n && t->data &&
           ((uintptr_t)t->data & 15) == 0;
}

static size_t attn_cross_q_smem(int64_t splits, int64_t K) {
    const int64_t rpb = (128 + splits - 1) / splits;
    return (size_t)(rpb * K * 2 + K * 4);
}

bool tg_cuda_attn_cross_q_ok(const tg_cuda_ctx *c, const tg_tensor *ln, const tg_tensor *mm, const tg_tensor *add,
                             const tg_tensor *bias, const tg_tensor *att) {
    if (!c->attn_cross_q || !c->dev->props.clusters || !ln || !mm || !add || !att || att->op != TG_OP_ATTENTION ||
        ln->op != TG_OP_LAYER_NORM || mm->op != TG_OP_MUL_MAT || mm->src[1] != ln)
        return false;
    const tg_tensor *q = att->src[0], *k = att->src[1], *w = mm->src[0], *x = ln->src[0];
    if (!q || !k || !w || !x || !attn_decodes(c, att) || k->type != TG_BF16 || q->ne[0] != 128 ||
        attn_decode_cluster(c, att) < 2)
        return false;
    const int64_t H = q->ne[2], B = q->ne[3], K = w->ne[0];
    /* q: all of add, in its order */
    if (q->ne[1] != 1 || !tg_is_contiguous(q) || q->data != add->data || !tg_is_contiguous(add) ||
        add->type != TG_F32 || tg_nelements(add) != 128 * H * B || add->ne[0] != 128 * H || tg_nrows(add) != B)
        return false;
    /* the weights a weight (copied before the wait, as mul_mat_vec_mma's
     * early loads are), the product one the mma kernels would run (the
     * normed column rounded to BF16 there too) */
    if (w->type != TG_BF16 || w->nb[0] != 2 || w->ne[1] != 128 * H || w->ne[2] != 1 || w->ne[3] != 1 ||
        w->nb[1] % 16 != 0 || ((uintptr_t)w->data & 15) != 0 || !w->data || !tg_cuda_is_weight(w) ||
        !tg_cuda_matvec_mma_takes(c, mm))
        return false;
    if (K % 8 != 0 || K > 8 * ATQ_THREADS || x->ne[0] != K || !f32_flat(x, K * B) || tg_nrows(x) != B)
        return false;
    if ((ln->src[1] && !f32_flat(ln->src[1], K)) || (ln->src[2] && !f32_flat(ln->src[2], K)))
        return false;
    if (bias && (bias->type != TG_F32 || !tg_is_contiguous(bias) || tg_nelements(bias) != 128 * H || !bias->data))
        return false;
    const int64_t smax = c->dev->props.smem_per_block_optin > 0 ? c->dev->props.smem_per_block_optin
                                                                 : c->dev->props.smem_per_block;
    return (int64_t)attn_cross_q_smem(attn_decode_splits(c, att), K) + ATQ_STATIC <= smax;
}

tg_status tg_cuda_encode_attn_cross_q(tg_cuda_ctx *c, CUstream s, tg_tensor *const *nodes, int i, int len,
                                      tg_type out_stored) {
    const tg_tensor *ln = nodes[i], *mm = nodes[i + 1], *add = nodes[i + 2], *n = nodes[i + len - 1];
    const tg_tensor *bias = tg_cuda_fused_parts(nodes, i + 1, 2).bias;
    if (add->op != TG_OP_ADD || !tg_cuda_attn_cross_q_ok(c, ln, mm, add, bias, n))
        return tg_status_new(TG_ERR_INTERNAL, "cuda: attention '%s': its q product fused where it does not take",
                             n->name);
    tg_t od;
    tg_status st = out_desc(c, n, out_stored, &od);
    if (st) return st;
    const tg_tensor *q = n->src[0], *w = mm->src[0];
    const int64_t H = q->ne[2], B = q->ne[3], K = w->ne[0], splits = attn_decode_splits(c, n);
    tg_args_attn_decode_clq_bf16 qa = {
        .a = decode_args(c, n, od, attn_decode_kpw(c, n), false),
        .x = tg_cuda_dptr(ln->src[0]->data),
        .w = tg_cuda_dptr(w->data),
        .bias = bias ? tg_cuda_dptr(bias->data) : 0,
        .ln_w = ln->src[1] ? tg_cuda_dptr(ln->src[1]->data) : 0,
        .ln_b = ln->src[2] ? tg_cuda_dptr(ln->src[2]->data) : 0,
        .ldx = K,
        .lda = (int64_t)w->nb[1],
        .k = (int32_t)K,
        .eps = tg_param_f32(ln, 0)};
    c->n_attn_decode++;
    c->n_attn_cluster++;
    c->n_attn_cross_q++;
    return LAUNCH_CLUSTER(c, s, "attention_split.cu", "", attn_decode_clq_bf16, (unsigned)splits, (unsigned)H,
                          (unsigned)B, ATQ_THREADS, (unsigned)attn_cross_q_smem(splits, K), qa, (unsigned)splits);
}

bool tg_cuda_attn_mask_bf16_ok(const tg_cuda_ctx *c, const tg_tensor *n) {
    return mask_in_pieces(c, n->src[3]) && !attn_decodes(c, n) && !attn_splits(c, n) && attn_packs(c, n);
}

tg_status tg_cuda_encode_attention(tg_cuda_ctx *c, CUstream s, const tg_tensor *n, tg_type mask_stored,
                                   const tg_tensor *mask_root, tg_type out_stored) {
    const tg_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *m = n->src[3];
    tg_t od;
    tg_status ost = out_desc(c, n, out_stored, &od);
    if (ost) return ost;
    float scale = tg_param_f32(n, 0);
    int64_t D = q->ne[0], Dv = v->ne[0], Tq = q->ne[1], H = q->ne[2], B = q->ne[3];
    if (Tq == 0 || H == 0 || B == 0 || Dv == 0) return NULL;
    /* a BF16 mask (its product's emit) only where the packed kernel reads
     * it in pieces, which plan_emit checked with the same function */
    if (mask_stored == TG_BF16 && !tg_cuda_attn_mask_bf16_ok(c, n))
        return tg_status_new(TG_ERR_INTERNAL, "cuda: attention '%s': a BF16 mask its kernel does not read", n->name);
    if (attn_decodes(c, n)) {
        c->n_attn_decode++;
        const int64_t wide = attn_decode_wide(c, n);
        int64_t wcl_kpw;
        const int64_t wcl = attn_decode_wcl(c, n, wide, &wcl_kpw);
        if (wcl > 0) { /* the cluster's blocks combine among themselves: no scratch */
            c->n_attn_decode_wcl++;
            c->n_attn_cluster++;
            tg_args_attn_decode wa = decode_args(c, n, od, (int)wcl_kpw, false);
            return LAUNCH_CLUSTER(c, s, "attention_split.cu", "", attn_decode_wcl_bf16, (unsigned)wcl, (unsigned)H,
                                  (unsigned)B, TG_ATD_WIDE * 32, 0, wa, (unsigned)wcl);
        }
        if (wide > 0) {
            c->n_attn_decode_wide++;
            tg_args_attn_decode wa = decode_args(c, n, od, (int)wide, true);
            return k->type == TG_BF16 ? LAUNCH(c, s, "attention_split.cu", "", attn_decode_wide_bf16, 1, (unsigned)H,
                                               (unsigned)B, TG_ATD_WIDE * 32, 0, wa)
                                      : LAUNCH(c, s, "attention_split.cu", "", attn_decode_wide, 1, (unsigned)H,
                                               (unsigned)B, TG_ATD_WIDE * 32, 0, wa);
        }
        int kpw = attn_decode_kpw(c, n);
        int64_t n_split = attn_decode_splits(c, n);
        tg_args_attn_decode da = decode_args(c, n, od, kpw, n_split == 1);
        da.part = c->scratch;
        const bool bf = k->type == TG_BF16;
        if (attn_decode_cluster(c, n) > 0) {
            /* the same blocks, combining among themselves: no scratch */
            c->n_attn_cluster++;
            da.part = 0;
            return bf ? LAUNCH_CLUSTER(c, s, "attention_split.cu", "", attn_decode_cl_bf16, (unsigned)n_split,
                                       (unsigned)H, (unsigned)B, ATD_WARPS * 32, 0, da, (unsigned)n_split)
                      : LAUNCH_CLUSTER(c, s, "attention_split.cu", "", attn_decode_cl, (unsigned)n_split,
                                       (unsigned)H, (unsigned)B, ATD_WARPS * 32, 0, da, (unsigned)n_split);
        }
        tg_status st =
            D == 128 ? (bf ? LAUNCH(c, s, "attention_split.cu", "", attn_decode_bf16, (unsigned)n_split, (unsigned)H,
                                    (unsigned)B, ATD_WARPS * 32, 0, da)
                           : LAUNCH(c, s, "attention_split.cu", "", attn_decode, (unsigned)n_split, (unsigned)H,
                                    (unsigned)B, ATD_WARPS * 32, 0, da))
                     : (bf ? LAUNCH(c, s, "attention_split.cu", "", attn_decode_d256_bf16, (unsigned)n_split,
                                    (unsigned)H, (unsigned)B, ATD_WARPS * 32, 0, da)
                           : LAUNCH(c, s, "attention_split.cu", "", attn_decode_d256, (unsigned)n_split,
                                    (unsigned)H, (unsigned)B, ATD_WARPS * 32, 0, da));
        if (st || n_split == 1) return st;
        tg_args_attn_split_combine ca = {.o = od, .part = c->scratch, .n_split = (int)n_split, .tq = 1, .h = (int)H};
        return LAUNCH(c, s, "attention_split.cu", "", attn_split_combine, 1, (unsigned)H, (unsigned)B, 128, 0, ca);
    }
    if (attn_splits(c, n)) {
        c->n_attn_split++;
        tg_args_attn_split sa = {.part = c->scratch, .q = tg_cuda_desc(q), .k = tg_cuda_desc(k), .v = tg_cuda_desc(v), .mask = tg_cuda_desc(m),
                                 .has_mask = m != NULL, .scale = scale};
        int n_split = (int)((k->ne[1] + ATS_CHUNK - 1) / ATS_CHUNK);
        tg_status st = c->use_attn_split_kt ? LAUNCH(c, s, "attention_split.cu", "", attn_split_kt, (unsigned)n_split,
                                                     (unsigned)H, (unsigned)B, 128, 0, sa)
                                            : LAUNCH(c, s, "attention_split.cu", "", attn_split, (unsigned)n_split,
                                                     (unsigned)H, (unsigned)B, 128, 0, sa);
        if (st) return st;
        tg_args_attn_split_combine ca = {.o = od, .part = c->scratch, .n_split = n_split, .tq = (int)Tq, .h = (int)H};
        return LAUNCH(c, s, "attention_split.cu", "", attn_split_combine, (unsigned)Tq, (unsigned)H, (unsigned)B,
                      128, 0, ca);
    }
    tg_args_attention args = {
        .o = od, .q = tg_cuda_desc(q), .k = tg_cuda_desc(k), .v = tg_cuda_desc(v), .mask = tg_cuda_desc(m), .has_mask = m != NULL, .scale = scale};
    if (attn_use_mma(c, n)) {
        /* Tensor cores: bf16 operands, f32 accumulation (attention_mma.cu);
         * beyond one block of queries per head, K and V are packed into the
         * scratch first. */
        char mdefs[48];
        snprintf(mdefs, sizeof mdefs, TG_DEFS_AM, (int)D, (int)Dv);
        unsigned msmem = (unsigned)((64 * (D + 8) + Dv * (64 + 8)) * 2);
        if (!attn_packs(c, n))
            return LAUNCH(c, s, "attention_mma.cu", mdefs, attention_mma, (unsigned)((Tq + 63) / 64), (unsigned)H,
                          (unsigned)B, 128, msmem, args);
        int Tkp = (int)attn_keys_padded(n);
        size_t heads = (size_t)(H * B);
        uint64_t kp = c->scratch, vt = c->scratch + tg_cuda_align256(heads * (size_t)Tkp * (size_t)D * 2);
        tg_status st;
        unsigned kx = tg_cuda_grid(c, (int64_t)Tkp * D / 2 * (int64_t)heads, 256) / (unsigned)heads;
        tg_args_attn_pack_k pk = {.dst = kp, .t = args.k, .tkp = Tkp};
        if ((st = LAUNCH(c, s, "attention_mma.cu", mdefs, attn_pack_k, kx ? kx : 1, (unsigned)heads, 1, 256, 0, pk)))
            return st;
        tg_args_attn_pack_vt pv = {.dst = vt, .t = args.v, .tkp = Tkp};
        if ((st = LAUNCH(c, s, "attention_mma.cu", mdefs, attn_pack_vt, (unsigned)(Tkp / 32),
                         (unsigned)((Dv + 31) / 32), (unsigned)heads, 256, 0, pv)))
            return st;
        /* the mask tile in 16-byte pieces (its rows' table follows the
         * groups' tiles) */
        const bool m16 = mask_in_pieces(c, m);
        const tg_t md = stored_desc(m, mask_stored, mask_root);
        tg_args_attention_mma_packed pa = {.o = args.o,
                                           .q = args.q,
                                           .k = args.k,
                                           .v = args.v,
                                           .kp = kp,
                                           .vtp = vt,
                                           .mask = md,
                                           .tkp = Tkp,
                                           .has_mask = args.has_mask,
                                           .scale = scale,
                                           .opt = m16 ? TG_AM_MASK16 : 0,
                                           .mask_end = m ? desc_end(&md) : 0};
        /* a key group's tiles and the block's 64 x 64 mask tile (rows of
         * 64 + 8 floats), then the mask rows' addresses */
        const unsigned group = msmem + (m ? 64u * (64 + 8) * 4 : 0u), table = m16 ? 64u * 8u : 0u;
        const unsigned qb = (unsigned)((Tq + 63) / 64);
        const int64_t smem_max = c->dev->props.smem_per_block_optin > 0 ? c->dev->props.smem_per_block_optin
                                                                         : c->dev->props.smem_per_block;
        const int groups = tg_cuda_attn_mma_groups(c->dev->props.sm_count, (int64_t)qb * H * B, k->ne[1], c->attn_groups,
                                                   (int64_t)TG_AM_GROUPS * group + table, smem_max);
        unsigned psmem = (unsigned)groups * group + table;
        /* Q's 64 rows staged ahead of the first key tile, after the rows'
         * table (its room kept whether or not it is used), where the block
         * may have that much (not at D = 160 on sm_86/89's 99 KB) */
        const unsigned qsmem = group + TG_AM_QSTAGE_OFF + 64u * (unsigned)(D + 8) * 4u;
        const bool qs = groups == 1 && q_stageable(c, q, D) && (int64_t)qsmem <= smem_max;
        if (qs) {
            psmem = qsmem;
            c->n_attn_qstage++;
        }
        if (m16) c->n_attn_mask16++;
        if (mask_stored == TG_BF16) c->n_attn_mask_bf16++;
        if (groups > 1) {
            c->n_attn_groups++;
            return LAUNCH(c, s, "attention_mma.cu", mdefs, attention_mma_packed2, qb, (unsigned)H, (unsigned)B,
                          128u * (unsigned)groups, psmem, pa);
        }
        if (qs)
            return LAUNCH(c, s, "attention_mma.cu", mdefs, attention_mma_packed_qs, qb, (unsigned)H, (unsigned)B, 128,
                          psmem, pa);
        return LAUNCH(c, s, "attention_mma.cu", mdefs, attention_mma_packed, qb, (unsigned)H, (unsigned)B, 128, psmem,
                      pa);
    }
    char defs[32];
    /* At least 2: with a single accumulator per lane, NVRTC 13.0's front end
     * does not finish compiling the kernel. */
    int dvl = (int)((Dv + 31) / 32);
    snprintf(defs, sizeof defs, TG_DEFS_DVL, dvl < 2 ? 2 : dvl);
    unsigned smem = (unsigned)((32 * (D + 1) + 32 * Dv + 16 * D) * 4);
    return LAUNCH(c, s, "attention.cu", defs, attention, (unsigned)((Tq + 15) / 16), (unsigned)H, (unsigned)B, 128,
                  smem, args);
}
