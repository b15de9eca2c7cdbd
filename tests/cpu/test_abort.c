/*
 * test_abort.c: the abort callback stops a compute between nodes with
 * TG_ERR_ABORTED and leaves the backend usable; bad inputs come back as
 * errors naming the op, never as a crash.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_test.h"

/* Under AddressSanitizer a huge allocation aborts unless the allocator may
 * return NULL; the test below needs the NULL (the library's own answer). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1";
}

typedef struct abort_state {
    int calls;
    int stop_after; /* return true on this call (1-based) and later */
} abort_state;

static bool abort_cb(void *user) {
    abort_state *s = user;
    return ++s->calls >= s->stop_after;
}

/* x -> x + 1, 40 times: a chain of nodes whose progress is visible. */
static tg_tensor *chain(tg_ctx *ctx, tg_tensor *x, tg_tensor *one, int n) {
    for (int i = 0; i < n; i++) x = tg_add(ctx, x, one);
    return x;
}

static void test_abort_stops_and_backend_stays_usable(void) {
    for (int nt = 1; nt <= 3; nt++) {
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *x = tg_new_1d(ctx, TG_F32, 1000), *one = tg_new_1d(ctx, TG_F32, 1);
        tg_tensor *y = chain(ctx, x, one, 40);
        tg_graph *g = tg_graph_new(ctx);
        CHECK_OK(tg_graph_build(g, y));
        tg_backend *be = NULL;
        CHECK_OK(tg_backend_cpu_new(nt, &be));
        tg_buffer *buf = NULL;
        CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf));
        for (int i = 0; i < 1000; i++) ((float *)x->data)[i] = (float)i;
        ((float *)one->data)[0] = 1.0f;
        memset(y->data, 0, tg_nbytes(y));

        /* Stops before the 6th node: five adds ran, the last did not. */
        abort_state st = {0, 6};
        tg_backend_set_abort(be, abort_cb, &st);
        CHECK_ERR(tg_backend_graph_compute(be, g), TG_ERR_ABORTED, "aborted");
        CHECK(st.calls == 6);
        CHECK(((float *)y->data)[7] == 0.0f);

        /* Asked to stop at once: nothing runs. */
        abort_state now = {0, 1};
        tg_backend_set_abort(be, abort_cb, &now);
        CHECK_ERR(tg_backend_graph_compute(be, g), TG_ERR_ABORTED, "before node 0");
        CHECK(now.calls == 1);

        /* A callback that never stops sees every node; results complete. */
        abort_state never = {0, 1 << 30};
        tg_backend_set_abort(be, abort_cb, &never);
        CHECK_OK(tg_backend_graph_compute(be, g));
        CHECK(never.calls == 40);
        CHECK(((float *)y->data)[7] == 47.0f);

        /* Callback removed: still fine. */
        tg_backend_set_abort(be, NULL, NULL);
        memset(y->data, 0, tg_nbytes(y));
        CHECK_OK(tg_backend_graph_compute(be, g));
        CHECK(((float *)y->data)[999] == 1039.0f);

        tg_buffer_free(buf);
        tg_backend_free(be);
        tg_ctx_free(ctx);
    }
}

static void test_bad_row_id_is_an_error(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *tab = tg_new_2d(ctx, TG_F32, 8, 4);
    tg_tensor *ids = tg_new_1d(ctx, TG_I32, 3);
    tg_tensor *r = tg_get_rows(ctx, tab, ids);
    tg_tensor *dst = tg_new_2d(ctx, TG_F16, 8, 4);
    tg_tensor *w = tg_set_rows(ctx, dst, r, ids);
    tg_graph *g = tg_graph_new(ctx), *g2 = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, r));
    CHECK_OK(tg_graph_build(g2, w));
    tg_backend *be = cpu_test_backend("scalar", 2);
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf));
    int32_t good[3] = {0, 3, 1}, bad[3] = {0, 4, 1}, neg[3] = {-1, 0, 0};
    memcpy(ids->data, good, sizeof good);
    CHECK_OK(tg_backend_graph_compute(be, g));
    memcpy(ids->data, bad, sizeof bad);
    CHECK_ERR(tg_backend_graph_compute(be, g), TG_ERR_INVALID_ARG, "get_rows: id 4 out of range");
    memcpy(ids->data, neg, sizeof neg);
    CHECK_ERR(tg_backend_graph_compute(be, g2), TG_ERR_INVALID_ARG, "id -1 out of range");
    memcpy(ids->data, good, sizeof good);
    CHECK_OK(tg_backend_graph_compute(be, g2));
    /* None of these tensors has a name (the model's get_rows nodes have
     * none): the message names them by id, never as ''. */
    char node[32], table[48];
    snprintf(node, sizeof node, "node #%d (get_rows)", (int)r->id);
    snprintf(table, sizeof table, "out of range [0, 4) of #%d", (int)tab->id);
    memcpy(ids->data, bad, sizeof bad);
    tg_status st = tg_backend_graph_compute(be, g);
    CHECK(st && strstr(tg_status_message(st), "''") == NULL);
    CHECK_MSG(st && strstr(tg_status_message(st), node), "%s", tg_status_message(st));
    CHECK_MSG(st && strstr(tg_status_message(st), table), "%s", tg_status_message(st));
    tg_status_free(st);
    tg_buffer_free(buf);
    tg_backend_free(be);
    tg_ctx_free(ctx);
}

/* A node with a type combination outside the matrix (here an f16 add, which
 * the constructor would refuse, so the node is edited) is refused by
 * supports_op and by compute, with the op named. */
static void test_unsupported_types_refused(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_1d(ctx, TG_F32, 16);
    tg_tensor *s = tg_add(ctx, a, a);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, s));
    tg_backend *be = NULL;
    CHECK_OK(tg_backend_cpu_new(1, &be));
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf));
    CHECK(tg_backend_supports_op(be, s));
    s->type = TG_F16;
    CHECK(!tg_backend_supports_op(be, s));
    CHECK_ERR(tg_backend_graph_compute(be, g), TG_ERR_UNSUPPORTED, "add");
    s->type = TG_F32;
    CHECK_OK(tg_backend_graph_compute(be, g));
    tg_buffer_free(buf);
    tg_backend_free(be);
    tg_ctx_free(ctx);
}

/* Stride and padding of 2^30 are legal (the constructors compute in int64)
 * and give a small output: positions -2^30, 0 and 2^30 of the input, of
 * which only the middle one touches data. The backend's own shape check
 * must agree (2 * p in int overflowed and refused the node). */
static void test_huge_stride_and_padding_convolutions(void) {
    const int big = 1 << 30;
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *k1 = tg_new_2d(ctx, TG_F32, 3, 4), *x1 = tg_new_2d(ctx, TG_F32, 4, 5);
    tg_tensor *y1 = tg_conv_1d_dw(ctx, k1, x1, big, big);
    tg_tensor *k2 = tg_new_4d(ctx, TG_F32, 2, 1, 1, 1), *x2 = tg_new_4d(ctx, TG_F32, 3, 1, 1, 1);
    tg_tensor *y2 = tg_conv_2d(ctx, k2, x2, big, 1, big, 0);
    CHECK_OK(tg_ctx_check(ctx));
    CHECK(y1 && y1->ne[1] == 3 && y2 && y2->ne[0] == 3);
    tg_graph *g1 = tg_graph_new(ctx), *g2 = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g1, y1));
    CHECK_OK(tg_graph_build(g2, y2));
    tg_backend *be = NULL;
    CHECK_OK(tg_backend_cpu_new(1, &be));
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf));
    cpu_test_fill(ctx, 5, -1.0f, 1.0f);
    CHECK_OK(tg_backend_graph_compute(be, g1));
    CHECK_OK(tg_backend_graph_compute(be, g2));
    const float *k1v = k1->data, *x1v = x1->data, *y1v = y1->data;
    for (int c = 0; c < 4; c++) {
        float want = 0.0f;
        for (int j = 0; j < 3; j++) want += k1v[c * 3 + j] * x1v[j * 4 + c];
        CHECK(y1v[c] == 0.0f && y1v[8 + c] == 0.0f);
        CHECK_MSG(fabsf(y1v[4 + c] - want) <= 1e-6f, "channel %d: %g, want %g", c, y1v[4 + c], want);
    }
    const float *k2v = k2->data, *x2v = x2->data, *y2v = y2->data;
    CHECK(y2v[0] == 0.0f && y2v[2] == 0.0f);
    CHECK(fabsf(y2v[1] - (k2v[0] * x2v[0] + k2v[1] * x2v[1])) <= 1e-6f);
    tg_buffer_free(buf);
    tg_backend_free(be);
    tg_ctx_free(ctx);
}

static void test_buffers(void) {
    tg_backend *be = NULL;
    CHECK_OK(tg_backend_cpu_new(1, &be));
    tg_buffer *buf = NULL;
    CHECK_OK(tg_backend_buffer_alloc(be, 1000, &buf));
    CHECK(tg_buffer_size(buf) >= 1000);
    CHECK(((uintptr_t)buf->base & 63) == 0);
    CHECK_OK(tg_buffer_clear(buf, 7));
    CHECK(((uint8_t *)buf->base)[999] == 7);
    tg_buffer_free(buf);
    static float host[64];
    CHECK_OK(tg_backend_buffer_from_host(be, host, sizeof host, &buf));
    CHECK(buf->base == (void *)host && buf->external);
    tg_buffer_free(buf); /* the wrapper only; host stays ours */
    host[0] = 1.0f;
    CHECK(tg_backend_is_cpu(be));
    CHECK(strstr(tg_backend_name(be), "CPU") != NULL);
    tg_backend_free(be);
    /* An absurd size is an error, not a crash. */
    CHECK_OK(tg_backend_cpu_new(1, &be));
    buf = NULL;
    CHECK_ERR(tg_backend_buffer_alloc(be, (size_t)1 << 62, &buf), TG_ERR_NO_MEMORY, "buffer");
    CHECK(buf == NULL);
    tg_backend_free(be);
}

TEST_MAIN(T(test_abort_stops_and_backend_stays_usable), T(test_bad_row_id_is_an_error),
          T(test_unsupported_types_refused), T(test_huge_stride_and_padding_convolutions),
          T(test_buffers))
