/*
 * cuda_matmul.c: mul_mat at the encoder's shapes (438 frames × batch 1, 8,
 * 64; 1280 -> 5120 and 5120 -> 1280; BF16 weights, F32 activations) through
 * the backend, against cuBLASLt called directly in the same run on the same
 * BF16 operands (the ceiling). Target: >= 90% of the ceiling.
 *
 * Both sides are timed with CUDA events over 20 products in a row, after a
 * warm-up. The backend's time includes converting the F32 activations to
 * BF16 (a product's input is F32 in this runtime); the ceiling's does not.
 */
#include "cuda_common.h"

#ifdef TG_HAVE_CUDA
#include "backend/cuda/cuda_internal.h"

#define REPS 20

static double direct_ms(tg_cuda_ctx *c, int64_t K, int64_t N, int64_t M, CUdeviceptr A, CUdeviceptr B,
                        CUdeviceptr D) {
    const tg_cublaslt_api *lt = c->dev->lt;
    const tg_cu_api *cu = c->dev->cu;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulPreference_t pref;
    lt->cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    lt->cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    lt->cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    lt->cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, (uint64_t)K, (uint64_t)N, K);
    lt->cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, (uint64_t)K, (uint64_t)M, K);
    lt->cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, (uint64_t)N, (uint64_t)M, N);
    lt->cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = c->lt_ws_size;
    lt->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t res;
    int n = 0;
    lt->cublasLtMatmulAlgoGetHeuristic(c->dev->lt_handle, op, la, lb, ld, ld, pref, 1, &res, &n);
    float alpha = 1, beta = 0;
    CUevent e0, e1;
    cu->cuEventCreate(&e0, 0);
    cu->cuEventCreate(&e1, 0);
    double ms = -1;
    if (n > 0) {
        for (int i = 0; i < 3; i++)
            lt->cublasLtMatmul(c->dev->lt_handle, op, &alpha, (void *)A, la, (void *)B, lb, &beta, (void *)D, ld,
                               (void *)D, ld, &res.algo, (void *)c->lt_ws, res.workspaceSize, c->stream);
        cu->cuEventRecord(e0, c->stream);
        for (int i = 0; i < REPS; i++)
            lt->cublasLtMatmul(c->dev->lt_handle, op, &alpha, (void *)A, la, (void *)B, lb, &beta, (void *)D, ld,
                               (void *)D, ld, &res.algo, (void *)c->lt_ws, res.workspaceSize, c->stream);
        cu->cuEventRecord(e1, c->stream);
        cu->cuEventSynchronize(e1);
        float f = 0;
        cu->cuEventElapsedTime(&f, e0, e1);
        ms = f / REPS;
    }
    cu->cuEventDestroy(e0);
    cu->cuEventDestroy(e1);
    lt->cublasLtMatmulPreferenceDestroy(pref);
    lt->cublasLtMatrixLayoutDestroy(la);
    lt->cublasLtMatrixLayoutDestroy(lb);
    lt->cublasLtMatrixLayoutDestroy(ld);
    lt->cublasLtMatmulDescDestroy(op);
    return ms;
}

int main(void) {
    tg_backend *b = bench_cuda_or_skip("cuda_matmul");
    if (!b) return 0;
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const tg_cu_api *cu = c->dev->cu;
    static const int64_t batches[3] = {1, 8, 64};
    static const int64_t kn[2][2] = {{1280, 5120}, {5120, 1280}};
    for (int s = 0; s < 2; s++) {
        for (int bi = 0; bi < 3; bi++) {
            int64_t K = kn[s][0], N = kn[s][1], M = 438 * batches[bi];
            tg_ctx *ctx = tg_ctx_new();
            tg_tensor *w = tg_new_2d(ctx, TG_BF16, K, N), *x = tg_new_2d(ctx, TG_F32, K, M);
            tg_tensor *xb = tg_new_2d(ctx, TG_BF16, K, M);
            /* REPS products in one graph, each its own output: the graph's
             * replay is timed with events like the direct calls. */
            tg_graph *g = tg_graph_new(ctx);
            for (int r = 0; r < REPS; r++) BENCH_TRY(tg_graph_build(g, tg_mul_mat(ctx, w, x)));
            tg_buffer *buf = NULL;
            BENCH_TRY(tg_ctx_alloc_tensors(ctx, b, &buf));
            BENCH_TRY(bench_fill(w, 1));
            BENCH_TRY(bench_fill(x, 2));
            BENCH_TRY(bench_fill(xb, 2));
            for (int i = 0; i < 3; i++) BENCH_TRY(tg_backend_graph_compute(b, g));
            CUevent e0, e1;
            cu->cuEventCreate(&e0, 0);
            cu->cuEventCreate(&e1, 0);
            float best = 1e30f;
            for (int t = 0; t < 5; t++) {
                cu->cuEventRecord(e0, c->stream);
                BENCH_TRY(tg_backend_graph_compute(b, g));
                cu->cuEventRecord(e1, c->stream);
                cu->cuEventSynchronize(e1);
                float f = 0;
                cu->cuEventElapsedTime(&f, e0, e1);
                if (f < best) best = f;
            }
            double ours = best / REPS;
            double ceil_ms = direct_ms(c, K, N, M, (CUdeviceptr)w->data, (CUdeviceptr)xb->data,
                                       (CUdeviceptr)tg_graph_node(g, tg_graph_n_nodes(g) - 1)->data);
            double tflops = 2.0 * K * N * M / (ours * 1e-3) / 1e12;
            char name[64];
            snprintf(name, sizeof name, "mul_mat %lldx%lld M=%lld", (long long)K, (long long)N, (long long)M);
            bench_result(name, tflops, "TFLOP/s", 2.0 * K * N * M / (ceil_ms * 1e-3) / 1e12, ceil_ms / ours,
                         ">=0.90");
            cu->cuEventDestroy(e0);
            cu->cuEventDestroy(e1);
            tg_buffer_free(buf);
            tg_ctx_free(ctx);
        }
    }
    /* A layer norm feeding the product, as in every block of the model: the
     * norm stores BF16 for it (emit fusion). Ceiling: the norm alone (our
     * kernel, F32 out) plus cuBLASLt directly. */
    for (int bi = 1; bi < 3; bi++) {
        int64_t K = 1280, N = 5120, M = 438 * batches[bi];
        tg_ctx *ctx = tg_ctx_new();
        tg_tensor *w = tg_new_2d(ctx, TG_BF16, K, N), *x = tg_new_2d(ctx, TG_F32, K, M);
        tg_tensor *xb = tg_new_2d(ctx, TG_BF16, K, M);
        tg_tensor *g1 = tg_new_1d(ctx, TG_F32, K), *b1 = tg_new_1d(ctx, TG_F32, K);
        tg_graph *g = tg_graph_new(ctx), *gn = tg_graph_new(ctx);
        for (int r = 0; r < REPS; r++) {
            BENCH_TRY(tg_graph_build(g, tg_mul_mat(ctx, w, tg_layer_norm(ctx, x, g1, b1, 1e-5f))));
            BENCH_TRY(tg_graph_build(gn, tg_layer_norm(ctx, x, g1, b1, 1e-5f)));
        }
        tg_buffer *buf = NULL;
        BENCH_TRY(tg_ctx_alloc_tensors(ctx, b, &buf));
        BENCH_TRY(bench_fill(w, 1));
        BENCH_TRY(bench_fill(x, 2));
        BENCH_TRY(bench_fill(xb, 2));
        BENCH_TRY(bench_fill(g1, 3));
        BENCH_TRY(bench_fill(b1, 4));
        CUevent e0, e1;
        cu->cuEventCreate(&e0, 0);
        cu->cuEventCreate(&e1, 0);
        double t[2];
        tg_graph *gs[2] = {g, gn};
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < 3; i++) BENCH_TRY(tg_backend_graph_compute(b, gs[k]));
            float best = 1e30f;
            for (int r = 0; r < 5; r++) {
                cu->cuEventRecord(e0, c->stream);
                BENCH_TRY(tg_backend_graph_compute(b, gs[k]));
                cu->cuEventRecord(e1, c->stream);
                cu->cuEventSynchronize(e1);
                float f = 0;
                cu->cuEventElapsedTime(&f, e0, e1);
                if (f < best) best = f;
            }
            t[k] = best / REPS;
        }
        double ceil_ms = direct_ms(c, K, N, M, (CUdeviceptr)w->data, (CUdeviceptr)xb->data,
                                   (CUdeviceptr)tg_graph_node(g, tg_graph_n_nodes(g) - 1)->data) + t[1];
        char name[64];
        snprintf(name, sizeof name, "norm+mul_mat %lldx%lld M=%lld", (long long)K, (long long)N, (long long)M);
        double fl = 2.0 * K * N * M;
        bench_result(name, fl / (t[0] * 1e-3) / 1e12, "TFLOP/s", fl / (ceil_ms * 1e-3) / 1e12, ceil_ms / t[0],
                     ">=0.90");
        cu->cuEventDestroy(e0);
        cu->cuEventDestroy(e1);
        tg_buffer_free(buf);
        tg_ctx_free(ctx);
    }
    tg_backend_free(b);
    return 0;
}
#else
int main(void) {
    printf("cuda_matmul: skipped: built without the CUDA backend\n");
    return 0;
}
#endif
