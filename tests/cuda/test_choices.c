/*
 * test_choices.c: launch-shape choices the CUDA backend makes from sizes
 * alone, checked without a GPU (pure functions of cuda_internal.h).
 *
 * attn_decode's keys a warp (tg_cuda_attn_decode_kpw) on the H200's 132
 * SMs for the released model's decoder (8 heads, D = 128, BF16 caches: 16
 * keys a round; self-attention over 11-138 keys, cross-attention over 438):
 * the waves rule keeps the choices of the rule before it at the batch sizes
 * bench/README.md measured (1, 8, 32, 64), and at batch 67, where that rule
 * made a second wave of long blocks (step 1.626 ms against 1.498 with one
 * round a warp, measured), it takes one round a warp. Every choice is a
 * whole number of rounds and stays within the grid's 65535 chunks.
 * Skipped (and counted as passed) where the build has no CUDA backend.
 */
#include "check.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"

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

TEST_MAIN(T(test_waves_keep_the_measured_batches), T(test_waves_fix_the_second_wave_at_batch_67),
          T(test_choices_are_whole_rounds_within_the_grid))
#else
static void test_skipped_without_cuda(void) {
    printf("skipped: built without the CUDA backend\n");
    CHECK(1);
}
TEST_MAIN(T(test_skipped_without_cuda))
#endif
