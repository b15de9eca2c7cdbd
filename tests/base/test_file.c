/*
 * test_file.c: mapping, whole reads and atomic writes, good and bad paths.
 * Works in a fresh temporary directory that it removes again.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "check.h"

static char dir[256];

static void ensure_dir(void);

static void make_dir(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tg-test-file-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mkdtemp %s failed\n", dir);
        exit(1);
    }
}

static void remove_dir(void) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* Number of entries in dir other than . and .. */
static int count_entries(void) {
    ensure_dir();
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d) closedir(d);
    return n;
}

/* Every test reaches the directory through here (or ensure_dir), so the
 * first one creates it; it is removed when the program exits. */
static void ensure_dir(void) {
    if (dir[0]) return;
    make_dir();
    atexit(remove_dir);
}

static void path_in_dir(char *out, size_t n, const char *name) {
    ensure_dir();
    snprintf(out, n, "%s/%s", dir, name);
}

static void map_of_missing_file_names_the_path(void) {
    char p[512];
    path_in_dir(p, sizeof p, "no-such-file.bin");
    tg_file_map m = {0};
    CHECK_ERR(tg_file_map_open(p, &m), TG_ERR_NOT_FOUND, p);
    CHECK(m.data == NULL && m.path == NULL); /* output untouched */
    tg_status st = tg_file_map_open(p, &m);
    CHECK(st && strstr(tg_status_message(st), "No such file"));
    tg_status_free(st);
    char *buf = NULL;
    CHECK_ERR(tg_file_read(p, &buf, NULL), TG_ERR_NOT_FOUND, p);
    CHECK(buf == NULL);
}

static void map_of_directory_is_rejected(void) {
    ensure_dir();
    tg_file_map m = {0};
    CHECK_ERR(tg_file_map_open(dir, &m), TG_ERR_INVALID_ARG, dir);
    char *buf = NULL;
    CHECK_ERR(tg_file_read(dir, &buf, NULL), TG_ERR_INVALID_ARG, dir);
}

static void empty_file_maps_to_null(void) {
    char p[512];
    path_in_dir(p, sizeof p, "empty");
    CHECK_OK(tg_file_write_atomic(p, NULL, 0));
    tg_file_map m = {0};
    CHECK_OK(tg_file_map_open(p, &m));
    CHECK(m.data == NULL);
    CHECK(m.size == 0);
    CHECK(m.path && strcmp(m.path, p) == 0);
    tg_file_unmap(&m);
    CHECK(m.path == NULL);
    tg_file_unmap(&m); /* twice is harmless */
    char *buf = NULL;
    size_t size = 99;
    CHECK_OK(tg_file_read(p, &buf, &size));
    CHECK(buf && buf[0] == '\0' && size == 0);
    tg_free(buf);
    unlink(p);
}

static void written_content_reads_back_equal(void) {
    char p[512];
    path_in_dir(p, sizeof p, "data.bin");
    int entries = count_entries();
    enum { N = 300000 }; /* bigger than any first read-buffer guess */
    unsigned char *data = tg_malloc(N);
    CHECK(data != NULL);
    if (!data) return;
    for (int i = 0; i < N; i++) data[i] = (unsigned char)(i * 131 + (i >> 8));
    CHECK_OK(tg_file_write_atomic(p, data, N));

    tg_file_map m = {0};
    CHECK_OK(tg_file_map_open(p, &m));
    CHECK(m.size == N);
    CHECK(m.data && memcmp(m.data, data, N) == 0);
    tg_file_unmap(&m);

    char *buf = NULL;
    size_t size = 0;
    CHECK_OK(tg_file_read(p, &buf, &size));
    CHECK(size == N);
    CHECK(buf && memcmp(buf, data, N) == 0 && buf[N] == '\0');
    tg_free(buf);

    /* Replacing keeps only the new content and leaves no temporary behind. */
    CHECK_OK(tg_file_write_atomic(p, "short", 5));
    CHECK_OK(tg_file_read(p, &buf, &size));
    CHECK(size == 5 && buf && strcmp(buf, "short") == 0);
    tg_free(buf);
    tg_free(data);
    CHECK(count_entries() == entries + 1);
    unlink(p);
}

static void write_into_missing_directory_fails_naming_the_path(void) {
    char p[512];
    path_in_dir(p, sizeof p, "missing-subdir/out.bin");
    int entries = count_entries();
    CHECK_ERR(tg_file_write_atomic(p, "x", 1), TG_ERR_IO, p);
    tg_status st = tg_file_write_atomic(p, "x", 1);
    CHECK(st && strstr(tg_status_message(st), "No such file or directory"));
    tg_status_free(st);
    CHECK(count_entries() == entries);
}

static void failed_rename_removes_the_temporary(void) {
    /* Renaming a file over a non-empty directory fails after the temporary
     * was written: the temporary must be gone afterwards. */
    char sub[512], inner[600];
    path_in_dir(sub, sizeof sub, "occupied");
    CHECK(mkdir(sub, 0755) == 0);
    int entries = count_entries();
    snprintf(inner, sizeof inner, "%s/keep", sub);
    CHECK_OK(tg_file_write_atomic(inner, "k", 1));
    CHECK_ERR(tg_file_write_atomic(sub, "data", 4), TG_ERR_IO, sub);
    CHECK(count_entries() == entries); /* no temporary left beside it */
    unlink(inner);
    rmdir(sub);
}

static void out_of_memory_is_reported_with_the_path(void) {
    char p[512];
    path_in_dir(p, sizeof p, "oom.txt");
    CHECK_OK(tg_file_write_atomic(p, "hello", 5));
    tg_file_map m = {0};
    tg_alloc_fail_after(0);
    tg_status st1 = tg_file_map_open(p, &m);
    char *buf = NULL;
    tg_status st2 = tg_file_read(p, &buf, NULL);
    tg_status st3 = tg_file_write_atomic(p, "x", 1);
    tg_alloc_fail_after(-1);
    CHECK_ERR(st1, TG_ERR_NO_MEMORY, p);
    CHECK_ERR(st2, TG_ERR_NO_MEMORY, p);
    CHECK_ERR(st3, TG_ERR_NO_MEMORY, p);
    CHECK(m.data == NULL && buf == NULL);
    CHECK_OK(tg_file_read(p, &buf, NULL));
    CHECK(buf && strcmp(buf, "hello") == 0); /* the failed write changed nothing */
    tg_free(buf);
    unlink(p);
}

static void null_arguments_are_errors(void) {
    tg_file_map m;
    char *buf;
    CHECK_ERR(tg_file_map_open(NULL, &m), TG_ERR_INVALID_ARG, NULL);
    CHECK_ERR(tg_file_read(NULL, &buf, NULL), TG_ERR_INVALID_ARG, NULL);
    CHECK_ERR(tg_file_write_atomic("x", NULL, 3), TG_ERR_INVALID_ARG, NULL);
    tg_file_unmap(NULL);
}

static void reads_files_that_report_size_zero(void) {
    /* /proc files have st_size 0 but content: the read loop must not trust it. */
    char *buf = NULL;
    size_t size = 0;
    CHECK_OK(tg_file_read("/proc/self/status", &buf, &size));
    CHECK(size > 0 && buf && strstr(buf, "Name:") != NULL && strlen(buf) == size);
    tg_free(buf);
}

/* A FIFO would block open(2) (no writer) or read(2) forever: both calls must
 * refuse it at once. The alarm turns a hang into a failure. */
static void fifo_is_refused_without_blocking(void) {
    char p[512];
    path_in_dir(p, sizeof p, "fifo");
    CHECK(mkfifo(p, 0600) == 0);
    alarm(10);
    char *buf = NULL;
    CHECK_ERR(tg_file_read(p, &buf, NULL), TG_ERR_INVALID_ARG, "not a regular file");
    CHECK(buf == NULL);
    tg_file_map m = {0};
    CHECK_ERR(tg_file_map_open(p, &m), TG_ERR_INVALID_ARG, p);
    CHECK(m.data == NULL && m.path == NULL);
    alarm(0);
    unlink(p);
}

/* /dev/zero never ends: refused as a device before any byte is read. */
static void device_is_refused(void) {
    alarm(10);
    char *buf = NULL;
    CHECK_ERR(tg_file_read("/dev/zero", &buf, NULL), TG_ERR_INVALID_ARG, "/dev/zero");
    CHECK(buf == NULL);
    tg_file_map m = {0};
    CHECK_ERR(tg_file_map_open("/dev/zero", &m), TG_ERR_INVALID_ARG, "not a regular file");
    alarm(0);
}

/* A whole read is bounded (64 MiB by default): a file over the limit is an
 * error naming the file and the limit, before anything is allocated. The
 * file is sparse, so the test costs no disk. */
static void oversized_text_file_is_refused(void) {
    char p[512];
    path_in_dir(p, sizeof p, "huge.json");
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(ftruncate(fd, (off_t)TG_FILE_READ_MAX + 1) == 0);
    close(fd);
    char *buf = NULL;
    tg_status st = tg_file_read(p, &buf, NULL);
    CHECK(buf == NULL);
    CHECK(st && tg_status_code(st) == TG_ERR_FORMAT);
    CHECK(st && strstr(tg_status_message(st), p) && strstr(tg_status_message(st), "64 MiB"));
    if (st) printf("  error: %s\n", tg_status_message(st));
    tg_status_free(st);
    /* exactly at a smaller explicit limit is fine, one byte over is not */
    CHECK_OK(tg_file_write_atomic(p, "12345", 5));
    CHECK_OK(tg_file_read_max(p, 5, &buf, NULL));
    tg_free(buf);
    buf = NULL;
    CHECK_ERR(tg_file_read_max(p, 4, &buf, NULL), TG_ERR_FORMAT, "limit");
    CHECK(buf == NULL);
    unlink(p);
}

/* issue 12 item 7: a mapped file truncated by someone else used to kill the
 * process with SIGBUS on the next read of a page past the new end. Now the
 * read sees zeros and tg_file_map_check reports the file. */
static void truncated_mapping_is_an_error_not_sigbus(void) {
    char p[512];
    path_in_dir(p, sizeof p, "shrinks.bin");
    enum { N = 1 << 20 };
    unsigned char *data = tg_malloc(N);
    if (!data) return;
    memset(data, 0x5a, N);
    CHECK_OK(tg_file_write_atomic(p, data, N));
    tg_free(data);
    tg_file_map m = {0};
    CHECK_OK(tg_file_map_open(p, &m));
    if (!m.data) return;
    CHECK_OK(tg_file_map_check(&m));
    CHECK(truncate(p, 4096) == 0);
    /* touch every page past the cut (each read faults; the guard answers) */
    volatile unsigned char sink = 0;
    for (size_t i = 0; i < m.size; i += 512) sink = m.data[i];
    (void)sink;
    CHECK(m.data[0] == 0x5a);         /* the first page is still the file's */
    CHECK(m.data[N - 1] == 0);        /* the lost part reads as zeros */
    tg_status st = tg_file_map_check(&m);
    CHECK(st && tg_status_code(st) == TG_ERR_IO);
    CHECK(st && strstr(tg_status_message(st), p) && strstr(tg_status_message(st), "SIGBUS"));
    if (st) printf("  error: %s\n", tg_status_message(st));
    tg_status_free(st);
    tg_file_unmap(&m);
    /* a fault outside any mapping is not ours: nothing to test without
     * dying, but a second mapping starts clean */
    CHECK_OK(tg_file_map_open(p, &m));
    CHECK_OK(tg_file_map_check(&m));
    tg_file_unmap(&m);
    unlink(p);
}

TEST_MAIN(T(map_of_missing_file_names_the_path), T(map_of_directory_is_rejected),
          T(fifo_is_refused_without_blocking), T(device_is_refused),
          T(oversized_text_file_is_refused),
          T(empty_file_maps_to_null), T(written_content_reads_back_equal),
          T(write_into_missing_directory_fails_naming_the_path),
          T(failed_rename_removes_the_temporary), T(out_of_memory_is_reported_with_the_path),
          T(null_arguments_are_errors), T(truncated_mapping_is_an_error_not_sigbus), T(reads_files_that_report_size_zero))
