/*
 * cuda_matmul.c: mul_mat at the encoder's shapes (438 frames × batch 1, 8,
 * 64; 1280 -> 5120 and 5120 -> 1280; BF16 weights) through the backend,
 * against cuBLASLt called directly in the same run on the same BF16 operands
 * (the ceiling). Target: >= 90% of the ceiling. Two ways in: plain F32
 * activations (a graph input), and the model's way, activations made by a
 * node in front of the product (produced() below).
 *
 * Both sides are timed with CUDA events over 20 products in a row, after a
 * warm-up, each product writing its own output (the ceiling's calls write
 * the same 20 outputs in turn). The backend's time includes converting the
 * F32 activations to BF16 (a product's input is F32 in this runtime); the
 * ceiling's does not. That pass is timed alone too (the backend's own
 * conversion kernel, same operands): the ceiling plus it is the floor for a
 * product whose activations arrive in F32, reported as a second row.
 */
#include "cuda_common.h"

#ifdef TG_HAVE_CUDA

#define REPS 20

typedef struct exec_arg {
    const tg_cu_api *cu;
    CUgraphExec exec;
} exec_arg;

static void exec_step(void *arg, CUstream s) {
    exec_arg *a = arg;
    a->cu->cuGraphLaunch(a->exec, s);
}

/* The backend's F32 -> BF16 conversion pass over the activations, alone, ms
 * per pass. Launched as the backend launches it: REPS in a row captured into
 * a CUDA graph, with programmatic dependent launch where the backend uses
 * it. */
static double convert_ms(tg_backend *b, const tg_tensor *x, const tg_tensor *xb) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const tg_cu_api *cu = c->dev->cu;
    CUfunction fn;
    BENCH_TRY(tg_cuda_kernel(c->dev, "copy.cu", "", "cvt_f32_16_c4", &fn));
    tg_args_cvt_f32_16_c4 a = {
        .d = (uint64_t)(uintptr_t)xb->data, .s = (uint64_t)(uintptr_t)x->data, .n4 = tg_nelements(x) / 4, .to_bf16 = 1};
    void *args[] = {&a};
    CUlaunchAttribute at;
    CUlaunchConfig cfg;
    tg_cuda_launch_config(&cfg, &at, tg_cuda_grid(c, a.n4, 256), 1, 1, 256, 0, c->stream, c->use_pdl);
    CUgraph graph = NULL;
    exec_arg e = {cu, NULL};
    bool ok = cu->cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS;
    for (int i = 0; i < REPS && ok; i++) ok = cu->cuLaunchKernelEx(&cfg, fn, args, NULL) == CUDA_SUCCESS;
    ok = cu->cuStreamEndCapture(c->stream, &graph) == CUDA_SUCCESS && ok;
    ok = ok && cu->cuGraphInstantiate(&e.exec, graph, 0) == CUDA_SUCCESS;
    if (!ok) BENCH_TRY(tg_status_new(TG_ERR_DEVICE, "capturing the conversion pass"));
    double ms = bench_gpu_best_ms(b, 1, 5, exec_step, &e) / REPS;
    cu->cuGraphExecDestroy(e.exec);
    cu->cuGraphDestroy(graph);
    return ms;
}

/* The outputs of the graph's mul_mat nodes, in order (at most REPS). */
static int product_outputs(tg_graph *g, CUdeviceptr *out) {
    int n = 0;
    for (int i = 0; i < tg_graph_n_nodes(g) && n < REPS; i++)
        if (tg_graph_node(g, i)->op == TG_OP_MUL_MAT) out[n++] = (CUdeviceptr)tg_graph_node(g, i)->data;
    return n;
}

static const int64_t batches[3] = {1, 8, 64};
static const int64_t kn[2][2] = {{1280, 5120}, {5120, 1280}};

/* Products of F32 activations handed in as a graph input. */
static void plain(tg_backend *b, int64_t K, int64_t N, int64_t M) {
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *w = tg_new_2d(ctx, TG_BF16, K, N), *x = tg_new_2d(ctx, TG_F32, K, M);
    tg_tensor *xb = tg_new_2d(ctx, TG_BF16, K, M);
    /* REPS products in one graph, each its own output: the graph's replay is
     * timed with events like the direct calls. */
    tg_graph *g = tg_graph_new(ctx);
    for (int r = 0; r < REPS; r++) BENCH_TRY(tg_graph_build(g, tg_mul_mat(ctx, w, x)));
    tg_buffer *buf = NULL;
    BENCH_TRY(tg_ctx_alloc_tensors(ctx, b, &buf));
    BENCH_TRY(bench_fill(w, 1));
    BENCH_TRY(bench_fill(x, 2));
    BENCH_TRY(bench_fill(xb, 2));
    double ours = bench_graph_best_ms(b, g, 3, 5) / REPS;
    CUdeviceptr outs[REPS];
    if (product_outputs(g, outs) != REPS) BENCH_TRY(tg_status_new(TG_ERR_INTERNAL, "product outputs"));
    double ceil_ms = bench_lt_ms(b, K, N, M, (CUdeviceptr)w->data, (CUdeviceptr)xb->data, outs, REPS, CUDA_R_32F);
    double conv = convert_ms(b, x, xb);
    double fl = 2.0 * K * N * M;
    printf("mul_mat %lldx%lld M=%lld: ours %.1f us, cuBLASLt %.1f us, conversion pass alone %.1f us "
           "-> floor ratio %.3f\n", (long long)K, (long long)N, (long long)M, ours * 1e3, ceil_ms * 1e3,
           conv * 1e3, ceil_ms / (ceil_ms + conv));
    char name[64];
    snprintf(name, sizeof name, "mul_mat %lldx%lld M=%lld", (long long)K, (long long)N, (long long)M);
    bench_result(name, fl / (ours * 1e-3) / 1e12, "TFLOP/s", fl / (ceil_ms * 1e-3) / 1e12, ceil_ms / ours,
                 ">=0.90");
    bench_result("  vs cuBLASLt+conversion floor", fl / (ours * 1e-3) / 1e12, "TFLOP/s",
                 fl / ((ceil_ms + conv) * 1e-3) / 1e12, (ceil_ms + conv) / ours, "-");
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
}

/* The model's path: the product's activations come from a node, which
 * stores BF16 for it (emit fusion): a layer norm in front of the
 * 1280 -> 5120 products (the attention and feed-forward inputs), the SiLU in
 * front of 5120 -> 1280 (the feed-forward's second product). Ceiling: that
 * node alone (our kernel, F32 out) plus cuBLASLt directly. */
static void produced(tg_backend *b, int64_t K, int64_t N, int64_t M) {
    bool norm = K == 1280;
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *w = tg_new_2d(ctx, TG_BF16, K, N), *x = tg_new_2d(ctx, TG_F32, K, M);
    tg_tensor *xb = tg_new_2d(ctx, TG_BF16, K, M);
    tg_tensor *g1 = tg_new_1d(ctx, TG_F32, K), *b1 = tg_new_1d(ctx, TG_F32, K);
    tg_graph *g = tg_graph_new(ctx), *gn = tg_graph_new(ctx);
    for (int r = 0; r < REPS; r++) {
        tg_tensor *h = norm ? tg_layer_norm(ctx, x, g1, b1, 1e-5f) : tg_silu(ctx, x);
        BENCH_TRY(tg_graph_build(g, tg_mul_mat(ctx, w, h)));
        BENCH_TRY(tg_graph_build(gn, norm ? tg_layer_norm(ctx, x, g1, b1, 1e-5f) : tg_silu(ctx, x)));
    }
    tg_buffer *buf = NULL;
    BENCH_TRY(tg_ctx_alloc_tensors(ctx, b, &buf));
    BENCH_TRY(bench_fill(w, 1));
    BENCH_TRY(bench_fill(x, 2));
    BENCH_TRY(bench_fill(xb, 2));
    BENCH_TRY(bench_fill(g1, 3));
    BENCH_TRY(bench_fill(b1, 4));
    double ours = bench_graph_best_ms(b, g, 3, 5) / REPS;
    double node = bench_graph_best_ms(b, gn, 3, 5) / REPS;
    CUdeviceptr outs[REPS];
    if (product_outputs(g, outs) != REPS) BENCH_TRY(tg_status_new(TG_ERR_INTERNAL, "product outputs"));
    double mm_ms = bench_lt_ms(b, K, N, M, (CUdeviceptr)w->data, (CUdeviceptr)xb->data, outs, REPS, CUDA_R_32F);
    double ceil_ms = mm_ms + node;
    const char *what = norm ? "norm" : "silu";
    printf("%s->mul_mat %lldx%lld M=%lld: ours %.1f us, %s alone %.1f us + cuBLASLt %.1f us\n", what, (long long)K,
           (long long)N, (long long)M, ours * 1e3, what, node * 1e3, mm_ms * 1e3);
    char name[64];
    snprintf(name, sizeof name, "%s->mul_mat %lldx%lld M=%lld", what, (long long)K, (long long)N, (long long)M);
    double fl = 2.0 * K * N * M;
    bench_result(name, fl / (ours * 1e-3) / 1e12, "TFLOP/s", fl / (ceil_ms * 1e-3) / 1e12, ceil_ms / ours, ">=0.90");
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
}

int main(void) {
    tg_backend *b = bench_cuda_or_skip("cuda_matmul");
    if (!b) return 0;
    for (int s = 0; s < 2; s++)
        for (int bi = 0; bi < 3; bi++) plain(b, kn[s][0], kn[s][1], 438 * batches[bi]);
    for (int s = 0; s < 2; s++)
        for (int bi = 0; bi < 3; bi++) produced(b, kn[s][0], kn[s][1], 438 * batches[bi]);
    tg_backend_free(b);
    return 0;
}
#else
int main(void) {
    printf("cuda_matmul: skipped: built without the CUDA backend\n");
    return 0;
}
#endif
