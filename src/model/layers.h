/*
 * layers.h: the building blocks the encoder and decoder graphs are made of
 * (internal): graph inputs, linear layers, layer norm, head split/merge and
 * the attention call.
 *
 * Why a shared file: both graph builders need the same few pieces with the
 * same precision rule (TG_PREC_F32 on every matrix product and attention
 * when the caller asks for the reference setting), and each defined its own
 * copy. A ct_nn names the context a graph is built in and that request, so
 * the rule is applied in one place and the model code reads as the spec's
 * formulas.
 *
 * Like every op constructor, these return NULL on failure with the error
 * recorded in the context (tg_ctx_check hands it out), and accept NULL
 * sources. Not here: anything specific to one model part (rel-pos
 * attention, the conv module, the KV cache): encoder.c and decoder.c.
 */
#ifndef CT_LAYERS_H
#define CT_LAYERS_H

#include <stdbool.h>
#include <stdint.h>

#include "tg.h"

/* A graph under construction: where its tensors go and what precision the
 * matrix products and attention ask for. */
typedef struct ct_nn {
    tg_ctx *ctx;
    bool f32; /* TG_PREC_F32 on mul_mat and attention */
} ct_nn;

/* A graph input [ne0, ne1, ne2, ne3] that the caller sets after allocation
 * (TG_FLAG_INPUT), named `name`. */
tg_tensor *ct_nn_input(const ct_nn *nn, tg_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                       int64_t ne3, const char *name);
/* a · b (tg_mul_mat's orientation) with the precision request applied. */
tg_tensor *ct_nn_matmul(const ct_nn *nn, tg_tensor *a, tg_tensor *b);
/* y = W x + bias: W [in, out] as loaded, x [in, ...]; bias may be NULL. */
tg_tensor *ct_nn_linear(const ct_nn *nn, tg_tensor *w, tg_tensor *bias, tg_tensor *x);
/* LayerNorm over dim 0 with eps 1e-5 (every norm of spec 2 and 3). */
tg_tensor *ct_nn_norm(const ct_nn *nn, tg_tensor *x, tg_tensor *w, tg_tensor *bias);
/* [hd*H, T, B] -> [hd, T, H, B], contiguous (head n is dims [hd*n, hd*n+hd)). */
tg_tensor *ct_nn_split_heads(const ct_nn *nn, tg_tensor *x, int hd, int H);
/* The same as a strided view of x, no copy: for consumers that read
 * strided operands (tg_attention's q, k, v; tg_mul_mat's operands). */
tg_tensor *ct_nn_heads_view(const ct_nn *nn, tg_tensor *x, int hd, int H);
/* The same for part `part` of x [n * hd*H, T, B], the result of a packed
 * product (q, k, v side by side in each column): [hd, T, H, B], a strided
 * view of x when T == 1. */
tg_tensor *ct_nn_split_heads_of(const ct_nn *nn, tg_tensor *x, int part, int hd, int H);
/* The same for the H heads of x from head head0 on (k and v of a packed
 * product together: head0 = heads, H = 2 heads). */
tg_tensor *ct_nn_split_heads_from(const ct_nn *nn, tg_tensor *x, int head0, int hd, int H);
/* Part `part` of x [n * hd*H, T, B] (a packed product's q, k or v) as
 * [hd, T, H, B], a strided view at every T: for consumers that read
 * strided operands (the encoder's attention and rel-pos product). */
tg_tensor *ct_nn_heads_view_of(const ct_nn *nn, tg_tensor *x, int part, int hd, int H);
/* Part `part` of x [n * d, T, B] as [d, T, B], a strided view. */
tg_tensor *ct_nn_part_of(const ct_nn *nn, tg_tensor *x, int part, int64_t d);
/* softmax(q·kᵀ·scale + mask)·v with the precision request, heads merged:
 * q [hd, Tq, H, B], k and v [hd, Tk, H, B], mask as tg_attention's; result
 * [hd*H, Tq, B] (the heads concatenated, ready for the output linear). */
tg_tensor *ct_nn_attention(const ct_nn *nn, tg_tensor *q, tg_tensor *k, tg_tensor *v,
                           tg_tensor *mask, float scale);

#endif
