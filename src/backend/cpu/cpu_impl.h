/*
 * cpu_impl.h: what the files of the CPU backend share (internal).
 *
 * The backend is split by purpose: cpu_backend.c (the backend and buffer
 * tables, graph compute, ISA choice), one file per family of ops
 * (cpu_elem.c, cpu_norm.c, cpu_attn.c, cpu_conv.c, cpu_matmul.c) and the
 * vector kernels (cpu_kernels.c portable, cpu_kernels_avx2.c,
 * cpu_kernels_avx512.c). Op files do the index arithmetic for arbitrary
 * strides and broadcasting; every inner loop over contiguous floats goes
 * through the kernel table `cpu_kernels`, chosen once per backend at creation
 * from what the CPU supports (or CT_CPU_ISA=scalar|avx2|avx512). That keeps
 * the ISA-specific files small and lets tests run the same graph on every
 * path and compare.
 *
 * Not here: anything a caller outside src/backend/cpu should use; the public
 * entry point is tg_backend_cpu_new in tg.h.
 */
#ifndef TG_CPU_IMPL_H
#define TG_CPU_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend_impl.h"
#include "base.h"
#include "op_params.h"
#include "tg.h"

/* Elementwise binary ops understood by cpu_kernels.binary. */
enum cpu_binop { CPU_ADD, CPU_SUB, CPU_MUL, CPU_DIV };
/* Elementwise unary ops understood by cpu_kernels.unary (p: the scale). */
enum cpu_unop { CPU_RELU, CPU_SILU, CPU_SIGMOID, CPU_SCALE, CPU_LOG, CPU_SQRT };

/* The vector kernels of one instruction set. Every function works on
 * contiguous arrays; n may be any count (tails are handled inside). */
typedef struct cpu_kernels {
    const char *name; /* "scalar", "avx2", "avx512" */

    /* GEMM register tile: C[MR][NR] (row stride ldc floats) = or +=
     * sum_k b[i*ldb + k] * ap[k*NR + j] over k < kc: B is read in place
     * (MR rows, contiguous in k), A from its packed panel. */
    int mr, nr;
    void (*gemm)(int64_t kc, const float *b, int64_t ldb, const float *ap, float *c, int64_t ldc,
                 bool acc);
    /* Optional: the same for an edge tile, writing only rows < mr and
     * columns < nr (b still has MR readable rows). NULL: the driver runs
     * gemm into a scratch tile and copies. */
    void (*gemm_part)(int64_t kc, const float *b, int64_t ldb, const float *ap, float *c,
                      int64_t ldc, bool acc, int mr, int nr);
    /* Packs nrows (<= nr) rows of a weight matrix (type t, k contiguous, row
     * stride rs bytes) over k in [0, kc) into ap[k*nr + r] as f32, zero
     * filling rows nrows..nr-1. */
    void (*pack_a)(tg_type t, const void *a, size_t rs, int nrows, int64_t kc, int nr, float *ap);

    /* Conversions between f32 and f32/f16/bf16 (t). f32 -> bf16/f16 round to
     * nearest even as tg_f32_to_bf16 / tg_f32_to_f16 do. */
    void (*to_f32)(tg_type t, const void *x, float *y, int64_t n);
    void (*from_f32)(tg_type t, const float *x, void *y, int64_t n);

    /* z = x op y; z may alias x or y. */
    void (*binary)(enum cpu_binop op, int64_t n, float *z, const float *x, const float *y);
    /* z = x op s (s a scalar, the broadcast case). */
    void (*binary_s)(enum cpu_binop op, int64_t n, float *z, const float *x, float s);
    /* z = s op y. */
    void (*binary_sv)(enum cpu_binop op, int64_t n, float *z, float s, const float *y);
    void (*unary)(enum cpu_unop op, int64_t n, float *y, const float *x, float p);
    /* y[i] = a[i] * sigmoid(g[i]). */
    void (*glu)(int64_t n, float *y, const float *a, const float *g);

    float (*max)(int64_t n, const float *x);
    /* y[i] = exp(x[i] - m); returns the sum of y (accumulated in f32 lanes,
     * then in double). y may alias x. */
    double (*exp_sum)(int64_t n, float *y, const float *x, float m);
    double (*sum)(int64_t n, const float *x);
    /* sum (x[i] - m)^2 */
    double (*sum_sq_dev)(int64_t n, const float *x, float m);
    /* y = (x - mean) * rstd [* w] [+ b]; w, b may be NULL. */
    void (*norm)(int64_t n, float *y, const float *x, float mean, float rstd, const float *w,
                 const float *b);
    float (*dot)(int64_t n, const float *x, const float *y);
    /* y += a * x */
    void (*axpy)(int64_t n, float a, const float *x, float *y);
    /* y[i] += x[i] * w[i] */
    void (*mad)(int64_t n, float *y, const float *x, const float *w);
} cpu_kernels;

extern const cpu_kernels cpu_kernels_scalar;
/* Filled in by the ISA files; they start from the scalar table and replace
 * what they vectorise. */
void cpu_kernels_avx2_init(cpu_kernels *k);
void cpu_kernels_avx512_init(cpu_kernels *k);

typedef struct cpu_backend {
    tg_backend base;           /* first: a cpu_backend* is a tg_backend* */
    tg_threadpool *pool;
    int n_threads;
    double serial_work;        /* cpu_parallel's threshold (tests set 0) */
    cpu_kernels k;
    char name[48];

    /* Scratch shared by one op at a time (packed panels, per-thread rows);
     * grows, never shrinks. Slot 0 belongs to the innermost user (cpu_gemm,
     * the row ops); slot 1 to ops that call cpu_gemm (conv_2d). */
    void *scratch[2];
    size_t scratch_size[2];
} cpu_backend;

static inline cpu_backend *cpu_of(tg_backend *b) {
    return (cpu_backend *)b;
}

/* Ensures scratch slot 0 (or 1: cpu_scratch_outer) holds at least size
 * bytes, 64-byte aligned; the contents do not survive a growth. */
tg_status cpu_scratch(cpu_backend *be, size_t size, void **out);
tg_status cpu_scratch_outer(cpu_backend *be, size_t size, void **out);

/* Runs fn over the pool, or on the calling thread alone when the op is too
 * small (work: its element count or multiply-adds) for waking the other
 * threads to pay. Ops split work by rows or items whose arithmetic does not
 * depend on the split, so the result is the same either way. */
void cpu_parallel(cpu_backend *be, tg_task_fn fn, void *arg, double work);

/* The ISA a fresh backend would pick: the best the CPU has, or CT_CPU_ISA. */
const char *cpu_isa_choose(void);
/* Fills k for the named ISA ("scalar", "avx2", "avx512"); false when this
 * CPU (or this build) cannot run it. */
bool cpu_kernels_select(const char *isa, cpu_kernels *k);

/* Splits n items into nth nearly equal ranges; thread ith gets [*lo, *hi). */
static inline void cpu_range(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

/* Address of element (i0, i1, i2, i3) of t. */
static inline void *cpu_at(const tg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* One element of a F32/F16/BF16/I32/I64 tensor as float / double. */
static inline float cpu_load_f32(tg_type t, const void *p) {
    switch (t) {
    case TG_F32: return *(const float *)p;
    case TG_F16: return tg_f16_to_f32(*(const uint16_t *)p);
    case TG_BF16: return tg_bf16_to_f32(*(const uint16_t *)p);
    case TG_I32: return (float)*(const int32_t *)p;
    case TG_I64: return (float)*(const int64_t *)p;
    default: return 0.0f;
    }
}

/* t for messages: its name in quotes, or "#id" when it has none (most
 * intermediate nodes), so an error never names a tensor as ''. */
#define CPU_LABEL_SIZE (TG_MAX_NAME + 16)
static inline const char *cpu_label(const tg_tensor *t, char buf[CPU_LABEL_SIZE]) {
    if (t->name[0]) snprintf(buf, CPU_LABEL_SIZE, "'%s'", t->name);
    else snprintf(buf, CPU_LABEL_SIZE, "#%d", (int)t->id);
    return buf;
}

/* Ops (one function each). node is allocated; its sources too. */
tg_status cpu_op_get_rows(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_set_rows(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_binary(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_unary(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_glu(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_cpy(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_concat(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_pad(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_argmax(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_sum_rows(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_layer_norm(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_soft_max(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_attention(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_mul_mat(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_conv_2d(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_conv_2d_dw(cpu_backend *be, tg_tensor *node);
tg_status cpu_op_conv_1d_dw(cpu_backend *be, tg_tensor *node);

/* A matrix operand of cpu_gemm: element (k, j) is at
 * data + k*sk + j*sj bytes, of type type (F32/F16/BF16; the B operand F32). */
typedef struct cpu_mat {
    const void *data;
    tg_type type;
    size_t sk, sj;
} cpu_mat;

/* C[m, n] (= or +=) sum_k A(k, n) * B(k, m) for m < M, n < N, k < K; C is f32
 * with c[m*ldc + n]. Runs on the backend's pool (enters its own regions), so
 * call it from outside a region. */
tg_status cpu_gemm(cpu_backend *be, int64_t M, int64_t N, int64_t K, const cpu_mat *A,
                   const cpu_mat *B, float *C, int64_t ldc, bool acc);

/* Bytes of per-thread scratch cpu_gemm_st needs for K (to size buffers). */
size_t cpu_gemm_st_scratch(const cpu_kernels *k, int64_t M, int64_t K);
/* The single-thread form, for ops that parallelise outside it (attention,
 * convolution): ws is a caller buffer of cpu_gemm_st_scratch bytes,
 * 64-byte aligned. */
void cpu_gemm_st(const cpu_kernels *k, int64_t M, int64_t N, int64_t K, const cpu_mat *A,
                 const cpu_mat *B, float *C, int64_t ldc, bool acc, void *ws);

#endif
