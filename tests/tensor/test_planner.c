/*
 * test_planner.c: the memory planner: exact offsets and peak for a
 * hand-computed case, best fit, coalescing of freed neighbours, growth at the
 * arena's end; on graphs: a chain reuses memory (peak three tensors, not
 * eleven), a value read late stays alive, views and in-place writers keep
 * their source alive, outputs and inputs are never reused, placed weights are
 * not planned, a fused product's inputs outlive its epilogue chain, and so
 * do a one-channel 2-D conv's up to six nodes on (the subsampling's front).
 */
#include "check.h"
#include "planner.h"
#include "test_backend.h"

/* True when the byte ranges of two planned tensors overlap. */
static bool overlap(const tg_plan *p, const tg_tensor *a, const tg_tensor *b) {
    size_t oa = tg_plan_offset(p, a), ob = tg_plan_offset(p, b);
    if (oa == SIZE_MAX || ob == SIZE_MAX) return false;
    return oa < ob + tg_nbytes(b) && ob < oa + tg_nbytes(a);
}

static void test_items_hand_computed(void) {
    /* alignment 16: sizes become 112, 64, 112, 32 */
    tg_plan_item it[4] = {
        {100, 1, 2, 0},
        {50, 2, 3, 0},
        {100, 3, 4, 0},
        {30, 4, TG_PLAN_KEEP, 0},
    };
    size_t peak = 0;
    CHECK_OK(tg_plan_items(it, 4, 16, &peak));
    /* step 1: A at 0. step 2: B at 112 (A still read), then A freed.
     * step 3: C best-fits A's hole at 0, B freed. step 4: D into B's hole. */
    CHECK(it[0].offset == 0 && it[1].offset == 112 && it[2].offset == 0 && it[3].offset == 112);
    CHECK_MSG(peak == 176, "peak %zu", peak);
}

/* Blocks alive together whose sizes add up past SIZE_MAX cannot share one
 * arena: the planner says so rather than wrap the arena's end around to a
 * small peak (every later offset would point outside the arena). Sizes near
 * SIZE_MAX also must not wrap when rounded to the alignment. */
static void test_items_size_overflow_is_an_error(void) {
    size_t big = (size_t)1 << 62;
    tg_plan_item it[5];
    for (int i = 0; i < 5; i++) it[i] = (tg_plan_item){big, 1, TG_PLAN_KEEP, 0};
    size_t peak = 0;
    CHECK_ERR(tg_plan_items(it, 5, 64, &peak), TG_ERR_NO_MEMORY, "plan");
    tg_plan_item one = {SIZE_MAX - 8, 1, 1, 0};
    CHECK_ERR(tg_plan_items(&one, 1, 64, &peak), TG_ERR_NO_MEMORY, "plan");
}

static void test_items_coalescing(void) {
    /* a, b, c adjacent; freed a, c, then b: one hole of 30 takes e */
    tg_plan_item it[5] = {
        {10, 0, 1, 0}, {10, 0, 2, 0}, {10, 0, 1, 0}, {10, 0, TG_PLAN_KEEP, 0}, {30, 3, 3, 0},
    };
    size_t peak = 0;
    CHECK_OK(tg_plan_items(it, 5, 1, &peak));
    CHECK(it[0].offset == 0 && it[1].offset == 10 && it[2].offset == 20 && it[3].offset == 30);
    CHECK(it[4].offset == 0);
    CHECK_MSG(peak == 40, "peak %zu", peak);
}

static void test_items_best_fit_and_growth(void) {
    /* holes of 30 (at 0) and 20 (at 40) with a kept block between and after;
     * 18 goes into the 20-byte hole, then 25 into the 30-byte one, then 40
     * fits nowhere and goes to the end */
    tg_plan_item it[7] = {
        {30, 0, 0, 0}, {10, 0, TG_PLAN_KEEP, 0}, {20, 0, 0, 0}, {10, 0, TG_PLAN_KEEP, 0},
        {18, 1, TG_PLAN_KEEP, 0}, {25, 1, TG_PLAN_KEEP, 0}, {40, 1, TG_PLAN_KEEP, 0},
    };
    size_t peak = 0;
    CHECK_OK(tg_plan_items(it, 7, 1, &peak));
    CHECK(it[4].offset == 40 && it[5].offset == 0 && it[6].offset == 70);
    CHECK(peak == 110);
    /* a free block touching the end grows in place instead of leaving a gap */
    tg_plan_item g[3] = {{10, 0, TG_PLAN_KEEP, 0}, {20, 0, 0, 0}, {50, 1, TG_PLAN_KEEP, 0}};
    CHECK_OK(tg_plan_items(g, 3, 1, &peak));
    CHECK(g[2].offset == 10 && peak == 60);
    /* bad alignment */
    CHECK_ERR(tg_plan_items(g, 3, 3, &peak), TG_ERR_INVALID_ARG, "alignment 3");
    CHECK_OK(tg_plan_items(NULL, 0, 8, &peak));
    CHECK(peak == 0);
}

static void test_chain_reuses_memory(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_1d(ctx, TG_F32, 1024); /* 4096 bytes, an input */
    tg_tensor *y = x;
    for (int i = 0; i < 10; i++) y = tg_relu(ctx, y);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, y));
    tg_plan p;
    CHECK_OK(tg_plan_graph(g, 64, &p));
    CHECK(p.n == 11);
    /* the input, the node being computed and the one it reads */
    CHECK_MSG(p.peak == 3 * 4096, "peak %zu", p.peak);
    CHECK(p.peak < 11 * 4096 / 3);
    for (int i = 0; i < p.n; i++) CHECK(p.offsets[i] % 64 == 0);
    /* the input is never overwritten */
    for (int i = 0; i < tg_graph_n_nodes(g); i++) CHECK(!overlap(&p, x, tg_graph_node(g, i)));
    /* each node differs from its source */
    for (int i = 1; i < tg_graph_n_nodes(g); i++)
        CHECK(!overlap(&p, tg_graph_node(g, i), tg_graph_node(g, i - 1)));
    tg_plan_free(&p);
    tg_ctx_free(ctx);
}

static void test_value_read_late_stays_alive(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_1d(ctx, TG_F32, 1024);
    tg_tensor *a = tg_relu(ctx, x);
    tg_tensor *b = tg_relu(ctx, a);
    tg_tensor *c = tg_relu(ctx, b);
    tg_tensor *d = tg_add(ctx, c, a); /* a read again, late */
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, d));
    tg_plan p;
    CHECK_OK(tg_plan_graph(g, 64, &p));
    CHECK(!overlap(&p, a, b) && !overlap(&p, a, c) && !overlap(&p, a, d));
    CHECK(!overlap(&p, c, d) && !overlap(&p, b, c));
    /* x | a | b | c, then d takes b's place */
    CHECK(overlap(&p, b, d));
    CHECK_MSG(p.peak == 4 * 4096, "peak %zu", p.peak);
    tg_plan_free(&p);
    tg_ctx_free(ctx);
}

static void test_views_keep_sources_alive(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 32, 32);
    tg_tensor *a = tg_relu(ctx, x);
    tg_tensor *m1 = tg_relu(ctx, a);            /* a's last direct reader */
    tg_tensor *m2 = tg_relu(ctx, m1);
    tg_tensor *m3 = tg_relu(ctx, m2);
    tg_tensor *v = tg_transpose(ctx, a);        /* a view of a, read last */
    tg_tensor *c = tg_add(ctx, m3, tg_cont(ctx, v));
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, c));
    CHECK(tg_graph_node(g, 0) == a && tg_graph_node(g, 3) == m3); /* the order assumed */
    tg_plan p;
    CHECK_OK(tg_plan_graph(g, 64, &p));
    CHECK(tg_plan_offset(&p, v) == SIZE_MAX); /* a view gets no storage */
    CHECK(!overlap(&p, a, m2) && !overlap(&p, a, m3));
    tg_plan_free(&p);
    tg_ctx_free(ctx);

    /* an in-place writer into an intermediate keeps it alive to its readers:
     * buf's last direct reader is m1, but w writes into it and r reads w */
    ctx = tg_ctx_new();
    x = tg_new_1d(ctx, TG_F32, 256);
    tg_tensor *buf = tg_scale(ctx, x, 0.0f);
    m1 = tg_relu(ctx, tg_view_1d(ctx, buf, 128, 0));
    m2 = tg_relu(ctx, m1);
    m3 = tg_relu(ctx, m2);
    tg_tensor *w = tg_cpy(ctx, m3, tg_view_1d(ctx, buf, 128, 512));
    tg_tensor *r = tg_sum_rows(ctx, tg_view_1d(ctx, w, 64, 0));
    g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, r));
    CHECK_OK(tg_plan_graph(g, 64, &p));
    CHECK(tg_plan_offset(&p, w) == SIZE_MAX && tg_plan_offset(&p, buf) != SIZE_MAX);
    CHECK(!overlap(&p, buf, m2) && !overlap(&p, buf, m3) && !overlap(&p, buf, r));
    tg_plan_free(&p);
    tg_ctx_free(ctx);
}

static void test_outputs_inputs_and_weights(void) {
    tg_backend *be = test_backend_new("fake", true, true, TEST_OPS_ALL);
    tg_ctx *wctx = tg_ctx_new();
    tg_tensor *wt = tg_new_2d(wctx, TG_F32, 64, 64);
    tg_buffer *wbuf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(wctx, be, &wbuf));

    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 64, 4);
    x->flags |= TG_FLAG_INPUT;
    tg_tensor *h = tg_mul_mat(ctx, wt, x);        /* [64, 4] */
    tg_tensor *early = tg_relu(ctx, h);           /* an output, computed early */
    tg_tensor *y = h;
    for (int i = 0; i < 6; i++) y = tg_relu(ctx, y);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, early));
    CHECK_OK(tg_graph_build(g, y));
    tg_plan p;
    CHECK_OK(tg_plan_graph(g, 64, &p));
    CHECK(tg_plan_offset(&p, wt) == SIZE_MAX); /* placed by the user: not planned */
    CHECK(tg_plan_offset(&p, x) != SIZE_MAX);
    for (int i = 0; i < tg_graph_n_nodes(g); i++) {
        tg_tensor *n = tg_graph_node(g, i);
        if (n != early) CHECK(!overlap(&p, early, n));
        if (n != x) CHECK(!overlap(&p, x, n));
    }
    tg_plan_free(&p);
    tg_ctx_free(ctx);
    tg_buffer_free(wbuf);
    tg_ctx_free(wctx);
    tg_backend_free(be);
}

/* A backend may run a product with the bias add (and relu) after it as one
 * launch that writes the last result while reading the product's inputs
 * (the CUDA backend's epilogue fusion): those inputs must not share storage
 * with the chain's results. Without the rule, the add's 1 KiB result lands
 * in the 2 KiB hole h leaves once the product has read it. */
static void test_fused_product_inputs_stay_apart(void) {
    tg_backend *be = test_backend_new("fake", true, true, TEST_OPS_ALL);
    tg_ctx *wctx = tg_ctx_new();
    tg_tensor *w = tg_new_2d(wctx, TG_F32, 64, 32), *bias = tg_new_1d(wctx, TG_F32, 32);
    tg_buffer *wbuf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(wctx, be, &wbuf));
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 64, 8);
    tg_tensor *h = tg_relu(ctx, x);              /* [64, 8]: 2 KiB, the product's input */
    tg_tensor *mm = tg_mul_mat(ctx, w, h);       /* [32, 8]: 1 KiB */
    tg_tensor *add = tg_add(ctx, mm, bias);
    tg_tensor *r = tg_relu(ctx, add);
    tg_tensor *after = tg_scale(ctx, tg_relu(ctx, r), 2.0f);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, after));
    tg_tensor *order[8];
    int n = tg_graph_n_nodes(g);
    CHECK(n == 6);
    for (int i = 0; i < n && i < 8; i++) order[i] = tg_graph_node(g, i);
    CHECK(order[1] == mm && order[3] == r);
    CHECK(tg_plan_fused_product(order, 2) == 1 && tg_plan_fused_product(order, 3) == 1);
    /* up to TG_PLAN_FUSE_DEPTH (3) nodes after the product */
    CHECK(tg_plan_fused_product(order, 4) == 1);
    CHECK(tg_plan_fused_product(order, 5) == -1 && tg_plan_fused_product(order, 1) == -1);
    /* the longest chain a backend fuses: product, scale, bias add, residual add */
    tg_tensor *chain[5] = {x, mm, tg_scale(ctx, mm, 0.5f), NULL, NULL};
    chain[3] = tg_add(ctx, chain[2], bias);
    chain[4] = tg_add(ctx, chain[3], add);
    CHECK(chain[4] && tg_plan_fused_product(chain, 4) == 1 && tg_plan_fused_product(chain, 3) == 1);
    /* a layer norm the product reads: its input lives through the chain */
    tg_tensor *ln = tg_layer_norm(ctx, x, NULL, NULL, 1e-5f);
    tg_tensor *lmm = tg_mul_mat(ctx, tg_new_2d(ctx, TG_F32, 64, 16), ln);
    tg_tensor *normed[4] = {ln, lmm, tg_add(ctx, lmm, tg_new_1d(ctx, TG_F32, 16)), NULL};
    normed[3] = tg_relu(ctx, normed[2]);
    CHECK(tg_plan_fused_lead(normed, 1) == 0 && tg_plan_fused_lead(normed, 2) == 0 &&
          tg_plan_fused_lead(normed, 3) == 0);
    CHECK(tg_plan_fused_lead(chain, 4) == -1 && tg_plan_fused_lead(normed, 0) == -1);
    /* the conv module's glu -> depthwise conv -> bias add -> silu: the conv
     * heads the chain, the glu leads it */
    tg_tensor *a = tg_new_3d(ctx, TG_F32, 32, 12, 1);
    tg_tensor *glu = tg_glu(ctx, a);
    tg_tensor *dw = tg_conv_1d_dw(ctx, tg_new_2d(ctx, TG_F32, 3, 16), glu, 1, 1);
    tg_tensor *conv[4] = {glu, dw, tg_add(ctx, dw, tg_new_1d(ctx, TG_F32, 16)), NULL};
    conv[3] = tg_silu(ctx, conv[2]);
    CHECK(conv[3] && tg_plan_fused_product(conv, 3) == 1 && tg_plan_fused_product(conv, 2) == 1);
    CHECK(tg_plan_fused_lead(conv, 3) == 0 && tg_plan_fused_lead(conv, 1) == 0);
    tg_plan p;
    CHECK_OK(tg_plan_graph(g, 64, &p));
    CHECK_MSG(!overlap(&p, h, add) && !overlap(&p, h, r) && !overlap(&p, h, order[4]),
              "a fused product's result over its input");
    /* the chain ends three nodes after the product: the scale may reuse h's storage */
    tg_plan_free(&p);
    tg_ctx_free(ctx);
    tg_buffer_free(wbuf);
    tg_ctx_free(wctx);
    tg_backend_free(be);
}

/* The subsampling's front (spec 2.1): conv0 of one input channel, bias,
 * mask, relu, depthwise conv, bias, mask, then the pointwise conv. conv0
 * heads the chain six nodes on, not seven; a conv of two input channels
 * heads none; and a plan keeps the features apart from every result of the
 * chain, though conv0 is their last reader. */
static void test_front_conv_inputs_stay_apart(void) {
    tg_backend *be = test_backend_new("fake", true, true, TEST_OPS_ALL);
    tg_ctx *ctx = tg_ctx_new();
    const int64_t C = 4;
    tg_tensor *img = tg_new_4d(ctx, TG_F32, 16, 12, 1, 1);
    tg_tensor *feat = tg_relu(ctx, img); /* a node's result, as the frontend's */
    tg_tensor *k0 = tg_new_4d(ctx, TG_F32, 3, 3, 1, C), *k1 = tg_new_4d(ctx, TG_F32, 3, 3, 1, C);
    tg_tensor *k2 = tg_new_4d(ctx, TG_F32, 1, 1, C, C), *b = tg_new_4d(ctx, TG_F32, 1, 1, C, 1);
    tg_tensor *m1 = tg_new_4d(ctx, TG_F32, 1, 6, 1, 1), *m2 = tg_new_4d(ctx, TG_F32, 1, 3, 1, 1);
    tg_tensor *x = tg_mul(ctx, tg_add(ctx, tg_conv_2d(ctx, k0, feat, 2, 2, 1, 1), b), m1);
    x = tg_conv_2d_dw(ctx, k1, tg_relu(ctx, x), 2, 2, 1, 1);
    x = tg_mul(ctx, tg_add(ctx, x, b), m2);
    tg_tensor *out = tg_relu(ctx, tg_conv_2d(ctx, k2, x, 1, 1, 0, 0));
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, out));
    tg_tensor *nodes[12];
    int n = tg_graph_n_nodes(g);
    CHECK(n == 10);
    for (int i = 0; i < n && i < 12; i++) nodes[i] = tg_graph_node(g, i);
    if (n == 10) {
        CHECK(nodes[1]->op == TG_OP_CONV_2D && nodes[8]->op == TG_OP_CONV_2D);
        for (int i = 2; i <= 7; i++) CHECK_MSG(tg_plan_fused_product(nodes, i) == 1, "node %d: head %d", i,
                                               tg_plan_fused_product(nodes, i));
        CHECK(tg_plan_fused_product(nodes, 8) == -1);      /* seven on, and not a chain of conv0's */
        CHECK(tg_plan_fused_product(nodes, 9) == -1);      /* the pointwise conv has C input channels */
        CHECK(tg_plan_fused_lead(nodes, 4) == -1);
        tg_plan p;
        CHECK_OK(tg_plan_graph(g, 64, &p));
        for (int i = 2; i <= 7; i++) CHECK_MSG(!overlap(&p, feat, nodes[i]), "node %d over the features", i);
        tg_plan_free(&p);
    }
    tg_ctx_free(ctx);
    tg_backend_free(be);
}

/* Two layer norms in a row (an encoder layer's output norm, then the next
 * layer's first, which a backend runs as one launch): the first's input
 * lives through the second, so the second's result never lands on it,
 * though the first norm is its last reader; a norm of another tensor, or
 * the first of the two, leads nothing. */
static void test_norm_pair_input_stays_apart(void) {
    tg_backend *be = test_backend_new("fake", true, true, TEST_OPS_ALL);
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_relu(ctx, tg_new_2d(ctx, TG_F32, 64, 8)); /* a node's result, freed after its last reader */
    tg_tensor *a = tg_layer_norm(ctx, x, NULL, NULL, 1e-5f);
    tg_tensor *b = tg_layer_norm(ctx, a, NULL, NULL, 1e-5f);
    tg_tensor *out = tg_add(ctx, tg_relu(ctx, b), a);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, out));
    tg_tensor *nodes[8];
    int n = tg_graph_n_nodes(g);
    CHECK(n == 5);
    for (int i = 0; i < n && i < 8; i++) nodes[i] = tg_graph_node(g, i);
    if (n == 5) {
        CHECK(nodes[1] == a && nodes[2] == b);
        CHECK(tg_plan_fused_lead(nodes, 2) == 1 && tg_plan_fused_lead(nodes, 1) == -1);
        tg_tensor *other[2] = {a, tg_layer_norm(ctx, x, NULL, NULL, 1e-5f)};
        CHECK(tg_plan_fused_lead(other, 1) == -1);
        tg_plan p;
        CHECK_OK(tg_plan_graph(g, 64, &p));
        CHECK_MSG(!overlap(&p, x, b), "the second norm's result over the first's input");
        tg_plan_free(&p);
    }
    tg_ctx_free(ctx);
    tg_backend_free(be);
}

static uint32_t rng_state = 2463534242u;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state % n;
}

/* Random lifetimes and sizes: blocks alive at a common step never overlap,
 * offsets are aligned, everything fits under the reported peak, and the peak
 * is at least the largest total alive at any one step. */
static void test_items_random_never_overlap(void) {
    enum { N = 300 };
    static tg_plan_item it[N];
    for (int round = 0; round < 50; round++) {
        int n = 1 + (int)rnd(N);
        for (int i = 0; i < n; i++) {
            int first = (int)rnd(60);
            int last = rnd(10) == 0 ? TG_PLAN_KEEP : first + (int)rnd(20);
            it[i] = (tg_plan_item){1 + rnd(5000), first, last, 0};
        }
        size_t align = (size_t)1 << rnd(8), peak = 0;
        CHECK_OK(tg_plan_items(it, n, align, &peak));
        size_t max_live = 0;
        for (int step = 0; step < 90; step++) {
            size_t live = 0;
            for (int i = 0; i < n; i++)
                if (it[i].first <= step && step <= it[i].last)
                    live += (it[i].size + align - 1) & ~(align - 1);
            if (live > max_live) max_live = live;
        }
        CHECK(peak >= max_live);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            if (it[i].offset % align || it[i].offset + it[i].size > peak) bad++;
            for (int j = i + 1; j < n; j++) {
                bool together = it[i].first <= it[j].last && it[j].first <= it[i].last;
                bool apart = it[i].offset + it[i].size <= it[j].offset ||
                             it[j].offset + it[j].size <= it[i].offset;
                if (together && !apart) bad++;
            }
        }
        CHECK_MSG(bad == 0, "round %d: %d violations", round, bad);
    }
}

TEST_MAIN(T(test_items_hand_computed), T(test_items_random_never_overlap), T(test_items_coalescing),
          T(test_items_size_overflow_is_an_error),
          T(test_items_best_fit_and_growth), T(test_chain_reuses_memory),
          T(test_value_read_late_stays_alive), T(test_views_keep_sources_alive),
          T(test_outputs_inputs_and_weights), T(test_fused_product_inputs_stay_apart),
          T(test_front_conv_inputs_stay_apart), T(test_norm_pair_input_stays_apart))
