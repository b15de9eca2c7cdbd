/*
 * cuda_absent.c: tg_backend_cuda_new for builds without the CUDA headers.
 *
 * CMake compiles this file instead of src/backend/cuda/ when cuda.h, nvrtc.h
 * or cublasLt.h were not found, so the public API stays the same and callers
 * fall back to the CPU on the error it returns. It deliberately does nothing
 * else: no probing for a driver, no partial backend.
 */
#include "tg.h"

tg_status tg_backend_cuda_new(int device, tg_backend **out_backend) {
    (void)device;
    if (out_backend) *out_backend = NULL;
    return tg_status_new(TG_ERR_UNSUPPORTED,
                         "this build has no CUDA backend (CUDA headers were not found at "
                         "build time)");
}
