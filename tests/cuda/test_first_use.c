/*
 * test_first_use.c: the backend stats' first-use host time
 * (tg_backend_stats.setup_us and its parts): what a compute pays once,
 * kernels readied, product plans made and launched for the first time,
 * graphs captured, counted in the compute that pays it and not again. A
 * feed-forward block on 37 columns (its products on cuBLASLt) computed
 * three times on the same tensors: the first readies kernels and makes a
 * plan; the second readies and plans nothing (it captures the graph where
 * graphs are on, since its addresses repeat); the third replays it and
 * prepares nothing at all. The CPU backend counts none. The graph's
 * buffer's allocation is counted apart (alloc_us). With CT_CUDA_PREWARM=1
 * a backend prepares the last one's kernels and plans on a thread before
 * its first compute (cuda_prewarm.c), which then prepares none; a list it
 * cannot read is skipped.
 *
 * Prints "skipped: no CUDA device" and passes without a driver or GPU; on
 * the stand-in driver (ctest's cuda/first_use_fake) the counts are the same.
 *
 * Not here: how long a real first call takes (bench-transcribe_batch's
 * first_setup_*_ms, on a GPU).
 */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include "cuda_cache.h"
#include "cuda_internal.h"

/* One compute of r's graph on be, its stats apart. */
static tg_backend_stats compute_once(tg_backend *be, run *r) {
    tg_backend_stats s;
    tg_backend_reset_stats(be);
    CHECK_OK(tg_backend_graph_compute(be, r->g));
    tg_backend_get_stats(be, &s);
    double parts = s.setup_kernels_us + s.setup_plans_us + s.setup_first_us + s.setup_graphs_us;
    CHECK_MSG(s.setup_us > parts - 1e-6 && s.setup_us < parts + 1e-6, "setup %.3f us, its parts %.3f", s.setup_us,
              parts);
    CHECK(s.setup_us <= s.submit_us + 1e-6 || s.submit_us == 0);
    return s;
}

static void test_counted_once(void) {
    tg_backend *be = cuda_or_skip();
    if (!be) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)be->impl;
    run r;
    tg_backend_reset_stats(be);
    CHECK_OK(run_make(be, build_ffn, &r));
    tg_backend_stats sa;
    tg_backend_get_stats(be, &sa);
    CHECK_MSG(sa.alloc_us > 0 && sa.setup_us == 0, "the graph's buffer: allocated in %.3f us, setup %.3f",
              sa.alloc_us, sa.setup_us);
    CHECK_OK(fill_leaves(&r, 7));
    const int plans0 = c->n_plans;
    tg_backend_stats s1 = compute_once(be, &r);
    CHECK_MSG(s1.setup_kernels_us > 0, "first compute: kernels readied in %.3f us", s1.setup_kernels_us);
    CHECK_MSG(c->n_plans > plans0 && s1.setup_plans_us > 0, "first compute: %d plans in %.3f us",
              c->n_plans - plans0, s1.setup_plans_us);
    CHECK_MSG(s1.setup_first_us > 0, "first compute: first launches %.3f us", s1.setup_first_us);

    const int captures = c->n_graph_captures, plans1 = c->n_plans;
    tg_backend_stats s2 = compute_once(be, &r);
    CHECK_MSG(s2.setup_kernels_us == 0 && s2.setup_plans_us == 0 && s2.setup_first_us == 0,
              "second compute: kernels %.3f, plans %.3f, first launches %.3f us", s2.setup_kernels_us,
              s2.setup_plans_us, s2.setup_first_us);
    CHECK(c->n_plans == plans1);
    bool captured = c->n_graph_captures > captures;
    CHECK_MSG(captured ? s2.setup_graphs_us > 0 : s2.setup_graphs_us == 0, "second compute: %s, graphs %.3f us",
              captured ? "captured" : "not captured", s2.setup_graphs_us);

    const int hits = c->n_graph_hits;
    tg_backend_stats s3 = compute_once(be, &r);
    if (c->n_graph_hits > hits)
        CHECK_MSG(s3.setup_us == 0, "a replay: setup %.3f us", s3.setup_us);
    else
        CHECK_MSG(s3.setup_kernels_us == 0 && s3.setup_plans_us == 0 && s3.setup_first_us == 0,
                  "third compute: kernels %.3f, plans %.3f, first launches %.3f us", s3.setup_kernels_us,
                  s3.setup_plans_us, s3.setup_first_us);
    printf("  first compute: setup %.1f us (kernels %.1f, plans %.1f, first launches %.1f); second %.1f "
           "(graphs %.1f, %s); third %.1f\n",
           s1.setup_us, s1.setup_kernels_us, s1.setup_plans_us, s1.setup_first_us, s2.setup_us, s2.setup_graphs_us,
           captured ? "captured" : "not captured", s3.setup_us);
    run_free(&r);
    tg_backend_free(be);
}

/* A second backend on the same device finds the kernels the first readied:
 * its first compute readies none, but makes its own plans. */
static void test_kernels_per_device(void) {
    tg_backend *a = cuda_or_skip();
    if (!a) return;
    tg_backend *b = cuda_or_skip();
    run ra, rb;
    CHECK_OK(run_make(a, build_ffn, &ra));
    CHECK_OK(fill_leaves(&ra, 8));
    compute_once(a, &ra);
    if (b) {
        CHECK_OK(run_make(b, build_ffn, &rb));
        CHECK_OK(fill_leaves(&rb, 8));
        tg_backend_stats s = compute_once(b, &rb);
        CHECK_MSG(s.setup_kernels_us == 0, "second backend: kernels readied again (%.3f us)", s.setup_kernels_us);
        CHECK_MSG(s.setup_plans_us > 0, "second backend: no plans made (%.3f us)", s.setup_plans_us);
        run_free(&rb);
        tg_backend_free(b);
    }
    run_free(&ra);
    tg_backend_free(a);
}

static void test_cpu_counts_none(void) {
    tg_backend *cpu = NULL;
    CHECK_OK(tg_backend_cpu_new(2, &cpu));
    run r;
    CHECK_OK(run_make(cpu, build_ffn, &r));
    CHECK_OK(fill_leaves(&r, 9));
    tg_backend_stats s = compute_once(cpu, &r);
    CHECK_MSG(s.setup_us == 0, "CPU: setup %.3f us", s.setup_us);
    run_free(&r);
    tg_backend_free(cpu);
}

/* CT_CUDA_PREWARM=1 in a cache folder of its own (made here, removed
 * after): a backend that computed writes its list at its end; the next
 * one prepares it on its thread before its first compute, which then
 * readies no kernel and makes and first-launches no plan. */
static char g_cache[64];

static tg_backend *prewarm_backend(void) {
    setenv("CT_CUDA_CACHE_DIR", g_cache, 1);
    setenv("CT_CUDA_PREWARM", "1", 1);
    tg_backend *be = cuda_or_skip();
    unsetenv("CT_CUDA_PREWARM");
    return be;
}

static void compute_ffn_and_free(tg_backend *be, uint64_t seed, tg_backend_stats *out) {
    run r;
    CHECK_OK(run_make(be, build_ffn, &r));
    CHECK_OK(fill_leaves(&r, seed));
    *out = compute_once(be, &r);
    run_free(&r);
    setenv("CT_CUDA_PREWARM", "1", 1); /* the end writes the list */
    tg_backend_free(be);
    unsetenv("CT_CUDA_PREWARM");
}

static void test_prewarm(void) {
    snprintf(g_cache, sizeof g_cache, "/tmp/ct-test-prewarm-XXXXXX");
    if (!mkdtemp(g_cache)) {
        CHECK_MSG(0, "mkdtemp");
        return;
    }
    tg_backend *a = prewarm_backend();
    if (!a) {
        unsetenv("CT_CUDA_CACHE_DIR");
        rmdir(g_cache);
        return;
    }
    CHECK(((tg_cuda_ctx *)a->impl)->prewarm == NULL); /* no list yet */
    tg_backend_stats s1, s2;
    compute_ffn_and_free(a, 10, &s1);
    CHECK_MSG(s1.setup_kernels_us > 0 && s1.setup_plans_us > 0, "no list: kernels %.3f, plans %.3f us",
              s1.setup_kernels_us, s1.setup_plans_us);

    tg_backend *b = prewarm_backend();
    CHECK(b && ((tg_cuda_ctx *)b->impl)->prewarm != NULL);
    if (b) {
        compute_ffn_and_free(b, 11, &s2);
        CHECK_MSG(s2.setup_kernels_us == 0 && s2.setup_plans_us == 0 && s2.setup_first_us == 0,
                  "prewarmed: kernels %.3f, plans %.3f, first launches %.3f us", s2.setup_kernels_us,
                  s2.setup_plans_us, s2.setup_first_us);
        printf("  prewarm: first compute's setup %.1f us without it, %.1f with it\n", s1.setup_us, s2.setup_us);
    }

    /* a list this build cannot read (valid as a cache entry) is warned
     * about and skipped; the backend computes as without one */
    tg_backend *c = prewarm_backend();
    if (c) {
        tg_cuda_ctx *cc = (tg_cuda_ctx *)c->impl;
        tg_cuda_prewarm_join(cc);
        char key[160];
        tg_cuda_prewarm_key(cc->dev, key, sizeof key);
        const char junk[] = "not a prewarm list";
        CHECK_OK(tg_kcache_put(cc->dev->cache, key, junk, sizeof junk));
        tg_backend_free(c);
        tg_backend *d = prewarm_backend();
        CHECK(d && ((tg_cuda_ctx *)d->impl)->prewarm == NULL);
        if (d) {
            tg_backend_stats s3;
            run r;
            CHECK_OK(run_make(d, build_ffn, &r));
            CHECK_OK(fill_leaves(&r, 12));
            s3 = compute_once(d, &r);
            CHECK(s3.setup_plans_us > 0);
            run_free(&r);
            tg_backend_free(d);
        }
    }
    unsetenv("CT_CUDA_CACHE_DIR");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_cache);
    CHECK(system(cmd) == 0);
}

TEST_MAIN(T(test_counted_once), T(test_kernels_per_device), T(test_cpu_counts_none), T(test_prewarm))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
