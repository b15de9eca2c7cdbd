/*
 * cases_data.c: conformance cases for the ops that move data: get_rows,
 * set_rows, cpy / cast / cont, concat and pad.
 *
 * get_rows reads F32, F16 and BF16 tables (the token embedding is bf16 on
 * disk), with repeated ids; set_rows writes F32 and F16 rows at ids given as
 * data (the KV cache) and must leave every other row of dst alone, which the
 * harness checks by comparing the whole destination. Casts cover every pair
 * of F32/F16/BF16/I32 that the model can meet, with value ranges that reach
 * f16 subnormals and f16's largest finite values, and copies read transposed,
 * permuted, strided and rel_shift views and write into views. Limits: these
 * ops only move or round values, so LIM_ELEM (and exact for integer results).
 */
#include <stdio.h>

#include "ops_test.h"

static fill_spec fill_for(tg_type t, double lo, double hi) {
    if (t == TG_I32) return (fill_spec){FILL_LEVELS, lo, hi};
    return fill_u(lo, hi);
}

/* type[0]: table type; ne[0]: table; layout[0]; ne[1]: ids [k, d2, d3]. */
tg_tensor *build_get_rows(case_env *e, const case_params *p) {
    tg_tensor *a = env_input(e, p->type[0], p->ne[0], (layout)p->layout[0], fill_u(-1, 1));
    tg_tensor *ids = env_input(e, TG_I32, p->ne[1], L_CONT,
                               (fill_spec){FILL_IDS, 0, (double)p->ne[0][1]});
    return tg_get_rows(env_ctx(e), a, ids);
}

/* type[0]: dst type; ne[0]: dst; ne[1]: src (F32, layout[1]); ids [k, d2, d3]. */
static tg_tensor *build_set_rows(case_env *e, const case_params *p) {
    tg_tensor *dst = env_input(e, p->type[0], p->ne[0], L_CONT, fill_u(-1, 1));
    tg_tensor *src = env_input(e, TG_F32, p->ne[1], (layout)p->layout[1], fill_u(-1, 1));
    int64_t ine[4] = {p->ne[1][1], p->ne[1][2], p->ne[1][3], 1};
    tg_tensor *ids = env_input(e, TG_I32, ine, L_CONT,
                               (fill_spec){FILL_IDS_DISTINCT, 0, (double)p->ne[0][1]});
    return tg_set_rows(env_ctx(e), dst, src, ids);
}

/* type[0] -> type[1]; ne[0], layout[0]; values in [f[0], f[1]]; i[0] = 1: tg_cont. */
static tg_tensor *build_cast(case_env *e, const case_params *p) {
    tg_tensor *a = env_input(e, p->type[0], p->ne[0], (layout)p->layout[0],
                             fill_for(p->type[0], p->f[0], p->f[1]));
    return p->i[0] ? tg_cont(env_ctx(e), a) : tg_cast(env_ctx(e), a, p->type[1]);
}

/* cont(rel_shift(BDraw)), BDraw [2T-1, T, H]; i[0] = T, i[1] = H. */
static tg_tensor *build_cont_rel_shift(case_env *e, const case_params *p) {
    int64_t T = p->i[0], H = p->i[1];
    int64_t rne[4] = {2 * T - 1, T, H, 1}, ne[4] = {T, T, H, 1};
    tg_tensor *raw = env_input(e, TG_F32, rne, L_CONT, fill_u(-1, 1));
    tg_tensor *bd = raw ? tg_rel_shift(env_ctx(e), raw) : NULL;
    if (bd) {
        size_t nb[4] = {raw->nb[0], raw->nb[1] - raw->nb[0], raw->nb[2], raw->nb[3]};
        env_expect_view(e, "rel_shift", bd, ne, nb, (size_t)(T - 1) * raw->nb[0]);
    }
    return tg_cont(env_ctx(e), bd);
}

/* tg_cpy(a, view of dst). i[0]: 0 = rows [i[1], i[1]+k) of dst [D, Tc, H] (the
 * KV cache slot), 1 = a transposed dst, 2 = dst of another shape (same count).
 * a: F32 ne[0] layout[0]; dst: type[1] ne[1]. */
static tg_tensor *build_cpy(case_env *e, const case_params *p) {
    tg_ctx *ctx = env_ctx(e);
    tg_tensor *a = env_input(e, TG_F32, p->ne[0], (layout)p->layout[0], fill_u(-1, 1));
    tg_tensor *dst = env_input(e, p->type[1], p->ne[1], L_CONT, fill_u(-1, 1));
    if (!a || !dst) return NULL;
    tg_tensor *v = dst;
    if (p->i[0] == 0) {
        size_t off = (size_t)p->i[1] * dst->nb[1];
        v = tg_view_3d(ctx, dst, p->ne[0][0], p->ne[0][1], p->ne[0][2], dst->nb[1], dst->nb[2], off);
        size_t nb[4] = {dst->nb[0], dst->nb[1], dst->nb[2], dst->nb[2] * (size_t)p->ne[0][2]};
        int64_t ne[4] = {p->ne[0][0], p->ne[0][1], p->ne[0][2], 1};
        env_expect_view(e, "view_3d", v, ne, nb, off);
    } else if (p->i[0] == 1) {
        v = tg_transpose(ctx, dst);
        int64_t ne[4] = {dst->ne[1], dst->ne[0], dst->ne[2], dst->ne[3]};
        size_t nb[4] = {dst->nb[1], dst->nb[0], dst->nb[2], dst->nb[3]};
        env_expect_view(e, "transpose", v, ne, nb, 0);
    }
    return tg_cpy(ctx, a, v);
}

/* type[0] for both; a ne[0] layout[0]; b ne[1] layout[1]; dim i[0]. */
static tg_tensor *build_concat(case_env *e, const case_params *p) {
    fill_spec f = fill_for(p->type[0], -1000, 1000);
    tg_tensor *a = env_input(e, p->type[0], p->ne[0], (layout)p->layout[0], f);
    tg_tensor *b = env_input(e, p->type[0], p->ne[1], (layout)p->layout[1], f);
    tg_tensor *out = tg_concat(env_ctx(e), a, b, p->i[0]);
    env_expect_i32(e, out, 0, &p->i[0], 1);
    return out;
}

/* a ne[0] layout[0]; lo = i[0..3], hi = i[4..7]. */
static tg_tensor *build_pad(case_env *e, const case_params *p) {
    tg_tensor *a = env_input(e, TG_F32, p->ne[0], (layout)p->layout[0], fill_u(-1, 1));
    int lo[4] = {p->i[0], p->i[1], p->i[2], p->i[3]}, hi[4] = {p->i[4], p->i[5], p->i[6], p->i[7]};
    tg_tensor *out = tg_pad(env_ctx(e), a, lo, hi);
    env_expect_i32(e, out, 0, p->i, 8);
    return out;
}

typedef struct two {
    int64_t a[4];
    layout la;
    int64_t b[4];
    layout lb;
    int k;
} two;

static void add_get_set_rows(case_list *l) {
    static const two gr[] = {
        {{7, 5, 1, 1}, L_CONT, {3, 1, 1, 1}, L_CONT, 0},
        {{1, 33, 1, 1}, L_CONT, {7, 1, 1, 1}, L_CONT, 0},
        {{65, 10, 2, 1}, L_CONT, {5, 2, 1, 1}, L_CONT, 0},
        {{33, 9, 2, 3}, L_CONT, {4, 2, 3, 1}, L_CONT, 0},
        {{1280, 50, 1, 1}, L_CONT, {7, 1, 1, 1}, L_CONT, 0},
        {{65, 10, 1, 1}, L_ROWPAD, {6, 1, 1, 1}, L_CONT, 0},
    };
    static const tg_type tt[] = {TG_F32, TG_F16, TG_BF16};
    char s0[96], s1[96];
    for (size_t t = 0; t < 3; t++)
        for (size_t k = 0; k < sizeof gr / sizeof gr[0]; k++) {
            case_params p = cp_new();
            p.type[0] = tt[t];
            memcpy(p.ne[0], gr[k].a, sizeof gr[k].a);
            memcpy(p.ne[1], gr[k].b, sizeof gr[k].b);
            p.layout[0] = gr[k].la;
            cases_add(l, TG_OP_GET_ROWS, LIM_ELEM, build_get_rows, &p, "get_rows %s table=%s ids=%s",
                      tg_type_name(tt[t]), cp_shape(&p, 0, s0, sizeof s0),
                      cp_shape(&p, 1, s1, sizeof s1));
        }

    static const two sr[] = {
        {{64, 40, 2, 1}, L_CONT, {64, 1, 2, 1}, L_CONT, 0},   /* decoder step */
        {{7, 10, 1, 1}, L_CONT, {7, 3, 1, 1}, L_CONT, 0},
        {{33, 9, 2, 3}, L_CONT, {33, 4, 2, 3}, L_CONT, 0},
        {{1, 5, 1, 1}, L_CONT, {1, 5, 1, 1}, L_CONT, 0},      /* every row */
        {{16, 12, 2, 1}, L_CONT, {16, 3, 2, 1}, L_T12, 0},
        {{1280, 9, 1, 1}, L_CONT, {1280, 2, 1, 1}, L_ROWPAD, 0},
    };
    /* BF16: the decoder's KV cache on a GPU (the CPU backend has no BF16
     * set_rows and skips those) */
    static const tg_type dt[] = {TG_F32, TG_F16, TG_BF16};
    for (size_t t = 0; t < 3; t++)
        for (size_t k = 0; k < sizeof sr / sizeof sr[0]; k++) {
            case_params p = cp_new();
            p.type[0] = dt[t];
            memcpy(p.ne[0], sr[k].a, sizeof sr[k].a);
            memcpy(p.ne[1], sr[k].b, sizeof sr[k].b);
            p.layout[1] = sr[k].lb;
            cases_add(l, TG_OP_SET_ROWS, LIM_ELEM, build_set_rows, &p, "set_rows dst=%s %s src=%s",
                      tg_type_name(dt[t]), cp_shape(&p, 0, s0, sizeof s0),
                      cp_shape(&p, 1, s1, sizeof s1));
        }
}

typedef struct castc {
    tg_type from, to;
    int64_t ne[4];
    layout l;
    float lo, hi;
} castc;

static void add_copies(case_list *l) {
    static const castc cs[] = {
        {TG_F32, TG_F16, {7, 3, 2, 1}, L_CONT, -100, 100},
        {TG_F32, TG_F16, {1280, 3, 1, 1}, L_CONT, -60000, 60000},
        {TG_F32, TG_F16, {65, 7, 1, 1}, L_CONT, -1e-4f, 1e-4f}, /* f16 subnormals */
        {TG_F32, TG_F16, {16, 5, 4, 3}, L_PERM, -100, 100},
        {TG_F32, TG_BF16, {7, 3, 2, 1}, L_CONT, -100, 100},
        {TG_F32, TG_BF16, {1280, 3, 1, 1}, L_CONT, -1e6f, 1e6f},
        {TG_F32, TG_BF16, {33, 5, 2, 1}, L_T01, -1, 1},
        {TG_F16, TG_F32, {7, 3, 2, 1}, L_CONT, -100, 100},
        {TG_F16, TG_F32, {65, 7, 3, 1}, L_ROWPAD, -100, 100},
        {TG_BF16, TG_F32, {7, 3, 2, 1}, L_CONT, -100, 100},
        {TG_BF16, TG_F32, {33, 5, 2, 1}, L_T01, -100, 100},
        {TG_F16, TG_BF16, {33, 5, 2, 1}, L_CONT, -100, 100},
        {TG_BF16, TG_F16, {33, 5, 2, 1}, L_CONT, -100, 100},
        {TG_F32, TG_I32, {33, 5, 2, 1}, L_CONT, -1000, 1000},
        {TG_I32, TG_F32, {33, 5, 2, 1}, L_CONT, -100000, 100000},
        {TG_I32, TG_I32, {33, 5, 2, 1}, L_T01, -1000, 1000},
        {TG_F32, TG_F32, {65, 7, 3, 1}, L_ROWPAD, -1, 1},
        {TG_F32, TG_F32, {16, 5, 4, 3}, L_PERM, -1, 1},
        {TG_F32, TG_F32, {127, 9, 2, 1}, L_T01, -1, 1},
        {TG_F16, TG_F16, {33, 5, 2, 1}, L_T12, -1, 1},
        {TG_BF16, TG_BF16, {33, 5, 2, 1}, L_T01, -1, 1},
        /* heads split or merged (dims 1 and 2 swapped, rows intact): the
         * CUDA backend copies row by row (copy.cu: cpy_rows4) */
        {TG_F32, TG_F32, {160, 37, 8, 2}, L_T12, -1, 1},
        {TG_I32, TG_I32, {64, 9, 3, 2}, L_T12, -1000, 1000},
    };
    char s0[96], s1[96];
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        case_params p = cp_new();
        p.type[0] = cs[k].from;
        p.type[1] = cs[k].to;
        memcpy(p.ne[0], cs[k].ne, sizeof cs[k].ne);
        p.layout[0] = cs[k].l;
        p.f[0] = cs[k].lo;
        p.f[1] = cs[k].hi;
        p.i[0] = cs[k].from == cs[k].to; /* same type: through tg_cont */
        cases_add(l, TG_OP_CPY, LIM_ELEM, build_cast, &p, "%s %s -> %s %s in [%g,%g]",
                  p.i[0] ? "cont" : "cast", tg_type_name(cs[k].from), tg_type_name(cs[k].to),
                  cp_shape(&p, 0, s0, sizeof s0), (double)cs[k].lo, (double)cs[k].hi);
    }
    static const int rel[][2] = {{7, 2}, {33, 2}, {50, 3}};
    for (size_t k = 0; k < 3; k++) {
        case_params p = cp_new();
        p.i[0] = rel[k][0];
        p.i[1] = rel[k][1];
        cases_add(l, TG_OP_CPY, LIM_ELEM, build_cont_rel_shift, &p, "cont rel_shift T=%d H=%d",
                  rel[k][0], rel[k][1]);
    }

    typedef struct cpc {
        int mode, row;
        int64_t a[4];
        layout la;
        tg_type dt;
        int64_t d[4];
    } cpc;
    static const cpc cp[] = {
        {0, 8, {64, 7, 2, 1}, L_CONT, TG_F16, {64, 40, 2, 1}},   /* K/V rows into the cache */
        {0, 8, {64, 7, 2, 1}, L_CONT, TG_F32, {64, 40, 2, 1}},
        {0, 3, {33, 1, 3, 1}, L_CONT, TG_BF16, {33, 5, 3, 1}},
        {0, 2, {16, 5, 3, 1}, L_T01, TG_F32, {16, 9, 3, 1}},
        {1, 0, {5, 7, 1, 1}, L_CONT, TG_F32, {7, 5, 1, 1}},      /* into a transposed view */
        {1, 0, {33, 65, 1, 1}, L_ROWPAD, TG_F16, {65, 33, 1, 1}},
        {2, 0, {12, 1, 1, 1}, L_CONT, TG_F32, {4, 3, 1, 1}},     /* other shape, same count */
        {2, 0, {7, 6, 1, 1}, L_T01, TG_F16, {3, 14, 1, 1}},
        /* both contiguous, long rows (a beam search's cache rows, flattened),
         * above the CPU's serial limit of 16384 elements: one flat run a
         * thread */
        {2, 0, {4608, 8, 1, 1}, L_CONT, TG_BF16, {144, 32, 8, 1}},
        {2, 0, {30000, 1, 1, 1}, L_CONT, TG_F32, {100, 30, 10, 1}},
    };
    for (size_t k = 0; k < sizeof cp / sizeof cp[0]; k++) {
        case_params p = cp_new();
        p.i[0] = cp[k].mode;
        p.i[1] = cp[k].row;
        memcpy(p.ne[0], cp[k].a, sizeof cp[k].a);
        memcpy(p.ne[1], cp[k].d, sizeof cp[k].d);
        p.layout[0] = cp[k].la;
        p.type[1] = cp[k].dt;
        static const char *modes[] = {"rows of", "transposed", "reshaped"};
        cases_add(l, TG_OP_CPY, LIM_ELEM, build_cpy, &p, "cpy f32 %s into %s %s %s (row %d)",
                  cp_shape(&p, 0, s0, sizeof s0), modes[cp[k].mode], tg_type_name(cp[k].dt),
                  cp_shape(&p, 1, s1, sizeof s1), cp[k].row);
    }
}

static void add_concat_pad(case_list *l) {
    static const two cc[] = {
        {{7, 3, 2, 1}, L_CONT, {5, 3, 2, 1}, L_CONT, 0},
        {{7, 3, 2, 1}, L_CONT, {7, 1, 2, 1}, L_CONT, 1},
        {{4, 3, 2, 2}, L_CONT, {4, 3, 5, 2}, L_CONT, 2},
        {{3, 2, 2, 1}, L_CONT, {3, 2, 2, 3}, L_CONT, 3},
        {{33, 7, 1, 1}, L_T01, {33, 4, 1, 1}, L_ROWPAD, 1},
        {{1280, 7, 1, 1}, L_CONT, {1280, 1, 1, 1}, L_CONT, 1},
        {{1, 1, 1, 1}, L_CONT, {1, 1, 1, 1}, L_CONT, 0},
    };
    static const tg_type tt[] = {TG_F32, TG_I32};
    char s0[96], s1[96];
    for (size_t t = 0; t < 2; t++)
        for (size_t k = 0; k < sizeof cc / sizeof cc[0]; k++) {
            case_params p = cp_new();
            p.type[0] = tt[t];
            memcpy(p.ne[0], cc[k].a, sizeof cc[k].a);
            memcpy(p.ne[1], cc[k].b, sizeof cc[k].b);
            p.layout[0] = cc[k].la;
            p.layout[1] = cc[k].lb;
            p.i[0] = cc[k].k;
            cases_add(l, TG_OP_CONCAT, LIM_ELEM, build_concat, &p, "concat %s a=%s b=%s dim %d",
                      tg_type_name(tt[t]), cp_shape(&p, 0, s0, sizeof s0),
                      cp_shape(&p, 1, s1, sizeof s1), cc[k].k);
        }

    typedef struct padc {
        int64_t ne[4];
        layout l;
        int lohi[8];
    } padc;
    static const padc pc[] = {
        {{7, 3, 2, 1}, L_CONT, {1, 0, 0, 0, 2, 1, 0, 0}},
        {{7, 3, 2, 1}, L_CONT, {0, 2, 1, 0, 0, 0, 1, 1}},
        {{1, 1, 1, 1}, L_CONT, {3, 3, 0, 0, 0, 2, 0, 0}},
        {{64, 33, 1, 1}, L_CONT, {0, 4, 0, 0, 0, 4, 0, 0}},  /* conv module: T padded by 4 */
        {{33, 7, 1, 1}, L_T01, {1, 1, 0, 0, 1, 1, 0, 0}},
        {{5, 4, 3, 2}, L_ROWPAD, {0, 0, 0, 1, 0, 0, 0, 1}},
        {{9, 5, 1, 1}, L_CONT, {0, 0, 0, 0, 0, 0, 0, 0}},
    };
    for (size_t k = 0; k < sizeof pc / sizeof pc[0]; k++) {
        case_params p = cp_new();
        memcpy(p.ne[0], pc[k].ne, sizeof pc[k].ne);
        p.layout[0] = pc[k].l;
        memcpy(p.i, pc[k].lohi, sizeof pc[k].lohi);
        const int *q = pc[k].lohi;
        cases_add(l, TG_OP_PAD, LIM_ELEM, build_pad, &p, "pad %s lo=[%d,%d,%d,%d] hi=[%d,%d,%d,%d]",
                  cp_shape(&p, 0, s0, sizeof s0), q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]);
    }
}

void cases_data(case_list *l) {
    add_get_set_rows(l);
    add_copies(l);
    add_concat_pad(l);
}
