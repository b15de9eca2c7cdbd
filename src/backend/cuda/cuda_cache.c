/*
 * cuda_cache.c: the on-disk compiled-kernel cache (see cuda_cache.h).
 *
 * Entry layout: a 48-byte header (magic, key hash, key length, payload size,
 * payload checksum, header checksum), the key text, the payload. The reader
 * checks every field before trusting the payload. Eviction scans the folder
 * after each write; the folder holds tens of entries, so a scan is cheap next
 * to the compile that preceded the write.
 *
 * Not here: what the entries mean (CUBINs to the caller; bytes to us).
 */
#include "cuda_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

#define KC_MAGIC 0x31304b4347544b43ull /* "CKTGCK01" */
#define KC_SEED 0x6b636163686531ull
#define KC_SUFFIX ".cubin"

struct tg_kcache {
    char *dir;
    size_t max_bytes;
    pthread_mutex_t lock; /* guards stats and serialises eviction scans */
    tg_kcache_stats stats;
};

typedef struct kc_header {
    uint64_t magic;
    uint64_t key_hash;
    uint64_t key_len;
    uint64_t size;
    uint64_t checksum;
    uint64_t header_sum; /* hash of the five fields above */
} kc_header;

static uint64_t key_hash(const char *key) { return tg_hash64(key, strlen(key), KC_SEED); }

void tg_kcache_entry_path(const tg_kcache *cache, const char *key, char *out, size_t out_size) {
    snprintf(out, out_size, "%s/%016llx%s", cache->dir, (unsigned long long)key_hash(key), KC_SUFFIX);
}

static tg_status mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return tg_status_new(TG_ERR_INVALID_ARG, "cache folder path '%s' is empty or too long", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return tg_status_new(TG_ERR_IO, "cannot create cache folder '%s': %s", buf, strerror(errno));
            buf[i] = c;
        }
    }
    return NULL;
}

tg_status tg_kcache_open(const char *dir, size_t max_bytes, tg_kcache **out_cache) {
    tg_status st = mkdirs(dir);
    if (st) return st;
    tg_kcache *c = tg_calloc(1, sizeof *c);
    if (!c) return tg_status_new(TG_ERR_NO_MEMORY, "kernel cache");
    c->dir = tg_strdup(dir);
    if (!c->dir) {
        tg_free(c);
        return tg_status_new(TG_ERR_NO_MEMORY, "kernel cache");
    }
    c->max_bytes = max_bytes ? max_bytes : (size_t)256 << 20;
    pthread_mutex_init(&c->lock, NULL);
    *out_cache = c;
    return NULL;
}

void tg_kcache_open_default(tg_kcache **out_cache) {
    *out_cache = NULL;
    const char *off = getenv("CT_CUDA_CACHE");
    if (off && strcmp(off, "0") == 0) {
        TG_INFO("cuda: kernel cache disabled (CT_CUDA_CACHE=0)");
        return;
    }
    char dir[4096];
    const char *env = getenv("CT_CUDA_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (env && *env) snprintf(dir, sizeof dir, "%s", env);
    else if (xdg && *xdg) snprintf(dir, sizeof dir, "%s/cohere-transcribe/cuda", xdg);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.cache/cohere-transcribe/cuda", home);
    else {
        TG_WARN("cuda: no cache folder (set CT_CUDA_CACHE_DIR); kernels compile at every start");
        return;
    }
    size_t cap = 0;
    const char *mb = getenv("CT_CUDA_CACHE_MAX_MB");
    if (mb && atol(mb) > 0) cap = (size_t)atol(mb) << 20;
    tg_status st = tg_kcache_open(dir, cap, out_cache);
    if (st) {
        TG_WARN("cuda: kernel cache off: %s", tg_status_message(st));
        tg_status_free(st);
    }
}

void tg_kcache_close(tg_kcache *cache) {
    if (!cache) return;
    pthread_mutex_destroy(&cache->lock);
    tg_free(cache->dir);
    tg_free(cache);
}

const char *tg_kcache_dir(const tg_kcache *cache) { return cache ? cache->dir : NULL; }

tg_kcache_stats tg_kcache_get_stats(const tg_kcache *cache) {
    tg_kcache_stats s = {0};
    if (cache) {
        pthread_mutex_lock((pthread_mutex_t *)&cache->lock);
        s = cache->stats;
        pthread_mutex_unlock((pthread_mutex_t *)&cache->lock);
    }
    return s;
}

static void count(tg_kcache *c, int *field) {
    pthread_mutex_lock(&c->lock);
    (*field)++;
    pthread_mutex_unlock(&c->lock);
}

static uint64_t header_sum(const kc_header *h) { return tg_hash64(h, 5 * sizeof(uint64_t), KC_SEED); }

static bool read_all(int fd, void *buf, size_t n) {
    uint8_t *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            return false;
        }
        p += r;
        n -= (size_t)r;
    }
    return true;
}

static bool write_all(int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += r;
        n -= (size_t)r;
    }
    return true;
}

bool tg_kcache_get(tg_kcache *cache, const char *key, void **out_data, size_t *out_size) {
    if (!cache) return false;
    char path[4200];
    tg_kcache_entry_path(cache, key, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        count(cache, &cache->stats.misses);
        return false;
    }
    const char *why = NULL;
    kc_header h;
    size_t klen = strlen(key);
    char *kbuf = NULL;
    void *data = NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !read_all(fd, &h, sizeof h)) { why = "truncated header"; goto bad; }
    if (h.magic != KC_MAGIC || h.header_sum != header_sum(&h)) { why = "bad header"; goto bad; }
    if (h.key_len != klen || h.key_hash != key_hash(key)) { why = "key mismatch"; goto bad; }
    if ((uint64_t)sb.st_size != sizeof h + h.key_len + h.size) { why = "wrong length"; goto bad; }
    kbuf = tg_malloc(klen + 1);
    data = tg_malloc(h.size ? h.size : 1);
    if (!kbuf || !data) { why = "out of memory"; goto bad; }
    if (!read_all(fd, kbuf, klen) || memcmp(kbuf, key, klen) != 0) { why = "key mismatch"; goto bad; }
    if (!read_all(fd, data, h.size)) { why = "truncated payload"; goto bad; }
    if (tg_hash64(data, h.size, KC_SEED) != h.checksum) { why = "checksum mismatch"; goto bad; }
    close(fd);
    tg_free(kbuf);
    /* Least-recently-used order is the files' mtime: a hit refreshes it. */
    utimensat(AT_FDCWD, path, NULL, 0);
    count(cache, &cache->stats.hits);
    *out_data = data;
    *out_size = h.size;
    return true;
bad:
    close(fd);
    tg_free(kbuf);
    tg_free(data);
    if (strcmp(why, "key mismatch") != 0) {
        TG_WARN("cuda: kernel cache entry %s is damaged (%s); recompiling", path, why);
        unlink(path);
        count(cache, &cache->stats.corrupt);
    }
    count(cache, &cache->stats.misses);
    return false;
}

typedef struct kc_file {
    char name[64];
    off_t size;
    struct timespec mtime;
} kc_file;

static int cmp_mtime(const void *a, const void *b) {
    const kc_file *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return 0;
}

static void evict(tg_kcache *c) {
    DIR *d = opendir(c->dir);
    if (!d) return;
    kc_file *files = NULL;
    int n = 0, cap = 0;
    size_t total = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len >= sizeof files[0].name) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        /* Temporary files of a writer that died: gone after an hour. */
        if (strstr(e->d_name, ".tmp.") && now - sb.st_mtime > 3600) {
            unlink(path);
            continue;
        }
        if (len <= strlen(KC_SUFFIX) || strcmp(e->d_name + len - strlen(KC_SUFFIX), KC_SUFFIX) != 0)
            continue;
        if (!tg_grow((void **)&files, &cap, n + 1, sizeof *files)) break;
        memcpy(files[n].name, e->d_name, len + 1);
        files[n].size = sb.st_size;
        files[n].mtime = sb.st_mtim;
        total += (size_t)sb.st_size;
        n++;
    }
    closedir(d);
    if (total > c->max_bytes) {
        qsort(files, (size_t)n, sizeof *files, cmp_mtime);
        for (int i = 0; i < n && total > c->max_bytes; i++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", c->dir, files[i].name);
            if (unlink(path) == 0) {
                total -= (size_t)files[i].size;
                c->stats.evictions++;
            }
        }
    }
    tg_free(files);
}

tg_status tg_kcache_put(tg_kcache *cache, const char *key, const void *data, size_t size) {
    if (!cache) return NULL;
    char path[4200], tmp[4300];
    tg_kcache_entry_path(cache, key, path, sizeof path);
    static unsigned counter;
    unsigned k = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), k);
    kc_header h = {KC_MAGIC, key_hash(key), strlen(key), size, tg_hash64(data, size, KC_SEED), 0};
    h.header_sum = header_sum(&h);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return tg_status_new(TG_ERR_IO, "kernel cache: cannot create %s: %s", tmp, strerror(errno));
    bool ok = write_all(fd, &h, sizeof h) && write_all(fd, key, h.key_len) && write_all(fd, data, size);
    if (close(fd) != 0) ok = false;
    if (!ok) {
        int err = errno;
        unlink(tmp);
        return tg_status_new(TG_ERR_IO, "kernel cache: cannot write %s: %s", tmp, strerror(err));
    }
    if (rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return tg_status_new(TG_ERR_IO, "kernel cache: cannot rename into %s: %s", path, strerror(err));
    }
    pthread_mutex_lock(&cache->lock);
    cache->stats.writes++;
    evict(cache);
    pthread_mutex_unlock(&cache->lock);
    return NULL;
}
