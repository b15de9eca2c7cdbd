/*
 * test_tensor.c: contexts and tensor metadata: stable pointers across chunk
 * growth, names and lookup, sizes, contiguity, and the view constructors
 * (view, reshape, permute, transpose, rel_shift): their shapes, strides,
 * offsets, where their data points once the source is placed, and their
 * refusals.
 */
#include "check.h"
#include "test_backend.h"

static void test_ctx_pointers_stable(void) {
    tg_ctx *ctx = tg_ctx_new();
    CHECK(ctx != NULL);
    tg_tensor *first = tg_new_1d(ctx, TG_F32, 3);
    tg_set_name(first, "first");
    for (int i = 0; i < 1000; i++) CHECK(tg_new_2d(ctx, TG_F16, i + 1, 2) != NULL);
    CHECK(tg_ctx_n_tensors(ctx) == 1001);
    CHECK(tg_ctx_tensor(ctx, 0) == first);
    CHECK(first->ne[0] == 3 && first->id == 0 && first->ctx == ctx);
    CHECK(tg_ctx_find(ctx, "first") == first);
    CHECK(tg_ctx_find(ctx, "absent") == NULL);
    CHECK(tg_ctx_tensor(ctx, 1001) == NULL && tg_ctx_tensor(ctx, -1) == NULL);
    CHECK(tg_ctx_tensor(ctx, 700)->ne[0] == 700 && tg_ctx_tensor(ctx, 700)->id == 700);
    CHECK_OK(tg_ctx_check(ctx));
    tg_ctx_free(ctx);
    tg_ctx_free(NULL);
}

static void test_sizes(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *t = tg_new_4d(ctx, TG_F16, 3, 4, 5, 6);
    CHECK(tg_nelements(t) == 360 && tg_nrows(t) == 120);
    CHECK(tg_nbytes(t) == 720);
    CHECK(t->nb[0] == 2 && t->nb[1] == 6 && t->nb[2] == 24 && t->nb[3] == 120);
    CHECK(tg_is_contiguous(t));
    tg_tensor *z = tg_new_2d(ctx, TG_F32, 0, 4);
    CHECK(z && tg_nelements(z) == 0 && tg_nbytes(z) == 0);
    CHECK(tg_same_shape(t, t) && !tg_same_shape(t, z));
    tg_set_name(t, "layer.%d.w", 7);
    CHECK(strcmp(t->name, "layer.7.w") == 0);
    char longname[200];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    tg_set_name(t, "%s", longname);
    CHECK(strlen(t->name) == TG_MAX_NAME - 1);
    /* bad shapes and types are recorded */
    CHECK(tg_new_2d(ctx, TG_F32, -1, 2) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "negative extent");
    tg_ctx_free(ctx);
    ctx = tg_ctx_new();
    CHECK(tg_new_1d(ctx, TG_TYPE_COUNT, 2) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "bad tensor type");
    tg_ctx_free(ctx);
    ctx = tg_ctx_new();
    CHECK(tg_new_tensor(ctx, TG_F32, 5, (int64_t[]){1, 1, 1, 1, 1}) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "n_dims 5");
    tg_ctx_free(ctx);
    ctx = tg_ctx_new();
    CHECK(tg_new_4d(ctx, TG_F32, 1 << 20, 1 << 20, 1 << 20, 2) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "too many elements");
    tg_ctx_free(ctx);
}

static void test_view_2d_and_data(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_set_name(tg_new_2d(ctx, TG_F32, 4, 3), "a");
    /* rows 1..2, columns 1..2 */
    tg_tensor *v = tg_view_2d(ctx, a, 2, 2, a->nb[1], a->nb[1] + 4);
    CHECK(v && v->op == TG_OP_VIEW && v->view_src == a && v->view_offs == 20);
    CHECK(v->nb[0] == 4 && v->nb[1] == 16 && !tg_is_contiguous(v));
    CHECK(tg_nbytes(v) == 4 + 16 + 4);
    tg_tensor *vv = tg_view_1d(ctx, v, 2, 16); /* second row of the view */
    CHECK(vv && vv->view_src == v && vv->view_offs == 16);
    CHECK(v->data == NULL);

    /* placing the source gives the views their data, through the chain */
    tg_backend *be = test_backend_new("fake", true, true, TEST_OPS_ALL);
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf));
    CHECK(a->data != NULL && a->buffer == buf);
    CHECK((char *)v->data == (char *)a->data + 20 && v->buffer == buf);
    CHECK((char *)vv->data == (char *)a->data + 36);
    float vals[12];
    for (int i = 0; i < 12; i++) vals[i] = (float)i;
    CHECK_OK(tg_tensor_set(a, vals, 0, sizeof vals));
    float got[2];
    CHECK_OK(tg_tensor_get(vv, got, 0, sizeof got));
    CHECK(got[0] == 9 && got[1] == 10); /* a[1..2, 2] */
    /* a view made after placement has its data at once */
    tg_tensor *late = tg_view_1d(ctx, a, 4, 32);
    CHECK((char *)late->data == (char *)a->data + 32);

    /* out of range */
    CHECK(tg_view_2d(ctx, a, 4, 3, a->nb[1], 4) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "beyond the 48 bytes");
    tg_buffer_free(buf);
    tg_backend_free(be);
    tg_ctx_free(ctx);
}

/* Strides so large that (ne - 1) * nb wraps around size_t must not pass the
 * bounds check as a small span: such a view would address memory far
 * outside its source. */
static void test_view_stride_overflow_refused(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_set_name(tg_new_1d(ctx, TG_F32, 4), "a");
    /* 2 * 2^63 wraps to 0: the span would look like 4 bytes */
    CHECK(tg_view_2d(ctx, a, 1, 3, (size_t)1 << 63, 0) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "view: of 'a' [4]");
    tg_ctx_free(ctx);
    ctx = tg_ctx_new();
    a = tg_new_1d(ctx, TG_F32, 4);
    CHECK(tg_view(ctx, a, 1, (int64_t[]){5}, (size_t[]){SIZE_MAX / 4 + 1}, 0) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "view");
    tg_ctx_free(ctx);
}

static void test_reshape(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_set_name(tg_new_3d(ctx, TG_F32, 6, 4, 2), "x");
    tg_tensor *r = tg_reshape_2d(ctx, a, 12, 4);
    CHECK(r && r->ne[0] == 12 && r->ne[1] == 4 && r->ne[2] == 1 && r->nb[1] == 48);
    CHECK(r->view_src == a && r->op == TG_OP_VIEW && tg_is_contiguous(r));
    CHECK(tg_reshape_4d(ctx, a, 2, 3, 4, 2) != NULL);
    CHECK(tg_reshape_3d(ctx, a, 48, 1, 1) != NULL);
    CHECK_OK(tg_ctx_check(ctx));
    CHECK(tg_reshape_2d(ctx, a, 5, 10) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "reshape: 'x' [6,4,2] has 48 elements");
    tg_ctx_free(ctx);

    ctx = tg_ctx_new();
    a = tg_set_name(tg_new_2d(ctx, TG_F32, 6, 4), "y");
    tg_tensor *t = tg_transpose(ctx, a);
    CHECK(tg_reshape_2d(ctx, t, 24, 1) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "not contiguous");
    tg_ctx_free(ctx);

    /* a new shape whose element count overflows int64 (2^32 * 2^32 wraps to
     * 0, the count of an empty source) is refused without signed overflow */
    ctx = tg_ctx_new();
    a = tg_set_name(tg_new_2d(ctx, TG_F32, 0, 4), "empty");
    CHECK(tg_reshape_2d(ctx, a, (int64_t)1 << 32, (int64_t)1 << 32) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "reshape: 'empty'");
    tg_ctx_free(ctx);
}

static void test_permute_transpose(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_4d(ctx, TG_F32, 2, 3, 5, 7);
    /* source dim i goes to position ax_i */
    tg_tensor *p = tg_permute(ctx, a, 2, 0, 1, 3);
    CHECK(p->ne[2] == 2 && p->ne[0] == 3 && p->ne[1] == 5 && p->ne[3] == 7);
    CHECK(p->nb[2] == a->nb[0] && p->nb[0] == a->nb[1] && p->nb[1] == a->nb[2]);
    CHECK(!tg_is_contiguous(p) && tg_nbytes(p) == tg_nbytes(a));
    tg_tensor *t = tg_transpose(ctx, a);
    CHECK(t->ne[0] == 3 && t->ne[1] == 2 && t->nb[0] == 8 && t->nb[1] == 4);
    tg_tensor *tt = tg_transpose(ctx, t);
    CHECK(tg_same_shape(tt, a) && tg_is_contiguous(tt));
    /* a dim of extent 1 does not break contiguity */
    tg_tensor *col = tg_new_2d(ctx, TG_F32, 5, 1);
    CHECK(tg_is_contiguous(tg_transpose(ctx, col)));
    CHECK_OK(tg_ctx_check(ctx));
    CHECK(tg_permute(ctx, a, 0, 0, 1, 2) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "not a permutation");
    tg_ctx_free(ctx);
    ctx = tg_ctx_new();
    a = tg_new_1d(ctx, TG_F32, 4);
    CHECK(tg_permute(ctx, a, 0, 1, 2, 4) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "permute");
    tg_ctx_free(ctx);
}

static void test_rel_shift(void) {
    tg_ctx *ctx = tg_ctx_new();
    const int T = 4, H = 2;
    tg_tensor *a = tg_new_3d(ctx, TG_F32, 2 * T - 1, T, H);
    tg_tensor *r = tg_rel_shift(ctx, a);
    CHECK(r && r->ne[0] == T && r->ne[1] == T && r->ne[2] == H);
    CHECK(r->nb[0] == 4 && r->nb[1] == a->nb[1] - 4 && r->nb[2] == a->nb[2]);
    CHECK(r->view_offs == (size_t)(T - 1) * 4);
    /* check the indexing: out[j, i] = a[(T-1) - i + j, i] */
    tg_backend *be = test_backend_new("fake", true, true, TEST_OPS_ALL);
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf));
    float vals[7 * 4 * 2];
    for (int i = 0; i < 7 * 4 * 2; i++) vals[i] = (float)i;
    CHECK_OK(tg_tensor_set(a, vals, 0, sizeof vals));
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                const float *p = (const float *)((const char *)r->data + j * r->nb[0] +
                                                 i * r->nb[1] + h * r->nb[2]);
                CHECK(*p == vals[h * 7 * 4 + i * 7 + (T - 1) - i + j]);
            }
    tg_buffer_free(buf);
    tg_backend_free(be);
    CHECK(tg_rel_shift(ctx, tg_set_name(tg_new_2d(ctx, TG_F32, 6, 4), "bd")) == NULL);
    CHECK_ERR(tg_ctx_check(ctx), TG_ERR_INVALID_ARG, "rel_shift: 'bd' [6,4]");
    tg_backend_free(NULL);
    tg_ctx_free(ctx);
}

static void test_null_sources_are_silent(void) {
    tg_ctx *ctx = tg_ctx_new();
    CHECK(tg_view_1d(ctx, NULL, 3, 0) == NULL);
    CHECK(tg_reshape_2d(ctx, NULL, 3, 1) == NULL);
    CHECK(tg_permute(ctx, NULL, 0, 1, 2, 3) == NULL);
    CHECK(tg_transpose(ctx, NULL) == NULL);
    CHECK(tg_rel_shift(ctx, NULL) == NULL);
    CHECK(tg_set_name(NULL, "x") == NULL);
    CHECK_OK(tg_ctx_check(ctx));
    CHECK(tg_new_1d(NULL, TG_F32, 3) == NULL);
    CHECK_ERR(tg_ctx_check(NULL), TG_ERR_INVALID_ARG, "NULL context");
    tg_ctx_free(ctx);
}

TEST_MAIN(T(test_ctx_pointers_stable), T(test_sizes), T(test_view_2d_and_data),
          T(test_view_stride_overflow_refused), T(test_reshape),
          T(test_permute_transpose), T(test_rel_shift), T(test_null_sources_are_silent))
