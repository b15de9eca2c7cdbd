/*
 * test_bad_inputs.c: the ct_ API and the CLI on inputs that must fail
 * cleanly (a status naming the problem, never a crash) or must work
 * although they look odd (digital silence).
 *
 * The CLI cases run the cohere-transcribe program built next to this test
 * (same build directory); they are skipped with a note when it is absent.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "cohere_transcribe.h"

#define TINY TEST_DATA_DIR "/tiny"

static ct_session *open_tiny(int max_new) {
    ct_options o;
    ct_options_init(&o);
    o.model_dir = TINY "/hub";
    o.backend = CT_BACKEND_CPU;
    o.n_threads = 2;
    o.max_new_tokens = max_new;
    ct_session *s = NULL;
    CHECK_OK(ct_session_open(&o, &s));
    return s;
}

static void bad_pcm_is_an_error(void) {
    ct_session *s = open_tiny(8);
    if (!s) return;
    ct_result *r = NULL;
    float *x = tg_calloc(16000, sizeof(float));
    CHECK_ERR(ct_transcribe_pcm(s, x, 0, &r), TG_ERR_INVALID_ARG, "empty");
    CHECK_ERR(ct_transcribe_pcm(s, NULL, 100, &r), TG_ERR_INVALID_ARG, "empty");
    CHECK_ERR(ct_transcribe_pcm(s, x, 100, &r), TG_ERR_INVALID_ARG, "too short");
    CHECK_ERR(ct_transcribe_pcm(s, x, 319, &r), TG_ERR_INVALID_ARG, "too short");
    x[1234] = NAN;
    CHECK_ERR(ct_transcribe_pcm(s, x, 16000, &r), TG_ERR_INVALID_ARG, "1234 is NaN");
    x[1234] = INFINITY;
    CHECK_ERR(ct_transcribe_pcm(s, x, 16000, &r), TG_ERR_INVALID_ARG, "infinite");
    CHECK(r == NULL);
    /* a batch with one bad clip fails as a whole, naming the clip */
    x[1234] = 0;
    float *y = tg_calloc(16000, sizeof(float));
    y[5] = NAN;
    const float *clips[2] = {x, y};
    size_t n[2] = {16000, 16000};
    ct_result *rs[2] = {NULL, NULL};
    CHECK_ERR(ct_transcribe_batch(s, clips, n, 2, rs), TG_ERR_INVALID_ARG, "clip 1");
    CHECK(rs[0] == NULL && rs[1] == NULL);
    /* a clip over the 35 s limit must go through ct_transcribe_pcm */
    float *big = tg_calloc(36 * 16000, sizeof(float));
    const float *bclips[1] = {big};
    size_t bn[1] = {36 * 16000};
    CHECK_ERR(ct_transcribe_batch(s, bclips, bn, 1, rs), TG_ERR_INVALID_ARG, "clip limit");
    tg_free(big);
    tg_free(y);
    tg_free(x);
    ct_session_close(s);
}

typedef struct finite_seen {
    int n_tensors, n_bad;
} finite_seen;

static void check_finite(void *user, int index, const char *name, tg_type type, int n_dims,
                         const int64_t *shape, const void *data) {
    finite_seen *f = user;
    if (type != TG_F32) return;
    size_t n = 1;
    for (int i = 0; i < n_dims; i++) n *= (size_t)shape[i];
    f->n_tensors++;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(((const float *)data)[i])) {
            f->n_bad++;
            fprintf(stderr, "clip %d %s[%zu] is not finite\n", index, name, i);
            return;
        }
}

/* Digital silence normalises to all-zero features: it must transcribe (to
 * whatever the model says) with every intermediate finite. So must a clip
 * whose frame count leaves an extra masked encoder frame next to a long
 * one in one batch. */
static void silence_transcribes_finitely(void) {
    ct_options o;
    ct_options_init(&o);
    o.model_dir = TINY "/hub";
    o.backend = CT_BACKEND_CPU;
    o.n_threads = 2;
    o.max_new_tokens = 8;
    finite_seen seen = {0};
    o.dump = check_finite;
    o.dump_user = &seen;
    ct_session *s = NULL;
    CHECK_OK(ct_session_open(&o, &s));
    if (!s) return;
    float *x = tg_calloc(16000 * 3, sizeof(float));
    ct_result *r = NULL;
    CHECK_OK(ct_transcribe_pcm(s, x, 16000 * 3, &r));
    CHECK(r && r->text);
    CHECK(seen.n_tensors >= 4 && seen.n_bad == 0);
    ct_result_free(r);
    /* batch: silence of 20480 samples (extra masked frame) next to 3 s */
    const float *clips[2] = {x, x};
    size_t n[2] = {20480, 16000 * 3};
    ct_result *rs[2] = {NULL, NULL};
    CHECK_OK(ct_transcribe_batch(s, clips, n, 2, rs));
    CHECK(rs[0] && rs[1] && seen.n_bad == 0);
    ct_result_free(rs[0]);
    ct_result_free(rs[1]);
    tg_free(x);
    ct_session_close(s);
}

static void bad_files_are_named(void) {
    ct_session *s = open_tiny(8);
    if (!s) return;
    ct_result *r = NULL;
    tg_status st = ct_transcribe_file(s, "/nonexistent/clip.wav", &r);
    CHECK(st != NULL && strstr(tg_status_message(st), "/nonexistent/clip.wav"));
    tg_status_free(st);
    /* a RIFF header that is not WAVE, and a truncated fmt chunk */
    char path[] = "/tmp/ct-bad-wav-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        static const char junk[] = "RIFF\x24\x00\x00\x00WAVX" "fmt \x10\x00\x00\x00\x01\x00";
        CHECK(write(fd, junk, sizeof junk - 1) == (ssize_t)(sizeof junk - 1));
        close(fd);
        st = ct_transcribe_file(s, path, &r);
        CHECK(st != NULL && tg_status_code(st) == TG_ERR_FORMAT);
        CHECK(st && strstr(tg_status_message(st), path));
        if (st) printf("  %s\n", tg_status_message(st));
        tg_status_free(st);
        unlink(path);
    }
    CHECK(r == NULL);
    ct_session_close(s);
}

static void bad_options_are_named(void) {
    ct_options o;
    ct_options_init(&o);
    ct_session *s = NULL;
    CHECK_ERR(ct_session_open(&o, &s), TG_ERR_INVALID_ARG, "model directory");
    o.model_dir = TEST_DATA_DIR "/no-such-model";
    o.backend = CT_BACKEND_CPU;
    CHECK_ERR(ct_session_open(&o, &s), TG_ERR_NOT_FOUND, "no-such-model");
    o.model_dir = TINY "/hub";
    o.language = "xx";
    CHECK_ERR(ct_session_open(&o, &s), TG_ERR_INVALID_ARG, "'xx'");
    /* the same check without a model, for front ends that validate first */
    CHECK_ERR(ct_language_check("xx"), TG_ERR_INVALID_ARG, "'xx'");
    CHECK_ERR(ct_language_check(NULL), TG_ERR_INVALID_ARG, "language");
    CHECK_ERR(ct_language_check("EN"), TG_ERR_INVALID_ARG, "'EN'");
    const char *codes[14] = {"en", "fr", "de", "es", "it", "pt", "nl",
                             "pl", "el", "ar", "ja", "zh", "vi", "ko"};
    for (int i = 0; i < 14; i++) CHECK_OK(ct_language_check(codes[i]));
    o.language = "en";
    o.max_new_tokens = 0;
    CHECK_ERR(ct_session_open(&o, &s), TG_ERR_INVALID_ARG, "max_new_tokens");
    o.max_new_tokens = 8;
    o.batch_size = -1;
    CHECK_ERR(ct_session_open(&o, &s), TG_ERR_INVALID_ARG, "batch_size");
    o.batch_size = 1;
    o.beam_size = 17;
    CHECK_ERR(ct_session_open(&o, &s), TG_ERR_INVALID_ARG, "beam_size");
    o.beam_size = -1;
    CHECK_ERR(ct_session_open(&o, &s), TG_ERR_INVALID_ARG, "beam_size");
    o.beam_size = 0; /* taken as 1: options filled without ct_options_init's newer fields */
    CHECK_OK(ct_session_open(&o, &s));
    ct_session_close(s);
    s = NULL;
    o.beam_size = 1;
    CHECK(s == NULL);
    /* the feature rows' measuring switch: a misspelling is an error naming it */
    setenv("CT_ROWS", "pinned", 1);
    CHECK_ERR(ct_session_open(&o, &s), TG_ERR_INVALID_ARG, "CT_ROWS=pinned");
    CHECK(s == NULL);
    unsetenv("CT_ROWS");
    /* and the kept decoder memory's */
    setenv("CT_DECODER_KEEP", "yes", 1);
    CHECK_ERR(ct_session_open(&o, &s), TG_ERR_INVALID_ARG, "CT_DECODER_KEEP=yes");
    CHECK(s == NULL);
    unsetenv("CT_DECODER_KEEP");
    ct_backend_kind k;
    CHECK_ERR(ct_backend_parse("metal", &k), TG_ERR_INVALID_ARG, "'metal'");
    CHECK_OK(ct_backend_parse("cuda", &k));
    CHECK(k == CT_BACKEND_CUDA);
    /* CUDA asked for where there is none: a clear error, not a fallback */
    tg_backend *cuda = NULL;
    tg_status probe = tg_backend_cuda_new(0, &cuda);
    if (probe) {
        o.backend = CT_BACKEND_CUDA;
        tg_status st = ct_session_open(&o, &s);
        CHECK(st && strstr(tg_status_message(st), "CUDA"));
        if (st) printf("  %s\n", tg_status_message(st));
        tg_status_free(st);
        CHECK(s == NULL);
        tg_status_free(probe);
    } else {
        tg_backend_free(cuda);
    }
    /* a session survives a bad language switch and keeps the old one */
    s = open_tiny(8);
    if (s) {
        CHECK_ERR(ct_session_set_language(s, "klingon", true), TG_ERR_INVALID_ARG, "klingon");
        CHECK_OK(ct_session_set_language(s, "ja", false));
        ct_session_close(s);
    }
}

/* Out of memory at any allocation of opening a session and transcribing
 * is an error, never a crash or a half-made result: fail the n-th
 * allocation for n = 0, 3, 6, ... until the whole run succeeds. */
static void allocation_failures_are_clean(void) {
    float *x = tg_malloc(20480 * sizeof(float));
    if (!x) return;
    for (int i = 0; i < 20480; i++) x[i] = (float)((i * 7919) % 200 - 100) / 1000.0f;
    int n, failures = 0;
    bool ok = false;
    for (n = 0; n < 400000 && !ok; n += 3) {
        ct_options o;
        ct_options_init(&o);
        o.model_dir = TINY "/hub";
        o.backend = CT_BACKEND_CPU;
        o.n_threads = 1;
        o.max_new_tokens = 3;
        ct_session *s = NULL;
        ct_result *r = NULL;
        tg_alloc_fail_after(n);
        tg_status st = ct_session_open(&o, &s);
        if (!st) st = ct_transcribe_pcm(s, x, 20480, &r);
        tg_alloc_fail_after(-1);
        if (st) {
            failures++;
            CHECK(r == NULL);
            CHECK(tg_status_message(st)[0] != 0);
        } else {
            ok = r && r->text && r->n_tokens >= 0;
        }
        tg_status_free(st);
        ct_result_free(r);
        ct_session_close(s);
    }
    printf("  %d injected failures were clean errors; success from allocation %d on\n",
           failures, n - 3);
    CHECK(ok);
    tg_free(x);
}

/* ------------------------------------------------------------------- CLI */

static char cli[600];

static bool find_cli(void) {
    char self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return false;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return false;
    *slash = 0;
    snprintf(cli, sizeof cli, "%s/cohere-transcribe", self);
    return access(cli, X_OK) == 0;
}

static int run_cli(const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>/tmp/ct-cli-err.txt", cli, args);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static bool err_has(const char *needle) {
    char *text = NULL;
    size_t size = 0;
    tg_status st = tg_file_read("/tmp/ct-cli-err.txt", &text, &size);
    bool ok = !st && text && strstr(text, needle);
    if (!ok) fprintf(stderr, "CLI stderr lacks '%s': %s\n", needle, text ? text : "");
    tg_status_free(st);
    tg_free(text);
    return ok;
}

static void cli_usage_errors_exit_2(void) {
    if (!find_cli()) {
        printf("  (cohere-transcribe not built next to the test; skipped)\n");
        CHECK(1);
        return;
    }
    const char *m = "--model " TINY "/hub ";
    char a[1024];
    CHECK(run_cli("--help") == 0);
    CHECK(run_cli("--bogus x.wav") == 2 && err_has("--bogus"));
    /* without --model, a default that is not there is a usage error naming it */
    setenv("COHERE_TRANSCRIBE_MODEL", "/no/such/model", 1);
    CHECK(run_cli(TINY "/audio/a.wav") == 2 && err_has("COHERE_TRANSCRIBE_MODEL") && err_has("/no/such/model"));
    unsetenv("COHERE_TRANSCRIBE_MODEL");
    snprintf(a, sizeof a, "%s", m);
    CHECK(run_cli(a) == 2 && err_has("no input files"));
    snprintf(a, sizeof a, "%s/nope.wav", m);
    CHECK(run_cli(a) == 2 && err_has("nope.wav"));
    snprintf(a, sizeof a, "%s--threads abc " TINY "/audio/a.wav", m);
    CHECK(run_cli(a) == 2 && err_has("--threads"));
    snprintf(a, sizeof a, "%s--max-new-tokens 0 " TINY "/audio/a.wav", m);
    CHECK(run_cli(a) == 2 && err_has("--max-new-tokens"));
    snprintf(a, sizeof a, "%s--backend tpu " TINY "/audio/a.wav", m);
    CHECK(run_cli(a) == 2 && err_has("tpu"));
    snprintf(a, sizeof a, "%s--language", m);
    CHECK(run_cli(a) == 2 && err_has("--language needs a value"));
    CHECK(run_cli("--model /no/such/dir " TINY "/audio/a.wav") == 2 && err_has("/no/such/dir"));
    /* a bad language is a bad value: exit 2 naming the flag, before any
     * model is loaded (this directory holds none) */
    snprintf(a, sizeof a, "%s--language xx " TINY "/audio/a.wav", m);
    CHECK(run_cli(a) == 2 && err_has("--language") && err_has("'xx'"));
    CHECK(run_cli("--model " TINY " --language EN " TINY "/audio/a.wav") == 2 &&
          err_has("--language"));
    /* a dump file that cannot be written is found before the run, not after */
    snprintf(a, sizeof a, "%s--dump-tensors /no/such/dir/d.safetensors " TINY "/audio/a.wav", m);
    CHECK(run_cli(a) == 2 && err_has("--dump-tensors") && err_has("/no/such/dir"));
    snprintf(a, sizeof a, "%s--dump-tensors /tmp " TINY "/audio/a.wav", m);
    CHECK(run_cli(a) == 2 && err_has("--dump-tensors") && err_has("directory"));
    /* runtime errors: exit 1 with the reason */
    snprintf(a, sizeof a, "%s" TINY "/README.md", m);
    CHECK(run_cli(a) == 1 && err_has("README.md"));
    /* and a good run (--text-only: nothing written into tests/data) */
    snprintf(a, sizeof a, "%s--text-only --max-new-tokens 4 " TINY "/audio/b.wav", m);
    CHECK(run_cli(a) == 0);
    unlink("/tmp/ct-cli-err.txt");
}

TEST_MAIN(T(bad_pcm_is_an_error), T(silence_transcribes_finitely), T(bad_files_are_named),
          T(bad_options_are_named), T(allocation_failures_are_clean),
          T(cli_usage_errors_exit_2))
