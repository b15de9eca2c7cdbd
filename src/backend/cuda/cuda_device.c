/*
 * cuda_device.c: one GPU: properties, capability probes, the kernel library
 * (NVRTC over the embedded sources, a source folder for development, the
 * disk cache), events with timeouts, memory info.
 *
 * Shaped after the seed's device layer: properties are read and logged once
 * at start; capabilities that a kernel would rely on are probed by compiling
 * and running a test kernel first; kernels are looked up by name plus
 * specialisation (compile options such as -DTG_OP=2), compiled on first use
 * under the device lock, and the compiled images go through the persistent
 * cache so a warm start skips NVRTC. The device is shared by every backend
 * on the same ordinal and reference-counted; the last release drops the
 * CUDA context, which is what lets a context killed by a device fault be
 * recreated.
 *
 * Not here: buffers and streams (cuda_context.c), op encoding (cuda_ops.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_internal.h"
#include "cuda_kernels.h"
#include "cuda_variants.h"

#define MAX_DEVICES 64

const tg_cuda_variant tg_cuda_variants[] = {
#define TG_VARIANT(module, defines) {module, defines},
#include "kernels/variants.def"
#undef TG_VARIANT
};
const int tg_cuda_n_variants = (int)(sizeof tg_cuda_variants / sizeof tg_cuda_variants[0]);

static pthread_mutex_t g_devices_lock = PTHREAD_MUTEX_INITIALIZER;
static tg_cuda_device *g_devices[MAX_DEVICES];

static bool env_set(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

tg_status tg_cuda_device_bind(tg_cuda_device *dev) {
    CUresult r = dev->cu->cuCtxSetCurrent(dev->ctx);
    return r == CUDA_SUCCESS ? NULL : tg_cuda_status(r, "cuCtxSetCurrent");
}

/* ------------------------------------------------------ kernel sources */

static const tg_cuda_source *embedded(const char *name) {
    for (int i = 0; i < tg_cuda_n_sources; i++)
        if (strcmp(tg_cuda_sources[i].name, name) == 0) return &tg_cuda_sources[i];
    return NULL;
}

/* The text of a kernel file: from CT_CUDA_KERNELS_DIR when set (kernel
 * development without rebuilding), else the embedded copy. *out_owned says
 * whether the caller frees it. */
static tg_status source_text(const char *kernels_dir, const char *name, const char **out_text,
                             bool *out_owned) {
    if (kernels_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", kernels_dir, name);
        char *text = NULL;
        size_t size = 0;
        tg_status st = tg_file_read(path, &text, &size);
        if (st) return tg_status_wrap(st, "CT_CUDA_KERNELS_DIR");
        *out_text = text;
        *out_owned = true;
        return NULL;
    }
    const tg_cuda_source *s = embedded(name);
    if (!s) return tg_status_new(TG_ERR_NOT_FOUND, "no kernel file '%s' is embedded", name);
    *out_text = s->text;
    *out_owned = false;
    return NULL;
}

/* Headers every kernel file may include: the embedded *.cuh (or the same
 * names from the development folder). */
typedef struct headers {
    const char *names[16];
    const char *texts[16];
    bool owned[16];
    int n;
    uint64_t hash;
} headers;

static void headers_free(headers *h) {
    for (int i = 0; i < h->n; i++)
        if (h->owned[i]) tg_free((void *)h->texts[i]);
    h->n = 0;
}

static tg_status headers_load(const char *kernels_dir, headers *h) {
    memset(h, 0, sizeof *h);
    for (int i = 0; i < tg_cuda_n_sources && h->n < 16; i++) {
        const char *name = tg_cuda_sources[i].name;
        size_t len = strlen(name);
        if (len < 4 || strcmp(name + len - 4, ".cuh") != 0) continue;
        tg_status st = source_text(kernels_dir, name, &h->texts[h->n], &h->owned[h->n]);
        if (st) {
            headers_free(h);
            return st;
        }
        h->names[h->n] = name;
        h->hash = tg_hash_combine(h->hash, tg_hash64(h->texts[h->n], strlen(h->texts[h->n]), 7));
        h->n++;
    }
    return NULL;
}

/* ------------------------------------------------------------ compiling */

static bool nvrtc_supports_arch(const tg_nvrtc_api *nv, int cc) {
    int n = 0;
    if (nv->nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 256) return false;
    int archs[256];
    if (nv->nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) return false;
    for (int i = 0; i < n; i++)
        if (archs[i] == cc) return true;
    return false;
}

/* Splits "a b c" into at most max options (pointers into buf). */
static int split_opts(char *buf, const char **opts, int max) {
    int n = 0;
    for (char *tok = strtok(buf, " "); tok && n < max; tok = strtok(NULL, " ")) opts[n++] = tok;
    return n;
}

tg_status tg_cuda_nvrtc_build(const tg_nvrtc_api *nv, const char *kernels_dir, const char *name,
                              const char *text, const char *opts, bool ptx, char **out_image,
                              size_t *out_size) {
    headers hd;
    nvrtcProgram prog = NULL;
    char *log = NULL, *image = NULL;
    size_t image_size = 0;
    tg_status st = headers_load(kernels_dir, &hd);
    if (st) return st;
    nvrtcResult nr = nv->nvrtcCreateProgram(&prog, text, name, hd.n, hd.texts, hd.names);
    if (nr != NVRTC_SUCCESS) {
        st = tg_status_new(TG_ERR_DEVICE, "nvrtcCreateProgram(%s): %s", name, nv->nvrtcGetErrorString(nr));
        goto done;
    }
    char obuf[1024];
    snprintf(obuf, sizeof obuf, "%s", opts);
    const char *argv[48];
    int n_opts = split_opts(obuf, argv, 48);
    nr = nv->nvrtcCompileProgram(prog, n_opts, argv);
    size_t log_size = 0;
    nv->nvrtcGetProgramLogSize(prog, &log_size);
    if (log_size > 1 && (log = tg_malloc(log_size))) nv->nvrtcGetProgramLog(prog, log);
    if (nr != NVRTC_SUCCESS) {
        st = tg_status_new(TG_ERR_DEVICE, "compiling kernel file %s with '%s': %s\n%s", name, opts,
                           nv->nvrtcGetErrorString(nr), log ? log : "");
        goto done;
    }
    nr = ptx ? nv->nvrtcGetPTXSize(prog, &image_size) : nv->nvrtcGetCUBINSize(prog, &image_size);
    if (nr != NVRTC_SUCCESS || image_size == 0 || !(image = tg_malloc(image_size))) {
        st = tg_status_new(TG_ERR_DEVICE, "compiling %s: no image (%s)", name, nv->nvrtcGetErrorString(nr));
        goto done;
    }
    nr = ptx ? nv->nvrtcGetPTX(prog, image) : nv->nvrtcGetCUBIN(prog, image);
    if (nr != NVRTC_SUCCESS) {
        st = tg_status_new(TG_ERR_DEVICE, "compiling %s: %s", name, nv->nvrtcGetErrorString(nr));
        goto done;
    }
    *out_image = image;
    *out_size = image_size;
    image = NULL;
done:
    if (prog) nv->nvrtcDestroyProgram(&prog);
    tg_free(log);
    tg_free(image);
    headers_free(&hd);
    return st;
}

/* Compiles text to a CUBIN (or PTX when NVRTC cannot target this GPU) and
 * loads it. Goes through the disk cache when `cacheable`. */
static tg_status compile_and_load(tg_cuda_device *dev, const char *name, const char *text,
                                  const char *defines, bool cacheable, CUmodule *out_mod) {
    const tg_cu_api *cu = dev->cu;
    const tg_nvrtc_api *nv = dev->nvrtc;
    tg_status st = NULL;
    headers hd;
    char *image = NULL, *key = NULL;
    void *cached = NULL;
    size_t image_size = 0;
    bool hit = false;

    char stamped[512];
    if (dev->stamps_path) { /* CT_CUDA_STAMPS: every file by NVRTC with the timer records */
        snprintf(stamped, sizeof stamped, "%s -DTG_STAMPS=1", defines ? defines : "");
        defines = stamped;
    }
    if ((st = headers_load(dev->kernels_dir, &hd))) return st;
    uint64_t src_hash = tg_hash_combine(hd.hash, tg_hash64(text, strlen(text), 11));
    headers_free(&hd);
    int cc = dev->props.cc_major * 10 + dev->props.cc_minor;
    bool ptx = nv && !nvrtc_supports_arch(nv, cc);
    char optbuf[1024];
    tg_cuda_compile_options(cc, ptx, dev->props.bf16, dev->props.tc_level, dev->strict_fp, defines,
                            optbuf, sizeof optbuf);

    size_t key_len = strlen(optbuf) + strlen(name) + 160;
    key = tg_malloc(key_len);
    if (!key) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "kernel cache key");
        goto done;
    }
    snprintf(key, key_len, "tgk1|%s|%016llx|%s|nvrtc %d.%d|driver %d|cc %d|%s", name,
             (unsigned long long)src_hash, optbuf, dev->props.nvrtc_major, dev->props.nvrtc_minor,
             dev->props.driver_version, cc, ptx ? "ptx" : "cubin");

    size_t cached_size = 0;
    if (cacheable && tg_kcache_get(dev->cache, key, &cached, &cached_size)) {
        CUresult r = cu->cuModuleLoadData(out_mod, cached);
        if (r == CUDA_SUCCESS) {
            hit = true;
            dev->n_cache_hits++;
            goto done;
        }
        TG_WARN("cuda: cached kernel %s %s did not load (%s); recompiling", name, defines,
                tg_cuda_result_text(r));
    }
    /* Kernels nvcc precompiled at build time (sm_80 and sm_90 code of the
     * embedded sources) load before NVRTC is asked, so a cold start on an
     * A100/H100/H200 compiles only the specialisations the build did not
     * make; not with CT_CUDA_KERNELS_DIR (other sources), strict FP (other
     * flags) or CT_CUDA_PRECOMPILED=0 (NVRTC for everything, as the cache's
     * tests want). */
    const char *pre = getenv("CT_CUDA_PRECOMPILED");
    bool use_images = !(pre && strcmp(pre, "0") == 0) && !dev->kernels_dir;
    if (cacheable && use_images && !dev->strict_fp && cc >= 80 &&
        (dev->props.bf16 || strcmp(name, "probe.cu") == 0)) {
        for (int i = 0; i < tg_cuda_n_images; i++) {
            const tg_cuda_image *im = &tg_cuda_images[i];
            if (strcmp(im->module, name) != 0 || strcmp(im->defines, defines ? defines : "") != 0) continue;
            CUresult r = cu->cuModuleLoadData(out_mod, im->data);
            if (r == CUDA_SUCCESS) {
                hit = true;
                dev->n_precompiled++;
                goto done;
            }
            TG_DEBUG("cuda: precompiled %s %s does not load here (%s)", name, defines, tg_cuda_result_text(r));
        }
    }
    if (!nv) {
        st = tg_status_new(TG_ERR_UNSUPPORTED,
                           "kernel file %s (%s) is not in the kernel cache and NVRTC (libnvrtc.so) "
                           "is not installed; install the CUDA NVRTC runtime",
                           name, defines && *defines ? defines : "no options");
        goto done;
    }
    double t0 = tg_clock_now_ms();
    if ((st = tg_cuda_nvrtc_build(nv, dev->kernels_dir, name, text, optbuf, ptx, &image, &image_size)))
        goto done;
    dev->compile_ms += tg_clock_now_ms() - t0;
    dev->n_compiled++;
    CUresult r = cu->cuModuleLoadData(out_mod, image);
    if (r != CUDA_SUCCESS) {
        st = tg_cuda_status(r, "loading compiled kernel file");
        st = tg_status_wrap(st, "%s", name);
        goto done;
    }
    if (cacheable) {
        tg_status cs = tg_kcache_put(dev->cache, key, image, image_size);
        if (cs) {
            TG_WARN("cuda: %s", tg_status_message(cs));
            tg_status_free(cs);
        }
    }
done:
    if (!st) tg_cuda_stamps_bind(dev, *out_mod);
    tg_free(image);
    tg_free(cached);
    tg_free(key);
    if (!st && !hit) TG_DEBUG("cuda: compiled %s %s", name, defines ? defines : "");
    return st;
}

void tg_cuda_compile_options(int cc, bool ptx, bool bf16, int tc_level, bool strict_fp,
                             const char *defines, char *out, size_t out_size) {
    snprintf(out, out_size,
             "--gpu-architecture=%s_%d -DTG_CC=%d -DTG_HAS_BF16_CVT=%d -DTG_TC_LEVEL=%d%s %s",
             ptx ? "compute" : "sm", ptx ? 80 : cc, cc, bf16 ? 1 : 0, tc_level,
             strict_fp ? " --fmad=false" : "", defines ? defines : "");
}

tg_status tg_cuda_compile_source(tg_cuda_device *dev, const char *name, const char *source,
                                 const char *defines, CUmodule *out_mod) {
    tg_status st = tg_cuda_device_bind(dev);
    if (st) return st;
    pthread_mutex_lock(&dev->lock);
    st = compile_and_load(dev, name, source, defines, false, out_mod);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

static uint64_t str_hash3(const char *a, const char *b, const char *c) {
    uint64_t h = tg_hash64(a, strlen(a), 1);
    h = tg_hash_combine(h, tg_hash64(b, strlen(b), 2));
    if (c) h = tg_hash_combine(h, tg_hash64(c, strlen(c), 3));
    return h;
}

static bool key_eq(const char *key, const char *a, const char *b, const char *c) {
    size_t la = strlen(a), lb = strlen(b);
    if (strncmp(key, a, la) != 0 || key[la] != '|') return false;
    key += la + 1;
    if (strncmp(key, b, lb) != 0) return false;
    key += lb;
    if (!c) return *key == 0;
    return key[0] == '|' && strcmp(key + 1, c) == 0;
}

static char *key_make(const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + (c ? strlen(c) : 0) + 3;
    char *k = tg_malloc(n);
    if (!k) return NULL;
    if (c) snprintf(k, n, "%s|%s|%s", a, b, c);
    else snprintf(k, n, "%s|%s", a, b);
    return k;
}

static void add_ns(tg_cuda_device *dev, double t0_ms) {
    double ms = tg_clock_now_ms() - t0_ms;
    __atomic_fetch_add(&dev->library_ns, (uint64_t)(ms > 0 ? ms * 1e6 : 0), __ATOMIC_RELAXED);
}

/* tg_cuda_kernel, marking the entry as asked for by a compute when `used`. */
static tg_status kernel_get(tg_cuda_device *dev, const char *module, const char *defines, const char *name,
                            bool used, CUfunction *out_fn) {
    if (!defines) defines = "";
    uint64_t kh = str_hash3(module, defines, name);
    pthread_mutex_lock(&dev->lock);
    for (int i = 0; i < dev->n_kerns; i++) {
        if (dev->kerns[i].hash == kh && key_eq(dev->kerns[i].key, module, defines, name)) {
            *out_fn = dev->kerns[i].fn;
            dev->kerns[i].used |= used;
            pthread_mutex_unlock(&dev->lock);
            return NULL;
        }
    }
    tg_status st = NULL;
    CUmodule mod = NULL;
    uint64_t mh = str_hash3(module, defines, NULL);
    for (int i = 0; i < dev->n_mods; i++)
        if (dev->mods[i].hash == mh && key_eq(dev->mods[i].key, module, defines, NULL)) mod = dev->mods[i].mod;
    if (!mod) {
        const char *text = NULL;
        bool owned = false;
        double t0 = tg_clock_now_ms();
        if ((st = source_text(dev->kernels_dir, module, &text, &owned))) goto out;
        st = compile_and_load(dev, module, text, defines, true, &mod);
        add_ns(dev, t0);
        if (owned) tg_free((void *)text);
        if (st) goto out;
        char *k = key_make(module, defines, NULL);
        if (!k || !tg_grow((void **)&dev->mods, &dev->cap_mods, dev->n_mods + 1, sizeof *dev->mods)) {
            tg_free(k);
            dev->cu->cuModuleUnload(mod);
            st = tg_status_new(TG_ERR_NO_MEMORY, "kernel table");
            goto out;
        }
        dev->mods[dev->n_mods++] = (cuda_module_entry){mh, k, mod};
    }
    CUfunction fn;
    double tf = tg_clock_now_ms(); /* lazy module loading loads the function here */
    CUresult r = dev->cu->cuModuleGetFunction(&fn, mod, name);
    add_ns(dev, tf);
    if (r != CUDA_SUCCESS) {
        st = tg_status_new(TG_ERR_NOT_FOUND, "kernel '%s' not found in %s (%s)", name, module,
                           tg_cuda_result_text(r));
        goto out;
    }
    char *k = key_make(module, defines, name);
    if (!k || !tg_grow((void **)&dev->kerns, &dev->cap_kerns, dev->n_kerns + 1, sizeof *dev->kerns)) {
        tg_free(k);
        st = tg_status_new(TG_ERR_NO_MEMORY, "kernel table");
        goto out;
    }
    dev->kerns[dev->n_kerns++] = (cuda_kernel_entry){kh, k, fn, used};
    *out_fn = fn;
out:
    pthread_mutex_unlock(&dev->lock);
    return st;
}

tg_status tg_cuda_kernel(tg_cuda_device *dev, const char *module, const char *defines,
                         const char *name, CUfunction *out_fn) {
    return kernel_get(dev, module, defines, name, true, out_fn);
}

tg_status tg_cuda_kernel_ready(tg_cuda_device *dev, const char *module, const char *defines, const char *name) {
    CUfunction fn;
    return kernel_get(dev, module, defines, name, false, &fn);
}

bool tg_cuda_source_known(const char *module) { return embedded(module) != NULL; }

double tg_cuda_library_ms(const tg_cuda_device *dev) {
    return (double)__atomic_load_n(&dev->library_ns, __ATOMIC_RELAXED) / 1e6;
}

/* -------------------------------------------------------------- probes */

/* Compiles and runs a probe kernel; false on any failure (logged at debug). */
static bool probe(tg_cuda_device *dev, const char *kernel, int expect_kind) {
    const tg_cu_api *cu = dev->cu;
    CUfunction fn;
    tg_status st = tg_cuda_kernel(dev, "probe.cu", "", kernel, &fn);
    if (st) {
        TG_DEBUG("cuda: probe %s failed: %s", kernel, tg_status_message(st));
        tg_status_free(st);
        return false;
    }
    CUdeviceptr out = 0;
    bool ok = false;
    if (cu->cuMemAlloc(&out, 16) != CUDA_SUCCESS) return false;
    tg_probe_args a = {.out = out, .x = 1.0f}; /* probe_mma_bf16 reads out only */
    void *params[] = {&a};
    CUresult r = cu->cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
    if (r == CUDA_SUCCESS) r = cu->cuCtxSynchronize();
    if (r == CUDA_SUCCESS) {
        uint32_t v = 0;
        r = cu->cuMemcpyDtoH(&v, out, expect_kind == 0 ? 2 : 4);
        if (expect_kind == 0) ok = r == CUDA_SUCCESS && (v & 0xffff) == 0x3f80; /* bf16(1.0) */
        else {
            float f;
            memcpy(&f, &v, 4);
            ok = r == CUDA_SUCCESS && f == 16.0f; /* 16 products of 1*1 */
        }
    }
    cu->cuMemFree(out);
    if (!ok) TG_DEBUG("cuda: probe %s gave the wrong answer or failed (%s)", kernel, tg_cuda_result_text(r));
    return ok;
}

/* ---------------------------------------------------------------- start */

static int attr(tg_cuda_device *d, CUdevice_attribute a) {
    int v = 0;
    d->cu->cuDeviceGetAttribute(&v, a, d->dev);
    return v;
}

static void device_destroy(tg_cuda_device *d) {
    if (!d) return;
    if (d->ctx) d->cu->cuCtxSetCurrent(d->ctx);
    if (d->lt_handle) d->lt->cublasLtDestroy(d->lt_handle);
    tg_cuda_stamps_close(d);
    for (int i = 0; i < d->n_mods; i++) {
        d->cu->cuModuleUnload(d->mods[i].mod);
        tg_free(d->mods[i].key);
    }
    for (int i = 0; i < d->n_kerns; i++) tg_free(d->kerns[i].key);
    tg_free(d->mods);
    tg_free(d->kerns);
    if (d->ctx) d->cu->cuDevicePrimaryCtxRelease(d->dev);
    /* A device fault is sticky in the CUDA context itself, and cuBLASLt's
     * runtime keeps its own reference to the primary context, so releasing
     * ours does not end it: reset it, so the next start gets a clean one. */
    if (d->ctx && d->failed) {
        CUresult r = d->cu->cuDevicePrimaryCtxReset(d->dev);
        TG_INFO("cuda%d: reset the failed CUDA context (%s)", d->ordinal,
                r == CUDA_SUCCESS ? "ok" : tg_cuda_result_text(r));
    }
    if (d->n_compiled || d->n_cache_hits)
        TG_INFO("cuda%d: %d kernel files compiled (%.0f ms), %d from the cache%s%s", d->ordinal,
                d->n_compiled, d->compile_ms, d->n_cache_hits, d->cache ? " in " : "",
                d->cache ? tg_kcache_dir(d->cache) : "");
    tg_kcache_close(d->cache);
    tg_free(d->kernels_dir);
    pthread_mutex_destroy(&d->lock);
    tg_free(d);
}

/* NVRTC and cuBLASLt are large libraries; mapping and relocating them is
 * file and loader work that overlaps with the driver creating the context
 * (mostly waiting on the kernel driver). The loads are pthread_once'd, so
 * the later calls on the starting thread just read the tables. */
static void *load_libraries(void *arg) {
    (void)arg;
    tg_cuda_load_nvrtc();
    tg_cuda_load_cublaslt();
    return NULL;
}

static tg_status device_create(int ordinal, tg_cuda_device **out) {
    const tg_cu_api *cu;
    double t0 = tg_clock_now_ms();
    tg_status st = tg_cuda_load_driver(&cu);
    if (st) return st;
    int count = 0;
    cu->cuDeviceGetCount(&count);
    if (ordinal < 0 || ordinal >= count)
        return tg_status_new(TG_ERR_UNSUPPORTED, "no CUDA device %d (the driver reports %d)", ordinal, count);
    tg_cuda_device *d = tg_calloc(1, sizeof *d);
    if (!d) return tg_status_new(TG_ERR_NO_MEMORY, "cuda device");
    pthread_mutex_init(&d->lock, NULL);
    d->ordinal = ordinal;
    d->cu = cu;
    d->strict_fp = env_set("CT_CUDA_STRICT_FP");
    double t1 = tg_clock_now_ms();
    d->start.driver_ms = t1 - t0;
    pthread_t loader;
    bool threaded = pthread_create(&loader, NULL, load_libraries, NULL) == 0;
    CUresult r = cu->cuDeviceGet(&d->dev, ordinal);
    if (r == CUDA_SUCCESS) r = cu->cuDevicePrimaryCtxRetain(&d->ctx, d->dev);
    double t2 = tg_clock_now_ms();
    d->start.context_ms = t2 - t1;
    if (threaded) pthread_join(loader, NULL);
    d->nvrtc = tg_cuda_load_nvrtc();
    d->lt = tg_cuda_load_cublaslt();
    d->start.libraries_ms = tg_clock_now_ms() - t2;
    if (r != CUDA_SUCCESS) {
        d->ctx = NULL;
        st = tg_cuda_status(r, "starting the CUDA context");
        goto fail;
    }
    if ((st = tg_cuda_device_bind(d))) goto fail;
    tg_cuda_stamps_open(d);

    tg_cuda_props *p = &d->props;
    cu->cuDeviceGetName(p->name, sizeof p->name, d->dev);
    p->cc_major = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    p->cc_minor = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    p->sm_count = attr(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    p->l2_bytes = attr(d, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    p->smem_per_block = attr(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    p->smem_per_block_optin = attr(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    p->integrated = attr(d, CU_DEVICE_ATTRIBUTE_INTEGRATED) != 0;
    p->unified = attr(d, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS) != 0;
    p->can_map_host = attr(d, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) != 0;
    p->clusters = p->cc_major >= 9 && attr(d, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) != 0;
    cu->cuDeviceTotalMem(&p->total_mem, d->dev);
    cu->cuDriverGetVersion(&p->driver_version);
    if (d->nvrtc) d->nvrtc->nvrtcVersion(&p->nvrtc_major, &p->nvrtc_minor);
    if (d->lt) p->lt_version = d->lt->cublasLtGetVersion();
    if (p->cc_major < 7) {
        st = tg_status_new(TG_ERR_UNSUPPORTED, "CUDA device %d (%s) has compute capability %d.%d; 7.0 or newer is needed",
                           ordinal, p->name, p->cc_major, p->cc_minor);
        goto fail;
    }

    const char *kd = getenv("CT_CUDA_KERNELS_DIR");
    if (kd && *kd) {
        d->kernels_dir = tg_strdup(kd);
        TG_INFO("cuda: kernel sources from %s (CT_CUDA_KERNELS_DIR)", kd);
    }
    tg_kcache_open_default(&d->cache);

    /* Capabilities the kernels may use are probed, not assumed. */
    double t3 = tg_clock_now_ms();
    p->bf16 = p->cc_major >= 8 && !env_set("CT_CUDA_NO_BF16") && probe(d, "probe_bf16_cvt", 0);
    p->tc_level = 0;
    if (!env_set("CT_CUDA_NO_TC")) {
        p->tc_level = 1;
        if (p->cc_major >= 8 && probe(d, "probe_mma_bf16", 1)) p->tc_level = 2;
        if (p->tc_level == 2 && p->cc_major >= 9) p->tc_level = 3;
    }
    double t4 = tg_clock_now_ms();
    d->start.probes_ms = t4 - t3;
    if (d->lt) {
        cublasStatus_t ls = d->lt->cublasLtCreate(&d->lt_handle);
        if (ls != CUBLAS_STATUS_SUCCESS) {
            TG_WARN("cuda%d: cublasLtCreate failed (%d); matrix products run on the CPU", ordinal, (int)ls);
            d->lt = NULL;
            d->lt_handle = NULL;
        }
    }
    d->start.cublaslt_ms = tg_clock_now_ms() - t4;
    d->start.total_ms = tg_clock_now_ms() - t0;
    TG_INFO("cuda%d: started in %.0f ms: driver %.0f, context %.0f, waiting for NVRTC and cuBLASLt %.0f "
            "(they load alongside the context), probes %.0f, cuBLASLt handle %.0f", ordinal, d->start.total_ms,
            d->start.driver_ms, d->start.context_ms, d->start.libraries_ms, d->start.probes_ms,
            d->start.cublaslt_ms);
    static const char *tc_names[] = {"none", "mma", "bf16 mma", "wgmma"};
    TG_INFO("cuda%d: %s, compute %d.%d, %d SMs, %.1f GiB, L2 %d MiB, shared/block %d KiB (%d KiB opt-in), %s%s, "
            "bf16 %s, tensor cores %s, driver %d, NVRTC %d.%d, cuBLASLt %zu",
            ordinal, p->name, p->cc_major, p->cc_minor, p->sm_count, p->total_mem / 1073741824.0,
            p->l2_bytes >> 20, p->smem_per_block >> 10, p->smem_per_block_optin >> 10,
            p->integrated ? "integrated" : "discrete", p->unified ? ", unified memory" : "",
            p->bf16 ? "yes" : "no", tc_names[p->tc_level], p->driver_version, p->nvrtc_major,
            p->nvrtc_minor, p->lt_version);
    *out = d;
    return NULL;
fail:
    device_destroy(d);
    return tg_status_wrap(st, "CUDA device %d", ordinal);
}

tg_status tg_cuda_device_acquire(int ordinal, tg_cuda_device **out_dev) {
    if (ordinal < 0 || ordinal >= MAX_DEVICES)
        return tg_status_new(TG_ERR_INVALID_ARG, "CUDA device index %d out of range", ordinal);
    pthread_mutex_lock(&g_devices_lock);
    tg_status st = NULL;
    if (!g_devices[ordinal]) st = device_create(ordinal, &g_devices[ordinal]);
    if (!st) {
        g_devices[ordinal]->refs++;
        *out_dev = g_devices[ordinal];
    }
    pthread_mutex_unlock(&g_devices_lock);
    return st;
}

void tg_cuda_device_release(tg_cuda_device *dev) {
    if (!dev) return;
    pthread_mutex_lock(&g_devices_lock);
    if (--dev->refs == 0) {
        g_devices[dev->ordinal] = NULL;
        device_destroy(dev);
    }
    pthread_mutex_unlock(&g_devices_lock);
}

tg_status tg_cuda_mem_info(tg_cuda_device *dev, size_t *out_free, size_t *out_total) {
    tg_status st = tg_cuda_device_bind(dev);
    if (st) return st;
    CUresult r = dev->cu->cuMemGetInfo(out_free, out_total);
    return r == CUDA_SUCCESS ? NULL : tg_cuda_status(r, "cuMemGetInfo");
}

/* -------------------------------------------------------------- events */

tg_status tg_cuda_event_new(tg_cuda_device *dev, bool timing, tg_cuda_event **out_event) {
    tg_status st = tg_cuda_device_bind(dev);
    if (st) return st;
    tg_cuda_event *e = tg_calloc(1, sizeof *e);
    if (!e) return tg_status_new(TG_ERR_NO_MEMORY, "cuda event");
    e->dev = dev;
    CUresult r = dev->cu->cuEventCreate(&e->ev, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
        tg_free(e);
        return tg_cuda_status(r, "cuEventCreate");
    }
    *out_event = e;
    return NULL;
}

void tg_cuda_event_free(tg_cuda_event *e) {
    if (!e) return;
    e->dev->cu->cuCtxSetCurrent(e->dev->ctx);
    e->dev->cu->cuEventDestroy(e->ev);
    tg_free(e);
}

tg_status tg_cuda_event_record(tg_cuda_event *e, CUstream stream) {
    CUresult r = e->dev->cu->cuEventRecord(e->ev, stream);
    return r == CUDA_SUCCESS ? NULL : tg_cuda_status(r, "cuEventRecord");
}

tg_status tg_cuda_event_wait(tg_cuda_event *e, CUstream stream) {
    CUresult r = e->dev->cu->cuStreamWaitEvent(stream, e->ev, 0);
    return r == CUDA_SUCCESS ? NULL : tg_cuda_status(r, "cuStreamWaitEvent");
}

tg_status tg_cuda_event_synchronize(tg_cuda_event *e, int timeout_ms) {
    double t0 = tg_clock_now_ms();
    for (;;) {
        CUresult r = e->dev->cu->cuEventQuery(e->ev);
        if (r == CUDA_SUCCESS) return NULL;
        if (r != CUDA_ERROR_NOT_READY) return tg_cuda_status(r, "waiting for a CUDA event");
        if (timeout_ms >= 0 && tg_clock_now_ms() - t0 > timeout_ms)
            return tg_status_new(TG_ERR_TIMEOUT, "the GPU did not finish within %d ms", timeout_ms);
        /* Spin through the first 2 ms (a decoder step finishes in well under
         * that, and a sleep would overshoot it), then sleep in short steps. */
        double waited = tg_clock_now_ms() - t0;
        if (waited > 2.0) {
            struct timespec ts = {0, waited > 100.0 ? 200000 : 20000};
            nanosleep(&ts, NULL);
        }
    }
}
