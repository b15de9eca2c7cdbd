/*
 * audio_api.h: TEMPORARY copy of the audio API that the audio branch adds
 * to include/cohere_transcribe.h (FFmpeg decoding, VAD segmentation), so
 * the CLI can be written against it before that branch is merged.
 *
 * At the merge: delete this file and audio_stub.c and drop the
 * `#include "audio_api.h"` lines; nothing else changes.
 */
#ifndef CT_CLI_AUDIO_API_H
#define CT_CLI_AUDIO_API_H

#include <stdbool.h>
#include <stddef.h>

#include "cohere_transcribe.h"

typedef struct ct_pcm { float *samples; size_t n; double duration_s; int source_rate, source_channels; char codec[32]; } ct_pcm;
ct_status ct_pcm_load(const char *path, size_t max_bytes, ct_pcm *out);   /* any FFmpeg format, WAV without FFmpeg; ceiling checked while decoding */
void ct_pcm_free(ct_pcm *p);
const char *ct_audio_decoder_version(void);
bool ct_audio_has_ffmpeg(void);
typedef enum ct_vad_kind { CT_VAD_ENERGY = 0, CT_VAD_NONE } ct_vad_kind;
typedef struct ct_vad_options { ct_vad_kind kind; double min_dur_s, max_dur_s, max_silence_s, energy_threshold_db; } ct_vad_options;
void ct_vad_options_init(ct_vad_options *o);  /* 0.5, 30, 0.6, 50 */
typedef struct ct_span { size_t first, last; double start_s, end_s; } ct_span;
ct_status ct_segment_audio(const float *x, size_t n, const ct_vad_options *o, ct_span **out_spans, int *out_n);
void ct_spans_free(ct_span *s);
ct_status ct_vad_parse(const char *name, ct_vad_kind *out);

#endif
