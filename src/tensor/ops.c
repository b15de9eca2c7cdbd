/*
 * ops.c: the op constructors. Each checks its sources' types and shapes,
 * records an error naming the op, the tensors and their shapes when they do
 * not fit, and otherwise makes the result tensor with op, src and op_params
 * laid out exactly as op_params.h says (the backends read them from there).
 *
 * A NULL source means an earlier constructor failed: the constructor returns
 * NULL without recording anything, so the first error stays the one reported.
 *
 * Not here: any computation. Constructors allocate metadata only.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "op_params.h"
#include "tensor_internal.h"

const char *tg_op_name(tg_op op) {
    static const char *const names[TG_OP_COUNT] = {
        [TG_OP_NONE] = "none",           [TG_OP_VIEW] = "view",
        [TG_OP_GET_ROWS] = "get_rows",   [TG_OP_SET_ROWS] = "set_rows",
        [TG_OP_ADD] = "add",             [TG_OP_SUB] = "sub",
        [TG_OP_MUL] = "mul",             [TG_OP_DIV] = "div",
        [TG_OP_SCALE] = "scale",         [TG_OP_MUL_MAT] = "mul_mat",
        [TG_OP_CONV_2D] = "conv_2d",     [TG_OP_CONV_2D_DW] = "conv_2d_dw",
        [TG_OP_CONV_1D_DW] = "conv_1d_dw", [TG_OP_LAYER_NORM] = "layer_norm",
        [TG_OP_RELU] = "relu",           [TG_OP_SILU] = "silu",
        [TG_OP_SIGMOID] = "sigmoid",     [TG_OP_GLU] = "glu",
        [TG_OP_SOFT_MAX] = "soft_max",   [TG_OP_ATTENTION] = "attention",
        [TG_OP_CPY] = "cpy",             [TG_OP_CONCAT] = "concat",
        [TG_OP_PAD] = "pad",             [TG_OP_ARGMAX] = "argmax",
        [TG_OP_SUM_ROWS] = "sum_rows",   [TG_OP_MEAN] = "mean",
        [TG_OP_LOG] = "log",             [TG_OP_SQRT] = "sqrt",
    };
    if ((int)op < 0 || op >= TG_OP_COUNT || !names[op]) return "invalid-op";
    return names[op];
}

/* ------------------------------------------------------------- checks */

#define TYPES_F32 (1u << TG_F32)
#define TYPES_FLOAT ((1u << TG_F32) | (1u << TG_F16) | (1u << TG_BF16))
#define TYPES_ALL ((1u << TG_TYPE_COUNT) - 1u)

static const char *type_list(unsigned mask, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = 0;
    for (int t = 0; t < TG_TYPE_COUNT; t++) {
        if (!(mask & (1u << t))) continue;
        int w = snprintf(buf + n, size - n, "%s%s", n ? " or " : "", tg_type_name((tg_type)t));
        if (w < 0 || (size_t)w >= size - n) break;
        n += (size_t)w;
    }
    return buf;
}

/* True when t's type is in mask; otherwise records "<op>: <role> '<name>'
 * [shape] has type X; expected Y". */
static bool check_type(tg_ctx *ctx, const char *op, const char *role, const tg_tensor *t,
                       unsigned mask) {
    if ((unsigned)t->type < TG_TYPE_COUNT && (mask & (1u << t->type))) return true;
    char d[TG_DESC_SIZE], types[64];
    tg_ctx_errorf(ctx, "%s: %s %s has type %s; expected %s", op, role,
                  tg_tensor_desc(t, d, sizeof d), tg_type_name(t->type),
                  type_list(mask, types, sizeof types));
    return false;
}

/* Records "<op>: <ra> <a> and <rb> <b>: <reason>". */
__attribute__((format(printf, 7, 8))) static void pair_error(tg_ctx *ctx, const char *op,
                                                             const char *ra, const tg_tensor *a,
                                                             const char *rb, const tg_tensor *b,
                                                             const char *fmt, ...) {
    if (!ctx || ctx->error) return;
    char da[TG_DESC_SIZE], db[TG_DESC_SIZE], why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    tg_ctx_errorf(ctx, "%s: %s %s and %s %s: %s", op, ra, tg_tensor_desc(a, da, sizeof da), rb,
                  tg_tensor_desc(b, db, sizeof db), why);
}

/* Records "<op>: <role> <t>: <reason>". */
__attribute__((format(printf, 5, 6))) static void one_error(tg_ctx *ctx, const char *op,
                                                            const char *role, const tg_tensor *t,
                                                            const char *fmt, ...) {
    if (!ctx || ctx->error) return;
    char d[TG_DESC_SIZE], why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    tg_ctx_errorf(ctx, "%s: %s %s: %s", op, role, tg_tensor_desc(t, d, sizeof d), why);
}

/* Requires dim 0 to be dense (nb[0] == element size), which every kernel
 * reading rows relies on. */
static bool check_rows_dense(tg_ctx *ctx, const char *op, const char *role, const tg_tensor *t) {
    if (t->ne[0] <= 1 || t->nb[0] == tg_type_size(t->type)) return true;
    one_error(ctx, op, role, t, "dim 0 is strided (nb[0] = %zu); use tg_cont first", t->nb[0]);
    return false;
}

static tg_tensor *new_result(tg_ctx *ctx, tg_op op, tg_type type, const int64_t ne[TG_MAX_DIMS],
                             tg_tensor *s0, tg_tensor *s1, tg_tensor *s2, tg_tensor *s3) {
    tg_tensor *t = tg_ctx_new_tensor(ctx, tg_op_name(op), type, ne);
    if (!t) return NULL;
    t->op = op;
    t->src[0] = s0;
    t->src[1] = s1;
    t->src[2] = s2;
    t->src[3] = s3;
    return t;
}

/* A result that writes into dst's storage: same shape and strides as dst,
 * view_src = dst (op_params.h: in-place writers). */
static tg_tensor *new_inplace(tg_ctx *ctx, tg_op op, tg_tensor *dst, tg_tensor *s0,
                              tg_tensor *s1) {
    tg_tensor *t = new_result(ctx, op, dst->type, dst->ne, s0, s1, NULL, NULL);
    if (!t) return NULL;
    memcpy(t->nb, dst->nb, sizeof t->nb);
    t->view_src = dst;
    t->view_offs = 0;
    tg_tensor_resolve_view(t);
    return t;
}

/* ------------------------------------------------------------ rows */

tg_tensor *tg_get_rows(tg_ctx *ctx, tg_tensor *a, tg_tensor *ids) {
    const char *op = "get_rows";
    if (!ctx || !a || !ids) return NULL;
    if (!check_type(ctx, op, "a", a, TYPES_FLOAT) || !check_type(ctx, op, "ids", ids, 1u << TG_I32))
        return NULL;
    if (ids->ne[1] != a->ne[2] || ids->ne[2] != a->ne[3] || ids->ne[3] != 1) {
        pair_error(ctx, op, "a", a, "ids", ids,
                   "ids must be [k, a.ne[2], a.ne[3]] = [k,%lld,%lld]", (long long)a->ne[2],
                   (long long)a->ne[3]);
        return NULL;
    }
    if (!check_rows_dense(ctx, op, "a", a)) return NULL;
    int64_t ne[TG_MAX_DIMS] = {a->ne[0], ids->ne[0], a->ne[2], a->ne[3]};
    return new_result(ctx, TG_OP_GET_ROWS, TG_F32, ne, a, ids, NULL, NULL);
}

tg_tensor *tg_set_rows(tg_ctx *ctx, tg_tensor *dst, tg_tensor *src, tg_tensor *ids) {
    const char *op = "set_rows";
    if (!ctx || !dst || !src || !ids) return NULL;
    if (!check_type(ctx, op, "dst", dst, (1u << TG_F32) | (1u << TG_F16) | (1u << TG_BF16)) ||
        !check_type(ctx, op, "src", src, TYPES_F32) ||
        !check_type(ctx, op, "ids", ids, 1u << TG_I32))
        return NULL;
    if (src->ne[0] != dst->ne[0]) {
        pair_error(ctx, op, "dst", dst, "src", src, "ne[0] differ (%lld vs %lld)",
                   (long long)dst->ne[0], (long long)src->ne[0]);
        return NULL;
    }
    if (src->ne[2] != dst->ne[2] || src->ne[3] != dst->ne[3]) {
        pair_error(ctx, op, "dst", dst, "src", src, "dims 2 and 3 differ");
        return NULL;
    }
    if (ids->ne[0] != src->ne[1] || ids->ne[1] != src->ne[2] || ids->ne[2] != src->ne[3] ||
        ids->ne[3] != 1) {
        pair_error(ctx, op, "src", src, "ids", ids,
                   "ids must be [src.ne[1], src.ne[2], src.ne[3]] = [%lld,%lld,%lld]",
                   (long long)src->ne[1], (long long)src->ne[2], (long long)src->ne[3]);
        return NULL;
    }
    if (!check_rows_dense(ctx, op, "dst", dst)) return NULL;
    return new_inplace(ctx, TG_OP_SET_ROWS, dst, src, ids);
}

/* ------------------------------------------------------ elementwise */

static tg_tensor *binary(tg_ctx *ctx, tg_op opc, tg_tensor *a, tg_tensor *b) {
    const char *op = tg_op_name(opc);
    if (!ctx || !a || !b) return NULL;
    if (!check_type(ctx, op, "a", a, TYPES_F32) || !check_type(ctx, op, "b", b, TYPES_F32))
        return NULL;
    int64_t ne[TG_MAX_DIMS];
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        if (a->ne[i] != b->ne[i] && a->ne[i] != 1 && b->ne[i] != 1) {
            pair_error(ctx, op, "a", a, "b", b,
                       "ne[%d] differ (%lld vs %lld) and neither is 1 (no broadcast)", i,
                       (long long)a->ne[i], (long long)b->ne[i]);
            return NULL;
        }
        ne[i] = a->ne[i] > b->ne[i] ? a->ne[i] : b->ne[i];
        if (a->ne[i] == 0 || b->ne[i] == 0) ne[i] = 0;
    }
    return new_result(ctx, opc, TG_F32, ne, a, b, NULL, NULL);
}

tg_tensor *tg_add(tg_ctx *ctx, tg_tensor *a, tg_tensor *b) { return binary(ctx, TG_OP_ADD, a, b); }
tg_tensor *tg_sub(tg_ctx *ctx, tg_tensor *a, tg_tensor *b) { return binary(ctx, TG_OP_SUB, a, b); }
tg_tensor *tg_mul(tg_ctx *ctx, tg_tensor *a, tg_tensor *b) { return binary(ctx, TG_OP_MUL, a, b); }
tg_tensor *tg_div(tg_ctx *ctx, tg_tensor *a, tg_tensor *b) { return binary(ctx, TG_OP_DIV, a, b); }

static tg_tensor *unary(tg_ctx *ctx, tg_op opc, tg_tensor *a) {
    if (!ctx || !a) return NULL;
    if (!check_type(ctx, tg_op_name(opc), "a", a, TYPES_F32)) return NULL;
    return new_result(ctx, opc, TG_F32, a->ne, a, NULL, NULL, NULL);
}

tg_tensor *tg_scale(tg_ctx *ctx, tg_tensor *a, float s) {
    tg_tensor *t = unary(ctx, TG_OP_SCALE, a);
    if (t) tg_set_param_f32(t, 0, s);
    return t;
}

tg_tensor *tg_relu(tg_ctx *ctx, tg_tensor *a) { return unary(ctx, TG_OP_RELU, a); }
tg_tensor *tg_silu(tg_ctx *ctx, tg_tensor *a) { return unary(ctx, TG_OP_SILU, a); }
tg_tensor *tg_sigmoid(tg_ctx *ctx, tg_tensor *a) { return unary(ctx, TG_OP_SIGMOID, a); }
tg_tensor *tg_ln(tg_ctx *ctx, tg_tensor *a) { return unary(ctx, TG_OP_LOG, a); }
tg_tensor *tg_sqrt(tg_ctx *ctx, tg_tensor *a) { return unary(ctx, TG_OP_SQRT, a); }

tg_tensor *tg_glu(tg_ctx *ctx, tg_tensor *a) {
    if (!ctx || !a) return NULL;
    if (!check_type(ctx, "glu", "a", a, TYPES_F32)) return NULL;
    if (a->ne[0] % 2 != 0) {
        one_error(ctx, "glu", "a", a, "ne[0] = %lld is odd; GLU splits dim 0 in halves",
                  (long long)a->ne[0]);
        return NULL;
    }
    int64_t ne[TG_MAX_DIMS] = {a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3]};
    return new_result(ctx, TG_OP_GLU, TG_F32, ne, a, NULL, NULL, NULL);
}

/* ------------------------------------------------------------ mul_mat */

tg_tensor *tg_mul_mat(tg_ctx *ctx, tg_tensor *a, tg_tensor *b) {
    const char *op = "mul_mat";
    if (!ctx || !a || !b) return NULL;
    if (!check_type(ctx, op, "a", a, TYPES_FLOAT) || !check_type(ctx, op, "b", b, TYPES_F32))
        return NULL;
    if (a->ne[0] != b->ne[0]) {
        pair_error(ctx, op, "a", a, "b", b, "ne[0] differ (%lld vs %lld)", (long long)a->ne[0],
                   (long long)b->ne[0]);
        return NULL;
    }
    for (int i = 2; i < TG_MAX_DIMS; i++) {
        if (a->ne[i] == 0 || b->ne[i] % a->ne[i] != 0) {
            pair_error(ctx, op, "a", a, "b", b,
                       "b.ne[%d] = %lld is not a multiple of a.ne[%d] = %lld (a broadcasts)", i,
                       (long long)b->ne[i], i, (long long)a->ne[i]);
            return NULL;
        }
    }
    if (!check_rows_dense(ctx, op, "a", a) || !check_rows_dense(ctx, op, "b", b)) return NULL;
    int64_t ne[TG_MAX_DIMS] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    return new_result(ctx, TG_OP_MUL_MAT, TG_F32, ne, a, b, NULL, NULL);
}

tg_tensor *tg_set_prec(tg_tensor *t, tg_prec prec) {
    if (!t) return NULL;
    if (t->op != TG_OP_MUL_MAT && t->op != TG_OP_ATTENTION && t->op != TG_OP_CONV_2D) {
        one_error(t->ctx, "set_prec", "node", t, "op is %s; only mul_mat, attention and conv_2d take a "
                                                 "precision", tg_op_name(t->op));
        return t;
    }
    if (prec != TG_PREC_DEFAULT && prec != TG_PREC_F32 && (prec != TG_PREC_TF32 || t->op != TG_OP_CONV_2D)) {
        one_error(t->ctx, "set_prec", "node", t, "bad precision %d for %s", (int)prec, tg_op_name(t->op));
        return t;
    }
    t->op_params[TG_P_PREC] = (int32_t)prec;
    return t;
}

/* ---------------------------------------------------------- convolutions */

/* Output extent (I + 2p - K)/s + 1, or -1 when the window does not fit. */
static int64_t conv_out(int64_t in, int64_t k, int s, int p) {
    int64_t span = in + 2 * (int64_t)p - k;
    if (span < 0) return -1;
    return span / s + 1;
}

static bool check_conv_params(tg_ctx *ctx, const char *op, const tg_tensor *kernel, int s0,
                              int s1, int p0, int p1) {
    if (s0 < 1 || s1 < 1 || p0 < 0 || p1 < 0) {
        one_error(ctx, op, "kernel", kernel,
                  "bad stride/padding (s0 %d, s1 %d, p0 %d, p1 %d): strides must be >= 1 and "
                  "paddings >= 0",
                  s0, s1, p0, p1);
        return false;
    }
    return true;
}

static tg_tensor *conv2d_common(tg_ctx *ctx, tg_op opc, tg_tensor *kernel, tg_tensor *input,
                                int s0, int s1, int p0, int p1) {
    const char *op = tg_op_name(opc);
    if (!ctx || !kernel || !input) return NULL;
    if (!check_type(ctx, op, "kernel", kernel, TYPES_F32) ||
        !check_type(ctx, op, "input", input, TYPES_F32))
        return NULL;
    if (!check_conv_params(ctx, op, kernel, s0, s1, p0, p1)) return NULL;
    int64_t cout;
    if (opc == TG_OP_CONV_2D) {
        if (kernel->ne[2] != input->ne[2]) {
            pair_error(ctx, op, "kernel", kernel, "input", input,
                       "input channels differ (kernel ne[2] = %lld, input ne[2] = %lld)",
                       (long long)kernel->ne[2], (long long)input->ne[2]);
            return NULL;
        }
        cout = kernel->ne[3];
    } else {
        if (kernel->ne[2] != 1 || kernel->ne[3] != input->ne[2]) {
            pair_error(ctx, op, "kernel", kernel, "input", input,
                       "a depthwise kernel is [KW, KH, 1, C] with C = input ne[2] = %lld",
                       (long long)input->ne[2]);
            return NULL;
        }
        cout = input->ne[2];
    }
    int64_t ow = conv_out(input->ne[0], kernel->ne[0], s0, p0);
    int64_t oh = conv_out(input->ne[1], kernel->ne[1], s1, p1);
    if (ow < 1 || oh < 1) {
        pair_error(ctx, op, "kernel", kernel, "input", input,
                   "the kernel is larger than the padded input (padding %d,%d)", p0, p1);
        return NULL;
    }
    int64_t ne[TG_MAX_DIMS] = {ow, oh, cout, input->ne[3]};
    tg_tensor *t = new_result(ctx, opc, TG_F32, ne, kernel, input, NULL, NULL);
    if (!t) return NULL;
    t->op_params[0] = s0;
    t->op_params[1] = s1;
    t->op_params[2] = p0;
    t->op_params[3] = p1;
    return t;
}

tg_tensor *tg_conv_2d(tg_ctx *ctx, tg_tensor *kernel, tg_tensor *input, int s0, int s1,
                      int p0, int p1) {
    return conv2d_common(ctx, TG_OP_CONV_2D, kernel, input, s0, s1, p0, p1);
}

tg_tensor *tg_conv_2d_dw(tg_ctx *ctx, tg_tensor *kernel, tg_tensor *input, int s0, int s1,
                         int p0, int p1) {
    return conv2d_common(ctx, TG_OP_CONV_2D_DW, kernel, input, s0, s1, p0, p1);
}

tg_tensor *tg_conv_1d_dw(tg_ctx *ctx, tg_tensor *kernel, tg_tensor *input, int s, int p) {
    const char *op = "conv_1d_dw";
    if (!ctx || !kernel || !input) return NULL;
    if (!check_type(ctx, op, "kernel", kernel, TYPES_F32) ||
        !check_type(ctx, op, "input", input, TYPES_F32))
        return NULL;
    if (!check_conv_params(ctx, op, kernel, s, 1, p, 0)) return NULL;
    if (kernel->ne[2] != 1 || kernel->ne[3] != 1) {
        one_error(ctx, op, "kernel", kernel, "must be 2-D [K, C]");
        return NULL;
    }
    if (input->ne[3] != 1) {
        one_error(ctx, op, "input", input, "must be 3-D [C, T, N]");
        return NULL;
    }
    if (kernel->ne[1] != input->ne[0]) {
        pair_error(ctx, op, "kernel", kernel, "input", input,
                   "channels differ (kernel ne[1] = %lld, input ne[0] = %lld)",
                   (long long)kernel->ne[1], (long long)input->ne[0]);
        return NULL;
    }
    int64_t ot = conv_out(input->ne[1], kernel->ne[0], s, p);
    if (ot < 1) {
        pair_error(ctx, op, "kernel", kernel, "input", input,
                   "the kernel is longer than the padded input (padding %d)", p);
        return NULL;
    }
    int64_t ne[TG_MAX_DIMS] = {input->ne[0], ot, input->ne[2], 1};
    tg_tensor *t = new_result(ctx, TG_OP_CONV_1D_DW, TG_F32, ne, kernel, input, NULL, NULL);
    if (!t) return NULL;
    t->op_params[0] = s;
    t->op_params[1] = p;
    return t;
}

/* ---------------------------------------------------------- normalisation */

static bool check_vector(tg_ctx *ctx, const char *op, const char *role, const tg_tensor *v,
                         const tg_tensor *a) {
    if (!check_type(ctx, op, role, v, TYPES_F32)) return false;
    if (v->ne[0] != a->ne[0] || tg_nelements(v) != a->ne[0]) {
        pair_error(ctx, op, "a", a, role, v, "%s must be a vector of a.ne[0] = %lld", role,
                   (long long)a->ne[0]);
        return false;
    }
    return true;
}

tg_tensor *tg_layer_norm(tg_ctx *ctx, tg_tensor *a, tg_tensor *w, tg_tensor *b, float eps) {
    const char *op = "layer_norm";
    if (!ctx || !a) return NULL;
    if (!check_type(ctx, op, "a", a, TYPES_F32)) return NULL;
    if (w && !check_vector(ctx, op, "w", w, a)) return NULL;
    if (b && !check_vector(ctx, op, "b", b, a)) return NULL;
    if (!(eps >= 0.0f) || isinf(eps)) {
        one_error(ctx, op, "a", a, "eps %g must be finite and >= 0", (double)eps);
        return NULL;
    }
    tg_tensor *t = new_result(ctx, TG_OP_LAYER_NORM, TG_F32, a->ne, a, w, b, NULL);
    if (t) tg_set_param_f32(t, 0, eps);
    return t;
}

tg_tensor *tg_soft_max(tg_ctx *ctx, tg_tensor *a, tg_tensor *mask, float scale) {
    const char *op = "soft_max";
    if (!ctx || !a) return NULL;
    if (!check_type(ctx, op, "a", a, TYPES_F32)) return NULL;
    if (mask) {
        if (!check_type(ctx, op, "mask", mask, TYPES_F32)) return NULL;
        if (mask->ne[0] != a->ne[0] || mask->ne[1] != a->ne[1] ||
            (mask->ne[2] != a->ne[2] && mask->ne[2] != 1) ||
            (mask->ne[3] != a->ne[3] && mask->ne[3] != 1)) {
            pair_error(ctx, op, "a", a, "mask", mask,
                       "mask must match a in dims 0 and 1 and be equal or 1 in dims 2, 3");
            return NULL;
        }
    }
    tg_tensor *t = new_result(ctx, TG_OP_SOFT_MAX, TG_F32, a->ne, a, mask, NULL, NULL);
    if (t) tg_set_param_f32(t, 0, scale);
    return t;
}

/* ------------------------------------------------------------ attention */

tg_tensor *tg_attention(tg_ctx *ctx, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                        tg_tensor *mask, float scale) {
    const char *op = "attention";
    unsigned kv_types = (1u << TG_F32) | (1u << TG_F16) | (1u << TG_BF16);
    if (!ctx || !q || !k || !v) return NULL;
    if (!check_type(ctx, op, "q", q, TYPES_F32) || !check_type(ctx, op, "k", k, kv_types) ||
        !check_type(ctx, op, "v", v, kv_types))
        return NULL;
    if (k->ne[0] != q->ne[0]) {
        pair_error(ctx, op, "q", q, "k", k, "head sizes (ne[0]) differ (%lld vs %lld)",
                   (long long)q->ne[0], (long long)k->ne[0]);
        return NULL;
    }
    if (k->ne[2] != q->ne[2] || k->ne[3] != q->ne[3]) {
        pair_error(ctx, op, "q", q, "k", k, "heads or batch (ne[2], ne[3]) differ");
        return NULL;
    }
    if (v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] || v->ne[3] != k->ne[3]) {
        pair_error(ctx, op, "k", k, "v", v, "ne[1..3] differ (key length, heads, batch)");
        return NULL;
    }
    if (!check_rows_dense(ctx, op, "q", q) || !check_rows_dense(ctx, op, "k", k) ||
        !check_rows_dense(ctx, op, "v", v))
        return NULL;
    if (mask) {
        if (!check_type(ctx, op, "mask", mask, TYPES_F32)) return NULL;
        if (mask->ne[0] != k->ne[1] || mask->ne[1] != q->ne[1] ||
            (mask->ne[2] != q->ne[2] && mask->ne[2] != 1) ||
            (mask->ne[3] != q->ne[3] && mask->ne[3] != 1)) {
            pair_error(ctx, op, "q", q, "mask", mask,
                       "mask must be [Tk, Tq, H or 1, B or 1] = [%lld,%lld,%lld|1,%lld|1]",
                       (long long)k->ne[1], (long long)q->ne[1], (long long)q->ne[2],
                       (long long)q->ne[3]);
            return NULL;
        }
    }
    int64_t ne[TG_MAX_DIMS] = {v->ne[0], q->ne[2], q->ne[1], q->ne[3]};
    tg_tensor *t = new_result(ctx, TG_OP_ATTENTION, TG_F32, ne, q, k, v, mask);
    if (t) tg_set_param_f32(t, 0, scale);
    return t;
}

/* ----------------------------------------------------------------- copies */

tg_tensor *tg_cpy(tg_ctx *ctx, tg_tensor *a, tg_tensor *b) {
    if (!ctx || !a || !b) return NULL;
    if (!check_type(ctx, "cpy", "a", a, TYPES_ALL) || !check_type(ctx, "cpy", "b", b, TYPES_ALL))
        return NULL;
    if (tg_nelements(a) != tg_nelements(b)) {
        pair_error(ctx, "cpy", "a", a, "b", b, "element counts differ (%lld vs %lld)",
                   (long long)tg_nelements(a), (long long)tg_nelements(b));
        return NULL;
    }
    return new_inplace(ctx, TG_OP_CPY, b, a, b);
}

tg_tensor *tg_cast(tg_ctx *ctx, tg_tensor *a, tg_type type) {
    if (!ctx || !a) return NULL;
    if (!check_type(ctx, "cast", "a", a, TYPES_ALL)) return NULL;
    if (tg_type_size(type) == 0) {
        one_error(ctx, "cast", "a", a, "bad target type %d", (int)type);
        return NULL;
    }
    return new_result(ctx, TG_OP_CPY, type, a->ne, a, NULL, NULL, NULL);
}

tg_tensor *tg_cont(tg_ctx *ctx, tg_tensor *a) {
    if (!a) return NULL;
    return tg_cast(ctx, a, a->type);
}

tg_tensor *tg_concat(tg_ctx *ctx, tg_tensor *a, tg_tensor *b, int dim) {
    const char *op = "concat";
    unsigned types = (1u << TG_F32) | (1u << TG_I32);
    if (!ctx || !a || !b) return NULL;
    if (!check_type(ctx, op, "a", a, types) || !check_type(ctx, op, "b", b, types)) return NULL;
    if (a->type != b->type) {
        pair_error(ctx, op, "a", a, "b", b, "types differ (%s vs %s)", tg_type_name(a->type),
                   tg_type_name(b->type));
        return NULL;
    }
    if (dim < 0 || dim >= TG_MAX_DIMS) {
        pair_error(ctx, op, "a", a, "b", b, "dim %d not in 0..3", dim);
        return NULL;
    }
    int64_t ne[TG_MAX_DIMS];
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        if (i != dim && a->ne[i] != b->ne[i]) {
            pair_error(ctx, op, "a", a, "b", b, "ne[%d] differ (%lld vs %lld); only dim %d may",
                       i, (long long)a->ne[i], (long long)b->ne[i], dim);
            return NULL;
        }
        ne[i] = i == dim ? a->ne[i] + b->ne[i] : a->ne[i];
    }
    tg_tensor *t = new_result(ctx, TG_OP_CONCAT, a->type, ne, a, b, NULL, NULL);
    if (t) t->op_params[0] = dim;
    return t;
}

tg_tensor *tg_pad(tg_ctx *ctx, tg_tensor *a, const int lo[TG_MAX_DIMS],
                  const int hi[TG_MAX_DIMS]) {
    if (!ctx || !a) return NULL;
    if (!check_type(ctx, "pad", "a", a, TYPES_F32)) return NULL;
    int64_t ne[TG_MAX_DIMS];
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        int l = lo ? lo[i] : 0, h = hi ? hi[i] : 0;
        if (l < 0 || h < 0) {
            one_error(ctx, "pad", "a", a, "negative padding %d/%d in dim %d", l, h, i);
            return NULL;
        }
        ne[i] = a->ne[i] + l + h;
    }
    tg_tensor *t = new_result(ctx, TG_OP_PAD, TG_F32, ne, a, NULL, NULL, NULL);
    if (!t) return NULL;
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        t->op_params[i] = lo ? lo[i] : 0;
        t->op_params[4 + i] = hi ? hi[i] : 0;
    }
    return t;
}

/* ---------------------------------------------------------- reductions */

tg_tensor *tg_argmax(tg_ctx *ctx, tg_tensor *a) {
    if (!ctx || !a) return NULL;
    if (!check_type(ctx, "argmax", "a", a, TYPES_F32)) return NULL;
    if (a->ne[0] < 1) {
        one_error(ctx, "argmax", "a", a, "dim 0 is empty");
        return NULL;
    }
    int64_t ne[TG_MAX_DIMS] = {a->ne[1], a->ne[2], a->ne[3], 1};
    return new_result(ctx, TG_OP_ARGMAX, TG_I32, ne, a, NULL, NULL, NULL);
}

static tg_tensor *reduce_rows(tg_ctx *ctx, tg_op opc, tg_tensor *a) {
    if (!ctx || !a) return NULL;
    if (!check_type(ctx, tg_op_name(opc), "a", a, TYPES_F32)) return NULL;
    int64_t ne[TG_MAX_DIMS] = {1, a->ne[1], a->ne[2], a->ne[3]};
    return new_result(ctx, opc, TG_F32, ne, a, NULL, NULL, NULL);
}

tg_tensor *tg_sum_rows(tg_ctx *ctx, tg_tensor *a) { return reduce_rows(ctx, TG_OP_SUM_ROWS, a); }
tg_tensor *tg_mean(tg_ctx *ctx, tg_tensor *a) { return reduce_rows(ctx, TG_OP_MEAN, a); }
