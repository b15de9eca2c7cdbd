/*
 * frontend.c: the log-mel frontend of spec 4 as tg graph nodes, so that a
 * GPU computes a batch's features where the encoder reads them (the host's
 * frontend took 78-183 ms of a 64-clip batch on 16 cores in runs of
 * 2026-12-02, a tenth to a fifth of the whole batch).
 *
 * Input: each clip's window grid (audio.h, ct_mel_grid_padded: the
 * pre-emphasised samples placed so frame t reads grid[160 t, 160 t + 400)),
 * [L, B]. The nodes, for [T frames, B rows]:
 *   frames  = the grid's overlapping windows, copied contiguous [400, T, B]
 *   spec    = dft · frames                   [514, T, B] (re and im parts)
 *   mel     = pairs · spec²                  [T·B, 128], time innermost
 *   logmel  = log(mel + 2^-24)
 *   x       = logmel - logmel[frame 0]       (as mel.c, so a constant bin,
 *             digital silence, normalises to exact zeros)
 *   mean    = sum(x · valid) / n             per (row, bin)
 *   d       = (x - mean) · valid
 *   std     = sqrt(sum(d²) / (n - 1))
 *   out     = d / (std + 1e-5)               frames at and past n are 0
 * and a transpose to the encoder's [128, T, 1, B]. Both products ask for
 * TG_PREC_F32 (bf16 inputs would move the logs by ~1e-2); the rest is f32
 * elementwise work. mel.c computes the same in double: the two agree to
 * ~1e-5, within the fixtures' 1e-4 on features (tests/model/test_frontend.c).
 *
 * The DFT and the filter pairs are constants (ct_frontend_new uploads them
 * once per backend); the grid, the valid-frame mask and the per-row 1/n,
 * 1/(n-1) are the graph's inputs. Not here: the grid itself (audio, on the
 * host: one pass over the samples) and the choice of where the frontend
 * runs (the session).
 */
#include <string.h>

#include "base.h"
#include "layers.h"
#include "model.h"

struct ct_frontend {
    tg_ctx *ctx;
    tg_buffer *buf;
    tg_tensor *dft;   /* F32 [win, spec]: window times cos / -sin      */
    tg_tensor *pairs; /* F32 [spec, n_mels]: each filter over re² and im² */
    int n_mels, win, hop, spec;
};

void ct_frontend_free(ct_frontend *f) {
    if (!f) return;
    tg_buffer_free(f->buf);
    tg_ctx_free(f->ctx);
    tg_free(f);
}

tg_status ct_frontend_new(tg_backend *backend, int n_mels, int win, int hop, int spec,
                          const float *dft, const float *pairs, ct_frontend **out) {
    if (!backend || n_mels < 1 || win < 1 || hop < 1 || hop > win || spec < 2 || !dft || !pairs ||
        !out)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_frontend_new: bad arguments");
    *out = NULL;
    ct_frontend *f = tg_calloc(1, sizeof *f);
    if (!f || !(f->ctx = tg_ctx_new())) {
        tg_free(f);
        return tg_status_new(TG_ERR_NO_MEMORY, "the frontend's tables: out of memory");
    }
    f->n_mels = n_mels;
    f->win = win;
    f->hop = hop;
    f->spec = spec;
    f->dft = tg_set_name(tg_new_2d(f->ctx, TG_F32, win, spec), "frontend.dft");
    f->pairs = tg_set_name(tg_new_2d(f->ctx, TG_F32, spec, n_mels), "frontend.filter_pairs");
    tg_status st = tg_ctx_check(f->ctx);
    if (!st) {
        f->dft->flags |= TG_FLAG_WEIGHT;
        f->pairs->flags |= TG_FLAG_WEIGHT;
        st = tg_ctx_alloc_tensors(f->ctx, backend, &f->buf);
    }
    if (!st) st = tg_tensor_set(f->dft, dft, 0, (size_t)win * spec * sizeof(float));
    if (!st) st = tg_tensor_set(f->pairs, pairs, 0, (size_t)spec * n_mels * sizeof(float));
    if (st) {
        ct_frontend_free(f);
        return tg_status_wrap(st, "uploading the frontend's tables to %s", tg_backend_name(backend));
    }
    *out = f;
    return NULL;
}

int ct_frontend_mels(const ct_frontend *f) { return f ? f->n_mels : 0; }

tg_tensor *ct_frontend_build(const ct_frontend *f, tg_ctx *ctx, int n_frames, int n_batch,
                             ct_frontend_graph *g) {
    if (!f || !ctx || n_frames < 1 || n_batch < 1 || !g) return NULL;
    memset(g, 0, sizeof *g);
    const ct_nn nn = {ctx, true}; /* both products in f32 */
    int64_t T = n_frames, B = n_batch, L = (int64_t)f->hop * (T - 1) + f->win;
    g->n_frames = n_frames;
    g->n_batch = n_batch;
    g->grid = ct_nn_input(&nn, TG_F32, L, B, 1, 1, "frontend.grid");
    g->valid = ct_nn_input(&nn, TG_F32, T, B, 1, 1, "frontend.valid");
    g->inv_n = ct_nn_input(&nn, TG_F32, 1, B, 2, 1, "frontend.counts");
    g->consts = ct_nn_input(&nn, TG_F32, 2, 1, 1, 1, "frontend.consts");
    if (!g->grid || !g->valid || !g->inv_n || !g->consts) return NULL;
    /* counts: [1, B] of 1/n, then [1, B] of 1/(n - 1); consts: guard, eps */
    tg_tensor *inv_n = tg_view_3d(ctx, g->inv_n, 1, B, 1, g->inv_n->nb[1], g->inv_n->nb[2], 0);
    tg_tensor *inv_n1 = tg_view_3d(ctx, g->inv_n, 1, B, 1, g->inv_n->nb[1], g->inv_n->nb[2],
                                   g->inv_n->nb[2]);
    tg_tensor *guard = tg_view_1d(ctx, g->consts, 1, 0);
    tg_tensor *eps = tg_view_1d(ctx, g->consts, 1, sizeof(float));
    tg_tensor *valid = tg_reshape_3d(ctx, g->valid, T, B, 1);
    /* frame t of row b: grid[b][hop t, hop t + win), windows overlapping */
    tg_tensor *frames = tg_view_3d(ctx, g->grid, f->win, T, B, (size_t)f->hop * sizeof(float),
                                   (size_t)L * sizeof(float), 0);
    frames = tg_cont(ctx, frames);
    tg_tensor *spec = ct_nn_matmul(&nn, f->dft, frames);                /* [spec, T, B] */
    spec = tg_reshape_2d(ctx, tg_mul(ctx, spec, spec), f->spec, T * B); /* re², im² */
    tg_tensor *mel = ct_nn_matmul(&nn, spec, f->pairs);                 /* [T·B, mels] */
    tg_tensor *x = tg_ln(ctx, tg_add(ctx, tg_reshape_3d(ctx, mel, T, B, f->n_mels), guard));
    tg_tensor *first = x ? tg_view_3d(ctx, x, 1, B, f->n_mels, x->nb[1], x->nb[2], 0) : NULL;
    x = tg_sub(ctx, x, first);
    tg_tensor *mean = tg_mul(ctx, tg_sum_rows(ctx, tg_mul(ctx, x, valid)), inv_n);
    tg_tensor *d = tg_mul(ctx, tg_sub(ctx, x, mean), valid);
    tg_tensor *var = tg_mul(ctx, tg_sum_rows(ctx, tg_mul(ctx, d, d)), inv_n1);
    tg_tensor *y = tg_div(ctx, d, tg_add(ctx, tg_sqrt(ctx, var), eps)); /* [T, B, mels] */
    y = tg_cont(ctx, tg_permute(ctx, y, 1, 2, 0, 3));                  /* [mels, T, B] */
    return g->out = y ? tg_reshape_4d(ctx, y, f->n_mels, T, 1, B) : NULL;
}

tg_status ct_frontend_set(const ct_frontend_graph *g, const float *grid, const int *valid) {
    if (!g || !g->out || !grid || !valid)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_frontend_set: bad arguments");
    int T = g->n_frames, B = g->n_batch;
    for (int b = 0; b < B; b++)
        if (valid[b] < 2 || valid[b] > T)
            return tg_status_new(TG_ERR_INVALID_ARG,
                                 "frontend: row %d has %d valid frames of %d (needs 2 or more)", b,
                                 valid[b], T);
    size_t n_mask = (size_t)T * B;
    float *host = tg_malloc((n_mask > (size_t)2 * B ? n_mask : (size_t)2 * B) * sizeof *host);
    if (!host) return tg_status_new(TG_ERR_NO_MEMORY, "frontend: out of memory");
    tg_status st = tg_tensor_set(g->grid, grid, 0, tg_nbytes(g->grid));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) host[(size_t)b * T + t] = t < valid[b] ? 1.0f : 0.0f;
    if (!st) st = tg_tensor_set(g->valid, host, 0, n_mask * sizeof *host);
    for (int b = 0; b < B; b++) {
        host[b] = (float)(1.0 / valid[b]);
        host[B + b] = (float)(1.0 / (valid[b] - 1));
    }
    if (!st) st = tg_tensor_set(g->inv_n, host, 0, (size_t)2 * B * sizeof *host);
    const float consts[2] = {CT_FRONTEND_LOG_GUARD, CT_FRONTEND_NORM_EPS};
    if (!st) st = tg_tensor_set(g->consts, consts, 0, sizeof consts);
    tg_free(host);
    return tg_status_wrap(st, "setting the frontend's inputs");
}
