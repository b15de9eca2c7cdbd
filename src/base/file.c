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
 * Not here: partial or streaming I/O, locking, Windows.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
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

static const char *kind_of(mode_t mode) {
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
                         kind_of(mode));
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
        data = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
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
    return NULL;

fail:
    tg_free(copy);
    close(fd);
    return st;
}

void tg_file_unmap(tg_file_map *map) {
    if (!map) return;
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
        ssize_t n = full ? read(fd, probe, sizeof probe) : read(fd, buf + len, cap - 1 - len);
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
