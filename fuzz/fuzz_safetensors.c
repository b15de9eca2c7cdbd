/*
 * fuzz_safetensors.c: libFuzzer target for the safetensors header validator
 * (st_open_memory). Any input must either be refused with a status or give a
 * set whose every tensor lies inside the input, is found by its own name and
 * has a byte size equal to shape x dtype size; anything else aborts so the
 * fuzzer reports it. Does not fuzz the file mapping or shard index paths
 * (they end in the same parser).
 */
#include <stdint.h>
#include <stdlib.h>

#include "base.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_log_set_level(TG_LOG_NONE);
    st_set *set = NULL;
    tg_status st = st_open_memory(data, size, "fuzz.safetensors", &set);
    if (st) {
        if (set || !tg_status_message(st)[0]) abort();
        tg_status_free(st);
        return 0;
    }
    for (int i = 0; i < st_count(set); i++) {
        const st_tensor *t = st_at(set, i);
        if (!t || st_find(set, t->name) != t) abort();
        if (t->n_dims < 0 || t->n_dims > ST_MAX_DIMS) abort();
        uint64_t elems = 1;
        for (int d = 0; d < t->n_dims; d++) elems *= (uint64_t)t->shape[d];
        if (elems * st_dtype_size(t->dtype) != t->size) abort();
        if (t->size) {
            if (t->data < data || t->data + t->size > data + size) abort();
            volatile uint8_t sink = t->data[0] ^ t->data[t->size - 1];
            (void)sink;
        }
    }
    st_close(set);
    return 0;
}
