/*
 * tg.h: the public API of the tensor-graph runtime.
 *
 * The runtime builds graphs of tensor operations, plans their memory and runs
 * them on one or more backends (CPU, CUDA). It is shaped after ggml's split of
 * "describe the graph" from "run it": building a graph allocates no tensor data;
 * a scheduler assigns every node to a backend, plans one arena per backend and
 * computes. Dimension 0 (ne[0]) is the innermost, contiguous one, so a PyTorch
 * tensor of shape (B, T, C) is ne = {C, T, B, 1} here.
 *
 * Errors: every function that can fail returns a tg_status (tg_status.h), NULL
 * on success, otherwise a heap object carrying a code and a message that the
 * caller owns and frees with tg_status_free. Op constructors are the exception that makes graph
 * code readable: they return NULL on a bad argument and record the first error
 * in their context (sticky); tg_ctx_check hands it out. A constructor given a
 * NULL source returns NULL without recording a second error.
 *
 * Not here: weights formats, models, audio. Those live above this layer.
 */
#ifndef TG_H
#define TG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------- types */

typedef enum tg_type {
    TG_F32 = 0,
    TG_F16,
    TG_BF16,
    TG_I32,
    TG_I64,
    TG_TYPE_COUNT,
} tg_type;

size_t tg_type_size(tg_type t);        /* bytes per element; 0 for a bad type */
const char *tg_type_name(tg_type t);   /* "f32", "bf16", ...; static storage */

float tg_f16_to_f32(uint16_t h);
uint16_t tg_f32_to_f16(float f);       /* round to nearest even, inf/nan kept */
float tg_bf16_to_f32(uint16_t h);
uint16_t tg_f32_to_bf16(float f);      /* round to nearest even, nan stays nan */

/* Converts n elements between any two types (integers convert by value, floats
 * to integers truncate toward zero). Returns TG_ERR_UNSUPPORTED on a bad type. */
tg_status tg_convert(tg_type src_type, const void *src, tg_type dst_type, void *dst,
                     size_t n);

/* --------------------------------------------------------------- tensors */

#define TG_MAX_DIMS 4
#define TG_MAX_SRC 4
#define TG_MAX_OP_PARAMS 16
#define TG_MAX_NAME 64

typedef enum tg_op {
    TG_OP_NONE = 0,   /* a leaf: weight or input                              */
    TG_OP_VIEW,       /* views share their source's storage, compute nothing  */
    TG_OP_GET_ROWS,
    TG_OP_SET_ROWS,
    TG_OP_ADD,
    TG_OP_SUB,
    TG_OP_MUL,
    TG_OP_DIV,
    TG_OP_SCALE,
    TG_OP_MUL_MAT,
    TG_OP_CONV_2D,
    TG_OP_CONV_2D_DW,
    TG_OP_CONV_1D_DW,
    TG_OP_LAYER_NORM,
    TG_OP_RELU,
    TG_OP_SILU,
    TG_OP_SIGMOID,
    TG_OP_GLU,
    TG_OP_SOFT_MAX,
    TG_OP_ATTENTION,
    TG_OP_CPY,
    TG_OP_CONCAT,
    TG_OP_PAD,
    TG_OP_ARGMAX,
    TG_OP_SUM_ROWS,
    TG_OP_MEAN,
    TG_OP_LOG,
    TG_OP_SQRT,
    TG_OP_COUNT,
} tg_op;

const char *tg_op_name(tg_op op);  /* "mul_mat", ...; static storage */

/* Tensor flags. */
enum {
    TG_FLAG_INPUT = 1u << 0,  /* data set by the caller before compute        */
    TG_FLAG_OUTPUT = 1u << 1, /* kept alive to the end of the graph           */
    TG_FLAG_WEIGHT = 1u << 2, /* lives in a weight buffer, never planned      */
};

/* Precision request (op_params[TG_PARAM_PREC]). mul_mat and attention
 * take DEFAULT or F32; conv_2d takes all three, and without TF32 it
 * computes in f32 as every other op does. */
typedef enum tg_prec {
    TG_PREC_DEFAULT = 0, /* the backend may use reduced-precision inputs (bf16) */
    TG_PREC_F32 = 1,     /* compute in f32 with f32 accumulation                */
    TG_PREC_TF32 = 2,    /* conv_2d: the backend may round its f32 inputs to
                            tf32 (10-bit mantissa) for its tensor cores, with
                            f32 accumulation                                    */
} tg_prec;

struct tg_buffer;
struct tg_ctx;

/* A tensor: type, shape (ne, elements per dim), byte strides (nb), the op that
 * produces it and its sources. `data` is the element at index 0 in the address
 * space of its buffer's backend (host memory for the CPU, device memory for
 * CUDA); NULL until allocated. Tensors are owned by their tg_ctx. */
typedef struct tg_tensor {
    tg_type type;
    int64_t ne[TG_MAX_DIMS];
    size_t nb[TG_MAX_DIMS];

    tg_op op;
    int32_t op_params[TG_MAX_OP_PARAMS];
    struct tg_tensor *src[TG_MAX_SRC];

    struct tg_tensor *view_src; /* the tensor whose storage a view shares */
    size_t view_offs;           /* byte offset into view_src's storage    */

    struct tg_buffer *buffer;
    void *data;

    uint32_t flags;
    int32_t id;                 /* index within its context */
    struct tg_ctx *ctx;
    void *extra;                /* free for backends and the planner */
    char name[TG_MAX_NAME];
} tg_tensor;

int64_t tg_nelements(const tg_tensor *t);
int64_t tg_nrows(const tg_tensor *t);          /* ne[1]*ne[2]*ne[3] */
size_t tg_nbytes(const tg_tensor *t);          /* bytes spanned, from strides */
bool tg_is_contiguous(const tg_tensor *t);
bool tg_same_shape(const tg_tensor *a, const tg_tensor *b);
tg_tensor *tg_set_name(tg_tensor *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* --------------------------------------------------------------- context */

/* A context owns tensor metadata and graphs (never tensor data). */
typedef struct tg_ctx tg_ctx;

/* Returns a new context or NULL when out of memory; free with tg_ctx_free. */
tg_ctx *tg_ctx_new(void);
void tg_ctx_free(tg_ctx *ctx);
/* NULL when every constructor so far succeeded; otherwise a new status (the
 * caller owns it) copying the first error. The error stays recorded. */
tg_status tg_ctx_check(const tg_ctx *ctx);
int tg_ctx_n_tensors(const tg_ctx *ctx);
tg_tensor *tg_ctx_tensor(const tg_ctx *ctx, int i);
/* Finds a tensor by name; NULL when absent. */
tg_tensor *tg_ctx_find(const tg_ctx *ctx, const char *name);

/* --------------------------------------------------- tensor constructors */
/* All return a tensor owned by ctx, or NULL with the error recorded in ctx. */

tg_tensor *tg_new_tensor(tg_ctx *ctx, tg_type type, int n_dims, const int64_t *ne);
tg_tensor *tg_new_1d(tg_ctx *ctx, tg_type type, int64_t ne0);
tg_tensor *tg_new_2d(tg_ctx *ctx, tg_type type, int64_t ne0, int64_t ne1);
tg_tensor *tg_new_3d(tg_ctx *ctx, tg_type type, int64_t ne0, int64_t ne1, int64_t ne2);
tg_tensor *tg_new_4d(tg_ctx *ctx, tg_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                     int64_t ne3);

/* Views: share storage with a, compute nothing. tg_view's nb holds n_dims
 * byte strides, nb[0] (the element stride) included; NULL means contiguous. */
tg_tensor *tg_view(tg_ctx *ctx, tg_tensor *a, int n_dims, const int64_t *ne,
                   const size_t *nb, size_t offset);
tg_tensor *tg_view_1d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, size_t offset);
tg_tensor *tg_view_2d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, int64_t ne1, size_t nb1,
                      size_t offset);
tg_tensor *tg_view_3d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                      size_t nb1, size_t nb2, size_t offset);
/* Reshape needs a contiguous a and the same element count. */
tg_tensor *tg_reshape(tg_ctx *ctx, tg_tensor *a, int n_dims, const int64_t *ne);
tg_tensor *tg_reshape_2d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, int64_t ne1);
tg_tensor *tg_reshape_3d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
tg_tensor *tg_reshape_4d(tg_ctx *ctx, tg_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                         int64_t ne3);
/* permute: source dim i becomes dim axes[i] of the result (ggml's convention). */
tg_tensor *tg_permute(tg_ctx *ctx, tg_tensor *a, int ax0, int ax1, int ax2, int ax3);
tg_tensor *tg_transpose(tg_ctx *ctx, tg_tensor *a); /* swaps dims 0 and 1 */
/* spec 2.4, rel_shift: a is [2T-1, T, H, B] (BDraw); the result is the view
 * [T, T, H, B] with out[j, i] = a[(T-1) - i + j, i]: row stride nb1 - nb0,
 * offset (T-1)*nb0. */
tg_tensor *tg_rel_shift(tg_ctx *ctx, tg_tensor *a);

/* ---------------------------------------------------------- op constructors */
/* Shapes are checked here; a mismatch records an error naming the op, the
 * tensors and their shapes. Unless stated otherwise ops take and return F32. */

/* rows of a (F32/F16/BF16, [n, rows, d2, d3]) picked by ids (I32, [k, d2, d3]):
 * result F32 [n, k, d2, d3]. */
tg_tensor *tg_get_rows(tg_ctx *ctx, tg_tensor *a, tg_tensor *ids);
/* Writes rows of src (F32 [n, k, d2, d3]) into dst (F32/F16/BF16, [n, rows, d2, d3])
 * at rows ids (I32 [k, d2, d3]), in place; returns a view of dst that depends
 * on the write. Used for the KV cache, where the position is data. */
tg_tensor *tg_set_rows(tg_ctx *ctx, tg_tensor *dst, tg_tensor *src, tg_tensor *ids);

/* Elementwise with broadcasting: each dim of b equals a's or is 1 (and the
 * other way round); the result has the larger of each. F32. */
tg_tensor *tg_add(tg_ctx *ctx, tg_tensor *a, tg_tensor *b);
tg_tensor *tg_sub(tg_ctx *ctx, tg_tensor *a, tg_tensor *b);
tg_tensor *tg_mul(tg_ctx *ctx, tg_tensor *a, tg_tensor *b);
tg_tensor *tg_div(tg_ctx *ctx, tg_tensor *a, tg_tensor *b);
tg_tensor *tg_scale(tg_ctx *ctx, tg_tensor *a, float s);

/* Matrix product, ggml's orientation: a is the weight [K, N, A2, A3] (F32, F16
 * or BF16), b the activations [K, M, B2, B3] (F32), B2 a multiple of A2 and B3
 * of A3 (a broadcasts: batch i of b uses matrix i / (B2/A2) of a, so each weight
 * serves consecutive batches); result F32 [N, M, B2, B3],
 * out[n,m] = sum_k a[k,n]b[k,m].
 * a and b may be non-contiguous in dims >= 1. */
tg_tensor *tg_mul_mat(tg_ctx *ctx, tg_tensor *a, tg_tensor *b);
/* Sets the precision request of a mul_mat, attention or conv_2d node (see
 * tg_prec for which takes which); returns t. */
tg_tensor *tg_set_prec(tg_tensor *t, tg_prec prec);

/* 2-D convolution (groups = 1), PyTorch semantics with H = dim 1, W = dim 0:
 * kernel [KW, KH, Cin, Cout] (F32), input [W, H, Cin, N] (F32), result
 * [OW, OH, Cout, N] with O = (I + 2p - K)/s + 1. */
tg_tensor *tg_conv_2d(tg_ctx *ctx, tg_tensor *kernel, tg_tensor *input, int s0, int s1,
                      int p0, int p1);
/* Depthwise 2-D: kernel [KW, KH, 1, C], input [W, H, C, N], result [OW, OH, C, N]. */
tg_tensor *tg_conv_2d_dw(tg_ctx *ctx, tg_tensor *kernel, tg_tensor *input, int s0, int s1,
                         int p0, int p1);
/* Depthwise 1-D along dim 1, channels innermost: kernel [K, C], input [C, T, N],
 * result [C, OT, N] with OT = (T + 2p - K)/s + 1. */
tg_tensor *tg_conv_1d_dw(tg_ctx *ctx, tg_tensor *kernel, tg_tensor *input, int s, int p);

/* Layer norm over dim 0: (x - mean)/sqrt(var + eps) [* w] [+ b]; w and b are
 * optional (NULL) F32 vectors of a->ne[0]. */
tg_tensor *tg_layer_norm(tg_ctx *ctx, tg_tensor *a, tg_tensor *w, tg_tensor *b, float eps);

tg_tensor *tg_relu(tg_ctx *ctx, tg_tensor *a);
tg_tensor *tg_silu(tg_ctx *ctx, tg_tensor *a);
tg_tensor *tg_sigmoid(tg_ctx *ctx, tg_tensor *a);
/* Natural log (op "log"; tg_log is the logger) and square root, elementwise
 * (F32; IEEE results outside the domain: log(0) = -inf, log(-1) and
 * sqrt(-1) NaN). The log-mel frontend's. */
tg_tensor *tg_ln(tg_ctx *ctx, tg_tensor *a);
tg_tensor *tg_sqrt(tg_ctx *ctx, tg_tensor *a);
/* GLU over dim 0: first half times sigmoid of the second; ne[0] must be even. */
tg_tensor *tg_glu(tg_ctx *ctx, tg_tensor *a);

/* softmax over dim 0 of (a*scale + mask); mask optional, F32, ne[0] and ne[1]
 * equal to a's and dims 2, 3 equal or 1 (broadcast). -INFINITY masks; a row
 * masked entirely gives zeros. */
tg_tensor *tg_soft_max(tg_ctx *ctx, tg_tensor *a, tg_tensor *mask, float scale);

/* Attention in one op: q [D, Tq, H, B], k [D, Tk, H, B], v [Dv, Tk, H, B] (F32;
 * k and v may also be F16 or BF16), mask optional additive F32 [Tk, Tq, H or 1, B or 1]
 * (relative-position bias and -INFINITY masking both go here). Result F32
 * [Dv, H, Tq, B]: heads adjacent, so a reshape to [Dv*H, Tq, B] concatenates
 * them. out = softmax(q·kᵀ·scale + mask)·v; a fully masked row gives zeros. */
tg_tensor *tg_attention(tg_ctx *ctx, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                        tg_tensor *mask, float scale);

/* Copies a into b (same element count; any types, b may be a view); returns a
 * view of b that depends on the copy. */
tg_tensor *tg_cpy(tg_ctx *ctx, tg_tensor *a, tg_tensor *b);
/* A new contiguous tensor of type `type` holding a's values. */
tg_tensor *tg_cast(tg_ctx *ctx, tg_tensor *a, tg_type type);
tg_tensor *tg_cont(tg_ctx *ctx, tg_tensor *a); /* tg_cast to a's own type */

/* Concatenates along dim; all other dims equal; same type (F32 or I32). */
tg_tensor *tg_concat(tg_ctx *ctx, tg_tensor *a, tg_tensor *b, int dim);
/* Zero padding: lo[i] before and hi[i] after along dim i (F32). */
tg_tensor *tg_pad(tg_ctx *ctx, tg_tensor *a, const int lo[TG_MAX_DIMS],
                  const int hi[TG_MAX_DIMS]);
/* Index of the largest value along dim 0 (first of ties): I32 [ne1, ne2, ne3]. */
tg_tensor *tg_argmax(tg_ctx *ctx, tg_tensor *a);
/* Sum / mean over dim 0: F32 [1, ne1, ne2, ne3]. */
tg_tensor *tg_sum_rows(tg_ctx *ctx, tg_tensor *a);
tg_tensor *tg_mean(tg_ctx *ctx, tg_tensor *a);

/* ----------------------------------------------------------------- graphs */

/* A graph: the nodes needed to compute its outputs, in topological order.
 * Owned by its context. */
typedef struct tg_graph tg_graph;

tg_graph *tg_graph_new(tg_ctx *ctx);
/* Adds t and everything it depends on; t is flagged as an output. Returns an
 * error when t is NULL (a failed constructor: the context's error is copied). */
tg_status tg_graph_build(tg_graph *g, tg_tensor *t);
int tg_graph_n_nodes(const tg_graph *g);
tg_tensor *tg_graph_node(const tg_graph *g, int i);
int tg_graph_n_leafs(const tg_graph *g);
tg_tensor *tg_graph_leaf(const tg_graph *g, int i);

/* -------------------------------------------------------------- backends */

typedef struct tg_backend tg_backend;
typedef struct tg_buffer tg_buffer;

/* Returns true to stop the computation between nodes / segments. */
typedef bool (*tg_abort_fn)(void *user);

/* n_threads <= 0: one per online core. Free with tg_backend_free. */
tg_status tg_backend_cpu_new(int n_threads, tg_backend **out_backend);
/* TG_ERR_UNSUPPORTED when built without CUDA or when no driver/device is
 * present; the message says which. Free with tg_backend_free. */
tg_status tg_backend_cuda_new(int device, tg_backend **out_backend);
/* Accepts NULL. */
void tg_backend_free(tg_backend *backend);
const char *tg_backend_name(const tg_backend *backend); /* owned by backend */
bool tg_backend_is_cpu(const tg_backend *backend);
bool tg_backend_supports_op(tg_backend *backend, const tg_tensor *node);
void tg_backend_set_abort(tg_backend *backend, tg_abort_fn fn, void *user);
/* Computes the nodes of g on this backend; every tensor must be allocated in
 * buffers of this backend (or host buffers it can read). Blocking. */
tg_status tg_backend_graph_compute(tg_backend *backend, tg_graph *g);
tg_status tg_backend_synchronize(tg_backend *backend);
/* NULL while the backend can compute; after a device fault that left it
 * unusable (a CUDA context's sticky error), the text of that fault, owned by
 * the backend. Every later compute fails at once (TG_ERR_DEVICE); free the
 * backend, after everything in its buffers, and make a new one. An
 * out-of-memory error never fails a backend. */
const char *tg_backend_failed(const tg_backend *backend);

/* Test hook (fault injection, as base's tg_file_fail_io_after): the next n
 * operations of `kind`, on any backend, succeed, and the `times` after them
 * fail (times < 0: every one after), then the hook is off; n < 0 turns it
 * off now. TG_BACKEND_FAULT_COMPUTE: a graph compute fails with
 * TG_ERR_DEVICE and leaves its backend failed (tg_backend_failed), as a
 * device fault leaves a GPU context; a backend with a fault of its own (the
 * CUDA backend: a launch the driver rejects) fails by that.
 * TG_BACKEND_FAULT_ALLOC: a buffer allocation (tg_backend_buffer_alloc)
 * fails with TG_ERR_NO_MEMORY, as on a device whose memory is full. Not
 * thread-safe; tests only. */
typedef enum tg_backend_fault { TG_BACKEND_FAULT_COMPUTE, TG_BACKEND_FAULT_ALLOC } tg_backend_fault;
void tg_backend_fail_after(tg_backend_fault kind, long n, long times);

/* What a backend has used so far: memory of the buffers the runtime made on
 * it (tg_backend_buffer_alloc; wrapped host memory is not counted) plus its
 * own working memory (a GPU backend's scratch, workspace and staging), now
 * and at most at once; and the time of its graph computes: wall time from
 * the call to the finished result, and the host's part of it, submitting
 * work (for a GPU backend: planning and launches, or a graph launch), and
 * the host time a compute spent preparing work once, so that a later compute
 * of the same shapes does not pay it again (a GPU backend's kernels loaded,
 * product plans made and their library kernels loaded at first launch,
 * graphs captured or updated, and the wait for work prepared ahead on a
 * thread; the CPU backend has none); apart from the computes, the host time
 * spent allocating buffers (tg_backend_buffer_alloc, and a GPU backend's
 * own scratch as a compute grows it). */
typedef struct tg_backend_stats {
    size_t mem_in_use, mem_peak;   /* bytes */
    double compute_us, submit_us;  /* summed over computes */
    double setup_us;               /* first-use preparation: the sum of its parts */
    double setup_kernels_us, setup_plans_us, setup_first_us, setup_graphs_us, setup_wait_us; /* in that order */
    double alloc_us;               /* buffers allocated */
    int64_t n_computes;
} tg_backend_stats;
/* Fills *out (zeros for NULL backend). */
void tg_backend_get_stats(const tg_backend *backend, tg_backend_stats *out);
/* Starts the peak again from what is in use now, and the times from zero. */
void tg_backend_reset_stats(tg_backend *backend);

/* A new buffer of at least size bytes; free with tg_buffer_free. */
tg_status tg_backend_buffer_alloc(tg_backend *backend, size_t size, tg_buffer **out_buffer);
/* Wraps host memory that outlives the buffer (an mmap'd checkpoint, say); the
 * CPU backend uses it in place, a GPU backend maps or registers it. Free the
 * wrapper with tg_buffer_free; the memory itself stays the caller's. */
tg_status tg_backend_buffer_from_host(tg_backend *backend, void *ptr, size_t size,
                                      tg_buffer **out_buffer);
/* size bytes of host memory for inputs uploaded call after call: a GPU
 * backend gives page-locked memory (a CPU backend, plain memory), which
 * large copies into its buffers (tg_tensor_set; on CUDA from 32 MiB, below
 * that they go through a staging ring either way) read at the bus's rate.
 * NULL when none can be had; the caller may fall back to tg_malloc. The
 * caller owns it: free it with tg_backend_host_free on the same backend,
 * before tg_backend_free. */
void *tg_backend_host_alloc(tg_backend *backend, size_t size);
void tg_backend_host_free(tg_backend *backend, void *ptr);
void tg_buffer_free(tg_buffer *buffer);
size_t tg_buffer_size(const tg_buffer *buffer);
tg_backend *tg_buffer_backend(const tg_buffer *buffer);
tg_status tg_buffer_clear(tg_buffer *buffer, uint8_t value);

/* Places t (not a view) at offset in buffer. Views of t do not move with it
 * here: their data is resolved from their source when a graph holding them is
 * allocated by the scheduler or computed (tg_backend_graph_compute). */
tg_status tg_tensor_place(tg_tensor *t, tg_buffer *buffer, size_t offset);
/* Allocates every tensor of ctx that has no data and is not a view in one new
 * buffer of backend (weights, typically); the caller owns *out_buffer. */
tg_status tg_ctx_alloc_tensors(tg_ctx *ctx, tg_backend *backend, tg_buffer **out_buffer);

/* Byte-range copies between host memory and an allocated tensor's storage.
 * offset and size are in bytes of t's (contiguous) storage; tg_tensor_set
 * refuses a view that is not contiguous (INVALID_ARG). */
tg_status tg_tensor_set(tg_tensor *t, const void *data, size_t offset, size_t size);
tg_status tg_tensor_get(const tg_tensor *t, void *data, size_t offset, size_t size);
/* Copies between two allocated tensors of equal size and type on any backends.
 * Bytes move as they lie, so both must be contiguous, or have the same shape
 * and strides with dst not a strided view (INVALID_ARG otherwise). */
tg_status tg_tensor_copy(const tg_tensor *src, tg_tensor *dst);

/* -------------------------------------------------------------- scheduler */

/* The scheduler places each node on a backend (where its weights are, unless
 * that backend does not support the op, then on the CPU; nodes without weights
 * follow their inputs), splits the graph where the backend changes, inserts
 * the copies at the seams and plans one arena per backend, reusing memory once
 * an intermediate's last reader has run. */
typedef struct tg_sched tg_sched;

/* backends: in priority order; one of them must be a CPU backend (the fallback).
 * The scheduler borrows them; they must outlive it. Free with tg_sched_free. */
tg_status tg_sched_new(tg_backend **backends, int n_backends, tg_sched **out_sched);
void tg_sched_free(tg_sched *sched);
/* Assigns, splits, plans and allocates (arenas grow, never shrink) for g.
 * After it, inputs can be set with tg_tensor_set. */
tg_status tg_sched_alloc(tg_sched *sched, tg_graph *g);
/* Runs g (allocating first if it was not). Blocking. */
tg_status tg_sched_compute(tg_sched *sched, tg_graph *g);
/* As tg_sched_compute, but where g runs on one backend, returns once its
 * work is queued there (a GPU's replayed graph), so a caller can queue the
 * next compute while this one runs. tg_sched_synchronize waits for all of
 * it; read outputs after it (on CUDA, inputs set meanwhile with
 * tg_tensor_set go in order behind the queued work). Errors of the work
 * come back from a later call. Where g spans backends, or a backend
 * computes synchronously (the CPU), this is tg_sched_compute. */
tg_status tg_sched_compute_async(tg_sched *sched, tg_graph *g);
/* Waits for the work of every backend of the scheduler. */
tg_status tg_sched_synchronize(tg_sched *sched);
/* Frees the arenas (and forgets the last allocation): what the graphs it
 * placed held is gone, and the next tg_sched_alloc plans and allocates
 * anew. For giving memory back after running out of it. */
void tg_sched_release(tg_sched *sched);
int tg_sched_n_splits(const tg_sched *sched);
int tg_sched_n_copies(const tg_sched *sched);
/* The backend a node of the last allocated graph was placed on. */
tg_backend *tg_sched_node_backend(const tg_sched *sched, const tg_tensor *node);
/* Bytes of the arena planned for backend in the last allocation (the peak). */
size_t tg_sched_planned_bytes(const tg_sched *sched, const tg_backend *backend);

#ifdef __cplusplus
}
#endif

#endif /* TG_H */
