/*
 * test_data.c: tensor data and buffers through the generic backend functions:
 * placing tensors (bounds, views follow), allocating a whole context,
 * bounds-checked set/get that name the tensor, copies within and across
 * backends (host to host, through the buffer functions, through a bounce
 * buffer), wrapping host memory, clearing, and compute refusing unallocated
 * graphs.
 */
#include "backend_impl.h"
#include "check.h"
#include "test_backend.h"

static void test_place_and_views(void) {
    tg_backend *be = test_backend_new("dev", false, false, TEST_OPS_ALL);
    tg_buffer *buf = NULL;
    CHECK_OK(tg_backend_buffer_alloc(be, 256, &buf));
    CHECK(buf && tg_buffer_size(buf) == 256 && tg_buffer_backend(buf) == be);
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_set_name(tg_new_2d(ctx, TG_F32, 4, 4), "a");
    tg_tensor *v = tg_view_1d(ctx, a, 4, 16); /* made before placement */
    CHECK(v->data == NULL);
    CHECK_ERR(tg_tensor_place(a, buf, 200), TG_ERR_INVALID_ARG,
              "'a' [4,4] (64 bytes) at offset 200 does not fit a buffer of 256 bytes");
    CHECK_ERR(tg_tensor_place(v, buf, 0), TG_ERR_INVALID_ARG, "is a view");
    CHECK_OK(tg_tensor_place(a, buf, 64));
    CHECK((char *)a->data == (char *)buf->base + 64 && a->buffer == buf);
    /* set/get through a view resolve its place without it being resolved */
    float row[4] = {1, 2, 3, 4}, got[4];
    CHECK_OK(tg_tensor_set(v, row, 0, sizeof row));
    CHECK_OK(tg_tensor_get(a, got, 16, sizeof got));
    CHECK(memcmp(row, got, sizeof row) == 0);
    /* bounds name the tensor */
    CHECK_ERR(tg_tensor_set(a, row, 60, 8), TG_ERR_INVALID_ARG,
              "tensor_set: bytes [60, 68) are outside tensor 'a' [4,4] of 64 bytes");
    CHECK_ERR(tg_tensor_get(v, got, 0, 20), TG_ERR_INVALID_ARG, "outside tensor 'a (view)' [4]");
    CHECK_ERR(tg_tensor_get(a, got, (size_t)-8, 8), TG_ERR_INVALID_ARG, "outside");
    tg_tensor *unplaced = tg_set_name(tg_new_1d(ctx, TG_F32, 2), "u");
    CHECK_ERR(tg_tensor_set(unplaced, row, 0, 8), TG_ERR_INVALID_ARG, "tensor 'u' [2] has no storage");
    CHECK_OK(tg_tensor_set(unplaced, NULL, 0, 0)); /* zero bytes: nothing to do */
    /* clear */
    CHECK_OK(tg_buffer_clear(buf, 0));
    CHECK_OK(tg_tensor_get(v, got, 0, sizeof got));
    CHECK(got[0] == 0 && got[3] == 0);
    tg_buffer_free(buf);
    tg_buffer_free(NULL);
    tg_ctx_free(ctx);
    tg_backend_free(be);
}

static void test_ctx_alloc_tensors(void) {
    tg_backend *be = test_backend_new("dev", false, false, TEST_OPS_ALL);
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_1d(ctx, TG_F32, 3);    /* 12 bytes */
    tg_tensor *b = tg_new_1d(ctx, TG_I64, 5);    /* 40 bytes */
    tg_tensor *bv = tg_view_1d(ctx, b, 2, 8);
    tg_tensor *c = tg_new_2d(ctx, TG_F16, 7, 3); /* 42 bytes */
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf));
    /* alignment 64: a at 0, b at 64, c at 128 */
    CHECK(buf && tg_buffer_size(buf) >= 128 + 42);
    CHECK((char *)a->data == (char *)buf->base && (char *)b->data == (char *)buf->base + 64);
    CHECK((char *)c->data == (char *)buf->base + 128);
    CHECK((char *)bv->data == (char *)b->data + 8 && bv->buffer == buf);
    /* already placed tensors are skipped the second time */
    tg_tensor *d = tg_new_1d(ctx, TG_F32, 1);
    tg_buffer *buf2 = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, be, &buf2));
    CHECK(d->buffer == buf2 && a->buffer == buf);
    CHECK_ERR(tg_ctx_alloc_tensors(ctx, NULL, &buf2), TG_ERR_INVALID_ARG, "NULL");
    tg_buffer_free(buf);
    tg_buffer_free(buf2);
    tg_ctx_free(ctx);
    tg_backend_free(be);
}

/* Tensors whose sizes add up past SIZE_MAX (each one allowed: 2^56 i64
 * elements, 2^59 bytes) must not wrap the buffer size around to a small
 * allocation with every tensor placed far outside it. */
static void test_ctx_alloc_size_overflow_is_an_error(void) {
    tg_backend *be = test_backend_new("cpu", true, true, TEST_OPS_ALL);
    tg_ctx *ctx = tg_ctx_new();
    for (int i = 0; i < 32; i++) CHECK(tg_new_1d(ctx, TG_I64, (int64_t)1 << 56) != NULL);
    tg_buffer *buf = NULL;
    CHECK_ERR(tg_ctx_alloc_tensors(ctx, be, &buf), TG_ERR_NO_MEMORY, "more than SIZE_MAX bytes");
    CHECK(buf == NULL && tg_ctx_tensor(ctx, 0)->data == NULL);
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    tg_backend_free(be);
}

static void test_copy_within_and_across(void) {
    tg_backend *dev = test_backend_new("dev", false, false, TEST_OPS_ALL);
    tg_backend *dev2 = test_backend_new("dev2", false, false, TEST_OPS_ALL);
    tg_backend *cpu = test_backend_new("cpu", true, true, TEST_OPS_ALL);
    tg_ctx *cd = tg_ctx_new(), *cd2 = tg_ctx_new(), *cc = tg_ctx_new();
    tg_tensor *d1 = tg_new_2d(cd, TG_F32, 3, 2), *d2 = tg_new_2d(cd, TG_F32, 3, 2);
    tg_tensor *e1 = tg_new_2d(cd2, TG_F32, 3, 2);
    tg_tensor *h1 = tg_new_2d(cc, TG_F32, 3, 2), *h2 = tg_new_2d(cc, TG_F32, 3, 2);
    tg_tensor *wrong = tg_new_2d(cc, TG_F16, 3, 2);
    tg_buffer *bd = NULL, *bd2 = NULL, *bc = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(cd, dev, &bd));
    CHECK_OK(tg_ctx_alloc_tensors(cd2, dev2, &bd2));
    CHECK_OK(tg_ctx_alloc_tensors(cc, cpu, &bc));
    const float v[6] = {1, 2, 3, 4, 5, 6};
    float got[6];
    CHECK_OK(tg_tensor_set(h1, v, 0, sizeof v));
    CHECK_OK(tg_tensor_copy(h1, d1));   /* host to device */
    CHECK_OK(tg_tensor_copy(d1, d2));   /* same device: bounce */
    CHECK_OK(tg_tensor_copy(d2, e1));   /* device to device */
    CHECK_OK(tg_tensor_copy(e1, h2));   /* device to host */
    CHECK_OK(tg_tensor_get(h2, got, 0, sizeof got));
    CHECK(memcmp(v, got, sizeof v) == 0);
    CHECK_ERR(tg_tensor_copy(h1, wrong), TG_ERR_INVALID_ARG, "differ in type or size");
    tg_tensor *unplaced = tg_set_name(tg_new_2d(cc, TG_F32, 3, 2), "nowhere");
    CHECK_ERR(tg_tensor_copy(h1, unplaced), TG_ERR_INVALID_ARG, "'nowhere' [3,2] has no storage");
    tg_buffer_free(bd);
    tg_buffer_free(bd2);
    tg_buffer_free(bc);
    tg_ctx_free(cd);
    tg_ctx_free(cd2);
    tg_ctx_free(cc);
    tg_backend_free(dev);
    tg_backend_free(dev2);
    tg_backend_free(cpu);
}

/* tg_tensor_copy moves bytes: a copy between tensors laid out differently
 * would scramble the elements, and one into a view with gaps (a window of a
 * larger tensor) would overwrite the elements between its rows. Both are
 * refused; a copy into a fresh tensor with the source's strides (what the
 * scheduler does at a backend seam) still works. */
static void test_copy_refuses_mismatched_layouts(void) {
    tg_backend *cpu = test_backend_new("cpu", true, true, TEST_OPS_ALL);
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *r = tg_set_name(tg_new_2d(ctx, TG_F32, 4, 3), "r");
    tg_tensor *s = tg_new_2d(ctx, TG_F32, 4, 3);
    tg_tensor *flat = tg_new_1d(ctx, TG_F32, 6);
    tg_tensor *same = tg_new_2d(ctx, TG_F32, 2, 2);
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, cpu, &buf));
    /* the 2 x 2 windows at rows 1..2, columns 1..2: 24-byte spans */
    tg_tensor *wr = tg_set_name(tg_view_2d(ctx, r, 2, 2, r->nb[1], 20), "window");
    tg_tensor *ws = tg_view_2d(ctx, s, 2, 2, s->nb[1], 20);
    float rv[12], sv[12], fv[6] = {0}, got[12];
    for (int i = 0; i < 12; i++) rv[i] = (float)i, sv[i] = 100.0f + (float)i;
    CHECK_OK(tg_tensor_set(r, rv, 0, sizeof rv));
    CHECK_OK(tg_tensor_set(s, sv, 0, sizeof sv));
    CHECK_OK(tg_tensor_set(flat, fv, 0, sizeof fv));
    CHECK_ERR(tg_tensor_copy(ws, wr), TG_ERR_INVALID_ARG, "'window'");
    CHECK_ERR(tg_tensor_copy(flat, wr), TG_ERR_INVALID_ARG, "'window'");
    CHECK_OK(tg_tensor_get(r, got, 0, sizeof got));
    CHECK(memcmp(got, rv, sizeof rv) == 0); /* nothing of r was touched */
    /* same bytes, different element order: refused too */
    tg_tensor *rt = tg_transpose(ctx, tg_reshape_2d(ctx, flat, 3, 2));
    tg_tensor *dst = tg_new_2d(ctx, TG_F32, 2, 3);
    tg_buffer *buf2 = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, cpu, &buf2));
    CHECK_ERR(tg_tensor_copy(rt, dst), TG_ERR_INVALID_ARG, "layout");
    /* a fresh tensor with the window's strides takes the window */
    memcpy(same->nb, ws->nb, sizeof same->nb);
    tg_buffer *buf3 = NULL;
    CHECK_OK(tg_backend_buffer_alloc(cpu, tg_nbytes(same), &buf3));
    CHECK_OK(tg_tensor_place(same, buf3, 0));
    CHECK_OK(tg_tensor_copy(ws, same));
    const float *p = same->data;
    CHECK(p[0] == 105.0f && p[1] == 106.0f && p[4] == 109.0f && p[5] == 110.0f);
    /* contiguous to contiguous of another shape is a plain byte copy */
    tg_tensor *f2 = tg_reshape_2d(ctx, flat, 2, 3);
    CHECK_OK(tg_tensor_copy(f2, dst));
    tg_buffer_free(buf);
    tg_buffer_free(buf2);
    tg_buffer_free(buf3);
    tg_ctx_free(ctx);
    tg_backend_free(cpu);
}

/* tg_tensor_set writes bytes of t's contiguous storage: into a strided view
 * (a window of a larger tensor) that would overwrite the elements between
 * its rows, so it is refused, and the window's source keeps its values. */
static void test_set_refuses_strided_view(void) {
    tg_backend *cpu = test_backend_new("cpu", true, true, TEST_OPS_ALL);
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *r = tg_new_2d(ctx, TG_F32, 4, 3);
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, cpu, &buf));
    tg_tensor *w = tg_set_name(tg_view_2d(ctx, r, 2, 2, r->nb[1], 20), "window");
    float rv[12], zeros[6] = {0}, got[12];
    for (int i = 0; i < 12; i++) rv[i] = (float)i;
    CHECK_OK(tg_tensor_set(r, rv, 0, sizeof rv));
    CHECK_ERR(tg_tensor_set(w, zeros, 0, sizeof zeros), TG_ERR_INVALID_ARG,
              "view 'window' [2,2] is not contiguous");
    CHECK_OK(tg_tensor_get(r, got, 0, sizeof got));
    CHECK(memcmp(got, rv, sizeof rv) == 0);
    /* a contiguous view (one row) is fine */
    tg_tensor *row = tg_view_1d(ctx, r, 4, 16);
    CHECK_OK(tg_tensor_set(row, zeros, 0, 4 * sizeof(float)));
    CHECK_OK(tg_tensor_get(r, got, 0, sizeof got));
    CHECK(got[4] == 0.0f && got[7] == 0.0f && got[3] == 3.0f && got[8] == 8.0f);
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    tg_backend_free(cpu);
}

static void test_from_host_and_compute(void) {
    tg_backend *cpu = test_backend_new("cpu", true, true, TEST_OPS_ALL);
    float host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tg_buffer *wrap = NULL;
    CHECK_OK(tg_backend_buffer_from_host(cpu, host, sizeof host, &wrap));
    CHECK(wrap && wrap->external && wrap->base == (void *)host);
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_1d(ctx, TG_F32, 8);
    CHECK_OK(tg_tensor_place(x, wrap, 0));
    tg_tensor *y = tg_scale(ctx, x, 2.0f);
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, y));
    CHECK_ERR(tg_backend_graph_compute(cpu, g), TG_ERR_INVALID_ARG, "has no data; allocate");
    tg_buffer *buf = NULL;
    CHECK_OK(tg_ctx_alloc_tensors(ctx, cpu, &buf));
    CHECK_OK(tg_backend_graph_compute(cpu, g));
    CHECK_OK(tg_backend_synchronize(cpu));
    float got[8];
    CHECK_OK(tg_tensor_get(y, got, 0, sizeof got));
    CHECK(got[0] == 2 && got[7] == 16);
    CHECK(strcmp(tg_backend_name(cpu), "cpu") == 0 && tg_backend_is_cpu(cpu));
    CHECK(tg_backend_supports_op(cpu, y) && !tg_backend_supports_op(cpu, NULL));
    tg_buffer_free(wrap);
    CHECK(host[7] == 8); /* the memory stays the caller's */
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    tg_backend_free(cpu);
    tg_backend_free(NULL);
    CHECK(strcmp(tg_backend_name(NULL), "(none)") == 0);
}

static void test_cuda_new_reports(void) {
    tg_backend *b = (tg_backend *)(uintptr_t)1;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) {
        /* without CUDA headers, a driver or a device: a clear refusal */
        CHECK(b == NULL);
        CHECK(tg_status_code(st) == TG_ERR_UNSUPPORTED || tg_status_code(st) == TG_ERR_DEVICE);
        CHECK(strlen(tg_status_message(st)) > 10);
        tg_status_free(st);
    } else {
        CHECK(b != NULL && !tg_backend_is_cpu(b));
        tg_backend_free(b);
    }
}

TEST_MAIN(T(test_place_and_views), T(test_ctx_alloc_tensors), T(test_copy_within_and_across),
          T(test_ctx_alloc_size_overflow_is_an_error), T(test_copy_refuses_mismatched_layouts),
          T(test_set_refuses_strided_view),
          T(test_from_host_and_compute), T(test_cuda_new_reports))
