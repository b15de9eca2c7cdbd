/*
 * cuda_loader.h: the CUDA driver, NVRTC and cuBLASLt, opened at run time.
 *
 * The project links against none of the CUDA libraries: one binary must run
 * on machines without a driver, where the CUDA backend is simply absent. The
 * types and prototypes come from the CUDA headers at build time; the functions
 * are looked up with dlsym into the tables below. Each table's field is named
 * after the header's macro for that function (cuMemAlloc -> cuMemAlloc_v2), so
 * calls read like plain CUDA and always reach the ABI the headers describe.
 *
 * Not here: devices, contexts or anything stateful beyond the library handles.
 */
#ifndef TG_CUDA_LOADER_H
#define TG_CUDA_LOADER_H

/* The CUDA headers are not written for -Wstrict-prototypes. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda.h>
#include <cublasLt.h>
#include <nvrtc.h>
#pragma GCC diagnostic pop

#include "tg.h"

#define TG_CU_FUNCS(X)                                                              \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)          \
    X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)  \
    X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxReset)   \
    X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuDeviceCanAccessPeer)                \
    X(cuCtxEnablePeerAccess)                                                        \
    X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncSetAttribute) \
    X(cuFuncGetAttribute)                                                           \
    X(cuModuleGetGlobal)                                                            \
    X(cuLaunchKernel) X(cuLaunchKernelEx)                                           \
    X(cuMemAlloc) X(cuMemFree) X(cuMemAllocHost) X(cuMemFreeHost) X(cuMemHostRegister) \
    X(cuMemHostUnregister) X(cuMemHostGetDevicePointer) X(cuMemcpyHtoD) X(cuMemcpyDtoH) \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemcpyPeerAsync) \
    X(cuMemsetD8Async) X(cuMemGetInfo) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
    X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery)    \
    X(cuStreamWaitEvent)                                                            \
    X(cuEventCreate) X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize)         \
    X(cuEventElapsedTime) X(cuEventDestroy)                                         \
    X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch) \
    X(cuGraphExecUpdate) X(cuGraphDestroy) X(cuGraphExecDestroy) X(cuGraphGetNodes)

#define TG_NVRTC_FUNCS(X)                                                           \
    X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram) \
    X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog)          \
    X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetPTXSize) X(nvrtcGetPTX)         \
    X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)

#define TG_CUBLASLT_FUNCS(X)                                                        \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion)                      \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)                        \
    X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate)                 \
    X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute)              \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)            \
    X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic)       \
    X(cublasLtMatmulAlgoCapGetAttribute) X(cublasLtMatmulAlgoConfigSetAttribute)    \
    X(cublasLtMatmulAlgoCheck) X(cublasLtMatmul)

#define TG_LOADER_FIELD(name) __typeof__(name) *name;

typedef struct tg_cu_api {
    void *lib;
    TG_CU_FUNCS(TG_LOADER_FIELD)
} tg_cu_api;

typedef struct tg_nvrtc_api {
    void *lib;
    TG_NVRTC_FUNCS(TG_LOADER_FIELD)
} tg_nvrtc_api;

typedef struct tg_cublaslt_api {
    void *lib;
    TG_CUBLASLT_FUNCS(TG_LOADER_FIELD)
} tg_cublaslt_api;

/* Opens libcuda and calls cuInit once (thread-safe). On success *out_api
 * points at the process-wide table (static storage, never freed). Fails with
 * TG_ERR_UNSUPPORTED when there is no driver or no device; the message says
 * which, ready for the CLI. */
tg_status tg_cuda_load_driver(const tg_cu_api **out_api);
/* NVRTC and cuBLASLt are optional: NULL when absent (the reason is logged
 * once at info level). Thread-safe, loaded once. */
const tg_nvrtc_api *tg_cuda_load_nvrtc(void);
const tg_cublaslt_api *tg_cuda_load_cublaslt(void);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for r; static storage. */
const char *tg_cuda_result_text(CUresult r);
/* A new status for a failed driver call: TG_ERR_NO_MEMORY for out-of-memory
 * results, TG_ERR_DEVICE otherwise; the message is "<what>: <result text>". */
tg_status tg_cuda_status(CUresult r, const char *what);

#endif /* TG_CUDA_LOADER_H */
