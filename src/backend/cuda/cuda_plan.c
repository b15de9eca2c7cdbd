/*
 * cuda_plan.c: what the CUDA backend decides about a graph before it
 * encodes it (tg_cuda_plan_make): each node's readers inside the graph and
 * outside it, the fused groups (cuda_fusion.c's rules), the type each node
 * stores (the emit fusion: BF16 for readers that convert to it anyway), the
 * hazard class and concurrency run of each node.
 *
 * A plan is made at every compute that encodes (a capture, or direct
 * launches), never at a replay, so its cost is host time per encode, linear
 * in the graph's nodes (readers through a map from tensor to node).
 *
 * Not here: the fusion rules themselves (cuda_fusion.c), the hazard runs
 * (src/tensor/hazard.c), the encoding and the graphs (cuda_context.c).
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "hazard.h"
#include "op_params.h"
#include "ptrmap.h"

void tg_cuda_plan_free(tg_cuda_plan *p) {
    tg_free(p->emit);
    tg_free(p->mask16);
    tg_free(p->bias16);
    tg_free(p->uses);
    tg_free(p->run);
    tg_free(p->cls);
    tg_free(p->fuse);
    tg_free(p->writes);
}

/* The emit fusion: a node whose only readers are matrix products taking it
 * as activations, all with BF16 (or all F16) weights at default precision,
 * stores that type directly (in the first half of its own storage), so the
 * products skip their conversion pass. Never for outputs, nodes read outside
 * this graph (plan_make counts those), or a node whose result a fused group
 * writes, except the conv module group's last node, whose kernel
 * (conv_glu_dw_silu_c4) stores the 16-bit result itself, and the second of
 * two layer norms in one launch (layer_norm2_w4, likewise). */
/* True when s (a source, or a view's view_src) reaches t along its view
 * chain before any node of g other than t (nodes lo .. hi - 1 searched):
 * plan_make's rule for which node a read counts for. */
static bool first_node_is(const tg_graph *g, const tg_tensor *s, const tg_tensor *t, int lo, int hi) {
    for (const tg_tensor *x = s; x; x = x->view_src) {
        if (x == t) return true;
        for (int k = lo; k < hi; k++)
            if (g->nodes[k] == x) return false;
    }
    return false;
}

/* One read of node i by node j: its source k through s, or (k ==
 * TG_MAX_SRC) j a view of it; arg is the walk's own. */
typedef bool (*read_fn)(const tg_graph *g, const tg_cuda_plan *p, int i, int j, int k, const tg_tensor *s, int depth,
                        void *arg);

/* True when node i is read inside this graph (p->uses[i] reads, as
 * plan_make counts them), every reader at most `reach` nodes on, and fn
 * takes every read. */
static bool every_read(const tg_graph *g, const tg_cuda_plan *p, int i, int reach, int depth, read_fn fn, void *arg) {
    const tg_tensor *t = g->nodes[i];
    int n = g->n_nodes, reads = 0;
    for (int j = i + 1; j < n && j <= i + reach; j++) {
        const tg_tensor *u = g->nodes[j];
        for (int k = 0; k <= TG_MAX_SRC; k++) {
            const tg_tensor *s = k < TG_MAX_SRC ? u->src[k] : u->view_src;
            if (!s || !first_node_is(g, s, t, i + 1, j)) continue;
            reads++;
            if (!fn(g, p, i, j, k, s, depth, arg)) return false;
        }
    }
    return reads > 0 && reads == p->uses[i];
}

typedef struct mask_walk {
    const tg_cuda_ctx *c;
    uint8_t *mark;
} mask_walk;

/* A read as the mask of a packed tensor-core attention that stages it in
 * 16-byte pieces (tg_cuda_attn_mask_bf16_ok), or by a view that is a node
 * itself (its one read is its view_src) whose own reads are all such (views
 * of views, to depth 4). With mark, those attentions are marked. */
static bool mask_read(const tg_graph *g, const tg_cuda_plan *p, int i, int j, int k, const tg_tensor *s, int depth,
                      void *arg) {
    (void)i, (void)s;
    mask_walk *w = arg;
    const tg_tensor *u = g->nodes[j];
    if (u->op == TG_OP_ATTENTION && k == 3 && tg_cuda_attn_mask_bf16_ok(w->c, u)) {
        if (w->mark) w->mark[j] = 1;
        return true;
    }
    return u->op == TG_OP_VIEW && k == TG_MAX_SRC && depth < 4 && !(u->flags & TG_FLAG_OUTPUT) &&
           every_read(g, p, j, 64, depth + 1, mask_read, arg);
}

/* Every read of node i is the mask of such an attention, directly or
 * through views. */
static bool read_as_masks(const tg_cuda_ctx *c, const tg_graph *g, const tg_cuda_plan *p, int i, int depth, uint8_t *mark) {
    mask_walk w = {c, mark};
    return every_read(g, p, i, 64, depth, mask_read, &w);
}

/* A product alone in its launch read only as the mask of packed
 * tensor-core attentions that stage it in 16-byte pieces (the encoder's
 * rel-pos term BD, read through its shifted view): it may store BF16
 * (CT_CUDA_ATTN_BD16), halving its stores and the attention's mask reads.
 * More than 64 columns, so never on matvec.cu; rows a multiple of 8, so
 * cuBLASLt's BF16 columns are 16-byte aligned as its F32 ones are (the
 * encoder's table has 880 rows at 35 s); BF16 operands with F32 sums,
 * for which cuBLASLt has BF16 results. The attentions reading it are
 * marked in p->mask16, which their encode reads. */
static bool mask_only(const tg_cuda_ctx *c, const tg_graph *g, tg_cuda_plan *p, int i) {
    const tg_tensor *t = g->nodes[i];
    if (!c->attn_bd16 || !c->dev->props.bf16 || t->type != TG_F32 || t->ne[1] <= 64 || t->ne[0] % 8 != 0 ||
        ((uintptr_t)t->data & 15) != 0 || !tg_is_contiguous(t) || !tg_cuda_mm_bf16_operands(c, t))
        return false;
    return read_as_masks(c, g, p, i, 0, NULL) && read_as_masks(c, g, p, i, 0, p->mask16);
}

/* s reaches t through views that each keep their source's elements where
 * they are (contiguous reshapes at its start), or is t: a reader of t's
 * 16-bit store then finds each element where it looks. */
static bool plain_views_to(const tg_tensor *s, const tg_tensor *t) {
    for (; s && s != t; s = s->view_src)
        if (s->op != TG_OP_VIEW || !s->view_src || s->data != s->view_src->data || !tg_is_contiguous(s) ||
            tg_nelements(s) != tg_nelements(s->view_src))
            return false;
    return s == t;
}

static bool reaches(const tg_tensor *s, const tg_tensor *t) {
    for (; s; s = s->view_src)
        if (s == t) return true;
    return false;
}

typedef struct operand_reads {
    tg_type wt;  /* the reading products' weight type, F32 while none */
    bool unary;  /* a unary op reads it (ew_unary_b4: BF16 only), or the conv module's kernel */
} operand_reads;

typedef struct operand_walk {
    int root;    /* the node that stores 16 bits */
    bool unary;  /* unary readers allowed */
    operand_reads *r;
} operand_walk;

/* How far on a reader of node i may be: 64 nodes, and at most root + 250,
 * which the encode's lookup (TG_CUDA_STORED_REACH nodes back) still finds. */
static int operand_reach(const operand_walk *w, int i) {
    const int last = w->root + TG_CUDA_STORED_REACH - 6;
    return last - i < 64 ? last - i : 64;
}

/* A read that takes node i as a 16-bit operand: a product's activations
 * against BF16 (or all F16) weights at default precision, through plain
 * views; a view that is a node whose own reads are all such; with unary,
 * a unary op's direct source that ew_unary_b4 reads (never in place: it
 * writes 16 bytes where it read 8), or the GLU input of a conv module
 * group (its result apart from its input: conv_glu_fuse_len). */
static bool operand_read(const tg_graph *g, const tg_cuda_plan *p, int i, int j, int k, const tg_tensor *s, int depth,
                         void *arg) {
    operand_walk *wk = arg;
    const tg_tensor *t = g->nodes[i], *u = g->nodes[j];
    if (k == TG_MAX_SRC)
        return u->op == TG_OP_VIEW && depth < 4 && !(u->flags & TG_FLAG_OUTPUT) && plain_views_to(u, t) &&
               every_read(g, p, j, operand_reach(wk, j), depth + 1, operand_read, arg);
    const tg_tensor *w = u->src[0];
    operand_reads *r = wk->r;
    if (u->op == TG_OP_MUL_MAT && k == 1 && plain_views_to(s, t) && !reaches(w, t) &&
        (w->type == TG_BF16 || w->type == TG_F16) && tg_node_prec(u) == TG_PREC_DEFAULT &&
        (r->wt == TG_F32 || r->wt == w->type)) {
        r->wt = w->type;
        return true;
    }
    if (wk->unary && k == 0 && s == t && tg_cuda_unary_takes16(u) && !tg_hazard_overlap(u, t)) {
        r->unary = true;
        return true;
    }
    /* the conv module's fused kernel (conv_glu_dw_silu_c4) reads its
     * GLU's input in BF16 too, and adds a bias left to it: the product's
     * own result, never through a view (the kernel takes its layout) */
    if (wk->unary && k == 0 && s == t && i == wk->root && u->op == TG_OP_GLU && p->fuse[j] == 4) {
        r->unary = true;
        return true;
    }
    return false;
}

/* Every read of node i (as plan_make counts them, p->uses[i]) takes it as
 * a 16-bit operand (operand_read); r gathers the readers' kinds. */
static bool read_as_operands(const tg_graph *g, const tg_cuda_plan *p, int i, bool unary, operand_reads *r) {
    operand_walk w = {i, unary, r};
    return every_read(g, p, i, operand_reach(&w, i), 0, operand_read, &w);
}

/* The 16-bit type node i (F32, contiguous, read only inside this graph)
 * may store for its readers, F32 when none: BF16 where unary ops read it,
 * else the reading products' weight type. */
static tg_type operand_type_of(const tg_graph *g, const tg_cuda_plan *p, int i, bool unary, operand_reads *r) {
    const tg_tensor *t = g->nodes[i];
    if (t->type != TG_F32 || !tg_is_contiguous(t) || ((uintptr_t)t->data & 15) != 0 || (t->flags & TG_FLAG_OUTPUT) ||
        p->uses[i] < 1 || !read_as_operands(g, p, i, unary, r))
        return TG_F32;
    if (r->unary) return r->wt == TG_F32 || r->wt == TG_BF16 ? TG_BF16 : TG_F32;
    return r->wt;
}

static tg_type operand_type(const tg_graph *g, const tg_cuda_plan *p, int i, bool unary) {
    operand_reads r = {TG_F32, false};
    return operand_type_of(g, p, i, unary, &r);
}

/* A product alone, or the last node of a product's group, that cuBLASLt
 * runs and that may store BF16 there: BF16 operands, a bias, relu or
 * scale after it but no residual (C is read in D's type), no cache write,
 * not on matvec.cu (which stores F32 only). */
static bool product_tail_16(const tg_cuda_ctx *c, tg_tensor *const *nodes, int head, int len) {
    const tg_tensor *tail = nodes[head + len - 1];
    if (nodes[head]->op != TG_OP_MUL_MAT || tail->op == TG_OP_SET_ROWS) return false;
    if (len > 1 && tg_cuda_fused_parts(nodes, head, len).res) return false;
    return !tg_cuda_product_on_matvec(c, nodes[head], tail) && tg_cuda_mm_bf16_operands(c, nodes[head]);
}

static void plan_emit(tg_cuda_ctx *c, tg_graph *g, tg_cuda_plan *p) {
    int n = g->n_nodes;
    if (!c->use_fusion || c->dev->props.tc_level == 0) return;
    for (int i = 0, head = -1; i < n; i++) {
        tg_tensor *t = g->nodes[i];
        if (p->fuse[i] > 0) head = i;
        /* covered by a fused group, or a node leading one: never emits;
         * except the last node of a conv module group, whose kernel
         * stores what that node would (conv_glu_dw_silu_c4), and the
         * second of two layer norms in one launch (layer_norm2_w4, which
         * stores it as layer_norm_w4 would) */
        const bool tail = p->fuse[i] == 0 && head >= 0 && head + p->fuse[head] - 1 == i;
        const bool stores_tail =
            tail && (g->nodes[head]->op == TG_OP_GLU ||
                     (p->fuse[head] == 2 && g->nodes[head]->op == TG_OP_LAYER_NORM && t->op == TG_OP_LAYER_NORM));
        if (t->op == TG_OP_MUL_MAT && p->fuse[i] == 1 && p->uses[i] >= 1 && !(t->flags & TG_FLAG_OUTPUT) &&
            mask_only(c, g, p, i)) {
            p->emit[i] = TG_BF16;
            continue;
        }
        /* a product's (or its group's) result read only by unary ops (the
         * encoder's feed-forward silu) or products (the decoder's
         * feed-forward at more columns than matvec.cu takes): stored BF16
         * by cuBLASLt */
        const int ph = tail ? head : i, plen = tail ? p->fuse[head] : 1;
        if ((tail || p->fuse[i] == 1) && c->emit_tails && product_tail_16(c, g->nodes, ph, plen)) {
            /* rows a multiple of 8 (16-byte BF16 columns, as the F32
             * ones), and an algorithm for the BF16 result: cuBLASLt has
             * none with an F32 bias (an H100, eleventh session), so
             * where unary ops alone read it and no relu follows the bias,
             * the product stores its sums and the readers add the bias
             * (ew_unary_b4; CT_CUDA_EMIT_DEFER, on: -2.7% at batch 64,
             * twelfth session); else with the bias, where cuBLASLt finds
             * an algorithm */
            operand_reads r = {TG_F32, false};
            const tg_cuda_fused f = tg_cuda_fused_parts(g->nodes, ph, plen);
            /* the bias a weight: the readers read it after the add, its
             * last reader as the planner and the hazard runs see it */
            const bool defer = c->emit_defer && f.bias && !f.relu && tg_cuda_is_weight(f.bias) &&
                               f.bias->type == TG_F32 &&
                               tg_is_contiguous(f.bias) && tg_nelements(f.bias) == t->ne[0] &&
                               ((uintptr_t)f.bias->data & 15) == 0;
            if (t->ne[0] % 8 == 0 && operand_type_of(g, p, i, true, &r) == TG_BF16) {
                const bool drop = defer && r.wt == TG_F32;
                if (tg_cuda_mm_d16_ok(c, g->nodes, ph, plen, tg_cuda_stored_type(p->emit, g->nodes, ph, g->nodes[ph]->src[1]), drop)) {
                    p->emit[i] = TG_BF16;
                    p->bias16[i] = drop;
                }
            }
            continue;
        }
        /* an attention's result read only by products (its out projection):
         * stored in their type by the attention's kernel, no conversion
         * pass in front of cuBLASLt, half the bytes for matvec.cu; also
         * where its q product runs inside it (CT_CUDA_ATTN_CROSS_Q: the
         * group's last node, its kernel the attention's) */
        const bool cross_q = tail && g->nodes[head]->op == TG_OP_LAYER_NORM;
        if ((p->fuse[i] == 1 || cross_q) && t->op == TG_OP_ATTENTION && c->emit_attn) {
            p->emit[i] = operand_type(g, p, i, false);
            continue;
        }
        if (p->fuse[i] != 1 && !stores_tail) continue;
        if (p->uses[i] < 1 || (t->flags & TG_FLAG_OUTPUT)) continue;
        if (!tg_cuda_can_emit16(t)) continue;
        int readers = 0;
        tg_type wt = TG_F32;
        bool ok = true;
        for (int j = i + 1; j < n && j <= i + 64 && ok; j++) {
            const tg_tensor *r = g->nodes[j];
            bool reads = false;
            for (int k = 0; k < TG_MAX_SRC; k++) reads = reads || r->src[k] == t;
            if (!reads) continue;
            ok = r->op == TG_OP_MUL_MAT && r->src[1] == t && r->src[0] != t &&
                 (r->src[0]->type == TG_BF16 || r->src[0]->type == TG_F16) && tg_node_prec(r) == TG_PREC_DEFAULT &&
                 (wt == TG_F32 || wt == r->src[0]->type);
            wt = r->src[0]->type;
            readers++;
        }
        if (ok && readers == p->uses[i] && wt != TG_F32) p->emit[i] = wt;
    }
}

/* Nodes that use the scratch (matrix products converting an operand,
 * attention packing K and V) share it: one per run. A product with at
 * least a tile of 128 x 128 outputs per SM fills the GPU by itself, and a
 * node beside it only takes SMs from its waves (measured: a layer norm
 * running beside a 1280 -> 5120 product of 3504 rows made the pair 9%
 * slower than in turn), so it runs alone. */
static uint8_t hazard_class(const tg_cuda_ctx *c, const tg_tensor *t) {
    if (t->op != TG_OP_MUL_MAT) return tg_cuda_op_scratch(c, t) > 0 ? TG_HAZARD_SHARED : TG_HAZARD_FREE;
    int64_t tiles = ((t->ne[0] + 127) / 128) * ((t->ne[1] + 127) / 128) * t->ne[2] * t->ne[3];
    return tiles >= c->dev->props.sm_count ? TG_HAZARD_ALONE : TG_HAZARD_SHARED;
}

/* The node s is, or the node a chain of view tensors that are not nodes
 * leads to from s; -1 when none (a leaf, or another graph's tensor). */
static int node_through_views(const tg_ptrmap *idx, const tg_tensor *s) {
    for (; s; s = s->view_src) {
        int j = tg_ptrmap_get(idx, s);
        if (j >= 0 || s->op != TG_OP_VIEW) return j;
    }
    return -1;
}

tg_status tg_cuda_plan_make(tg_cuda_ctx *c, tg_graph *g, tg_cuda_plan *p) {
    int n = g->n_nodes;
    memset(p, 0, sizeof *p);
    p->uses = tg_calloc((size_t)n + 1, sizeof *p->uses);
    p->run = tg_calloc((size_t)n + 1, sizeof *p->run);
    p->cls = tg_calloc((size_t)n + 1, sizeof *p->cls);
    p->emit = tg_calloc((size_t)n + 1, sizeof *p->emit);
    p->mask16 = tg_calloc((size_t)n + 1, sizeof *p->mask16);
    p->bias16 = tg_calloc((size_t)n + 1, sizeof *p->bias16);
    p->fuse = tg_calloc((size_t)n + 1, sizeof *p->fuse);
    p->writes = tg_calloc((size_t)n + 1, sizeof *p->writes);
    if (!p->uses || !p->run || !p->cls || !p->emit || !p->fuse || !p->writes || !p->mask16 || !p->bias16) {
        tg_cuda_plan_free(p);
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: graph plan", c->name);
    }
    /* Readers of each node: through sources and view chains, found with a
     * map from tensor to node index (linear in the graph). */
    tg_ptrmap idx = {0};
    int *direct = tg_calloc((size_t)n + 1, sizeof *direct);
    if (!direct) goto oom;
    for (int i = 0; i < n; i++) {
        tg_tensor *t = g->nodes[i];
        p->cls[i] = hazard_class(c, t);
        for (int k = 0; k <= TG_MAX_SRC; k++) {
            const tg_tensor *s = k < TG_MAX_SRC ? t->src[k] : t->view_src;
            int j = node_through_views(&idx, s);
            if (j >= 0) direct[j]++;
            for (; s; s = s->view_src) {
                j = tg_ptrmap_get(&idx, s);
                if (j >= 0) {
                    p->uses[j] += i - j <= 64 ? 1 : 2; /* far readers block fusion */
                    break;
                }
            }
        }
        if (!tg_ptrmap_put(&idx, t, i)) goto oom;
    }
    /* Readers outside this graph (the scheduler's other splits, other
     * graphs of the context) are every tensor of the context that names a
     * node, directly or through views that are not nodes: a node with any
     * of those never fuses away. A view the split left out reads nothing
     * itself; its readers count (each node's own reads were counted the
     * same way above), so a node read only through such a view by the next
     * node (the decoder's embedding sum, reshaped for its norm) may still
     * fuse; unless the view is an output (the host reads it). */
    if (c->use_fusion && g->ctx) {
        int n_t = tg_ctx_n_tensors(g->ctx);
        for (int i = 0; i < n_t; i++) {
            const tg_tensor *t = tg_ctx_tensor(g->ctx, i);
            if (t->op == TG_OP_VIEW && !(t->flags & TG_FLAG_OUTPUT) && tg_ptrmap_get(&idx, t) < 0) continue;
            for (int k = 0; k <= TG_MAX_SRC; k++) {
                int j = node_through_views(&idx, k < TG_MAX_SRC ? t->src[k] : t->view_src);
                if (j >= 0) direct[j]--;
            }
        }
        for (int j = 0; j < n; j++)
            if (direct[j] < 0) p->uses[j] += 2;
    } else if (g->borrowed) {
        for (int j = 0; j < n; j++) p->uses[j] += 2;
    }
    tg_free(direct);
    tg_ptrmap_clear(&idx);
    /* A fused group is one launch: it writes its last node's result at its
     * first node's place in the order, so the hazard runs see it as one
     * node there (else that write could land beside a run's last reader of
     * the memory the planner gave it). */
    for (int i = 0; i < n;) {
        int len = tg_op_is_view(g->nodes[i]->op) ? 1 : tg_cuda_fuse_len(c, g->nodes, n, i, p->uses);
        p->fuse[i] = len;
        for (int k = 1; k < len; k++) p->fuse[i + k] = 0;
        if (len > 1) tg_cuda_group_writes(g->nodes, i, len, p->writes);
        i += len;
    }
    plan_emit(c, g, p);
    p->n_runs = tg_hazard_runs_grouped(g->nodes, n, p->cls, p->fuse, p->writes, CUDA_N_STREAMS * 4, p->run);
    if (p->n_runs < 0) {
        tg_cuda_plan_free(p);
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: hazard runs", c->name);
    }
    return NULL;
oom:
    tg_free(direct);
    tg_ptrmap_clear(&idx);
    tg_cuda_plan_free(p);
    return tg_status_new(TG_ERR_NO_MEMORY, "%s: graph plan", c->name);
}
