/*
 * cuda_lt_candidates.c: how far cuBLASLt's first heuristic choice is from
 * the fastest of the algorithms it offers, at the released model's product
 * shapes: a decoder step at batch 32 and 64 (the products that run on
 * cuBLASLt, above mul_mat_vec_mma's 16 columns) and the encoder at batch 1,
 * 8 and 64 (438 frames a clip). The engine takes the first choice
 * (cuda_matmul.c, mm_plan); this program tells whether timing the others
 * once per shape would pay.
 *
 * Each product is set up as the engine sets it up: BF16 operands (random,
 * bench_fill), F32
 * accumulation, an F32 result with the F32 bias epilogue, the engine's
 * workspace cap. Weights rotate over copies filling at least 192 MB, so a
 * decoder step's 2-32 MB matrices are read from memory, not from the 50 MB
 * L2, as in the model, where a step's 260 MB of weights pass through once.
 * Each candidate: one checked product, then the best of 5 timed runs of a
 * product per copy.
 *
 * Prints per shape the first choice's time, the fastest candidate's (and
 * its index and waves count), and the weight read rate of each; the first
 * choice split over K into 2-8 parts where its algorithm takes that, the
 * fastest split against it; then a RESULT line (gpu-check's table): the
 * first choice in us, the fastest offered as its ceiling.
 * Usage: bench-cuda_lt_candidates [--max N] (candidates asked for, <= 32)
 * Leaves out: epilogues other than the bias, the residual's C operand.
 */
#include "cuda_common.h"

#ifdef TG_HAVE_CUDA

#define MAX_CAND 32
#define POOL_BYTES ((size_t)192 << 20)

typedef struct shape {
    const char *name;
    int64_t K, N, M; /* D[N x M] = W[N x K] x[K x M] */
} shape;

typedef struct cand_arg {
    tg_cuda_ctx *c;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    const cublasLtMatmulAlgo_t *algo;
    size_t ws;
    CUdeviceptr A0, B, D;
    size_t a_bytes;
    int copies;
} cand_arg;

static void cand_step(void *arg, CUstream s) {
    cand_arg *r = arg;
    const tg_cublaslt_api *lt = r->c->dev->lt;
    float alpha = 1, beta = 0;
    for (int i = 0; i < r->copies; i++)
        lt->cublasLtMatmul(r->c->dev->lt_handle, r->op, &alpha, (void *)(r->A0 + (CUdeviceptr)i * r->a_bytes), r->la,
                           (void *)r->B, r->lb, &beta, (void *)r->D, r->ld, (void *)r->D, r->ld, r->algo,
                           (void *)r->c->lt_ws, r->ws, s);
}

/* One product with r's algorithm, unchecked for speed: whether cuBLASLt
 * takes it. */
static bool cand_once(const cand_arg *r) {
    float alpha = 1, beta = 0;
    return r->c->dev->lt->cublasLtMatmul(r->c->dev->lt_handle, r->op, &alpha, (void *)r->A0, r->la, (void *)r->B,
                                         r->lb, &beta, (void *)r->D, r->ld, (void *)r->D, r->ld, r->algo,
                                         (void *)r->c->lt_ws, r->ws, r->c->stream) == CUBLAS_STATUS_SUCCESS;
}

static void run_shape(tg_backend *b, const shape *sh, int max_cand, CUdeviceptr pool, CUdeviceptr xs,
                      CUdeviceptr bias) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const tg_cu_api *cu = c->dev->cu;
    const tg_cublaslt_api *lt = c->dev->lt;
    cand_arg r = {.c = c, .A0 = pool, .a_bytes = (size_t)(sh->K * sh->N * 2)};
    r.a_bytes = (r.a_bytes + 255) & ~(size_t)255;
    r.copies = (int)(POOL_BYTES / r.a_bytes);
    if (r.copies < 2) r.copies = 2;
    if (r.copies > 128) r.copies = 128; /* 192 MB of copies: 4x the L2 even at 2 MB a matrix */
    r.B = xs;
    if (cu->cuMemAlloc(&r.D, (size_t)(sh->N * sh->M * 4)))
        BENCH_TRY(tg_status_new(TG_ERR_NO_MEMORY, "%s: result", sh->name));
    cublasLtMatmulPreference_t pref;
    lt->cublasLtMatmulDescCreate(&r.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t bt = CUDA_R_32F;
    const void *bp = (const void *)bias;
    lt->cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    lt->cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    lt->cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
    lt->cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    lt->cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp);
    lt->cublasLtMatrixLayoutCreate(&r.la, CUDA_R_16BF, (uint64_t)sh->K, (uint64_t)sh->N, sh->K);
    lt->cublasLtMatrixLayoutCreate(&r.lb, CUDA_R_16BF, (uint64_t)sh->K, (uint64_t)sh->M, sh->K);
    lt->cublasLtMatrixLayoutCreate(&r.ld, CUDA_R_32F, (uint64_t)sh->N, (uint64_t)sh->M, sh->N);
    lt->cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = c->lt_ws_size;
    lt->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t res[MAX_CAND];
    int n = 0;
    if (lt->cublasLtMatmulAlgoGetHeuristic(c->dev->lt_handle, r.op, r.la, r.lb, r.ld, r.ld, pref, max_cand, res, &n))
        n = 0;
    double first = -1, best = 1e30;
    int best_i = -1, ok_n = 0;
    for (int i = 0; i < n; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        r.algo = &res[i].algo;
        r.ws = res[i].workspaceSize;
        if (!cand_once(&r)) continue;
        double ms = bench_gpu_best_ms(b, 1, 5, cand_step, &r) / r.copies;
        ok_n++;
        if (i == 0) first = ms;
        if (ms < best) best = ms, best_i = i;
    }
    double gb = (double)(sh->K * sh->N * 2) / 1e9;
    if (first > 0)
        printf("%-28s K %5lld N %5lld M %5lld  %2d cand  first %8.4f ms (%5.2f TB/s, waves %.2f)  best #%d %8.4f ms "
               "(%5.2f TB/s, waves %.2f)  first/best %.3f\n",
               sh->name, (long long)sh->K, (long long)sh->N, (long long)sh->M, ok_n, first, gb / first,
               res[0].wavesCount, best_i, best, gb / best, res[best_i].wavesCount, first / best);
    else
        printf("%-28s no usable first candidate (%d offered)\n", sh->name, n);
    /* The first choice split over K where its algorithm takes that (2-8
     * parts, the partial sums reduced in F32 or in place: whichever
     * cublasLtMatmulAlgoCheck passes within the workspace cap). The
     * encoder's products at batch 1 and 8 (M = 438, 3504) make few tiles
     * on 132 SMs: a 1280-row result at batch 8 is ~140 tiles of 128 x 256,
     * two waves with the second nearly empty (twentieth session,
     * bench/README.md); a split fills them. */
    if (first > 0) {
        int32_t sup = 0;
        size_t sz = 0;
        if (lt->cublasLtMatmulAlgoCapGetAttribute(&res[0].algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &sup, sizeof sup,
                                                  &sz) != CUBLAS_STATUS_SUCCESS)
            sup = 0;
        static const int32_t parts[] = {2, 3, 4, 6, 8};
        static const uint32_t schemes[] = {CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, CUBLASLT_REDUCTION_SCHEME_INPLACE};
        double split = -1;
        int32_t split_k = 0;
        for (size_t j = 0; sup && j < sizeof parts / sizeof *parts; j++) {
            for (size_t q = 0; q < sizeof schemes / sizeof *schemes; q++) {
                cublasLtMatmulAlgo_t a2 = res[0].algo;
                cublasLtMatmulHeuristicResult_t chk;
                memset(&chk, 0, sizeof chk);
                if (lt->cublasLtMatmulAlgoConfigSetAttribute(&a2, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &parts[j],
                                                             sizeof parts[j]) != CUBLAS_STATUS_SUCCESS ||
                    lt->cublasLtMatmulAlgoConfigSetAttribute(&a2, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &schemes[q],
                                                             sizeof schemes[q]) != CUBLAS_STATUS_SUCCESS ||
                    lt->cublasLtMatmulAlgoCheck(c->dev->lt_handle, r.op, r.la, r.lb, r.ld, r.ld, &a2, &chk) !=
                        CUBLAS_STATUS_SUCCESS ||
                    chk.state != CUBLAS_STATUS_SUCCESS || chk.workspaceSize > c->lt_ws_size)
                    continue;
                r.algo = &a2;
                r.ws = chk.workspaceSize;
                if (!cand_once(&r)) continue;
                double ms = bench_gpu_best_ms(b, 1, 5, cand_step, &r) / r.copies;
                if (split < 0 || ms < split) split = ms, split_k = parts[j];
                break; /* one scheme a split */
            }
        }
        if (!sup) printf("%-28s split over K: the first choice does not take it\n", sh->name);
        else if (split < 0) printf("%-28s split over K: no split passed the check\n", sh->name);
        else
            printf("%-28s split over K: best %d parts %8.4f ms  first/split %.3f\n", sh->name, split_k, split,
                   first / split);
    }
    if (first > 0) {
        /* gpu-check's table: the first choice against the fastest offered */
        char rname[64];
        snprintf(rname, sizeof rname, "lt first, %s", sh->name);
        bench_result(rname, 1e3 * first, "us", 1e3 * best, best / first, "-");
    }
    lt->cublasLtMatmulPreferenceDestroy(pref);
    lt->cublasLtMatrixLayoutDestroy(r.la);
    lt->cublasLtMatrixLayoutDestroy(r.lb);
    lt->cublasLtMatrixLayoutDestroy(r.ld);
    lt->cublasLtMatmulDescDestroy(r.op);
    cu->cuMemFree(r.D);
}

int main(int argc, char **argv) {
    int max_cand = 16;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max") && i + 1 < argc) max_cand = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--max N]\n", argv[0]);
            return 2;
        }
    }
    if (max_cand < 1 || max_cand > MAX_CAND) {
        fprintf(stderr, "%s: --max wants 1..%d\n", argv[0], MAX_CAND);
        return 2;
    }
    tg_backend *b = bench_cuda_or_skip("cuda_lt_candidates");
    if (!b) return 0;
    /* random operands (bench_fill): the weight pool, the activations of the
     * largest shape (5120 x 64 clips of 438 frames), the bias */
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *w = tg_new_1d(ctx, TG_BF16, (int64_t)(POOL_BYTES / 2));
    tg_tensor *x = tg_new_1d(ctx, TG_BF16, (int64_t)5120 * 64 * 438);
    tg_tensor *bs = tg_new_1d(ctx, TG_F32, 16384);
    tg_buffer *buf = NULL;
    BENCH_TRY(tg_ctx_alloc_tensors(ctx, b, &buf));
    BENCH_TRY(bench_fill(w, 1));
    BENCH_TRY(bench_fill(x, 2));
    BENCH_TRY(bench_fill(bs, 3));
    CUdeviceptr pool = (CUdeviceptr)w->data, xs = (CUdeviceptr)x->data, bias = (CUdeviceptr)bs->data;
    static const int64_t dec_b[] = {32, 64}, enc_b[] = {1, 8, 64};
    char name[64];
    for (int i = 0; i < 2; i++) {
        int64_t B = dec_b[i];
        const shape s[] = {{"step q/k/v", 1024, 3072, B}, {"step self o / cross q, o", 1024, 1024, B},
                           {"step ffn up", 1024, 4096, B}, {"step ffn down", 4096, 1024, B},
                           {"step logits", 1024, 16384, B}};
        for (size_t j = 0; j < sizeof s / sizeof *s; j++) {
            shape t = s[j];
            snprintf(name, sizeof name, "b%lld %s", (long long)B, s[j].name);
            t.name = name;
            run_shape(b, &t, max_cand, pool, xs, bias);
        }
    }
    for (int i = 0; i < 3; i++) {
        int64_t M = enc_b[i] * 438;
        const shape s[] = {{"enc q/k/v", 1280, 3840, M}, {"enc o / pw2", 1280, 1280, M}, {"enc ffn up", 1280, 5120, M},
                           {"enc ffn down", 5120, 1280, M}, {"enc pw1", 1280, 2560, M}};
        for (size_t j = 0; j < sizeof s / sizeof *s; j++) {
            shape t = s[j];
            snprintf(name, sizeof name, "b%lld %s", (long long)enc_b[i], s[j].name);
            t.name = name;
            run_shape(b, &t, max_cand, pool, xs, bias);
        }
    }
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    tg_backend_free(b);
    return 0;
}

#else
int main(void) {
    printf("cuda_lt_candidates: skipped: built without the CUDA backend\n");
    return 0;
}
#endif
