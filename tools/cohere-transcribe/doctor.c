/*
 * doctor.c: `cohere-transcribe doctor [--model MODEL] [--model-revision R]`,
 * a check of what a run needs, without running one: the versions, the
 * model folder (files, config, tokenizer, tensor count and types, read
 * from the headers only: ct_model_inspect loads no weights), the GPU and
 * its driver (a CUDA backend is started and freed), the compiled-kernel
 * cache folder and the audio decoder. Each line starts with "ok", "warn"
 * or "FAIL"; the exit status is 1 when any line failed.
 *
 * Not here: timing anything, downloading anything.
 */
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "cli.h"

static int failures;

static void line(const char *tag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const char *tag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%-5s", tag);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    if (!strcmp(tag, "FAIL")) failures++;
}

static void check_model(const char *arg, const char *rev) {
    char *dir = cli_resolve_model(arg, rev);
    if (!dir) {
        line("FAIL", "model %s: not found (see above)", arg);
        return;
    }
    line("ok", "model folder %s", dir);
    static const char *const names[] = {"config.json", "model.safetensors",
                                        "model.safetensors.index.json", "tokenizer.model",
                                        "tokenizer.json", "generation_config.json", NULL};
    char present[512] = "";
    for (int i = 0; names[i]; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (access(p, R_OK) == 0) {
            strncat(present, " ", sizeof present - strlen(present) - 1);
            strncat(present, names[i], sizeof present - strlen(present) - 1);
        }
    }
    line("ok", "files:%s", present);
    ct_model_info mi;
    tg_status st = ct_model_inspect(dir, &mi);
    if (st) {
        line("FAIL", "model: %s", tg_status_message(st));
        tg_status_free(st);
    } else {
        line("ok", "config: encoder %d x %d, decoder %d x %d, vocab %d (config hash %016llx)",
             mi.enc_layers, mi.enc_hidden, mi.dec_layers, mi.dec_hidden, mi.vocab,
             (unsigned long long)mi.config_hash);
        line("ok", "weights: %d tensors in %d file(s), %.3f M parameters, %s", mi.n_tensors,
             mi.n_shards, (double)mi.n_params / 1e6, mi.dtypes);
        line(mi.tokenizer_size == mi.vocab ? "ok" : "warn", "tokenizer: %d pieces%s",
             mi.tokenizer_size, mi.tokenizer_size == mi.vocab ? "" : " (the config says otherwise)");
    }
    free(dir);
}

static void check_cache(void) {
    const char *off = getenv("CT_CUDA_CACHE");
    if (off && !strcmp(off, "0")) {
        line("ok", "kernel cache: disabled (CT_CUDA_CACHE=0)");
        return;
    }
    char dir[4096];
    const char *e = getenv("CT_CUDA_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (e && *e) snprintf(dir, sizeof dir, "%s", e);
    else if (x && *x) snprintf(dir, sizeof dir, "%s/cohere-transcribe/cuda", x);
    else snprintf(dir, sizeof dir, "%s/.cache/cohere-transcribe/cuda", h ? h : ".");
    DIR *d = opendir(dir);
    if (!d) {
        line(errno == ENOENT ? "ok" : "warn", "kernel cache %s: %s", dir,
             errno == ENOENT ? "not created yet (made on the first GPU run)" : strerror(errno));
        return;
    }
    long n = 0;
    long long bytes = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char p[8192];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (de->d_name[0] != '.' && stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
            n++;
            bytes += sb.st_size;
        }
    }
    closedir(d);
    line(access(dir, W_OK) == 0 ? "ok" : "warn", "kernel cache %s: %ld entries, %.1f MB%s", dir,
         n, bytes / 1e6, access(dir, W_OK) == 0 ? "" : " (not writable)");
}

int cli_doctor(int argc, char **argv) {
    const char *model = NULL, *rev = NULL;
    for (int i = 2; i < argc; i++) {
        if ((!strcmp(argv[i], "--model") || !strcmp(argv[i], "--model-revision")) &&
            (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))) {
            fprintf(stderr, PROG " doctor: %s needs a value\n", argv[i]);
            return EXIT_USAGE;
        }
        if (!strcmp(argv[i], "--model")) model = argv[++i];
        else if (!strcmp(argv[i], "--model-revision")) rev = argv[++i];
        else if (!strncmp(argv[i], "--model=", 8)) model = argv[i] + 8;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: " PROG " doctor [--model MODEL] [--model-revision REV]\n");
            return EXIT_OK;
        } else {
            fprintf(stderr, PROG " doctor: unknown argument '%s'\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    line("ok", PROG " %s", CLI_VERSION);
    line("ok", "cpu: %d core(s)", tg_cpu_count());
    tg_backend *b = NULL;
    tg_status st = tg_backend_cuda_new(0, &b);
    if (st) {
        line("warn", "gpu: none usable (%s); runs use the CPU", tg_status_message(st));
        tg_status_free(st);
    } else {
        line("ok", "gpu: %s", tg_backend_name(b));
        tg_backend_free(b);
    }
    check_cache();
    line(ct_audio_has_ffmpeg() ? "ok" : "warn", "audio decoder: %s%s", ct_audio_decoder_version(),
         ct_audio_has_ffmpeg() ? "" : " (no FFmpeg in this build: WAV only)");
    if (!model || !*model) {
        const char *from;
        model = cli_default_model(&from);
        if (!strcmp(from, CLI_MODEL_ENV)) line("ok", "model from $" CLI_MODEL_ENV);
    }
    check_model(model, rev);
    if (fflush(stdout) != 0) return EXIT_FAILED;
    return failures ? EXIT_FAILED : EXIT_OK;
}
