/*
 * check.c: the runner behind check.h.
 */
#include "check.h"

#include <unistd.h>

#include "base.h"

int check_failures_in_test;

void check_expect_error(const char *file, int line, const char *expr, tg_status st,
                        tg_code code, const char *needle) {
    if (!st) {
        fprintf(stderr, "%s:%d: %s succeeded; expected error %s\n", file, line, expr,
                tg_code_name(code));
        check_failures_in_test++;
        return;
    }
    if (tg_status_code(st) != code) {
        fprintf(stderr, "%s:%d: %s: expected %s, got %s: %s\n", file, line, expr,
                tg_code_name(code), tg_code_name(tg_status_code(st)), tg_status_message(st));
        check_failures_in_test++;
    } else if (needle && !strstr(tg_status_message(st), needle)) {
        fprintf(stderr, "%s:%d: %s: message \"%s\" lacks \"%s\"\n", file, line, expr,
                tg_status_message(st), needle);
        check_failures_in_test++;
    }
    tg_status_free(st);
}

int check_run(const test_case *tests, int n, int argc, char **argv) {
    int passed = 0, failed = 0;
    const char *filter = argc > 1 ? argv[1] : NULL;
    for (int i = 0; i < n; i++) {
        if (filter && !strstr(tests[i].name, filter)) continue;
        check_failures_in_test = 0;
        tests[i].fn();
        if (check_failures_in_test) {
            fprintf(stderr, "FAIL %s\n", tests[i].name);
            failed++;
        } else {
            printf("ok   %s\n", tests[i].name);
            passed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

char *check_capture_stderr(void (*fn)(void *arg), void *arg) {
    char path[] = "/tmp/ct-test-stderr-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return NULL;
    fflush(stderr);
    int saved = dup(2);
    CHECK(saved >= 0);
    if (saved >= 0) dup2(fd, 2);
    close(fd);
    fn(arg);
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    char *text = NULL;
    size_t n;
    tg_status st = tg_file_read(path, &text, &n);
    CHECK_MSG(st == NULL, "reading the captured stderr: %s", tg_status_message(st));
    tg_status_free(st);
    unlink(path);
    return text;
}
