/*
 * tensor_internal.h: what the files of src/tensor share and the public header
 * does not show: the context's layout, error recording for constructors, view
 * resolution and small helpers for messages.
 *
 * Backends should not need this header; they read tensors through tg.h and
 * op_params.h only.
 */
#ifndef TG_TENSOR_INTERNAL_H
#define TG_TENSOR_INTERNAL_H

#include "backend_impl.h"
#include "tg.h"

/* Tensor metadata is allocated in chunks so that tensor pointers stay valid
 * while the context grows. */
#define TG_CTX_CHUNK 256

/* Set by the scheduler on every tensor it placed in one of its arenas, so a
 * later allocation knows it may plan the tensor again (the user's own
 * placements, weights say, are never touched). Internal; above the public
 * flag bits. */
#define TG_FLAG_SCHED_PLACED (1u << 16)

struct tg_ctx {
    tg_tensor **chunks;
    int n_chunks, cap_chunks;
    int n_tensors;
    tg_status error;      /* the first recorded error (sticky), or NULL */
    tg_graph **graphs;    /* graphs made by tg_graph_new, freed with ctx */
    int n_graphs, cap_graphs;
};

/* Records err as ctx's error unless one is recorded already (then err is
 * freed). Accepts a NULL ctx (err is freed). */
void tg_ctx_record(tg_ctx *ctx, tg_status err);
/* Records a TG_ERR_INVALID_ARG error with a formatted message. */
void tg_ctx_errorf(tg_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A new zeroed tensor of ctx with contiguous strides for ne (4 entries);
 * NULL (error recorded, naming `what`) when out of memory or on a bad shape. */
tg_tensor *tg_ctx_new_tensor(tg_ctx *ctx, const char *what, tg_type type,
                             const int64_t ne[TG_MAX_DIMS]);

/* Writes "'name' [ne0,ne1,...]" (or "#id" for unnamed tensors, trailing
 * dims of 1 dropped) into buf and returns buf. */
const char *tg_tensor_desc(const tg_tensor *t, char *buf, size_t size);
#define TG_DESC_SIZE (TG_MAX_NAME + 96)

/* The tensor that owns t's storage: follows view_src to the end. */
tg_tensor *tg_tensor_root(const tg_tensor *t);
/* Sets data and buffer of a view (or in-place writer) from its view source
 * chain, once the root is placed; no-op for tensors without view_src or
 * whose root has no data yet. */
void tg_tensor_resolve_view(tg_tensor *t);

/* The backend's data alignment (64 when it does not say). */
size_t tg_backend_alignment(tg_backend *backend);

/* Frees a graph's arrays and the graph (graphs made by tg_graph_new are freed
 * by their context; the scheduler frees its split graphs with this). */
void tg_graph_destroy(tg_graph *g);

#endif
