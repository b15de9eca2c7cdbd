/*
 * test_choices.c: choices the CUDA backend makes from sizes and graph
 * shapes alone, checked without a GPU: launch shapes (pure functions of
 * cuda_internal.h) and which nodes fuse (tg_cuda_fuse_len on graphs whose
 * tensors get made-up addresses, as the hazard tests do). Not here: the
 * plan on the model's real graphs (test_plan.c), what fused kernels
 * compute (test_kernels.c, on a GPU).
 *
 * attn_decode's keys a warp (tg_cuda_attn_decode_kpw) on the H200's 132
 * SMs for the released model's decoder (8 heads, D = 128, BF16 caches: 16
 * keys a round; self-attention over 11-138 keys, cross-attention over 438):
 * the waves rule keeps the choices of the rule before it at the batch sizes
 * bench/README.md measured (1, 8, 32, 64), and at batch 67, where that rule
 * made a second wave of long blocks (step 1.626 ms against 1.498 with one
 * round a warp, measured), it takes one round a warp. Every choice is a
 * whole number of rounds and stays within the grid's 65535 chunks.
 * Where the rows are few, one 16-warp block a row instead
 * (tg_cuda_attn_decode_wide_kpw). The encoder's attention shares a
 * block's key tiles between two groups of warps where its blocks leave
 * SMs idle (tg_cuda_attn_mma_groups). A decoder step's tail (argmax, sums,
 * feed, history writes) fuses into
 * one argmax_sum launch only in the form the scheduler hands it; the
 * subsampling's front (conv0 through the depthwise conv's mask) into one
 * sub_conv_dw launch.
 * Skipped (and counted as passed) where the build has no CUDA backend.
 */
#include "check.h"

#ifdef TG_HAVE_CUDA
#include "base.h"
#include "cuda_compare.h"
#include "cuda_internal.h"
#include "hazard.h"
#include "op_params.h"

enum { SMS = 132, KU = 16, HEADS = 8 };

static const int64_t g_keys[] = {11, 12, 40, 64, 65, 100, 128, 129, 138, 438};

static void test_waves_keep_the_measured_batches(void) {
    static const int batches[] = {1, 8, 32, 64};
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
        for (size_t i = 0; i < sizeof g_keys / sizeof g_keys[0]; i++) {
            int64_t rows = (int64_t)HEADS * batches[b];
            int64_t before = tg_cuda_attn_decode_kpw(SMS, 1, KU, g_keys[i], rows);
            int64_t waves = tg_cuda_attn_decode_kpw(SMS, 2, KU, g_keys[i], rows);
            if (before != waves)
                printf("  batch %d, %lld keys: %lld keys a warp before, %lld now\n", batches[b],
                       (long long)g_keys[i], (long long)before, (long long)waves);
            CHECK(before == waves);
        }
    /* batch 64's cross-attention: one chunk a row (no combine), 7 rounds */
    CHECK(tg_cuda_attn_decode_kpw(SMS, 2, KU, 438, HEADS * 64) == 7 * KU);
    /* batch 1: one round a warp, many chunks */
    CHECK(tg_cuda_attn_decode_kpw(SMS, 2, KU, 438, HEADS) == KU);
}

/* The encoder's attention (8 heads, blocks of 64 queries, 438 frames at
 * 35 s) shares each block's key tiles between two groups of warps where
 * its blocks are no more than the SMs: batch 1 (56 blocks) and 2 (112),
 * not 4 (224) or more; not with one key tile, nor with the switch off,
 * nor where the two groups' shared memory passes a block's. */
static void test_attention_key_groups(void) {
    const int64_t q_blocks = (438 + 63) / 64;
    /* two groups' tiles at D = 160 with the mask and its rows' table, and
     * the most shared memory a block may have on an H100 and on sm_89 */
    const int64_t smem = 2 * ((64 * 168 + 160 * 72) * 2 + 64 * 72 * 4) + 64 * 8, h100 = 232448, sm89 = 101376;
    CHECK(tg_cuda_attn_mma_groups(SMS, q_blocks * HEADS * 1, 438, true, smem, h100) == TG_AM_GROUPS);
    CHECK(tg_cuda_attn_mma_groups(SMS, q_blocks * HEADS * 2, 438, true, smem, h100) == TG_AM_GROUPS);
    CHECK(tg_cuda_attn_mma_groups(SMS, q_blocks * HEADS * 4, 438, true, smem, h100) == 1);
    CHECK(tg_cuda_attn_mma_groups(SMS, q_blocks * HEADS * 64, 438, true, smem, h100) == 1);
    CHECK(tg_cuda_attn_mma_groups(SMS, SMS, 65, true, smem, h100) == TG_AM_GROUPS);
    CHECK(tg_cuda_attn_mma_groups(SMS, SMS + 1, 65, true, smem, h100) == 1);
    CHECK(tg_cuda_attn_mma_groups(SMS, 4, 64, true, smem, h100) == 1);
    CHECK(tg_cuda_attn_mma_groups(SMS, q_blocks * HEADS, 438, false, smem, h100) == 1);
    CHECK(tg_cuda_attn_mma_groups(SMS, 0, 438, true, smem, h100) == 1);
    CHECK(tg_cuda_attn_mma_groups(SMS, q_blocks * HEADS, 438, true, smem, sm89) == 1);
    CHECK(tg_cuda_attn_mma_groups(SMS, q_blocks * HEADS, 438, true, sm89, sm89) == TG_AM_GROUPS);
}

static void test_waves_fix_the_second_wave_at_batch_67(void) {
    CHECK(tg_cuda_attn_decode_kpw(SMS, 1, KU, 438, HEADS * 67) == 7 * KU); /* 536 blocks, 528 slots */
    for (size_t i = 0; i < sizeof g_keys / sizeof g_keys[0]; i++)
        CHECK(tg_cuda_attn_decode_kpw(SMS, 2, KU, g_keys[i], HEADS * 67) == KU);
    CHECK(tg_cuda_attn_decode_kpw(SMS, 0, KU, 438, HEADS * 64) == KU);
}

static void test_choices_are_whole_rounds_within_the_grid(void) {
    static const int64_t keys[] = {1, 7, 16, 63, 64, 65, 1000, 4096, 65535LL * 64, 65535LL * 64 + 1, 1LL << 26};
    static const int64_t rows[] = {1, 8, 67, 528, 529, 4096, 65535};
    static const int sms[] = {1, 78, 132};
    for (int fill = 0; fill <= 2; fill++)
        for (size_t s = 0; s < sizeof sms / sizeof sms[0]; s++)
            for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
                for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
                    int64_t kpw = tg_cuda_attn_decode_kpw(sms[s], fill, KU, keys[k], rows[r]);
                    int64_t chunks = (keys[k] + TG_ATD_WARPS * kpw - 1) / (TG_ATD_WARPS * kpw);
                    CHECK(kpw >= KU && kpw % KU == 0);
                    CHECK(chunks >= 1 && chunks <= 65535);
                }
}

/* One 16-warp block a row (attn_decode_wide) where the rows fit one wave
 * of one block an SM, fill at least a quarter of the SMs, and a 4-warp
 * block would need more than one round: the cross-attention (438 frames)
 * at batch 5-16 in 2 rounds, a self-attention past 64 keys in 1; not at
 * batch 1-4 (8-32 rows: on an H100 a step at batch 1 took 0.560 ms with
 * it against 0.528 without, 2026-12-05), not at batch 17 (136 rows), not
 * for keys one 4-warp round holds, not past 4 rounds; with short rows
 * asked for, also below the quarter where the keys are one round. */
/* The wide blocks in a cluster a row (tg_cuda_attn_decode_wcl) on 132 SMs:
 * at batch 5-8 the cross-attention's 438 frames (two rounds of 16 warps)
 * as 2 blocks of one round a row; at 33-44 rows and 4 rounds, 2 blocks of
 * 2 rounds, not 3 with the third left without keys; every choice covers
 * the keys with each block given some; one round, or rows past half the
 * SMs, keep one block a row. */
static void test_wide_blocks_in_clusters(void) {
    const int64_t round = (int64_t)TG_ATD_WIDE * KU;
    int64_t kpw = -1;
    for (int b = 5; b <= 8; b++) {
        CHECK_MSG(tg_cuda_attn_decode_wcl(SMS, KU, 438, HEADS * b, &kpw) == 2 && kpw == KU, "batch %d: kpw %lld", b,
                  (long long)kpw);
    }
    CHECK(tg_cuda_attn_decode_wcl(SMS, KU, 4 * round, 40, &kpw) == 2 && kpw == 2 * KU);
    CHECK(tg_cuda_attn_decode_wcl(SMS, KU, 3 * round, 40, &kpw) == 3 && kpw == KU);
    CHECK(tg_cuda_attn_decode_wcl(SMS, KU, 438, HEADS * 9, &kpw) == 0 && kpw == 0); /* 72 rows: one SM a row */
    CHECK(tg_cuda_attn_decode_wcl(SMS, KU, 138, 40, &kpw) == 0);                    /* one round */
    CHECK(tg_cuda_attn_decode_wcl(SMS, KU, 438, 0, &kpw) == 0);
    CHECK(tg_cuda_attn_decode_wcl(1000, KU, 16 * round, 10, &kpw) == 8 && kpw == 2 * KU); /* the cluster's 8 */
    for (int64_t rows = 1; rows <= SMS; rows++)
        for (int64_t tk = 1; tk <= 4 * round; tk += 37) {
            const int64_t p = tg_cuda_attn_decode_wcl(SMS, KU, tk, rows, &kpw);
            if (!p) continue;
            CHECK_MSG(p >= 2 && p <= 8 && p * rows <= SMS && kpw % KU == 0 && p * TG_ATD_WIDE * kpw >= tk &&
                          (p - 1) * TG_ATD_WIDE * kpw < tk,
                      "%lld rows, %lld keys: %lld blocks of %lld keys a warp", (long long)rows, (long long)tk,
                      (long long)p, (long long)kpw);
        }
}

static void test_wide_blocks_for_few_rows(void) {
    const int64_t R = 40; /* rows: batch 5 */
    for (int b = 1; b <= 16; b++)
        CHECK_MSG(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, 438, HEADS * b) == (HEADS * b > SMS / 4 ? 2 * KU : 0),
                  "batch %d", b);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, 438, HEADS * 17) == 0);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, 138, R) == KU);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, 65, R) == KU);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, 64, R) == 0);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, 11, R) == 0);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, 4 * TG_ATD_WIDE * KU, R) == 4 * KU);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, 4 * TG_ATD_WIDE * KU + 1, R) == 0);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, 438, 0) == 0);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, 438, SMS / 4) == 0);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, 438, SMS / 4 + 1) == 2 * KU);
    /* a least count of rows given (CT_CUDA_ATTN_DECODE_WIDE_MIN) */
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 1, false, KU, 438, HEADS) == 2 * KU);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 9, false, KU, 438, HEADS) == 0);
    /* F32 caches: 8 keys a round, so 438 frames take 4 rounds */
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU / 2, 438, R) == 4 * (KU / 2));
    /* short rows (CT_CUDA_ATTN_DECODE_WIDE_SHORT): below the quarter too,
     * where the keys are one round of the 16 warps: the self-attention at
     * batch 1 (8 rows, 65-256 keys), not the cross-attention's 438 frames,
     * not keys one 4-warp round holds; above the quarter as without */
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, true, KU, 138, HEADS) == KU);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, true, KU, TG_ATD_WIDE * KU, HEADS) == KU);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, true, KU, TG_ATD_WIDE * KU + 1, HEADS) == 0);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, true, KU, 438, HEADS) == 0);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, true, KU, 64, HEADS) == 0);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, true, KU, 138, 0) == 0);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, true, KU, 438, R) == 2 * KU);
    CHECK(tg_cuda_attn_decode_wide_kpw(SMS, 0, true, KU, 438, SMS + 1) == 0);
    /* a choice covers the row's keys in whole rounds of one block */
    static const int64_t keys[] = {1, 65, 100, 256, 257, 1000, 1024, 1025};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        int64_t kpw = tg_cuda_attn_decode_wide_kpw(SMS, 0, false, KU, keys[k], R);
        CHECK(kpw == 0 || (kpw % KU == 0 && kpw * TG_ATD_WIDE >= keys[k] && (kpw - KU) * TG_ATD_WIDE < keys[k]));
    }
}

/* ------------------------------------------------------------ fusions */

/* Every tensor of the graph at a made-up address 4 KiB apart (a view at
 * its source's), and each node's readers counted as the plan counts them
 * (through view chains). */
static int fake_plan(tg_graph *g, int *uses, int max) {
    int n = tg_graph_n_nodes(g);
    uintptr_t at = 0x100000;
    for (int i = 0; i < tg_graph_n_leafs(g); i++, at += 4096) tg_graph_leaf(g, i)->data = (void *)at;
    for (int i = 0; i < n && i < max; i++, at += 4096) {
        tg_tensor *t = tg_graph_node(g, i);
        t->data = t->view_src ? (char *)t->view_src->data + t->view_offs : (void *)at;
        uses[i] = 0;
    }
    for (int i = 0; i < n && i < max; i++) {
        tg_tensor *t = tg_graph_node(g, i);
        for (int k = 0; k <= TG_MAX_SRC; k++)
            for (const tg_tensor *s = k < TG_MAX_SRC ? t->src[k] : t->view_src; s; s = s->view_src) {
                int j = -1;
                for (int q = 0; q < n && j < 0; q++)
                    if (tg_graph_node(g, q) == s) j = q;
                if (j >= 0) {
                    uses[j]++;
                    break;
                }
            }
    }
    return n;
}

/* out's graph (in ctx) planned by fake_plan: its first max nodes into
 * nodes, their readers into uses; the node count, -1 when it did not build. */
static int planned_nodes(tg_ctx *ctx, tg_tensor *out, tg_tensor **nodes, int *uses, int max) {
    tg_graph *g = tg_graph_new(ctx);
    CHECK_OK(tg_graph_build(g, out));
    if (!g || !out) return -1;
    int n = fake_plan(g, uses, max);
    for (int i = 0; i < n && i < max; i++) nodes[i] = tg_graph_node(g, i);
    return n;
}

/* The decoder step's head as decoder.c builds it: token and position
 * lookups, their sum, a reshape to [d, n_q, B] and the embedding norm; a
 * second reader of the sum, when asked. */
static tg_tensor *embed_head(tg_ctx *ctx, bool second_reader, tg_tensor **table) {
    int64_t d = 64, B = 3;
    tg_tensor *tok = tg_new_2d(ctx, TG_BF16, d, 40), *pos = tg_new_2d(ctx, TG_BF16, d, 12);
    tg_tensor *x = tg_add(ctx, tg_get_rows(ctx, tok, tg_new_1d(ctx, TG_I32, B)),
                          tg_get_rows(ctx, pos, tg_new_1d(ctx, TG_I32, B)));
    tg_tensor *y = tg_layer_norm(ctx, tg_reshape_3d(ctx, x, d, 1, B), tg_new_1d(ctx, TG_F32, d),
                                 tg_new_1d(ctx, TG_F32, d), 1e-5f);
    *table = tok;
    return second_reader ? tg_add(ctx, y, tg_reshape_3d(ctx, tg_scale(ctx, x, 2.0f), d, 1, B)) : y;
}

static void test_embedding_head_fuses(void) {
    tg_cuda_ctx *c = tg_calloc(1, sizeof *c);
    CHECK(c != NULL);
    if (!c) return;
    c->use_fusion = c->use_embed_norm = true;
    for (int v = 0; v < 4; v++) {
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *table = NULL, *out = embed_head(ctx, v == 1, &table);
        tg_graph *g = tg_graph_new(ctx);
        CHECK_OK(tg_graph_build(g, out));
        int uses[32];
        int n = fake_plan(g, uses, 32);
        CHECK(n >= 5 && n <= 32);
        tg_tensor *nodes[32];
        for (int i = 0; i < n && i < 32; i++) nodes[i] = tg_graph_node(g, i);
        c->use_embed_norm = v != 2;
        if (v == 3) nodes[4]->data = table->data; /* the norm's result over the table */
        int len = n <= 32 ? tg_cuda_fuse_len(c, nodes, n, 0, uses) : -1;
        /* 0: get_rows, get_rows, add, the reshape's view node, layer norm */
        CHECK_MSG(len == (v == 0 ? 5 : 1), "case %d: fuse length %d", v, len);
        if (v == 0) CHECK(nodes[4]->op == TG_OP_LAYER_NORM && tg_op_is_view(nodes[3]->op));
        tg_ctx_free(ctx);
    }
    tg_free(c);
}

/* A context on a made-up device with BF16 mma and SMS SMs, whose matvec.cu
 * takes 1-16 columns (switches off until a test sets them); NULL when out
 * of memory. mma_ctx_free frees it with its device. */
static tg_cuda_ctx *mma_ctx(void) {
    tg_cuda_ctx *c = tg_calloc(1, sizeof *c);
    tg_cuda_device *dev = tg_calloc(1, sizeof *dev);
    CHECK(c && dev);
    if (!c || !dev) {
        tg_free(c);
        tg_free(dev);
        return NULL;
    }
    dev->props.tc_level = 2;
    dev->props.sm_count = SMS;
    c->dev = dev;
    c->matvec_mma_min = 1;
    c->matvec_mma_max = 16;
    c->matvec_columns = 2;
    return c;
}

static void mma_ctx_free(tg_cuda_ctx *c) {
    if (c) tg_free(c->dev);
    tg_free(c);
}

/* A decoder step's q/k/v product and the set_rows of its k and v into
 * the cache (kv_step_graph): one group from the layer norm to the
 * set_rows, on mul_mat_vec_mma, the product's result marked as written
 * too, so the attention reading q from it (and the cache) runs after the
 * group; refused with the switch off, on a GPU without BF16 mma (where
 * the product is not on matvec.cu at all), and with the cache over the
 * product's weights; with fewer columns allowed the norm inside than the
 * step has (CT_CUDA_MATVEC_LN_MAX), the norm apart and the rest one group. */
static void test_kv_write_fuses_into_the_product(void) {
    tg_cuda_ctx *c = mma_ctx();
    if (!c) return;
    tg_cuda_device *dev = c->dev;
    c->use_fusion = c->use_matvec = c->use_matvec_mma = c->use_ln_matvec = true;
    for (int v = 0; v < 5; v++) {
        c->use_kv_rows = v != 1;
        c->matvec_ln_max = v == 4 ? 2 : 256;
        dev->props.tc_level = v == 2 ? 1 : 2;
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *out = kv_step_graph(ctx);
        tg_graph *g = tg_graph_new(ctx);
        CHECK_OK(tg_graph_build(g, out));
        int uses[48], fuse[48] = {0}, runs[48];
        uint8_t writes[48] = {0};
        int n = fake_plan(g, uses, 48);
        CHECK(n >= 8 && n <= 48);
        if (n > 48) n = 48;
        tg_tensor *nodes[48];
        int ln = -1, att = -1, rows = -1;
        for (int i = 0; i < n; i++) {
            nodes[i] = tg_graph_node(g, i);
            if (nodes[i]->op == TG_OP_LAYER_NORM) ln = i;
            if (nodes[i]->op == TG_OP_ATTENTION) att = i;
            if (nodes[i]->op == TG_OP_SET_ROWS) rows = i;
        }
        CHECK(ln >= 0 && att > ln && rows > ln);
        if (ln < 0 || att < 0 || rows < 0) {
            tg_ctx_free(ctx);
            continue;
        }
        if (v == 3) nodes[rows]->data = nodes[ln + 1]->src[0]->data; /* the cache over the weights */
        for (int i = 0; i < n;) {
            int len = tg_op_is_view(nodes[i]->op) ? 1 : tg_cuda_fuse_len(c, nodes, n, i, uses);
            fuse[i] = len;
            if (len > 1) tg_cuda_group_writes(nodes, i, len, writes);
            i += len;
        }
        /* LN, mul_mat, add (the bias), q's view, the k/v view, set_rows;
         * without BF16 mma 3 columns go to cuBLASLt, the norm apart */
        int want = v == 0 ? rows - ln + 1 : v == 2 || v == 4 ? 1 : 3;
        CHECK_MSG(fuse[ln] == want, "case %d: group of %d at the norm, want %d", v, fuse[ln], want);
        if (v == 4) CHECK_MSG(fuse[ln + 1] == rows - ln, "3 columns, 2 normed inside: the product's group %d, want %d",
                              fuse[ln + 1], rows - ln);
        if (v == 0) {
            CHECK(rows - ln + 1 == 6 && nodes[ln + 2]->op == TG_OP_ADD && writes[ln + 2] == 1);
            CHECK(tg_hazard_runs_grouped(nodes, n, NULL, fuse, writes, 0, runs) > 0);
            CHECK_MSG(runs[att] > runs[ln], "attention in run %d, the group in %d", runs[att], runs[ln]);
        } else {
            CHECK(writes[ln + 2] == (v == 4)); /* the product's group still writes q with the cache */
        }
        tg_ctx_free(ctx);
    }
    mma_ctx_free(c);
}

/* The rel-pos table's projection as encoder.c builds it: r = W_pos P, no
 * bias, scaled by 1/sqrt(d_head), then read by a product (whose node
 * follows the group: its parts must not reach past the group); variant 2
 * reads the product twice, 4 adds a bias after the second product. */
static tg_tensor *pos_projection(tg_ctx *ctx, int variant, tg_tensor **w) {
    const int64_t d = 64, rows = 29;
    tg_tensor *W = tg_new_2d(ctx, TG_BF16, d, d), *P = tg_new_2d(ctx, TG_F32, d, rows);
    tg_tensor *mm = tg_mul_mat(ctx, W, P), *r = tg_scale(ctx, mm, 0.125f);
    *w = W;
    if (variant == 2) r = tg_add(ctx, r, tg_scale(ctx, mm, 2.0f)); /* the product read twice */
    tg_tensor *out = tg_mul_mat(ctx, r, tg_new_2d(ctx, TG_F32, d, 15));
    return variant == 4 ? tg_add(ctx, out, tg_new_1d(ctx, TG_F32, rows)) : out;
}

/* A product and the scale after it, with no bias: one launch, the scale as
 * the product's alpha and no bias (0 and 4); refused with the switch off
 * (1), when the product has another reader (2), and when the scale's
 * result lies over the product's weights (3). */
static void test_scale_alone_rides_the_product(void) {
    tg_cuda_ctx *c = tg_calloc(1, sizeof *c);
    CHECK(c != NULL);
    if (!c) return;
    for (int v = 0; v < 5; v++) {
        c->use_fusion = true;
        c->use_scale = v != 1;
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *W = NULL, *nodes[16];
        int uses[16];
        int n = planned_nodes(ctx, pos_projection(ctx, v, &W), nodes, uses, 16);
        CHECK(n >= 3 && nodes[0]->op == TG_OP_MUL_MAT && nodes[1]->op == TG_OP_SCALE);
        if (v == 3) nodes[1]->data = W->data;
        int len = n >= 3 && n <= 16 ? tg_cuda_fuse_len(c, nodes, n, 0, uses) : -1;
        CHECK_MSG(len == (v == 0 || v == 4 ? 2 : 1), "case %d: fuse length %d", v, len);
        if (len == 2) {
            tg_cuda_fused f = tg_cuda_fused_parts(nodes, 0, 2);
            CHECK(f.bias == NULL && f.res == NULL && !f.relu && f.alpha == 0.125f);
        }
        tg_ctx_free(ctx);
    }
    tg_free(c);
}

/* A decoder step's tail as decoder.c builds it (build_graph, build_feed):
 * argmax and sum_rows of the logits [V, n_q, B], the last query's ids into
 * the feed, the ids cast to F32 and both into one row of the histories.
 * Variants: 2 gives the cast a second reader; 4 puts the softmax and the
 * chosen token's probability (want_scores) between the sums and the feed;
 * 6 copies the ids into an existing F32 tensor instead of tg_cast; 7 gives
 * the two history writes different row-id tensors; 8 keeps the sums'
 * history in BF16. Returns the graph; *logits, *hist (the ids' history),
 * *hist_sums set. */
static tg_graph *step_tail(tg_ctx *ctx, int n_q, int variant, tg_tensor **logits, tg_tensor **hist,
                           tg_tensor **hist_sums) {
    const int64_t V = 300, B = 3, cols = 16; /* every tensor within fake_plan's 4096-byte slots */
    tg_tensor *L = tg_new_3d(ctx, TG_F32, V, n_q, B);
    tg_tensor *ids = tg_argmax(ctx, L), *sums = tg_sum_rows(ctx, L);
    tg_tensor *feed = tg_new_1d(ctx, TG_I32, B), *pos = tg_new_1d(ctx, TG_I32, n_q);
    tg_tensor *hi = tg_new_2d(ctx, TG_F32, B, cols), *hs = tg_new_2d(ctx, variant == 8 ? TG_BF16 : TG_F32, B, cols);
    tg_graph *g = tg_graph_new(ctx);
    if (!g || tg_graph_build(g, ids) || tg_graph_build(g, sums)) return NULL;
    if (variant == 4) {
        tg_tensor *p = tg_reshape_4d(ctx, tg_soft_max(ctx, L, NULL, 1.0f), 1, V, n_q * B, 1);
        if (tg_graph_build(g, tg_get_rows(ctx, p, tg_reshape_3d(ctx, ids, 1, n_q * B, 1)))) return NULL;
    }
    tg_tensor *last = tg_view_2d(ctx, ids, 1, B, ids->nb[1], (size_t)(n_q - 1) * ids->nb[0]);
    if (tg_graph_build(g, tg_cpy(ctx, last, tg_reshape_2d(ctx, feed, 1, B)))) return NULL;
    *logits = L;
    *hist = hi;
    *hist_sums = hs;
    if (n_q != 1) return g; /* a prefill writes no history */
    tg_tensor *at = tg_view_1d(ctx, pos, 1, 0);
    tg_tensor *at2 = variant == 7 ? tg_new_1d(ctx, TG_I32, 1) : at;
    tg_tensor *cast = variant == 6 ? tg_cpy(ctx, ids, tg_new_2d(ctx, TG_F32, 1, B)) : tg_cast(ctx, ids, TG_F32);
    if (tg_graph_build(g, tg_set_rows(ctx, hi, tg_reshape_2d(ctx, cast, B, 1), at))) return NULL;
    if (tg_graph_build(g, tg_set_rows(ctx, hs, tg_reshape_2d(ctx, sums, B, 1), at2))) return NULL;
    if (variant == 2 && tg_graph_build(g, tg_scale(ctx, cast, 2.0f))) return NULL;
    return g;
}

/* Points `t` and every node viewing it (the set_rows that write it) at
 * the address `to`, after fake_plan. */
static void move_to(tg_graph *g, tg_tensor *t, void *to) {
    t->data = to;
    for (int i = 0; i < tg_graph_n_nodes(g); i++)
        if (tg_graph_node(g, i)->view_src == t) tg_graph_node(g, i)->data = to;
}

/* The step's tail in one argmax_sum launch, as the scheduler's split holds
 * it (its view nodes left out): six nodes, the ids, sums, feed and the ids'
 * history row marked as written and the cast not; refused with the switch
 * off (1), when the cast has another reader (2), when a history lies over
 * the logits (3), with the chosen token's probability wanted (4: its nodes
 * come between), for a prefill (5), when the "cast" is a copy into a
 * tensor of its own (6: it would go unwritten), when the histories' row
 * ids differ (7), for a BF16 history (8), and when one history lies over
 * the other (9). */
static void test_step_tail_fuses(void) {
    tg_cuda_ctx *c = tg_calloc(1, sizeof *c);
    CHECK(c != NULL);
    if (!c) return;
    for (int v = 0; v < 10; v++) {
        c->use_fusion = true;
        c->use_pick = v != 1;
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *L = NULL, *hist = NULL, *hist_sums = NULL;
        tg_graph *g = step_tail(ctx, v == 5 ? 2 : 1, v, &L, &hist, &hist_sums);
        CHECK_MSG(g != NULL, "case %d: graph", v);
        if (!g) {
            tg_ctx_free(ctx);
            continue;
        }
        int uses[48];
        int n = fake_plan(g, uses, 48);
        CHECK(n <= 48);
        if (v == 3) move_to(g, hist, L->data);
        if (v == 9) move_to(g, hist_sums, hist->data);
        /* the split: the graph without its view nodes (readers through a
         * view already count for the node it views) */
        tg_tensor *nodes[48];
        int su[48], m = 0, first = -1;
        for (int i = 0; i < n && i < 48; i++) {
            tg_tensor *t = tg_graph_node(g, i);
            if (tg_op_is_view(t->op)) continue;
            if (t->op == TG_OP_ARGMAX) first = m;
            su[m] = uses[i];
            nodes[m++] = t;
        }
        CHECK(first >= 0);
        if (first < 0) {
            tg_ctx_free(ctx);
            continue;
        }
        int len = tg_cuda_fuse_len(c, nodes, m, first, su);
        CHECK_MSG(len == (v == 0 ? 6 : 1), "case %d: fuse length %d", v, len);
        if (v == 0 && len == 6) {
            int fuse[48] = {0}, runs[48];
            uint8_t writes[48] = {0};
            for (int i = 0; i < m; i++) fuse[i] = i < first || i >= first + 6 ? 1 : i == first ? 6 : 0;
            tg_cuda_group_writes(nodes, first, 6, writes);
            static const uint8_t want[5] = {1, 1, 1, 0, 1}; /* ids, sums, feed, the cast, the ids' row */
            for (int k = 0; k < 5; k++)
                CHECK_MSG(writes[first + k] == want[k], "node %d (%s) written %d", k,
                          tg_op_name(nodes[first + k]->op), writes[first + k]);
            CHECK(nodes[first + 5]->op == TG_OP_SET_ROWS);
            CHECK(tg_hazard_runs_grouped(nodes, m, NULL, fuse, writes, 0, runs) > 0);
        }
        tg_ctx_free(ctx);
    }
    tg_free(c);
}

/* What a product may read before its wait (tg_cuda_written_before):
 * nothing while the launch before is unknown (the encode's first, or
 * streams forked), a tensor apart from what that launch wrote, not one
 * overlapping any of it (a view into it included), anything after a
 * launch that wrote nothing. */
/* What the encode loop records of each launch (tg_cuda_record_launch): a
 * group's last result and its stored intermediates after a kernel; a node
 * that launched nothing added to the record before; unknown after a
 * cuBLASLt launch, past TG_HAZARD_GROUP_MAX tensors, and still unknown
 * after nodes that launched nothing. */
static void test_record_launch(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *t[12];
    for (int k = 0; k < 12; k++) t[k] = tg_new_1d(ctx, TG_F32, 16);
    uint8_t writes[12] = {0};
    writes[2] = 1; /* a group of 2, 3, 4 that stores 2 too */
    tg_cuda_ctx *c = tg_calloc(1, sizeof *c);
    CHECK(c != NULL);
    if (c) {
        c->prev_n = -1;
        c->last_kernel = "ew_unary";
        tg_cuda_record_launch(c, t, writes, 0, 1);
        CHECK(c->prev_n == 1 && c->prev_w[0] == t[0]);
        c->last_kernel = NULL; /* nothing launched: the kernel before stays */
        tg_cuda_record_launch(c, t, writes, 1, 1);
        CHECK(c->prev_n == 2 && c->prev_w[0] == t[0] && c->prev_w[1] == t[1]);
        c->last_kernel = "mul_mat_vec_mma";
        tg_cuda_record_launch(c, t, writes, 2, 3);
        CHECK(c->prev_n == 2 && c->prev_w[0] == t[2] && c->prev_w[1] == t[4]);
        c->last_kernel = "cublasLtMatmul";
        tg_cuda_record_launch(c, t, writes, 5, 1);
        CHECK(c->prev_n == -1);
        c->last_kernel = NULL;
        tg_cuda_record_launch(c, t, writes, 6, 1);
        CHECK(c->prev_n == -1);
        c->last_kernel = "cpy";
        tg_cuda_record_launch(c, t, writes, 6, 1);
        CHECK(c->prev_n == 1 && c->prev_w[0] == t[6]);
        c->last_kernel = NULL;
        for (int k = 0; k < TG_HAZARD_GROUP_MAX; k++) tg_cuda_record_launch(c, t, writes, 7 + (k % 5), 1);
        CHECK(c->prev_n == -1);
    }
    tg_free(c);
    tg_ctx_free(ctx);
}

static void test_written_before(void) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *a = tg_new_2d(ctx, TG_F32, 64, 4), *b = tg_new_2d(ctx, TG_F32, 64, 4), *r = tg_new_2d(ctx, TG_F32, 64, 4);
    tg_tensor *col = tg_view_1d(ctx, b, 64, 2 * b->nb[1]); /* b's third column */
    tg_tensor *res = tg_view_1d(ctx, r, 64, 0);
    a->data = (void *)0x100000;
    b->data = (void *)0x200000;
    r->data = (void *)0x300000;
    col->data = (char *)b->data + 2 * b->nb[1];
    res->data = r->data;
    tg_cuda_ctx *c = tg_calloc(1, sizeof *c);
    CHECK(c != NULL);
    if (c) {
        c->prev_n = -1;
        CHECK(!tg_cuda_written_before(c, r));
        c->prev_n = 0;
        CHECK(tg_cuda_written_before(c, r));
        c->prev_w[0] = a;
        c->prev_w[1] = col;
        c->prev_n = 2;
        CHECK(tg_cuda_written_before(c, r) && tg_cuda_written_before(c, res));
        CHECK(!tg_cuda_written_before(c, a) && !tg_cuda_written_before(c, b) && !tg_cuda_written_before(c, col));
        c->prev_w[1] = res; /* the previous launch wrote into r */
        CHECK(!tg_cuda_written_before(c, r) && tg_cuda_written_before(c, b));
    }
    tg_free(c);
    tg_ctx_free(ctx);
}

/* The subsampling's front as encoder.c builds it (conv0, bias, mask,
 * relu, depthwise conv, bias, mask): variant 0 with both masks, 1 without
 * (5 nodes), 2 with the switch off, 3 with the relu read twice, 4 with the
 * depthwise conv at stride 1, 5 with the result over the input, 6 with
 * the first bias a per-frame value (not the kernel's per channel). */
static tg_tensor *sub_front(tg_ctx *ctx, int v, tg_tensor **img) {
    const int64_t C = 4, B = 2;
    *img = tg_new_4d(ctx, TG_F32, 9, 7, 1, B);
    tg_tensor *k0 = tg_new_4d(ctx, TG_F32, 3, 3, 1, C), *k1 = tg_new_4d(ctx, TG_F32, 3, 3, 1, C);
    tg_tensor *b0 = v == 6 ? tg_new_4d(ctx, TG_F32, 1, 4, 1, B) : tg_new_4d(ctx, TG_F32, 1, 1, C, 1);
    tg_tensor *b1 = tg_new_4d(ctx, TG_F32, 1, 1, C, 1);
    tg_tensor *m1 = tg_new_4d(ctx, TG_F32, 1, 4, 1, B), *m2 = tg_new_4d(ctx, TG_F32, 1, v == 4 ? 4 : 2, 1, B);
    tg_tensor *x = tg_add(ctx, tg_conv_2d(ctx, k0, *img, 2, 2, 1, 1), b0); /* [5, 4, C, B] */
    if (v != 1) x = tg_mul(ctx, x, m1);
    tg_tensor *r = tg_relu(ctx, x);
    x = tg_add(ctx, tg_conv_2d_dw(ctx, k1, r, v == 4 ? 1 : 2, v == 4 ? 1 : 2, 1, 1), b1);
    if (v != 1) x = tg_mul(ctx, m2, x);
    return v == 3 ? tg_concat(ctx, tg_sum_rows(ctx, x), tg_sum_rows(ctx, r), 1) : x;
}

static void test_subsampling_front_fuses(void) {
    tg_cuda_ctx *c = tg_calloc(1, sizeof *c);
    CHECK(c != NULL);
    if (!c) return;
    for (int v = 0; v < 7; v++) {
        c->use_fusion = true;
        c->use_sub_front = v != 2;
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *img = NULL, *out = sub_front(ctx, v, &img), *nodes[16];
        int uses[16];
        int n = planned_nodes(ctx, out, nodes, uses, 16);
        CHECK(n >= 5 && n <= 16 && nodes[0]->op == TG_OP_CONV_2D);
        const int want = v == 0 ? 7 : v == 1 ? 5 : 1;
        if (v == 5) nodes[6]->data = img->data;
        int len = n >= 5 && n <= 16 ? tg_cuda_fuse_len(c, nodes, n, 0, uses) : -1;
        CHECK_MSG(len == want, "case %d: fuse length %d, want %d", v, len, want);
        if (len > 1) CHECK(nodes[len - 1] == out);
        tg_ctx_free(ctx);
    }
    tg_free(c);
}

/* An encoder layer's output norm, then the next layer's first norm of its
 * result (encoder.c): x = relu(input), a = LN(x), b = LN(a), and a second
 * reader of a (the residual add after b's product). Case 0 fuses the two
 * norms into one launch that also stores a (written); 1: the switch off;
 * 2: b's storage over x (read while b is written); 3: a exactly over x
 * (a warp reads its row before it writes it): fuses; 4: a over x at
 * another offset; 5: rows wider than a warp's 512 float4s (the storage
 * spread apart by hand, so only the width refuses); 6: b normalises
 * another tensor, not a (two norms in a row, not of each other); 7: b's storage over a's;
 * 8: b's over its own weight; 9: b's product on matvec.cu, which takes
 * the norm inside its launch instead (a step's); 10: the same product
 * with fewer columns allowed the norm inside than it has
 * (CT_CUDA_MATVEC_LN_MAX, a step at batch 17-32 on the tiles): the pair
 * again. */
static tg_tensor *norm_pair(tg_ctx *ctx, int v) {
    const int64_t d = v == 5 ? 2064 : 64, rows = 3;
    tg_tensor *x = tg_relu(ctx, tg_new_2d(ctx, TG_F32, d, rows));
    tg_tensor *a = tg_layer_norm(ctx, x, tg_new_1d(ctx, TG_F32, d), tg_new_1d(ctx, TG_F32, d), 1e-5f);
    tg_tensor *b = tg_layer_norm(ctx, v == 6 ? tg_new_2d(ctx, TG_F32, d, rows) : a, tg_new_1d(ctx, TG_F32, d),
                                 tg_new_1d(ctx, TG_F32, d), 1e-5f);
    tg_tensor *p = tg_mul_mat(ctx, tg_new_2d(ctx, TG_BF16, d, d), b);
    /* a first, so that its norm comes right before b's in the graph */
    return v == 6 ? tg_add(ctx, a, p) : tg_add(ctx, p, a);
}

static void test_norm_pair_fuses(void) {
    tg_cuda_ctx *c = mma_ctx();
    if (!c) return;
    for (int v = 0; v < 11; v++) {
        c->use_fusion = true;
        c->use_norm_pair = v != 1;
        c->use_matvec = c->use_matvec_mma = c->use_ln_matvec = v >= 9;
        c->matvec_ln_max = v == 10 ? 2 : 16;
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *nodes[16];
        int uses[16];
        int n = planned_nodes(ctx, norm_pair(ctx, v), nodes, uses, 16);
        CHECK(n >= 5 && n <= 16);
        if (n < 5 || n > 16) {
            tg_ctx_free(ctx);
            continue;
        }
        CHECK_MSG(nodes[1]->op == TG_OP_LAYER_NORM && nodes[1]->src[0] == nodes[0] && nodes[2]->op == TG_OP_LAYER_NORM,
                  "case %d: not two norms at nodes 1 and 2", v);
        CHECK(uses[1] == 2 || v == 6);
        if (v == 2) nodes[2]->data = nodes[0]->data;
        if (v == 7) nodes[2]->data = nodes[1]->data;
        if (v == 8) nodes[2]->data = nodes[2]->src[1]->data;
        if (v == 3) nodes[1]->data = nodes[0]->data;
        if (v == 4) nodes[1]->data = (char *)nodes[0]->data + 16;
        if (v == 5) {
            /* 2064 x 3 floats: 24 KiB a tensor, past fake_plan's 4 KiB steps */
            for (int k = 0; k < n; k++) nodes[k]->data = (void *)(uintptr_t)(0x10000000u + 0x100000u * (unsigned)k);
            for (int k = 0; k < 2; k++)
                for (int q = 1; q < 3; q++)
                    nodes[1 + k]->src[q]->data = (void *)(uintptr_t)(0x20000000u + 0x100000u * (unsigned)(2 * k + q));
        }
        const int want = v == 0 || v == 3 || v == 10 ? 2 : 1;
        int len = tg_cuda_fuse_len(c, nodes, n, 1, uses);
        CHECK_MSG(len == want, "case %d: fuse length %d, want %d", v, len, want);
        if (len == 2) {
            uint8_t writes[16] = {0};
            tg_cuda_group_writes(nodes, 1, len, writes);
            CHECK_MSG(writes[1] == 1, "case %d: the first norm's result not marked written", v);
        }
        tg_ctx_free(ctx);
    }
    mma_ctx_free(c);
}

TEST_MAIN(T(test_waves_keep_the_measured_batches), T(test_written_before), T(test_record_launch), T(test_waves_fix_the_second_wave_at_batch_67),
          T(test_choices_are_whole_rounds_within_the_grid), T(test_wide_blocks_for_few_rows), T(test_wide_blocks_in_clusters), T(test_embedding_head_fuses),
          T(test_kv_write_fuses_into_the_product), T(test_step_tail_fuses),
          T(test_scale_alone_rides_the_product), T(test_attention_key_groups), T(test_subsampling_front_fuses),
          T(test_norm_pair_fuses))
#else
TEST_MAIN_SKIPPED("built without the CUDA backend")
#endif
