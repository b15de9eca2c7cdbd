/*
 * test_faults.c: a session against device faults and full device memory
 * (issue 12, "GPU faults"), on the CPU through the runtime's fault hook
 * (tg_backend_fail_after), tiny model:
 *
 * - a device fault injected in the middle of a transcription (the first
 *   compute, an encoder one, or a later decoder step) fails that call with
 *   TG_ERR_DEVICE and the backend's text, naming the file; the next call in
 *   the same session succeeds with the text and tokens of a fault-free run,
 *   because the session made its backends again (counted); when that
 *   fails, the session says why at every later call;
 * - a batch whose backend allocation runs out of memory is halved and its
 *   clips run again: the same transcripts as a fault-free run of the whole
 *   batch, through ct_transcribe_batch and through ct_transcribe_file's
 *   chunks; the halving is counted and warned about, and the session keeps
 *   the halved size; memory that stays full fails the call at batch 1 with
 *   the out-of-memory error, and the session still works afterwards.
 *
 * Comparisons are exact: a clip's tokens do not depend on the batch it ran
 * in (tests/asr/test_session.c proves padding masked to ~1e-6, far from an
 * argmax flip on the tiny model).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "cohere_transcribe.h"

#define TINY TEST_DATA_DIR "/tiny"
#define N_CLIPS 4

static void tiny_options(ct_options *o) {
    ct_options_init(o);
    o->model_dir = TINY "/hub";
    o->backend = CT_BACKEND_CPU;
    o->n_threads = 2;
    o->max_new_tokens = 24;
}

static ct_session *open_tiny(int batch_size) {
    ct_options o;
    tiny_options(&o);
    o.batch_size = batch_size;
    ct_session *s = NULL;
    CHECK_OK(ct_session_open(&o, &s));
    return s;
}

static bool same_result(const ct_result *a, const ct_result *b) {
    return a && b && !strcmp(a->text, b->text) && a->n_tokens == b->n_tokens &&
           !memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof(int32_t));
}

static void all_off(void) {
    tg_backend_fail_after(TG_BACKEND_FAULT_COMPUTE, -1, 0);
    tg_backend_fail_after(TG_BACKEND_FAULT_ALLOC, -1, 0);
}

static void device_fault_fails_the_call_and_the_session_recovers(void) {
    ct_session *s = open_tiny(1);
    if (!s) return;
    ct_result *ref = NULL;
    CHECK_OK(ct_transcribe_file(s, TINY "/audio/a.wav", &ref));
    /* 0: the first compute (the encoder's); 5: a decoder step */
    static const long at[] = {0, 5};
    for (int k = 0; k < 2; k++) {
        ct_result *r = NULL;
        tg_backend_fail_after(TG_BACKEND_FAULT_COMPUTE, at[k], 1);
        tg_status st = ct_transcribe_file(s, TINY "/audio/a.wav", &r);
        all_off();
        CHECK(st != NULL && r == NULL);
        if (st) {
            const char *m = tg_status_message(st);
            CHECK(tg_status_code(st) == TG_ERR_DEVICE);
            CHECK_MSG(strstr(m, "a.wav") && strstr(m, "injected by tg_backend_fail_after"), "%s",
                      m);
            CHECK_MSG(strstr(m, "recreated"), "the error should say the backend was made again: %s",
                      m);
            printf("  fault at compute %ld: %s\n", at[k], m);
        }
        tg_status_free(st);
        CHECK_OK(ct_transcribe_file(s, TINY "/audio/a.wav", &r));
        CHECK_MSG(same_result(r, ref), "after the fault: '%s' vs '%s'", r ? r->text : "",
                  ref ? ref->text : "");
        ct_result_free(r);
    }
    ct_fault_stats fs;
    ct_session_fault_stats(s, &fs);
    CHECK_MSG(fs.backend_restarts == 2, "%d restarts", fs.backend_restarts);
    CHECK(fs.oom_halvings == 0 && fs.batch_limit == 0);
    ct_result_free(ref);
    ct_session_close(s);
}

/* When the backends cannot be made again (here: the checkpoint is gone by
 * then), the faulted call says so, and every later call fails at once with
 * why, instead of running on a half-closed session. */
static void a_failed_restart_leaves_a_session_that_says_so(void) {
    char dir[] = "/tmp/ct-test-faults-XXXXXX", cmd[512];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof cmd, "cp %s/hub/* '%s'", TINY, dir);
    CHECK(system(cmd) == 0);
    ct_options o;
    tiny_options(&o);
    o.model_dir = dir;
    ct_session *s = NULL;
    CHECK_OK(ct_session_open(&o, &s));
    snprintf(cmd, sizeof cmd, "%s/model.safetensors", dir);
    CHECK(unlink(cmd) == 0);
    ct_result *r = NULL;
    if (s) {
        tg_backend_fail_after(TG_BACKEND_FAULT_COMPUTE, 0, 1);
        tg_status st = ct_transcribe_file(s, TINY "/audio/a.wav", &r);
        all_off();
        CHECK_ERR(st, TG_ERR_DEVICE, "recreating the session's backends failed too");
        CHECK_ERR(ct_transcribe_file(s, TINY "/audio/b.wav", &r), TG_ERR_DEVICE,
                  "the session has no backend since a device fault");
        ct_result *rs[1] = {NULL};
        const float one[400] = {0};
        const float *clip = one;
        size_t n = 400;
        CHECK_ERR(ct_transcribe_batch(s, &clip, &n, 1, rs), TG_ERR_DEVICE, "model.safetensors");
        CHECK(r == NULL && rs[0] == NULL);
        tg_backend_stats bs;
        ct_session_stats(s, &bs); /* no backend: zeros, not a freed one */
        CHECK(bs.n_computes == 0);
    }
    ct_session_close(s);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* Four clips of different lengths: a, b, and two stretches of long.wav. */
typedef struct clips {
    ct_pcm pcm[3];
    const float *clip[N_CLIPS];
    size_t n[N_CLIPS];
} clips;

static bool clips_load(clips *c) {
    memset(c, 0, sizeof *c);
    const char *files[3] = {TINY "/audio/a.wav", TINY "/audio/b.wav", TINY "/audio/long.wav"};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(ct_pcm_load(files[i], 0, &c->pcm[i]));
        if (!c->pcm[i].samples) return false;
    }
    CHECK(c->pcm[2].n > 12 * 16000);
    c->clip[0] = c->pcm[0].samples, c->n[0] = c->pcm[0].n;
    c->clip[1] = c->pcm[1].samples, c->n[1] = c->pcm[1].n;
    c->clip[2] = c->pcm[2].samples, c->n[2] = 5 * 16000;
    c->clip[3] = c->pcm[2].samples + 5 * 16000, c->n[3] = 7 * 16000;
    return c->pcm[2].n > 12 * 16000;
}

static void clips_free(clips *c) {
    for (int i = 0; i < 3; i++) ct_pcm_free(&c->pcm[i]);
}

static void results_free(ct_result **r) {
    for (int i = 0; i < N_CLIPS; i++) ct_result_free(r[i]);
}

typedef struct batch_call {
    ct_session *s;
    clips *c;
    ct_result **out;
    tg_status st;
} batch_call;

static void run_batch_call(void *arg) {
    batch_call *b = arg;
    b->st = ct_transcribe_batch(b->s, b->c->clip, b->c->n, N_CLIPS, b->out);
}

static void out_of_memory_halves_the_batch(void) {
    clips c;
    if (!clips_load(&c)) {
        clips_free(&c);
        return;
    }
    ct_result *ref[N_CLIPS] = {0}, *got[N_CLIPS] = {0};
    ct_session *s = open_tiny(1);
    if (s) CHECK_OK(ct_transcribe_batch(s, c.clip, c.n, N_CLIPS, ref));
    ct_session_close(s);

    /* one allocation fails: the batch of 4 runs again as two of 2 */
    s = open_tiny(1);
    if (!s) goto out;
    tg_backend_fail_after(TG_BACKEND_FAULT_ALLOC, 0, 1);
    batch_call call = {s, &c, got, NULL};
    char *log = check_capture_stderr(run_batch_call, &call);
    all_off();
    CHECK_OK(call.st);
    for (int i = 0; i < N_CLIPS; i++)
        CHECK_MSG(same_result(got[i], ref[i]), "clip %d: '%s' vs '%s'", i,
                  got[i] ? got[i]->text : "", ref[i] ? ref[i]->text : "");
    CHECK_MSG(log && strstr(log, "batch of 4 clips ran out of memory") &&
                  strstr(log, "halving it to 2"),
              "the warning: %s", log ? log : "");
    if (log) printf("  %s", log);
    tg_free(log);
    ct_fault_stats fs;
    ct_session_fault_stats(s, &fs);
    CHECK(fs.oom_halvings == 1 && fs.batch_limit == 2 && fs.backend_restarts == 0);
    results_free(got);

    /* memory that stays full: 4, 2 and 1 fail, then the error comes back */
    tg_backend_fail_after(TG_BACKEND_FAULT_ALLOC, 0, -1);
    tg_status st = ct_transcribe_batch(s, c.clip, c.n, N_CLIPS, got);
    all_off();
    CHECK_ERR(st, TG_ERR_NO_MEMORY, "out of device memory");
    for (int i = 0; i < N_CLIPS; i++) CHECK(got[i] == NULL);
    ct_session_fault_stats(s, &fs);
    CHECK(fs.oom_halvings == 2 && fs.batch_limit == 1);
    /* and the session still works, at batch 1 */
    CHECK_OK(ct_transcribe_batch(s, c.clip, c.n, N_CLIPS, got));
    for (int i = 0; i < N_CLIPS; i++) CHECK(same_result(got[i], ref[i]));
    results_free(got);
    ct_session_close(s);
out:
    results_free(ref);
    clips_free(&c);
}

/* ct_transcribe_file's chunks are batched by ct_options.batch_size: long.wav
 * (3 chunks) at batch 4 whose allocation fails gives the fault-free text. */
static void out_of_memory_halves_the_chunk_batches_of_a_file(void) {
    ct_session *s = open_tiny(4);
    ct_result *ref = NULL, *r = NULL;
    if (s) CHECK_OK(ct_transcribe_file(s, TINY "/audio/long.wav", &ref));
    ct_session_close(s);
    s = open_tiny(4);
    if (s) {
        tg_backend_fail_after(TG_BACKEND_FAULT_ALLOC, 0, 1);
        CHECK_OK(ct_transcribe_file(s, TINY "/audio/long.wav", &r));
        all_off();
        CHECK(ref && ref->n_chunks == 3);
        CHECK_MSG(same_result(r, ref), "'%s' vs '%s'", r ? r->text : "", ref ? ref->text : "");
        ct_fault_stats fs;
        ct_session_fault_stats(s, &fs);
        CHECK(fs.oom_halvings == 1 && fs.batch_limit == 1);
    }
    ct_result_free(r);
    ct_result_free(ref);
    ct_session_close(s);
}

TEST_MAIN(T(device_fault_fails_the_call_and_the_session_recovers),
          T(a_failed_restart_leaves_a_session_that_says_so),
          T(out_of_memory_halves_the_batch), T(out_of_memory_halves_the_chunk_batches_of_a_file))
