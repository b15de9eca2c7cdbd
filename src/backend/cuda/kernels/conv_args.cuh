/*
 * conv_args.cuh: the by-value argument struct of conv.cu's conv_2d_c1_3x3,
 * the one layout both sides use: the kernel includes it after common.cuh,
 * cuda_ops.c includes it as C (where it also defines the host's struct tg_t,
 * the 80-byte tensor descriptor of common.cuh).
 *
 * Plain fixed-size fields only (64-bit pointer and extents, 32-bit ints), so
 * the C and CUDA compilers lay it out alike; each side checks the layout
 * with static assertions.
 *
 * Not here: the other conv kernels (they still take their arguments one by
 * one) or any code.
 */
#pragma once

#ifndef __CUDACC__
#include <stddef.h>
#include <stdint.h>

/* The host's view of common.cuh's tg_t: the same fields, sizes and order. */
struct tg_t {
    uint64_t p;
    int64_t ne[4];
    int64_t nb[4];
    int32_t type;
    int32_t pad_;
};
#endif

/* Output channels per block of conv_2d_c1_3x3: their 9 weights sit in shared
 * memory, the thread's 9 inputs in registers. */
#define CONV_C1_TILE 32

/* conv_2d with one input channel and a 3x3 kernel: o = conv(k, x), k
 * [3, 3, 1, Cout], x [W, H, 1, N], o [OW, OH, Cout, N], all F32. */
struct conv_c1_args {
    struct tg_t o, k, x;
    int s0, s1, p0, p1; /* stride and padding along W (dim 0) and H (dim 1) */
};

/* 3 x 80 + 4 x 4 = 256 bytes leaves no room for padding, so the sizes pin
 * every offset (NVRTC has no offsetof; the host checks one anyway). */
#ifdef __CUDACC__
static_assert(sizeof(tg_t) == 80, "tg_t: 80 bytes, as the host's struct tg_t");
static_assert(sizeof(int) == 4, "int: 4 bytes, as the host's");
static_assert(sizeof(conv_c1_args) == 256, "conv_c1_args: 256 bytes, as on the host");
#else
_Static_assert(sizeof(struct tg_t) == 80, "struct tg_t: 80 bytes, as kernels/common.cuh's tg_t");
_Static_assert(sizeof(struct conv_c1_args) == 256, "conv_c1_args: 256 bytes, as in the kernel");
_Static_assert(offsetof(struct conv_c1_args, s0) == 240, "conv_c1_args.s0 at byte 240");
#endif
