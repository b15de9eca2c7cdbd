/*
 * encoder.c: the FastConformer encoder of spec 2 as one tg graph per batch.
 *
 * Layout: activations are [d, T, B] (channels innermost). The subsampling
 * runs on [mel, T, C, B] images (PyTorch's W = mel, H = time), flattens
 * channel-major (c*F + f) and projects to d. Each block is the macaron
 * layout of spec 2.3 with rel-pos attention (spec 2.4): AC comes from
 * tg_attention with q + u, BD = (q + v)·(Wpos·P) is shifted and handed
 * to the attention as its additive mask (scaled, plus -inf on padded key
 * frames), exactly as HF passes it to SDPA. Where the weights are packed
 * (a GPU; weights.c) q + u, q + v, k and v come from one product, strided
 * views of its result (u and v folded into q's bias at load, so the two
 * adds a layer are gone); on a CPU q, k and v from three, then the adds.
 * Heads are strided views and the shifted BD a view of its product
 * (bd_view), read in place: no [T, T, H, B] copy. The feed-forwards' 0.5 comes before their (halved)
 * bias, so a GPU fuses the product, scale, bias and residual add.
 *
 * Padding (spec 2.6): a batch is padded to its longest clip. After every
 * subsampling conv the frames at and past a row's valid length are zeroed
 * (masks as data), keys past the valid length are masked in attention, and
 * the conv module zeroes padded steps before its depthwise conv. A stage
 * whose rows all fill its frames has no mask in the graph. Padded query
 * rows still see every valid key, so nothing produces NaN, and they never
 * reach a valid frame. The extra frame HF yields when floor(N/160) is a
 * multiple of 8 is simply one more padded frame here.
 *
 * The features come from the host (ct_encoder_run), or are made from the
 * clips' window grids by the frontend's nodes at the head of the same graph
 * (ct_encoder_run_grid, frontend.c), so on a GPU they never cross to the
 * host.
 *
 * The rel-pos table (spec 2.2) is computed on the host in fp32: device
 * sin/cos differ at sensitive tokens (spec 7.1 item 5). Each layer's
 * projection of it (Wpos P, scaled) depends on nothing a call brings but
 * the frames, so it is made with the table by a graph of its own and kept
 * with it (rel_pos_kept): 48 products a pass fewer at the released size.
 *
 * The output (and, for dumps and tests, every layer's input) is copied by
 * the graph's last nodes into tensors of a buffer of their own on the
 * model's backend, so it survives the next graph's use of the scheduler's
 * arena and the decoder reads it where it is (model.h, ct_enc_result).
 *
 * Not here: frame bucketing, the decoder's projection (decoder.c applies it).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "layers.h"
#include "model.h"

typedef struct builder {
    ct_nn nn; /* the graph's context and precision request */
    const ct_model *m;
    bool copy_heads; /* CT_ENCODER_HEADS=copy: heads and BD copied (for measuring) */
    bool bd_pairs;   /* CT_ENCODER_BD=pairs: the table of 2T+1 rows (for measuring) */
    bool sub_f32;    /* CT_ENCODER_SUB_TF32=0: the pointwise convs asked for f32 (for measuring) */
    bool pos_keep;   /* each layer's projection of the rel-pos table made once, kept (rel_pos_kept) */
} builder;

/* A conv bias [C] broadcast over [W, H, C, N]. */
static tg_tensor *conv_bias(builder *b, tg_tensor *x, tg_tensor *bias) {
    return tg_add(b->nn.ctx, x, tg_reshape_4d(b->nn.ctx, bias, 1, 1, bias->ne[0], 1));
}

/* FF(h) / 2 = (W2 silu(W1 h + b1)) / 2 + b2 / 2, the macaron's half
 * step, with b2 halved at load (b2h, weights.c). Halving is exact, so this
 * is the spec's 0.5 (W2 h' + b2) to the bit, and a GPU runs the product,
 * the scale, the bias and the residual add after it as one launch. */
static tg_tensor *half_feed_forward(builder *b, tg_tensor *x, tg_tensor *nw, tg_tensor *nb,
                                    tg_tensor *w1, tg_tensor *b1, tg_tensor *w2, tg_tensor *b2h) {
    const ct_nn *nn = &b->nn;
    tg_tensor *h = ct_nn_norm(nn, x, nw, nb);
    h = tg_silu(nn->ctx, ct_nn_linear(nn, w1, b1, h));
    return tg_add(nn->ctx, tg_scale(nn->ctx, ct_nn_matmul(nn, w2, h), 0.5f), b2h);
}

/* [hd*H, T, B] to [hd, T, H, B]: a strided view that the attention and the
 * rel-pos product read in place, or (CT_ENCODER_HEADS=copy, the graph of
 * before, for measuring) a copy. */
static tg_tensor *heads(const builder *b, tg_tensor *x) {
    return b->copy_heads ? ct_nn_split_heads(&b->nn, x, b->m->head_dim, b->m->heads)
                         : ct_nn_heads_view(&b->nn, x, b->m->head_dim, b->m->heads);
}

/* Part `part` of a packed result [n hd*H, T, B] (q, k, v, or q + u, q + v,
 * k, v) as heads(), a view or (CT_ENCODER_HEADS=copy) a copy. */
static tg_tensor *heads_of(const builder *b, tg_tensor *qkv, int part) {
    return b->copy_heads ? ct_nn_split_heads_of(&b->nn, qkv, part, b->m->head_dim, b->m->heads)
                         : ct_nn_heads_view_of(&b->nn, qkv, part, b->m->head_dim, b->m->heads);
}

/* The rel-pos table's first position and rows for T frames. The attention
 * reads BD as a view of BDraw [rows, T, H, B] with row i starting at
 * element first + i (rows - 1) (bd_view). For an even T the table starts
 * one position above the spec's (first = T instead of T - 1), and it has
 * its 2T + 1 (else 2T - 1) rows rounded up to a multiple of 8, so that
 * BDraw's columns are 16-byte aligned for cuBLASLt's stores, in F32 and
 * in BF16 (CT_CUDA_ATTN_BD16; a multiple of 4 until the ninth session); rows past the
 * view's last (first + T - 1) are computed and never read. At 35 s and
 * batch 64 (T = 438, 880 rows) that took the rel-pos product from 1.0 to
 * 0.38 ms a layer, while the attention, which then loads its mask one float
 * at a time (the view's row stride is odd), went from 1.28 to 1.50 ms: the
 * encoder 392 -> 370 ms (bench/README.md, 2026-12-04). CT_ENCODER_BD=pairs
 * (for measuring) keeps the 2T + 1 rows of before, whose view rows all
 * start 8-byte aligned for an even T (mask loads in pairs). With head
 * copies (CT_ENCODER_HEADS=copy) the spec's table. */
static int rel_pos_first(const builder *b, int T) { return !b->copy_heads && T % 2 == 0 ? T : T - 1; }
static int rel_pos_rows(const builder *b, int first, int T) {
    int rows = first == T ? 2 * T + 1 : 2 * T - 1;
    return b->copy_heads || b->bd_pairs ? rows : (rows + 7) / 8 * 8;
}

/* BD[j, i] = BDraw[first - i + j, i] for T frames: the rel shift of spec
 * 2.4 as a view ([T, T, H, B]) of BDraw [rows, T, H, B]. */
static tg_tensor *bd_view(tg_ctx *ctx, tg_tensor *raw, int first, int T) {
    if (!raw) return NULL;
    const int64_t ne[4] = {T, T, raw->ne[2], raw->ne[3]};
    const size_t nb[4] = {raw->nb[0], raw->nb[1] - raw->nb[0], raw->nb[2], raw->nb[3]};
    return tg_view(ctx, raw, 4, ne, nb, (size_t)first * raw->nb[0]);
}

/* r = Wpos P / sqrt(head_dim) for layer l, [d, R] for the table's R rows:
 * the nodes the layer's graph holds (the product and its scale, which a
 * GPU fuses as the product's alpha), and those rel_pos_project keeps. */
static tg_tensor *rel_pos_r(const ct_nn *nn, const ct_model *m, const ct_enc_layer *l, tg_tensor *pos) {
    return tg_scale(nn->ctx, ct_nn_linear(nn, l->wpos, NULL, pos), 1.0f / sqrtf((float)m->head_dim));
}

/* spec 2.4: AC = (q + u)·k from the attention itself; BD = (q + v)·r,
 * rel-shifted, scaled and masked, goes in as the attention's additive mask.
 * The scale is applied to r (the table's rows, not T per batch row), and
 * the shifted BD is a view of the product's result that the attention
 * reads in place (bd_view): no [T, T, H, B] tensor is copied or scaled
 * (with padded keys, the key mask's add still writes one). r_kept: the
 * layer's scaled r made before the graph (rel_pos_kept), or NULL to
 * project the table here. */
static tg_tensor *rel_attention(builder *b, const ct_enc_layer *l, tg_tensor *x,
                                tg_tensor *pos, tg_tensor *r_kept, tg_tensor *key_mask) {
    const ct_nn *nn = &b->nn;
    tg_ctx *ctx = nn->ctx;
    int H = b->m->heads, hd = b->m->head_dim;
    float scale = 1.0f / sqrtf((float)hd);
    tg_tensor *h = ct_nn_norm(nn, x, l->att_norm_w, l->att_norm_b);

    /* q + u, q + v, k, v: one packed product of four parts where the
     * weights are packed so (a GPU; weights.c: u and v are in its bias),
     * its parts strided views; else q, k, v (packed or three products) and
     * q + u, q + v as adds of the biases [hd, H], [d] vectors over every
     * frame */
    tg_tensor *qu, *qv, *k, *v;
    if (l->wqkv && l->qkv_uv) {
        tg_tensor *p = ct_nn_linear(nn, l->wqkv, l->bqkv, h); /* [4d, T, B] */
        qu = heads_of(b, p, 0);
        qv = heads_of(b, p, 1);
        k = heads_of(b, p, 2);
        v = heads_of(b, p, 3);
    } else {
        tg_tensor *q;
        if (l->wqkv) {
            tg_tensor *qkv = ct_nn_linear(nn, l->wqkv, l->bqkv, h); /* [3d, T, B] */
            q = ct_nn_part_of(nn, qkv, 0, (int64_t)hd * H);
            k = heads_of(b, qkv, 1);
            v = heads_of(b, qkv, 2);
        } else {
            q = ct_nn_linear(nn, l->wq, l->bq, h);
            k = heads(b, ct_nn_linear(nn, l->wk, l->bk, h));
            v = heads(b, ct_nn_linear(nn, l->wv, l->bv, h));
        }
        tg_tensor *u = tg_reshape_2d(ctx, l->pos_u, (int64_t)hd * H, 1);
        tg_tensor *vb = tg_reshape_2d(ctx, l->pos_v, (int64_t)hd * H, 1);
        qu = heads(b, tg_add(ctx, q, u));
        qv = heads(b, tg_add(ctx, q, vb));
    }

    /* r = Wpos P: [d, R] -> [hd, R, H, 1] for the table's R rows; BDraw
     * [R, T, H, B]; the shift gives BD[j, i] = BDraw[first-i+j, i] */
    tg_tensor *mask;
    if (b->copy_heads) {
        tg_tensor *bd_raw = ct_nn_matmul(nn, heads(b, ct_nn_linear(nn, l->wpos, NULL, pos)), qv);
        mask = tg_scale(ctx, tg_cont(ctx, tg_rel_shift(ctx, bd_raw)), scale);
    } else {
        int T = (int)x->ne[1];
        tg_tensor *r = r_kept ? r_kept : rel_pos_r(nn, b->m, l, pos);
        mask = bd_view(ctx, ct_nn_matmul(nn, heads(b, r), qv), rel_pos_first(b, T), T);
    }
    if (key_mask) mask = tg_add(ctx, mask, key_mask);

    tg_tensor *att = ct_nn_attention(nn, qu, k, v, mask, scale); /* [d, T, B] */
    return ct_nn_linear(nn, l->wo, l->bo, att);
}

/* spec 2.5 (BatchNorm folded into the depthwise conv at load) */
static tg_tensor *conv_module(builder *b, const ct_enc_layer *l, tg_tensor *x,
                              tg_tensor *time_mask) {
    const ct_nn *nn = &b->nn;
    tg_ctx *ctx = nn->ctx;
    tg_tensor *h = ct_nn_norm(nn, x, l->conv_norm_w, l->conv_norm_b);
    h = tg_glu(ctx, ct_nn_linear(nn, l->pw1_w, l->pw1_b, h));
    if (time_mask) h = tg_mul(ctx, h, time_mask);
    h = tg_conv_1d_dw(ctx, l->dw_w, h, 1, (b->m->conv_kernel - 1) / 2);
    h = tg_silu(ctx, tg_add(ctx, h, l->dw_b));
    return ct_nn_linear(nn, l->pw2_w, l->pw2_b, h);
}

/* spec 2.3: the macaron block */
static tg_tensor *block(builder *b, const ct_enc_layer *l, tg_tensor *x, tg_tensor *pos,
                        tg_tensor *r_kept, tg_tensor *key_mask, tg_tensor *time_mask) {
    tg_ctx *ctx = b->nn.ctx;
    x = tg_add(ctx, x, half_feed_forward(b, x, l->ff1_norm_w, l->ff1_norm_b, l->ff1_w1,
                                         l->ff1_b1, l->ff1_w2, l->ff1_b2h));
    if (!x) return NULL;
    x = tg_add(ctx, x, rel_attention(b, l, x, pos, r_kept, key_mask));
    if (!x) return NULL;
    x = tg_add(ctx, x, conv_module(b, l, x, time_mask));
    x = tg_add(ctx, x, half_feed_forward(b, x, l->ff2_norm_w, l->ff2_norm_b, l->ff2_w1,
                                         l->ff2_b1, l->ff2_w2, l->ff2_b2h));
    return ct_nn_norm(&b->nn, x, l->out_norm_w, l->out_norm_b);
}

/* spec 2.2 for positions first, first - 1, ..., first - rows + 1 (row r
 * holds p = first - r; the spec's table is first = T-1, 2T-1 rows):
 * interleaved sin/cos. */
static void rel_pos_table(float *dst, float *inv, int first, int rows, int d) {
    /* the frequencies once (d / 2 powf, not rows x d / 2), and sin and cos
     * of an angle in one call: the same floats, 6.3 -> 1.9 ms a call at 35
     * s (880 x 1280) on the development CPU, where every encoder call made
     * the table on the host */
    for (int k = 0; k < d / 2; k++) inv[k] = 1.0f / powf(10000.0f, (float)(2 * k) / (float)d);
    for (int r = 0; r < rows; r++) {
        float p = (float)(first - r);
        for (int k = 0; k < d / 2; k++) {
            float s, c;
            sincosf(p * inv[k], &s, &c);
            dst[(size_t)r * d + 2 * k] = s;
            dst[(size_t)r * d + 2 * k + 1] = c;
        }
    }
}

/* 1 for t < len[b], else 0: [T][B] as [1, T, 1, B]. */
static void fill_mask(float *dst, int T, int B, const int *len) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) dst[(size_t)b * T + t] = t < len[b] ? 1.0f : 0.0f;
}

/* Frees r's outputs and zeroes them; the rel-pos table, which depends on
 * the frames alone, stays. */
static void free_outputs(ct_enc_result *r) {
    tg_free(r->valid);
    tg_free(r->hidden);
    tg_buffer_free(r->buf);
    tg_ctx_free(r->ctx);
    *r = (ct_enc_result){.pos_ctx = r->pos_ctx, .pos_buf = r->pos_buf, .pos = r->pos,
                         .pos_first = r->pos_first, .pos_rows = r->pos_rows, .pos_r = r->pos_r,
                         .pos_f32 = r->pos_f32};
}

/* Frees the rel-pos table and its projections and zeroes their fields. */
static void free_pos(ct_enc_result *r) {
    tg_free(r->pos_r);
    tg_buffer_free(r->pos_buf);
    tg_ctx_free(r->pos_ctx);
    r->pos_r = NULL;
    r->pos_buf = NULL;
    r->pos_ctx = NULL;
    r->pos = NULL;
    r->pos_first = r->pos_rows = 0;
    r->pos_f32 = false;
}

void ct_enc_result_free(ct_enc_result *r) {
    if (!r) return;
    free_outputs(r);
    free_pos(r);
    memset(r, 0, sizeof *r);
}

/* Each layer's scaled projection of out->pos into out->pos_r, by a graph
 * of its own: rel_pos_r's nodes, copied out, so the values are those the
 * layer made for itself every call. */
static tg_status rel_pos_project(const ct_model *m, tg_sched *sched, bool f32, ct_enc_result *out) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = ctx ? tg_graph_new(ctx) : NULL;
    tg_status st = g ? tg_ctx_check(ctx) : tg_status_new(TG_ERR_NO_MEMORY, "out of memory");
    const ct_nn nn = {ctx, f32};
    for (int i = 0; !st && i < m->n_enc_layers; i++)
        st = tg_graph_build(g, tg_cpy(ctx, rel_pos_r(&nn, m, &m->enc[i], out->pos), out->pos_r[i]));
    if (!st) st = tg_sched_alloc(sched, g);
    if (!st) st = tg_sched_compute(sched, g);
    if (!st) st = ct_model_check(m); /* weights read in place may have faulted */
    tg_ctx_free(ctx);
    return st;
}

/* The rel-pos table of positions first down to first - rows + 1 in
 * out->pos, and with keep each layer's scaled projection of it in
 * out->pos_r: kept from the call before when it had the same, else made
 * (the table on the host, uploaded into a buffer of its own: 6.3 ms a call
 * at 35 s on the development CPU before the table was made faster, 1.9
 * after, plus a 4.5 MB upload, on every call; the projections, 48 products
 * of 880 x 1280 x 1280 at 35 s, on the model's backend). */
static tg_status rel_pos_kept(const ct_model *m, tg_sched *sched, int first, int rows, bool keep, bool f32,
                              ct_enc_result *out) {
    const int d = m->d, L = m->n_enc_layers;
    if (out->pos && out->pos_first == first && out->pos_rows == rows && out->pos->ne[0] == d &&
        tg_buffer_backend(out->pos_buf) == m->backend && (!keep || (out->pos_r && out->pos_f32 == f32)))
        return NULL;
    free_pos(out);
    tg_ctx *ctx = tg_ctx_new();
    tg_buffer *buf = NULL;
    float *host = tg_malloc(((size_t)rows * d + (size_t)d / 2) * sizeof(float));
    tg_tensor **pr = keep ? tg_calloc((size_t)L, sizeof *pr) : NULL;
    tg_tensor *pos = ctx ? tg_set_name(tg_new_2d(ctx, TG_F32, d, rows), "rel_pos") : NULL;
    for (int i = 0; pr && ctx && i < L; i++) pr[i] = tg_set_name(tg_new_2d(ctx, TG_F32, d, rows), "rel_pos_r.%d", i);
    tg_status st = !ctx || !host || (keep && !pr) ? tg_status_new(TG_ERR_NO_MEMORY, "out of memory") : tg_ctx_check(ctx);
    if (!st) st = tg_ctx_alloc_tensors(ctx, m->backend, &buf);
    if (!st) {
        rel_pos_table(host, host + (size_t)rows * d, first, rows, d);
        st = tg_tensor_set(pos, host, 0, (size_t)rows * d * sizeof(float));
    }
    tg_free(host);
    out->pos_ctx = ctx;
    out->pos_buf = buf;
    out->pos = pos;
    out->pos_first = first;
    out->pos_rows = rows;
    out->pos_r = pr;
    out->pos_f32 = f32;
    if (!st && keep) st = tg_status_wrap(rel_pos_project(m, sched, f32, out), "the table's projections");
    if (st) {
        free_pos(out);
        return tg_status_wrap(st, "encoder: the rel-pos table");
    }
    return NULL;
}

tg_status ct_enc_get_rows(const ct_enc_result *r, const tg_tensor *t, int row, int n_frames,
                          float *dst) {
    if (!r || !t || !dst || row < 0 || row >= r->n_batch || n_frames < 0 ||
        n_frames > r->n_frames)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_enc_get_rows: bad arguments");
    size_t frame = (size_t)r->d * sizeof(float);
    return tg_tensor_get(t, dst, (size_t)row * r->n_frames * frame, (size_t)n_frames * frame);
}

/* The result's tensors, [d, T, B] F32 each, in one buffer of the model's
 * backend of their own: the scheduler's arena is replanned by the next
 * graph, this buffer is not. An earlier result of the same shapes keeps
 * its buffer, so a repeated batch shape writes the same addresses and a
 * GPU backend can replay the encoder's captured graph as is. */
static tg_status alloc_result(const ct_model *m, int B, int T, bool keep_hidden,
                              ct_enc_result *out) {
    int n_hidden = keep_hidden ? m->n_enc_layers + 1 : 0;
    if (out->buf && tg_buffer_backend(out->buf) == m->backend && out->n_batch == B &&
        out->n_frames == T && out->d == m->d && out->n_hidden == n_hidden)
        return NULL;
    free_outputs(out); /* the rel-pos table outlives the rest */
    out->valid = tg_calloc((size_t)B, sizeof(int));
    out->n_batch = B;
    out->n_frames = T;
    out->d = m->d;
    out->n_hidden = keep_hidden ? m->n_enc_layers + 1 : 0;
    out->ctx = tg_ctx_new();
    if (keep_hidden) out->hidden = tg_calloc((size_t)out->n_hidden, sizeof(tg_tensor *));
    if (!out->valid || !out->ctx || (keep_hidden && !out->hidden))
        return tg_status_new(TG_ERR_NO_MEMORY, "encoder: out of memory");
    out->out = tg_set_name(tg_new_3d(out->ctx, TG_F32, m->d, T, B), "encoder_out");
    for (int i = 0; i < out->n_hidden; i++)
        out->hidden[i] =
            tg_set_name(tg_new_3d(out->ctx, TG_F32, m->d, T, B), "encoder_hidden.%d", i);
    tg_status st = tg_ctx_check(out->ctx);
    if (!st) st = tg_ctx_alloc_tensors(out->ctx, m->backend, &out->buf);
    return tg_status_wrap(st, "encoder: the output's buffer");
}

/* The subsampling's pointwise (1x1) conv. Its sums may take tf32 inputs
 * (a GPU's tensor cores; the CPU keeps f32) where the graph's products may
 * take bf16 ones: they are 256 long, and transformers runs them in the
 * model's bf16. On an H100 cuBLASLt's f32 product for them is a SIMT sgemm. */
static tg_tensor *pointwise(builder *b, tg_tensor *w, tg_tensor *x) {
    tg_tensor *y = tg_conv_2d(b->nn.ctx, w, x, 1, 1, 0, 0);
    return b->nn.f32 || b->sub_f32 ? y : tg_set_prec(y, TG_PREC_TF32);
}

/* x * mask, or x when there is no mask (a batch without padding). */
static tg_tensor *masked(builder *b, tg_tensor *x, tg_tensor *mask) {
    return mask ? tg_mul(b->nn.ctx, x, mask) : x;
}

/* spec 2.1: [mel, T0, 1, B] features to [d, T3, B]; m1..m3 zero the frames
 * past each row's length after every conv (NULL: no row has any). */
static tg_tensor *subsampling(builder *b, tg_tensor *feat, tg_tensor *m1, tg_tensor *m2,
                              tg_tensor *m3) {
    const ct_model *m = b->m;
    tg_ctx *ctx = b->nn.ctx;
    tg_tensor *x = tg_conv_2d(ctx, m->sub_w[0], feat, 2, 2, 1, 1);
    x = tg_relu(ctx, masked(b, conv_bias(b, x, m->sub_b[0]), m1));
    x = tg_conv_2d_dw(ctx, m->sub_w[1], x, 2, 2, 1, 1);
    x = masked(b, conv_bias(b, x, m->sub_b[1]), m2);
    x = pointwise(b, m->sub_w[2], x);
    x = tg_relu(ctx, masked(b, conv_bias(b, x, m->sub_b[2]), m2));
    x = tg_conv_2d_dw(ctx, m->sub_w[3], x, 2, 2, 1, 1);
    x = masked(b, conv_bias(b, x, m->sub_b[3]), m3);
    x = pointwise(b, m->sub_w[4], x);
    x = tg_relu(ctx, masked(b, conv_bias(b, x, m->sub_b[4]), m3));
    if (!x) return NULL;
    /* [F, T3, C, B] -> [F, C, T3, B] -> [C*F, T3, B] (index c*F + f) */
    int64_t T3 = x->ne[1], B = x->ne[3];
    x = tg_cont(ctx, tg_permute(ctx, x, 0, 2, 1, 3));
    x = tg_reshape_3d(ctx, x, (int64_t)m->sub_freq * m->sub_channels, T3, B);
    return ct_nn_linear(&b->nn, m->sub_out_w, m->sub_out_b, x);
}

/* A view of batch rows [b0, b0 + n) of x (dim 3), NULL for NULL. */
static tg_tensor *rows_of(tg_ctx *ctx, tg_tensor *x, int64_t b0, int64_t n) {
    if (!x) return NULL;
    const int64_t ne[4] = {x->ne[0], x->ne[1], x->ne[2], n};
    return tg_view(ctx, x, 4, ne, x->nb, (size_t)b0 * x->nb[3]);
}

/* Batch rows per subsampling chunk, and the most chunks. */
enum { SUB_ROWS = 8, SUB_MAX_PARTS = 64 };

/* The subsampling a chunk of batch rows at a time, the chunks' results
 * joined along the batch (a tree of concats). Its first conv's output is
 * the encoder's largest tensor (115 MB per 35 s row, 7.3 GB at batch 64,
 * and the bias, mask and relu after it each make another), so chunks bound
 * what is alive at once; rows are independent, so no value changes. */
static tg_tensor *subsample_batch(builder *b, tg_tensor *feat, tg_tensor *m1, tg_tensor *m2,
                                  tg_tensor *m3) {
    tg_ctx *ctx = b->nn.ctx;
    int64_t B = feat->ne[3];
    int64_t rows = SUB_ROWS;
    if ((B + rows - 1) / rows > SUB_MAX_PARTS) rows = (B + SUB_MAX_PARTS - 1) / SUB_MAX_PARTS;
    if (B <= rows) return subsampling(b, feat, m1, m2, m3);
    tg_tensor *part[SUB_MAX_PARTS];
    int n = 0;
    for (int64_t b0 = 0; b0 < B; b0 += rows) {
        int64_t k = B - b0 < rows ? B - b0 : rows;
        part[n++] = subsampling(b, rows_of(ctx, feat, b0, k), rows_of(ctx, m1, b0, k),
                                rows_of(ctx, m2, b0, k), rows_of(ctx, m3, b0, k));
    }
    while (n > 1) {
        int joined = 0;
        for (int i = 0; i + 1 < n; i += 2) part[joined++] = tg_concat(ctx, part[i], part[i + 1], 2);
        if (n % 2) part[joined++] = part[n - 1];
        n = joined;
    }
    return part[0];
}

/* The batch's input: features on the host, or window grids and the
 * frontend that turns them into features in the encoder's graph. */
typedef struct enc_input {
    const float *features;
    const float *grid;
    const ct_frontend *fe;
} enc_input;

static tg_status encoder_run(const ct_model *m, tg_sched *sched, const enc_input *in,
                             int n_batch, int n_frames, const int *valid_frames,
                             const ct_enc_opts *opts, ct_enc_result *out) {
    ct_enc_opts o = opts ? *opts : (ct_enc_opts){0};
    const double t0 = tg_clock_now_ms();
    int B = n_batch, T0 = n_frames;
    int T1 = ct_sub_len(T0), T2 = ct_sub_len(T1), T3 = ct_sub_len(T2);
    int *l1 = NULL, *l2 = NULL, *l3 = NULL;
    float *host = NULL;
    tg_status st = NULL;
    tg_ctx *ctx = NULL;
    for (int b = 0; b < B; b++) {
        if (valid_frames[b] <= 0 || valid_frames[b] > T0) {
            st = tg_status_new(TG_ERR_INVALID_ARG,
                               "encoder: row %d has %d valid frames of %d (needs at least 1)", b,
                               valid_frames[b], T0);
            goto fail;
        }
    }
    if ((st = alloc_result(m, B, T3, o.keep_hidden, out))) goto fail;
    ctx = tg_ctx_new();
    l1 = tg_calloc((size_t)B * 3, sizeof(int));
    if (!ctx || !l1) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "encoder: out of memory");
        goto fail;
    }
    l2 = l1 + B;
    l3 = l2 + B;
    for (int b = 0; b < B; b++) {
        l1[b] = ct_sub_len(valid_frames[b]);
        l2[b] = ct_sub_len(l1[b]);
        l3[b] = ct_sub_len(l2[b]);
        out->valid[b] = l3[b];
    }

    const char *heads_env = getenv("CT_ENCODER_HEADS");
    const char *bd_env = getenv("CT_ENCODER_BD");
    const char *tf32_env = getenv("CT_ENCODER_SUB_TF32");
    const char *keep_env = getenv("CT_ENCODER_POS_KEEP");
    const bool copy_heads = heads_env && !strcmp(heads_env, "copy");
    builder bl = {{ctx, o.f32}, m, copy_heads, bd_env && !strcmp(bd_env, "pairs"), tf32_env && !strcmp(tf32_env, "0"),
                  !copy_heads && !(keep_env && !strcmp(keep_env, "0"))};
    const ct_nn *nn = &bl.nn;
    ct_frontend_graph fg;
    tg_tensor *feat = in->fe ? ct_frontend_build(in->fe, ctx, T0, B, &fg)
                             : ct_nn_input(nn, TG_F32, m->n_mels, T0, 1, B, "features");
    /* A mask whose rows all fill its frames is all ones (or, for keys,
     * zeros): the graph leaves it out, which changes no value, and saves a
     * pass over the largest tensors (the first conv's output is 7.3 GB at
     * batch 64). Each stage is decided alone: a 35 s clip has 3501 frames
     * of which 3500 are valid, so its first two convs need masks and
     * nothing after them does (both lengths come to 438 frames). */
    bool pad1 = false, pad2 = false, pad3 = false;
    for (int b = 0; b < B; b++) {
        pad1 = pad1 || l1[b] != T1;
        pad2 = pad2 || l2[b] != T2;
        pad3 = pad3 || l3[b] != T3;
    }
    tg_tensor *m1 = NULL, *m2 = NULL, *m3 = NULL, *kmask = NULL, *tmask = NULL;
    if (pad1) m1 = ct_nn_input(nn, TG_F32, 1, T1, 1, B, "mask1");
    if (pad2) m2 = ct_nn_input(nn, TG_F32, 1, T2, 1, B, "mask2");
    if (pad3) {
        m3 = ct_nn_input(nn, TG_F32, 1, T3, 1, B, "mask3");
        kmask = ct_nn_input(nn, TG_F32, T3, 1, 1, B, "key_mask");
    }
    const int pos_first = rel_pos_first(&bl, T3), pos_rows = rel_pos_rows(&bl, pos_first, T3);
    if ((st = rel_pos_kept(m, sched, pos_first, pos_rows, bl.pos_keep, o.f32, out))) goto fail;
    tg_graph *g = tg_graph_new(ctx);
    if ((st = tg_ctx_check(ctx))) goto fail;
    if (!g) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "encoder: out of memory");
        goto fail;
    }
    tg_tensor *pos2 = out->pos;
    if (pad3) tmask = tg_reshape_3d(ctx, m3, 1, T3, B);

    /* the graph ends in copies into the result's own buffer; the hidden
     * states are copied out only when asked for */
    tg_tensor *x = subsample_batch(&bl, feat, m1, m2, m3);
    if (out->n_hidden) st = tg_graph_build(g, tg_cpy(ctx, x, out->hidden[0]));
    for (int i = 0; !st && i < m->n_enc_layers; i++) {
        x = block(&bl, &m->enc[i], x, pos2, bl.pos_keep ? out->pos_r[i] : NULL, kmask, tmask);
        if (out->n_hidden) st = tg_graph_build(g, tg_cpy(ctx, x, out->hidden[i + 1]));
    }
    if (!st) st = tg_graph_build(g, tg_cpy(ctx, x, out->out));
    if (!st) st = tg_sched_alloc(sched, g);
    if (st) {
        st = tg_status_wrap(st, "building the encoder graph");
        goto fail;
    }

    /* inputs */
    const double t1 = tg_clock_now_ms();
    size_t n_host = (size_t)T1 * B;
    host = tg_malloc(n_host * sizeof(float));
    if (!host) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "encoder: out of memory");
        goto fail;
    }
    st = in->fe ? ct_frontend_set(&fg, in->grid, valid_frames)
                : tg_tensor_set(feat, in->features, 0, (size_t)B * T0 * m->n_mels * sizeof(float));
    if (pad1) {
        fill_mask(host, T1, B, l1);
        if (!st) st = tg_tensor_set(m1, host, 0, (size_t)T1 * B * sizeof(float));
    }
    if (pad2) {
        fill_mask(host, T2, B, l2);
        if (!st) st = tg_tensor_set(m2, host, 0, (size_t)T2 * B * sizeof(float));
    }
    if (pad3) {
        fill_mask(host, T3, B, l3);
        if (!st) st = tg_tensor_set(m3, host, 0, (size_t)T3 * B * sizeof(float));
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T3; t++) host[(size_t)b * T3 + t] = t < l3[b] ? 0.0f : -INFINITY;
        if (!st) st = tg_tensor_set(kmask, host, 0, (size_t)T3 * B * sizeof(float));
    }
    const double t2 = tg_clock_now_ms();
    if (!st) st = tg_sched_compute(sched, g);
    /* where a call's host time goes (CT_LOG=debug): the graph and its
     * memory plan (and the rel-pos table when it changed), the inputs
     * (masks) and their upload, the compute to its end */
    TG_DEBUG("encoder: %d x %d frames: graph %.2f ms, inputs %.2f ms, compute %.2f ms", B, T0, t1 - t0, t2 - t1,
             tg_clock_now_ms() - t2);
    if (!st) st = ct_model_check(m); /* weights read in place may have faulted */
    if (st) {
        st = tg_status_wrap(st, "running the encoder");
        goto fail;
    }
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

tg_status ct_encoder_run(const ct_model *m, tg_sched *sched, const float *features,
                         int n_batch, int n_frames, const int *valid_frames,
                         const ct_enc_opts *opts, ct_enc_result *out) {
    if (!m || !sched || !features || n_batch <= 0 || n_frames <= 0 || !valid_frames || !out)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_encoder_run: bad arguments");
    const enc_input in = {.features = features};
    return encoder_run(m, sched, &in, n_batch, n_frames, valid_frames, opts, out);
}

tg_status ct_encoder_run_grid(const ct_model *m, tg_sched *sched, const ct_frontend *fe,
                              const float *grid, int n_batch, int n_frames,
                              const int *valid_frames, const ct_enc_opts *opts,
                              ct_enc_result *out) {
    if (!m || !sched || !fe || !grid || n_batch <= 0 || n_frames <= 0 || !valid_frames || !out)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_encoder_run_grid: bad arguments");
    if (ct_frontend_mels(fe) != m->n_mels)
        return tg_status_new(TG_ERR_INVALID_ARG, "encoder: the frontend makes %d mel bins, the model "
                             "reads %d", ct_frontend_mels(fe), m->n_mels);
    const enc_input in = {.grid = grid, .fe = fe};
    return encoder_run(m, sched, &in, n_batch, n_frames, valid_frames, opts, out);
}
