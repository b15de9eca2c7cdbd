/*
 * test_pf_ahead.c: a decoder step's cross-attention K and V asked into L2
 * by the product before it (CT_CUDA_ATTN_PREFETCH_AHEAD=1,
 * tg_cuda_next_prefetch and mvm.cuh's mvm_prefetch_next): the cross
 * half of a decoder layer (the norm, the q product with its bias, the
 * attention over the encoder's BF16 K/V, leaves of the graph) against the
 * CPU with it on, at 1 and 8 rows; that only that product asks (one an
 * encode), never the self-attention's product, whose K and V a node of
 * the graph writes, except with =2, nor any product with the switch off.
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU; on the stand-in driver (ctest's cuda/pf_ahead_fake) it
 * checks the counts, not the results.
 *
 * Not here: what it saves (bench/levers.py, CT_CUDA_ATTN_PREFETCH_AHEAD).
 */
#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

static int64_t g_rows = 1;

/* The cross half of a decoder layer (cuda_compare.h) at 4 heads, 150
 * encoder frames, g_rows batch rows. */
static tg_tensor *build_cross(tg_ctx *ctx) { return cross_step_attention(ctx, 4, 150, g_rows, NULL); }

/* The self-attention half (cuda_compare.h): K and V are the set_rows'. */
static tg_tensor *build_self(tg_ctx *ctx) {
    tg_tensor *x = tg_new_3d(ctx, TG_F32, 128 * 4, 1, g_rows);
    return x ? kv_step_attention(ctx, x, 128, 4, 40, true) : NULL;
}

static int encodes_of(const tg_cuda_ctx *c) { return c->n_direct + c->n_graph_captures; }

static void test_cross_prefetch_matches_cpu(void) {
    tg_backend *be = cuda_with("CT_CUDA_ATTN_PREFETCH_AHEAD", "1");
    if (!be) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)be->impl;
    CHECK(c->attn_pf_ahead);
    const int64_t rows[] = {1, 8};
    for (int r = 0; r < 2; r++) {
        g_rows = rows[r];
        const int before = c->n_pf_ahead, enc = encodes_of(c);
        compare_with_cpu(be, build_cross, 4, 1e-5, g_rows == 1 ? "cross-attention, 1 row" : "cross-attention, 8 rows");
        CHECK_MSG(c->n_pf_ahead - before == encodes_of(c) - enc, "%d products asked in %d encodes",
                  c->n_pf_ahead - before, encodes_of(c) - enc);
    }
    /* the self-attention's K and V are computed in the graph: no asking */
    const int before = c->n_pf_ahead;
    g_rows = 1;
    compare_with_cpu(be, build_self, 3, 1e-5, "self-attention, 1 row");
    CHECK_MSG(c->n_pf_ahead == before, "%d products asked for computed K/V", c->n_pf_ahead - before);
    tg_backend_free(be);
}

/* =2: the self-attention's product asks for its cache too, and the
 * results hold (the newest row, which that product writes, read as
 * written). */
static void test_any_kv_matches_cpu(void) {
    tg_backend *be = cuda_with("CT_CUDA_ATTN_PREFETCH_AHEAD", "2");
    if (!be) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)be->impl;
    g_rows = 8;
    const int enc = encodes_of(c);
    compare_with_cpu(be, build_self, 4, 1e-5, "self-attention, 8 rows, =2");
    CHECK_MSG(c->n_pf_ahead == encodes_of(c) - enc, "%d products asked in %d encodes", c->n_pf_ahead,
              encodes_of(c) - enc);
    tg_backend_free(be);
}

static void test_off_asks_nothing(void) {
    tg_backend *be = cuda_with("CT_CUDA_ATTN_PREFETCH_AHEAD", "0");
    if (!be) return;
    tg_cuda_ctx *c = (tg_cuda_ctx *)be->impl;
    g_rows = 1;
    compare_with_cpu(be, build_cross, 2, 1e-5, "cross-attention, switch off");
    CHECK_MSG(c->n_pf_ahead == 0, "%d products asked", c->n_pf_ahead);
    tg_backend_free(be);
}

TEST_MAIN(T(test_cross_prefetch_matches_cpu), T(test_any_kv_matches_cpu), T(test_off_asks_nothing))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
