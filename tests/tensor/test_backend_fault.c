/*
 * test_backend_fault.c: the backend fault hook (tg_backend_fail_after) and
 * tg_backend_failed, on the CPU backend. An injected compute fault fails
 * that compute with TG_ERR_DEVICE and leaves the backend failed, as a device
 * fault leaves a GPU context: later computes fail at once with the same
 * text, while a backend made afterwards computes. An injected allocation
 * fault is TG_ERR_NO_MEMORY and fails nothing for good. The hook counts
 * operations as documented (n pass, then `times` fail, then off).
 */
#include <string.h>

#include "check.h"
#include "tg.h"

/* y = a + a over 64 floats on backend b; the caller frees ctx and buf. */
static tg_graph *small_graph(tg_backend *b, tg_ctx **out_ctx, tg_buffer **out_buf) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_1d(ctx, TG_F32, 64);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, tg_add(ctx, a, a)));
    CHECK_OK(tg_ctx_alloc_tensors(ctx, b, out_buf));
    float v[64] = {1};
    CHECK_OK(tg_tensor_set(a, v, 0, sizeof v));
    *out_ctx = ctx;
    return g;
}

static void test_compute_fault_is_sticky_until_the_backend_is_made_again(void) {
    tg_backend *b = NULL;
    CHECK_OK(tg_backend_cpu_new(1, &b));
    tg_ctx *ctx;
    tg_buffer *buf = NULL;
    tg_graph *g = small_graph(b, &ctx, &buf);
    CHECK(tg_backend_failed(b) == NULL);
    tg_backend_fail_after(TG_BACKEND_FAULT_COMPUTE, 1, 1);
    CHECK_OK(tg_backend_graph_compute(b, g)); /* the one let pass */
    CHECK_ERR(tg_backend_graph_compute(b, g), TG_ERR_DEVICE, "injected by tg_backend_fail_after");
    const char *f = tg_backend_failed(b);
    CHECK(f && strstr(f, "device fault"));
    /* the hook is off again, but the backend stays failed */
    CHECK_ERR(tg_backend_graph_compute(b, g), TG_ERR_DEVICE, "the backend failed earlier");
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    tg_backend_free(b);

    CHECK_OK(tg_backend_cpu_new(1, &b));
    g = small_graph(b, &ctx, &buf);
    CHECK(tg_backend_failed(b) == NULL);
    CHECK_OK(tg_backend_graph_compute(b, g));
    float y[64];
    CHECK_OK(tg_tensor_get(tg_graph_node(g, tg_graph_n_nodes(g) - 1), y, 0, sizeof y));
    CHECK(y[0] == 2.0f && y[1] == 0.0f);
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    tg_backend_free(b);
    CHECK(tg_backend_failed(NULL) == NULL);
}

static void test_alloc_fault_is_out_of_memory_and_passes(void) {
    tg_backend *b = NULL;
    CHECK_OK(tg_backend_cpu_new(1, &b));
    tg_buffer *x = NULL;
    tg_backend_fail_after(TG_BACKEND_FAULT_ALLOC, 1, 2);
    CHECK_OK(tg_backend_buffer_alloc(b, 4096, &x));
    tg_buffer_free(x);
    for (int i = 0; i < 2; i++) {
        CHECK_ERR(tg_backend_buffer_alloc(b, 4096, &x), TG_ERR_NO_MEMORY, "out of device memory");
        CHECK(x == NULL);
    }
    CHECK_OK(tg_backend_buffer_alloc(b, 4096, &x)); /* two failed: off */
    tg_buffer_free(x);
    CHECK(tg_backend_failed(b) == NULL);
    /* times < 0: every one until turned off */
    tg_backend_fail_after(TG_BACKEND_FAULT_ALLOC, 0, -1);
    for (int i = 0; i < 5; i++)
        CHECK_ERR(tg_backend_buffer_alloc(b, 64, &x), TG_ERR_NO_MEMORY, "allocating a buffer");
    tg_backend_fail_after(TG_BACKEND_FAULT_ALLOC, -1, 0);
    CHECK_OK(tg_backend_buffer_alloc(b, 64, &x));
    tg_buffer_free(x);
    tg_backend_free(b);
}

TEST_MAIN(T(test_compute_fault_is_sticky_until_the_backend_is_made_again),
          T(test_alloc_fault_is_out_of_memory_and_passes))
