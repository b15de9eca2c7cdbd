/*
 * cuda_variants.h: how the host spells a kernel's specialisation (the
 * defines it compiles with), and the table of those precompiled by nvcc,
 * read from kernels/variants.def, the list cuda.cmake builds from.
 *
 * The precompiled images are found by module and defines string, so the
 * spellings here and the lines of variants.def must agree character for
 * character; tests/cuda/test_compile.c checks that they do for every op
 * code and store kind, and builds every entry under NVRTC.
 *
 * Not here: the images themselves (cuda_kernels.h), the codes the defines
 * carry (kernels/kargs.cuh).
 */
#ifndef TG_CUDA_VARIANTS_H
#define TG_CUDA_VARIANTS_H

/* elementwise.cu: a TG_EW_* op and a TG_EMIT_* store kind. */
#define TG_DEFS_EW "-DTG_OP=%d -DTG_OUT16=%d"
/* norm.cu storing 16-bit (a TG_EMIT_* kind other than F32, which is ""). */
#define TG_DEFS_OUT16 "-DTG_OUT16=%d"
/* attention.cu: output dims per lane, max(2, ceil(Dv / 32)). */
#define TG_DEFS_DVL "-DTG_DVL=%d"
/* attention_mma.cu: head sizes of q/k and of v. */
#define TG_DEFS_AM "-DTG_AD=%d -DTG_ADV=%d"

typedef struct tg_cuda_variant {
    const char *module;  /* "norm.cu"              */
    const char *defines; /* "-DTG_OUT16=1", or ""  */
} tg_cuda_variant;

/* Every line of kernels/variants.def, in order (cuda_device.c). */
extern const tg_cuda_variant tg_cuda_variants[];
extern const int tg_cuda_n_variants;

#endif
