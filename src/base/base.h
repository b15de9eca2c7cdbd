/*
 * base.h: the bottom layer (internal): logging, allocation, threads, files,
 * hashing and JSON. Everything above uses these instead of libc directly so
 * that allocation failures can be injected in tests and every message goes
 * through one logger.
 *
 * The status type itself is public (include/tg_status.h, below the tensor
 * API, so base needs nothing above it); its implementation is status.c.
 */
#ifndef TG_BASE_H
#define TG_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tg_status.h"

/* ---------------------------------------------------------------- logging */

typedef enum tg_log_level {
    TG_LOG_DEBUG = 0,
    TG_LOG_INFO = 1,
    TG_LOG_WARN = 2,
    TG_LOG_ERROR = 3,
    TG_LOG_NONE = 4,
} tg_log_level;

/* The level comes from the environment variable CT_LOG (debug, info, warn,
 * error, none; default warn), read once on first use. */
tg_log_level tg_log_get_level(void);
void tg_log_set_level(tg_log_level level);
bool tg_log_enabled(tg_log_level level);
/* Writes "[level] message\n" to stderr when level is enabled. Thread-safe. */
void tg_log(tg_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tg_logv(tg_log_level level, const char *fmt, va_list ap);
/* Parses a level name as CT_LOG spells it (case-insensitive; "warning" is
 * accepted for warn). Returns false, leaving *out_level alone, otherwise. */
bool tg_log_parse_level(const char *text, tg_log_level *out_level);
/* "debug", "info", "warn", "error", "none"; static storage. */
const char *tg_log_level_name(tg_log_level level);

/* Milliseconds on the monotonic clock (an arbitrary origin): for intervals. */
double tg_clock_now_ms(void);

#define TG_DEBUG(...) tg_log(TG_LOG_DEBUG, __VA_ARGS__)
#define TG_INFO(...) tg_log(TG_LOG_INFO, __VA_ARGS__)
#define TG_WARN(...) tg_log(TG_LOG_WARN, __VA_ARGS__)
#define TG_ERROR(...) tg_log(TG_LOG_ERROR, __VA_ARGS__)

/* ------------------------------------------------------------- allocation */

/* All heap memory of the project goes through these. NULL on failure (or on
 * an injected failure). tg_free accepts NULL. */
void *tg_malloc(size_t size);
void *tg_calloc(size_t n, size_t size);
void *tg_realloc(void *p, size_t size);
void tg_free(void *p);
char *tg_strdup(const char *s);
/* Aligned to `align` (a power of two >= sizeof(void*)); free with
 * tg_aligned_free. */
void *tg_aligned_alloc(size_t align, size_t size);
void tg_aligned_free(void *p);

/* Test hook: the next n allocations succeed, the one after fails, and so on
 * until reset with n < 0. Not thread-safe; tests only. */
void tg_alloc_fail_after(long n);
/* Test hook: while on, status records cannot be allocated, so tg_status_new
 * returns the static out-of-memory status. Not thread-safe; tests only. */
void tg_status_fail_alloc(bool on);

/* A growable array helper: ensures *cap >= need for an array of elem-sized
 * items at *p, growing geometrically. Returns false when out of memory (the
 * array is unchanged). */
bool tg_grow(void **p, int *cap, int need, size_t elem);

/* ---------------------------------------------------------------- threads */

typedef struct tg_threadpool tg_threadpool;

/* The work of one parallel region: called once on each of nth threads with
 * ith in [0, nth). */
typedef void (*tg_task_fn)(void *arg, int ith, int nth);

/* n_threads <= 0 means one per online core. The calling thread counts as
 * thread 0, so n_threads - 1 workers are started. Free with
 * tg_threadpool_free. */
tg_status tg_threadpool_new(int n_threads, tg_threadpool **out_pool);
void tg_threadpool_free(tg_threadpool *pool);
int tg_threadpool_size(const tg_threadpool *pool);
/* Runs fn(arg, ith, nth) on every thread of the pool, the caller included,
 * and returns when all are done. Regions of one pool must not nest and must
 * not be entered from two threads at once. */
void tg_threadpool_run(tg_threadpool *pool, tg_task_fn fn, void *arg);
/* Number of online cores (at least 1). */
int tg_cpu_count(void);

/* ------------------------------------------------------------------ files */

/* A read-only mapping of a whole file. */
/* What a stat mode that is not a regular file is, for messages ("a FIFO",
 * "a directory", ...; "not a regular file" for any other). Static text. */
const char *tg_file_kind(mode_t mode);

typedef struct tg_file_map {
    const uint8_t *data; /* NULL for an empty file */
    size_t size;
    char *path;          /* owned copy, for messages */
    int guard;           /* its slot in the SIGBUS guard + 1; 0: none */
} tg_file_map;

/* Maps path read-only; the error names the path. Only regular files are
 * accepted: a FIFO, device, socket or directory is refused without blocking
 * (it is never opened for reading in blocking mode). Unmap with
 * tg_file_unmap. */
tg_status tg_file_map_open(const char *path, tg_file_map *out_map);
void tg_file_unmap(tg_file_map *map);
/* Mappings are guarded against SIGBUS (file.c says how): when the file
 * shrinks under a mapping, or its storage fails, a read of the lost part sees
 * zeros instead of killing the process, and this returns a TG_ERR_IO error
 * naming the file from then on. Readers of a mapping call it after a phase of
 * reading (a load, a graph compute) and discard what they computed when it
 * fails. NULL while the mapping is whole. Thread-safe. */
tg_status tg_file_map_check(const tg_file_map *map);
/* The most tg_file_read reads: whole reads are for configs and vocabularies
 * (the real tokenizer is under 2 MB); anything larger is not such a file. */
#define TG_FILE_READ_MAX ((size_t)64 << 20)
/* Reads a whole regular file (at most TG_FILE_READ_MAX bytes) into a new
 * NUL-terminated buffer; free with tg_free. Non-regular files are refused as
 * by tg_file_map_open; a larger file is a TG_ERR_FORMAT error naming the
 * file and the limit. */
tg_status tg_file_read(const char *path, char **out_data, size_t *out_size);
/* The same with a limit of max_size bytes. */
tg_status tg_file_read_max(const char *path, size_t max_size, char **out_data,
                           size_t *out_size);
/* Test hook (SQLite-style I/O fault injection): the next n file operations
 * (each read(2) of tg_file_read, each mmap of tg_file_map_open) succeed and
 * the one after faults, once: TG_IO_FAULT_EIO makes it fail with EIO,
 * TG_IO_FAULT_SHORT makes a read return fewer bytes than asked (which
 * callers must absorb) and leaves mappings alone. n < 0 turns it off.
 * tg_file_io_count says how many operations ran since the last call with
 * n >= 0 (or since start). Not for production; single-threaded tests. */
typedef enum tg_io_fault { TG_IO_FAULT_EIO, TG_IO_FAULT_SHORT } tg_io_fault;
void tg_file_fail_io_after(long n, tg_io_fault kind);
long tg_file_io_count(void);
/* Writes data to path through a temporary file and an atomic rename. */
tg_status tg_file_write_atomic(const char *path, const void *data, size_t size);

/* ---------------------------------------------------------------- hashing */

/* A fast 64-bit non-cryptographic hash (cache keys, graph signatures). */
uint64_t tg_hash64(const void *data, size_t size, uint64_t seed);
/* Folds v into h (for hashing structures field by field). */
uint64_t tg_hash_combine(uint64_t h, uint64_t v);

/* ------------------------------------------------------------------- JSON */

/* JSON goes through cJSON (Debian's libcjson); these add errors that name
 * the source and the key. */
struct cJSON;
/* Parses text (size bytes, need not be NUL-terminated). `what` names the
 * source in errors ("config.json"). Free with tg_json_free. */
tg_status tg_json_parse(const char *text, size_t size, const char *what,
                        struct cJSON **out_json);
void tg_json_free(struct cJSON *json);

#endif /* TG_BASE_H */
