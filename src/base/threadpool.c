/*
 * threadpool.c: a fixed pool of threads that runs one parallel region at a
 * time, fn(arg, ith, nth) on every thread, the caller being thread 0.
 *
 * The CPU backend enters a region per graph node, hundreds per graph and some
 * lasting microseconds, so handing out work must cost far less than a futex
 * round trip. A region is published by bumping an atomic generation counter;
 * workers spin on it with a pause instruction for a short while (about 50 us)
 * before sleeping on a condition variable, and the caller likewise spins on
 * the workers' "done" generations before sleeping. Each worker reports on
 * its own cache line, and the generation sits on a line nobody else writes,
 * so finishing threads never invalidate the line that others spin on (one
 * shared counter cost ~3 us per region at 16 threads). When the pool has more
 * threads than the machine has cores nobody spins: a spinning thread would
 * steal the core a working one needs.
 *
 * Memory ordering: the caller writes fn/arg and then bumps the generation with
 * release; a worker that observes the new generation (acquire) sees them. A
 * worker's writes inside fn are released by its store of `done` and acquired
 * by the caller's load that observes it, so when tg_threadpool_run returns
 * every thread's results are visible. Sleeping uses the Dekker pattern with
 * sequentially consistent atomics: the sleeper announces itself
 * (n_sleeping / caller_sleeping) and then re-checks the
 * condition under the mutex; the waker changes the condition and then reads
 * the announcement, so at least one of them sees the other and no wake-up is
 * lost.
 *
 * Not here: work stealing, task queues, nested regions, thread pinning.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

enum { SPIN_NS = 50000, MAX_THREADS = 1024, LINE = 64 };

typedef struct worker {
    _Alignas(LINE) atomic_uint done; /* the last generation this worker finished */
    tg_threadpool *pool;
    int ith;
    pthread_t thread;
} worker;

struct tg_threadpool {
    /* Read-mostly: written by the caller only between regions. */
    _Alignas(LINE) atomic_uint generation; /* bumped per region and at shutdown */
    atomic_bool stop;
    tg_task_fn fn;          /* the current region */
    void *arg;
    int n_threads;
    bool spin;              /* false when oversubscribed */
    worker *workers;        /* n_threads - 1 entries, thread ith = index + 1 */
    int n_started;

    _Alignas(LINE) atomic_int n_sleeping; /* workers inside (or entering) work_cond */
    atomic_bool caller_sleeping;
    pthread_mutex_t mutex;
    pthread_cond_t work_cond;   /* workers sleep here for a new generation */
    pthread_cond_t done_cond;   /* the caller sleeps here for all done */
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int tg_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Waits until the generation differs from seen (or shutdown); returns it. */
static unsigned wait_for_work(tg_threadpool *pool, unsigned seen) {
    unsigned g;
    if (pool->spin) {
        uint64_t start = now_ns();
        for (unsigned i = 1;; i++) {
            g = atomic_load_explicit(&pool->generation, memory_order_acquire);
            if (g != seen) return g;
            cpu_relax();
            if ((i & 63) == 0 && now_ns() - start > SPIN_NS) break;
        }
    }
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add(&pool->n_sleeping, 1);
    while ((g = atomic_load(&pool->generation)) == seen)
        pthread_cond_wait(&pool->work_cond, &pool->mutex);
    atomic_fetch_sub(&pool->n_sleeping, 1);
    pthread_mutex_unlock(&pool->mutex);
    return g;
}

static void *worker_main(void *p) {
    worker *w = p;
    tg_threadpool *pool = w->pool;
    unsigned seen = 0;
    for (;;) {
        seen = wait_for_work(pool, seen);
        if (atomic_load_explicit(&pool->stop, memory_order_acquire)) break;
        pool->fn(pool->arg, w->ith, pool->n_threads);
        /* seq_cst store, then the caller_sleeping read: the Dekker pair. */
        atomic_store(&w->done, seen);
        if (atomic_load(&pool->caller_sleeping)) {
            pthread_mutex_lock(&pool->mutex);
            pthread_cond_signal(&pool->done_cond);
            pthread_mutex_unlock(&pool->mutex);
        }
    }
    return NULL;
}

static void wake_workers(tg_threadpool *pool) {
    if (atomic_load(&pool->n_sleeping) > 0) {
        pthread_mutex_lock(&pool->mutex);
        pthread_cond_broadcast(&pool->work_cond);
        pthread_mutex_unlock(&pool->mutex);
    }
}

static void stop_workers(tg_threadpool *pool) {
    atomic_store_explicit(&pool->stop, true, memory_order_relaxed);
    /* The bump publishes stop; broadcast under the mutex unconditionally so
     * a worker between its announcement and its wait is not missed. */
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->work_cond);
    pthread_mutex_unlock(&pool->mutex);
    for (int i = 0; i < pool->n_started; i++) pthread_join(pool->workers[i].thread, NULL);
    pool->n_started = 0;
}

tg_status tg_threadpool_new(int n_threads, tg_threadpool **out_pool) {
    if (n_threads <= 0) n_threads = tg_cpu_count();
    if (n_threads > MAX_THREADS)
        return tg_status_new(TG_ERR_INVALID_ARG, "thread pool: %d threads requested, at most %d",
                             n_threads, MAX_THREADS);
    tg_status st = NULL;
    /* Aligned so the cache-line layout above is real. */
    tg_threadpool *pool = tg_aligned_alloc(LINE, sizeof *pool);
    if (!pool) return tg_status_new(TG_ERR_NO_MEMORY, "thread pool: out of memory");
    memset(pool, 0, sizeof *pool);
    pool->n_threads = n_threads;
    pool->spin = n_threads <= tg_cpu_count();
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->stop, false);
    atomic_init(&pool->n_sleeping, 0);
    atomic_init(&pool->caller_sleeping, false);
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->work_cond, NULL);
    pthread_cond_init(&pool->done_cond, NULL);
    if (n_threads > 1) {
        pool->workers = tg_aligned_alloc(LINE, ((size_t)n_threads - 1) * sizeof *pool->workers);
        if (pool->workers)
            memset(pool->workers, 0, ((size_t)n_threads - 1) * sizeof *pool->workers);
        if (!pool->workers) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "thread pool: out of memory for %d threads",
                               n_threads);
            goto fail;
        }
    }
    for (int i = 0; i < n_threads - 1; i++) {
        worker *w = &pool->workers[i];
        atomic_init(&w->done, 0);
        w->pool = pool;
        w->ith = i + 1;
        int err = pthread_create(&w->thread, NULL, worker_main, w);
        if (err) {
            st = tg_status_new(TG_ERR_INTERNAL, "thread pool: starting thread %d of %d: %s",
                               i + 1, n_threads, strerror(err));
            goto fail;
        }
        pool->n_started++;
    }
    *out_pool = pool;
    return NULL;

fail:
    tg_threadpool_free(pool);
    return st;
}

void tg_threadpool_free(tg_threadpool *pool) {
    if (!pool) return;
    stop_workers(pool);
    pthread_cond_destroy(&pool->done_cond);
    pthread_cond_destroy(&pool->work_cond);
    pthread_mutex_destroy(&pool->mutex);
    tg_aligned_free(pool->workers);
    tg_aligned_free(pool);
}

int tg_threadpool_size(const tg_threadpool *pool) {
    return pool ? pool->n_threads : 0;
}

/* True when every worker has finished generation g (acquire suffices while
 * spinning; the sleep path needs seq_cst for its Dekker pair). Scans from the last
 * worker whose check failed, so a long wait does not rescan finished ones. */
static bool all_done(tg_threadpool *pool, unsigned g, int *from, memory_order order) {
    for (int i = *from; i < pool->n_threads - 1; i++) {
        if (atomic_load_explicit(&pool->workers[i].done, order) != g) {
            *from = i;
            return false;
        }
    }
    *from = pool->n_threads - 1;
    return true;
}

void tg_threadpool_run(tg_threadpool *pool, tg_task_fn fn, void *arg) {
    int n = pool->n_threads;
    if (n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    /* seq_cst (not just release) so the n_sleeping read below cannot be
     * ordered before it; see the Dekker note at the top. The caller is the
     * only writer, so the relaxed read of the old value is exact. */
    unsigned g = atomic_load_explicit(&pool->generation, memory_order_relaxed) + 1;
    atomic_store(&pool->generation, g);
    wake_workers(pool);

    fn(arg, 0, n);

    int from = 0;
    if (all_done(pool, g, &from, memory_order_acquire)) return;
    if (pool->spin) {
        uint64_t start = now_ns();
        for (unsigned i = 1;; i++) {
            cpu_relax();
            if (all_done(pool, g, &from, memory_order_acquire)) return;
            if ((i & 63) == 0 && now_ns() - start > SPIN_NS) break;
        }
    }
    pthread_mutex_lock(&pool->mutex);
    atomic_store(&pool->caller_sleeping, true);
    while (!all_done(pool, g, &from, memory_order_seq_cst))
        pthread_cond_wait(&pool->done_cond, &pool->mutex);
    atomic_store(&pool->caller_sleeping, false);
    pthread_mutex_unlock(&pool->mutex);
}
