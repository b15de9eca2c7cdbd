/*
 * cuda_bandwidth.c: norms and elementwise ops on 256 MiB tensors against the
 * device-to-device copy bandwidth measured in the same run (bytes read plus
 * bytes written). Target: >= 70% of the copy.
 *
 * Each op runs as a chain of 8 nodes (each reads the previous result) timed
 * with CUDA events around the graph compute, so launch and sync costs are
 * a small share of the time.
 */
#include "cuda_common.h"

#ifdef TG_HAVE_CUDA

#define CHAIN 8
#define ROW 1280
#define ROWS (64 * 1024 * 1024 / ROW)

typedef enum { B_ADD, B_MUL_BCAST, B_SCALE, B_SILU, B_NORM, B_SOFTMAX } bop;

int main(void) {
    tg_backend *b = bench_cuda_or_skip("cuda_bandwidth");
    if (!b) return 0;
    size_t bytes = (size_t)ROW * ROWS * 4;

    /* The ceiling: a device-to-device copy of the same size. */
    double copy_gbs = bench_copy_bytes_per_s(b, bytes, CHAIN) / 1e9;
    printf("device-to-device copy: %.0f GB/s (read + write)\n", copy_gbs);

    static const char *names[] = {"add (3 streams)", "mul, row broadcast", "scale", "silu", "layer_norm+affine",
                                  "soft_max scale+mask"};
    for (int op = B_ADD; op <= B_SOFTMAX; op++) {
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *x = tg_new_2d(ctx, TG_F32, ROW, ROWS), *y = tg_new_2d(ctx, TG_F32, ROW, ROWS);
        tg_tensor *row = tg_new_1d(ctx, TG_F32, ROW), *bias = tg_new_1d(ctx, TG_F32, ROW);
        tg_tensor *mask = tg_new_2d(ctx, TG_F32, ROW, ROWS);
        tg_tensor *h = x;
        double per_node_bytes = 2.0 * bytes;
        for (int i = 0; i < CHAIN; i++) {
            switch (op) {
            case B_ADD: h = tg_add(ctx, h, y); per_node_bytes = 3.0 * bytes; break;
            case B_MUL_BCAST: h = tg_mul(ctx, h, row); break;
            case B_SCALE: h = tg_scale(ctx, h, 0.999f); break;
            case B_SILU: h = tg_silu(ctx, h); break;
            case B_NORM: h = tg_layer_norm(ctx, h, row, bias, 1e-5f); break;
            case B_SOFTMAX: h = tg_soft_max(ctx, h, mask, 0.5f); per_node_bytes = 3.0 * bytes; break;
            }
        }
        tg_graph *g = tg_graph_new(ctx);
        BENCH_TRY(tg_graph_build(g, h));
        tg_buffer *buf = NULL;
        BENCH_TRY(tg_ctx_alloc_tensors(ctx, b, &buf));
        BENCH_TRY(bench_fill(x, 1));
        BENCH_TRY(bench_fill(y, 2));
        BENCH_TRY(bench_fill(row, 3));
        BENCH_TRY(bench_fill(bias, 4));
        BENCH_TRY(bench_fill(mask, 5));
        double ms = bench_graph_best_ms(b, g, 2, 5);
        double gbs = per_node_bytes * CHAIN / (ms * 1e-3) / 1e9;
        bench_result(names[op], gbs, "GB/s", copy_gbs, gbs / copy_gbs, ">=0.70");
        tg_buffer_free(buf);
        tg_ctx_free(ctx);
    }
    tg_backend_free(b);
    return 0;
}
#else
int main(void) {
    printf("cuda_bandwidth: skipped: built without the CUDA backend\n");
    return 0;
}
#endif
