/*
 * tensor.c: contexts, tensor metadata, and the view constructors (view,
 * reshape, permute, transpose, rel_shift).
 *
 * A context owns tensor metadata in fixed-size chunks, so a tensor pointer
 * never moves, and keeps the first error any constructor hit (sticky), so graph
 * code can chain constructors and check once. Views are tensors with op VIEW
 * whose view_src is the tensor they look into (not its root): following
 * view_src therefore also reaches in-place writers (tg_cpy into a view,
 * set_rows) that a view depends on; the root storage is found by following the
 * chain (tg_tensor_root).
 *
 * Not here: op constructors (ops.c), graphs (graph.c), data placement
 * (backend.c). A context never owns tensor data.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "tensor_internal.h"

/* Element counts beyond this are refused so that byte sizes never overflow. */
#define MAX_ELEMENTS ((int64_t)1 << 56)

/* ---------------------------------------------------------------- sizes */

int64_t tg_nelements(const tg_tensor *t) {
    if (!t) return 0;
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int64_t tg_nrows(const tg_tensor *t) {
    if (!t) return 0;
    return t->ne[1] * t->ne[2] * t->ne[3];
}

size_t tg_nbytes(const tg_tensor *t) {
    if (!t) return 0;
    for (int i = 0; i < TG_MAX_DIMS; i++)
        if (t->ne[i] <= 0) return 0;
    size_t n = tg_type_size(t->type);
    for (int i = 0; i < TG_MAX_DIMS; i++) n += (size_t)(t->ne[i] - 1) * t->nb[i];
    return n;
}

/* Dims of extent 1 are skipped: their stride is never used to address an
 * element, so a [n,1] tensor permuted to [1,n] is still one dense run. */
bool tg_is_contiguous(const tg_tensor *t) {
    if (!t) return false;
    size_t expect = tg_type_size(t->type);
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        if (t->ne[i] != 1 && t->nb[i] != expect) return false;
        expect *= (size_t)t->ne[i];
    }
    return true;
}

bool tg_same_shape(const tg_tensor *a, const tg_tensor *b) {
    if (!a || !b) return false;
    for (int i = 0; i < TG_MAX_DIMS; i++)
        if (a->ne[i] != b->ne[i]) return false;
    return true;
}

tg_tensor *tg_set_name(tg_tensor *t, const char *fmt, ...) {
    if (!t) return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    return t;
}

const char *tg_tensor_desc(const tg_tensor *t, char *buf, size_t size) {
    if (!t) {
        snprintf(buf, size, "(null)");
        return buf;
    }
    int n = t->name[0] ? snprintf(buf, size, "'%s' [", t->name)
                       : snprintf(buf, size, "#%d [", (int)t->id);
    int nd = TG_MAX_DIMS;
    while (nd > 1 && t->ne[nd - 1] == 1) nd--;
    for (int i = 0; i < nd && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? "," : "", (long long)t->ne[i]);
    if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
    return buf;
}

tg_tensor *tg_tensor_root(const tg_tensor *t) {
    while (t && t->view_src) t = t->view_src;
    return (tg_tensor *)t;
}

void tg_tensor_resolve_view(tg_tensor *t) {
    if (!t || !t->view_src) return;
    tg_tensor_resolve_view(t->view_src);
    const tg_tensor *s = t->view_src;
    if (!s->data) return;
    t->buffer = s->buffer;
    t->data = (char *)s->data + t->view_offs;
}

/* -------------------------------------------------------------- context */

tg_ctx *tg_ctx_new(void) { return tg_calloc(1, sizeof(tg_ctx)); }

void tg_ctx_free(tg_ctx *ctx) {
    if (!ctx) return;
    for (int i = 0; i < ctx->n_graphs; i++) tg_graph_destroy(ctx->graphs[i]);
    tg_free(ctx->graphs);
    for (int i = 0; i < ctx->n_chunks; i++) tg_free(ctx->chunks[i]);
    tg_free(ctx->chunks);
    tg_status_free(ctx->error);
    tg_free(ctx);
}

void tg_ctx_record(tg_ctx *ctx, tg_status err) {
    if (!err) return;
    if (!ctx || ctx->error) {
        tg_status_free(err);
        return;
    }
    ctx->error = err;
}

void tg_ctx_errorf(tg_ctx *ctx, const char *fmt, ...) {
    if (!ctx || ctx->error) return; /* sticky: the first error wins */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->error = tg_status_new(TG_ERR_INVALID_ARG, "%s", msg);
}

tg_status tg_ctx_check(const tg_ctx *ctx) {
    if (!ctx) return tg_status_new(TG_ERR_INVALID_ARG, "tg_ctx_check: NULL context");
    if (!ctx->error) return NULL;
    return tg_status_new(tg_status_code(ctx->error), "%s", tg_status_message(ctx->error));
}

int tg_ctx_n_tensors(const tg_ctx *ctx) { return ctx ? ctx->n_tensors : 0; }

tg_tensor *tg_ctx_tensor(const tg_ctx *ctx, int i) {
    if (!ctx || i < 0 || i >= ctx->n_tensors) return NULL;
    return &ctx->chunks[i / TG_CTX_CHUNK][i % TG_CTX_CHUNK];
}

tg_tensor *tg_ctx_find(const tg_ctx *ctx, const char *name) {
    if (!ctx || !name) return NULL;
    for (int i = 0; i < ctx->n_tensors; i++) {
        tg_tensor *t = tg_ctx_tensor(ctx, i);
        if (strcmp(t->name, name) == 0) return t;
    }
    return NULL;
}

static tg_tensor *ctx_alloc(tg_ctx *ctx) {
    int chunk = ctx->n_tensors / TG_CTX_CHUNK;
    if (chunk >= ctx->n_chunks) {
        if (!tg_grow((void **)&ctx->chunks, &ctx->cap_chunks, chunk + 1, sizeof(tg_tensor *)))
            return NULL;
        ctx->chunks[chunk] = tg_calloc(TG_CTX_CHUNK, sizeof(tg_tensor));
        if (!ctx->chunks[chunk]) return NULL;
        ctx->n_chunks = chunk + 1;
    }
    tg_tensor *t = &ctx->chunks[chunk][ctx->n_tensors % TG_CTX_CHUNK];
    memset(t, 0, sizeof *t);
    t->id = ctx->n_tensors++;
    t->ctx = ctx;
    return t;
}

/* Checks type and extents; on failure records an error naming `what`. */
static bool check_shape(tg_ctx *ctx, const char *what, tg_type type,
                        const int64_t ne[TG_MAX_DIMS]) {
    if (tg_type_size(type) == 0) {
        tg_ctx_errorf(ctx, "%s: bad tensor type %d", what, (int)type);
        return false;
    }
    int64_t n = 1;
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        if (ne[i] < 0) {
            tg_ctx_errorf(ctx, "%s: negative extent ne[%d] = %lld", what, i, (long long)ne[i]);
            return false;
        }
        if (ne[i] > 0 && n > MAX_ELEMENTS / ne[i]) {
            tg_ctx_errorf(ctx, "%s: too many elements ([%lld,%lld,%lld,%lld])", what,
                          (long long)ne[0], (long long)ne[1], (long long)ne[2],
                          (long long)ne[3]);
            return false;
        }
        n *= ne[i] > 0 ? ne[i] : 1;
    }
    return true;
}

tg_tensor *tg_ctx_new_tensor(tg_ctx *ctx, const char *what, tg_type type,
                             const int64_t ne[TG_MAX_DIMS]) {
    if (!ctx) return NULL;
    if (!check_shape(ctx, what, type, ne)) return NULL;
    tg_tensor *t = ctx_alloc(ctx);
    if (!t) {
        tg_ctx_record(ctx, tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory for tensor "
                                                           "metadata", what));
        return NULL;
    }
    t->type = type;
    size_t nb = tg_type_size(type);
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        t->ne[i] = ne[i];
        t->nb[i] = nb;
        nb *= (size_t)(ne[i] > 0 ? ne[i] : 1);
    }
    return t;
}

/* ------------------------------------------------------- new tensors */

tg_tensor *tg_new_tensor(tg_ctx *ctx, tg_type type, int n_dims, const int64_t *ne) {
    if (!ctx) return NULL;
    if (n_dims < 1 || n_dims > TG_MAX_DIMS || !ne) {
        tg_ctx_errorf(ctx, "new_tensor: n_dims %d not in 1..%d (or NULL shape)", n_dims,
                      TG_MAX_DIMS);
        return NULL;
    }
    int64_t full[TG_MAX_DIMS] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) full[i] = ne[i];
    return tg_ctx_new_tensor(ctx, "new_tensor", type, full);
}

tg_tensor *tg_new_1d(tg_ctx *ctx, tg_type type, int64_t ne0) {
    return tg_new_tensor(ctx, type, 1, (int64_t[]){ne0});
}

tg_tensor *tg_new_2d(tg_ctx *ctx, tg_type type, int64_t ne0, int64_t ne1) {
    return tg_new_tensor(ctx, type, 2, (int64_t[]){ne0, ne1});
}

tg_tensor *tg_new_3d(tg_ctx *ctx, tg_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    return tg_new_tensor(ctx, type, 3, (int64_t[]){ne0, ne1, ne2});
}

tg_tensor *tg_new_4d(tg_ctx *ctx, tg_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                     int64_t ne3) {
    return tg_new_tensor(ctx, type, 4, (int64_t[]){ne0, ne1, ne2, ne3});
}

/* ----------------------------------------------------------------- views */

/* The bytes a view of shape ne and strides nb spans (tg_nbytes), or SIZE_MAX
 * when that does not fit a size_t: caller-given strides may be anything, and
 * a wrapped span would pass the bounds check below as a small one. */
static size_t view_span(tg_type type, const int64_t ne[TG_MAX_DIMS],
                        const size_t nb[TG_MAX_DIMS]) {
    for (int i = 0; i < TG_MAX_DIMS; i++)
        if (ne[i] <= 0) return 0;
    size_t n = tg_type_size(type), step;
    for (int i = 0; i < TG_MAX_DIMS; i++)
        if (__builtin_mul_overflow((size_t)(ne[i] - 1), nb[i], &step) ||
            __builtin_add_overflow(n, step, &n))
            return SIZE_MAX;
    return n;
}

/* A VIEW of a with the given full shape and strides at byte offset, checked
 * to lie inside the bytes a spans. */
static tg_tensor *make_view(tg_ctx *ctx, const char *what, tg_tensor *a,
                            const int64_t ne[TG_MAX_DIMS], const size_t nb[TG_MAX_DIMS],
                            size_t offset) {
    if (!check_shape(ctx, what, a->type, ne)) return NULL;
    size_t need = view_span(a->type, ne, nb);
    size_t have = tg_nbytes(a);
    if (need > 0 && (offset > have || need > have - offset)) {
        char da[TG_DESC_SIZE];
        tg_ctx_errorf(ctx,
                      "%s: of %s: view [%lld,%lld,%lld,%lld] at offset %zu spans %zu bytes, "
                      "beyond the %zu bytes of its source",
                      what, tg_tensor_desc(a, da, sizeof da), (long long)ne[0],
                      (long long)ne[1], (long long)ne[2], (long long)ne[3], offset, need, have);
        return NULL;
    }
    tg_tensor *t = tg_ctx_new_tensor(ctx, what, a->type, ne);
    if (!t) return NULL;
    memcpy(t->nb, nb, sizeof t->nb);
    /* "w (permute)": messages about the view still say what it shows */
    if (a->name[0]) snprintf(t->name, sizeof t->name, "%.48s (%s)", a->name, what);
    t->op = TG_OP_VIEW;
    t->view_src = a;
    t->view_offs = offset;
    tg_tensor_resolve_view(t);
    return t;
}

/* nb (n_dims entries, nb[0] included) may be NULL: contiguous strides. Dims
 * past n_dims have extent 1. */
tg_tensor *tg_view(tg_ctx *ctx, tg_tensor *a, int n_dims, const int64_t *ne,
                   const size_t *nb, size_t offset) {
    if (!ctx || !a) return NULL;
    if (n_dims < 1 || n_dims > TG_MAX_DIMS || !ne) {
        tg_ctx_errorf(ctx, "view: n_dims %d not in 1..%d (or NULL shape)", n_dims,
                      TG_MAX_DIMS);
        return NULL;
    }
    int64_t fne[TG_MAX_DIMS] = {1, 1, 1, 1};
    size_t fnb[TG_MAX_DIMS];
    for (int i = 0; i < n_dims; i++) fne[i] = ne[i];
    size_t s = tg_type_size(a->type);
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        fnb[i] = (nb && i < n_dims) ? nb[i] : s;
        s = fnb[i] * (size_t)(fne[i] > 0 ? fne[i] : 1);
    }
    return make_view(ctx, "view", a, fne, fnb, offset);
}

tg_tensor *tg_view_1d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, size_t offset) {
    if (!a) return NULL;
    return tg_view(ctx, a, 1, (int64_t[]){ne0}, NULL, offset);
}

tg_tensor *tg_view_2d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, int64_t ne1, size_t nb1,
                      size_t offset) {
    if (!a) return NULL;
    return tg_view(ctx, a, 2, (int64_t[]){ne0, ne1},
                   (size_t[]){tg_type_size(a->type), nb1}, offset);
}

tg_tensor *tg_view_3d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                      size_t nb1, size_t nb2, size_t offset) {
    if (!a) return NULL;
    return tg_view(ctx, a, 3, (int64_t[]){ne0, ne1, ne2},
                   (size_t[]){tg_type_size(a->type), nb1, nb2}, offset);
}

tg_tensor *tg_reshape(tg_ctx *ctx, tg_tensor *a, int n_dims, const int64_t *ne) {
    if (!ctx || !a) return NULL;
    char da[TG_DESC_SIZE];
    if (n_dims < 1 || n_dims > TG_MAX_DIMS || !ne) {
        tg_ctx_errorf(ctx, "reshape: of %s: n_dims %d not in 1..%d",
                      tg_tensor_desc(a, da, sizeof da), n_dims, TG_MAX_DIMS);
        return NULL;
    }
    int64_t fne[TG_MAX_DIMS] = {1, 1, 1, 1};
    int64_t n = 1;
    bool overflow = false;
    for (int i = 0; i < n_dims; i++) {
        fne[i] = ne[i];
        /* a huge new shape must not overflow (undefined) on its way to the
         * element-count check below */
        overflow = overflow || __builtin_mul_overflow(n, ne[i], &n);
    }
    if (overflow) {
        tg_ctx_errorf(ctx, "reshape: %s: the new shape [%lld,%lld,%lld,%lld] has too many "
                           "elements",
                      tg_tensor_desc(a, da, sizeof da), (long long)fne[0], (long long)fne[1],
                      (long long)fne[2], (long long)fne[3]);
        return NULL;
    }
    if (!tg_is_contiguous(a)) {
        tg_ctx_errorf(ctx, "reshape: %s is not contiguous (use tg_cont first)",
                      tg_tensor_desc(a, da, sizeof da));
        return NULL;
    }
    if (n != tg_nelements(a) || fne[0] < 0 || fne[1] < 0 || fne[2] < 0 || fne[3] < 0) {
        tg_ctx_errorf(ctx,
                      "reshape: %s has %lld elements, the new shape [%lld,%lld,%lld,%lld] %lld",
                      tg_tensor_desc(a, da, sizeof da), (long long)tg_nelements(a),
                      (long long)fne[0], (long long)fne[1], (long long)fne[2],
                      (long long)fne[3], (long long)n);
        return NULL;
    }
    size_t fnb[TG_MAX_DIMS];
    size_t s = tg_type_size(a->type);
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        fnb[i] = s;
        s *= (size_t)(fne[i] > 0 ? fne[i] : 1);
    }
    return make_view(ctx, "reshape", a, fne, fnb, 0);
}

tg_tensor *tg_reshape_2d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, int64_t ne1) {
    return tg_reshape(ctx, a, 2, (int64_t[]){ne0, ne1});
}

tg_tensor *tg_reshape_3d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2) {
    return tg_reshape(ctx, a, 3, (int64_t[]){ne0, ne1, ne2});
}

tg_tensor *tg_reshape_4d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                         int64_t ne3) {
    return tg_reshape(ctx, a, 4, (int64_t[]){ne0, ne1, ne2, ne3});
}

tg_tensor *tg_permute(tg_ctx *ctx, tg_tensor *a, int ax0, int ax1, int ax2, int ax3) {
    if (!ctx || !a) return NULL;
    int ax[TG_MAX_DIMS] = {ax0, ax1, ax2, ax3};
    bool seen[TG_MAX_DIMS] = {false, false, false, false};
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        if (ax[i] < 0 || ax[i] >= TG_MAX_DIMS || seen[ax[i]]) {
            char da[TG_DESC_SIZE];
            tg_ctx_errorf(ctx, "permute: of %s: axes (%d,%d,%d,%d) are not a permutation of "
                               "0..3",
                          tg_tensor_desc(a, da, sizeof da), ax0, ax1, ax2, ax3);
            return NULL;
        }
        seen[ax[i]] = true;
    }
    int64_t ne[TG_MAX_DIMS];
    size_t nb[TG_MAX_DIMS];
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        ne[ax[i]] = a->ne[i];
        nb[ax[i]] = a->nb[i];
    }
    return make_view(ctx, "permute", a, ne, nb, 0);
}

tg_tensor *tg_transpose(tg_ctx *ctx, tg_tensor *a) { return tg_permute(ctx, a, 1, 0, 2, 3); }

tg_tensor *tg_rel_shift(tg_ctx *ctx, tg_tensor *a) {
    if (!ctx || !a) return NULL;
    int64_t T = a->ne[1];
    if (T < 1 || a->ne[0] != 2 * T - 1 || a->nb[1] < a->nb[0]) {
        char da[TG_DESC_SIZE];
        tg_ctx_errorf(ctx, "rel_shift: %s: expected [2T-1, T, H, B] (ne[0] = %lld for T = %lld)",
                      tg_tensor_desc(a, da, sizeof da), (long long)(2 * T - 1), (long long)T);
        return NULL;
    }
    /* spec 2.4: out[j, i] = a[(T-1) - i + j, i] */
    int64_t ne[TG_MAX_DIMS] = {T, T, a->ne[2], a->ne[3]};
    size_t nb[TG_MAX_DIMS] = {a->nb[0], a->nb[1] - a->nb[0], a->nb[2], a->nb[3]};
    return make_view(ctx, "rel_shift", a, ne, nb, (size_t)(T - 1) * a->nb[0]);
}
