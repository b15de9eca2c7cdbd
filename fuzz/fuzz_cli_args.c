/*
 * fuzz_cli_args.c: libFuzzer target for the command line's parser
 * (tools/cohere-transcribe/args.c). The input is split at NUL bytes into up
 * to 64 arguments after the program name; any argument list must give
 * EXIT_OK or EXIT_USAGE (EXIT_FAILED only when memory runs out), never a
 * crash, a leak or a read past an argument, and a successful parse must hold
 * the invariants the rest of the program relies on. Messages to stderr are
 * the parser's usage errors (run with -close_fd_mask=2 to hide them).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    enum { MAX_ARGS = 64 };
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)"cohere-transcribe";
    for (size_t i = 0; i <= size && argc <= MAX_ARGS;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    cli_opts o;
    memset(&o, 0, sizeof o);
    bool exit_now = false;
    int rc = cli_parse_args(argc, argv, 1, &o, &exit_now);
    if (rc != EXIT_OK && rc != EXIT_USAGE && rc != EXIT_FAILED) abort();
    if (rc == EXIT_OK && !exit_now) {
        if (o.max_new_tokens <= 0 || o.audio_memory_gb <= 0 || !o.language) abort();
        if (o.n_paths < 0 || (o.n_paths > 0 && !o.paths)) abort();
    }
    cli_opts_free(&o);
    free(buf);
    return 0;
}
