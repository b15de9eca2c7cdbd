/*
 * weights.c: loads a cohere_asr checkpoint directory into runtime tensors.
 *
 * Three tensor-name layouts exist for the same weights (spec 6.2): the Hub's
 * NeMo-style names, the same names under "model." as transformers'
 * save_pretrained writes them (the head keeps its bare name), and the
 * transformers in-memory names. The layout is told by probing the first
 * subsampling conv under each name; every later lookup goes through one
 * table that spells a logical tensor in all three.
 *
 * Dimensions come from the tensor shapes: a few reference tensors fix them,
 * every other tensor is checked against the shape they imply, and a config
 * value they contradict is an error naming both (only the encoder's
 * feed-forward width, which NeMo configs state as a rounded factor, draws a
 * warning instead); head counts come only from the config and must divide
 * the widths and match pos_bias_u/v. A misshapen or missing tensor is an
 * error naming it (and both shapes); so is a tensor the config's model does
 * not use (fewer layers in config.json than in the checkpoint).
 *
 * A checkpoint truncated while mapped reads as zeros past the cut instead of
 * killing the process (base/file.c's SIGBUS guard): the load checks the
 * mappings after reading them, and the encoder and the decoder after every
 * compute (ct_model_check), so such a run ends in an error naming the file.
 * What stays: weights read in place on the CPU are read again at every
 * compute, so the check comes after the compute it spoils.
 *
 * Storage: the matrices of matrix products and the embedding tables keep
 * their stored type (F32, F16 or BF16). On a CPU backend they are used in
 * place from the read-only mapping (no copy of a 4 GB checkpoint); on any
 * other backend they are copied into one device buffer. Norms, biases, conv
 * kernels and the rel-pos biases are converted to F32 into a buffer of their
 * own; BatchNorm is folded into the depthwise conv in f32 (spec 2.5), and
 * the feed-forwards' second biases are halved (ff1_b2h, ff2_b2h: encoder.c
 * adds them after the macaron's 0.5 scale, which a GPU runs in the
 * product's epilogue; halving is exact in binary floating point). The
 * self-attentions' q, k, v are packed into one matrix and one bias
 * (take_qkv), so that a layer runs one product for the three: the
 * decoder's on every backend (copied), the encoder's where the matrices
 * are copied anyway (not on a CPU, where they stay in the mapping).
 *
 * Not here: running anything (encoder.c, decoder.c). Of the tensors this
 * model does not use, only preprocessor.* and num_batches_tracked are
 * ignored (spec 6.2).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "model.h"

#define MAX_NAME 256

/* How a tensor is stored once loaded. */
enum kind {
    KIND_MATRIX, /* stored type, in place on the CPU                     */
    KIND_F32,    /* converted to F32                                     */
    KIND_F32_HALF, /* converted to F32 and halved (exact): ff*_b2h       */
    KIND_DW,     /* depthwise kernel: F32, BatchNorm folded (set later)  */
    KIND_DWB,    /* depthwise bias: F32, BatchNorm folded (set later)    */
};

typedef struct pending {
    tg_tensor *t;
    const st_tensor *src;
    enum kind kind;
    int layer; /* for KIND_DW / KIND_DWB */
    const st_tensor *plus; /* KIND_F32: added, element by element, in F32 (NULL: none) */
} pending;

typedef struct loader {
    ct_model *m;
    const char *dir;
    pending *items;
    int n_items, cap_items;
    bool in_place; /* the matrices are used from the mapping (a CPU backend) */
    /* BatchNorm tensors per encoder layer, read at fold time */
    const st_tensor **bn; /* [n_enc_layers][6]: dw_w, dw_b, gamma, beta, mean, var */
} loader;

const char *ct_layout_name(ct_layout layout) {
    switch (layout) {
    case CT_LAYOUT_HUB: return "hub (NeMo names)";
    case CT_LAYOUT_SAVED: return "save_pretrained (NeMo names under model.)";
    case CT_LAYOUT_NATIVE: return "transformers native names";
    }
    return "?";
}

/* ------------------------------------------------------------------ names */

/* Spells the logical tensor `nemo` / `native` (a printf format taking the
 * layer index, or none) in the model's layout. NeMo names get "model." in
 * the saved layout, except the head. */
static void tensor_name(ct_layout layout, char *buf, const char *nemo, const char *native,
                        int layer) {
    char tmp[MAX_NAME - 8];
    const char *fmt = layout == CT_LAYOUT_NATIVE ? native : nemo;
    snprintf(tmp, sizeof tmp, fmt, layer);
    if (layout == CT_LAYOUT_SAVED && strncmp(tmp, "log_softmax.", 12) != 0)
        snprintf(buf, MAX_NAME, "model.%s", tmp);
    else
        snprintf(buf, MAX_NAME, "%s", tmp);
}

static const char *layout_probe[3] = {
    "encoder.pre_encode.conv.0.weight",
    "model.encoder.pre_encode.conv.0.weight",
    "model.encoder.subsampling.layers.0.weight",
};

static tg_status detect_layout(const st_set *st, const char *dir, ct_layout *out) {
    for (int i = 0; i < 3; i++) {
        if (st_find(st, layout_probe[i])) {
            *out = (ct_layout)i;
            return NULL;
        }
    }
    return tg_status_new(TG_ERR_FORMAT,
                         "%s: not a cohere_asr checkpoint: none of '%s', '%s', '%s' is present",
                         dir, layout_probe[0], layout_probe[1], layout_probe[2]);
}

/* ----------------------------------------------------------------- shapes */

static void shape_str(char *buf, size_t size, int n, const int64_t *s) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, size - k, "[");
    for (int i = 0; i < n && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? "," : "", (long long)s[i]);
    if (k < size) snprintf(buf + k, size - k, "]");
}

/* Finds `name` and checks its PyTorch shape against want[0..n). */
static tg_status find_checked(const loader *L, const char *name, int n, const int64_t *want,
                              const st_tensor **out) {
    const st_tensor *t = st_find(L->m->st, name);
    if (!t)
        return tg_status_new(TG_ERR_NOT_FOUND, "%s: tensor '%s' is missing from the checkpoint",
                             L->dir, name);
    bool ok = t->n_dims == n;
    for (int i = 0; ok && i < n; i++) ok = t->shape[i] == want[i];
    if (!ok) {
        char got[96], exp[96];
        shape_str(got, sizeof got, t->n_dims, t->shape);
        shape_str(exp, sizeof exp, n, want);
        return tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s' has shape %s but %s was expected",
                             L->dir, name, got, exp);
    }
    tg_type tt;
    tg_status st = st_dtype_to_tg(t->dtype, &tt);
    if (st || (tt != TG_F32 && tt != TG_F16 && tt != TG_BF16)) {
        tg_status_free(st);
        return tg_status_new(TG_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16",
                             L->dir, name, st_dtype_name(t->dtype));
    }
    *out = t;
    return NULL;
}

/* Queues runtime tensor t (named after src) to be filled from src. */
static tg_status queue(loader *L, tg_tensor *t, const st_tensor *src, enum kind kind, int layer) {
    tg_set_name(t, "%s", src->name);
    t->flags |= TG_FLAG_WEIGHT;
    if (!tg_grow((void **)&L->items, &L->cap_items, L->n_items + 1, sizeof(pending)))
        return tg_status_new(TG_ERR_NO_MEMORY, "loading %s: out of memory", L->dir);
    L->items[L->n_items++] = (pending){t, src, kind, layer, NULL};
    return NULL;
}

/* Declares one weight: checks it, makes its runtime tensor with the
 * runtime shape ne[0..tg_n) and queues it for placement. */
static tg_status take(loader *L, const char *name, int n, const int64_t *want,
                      enum kind kind, int tg_n, const int64_t *ne, int layer,
                      tg_tensor **out) {
    const st_tensor *src;
    tg_status st = find_checked(L, name, n, want, &src);
    if (st) return st;
    tg_type type = TG_F32;
    if (kind == KIND_MATRIX) {
        st = st_dtype_to_tg(src->dtype, &type);
        if (st) return st;
    }
    tg_tensor *t = tg_new_tensor(L->m->ctx, type, tg_n, ne);
    if (!t) return tg_status_wrap(tg_ctx_check(L->m->ctx), "%s: tensor '%s'", L->dir, name);
    if ((st = queue(L, t, src, kind, layer))) return st;
    *out = t;
    return NULL;
}

/* Shorthands: a linear layer's matrix [out, in] and a vector [n]. */
static tg_status take_matrix(loader *L, const char *name, int64_t out_dim, int64_t in_dim,
                             tg_tensor **out) {
    int64_t want[2] = {out_dim, in_dim}, ne[2] = {in_dim, out_dim};
    return take(L, name, 2, want, KIND_MATRIX, 2, ne, 0, out);
}

static tg_status take_vec(loader *L, const char *name, int64_t n, tg_tensor **out) {
    int64_t want[1] = {n};
    return take(L, name, 1, want, KIND_F32, 1, want, 0, out);
}

/* --------------------------------------------------------------- the model */

/* Names of the per-layer tensors: NeMo suffix, native suffix. */
typedef struct lname {
    const char *nemo, *native;
} lname;

#define ENC_NEMO "encoder.layers.%d."
#define ENC_NATIVE "model.encoder.layers.%d."
#define DEC_NEMO "transf_decoder._decoder.layers.%d."
#define DEC_NATIVE "model.decoder.layers.%d."

/* Looks up a layer tensor: base name (NeMo / native) + ".weight" etc. */
static void lname_fmt(const loader *L, char *buf, bool dec, lname n, const char *suffix,
                      int layer) {
    char nemo[MAX_NAME - 16], native[MAX_NAME - 16];
    snprintf(nemo, sizeof nemo, "%s%s%s", dec ? DEC_NEMO : ENC_NEMO, n.nemo, suffix);
    snprintf(native, sizeof native, "%s%s%s", dec ? DEC_NATIVE : ENC_NATIVE, n.native,
             suffix);
    tensor_name(L->m->layout, buf, nemo, native, layer);
}

static tg_status take_lin(loader *L, bool dec, lname n, int layer, int64_t out_dim,
                          int64_t in_dim, bool bias, tg_tensor **w, tg_tensor **b) {
    char name[MAX_NAME];
    lname_fmt(L, name, dec, n, ".weight", layer);
    tg_status st = take_matrix(L, name, out_dim, in_dim, w);
    if (st || !bias) return st;
    lname_fmt(L, name, dec, n, ".bias", layer);
    return take_vec(L, name, out_dim, b);
}

/* q, k, v: the checkpoint's three projections of a self-attention.
 * names: their logical names; w, b: where their tensors go. */
typedef struct qkv_parts {
    lname names[3];
    tg_tensor **w[3], **b[3];
    tg_tensor **wqkv, **bqkv; /* the packed matrix and bias, NULL when apart */
    /* the encoder's rel-pos biases [heads, head_dim] (= [dim]): with them
     * the packing is q + u, q + v, k, v (*uv set); NULL: q, k, v */
    const st_tensor *u, *v;
    bool *uv;
} qkv_parts;

/* How the encoder's (or decoder's) q, k, v are loaded: three products
 * (QKV_APART), one of q, k, v (QKV_PACKED), or, for the encoder, one of
 * q + u, q + v, k, v (QKV_UV): the two rel-pos adds of every layer (q + u
 * for the scores, q + v for the rel-pos product, each a pass over a [d, T,
 * B] tensor: 96 launches an encoder pass) become a fourth of the product
 * and a bias made at load. */
enum { QKV_APART, QKV_PACKED, QKV_UV };

/* The q bias bq plus a rel-pos bias, queued to fill b (a part of the
 * packed bias). */
static tg_status queue_biased(loader *L, tg_tensor *b, const st_tensor *bq, const st_tensor *plus) {
    tg_status st = queue(L, b, bq, KIND_F32, 0);
    if (!st) L->items[L->n_items - 1].plus = plus;
    if (!st) tg_set_name(b, "%s + %s", bq->name, plus->name);
    return st;
}

/* A self-attention's q, k, v as one matrix [dim, 3 dim] and one bias
 * [3 dim] (*P->wqkv, *P->bqkv), the three checkpoint tensors filled into
 * consecutive slices of them and each kept as a view (*P->w[i] ...), so
 * that the layer runs one product where it ran three; with mode QKV_UV
 * (P->u and P->v given) four slices, q's matrix twice, its bias plus u and
 * plus v. The views are copied, never used in place, since they are no
 * longer the mapping's bytes. With QKV_APART, or when the three matrices
 * differ in stored type, they stay apart (*P->wqkv NULL). */
static tg_status take_qkv(loader *L, bool dec, int layer, int64_t dim, int mode, const qkv_parts *P) {
    const bool pack = mode != QKV_APART;
    const st_tensor *ws[3], *bs[3];
    int64_t want_w[2] = {dim, dim}, want_b[1] = {dim};
    char name[MAX_NAME];
    tg_status st;
    for (int i = 0; i < 3; i++) {
        lname_fmt(L, name, dec, P->names[i], ".weight", layer);
        if ((st = find_checked(L, name, 2, want_w, &ws[i]))) return st;
        lname_fmt(L, name, dec, P->names[i], ".bias", layer);
        if ((st = find_checked(L, name, 1, want_b, &bs[i]))) return st;
    }
    *P->wqkv = *P->bqkv = NULL;
    if (P->uv) *P->uv = false;
    if (!pack || ws[1]->dtype != ws[0]->dtype || ws[2]->dtype != ws[0]->dtype) {
        for (int i = 0; i < 3; i++)
            if ((st = take_lin(L, dec, P->names[i], layer, dim, dim, true, P->w[i], P->b[i]))) return st;
        return NULL;
    }
    const char *part = dec ? "decoder" : "encoder";
    tg_type type;
    if ((st = st_dtype_to_tg(ws[0]->dtype, &type))) return st;
    const bool uv = mode == QKV_UV && P->u && P->v && P->uv;
    const int parts = uv ? 4 : 3;
    tg_ctx *ctx = L->m->ctx;
    tg_tensor *w = *P->wqkv = tg_new_2d(ctx, type, dim, parts * dim);
    tg_tensor *b = *P->bqkv = tg_new_1d(ctx, TG_F32, parts * dim);
    if (!w || !b) return tg_status_wrap(tg_ctx_check(ctx), "%s: %s layer %d's packed q/k/v", L->dir, part, layer);
    tg_set_name(w, "%s.%d.self_attn.%s.weight (packed)", part, layer, uv ? "quvkv" : "qkv");
    tg_set_name(b, "%s.%d.self_attn.%s.bias (packed)", part, layer, uv ? "quvkv" : "qkv");
    w->flags |= TG_FLAG_WEIGHT;
    b->flags |= TG_FLAG_WEIGHT;
    for (int j = 0; j < parts; j++) {
        /* part j holds checkpoint tensor i: q, (q,) k, v */
        const int i = uv ? (j < 2 ? 0 : j - 1) : j;
        tg_tensor *wj = tg_view_2d(ctx, w, dim, dim, w->nb[1], (size_t)j * dim * w->nb[1]);
        tg_tensor *bj = tg_view_1d(ctx, b, dim, (size_t)j * dim * sizeof(float));
        if (!wj || !bj)
            return tg_status_wrap(tg_ctx_check(ctx), "%s: %s layer %d's packed q/k/v", L->dir, part, layer);
        if ((st = queue(L, wj, ws[i], KIND_MATRIX, 0))) return st;
        st = uv && j < 2 ? queue_biased(L, bj, bs[0], j == 0 ? P->u : P->v) : queue(L, bj, bs[i], KIND_F32, 0);
        if (st) return st;
        if (!uv || j != 1) *P->w[i] = wj, *P->b[i] = bj;
    }
    if (uv) *P->uv = true;
    return NULL;
}

/* CT_ENCODER_QKV, CT_DECODER_QKV: "separate", "packed" or (the encoder's)
 * "uv" when set (for measuring), else dflt; another value is named in a
 * warning. */
static int qkv_mode(const char *env, int dflt, bool uv_ok) {
    const char *v = getenv(env);
    if (!v || !*v) return dflt;
    if (!strcmp(v, "separate")) return QKV_APART;
    if (!strcmp(v, "packed")) return QKV_PACKED;
    if (uv_ok && !strcmp(v, "uv")) return QKV_UV;
    TG_WARN("%s=%s: not separate, packed%s; ignored", env, v, uv_ok ? " or uv" : "");
    return dflt;
}

static tg_status take_norm(loader *L, bool dec, lname n, int layer, int64_t dim,
                           tg_tensor **w, tg_tensor **b) {
    char name[MAX_NAME];
    lname_fmt(L, name, dec, n, ".weight", layer);
    tg_status st = take_vec(L, name, dim, w);
    if (st) return st;
    lname_fmt(L, name, dec, n, ".bias", layer);
    return take_vec(L, name, dim, b);
}

/* Reads the shape of a reference tensor (any rank check is left to the
 * caller), for deriving dimensions. */
static tg_status ref_shape(const loader *L, const char *name, int n, const st_tensor **out) {
    const st_tensor *t = st_find(L->m->st, name);
    if (!t)
        return tg_status_new(TG_ERR_NOT_FOUND, "%s: tensor '%s' is missing from the checkpoint",
                             L->dir, name);
    if (t->n_dims != n) {
        char got[96];
        shape_str(got, sizeof got, t->n_dims, t->shape);
        return tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s' has shape %s but %d dims were expected",
                             L->dir, name, got, n);
    }
    for (int i = 0; i < n; i++) {
        if (t->shape[i] <= 0 || t->shape[i] > (1 << 24)) {
            char got[96];
            shape_str(got, sizeof got, t->n_dims, t->shape);
            return tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s' has an implausible shape %s",
                                 L->dir, name, got);
        }
    }
    *out = t;
    return NULL;
}

/* The weights decide dimensions, and a config value that contradicts them
 * is an error naming both: such a config describes another model, and
 * loading it anyway would run something no one trained. Head counts, which
 * no shape can tell, come from the config alone. */
static tg_status check_cfg(const loader *L, const char *key, int cfg, int got,
                           const char *tensor) {
    if (cfg > 0 && cfg != got)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: config.json gives %s = %d but tensor '%s' implies %d; the "
                             "config does not describe these weights",
                             L->dir, key, cfg, tensor, got);
    return NULL;
}

/* The one leniency: NeMo states the encoder's feed-forward width as a
 * factor of d_model, which a published config may round (the small2
 * fixture's gives 2 for 192/80 = 2.4); the weights win, with a warning that
 * names both values. */
static void warn_cfg(const loader *L, const char *key, int cfg, int got, const char *tensor) {
    if (cfg > 0 && cfg != got)
        TG_WARN("%s: config.json gives %s = %d but tensor '%s' implies %d; using %d", L->dir,
                key, cfg, tensor, got, got);
}

static tg_status derive_dims(loader *L) {
    ct_model *m = L->m;
    const ct_config *c = &m->cfg;
    char name[MAX_NAME];
    const st_tensor *t;
    tg_status st;

    /* subsampling conv 0 [C, 1, 3, 3] and the linear after it [d, C*F] */
    tensor_name(m->layout, name, "encoder.pre_encode.conv.0.weight",
                "model.encoder.subsampling.layers.0.weight", 0);
    if ((st = ref_shape(L, name, 4, &t))) return st;
    m->sub_channels = (int)t->shape[0];
    if ((st = check_cfg(L, "subsampling_conv_channels", c->subsampling_channels,
                        m->sub_channels, name)))
        return st;
    m->n_mels = c->n_mels > 0 ? c->n_mels : 128;
    m->sub_freq = ct_enc_len(m->n_mels);
    tensor_name(m->layout, name, "encoder.pre_encode.out.weight",
                "model.encoder.subsampling.linear.weight", 0);
    if ((st = ref_shape(L, name, 2, &t))) return st;
    m->d = (int)t->shape[0];
    if (t->shape[1] != (int64_t)m->sub_channels * m->sub_freq)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: tensor '%s' has %lld inputs but %d channels x %d mel bins "
                             "after subsampling = %d were expected",
                             L->dir, name, (long long)t->shape[1], m->sub_channels,
                             m->sub_freq, m->sub_channels * m->sub_freq);
    if ((st = check_cfg(L, "the encoder width", c->enc_hidden, m->d, name))) return st;
    if (c->subsampling_factor > 0 && c->subsampling_factor != 8)
        return tg_status_new(TG_ERR_UNSUPPORTED,
                             "%s: subsampling_factor %d is not supported (only 8)", L->dir,
                             c->subsampling_factor);

    m->n_enc_layers = c->enc_layers;
    m->heads = c->enc_heads;
    if (m->n_enc_layers <= 0 || m->heads <= 0)
        return tg_status_new(TG_ERR_FORMAT, "%s: config.json lacks encoder layers/heads", L->dir);
    if (m->d % m->heads)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: encoder width %d is not a multiple of its %d heads (config.json)",
                             L->dir, m->d, m->heads);
    m->head_dim = m->d / m->heads;

    tensor_name(m->layout, name, ENC_NEMO "feed_forward1.linear1.weight",
                ENC_NATIVE "feed_forward1.linear1.weight", 0);
    if ((st = ref_shape(L, name, 2, &t))) return st;
    m->ff = (int)t->shape[0];
    warn_cfg(L, "the encoder intermediate size", c->enc_ff, m->ff, name);
    tensor_name(m->layout, name, ENC_NEMO "conv.depthwise_conv.weight",
                ENC_NATIVE "conv.depthwise_conv.weight", 0);
    if ((st = ref_shape(L, name, 3, &t))) return st;
    m->conv_kernel = (int)t->shape[2];
    if (m->conv_kernel % 2 == 0)
        return tg_status_new(TG_ERR_FORMAT, "%s: tensor '%s': depthwise kernel %d is not odd",
                             L->dir, name, m->conv_kernel);
    if ((st = check_cfg(L, "conv_kernel_size", c->conv_kernel, m->conv_kernel, name))) return st;

    /* decoder */
    tensor_name(m->layout, name, "transf_decoder._embedding.token_embedding.weight",
                "model.decoder.embed_tokens.weight", 0);
    if ((st = ref_shape(L, name, 2, &t))) return st;
    m->vocab = (int)t->shape[0];
    m->dd = (int)t->shape[1];
    if ((st = check_cfg(L, "vocab_size", c->vocab_size, m->vocab, name))) return st;
    if ((st = check_cfg(L, "the decoder width", c->dec_hidden, m->dd, name))) return st;
    tensor_name(m->layout, name, "transf_decoder._embedding.position_embedding.pos_enc",
                "model.decoder.pos_emb.weight", 0);
    if ((st = ref_shape(L, name, 2, &t))) return st;
    m->max_positions = (int)t->shape[0];
    if ((st = check_cfg(L, "max_sequence_length (the decoder's positions)",
                        c->dec_max_positions, m->max_positions, name)))
        return st;
    tensor_name(m->layout, name, DEC_NEMO "third_sub_layer.dense_in.weight",
                DEC_NATIVE "mlp.fc1.weight", 0);
    if ((st = ref_shape(L, name, 2, &t))) return st;
    m->dec_ff = (int)t->shape[0];
    if ((st = check_cfg(L, "the decoder intermediate size", c->dec_ff, m->dec_ff, name)))
        return st;
    m->n_dec_layers = c->dec_layers;
    m->dec_heads = c->dec_heads;
    if (m->n_dec_layers <= 0 || m->dec_heads <= 0)
        return tg_status_new(TG_ERR_FORMAT, "%s: config.json lacks decoder layers/heads", L->dir);
    if (m->dd % m->dec_heads)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: decoder width %d is not a multiple of its %d heads (config.json)",
                             L->dir, m->dd, m->dec_heads);
    m->dec_head_dim = m->dd / m->dec_heads;
    return NULL;
}

static tg_status declare_subsampling(loader *L) {
    ct_model *m = L->m;
    char name[MAX_NAME];
    static const int idx[5] = {0, 2, 3, 5, 6};
    int64_t C = m->sub_channels;
    tg_status st;
    for (int i = 0; i < 5; i++) {
        bool pw = idx[i] == 3 || idx[i] == 6;
        int64_t cin = idx[i] == 0 || !pw ? 1 : C, k = pw ? 1 : 3;
        int64_t want[4] = {C, cin, k, k}, ne[4] = {k, k, cin, C};
        char nemo[64], native[64];
        snprintf(nemo, sizeof nemo, "encoder.pre_encode.conv.%d.weight", idx[i]);
        snprintf(native, sizeof native, "model.encoder.subsampling.layers.%d.weight", idx[i]);
        tensor_name(m->layout, name, nemo, native, 0);
        if ((st = take(L, name, 4, want, KIND_F32, 4, ne, 0, &m->sub_w[i]))) return st;
        snprintf(nemo, sizeof nemo, "encoder.pre_encode.conv.%d.bias", idx[i]);
        snprintf(native, sizeof native, "model.encoder.subsampling.layers.%d.bias", idx[i]);
        tensor_name(m->layout, name, nemo, native, 0);
        if ((st = take_vec(L, name, C, &m->sub_b[i]))) return st;
    }
    tensor_name(m->layout, name, "encoder.pre_encode.out.weight",
                "model.encoder.subsampling.linear.weight", 0);
    if ((st = take_matrix(L, name, m->d, C * m->sub_freq, &m->sub_out_w))) return st;
    tensor_name(m->layout, name, "encoder.pre_encode.out.bias",
                "model.encoder.subsampling.linear.bias", 0);
    return take_vec(L, name, m->d, &m->sub_out_b);
}

/* The tensor declared last is stored halved (KIND_F32_HALF), and its name says so. */
static void halve_last(loader *L) {
    pending *p = &L->items[L->n_items - 1];
    p->kind = KIND_F32_HALF;
    tg_set_name(p->t, "%s (halved)", p->src->name);
}

static tg_status declare_enc_layer(loader *L, int i) {
    ct_model *m = L->m;
    ct_enc_layer *e = &m->enc[i];
    int64_t d = m->d, ff = m->ff;
    char name[MAX_NAME];
    tg_status st;
#define TRY(x) if ((st = (x))) return st
    TRY(take_norm(L, false, (lname){"norm_feed_forward1", "norm_feed_forward1"}, i, d,
                  &e->ff1_norm_w, &e->ff1_norm_b));
    TRY(take_lin(L, false, (lname){"feed_forward1.linear1", "feed_forward1.linear1"}, i, ff, d,
                 true, &e->ff1_w1, &e->ff1_b1));
    TRY(take_lin(L, false, (lname){"feed_forward1.linear2", "feed_forward1.linear2"}, i, d, ff,
                 true, &e->ff1_w2, &e->ff1_b2h));
    halve_last(L);
    TRY(take_norm(L, false, (lname){"norm_self_att", "norm_self_att"}, i, d, &e->att_norm_w,
                  &e->att_norm_b));
    /* packed where the matrices are copied anyway (a GPU): one product for
     * q + u, q + v, k and v; on a CPU they stay in place in the mapping
     * (packing would copy 9.8 MB a layer, 472 MB at the released size) */
    const st_tensor *su, *sv; /* the rel-pos biases' checkpoint tensors, for the packing */
    {
        /* [heads, head_dim]: the config's head count must fit the weights */
        int64_t want[2] = {m->heads, m->head_dim}, ne[2] = {m->head_dim, m->heads};
        lname_fmt(L, name, false, (lname){"self_attn.pos_bias_u", "self_attn.bias_u"}, "", i);
        TRY(take(L, name, 2, want, KIND_F32, 2, ne, 0, &e->pos_u));
        su = L->items[L->n_items - 1].src;
        lname_fmt(L, name, false, (lname){"self_attn.pos_bias_v", "self_attn.bias_v"}, "", i);
        TRY(take(L, name, 2, want, KIND_F32, 2, ne, 0, &e->pos_v));
        sv = L->items[L->n_items - 1].src;
    }
    const qkv_parts sa = {{{"self_attn.linear_q", "self_attn.q_proj"},
                           {"self_attn.linear_k", "self_attn.k_proj"},
                           {"self_attn.linear_v", "self_attn.v_proj"}},
                          {&e->wq, &e->wk, &e->wv},
                          {&e->bq, &e->bk, &e->bv},
                          &e->wqkv,
                          &e->bqkv,
                          su,
                          sv,
                          &e->qkv_uv};
    TRY(take_qkv(L, false, i, d, qkv_mode("CT_ENCODER_QKV", L->in_place ? QKV_APART : QKV_UV, true), &sa));
    TRY(take_lin(L, false, (lname){"self_attn.linear_out", "self_attn.o_proj"}, i, d, d, true,
                 &e->wo, &e->bo));
    TRY(take_lin(L, false, (lname){"self_attn.linear_pos", "self_attn.relative_k_proj"}, i, d,
                 d, false, &e->wpos, NULL));
    TRY(take_norm(L, false, (lname){"norm_conv", "norm_conv"}, i, d, &e->conv_norm_w,
                  &e->conv_norm_b));
    {
        /* pointwise convs [out, in, 1] run as matrices [in, out] */
        int64_t want1[3] = {2 * d, d, 1}, ne1[2] = {d, 2 * d};
        lname_fmt(L, name, false, (lname){"conv.pointwise_conv1", "conv.pointwise_conv1"},
                  ".weight", i);
        TRY(take(L, name, 3, want1, KIND_MATRIX, 2, ne1, 0, &e->pw1_w));
        lname_fmt(L, name, false, (lname){"conv.pointwise_conv1", "conv.pointwise_conv1"},
                  ".bias", i);
        TRY(take_vec(L, name, 2 * d, &e->pw1_b));
        int64_t want2[3] = {d, d, 1}, ne2[2] = {d, d};
        lname_fmt(L, name, false, (lname){"conv.pointwise_conv2", "conv.pointwise_conv2"},
                  ".weight", i);
        TRY(take(L, name, 3, want2, KIND_MATRIX, 2, ne2, 0, &e->pw2_w));
        lname_fmt(L, name, false, (lname){"conv.pointwise_conv2", "conv.pointwise_conv2"},
                  ".bias", i);
        TRY(take_vec(L, name, d, &e->pw2_b));
    }
    {
        /* depthwise conv [d, 1, k] -> [k, d], with the BatchNorm folded in */
        int64_t want[3] = {d, 1, m->conv_kernel}, ne[2] = {m->conv_kernel, d}, nv[1] = {d};
        const st_tensor **bn = &L->bn[i * 6];
        lname_fmt(L, name, false, (lname){"conv.depthwise_conv", "conv.depthwise_conv"},
                  ".weight", i);
        TRY(take(L, name, 3, want, KIND_DW, 2, ne, i, &e->dw_w));
        bn[0] = L->items[L->n_items - 1].src;
        lname_fmt(L, name, false, (lname){"conv.depthwise_conv", "conv.depthwise_conv"},
                  ".bias", i);
        TRY(take(L, name, 1, nv, KIND_DWB, 1, nv, i, &e->dw_b));
        bn[1] = L->items[L->n_items - 1].src;
        static const char *bn_part[4] = {".weight", ".bias", ".running_mean", ".running_var"};
        for (int k = 0; k < 4; k++) {
            lname_fmt(L, name, false, (lname){"conv.batch_norm", "conv.norm"}, bn_part[k], i);
            TRY(find_checked(L, name, 1, nv, &bn[2 + k]));
        }
    }
    TRY(take_norm(L, false, (lname){"norm_feed_forward2", "norm_feed_forward2"}, i, d,
                  &e->ff2_norm_w, &e->ff2_norm_b));
    TRY(take_lin(L, false, (lname){"feed_forward2.linear1", "feed_forward2.linear1"}, i, ff, d,
                 true, &e->ff2_w1, &e->ff2_b1));
    TRY(take_lin(L, false, (lname){"feed_forward2.linear2", "feed_forward2.linear2"}, i, d, ff,
                 true, &e->ff2_w2, &e->ff2_b2h));
    halve_last(L);
    TRY(take_norm(L, false, (lname){"norm_out", "norm_out"}, i, d, &e->out_norm_w,
                  &e->out_norm_b));
    return NULL;
}

static tg_status declare_decoder(loader *L) {
    ct_model *m = L->m;
    int64_t dd = m->dd;
    char name[MAX_NAME];
    tg_status st;
    tensor_name(m->layout, name, "encoder_decoder_proj.weight", "model.decoder.proj.weight", 0);
    TRY(take_matrix(L, name, dd, m->d, &m->proj_w));
    tensor_name(m->layout, name, "encoder_decoder_proj.bias", "model.decoder.proj.bias", 0);
    TRY(take_vec(L, name, dd, &m->proj_b));
    tensor_name(m->layout, name, "transf_decoder._embedding.token_embedding.weight",
                "model.decoder.embed_tokens.weight", 0);
    TRY(take_matrix(L, name, m->vocab, dd, &m->tok_emb));
    tensor_name(m->layout, name, "transf_decoder._embedding.position_embedding.pos_enc",
                "model.decoder.pos_emb.weight", 0);
    TRY(take_matrix(L, name, m->max_positions, dd, &m->pos_emb));
    tensor_name(m->layout, name, "transf_decoder._embedding.layer_norm.weight",
                "model.decoder.embedding_layernorm.weight", 0);
    TRY(take_vec(L, name, dd, &m->emb_norm_w));
    tensor_name(m->layout, name, "transf_decoder._embedding.layer_norm.bias",
                "model.decoder.embedding_layernorm.bias", 0);
    TRY(take_vec(L, name, dd, &m->emb_norm_b));
    for (int i = 0; i < m->n_dec_layers; i++) {
        ct_dec_layer *l = &m->dec[i];
        int64_t ff = m->dec_ff;
        TRY(take_norm(L, true, (lname){"layer_norm_1", "input_layernorm"}, i, dd, &l->ln1_w,
                      &l->ln1_b));
        /* a decoder step runs one product for the three (16 launches
         * fewer a step at 8 layers, at every batch size): packed on every
         * backend (6 MB a layer copied on a CPU at the released size) */
        const qkv_parts sa = {{{"first_sub_layer.query_net", "self_attn.q_proj"},
                               {"first_sub_layer.key_net", "self_attn.k_proj"},
                               {"first_sub_layer.value_net", "self_attn.v_proj"}},
                              {&l->sa_wq, &l->sa_wk, &l->sa_wv},
                              {&l->sa_bq, &l->sa_bk, &l->sa_bv},
                              &l->sa_wqkv,
                              &l->sa_bqkv,
                              NULL,
                              NULL,
                              NULL};
        TRY(take_qkv(L, true, i, dd, qkv_mode("CT_DECODER_QKV", QKV_PACKED, false), &sa));
        TRY(take_lin(L, true, (lname){"first_sub_layer.out_projection", "self_attn.o_proj"}, i,
                     dd, dd, true, &l->sa_wo, &l->sa_bo));
        TRY(take_norm(L, true, (lname){"layer_norm_2", "post_attention_layernorm"}, i, dd,
                      &l->ln2_w, &l->ln2_b));
        TRY(take_lin(L, true, (lname){"second_sub_layer.query_net", "encoder_attn.q_proj"}, i,
                     dd, dd, true, &l->ca_wq, &l->ca_bq));
        TRY(take_lin(L, true, (lname){"second_sub_layer.key_net", "encoder_attn.k_proj"}, i, dd,
                     dd, true, &l->ca_wk, &l->ca_bk));
        TRY(take_lin(L, true, (lname){"second_sub_layer.value_net", "encoder_attn.v_proj"}, i,
                     dd, dd, true, &l->ca_wv, &l->ca_bv));
        TRY(take_lin(L, true, (lname){"second_sub_layer.out_projection", "encoder_attn.o_proj"},
                     i, dd, dd, true, &l->ca_wo, &l->ca_bo));
        TRY(take_norm(L, true, (lname){"layer_norm_3", "final_layernorm"}, i, dd, &l->ln3_w,
                      &l->ln3_b));
        TRY(take_lin(L, true, (lname){"third_sub_layer.dense_in", "mlp.fc1"}, i, ff, dd, true,
                     &l->fc1_w, &l->fc1_b));
        TRY(take_lin(L, true, (lname){"third_sub_layer.dense_out", "mlp.fc2"}, i, dd, ff, true,
                     &l->fc2_w, &l->fc2_b));
    }
    tensor_name(m->layout, name, "transf_decoder._decoder.final_layer_norm.weight",
                "model.decoder.norm.weight", 0);
    TRY(take_vec(L, name, dd, &m->final_norm_w));
    tensor_name(m->layout, name, "transf_decoder._decoder.final_layer_norm.bias",
                "model.decoder.norm.bias", 0);
    TRY(take_vec(L, name, dd, &m->final_norm_b));
    tensor_name(m->layout, name, "log_softmax.mlp.layer0.weight", "proj_out.weight", 0);
    TRY(take_matrix(L, name, m->vocab, dd, &m->head_w));
    tensor_name(m->layout, name, "log_softmax.mlp.layer0.bias", "proj_out.bias", 0);
    TRY(take_vec(L, name, m->vocab, &m->head_b));
#undef TRY
    return NULL;
}

/* ----------------------------------------------------------- unused tensors */

/* Tensors a checkpoint carries that this model never reads (spec 6.2): the
 * NeMo featurizer's filters and window (HF ignores them too) and
 * BatchNorm's step counters. */
static bool ignorable(const char *name) {
    const char *bare = strncmp(name, "model.", 6) == 0 ? name + 6 : name;
    if (strncmp(bare, "preprocessor.", 13) == 0) return true;
    size_t n = strlen(name), k = strlen("num_batches_tracked");
    return n >= k && strcmp(name + n - k, "num_batches_tracked") == 0;
}

/* The layer index of an encoder or decoder layer tensor, or -1. */
static int layer_index(const char *name, bool *dec) {
    const char *p = strstr(name, "decoder.layers.");
    *dec = p != NULL;
    if (!p) p = strstr(name, "encoder.layers.");
    if (!p) return -1;
    p += strlen("encoder.layers."); /* same length as "decoder.layers." */
    int i = 0;
    if (*p < '0' || *p > '9') return -1;
    while (*p >= '0' && *p <= '9' && i < 1000000) i = i * 10 + (*p++ - '0');
    return *p == '.' ? i : -1;
}

/* Every tensor of the checkpoint must be one the config's model reads (or
 * an ignorable one): a tensor left over means config.json describes another
 * model, typically fewer layers than the weights hold, which would load and
 * give a different transcript without a word. */
static tg_status check_all_used(const loader *L) {
    const ct_model *m = L->m;
    int n = st_count(m->st);
    if (n == 0) return NULL;
    const st_tensor *first = st_at(m->st, 0);
    bool *used = tg_calloc((size_t)n, sizeof(bool));
    if (!used) return tg_status_new(TG_ERR_NO_MEMORY, "loading %s: out of memory", L->dir);
    for (int i = 0; i < L->n_items; i++) used[L->items[i].src - first] = true;
    for (int i = 0; i < m->n_enc_layers * 6; i++)
        if (L->bn[i]) used[L->bn[i] - first] = true;
    tg_status st = NULL;
    for (int i = 0; i < n && !st; i++) {
        const char *name = st_at(m->st, i)->name;
        if (used[i] || ignorable(name)) continue;
        bool dec;
        int layer = layer_index(name, &dec);
        int have = dec ? m->n_dec_layers : m->n_enc_layers;
        if (layer >= have)
            st = tg_status_new(TG_ERR_FORMAT,
                               "%s: the checkpoint holds %s layer %d (tensor '%s') but "
                               "config.json gives %d %s layer%s; the config does not describe "
                               "these weights",
                               L->dir, dec ? "decoder" : "encoder", layer, name, have,
                               dec ? "decoder" : "encoder", have == 1 ? "" : "s");
        else
            st = tg_status_new(TG_ERR_FORMAT,
                               "%s: tensor '%s' is not part of the model config.json "
                               "describes (%d encoder layers, %d decoder layers); is it "
                               "another model's checkpoint?",
                               L->dir, name, m->n_enc_layers, m->n_dec_layers);
    }
    tg_free(used);
    return st;
}

/* -------------------------------------------------------------- placement */

/* Converts n elements of a checkpoint tensor to f32 into dst. */
static tg_status to_f32(const st_tensor *src, float *dst, size_t n) {
    tg_type t;
    tg_status st = st_dtype_to_tg(src->dtype, &t);
    if (st) return st;
    return tg_status_wrap(tg_convert(t, src->data, TG_F32, dst, n), "tensor '%s'", src->name);
}

/* dst[i] += src[i] in F32 for n elements (src converted a block at a time). */
static tg_status add_f32(const st_tensor *src, float *dst, size_t n) {
    enum { BLOCK = 1024 };
    float tmp[BLOCK];
    tg_type t;
    tg_status st = st_dtype_to_tg(src->dtype, &t);
    size_t es = tg_type_size(t);
    for (size_t i = 0; !st && i < n; i += BLOCK) {
        size_t k = n - i < BLOCK ? n - i : BLOCK;
        st = tg_convert(t, (const uint8_t *)src->data + i * es, TG_F32, tmp, k);
        for (size_t j = 0; !st && j < k; j++) dst[i + j] += tmp[j];
    }
    return tg_status_wrap(st, "tensor '%s'", src->name);
}

/* spec 2.5: w' = w*s, b' = (b - mean)*s + beta, s = gamma/sqrt(var + 1e-5), in f32. */
static tg_status fold_bn(const loader *L, int layer, bool bias, float *dst) {
    const ct_model *m = L->m;
    const st_tensor **bn = &L->bn[layer * 6];
    size_t d = (size_t)m->d, k = (size_t)m->conv_kernel;
    float *tmp = tg_malloc(sizeof(float) * d * (4 + k));
    if (!tmp) return tg_status_new(TG_ERR_NO_MEMORY, "folding BatchNorm: out of memory");
    float *gamma = tmp, *beta = tmp + d, *mean = tmp + 2 * d, *var = tmp + 3 * d;
    float *w = tmp + 4 * d;
    tg_status st = NULL;
    for (int i = 0; i < 4 && !st; i++) st = to_f32(bn[2 + i], tmp + (size_t)i * d, d);
    if (!st) st = to_f32(bias ? bn[1] : bn[0], w, bias ? d : d * k);
    if (!st) {
        for (size_t c = 0; c < d; c++) {
            float s = gamma[c] / sqrtf(var[c] + 1e-5f);
            if (bias)
                dst[c] = (w[c] - mean[c]) * s + beta[c];
            else
                for (size_t j = 0; j < k; j++) dst[c * k + j] = w[c * k + j] * s;
        }
    }
    tg_free(tmp);
    return st;
}

/* Uses the matrices in place from the mapping (CPU backends): one host
 * buffer per checkpoint file, spanning the tensors used from it. */
static tg_status place_in_place(loader *L) {
    ct_model *m = L->m;
    int n_files = 0;
    for (int i = 0; i < L->n_items; i++)
        if (L->items[i].src->file + 1 > n_files) n_files = L->items[i].src->file + 1;
    for (int f = 0; f < n_files; f++) {
        const uint8_t *lo = NULL, *hi = NULL;
        for (int i = 0; i < L->n_items; i++) {
            const pending *p = &L->items[i];
            if (p->kind != KIND_MATRIX || p->t->view_src || p->src->file != f || !p->src->size) continue;
            if ((uintptr_t)p->src->data % tg_type_size(p->t->type)) continue; /* copied */
            if (!lo || p->src->data < lo) lo = p->src->data;
            if (!hi || p->src->data + p->src->size > hi) hi = p->src->data + p->src->size;
        }
        if (!lo) continue;
        if (!tg_grow((void **)&m->bufs, &m->cap_bufs, m->n_bufs + 1, sizeof(tg_buffer *)))
            return tg_status_new(TG_ERR_NO_MEMORY, "loading %s: out of memory", L->dir);
        tg_buffer *buf;
        tg_status st = tg_backend_buffer_from_host(m->backend, (void *)(uintptr_t)lo,
                                                   (size_t)(hi - lo), &buf);
        if (st) return tg_status_wrap(st, "mapping %s", st_file_path(m->st, f));
        m->bufs[m->n_bufs++] = buf;
        for (int i = 0; i < L->n_items; i++) {
            pending *p = &L->items[i];
            if (p->kind != KIND_MATRIX || p->t->view_src || p->src->file != f || !p->src->size) continue;
            if ((uintptr_t)p->src->data % tg_type_size(p->t->type)) continue;
            st = tg_tensor_place(p->t, buf, (size_t)(p->src->data - lo));
            if (st) return tg_status_wrap(st, "placing '%s'", p->src->name);
            m->bytes_in_place += p->src->size;
        }
    }
    return NULL;
}

/* Allocates every tensor not placed yet in one buffer of the backend and
 * fills it: converted, folded or copied in its stored type. */
static tg_status place_copies(loader *L) {
    ct_model *m = L->m;
    bool any = false;
    for (int i = 0; i < L->n_items && !any; i++) any = !L->items[i].t->data;
    if (!any) return NULL;
    if (!tg_grow((void **)&m->bufs, &m->cap_bufs, m->n_bufs + 1, sizeof(tg_buffer *)))
        return tg_status_new(TG_ERR_NO_MEMORY, "loading %s: out of memory", L->dir);
    tg_buffer *buf;
    tg_status st = tg_ctx_alloc_tensors(m->ctx, m->backend, &buf);
    if (st) return tg_status_wrap(st, "allocating weights of %s", L->dir);
    m->bufs[m->n_bufs++] = buf;

    float *scratch = NULL;
    size_t scratch_n = 0;
    for (int i = 0; i < L->n_items && !st; i++) {
        pending *p = &L->items[i];
        if (p->t->buffer != buf) continue;
        size_t n = (size_t)tg_nelements(p->t);
        if (p->kind == KIND_MATRIX) {
            /* stored type, byte for byte */
            st = tg_tensor_set(p->t, p->src->data, 0, p->src->size);
            m->bytes_copied += p->src->size;
            continue;
        }
        if (n > scratch_n) {
            tg_free(scratch);
            scratch = tg_malloc(n * sizeof(float));
            scratch_n = scratch ? n : 0;
            if (!scratch) {
                st = tg_status_new(TG_ERR_NO_MEMORY, "loading %s: out of memory", L->dir);
                break;
            }
        }
        if (p->kind == KIND_F32 || p->kind == KIND_F32_HALF) {
            st = to_f32(p->src, scratch, n);
            for (size_t k = 0; !st && p->kind == KIND_F32_HALF && k < n; k++) scratch[k] *= 0.5f;
            if (!st && p->plus) st = add_f32(p->plus, scratch, n);
        } else
            st = fold_bn(L, p->layer, p->kind == KIND_DWB, scratch);
        if (!st) st = tg_tensor_set(p->t, scratch, 0, n * sizeof(float));
        m->bytes_copied += n * sizeof(float);
        if (st) st = tg_status_wrap(st, "loading '%s'", p->src->name);
    }
    tg_free(scratch);
    return st;
}

/* ------------------------------------------------------ non-finite values */

/* Whether element i of a checkpoint tensor is NaN or infinite, told from
 * its bits (bytes, since the data may be unaligned). */
static bool elem_non_finite(st_dtype t, const uint8_t *p, size_t i) {
    if (t == ST_F32) {
        uint32_t u;
        memcpy(&u, p + 4 * i, 4);
        return (u & 0x7f800000u) == 0x7f800000u;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return t == ST_F16 ? (h & 0x7c00u) == 0x7c00u : (h & 0x7f80u) == 0x7f80u;
}

/* Samples a tensor for NaN or Inf: SAMPLE_RUNS evenly spaced runs of
 * SAMPLE_RUN consecutive elements (4096 in all, the whole tensor when it is
 * smaller). Runs, not single elements, so that a large matrix costs 16 to 32
 * pages of the mapping, not one page per sample: on a warm 4.1 GB
 * checkpoint (bench/make_full_random.py) the page faults dominate, and 64
 * runs of 64 took 25 ms where 16 of 256 take about a quarter of that. A checkpoint that is
 * all NaN (or has a NaN-filled tensor) is caught; one NaN hidden in a
 * 6-million-element matrix may not be, which the decoder's logits check
 * (decoder.c) then catches. */
#define SAMPLE_RUNS 16
#define SAMPLE_RUN 256
static tg_status sample_finite(const loader *L, const st_tensor *t) {
    size_t es = st_dtype_size(t->dtype);
    if (!es || !t->size) return NULL;
    size_t n = t->size / es;
    size_t runs = n <= SAMPLE_RUNS * SAMPLE_RUN ? 1 : SAMPLE_RUNS;
    size_t len = runs == 1 ? n : SAMPLE_RUN;
    for (size_t r = 0; r < runs; r++) {
        /* run r starts at r/(runs-1) of the way through: first and last included */
        size_t start = runs == 1 ? 0 : (size_t)((double)(n - len) * r / (runs - 1));
        for (size_t i = start; i < start + len; i++) {
            if (elem_non_finite(t->dtype, t->data, i))
                return tg_status_new(TG_ERR_FORMAT,
                                     "%s: tensor '%s' is not finite (element %zu is NaN or "
                                     "infinite); the checkpoint is corrupt, or its dtype "
                                     "label (%s) is wrong",
                                     L->dir, t->name, i, st_dtype_name(t->dtype));
        }
    }
    return NULL;
}

/* Every tensor the model reads, sampled (see sample_finite); the time it
 * took is logged at info level. */
static tg_status check_finite(const loader *L) {
    const double t0 = tg_clock_now_ms();
    tg_status st = NULL;
    for (int i = 0; i < L->n_items && !st; i++) st = sample_finite(L, L->items[i].src);
    for (int i = 0; i < L->m->n_enc_layers * 6 && !st; i++)
        if (L->bn[i]) st = sample_finite(L, L->bn[i]);
    TG_INFO("%s: %d tensors sampled for non-finite values in %.1f ms", L->dir, L->n_items, tg_clock_now_ms() - t0);
    return st;
}

/* Zeroed LayerNorm gains are the signature of a corrupt download (spec 7.1
 * item 10): warn, since the text would be garbage. */
static void warn_zero_norms(const ct_model *m) {
    for (int i = 0; i < m->n_enc_layers; i++) {
        const st_tensor *t = st_find(m->st, m->enc[i].out_norm_w->name);
        if (!t || t->dtype != ST_BF16) continue;
        size_t zeros = 0, n = t->size / 2;
        for (size_t k = 0; k < n; k++) /* bytes: the tensor may be unaligned */
            zeros += (t->data[2 * k] | t->data[2 * k + 1]) == 0;
        if (zeros == n)
            TG_WARN("encoder layer %d: norm_out weight is all zeros; the checkpoint may be corrupt",
                    i);
    }
}

tg_status ct_model_load(const char *dir, tg_backend *backend, ct_model **out_model) {
    return ct_model_load_flags(dir, backend, 0, out_model);
}

tg_status ct_model_load_flags(const char *dir, tg_backend *backend, unsigned flags,
                              ct_model **out_model) {
    if (!dir || !backend || !out_model)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_model_load: NULL argument");
    loader L = {0};
    tg_status st = NULL;
    ct_model *m = tg_calloc(1, sizeof *m);
    if (!m) return tg_status_new(TG_ERR_NO_MEMORY, "loading %s: out of memory", dir);
    L.m = m;
    L.dir = dir;
    m->backend = backend;
    m->dir = tg_strdup(dir);
    if (!m->dir) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "loading %s: out of memory", dir);
        goto fail;
    }

    if ((st = ct_config_load(dir, &m->cfg))) goto fail;
    if ((st = st_open_dir(dir, &m->st))) goto fail;
    if ((st = detect_layout(m->st, dir, &m->layout))) goto fail;
    if ((st = derive_dims(&L))) goto fail;

    m->ctx = tg_ctx_new();
    m->enc = tg_calloc((size_t)m->n_enc_layers, sizeof(ct_enc_layer));
    m->dec = tg_calloc((size_t)m->n_dec_layers, sizeof(ct_dec_layer));
    L.bn = tg_calloc((size_t)m->n_enc_layers * 6, sizeof(st_tensor *));
    if (!m->ctx || !m->enc || !m->dec || !L.bn) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "loading %s: out of memory", dir);
        goto fail;
    }
    L.in_place = tg_backend_is_cpu(backend) && !(flags & CT_LOAD_COPY);
    if ((st = declare_subsampling(&L))) goto fail;
    for (int i = 0; i < m->n_enc_layers; i++)
        if ((st = declare_enc_layer(&L, i))) goto fail;
    if ((st = declare_decoder(&L))) goto fail;
    if ((st = check_all_used(&L))) goto fail;
    if ((st = check_finite(&L))) goto fail;
    m->matrix_type = m->enc[0].wq->type;

    if (L.in_place && (st = place_in_place(&L)))
        goto fail;
    if ((st = place_copies(&L))) goto fail;
    /* what the copies and the sampling read must have come from the file */
    if ((st = ct_model_check(m))) goto fail;
    warn_zero_norms(m);
    TG_INFO("loaded %s: %s layout, %s matrices, encoder %dx%d (%d heads), decoder %dx%d "
            "(%d heads), vocab %d; %.1f MB in place, %.1f MB copied",
            dir, ct_layout_name(m->layout), tg_type_name(m->matrix_type), m->n_enc_layers,
            m->d, m->heads, m->n_dec_layers, m->dd, m->dec_heads, m->vocab,
            m->bytes_in_place / 1e6, m->bytes_copied / 1e6);
    tg_free(L.items);
    tg_free(L.bn);
    *out_model = m;
    return NULL;
fail:
    tg_free(L.items);
    tg_free(L.bn);
    ct_model_free(m);
    return st;
}

tg_status ct_model_check(const ct_model *m) {
    if (!m) return NULL;
    return tg_status_wrap(st_check(m->st), "model %s", m->dir);
}

void ct_model_free(ct_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_bufs; i++) tg_buffer_free(m->bufs[i]);
    tg_free(m->bufs);
    tg_ctx_free(m->ctx);
    st_close(m->st);
    tg_free(m->enc);
    tg_free(m->dec);
    tg_free(m->dir);
    tg_free(m);
}
