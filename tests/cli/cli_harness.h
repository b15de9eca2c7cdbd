/*
 * cli_harness.h: running the built cohere-transcribe as a subprocess from
 * the tests of tests/cli, and the small tools those tests share: a scratch
 * folder, WAV files written on the spot, reading outputs back, and a
 * validator for the subset of JSON Schema that schema/transcript.schema.json
 * uses (type, required, properties, additionalProperties: false, items,
 * enum, minimum).
 *
 * The binary is found next to the test program (CMake puts both in the
 * build folder) or named by $CT_CLI_BIN, so the same tests can be run
 * against an older build to see them fail. Static inline, since every
 * tests/cli/test_*.c is its own program.
 */
#ifndef CT_CLI_HARNESS_H
#define CT_CLI_HARNESS_H

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define TINY TEST_DATA_DIR "/tiny"
#define MODEL TINY "/hub"
#define SCHEMA TEST_DATA_DIR "/../../schema/transcript.schema.json"

static char h_cli[1024];
static char h_dir[256];      /* the test's scratch folder */
static char h_out[1 << 20];  /* the last run's stdout */
static char h_err[1 << 16];  /* and stderr */

static inline bool h_find_cli(void) {
    const char *env = getenv("CT_CLI_BIN");
    if (env && *env) {
        snprintf(h_cli, sizeof h_cli, "%s", env);
    } else {
        char self[900];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return false;
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (!slash) return false;
        *slash = 0;
        snprintf(h_cli, sizeof h_cli, "%s/cohere-transcribe", self);
    }
    return access(h_cli, X_OK) == 0;
}

/* True (after saying so) when there is no binary to test. */
static inline bool h_skip_without_cli(void) {
    if (h_find_cli()) return false;
    printf("  (no cohere-transcribe next to the test; skipped)\n");
    return true;
}

static inline void h_slurp(const char *path, char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
}

/* Runs the CLI with argv (NULL-terminated, without the program) and stdout
 * sent to out_path (NULL: captured into h_out). Returns the exit status,
 * 128 + signal for a signal death. */
static inline int h_run_argv(const char *const *argv, const char *out_path) {
    char outp[300], errp[300];
    snprintf(outp, sizeof outp, "%s/.stdout", h_dir);
    snprintf(errp, sizeof errp, "%s/.stderr", h_dir);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out_path ? out_path : outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0) _exit(127);
        dup2(o, 1);
        dup2(e, 2);
        const char *args[64];
        int n = 0;
        args[n++] = h_cli;
        for (int i = 0; argv[i] && n < 63; i++) args[n++] = argv[i];
        args[n] = NULL;
        execv(h_cli, (char *const *)args);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    h_slurp(outp, h_out, sizeof h_out);
    h_slurp(errp, h_err, sizeof h_err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The same with the arguments as a list; up to 40. */
static inline int h_run(const char *first, ...) {
    const char *argv[48];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 47; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    return h_run_argv(argv, NULL);
}

static inline bool h_err_has(const char *needle) {
    bool ok = strstr(h_err, needle) != NULL;
    if (!ok) fprintf(stderr, "  stderr lacks '%s':\n%s\n", needle, h_err);
    return ok;
}

static inline void h_mkdtemp(void) {
    snprintf(h_dir, sizeof h_dir, "/tmp/ct-cli-test-XXXXXX");
    if (!mkdtemp(h_dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static inline void h_rmtree(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", h_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", h_dir);
}

/* h_dir/rel, in a static ring of 8 buffers: copy it to keep it longer. */
static inline const char *h_path(const char *fmt, ...) {
    static char ring[8][700];
    static int k;
    char rel[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    char *p = ring[k++ % 8];
    snprintf(p, 700, "%s/%s", h_dir, rel);
    return p;
}

static inline bool h_exists(const char *path) { return access(path, F_OK) == 0; }

static inline void h_mkdirs(const char *path) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    CHECK(system(cmd) == 0);
}

static inline void h_copy(const char *from, const char *to) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    CHECK(system(cmd) == 0);
}

static inline void h_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(data, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

/* A 16 kHz mono PCM16 WAV of n samples from fn(i) in [-1, 1]. */
static inline void h_write_wav(const char *path, size_t n, double (*fn)(size_t)) {
    size_t bytes = 44 + 2 * n;
    unsigned char *b = calloc(1, bytes);
    if (!b) return;
    uint32_t v;
    memcpy(b, "RIFF", 4);
    v = (uint32_t)(bytes - 8);
    memcpy(b + 4, &v, 4);
    memcpy(b + 8, "WAVEfmt ", 8);
    v = 16;
    memcpy(b + 16, &v, 4);
    uint16_t fmt[2] = {1, 1};
    memcpy(b + 20, fmt, 4);
    v = 16000;
    memcpy(b + 24, &v, 4);
    v = 32000;
    memcpy(b + 28, &v, 4);
    uint16_t al[2] = {2, 16};
    memcpy(b + 32, al, 4);
    memcpy(b + 36, "data", 4);
    v = (uint32_t)(2 * n);
    memcpy(b + 40, &v, 4);
    for (size_t i = 0; i < n; i++) {
        double x = fn ? fn(i) : 0;
        int16_t s = (int16_t)(x * 32767);
        memcpy(b + 44 + 2 * i, &s, 2);
    }
    h_write(path, b, bytes);
    free(b);
}

static inline char *h_read(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

/* Files (not folders) below h_dir whose name contains needle. */
static inline int h_count_files(const char *needle) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "find '%s' -type f -name '*%s*' | wc -l", h_dir, needle);
    FILE *p = popen(cmd, "r");
    int k = -1;
    if (p && fscanf(p, "%d", &k) != 1) k = -1;
    if (p) pclose(p);
    return k;
}

/* ------------------------------------------------- JSON Schema (subset) */

static inline bool h_type_is(const cJSON *v, const char *t) {
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == (double)(long long)v->valuedouble;
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    return false;
}

static inline bool h_json_equal(const cJSON *a, const cJSON *b) { return cJSON_Compare(a, b, true); }

/* Validates v against schema s; prints the first failure with its path. */
static inline bool h_validate(const cJSON *s, const cJSON *v, const char *where) {
    const cJSON *k;
    if ((k = cJSON_GetObjectItem(s, "type")) && cJSON_IsString(k) && !h_type_is(v, k->valuestring)) {
        fprintf(stderr, "  schema: %s is not %s\n", where, k->valuestring);
        return false;
    }
    if ((k = cJSON_GetObjectItem(s, "enum"))) {
        bool found = false;
        const cJSON *e;
        cJSON_ArrayForEach(e, k) found = found || h_json_equal(e, v);
        if (!found) {
            fprintf(stderr, "  schema: %s is not one of the enum\n", where);
            return false;
        }
    }
    if ((k = cJSON_GetObjectItem(s, "minimum")) && cJSON_IsNumber(v) && v->valuedouble < k->valuedouble) {
        fprintf(stderr, "  schema: %s below its minimum\n", where);
        return false;
    }
    const cJSON *props = cJSON_GetObjectItem(s, "properties");
    if (cJSON_IsObject(v)) {
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItem(s, "required")) {
            if (!cJSON_GetObjectItem(v, r->valuestring)) {
                fprintf(stderr, "  schema: %s lacks '%s'\n", where, r->valuestring);
                return false;
            }
        }
        const cJSON *ap = cJSON_GetObjectItem(s, "additionalProperties");
        const cJSON *m;
        cJSON_ArrayForEach(m, v) {
            const cJSON *ps = props ? cJSON_GetObjectItem(props, m->string) : NULL;
            char w[512];
            snprintf(w, sizeof w, "%s.%s", where, m->string);
            if (!ps && cJSON_IsFalse(ap)) {
                fprintf(stderr, "  schema: %s is not allowed\n", w);
                return false;
            }
            if (ps && !h_validate(ps, m, w)) return false;
        }
    }
    const cJSON *items = cJSON_GetObjectItem(s, "items");
    if (items && cJSON_IsArray(v)) {
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            char w[512];
            snprintf(w, sizeof w, "%s[%d]", where, i++);
            if (!h_validate(items, e, w)) return false;
        }
    }
    return true;
}

static inline bool h_validate_file(const char *json_path) {
    char *st = h_read(SCHEMA), *doc = h_read(json_path);
    cJSON *s = st ? cJSON_Parse(st) : NULL, *d = doc ? cJSON_Parse(doc) : NULL;
    bool ok = s && d && h_validate(s, d, "$");
    if (!s) fprintf(stderr, "  cannot read the schema %s\n", SCHEMA);
    if (!d) fprintf(stderr, "  %s is not JSON\n", json_path);
    cJSON_Delete(s);
    cJSON_Delete(d);
    free(st);
    free(doc);
    return ok;
}

#endif
