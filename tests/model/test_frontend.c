/*
 * test_frontend.c: the log-mel frontend as graph nodes (src/model/frontend.c)
 * against mel.c's host frontend, value for value, and the encoder fed by it
 * against the encoder fed host features.
 *
 * The clips of one padded batch: the fixture clips a and b (speech), seeded
 * noise, a quiet tone after exact digital silence (constant bins), a clip of
 * all zeros, the shortest clip the frontend takes (320 samples: 2 valid
 * frames) and one of exactly 160·k samples; the batch is padded three frames
 * past its longest row, as frame bucketing pads it. Features must agree
 * within the fixtures' 1e-4 absolute on every valid frame and be exactly
 * zero on every other, including the all-zero clip's (mel.c normalises a
 * constant bin to exact zeros; so must the graph).
 *
 * On the CPU backend always; with CT_TEST_BACKEND=cuda (scripts/gpu-check.sh)
 * on the GPU too, where the products run on cuBLASLt in f32. Also the bad
 * inputs: too few valid frames, a clip longer than the batch, non-finite
 * samples, bad arguments.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "base.h"
#include "check.h"
#include "cohere_transcribe.h"
#include "model.h"

#define TINY TEST_DATA_DIR "/tiny"
#define FEAT_TOL 1e-4
#define N_CLIPS 7
#define PAD_EXTRA 3

static bool want_gpu(void) {
    const char *b = getenv("CT_TEST_BACKEND");
    return b && !strcmp(b, "cuda");
}

typedef struct env {
    tg_backend *cpu, *gpu, *be; /* be: where the frontend runs */
    tg_sched *sched;
    ct_mel mel;
    ct_frontend *fe;
} env;

static bool env_open(env *e, bool gpu) {
    memset(e, 0, sizeof *e);
    tg_status st = tg_backend_cpu_new(2, &e->cpu);
    if (!st && gpu) st = tg_backend_cuda_new(0, &e->gpu);
    e->be = e->gpu ? e->gpu : e->cpu;
    if (!st) {
        tg_backend *list[2] = {e->be, e->cpu};
        st = tg_sched_new(list, e->gpu ? 2 : 1, &e->sched);
    }
    if (!st) st = ct_mel_init(&e->mel);
    float *dft = tg_malloc((size_t)CT_MEL_SPEC * CT_MEL_GRID_WIN * sizeof *dft);
    float *pairs = tg_malloc((size_t)128 * CT_MEL_SPEC * sizeof *pairs);
    if (!st && (!dft || !pairs)) st = tg_status_new(TG_ERR_NO_MEMORY, "tables");
    if (!st) {
        ct_mel_dft_table(&e->mel, dft);
        ct_mel_filter_pairs(&e->mel, pairs);
        st = ct_frontend_new(e->be, 128, CT_MEL_GRID_WIN, CT_MEL_GRID_HOP, CT_MEL_SPEC, dft, pairs,
                             &e->fe);
    }
    tg_free(dft);
    tg_free(pairs);
    CHECK_OK(st);
    return e->fe != NULL;
}

static void env_close(env *e) {
    ct_frontend_free(e->fe);
    ct_mel_free(&e->mel);
    tg_sched_free(e->sched);
    tg_backend_free(e->gpu);
    tg_backend_free(e->cpu);
}

/* The batch's clips (owned: free with clips_free). */
typedef struct clips {
    float *x[N_CLIPS];
    size_t n[N_CLIPS];
    ct_audio a, b;
} clips;

static void clips_free(clips *c) {
    for (int i = 2; i < N_CLIPS; i++) tg_free(c->x[i]);
    ct_audio_free(&c->a);
    ct_audio_free(&c->b);
}

static bool clips_make(clips *c) {
    memset(c, 0, sizeof *c);
    CHECK_OK(ct_wav_read(TINY "/audio/a.wav", &c->a));
    CHECK_OK(ct_wav_read(TINY "/audio/b.wav", &c->b));
    if (!c->a.samples || !c->b.samples) return false;
    c->x[0] = c->a.samples, c->n[0] = c->a.n;
    c->x[1] = c->b.samples, c->n[1] = c->b.n;
    const size_t n[] = {0, 0, 20011, 24000, 8000, 320, 160 * 77};
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 2; i < N_CLIPS; i++) {
        c->n[i] = n[i];
        c->x[i] = tg_calloc(n[i], sizeof(float));
        if (!c->x[i]) return false;
        for (size_t k = 0; k < n[i]; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(s >> 11) / 9007199254740992.0 - 0.5;
            switch (i) {
            case 2: c->x[i][k] = (float)(0.6 * u); break; /* noise */
            case 3: /* 0.5 s of exact silence, then a tone at -40 dB */
                c->x[i][k] = k < 8000 ? 0.0f : (float)(0.01 * sin(0.1727 * (double)k));
                break;
            case 4: break; /* all zeros */
            default: c->x[i][k] = (float)(0.3 * sin(0.05 * (double)k) + 0.01 * u); break;
            }
        }
    }
    return true;
}

/* The frontend graph alone on e->be: features [B][T][128] into out. */
static tg_status graph_features(env *e, const float *grid, const int *valid, int T, int B,
                                float *out) {
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = ctx ? tg_graph_new(ctx) : NULL;
    if (!g) {
        tg_ctx_free(ctx);
        return tg_status_new(TG_ERR_NO_MEMORY, "graph");
    }
    ct_frontend_graph fg;
    tg_tensor *y = ct_frontend_build(e->fe, ctx, T, B, &fg);
    if (y) y->flags |= TG_FLAG_OUTPUT;
    tg_status st = tg_ctx_check(ctx);
    if (!st) st = tg_graph_build(g, y);
    if (!st) st = tg_sched_alloc(e->sched, g);
    if (!st) st = ct_frontend_set(&fg, grid, valid);
    if (!st) st = tg_sched_compute(e->sched, g);
    if (!st) st = tg_tensor_get(y, out, 0, (size_t)B * T * 128 * sizeof(float));
    tg_ctx_free(ctx);
    return st;
}

static void check_against_host(bool gpu) {
    env e;
    clips c = {0};
    if (!env_open(&e, gpu) || !clips_make(&c)) {
        env_close(&e);
        clips_free(&c);
        return;
    }
    int T = 0;
    for (int i = 0; i < N_CLIPS; i++)
        if (ct_mel_frames(c.n[i]) > T) T = ct_mel_frames(c.n[i]);
    T += PAD_EXTRA;
    const int B = N_CLIPS;
    size_t L = ct_mel_grid_len(T);
    float *host = tg_malloc((size_t)B * T * 128 * sizeof(float));
    float *dev = tg_malloc((size_t)B * T * 128 * sizeof(float));
    float *grid = tg_malloc((size_t)B * L * sizeof(float));
    int frames[N_CLIPS], valid[N_CLIPS], gframes[N_CLIPS], gvalid[N_CLIPS];
    CHECK(host && dev && grid);
    const float *const *x = (const float *const *)c.x;
    if (host && dev && grid) {
        CHECK_OK(ct_mel_compute_padded(&e.mel, x, c.n, B, NULL, T, host, frames, valid));
        CHECK_OK(ct_mel_grid_padded(&e.mel, x, c.n, B, NULL, T, grid, gframes, gvalid));
        CHECK(!memcmp(frames, gframes, sizeof frames) && !memcmp(valid, gvalid, sizeof valid));
        CHECK_OK(graph_features(&e, grid, valid, T, B, dev));
        double worst = 0;
        for (int b = 0; b < B; b++) {
            double err = 0;
            size_t nonzero = 0;
            for (int t = 0; t < T; t++)
                for (int k = 0; k < 128; k++) {
                    size_t i = ((size_t)b * T + t) * 128 + k;
                    if (t < valid[b]) {
                        double d = fabs((double)dev[i] - host[i]);
                        if (!(d <= err)) err = d; /* NaN wins */
                    } else {
                        nonzero += dev[i] != 0.0f;
                    }
                }
            printf("  %s row %d (%zu samples, %d valid frames): max abs err %.3g\n",
                   tg_backend_name(e.be), b, c.n[b], valid[b], err);
            CHECK_MSG(err <= FEAT_TOL, "row %d: features differ by %g (> %g)", b, err, FEAT_TOL);
            CHECK_MSG(nonzero == 0, "row %d: %zu values past the valid frames are not 0", b, nonzero);
            if (!(err <= worst)) worst = err;
        }
        /* the all-zero clip: exact zeros everywhere, as on the host */
        size_t nz = 0;
        for (size_t i = 0; i < (size_t)T * 128; i++) nz += dev[(size_t)4 * T * 128 + i] != 0.0f;
        CHECK_MSG(nz == 0, "digital silence: %zu nonzero features", nz);
        printf("  %s: batch of %d, %d frames: worst %.3g\n", tg_backend_name(e.be), B, T, worst);
    }
    tg_free(host);
    tg_free(dev);
    tg_free(grid);
    clips_free(&c);
    env_close(&e);
}

static void test_graph_matches_host_frontend(void) {
    check_against_host(false);
    if (want_gpu()) check_against_host(true);
}

/* The grid: 200 zeros, the pre-emphasised clip, zeros to the row's end. */
static void test_grid_layout(void) {
    ct_mel mel;
    CHECK_OK(ct_mel_init(&mel));
    CHECK(ct_mel_grid_len(1) == 400 && ct_mel_grid_len(3) == 720);
    float x[500];
    for (int i = 0; i < 500; i++) x[i] = (float)(i % 7) - 3.0f;
    const float *clip = x;
    size_t n = 500;
    int T = 5, frames, valid;
    size_t L = ct_mel_grid_len(T);
    float *row = tg_malloc(L * sizeof *row);
    CHECK(row != NULL);
    if (row) {
        for (size_t i = 0; i < L; i++) row[i] = 99.0f;
        CHECK_OK(ct_mel_grid_padded(&mel, &clip, &n, 1, NULL, T, row, &frames, &valid));
        CHECK(frames == 4 && valid == 3);
        size_t bad = 0;
        for (size_t p = 0; p < L; p++) {
            float want = p < 200 || p >= 200 + n ? 0.0f
                         : p == 200             ? x[0]
                                                : x[p - 200] - 0.97f * x[p - 201];
            bad += row[p] != want;
        }
        CHECK_MSG(bad == 0, "%zu grid values differ", bad);
    }
    tg_free(row);
    ct_mel_free(&mel);
}

/* The encoder fed by the graph frontend against the encoder fed host
 * features: same model, same batch (rows of different lengths). */
static void check_encoder(bool gpu) {
    env e;
    clips c = {0};
    ct_model *m = NULL;
    if (!env_open(&e, gpu) || !clips_make(&c)) {
        env_close(&e);
        clips_free(&c);
        return;
    }
    CHECK_OK(ct_model_load(TINY "/hub", e.be, &m));
    const int B = 3;
    const float *x[3] = {c.x[0], c.x[1], c.x[2]};
    size_t n[3] = {c.n[0], c.n[1], c.n[2]};
    int T = 0;
    for (int i = 0; i < B; i++)
        if (ct_mel_frames(n[i]) > T) T = ct_mel_frames(n[i]);
    float *feat = tg_malloc((size_t)B * T * 128 * sizeof(float));
    float *grid = tg_malloc((size_t)B * ct_mel_grid_len(T) * sizeof(float));
    int frames[3], valid[3];
    ct_enc_result ra = {0}, rb = {0};
    if (m && feat && grid) {
        ct_enc_opts eo = {.f32 = !gpu};
        CHECK_OK(ct_mel_compute_padded(&e.mel, x, n, B, NULL, T, feat, frames, valid));
        CHECK_OK(ct_mel_grid_padded(&e.mel, x, n, B, NULL, T, grid, frames, valid));
        CHECK_OK(ct_encoder_run(m, e.sched, feat, B, T, valid, &eo, &ra));
        CHECK_OK(ct_encoder_run_grid(m, e.sched, e.fe, grid, B, T, valid, &eo, &rb));
        if (ra.out && rb.out) {
            size_t cnt = tg_nelements(ra.out);
            float *ha = tg_malloc(cnt * sizeof *ha), *hb = tg_malloc(cnt * sizeof *hb);
            CHECK(ha && hb);
            if (ha && hb) {
                CHECK_OK(tg_tensor_get(ra.out, ha, 0, cnt * sizeof *ha));
                CHECK_OK(tg_tensor_get(rb.out, hb, 0, cnt * sizeof *hb));
                double num = 0, den = 0;
                for (int b = 0; b < B; b++)
                    for (int t = 0; t < ra.valid[b]; t++)
                        for (int k = 0; k < ra.d; k++) {
                            size_t i = ((size_t)b * ra.n_frames + t) * ra.d + k;
                            num += ((double)ha[i] - hb[i]) * ((double)ha[i] - hb[i]);
                            den += (double)ha[i] * ha[i];
                        }
                double rel = den > 0 ? sqrt(num / den) : INFINITY;
                printf("  %s: encoder output from graph features vs host features: rel L2 %.3g\n",
                       tg_backend_name(e.be), rel);
                /* the features differ by ~1e-5; on the GPU bf16 products add
                 * their own rounding, the same on both sides */
                CHECK_MSG(rel <= (gpu ? 1e-2 : 1e-4), "encoder outputs differ: rel L2 %g", rel);
            }
            tg_free(ha);
            tg_free(hb);
        }
        /* no frontend: refused, not crashed */
        CHECK_ERR(ct_encoder_run_grid(m, e.sched, NULL, grid, B, T, valid, &eo, &rb),
                  TG_ERR_INVALID_ARG, "ct_encoder_run_grid");
    }
    ct_enc_result_free(&ra);
    ct_enc_result_free(&rb);
    tg_free(feat);
    tg_free(grid);
    ct_model_free(m);
    clips_free(&c);
    env_close(&e);
}

static void test_encoder_on_graph_features(void) {
    check_encoder(false);
    if (want_gpu()) check_encoder(true);
}

static void test_bad_inputs(void) {
    env e;
    if (!env_open(&e, false)) {
        env_close(&e);
        return;
    }
    float one[8] = {0};
    ct_frontend *f = NULL;
    CHECK_ERR(ct_frontend_new(e.cpu, 128, 400, 500, 514, one, one, &f), TG_ERR_INVALID_ARG,
              "ct_frontend_new");
    CHECK_ERR(ct_frontend_new(NULL, 128, 400, 160, 514, one, one, &f), TG_ERR_INVALID_ARG,
              "ct_frontend_new");
    CHECK(f == NULL);

    /* a row with fewer than 2 valid frames cannot be normalised */
    tg_ctx *ctx = tg_ctx_new();
    tg_graph *g = tg_graph_new(ctx);
    ct_frontend_graph fg;
    tg_tensor *y = ct_frontend_build(e.fe, ctx, 4, 2, &fg);
    CHECK(y != NULL && y->ne[0] == 128 && y->ne[1] == 4 && y->ne[2] == 1 && y->ne[3] == 2);
    CHECK(fg.grid && fg.grid->ne[0] == (int64_t)ct_mel_grid_len(4) && fg.grid->ne[1] == 2);
    CHECK_OK(tg_graph_build(g, y));
    CHECK_OK(tg_sched_alloc(e.sched, g));
    float *grid = tg_calloc(2 * ct_mel_grid_len(4), sizeof(float));
    int bad[2] = {3, 1}, over[2] = {5, 3};
    CHECK_ERR(ct_frontend_set(&fg, grid, bad), TG_ERR_INVALID_ARG, "row 1 has 1 valid frames");
    CHECK_ERR(ct_frontend_set(&fg, grid, over), TG_ERR_INVALID_ARG, "row 0 has 5 valid frames of 4");
    CHECK_ERR(ct_frontend_set(&fg, NULL, bad), TG_ERR_INVALID_ARG, "ct_frontend_set");
    CHECK(ct_frontend_build(e.fe, ctx, 0, 2, &fg) == NULL);
    tg_free(grid);
    tg_ctx_free(ctx);

    /* the grid refuses what the host frontend refuses, naming the clip */
    size_t L = ct_mel_grid_len(6);
    float *row = tg_malloc(2 * L * sizeof *row);
    float x[1000] = {0};
    x[700] = NAN;
    const float *cl[2] = {x, x};
    size_t n_long[2] = {320, 1000}, n_nan[2] = {400, 800};
    int fr[2], va[2];
    if (row) {
        CHECK_ERR(ct_mel_grid_padded(&e.mel, cl, n_long, 2, NULL, 3, row, fr, va),
                  TG_ERR_INVALID_ARG, "clip 1");
        CHECK_ERR(ct_mel_grid_padded(&e.mel, cl, n_nan, 2, NULL, 6, row, fr, va),
                  TG_ERR_INVALID_ARG, "sample 700 is NaN");
        CHECK_ERR(ct_mel_grid_padded(&e.mel, cl, n_long, 2, NULL, 0, row, fr, va),
                  TG_ERR_INVALID_ARG, "no output");
    }
    tg_free(row);
    env_close(&e);
}

/* The session's path (pipeline.c: grids in stage 1, the encoder's graph
 * makes the features): CT_FRONTEND=backend puts it on the CPU, and a batch
 * of three clips transcribes to the same tokens as with mel.c. A bad value
 * of the variable is refused by name. */
static ct_options tiny_on_cpu(void) {
    ct_options o;
    ct_options_init(&o);
    o.model_dir = TINY "/hub";
    o.backend = CT_BACKEND_CPU;
    o.n_threads = 2;
    o.max_new_tokens = 12;
    return o;
}

static ct_result **session_tokens(const char *frontend, const float *const *x, const size_t *n,
                                  int k) {
    if (frontend) setenv("CT_FRONTEND", frontend, 1);
    else unsetenv("CT_FRONTEND");
    ct_options o = tiny_on_cpu();
    ct_session *s = NULL;
    ct_result **r = tg_calloc((size_t)k, sizeof *r);
    CHECK_OK(ct_session_open(&o, &s));
    /* the path asked for is the one taken */
    if (s) CHECK(!strcmp(ct_session_frontend(s), frontend ? frontend : "host"));
    if (s && r) CHECK_OK(ct_transcribe_batch(s, x, n, k, r));
    ct_session_close(s);
    unsetenv("CT_FRONTEND");
    return r;
}

static void test_session_with_graph_frontend(void) {
    clips c = {0};
    if (!clips_make(&c)) {
        clips_free(&c);
        return;
    }
    const float *x[3] = {c.x[0], c.x[1], c.x[6]};
    size_t n[3] = {c.n[0], c.n[1], c.n[6]};
    ct_result **host = session_tokens(NULL, x, n, 3), **graph = session_tokens("backend", x, n, 3);
    for (int i = 0; host && graph && i < 3; i++) {
        CHECK(host[i] && graph[i]);
        if (!host[i] || !graph[i]) continue;
        CHECK_MSG(host[i]->n_tokens == graph[i]->n_tokens &&
                      !memcmp(host[i]->tokens, graph[i]->tokens,
                              (size_t)host[i]->n_tokens * sizeof(int32_t)),
                  "clip %d: the graph frontend's tokens differ from the host's", i);
        CHECK(host[i]->n_tokens > 0);
    }
    for (int i = 0; i < 3; i++) {
        if (host) ct_result_free(host[i]);
        if (graph) ct_result_free(graph[i]);
    }
    tg_free(host);
    tg_free(graph);
    clips_free(&c);

    setenv("CT_FRONTEND", "gpu", 1);
    ct_options o = tiny_on_cpu();
    ct_session *s = NULL;
    CHECK_ERR(ct_session_open(&o, &s), TG_ERR_INVALID_ARG, "CT_FRONTEND=gpu");
    CHECK(s == NULL);
    unsetenv("CT_FRONTEND");
}

TEST_MAIN(T(test_graph_matches_host_frontend), T(test_grid_layout),
          T(test_encoder_on_graph_features), T(test_bad_inputs),
          T(test_session_with_graph_frontend))
