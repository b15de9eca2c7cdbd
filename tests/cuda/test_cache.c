/*
 * test_cache.c: the compiled-kernel disk cache: cold miss, warm hit with the
 * same bytes, a damaged or truncated entry read as a miss (and removed), the
 * size cap evicting the least recently used entry, CT_CUDA_CACHE=0, and two
 * processes filling one folder at once.
 *
 * The cache knows nothing of CUDA, so this runs on any machine of a build
 * that has the CUDA backend.
 */
#include "check.h"

#ifdef TG_HAVE_CUDA
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "cuda_cache.h"

static char g_dir[256];

static void fresh_dir(const char *tag) {
    snprintf(g_dir, sizeof g_dir, "/tmp/tg-kcache-test-%ld-%s", (long)getpid(), tag);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
}

static void remove_dir(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
}

static void fill(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

static void test_cold_then_warm(void) {
    fresh_dir("warm");
    tg_kcache *c = NULL;
    CHECK_OK(tg_kcache_open(g_dir, 0, &c));
    if (!c) return;
    uint8_t data[5000];
    fill(data, sizeof data, 1);
    void *got = NULL;
    size_t size = 0;
    CHECK(!tg_kcache_get(c, "key-a", &got, &size));
    CHECK_OK(tg_kcache_put(c, "key-a", data, sizeof data));
    CHECK(tg_kcache_get(c, "key-a", &got, &size));
    CHECK(size == sizeof data && got && memcmp(got, data, size) == 0);
    tg_free(got);
    CHECK(!tg_kcache_get(c, "key-b", &got, &size));
    /* A new handle on the same folder (the next process start) hits too. */
    tg_kcache *c2 = NULL;
    CHECK_OK(tg_kcache_open(g_dir, 0, &c2));
    CHECK(tg_kcache_get(c2, "key-a", &got, &size));
    tg_free(got);
    tg_kcache_stats s = tg_kcache_get_stats(c);
    CHECK(s.hits == 1 && s.misses == 2 && s.writes == 1 && s.corrupt == 0);
    tg_kcache_close(c2);
    tg_kcache_close(c);
    remove_dir();
}

static void damage(const char *path, off_t at) {
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    if (fd < 0) return;
    uint8_t b = 0;
    CHECK(pread(fd, &b, 1, at) == 1);
    b ^= 0x5a;
    CHECK(pwrite(fd, &b, 1, at) == 1);
    close(fd);
}

static void test_damaged_entries_are_misses(void) {
    fresh_dir("corrupt");
    tg_kcache *c = NULL;
    CHECK_OK(tg_kcache_open(g_dir, 0, &c));
    if (!c) return;
    uint8_t data[3000];
    fill(data, sizeof data, 2);
    char path[512];
    void *got = NULL;
    size_t size = 0;
    /* A flipped payload byte, a flipped header byte, a truncated file. */
    off_t where[3] = {2000, 3, -1};
    for (int k = 0; k < 3; k++) {
        CHECK_OK(tg_kcache_put(c, "key-x", data, sizeof data));
        tg_kcache_entry_path(c, "key-x", path, sizeof path);
        if (where[k] >= 0) damage(path, where[k]);
        else CHECK(truncate(path, 100) == 0);
        CHECK(!tg_kcache_get(c, "key-x", &got, &size));
        struct stat sb;
        CHECK_MSG(stat(path, &sb) != 0, "damaged entry %d was not removed", k);
    }
    CHECK(tg_kcache_get_stats(c).corrupt == 3);
    /* Rewritten, it reads again. */
    CHECK_OK(tg_kcache_put(c, "key-x", data, sizeof data));
    CHECK(tg_kcache_get(c, "key-x", &got, &size) && size == sizeof data && memcmp(got, data, size) == 0);
    tg_free(got);
    tg_kcache_close(c);
    remove_dir();
}

static void test_lru_eviction_under_the_cap(void) {
    fresh_dir("lru");
    tg_kcache *c = NULL;
    CHECK_OK(tg_kcache_open(g_dir, 25000, &c)); /* room for two 10 kB entries */
    if (!c) return;
    uint8_t data[10000];
    fill(data, sizeof data, 3);
    void *got = NULL;
    size_t size = 0;
    CHECK_OK(tg_kcache_put(c, "old", data, sizeof data));
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CHECK_OK(tg_kcache_put(c, "mid", data, sizeof data));
    nanosleep(&ts, NULL);
    /* Reading "old" makes "mid" the least recently used. */
    CHECK(tg_kcache_get(c, "old", &got, &size));
    tg_free(got);
    nanosleep(&ts, NULL);
    CHECK_OK(tg_kcache_put(c, "new", data, sizeof data));
    CHECK(tg_kcache_get_stats(c).evictions == 1);
    CHECK(tg_kcache_get(c, "old", &got, &size));
    tg_free(got);
    CHECK(tg_kcache_get(c, "new", &got, &size));
    tg_free(got);
    CHECK(!tg_kcache_get(c, "mid", &got, &size));
    tg_kcache_close(c);
    remove_dir();
}

static void test_disabled_by_environment(void) {
    fresh_dir("env");
    setenv("CT_CUDA_CACHE_DIR", g_dir, 1);
    setenv("CT_CUDA_CACHE", "0", 1);
    tg_kcache *c = (tg_kcache *)1;
    tg_kcache_open_default(&c);
    CHECK(c == NULL);
    void *got = NULL;
    size_t size = 0;
    CHECK(!tg_kcache_get(NULL, "k", &got, &size));
    CHECK_OK(tg_kcache_put(NULL, "k", "x", 1));
    unsetenv("CT_CUDA_CACHE");
    tg_kcache_open_default(&c);
    CHECK(c != NULL && strcmp(tg_kcache_dir(c), g_dir) == 0);
    tg_kcache_close(c);
    unsetenv("CT_CUDA_CACHE_DIR");
    remove_dir();
}

/* Two processes writing and reading the same keys at once: every read that
 * hits returns exactly what was written. */
static void test_two_processes_at_once(void) {
    fresh_dir("procs");
    tg_kcache *c = NULL;
    CHECK_OK(tg_kcache_open(g_dir, 0, &c));
    tg_kcache_close(c);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            tg_kcache *mine = NULL;
            int bad = 0;
            if (tg_kcache_open(g_dir, 0, &mine)) _exit(2);
            uint8_t data[20000];
            for (int i = 0; i < 200; i++) {
                char key[32];
                snprintf(key, sizeof key, "shared-%d", i % 8);
                fill(data, sizeof data, (uint32_t)(i % 8));
                tg_status st = tg_kcache_put(mine, key, data, sizeof data);
                if (st) bad++;
                tg_status_free(st);
                void *got = NULL;
                size_t size = 0;
                if (tg_kcache_get(mine, key, &got, &size) && (size != sizeof data || memcmp(got, data, size) != 0))
                    bad++;
                tg_free(got);
            }
            if (tg_kcache_get_stats(mine).corrupt) bad++;
            tg_kcache_close(mine);
            _exit(bad ? 1 : 0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int status = 0;
        CHECK(waitpid(kids[k], &status, 0) == kids[k]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %d", k, status);
    }
    remove_dir();
}

static void test_unwritable_folder_is_an_error_not_a_crash(void) {
    tg_kcache *c = NULL;
    CHECK_ERR(tg_kcache_open("/proc/no-such-place/cache", 0, &c), TG_ERR_IO, "/proc/no-such-place");
    CHECK(c == NULL);
}

TEST_MAIN(T(test_cold_then_warm), T(test_damaged_entries_are_misses), T(test_lru_eviction_under_the_cap),
          T(test_disabled_by_environment), T(test_two_processes_at_once),
          T(test_unwritable_folder_is_an_error_not_a_crash))
#else
TEST_MAIN_SKIPPED("built without the CUDA backend")
#endif
