/*
 * fake_driver.c: a stand-in libcuda.so.1 for running the CUDA backend's host
 * code on a machine without a GPU (CI's): device memory is host memory,
 * kernels are not run (the two capability probes are answered as a BF16
 * tensor-core GPU would answer them), stream capture is refused, so every
 * compute launches directly, a launch fails where a GPU would refuse its
 * shared memory (every kernel taken to have 4 KB static), and every other
 * call succeeds. The device it
 * describes is an H100's shape (sm_90, 132 SMs, 50 MB of L2).
 *
 * What a test on it can check: what the host decides and enqueues (which
 * kernels, how many launches, the step chains' phases), never a result.
 * FAKECU_LOG=1 prints each launch's kernel. Loaded through CT_CUDA_DRIVER;
 * fake_cublaslt.c through CT_CUDA_CUBLASLT (CMakeLists.txt: cuda/chain_fake).
 *
 * Not here: anything a kernel computes; graphs (capture is refused).
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Kernels by name: a handle is an entry here (no allocation to leak). */
typedef struct {
    char name[128];
    int max_dynamic; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as set */
} fn_t;
/* Every kernel's static shared memory as the stand-in reports it: a
 * launch whose dynamic part takes the block past 48 KB with it fails, as
 * on a GPU, unless the kernel opted in to that much. */
enum { FAKE_STATIC_SMEM = 4096 };
static fn_t g_fns[512];
static int g_n_fns;
static char g_dummy[8];
static CUfunction fn_named(const char *name) {
    for (int i = 0; i < g_n_fns; i++)
        if (!strcmp(g_fns[i].name, name))
            return (CUfunction)&g_fns[i];
    if (g_n_fns == (int)(sizeof g_fns / sizeof g_fns[0]))
        return NULL;
    snprintf(g_fns[g_n_fns].name, sizeof g_fns[0].name, "%s", name);
    return (CUfunction)&g_fns[g_n_fns++];
}
static int fk_log(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("FAKECU_LOG");
        v = e && *e == '1';
    }
    return v;
}
CUresult CUDAAPI cuInit(unsigned f) {
    (void)f;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDriverGetVersion(int *v) {
    *v = 13000;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult e, const char **s) {
    (void)e;
    *s = "FAKE_ERROR";
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult e, const char **s) {
    (void)e;
    *s = "fake error";
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int *n) {
    *n = 1;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int o) {
    *d = o;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char *n, int len, CUdevice d) {
    (void)d;
    snprintf(n, len, "Fake H100");
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    (void)d;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *v = 9;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *v = 132;
        break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
        *v = 50 << 20;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
        *v = 232448;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
        *v = 49152;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
        *v = 233472;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *v = 1024;
        break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        *v = 32;
        break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
        *v = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
        *v = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
        *v = 2619000;
        break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
        *v = 5120;
        break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
        *v = 1980000;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
        *v = 65536;
        break;
    default:
        *v = 1;
        break;
    }
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem(size_t *b, CUdevice d) {
    (void)d;
    *b = (size_t)80 << 30;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    (void)d;
    *c = (CUcontext)0x1;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d) {
    (void)d;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice d) {
    (void)d;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) {
    (void)c;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSynchronize(void) {
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceCanAccessPeer(int *c, CUdevice a, CUdevice b) {
    (void)a;
    (void)b;
    *c = 0;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext c, unsigned f) {
    (void)c;
    (void)f;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *img) {
    (void)img;
    *m = (CUmodule)g_dummy;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule m) {
    (void)m;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    (void)m;
    *f = fn_named(name);
    return *f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        if (v < 0 || v + FAKE_STATIC_SMEM > 232448) return CUDA_ERROR_INVALID_VALUE;
        ((fn_t *)f)->max_dynamic = v;
    }
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f) {
    (void)f;
    *v = a == CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES ? FAKE_STATIC_SMEM : 0;
    return CUDA_SUCCESS;
}
/* The dynamic shared memory a launch of f may ask for. */
static int smem_ok(CUfunction f, unsigned sm) {
    const fn_t *x = (const fn_t *)f;
    const unsigned most = x->max_dynamic > 0 ? (unsigned)x->max_dynamic : 48 * 1024 - FAKE_STATIC_SMEM;
    return sm <= most;
}
CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *p, size_t *b, CUmodule m, const char *n) {
    (void)m;
    (void)n;
    static char g[4096];
    if (p)
        *p = (CUdeviceptr)(uintptr_t)g;
    if (b)
        *b = sizeof g;
    return CUDA_SUCCESS;
}
static void launched(CUfunction f, void **params, unsigned gx, unsigned bx) {
    fn_t *x = (fn_t *)f;
    if (fk_log())
        fprintf(stderr, "[fakecu] launch %s grid %u block %u\n", x->name, gx, bx);
    if (!strcmp(x->name, "probe_bf16_cvt")) {
        uint64_t out;
        memcpy(&out, params[0], 8);
        *(uint16_t *)(uintptr_t)out = 0x3f80;
    }
    if (!strcmp(x->name, "probe_mma_bf16")) {
        uint64_t out;
        memcpy(&out, params[0], 8);
        *(float *)(uintptr_t)out = 16.0f;
    }
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned sm, CUstream s, void **params, void **extra) {
    (void)gy;
    (void)gz;
    (void)by;
    (void)bz;
    (void)s;
    (void)extra;
    if (!smem_ok(f, sm)) return CUDA_ERROR_INVALID_VALUE;
    launched(f, params, gx, bx);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra) {
    (void)extra;
    if (!smem_ok(f, cfg->sharedMemBytes)) return CUDA_ERROR_INVALID_VALUE;
    launched(f, params, cfg->gridDimX, cfg->blockDimX);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t n) {
    /* 256-byte aligned, as a GPU's allocations are at least (a product
     * plan's key holds its operands' alignments, so they must not vary
     * from run to run more than a GPU's would) */
    size_t size = ((n ? n : 1) + 255) & ~(size_t)255;
    void *m = aligned_alloc(256, size);
    if (m) memset(m, 0, size);
    *p = (CUdeviceptr)(uintptr_t)m;
    return m ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
    free((void *)(uintptr_t)p);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAllocHost(void **p, size_t n) {
    /* page-aligned, as a driver's pinned allocations are (calloc's
     * addresses, 16-byte aligned, made plan keys' alignments vary) */
    size_t size = ((n ? n : 1) + 4095) & ~(size_t)4095;
    void *m = aligned_alloc(4096, size);
    if (m) memset(m, 0, size);
    *p = m;
    return m ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuMemFreeHost(void *p) {
    free(p);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostRegister(void *p, size_t n, unsigned f) {
    (void)p;
    (void)n;
    (void)f;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostUnregister(void *p) {
    (void)p;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr *d, void *p, unsigned f) {
    (void)f;
    *d = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t n) {
    memcpy((void *)(uintptr_t)d, s, n);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n) {
    memcpy(d, (void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr d, const void *s, size_t n, CUstream st) {
    (void)st;
    memcpy((void *)(uintptr_t)d, s, n);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void *d, CUdeviceptr s, size_t n, CUstream st) {
    (void)st;
    memcpy(d, (void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
    (void)st;
    memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st) {
    (void)dc;
    (void)sc;
    (void)st;
    memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream st) {
    (void)st;
    memset((void *)(uintptr_t)d, v, n);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetInfo(size_t *f, size_t *t) {
    *f = (size_t)70 << 30;
    *t = (size_t)80 << 30;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int bs, size_t sm) {
    if (fk_log())
        fprintf(stderr, "[fakecu] occupancy %s %d %zu\n", ((fn_t *)f)->name, bs, sm);
    *n = 1;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned f) {
    (void)f;
    *s = (CUstream)g_dummy;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream s) {
    (void)s;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
    (void)s;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamQuery(CUstream s) {
    (void)s;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned f) {
    (void)s;
    (void)e;
    (void)f;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned f) {
    (void)f;
    *e = (CUevent)g_dummy;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
    (void)e;
    (void)s;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventQuery(CUevent e) {
    (void)e;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventSynchronize(CUevent e) {
    (void)e;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
    (void)a;
    (void)b;
    *ms = 0.01f;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent e) {
    (void)e;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamBeginCapture(CUstream s, CUstreamCaptureMode m) {
    (void)s;
    (void)m;
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *g) {
    (void)s;
    *g = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *e, CUgraph g, unsigned long long f) {
    (void)e;
    (void)g;
    (void)f;
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream s) {
    (void)e;
    (void)s;
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *i) {
    (void)e;
    (void)g;
    (void)i;
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
    (void)g;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) {
    (void)e;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphGetNodes(CUgraph g, CUgraphNode *n, size_t *c) {
    (void)g;
    (void)n;
    *c = 0;
    return CUDA_SUCCESS;
}
