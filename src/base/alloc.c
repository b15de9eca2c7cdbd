/*
 * alloc.c: the one place the project's heap memory comes from.
 *
 * Thin wrappers over malloc and posix_memalign whose only additions are a
 * failure-injection hook for tests (tg_alloc_fail_after) and overflow checks
 * (tg_calloc, tg_grow). Zero-byte requests return a unique pointer, so NULL
 * always means "out of memory". Injection counts every tg_malloc, tg_calloc,
 * tg_realloc, tg_strdup and tg_aligned_alloc; once the budget of successes is
 * spent every later allocation fails until the hook is reset with n < 0, which
 * is what an "inject failure at step k" loop wants.
 *
 * Not here: pools, arenas or tracking of live allocations (ASan does that).
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

/* < 0: injection off; otherwise the number of allocations left to succeed.
 * Atomic so that threads allocating while injection is off never race with
 * a test toggling it (the hook itself is for single-threaded tests). */
static atomic_long fail_budget = -1;

/* True when this allocation must fail. */
static bool injected_failure(void) {
    long b = atomic_load_explicit(&fail_budget, memory_order_relaxed);
    if (b < 0) return false;
    if (b == 0) return true;
    atomic_store_explicit(&fail_budget, b - 1, memory_order_relaxed);
    return false;
}

void tg_alloc_fail_after(long n) {
    atomic_store_explicit(&fail_budget, n < 0 ? -1 : n, memory_order_relaxed);
}

void *tg_malloc(size_t size) {
    if (injected_failure()) return NULL;
    return malloc(size ? size : 1);
}

void *tg_calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    if (injected_failure()) return NULL;
    if (n == 0 || size == 0) return calloc(1, 1);
    return calloc(n, size);
}

/* Like realloc, but size 0 keeps a 1-byte block instead of freeing, so the
 * caller's pointer stays valid and NULL still means failure (p untouched). */
void *tg_realloc(void *p, size_t size) {
    if (injected_failure()) return NULL;
    return realloc(p, size ? size : 1);
}

void tg_free(void *p) {
    free(p);
}

char *tg_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = tg_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void *tg_aligned_alloc(size_t align, size_t size) {
    if (align < sizeof(void *) || (align & (align - 1)) != 0) return NULL;
    if (injected_failure()) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : 1) != 0) return NULL;
    return p;
}

void tg_aligned_free(void *p) {
    free(p);
}

bool tg_grow(void **p, int *cap, int need, size_t elem) {
    if (need < 0 || *cap < 0 || elem == 0) return false;
    if (need <= *cap) return true;
    int new_cap = *cap < 8 ? 8 : *cap;
    while (new_cap < need) new_cap = new_cap > INT_MAX / 2 ? need : new_cap * 2;
    if ((size_t)new_cap > SIZE_MAX / elem) return false;
    void *q = tg_realloc(*p, (size_t)new_cap * elem);
    if (!q) return false;
    *p = q;
    *cap = new_cap;
    return true;
}
