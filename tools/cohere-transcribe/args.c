/*
 * args.c: the command line to cli_opts, and --help.
 *
 * Every flag takes its value as `--flag VALUE` or `--flag=VALUE`; a
 * separate value that looks like an option (`--model --verbose x.wav`) is
 * refused rather than swallowed. --formats takes one or more format names
 * (space- or comma-separated). Unknown flags, missing or malformed values
 * and contradictions (--quiet with --verbose, --text-only with file
 * options, --min-dur not below --max-dur...) are usage errors: a message
 * naming the flag and exit status 2. Nothing is opened here; paths are
 * checked by inputs.c before the model loads.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "cli.h"

void cli_usage(FILE *f) {
    fprintf(f,
"usage: " PROG " [--model MODEL] [options] [--] INPUT...\n"
"       " PROG " doctor [--model MODEL] [--model-revision REV]\n"
"\n"
"Transcribes audio files and folders with a Cohere Transcribe checkpoint and\n"
"writes text and subtitles next to each input (or under --output-dir).\n"
"INPUT is a file (taken as given) or a folder (walked for .aac .aif .aiff .alac\n"
".flac .m4a .mp3 .mp4 .oga .ogg .opus .wav .wave .webm .wma, any case).\n"
"\n"
"model:\n"
"  --model MODEL            checkpoint folder, or a Hub id (ORG/NAME) found in the\n"
"                           local Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub,\n"
"                           ~/.cache/huggingface/hub); nothing is downloaded.\n"
"                           Default: $" CLI_MODEL_ENV ", else the bundled demo\n"
"                           model (synthetic English speech only):\n"
"                           " CT_BUNDLED_MODEL "\n"
"  --model-revision REV     cache revision: a ref (default main) or a commit hash\n"
"  --language CODE          en fr de es it pt nl pl el ar ja zh vi ko (default en)\n"
"  --punctuation            ask for punctuated text (default)\n"
"  --no-punctuation         ask for text without punctuation\n"
"  --device auto|cuda|cpu   where to run (default auto); --backend is an alias\n"
"  --dtype auto|bf16|fp32   matrix-product precision (default auto: fp32 on the\n"
"                           CPU, bf16 on a GPU)\n"
"  --threads N              CPU threads (default one per core; more than the\n"
"                           cores is capped unless --force-threads)\n"
"  --force-threads          keep --threads above the core count\n"
"\n"
"outputs:\n"
"  --formats FMT...         any of txt srt vtt json (default txt srt vtt)\n"
"  --output-dir DIR         write under DIR, keeping the structure below a given\n"
"                           folder (default: next to each input)\n"
"  --existing POLICY        error (default), overwrite, or skip inputs whose\n"
"                           complete output set is already there\n"
"  --text-only              print the text on stdout; write no files\n"
"  --max-chars N            characters per subtitle cue (default 80)\n"
"  --max-cue-dur S          seconds per cue at most (default 6.0)\n"
"  --max-gap S              a longer pause starts a new cue (default 0.6)\n"
"  --profile-json FILE      write run totals and per-stage times to FILE\n"
"\n"
"segmentation and decoding:\n"
"  --vad energy|none        voice activity detection (default energy); none: the\n"
"                           model's own chunking (35 s at most, cut at the\n"
"                           quietest point), silence included\n"
"  --min-dur S              shortest segment (default 0.5)\n"
"  --max-dur S              longest segment, at most 35 (default 30)\n"
"  --max-silence S          silence kept inside a segment (default 0.6)\n"
"  --energy-threshold DB    speech level (default 50)\n"
"  --audio-memory-gb G      decoded audio per file at most (default 4)\n"
"  --batch-size N           segments decoded together (default CUDA 24, CPU 4)\n"
"  --max-new-tokens N       tokens per segment (default 445)\n"
"  --max-retry-tokens N     a segment that hit the limit is retried alone with\n"
"                           this many (default 896; 0: no retry)\n"
"  --beam-size N            hypotheses kept per segment, 1-16 (default 1:\n"
"                           greedy, as transformers' generate by default; N:\n"
"                           as its num_beams=N; slower, often more accurate)\n"
"  --stop-repetition-loops  stop a segment that repeats a block of 8-32 tokens\n"
"                           four times after 96 tokens (default)\n"
"  --no-stop-repetition-loops\n"
"  --recursive / --no-recursive   walk folders recursively (default on)\n"
"  --frame-bucket N         round mel frames up to a multiple of N (default 0)\n"
"\n"
"other:\n"
"  --dump-tensors FILE      write features, encoder_out, prompt_logits and\n"
"                           generated of every segment to FILE (safetensors)\n"
"  --quiet, -q              no progress bar, warnings or notes\n"
"  --verbose, -v            backend, per-file timings and speed on stderr\n"
"  --version                versions of the program and its audio decoder\n"
"  --help, -h               this text\n"
"  --                       the rest are inputs, even when they start with -\n"
"\n"
"exit status: 0 all done, 1 some input failed, 2 usage error, 130 interrupted\n"
"(SIGINT), 143 terminated (SIGTERM). See man cohere-transcribe.\n");
}

bool cli_parse_int(const char *flag, const char *v, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, PROG ": %s: '%s' is not an integer in [%ld, %ld]\n", flag, v ? v : "", lo,
                hi);
        return false;
    }
    *out = (int)x;
    return true;
}

bool cli_parse_double(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || errno || !isfinite(x) || x < lo || x > hi) {
        fprintf(stderr, PROG ": %s: '%s' is not a number in [%g, %g]\n", flag, v ? v : "", lo, hi);
        return false;
    }
    *out = x;
    return true;
}

/* Flags that take a value. */
static const char *const valued[] = {
    "--model", "--model-revision", "--language", "--formats", "--output-dir", "--existing",
    "--device", "--backend", "--dtype", "--precision", "--threads", "--max-chars",
    "--max-cue-dur", "--max-gap", "--profile-json", "--vad", "--min-dur", "--max-dur",
    "--max-silence", "--energy-threshold", "--audio-memory-gb", "--batch-size",
    "--max-new-tokens", "--max-retry-tokens", "--beam-size", "--dump-tensors", "--frame-bucket", NULL};
static const char *const plain[] = {
    "--punctuation", "--no-punctuation", "--force-threads", "--text-only", "--quiet", "-q",
    "--verbose", "-v", "--version", "--help", "-h", "--stop-repetition-loops",
    "--no-stop-repetition-loops", "--recursive", "--no-recursive", NULL};

static bool in_list(const char *const *l, const char *a) {
    for (; *l; l++)
        if (!strcmp(*l, a)) return true;
    return false;
}

static bool add_formats(cli_opts *o, const char *v, bool *ok) {
    /* a comma-separated list of names; false when v is not one */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    bool all = buf[0] != 0;
    ct_format fs[16];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && all; t = strtok_r(NULL, ",", &save)) {
        tg_status st = ct_format_parse(t, &fs[n < 15 ? n : 15]);
        if (st) all = false;
        else n++;
        tg_status_free(st);
    }
    if (!all) return false;
    if (!o->formats_given) memset(o->formats, 0, sizeof o->formats);
    o->formats_given = true;
    for (int i = 0; i < n && i < 16; i++) o->formats[fs[i]] = true;
    *ok = true;
    return true;
}

int cli_parse_args(int argc, char **argv, int first, cli_opts *o, bool *out_exit_now) {
    *out_exit_now = false;
    o->language = "en";
    o->punctuation = true;
    o->formats[CT_FORMAT_TXT] = o->formats[CT_FORMAT_SRT] = o->formats[CT_FORMAT_VTT] = true;
    o->backend = CT_BACKEND_AUTO;
    o->dtype = -1;
    ct_cue_opts_init(&o->cue);
    o->max_new_tokens = 445;
    o->max_retry_tokens = 896;
    o->beam_size = 1;
    o->stop_loops = true;
    ct_vad_options_init(&o->vad);
    o->audio_memory_gb = 4;
    o->recursive = true;
    o->paths = calloc((size_t)argc + 1, sizeof(char *));
    if (!o->paths) return EXIT_FAILED;
    bool punct_on = false, punct_off = false, any_file_opt = false;
    bool retry_given = false;

    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            for (i++; i < argc; i++) o->paths[o->n_paths++] = argv[i];
            break;
        }
        if (a[0] != '-' || !a[1]) {
            o->paths[o->n_paths++] = a;
            continue;
        }
        char name[64];
        const char *v = NULL;
        const char *eq = strchr(a, '=');
        if (eq && !strncmp(a, "--", 2)) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
            v = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        if (in_list(plain, name)) {
            if (v) {
                fprintf(stderr, PROG ": %s takes no value\n", name);
                return EXIT_USAGE;
            }
        } else if (in_list(valued, name)) {
            if (!v) {
                if (i + 1 >= argc) {
                    fprintf(stderr, PROG ": %s needs a value\n", name);
                    return EXIT_USAGE;
                }
                v = argv[++i];
                if (v[0] == '-' && v[1] == '-') {
                    fprintf(stderr, PROG ": %s needs a value, not the option '%s' (write %s=%s "
                            "if that is the value)\n", name, v, name, v);
                    return EXIT_USAGE;
                }
            }
        } else {
            fprintf(stderr, PROG ": unknown option '%s' (see --help)\n", name);
            return EXIT_USAGE;
        }
        tg_status st = NULL;
        bool ok = true;
#define IS(s) (!strcmp(name, s))
        if (IS("--help") || IS("-h")) {
            cli_usage(stdout);
            *out_exit_now = true;
            return fflush(stdout) == 0 && !ferror(stdout) ? EXIT_OK : EXIT_FAILED;
        } else if (IS("--version")) {
            printf(PROG " %s\naudio decoder: %s\nffmpeg: %s\n", CLI_VERSION,
                   ct_audio_decoder_version(), ct_audio_has_ffmpeg() ? "yes" : "none");
            *out_exit_now = true;
            return fflush(stdout) == 0 && !ferror(stdout) ? EXIT_OK : EXIT_FAILED;
        } else if (IS("--model")) {
            o->model_arg = v;
        } else if (IS("--model-revision")) {
            o->revision = v;
        } else if (IS("--language")) {
            if ((st = ct_language_check(v))) ok = false;
            o->language = v;
        } else if (IS("--punctuation")) {
            punct_on = true;
            o->punctuation = true;
        } else if (IS("--no-punctuation")) {
            punct_off = true;
            o->punctuation = false;
        } else if (IS("--formats")) {
            any_file_opt = true;
            bool got = false;
            if (!add_formats(o, v, &got)) {
                fprintf(stderr, PROG ": --formats: '%s' is not a list of txt, srt, vtt, json\n", v);
                return EXIT_USAGE;
            }
            while (i + 1 < argc && add_formats(o, argv[i + 1], &got)) i++;
        } else if (IS("--output-dir")) {
            any_file_opt = true;
            o->output_dir = v;
        } else if (IS("--existing")) {
            any_file_opt = true;
            o->existing_given = true;
            if (!strcmp(v, "error")) o->existing = EXISTING_ERROR;
            else if (!strcmp(v, "overwrite")) o->existing = EXISTING_OVERWRITE;
            else if (!strcmp(v, "skip")) o->existing = EXISTING_SKIP;
            else {
                fprintf(stderr, PROG ": --existing: '%s' is not error, overwrite or skip\n", v);
                return EXIT_USAGE;
            }
        } else if (IS("--device") || IS("--backend")) {
            if ((st = ct_backend_parse(v, &o->backend))) ok = false;
        } else if (IS("--dtype") || IS("--precision")) {
            if (!strcmp(v, "auto")) o->dtype = -1;
            else if (!strcmp(v, "bf16")) o->dtype = 0;
            else if (!strcmp(v, "fp32") || !strcmp(v, "f32")) o->dtype = 1;
            else {
                fprintf(stderr, PROG ": %s: '%s' is not auto, bf16 or fp32\n", name, v);
                return EXIT_USAGE;
            }
        } else if (IS("--threads")) {
            ok = cli_parse_int(name, v, 1, 4096, &o->threads);
        } else if (IS("--force-threads")) {
            o->force_threads = true;
        } else if (IS("--text-only")) {
            o->text_only = true;
        } else if (IS("--max-chars")) {
            ok = cli_parse_int(name, v, 1, 10000, &o->cue.max_chars);
        } else if (IS("--max-cue-dur")) {
            ok = cli_parse_double(name, v, 0.3, 3600, &o->cue.max_dur_s);
        } else if (IS("--max-gap")) {
            ok = cli_parse_double(name, v, 0, 3600, &o->cue.max_gap_s);
        } else if (IS("--profile-json")) {
            o->profile_json = v;
        } else if (IS("--quiet") || IS("-q")) {
            o->quiet = true;
        } else if (IS("--verbose") || IS("-v")) {
            o->verbose = true;
        } else if (IS("--vad")) {
            if ((st = ct_vad_parse(v, &o->vad.kind))) ok = false;
        } else if (IS("--min-dur")) {
            ok = cli_parse_double(name, v, 0, 35, &o->vad.min_dur_s);
        } else if (IS("--max-dur")) {
            ok = cli_parse_double(name, v, 1, 35, &o->vad.max_dur_s);
        } else if (IS("--max-silence")) {
            ok = cli_parse_double(name, v, 0, 35, &o->vad.max_silence_s);
        } else if (IS("--energy-threshold")) {
            ok = cli_parse_double(name, v, 0, 200, &o->vad.energy_threshold_db);
        } else if (IS("--audio-memory-gb")) {
            ok = cli_parse_double(name, v, 1e-6, 1024, &o->audio_memory_gb);
            if (ok && o->audio_memory_gb <= 0) ok = false;
        } else if (IS("--batch-size")) {
            ok = cli_parse_int(name, v, 1, 256, &o->batch_size);
        } else if (IS("--max-new-tokens")) {
            ok = cli_parse_int(name, v, 1, 1 << 20, &o->max_new_tokens);
        } else if (IS("--max-retry-tokens")) {
            retry_given = true;
            ok = cli_parse_int(name, v, 0, 1 << 20, &o->max_retry_tokens);
        } else if (IS("--beam-size")) {
            ok = cli_parse_int(name, v, 1, CT_MAX_BEAM_SIZE, &o->beam_size);
        } else if (IS("--stop-repetition-loops")) {
            o->stop_loops = true;
        } else if (IS("--no-stop-repetition-loops")) {
            o->stop_loops = false;
        } else if (IS("--recursive")) {
            o->recursive = true;
        } else if (IS("--no-recursive")) {
            o->recursive = false;
        } else if (IS("--dump-tensors")) {
            o->dump_path = v;
        } else if (IS("--frame-bucket")) {
            ok = cli_parse_int(name, v, 0, 4096, &o->frame_bucket);
        }
#undef IS
        if (st) {
            fprintf(stderr, PROG ": %s: %s\n", name, tg_status_message(st));
            tg_status_free(st);
        }
        if (!ok) return EXIT_USAGE;
    }
    if (o->quiet && o->verbose) {
        fprintf(stderr, PROG ": --quiet and --verbose contradict each other\n");
        return EXIT_USAGE;
    }
    if (punct_on && punct_off) {
        fprintf(stderr, PROG ": --punctuation and --no-punctuation contradict each other\n");
        return EXIT_USAGE;
    }
    if (o->text_only && any_file_opt) {
        fprintf(stderr, PROG ": --text-only writes no files, so --formats, --output-dir and "
                        "--existing do not apply\n");
        return EXIT_USAGE;
    }
    if (o->vad.min_dur_s >= o->vad.max_dur_s) {
        fprintf(stderr, PROG ": --min-dur %g must be below --max-dur %g\n", o->vad.min_dur_s,
                o->vad.max_dur_s);
        return EXIT_USAGE;
    }
    if (retry_given && o->max_retry_tokens && o->max_retry_tokens <= o->max_new_tokens) {
        fprintf(stderr, PROG ": --max-retry-tokens %d must exceed --max-new-tokens %d (or be 0)\n",
                o->max_retry_tokens, o->max_new_tokens);
        return EXIT_USAGE;
    }
    if (!retry_given && o->max_retry_tokens <= o->max_new_tokens) o->max_retry_tokens = 0;
    if (!o->model_arg) o->model_arg = cli_default_model(&o->model_from);
    if (!o->n_paths) {
        fprintf(stderr, PROG ": no input files (see --help)\n");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

void cli_opts_free(cli_opts *o) {
    free(o->paths);
    free(o->model_dir);
    memset(o, 0, sizeof *o);
}
