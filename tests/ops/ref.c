/*
 * ref.c: the float64 reference of every op, for the conformance suite.
 *
 * Written from the comments of include/tg.h and the source/parameter layout
 * of src/tensor/op_params.h only; it calls no backend and no kernel code. Each
 * root tensor (one that owns storage) is mirrored as an array of doubles, one
 * per element slot; a tensor or view is read and written through its own ne,
 * nb and view chain, so permuted, strided and rel_shift inputs are handled the
 * way the contract defines them. F32 values are kept in double precision
 * (intermediates are not rounded to f32); values stored into F16, BF16 and I32
 * storage are rounded or truncated as the storage would. Every op also checks
 * the shape and type of the node against what the contract says it must be,
 * so a constructor that computes a wrong shape fails the case.
 *
 * Not here: speed. The reference is plain loops; the heavy ones (mul_mat,
 * attention) gather operands into contiguous arrays first.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_params.h"
#include "ops_test.h"

typedef struct mirror {
    const tg_tensor *root;
    double *v;
    int64_t n;
} mirror;

struct ref_state {
    mirror *m;
    int n, cap;
};

ref_state *ref_new(void) { return calloc(1, sizeof(ref_state)); }

void ref_free(ref_state *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->m[i].v);
    free(r->m);
    free(r);
}

bool ref_add_root(ref_state *r, const tg_tensor *t, const double *values, int64_t n) {
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 8;
        mirror *m = realloc(r->m, (size_t)cap * sizeof *m);
        if (!m) return false;
        r->m = m;
        r->cap = cap;
    }
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return false;
    memcpy(v, values, (size_t)n * sizeof *v);
    r->m[r->n++] = (mirror){t, v, n};
    return true;
}

/* The mirror slot of element (i0..i3) of t, or NULL when outside its root. */
static double *slot(const ref_state *r, const tg_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                    int64_t i3) {
    size_t off;
    const tg_tensor *root = ref_root(t, &off);
    for (int k = 0; k < r->n; k++) {
        if (r->m[k].root != root) continue;
        size_t ts = ref_type_size(root->type);
        size_t byte = off + (size_t)i0 * t->nb[0] + (size_t)i1 * t->nb[1] + (size_t)i2 * t->nb[2] +
                      (size_t)i3 * t->nb[3];
        if (ts == 0 || byte % ts != 0 || (int64_t)(byte / ts) >= r->m[k].n) return NULL;
        return &r->m[k].v[byte / ts];
    }
    return NULL;
}

double ref_get(const ref_state *r, const tg_tensor *t, int64_t i0, int64_t i1, int64_t i2,
               int64_t i3) {
    const double *p = slot(r, t, i0, i1, i2, i3);
    return p ? *p : NAN;
}

static void put(ref_state *r, const tg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3,
                double v) {
    double *p = slot(r, t, i0, i1, i2, i3);
    if (p) *p = t->type == TG_F32 ? v : ref_round_to(t->type, v);
}

#define FOR4(ne)                                      \
    for (int64_t i3 = 0; i3 < (ne)[3]; i3++)          \
        for (int64_t i2 = 0; i2 < (ne)[2]; i2++)      \
            for (int64_t i1 = 0; i1 < (ne)[1]; i1++)  \
                for (int64_t i0 = 0; i0 < (ne)[0]; i0++)

#define GET(t, a, b, c, d) ref_get(r, (t), (a), (b), (c), (d))

/* Checks node's shape and type; false with a message otherwise. */
static bool expect(const tg_tensor *node, int64_t e0, int64_t e1, int64_t e2, int64_t e3,
                   tg_type type, char *msg, size_t size) {
    const int64_t e[4] = {e0, e1, e2, e3};
    for (int i = 0; i < 4; i++) {
        if (node->ne[i] != e[i]) {
            char a[64], b[64];
            snprintf(msg, size, "%s: result shape %s, the contract says %s", tg_op_name(node->op),
                     fmt_ne(a, sizeof a, node->ne), fmt_ne(b, sizeof b, e));
            return false;
        }
    }
    if (node->type != type) {
        snprintf(msg, size, "%s: result type %s, the contract says %s", tg_op_name(node->op),
                 tg_type_name(node->type), tg_type_name(type));
        return false;
    }
    return true;
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* ------------------------------------------------------------------- ops */

static bool ref_get_rows(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *a = n->src[0], *ids = n->src[1];
    if (!expect(n, a->ne[0], ids->ne[0], ids->ne[1], ids->ne[2], TG_F32, msg, sz)) return false;
    if (ids->ne[1] != a->ne[2] || ids->ne[2] != a->ne[3]) {
        snprintf(msg, sz, "get_rows: ids dims 1,2 differ from the table's dims 2,3");
        return false;
    }
    FOR4(n->ne) {
        int64_t row = (int64_t)GET(ids, i1, i2, i3, 0);
        if (row < 0 || row >= a->ne[1]) {
            snprintf(msg, sz, "get_rows: id %lld out of range (harness bug)", (long long)row);
            return false;
        }
        put(r, n, i0, i1, i2, i3, GET(a, i0, row, i2, i3));
    }
    return true;
}

static bool ref_set_rows(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *src = n->src[0], *ids = n->src[1];
    if (!n->view_src) {
        snprintf(msg, sz, "set_rows: the node is not a view of dst");
        return false;
    }
    if (n->ne[0] != src->ne[0] || n->ne[2] != src->ne[2] || n->ne[3] != src->ne[3] ||
        ids->ne[0] != src->ne[1] || ids->ne[1] != src->ne[2] || ids->ne[2] != src->ne[3]) {
        snprintf(msg, sz, "set_rows: shapes of dst, src and ids do not agree");
        return false;
    }
    FOR4(src->ne) {
        int64_t row = (int64_t)GET(ids, i1, i2, i3, 0);
        if (row < 0 || row >= n->ne[1]) {
            snprintf(msg, sz, "set_rows: id %lld out of range (harness bug)", (long long)row);
            return false;
        }
        put(r, n, i0, row, i2, i3, GET(src, i0, i1, i2, i3));
    }
    return true;
}

static bool ref_binary(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *a = n->src[0], *b = n->src[1];
    int64_t e[4];
    for (int i = 0; i < 4; i++) {
        e[i] = a->ne[i] > b->ne[i] ? a->ne[i] : b->ne[i];
        if ((a->ne[i] != e[i] && a->ne[i] != 1) || (b->ne[i] != e[i] && b->ne[i] != 1)) {
            snprintf(msg, sz, "%s: dim %d does not broadcast", tg_op_name(n->op), i);
            return false;
        }
    }
    if (!expect(n, e[0], e[1], e[2], e[3], TG_F32, msg, sz)) return false;
    FOR4(e) {
        double x = GET(a, i0 % a->ne[0], i1 % a->ne[1], i2 % a->ne[2], i3 % a->ne[3]);
        double y = GET(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
        double z = n->op == TG_OP_ADD ? x + y : n->op == TG_OP_SUB ? x - y
                 : n->op == TG_OP_MUL ? x * y : x / y;
        put(r, n, i0, i1, i2, i3, z);
    }
    return true;
}

static bool ref_unary(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *a = n->src[0];
    if (!expect(n, a->ne[0], a->ne[1], a->ne[2], a->ne[3], TG_F32, msg, sz)) return false;
    double s = n->op == TG_OP_SCALE ? tg_param_f32(n, 0) : 0;
    FOR4(a->ne) {
        double x = GET(a, i0, i1, i2, i3), y;
        switch (n->op) {
        case TG_OP_SCALE: y = x * s; break;
        case TG_OP_RELU: y = x > 0 ? x : 0; break;
        case TG_OP_SILU: y = x * sigmoid(x); break;
        case TG_OP_LOG: y = log(x); break;
        case TG_OP_SQRT: y = sqrt(x); break;
        default: y = sigmoid(x); break;
        }
        put(r, n, i0, i1, i2, i3, y);
    }
    return true;
}

static bool ref_glu(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *a = n->src[0];
    int64_t h = a->ne[0] / 2;
    if (!expect(n, h, a->ne[1], a->ne[2], a->ne[3], TG_F32, msg, sz)) return false;
    FOR4(n->ne) put(r, n, i0, i1, i2, i3, GET(a, i0, i1, i2, i3) * sigmoid(GET(a, i0 + h, i1, i2, i3)));
    return true;
}

static bool ref_mul_mat(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *a = n->src[0], *b = n->src[1];
    int64_t K = a->ne[0], N = a->ne[1], M = b->ne[1];
    if (b->ne[0] != K || b->ne[2] % a->ne[2] || b->ne[3] % a->ne[3]) {
        snprintf(msg, sz, "mul_mat: operand shapes do not agree");
        return false;
    }
    if (!expect(n, N, M, b->ne[2], b->ne[3], TG_F32, msg, sz)) return false;
    int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    double *A = malloc((size_t)(N * K) * sizeof *A), *B = malloc((size_t)(M * K) * sizeof *B);
    if (!A || !B) {
        free(A); free(B);
        snprintf(msg, sz, "out of memory");
        return false;
    }
    for (int64_t i3 = 0; i3 < b->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < b->ne[2]; i2++) {
            /* tg.h: a broadcasts over b's dims 2, 3; consecutive b matrices share
             * one a matrix (ggml's order: a index = b index / ratio) */
            for (int64_t j = 0; j < N; j++)
                for (int64_t k = 0; k < K; k++) A[j * K + k] = GET(a, k, j, i2 / r2, i3 / r3);
            for (int64_t m = 0; m < M; m++)
                for (int64_t k = 0; k < K; k++) B[m * K + k] = GET(b, k, m, i2, i3);
            for (int64_t m = 0; m < M; m++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0;
                    const double *x = A + j * K, *y = B + m * K;
                    for (int64_t k = 0; k < K; k++) s += x[k] * y[k];
                    put(r, n, j, m, i2, i3, s);
                }
        }
    }
    free(A);
    free(B);
    return true;
}

static bool ref_conv_2d(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *kern = n->src[0], *in = n->src[1];
    int s0 = tg_param_i32(n, 0), s1 = tg_param_i32(n, 1), p0 = tg_param_i32(n, 2), p1 = tg_param_i32(n, 3);
    bool dw = n->op == TG_OP_CONV_2D_DW;
    int64_t KW = kern->ne[0], KH = kern->ne[1], C = in->ne[2];
    int64_t Cout = dw ? C : kern->ne[3];
    if (s0 < 1 || s1 < 1 || (dw ? (kern->ne[2] != 1 || kern->ne[3] != C) : kern->ne[2] != C)) {
        snprintf(msg, sz, "%s: kernel/input channels or strides do not agree", tg_op_name(n->op));
        return false;
    }
    int64_t OW = (in->ne[0] + 2 * p0 - KW) / s0 + 1, OH = (in->ne[1] + 2 * p1 - KH) / s1 + 1;
    if (!expect(n, OW, OH, Cout, in->ne[3], TG_F32, msg, sz)) return false;
    FOR4(n->ne) {
        /* i0 = ow, i1 = oh, i2 = output channel, i3 = batch */
        double s = 0;
        for (int64_t ci = dw ? i2 : 0; ci < (dw ? i2 + 1 : C); ci++)
            for (int64_t kh = 0; kh < KH; kh++) {
                int64_t y = i1 * s1 - p1 + kh;
                if (y < 0 || y >= in->ne[1]) continue;
                for (int64_t kw = 0; kw < KW; kw++) {
                    int64_t x = i0 * s0 - p0 + kw;
                    if (x < 0 || x >= in->ne[0]) continue;
                    double w = dw ? GET(kern, kw, kh, 0, i2) : GET(kern, kw, kh, ci, i2);
                    s += w * GET(in, x, y, ci, i3);
                }
            }
        put(r, n, i0, i1, i2, i3, s);
    }
    return true;
}

static bool ref_conv_1d_dw(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *kern = n->src[0], *in = n->src[1];
    int s = tg_param_i32(n, 0), p = tg_param_i32(n, 1);
    int64_t K = kern->ne[0], C = kern->ne[1];
    if (s < 1 || in->ne[0] != C) {
        snprintf(msg, sz, "conv_1d_dw: kernel channels %lld vs input %lld (stride %d)",
                 (long long)C, (long long)in->ne[0], s);
        return false;
    }
    int64_t OT = (in->ne[1] + 2 * p - K) / s + 1;
    if (!expect(n, C, OT, in->ne[2], 1, TG_F32, msg, sz)) return false;
    FOR4(n->ne) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++) {
            int64_t t = i1 * s - p + k;
            if (t >= 0 && t < in->ne[1]) acc += GET(kern, k, i0, 0, 0) * GET(in, i0, t, i2, 0);
        }
        put(r, n, i0, i1, i2, i3, acc);
    }
    return true;
}

static bool ref_layer_norm(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *a = n->src[0], *w = n->src[1], *b = n->src[2];
    double eps = tg_param_f32(n, 0);
    if (!expect(n, a->ne[0], a->ne[1], a->ne[2], a->ne[3], TG_F32, msg, sz)) return false;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                double mean = 0, var = 0;
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) mean += GET(a, i0, i1, i2, i3);
                mean /= (double)a->ne[0];
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
                    double d = GET(a, i0, i1, i2, i3) - mean;
                    var += d * d;
                }
                var /= (double)a->ne[0];
                double inv = 1.0 / sqrt(var + eps);
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
                    double y = (GET(a, i0, i1, i2, i3) - mean) * inv;
                    if (w) y *= GET(w, i0, 0, 0, 0);
                    if (b) y += GET(b, i0, 0, 0, 0);
                    put(r, n, i0, i1, i2, i3, y);
                }
            }
    return true;
}

/* softmax of row x[0..n) in place; an all -inf row becomes zeros (tg.h). */
static void softmax_row(double *x, int64_t n) {
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) if (x[i] > mx) mx = x[i];
    if (mx == -INFINITY) {
        for (int64_t i = 0; i < n; i++) x[i] = 0;
        return;
    }
    double s = 0;
    for (int64_t i = 0; i < n; i++) { x[i] = exp(x[i] - mx); s += x[i]; }
    for (int64_t i = 0; i < n; i++) x[i] /= s;
}

static bool ref_soft_max(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *a = n->src[0], *mask = n->src[1];
    double scale = tg_param_f32(n, 0);
    if (!expect(n, a->ne[0], a->ne[1], a->ne[2], a->ne[3], TG_F32, msg, sz)) return false;
    if (mask && (mask->ne[0] != a->ne[0] || mask->ne[1] != a->ne[1] ||
                 (mask->ne[2] != a->ne[2] && mask->ne[2] != 1) ||
                 (mask->ne[3] != a->ne[3] && mask->ne[3] != 1))) {
        snprintf(msg, sz, "soft_max: mask shape does not fit");
        return false;
    }
    double *row = malloc((size_t)(a->ne[0] ? a->ne[0] : 1) * sizeof *row);
    if (!row) { snprintf(msg, sz, "out of memory"); return false; }
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
                    row[i0] = GET(a, i0, i1, i2, i3) * scale;
                    if (mask) row[i0] += GET(mask, i0, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
                }
                softmax_row(row, a->ne[0]);
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) put(r, n, i0, i1, i2, i3, row[i0]);
            }
    free(row);
    return true;
}

static bool ref_attention(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *mask = n->src[3];
    double scale = tg_param_f32(n, 0);
    int64_t D = q->ne[0], Tq = q->ne[1], H = q->ne[2], B = q->ne[3], Tk = k->ne[1], Dv = v->ne[0];
    if (k->ne[0] != D || k->ne[2] != H || k->ne[3] != B || v->ne[1] != Tk || v->ne[2] != H ||
        v->ne[3] != B) {
        snprintf(msg, sz, "attention: q/k/v shapes do not agree");
        return false;
    }
    if (mask && (mask->ne[0] != Tk || mask->ne[1] != Tq || (mask->ne[2] != H && mask->ne[2] != 1) ||
                 (mask->ne[3] != B && mask->ne[3] != 1))) {
        snprintf(msg, sz, "attention: mask shape does not fit");
        return false;
    }
    if (!expect(n, Dv, H, Tq, B, TG_F32, msg, sz)) return false;
    double *K = malloc((size_t)(Tk * D) * sizeof *K), *V = malloc((size_t)(Tk * Dv) * sizeof *V);
    double *Q = malloc((size_t)D * sizeof *Q), *s = malloc((size_t)Tk * sizeof *s);
    if (!K || !V || !Q || !s) {
        free(K); free(V); free(Q); free(s);
        snprintf(msg, sz, "out of memory");
        return false;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            for (int64_t j = 0; j < Tk; j++) {
                for (int64_t d = 0; d < D; d++) K[j * D + d] = GET(k, d, j, h, b);
                for (int64_t d = 0; d < Dv; d++) V[j * Dv + d] = GET(v, d, j, h, b);
            }
            for (int64_t i = 0; i < Tq; i++) {
                for (int64_t d = 0; d < D; d++) Q[d] = GET(q, d, i, h, b);
                for (int64_t j = 0; j < Tk; j++) {
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++) dot += Q[d] * K[j * D + d];
                    s[j] = dot * scale;
                    if (mask) s[j] += GET(mask, j, i, h % mask->ne[2], b % mask->ne[3]);
                }
                softmax_row(s, Tk);
                for (int64_t d = 0; d < Dv; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < Tk; j++) acc += s[j] * V[j * Dv + d];
                    put(r, n, d, h, i, b, acc);
                }
            }
        }
    free(K); free(V); free(Q); free(s);
    return true;
}

/* The multi-index of linear element L of a tensor of shape ne (dim 0 fastest). */
static void unravel(int64_t L, const int64_t ne[4], int64_t ix[4]) {
    for (int i = 0; i < 4; i++) {
        ix[i] = L % ne[i];
        L /= ne[i];
    }
}

static bool ref_cpy(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *a = n->src[0], *dst = n->src[1];
    if (dst) {
        if (!n->view_src || tg_nelements(n) != tg_nelements(a) || n->type != dst->type) {
            snprintf(msg, sz, "cpy: the node must be a view of dst with a's element count");
            return false;
        }
    } else if (!expect(n, a->ne[0], a->ne[1], a->ne[2], a->ne[3], n->type, msg, sz)) {
        return false;
    }
    int64_t N = tg_nelements(a), ia[4], io[4];
    for (int64_t L = 0; L < N; L++) {
        unravel(L, a->ne, ia);
        unravel(L, n->ne, io);
        put(r, n, io[0], io[1], io[2], io[3], GET(a, ia[0], ia[1], ia[2], ia[3]));
    }
    return true;
}

static bool ref_concat(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *a = n->src[0], *b = n->src[1];
    int dim = tg_param_i32(n, 0);
    if (dim < 0 || dim > 3 || a->type != b->type) {
        snprintf(msg, sz, "concat: bad dim %d or mixed types", dim);
        return false;
    }
    int64_t e[4];
    for (int i = 0; i < 4; i++) {
        e[i] = i == dim ? a->ne[i] + b->ne[i] : a->ne[i];
        if (i != dim && a->ne[i] != b->ne[i]) {
            snprintf(msg, sz, "concat: dim %d differs", i);
            return false;
        }
    }
    if (!expect(n, e[0], e[1], e[2], e[3], a->type, msg, sz)) return false;
    FOR4(e) {
        int64_t ix[4] = {i0, i1, i2, i3};
        const tg_tensor *s = a;
        if (ix[dim] >= a->ne[dim]) {
            ix[dim] -= a->ne[dim];
            s = b;
        }
        put(r, n, i0, i1, i2, i3, GET(s, ix[0], ix[1], ix[2], ix[3]));
    }
    return true;
}

static bool ref_pad(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *a = n->src[0];
    int64_t lo[4], e[4];
    for (int i = 0; i < 4; i++) {
        lo[i] = tg_param_i32(n, i);
        e[i] = a->ne[i] + lo[i] + tg_param_i32(n, 4 + i);
    }
    if (!expect(n, e[0], e[1], e[2], e[3], TG_F32, msg, sz)) return false;
    FOR4(e) {
        int64_t ix[4] = {i0 - lo[0], i1 - lo[1], i2 - lo[2], i3 - lo[3]};
        bool in = true;
        for (int i = 0; i < 4; i++) in = in && ix[i] >= 0 && ix[i] < a->ne[i];
        put(r, n, i0, i1, i2, i3, in ? GET(a, ix[0], ix[1], ix[2], ix[3]) : 0.0);
    }
    return true;
}

static bool ref_reduce(ref_state *r, const tg_tensor *n, char *msg, size_t sz) {
    const tg_tensor *a = n->src[0];
    bool am = n->op == TG_OP_ARGMAX;
    bool ok = am ? expect(n, a->ne[1], a->ne[2], a->ne[3], 1, TG_I32, msg, sz)
                 : expect(n, 1, a->ne[1], a->ne[2], a->ne[3], TG_F32, msg, sz);
    if (!ok) return false;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                double s = 0, best = -INFINITY;
                int64_t bi = 0;
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
                    double x = GET(a, i0, i1, i2, i3);
                    s += x;
                    if (x > best) { best = x; bi = i0; } /* first of ties */
                }
                if (am) put(r, n, i1, i2, i3, 0, (double)bi);
                else put(r, n, 0, i1, i2, i3, n->op == TG_OP_MEAN ? s / (double)a->ne[0] : s);
            }
    return true;
}

bool ref_compute(ref_state *r, const tg_tensor *node, char *msg, size_t msg_size) {
    switch (node->op) {
    case TG_OP_GET_ROWS: return ref_get_rows(r, node, msg, msg_size);
    case TG_OP_SET_ROWS: return ref_set_rows(r, node, msg, msg_size);
    case TG_OP_ADD: case TG_OP_SUB: case TG_OP_MUL: case TG_OP_DIV:
        return ref_binary(r, node, msg, msg_size);
    case TG_OP_SCALE: case TG_OP_RELU: case TG_OP_SILU: case TG_OP_SIGMOID:
    case TG_OP_LOG: case TG_OP_SQRT:
        return ref_unary(r, node, msg, msg_size);
    case TG_OP_GLU: return ref_glu(r, node, msg, msg_size);
    case TG_OP_MUL_MAT: return ref_mul_mat(r, node, msg, msg_size);
    case TG_OP_CONV_2D: case TG_OP_CONV_2D_DW: return ref_conv_2d(r, node, msg, msg_size);
    case TG_OP_CONV_1D_DW: return ref_conv_1d_dw(r, node, msg, msg_size);
    case TG_OP_LAYER_NORM: return ref_layer_norm(r, node, msg, msg_size);
    case TG_OP_SOFT_MAX: return ref_soft_max(r, node, msg, msg_size);
    case TG_OP_ATTENTION: return ref_attention(r, node, msg, msg_size);
    case TG_OP_CPY: return ref_cpy(r, node, msg, msg_size);
    case TG_OP_CONCAT: return ref_concat(r, node, msg, msg_size);
    case TG_OP_PAD: return ref_pad(r, node, msg, msg_size);
    case TG_OP_ARGMAX: case TG_OP_SUM_ROWS: case TG_OP_MEAN:
        return ref_reduce(r, node, msg, msg_size);
    default:
        snprintf(msg, msg_size, "no reference for op %s", tg_op_name(node->op));
        return false;
    }
}
