/*
 * model.h: the cohere_asr model in memory and the graph builders that run it
 * (internal).
 *
 * ct_model holds the checkpoint's tensors as runtime leaves (weights.c), in
 * the shapes the graph code wants: PyTorch's shape reversed (ne[0] innermost)
 * and size-1 kernel dims dropped where a conv is run as a matrix product.
 * The encoder (encoder.c) and the decoder (decoder.c) build tg graphs from it
 * and run them through a scheduler; nothing here names a backend.
 *
 * Data crosses the host boundary only at these seams: log-mel features in,
 * token ids in, argmax ids out. The encoder output stays in backend memory
 * and the decoder reads it there; it, the hidden states and the logits come
 * to the host only when a caller asks for them (tests, debug dumps).
 *
 * Not here: audio, tokenizer, prompt building, greedy loop, chunking (src/asr).
 */
#ifndef CT_MODEL_H
#define CT_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "safetensors.h"
#include "tg.h"

/* The three tensor-name layouts of spec 6.2 / DESIGN.md. */
typedef enum ct_layout {
    CT_LAYOUT_HUB,    /* NeMo names, no prefix (the published checkpoint)        */
    CT_LAYOUT_SAVED,  /* NeMo names under "model." (transformers save_pretrained) */
    CT_LAYOUT_NATIVE, /* transformers in-memory names (subsampling.layers.N, ...) */
} ct_layout;

const char *ct_layout_name(ct_layout layout);

typedef struct ct_enc_layer {
    tg_tensor *ff1_norm_w, *ff1_norm_b, *ff1_w1, *ff1_b1, *ff1_w2, *ff1_b2h;
    tg_tensor *att_norm_w, *att_norm_b;
    tg_tensor *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo;
    /* q, k, v packed [d, 3 d] / [3 d], wq ... views of them (weights.c),
     * where the weights are copied (a GPU; CT_LOAD_COPY); NULL when apart
     * (the matrices used in place from the mapping, stored in different
     * types, or CT_ENCODER_QKV=separate) */
    tg_tensor *wqkv, *bqkv;
    /* wqkv holds four parts [d, 4 d]: q + u, q + v, k, v, q's matrix
     * stored twice (one d x d more a layer) and the rel-pos biases u and v
     * added into q's bias at load (a GPU's default; wq, bq then view the
     * first part, whose bias is bq + u) */
    bool qkv_uv;
    tg_tensor *wpos;             /* linear_pos / relative_k_proj, no bias  */
    tg_tensor *pos_u, *pos_v;    /* [head_dim, heads], F32                 */
    tg_tensor *conv_norm_w, *conv_norm_b;
    tg_tensor *pw1_w, *pw1_b;    /* [d, 2d] as a matrix                    */
    tg_tensor *dw_w, *dw_b;      /* [k, d] F32, BatchNorm folded in        */
    tg_tensor *pw2_w, *pw2_b;    /* [d, d] as a matrix                     */
    tg_tensor *ff2_norm_w, *ff2_norm_b, *ff2_w1, *ff2_b1, *ff2_w2, *ff2_b2h;
    tg_tensor *out_norm_w, *out_norm_b;
    /* ff1_b2h, ff2_b2h: the feed-forwards' second biases halved at load
     * (weights.c), for the macaron's x + W2 h / 2 + b2 / 2 (encoder.c) */
} ct_enc_layer;

typedef struct ct_dec_layer {
    tg_tensor *ln1_w, *ln1_b;
    tg_tensor *sa_wq, *sa_bq, *sa_wk, *sa_bk, *sa_wv, *sa_bv, *sa_wo, *sa_bo;
    /* q, k, v packed [dd, 3 dd] / [3 dd], sa_wq ... views of them; NULL
     * when the checkpoint stores the three in different types */
    tg_tensor *sa_wqkv, *sa_bqkv;
    tg_tensor *ln2_w, *ln2_b;
    tg_tensor *ca_wq, *ca_bq, *ca_wk, *ca_bk, *ca_wv, *ca_bv, *ca_wo, *ca_bo;
    tg_tensor *ln3_w, *ln3_b;
    tg_tensor *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} ct_dec_layer;

typedef struct ct_model {
    char *dir;               /* the checkpoint directory, for messages     */
    ct_config cfg;
    ct_layout layout;

    /* encoder dimensions (from the tensor shapes; heads from the config) */
    int n_mels;        /* feature bins (128)                             */
    int sub_channels;  /* subsampling conv channels (256)                */
    int sub_freq;      /* frequency bins after the three stride-2 convs  */
    int d;             /* encoder width (1280)                           */
    int heads, head_dim;
    int ff;            /* encoder feed-forward width                     */
    int conv_kernel;   /* depthwise kernel (9)                           */
    int n_enc_layers;

    /* decoder dimensions */
    int dd, dec_heads, dec_head_dim, dec_ff, n_dec_layers, vocab, max_positions;

    /* subsampling: convs 0 (full), 2 (dw), 3 (pw), 5 (dw), 6 (pw) */
    tg_tensor *sub_w[5], *sub_b[5]; /* kernels [KW, KH, Cin, Cout] F32 */
    tg_tensor *sub_out_w, *sub_out_b;
    ct_enc_layer *enc;

    tg_tensor *proj_w, *proj_b;      /* encoder -> decoder width */
    tg_tensor *tok_emb, *pos_emb;    /* [dd, vocab], [dd, max_positions] */
    tg_tensor *emb_norm_w, *emb_norm_b;
    ct_dec_layer *dec;
    tg_tensor *final_norm_w, *final_norm_b;
    tg_tensor *head_w, *head_b;      /* [dd, vocab], [vocab] */

    /* storage */
    tg_ctx *ctx;             /* owns every weight tensor above          */
    st_set *st;              /* the mapping the in-place weights use    */
    tg_buffer **bufs;
    int n_bufs, cap_bufs;
    tg_backend *backend;     /* borrowed: where the weights live        */
    size_t bytes_in_place;   /* used from the mapping without a copy    */
    size_t bytes_copied;     /* converted or copied into own buffers    */
    tg_type matrix_type;     /* stored type of the big matrices         */
} ct_model;

/* Loads the checkpoint directory `dir` (config.json, model.safetensors or a
 * shard index) onto `backend` (borrowed; it must outlive the model). On the
 * CPU the matrices are used in place from the mapping; elsewhere they are
 * copied into device buffers in their stored type. Small tensors become F32
 * and BatchNorm is folded into the depthwise conv (spec 2.5). Returns a new
 * model; free it with ct_model_free. */
tg_status ct_model_load(const char *dir, tg_backend *backend, ct_model **out_model);
/* Flags of ct_model_load_flags. */
enum {
    CT_LOAD_COPY = 1u << 0, /* copy the matrices even on a CPU backend (what a
                               GPU backend gets; lets the CPU test that path) */
};
tg_status ct_model_load_flags(const char *dir, tg_backend *backend, unsigned flags,
                              ct_model **out_model);
void ct_model_free(ct_model *model);
/* NULL while the checkpoint's mappings are whole; an error naming the model
 * and the file once one was truncated (or failed) while in use, after which
 * every result computed from its weights is garbage. The encoder and the
 * decoder check it after each compute. */
tg_status ct_model_check(const ct_model *model);

/* spec 2.1: length after one stride-2, k3, p1 conv (floor((n-1)/2)+1; 0 stays 0). */
static inline int ct_sub_len(int n) { return n <= 0 ? 0 : (n - 1) / 2 + 1; }
/* Encoder frames for n mel frames (three stride-2 convs). */
static inline int ct_enc_len(int n) { return ct_sub_len(ct_sub_len(ct_sub_len(n))); }

/* ------------------------------------------------------------------ encoder */

typedef struct ct_enc_opts {
    bool f32;          /* ask for f32 matrix products and attention (TG_PREC_F32) */
    bool keep_hidden;  /* also return every layer's input/output (debug, tests)   */
} ct_enc_opts;

/* The encoder's result for a padded batch. It stays where it was computed:
 * the tensors live in a buffer of the model's backend of their own (device
 * memory on a GPU), which later graphs read as leaves (the decoder's cross
 * K/V) and which survives the scheduler replanning its arena. Read them on
 * the host only through tg_tensor_get (ct_enc_get_rows); never through
 * ->data. */
typedef struct ct_enc_result {
    int n_batch;
    int n_frames;      /* encoder frames of the tensor (T')                   */
    int d;
    int *valid;        /* [n_batch] valid encoder frames per row (host): frame
                          t of row b is real iff t < valid[b], the mask      */
    tg_tensor *out;    /* F32 [d, n_frames, n_batch]: output (before proj)   */
    int n_hidden;      /* n_enc_layers + 1 when keep_hidden, else 0           */
    tg_tensor **hidden;/* [n_hidden] of F32 [d, n_frames, n_batch]: hidden[0]
                          is the subsampling output, hidden[i] layer i's      */
    tg_ctx *ctx;       /* owns out and hidden                                 */
    tg_buffer *buf;    /* their storage, on the model's backend               */
    /* the rel-pos table the last call used (F32 [d, pos_rows], positions
     * pos_first down), on the model's backend: kept (also when the batch
     * changes), so a call with the same frames neither makes nor uploads it
     * again, and reads it at the same address (encoder.c); freed with the
     * rest by ct_enc_result_free */
    tg_ctx *pos_ctx;
    tg_buffer *pos_buf;
    tg_tensor *pos;
    int pos_first, pos_rows;
    /* each layer's projection of that table, scaled (F32 [d, pos_rows],
     * 1/sqrt(head_dim) Wpos_l pos): it depends on the weights and the
     * frames alone, so it is made with the table, once, by a graph of its
     * own, and kept beside it (NULL where the encoder projects in its own
     * graph: CT_ENCODER_POS_KEEP=0, CT_ENCODER_HEADS=copy); pos_f32: made
     * with f32 products (ct_enc_opts.f32) */
    tg_tensor **pos_r;
    bool pos_f32;
} ct_enc_result;

void ct_enc_result_free(ct_enc_result *r);

/* Copies frames [0, n_frames) of batch row `row` of t (r->out or one of
 * r->hidden) to dst, [n_frames][d] floats, from wherever t lives. */
tg_status ct_enc_get_rows(const ct_enc_result *r, const tg_tensor *t, int row, int n_frames,
                          float *dst);

/* Runs spec 2 on a padded batch: features [n_batch][n_frames][n_mels]
 * (frame-major, padded frames zero), valid mel frames per row in
 * valid_frames. Frames at and after a row's valid length are masked as HF
 * masks them (spec 2.6). *out must be zeroed or hold an earlier result,
 * whose buffer is reused when the shapes match (so a repeated batch shape
 * writes the same addresses); it is the caller's, freed with
 * ct_enc_result_free. On failure *out is freed (and zeroed). */
tg_status ct_encoder_run(const ct_model *m, tg_sched *sched, const float *features,
                         int n_batch, int n_frames, const int *valid_frames,
                         const ct_enc_opts *opts, ct_enc_result *out);

/* ----------------------------------------------------------------- frontend */

/* The log-mel frontend of spec 4 as graph nodes (frontend.c): its constant
 * tables live in a buffer of one backend, and ct_frontend_build adds the
 * nodes that turn a batch's window grids (audio.h, ct_mel_grid_padded) into
 * the encoder's features on that backend. */
typedef struct ct_frontend ct_frontend;

#define CT_FRONTEND_LOG_GUARD 5.9604644775390625e-08f /* 2^-24, before the log */
#define CT_FRONTEND_NORM_EPS 1e-5f                    /* on the standard deviation */

/* Uploads dft (F32 [spec][win]: row k, a frame's weights for spectrum value
 * k) and pairs (F32 [n_mels][spec]: mel filter m over the spectrum's
 * squares) to backend (borrowed; must outlive the frontend). Frames are
 * win samples, hop apart. Returns a new frontend: free with
 * ct_frontend_free. */
tg_status ct_frontend_new(tg_backend *backend, int n_mels, int win, int hop, int spec,
                          const float *dft, const float *pairs, ct_frontend **out);
void ct_frontend_free(ct_frontend *f);
int ct_frontend_mels(const ct_frontend *f);

/* One batch's frontend in a graph: its inputs and its output. */
typedef struct ct_frontend_graph {
    int n_frames, n_batch;
    tg_tensor *grid;   /* input F32 [hop (T-1) + win, B]: the rows' window grids */
    tg_tensor *valid;  /* input F32 [T, B]: 1 on a row's valid frames, else 0  */
    tg_tensor *inv_n;  /* input F32 [1, B, 2]: 1/n, then 1/(n - 1), n = valid  */
    tg_tensor *consts; /* input F32 [2]: the log's guard, the deviation's eps  */
    tg_tensor *out;    /* F32 [n_mels, T, 1, B]: the features, 0 past valid   */
} ct_frontend_graph;

/* Adds the nodes for n_batch rows of n_frames frames to ctx (which owns
 * them) and fills *g; returns g->out, or NULL: with the error in ctx when
 * an op failed, with nothing recorded for NULL f, ctx or g or no frames or
 * rows. */
tg_tensor *ct_frontend_build(const ct_frontend *f, tg_ctx *ctx, int n_frames, int n_batch,
                             ct_frontend_graph *g);
/* After allocation: sets g's inputs from grid ([B][hop (T-1) + win] floats)
 * and each row's valid frames (2..T; fewer cannot be normalised). */
tg_status ct_frontend_set(const ct_frontend_graph *g, const float *grid, const int *valid);

/* ct_encoder_run on a batch given as window grids (grid [n_batch][hop
 * (n_frames - 1) + win]) whose features fe computes in the same graph, on
 * the backend fe's tables live on (the model's), so they never cross to the
 * host. */
tg_status ct_encoder_run_grid(const ct_model *m, tg_sched *sched, const ct_frontend *fe,
                              const float *grid, int n_batch, int n_frames,
                              const int *valid_frames, const ct_enc_opts *opts,
                              ct_enc_result *out);

/* ------------------------------------------------------------------ decoder */

/* Decoder state for one batch of clips: cross-attention K/V computed once
 * from the encoder output, the self-attention cache allocated at its maximum
 * length, and the prefill and step graphs (built once, shapes fixed). */
typedef struct ct_dec_state ct_dec_state;

/* Decoder memory (the caches, the cross K/V, the queued steps' history)
 * kept from one batch to the next: a state begun with it (ct_dec_opts.keep)
 * takes the memory the one before it left where it was made for the same
 * shapes and backend, so a batch of a repeated shape has the same addresses
 * as the one before and a GPU replays its captured graphs from its first
 * step; memory of other shapes is freed and made anew. One state at a time
 * borrows it: ct_decoder_begin refuses it (TG_ERR_INVALID_ARG) while
 * another state begun with it is not yet freed. Holding it keeps the last
 * batch's memory between batches (at the released size and batch 64 ~1.2
 * GB): ct_dec_keep_release gives it back (before the backend is freed, and
 * when a batch ran out of memory; never while a state holds it).
 * ct_dec_keep_new returns NULL when out of memory; the caller owns it and
 * frees it with ct_dec_keep_free (NULL is fine). */
typedef struct ct_dec_keep ct_dec_keep;
ct_dec_keep *ct_dec_keep_new(void);
void ct_dec_keep_release(ct_dec_keep *k);
void ct_dec_keep_free(ct_dec_keep *k);
/* For tests: the buffer k holds now (borrowed; NULL: none), and how many
 * times memory was made into it (a buffer's address may come back). */
const tg_buffer *ct_dec_keep_buffer(const ct_dec_keep *k);
int ct_dec_keep_made(const ct_dec_keep *k);

typedef struct ct_dec_opts {
    bool f32;          /* TG_PREC_F32 on matrix products and attention          */
    bool want_logits;  /* keep logits for the caller (prefill: every position,
                          or with last_logits the last one only)               */
    bool last_logits;  /* the prefill's logits: the last position of each row */
    bool want_scores;  /* also compute each argmax's softmax probability        */
    bool queued;       /* steps queued on the device (ct_decoder_queue_step)    */
    int rows_per_clip; /* beam search: each clip of enc is decoded in this many
                          rows, row j * n_clips + b being clip b's j-th (0 or
                          1: one row a clip); see ct_decoder_set_parents      */
    ct_dec_keep *keep; /* borrowed; NULL: the state's memory is its own      */
} ct_dec_opts;

/* Computes the cross K/V of enc (borrowed; its out tensor is read in place,
 * as a leaf, and its valid lengths are copied; enc may be freed after) and
 * allocates the caches for sequences of up to max_len tokens (<= the model's
 * max_positions). The prompt length is fixed at n_prompt. Free with
 * ct_decoder_free. */
tg_status ct_decoder_begin(const ct_model *m, tg_sched *sched, const ct_enc_result *enc,
                           int n_prompt, int max_len, const ct_dec_opts *opts,
                           ct_dec_state **out_state);
void ct_decoder_free(ct_dec_state *s);

/* Runs the prompt (ids [n_batch][n_prompt]) at positions 0..n_prompt-1.
 * out_next[b] gets the argmax at the last prompt position. When the state
 * was made with want_scores / want_logits, out_scores receives
 * [n_batch][n_prompt] probabilities of each position's argmax and
 * out_logits [n_batch][n_prompt][vocab] ([n_batch][vocab], the last
 * position's, with opts.last_logits); either may be NULL. */
tg_status ct_decoder_prefill(ct_dec_state *s, const int32_t *prompt, int32_t *out_next,
                             float *out_scores, float *out_logits);
/* One step: ids[b] is fed at position pos (the same for every row, since all
 * rows share one prompt length); out_next[b] gets the argmax, out_scores[b]
 * its probability (want_scores), out_logits [n_batch][vocab] (want_logits);
 * either may be NULL. */
tg_status ct_decoder_step(ct_dec_state *s, const int32_t *ids, int pos, int32_t *out_next,
                          float *out_scores, float *out_logits);
/* Beam search (a state begun with rows_per_clip > 1): the next step (that
 * one only) first makes row r's self-attention cache a copy of row
 * parents[r]'s (read before any row is written), so that a beam continues
 * the beam it was chosen from. parents[n_rows] is copied; each must be a
 * row of the same clip (parents[r] % n_clips == r % n_clips), else
 * TG_ERR_INVALID_ARG. A step without it keeps every row's own cache. */
tg_status ct_decoder_set_parents(ct_dec_state *s, const int32_t *parents);

/* Queued steps (a state begun with opts.queued and a vocabulary below 2^24;
 * ct_decoder_is_queued says whether it was): the step at position pos is
 * queued on the device, fed the tokens the previous step (or the prefill)
 * chose, and returns without waiting for it; its ids, logit sums and
 * scores go to a history on the device. ct_decoder_step also works on such
 * a state: it sets the step's tokens itself. */
tg_status ct_decoder_queue_step(ct_dec_state *s, int pos);
/* The steps at positions pos0..pos0+n-1 queued as ct_decoder_queue_step
 * would queue them one by one (the same tokens, history and errors for a
 * bad position), but with CT_DECODER_RUN=2, 4 or 8 (default 1: none) each
 * whole run of that many steps as one graph, set with one copy per input, so the steps inside a run follow
 * each other on the device without the host's copies and a graph launch
 * between them; the rest a step at a time (and every step of a beam
 * search's state, whose parents serve one step). n = 0 queues nothing. */
tg_status ct_decoder_queue_steps(ct_dec_state *s, int pos0, int n);
/* Reads the history of the queued steps at positions pos0..pos0+n-1 (waits
 * for them; a position past the last queued is refused): out_ids [n][n_batch] (the argmax each step chose) and, when
 * the state has want_scores and out_scores is not NULL, their
 * probabilities [n][n_batch]. A non-finite logit sum is an error naming
 * the model. */
tg_status ct_decoder_read_steps(ct_dec_state *s, int pos0, int n, int32_t *out_ids, float *out_scores);
bool ct_decoder_is_queued(const ct_dec_state *s);
/* How many runs ct_decoder_queue_steps has queued as one graph each (for
 * tests). */
int ct_decoder_runs_queued(const ct_dec_state *s);

#endif
