/*
 * cuda_buffer.c: the CUDA backend's buffers: device memory, pinned host
 * memory (integrated GPUs, CT_CUDA_HOST_BUFFERS=1), caller memory mapped for
 * the GPU (an mmap'd checkpoint) or, where the driver will not map it, a
 * device copy of it; and the buffer table's set, get and memset.
 *
 * Host copies go through the context's pinned staging ring, in order with
 * the stream's work, so a set returns as soon as the bytes are staged; large
 * copies (weights) take the driver's own pipelined copy instead, after the
 * stream's queued work. A buffer is host-readable for the runtime only where
 * its device address is its host address, so the runtime's direct host paths
 * stay right on every kind of GPU.
 *
 * Residency: the seed keeps Metal residency sets alive with a heartbeat
 * thread. Device memory on a discrete GPU needs nothing of the kind, and host
 * memory the GPU maps is page-locked for as long as its buffer lives, so
 * there is deliberately no such thread here.
 *
 * Not here: copies between backends and GPUs (cuda_context.c), the scratch
 * and cuBLASLt workspace (owned by the context).
 */
#include <string.h>
#include <unistd.h>

#include "cuda_internal.h"

/* A new cuda_buffer of context c, nothing allocated yet; c's device bound. */
static tg_status buffer_start(tg_cuda_ctx *c, cuda_buffer **out_cb) {
    tg_status st = tg_cuda_device_bind(c->dev);
    if (st) return st;
    cuda_buffer *cb = tg_calloc(1, sizeof *cb);
    if (!cb) return tg_status_new(TG_ERR_NO_MEMORY, "%s: buffer", c->name);
    cb->ctx = c;
    *out_cb = cb;
    return NULL;
}

/* Gives cb's memory back, by its kind, and frees cb. */
static void buffer_release(const tg_cu_api *cu, cuda_buffer *cb) {
    switch (cb->kind) {
    case CUDA_BUF_DEVICE:
    case CUDA_BUF_COPY: cu->cuMemFree(cb->dptr); break;
    case CUDA_BUF_PINNED: cu->cuMemFreeHost(cb->host); break;
    case CUDA_BUF_REGISTERED: cu->cuMemHostUnregister(cb->reg_base); break;
    }
    tg_free(cb);
}

static void buf_free(tg_buffer *buf) {
    cuda_buffer *cb = buf->impl;
    tg_cuda_ctx *c = cb->ctx;
    const tg_cu_api *cu = c->dev->cu;
    cu->cuCtxSetCurrent(c->dev->ctx);
    if (!c->error) cu->cuStreamSynchronize(c->stream);
    buffer_release(cu, cb);
    tg_free(buf);
}

#define BIG_COPY ((size_t)32 << 20)

/* Host copies go through the pinned staging ring, so a set returns once
 * the bytes are staged (the caller may reuse its memory) and the transfer
 * runs in order with the stream's work. The ring has CUDA_STAGE_SLOTS
 * slots, each with the event of its last copy: a set waits only when the
 * slot it takes still feeds a copy queued behind earlier work, so a
 * decoder queueing steps ahead (tg_sched_compute_async) sets its small
 * inputs without waiting for the GPU. */
static tg_status stage_slot_wait(tg_cuda_ctx *c, int k) {
    if (!c->stage_busy[k]) return NULL;
    tg_cuda_event e = {c->dev, c->stage_ev[k]};
    tg_status st = tg_cuda_event_synchronize(&e, c->sync_timeout_ms);
    if (st) {
        if (tg_status_code(st) == TG_ERR_DEVICE) {
            tg_status_free(st);
            return tg_cuda_ctx_fail(c, c->dev->cu->cuEventQuery(c->stage_ev[k]), "copying through the staging ring");
        }
        return tg_status_wrap(st, "%s: copying through the staging ring", c->name);
    }
    c->stage_busy[k] = false;
    return NULL;
}

/* The slot for the next copy, once its previous copy has finished. */
static tg_status stage_slot(tg_cuda_ctx *c, int *out_slot) {
    int k = c->stage_next;
    c->stage_next = (k + 1) % CUDA_STAGE_SLOTS;
    *out_slot = k;
    return stage_slot_wait(c, k);
}

static tg_status staged_set(tg_cuda_ctx *c, CUdeviceptr dst, const void *data, size_t size) {
    const tg_cu_api *cu = c->dev->cu;
    size_t slot_size = c->stage_size / CUDA_STAGE_SLOTS;
    while (size) {
        size_t n = size < slot_size ? size : slot_size;
        int k;
        tg_status st = stage_slot(c, &k);
        if (st) return st;
        char *stage = (char *)c->stage + (size_t)k * slot_size;
        memcpy(stage, data, n);
        CUresult r = cu->cuMemcpyHtoDAsync(dst, stage, n, c->stream);
        if (r == CUDA_SUCCESS) r = cu->cuEventRecord(c->stage_ev[k], c->stream);
        if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "copying to the device");
        c->stage_busy[k] = true;
        dst += n;
        data = (const char *)data + n;
        size -= n;
    }
    return NULL;
}

static tg_status staged_get(tg_cuda_ctx *c, CUdeviceptr src, void *data, size_t size) {
    const tg_cu_api *cu = c->dev->cu;
    size_t slot_size = c->stage_size / CUDA_STAGE_SLOTS;
    while (size) {
        size_t n = size < slot_size ? size : slot_size;
        int k;
        tg_status st = stage_slot(c, &k);
        if (st) return st;
        char *stage = (char *)c->stage + (size_t)k * slot_size;
        CUresult r = cu->cuMemcpyDtoHAsync(stage, src, n, c->stream);
        if (r == CUDA_SUCCESS) r = cu->cuEventRecord(c->stage_ev[k], c->stream);
        if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "copying from the device");
        c->stage_busy[k] = true;
        if ((st = stage_slot_wait(c, k))) return st;
        memcpy(data, stage, n);
        src += n;
        data = (char *)data + n;
        size -= n;
    }
    return NULL;
}

static tg_status buf_set(tg_buffer *buf, void *addr, const void *data, size_t size) {
    cuda_buffer *cb = buf->impl;
    tg_cuda_ctx *c = cb->ctx;
    tg_status st = tg_cuda_ctx_sticky(c);
    if (st || (st = tg_cuda_device_bind(c->dev))) return st;
    if (cb->host) {
        if ((st = tg_cuda_ctx_wait(c, c->stream))) return st;
        memcpy((char *)cb->host + ((uintptr_t)addr - cb->dptr), data, size);
        return NULL;
    }
    if (size >= BIG_COPY) {
        /* Weights and other large uploads: the driver's own pipelined copy
         * from pageable memory beats one staging buffer; ordered after the
         * stream's queued work by waiting for it first. */
        if ((st = tg_cuda_ctx_wait(c, c->stream))) return st;
        CUresult r = c->dev->cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)addr, data, size);
        return r == CUDA_SUCCESS ? NULL : tg_cuda_ctx_fail(c, r, "copying to the device");
    }
    return staged_set(c, (CUdeviceptr)(uintptr_t)addr, data, size);
}

static tg_status buf_get(tg_buffer *buf, const void *addr, void *data, size_t size) {
    cuda_buffer *cb = buf->impl;
    tg_cuda_ctx *c = cb->ctx;
    tg_status st = tg_cuda_ctx_sticky(c);
    if (st || (st = tg_cuda_device_bind(c->dev))) return st;
    if (cb->host) {
        if ((st = tg_cuda_ctx_wait(c, c->stream))) return st;
        memcpy(data, (const char *)cb->host + ((uintptr_t)addr - cb->dptr), size);
        return NULL;
    }
    if (size >= BIG_COPY) {
        if ((st = tg_cuda_ctx_wait(c, c->stream))) return st;
        CUresult r = c->dev->cu->cuMemcpyDtoH(data, (CUdeviceptr)(uintptr_t)addr, size);
        return r == CUDA_SUCCESS ? NULL : tg_cuda_ctx_fail(c, r, "copying from the device");
    }
    return staged_get(c, (CUdeviceptr)(uintptr_t)addr, data, size);
}

static tg_status buf_memset(tg_buffer *buf, void *addr, uint8_t value, size_t size) {
    cuda_buffer *cb = buf->impl;
    tg_cuda_ctx *c = cb->ctx;
    tg_status st = tg_cuda_ctx_sticky(c);
    if (st || (st = tg_cuda_device_bind(c->dev))) return st;
    CUresult r = c->dev->cu->cuMemsetD8Async((CUdeviceptr)(uintptr_t)addr, value, size, c->stream);
    if (r != CUDA_SUCCESS) return tg_cuda_ctx_fail(c, r, "cuMemsetD8Async");
    if (cb->host) return tg_cuda_ctx_wait(c, c->stream);
    return NULL;
}

static const struct tg_buffer_iface cuda_buffer_iface = {buf_free, buf_set, buf_get, buf_memset};

static tg_status wrap_buffer(tg_cuda_ctx *c, cuda_buffer *cb, size_t size, bool external, tg_buffer **out) {
    tg_buffer *buf = tg_calloc(1, sizeof *buf);
    if (!buf) return tg_status_new(TG_ERR_NO_MEMORY, "%s: buffer", c->name);
    buf->iface = &cuda_buffer_iface;
    buf->backend = c->backend;
    buf->base = (void *)(uintptr_t)cb->dptr;
    buf->size = size;
    /* Host-readable only where the device address is the host address
     * (unified addressing), so the runtime's direct host paths stay right. */
    buf->host = cb->host && (uintptr_t)cb->host == (uintptr_t)cb->dptr;
    buf->external = external;
    buf->impl = cb;
    *out = buf;
    return NULL;
}

tg_status tg_cuda_buffer_alloc(tg_backend *b, size_t size, tg_buffer **out) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const tg_cu_api *cu = c->dev->cu;
    cuda_buffer *cb = NULL;
    tg_status st = buffer_start(c, &cb);
    if (st) return st;
    size_t asz = size ? size : 256;
    bool pinned = c->dev->props.integrated || tg_cuda_env_int("CT_CUDA_HOST_BUFFERS", 0) != 0;
    CUresult r;
    if (pinned) {
        cb->kind = CUDA_BUF_PINNED;
        r = cu->cuMemAllocHost(&cb->host, asz);
        if (r == CUDA_SUCCESS) r = cu->cuMemHostGetDevicePointer(&cb->dptr, cb->host, 0);
    } else {
        cb->kind = CUDA_BUF_DEVICE;
        r = cu->cuMemAlloc(&cb->dptr, asz);
    }
    if (r != CUDA_SUCCESS) {
        if (cb->host) cu->cuMemFreeHost(cb->host);
        tg_free(cb);
        size_t fr = 0, tot = 0;
        cu->cuMemGetInfo(&fr, &tot);
        return tg_status_new(r == CUDA_ERROR_OUT_OF_MEMORY ? TG_ERR_NO_MEMORY : TG_ERR_DEVICE,
                             "%s: cannot allocate %.1f MiB of %s memory (%.1f of %.1f GiB free): %s", c->name,
                             size / 1048576.0, pinned ? "pinned host" : "device", fr / 1073741824.0,
                             tot / 1073741824.0, tg_cuda_result_text(r));
    }
    if ((st = wrap_buffer(c, cb, size, false, out))) buffer_release(cu, cb);
    return st;
}

/* Page-locked host memory for inputs uploaded call after call (a batch's
 * window grids, 143 MB at batch 64): a copy from it is one DMA at the bus's
 * rate, where one from pageable memory goes through the driver's own
 * staging. NULL when the driver refuses (the caller falls back to
 * pageable memory). */
void *tg_cuda_host_alloc(tg_backend *b, size_t size) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    tg_status st = tg_cuda_device_bind(c->dev);
    if (st) {
        tg_status_free(st);
        return NULL;
    }
    void *p = NULL;
    CUresult r = c->dev->cu->cuMemAllocHost(&p, size);
    if (r != CUDA_SUCCESS) {
        TG_INFO("%s: %.1f MiB of page-locked host memory refused (%s)", c->name, size / 1048576.0,
                tg_cuda_result_text(r));
        return NULL;
    }
    return p;
}

void tg_cuda_host_free(tg_backend *b, void *ptr) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    tg_status st = tg_cuda_device_bind(c->dev);
    tg_status_free(st); /* freed whatever the binding says: the context owns the pages */
    c->dev->cu->cuMemFreeHost(ptr);
}

/* Host memory the caller keeps (an mmap'd checkpoint): page-locked and
 * mapped for the GPU; read-only mappings are registered read-only. Where the
 * driver refuses, the buffer becomes a device copy of the memory. */
tg_status tg_cuda_buffer_from_host(tg_backend *b, void *ptr, size_t size, tg_buffer **out) {
    tg_cuda_ctx *c = (tg_cuda_ctx *)b->impl;
    const tg_cu_api *cu = c->dev->cu;
    cuda_buffer *cb = NULL;
    tg_status st = buffer_start(c, &cb);
    if (st) return st;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)ptr & ~(uintptr_t)(page - 1);
    uintptr_t hi = ((uintptr_t)ptr + (size ? size : 1) + page - 1) & ~(uintptr_t)(page - 1);
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (c->dev->props.can_map_host) {
        r = cu->cuMemHostRegister((void *)lo, hi - lo, CU_MEMHOSTREGISTER_DEVICEMAP);
        if (r != CUDA_SUCCESS)
            r = cu->cuMemHostRegister((void *)lo, hi - lo, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_READ_ONLY);
    }
    CUdeviceptr dbase = 0;
    if (r == CUDA_SUCCESS) r = cu->cuMemHostGetDevicePointer(&dbase, (void *)lo, 0);
    if (r == CUDA_SUCCESS) {
        cb->kind = CUDA_BUF_REGISTERED;
        cb->reg_base = (void *)lo;
        cb->host = ptr;
        cb->dptr = dbase + ((uintptr_t)ptr - lo);
    } else {
        TG_INFO("%s: host memory not registered (%s); copying %zu bytes to the device", c->name,
                tg_cuda_result_text(r), size);
        cb->kind = CUDA_BUF_COPY;
        r = cu->cuMemAlloc(&cb->dptr, size ? size : 256);
        if (r == CUDA_SUCCESS && size) r = cu->cuMemcpyHtoD(cb->dptr, ptr, size);
        if (r != CUDA_SUCCESS) {
            if (cb->dptr) cu->cuMemFree(cb->dptr);
            tg_free(cb);
            return tg_cuda_status(r, "copying host memory to the device");
        }
    }
    if ((st = wrap_buffer(c, cb, size, true, out))) buffer_release(cu, cb);
    return st;
}

bool tg_cuda_is_buffer(const tg_buffer *buf) { return buf && buf->iface == &cuda_buffer_iface; }
