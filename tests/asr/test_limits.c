/*
 * test_limits.c: the decoder's position limit at the API's edges.
 *
 * The decoder has max_positions (1024 in the released model) learned
 * positions, so prompt + generated tokens can never exceed it: a larger
 * max_new_tokens (up to INT_MAX, a natural "no limit" a caller may pass)
 * must be clamped, never overflow into a bogus size or a cache overrun.
 * The tiny model has the released 1024 positions; feeding it an EOS id
 * that never comes makes greedy decoding run to the limit.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audio.h"
#include "base.h"
#include "check.h"
#include "cohere_transcribe.h"
#include "greedy.h"
#include "model.h"

#define TINY TEST_DATA_DIR "/tiny"

static void greedy_stops_at_the_last_position(void) {
    tg_backend *cpu = NULL;
    tg_sched *sched = NULL;
    ct_model *m = NULL;
    ct_mel mel = {0};
    ct_audio a = {0};
    float *feat = NULL;
    ct_enc_result enc = {0};
    CHECK_OK(tg_backend_cpu_new(2, &cpu));
    if (!cpu) return;
    CHECK_OK(tg_sched_new(&cpu, 1, &sched));
    CHECK_OK(ct_model_load(TINY "/hub", cpu, &m));
    CHECK_OK(ct_mel_init(&mel));
    CHECK_OK(ct_wav_read(TINY "/audio/a.wav", &a));
    if (!sched || !m || !mel.filters || !a.samples) goto done;
    CHECK(m->max_positions == 1024);
    int frames = 0, valid = 0;
    CHECK_OK(ct_mel_compute(&mel, a.samples, a.n, &feat, &frames, &valid));
    if (!feat) goto done;
    ct_enc_opts eo = {.f32 = true};
    CHECK_OK(ct_encoder_run(m, sched, feat, 1, frames, &valid, &eo, &enc));
    if (!enc.out) goto done;
    const int32_t prompt[10] = {13764, 7, 4, 16, 62, 62, 5, 9, 11, 13};
    const int asks[3] = {m->max_positions - 10 + 1, 5000, INT_MAX};
    for (int i = 0; i < 3; i++) {
        ct_greedy_opts go = {.max_new_tokens = asks[i], .eos_id = -1, .pad_id = 2, .f32 = true};
        ct_greedy_result gr = {0};
        tg_status st = ct_greedy_decode(m, sched, &enc, prompt, 10, &go, &gr);
        CHECK_MSG(st == NULL, "max_new_tokens %d: %s", asks[i], st ? tg_status_message(st) : "");
        tg_status_free(st);
        if (!st) {
            CHECK_MSG(gr.n_cols == m->max_positions, "max_new_tokens %d: %d columns", asks[i],
                      gr.n_cols);
            CHECK(gr.n_steps == m->max_positions - 10);
            CHECK(gr.n_tokens && gr.n_tokens[0] == m->max_positions);
        }
        ct_greedy_result_free(&gr);
    }
done:
    ct_enc_result_free(&enc);
    tg_free(feat);
    ct_audio_free(&a);
    if (mel.filters) ct_mel_free(&mel);
    ct_model_free(m);
    tg_sched_free(sched);
    tg_backend_free(cpu);
}

/* The same through the public API: INT_MAX new tokens is a clamp. */
static void session_takes_any_max_new_tokens(void) {
    ct_options o;
    ct_options_init(&o);
    o.model_dir = TINY "/hub";
    o.backend = CT_BACKEND_CPU;
    o.n_threads = 2;
    o.max_new_tokens = INT_MAX;
    ct_session *s = NULL;
    CHECK_OK(ct_session_open(&o, &s));
    if (!s) return;
    ct_result *r = NULL;
    CHECK_OK(ct_transcribe_file(s, TINY "/audio/b.wav", &r));
    CHECK(r && r->text && r->n_tokens >= 0 && r->n_tokens <= 1024 - 10);
    ct_result_free(r);
    ct_session_close(s);
}

/* A checkpoint whose config asks for another sample rate than the
 * frontend's fixed 16 kHz (spec 4) is refused, not fed 16 kHz features. */
static void other_sample_rate_is_refused(void) {
    char dir[] = "/tmp/ct-rate-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0);
        return;
    }
    char *text = NULL, path[512], src[512];
    size_t size = 0;
    CHECK_OK(tg_file_read(TINY "/hub/config.json", &text, &size));
    if (!text) return;
    /* 16000 appears as "sample_rate" at the top and in "preprocessor" */
    for (char *p = strstr(text, "16000"); p; p = strstr(p, "16000")) memcpy(p, "08000", 5);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(text, 1, size, f) == size);
    if (f) fclose(f);
    tg_free(text);
    const char *links[3] = {"model.safetensors", "tokenizer.model", "generation_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(src, sizeof src, "%s/hub/%s", TINY, links[i]);
        snprintf(path, sizeof path, "%s/%s", dir, links[i]);
        CHECK(symlink(src, path) == 0);
    }
    ct_options o;
    ct_options_init(&o);
    o.model_dir = dir;
    o.backend = CT_BACKEND_CPU;
    o.n_threads = 1;
    ct_session *s = NULL;
    CHECK_ERR(ct_session_open(&o, &s), TG_ERR_UNSUPPORTED, "8000");
    CHECK(s == NULL);
    ct_session_close(s);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, links[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

TEST_MAIN(T(greedy_stops_at_the_last_position), T(session_takes_any_max_new_tokens),
          T(other_sample_rate_is_refused))
