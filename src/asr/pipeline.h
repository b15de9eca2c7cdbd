/*
 * pipeline.h: one batch of clips through the four stages of a
 * transcription, each with typed input and output (internal):
 *
 *   clips --ct_pipe_features--> ct_feature_batch   (host: padded log-mel, or
 *                                                   the window grids that a GPU
 *                                                   turns into log-mel)
 *         --ct_pipe_encode----> ct_enc_result      (backend memory)
 *         --ct_pipe_decode----> ct_greedy_result   (host: ids, finish, scores;
 *                                                   greedy or beam search)
 *         --ct_pipe_text------> ct_clip_text[]     (host: text, tokens)
 *
 * Why stages: the session then reads as the spec's steps, each stage can be
 * timed, tested and later overlapped or replaced on its own, and what
 * crosses between them (and where it lives) is written down in one place.
 * The encoder's result stays where it was computed; the decoder reads it
 * there.
 *
 * Stages never report to the debug hook themselves: the observer functions
 * at the end (ct_pipe_observe_*) are called by the session at the stage
 * boundaries and are the only place that turns stage outputs into the
 * public ct_dump_fn calls.
 *
 * Not here: chunking and rejoining long audio, sessions and options
 * (session.c), the models themselves (src/model).
 */
#ifndef CT_PIPELINE_H
#define CT_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audio.h"
#include "cohere_transcribe.h"
#include "greedy.h"
#include "model.h"
#include "tokenizer.h"

/* Host memory for a feature batch's rows that the session keeps from
 * batch to batch. Allocating a batch's rows anew each time (143 MB of
 * window grids at batch 64 x 35 s) faulted in every page while the
 * frontend wrote them and unmapped them all after the decoder: on the
 * development CPU the grids took 43 ms in new memory against 17 in memory
 * used before. With a backend, the memory is that backend's host memory
 * (tg_backend_host_alloc: page-locked on a GPU), which the grids' upload
 * reads at the bus's rate where it is large (on CUDA from 32 MiB: a batch
 * of 15 clips of 35 s; measured at batch 32 and 64). It only grows until
 * ct_row_store_free gives it back (before its backend is freed, and when a
 * batch ran out of memory and is halved). */
typedef struct ct_row_store {
    tg_backend *backend; /* whose host memory; NULL: tg_malloc */
    float *data;
    size_t cap;          /* floats */
    bool host;           /* data is the backend's host memory, else tg_malloc's */
} ct_row_store;

void ct_row_store_free(ct_row_store *rs);

/* What the stages read: all borrowed (the session owns them). */
typedef struct ct_pipe {
    const ct_model *model;
    tg_sched *sched;
    const ct_mel *mel;
    const ct_frontend *frontend; /* features on the model's backend; NULL: mel on the host */
    tg_threadpool *pool;     /* the frontend's clips in parallel; NULL: in turn */
    ct_row_store *rows;      /* the feature batch's rows, reused; NULL: new each batch */
    ct_dec_keep *dec_keep;   /* the decoder's memory, reused; NULL: new each batch */
    const ct_tokenizer *tok;
    const int32_t *prompt;   /* [n_prompt], spec 5.2 */
    int n_prompt;
    int eos_id, pad_id;
    int frame_bucket;        /* round the batch's frames up to a multiple; 0: off */
    int max_new_tokens;
    int beams;               /* > 1: beam search of that width (beam.h); else greedy */
    bool f32;                /* TG_PREC_F32 matrix products and attention */
    bool ignore_eos;         /* benchmark only (ct_options.ignore_eos)    */
    bool keep_scores;        /* per-token probabilities in the decoded result */
    bool keep_intermediates; /* hidden states and logits, for an observer */
    bool stop_loops;         /* ct_options.stop_repetition_loops */
    tg_abort_fn abort;       /* polled between decoder steps; may be NULL */
    void *abort_user;
} ct_pipe;

/* Stage 1's output: a padded batch of log-mel features, on the host. */
typedef struct ct_feature_batch {
    int n_rows;
    int n_frames;      /* T: the longest row's frames, rounded up to the bucket */
    int n_mels;
    float *features;   /* [n_rows][n_frames][n_mels]; a row is its clip's own
                          features followed by zero frames; NULL when grid is
                          set                                                 */
    float *grid;       /* or, with a frontend on the backend: [n_rows]
                          [ct_mel_grid_len(n_frames)], each row's window grid
                          (audio.h), which the encoder's graph makes features of */
    int *frames;       /* [n_rows] the row's own mel frames (floor(N/160) + 1)  */
    int *valid;        /* [n_rows] the mask, as lengths: frame t of row r is
                          real iff t < valid[r] (floor(N/160), spec 4; HF's
                          attention_mask is always such a prefix)               */
    int *clip;         /* [n_rows] the caller's index of the clip of each row   */
    bool rows_borrowed; /* features or grid lie in the pipe's row store         */
} ct_feature_batch;

void ct_feature_batch_free(ct_feature_batch *fb);

/* What one clip produced. */
typedef struct ct_clip_text {
    char *text;
    int32_t *tokens;   /* generated ids after the prompt, without EOS */
    int n_tokens;
    ct_finish finish;  /* why its row stopped */
} ct_clip_text;

void ct_clip_text_free(ct_clip_text *t);

/* Stage 1, spec 4: log-mel features of clips[0..n) (16 kHz, lens[i]
 * samples each; borrowed), padded to one batch. clip_ids[i] is recorded as
 * row i's clip (NULL: i). Fills *out, which the caller owns (free with
 * ct_feature_batch_free); with p->rows, its features or grid lie in that
 * store, valid until the next call with the same store. */
tg_status ct_pipe_features(const ct_pipe *p, const float *const *clips, const size_t *lens,
                           const int *clip_ids, int n, ct_feature_batch *out);

/* Stage 2, spec 2: the encoder on fb (borrowed). *out holds the output in
 * backend memory (and every layer's hidden state when keep_intermediates);
 * the caller owns it: free with ct_enc_result_free. *out must be zeroed or
 * hold an earlier result, whose buffer is reused when the shapes match, so
 * that a repeated batch shape writes the same addresses (a GPU backend
 * then replays the encoder's captured graph as is). */
tg_status ct_pipe_encode(const ct_pipe *p, const ct_feature_batch *fb, ct_enc_result *out);

/* Stage 3, spec 3 and 5.3: greedy decoding (or, with p->beams > 1, beam
 * search) of every row of enc (borrowed, read in place) with the prompt.
 * *out is the caller's: free with ct_greedy_result_free. */
tg_status ct_pipe_decode(const ct_pipe *p, const ct_enc_result *enc, ct_greedy_result *out);

/* Stage 4, spec 5.1: row r of dec (borrowed) becomes text and tokens in
 * outs[clip[r]] (clip: the feature batch's, or NULL for r). The texts and
 * tokens are new and the caller's (ct_clip_text_free); on failure the
 * entries already filled stay filled, for the caller to free. */
tg_status ct_pipe_text(const ct_pipe *p, const ct_greedy_result *dec, const int *clip,
                       ct_clip_text *outs);

/* ------------------------------------------------------------ observer */

/* The debug hook and the session's count of clips reported before this
 * batch (row r is reported as clip first_index + r). */
typedef struct ct_pipe_observer {
    ct_dump_fn dump;
    void *user;
    int first_index;
} ct_pipe_observer;

/* After stage 1: "features" [frames[r], n_mels] per row (nothing for a
 * batch of grids: the session gives a dump hook host features). */
tg_status ct_pipe_observe_features(const ct_pipe_observer *o, const ct_feature_batch *fb);
/* After stage 2: "encoder_hidden.i" (when kept) and "encoder_out",
 * [ct_enc_len(frames[r]), d] per row, read back from the backend. */
tg_status ct_pipe_observe_encoded(const ct_pipe_observer *o, const ct_feature_batch *fb,
                                  const ct_enc_result *enc);
/* After stage 3: "prompt_logits" [n_prompt, vocab] and "step_logits"
 * [n_steps, vocab] (when kept), "generated" I32 [n_cols] per row. */
tg_status ct_pipe_observe_decoded(const ct_pipe_observer *o, const ct_pipe *p,
                                  const ct_greedy_result *dec);

#endif
