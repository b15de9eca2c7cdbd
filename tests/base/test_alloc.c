/*
 * test_alloc.c: the allocator wrappers: failure injection fails exactly at the
 * requested count, overflow checks, zero sizes, alignment, tg_grow.
 */
#include <stdint.h>

#include "base.h"
#include "check.h"

static void injection_fails_exactly_after_n_allocations(void) {
    for (long n = 0; n < 6; n++) {
        void *ok[6] = {0};
        tg_alloc_fail_after(n);
        for (long i = 0; i < n; i++) {
            ok[i] = tg_malloc(8);
            CHECK_MSG(ok[i] != NULL, "allocation %ld of budget %ld failed early", i, n);
        }
        CHECK_MSG(tg_malloc(8) == NULL, "allocation %ld should fail", n);
        /* Failure persists until reset, so every later step fails too. */
        CHECK(tg_calloc(1, 8) == NULL);
        CHECK(tg_strdup("x") == NULL);
        CHECK(tg_aligned_alloc(64, 64) == NULL);
        tg_alloc_fail_after(-1);
        for (long i = 0; i < n; i++) tg_free(ok[i]);
    }
    void *p = tg_malloc(8);
    CHECK(p != NULL);
    tg_free(p);
}

static void injection_counts_every_allocating_function(void) {
    tg_alloc_fail_after(4);
    void *a = tg_malloc(4);
    void *b = tg_calloc(2, 4);
    char *c = tg_strdup("abc");
    void *d = tg_aligned_alloc(32, 4);
    void *e = tg_realloc(NULL, 4); /* the fifth: fails */
    tg_alloc_fail_after(-1);
    CHECK(a && b && c && d);
    CHECK(e == NULL);
    /* A failed realloc leaves the old block alone. */
    tg_alloc_fail_after(0);
    void *a2 = tg_realloc(a, 1 << 20);
    tg_alloc_fail_after(-1);
    CHECK(a2 == NULL);
    tg_free(a);
    tg_free(b);
    tg_free(c);
    tg_aligned_free(d);
}

static void calloc_rejects_overflow_and_zeroes(void) {
    CHECK(tg_calloc(SIZE_MAX / 2, 3) == NULL);
    CHECK(tg_calloc((size_t)1 << 40, (size_t)1 << 40) == NULL);
    unsigned char *p = tg_calloc(100, 3);
    CHECK(p != NULL);
    int nonzero = 0;
    for (int i = 0; p && i < 300; i++) nonzero += p[i] != 0;
    CHECK(nonzero == 0);
    tg_free(p);
}

static void zero_sizes_give_unique_pointers(void) {
    void *a = tg_malloc(0), *b = tg_malloc(0), *c = tg_calloc(0, 8);
    CHECK(a && b && c);
    CHECK(a != b);
    void *d = tg_realloc(a, 0);
    CHECK(d != NULL);
    tg_free(d);
    tg_free(b);
    tg_free(c);
    tg_free(NULL);
}

static void strdup_copies(void) {
    char *s = tg_strdup("hello");
    CHECK(s && strcmp(s, "hello") == 0);
    tg_free(s);
    CHECK(tg_strdup(NULL) == NULL);
}

static void aligned_alloc_honours_alignment(void) {
    for (size_t align = sizeof(void *); align <= 4096; align *= 2) {
        for (size_t size = 1; size < 10000; size = size * 3 + 1) {
            unsigned char *p = tg_aligned_alloc(align, size);
            CHECK(p != NULL);
            CHECK_MSG(((uintptr_t)p & (align - 1)) == 0, "%p not aligned to %zu", (void *)p, align);
            if (p) memset(p, 0xab, size); /* ASan checks the whole size is ours */
            tg_aligned_free(p);
        }
    }
    CHECK(tg_aligned_alloc(48, 64) == NULL); /* not a power of two */
    CHECK(tg_aligned_alloc(2, 64) == NULL);  /* below pointer size */
    tg_aligned_free(NULL);
}

static void grow_reaches_need_and_keeps_contents(void) {
    int *arr = NULL;
    int cap = 0;
    for (int i = 0; i < 1000; i++) {
        CHECK(tg_grow((void **)&arr, &cap, i + 1, sizeof *arr));
        CHECK(cap >= i + 1);
        arr[i] = i * 7;
    }
    int bad = 0;
    for (int i = 0; i < 1000; i++) bad += arr[i] != i * 7;
    CHECK(bad == 0);
    int before = cap;
    CHECK(tg_grow((void **)&arr, &cap, 5, sizeof *arr)); /* already big enough */
    CHECK(cap == before);
    tg_free(arr);
}

static void grow_failure_leaves_array_unchanged(void) {
    int *arr = NULL;
    int cap = 0;
    CHECK(tg_grow((void **)&arr, &cap, 4, sizeof *arr));
    arr[0] = 42;
    int *old = arr;
    int old_cap = cap;
    tg_alloc_fail_after(0);
    CHECK(!tg_grow((void **)&arr, &cap, 1000, sizeof *arr));
    tg_alloc_fail_after(-1);
    CHECK(arr == old && cap == old_cap && arr[0] == 42);
    CHECK(!tg_grow((void **)&arr, &cap, -1, sizeof *arr));
    CHECK(!tg_grow((void **)&arr, &cap, 0x7fffffff, SIZE_MAX / 4)); /* bytes overflow */
    CHECK(arr == old && cap == old_cap);
    tg_free(arr);
}

TEST_MAIN(T(injection_fails_exactly_after_n_allocations),
          T(injection_counts_every_allocating_function), T(calloc_rejects_overflow_and_zeroes),
          T(zero_sizes_give_unique_pointers), T(strdup_copies),
          T(aligned_alloc_honours_alignment), T(grow_reaches_need_and_keeps_contents),
          T(grow_failure_leaves_array_unchanged))
