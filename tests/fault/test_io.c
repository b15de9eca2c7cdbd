/*
 * test_io.c: every file operation of a model load and one transcription
 * (the reads of config.json, generation_config.json and the tokenizer, the
 * mappings of the checkpoint and the WAV), in turn, fails with EIO: each run
 * ends in an error that says so, never a crash or a leak. Then each read in
 * turn returns short: every run must succeed, with the same text, since a
 * short read is not an error. fault.h says how the runs are chosen.
 */
#include <string.h>

#include "fault.h"

/* The text of a run without faults, and how many file operations it made. */
static char *reference_text(long *out_ops) {
    bool ok = false;
    char *text = NULL;
    tg_file_fail_io_after(-1, TG_IO_FAULT_EIO); /* off; the count starts again */
    CHECK_OK(fault_run_text(&ok, &text));
    *out_ops = tg_file_io_count();
    return text;
}

static void every_failed_read_is_an_error(void) {
    long ops = 0;
    char *want = reference_text(&ops);
    CHECK(want != NULL && ops > 0);
    long stride = fault_stride() > 1 ? 2 : 1, runs = 0;
    for (long n = 0; n < ops; n += stride) {
        bool ok = false;
        tg_file_fail_io_after(n, TG_IO_FAULT_EIO);
        tg_status st = fault_run_once(&ok);
        tg_file_fail_io_after(-1, TG_IO_FAULT_EIO);
        runs++;
        CHECK_MSG(st != NULL, "I/O operation %ld of %ld failed with EIO, yet the run succeeded",
                  n, ops);
        if (st)
            CHECK_MSG(strstr(tg_status_message(st), "Input/output error"),
                      "operation %ld: %s", n, tg_status_message(st));
        tg_status_free(st);
    }
    printf("  EIO: %ld runs over %ld file operations\n", runs, ops);
    runs = 0;
    for (long n = 0; n < ops; n += stride) {
        bool ok = false;
        char *text = NULL;
        tg_file_fail_io_after(n, TG_IO_FAULT_SHORT);
        tg_status st = fault_run_text(&ok, &text);
        tg_file_fail_io_after(-1, TG_IO_FAULT_EIO);
        runs++;
        CHECK_MSG(!st, "a short read at operation %ld: %s", n, tg_status_message(st));
        CHECK(ok && text && want && strcmp(text, want) == 0);
        tg_free(text);
        tg_status_free(st);
    }
    printf("  short reads: %ld runs\n", runs);
    tg_free(want);
}

TEST_MAIN(T(every_failed_read_is_an_error))
