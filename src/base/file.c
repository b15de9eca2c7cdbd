/*
 * file.c: whole-file access: read-only mappings (weights), whole reads
 * (configs, vocabularies) and atomic replacement (caches).
 *
 * Every error names the path and carries strerror, because "No such file or
 * directory" alone tells the user nothing. Atomic writes go through a
 * temporary file in the target's own directory (so rename(2) never crosses a
 * file system) named "<path>.tmp.<pid>.<n>", which keeps concurrent writers
 * in one or several processes apart; the temporary is fsynced before the
 * rename and removed on any failure, and the directory is fsynced after the
 * rename (best effort) so the new name survives a crash.
 *
 * Only regular files are read or mapped. A FIFO would block open(2) until a
 * writer came and read(2) forever after; /dev/zero never ends. So the path
 * is stat'ed first (nothing odd is even opened), then opened with O_NONBLOCK
 * and checked again on the descriptor (the file may have been swapped in
 * between): only then is a byte read. Whole reads are bounded
 * (TG_FILE_READ_MAX), because they are for configs and vocabularies, and a
 * file that shrinks while it is read is an error, not a short result.
 *
 * A mapping faults with SIGBUS when its file is truncated under it (or its
 * storage fails), and the CPU backend reads weights from the mapping on
 * every thread during compute, so catching the fault with sigsetjmp around
 * copy loops would not cover the reads that matter. Instead every mapping is
 * registered in a fixed table, and a SIGBUS handler (installed with the
 * first mapping, chaining to whatever handler was there) that finds the
 * faulting address inside a registered mapping maps anonymous zero pages
 * over the rest of it (MAP_FIXED: a plain mmap system call, as safe in a
 * handler on Linux as write(2), though POSIX does not list it), records the
 * offset and returns: the read is retried and sees zeros, on whatever
 * thread it was. tg_file_map_check then reports the file, and the readers
 * (model load, encoder, decoder) turn that into an error and drop the
 * garbage they computed. A fault elsewhere goes to the previous handler (or
 * the default action: the process dies as before).
 *
 * Tests can make the Nth read or mapping fail (tg_file_fail_io_after), the
 * I/O counterpart of alloc.c's hook, to prove every caller turns a failed
 * read into an error and leaks nothing.
 *
 * Not here: partial or streaming I/O, locking, Windows.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

/* ENOENT is "not found" (the user named a wrong path); anything else is I/O. */
static tg_code open_error_code(int err) {
    return err == ENOENT || err == ENOTDIR ? TG_ERR_NOT_FOUND : TG_ERR_IO;
}

const char *tg_file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

static tg_status not_regular(const char *verb, const char *path, mode_t mode) {
    if (S_ISDIR(mode))
        return tg_status_new(TG_ERR_INVALID_ARG, "%s %s: is a directory, not a regular file",
                             verb, path);
    return tg_status_new(TG_ERR_INVALID_ARG, "%s %s: is %s, not a regular file", verb, path,
                         tg_file_kind(mode));
}

/* Opens path for reading when it is a regular file, without ever blocking:
 * stat first, so a FIFO or device is not opened at all; O_NONBLOCK on the
 * open, so one swapped in after the stat cannot block it either; fstat on
 * the descriptor to decide (what is read is what was checked). On success
 * *out_fd is a blocking descriptor and *out_sb its status. */
static tg_status open_regular(const char *verb, const char *path, int *out_fd,
                              struct stat *out_sb) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return tg_status_new(open_error_code(errno), "opening %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return not_regular(verb, path, sb.st_mode);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return tg_status_new(open_error_code(errno), "opening %s: %s", path, strerror(errno));
    tg_status st = NULL;
    if (fstat(fd, &sb) != 0) {
        st = tg_status_new(TG_ERR_IO, "reading %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = not_regular(verb, path, sb.st_mode);
        goto fail;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        st = tg_status_new(TG_ERR_IO, "reading %s: %s", path, strerror(errno));
        goto fail;
    }
    *out_fd = fd;
    *out_sb = sb;
    return NULL;
fail:
    close(fd);
    return st;
}

/* ----------------------------------------------------------- SIGBUS guard */

#define GUARD_SLOTS 64

typedef struct guard_slot {
    atomic_int taken;          /* claimed by a mapping                    */
    atomic_uintptr_t start;    /* published last; 0 while not in use      */
    atomic_size_t size;
    atomic_size_t fault_off;   /* SIZE_MAX: no fault                      */
} guard_slot;

static guard_slot guards[GUARD_SLOTS];
static struct sigaction prev_bus;
static atomic_int guard_installed; /* 0 no, 1 installing, 2 yes, 3 failed */
static uintptr_t page_size;

static void chain_bus(int sig, siginfo_t *info, void *uctx) {
    if (prev_bus.sa_flags & SA_SIGINFO) {
        if (prev_bus.sa_sigaction) {
            prev_bus.sa_sigaction(sig, info, uctx);
            return;
        }
    } else if (prev_bus.sa_handler != SIG_DFL && prev_bus.sa_handler != SIG_IGN) {
        prev_bus.sa_handler(sig);
        return;
    }
    /* Default action: restore it and return; the access faults again and
     * the process dies of SIGBUS as it would have without us. */
    signal(SIGBUS, SIG_DFL);
}

static void on_sigbus(int sig, siginfo_t *info, void *uctx) {
    uintptr_t addr = (uintptr_t)info->si_addr;
    for (int i = 0; i < GUARD_SLOTS; i++) {
        uintptr_t start = atomic_load_explicit(&guards[i].start, memory_order_acquire);
        size_t size = atomic_load_explicit(&guards[i].size, memory_order_relaxed);
        if (!start || addr < start || addr - start >= size) continue;
        uintptr_t page = addr & ~(page_size - 1);
        int saved = errno;
        void *p = mmap((void *)page, start + size - page, PROT_READ,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        errno = saved;
        if (p == MAP_FAILED) break;
        size_t off = page - start, cur = atomic_load(&guards[i].fault_off);
        while (off < cur && !atomic_compare_exchange_weak(&guards[i].fault_off, &cur, off)) {
        }
        return;
    }
    chain_bus(sig, info, uctx);
}

static void guard_install(void) {
    int expect = 0;
    if (!atomic_compare_exchange_strong(&guard_installed, &expect, 1)) {
        while (atomic_load(&guard_installed) == 1) {
        }
        return;
    }
    long ps = sysconf(_SC_PAGESIZE);
    page_size = ps > 0 ? (uintptr_t)ps : 4096;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &prev_bus) != 0) {
        TG_WARN("installing the SIGBUS handler: %s; a file truncated while mapped will kill "
                "the process", strerror(errno));
        atomic_store(&guard_installed, 3);
        return;
    }
    atomic_store(&guard_installed, 2);
}

/* Registers [data, data + size); returns the slot + 1, or 0 when the table
 * is full (the mapping then works unguarded, as before). */
static int guard_add(const void *data, size_t size, const char *path) {
    guard_install();
    if (atomic_load(&guard_installed) != 2) return 0;
    for (int i = 0; i < GUARD_SLOTS; i++) {
        int expect = 0;
        if (!atomic_compare_exchange_strong(&guards[i].taken, &expect, 1)) continue;
        atomic_store(&guards[i].size, size);
        atomic_store(&guards[i].fault_off, SIZE_MAX);
        atomic_store_explicit(&guards[i].start, (uintptr_t)data, memory_order_release);
        return i + 1;
    }
    TG_DEBUG("mapping %s: all %d SIGBUS guard slots in use; unguarded", path, GUARD_SLOTS);
    return 0;
}

static void guard_remove(int slot) {
    if (slot <= 0 || slot > GUARD_SLOTS) return;
    guard_slot *g = &guards[slot - 1];
    atomic_store_explicit(&g->start, 0, memory_order_release);
    atomic_store(&g->taken, 0);
}

tg_status tg_file_map_check(const tg_file_map *map) {
    if (!map || map->guard <= 0 || map->guard > GUARD_SLOTS) return NULL;
    size_t off = atomic_load(&guards[map->guard - 1].fault_off);
    if (off == SIZE_MAX) return NULL;
    return tg_status_new(TG_ERR_IO,
                         "%s: the file was truncated or failed while in use (SIGBUS reading "
                         "offset %zu of %zu); what was read from it since is not the file's",
                         map->path ? map->path : "?", off, map->size);
}

/* ---------------------------------------------------- I/O fault injection */

static atomic_long io_budget = -1;   /* < 0: off */
static atomic_long io_ops;
static tg_io_fault io_kind;

void tg_file_fail_io_after(long n, tg_io_fault kind) {
    io_kind = kind;
    atomic_store(&io_ops, 0);
    atomic_store(&io_budget, n < 0 ? -1 : n);
}

long tg_file_io_count(void) { return atomic_load(&io_ops); }

/* Counts one operation; true when it must fault (then injection is off). */
static bool io_fault_now(void) {
    atomic_fetch_add(&io_ops, 1);
    long b = atomic_load(&io_budget);
    if (b < 0) return false;
    if (b == 0) {
        atomic_store(&io_budget, -1);
        return true;
    }
    atomic_store(&io_budget, b - 1);
    return false;
}

/* read(2) with the injection point. */
static ssize_t read_some(int fd, void *buf, size_t n) {
    if (io_fault_now()) {
        if (io_kind == TG_IO_FAULT_SHORT) return read(fd, buf, n > 1 ? n / 2 : n);
        errno = EIO;
        return -1;
    }
    return read(fd, buf, n);
}

/* ------------------------------------------------------------------ files */

tg_status tg_file_map_open(const char *path, tg_file_map *out_map) {
    if (!path || !out_map)
        return tg_status_new(TG_ERR_INVALID_ARG, "tg_file_map_open: NULL argument");
    tg_status st = NULL;
    void *data = NULL;
    size_t size = 0;
    char *copy = NULL;
    int fd = -1;
    struct stat sb;
    if ((st = open_regular("mapping", path, &fd, &sb))) return st;
    if ((uintmax_t)sb.st_size > SIZE_MAX) {
        st = tg_status_new(TG_ERR_UNSUPPORTED, "mapping %s: file too large for this machine",
                           path);
        goto fail;
    }
    size = (size_t)sb.st_size;
    copy = tg_strdup(path);
    if (!copy) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "mapping %s: out of memory", path);
        goto fail;
    }
    if (size > 0) {
        bool fault = io_fault_now() && io_kind == TG_IO_FAULT_EIO;
        data = fault ? MAP_FAILED : mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (fault) errno = EIO;
        if (data == MAP_FAILED) {
            data = NULL;
            st = tg_status_new(errno == ENOMEM ? TG_ERR_NO_MEMORY : TG_ERR_IO,
                               "mapping %s (%zu bytes): %s", path, size, strerror(errno));
            goto fail;
        }
    }
    close(fd);
    out_map->data = data;
    out_map->size = size;
    out_map->path = copy;
    out_map->guard = data ? guard_add(data, size, path) : 0;
    return NULL;

fail:
    tg_free(copy);
    close(fd);
    return st;
}

void tg_file_unmap(tg_file_map *map) {
    if (!map) return;
    guard_remove(map->guard);
    map->guard = 0;
    if (map->data) munmap((void *)map->data, map->size);
    tg_free(map->path);
    map->data = NULL;
    map->size = 0;
    map->path = NULL;
}

/* "64 MiB" for the limit in messages. */
static void size_str(char *buf, size_t n, size_t bytes) {
    if (bytes >= ((size_t)1 << 20) && bytes % ((size_t)1 << 20) == 0)
        snprintf(buf, n, "%zu MiB", bytes >> 20);
    else
        snprintf(buf, n, "%zu bytes", bytes);
}

static tg_status too_large(const char *path, size_t max_size) {
    char lim[32];
    size_str(lim, sizeof lim, max_size);
    return tg_status_new(TG_ERR_FORMAT,
                         "reading %s: the file is over the limit of %s for a text file "
                         "(is this the right file?)",
                         path, lim);
}

tg_status tg_file_read_max(const char *path, size_t max_size, char **out_data,
                           size_t *out_size) {
    if (!path || !out_data)
        return tg_status_new(TG_ERR_INVALID_ARG, "tg_file_read: NULL argument");
    if (max_size > SIZE_MAX - 4096) max_size = SIZE_MAX - 4096;
    tg_status st = NULL;
    char *buf = NULL;
    int fd = -1;
    struct stat sb;
    if ((st = open_regular("reading", path, &fd, &sb))) return st;
    if ((uintmax_t)sb.st_size > max_size) {
        st = too_large(path, max_size);
        goto fail;
    }
    /* The size is a hint only: files in /proc report 0. */
    size_t expect = (size_t)sb.st_size;
    size_t cap = expect + 1;
    size_t len = 0;
    buf = tg_malloc(cap);
    if (!buf) goto oom;
    for (;;) {
        bool full = len + 1 >= cap;
        /* When the buffer is full (usually: exactly the size fstat gave),
         * probe into a small buffer first so that reaching the end does not
         * double a large allocation. */
        char probe[4096];
        ssize_t n = full ? read_some(fd, probe, sizeof probe)
                         : read_some(fd, buf + len, cap - 1 - len);
        if (n < 0) {
            if (errno == EINTR) continue;
            st = tg_status_new(TG_ERR_IO, "reading %s: %s", path, strerror(errno));
            goto fail;
        }
        if (n == 0) break;
        if (len + (size_t)n > max_size) {
            st = too_large(path, max_size);
            goto fail;
        }
        if (full) {
            size_t want = cap * 2 > len + (size_t)n + 1 ? cap * 2 : len + sizeof probe + 1;
            if (want > max_size + 1) want = max_size + 1;
            char *nb = tg_realloc(buf, want);
            if (!nb) goto oom;
            buf = nb;
            cap = want;
            memcpy(buf + len, probe, (size_t)n);
        }
        len += (size_t)n;
    }
    if (len < expect) {
        st = tg_status_new(TG_ERR_IO,
                           "reading %s: got %zu of its %zu bytes (did it shrink while being "
                           "read?)",
                           path, len, expect);
        goto fail;
    }
    buf[len] = '\0';
    close(fd);
    *out_data = buf;
    if (out_size) *out_size = len;
    return NULL;

oom:
    st = tg_status_new(TG_ERR_NO_MEMORY, "reading %s: out of memory", path);
fail:
    tg_free(buf);
    close(fd);
    return st;
}

tg_status tg_file_read(const char *path, char **out_data, size_t *out_size) {
    return tg_file_read_max(path, TG_FILE_READ_MAX, out_data, out_size);
}

static atomic_uint temp_counter;

/* Best effort: makes the rename durable; failure only weakens crash safety. */
static void sync_parent_dir(const char *path) {
    char *copy = tg_strdup(path);
    if (!copy) return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    tg_free(copy);
}

tg_status tg_file_write_atomic(const char *path, const void *data, size_t size) {
    if (!path || (!data && size > 0))
        return tg_status_new(TG_ERR_INVALID_ARG, "tg_file_write_atomic: NULL argument");
    tg_status st = NULL;
    int fd = -1;
    size_t tlen = strlen(path) + 64;
    char *tmp = tg_malloc(tlen);
    if (!tmp) return tg_status_new(TG_ERR_NO_MEMORY, "writing %s: out of memory", path);
    snprintf(tmp, tlen, "%s.tmp.%ld.%u", path, (long)getpid(),
             atomic_fetch_add(&temp_counter, 1));
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        st = tg_status_new(TG_ERR_IO, "writing %s: creating temporary file %s: %s", path, tmp,
                           strerror(errno));
        tg_free(tmp);
        return st;
    }
    const uint8_t *p = data;
    size_t left = size;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0) {
            if (errno == EINTR) continue;
            st = tg_status_new(TG_ERR_IO, "temporary file %s: write: %s", tmp, strerror(errno));
            goto fail;
        }
        p += n;
        left -= (size_t)n;
    }
    if (fsync(fd) != 0) {
        st = tg_status_new(TG_ERR_IO, "temporary file %s: fsync: %s", tmp, strerror(errno));
        goto fail;
    }
    int rc = close(fd);
    fd = -1;
    if (rc != 0) {
        st = tg_status_new(TG_ERR_IO, "temporary file %s: close: %s", tmp, strerror(errno));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        st = tg_status_new(TG_ERR_IO, "renaming %s into place: %s", tmp, strerror(errno));
        goto fail;
    }
    tg_free(tmp);
    sync_parent_dir(path);
    return NULL;

fail:
    if (fd >= 0) close(fd);
    unlink(tmp);
    tg_free(tmp);
    return tg_status_wrap(st, "writing %s", path);
}
