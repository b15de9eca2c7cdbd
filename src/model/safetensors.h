/*
 * safetensors.h: a validating reader of safetensors files, read in place
 * through a read-only mapping (internal).
 *
 * A checkpoint is one file or a set of shards listed by
 * model.safetensors.index.json; st_open_dir hides the difference. The header
 * is validated before anything is used: its size, the JSON, known dtypes,
 * shapes whose byte size matches the offsets, offsets inside the file and no
 * two tensors overlapping. Every error names the file and, where there is one,
 * the tensor.
 */
#ifndef CT_SAFETENSORS_H
#define CT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "tg.h"

#define ST_MAX_DIMS 8

typedef enum st_dtype {
    ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL,
} st_dtype;

typedef struct st_tensor {
    char *name;
    st_dtype dtype;
    int n_dims;
    int64_t shape[ST_MAX_DIMS];  /* PyTorch order: shape[0] is the outermost */
    const uint8_t *data;         /* inside the mapping of its file */
    size_t size;                 /* bytes */
    int file;                    /* index into the set's files */
} st_tensor;

typedef struct st_set st_set;

/* Opens one .safetensors file. Free with st_close. */
tg_status st_open_file(const char *path, st_set **out_set);
/* Opens a model directory: model.safetensors, or the shards named by
 * model.safetensors.index.json. Free with st_close. */
tg_status st_open_dir(const char *dir, st_set **out_set);
/* Parses and validates a header from memory (the fuzz target's entry point):
 * buf is the whole file image; `what` names it in errors. */
tg_status st_open_memory(const uint8_t *buf, size_t size, const char *what,
                         st_set **out_set);
void st_close(st_set *set);

int st_count(const st_set *set);
const st_tensor *st_at(const st_set *set, int i);
/* NULL when absent. Borrowed from the set. */
const st_tensor *st_find(const st_set *set, const char *name);
/* NULL while every mapped file of the set is whole; an error naming the file
 * once a read of its mapping faulted (truncated while in use; see
 * tg_file_map_check). Cheap: callers check after every compute. */
tg_status st_check(const st_set *set);
/* Path of file i, for messages. */
const char *st_file_path(const st_set *set, int file);
const char *st_dtype_name(st_dtype t);
size_t st_dtype_size(st_dtype t);
/* The matching runtime type; TG_ERR_UNSUPPORTED for dtypes with none. */
tg_status st_dtype_to_tg(st_dtype t, tg_type *out_type);

/* Writes tensors to a new safetensors file (used by --dump-tensors and
 * tests). Data is copied; names are kept in the given order. */
typedef struct st_write_entry {
    const char *name;
    st_dtype dtype;
    int n_dims;
    const int64_t *shape;
    const void *data;
} st_write_entry;
tg_status st_write_file(const char *path, const st_write_entry *entries, int n);

#endif
