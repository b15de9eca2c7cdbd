/*
 * cuda_prewarm.c: a context's first-use work done ahead of its first
 * compute, on a thread of its own (on by default; CT_CUDA_PREWARM=0 turns
 * it off). On an H100 it took a warm start's first call from 245-330 ms
 * to 34-43 ms (twenty-eighth session, src/backend/cuda/NOTES.md).
 *
 * A fresh process pays, in its first compute of a shape, for work a later
 * compute does not repeat: kernel files and functions readied (from the
 * kernel cache or the precompiled images) and cuBLASLt plans made and
 * launched once (cuBLASLt loads each algorithm's kernel lazily, at its
 * first launch). tg_backend_stats.setup_us counts it. A session opens its
 * backend and then uploads its weights for most of a second, while the
 * GPU's compute and the rest of the host sit idle: this file lets that
 * first-use work run then.
 *
 * What to prepare is what the last context on this GPU used: at close, a
 * context with the switch on writes the kernels its device readied and
 * the product plans it made or had refused (their keys: shapes, types,
 * strides, alignments, epilogue) as one entry of the kernel cache
 * (tg_kcache: a checksum, written by rename), keyed by the GPU's
 * architecture, the driver and the key's layout (not rewritten when it is
 * the list the context started on; a cache it cannot write to is said at
 * debug only). At its
 * start, a context with the switch on reads that entry and starts a
 * thread that readies each kernel (tg_cuda_kernel, under the device's
 * lock), then makes each plan and launches it once on scratch memory on a
 * stream of its own (garbage in, garbage out, never read), skipping a
 * plan whose operands would take more than 64 MB (a batch of 64 clips'
 * products: the first call of a large batch is not a start). The
 * context's first compute, and its end, stop the thread after its current
 * item and wait for it (tg_cuda_prewarm_join): until then the thread owns
 * the context's plan table; the weights' upload, which needs neither,
 * runs beside it, and usually outlasts the list (a process that computes
 * at once waits for one item, then makes what it needs itself). Only
 * what a compute asked for is written, so a list holds what the last run
 * used, never what an earlier prewarm prepared and nothing used; a list
 * whose launches fault fails the context where its first compute sees it
 * and is emptied. The list is one a GPU and driver, whatever the program
 * or model: runs of different shapes sharing a cache folder prepare each
 * other's (what is not needed costs the thread's time, not the compute's).
 *
 * Not here: graphs (captured from a compute's own launches, never ahead),
 * buffers (their sizes come with the first graph), what the work costs
 * (the debug log at the join, bench-transcribe_batch's first_setup_*_ms).
 */
#include <pthread.h>
#include <string.h>

#include "cuda_internal.h"

#define WARM_MAGIC 0x4c574754u /* "TGWL", little-endian */
#define WARM_VERSION 1u
#define WARM_MAX_KERNELS 2048
#define WARM_MAX_PLANS 512
#define WARM_SCRATCH_MAX ((size_t)64 << 20)

typedef struct warm_header {
    uint32_t magic, version, key_size, n_kernels, n_plans;
} warm_header;

struct tg_cuda_prewarm {
    pthread_t thread;
    bool running;
    int stop;                      /* set by the join: the thread ends after its current item */
    void *data;                    /* the cache entry: header, plan keys, kernel strings */
    size_t size;
    int n_kernels;                 /* kernels readied */
    tg_cuda_prewarm_counts plans;  /* plans launched, refused, skipped, failed (and kernels failed) */
    CUresult result;               /* the wait for the plans' launches */
    double ms;                     /* the thread's time */
};

void tg_cuda_prewarm_key(const tg_cuda_device *dev, char *buf, size_t size) {
    snprintf(buf, size, "tgwarm%u|cc %d.%d|driver %d|key %zu", WARM_VERSION, dev->props.cc_major,
             dev->props.cc_minor, dev->props.driver_version, sizeof(cuda_mm_key));
}

bool tg_cuda_prewarm_enabled(void) { return tg_cuda_env_int("CT_CUDA_PREWARM", 1) != 0; }

/* ----------------------------------------------------------------- record */

/* Whether plan p goes in the list: asked for by a compute (made, or
 * refused: the prewarm asks again) and a key the reader takes. */
static bool saved(const cuda_mm_plan *p) { return p->used && tg_cuda_mm_key_ok(&p->key); }

tg_status tg_cuda_prewarm_save(tg_cuda_ctx *c) {
    tg_cuda_device *dev = c->dev;
    if (!dev->cache) return NULL;
    /* only what a compute asked for: a list never grows by what it
     * prepared itself and nothing used */
    int n_plans = 0, n_kernels = 0;
    for (int i = 0; i < c->n_plans && n_plans < WARM_MAX_PLANS; i++) n_plans += saved(&c->plans[i]);
    pthread_mutex_lock(&dev->lock);
    size_t strings = 0;
    for (int i = 0; i < dev->n_kerns && n_kernels < WARM_MAX_KERNELS; i++) {
        if (!dev->kerns[i].used) continue;
        strings += strlen(dev->kerns[i].key) + 1;
        n_kernels++;
    }
    size_t size = sizeof(warm_header) + (size_t)n_plans * sizeof(cuda_mm_key) + strings;
    char *data = tg_malloc(size);
    if (!data) {
        pthread_mutex_unlock(&dev->lock);
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: the prewarm list", c->name);
    }
    warm_header h = {WARM_MAGIC, WARM_VERSION, (uint32_t)sizeof(cuda_mm_key), (uint32_t)n_kernels,
                     (uint32_t)n_plans};
    memcpy(data, &h, sizeof h);
    char *at = data + sizeof h;
    for (int i = 0, w = 0; i < c->n_plans && w < n_plans; i++) {
        if (!saved(&c->plans[i])) continue;
        memcpy(at, &c->plans[i].key, sizeof(cuda_mm_key));
        at += sizeof(cuda_mm_key);
        w++;
    }
    for (int i = 0, w = 0; i < dev->n_kerns && w < n_kernels; i++) {
        if (!dev->kerns[i].used) continue;
        size_t n = strlen(dev->kerns[i].key) + 1;
        memcpy(at, dev->kerns[i].key, n);
        at += n;
        w++;
    }
    pthread_mutex_unlock(&dev->lock);
    char key[160];
    tg_cuda_prewarm_key(dev, key, sizeof key);
    /* the list this context started on (a run like the last): not rewritten */
    bool same = c->prewarm_list && c->prewarm_list_size == size && memcmp(c->prewarm_list, data, size) == 0;
    tg_status st = same ? NULL : tg_kcache_put(dev->cache, key, data, size);
    tg_free(data);
    if (!st) TG_DEBUG("%s: prewarm list %s: %d kernels, %d plans", c->name, same ? "unchanged" : "written", n_kernels,
                      n_plans);
    return st;
}

/* ---------------------------------------------------------------- prepare */

/* True when the entry's header, sizes and strings hold together. */
static bool warm_valid(const void *data, size_t size) {
    warm_header h;
    if (size < sizeof h) return false;
    memcpy(&h, data, sizeof h);
    if (h.magic != WARM_MAGIC || h.version != WARM_VERSION || h.key_size != sizeof(cuda_mm_key) ||
        h.n_kernels > WARM_MAX_KERNELS || h.n_plans > WARM_MAX_PLANS)
        return false;
    size_t keys = sizeof h + (size_t)h.n_plans * sizeof(cuda_mm_key);
    if (keys > size) return false;
    const char *s = (const char *)data + keys, *end = (const char *)data + size;
    for (uint32_t i = 0; i < h.n_kernels; i++) {
        const char *nul = memchr(s, 0, (size_t)(end - s));
        if (!nul) return false;
        s = nul + 1;
    }
    return s == end;
}

/* Readies the kernel "module|defines|name" on dev. */
static bool warm_kernel(tg_cuda_device *dev, const char *key) {
    const char *bar1 = strchr(key, '|'), *bar2 = strrchr(key, '|');
    if (!bar1 || bar2 == bar1) return false;
    char module[64], defines[512];
    size_t nm = (size_t)(bar1 - key), nd = (size_t)(bar2 - bar1 - 1);
    if (nm >= sizeof module || nd >= sizeof defines) return false;
    memcpy(module, key, nm);
    module[nm] = 0;
    memcpy(defines, bar1 + 1, nd);
    defines[nd] = 0;
    if (!tg_cuda_source_known(module)) return false; /* an embedded file's name only, never a path */
    tg_status st = tg_cuda_kernel_ready(dev, module, defines, bar2 + 1);
    if (st) {
        TG_DEBUG("cuda: prewarm: %s", tg_status_message(st));
        tg_status_free(st);
        return false;
    }
    return true;
}

static void *prewarm_main(void *arg) {
    tg_cuda_ctx *c = arg;
    tg_cuda_prewarm *w = c->prewarm;
    const double t0 = tg_clock_now_ms();
    tg_status st = tg_cuda_device_bind(c->dev);
    if (st) {
        TG_DEBUG("%s: prewarm: %s", c->name, tg_status_message(st));
        tg_status_free(st);
        return NULL;
    }
    warm_header h;
    memcpy(&h, w->data, sizeof h);
    /* the keys sit at byte 20 of the entry: copied out, aligned */
    cuda_mm_key *keys = h.n_plans ? tg_malloc((size_t)h.n_plans * sizeof *keys) : NULL;
    if (keys) memcpy(keys, (const char *)w->data + sizeof h, (size_t)h.n_plans * sizeof *keys);
    const char *s = (const char *)w->data + sizeof h + (size_t)h.n_plans * sizeof(cuda_mm_key);
    for (uint32_t i = 0; i < h.n_kernels && !__atomic_load_n(&w->stop, __ATOMIC_RELAXED); i++) {
        if (warm_kernel(c->dev, s)) w->n_kernels++;
        else w->plans.failed++;
        s += strlen(s) + 1;
    }
    if (keys) w->result = tg_cuda_mm_prewarm(c, keys, (int)h.n_plans, WARM_SCRATCH_MAX, &w->stop, &w->plans);
    else w->plans.failed += (int)h.n_plans;
    tg_free(keys);
    w->ms = tg_clock_now_ms() - t0;
    return NULL;
}

void tg_cuda_prewarm_start(tg_cuda_ctx *c) {
    tg_cuda_device *dev = c->dev;
    if (!tg_cuda_prewarm_enabled() || !dev->cache) return;
    char key[160];
    tg_cuda_prewarm_key(dev, key, sizeof key);
    void *data = NULL;
    size_t size = 0;
    if (!tg_kcache_get(dev->cache, key, &data, &size)) return;
    if (!warm_valid(data, size)) {
        TG_WARN("%s: the kernel cache's prewarm list is not one this build reads; not prewarming", c->name);
        tg_free(data);
        return;
    }
    tg_cuda_prewarm *w = tg_calloc(1, sizeof *w);
    if (!w) {
        tg_free(data);
        return;
    }
    w->data = data;
    w->size = size;
    c->prewarm = w;
    if (pthread_create(&w->thread, NULL, prewarm_main, c) != 0) {
        TG_DEBUG("%s: prewarm: no thread; not prewarming", c->name);
        c->prewarm = NULL;
        c->prewarm_list = data, c->prewarm_list_size = size; /* still the list it started on */
        tg_free(w);
        return;
    }
    w->running = true;
}

/* Overwrites the list with an empty one, so the next start prepares
 * nothing (after a prewarm that faulted). */
static void forget_list(tg_cuda_ctx *c) {
    tg_free(c->prewarm_list);
    c->prewarm_list = NULL, c->prewarm_list_size = 0;
    char key[160];
    tg_cuda_prewarm_key(c->dev, key, sizeof key);
    warm_header h = {WARM_MAGIC, WARM_VERSION, (uint32_t)sizeof(cuda_mm_key), 0, 0};
    tg_status st = tg_kcache_put(c->dev->cache, key, &h, sizeof h);
    tg_status_free(st);
}

double tg_cuda_prewarm_join(tg_cuda_ctx *c, bool stop) {
    tg_cuda_prewarm *w = c->prewarm;
    if (!w) return 0.0;
    const double t0 = tg_clock_now_ms();
    if (stop) __atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
    if (w->running) pthread_join(w->thread, NULL);
    const double waited = tg_clock_now_ms() - t0;
    TG_DEBUG("%s: prewarmed %d kernels and %d product plans (%d refused, %d failed, %d skipped) in %.1f ms; "
             "waited %.1f ms for it",
             c->name, w->n_kernels, w->plans.done, w->plans.refused, w->plans.failed, w->plans.skipped, w->ms, waited);
    c->prewarm_done = w->plans.done;
    c->prewarm_refused = w->plans.refused;
    c->prewarm_skipped = w->plans.skipped;
    c->prewarm_failed = w->plans.failed;
    CUresult r = w->result;
    c->prewarm = NULL;
    /* kept: the save at the end compares against it */
    c->prewarm_list = w->data, c->prewarm_list_size = w->size;
    tg_free(w);
    if (r != CUDA_SUCCESS) {
        /* a launch of the prewarm faulted the context: say so where the
         * caller sees it, and do not prepare that list again */
        TG_WARN("%s: the prewarm's launches failed (%s); its list is dropped", c->name, tg_cuda_result_text(r));
        forget_list(c);
        tg_status_free(tg_cuda_ctx_fail(c, r, "the prewarm's product launches (CT_CUDA_PREWARM)"));
    }
    return waited;
}
