/*
 * cohere_transcribe.h: the public transcription API (prefix ct_).
 *
 * A session loads a Cohere Transcribe (cohere_asr) checkpoint directory once
 * and transcribes 16 kHz mono float PCM or audio files to text and token
 * ids. Audio longer than the model's clip limit is split by energy into
 * chunks (spec 5.4) that are transcribed independently, each with the full
 * prompt, and rejoined.
 *
 * Errors: every fallible call returns a ct_status (the runtime's tg_status):
 * NULL on success, otherwise an object with a code and a message that names
 * the file, tensor or option involved; the caller frees it with
 * ct_status_free. Nothing here exits or aborts on bad input.
 *
 * Threads: one session is used by one thread at a time.
 */
#ifndef COHERE_TRANSCRIBE_H
#define COHERE_TRANSCRIBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ct_audio.h"
#include "tg.h"
#include "tg_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ct_status and its accessors: ct_audio.h */

typedef enum ct_backend_kind {
    CT_BACKEND_AUTO = 0, /* CUDA when a GPU is usable, else the CPU */
    CT_BACKEND_CPU,
    CT_BACKEND_CUDA,     /* an error when no CUDA backend is present */
} ct_backend_kind;

/* Parses "cpu", "cuda" or "auto"; TG_ERR_INVALID_ARG otherwise. */
ct_status ct_backend_parse(const char *name, ct_backend_kind *out_kind);

/* Called with each intermediate the debug hook asks for: `name` is one of
 * "features" ([T, n_mels]), "encoder_hidden.i" and "encoder_out" ([T', d]),
 * "prompt_logits" ([10, vocab]), "step_logits" ([steps, vocab]),
 * "generated" (I32 [n]: prompt included). `index` counts the clips (chunks)
 * of the session in order; data is borrowed for the call. Shapes are
 * PyTorch order, without the batch dimension: each row of a batch is
 * reported on its own, cut to its own length (T = its mel frames, T' =
 * ct_enc_len(T)). */
typedef void (*ct_dump_fn)(void *user, int index, const char *name, tg_type type,
                           int n_dims, const int64_t *shape, const void *data);

/* Progress of a long file: chunk `done` of `total` finished. */
typedef void (*ct_progress_fn)(void *user, int done, int total);

/* The widest beam ct_options.beam_size takes. */
#define CT_MAX_BEAM_SIZE 16

typedef struct ct_options {
    const char *model_dir;     /* required: config.json + model.safetensors + tokenizer */
    ct_backend_kind backend;   /* default CT_BACKEND_AUTO */
    int n_threads;             /* CPU threads; <= 0: one per core */
    const char *language;      /* one of the 14 codes; default "en" */
    bool punctuation;          /* default true */
    int max_new_tokens;        /* default 256; any larger value is clamped so the
                                  prompt and the tokens fit the decoder's
                                  positions (1024: 1014 new tokens at most) */
    int batch_size;            /* chunks decoded together; default 1 */
    int frame_bucket;          /* round a batch's mel frames up to a multiple of
                                  this (the extra frames are masked), so clips of
                                  similar length share one encoder plan; 0: off */
    bool ignore_eos;           /* benchmark only: decode exactly max_new_tokens per
                                  row, ignoring end-of-text (the text then runs
                                  past the end of speech); default false */
    int f32;                   /* 1: ask for f32 matrix products and attention
                                  (the reference setting), 0: let the backend
                                  use bf16; default -1: f32 on the CPU only */
    ct_dump_fn dump;           /* optional debug hook */
    void *dump_user;
    ct_progress_fn progress;   /* optional */
    void *progress_user;
    bool stop_repetition_loops;/* stop a row that repeats a block of 8-32 tokens
                                  four times after 96 tokens (ct_repetition_
                                  block); default false (the reference's
                                  behaviour), the CLI turns it on */
    int beam_size;             /* hypotheses kept per chunk: 1 (default; 0 is
                                  taken as 1) is greedy decoding, HF generate's
                                  default; 2 to CT_MAX_BEAM_SIZE is beam search
                                  as generate(num_beams=N) with its defaults
                                  (length_penalty 1, early_stopping False). The
                                  decoder then runs N rows a chunk and brings
                                  every row's logits to the host each step (on
                                  a GPU at the released size that host work,
                                  not the GPU, sets the pace); with a debug
                                  hook no logits are reported */
} ct_options;

/* Fills o with the defaults above (model_dir NULL). */
void ct_options_init(ct_options *o);

typedef struct ct_session ct_session;

/* Opens a session: loads the checkpoint onto the chosen backend. Borrows
 * opts only for the call (strings are copied). Returns a new session; free
 * it with ct_session_close. */
ct_status ct_session_open(const ct_options *opts, ct_session **out_session);
void ct_session_close(ct_session *s);
/* Name of the backend the session runs on ("cpu", "cuda:0 ..."); owned by s. */
const char *ct_session_backend(const ct_session *s);
/* Where the log-mel frontend runs: "backend" (graph nodes on the session's
 * backend, the default on a GPU) or "host" (the CPU's frontend; also with a
 * debug hook, which then reports the features the encoder reads). Static
 * storage. */
const char *ct_session_frontend(const ct_session *s);
/* Replaces the progress callback for later calls (NULL: none). */
void ct_session_set_progress(ct_session *s, ct_progress_fn fn, void *user);
/* The pad token id (finished rows of a batch are padded with it). */
int ct_session_pad_id(const ct_session *s);
/* NULL when `code` is one of the 14 languages the model supports (en fr de
 * es it pt nl pl el ar ja zh vi ko); otherwise TG_ERR_INVALID_ARG naming the
 * code. Needs no session, so a front end can check before loading. */
ct_status ct_language_check(const char *code);
/* What the session's main backend (the GPU when it runs there) has used:
 * memory now and at peak, compute and submit times (tg_backend_stats). */
void ct_session_stats(const ct_session *s, tg_backend_stats *out);
/* Starts the backend's peak and times again (tg_backend_reset_stats). */
void ct_session_reset_stats(ct_session *s);
/* What the session did about faults so far. A batch that runs out of memory
 * (device or host) is halved and its clips run again, down to one clip
 * (then the call fails with the out-of-memory error); later batches keep to
 * the halved size. A device fault that leaves a backend unusable (a CUDA
 * context's sticky error) fails the call with the backend's text, and the
 * session makes its backends again and reloads the weights, so that the
 * next call runs (the backend's ct_session_stats start again then). */
typedef struct ct_fault_stats {
    int oom_halvings;      /* batches halved after running out of memory */
    int batch_limit;       /* the largest batch the session now runs; 0: no limit */
    int backend_restarts;  /* backends made again after a device fault */
} ct_fault_stats;
/* Fills *out (zeros for a NULL session). */
void ct_session_fault_stats(const ct_session *s, ct_fault_stats *out);
/* Where ct_session_open's wall time went, in milliseconds: making the
 * backends (on a GPU: the driver, the context, the kernel library; a cold
 * kernel cache compiles later, at the first transcription), loading the
 * weights (reading the checkpoint, converting, and on a GPU the upload),
 * and all of the call. After a device fault made the session's backends
 * again, backends_ms and weights_ms (and the bytes) are that making's,
 * total_ms still the first open's; when that making failed, its times
 * and zero bytes. */
typedef struct ct_open_times {
    double backends_ms;
    double weights_ms;
    double total_ms;
    uint64_t weights_bytes; /* copied or converted into the backend's buffers */
    uint64_t mapped_bytes;  /* used in place from the file's mapping (the CPU) */
} ct_open_times;
/* Fills *out (zeros for a NULL session). */
void ct_session_open_times(const ct_session *s, ct_open_times *out);
/* Changes language / punctuation for later calls. */
ct_status ct_session_set_language(ct_session *s, const char *language, bool punctuation);
/* Changes ct_options.max_new_tokens for later calls (a retry of one clip
 * with a larger budget); TG_ERR_INVALID_ARG when n <= 0. Clamped as there. */
ct_status ct_session_set_max_new_tokens(ct_session *s, int n);
/* Installs fn (NULL: none) on every backend of the session: it is polled
 * between graph nodes / segments and between decoder steps, and when it
 * returns true the running call fails with TG_ERR_ABORTED. The session stays
 * usable. fn may be called from the session's threads; keep it to reading a
 * flag (a signal handler sets). */
void ct_session_set_abort(ct_session *s, tg_abort_fn fn, void *user);
/* "fp32" when matrix products and attention run in f32, else "bf16". */
const char *ct_session_dtype(const ct_session *s);

/* Per-stage wall time of one transcription, in milliseconds. */
typedef struct ct_timings {
    double load_ms;     /* reading and resampling the file */
    double frontend_ms; /* log-mel features */
    double encoder_ms;
    double decoder_ms;  /* cross K/V, prefill and greedy steps */
} ct_timings;

/* Why decoding of a clip stopped. */
typedef enum ct_finish {
    CT_FINISH_EOS = 0,    /* it generated end-of-text                          */
    CT_FINISH_LENGTH,     /* max_new_tokens (or the decoder's last position) ran
                             out first, or ignore_eos was set                  */
    CT_FINISH_REPETITION, /* stop_repetition_loops ended a repeating row; the
                             repeats after the block's first instance are cut  */
} ct_finish;

typedef struct ct_result {
    char *text;          /* UTF-8, chunks rejoined (spec 5.4) */
    int32_t *tokens;     /* every chunk's generated ids after the prompt, up to
                            and without EOS, concatenated */
    int n_tokens;
    int n_chunks;
    double duration_s;   /* audio length */
    ct_timings timings;
    ct_finish finish;    /* the clip's; of several chunks: LENGTH when any hit
                            the limit, else REPETITION when any looped, else EOS */
} ct_result;

/* Frees a result and everything in it; accepts NULL. */
void ct_result_free(ct_result *r);

/* Transcribes n samples of 16 kHz mono PCM in [-1, 1]. Returns a new
 * result; free it with ct_result_free. Errors on empty, too short (< 320
 * samples, 20 ms: the normalisation needs two valid frames) or non-finite
 * audio. */
ct_status ct_transcribe_pcm(ct_session *s, const float *samples, size_t n,
                            ct_result **out_result);
/* Reads an audio file (ct_pcm_load with the default 4 GiB ceiling: any audio
 * container FFmpeg reads, WAV only without it; resampled to 16 kHz mono) and
 * transcribes it with the spec 5.4 chunking. */
ct_status ct_transcribe_file(ct_session *s, const char *path, ct_result **out_result);
/* Transcribes several clips (each <= the clip limit, 16 kHz) as one padded
 * batch; out_results[i] gets clip i's result. Used for batched throughput
 * and by the tests of padded batches. */
ct_status ct_transcribe_batch(ct_session *s, const float *const *clips, const size_t *n,
                              int n_clips, ct_result **out_results);

/* Audio files and segments: ct_audio.h (the audio layer). */

/* The length of the repeating block that ends tokens[0..n): L in [8, 32]
 * when n >= 96 and the last 4 L tokens are one block of L tokens four times
 * over (the shortest such L); 0 otherwise. What stop_repetition_loops asks
 * after every generated token of a row; public so that front ends and tests
 * can check a token stream. */
int ct_repetition_block(const int32_t *tokens, int n);

/* ----------------------------------------------------------- tensor dumps */

/* A safetensors file of named tensors, for comparing intermediates with
 * transformers (the CLI's --dump-tensors). Tensors are collected with
 * ct_dump_file_add and written together by ct_dump_file_commit, through a
 * temporary file renamed into place: a failed or abandoned dump leaves no
 * partial file at path. */
typedef struct ct_dump_file ct_dump_file;

/* Starts a dump that ct_dump_file_commit will write to path (copied; nothing
 * is created yet). Returns a new dump; free it with ct_dump_file_close. */
ct_status ct_dump_file_open(const char *path, ct_dump_file **out_file);
/* Adds a tensor of any tg_type (F32, F16, BF16, I32, I64) with
 * n_dims (0..8) dimensions in PyTorch order (shape[0] outermost). name, shape
 * and data are copied, so the caller may free them on return. Tensors are
 * written in the order they were added; a name given twice fails at commit. */
ct_status ct_dump_file_add(ct_dump_file *f, const char *name, tg_type type, int n_dims,
                           const int64_t *shape, const void *data);
/* Writes every tensor added so far to the path given at open. */
ct_status ct_dump_file_commit(ct_dump_file *f);
/* Frees the dump and its copies; accepts NULL. Writes nothing. */
void ct_dump_file_close(ct_dump_file *f);

/* ---------------------------------------------------------- model check */

/* What a checkpoint directory holds, read without loading weights
 * (`cohere-transcribe doctor`). */
typedef struct ct_model_info {
    int n_tensors;
    int64_t n_params;
    char dtypes[96];         /* "bf16 x 300, f32 x 2" */
    int n_shards;            /* safetensors files */
    int enc_layers, enc_hidden, dec_layers, dec_hidden, vocab;
    int tokenizer_size;
    uint64_t config_hash;    /* tg_hash64 of config.json's bytes */
} ct_model_info;

/* Validates dir's config.json, safetensors headers (every tensor's shape and
 * offsets) and tokenizer without reading any weight data. Errors name the
 * file. Fills *out. */
ct_status ct_model_inspect(const char *dir, ct_model_info *out);

/* --------------------------------------------------------------- outputs */

/* One transcribed stretch of a source, as the writers read it (borrowed). */
typedef struct ct_segment {
    double start_s, end_s;   /* in the source */
    const char *text;        /* UTF-8; may be empty */
    const int32_t *tokens;
    int n_tokens;
} ct_segment;

/* A subtitle cue (owned by the array ct_cues_make returns). */
typedef struct ct_cue {
    double start_s, end_s;
    char *text;
} ct_cue;

typedef struct ct_cue_opts {
    int max_chars;           /* characters (code points) per cue; default 80 */
    double max_dur_s;        /* default 6.0 */
    double max_gap_s;        /* a longer pause between words ends a cue; 0.6 */
    double min_dur_s;        /* no cue shorter; default 0.3 */
} ct_cue_opts;

void ct_cue_opts_init(ct_cue_opts *o);

/* Splits segments into cues: words are placed in time by interpolating each
 * segment's span over its characters (the model gives no word times), and
 * a cue ends after sentence punctuation (. ! ? and their CJK forms), before
 * a word that would pass max_chars or max_dur_s, and at a pause longer than
 * max_gap_s (between segments). A cue shorter than min_dur_s is lengthened
 * and the cues after it move later as needed; none ends past media_end_s
 * (a cue left with no room there joins the one before). Control characters
 * in the text become spaces. Returns a new array in *out_cues (free with
 * ct_cues_free), possibly empty (*out_n 0). */
ct_status ct_cues_make(const ct_segment *segs, int n, double media_end_s,
                       const ct_cue_opts *o, ct_cue **out_cues, int *out_n);
void ct_cues_free(ct_cue *cues, int n);

typedef enum ct_format { CT_FORMAT_TXT = 0, CT_FORMAT_SRT, CT_FORMAT_VTT, CT_FORMAT_JSON,
                         CT_FORMAT_COUNT } ct_format;

/* "txt" "srt" "vtt" "json" -> the format; TG_ERR_INVALID_ARG otherwise. */
ct_status ct_format_parse(const char *name, ct_format *out_format);
/* The file extension without the dot (static storage). */
const char *ct_format_ext(ct_format f);

#define CT_TRANSCRIPT_SCHEMA_VERSION 1

/* Everything a writer reads about one source (all borrowed). */
typedef struct ct_transcript {
    const char *source;          /* path as the user named it */
    double duration_s;
    const ct_segment *segments;
    int n_segments;
    const char *language;
    const char *options_json;    /* a JSON object written as "options"; NULL: {} */
    const char *model_path;
    const char *model_config_hash; /* hex */
    const char *dtype, *backend;
    double load_ms, segment_ms, frontend_ms, encoder_ms, decoder_ms, wall_ms;
} ct_transcript;

/* Renders t in format f: txt (one line per non-empty segment), SRT, WebVTT
 * (cues from ct_cues_make with co) or JSON (schema/transcript.schema.json).
 * Line-oriented formats have control characters replaced (ct_escape_line).
 * Returns a new NUL-terminated string in *out_text (free with ct_free) and
 * its length. */
ct_status ct_render(ct_format f, const ct_transcript *t, const ct_cue_opts *co,
                    char **out_text, size_t *out_len);

/* A copy of s fit for one line of a terminal or a line-oriented file:
 * bytes below 0x20, DEL and the C1 controls (U+0080..U+009F) are written
 * as \xNN (or, when as_text, tab, newline, CR, VT and FF become a space);
 * invalid UTF-8 bytes as \xNN. Returns a new string (free with ct_free),
 * NULL when out of memory. */
char *ct_escape_line(const char *s, bool as_text);

/* Frees memory the API returned as a bare pointer; accepts NULL. */
void ct_free(void *p);

/* An output set: every file of one source, made visible together.
 * ct_output_set_add writes each to a temporary file in dir (named
 * ".STEM.EXT.ct-tmp.PID.N"); ct_output_set_commit then removes the old
 * manifest, renames each file into place and last writes the manifest
 * ".STEM.ct-manifest" (the names, sizes and hashes of the set). A run killed
 * before the manifest is in place leaves no manifest, so the set counts as
 * incomplete (ct_output_set_complete) and is redone; temporary files of an
 * abandoned set are removed. */
typedef struct ct_output_set ct_output_set;

/* dir must exist; stem is the file name without extension. Returns a new
 * set; end it with ct_output_set_commit or ct_output_set_abandon, then free
 * it with ct_output_set_free. */
ct_status ct_output_set_begin(const char *dir, const char *stem, ct_output_set **out_set);
ct_status ct_output_set_add(ct_output_set *s, const char *ext, const void *data, size_t n);
ct_status ct_output_set_commit(ct_output_set *s);
/* Removes the temporary files written so far. */
void ct_output_set_abandon(ct_output_set *s);
/* Abandons a set neither committed nor abandoned, and frees it; accepts NULL. */
void ct_output_set_free(ct_output_set *s);
/* True when dir holds the manifest of STEM and every file it lists for the
 * n extensions asked for, with the listed size. */
bool ct_output_set_complete(const char *dir, const char *stem, const char *const *exts, int n);
/* The manifest's file name for stem (".STEM.ct-manifest") into buf. */
void ct_output_manifest_name(const char *stem, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
