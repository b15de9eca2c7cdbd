/*
 * test_graph.c: graph building: topological order (every source before its
 * reader), leafs versus nodes, shared subexpressions added once (also across
 * several outputs), views and in-place writers ordered before their readers,
 * deep graphs without recursion, and the error for a NULL output.
 */
#include "check.h"
#include "tg.h"

/* Position of t among g's nodes, or -1. */
static int node_pos(const tg_graph *g, const tg_tensor *t) {
    for (int i = 0; i < tg_graph_n_nodes(g); i++)
        if (tg_graph_node(g, i) == t) return i;
    return -1;
}

static int leaf_pos(const tg_graph *g, const tg_tensor *t) {
    for (int i = 0; i < tg_graph_n_leafs(g); i++)
        if (tg_graph_leaf(g, i) == t) return i;
    return -1;
}

/* Every dependency of every node is a leaf or an earlier node, and no tensor
 * appears twice. */
static bool topologically_ordered(const tg_graph *g) {
    for (int i = 0; i < tg_graph_n_nodes(g); i++) {
        const tg_tensor *n = tg_graph_node(g, i);
        if (node_pos(g, n) != i) return false; /* duplicate */
        for (int k = 0; k <= TG_MAX_SRC; k++) {
            const tg_tensor *d = k < TG_MAX_SRC ? n->src[k] : n->view_src;
            if (!d) continue;
            int p = node_pos(g, d);
            if (p < 0 && leaf_pos(g, d) < 0) return false;
            if (p >= i) return false;
        }
    }
    for (int i = 0; i < tg_graph_n_leafs(g); i++)
        if (leaf_pos(g, tg_graph_leaf(g, i)) != i) return false;
    return true;
}

static void test_chain_order_and_leafs(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *w = tg_new_2d(ctx, TG_F32, 8, 4);
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 8, 3);
    tg_tensor *b = tg_new_1d(ctx, TG_F32, 4);
    tg_tensor *y = tg_mul_mat(ctx, w, x);
    tg_tensor *z = tg_add(ctx, y, b);
    tg_tensor *out = tg_relu(ctx, z);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, out));
    CHECK(tg_graph_n_nodes(g) == 3 && tg_graph_n_leafs(g) == 3);
    CHECK(tg_graph_node(g, 0) == y && tg_graph_node(g, 1) == z && tg_graph_node(g, 2) == out);
    CHECK(tg_graph_leaf(g, 0) == w && tg_graph_leaf(g, 1) == x && tg_graph_leaf(g, 2) == b);
    CHECK(out->flags & TG_FLAG_OUTPUT);
    CHECK(!(z->flags & TG_FLAG_OUTPUT));
    CHECK(tg_graph_node(g, 3) == NULL && tg_graph_node(g, -1) == NULL);
    CHECK(tg_graph_leaf(g, 3) == NULL);
    CHECK(topologically_ordered(g));
    tg_ctx_free(ctx);
}

static void test_shared_subexpression_once(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_1d(ctx, TG_F32, 5);
    tg_tensor *s = tg_relu(ctx, x);
    tg_tensor *a = tg_add(ctx, s, s);
    tg_tensor *m = tg_mul(ctx, a, s);
    tg_tensor *out = tg_sub(ctx, m, a);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, out));
    CHECK(tg_graph_n_nodes(g) == 4 && tg_graph_n_leafs(g) == 1);
    CHECK(node_pos(g, s) == 0 && node_pos(g, a) == 1 && node_pos(g, m) == 2);
    CHECK(topologically_ordered(g));
    /* a second output sharing nodes adds only what is new */
    tg_tensor *out2 = tg_scale(ctx, s, 3.0f);
    CHECK_OK(tg_graph_build(g, out2));
    CHECK(tg_graph_n_nodes(g) == 5 && node_pos(g, out2) == 4);
    CHECK((out->flags & TG_FLAG_OUTPUT) && (out2->flags & TG_FLAG_OUTPUT));
    /* building the same output again changes nothing */
    CHECK_OK(tg_graph_build(g, out));
    CHECK(tg_graph_n_nodes(g) == 5 && tg_graph_n_leafs(g) == 1);
    CHECK(topologically_ordered(g));
    tg_ctx_free(ctx);
}

static void test_views_and_inplace_writers(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *cache = tg_new_2d(ctx, TG_F32, 4, 10);     /* KV cache, a leaf */
    tg_tensor *row = tg_new_2d(ctx, TG_F32, 4, 1);
    tg_tensor *pos = tg_new_1d(ctx, TG_I32, 1);
    tg_tensor *k = tg_scale(ctx, row, 2.0f);
    tg_tensor *written = tg_set_rows(ctx, cache, k, pos); /* in place, view of cache */
    tg_tensor *first4 = tg_view_2d(ctx, written, 4, 4, cache->nb[1], 0);
    tg_tensor *t = tg_transpose(ctx, first4);
    tg_tensor *out = tg_cont(ctx, t);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, out));
    CHECK(topologically_ordered(g));
    /* the write comes before the view that reads through it */
    CHECK(node_pos(g, k) < node_pos(g, written));
    CHECK(node_pos(g, written) < node_pos(g, first4));
    CHECK(node_pos(g, first4) < node_pos(g, t) && node_pos(g, t) < node_pos(g, out));
    /* views are nodes; the cache is a leaf even though set_rows lists it
     * only as view_src */
    CHECK(leaf_pos(g, cache) >= 0 && leaf_pos(g, row) >= 0 && leaf_pos(g, pos) >= 0);
    CHECK(tg_graph_n_leafs(g) == 3 && tg_graph_n_nodes(g) == 5);

    /* cpy into a view: the view of dst and dst both come before */
    tg_tensor *dst = tg_new_1d(ctx, TG_F16, 8);
    tg_tensor *hi = tg_view_1d(ctx, dst, 4, 8);
    tg_tensor *c = tg_cpy(ctx, tg_new_1d(ctx, TG_F32, 4), hi);
    tg_graph *g2 = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g2, c));
    CHECK(topologically_ordered(g2));
    CHECK(node_pos(g2, hi) == 0 && node_pos(g2, c) == 1 && leaf_pos(g2, dst) >= 0);
    tg_ctx_free(ctx);
}

static void test_deep_graph_no_recursion(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_1d(ctx, TG_F32, 2);
    tg_tensor *y = x;
    const int depth = 200000;
    for (int i = 0; i < depth; i++) y = tg_relu(ctx, y);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, y));
    CHECK(tg_graph_n_nodes(g) == depth && tg_graph_n_leafs(g) == 1);
    bool ordered = true;
    for (int i = 1; i < tg_graph_n_nodes(g); i++)
        ordered = ordered && tg_graph_node(g, i)->src[0] == tg_graph_node(g, i - 1);
    CHECK(ordered && tg_graph_node(g, depth - 1) == y);
    tg_ctx_free(ctx);
}

static void test_null_output_is_an_error(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_new(ctx);
    tg_tensor *bad = tg_glu(ctx, tg_set_name(tg_new_1d(ctx, TG_F32, 3), "h"));
    CHECK_ERR(tg_graph_build(g, bad), TG_ERR_INVALID_ARG, "glu: a 'h' [3]");
    CHECK(tg_graph_n_nodes(g) == 0);
    tg_ctx *ctx2 = tg_ctx_new();
    tg_graph *g2 = tg_graph_new(ctx2);
    CHECK_ERR(tg_graph_build(g2, NULL), TG_ERR_INVALID_ARG, "output tensor is NULL");
    CHECK_ERR(tg_graph_build(NULL, NULL), TG_ERR_INVALID_ARG, "NULL graph");
    CHECK(tg_graph_new(NULL) == NULL);
    CHECK(tg_graph_n_nodes(NULL) == 0);
    tg_ctx_free(ctx);
    tg_ctx_free(ctx2);
}

static void test_leaf_output(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_1d(ctx, TG_F32, 2);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, x));
    CHECK(tg_graph_n_nodes(g) == 0 && tg_graph_n_leafs(g) == 1 && (x->flags & TG_FLAG_OUTPUT));
    tg_ctx_free(ctx);
}

TEST_MAIN(T(test_chain_order_and_leafs), T(test_shared_subexpression_once),
          T(test_views_and_inplace_writers), T(test_deep_graph_no_recursion),
          T(test_null_output_is_an_error), T(test_leaf_output))
