/*
 * cases_attention.c: conformance cases for soft_max and attention.
 *
 * Scores are kept out of saturation (inputs in [-3, 3], q and k in [-1, 1]
 * with scale 1/sqrt(D)), so the outputs depend on every input. Masks carry
 * -INFINITY at about a quarter of the places and whole rows of -INFINITY
 * (tg.h: such a row gives zeros), and broadcast over heads, batch or both.
 * Attention runs at the head dims the models use (64 and 128 in the decoder,
 * 160 in the encoder) and at 16 and 256, with F32 and F16 keys and values
 * (the KV cache), q/k/v laid out as the model makes them (heads between
 * features and time: dims 1 and 2 swapped), Tq = 1 for a decoder step, Dv != D,
 * and the relative-position bias given as the rel_shift view (spec 2.4).
 * Limits: LIM_ELEM for soft_max (one exp per element), LIM_MATMUL for
 * attention at default precision, LIM_MATMUL_F32 when TG_PREC_F32 is asked.
 */
#include <math.h>
#include <stdio.h>

#include "op_params.h"
#include "ops_test.h"

const char *const mask_names[MASK_KINDS] = {"none",     "full",    "shared",
                                           "per-head", "per-seq", "rel_shift"};

static tg_tensor *rel_shift_of(case_env *e, int64_t T, int64_t H, int64_t B) {
    int64_t rne[4] = {2 * T - 1, T, H, B}, ne[4] = {T, T, H, B};
    tg_tensor *raw = env_input(e, TG_F32, rne, L_CONT, fill_u(-1, 1));
    tg_tensor *v = raw ? tg_rel_shift(env_ctx(e), raw) : NULL;
    if (v) {
        size_t nb[4] = {raw->nb[0], raw->nb[1] - raw->nb[0], raw->nb[2], raw->nb[3]};
        env_expect_view(e, "rel_shift", v, ne, nb, (size_t)(T - 1) * raw->nb[0]);
    }
    return v;
}

/* ne[0] a (layout[0]) in [-f[1], f[1]] (3 when 0); i[0]: mask (ne[1]); i[1]:
 * a = rel_shift of T = i[2], H = i[3] instead; f[0]: scale. */
tg_tensor *build_soft_max(case_env *e, const case_params *p) {
    double r = p->f[1] > 0 ? p->f[1] : 3;
    tg_tensor *a = p->i[1] ? rel_shift_of(e, p->i[2], p->i[3], 1)
                           : env_input(e, TG_F32, p->ne[0], (layout)p->layout[0], fill_u(-r, r));
    tg_tensor *mask = p->i[0] ? env_input(e, TG_F32, p->ne[1], L_CONT,
                                          (fill_spec){FILL_MASK, -1, 1})
                              : NULL;
    tg_tensor *out = tg_soft_max(env_ctx(e), a, mask, p->f[0]);
    env_expect_f32(e, out, 0, p->f[0]);
    return out;
}

/* i: D, Dv, Tq, Tk, H, B, mask kind, prec; type[1]: k/v type; layout[0]: q/k/v. */
tg_tensor *build_attention(case_env *e, const case_params *p) {
    int64_t D = p->i[0], Dv = p->i[1], Tq = p->i[2], Tk = p->i[3], H = p->i[4], B = p->i[5];
    layout lay = (layout)p->layout[0];
    int64_t qne[4] = {D, Tq, H, B}, kne[4] = {D, Tk, H, B}, vne[4] = {Dv, Tk, H, B};
    tg_tensor *q = env_input(e, TG_F32, qne, lay, fill_u(-1, 1));
    tg_tensor *k = env_input(e, p->type[1], kne, lay, fill_u(-1, 1));
    tg_tensor *v = env_input(e, p->type[1], vne, lay, fill_u(-1, 1));
    tg_tensor *mask = NULL;
    int64_t mne[4] = {Tk, Tq, 1, 1};
    switch (p->i[6]) {
    case MASK_FULL: mne[2] = H; mne[3] = B; break;
    case MASK_PER_HEAD: mne[2] = H; break;
    case MASK_PER_SEQ: mne[3] = B; break;
    default: break;
    }
    if (p->i[6] == MASK_REL) mask = rel_shift_of(e, Tq, H, B);
    else if (p->i[6] != MASK_NONE) mask = env_input(e, TG_F32, mne, L_CONT, (fill_spec){FILL_MASK, -1, 1});
    float scale = p->f[0] != 0.0f ? p->f[0] : (float)(1.0 / sqrt((double)D));
    tg_tensor *out = tg_attention(env_ctx(e), q, k, v, mask, scale);
    env_expect_f32(e, out, 0, scale);
    if (out && p->i[7]) {
        tg_set_prec(out, TG_PREC_F32);
        int32_t want = TG_PREC_F32;
        env_expect_i32(e, out, TG_P_PREC, &want, 1);
    }
    return out;
}

typedef struct sm {
    int64_t a[4];
    layout la;
    int64_t m[4]; /* mask shape, {0} = none */
    float scale;
    float range;  /* inputs in [-range, range]; 0: 3 */
} sm;

typedef struct at {
    int D, Dv, Tq, Tk, H, B, mask, prec;
    layout l;
    float scale; /* 0: 1/sqrt(D) */
} at;

void cases_attention(case_list *l) {
    static const sm sms[] = {
        {{1, 1, 1, 1}, L_CONT, {0}, 1.0f, 0},
        {{7, 3, 1, 1}, L_CONT, {0}, 0.5f, 0},
        {{33, 5, 2, 1}, L_CONT, {33, 5, 2, 1}, 1.0f, 0},
        {{65, 7, 2, 2}, L_CONT, {65, 7, 1, 1}, 0.125f, 0},
        {{65, 7, 2, 2}, L_CONT, {65, 7, 2, 1}, 1.0f, 0},
        {{65, 7, 2, 2}, L_CONT, {65, 7, 1, 2}, 1.0f, 0},
        {{1000, 4, 1, 1}, L_CONT, {0}, 1.0f, 0},
        {{33, 7, 2, 1}, L_T01, {33, 7, 2, 1}, 1.0f, 0},
        {{17, 9, 3, 1}, L_PERM, {0}, 0.7f, 0},
        {{127, 3, 1, 1}, L_ROWPAD, {127, 3, 1, 1}, 1.0f, 0},
        {{1, 3, 1, 1}, L_CONT, {1, 3, 1, 1}, 1.0f, 0},       /* row 1 fully masked */
        {{438, 5, 2, 1}, L_CONT, {438, 5, 1, 1}, 0.0884f, 0},
        {{65, 6, 1, 1}, L_CONT, {65, 6, 1, 1}, 1.0f, 120.0f}, /* exp overflows without the max */
    };
    char s0[96], s1[96];
    for (size_t k = 0; k < sizeof sms / sizeof sms[0]; k++) {
        case_params p = cp_new();
        memcpy(p.ne[0], sms[k].a, sizeof sms[k].a);
        p.layout[0] = sms[k].la;
        p.i[0] = sms[k].m[0] != 0;
        if (p.i[0]) memcpy(p.ne[1], sms[k].m, sizeof sms[k].m);
        p.f[0] = sms[k].scale;
        p.f[1] = sms[k].range;
        cases_add(l, TG_OP_SOFT_MAX, LIM_ELEM, build_soft_max, &p,
                  "soft_max %s mask=%s scale=%g inputs in +-%g", cp_shape(&p, 0, s0, sizeof s0),
                  p.i[0] ? cp_shape(&p, 1, s1, sizeof s1) : "none", (double)sms[k].scale,
                  sms[k].range > 0 ? (double)sms[k].range : 3.0);
    }
    static const int rel[][2] = {{7, 2}, {33, 2}};
    for (size_t k = 0; k < 2; k++) {
        case_params p = cp_new();
        p.i[0] = 1;
        p.i[1] = 1;
        p.i[2] = rel[k][0];
        p.i[3] = rel[k][1];
        cp_ne(&p, 1, rel[k][0], rel[k][0], 1, 1);
        p.f[0] = 1.0f;
        cases_add(l, TG_OP_SOFT_MAX, LIM_ELEM, build_soft_max, &p,
                  "soft_max rel_shift(BDraw) T=%d H=%d mask=[%d,%d]", rel[k][0], rel[k][1],
                  rel[k][0], rel[k][0]);
    }

    static const at ats[] = {
        {16, 16, 7, 7, 2, 1, MASK_FULL, 0, L_CONT, 0},
        {64, 64, 33, 33, 2, 1, MASK_SHARED, 0, L_T12, 0},
        {64, 32, 5, 9, 2, 1, MASK_NONE, 0, L_CONT, 0},
        {128, 128, 1, 65, 4, 2, MASK_PER_SEQ, 0, L_CONT, 0},   /* decoder step */
        {128, 128, 127, 127, 1, 1, MASK_NONE, 0, L_T12, 0},
        {160, 160, 33, 65, 2, 1, MASK_FULL, 0, L_T12, 0},      /* encoder head dim */
        {256, 256, 7, 33, 2, 2, MASK_PER_HEAD, 0, L_CONT, 0},
        {64, 64, 3, 1, 1, 1, MASK_NONE, 0, L_CONT, 0},         /* a single key */
        {64, 64, 7, 7, 2, 1, MASK_REL, 0, L_CONT, 0},
        {160, 160, 33, 33, 2, 1, MASK_REL, 0, L_T12, 0},
        {64, 64, 33, 33, 2, 1, MASK_FULL, 1, L_CONT, 0},       /* TG_PREC_F32 */
        {160, 160, 9, 17, 1, 2, MASK_PER_SEQ, 1, L_T12, 0},
        {160, 160, 200, 200, 2, 1, MASK_SHARED, 0, L_T12, 0}, /* an encoder chunk */
        {64, 64, 1, 1, 1, 1, MASK_NONE, 0, L_CONT, 0},
        {128, 128, 1, 448, 8, 2, MASK_PER_SEQ, 0, L_CONT, 0}, /* step over a full cache */
        /* More than one block of 64 queries: the CUDA kernel packs K and V
         * first (keys padded to 64, cp.async staging). */
        {160, 160, 130, 70, 2, 2, MASK_PER_HEAD, 0, L_T12, 0},
        {128, 128, 65, 1, 2, 1, MASK_FULL, 0, L_CONT, 0},
        {160, 160, 100, 100, 2, 1, MASK_REL, 0, L_CONT, 0},
        /* head sizes whose 16-wide chunks are odd in number (one ldmatrix
         * of two matrices at the end), packed, with a mask */
        {48, 48, 70, 90, 2, 1, MASK_PER_HEAD, 0, L_T12, 0},
        {80, 80, 65, 65, 1, 2, MASK_FULL, 0, L_CONT, 0},
        /* A negative scale: the mask cannot ride in the products' initial
         * value (it would be divided by the scale and flip sign). */
        {64, 64, 80, 40, 2, 1, MASK_FULL, 0, L_CONT, -0.125f},
        {64, 64, 20, 40, 2, 1, MASK_FULL, 0, L_CONT, -0.125f},
        /* Few queries over many keys: the CUDA kernel splits the keys into
         * chunks of 32 and combines them (attention_split.cu): a partial
         * last chunk, the most queries it takes (8), Dv != D with strided
         * heads, exactly two chunks at D = 256 with a negative scale, and
         * F32 precision over a step's cache. */
        {128, 128, 1, 438, 8, 3, MASK_PER_SEQ, 0, L_CONT, 0},
        {64, 96, 8, 100, 2, 2, MASK_FULL, 0, L_T12, 0},
        {256, 256, 2, 64, 1, 1, MASK_NONE, 0, L_CONT, -0.125f},
        {128, 128, 1, 266, 8, 2, MASK_SHARED, 1, L_CONT, 0},
        {160, 160, 5, 333, 2, 1, MASK_PER_HEAD, 0, L_T12, 0},
        /* One query per head at D = 128 or 256 (attn_decode for F32 and
         * BF16 rows): few keys, a single key, fully masked rows, strided
         * heads, many keys at F32 precision */
        {256, 256, 1, 77, 2, 3, MASK_FULL, 0, L_T12, 0},
        {128, 128, 1, 5, 3, 2, MASK_FULL, 0, L_CONT, 0},
        {128, 128, 1, 1, 2, 1, MASK_NONE, 0, L_CONT, 0},
        {128, 128, 1, 1000, 2, 1, MASK_PER_HEAD, 1, L_CONT, 0},
        {128, 128, 1, 138, 8, 5, MASK_FULL, 0, L_T12, -0.2f},
        /* more chunks than the combine keeps weights for (512) */
        {128, 128, 1, 20000, 2, 1, MASK_PER_SEQ, 0, L_CONT, 0},
        /* Many (head, row) pairs: attn_decode sizes its chunks to fill the
         * GPU, so on a 132-SM H200 320 and 280 pairs get one chunk a row
         * (the block writes the output, no combine) and 192 get two. */
        {128, 128, 1, 438, 8, 40, MASK_PER_SEQ, 0, L_CONT, 0},
        {256, 256, 1, 77, 4, 70, MASK_FULL, 0, L_T12, 0},
        {128, 128, 1, 140, 8, 24, MASK_FULL, 0, L_T12, 0},
    };
    /* BF16 keys and values: the decoder's caches on a GPU (the CPU backend
     * takes F32 and F16 only and skips them) */
    static const tg_type kv[] = {TG_F32, TG_F16, TG_BF16};
    for (size_t t = 0; t < 3; t++)
        for (size_t k = 0; k < sizeof ats / sizeof ats[0]; k++) {
            case_params p = cp_new();
            const at *a = &ats[k];
            int v[8] = {a->D, a->Dv, a->Tq, a->Tk, a->H, a->B, a->mask, a->prec};
            memcpy(p.i, v, sizeof v);
            p.type[1] = kv[t];
            p.layout[0] = a->l;
            p.f[0] = a->scale;
            cases_add(l, TG_OP_ATTENTION, a->prec ? LIM_MATMUL_F32 : LIM_MATMUL, build_attention, &p,
                      "attention k/v %s D=%d Dv=%d Tq=%d Tk=%d H=%d B=%d mask=%s%s%s%s",
                      tg_type_name(kv[t]), a->D, a->Dv, a->Tq, a->Tk, a->H, a->B,
                      mask_names[a->mask], layout_name(a->l), a->prec ? " prec=f32" : "",
                      a->scale < 0 ? " scale<0" : "");
        }
}
