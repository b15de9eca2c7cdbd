/*
 * cuda_graph.c: a decoder-step-sized graph (200 small nodes) computed again
 * and again, replayed from a CUDA graph, next to the same graph launched
 * directly (CT_CUDA_GRAPHS=0). Reported per node, wall time of the whole
 * blocking compute (host work, launch, GPU, sync), with and without
 * programmatic dependent launch (sm_90). Target: <= 1 us per node replayed.
 */
#include "cuda_common.h"

#define NODES_HALF 100
#define ITERS 200

static double per_node_us(bool graphs, bool pdl) {
    if (!graphs) setenv("CT_CUDA_GRAPHS", "0", 1);
    if (!pdl) setenv("CT_CUDA_PDL", "0", 1);
    tg_backend *b = bench_cuda_or_skip("cuda_graph");
    unsetenv("CT_CUDA_GRAPHS");
    unsetenv("CT_CUDA_PDL");
    if (!b) return -1;
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 64, 4), *y = x;
    for (int i = 0; i < NODES_HALF; i++) y = tg_mul(ctx, tg_add(ctx, y, x), tg_new_1d(ctx, TG_F32, 64));
    tg_graph *g = tg_graph_new(ctx);
    BENCH_TRY(tg_graph_build(g, y));
    tg_buffer *buf = NULL;
    BENCH_TRY(tg_ctx_alloc_tensors(ctx, b, &buf));
    for (int i = 0; i < tg_graph_n_leafs(g); i++) BENCH_TRY(bench_fill(tg_graph_leaf(g, i), (uint64_t)i + 1));
    for (int i = 0; i < 5; i++) BENCH_TRY(tg_backend_graph_compute(b, g));
    double best = 1e30;
    for (int t = 0; t < 3; t++) {
        double t0 = bench_now_us();
        for (int i = 0; i < ITERS; i++) BENCH_TRY(tg_backend_graph_compute(b, g));
        double us = (bench_now_us() - t0) / ITERS;
        if (us < best) best = us;
    }
    int n = tg_graph_n_nodes(g);
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    tg_backend_free(b);
    return best / n;
}

int main(void) {
    double direct = per_node_us(false, true);
    if (direct < 0) return 0;
    double replay_plain = per_node_us(true, false);
    double replay = per_node_us(true, true);
    printf("direct launches: %.3f us per node; replay without programmatic dependent launch: %.3f us per node\n",
           direct, replay_plain);
    bench_result("graph replay, 200 nodes", replay, "us/node", direct, replay / direct, "<=1us");
    return 0;
}
