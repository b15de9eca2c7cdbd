/*
 * greedy.c: the greedy loop over the decoder (see greedy.h).
 *
 * Only token ids cross from the device each step (and, when asked for, one
 * probability per row); logits come back only when a caller asks for them
 * (tests, --dump-tensors). Positions are shared
 * by all rows because every row starts from the same prompt.
 *
 * The repetition stop (opts.stop_loops) only ends a row early; it never
 * changes which token is chosen, so rows that do not loop are the
 * reference's exactly.
 *
 * Steps are queued on the device ahead of the host (ct_decoder_queue_steps,
 * which puts runs of them in one graph each) unless logits are kept: the
 * host queues RUN steps (RUN_NO_EOS when EOS is ignored, as in benchmarks)
 * and then reads their ids, which waits for them, so the GPU waits for the
 * host once a run, not once a step. When
 * every row has finished inside a run, the rest of the run is computed and
 * not used; the tokens are the same as stepping one at a time (rows are
 * independent). The reads could overlap the next run's steps with an
 * event per run and a copy beside the stream (not done). CT_DECODER_FEED=
 * host steps one at a time from the host (for measuring).
 *
 * Not here: repetition penalties or n-gram blocking (no reference path has
 * them, spec 5.3), beam search.
 */
#include "greedy.h"

#include <stdlib.h>
#include <string.h>

#include "base.h"

void ct_greedy_result_free(ct_greedy_result *r) {
    if (!r) return;
    tg_free(r->tokens);
    tg_free(r->n_tokens);
    tg_free(r->finish);
    tg_free(r->scores);
    tg_free(r->prompt_logits);
    tg_free(r->step_logits);
    memset(r, 0, sizeof *r);
}

/* Queued steps a run: small, since a batch that finishes inside a run
 * computes the rest of it for nothing; larger where rows never finish
 * early. Both multiples of the decoder's run graphs (CT_DECODER_RUN: 1,
 * 2, 4 or 8 steps a graph, decoder.c), so a run is whole graphs. (The H200 figures of 2026-12-04 were taken with 32 queued and 16
 * read at a time, EOS ignored: a read waits for all that is queued, so that
 * was a wait every 16 steps where this is one every 32.) */
#define RUN 8
#define RUN_NO_EOS 32

#define LOOP_MIN_TOKENS 96
#define LOOP_MIN_BLOCK 8
#define LOOP_MAX_BLOCK 32
#define LOOP_REPEATS 4

int ct_repetition_block(const int32_t *t, int n) {
    if (!t || n < LOOP_MIN_TOKENS) return 0;
    for (int L = LOOP_MIN_BLOCK; L <= LOOP_MAX_BLOCK && LOOP_REPEATS * L <= n; L++) {
        /* period L over the last 4 L tokens: each equals the one L before */
        int i = n - (LOOP_REPEATS - 1) * L;
        while (i < n && t[i] == t[i - L]) i++;
        if (i == n) return L;
    }
    return 0;
}

int ct_loop_keep(const int32_t *gen, int n) {
    for (int i = LOOP_MIN_TOKENS; i <= n; i++) {
        int L = ct_repetition_block(gen, i);
        if (L) return i - (LOOP_REPEATS - 1) * L;
    }
    return n;
}

/* Rows were filled at a stride of max_new; close them up to n_new. */
static void compact(void *rows, int B, size_t row_bytes, size_t stride_bytes) {
    for (int b = 1; b < B; b++)
        memmove((char *)rows + b * row_bytes, (char *)rows + b * stride_bytes, row_bytes);
}

/* What the loop knows of each row while it decodes. */
typedef struct row_state {
    ct_greedy_result *out;
    const ct_greedy_opts *opts;
    int P, cols, max_new;
    bool *done, *looped;
    int32_t *feed;       /* [B]: what the next host step feeds each row */
} row_state;

/* Records new token n of every row (next[b], its probability score[b] when
 * kept), a pad for rows already done, and ends rows at EOS or a loop.
 * The token recorded (the pad for a done row) is what the next host step
 * feeds. Returns whether every row is done. */
static bool take_token(row_state *rs, const int32_t *next, const float *score, int n) {
    ct_greedy_result *out = rs->out;
    const ct_greedy_opts *opts = rs->opts;
    bool all_done = true;
    for (int b = 0; b < out->n_batch; b++) {
        int32_t tok = rs->done[b] ? opts->pad_id : next[b];
        out->tokens[(size_t)b * rs->cols + rs->P + n] = tok;
        rs->feed[b] = tok;
        if (!rs->done[b]) {
            out->n_tokens[b] = rs->P + n + 1;
            if (score) out->scores[(size_t)b * rs->max_new + n] = score[b];
            if (tok == opts->eos_id && !opts->ignore_eos) {
                rs->done[b] = true;
            } else if (opts->stop_loops) {
                int L = ct_repetition_block(out->tokens + (size_t)b * rs->cols + rs->P, n + 1);
                if (L) { /* keep the block once: cut its three repeats */
                    rs->done[b] = rs->looped[b] = true;
                    out->n_tokens[b] -= (LOOP_REPEATS - 1) * L;
                }
            }
        }
        all_done = all_done && rs->done[b];
    }
    return all_done;
}

tg_status ct_greedy_decode(const ct_model *m, tg_sched *sched, const ct_enc_result *enc,
                           const int32_t *prompt, int n_prompt, const ct_greedy_opts *opts,
                           ct_greedy_result *out) {
    if (!m || !sched || !enc || !prompt || n_prompt <= 0 || !opts || !out ||
        opts->max_new_tokens <= 0)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_greedy_decode: bad arguments");
    memset(out, 0, sizeof *out);
    int B = enc->n_batch, P = n_prompt, V = m->vocab;
    int max_new = opts->max_new_tokens;
    /* clamp to the decoder's positions; written so that a huge max_new
     * (INT_MAX) cannot overflow the sum */
    if (max_new > m->max_positions - P) max_new = m->max_positions - P;
    if (max_new <= 0)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "a %d-token prompt leaves no room in the decoder's %d positions", P,
                             m->max_positions);
    int cols = P + max_new;
    ct_dec_state *ds = NULL;
    int32_t *feed = NULL, *next = NULL;
    bool *done = NULL, *looped = NULL;
    float *step_buf = NULL, *score_buf = NULL, *run_scores = NULL;
    int32_t *run_ids = NULL;
    tg_status st = NULL;

    out->n_batch = B;
    out->tokens = tg_malloc((size_t)B * cols * sizeof(int32_t));
    out->n_tokens = tg_calloc((size_t)B, sizeof(int));
    out->finish = tg_calloc((size_t)B, sizeof(ct_finish));
    feed = tg_malloc((size_t)B * P * sizeof(int32_t));
    next = tg_malloc((size_t)B * sizeof(int32_t));
    done = tg_calloc((size_t)B, sizeof(bool));
    looped = tg_calloc((size_t)B, sizeof(bool));
    if (!out->tokens || !out->n_tokens || !out->finish || !feed || !next || !done || !looped)
        goto oom;
    if (opts->keep_logits) {
        out->prompt_logits = tg_malloc((size_t)B * P * V * sizeof(float));
        out->step_logits = tg_malloc((size_t)B * max_new * V * sizeof(float));
        step_buf = tg_malloc((size_t)B * V * sizeof(float));
        if (!out->prompt_logits || !out->step_logits || !step_buf) goto oom;
    }
    if (opts->keep_scores) {
        out->scores = tg_calloc((size_t)B * max_new, sizeof(float));
        score_buf = tg_malloc((size_t)B * P * sizeof(float));
        if (!out->scores || !score_buf) goto oom;
    }

    const char *feed_env = getenv("CT_DECODER_FEED");
    bool host_feed = feed_env && !strcmp(feed_env, "host");
    if (feed_env && !host_feed && strcmp(feed_env, "device"))
        TG_WARN("CT_DECODER_FEED=%s: not host or device; ignored", feed_env);
    ct_dec_opts dopts = {.f32 = opts->f32, .want_logits = opts->keep_logits,
                         .want_scores = opts->keep_scores, .queued = !opts->keep_logits && !host_feed,
                         .keep = opts->keep};
    if ((st = ct_decoder_begin(m, sched, enc, P, cols, &dopts, &ds))) goto fail;
    for (int b = 0; b < B; b++) {
        memcpy(feed + (size_t)b * P, prompt, (size_t)P * sizeof(int32_t));
        memcpy(out->tokens + (size_t)b * cols, prompt, (size_t)P * sizeof(int32_t));
    }
    if ((st = ct_decoder_prefill(ds, feed, next, score_buf, out->prompt_logits))) goto fail;
    if (opts->keep_logits)
        for (int b = 0; b < B; b++)
            memcpy(out->step_logits + (size_t)b * max_new * V,
                   out->prompt_logits + ((size_t)b * P + P - 1) * V, (size_t)V * sizeof(float));
    if (opts->keep_scores) /* the prompt's last position chose the first token */
        for (int b = 0; b < B; b++) score_buf[b] = score_buf[(size_t)b * P + P - 1];

    row_state rs = {out, opts, P, cols, max_new, done, looped, feed};
    int n_new = 0;
    bool all_done = take_token(&rs, next, score_buf, n_new++);
    /* queued: token n is chosen by the step at position P + n - 1 */
    bool queued = ct_decoder_is_queued(ds);
    int run = opts->ignore_eos ? RUN_NO_EOS : RUN, n_queued = n_new;
    if (queued) {
        run_ids = tg_malloc((size_t)run * B * sizeof(int32_t));
        run_scores = score_buf ? tg_malloc((size_t)run * B * sizeof(float)) : NULL;
        if (!run_ids || (score_buf && !run_scores)) goto oom;
    }
    while (!all_done && n_new < max_new) {
        if (opts->abort && opts->abort(opts->abort_user)) {
            st = tg_status_new(TG_ERR_ABORTED, "greedy decoding: aborted after %d steps", n_new);
            goto fail;
        }
        if (queued) {
            int more = max_new - n_queued < run - (n_queued - n_new) ? max_new - n_queued : run - (n_queued - n_new);
            if ((st = ct_decoder_queue_steps(ds, P + n_queued - 1, more))) goto fail;
            n_queued += more;
            int k = n_queued - n_new;
            if ((st = ct_decoder_read_steps(ds, P + n_new - 1, k, run_ids, run_scores))) goto fail;
            for (int j = 0; j < k && !all_done; j++)
                all_done = take_token(&rs, run_ids + (size_t)j * B, run_scores ? run_scores + (size_t)j * B : NULL,
                                      n_new++);
            continue;
        }
        if ((st = ct_decoder_step(ds, feed, P + n_new - 1, next, score_buf, step_buf))) goto fail;
        if (opts->keep_logits)
            for (int b = 0; b < B; b++)
                memcpy(out->step_logits + ((size_t)b * max_new + n_new) * V, step_buf + (size_t)b * V,
                       (size_t)V * sizeof(float));
        all_done = take_token(&rs, next, score_buf, n_new++);
    }
    /* steps still queued past the last row's end: their faults are this
     * batch's to report, not the next compute's */
    if ((st = tg_sched_synchronize(sched))) goto fail;
    for (int b = 0; b < B; b++)
        out->finish[b] = looped[b] ? CT_FINISH_REPETITION : done[b] ? CT_FINISH_EOS : CT_FINISH_LENGTH;
    out->n_steps = n_new;
    out->n_cols = P + n_new;
    if (n_new < max_new) {
        compact(out->tokens, B, (size_t)out->n_cols * sizeof(int32_t), (size_t)cols * sizeof(int32_t));
        if (opts->keep_scores)
            compact(out->scores, B, (size_t)n_new * sizeof(float), (size_t)max_new * sizeof(float));
        if (opts->keep_logits)
            compact(out->step_logits, B, (size_t)n_new * V * sizeof(float),
                    (size_t)max_new * V * sizeof(float));
    }
    goto release;
oom:
    st = tg_status_new(TG_ERR_NO_MEMORY, "greedy decoding: out of memory");
fail:
    ct_greedy_result_free(out);
release:
    ct_decoder_free(ds);
    tg_free(feed);
    tg_free(next);
    tg_free(done);
    tg_free(looped);
    tg_free(step_buf);
    tg_free(score_buf);
    tg_free(run_ids);
    tg_free(run_scores);
    return st;
}
