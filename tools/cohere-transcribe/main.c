/*
 * cohere-transcribe: the command-line front end of the ct_ API.
 *
 *   cohere-transcribe [--model MODEL] [options] [--] INPUT...   (default model: cli.h)
 *   cohere-transcribe doctor [--model MODEL]
 *
 * Order of work, so that a mistake costs nothing: parse the options (exit
 * 2 on any usage error), resolve the model, collect the inputs and check
 * every output path, apply --existing, and only then load the model and
 * run (run.c). Exit status: 0 all inputs done (or skipped), 1 some input
 * failed or an output could not be written (stdout included), 2 usage,
 * 130 / 143 after SIGINT / SIGTERM. The other files of the program are
 * listed in cli.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "cli.h"

/* Test hook for tests/cli: CT_TEST_COMPUTE_FAULT=N[:TIMES] makes backend
 * compute N of the run (counting from 0), and the TIMES - 1 after it, fail
 * as a device fault does (tg_backend_fail_after), so that a test can watch
 * a run live through one. */
static void arm_test_fault(void) {
    const char *e = getenv("CT_TEST_COMPUTE_FAULT");
    if (!e || !*e) return;
    char *end, *end2 = NULL;
    long n = strtol(e, &end, 10), times = 1;
    if (*end == ':') times = strtol(end + 1, &end2, 10);
    if (end == e || n < 0 || (*end && (*end != ':' || end2 == end + 1 || *end2 || times < 1))) {
        TG_WARN("CT_TEST_COMPUTE_FAULT=%s is not N[:TIMES] (N >= 0, TIMES >= 1); no fault armed", e);
        return;
    }
    TG_WARN("CT_TEST_COMPUTE_FAULT: backend compute %ld (and %ld after it) will fail, for a test", n,
            times - 1);
    tg_backend_fail_after(TG_BACKEND_FAULT_COMPUTE, n, times);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "doctor")) return cli_doctor(argc, argv);
    cli_opts o;
    memset(&o, 0, sizeof o);
    cli_inputs in = {0};
    bool exit_now = false;
    int rc = cli_parse_args(argc, argv, 1, &o, &exit_now);
    if (rc || exit_now) goto out;
    if (o.quiet && tg_log_get_level() < TG_LOG_ERROR) tg_log_set_level(TG_LOG_ERROR);
    if (o.verbose && tg_log_get_level() > TG_LOG_INFO) tg_log_set_level(TG_LOG_INFO);
    if (!(o.model_dir = cli_resolve_model(o.model_arg, o.revision))) {
        if (o.model_from)
            fprintf(stderr, PROG ": no --model given, so %s was tried (%s); pass --model MODEL\n",
                    o.model_from, o.model_arg);
        rc = EXIT_USAGE;
        goto out;
    }
    if ((rc = cli_collect_inputs(&o, &in))) goto out;
    if ((o.dump_path && !cli_output_path_ok("--dump-tensors", o.dump_path, &in, o.model_dir)) ||
        (o.profile_json && !cli_output_path_ok("--profile-json", o.profile_json, &in, o.model_dir))) {
        rc = EXIT_USAGE;
        goto out;
    }
    int cores = tg_cpu_count();
    if (o.threads > cores && !o.force_threads) {
        if (!o.quiet)
            fprintf(stderr, PROG ": --threads %d is more than the %d core(s) here, which only "
                    "slows it down; using %d (--force-threads keeps %d)\n", o.threads, cores,
                    cores, o.threads);
        o.threads = cores;
    }
    cli_signals_install();
    cli_apply_existing(&o, &in);
    arm_test_fault();
    rc = cli_run(&o, &in);
out:
    cli_inputs_free(&in);
    cli_opts_free(&o);
    /* a transcript that did not reach stdout is a failure (> /dev/full) */
    if (fclose(stdout) != 0 && rc == EXIT_OK) {
        fprintf(stderr, PROG ": writing standard output: %s\n", strerror(errno));
        rc = EXIT_FAILED;
    }
    return rc;
}
