/*
 * decoder.c: the Transformer decoder of spec 3 with a fixed-shape KV cache.
 *
 * Per batch of clips: the encoder output, read where the encoder left it
 * (a leaf in its own backend buffer, never a host round trip), is projected
 * to the decoder width and each layer's cross-attention K/V are computed
 * once (spec 3.4) into tensors that live for the batch. The self-attention cache is allocated
 * once at its maximum length, [head_dim, max_len, 2 heads, B] per layer (a
 * row's K heads, then its V heads), so attention reads K and V as views of
 * it without a copy, and a step writes both with one set_rows from the
 * packed q/k/v product, whose k and v lie side by side. Two graphs are built once per batch:
 * the prefill (the whole prompt) and the step (one token per row). A step
 * writes its K/V at a position given as data (tg_set_rows with an ids
 * tensor) and attends over the whole cache with a mask given as data, so
 * every step runs the same graph with the same shapes: the plan (and on a
 * GPU the captured launch sequence) is made once. The caches, the cross K/V
 * and the queued steps' history may outlive the state (ct_dec_keep, which
 * a session keeps): a batch of the shapes of the one before then reads and
 * writes the same addresses, so on a GPU its prefill, its steps and its
 * runs replay the graphs the batch before captured. (With memory of its
 * own, each batch's graphs have new addresses: their first sightings
 * launch directly and their second ones capture anew.) Argmax runs where the
 * logits are; only ids come back unless the caller asks for logits. A
 * token's score, when asked for, is its softmax probability, picked from
 * the logits on the device as well, so it costs B floats a step. Every
 * position's logit sum comes back too (B floats a step, one reduction over
 * the logits): a non-finite sum means NaN or Inf logits, an error naming the
 * model rather than a transcript of <unk>.
 *
 * Rows of a batch stay in their slots; the caller feeds finished rows a pad
 * token and ignores what they produce.
 *
 * Beam search (opts.rows_per_clip R > 1): each clip's cross K/V are
 * computed once and copied into its R rows (row j * n_clips + b is clip
 * b's beam j), and the step graph starts by gathering every row's
 * self-attention cache from its parent row (an input set by
 * ct_decoder_set_parents) into a temporary and copying it back, before the
 * step writes its own position. That moves the whole cache each step (all
 * positions, not only the written ones) to keep one graph of fixed shapes:
 * per row, ~1 MB of cache for the demo model at the CLI's 445 new tokens;
 * at the released size ~15 MB of bf16, ~89 MB of memory traffic through
 * the F32 temporary, which on a GPU would cost more than the step itself
 * (a gather bounded by the step's position is the fix; not written).
 *
 * Steps queued on the device (ct_decoder_queue_step): the step graph then
 * reads its tokens from a device tensor the previous step's argmax wrote
 * (the prefill writes it first), and writes each step's ids, logit sums
 * and scores into history tensors at the step's position (set_rows, the
 * position as data), so the host queues steps without reading anything
 * and reads the history a run of steps at a time (ct_decoder_read_steps).
 * A finished row is then fed its own argmax rather than a pad: rows are
 * independent (no product or attention mixes them), so the other rows'
 * tokens are the same, and the caller ignores the finished row's. The
 * host sets only the positions and the causal mask's row; the
 * cross-attention mask, the same every step, is set once. A third graph
 * may hold a run of such steps (CT_DECODER_RUN=2, 4 or 8; off by default,
 * measured slower, see run_steps_env), each reading the tokens the one
 * before it left and its own views of the run's inputs, which the host
 * sets with one copy each (ct_decoder_queue_steps).
 *
 * Not here: the greedy loop and stopping rules (src/asr/greedy.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "layers.h"
#include "model.h"

/* One of the two decoding graphs. */
typedef struct dec_graph {
    tg_ctx *ctx;
    tg_graph *g;
    int n_q;                      /* query positions per row            */
    int n_steps;                  /* steps in the graph (a run), else 1 */
    tg_tensor *tok, *pos, *wids;  /* I32 inputs                         */
    tg_tensor *parents;           /* I32 [B]: beam search's cache rows  */
    tg_tensor *self_mask, *cross_mask;
    tg_tensor *ids, *logits;      /* outputs (logits only when wanted)  */
    tg_tensor *scores;            /* softmax at the argmax, when wanted */
    tg_tensor *sums;              /* [n_q, B]: each position's logit sum */
    bool cross_mask_set;          /* queued steps: set once             */
} dec_graph;

/* What a batch's memory was made for: a later batch reuses it only where
 * every field is the same. */
typedef struct dec_mem_key {
    tg_backend *backend;
    tg_type kv_type;
    int B, max_len, n_enc, layers, heads, head_dim;
    bool queued, scores;
} dec_mem_key;

/* The decoder's memory for a batch: per layer the self-attention cache and
 * the cross K/V, and the queued steps' feed and history, in one buffer. */
typedef struct dec_mem {
    dec_mem_key key;
    tg_ctx *ctx;
    tg_buffer *buf;
    tg_tensor **kv;               /* [3L]: self caches, cross K, cross V */
    tg_tensor *feed;              /* queued: [B] I32                     */
    tg_tensor *hist_ids, *hist_sums, *hist_scores; /* queued: [B, max_len] */
} dec_mem;

/* Memory kept from one batch to the next (model.h). */
struct ct_dec_keep {
    dec_mem mem;
    int made;  /* times memory was made into it (tests) */
    bool busy; /* a state holds it (begun, not yet freed) */
};

struct ct_dec_state {
    const ct_model *m;
    tg_sched *sched;
    ct_dec_opts opts;
    int B, n_prompt, max_len, n_enc;
    int n_clips, rows_per_clip;   /* B = n_clips * rows_per_clip       */
    int *enc_valid;               /* [B] valid encoder frames          */
    int32_t *parents;             /* [B] beam search: next step's cache rows */
    dec_mem own;                  /* the memory, when no keep was given */
    dec_mem *mem;                 /* &own, or the caller's keep's        */
    tg_tensor **self_kv;          /* [hd, max_len, 2H, B] per layer    */
    bool kv_apart;                /* CT_DECODER_KV_WRITE=apart          */
    tg_tensor **cross_k, **cross_v; /* [hd, n_enc, H, B] per layer     */
    dec_graph prefill, step;
    dec_graph run;                /* queued: run_steps steps as one graph (g NULL: none) */
    int run_steps;                /* CT_DECODER_RUN                     */
    int n_runs;                   /* runs queued as one graph           */
    bool queued;                  /* steps fed on the device (see above) */
    int queued_to;                /* one past the last position queued  */
    tg_tensor *feed;              /* [B] I32: the next step's tokens   */
    tg_tensor *hist_ids, *hist_sums, *hist_scores; /* [B, max_len] F32 */
    dec_graph *allocated;         /* the graph the scheduler holds now */
    float *host;                  /* scratch for masks                 */
    float *sums;                  /* [n_prompt * B]: logit sums read back */
    int32_t *ihost;               /* scratch for ids                   */
};

/* Cross- or self-attention for query rows q [hd, Tq, H, B]: [dd, Tq, B]. */
static tg_tensor *attend(const ct_dec_state *s, const ct_nn *nn, tg_tensor *q, tg_tensor *k,
                         tg_tensor *v, tg_tensor *mask) {
    return ct_nn_attention(nn, q, k, v, mask, 1.0f / sqrtf((float)s->m->dec_head_dim));
}

/* Heads h0 .. h0+H-1 of t [hd, rows, 2H, B] (the cache, or what a set_rows
 * wrote into it): a view, dims 0, 1 and 3 as t's. */
static tg_tensor *cache_heads(tg_ctx *ctx, tg_tensor *t, int h0, int H) {
    if (!t) return NULL;
    const int64_t ne[4] = {t->ne[0], t->ne[1], H, t->ne[3]};
    return tg_view(ctx, t, 4, ne, t->nb, (size_t)h0 * t->nb[2]);
}

/* Queued steps: the graph's last nodes leave the next tokens on the device
 * (the last position's argmax of each row, into s->feed) and, for a step,
 * write its ids (as F32: exact below 2^24), logit sums and scores into the
 * history at the step's position (its first position input, as data). */
static tg_status build_feed(ct_dec_state *s, dec_graph *dg, tg_tensor *pos) {
    tg_ctx *ctx = dg->ctx;
    int B = s->B, n_q = dg->n_q;
    tg_status st = NULL;
    tg_tensor *last = tg_view_2d(ctx, dg->ids, 1, B, dg->ids->nb[1], (size_t)(n_q - 1) * dg->ids->nb[0]);
    st = tg_graph_build(dg->g, tg_cpy(ctx, last, tg_reshape_2d(ctx, s->feed, 1, B)));
    if (st || n_q != 1) return st;
    tg_tensor *at = tg_view_1d(ctx, pos, 1, 0);
    st = tg_graph_build(dg->g, tg_set_rows(ctx, s->hist_ids,
                                           tg_reshape_2d(ctx, tg_cast(ctx, dg->ids, TG_F32), B, 1), at));
    if (!st) st = tg_graph_build(dg->g, tg_set_rows(ctx, s->hist_sums, tg_reshape_2d(ctx, dg->sums, B, 1), at));
    if (!st && dg->scores)
        st = tg_graph_build(dg->g, tg_set_rows(ctx, s->hist_scores, tg_reshape_2d(ctx, dg->scores, B, 1), at));
    return st;
}

/* One step's nodes (spec 3.1-3.3) for dg->n_q query positions per row,
 * with its positions, cache rows and causal mask given (for a run, this
 * step's views of the run's inputs), and the graph's outputs after them:
 * ids, sums, scores, logits and the feed into dg->g (dg->ids, ... are this
 * step's). */
static tg_status build_step(ct_dec_state *s, dec_graph *dg, const ct_nn *nn, tg_tensor *pos, tg_tensor *wids,
                            tg_tensor *self_mask) {
    const ct_model *m = s->m;
    int B = s->B, H = m->dec_heads, hd = m->dec_head_dim, n_q = dg->n_q;
    tg_ctx *ctx = nn->ctx;
    tg_status st = NULL;

    /* spec 3.1: x = LN(E_tok[ids] + PE[positions]) */
    tg_tensor *x = tg_add(ctx, tg_get_rows(ctx, m->tok_emb, dg->tok),
                          tg_get_rows(ctx, m->pos_emb, pos));
    x = tg_reshape_3d(ctx, x, m->dd, n_q, B);
    x = ct_nn_norm(nn, x, m->emb_norm_w, m->emb_norm_b);
    /* spec 3.2: pre-LN layers */
    for (int i = 0; i < m->n_dec_layers && x; i++) {
        const ct_dec_layer *l = &m->dec[i];
        tg_tensor *cache = s->self_kv[i];
        if (dg->parents) { /* beam search: each row continues its parent's cache */
            tg_tensor *flat = tg_reshape_2d(ctx, cache, cache->ne[0] * cache->ne[1] * cache->ne[2], B);
            flat = tg_cpy(ctx, tg_get_rows(ctx, flat, dg->parents), flat); /* same shape: row copies */
            cache = tg_reshape_4d(ctx, flat, cache->ne[0], cache->ne[1], cache->ne[2], B);
        }
        /* causal self-attention over the cache */
        tg_tensor *h = ct_nn_norm(nn, x, l->ln1_w, l->ln1_b);
        tg_tensor *q, *k = NULL, *v = NULL, *kc = NULL, *vc = NULL;
        if (l->sa_wqkv) { /* one product for the three (weights.c) */
            tg_tensor *qkv = ct_nn_linear(nn, l->sa_wqkv, l->sa_bqkv, h);
            q = ct_nn_split_heads_of(nn, qkv, 0, hd, H);
            if (s->kv_apart) {
                k = ct_nn_split_heads_of(nn, qkv, 1, hd, H);
                v = ct_nn_split_heads_of(nn, qkv, 2, hd, H);
            } else { /* its k and v heads, side by side: one cache write */
                tg_tensor *kv = tg_set_rows(ctx, cache, ct_nn_split_heads_from(nn, qkv, H, hd, 2 * H), wids);
                kc = cache_heads(ctx, kv, 0, H);
                vc = cache_heads(ctx, kv, H, H);
            }
        } else {
            q = ct_nn_split_heads(nn, ct_nn_linear(nn, l->sa_wq, l->sa_bq, h), hd, H);
            k = ct_nn_split_heads(nn, ct_nn_linear(nn, l->sa_wk, l->sa_bk, h), hd, H);
            v = ct_nn_split_heads(nn, ct_nn_linear(nn, l->sa_wv, l->sa_bv, h), hd, H);
        }
        if (k) { /* K and V apart, into the cache's two halves */
            const int64_t ne[4] = {wids->ne[0], H, wids->ne[2], 1};
            tg_tensor *rows = tg_view(ctx, wids, 4, ne, wids->nb, 0); /* [n_q, H, B] of [n_q, 2H, B] */
            kc = tg_set_rows(ctx, cache_heads(ctx, cache, 0, H), k, rows);
            vc = tg_set_rows(ctx, cache_heads(ctx, cache, H, H), v, rows);
        }
        tg_tensor *a = attend(s, nn, q, kc, vc, self_mask);
        x = tg_add(ctx, x, ct_nn_linear(nn, l->sa_wo, l->sa_bo, a));
        /* cross-attention on the clip's K/V */
        h = ct_nn_norm(nn, x, l->ln2_w, l->ln2_b);
        q = ct_nn_split_heads(nn, ct_nn_linear(nn, l->ca_wq, l->ca_bq, h), hd, H);
        a = attend(s, nn, q, s->cross_k[i], s->cross_v[i], dg->cross_mask);
        x = tg_add(ctx, x, ct_nn_linear(nn, l->ca_wo, l->ca_bo, a));
        /* relu MLP */
        h = ct_nn_norm(nn, x, l->ln3_w, l->ln3_b);
        h = tg_relu(ctx, ct_nn_linear(nn, l->fc1_w, l->fc1_b, h));
        x = tg_add(ctx, x, ct_nn_linear(nn, l->fc2_w, l->fc2_b, h));
    }
    /* spec 3.3 */
    x = ct_nn_norm(nn, x, m->final_norm_w, m->final_norm_b);
    tg_tensor *logits = ct_nn_linear(nn, m->head_w, m->head_b, x); /* [V, n_q, B] */
    dg->ids = tg_argmax(ctx, logits);                            /* [n_q, B]    */
    dg->sums = tg_sum_rows(ctx, logits);                         /* [1, n_q, B] */
    if ((st = tg_ctx_check(ctx))) return st;
    tg_set_name(logits, "logits");
    tg_set_name(dg->ids, "next_ids");
    st = tg_graph_build(dg->g, dg->ids);
    if (!st) st = tg_graph_build(dg->g, dg->sums);
    if (!st && s->opts.want_scores) {
        /* the chosen token's probability, picked on the device: softmax
         * rows seen as [1, V, n_q*B] images, one row each at its argmax */
        int64_t n = (int64_t)n_q * B;
        tg_tensor *p = tg_reshape_4d(ctx, tg_soft_max(ctx, logits, NULL, 1.0f), 1, m->vocab, n, 1);
        dg->scores = tg_get_rows(ctx, p, tg_reshape_3d(ctx, dg->ids, 1, n, 1));
        st = tg_graph_build(dg->g, dg->scores);
    }
    if (!st && s->opts.want_logits) {
        dg->logits = logits;
        st = tg_graph_build(dg->g, logits);
    }
    if (!st && s->queued) st = build_feed(s, dg, pos);
    return st;
}

/* The graph of n_steps steps (1, or a run of queued steps, each fed the
 * one before's tokens on the device) of n_q query positions per row. A
 * run's inputs hold every step's positions, cache rows and mask rows, set
 * with one copy each; its steps read views of them. */
static tg_status build_graph(ct_dec_state *s, dec_graph *dg, int n_q, int n_steps) {
    int B = s->B, H = s->m->dec_heads;
    tg_ctx *ctx = dg->ctx = tg_ctx_new();
    if (!ctx) return tg_status_new(TG_ERR_NO_MEMORY, "decoder: out of memory");
    const ct_nn nnv = {ctx, s->opts.f32}, *nn = &nnv;
    dg->n_q = n_q;
    dg->n_steps = n_steps;
    /* queued steps read the tokens the previous step left on the device */
    dg->tok = s->queued && n_q == 1 ? s->feed : ct_nn_input(nn, TG_I32, (int64_t)n_q * B, 1, 1, 1, "tokens");
    dg->pos = ct_nn_input(nn, TG_I32, (int64_t)n_q * B, n_steps, 1, 1, "positions");
    dg->wids = ct_nn_input(nn, TG_I32, n_q, 2 * H, B, n_steps, "cache_rows");
    dg->self_mask = ct_nn_input(nn, TG_F32, s->max_len, n_q, n_steps, 1, "self_mask");
    dg->cross_mask = ct_nn_input(nn, TG_F32, s->n_enc, n_q, 1, B, "cross_mask");
    if (s->rows_per_clip > 1 && n_q == 1 && n_steps == 1)
        dg->parents = ct_nn_input(nn, TG_I32, B, 1, 1, 1, "parents");
    tg_status st = tg_ctx_check(ctx);
    if (st) return tg_status_wrap(st, "building the decoder graph");
    dg->g = tg_graph_new(ctx);
    if (!dg->g) return tg_status_new(TG_ERR_NO_MEMORY, "decoder: out of memory");
    for (int r = 0; !st && r < n_steps; r++) {
        tg_tensor *pos = dg->pos, *wids = dg->wids, *mask = dg->self_mask;
        if (n_steps > 1) {
            pos = tg_view_1d(ctx, dg->pos, (int64_t)n_q * B, (size_t)r * dg->pos->nb[1]);
            wids = tg_view_3d(ctx, dg->wids, n_q, 2 * H, B, dg->wids->nb[1], dg->wids->nb[2], (size_t)r * dg->wids->nb[3]);
            mask = tg_view_2d(ctx, dg->self_mask, s->max_len, n_q, dg->self_mask->nb[1],
                              (size_t)r * dg->self_mask->nb[2]);
        }
        st = build_step(s, dg, nn, pos, wids, mask);
    }
    return tg_status_wrap(st, "building the decoder graph");
}

/* Projects the encoder output and computes every layer's cross K/V into
 * the batch's tensors (spec 3.4: once per clip). */
static tg_status compute_cross(ct_dec_state *s, const ct_enc_result *enc) {
    const ct_model *m = s->m;
    int H = m->dec_heads, hd = m->dec_head_dim;
    tg_status st = NULL;
    tg_ctx *ctx = tg_ctx_new();
    if (!ctx) return tg_status_new(TG_ERR_NO_MEMORY, "decoder: out of memory");
    const ct_nn nnv = {ctx, s->opts.f32}, *nn = &nnv;
    /* the encoder's output is read where it lies, as a leaf */
    tg_tensor *p = ct_nn_linear(nn, m->proj_w, m->proj_b, enc->out);
    tg_graph *g = tg_graph_new(ctx);
    if (!g) st = tg_status_new(TG_ERR_NO_MEMORY, "decoder: out of memory");
    for (int i = 0; !st && i < m->n_dec_layers; i++) {
        const ct_dec_layer *l = &m->dec[i];
        tg_tensor *k = ct_nn_split_heads(nn, ct_nn_linear(nn, l->ca_wk, l->ca_bk, p), hd, H);
        tg_tensor *v = ct_nn_split_heads(nn, ct_nn_linear(nn, l->ca_wv, l->ca_bv, p), hd, H);
        /* into each of the clip's rows (one, or a beam search's R) */
        for (int j = 0; !st && j < s->rows_per_clip; j++) {
            tg_tensor *kj = s->cross_k[i], *vj = s->cross_v[i];
            const int64_t ne[4] = {kj->ne[0], kj->ne[1], kj->ne[2], s->n_clips};
            size_t off = (size_t)j * s->n_clips * kj->nb[3];
            st = tg_graph_build(g, tg_cpy(ctx, k, tg_view(ctx, kj, 4, ne, kj->nb, off)));
            if (!st) st = tg_graph_build(g, tg_cpy(ctx, v, tg_view(ctx, vj, 4, ne, vj->nb, off)));
        }
    }
    if (!st) st = tg_sched_alloc(s->sched, g);
    if (!st) st = tg_sched_compute(s->sched, g);
    if (!st) st = ct_model_check(m);
    tg_ctx_free(ctx);
    s->allocated = NULL;
    return tg_status_wrap(st, "computing the cross-attention keys and values");
}

/* Queued steps a run graph holds: CT_DECODER_RUN, 1 (the default: no
 * run graph), 2, 4 or 8: a divisor of what the greedy loop queues at a
 * time (8, or 32 with EOS ignored; greedy.c), so that its reads never
 * alternate between the run's graph and the step's. A step at batch 1 on
 * an H100 spent 14 us between its last kernel and the next step's first
 * (seventh session's stamps): three input copies and a graph launch. Runs
 * of 8 remove them inside a run, yet measured slower on an H100 (ninth
 * session, interleaved against runs of 1: step +8.3% at batch 1, +6.8% at
 * 8, +3.1% at 64). The ninth session laid that to each transcription's
 * capture of its run graph at new addresses; with the decoder's memory
 * kept between batches (ct_dec_keep) the runs replay from the first step
 * and still lost (twenty-third session: +10.6% at batch 1, +9.0% at 8,
 * +5.5% at 64), so a graph of 8 steps' ~540 launches runs slower than 8
 * replays of one step, and the edge it removes is not what a step costs.
 * Kept, off, for measuring. */
enum { RUN_STEPS = 1 };
static int run_steps_env(void) {
    const char *v = getenv("CT_DECODER_RUN");
    if (!v || !*v) return RUN_STEPS;
    if (strcmp(v, "1") && strcmp(v, "2") && strcmp(v, "4") && strcmp(v, "8")) {
        TG_WARN("CT_DECODER_RUN=%s: not 1, 2, 4 or 8; %d used", v, RUN_STEPS);
        return RUN_STEPS;
    }
    return atoi(v);
}

static void mem_free(dec_mem *mm) {
    tg_buffer_free(mm->buf);
    tg_ctx_free(mm->ctx);
    tg_free(mm->kv);
    *mm = (dec_mem){0};
}

static bool key_same(const dec_mem_key *a, const dec_mem_key *b) {
    return a->backend == b->backend && a->kv_type == b->kv_type && a->B == b->B &&
           a->max_len == b->max_len && a->n_enc == b->n_enc && a->layers == b->layers &&
           a->heads == b->heads && a->head_dim == b->head_dim && a->queued == b->queued &&
           a->scores == b->scores;
}

/* mm made for key, and cleared: unwritten cache rows are masked, but
 * 0 * NaN would still poison the sum. Memory made for the same key is kept
 * as it is (the same addresses), else it is freed and made anew
 * (*out_made). */
static tg_status mem_make(dec_mem *mm, const dec_mem_key *key, bool *out_made) {
    tg_status st = NULL;
    *out_made = false;
    if (mm->buf && key_same(&mm->key, key)) return tg_buffer_clear(mm->buf, 0);
    mem_free(mm);
    *out_made = true;
    int L = key->layers, H = key->heads, hd = key->head_dim, B = key->B;
    mm->key = *key;
    mm->kv = tg_calloc((size_t)L * 3, sizeof(tg_tensor *));
    mm->ctx = tg_ctx_new();
    if (!mm->kv || !mm->ctx) {
        mem_free(mm);
        return tg_status_new(TG_ERR_NO_MEMORY, "decoder: out of memory");
    }
    if (key->queued) {
        mm->feed = tg_new_1d(mm->ctx, TG_I32, B);
        mm->hist_ids = tg_new_2d(mm->ctx, TG_F32, B, key->max_len);
        mm->hist_sums = tg_new_2d(mm->ctx, TG_F32, B, key->max_len);
        if (key->scores) mm->hist_scores = tg_new_2d(mm->ctx, TG_F32, B, key->max_len);
    }
    for (int i = 0; i < L; i++) {
        mm->kv[i] = tg_set_name(tg_new_4d(mm->ctx, key->kv_type, hd, key->max_len, 2 * H, B),
                                "cache_kv.%d", i);
        mm->kv[L + i] = tg_set_name(tg_new_4d(mm->ctx, key->kv_type, hd, key->n_enc, H, B),
                                    "cross_k.%d", i);
        mm->kv[2 * L + i] = tg_set_name(tg_new_4d(mm->ctx, key->kv_type, hd, key->n_enc, H, B),
                                        "cross_v.%d", i);
    }
    st = tg_ctx_check(mm->ctx);
    if (!st) st = tg_ctx_alloc_tensors(mm->ctx, key->backend, &mm->buf);
    if (!st) st = tg_buffer_clear(mm->buf, 0);
    if (st) mem_free(mm);
    return st;
}

ct_dec_keep *ct_dec_keep_new(void) { return tg_calloc(1, sizeof(ct_dec_keep)); }

void ct_dec_keep_free(ct_dec_keep *k) {
    if (!k) return;
    mem_free(&k->mem);
    tg_free(k);
}

void ct_dec_keep_release(ct_dec_keep *k) {
    if (k) mem_free(&k->mem);
}

const tg_buffer *ct_dec_keep_buffer(const ct_dec_keep *k) { return k ? k->mem.buf : NULL; }
int ct_dec_keep_made(const ct_dec_keep *k) { return k ? k->made : 0; }

void ct_decoder_free(ct_dec_state *s) {
    if (!s) return;
    if (s->opts.keep && s->mem == &s->opts.keep->mem) s->opts.keep->busy = false; /* this state held it */
    tg_ctx_free(s->prefill.ctx);
    tg_ctx_free(s->step.ctx);
    tg_ctx_free(s->run.ctx);
    mem_free(&s->own);
    tg_free(s->enc_valid);
    tg_free(s->parents);
    tg_free(s->host);
    tg_free(s->sums);
    tg_free(s->ihost);
    tg_free(s);
}

tg_status ct_decoder_begin(const ct_model *m, tg_sched *sched, const ct_enc_result *enc,
                           int n_prompt, int max_len, const ct_dec_opts *opts,
                           ct_dec_state **out_state) {
    if (!m || !sched || !enc || !enc->out || !out_state || enc->d != m->d || enc->n_batch <= 0)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_begin: bad arguments");
    if (n_prompt <= 0 || max_len <= n_prompt || max_len > m->max_positions)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "decoder: a %d-token prompt and %d tokens in all do not fit the "
                             "model's %d positions",
                             n_prompt, max_len, m->max_positions);
    tg_status st = NULL;
    ct_dec_state *s = tg_calloc(1, sizeof *s);
    if (!s) return tg_status_new(TG_ERR_NO_MEMORY, "decoder: out of memory");
    int L = m->n_dec_layers, H = m->dec_heads, hd = m->dec_head_dim;
    /* The caches are BF16 on a GPU at default precision: that halves what
     * a step reads (1.8 GB of F32 cross K/V at batch 64), as a bf16 run of
     * transformers does. Two earlier tries measured the step slower (3.17
     * -> 3.77 ms at batch 64 on the general split kernel, 2.61 -> 2.95 with
     * attn_decode, 2026-12-01/02, bench/README.md): the step's attention is
     * bound by its trips to memory, and a BF16 round carried half the
     * bytes; attn_decode now takes twice the keys a round for BF16
     * (cuda_attention.c): 1.77 -> 1.54 ms. On the CPU, or asked for F32, F32;
     * CT_DECODER_KV=f32 or bf16 overrides the choice on a GPU (for
     * measuring). */
    const char *kv_env = getenv("CT_DECODER_KV");
    tg_type kv_type = opts && opts->f32 ? TG_F32 : TG_BF16;
    if (kv_env && !strcmp(kv_env, "f32")) kv_type = TG_F32;
    else if (kv_env && !strcmp(kv_env, "bf16")) kv_type = TG_BF16;
    else if (kv_env) TG_WARN("CT_DECODER_KV=%s: not f32 or bf16; ignored", kv_env);
    if (tg_backend_is_cpu(m->backend)) kv_type = TG_F32;
    /* CT_DECODER_KV_WRITE=apart (for measuring): K and V written by two
     * set_rows, as before they shared a cache tensor */
    const char *kvw = getenv("CT_DECODER_KV_WRITE");
    if (kvw && strcmp(kvw, "apart") && strcmp(kvw, "one"))
        TG_WARN("CT_DECODER_KV_WRITE=%s: not one or apart; ignored", kvw);
    s->m = m;
    s->sched = sched;
    s->opts = opts ? *opts : (ct_dec_opts){0};
    s->rows_per_clip = s->opts.rows_per_clip > 1 ? s->opts.rows_per_clip : 1;
    s->n_clips = enc->n_batch;
    if (s->n_clips > INT32_MAX / s->rows_per_clip) {
        st = tg_status_new(TG_ERR_INVALID_ARG, "decoder: %d clips of %d rows each are too many rows",
                           s->n_clips, s->rows_per_clip);
        goto fail;
    }
    s->B = s->n_clips * s->rows_per_clip;
    s->n_prompt = n_prompt;
    s->max_len = max_len;
    s->n_enc = enc->n_frames;
    s->queued = s->opts.queued && m->vocab < (1 << 24);
    /* queued steps as runs of this many a graph (CT_DECODER_RUN; 1: each
     * step its own graph, as before the ninth session) */
    s->run_steps = s->queued ? run_steps_env() : 1;
    /* a beam search's parents serve the next step alone: its steps go one
     * at a time (the run's graph has no parents input) */
    if (s->run_steps > max_len - n_prompt || s->rows_per_clip > 1) s->run_steps = 1;
    /* the host's copies of the inputs: masks and ids for the prompt's
     * positions or a run's steps, whichever are more */
    int n_pos = n_prompt > s->run_steps ? n_prompt : s->run_steps;
    size_t n_host = (size_t)s->max_len * n_pos;
    if ((size_t)s->n_enc * n_prompt * s->B > n_host) n_host = (size_t)s->n_enc * n_prompt * s->B;
    s->host = tg_malloc(n_host * sizeof(float));
    s->ihost = tg_malloc((size_t)n_pos * 2 * H * s->B * sizeof(int32_t));
    s->sums = tg_malloc((size_t)n_prompt * s->B * sizeof(float));
    s->enc_valid = tg_malloc((size_t)s->B * sizeof(int));
    s->parents = tg_malloc((size_t)s->B * sizeof(int32_t));
    if (!s->host || !s->ihost || !s->sums || !s->enc_valid || !s->parents) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "decoder: out of memory");
        goto fail;
    }
    for (int r = 0; r < s->B; r++) {
        s->enc_valid[r] = enc->valid[r % s->n_clips];
        s->parents[r] = r;
    }
    s->kv_apart = kvw && !strcmp(kvw, "apart");
    const dec_mem_key key = {.backend = m->backend, .kv_type = kv_type, .B = s->B,
                             .max_len = max_len, .n_enc = s->n_enc, .layers = L, .heads = H,
                             .head_dim = hd, .queued = s->queued,
                             .scores = s->queued && s->opts.want_scores};
    /* one state at a time: a second would share the first's caches, or
     * free them under it */
    if (s->opts.keep && s->opts.keep->busy) {
        st = tg_status_new(TG_ERR_INVALID_ARG, "decoder: the kept memory is in use by another state");
        goto fail;
    }
    s->mem = s->opts.keep ? &s->opts.keep->mem : &s->own;
    if (s->opts.keep) s->opts.keep->busy = true;
    bool made = false;
    if ((st = mem_make(s->mem, &key, &made))) goto fail;
    if (s->opts.keep && made) s->opts.keep->made++;
    s->self_kv = s->mem->kv;
    s->cross_k = s->self_kv + L;
    s->cross_v = s->self_kv + 2 * L;
    s->feed = s->mem->feed;
    s->hist_ids = s->mem->hist_ids;
    s->hist_sums = s->mem->hist_sums;
    s->hist_scores = s->mem->hist_scores;
    if ((st = compute_cross(s, enc))) goto fail;
    if ((st = build_graph(s, &s->prefill, n_prompt, 1))) goto fail;
    if ((st = build_graph(s, &s->step, 1, 1))) goto fail;
    if (s->run_steps > 1 && (st = build_graph(s, &s->run, 1, s->run_steps))) goto fail;
    *out_state = s;
    return NULL;
fail:
    ct_decoder_free(s);
    return tg_status_wrap(st, "starting the decoder");
}

/* Sets the inputs of dg for tokens ids[b*n_q + t] (NULL: the tokens are
 * on the device already) at positions pos0 + t. */
static tg_status set_inputs(ct_dec_state *s, dec_graph *dg, const int32_t *ids, int pos0) {
    const ct_model *m = s->m;
    int B = s->B, n_q = dg->n_q, H = m->dec_heads;
    tg_status st = NULL;
    if (s->allocated != dg) {
        if ((st = tg_sched_alloc(s->sched, dg->g))) return st;
        s->allocated = dg;
        dg->cross_mask_set = false;
    }
    if (ids) {
        for (int i = 0; i < B * n_q; i++) {
            if (ids[i] < 0 || ids[i] >= m->vocab)
                return tg_status_new(TG_ERR_INVALID_ARG, "decoder: token id %d is outside the vocabulary of %d",
                                     ids[i], m->vocab);
        }
        if ((st = tg_tensor_set(dg->tok, ids, 0, (size_t)B * n_q * sizeof(int32_t)))) return st;
    }
    /* a run's step r is at positions pos0 + r + t; its inputs follow the
     * step before's (the outermost dimension) */
    const int R = dg->n_steps;
    for (int r = 0; r < R; r++)
        for (int b = 0; b < B; b++)
            for (int t = 0; t < n_q; t++) s->ihost[((size_t)r * B + b) * n_q + t] = pos0 + r + t;
    if ((st = tg_tensor_set(dg->pos, s->ihost, 0, (size_t)R * B * n_q * sizeof(int32_t)))) return st;
    /* cache rows written: [n_q, 2H, B] a step (K heads, then V heads) */
    for (int r = 0; r < R; r++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < 2 * H; h++)
                for (int t = 0; t < n_q; t++)
                    s->ihost[(((size_t)r * B + b) * 2 * H + h) * n_q + t] = pos0 + r + t;
    if ((st = tg_tensor_set(dg->wids, s->ihost, 0, (size_t)R * B * 2 * H * n_q * sizeof(int32_t))))
        return st;
    /* causal: position pos0 + r + t sees cache rows 0..pos0 + r + t */
    for (int r = 0; r < R; r++)
        for (int t = 0; t < n_q; t++)
            for (int j = 0; j < s->max_len; j++)
                s->host[((size_t)r * n_q + t) * s->max_len + j] = j <= pos0 + r + t ? 0.0f : -INFINITY;
    if ((st = tg_tensor_set(dg->self_mask, s->host, 0, (size_t)R * n_q * s->max_len * sizeof(float))))
        return st;
    if (dg->parents) { /* parents serve one step; then each row its own */
        st = tg_tensor_set(dg->parents, s->parents, 0, (size_t)B * sizeof(int32_t));
        for (int r = 0; r < B; r++) s->parents[r] = r;
        if (st) return st;
    }
    if (dg->cross_mask_set) return NULL;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < n_q; t++)
            for (int j = 0; j < s->n_enc; j++)
                s->host[((size_t)b * n_q + t) * s->n_enc + j] =
                    j < s->enc_valid[b] ? 0.0f : -INFINITY;
    st = tg_tensor_set(dg->cross_mask, s->host, 0, (size_t)B * n_q * s->n_enc * sizeof(float));
    /* queued steps keep it: no node writes it, and their graph stays allocated */
    dg->cross_mask_set = !st && s->queued && !ids;
    return st;
}

/* Sets the inputs of dg for tokens ids[b*n_q + t] at positions pos0 + t and
 * runs it. */
static tg_status run(ct_dec_state *s, dec_graph *dg, const int32_t *ids, int pos0) {
    tg_status st = set_inputs(s, dg, ids, pos0);
    if (!st) st = tg_sched_compute(s->sched, dg->g);
    /* weights read in place from a truncated checkpoint read as zeros */
    return st ? st : ct_model_check(s->m);
}

/* Copies the graph's outputs back: out_next[b] = ids[b][n_q - 1], and the
 * score and logits of every position when asked for and made. */
static tg_status get_outputs(ct_dec_state *s, dec_graph *dg, int32_t *out_next,
                             float *out_scores, float *out_logits) {
    int B = s->B, n_q = dg->n_q;
    size_t n = (size_t)B * n_q;
    tg_status st = NULL;
    int32_t *ids = n_q > 1 ? tg_malloc(n * sizeof(int32_t)) : out_next;
    if (!ids) return tg_status_new(TG_ERR_NO_MEMORY, "decoder: out of memory");
    st = tg_tensor_get(dg->ids, ids, 0, n * sizeof(int32_t));
    for (int b = 0; !st && n_q > 1 && b < B; b++) out_next[b] = ids[b * n_q + n_q - 1];
    if (ids != out_next) tg_free(ids);
    /* A NaN or Inf anywhere in a row's logits makes its sum non-finite
     * (finite logits of a sane model sum far below FLT_MAX): corrupt or
     * mislabelled weights would otherwise decode to a stream of <unk>. */
    if (!st) st = tg_tensor_get(dg->sums, s->sums, 0, n * sizeof(float));
    for (size_t i = 0; !st && i < n; i++)
        if (!isfinite(s->sums[i]))
            st = tg_status_new(TG_ERR_FORMAT,
                               "model %s: the decoder's logits are not finite (batch row %d); "
                               "the weights are corrupt or their dtype label is wrong",
                               s->m->dir, (int)(i / (size_t)n_q));
    if (!st && out_scores && dg->scores)
        st = tg_tensor_get(dg->scores, out_scores, 0, n * sizeof(float));
    size_t V = (size_t)s->m->vocab;
    if (!st && out_logits && dg->logits && n_q > 1 && s->opts.last_logits) /* each row's last position */
        for (int b = 0; !st && b < B; b++)
            st = tg_tensor_get(dg->logits, out_logits + b * V, ((size_t)b * n_q + n_q - 1) * V * sizeof(float),
                               V * sizeof(float));
    else if (!st && out_logits && dg->logits)
        st = tg_tensor_get(dg->logits, out_logits, 0, n * V * sizeof(float));
    return st;
}

tg_status ct_decoder_prefill(ct_dec_state *s, const int32_t *prompt, int32_t *out_next,
                             float *out_scores, float *out_logits) {
    if (!s || !prompt || !out_next)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_prefill: NULL argument");
    tg_status st = run(s, &s->prefill, prompt, 0);
    if (!st) st = get_outputs(s, &s->prefill, out_next, out_scores, out_logits);
    return tg_status_wrap(st, "decoding the prompt");
}

/* A step writes cache row pos: after the prompt, inside the cache. */
static tg_status check_step_pos(const ct_dec_state *s, int pos) {
    if (pos >= s->n_prompt && pos < s->max_len) return NULL;
    return tg_status_new(TG_ERR_INVALID_ARG, "decoder step at position %d: outside [%d, %d) of the cache", pos,
                         s->n_prompt, s->max_len);
}

tg_status ct_decoder_step(ct_dec_state *s, const int32_t *ids, int pos, int32_t *out_next,
                          float *out_scores, float *out_logits) {
    if (!s || !ids || !out_next)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_step: NULL argument");
    tg_status st;
    if ((st = check_step_pos(s, pos))) return st;
    st = run(s, &s->step, ids, pos);
    if (!st) st = get_outputs(s, &s->step, out_next, out_scores, out_logits);
    /* a queued state's step graph wrote its history too */
    if (!st && s->queued && pos + 1 > s->queued_to) s->queued_to = pos + 1;
    return tg_status_wrap(st, "decoder step at position %d", pos);
}

tg_status ct_decoder_set_parents(ct_dec_state *s, const int32_t *parents) {
    if (!s || !parents) return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_set_parents: NULL argument");
    if (s->rows_per_clip < 2)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_set_parents: the decoder was begun with one row a clip");
    for (int r = 0; r < s->B; r++)
        if (parents[r] < 0 || parents[r] >= s->B || parents[r] % s->n_clips != r % s->n_clips)
            return tg_status_new(TG_ERR_INVALID_ARG,
                                 "ct_decoder_set_parents: row %d's parent %d is not a row of its clip", r,
                                 parents[r]);
    memcpy(s->parents, parents, (size_t)s->B * sizeof(int32_t));
    return NULL;
}

tg_status ct_decoder_queue_step(ct_dec_state *s, int pos) {
    if (!s) return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_queue_step: NULL argument");
    if (!s->queued)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_queue_step: the decoder was begun without queued steps");
    return ct_decoder_queue_steps(s, pos, 1);
}

tg_status ct_decoder_queue_steps(ct_dec_state *s, int pos0, int n) {
    if (!s || n < 0) return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_queue_steps: NULL state or %d steps", n);
    if (!s->queued)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_queue_steps: the decoder was begun without queued steps");
    if (n == 0) return NULL;
    tg_status st;
    if ((st = check_step_pos(s, pos0))) return st;
    if (n > s->max_len - pos0) return check_step_pos(s, s->max_len);
    /* whole runs as one graph each, then the rest a step at a time */
    while (n > 0) {
        dec_graph *dg = s->run.g && n >= s->run.n_steps ? &s->run : &s->step;
        st = set_inputs(s, dg, NULL, pos0);
        if (!st) st = tg_sched_compute_async(s->sched, dg->g);
        if (st) return tg_status_wrap(st, "queueing the decoder steps at positions %d..%d", pos0, pos0 + dg->n_steps - 1);
        s->n_runs += dg == &s->run;
        pos0 += dg->n_steps;
        n -= dg->n_steps;
        if (pos0 > s->queued_to) s->queued_to = pos0;
    }
    return NULL;
}

tg_status ct_decoder_read_steps(ct_dec_state *s, int pos0, int n, int32_t *out_ids, float *out_scores) {
    if (!s || !out_ids || n <= 0)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_read_steps: NULL state or ids, or %d steps", n);
    if (!s->queued)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_read_steps: the decoder was begun without queued steps");
    if (pos0 < s->n_prompt || pos0 + n > s->queued_to)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_decoder_read_steps: positions [%d, %d) were not queued",
                             pos0, pos0 + n);
    int B = s->B;
    size_t cnt = (size_t)n * B, off = (size_t)pos0 * B * sizeof(float);
    float *buf = tg_malloc(cnt * sizeof(float));
    if (!buf) return tg_status_new(TG_ERR_NO_MEMORY, "decoder: out of memory");
    /* waits for the queued steps */
    tg_status st = tg_sched_synchronize(s->sched);
    if (!st) st = tg_tensor_get(s->hist_ids, buf, off, cnt * sizeof(float));
    for (size_t i = 0; !st && i < cnt; i++) out_ids[i] = (int32_t)buf[i];
    if (!st) st = tg_tensor_get(s->hist_sums, buf, off, cnt * sizeof(float));
    for (size_t i = 0; !st && i < cnt; i++)
        if (!isfinite(buf[i]))
            st = tg_status_new(TG_ERR_FORMAT,
                               "model %s: the decoder's logits are not finite (batch row %d, position %d); "
                               "the weights are corrupt or their dtype label is wrong",
                               s->m->dir, (int)(i % (size_t)B), pos0 + (int)(i / (size_t)B));
    if (!st && out_scores && s->hist_scores)
        st = tg_tensor_get(s->hist_scores, out_scores, off, cnt * sizeof(float));
    tg_free(buf);
    if (!st) st = ct_model_check(s->m);
    return tg_status_wrap(st, "reading decoder steps %d..%d", pos0, pos0 + n - 1);
}

bool ct_decoder_is_queued(const ct_dec_state *s) { return s && s->queued; }

int ct_decoder_runs_queued(const ct_dec_state *s) { return s ? s->n_runs : 0; }
