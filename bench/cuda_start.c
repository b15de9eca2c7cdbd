/*
 * cuda_start.c: backend start to a first finished compute of a graph that
 * uses every kernel file, with an empty kernel cache (cold) and a filled one
 * (warm), each in a fresh process. Target: warm <= 10% of cold.
 *
 * The floor, measured in the same run and also in a fresh process: what any
 * program that runs a matrix product through cuBLASLt on this GPU pays
 * before its first kernel of its own: libcuda loaded and cuInit, the primary
 * context, libnvrtc and libcublasLt loaded (alongside the context, as the
 * backend does), a cuBLASLt handle, a stream, the workspace, and one small
 * BF16 product planned, run and waited for. No kernel cache can shorten
 * that part, so the second ratio compares what lies above it.
 */
#include "cuda_common.h"

#ifdef TG_HAVE_CUDA
#include "cuda_internal.h"
#endif

#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int child(void) {
    double t0 = bench_now_us();
    tg_backend *b = NULL;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) {
        printf("cuda_start: skipped: no CUDA device (%s)\n", tg_status_message(st));
        tg_status_free(st);
        return 3;
    }
    tg_ctx *ctx = tg_ctx_new();
    tg_tensor *x = tg_new_2d(ctx, TG_F32, 256, 16), *w = tg_new_2d(ctx, TG_BF16, 256, 256);
    tg_tensor *v = tg_new_1d(ctx, TG_F32, 256), *ids = tg_new_1d(ctx, TG_I32, 4);
    tg_tensor *h = tg_layer_norm(ctx, x, v, v, 1e-5f);
    h = tg_silu(ctx, tg_add(ctx, tg_mul_mat(ctx, w, h), v));
    h = tg_sub(ctx, tg_div(ctx, tg_mul(ctx, h, v), tg_sigmoid(ctx, h)), tg_relu(ctx, tg_scale(ctx, h, 2.0f)));
    h = tg_soft_max(ctx, h, NULL, 0.5f);
    tg_tensor *q = tg_reshape_4d(ctx, h, 64, 16, 4, 1);
    tg_tensor *a = tg_attention(ctx, q, q, q, NULL, 0.125f);
    tg_tensor *r = tg_get_rows(ctx, tg_reshape_2d(ctx, a, 256, 16), ids);
    tg_tensor *cv = tg_conv_1d_dw(ctx, tg_new_2d(ctx, TG_F32, 3, 256), tg_reshape_3d(ctx, r, 256, 4, 1), 1, 1);
    tg_tensor *out = tg_argmax(ctx, tg_glu(ctx, tg_concat(ctx, cv, cv, 0)));
    tg_graph *g = tg_graph_new(ctx);
    BENCH_TRY(tg_graph_build(g, out));
    tg_buffer *buf = NULL;
    BENCH_TRY(tg_ctx_alloc_tensors(ctx, b, &buf));
    for (int i = 0; i < tg_graph_n_leafs(g); i++) BENCH_TRY(bench_fill(tg_graph_leaf(g, i), (uint64_t)i + 1));
    BENCH_TRY(tg_backend_graph_compute(b, g));
    double total = (bench_now_us() - t0) / 1e3;
    double lib = 0;
#ifdef TG_HAVE_CUDA
    lib = tg_cuda_test_library_ms(b);
#endif
    printf("library_ms %.1f\nstart_ms %.1f\n", lib, total);
#ifdef TG_HAVE_CUDA
    const tg_cuda_device *d = ((tg_cuda_ctx *)b->impl)->dev;
    printf("phases: driver %.1f, context %.1f, libraries after it %.1f, probes %.1f, cuBLASLt handle %.1f ms; "
           "first compute %.1f ms\n", d->start.driver_ms, d->start.context_ms, d->start.libraries_ms,
           d->start.probes_ms, d->start.cublaslt_ms, total - d->start.total_ms);
#endif
    tg_buffer_free(buf);
    tg_ctx_free(ctx);
    tg_backend_free(b);
    return 0;
}

#ifdef TG_HAVE_CUDA
static void *load_libraries(void *arg) {
    (void)arg;
    tg_cuda_load_nvrtc();
    tg_cuda_load_cublaslt();
    return NULL;
}

#define FLOOR_TRY(ok, what)                                     \
    do {                                                        \
        if (!(ok)) {                                            \
            printf("cuda_start: floor: %s failed\n", what);     \
            return 1;                                           \
        }                                                       \
    } while (0)

/* The vendor floor (see the top of the file), driver API and cuBLASLt only. */
static int floor_child(void) {
    double t0 = bench_now_us();
    const tg_cu_api *cu;
    tg_status st = tg_cuda_load_driver(&cu);
    if (st) {
        printf("cuda_start: floor: %s\n", tg_status_message(st));
        tg_status_free(st);
        return 3;
    }
    pthread_t th;
    bool threaded = pthread_create(&th, NULL, load_libraries, NULL) == 0;
    CUdevice dev;
    CUcontext ctx;
    FLOOR_TRY(cu->cuDeviceGet(&dev, 0) == CUDA_SUCCESS && cu->cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS &&
                  cu->cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "context");
    if (threaded) pthread_join(th, NULL);
    FLOOR_TRY(tg_cuda_load_nvrtc() != NULL, "loading NVRTC");
    const tg_cublaslt_api *lt = tg_cuda_load_cublaslt();
    FLOOR_TRY(lt != NULL, "loading cuBLASLt");
    cublasLtHandle_t h;
    FLOOR_TRY(lt->cublasLtCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasLtCreate");
    CUstream s;
    CUdeviceptr ws, a, bm, d;
    size_t ws_size = (size_t)32 << 20;
    FLOOR_TRY(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS && cu->cuMemAlloc(&ws, ws_size) == 0 &&
                  cu->cuMemAlloc(&a, 256 * 256 * 2) == 0 && cu->cuMemAlloc(&bm, 256 * 16 * 2) == 0 &&
                  cu->cuMemAlloc(&d, 256 * 16 * 4) == 0,
              "stream and memory");
    cu->cuMemsetD8Async(a, 0, 256 * 256 * 2, s);
    cu->cuMemsetD8Async(bm, 0, 256 * 16 * 2, s);
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulPreference_t pref;
    cublasOperation_t ta = CUBLAS_OP_T;
    FLOOR_TRY(lt->cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0 &&
                  lt->cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == 0 &&
                  lt->cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, 256, 256, 256) == 0 &&
                  lt->cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, 256, 16, 256) == 0 &&
                  lt->cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, 256, 16, 256) == 0 &&
                  lt->cublasLtMatmulPreferenceCreate(&pref) == 0,
              "cuBLASLt descriptors");
    uint64_t wsz = ws_size;
    lt->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz);
    cublasLtMatmulHeuristicResult_t res;
    int n = 0;
    FLOOR_TRY(lt->cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &res, &n) == 0 && n > 0,
              "cuBLASLt heuristic");
    float alpha = 1, beta = 0;
    FLOOR_TRY(lt->cublasLtMatmul(h, op, &alpha, (void *)a, la, (void *)bm, lb, &beta, (void *)d, ld, (void *)d, ld,
                                 &res.algo, (void *)ws, res.workspaceSize, s) == 0 &&
                  cu->cuStreamSynchronize(s) == CUDA_SUCCESS,
              "cuBLASLt product");
    printf("floor_ms %.1f\n", (bench_now_us() - t0) / 1e3);
    return 0;
}
#else
static int floor_child(void) { return 3; }
#endif

/* Sorts v and returns its median. */
static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double run_child(const char *self, const char *mode, const char *key, double *out_lib) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    char *argv[] = {(char *)self, (char *)mode, NULL};
    pid_t pid;
    if (posix_spawn(&pid, self, &fa, NULL, argv, environ) != 0) return -1;
    close(fds[1]);
    char out[4096] = {0};
    size_t n = 0;
    ssize_t r;
    while ((r = read(fds[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)r;
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    posix_spawn_file_actions_destroy(&fa);
    char *p = strstr(out, key), *q = strstr(out, "library_ms "), *ph = strstr(out, "phases: ");
    if (out_lib) *out_lib = q ? atof(q + 11) : -1;
    if (ph) fwrite(ph, 1, strcspn(ph, "\n") + 1, stdout);
    if (!p) {
        fputs(out, stdout);
        return -1;
    }
    return atof(p + strlen(key));
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--child") == 0) return child();
    if (argc > 1 && strcmp(argv[1], "--floor") == 0) return floor_child();
    char dir[128], cmd[200];
    snprintf(dir, sizeof dir, "/tmp/tg-cuda-start-bench-%ld", (long)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 1;
    setenv("CT_CUDA_CACHE_DIR", dir, 1);
    double lib;
    /* Medians: the driver's context creation alone moves by +-20 ms from
     * one process to the next. Cold runs empty the cache first; warm and
     * floor runs alternate. */
    enum { RUNS = 5, COLD_RUNS = 3 };
    double cold_v[COLD_RUNS], cold_lib_v[COLD_RUNS], warm_v[RUNS], warm_lib_v[RUNS], flo_v[RUNS];
    int n_cold = 0, n_warm = 0, n_flo = 0;
    printf("cold starts:\n");
    for (int i = 0; i < COLD_RUNS; i++) {
        if (system(cmd) != 0) return 1;
        double c = run_child("/proc/self/exe", "--child", "start_ms ", &lib);
        if (c < 0) return 0;
        cold_lib_v[n_cold] = lib;
        cold_v[n_cold++] = c;
    }
    printf("warm starts:\n");
    for (int i = 0; i < RUNS; i++) {
        double w = run_child("/proc/self/exe", "--child", "start_ms ", &lib);
        if (w >= 0 && lib >= 0) {
            warm_lib_v[n_warm] = lib;
            warm_v[n_warm++] = w;
        }
        double f = run_child("/proc/self/exe", "--floor", "floor_ms ", NULL);
        if (f >= 0) flo_v[n_flo++] = f;
    }
    if (system(cmd) != 0) return 1;
    if (n_warm == 0) return 1;
    double cold = median(cold_v, n_cold), cold_lib = median(cold_lib_v, n_cold);
    double warm = median(warm_v, n_warm), warm_lib = median(warm_lib_v, n_warm);
    printf("start (medians): cold %.1f ms (kernels %.1f ms), warm %.1f ms (kernels %.1f ms, runs %.1f..%.1f)",
           cold, cold_lib, warm, warm_lib, warm_v[0], warm_v[n_warm - 1]);
    if (n_flo) {
        double flo = median(flo_v, n_flo);
        printf("; vendor floor %.1f ms (runs %.1f..%.1f: context, NVRTC and cuBLASLt loaded, one cuBLASLt "
               "product)\n", flo, flo_v[0], flo_v[n_flo - 1]);
        bench_result("backend start, warm kernel cache", warm, "ms", cold, warm / cold, "<=0.10");
        bench_result("start above the vendor floor, warm", warm - flo, "ms", cold - flo, (warm - flo) / (cold - flo),
                     "<=0.10");
    } else {
        printf("\n");
        bench_result("backend start, warm kernel cache", warm, "ms", cold, warm / cold, "<=0.10");
    }
    bench_result("kernel library, warm kernel cache", warm_lib, "ms", cold_lib, warm_lib / cold_lib, "<=0.10");
    return 0;
}
