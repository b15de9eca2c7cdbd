/*
 * ptrmap.c: the pointer-to-int map of ptrmap.h. Linear probing over a table
 * kept at most half full; the hash is a multiplicative mix of the address.
 */
#include <stdint.h>

#include "base.h"
#include "ptrmap.h"

static size_t slot_of(const void *key, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)key;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

void tg_ptrmap_clear(tg_ptrmap *m) {
    tg_free(m->keys);
    tg_free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}

static bool rehash(tg_ptrmap *m, size_t cap) {
    const void **keys = tg_calloc(cap, sizeof *keys);
    int *vals = tg_calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        tg_free(keys);
        tg_free(vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t s = slot_of(m->keys[i], cap);
        while (keys[s]) s = (s + 1) & (cap - 1);
        keys[s] = m->keys[i];
        vals[s] = m->vals[i];
    }
    tg_free(m->keys);
    tg_free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return true;
}

bool tg_ptrmap_put(tg_ptrmap *m, const void *key, int val) {
    if (!key) return false;
    if ((m->n + 1) * 2 > m->cap && !rehash(m, m->cap ? m->cap * 2 : 64)) return false;
    size_t s = slot_of(key, m->cap);
    while (m->keys[s] && m->keys[s] != key) s = (s + 1) & (m->cap - 1);
    if (!m->keys[s]) {
        m->keys[s] = key;
        m->n++;
    }
    m->vals[s] = val;
    return true;
}

int tg_ptrmap_get(const tg_ptrmap *m, const void *key) {
    if (!m->cap || !key) return -1;
    size_t s = slot_of(key, m->cap);
    while (m->keys[s]) {
        if (m->keys[s] == key) return m->vals[s];
        s = (s + 1) & (m->cap - 1);
    }
    return -1;
}
