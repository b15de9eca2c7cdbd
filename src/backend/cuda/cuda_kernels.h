/*
 * cuda_kernels.h: the kernel sources embedded at build time (cuda.cmake
 * generates the table from the .cu and .cuh files in kernels/).
 *
 * Not here: compiling them (cuda_device.c).
 */
#ifndef TG_CUDA_KERNELS_H
#define TG_CUDA_KERNELS_H

#include <stddef.h>

typedef struct tg_cuda_source {
    const char *name; /* file name inside kernels/, e.g. "norm.cu" */
    const char *text; /* NUL-terminated */
    size_t size;
} tg_cuda_source;

extern const tg_cuda_source tg_cuda_sources[];
extern const int tg_cuda_n_sources;

/* Kernels precompiled by nvcc at build time (TG_CUDA_PRECOMPILE): one fatbin
 * (sm_80 and sm_90 machine code) per kernel file and specialisation. */
typedef struct tg_cuda_image {
    const char *module;  /* "norm.cu"                 */
    const char *defines; /* "-DTG_OUT16=1", or ""     */
    const unsigned char *data;
    size_t size;
} tg_cuda_image;

extern const tg_cuda_image tg_cuda_images[];
extern const int tg_cuda_n_images;

#endif
