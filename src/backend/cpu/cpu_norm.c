/*
 * cpu_norm.c: the ops that need a whole row before writing any of it:
 * layer_norm and soft_max.
 *
 * Each thread owns a row buffer in the backend's scratch, so a source with
 * any strides is gathered once and every later pass runs on contiguous
 * floats. Statistics are accumulated in double (the kernels' sum helpers),
 * with the variance taken around the mean in a second pass rather than as
 * E[x^2] - E[x]^2, which loses everything on rows with a large offset.
 * A soft_max row that is entirely -inf gives zeros, as the API promises,
 * rather than 0/0.
 *
 * Not here: attention's softmax, which is fused into cpu_attn.c.
 */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

typedef struct row_task {
    cpu_backend *be;
    tg_tensor *node;
    float *rows;        /* nth rows of ne0 floats, one per thread */
    int64_t row_stride; /* floats between two threads' rows */
    const float *w, *b; /* contiguous copies (or the tensors' own data) */
} row_task;

static inline void row_coords(const tg_tensor *t, int64_t r, int64_t *i1, int64_t *i2,
                              int64_t *i3) {
    *i1 = r % t->ne[1];
    r /= t->ne[1];
    *i2 = r % t->ne[2];
    *i3 = r / t->ne[2];
}

static const float *load_row(const char *p, size_t s, int64_t n, float *buf) {
    if (s == sizeof(float)) return (const float *)p;
    for (int64_t i = 0; i < n; i++) buf[i] = *(const float *)(p + (size_t)i * s);
    return buf;
}

static void store_row(const float *y, int64_t n, char *p, size_t s) {
    if (s == sizeof(float)) {
        if ((const void *)y != (void *)p) memcpy(p, y, (size_t)n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; i++) *(float *)(p + (size_t)i * s) = y[i];
}

/* Reserves nth rows of n floats plus `extra` vectors of n floats. */
static tg_status reserve_rows(cpu_backend *be, int64_t n, int extra, row_task *t) {
    int64_t stride = (n + 15) / 16 * 16;
    void *p;
    tg_status st = cpu_scratch(be, (size_t)stride * (size_t)(be->n_threads + extra) * sizeof(float),
                               &p);
    if (st) return st;
    t->rows = p;
    t->row_stride = stride;
    return NULL;
}

/* ------------------------------------------------------------ layer_norm */

static void layer_norm_task(void *arg, int ith, int nth) {
    row_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0];
    const cpu_kernels *k = &t->be->k;
    float eps = tg_param_f32(n, 0);
    int64_t lo, hi, ne0 = a->ne[0];
    float *buf = t->rows + ith * t->row_stride;
    cpu_range(tg_nrows(a), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_coords(a, r, &i1, &i2, &i3);
        const float *x = load_row(cpu_at(a, 0, i1, i2, i3), a->nb[0], ne0, buf);
        double mean = k->sum(ne0, x) / (double)ne0;
        double var = k->sum_sq_dev(ne0, x, (float)mean) / (double)ne0;
        float rstd = (float)(1.0 / sqrt(var + (double)eps));
        char *pz = cpu_at(n, 0, i1, i2, i3);
        float *y = n->nb[0] == sizeof(float) ? (float *)pz : buf;
        k->norm(ne0, y, x, (float)mean, rstd, t->w, t->b);
        store_row(y, ne0, pz, n->nb[0]);
    }
}

/* A contiguous view of an optional parameter vector, copied into dst when
 * strided. */
static const float *param_vec(const tg_tensor *v, float *dst) {
    if (!v) return NULL;
    return load_row(v->data, v->nb[0], v->ne[0], dst);
}

tg_status cpu_op_layer_norm(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *a = node->src[0], *w = node->src[1], *b = node->src[2];
    int64_t ne0 = a->ne[0];
    if (!tg_same_shape(a, node) || (w && tg_nelements(w) != ne0) || (b && tg_nelements(b) != ne0))
        return tg_status_new(TG_ERR_INVALID_ARG, "layer_norm: shapes of '%s', its weight and bias "
                             "disagree", a->name);
    row_task t = {.be = be, .node = node};
    tg_status st = reserve_rows(be, ne0, 2, &t);
    if (st) return tg_status_wrap(st, "layer_norm");
    t.w = param_vec(w, t.rows + be->n_threads * t.row_stride);
    t.b = param_vec(b, t.rows + (be->n_threads + 1) * t.row_stride);
    cpu_parallel(be, layer_norm_task, &t, (double)tg_nelements(a));
    return NULL;
}

/* -------------------------------------------------------------- soft_max */

static void soft_max_task(void *arg, int ith, int nth) {
    row_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0], *mask = n->src[1];
    const cpu_kernels *k = &t->be->k;
    float scale = tg_param_f32(n, 0);
    int64_t lo, hi, ne0 = a->ne[0];
    float *buf = t->rows + ith * t->row_stride;
    cpu_range(tg_nrows(a), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_coords(a, r, &i1, &i2, &i3);
        const char *pa = cpu_at(a, 0, i1, i2, i3);
        char *pz = cpu_at(n, 0, i1, i2, i3);
        /* computed in the result's row when it is contiguous, else in buf */
        float *y = n->nb[0] == sizeof(float) ? (float *)pz : buf;
        if (a->nb[0] == sizeof(float)) {
            k->unary(CPU_SCALE, ne0, y, (const float *)pa, scale);
        } else {
            for (int64_t i = 0; i < ne0; i++) y[i] = *(const float *)(pa + i * a->nb[0]) * scale;
        }
        if (mask) {
            const char *pm = cpu_at(mask, 0, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
            if (mask->nb[0] == sizeof(float)) {
                k->binary(CPU_ADD, ne0, y, y, (const float *)pm);
            } else {
                for (int64_t i = 0; i < ne0; i++) y[i] += *(const float *)(pm + i * mask->nb[0]);
            }
        }
        float m = k->max(ne0, y);
        if (m == -INFINITY) {
            memset(y, 0, (size_t)ne0 * sizeof(float));
        } else {
            double s = k->exp_sum(ne0, y, y, m);
            k->unary(CPU_SCALE, ne0, y, y, (float)(1.0 / s));
        }
        if (y == buf) store_row(buf, ne0, pz, n->nb[0]);
    }
}

tg_status cpu_op_soft_max(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *a = node->src[0], *mask = node->src[1];
    if (!tg_same_shape(a, node))
        return tg_status_new(TG_ERR_INVALID_ARG, "soft_max: result and '%s' differ in shape", a->name);
    if (mask && (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] ||
                 (a->ne[2] % mask->ne[2]) != 0 || (a->ne[3] % mask->ne[3]) != 0))
        return tg_status_new(TG_ERR_INVALID_ARG, "soft_max: mask '%s' does not fit '%s'", mask->name,
                             a->name);
    row_task t = {.be = be, .node = node};
    tg_status st = reserve_rows(be, a->ne[0], 0, &t);
    if (st) return tg_status_wrap(st, "soft_max");
    cpu_parallel(be, soft_max_task, &t, (double)tg_nelements(a));
    return NULL;
}
