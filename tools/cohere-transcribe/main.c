/*
 * cohere-transcribe: the command-line front end of the ct_ API.
 *
 *   cohere-transcribe --model DIR [options] FILE.wav...
 *
 * Prints each file's transcript on stdout (prefixed by the file name when
 * there are several). Usage errors (unknown flags, bad values, missing
 * files, an unknown --language, a --dump-tensors path that cannot be
 * written) print a message naming the flag or file and exit with status 2
 * before anything is loaded; a file that fails to transcribe is reported and
 * the others still run (exit status 1). --dump-tensors writes the debug
 * hook's tensors of every clip to one safetensors file, stacked along a
 * leading batch dimension and zero-padded to the longest clip, with the
 * names and layout of the fixtures (tests/data/tiny/README.md). Files
 * longer than one chunk (35 s) report each finished chunk on stderr.
 *
 * Not here: output formats other than plain text, other audio containers.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "cohere_transcribe.h"

#define PROG "cohere-transcribe"

static void usage(FILE *f) {
    fprintf(f,
            "usage: " PROG " --model DIR [options] FILE.wav...\n"
            "\n"
            "Transcribes WAV files (any rate and channel count) with a Cohere Transcribe\n"
            "checkpoint directory (config.json, model.safetensors, tokenizer.model).\n"
            "\n"
            "options:\n"
            "  --model DIR            checkpoint directory (required)\n"
            "  --language CODE        en fr de es it pt nl pl el ar ja zh vi ko (default en)\n"
            "  --no-punctuation       ask for text without punctuation\n"
            "  --backend NAME         cpu, cuda or auto (default auto)\n"
            "  --threads N            CPU threads (default: one per core)\n"
            "  --max-new-tokens N     tokens generated per 35 s chunk at most (default 256)\n"
            "  --batch-size N         chunks of a long file decoded together (default 1)\n"
            "  --frame-bucket N       round mel frames up to a multiple of N (masked), so\n"
            "                         similar lengths share one plan (default 0: off)\n"
            "  --precision f32|auto   f32 matrix products everywhere, or the backend's\n"
            "                         choice (default auto: f32 on the CPU, bf16 on a GPU)\n"
            "  --dump-tensors FILE    write features, encoder_out, prompt_logits and\n"
            "                         generated of every chunk to FILE (safetensors)\n"
            "  --verbose              backend, per-stage timings and speed on stderr\n"
            "  --help                 this text\n");
}

/* ------------------------------------------------------------------ dumps */

typedef struct dump_entry {
    int index;
    char name[48];
    tg_type type;
    int n_dims;
    int64_t shape[2];
    void *data;
} dump_entry;

typedef struct dumper {
    dump_entry *e;
    int n, cap;
    bool failed;
} dumper;

static const char *dump_names[4] = {"features", "encoder_out", "prompt_logits", "generated"};

static void on_dump(void *user, int index, const char *name, tg_type type, int n_dims,
                    const int64_t *shape, const void *data) {
    dumper *d = user;
    bool wanted = false;
    for (int i = 0; i < 4; i++) wanted = wanted || !strcmp(name, dump_names[i]);
    if (!wanted || d->failed || n_dims < 1 || n_dims > 2) return;
    if (!tg_grow((void **)&d->e, &d->cap, d->n + 1, sizeof(dump_entry))) {
        d->failed = true;
        return;
    }
    dump_entry *e = &d->e[d->n];
    memset(e, 0, sizeof *e);
    size_t n = 1;
    for (int i = 0; i < n_dims; i++) n *= (size_t)shape[i];
    e->data = tg_malloc(n * tg_type_size(type) + 1);
    if (!e->data) {
        d->failed = true;
        return;
    }
    memcpy(e->data, data, n * tg_type_size(type));
    e->index = index;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->type = type;
    e->n_dims = n_dims;
    e->shape[0] = shape[0];
    e->shape[1] = n_dims > 1 ? shape[1] : 1;
    d->n++;
}

/* Stacks each name's entries into [n_clips, dims...], zero-padded (the
 * generated ids padded with pad_id, as HF pads finished rows), and writes
 * them to path (through a temporary file renamed into place). */
static tg_status write_dump(const dumper *d, const char *path, int pad_id) {
    if (d->failed) return tg_status_new(TG_ERR_NO_MEMORY, "collecting tensors: out of memory");
    int n_clips = 0;
    for (int i = 0; i < d->n; i++)
        if (d->e[i].index + 1 > n_clips) n_clips = d->e[i].index + 1;
    ct_dump_file *f = NULL;
    tg_status st = ct_dump_file_open(path, &f);
    for (int k = 0; k < 4 && !st; k++) {
        int64_t max0 = 0, max1 = 0;
        int n_dims = 0;
        tg_type type = TG_F32;
        for (int i = 0; i < d->n; i++) {
            const dump_entry *e = &d->e[i];
            if (strcmp(e->name, dump_names[k])) continue;
            if (e->shape[0] > max0) max0 = e->shape[0];
            if (e->shape[1] > max1) max1 = e->shape[1];
            n_dims = e->n_dims;
            type = e->type;
        }
        if (!n_dims) continue;
        size_t es = tg_type_size(type), row = (size_t)max0 * max1;
        uint8_t *buf = tg_calloc((size_t)n_clips * row, es);
        if (!buf) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "writing %s: out of memory", path);
            break;
        }
        if (type == TG_I32)
            for (size_t j = 0; j < (size_t)n_clips * row; j++) ((int32_t *)(void *)buf)[j] = pad_id;
        for (int i = 0; i < d->n; i++) {
            const dump_entry *e = &d->e[i];
            if (strcmp(e->name, dump_names[k])) continue;
            for (int64_t r = 0; r < e->shape[0]; r++)
                memcpy(buf + ((size_t)e->index * row + (size_t)r * max1) * es,
                       (const uint8_t *)e->data + (size_t)r * e->shape[1] * es,
                       (size_t)e->shape[1] * es);
        }
        const int64_t shape[3] = {n_clips, max0, max1};
        st = ct_dump_file_add(f, dump_names[k], type, n_dims + 1, shape, buf);
        tg_free(buf);
    }
    if (!st) st = ct_dump_file_commit(f);
    ct_dump_file_close(f);
    return st;
}

/* ------------------------------------------------------------------- main */

/* True when path can be created or overwritten: its directory exists and is
 * writable, and path is not a directory or a read-only file. Says why not. */
static bool dump_path_ok(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    const char *why = NULL;
    struct stat sb;
    if (!path[0] || (slash && !slash[1]))
        why = "not a file name";
    else if (access(dir, W_OK | X_OK) != 0)
        why = strerror(errno);
    else if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        why = "is a directory";
    else if (access(path, F_OK) == 0 && access(path, W_OK) != 0)
        why = strerror(errno);
    if (why) fprintf(stderr, PROG ": --dump-tensors %s: %s\n", path, why);
    return why == NULL;
}

static int parse_int(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, PROG ": %s: '%s' is not an integer in [%d, %d]\n", flag, v ? v : "",
                lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static void on_progress(void *user, int done, int total) {
    const char *path = user;
    if (total > 1) fprintf(stderr, "%s: chunk %d/%d done\n", path, done, total);
}

int main(int argc, char **argv) {
    ct_options o;
    ct_options_init(&o);
    const char *dump_path = NULL;
    bool verbose = false;
    const char **files = calloc((size_t)argc, sizeof(char *));
    int n_files = 0;
    if (!files) return 1;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = !strcmp(a, "--model") || !strcmp(a, "--language") ||
                     !strcmp(a, "--backend") || !strcmp(a, "--threads") ||
                     !strcmp(a, "--max-new-tokens") || !strcmp(a, "--dump-tensors") ||
                     !strcmp(a, "--batch-size") || !strcmp(a, "--precision") ||
                     !strcmp(a, "--frame-bucket");
        if (takes && !v) {
            fprintf(stderr, PROG ": %s needs a value\n", a);
            goto usage_error;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(files);
            return 0;
        } else if (!strcmp(a, "--model")) {
            o.model_dir = v;
        } else if (!strcmp(a, "--language")) {
            tg_status st = ct_language_check(v);
            if (st) {
                fprintf(stderr, PROG ": --language: %s\n", tg_status_message(st));
                tg_status_free(st);
                goto usage_error;
            }
            o.language = v;
        } else if (!strcmp(a, "--no-punctuation")) {
            o.punctuation = false;
        } else if (!strcmp(a, "--backend")) {
            tg_status st = ct_backend_parse(v, &o.backend);
            if (st) {
                fprintf(stderr, PROG ": --backend: %s\n", tg_status_message(st));
                tg_status_free(st);
                goto usage_error;
            }
        } else if (!strcmp(a, "--threads")) {
            if (parse_int(a, v, 1, 1024, &o.n_threads)) goto usage_error;
        } else if (!strcmp(a, "--max-new-tokens")) {
            if (parse_int(a, v, 1, 1 << 20, &o.max_new_tokens)) goto usage_error;
        } else if (!strcmp(a, "--batch-size")) {
            if (parse_int(a, v, 1, 256, &o.batch_size)) goto usage_error;
        } else if (!strcmp(a, "--frame-bucket")) {
            if (parse_int(a, v, 0, 4096, &o.frame_bucket)) goto usage_error;
        } else if (!strcmp(a, "--precision")) {
            if (!strcmp(v, "f32")) o.f32 = 1;
            else if (!strcmp(v, "auto")) o.f32 = -1;
            else {
                fprintf(stderr, PROG ": --precision: '%s' is not f32 or auto\n", v);
                goto usage_error;
            }
        } else if (!strcmp(a, "--dump-tensors")) {
            dump_path = v;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            verbose = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, PROG ": unknown option '%s' (see --help)\n", a);
            goto usage_error;
        } else {
            files[n_files++] = a;
            continue;
        }
        if (takes) i++;
    }
    if (!o.model_dir) {
        fprintf(stderr, PROG ": --model DIR is required (see --help)\n");
        goto usage_error;
    }
    if (!n_files) {
        fprintf(stderr, PROG ": no input files (see --help)\n");
        goto usage_error;
    }
    for (int i = 0; i < n_files; i++) {
        if (access(files[i], R_OK) != 0) {
            fprintf(stderr, PROG ": %s: %s\n", files[i], strerror(errno));
            goto usage_error;
        }
    }
    if (access(o.model_dir, R_OK) != 0) {
        fprintf(stderr, PROG ": --model %s: %s\n", o.model_dir, strerror(errno));
        goto usage_error;
    }
    /* the dump is written after every file ran: a path that cannot be
     * written must not cost the whole run */
    if (dump_path && !dump_path_ok(dump_path)) goto usage_error;

    dumper dump = {0};
    if (dump_path) {
        o.dump = on_dump;
        o.dump_user = &dump;
    }
    if (verbose) {
        if (tg_log_get_level() > TG_LOG_INFO) tg_log_set_level(TG_LOG_INFO);
    }
    ct_session *s = NULL;
    tg_status st = ct_session_open(&o, &s);
    if (st) {
        fprintf(stderr, PROG ": %s\n", tg_status_message(st));
        tg_status_free(st);
        free(files);
        return 1;
    }
    if (verbose) fprintf(stderr, PROG ": backend %s\n", ct_session_backend(s));

    int rc = 0;
    for (int i = 0; i < n_files; i++) {
        ct_result *r = NULL;
        ct_session_set_progress(s, on_progress, (void *)files[i]);
        st = ct_transcribe_file(s, files[i], &r);
        if (st) {
            fprintf(stderr, PROG ": %s\n", tg_status_message(st));
            tg_status_free(st);
            rc = 1;
            continue;
        }
        if (n_files > 1)
            printf("%s: %s\n", files[i], r->text);
        else
            printf("%s\n", r->text);
        fflush(stdout);
        if (verbose) {
            const ct_timings *t = &r->timings;
            double total = t->load_ms + t->frontend_ms + t->encoder_ms + t->decoder_ms;
            fprintf(stderr,
                    "%s: %.2f s of audio, %d chunk(s), %d tokens: load %.1f ms, frontend %.1f "
                    "ms, encoder %.1f ms, decoder %.1f ms, total %.1f ms (%.1fx real time)\n",
                    files[i], r->duration_s, r->n_chunks, r->n_tokens, t->load_ms,
                    t->frontend_ms, t->encoder_ms, t->decoder_ms, total,
                    total > 0 ? r->duration_s * 1e3 / total : 0.0);
        }
        ct_result_free(r);
    }
    if (dump_path) {
        st = write_dump(&dump, dump_path, ct_session_pad_id(s));
        if (st) {
            fprintf(stderr, PROG ": --dump-tensors %s: %s\n", dump_path, tg_status_message(st));
            tg_status_free(st);
            rc = 1;
        } else if (verbose) {
            fprintf(stderr, PROG ": wrote %s\n", dump_path);
        }
        for (int i = 0; i < dump.n; i++) tg_free(dump.e[i].data);
        tg_free(dump.e);
    }
    ct_session_close(s);
    free(files);
    return rc;

usage_error:
    free(files);
    return 2;
}
