/*
 * inputs.c: the input list and where each input's outputs go.
 *
 * A file named on the command line is taken as given, whatever its
 * extension; a folder is walked (recursively unless --no-recursive) for the
 * audio extensions below, case-insensitively, skipping hidden entries and
 * not following symbolic links to folders (no cycles). The files found
 * under one folder are sorted by case-folded path; everything is then
 * de-duplicated by device and inode (one file named twice, or reached
 * through a link, runs once). Outputs go next to the input, or under
 * --output-dir with the input's path below the folder it was found in.
 *
 * Checked here, before the model loads: inputs exist and are regular
 * files or folders (`-` is refused: standard input is not supported), no
 * two inputs write the same output, and no output path (--dump-tensors,
 * --profile-json, or a transcript file) is a device, FIFO, symlink, folder,
 * an input or a file of the model folder.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static const char *const audio_ext[] = {".aac", ".aif", ".aiff", ".alac", ".flac", ".m4a",
                                        ".mp3", ".mp4", ".oga", ".ogg", ".opus", ".wav",
                                        ".wave", ".webm", ".wma", NULL};

static bool has_audio_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name) return false;
    for (int i = 0; audio_ext[i]; i++)
        if (!strcasecmp(dot, audio_ext[i])) return true;
    return false;
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s", a, a[0] && a[strlen(a) - 1] != '/' ? "/" : "", b);
    return p;
}

static char *shown(const char *path) {
    char *e = ct_escape_line(path, false);
    char *s = strdup(e ? e : path);
    ct_free(e);
    return s;
}

/* A found file: its path, and the part below the folder it was found in. */
typedef struct found {
    char *path;
    const char *rel; /* inside path */
} found;

typedef struct found_list {
    found *v;
    int n, cap;
} found_list;

static bool push_found(found_list *l, char *path, size_t root_len) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        found *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    const char *rel = path + root_len;
    while (*rel == '/') rel++;
    l->v[l->n++] = (found){path, rel};
    return true;
}

static int walk(const char *root, size_t root_len, const char *dir, bool recursive, int depth,
                found_list *out) {
    if (depth > 64) return 0;
    DIR *d = opendir(dir);
    if (!d) {
        char *s = shown(dir);
        cli_msg(PROG ": %s: %s (skipped)\n", s, strerror(errno));
        free(s);
        return 0;
    }
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = join(dir, e->d_name);
        if (!p) {
            rc = -1;
            break;
        }
        struct stat lsb, sb;
        bool keep = false;
        if (lstat(p, &lsb) == 0) {
            if (S_ISDIR(lsb.st_mode)) {
                if (recursive) rc = walk(root, root_len, p, recursive, depth + 1, out);
            } else if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && has_audio_ext(e->d_name)) {
                keep = true;
            }
        }
        if (keep) {
            if (!push_found(out, p, root_len)) rc = -1;
        } else {
            free(p);
        }
    }
    closedir(d);
    return rc;
}

static int cmp_found(const void *a, const void *b) {
    const found *x = a, *y = b;
    int c = strcasecmp(x->rel, y->rel);
    return c ? c : strcmp(x->rel, y->rel);
}

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static char *stem_of(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    return strndup(base, n);
}

static int add_input(cli_inputs *in, const char *path, const char *rel, const cli_opts *o) {
    struct stat sb;
    if (stat(path, &sb) != 0) return 0;
    for (int i = 0; i < in->n; i++)
        if (in->v[i].dev == sb.st_dev && in->v[i].ino == sb.st_ino) return 0; /* de-dup */
    if (in->n == in->cap) {
        int cap = in->cap ? in->cap * 2 : 64;
        cli_input *v = realloc(in->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        in->v = v;
        in->cap = cap;
    }
    cli_input *x = &in->v[in->n];
    memset(x, 0, sizeof *x);
    x->path = strdup(path);
    x->shown = shown(path);
    x->stem = stem_of(path);
    x->dev = sb.st_dev;
    x->ino = sb.st_ino;
    if (!o->output_dir) {
        x->out_dir = dir_of(path);
    } else if (!rel) {
        x->out_dir = strdup(o->output_dir);
    } else {
        char *rd = dir_of(rel);
        x->out_dir = strcmp(rd, ".") ? join(o->output_dir, rd) : strdup(o->output_dir);
        free(rd);
    }
    in->n++;
    if (!x->path || !x->shown || !x->stem || !x->out_dir) return -1;
    return 0;
}

static int cmp_target(const void *a, const void *b) {
    const cli_input *x = *(cli_input *const *)a, *y = *(cli_input *const *)b;
    int c = strcmp(x->out_dir, y->out_dir);
    return c ? c : strcmp(x->stem, y->stem);
}

int cli_collect_inputs(const cli_opts *o, cli_inputs *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < o->n_paths; i++) {
        const char *p = o->paths[i];
        char *s = shown(p);
        struct stat sb;
        int bad = 0;
        if (!strcmp(p, "-")) {
            fprintf(stderr, PROG ": '-': standard input is not supported; give a file or folder\n");
            bad = 1;
        } else if (stat(p, &sb) != 0) {
            fprintf(stderr, PROG ": %s: %s\n", s, strerror(errno));
            bad = 1;
        } else if (S_ISDIR(sb.st_mode)) {
            found_list fl = {0};
            size_t root_len = strlen(p);
            if (walk(p, root_len, p, o->recursive, 0, &fl) != 0) bad = 2;
            if (fl.n) qsort(fl.v, (size_t)fl.n, sizeof *fl.v, cmp_found);
            for (int k = 0; k < fl.n && !bad; k++)
                if (add_input(out, fl.v[k].path, fl.v[k].rel, o)) bad = 2;
            if (!fl.n && !bad && !o->quiet)
                fprintf(stderr, PROG ": %s: no audio files in this folder\n", s);
            for (int k = 0; k < fl.n; k++) free(fl.v[k].path);
            free(fl.v);
        } else if (!S_ISREG(sb.st_mode)) {
            fprintf(stderr, PROG ": %s: not a regular file or a folder\n", s);
            bad = 1;
        } else if (add_input(out, p, NULL, o)) {
            bad = 2;
        }
        free(s);
        if (bad == 2) fprintf(stderr, PROG ": out of memory\n");
        if (bad) return bad == 2 ? EXIT_FAILED : EXIT_USAGE;
    }
    if (!out->n) {
        fprintf(stderr, PROG ": no audio inputs found\n");
        return EXIT_USAGE;
    }
    if (o->text_only) return EXIT_OK;
    /* two inputs writing one set (a.wav and a.flac side by side) */
    cli_input **by = malloc((size_t)out->n * sizeof *by);
    if (!by) return EXIT_FAILED;
    for (int i = 0; i < out->n; i++) by[i] = &out->v[i];
    qsort(by, (size_t)out->n, sizeof *by, cmp_target);
    int rc = EXIT_OK;
    for (int i = 1; i < out->n; i++)
        if (!cmp_target(&by[i - 1], &by[i])) {
            fprintf(stderr, PROG ": %s and %s would both write %s/%s.*; use --output-dir or name "
                    "one of them only\n", by[i - 1]->shown, by[i]->shown, by[i]->out_dir,
                    by[i]->stem);
            rc = EXIT_USAGE;
            break;
        }
    free(by);
    return rc;
}

void cli_inputs_free(cli_inputs *in) {
    for (int i = 0; i < in->n; i++) {
        free(in->v[i].path);
        free(in->v[i].shown);
        free(in->v[i].out_dir);
        free(in->v[i].stem);
        free(in->v[i].text);
    }
    free(in->v);
    memset(in, 0, sizeof *in);
}

/* "an input" / "a model file" / NULL, for an existing regular file. */
static const char *protected_file(const struct stat *sb, const cli_inputs *in,
                                  const char *model_dir) {
    for (int i = 0; in && i < in->n; i++)
        if (in->v[i].dev == sb->st_dev && in->v[i].ino == sb->st_ino) return "an input";
    DIR *d = model_dir ? opendir(model_dir) : NULL;
    const char *why = NULL;
    struct dirent *e;
    while (d && !why && (e = readdir(d))) {
        char *p = join(model_dir, e->d_name);
        struct stat m;
        if (p && stat(p, &m) == 0 && S_ISREG(m.st_mode) && m.st_dev == sb->st_dev &&
            m.st_ino == sb->st_ino)
            why = "a file of the model";
        free(p);
    }
    if (d) closedir(d);
    return why;
}

bool cli_output_path_ok(const char *flag, const char *path, const cli_inputs *in,
                        const char *model_dir) {
    struct stat sb;
    const char *why = NULL;
    char *s = shown(path);
    if (!path[0] || path[strlen(path) - 1] == '/') {
        why = "not a file name";
    } else if (lstat(path, &sb) == 0) {
        if (S_ISLNK(sb.st_mode)) why = "is a symbolic link (give the file it points to)";
        else if (S_ISDIR(sb.st_mode)) why = "is a directory";
        else if (S_ISFIFO(sb.st_mode)) why = "is a FIFO";
        else if (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode)) why = "is a device";
        else if (!S_ISREG(sb.st_mode)) why = "is not a regular file";
        else if (access(path, W_OK) != 0) why = strerror(errno);
        else {
            const char *p = protected_file(&sb, in, model_dir);
            if (p) why = !strcmp(p, "an input") ? "is an input" : "is a file of the model";
        }
    } else {
        char *d = dir_of(path);
        if (access(d, W_OK | X_OK) != 0) why = strerror(errno);
        free(d);
    }
    if (why) fprintf(stderr, PROG ": %s %s: %s; not writing there\n", flag, s, why);
    free(s);
    return why == NULL;
}

void cli_apply_existing(const cli_opts *o, cli_inputs *in) {
    if (o->text_only) return;
    const char *exts[CT_FORMAT_COUNT];
    int n = 0;
    for (int f = 0; f < CT_FORMAT_COUNT; f++)
        if (o->formats[f]) exts[n++] = ct_format_ext((ct_format)f);
    for (int i = 0; i < in->n; i++) {
        cli_input *x = &in->v[i];
        if (x->state != IN_PENDING) continue;
        const char *clash = NULL, *prot = NULL;
        char clash_path[PATH_MAX + 64] = "";
        for (int k = 0; k <= n; k++) {
            char name[PATH_MAX];
            if (k < n) snprintf(name, sizeof name, "%s.%s", x->stem, exts[k]);
            else ct_output_manifest_name(x->stem, name, sizeof name);
            snprintf(clash_path, sizeof clash_path, "%s/%s", x->out_dir, name);
            struct stat sb;
            if (lstat(clash_path, &sb) != 0) continue;
            if (S_ISREG(sb.st_mode) && (prot = protected_file(&sb, in, o->model_dir))) break;
            if (!clash) clash = "exists";
            if (k < n && !S_ISREG(sb.st_mode)) {
                prot = "not a regular file";
                break;
            }
            if (o->existing == EXISTING_ERROR) break;
        }
        char *s = shown(clash_path);
        if (prot) {
            cli_msg(PROG ": %s: output %s is %s; not replacing it\n", x->shown, s, prot);
            x->state = IN_FAILED;
        } else if (clash && o->existing == EXISTING_ERROR) {
            cli_msg(PROG ": %s: output %s exists (use --existing overwrite or skip)\n", x->shown, s);
            x->state = IN_FAILED;
        } else if (o->existing == EXISTING_SKIP && ct_output_set_complete(x->out_dir, x->stem, exts, n)) {
            if (o->verbose) cli_msg(PROG ": %s: outputs complete; skipped\n", x->shown);
            x->state = IN_SKIPPED;
        }
        free(s);
    }
}
