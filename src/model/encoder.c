/*
 * encoder.c: the FastConformer encoder of spec 2 as one tg graph per batch.
 *
 * Layout: activations are [d, T, B] (channels innermost). The subsampling
 * runs on [mel, T, C, B] images (PyTorch's W = mel, H = time), flattens
 * channel-major (c*F + f) and projects to d. Each block is the macaron
 * layout of spec 2.3 with rel-pos attention (spec 2.4): AC comes from
 * tg_attention with q + u, BD = (q + v)·(Wpos·P) is shifted by tg_rel_shift
 * and handed to the attention as its additive mask (scaled, plus -inf on
 * padded key frames), exactly as HF passes it to SDPA.
 *
 * Padding (spec 2.6): a batch is padded to its longest clip. After every
 * subsampling conv the frames at and past a row's valid length are zeroed
 * (masks as data), keys past the valid length are masked in attention, and
 * the conv module zeroes padded steps before its depthwise conv. Padded query
 * rows still see every valid key, so nothing produces NaN, and they never
 * reach a valid frame. The extra frame HF yields when floor(N/160) is a
 * multiple of 8 is simply one more padded frame here.
 *
 * The rel-pos table (spec 2.2) is computed on the host in fp32: device
 * sin/cos differ at sensitive tokens (spec 7.1 item 5).
 *
 * Not here: frame bucketing, the decoder's projection (decoder.c applies it).
 */
#include <math.h>
#include <string.h>

#include "base.h"
#include "model.h"

typedef struct builder {
    tg_ctx *ctx;
    const ct_model *m;
    bool f32;
} builder;

static tg_tensor *input(builder *b, tg_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                        int64_t ne3, const char *name) {
    tg_tensor *t = tg_new_4d(b->ctx, type, ne0, ne1, ne2, ne3);
    if (t) {
        t->flags |= TG_FLAG_INPUT;
        tg_set_name(t, "%s", name);
    }
    return t;
}

/* y = W x + bias (bias may be NULL). */
static tg_tensor *linear(builder *b, tg_tensor *w, tg_tensor *bias, tg_tensor *x) {
    tg_tensor *y = tg_mul_mat(b->ctx, w, x);
    if (y && b->f32) tg_set_prec(y, TG_PREC_F32);
    return bias ? tg_add(b->ctx, y, bias) : y;
}

static tg_tensor *norm(builder *b, tg_tensor *x, tg_tensor *w, tg_tensor *bias) {
    return tg_layer_norm(b->ctx, x, w, bias, 1e-5f);
}

/* [hd*H, T, B] -> [hd, T, H, B], contiguous. */
static tg_tensor *split_heads(builder *b, tg_tensor *x, int hd, int H) {
    tg_tensor *t = tg_reshape_4d(b->ctx, x, hd, H, x ? x->ne[1] : 1, x ? x->ne[2] : 1);
    return tg_cont(b->ctx, tg_permute(b->ctx, t, 0, 2, 1, 3));
}

/* A conv bias [C] broadcast over [W, H, C, N]. */
static tg_tensor *conv_bias(builder *b, tg_tensor *x, tg_tensor *bias) {
    return tg_add(b->ctx, x, tg_reshape_4d(b->ctx, bias, 1, 1, bias->ne[0], 1));
}

/* FF(h) = W2 silu(W1 h + b1) + b2 */
static tg_tensor *feed_forward(builder *b, tg_tensor *x, tg_tensor *nw, tg_tensor *nb,
                               tg_tensor *w1, tg_tensor *b1, tg_tensor *w2, tg_tensor *b2) {
    tg_tensor *h = norm(b, x, nw, nb);
    h = tg_silu(b->ctx, linear(b, w1, b1, h));
    return linear(b, w2, b2, h);
}

/* spec 2.4 */
static tg_tensor *rel_attention(builder *b, const ct_enc_layer *l, tg_tensor *x,
                                tg_tensor *pos, tg_tensor *key_mask) {
    const ct_model *m = b->m;
    tg_ctx *ctx = b->ctx;
    int H = m->heads, hd = m->head_dim;
    int64_t T = x->ne[1], B = x->ne[2];
    tg_tensor *h = norm(b, x, l->att_norm_w, l->att_norm_b);

    tg_tensor *q = tg_reshape_4d(ctx, linear(b, l->wq, l->bq, h), hd, H, T, B);
    tg_tensor *qu = tg_add(ctx, q, tg_reshape_4d(ctx, l->pos_u, hd, H, 1, 1));
    tg_tensor *qv = tg_add(ctx, q, tg_reshape_4d(ctx, l->pos_v, hd, H, 1, 1));
    qu = tg_cont(ctx, tg_permute(ctx, qu, 0, 2, 1, 3)); /* [hd, T, H, B] */
    qv = tg_cont(ctx, tg_permute(ctx, qv, 0, 2, 1, 3));
    tg_tensor *k = split_heads(b, linear(b, l->wk, l->bk, h), hd, H);
    tg_tensor *v = split_heads(b, linear(b, l->wv, l->bv, h), hd, H);

    /* r = Wpos P: [d, 2T-1] -> [hd, 2T-1, H, 1] */
    tg_tensor *r = linear(b, l->wpos, NULL, pos);
    r = tg_reshape_4d(ctx, r, hd, H, 2 * T - 1, 1);
    r = tg_cont(ctx, tg_permute(ctx, r, 0, 2, 1, 3));
    /* BDraw [2T-1, T, H, B]; rel_shift gives BD[j, i] = BDraw[T-1-i+j, i] */
    tg_tensor *bd_raw = tg_mul_mat(ctx, r, qv);
    if (bd_raw && b->f32) tg_set_prec(bd_raw, TG_PREC_F32);
    float scale = 1.0f / sqrtf((float)hd);
    tg_tensor *bd = tg_cont(ctx, tg_rel_shift(ctx, bd_raw));
    tg_tensor *mask = tg_add(ctx, tg_scale(ctx, bd, scale), key_mask);

    tg_tensor *att = tg_attention(ctx, qu, k, v, mask, scale); /* [hd, H, T, B] */
    if (att && b->f32) tg_set_prec(att, TG_PREC_F32);
    att = tg_reshape_3d(ctx, att, (int64_t)hd * H, T, B);
    return linear(b, l->wo, l->bo, att);
}

/* spec 2.5 */
static tg_tensor *conv_module(builder *b, const ct_enc_layer *l, tg_tensor *x,
                              tg_tensor *time_mask) {
    tg_ctx *ctx = b->ctx;
    tg_tensor *h = norm(b, x, l->conv_norm_w, l->conv_norm_b);
    h = tg_glu(ctx, linear(b, l->pw1_w, l->pw1_b, h));
    h = tg_mul(ctx, h, time_mask);
    h = tg_conv_1d_dw(ctx, l->dw_w, h, 1, (b->m->conv_kernel - 1) / 2);
    h = tg_silu(ctx, tg_add(ctx, h, l->dw_b));
    return linear(b, l->pw2_w, l->pw2_b, h);
}

static tg_tensor *block(builder *b, const ct_enc_layer *l, tg_tensor *x, tg_tensor *pos,
                        tg_tensor *key_mask, tg_tensor *time_mask) {
    tg_ctx *ctx = b->ctx;
    tg_tensor *f = feed_forward(b, x, l->ff1_norm_w, l->ff1_norm_b, l->ff1_w1, l->ff1_b1,
                                l->ff1_w2, l->ff1_b2);
    x = tg_add(ctx, x, tg_scale(ctx, f, 0.5f));
    if (!x) return NULL;
    x = tg_add(ctx, x, rel_attention(b, l, x, pos, key_mask));
    if (!x) return NULL;
    x = tg_add(ctx, x, conv_module(b, l, x, time_mask));
    f = feed_forward(b, x, l->ff2_norm_w, l->ff2_norm_b, l->ff2_w1, l->ff2_b1, l->ff2_w2,
                     l->ff2_b2);
    x = tg_add(ctx, x, tg_scale(ctx, f, 0.5f));
    return norm(b, x, l->out_norm_w, l->out_norm_b);
}

/* spec 2.2: rows r = 0..2T-2 hold position p = T-1-r; interleaved sin/cos. */
static void rel_pos_table(float *dst, int T, int d) {
    for (int r = 0; r < 2 * T - 1; r++) {
        float p = (float)(T - 1 - r);
        for (int k = 0; k < d / 2; k++) {
            float inv = 1.0f / powf(10000.0f, (float)(2 * k) / (float)d);
            float a = p * inv;
            dst[(size_t)r * d + 2 * k] = sinf(a);
            dst[(size_t)r * d + 2 * k + 1] = cosf(a);
        }
    }
}

/* 1 for t < len[b], else 0: [T][B] as [1, T, 1, B]. */
static void fill_mask(float *dst, int T, int B, const int *len) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) dst[(size_t)b * T + t] = t < len[b] ? 1.0f : 0.0f;
}

void ct_enc_result_free(ct_enc_result *r) {
    if (!r) return;
    tg_free(r->valid);
    tg_free(r->out);
    for (int i = 0; i < r->n_hidden; i++) tg_free(r->hidden[i]);
    tg_free(r->hidden);
    memset(r, 0, sizeof *r);
}

tg_status ct_encoder_run(const ct_model *m, tg_sched *sched, const float *features,
                         int n_batch, int n_frames, const int *valid_frames,
                         const ct_enc_opts *opts, ct_enc_result *out) {
    if (!m || !sched || !features || n_batch <= 0 || n_frames <= 0 || !valid_frames || !out)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_encoder_run: bad arguments");
    ct_enc_opts o = opts ? *opts : (ct_enc_opts){0};
    memset(out, 0, sizeof *out);
    int B = n_batch, T0 = n_frames, d = m->d;
    int T1 = ct_sub_len(T0), T2 = ct_sub_len(T1), T3 = ct_sub_len(T2);
    int *l1 = NULL, *l2 = NULL, *l3 = NULL;
    float *host = NULL;
    tg_status st = NULL;
    tg_ctx *ctx = tg_ctx_new();
    l1 = tg_calloc((size_t)B * 3, sizeof(int));
    out->valid = tg_calloc((size_t)B, sizeof(int));
    if (!ctx || !l1 || !out->valid) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "encoder: out of memory");
        goto fail;
    }
    l2 = l1 + B;
    l3 = l2 + B;
    for (int b = 0; b < B; b++) {
        if (valid_frames[b] <= 0 || valid_frames[b] > T0) {
            st = tg_status_new(TG_ERR_INVALID_ARG,
                               "encoder: row %d has %d valid frames of %d (needs at least 1)", b,
                               valid_frames[b], T0);
            goto fail;
        }
        l1[b] = ct_sub_len(valid_frames[b]);
        l2[b] = ct_sub_len(l1[b]);
        l3[b] = ct_sub_len(l2[b]);
        out->valid[b] = l3[b];
    }

    builder bl = {ctx, m, o.f32};
    builder *bd = &bl;
    tg_tensor *feat = input(bd, TG_F32, m->n_mels, T0, 1, B, "features");
    tg_tensor *m1 = input(bd, TG_F32, 1, T1, 1, B, "mask1");
    tg_tensor *m2 = input(bd, TG_F32, 1, T2, 1, B, "mask2");
    tg_tensor *m3 = input(bd, TG_F32, 1, T3, 1, B, "mask3");
    tg_tensor *kmask = input(bd, TG_F32, T3, 1, 1, B, "key_mask");
    tg_tensor *pos = input(bd, TG_F32, d, 2 * T3 - 1, 1, 1, "rel_pos");
    if ((st = tg_ctx_check(ctx))) goto fail;
    tg_tensor *pos2 = tg_reshape_2d(ctx, pos, d, 2 * T3 - 1);
    tg_tensor *tmask = tg_reshape_3d(ctx, m3, 1, T3, B);

    /* spec 2.1: subsampling */
    tg_tensor *x = tg_conv_2d(ctx, m->sub_w[0], feat, 2, 2, 1, 1);
    x = tg_relu(ctx, tg_mul(ctx, conv_bias(bd, x, m->sub_b[0]), m1));
    x = tg_conv_2d_dw(ctx, m->sub_w[1], x, 2, 2, 1, 1);
    x = tg_mul(ctx, conv_bias(bd, x, m->sub_b[1]), m2);
    x = tg_conv_2d(ctx, m->sub_w[2], x, 1, 1, 0, 0);
    x = tg_relu(ctx, tg_mul(ctx, conv_bias(bd, x, m->sub_b[2]), m2));
    x = tg_conv_2d_dw(ctx, m->sub_w[3], x, 2, 2, 1, 1);
    x = tg_mul(ctx, conv_bias(bd, x, m->sub_b[3]), m3);
    x = tg_conv_2d(ctx, m->sub_w[4], x, 1, 1, 0, 0);
    x = tg_relu(ctx, tg_mul(ctx, conv_bias(bd, x, m->sub_b[4]), m3));
    /* [F, T3, C, B] -> [F, C, T3, B] -> [C*F, T3, B] (index c*F + f) */
    x = tg_cont(ctx, tg_permute(ctx, x, 0, 2, 1, 3));
    x = tg_reshape_3d(ctx, x, (int64_t)m->sub_freq * m->sub_channels, T3, B);
    x = linear(bd, m->sub_out_w, m->sub_out_b, x);
    if ((st = tg_ctx_check(ctx))) goto fail;

    tg_tensor **hidden = NULL;
    if (o.keep_hidden) {
        out->n_hidden = m->n_enc_layers + 1;
        out->hidden = tg_calloc((size_t)out->n_hidden, sizeof(float *));
        hidden = tg_calloc((size_t)out->n_hidden, sizeof(tg_tensor *));
        if (!out->hidden || !hidden) {
            tg_free(hidden);
            st = tg_status_new(TG_ERR_NO_MEMORY, "encoder: out of memory");
            goto fail;
        }
        hidden[0] = x;
    }
    for (int i = 0; i < m->n_enc_layers && x; i++) {
        x = block(bd, &m->enc[i], x, pos2, kmask, tmask);
        if (hidden) hidden[i + 1] = x;
    }
    if (x) tg_set_name(x, "encoder_out");

    tg_graph *g = tg_graph_new(ctx);
    if (!g) st = tg_status_new(TG_ERR_NO_MEMORY, "encoder: out of memory");
    if (!st) st = tg_graph_build(g, x);
    for (int i = 0; hidden && !st && i < out->n_hidden; i++) st = tg_graph_build(g, hidden[i]);
    if (!st) st = tg_sched_alloc(sched, g);
    if (st) {
        tg_free(hidden);
        st = tg_status_wrap(st, "building the encoder graph");
        goto fail;
    }

    /* inputs */
    size_t n_pos = (size_t)(2 * T3 - 1) * d;
    size_t n_host = n_pos;
    if (n_host < (size_t)T1 * B) n_host = (size_t)T1 * B;
    host = tg_malloc(n_host * sizeof(float));
    if (!host) {
        tg_free(hidden);
        st = tg_status_new(TG_ERR_NO_MEMORY, "encoder: out of memory");
        goto fail;
    }
    st = tg_tensor_set(feat, features, 0, (size_t)B * T0 * m->n_mels * sizeof(float));
    fill_mask(host, T1, B, l1);
    if (!st) st = tg_tensor_set(m1, host, 0, (size_t)T1 * B * sizeof(float));
    fill_mask(host, T2, B, l2);
    if (!st) st = tg_tensor_set(m2, host, 0, (size_t)T2 * B * sizeof(float));
    fill_mask(host, T3, B, l3);
    if (!st) st = tg_tensor_set(m3, host, 0, (size_t)T3 * B * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T3; t++) host[(size_t)b * T3 + t] = t < l3[b] ? 0.0f : -INFINITY;
    if (!st) st = tg_tensor_set(kmask, host, 0, (size_t)T3 * B * sizeof(float));
    rel_pos_table(host, T3, d);
    if (!st) st = tg_tensor_set(pos, host, 0, n_pos * sizeof(float));
    if (!st) st = tg_sched_compute(sched, g);
    if (st) {
        tg_free(hidden);
        st = tg_status_wrap(st, "running the encoder");
        goto fail;
    }

    /* outputs: [d, T3, B] is [B][T3][d] on the host */
    size_t n_out = (size_t)B * T3 * d;
    out->n_batch = B;
    out->n_frames = T3;
    out->d = d;
    out->out = tg_malloc(n_out * sizeof(float));
    if (!out->out) st = tg_status_new(TG_ERR_NO_MEMORY, "encoder: out of memory");
    if (!st) st = tg_tensor_get(x, out->out, 0, n_out * sizeof(float));
    for (int i = 0; hidden && !st && i < out->n_hidden; i++) {
        out->hidden[i] = tg_malloc(n_out * sizeof(float));
        if (!out->hidden[i])
            st = tg_status_new(TG_ERR_NO_MEMORY, "encoder: out of memory");
        else
            st = tg_tensor_get(hidden[i], out->hidden[i], 0, n_out * sizeof(float));
    }
    tg_free(hidden);
    if (st) goto fail;
    tg_free(host);
    tg_free(l1);
    tg_ctx_free(ctx);
    return NULL;
fail:
    tg_free(host);
    tg_free(l1);
    tg_ctx_free(ctx);
    ct_enc_result_free(out);
    return st;
}
