/*
 * test_alloc.c: every allocation of a model load and one transcription, in
 * turn, fails (base/alloc.c's tg_alloc_fail_after; every later one fails
 * too, as when memory has run out): each run ends in an out-of-memory error
 * naming nothing it should not, never a crash or a leak, and the sweep ends
 * with a run that needs no more allocations than allowed and succeeds.
 * fault.h says how N is chosen and why.
 */
#include <string.h>

#include "fault.h"

static void every_failed_allocation_is_an_error(void) {
    bool ok = false;
    tg_status st = fault_run_once(&ok); /* warm-up: proves the run itself works */
    CHECK_OK(st);
    CHECK(ok);
    long stride = fault_stride(), runs = 0, errors = 0, not_oom = 0, n = 0;
    for (;; n = fault_next(n, stride)) {
        tg_alloc_fail_after(n);
        st = fault_run_once(&ok);
        tg_alloc_fail_after(-1);
        runs++;
        if (!st) {
            CHECK_MSG(ok, "allocation budget %ld: success without a text", n);
            break;
        }
        errors++;
        if (tg_status_code(st) != TG_ERR_NO_MEMORY &&
            !strstr(tg_status_message(st), "out of memory")) {
            if (not_oom++ < 5)
                fprintf(stderr, "budget %ld: not an out-of-memory error: %s\n", n,
                        tg_status_message(st));
        }
        tg_status_free(st);
        if (n > 10000000) {
            CHECK(!"the sweep never ended");
            break;
        }
    }
    printf("  %ld runs (stride %ld), %ld errors, success from budget %ld; %ld errors were "
           "not out of memory\n",
           runs, stride, errors, n, not_oom);
    CHECK(not_oom == 0);
}

TEST_MAIN(T(every_failed_allocation_is_an_error))
