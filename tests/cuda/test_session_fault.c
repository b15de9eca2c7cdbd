/*
 * test_session_fault.c: a session on the GPU lives through a real CUDA
 * error (issue 12, "GPU faults"), tiny model, f32: the runtime's fault hook
 * (tg_backend_fail_after) on the CUDA backend arms its own test fault
 * (tg_cuda_test_fault_next kind 1, a launch the driver rejects), so the
 * context fails by a CUDA error in the middle of a transcription. That call
 * fails with TG_ERR_DEVICE and the CUDA text, the session makes its
 * backends again, and the next call gives the fault-free run's tokens. A
 * batch whose device allocation fails is halved and gives the same tokens.
 *
 * Prints "skipped: no CUDA device" and passes where there is no GPU, as the
 * other tests of this folder. The CPU twin is tests/asr/test_faults.c.
 */
#include <string.h>

#include "check.h"
#include "cohere_transcribe.h"
#include "tg.h"

#define TINY TEST_DATA_DIR "/tiny"

static ct_session *open_on_gpu_or_skip(void) {
    tg_backend *b = NULL;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) {
        printf("skipped: no CUDA device (%s)\n", tg_status_message(st));
        CHECK(tg_status_code(st) == TG_ERR_UNSUPPORTED || tg_status_code(st) == TG_ERR_DEVICE);
        tg_status_free(st);
        return NULL;
    }
    tg_backend_free(b);
    ct_options o;
    ct_options_init(&o);
    o.model_dir = TINY "/hub";
    o.backend = CT_BACKEND_CUDA;
    o.max_new_tokens = 24;
    o.f32 = 1;
    ct_session *s = NULL;
    CHECK_OK(ct_session_open(&o, &s));
    return s;
}

static bool same_tokens(const ct_result *a, const ct_result *b) {
    return a && b && a->n_tokens == b->n_tokens &&
           !memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof(int32_t));
}

static void cuda_error_mid_transcription_then_the_session_recovers(void) {
    ct_session *s = open_on_gpu_or_skip();
    if (!s) return;
    ct_result *ref = NULL, *r = NULL;
    CHECK_OK(ct_transcribe_file(s, TINY "/audio/a.wav", &ref));
    for (long at = 0; at <= 6; at += 6) { /* the encoder's compute, a decoder step */
        tg_backend_fail_after(TG_BACKEND_FAULT_COMPUTE, at, 1);
        tg_status st = ct_transcribe_file(s, TINY "/audio/a.wav", &r);
        tg_backend_fail_after(TG_BACKEND_FAULT_COMPUTE, -1, 0);
        CHECK(st != NULL && r == NULL);
        if (st) {
            const char *m = tg_status_message(st);
            printf("  fault at compute %ld: %s\n", at, m);
            CHECK(tg_status_code(st) == TG_ERR_DEVICE);
            CHECK_MSG(strstr(m, "a.wav") && strstr(m, "cuda0"), "%s", m);
            CHECK_MSG(strstr(m, "backends were recreated"), "%s", m);
        }
        tg_status_free(st);
        CHECK_OK(ct_transcribe_file(s, TINY "/audio/a.wav", &r));
        CHECK(same_tokens(r, ref));
        ct_result_free(r);
        r = NULL;
        CHECK(!strncmp(ct_session_backend(s), "cuda", 4));
        /* the frontend's tables were made again on the new backend */
        CHECK(!strcmp(ct_session_frontend(s), "backend"));
    }
    ct_fault_stats fs;
    ct_session_fault_stats(s, &fs);
    CHECK(fs.backend_restarts == 2);
    ct_result_free(ref);
    ct_session_close(s);
}

static void device_out_of_memory_halves_the_batch(void) {
    ct_session *s = open_on_gpu_or_skip();
    if (!s) return;
    ct_pcm a, b;
    CHECK_OK(ct_pcm_load(TINY "/audio/a.wav", 0, &a));
    CHECK_OK(ct_pcm_load(TINY "/audio/b.wav", 0, &b));
    const float *clips[4] = {a.samples, b.samples, a.samples, b.samples};
    size_t n[4] = {a.n, b.n, a.n / 2, b.n};
    ct_result *ref[4] = {0}, *got[4] = {0};
    if (a.samples && b.samples) {
        CHECK_OK(ct_transcribe_batch(s, clips, n, 4, ref));
        ct_session_close(s);
        s = open_on_gpu_or_skip(); /* no arena yet: the first allocation is the batch's */
    }
    if (s && a.samples && b.samples) {
        tg_backend_fail_after(TG_BACKEND_FAULT_ALLOC, 0, 1);
        CHECK_OK(ct_transcribe_batch(s, clips, n, 4, got));
        tg_backend_fail_after(TG_BACKEND_FAULT_ALLOC, -1, 0);
        for (int i = 0; i < 4; i++) CHECK_MSG(same_tokens(got[i], ref[i]), "clip %d", i);
        ct_fault_stats fs;
        ct_session_fault_stats(s, &fs);
        CHECK(fs.oom_halvings == 1 && fs.batch_limit == 2 && fs.backend_restarts == 0);
    }
    for (int i = 0; i < 4; i++) {
        ct_result_free(ref[i]);
        ct_result_free(got[i]);
    }
    ct_pcm_free(&a);
    ct_pcm_free(&b);
    ct_session_close(s);
}

TEST_MAIN(T(cuda_error_mid_transcription_then_the_session_recovers),
          T(device_out_of_memory_halves_the_batch))
