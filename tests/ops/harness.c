/*
 * harness.c: how the op conformance suite runs and judges one case.
 *
 * A case's builder makes input leaves (through env_input, which also makes the
 * non-contiguous views) and calls the op constructors. The harness then
 *   1. asks the backend whether it supports every node (if not: skipped);
 *   2. places every tensor that owns storage in ONE buffer of the backend
 *      under test, each at a 256-byte aligned offset with at least 256 guard
 *      bytes between neighbours, and fills the whole buffer at once through a
 *      tensor spanning it (random guard bytes, the encoded inputs, 0xFF = NaN
 *      in every output so an element never written shows up);
 *   3. computes, reads the whole buffer back through the same spanning tensor,
 *      and fails the case on any changed guard byte ("overrun") or changed
 *      input that no node writes ("input modified");
 *   4. runs the float64 reference (ref.c) on the same rounded input values and
 *      compares the output (and every leaf written in place) by NMSE.
 * Placing tensors ourselves instead of using tg_sched is what makes the guard
 * bytes possible. Not here: the op semantics (ref.c) and the case lists.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_params.h"
#include "ops_test.h"

#define ALIGN 256
#define GUARD 256
#define MAX_LEAVES 16

/* ------------------------------------------------------------------- PRNG */

uint64_t rng_next(rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double rng_uniform(rng *r, double lo, double hi) {
    double u = (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
}

int64_t rng_int(rng *r, int64_t n) { return n > 0 ? (int64_t)(rng_next(r) % (uint64_t)n) : 0; }

/* ---------------------------------------------------------- type codecs */

uint16_t ref_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u;          /* NaN stays NaN */
    if (ax >= 0x477ff000u) return sign | 0x7c00u;         /* >= 65520: inf */
    if (ax < 0x38800000u) {                               /* below 2^-14: subnormal */
        float a;
        memcpy(&a, &ax, 4);
        double q = rint((double)a * 16777216.0);          /* units of 2^-24, RNE */
        return sign | (uint16_t)q;                        /* 1024 is the least normal */
    }
    ax += 0xfffu + ((ax >> 13) & 1u);                     /* round to nearest even */
    ax -= 112u << 23;                                     /* rebias 127 -> 15 */
    return sign | (uint16_t)(ax >> 13);
}

double ref_f16_to_f64(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0) return s * ldexp(m, -24);
    if (e == 31) return m ? NAN : s * INFINITY;
    return s * ldexp(1024 + m, e - 25);
}

uint16_t ref_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

double ref_bf16_to_f64(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

size_t ref_type_size(tg_type t) {
    switch (t) {
    case TG_F32: case TG_I32: return 4;
    case TG_F16: case TG_BF16: return 2;
    case TG_I64: return 8;
    default: return 0;
    }
}

double ref_round_to(tg_type t, double v) {
    switch (t) {
    case TG_F32: return (double)(float)v;
    case TG_F16: return ref_f16_to_f64(ref_f32_to_f16((float)v));
    case TG_BF16: return ref_bf16_to_f64(ref_f32_to_bf16((float)v));
    case TG_I32: case TG_I64: return isfinite(v) ? trunc(v) : 0.0;
    default: return NAN;
    }
}

double ref_load(tg_type t, const void *p) {
    switch (t) {
    case TG_F32: { float f; memcpy(&f, p, 4); return f; }
    case TG_F16: { uint16_t h; memcpy(&h, p, 2); return ref_f16_to_f64(h); }
    case TG_BF16: { uint16_t h; memcpy(&h, p, 2); return ref_bf16_to_f64(h); }
    case TG_I32: { int32_t i; memcpy(&i, p, 4); return i; }
    case TG_I64: { int64_t i; memcpy(&i, p, 8); return (double)i; }
    default: return NAN;
    }
}

void ref_store(tg_type t, void *p, double v) {
    switch (t) {
    case TG_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case TG_F16: { uint16_t h = ref_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
    case TG_BF16: { uint16_t h = ref_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    case TG_I32: { int32_t i = (int32_t)ref_round_to(t, v); memcpy(p, &i, 4); break; }
    case TG_I64: { int64_t i = (int64_t)ref_round_to(t, v); memcpy(p, &i, 8); break; }
    default: break;
    }
}

/* ------------------------------------------------------------ case lists */

void cases_add(case_list *l, tg_op op, double limit, build_fn build, const case_params *p,
               const char *fmt, ...) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        op_case *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) {
            fprintf(stderr, "test-ops: out of memory growing the case list\n");
            exit(2);
        }
        l->v = v;
        l->cap = cap;
    }
    op_case *c = &l->v[l->n++];
    memset(c, 0, sizeof *c);
    c->op = op;
    c->limit = limit;
    c->build = build;
    c->p = *p;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->name, sizeof c->name, fmt, ap);
    va_end(ap);
}

void cases_free(case_list *l) {
    free(l->v);
    memset(l, 0, sizeof *l);
}

const char *fmt_ne(char *buf, size_t size, const int64_t ne[4]) {
    int nd = 4;
    while (nd > 1 && ne[nd - 1] == 1) nd--;
    int n = snprintf(buf, size, "[");
    for (int i = 0; i < nd && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? "," : "", (long long)ne[i]);
    if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
    return buf;
}

const char *cp_shape(const case_params *p, int k, char *buf, size_t size) {
    char b[80];
    snprintf(buf, size, "%s%s", fmt_ne(b, sizeof b, p->ne[k]), layout_name((layout)p->layout[k]));
    return buf;
}

const char *layout_name(layout l) {
    static const char *names[L_COUNT] = {"", " rowpad", " T01", " T12", " perm"};
    return (unsigned)l < L_COUNT ? names[l] : " ?";
}

/* ------------------------------------------------------------ environment */

struct case_env {
    tg_ctx *ctx;
    rng rng;
    struct {
        tg_tensor *t;
        fill_spec f;
    } leaves[MAX_LEAVES];
    int n_leaves;
    bool failed;
    char fail[384];
};

tg_ctx *env_ctx(case_env *e) { return e->ctx; }

void env_fail(case_env *e, const char *fmt, ...) {
    if (e->failed) return;
    e->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->fail, sizeof e->fail, fmt, ap);
    va_end(ap);
}

void env_expect_view(case_env *e, const char *what, const tg_tensor *v, const int64_t ne[4],
                     const size_t nb[4], size_t offset_from_src) {
    if (!v) return;
    for (int i = 0; i < 4; i++) {
        /* a stride of a dim of extent 1 is never used: not compared */
        if (v->ne[i] != ne[i] || (ne[i] != 1 && v->nb[i] != nb[i])) {
            env_fail(e, "%s view: dim %d is ne %lld nb %zu, expected ne %lld nb %zu", what, i,
                     (long long)v->ne[i], v->nb[i], (long long)ne[i], nb[i]);
            return;
        }
    }
    if (!v->view_src || v->view_offs != offset_from_src)
        env_fail(e, "%s view: offset %zu (view_src %s), expected %zu", what, v->view_offs,
                 v->view_src ? "set" : "NULL", offset_from_src);
}

void env_expect_i32(case_env *e, const tg_tensor *t, int first, const int32_t *vals, int n) {
    if (!t) return;
    for (int i = 0; i < n; i++)
        if (tg_param_i32(t, first + i) != vals[i]) {
            env_fail(e, "%s: op_params[%d] is %d, the builder passed %d", tg_op_name(t->op),
                     first + i, tg_param_i32(t, first + i), vals[i]);
            return;
        }
}

void env_expect_f32(case_env *e, const tg_tensor *t, int slot, float val) {
    if (t && tg_param_f32(t, slot) != val)
        env_fail(e, "%s: f32 op_params[%d] is %g, the builder passed %g", tg_op_name(t->op), slot,
                 (double)tg_param_f32(t, slot), (double)val);
}

static tg_tensor *env_leaf(case_env *e, tg_type type, const int64_t ne[4], fill_spec f) {
    if (e->n_leaves == MAX_LEAVES) {
        env_fail(e, "test case has more than %d inputs", MAX_LEAVES);
        return NULL;
    }
    tg_tensor *t = tg_new_tensor(e->ctx, type, 4, ne);
    if (!t) return NULL;
    t->flags |= TG_FLAG_INPUT;
    tg_set_name(t, "in%d", e->n_leaves);
    e->leaves[e->n_leaves].t = t;
    e->leaves[e->n_leaves].f = f;
    e->n_leaves++;
    return t;
}

tg_tensor *env_input(case_env *e, tg_type type, const int64_t ne[4], layout l, fill_spec f) {
    size_t ts = ref_type_size(type);
    switch (l) {
    case L_CONT:
        return env_leaf(e, type, ne, f);
    case L_ROWPAD: {
        int64_t sne[4] = {ne[0] + 3, ne[1] + 1, ne[2], ne[3]};
        tg_tensor *s = env_leaf(e, type, sne, f);
        if (!s) return NULL;
        size_t nb[4] = {ts, s->nb[1], s->nb[2], s->nb[3]};
        size_t offs = ts + s->nb[1]; /* one element in, one row down */
        tg_tensor *v = tg_view(e->ctx, s, 4, ne, nb, offs);
        size_t enb[4] = {ts, ts * (size_t)sne[0], ts * (size_t)(sne[0] * sne[1]),
                         ts * (size_t)(sne[0] * sne[1] * sne[2])};
        env_expect_view(e, "rowpad", v, ne, enb, offs);
        return v;
    }
    case L_T01: case L_T12: case L_PERM: {
        /* result dim axes[i] is storage dim i (tg_permute's convention) */
        static const int axes[3][4] = {{1, 0, 2, 3}, {0, 2, 1, 3}, {1, 2, 0, 3}};
        const int *ax = axes[l - L_T01];
        int64_t sne[4];
        for (int i = 0; i < 4; i++) sne[i] = ne[ax[i]];
        tg_tensor *s = env_leaf(e, type, sne, f);
        if (!s) return NULL;
        tg_tensor *v = tg_permute(e->ctx, s, ax[0], ax[1], ax[2], ax[3]);
        size_t snb[4] = {ts, ts * (size_t)sne[0], ts * (size_t)(sne[0] * sne[1]),
                         ts * (size_t)(sne[0] * sne[1] * sne[2])};
        size_t enb[4];
        for (int i = 0; i < 4; i++) enb[ax[i]] = snb[i];
        env_expect_view(e, "permute", v, ne, enb, 0);
        return v;
    }
    default:
        env_fail(e, "bad layout %d", (int)l);
        return NULL;
    }
}

/* Fills the n elements of leaf t (contiguous) per f, rounded to t's type. */
static void fill_values(rng *r, const tg_tensor *t, fill_spec f, double *v) {
    int64_t n = tg_nelements(t), row = t->ne[0] > 0 ? t->ne[0] : 1;
    switch (f.kind) {
    case FILL_UNIFORM:
        for (int64_t i = 0; i < n; i++) v[i] = rng_uniform(r, f.lo, f.hi);
        break;
    case FILL_AWAY0:
        for (int64_t i = 0; i < n; i++) {
            double m = rng_uniform(r, f.lo, f.hi);
            v[i] = (rng_next(r) & 1) ? -m : m;
        }
        break;
    case FILL_LEVELS:
        for (int64_t i = 0; i < n; i++)
            v[i] = f.lo + (double)rng_int(r, (int64_t)(f.hi - f.lo) + 1);
        break;
    case FILL_IDS:
        for (int64_t i = 0; i < n; i++) v[i] = (double)rng_int(r, (int64_t)f.hi);
        break;
    case FILL_IDS_DISTINCT:
        for (int64_t g = 0; g < n; g += row) {
            /* a partial Fisher-Yates shuffle of 0..hi-1, first `row` kept */
            int64_t m = (int64_t)f.hi;
            int64_t *perm = malloc((size_t)m * sizeof *perm);
            if (!perm) { fprintf(stderr, "test-ops: out of memory\n"); exit(2); }
            for (int64_t i = 0; i < m; i++) perm[i] = i;
            for (int64_t i = 0; i < row && i < m; i++) {
                int64_t j = i + rng_int(r, m - i);
                int64_t x = perm[i]; perm[i] = perm[j]; perm[j] = x;
            }
            for (int64_t i = 0; i < row; i++) v[g + i] = (double)perm[i % m];
            free(perm);
        }
        break;
    case FILL_MASK:
    case FILL_MASK_NOFULL:
        for (int64_t g = 0, rowi = 0; g < n; g += row, rowi++) {
            bool full = f.kind == FILL_MASK && (rowi == 1 || rng_int(r, 6) == 0);
            for (int64_t i = 0; i < row; i++) {
                bool inf = full || rng_int(r, 4) == 0;
                v[g + i] = inf ? -INFINITY : rng_uniform(r, f.lo, f.hi);
            }
        }
        break;
    }
    for (int64_t i = 0; i < n; i++) v[i] = ref_round_to(t->type, v[i]);
}

/* ---------------------------------------------------------------- judging */

/* "element 17" or, with a shape, "element [3,2,0,0]". */
static const char *where(int64_t i, const int64_t *ne, char *buf, size_t size) {
    if (!ne) {
        snprintf(buf, size, "element %lld", (long long)i);
    } else {
        int64_t ix[4];
        for (int d = 0; d < 4; d++) {
            ix[d] = i % ne[d];
            i /= ne[d];
        }
        snprintf(buf, size, "element [%lld,%lld,%lld,%lld]", (long long)ix[0], (long long)ix[1],
                 (long long)ix[2], (long long)ix[3]);
    }
    return buf;
}

static bool judge_shaped(const double *out, const double *ref, int64_t n, const int64_t *ne,
                         double *out_nmse, char *msg, size_t msg_size);

bool judge_values(const double *out, const double *ref, int64_t n, double *out_nmse,
                  char *msg, size_t msg_size) {
    return judge_shaped(out, ref, n, NULL, out_nmse, msg, msg_size);
}

static bool judge_shaped(const double *out, const double *ref, int64_t n, const int64_t *ne,
                         double *out_nmse, char *msg, size_t msg_size) {
    char w[96];
    double num = 0, den = 0, worst = -1;
    int64_t wi = -1;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(ref[i])) {
            snprintf(msg, msg_size, "reference is NaN at %s (harness bug)",
                     where(i, ne, w, sizeof w));
            *out_nmse = NAN;
            return false;
        }
        if (isinf(ref[i]) && out[i] == ref[i]) continue;
        if (!isfinite(out[i])) {
            snprintf(msg, msg_size, "non-finite output (NaN/inf) at %s: got %g, expected %g",
                     where(i, ne, w, sizeof w), out[i], ref[i]);
            *out_nmse = NAN;
            return false;
        }
        double d = out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
        if (fabs(d) > worst) { worst = fabs(d); wi = i; }
    }
    *out_nmse = den > 0 ? num / den : (num > 0 ? INFINITY : 0.0);
    if (wi >= 0 && worst > 0)
        snprintf(msg, msg_size, "largest error at %s: got %.9g, expected %.9g",
                 where(wi, ne, w, sizeof w), out[wi], ref[wi]);
    else
        msg[0] = 0;
    return true;
}

/* ------------------------------------------------------------------ running */

static void describe(const tg_tensor *t, char *sig, size_t size) {
    int n = snprintf(sig, size, "%s ", tg_op_name(t->op));
    for (int i = 0; i < TG_MAX_SRC && t->src[i] && n > 0 && (size_t)n < size; i++)
        n += snprintf(sig + n, size - (size_t)n, "%s%s", i ? "," : "", tg_type_name(t->src[i]->type));
    if (n > 0 && (size_t)n < size) snprintf(sig + n, size - (size_t)n, " -> %s", tg_type_name(t->type));
}

typedef struct built {
    case_env env;
    tg_graph *g;
    tg_tensor *out;
} built;

/* Builds c; false with o->res = RES_FAIL and a message when it did not. */
static bool build_case(const op_case *c, uint64_t seed, built *b, case_outcome *o) {
    memset(b, 0, sizeof *b);
    b->env.rng.s = seed;
    b->env.ctx = tg_ctx_new();
    if (!b->env.ctx) {
        snprintf(o->msg, sizeof o->msg, "tg_ctx_new: out of memory");
        o->res = RES_FAIL;
        return false;
    }
    b->out = c->build(&b->env, &c->p);
    if (b->out) describe(b->out, o->sig, sizeof o->sig);
    if (b->env.failed) {
        snprintf(o->msg, sizeof o->msg, "%s", b->env.fail);
        o->res = RES_FAIL;
        return false;
    }
    tg_status st = tg_ctx_check(b->env.ctx);
    if (st || !b->out) {
        snprintf(o->msg, sizeof o->msg, "constructor refused: %s",
                 st ? tg_status_message(st) : "NULL without an error");
        tg_status_free(st);
        o->res = RES_FAIL;
        return false;
    }
    b->g = tg_graph_new(b->env.ctx);
    st = b->g ? tg_graph_build(b->g, b->out) : tg_status_new(TG_ERR_NO_MEMORY, "tg_graph_new");
    if (st) {
        snprintf(o->msg, sizeof o->msg, "graph build: %s", tg_status_message(st));
        tg_status_free(st);
        o->res = RES_FAIL;
        return false;
    }
    return true;
}

/* The first node of b's graph that backend does not support, or NULL. */
static const tg_tensor *first_unsupported(tg_backend *backend, const built *b) {
    for (int i = 0; i < tg_graph_n_nodes(b->g); i++) {
        const tg_tensor *n = tg_graph_node(b->g, i);
        if (!tg_op_is_view(n->op) && !tg_backend_supports_op(backend, n)) return n;
    }
    return NULL;
}

int case_supported(tg_backend *backend, const op_case *c, char *sig, size_t sig_size) {
    built b;
    case_outcome o;
    memset(&o, 0, sizeof o);
    int r = -1;
    if (build_case(c, 1, &b, &o)) r = first_unsupported(backend, &b) ? 0 : 1;
    snprintf(sig, sig_size, "%s", o.sig[0] ? o.sig : tg_op_name(c->op));
    tg_ctx_free(b.env.ctx);
    return r;
}

const tg_tensor *ref_root(const tg_tensor *t, size_t *out_offset) {
    size_t offs = 0;
    while (t->view_src) {
        offs += t->view_offs;
        t = t->view_src;
    }
    *out_offset = offs;
    return t;
}

typedef struct placed {
    tg_tensor *t;
    size_t offset, size;
    bool leaf, written;   /* written: some node writes into it in place */
} placed;

static int find_placed(const placed *p, int n, const tg_tensor *t) {
    for (int i = 0; i < n; i++)
        if (p[i].t == t) return i;
    return -1;
}

/* Reads every element of t (through its strides) from the buffer image img
 * where t's root sits at root_off; vals has tg_nelements(t) entries. */
static void gather(const uint8_t *img, size_t root_off, const tg_tensor *t, double *vals) {
    size_t voff;
    ref_root(t, &voff);
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
                    vals[k++] = ref_load(t->type, img + root_off + voff + i0 * t->nb[0] +
                                                      i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

static void gather_ref(const ref_state *r, const tg_tensor *t, double *vals) {
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) vals[k++] = ref_get(r, t, i0, i1, i2, i3);
}

#define FAIL(...)                                                  \
    do {                                                           \
        snprintf(o->msg, sizeof o->msg, __VA_ARGS__);              \
        o->res = RES_FAIL;                                         \
        goto done;                                                 \
    } while (0)

/* Compares t as computed (img) with the reference; accumulates the worst NMSE
 * into o; false when the case fails. */
static bool judge_tensor(const uint8_t *img, size_t root_off, const ref_state *r,
                         const tg_tensor *t, double limit, const char *what, case_outcome *o) {
    int64_t n = tg_nelements(t);
    double *got = malloc((size_t)(n ? n : 1) * sizeof *got);
    double *exp = malloc((size_t)(n ? n : 1) * sizeof *exp);
    if (!got || !exp) {
        free(got); free(exp);
        snprintf(o->msg, sizeof o->msg, "out of memory comparing %s", what);
        return false;
    }
    gather(img, root_off, t, got);
    gather_ref(r, t, exp);
    double nmse;
    char why[256];
    bool finite = judge_shaped(got, exp, n, t->ne, &nmse, why, sizeof why);
    free(got);
    free(exp);
    if (!finite) {
        snprintf(o->msg, sizeof o->msg, "%s: %s", what, why);
        o->nmse = NAN;
        return false;
    }
    if (nmse > o->nmse || isnan(o->nmse)) o->nmse = nmse;
    if (nmse > limit) {
        snprintf(o->msg, sizeof o->msg, "%s: NMSE %.3g > limit %.3g; %s", what, nmse, limit, why);
        return false;
    }
    return true;
}

void run_case(tg_backend *backend, const op_case *c, uint64_t seed, case_outcome *o) {
    memset(o, 0, sizeof *o);
    o->res = RES_PASS;
    built b;
    tg_ctx *gctx = NULL;
    tg_buffer *buf = NULL;
    placed *pl = NULL;
    uint8_t *pat = NULL, *img = NULL;
    double *vals = NULL;
    ref_state *ref = NULL;
    int np = 0;

    if (!build_case(c, seed, &b, o)) goto done;
    const tg_tensor *un = first_unsupported(backend, &b);
    if (un) {
        char s[160];
        describe(un, s, sizeof s);
        snprintf(o->msg, sizeof o->msg, "not supported by %s: %s", tg_backend_name(backend), s);
        o->res = RES_SKIP;
        goto done;
    }

    /* 2. layout: every tensor that owns storage, between guards */
    int nt = tg_ctx_n_tensors(b.env.ctx);
    pl = calloc((size_t)nt, sizeof *pl);
    if (!pl) FAIL("out of memory");
    size_t cur = GUARD;
    for (int i = 0; i < nt; i++) {
        tg_tensor *t = tg_ctx_tensor(b.env.ctx, i);
        if (t->view_src) continue;
        if (!tg_is_contiguous(t)) FAIL("tensor '%s' (%s) owns storage but is not contiguous", t->name, tg_op_name(t->op));
        size_t sz = (size_t)tg_nelements(t) * ref_type_size(t->type);
        size_t off = (cur + ALIGN - 1) / ALIGN * ALIGN;
        pl[np++] = (placed){t, off, sz, t->op == TG_OP_NONE, false};
        cur = off + sz + GUARD;
    }
    size_t total = (cur + ALIGN - 1) / ALIGN * ALIGN;
    for (int i = 0; i < tg_graph_n_nodes(b.g); i++) {
        const tg_tensor *n = tg_graph_node(b.g, i);
        size_t off;
        const tg_tensor *root = ref_root(n, &off);
        if (!tg_op_is_view(n->op) && root != n) {
            int k = find_placed(pl, np, root);
            if (k >= 0) pl[k].written = true;
        }
    }

    tg_status st = tg_backend_buffer_alloc(backend, total, &buf);
    if (st) {
        snprintf(o->msg, sizeof o->msg, "buffer of %zu bytes: %s", total, tg_status_message(st));
        tg_status_free(st);
        o->res = RES_FAIL;
        goto done;
    }
    gctx = tg_ctx_new();
    tg_tensor *whole = gctx ? tg_new_1d(gctx, TG_I32, (int64_t)(total / 4)) : NULL;
    if (!whole) FAIL("out of memory (guard tensor)");
    st = tg_tensor_place(whole, buf, 0);
    for (int i = 0; i < np && !st; i++) st = tg_tensor_place(pl[i].t, buf, pl[i].offset);
    if (st) {
        snprintf(o->msg, sizeof o->msg, "tg_tensor_place: %s", tg_status_message(st));
        tg_status_free(st);
        o->res = RES_FAIL;
        goto done;
    }

    /* fill: random guards, encoded inputs, 0xFF (NaN / -1) in outputs */
    pat = malloc(total);
    img = malloc(total);
    ref = ref_new();
    if (!pat || !img || !ref) FAIL("out of memory");
    for (size_t i = 0; i < total; i += 8) {
        uint64_t x = rng_next(&b.env.rng);
        memcpy(pat + i, &x, total - i < 8 ? total - i : 8);
    }
    for (int i = 0; i < np; i++) {
        const tg_tensor *t = pl[i].t;
        int64_t n = tg_nelements(t);
        free(vals);
        vals = malloc((size_t)(n ? n : 1) * sizeof *vals);
        if (!vals) FAIL("out of memory");
        if (pl[i].leaf) {
            fill_spec f = fill_u(-1, 1);
            for (int k = 0; k < b.env.n_leaves; k++)
                if (b.env.leaves[k].t == t) f = b.env.leaves[k].f;
            fill_values(&b.env.rng, t, f, vals);
            size_t ts = ref_type_size(t->type);
            for (int64_t k = 0; k < n; k++) ref_store(t->type, pat + pl[i].offset + (size_t)k * ts, vals[k]);
        } else {
            memset(pat + pl[i].offset, 0xFF, pl[i].size);
            for (int64_t k = 0; k < n; k++) vals[k] = NAN;
        }
        if (!ref_add_root(ref, t, vals, n)) FAIL("out of memory");
    }
    st = tg_tensor_set(whole, pat, 0, total);
    for (int i = 0; i < np && !st; i++)
        if (pl[i].leaf) st = tg_tensor_set(pl[i].t, pat + pl[i].offset, 0, pl[i].size);
    if (st) {
        snprintf(o->msg, sizeof o->msg, "tg_tensor_set: %s", tg_status_message(st));
        tg_status_free(st);
        o->res = RES_FAIL;
        goto done;
    }

    /* 3. compute and read everything back */
    st = tg_backend_graph_compute(backend, b.g);
    if (!st) st = tg_backend_synchronize(backend);
    if (st) {
        snprintf(o->msg, sizeof o->msg, "compute: %s", tg_status_message(st));
        tg_status_free(st);
        o->res = RES_FAIL;
        goto done;
    }
    /* views follow their roots (resolved by compute at the latest) */
    for (int i = 0; i < nt; i++) {
        tg_tensor *t = tg_ctx_tensor(b.env.ctx, i);
        if (!t->view_src) continue;
        size_t voff;
        const tg_tensor *root = ref_root(t, &voff);
        if ((const char *)t->data != (const char *)root->data + voff)
            FAIL("view '%s' (%s): data is not its root's data + %zu after compute", t->name,
                 tg_op_name(t->op), voff);
    }
    st = tg_tensor_get(whole, img, 0, total);
    if (st) {
        snprintf(o->msg, sizeof o->msg, "tg_tensor_get: %s", tg_status_message(st));
        tg_status_free(st);
        o->res = RES_FAIL;
        goto done;
    }
    {
        size_t prev_end = 0;
        const char *prev = "buffer start";
        for (int i = 0; i <= np; i++) {
            size_t start = i < np ? pl[i].offset : total;
            size_t changed = 0, first = 0;
            for (size_t k = prev_end; k < start; k++)
                if (img[k] != pat[k]) { if (!changed) first = k; changed++; }
            if (changed)
                FAIL("overrun: %zu guard bytes changed between %s and %s (first at byte %zu of "
                     "the %zu-byte gap)", changed, prev,
                     i < np ? (pl[i].t->name[0] ? pl[i].t->name : tg_op_name(pl[i].t->op))
                            : "the buffer end",
                     first - prev_end, start - prev_end);
            if (i < np) {
                prev_end = pl[i].offset + pl[i].size;
                prev = pl[i].t->name[0] ? pl[i].t->name : tg_op_name(pl[i].t->op);
            }
        }
    }
    for (int i = 0; i < np; i++)
        if (pl[i].leaf && !pl[i].written &&
            memcmp(img + pl[i].offset, pat + pl[i].offset, pl[i].size) != 0)
            FAIL("input '%s' modified by compute", pl[i].t->name);

    /* 4. reference and comparison */
    for (int i = 0; i < tg_graph_n_nodes(b.g); i++) {
        const tg_tensor *n = tg_graph_node(b.g, i);
        if (tg_op_is_view(n->op)) continue;
        char why[256];
        if (!ref_compute(ref, n, why, sizeof why)) FAIL("reference: %s", why);
    }
    double limit = (b.out->type == TG_I32 || b.out->type == TG_I64) ? LIM_EXACT : c->limit;
    size_t voff;
    const tg_tensor *oroot = ref_root(b.out, &voff);
    int k = find_placed(pl, np, oroot);
    if (k < 0) FAIL("output's storage was not placed");
    if (!judge_tensor(img, pl[k].offset, ref, b.out, limit, "output", o)) {
        o->res = RES_FAIL;
        goto done;
    }
    for (int i = 0; i < np; i++) {
        if (!pl[i].leaf || !pl[i].written) continue;
        char what[96];
        snprintf(what, sizeof what, "whole of in-place target '%s'", pl[i].t->name);
        if (!judge_tensor(img, pl[i].offset, ref, pl[i].t, limit, what, o)) {
            o->res = RES_FAIL;
            goto done;
        }
    }

done:
    free(vals);
    free(pat);
    free(img);
    free(pl);
    ref_free(ref);
    tg_ctx_free(b.env.ctx);
    tg_ctx_free(gctx);
    tg_buffer_free(buf);
}
