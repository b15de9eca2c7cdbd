/*
 * pipeline.c: the four stages of pipeline.h and the observer that reports
 * their outputs to the debug hook.
 *
 * The stages hand each other owned values; none keeps state between
 * batches (the feature rows' memory, which the session may lend for reuse,
 * holds nothing a later batch reads), so the session can run them in any
 * grouping. The observer cuts every row to its own length, so what the hook
 * sees does not depend on how clips were batched; it downloads from the
 * backend only what it reports.
 *
 * Not here: timing, chunking, joining (session.c).
 */
#include "pipeline.h"

#include <stdio.h>
#include <string.h>

#include "base.h"
#include "beam.h"

static tg_status oom(const char *what) {
    return tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", what);
}

/* ------------------------------------------------------------- features */

void ct_feature_batch_free(ct_feature_batch *fb) {
    if (!fb) return;
    if (!fb->rows_borrowed) {
        tg_free(fb->features);
        tg_free(fb->grid);
    }
    tg_free(fb->frames);
    memset(fb, 0, sizeof *fb);
}

void ct_row_store_free(ct_row_store *rs) {
    if (!rs) return;
    if (rs->host)
        tg_backend_host_free(rs->backend, rs->data);
    else
        tg_free(rs->data);
    rs->data = NULL;
    rs->cap = 0;
    rs->host = false;
}

/* n floats from the store, grown (its old contents dropped) when short:
 * the backend's host memory where it has some, else tg_malloc's. */
static float *row_store_get(ct_row_store *rs, size_t n) {
    if (rs->data && rs->cap >= n) return rs->data;
    ct_row_store_free(rs);
    if (rs->backend) {
        rs->data = tg_backend_host_alloc(rs->backend, n * sizeof(float));
        rs->host = rs->data != NULL;
    }
    if (!rs->data) rs->data = tg_malloc(n * sizeof(float));
    rs->cap = rs->data ? n : 0;
    return rs->data;
}

tg_status ct_pipe_features(const ct_pipe *p, const float *const *clips, const size_t *lens,
                           const int *clip_ids, int n, ct_feature_batch *out) {
    if (!p || !clips || !lens || n <= 0 || !out)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_pipe_features: bad arguments");
    memset(out, 0, sizeof *out);
    int M = p->model->n_mels;
    tg_status st = NULL;
    out->frames = tg_calloc((size_t)n * 3, sizeof(int)); /* frames, valid, clip */
    if (!out->frames) return oom("features");
    out->n_rows = n;
    out->n_mels = M;
    out->valid = out->frames + n;
    out->clip = out->frames + 2 * n;
    /* the batch's length is known from the clips' before any feature is
     * made, so the frontend writes straight into the padded batch */
    int T = 0;
    for (int i = 0; i < n; i++) {
        int f = ct_mel_frames(lens[i]);
        if (f > T) T = f;
        out->clip[i] = clip_ids ? clip_ids[i] : i;
    }
    if (p->frame_bucket > 0 && T <= INT32_MAX - p->frame_bucket)
        T = (T + p->frame_bucket - 1) / p->frame_bucket * p->frame_bucket;
    out->n_frames = T;
    /* a row: its features, or (frontend on the backend) its window grid */
    size_t row = p->frontend ? ct_mel_grid_len(T) : (size_t)M * (size_t)T;
    bool fits = T > 0 && row <= SIZE_MAX / sizeof(float) / (size_t)n;
    out->rows_borrowed = fits && p->rows;
    float *rows = !fits              ? NULL
                  : out->rows_borrowed ? row_store_get(p->rows, (size_t)n * row)
                                       : tg_malloc((size_t)n * row * sizeof(float));
    if (!rows) {
        st = oom("features");
        goto fail;
    }
    if (p->frontend) {
        out->grid = rows;
        st = ct_mel_grid_padded(p->mel, clips, lens, n, p->pool, T, rows, out->frames, out->valid);
    } else {
        out->features = rows;
        st = ct_mel_compute_padded(p->mel, clips, lens, n, p->pool, T, rows, out->frames, out->valid);
    }
    if (!st) return NULL;
fail:
    ct_feature_batch_free(out);
    return st;
}

/* ------------------------------------------------------ encode, decode */

tg_status ct_pipe_encode(const ct_pipe *p, const ct_feature_batch *fb, ct_enc_result *out) {
    if (!p || !fb || !out) return tg_status_new(TG_ERR_INVALID_ARG, "ct_pipe_encode: NULL argument");
    ct_enc_opts eo = {.f32 = p->f32, .keep_hidden = p->keep_intermediates};
    if (fb->grid)
        return ct_encoder_run_grid(p->model, p->sched, p->frontend, fb->grid, fb->n_rows,
                                   fb->n_frames, fb->valid, &eo, out);
    return ct_encoder_run(p->model, p->sched, fb->features, fb->n_rows, fb->n_frames, fb->valid,
                          &eo, out);
}

tg_status ct_pipe_decode(const ct_pipe *p, const ct_enc_result *enc, ct_greedy_result *out) {
    if (!p || !enc || !out) return tg_status_new(TG_ERR_INVALID_ARG, "ct_pipe_decode: NULL argument");
    ct_greedy_opts go = {.max_new_tokens = p->max_new_tokens,
                         .eos_id = p->eos_id,
                         .pad_id = p->pad_id,
                         .f32 = p->f32,
                         .ignore_eos = p->ignore_eos,
                         .keep_scores = p->keep_scores,
                         .keep_logits = p->keep_intermediates,
                         .stop_loops = p->stop_loops,
                         .abort = p->abort,
                         .abort_user = p->abort_user,
                         .keep = p->dec_keep};
    if (p->beams > 1)
        return ct_beam_decode(p->model, p->sched, enc, p->prompt, p->n_prompt, p->beams, &go, out);
    return ct_greedy_decode(p->model, p->sched, enc, p->prompt, p->n_prompt, &go, out);
}

/* ----------------------------------------------------------------- text */

void ct_clip_text_free(ct_clip_text *t) {
    if (!t) return;
    tg_free(t->text);
    tg_free(t->tokens);
    memset(t, 0, sizeof *t);
}

tg_status ct_pipe_text(const ct_pipe *p, const ct_greedy_result *dec, const int *clip,
                       ct_clip_text *outs) {
    if (!p || !dec || !outs) return tg_status_new(TG_ERR_INVALID_ARG, "ct_pipe_text: NULL argument");
    for (int r = 0; r < dec->n_batch; r++) {
        ct_clip_text *o = &outs[clip ? clip[r] : r];
        const int32_t *row = dec->tokens + (size_t)r * dec->n_cols;
        int n_tok = dec->n_tokens[r];
        tg_status st = ct_tokenizer_decode(p->tok, row, n_tok, &o->text);
        if (st) return st;
        /* the generated ids, without the EOS that ended the row */
        int n_gen = n_tok - p->n_prompt - (dec->finish[r] == CT_FINISH_EOS);
        if (n_gen < 0) n_gen = 0;
        o->tokens = tg_malloc((size_t)(n_gen > 0 ? n_gen : 1) * sizeof(int32_t));
        if (!o->tokens) return oom("transcribing");
        memcpy(o->tokens, row + p->n_prompt, (size_t)n_gen * sizeof(int32_t));
        o->n_tokens = n_gen;
        o->finish = dec->finish[r];
    }
    return NULL;
}

/* ------------------------------------------------------------- observer */

static void report(const ct_pipe_observer *o, int row, const char *name, tg_type type,
                   int n_dims, const int64_t *shape, const void *data) {
    o->dump(o->user, o->first_index + row, name, type, n_dims, shape, data);
}

tg_status ct_pipe_observe_features(const ct_pipe_observer *o, const ct_feature_batch *fb) {
    if (!o || !o->dump || !fb || !fb->features) return NULL;
    for (int r = 0; r < fb->n_rows; r++) {
        int64_t shape[2] = {fb->frames[r], fb->n_mels};
        report(o, r, "features", TG_F32, 2, shape,
               fb->features + (size_t)r * fb->n_frames * fb->n_mels);
    }
    return NULL;
}

tg_status ct_pipe_observe_encoded(const ct_pipe_observer *o, const ct_feature_batch *fb,
                                  const ct_enc_result *enc) {
    if (!o || !o->dump || !fb || !enc) return NULL;
    float *host = tg_malloc((size_t)enc->n_frames * enc->d * sizeof(float));
    if (!host) return oom("reporting the encoder output");
    tg_status st = NULL;
    for (int r = 0; !st && r < enc->n_batch; r++) {
        /* the row's own frames, the extra masked one of spec 2.6 included */
        int64_t shape[2] = {ct_enc_len(fb->frames[r]), enc->d};
        for (int h = 0; !st && h <= enc->n_hidden; h++) {
            const tg_tensor *t = h < enc->n_hidden ? enc->hidden[h] : enc->out;
            char name[32];
            snprintf(name, sizeof name, "encoder_hidden.%d", h);
            st = ct_enc_get_rows(enc, t, r, (int)shape[0], host);
            if (!st) report(o, r, h < enc->n_hidden ? name : "encoder_out", TG_F32, 2, shape, host);
        }
    }
    tg_free(host);
    return tg_status_wrap(st, "reporting the encoder output");
}

tg_status ct_pipe_observe_decoded(const ct_pipe_observer *o, const ct_pipe *p,
                                  const ct_greedy_result *dec) {
    if (!o || !o->dump || !p || !dec) return NULL;
    int P = p->n_prompt, V = p->model->vocab;
    for (int r = 0; r < dec->n_batch; r++) {
        int64_t pl[2] = {P, V}, sl[2] = {dec->n_steps, V}, gl[1] = {dec->n_cols};
        if (dec->prompt_logits)
            report(o, r, "prompt_logits", TG_F32, 2, pl, dec->prompt_logits + (size_t)r * P * V);
        if (dec->step_logits)
            report(o, r, "step_logits", TG_F32, 2, sl,
                   dec->step_logits + (size_t)r * dec->n_steps * V);
        report(o, r, "generated", TG_I32, 1, gl, dec->tokens + (size_t)r * dec->n_cols);
    }
    return NULL;
}
