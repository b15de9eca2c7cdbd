/*
 * audio.h: audio input and the log-mel frontend (internal).
 *
 * WAV files are read by our own parser (PCM 8/16/24/32, float 32/64,
 * WAVE_FORMAT_EXTENSIBLE, any channel count averaged to mono); everything
 * else through FFmpeg's libraries when the build found them (ffmpeg.c).
 * Other rates are resampled to 16 kHz with libsoxr at high quality, in
 * blocks, under a ceiling on the decoded size (pcm.c). The frontend follows
 * spec section 4 exactly, without dither. Long audio is split by the energy
 * rule of spec 5.4 (chunk.c) or into voice segments (segment.c).
 *
 * The public part (ct_pcm, ct_pcm_load, ct_segment_audio, ...) is the audio
 * layer's public header, include/ct_audio.h, which cohere_transcribe.h
 * includes too.
 */
#ifndef CT_AUDIO_H
#define CT_AUDIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ct_audio.h"
#include "tg_status.h"


/* The ceiling ct_pcm_load applies for max_bytes 0: 4 GiB. */
#define CT_AUDIO_DEFAULT_MAX_BYTES ((size_t)4 << 30)
/* Source rates below this are refused: no speech recording uses them, and a
 * damaged header declaring 1 Hz would otherwise ask for 16000 output samples
 * per input sample (issue 12, item 2). */
#define CT_AUDIO_MIN_RATE 1000

/* ct_pcm_load on a file image in memory (borrowed; not kept): the same
 * sniffing, readers, ceiling and errors, `what` naming it. For the fuzzers
 * and tests. */
tg_status ct_pcm_load_memory(const uint8_t *data, size_t size, const char *what,
                             size_t max_bytes, ct_pcm *out);

/* The index of x's first sample that is not finite (Inf or NaN), or n when
 * all are (finite.c). */
size_t ct_audio_first_nonfinite(const float *x, size_t n);
/* The first clip of n (clips[c], lens[c] samples; all borrowed) holding a
 * sample that is not finite: its index in *out_clip and its first such
 * sample's in *out_index, or *out_clip = -1 when every sample is finite.
 * Large batches are scanned by the threads of pool (borrowed, its region
 * not in use; NULL: the calling thread); the answer is the same either way.
 * Fails only for memory (NO_MEMORY). */
struct tg_threadpool;
tg_status ct_audio_find_nonfinite(const float *const *clips, const size_t *lens, int n,
                                  struct tg_threadpool *pool, int *out_clip, size_t *out_index);

/* Mono float samples, nominally in [-1, 1] (float WAVs may exceed it). */
typedef struct ct_audio {
    float *samples;   /* owned; free with ct_audio_free */
    size_t n;
    int sample_rate;
} ct_audio;

/* Frees the samples and zeroes *a; accepts NULL and an already freed one. */
void ct_audio_free(ct_audio *a);
/* Parses a WAV image in memory (borrowed; not kept); `what` names it in
 * errors ("a.wav: fmt chunk missing"). On success *out owns new samples at
 * the file's rate (free with ct_audio_free); on failure *out is zeroed. A
 * data chunk that runs past the end of the file gives the whole frames
 * present and a warning; a file without one whole frame is an error. */
tg_status ct_wav_parse(const uint8_t *data, size_t size, const char *what, ct_audio *out);

/* A WAV file's layout, for reading it in blocks: what ct_wav_header found. */
typedef struct ct_wav_info {
    unsigned tag;          /* 1 PCM, 3 IEEE float (EXTENSIBLE unwrapped) */
    unsigned channels, bits, block_align;
    uint32_t rate;
    const uint8_t *pcm;    /* the first frame, inside the borrowed image */
    size_t frames;         /* whole frames present */
    char codec[16];        /* FFmpeg's name: "pcm_s16le", "pcm_f32le", ... */
} ct_wav_info;
/* Walks the chunks of a WAV image (borrowed) and checks the format, without
 * decoding; the warnings and errors of ct_wav_parse, naming `what`. */
tg_status ct_wav_header(const uint8_t *data, size_t size, const char *what, ct_wav_info *out);
/* Decodes frames [first, first + count) to mono (channels averaged) into
 * out[count]. Returns the index (from first) of the first frame holding a
 * non-finite value, with *out_inf set when it is infinite, or count when all
 * are finite. */
size_t ct_wav_decode(const ct_wav_info *w, size_t first, size_t count, float *out, bool *out_inf);

/* ct_wav_parse on the file at path (mapped read-only, unmapped before
 * returning); errors name the path. */
tg_status ct_wav_read(const char *path, ct_audio *out);
/* Resamples a in place to `rate` (no-op when equal), libsoxr SOXR_HQ; the
 * old samples are freed and replaced. On failure a is unchanged. */
tg_status ct_audio_resample(ct_audio *a, int rate);
/* The usual way in: ct_pcm_load (any format FFmpeg reads, WAV without it)
 * with the default ceiling, as a ct_audio. On success *out owns 16 kHz mono
 * samples (free with ct_audio_free). */
tg_status ct_audio_load(const char *path, ct_audio *out);

/* The frontend of spec 4 for one clip of n samples at 16 kHz.
 * out_features: [n_frames][128] row-major (frame-major), n_frames = n/160 + 1;
 * frames >= n_valid (= n/160) are zero. Free with tg_free. A row of a padded
 * batch is these frames followed by zero frames. Errors (outputs untouched):
 * empty audio, fewer than 320 samples (the normalisation needs two valid
 * frames), a NaN or infinite sample (named by index). */
struct ct_fft;
typedef struct ct_mel {
    float *filters;   /* [128][257], Slaney, float32 as librosa computes */
    float *window;    /* [400] symmetric Hann */
    int n_mels, n_fft, win, hop;
    /* Added for speed: each filter's nonzero bins are [band_lo, band_hi),
     * and the FFT plan. Read-only after init, so one ct_mel serves any
     * number of threads at once. */
    int *band_lo, *band_hi;   /* [n_mels] */
    struct ct_fft *fft;
} ct_mel;
/* 128 mels, 512 fft, window 400, hop 160. Free with ct_mel_free. */
tg_status ct_mel_init(ct_mel *mel);
/* Frees the tables and zeroes *mel; safe on a zeroed or freed one. */
void ct_mel_free(ct_mel *mel);
tg_status ct_mel_compute(const ct_mel *mel, const float *samples, size_t n,
                         float **out_features, int *out_frames, int *out_valid);
/* ct_mel_compute for n clips at once, one clip per task on `pool` (borrowed;
 * NULL runs them one after another on the calling thread). clips[i] (lens[i]
 * samples) are borrowed. out_feats, out_frames and out_valid are the
 * caller's arrays of n; on success out_feats[i] is a new [out_frames[i]][128]
 * array, exactly what ct_mel_compute gives for clip i (free each with
 * tg_free). On failure (n < 1, a NULL clip, or any clip's own error; the
 * message names the first failing clip's index) nothing is allocated and the
 * three arrays are untouched. mel is only read, so one ct_mel may serve
 * several batches at once; the pool's region must not be in use. */
struct tg_threadpool;
tg_status ct_mel_compute_batch(const ct_mel *mel, const float *const *clips, const size_t *lens,
                               int n, struct tg_threadpool *pool, float **out_feats,
                               int *out_frames, int *out_valid);
/* The frames ct_mel_compute gives n samples (n/160 + 1; clamped to
 * INT32_MAX), so that a caller can size a padded batch first. */
int ct_mel_frames(size_t n);
/* ct_mel_compute_batch straight into one padded batch: clip i's features
 * go to out + i * pad_frames * 128 (out: the caller's, [n][pad_frames][128]
 * floats), its rows past its own frames are zeroed, and its frames and
 * valid counts to out_frames[i] and out_valid[i]. No clip's features are
 * copied or allocated apart, and each thread of the pool reuses its own
 * buffers from clip to clip. A clip with more frames than pad_frames is an
 * error naming it; on any failure out's contents are unspecified and the
 * two arrays are untouched. */
tg_status ct_mel_compute_padded(const ct_mel *mel, const float *const *clips, const size_t *lens,
                                int n, struct tg_threadpool *pool, int pad_frames, float *out,
                                int *out_frames, int *out_valid);

/* The frontend on another device (src/model/frontend.c builds it as a graph)
 * starts from the "window grid": per clip, the pre-emphasised samples placed
 * so that frame t's windowed samples are grid[t * 160 .. t * 160 + 400)
 * (the STFT's centring zeros and the window's zero margins folded in), a
 * row of ct_mel_grid_len(pad_frames) floats. The graph then multiplies each
 * frame by ct_mel_dft_table, squares, sums by ct_mel_filter_pairs, takes
 * the log and normalises, which is mel_into's arithmetic in float32 order
 * instead of double. */
#define CT_MEL_GRID_WIN 400 /* samples a frame reads from the grid (the window) */
#define CT_MEL_GRID_HOP 160
#define CT_MEL_SPEC 514     /* real and imaginary parts of the 257 bins */
size_t ct_mel_grid_len(int pad_frames);
/* ct_mel_compute_padded's clips, checks and counts, but each row of out
 * ([n][ct_mel_grid_len(pad_frames)] floats, the caller's) gets the clip's
 * window grid instead of its features. */
tg_status ct_mel_grid_padded(const ct_mel *mel, const float *const *clips, const size_t *lens,
                             int n, struct tg_threadpool *pool, int pad_frames, float *out,
                             int *out_frames, int *out_valid);
/* dft ([CT_MEL_SPEC][400], the caller's): row k < 257 is the window times
 * cos(2 pi k (56 + i) / 512), row 257 + k minus the same with sin, so that a
 * grid frame times row k is bin k's real (imaginary) part. pairs ([128]
 * [CT_MEL_SPEC]): each mel filter twice, over the real and the imaginary
 * parts' squares. Both computed in double and rounded once. */
void ct_mel_dft_table(const ct_mel *mel, float *dft);
void ct_mel_filter_pairs(const ct_mel *mel, float *pairs);

/* Energy-based split of spec 5.4 (the model's values: max_clip_s 35,
 * overlap_s 5; the quiet window is 1600 samples): returns chunk boundaries
 * [start, end) in samples, in order, covering [0, n) without overlap
 * (n_chunks >= 1 for n > 0). Free *out_bounds with tg_free. */
tg_status ct_split_chunks(const float *samples, size_t n, int sample_rate,
                          double max_clip_s, double overlap_s,
                          size_t (**out_bounds)[2], int *out_n_chunks);

#endif
