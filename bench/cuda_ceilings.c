/*
 * cuda_ceilings.c: the two rates a floor is counted against, measured on the
 * card the run is on: the BF16 tensor-core product rate (cuBLASLt, F32
 * accumulation, BF16 result, 8192 x 8192 x 8192, the heuristic's first
 * algorithm for this card) and the device-to-device copy rate (1 GiB, bytes read plus
 * bytes written). The encoder's largest product (1280 -> 5120 over 64 clips
 * of 438 frames) is timed too, as the rate the model's own shapes allow.
 *
 * bench/gpu-vs-transformers.sh runs it in the same run as the engine and
 * transformers and divides the model's FLOPs and bytes (bench/floors.py) by
 * these rates: a floor from rates measured beside the times it bounds, not
 * from a datasheet.
 *
 * Usage: bench-cuda_ceilings [--json FILE]
 * Leaves out: FP8, sparsity, the L2 (every size here is far larger than it).
 */
#include "cuda_common.h"

#ifdef TG_HAVE_CUDA

#define REPS 10

/* Rate, FLOP/s, of D[M, N] = B[M, K] A[N, K]^T on random BF16 operands. */
static double product_rate(tg_backend *b, int64_t K, int64_t N, int64_t M) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *A = tg_new_2d(ctx, TG_BF16, K, N), *B = tg_new_2d(ctx, TG_BF16, K, M);
    tg_tensor *D = tg_new_2d(ctx, TG_BF16, N, M);
    tg_buffer *buf = NULL;
    BENCH_TRY(tg_ctx_alloc_tensors(ctx, b, &buf));
    BENCH_TRY(bench_fill(A, 1));
    BENCH_TRY(bench_fill(B, 2));
    CUdeviceptr outs[REPS];
    for (int i = 0; i < REPS; i++) outs[i] = (CUdeviceptr)D->data;
    double ms = bench_lt_ms(b, K, N, M, (CUdeviceptr)A->data, (CUdeviceptr)B->data, outs, REPS, CUDA_R_16BF);
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    if (ms <= 0)
        BENCH_TRY(tg_status_new(TG_ERR_UNSUPPORTED, "cuBLASLt has no BF16 algorithm for %lldx%lldx%lld, or it failed",
                                (long long)K, (long long)N, (long long)M));
    return 2.0 * (double)K * (double)N * (double)M / (ms * 1e-3);
}

int main(int argc, char **argv) {
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--json FILE]\n", argv[0]);
            return 2;
        }
    }
    tg_backend *b = bench_cuda_or_skip("cuda_ceilings");
    if (!b) return 0;
    double peak = product_rate(b, 8192, 8192, 8192);
    double model = product_rate(b, 1280, 5120, 64 * 438);
    double copy = bench_copy_bytes_per_s(b, (size_t)1 << 30, 4);
    bench_result("ceiling bf16 product 8192^3", peak / 1e12, "TFLOP/s", peak / 1e12, 1.0, "-");
    bench_result("ceiling bf16 product 1280x5120x28032", model / 1e12, "TFLOP/s", peak / 1e12, model / peak, "-");
    bench_result("ceiling copy 1 GiB (read + write)", copy / 1e12, "TB/s", copy / 1e12, 1.0, "-");
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            fprintf(stderr, "cuda_ceilings: cannot write %s\n", json);
            return 1;
        }
        fprintf(f, "{\"product_tflops\": %.3f, \"product_model_shape_tflops\": %.3f, \"copy_tbs\": %.4f}\n",
                peak / 1e12, model / 1e12, copy / 1e12);
        if (fclose(f)) {
            fprintf(stderr, "cuda_ceilings: cannot write %s\n", json);
            return 1;
        }
    }
    tg_backend_free(b);
    return 0;
}

#else
int main(void) {
    printf("cuda_ceilings: skipped: built without the CUDA backend\n");
    return 0;
}
#endif
