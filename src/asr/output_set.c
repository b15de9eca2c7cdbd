/*
 * output_set.c: the files of one source made visible together
 * (ct_output_set_* in cohere_transcribe.h).
 *
 * POSIX has no rename of several files at once, so completeness is carried
 * by a manifest written last: each file is first written in full to a
 * temporary name in the target folder (same file system, so the rename is
 * atomic) and synced; the commit removes the old manifest, renames the
 * files into place and then renames the new manifest in. A crash at any
 * point leaves every visible file whole (old or new) and, until the very
 * last rename, no manifest: the set reads as incomplete and a later
 * `--existing skip` redoes it instead of trusting a mixed set.
 *
 * An existing target that is not a regular file (a FIFO, a device, a
 * folder, a symbolic link) is refused rather than replaced.
 *
 * Not here: choosing the folder and stem (the CLI), rendering.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "cohere_transcribe.h"

#define MAX_FILES 8
#define MANIFEST_MAGIC "cohere-transcribe output set 1"
#define MANIFEST_MAX (64 * 1024)

typedef struct set_file {
    char ext[16];
    char *tmp;       /* the temporary file, while it exists */
    size_t size;
    uint64_t hash;
} set_file;

struct ct_output_set {
    char *dir, *stem;
    set_file f[MAX_FILES];
    int n;
    char *manifest_tmp;
    bool ended;
};

static atomic_uint counter;

void ct_output_manifest_name(const char *stem, char *buf, size_t size) {
    snprintf(buf, size, ".%s.ct-manifest", stem);
}

static char *join3(const char *dir, const char *name, const char *suffix) {
    size_t n = strlen(dir) + strlen(name) + strlen(suffix) + 2;
    char *p = tg_malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", dir, name, suffix);
    return p;
}

ct_status ct_output_set_begin(const char *dir, const char *stem, ct_output_set **out_set) {
    if (!dir || !stem || !stem[0] || strchr(stem, '/') || !out_set)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_output_set_begin: bad arguments");
    *out_set = NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return tg_status_new(TG_ERR_IO, "output folder %s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return tg_status_new(TG_ERR_IO, "output folder %s: not a directory", dir);
    ct_output_set *s = tg_calloc(1, sizeof *s);
    if (!s || !(s->dir = tg_strdup(dir)) || !(s->stem = tg_strdup(stem))) {
        ct_output_set_free(s);
        return tg_status_new(TG_ERR_NO_MEMORY, "output set: out of memory");
    }
    *out_set = s;
    return NULL;
}

/* Writes data to a new temporary file for `final` (a name in s->dir);
 * returns its path in *out_tmp. */
static tg_status write_temp(const ct_output_set *s, const char *final, const void *data,
                            size_t n, char **out_tmp) {
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".ct-tmp.%ld.%u", (long)getpid(), atomic_fetch_add(&counter, 1));
    char hidden[1024];
    snprintf(hidden, sizeof hidden, ".%s", final);
    char *tmp = join3(s->dir, hidden, suffix);
    if (!tmp) return tg_status_new(TG_ERR_NO_MEMORY, "output set: out of memory");
    tg_status st = NULL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        st = tg_status_new(TG_ERR_IO, "writing %s/%s: creating %s: %s", s->dir, final, tmp,
                           strerror(errno));
        tg_free(tmp);
        return st;
    }
    const char *p = data;
    while (n > 0 && !st) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            st = tg_status_new(TG_ERR_IO, "writing %s/%s: %s", s->dir, final,
                               k < 0 ? strerror(errno) : "short write");
        else {
            p += k;
            n -= (size_t)k;
        }
    }
    if (!st && fsync(fd) != 0)
        st = tg_status_new(TG_ERR_IO, "writing %s/%s: fsync: %s", s->dir, final, strerror(errno));
    if (close(fd) != 0 && !st)
        st = tg_status_new(TG_ERR_IO, "writing %s/%s: close: %s", s->dir, final, strerror(errno));
    if (st) {
        unlink(tmp);
        tg_free(tmp);
        return st;
    }
    *out_tmp = tmp;
    return NULL;
}

/* An existing target must be a regular file to be replaced. */
static tg_status check_target(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return NULL; /* absent: fine */
    if (S_ISREG(sb.st_mode)) return NULL;
    return tg_status_new(TG_ERR_IO, "%s exists and is %s; not replacing it", path,
                         S_ISLNK(sb.st_mode)   ? "a symbolic link"
                         : S_ISDIR(sb.st_mode) ? "a directory"
                         : S_ISFIFO(sb.st_mode) ? "a FIFO"
                                                : "a device or socket");
}

ct_status ct_output_set_add(ct_output_set *s, const char *ext, const void *data, size_t n) {
    if (!s || s->ended || !ext || !ext[0] || strlen(ext) >= sizeof s->f[0].ext || (!data && n))
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_output_set_add: bad arguments");
    if (s->n == MAX_FILES)
        return tg_status_new(TG_ERR_INVALID_ARG, "an output set holds at most %d files", MAX_FILES);
    char name[1024];
    snprintf(name, sizeof name, "%s.%s", s->stem, ext);
    char *final = join3(s->dir, name, "");
    if (!final) return tg_status_new(TG_ERR_NO_MEMORY, "output set: out of memory");
    tg_status st = check_target(final);
    tg_free(final);
    if (st) return st;
    set_file *f = &s->f[s->n];
    if ((st = write_temp(s, name, data ? data : "", n, &f->tmp))) return st;
    snprintf(f->ext, sizeof f->ext, "%s", ext);
    f->size = n;
    f->hash = tg_hash64(data ? data : "", n, 0);
    s->n++;
    return NULL;
}

ct_status ct_output_set_commit(ct_output_set *s) {
    if (!s || s->ended) return tg_status_new(TG_ERR_INVALID_ARG, "ct_output_set_commit: bad arguments");
    char mname[1024], line[1200];
    ct_output_manifest_name(s->stem, mname, sizeof mname);
    size_t cap = 128 + (size_t)s->n * sizeof line, len = 0;
    char *text = tg_malloc(cap);
    if (!text) return tg_status_new(TG_ERR_NO_MEMORY, "output set: out of memory");
    len += (size_t)snprintf(text, cap, "%s\n", MANIFEST_MAGIC);
    for (int i = 0; i < s->n; i++) {
        snprintf(line, sizeof line, "%zu %016llx %s.%s\n", s->f[i].size,
                 (unsigned long long)s->f[i].hash, s->stem, s->f[i].ext);
        len += (size_t)snprintf(text + len, cap - len, "%s", line);
    }
    tg_status st = write_temp(s, mname, text, len, &s->manifest_tmp);
    tg_free(text);
    if (st) return st;
    char *mpath = join3(s->dir, mname, "");
    if (!mpath) return tg_status_new(TG_ERR_NO_MEMORY, "output set: out of memory");
    if ((st = check_target(mpath))) goto done;
    if (unlink(mpath) != 0 && errno != ENOENT) {
        st = tg_status_new(TG_ERR_IO, "removing the old manifest %s: %s", mpath, strerror(errno));
        goto done;
    }
    for (int i = 0; i < s->n; i++) {
        char name[1024];
        snprintf(name, sizeof name, "%s.%s", s->stem, s->f[i].ext);
        char *final = join3(s->dir, name, "");
        if (!final) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "output set: out of memory");
            goto done;
        }
        if (!(st = check_target(final)) && rename(s->f[i].tmp, final) != 0)
            st = tg_status_new(TG_ERR_IO, "renaming %s to %s: %s", s->f[i].tmp, final,
                               strerror(errno));
        tg_free(final);
        if (st) goto done;
        tg_free(s->f[i].tmp);
        s->f[i].tmp = NULL;
    }
    /* the files' names must be durable before the manifest vouches for them */
    int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    if (rename(s->manifest_tmp, mpath) != 0) {
        st = tg_status_new(TG_ERR_IO, "renaming the manifest into %s: %s", mpath, strerror(errno));
        goto done;
    }
    tg_free(s->manifest_tmp);
    s->manifest_tmp = NULL;
    s->ended = true;
done:
    tg_free(mpath);
    if (st) ct_output_set_abandon(s);
    return st;
}

void ct_output_set_abandon(ct_output_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        if (s->f[i].tmp) unlink(s->f[i].tmp);
        tg_free(s->f[i].tmp);
        s->f[i].tmp = NULL;
    }
    if (s->manifest_tmp) unlink(s->manifest_tmp);
    tg_free(s->manifest_tmp);
    s->manifest_tmp = NULL;
    s->ended = true;
}

void ct_output_set_free(ct_output_set *s) {
    if (!s) return;
    ct_output_set_abandon(s);
    tg_free(s->dir);
    tg_free(s->stem);
    tg_free(s);
}

/* A file that cannot be read makes the set incomplete; no message needed. */
static bool read_quiet(const char *path, char **out, size_t *size) {
    tg_status st = tg_file_read(path, out, size);
    tg_status_free(st);
    return st == NULL;
}

bool ct_output_set_complete(const char *dir, const char *stem, const char *const *exts, int n) {
    if (!dir || !stem || (!exts && n > 0)) return false;
    char mname[1024];
    ct_output_manifest_name(stem, mname, sizeof mname);
    char *mpath = join3(dir, mname, "");
    if (!mpath) return false;
    struct stat sb;
    char *text = NULL;
    size_t size = 0;
    bool ok = lstat(mpath, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size < MANIFEST_MAX &&
              read_quiet(mpath, &text, &size);
    tg_free(mpath);
    if (!ok) return false;
    ok = !strncmp(text, MANIFEST_MAGIC "\n", strlen(MANIFEST_MAGIC) + 1);
    for (int i = 0; ok && i < n; i++) {
        char name[1024];
        snprintf(name, sizeof name, "%s.%s", stem, exts[i]);
        bool found = false;
        for (char *l = strchr(text, '\n'); l && !found; l = strchr(l + 1, '\n')) {
            size_t fsize;
            unsigned long long hash;
            int off = 0;
            if (sscanf(l + 1, "%zu %llx %n", &fsize, &hash, &off) != 2 || !off) continue;
            const char *nm = l + 1 + off;
            size_t nl = strcspn(nm, "\n");
            if (nl != strlen(name) || strncmp(nm, name, nl)) continue;
            char *path = join3(dir, name, "");
            char *data = NULL;
            size_t dsize = 0;
            if (path && lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
                (size_t)sb.st_size == fsize && read_quiet(path, &data, &dsize))
                found = dsize == fsize && tg_hash64(data, dsize, 0) == hash;
            tg_free(data);
            tg_free(path);
        }
        ok = found;
    }
    tg_free(text);
    return ok;
}
