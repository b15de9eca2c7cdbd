/*
 * test_attn_mma.c: the encoder's attention on the tensor cores
 * (attention_mma.cu) against the CPU backend, on each of its paths: the
 * mask tile in 16-byte pieces or 4-byte copies, F32 or BF16 (the rel-pos
 * product stored for it), the key tiles over one group of warps or two,
 * Q loaded into registers or staged by cp.async; rel-pos views as the
 * encoder reads them, masked rows and rows unmasked in one group's keys.
 *
 * Every test prints "skipped: no CUDA device" and passes where there is no
 * driver or GPU.
 *
 * Not here: the encoder's attention inside larger graphs (test_kernels.c),
 * the decoder step's attention (test_attn_step.c), the choice of key
 * groups (test_choices.c).
 */
#include "check.h"
#include "cuda_compare.h"
#include "tg.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

/* The encoder's tensor-core attention on each of its paths against the
 * CPU: the mask tile in 16-byte pieces or 4-byte copies
 * (CT_CUDA_ATTN_MASK16=0), the key tiles over two groups of warps or one
 * (CT_CUDA_ATTN_GROUPS=0; these shapes have fewer blocks than an H100's
 * SMs, so two groups by default), the counters saying which ran. Not
 * here: a NaN score (the NMSE cannot compare NaN positions). */
static void test_attention_mma_paths_match_cpu(void) {
    static const build_fn fns[] = {build_attn_rel,         build_attn_rel150,      build_attn_mask_odd,
                                   build_attn_mask_keys,   build_attn_masked_rows, build_attn_mask_halves,
                                   build_attn_mask_halves_neg};
    static const char *names[] = {"rel-pos view, 70 frames",      "packed q/k/v, rel-pos view, 150 frames",
                                  "mask rows of 71 keys",         "mask over keys only",
                                  "fully masked rows",            "rows unmasked in one group's keys",
                                  "the same, negative scale"};
    for (int v = 0; v < 4; v++) {
        const bool m16 = !(v & 1), groups = !(v & 2);
        setenv("CT_CUDA_ATTN_MASK16", m16 ? "1" : "0", 1);
        tg_backend *b = cuda_with("CT_CUDA_ATTN_GROUPS", groups ? "1" : "0");
        unsetenv("CT_CUDA_ATTN_MASK16");
        if (!b) return;
        tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
        CHECK(c->attn_mask16 == m16 && c->attn_groups == groups);
        if (c->dev->props.tc_level < 2 || c->dev->props.sm_count < 12) {
            printf("  (no BF16 tensor cores or fewer than 12 SMs: skipped)\n");
            tg_backend_free(b);
            return;
        }
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
            const int n16 = c->n_attn_mask16, ng = c->n_attn_groups;
            char what[112];
            snprintf(what, sizeof what, "%s, %s, %s", names[i], m16 ? "16-byte mask" : "4-byte mask",
                     groups ? "2 key groups" : "1 key group");
            compare_with_cpu(b, fns[i], 2, 5e-4, what);
            CHECK_MSG((c->n_attn_mask16 > n16) == m16, "%s: %d encodes staged the mask in pieces", what,
                      c->n_attn_mask16 - n16);
            CHECK_MSG((c->n_attn_groups > ng) == groups, "%s: %d encodes on two key groups", what,
                      c->n_attn_groups - ng);
        }
        tg_backend_free(b);
    }
    /* CT_CUDA_ATTN_BD16=1: the rel-pos product, read only as the mask
     * through its shifted view, stores BF16 and the kernel stages BF16
     * pieces (9 a row, a key's offset 0-7 in the first); on two key groups
     * (these shapes) and on one (CT_CUDA_ATTN_GROUPS=0, as batch 64 runs) */
    static const build_fn bd[] = {build_attn_rel144, build_attn_rel150, build_attn_rel144_neg, build_attn_rel};
    static const char *bd_names[] = {"rel-pos view, 70 frames, 144 rows, BF16 mask",
                                     "packed q/k/v, rel-pos view, 150 frames, BF16 mask",
                                     "rel-pos view, 144 rows, negative scale, BF16 mask",
                                     "rel-pos view, 70 frames, 139 rows (F32 mask)"};
    for (int one = 0; one < 2; one++) {
        setenv("CT_CUDA_ATTN_BD16", "1", 1);
        tg_backend *b = cuda_with("CT_CUDA_ATTN_GROUPS", one ? "0" : "1");
        unsetenv("CT_CUDA_ATTN_BD16");
        if (!b) return;
        tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
        for (int i = 0; i < 4 && c->dev->props.tc_level >= 2 && c->dev->props.sm_count >= 12; i++) {
            const int nb = c->n_attn_mask_bf16, ng = c->n_attn_groups;
            char what[112];
            snprintf(what, sizeof what, "%s, %s", bd_names[i], one ? "1 key group" : "2 key groups");
            compare_with_cpu(b, bd[i], 2, 5e-4, what);
            /* 139 rows are not a multiple of 8: that product stays F32 */
            CHECK_MSG((c->n_attn_mask_bf16 > nb) == (i < 3) && (c->n_attn_groups > ng) == !one,
                      "%s: %d encodes read a BF16 mask, %d on two groups", what, c->n_attn_mask_bf16 - nb,
                      c->n_attn_groups - ng);
        }
        tg_backend_free(b);
    }
}

/* Attention without a mask over 100 keys (D = 128): the packed kernel
 * with no mask tile nor rows' table in its shared memory. */
static tg_tensor *build_attn_nomask(tg_ctx *ctx) {
    const int64_t D = 128, T = 100, H = 2;
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, T, H, 1), *k = tg_new_4d(ctx, TG_F32, D, T, H, 1);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, T, H, 1);
    return tg_attention(ctx, q, k, v, NULL, 0.088f);
}

/* Q's rows staged by cp.async ahead of the first key tile (the default,
 * CT_CUDA_ATTN_QSTAGE; here on one key group as batch 8 and more run:
 * CT_CUDA_ATTN_GROUPS=0) against the CPU, and the same bits as Q loaded
 * into registers (CT_CUDA_ATTN_QSTAGE=0): the same floats, rounded the
 * same way, rows past Tq zeros either way. Q is contiguous with 16-byte
 * rows in every shape here, so each encode stages it; the counters say
 * so. */
static void test_attention_q_staged(void) {
    static const build_fn fns[] = {build_attn_rel,        build_attn_rel150,      build_attn_rel144,
                                   build_attn_mask_odd,   build_attn_mask_keys,   build_attn_masked_rows,
                                   build_attn_mask_halves_neg, build_attn_nomask};
    static const char *names[] = {"rel-pos view, 70 frames",    "packed q/k/v, rel-pos view, 150 frames",
                                  "rel-pos view, 144 rows, BF16 mask", "mask rows of 71 keys",
                                  "mask over keys only",        "fully masked rows",
                                  "rows unmasked in one group's keys, negative scale", "no mask"};
    setenv("CT_CUDA_ATTN_GROUPS", "0", 1);
    tg_backend *on = cuda_or_skip(), *off = on ? cuda_with("CT_CUDA_ATTN_QSTAGE", "0") : NULL;
    unsetenv("CT_CUDA_ATTN_GROUPS");
    tg_cuda_ctx *c = on ? (tg_cuda_ctx *)on->impl : NULL, *d = off ? (tg_cuda_ctx *)off->impl : NULL;
    if (c && d && (c->dev->props.tc_level < 2 || c->dev->props.sm_count < 12)) {
        printf("  (no BF16 tensor cores or fewer than 12 SMs: skipped)\n");
    } else if (c && d) {
        CHECK(c->attn_qstage && !d->attn_qstage && !c->attn_groups && !d->attn_groups);
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
            const int nq = c->n_attn_qstage, nq_off = d->n_attn_qstage;
            char what[112];
            snprintf(what, sizeof what, "%s, Q staged", names[i]);
            compare_with_cpu(on, fns[i], 2, 5e-4, what);
            compare_cuda_exact(on, off, fns[i], what);
            CHECK_MSG(c->n_attn_qstage > nq && d->n_attn_qstage == nq_off, "%s: %d encodes staged Q, %d with it off",
                      what, c->n_attn_qstage - nq, d->n_attn_qstage - nq_off);
        }
    }
    tg_backend_free(off);
    tg_backend_free(on);
}

TEST_MAIN(T(test_attention_mma_paths_match_cpu), T(test_attention_q_staged))
#else
TEST_MAIN_WITHOUT_CUDA()
#endif
