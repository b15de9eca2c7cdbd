/*
 * cuda_loader.c: dlopen of libcuda, libnvrtc and libcublasLt into tables.
 *
 * Shaped this way so that one build runs everywhere: a machine without the
 * driver gets a clear "no CUDA driver" status and the CPU backend; a machine
 * with a driver but no NVRTC still runs the kernels precompiled into the
 * binary (when the build embedded any); one without cuBLASLt runs every op
 * but matrix products on the GPU (supports_op says no, so the scheduler puts
 * them on the CPU). Libraries are searched by their versioned sonames first,
 * then in CUDA_HOME and /usr/local/cuda; CT_CUDA_NVRTC and CT_CUDA_CUBLASLT
 * name an exact file.
 *
 * Not here: any call beyond cuInit; the tables are never unloaded (the
 * driver does not support unloading while contexts may exist).
 */
#include "cuda_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static tg_cu_api g_cu;
static tg_nvrtc_api g_nvrtc;
static tg_cublaslt_api g_lt;
static pthread_once_t g_cu_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_nvrtc_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_lt_once = PTHREAD_ONCE_INIT;
static tg_code g_cu_code;
static char g_cu_msg[512];
static bool g_nvrtc_ok, g_lt_ok;

/* Tries each candidate name, then the same names under the CUDA folders. */
static void *open_first(const char *env, const char *const *names, char *why, size_t why_size) {
    const char *e = getenv(env);
    if (e && *e) {
        void *h = dlopen(e, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        snprintf(why, why_size, "%s=%s: %s", env, e, dlerror());
        return NULL;
    }
    const char *dirs[3] = {getenv("CUDA_HOME"), "/usr/local/cuda", NULL};
    for (const char *const *n = names; *n; n++) {
        void *h = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    for (int d = 0; d < 2; d++) {
        if (!dirs[d] || !*dirs[d]) continue;
        for (const char *const *n = names; *n; n++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/lib64/%s", dirs[d], *n);
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h) return h;
        }
    }
    snprintf(why, why_size, "%s not in the loader path, $CUDA_HOME/lib64 or /usr/local/cuda/lib64; %s may name it",
             names[0], env);
    return NULL;
}

#define LOAD_SYM(tab, name)                                                   \
    do {                                                                      \
        *(void **)&(tab).name = dlsym((tab).lib, STR(name));                  \
        if (!(tab).name) {                                                    \
            missing = STR(name);                                              \
            goto missing_sym;                                                 \
        }                                                                     \
    } while (0);
#define LOAD_CU(name) LOAD_SYM(g_cu, name)
#define LOAD_NVRTC(name) LOAD_SYM(g_nvrtc, name)
#define LOAD_LT(name) LOAD_SYM(g_lt, name)

static void load_cu_once(void) {
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
    const char *missing = NULL;
    char why[400];
    g_cu.lib = open_first("CT_CUDA_DRIVER", names, why, sizeof why);
    if (!g_cu.lib) {
        g_cu_code = TG_ERR_UNSUPPORTED;
        snprintf(g_cu_msg, sizeof g_cu_msg, "no CUDA driver found: %s", why);
        return;
    }
    TG_CU_FUNCS(LOAD_CU)
    CUresult r = g_cu.cuInit(0);
    if (r != CUDA_SUCCESS) {
        g_cu_code = TG_ERR_UNSUPPORTED;
        snprintf(g_cu_msg, sizeof g_cu_msg, "the CUDA driver did not start (cuInit: %s)",
                 tg_cuda_result_text(r));
        return;
    }
    int n = 0;
    r = g_cu.cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n == 0) {
        g_cu_code = TG_ERR_UNSUPPORTED;
        snprintf(g_cu_msg, sizeof g_cu_msg, "no CUDA device found (the driver reports %d)", n);
        return;
    }
    g_cu_code = TG_OK;
    return;
missing_sym:
    g_cu_code = TG_ERR_UNSUPPORTED;
    snprintf(g_cu_msg, sizeof g_cu_msg,
             "the CUDA driver is too old: libcuda.so.1 lacks %s (CUDA 12 or newer is needed)", missing);
}

static void load_nvrtc_once(void) {
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL};
    char why[512];
    const char *missing = NULL;
    g_nvrtc.lib = open_first("CT_CUDA_NVRTC", names, why, sizeof why);
    if (!g_nvrtc.lib) {
        TG_INFO("cuda: NVRTC unavailable, only precompiled kernels can run: %s", why);
        return;
    }
    TG_NVRTC_FUNCS(LOAD_NVRTC)
    g_nvrtc_ok = true;
    return;
missing_sym:
    TG_INFO("cuda: NVRTC unusable (lacks %s)", missing);
}

static void load_lt_once(void) {
    static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
                                        NULL};
    char why[512];
    const char *missing = NULL;
    g_lt.lib = open_first("CT_CUDA_CUBLASLT", names, why, sizeof why);
    if (!g_lt.lib) {
        TG_INFO("cuda: cuBLASLt unavailable, matrix products run on the CPU: %s", why);
        return;
    }
    TG_CUBLASLT_FUNCS(LOAD_LT)
    g_lt_ok = true;
    return;
missing_sym:
    TG_INFO("cuda: cuBLASLt unusable (lacks %s)", missing);
}

tg_status tg_cuda_load_driver(const tg_cu_api **out_api) {
    pthread_once(&g_cu_once, load_cu_once);
    if (g_cu_code != TG_OK) return tg_status_new(g_cu_code, "%s", g_cu_msg);
    *out_api = &g_cu;
    return NULL;
}

const tg_nvrtc_api *tg_cuda_load_nvrtc(void) {
    pthread_once(&g_nvrtc_once, load_nvrtc_once);
    return g_nvrtc_ok ? &g_nvrtc : NULL;
}

const tg_cublaslt_api *tg_cuda_load_cublaslt(void) {
    pthread_once(&g_lt_once, load_lt_once);
    return g_lt_ok ? &g_lt : NULL;
}

const char *tg_cuda_result_text(CUresult r) {
    static _Thread_local char buf[256];
    const char *name = NULL, *text = NULL;
    if (g_cu.cuGetErrorName) g_cu.cuGetErrorName(r, &name);
    if (g_cu.cuGetErrorString) g_cu.cuGetErrorString(r, &text);
    snprintf(buf, sizeof buf, "%s (%s)", name ? name : "CUDA error", text ? text : "no description");
    if (!name) snprintf(buf, sizeof buf, "CUDA error %d", (int)r);
    return buf;
}

tg_status tg_cuda_status(CUresult r, const char *what) {
    tg_code code = r == CUDA_ERROR_OUT_OF_MEMORY ? TG_ERR_NO_MEMORY : TG_ERR_DEVICE;
    return tg_status_new(code, "%s: %s", what, tg_cuda_result_text(r));
}
