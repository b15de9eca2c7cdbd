/*
 * dump.c: --dump-tensors. Collects the debug hook's tensors of every clip
 * and writes them as one safetensors file, each name stacked along a
 * leading batch dimension and zero-padded to the longest clip (generated
 * ids padded with the pad id, as HF pads finished rows), with the names and
 * layout of the fixtures (tests/data/tiny/README.md). The file goes through
 * ct_dump_file (a temporary file renamed into place); which paths may be
 * written at all is inputs.c's cli_output_path_ok, checked before the
 * model loads.
 */
#include <string.h>

#include "base.h"
#include "cli.h"

typedef struct dump_entry {
    int index;
    char name[48];
    tg_type type;
    int n_dims;
    int64_t shape[2];
    void *data;
} dump_entry;

struct cli_dumper {
    dump_entry *e;
    int n, cap;
    bool failed;
};

static const char *dump_names[4] = {"features", "encoder_out", "prompt_logits", "generated"};

cli_dumper *cli_dumper_new(void) { return tg_calloc(1, sizeof(cli_dumper)); }

void cli_dumper_free(cli_dumper *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) tg_free(d->e[i].data);
    tg_free(d->e);
    tg_free(d);
}

void cli_dumper_hook(void *user, int index, const char *name, tg_type type, int n_dims,
                     const int64_t *shape, const void *data) {
    cli_dumper *d = user;
    bool wanted = false;
    for (int i = 0; i < 4; i++) wanted = wanted || !strcmp(name, dump_names[i]);
    if (!wanted || d->failed || n_dims < 1 || n_dims > 2) return;
    if (!tg_grow((void **)&d->e, &d->cap, d->n + 1, sizeof(dump_entry))) {
        d->failed = true;
        return;
    }
    dump_entry *e = &d->e[d->n];
    memset(e, 0, sizeof *e);
    size_t n = 1;
    for (int i = 0; i < n_dims; i++) n *= (size_t)shape[i];
    e->data = tg_malloc(n * tg_type_size(type) + 1);
    if (!e->data) {
        d->failed = true;
        return;
    }
    memcpy(e->data, data, n * tg_type_size(type));
    e->index = index;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->type = type;
    e->n_dims = n_dims;
    e->shape[0] = shape[0];
    e->shape[1] = n_dims > 1 ? shape[1] : 1;
    d->n++;
}

ct_status cli_dumper_write(const cli_dumper *d, const char *path, int pad_id) {
    if (d->failed) return tg_status_new(TG_ERR_NO_MEMORY, "collecting tensors: out of memory");
    int n_clips = 0;
    for (int i = 0; i < d->n; i++)
        if (d->e[i].index + 1 > n_clips) n_clips = d->e[i].index + 1;
    ct_dump_file *f = NULL;
    tg_status st = ct_dump_file_open(path, &f);
    for (int k = 0; k < 4 && !st; k++) {
        int64_t max0 = 0, max1 = 0;
        int n_dims = 0;
        tg_type type = TG_F32;
        for (int i = 0; i < d->n; i++) {
            const dump_entry *e = &d->e[i];
            if (strcmp(e->name, dump_names[k])) continue;
            if (e->shape[0] > max0) max0 = e->shape[0];
            if (e->shape[1] > max1) max1 = e->shape[1];
            n_dims = e->n_dims;
            type = e->type;
        }
        if (!n_dims) continue;
        size_t es = tg_type_size(type), row = (size_t)max0 * max1;
        uint8_t *buf = tg_calloc((size_t)n_clips * row, es);
        if (!buf) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "writing %s: out of memory", path);
            break;
        }
        if (type == TG_I32)
            for (size_t j = 0; j < (size_t)n_clips * row; j++) ((int32_t *)(void *)buf)[j] = pad_id;
        for (int i = 0; i < d->n; i++) {
            const dump_entry *e = &d->e[i];
            if (strcmp(e->name, dump_names[k])) continue;
            for (int64_t r = 0; r < e->shape[0]; r++)
                memcpy(buf + ((size_t)e->index * row + (size_t)r * max1) * es,
                       (const uint8_t *)e->data + (size_t)r * e->shape[1] * es,
                       (size_t)e->shape[1] * es);
        }
        const int64_t shape[3] = {n_clips, max0, max1};
        st = ct_dump_file_add(f, dump_names[k], type, n_dims + 1, shape, buf);
        tg_free(buf);
    }
    if (!st) st = ct_dump_file_commit(f);
    ct_dump_file_close(f);
    return st;
}
