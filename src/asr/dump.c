/*
 * dump.c: ct_dump_file, the public way to write a safetensors file of named
 * tensors (cohere_transcribe.h), so that programs (the CLI's --dump-tensors)
 * need not reach into the model layer's safetensors writer.
 *
 * It only collects copies and hands them to st_write_file at commit, which
 * validates names and shapes and writes through a temporary file and an
 * atomic rename. Not here: reading dumps back (tests use safetensors.h), or
 * appending to an existing file.
 */
#include <string.h>

#include "base.h"
#include "cohere_transcribe.h"
#include "safetensors.h"

typedef struct dump_tensor {
    char *name;
    st_dtype dtype;
    int n_dims;
    int64_t shape[ST_MAX_DIMS];
    void *data;
} dump_tensor;

struct ct_dump_file {
    char *path;
    dump_tensor *t;
    int n, cap;
};

ct_status ct_dump_file_open(const char *path, ct_dump_file **out_file) {
    if (!path || !out_file)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_dump_file_open: NULL argument");
    ct_dump_file *f = tg_calloc(1, sizeof *f);
    if (f) f->path = tg_strdup(path);
    if (!f || !f->path) {
        tg_free(f);
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", path);
    }
    *out_file = f;
    return NULL;
}

static bool dtype_of(tg_type type, st_dtype *out_dtype) {
    switch (type) {
    case TG_F32: *out_dtype = ST_F32; return true;
    case TG_F16: *out_dtype = ST_F16; return true;
    case TG_BF16: *out_dtype = ST_BF16; return true;
    case TG_I32: *out_dtype = ST_I32; return true;
    case TG_I64: *out_dtype = ST_I64; return true;
    default: return false;
    }
}

ct_status ct_dump_file_add(ct_dump_file *f, const char *name, tg_type type, int n_dims,
                           const int64_t *shape, const void *data) {
    if (!f || !name)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_dump_file_add: NULL argument");
    st_dtype dtype;
    if (!dtype_of(type, &dtype))
        return tg_status_new(TG_ERR_UNSUPPORTED, "%s: tensor '%s': type %s cannot be dumped",
                             f->path, name, tg_type_name(type));
    if (n_dims < 0 || n_dims > ST_MAX_DIMS || (n_dims > 0 && !shape))
        return tg_status_new(TG_ERR_INVALID_ARG, "%s: tensor '%s': bad dimensions", f->path,
                             name);
    size_t bytes = st_dtype_size(dtype);
    for (int d = 0; d < n_dims; d++) {
        if (shape[d] < 0 || (shape[d] > 0 && bytes > SIZE_MAX / (uint64_t)shape[d]))
            return tg_status_new(TG_ERR_INVALID_ARG, "%s: tensor '%s': bad dimension %d",
                                 f->path, name, d);
        bytes *= (size_t)shape[d];
    }
    if (bytes > 0 && !data)
        return tg_status_new(TG_ERR_INVALID_ARG, "%s: tensor '%s' has no data", f->path, name);
    if (!tg_grow((void **)&f->t, &f->cap, f->n + 1, sizeof *f->t))
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", f->path);
    dump_tensor *t = &f->t[f->n];
    memset(t, 0, sizeof *t);
    t->name = tg_strdup(name);
    t->data = tg_malloc(bytes ? bytes : 1);
    if (!t->name || !t->data) {
        tg_free(t->name);
        tg_free(t->data);
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: tensor '%s': out of memory", f->path, name);
    }
    if (bytes) memcpy(t->data, data, bytes);
    t->dtype = dtype;
    t->n_dims = n_dims;
    for (int d = 0; d < n_dims; d++) t->shape[d] = shape[d];
    f->n++;
    return NULL;
}

ct_status ct_dump_file_commit(ct_dump_file *f) {
    if (!f) return tg_status_new(TG_ERR_INVALID_ARG, "ct_dump_file_commit: NULL argument");
    st_write_entry *ent = tg_calloc((size_t)(f->n ? f->n : 1), sizeof *ent);
    if (!ent) return tg_status_new(TG_ERR_NO_MEMORY, "writing %s: out of memory", f->path);
    for (int i = 0; i < f->n; i++)
        ent[i] = (st_write_entry){f->t[i].name, f->t[i].dtype, f->t[i].n_dims, f->t[i].shape,
                                  f->t[i].data};
    tg_status st = st_write_file(f->path, ent, f->n);
    tg_free(ent);
    return st;
}

void ct_dump_file_close(ct_dump_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) {
        tg_free(f->t[i].name);
        tg_free(f->t[i].data);
    }
    tg_free(f->t);
    tg_free(f->path);
    tg_free(f);
}
