/*
 * safetensors.c: a validating reader (and a small writer) of safetensors
 * checkpoints, read in place through read-only mappings.
 *
 * The format: an 8-byte little-endian header length N, N bytes of JSON
 * mapping each tensor name to {dtype, shape, data_offsets: [begin, end]}
 * (offsets relative to the byte after the header), an optional
 * "__metadata__" object of strings, then the data. Every number of the header
 * is checked before a pointer is formed from it: offsets inside the data,
 * byte sizes equal to shape x dtype size (overflow-checked), no two tensors
 * sharing bytes, no two entries with one name. Errors name the file and the
 * tensor so that a broken download is told apart from a wrong model.
 *
 * It deliberately does not convert dtypes, copy data or check alignment:
 * tensors point into the mapping (or, for st_open_memory, into the caller's
 * buffer, which must outlive the set) and callers read them with memcpy or
 * convert them while uploading; a file whose offsets are odd gives unaligned
 * pointers. Gaps between tensors are accepted (the format does not need them,
 * but they are harmless).
 */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A header this large is a corrupt length, not a checkpoint: the real model's
 * header is about 200 KB for ~2,150 tensors. */
#define ST_MAX_HEADER (100u * 1024u * 1024u)
/* Largest integer a JSON double holds exactly. */
#define ST_MAX_JSON_INT 9007199254740992.0

struct st_set {
    tg_file_map *maps; /* one per file; data NULL for st_open_memory */
    char **paths;      /* one per file, for messages */
    int n_files;
    st_tensor *tensors;
    int n_tensors;
    int cap_tensors;
    const st_tensor **by_name; /* sorted by name, for st_find; built last */
};

static const struct {
    const char *name;
    size_t size;
} dtype_info[] = {
    [ST_F32] = {"F32", 4},  [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2},
    [ST_F64] = {"F64", 8},  [ST_I64] = {"I64", 8}, [ST_I32] = {"I32", 4},
    [ST_I16] = {"I16", 2},  [ST_I8] = {"I8", 1},   [ST_U8] = {"U8", 1},
    [ST_BOOL] = {"BOOL", 1},
};
#define ST_N_DTYPES ((int)(sizeof dtype_info / sizeof dtype_info[0]))

const char *st_dtype_name(st_dtype t) {
    if ((int)t < 0 || (int)t >= ST_N_DTYPES) return "?";
    return dtype_info[t].name;
}

size_t st_dtype_size(st_dtype t) {
    if ((int)t < 0 || (int)t >= ST_N_DTYPES) return 0;
    return dtype_info[t].size;
}

tg_status st_dtype_to_tg(st_dtype t, tg_type *out_type) {
    switch (t) {
    case ST_F32: *out_type = TG_F32; return NULL;
    case ST_F16: *out_type = TG_F16; return NULL;
    case ST_BF16: *out_type = TG_BF16; return NULL;
    case ST_I32: *out_type = TG_I32; return NULL;
    case ST_I64: *out_type = TG_I64; return NULL;
    default:
        return tg_status_new(TG_ERR_UNSUPPORTED, "dtype %s has no runtime type",
                             st_dtype_name(t));
    }
}

static int dtype_from_name(const char *s, st_dtype *out) {
    for (int i = 0; i < ST_N_DTYPES; i++) {
        if (strcmp(s, dtype_info[i].name) == 0) {
            *out = (st_dtype)i;
            return 1;
        }
    }
    return 0;
}

/* ----------------------------------------------------------------- set */

static st_set *set_new(void) { return tg_calloc(1, sizeof(st_set)); }

void st_close(st_set *set) {
    if (!set) return;
    for (int i = 0; i < set->n_files; i++) {
        if (set->maps[i].data || set->maps[i].path) tg_file_unmap(&set->maps[i]);
        tg_free(set->paths[i]);
    }
    tg_free(set->maps);
    tg_free(set->paths);
    for (int i = 0; i < set->n_tensors; i++) tg_free(set->tensors[i].name);
    tg_free(set->tensors);
    tg_free(set->by_name);
    tg_free(set);
}

/* Adds a file slot (mapping filled by the caller); returns its index or -1. */
static int set_add_file(st_set *set, const char *path) {
    int n = set->n_files;
    tg_file_map *maps = tg_realloc(set->maps, (size_t)(n + 1) * sizeof *maps);
    if (!maps) return -1;
    set->maps = maps;
    char **paths = tg_realloc(set->paths, (size_t)(n + 1) * sizeof *paths);
    if (!paths) return -1;
    set->paths = paths;
    set->paths[n] = tg_strdup(path);
    if (!set->paths[n]) return -1;
    memset(&set->maps[n], 0, sizeof set->maps[n]);
    set->n_files = n + 1;
    return n;
}

int st_count(const st_set *set) { return set ? set->n_tensors : 0; }

const st_tensor *st_at(const st_set *set, int i) {
    if (!set || i < 0 || i >= set->n_tensors) return NULL;
    return &set->tensors[i];
}

tg_status st_check(const st_set *set) {
    if (!set) return NULL;
    for (int i = 0; i < set->n_files; i++) {
        tg_status st = tg_file_map_check(&set->maps[i]);
        if (st) return st;
    }
    return NULL;
}

const char *st_file_path(const st_set *set, int file) {
    if (!set || file < 0 || file >= set->n_files) return "?";
    return set->paths[file];
}

const st_tensor *st_find(const st_set *set, const char *name) {
    if (!set || !name || !set->by_name) return NULL;
    int lo = 0, hi = set->n_tensors - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const st_tensor *t = set->by_name[mid];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

/* Both sorts order arrays of pointers, so the comparisons need no context
 * (and opening two checkpoints on two threads is safe). */
static int cmp_by_name(const void *a, const void *b) {
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

static int cmp_by_offset(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->data != y->data) return x->data < y->data ? -1 : 1;
    return x->size < y->size ? -1 : (x->size > y->size);
}

/* Builds the name index and rejects duplicate names across the whole set. */
static tg_status set_index(st_set *set) {
    tg_free(set->by_name);
    set->by_name = tg_malloc((size_t)(set->n_tensors ? set->n_tensors : 1) * sizeof(void *));
    if (!set->by_name) return tg_status_new(TG_ERR_NO_MEMORY, "indexing tensors: out of memory");
    for (int i = 0; i < set->n_tensors; i++) set->by_name[i] = &set->tensors[i];
    qsort(set->by_name, (size_t)set->n_tensors, sizeof(void *), cmp_by_name);
    for (int i = 1; i < set->n_tensors; i++) {
        const st_tensor *a = set->by_name[i - 1], *b = set->by_name[i];
        if (strcmp(a->name, b->name) == 0) {
            if (a->file == b->file)
                return tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s' appears twice",
                                     set->paths[a->file], a->name);
            return tg_status_new(TG_ERR_FORMAT, "tensor '%s' is in both %s and %s", a->name,
                                 set->paths[a->file], set->paths[b->file]);
        }
    }
    return NULL;
}

/* -------------------------------------------------------------- header */

/* Reads a JSON number that must be a non-negative integer below 2^53. */
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > ST_MAX_JSON_INT || d != floor(d)) return 0;
    *out = (uint64_t)d;
    return 1;
}

static tg_status parse_entry(const cJSON *e, const char *what, const uint8_t *data,
                             uint64_t data_size, int file, st_tensor *t) {
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s': entry is not a JSON object",
                             what, name);
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(jd))
        return tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s': missing or non-string dtype",
                             what, name);
    if (!dtype_from_name(jd->valuestring, &t->dtype))
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: tensor '%s': unknown dtype '%s' (known: F32 F16 BF16 F64 "
                             "I64 I32 I16 I8 U8 BOOL)",
                             what, name, jd->valuestring);
    if (!cJSON_IsArray(js))
        return tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s': missing or non-array shape",
                             what, name);
    int n_dims = cJSON_GetArraySize(js);
    if (n_dims > ST_MAX_DIMS)
        return tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s': %d dimensions (at most %d)",
                             what, name, n_dims, ST_MAX_DIMS);
    t->n_dims = n_dims;
    uint64_t elems = 1;
    int zero = 0, overflow = 0, d = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, js) {
        uint64_t n;
        if (!json_uint(v, &n))
            return tg_status_new(TG_ERR_FORMAT,
                                 "%s: tensor '%s': shape dimension %d is not a non-negative "
                                 "integer",
                                 what, name, d);
        t->shape[d++] = (int64_t)n;
        if (n == 0) zero = 1;
        else if (elems > UINT64_MAX / n) overflow = 1;
        else elems *= n;
    }
    if (zero) elems = 0, overflow = 0; /* a zero dimension empties any shape */
    uint64_t esize = dtype_info[t->dtype].size;
    if (overflow || elems > UINT64_MAX / esize)
        return tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s': shape too large", what, name);
    uint64_t bytes = elems * esize;

    uint64_t begin, end;
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 ||
        !json_uint(cJSON_GetArrayItem(jo, 0), &begin) ||
        !json_uint(cJSON_GetArrayItem(jo, 1), &end))
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets must be [begin, end] with "
                             "non-negative integers",
                             what, name);
    if (begin > end)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets [%llu, %llu] run backwards", what,
                             name, (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets [%llu, %llu] past the end of the "
                             "data (%llu bytes; truncated file?)",
                             what, name, (unsigned long long)begin, (unsigned long long)end,
                             (unsigned long long)data_size);
    if (end - begin != bytes)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: tensor '%s': shape and dtype %s need %llu bytes but "
                             "data_offsets [%llu, %llu] hold %llu",
                             what, name, dtype_info[t->dtype].name, (unsigned long long)bytes,
                             (unsigned long long)begin, (unsigned long long)end,
                             (unsigned long long)(end - begin));
    t->data = data ? data + begin : NULL;
    t->size = (size_t)bytes;
    t->file = file;
    return NULL;
}

/* Parses the header of one file image and appends its tensors to set. */
static tg_status parse_file(st_set *set, int file, const uint8_t *buf, size_t size) {
    const char *what = set->paths[file];
    tg_status st = NULL;
    cJSON *json = NULL;
    int first = set->n_tensors;
    const st_tensor **order = NULL;

    if (!buf || size < 8)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: %zu bytes, too short for a safetensors file (needs an "
                             "8-byte header length)",
                             what, buf ? size : 0);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > size - 8)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: header length %llu runs past the end of the file (%zu "
                             "bytes; truncated or not a safetensors file)",
                             what, (unsigned long long)hlen, size);
    if (hlen > ST_MAX_HEADER)
        return tg_status_new(TG_ERR_FORMAT, "%s: header length %llu is implausibly large",
                             what, (unsigned long long)hlen);
    if (hlen < 2)
        return tg_status_new(TG_ERR_FORMAT, "%s: header of %llu bytes cannot hold a JSON "
                             "object", what, (unsigned long long)hlen);
    st = tg_json_parse((const char *)buf + 8, (size_t)hlen, what, &json);
    if (st) return tg_status_wrap(st, "safetensors header");
    if (!cJSON_IsObject(json)) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: header is JSON but not an object", what);
        goto fail;
    }
    const uint8_t *data = buf + 8 + hlen;
    uint64_t data_size = size - 8 - hlen;

    const cJSON *e;
    cJSON_ArrayForEach(e, json) {
        const char *name = e->string;
        if (!name) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: header entry without a name", what);
            goto fail;
        }
        if (strcmp(name, "__metadata__") == 0) {
            if (!cJSON_IsObject(e)) {
                st = tg_status_new(TG_ERR_FORMAT, "%s: __metadata__ is not an object", what);
                goto fail;
            }
            const cJSON *m;
            cJSON_ArrayForEach(m, e) {
                if (!cJSON_IsString(m)) {
                    st = tg_status_new(TG_ERR_FORMAT,
                                       "%s: __metadata__ value '%s' is not a string", what,
                                       m->string ? m->string : "?");
                    goto fail;
                }
            }
            continue;
        }
        if (!name[0]) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: tensor with an empty name", what);
            goto fail;
        }
        if (!tg_grow((void **)&set->tensors, &set->cap_tensors, set->n_tensors + 1,
                     sizeof(st_tensor))) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "%s: tensor table: out of memory", what);
            goto fail;
        }
        st_tensor *t = &set->tensors[set->n_tensors];
        memset(t, 0, sizeof *t);
        st = parse_entry(e, what, data, data_size, file, t);
        if (st) goto fail;
        t->name = tg_strdup(name);
        if (!t->name) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "%s: tensor '%s': out of memory", what, name);
            goto fail;
        }
        set->n_tensors++;
    }

    /* No two non-empty tensors of this file may share a byte. */
    int n = set->n_tensors - first;
    if (n > 1) {
        order = tg_malloc((size_t)n * sizeof(void *));
        if (!order) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "%s: overlap check: out of memory", what);
            goto fail;
        }
        for (int i = 0; i < n; i++) order[i] = &set->tensors[first + i];
        qsort(order, (size_t)n, sizeof(void *), cmp_by_offset);
        const st_tensor *prev = NULL;
        for (int i = 0; i < n; i++) {
            const st_tensor *t = order[i];
            if (t->size == 0) continue;
            if (prev && t->data < prev->data + prev->size) {
                st = tg_status_new(TG_ERR_FORMAT,
                                   "%s: tensors '%s' and '%s' overlap (bytes [%td, %td) and "
                                   "[%td, %td))",
                                   what, prev->name, t->name, prev->data - data,
                                   prev->data + prev->size - data, t->data - data,
                                   t->data + t->size - data);
                goto fail;
            }
            prev = t;
        }
    }
    tg_free(order);
    tg_json_free(json);
    return NULL;

fail:
    for (int i = first; i < set->n_tensors; i++) tg_free(set->tensors[i].name);
    set->n_tensors = first;
    tg_free(order);
    tg_json_free(json);
    return st;
}

/* ---------------------------------------------------------------- open */

tg_status st_open_memory(const uint8_t *buf, size_t size, const char *what,
                         st_set **out_set) {
    st_set *set = set_new();
    if (!set) return tg_status_new(TG_ERR_NO_MEMORY, "opening %s: out of memory", what);
    tg_status st = NULL;
    int f = set_add_file(set, what ? what : "(memory)");
    if (f < 0) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "opening %s: out of memory", what);
        goto fail;
    }
    st = parse_file(set, f, buf, size);
    if (st) goto fail;
    st = set_index(set);
    if (st) goto fail;
    *out_set = set;
    return NULL;
fail:
    st_close(set);
    return st;
}

/* Maps path as a new file of set and parses it. */
static tg_status add_mapped(st_set *set, const char *path) {
    int f = set_add_file(set, path);
    if (f < 0) return tg_status_new(TG_ERR_NO_MEMORY, "opening %s: out of memory", path);
    tg_status st = tg_file_map_open(path, &set->maps[f]);
    if (st) return st;
    return parse_file(set, f, set->maps[f].data, set->maps[f].size);
}

tg_status st_open_file(const char *path, st_set **out_set) {
    st_set *set = set_new();
    if (!set) return tg_status_new(TG_ERR_NO_MEMORY, "opening %s: out of memory", path);
    tg_status st = add_mapped(set, path);
    if (st) goto fail;
    st = set_index(set);
    if (st) goto fail;
    *out_set = set;
    return NULL;
fail:
    st_close(set);
    return st;
}

static char *join_path(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = tg_malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* A shard name from an index must stay inside the model directory. */
static int shard_name_ok(const char *s) {
    if (!s[0] || s[0] == '/' || strchr(s, '\\')) return 0;
    if (strcmp(s, "..") == 0 || strncmp(s, "../", 3) == 0 || strstr(s, "/../") ||
        (strlen(s) >= 3 && strcmp(s + strlen(s) - 3, "/..") == 0))
        return 0;
    return 1;
}

static tg_status open_index(const char *dir, const char *index_path, st_set **out_set) {
    tg_status st = NULL;
    char *text = NULL;
    size_t text_size = 0;
    cJSON *json = NULL;
    char *shard_path = NULL;
    st_set *set = set_new();
    if (!set) return tg_status_new(TG_ERR_NO_MEMORY, "opening %s: out of memory", index_path);

    st = tg_file_read(index_path, &text, &text_size);
    if (st) goto fail;
    st = tg_json_parse(text, text_size, index_path, &json);
    if (st) goto fail;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(json, "weight_map");
    if (!cJSON_IsObject(map)) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: no \"weight_map\" object", index_path);
        goto fail;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, map) {
        if (!cJSON_IsString(e)) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: weight_map entry '%s' is not a string",
                               index_path, e->string ? e->string : "?");
            goto fail;
        }
        if (!shard_name_ok(e->valuestring)) {
            st = tg_status_new(TG_ERR_FORMAT,
                               "%s: tensor '%s': shard name '%s' leaves the model directory",
                               index_path, e->string, e->valuestring);
            goto fail;
        }
        shard_path = join_path(dir, e->valuestring);
        if (!shard_path) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", index_path);
            goto fail;
        }
        int known = 0;
        for (int i = 0; i < set->n_files && !known; i++)
            known = strcmp(set->paths[i], shard_path) == 0;
        if (!known) {
            if (!file_exists(shard_path)) {
                st = tg_status_new(TG_ERR_NOT_FOUND,
                                   "%s names shard %s (for tensor '%s'), which is missing",
                                   index_path, e->valuestring, e->string);
                goto fail;
            }
            st = add_mapped(set, shard_path);
            if (st) {
                st = tg_status_wrap(st, "shard of %s", index_path);
                goto fail;
            }
        }
        tg_free(shard_path);
        shard_path = NULL;
    }
    if (set->n_files == 0) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: weight_map is empty", index_path);
        goto fail;
    }
    st = set_index(set);
    if (st) goto fail;
    /* Every tensor the index names must be in the shard it names. */
    cJSON_ArrayForEach(e, map) {
        const st_tensor *t = st_find(set, e->string);
        shard_path = join_path(dir, e->valuestring);
        if (!shard_path) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", index_path);
            goto fail;
        }
        if (!t) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s' is not in its shard %s",
                               index_path, e->string, e->valuestring);
            goto fail;
        }
        if (strcmp(set->paths[t->file], shard_path) != 0) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s' is listed in %s but found in %s",
                               index_path, e->string, e->valuestring, set->paths[t->file]);
            goto fail;
        }
        tg_free(shard_path);
        shard_path = NULL;
    }
    tg_free(text);
    tg_json_free(json);
    *out_set = set;
    return NULL;
fail:
    tg_free(shard_path);
    tg_free(text);
    tg_json_free(json);
    st_close(set);
    return st;
}

tg_status st_open_dir(const char *dir, st_set **out_set) {
    tg_status st = NULL;
    char *single = join_path(dir, "model.safetensors");
    char *index = join_path(dir, "model.safetensors.index.json");
    if (!single || !index) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "opening %s: out of memory", dir);
        goto done;
    }
    if (file_exists(single)) {
        st = st_open_file(single, out_set);
    } else if (file_exists(index)) {
        st = open_index(dir, index, out_set);
    } else {
        st = tg_status_new(TG_ERR_NOT_FOUND,
                           "%s: neither model.safetensors nor model.safetensors.index.json "
                           "found; is this a model directory?",
                           dir);
    }
done:
    tg_free(single);
    tg_free(index);
    return st;
}

/* --------------------------------------------------------------- write */

tg_status st_write_file(const char *path, const st_write_entry *entries, int n) {
    tg_status st = NULL;
    cJSON *root = NULL;
    char *header = NULL;
    uint8_t *buf = NULL;
    size_t *sizes = NULL;

    if (n < 0 || (n > 0 && !entries))
        return tg_status_new(TG_ERR_INVALID_ARG, "writing %s: bad entry list", path);
    sizes = tg_calloc((size_t)(n ? n : 1), sizeof *sizes);
    root = cJSON_CreateObject();
    if (!sizes || !root) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "writing %s: out of memory", path);
        goto fail;
    }
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const st_write_entry *w = &entries[i];
        const char *name = w->name ? w->name : "(null)";
        if (!w->name || !w->name[0] || strcmp(w->name, "__metadata__") == 0 ||
            (int)w->dtype < 0 || (int)w->dtype >= ST_N_DTYPES || w->n_dims < 0 ||
            w->n_dims > ST_MAX_DIMS || (w->n_dims > 0 && !w->shape)) {
            st = tg_status_new(TG_ERR_INVALID_ARG, "writing %s: tensor '%s': bad name, dtype "
                               "or dimensions", path, name);
            goto fail;
        }
        if (cJSON_GetObjectItemCaseSensitive(root, w->name)) {
            st = tg_status_new(TG_ERR_INVALID_ARG, "writing %s: tensor '%s' given twice", path,
                               name);
            goto fail;
        }
        uint64_t elems = 1;
        for (int d = 0; d < w->n_dims; d++) {
            uint64_t dim = (uint64_t)w->shape[d];
            if (w->shape[d] < 0 || (dim > 0 && elems > UINT64_MAX / dim)) {
                st = tg_status_new(TG_ERR_INVALID_ARG,
                                   "writing %s: tensor '%s': bad dimension %d", path, name, d);
                goto fail;
            }
            elems *= (uint64_t)w->shape[d];
        }
        uint64_t bytes = elems * dtype_info[w->dtype].size;
        if (bytes > 0 && !w->data) {
            st = tg_status_new(TG_ERR_INVALID_ARG, "writing %s: tensor '%s' has no data",
                               path, name);
            goto fail;
        }
        if (bytes > (uint64_t)SIZE_MAX - offset || offset + bytes > ST_MAX_JSON_INT) {
            st = tg_status_new(TG_ERR_INVALID_ARG, "writing %s: tensor '%s': too large", path,
                               name);
            goto fail;
        }
        sizes[i] = (size_t)bytes;
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToObject(root, w->name, e)) {
            cJSON_Delete(e);
            st = tg_status_new(TG_ERR_NO_MEMORY, "writing %s: out of memory", path);
            goto fail;
        }
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        int ok = cJSON_AddStringToObject(e, "dtype", dtype_info[w->dtype].name) && shape && offs;
        for (int d = 0; ok && d < w->n_dims; d++)
            ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)w->shape[d]));
        ok = ok && cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        ok = ok && cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + bytes)));
        if (!ok) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "writing %s: out of memory", path);
            goto fail;
        }
        offset += bytes;
    }
    header = cJSON_PrintUnformatted(root);
    if (!header) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "writing %s: out of memory", path);
        goto fail;
    }
    size_t hlen = strlen(header);
    size_t padded = (hlen + 7) & ~(size_t)7; /* data starts 8-byte aligned */
    if (offset > SIZE_MAX - 8 - padded) {
        st = tg_status_new(TG_ERR_INVALID_ARG, "writing %s: too large", path);
        goto fail;
    }
    size_t total = 8 + padded + (size_t)offset;
    buf = tg_malloc(total);
    if (!buf) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "writing %s (%zu bytes): out of memory", path, total);
        goto fail;
    }
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, header, hlen);
    memset(buf + 8 + hlen, ' ', padded - hlen);
    size_t pos = 8 + padded;
    for (int i = 0; i < n; i++) {
        if (sizes[i]) memcpy(buf + pos, entries[i].data, sizes[i]);
        pos += sizes[i];
    }
    st = tg_file_write_atomic(path, buf, total);
fail:
    tg_free(buf);
    if (header) cJSON_free(header);
    cJSON_Delete(root);
    tg_free(sizes);
    return st;
}
