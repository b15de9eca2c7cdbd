/*
 * test_attn_step.c: the decoder step's attention on the GPU (attn_decode,
 * attn_split) against the CPU backend: F32 and BF16 caches on the 4-warp
 * chunks, in clusters and on the wide block; the transposed reduction
 * against a warp sum a key; masked keys, masked rounds skipped (the same
 * bits as loaded) and NaN kept to its row; the prefill's queries split
 * over the keys.
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU.
 *
 * Not here: the step's products, norms, cache writes and tail
 * (test_kernels.c), the choices of keys a warp (test_choices.c).
 */
#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

/* attn_decode's rounds scored by one transposed reduction (the default)
 * against a warp sum a key (CT_CUDA_ATTN_DECODE_XR=0), each against the
 * CPU: F32 and BF16 caches on 4-warp chunks (a row's chunks in a cluster
 * on sm_90) and on the wide block, 150 keys (a round cut by the row's
 * end), and 20 rows read by their projection. Masked keys and NaN kept to
 * its row: test_attention_step_masks and test_attention_step_keeps_nan,
 * on the default. */
static void test_attn_decode_xr_match_cpu(void) {
    tg_backend *on = cuda_or_skip(), *off = on ? cuda_with("CT_CUDA_ATTN_DECODE_XR", "0") : NULL;
    for (int v = 0; v < 2 && off; v++) {
        tg_backend *b = v == 0 ? on : off;
        tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
        CHECK(c->attn_xr == (v == 0));
        char what[128];
        for (int wide = 1; wide >= 0; wide--) {
            c->use_attn_decode_wide = wide;
            snprintf(what, sizeof what, "attention step, f32 cache, xr %s, wide %s", v ? "off" : "on", wide ? "on" : "off");
            compare_with_cpu(b, build_attn_step, 2, 5e-4, what);
            snprintf(what, sizeof what, "attention step, bf16 kv, xr %s, wide %s", v ? "off" : "on", wide ? "on" : "off");
            compare_with_cpu(b, build_attn_step_bf16_128, 2, 5e-4, what);
            snprintf(what, sizeof what, "attention step, 20 rows, projection, xr %s, wide %s", v ? "off" : "on",
                     wide ? "on" : "off");
            compare_with_cpu(b, build_attn_proj20, 2, 5e-4, what);
        }
        c->use_attn_decode_wide = true;
    }
    tg_backend_free(on);
    tg_backend_free(off);
}

/* A NaN in one query reaches that row's output as NaN (as on the CPU) and
 * no other row: attn_decode and the combine keep NaN through their maxima
 * (fmaxf would drop it and give a row of zeros, hiding where it began). */
static int64_t g_nan_tk = 150;
static tg_tensor *build_attn_step_nomask(tg_ctx *ctx) {
    int64_t D = 128, Tk = g_nan_tk, H = 4, B = 3;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, B), *k = tg_new_4d(ctx, TG_F32, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, Tk, H, B);
    return tg_attention(ctx, q, k, v, NULL, 0.088f);
}

/* A backend whose step attention takes the wide kernel wherever it can
 * (from one row, CT_CUDA_ATTN_DECODE_WIDE_MIN=1: the tests' 12 rows are
 * fewer than the default's quarter of the SMs), or never. */
static tg_backend *attn_backend(bool wide) {
    return wide ? cuda_with("CT_CUDA_ATTN_DECODE_WIDE_MIN", "1") : cuda_with("CT_CUDA_ATTN_DECODE_WIDE", "0");
}

static void attention_step_keeps_nan(int64_t tk, bool wide) {
    tg_backend *b = attn_backend(wide);
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    int ad = c->n_attn_decode;
    g_nan_tk = tk;
    run r;
    CHECK_OK(run_make(b, build_attn_step_nomask, &r));
    if (r.g && r.buf) {
        CHECK_OK(fill_leaves(&r, 7));
        const tg_tensor *q = r.out->src[0];
        float nan = NAN;
        /* q [128, 1, 4, 3]: element 5 of head 1, batch row 2 */
        CHECK_OK(tg_tensor_set((tg_tensor *)q, &nan, (size_t)((2 * 4 + 1) * 128 + 5) * 4, 4));
        CHECK_OK(tg_backend_graph_compute(b, r.g));
        CHECK(c->n_attn_decode > ad);
        double *o = get_out(r.out); /* [128, 4, 1, 3] */
        CHECK(o != NULL);
        int nan_rows = 0, bad = 0;
        for (int row = 0; o && row < 4 * 3; row++) {
            int n_nan = 0;
            for (int d = 0; d < 128; d++) n_nan += isnan(o[row * 128 + d]);
            if (row == 2 * 4 + 1) nan_rows += n_nan == 128;
            else bad += n_nan;
        }
        CHECK_MSG(nan_rows == 1, "Tk %d: the row with a NaN query is not all NaN", (int)tk);
        CHECK_MSG(bad == 0, "Tk %d: %d NaN outside the row with a NaN query", (int)tk, bad);
        tg_free(o);
    }
    run_free(&r);
    tg_backend_free(b);
}

/* 150 keys: one 16-warp block a row (attn_decode_wide), and with that off
 * several chunks a row and the combine; 20: one chunk a row, whose block
 * writes the output itself (attn_decode's direct path). */
static void test_attention_step_keeps_nan(void) {
    attention_step_keeps_nan(150, true);  /* one 16-warp block a row (attn_decode_wide) */
    attention_step_keeps_nan(150, false); /* several chunks a row and the combine */
    attention_step_keeps_nan(20, true);   /* one chunk a row on the 4-warp kernel */
}

/* Masked keys in a step's attention on either kernel, against the CPU:
 * batch row 0 every key masked (zeros out), row 1 its first 70 keys and its
 * last masked (the wide kernel's early warps and a chunk all masked), row
 * 2 none. */
static void masked_step_matches_cpu(bool wide) {
    tg_backend *b = attn_backend(wide), *cpu = NULL;
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    CHECK_OK(tg_backend_cpu_new(2, &cpu));
    enum { TK = 150, B = 3 };
    static float mask[TK * B];
    for (int j = 0; j < TK; j++) {
        mask[j] = -INFINITY;
        mask[TK + j] = j < 70 || j == TK - 1 ? -INFINITY : 0.25f;
        mask[2 * TK + j] = 0.0f;
    }
    run rc, rg;
    CHECK_OK(run_make(cpu, build_attn_step_bf16_128, &rc));
    CHECK_OK(run_make(b, build_attn_step_bf16_128, &rg));
    int wide_before = c->n_attn_decode_wide;
    if (rc.g && rg.g && rc.buf && rg.buf) {
        CHECK_OK(fill_leaves(&rc, 11));
        CHECK_OK(fill_leaves(&rg, 11));
        CHECK(tg_nelements(rg.out->src[3]) == TK * B);
        CHECK_OK(tg_tensor_set(rc.out->src[3], mask, 0, sizeof mask));
        CHECK_OK(tg_tensor_set(rg.out->src[3], mask, 0, sizeof mask));
        CHECK_OK(tg_backend_graph_compute(cpu, rc.g));
        CHECK_OK(tg_backend_graph_compute(b, rg.g));
        double *o = get_out(rg.out), *want = get_out(rc.out); /* [128, 4, 1, 3] */
        CHECK(o && want);
        int nonzero = 0;
        for (int i = 0; o && i < 128 * 4; i++) nonzero += o[i] != 0.0;
        CHECK_MSG(nonzero == 0, "%s: %d outputs of the fully masked batch row are not zero",
                  wide ? "wide" : "chunks", nonzero);
        if (o && want) {
            double e = nmse(o, want, tg_nelements(rc.out));
            CHECK_MSG(e <= 5e-4, "%s: masked step NMSE %.3g", wide ? "wide" : "chunks", e);
        }
        tg_free(o);
        tg_free(want);
    }
    CHECK(wide ? c->n_attn_decode_wide > wide_before : c->n_attn_decode_wide == 0);
    run_free(&rg);
    run_free(&rc);
    tg_backend_free(cpu);
    tg_backend_free(b);
}

static void test_attention_step_masks(void) {
    masked_step_matches_cpu(true);
    masked_step_matches_cpu(false);
}

/* The step's attention on one 16-warp block a row (attn_decode_wide), from
 * one row on; D = 256 keeps the 4-warp kernel. */
static void test_attn_decode_wide_match_cpu(void) {
    tg_backend *b = attn_backend(true);
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    int ad = c->n_attn_decode, wide = c->n_attn_decode_wide;
    compare_with_cpu(b, build_attn_step, 2, 5e-4, "attention step, f32 cache (attn_decode_wide)");
    CHECK(c->n_attn_decode > ad && c->n_attn_decode_wide > wide);
    ad = c->n_attn_decode;
    wide = c->n_attn_decode_wide;
    compare_with_cpu(b, build_attn_step_bf16, 2, 5e-4, "attention step, bf16 kv, D=256 (4-warp kernel)");
    CHECK(c->n_attn_decode > ad && c->n_attn_decode_wide == wide);
    compare_with_cpu(b, build_attn_step_bf16_128, 2, 5e-4, "attention step, bf16 kv, D=128 (attn_decode_wide)");
    CHECK(c->n_attn_decode_wide > wide);
    tg_backend_free(b);
}

/* The decoder step's cross-attention at batch 8 (8 heads, 438 BF16 keys)
 * and at 5 rows over 600 keys (three rounds of 16 warps), on wide blocks
 * in a cluster a row (attn_decode_wcl_bf16, the default) where this GPU's
 * rule (tg_cuda_attn_decode_wcl, with the wide block's) takes them, and on
 * one wide block a row with CT_CUDA_ATTN_DECODE_WCL=0; against the CPU
 * within the step tests' 5e-4 (BF16 keys and values, F32 sums in another
 * order), and the counters say which kernel ran. */
static tg_tensor *cross_step(tg_ctx *ctx, int64_t H, int64_t B, int64_t Tk) {
    const int64_t D = 128;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, B), *k = tg_new_4d(ctx, TG_BF16, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_BF16, D, Tk, H, B), *m = tg_new_4d(ctx, TG_F32, Tk, 1, 1, B);
    return tg_attention(ctx, q, k, v, m, 0.088f);
}
static tg_tensor *build_cross_b8(tg_ctx *ctx) { return cross_step(ctx, 8, 8, 438); }
static tg_tensor *build_cross_b5(tg_ctx *ctx) { return cross_step(ctx, 8, 5, 600); }

/* Whether c takes H x B rows over Tk BF16 keys on the clustered wide blocks. */
static bool takes_wcl(const tg_cuda_ctx *c, int64_t rows, int64_t Tk) {
    int64_t kpw;
    return c->dev->props.clusters && tg_cuda_attn_decode_wide_kpw(c->dev->props.sm_count, 0, true, 16, Tk, rows) > 0 &&
           tg_cuda_attn_decode_wcl(c->dev->props.sm_count, 16, Tk, rows, &kpw) > 0;
}

static void test_attn_decode_wcl_match_cpu(void) {
    tg_backend *b = cuda_or_skip(), *off = b ? cuda_with("CT_CUDA_ATTN_DECODE_WCL", "0") : NULL;
    if (!b || !off) {
        tg_backend_free(b);
        tg_backend_free(off);
        return;
    }
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl, *d = (tg_cuda_ctx *)off->impl;
    CHECK(c->use_attn_decode_wcl && !d->use_attn_decode_wcl);
    static const struct { build_fn fn; int64_t rows, tk; const char *what; } cases[] = {
        {build_cross_b8, 64, 438, "cross-attention step, 64 rows, 438 bf16 keys"},
        {build_cross_b5, 40, 600, "cross-attention step, 40 rows, 600 bf16 keys"},
        {build_attn_step_bf16_128, 12, 150, "attention step, 12 rows, 150 bf16 keys (one round)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bool want = takes_wcl(c, cases[i].rows, cases[i].tk);
        const int wcl = c->n_attn_decode_wcl, wide = d->n_attn_decode_wide;
        compare_with_cpu(b, cases[i].fn, 2, 5e-4, cases[i].what);
        CHECK_MSG(want ? c->n_attn_decode_wcl > wcl : c->n_attn_decode_wcl == wcl, "%s: wide blocks in a cluster %s",
                  cases[i].what, want ? "not taken" : "taken");
        compare_with_cpu(off, cases[i].fn, 2, 5e-4, cases[i].what);
        CHECK(d->n_attn_decode_wcl == 0);
        if (want) CHECK_MSG(d->n_attn_decode_wide > wide, "%s, the switch off: not on the wide block", cases[i].what);
    }
    /* on an H100 or H200 (132 SMs) both cross-attention shapes take it */
    if (c->dev->props.sm_count == 132 && c->dev->props.clusters) CHECK(takes_wcl(c, 64, 438) && takes_wcl(c, 40, 600));
    tg_backend_free(b);
    tg_backend_free(off);
}

/* The decoder step's attention on the 4-warp kernel, in chunks with their
 * combine, where the wide one would take the rows (CT_CUDA_ATTN_DECODE_WIDE
 * off): the path of batches past 16. */
static void test_attn_decode_chunks_match_cpu(void) {
    tg_backend *b = cuda_with("CT_CUDA_ATTN_DECODE_WIDE", "0");
    if (!b) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    int ad = c->n_attn_decode;
    compare_with_cpu(b, build_attn_step, 2, 5e-4, "attention step, f32 cache (attn_decode, chunks)");
    compare_with_cpu(b, build_attn_step_bf16_128, 2, 5e-4, "attention step, bf16 kv, D=128 (chunks)");
    CHECK(c->n_attn_decode > ad && c->n_attn_decode_wide == 0);
    tg_backend_free(b);
}

/* The decoder's prefill: its prompt's 10 queries over the encoder's frames
 * (BF16 K and V, a mask [Tk, Tq, 1, B] as decoder.c makes it) split over
 * the keys on attn_split_kt (CT_CUDA_ATTN_SPLIT_KT=1, keys on lanes: 150
 * keys make a last chunk of 22, two halves of 16 and 6), on attn_split
 * (=0, the default, a warp sum a key) and with
 * CT_CUDA_ATTN_SPLIT_TQ=8 (the limit of before) on the tensor-core kernel,
 * each against the CPU. */
static tg_tensor *build_attn_prefill(tg_ctx *ctx) {
    int64_t D = 128, Tq = 10, Tk = 150, H = 4, B = 2;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, Tq, H, B), *k = tg_new_4d(ctx, TG_BF16, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_BF16, D, Tk, H, B), *m = tg_new_4d(ctx, TG_F32, Tk, Tq, 1, B);
    return tg_attention(ctx, q, k, v, m, 0.088f);
}

static void test_attn_prefill_splits_over_keys(void) {
    static const char *what[3] = {"prefill attention, 10 queries (attn_split_kt)",
                                  "prefill attention, 10 queries (attn_split)",
                                  "prefill attention, 10 queries (tensor cores)"};
    for (int v = 0; v < 3; v++) {
        tg_backend *b = v == 2 ? cuda_with("CT_CUDA_ATTN_SPLIT_TQ", "8")
                                 : cuda_with("CT_CUDA_ATTN_SPLIT_KT", v == 0 ? "1" : "0");
        if (!b) return;
        tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
        if (v < 2) CHECK(c->use_attn_split_kt == (v == 0));
        int split = c->n_attn_split;
        /* attn_split computes in F32 from the same BF16 K and V the CPU
         * reads (5.3e-14 on an H100, eighth session), either way of
         * summing its dot products; the tensor-core kernel rounds q and
         * the probabilities to BF16 (1.4e-07), under the 5e-4 every
         * BF16-operand attention here is held to */
        compare_with_cpu(b, build_attn_prefill, 3, v == 2 ? 5e-4 : 1e-9, what[v]);
        CHECK_MSG((c->n_attn_split > split) == (v != 2), "split limit %d: %d attn_split encodes", c->attn_split_tq,
                  c->n_attn_split - split);
        tg_backend_free(b);
    }
}

/* A row's chunks as one thread block cluster combining in distributed
 * shared memory (attn_decode_cl*, sm_90) against the chunks and their
 * combine launch (CT_CUDA_ATTN_CLUSTER=0), the wide block off on both:
 * the same weights and the same sums in chunk order, so the same bits (an
 * F32 cache of 150 keys in 5 chunks, BF16 in 3 on 132 SMs); and against
 * the CPU. Where the GPU has no cluster launches (before sm_90) neither
 * runs them. */
static void test_attn_decode_cluster_same_bits(void) {
    tg_backend *on = cuda_or_skip(), *off = on ? cuda_with("CT_CUDA_ATTN_CLUSTER", "0") : NULL;
    if (on && off) {
        tg_cuda_ctx *c = (tg_cuda_ctx *)on->impl, *d = (tg_cuda_ctx *)off->impl;
        c->use_attn_decode_wide = d->use_attn_decode_wide = false;
        CHECK(c->attn_cluster && !d->attn_cluster);
        const int n_on = c->n_attn_cluster, n_off = d->n_attn_cluster;
        compare_cuda_exact(on, off, build_attn_step, "attention step, f32 cache, a cluster against a combine");
        compare_cuda_exact(on, off, build_attn_step_bf16_128, "attention step, bf16 kv, a cluster against a combine");
        compare_with_cpu(on, build_attn_step_bf16_128, 2, 5e-4, "attention step, bf16 kv, D=128 (a cluster)");
        const bool clusters = c->dev->props.clusters;
        CHECK_MSG((c->n_attn_cluster > n_on) == clusters && d->n_attn_cluster == n_off,
                  "cluster encodes: %d on (sm_%d%d), %d off", c->n_attn_cluster - n_on, c->dev->props.cc_major,
                  c->dev->props.cc_minor, d->n_attn_cluster - n_off);
    }
    tg_backend_free(on);
    tg_backend_free(off);
}

/* A batch-64 step's self-attention as the decoder runs it: 8 heads over a
 * BF16 cache of 138 rows, a row's keys past its position masked (chunks
 * of 4 warps, three rounds of 16 keys a warp). */
enum { SKIP_TK = 138, SKIP_B = 64 };
static tg_tensor *build_attn_self64(tg_ctx *ctx) {
    const int64_t D = 128, H = 8;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, 1, H, SKIP_B), *k = tg_new_4d(ctx, TG_BF16, D, SKIP_TK, H, SKIP_B);
    tg_tensor *v = tg_new_4d(ctx, TG_BF16, D, SKIP_TK, H, SKIP_B), *m = tg_new_4d(ctx, TG_F32, SKIP_TK, 1, 1, SKIP_B);
    return tg_attention(ctx, q, k, v, m, 0.088f);
}

/* Rounds of keys the mask hides, skipped (CT_CUDA_ATTN_DECODE_SKIP, the
 * default) against loaded and dropped (=0): the same bits, on the 4-warp
 * chunks (the wide block's warps take one round each at this length), for
 * rows whose keys end at their position (1 to
 * 138 keys), a row with every key masked, one whose first 70 are, and one
 * with a NaN past its position (a NaN hides nothing: that row's output
 * is NaN both ways); and the skipping run against the CPU on the rows
 * without a NaN. */
static void test_attn_decode_skip_same_bits(void) {
    tg_backend *on = cuda_or_skip(), *off = on ? cuda_with("CT_CUDA_ATTN_DECODE_SKIP", "0") : NULL, *cpu = NULL;
    CHECK_OK(tg_backend_cpu_new(2, &cpu));
    static float mask[SKIP_TK * SKIP_B];
    for (int b = 0; b < SKIP_B; b++)
        for (int j = 0; j < SKIP_TK; j++) {
            const int valid = (b * 29) % SKIP_TK + 1;
            float v = j < valid ? 0.0f : -INFINITY;
            if (b == 3) v = -INFINITY;
            if (b == 4) v = j < 70 ? -INFINITY : 0.5f;
            if (b == 5 && j == 120) v = NAN;
            mask[b * SKIP_TK + j] = v;
        }
    if (on && off && cpu) {
        tg_cuda_ctx *c = (tg_cuda_ctx *)on->impl, *d = (tg_cuda_ctx *)off->impl;
        CHECK(c->attn_skip && !d->attn_skip);
        /* more than one round a warp, or nothing could skip (114 SMs: one) */
        const int64_t kpw = tg_cuda_attn_decode_kpw(c->dev->props.sm_count, c->attn_decode_fill, 16, SKIP_TK, 8 * SKIP_B);
        CHECK_MSG(kpw > 16 || c->dev->props.sm_count != 132, "%lld keys a warp on 132 SMs", (long long)kpw);
        if (kpw <= 16) printf("  self-attention, batch 64: %lld keys a warp on %d SMs, one round: nothing to skip\n",
                              (long long)kpw, c->dev->props.sm_count);
        const int ad = c->n_attn_decode, wide = c->n_attn_decode_wide;
        run ra, rb, rc;
        CHECK_OK(run_make(on, build_attn_self64, &ra));
        CHECK_OK(run_make(off, build_attn_self64, &rb));
        CHECK_OK(run_make(cpu, build_attn_self64, &rc));
        if (ra.buf && rb.buf && rc.buf) {
            run *rs[3] = {&ra, &rb, &rc};
            for (int k = 0; k < 3; k++) {
                CHECK_OK(fill_leaves(rs[k], 77));
                CHECK_OK(tg_tensor_set(rs[k]->out->src[3], mask, 0, sizeof mask));
            }
            CHECK_OK(tg_backend_graph_compute(on, ra.g));
            CHECK_OK(tg_backend_graph_compute(off, rb.g));
            CHECK_OK(tg_backend_graph_compute(cpu, rc.g));
            double *x = get_out(ra.out), *y = get_out(rb.out), *want = get_out(rc.out);
            CHECK(x && y && want);
            const int64_t n = tg_nelements(ra.out), per = n / SKIP_B; /* [128, 8, 1, B] */
            int64_t differ = 0, nan5 = 0;
            for (int64_t i = 0; x && y && i < n; i++) differ += memcmp(&x[i], &y[i], sizeof x[i]) != 0;
            for (int64_t i = 5 * per; x && i < 6 * per; i++) nan5 += isnan(x[i]);
            CHECK_MSG(differ == 0, "%lld of %lld outputs differ with the skip", (long long)differ, (long long)n);
            CHECK_MSG(nan5 == per, "%lld of the NaN row's %lld outputs are NaN", (long long)nan5, (long long)per);
            if (x && want) {
                for (int64_t i = 5 * per; i < 6 * per; i++) x[i] = want[i] = 0.0; /* the NaN row */
                const double e = nmse(x, want, n);
                CHECK_MSG(e <= 5e-4, "NMSE %.3g against the CPU", e);
                printf("  self-attention, batch 64, keys to each row's position NMSE %.3g\n", e);
            }
            tg_free(x);
            tg_free(y);
            tg_free(want);
        }
        /* the 4-warp chunks (512 rows: more than the SMs the wide block takes) */
        CHECK(c->n_attn_decode > ad && c->n_attn_decode_wide == wide);
        run_free(&ra);
        run_free(&rb);
        run_free(&rc);
    }
    tg_backend_free(on);
    tg_backend_free(off);
    tg_backend_free(cpu);
}

TEST_MAIN(T(test_attn_decode_xr_match_cpu), T(test_attn_decode_chunks_match_cpu), T(test_attn_decode_wcl_match_cpu), T(test_attn_decode_cluster_same_bits),
          T(test_attn_prefill_splits_over_keys), T(test_attn_decode_wide_match_cpu), T(test_attention_step_keeps_nan),
          T(test_attention_step_masks), T(test_attn_decode_skip_same_bits))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
