/*
 * beam.h: beam search over the decoder for a batch of clips (internal).
 *
 * What HF's generate does with num_beams = K > 1, do_sample=False and its
 * defaults (length_penalty 1.0, early_stopping False): each clip keeps K
 * running hypotheses; a step scores every continuation of every beam by its
 * summed log-probability, keeps the best 2K, ends those of the best K that
 * reach end-of-text (or the length limit) as finished hypotheses scored by
 * their sum over their generated length, and carries the best K that did
 * not end. A clip is done when all K finished slots are filled and its best
 * running beam, at its present length, can no longer beat the worst of
 * them. Its transcript is the best finished hypothesis.
 *
 * The result has greedy.h's type, so the stages after decoding do not
 * change: tokens, lengths, why each row stopped and (keep_scores) each
 * token's probability along the chosen hypothesis. Logits are not kept
 * (opts->keep_logits is ignored). opts->stop_loops cuts the winning
 * hypothesis at its first loop where greedy decoding would have stopped its
 * row (CT_FINISH_REPETITION), whether it then ran to the length limit or to
 * end-of-text; it acts after the search, so it never changes which
 * hypothesis wins (nor does a looping beam stop early: it costs steps).
 */
#ifndef CT_BEAM_H
#define CT_BEAM_H

#include "greedy.h"

/* The widest beam ct_beam_decode accepts (the public limit). */
#define CT_MAX_BEAMS CT_MAX_BEAM_SIZE

/* Decodes every clip of enc (borrowed: read in place, on its backend) with
 * the prompt (ids[n_prompt]) by beam search of `beams` hypotheses
 * (2..CT_MAX_BEAMS). Fills *out, which the caller owns; free it with
 * ct_greedy_result_free. */
tg_status ct_beam_decode(const ct_model *m, tg_sched *sched, const ct_enc_result *enc,
                         const int32_t *prompt, int n_prompt, int beams, const ct_greedy_opts *opts,
                         ct_greedy_result *out);

#endif
