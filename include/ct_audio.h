/*
 * ct_audio.h: the audio layer's public API (prefix ct_): audio files decoded
 * to 16 kHz mono samples, and segments of speech with their times.
 *
 * Its own header because the audio layer sits below the asr layer, whose
 * cohere_transcribe.h includes this one: the functions are implemented in
 * src/audio, which may include only its own and lower layers' headers.
 *
 * Errors: every fallible call returns a ct_status (tg_status.h) naming the
 * file. Not here: transcription (cohere_transcribe.h).
 */
#ifndef CT_AUDIO_PUBLIC_H
#define CT_AUDIO_PUBLIC_H

#include <stdbool.h>
#include <stddef.h>

#include "tg_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The transcription API's status is the runtime's (tg_status.h). */
typedef tg_status ct_status;
#define ct_status_message tg_status_message
#define ct_status_code tg_status_code
#define ct_status_free tg_status_free

typedef struct ct_pcm {
    float *samples;      /* 16 kHz mono in [-1, 1]; owned, free with ct_pcm_free */
    size_t n;
    double duration_s;   /* of the source */
    int source_rate, source_channels;
    char codec[32];      /* e.g. "mp3", "pcm_s16le" */
} ct_pcm;
/* Decodes the audio of a file in an audio container FFmpeg reads (WAV, FLAC, MP3, Ogg,
 * AAC, MP4/M4A, Matroska/WebM, AIFF, CAF, AU, WMA, WavPack; an image or another container
 * is refused as "not an audio file", naming the format detected), WAV only without
 * FFmpeg; max_bytes bounds the decoded 16 kHz float samples and is checked while decoding (0: 4 GiB). Errors name the path.
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

#ifdef __cplusplus
}
#endif

#endif
