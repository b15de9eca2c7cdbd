/*
 * test_encoder.c: what the encoder keeps from call to call (src/model/encoder.c).
 *
 * Proves: each layer's projection of the rel-pos table, made once by a graph
 * of its own and kept with the table (rel_pos_kept), holds 1/sqrt(head_dim)
 * Wpos P as a sum on the host gives it, and gives the encoder's output to
 * the bit as the layers projecting the table themselves
 * (CT_ENCODER_POS_KEEP=0); a call with the same frames uses the kept
 * projections (a projection overwritten between calls changes the next
 * output), and other frames or another precision make them anew (the
 * overwritten one no longer shows). The fixtures (test_fixtures.c) check the
 * outputs against transformers with the projections kept, on the CPU and,
 * where asked, on a GPU.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "check.h"
#include "model.h"

#define TINY TEST_DATA_DIR "/tiny"

typedef struct env {
    tg_backend *be;
    ct_model *m;
    tg_sched *sched;
} env;

static bool env_open(env *e) {
    memset(e, 0, sizeof *e);
    CHECK_OK(tg_backend_cpu_new(2, &e->be));
    if (e->be) CHECK_OK(ct_model_load(TINY "/hub", e->be, &e->m));
    if (e->m) CHECK_OK(tg_sched_new(&e->be, 1, &e->sched));
    return e->sched != NULL;
}

static void env_close(env *e) {
    tg_sched_free(e->sched);
    ct_model_free(e->m);
    tg_backend_free(e->be);
}

/* T frames of a ramp, the first `valid` of them set (tg_free). */
static float *ramp(int T, int valid) {
    float *f = tg_calloc((size_t)T * 128, sizeof(float));
    for (int i = 0; f && i < valid * 128; i++) f[i] = (float)((i * 37) % 101 - 50) / 25.0f;
    return f;
}

/* The encoder on one row of T frames into *r, its output copied to the
 * host (tg_free; NULL on failure). keep: CT_ENCODER_POS_KEEP left unset
 * (the default) or set to 0. */
static float *run(env *e, int T, bool f32, bool keep, ct_enc_result *r) {
    float *feat = ramp(T, T - 10);
    int valid = T - 10;
    if (!keep) setenv("CT_ENCODER_POS_KEEP", "0", 1);
    ct_enc_opts eo = {.f32 = f32};
    if (feat) CHECK_OK(ct_encoder_run(e->m, e->sched, feat, 1, T, &valid, &eo, r));
    unsetenv("CT_ENCODER_POS_KEEP");
    tg_free(feat);
    if (!r->out) return NULL;
    float *h = tg_malloc((size_t)r->n_frames * r->d * sizeof(float));
    if (h) CHECK_OK(ct_enc_get_rows(r, r->out, 0, r->n_frames, h));
    return h;
}

static bool same(const float *a, const float *b, size_t n) { return a && b && !memcmp(a, b, n * sizeof(float)); }

/* A contiguous F32 or BF16 tensor's n values as floats into dst. */
static void get_floats(const tg_tensor *t, float *dst, size_t n) {
    CHECK(t->type == TG_F32 || t->type == TG_BF16);
    if (t->type == TG_F32) {
        CHECK_OK(tg_tensor_get(t, dst, 0, n * sizeof(float)));
        return;
    }
    uint16_t *h = tg_malloc(n * sizeof(uint16_t));
    if (h) CHECK_OK(tg_tensor_get(t, h, 0, n * sizeof(uint16_t)));
    for (size_t i = 0; h && i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(dst + i, &u, sizeof u);
    }
    tg_free(h);
}

/* Layer 0's kept projection against 1/sqrt(hd) Wpos P summed on the host
 * in double (f32 products on the CPU: within 1e-5 of the largest value). */
static void check_projection(env *e, const ct_enc_result *r) {
    const int d = r->d, R = r->pos_rows;
    float *p = tg_malloc((size_t)R * d * sizeof(float)), *got = tg_malloc((size_t)R * d * sizeof(float));
    float *w = tg_malloc((size_t)d * d * sizeof(float));
    const tg_tensor *wt = e->m->enc[0].wpos;
    CHECK(wt->ne[0] == d && wt->ne[1] == d);
    if (p && got && w && wt->ne[0] == d && wt->ne[1] == d) {
        CHECK_OK(tg_tensor_get(r->pos, p, 0, (size_t)R * d * sizeof(float)));
        CHECK_OK(tg_tensor_get(r->pos_r[0], got, 0, (size_t)R * d * sizeof(float)));
        get_floats(wt, w, (size_t)d * d);
        const double scale = 1.0 / sqrt((double)e->m->head_dim);
        double worst = 0, big = 0;
        for (int j = 0; j < R; j++)
            for (int o = 0; o < d; o++) {
                double s = 0;
                for (int k = 0; k < d; k++) s += (double)w[(size_t)o * d + k] * p[(size_t)j * d + k];
                s *= scale;
                worst = fmax(worst, fabs(s - got[(size_t)j * d + o]));
                big = fmax(big, fabs(s));
            }
        CHECK_MSG(big > 0 && worst <= 1e-5 * big, "layer 0's kept projection: %.3g off (largest %.3g)", worst, big);
    }
    tg_free(p);
    tg_free(got);
    tg_free(w);
}

static void projections_are_kept_with_the_table(void) {
    env e;
    if (!env_open(&e)) {
        env_close(&e);
        return;
    }
    ct_enc_result kept = {0}, apart = {0};
    for (int f32 = 1; f32 >= 0; f32--) {
        const int T = 200;
        float *a = run(&e, T, f32, true, &kept);
        float *b = run(&e, T, f32, false, &apart);
        const size_t n = (size_t)kept.n_frames * kept.d;
        CHECK_MSG(same(a, b, n), "f32=%d: the output with kept projections differs from the graph's own", f32);
        CHECK(kept.pos_r != NULL && kept.pos_f32 == (f32 != 0) && apart.pos_r == NULL);
        if (f32 && kept.pos_r) check_projection(&e, &kept);

        /* kept: a projection overwritten between two calls of the same
         * frames shows in the second call's output */
        if (kept.pos_r) {
            size_t bytes = (size_t)kept.pos_rows * kept.d * sizeof(float);
            float *zero = tg_calloc(1, bytes);
            if (zero) CHECK_OK(tg_tensor_set(kept.pos_r[0], zero, 0, bytes));
            tg_free(zero);
        }
        float *c = run(&e, T, f32, true, &kept);
        CHECK_MSG(c && a && !same(a, c, n), "f32=%d: the second call made its projections again", f32);
        tg_free(c);

        /* other frames make them anew: the overwritten one is gone */
        const int T2 = 120;
        float *d2 = run(&e, T2, f32, true, &kept);
        float *e2 = run(&e, T2, f32, false, &apart);
        CHECK_MSG(same(d2, e2, (size_t)kept.n_frames * kept.d), "f32=%d: other frames kept stale projections", f32);
        tg_free(a);
        tg_free(b);
        tg_free(d2);
        tg_free(e2);
    }
    /* another precision with the same frames makes them anew: f32 = 0 left
     * them; zero one, then run with f32 products */
    if (kept.pos_r) {
        size_t bytes = (size_t)kept.pos_rows * kept.d * sizeof(float);
        float *zero = tg_calloc(1, bytes);
        if (zero) CHECK_OK(tg_tensor_set(kept.pos_r[0], zero, 0, bytes));
        tg_free(zero);
    }
    float *f = run(&e, 120, true, true, &kept);
    float *g = run(&e, 120, true, false, &apart);
    CHECK_MSG(same(f, g, (size_t)kept.n_frames * kept.d), "another precision kept the projections");
    CHECK(kept.pos_f32);
    tg_free(f);
    tg_free(g);
    ct_enc_result_free(&kept);
    ct_enc_result_free(&apart);
    CHECK(kept.pos_r == NULL && kept.pos == NULL);
    env_close(&e);
}

TEST_MAIN(T(projections_are_kept_with_the_table))
