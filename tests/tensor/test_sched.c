/*
 * test_sched.c: the scheduler, with a fake "gpu" backend whose buffers claim
 * not to be host memory and which supports only some ops, next to a fake CPU
 * (and, in the last tests, the real CPU backend). Checks: where each node is
 * placed (weights, unsupported ops, following sources, priority, views, in-
 * place writes), the number of splits and inserted copies, that the results
 * are right (the fakes refuse any tensor outside their own buffers, so a
 * missing copy fails), arena reuse across calls, abort between splits, a
 * fused product's inputs kept apart from its chain's results, computes
 * queued without waiting (tg_sched_compute_async), and the refusals.
 */
#include "check.h"
#include "test_backend.h"

#define GPU_OPS (TEST_OP(TG_OP_ADD) | TEST_OP(TG_OP_MUL_MAT) | TEST_OP(TG_OP_SCALE) | TEST_OP(TG_OP_CPY))

typedef struct env {
    tg_backend *gpu, *cpu;
    tg_backend *list[2];
    tg_sched *sched;
} env;

static void env_open_kind(env *e, uint64_t gpu_ops, bool deferred) {
    e->gpu = deferred ? test_backend_new_deferred("gpu", gpu_ops)
                      : test_backend_new("gpu", false, false, gpu_ops);
    e->cpu = test_backend_new("cpu", true, true, TEST_OPS_ALL);
    e->list[0] = e->gpu;
    e->list[1] = e->cpu;
    e->sched = NULL;
    CHECK_OK(tg_sched_new(e->list, 2, &e->sched));
}

static void env_open(env *e, uint64_t gpu_ops) { env_open_kind(e, gpu_ops, false); }

static void env_close(env *e) {
    tg_sched_free(e->sched);
    CHECK(test_backend_n_buffers(e->gpu) == 0 && test_backend_n_buffers(e->cpu) == 0);
    tg_backend_free(e->gpu);
    tg_backend_free(e->cpu);
}

static void set_f32(tg_tensor *t, const float *v) {
    CHECK_OK(tg_tensor_set(t, v, 0, (size_t)tg_nelements(t) * sizeof(float)));
}

/* out[n, m] = sum_k a[k, n] b[k, m]; a [K, N], b [K, M] */
static void ref_mul_mat(const float *a, const float *b, float *out, int K, int N, int M) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc = 0;
            for (int k = 0; k < K; k++) acc += a[n * K + k] * b[m * K + k];
            out[m * N + n] = acc;
        }
}

/* tg_sched_compute_async: a graph on one backend is queued and left there
 * (the deferred fake runs its work at synchronize, as a GPU stream would);
 * tg_sched_synchronize runs it, two queued computes in order; a graph over
 * two backends is computed as tg_sched_compute does. */
static void test_compute_async_queues_on_one_backend(void) {
    env e;
    env_open_kind(&e, GPU_OPS, true);
    tg_ctx *wctx = tg_ctx_new();
    tg_tensor *w = tg_set_name(tg_new_2d(wctx, TG_F32, 4, 3), "w");
    tg_buffer *wbuf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(wctx, e.gpu, &wbuf));
    float wv[12], xv[8], hv[6], got[6];
    for (int i = 0; i < 12; i++) wv[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < 8; i++) xv[i] = (float)i * 0.25f - 1.0f;
    set_f32(w, wv);
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_set_name(tg_new_2d(ctx, TG_F32, 4, 2), "x");
    x->flags |= TG_FLAG_INPUT;
    tg_tensor *o = tg_scale(ctx, tg_mul_mat(ctx, w, x), 2.0f);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, o));
    CHECK_OK(tg_sched_alloc(e.sched, g));
    CHECK(tg_sched_n_splits(e.sched) == 1);
    set_f32(x, xv);
    int nodes = test_backend_n_nodes(e.gpu);
    CHECK_OK(tg_sched_compute_async(e.sched, g));
    CHECK_OK(tg_sched_compute_async(e.sched, g));
    CHECK_MSG(test_backend_n_nodes(e.gpu) == nodes, "%d nodes ran before synchronize",
              test_backend_n_nodes(e.gpu) - nodes);
    CHECK_OK(tg_sched_synchronize(e.sched));
    CHECK(test_backend_n_nodes(e.gpu) == nodes + 4);
    ref_mul_mat(wv, xv, hv, 4, 3, 2);
    CHECK_OK(tg_tensor_get(o, got, 0, sizeof got));
    for (int i = 0; i < 6; i++) CHECK_NEAR(got[i], 2.0f * hv[i], 1e-5);
    CHECK_ERR(tg_sched_synchronize(NULL), TG_ERR_INVALID_ARG, "NULL");
    CHECK_ERR(tg_sched_compute_async(e.sched, NULL), TG_ERR_INVALID_ARG, "NULL");

    /* relu is not on the fake gpu: two splits, computed and synchronized */
    tg_ctx *ctx2 = tg_ctx_new();
    tg_tensor *x2 = tg_set_name(tg_new_2d(ctx2, TG_F32, 4, 2), "x2");
    x2->flags |= TG_FLAG_INPUT;
    tg_tensor *o2 = tg_relu(ctx2, tg_mul_mat(ctx2, w, x2));
    tg_graph *g2 = tg_graph_new(ctx2);
    CHECK_OK(tg_graph_build(g2, o2));
    CHECK_OK(tg_sched_alloc(e.sched, g2));
    CHECK(tg_sched_n_splits(e.sched) == 2);
    set_f32(x2, xv);
    CHECK_OK(tg_sched_compute_async(e.sched, g2));
    CHECK_OK(tg_tensor_get(o2, got, 0, sizeof got));
    for (int i = 0; i < 6; i++) CHECK_NEAR(got[i], hv[i] > 0 ? hv[i] : 0.0f, 1e-5);
    tg_ctx_free(ctx2);
    tg_ctx_free(ctx);
    tg_buffer_free(wbuf);
    tg_ctx_free(wctx);
    env_close(&e);
}

static void test_placement_splits_copies_results(void) {
    env e;
    env_open(&e, GPU_OPS);
    tg_ctx *wctx = tg_ctx_new();
    tg_tensor *w = tg_set_name(tg_new_2d(wctx, TG_F32, 4, 3), "w");
    tg_tensor *w2 = tg_set_name(tg_new_2d(wctx, TG_F32, 3, 3), "w2");
    tg_buffer *wbuf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(wctx, e.gpu, &wbuf));
    float wv[12], w2v[9], xv[8];
    for (int i = 0; i < 12; i++) wv[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < 9; i++) w2v[i] = 0.5f * (float)i - 1.0f;
    for (int i = 0; i < 8; i++) xv[i] = (float)i * 0.25f - 1.0f;
    set_f32(w, wv);
    set_f32(w2, w2v);

    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_set_name(tg_new_2d(ctx, TG_F32, 4, 2), "x");
    x->flags |= TG_FLAG_INPUT;
    tg_tensor *h = tg_set_name(tg_mul_mat(ctx, w, x), "h");    /* gpu: its weight */
    tg_tensor *r = tg_set_name(tg_relu(ctx, h), "r");          /* unsupported: cpu */
    tg_tensor *s = tg_set_name(tg_scale(ctx, r, 2.0f), "s");   /* follows r: cpu */
    tg_tensor *t = tg_set_name(tg_add(ctx, s, h), "t");        /* follows s: cpu */
    tg_tensor *o = tg_set_name(tg_mul_mat(ctx, w2, t), "o");   /* gpu: its weight */
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, o));

    CHECK_OK(tg_sched_alloc(e.sched, g));
    CHECK(tg_sched_node_backend(e.sched, h) == e.gpu);
    CHECK(tg_sched_node_backend(e.sched, r) == e.cpu);
    CHECK(tg_sched_node_backend(e.sched, s) == e.cpu);
    CHECK(tg_sched_node_backend(e.sched, t) == e.cpu);
    CHECK(tg_sched_node_backend(e.sched, o) == e.gpu);
    CHECK(tg_sched_node_backend(e.sched, x) == e.gpu); /* its first consumer's */
    CHECK(tg_sched_node_backend(e.sched, w) == e.gpu);
    CHECK_MSG(tg_sched_n_splits(e.sched) == 3, "%d splits", tg_sched_n_splits(e.sched));
    /* h to the cpu once (read by r and t), t to the gpu */
    CHECK_MSG(tg_sched_n_copies(e.sched) == 2, "%d copies", tg_sched_n_copies(e.sched));
    CHECK(tg_sched_planned_bytes(e.sched, e.gpu) > 0 && tg_sched_planned_bytes(e.sched, e.cpu) > 0);
    CHECK(x->buffer && tg_buffer_backend(x->buffer) == e.gpu);

    set_f32(x, xv);
    CHECK_OK(tg_sched_compute(e.sched, g));
    float hv[6], tv[6], ov[6], got[6];
    ref_mul_mat(wv, xv, hv, 4, 3, 2);
    for (int i = 0; i < 6; i++) tv[i] = 2.0f * (hv[i] > 0 ? hv[i] : 0) + hv[i];
    ref_mul_mat(w2v, tv, ov, 3, 3, 2);
    CHECK_OK(tg_tensor_get(o, got, 0, sizeof got));
    for (int i = 0; i < 6; i++) CHECK_NEAR(got[i], ov[i], 1e-5);
    /* the graph's sources are the caller's again after compute */
    CHECK(t->src[1] == h && r->src[0] == h && o->src[1] == t);
    CHECK(test_backend_n_computes(e.gpu) == 2 && test_backend_n_computes(e.cpu) == 1);

    /* a second compute with new input reuses the plan and the arenas */
    int gbufs = test_backend_n_buffers(e.gpu), cbufs = test_backend_n_buffers(e.cpu);
    tg_buffer *arena = o->buffer;
    for (int i = 0; i < 8; i++) xv[i] = -xv[i];
    set_f32(x, xv);
    CHECK_OK(tg_sched_compute(e.sched, g));
    ref_mul_mat(wv, xv, hv, 4, 3, 2);
    for (int i = 0; i < 6; i++) tv[i] = 2.0f * (hv[i] > 0 ? hv[i] : 0) + hv[i];
    ref_mul_mat(w2v, tv, ov, 3, 3, 2);
    CHECK_OK(tg_tensor_get(o, got, 0, sizeof got));
    for (int i = 0; i < 6; i++) CHECK_NEAR(got[i], ov[i], 1e-5);
    CHECK(test_backend_n_buffers(e.gpu) == gbufs && test_backend_n_buffers(e.cpu) == cbufs);
    CHECK(o->buffer == arena);

    tg_ctx_free(ctx);
    tg_buffer_free(wbuf);
    tg_ctx_free(wctx);
    env_close(&e);
}

static void test_weight_on_unsupporting_backend_goes_to_cpu(void) {
    env e;
    env_open(&e, TEST_OP(TG_OP_ADD)); /* no mul_mat on the gpu */
    tg_ctx *wctx = tg_ctx_new();
    tg_tensor *w = tg_set_name(tg_new_2d(wctx, TG_F32, 2, 2), "w");
    tg_buffer *wbuf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(wctx, e.gpu, &wbuf));
    set_f32(w, (float[]){1, 2, 3, 4});
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 2, 1);
    tg_tensor *y = tg_mul_mat(ctx, w, x);
    tg_tensor *z = tg_add(ctx, y, y); /* follows y: the cpu */
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, z));
    CHECK_OK(tg_sched_alloc(e.sched, g));
    CHECK(tg_sched_node_backend(e.sched, y) == e.cpu);
    CHECK(tg_sched_node_backend(e.sched, z) == e.cpu);
    CHECK(tg_sched_n_splits(e.sched) == 1 && tg_sched_n_copies(e.sched) == 1); /* w in */
    set_f32(x, (float[]){1, -1});
    CHECK_OK(tg_sched_compute(e.sched, g));
    float got[2];
    CHECK_OK(tg_tensor_get(z, got, 0, sizeof got));
    CHECK(got[0] == 2 * (1 - 2) && got[1] == 2 * (3 - 4));
    tg_ctx_free(ctx);
    tg_buffer_free(wbuf);
    tg_ctx_free(wctx);
    env_close(&e);
}

static void test_priority_views_and_followers(void) {
    env e;
    env_open(&e, GPU_OPS);
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_2d(ctx, TG_F32, 3, 2);
    tg_tensor *b = tg_new_2d(ctx, TG_F32, 3, 2);
    tg_tensor *sum = tg_add(ctx, a, b);             /* no placed source: priority, gpu */
    tg_tensor *v = tg_reshape_2d(ctx, sum, 2, 3);   /* a view: where sum is */
    tg_tensor *rv = tg_relu(ctx, v);                /* cpu, reads the view: copy */
    tg_tensor *back = tg_scale(ctx, rv, 3.0f);      /* follows rv: cpu */
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, back));
    CHECK_OK(tg_sched_alloc(e.sched, g));
    CHECK(tg_sched_node_backend(e.sched, sum) == e.gpu);
    CHECK(tg_sched_node_backend(e.sched, a) == e.gpu && tg_sched_node_backend(e.sched, b) == e.gpu);
    CHECK(tg_sched_node_backend(e.sched, v) == e.gpu);
    CHECK(tg_sched_node_backend(e.sched, rv) == e.cpu);
    CHECK(tg_sched_node_backend(e.sched, back) == e.cpu);
    CHECK(tg_sched_n_splits(e.sched) == 2 && tg_sched_n_copies(e.sched) == 1);
    CHECK(v->data == sum->data); /* views resolved */
    set_f32(a, (float[]){1, -2, 3, -4, 5, -6});
    set_f32(b, (float[]){0, 0, 0, 0, 0, -1});
    CHECK_OK(tg_sched_compute(e.sched, g));
    float got[6];
    CHECK_OK(tg_tensor_get(back, got, 0, sizeof got));
    const float want[6] = {3, 0, 9, 0, 15, 0};
    for (int i = 0; i < 6; i++) CHECK(got[i] == want[i]);
    tg_ctx_free(ctx);
    env_close(&e);
}

static void test_inplace_write_runs_where_storage_is(void) {
    env e;
    env_open(&e, GPU_OPS);
    tg_ctx *wctx = tg_ctx_new();
    tg_tensor *cache = tg_set_name(tg_new_2d(wctx, TG_F32, 4, 3), "cache");
    tg_buffer *cbuf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(wctx, e.gpu, &cbuf));
    CHECK_OK(tg_buffer_clear(cbuf, 0));
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 4, 1);
    tg_tensor *r = tg_relu(ctx, x);                               /* cpu */
    tg_tensor *row1 = tg_view_2d(ctx, cache, 4, 1, cache->nb[1], cache->nb[1]);
    tg_tensor *w = tg_cpy(ctx, r, row1);                          /* gpu: cache is there */
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, w));
    CHECK_OK(tg_sched_alloc(e.sched, g));
    CHECK(tg_sched_node_backend(e.sched, r) == e.cpu);
    CHECK(tg_sched_node_backend(e.sched, w) == e.gpu);
    CHECK(tg_sched_n_splits(e.sched) == 2 && tg_sched_n_copies(e.sched) == 1);
    CHECK((char *)w->data == (char *)cache->data + cache->nb[1]);
    set_f32(x, (float[]){-1, 2, -3, 4});
    CHECK_OK(tg_sched_compute(e.sched, g));
    float got[12];
    CHECK_OK(tg_tensor_get(cache, got, 0, sizeof got));
    const float want[12] = {0, 0, 0, 0, 0, 2, 0, 4, 0, 0, 0, 0};
    for (int i = 0; i < 12; i++) CHECK(got[i] == want[i]);
    tg_ctx_free(ctx);
    tg_buffer_free(cbuf);
    tg_ctx_free(wctx);
    env_close(&e);
}

/* True when two placed tensors' bytes share an address. */
static bool share_bytes(const tg_tensor *a, const tg_tensor *b) {
    const char *pa = a->data, *pb = b->data;
    return pa < pb + tg_nbytes(b) && pb < pa + tg_nbytes(a);
}

/* The scheduler plans like tg_plan_graph: a product's inputs outlive the
 * chain a backend may fuse after it (bias add, then one more node), so a
 * fused launch never writes its result over what the product reads. Without
 * the rule the add's 1 KiB result lands in the 2 KiB hole of h. */
static void test_fused_product_inputs_stay_apart(void) {
    env e;
    env_open(&e, GPU_OPS);
    tg_ctx *wctx = tg_ctx_new();
    tg_tensor *w = tg_new_2d(wctx, TG_F32, 64, 32), *bias = tg_new_1d(wctx, TG_F32, 32);
    tg_buffer *wbuf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(wctx, e.gpu, &wbuf));
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 64, 8);
    tg_tensor *h = tg_scale(ctx, x, 0.5f);      /* [64, 8]: 2 KiB */
    tg_tensor *add = tg_add(ctx, tg_mul_mat(ctx, w, h), bias);
    tg_tensor *s2 = tg_scale(ctx, add, 2.0f);
    tg_tensor *out = tg_scale(ctx, tg_scale(ctx, s2, 1.0f), 1.0f);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, out));
    CHECK_OK(tg_sched_alloc(e.sched, g));
    CHECK(tg_sched_n_splits(e.sched) == 1 && tg_sched_node_backend(e.sched, add) == e.gpu);
    CHECK_MSG(!share_bytes(h, add) && !share_bytes(h, s2), "a fused product's result over its input");
    tg_ctx_free(ctx);
    tg_buffer_free(wbuf);
    tg_ctx_free(wctx);
    env_close(&e);
}

static bool always(void *user) {
    (*(int *)user)++;
    return true;
}

static void test_abort_between_splits(void) {
    env e;
    env_open(&e, GPU_OPS);
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_1d(ctx, TG_F32, 4);
    tg_tensor *y = tg_scale(ctx, tg_relu(ctx, tg_add(ctx, x, x)), 2.0f);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, y));
    CHECK_OK(tg_sched_alloc(e.sched, g));
    CHECK(tg_sched_n_splits(e.sched) == 2);
    set_f32(x, (float[]){1, 2, 3, 4});
    int calls = 0;
    tg_backend_set_abort(e.cpu, always, &calls);
    CHECK_ERR(tg_sched_compute(e.sched, g), TG_ERR_ABORTED, "aborted before split 0 of 2");
    CHECK(calls >= 1 && test_backend_n_nodes(e.gpu) == 0 && test_backend_n_nodes(e.cpu) == 0);
    tg_backend_set_abort(e.cpu, NULL, NULL);
    CHECK_OK(tg_sched_compute(e.sched, g)); /* usable again */
    float got[4];
    CHECK_OK(tg_tensor_get(y, got, 0, sizeof got));
    CHECK(got[0] == 4 && got[3] == 16);
    tg_ctx_free(ctx);
    env_close(&e);
}

/* Arenas grow and never shrink, until tg_sched_release gives them back. */
static void test_arenas_grow_never_shrink(void) {
    env e;
    env_open(&e, GPU_OPS);
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *small = tg_add(ctx, tg_new_1d(ctx, TG_F32, 16), tg_new_1d(ctx, TG_F32, 16));
    tg_tensor *big = tg_add(ctx, tg_new_1d(ctx, TG_F32, 4096), tg_new_1d(ctx, TG_F32, 4096));
    tg_graph *gs = tg_graph_new(ctx), *gb = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(gs, small));
    CHECK_OK(tg_graph_build(gb, big));
    CHECK_OK(tg_sched_alloc(e.sched, gs));
    size_t ps = tg_sched_planned_bytes(e.sched, e.gpu);
    tg_buffer *arena = small->buffer;
    CHECK(ps >= 3 * 64 && ps < 4096);
    CHECK_OK(tg_sched_alloc(e.sched, gb));
    size_t pb = tg_sched_planned_bytes(e.sched, e.gpu);
    CHECK(pb >= 3 * 4096 * 4 && big->buffer != NULL && tg_buffer_size(big->buffer) >= pb);
    tg_buffer *grown = big->buffer;
    CHECK_OK(tg_sched_alloc(e.sched, gs)); /* fits: same arena */
    CHECK(small->buffer == grown && tg_sched_planned_bytes(e.sched, e.gpu) == ps);
    CHECK(test_backend_n_buffers(e.gpu) == 1);
    (void)arena;
    /* compute of a graph not allocated last allocates it first */
    set_f32(big->src[0], (float[4096]){[0] = 1, [4095] = 2});
    CHECK(tg_sched_compute(e.sched, gb) == NULL);
    /* released (after running out of memory): no arena is left, and the
     * next allocation plans and makes one as large as it needs */
    tg_sched_release(e.sched);
    CHECK(test_backend_n_buffers(e.gpu) == 0 && tg_sched_planned_bytes(e.sched, e.gpu) == 0);
    CHECK_OK(tg_sched_alloc(e.sched, gs));
    CHECK(test_backend_n_buffers(e.gpu) == 1 && tg_sched_planned_bytes(e.sched, e.gpu) == ps);
    CHECK(tg_buffer_size(small->buffer) < pb);
    set_f32(small->src[0], (float[16]){[0] = 3});
    set_f32(small->src[1], (float[16]){[0] = 4});
    CHECK_OK(tg_sched_compute(e.sched, gs));
    float got = 0;
    CHECK_OK(tg_tensor_get(small, &got, 0, sizeof got));
    CHECK(got == 7);
    tg_sched_release(NULL);
    tg_ctx_free(ctx);
    env_close(&e);
}

static void test_refusals(void) {
    tg_backend *gpu = test_backend_new("gpu", false, false, GPU_OPS);
    tg_backend *cpu = test_backend_new("cpu", true, true, TEST_OPS_ALL);
    tg_sched *s = NULL;
    CHECK_ERR(tg_sched_new((tg_backend *[]){gpu}, 1, &s), TG_ERR_INVALID_ARG, "CPU backend");
    CHECK(s == NULL);
    CHECK_ERR(tg_sched_new(NULL, 0, &s), TG_ERR_INVALID_ARG, "no backends");
    CHECK_ERR(tg_sched_new((tg_backend *[]){gpu, NULL}, 2, &s), TG_ERR_INVALID_ARG, "backend 1 is NULL");
    CHECK_OK(tg_sched_new((tg_backend *[]){gpu, cpu}, 2, &s));

    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *wt = tg_set_name(tg_new_1d(ctx, TG_F32, 4), "enc.w");
    wt->flags |= TG_FLAG_WEIGHT;
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, tg_add(ctx, wt, wt)));
    CHECK_ERR(tg_sched_alloc(s, g), TG_ERR_INVALID_ARG, "weight 'enc.w' [4] has no storage");
    CHECK(tg_sched_n_splits(s) == 0);
    tg_ctx_free(ctx);

    ctx = tg_ctx_new();
    tg_tensor *glu = tg_set_name(tg_glu(ctx, tg_new_1d(ctx, TG_F32, 4)), "gated");
    g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, glu));
    CHECK_ERR(tg_sched_alloc(s, g), TG_ERR_UNSUPPORTED, "no backend supports node 'gated' [2] (glu");
    CHECK_ERR(tg_sched_compute(s, g), TG_ERR_UNSUPPORTED, "glu");
    CHECK_ERR(tg_sched_alloc(s, NULL), TG_ERR_INVALID_ARG, "NULL");
    CHECK(tg_sched_node_backend(s, glu) == NULL);
    tg_ctx_free(ctx);

    /* a weight in a device buffer of a backend the scheduler does not have */
    tg_backend *other = test_backend_new("other-gpu", false, false, GPU_OPS);
    tg_ctx *octx = tg_ctx_new();
    tg_tensor *ow = tg_set_name(tg_new_1d(octx, TG_F32, 4), "far.w");
    tg_buffer *obuf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(octx, other, &obuf));
    ctx = tg_ctx_new();
    g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, tg_relu(ctx, ow)));
    CHECK_ERR(tg_sched_alloc(s, g), TG_ERR_INVALID_ARG,
              "'far.w' [4] lives in a buffer of other-gpu, which is not one of this");
    tg_ctx_free(ctx);
    tg_buffer_free(obuf);
    tg_ctx_free(octx);
    tg_backend_free(other);

    tg_sched_free(s);
    tg_sched_free(NULL);
    tg_backend_free(gpu);
    tg_backend_free(cpu);
}

/* A split's copies happen before its first node runs, so the plan must not
 * put a copy where a tensor read by that split's nodes still lives. Order:
 * [T] cpu, [G = T + w] gpu (w lives there), [n1 = relu(T), n2 = G - n1] cpu
 * with G copied in. n2 is 1 everywhere unless G's copy overwrote T. */
static void test_copies_do_not_clobber_split_inputs(void) {
    env e;
    env_open(&e, TEST_OP(TG_OP_ADD));
    tg_ctx *wctx = tg_ctx_new();
    tg_tensor *w = tg_new_1d(wctx, TG_F32, 16);
    tg_buffer *wbuf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(wctx, e.gpu, &wbuf));
    float ones[16], xv[16], got[16];
    for (int i = 0; i < 16; i++) {
        ones[i] = 1;
        xv[i] = (i % 2) ? -(float)i : (float)i;
    }
    set_f32(w, ones);
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_1d(ctx, TG_F32, 16);
    tg_tensor *t = tg_relu(ctx, x);
    tg_tensor *gs = tg_add(ctx, t, w);
    tg_tensor *n1 = tg_relu(ctx, t);
    tg_tensor *n2 = tg_sub(ctx, gs, n1);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, n2));
    CHECK_OK(tg_sched_alloc(e.sched, g));
    CHECK(tg_sched_node_backend(e.sched, gs) == e.gpu && tg_sched_node_backend(e.sched, n2) == e.cpu);
    CHECK(tg_sched_n_splits(e.sched) == 3 && tg_sched_n_copies(e.sched) == 2);
    set_f32(x, xv);
    CHECK_OK(tg_sched_compute(e.sched, g));
    CHECK_OK(tg_tensor_get(n2, got, 0, sizeof got));
    for (int i = 0; i < 16; i++) CHECK_MSG(got[i] == 1.0f, "n2[%d] = %g", i, (double)got[i]);
    tg_ctx_free(ctx);
    tg_buffer_free(wbuf);
    tg_ctx_free(wctx);
    env_close(&e);
}

/* The per-step pattern: a new context and graph every call, computed without
 * an explicit alloc. A graph rebuilt at the addresses of a freed one must be
 * allocated again, not run on the old plan. */
static void test_rebuilt_graph_each_step(void) {
    env e;
    env_open(&e, GPU_OPS);
    for (int step = 0; step < 4; step++) {
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *x = tg_new_1d(ctx, TG_F32, 4);
        tg_tensor *y = tg_scale(ctx, tg_relu(ctx, tg_add(ctx, x, x)), (float)step);
        tg_graph *g = tg_graph_new(ctx);
        CHECK_OK(tg_graph_build(g, y));
        CHECK_OK(tg_sched_alloc(e.sched, g));
        set_f32(x, (float[]){1, -2, 3, -4});
        CHECK_OK(tg_sched_compute(e.sched, g));
        float got[4];
        CHECK_OK(tg_tensor_get(y, got, 0, sizeof got));
        CHECK(got[0] == 2.0f * (float)step && got[1] == 0 && got[2] == 6.0f * (float)step);
        tg_ctx_free(ctx);
        /* the same again, computed without tg_sched_alloc */
        ctx = tg_ctx_new();
        x = tg_new_1d(ctx, TG_F32, 4);
        y = tg_scale(ctx, tg_relu(ctx, tg_add(ctx, x, x)), (float)step);
        g = tg_graph_new(ctx);
        CHECK_OK(tg_graph_build(g, y));
        CHECK_OK(tg_sched_compute(e.sched, g)); /* allocates; x holds garbage */
        set_f32(x, (float[]){1, -2, 3, -4});
        CHECK_OK(tg_sched_compute(e.sched, g));
        CHECK_OK(tg_tensor_get(y, got, 0, sizeof got));
        CHECK(got[0] == 2.0f * (float)step && got[3] == 0);
        tg_ctx_free(ctx);
    }
    CHECK(test_backend_n_buffers(e.gpu) == 1 && test_backend_n_buffers(e.cpu) == 1);
    env_close(&e);
}

static uint32_t rng;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng % n;
}

/* A random graph over [8, 4] tensors: elementwise ops, products with the two
 * weights, copies of transposed views, reshapes; some intermediates become
 * outputs too. The same seed builds the same graph. */
static tg_tensor *build_random(tg_ctx *ctx, tg_graph *g, tg_tensor *x, tg_tensor *w1,
                               tg_tensor *w2, uint32_t seed) {
    rng = seed;
    tg_tensor *pool[64];
    int n = 0;
    pool[n++] = x;
    pool[n++] = tg_relu(ctx, x);
    for (int i = 0; i < 40; i++) {
        tg_tensor *a = pool[rnd((uint32_t)n)], *b = pool[rnd((uint32_t)n)], *r = NULL;
        switch (rnd(8)) {
        case 0: r = tg_add(ctx, a, b); break;
        case 1: r = tg_sub(ctx, a, b); break;
        case 2: r = tg_mul(ctx, a, b); break;
        case 3: r = tg_scale(ctx, a, 0.5f); break;
        case 4: r = tg_relu(ctx, a); break;
        case 5: r = tg_mul_mat(ctx, rnd(2) ? w1 : w2, a); break;
        case 6: r = tg_cont(ctx, tg_transpose(ctx, tg_transpose(ctx, a))); break;
        default: r = tg_reshape_2d(ctx, tg_reshape_2d(ctx, a, 32, 1), 8, 4); break;
        }
        if (n < 64) pool[n++] = r;
        if (rnd(8) == 0) CHECK_OK(tg_graph_build(g, r));
    }
    tg_tensor *out = tg_add(ctx, pool[n - 1], pool[n - 2]);
    CHECK_OK(tg_graph_build(g, out));
    return out;
}

/* Random graphs on a fake gpu supporting a random subset of ops next to the
 * fake cpu give exactly the numbers of the same graph on the cpu alone (the
 * fakes compute identically; only placement, copies and memory reuse differ).
 * With a deferred gpu (work runs at synchronize) this also proves the
 * scheduler synchronizes before every read of the gpu's results. */
static void random_rounds(bool deferred) {
    const tg_op ops[7] = {TG_OP_ADD, TG_OP_SUB, TG_OP_MUL, TG_OP_SCALE, TG_OP_RELU,
                          TG_OP_MUL_MAT, TG_OP_CPY};
    float wv[64], w2v[64], xv[32];
    for (int i = 0; i < 64; i++) {
        wv[i] = (float)((i * 13) % 9) / 8.0f - 0.5f;
        w2v[i] = (float)((i * 7) % 5) / 4.0f - 0.4f;
    }
    for (int i = 0; i < 32; i++) xv[i] = (float)((i * 3) % 11) / 5.0f - 1.0f;
    int total_splits = 0, total_copies = 0;
    for (uint32_t round = 1; round <= 40; round++) {
        rng = round * 2654435761u;
        uint64_t mask = 0;
        for (int k = 0; k < 7; k++)
            if (rnd(2)) mask |= TEST_OP(ops[k]);
        env e;
        env_open_kind(&e, mask, deferred);
        tg_backend *solo = test_backend_new("solo", true, true, TEST_OPS_ALL);
        tg_sched *ss = NULL;
        CHECK_OK(tg_sched_new(&solo, 1, &ss));

        tg_ctx *wa = tg_ctx_new(), *wb = tg_ctx_new();
        tg_tensor *w1a = tg_new_2d(wa, TG_F32, 8, 8), *w2a = tg_new_2d(wa, TG_F32, 8, 8);
        tg_tensor *w1b = tg_new_2d(wb, TG_F32, 8, 8), *w2b = tg_new_2d(wb, TG_F32, 8, 8);
        tg_buffer *ba = NULL, *bb = NULL;
        /* weights on the gpu in even rounds, on the cpu in odd ones */
        CHECK_OK(tg_ctx_alloc_tensors(wa, round % 2 ? e.cpu : e.gpu, &ba));
        CHECK_OK(tg_ctx_alloc_tensors(wb, solo, &bb));
        set_f32(w1a, wv);
        set_f32(w2a, w2v);
        set_f32(w1b, wv);
        set_f32(w2b, w2v);

        tg_ctx *ca = tg_ctx_new(), *cb = tg_ctx_new();
        tg_graph *ga = tg_graph_new(ca), *gb = tg_graph_new(cb);
        tg_tensor *xa = tg_new_2d(ca, TG_F32, 8, 4), *xb = tg_new_2d(cb, TG_F32, 8, 4);
        uint32_t seed = round * 7919u;
        build_random(ca, ga, xa, w1a, w2a, seed);
        build_random(cb, gb, xb, w1b, w2b, seed);
        CHECK(tg_graph_n_nodes(ga) == tg_graph_n_nodes(gb));
        CHECK_OK(tg_sched_alloc(e.sched, ga));
        CHECK_OK(tg_sched_alloc(ss, gb));
        total_splits += tg_sched_n_splits(e.sched);
        total_copies += tg_sched_n_copies(e.sched);
        set_f32(xa, xv);
        set_f32(xb, xv);
        for (int rep = 0; rep < 2; rep++) {
            CHECK_OK(tg_sched_compute(e.sched, ga));
            CHECK_OK(tg_sched_compute(ss, gb));
            int mismatches = 0;
            for (int i = 0; i < tg_graph_n_nodes(ga); i++) {
                tg_tensor *na = tg_graph_node(ga, i), *nb = tg_graph_node(gb, i);
                if (!(na->flags & TG_FLAG_OUTPUT)) continue;
                float va[32], vb[32];
                CHECK_OK(tg_tensor_get(na, va, 0, sizeof va));
                CHECK_OK(tg_tensor_get(nb, vb, 0, sizeof vb));
                mismatches += memcmp(va, vb, sizeof va) != 0;
            }
            CHECK_MSG(mismatches == 0, "round %u: %d outputs differ", round, mismatches);
        }
        tg_ctx_free(ca);
        tg_ctx_free(cb);
        tg_buffer_free(ba);
        tg_buffer_free(bb);
        tg_ctx_free(wa);
        tg_ctx_free(wb);
        tg_sched_free(ss);
        tg_backend_free(solo);
        env_close(&e);
    }
    /* the rounds did exercise mixed placement */
    CHECK_MSG(total_splits > 80 && total_copies > 40, "%d splits, %d copies", total_splits,
              total_copies);
}

static void test_random_graphs_match_single_backend(void) { random_rounds(false); }
static void test_random_graphs_with_deferred_gpu(void) { random_rounds(true); }

/* The real CPU backend with the fake gpu beside it. */
static void test_with_real_cpu_backend(void) {
    tg_backend *cpu = NULL;
    CHECK_OK(tg_backend_cpu_new(2, &cpu));
    if (!cpu) return;
    tg_backend *gpu = test_backend_new("gpu", false, false, GPU_OPS);
    tg_sched *s = NULL;
    CHECK_OK(tg_sched_new((tg_backend *[]){gpu, cpu}, 2, &s));
    tg_ctx *wctx = tg_ctx_new();
    tg_tensor *w = tg_new_2d(wctx, TG_F32, 8, 6);
    tg_buffer *wbuf = NULL, *lbuf = NULL;
    tg_ctx *lctx = tg_ctx_new();
    tg_tensor *ln_w = tg_new_1d(lctx, TG_F32, 6);
    tg_tensor *ln_b = tg_new_1d(lctx, TG_F32, 6);
    CHECK_OK(tg_ctx_alloc_tensors(wctx, gpu, &wbuf));
    CHECK_OK(tg_ctx_alloc_tensors(lctx, cpu, &lbuf));
    float wv[48], lw[6], lb[6], xv[32];
    for (int i = 0; i < 48; i++) wv[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < 6; i++) {
        lw[i] = 1.0f + 0.1f * (float)i;
        lb[i] = 0.05f * (float)i;
    }
    for (int i = 0; i < 32; i++) xv[i] = (float)((i * 5) % 7) - 3.0f;
    set_f32(w, wv);
    set_f32(ln_w, lw);
    set_f32(ln_b, lb);

    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 8, 4);
    tg_tensor *h = tg_mul_mat(ctx, w, x);                          /* gpu */
    tg_tensor *n = tg_layer_norm(ctx, h, ln_w, ln_b, 1e-5f);       /* cpu (weights there) */
    tg_tensor *y = tg_silu(ctx, n);                                /* cpu */
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, y));
    CHECK_OK(tg_sched_alloc(s, g));
    CHECK(tg_sched_node_backend(s, h) == gpu && tg_sched_node_backend(s, n) == cpu);
    CHECK(tg_sched_node_backend(s, y) == cpu);
    CHECK(tg_sched_n_splits(s) == 2 && tg_sched_n_copies(s) == 1);
    set_f32(x, xv);
    CHECK_OK(tg_sched_compute(s, g));
    float hv[24], got[24];
    ref_mul_mat(wv, xv, hv, 8, 6, 4);
    CHECK_OK(tg_tensor_get(y, got, 0, sizeof got));
    for (int m = 0; m < 4; m++) {
        double mean = 0, var = 0;
        for (int i = 0; i < 6; i++) mean += hv[m * 6 + i];
        mean /= 6;
        for (int i = 0; i < 6; i++) var += (hv[m * 6 + i] - mean) * (hv[m * 6 + i] - mean);
        var /= 6;
        for (int i = 0; i < 6; i++) {
            double v = (hv[m * 6 + i] - mean) / sqrt(var + 1e-5) * lw[i] + lb[i];
            double want = v / (1 + exp(-v));
            /* f32 layer norm and silu against double: a few ulp of values ~1 */
            CHECK_NEAR(got[m * 6 + i], want, 1e-4);
        }
    }
    tg_ctx_free(ctx);
    tg_sched_free(s);
    tg_buffer_free(wbuf);
    tg_buffer_free(lbuf);
    tg_ctx_free(wctx);
    tg_ctx_free(lctx);
    tg_backend_free(gpu);
    tg_backend_free(cpu);
}

/* Builds h = w x (f32 precision), n = layer_norm(h) with weights of lctx,
 * y = w2 silu(n), out = y + y. */
static tg_tensor *build_mixed(tg_ctx *ctx, tg_tensor *x, tg_tensor *w, tg_tensor *w2,
                              tg_tensor *lw, tg_tensor *lb) {
    tg_tensor *h = tg_set_prec(tg_mul_mat(ctx, w, x), TG_PREC_F32);
    tg_tensor *n = tg_layer_norm(ctx, h, lw, lb, 1e-5f);
    tg_tensor *y = tg_set_prec(tg_mul_mat(ctx, w2, tg_silu(ctx, n)), TG_PREC_F32);
    return tg_add(ctx, y, y);
}

/* With a real GPU (skipped where tg_backend_cuda_new refuses): matrix
 * products on the GPU where their weights are, layer norm on the CPU where
 * its weights are, against the same graph on the CPU alone. */
static void test_with_cuda_if_present(void) {
    tg_backend *cuda = NULL, *cpu = NULL;
    tg_status st = tg_backend_cuda_new(0, &cuda);
    if (st) {
        printf("     (skipped: %s)\n", tg_status_message(st));
        tg_status_free(st);
        return;
    }
    CHECK_OK(tg_backend_cpu_new(2, &cpu));
    tg_sched *mixed = NULL, *alone = NULL;
    CHECK_OK(tg_sched_new((tg_backend *[]){cuda, cpu}, 2, &mixed));
    CHECK_OK(tg_sched_new(&cpu, 1, &alone));
    enum { K = 64, N = 48, M = 5 };
    static float wv[K * N], w2v[N * N], xv[K * M], lw[N], lb[N], a[N * M], b[N * M];
    for (int i = 0; i < K * N; i++) wv[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int i = 0; i < N * N; i++) w2v[i] = (float)((i * 29) % 89) / 89.0f - 0.5f;
    for (int i = 0; i < K * M; i++) xv[i] = (float)((i * 17) % 23) / 23.0f - 0.4f;
    for (int i = 0; i < N; i++) {
        lw[i] = 1.0f + 0.01f * (float)i;
        lb[i] = 0.02f * (float)(i % 5);
    }
    tg_ctx *gw = tg_ctx_new(), *cw = tg_ctx_new(), *lctx = tg_ctx_new();
    tg_tensor *w_g = tg_new_2d(gw, TG_F32, K, N), *w2_g = tg_new_2d(gw, TG_F32, N, N);
    tg_tensor *w_c = tg_new_2d(cw, TG_F32, K, N), *w2_c = tg_new_2d(cw, TG_F32, N, N);
    tg_tensor *lw_t = tg_new_1d(lctx, TG_F32, N), *lb_t = tg_new_1d(lctx, TG_F32, N);
    tg_buffer *bg = NULL, *bc = NULL, *bl = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(gw, cuda, &bg));
    CHECK_OK(tg_ctx_alloc_tensors(cw, cpu, &bc));
    CHECK_OK(tg_ctx_alloc_tensors(lctx, cpu, &bl));
    set_f32(w_g, wv);
    set_f32(w2_g, w2v);
    set_f32(w_c, wv);
    set_f32(w2_c, w2v);
    set_f32(lw_t, lw);
    set_f32(lb_t, lb);

    tg_ctx *ca = tg_ctx_new(), *cb = tg_ctx_new();
    tg_tensor *xa = tg_new_2d(ca, TG_F32, K, M), *xb = tg_new_2d(cb, TG_F32, K, M);
    tg_tensor *oa = build_mixed(ca, xa, w_g, w2_g, lw_t, lb_t);
    tg_tensor *ob = build_mixed(cb, xb, w_c, w2_c, lw_t, lb_t);
    tg_graph *ga = tg_graph_new(ca), *gb = tg_graph_new(cb);
    CHECK_OK(tg_graph_build(ga, oa));
    CHECK_OK(tg_graph_build(gb, ob));
    CHECK_OK(tg_sched_alloc(mixed, ga));
    printf("     cuda+cpu: %d splits, %d copies\n", tg_sched_n_splits(mixed),
           tg_sched_n_copies(mixed));
    CHECK(tg_sched_node_backend(mixed, oa) == cuda);
    CHECK(tg_sched_n_splits(mixed) == 3 && tg_sched_n_copies(mixed) == 2);
    CHECK_OK(tg_sched_alloc(alone, gb));
    for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < K * M; i++) xv[i] = -xv[i] * 1.1f;
        set_f32(xa, xv);
        set_f32(xb, xv);
        CHECK_OK(tg_sched_compute(mixed, ga));
        CHECK_OK(tg_sched_compute(alone, gb));
        CHECK_OK(tg_tensor_get(oa, a, 0, sizeof a));
        CHECK_OK(tg_tensor_get(ob, b, 0, sizeof b));
        double num = 0, den = 0;
        for (int i = 0; i < N * M; i++) {
            num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
            den += (double)b[i] * b[i];
        }
        /* f32-precision products on both sides: NMSE as for matrix products */
        CHECK_MSG(num <= 5e-4 * den && den > 0, "rep %d: nmse %g", rep, den > 0 ? num / den : -1.0);
    }
    tg_ctx_free(ca);
    tg_ctx_free(cb);
    tg_sched_free(mixed);
    tg_sched_free(alone);
    tg_buffer_free(bg);
    tg_buffer_free(bc);
    tg_buffer_free(bl);
    tg_ctx_free(gw);
    tg_ctx_free(cw);
    tg_ctx_free(lctx);
    tg_backend_free(cuda);
    tg_backend_free(cpu);
}

TEST_MAIN(T(test_placement_splits_copies_results), T(test_compute_async_queues_on_one_backend),
          T(test_weight_on_unsupporting_backend_goes_to_cpu),
          T(test_priority_views_and_followers), T(test_inplace_write_runs_where_storage_is),
          T(test_fused_product_inputs_stay_apart),
          T(test_abort_between_splits), T(test_arenas_grow_never_shrink), T(test_refusals),
          T(test_rebuilt_graph_each_step), T(test_copies_do_not_clobber_split_inputs),
          T(test_random_graphs_match_single_backend), T(test_random_graphs_with_deferred_gpu),
          T(test_with_real_cpu_backend), T(test_with_cuda_if_present))
