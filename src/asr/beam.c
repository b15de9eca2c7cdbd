/*
 * beam.c: beam search over the decoder (see beam.h).
 *
 * The decoder runs n_clips * K rows (row j * n_clips + b is clip b's beam
 * j; ct_dec_opts.rows_per_clip), all fed the prompt, as HF expands its
 * input. Each step brings every row's logits to the host, where the search
 * runs: a log-softmax per row, the best 2K continuations of each clip, the
 * finished hypotheses and the next K beams. The decoder is then told each
 * new beam's parent row (ct_decoder_set_parents), whose self-attention
 * cache the next step copies, and fed each beam's new token.
 *
 * Where HF's code is followed to the letter, so that the two choose the same
 * hypotheses: scores are float sums of float log-probabilities; beam 0
 * starts at 0 and the others at -1e9, so the first step expands one beam;
 * only the best K of the 2K candidates may finish, and a finished one is
 * scored by its sum over its generated tokens (end-of-text included) to the
 * power length_penalty = 1; a running beam that ended is carried on at
 * -1e9 when fewer than K did not end; a clip stops taking finished
 * hypotheses once its best running beam over its present length cannot beat
 * the worst of K finished (early_stopping False's heuristic). Ties between
 * equal scores go to the lower beam, then the lower token id.
 *
 * Costs: the logits of every row cross to the host each step (K * vocab
 * floats a clip), and the search is host work; a clip that is done keeps
 * its rows in the batch (fed a pad, their output ignored) until every clip
 * is done. Not here: sampling, length penalties other than 1, several
 * returned sequences, a search on the device.
 */
#include "beam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define NEG_INF_SCORE -1.0e9f /* HF's stand-in for minus infinity */

/* Hypotheses of every clip, K slots a clip (slot c * K + j): tokens after
 * the prompt and their log-probabilities. */
typedef struct hyps {
    int32_t *tok;   /* [n_clips * K][max_new] */
    float *lp;      /* [n_clips * K][max_new] each token's log-probability */
    float *score;   /* [n_clips * K] */
    int *len;       /* [n_clips * K] tokens in tok */
} hyps;

typedef struct search {
    int C, K, V, P, max_new, eos;
    bool ignore_eos;
    hyps run, next, fin;
    int *n_fin;        /* [C] finished slots filled (sorted best first) */
    bool *open;        /* [C] HF's is_early_stop_heuristic_unsatisfied  */
    float *cand_score; /* [2K] one clip's best continuations, best first */
    int *cand_beam, *cand_tok;
    float *lse, *rmax; /* [K] a clip's rows' log-sum-exp (less the max) and max */
} search;

static bool hyps_alloc(hyps *h, int n, int max_new) {
    h->tok = tg_malloc((size_t)n * max_new * sizeof(int32_t));
    h->lp = tg_malloc((size_t)n * max_new * sizeof(float));
    h->score = tg_malloc((size_t)n * sizeof(float));
    h->len = tg_calloc((size_t)n, sizeof(int));
    return h->tok && h->lp && h->score && h->len;
}

static void hyps_free(hyps *h) {
    tg_free(h->tok);
    tg_free(h->lp);
    tg_free(h->score);
    tg_free(h->len);
}

/* Slot d of `to` becomes slot s of `from` followed by token tok (log-prob
 * lp; tok < 0: nothing follows). */
static void hyp_extend(const search *S, const hyps *from, int s, hyps *to, int d, int tok, float lp) {
    int n = from->len[s];
    memmove(to->tok + (size_t)d * S->max_new, from->tok + (size_t)s * S->max_new, (size_t)n * sizeof(int32_t));
    memmove(to->lp + (size_t)d * S->max_new, from->lp + (size_t)s * S->max_new, (size_t)n * sizeof(float));
    if (tok >= 0) {
        to->tok[(size_t)d * S->max_new + n] = tok;
        to->lp[(size_t)d * S->max_new + n] = lp;
        n++;
    }
    to->len[d] = n;
}

static void search_free(search *S) {
    hyps_free(&S->run);
    hyps_free(&S->next);
    hyps_free(&S->fin);
    tg_free(S->n_fin);
    tg_free(S->open);
    tg_free(S->cand_score);
    tg_free(S->cand_beam);
    tg_free(S->cand_tok);
    tg_free(S->lse);
    tg_free(S->rmax);
}

static bool search_alloc(search *S) {
    int n = S->C * S->K, k2 = 2 * S->K;
    bool ok = hyps_alloc(&S->run, n, S->max_new) && hyps_alloc(&S->next, n, S->max_new) &&
              hyps_alloc(&S->fin, n, S->max_new);
    S->n_fin = tg_calloc((size_t)S->C, sizeof(int));
    S->open = tg_malloc((size_t)S->C * sizeof(bool));
    S->cand_score = tg_malloc((size_t)k2 * sizeof(float));
    S->cand_beam = tg_malloc((size_t)k2 * sizeof(int));
    S->cand_tok = tg_malloc((size_t)k2 * sizeof(int));
    S->lse = tg_malloc((size_t)S->K * sizeof(float));
    S->rmax = tg_malloc((size_t)S->K * sizeof(float));
    if (!ok || !S->n_fin || !S->open || !S->cand_score || !S->cand_beam || !S->cand_tok || !S->lse || !S->rmax)
        return false;
    for (int i = 0; i < n; i++) S->run.score[i] = i % S->K ? NEG_INF_SCORE : 0.0f;
    for (int c = 0; c < S->C; c++) S->open[c] = true;
    return true;
}

/* A row's maximum and log(sum(exp(x - max))): log_softmax(x)[v] is then
 * (x[v] - max) - lse, in float and in that order, as torch computes it
 * (the sum is taken in double, closer to exact than torch's float). */
static float row_lse(const float *x, int V, float *out_max) {
    float mx = x[0];
    for (int v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
    double sum = 0;
    for (int v = 0; v < V; v++) sum += exp((double)(x[v] - mx));
    *out_max = mx;
    return (float)log(sum);
}

/* log_softmax of token tok of clip c's beam j (after top_continuations). */
static float token_lp(const search *S, const float *logits, int c, int j, int tok) {
    return (logits[(size_t)(j * S->C + c) * S->V + tok] - S->rmax[j]) - S->lse[j];
}

/* Clip c's best 2K continuations into cand_* (best first). logits: the
 * step's [rows][V]. */
static void top_continuations(search *S, const float *logits, int c) {
    int K = S->K, V = S->V, k2 = 2 * K, n = 0;
    for (int j = 0; j < K; j++) {
        const float *row = logits + (size_t)(j * S->C + c) * V;
        float base = S->run.score[c * K + j], mx, lse = row_lse(row, V, &mx);
        S->lse[j] = lse;
        S->rmax[j] = mx;
        for (int v = 0; v < V; v++) {
            float sc = base + ((row[v] - mx) - lse);
            if (n == k2 && sc <= S->cand_score[k2 - 1]) continue;
            int i = n < k2 ? n++ : k2 - 1; /* insert, dropping the worst when full */
            while (i > 0 && S->cand_score[i - 1] < sc) {
                S->cand_score[i] = S->cand_score[i - 1];
                S->cand_beam[i] = S->cand_beam[i - 1];
                S->cand_tok[i] = S->cand_tok[i - 1];
                i--;
            }
            S->cand_score[i] = sc;
            S->cand_beam[i] = j;
            S->cand_tok[i] = v;
        }
    }
}

/* Finished hypothesis (score, parent beam j of clip c, last token tok)
 * into clip c's sorted slots, when it is among the best K. */
static void add_finished(search *S, const float *logits, int c, float score, int j, int tok) {
    int K = S->K, base = c * K, n = S->n_fin[c];
    if (n == K && score <= S->fin.score[base + K - 1]) return;
    int i = n < K ? n++ : K - 1;
    while (i > 0 && S->fin.score[base + i - 1] < score) {
        hyp_extend(S, &S->fin, base + i - 1, &S->fin, base + i, -1, 0);
        S->fin.score[base + i] = S->fin.score[base + i - 1];
        i--;
    }
    hyp_extend(S, &S->run, base + j, &S->fin, base + i, tok, token_lp(S, logits, c, j, tok));
    S->fin.score[base + i] = score;
    S->n_fin[c] = n;
}

/* One step of clip c, after its n-th token (0-based) was scored in logits:
 * finishes, chooses the next K beams (parents and feed, in rows) and
 * updates whether the clip stays open. */
static void step_clip(search *S, const float *logits, int c, int n, int32_t *parents, int32_t *feed) {
    int K = S->K, k2 = 2 * K;
    top_continuations(S, logits, c);
    bool last = n + 1 >= S->max_new;
    bool hit[2 * CT_MAX_BEAMS];
    for (int i = 0; i < k2; i++) hit[i] = last || (S->cand_tok[i] == S->eos && !S->ignore_eos);
    /* only the best K may finish, scored over their generated length */
    for (int i = 0; i < K; i++)
        if (hit[i]) add_finished(S, logits, c, S->cand_score[i] / (float)(n + 1), S->cand_beam[i], S->cand_tok[i]);
    /* the next beams: those that did not end, best first, then (at -1e9)
     * those that did */
    int d = 0;
    for (int pass = 0; pass < 2 && d < K; pass++)
        for (int i = 0; i < k2 && d < K; i++) {
            if (hit[i] != (pass == 1)) continue;
            int j = S->cand_beam[i], tok = S->cand_tok[i];
            hyp_extend(S, &S->run, c * K + j, &S->next, c * K + d, tok, token_lp(S, logits, c, j, tok));
            S->next.score[c * K + d] = S->cand_score[i] + (hit[i] ? NEG_INF_SCORE : 0.0f);
            parents[d * S->C + c] = j * S->C + c;
            feed[d * S->C + c] = tok;
            d++;
        }
    /* early_stopping False: stop when the best running beam, over its
     * present length, cannot beat the worst finished one */
    float best = S->next.score[c * K] / (float)(n + 1);
    S->open[c] = S->n_fin[c] < K || best > S->fin.score[c * K + K - 1];
}

/* The result rows from each clip's best finished hypothesis. */
static tg_status fill_result(const search *S, const int32_t *prompt, const ct_greedy_opts *opts,
                             ct_greedy_result *out) {
    int C = S->C, K = S->K, P = S->P, n_max = 0;
    /* every clip has a finished hypothesis: the last step finishes the best
     * K, and a clip closes only with K finished */
    const hyps *h = &S->fin;
    for (int c = 0; c < C; c++) {
        int len = h->len[c * K];
        n_max = len > n_max ? len : n_max;
    }
    int cols = P + n_max;
    out->n_batch = C;
    out->n_cols = cols;
    out->n_steps = n_max;
    out->tokens = tg_malloc((size_t)C * cols * sizeof(int32_t));
    out->n_tokens = tg_calloc((size_t)C, sizeof(int));
    out->finish = tg_calloc((size_t)C, sizeof(ct_finish));
    if (opts->keep_scores) out->scores = tg_calloc((size_t)C * (n_max ? n_max : 1), sizeof(float));
    if (!out->tokens || !out->n_tokens || !out->finish || (opts->keep_scores && !out->scores))
        return tg_status_new(TG_ERR_NO_MEMORY, "beam search: out of memory (fewer beams need less)");
    for (int c = 0; c < C; c++) {
        int slot = c * K, len = h->len[slot];
        const int32_t *gen = h->tok + (size_t)slot * S->max_new;
        int32_t *row = out->tokens + (size_t)c * cols;
        memcpy(row, prompt, (size_t)P * sizeof(int32_t));
        memcpy(row + P, gen, (size_t)len * sizeof(int32_t));
        for (int i = P + len; i < cols; i++) row[i] = opts->pad_id;
        bool eos = len > 0 && gen[len - 1] == opts->eos_id && !opts->ignore_eos;
        int keep = len, body = len - eos; /* the tokens before end-of-text */
        out->finish[c] = eos ? CT_FINISH_EOS : CT_FINISH_LENGTH;
        if (opts->stop_loops && (keep = ct_loop_keep(gen, body)) < body)
            out->finish[c] = CT_FINISH_REPETITION;
        else
            keep = len;
        out->n_tokens[c] = P + keep;
        if (opts->keep_scores)
            for (int i = 0; i < keep; i++)
                out->scores[(size_t)c * n_max + i] = expf(h->lp[(size_t)slot * S->max_new + i]);
    }
    return NULL;
}

tg_status ct_beam_decode(const ct_model *m, tg_sched *sched, const ct_enc_result *enc,
                         const int32_t *prompt, int n_prompt, int beams, const ct_greedy_opts *opts,
                         ct_greedy_result *out) {
    if (!m || !sched || !enc || !prompt || n_prompt <= 0 || !opts || !out || opts->max_new_tokens <= 0)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_beam_decode: bad arguments");
    if (beams < 2 || beams > CT_MAX_BEAMS)
        return tg_status_new(TG_ERR_INVALID_ARG, "beam search: %d beams is outside [2, %d]", beams,
                             CT_MAX_BEAMS);
    memset(out, 0, sizeof *out);
    int P = n_prompt, V = m->vocab, C = enc->n_batch, K = beams;
    if (V < 2 * K)
        return tg_status_new(TG_ERR_INVALID_ARG, "beam search: %d beams need a vocabulary of %d or more (the model's is %d)",
                             K, 2 * K, V);
    int max_new = opts->max_new_tokens;
    if (max_new > m->max_positions - P) max_new = m->max_positions - P;
    if (max_new <= 0)
        return tg_status_new(TG_ERR_INVALID_ARG, "a %d-token prompt leaves no room in the decoder's %d positions", P,
                             m->max_positions);
    if (C > INT32_MAX / K / P)
        return tg_status_new(TG_ERR_INVALID_ARG, "beam search: %d clips of %d beams are too many rows", C, K);
    int R = C * K;
    search S = {.C = C, .K = K, .V = V, .P = P, .max_new = max_new, .eos = opts->eos_id,
                .ignore_eos = opts->ignore_eos};
    ct_dec_state *ds = NULL;
    int32_t *feed = tg_malloc((size_t)R * P * sizeof(int32_t));
    int32_t *parents = tg_malloc((size_t)R * sizeof(int32_t));
    int32_t *next = tg_malloc((size_t)R * sizeof(int32_t));
    float *logits = tg_malloc((size_t)R * V * sizeof(float));
    tg_status st = NULL;
    if (!search_alloc(&S) || !feed || !parents || !next || !logits) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "beam search: out of memory (fewer beams need less)");
        goto done;
    }
    ct_dec_opts dopts = {.f32 = opts->f32, .want_logits = true, .last_logits = true, .rows_per_clip = K,
                         .keep = opts->keep};
    if ((st = ct_decoder_begin(m, sched, enc, P, P + max_new, &dopts, &ds))) goto done;
    for (int r = 0; r < R; r++) memcpy(feed + (size_t)r * P, prompt, (size_t)P * sizeof(int32_t));
    /* the prompt's last position scores the first token */
    if ((st = ct_decoder_prefill(ds, feed, next, NULL, logits))) goto done;
    for (int n = 0; n < max_new; n++) {
        bool any_open = false;
        for (int r = 0; r < R; r++) { /* a done clip's rows: themselves, fed a pad */
            parents[r] = r;
            feed[r] = opts->pad_id;
        }
        for (int c = 0; c < C; c++)
            if (S.open[c]) step_clip(&S, logits, c, n, parents, feed);
        hyps t = S.run;
        S.run = S.next;
        S.next = t;
        for (int c = 0; c < C; c++) any_open = any_open || S.open[c];
        if (!any_open || n + 1 >= max_new) break;
        if (opts->abort && opts->abort(opts->abort_user)) {
            st = tg_status_new(TG_ERR_ABORTED, "beam search: aborted after %d steps", n + 1);
            goto done;
        }
        if ((st = ct_decoder_set_parents(ds, parents))) goto done;
        if ((st = ct_decoder_step(ds, feed, P + n, next, NULL, logits))) goto done;
    }
    /* (a closed clip's running slots were not refreshed by the swaps: it
     * reads only its finished ones) */
    st = fill_result(&S, prompt, opts, out);
done:
    if (st) ct_greedy_result_free(out);
    ct_decoder_free(ds);
    search_free(&S);
    tg_free(feed);
    tg_free(parents);
    tg_free(next);
    tg_free(logits);
    return st;
}
