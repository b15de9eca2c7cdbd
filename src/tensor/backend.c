/*
 * backend.c: the public backend and buffer functions, which dispatch through
 * a backend's function table (backend_impl.h), and tensor data placement and
 * transfer (place, alloc for a whole context, set/get/copy).
 *
 * Views get their data from their view source chain: tg_tensor_place sets the
 * root only, and every path that hands tensors to a backend (graph compute
 * here, the scheduler, tg_ctx_alloc_tensors) resolves views first, so a view
 * made before or after its source was placed both work. set/get of a view
 * address its root's buffer directly without touching the view.
 *
 * The fault hook (tg_backend_fail_after) lives here, where every compute
 * and buffer allocation of every backend passes, so that the layers above
 * can be tested against device faults and full device memory on the CPU.
 * An injected compute fault is sticky in the backend, as a device fault is
 * in a GPU context.
 *
 * Not here: any backend's implementation; choosing a backend per node
 * (sched.c).
 */
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "tensor_internal.h"

/* ------------------------------------------------------------- backends */

/* The fault hook's plan per kind (tg_backend_fail_after): operations to let
 * pass, then failures to come (< 0: all); pass < 0 is off. */
typedef struct fault_plan {
    long pass, fail;
} fault_plan;
static fault_plan fault_plans[2] = {{-1, 0}, {-1, 0}};

void tg_backend_fail_after(tg_backend_fault kind, long n, long times) {
    if (kind != TG_BACKEND_FAULT_COMPUTE && kind != TG_BACKEND_FAULT_ALLOC) return;
    fault_plans[kind] = n < 0 || times == 0 ? (fault_plan){-1, 0} : (fault_plan){n, times};
}

/* True when this operation of `kind` is to fail. */
static bool fault_fires(tg_backend_fault kind) {
    fault_plan *p = &fault_plans[kind];
    if (p->pass < 0) return false;
    if (p->pass > 0) {
        p->pass--;
        return false;
    }
    if (p->fail > 0 && --p->fail == 0) p->pass = -1;
    return true;
}

const char *tg_backend_failed(const tg_backend *backend) {
    if (!backend) return NULL;
    if (backend->fault[0]) return backend->fault;
    return backend->iface && backend->iface->failed ? backend->iface->failed((tg_backend *)backend)
                                                    : NULL;
}

void tg_backend_free(tg_backend *backend) {
    if (backend && backend->iface && backend->iface->free) backend->iface->free(backend);
}

const char *tg_backend_name(const tg_backend *backend) {
    if (!backend || !backend->iface || !backend->iface->name) return "(none)";
    return backend->iface->name((tg_backend *)backend);
}

bool tg_backend_is_cpu(const tg_backend *backend) {
    return backend && backend->iface && backend->iface->is_cpu;
}

bool tg_backend_supports_op(tg_backend *backend, const tg_tensor *node) {
    if (!backend || !node) return false;
    if (node->op == TG_OP_VIEW || (node->op == TG_OP_NONE && !node->view_src)) return true;
    return backend->iface->supports_op && backend->iface->supports_op(backend, node);
}

void tg_backend_set_abort(tg_backend *backend, tg_abort_fn fn, void *user) {
    if (!backend) return;
    backend->abort_fn = fn;
    backend->abort_user = user;
}

tg_status tg_backend_graph_compute(tg_backend *backend, tg_graph *g) {
    if (!backend || !g)
        return tg_status_new(TG_ERR_INVALID_ARG, "graph_compute: NULL backend or graph");
    for (int i = 0; i < g->n_nodes; i++) {
        tg_tensor *n = g->nodes[i];
        tg_tensor_resolve_view(n);
        for (int s = 0; s < TG_MAX_SRC; s++) tg_tensor_resolve_view(n->src[s]);
        if (n->op == TG_OP_VIEW) continue;
        for (int s = -1; s < TG_MAX_SRC; s++) {
            const tg_tensor *t = s < 0 ? n : n->src[s];
            if (!t || t->data || tg_nbytes(t) == 0) continue;
            char d[TG_DESC_SIZE], dn[TG_DESC_SIZE];
            return tg_status_new(TG_ERR_INVALID_ARG,
                                 "graph_compute on %s: %s %s of node %s (%s) has no data; "
                                 "allocate the graph first",
                                 tg_backend_name(backend), s < 0 ? "output" : "source",
                                 tg_tensor_desc(t, d, sizeof d), tg_tensor_desc(n, dn, sizeof dn),
                                 tg_op_name(n->op));
        }
    }
    /* a backend's own sticky error is its to report (the CUDA context's) */
    if (backend->fault[0])
        return tg_status_new(TG_ERR_DEVICE, "%s: the backend failed earlier (%s); free and "
                                            "recreate it",
                             tg_backend_name(backend), backend->fault);
    if (fault_fires(TG_BACKEND_FAULT_COMPUTE)) {
        if (backend->iface->inject_fault) {
            backend->iface->inject_fault(backend);
        } else {
            snprintf(backend->fault, sizeof backend->fault,
                     "a device fault injected by tg_backend_fail_after");
            return tg_status_new(TG_ERR_DEVICE, "%s: %s: the backend has failed; free and "
                                                "recreate it",
                                 tg_backend_name(backend), backend->fault);
        }
    }
    const double t0 = tg_clock_now_ms();
    tg_status st = backend->iface->graph_compute(backend, g);
    backend->stats.compute_us += (tg_clock_now_ms() - t0) * 1e3;
    backend->stats.n_computes++;
    return st;
}

tg_status tg_backend_synchronize(tg_backend *backend) {
    if (!backend) return tg_status_new(TG_ERR_INVALID_ARG, "synchronize: NULL backend");
    if (!backend->iface->synchronize) return NULL;
    return backend->iface->synchronize(backend);
}

size_t tg_backend_alignment(tg_backend *backend) {
    size_t a = backend && backend->iface->alignment ? backend->iface->alignment(backend) : 0;
    return a ? a : 64;
}

/* -------------------------------------------------------------- buffers */

tg_status tg_backend_buffer_alloc(tg_backend *backend, size_t size, tg_buffer **out_buffer) {
    if (!backend || !out_buffer)
        return tg_status_new(TG_ERR_INVALID_ARG, "buffer_alloc: NULL backend or output");
    *out_buffer = NULL;
    if (fault_fires(TG_BACKEND_FAULT_ALLOC))
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: allocating a buffer of %zu bytes: out of "
                                               "device memory (injected by tg_backend_fail_after)",
                             tg_backend_name(backend), size);
    const double t0 = tg_clock_now_ms();
    tg_status st = backend->iface->buffer_alloc(backend, size, out_buffer);
    backend->stats.alloc_us += (tg_clock_now_ms() - t0) * 1e3;
    if (!st) tg_backend_note_memory(backend, (int64_t)(*out_buffer)->size);
    return tg_status_wrap(st, "%s: allocating a buffer of %zu bytes", tg_backend_name(backend),
                          size);
}

void tg_backend_note_memory(tg_backend *b, int64_t delta) {
    if (!b) return;
    tg_backend_stats *s = &b->stats;
    s->mem_in_use = delta < 0 && (size_t)-delta > s->mem_in_use ? 0 : s->mem_in_use + (size_t)delta;
    if (s->mem_in_use > s->mem_peak) s->mem_peak = s->mem_in_use;
}

void tg_backend_get_stats(const tg_backend *backend, tg_backend_stats *out) {
    if (!out) return;
    if (backend) *out = backend->stats;
    else memset(out, 0, sizeof *out);
}

void tg_backend_reset_stats(tg_backend *backend) {
    if (!backend) return;
    size_t in_use = backend->stats.mem_in_use;
    memset(&backend->stats, 0, sizeof backend->stats);
    backend->stats.mem_in_use = backend->stats.mem_peak = in_use;
}

tg_status tg_backend_buffer_from_host(tg_backend *backend, void *ptr, size_t size,
                                      tg_buffer **out_buffer) {
    if (!backend || !out_buffer || (!ptr && size))
        return tg_status_new(TG_ERR_INVALID_ARG, "buffer_from_host: NULL argument");
    *out_buffer = NULL;
    if (!backend->iface->buffer_from_host)
        return tg_status_new(TG_ERR_UNSUPPORTED, "%s cannot wrap host memory",
                             tg_backend_name(backend));
    return backend->iface->buffer_from_host(backend, ptr, size, out_buffer);
}

void *tg_backend_host_alloc(tg_backend *backend, size_t size) {
    if (!backend || !size) return NULL;
    if (!backend->iface->host_alloc) return tg_malloc(size);
    return backend->iface->host_alloc(backend, size);
}

void tg_backend_host_free(tg_backend *backend, void *ptr) {
    if (!backend || !ptr) return;
    if (!backend->iface->host_free) {
        tg_free(ptr);
        return;
    }
    backend->iface->host_free(backend, ptr);
}

void tg_buffer_free(tg_buffer *buffer) {
    if (!buffer) return;
    /* buffers the runtime allocated were counted; wrapped host memory not */
    if (buffer->backend && !buffer->external) tg_backend_note_memory(buffer->backend, -(int64_t)buffer->size);
    if (buffer->iface && buffer->iface->free) buffer->iface->free(buffer);
}

size_t tg_buffer_size(const tg_buffer *buffer) { return buffer ? buffer->size : 0; }

tg_backend *tg_buffer_backend(const tg_buffer *buffer) {
    return buffer ? buffer->backend : NULL;
}

tg_status tg_buffer_clear(tg_buffer *buffer, uint8_t value) {
    if (!buffer) return tg_status_new(TG_ERR_INVALID_ARG, "buffer_clear: NULL buffer");
    if (buffer->size == 0) return NULL;
    return buffer->iface->memset(buffer, buffer->base, value, buffer->size);
}

/* -------------------------------------------------------------- placing */

tg_status tg_tensor_place(tg_tensor *t, tg_buffer *buffer, size_t offset) {
    char d[TG_DESC_SIZE];
    if (!t || !buffer) return tg_status_new(TG_ERR_INVALID_ARG, "tensor_place: NULL argument");
    if (t->view_src)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "tensor_place: %s is a view; place its source instead",
                             tg_tensor_desc(t, d, sizeof d));
    size_t n = tg_nbytes(t);
    if (offset > buffer->size || n > buffer->size - offset)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "tensor_place: %s (%zu bytes) at offset %zu does not fit a buffer "
                             "of %zu bytes",
                             tg_tensor_desc(t, d, sizeof d), n, offset, buffer->size);
    t->buffer = buffer;
    t->data = (char *)buffer->base + offset;
    t->flags &= ~TG_FLAG_SCHED_PLACED;
    return NULL;
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

tg_status tg_ctx_alloc_tensors(tg_ctx *ctx, tg_backend *backend, tg_buffer **out_buffer) {
    if (!ctx || !backend || !out_buffer)
        return tg_status_new(TG_ERR_INVALID_ARG, "ctx_alloc_tensors: NULL argument");
    *out_buffer = NULL;
    size_t align = tg_backend_alignment(backend);
    size_t total = 0;
    for (int i = 0; i < ctx->n_tensors; i++) {
        tg_tensor *t = tg_ctx_tensor(ctx, i);
        if (t->data || t->view_src) continue;
        /* the sum must not wrap to a small buffer the tensors lie outside */
        size_t n = tg_nbytes(t);
        if (total > SIZE_MAX - (align - 1) || n > SIZE_MAX - align_up(total, align)) {
            char d[TG_DESC_SIZE];
            return tg_status_new(TG_ERR_NO_MEMORY,
                                 "ctx_alloc_tensors: the tensors up to %s need more than "
                                 "SIZE_MAX bytes",
                                 tg_tensor_desc(t, d, sizeof d));
        }
        total = align_up(total, align) + n;
    }
    tg_buffer *buf = NULL;
    tg_status st = tg_backend_buffer_alloc(backend, total ? total : align, &buf);
    if (st) return tg_status_wrap(st, "allocating the tensors of a context");
    size_t off = 0;
    for (int i = 0; i < ctx->n_tensors; i++) {
        tg_tensor *t = tg_ctx_tensor(ctx, i);
        if (t->data || t->view_src) continue;
        off = align_up(off, align);
        t->buffer = buf;
        t->data = (char *)buf->base + off;
        t->flags &= ~TG_FLAG_SCHED_PLACED;
        off += tg_nbytes(t);
    }
    for (int i = 0; i < ctx->n_tensors; i++) tg_tensor_resolve_view(tg_ctx_tensor(ctx, i));
    *out_buffer = buf;
    return NULL;
}

/* The buffer and address of t's first byte, following the view chain
 * without modifying t. */
static tg_status storage_of(const tg_tensor *t, const char *what, tg_buffer **out_buf,
                            char **out_addr) {
    size_t offs = 0;
    const tg_tensor *r = t;
    while (r->view_src) {
        offs += r->view_offs;
        r = r->view_src;
    }
    if (!r->buffer || !r->data) {
        char d[TG_DESC_SIZE];
        return tg_status_new(TG_ERR_INVALID_ARG, "%s: tensor %s has no storage yet (allocate "
                                                 "it or its graph first)",
                             what, tg_tensor_desc(t, d, sizeof d));
    }
    *out_buf = r->buffer;
    *out_addr = (char *)r->data + offs;
    return NULL;
}

static tg_status check_range(const tg_tensor *t, const char *what, size_t offset, size_t size) {
    size_t n = tg_nbytes(t);
    if (offset > n || size > n - offset) {
        char d[TG_DESC_SIZE];
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "%s: bytes [%zu, %zu) are outside tensor %s of %zu bytes", what,
                             offset, offset + size, tg_tensor_desc(t, d, sizeof d), n);
    }
    return NULL;
}

tg_status tg_tensor_set(tg_tensor *t, const void *data, size_t offset, size_t size) {
    if (!t || (!data && size))
        return tg_status_new(TG_ERR_INVALID_ARG, "tensor_set: NULL argument");
    tg_status st = check_range(t, "tensor_set", offset, size);
    if (st) return st;
    if (size == 0) return NULL;
    if (t->view_src && !tg_is_contiguous(t)) {
        /* its byte span holds other elements of its source between its own */
        char d[TG_DESC_SIZE];
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "tensor_set: view %s is not contiguous; writing its bytes would "
                             "overwrite the elements between them (set its source instead)",
                             tg_tensor_desc(t, d, sizeof d));
    }
    tg_buffer *buf;
    char *addr;
    if ((st = storage_of(t, "tensor_set", &buf, &addr))) return st;
    return buf->iface->set(buf, addr + offset, data, size);
}

tg_status tg_tensor_get(const tg_tensor *t, void *data, size_t offset, size_t size) {
    if (!t || (!data && size))
        return tg_status_new(TG_ERR_INVALID_ARG, "tensor_get: NULL argument");
    tg_status st = check_range(t, "tensor_get", offset, size);
    if (st) return st;
    if (size == 0) return NULL;
    tg_buffer *buf;
    char *addr;
    if ((st = storage_of(t, "tensor_get", &buf, &addr))) return st;
    return buf->iface->get(buf, addr + offset, data, size);
}

tg_status tg_tensor_copy(const tg_tensor *src, tg_tensor *dst) {
    char ds[TG_DESC_SIZE], dd[TG_DESC_SIZE];
    if (!src || !dst) return tg_status_new(TG_ERR_INVALID_ARG, "tensor_copy: NULL tensor");
    size_t n = tg_nbytes(src);
    if (src->type != dst->type || n != tg_nbytes(dst))
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "tensor_copy: %s (%s, %zu bytes) and %s (%s, %zu bytes) differ in "
                             "type or size",
                             tg_tensor_desc(src, ds, sizeof ds), tg_type_name(src->type), n,
                             tg_tensor_desc(dst, dd, sizeof dd), tg_type_name(dst->type),
                             tg_nbytes(dst));
    if (n == 0) return NULL;
    /* The copy moves n bytes as they lie, which is element for element only
     * when both are contiguous or both have the same shape and strides; and
     * a view with gaps (a window of a larger tensor) would have the bytes
     * between its rows overwritten. */
    bool same_layout = tg_same_shape(src, dst) && memcmp(src->nb, dst->nb, sizeof dst->nb) == 0;
    bool dst_dense = tg_is_contiguous(dst);
    if (same_layout && dst->view_src && !dst_dense)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "tensor_copy: destination %s is a strided view: copying its %zu "
                             "bytes would overwrite the elements between its rows",
                             tg_tensor_desc(dst, dd, sizeof dd), n);
    if (!same_layout && !(tg_is_contiguous(src) && dst_dense))
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "tensor_copy: %s and %s differ in layout (shape or strides); the "
                             "copy moves bytes, so both must be contiguous or laid out alike",
                             tg_tensor_desc(src, ds, sizeof ds), tg_tensor_desc(dst, dd, sizeof dd));
    tg_buffer *sb, *db;
    char *sa, *da;
    tg_status st;
    if ((st = storage_of(src, "tensor_copy", &sb, &sa))) return st;
    if ((st = storage_of(dst, "tensor_copy", &db, &da))) return st;
    if (sb->host && db->host) {
        memmove(da, sa, n);
        return NULL;
    }
    tg_backend *dbk = db->backend;
    if (sb->backend != dbk && dbk && dbk->iface->copy_tensor) {
        tg_tensor_resolve_view((tg_tensor *)src);
        tg_tensor_resolve_view(dst);
        return dbk->iface->copy_tensor(dbk, src, dst);
    }
    if (db->host) return sb->iface->get(sb, sa, da, n);
    if (sb->host) return db->iface->set(db, da, sa, n);
    void *bounce = tg_malloc(n);
    if (!bounce)
        return tg_status_new(TG_ERR_NO_MEMORY, "tensor_copy: no host memory to copy %s (%zu "
                                               "bytes)",
                             tg_tensor_desc(src, ds, sizeof ds), n);
    st = sb->iface->get(sb, sa, bounce, n);
    if (!st) st = db->iface->set(db, da, bounce, n);
    tg_free(bounce);
    return st;
}
