/*
 * test_cross_q.c: a decoder step's cross q product inside its clustered
 * attention (CT_CUDA_ATTN_CROSS_Q=1, attn_decode_clq_bf16; cuda_fusion.c's
 * cross_q_len, cuda_attention.c's tg_cuda_attn_cross_q_ok): the cross half
 * of a decoder layer (the norm, the q product with its bias, its heads as
 * a view, the attention over BF16 K/V) against the CPU with it on, at the
 * released model's shape (8 heads of 128, 438 frames: 7 chunks a row) and
 * others (6 chunks, whose 48 KB of dynamic shared memory needs the
 * launch's opt-in; 5 chunks; 8 batch rows); that it fuses once an encode
 * where a row's chunks run as a cluster (sm_90), and not where the q has
 * another reader, where the attention takes the wide block, or with the
 * switch off.
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU; on the stand-in driver (ctest's cuda/cross_q_fake) it
 * checks the counts, not the results.
 *
 * Not here: what it saves (bench/levers.py, CT_CUDA_ATTN_CROSS_Q).
 */
#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

static int64_t g_heads = 4, g_frames = 150, g_rows = 1;
static bool g_share_q = false;

/* The cross half of a decoder layer (cuda_compare.h); with g_share_q,
 * the attention's result plus q's add seen as its shape, so that the add
 * has a second reader. */
static tg_tensor *build_cross(tg_ctx *ctx) {
    tg_tensor *add = NULL, *att = cross_step_attention(ctx, g_heads, g_frames, g_rows, &add);
    if (!g_share_q || !att) return att;
    return tg_add(ctx, att, tg_reshape_4d(ctx, add, 128, g_heads, 1, g_rows));
}

/* One fused launch an encode where clusters exist, none elsewhere. */
static void expect_fused(const tg_cuda_ctx *c, int before, int enc_before, bool fused, const char *what) {
    const int encodes = c->n_direct + c->n_graph_captures - enc_before, got = c->n_attn_cross_q - before;
    const int want = fused && c->dev->props.clusters ? encodes : 0;
    CHECK_MSG(got == want, "%s: %d fused launches in %d encodes, %d expected", what, got, encodes, want);
}

static void case_matches(tg_backend *be, int64_t H, int64_t T, int64_t B, bool fused, const char *what) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)be->impl;
    g_heads = H, g_frames = T, g_rows = B;
    const int before = c->n_attn_cross_q, enc = c->n_direct + c->n_graph_captures;
    compare_with_cpu(be, build_cross, 4, 1e-5, what);
    expect_fused(c, before, enc, fused, what);
}

static void test_cross_q_matches_cpu(void) {
    tg_backend *be = cuda_with("CT_CUDA_ATTN_CROSS_Q", "1");
    if (!be) return;
    CHECK(((tg_cuda_ctx *)be->impl)->attn_cross_q);
    case_matches(be, 8, 438, 1, true, "8 heads, 438 frames, 1 row (7 chunks)");
    case_matches(be, 4, 300, 1, true, "4 heads, 300 frames, 1 row (5 chunks)");
    /* 6 chunks: 22 rows of K = 1024 a block, 48 KB of dynamic shared
     * memory beside the kernel's static part (the launch opts in) */
    case_matches(be, 8, 384, 1, true, "8 heads, 384 frames, 1 row (6 chunks)");
    /* one round of the wide block's warps takes 150 frames at 1 row */
    case_matches(be, 4, 150, 1, false, "4 heads, 150 frames, 1 row (wide)");
    case_matches(be, 4, 438, 8, true, "4 heads, 438 frames, 8 rows");
    /* 64 (head, row) pairs take the wide block, not a cluster */
    case_matches(be, 8, 438, 8, false, "8 heads, 438 frames, 8 rows (wide)");
    tg_backend_free(be);
}

static void test_cross_q_other_reader(void) {
    tg_backend *be = cuda_with("CT_CUDA_ATTN_CROSS_Q", "1");
    if (!be) return;
    g_share_q = true;
    case_matches(be, 8, 438, 1, false, "q read by another node too");
    g_share_q = false;
    tg_backend_free(be);
}

static void test_cross_q_off(void) {
    tg_backend *be = cuda_with("CT_CUDA_ATTN_CROSS_Q", "0");
    if (!be) return;
    case_matches(be, 8, 438, 1, false, "switch off");
    tg_backend_free(be);
}

TEST_MAIN(T(test_cross_q_matches_cpu), T(test_cross_q_other_reader), T(test_cross_q_off))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
