/*
 * test_plan.c: the CUDA backend's plan (fusion groups and the writes the
 * hazard runs see) for the model's real graphs, without a GPU.
 *
 * The tiny checkpoint runs on the CPU backend, copied as on a GPU (so the
 * encoder's q, k, v are packed, weights.c), and every graph the scheduler
 * hands the CPU is also planned by tg_cuda_test_plan as an H200 context
 * with the default switches would plan it. Synthetic graphs (test_choices.c)
 * only show a matcher takes the shape it was written for; this shows the
 * graphs decoder.c and encoder.c really build reach it: a decoder step gets
 * one embedding group (embed_norm), one K/V write inside the q/k/v launch
 * per layer, with the product's result marked written, and its tail
 * (argmax, sums, feed, history writes) as one argmax_sum; the prefill
 * gets the embedding group; the encoder plans without error, each layer's
 * rel-pos projection with its scale as the product's alpha, the
 * subsampling's front (conv0 .. depthwise conv, masks) as one group, and
 * each layer's output norm with the next layer's first norm as one launch
 * (layer_norm2_w4, the second stored BF16 for its product); and a view
 * the host reads still keeps the node it views from fusing away.
 * Not here: what the fused kernels compute (test_kernels.c, on a GPU).
 * Skipped (and counted as passed) where the build has no CUDA backend.
 */
#include "check.h"

#ifdef TG_HAVE_CUDA
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "backend_impl.h"
#include "base.h"
#include "cuda_internal.h"
#include "model.h"
#include "op_params.h"

#define TINY TEST_DATA_DIR "/tiny"

typedef struct seen {
    int graphs, errors;
    int embed_graphs;  /* graphs with one embed_norm group */
    int step_graphs;   /* graphs with a K/V group per decoder layer */
    int kv_unmarked;   /* K/V groups without their product's result marked written */
    int kv_layers;     /* expected K/V groups in a step graph */
    int pick_graphs;   /* step graphs with one argmax_sum group (the step's tail) */
    int picks;         /* argmax_sum groups in any graph */
    int alpha_groups;  /* products with a scale as their alpha and no bias (the rel-pos table's) */
    int sub_fronts;    /* the subsampling's conv0 .. depthwise conv groups (sub_conv_dw) */
    int sub_front_len; /* ... the nodes of the last */
    int norm_pairs;    /* two layer norms in one launch (layer_norm2_w4) */
    int norm_pair16;   /* ... whose second stores BF16 for its product */
    int norm_pair_marks; /* ... whose first result is not marked written */
    int pick_marks;    /* argmax_sum groups whose writes are not ids, sums, feed and the ids' row */
    int bd16;          /* products storing BF16 for attentions' masks (CT_CUDA_ATTN_BD16) */
    int tail16;        /* products (or their groups' last nodes) storing BF16 for their readers */
    int attn16;        /* attentions storing 16 bits for their products */
    int step_tails;    /* graphs with a step's tail (argmax_sum): the steps at any batch */
    int step_tail16, step_attn16; /* ... of them in those graphs */
} seen;

static seen g_seen;
static const struct tg_backend_iface *g_cpu_iface;
static struct tg_backend_iface g_observed;
static tg_cuda_props g_props;

static tg_status observe(tg_backend *b, tg_graph *g) {
    int n = tg_graph_n_nodes(g);
    int *fuse = tg_calloc((size_t)n + 1, sizeof *fuse);
    uint8_t *writes = tg_calloc((size_t)n + 1, 1);
    tg_type *emit = tg_calloc((size_t)n + 1, sizeof *emit);
    g_seen.graphs++;
    tg_status st = fuse && writes && emit ? tg_cuda_test_plan(&g_props, g, fuse, writes, emit) : NULL;
    if (!fuse || !writes || !emit || st) {
        printf("  plan of a graph of %d nodes failed: %s\n", n, st ? tg_status_message(st) : "out of memory");
        tg_status_free(st);
        g_seen.errors++;
    } else {
        int embed = 0, kv = 0, pick = 0, tail16 = 0, attn16 = 0;
        for (int i = 0, head = 0; i < n; i++) {
            const tg_tensor *t = tg_graph_node(g, i);
            if (fuse[i] > 0) head = i;
            const bool ends = fuse[i] == 1 || (fuse[i] == 0 && head + fuse[head] - 1 == i);
            const bool product = tg_graph_node(g, head)->op == TG_OP_MUL_MAT && ends;
            /* a product read only as a mask (BD) against one read as an operand */
            bool mask_read = false;
            for (int j = i + 1; j < n && product && emit[i] == TG_BF16; j++)
                for (const tg_tensor *s = tg_graph_node(g, j)->src[3]; s && tg_graph_node(g, j)->op == TG_OP_ATTENTION;
                     s = s->view_src)
                    mask_read = mask_read || s == t;
            g_seen.bd16 += product && emit[i] == TG_BF16 && mask_read;
            tail16 += product && emit[i] == TG_BF16 && !mask_read;
            attn16 += t->op == TG_OP_ATTENTION && emit[i] != TG_F32;
        }
        g_seen.tail16 += tail16;
        g_seen.attn16 += attn16;
        for (int i = 0; i < n; i++) {
            if (fuse[i] < 2) continue;
            const tg_tensor *first = tg_graph_node(g, i), *last = tg_graph_node(g, i + fuse[i] - 1);
            if (first->op == TG_OP_GET_ROWS && last->op == TG_OP_LAYER_NORM) embed++;
            if (first->op == TG_OP_MUL_MAT && fuse[i] == 2 && last->op == TG_OP_SCALE) g_seen.alpha_groups++;
            if (first->op == TG_OP_CONV_2D) g_seen.sub_fronts++, g_seen.sub_front_len = fuse[i];
            if (first->op == TG_OP_LAYER_NORM && last->op == TG_OP_LAYER_NORM && fuse[i] == 2) {
                g_seen.norm_pairs++;
                g_seen.norm_pair16 += emit[i + 1] == TG_BF16;
                g_seen.norm_pair_marks += writes[i] != 1;
            }
            if (first->op == TG_OP_ARGMAX) {
                pick++;
                g_seen.picks++;
                static const uint8_t want[5] = {1, 1, 1, 0, 1};
                for (int k = 0; k < 5 && fuse[i] == 6; k++) g_seen.pick_marks += writes[i + k] != want[k];
                g_seen.pick_marks += fuse[i] != 6;
            } else if (last->op == TG_OP_SET_ROWS) {
                kv++;
                int marked = 0;
                for (int k = i; k < i + fuse[i] - 1; k++) marked += writes[k];
                g_seen.kv_unmarked += marked != 1;
            }
        }
        g_seen.embed_graphs += embed == 1;
        g_seen.step_graphs += kv == g_seen.kv_layers;
        if (pick == 1) g_seen.step_tails++, g_seen.step_tail16 += tail16, g_seen.step_attn16 += attn16;
        g_seen.pick_graphs += pick == 1 && kv == g_seen.kv_layers;
        printf("  graph of %3d nodes: %d embedding group(s), %d K/V write(s) in a product's launch, %d step "
               "tail(s) in one\n", n, embed, kv, pick);
    }
    tg_free(fuse);
    tg_free(writes);
    tg_free(emit);
    return g_cpu_iface->graph_compute(b, g);
}

/* A CPU backend whose every graph is also planned by observe(), as an
 * H200 context would plan it; restore with unobserved() before freeing. */
static tg_backend *observed_cpu(void) {
    tg_backend *be = NULL;
    CHECK_OK(tg_backend_cpu_new(2, &be));
    if (!be) return NULL;
    g_cpu_iface = be->iface;
    g_observed = *be->iface;
    g_observed.graph_compute = observe;
    be->iface = &g_observed;
    memset(&g_props, 0, sizeof g_props);
    g_props.cc_major = 9;
    g_props.tc_level = 2;
    g_props.bf16 = true;
    g_props.sm_count = 132;
    memset(&g_seen, 0, sizeof g_seen);
    return be;
}

static void unobserved(tg_backend *be) {
    if (be) be->iface = g_cpu_iface;
    tg_backend_free(be);
}

/* The tiny checkpoint copied as on a GPU, and a scheduler, on be. */
static void open_tiny(tg_backend *be, ct_model **m, tg_sched **sched) {
    CHECK_OK(ct_model_load_flags(TINY "/hub", be, CT_LOAD_COPY, m));
    CHECK_OK(tg_sched_new(&be, 1, sched));
}

/* B x T frames of 128 made-up features (the caller frees them). */
static float *made_up_features(int B, int T) {
    float *feat = tg_calloc((size_t)B * T * 128, sizeof(float));
    for (int i = 0; feat && i < B * T * 128; i++) feat[i] = (float)((i * 37) % 101 - 50) / 25.0f;
    return feat;
}

static void test_decoder_graphs_get_the_step_fusions(void) {
    tg_backend *be = observed_cpu();
    if (!be) return;

    ct_model *m = NULL;
    tg_sched *sched = NULL;
    open_tiny(be, &m, &sched);
    for (int B = 1; B <= 3 && m && sched; B++) {
        memset(&g_seen, 0, sizeof g_seen);
        g_seen.kv_layers = m->n_dec_layers;
        CHECK(m->enc[0].wqkv != NULL); /* copied: the encoder's q, k, v packed */
        int T = 120, valid[3] = {120, 100, 90};
        float *feat = made_up_features(B, T);
        ct_enc_opts eo = {.f32 = false};
        ct_enc_result enc = {0};
        CHECK_OK(ct_encoder_run(m, sched, feat, B, T, valid, &eo, &enc));
        int encoder_graphs = g_seen.graphs;
        CHECK_MSG(g_seen.alpha_groups == m->n_enc_layers, "%d rel-pos projections with their scale as alpha, "
                  "%d layers", g_seen.alpha_groups, m->n_enc_layers);
        /* the subsampling's front as one launch: with both frame masks
         * where rows are shorter than the batch (B = 3), without at B = 1 */
        CHECK_MSG(g_seen.sub_fronts == 1 && g_seen.sub_front_len == (B == 1 ? 5 : 7),
                  "batch %d: %d subsampling fronts fused, the last of %d nodes", B, g_seen.sub_fronts,
                  g_seen.sub_front_len);
        /* each layer's output norm and the next layer's first norm as one
         * launch, the first's result written (the residual reads it), the
         * second's stored BF16 for its feed-forward product; at batch 1
         * (15 frames) none: the products take 16 columns or fewer on
         * matvec.cu, the second norm inside its product's launch; at 2
         * (30) the products take tiles of 16 with the norms apart, so
         * the pairs again */
        const int pairs = B == 1 ? 0 : m->n_enc_layers - 1;
        CHECK_MSG(g_seen.norm_pairs == pairs && g_seen.norm_pair16 == g_seen.norm_pairs && g_seen.norm_pair_marks == 0,
                  "batch %d: %d norm pairs (%d storing BF16, %d unmarked), %d layers", B, g_seen.norm_pairs,
                  g_seen.norm_pair16, g_seen.norm_pair_marks, m->n_enc_layers);
        ct_dec_opts dopt = {.queued = true};
        ct_dec_state *ds = NULL;
        const int32_t prompt[12] = {4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7};
        if (enc.out) CHECK_OK(ct_decoder_begin(m, sched, &enc, 4, 16, &dopt, &ds));
        if (ds) {
            int32_t next[3] = {-1, -1, -1}, ids[6] = {0};
            CHECK_OK(ct_decoder_prefill(ds, prompt, next, NULL, NULL));
            for (int pos = 4; pos < 6; pos++) CHECK_OK(ct_decoder_queue_step(ds, pos));
            CHECK_OK(ct_decoder_read_steps(ds, 4, 2, ids, NULL));
        }
        printf("  batch %d: %d graphs planned (%d of the encoder), %d plan errors\n", B, g_seen.graphs,
               encoder_graphs, g_seen.errors);
        CHECK(encoder_graphs >= 1);
        CHECK(g_seen.errors == 0);
        CHECK(g_seen.embed_graphs >= 2); /* the prefill's and the steps' */
        CHECK(g_seen.step_graphs >= 1);
        CHECK(g_seen.kv_unmarked == 0);
        CHECK_MSG(g_seen.pick_graphs == g_seen.step_graphs, "%d step graphs, %d with their tail in one launch",
                  g_seen.step_graphs, g_seen.pick_graphs);
        CHECK(g_seen.pick_marks == 0);
        CHECK_MSG(g_seen.picks == g_seen.pick_graphs, "%d step tails fused, %d in step graphs", g_seen.picks,
                  g_seen.pick_graphs); /* none in the prefill or the encoder */
        ct_decoder_free(ds);
        ct_enc_result_free(&enc);
        tg_free(feat);
    }
    tg_sched_free(sched);
    ct_model_free(m);
    unobserved(be);
}

/* The embedding head through the scheduler (so its reshape is a view the
 * split leaves out): one embed_norm group; none when that view is also an
 * output, which the host reads, so the sum it views must be stored. */
static void test_an_output_view_keeps_its_node(void) {
    for (int v = 0; v < 2; v++) {
        tg_backend *be = observed_cpu();
        if (!be) return;
        tg_sched *sched = NULL;
        CHECK_OK(tg_sched_new(&be, 1, &sched));
        tg_ctx *ctx = tg_ctx_new();
        const int64_t d = 64, B = 2;
        tg_tensor *tok = tg_new_2d(ctx, TG_BF16, d, 10), *pos = tg_new_2d(ctx, TG_BF16, d, 6);
        tg_tensor *it = tg_new_1d(ctx, TG_I32, B), *ip = tg_new_1d(ctx, TG_I32, B);
        tg_tensor *x = tg_add(ctx, tg_get_rows(ctx, tok, it), tg_get_rows(ctx, pos, ip));
        tg_tensor *view = tg_reshape_3d(ctx, x, d, 1, B);
        tg_tensor *y = tg_layer_norm(ctx, view, tg_new_1d(ctx, TG_F32, d), tg_new_1d(ctx, TG_F32, d), 1e-5f);
        tg_graph *g = tg_graph_new(ctx);
        CHECK_OK(tg_graph_build(g, y));
        if (v == 1) CHECK_OK(tg_graph_build(g, view));
        CHECK_OK(tg_sched_alloc(sched, g));
        const int32_t ids[2] = {1, 3};
        CHECK_OK(tg_tensor_set(it, ids, 0, sizeof ids));
        CHECK_OK(tg_tensor_set(ip, ids, 0, sizeof ids));
        CHECK_OK(tg_sched_compute(sched, g));
        CHECK(g_seen.graphs >= 1 && g_seen.errors == 0);
        CHECK_MSG(g_seen.embed_graphs == (v == 0 ? 1 : 0), "case %d: %d graphs with the group", v,
                  g_seen.embed_graphs);
        tg_ctx_free(ctx);
        tg_sched_free(sched);
        unobserved(be);
    }
}

/* The encoder's rel-pos term BD (its product read through the shifted
 * view as the attention's mask) stores BF16 with CT_CUDA_ATTN_BD16=1, one
 * product a layer, where the attention takes the packed kernel (more than
 * 64 frames: 600 feature frames are 75); none with the switch off, and
 * none at 15 frames (120 feature frames: one block of queries a head). */
static void test_encoder_bd_stores_bf16(void) {
    tg_backend *be = observed_cpu();
    if (!be) return;
    ct_model *m = NULL;
    tg_sched *sched = NULL;
    open_tiny(be, &m, &sched);
    static const int frames[3] = {600, 600, 120}, on[3] = {1, 0, 1};
    for (int v = 0; v < 3 && m && sched; v++) {
        setenv("CT_CUDA_ATTN_BD16", on[v] ? "1" : "0", 1);
        memset(&g_seen, 0, sizeof g_seen);
        int T = frames[v], valid[1] = {frames[v]};
        float *feat = made_up_features(1, T);
        ct_enc_opts eo = {.f32 = false};
        ct_enc_result enc = {0};
        CHECK_OK(ct_encoder_run(m, sched, feat, 1, T, valid, &eo, &enc));
        unsetenv("CT_CUDA_ATTN_BD16");
        const int want = v == 0 ? m->n_enc_layers : 0;
        CHECK_MSG(g_seen.errors == 0 && g_seen.bd16 == want, "%d feature frames, CT_CUDA_ATTN_BD16=%d: %d products "
                  "store BF16 for a mask, want %d", T, on[v], g_seen.bd16, want);
        ct_enc_result_free(&enc);
        tg_free(feat);
    }
    tg_sched_free(sched);
    ct_model_free(m);
    unobserved(be);
}

/* The 16-bit stores for readers that take them (CT_CUDA_EMIT_TAILS,
 * CT_CUDA_EMIT_ATTN, both on by default): in the encoder at 600 feature
 * frames (75 after subsampling, on cuBLASLt) each feed-forward's first
 * product (read only by its silu), each conv module's first (read only by
 * its fused glu .. silu kernel), each without its bias (CT_CUDA_EMIT_DEFER),
 * and each attention (read only by its out projection); in a decoder step at batch 40 (cuBLASLt; matvec.cu takes up to 32) both
 * attentions and the feed-forward's first product of every layer (a plan
 * without a device; on one, only where cuBLASLt has an algorithm for a
 * BF16 result with an F32 bias and relu), at
 * batch 3 (matvec.cu, which stores F32) only the attentions; none with
 * the switches off. */
static void test_products_and_attentions_store_16_bits(void) {
    tg_backend *be = observed_cpu();
    if (!be) return;
    ct_model *m = NULL;
    tg_sched *sched = NULL;
    open_tiny(be, &m, &sched);
    for (int v = 0; v < 4 && m && sched; v++) {
        /* v: 0 both on, 1 tails off, 2 attentions off; 3 both on at batch 3 */
        setenv("CT_CUDA_EMIT_TAILS", v == 1 ? "0" : "1", 1);
        setenv("CT_CUDA_EMIT_ATTN", v == 2 ? "0" : "1", 1);
        memset(&g_seen, 0, sizeof g_seen);
        g_seen.kv_layers = m->n_dec_layers;
        const int B = v == 3 ? 3 : 40, T = 600, L = m->n_enc_layers, DL = m->n_dec_layers;
        float *feat = made_up_features(1, T);
        int valid[1] = {T};
        ct_enc_opts eo = {.f32 = false};
        ct_enc_result enc = {0};
        CHECK_OK(ct_encoder_run(m, sched, feat, 1, T, valid, &eo, &enc));
        const int enc_tail16 = g_seen.tail16, enc_attn16 = g_seen.attn16;
        if (v < 3) {
            CHECK_MSG(g_seen.errors == 0 && enc_tail16 == (v == 1 ? 0 : 3 * L) && enc_attn16 == (v == 2 ? 0 : L),
                      "encoder, variant %d: %d products and %d attentions store 16 bits (%d layers)", v, enc_tail16,
                      enc_attn16, L);
        }
        ct_enc_result_free(&enc);
        tg_free(feat);
        /* a decoder step over B rows of 15 encoder frames */
        feat = made_up_features(B, 120);
        int *lens = tg_calloc((size_t)B, sizeof *lens);
        for (int r = 0; lens && r < B; r++) lens[r] = 120;
        if (lens) CHECK_OK(ct_encoder_run(m, sched, feat, B, 120, lens, &eo, &enc));
        ct_dec_opts dopt = {.queued = true};
        ct_dec_state *ds = NULL;
        const int32_t prompt[4] = {4, 5, 6, 7};
        if (enc.out) CHECK_OK(ct_decoder_begin(m, sched, &enc, 4, 16, &dopt, &ds));
        if (ds) {
            int32_t *next = tg_calloc((size_t)B, sizeof *next), *ids = tg_calloc((size_t)B * 2, sizeof *ids);
            int32_t *prompts = tg_calloc((size_t)B * 4, sizeof *prompts);
            for (int r = 0; prompts && r < B; r++) memcpy(prompts + 4 * r, prompt, sizeof prompt);
            if (next && ids && prompts) {
                CHECK_OK(ct_decoder_prefill(ds, prompts, next, NULL, NULL));
                for (int pos = 4; pos < 6; pos++) CHECK_OK(ct_decoder_queue_step(ds, pos));
                CHECK_OK(ct_decoder_read_steps(ds, 4, 2, ids, NULL));
            }
            tg_free(next);
            tg_free(ids);
            tg_free(prompts);
        }
        CHECK(g_seen.step_tails >= 1);
        const int steps = g_seen.step_tails > 0 ? g_seen.step_tails : 1;
        const int want_tail = v == 1 || v == 3 ? 0 : DL, want_attn = v == 2 ? 0 : 2 * DL;
        CHECK_MSG(g_seen.errors == 0 && g_seen.step_tail16 == steps * want_tail &&
                  g_seen.step_attn16 == steps * want_attn,
                  "decoder step at batch %d, variant %d: %d products and %d attentions store 16 bits in %d step "
                  "graphs (want %d and %d each)", B, v, g_seen.step_tail16, g_seen.step_attn16, steps, want_tail,
                  want_attn);
        ct_decoder_free(ds);
        ct_enc_result_free(&enc);
        tg_free(lens);
        tg_free(feat);
    }
    unsetenv("CT_CUDA_EMIT_TAILS");
    unsetenv("CT_CUDA_EMIT_ATTN");
    tg_sched_free(sched);
    ct_model_free(m);
    unobserved(be);
}

/* A rel-pos graph computed straight on a backend (its views are nodes):
 * BD = r·q [144, 70, 2], its shifted view the attention's mask. Variant 1
 * also reads the view elsewhere (a scaled copy, an output), 2 adds a key
 * mask to it first, 3 makes a view of the view an output, 4 has 143 rows
 * (not a multiple of 8). */
static tg_tensor *bd_graph(tg_ctx *ctx, int variant, tg_graph *g) {
    const int64_t D = 32, H = 2, T = 70, rows = variant == 4 ? 143 : 144, first = 70;
    tg_tensor *heads[3];
    for (int i = 0; i < 3; i++) {
        tg_tensor *x = tg_reshape_4d(ctx, tg_new_2d(ctx, TG_F32, D * H, T), D, H, T, 1);
        heads[i] = tg_permute(ctx, x, 0, 2, 1, 3);
    }
    tg_tensor *r = tg_reshape_4d(ctx, tg_new_2d(ctx, TG_F32, D * H, rows), D, H, rows, 1);
    tg_tensor *bd = tg_mul_mat(ctx, tg_permute(ctx, r, 0, 2, 1, 3), heads[0]);
    const int64_t ne[4] = {T, T, H, 1};
    const size_t nb[4] = {4, bd->nb[1] - 4, bd->nb[2], bd->nb[3]};
    tg_tensor *view = tg_view(ctx, bd, 4, ne, nb, (size_t)first * 4), *mask = view;
    if (variant == 2) mask = tg_add(ctx, view, tg_new_4d(ctx, TG_F32, T, 1, 1, 1));
    tg_tensor *out = tg_attention(ctx, heads[0], heads[1], heads[2], mask, 0.1f);
    if (tg_graph_build(g, out)) return NULL;
    if (variant == 1 && tg_graph_build(g, tg_scale(ctx, view, 2.0f))) return NULL;
    if (variant == 3) {
        tg_tensor *vv = tg_view_1d(ctx, view, T, 0);
        vv->flags |= TG_FLAG_OUTPUT;
        if (tg_graph_build(g, vv)) return NULL;
    }
    return out;
}

/* The emit plan's rule for a BF16 rel-pos product (CT_CUDA_ATTN_BD16=1) on
 * graphs whose views are nodes: the product stores BF16 only where every
 * read of it is an attention's mask (variant 0); not where the view is
 * read by another node too, first added to, has a view of it as an
 * output, or the rows are not a multiple of 8; nor with the switch off. */
static void test_bd16_only_where_every_read_is_a_mask(void) {
    tg_backend *cpu = NULL;
    CHECK_OK(tg_backend_cpu_new(1, &cpu));
    tg_cuda_props props;
    memset(&props, 0, sizeof props);
    props.cc_major = 9;
    props.tc_level = 2;
    props.bf16 = true;
    props.sm_count = 132;
    props.smem_per_block_optin = 232448;
    for (int v = 0; v < 6 && cpu; v++) {
        tg_ctx *ctx = tg_ctx_new();
        tg_graph *g = tg_graph_new(ctx);
        tg_buffer *buf = NULL;
        tg_tensor *out = bd_graph(ctx, v == 5 ? 0 : v, g);
        CHECK(out != NULL);
        if (out) CHECK_OK(tg_ctx_alloc_tensors(ctx, cpu, &buf));
        int n = tg_graph_n_nodes(g), fuse[64], products = 0, marked = 0;
        uint8_t writes[64];
        tg_type emit[64];
        CHECK(n <= 64);
        setenv("CT_CUDA_ATTN_BD16", v != 5 ? "1" : "0", 1);
        if (out && buf && n <= 64) CHECK_OK(tg_cuda_test_plan(&props, g, fuse, writes, emit));
        unsetenv("CT_CUDA_ATTN_BD16");
        for (int i = 0; out && buf && i < n; i++) {
            products += tg_graph_node(g, i)->op == TG_OP_MUL_MAT;
            marked += tg_graph_node(g, i)->op == TG_OP_MUL_MAT && emit[i] == TG_BF16;
        }
        CHECK_MSG(products == 1 && marked == (v == 0), "variant %d: %d of %d products store BF16", v, marked,
                  products);
        tg_buffer_free(buf);
        tg_ctx_free(ctx);
    }
    tg_backend_free(cpu);
}

/* The subsampling's front when the features come from the frontend's
 * nodes in the same graph (ct_encoder_run_grid, the GPU's path): the
 * features are then a node's result that conv0 reads last, not an input
 * alive to the end, and a plan that frees them after conv0 puts the front's
 * later results over them, which sub_conv_dw cannot take (it reads them
 * while it writes). One group at batch 1 (5 nodes without masks, 7 with)
 * and 3 (7). */
static void test_front_fuses_after_the_frontend(void) {
    tg_backend *be = observed_cpu();
    if (!be) return;
    ct_model *m = NULL;
    tg_sched *sched = NULL;
    ct_mel mel;
    ct_frontend *fe = NULL;
    open_tiny(be, &m, &sched);
    CHECK_OK(ct_mel_init(&mel));
    float *dft = tg_malloc((size_t)CT_MEL_SPEC * CT_MEL_GRID_WIN * sizeof *dft);
    float *pairs = tg_malloc((size_t)128 * CT_MEL_SPEC * sizeof *pairs);
    if (dft && pairs) {
        ct_mel_dft_table(&mel, dft);
        ct_mel_filter_pairs(&mel, pairs);
        CHECK_OK(ct_frontend_new(be, 128, CT_MEL_GRID_WIN, CT_MEL_GRID_HOP, CT_MEL_SPEC, dft, pairs, &fe));
    }
    /* batch 1 whole (no masks: 5 nodes), batch 1 padded and batch 3 (7) */
    static const int batch[3] = {1, 1, 3}, first_valid[3] = {120, 100, 120};
    for (int c = 0; c < 3 && m && sched && fe; c++) {
        memset(&g_seen, 0, sizeof g_seen);
        const int B = batch[c], T = 120, valid[3] = {first_valid[c], 100, 90};
        const size_t len = ct_mel_grid_len(T);
        float *grid = tg_malloc((size_t)B * len * sizeof *grid);
        for (size_t i = 0; grid && i < (size_t)B * len; i++) grid[i] = (float)((i * 37) % 101 - 50) / 500.0f;
        ct_enc_opts eo = {.f32 = false};
        ct_enc_result enc = {0};
        if (grid) CHECK_OK(ct_encoder_run_grid(m, sched, fe, grid, B, T, valid, &eo, &enc));
        CHECK_MSG(g_seen.errors == 0 && g_seen.sub_fronts == 1 && g_seen.sub_front_len == (c == 0 ? 5 : 7),
                  "batch %d from window grids (first row %d of %d frames): %d subsampling fronts fused, the last "
                  "of %d nodes", B, valid[0], T, g_seen.sub_fronts, g_seen.sub_front_len);
        ct_enc_result_free(&enc);
        tg_free(grid);
    }
    tg_free(dft);
    tg_free(pairs);
    ct_frontend_free(fe);
    ct_mel_free(&mel);
    tg_sched_free(sched);
    ct_model_free(m);
    unobserved(be);
}

TEST_MAIN(T(test_decoder_graphs_get_the_step_fusions), T(test_front_fuses_after_the_frontend), T(test_an_output_view_keeps_its_node),
          T(test_encoder_bd_stores_bf16), T(test_bd16_only_where_every_read_is_a_mask),
          T(test_products_and_attentions_store_16_bits))
#else
TEST_MAIN_SKIPPED("built without the CUDA backend")
#endif
