/*
 * test_oom.c: allocation failures anywhere in building, planning, scheduling
 * and computing a two-backend graph come back as TG_ERR_NO_MEMORY, never as a
 * crash or a leak (run it under TG_SANITIZE to see leaks), and the same run
 * succeeds with the right numbers once memory is there.
 */
#include "base.h"
#include "check.h"
#include "test_backend.h"

#define GPU_OPS (TEST_OP(TG_OP_ADD) | TEST_OP(TG_OP_MUL_MAT) | TEST_OP(TG_OP_SCALE))

static int n_bad_codes;

/* Checks a failure's code and frees it; true when st was a failure. */
static bool failed(tg_status st) {
    if (!st) return false;
    if (tg_status_code(st) != TG_ERR_NO_MEMORY) {
        fprintf(stderr, "unexpected error: %s\n", tg_status_message(st));
        n_bad_codes++;
    }
    tg_status_free(st);
    return true;
}

/* One full run; true when it got to the end. */
static bool run_once(tg_backend *gpu, tg_backend *cpu, float *out) {
    bool ok = false;
    tg_ctx *wctx = NULL, *ctx = NULL;
    tg_buffer *wbuf = NULL;
    tg_sched *s = NULL;
    if (!(wctx = tg_ctx_new()) || !(ctx = tg_ctx_new())) goto done;
    tg_tensor *w = tg_new_2d(wctx, TG_F32, 4, 4);
    if (failed(tg_ctx_check(wctx)) || !w) goto done;
    if (failed(tg_ctx_alloc_tensors(wctx, gpu, &wbuf))) goto done;
    const float wv[16] = {1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4};
    if (failed(tg_tensor_set(w, wv, 0, sizeof wv))) goto done;
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 4, 2);
    tg_tensor *y = tg_relu(ctx, tg_mul_mat(ctx, w, x));
    for (int i = 0; i < 20; i++) y = tg_add(ctx, tg_scale(ctx, y, 0.5f), y);
    y = tg_relu(ctx, y);
    tg_graph *g = tg_graph_new(ctx);
    if (!g || failed(tg_ctx_check(ctx))) goto done;
    if (failed(tg_graph_build(g, y))) goto done;
    if (failed(tg_sched_new((tg_backend *[]){gpu, cpu}, 2, &s))) goto done;
    if (failed(tg_sched_alloc(s, g))) goto done;
    const float xv[8] = {1, -1, 1, -1, -1, 1, -1, 1};
    if (failed(tg_tensor_set(x, xv, 0, sizeof xv))) goto done;
    if (failed(tg_sched_compute(s, g))) goto done;
    if (failed(tg_tensor_get(y, out, 0, 8 * sizeof(float)))) goto done;
    ok = true;
done:
    tg_sched_free(s);
    tg_buffer_free(wbuf);
    tg_ctx_free(ctx);
    tg_ctx_free(wctx);
    return ok;
}

static void test_every_allocation_failure(void) {
    tg_backend *gpu = test_backend_new("gpu", false, false, GPU_OPS);
    tg_backend *cpu = test_backend_new("cpu", true, true, TEST_OPS_ALL);
    float out[8];
    long n = 0;
    bool done = false;
    for (; n < 5000 && !done; n++) {
        tg_alloc_fail_after(n);
        done = run_once(gpu, cpu, out);
        tg_alloc_fail_after(-1);
    }
    CHECK_MSG(done, "never succeeded after %ld allocations", n);
    CHECK_MSG(n > 20, "only %ld allocation points exercised", n);
    CHECK(n_bad_codes == 0);
    /* relu(diag(1,2,3,4) x) then 20 times y*1.5 */
    double f = pow(1.5, 20);
    const float want[8] = {1, 0, 3, 0, 0, 2, 0, 4};
    for (int i = 0; i < 8; i++) CHECK_NEAR(out[i], want[i] * f, 1e-3 * f);
    CHECK(test_backend_n_buffers(gpu) == 0 && test_backend_n_buffers(cpu) == 0);
    tg_backend_free(gpu);
    tg_backend_free(cpu);
}

TEST_MAIN(T(test_every_allocation_failure))
