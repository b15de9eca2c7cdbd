/*
 * layers.c: the graph building blocks of layers.h.
 *
 * Each is a few op constructors; what they add is one precision rule and
 * one head layout for both model parts. Heads are split to [hd, T, H, B],
 * as a copy (ct_nn_split_heads) or as a strided view of the projection's
 * output (ct_nn_heads_view, for the encoder, whose attention and products
 * read strided operands: the copies were a pass over q, k and v a layer),
 * and merged from tg_attention's [hd, H, T, B] result by a reshape alone
 * (its heads are adjacent).
 *
 * Not here: weights (weights.c), model-specific blocks (encoder.c,
 * decoder.c), running graphs (the scheduler).
 */
#include "layers.h"

tg_tensor *ct_nn_input(const ct_nn *nn, tg_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                       int64_t ne3, const char *name) {
    tg_tensor *t = tg_new_4d(nn->ctx, type, ne0, ne1, ne2, ne3);
    if (t) {
        t->flags |= TG_FLAG_INPUT;
        tg_set_name(t, "%s", name);
    }
    return t;
}

tg_tensor *ct_nn_matmul(const ct_nn *nn, tg_tensor *a, tg_tensor *b) {
    tg_tensor *y = tg_mul_mat(nn->ctx, a, b);
    if (y && nn->f32) tg_set_prec(y, TG_PREC_F32);
    return y;
}

tg_tensor *ct_nn_linear(const ct_nn *nn, tg_tensor *w, tg_tensor *bias, tg_tensor *x) {
    tg_tensor *y = ct_nn_matmul(nn, w, x);
    return bias ? tg_add(nn->ctx, y, bias) : y;
}

tg_tensor *ct_nn_norm(const ct_nn *nn, tg_tensor *x, tg_tensor *w, tg_tensor *bias) {
    return tg_layer_norm(nn->ctx, x, w, bias, 1e-5f);
}

tg_tensor *ct_nn_split_heads(const ct_nn *nn, tg_tensor *x, int hd, int H) {
    if (!x) return NULL;
    /* One position (a decoder step): [hd*H, 1, B] already lies in the order
     * of [hd, 1, H, B], so a reshape does what the copy would (a step had
     * 32 such copies, each a kernel launch). */
    if (x->ne[1] == 1) return tg_reshape_4d(nn->ctx, x, hd, 1, H, x->ne[2]);
    tg_tensor *t = tg_reshape_4d(nn->ctx, x, hd, H, x->ne[1], x->ne[2]);
    return tg_cont(nn->ctx, tg_permute(nn->ctx, t, 0, 2, 1, 3));
}

tg_tensor *ct_nn_heads_view(const ct_nn *nn, tg_tensor *x, int hd, int H) {
    if (!x) return NULL;
    tg_tensor *t = tg_reshape_4d(nn->ctx, x, hd, H, x->ne[1], x->ne[2]);
    return tg_permute(nn->ctx, t, 0, 2, 1, 3);
}

tg_tensor *ct_nn_split_heads_of(const ct_nn *nn, tg_tensor *x, int part, int hd, int H) {
    return ct_nn_split_heads_from(nn, x, part * H, hd, H);
}

/* Heads head0 .. head0 + H - 1 of x [n * hd*H, T, B] as [hd, T, H, B], a
 * strided view (a permuted one for T > 1). */
static tg_tensor *heads_from(const ct_nn *nn, tg_tensor *x, int head0, int hd, int H) {
    size_t es = tg_type_size(x->type), off = (size_t)head0 * (size_t)hd * es;
    if (x->ne[1] == 1) {
        int64_t ne[4] = {hd, 1, H, x->ne[2]};
        size_t nb[4] = {es, (size_t)hd * es, (size_t)hd * es, x->nb[2]};
        return tg_view(nn->ctx, x, 4, ne, nb, off);
    }
    int64_t ne[4] = {hd, H, x->ne[1], x->ne[2]};
    size_t nb[4] = {es, (size_t)hd * es, x->nb[1], x->nb[2]};
    return tg_permute(nn->ctx, tg_view(nn->ctx, x, 4, ne, nb, off), 0, 2, 1, 3);
}

tg_tensor *ct_nn_split_heads_from(const ct_nn *nn, tg_tensor *x, int head0, int hd, int H) {
    if (!x) return NULL;
    tg_tensor *t = heads_from(nn, x, head0, hd, H);
    return x->ne[1] == 1 ? t : tg_cont(nn->ctx, t);
}

tg_tensor *ct_nn_heads_view_of(const ct_nn *nn, tg_tensor *x, int part, int hd, int H) {
    return x ? heads_from(nn, x, part * H, hd, H) : NULL;
}

tg_tensor *ct_nn_part_of(const ct_nn *nn, tg_tensor *x, int part, int64_t d) {
    if (!x) return NULL;
    return tg_view_3d(nn->ctx, x, d, x->ne[1], x->ne[2], x->nb[1], x->nb[2],
                      (size_t)part * (size_t)d * tg_type_size(x->type));
}

tg_tensor *ct_nn_attention(const ct_nn *nn, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                           tg_tensor *mask, float scale) {
    tg_tensor *a = tg_attention(nn->ctx, q, k, v, mask, scale); /* [hd, H, Tq, B] */
    if (a && nn->f32) tg_set_prec(a, TG_PREC_F32);
    if (!a) return NULL;
    return tg_reshape_3d(nn->ctx, a, a->ne[0] * a->ne[1], a->ne[2], a->ne[3]);
}
