/*
 * test_threadpool.c: every thread index runs exactly once per region, results
 * written by workers are visible to the caller when run returns, partitioned
 * sums are right for several pool sizes, many back-to-back regions (the CPU
 * backend's pattern) and regions after the workers went to sleep all work,
 * and freeing an idle pool joins its workers.
 */
#include <stdatomic.h>
#include <time.h>

#include "base.h"
#include "check.h"

enum { MAX_T = 16 };

typedef struct count_task {
    atomic_int calls[MAX_T];
    atomic_int bad_nth;
    int expect_nth;
} count_task;

static void count_fn(void *arg, int ith, int nth) {
    count_task *t = arg;
    if (nth != t->expect_nth || ith < 0 || ith >= nth || ith >= MAX_T) {
        atomic_fetch_add(&t->bad_nth, 1);
        return;
    }
    atomic_fetch_add(&t->calls[ith], 1);
}

static void each_index_runs_exactly_once_per_region(void) {
    const int sizes[] = {1, 2, 3, 8};
    for (int s = 0; s < 4; s++) {
        tg_threadpool *pool = NULL;
        CHECK_OK(tg_threadpool_new(sizes[s], &pool));
        if (!pool) continue;
        CHECK(tg_threadpool_size(pool) == sizes[s]);
        for (int r = 0; r < 20; r++) {
            count_task t = {.expect_nth = sizes[s]};
            tg_threadpool_run(pool, count_fn, &t);
            CHECK(atomic_load(&t.bad_nth) == 0);
            for (int i = 0; i < sizes[s]; i++)
                CHECK_MSG(atomic_load(&t.calls[i]) == 1, "n=%d region %d ith %d ran %d times",
                          sizes[s], r, i, atomic_load(&t.calls[i]));
        }
        tg_threadpool_free(pool);
    }
}

/* Plain (non-atomic) per-thread outputs: the pool's own ordering must make
 * them visible to the caller. */
typedef struct sum_task {
    const int *data;
    int n;
    long long partial[MAX_T];
} sum_task;

static void sum_fn(void *arg, int ith, int nth) {
    sum_task *t = arg;
    int per = (t->n + nth - 1) / nth;
    int lo = ith * per, hi = lo + per < t->n ? lo + per : t->n;
    long long s = 0;
    for (int i = lo; i < hi; i++) s += t->data[i];
    t->partial[ith] = s;
}

static void partitioned_sums_are_right(void) {
    enum { N = 100003 };
    static int data[N];
    long long expect = 0;
    for (int i = 0; i < N; i++) {
        data[i] = (i * 37) % 1001 - 500;
        expect += data[i];
    }
    const int sizes[] = {1, 2, 3, 8};
    for (int s = 0; s < 4; s++) {
        tg_threadpool *pool = NULL;
        CHECK_OK(tg_threadpool_new(sizes[s], &pool));
        if (!pool) continue;
        for (int r = 0; r < 50; r++) {
            sum_task t = {.data = data, .n = N - r};
            long long e = expect;
            for (int i = N - r; i < N; i++) e -= data[i];
            tg_threadpool_run(pool, sum_fn, &t);
            long long got = 0;
            for (int i = 0; i < sizes[s]; i++) got += t.partial[i];
            CHECK_MSG(got == e, "n=%d region %d: %lld vs %lld", sizes[s], r, got, e);
        }
        tg_threadpool_free(pool);
    }
}

typedef struct seq_task {
    long long slot[MAX_T];
    int region;
} seq_task;

static void seq_fn(void *arg, int ith, int nth) {
    seq_task *t = arg;
    (void)nth;
    t->slot[ith] += t->region + ith; /* read-modify-write of the last region's value */
}

static void ten_thousand_back_to_back_regions(void) {
    const int sizes[] = {2, 3, 8};
    for (int s = 0; s < 3; s++) {
        int n = sizes[s];
        tg_threadpool *pool = NULL;
        CHECK_OK(tg_threadpool_new(n, &pool));
        if (!pool) continue;
        seq_task t = {{0}, 0};
        const int regions = 10000;
        for (int r = 0; r < regions; r++) {
            t.region = r;
            tg_threadpool_run(pool, seq_fn, &t);
        }
        for (int i = 0; i < n; i++) {
            long long expect = (long long)regions * (regions - 1) / 2 + (long long)regions * i;
            CHECK_MSG(t.slot[i] == expect, "n=%d ith=%d: %lld vs %lld", n, i, t.slot[i], expect);
        }
        tg_threadpool_free(pool);
    }
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void regions_after_workers_slept_still_run(void) {
    tg_threadpool *pool = NULL;
    CHECK_OK(tg_threadpool_new(3, &pool));
    if (!pool) return;
    for (int r = 0; r < 5; r++) {
        sleep_ms(5); /* far past the spin window: workers are on the condvar */
        count_task t = {.expect_nth = 3};
        tg_threadpool_run(pool, count_fn, &t);
        for (int i = 0; i < 3; i++) CHECK(atomic_load(&t.calls[i]) == 1);
    }
    tg_threadpool_free(pool);
}

static void slow_fn(void *arg, int ith, int nth) {
    (void)nth;
    if (ith == 1) sleep_ms(5); /* the caller must sleep-wait, not return early */
    ((int *)arg)[ith] = ith + 1;
}

static void caller_waits_for_slow_workers(void) {
    tg_threadpool *pool = NULL;
    CHECK_OK(tg_threadpool_new(2, &pool));
    if (!pool) return;
    for (int r = 0; r < 3; r++) {
        int out[2] = {0, 0};
        tg_threadpool_run(pool, slow_fn, out);
        CHECK(out[0] == 1 && out[1] == 2);
    }
    tg_threadpool_free(pool);
}

static void free_while_idle_and_fresh_pools(void) {
    for (int i = 0; i < 20; i++) {
        tg_threadpool *pool = NULL;
        CHECK_OK(tg_threadpool_new(1 + i % 5, &pool));
        if (i % 2) sleep_ms(1);
        tg_threadpool_free(pool); /* never ran a region */
    }
    tg_threadpool_free(NULL);
}

static void default_size_is_cpu_count(void) {
    CHECK(tg_cpu_count() >= 1);
    tg_threadpool *pool = NULL;
    CHECK_OK(tg_threadpool_new(0, &pool));
    CHECK(tg_threadpool_size(pool) == tg_cpu_count());
    tg_threadpool_free(pool);
    CHECK_OK(tg_threadpool_new(-3, &pool));
    CHECK(tg_threadpool_size(pool) == tg_cpu_count());
    tg_threadpool_free(pool);
}

static void absurd_size_is_rejected(void) {
    tg_threadpool *pool = (tg_threadpool *)&pool;
    CHECK_ERR(tg_threadpool_new(1000000, &pool), TG_ERR_INVALID_ARG, "1000000 threads");
    CHECK(pool == (tg_threadpool *)&pool); /* output untouched */
}

static void out_of_memory_is_reported(void) {
    for (long n = 0; n < 2; n++) {
        tg_threadpool *pool = NULL;
        tg_alloc_fail_after(n);
        tg_status st = tg_threadpool_new(4, &pool);
        tg_alloc_fail_after(-1);
        CHECK(pool == NULL);
        CHECK_ERR(st, TG_ERR_NO_MEMORY, "thread pool");
    }
}

TEST_MAIN(T(each_index_runs_exactly_once_per_region), T(partitioned_sums_are_right),
          T(ten_thousand_back_to_back_regions), T(regions_after_workers_slept_still_run),
          T(caller_waits_for_slow_workers), T(free_while_idle_and_fresh_pools),
          T(default_size_is_cpu_count), T(absurd_size_is_rejected),
          T(out_of_memory_is_reported))
