/*
 * test_backend.c: the CUDA backend's own behaviour on a GPU: properties,
 * buffers (device, host-mapped, out of memory), events with a timeout, the
 * sticky error and recovery, abort, CUDA-graph capture and replay (results
 * still right when the data or the addresses change), concurrent runs and
 * fusion under the scheduler against the CPU backend, the kernel cache
 * across starts (cold, warm, damaged entry, two processes at once), the
 * graph dump, and copies between two GPUs where there are two.
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU (CI, the development machine); on such a machine the test
 * still checks that tg_backend_cuda_new fails with TG_ERR_UNSUPPORTED and a
 * message that says why.
 *
 * Not here: the kernels and fusions on model-shaped graphs
 * (test_kernels.c), per-op conformance (tests/ops runs every op on every
 * backend).
 */
#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "cuda_internal.h"
#include "cuda_kernels.h"

extern char **environ;

/* -------------------------------------------------------------- builders */

/* Many independent branches (concurrent runs inside the capture): each
 * node 1 MiB, the size from which runs are spread over streams (smaller
 * ones run in turn, cuda_context.c). */
static tg_tensor *build_branches(tg_ctx *ctx) {
    tg_tensor *x = in2(ctx, TG_F32, 512, 512);
    tg_tensor *acc = NULL;
    for (int i = 0; i < 24; i++) {
        tg_tensor *y = tg_scale(ctx, tg_silu(ctx, tg_mul(ctx, x, x)), 0.5f + (float)i);
        y = tg_soft_max(ctx, y, NULL, 0.25f);
        acc = acc ? tg_add(ctx, acc, y) : y;
    }
    return acc;
}

/* A chain of 200 small nodes: the decoder-step shape of graph. */
static tg_tensor *build_chain(tg_ctx *ctx) {
    tg_tensor *x = in2(ctx, TG_F32, 64, 4), *y = x;
    for (int i = 0; i < 100; i++) y = tg_mul(ctx, tg_add(ctx, y, x), tg_scale(ctx, x, 0.01f));
    return y;
}

/* ------------------------------------------------------------------ tests */

static void test_device_properties_or_clear_absence(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    const tg_cuda_props *p = tg_cuda_backend_props(b);
    CHECK(p && p->name[0] && p->cc_major >= 7 && p->sm_count > 0 && p->total_mem > 0);
    CHECK(strncmp(tg_backend_name(b), "cuda", 4) == 0 && !tg_backend_is_cpu(b));
    printf("  %s: cc %d.%d, %d SMs, bf16 %d, tensor cores %d\n", p->name, p->cc_major, p->cc_minor, p->sm_count,
           p->bf16, p->tc_level);
    tg_backend_free(b);
}

static void test_buffers_set_get_memset_and_host_memory(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *t = tg_new_1d(ctx, TG_I32, 3 << 20); /* larger than the staging buffer */
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, b, &buf));
    int32_t *h = tg_malloc((size_t)(3 << 20) * 4), *r = tg_malloc((size_t)(3 << 20) * 4);
    for (int i = 0; i < (3 << 20); i++) h[i] = i * 7 - 5;
    CHECK_OK(tg_tensor_set(t, h, 0, (size_t)(3 << 20) * 4));
    CHECK_OK(tg_tensor_get(t, r, 0, (size_t)(3 << 20) * 4));
    CHECK(memcmp(h, r, (size_t)(3 << 20) * 4) == 0);
    CHECK_OK(tg_tensor_get(t, r, 4 * 1000, 8));
    CHECK(r[0] == h[1000] && r[1] == h[1001]);
    /* A large copy takes the driver's direct path: round trip of 40 MB. */
    {
        tg_ctx *big_ctx = tg_ctx_new();
        tg_tensor *big = tg_new_1d(big_ctx, TG_I32, 10 << 20);
        tg_buffer *bb = NULL;
        CHECK_OK(tg_ctx_alloc_tensors(big_ctx, b, &bb));
        int32_t *hb = tg_malloc((size_t)(10 << 20) * 4), *rb = tg_malloc((size_t)(10 << 20) * 4);
        for (int i = 0; i < (10 << 20); i++) hb[i] = i ^ 0x5a5a;
        CHECK_OK(tg_tensor_set(big, hb, 0, (size_t)(10 << 20) * 4));
        CHECK_OK(tg_tensor_get(big, rb, 0, (size_t)(10 << 20) * 4));
        CHECK(memcmp(hb, rb, (size_t)(10 << 20) * 4) == 0);
        tg_free(hb);
        tg_free(rb);
        tg_buffer_free(bb);
        tg_ctx_free(big_ctx);
    }
    CHECK_OK(tg_buffer_clear(buf, 0xff));
    CHECK_OK(tg_tensor_get(t, r, 0, 16));
    CHECK(r[0] == -1 && r[3] == -1);
    tg_buffer_free(buf);

    /* Caller memory at an unaligned address, registered (or copied). */
    size_t n = 10000;
    uint8_t *host = tg_malloc(n + 64);
    for (size_t i = 0; i < n + 64; i++) host[i] = (uint8_t)(i * 13);
    tg_buffer *hb = NULL;
    CHECK_OK(tg_backend_buffer_from_host(b, host + 3, n, &hb));
    tg_tensor *u = tg_new_1d(ctx, TG_I32, 100);
    if (hb) {
        CHECK_OK(tg_tensor_place(u, hb, 400));
        CHECK_OK(tg_tensor_get(u, r, 0, 400));
        CHECK(memcmp(r, host + 3 + 400, 400) == 0);
        tg_buffer_free(hb);
    }
    tg_free(host);
    tg_free(h);
    tg_free(r);
    tg_ctx_free(ctx);
    tg_backend_free(b);
}

static void test_out_of_memory_is_an_error_and_the_backend_lives_on(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_buffer *buf = NULL;
    CHECK_ERR(tg_backend_buffer_alloc(b, (size_t)1 << 50, &buf), TG_ERR_NO_MEMORY, "cuda0");
    CHECK(buf == NULL);
    compare_with_cpu(b, build_argmax, 1, 0.0, "argmax after out-of-memory");
    tg_backend_free(b);
}

static void test_event_synchronize_times_out(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    CUfunction spin;
    CHECK_OK(tg_cuda_kernel(c->dev, "probe.cu", "", "spin", &spin));
    tg_cuda_event *e = NULL;
    CHECK_OK(tg_cuda_event_new(c->dev, false, &e));
    tg_args_spin a = {.cycles = 2000000000ll}; /* about a second at 2 GHz */
    void *params[] = {&a};
    CHECK(c->dev->cu->cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, c->stream, params, NULL) == CUDA_SUCCESS);
    CHECK_OK(tg_cuda_event_record(e, c->stream));
    CHECK_ERR(tg_cuda_event_synchronize(e, 20), TG_ERR_TIMEOUT, "20 ms");
    CHECK_OK(tg_cuda_event_synchronize(e, 30000));
    size_t fr = 0, tot = 0;
    CHECK_OK(tg_cuda_mem_info(c->dev, &fr, &tot));
    CHECK(fr > 0 && tot >= fr);
    tg_cuda_event_free(e);
    tg_backend_free(b);
}

static void test_sticky_error_then_recreate_recovers(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    compare_with_cpu(b, build_argmax, 1, 0.0, "argmax before the fault");
    run r;
    CHECK_OK(run_make(b, build_argmax, &r));
    CHECK_OK(fill_leaves(&r, 1));
    tg_cuda_test_fault_next(b, 1);
    CHECK_ERR(tg_backend_graph_compute(b, r.g), TG_ERR_DEVICE, "recreate");
    CHECK_ERR(tg_backend_graph_compute(b, r.g), TG_ERR_DEVICE, "failed earlier");
    CHECK_ERR(tg_backend_synchronize(b), TG_ERR_DEVICE, "failed earlier");
    float x = 0;
    CHECK_ERR(tg_tensor_get(r.out, &x, 0, 4), TG_ERR_DEVICE, "failed earlier");
    run_free(&r);
    tg_backend_free(b);
    b = cuda_or_skip();
    CHECK(b != NULL);
    if (!b) return;
    compare_with_cpu(b, build_argmax, 2, 0.0, "argmax after recreating");
    tg_backend_free(b);
}

static int g_abort_calls;
static bool abort_second(void *user) {
    (void)user;
    return ++g_abort_calls >= 2;
}

static void test_abort_between_segments_leaves_context_usable(void) {
    tg_backend *b = cuda_with("CT_CUDA_GRAPHS", "0");
    if (!b) return;
    run r;
    CHECK_OK(run_make(b, build_chain, &r));
    CHECK_OK(fill_leaves(&r, 3));
    g_abort_calls = 0;
    tg_backend_set_abort(b, abort_second, NULL);
    CHECK_ERR(tg_backend_graph_compute(b, r.g), TG_ERR_ABORTED, "aborted");
    tg_backend_set_abort(b, NULL, NULL);
    run_free(&r);
    compare_with_cpu(b, build_chain, 2, 1e-10, "chain after abort");
    tg_backend_free(b);
}

static void test_graphs_capture_replay_and_update(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    compare_with_cpu(b, build_chain, 5, 1e-10, "chain, captured and replayed");
    CHECK(c->n_graph_captures >= 1);
    CHECK(c->n_graph_hits >= 3);
    /* Same topology in new buffers (a buffer held meanwhile keeps the
     * allocator from handing out the old addresses): the executable graph is
     * updated or re-instantiated, never replayed with stale addresses. */
    tg_buffer *hold = NULL;
    CHECK_OK(tg_backend_buffer_alloc(b, 1 << 20, &hold));
    compare_with_cpu(b, build_chain, 3, 1e-10, "chain at new addresses");
    tg_buffer_free(hold);
    CHECK(c->n_graph_updates + c->n_graph_captures >= 2);
    compare_with_cpu(b, build_branches, 3, 1e-10, "independent branches");
    printf("  graphs: %d captures, %d updates, %d replays, %d direct\n", c->n_graph_captures,
           c->n_graph_updates, c->n_graph_hits, c->n_direct);
    tg_backend_free(b);
}

/* One topology in two sets of buffers, computed in turn: every sighting's
 * addresses differ from the one before, so nothing is captured (a capture
 * would never be replayed) and every compute launches directly; the same
 * set twice in a row is captured, and replayed the two times after. */
static void test_graphs_capture_only_a_repeat(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    run r1, r2;
    CHECK_OK(run_make(b, build_chain, &r1));
    CHECK_OK(run_make(b, build_chain, &r2));
    if (r1.g && r2.g && r1.buf && r2.buf) {
        CHECK_OK(fill_leaves(&r1, 3));
        CHECK_OK(fill_leaves(&r2, 4));
        int cap = c->n_graph_captures, upd = c->n_graph_updates, direct = c->n_direct, hits = c->n_graph_hits;
        for (int k = 0; k < 4; k++) CHECK_OK(tg_backend_graph_compute(b, (k % 2 ? r2 : r1).g));
        CHECK_MSG(c->n_graph_captures == cap && c->n_graph_updates == upd && c->n_direct == direct + 4,
                  "alternating addresses: %d captures, %d updates, %d direct", c->n_graph_captures - cap,
                  c->n_graph_updates - upd, c->n_direct - direct);
        for (int k = 0; k < 3; k++) CHECK_OK(tg_backend_graph_compute(b, r2.g));
        CHECK_MSG(c->n_graph_captures + c->n_graph_updates == cap + upd + 1 && c->n_graph_hits == hits + 2,
                  "the same addresses three times: %d captures or updates, %d replays",
                  c->n_graph_captures + c->n_graph_updates - cap - upd, c->n_graph_hits - hits);
    }
    run_free(&r1);
    run_free(&r2);
    tg_backend_free(b);
}

static void test_fusion_under_the_scheduler_respects_outside_readers(void) {
    tg_backend *b = cuda_or_skip();
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    tg_backend *cpu = NULL;
    CHECK_OK(tg_backend_cpu_new(2, &cpu));
    tg_backend *bes[2] = {b, cpu};
    for (int outside = 0; outside < 2; outside++) {
        tg_ctx *ctx[2] = {tg_ctx_new(), tg_ctx_new()};
        tg_tensor *mm[2], *out[2];
        tg_graph *g[2];
        tg_sched *sc[2] = {NULL, NULL};
        tg_buffer *wb[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            tg_tensor *w = tg_new_2d(ctx[k], TG_BF16, 128, 96), *x = tg_new_2d(ctx[k], TG_F32, 128, 21);
            tg_tensor *bias = tg_new_1d(ctx[k], TG_F32, 96);
            w->flags |= TG_FLAG_WEIGHT;
            bias->flags |= TG_FLAG_WEIGHT;
            x->flags |= TG_FLAG_INPUT;
            mm[k] = tg_mul_mat(ctx[k], w, x);
            out[k] = tg_relu(ctx[k], tg_add(ctx[k], mm[k], bias));
            if (outside) tg_scale(ctx[k], mm[k], 2.0f); /* a reader that is not in the graph */
            g[k] = tg_graph_new(ctx[k]);
            CHECK_OK(tg_graph_build(g[k], out[k]));
            /* k = 0: CUDA with the CPU as fallback; k = 1: the CPU reference. */
            tg_backend *list[2] = {bes[k], cpu};
            CHECK_OK(tg_sched_new(k == 0 ? list : &list[1], k == 0 ? 2 : 1, &sc[k]));
            /* The weights live in the first backend's buffer, so the product
             * and the bias add are placed there. */
            tg_tensor *ws[2] = {w, bias};
            size_t off = 0, sizes[2] = {tg_nbytes(w), tg_nbytes(bias)};
            CHECK_OK(tg_backend_buffer_alloc(bes[k], sizes[0] + sizes[1] + 512, &wb[k]));
            for (int q = 0; q < 2 && wb[k]; q++) {
                CHECK_OK(tg_tensor_place(ws[q], wb[k], off));
                off += (sizes[q] + 255) & ~(size_t)255;
            }
            CHECK_OK(tg_sched_alloc(sc[k], g[k]));
            run r = {ctx[k], g[k], out[k], NULL};
            CHECK_OK(fill_leaves(&r, 11));
        }
        int fused = c->n_fused[1];
        CHECK_OK(tg_sched_compute(sc[0], g[0]));
        CHECK_OK(tg_sched_compute(sc[1], g[1]));
        CHECK_MSG((c->n_fused[1] > fused) == !outside, "outside reader %d: fused %d -> %d", outside, fused,
                  c->n_fused[1]);
        const tg_tensor *cmp[2] = {out[0], mm[0]}, *ref[2] = {out[1], mm[1]};
        for (int q = 0; q < (outside ? 2 : 1); q++) {
            double *x0 = get_out(cmp[q]), *x1 = get_out(ref[q]);
            CHECK(x0 && x1 && nmse(x0, x1, tg_nelements(ref[q])) < 5e-4);
            tg_free(x0);
            tg_free(x1);
        }
        for (int k = 0; k < 2; k++) {
            tg_sched_free(sc[k]);
            tg_buffer_free(wb[k]);
            tg_ctx_free(ctx[k]);
        }
    }
    tg_backend_free(cpu);
    tg_backend_free(b);
}

static void test_graph_dump_and_profile(void) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/tg-cuda-dump-%ld.txt", (long)getpid());
    setenv("CT_CUDA_DUMP_GRAPH", path, 1);
    setenv("CT_CUDA_PROFILE", "1", 1);
    tg_backend *b = cuda_or_skip();
    unsetenv("CT_CUDA_DUMP_GRAPH");
    unsetenv("CT_CUDA_PROFILE");
    if (!b) return;
    compare_with_cpu(b, build_ffn, 2, 5e-4, "ffn block, dumped and profiled");
    char *text = NULL;
    size_t size = 0;
    CHECK_OK(tg_file_read(path, &text, &size));
    /* Nodes with their kernels and launch shapes, then per-kernel times. */
    CHECK(text && strstr(text, "layer_norm") && strstr(text, "cublasLtMatmul") && strstr(text, "grid (") &&
          strstr(text, "time "));
    tg_free(text);
    unlink(path);
    tg_backend_free(b);
}

/* Child mode: one backend start and compute in a fresh process. */
static int child_main(void) {
    tg_backend *b = NULL;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) {
        fprintf(stderr, "child: %s\n", tg_status_message(st));
        return 2;
    }
    check_failures_in_test = 0;
    compare_with_cpu(b, build_ffn, 1, 5e-4, "ffn block in a child");
    int compiled, hits;
    tg_cuda_test_counts(b, &compiled, &hits);
    printf("child: compiled %d, cache hits %d\n", compiled, hits);
    tg_backend_free(b);
    return check_failures_in_test ? 1 : 0;
}

/* Child mode 2: no NVRTC and no cache, so only kernels nvcc precompiled
 * into the build can run; without them the error must say what is missing. */
static int child_no_nvrtc(void) {
    tg_backend *b = NULL;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) {
        fprintf(stderr, "child: %s\n", tg_status_message(st));
        return 2;
    }
    run r;
    int rc = 0;
    st = run_make(b, build_ffn, &r);
    if (!st) st = fill_leaves(&r, 5);
    if (!st) st = tg_backend_graph_compute(b, r.g);
    printf("child without NVRTC: %d precompiled images, %d loaded: %s\n", tg_cuda_n_images,
           tg_cuda_test_precompiled(b), st ? tg_status_message(st) : "computed");
    if (tg_cuda_n_images > 0) rc = st ? 1 : 0;
    else rc = st && tg_status_code(st) == TG_ERR_UNSUPPORTED && strstr(tg_status_message(st), "NVRTC") ? 0 : 1;
    tg_status_free(st);
    run_free(&r);
    tg_backend_free(b);
    return rc;
}

static pid_t spawn_child(const char *dir) {
    setenv("CT_CUDA_CACHE_DIR", dir, 1);
    setenv("CT_TEST_CUDA_CHILD", "1", 1);
    char *argv[] = {(char *)"/proc/self/exe", NULL};
    pid_t pid = -1;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0) pid = -1;
    unsetenv("CT_TEST_CUDA_CHILD");
    unsetenv("CT_CUDA_CACHE_DIR");
    return pid;
}

static int wait_child(pid_t pid) {
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_kernel_cache_cold_warm_damaged_and_concurrent(void) {
    tg_backend *probe = cuda_or_skip();
    if (!probe) return;
    tg_backend_free(probe);
    char dir[128], cmd[256];
    snprintf(dir, sizeof dir, "/tmp/tg-cuda-cache-test-%ld", (long)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    setenv("CT_CUDA_CACHE_DIR", dir, 1);
    /* the disk cache holds what NVRTC compiles: no precompiled images here */
    setenv("CT_CUDA_PRECOMPILED", "0", 1);
    int cold = 0, warm = 0, hits = 0;
    tg_backend *b = cuda_or_skip();
    if (b) {
        compare_with_cpu(b, build_ffn, 1, 5e-4, "ffn block, cold cache");
        tg_cuda_test_counts(b, &cold, &hits);
        tg_backend_free(b);
    }
    b = cuda_or_skip();
    if (b) {
        compare_with_cpu(b, build_ffn, 1, 5e-4, "ffn block, warm cache");
        tg_cuda_test_counts(b, &warm, &hits);
        tg_backend_free(b);
    }
    printf("  cold start compiled %d kernel files; warm start compiled %d, read %d from the cache\n", cold, warm,
           hits);
    CHECK(cold > 0 && warm == 0 && hits >= cold);
    /* Damage every entry: each is recompiled with a warning, none is fatal. */
    snprintf(cmd, sizeof cmd, "for f in '%s'/*.cubin; do printf 'garbage' | dd of=\"$f\" bs=1 seek=200 conv=notrunc 2>/dev/null; done", dir);
    CHECK(system(cmd) == 0);
    b = cuda_or_skip();
    if (b) {
        compare_with_cpu(b, build_ffn, 1, 5e-4, "ffn block, damaged cache");
        int again;
        tg_cuda_test_counts(b, &again, &hits);
        CHECK_MSG(again == cold && hits == 0, "damaged cache: compiled %d (cold %d), hits %d", again, cold, hits);
        tg_backend_free(b);
    }
    unsetenv("CT_CUDA_CACHE_DIR");
    /* Two processes starting on an empty cache at once. */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    pid_t p1 = spawn_child(dir), p2 = spawn_child(dir);
    CHECK(wait_child(p1) == 0);
    CHECK(wait_child(p2) == 0);
    pid_t p3 = spawn_child(dir);
    CHECK(wait_child(p3) == 0);
    CHECK(system(cmd) == 0);
    unsetenv("CT_CUDA_PRECOMPILED");
}

/* A cold start (empty disk cache) on a GPU the build precompiled for loads
 * the nvcc images and compiles none of the block's kernel files. */
static void test_cold_start_uses_the_precompiled_kernels(void) {
    tg_backend *probe = cuda_or_skip();
    if (!probe) return;
    const tg_cuda_props *pp = tg_cuda_backend_props(probe);
    int cc = pp->cc_major * 10 + pp->cc_minor;
    tg_backend_free(probe);
    if (tg_cuda_n_images == 0 || (cc != 80 && cc != 86 && cc != 89 && cc != 90)) {
        printf("  skipped: %d precompiled images, sm_%d\n", tg_cuda_n_images, cc);
        return;
    }
    char dir[128], cmd[256];
    snprintf(dir, sizeof dir, "/tmp/tg-cuda-cold-test-%ld", (long)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    setenv("CT_CUDA_CACHE_DIR", dir, 1);
    tg_backend *b = cuda_or_skip();
    if (b) {
        compare_with_cpu(b, build_ffn, 1, 5e-4, "ffn block, cold cache, precompiled kernels");
        int compiled = -1, hits = -1;
        tg_cuda_test_counts(b, &compiled, &hits);
        printf("  cold start: %d precompiled images loaded, %d kernel files compiled\n",
               tg_cuda_test_precompiled(b), compiled);
        CHECK_MSG(compiled == 0 && tg_cuda_test_precompiled(b) > 0, "compiled %d, precompiled %d", compiled,
                  tg_cuda_test_precompiled(b));
        tg_backend_free(b);
    }
    unsetenv("CT_CUDA_CACHE_DIR");
    CHECK(system(cmd) == 0);
}

/* Child mode 3: a kernel fault. The driver refuses all further work in the
 * process; the backend must say so, fail fast after, and not crash. */
static int child_fault(void) {
    tg_backend *b = NULL;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) return 2;
    run r;
    int bad = 0;
    if ((st = run_make(b, build_argmax, &r)) || (st = fill_leaves(&r, 1))) bad++;
    tg_status_free(st);
    tg_cuda_test_fault_next(b, 2);
    st = tg_backend_graph_compute(b, r.g);
    printf("child fault: %s\n", tg_status_message(st));
    if (tg_status_code(st) != TG_ERR_DEVICE || !strstr(tg_status_message(st), "restart")) bad++;
    tg_status_free(st);
    st = tg_backend_graph_compute(b, r.g);
    if (!st || !strstr(tg_status_message(st), "failed earlier")) bad++;
    tg_status_free(st);
    run_free(&r);
    tg_backend_free(b);
    b = NULL;
    st = tg_backend_cuda_new(0, &b);
    printf("child fault: recreating: %s\n", st ? tg_status_message(st) : "ok");
    tg_status_free(st);
    tg_backend_free(b);
    return bad;
}

static void test_kernel_fault_is_reported_and_fails_fast(void) {
    tg_backend *probe = cuda_or_skip();
    if (!probe) return;
    tg_backend_free(probe);
    setenv("CT_TEST_CUDA_CHILD", "3", 1);
    char *argv[] = {(char *)"/proc/self/exe", NULL};
    pid_t pid = -1;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0) pid = -1;
    unsetenv("CT_TEST_CUDA_CHILD");
    CHECK(wait_child(pid) == 0);
}

static void test_precompiled_kernels_without_nvrtc(void) {
    tg_backend *probe = cuda_or_skip();
    if (!probe) return;
    tg_backend_free(probe);
    setenv("CT_TEST_CUDA_CHILD", "2", 1);
    setenv("CT_CUDA_NVRTC", "/nonexistent/libnvrtc.so", 1);
    setenv("CT_CUDA_CACHE", "0", 1);
    char *argv[] = {(char *)"/proc/self/exe", NULL};
    pid_t pid = -1;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0) pid = -1;
    unsetenv("CT_TEST_CUDA_CHILD");
    unsetenv("CT_CUDA_NVRTC");
    unsetenv("CT_CUDA_CACHE");
    CHECK(wait_child(pid) == 0);
}

static void test_copies_between_two_gpus(void) {
    tg_backend *b0 = cuda_or_skip();
    if (!b0) return;
    tg_backend *b1 = NULL;
    tg_status st = tg_backend_cuda_new(1, &b1);
    if (st) {
        printf("skipped: one GPU only (%s)\n", tg_status_message(st));
        tg_status_free(st);
        tg_backend_free(b0);
        return;
    }
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_1d(ctx, TG_F32, 1 << 20), *c = tg_new_1d(ctx, TG_F32, 1 << 20);
    tg_buffer *ba = NULL, *bc = NULL;
    CHECK_OK(tg_backend_buffer_alloc(b0, tg_nbytes(a), &ba));
    CHECK_OK(tg_backend_buffer_alloc(b1, tg_nbytes(c), &bc));
    CHECK_OK(tg_tensor_place(a, ba, 0));
    CHECK_OK(tg_tensor_place(c, bc, 0));
    float *h = tg_malloc(tg_nbytes(a)), *r = tg_malloc(tg_nbytes(a));
    for (int i = 0; i < (1 << 20); i++) h[i] = (float)i * 0.5f;
    CHECK_OK(tg_tensor_set(a, h, 0, tg_nbytes(a)));
    CHECK_OK(tg_tensor_copy(a, c));
    CHECK_OK(tg_tensor_get(c, r, 0, tg_nbytes(c)));
    CHECK(memcmp(h, r, tg_nbytes(a)) == 0);
    printf("  copied 4 MiB from %s to %s\n", tg_backend_name(b0), tg_backend_name(b1));
    tg_free(h);
    tg_free(r);
    tg_buffer_free(ba);
    tg_buffer_free(bc);
    tg_ctx_free(ctx);
    tg_backend_free(b1);
    tg_backend_free(b0);
}

int main(int argc, char **argv) {
    const char *child = getenv("CT_TEST_CUDA_CHILD");
    if (child) return strcmp(child, "2") == 0 ? child_no_nvrtc() : strcmp(child, "3") == 0 ? child_fault() : child_main();
    static const test_case tests[] = {
        T(test_device_properties_or_clear_absence),
        T(test_buffers_set_get_memset_and_host_memory),
        T(test_out_of_memory_is_an_error_and_the_backend_lives_on),
        T(test_event_synchronize_times_out),
        T(test_graphs_capture_replay_and_update), T(test_graphs_capture_only_a_repeat),
        T(test_abort_between_segments_leaves_context_usable),
        T(test_fusion_under_the_scheduler_respects_outside_readers),
        T(test_graph_dump_and_profile),
        T(test_kernel_cache_cold_warm_damaged_and_concurrent), T(test_cold_start_uses_the_precompiled_kernels),
        T(test_precompiled_kernels_without_nvrtc),
        T(test_kernel_fault_is_reported_and_fails_fast),
        T(test_copies_between_two_gpus),
        T(test_sticky_error_then_recreate_recovers),
    };
    return check_run(tests, (int)(sizeof tests / sizeof tests[0]), argc, argv);
}
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
