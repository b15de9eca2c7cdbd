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

#include "tg.h"
#include "tg_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef tg_status ct_status;
#define ct_status_message tg_status_message
#define ct_status_code tg_status_code
#define ct_status_free tg_status_free

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
/* Changes language / punctuation for later calls. */
ct_status ct_session_set_language(ct_session *s, const char *language, bool punctuation);

/* Per-stage wall time of one transcription, in milliseconds. */
typedef struct ct_timings {
    double load_ms;     /* reading and resampling the file */
    double frontend_ms; /* log-mel features */
    double encoder_ms;
    double decoder_ms;  /* cross K/V, prefill and greedy steps */
} ct_timings;

typedef struct ct_result {
    char *text;          /* UTF-8, chunks rejoined (spec 5.4) */
    int32_t *tokens;     /* every chunk's generated ids after the prompt, up to
                            and without EOS, concatenated */
    int n_tokens;
    int n_chunks;
    double duration_s;   /* audio length */
    ct_timings timings;
} ct_result;

/* Frees a result and everything in it; accepts NULL. */
void ct_result_free(ct_result *r);

/* Transcribes n samples of 16 kHz mono PCM in [-1, 1]. Returns a new
 * result; free it with ct_result_free. Errors on empty, too short (< 320
 * samples, 20 ms: the normalisation needs two valid frames) or non-finite
 * audio. */
ct_status ct_transcribe_pcm(ct_session *s, const float *samples, size_t n,
                            ct_result **out_result);
/* Reads a WAV file (any rate, channels averaged) and transcribes it. */
ct_status ct_transcribe_file(ct_session *s, const char *path, ct_result **out_result);
/* Transcribes several clips (each <= the clip limit, 16 kHz) as one padded
 * batch; out_results[i] gets clip i's result. Used for batched throughput
 * and by the tests of padded batches. */
ct_status ct_transcribe_batch(ct_session *s, const float *const *clips, const size_t *n,
                              int n_clips, ct_result **out_results);

/* ---- audio files and segments (src/audio) ---- */
/* Implemented in src/audio, whose internal header audio.h repeats this block
 * under the same guard (the audio layer cannot see this header); the test
 * tests/audio/test_api_block.c fails when the two copies differ. */
#ifndef CT_AUDIO_PUBLIC_BLOCK
#define CT_AUDIO_PUBLIC_BLOCK
typedef struct ct_pcm {
    float *samples;      /* 16 kHz mono in [-1, 1]; owned, free with ct_pcm_free */
    size_t n;
    double duration_s;   /* of the source */
    int source_rate, source_channels;
    char codec[32];      /* e.g. "mp3", "pcm_s16le" */
} ct_pcm;
/* Decodes any file FFmpeg reads (WAV only without FFmpeg); max_bytes bounds the decoded
 * 16 kHz float samples and is checked while decoding (0: 4 GiB). Errors name the path.
 * Only regular files are read ("-", FIFOs, devices and directories are refused without
 * blocking). On success *out owns new samples (free with ct_pcm_free); on failure *out is
 * zeroed. */
ct_status ct_pcm_load(const char *path, size_t max_bytes, ct_pcm *out);
/* Frees the samples and zeroes *p; accepts NULL and an already freed one. */
void ct_pcm_free(ct_pcm *p);
/* "FFmpeg libavformat 59.x / libavcodec ... / libswresample ..." or "built-in WAV reader (no FFmpeg)"; static. */
const char *ct_audio_decoder_version(void);
bool ct_audio_has_ffmpeg(void);
typedef enum ct_vad_kind { CT_VAD_ENERGY = 0, CT_VAD_NONE } ct_vad_kind;
typedef struct ct_vad_options {
    ct_vad_kind kind;
    double min_dur_s, max_dur_s, max_silence_s, energy_threshold_db; /* energy only */
    double analysis_window_s; /* energy only: 0.01 (10 ms windows) */
} ct_vad_options;
void ct_vad_options_init(ct_vad_options *o); /* the defaults above */
typedef struct ct_span { size_t first, last; double start_s, end_s; } ct_span; /* samples [first, last) */
/* Segments n samples of 16 kHz audio. *out_spans: new array (free with tg_free... or ct_spans_free), may be 0 long. */
ct_status ct_segment_audio(const float *x, size_t n, const ct_vad_options *o, ct_span **out_spans, int *out_n);
void ct_spans_free(ct_span *s);
/* Parses "energy" / "none". */
ct_status ct_vad_parse(const char *name, ct_vad_kind *out);
#endif
/* ---- end of audio files and segments ---- */

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

#ifdef __cplusplus
}
#endif

#endif
