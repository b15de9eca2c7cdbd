/*
 * test_signals.c: SIGINT and SIGTERM in the middle of a run of
 * cohere-transcribe (run as a subprocess on the tiny model): exit 130 /
 * 143, promptly, and every input has either its complete output set
 * (manifest and every file) or nothing at all -- no partial or temporary
 * file is left behind.
 */
#include "cli_harness.h"

#define N_INPUTS 24

static void interrupt_midway(int sig, int want_rc) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    h_mkdirs(h_path("in"));
    for (int i = 0; i < N_INPUTS; i++) h_copy(TINY "/audio/long.wav", h_path("in/l%02d.wav", i));
    char errp[300];
    snprintf(errp, sizeof errp, "%s/.stderr", h_dir);
    pid_t pid = fork();
    if (pid == 0) {
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(e, 2);
        execl(h_cli, h_cli, "--model", MODEL, "--batch-size", "2", "--formats", "txt", "srt",
              "json", h_path("in"), (char *)NULL);
        _exit(127);
    }
    /* wait for the first complete set, then signal while batches run */
    double t0 = (double)time(NULL);
    /* (minutes under ThreadSanitizer: the first set completes only after its
     * segments' batches, which are sorted by length among all open files;
     * on CI's 2 cores on 2026-12-02 it took more than the 300 s this wait
     * allowed before, so it waits up to 900 s) */
    while (h_count_files(".ct-manifest") < 1 && time(NULL) - t0 < 900) usleep(20000);
    CHECK(h_count_files(".ct-manifest") >= 1);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    kill(pid, sig);
    int st = 0;
    waitpid(pid, &st, 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double waited = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    h_slurp(errp, h_err, sizeof h_err);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == want_rc, "status %d", st);
    CHECK_MSG(waited < 5, "took %.1f s to stop", waited);
    int complete = 0;
    for (int i = 0; i < N_INPUTS; i++) {
        bool m = h_exists(h_path("in/.l%02d.ct-manifest", i));
        bool t = h_exists(h_path("in/l%02d.txt", i)), s = h_exists(h_path("in/l%02d.srt", i)),
             j = h_exists(h_path("in/l%02d.json", i));
        CHECK_MSG((m && t && s && j) || (!m && !t && !s && !j), "l%02d: a partial set", i);
        complete += m;
    }
    CHECK_MSG(complete < N_INPUTS, "the run ended before the signal (%d sets)", complete);
    CHECK(h_count_files(".ct-tmp") == 0);
    printf("  signal %d: %d of %d sets complete, stopped in %.2f s\n", sig, complete, N_INPUTS,
           waited);
    h_rmtree();
}

static void sigint_leaves_whole_sets_and_exits_130(void) { interrupt_midway(SIGINT, 130); }
static void sigterm_leaves_whole_sets_and_exits_143(void) { interrupt_midway(SIGTERM, 143); }

TEST_MAIN(T(sigint_leaves_whole_sets_and_exits_130), T(sigterm_leaves_whole_sets_and_exits_143))
