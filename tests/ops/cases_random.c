/*
 * cases_random.c: conformance cases of random shapes, layouts and types.
 *
 * The fixed cases pick sizes by hand; a kernel's blocking (panels of a GEMM,
 * key tiles of attention, vector widths, the split of rows among threads) has
 * boundaries nobody thinks of, so these cases draw sizes from wide ranges
 * instead, for the ops whose kernels block: mul_mat, attention, soft_max,
 * layer_norm, the convolutions, the broadcasting binary ops and get_rows.
 * They come from the suite's seed, so a run is reproducible and a failure
 * names its case number; --random N sets how many (54 by default, a few
 * seconds). Sizes are capped so the float64 reference stays cheap.
 * Not here: new semantics; every builder and limit is the fixed cases' own.
 */
#include <stdio.h>

#include "ops_test.h"

static int64_t between(rng *r, int64_t lo, int64_t hi) { return lo + rng_int(r, hi - lo + 1); }

static const tg_type wtypes[3] = {TG_F32, TG_F16, TG_BF16};

static void rand_binary(case_list *l, rng *r, int k) {
    static const tg_op ops[4] = {TG_OP_ADD, TG_OP_SUB, TG_OP_MUL, TG_OP_DIV};
    case_params p = cp_new();
    tg_op op = ops[rng_int(r, 4)];
    p.i[0] = op;
    for (int d = 0; d < 4; d++) {
        int64_t o = d < 3 ? between(r, 1, 24) : between(r, 1, 3);
        p.ne[0][d] = rng_int(r, 4) ? o : 1;
        p.ne[1][d] = rng_int(r, 4) ? o : 1;
    }
    p.layout[0] = (int)rng_int(r, L_COUNT);
    p.layout[1] = (int)rng_int(r, L_COUNT);
    char s0[96], s1[96];
    cases_add(l, op, LIM_ELEM, build_binary, &p, "random #%d %s a=%s b=%s", k, tg_op_name(op),
              cp_shape(&p, 0, s0, sizeof s0), cp_shape(&p, 1, s1, sizeof s1));
}

static void rand_mul_mat(case_list *l, rng *r, int k) {
    static const layout lays[3] = {L_CONT, L_ROWPAD, L_T12};
    case_params p = cp_new();
    int64_t K = between(r, 1, 600), N = between(r, 1, 300), M = between(r, 1, 200);
    int64_t A2 = between(r, 1, 2), B2 = A2 * between(r, 1, 2), B3 = between(r, 1, 2);
    while (K * N * M * B2 * B3 > 3000000) {
        if (N > M) N = (N + 1) / 2;
        else M = (M + 1) / 2;
    }
    cp_ne(&p, 0, K, N, A2, 1);
    cp_ne(&p, 1, K, M, B2, B3);
    p.type[0] = wtypes[rng_int(r, 3)];
    p.layout[0] = lays[rng_int(r, 3)];
    p.layout[1] = lays[rng_int(r, 3)];
    p.i[0] = rng_int(r, 4) == 0;
    char s0[96], s1[96];
    cases_add(l, TG_OP_MUL_MAT, p.i[0] ? LIM_MATMUL_F32 : LIM_MATMUL, build_mul_mat, &p,
              "random #%d mul_mat %s a=%s x f32 b=%s%s", k, tg_type_name(p.type[0]),
              cp_shape(&p, 0, s0, sizeof s0), cp_shape(&p, 1, s1, sizeof s1),
              p.i[0] ? " prec=f32" : "");
}

static void rand_attention(case_list *l, rng *r, int k) {
    case_params p = cp_new();
    int64_t D = 16 * between(r, 1, 16);
    int64_t Dv = rng_int(r, 4) ? D : 32 * between(r, 1, 8);
    int64_t Tq = between(r, 1, 80), Tk = between(r, 1, 160), H = between(r, 1, 4), B = between(r, 1, 2);
    while (D * Tq * Tk * H * B > 4000000) {
        if (Tk > Tq) Tk = (Tk + 1) / 2;
        else Tq = (Tq + 1) / 2;
    }
    int mask = (int)rng_int(r, MASK_REL); /* none .. per-seq */
    int v[8] = {(int)D, (int)Dv, (int)Tq, (int)Tk, (int)H, (int)B, mask, rng_int(r, 4) == 0};
    memcpy(p.i, v, sizeof v);
    p.type[1] = rng_int(r, 2) ? TG_F16 : TG_F32;
    p.layout[0] = rng_int(r, 2) ? L_T12 : L_CONT;
    cases_add(l, TG_OP_ATTENTION, p.i[7] ? LIM_MATMUL_F32 : LIM_MATMUL, build_attention, &p,
              "random #%d attention k/v %s D=%d Dv=%d Tq=%d Tk=%d H=%d B=%d mask=%s%s%s", k,
              tg_type_name(p.type[1]), v[0], v[1], v[2], v[3], v[4], v[5], mask_names[mask],
              layout_name((layout)p.layout[0]), p.i[7] ? " prec=f32" : "");
}

static void rand_soft_max(case_list *l, rng *r, int k) {
    static const layout lays[4] = {L_CONT, L_ROWPAD, L_T01, L_PERM};
    case_params p = cp_new();
    cp_ne(&p, 0, between(r, 1, 700), between(r, 1, 8), between(r, 1, 3), between(r, 1, 2));
    p.layout[0] = lays[rng_int(r, 4)];
    p.i[0] = rng_int(r, 3) != 0;
    if (p.i[0])
        cp_ne(&p, 1, p.ne[0][0], p.ne[0][1], rng_int(r, 2) ? p.ne[0][2] : 1,
              rng_int(r, 2) ? p.ne[0][3] : 1);
    p.f[0] = (float)rng_uniform(r, 0.05, 1.0);
    char s0[96], s1[96];
    cases_add(l, TG_OP_SOFT_MAX, LIM_ELEM, build_soft_max, &p, "random #%d soft_max %s mask=%s scale=%g",
              k, cp_shape(&p, 0, s0, sizeof s0), p.i[0] ? cp_shape(&p, 1, s1, sizeof s1) : "none",
              (double)p.f[0]);
}

static void rand_layer_norm(case_list *l, rng *r, int k) {
    static const layout lays[3] = {L_CONT, L_ROWPAD, L_T01};
    case_params p = cp_new();
    cp_ne(&p, 0, between(r, 1, 2000), between(r, 1, 6), between(r, 1, 2), 1);
    p.layout[0] = lays[rng_int(r, 3)];
    p.i[0] = (int)rng_int(r, 3);
    p.f[0] = 1e-5f;
    p.f[1] = (float)rng_uniform(r, -5, 20);
    char s0[96];
    cases_add(l, TG_OP_LAYER_NORM, LIM_ELEM, build_layer_norm, &p,
              "random #%d layer_norm %s affine=%d mean~%.2f", k, cp_shape(&p, 0, s0, sizeof s0),
              p.i[0], (double)p.f[1]);
}

static void rand_conv(case_list *l, rng *r, int k, tg_op op) {
    case_params p = cp_new();
    char s0[96], s1[96];
    if (op == TG_OP_CONV_1D_DW) {
        int64_t K = 2 * between(r, 0, 4) + 1, C = between(r, 1, 100), T = between(r, 1, 60);
        int s = (int)between(r, 1, 2), pad = (int)between(r, 0, K / 2);
        if (T + 2 * pad < K) T = K;
        cp_ne(&p, 0, K, C, 1, 1);
        cp_ne(&p, 1, C, T, between(r, 1, 2), 1);
        int v[5] = {s, pad, 0, 0, op};
        memcpy(p.i, v, sizeof v);
        p.layout[1] = rng_int(r, 2) ? L_ROWPAD : L_CONT;
        cases_add(l, op, LIM_ELEM, build_conv, &p, "random #%d conv_1d_dw kernel=%s input=%s s=%d p=%d", k,
                  cp_shape(&p, 0, s0, sizeof s0), cp_shape(&p, 1, s1, sizeof s1), s, pad);
        return;
    }
    static const int64_t ks[4] = {1, 2, 3, 5};
    int64_t KW = ks[rng_int(r, 4)], KH = ks[rng_int(r, 4)];
    int64_t W = between(r, 1, 40), H = between(r, 1, 20);
    int s0i = (int)between(r, 1, 2), s1i = (int)between(r, 1, 2);
    int p0 = (int)between(r, 0, KW / 2), p1 = (int)between(r, 0, KH / 2);
    if (W + 2 * p0 < KW) W = KW;
    if (H + 2 * p1 < KH) H = KH;
    bool dw = op == TG_OP_CONV_2D_DW;
    int64_t Cin = between(r, 1, dw ? 8 : 6), Cout = dw ? Cin : between(r, 1, 6);
    cp_ne(&p, 0, KW, KH, dw ? 1 : Cin, Cout);
    cp_ne(&p, 1, W, H, Cin, between(r, 1, 2));
    int v[5] = {s0i, s1i, p0, p1, op};
    memcpy(p.i, v, sizeof v);
    p.layout[1] = rng_int(r, 2) ? L_ROWPAD : L_CONT;
    cases_add(l, op, LIM_ELEM, build_conv, &p, "random #%d %s kernel=%s input=%s s=%d,%d p=%d,%d", k,
              tg_op_name(op), cp_shape(&p, 0, s0, sizeof s0), cp_shape(&p, 1, s1, sizeof s1), s0i,
              s1i, p0, p1);
}

static void rand_get_rows(case_list *l, rng *r, int k) {
    case_params p = cp_new();
    int64_t d2 = between(r, 1, 2), d3 = between(r, 1, 2);
    cp_ne(&p, 0, between(r, 1, 300), between(r, 1, 40), d2, d3);
    cp_ne(&p, 1, between(r, 1, 10), d2, d3, 1);
    p.type[0] = wtypes[rng_int(r, 3)];
    p.layout[0] = rng_int(r, 2) ? L_ROWPAD : L_CONT;
    char s0[96], s1[96];
    cases_add(l, TG_OP_GET_ROWS, LIM_ELEM, build_get_rows, &p, "random #%d get_rows %s table=%s ids=%s", k,
              tg_type_name(p.type[0]), cp_shape(&p, 0, s0, sizeof s0), cp_shape(&p, 1, s1, sizeof s1));
}

void cases_random(case_list *l, int n, uint64_t seed) {
    rng r = {seed ^ 0x5eed0f0b5ull};
    for (int k = 0; k < n; k++) {
        switch (k % 9) {
        case 0: rand_binary(l, &r, k); break;
        case 1: rand_mul_mat(l, &r, k); break;
        case 2: rand_attention(l, &r, k); break;
        case 3: rand_soft_max(l, &r, k); break;
        case 4: rand_layer_norm(l, &r, k); break;
        case 5: rand_conv(l, &r, k, TG_OP_CONV_1D_DW); break;
        case 6: rand_conv(l, &r, k, TG_OP_CONV_2D); break;
        case 7: rand_conv(l, &r, k, TG_OP_CONV_2D_DW); break;
        default: rand_get_rows(l, &r, k); break;
        }
    }
}
