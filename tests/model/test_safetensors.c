/*
 * test_safetensors.c: the checkpoint reader opens the fixture checkpoints
 * with the right names, dtypes, shapes and bytes; the writer's files read
 * back; every kind of malformed header or shard index is refused with an
 * error that names the file and the tensor, and never crashes (this program
 * runs under ASan in the sanitizer build).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "safetensors.h"

#define TINY TEST_DATA_DIR "/tiny"

/* ---------------------------------------------------------------- helpers */

/* A file image: 8-byte length, the header as given, then data_size bytes of
 * zeros. Free with free(). */
static uint8_t *image(const char *header, size_t data_size, size_t *out_size) {
    size_t h = strlen(header);
    uint8_t *b = calloc(1, 8 + h + data_size + 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    *out_size = 8 + h + data_size;
    return b;
}

/* Opens an image built from header (data_size zero bytes of data) and expects
 * an error of `code` whose message contains both needles. */
static void expect_bad(const char *header, size_t data_size, tg_code code, const char *needle1,
                       const char *needle2) {
    size_t n;
    uint8_t *b = image(header, data_size, &n);
    st_set *set = NULL;
    tg_status st = st_open_memory(b, n, "mem.safetensors", &set);
    CHECK_MSG(st != NULL, "accepted: %s", header);
    CHECK(set == NULL);
    if (st) {
        const char *m = tg_status_message(st);
        CHECK_MSG(tg_status_code(st) == code, "code %s for %s", tg_code_name(tg_status_code(st)),
                  m);
        CHECK_MSG(strstr(m, "mem.safetensors") != NULL, "no file name in: %s", m);
        CHECK_MSG(!needle1 || strstr(m, needle1), "'%s' lacks '%s'", m, needle1);
        CHECK_MSG(!needle2 || strstr(m, needle2), "'%s' lacks '%s'", m, needle2);
        tg_status_free(st);
    }
    st_close(set);
    free(b);
}

static char tmp_root[64];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_tmp(void) { nftw(tmp_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* A fresh directory for this run's files, removed at exit. */
static const char *tmpdir(void) {
    if (!tmp_root[0]) {
        snprintf(tmp_root, sizeof tmp_root, "/tmp/ct-test-st-XXXXXX");
        if (!mkdtemp(tmp_root)) {
            perror("mkdtemp");
            exit(1);
        }
        atexit(remove_tmp);
    }
    return tmp_root;
}

static void path_in(char *buf, size_t n, const char *sub, const char *name) {
    snprintf(buf, n, "%s/%s%s%s", tmpdir(), sub, sub[0] ? "/" : "", name);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* --------------------------------------------------------------- fixtures */

static void hub_checkpoint_opens_with_names_dtypes_shapes(void) {
    st_set *set = NULL;
    CHECK_OK(st_open_file(TINY "/hub/model.safetensors", &set));
    if (!set) return;
    CHECK_MSG(st_count(set) == 156, "%d tensors", st_count(set));
    const st_tensor *t = st_find(set, "encoder.layers.0.feed_forward1.linear1.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK(t->dtype == ST_BF16);
        CHECK(t->n_dims == 2 && t->shape[0] == 256 && t->shape[1] == 64);
        CHECK(t->size == 256 * 64 * 2);
        CHECK(t->file == 0);
    }
    t = st_find(set, "transf_decoder._embedding.token_embedding.weight");
    CHECK(t && t->shape[0] == 16384 && t->shape[1] == 64 && t->dtype == ST_BF16);
    t = st_find(set, "encoder.layers.1.conv.batch_norm.num_batches_tracked");
    CHECK(t && t->dtype == ST_I64 && t->n_dims == 0 && t->size == 8);
    CHECK(st_find(set, "encoder.layers.0") == NULL);
    CHECK(st_find(set, "no.such.tensor") == NULL);
    /* Every tensor is found by its own name (the index covers all). */
    int found = 0;
    for (int i = 0; i < st_count(set); i++)
        found += st_find(set, st_at(set, i)->name) == st_at(set, i);
    CHECK(found == st_count(set));
    CHECK(st_at(set, -1) == NULL && st_at(set, st_count(set)) == NULL);
    CHECK(strstr(st_file_path(set, 0), "hub/model.safetensors") != NULL);
    st_close(set);
}

/* The hf checkpoint is the same weights in float32 under other names: the
 * bf16 values widened must equal the f32 ones exactly, which proves that the
 * data pointers land on the right bytes in both files. */
static void hf_and_hub_checkpoints_hold_the_same_numbers(void) {
    st_set *hub = NULL, *hf = NULL;
    CHECK_OK(st_open_dir(TINY "/hub", &hub));
    CHECK_OK(st_open_dir(TINY "/hf", &hf));
    if (!hub || !hf) goto done;
    CHECK_MSG(st_count(hf) == 154, "%d tensors", st_count(hf));
    const char *names[][2] = {
        {"encoder.layers.0.feed_forward1.linear1.weight",
         "model.encoder.layers.0.feed_forward1.linear1.weight"},
        {"log_softmax.mlp.layer0.bias", "log_softmax.mlp.layer0.bias"},
    };
    for (int k = 0; k < 2; k++) {
        const st_tensor *a = st_find(hub, names[k][0]), *b = st_find(hf, names[k][1]);
        CHECK_MSG(a && b, "%s / %s", names[k][0], names[k][1]);
        if (!a || !b) continue;
        CHECK(b->dtype == ST_F32 && a->dtype == ST_BF16);
        CHECK(a->n_dims == b->n_dims && a->size * 2 == b->size);
        size_t n = a->size / 2, bad = 0;
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            float f;
            memcpy(&h, a->data + 2 * i, 2);
            memcpy(&f, b->data + 4 * i, 4);
            bad += tg_bf16_to_f32(h) != f;
        }
        CHECK_MSG(bad == 0, "%zu of %zu values differ in %s", bad, n, names[k][0]);
    }
done:
    st_close(hub);
    st_close(hf);
}

static void reference_tensors_open(void) {
    st_set *set = NULL;
    CHECK_OK(st_open_file(TINY "/reference.safetensors", &set));
    if (!set) return;
    CHECK(st_count(set) == 31);
    const st_tensor *t = st_find(set, "a.features");
    CHECK(t && t->dtype == ST_F32 && t->n_dims == 3 && t->shape[0] == 1 &&
          t->shape[1] == 338 && t->shape[2] == 128);
    t = st_find(set, "a.generated");
    CHECK(t && t->dtype == ST_I32 && t->shape[1] == 34);
    if (t) {
        int32_t first;
        memcpy(&first, t->data, 4);
        CHECK(first == 13764); /* the prompt starts with "▁" */
    }
    st_close(set);
}

static void dtype_helpers(void) {
    tg_type t = TG_F32;
    CHECK_OK(st_dtype_to_tg(ST_BF16, &t));
    CHECK(t == TG_BF16);
    CHECK_OK(st_dtype_to_tg(ST_I64, &t));
    CHECK(t == TG_I64);
    CHECK_ERR(st_dtype_to_tg(ST_F64, &t), TG_ERR_UNSUPPORTED, "F64");
    CHECK(st_dtype_size(ST_BF16) == 2 && st_dtype_size(ST_F64) == 8 && st_dtype_size(ST_BOOL) == 1);
    CHECK(strcmp(st_dtype_name(ST_U8), "U8") == 0);
    CHECK(st_dtype_size((st_dtype)99) == 0);
}

/* ----------------------------------------------------------------- writer */

static void written_file_reads_back(void) {
    char path[256];
    path_in(path, sizeof path, "", "rt.safetensors");
    float f[6] = {1, 2, 3, 4, 5, 6};
    uint16_t h[3] = {0x3f80, 0x4000, 0xc040};
    int64_t scalar = -7;
    uint8_t u[5] = {1, 2, 3, 4, 5};
    int64_t s23[] = {2, 3}, s3[] = {3}, s05[] = {0, 5}, s5[] = {5};
    st_write_entry e[] = {
        {"w.f32", ST_F32, 2, s23, f},
        {"w \"quoted\"\\name", ST_BF16, 1, s3, h},
        {"scalar", ST_I64, 0, NULL, &scalar},
        {"empty", ST_F32, 2, s05, NULL},
        {"bytes", ST_U8, 1, s5, u},
    };
    CHECK_OK(st_write_file(path, e, 5));
    st_set *set = NULL;
    CHECK_OK(st_open_file(path, &set));
    if (!set) return;
    CHECK(st_count(set) == 5);
    /* Names keep the given order. */
    for (int i = 0; i < 5 && i < st_count(set); i++)
        CHECK(strcmp(st_at(set, i)->name, e[i].name) == 0);
    const st_tensor *t = st_find(set, "w.f32");
    CHECK(t && t->size == 24 && memcmp(t->data, f, 24) == 0 && t->shape[1] == 3);
    t = st_find(set, "w \"quoted\"\\name");
    CHECK(t && t->dtype == ST_BF16 && memcmp(t->data, h, 6) == 0);
    t = st_find(set, "scalar");
    CHECK(t && t->n_dims == 0 && memcmp(t->data, &scalar, 8) == 0);
    t = st_find(set, "empty");
    CHECK(t && t->size == 0 && t->shape[0] == 0 && t->shape[1] == 5);
    t = st_find(set, "bytes");
    CHECK(t && memcmp(t->data, u, 5) == 0);
    st_close(set);

    /* The header is padded so that the data starts 8-byte aligned. */
    char *raw = NULL;
    size_t n = 0;
    CHECK_OK(tg_file_read(path, &raw, &n));
    if (raw) {
        uint64_t hl = 0;
        for (int i = 7; i >= 0; i--) hl = (hl << 8) | (uint8_t)raw[i];
        CHECK((8 + hl) % 8 == 0);
        CHECK(n == 8 + hl + 24 + 6 + 8 + 0 + 5);
        tg_free(raw);
    }
    unlink(path);
}

static void writer_rejects_bad_entries(void) {
    char path[256];
    path_in(path, sizeof path, "", "bad.safetensors");
    float f[2] = {0};
    int64_t s2[] = {2}, neg[] = {-2};
    st_write_entry dup[] = {{"a", ST_F32, 1, s2, f}, {"a", ST_F32, 1, s2, f}};
    CHECK_ERR(st_write_file(path, dup, 2), TG_ERR_INVALID_ARG, "'a' given twice");
    st_write_entry negative[] = {{"n", ST_F32, 1, neg, f}};
    CHECK_ERR(st_write_file(path, negative, 1), TG_ERR_INVALID_ARG, "'n'");
    st_write_entry nodata[] = {{"x", ST_F32, 1, s2, NULL}};
    CHECK_ERR(st_write_file(path, nodata, 1), TG_ERR_INVALID_ARG, "no data");
    st_write_entry meta[] = {{"__metadata__", ST_F32, 1, s2, f}};
    CHECK_ERR(st_write_file(path, meta, 1), TG_ERR_INVALID_ARG, "__metadata__");
    /* An empty file is valid and opens with no tensors. */
    CHECK_OK(st_write_file(path, NULL, 0));
    st_set *set = NULL;
    CHECK_OK(st_open_file(path, &set));
    CHECK(set && st_count(set) == 0 && st_find(set, "a") == NULL);
    st_close(set);
    unlink(path);
}

/* ------------------------------------------------------------ bad headers */

static void short_and_truncated_files_are_refused(void) {
    st_set *set = NULL;
    uint8_t b[8] = {2, 0, 0, 0, 0, 0, 0, 0};
    CHECK_ERR(st_open_memory(b, 7, "mem.safetensors", &set), TG_ERR_FORMAT, "too short");
    CHECK_ERR(st_open_memory(b, 0, "mem.safetensors", &set), TG_ERR_FORMAT, "mem.safetensors");
    CHECK_ERR(st_open_memory(NULL, 0, "mem.safetensors", &set), TG_ERR_FORMAT, "too short");
    /* Length 2 but no header bytes follow. */
    CHECK_ERR(st_open_memory(b, 8, "mem.safetensors", &set), TG_ERR_FORMAT, "past the end");
    /* A length with the top bit set must not wrap around. */
    uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    CHECK_ERR(st_open_memory(huge, 16, "mem.safetensors", &set), TG_ERR_FORMAT, "past the end");
    CHECK(set == NULL);

    /* A real checkpoint cut short on disk: the last tensor's bytes are gone. */
    char *raw = NULL;
    size_t n = 0;
    CHECK_OK(tg_file_read(TINY "/hub/model.safetensors", &raw, &n));
    if (!raw) return;
    char path[256];
    path_in(path, sizeof path, "", "cut.safetensors");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fwrite(raw, 1, n - 100, f);
        fclose(f);
        tg_status st = st_open_file(path, &set);
        CHECK(st != NULL);
        if (st) {
            CHECK(strstr(tg_status_message(st), "cut.safetensors") != NULL);
            CHECK(strstr(tg_status_message(st), "truncated") != NULL);
            CHECK(strstr(tg_status_message(st), "tensor '") != NULL);
        }
        tg_status_free(st);
        /* Cut inside the header. */
        f = fopen(path, "wb");
        fwrite(raw, 1, 1000, f);
        fclose(f);
        CHECK_ERR(st_open_file(path, &set), TG_ERR_FORMAT, "header length");
        unlink(path);
    }
    tg_free(raw);
    CHECK_ERR(st_open_file(TINY "/no/such.safetensors", &set), TG_ERR_NOT_FOUND, "such");
}

static void malformed_headers_are_refused(void) {
    expect_bad("{\"a\":", 0, TG_ERR_FORMAT, "JSON", NULL);
    expect_bad("not json at all", 0, TG_ERR_FORMAT, "JSON", NULL);
    expect_bad("[1,2,3]", 0, TG_ERR_FORMAT, "not an object", NULL);
    expect_bad("\"x\"", 0, TG_ERR_FORMAT, "not an object", NULL);
    expect_bad("{\"t\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
               TG_ERR_FORMAT, "unknown dtype 'F8_E4M3'", "'t'");
    expect_bad("{\"t\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, TG_ERR_FORMAT,
               "dtype", "'t'");
    expect_bad("{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, TG_ERR_FORMAT, "dtype", "'t'");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24,
               TG_ERR_FORMAT, "need 24 bytes", "'t'");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
               TG_ERR_FORMAT, "past the end", "'t'");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
               TG_ERR_FORMAT, "backwards", "'t'");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
               TG_ERR_FORMAT, "shape dimension 0", "'t'");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", 8,
               TG_ERR_FORMAT, "shape dimension", "'t'");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8,
               TG_ERR_FORMAT, "shape", "'t'");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
               4, TG_ERR_FORMAT, "9 dimensions", "'t'");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8,
               TG_ERR_FORMAT, "data_offsets", "'t'");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8,
               TG_ERR_FORMAT, "data_offsets", "'t'");
    expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,1e300]}}", 8,
               TG_ERR_FORMAT, "data_offsets", "'t'");
    /* Element counts whose byte size overflows 64 bits. */
    expect_bad("{\"t\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,16],"
               "\"data_offsets\":[0,8]}}",
               8, TG_ERR_FORMAT, "'t'", NULL);
    expect_bad("{\"t\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
               "\"data_offsets\":[0,0]}}",
               8, TG_ERR_FORMAT, "'t'", NULL);
    expect_bad("{\"t\":[1,2]}", 0, TG_ERR_FORMAT, "not a JSON object", "'t'");
    expect_bad("{\"\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4,
               TG_ERR_FORMAT, "empty name", NULL);
    expect_bad("{\"__metadata__\":{\"format\":1}}", 0, TG_ERR_FORMAT, "__metadata__", "format");
    expect_bad("{\"__metadata__\":[]}", 0, TG_ERR_FORMAT, "__metadata__", NULL);
}

static void overlaps_and_duplicates_are_refused(void) {
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               12, TG_ERR_FORMAT, "overlap", "'a' and 'b'");
    /* Listed in reverse order of offsets, and one contained in the other. */
    expect_bad("{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]},"
               "\"a\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]}}",
               16, TG_ERR_FORMAT, "overlap", NULL);
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
               16, TG_ERR_FORMAT, "'a' appears twice", NULL);
}

static void valid_edge_cases_are_accepted(void) {
    /* Metadata of strings, empty tensors sharing an offset, a gap, a scalar,
     * trailing spaces in the header. */
    size_t n;
    uint8_t *b = image("{\"__metadata__\":{\"format\":\"pt\"},"
                       "\"e1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                       "\"e2\":{\"dtype\":\"BF16\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
                       "\"s\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]},"
                       "\"g\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[8,10]}}     ",
                       10, &n);
    st_set *set = NULL;
    CHECK_OK(st_open_memory(b, n, "mem.safetensors", &set));
    CHECK(set && st_count(set) == 4);
    CHECK(set && st_find(set, "__metadata__") == NULL);
    const st_tensor *t = set ? st_find(set, "e2") : NULL;
    CHECK(t && t->size == 0 && t->n_dims == 2 && t->shape[1] == 0);
    t = set ? st_find(set, "g") : NULL;
    CHECK(t && t->data == b + n - 2 && t->size == 2);
    st_close(set);
    free(b);
}

/* Every allocation failure on the way gives NO_MEMORY or success, and leaks
 * nothing (ASan's leak checker runs at exit in the sanitizer build). */
static void allocation_failures_are_clean(void) {
    size_t n;
    uint8_t *b = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                       12, &n);
    int ok = 0;
    for (long k = 0; k < 40; k++) {
        st_set *set = NULL;
        tg_alloc_fail_after(k);
        tg_status st = st_open_memory(b, n, "mem.safetensors", &set);
        tg_alloc_fail_after(-1);
        if (st) {
            CHECK_MSG(tg_status_code(st) == TG_ERR_NO_MEMORY, "k=%ld: %s", k,
                      tg_status_message(st));
            CHECK(set == NULL);
        } else {
            ok++;
            CHECK(st_count(set) == 2 && st_find(set, "b") != NULL);
        }
        tg_status_free(st);
        st_close(set);
    }
    CHECK(ok > 0);
    free(b);
}

/* ----------------------------------------------------------------- shards */

static void make_shards(const char *sub) {
    char dir[256], p[256];
    path_in(dir, sizeof dir, "", sub);
    mkdir(dir, 0755);
    float a[2] = {1, 2}, b[3] = {3, 4, 5};
    int64_t s2[] = {2}, s3[] = {3};
    st_write_entry e1[] = {{"x.a", ST_F32, 1, s2, a}};
    st_write_entry e2[] = {{"x.b", ST_F32, 1, s3, b}, {"x.c", ST_F32, 1, s2, a}};
    path_in(p, sizeof p, sub, "model-00001-of-00002.safetensors");
    CHECK_OK(st_write_file(p, e1, 1));
    path_in(p, sizeof p, sub, "model-00002-of-00002.safetensors");
    CHECK_OK(st_write_file(p, e2, 2));
}

static void sharded_checkpoint_opens(void) {
    char p[256];
    make_shards("sharded");
    path_in(p, sizeof p, "sharded", "model.safetensors.index.json");
    write_text(p, "{\"metadata\":{\"total_size\":28},\"weight_map\":{"
                  "\"x.a\":\"model-00001-of-00002.safetensors\","
                  "\"x.b\":\"model-00002-of-00002.safetensors\","
                  "\"x.c\":\"model-00002-of-00002.safetensors\"}}");
    path_in(p, sizeof p, "", "sharded");
    st_set *set = NULL;
    CHECK_OK(st_open_dir(p, &set));
    if (!set) return;
    CHECK(st_count(set) == 3);
    const st_tensor *a = st_find(set, "x.a"), *b = st_find(set, "x.b");
    CHECK(a && b && a->file != b->file);
    if (a && b) {
        CHECK(strstr(st_file_path(set, a->file), "00001") != NULL);
        CHECK(strstr(st_file_path(set, b->file), "00002") != NULL);
        float v[3];
        memcpy(v, b->data, 12);
        CHECK(v[0] == 3 && v[2] == 5);
    }
    st_close(set);
}

static void bad_shard_indexes_are_refused(void) {
    char p[256], d[256];
    make_shards("badidx");
    path_in(p, sizeof p, "badidx", "model.safetensors.index.json");
    path_in(d, sizeof d, "", "badidx");
    st_set *set = NULL;

    write_text(p, "{\"weight_map\":{\"x.a\":\"model-00001-of-00002.safetensors\","
                  "\"x.z\":\"model-00003-of-00003.safetensors\"}}");
    tg_status st = st_open_dir(d, &set);
    CHECK(st && tg_status_code(st) == TG_ERR_NOT_FOUND);
    if (st) {
        const char *m = tg_status_message(st);
        CHECK_MSG(strstr(m, "model.safetensors.index.json") && strstr(m, "model-00003-of-00003") &&
                      strstr(m, "missing"),
                  "%s", m);
    }
    tg_status_free(st);

    write_text(p, "{\"weight_map\":{\"x.a\":\"model-00001-of-00002.safetensors\","
                  "\"x.q\":\"model-00002-of-00002.safetensors\"}}");
    CHECK_ERR(st_open_dir(d, &set), TG_ERR_FORMAT, "'x.q' is not in its shard");
    write_text(p, "{\"weight_map\":{\"x.a\":\"model-00002-of-00002.safetensors\","
                  "\"x.b\":\"model-00002-of-00002.safetensors\"}}");
    CHECK_ERR(st_open_dir(d, &set), TG_ERR_FORMAT, "'x.a' is not in its shard");
    write_text(p, "{\"weight_map\":{\"x.a\":\"model-00001-of-00002.safetensors\","
                  "\"x.b\":\"model-00001-of-00002.safetensors\","
                  "\"x.c\":\"model-00002-of-00002.safetensors\"}}");
    CHECK_ERR(st_open_dir(d, &set), TG_ERR_FORMAT, "listed in model-00001");
    write_text(p, "{\"weight_map\":{\"x.a\":\"../sharded/model-00001-of-00002.safetensors\"}}");
    CHECK_ERR(st_open_dir(d, &set), TG_ERR_FORMAT, "leaves the model directory");
    write_text(p, "{\"weight_map\":{\"x.a\":\"/etc/passwd\"}}");
    CHECK_ERR(st_open_dir(d, &set), TG_ERR_FORMAT, "leaves the model directory");
    write_text(p, "{\"weight_map\":{\"x.a\":3}}");
    CHECK_ERR(st_open_dir(d, &set), TG_ERR_FORMAT, "'x.a' is not a string");
    write_text(p, "{\"weight_map\":{}}");
    CHECK_ERR(st_open_dir(d, &set), TG_ERR_FORMAT, "empty");
    write_text(p, "{\"metadata\":{}}");
    CHECK_ERR(st_open_dir(d, &set), TG_ERR_FORMAT, "weight_map");
    write_text(p, "{\"weight_map\":");
    CHECK_ERR(st_open_dir(d, &set), TG_ERR_FORMAT, "index.json");
    /* The same tensor in two shards. */
    char s3[256];
    path_in(s3, sizeof s3, "badidx", "extra.safetensors");
    float a[2] = {0};
    int64_t s2[] = {2};
    st_write_entry e[] = {{"x.a", ST_F32, 1, s2, a}};
    CHECK_OK(st_write_file(s3, e, 1));
    write_text(p, "{\"weight_map\":{\"x.a\":\"model-00001-of-00002.safetensors\","
                  "\"y\":\"extra.safetensors\"}}");
    CHECK_ERR(st_open_dir(d, &set), TG_ERR_FORMAT, "in both");
    CHECK(set == NULL);

    char empty[256];
    path_in(empty, sizeof empty, "", "emptydir");
    mkdir(empty, 0755);
    CHECK_ERR(st_open_dir(empty, &set), TG_ERR_NOT_FOUND, "model.safetensors");
}

TEST_MAIN(T(hub_checkpoint_opens_with_names_dtypes_shapes),
          T(hf_and_hub_checkpoints_hold_the_same_numbers), T(reference_tensors_open),
          T(dtype_helpers), T(written_file_reads_back), T(writer_rejects_bad_entries),
          T(short_and_truncated_files_are_refused), T(malformed_headers_are_refused),
          T(overlaps_and_duplicates_are_refused), T(valid_edge_cases_are_accepted),
          T(allocation_failures_are_clean), T(sharded_checkpoint_opens),
          T(bad_shard_indexes_are_refused))
