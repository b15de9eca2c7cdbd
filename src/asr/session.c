/*
 * session.c: the public transcription API (include/cohere_transcribe.h).
 *
 * A session owns the backends, the scheduler, the model, the tokenizer and
 * the mel frontend. A transcription is: split the audio into chunks by
 * energy (spec 5.4), run the chunks in batches through the four stages of
 * pipeline.h (log-mel features padded to the batch's longest, the encoder,
 * greedy decoding or beam search with the prompt of spec 5.2, the
 * tokenizer's text), and
 * rejoin the chunk texts by spec 5.4's rules.
 *
 * The debug hook hears from the pipeline's observer between the stages,
 * each clip cut to its own length, so what it reports does not depend on
 * how clips were batched.
 *
 * Faults (issue 12): a batch that runs out of memory is halved and its
 * clips run again, down to one clip, and the session keeps the halved size
 * for later batches (the memory it ran out of will not grow back). A device
 * fault that leaves a backend failed (tg_backend_failed: a CUDA context's
 * sticky error) fails the call with the backend's text, and the session
 * frees everything that lives in its backends, makes them again on the same
 * kind of device and reloads the weights, so that the next call runs; when
 * that fails too, every later call says so. Both are counted
 * (ct_session_fault_stats).
 *
 * Not here: decoding audio files (src/audio: ct_audio_load), segments with
 * times, subtitles and output files (the CLI and asr/output*), streaming.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio.h"
#include "base.h"
#include "beam.h"
#include "cohere_transcribe.h"
#include "greedy.h"
#include "model.h"
#include "pipeline.h"
#include "text.h"
#include "tokenizer.h"

#define SAMPLE_RATE 16000
#define MAX_PROMPT 16

struct ct_session {
    ct_options opts;
    char *model_dir;
    char language[8];
    bool punctuation;
    bool f32;
    tg_backend *backends[2];
    int n_backends;
    tg_sched *sched;
    ct_model *model;
    ct_tokenizer *tok;
    ct_mel mel;
    bool mel_ready;
    tg_threadpool *pool; /* the frontend's clips of a batch in parallel */
    ct_frontend *frontend; /* the log-mel on backends[0] (a GPU); NULL: on the host */
    int frontend_mode;     /* CT_FRONTEND as read at open: 0 auto, 1 host, 2 backend */
    int32_t prompt[MAX_PROMPT];
    int n_prompt;
    int eos_id, pad_id;
    int dump_index;
    char backend_name[96];
    /* the last batch's encoder output, in backend memory; kept so that the
     * next batch of the same shape writes the same addresses (pipeline.h) */
    ct_enc_result enc;
    /* the batches' feature rows (window grids on a GPU), kept from batch to
     * batch in backends[0]'s host memory (pipeline.h); CT_ROWS=fresh (new
     * memory each batch, as before) or =pageable (kept, not page-locked),
     * read at open, are for measuring */
    ct_row_store rows;
    int rows_mode; /* 0 kept in the backend's host memory, 1 fresh, 2 pageable */
    /* the decoder's memory (caches, cross K/V), kept from batch to batch so
     * that a repeated batch shape has the same addresses and a GPU replays
     * the decoder's graphs from the first step (model.h); NULL with
     * CT_DECODER_KEEP=0 (each batch its own, as before; for measuring) */
    ct_dec_keep *dec_keep;
    tg_abort_fn abort;
    void *abort_user;
    ct_backend_kind kind;    /* the backends' device, for making them again */
    ct_fault_stats faults;
    ct_open_times open_times;
    char lost[512];          /* why the backends could not be made again ("": they were);
                                once set, the session stays without them */
};

void ct_options_init(ct_options *o) {
    memset(o, 0, sizeof *o);
    o->backend = CT_BACKEND_AUTO;
    o->language = "en";
    o->punctuation = true;
    o->max_new_tokens = 256;
    o->beam_size = 1;
    o->batch_size = 1;
    o->f32 = -1;
}

ct_status ct_backend_parse(const char *name, ct_backend_kind *out_kind) {
    if (name && !strcmp(name, "cpu")) *out_kind = CT_BACKEND_CPU;
    else if (name && !strcmp(name, "cuda")) *out_kind = CT_BACKEND_CUDA;
    else if (name && !strcmp(name, "auto")) *out_kind = CT_BACKEND_AUTO;
    else
        return tg_status_new(TG_ERR_INVALID_ARG, "unknown backend '%s' (use cpu, cuda or auto)",
                             name ? name : "(null)");
    return NULL;
}

const char *ct_session_backend(const ct_session *s) { return s ? s->backend_name : ""; }

const char *ct_session_frontend(const ct_session *s) { return s && s->frontend ? "backend" : "host"; }

void ct_session_set_progress(ct_session *s, ct_progress_fn fn, void *user) {
    if (!s) return;
    s->opts.progress = fn;
    s->opts.progress_user = user;
}

int ct_session_pad_id(const ct_session *s) { return s ? s->pad_id : -1; }

void ct_session_stats(const ct_session *s, tg_backend_stats *out) {
    tg_backend_get_stats(s ? s->backends[0] : NULL, out);
}

void ct_session_reset_stats(ct_session *s) {
    if (s) tg_backend_reset_stats(s->backends[0]);
}

void ct_session_open_times(const ct_session *s, ct_open_times *out) {
    if (!out) return;
    if (s) *out = s->open_times;
    else memset(out, 0, sizeof *out);
}

void ct_session_fault_stats(const ct_session *s, ct_fault_stats *out) {
    if (!out) return;
    if (s) *out = s->faults;
    else memset(out, 0, sizeof *out);
}

ct_status ct_session_set_language(ct_session *s, const char *language, bool punctuation) {
    if (!s || !language)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_session_set_language: NULL argument");
    int32_t ids[MAX_PROMPT];
    int n = 0;
    tg_status st = ct_tokenizer_prompt(s->tok, language, punctuation, ids, &n);
    if (st) return st;
    if (n <= 0 || n > MAX_PROMPT)
        return tg_status_new(TG_ERR_INTERNAL, "prompt of %d tokens", n);
    memcpy(s->prompt, ids, (size_t)n * sizeof(int32_t));
    s->n_prompt = n;
    snprintf(s->language, sizeof s->language, "%s", language);
    s->punctuation = punctuation;
    return NULL;
}

ct_status ct_session_set_max_new_tokens(ct_session *s, int n) {
    if (!s || n <= 0)
        return tg_status_new(TG_ERR_INVALID_ARG, "max_new_tokens must be positive (got %d)", n);
    s->opts.max_new_tokens = n;
    return NULL;
}

void ct_session_set_abort(ct_session *s, tg_abort_fn fn, void *user) {
    if (!s) return;
    s->abort = fn;
    s->abort_user = user;
    for (int i = 0; i < s->n_backends; i++) tg_backend_set_abort(s->backends[i], fn, user);
}

const char *ct_session_dtype(const ct_session *s) { return s && s->f32 ? "fp32" : "bf16"; }

/* Opens the backends for `kind` (the CPU always, as the fallback) and
 * records the kind they run on in s->kind. */
static tg_status open_backends(ct_session *s, ct_backend_kind kind) {
    const ct_options *o = &s->opts;
    tg_status st = NULL;
    tg_backend *cuda = NULL, *cpu = NULL;
    if (kind != CT_BACKEND_CPU) {
        st = tg_backend_cuda_new(0, &cuda);
        if (st && kind == CT_BACKEND_CUDA)
            return tg_status_wrap(st, "backend cuda: the CUDA backend is not available (--backend cpu or auto runs on the CPU)");
        if (st) {
            TG_INFO("no CUDA backend (%s); running on the CPU", tg_status_message(st));
            tg_status_free(st);
            cuda = NULL;
        }
    }
    if ((st = tg_backend_cpu_new(o->n_threads, &cpu))) {
        tg_backend_free(cuda);
        return tg_status_wrap(st, "starting the CPU backend");
    }
    s->n_backends = 0;
    if (cuda) s->backends[s->n_backends++] = cuda;
    s->backends[s->n_backends++] = cpu;
    s->kind = cuda ? CT_BACKEND_CUDA : CT_BACKEND_CPU;
    s->rows.backend = s->rows_mode == 0 ? s->backends[0] : NULL;
    snprintf(s->backend_name, sizeof s->backend_name, "%s", tg_backend_name(s->backends[0]));
    return NULL;
}

/* Frees what lives in the backends' memory (the kept encoder output, the
 * weights, the scheduler's arenas) and then the backends. */
static void close_backends(ct_session *s) {
    ct_enc_result_free(&s->enc);
    ct_dec_keep_release(s->dec_keep);
    ct_row_store_free(&s->rows); /* the backend's host memory: before the backend */
    s->rows.backend = NULL;
    ct_frontend_free(s->frontend);
    s->frontend = NULL;
    ct_model_free(s->model);
    s->model = NULL;
    tg_sched_free(s->sched);
    s->sched = NULL;
    for (int i = 0; i < s->n_backends; i++) {
        tg_backend_free(s->backends[i]);
        s->backends[i] = NULL; /* ct_session_stats reads backends[0] */
    }
    s->n_backends = 0;
}

/* On a GPU the log-mel frontend runs there, in the encoder's graph
 * (src/model/frontend.c): a batch's features never cross to the host, and
 * the host's share is one pass over the samples. The CPU keeps mel.c's
 * double-precision frontend. CT_FRONTEND=host keeps it on a GPU too, and
 * CT_FRONTEND=backend puts the graph on any backend (the CPU tests of that
 * path); the variable is read once, when the session opens, so a restart
 * after a fault makes the same choice. */
static tg_status read_frontend_mode(ct_session *s) {
    const char *e = getenv("CT_FRONTEND");
    if (!e || !*e) s->frontend_mode = 0;
    else if (!strcmp(e, "host")) s->frontend_mode = 1;
    else if (!strcmp(e, "backend")) s->frontend_mode = 2;
    else return tg_status_new(TG_ERR_INVALID_ARG, "CT_FRONTEND=%s: use host or backend", e);
    return NULL;
}

static tg_status open_frontend(ct_session *s) {
    bool on_backend = s->frontend_mode ? s->frontend_mode == 2 : !tg_backend_is_cpu(s->backends[0]);
    if (!on_backend) return NULL;
    float *dft = tg_malloc((size_t)CT_MEL_SPEC * CT_MEL_GRID_WIN * sizeof *dft);
    float *pairs = tg_malloc((size_t)s->mel.n_mels * CT_MEL_SPEC * sizeof *pairs);
    tg_status st = NULL;
    if (!dft || !pairs) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "the frontend's tables: out of memory");
    } else {
        ct_mel_dft_table(&s->mel, dft);
        ct_mel_filter_pairs(&s->mel, pairs);
        st = ct_frontend_new(s->backends[0], s->mel.n_mels, CT_MEL_GRID_WIN, CT_MEL_GRID_HOP,
                             CT_MEL_SPEC, dft, pairs, &s->frontend);
    }
    tg_free(dft);
    tg_free(pairs);
    return st;
}

/* Opens the backends of s->kind, the scheduler and the model on them (and
 * the frontend's tables, once the mel frontend exists). */
static tg_status open_model(ct_session *s, ct_backend_kind kind) {
    double t0 = tg_clock_now_ms();
    tg_status st = open_backends(s, kind);
    if (!st) st = tg_sched_new(s->backends, s->n_backends, &s->sched);
    double t1 = tg_clock_now_ms();
    if (!st) st = ct_model_load(s->model_dir, s->backends[0], &s->model);
    s->open_times.backends_ms = t1 - t0;
    s->open_times.weights_ms = tg_clock_now_ms() - t1;
    s->open_times.weights_bytes = s->model ? s->model->bytes_copied : 0;
    s->open_times.mapped_bytes = s->model ? s->model->bytes_in_place : 0;
    if (!st && s->mel_ready) st = open_frontend(s);
    for (int i = 0; !st && i < s->n_backends; i++)
        tg_backend_set_abort(s->backends[i], s->abort, s->abort_user);
    return st;
}

/* The first failed backend's fault, NULL while all can compute. */
static const char *backend_fault(const ct_session *s) {
    for (int i = 0; i < s->n_backends; i++) {
        const char *f = tg_backend_failed(s->backends[i]);
        if (f) return f;
    }
    return NULL;
}

/* After a device fault that failed a backend: makes the backends and the
 * model again on the same device, and returns st (the call's error, which
 * it takes) saying whether the next call can run. */
static tg_status restart_after_fault(ct_session *s, tg_status st) {
    TG_WARN("%s: %s; making the session's backends again", s->backend_name, backend_fault(s));
    close_backends(s);
    s->faults.backend_restarts++;
    tg_status again = open_model(s, s->kind);
    tg_status out;
    if (!again) {
        out = tg_status_new(tg_status_code(st), "%s (the session's backends were recreated; "
                                                "the next call runs on new ones)",
                            tg_status_message(st));
    } else {
        snprintf(s->lost, sizeof s->lost, "%s", tg_status_message(again));
        close_backends(s);
        out = tg_status_new(tg_status_code(st), "%s (recreating the session's backends failed "
                                                "too: %s; close the session)",
                            tg_status_message(st), s->lost);
    }
    tg_status_free(again);
    tg_status_free(st);
    return out;
}

/* NULL while the session has its model; the error of a session whose
 * backends could not be made again after a device fault. */
static tg_status check_usable(const ct_session *s) {
    if (s->model) return NULL;
    return tg_status_new(TG_ERR_DEVICE, "the session has no backend since a device fault "
                                        "(making it again failed: %s); close the session and "
                                        "open a new one",
                         s->lost);
}

void ct_session_close(ct_session *s) {
    if (!s) return;
    close_backends(s);
    ct_dec_keep_free(s->dec_keep);
    ct_tokenizer_free(s->tok);
    if (s->mel_ready) ct_mel_free(&s->mel);
    tg_threadpool_free(s->pool);
    tg_free(s->model_dir);
    tg_free(s);
}

ct_status ct_session_open(const ct_options *opts, ct_session **out_session) {
    if (!opts || !out_session)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_session_open: NULL argument");
    *out_session = NULL;
    if (!opts->model_dir || !opts->model_dir[0])
        return tg_status_new(TG_ERR_INVALID_ARG, "no model directory given");
    if (opts->max_new_tokens <= 0)
        return tg_status_new(TG_ERR_INVALID_ARG, "max_new_tokens must be positive (got %d)",
                             opts->max_new_tokens);
    if (opts->batch_size <= 0)
        return tg_status_new(TG_ERR_INVALID_ARG, "batch_size must be positive (got %d)",
                             opts->batch_size);
    if (opts->beam_size < 0 || opts->beam_size > CT_MAX_BEAMS)
        return tg_status_new(TG_ERR_INVALID_ARG, "beam_size must be 1 (greedy; 0 means 1) to %d (got %d)",
                             CT_MAX_BEAMS, opts->beam_size);
    if (opts->frame_bucket < 0 || opts->frame_bucket > 4096)
        return tg_status_new(TG_ERR_INVALID_ARG, "frame_bucket must be in [0, 4096] (got %d)",
                             opts->frame_bucket);
    double t0 = tg_clock_now_ms();
    tg_status st = NULL;
    ct_session *s = tg_calloc(1, sizeof *s);
    if (!s) return tg_status_new(TG_ERR_NO_MEMORY, "opening a session: out of memory");
    s->opts = *opts;
    s->model_dir = tg_strdup(opts->model_dir);
    if (!s->model_dir) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "opening a session: out of memory");
        goto fail;
    }
    s->opts.model_dir = s->model_dir;
    s->opts.language = NULL; /* copied into s->language below */

    if ((st = read_frontend_mode(s))) goto fail;
    const char *rows_env = getenv("CT_ROWS");
    s->rows_mode = !rows_env || !*rows_env ? 0 : !strcmp(rows_env, "fresh") ? 1 : !strcmp(rows_env, "pageable") ? 2 : -1;
    if (s->rows_mode < 0) {
        st = tg_status_new(TG_ERR_INVALID_ARG, "CT_ROWS=%s: expected fresh or pageable (unset: kept, page-locked)",
                           rows_env);
        goto fail;
    }
    const char *keep_env = getenv("CT_DECODER_KEEP");
    if (keep_env && *keep_env && strcmp(keep_env, "0") && strcmp(keep_env, "1")) {
        st = tg_status_new(TG_ERR_INVALID_ARG, "CT_DECODER_KEEP=%s: expected 0 or 1 (unset: 1, kept)",
                           keep_env);
        goto fail;
    }
    if (!(keep_env && !strcmp(keep_env, "0")) && !(s->dec_keep = ct_dec_keep_new())) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "opening a session: out of memory");
        goto fail;
    }
    if ((st = open_model(s, opts->backend))) goto fail;
    if ((st = ct_tokenizer_load_dir(s->model_dir, &s->tok)))
        goto fail;
    if (ct_tokenizer_size(s->tok) != s->model->vocab)
        TG_WARN("%s: the tokenizer has %d pieces but the model %d", s->model_dir,
                ct_tokenizer_size(s->tok), s->model->vocab);
    if (s->model->cfg.sample_rate != SAMPLE_RATE) {
        st = tg_status_new(TG_ERR_UNSUPPORTED, "%s: config.json asks for %d Hz audio; the "
                           "frontend makes %d Hz features only (spec 4)", s->model_dir,
                           s->model->cfg.sample_rate, SAMPLE_RATE);
        goto fail;
    }
    if ((st = ct_mel_init(&s->mel))) goto fail;
    s->mel_ready = true;
    if ((st = open_frontend(s))) goto fail;
    /* One frontend thread per core (or --threads): a batch's clips are
     * independent, and on a GPU the frontend is the host's whole share. */
    if ((opts->n_threads > 1 || (opts->n_threads <= 0 && tg_cpu_count() > 1)) &&
        (st = tg_threadpool_new(opts->n_threads, &s->pool)))
        goto fail;
    if (s->mel.n_mels != s->model->n_mels) {
        st = tg_status_new(TG_ERR_UNSUPPORTED, "%s: the model wants %d mel bins; the frontend "
                           "makes %d", s->model_dir, s->model->n_mels, s->mel.n_mels);
        goto fail;
    }
    if ((st = ct_session_set_language(s, opts->language ? opts->language : "en",
                                      opts->punctuation)))
        goto fail;
    const ct_config *c = &s->model->cfg;
    s->eos_id = c->eos_token_id >= 0 ? c->eos_token_id : ct_tokenizer_id(s->tok, "<|endoftext|>");
    s->pad_id = c->pad_token_id >= 0 ? c->pad_token_id : ct_tokenizer_id(s->tok, "<pad>");
    if (s->eos_id < 0 || s->eos_id >= s->model->vocab || s->pad_id < 0 ||
        s->pad_id >= s->model->vocab) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: no usable EOS/pad token ids (eos %d, pad %d)",
                           s->model_dir, s->eos_id, s->pad_id);
        goto fail;
    }
    s->f32 = opts->f32 < 0 ? tg_backend_is_cpu(s->backends[0]) : opts->f32 != 0;
    s->open_times.total_ms = tg_clock_now_ms() - t0;
    *out_session = s;
    return NULL;
fail:
    ct_session_close(s);
    return tg_status_wrap(st, "opening %s", opts->model_dir);
}

void ct_result_free(ct_result *r) {
    if (!r) return;
    tg_free(r->text);
    tg_free(r->tokens);
    tg_free(r);
}

/* ---------------------------------------------------------------- batches */

/* Runs clips[0..n) as one padded batch through the four stages
 * (pipeline.h); clip i's text goes to outs[slots[i]] (slots NULL: i). The
 * debug hook hears from the observer between the stages. */
static tg_status run_batch(ct_session *s, const float *const *clips, const size_t *lens,
                           const int *slots, int n, ct_clip_text *outs, ct_timings *tm) {
    const ct_pipe p = {.model = s->model,
                       .sched = s->sched,
                       .mel = &s->mel,
                       /* a dump hook hears the host's features, the ones the
                        * encoder then reads */
                       .frontend = s->opts.dump ? NULL : s->frontend,
                       .pool = s->pool,
                       .rows = s->rows_mode == 1 ? NULL : &s->rows,
                       .dec_keep = s->dec_keep,
                       .tok = s->tok,
                       .prompt = s->prompt,
                       .n_prompt = s->n_prompt,
                       .eos_id = s->eos_id,
                       .pad_id = s->pad_id,
                       .frame_bucket = s->opts.frame_bucket,
                       .max_new_tokens = s->opts.max_new_tokens,
                       .beams = s->opts.beam_size,
                       .f32 = s->f32,
                       .ignore_eos = s->opts.ignore_eos,
                       .keep_intermediates = s->opts.dump != NULL,
                       .stop_loops = s->opts.stop_repetition_loops,
                       .abort = s->abort,
                       .abort_user = s->abort_user};
    const ct_pipe_observer obs = {s->opts.dump, s->opts.dump_user, s->dump_index};
    ct_feature_batch fb = {0};
    ct_enc_result *enc = &s->enc;
    ct_greedy_result dec = {0};
    tg_status st = NULL;

    double t0 = tg_clock_now_ms();
    if ((st = ct_pipe_features(&p, clips, lens, slots, n, &fb))) goto done;
    double t1 = tg_clock_now_ms();
    tm->frontend_ms += t1 - t0;
    if ((st = ct_pipe_observe_features(&obs, &fb))) goto done;

    t1 = tg_clock_now_ms();
    if ((st = ct_pipe_encode(&p, &fb, enc))) goto done;
    double t2 = tg_clock_now_ms();
    tm->encoder_ms += t2 - t1;
    if ((st = ct_pipe_observe_encoded(&obs, &fb, enc))) goto done;

    t2 = tg_clock_now_ms();
    st = ct_pipe_decode(&p, enc, &dec);
    tm->decoder_ms += tg_clock_now_ms() - t2;
    if (enc->n_hidden) ct_enc_result_free(enc); /* every layer's states: not kept */
    if (st) goto done;
    if ((st = ct_pipe_observe_decoded(&obs, &p, &dec))) goto done;

    if ((st = ct_pipe_text(&p, &dec, fb.clip, outs))) goto done;
    s->dump_index += n;
done:
    ct_feature_batch_free(&fb);
    ct_greedy_result_free(&dec);
    return st;
}

/* Runs n clips in batches of `size` (at most the session's limit, after a
 * batch ran out of memory); clip i's text goes to outs[slots[i]] (slots
 * NULL: outs[i]). A batch that runs out of memory is halved and its clips
 * run again; one that leaves a backend failed ends the call (and makes the
 * backends again). `progress`: report the clips done. */
static tg_status run_batches(ct_session *s, const float *const *clips, const size_t *lens,
                             const int *slots, int n, int size, ct_clip_text *outs,
                             ct_timings *tm, bool progress) {
    for (int done = 0; done < n;) {
        int bs = s->faults.batch_limit > 0 && size > s->faults.batch_limit ? s->faults.batch_limit
                                                                           : size;
        if (bs > n - done) bs = n - done;
        ct_clip_text *o = slots ? outs : outs + done;
        const int *sl = slots ? slots + done : NULL;
        tg_status st = run_batch(s, clips + done, lens + done, sl, bs, o, tm);
        if (st && backend_fault(s)) return restart_after_fault(s, st);
        if (st && tg_status_code(st) == TG_ERR_NO_MEMORY && bs > 1) {
            TG_WARN("a batch of %d clips ran out of memory (%s); halving it to %d and running "
                    "its clips again (later batches of this session: at most %d)",
                    bs, tg_status_message(st), bs / 2, bs / 2);
            tg_status_free(st);
            for (int i = 0; i < bs; i++) ct_clip_text_free(&o[sl ? sl[i] : i]);
            /* give back what the larger batch held, so the retry has it */
            ct_enc_result_free(&s->enc);
            ct_dec_keep_release(s->dec_keep);
            ct_row_store_free(&s->rows);
            tg_sched_release(s->sched);
            s->faults.batch_limit = bs / 2;
            s->faults.oom_halvings++;
            continue;
        }
        if (st) return st;
        done += bs;
        if (progress && s->opts.progress) s->opts.progress(s->opts.progress_user, done, n);
    }
    return NULL;
}

/* ----------------------------------------------------------------- joining */

/* spec 5.4 (text.h): drop empty chunk texts, strip them, join with " " (or
 * "" for ja and zh); the tokens of every chunk are concatenated. */
static tg_status join_texts(const ct_session *s, ct_clip_text *outs, int n, ct_result *r) {
    const char *sep = !strcmp(s->language, "ja") || !strcmp(s->language, "zh") ? "" : " ";
    size_t n_tok = 0;
    for (int i = 0; i < n; i++) n_tok += (size_t)outs[i].n_tokens;
    char **texts = tg_malloc((size_t)(n > 0 ? n : 1) * sizeof(char *));
    r->tokens = tg_malloc((n_tok ? n_tok : 1) * sizeof(int32_t));
    if (!texts || !r->tokens) {
        tg_free(texts);
        return tg_status_new(TG_ERR_NO_MEMORY, "joining: out of memory");
    }
    r->finish = CT_FINISH_EOS;
    for (int i = 0; i < n; i++) {
        if (outs[i].finish == CT_FINISH_LENGTH ||
            (outs[i].finish == CT_FINISH_REPETITION && r->finish == CT_FINISH_EOS))
            r->finish = outs[i].finish;
        texts[i] = outs[i].text;
        memcpy(r->tokens + r->n_tokens, outs[i].tokens, (size_t)outs[i].n_tokens * sizeof(int32_t));
        r->n_tokens += outs[i].n_tokens;
    }
    tg_status st = ct_text_join(texts, n, sep, &r->text);
    tg_free(texts);
    return st;
}

static void free_outs(ct_clip_text *outs, int n) {
    for (int i = 0; outs && i < n; i++) ct_clip_text_free(&outs[i]);
    tg_free(outs);
}

static tg_status check_len(const float *samples, size_t n) {
    if (!samples || n == 0) return tg_status_new(TG_ERR_INVALID_ARG, "empty audio (0 samples)");
    if (n < 2 * 160)
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "audio too short: %zu samples (need at least 320, 20 ms at 16 kHz)",
                             n);
    return NULL;
}

/* Every sample of n clips finite, checked on the session's threads (a
 * batch of 64 clips of 35 s is 36 M samples: 12 ms on one core a sample at
 * a time, before anything else ran). `many`: name the clip in the error. */
static tg_status check_finite(const ct_session *s, const float *const *clips, const size_t *lens,
                              int n, bool many) {
    int c;
    size_t i;
    tg_status st = ct_audio_find_nonfinite(clips, lens, n, s->pool, &c, &i);
    if (st || c < 0) return st;
    const char *what = isnan(clips[c][i]) ? "NaN" : "infinite";
    if (many) return tg_status_new(TG_ERR_INVALID_ARG, "clip %d: audio sample %zu is %s", c, i, what);
    return tg_status_new(TG_ERR_INVALID_ARG, "audio sample %zu is %s", i, what);
}

ct_status ct_transcribe_pcm(ct_session *s, const float *samples, size_t n,
                            ct_result **out_result) {
    if (!s || !out_result)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_transcribe_pcm: NULL argument");
    *out_result = NULL;
    tg_status st = check_len(samples, n);
    if (!st) st = check_finite(s, &samples, &n, 1, false);
    if (!st) st = check_usable(s);
    if (st) return st;
    size_t (*bounds)[2] = NULL;
    int n_chunks = 0;
    ct_clip_text *outs = NULL;
    const float **clips = NULL;
    size_t *lens = NULL;
    int *slot = NULL;
    ct_result *r = tg_calloc(1, sizeof *r);
    if (!r) return tg_status_new(TG_ERR_NO_MEMORY, "transcribing: out of memory");
    r->duration_s = (double)n / SAMPLE_RATE;

    const ct_config *c = &s->model->cfg;
    double t0 = tg_clock_now_ms();
    st = ct_split_chunks(samples, n, SAMPLE_RATE, c->max_audio_clip_s > 0 ? c->max_audio_clip_s : 35,
                         c->overlap_chunk_s >= 0 ? c->overlap_chunk_s : 5, &bounds, &n_chunks);
    if (st) goto fail;
    r->timings.frontend_ms += tg_clock_now_ms() - t0;
    outs = tg_calloc((size_t)n_chunks, sizeof *outs);
    clips = tg_calloc((size_t)n_chunks, sizeof *clips);
    lens = tg_calloc((size_t)n_chunks, sizeof *lens);
    slot = tg_calloc((size_t)n_chunks, sizeof *slot);
    if (!outs || !clips || !lens || !slot) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "transcribing: out of memory");
        goto fail;
    }
    /* a sliver too short for the frontend (< 2 frames) transcribes to nothing */
    int n_run = 0;
    for (int i = 0; i < n_chunks; i++) {
        size_t len = bounds[i][1] - bounds[i][0];
        if (len < 2 * 160) {
            TG_DEBUG("chunk %d has only %zu samples; skipped", i, len);
            outs[i].text = tg_strdup("");
            outs[i].tokens = tg_malloc(sizeof(int32_t));
            if (!outs[i].text || !outs[i].tokens) {
                st = tg_status_new(TG_ERR_NO_MEMORY, "transcribing: out of memory");
                goto fail;
            }
            continue;
        }
        clips[n_run] = samples + bounds[i][0];
        lens[n_run] = len;
        slot[n_run++] = i;
    }
    /* run in batches; clip j of the run list is chunk slot[j] */
    if ((st = run_batches(s, clips, lens, slot, n_run, s->opts.batch_size, outs, &r->timings,
                          true)))
        goto fail;
    r->n_chunks = n_chunks;
    if ((st = join_texts(s, outs, n_chunks, r))) goto fail;
    free_outs(outs, n_chunks);
    tg_free(bounds);
    tg_free(clips);
    tg_free(lens);
    tg_free(slot);
    *out_result = r;
    return NULL;
fail:
    free_outs(outs, n_chunks);
    tg_free(bounds);
    tg_free(clips);
    tg_free(lens);
    tg_free(slot);
    ct_result_free(r);
    return st;
}

ct_status ct_transcribe_file(ct_session *s, const char *path, ct_result **out_result) {
    if (!s || !path || !out_result)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_transcribe_file: NULL argument");
    *out_result = NULL;
    double t0 = tg_clock_now_ms();
    ct_audio a = {0};
    tg_status st = ct_audio_load(path, &a);
    if (st) {
        ct_audio_free(&a);
        return st;
    }
    double load = tg_clock_now_ms() - t0;
    st = ct_transcribe_pcm(s, a.samples, a.n, out_result);
    ct_audio_free(&a);
    if (st) return tg_status_wrap(st, "%s", path);
    (*out_result)->timings.load_ms = load;
    return NULL;
}

ct_status ct_transcribe_batch(ct_session *s, const float *const *clips, const size_t *n,
                              int n_clips, ct_result **out_results) {
    if (!s || !clips || !n || n_clips <= 0 || !out_results)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_transcribe_batch: bad arguments");
    for (int i = 0; i < n_clips; i++) out_results[i] = NULL;
    tg_status usable = check_usable(s);
    if (usable) return usable;
    const ct_config *c = &s->model->cfg;
    double max_s = c->max_audio_clip_s > 0 ? c->max_audio_clip_s : 35;
    for (int i = 0; i < n_clips; i++) {
        tg_status st = check_len(clips[i], n[i]);
        if (st) return tg_status_wrap(st, "clip %d", i);
        if ((double)n[i] / SAMPLE_RATE > max_s)
            return tg_status_new(TG_ERR_INVALID_ARG,
                                 "clip %d is %.1f s, longer than the model's %.0f s clip limit "
                                 "(use ct_transcribe_pcm, which splits it)",
                                 i, (double)n[i] / SAMPLE_RATE, max_s);
    }
    tg_status bad = check_finite(s, clips, n, n_clips, true);
    if (bad) return bad;
    ct_timings tm = {0};
    ct_clip_text *outs = tg_calloc((size_t)n_clips, sizeof *outs);
    if (!outs) return tg_status_new(TG_ERR_NO_MEMORY, "transcribing: out of memory");
    tg_status st = run_batches(s, clips, n, NULL, n_clips, n_clips, outs, &tm, false);
    for (int i = 0; !st && i < n_clips; i++) {
        ct_result *r = tg_calloc(1, sizeof *r);
        if (!r) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "transcribing: out of memory");
            break;
        }
        out_results[i] = r;
        r->duration_s = (double)n[i] / SAMPLE_RATE;
        r->timings = tm; /* the batch's stages, shared */
        st = join_texts(s, &outs[i], 1, r);
        r->n_chunks = 1;
    }
    free_outs(outs, n_clips);
    if (st)
        for (int i = 0; i < n_clips; i++) {
            ct_result_free(out_results[i]);
            out_results[i] = NULL;
        }
    return st;
}
