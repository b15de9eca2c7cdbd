/*
 * planner.c: offsets for intermediate tensors in one arena per backend, with
 * memory reused once a tensor's last reader has run (see planner.h).
 *
 * Lifetimes are exact step intervals rather than running reference counts:
 * for a fixed node order the two are the same thing, and intervals let the
 * scheduler add its copy steps between nodes without a second mechanism.
 *
 * Not here: allocating the arena or writing data pointers (sched.c does both
 * after planning).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "planner.h"
#include "ptrmap.h"
#include "tensor_internal.h"

/* ------------------------------------------------------------ free list */

typedef struct block {
    size_t offset, size;
} block;

typedef struct arena_model {
    block *free;   /* sorted by offset, never adjacent (coalesced) */
    int n_free, cap_free;
    size_t top;    /* end of the arena so far: the peak */
} arena_model;

static bool arena_alloc(arena_model *a, size_t size, size_t *out_offset) {
    int best = -1;
    for (int i = 0; i < a->n_free; i++) {
        if (a->free[i].size >= size && (best < 0 || a->free[i].size < a->free[best].size))
            best = i;
    }
    if (best >= 0) {
        *out_offset = a->free[best].offset;
        a->free[best].offset += size;
        a->free[best].size -= size;
        if (a->free[best].size == 0) {
            memmove(&a->free[best], &a->free[best + 1],
                    (size_t)(a->n_free - best - 1) * sizeof(block));
            a->n_free--;
        }
        return true;
    }
    /* Nothing fits: extend the arena, starting inside a free block at its end.
     * False when the arena's end would pass SIZE_MAX (it must not wrap). */
    if (a->n_free > 0) {
        block *last = &a->free[a->n_free - 1];
        if (last->offset + last->size == a->top) {
            if (size > SIZE_MAX - last->offset) return false;
            *out_offset = last->offset;
            a->top = last->offset + size;
            a->n_free--;
            return true;
        }
    }
    if (size > SIZE_MAX - a->top) return false;
    *out_offset = a->top;
    a->top += size;
    return true;
}

static bool arena_free(arena_model *a, size_t offset, size_t size) {
    int i = 0;
    while (i < a->n_free && a->free[i].offset < offset) i++;
    bool merge_prev = i > 0 && a->free[i - 1].offset + a->free[i - 1].size == offset;
    bool merge_next = i < a->n_free && offset + size == a->free[i].offset;
    if (merge_prev && merge_next) {
        a->free[i - 1].size += size + a->free[i].size;
        memmove(&a->free[i], &a->free[i + 1], (size_t)(a->n_free - i - 1) * sizeof(block));
        a->n_free--;
    } else if (merge_prev) {
        a->free[i - 1].size += size;
    } else if (merge_next) {
        a->free[i].offset = offset;
        a->free[i].size += size;
    } else {
        if (!tg_grow((void **)&a->free, &a->cap_free, a->n_free + 1, sizeof(block))) return false;
        memmove(&a->free[i + 1], &a->free[i], (size_t)(a->n_free - i) * sizeof(block));
        a->free[i] = (block){offset, size};
        a->n_free++;
    }
    return true;
}

/* ------------------------------------------------------------- items */

/* (step, item) pairs sorted by step, then by item index, so items of one step
 * are placed in their given order. */
typedef struct keyed {
    int key, idx;
} keyed;

static int by_key(const void *x, const void *y) {
    const keyed *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

tg_status tg_plan_items(tg_plan_item *items, int n, size_t alignment, size_t *out_peak) {
    if (!out_peak || (n > 0 && !items) || alignment == 0 || (alignment & (alignment - 1)))
        return tg_status_new(TG_ERR_INVALID_ARG, "plan: bad arguments (alignment %zu)",
                             alignment);
    *out_peak = 0;
    if (n == 0) return NULL;
    tg_status st = NULL;
    arena_model a = {0};
    keyed *order_alloc = tg_malloc((size_t)n * sizeof(keyed));
    keyed *order_free = tg_malloc((size_t)n * sizeof(keyed));
    if (!order_alloc || !order_free) goto oom;
    int n_free = 0;
    for (int i = 0; i < n; i++) {
        if (items[i].last < items[i].first) items[i].last = items[i].first;
        order_alloc[i] = (keyed){items[i].first, i};
        if (items[i].last != TG_PLAN_KEEP) order_free[n_free++] = (keyed){items[i].last, i};
    }
    qsort(order_alloc, (size_t)n, sizeof(keyed), by_key);
    qsort(order_free, (size_t)n_free, sizeof(keyed), by_key);
    int ai = 0, fi = 0;
    while (ai < n || fi < n_free) {
        bool do_alloc = ai < n && (fi >= n_free || order_alloc[ai].key <= order_free[fi].key);
        if (do_alloc) {
            tg_plan_item *it = &items[order_alloc[ai++].idx];
            if (it->size > SIZE_MAX - alignment || !arena_alloc(&a, align_up(it->size ? it->size : 1,
                                                                             alignment),
                                                                &it->offset)) {
                st = tg_status_new(TG_ERR_NO_MEMORY,
                                   "plan: planning %d tensors: the arena would pass SIZE_MAX "
                                   "bytes (placing one of %zu bytes)",
                                   n, it->size);
                goto done;
            }
        } else {
            tg_plan_item *it = &items[order_free[fi++].idx];
            if (!arena_free(&a, it->offset, align_up(it->size ? it->size : 1, alignment)))
                goto oom;
        }
    }
    *out_peak = a.top;
    goto done;
oom:
    st = tg_status_new(TG_ERR_NO_MEMORY, "plan: out of memory planning %d tensors", n);
done:
    tg_free(a.free);
    tg_free(order_alloc);
    tg_free(order_free);
    return st;
}

/* ------------------------------------------------------------- graphs */

bool tg_plan_needs_storage(const tg_tensor *t) {
    if (!t || t->view_src) return false;
    return !t->buffer || (t->flags & TG_FLAG_SCHED_PLACED);
}

void tg_plan_free(tg_plan *plan) {
    if (!plan) return;
    tg_free(plan->tensors);
    tg_free(plan->offsets);
    memset(plan, 0, sizeof *plan);
}

size_t tg_plan_offset(const tg_plan *plan, const tg_tensor *t) {
    for (int i = 0; plan && i < plan->n; i++)
        if (plan->tensors[i] == t) return plan->offsets[i];
    return SIZE_MAX;
}

int tg_plan_fused_product(tg_tensor *const *nodes, int i) {
    for (int q = i - 1; q >= 0 && q >= i - TG_PLAN_FRONT_DEPTH; q--) {
        bool reads = false;
        for (int k = 0; k < TG_MAX_SRC; k++) reads = reads || nodes[q + 1]->src[k] == nodes[q];
        if (!reads) return -1;
        const tg_tensor *h = nodes[q];
        if (h->op == TG_OP_MUL_MAT || h->op == TG_OP_CONV_1D_DW) return q >= i - TG_PLAN_FUSE_DEPTH ? q : -1;
        if (h->op == TG_OP_CONV_2D && h->src[1] && h->src[1]->ne[2] == 1) return q;
    }
    return -1;
}

int tg_plan_fused_lead(tg_tensor *const *nodes, int i) {
    tg_op op = nodes[i]->op;
    if (op == TG_OP_LAYER_NORM && i >= 1 && nodes[i - 1]->op == TG_OP_LAYER_NORM && nodes[i]->src[0] == nodes[i - 1])
        return i - 1;
    int q = op == TG_OP_MUL_MAT || op == TG_OP_CONV_1D_DW ? i : tg_plan_fused_product(nodes, i);
    if (q < 1 || nodes[q]->src[1] != nodes[q - 1]) return -1;
    tg_op lead = nodes[q - 1]->op, head = nodes[q]->op;
    return (lead == TG_OP_LAYER_NORM && head == TG_OP_MUL_MAT) || (lead == TG_OP_GLU && head == TG_OP_CONV_1D_DW)
               ? q - 1
               : -1;
}

/* Extends the lifetime of everything t reads (and the storage it views) to
 * step. */
static void keep_sources(tg_plan_item *items, const tg_ptrmap *index, const tg_tensor *t, int step) {
    for (int s = 0; s <= TG_MAX_SRC; s++) {
        tg_tensor *d = s < TG_MAX_SRC ? t->src[s] : t->view_src;
        if (!d) continue;
        int k = tg_ptrmap_get(index, tg_tensor_root(d));
        if (k >= 0 && items[k].last != TG_PLAN_KEEP && items[k].last < step) items[k].last = step;
    }
}

tg_status tg_plan_graph(const tg_graph *g, size_t alignment, tg_plan *out_plan) {
    if (!g || !out_plan) return tg_status_new(TG_ERR_INVALID_ARG, "plan_graph: NULL argument");
    memset(out_plan, 0, sizeof *out_plan);
    tg_status st = NULL;
    tg_ptrmap index = {0};
    int cap = g->n_leafs + g->n_nodes;
    tg_plan_item *items = tg_calloc((size_t)(cap ? cap : 1), sizeof *items);
    tg_tensor **tensors = tg_calloc((size_t)(cap ? cap : 1), sizeof *tensors);
    if (!items || !tensors) goto oom;
    int n = 0;
    for (int i = 0; i < g->n_leafs; i++) {
        tg_tensor *t = g->leafs[i];
        if (!tg_plan_needs_storage(t)) continue;
        if (!tg_ptrmap_put(&index, t, n)) goto oom;
        items[n] = (tg_plan_item){tg_nbytes(t), 0, TG_PLAN_KEEP, 0};
        tensors[n++] = t;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        tg_tensor *t = g->nodes[i];
        int step = i + 1;
        if (tg_plan_needs_storage(t)) {
            if (!tg_ptrmap_put(&index, t, n)) goto oom;
            items[n] = (tg_plan_item){tg_nbytes(t), step, step, 0};
            tensors[n++] = t;
        }
        /* Everything a node reads, and the storage it is a view of, must be
         * alive at its step; so must a fused product's inputs (below). */
        keep_sources(items, &index, t, step);
        int q = tg_plan_fused_product(g->nodes, i);
        if (q >= 0) keep_sources(items, &index, g->nodes[q], step);
        int r = tg_plan_fused_lead(g->nodes, i);
        if (r >= 0) keep_sources(items, &index, g->nodes[r], step);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (!(g->nodes[i]->flags & TG_FLAG_OUTPUT)) continue;
        int k = tg_ptrmap_get(&index, tg_tensor_root(g->nodes[i]));
        if (k >= 0) items[k].last = TG_PLAN_KEEP;
    }
    if ((st = tg_plan_items(items, n, alignment, &out_plan->peak))) goto fail;
    out_plan->offsets = tg_malloc((size_t)(n ? n : 1) * sizeof(size_t));
    if (!out_plan->offsets) goto oom;
    for (int i = 0; i < n; i++) out_plan->offsets[i] = items[i].offset;
    out_plan->tensors = tensors;
    out_plan->n = n;
    tg_free(items);
    tg_ptrmap_clear(&index);
    return NULL;
oom:
    st = tg_status_new(TG_ERR_NO_MEMORY, "plan_graph: out of memory");
fail:
    tg_free(items);
    tg_free(tensors);
    tg_ptrmap_clear(&index);
    tg_plan_free(out_plan);
    return st;
}
