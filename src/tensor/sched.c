/*
 * sched.c: the scheduler: places each node of a graph on a backend, cuts the
 * graph into splits (runs of consecutive nodes on one backend), inserts copies
 * where a split reads a tensor that lives on another backend, plans one arena
 * per backend and runs the splits in order.
 *
 * Placement, in order of precedence:
 *   1. a node that writes into storage the user placed (or into its view
 *      source, for in-place writers) runs on that storage's backend;
 *   2. a node reading a weight (a leaf the user placed in a buffer) runs on
 *      the weight's backend if it supports the op, else on the CPU;
 *   3. otherwise on its first placed source's backend if that supports the
 *      op, else on the highest-priority backend that does, else the CPU.
 * Views compute nothing, belong to no split and live where their root lives.
 * Inputs (leaves without storage) go to the arena of their first consumer.
 *
 * Copies: one per (source, backend), made before the first split on that
 * backend that reads it and kept for later splits there. While a split runs,
 * its nodes' source pointers are swapped to the copies and restored after, so
 * the caller's graph is unchanged between calls.
 *
 * Not here: the allocator (planner.c); any computation.
 */
#include <stdint.h>
#include <string.h>

#include "base.h"
#include "planner.h"
#include "ptrmap.h"
#include "tensor_internal.h"

typedef struct rewire {
    tg_tensor *node;
    int slot;
    tg_tensor *copy;
} rewire;

typedef struct copy_op {
    tg_tensor *src;
    tg_tensor *dst;     /* the copy, in the consumer backend's arena */
    int src_backend;
} copy_op;

typedef struct split {
    int backend;
    tg_graph *graph;    /* borrowed nodes */
    int copy_begin, copy_end;     /* copies made before it runs */
    int rewire_begin, rewire_end; /* source swaps while it runs */
} split;

struct tg_sched {
    tg_backend **backends;
    int n_backends;
    int cpu;                 /* index of the CPU backend */
    tg_buffer **arenas;      /* per backend, grows, never shrinks */
    size_t *planned;         /* per backend, the last plan's peak */

    /* the last allocation */
    uint64_t signature;
    const tg_graph *graph;
    tg_ptrmap where;         /* tensor -> backend index */
    split *splits;
    int n_splits, cap_splits;
    copy_op *copies;
    int n_copies, cap_copies;
    rewire *rewires;
    int n_rewires, cap_rewires;
    tg_ctx *copy_ctx;        /* owns the copy tensors */
};

/* ------------------------------------------------------------- lifetime */

tg_status tg_sched_new(tg_backend **backends, int n_backends, tg_sched **out_sched) {
    if (!out_sched) return tg_status_new(TG_ERR_INVALID_ARG, "sched_new: NULL output");
    *out_sched = NULL;
    if (!backends || n_backends < 1)
        return tg_status_new(TG_ERR_INVALID_ARG, "sched_new: no backends");
    int cpu = -1;
    for (int i = 0; i < n_backends; i++) {
        if (!backends[i])
            return tg_status_new(TG_ERR_INVALID_ARG, "sched_new: backend %d is NULL", i);
        if (cpu < 0 && tg_backend_is_cpu(backends[i])) cpu = i;
    }
    if (cpu < 0)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "sched_new: none of the %d backends is a CPU backend (needed as "
                             "the fallback)",
                             n_backends);
    tg_sched *s = tg_calloc(1, sizeof *s);
    if (!s) goto oom;
    s->backends = tg_calloc((size_t)n_backends, sizeof *s->backends);
    s->arenas = tg_calloc((size_t)n_backends, sizeof *s->arenas);
    s->planned = tg_calloc((size_t)n_backends, sizeof *s->planned);
    if (!s->backends || !s->arenas || !s->planned) goto oom;
    memcpy(s->backends, backends, (size_t)n_backends * sizeof *backends);
    s->n_backends = n_backends;
    s->cpu = cpu;
    *out_sched = s;
    return NULL;
oom:
    tg_sched_free(s);
    return tg_status_new(TG_ERR_NO_MEMORY, "sched_new: out of memory");
}

static void reset_plan(tg_sched *s) {
    for (int i = 0; i < s->n_splits; i++) tg_graph_destroy(s->splits[i].graph);
    s->n_splits = s->n_copies = s->n_rewires = 0;
    tg_ptrmap_clear(&s->where);
    tg_ctx_free(s->copy_ctx);
    s->copy_ctx = NULL;
    s->graph = NULL;
    s->signature = 0;
}

void tg_sched_free(tg_sched *s) {
    if (!s) return;
    reset_plan(s);
    for (int i = 0; s->arenas && i < s->n_backends; i++) tg_buffer_free(s->arenas[i]);
    tg_free(s->arenas);
    tg_free(s->planned);
    tg_free(s->backends);
    tg_free(s->splits);
    tg_free(s->copies);
    tg_free(s->rewires);
    tg_free(s);
}

void tg_sched_release(tg_sched *s) {
    if (!s) return;
    reset_plan(s);
    for (int b = 0; s->arenas && b < s->n_backends; b++) {
        tg_buffer_free(s->arenas[b]);
        s->arenas[b] = NULL;
        s->planned[b] = 0;
    }
}

int tg_sched_n_splits(const tg_sched *s) { return s ? s->n_splits : 0; }
int tg_sched_n_copies(const tg_sched *s) { return s ? s->n_copies : 0; }

tg_backend *tg_sched_node_backend(const tg_sched *s, const tg_tensor *node) {
    if (!s || !node) return NULL;
    int b = tg_ptrmap_get(&s->where, node);
    if (b < 0) b = tg_ptrmap_get(&s->where, tg_tensor_root(node));
    return b >= 0 ? s->backends[b] : NULL;
}

size_t tg_sched_planned_bytes(const tg_sched *s, const tg_backend *backend) {
    for (int i = 0; s && i < s->n_backends; i++)
        if (s->backends[i] == backend) return s->planned[i];
    return 0;
}

/* ------------------------------------------------------------ placement */

static bool is_user_placed(const tg_tensor *t) {
    return t->buffer && !(t->flags & TG_FLAG_SCHED_PLACED);
}

/* The index of the backend holding a user-placed buffer; -1 when it is none
 * of ours (a host buffer of a foreign backend counts as the CPU's). */
static int buffer_backend(const tg_sched *s, const tg_buffer *buf) {
    for (int i = 0; i < s->n_backends; i++)
        if (s->backends[i] == buf->backend) return i;
    return buf->host ? s->cpu : -1;
}

/* The backend of t's storage as known so far: user-placed roots by their
 * buffer, planned ones by where they were put; -1 when not yet decided. */
static int storage_backend(const tg_sched *s, const tg_tensor *t) {
    const tg_tensor *r = tg_tensor_root(t);
    if (is_user_placed(r)) return buffer_backend(s, r->buffer);
    return tg_ptrmap_get(&s->where, r);
}

static bool supports(tg_sched *s, int b, const tg_tensor *node) {
    return b >= 0 && tg_backend_supports_op(s->backends[b], node);
}

static tg_status place_node(tg_sched *s, tg_tensor *n, int *out_b) {
    char d[TG_DESC_SIZE];
    const tg_tensor *root = tg_tensor_root(n);
    /* 1: storage fixed by the user (or by an in-place writer's view source) */
    if (is_user_placed(root) || (n->view_src && storage_backend(s, root) >= 0)) {
        int b = storage_backend(s, root);
        if (b < 0)
            return tg_status_new(TG_ERR_INVALID_ARG,
                                 "sched: node %s writes into a buffer of a backend the "
                                 "scheduler does not have",
                                 tg_tensor_desc(n, d, sizeof d));
        if (!supports(s, b, n))
            return tg_status_new(TG_ERR_UNSUPPORTED,
                                 "sched: node %s (%s) writes into storage on %s, which does "
                                 "not support the op",
                                 tg_tensor_desc(n, d, sizeof d), tg_op_name(n->op),
                                 tg_backend_name(s->backends[b]));
        *out_b = b;
        return NULL;
    }
    /* 2: where its weight lives */
    for (int i = 0; i < TG_MAX_SRC; i++) {
        const tg_tensor *src = n->src[i];
        if (!src) continue;
        const tg_tensor *r = tg_tensor_root(src);
        if (r->op != TG_OP_NONE || !is_user_placed(r)) continue;
        int b = buffer_backend(s, r->buffer);
        if (supports(s, b, n)) {
            *out_b = b;
            return NULL;
        }
        if (!supports(s, s->cpu, n)) goto unsupported;
        *out_b = s->cpu;
        return NULL;
    }
    /* 3: follow the first placed source, else by priority */
    for (int i = 0; i < TG_MAX_SRC; i++) {
        if (!n->src[i]) continue;
        int b = storage_backend(s, n->src[i]);
        if (b < 0) continue;
        if (supports(s, b, n)) {
            *out_b = b;
            return NULL;
        }
        break;
    }
    for (int b = 0; b < s->n_backends; b++) {
        if (supports(s, b, n)) {
            *out_b = b;
            return NULL;
        }
    }
unsupported:
    return tg_status_new(TG_ERR_UNSUPPORTED,
                         "sched: no backend supports node %s (%s of %s)",
                         tg_tensor_desc(n, d, sizeof d), tg_op_name(n->op),
                         tg_type_name(n->src[0] ? n->src[0]->type : n->type));
}

/* ----------------------------------------------------------------- alloc */

static uint64_t graph_signature(const tg_graph *g) {
    uint64_t h = tg_hash_combine(0x9e3779b97f4a7c15ULL, (uint64_t)(uintptr_t)g);
    h = tg_hash_combine(h, (uint64_t)g->n_nodes);
    h = tg_hash_combine(h, (uint64_t)g->n_leafs);
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        h = tg_hash_combine(h, (uint64_t)(uintptr_t)t);
        h = tg_hash_combine(h, (uint64_t)t->op);
        for (int k = 0; k < TG_MAX_SRC; k++) h = tg_hash_combine(h, (uint64_t)(uintptr_t)t->src[k]);
        h = tg_hash_combine(h, (uint64_t)(uintptr_t)t->view_src);
    }
    for (int i = 0; i < g->n_leafs; i++)
        h = tg_hash_combine(h, (uint64_t)(uintptr_t)g->leafs[i]);
    return h ? h : 1;
}

/* Per planned tensor: its backend and its lifetime. */
typedef struct slot {
    tg_tensor *t;
    int backend;
    tg_plan_item item;
} slot;

typedef struct alloc_state {
    slot *slots;
    int n_slots, cap_slots;
    tg_ptrmap slot_of;    /* tensor -> slot index */
    tg_ptrmap *copy_maps; /* per backend: source tensor -> copy index */
} alloc_state;

static bool add_slot(alloc_state *a, tg_tensor *t, int backend, int first, int last) {
    if (!tg_grow((void **)&a->slots, &a->cap_slots, a->n_slots + 1, sizeof(slot))) return false;
    if (!tg_ptrmap_put(&a->slot_of, t, a->n_slots)) return false;
    a->slots[a->n_slots++] = (slot){t, backend, {tg_nbytes(t), first, last, 0}};
    return true;
}

/* Extends the lifetime of t's root storage to step, if it is planned. */
static void touch(alloc_state *a, const tg_tensor *t, int step) {
    int k = tg_ptrmap_get(&a->slot_of, tg_tensor_root(t));
    if (k < 0) return;
    tg_plan_item *it = &a->slots[k].item;
    if (it->last != TG_PLAN_KEEP && it->last < step) it->last = step;
}

/* Extends the lifetimes of what n reads (its sources on backend b, the
 * copies split sp swapped in for them, the storage it views) to step. */
static void touch_sources(alloc_state *a, const tg_sched *s, const split *sp, const tg_tensor *n, int b,
                          int step) {
    for (int k = sp->rewire_begin; k < sp->rewire_end; k++)
        if (s->rewires[k].node == n) touch(a, s->rewires[k].copy, step);
    for (int k = 0; k <= TG_MAX_SRC; k++) {
        tg_tensor *src = k < TG_MAX_SRC ? n->src[k] : n->view_src;
        if (src && storage_backend(s, src) == b) touch(a, src, step);
    }
}

static tg_status grow_arena(tg_sched *s, int b, size_t need) {
    if (need == 0 || (s->arenas[b] && tg_buffer_size(s->arenas[b]) >= need)) return NULL;
    tg_buffer_free(s->arenas[b]);
    s->arenas[b] = NULL;
    tg_status st = tg_backend_buffer_alloc(s->backends[b], need, &s->arenas[b]);
    return tg_status_wrap(st, "sched: arena of %s", tg_backend_name(s->backends[b]));
}

tg_status tg_sched_alloc(tg_sched *s, tg_graph *g) {
    if (!s || !g) return tg_status_new(TG_ERR_INVALID_ARG, "sched_alloc: NULL argument");
    char d[TG_DESC_SIZE];
    tg_status st = NULL;
    alloc_state a = {0};
    int *node_b = NULL;
    reset_plan(s);
    for (int b = 0; b < s->n_backends; b++) s->planned[b] = 0;

    a.copy_maps = tg_calloc((size_t)s->n_backends, sizeof(tg_ptrmap));
    node_b = tg_malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof(int));
    s->copy_ctx = tg_ctx_new();
    if (!a.copy_maps || !node_b || !s->copy_ctx) goto oom;

    for (int i = 0; i < g->n_leafs; i++) {
        tg_tensor *l = g->leafs[i];
        if (is_user_placed(l)) {
            int b = buffer_backend(s, l->buffer);
            if (b < 0) {
                st = tg_status_new(TG_ERR_INVALID_ARG,
                                   "sched_alloc: %s lives in a buffer of %s, which is not one "
                                   "of this scheduler's backends",
                                   tg_tensor_desc(l, d, sizeof d),
                                   tg_backend_name(l->buffer->backend));
                goto fail;
            }
            if (!tg_ptrmap_put(&s->where, l, b)) goto oom;
        } else if (l->flags & TG_FLAG_WEIGHT) {
            st = tg_status_new(TG_ERR_INVALID_ARG,
                               "sched_alloc: weight %s has no storage (load the weights "
                               "before scheduling)",
                               tg_tensor_desc(l, d, sizeof d));
            goto fail;
        }
    }

    /* 1. placement, and inputs to their first consumer's backend */
    for (int i = 0; i < g->n_nodes; i++) {
        tg_tensor *n = g->nodes[i];
        node_b[i] = -1;
        if (n->op == TG_OP_VIEW) continue;
        if ((st = place_node(s, n, &node_b[i]))) goto fail;
        if (!tg_ptrmap_put(&s->where, n, node_b[i])) goto oom;
        for (int k = 0; k <= TG_MAX_SRC; k++) {
            tg_tensor *src = k < TG_MAX_SRC ? n->src[k] : n->view_src;
            if (!src) continue;
            tg_tensor *r = tg_tensor_root(src);
            if (r->op == TG_OP_NONE && !is_user_placed(r) && tg_ptrmap_get(&s->where, r) < 0)
                if (!tg_ptrmap_put(&s->where, r, node_b[i])) goto oom;
        }
    }
    for (int i = 0; i < g->n_leafs; i++) /* read by no computing node: the CPU */
        if (tg_ptrmap_get(&s->where, g->leafs[i]) < 0 &&
            !tg_ptrmap_put(&s->where, g->leafs[i], s->cpu))
            goto oom;
    for (int i = 0; i < g->n_nodes; i++) {
        tg_tensor *n = g->nodes[i];
        if (n->op != TG_OP_VIEW) continue;
        int b = storage_backend(s, n);
        node_b[i] = b >= 0 ? b : s->cpu;
        if (!tg_ptrmap_put(&s->where, n, node_b[i])) goto oom;
    }

    /* 2. storage: inputs first (alive throughout) */
    for (int i = 0; i < g->n_leafs; i++) {
        tg_tensor *l = g->leafs[i];
        if (!tg_plan_needs_storage(l)) continue;
        if (!add_slot(&a, l, tg_ptrmap_get(&s->where, l), 0, TG_PLAN_KEEP)) goto oom;
    }

    /* 3. splits, copies and lifetimes. Steps follow the run order: a split's
     * copies all happen before its first node, so they take the steps there. */
    int step = 1;
    for (int i = 0; i < g->n_nodes;) {
        if (g->nodes[i]->op == TG_OP_VIEW) {
            i++;
            continue;
        }
        int b = node_b[i];
        if (!tg_grow((void **)&s->splits, &s->cap_splits, s->n_splits + 1, sizeof(split)))
            goto oom;
        split *sp = &s->splits[s->n_splits];
        memset(sp, 0, sizeof *sp);
        sp->graph = tg_calloc(1, sizeof(tg_graph));
        if (!sp->graph) goto oom;
        s->n_splits++;
        sp->backend = b;
        sp->graph->ctx = g->ctx;
        sp->graph->borrowed = true;
        sp->copy_begin = sp->copy_end = s->n_copies;
        sp->rewire_begin = sp->rewire_end = s->n_rewires;
        tg_graph *sg = sp->graph;
        int j = i;
        for (; j < g->n_nodes; j++) {
            tg_tensor *n = g->nodes[j];
            if (n->op == TG_OP_VIEW) continue;
            if (node_b[j] != b) break;
            /* sources living elsewhere: copy in (once per backend) */
            for (int k = 0; k < TG_MAX_SRC; k++) {
                tg_tensor *src = n->src[k];
                if (!src) continue;
                int sb = storage_backend(s, src);
                if (sb < 0 || sb == b) continue;
                const tg_tensor *r = tg_tensor_root(src);
                if (tg_backend_is_cpu(s->backends[b]) && r->buffer && r->buffer->host &&
                    is_user_placed(r))
                    continue; /* the CPU reads host buffers in place */
                int c = tg_ptrmap_get(&a.copy_maps[b], src);
                if (c < 0) {
                    tg_tensor *cp = tg_ctx_new_tensor(s->copy_ctx, "sched copy", src->type,
                                                      src->ne);
                    if (!cp) goto ctx_error;
                    memcpy(cp->nb, src->nb, sizeof cp->nb);
                    tg_set_name(cp, "%.40s@%s", src->name[0] ? src->name : "copy",
                                tg_backend_name(s->backends[b]));
                    if (!tg_grow((void **)&s->copies, &s->cap_copies, s->n_copies + 1,
                                 sizeof(copy_op)))
                        goto oom;
                    c = s->n_copies++;
                    s->copies[c] = (copy_op){src, cp, sb};
                    sp->copy_end = s->n_copies;
                    if (!tg_ptrmap_put(&a.copy_maps[b], src, c)) goto oom;
                    if (!tg_ptrmap_put(&s->where, cp, b)) goto oom;
                }
                if (!tg_grow((void **)&s->rewires, &s->cap_rewires, s->n_rewires + 1,
                             sizeof(rewire)))
                    goto oom;
                s->rewires[s->n_rewires++] = (rewire){n, k, s->copies[c].dst};
                sp->rewire_end = s->n_rewires;
            }
            if (!tg_grow((void **)&sg->nodes, &sg->cap_nodes, sg->n_nodes + 1,
                         sizeof(tg_tensor *)))
                goto oom;
            sg->nodes[sg->n_nodes++] = n;
        }
        for (int c = sp->copy_begin; c < sp->copy_end; c++, step++) {
            touch(&a, s->copies[c].src, step);
            if (!add_slot(&a, s->copies[c].dst, b, step, step)) goto oom;
        }
        for (int m = 0; m < sg->n_nodes; m++, step++) {
            tg_tensor *n = sg->nodes[m];
            if (tg_plan_needs_storage(n) && !add_slot(&a, n, b, step, step)) goto oom;
            touch_sources(&a, s, sp, n, b, step);
            /* a product fused with its followers reads its inputs while
             * writing their result: the inputs live through their steps */
            int q = tg_plan_fused_product(sg->nodes, m);
            if (q >= 0) touch_sources(&a, s, sp, sg->nodes[q], b, step);
            int r = tg_plan_fused_lead(sg->nodes, m);
            if (r >= 0) touch_sources(&a, s, sp, sg->nodes[r], b, step);
        }
        i = j;
    }
    /* outputs (and what their views look into) live to the end */
    for (int i = 0; i < g->n_nodes; i++) {
        if (!(g->nodes[i]->flags & TG_FLAG_OUTPUT)) continue;
        int k = tg_ptrmap_get(&a.slot_of, tg_tensor_root(g->nodes[i]));
        if (k >= 0) a.slots[k].item.last = TG_PLAN_KEEP;
    }

    /* 4. plan each backend's arena, grow it, place the tensors */
    for (int b = 0; b < s->n_backends; b++) {
        int n = 0;
        for (int k = 0; k < a.n_slots; k++) n += a.slots[k].backend == b;
        if (n == 0) continue;
        tg_plan_item *items = tg_malloc((size_t)n * sizeof *items);
        if (!items) goto oom;
        for (int k = 0, m = 0; k < a.n_slots; k++)
            if (a.slots[k].backend == b) items[m++] = a.slots[k].item;
        size_t peak = 0;
        st = tg_plan_items(items, n, tg_backend_alignment(s->backends[b]), &peak);
        if (!st) st = grow_arena(s, b, peak);
        if (st) {
            tg_free(items);
            goto fail;
        }
        s->planned[b] = peak;
        char *base = s->arenas[b]->base;
        for (int k = 0, m = 0; k < a.n_slots; k++) {
            if (a.slots[k].backend != b) continue;
            tg_tensor *t = a.slots[k].t;
            t->buffer = s->arenas[b];
            t->data = base + items[m++].offset;
            t->flags |= TG_FLAG_SCHED_PLACED;
        }
        tg_free(items);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        tg_tensor_resolve_view(g->nodes[i]);
        for (int k = 0; k < TG_MAX_SRC; k++) tg_tensor_resolve_view(g->nodes[i]->src[k]);
    }

    s->graph = g;
    s->signature = graph_signature(g);
    goto done;
ctx_error:
    st = tg_ctx_check(s->copy_ctx);
    if (!st) goto oom;
    goto fail;
oom:
    st = tg_status_new(TG_ERR_NO_MEMORY, "sched_alloc: out of memory (host metadata)");
fail:
    reset_plan(s);
done:
    for (int b = 0; a.copy_maps && b < s->n_backends; b++) tg_ptrmap_clear(&a.copy_maps[b]);
    tg_free(a.copy_maps);
    tg_ptrmap_clear(&a.slot_of);
    tg_free(a.slots);
    tg_free(node_b);
    return st;
}

/* --------------------------------------------------------------- compute */

static bool any_abort(const tg_sched *s) {
    for (int b = 0; b < s->n_backends; b++)
        if (tg_backend_should_abort(s->backends[b])) return true;
    return false;
}

/* True when every tensor of g that needs storage still has it, in one of our
 * current arenas or the user's buffers. A graph rebuilt at the same addresses
 * after its context was freed has the same signature but no data. */
static bool still_placed(const tg_sched *s, const tg_graph *g) {
    for (int i = 0; i < g->n_nodes + g->n_leafs; i++) {
        const tg_tensor *t = i < g->n_nodes ? g->nodes[i] : g->leafs[i - g->n_nodes];
        if (t->view_src) continue;
        if (!t->buffer || !t->data) return false;
        if (!(t->flags & TG_FLAG_SCHED_PLACED)) continue;
        bool ours = false;
        for (int b = 0; b < s->n_backends; b++) ours = ours || t->buffer == s->arenas[b];
        if (!ours) return false;
    }
    return true;
}

static tg_status compute(tg_sched *s, tg_graph *g, bool wait) {
    if (!s || !g) return tg_status_new(TG_ERR_INVALID_ARG, "sched_compute: NULL argument");
    tg_status st;
    if (s->graph != g || s->signature != graph_signature(g) || !still_placed(s, g)) {
        if ((st = tg_sched_alloc(s, g))) return st;
    }
    for (int i = 0; i < s->n_splits; i++) {
        split *sp = &s->splits[i];
        tg_backend *be = s->backends[sp->backend];
        if (any_abort(s))
            return tg_status_new(TG_ERR_ABORTED, "sched: aborted before split %d of %d (%s)",
                                 i, s->n_splits, tg_backend_name(be));
        /* The previous split's backend must be done before this one reads its
         * results in place (a host-visible buffer) or through copies. Copies
         * also write into memory the plan may have freed from this backend's
         * own earlier work, so that must be finished too. */
        if (i > 0 && s->splits[i - 1].backend != sp->backend) {
            tg_backend *prev = s->backends[s->splits[i - 1].backend];
            if ((st = tg_backend_synchronize(prev)))
                return tg_status_wrap(st, "sched: synchronizing %s", tg_backend_name(prev));
        }
        if (sp->copy_end > sp->copy_begin && (st = tg_backend_synchronize(be)))
            return tg_status_wrap(st, "sched: synchronizing %s", tg_backend_name(be));
        for (int c = sp->copy_begin; c < sp->copy_end; c++) {
            copy_op *cp = &s->copies[c];
            if ((st = tg_backend_synchronize(s->backends[cp->src_backend])) ||
                (st = tg_tensor_copy(cp->src, cp->dst)))
                return tg_status_wrap(st, "sched: copying %s from %s to %s", cp->src->name,
                                      tg_backend_name(s->backends[cp->src_backend]),
                                      tg_backend_name(be));
        }
        for (int r = sp->rewire_begin; r < sp->rewire_end; r++) {
            rewire *rw = &s->rewires[r];
            tg_tensor *orig = rw->node->src[rw->slot];
            rw->node->src[rw->slot] = rw->copy;
            rw->copy = orig; /* swap: the slot now remembers the original */
        }
        be->enqueue_only = !wait && s->n_splits == 1;
        st = tg_backend_graph_compute(be, sp->graph);
        be->enqueue_only = false;
        for (int r = sp->rewire_begin; r < sp->rewire_end; r++) {
            rewire *rw = &s->rewires[r];
            tg_tensor *cp = rw->node->src[rw->slot];
            rw->node->src[rw->slot] = rw->copy;
            rw->copy = cp;
        }
        if (st)
            return tg_status_wrap(st, "sched: split %d of %d on %s", i, s->n_splits,
                                  tg_backend_name(be));
    }
    return wait || s->n_splits != 1 ? tg_sched_synchronize(s) : NULL;
}

tg_status tg_sched_synchronize(tg_sched *s) {
    if (!s) return tg_status_new(TG_ERR_INVALID_ARG, "sched_synchronize: NULL scheduler");
    tg_status st;
    for (int b = 0; b < s->n_backends; b++)
        if ((st = tg_backend_synchronize(s->backends[b])))
            return tg_status_wrap(st, "sched: synchronizing %s", tg_backend_name(s->backends[b]));
    return NULL;
}

tg_status tg_sched_compute(tg_sched *s, tg_graph *g) { return compute(s, g, true); }

tg_status tg_sched_compute_async(tg_sched *s, tg_graph *g) { return compute(s, g, false); }
