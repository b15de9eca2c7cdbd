/*
 * greedy.h: greedy decoding of a batch of clips (internal).
 *
 * HF's generate with do_sample=False, num_beams=1 (spec 5.3): prefill the
 * prompt, take the argmax, feed it back, stop a row at EOS; finished rows
 * keep their slot and are padded with the pad id (masked, not removed);
 * the loop ends when every row is finished or max_new_tokens were made.
 * The result says per row why it stopped (EOS, the length limit, or, when
 * asked, a repetition loop: ct_repetition_block after each token, on the
 * host, so it costs no device work).
 */
#ifndef CT_GREEDY_H
#define CT_GREEDY_H

#include <stdbool.h>
#include <stdint.h>

#include "cohere_transcribe.h"
#include "model.h"
#include "tg.h"

typedef struct ct_greedy_opts {
    int max_new_tokens; /* > 0; clamped to max_positions - n_prompt */
    int eos_id, pad_id;
    bool f32;           /* TG_PREC_F32 matrix products */
    bool ignore_eos;    /* benchmark only: no row stops at EOS; every row
                           makes exactly max_new_tokens (after the clamp)    */
    bool keep_scores;   /* return each generated token's probability         */
    bool keep_logits;   /* return prompt and step logits (tests, dumps) */
    bool stop_loops;    /* end a row when ct_repetition_block finds a loop:
                           CT_FINISH_REPETITION, n_tokens cut to the block's
                           first instance                                    */
    tg_abort_fn abort;  /* polled between steps; true: TG_ERR_ABORTED */
    void *abort_user;
    ct_dec_keep *keep;  /* the decoder's memory kept between calls (model.h);
                           borrowed, NULL: none */
} ct_greedy_opts;

/* Why a row stopped: ct_finish (cohere_transcribe.h). */

typedef struct ct_greedy_result {
    int n_batch;
    int n_cols;          /* n_prompt + new tokens made (the longest row)   */
    int32_t *tokens;     /* [n_batch][n_cols]: prompt + generated, padded  */
    int *n_tokens;       /* [n_batch]: tokens of the row up to and with EOS */
    ct_finish *finish;   /* [n_batch]                                      */
    int n_steps;         /* new tokens made = n_cols - n_prompt            */
    float *scores;       /* keep_scores: [n_batch][n_steps], the softmax
                            probability of each generated token (computed
                            on the device; 0 on pad after a row finished)  */
    float *prompt_logits;/* keep_logits: [n_batch][n_prompt][vocab]        */
    float *step_logits;  /* keep_logits: [n_batch][n_steps][vocab]; step 0
                            is the prompt's last position                 */
} ct_greedy_result;

void ct_greedy_result_free(ct_greedy_result *r);

/* How many of the generated tokens gen[0..n) a row keeps when stop_loops
 * ends it at its first loop (the tokens up to the loop's detection, less
 * the block's three repeats), as the greedy loop cuts it; n when no loop. */
int ct_loop_keep(const int32_t *gen, int n);

/* Decodes every row of enc (borrowed: read in place, on its backend) with
 * the same prompt (ids[n_prompt]). Fills *out, which the caller owns; free
 * it with ct_greedy_result_free. */
tg_status ct_greedy_decode(const ct_model *m, tg_sched *sched, const ct_enc_result *enc,
                           const int32_t *prompt, int n_prompt, const ct_greedy_opts *opts,
                           ct_greedy_result *out);

#endif
