/*
 * threadpool.c: a fixed pool of threads that runs one parallel region at a
 * time, fn(arg, ith, nth) on every thread, the caller being thread 0.
 *
 * The CPU backend enters a region per graph node, hundreds per graph and some
 * lasting microseconds, so handing out work must cost far less than a futex
 * round trip. A region is published by bumping an atomic generation counter;
 * workers spin on it with a pause instruction for a short while (about 50 us)
 * before sleeping on a condition variable, and the caller likewise spins on
 * the count of unfinished workers before sleeping. When the pool has more
 * threads than the machine has cores nobody spins: a spinning thread would
 * steal the core a working one needs.
 *
 * Memory ordering: the caller writes fn/arg and then bumps the generation with
 * release; a worker that observes the new generation (acquire) sees them. A
 * worker's writes inside fn are released by its decrement of `pending` and
 * acquired by the caller's load that observes zero, so when
 * tg_threadpool_run returns every thread's results are visible. Sleeping uses
 * the Dekker pattern with sequentially consistent atomics: the sleeper
 * announces itself (n_sleeping / caller_sleeping) and then re-checks the
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

enum { SPIN_NS = 50000, MAX_THREADS = 1024 };

typedef struct worker {
    tg_threadpool *pool;
    int ith;
    pthread_t thread;
} worker;

struct tg_threadpool {
    int n_threads;
    bool spin;              /* false when oversubscribed */
    worker *workers;        /* n_threads - 1 entries, thread ith = index + 1 */
    int n_started;

    /* The current region; written by the caller before the generation bump. */
    tg_task_fn fn;
    void *arg;

    atomic_uint generation; /* bumped once per region and once at shutdown */
    atomic_int pending;     /* workers that have not finished the region */
    atomic_bool stop;

    pthread_mutex_t mutex;
    pthread_cond_t work_cond;   /* workers sleep here for a new generation */
    pthread_cond_t done_cond;   /* the caller sleeps here for pending == 0 */
    atomic_int n_sleeping;      /* workers inside (or entering) work_cond */
    atomic_bool caller_sleeping;
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
        /* The last one out wakes the caller if it went to sleep. */
        if (atomic_fetch_sub(&pool->pending, 1) == 1 && atomic_load(&pool->caller_sleeping)) {
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
    tg_threadpool *pool = tg_calloc(1, sizeof *pool);
    if (!pool) return tg_status_new(TG_ERR_NO_MEMORY, "thread pool: out of memory");
    pool->n_threads = n_threads;
    pool->spin = n_threads <= tg_cpu_count();
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->stop, false);
    atomic_init(&pool->n_sleeping, 0);
    atomic_init(&pool->caller_sleeping, false);
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->work_cond, NULL);
    pthread_cond_init(&pool->done_cond, NULL);
    if (n_threads > 1) {
        pool->workers = tg_calloc((size_t)n_threads - 1, sizeof *pool->workers);
        if (!pool->workers) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "thread pool: out of memory for %d threads",
                               n_threads);
            goto fail;
        }
    }
    for (int i = 0; i < n_threads - 1; i++) {
        worker *w = &pool->workers[i];
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
    tg_free(pool->workers);
    tg_free(pool);
}

int tg_threadpool_size(const tg_threadpool *pool) {
    return pool ? pool->n_threads : 0;
}

void tg_threadpool_run(tg_threadpool *pool, tg_task_fn fn, void *arg) {
    int n = pool->n_threads;
    if (n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->pending, n - 1, memory_order_relaxed);
    /* seq_cst (not just release) so the n_sleeping read below cannot be
     * ordered before it; see the Dekker note at the top. */
    atomic_fetch_add(&pool->generation, 1);
    wake_workers(pool);

    fn(arg, 0, n);

    if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0) return;
    if (pool->spin) {
        uint64_t start = now_ns();
        for (unsigned i = 1;; i++) {
            if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0) return;
            cpu_relax();
            if ((i & 63) == 0 && now_ns() - start > SPIN_NS) break;
        }
    }
    pthread_mutex_lock(&pool->mutex);
    atomic_store(&pool->caller_sleeping, true);
    while (atomic_load(&pool->pending) != 0) pthread_cond_wait(&pool->done_cond, &pool->mutex);
    atomic_store(&pool->caller_sleeping, false);
    pthread_mutex_unlock(&pool->mutex);
}
