/*
 * ptrmap.h: a small open-addressing map from pointers to ints (internal).
 *
 * Graph building, planning and scheduling all need "have I seen this tensor,
 * and what index did I give it" for tensors that may come from several
 * contexts, so tensor ids alone are not enough. Grows by doubling; no removal
 * (these maps live for one pass).
 */
#ifndef TG_PTRMAP_H
#define TG_PTRMAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tg_ptrmap {
    const void **keys;
    int *vals;
    size_t cap;   /* power of two, or 0 */
    size_t n;
} tg_ptrmap;

/* An empty map needs no allocation: tg_ptrmap m = {0}. */
void tg_ptrmap_clear(tg_ptrmap *m);   /* frees the storage; m is empty again */
/* Sets key to val; false when out of memory (the map is unchanged). */
bool tg_ptrmap_put(tg_ptrmap *m, const void *key, int val);
/* The value of key, or -1 when absent. */
int tg_ptrmap_get(const tg_ptrmap *m, const void *key);

#endif
