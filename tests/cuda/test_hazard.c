/*
 * test_hazard.c: the memory-range hazard tracker (src/tensor/hazard.c) that
 * the CUDA backend turns into concurrent streams: independent nodes share a
 * run; a read after a write, a write after a read and a write after a write
 * start a new one; views compute nothing; exclusive nodes and the length cap
 * split runs; a fused group counts as one launch at its first node. The tracker looks only at addresses, so tensors here get fake
 * ones and nothing is allocated.
 */
#include "check.h"
#include "hazard.h"

#define ADDR(x) ((void *)(uintptr_t)(x))

static tg_tensor *vec(tg_ctx *ctx, uintptr_t addr) {
    tg_tensor *t = tg_new_1d(ctx, TG_F32, 16); /* 64 bytes */
    if (t) t->data = ADDR(addr);
    return t;
}

static void test_independent_nodes_share_a_run(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = vec(ctx, 0x1000), *b = vec(ctx, 0x2000);
    tg_tensor *n0 = tg_relu(ctx, a), *n1 = tg_relu(ctx, b);
    n0->data = ADDR(0x3000);
    n1->data = ADDR(0x4000);
    tg_tensor *nodes[2] = {n0, n1};
    int run[2];
    CHECK(tg_hazard_runs(nodes, 2, NULL, 0, run) == 1);
    CHECK(run[0] == 0 && run[1] == 0);
    CHECK(!tg_hazard_overlap(n0, n1));
    tg_ctx_free(ctx);
}

static void test_read_after_write_and_write_after_read_split(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = vec(ctx, 0x1000);
    tg_tensor *n0 = tg_relu(ctx, a);     /* writes 0x3000 */
    tg_tensor *n1 = tg_relu(ctx, n0);    /* reads 0x3000: RAW */
    tg_tensor *n2 = tg_silu(ctx, a);     /* joins n1: its run touches neither a nor 0x1020 */
    n0->data = ADDR(0x3000);
    n1->data = ADDR(0x5000);
    n2->data = ADDR(0x1020);             /* overlaps a, read only in run 0 */
    tg_tensor *n3 = tg_relu(ctx, a);     /* reads a, which n2 writes: RAW after n2 */
    n3->data = ADDR(0x6000);
    tg_tensor *nodes[4] = {n0, n1, n2, n3};
    int run[4];
    CHECK(tg_hazard_runs(nodes, 4, NULL, 0, run) == 3);
    CHECK(run[0] == 0 && run[1] == 1 && run[2] == 1 && run[3] == 2);
    /* WAR: a node writing what an earlier node of the run reads. */
    tg_tensor *m0 = tg_relu(ctx, a), *m1 = tg_relu(ctx, vec(ctx, 0x7000));
    m0->data = ADDR(0x8000);
    m1->data = ADDR(0x1010);             /* inside a, which m0 reads */
    tg_tensor *war[2] = {m0, m1};
    CHECK(tg_hazard_runs(war, 2, NULL, 0, run) == 2);
    /* WAW */
    m1->data = ADDR(0x8020);
    CHECK(tg_hazard_runs(war, 2, NULL, 0, run) == 2);
    m1->data = ADDR(0x8040);             /* just past m0's 64 bytes */
    CHECK(tg_hazard_runs(war, 2, NULL, 0, run) == 1);
    tg_ctx_free(ctx);
}

static void test_views_exclusive_and_cap(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = vec(ctx, 0x1000);
    tg_tensor *v = tg_view_1d(ctx, a, 8, 0);
    tg_tensor *n[5];
    for (int i = 0; i < 5; i++) {
        n[i] = tg_relu(ctx, a);
        n[i]->data = ADDR(0x10000 + 0x100 * (uintptr_t)i);
    }
    tg_tensor *nodes[6] = {v, n[0], n[1], n[2], n[3], n[4]};
    int run[6];
    CHECK(tg_hazard_runs(nodes, 6, NULL, 0, run) == 1);
    CHECK(run[0] == -1 && run[1] == 0 && run[5] == 0);
    CHECK(tg_hazard_runs(nodes, 6, NULL, 2, run) == 3); /* runs of at most 2 */
    CHECK(run[1] == 0 && run[2] == 0 && run[3] == 1 && run[5] == 2);
    uint8_t excl[6] = {0, TG_HAZARD_SHARED, 0, TG_HAZARD_SHARED, 0, 0};
    CHECK(tg_hazard_runs(nodes, 6, excl, 0, run) == 2);
    CHECK(run[1] == 0 && run[2] == 0 && run[3] == 1 && run[4] == 1);
    /* A node that runs alone ends the run before it and the one it opens. */
    uint8_t alone[6] = {0, 0, 0, TG_HAZARD_ALONE, 0, 0};
    CHECK(tg_hazard_runs(nodes, 6, alone, 0, run) == 3);
    CHECK(run[1] == 0 && run[2] == 0 && run[3] == 1 && run[4] == 2 && run[5] == 2);
    uint8_t first[6] = {0, TG_HAZARD_ALONE, TG_HAZARD_ALONE, 0, 0, 0};
    CHECK(tg_hazard_runs(nodes, 6, first, 0, run) == 3);
    CHECK(run[1] == 0 && run[2] == 1 && run[3] == 2 && run[5] == 2);
    tg_ctx_free(ctx);
}

/* A fused group (a product and its bias add, launched as one) writes the
 * add's result where the product stands: that write conflicts with a node
 * of the run reading the same memory, though the product's own result does
 * not. Found on the H200: the planner had given the add's result the
 * storage of a tensor whose last reader ran beside the product. */
/* The last reader of x (at 0x1000, its result at 0x4000) and a product
 * of two other vectors, its result at mm_at. */
static tg_tensor *reader_and_product(tg_ctx *ctx, uintptr_t mm_at, tg_tensor **out_reader) {
    tg_tensor *x = vec(ctx, 0x1000), *w = vec(ctx, 0x2000), *h = vec(ctx, 0x3000);
    tg_tensor *reader = *out_reader = tg_relu(ctx, x);
    reader->data = ADDR(0x4000);
    tg_tensor *mm = tg_mul_mat(ctx, tg_reshape_2d(ctx, w, 16, 1), tg_reshape_2d(ctx, h, 16, 1));
    mm->data = ADDR(mm_at);
    return mm;
}

static void test_fused_group_writes_at_its_first_node(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *reader, *mm = reader_and_product(ctx, 0x5000, &reader);
    tg_tensor *bias = tg_new_1d(ctx, TG_F32, 1);
    bias->data = ADDR(0x6000);
    tg_tensor *add = tg_add(ctx, mm, bias);
    CHECK(add != NULL);
    add->data = ADDR(0x1000); /* x's storage, free once `reader` has run */
    tg_tensor *nodes[3] = {reader, mm, add};
    int run[3];
    /* as separate launches the product joins the reader's run */
    CHECK(tg_hazard_runs(nodes, 3, NULL, 0, run) == 2);
    CHECK(run[0] == 0 && run[1] == 0 && run[2] == 1);
    /* as one launch at the product, its write of x's storage must wait */
    int group[3] = {1, 2, 0};
    CHECK(tg_hazard_runs_grouped(nodes, 3, NULL, group, NULL, 0, run) == 2);
    CHECK_MSG(run[0] == 0 && run[1] == 1 && run[2] == 1, "runs %d %d %d", run[0], run[1], run[2]);
    /* a 0 with no accepted group before it (a refused length) is a launch
     * of its own, its ranges counted: here the add, reading mm, waits */
    int refused[3] = {1, 9, 0};
    CHECK(tg_hazard_runs_grouped(nodes, 3, NULL, refused, NULL, 0, run) == 2);
    CHECK_MSG(run[0] == 0 && run[1] == 0 && run[2] == 1, "runs %d %d %d", run[0], run[1], run[2]);
    tg_ctx_free(ctx);
}

/* A group whose launch still stores an intermediate (a product whose
 * result others read, then a set_rows of part of it into a cache): with
 * writes[] marking that node, a node of the run reading the memory the
 * intermediate was given must finish first; without it the write is
 * unseen and the two would share a run. */
static void test_group_writes_a_marked_intermediate(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *reader, *mm = reader_and_product(ctx, 0x1000, &reader); /* x's storage, free after `reader` */
    tg_tensor *cache = tg_new_2d(ctx, TG_F32, 1, 4), *ids = tg_new_1d(ctx, TG_I32, 1);
    cache->data = ADDR(0x7000);
    ids->data = ADDR(0x8000);
    tg_tensor *rows = tg_set_rows(ctx, cache, mm, ids);
    CHECK(rows != NULL);
    if (!rows) {
        tg_ctx_free(ctx);
        return;
    }
    tg_tensor *nodes[3] = {reader, mm, rows};
    int run[3], group[3] = {1, 2, 0};
    CHECK(tg_hazard_runs_grouped(nodes, 3, NULL, group, NULL, 0, run) == 1); /* the store unseen */
    uint8_t writes[3] = {0, 1, 0};
    CHECK(tg_hazard_runs_grouped(nodes, 3, NULL, group, writes, 0, run) == 2);
    CHECK_MSG(run[0] == 0 && run[1] == 1 && run[2] == 1, "runs %d %d %d", run[0], run[1], run[2]);
    tg_ctx_free(ctx);
}

TEST_MAIN(T(test_independent_nodes_share_a_run), T(test_read_after_write_and_write_after_read_split),
          T(test_views_exclusive_and_cap), T(test_fused_group_writes_at_its_first_node),
          T(test_group_writes_a_marked_intermediate))
