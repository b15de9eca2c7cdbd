/*
 * test_dump.c: ct_dump_file, the public safetensors writer of --dump-tensors:
 * what is added reads back with its names, order, types, shapes and bytes;
 * the caller's buffers may be freed after add; nothing reaches the path
 * before commit or when commit fails; bad types, dimensions and duplicate
 * names are refused with the tensor named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "cohere_transcribe.h"
#include "safetensors.h"

static char dir[64];
static const char *const files[3] = {"a.safetensors", "b.safetensors", "c.safetensors"};

static void remove_dir(void) {
    char p[128];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* A path in this run's own directory, removed at exit with what is left. */
static void path_of(char *buf, size_t n, const char *name) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/ct-test-dump-XXXXXX");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            exit(1);
        }
        atexit(remove_dir);
    }
    snprintf(buf, n, "%s/%s", dir, name);
}

static void added_tensors_read_back_in_order(void) {
    char path[128];
    path_of(path, sizeof path, files[0]);
    ct_dump_file *f = NULL;
    CHECK_OK(ct_dump_file_open(path, &f));
    if (!f) return;
    float *x = tg_malloc(6 * sizeof *x);
    for (int i = 0; i < 6; i++) x[i] = (float)i + 0.5f;
    const int64_t sx[3] = {1, 2, 3}, sg[2] = {1, 4};
    const int32_t g[4] = {7, 8, 9, 3};
    CHECK_OK(ct_dump_file_add(f, "features", TG_F32, 3, sx, x));
    tg_free(x); /* copied by add */
    CHECK_OK(ct_dump_file_add(f, "generated", TG_I32, 2, sg, g));
    CHECK(access(path, F_OK) != 0); /* nothing written before commit */
    CHECK_OK(ct_dump_file_commit(f));
    ct_dump_file_close(f);

    st_set *set = NULL;
    CHECK_OK(st_open_file(path, &set));
    if (!set) return;
    CHECK(st_count(set) == 2);
    const st_tensor *t = st_at(set, 0);
    CHECK(!strcmp(t->name, "features") && t->dtype == ST_F32 && t->n_dims == 3 &&
          t->shape[0] == 1 && t->shape[1] == 2 && t->shape[2] == 3 && t->size == 24);
    CHECK(((const float *)(const void *)t->data)[5] == 5.5f);
    t = st_at(set, 1);
    CHECK(!strcmp(t->name, "generated") && t->dtype == ST_I32 && t->size == 16 &&
          !memcmp(t->data, g, sizeof g));
    st_close(set);
    unlink(path);
}

static void bad_tensors_are_refused_and_nothing_is_written(void) {
    char path[128];
    path_of(path, sizeof path, files[1]);
    ct_dump_file *f = NULL;
    CHECK_OK(ct_dump_file_open(path, &f));
    if (!f) return;
    const int64_t s2[1] = {2}, neg[1] = {-1};
    const float v[2] = {1, 2};
    CHECK_ERR(ct_dump_file_add(f, "q", TG_TYPE_COUNT, 1, s2, v), TG_ERR_UNSUPPORTED, "'q'");
    CHECK_ERR(ct_dump_file_add(f, "n", TG_F32, 1, neg, v), TG_ERR_INVALID_ARG, "'n'");
    CHECK_ERR(ct_dump_file_add(f, "d", TG_F32, 9, s2, v), TG_ERR_INVALID_ARG, "'d'");
    CHECK_ERR(ct_dump_file_add(f, "e", TG_F32, 1, s2, NULL), TG_ERR_INVALID_ARG, "no data");
    CHECK_OK(ct_dump_file_add(f, "a", TG_F32, 1, s2, v));
    CHECK_OK(ct_dump_file_add(f, "a", TG_F32, 1, s2, v));
    CHECK_ERR(ct_dump_file_commit(f), TG_ERR_INVALID_ARG, "'a' given twice");
    CHECK(access(path, F_OK) != 0);
    ct_dump_file_close(f);
    ct_dump_file_close(NULL);
}

static void a_dump_closed_without_commit_writes_nothing(void) {
    char path[128];
    path_of(path, sizeof path, files[2]);
    ct_dump_file *f = NULL;
    CHECK_OK(ct_dump_file_open(path, &f));
    const int64_t s1[1] = {1};
    const float v[1] = {3};
    CHECK_OK(ct_dump_file_add(f, "x", TG_F32, 1, s1, v));
    ct_dump_file_close(f);
    CHECK(access(path, F_OK) != 0);
}

TEST_MAIN(T(added_tensors_read_back_in_order), T(bad_tensors_are_refused_and_nothing_is_written),
          T(a_dump_closed_without_commit_writes_nothing))
