/*
 * cuda_attention.c: attention at the model's shapes (encoder: 438 frames,
 * 8 heads of 160, batch 8, relative-position bias as the mask; decoder step:
 * 1 query over a 256-entry cache, heads of 128, batch 8) on the tensor-core
 * kernel and on the F32 FMA kernel (CT_CUDA_ATTN_MMA=0), timed with CUDA
 * events. No target in the issue; this shows what the tensor cores buy.
 */
#include "cuda_common.h"

#ifdef TG_HAVE_CUDA

static double run_ms(bool mma, int64_t D, int64_t Tq, int64_t Tk, int64_t H, int64_t B) {
    if (!mma) setenv("CT_CUDA_ATTN_MMA", "0", 1);
    tg_backend *b = bench_cuda_or_skip("cuda_attention");
    unsetenv("CT_CUDA_ATTN_MMA");
    if (!b) return -1;
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *q = tg_new_4d(ctx, TG_F32, D, Tq, H, B), *k = tg_new_4d(ctx, TG_F32, D, Tk, H, B);
    tg_tensor *v = tg_new_4d(ctx, TG_F32, D, Tk, H, B), *m = tg_new_4d(ctx, TG_F32, Tk, Tq, H, 1);
    tg_graph *g = tg_graph_new(ctx);
    for (int r = 0; r < 10; r++) BENCH_TRY(tg_graph_build(g, tg_attention(ctx, q, k, v, m, 0.08f)));
    tg_buffer *buf = NULL;
    BENCH_TRY(tg_ctx_alloc_tensors(ctx, b, &buf));
    for (int i = 0; i < tg_graph_n_leafs(g); i++) BENCH_TRY(bench_fill(tg_graph_leaf(g, i), (uint64_t)i + 1));
    double best = bench_graph_best_ms(b, g, 3, 5);
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    tg_backend_free(b);
    return best / 10;
}

int main(void) {
    static const struct { const char *name; int64_t D, Tq, Tk, H, B; } shapes[] = {
        {"encoder 438x438, 8x160, B=8", 160, 438, 438, 8, 8},
        {"decoder step 1x256, 8x128, B=8", 128, 1, 256, 8, 8},
    };
    for (int i = 0; i < 2; i++) {
        double fma = run_ms(false, shapes[i].D, shapes[i].Tq, shapes[i].Tk, shapes[i].H, shapes[i].B);
        if (fma < 0) return 0;
        double mma = run_ms(true, shapes[i].D, shapes[i].Tq, shapes[i].Tk, shapes[i].H, shapes[i].B);
        double flop = 4.0 * shapes[i].D * shapes[i].Tq * shapes[i].Tk * shapes[i].H * shapes[i].B;
        char name[80];
        snprintf(name, sizeof name, "attention %s", shapes[i].name);
        printf("%s: tensor cores %.3f ms (%.1f TFLOP/s), f32 fma %.3f ms (%.1f TFLOP/s)\n", name, mma,
               flop / (mma * 1e-3) / 1e12, fma, flop / (fma * 1e-3) / 1e12);
        bench_result(name, flop / (mma * 1e-3) / 1e12, "TFLOP/s", flop / (fma * 1e-3) / 1e12, fma / mma,
                     "(speed-up)");
    }
    return 0;
}
#else
int main(void) {
    printf("cuda_attention: skipped: built without the CUDA backend\n");
    return 0;
}
#endif
