/*
 * cases_norm_reduce.c: conformance cases for layer_norm, sum_rows, mean and
 * argmax: the ops that reduce along dim 0.
 *
 * layer_norm inputs have a non-zero mean (2..4, and cases at 30 and 100), so
 * an implementation that computes the variance as E[x^2] - E[x]^2 in f32 loses
 * digits and fails (at mean 100 that error alone is an NMSE near 1e-6); it runs with and without weight and bias, over rows of 1
 * (variance 0), odd lengths and the encoder's 1280. argmax gets inputs with
 * many ties (few integer levels) to check "first of ties", and is exact.
 * Limits: LIM_ELEM for the norm and the sums, exact for argmax.
 */
#include <stdio.h>

#include "ops_test.h"

/* i[0]: 0 no affine, 1 weight only, 2 weight and bias; f[0]: eps; f[1]: mean. */
tg_tensor *build_layer_norm(case_env *e, const case_params *p) {
    int64_t wne[4] = {p->ne[0][0], 1, 1, 1};
    double m = p->f[1];
    tg_tensor *a = env_input(e, TG_F32, p->ne[0], (layout)p->layout[0], fill_u(m - 1, m + 1));
    tg_tensor *w = p->i[0] >= 1 ? env_input(e, TG_F32, wne, L_CONT, fill_u(0.5, 1.5)) : NULL;
    tg_tensor *b = p->i[0] >= 2 ? env_input(e, TG_F32, wne, L_CONT, fill_u(-1, 1)) : NULL;
    tg_tensor *out = tg_layer_norm(env_ctx(e), a, w, b, p->f[0]);
    env_expect_f32(e, out, 0, p->f[0]);
    return out;
}

/* i[0]: the op; i[1]: 1 = integer levels in [f[0], f[1]] (ties), 2 = uniform
 * with -INFINITY at a quarter of the places (suppressed logits), else uniform. */
static tg_tensor *build_reduce(case_env *e, const case_params *p) {
    fill_spec f = p->i[1] == 1   ? (fill_spec){FILL_LEVELS, p->f[0], p->f[1]}
                  : p->i[1] == 2 ? (fill_spec){FILL_MASK_NOFULL, p->f[0], p->f[1]}
                                 : fill_u(p->f[0], p->f[1]);
    tg_tensor *a = env_input(e, TG_F32, p->ne[0], (layout)p->layout[0], f);
    switch ((tg_op)p->i[0]) {
    case TG_OP_ARGMAX: return tg_argmax(env_ctx(e), a);
    case TG_OP_SUM_ROWS: return tg_sum_rows(env_ctx(e), a);
    default: return tg_mean(env_ctx(e), a);
    }
}

typedef struct ln {
    int64_t ne[4];
    layout l;
    int affine;
    float mean;
} ln;

typedef struct red {
    int64_t ne[4];
    layout l;
    int levels;
    float lo, hi;
} red;

void cases_norm_reduce(case_list *l) {
    static const ln lns[] = {
        {{1, 3, 1, 1}, L_CONT, 2, 3},    {{7, 5, 1, 1}, L_CONT, 2, 3},
        {{33, 5, 2, 1}, L_CONT, 1, 3},   {{33, 4, 1, 1}, L_CONT, 0, 3},
        {{1280, 7, 1, 1}, L_CONT, 2, 3}, {{1280, 3, 1, 1}, L_CONT, 0, 3},
        {{65, 4, 3, 1}, L_ROWPAD, 2, 3}, {{33, 7, 1, 1}, L_T01, 2, 3},
        {{257, 5, 1, 1}, L_CONT, 2, 30},
        {{1280, 3, 1, 1}, L_CONT, 2, 100},  /* E[x^2]-E[x]^2 in f32 fails here */
    };
    static const char *aff[] = {"no affine", "weight", "weight+bias"};
    char s0[96];
    for (size_t k = 0; k < sizeof lns / sizeof lns[0]; k++) {
        case_params p = cp_new();
        memcpy(p.ne[0], lns[k].ne, sizeof lns[k].ne);
        p.layout[0] = lns[k].l;
        p.i[0] = lns[k].affine;
        p.f[0] = 1e-5f;
        p.f[1] = lns[k].mean;
        cases_add(l, TG_OP_LAYER_NORM, LIM_ELEM, build_layer_norm, &p,
                  "layer_norm %s %s mean~%g", cp_shape(&p, 0, s0, sizeof s0), aff[lns[k].affine],
                  (double)lns[k].mean);
    }

    static const red sums[] = {
        {{1, 1, 1, 1}, L_CONT, 0, -0.5f, 1.5f},   {{7, 3, 1, 1}, L_CONT, 0, -0.5f, 1.5f},
        {{33, 5, 2, 2}, L_CONT, 0, -0.5f, 1.5f},  {{1280, 7, 1, 1}, L_CONT, 0, -0.5f, 1.5f},
        {{65, 7, 3, 1}, L_ROWPAD, 0, -0.5f, 1.5f}, {{33, 8, 1, 1}, L_T01, 0, -0.5f, 1.5f},
        {{16384, 3, 1, 1}, L_CONT, 0, -0.5f, 1.5f}, /* the decoder's logit sums */
    };
    static const tg_op sops[] = {TG_OP_SUM_ROWS, TG_OP_MEAN};
    for (size_t o = 0; o < 2; o++)
        for (size_t k = 0; k < sizeof sums / sizeof sums[0]; k++) {
            case_params p = cp_new();
            memcpy(p.ne[0], sums[k].ne, sizeof sums[k].ne);
            p.layout[0] = sums[k].l;
            p.i[0] = sops[o];
            p.f[0] = sums[k].lo;
            p.f[1] = sums[k].hi;
            cases_add(l, sops[o], LIM_ELEM, build_reduce, &p, "%s %s", tg_op_name(sops[o]),
                      cp_shape(&p, 0, s0, sizeof s0));
        }

    static const red args[] = {
        {{1, 1, 1, 1}, L_CONT, 0, -1, 1},        {{7, 3, 1, 1}, L_CONT, 0, -1, 1},
        {{33, 5, 2, 2}, L_CONT, 1, 0, 4},        {{16384, 3, 1, 1}, L_CONT, 0, -10, 10},
        {{5000, 2, 1, 1}, L_CONT, 1, -100, 100}, {{65, 7, 3, 1}, L_ROWPAD, 1, 0, 3},
        {{7, 33, 1, 1}, L_T01, 1, 0, 2},
        {{1000, 4, 1, 1}, L_CONT, 2, -5, 5},
        {{16384, 2, 1, 1}, L_CONT, 1, 0, 4},     /* ties over a vocabulary's row */
    };
    for (size_t k = 0; k < sizeof args / sizeof args[0]; k++) {
        case_params p = cp_new();
        memcpy(p.ne[0], args[k].ne, sizeof args[k].ne);
        p.layout[0] = args[k].l;
        p.i[0] = TG_OP_ARGMAX;
        p.i[1] = args[k].levels;
        p.f[0] = args[k].lo;
        p.f[1] = args[k].hi;
        cases_add(l, TG_OP_ARGMAX, LIM_EXACT, build_reduce, &p, "argmax %s%s",
                  cp_shape(&p, 0, s0, sizeof s0),
                  args[k].levels == 1 ? " with ties" : args[k].levels == 2 ? " with -inf" : "");
    }
}
