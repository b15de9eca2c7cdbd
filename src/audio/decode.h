/*
 * decode.h: what the file readers of the audio layer share (internal to
 * src/audio): the sink that turns decoded blocks into 16 kHz samples under
 * the memory ceiling (pcm.c), and the FFmpeg reader (ffmpeg.c).
 *
 * A reader hands the sink mono float blocks at the source rate, checked for
 * non-finite values first (their index in the source is what the user can
 * find in the file); the sink resamples them with libsoxr as they come and
 * appends the result, failing as soon as the output would pass the ceiling.
 * So a reader never holds more than one block of its own.
 */
#ifndef CT_AUDIO_DECODE_H
#define CT_AUDIO_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audio.h"

typedef struct ct_sink {
    const char *what;      /* borrowed, for messages */
    int in_rate;
    size_t max_bytes;
    struct soxr *soxr;     /* NULL when the source is 16 kHz already */
    float *buf;            /* the 16 kHz output so far */
    size_t n, cap;
    size_t src_frames;     /* source frames pushed so far */
    float *tmp;            /* resampler output, CT_SINK_TMP samples */
} ct_sink;

/* Source frames a reader decodes at a time (a constant, whatever the file). */
#define CT_SINK_BLOCK 65536

/* Refuses a source that would decode to more than max_bytes of 16 kHz
 * samples, before anything is allocated (frames: the exact or declared
 * count at in_rate). */
tg_status ct_sink_check_size(const char *what, double frames, int in_rate, size_t max_bytes);
/* Starts a sink for a source at in_rate; expect_frames (0: unknown) sizes
 * the output once, so a file whose length is known is never copied while it
 * grows. Refuses rates below CT_AUDIO_MIN_RATE. */
tg_status ct_sink_init(ct_sink *s, const char *what, int in_rate, size_t max_bytes,
                       double expect_frames);
/* Appends n mono source frames (finite: the reader has checked). */
tg_status ct_sink_push(ct_sink *s, const float *x, size_t n);
/* The error for a non-finite value at frame `at` of the block about to be
 * pushed (so at counts from s->src_frames). */
tg_status ct_sink_bad_sample(const ct_sink *s, size_t at, bool inf);
/* Flushes the resampler and moves the samples into out (samples, n,
 * duration_s, source_rate); the reader fills codec and channels. */
tg_status ct_sink_finish(ct_sink *s, ct_pcm *out);
/* Frees what the sink holds; safe after finish and on a zeroed sink. */
void ct_sink_free(ct_sink *s);

/* An opened input: a regular file's descriptor (fd >= 0, its size known),
 * or an image in memory (fd < 0). */
typedef struct ct_audio_src {
    int fd;
    const uint8_t *mem;
    size_t size;
    const char *what;
} ct_audio_src;

/* ffmpeg.c: decodes the first audio stream of src; without FFmpeg in the
 * build, an error saying so. */
tg_status ct_ffmpeg_decode(const ct_audio_src *src, size_t max_bytes, ct_pcm *out);
bool ct_ffmpeg_present(void);
const char *ct_ffmpeg_version(void);

#endif
