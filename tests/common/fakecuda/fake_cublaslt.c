/*
 * fake_cublaslt.c: a stand-in libcublasLt for fake_driver.c: every call
 * succeeds, heuristics offer one algorithm, a product computes nothing.
 * TG_FAKE_LT_REFUSE_BF16_D=<status> makes the heuristic refuse, with that
 * status, every product whose D layout (the last layout made) is bf16, as
 * a real cuBLASLt refuses some (tests of a refusal asked for once).
 *
 * Not here: anything a product computes.
 */
#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

static char g_dummy[8]; /* every handle: nothing allocated, nothing to leak */
static _Thread_local cudaDataType g_last_layout_type = CUDA_R_32F; /* a plan is made on one thread */
cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *h) {
    *h = (cublasLtHandle_t)g_dummy;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t h) {
    (void)h;
    return CUBLAS_STATUS_SUCCESS;
}
size_t CUBLASWINAPI cublasLtGetVersion(void) {
    return 130100;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c, cudaDataType_t s) {
    (void)c;
    (void)s;
    *d = (cublasLtMatmulDesc_t)g_dummy;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    (void)d;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                           const void *b, size_t n) {
    (void)d;
    (void)a;
    (void)b;
    (void)n;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t r,
                                                       uint64_t c, int64_t ld) {
    (void)r;
    (void)c;
    (void)ld;
    g_last_layout_type = t;
    *l = (cublasLtMatrixLayout_t)g_dummy;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    (void)l;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                             cublasLtMatrixLayoutAttribute_t a, const void *b,
                                                             size_t n) {
    (void)l;
    (void)a;
    (void)b;
    (void)n;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = (cublasLtMatmulPreference_t)g_dummy;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    (void)p;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                                 cublasLtMatmulPreferenceAttributes_t a, const void *b,
                                                                 size_t n) {
    (void)p;
    (void)a;
    (void)b;
    (void)n;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                                           cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                           cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                                           cublasLtMatmulPreference_t p, int req,
                                                           cublasLtMatmulHeuristicResult_t r[], int *ret) {
    (void)h;
    (void)d;
    (void)a;
    (void)b;
    (void)c;
    (void)dd;
    (void)p;
    (void)req;
    const char *refuse = getenv("TG_FAKE_LT_REFUSE_BF16_D");
    if (refuse && g_last_layout_type == CUDA_R_16BF) {
        *ret = 0;
        return (cublasStatus_t)atoi(refuse);
    }
    memset(&r[0], 0, sizeof r[0]);
    r[0].state = CUBLAS_STATUS_SUCCESS;
    r[0].wavesCount = 1.0f;
    *ret = 1;
    return CUBLAS_STATUS_SUCCESS;
}
/* No algorithm of the stand-in splits over K, and none passes a check. */
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoCapGetAttribute(const cublasLtMatmulAlgo_t *algo,
                                                              cublasLtMatmulAlgoCapAttributes_t a, void *buf,
                                                              size_t n, size_t *written) {
    (void)algo;
    (void)a;
    memset(buf, 0, n);
    if (written) *written = n;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t *algo,
                                                                 cublasLtMatmulAlgoConfigAttributes_t a,
                                                                 const void *buf, size_t n) {
    (void)algo;
    (void)a;
    (void)buf;
    (void)n;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoCheck(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                                    cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                                    const cublasLtMatmulAlgo_t *algo,
                                                    cublasLtMatmulHeuristicResult_t *r) {
    (void)h;
    (void)d;
    (void)a;
    (void)b;
    (void)c;
    (void)dd;
    (void)algo;
    (void)r;
    return CUBLAS_STATUS_NOT_SUPPORTED;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *al, const void *A,
                                           cublasLtMatrixLayout_t la, const void *B, cublasLtMatrixLayout_t lb,
                                           const void *be, const void *C, cublasLtMatrixLayout_t lc, void *D,
                                           cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *algo, void *ws,
                                           size_t wss, cudaStream_t s) {
    (void)h;
    (void)d;
    (void)al;
    (void)A;
    (void)la;
    (void)B;
    (void)lb;
    (void)be;
    (void)C;
    (void)lc;
    (void)D;
    (void)ld;
    (void)algo;
    (void)ws;
    (void)wss;
    (void)s;
    return CUBLAS_STATUS_SUCCESS;
}
