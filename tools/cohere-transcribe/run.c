/*
 * run.c: the transcription run over every pending input.
 *
 *   producer thread: input -> ct_pcm_load -> ct_segment_audio -> queue
 *   main thread:     queue -> open files' segments -> batches ->
 *                    ct_transcribe_batch -> retries -> per-file results ->
 *                    output set (or stdout)
 *
 * Why this shape: decoding and segmenting the next files overlaps the
 * model's work on the current batch, and packing segments of many files by
 * length keeps batches full and their padding small. Memory stays bounded:
 * the queue holds QUEUE_CAP decoded files, and the main thread keeps at
 * most MAX_OPEN files open (decoded, waiting for segments), topping up only
 * while fewer than WINDOW_BATCHES batches of segments wait. So the sort by
 * length is over that window, not over every file of a run; a file's
 * segments are put back in their order whatever batches they ran in, and
 * text on stdout comes out in input order.
 *
 * A segment that ends at the token limit without end-of-text is run again
 * alone with --max-retry-tokens. A batch that fails (other than by an
 * abort) is run again clip by clip, so one bad segment fails only its file;
 * after a device fault the session has made its backends again by then
 * (session.c), so the clips run on new ones, and a batch that ran out of
 * memory was halved inside the session already.
 *
 * Not here: parsing, the input list, rendering (the library's ct_render).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "cli.h"

#define QUEUE_CAP 4
#define MAX_OPEN 32
#define WINDOW_BATCHES 4
#define MIN_SAMPLES 320 /* the frontend needs two frames (ct_transcribe_pcm) */

/* ------------------------------------------------------------- the queue */

typedef struct loaded {
    int input;
    ct_pcm pcm;
    ct_span *spans;
    int n_spans;
    char *error;
    double load_ms, seg_ms;
} loaded;

typedef struct queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    loaded *item[QUEUE_CAP];
    int head, n;
    bool closed, cancel;
} queue;

typedef struct producer_args {
    queue *q;
    const cli_opts *o;
    cli_inputs *in;
} producer_args;

static void loaded_free(loaded *l) {
    if (!l) return;
    ct_pcm_free(&l->pcm);
    ct_spans_free(l->spans);
    free(l->error);
    free(l);
}

static void *producer(void *arg) {
    producer_args *pa = arg;
    queue *q = pa->q;
    size_t max_bytes = (size_t)(pa->o->audio_memory_gb * 1073741824.0);
    for (int i = 0; i < pa->in->n; i++) {
        if (pa->in->v[i].state != IN_PENDING) continue;
        if (cli_signal_caught()) break;
        loaded *l = calloc(1, sizeof *l);
        if (!l) break;
        l->input = i;
        double t0 = cli_now_s();
        tg_status st = ct_pcm_load(pa->in->v[i].path, max_bytes, &l->pcm);
        double t1 = cli_now_s();
        if (!st) st = ct_segment_audio(l->pcm.samples, l->pcm.n, &pa->o->vad, &l->spans, &l->n_spans);
        l->load_ms = (t1 - t0) * 1e3;
        l->seg_ms = (cli_now_s() - t1) * 1e3;
        if (st) {
            char *e = ct_escape_line(tg_status_message(st), false);
            l->error = strdup(e ? e : "out of memory");
            ct_free(e);
            tg_status_free(st);
            ct_pcm_free(&l->pcm);
        }
        pthread_mutex_lock(&q->mu);
        while (q->n == QUEUE_CAP && !q->cancel) pthread_cond_wait(&q->not_full, &q->mu);
        if (q->cancel) {
            pthread_mutex_unlock(&q->mu);
            loaded_free(l);
            break;
        }
        q->item[(q->head + q->n++) % QUEUE_CAP] = l;
        pthread_cond_signal(&q->not_empty);
        pthread_mutex_unlock(&q->mu);
    }
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Takes the next decoded file; blocks only when `wait`. NULL when none is
 * ready (or, with *out_end set, none will come). */
static loaded *queue_pop(queue *q, bool wait, bool *out_end) {
    pthread_mutex_lock(&q->mu);
    while (wait && !q->n && !q->closed && !cli_signal_caught()) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&q->not_empty, &q->mu, &ts);
    }
    loaded *l = NULL;
    if (q->n) {
        l = q->item[q->head];
        q->head = (q->head + 1) % QUEUE_CAP;
        q->n--;
        pthread_cond_signal(&q->not_full);
    }
    *out_end = !q->n && q->closed;
    pthread_mutex_unlock(&q->mu);
    return l;
}

/* --------------------------------------------------------- open files */

typedef struct seg_out {
    char *text;
    int32_t *tokens;
    int n_tokens;
    bool done;
} seg_out;

typedef struct open_file {
    loaded *l;
    seg_out *out;
    int n_done;
    double frontend_ms, encoder_ms, decoder_ms;
    bool failed;
} open_file;

typedef struct pend {
    open_file *f;
    int span;
    size_t len;
} pend;

typedef struct run_state {
    cli_opts *o;
    cli_inputs *in;
    ct_session *s;
    char *options_json;
    char config_hash[32];
    open_file **open;
    int n_open;
    pend *pend;
    int n_pend, cap_pend;
    int batch_size;
    /* totals */
    int files_done, files_failed, files_known, next_print;
    double audio_done_s, audio_known_s;
    long batches, segments, retries, loops;
    double load_ms, seg_ms, frontend_ms, encoder_ms, decoder_ms, write_ms;
    bool stdout_failed;
} run_state;

static void close_file(run_state *r, open_file *f) {
    for (int i = 0; i < r->n_open; i++)
        if (r->open[i] == f) {
            r->open[i] = r->open[--r->n_open];
            break;
        }
    /* its segments still waiting (a failed file) go too */
    int k = 0;
    for (int i = 0; i < r->n_pend; i++)
        if (r->pend[i].f != f) r->pend[k++] = r->pend[i];
    r->n_pend = k;
    for (int i = 0; f->out && i < f->l->n_spans; i++) {
        free(f->out[i].text);
        free(f->out[i].tokens);
    }
    free(f->out);
    loaded_free(f->l);
    free(f);
}

/* Prints finished --text-only transcripts in input order. */
static void print_ready(run_state *r) {
    while (r->next_print < r->in->n && r->in->v[r->next_print].state != IN_PENDING) {
        cli_input *x = &r->in->v[r->next_print++];
        if (!r->o->text_only || x->state != IN_DONE || r->stdout_failed) continue;
        char *t = ct_escape_line(x->text ? x->text : "", true);
        if (r->in->n > 1) printf("%s: %s\n", x->shown, t ? t : "");
        else printf("%s\n", t ? t : "");
        ct_free(t);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            cli_msg(PROG ": writing standard output: %s\n", strerror(errno));
            r->stdout_failed = true;
        }
    }
}

static void fail_file(run_state *r, open_file *f, const char *why) {
    cli_input *x = &r->in->v[f->l->input];
    cli_msg(PROG ": %s: %s\n", x->shown, why);
    x->state = IN_FAILED;
    r->files_failed++;
    r->files_done++;
    close_file(r, f);
    print_ready(r);
}

/* fail_file with an error's text, escaped for the terminal; frees st. */
static void fail_file_status(run_state *r, open_file *f, tg_status st) {
    char *e = ct_escape_line(tg_status_message(st), false);
    tg_status_free(st);
    fail_file(r, f, e ? e : "out of memory");
    ct_free(e);
}

static int make_dirs(const char *dir) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static tg_status write_outputs(run_state *r, cli_input *x, const ct_transcript *t) {
    if (make_dirs(x->out_dir) != 0)
        return tg_status_new(TG_ERR_IO, "creating %s: %s", x->out_dir, strerror(errno));
    ct_output_set *set = NULL;
    tg_status st = ct_output_set_begin(x->out_dir, x->stem, &set);
    for (int f = 0; !st && f < CT_FORMAT_COUNT; f++) {
        if (!r->o->formats[f]) continue;
        char *text = NULL;
        size_t len = 0;
        if (!(st = ct_render((ct_format)f, t, &r->o->cue, &text, &len)))
            st = ct_output_set_add(set, ct_format_ext((ct_format)f), text, len);
        ct_free(text);
    }
    if (!st) st = ct_output_set_commit(set);
    ct_output_set_free(set);
    return st;
}

static void finish_file(run_state *r, open_file *f) {
    loaded *l = f->l;
    cli_input *x = &r->in->v[l->input];
    ct_segment *segs = calloc((size_t)(l->n_spans ? l->n_spans : 1), sizeof *segs);
    if (!segs) {
        fail_file(r, f, "out of memory");
        return;
    }
    size_t tlen = 1;
    for (int i = 0; i < l->n_spans; i++) {
        segs[i] = (ct_segment){l->spans[i].start_s, l->spans[i].end_s, f->out[i].text,
                               f->out[i].tokens, f->out[i].n_tokens};
        tlen += strlen(f->out[i].text ? f->out[i].text : "") + 1;
    }
    double wall = l->load_ms + l->seg_ms + f->frontend_ms + f->encoder_ms + f->decoder_ms;
    tg_status st = NULL;
    if (r->o->text_only) {
        const char *sep = !strcmp(r->o->language, "ja") || !strcmp(r->o->language, "zh") ? "" : " ";
        x->text = calloc(tlen, 1);
        for (int i = 0; x->text && i < l->n_spans; i++) {
            const char *t = f->out[i].text ? f->out[i].text : "";
            if (!t[0]) continue;
            if (x->text[0]) strcat(x->text, sep);
            strcat(x->text, t);
        }
        if (!x->text) st = tg_status_new(TG_ERR_NO_MEMORY, "out of memory");
    } else {
        ct_transcript t = {.source = x->path,
                           .duration_s = l->pcm.duration_s,
                           .segments = segs,
                           .n_segments = l->n_spans,
                           .language = r->o->language,
                           .options_json = r->options_json,
                           .model_path = r->o->model_dir,
                           .model_config_hash = r->config_hash,
                           .dtype = ct_session_dtype(r->s),
                           .backend = ct_session_backend(r->s),
                           .load_ms = l->load_ms,
                           .segment_ms = l->seg_ms,
                           .frontend_ms = f->frontend_ms,
                           .encoder_ms = f->encoder_ms,
                           .decoder_ms = f->decoder_ms,
                           .wall_ms = wall};
        double t0 = cli_now_s();
        st = write_outputs(r, x, &t);
        r->write_ms += (cli_now_s() - t0) * 1e3;
    }
    free(segs);
    if (st) {
        fail_file_status(r, f, st);
        return;
    }
    if (r->o->verbose)
        cli_msg(PROG ": %s: %.2f s of audio, %d segment(s): load %.1f ms, segment %.1f ms, "
                "frontend %.1f ms, encoder %.1f ms, decoder %.1f ms (%.1fx real time)\n",
                x->shown, l->pcm.duration_s, l->n_spans, l->load_ms, l->seg_ms, f->frontend_ms,
                f->encoder_ms, f->decoder_ms, wall > 0 ? l->pcm.duration_s * 1e3 / wall : 0.0);
    x->state = IN_DONE;
    r->files_done++;
    r->audio_done_s += l->pcm.duration_s;
    close_file(r, f);
    print_ready(r);
}

/* Stores segment i of f from result res; true when f is now complete. */
static bool store(run_state *r, open_file *f, int i, const ct_result *res) {
    seg_out *so = &f->out[i];
    so->text = strdup(res->text ? res->text : "");
    so->tokens = malloc((size_t)(res->n_tokens ? res->n_tokens : 1) * sizeof(int32_t));
    if (so->tokens && res->n_tokens) memcpy(so->tokens, res->tokens, (size_t)res->n_tokens * sizeof(int32_t));
    so->n_tokens = res->n_tokens;
    so->done = true;
    if (res->finish == CT_FINISH_REPETITION) r->loops++;
    f->n_done++;
    return f->n_done == f->l->n_spans;
}

static bool aborted(tg_status st) {
    return tg_status_code(st) == TG_ERR_ABORTED || cli_signal_caught();
}

/* Runs one segment alone with `max_new` tokens (a retry, or a batch split
 * up after a failure). */
static tg_status run_alone(run_state *r, const pend *p, int max_new, ct_result **out) {
    const ct_span *sp = &p->f->l->spans[p->span];
    const float *clip = p->f->l->pcm.samples + sp->first;
    size_t n = p->len;
    tg_status st = ct_session_set_max_new_tokens(r->s, max_new);
    if (!st) st = ct_transcribe_batch(r->s, &clip, &n, 1, out);
    tg_status_free(ct_session_set_max_new_tokens(r->s, r->o->max_new_tokens));
    return st;
}

static void account(open_file *f, const ct_timings *t, double share, run_state *r) {
    f->frontend_ms += t->frontend_ms * share;
    f->encoder_ms += t->encoder_ms * share;
    f->decoder_ms += t->decoder_ms * share;
    r->frontend_ms += t->frontend_ms * share;
    r->encoder_ms += t->encoder_ms * share;
    r->decoder_ms += t->decoder_ms * share;
}

static int cmp_pend(const void *a, const void *b) {
    const pend *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    if (x->f->l->input != y->f->l->input) return x->f->l->input - y->f->l->input;
    return x->span - y->span;
}

/* One batch of the longest waiting segments. Returns false on an abort. */
static bool run_batch(run_state *r) {
    qsort(r->pend, (size_t)r->n_pend, sizeof *r->pend, cmp_pend);
    int n = r->n_pend < r->batch_size ? r->n_pend : r->batch_size;
    pend batch[256];
    memcpy(batch, r->pend, (size_t)n * sizeof *batch);
    memmove(r->pend, r->pend + n, (size_t)(r->n_pend - n) * sizeof *r->pend);
    r->n_pend -= n;
    const float *clips[256];
    size_t lens[256], total = 0;
    ct_result *res[256] = {0};
    for (int k = 0; k < n; k++) {
        clips[k] = batch[k].f->l->pcm.samples + batch[k].f->l->spans[batch[k].span].first;
        lens[k] = batch[k].len;
        total += lens[k];
    }
    r->batches++;
    r->segments += n;
    tg_status st = ct_transcribe_batch(r->s, clips, lens, n, res);
    if (st && aborted(st)) {
        tg_status_free(st);
        return false;
    }
    bool alone = st != NULL;
    tg_status_free(st);
    for (int k = 0; k < n; k++) {
        open_file *f = batch[k].f;
        bool live = false; /* f may have failed and closed already */
        for (int i = 0; i < r->n_open && !live; i++) live = r->open[i] == f;
        if (!live) {
            ct_result_free(res[k]);
            continue;
        }
        ct_result *one = res[k];
        if (alone) {
            if ((st = run_alone(r, &batch[k], r->o->max_new_tokens, &one))) {
                if (aborted(st)) {
                    tg_status_free(st);
                    return false;
                }
                fail_file_status(r, f, st);
                continue;
            }
        }
        account(f, &one->timings, alone ? 1.0 : (double)lens[k] / (double)total, r);
        if (one->finish == CT_FINISH_LENGTH && r->o->max_retry_tokens > 0) {
            ct_result *again = NULL;
            r->retries++;
            st = run_alone(r, &batch[k], r->o->max_retry_tokens, &again);
            if (st && aborted(st)) {
                tg_status_free(st);
                ct_result_free(one);
                return false;
            }
            if (st) {
                char *e = ct_escape_line(tg_status_message(st), false);
                cli_msg(PROG ": %s: retry of segment %d failed (%s); keeping the first result\n",
                        r->in->v[f->l->input].shown, batch[k].span + 1, e ? e : "");
                ct_free(e);
                tg_status_free(st);
            } else {
                account(f, &again->timings, 1.0, r);
                ct_result_free(one);
                one = again;
            }
        }
        bool complete = store(r, f, batch[k].span, one);
        ct_result_free(one);
        if (complete) finish_file(r, f);
    }
    return true;
}

/* Opens a decoded file: its segments join the waiting ones. */
static void open_loaded(run_state *r, loaded *l) {
    cli_input *x = &r->in->v[l->input];
    r->files_known++;
    if (l->error) {
        cli_msg(PROG ": %s\n", l->error);
        x->state = IN_FAILED;
        r->files_failed++;
        r->files_done++;
        loaded_free(l);
        print_ready(r);
        return;
    }
    r->load_ms += l->load_ms;
    r->seg_ms += l->seg_ms;
    x->duration_s = l->pcm.duration_s;
    r->audio_known_s += l->pcm.duration_s;
    open_file *f = calloc(1, sizeof *f);
    if (f) f->out = calloc((size_t)(l->n_spans ? l->n_spans : 1), sizeof *f->out);
    if (!f || !f->out || !tg_grow((void **)&r->pend, &r->cap_pend, r->n_pend + l->n_spans, sizeof(pend))) {
        free(f ? f->out : NULL);
        free(f);
        cli_msg(PROG ": %s: out of memory\n", x->shown);
        x->state = IN_FAILED;
        r->files_failed++;
        r->files_done++;
        loaded_free(l);
        return;
    }
    f->l = l;
    r->open[r->n_open++] = f;
    static const ct_result empty = {.text = "", .finish = CT_FINISH_EOS};
    bool complete = l->n_spans == 0;
    for (int i = 0; i < l->n_spans; i++) {
        size_t len = l->spans[i].last - l->spans[i].first;
        if (len < MIN_SAMPLES) complete = store(r, f, i, &empty); /* too short to hear */
        else r->pend[r->n_pend++] = (pend){f, i, len};
    }
    if (complete) finish_file(r, f);
}

static char *options_json(const cli_opts *o) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "language", o->language);
    cJSON_AddBoolToObject(j, "punctuation", o->punctuation);
    cJSON *fm = cJSON_AddArrayToObject(j, "formats");
    for (int f = 0; f < CT_FORMAT_COUNT; f++)
        if (o->formats[f]) cJSON_AddItemToArray(fm, cJSON_CreateString(ct_format_ext((ct_format)f)));
    cJSON_AddStringToObject(j, "vad", o->vad.kind == CT_VAD_NONE ? "none" : "energy");
    cJSON_AddNumberToObject(j, "min_dur", o->vad.min_dur_s);
    cJSON_AddNumberToObject(j, "max_dur", o->vad.max_dur_s);
    cJSON_AddNumberToObject(j, "max_silence", o->vad.max_silence_s);
    cJSON_AddNumberToObject(j, "energy_threshold", o->vad.energy_threshold_db);
    cJSON_AddNumberToObject(j, "max_new_tokens", o->max_new_tokens);
    cJSON_AddNumberToObject(j, "max_retry_tokens", o->max_retry_tokens);
    cJSON_AddNumberToObject(j, "beam_size", o->beam_size);
    cJSON_AddBoolToObject(j, "stop_repetition_loops", o->stop_loops);
    cJSON_AddNumberToObject(j, "max_chars", o->cue.max_chars);
    cJSON_AddNumberToObject(j, "max_cue_dur", o->cue.max_dur_s);
    cJSON_AddNumberToObject(j, "max_gap", o->cue.max_gap_s);
    cJSON_AddNumberToObject(j, "batch_size", o->batch_size);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    char *copy = s ? strdup(s) : NULL;
    cJSON_free(s);
    return copy;
}

static void write_profile(const run_state *r, double wall_s) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "files", r->in->n);
    int skipped = 0, done = 0;
    for (int i = 0; i < r->in->n; i++) {
        skipped += r->in->v[i].state == IN_SKIPPED;
        done += r->in->v[i].state == IN_DONE;
    }
    cJSON_AddNumberToObject(j, "files_done", done);
    cJSON_AddNumberToObject(j, "files_failed", r->files_failed);
    cJSON_AddNumberToObject(j, "files_skipped", skipped);
    cJSON_AddNumberToObject(j, "audio_s", r->audio_done_s);
    cJSON_AddNumberToObject(j, "wall_s", wall_s);
    cJSON_AddNumberToObject(j, "rtfx", wall_s > 0 ? r->audio_done_s / wall_s : 0);
    cJSON_AddNumberToObject(j, "batches", (double)r->batches);
    cJSON_AddNumberToObject(j, "batch_size", r->batch_size);
    cJSON_AddNumberToObject(j, "segments", (double)r->segments);
    cJSON_AddNumberToObject(j, "retries", (double)r->retries);
    cJSON_AddNumberToObject(j, "repetition_stops", (double)r->loops);
    ct_fault_stats fs;
    ct_session_fault_stats(r->s, &fs);
    cJSON_AddNumberToObject(j, "oom_halvings", fs.oom_halvings);
    cJSON_AddNumberToObject(j, "batch_limit", fs.batch_limit);
    cJSON_AddNumberToObject(j, "backend_restarts", fs.backend_restarts);
    cJSON_AddStringToObject(j, "backend", ct_session_backend(r->s));
    cJSON_AddStringToObject(j, "dtype", ct_session_dtype(r->s));
    cJSON *st = cJSON_AddObjectToObject(j, "stages_ms");
    cJSON_AddNumberToObject(st, "load", r->load_ms);
    cJSON_AddNumberToObject(st, "segment", r->seg_ms);
    cJSON_AddNumberToObject(st, "frontend", r->frontend_ms);
    cJSON_AddNumberToObject(st, "encoder", r->encoder_ms);
    cJSON_AddNumberToObject(st, "decoder", r->decoder_ms);
    cJSON_AddNumberToObject(st, "write", r->write_ms);
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    tg_status e = s ? tg_file_write_atomic(r->o->profile_json, s, strlen(s))
                    : tg_status_new(TG_ERR_NO_MEMORY, "out of memory");
    cJSON_free(s);
    if (e) cli_msg(PROG ": --profile-json: %s\n", tg_status_message(e));
    tg_status_free(e);
}

/* ------------------------------------------------------------------ run */

int cli_run(cli_opts *o, cli_inputs *in) {
    double t_start = cli_now_s();
    ct_options co;
    ct_options_init(&co);
    co.model_dir = o->model_dir;
    co.backend = o->backend;
    co.n_threads = o->threads;
    co.language = o->language;
    co.punctuation = o->punctuation;
    co.max_new_tokens = o->max_new_tokens;
    co.beam_size = o->beam_size;
    co.frame_bucket = o->frame_bucket;
    co.f32 = o->dtype;
    co.stop_repetition_loops = o->stop_loops;
    cli_dumper *dump = NULL;
    if (o->dump_path) {
        if (!(dump = cli_dumper_new())) return EXIT_FAILED;
        co.dump = cli_dumper_hook;
        co.dump_user = dump;
    }
    int pending = 0;
    for (int i = 0; i < in->n; i++) pending += in->v[i].state == IN_PENDING;
    run_state r = {.o = o, .in = in};
    int rc = EXIT_OK;
    for (int i = 0; i < in->n; i++)
        if (in->v[i].state == IN_FAILED) rc = EXIT_FAILED;
    if (!pending) { /* everything skipped or refused: no model needed */
        print_ready(&r);
        if (o->profile_json) write_profile(&r, cli_now_s() - t_start);
        cli_dumper_free(dump);
        return rc;
    }
    ct_session *s = NULL;
    tg_status st = ct_session_open(&co, &s);
    if (st) {
        char *e = ct_escape_line(tg_status_message(st), false);
        cli_msg(PROG ": %s\n", e ? e : "");
        ct_free(e);
        tg_status_free(st);
        cli_dumper_free(dump);
        return EXIT_FAILED;
    }
    r.s = s;
    ct_session_set_abort(s, cli_abort_requested, NULL);
    r.batch_size = o->batch_size ? o->batch_size : !strncmp(ct_session_backend(s), "cuda", 4) ? 24 : 4;
    if (r.batch_size > 256) r.batch_size = 256;
    o->batch_size = r.batch_size;
    r.options_json = options_json(o);
    {
        char path[4096], *text = NULL;
        size_t size = 0;
        snprintf(path, sizeof path, "%s/config.json", o->model_dir);
        tg_status e = tg_file_read(path, &text, &size);
        snprintf(r.config_hash, sizeof r.config_hash, "%016llx",
                 e ? 0ULL : (unsigned long long)tg_hash64(text, size, 0));
        tg_status_free(e);
        tg_free(text);
    }
    r.open = calloc(MAX_OPEN, sizeof *r.open);
    if (o->verbose)
        cli_msg(PROG ": backend %s, %s, batch %d\n", ct_session_backend(s), ct_session_dtype(s),
                r.batch_size);

    queue q = {.mu = PTHREAD_MUTEX_INITIALIZER, .not_empty = PTHREAD_COND_INITIALIZER,
               .not_full = PTHREAD_COND_INITIALIZER};
    producer_args pa = {&q, o, in};
    pthread_t th;
    bool started = r.open && r.options_json && pthread_create(&th, NULL, producer, &pa) == 0;
    if (!started) rc = EXIT_FAILED;
    r.files_done = in->n - pending;
    cli_progress_begin(!o->quiet, in->n);
    bool end = !started, stop = false;
    while (started && !stop) {
        /* top up the window; wait for a file only when nothing is waiting */
        while (!end && r.n_open < MAX_OPEN && r.n_pend < WINDOW_BATCHES * r.batch_size) {
            loaded *l = queue_pop(&q, r.n_pend == 0, &end);
            if (!l) break;
            open_loaded(&r, l);
            cli_progress_update(r.files_done, r.audio_done_s, r.audio_known_s, r.files_known, false);
        }
        if (cli_signal_caught()) break;
        if (!r.n_pend) {
            if (end) break;
            continue;
        }
        stop = !run_batch(&r);
        cli_progress_update(r.files_done, r.audio_done_s, r.audio_known_s, r.files_known, false);
    }
    if (started) {
        pthread_mutex_lock(&q.mu);
        q.cancel = true;
        pthread_cond_broadcast(&q.not_full);
        pthread_mutex_unlock(&q.mu);
        pthread_join(th, NULL);
        for (; q.n; q.n--, q.head = (q.head + 1) % QUEUE_CAP) loaded_free(q.item[q.head]);
    }
    cli_progress_update(r.files_done, r.audio_done_s, r.audio_known_s, r.files_known, true);
    cli_progress_end();
    while (r.n_open) close_file(&r, r.open[0]);
    int sig = cli_signal_caught();
    if (!sig) {
        print_ready(&r);
        if (dump) {
            tg_status e = cli_dumper_write(dump, o->dump_path, ct_session_pad_id(s));
            if (e) {
                cli_msg(PROG ": --dump-tensors %s: %s\n", o->dump_path, tg_status_message(e));
                rc = EXIT_FAILED;
            }
            tg_status_free(e);
        }
        if (o->profile_json) write_profile(&r, cli_now_s() - t_start);
    }
    if (r.files_failed || r.stdout_failed) rc = EXIT_FAILED;
    if (!o->quiet && !sig && (r.retries || r.loops) && o->verbose)
        cli_msg(PROG ": %ld segment(s) retried with --max-retry-tokens, %ld stopped as "
                "repetition loops\n", r.retries, r.loops);
    free(r.open);
    tg_free(r.pend);
    free(r.options_json);
    cli_dumper_free(dump);
    ct_session_close(s);
    if (sig) {
        cli_msg(PROG ": %s; stopped (outputs written so far are complete)\n",
                sig == 2 ? "interrupted" : "terminated");
        return sig == 2 ? EXIT_SIGINT : EXIT_SIGTERM;
    }
    return rc;
}
