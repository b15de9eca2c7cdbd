/*
 * cli.h: what the files of the command-line program share (internal to
 * tools/cohere-transcribe).
 *
 *   main.c      entry, the `doctor` dispatch, exit codes
 *   args.c      option parsing into cli_opts (usage errors: exit 2)
 *   model_path.c  --model as a folder or a Hub id in the local HF cache
 *   inputs.c    files and folders to a sorted, de-duplicated input list,
 *               each with its output folder and stem; path safety checks
 *   run.c       decode/segment thread, batches across files, retries,
 *               writing each input's output set, text to stdout
 *   report.c    messages, the progress bar, signals
 *   doctor.c    `cohere-transcribe doctor`
 *   dump.c      --dump-tensors
 *
 * The program sees only include/ and the base layer (README "Layout").
 */
#ifndef CT_CLI_H
#define CT_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cohere_transcribe.h"

#define PROG "cohere-transcribe"
/* The model used when --model is not given: $COHERE_TRANSCRIBE_MODEL, else
 * the bundled demo model of the source tree the program was built from
 * (CT_BUNDLED_MODEL, set by CMake). */
#define CLI_MODEL_ENV "COHERE_TRANSCRIBE_MODEL"
#ifndef CT_BUNDLED_MODEL
#define CT_BUNDLED_MODEL "models/cohere-demo-en"
#endif
#define CLI_VERSION "0.1.0" /* keep with project(VERSION) in CMakeLists.txt */

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_SIGINT = 130, EXIT_SIGTERM = 143 };

typedef enum existing_policy { EXISTING_ERROR = 0, EXISTING_OVERWRITE, EXISTING_SKIP } existing_policy;

typedef struct cli_opts {
    const char *model_arg;      /* --model as given, else cli_default_model() */
    const char *model_from;     /* NULL: --model; else where the default came from */
    const char *revision;       /* --model-revision; NULL: main */
    char *model_dir;            /* resolved folder (owned) */
    const char *language;
    bool punctuation;
    bool formats[CT_FORMAT_COUNT];
    bool formats_given;
    const char *output_dir;
    existing_policy existing;
    bool existing_given;
    ct_backend_kind backend;
    int dtype;                  /* -1 auto, 0 bf16, 1 fp32 (ct_options.f32) */
    int threads;                /* 0: one per core */
    bool force_threads;
    bool text_only;
    ct_cue_opts cue;
    const char *profile_json;
    bool quiet, verbose;
    int batch_size;             /* 0: by device (CUDA 24, CPU 4) */
    int max_new_tokens, max_retry_tokens;
    int beam_size;              /* 1: greedy (ct_options.beam_size) */
    bool stop_loops;
    ct_vad_options vad;
    double audio_memory_gb;
    bool recursive;
    const char *dump_path;
    int frame_bucket;
    const char **paths;         /* inputs as given (argv) */
    int n_paths;
} cli_opts;

/* args.c: parses argv[first..argc) into *o. Returns EXIT_OK, or EXIT_USAGE
 * after printing why; *out_exit_now is set for --help and --version (the
 * caller then exits with the returned code). */
int cli_parse_args(int argc, char **argv, int first, cli_opts *o, bool *out_exit_now);
void cli_opts_free(cli_opts *o);
void cli_usage(FILE *f);
/* Strict number parsing; print a message naming flag on failure. */
bool cli_parse_int(const char *flag, const char *v, long lo, long hi, int *out);
bool cli_parse_double(const char *flag, const char *v, double lo, double hi, double *out);

/* model_path.c: a folder as is, or ORG/NAME in the local Hugging Face
 * cache. Returns a new path (free), or NULL after printing where it looked. */
char *cli_resolve_model(const char *arg, const char *revision);
/* The model used when --model is not given: $COHERE_TRANSCRIBE_MODEL when set
 * and not empty, else CT_BUNDLED_MODEL. *out_from gets where it came from:
 * CLI_MODEL_ENV or "the bundled demo model". Both strings are static or the
 * environment's. */
const char *cli_default_model(const char **out_from);

/* inputs.c */
typedef enum input_state { IN_PENDING = 0, IN_SKIPPED, IN_FAILED, IN_DONE } input_state;

typedef struct cli_input {
    char *path;          /* to open */
    char *shown;         /* escaped, for messages */
    char *out_dir;       /* where its outputs go (made when written) */
    char *stem;          /* file name without its extension */
    dev_t dev;
    ino_t ino;
    input_state state;
    double duration_s;
    char *text;          /* --text-only: the transcript until printed */
} cli_input;

typedef struct cli_inputs {
    cli_input *v;
    int n, cap;
} cli_inputs;

/* Collects the inputs of o (files as given, folders walked), sorted and
 * de-duplicated; plans each output folder and stem. Returns EXIT_OK or
 * EXIT_USAGE after printing why. */
int cli_collect_inputs(const cli_opts *o, cli_inputs *out);
void cli_inputs_free(cli_inputs *in);
/* True when path may be written as an output (--dump-tensors,
 * --profile-json): not a device, FIFO, symlink, folder, an input or a
 * file of the model folder; prints why not, naming flag. */
bool cli_output_path_ok(const char *flag, const char *path, const cli_inputs *in,
                        const char *model_dir);
/* Applies --existing to every input before anything runs: marks skipped
 * ones IN_SKIPPED and conflicting ones IN_FAILED (reported). Refuses
 * (IN_FAILED) outputs that would replace an input or a model file. */
void cli_apply_existing(const cli_opts *o, cli_inputs *in);

/* run.c: transcribes every pending input; returns EXIT_OK, EXIT_FAILED,
 * or the signal's exit code. */
int cli_run(cli_opts *o, cli_inputs *in);

/* report.c: messages go through here so they do not tear the bar. */
void cli_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_progress_begin(bool enabled, int n_files);
void cli_progress_update(int files_done, double audio_done_s, double audio_known_s,
                         int files_known, bool force);
void cli_progress_end(void);
/* Signals: SIGINT and SIGTERM set a flag (a second one kills at once). */
void cli_signals_install(void);
int cli_signal_caught(void);         /* 0 or the signal number */
bool cli_abort_requested(void *user); /* tg_abort_fn */
double cli_now_s(void);

/* doctor.c */
int cli_doctor(int argc, char **argv);

/* dump.c: --dump-tensors */
typedef struct cli_dumper cli_dumper;
cli_dumper *cli_dumper_new(void);
void cli_dumper_free(cli_dumper *d);
void cli_dumper_hook(void *user, int index, const char *name, tg_type type, int n_dims,
                     const int64_t *shape, const void *data);
ct_status cli_dumper_write(const cli_dumper *d, const char *path, int pad_id);

#endif
