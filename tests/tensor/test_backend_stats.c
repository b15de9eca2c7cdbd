/*
 * test_backend_stats.c: tg_backend_stats counts the buffers the runtime
 * allocates on a backend (now and at peak, wrapped host memory excluded)
 * and the computes it runs, and tg_backend_reset_stats restarts the peak
 * from what is in use. The benchmarks report peak memory and the host's
 * submit share from these counters, so they must follow allocations and
 * frees exactly.
 */
#include "check.h"
#include "tg.h"

static void test_buffers_are_counted_now_and_at_peak(void) {
    tg_backend *b = NULL;
    CHECK_OK(tg_backend_cpu_new(1, &b));
    tg_backend_stats s0, s;
    tg_backend_get_stats(b, &s0);
    tg_buffer *x = NULL, *y = NULL;
    CHECK_OK(tg_backend_buffer_alloc(b, 1 << 20, &x));
    CHECK_OK(tg_backend_buffer_alloc(b, 3 << 20, &y));
    tg_backend_get_stats(b, &s);
    CHECK(s.mem_in_use >= s0.mem_in_use + (4u << 20));
    CHECK(s.mem_peak >= s.mem_in_use);
    size_t peak = s.mem_peak;
    tg_buffer_free(y);
    tg_backend_get_stats(b, &s);
    CHECK(s.mem_in_use + (3u << 20) <= peak);
    CHECK(s.mem_peak == peak);
    tg_backend_reset_stats(b);
    tg_backend_get_stats(b, &s);
    CHECK(s.mem_peak == s.mem_in_use);
    CHECK(s.n_computes == 0 && s.compute_us == 0 && s.submit_us == 0);
    /* wrapped host memory is the caller's: not counted */
    static float host[1024];
    tg_buffer *h = NULL;
    size_t before = s.mem_in_use;
    CHECK_OK(tg_backend_buffer_from_host(b, host, sizeof host, &h));
    tg_backend_get_stats(b, &s);
    CHECK(s.mem_in_use == before);
    tg_buffer_free(h);
    tg_backend_get_stats(b, &s);
    CHECK(s.mem_in_use == before);
    tg_buffer_free(x);
    tg_backend_get_stats(b, &s);
    CHECK(s.mem_in_use == s0.mem_in_use);
    tg_backend_free(b);
}

static void test_computes_are_counted(void) {
    tg_backend *b = NULL;
    CHECK_OK(tg_backend_cpu_new(1, &b));
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_1d(ctx, TG_F32, 4096);
    tg_tensor *y = tg_silu(ctx, tg_add(ctx, a, a));
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, y));
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, b, &buf));
    float v[4096];
    for (int i = 0; i < 4096; i++) v[i] = (float)i / 4096.0f;
    CHECK_OK(tg_tensor_set(a, v, 0, sizeof v));
    tg_backend_reset_stats(b);
    CHECK_OK(tg_backend_graph_compute(b, g));
    CHECK_OK(tg_backend_graph_compute(b, g));
    tg_backend_stats s;
    tg_backend_get_stats(b, &s);
    CHECK(s.n_computes == 2);
    CHECK(s.compute_us > 0);
    CHECK(s.submit_us <= s.compute_us);
    tg_backend_get_stats(NULL, &s);
    CHECK(s.n_computes == 0 && s.mem_peak == 0);
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    tg_backend_free(b);
}

TEST_MAIN(T(test_buffers_are_counted_now_and_at_peak), T(test_computes_are_counted))
