/*
 * test_backend.c: the fake backend of test_backend.h. Deliberately slow and
 * simple: every op is a loop over four indices through the byte strides, so
 * it is easy to trust and handles views and broadcasting the same way.
 */
#include "test_backend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend_impl.h"
#include "base.h"

/* A node handed to a deferred fake, with the sources it had at that moment
 * (the scheduler swaps sources only for the duration of graph_compute). */
typedef struct queued {
    tg_tensor *node;
    tg_tensor *src[TG_MAX_SRC];
} queued;

typedef struct fake {
    char name[64];
    bool host;
    bool deferred;
    queued *queue;
    int n_queue, cap_queue;
    uint64_t mask;
    int n_computes, n_nodes, n_buffers;
} fake;

/* --------------------------------------------------------------- buffers */

static void buf_free(tg_buffer *buf) {
    fake *f = buf->backend->impl;
    f->n_buffers--;
    if (!buf->external) tg_aligned_free(buf->base);
    tg_free(buf);
}

static tg_status buf_check(tg_buffer *buf, const void *addr, size_t size) {
    const char *p = addr, *base = buf->base;
    if (p < base || p + size > base + buf->size)
        return tg_status_new(TG_ERR_INTERNAL, "fake buffer: range outside the buffer");
    return NULL;
}

static tg_status buf_set(tg_buffer *buf, void *addr, const void *data, size_t size) {
    tg_status st = buf_check(buf, addr, size);
    if (!st) memcpy(addr, data, size);
    return st;
}

static tg_status buf_get(tg_buffer *buf, const void *addr, void *data, size_t size) {
    tg_status st = buf_check(buf, addr, size);
    if (!st) memcpy(data, addr, size);
    return st;
}

static tg_status buf_memset(tg_buffer *buf, void *addr, uint8_t value, size_t size) {
    tg_status st = buf_check(buf, addr, size);
    if (!st) memset(addr, value, size);
    return st;
}

static const struct tg_buffer_iface buf_iface = {buf_free, buf_set, buf_get, buf_memset};

static tg_status make_buffer(tg_backend *b, void *base, size_t size, bool external,
                             tg_buffer **out) {
    fake *f = b->impl;
    tg_buffer *buf = tg_calloc(1, sizeof *buf);
    if (!buf) return tg_status_new(TG_ERR_NO_MEMORY, "fake: buffer");
    buf->iface = &buf_iface;
    buf->backend = b;
    buf->base = base;
    buf->size = size;
    buf->host = f->host;
    buf->external = external;
    f->n_buffers++;
    *out = buf;
    return NULL;
}

static tg_status be_buffer_alloc(tg_backend *b, size_t size, tg_buffer **out) {
    void *p = tg_aligned_alloc(64, size ? size : 64);
    if (!p) return tg_status_new(TG_ERR_NO_MEMORY, "fake: %zu bytes", size);
    tg_status st = make_buffer(b, p, size, false, out);
    if (st) tg_aligned_free(p);
    return st;
}

static tg_status be_buffer_from_host(tg_backend *b, void *ptr, size_t size, tg_buffer **out) {
    return make_buffer(b, ptr, size, true, out);
}

/* --------------------------------------------------------------- compute */

static float *at(const tg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (float *)((char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                     i3 * t->nb[3]);
}

/* Every tensor the node touches must live in this backend's buffers (or in
 * host memory, for a CPU fake). */
static bool owns(tg_backend *b, const tg_tensor *t) {
    if (!t) return true;
    if (!t->buffer || !t->data) return false;
    return t->buffer->backend == b || (b->iface->is_cpu && t->buffer->host);
}

static tg_status compute_node(tg_tensor *n) {
    const tg_tensor *a = n->src[0], *c = n->src[1];
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < n->ne[0]; i0++) {
                    float *o = at(n, i0, i1, i2, i3);
                    switch (n->op) {
                    case TG_OP_ADD:
                    case TG_OP_SUB:
                    case TG_OP_MUL:
                    case TG_OP_DIV: {
                        float x = *at(a, i0 % a->ne[0], i1 % a->ne[1], i2 % a->ne[2],
                                      i3 % a->ne[3]);
                        float y = *at(c, i0 % c->ne[0], i1 % c->ne[1], i2 % c->ne[2],
                                      i3 % c->ne[3]);
                        *o = n->op == TG_OP_ADD   ? x + y
                             : n->op == TG_OP_SUB ? x - y
                             : n->op == TG_OP_MUL ? x * y
                                                  : x / y;
                        break;
                    }
                    case TG_OP_SCALE: {
                        float s;
                        memcpy(&s, &n->op_params[0], sizeof s);
                        *o = *at(a, i0, i1, i2, i3) * s;
                        break;
                    }
                    case TG_OP_RELU: {
                        float x = *at(a, i0, i1, i2, i3);
                        *o = x > 0 ? x : 0;
                        break;
                    }
                    case TG_OP_MUL_MAT: {
                        double acc = 0;
                        for (int64_t k = 0; k < a->ne[0]; k++)
                            acc += (double)*at(a, k, i0, i2 % a->ne[2], i3 % a->ne[3]) *
                                   *at(c, k, i1, i2, i3);
                        *o = (float)acc;
                        break;
                    }
                    case TG_OP_SUM_ROWS: {
                        double acc = 0;
                        for (int64_t k = 0; k < a->ne[0]; k++) acc += *at(a, k, i1, i2, i3);
                        *o = (float)acc;
                        break;
                    }
                    default:
                        return tg_status_new(TG_ERR_UNSUPPORTED, "fake: cannot compute %s",
                                             tg_op_name(n->op));
                    }
                }
    return NULL;
}

/* CPY: element by element in row-major order of each tensor's own shape. */
static tg_status compute_cpy(tg_tensor *n) {
    const tg_tensor *a = n->src[0];
    int64_t count = tg_nelements(a);
    for (int64_t e = 0; e < count; e++) {
        int64_t r = e, ia[4], in[4];
        for (int d = 0; d < 4; d++) {
            ia[d] = r % a->ne[d];
            r /= a->ne[d];
        }
        r = e;
        for (int d = 0; d < 4; d++) {
            in[d] = r % n->ne[d];
            r /= n->ne[d];
        }
        const char *pa = (const char *)a->data + ia[0] * a->nb[0] + ia[1] * a->nb[1] +
                         ia[2] * a->nb[2] + ia[3] * a->nb[3];
        char *pn = (char *)n->data + in[0] * n->nb[0] + in[1] * n->nb[1] + in[2] * n->nb[2] +
                   in[3] * n->nb[3];
        tg_status st = tg_convert(a->type, pa, n->type, pn, 1);
        if (st) return st;
    }
    return NULL;
}

static tg_status run_node(tg_backend *b, tg_tensor *n) {
    fake *f = b->impl;
    if (!(f->mask & TEST_OP(n->op)))
        return tg_status_new(TG_ERR_INTERNAL, "fake %s: handed unsupported op %s", f->name,
                             tg_op_name(n->op));
    bool ok = owns(b, n);
    for (int k = 0; k < TG_MAX_SRC; k++) ok = ok && owns(b, n->src[k]);
    if (!ok)
        return tg_status_new(TG_ERR_INTERNAL,
                             "fake %s: node '%s' (%s) touches a tensor outside this "
                             "backend's buffers",
                             f->name, n->name, tg_op_name(n->op));
    tg_status st = n->op == TG_OP_CPY ? compute_cpy(n) : compute_node(n);
    if (!st) f->n_nodes++;
    return st;
}

static tg_status be_graph_compute(tg_backend *b, tg_graph *g) {
    fake *f = b->impl;
    f->n_computes++;
    for (int i = 0; i < g->n_nodes; i++) {
        tg_tensor *n = g->nodes[i];
        if (n->op == TG_OP_VIEW || n->op == TG_OP_NONE) continue;
        if (f->deferred) {
            /* like a GPU stream: recorded now, run at synchronize */
            if (!tg_grow((void **)&f->queue, &f->cap_queue, f->n_queue + 1, sizeof(queued)))
                return tg_status_new(TG_ERR_NO_MEMORY, "fake %s: queue", f->name);
            queued *q = &f->queue[f->n_queue++];
            q->node = n;
            memcpy(q->src, n->src, sizeof q->src);
            continue;
        }
        tg_status st = run_node(b, n);
        if (st) return st;
        if (tg_backend_should_abort(b))
            return tg_status_new(TG_ERR_ABORTED, "fake %s: aborted", f->name);
    }
    return NULL;
}

static tg_status be_synchronize(tg_backend *b) {
    fake *f = b->impl;
    tg_status st = NULL;
    for (int i = 0; i < f->n_queue && !st; i++) {
        queued *q = &f->queue[i];
        tg_tensor *now[TG_MAX_SRC];
        memcpy(now, q->node->src, sizeof now);
        memcpy(q->node->src, q->src, sizeof now);
        st = run_node(b, q->node);
        memcpy(q->node->src, now, sizeof now);
    }
    f->n_queue = 0;
    return st;
}

/* --------------------------------------------------------------- backend */

static const char *be_name(tg_backend *b) { return ((fake *)b->impl)->name; }

static void be_free(tg_backend *b) {
    tg_free(((fake *)b->impl)->queue);
    tg_free(b->impl);
    tg_free(b);
}

static size_t be_alignment(tg_backend *b) { return 64; }

static bool be_supports(tg_backend *b, const tg_tensor *n) {
    const fake *f = b->impl;
    if (!(f->mask & TEST_OP(n->op))) return false;
    /* the fake computes f32 only, except conversions */
    if (n->op == TG_OP_CPY) return true;
    for (int k = 0; k < TG_MAX_SRC; k++)
        if (n->src[k] && n->src[k]->type != TG_F32) return false;
    return n->type == TG_F32;
}

static const struct tg_backend_iface iface_cpu = {
    be_name, be_free, true, be_alignment, be_buffer_alloc, be_buffer_from_host, be_supports,
    be_graph_compute, NULL, NULL, NULL, NULL, NULL, NULL,
};

static const struct tg_backend_iface iface_dev = {
    be_name, be_free, false, be_alignment, be_buffer_alloc, be_buffer_from_host, be_supports,
    be_graph_compute, NULL, NULL, NULL, NULL, NULL, NULL,
};

static const struct tg_backend_iface iface_deferred = {
    be_name, be_free, false, be_alignment, be_buffer_alloc, be_buffer_from_host, be_supports,
    be_graph_compute, be_synchronize, NULL, NULL, NULL, NULL, NULL,
};

tg_backend *test_backend_new(const char *name, bool is_cpu, bool host_buffers,
                             uint64_t op_mask) {
    tg_backend *b = tg_calloc(1, sizeof *b);
    fake *f = tg_calloc(1, sizeof *f);
    if (!b || !f) {
        tg_free(b);
        tg_free(f);
        return NULL;
    }
    snprintf(f->name, sizeof f->name, "%s", name);
    f->host = host_buffers;
    f->mask = op_mask;
    b->iface = is_cpu ? &iface_cpu : &iface_dev;
    b->impl = f;
    return b;
}

tg_backend *test_backend_new_deferred(const char *name, uint64_t op_mask) {
    tg_backend *b = test_backend_new(name, false, false, op_mask);
    if (!b) return NULL;
    ((fake *)b->impl)->deferred = true;
    b->iface = &iface_deferred;
    return b;
}

int test_backend_n_computes(const tg_backend *b) { return ((const fake *)b->impl)->n_computes; }
int test_backend_n_nodes(const tg_backend *b) { return ((const fake *)b->impl)->n_nodes; }
int test_backend_n_buffers(const tg_backend *b) { return ((const fake *)b->impl)->n_buffers; }
