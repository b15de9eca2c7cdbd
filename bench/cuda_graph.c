/*
 * cuda_graph.c: a decoder-step-sized graph (200 small nodes) computed again
 * and again, replayed from a CUDA graph, next to the same graph launched
 * directly (CT_CUDA_GRAPHS=0). Reported per node, wall time of the whole
 * blocking compute (host work, launch, GPU, sync), with and without
 * programmatic dependent launch (sm_90). Target: <= 1 us per node replayed.
 *
 * The floors, measured in the same run: CUDA graphs of 200 dependent empty
 * kernels (probe.cu's nop) and of 200 minimal dependent ones (chain_step:
 * read what the one before wrote, write it back), captured and launched with
 * the driver API alone and waited for the same way. Nothing that runs 200
 * dependent kernels from a CUDA graph can beat them. Our own captured graph,
 * launched by the driver alone, splits the rest into the runtime's host work
 * per compute and our kernels' own time.
 */
#include "cuda_common.h"

#define NODES_HALF 100
#define ITERS 200

/* With graphs: our captured graph launched by the driver alone, per node
 * (GPU and cuGraphLaunch, none of the runtime's host work). */
static double g_exec_only_us = -1;

static double exec_only_us(tg_backend *b, int n);

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
    if (graphs && pdl) g_exec_only_us = exec_only_us(b, n);
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    tg_backend_free(b);
    return best / n;
}

#ifdef TG_HAVE_CUDA
#define CU_TRY(call)                                                              \
    do {                                                                          \
        CUresult r_ = (call);                                                     \
        if (r_ != CUDA_SUCCESS) {                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,         \
                    tg_cuda_result_text(r_));                                     \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

static double exec_only_us(tg_backend *b, int n) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const tg_cu_api *cu = c->dev->cu;
    CUgraphExec exec = NULL;
    for (int i = 0; i < CUDA_MAX_GRAPHS; i++)
        if (c->graphs[i].exec && c->graphs[i].n_replays > 0) exec = c->graphs[i].exec;
    if (!exec) return -1;
    double best = 1e30;
    for (int t = 0; t < 3; t++) {
        double t0 = bench_now_us();
        for (int i = 0; i < ITERS; i++) {
            CU_TRY(cu->cuGraphLaunch(exec, c->stream));
            BENCH_TRY(tg_backend_synchronize(b));
        }
        double us = (bench_now_us() - t0) / ITERS;
        if (us < best) best = us;
    }
    return best / n;
}

/* The floor: 2 * NODES_HALF dependent nop kernels in one CUDA graph (or,
 * with `work`, chain_step kernels each updating the 256 floats the one
 * before it wrote). */
static double floor_per_node_us(bool pdl, bool work) {
    tg_backend *b = bench_cuda_or_skip("cuda_graph");
    if (!b) return -1;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const tg_cu_api *cu = c->dev->cu;
    pdl = pdl && c->dev->props.cc_major >= 9;
    CUfunction fn;
    BENCH_TRY(tg_cuda_kernel(c->dev, "probe.cu", "", work ? "chain_step" : "nop", &fn));
    CUdeviceptr p = 0;
    CU_TRY(cu->cuMemAlloc(&p, 256 * sizeof(float)));
    CU_TRY(cu->cuMemsetD8Async(p, 0, 256 * sizeof(float), c->stream));
    tg_args_chain_step a = {.out = p};
    void *args[] = {&a};
    const int n = 2 * NODES_HALF;
    CU_TRY(cu->cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_RELAXED));
    for (int i = 0; i < n; i++) {
        CUlaunchAttribute at;
        CUlaunchConfig cfg;
        tg_cuda_launch_config(&cfg, &at, 1, 1, 1, 256, 0, c->stream, pdl);
        CU_TRY(cu->cuLaunchKernelEx(&cfg, fn, work ? args : NULL, NULL));
    }
    CUgraph graph;
    CUgraphExec exec;
    CU_TRY(cu->cuStreamEndCapture(c->stream, &graph));
    CU_TRY(cu->cuGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 5; i++) {
        CU_TRY(cu->cuGraphLaunch(exec, c->stream));
        BENCH_TRY(tg_backend_synchronize(b));
    }
    double best = 1e30;
    for (int t = 0; t < 3; t++) {
        double t0 = bench_now_us();
        for (int i = 0; i < ITERS; i++) {
            CU_TRY(cu->cuGraphLaunch(exec, c->stream));
            BENCH_TRY(tg_backend_synchronize(b)); /* the wait the backend's compute uses */
        }
        double us = (bench_now_us() - t0) / ITERS;
        if (us < best) best = us;
    }
    cu->cuGraphExecDestroy(exec);
    cu->cuGraphDestroy(graph);
    cu->cuMemFree(p);
    tg_backend_free(b);
    return best / n;
}
#else
static double floor_per_node_us(bool pdl, bool work) {
    (void)pdl;
    (void)work;
    return -1;
}

static double exec_only_us(tg_backend *b, int n) {
    (void)b;
    (void)n;
    return -1;
}
#endif

int main(void) {
    double direct = per_node_us(false, true);
    if (direct < 0) return 0;
    double replay_plain = per_node_us(true, false);
    double replay = per_node_us(true, true);
    double floor_plain = floor_per_node_us(false, false);
    double floor_pdl = floor_per_node_us(true, false);
    double work_pdl = floor_per_node_us(true, true);
    printf("direct launches: %.3f us per node; replay without programmatic dependent launch: %.3f us per node\n",
           direct, replay_plain);
    printf("our captured graph launched by the driver alone (no runtime host work): %.3f us per node\n",
           g_exec_only_us);
    printf("floor, 200 dependent kernels in one CUDA graph, driver API alone: empty %.3f us per node (%.3f without "
           "programmatic dependent launch), each updating 1 KiB the one before wrote %.3f\n", floor_pdl,
           floor_plain, work_pdl);
    bench_result("graph replay, 200 nodes", replay, "us/node", direct, replay / direct, "<=1us");
    if (floor_pdl > 0) {
        bench_result("  vs 200 empty kernels replayed", replay, "us/node", floor_pdl, floor_pdl / replay, "-");
        bench_result("  vs 200 minimal dependent kernels", replay, "us/node", work_pdl, work_pdl / replay, "-");
    }
    return 0;
}
