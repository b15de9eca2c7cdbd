/*
 * check.h: the tiny test harness every test program uses.
 *
 * A test program is a list of functions run by TEST_MAIN; each CHECK that
 * fails prints file, line and a message and marks the current test failed, and
 * the program ends with the plain line "N passed, N failed" and exit status 1
 * on any failure. Kept deliberately small: ctest does the orchestration.
 */
#ifndef TEST_CHECK_H
#define TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg_status.h"

extern int check_failures_in_test;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            check_failures_in_test++;                                            \
        }                                                                        \
    } while (0)

#define CHECK_MSG(cond, ...)                                                     \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
            check_failures_in_test++;                                            \
        }                                                                        \
    } while (0)

/* Expects a NULL status; prints and frees it otherwise. */
#define CHECK_OK(expr)                                                           \
    do {                                                                         \
        tg_status check_st_ = (expr);                                            \
        if (check_st_) {                                                         \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, \
                    tg_status_message(check_st_));                               \
            tg_status_free(check_st_);                                           \
            check_failures_in_test++;                                            \
        }                                                                        \
    } while (0)

/* Expects an error of the given code whose message contains `needle`. */
#define CHECK_ERR(expr, code, needle)                                            \
    do {                                                                         \
        tg_status check_st_ = (expr);                                            \
        check_expect_error(__FILE__, __LINE__, #expr, check_st_, (code), (needle)); \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                    \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %g)", \
              (double)(a), (double)(b), (double)(tol))

void check_expect_error(const char *file, int line, const char *expr, tg_status st,
                        tg_code code, const char *needle);

typedef struct test_case {
    const char *name;
    void (*fn)(void);
} test_case;

/* Runs the tests whose name contains argv[1] (all when absent). */
int check_run(const test_case *tests, int n, int argc, char **argv);

/* Runs fn(arg) with stderr (the log's warnings, FFmpeg's debug lines) going
 * to a temporary file, and returns what was written there: a new string
 * (free with tg_free), or NULL after a failed check when it could not be
 * captured. */
char *check_capture_stderr(void (*fn)(void *arg), void *arg);

#define TEST_MAIN(...)                                                           \
    int main(int argc, char **argv) {                                            \
        static const test_case tests_[] = {__VA_ARGS__};                         \
        return check_run(tests_, (int)(sizeof tests_ / sizeof tests_[0]), argc, argv); \
    }
#define T(fn) {#fn, fn}

/* A test program's main where what it tests is not built (why: what is
 * missing): one test that says so and passes. */
#define TEST_MAIN_SKIPPED(why)                      \
    static void test_skipped(void) {                \
        printf("skipped: %s\n", why);               \
        CHECK(1);                                   \
    }                                               \
    TEST_MAIN(T(test_skipped))

#endif
