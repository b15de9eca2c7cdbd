/*
 * cases_matmul.c: conformance cases for mul_mat (F32, F16 and BF16 weights
 * times F32 activations).
 *
 * From 1x1 up to the encoder's projections in a reduced form that runs in a
 * second on two cores: the [1280 x 5120] feed-forward weights against 438
 * frames become K = 1280 with 128 outputs and K = 5120 with 32 outputs, so the
 * long dot products (and the blocking of K) are exercised at full length while
 * N stays small. Odd K (7, 33, 65, 127) leaves vector tails; the batch dims
 * broadcast the weights (B2 = 2*A2, B3 = 2*A3); weights with padded rows and
 * activations with dims 1 and 2 swapped test the strided paths; M = 1 is the
 * decoder's matrix-vector case. Limits: LIM_MATMUL at default precision (the
 * backend may round activations to bf16), LIM_MATMUL_F32 when TG_PREC_F32 is
 * requested.
 */
#include <stdio.h>

#include "op_params.h"
#include "ops_test.h"

/* type[0]: weight type; ne[0] weights (layout[0]); ne[1] activations
 * (layout[1]); i[0] = 1: TG_PREC_F32. */
tg_tensor *build_mul_mat(case_env *e, const case_params *p) {
    tg_tensor *a = env_input(e, p->type[0], p->ne[0], (layout)p->layout[0], fill_u(-1, 1));
    tg_tensor *b = env_input(e, TG_F32, p->ne[1], (layout)p->layout[1], fill_u(-1, 1));
    tg_tensor *out = tg_mul_mat(env_ctx(e), a, b);
    if (out && p->i[0]) {
        tg_set_prec(out, TG_PREC_F32);
        int32_t want = TG_PREC_F32;
        env_expect_i32(e, out, TG_P_PREC, &want, 1);
    }
    return out;
}

typedef struct mm {
    int64_t a[4];
    layout la;
    int64_t b[4];
    layout lb;
    int prec;
} mm;

void cases_matmul(case_list *l) {
    static const mm cs[] = {
        {{1, 1, 1, 1}, L_CONT, {1, 1, 1, 1}, L_CONT, 0},
        {{7, 3, 1, 1}, L_CONT, {7, 5, 1, 1}, L_CONT, 0},
        {{33, 65, 1, 1}, L_CONT, {33, 7, 1, 1}, L_CONT, 0},
        {{65, 33, 2, 1}, L_CONT, {65, 7, 4, 2}, L_CONT, 0},      /* a broadcasts in 2 and 3 */
        /* a per dim-2 entry, shared over a longer dim 3 (the rel-pos term;
         * the GPU batches over dim 3): contiguous, then a's heads permuted */
        {{32, 12, 3, 1}, L_CONT, {32, 7, 3, 5}, L_CONT, 0},
        {{48, 20, 3, 1}, L_T12, {48, 11, 3, 4}, L_CONT, 0},
        {{32, 12, 3, 1}, L_CONT, {32, 7, 3, 5}, L_CONT, 1},
        {{127, 17, 1, 1}, L_CONT, {127, 127, 1, 1}, L_CONT, 0},
        {{256, 64, 1, 1}, L_ROWPAD, {256, 33, 2, 1}, L_T12, 0},  /* strided a, permuted b */
        {{64, 16, 3, 1}, L_CONT, {64, 9, 3, 1}, L_ROWPAD, 0},
        {{48, 20, 3, 1}, L_T12, {48, 11, 3, 1}, L_CONT, 0},     /* permuted a */
        {{1024, 100, 1, 1}, L_CONT, {1024, 1, 1, 1}, L_CONT, 0}, /* decoder matvec */
        {{256, 4097, 1, 1}, L_CONT, {256, 2, 1, 1}, L_CONT, 0},  /* vocab-like N, odd */
        {{64, 1280, 1, 1}, L_CONT, {64, 33, 1, 1}, L_CONT, 0},
        {{1280, 128, 1, 1}, L_CONT, {1280, 438, 1, 1}, L_CONT, 0}, /* encoder, reduced N */
        {{5120, 32, 1, 1}, L_CONT, {5120, 438, 1, 1}, L_CONT, 0},
        {{65, 33, 1, 1}, L_CONT, {65, 7, 1, 1}, L_CONT, 1},
        {{1280, 32, 1, 1}, L_CONT, {1280, 65, 1, 1}, L_CONT, 1},
        {{33, 9, 2, 1}, L_CONT, {33, 5, 2, 1}, L_T12, 1},
        /* Few columns against BF16 weights: the GPU's matvec.cu (one or
         * two columns, K a multiple of 8): columns from batch dims, fc2's
         * K, one past the most it takes, padded weight rows it cannot load
         * as 16 bytes (cuBLASLt then), F32 precision, and two columns whose
         * dim 1 (extent 1) has a stride unlike theirs */
        {{1024, 64, 1, 1}, L_CONT, {1024, 1, 2, 1}, L_CONT, 0},
        {{4096, 40, 1, 1}, L_CONT, {4096, 1, 1, 1}, L_CONT, 0},
        {{512, 24, 1, 1}, L_CONT, {512, 3, 1, 1}, L_CONT, 0},
        {{256, 72, 1, 1}, L_ROWPAD, {256, 2, 1, 1}, L_CONT, 0},
        {{1024, 50, 1, 1}, L_CONT, {1024, 2, 1, 1}, L_CONT, 1},
        {{512, 20, 1, 1}, L_CONT, {512, 1, 2, 1}, L_T12, 0},
        /* 3 to 16 columns against BF16 weights: the GPU's mul_mat_vec_mma
         * (K a multiple of 32; 16 weight rows a block, K split over 4-16
         * warps): a decoder step at batch 8, fc2's K (two rounds of loads a
         * warp), 16 columns with K = 96 (a warp with no steps) and rows not
         * a multiple of 16, columns from batch dims, the same at F32
         * precision (cuBLASLt), K not a multiple of 32 (cuBLASLt) */
        {{1024, 40, 1, 1}, L_CONT, {1024, 8, 1, 1}, L_CONT, 0},
        {{4096, 24, 1, 1}, L_CONT, {4096, 5, 1, 1}, L_CONT, 0},
        {{96, 33, 1, 1}, L_CONT, {96, 16, 1, 1}, L_CONT, 0},
        {{512, 20, 1, 1}, L_CONT, {512, 3, 2, 1}, L_CONT, 0},
        {{1024, 40, 1, 1}, L_CONT, {1024, 8, 1, 1}, L_CONT, 1},
        {{1000, 24, 1, 1}, L_CONT, {1000, 8, 1, 1}, L_CONT, 0},
    };
    static const tg_type tt[] = {TG_F32, TG_F16, TG_BF16};
    char s0[96], s1[96];
    for (size_t t = 0; t < 3; t++)
        for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
            case_params p = cp_new();
            p.type[0] = tt[t];
            memcpy(p.ne[0], cs[k].a, sizeof cs[k].a);
            memcpy(p.ne[1], cs[k].b, sizeof cs[k].b);
            p.layout[0] = cs[k].la;
            p.layout[1] = cs[k].lb;
            p.i[0] = cs[k].prec;
            cases_add(l, TG_OP_MUL_MAT, cs[k].prec ? LIM_MATMUL_F32 : LIM_MATMUL, build_mul_mat, &p,
                      "mul_mat %s a=%s x f32 b=%s%s", tg_type_name(tt[t]),
                      cp_shape(&p, 0, s0, sizeof s0), cp_shape(&p, 1, s1, sizeof s1),
                      cs[k].prec ? " prec=f32" : "");
        }
}
