/*
 * graph.c: graphs, built by a depth-first post-order walk from an output.
 *
 * A tensor's dependencies are its sources and its view source (a view depends
 * on what it looks into, which may be an in-place writer such as tg_cpy into a
 * view). Leafs are tensors without an op and without a view source (weights,
 * inputs); every other tensor, views included, is a node. A tensor reached
 * twice is added once, so a shared subexpression is computed once. The walk is
 * iterative so that deep graphs (a 48-layer encoder) cannot overflow the stack.
 *
 * Not here: deciding where nodes run or where their data goes (sched.c,
 * planner.c).
 */
#include <string.h>

#include "base.h"
#include "ptrmap.h"
#include "tensor_internal.h"

#define N_DEPS (TG_MAX_SRC + 1)

tg_graph *tg_graph_new(tg_ctx *ctx) {
    if (!ctx) return NULL;
    if (!tg_grow((void **)&ctx->graphs, &ctx->cap_graphs, ctx->n_graphs + 1, sizeof(tg_graph *)))
        return NULL;
    tg_graph *g = tg_calloc(1, sizeof *g);
    if (!g) return NULL;
    g->ctx = ctx;
    ctx->graphs[ctx->n_graphs++] = g;
    return g;
}

void tg_graph_destroy(tg_graph *g) {
    if (!g) return;
    tg_free(g->nodes);
    tg_free(g->leafs);
    tg_free(g);
}

int tg_graph_n_nodes(const tg_graph *g) { return g ? g->n_nodes : 0; }
int tg_graph_n_leafs(const tg_graph *g) { return g ? g->n_leafs : 0; }

tg_tensor *tg_graph_node(const tg_graph *g, int i) {
    if (!g || i < 0 || i >= g->n_nodes) return NULL;
    return g->nodes[i];
}

tg_tensor *tg_graph_leaf(const tg_graph *g, int i) {
    if (!g || i < 0 || i >= g->n_leafs) return NULL;
    return g->leafs[i];
}

static tg_tensor *dep(const tg_tensor *t, int i) {
    return i < TG_MAX_SRC ? t->src[i] : t->view_src;
}

static bool is_leaf(const tg_tensor *t) { return t->op == TG_OP_NONE && !t->view_src; }

static bool append(tg_graph *g, tg_tensor *t) {
    if (is_leaf(t)) {
        if (!tg_grow((void **)&g->leafs, &g->cap_leafs, g->n_leafs + 1, sizeof(tg_tensor *)))
            return false;
        g->leafs[g->n_leafs++] = t;
    } else {
        if (!tg_grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(tg_tensor *)))
            return false;
        g->nodes[g->n_nodes++] = t;
    }
    return true;
}

typedef struct frame {
    tg_tensor *t;
    int next; /* index of the next dependency to visit */
} frame;

tg_status tg_graph_build(tg_graph *g, tg_tensor *t) {
    if (!g) return tg_status_new(TG_ERR_INVALID_ARG, "graph_build: NULL graph");
    if (!t) {
        tg_status st = g->ctx ? tg_ctx_check(g->ctx) : NULL;
        if (st) return tg_status_wrap(st, "graph_build: output is NULL (a constructor failed)");
        return tg_status_new(TG_ERR_INVALID_ARG, "graph_build: output tensor is NULL");
    }
    tg_status st = NULL;
    tg_ptrmap seen = {0};
    frame *stack = NULL;
    int n_stack = 0, cap_stack = 0;
    /* 0: on the stack, 1: added to the graph */
    for (int i = 0; i < g->n_nodes; i++)
        if (!tg_ptrmap_put(&seen, g->nodes[i], 1)) goto oom;
    for (int i = 0; i < g->n_leafs; i++)
        if (!tg_ptrmap_put(&seen, g->leafs[i], 1)) goto oom;

    t->flags |= TG_FLAG_OUTPUT;
    if (tg_ptrmap_get(&seen, t) < 0) {
        if (!tg_grow((void **)&stack, &cap_stack, 1, sizeof *stack)) goto oom;
        if (!tg_ptrmap_put(&seen, t, 0)) goto oom;
        stack[n_stack++] = (frame){t, 0};
    }
    while (n_stack > 0) {
        frame *f = &stack[n_stack - 1];
        if (f->next < N_DEPS) {
            tg_tensor *d = dep(f->t, f->next++);
            if (!d) continue;
            int state = tg_ptrmap_get(&seen, d);
            if (state == 0) {
                char dt[TG_DESC_SIZE];
                st = tg_status_new(TG_ERR_INVALID_ARG, "graph_build: cycle through %s",
                                   tg_tensor_desc(d, dt, sizeof dt));
                goto fail;
            }
            if (state == 1) continue;
            if (!tg_grow((void **)&stack, &cap_stack, n_stack + 1, sizeof *stack)) goto oom;
            if (!tg_ptrmap_put(&seen, d, 0)) goto oom;
            stack[n_stack++] = (frame){d, 0};
            continue;
        }
        tg_tensor *done = f->t;
        n_stack--;
        if (!append(g, done) || !tg_ptrmap_put(&seen, done, 1)) goto oom;
    }
    tg_free(stack);
    tg_ptrmap_clear(&seen);
    return NULL;
oom:
    st = tg_status_new(TG_ERR_NO_MEMORY, "graph_build: out of memory");
fail:
    tg_free(stack);
    tg_ptrmap_clear(&seen);
    return st;
}
