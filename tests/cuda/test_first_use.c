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
 * buffer's allocation is counted apart (alloc_us); these tests turn the
 * prewarm off (CT_CUDA_PREWARM=0). With it on (the default) a backend
 * prepares the last one's kernels and plans on a thread before its first
 * compute (cuda_prewarm.c), which then prepares none; a list it cannot
 * read is skipped. A product cuBLASLt refuses is asked for once: a compute
 * after the first makes no plan and counts no plan time.
 *
 * Prints "skipped: no CUDA device" and passes without a driver or GPU; on
 * the stand-in driver (ctest's cuda/first_use_fake) the counts are the same.
 *
 * Not here: how long a real first call takes (bench-transcribe_batch's
 * first_setup_*_ms, on a GPU).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
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
    double parts = s.setup_kernels_us + s.setup_plans_us + s.setup_first_us + s.setup_graphs_us + s.setup_wait_us;
    CHECK_MSG(s.setup_us > parts - 1e-6 && s.setup_us < parts + 1e-6, "setup %.3f us, its parts %.3f", s.setup_us,
              parts);
    CHECK(s.setup_us <= s.submit_us + 1e-6 || s.submit_us == 0);
    return s;
}

static void test_counted_once(void) {
    setenv("CT_CUDA_PREWARM", "0", 1); /* a prewarm (on by default) would prepare what this counts */
    /* the stand-in cuBLASLt refuses bf16 results (CUBLAS_STATUS_INVALID_VALUE),
     * as a real one refuses some keys: a refusal is first-use work, asked
     * for once */
    setenv("TG_FAKE_LT_REFUSE_BF16_D", "7", 1);
    tg_backend *be = cuda_or_skip();
    if (!be) {
        unsetenv("TG_FAKE_LT_REFUSE_BF16_D");
        return;
    }
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
    const size_t scratch0 = c->scratch_size;
    tg_backend_stats s1 = compute_once(be, &r);
    /* the backend's own scratch, grown by a compute, counts as allocation */
    CHECK_MSG(c->scratch_size > scratch0 ? s1.alloc_us > 0 : s1.alloc_us == 0,
              "first compute: scratch %zu -> %zu bytes, allocation %.3f us", scratch0, c->scratch_size, s1.alloc_us);
    CHECK_MSG(s1.setup_kernels_us > 0, "first compute: kernels readied in %.3f us", s1.setup_kernels_us);
    CHECK_MSG(c->n_plans > plans0 && s1.setup_plans_us > 0, "first compute: %d plans in %.3f us",
              c->n_plans - plans0, s1.setup_plans_us);
    CHECK_MSG(s1.setup_first_us > 0, "first compute: first launches %.3f us", s1.setup_first_us);

    const int captures = c->n_graph_captures, plans1 = c->n_plans;
    tg_backend_stats s2 = compute_once(be, &r);
    CHECK_MSG(s2.alloc_us == 0, "second compute: allocation %.3f us", s2.alloc_us);
    CHECK_MSG(s2.setup_kernels_us == 0 && s2.setup_plans_us == 0 && s2.setup_first_us == 0,
              "second compute: kernels %.3f, plans %.3f, first launches %.3f us", s2.setup_kernels_us,
              s2.setup_plans_us, s2.setup_first_us);
    CHECK(c->n_plans == plans1);
    int refused = 0;
    for (int i = 0; i < c->n_plans; i++) refused += c->plans[i].none;
    if (getenv("CT_TEST_FAKE_CUDA"))
        CHECK_MSG(refused > 0, "the stand-in refused %d of %d plans (bf16 results)", refused, c->n_plans);
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
    printf("  first compute: setup %.1f us (kernels %.1f, plans %.1f for %d, %d refused, first launches %.1f), "
           "scratch allocated in %.1f; second %.1f (graphs %.1f, %s); third %.1f\n",
           s1.setup_us, s1.setup_kernels_us, s1.setup_plans_us, c->n_plans - plans0, refused, s1.setup_first_us,
           s1.alloc_us, s2.setup_us, s2.setup_graphs_us, captured ? "captured" : "not captured", s3.setup_us);
    run_free(&r);
    tg_backend_free(be);
    unsetenv("TG_FAKE_LT_REFUSE_BF16_D");
}

/* A failure that could pass (CUBLAS_STATUS_INTERNAL_ERROR, from the
 * stand-in) is not kept as a refusal: the next compute asks again. And the
 * prewarm is on unless CT_CUDA_PREWARM=0. */
static void test_transient_not_kept(void) {
    unsetenv("CT_CUDA_PREWARM");
    CHECK(tg_cuda_prewarm_enabled());
    setenv("CT_CUDA_PREWARM", "0", 1);
    CHECK(!tg_cuda_prewarm_enabled());
    if (!getenv("CT_TEST_FAKE_CUDA")) return; /* a real cuBLASLt fails at will only */
    setenv("TG_FAKE_LT_REFUSE_BF16_D", "14", 1);
    tg_backend *be = cuda_or_skip();
    if (be) {
        tg_cuda_ctx *c = (tg_cuda_ctx *)be->impl;
        run r;
        CHECK_OK(run_make(be, build_ffn, &r));
        CHECK_OK(fill_leaves(&r, 9));
        compute_once(be, &r);
        int refused = 0;
        for (int i = 0; i < c->n_plans; i++) refused += c->plans[i].none;
        CHECK_MSG(refused == 0, "%d failures kept as refusals", refused);
        tg_backend_stats s2 = compute_once(be, &r);
        CHECK_MSG(s2.setup_plans_us > 0, "the failed key asked again: plans %.3f us", s2.setup_plans_us);
        run_free(&r);
        tg_backend_free(be);
    }
    unsetenv("TG_FAKE_LT_REFUSE_BF16_D");
}

/* A second backend on the same device finds the kernels the first readied:
 * its first compute readies none, but makes its own plans. */
static void test_kernels_per_device(void) {
    setenv("CT_CUDA_PREWARM", "0", 1); /* b's plans its own compute's, not a list's */
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
 * after; both variables set for the whole test, so no thread reads the
 * environment while it changes): a backend that computed writes its list
 * at its end; the next one prepares it on its thread before its first
 * compute, which then readies no kernel and makes and first-launches no
 * plan. A list that cannot be read is warned about and not prepared; a
 * key that is not one a plan could have is skipped. */
static tg_backend_stats compute_ffn_and_free(tg_backend *be, uint64_t seed) {
    run r;
    CHECK_OK(run_make(be, build_ffn, &r));
    CHECK_OK(fill_leaves(&r, seed));
    tg_backend_stats s = compute_once(be, &r);
    run_free(&r);
    tg_backend_free(be);
    return s;
}

/* Replaces the prewarm list in be's cache by `size` bytes of `data`. */
static void put_list(tg_backend *be, const void *data, size_t size) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)be->impl;
    char key[160];
    tg_cuda_prewarm_key(c->dev, key, sizeof key);
    CHECK_OK(tg_kcache_put(c->dev->cache, key, data, size));
}

/* A backend started on `data` as the list; whether it prepared it, its
 * first compute's stats and the plans its prewarm skipped. */
static bool start_on(const void *data, size_t size, tg_backend_stats *out, int *out_skipped) {
    tg_backend *be = cuda_or_skip();
    if (!be) return false;
    (void)tg_cuda_prewarm_join((tg_cuda_ctx *)be->impl, true); /* the list it found */
    put_list(be, data, size);
    tg_backend_free(be); /* it computed nothing: writes no list */
    be = cuda_or_skip();
    if (!be) return false;
    tg_cuda_ctx *c = (tg_cuda_ctx *)be->impl;
    bool prewarming = c->prewarm != NULL;
    (void)tg_cuda_prewarm_join(c, false); /* the upload: the whole list prepared before the first compute */
    run r;
    CHECK_OK(run_make(be, build_ffn, &r));
    CHECK_OK(fill_leaves(&r, 13));
    *out = compute_once(be, &r);
    *out_skipped = c->prewarm_skipped;
    run_free(&r);
    tg_backend_free(be);
    return prewarming;
}

static void test_prewarm(void) {
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/ct-test-prewarm-XXXXXX");
    if (!mkdtemp(dir)) {
        CHECK_MSG(0, "mkdtemp");
        return;
    }
    setenv("CT_CUDA_CACHE_DIR", dir, 1);
    setenv("CT_CUDA_PREWARM", "1", 1);
    setenv("TG_FAKE_LT_REFUSE_BF16_D", "7", 1); /* the list holds a refused key: asked again ahead */
    tg_backend *a = cuda_or_skip();
    if (a) {
        CHECK(((tg_cuda_ctx *)a->impl)->prewarm == NULL); /* no list yet */
        tg_backend_stats s1 = compute_ffn_and_free(a, 10);
        CHECK_MSG(s1.setup_kernels_us > 0 && s1.setup_plans_us > 0, "no list: kernels %.3f, plans %.3f us",
                  s1.setup_kernels_us, s1.setup_plans_us);

        tg_backend *b = cuda_or_skip();
        tg_cuda_ctx *cb = b ? (tg_cuda_ctx *)b->impl : NULL;
        CHECK(cb && cb->prewarm != NULL);
        if (b) {
            /* the list as written, for the damaged copies below */
            char key[160];
            void *list = NULL;
            size_t size = 0;
            tg_cuda_prewarm_key(cb->dev, key, sizeof key);
            CHECK(tg_kcache_get(cb->dev->cache, key, &list, &size));
            run r;
            CHECK_OK(run_make(b, build_ffn, &r));
            CHECK_OK(fill_leaves(&r, 11));
            /* the session's upload, which the thread runs beside: the whole
             * list prepared before the first compute (which would stop it) */
            (void)tg_cuda_prewarm_join(cb, false);
            tg_backend_stats s2 = compute_once(b, &r);
            CHECK_MSG(s2.setup_kernels_us == 0 && s2.setup_plans_us == 0 && s2.setup_first_us == 0,
                      "prewarmed: kernels %.3f, plans %.3f, first launches %.3f us", s2.setup_kernels_us,
                      s2.setup_plans_us, s2.setup_first_us);
            CHECK_MSG(cb->prewarm_done == 2 && cb->prewarm_skipped == 0 && cb->prewarm_failed == 0,
                      "prewarm: %d plans launched, %d skipped, %d failed (the block's two products)",
                      cb->prewarm_done, cb->prewarm_skipped, cb->prewarm_failed);
            if (getenv("CT_TEST_FAKE_CUDA"))
                CHECK_MSG(cb->prewarm_refused > 0, "prewarm: %d refused keys asked again", cb->prewarm_refused);
            printf("  prewarm: first compute's setup %.1f us without it, %.1f with it\n", s1.setup_us, s2.setup_us);
            run_free(&r);
            /* b used what a used: the list is not written again (a backend
             * that computes nothing holds the device and its cache) */
            tg_backend *keep = cuda_or_skip();
            tg_kcache *kc = keep ? ((tg_cuda_ctx *)keep->impl)->dev->cache : NULL;
            const int writes = kc ? tg_kcache_get_stats(kc).writes : 0;
            tg_backend_free(b);
            if (kc)
                CHECK_MSG(tg_kcache_get_stats(kc).writes == writes, "the same list written again (%d writes)",
                          tg_kcache_get_stats(kc).writes - writes);
            tg_backend_free(keep);

            const size_t header = 20; /* five uint32: magic, version, key size, kernels, plans */
            tg_backend_stats s3;
            if (list && size > header + sizeof(cuda_mm_key)) {
                /* one key with an epilogue no plan has: skipped, the rest prepared */
                char *bad = tg_malloc(size);
                memcpy(bad, list, size);
                int32_t epi = 99;
                memcpy(bad + header + offsetof(cuda_mm_key, epilogue), &epi, sizeof epi);
                int skipped = 0;
                CHECK(start_on(bad, size, &s3, &skipped));
                CHECK_MSG(skipped == 1 && s3.setup_plans_us > 0,
                          "a bad key: %d skipped, its plan made by the compute in %.3f us", skipped, s3.setup_plans_us);
                tg_free(bad);
                /* the same list cut short: not read at all */
                CHECK(!start_on(list, size - 1, &s3, &skipped));
                CHECK(s3.setup_kernels_us > 0 && s3.setup_plans_us > 0);
            }
            const char junk[] = "not a prewarm list";
            int skipped = 0;
            CHECK(!start_on(junk, sizeof junk, &s3, &skipped));
            CHECK(s3.setup_plans_us > 0);
            tg_free(list);
        }
    }
    setenv("CT_CUDA_PREWARM", "0", 1);
    unsetenv("TG_FAKE_LT_REFUSE_BF16_D");
    unsetenv("CT_CUDA_CACHE_DIR");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST_MAIN(T(test_counted_once), T(test_transient_not_kept), T(test_kernels_per_device), T(test_cpu_counts_none), T(test_prewarm))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
