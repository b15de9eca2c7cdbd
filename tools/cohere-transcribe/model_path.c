/*
 * model_path.c: --model as a checkpoint folder, or as a Hub id (ORG/NAME)
 * looked up in the local Hugging Face cache the way huggingface_hub lays
 * it out: CACHE/models--ORG--NAME/refs/REV holds a commit hash, and
 * CACHE/models--ORG--NAME/snapshots/HASH/ is the checkpoint. The caches
 * tried, in order: $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub.
 * --model-revision is a ref name (default main) or a commit hash. Without
 * --model, cli_default_model: $COHERE_TRANSCRIBE_MODEL, else the bundled
 * demo model.
 *
 * Nothing is downloaded: when the model is not there, the message lists
 * every place looked at and how to fetch it.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static bool is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool is_hash(const char *s) {
    size_t n = strlen(s);
    if (n != 40) return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return false;
    return true;
}

/* snprintf that may cut: every path here is checked by the file system
 * afterwards, so a cut one simply is not found. */
static void fmt(char *buf, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t n, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, n, f, ap);
    va_end(ap);
}

/* Reads the first line of a small file into buf; false when absent. */
static bool read_ref(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\r\n \t")] = 0;
    return ok && buf[0];
}

const char *cli_default_model(const char **out_from) {
    const char *env = getenv(CLI_MODEL_ENV);
    if (env && *env) {
        *out_from = CLI_MODEL_ENV;
        return env;
    }
    *out_from = "the bundled demo model";
    return CT_BUNDLED_MODEL;
}

char *cli_resolve_model(const char *arg, const char *revision) {
    if (is_dir(arg) && !revision) return strdup(arg);
    const char *slash = strchr(arg, '/');
    bool hub_id = slash && slash != arg && slash[1] && !strchr(slash + 1, '/') && arg[0] != '.';
    if (!hub_id) {
        if (revision)
            fprintf(stderr, PROG ": --model-revision applies to a Hub id (ORG/NAME), not the "
                            "folder '%s'\n", arg);
        else
            fprintf(stderr, PROG ": --model %s: no such folder (and not a Hub id ORG/NAME)\n", arg);
        return NULL;
    }
    if (is_dir(arg) && revision) {
        fprintf(stderr, PROG ": --model-revision: '%s' is a local folder, which has no "
                        "revisions\n", arg);
        return NULL;
    }
    const char *rev = revision ? revision : "main";
    char caches[3][4096];
    int n = 0;
    const char *e;
    if ((e = getenv("HF_HUB_CACHE")) && *e) fmt(caches[n++], sizeof caches[0], "%s", e);
    if ((e = getenv("HF_HOME")) && *e) fmt(caches[n++], sizeof caches[0], "%s/hub", e);
    if ((e = getenv("HOME")) && *e)
        fmt(caches[n++], sizeof caches[0], "%s/.cache/huggingface/hub", e);
    char repo[512];
    fmt(repo, sizeof repo, "models--%.*s--%s", (int)(slash - arg), arg, slash + 1);
    char looked[3][8192];
    for (int i = 0; i < n; i++) {
        char path[8192], hash[128];
        if (is_hash(rev)) {
            fmt(hash, sizeof hash, "%s", rev);
        } else {
            fmt(path, sizeof path, "%s/%s/refs/%s", caches[i], repo, rev);
            if (!read_ref(path, hash, sizeof hash)) {
                fmt(looked[i], sizeof looked[i], "%s (no such ref)", path);
                continue;
            }
        }
        fmt(path, sizeof path, "%s/%s/snapshots/%s", caches[i], repo, hash);
        if (is_dir(path)) return strdup(path);
        fmt(looked[i], sizeof looked[i], "%s (no such snapshot)", path);
    }
    fprintf(stderr, PROG ": --model %s: not a folder, and revision '%s' is not in the local "
                    "Hugging Face cache; looked at:\n", arg, rev);
    for (int i = 0; i < n; i++) fprintf(stderr, "  %s\n", looked[i]);
    if (!n) fprintf(stderr, "  (no cache: HF_HUB_CACHE, HF_HOME and HOME are all unset)\n");
    fprintf(stderr, "nothing is downloaded; fetch it first (huggingface-cli download %s) or "
                    "pass the folder\n", arg);
    return NULL;
}
