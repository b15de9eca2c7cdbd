/*
 * cpu_elem.c: the row-wise ops of the CPU backend: get_rows, set_rows, the
 * broadcasting binary ops, the unary ops and scale, glu, cpy/cast, concat,
 * pad, argmax, sum_rows and mean.
 *
 * Every op walks the rows (dims 1..3) of its output, split evenly over the
 * pool's threads, and handles dim 0 in one of two ways: contiguous rows go
 * straight to the vector kernels; anything else (a transposed view, a
 * rel_shift view, a broadcast element) is gathered into a small per-thread
 * chunk, computed there and scattered back. So any stride works and the
 * common case costs nothing extra.
 *
 * Not here: ops that need a whole row at once with scratch (cpu_norm.c),
 * matrix products, convolutions and attention.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "cpu_impl.h"

enum { CHUNK = 512 };

typedef struct elem_task {
    cpu_backend *be;
    tg_tensor *node;
    int iparam;
    float fparam;
    atomic_llong bad; /* first offending value (an id out of range) + 1 */
} elem_task;

static void run(cpu_backend *be, tg_task_fn fn, elem_task *t) {
    t->be = be;
    atomic_init(&t->bad, 0);
    const tg_tensor *a = t->node->src[0];
    int64_t work = tg_nelements(t->node);
    if (a && tg_nelements(a) > work) work = tg_nelements(a);
    cpu_parallel(be, fn, t, (double)work);
}

static inline void row_coords(const tg_tensor *t, int64_t r, int64_t *i1, int64_t *i2,
                              int64_t *i3) {
    *i1 = r % t->ne[1];
    r /= t->ne[1];
    *i2 = r % t->ne[2];
    *i3 = r / t->ne[2];
}

/* Reads n f32 at p with byte stride s (0 broadcasts p[0]). */
static inline void gather_f32(const char *p, size_t s, int64_t n, float *dst) {
    for (int64_t i = 0; i < n; i++) dst[i] = *(const float *)(p + (size_t)i * s);
}

static inline void scatter_f32(const float *src, int64_t n, char *p, size_t s) {
    for (int64_t i = 0; i < n; i++) *(float *)(p + (size_t)i * s) = src[i];
}

/* ------------------------------------------------------------- get_rows */

static void get_rows_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    const tg_tensor *n = t->node, *a = n->src[0], *ids = n->src[1];
    const cpu_kernels *k = &t->be->k;
    int64_t lo, hi;
    cpu_range(tg_nrows(n), ith, nth, &lo, &hi);
    float buf[CHUNK];
    size_t es = tg_type_size(a->type);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_coords(n, r, &i1, &i2, &i3);
        int32_t id = *(const int32_t *)cpu_at(ids, i1, i2 % ids->ne[1], i3 % ids->ne[2], 0);
        if (id < 0 || id >= a->ne[1]) {
            long long expect = 0;
            atomic_compare_exchange_strong(&t->bad, &expect, (long long)id + ((long long)1 << 40));
            continue;
        }
        const char *src = cpu_at(a, 0, id, i2 % a->ne[2], i3 % a->ne[3]);
        float *dst = cpu_at(n, 0, i1, i2, i3);
        if (a->nb[0] == es && n->nb[0] == sizeof(float)) {
            k->to_f32(a->type, src, dst, n->ne[0]);
            continue;
        }
        for (int64_t c = 0; c < n->ne[0]; c += CHUNK) {
            int64_t m = n->ne[0] - c < CHUNK ? n->ne[0] - c : CHUNK;
            for (int64_t i = 0; i < m; i++) buf[i] = cpu_load_f32(a->type, src + (c + i) * a->nb[0]);
            scatter_f32(buf, m, (char *)dst + c * n->nb[0], n->nb[0]);
        }
    }
}

tg_status cpu_op_get_rows(cpu_backend *be, tg_tensor *node) {
    elem_task t = {.node = node};
    run(be, get_rows_task, &t);
    long long bad = atomic_load(&t.bad);
    char la[CPU_LABEL_SIZE];
    if (bad)
        return tg_status_new(TG_ERR_INVALID_ARG, "get_rows: id %lld out of range [0, %lld) of %s",
                             bad - ((long long)1 << 40), (long long)node->src[0]->ne[1],
                             cpu_label(node->src[0], la));
    return NULL;
}

/* ------------------------------------------------------------- set_rows */

static void set_rows_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *src = n->src[0], *ids = n->src[1];
    const cpu_kernels *k = &t->be->k;
    int64_t lo, hi;
    cpu_range(tg_nrows(src), ith, nth, &lo, &hi);
    float buf[CHUNK];
    size_t es = tg_type_size(n->type);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_coords(src, r, &i1, &i2, &i3);
        int32_t id = *(const int32_t *)cpu_at(ids, i1, i2 % ids->ne[1], i3 % ids->ne[2], 0);
        if (id < 0 || id >= n->ne[1]) {
            long long expect = 0;
            atomic_compare_exchange_strong(&t->bad, &expect, (long long)id + ((long long)1 << 40));
            continue;
        }
        const char *s = cpu_at(src, 0, i1, i2, i3);
        char *d = cpu_at(n, 0, id, i2 % n->ne[2], i3 % n->ne[3]);
        for (int64_t c = 0; c < src->ne[0]; c += CHUNK) {
            int64_t m = src->ne[0] - c < CHUNK ? src->ne[0] - c : CHUNK;
            const float *x = (const float *)(s + c * src->nb[0]);
            if (src->nb[0] != sizeof(float)) {
                gather_f32(s + c * src->nb[0], src->nb[0], m, buf);
                x = buf;
            }
            if (n->nb[0] == es) {
                k->from_f32(n->type, x, d + c * n->nb[0], m);
            } else {
                for (int64_t i = 0; i < m; i++) k->from_f32(n->type, x + i, d + (c + i) * n->nb[0], 1);
            }
        }
    }
}

tg_status cpu_op_set_rows(cpu_backend *be, tg_tensor *node) {
    elem_task t = {.node = node};
    run(be, set_rows_task, &t);
    long long bad = atomic_load(&t.bad);
    char ld[CPU_LABEL_SIZE];
    if (bad)
        return tg_status_new(TG_ERR_INVALID_ARG, "set_rows: id %lld out of range [0, %lld) of %s",
                             bad - ((long long)1 << 40), (long long)node->ne[1],
                             cpu_label(node->view_src ? node->view_src : node, ld));
    return NULL;
}

/* ---------------------------------------------------------------- binary */

static void binary_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0], *b = n->src[1];
    const cpu_kernels *k = &t->be->k;
    enum cpu_binop op = (enum cpu_binop)t->iparam;
    int64_t lo, hi, ne0 = n->ne[0];
    cpu_range(tg_nrows(n), ith, nth, &lo, &hi);
    float ta[CHUNK], tb[CHUNK], tz[CHUNK];
    /* Byte stride along dim 0; 0 where a source broadcasts. */
    size_t sa = a->ne[0] == 1 ? 0 : a->nb[0], sb = b->ne[0] == 1 ? 0 : b->nb[0];
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_coords(n, r, &i1, &i2, &i3);
        const char *pa = cpu_at(a, 0, a->ne[1] == 1 ? 0 : i1, a->ne[2] == 1 ? 0 : i2,
                                a->ne[3] == 1 ? 0 : i3);
        const char *pb = cpu_at(b, 0, b->ne[1] == 1 ? 0 : i1, b->ne[2] == 1 ? 0 : i2,
                                b->ne[3] == 1 ? 0 : i3);
        char *pz = cpu_at(n, 0, i1, i2, i3);
        if (n->nb[0] == sizeof(float)) {
            float *z = (float *)pz;
            if (sa == sizeof(float) && sb == sizeof(float)) {
                k->binary(op, ne0, z, (const float *)pa, (const float *)pb);
                continue;
            }
            if (sa == sizeof(float) && sb == 0) {
                k->binary_s(op, ne0, z, (const float *)pa, *(const float *)pb);
                continue;
            }
            if (sa == 0 && sb == sizeof(float)) {
                k->binary_sv(op, ne0, z, *(const float *)pa, (const float *)pb);
                continue;
            }
        }
        for (int64_t c = 0; c < ne0; c += CHUNK) {
            int64_t m = ne0 - c < CHUNK ? ne0 - c : CHUNK;
            gather_f32(pa + c * sa, sa, m, ta);
            gather_f32(pb + c * sb, sb, m, tb);
            k->binary(op, m, tz, ta, tb);
            scatter_f32(tz, m, pz + c * n->nb[0], n->nb[0]);
        }
    }
}

tg_status cpu_op_binary(cpu_backend *be, tg_tensor *node) {
    elem_task t = {.node = node};
    t.iparam = node->op == TG_OP_ADD   ? CPU_ADD
               : node->op == TG_OP_SUB ? CPU_SUB
               : node->op == TG_OP_MUL ? CPU_MUL
                                       : CPU_DIV;
    for (int d = 0; d < TG_MAX_DIMS; d++) {
        const tg_tensor *a = node->src[0], *b = node->src[1];
        if ((a->ne[d] != node->ne[d] && a->ne[d] != 1) || (b->ne[d] != node->ne[d] && b->ne[d] != 1))
            return tg_status_new(TG_ERR_INVALID_ARG, "%s: sources '%s' and '%s' do not broadcast to "
                                 "the result in dim %d", tg_op_name(node->op), a->name, b->name, d);
    }
    run(be, binary_task, &t);
    return NULL;
}

/* ----------------------------------------------------------------- unary */

static void unary_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0];
    const cpu_kernels *k = &t->be->k;
    enum cpu_unop op = (enum cpu_unop)t->iparam;
    int64_t lo, hi, ne0 = n->ne[0];
    cpu_range(tg_nrows(n), ith, nth, &lo, &hi);
    float ta[CHUNK];
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_coords(n, r, &i1, &i2, &i3);
        const char *pa = cpu_at(a, 0, i1, i2, i3);
        char *pz = cpu_at(n, 0, i1, i2, i3);
        if (a->nb[0] == sizeof(float) && n->nb[0] == sizeof(float)) {
            k->unary(op, ne0, (float *)pz, (const float *)pa, t->fparam);
            continue;
        }
        for (int64_t c = 0; c < ne0; c += CHUNK) {
            int64_t m = ne0 - c < CHUNK ? ne0 - c : CHUNK;
            gather_f32(pa + c * a->nb[0], a->nb[0], m, ta);
            k->unary(op, m, ta, ta, t->fparam);
            scatter_f32(ta, m, pz + c * n->nb[0], n->nb[0]);
        }
    }
}

tg_status cpu_op_unary(cpu_backend *be, tg_tensor *node) {
    elem_task t = {.node = node};
    switch (node->op) {
    case TG_OP_RELU: t.iparam = CPU_RELU; break;
    case TG_OP_SILU: t.iparam = CPU_SILU; break;
    case TG_OP_SIGMOID: t.iparam = CPU_SIGMOID; break;
    case TG_OP_LOG: t.iparam = CPU_LOG; break;
    case TG_OP_SQRT: t.iparam = CPU_SQRT; break;
    default:
        t.iparam = CPU_SCALE;
        t.fparam = tg_param_f32(node, 0);
        break;
    }
    if (!tg_same_shape(node, node->src[0]))
        return tg_status_new(TG_ERR_INVALID_ARG, "%s: result and source '%s' differ in shape",
                             tg_op_name(node->op), node->src[0]->name);
    run(be, unary_task, &t);
    return NULL;
}

/* ------------------------------------------------------------------- glu */

static void glu_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0];
    const cpu_kernels *k = &t->be->k;
    int64_t lo, hi, ne0 = n->ne[0];
    cpu_range(tg_nrows(n), ith, nth, &lo, &hi);
    float ta[CHUNK], tg[CHUNK];
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_coords(n, r, &i1, &i2, &i3);
        const char *pa = cpu_at(a, 0, i1, i2, i3);
        const char *pg = pa + ne0 * a->nb[0];
        char *pz = cpu_at(n, 0, i1, i2, i3);
        if (a->nb[0] == sizeof(float) && n->nb[0] == sizeof(float)) {
            k->glu(ne0, (float *)pz, (const float *)pa, (const float *)pg);
            continue;
        }
        for (int64_t c = 0; c < ne0; c += CHUNK) {
            int64_t m = ne0 - c < CHUNK ? ne0 - c : CHUNK;
            gather_f32(pa + c * a->nb[0], a->nb[0], m, ta);
            gather_f32(pg + c * a->nb[0], a->nb[0], m, tg);
            k->glu(m, ta, ta, tg);
            scatter_f32(ta, m, pz + c * n->nb[0], n->nb[0]);
        }
    }
}

tg_status cpu_op_glu(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *a = node->src[0];
    if (a->ne[0] != 2 * node->ne[0] || a->ne[1] != node->ne[1] || a->ne[2] != node->ne[2] ||
        a->ne[3] != node->ne[3])
        return tg_status_new(TG_ERR_INVALID_ARG, "glu: result is not half of '%s' in dim 0",
                             a->name);
    elem_task t = {.node = node};
    run(be, glu_task, &t);
    return NULL;
}

/* ------------------------------------------------------------- cpy / cast */

/* Converts m elements of type st at s (byte stride ss) into type dt at d
 * (stride ds), through a contiguous chunk when strided. */
static void convert_run(const cpu_kernels *k, tg_type st, const char *s, size_t ss, tg_type dt,
                        char *d, size_t ds, int64_t m) {
    size_t es = tg_type_size(st), ed = tg_type_size(dt);
    _Alignas(64) unsigned char bs[CHUNK * 8], bd[CHUNK * 8];
    float f[CHUNK];
    for (int64_t c = 0; c < m; c += CHUNK) {
        int64_t cm = m - c < CHUNK ? m - c : CHUNK;
        const char *src = s + c * ss;
        char *dst = d + c * ds;
        const void *cs = src;
        if (ss != es) {
            for (int64_t i = 0; i < cm; i++) memcpy(bs + i * es, src + i * ss, es);
            cs = bs;
        }
        void *cd = ds == ed ? (void *)dst : (void *)bd;
        if (st == dt) {
            memcpy(cd, cs, (size_t)cm * es);
        } else if ((st == TG_F32 || st == TG_F16 || st == TG_BF16) &&
                   (dt == TG_F32 || dt == TG_F16 || dt == TG_BF16)) {
            if (st == TG_F32) {
                k->from_f32(dt, cs, cd, cm);
            } else if (dt == TG_F32) {
                k->to_f32(st, cs, cd, cm);
            } else {
                k->to_f32(st, cs, f, cm);
                k->from_f32(dt, f, cd, cm);
            }
        } else {
            tg_status_free(tg_convert(st, cs, dt, cd, (size_t)cm));
        }
        if (cd == bd)
            for (int64_t i = 0; i < cm; i++) memcpy(dst + i * ds, bd + i * ed, ed);
    }
}

static void cpy_same_shape_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0];
    int64_t lo, hi;
    cpu_range(tg_nrows(n), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_coords(n, r, &i1, &i2, &i3);
        convert_run(&t->be->k, a->type, cpu_at(a, 0, i1, i2, i3), a->nb[0], n->type,
                    cpu_at(n, 0, i1, i2, i3), n->nb[0], n->ne[0]);
    }
}

/* Both contiguous (any shapes of the same element count): element f of a
 * goes to element f of the result, in one run per thread, so that a copy of
 * a few long rows (a decoder's cache, flattened per row) still uses every
 * thread and needs no per-element addressing. */
static void cpy_contig_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0];
    int64_t lo, hi;
    cpu_range(tg_nelements(n), ith, nth, &lo, &hi);
    if (hi <= lo) return;
    size_t es = tg_type_size(a->type), ed = tg_type_size(n->type);
    convert_run(&t->be->k, a->type, (const char *)a->data + (size_t)lo * es, es, n->type,
                (char *)n->data + (size_t)lo * ed, ed, hi - lo);
}

/* Shapes differ (same element count): element f of a in row-major order goes
 * to element f of the result. */
static void cpy_flat_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0];
    int64_t lo, hi;
    cpu_range(tg_nelements(n), ith, nth, &lo, &hi);
    for (int64_t f = lo; f < hi; f++) {
        int64_t g = f, ia[4], in[4];
        for (int d = 0; d < 4; d++) {
            ia[d] = g % a->ne[d];
            g /= a->ne[d];
        }
        g = f;
        for (int d = 0; d < 4; d++) {
            in[d] = g % n->ne[d];
            g /= n->ne[d];
        }
        convert_run(&t->be->k, a->type, cpu_at(a, ia[0], ia[1], ia[2], ia[3]), 0, n->type,
                    cpu_at(n, in[0], in[1], in[2], in[3]), 0, 1);
    }
}

tg_status cpu_op_cpy(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *a = node->src[0];
    if (tg_nelements(a) != tg_nelements(node))
        return tg_status_new(TG_ERR_INVALID_ARG, "cpy: '%s' has %lld elements, the destination %lld",
                             a->name, (long long)tg_nelements(a), (long long)tg_nelements(node));
    elem_task t = {.node = node};
    if (tg_is_contiguous(a) && tg_is_contiguous(node))
        run(be, cpy_contig_task, &t);
    else
        run(be, tg_same_shape(a, node) ? cpy_same_shape_task : cpy_flat_task, &t);
    return NULL;
}

/* ---------------------------------------------------------------- concat */

static void concat_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0], *b = n->src[1];
    int dim = t->iparam;
    int64_t lo, hi;
    cpu_range(tg_nrows(n), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i[4] = {0};
        row_coords(n, r, &i[1], &i[2], &i[3]);
        char *pz = cpu_at(n, 0, i[1], i[2], i[3]);
        if (dim == 0) {
            for (int64_t j = 0; j < n->ne[0]; j++) {
                const char *s = j < a->ne[0] ? (const char *)cpu_at(a, j, i[1], i[2], i[3])
                                             : (const char *)cpu_at(b, j - a->ne[0], i[1], i[2], i[3]);
                memcpy(pz + j * n->nb[0], s, 4);
            }
            continue;
        }
        const tg_tensor *src = a;
        if (i[dim] >= a->ne[dim]) {
            i[dim] -= a->ne[dim];
            src = b;
        }
        const char *ps = cpu_at(src, 0, i[1], i[2], i[3]);
        if (src->nb[0] == 4 && n->nb[0] == 4) {
            memcpy(pz, ps, (size_t)n->ne[0] * 4);
        } else {
            for (int64_t j = 0; j < n->ne[0]; j++) memcpy(pz + j * n->nb[0], ps + j * src->nb[0], 4);
        }
    }
}

tg_status cpu_op_concat(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *a = node->src[0], *b = node->src[1];
    int dim = tg_param_i32(node, 0);
    if (dim < 0 || dim >= TG_MAX_DIMS)
        return tg_status_new(TG_ERR_INVALID_ARG, "concat: dim %d out of range", dim);
    for (int d = 0; d < TG_MAX_DIMS; d++) {
        int64_t want = d == dim ? a->ne[d] + b->ne[d] : a->ne[d];
        if (node->ne[d] != want || (d != dim && b->ne[d] != a->ne[d]))
            return tg_status_new(TG_ERR_INVALID_ARG, "concat: '%s' and '%s' disagree in dim %d",
                                 a->name, b->name, d);
    }
    elem_task t = {.node = node, .iparam = dim};
    run(be, concat_task, &t);
    return NULL;
}

/* ------------------------------------------------------------------- pad */

static void pad_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0];
    int64_t lo, hi;
    int lo0 = tg_param_i32(n, 0);
    cpu_range(tg_nrows(n), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_coords(n, r, &i1, &i2, &i3);
        char *pz = cpu_at(n, 0, i1, i2, i3);
        int64_t s1 = i1 - tg_param_i32(n, 1), s2 = i2 - tg_param_i32(n, 2),
                s3 = i3 - tg_param_i32(n, 3);
        bool inside = s1 >= 0 && s1 < a->ne[1] && s2 >= 0 && s2 < a->ne[2] && s3 >= 0 &&
                      s3 < a->ne[3];
        for (int64_t j = 0; j < n->ne[0]; j++) {
            int64_t s0 = j - lo0;
            float v = 0.0f;
            if (inside && s0 >= 0 && s0 < a->ne[0]) v = *(const float *)cpu_at(a, s0, s1, s2, s3);
            *(float *)(pz + j * n->nb[0]) = v;
        }
    }
}

tg_status cpu_op_pad(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *a = node->src[0];
    for (int d = 0; d < TG_MAX_DIMS; d++) {
        int l = tg_param_i32(node, d), h = tg_param_i32(node, 4 + d);
        if (l < 0 || h < 0 || node->ne[d] != a->ne[d] + l + h)
            return tg_status_new(TG_ERR_INVALID_ARG, "pad: padding of '%s' in dim %d (%d, %d) "
                                 "does not give the result's size", a->name, d, l, h);
    }
    elem_task t = {.node = node};
    run(be, pad_task, &t);
    return NULL;
}

/* ---------------------------------------------------------------- argmax */

static void argmax_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0];
    int64_t lo, hi;
    cpu_range(tg_nrows(a), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_coords(a, r, &i1, &i2, &i3);
        const char *p = cpu_at(a, 0, i1, i2, i3);
        int64_t best = 0;
        float m = *(const float *)p;
        for (int64_t j = 1; j < a->ne[0]; j++) {
            float v = *(const float *)(p + j * a->nb[0]);
            if (v > m || (m != m && v == v)) {
                m = v;
                best = j;
            }
        }
        /* The result is [ne1, ne2, ne3]: a's dims shift down by one. */
        *(int32_t *)cpu_at(n, i1, i2, i3, 0) = (int32_t)best;
    }
}

tg_status cpu_op_argmax(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *a = node->src[0];
    if (tg_nelements(node) != tg_nrows(a) || a->ne[0] < 1)
        return tg_status_new(TG_ERR_INVALID_ARG, "argmax: result does not have one entry per row "
                             "of '%s'", a->name);
    elem_task t = {.node = node};
    run(be, argmax_task, &t);
    return NULL;
}

/* ------------------------------------------------------------ sum / mean */

static void sum_rows_task(void *arg, int ith, int nth) {
    elem_task *t = arg;
    tg_tensor *n = t->node;
    const tg_tensor *a = n->src[0];
    const cpu_kernels *k = &t->be->k;
    int64_t lo, hi;
    cpu_range(tg_nrows(a), ith, nth, &lo, &hi);
    float buf[CHUNK];
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_coords(a, r, &i1, &i2, &i3);
        const char *p = cpu_at(a, 0, i1, i2, i3);
        double s = 0.0;
        if (a->nb[0] == sizeof(float)) {
            s = k->sum(a->ne[0], (const float *)p);
        } else {
            for (int64_t c = 0; c < a->ne[0]; c += CHUNK) {
                int64_t m = a->ne[0] - c < CHUNK ? a->ne[0] - c : CHUNK;
                gather_f32(p + c * a->nb[0], a->nb[0], m, buf);
                s += k->sum(m, buf);
            }
        }
        if (t->iparam) s /= (double)a->ne[0];
        *(float *)cpu_at(n, 0, i1, i2, i3) = (float)s;
    }
}

tg_status cpu_op_sum_rows(cpu_backend *be, tg_tensor *node) {
    const tg_tensor *a = node->src[0];
    if (node->ne[0] != 1 || node->ne[1] != a->ne[1] || node->ne[2] != a->ne[2] ||
        node->ne[3] != a->ne[3])
        return tg_status_new(TG_ERR_INVALID_ARG, "%s: result is not [1, ne1, ne2, ne3] of '%s'",
                             tg_op_name(node->op), a->name);
    elem_task t = {.node = node, .iparam = node->op == TG_OP_MEAN};
    run(be, sum_rows_task, &t);
    return NULL;
}
