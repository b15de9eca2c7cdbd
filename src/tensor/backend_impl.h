/*
 * backend_impl.h: the function tables a backend fills in (internal).
 *
 * A backend is a table of functions plus its own context pointer, in the
 * manner of IREE's HAL drivers: the runtime above calls through the table and
 * never names a backend. Optional entries may be NULL; the runtime then uses a
 * slower generic path (e.g. synchronous copies through host memory).
 *
 * Ownership: a tg_buffer belongs to the backend that made it and must be freed
 * before that backend. Tensor `data` pointers are addresses in the buffer's
 * address space (host for the CPU, device for CUDA); only the backend
 * dereferences them.
 */
#ifndef TG_BACKEND_IMPL_H
#define TG_BACKEND_IMPL_H

#include "tg.h"

struct tg_buffer_iface {
    void (*free)(tg_buffer *buf);
    /* Byte copies between host memory and buffer storage at addr (an address
     * inside [buf->base, buf->base + buf->size)). */
    tg_status (*set)(tg_buffer *buf, void *addr, const void *data, size_t size);
    tg_status (*get)(tg_buffer *buf, const void *addr, void *data, size_t size);
    tg_status (*memset)(tg_buffer *buf, void *addr, uint8_t value, size_t size);
};

struct tg_buffer {
    const struct tg_buffer_iface *iface;
    tg_backend *backend;
    void *base;        /* address of byte 0, in the backend's address space */
    size_t size;
    bool host;         /* base is host memory the CPU can read directly      */
    bool external;     /* wraps caller memory (tg_backend_buffer_from_host)  */
    void *impl;        /* the backend's own state                            */
};

/* A contiguous run of nodes handed to a backend. */
struct tg_graph {
    struct tg_ctx *ctx;
    tg_tensor **nodes;
    int n_nodes, cap_nodes;
    tg_tensor **leafs;
    int n_leafs, cap_leafs;
    bool borrowed;     /* nodes point into another graph (a scheduler split) */
};

struct tg_backend_iface {
    const char *(*name)(tg_backend *b);
    void (*free)(tg_backend *b);
    bool is_cpu;
    /* Alignment of tensor data in this backend's buffers (power of two). */
    size_t (*alignment)(tg_backend *b);
    tg_status (*buffer_alloc)(tg_backend *b, size_t size, tg_buffer **out);
    /* Optional: wrap host memory the caller keeps alive. */
    tg_status (*buffer_from_host)(tg_backend *b, void *ptr, size_t size, tg_buffer **out);
    bool (*supports_op)(tg_backend *b, const tg_tensor *node);
    /* Computes the graph's nodes in order; may return before the device is
     * done if synchronize waits for it. */
    tg_status (*graph_compute)(tg_backend *b, tg_graph *g);
    /* Optional: NULL means compute is already synchronous. */
    tg_status (*synchronize)(tg_backend *b);
    /* Optional: copy between a tensor of another backend's buffer and one of
     * this backend's, ordered with this backend's work. NULL: through host. */
    tg_status (*copy_tensor)(tg_backend *b, const tg_tensor *src, tg_tensor *dst);
    /* Optional: the backend's own sticky device error, NULL while healthy
     * (tg_backend_failed). */
    const char *(*failed)(tg_backend *b);
    /* Optional: makes the next graph_compute fail by the backend's own kind
     * of device fault (tg_backend_fail_after); NULL: the runtime fails it. */
    void (*inject_fault)(tg_backend *b);
    /* Optional: host memory that copies into this backend's buffers read at
     * the bus's full rate (page-locked for a GPU), and its free; NULL: the
     * runtime's tg_malloc and tg_free (tg_backend_host_alloc). */
    void *(*host_alloc)(tg_backend *b, size_t size);
    void (*host_free)(tg_backend *b, void *ptr);
};

struct tg_backend {
    const struct tg_backend_iface *iface;
    void *impl;
    tg_abort_fn abort_fn;
    void *abort_user;
    tg_backend_stats stats; /* buffers counted by the runtime; see the helpers below */
    char fault[160];        /* a fault the runtime injected: sticky, as a device's */
    /* Set by tg_sched_compute_async for one compute: graph_compute may
     * return once the work is queued; reads (tensor get) stay ordered after
     * it, and tg_backend_synchronize waits for it. */
    bool enqueue_only;
};

/* Helpers for backends. */
/* Memory the backend allocated for itself (delta > 0) or gave back (< 0). */
void tg_backend_note_memory(tg_backend *b, int64_t delta);
/* Host time spent submitting one compute (counted once per compute). */
static inline void tg_backend_note_submit(tg_backend *b, double us) { b->stats.submit_us += us; }

/* True when the abort callback asks to stop. */
static inline bool tg_backend_should_abort(const tg_backend *b) {
    return b->abort_fn && b->abort_fn(b->abort_user);
}

#endif /* TG_BACKEND_IMPL_H */
