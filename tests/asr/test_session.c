/*
 * test_session.c: the public API (ct_session_*, ct_transcribe_*) end to
 * end on the tiny fixture model (tests/data/tiny/README.md), CPU, f32:
 * a file gives the reference's tokens and the debug hook sees them with
 * the documented names and shapes; padding a batch to a frame bucket
 * changes nothing valid; long audio is split, decoded and joined.
 *
 * Tolerance: the README's 1e-3 relative L2 on the encoder output (f32 on
 * the CPU matches transformers to ~1e-6; the margin absorbs summation
 * order). The fixture numbers themselves are tests/model/test_fixtures.c.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "check.h"
#include "cohere_transcribe.h"
#include "safetensors.h"

#define TINY TEST_DATA_DIR "/tiny"
#define REL_TOL 1e-3

/* The public API end to end: a file through ct_transcribe_file gives the
 * reference's tokens (24 new, no EOS) and the debug hook sees them. */
typedef struct hook_seen {
    int n_generated, n_features;
    int32_t generated[64];
    int64_t feat_frames;
} hook_seen;

/* The options every case here opens the tiny model with: the CPU, two
 * threads, 24 new tokens (the reference's count). */
static void tiny_options(ct_options *o, const char *dir) {
    ct_options_init(o);
    o->model_dir = dir;
    o->backend = CT_BACKEND_CPU;
    o->n_threads = 2;
    o->max_new_tokens = 24;
}

static void hook(void *user, int index, const char *name, tg_type type, int n_dims,
                 const int64_t *shape, const void *data) {
    hook_seen *h = user;
    if (!strcmp(name, "generated") && index == 0 && type == TG_I32 && shape[0] <= 64) {
        h->n_generated = (int)shape[0];
        memcpy(h->generated, data, (size_t)shape[0] * sizeof(int32_t));
    }
    if (!strcmp(name, "features") && n_dims == 2) {
        h->n_features++;
        h->feat_frames = shape[0];
    }
}

static void session_matches_reference(void) {
    static const char *layouts[2] = {"hub", "hf"};
    st_set *ref = NULL;
    CHECK_OK(st_open_file(TINY "/reference.safetensors", &ref));
    if (!ref) return;
    const st_tensor *rg = st_find(ref, "a.generated");
    CHECK(rg != NULL);
    for (int li = 0; li < 2 && rg; li++) {
        char dir[256];
        snprintf(dir, sizeof dir, "%s/%s", TINY, layouts[li]);
        ct_options o;
        tiny_options(&o, dir);
        hook_seen seen = {0};
        o.dump = hook;
        o.dump_user = &seen;
        ct_session *s = NULL;
        CHECK_OK(ct_session_open(&o, &s));
        if (!s) continue;
        ct_result *r = NULL;
        CHECK_OK(ct_transcribe_file(s, TINY "/audio/a.wav", &r));
        if (r) {
            const int32_t *want = (const int32_t *)(const void *)rg->data;
            CHECK(r->n_tokens == 24);
            for (int i = 0; i < r->n_tokens && i < 24; i++) CHECK(r->tokens[i] == want[10 + i]);
            CHECK(r->text != NULL && r->text[0] != ' ');
            CHECK(r->n_chunks == 1);
            CHECK(seen.n_generated == 34);
            for (int i = 0; i < 34 && seen.n_generated == 34; i++)
                CHECK(seen.generated[i] == want[i]);
            CHECK(seen.n_features == 1 && seen.feat_frames == 338);
            printf("  session %s: \"%.60s...\" (%d tokens)\n", layouts[li], r->text, r->n_tokens);
        }
        ct_result_free(r);
        ct_session_close(s);
    }
    st_close(ref);
}

/* Extra padded frames are masked everywhere (spec 2.6): rounding clip a's
 * 338 frames up to 512 leaves its valid encoder output and tokens as the
 * reference's. */
typedef struct enc_seen {
    float *out;
    int64_t frames, d;
} enc_seen;

static void enc_hook(void *user, int index, const char *name, tg_type type, int n_dims,
                     const int64_t *shape, const void *data) {
    enc_seen *e = user;
    if (strcmp(name, "encoder_out") || index != 0 || n_dims != 2) return;
    e->frames = shape[0];
    e->d = shape[1];
    e->out = tg_malloc((size_t)(shape[0] * shape[1]) * sizeof(float));
    if (e->out) memcpy(e->out, data, (size_t)(shape[0] * shape[1]) * sizeof(float));
}

static void padding_keeps_results(void) {
    st_set *ref = NULL;
    CHECK_OK(st_open_file(TINY "/reference.safetensors", &ref));
    if (!ref) return;
    const st_tensor *ro = st_find(ref, "a.encoder_out"), *rg = st_find(ref, "a.generated");
    ct_options o;
    tiny_options(&o, TINY "/hub");
    o.frame_bucket = 256;
    enc_seen seen = {0};
    o.dump = enc_hook;
    o.dump_user = &seen;
    ct_session *s = NULL;
    CHECK_OK(ct_session_open(&o, &s));
    ct_result *r = NULL;
    if (s) CHECK_OK(ct_transcribe_file(s, TINY "/audio/a.wav", &r));
    if (r && ro && rg && seen.out) {
        CHECK(seen.frames == 43 && seen.d == 64);
        const float *want_out = (const float *)(const void *)ro->data;
        double num = 0, den = 0;
        for (int i = 0; i < 43 * 64; i++) {
            num += (seen.out[i] - want_out[i]) * (double)(seen.out[i] - want_out[i]);
            den += (double)want_out[i] * want_out[i];
        }
        printf("  a padded to 512 frames: encoder_out rel L2 %.3g\n", sqrt(num / den));
        CHECK(sqrt(num / den) <= REL_TOL);
        const int32_t *want = (const int32_t *)(const void *)rg->data;
        CHECK(r->n_tokens == 24);
        for (int i = 0; i < 24 && r->n_tokens == 24; i++) CHECK(r->tokens[i] == want[10 + i]);
    }
    tg_free(seen.out);
    ct_result_free(r);
    ct_session_close(s);
    st_close(ref);
}

/* Long audio through the session: three chunks, each chunk's tokens as the
 * reference's (up to EOS), texts joined with spaces. */
static void session_long_audio(void) {
    st_set *ref = NULL;
    CHECK_OK(st_open_file(TINY "/reference_long.safetensors", &ref));
    if (!ref) return;
    const st_tensor *rg = st_find(ref, "long.generated");
    ct_options o;
    tiny_options(&o, TINY "/hub");
    ct_session *s = NULL;
    CHECK_OK(ct_session_open(&o, &s));
    ct_result *r = NULL;
    if (s) CHECK_OK(ct_transcribe_file(s, TINY "/audio/long.wav", &r));
    if (r && rg) {
        CHECK(r->n_chunks == 3);
        /* the reference rows hold prompt + 24 ids, padded after EOS (3) */
        const int32_t *want = (const int32_t *)(const void *)rg->data;
        int k = 0, bad = 0;
        for (int c = 0; c < 3; c++)
            for (int t = 10; t < 34; t++) {
                int32_t id = want[c * 34 + t];
                if (id == 3) break;
                if (k >= r->n_tokens || r->tokens[k] != id) bad++;
                k++;
            }
        CHECK(k == r->n_tokens);
        CHECK(bad == 0);
        printf("  long: %d chunks, %d tokens, %.1f s: frontend %.1f ms, encoder %.1f ms, "
               "decoder %.1f ms\n",
               r->n_chunks, r->n_tokens, r->duration_s, r->timings.frontend_ms,
               r->timings.encoder_ms, r->timings.decoder_ms);
    }
    ct_result_free(r);
    ct_session_close(s);
    st_close(ref);
}

/* ct_session_open_times: the open's parts are inside its total, and on the
 * CPU the bf16 matrices are used from the mapping (most of the checkpoint:
 * 4.9 of its 5.1 MB) while the small tensors are converted to F32 copies. */
static void open_times_add_up(void) {
    ct_open_times t;
    memset(&t, 0xff, sizeof t);
    ct_session_open_times(NULL, &t);
    CHECK(t.total_ms == 0.0 && t.weights_ms == 0.0 && t.weights_bytes == 0 && t.mapped_bytes == 0);
    ct_options o;
    tiny_options(&o, TINY "/hub");
    ct_session *s = NULL;
    CHECK_OK(ct_session_open(&o, &s));
    if (!s) return;
    ct_session_open_times(s, &t);
    CHECK(t.backends_ms >= 0.0 && t.weights_ms >= 0.0);
    CHECK(t.total_ms >= t.backends_ms + t.weights_ms);
    struct stat file;
    CHECK(stat(TINY "/hub/model.safetensors", &file) == 0);
    CHECK(t.mapped_bytes > (uint64_t)file.st_size * 3 / 4 && t.mapped_bytes < (uint64_t)file.st_size);
    CHECK(t.weights_bytes > 0 && t.weights_bytes < 1000000);
    printf("  open: backends %.1f ms, weights %.1f ms (%.1f MB mapped, %.2f MB copied), all %.1f ms\n",
           t.backends_ms, t.weights_ms, t.mapped_bytes / 1e6, t.weights_bytes / 1e6, t.total_ms);
    ct_session_close(s);
}

/* The decoder's memory kept from call to call (CT_DECODER_KEEP, default
 * on): a second call of the same shapes gives the same tokens and leaves
 * the session holding the same backend memory as the first (nothing made
 * anew), and that is more than a session that makes it for each call holds
 * after its call (the caches it gave back). */
static size_t transcribe_twice(const char *keep, ct_result **out) {
    if (keep) setenv("CT_DECODER_KEEP", keep, 1);
    ct_options o;
    tiny_options(&o, TINY "/hub");
    ct_session *s = NULL;
    CHECK_OK(ct_session_open(&o, &s));
    unsetenv("CT_DECODER_KEEP");
    size_t held[2] = {0, 0};
    ct_result *r[2] = {NULL, NULL};
    for (int i = 0; i < 2 && s; i++) {
        CHECK_OK(ct_transcribe_file(s, TINY "/audio/a.wav", &r[i]));
        tg_backend_stats st;
        ct_session_stats(s, &st);
        held[i] = st.mem_in_use;
    }
    if (r[0] && r[1]) {
        CHECK(r[0]->n_tokens == r[1]->n_tokens);
        for (int i = 0; i < r[0]->n_tokens && r[0]->n_tokens == r[1]->n_tokens; i++)
            CHECK(r[0]->tokens[i] == r[1]->tokens[i]);
    }
    CHECK_MSG(held[0] == held[1], "CT_DECODER_KEEP=%s: %zu bytes held after the first call, %zu after the second",
              keep ? keep : "(unset)", held[0], held[1]);
    ct_result_free(r[1]);
    *out = r[0];
    ct_session_close(s);
    return held[1];
}

static void decoder_memory_kept(void) {
    ct_result *kept = NULL, *made = NULL;
    size_t with = transcribe_twice(NULL, &kept), without = transcribe_twice("0", &made);
    printf("  backend memory held after a call: %zu bytes with the decoder's kept, %zu without\n", with, without);
    CHECK(with > without && without > 0);
    if (kept && made) {
        CHECK(kept->n_tokens == made->n_tokens && kept->n_tokens == 24);
        for (int i = 0; i < kept->n_tokens && kept->n_tokens == made->n_tokens; i++)
            CHECK(kept->tokens[i] == made->tokens[i]);
    }
    ct_result_free(kept);
    ct_result_free(made);
}

TEST_MAIN(T(session_matches_reference), T(padding_keeps_results), T(session_long_audio),
          T(open_times_add_up), T(decoder_memory_kept))
