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

tg_status tg_file_map_open(const char *path, tg_file_map *out_map) {
    if (!path || !out_map)
        return tg_status_new(TG_ERR_INVALID_ARG, "tg_file_map_open: NULL argument");
    tg_status st = NULL;
    void *data = NULL;
    size_t size = 0;
    char *copy = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tg_status_new(open_error_code(errno), "opening %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = tg_status_new(TG_ERR_IO, "reading %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = tg_status_new(TG_ERR_INVALID_ARG, "mapping %s: not a regular file", path);
        goto fail;
    }
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

tg_status tg_file_read(const char *path, char **out_data, size_t *out_size) {
    if (!path || !out_data)
        return tg_status_new(TG_ERR_INVALID_ARG, "tg_file_read: NULL argument");
    tg_status st = NULL;
    char *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tg_status_new(open_error_code(errno), "opening %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = tg_status_new(TG_ERR_IO, "reading %s: %s", path, strerror(errno));
        goto fail;
    }
    if (S_ISDIR(sb.st_mode)) {
        st = tg_status_new(TG_ERR_INVALID_ARG, "reading %s: is a directory", path);
        goto fail;
    }
    /* The size is a hint only: files in /proc and pipes report 0. */
    size_t cap = S_ISREG(sb.st_mode) && (uintmax_t)sb.st_size < SIZE_MAX - 1
                     ? (size_t)sb.st_size + 1 : 4096;
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
        if (full) {
            if (len > SIZE_MAX / 2 - sizeof probe) goto oom;
            size_t want = cap * 2 > len + (size_t)n + 1 ? cap * 2 : len + sizeof probe + 1;
            char *nb = tg_realloc(buf, want);
            if (!nb) goto oom;
            buf = nb;
            cap = want;
            memcpy(buf + len, probe, (size_t)n);
        }
        len += (size_t)n;
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
