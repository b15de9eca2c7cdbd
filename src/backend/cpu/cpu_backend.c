/*
 * cpu_backend.c: the CPU backend's tables: buffers in host memory, the op
 * support matrix and graph compute.
 *
 * Graph compute runs the nodes in order, one op at a time, each op spread
 * over the backend's thread pool by the op itself (most ops split rows;
 * matrix products split output columns). Parallelism inside an op rather
 * than between ops keeps every op's memory traffic local and makes the
 * results independent of timing. The abort callback is polled between nodes;
 * an aborted compute leaves nothing half-owned, so the backend stays usable.
 *
 * Buffers are plain 64-byte aligned host allocations (one cache line, the
 * width of an AVX-512 register), or caller memory wrapped in place (an
 * mmap'd checkpoint) that the backend only reads through its tensors.
 *
 * Not here: the ops themselves (cpu_*.c), scheduling across backends
 * (src/tensor/sched.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"

enum { CPU_ALIGN = 64 };

/* ---------------------------------------------------------------- buffers */

static void buf_free(tg_buffer *buf) {
    if (!buf) return;
    if (!buf->external) tg_aligned_free(buf->base);
    tg_free(buf);
}

static tg_status buf_set(tg_buffer *buf, void *addr, const void *data, size_t size) {
    if (size) memcpy(addr, data, size);
    return NULL;
}

static tg_status buf_get(tg_buffer *buf, const void *addr, void *data, size_t size) {
    if (size) memcpy(data, addr, size);
    return NULL;
}

static tg_status buf_memset(tg_buffer *buf, void *addr, uint8_t value, size_t size) {
    if (size) memset(addr, value, size);
    return NULL;
}

static const struct tg_buffer_iface cpu_buffer_iface = {
    .free = buf_free,
    .set = buf_set,
    .get = buf_get,
    .memset = buf_memset,
};

static tg_status cpu_buffer_alloc(tg_backend *b, size_t size, tg_buffer **out) {
    tg_buffer *buf = tg_calloc(1, sizeof *buf);
    if (!buf) return tg_status_new(TG_ERR_NO_MEMORY, "cpu backend: out of memory for a buffer");
    /* Round up so that vector loops may read a whole line past the end. */
    size_t padded = (size + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    if (padded < size) padded = size;
    buf->base = tg_aligned_alloc(CPU_ALIGN, padded ? padded : CPU_ALIGN);
    if (!buf->base) {
        tg_free(buf);
        return tg_status_new(TG_ERR_NO_MEMORY, "cpu backend: cannot allocate a buffer of %zu bytes",
                             size);
    }
    buf->iface = &cpu_buffer_iface;
    buf->backend = b;
    buf->size = size;
    buf->host = true;
    buf->external = false;
    *out = buf;
    return NULL;
}

static tg_status cpu_buffer_from_host(tg_backend *b, void *ptr, size_t size, tg_buffer **out) {
    if (!ptr && size)
        return tg_status_new(TG_ERR_INVALID_ARG, "cpu backend: buffer_from_host given NULL");
    tg_buffer *buf = tg_calloc(1, sizeof *buf);
    if (!buf) return tg_status_new(TG_ERR_NO_MEMORY, "cpu backend: out of memory for a buffer");
    buf->iface = &cpu_buffer_iface;
    buf->backend = b;
    buf->base = ptr;
    buf->size = size;
    buf->host = true;
    buf->external = true;
    *out = buf;
    return NULL;
}

/* ---------------------------------------------------------------- scratch */

static tg_status scratch_slot(cpu_backend *be, int slot, size_t size, void **out) {
    if (be->scratch_size[slot] < size) {
        size_t want = size + size / 4;
        void *p = tg_aligned_alloc(CPU_ALIGN, want);
        if (!p)
            return tg_status_new(TG_ERR_NO_MEMORY, "cpu backend: cannot allocate %zu bytes of scratch",
                                 want);
        tg_aligned_free(be->scratch[slot]);
        be->scratch[slot] = p;
        be->scratch_size[slot] = want;
    }
    *out = be->scratch[slot];
    return NULL;
}

tg_status cpu_scratch(cpu_backend *be, size_t size, void **out) {
    return scratch_slot(be, 0, size, out);
}

tg_status cpu_scratch_outer(cpu_backend *be, size_t size, void **out) {
    return scratch_slot(be, 1, size, out);
}

/* ---------------------------------------------------------------- threads */

/* Below this much work a region's wake-up and join (a few microseconds)
 * cost more than the work saved; decoder steps are made of such ops. */
enum { SERIAL_WORK = 16384 };

void cpu_parallel(cpu_backend *be, tg_task_fn fn, void *arg, double work) {
    if (be->n_threads == 1 || work < be->serial_work) {
        fn(arg, 0, 1);
        return;
    }
    tg_threadpool_run(be->pool, fn, arg);
}

/* ---------------------------------------------------------------- support */

static bool is_float(tg_type t) {
    return t == TG_F32 || t == TG_F16 || t == TG_BF16;
}

static bool f32(const tg_tensor *t) {
    return t && t->type == TG_F32;
}

static bool cpu_supports_op(tg_backend *b, const tg_tensor *n) {
    const tg_tensor *a = n->src[0], *s1 = n->src[1];
    if (tg_op_is_view(n->op)) return true;
    if (!a) return false;
    switch (n->op) {
    case TG_OP_GET_ROWS:
        return is_float(a->type) && s1 && s1->type == TG_I32 && f32(n);
    case TG_OP_SET_ROWS:
        return f32(a) && s1 && s1->type == TG_I32 && (n->type == TG_F32 || n->type == TG_F16 || n->type == TG_BF16);
    case TG_OP_ADD:
    case TG_OP_SUB:
    case TG_OP_MUL:
    case TG_OP_DIV:
        return f32(a) && f32(s1) && f32(n);
    case TG_OP_SCALE:
    case TG_OP_RELU:
    case TG_OP_SILU:
    case TG_OP_SIGMOID:
    case TG_OP_LOG:
    case TG_OP_SQRT:
    case TG_OP_GLU:
    case TG_OP_SUM_ROWS:
    case TG_OP_MEAN:
        return f32(a) && f32(n);
    case TG_OP_MUL_MAT:
        return is_float(a->type) && f32(s1) && f32(n);
    case TG_OP_CONV_2D:
    case TG_OP_CONV_2D_DW:
    case TG_OP_CONV_1D_DW:
        return f32(a) && f32(s1) && f32(n);
    case TG_OP_LAYER_NORM:
        return f32(a) && f32(n) && (!n->src[1] || f32(n->src[1])) && (!n->src[2] || f32(n->src[2]));
    case TG_OP_SOFT_MAX:
        return f32(a) && f32(n) && (!s1 || f32(s1));
    case TG_OP_ATTENTION: {
        const tg_tensor *k = n->src[1], *v = n->src[2], *m = n->src[3];
        bool kv_ok = k && v && is_float(k->type) && is_float(v->type);
        return f32(a) && kv_ok && (!m || f32(m)) && f32(n);
    }
    case TG_OP_CPY:
        return a->type < TG_TYPE_COUNT && n->type < TG_TYPE_COUNT;
    case TG_OP_CONCAT:
        return f32(s1) ? f32(a) && f32(n)
                       : a->type == TG_I32 && s1 && s1->type == TG_I32 && n->type == TG_I32;
    case TG_OP_PAD:
        return f32(a) && f32(n);
    case TG_OP_ARGMAX:
        return f32(a) && n->type == TG_I32;
    default:
        return false;
    }
}

/* ---------------------------------------------------------------- compute */

static tg_status compute_node(cpu_backend *be, tg_tensor *n) {
    char ln[CPU_LABEL_SIZE];
    switch (n->op) {
    case TG_OP_GET_ROWS: return cpu_op_get_rows(be, n);
    case TG_OP_SET_ROWS: return cpu_op_set_rows(be, n);
    case TG_OP_ADD:
    case TG_OP_SUB:
    case TG_OP_MUL:
    case TG_OP_DIV: return cpu_op_binary(be, n);
    case TG_OP_SCALE:
    case TG_OP_RELU:
    case TG_OP_SILU:
    case TG_OP_SIGMOID:
    case TG_OP_LOG:
    case TG_OP_SQRT: return cpu_op_unary(be, n);
    case TG_OP_GLU: return cpu_op_glu(be, n);
    case TG_OP_MUL_MAT: return cpu_op_mul_mat(be, n);
    case TG_OP_CONV_2D: return cpu_op_conv_2d(be, n);
    case TG_OP_CONV_2D_DW: return cpu_op_conv_2d_dw(be, n);
    case TG_OP_CONV_1D_DW: return cpu_op_conv_1d_dw(be, n);
    case TG_OP_LAYER_NORM: return cpu_op_layer_norm(be, n);
    case TG_OP_SOFT_MAX: return cpu_op_soft_max(be, n);
    case TG_OP_ATTENTION: return cpu_op_attention(be, n);
    case TG_OP_CPY: return cpu_op_cpy(be, n);
    case TG_OP_CONCAT: return cpu_op_concat(be, n);
    case TG_OP_PAD: return cpu_op_pad(be, n);
    case TG_OP_ARGMAX: return cpu_op_argmax(be, n);
    case TG_OP_SUM_ROWS:
    case TG_OP_MEAN: return cpu_op_sum_rows(be, n);
    default:
        return tg_status_new(TG_ERR_UNSUPPORTED, "cpu backend: op %s (node %s) not supported",
                             tg_op_name(n->op), cpu_label(n, ln));
    }
}

static tg_status cpu_graph_compute(tg_backend *b, tg_graph *g) {
    cpu_backend *be = cpu_of(b);
    char ln[CPU_LABEL_SIZE], ls[CPU_LABEL_SIZE];
    for (int i = 0; i < g->n_nodes; i++) {
        tg_tensor *n = g->nodes[i];
        if (tg_op_is_view(n->op) || tg_nelements(n) == 0) continue;
        if (tg_backend_should_abort(b))
            return tg_status_new(TG_ERR_ABORTED, "cpu backend: compute aborted before node %d of %d "
                                 "(%s, %s)", i, g->n_nodes, cpu_label(n, ln), tg_op_name(n->op));
        if (!n->data)
            return tg_status_new(TG_ERR_INVALID_ARG, "cpu backend: node %s (%s) is not allocated",
                                 cpu_label(n, ln), tg_op_name(n->op));
        for (int s = 0; s < TG_MAX_SRC; s++) {
            if (n->src[s] && !n->src[s]->data && tg_nelements(n->src[s]) > 0)
                return tg_status_new(TG_ERR_INVALID_ARG,
                                     "cpu backend: source %d (%s) of node %s (%s) is not "
                                     "allocated", s, cpu_label(n->src[s], ls), cpu_label(n, ln),
                                     tg_op_name(n->op));
        }
        if (!cpu_supports_op(b, n))
            return tg_status_new(TG_ERR_UNSUPPORTED,
                                 "cpu backend: op %s with these types (node %s, %s) is not "
                                 "supported", tg_op_name(n->op), cpu_label(n, ln),
                                 tg_type_name(n->type));
        tg_status st = compute_node(be, n);
        if (st) return tg_status_wrap(st, "node %s (%s)", cpu_label(n, ln), tg_op_name(n->op));
    }
    return NULL;
}

/* ---------------------------------------------------------------- backend */

static const char *cpu_name(tg_backend *b) {
    return cpu_of(b)->name;
}

static size_t cpu_alignment(tg_backend *b) {
    return CPU_ALIGN;
}

static void cpu_free(tg_backend *b) {
    if (!b) return;
    cpu_backend *be = cpu_of(b);
    tg_threadpool_free(be->pool);
    tg_aligned_free(be->scratch[0]);
    tg_aligned_free(be->scratch[1]);
    tg_free(be);
}

static const struct tg_backend_iface cpu_iface = {
    .name = cpu_name,
    .free = cpu_free,
    .is_cpu = true,
    .alignment = cpu_alignment,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_from_host = cpu_buffer_from_host,
    .supports_op = cpu_supports_op,
    .graph_compute = cpu_graph_compute,
    .synchronize = NULL,
    .copy_tensor = NULL,
};

tg_status tg_backend_cpu_new(int n_threads, tg_backend **out_backend) {
    tg_status st = NULL;
    cpu_backend *be = tg_calloc(1, sizeof *be);
    if (!be) return tg_status_new(TG_ERR_NO_MEMORY, "cpu backend: out of memory");
    be->base.iface = &cpu_iface;
    be->base.impl = be;
    st = tg_threadpool_new(n_threads, &be->pool);
    if (st) {
        st = tg_status_wrap(st, "cpu backend");
        goto fail;
    }
    be->n_threads = tg_threadpool_size(be->pool);
    be->serial_work = SERIAL_WORK;
    const char *isa = cpu_isa_choose();
    if (!cpu_kernels_select(isa, &be->k)) {
        st = tg_status_new(TG_ERR_INTERNAL, "cpu backend: ISA %s chosen but not usable", isa);
        goto fail;
    }
    snprintf(be->name, sizeof be->name, "CPU (%s, %d threads)", be->k.name, be->n_threads);
    TG_INFO("cpu backend: %s", be->name);
    *out_backend = &be->base;
    return NULL;

fail:
    cpu_free(&be->base);
    return st;
}
