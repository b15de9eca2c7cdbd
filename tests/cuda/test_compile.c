/*
 * test_compile.c: every embedded kernel file compiles under NVRTC, without
 * the CUDA toolkit's headers, for the architectures we ship for (sm_80,
 * sm_86, sm_89, sm_90), with each specialisation the ops use.
 *
 * Needs only libnvrtc, not a GPU, so kernel compile errors show up on any
 * machine with NVRTC instead of at the first launch on the GPU machine.
 * Skipped (and counted as passed) where the build has no CUDA backend or
 * NVRTC is not installed.
 */
#include "check.h"

#ifdef TG_HAVE_CUDA
#include <stdlib.h>
#include <time.h>

#include "cuda_internal.h"
#include "cuda_kernels.h"

static const tg_nvrtc_api *nvrtc_or_skip(void) {
    const tg_nvrtc_api *nv = tg_cuda_load_nvrtc();
    if (!nv) printf("skipped: NVRTC (libnvrtc.so) not installed\n");
    return nv;
}

static void build(const tg_nvrtc_api *nv, const char *file, const char *defines, int cc) {
    const tg_cuda_source *src = NULL;
    for (int i = 0; i < tg_cuda_n_sources; i++)
        if (strcmp(tg_cuda_sources[i].name, file) == 0) src = &tg_cuda_sources[i];
    CHECK_MSG(src != NULL, "%s is not embedded", file);
    if (!src) return;
    char opts[512];
    tg_cuda_compile_options(cc, false, cc >= 80, cc >= 90 ? 3 : 2, false, defines, opts, sizeof opts);
    char *image = NULL;
    size_t size = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_OK(tg_cuda_nvrtc_build(nv, NULL, file, src->text, opts, false, &image, &size));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  %-15s %-12s sm_%d %6.0f ms\n", file, defines, cc,
           (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    fflush(stdout);
    CHECK_MSG(size > 0, "%s %s: empty image", file, defines);
    tg_free(image);
}

static void test_every_file_compiles_for_sm90(void) {
    const tg_nvrtc_api *nv = nvrtc_or_skip();
    if (!nv) return;
    static const char *plain[] = {"norm.cu", "softmax.cu", "conv.cu", "rows.cu", "copy.cu", "reduce.cu", "probe.cu", "attention_split.cu"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) build(nv, plain[i], "", 90);
    /* Every specialisation with CT_CUDA_TEST_FULL=1 (scripts/gpu-check.sh);
     * a sample otherwise, to spare shared build machines. */
    bool full = getenv("CT_CUDA_TEST_FULL") && strcmp(getenv("CT_CUDA_TEST_FULL"), "0") != 0;
    for (int op = 0; op < 8; op += full ? 1 : 6) {
        char d[48];
        snprintf(d, sizeof d, "-DTG_OP=%d -DTG_OUT16=%d", op, op & 1);
        build(nv, "elementwise.cu", d, 90);
    }
    build(nv, "norm.cu", "-DTG_OUT16=1", 90);
    build(nv, "attention_mma.cu", "-DTG_AD=128 -DTG_ADV=128", 90);
    if (full) {
        build(nv, "attention_mma.cu", "-DTG_AD=160 -DTG_ADV=160", 90);
        build(nv, "attention_mma.cu", "-DTG_AD=16 -DTG_ADV=16", 90);
        build(nv, "attention_mma.cu", "-DTG_AD=64 -DTG_ADV=32", 80);
    }
    for (int dvl = 2; dvl <= 8; dvl += full ? 1 : 6) {
        char d[32];
        snprintf(d, sizeof d, "-DTG_DVL=%d", dvl);
        build(nv, "attention.cu", d, 90);
    }
}

static void test_files_compile_for_older_archs(void) {
    const tg_nvrtc_api *nv = nvrtc_or_skip();
    if (!nv) return;
    static const int ccs[] = {80, 86, 89};
    bool full = getenv("CT_CUDA_TEST_FULL") && strcmp(getenv("CT_CUDA_TEST_FULL"), "0") != 0;
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

TEST_MAIN(T(test_every_file_compiles_for_sm90), T(test_files_compile_for_older_archs),
          T(test_bad_source_reports_the_log))
#else
static void test_skipped_without_cuda(void) {
    printf("skipped: built without the CUDA backend\n");
    CHECK(1);
}
TEST_MAIN(T(test_skipped_without_cuda))
#endif
