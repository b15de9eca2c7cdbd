/*
 * cases_elementwise.c: conformance cases for add, sub, mul, div, scale, relu,
 * silu, sigmoid, log, sqrt and glu.
 *
 * Shapes go from a single element to encoder rows (1280), with odd sizes so
 * vector loops have tails, broadcasting in every dimension and both ways (a
 * row of a against all of b and the reverse), and inputs that are transposed,
 * permuted or strided views. add also reads the rel_shift view (spec 2.4), as
 * the encoder's relative-position attention does. Limit: LIM_ELEM, since each
 * output is one or two f32 roundings away from the exact value.
 */
#include <math.h>
#include <stdio.h>

#include "ops_test.h"

static tg_tensor *binary(tg_ctx *ctx, tg_op op, tg_tensor *a, tg_tensor *b) {
    switch (op) {
    case TG_OP_ADD: return tg_add(ctx, a, b);
    case TG_OP_SUB: return tg_sub(ctx, a, b);
    case TG_OP_MUL: return tg_mul(ctx, a, b);
    default: return tg_div(ctx, a, b);
    }
}

/* i[0]: the op. Divisors stay away from zero. */
tg_tensor *build_binary(case_env *e, const case_params *p) {
    tg_op op = (tg_op)p->i[0];
    tg_tensor *a = env_input(e, TG_F32, p->ne[0], (layout)p->layout[0], fill_u(-1, 1));
    fill_spec fb = op == TG_OP_DIV ? (fill_spec){FILL_AWAY0, 0.5, 2} : fill_u(-1, 1);
    tg_tensor *b = env_input(e, TG_F32, p->ne[1], (layout)p->layout[1], fb);
    return binary(env_ctx(e), op, a, b);
}

/* spec 2.4: BD = rel_shift(BDraw) with BDraw [2T-1, T, H, 1], plus AC [T, T, H, 1].
 * i[0] = T, i[1] = H. The view's geometry is checked against tg.h's formula. */
static tg_tensor *build_add_rel_shift(case_env *e, const case_params *p) {
    int64_t T = p->i[0], H = p->i[1];
    int64_t rne[4] = {2 * T - 1, T, H, 1}, ne[4] = {T, T, H, 1};
    tg_tensor *raw = env_input(e, TG_F32, rne, L_CONT, fill_u(-1, 1));
    tg_tensor *bd = raw ? tg_rel_shift(env_ctx(e), raw) : NULL;
    if (bd) {
        size_t nb[4] = {raw->nb[0], raw->nb[1] - raw->nb[0], raw->nb[2], raw->nb[3]};
        env_expect_view(e, "rel_shift", bd, ne, nb, (size_t)(T - 1) * raw->nb[0]);
    }
    tg_tensor *ac = env_input(e, TG_F32, ne, L_CONT, fill_u(-1, 1));
    return tg_add(env_ctx(e), ac, bd);
}

/* i[0]: the op; f[0]: scale's factor. */
static tg_tensor *build_unary(case_env *e, const case_params *p) {
    tg_ctx *ctx = env_ctx(e);
    tg_op op = (tg_op)p->i[0];
    /* log and sqrt over their domain, down to small values (the frontend's
     * log reads mel sums from 2^-24 up) */
    fill_spec f = op == TG_OP_LOG || op == TG_OP_SQRT ? fill_u(1e-6, 60) : fill_u(-6, 6);
    tg_tensor *a = env_input(e, TG_F32, p->ne[0], (layout)p->layout[0], f);
    switch ((tg_op)p->i[0]) {
    case TG_OP_SCALE: {
        tg_tensor *out = tg_scale(ctx, a, p->f[0]);
        env_expect_f32(e, out, 0, p->f[0]);
        return out;
    }
    case TG_OP_RELU: return tg_relu(ctx, a);
    case TG_OP_SILU: return tg_silu(ctx, a);
    case TG_OP_SIGMOID: return tg_sigmoid(ctx, a);
    case TG_OP_LOG: return tg_ln(ctx, a);
    case TG_OP_SQRT: return tg_sqrt(ctx, a);
    default: return tg_glu(ctx, a);
    }
}

typedef struct shape2 {
    int64_t a[4];
    layout la;
    int64_t b[4];
    layout lb;
} shape2;

void cases_elementwise(case_list *l) {
    static const shape2 bin[] = {
        {{1, 1, 1, 1}, L_CONT, {1, 1, 1, 1}, L_CONT},
        {{7, 3, 1, 1}, L_CONT, {7, 3, 1, 1}, L_CONT},
        {{33, 5, 3, 2}, L_CONT, {33, 1, 3, 1}, L_CONT},   /* b broadcasts in 1, 3 */
        {{33, 1, 3, 1}, L_CONT, {33, 5, 3, 2}, L_CONT},   /* a broadcasts */
        {{65, 4, 1, 1}, L_CONT, {65, 1, 1, 1}, L_CONT},   /* bias row */
        {{1, 7, 3, 2}, L_CONT, {5, 1, 3, 1}, L_CONT},     /* both ways, dim 0 too */
        {{127, 3, 2, 1}, L_T01, {127, 3, 2, 1}, L_CONT},
        {{64, 16, 2, 1}, L_CONT, {64, 16, 2, 1}, L_PERM},
        {{65, 7, 3, 1}, L_ROWPAD, {65, 1, 3, 1}, L_ROWPAD},
        {{1280, 33, 1, 1}, L_CONT, {1280, 1, 1, 1}, L_CONT},
        {{16, 5, 4, 3}, L_T12, {1, 5, 1, 3}, L_CONT},
        /* the encoder's broadcasts (the GPU's row kernel): a time mask,
         * a conv bias per channel, a key mask per batch row, a scalar row */
        {{64, 9, 5, 3}, L_CONT, {1, 9, 1, 3}, L_CONT},
        {{64, 9, 5, 3}, L_CONT, {1, 1, 5, 1}, L_CONT},
        {{40, 40, 2, 3}, L_CONT, {40, 1, 1, 3}, L_CONT},
        {{1, 6, 2, 1}, L_CONT, {37, 6, 2, 1}, L_ROWPAD},
        /* rows shorter than a warp, a multiple of 4 (the subsampling's
         * third conv, 16 wide: ew_bias_mask_c4 on the GPU, ew_binary with
         * CT_CUDA_BIAS_ADD_C4=0), either operand order, and a scalar */
        {{16, 9, 5, 3}, L_CONT, {1, 1, 5, 1}, L_CONT},
        {{1, 1, 5, 1}, L_CONT, {16, 9, 5, 3}, L_CONT},
        {{8, 7, 3, 2}, L_CONT, {1, 1, 1, 1}, L_CONT},
    };
    static const tg_op bops[] = {TG_OP_ADD, TG_OP_SUB, TG_OP_MUL, TG_OP_DIV};
    char s0[96], s1[96];
    for (size_t o = 0; o < sizeof bops / sizeof bops[0]; o++)
        for (size_t k = 0; k < sizeof bin / sizeof bin[0]; k++) {
            case_params p = cp_new();
            p.i[0] = bops[o];
            memcpy(p.ne[0], bin[k].a, sizeof bin[k].a);
            memcpy(p.ne[1], bin[k].b, sizeof bin[k].b);
            p.layout[0] = bin[k].la;
            p.layout[1] = bin[k].lb;
            cases_add(l, bops[o], LIM_ELEM, build_binary, &p, "%s a=%s b=%s", tg_op_name(bops[o]),
                      cp_shape(&p, 0, s0, sizeof s0), cp_shape(&p, 1, s1, sizeof s1));
        }
    static const int rel[][2] = {{7, 2}, {33, 2}, {1, 1}};
    for (size_t k = 0; k < sizeof rel / sizeof rel[0]; k++) {
        case_params p = cp_new();
        p.i[0] = rel[k][0];
        p.i[1] = rel[k][1];
        cases_add(l, TG_OP_ADD, LIM_ELEM, build_add_rel_shift, &p,
                  "add AC + rel_shift(BDraw) T=%d H=%d", rel[k][0], rel[k][1]);
    }

    typedef struct un {
        int64_t ne[4];
        layout l;
    } un;
    static const un shapes[] = {
        {{1, 1, 1, 1}, L_CONT},   {{7, 3, 1, 1}, L_CONT},     {{127, 5, 2, 1}, L_T01},
        {{1280, 7, 1, 1}, L_CONT}, {{33, 3, 2, 1}, L_ROWPAD}, {{16, 5, 4, 3}, L_PERM},
    };
    static const tg_op uops[] = {TG_OP_RELU, TG_OP_SILU, TG_OP_SIGMOID, TG_OP_SCALE, TG_OP_LOG,
                                 TG_OP_SQRT};
    static const float scales[] = {0.125f, -3.0f, 0.5f, 1.0f, 2.5f, -0.0625f};
    for (size_t o = 0; o < sizeof uops / sizeof uops[0]; o++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            case_params p = cp_new();
            p.i[0] = uops[o];
            p.f[0] = scales[k];
            memcpy(p.ne[0], shapes[k].ne, sizeof shapes[k].ne);
            p.layout[0] = shapes[k].l;
            if (uops[o] == TG_OP_SCALE)
                cases_add(l, uops[o], LIM_ELEM, build_unary, &p, "scale %s s=%g",
                          cp_shape(&p, 0, s0, sizeof s0), (double)scales[k]);
            else
                cases_add(l, uops[o], LIM_ELEM, build_unary, &p, "%s %s", tg_op_name(uops[o]),
                          cp_shape(&p, 0, s0, sizeof s0));
        }

    static const un glus[] = {
        {{2, 1, 1, 1}, L_CONT},   {{14, 3, 1, 1}, L_CONT}, {{66, 5, 2, 1}, L_ROWPAD},
        {{2560, 7, 1, 1}, L_CONT}, {{8, 5, 3, 1}, L_T01},  {{64, 3, 2, 2}, L_PERM},
    };
    for (size_t k = 0; k < sizeof glus / sizeof glus[0]; k++) {
        case_params p = cp_new();
        p.i[0] = TG_OP_GLU;
        memcpy(p.ne[0], glus[k].ne, sizeof glus[k].ne);
        p.layout[0] = glus[k].l;
        cases_add(l, TG_OP_GLU, LIM_ELEM, build_unary, &p, "glu %s", cp_shape(&p, 0, s0, sizeof s0));
    }
}
