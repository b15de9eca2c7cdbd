/*
 * cuda_conv.c: the three conv_2d nodes of the encoder's subsampling (spec
 * 2.1) at the full size, one 35 s clip (3500 frames of 128 mels) and a batch
 * of 8, through the backend, against their floors: the bytes that must move
 * (input, kernel, result once each) at the device-to-device copy bandwidth
 * measured in the same run, or the FLOPs at the H200's nominal f32 FMA peak
 * (67 TFLOP/s; the 1x1 convs run as f32 cuBLASLt products, since conv_2d has
 * no reduced-precision request), whichever is longer.
 *
 * Each graph holds REPS copies of the node (each its own result), timed with
 * CUDA events after a warm-up; the time per node is reported.
 */
#include "cuda_common.h"

#ifdef TG_HAVE_CUDA

#define REPS 5
#define F32_PEAK 67e12

typedef struct shape {
    const char *name;
    int64_t k[4], x[3]; /* kernel [KW, KH, Cin, Cout]; input [W, H, Cin] (batch apart) */
    int s, p;
} shape;

static double run_ms(tg_backend *b, const shape *sh, int64_t B) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *k = tg_new_4d(ctx, TG_F32, sh->k[0], sh->k[1], sh->k[2], sh->k[3]);
    tg_tensor *x = tg_new_4d(ctx, TG_F32, sh->x[0], sh->x[1], sh->x[2], B);
    tg_graph *g = tg_graph_new(ctx);
    for (int r = 0; r < REPS; r++) {
        tg_tensor *o = tg_conv_2d(ctx, k, x, sh->s, sh->s, sh->p, sh->p);
        if (!o) BENCH_TRY(tg_ctx_check(ctx));
        o->flags |= TG_FLAG_OUTPUT;
        BENCH_TRY(tg_graph_build(g, o));
    }
    tg_buffer *buf = NULL;
    BENCH_TRY(tg_ctx_alloc_tensors(ctx, b, &buf));
    for (int i = 0; i < tg_graph_n_leafs(g); i++) BENCH_TRY(bench_fill(tg_graph_leaf(g, i), (uint64_t)i + 1));
    double best = bench_graph_best_ms(b, g, 2, 5);
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    return best / REPS;
}

int main(void) {
    tg_backend *b = bench_cuda_or_skip("cuda_conv");
    if (!b) return 0;
    double bw = bench_copy_bytes_per_s(b, (size_t)256 << 20, 1);
    printf("device-to-device copy: %.0f GB/s (read + write)\n", bw / 1e9);
    static const shape shapes[] = {
        {"conv0 3x3 s2 1->256 128x3500", {3, 3, 1, 256}, {128, 3500, 1}, 2, 1},
        {"1x1 256->256 32x875", {1, 1, 256, 256}, {32, 875, 256}, 1, 0},
        {"1x1 256->256 16x438", {1, 1, 256, 256}, {16, 438, 256}, 1, 0},
    };
    static const int64_t batches[] = {1, 8};
    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
        int64_t B = batches[bi];
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const shape *sh = &shapes[i];
            int64_t ow = (sh->x[0] + 2 * sh->p - sh->k[0]) / sh->s + 1;
            int64_t oh = (sh->x[1] + 2 * sh->p - sh->k[1]) / sh->s + 1;
            double out = (double)ow * oh * sh->k[3] * B, in = (double)sh->x[0] * sh->x[1] * sh->x[2] * B;
            double bytes = 4.0 * (out + in + (double)sh->k[0] * sh->k[1] * sh->k[2] * sh->k[3]);
            double flop = 2.0 * out * sh->k[0] * sh->k[1] * sh->k[2];
            double floor_ms = 1e3 * (bytes / bw > flop / F32_PEAK ? bytes / bw : flop / F32_PEAK);
            double ms = run_ms(b, sh, B);
            char name[96];
            snprintf(name, sizeof name, "conv_2d %s B=%lld", sh->name, (long long)B);
            printf("%s: %.4f ms (%.1f TFLOP/s, %.0f GB/s); floor %.4f ms (%.0f MB at the copy, %.2f GFLOP at f32 peak)\n",
                   name, ms, flop / (ms * 1e-3) / 1e12, bytes / (ms * 1e-3) / 1e9, floor_ms, bytes / 1e6, flop / 1e9);
            bench_result(name, ms, "ms", floor_ms, floor_ms / ms, "(floor)");
        }
    }
    tg_backend_free(b);
    return 0;
}
#else
int main(void) {
    printf("cuda_conv: skipped: built without the CUDA backend\n");
    return 0;
}
#endif
