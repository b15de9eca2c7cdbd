/*
 * test_compile.c: every embedded kernel file compiles under NVRTC, without
 * the CUDA toolkit's headers, for the architectures we ship for (sm_80,
 * sm_86, sm_89, sm_90), with each specialisation the ops use.
 *
 * Needs only libnvrtc, not a GPU, so kernel compile errors show up on any
 * machine with NVRTC instead of at the first launch on the GPU machine. The
 * specialisations come from kernels/variants.def (the list nvcc
 * precompiles); every kernel's one parameter is checked in the PTX against
 * its argument struct in kernels/kargs.cuh, the mismatch that would
 * otherwise show only as wrong results on the GPU.
 * Skipped (and counted as passed) where the build has no CUDA backend or
 * NVRTC is not installed.
 */
#include "check.h"

#ifdef TG_HAVE_CUDA
#include <stdlib.h>
#include <time.h>

#include "cuda_internal.h"
#include "cuda_kernels.h"
#include "cuda_variants.h"

static const tg_nvrtc_api *nvrtc_or_skip(void) {
    const tg_nvrtc_api *nv = tg_cuda_load_nvrtc();
    if (!nv) printf("skipped: NVRTC (libnvrtc.so) not installed\n");
    return nv;
}

/* Compiles file with defines for sm_<cc> (PTX when ptx); the image is the
 * caller's to free, NULL after a failure (which the checks report). */
static char *build_image(const tg_nvrtc_api *nv, const char *file, const char *defines, int cc, bool ptx) {
    const tg_cuda_source *src = NULL;
    for (int i = 0; i < tg_cuda_n_sources; i++)
        if (strcmp(tg_cuda_sources[i].name, file) == 0) src = &tg_cuda_sources[i];
    CHECK_MSG(src != NULL, "%s is not embedded", file);
    if (!src) return NULL;
    char opts[512];
    tg_cuda_compile_options(cc, ptx, cc >= 80, cc >= 90 ? 3 : 2, false, defines, opts, sizeof opts);
    char *image = NULL;
    size_t size = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_OK(tg_cuda_nvrtc_build(nv, NULL, file, src->text, opts, ptx, &image, &size));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  %-15s %-26s %s%d %6.0f ms\n", file, defines, ptx ? "ptx, TG_CC " : "sm_", cc,
           (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    fflush(stdout);
    CHECK_MSG(!image || size > 0, "%s %s: empty image", file, defines);
    return image;
}

static void build(const tg_nvrtc_api *nv, const char *file, const char *defines, int cc) {
    tg_free(build_image(nv, file, defines, cc, false));
}

static bool full_run(void) { return getenv("CT_CUDA_TEST_FULL") && strcmp(getenv("CT_CUDA_TEST_FULL"), "0") != 0; }

static void test_every_variant_compiles_for_sm90(void) {
    const tg_nvrtc_api *nv = nvrtc_or_skip();
    if (!nv) return;
    /* Every precompiled specialisation with CT_CUDA_TEST_FULL=1
     * (scripts/gpu-check.sh); otherwise the first and last of each file, to
     * spare shared build machines. */
    bool full = full_run();
    for (int i = 0; i < tg_cuda_n_variants; i++) {
        const tg_cuda_variant *v = &tg_cuda_variants[i];
        bool first = i == 0 || strcmp(tg_cuda_variants[i - 1].module, v->module) != 0;
        bool last = i + 1 == tg_cuda_n_variants || strcmp(tg_cuda_variants[i + 1].module, v->module) != 0;
        if (full || first || last) build(nv, v->module, v->defines, 90);
    }
    /* Specialisations only NVRTC makes: F16 emit, head sizes besides the model's. */
    if (full) {
        build(nv, "norm.cu", "-DTG_OUT16=2", 90);
        build(nv, "elementwise.cu", "-DTG_OP=6 -DTG_OUT16=2", 90);
        build(nv, "attention_mma.cu", "-DTG_AD=16 -DTG_ADV=16", 90);
        build(nv, "attention_mma.cu", "-DTG_AD=64 -DTG_ADV=32", 80);
    }
}

static bool is_variant(const char *module, const char *defines) {
    for (int i = 0; i < tg_cuda_n_variants; i++)
        if (strcmp(tg_cuda_variants[i].module, module) == 0 && strcmp(tg_cuda_variants[i].defines, defines) == 0)
            return true;
    return false;
}

static void test_host_spellings_are_the_precompiled_ones(void) {
    char d[64];
    for (int op = 0; op < TG_EW_COUNT; op++) {
        snprintf(d, sizeof d, TG_DEFS_EW, op, TG_EMIT_F32);
        CHECK_MSG(is_variant("elementwise.cu", d), "elementwise.cu '%s' is not in variants.def", d);
        snprintf(d, sizeof d, TG_DEFS_EW, op, TG_EMIT_BF16);
        CHECK_MSG(is_variant("elementwise.cu", d), "elementwise.cu '%s' is not in variants.def", d);
    }
    CHECK(is_variant("norm.cu", ""));
    snprintf(d, sizeof d, TG_DEFS_OUT16, TG_EMIT_BF16);
    CHECK_MSG(is_variant("norm.cu", d), "norm.cu '%s' is not in variants.def", d);
    for (int dvl = 2; dvl <= 8; dvl++) {
        snprintf(d, sizeof d, TG_DEFS_DVL, dvl);
        CHECK_MSG(is_variant("attention.cu", d), "attention.cu '%s' is not in variants.def", d);
    }
    static const int heads[] = {128, 160}; /* the model's */
    for (int i = 0; i < 2; i++) {
        snprintf(d, sizeof d, TG_DEFS_AM, heads[i], heads[i]);
        CHECK_MSG(is_variant("attention_mma.cu", d), "attention_mma.cu '%s' is not in variants.def", d);
    }
}

/* The byte size of kernel's parameter in ptx, when it has exactly one
 * (".param .align A .b8 <kernel>_param_0[SIZE]"); -1 otherwise. */
static long ptx_param_size(const char *ptx, const char *kernel) {
    char entry[128];
    snprintf(entry, sizeof entry, ".entry %s(", kernel);
    const char *e = strstr(ptx, entry);
    if (!e) return -1;
    const char *close = strchr(e, ')');
    char p0[160], p1[160];
    snprintf(p0, sizeof p0, "%s_param_0[", kernel);
    snprintf(p1, sizeof p1, "%s_param_1", kernel);
    const char *a = strstr(e, p0), *b = strstr(e, p1);
    if (!a || !close || a > close || (b && b < close)) return -1;
    return strtol(a + strlen(p0), NULL, 10);
}

typedef struct kernel_args {
    const char *file, *kernel;
    size_t size;
} kernel_args;

static void test_every_kernel_takes_its_argument_struct(void) {
    const tg_nvrtc_api *nv = nvrtc_or_skip();
    if (!nv) return;
#define ROW(file, kernel, type) {#file ".cu", #kernel, sizeof(type)},
    static const kernel_args rows[] = {TG_KERNELS(ROW)};
#undef ROW
    int n = (int)(sizeof rows / sizeof rows[0]);
    const char *file = NULL;
    char *ptx = NULL;
    for (int i = 0; i < n; i++) {
        if (!file || strcmp(file, rows[i].file) != 0) {
            tg_free(ptx);
            file = rows[i].file;
            ptx = build_image(nv, file, "", 90, true);
        }
        if (!ptx) continue;
        long got = ptx_param_size(ptx, rows[i].kernel);
        CHECK_MSG(got == (long)rows[i].size, "%s %s: one parameter of %zu bytes expected, the PTX has %ld", file,
                  rows[i].kernel, rows[i].size, got);
    }
    tg_free(ptx);
    /* Every kernel the files define is in TG_KERNELS (nop, with no parameter, aside). */
    int defined = 0;
    for (int i = 0; i < tg_cuda_n_sources; i++) {
        const char *t = tg_cuda_sources[i].text;
        for (const char *p = strstr(t, "__global__"); p; p = strstr(p + 1, "__global__"))
            if (strncmp(p - 11, "extern \"C\" ", 11) == 0) defined++;
    }
    CHECK_MSG(defined == n + 1, "%d kernels in kernels/, %d in TG_KERNELS (+ nop)", defined, n);
}

static void test_files_compile_for_older_archs(void) {
    const tg_nvrtc_api *nv = nvrtc_or_skip();
    if (!nv) return;
    static const int ccs[] = {80, 86, 89};
    bool full = full_run();
    for (int k = full ? 0 : 2; k < 3; k++) {
        build(nv, "elementwise.cu", "-DTG_OP=6", ccs[k]);
        build(nv, "norm.cu", "", ccs[k]);
        build(nv, "probe.cu", "", ccs[k]);
        build(nv, "conv.cu", "", ccs[k]); /* conv_2d_c1_3x3's args struct, checked at sm_80..89 too */
    }
}

static void test_bad_source_reports_the_log(void) {
    const tg_nvrtc_api *nv = nvrtc_or_skip();
    if (!nv) return;
    char opts[256];
    tg_cuda_compile_options(90, false, true, 3, false, "", opts, sizeof opts);
    char *image = NULL;
    size_t size = 0;
    CHECK_ERR(tg_cuda_nvrtc_build(nv, NULL, "broken.cu", "extern \"C\" __global__ void k() { undeclared_x = 1; }",
                                  opts, false, &image, &size),
              TG_ERR_DEVICE, "undeclared_x");
    CHECK(image == NULL);
}

TEST_MAIN(T(test_every_variant_compiles_for_sm90), T(test_host_spellings_are_the_precompiled_ones),
          T(test_every_kernel_takes_its_argument_struct), T(test_files_compile_for_older_archs),
          T(test_bad_source_reports_the_log))
#else
TEST_MAIN_SKIPPED("built without the CUDA backend")
#endif
