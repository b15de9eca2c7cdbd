/*
 * pcm.c: an audio file to 16 kHz mono float samples under a memory ceiling
 * (ct_pcm_load), and the block sink every reader feeds.
 *
 * Why blocks: holding the file, its decoded samples and a resampled copy at
 * once made a 4 GB WAV peak at 11.2 GB (issue 12, item 3). Here a WAV is
 * mapped and decoded CT_SINK_BLOCK frames at a time, the pages already read
 * are dropped from the mapping, and each block is resampled by a streaming
 * libsoxr resampler (SOXR_HQ, as resample.c) straight into the output. So
 * the peak is the output plus a constant, and the output is bounded by the
 * ceiling, which is checked on every block (not after decoding). A WAV's
 * exact output size is known from its header, so one declaring 1 Hz is
 * refused before anything is allocated (item 2), and the output array is
 * allocated once at its final size.
 *
 * One resampler for every reader: FFmpeg's decoded audio goes through the
 * same sink as the WAV reader's, so a file gives the same samples with or
 * without FFmpeg in the build, and non-finite values are caught (with their
 * index and time in the source) before a resampler smears an Inf into NaNs.
 *
 * Inputs are checked before they are opened: "-" (standard input) is
 * refused, a directory, FIFO or device is refused by stat before open, and
 * the open itself is O_NONBLOCK, so no input can block (issue 12, item 4).
 * A WAV (RIFF/WAVE magic) goes to our reader; when FFmpeg is in the build,
 * anything else, and WAVs our reader does not support (ADPCM, RF64...), go
 * to ffmpeg.c. Without FFmpeg, known magic bytes name the format.
 *
 * Not here: standard input or other streams, decoding (wav.c, ffmpeg.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <soxr.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audio.h"
#include "base.h"
#include "decode.h"

#define OUT_RATE 16000
#define CT_SINK_TMP 16384

/* "4 GiB", "1.5 MiB": the ceiling as a user gives it. */
static void fmt_bytes(double b, char out[32]) {
    if (b >= (double)(1u << 30))
        snprintf(out, 32, "%.4g GiB", b / (double)(1u << 30));
    else if (b >= (double)(1u << 20))
        snprintf(out, 32, "%.4g MiB", b / (double)(1u << 20));
    else
        snprintf(out, 32, "%.0f bytes", b);
}

tg_status ct_sink_check_size(const char *what, double frames, int in_rate, size_t max_bytes) {
    if (in_rate <= 0) return NULL;   /* ct_sink_init says what is wrong */
    double out = ceil(frames * OUT_RATE / in_rate);
    if (out * sizeof(float) > (double)max_bytes) {
        char need[32], cap[32];
        fmt_bytes(out * sizeof(float), need);
        fmt_bytes((double)max_bytes, cap);
        return tg_status_new(TG_ERR_NO_MEMORY,
                             "%s: %.0f frames at %d Hz would decode to %.0f samples at 16 kHz "
                             "(%s), over the audio memory ceiling of %s; refused before "
                             "decoding (raise the ceiling, --audio-memory-gb, if the file is "
                             "right)",
                             what, frames, in_rate, out, need, cap);
    }
    return NULL;
}

tg_status ct_sink_init(ct_sink *s, const char *what, int in_rate, size_t max_bytes,
                       double expect_frames) {
    memset(s, 0, sizeof *s);
    s->what = what;
    s->in_rate = in_rate;
    s->max_bytes = max_bytes;
    if (in_rate < CT_AUDIO_MIN_RATE)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: sample rate %d Hz is below %d Hz, which no speech recording "
                             "uses (a damaged header?)",
                             what, in_rate, CT_AUDIO_MIN_RATE);
    tg_status st = NULL;
    if (in_rate != OUT_RATE) {
        soxr_error_t err = NULL;
        soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
        soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
        s->soxr = soxr_create(in_rate, OUT_RATE, 1, &err, &io, &q, NULL);
        if (!s->soxr) {
            st = tg_status_new(TG_ERR_INTERNAL, "%s: resampling %d Hz to 16 kHz: libsoxr: %s",
                               what, in_rate, err ? err : "soxr_create failed");
            goto fail;
        }
        s->tmp = tg_malloc(CT_SINK_TMP * sizeof *s->tmp);
        if (!s->tmp) goto oom;
    }
    size_t max_n = max_bytes / sizeof(float);
    double want = expect_frames > 0 ? ceil(expect_frames * OUT_RATE / in_rate) + 64 : 65536;
    size_t cap = want < (double)max_n ? (size_t)want : max_n;
    if (cap < 1) cap = 1;
    s->buf = tg_malloc(cap * sizeof *s->buf);
    if (!s->buf) goto oom;
    s->cap = cap;
    return NULL;
oom:
    st = tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory for the decoded audio", what);
fail:
    ct_sink_free(s);
    return st;
}

static tg_status over_ceiling(const ct_sink *s) {
    char cap[32];
    fmt_bytes((double)s->max_bytes, cap);
    return tg_status_new(TG_ERR_NO_MEMORY,
                         "%s: the decoded audio passes the audio memory ceiling of %s at %.1f s "
                         "of the source (%zu samples at 16 kHz); stopped decoding (raise the "
                         "ceiling, --audio-memory-gb, or cut the file)",
                         s->what, cap, (double)s->src_frames / s->in_rate, s->n);
}

static tg_status append(ct_sink *s, const float *x, size_t k) {
    if (k == 0) return NULL;
    size_t max_n = s->max_bytes / sizeof(float);
    if (s->n + k > max_n || s->n + k < s->n) return over_ceiling(s);
    if (s->n + k > s->cap) {
        /* geometric, capped at the ceiling; large blocks are mremap'd by
         * realloc, so growing does not hold two copies */
        size_t cap = s->cap + s->cap / 2;
        if (cap < s->n + k) cap = s->n + k;
        if (cap > max_n) cap = max_n;
        float *b = tg_realloc(s->buf, cap * sizeof *b);
        if (!b)
            return tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory for %zu decoded samples",
                                 s->what, cap);
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->n, x, k * sizeof *x);
    s->n += k;
    return NULL;
}

/* Feeds n frames (x NULL: the end of input) through the resampler. */
static tg_status resample(ct_sink *s, const float *x, size_t n) {
    size_t done = 0;
    for (;;) {
        size_t idone = 0, odone = 0;
        soxr_error_t err = soxr_process(s->soxr, x ? x + done : NULL, x ? n - done : 0, &idone,
                                        s->tmp, CT_SINK_TMP, &odone);
        if (err)
            return tg_status_new(TG_ERR_INTERNAL, "%s: resampling %d Hz to 16 kHz: libsoxr: %s",
                                 s->what, s->in_rate, err);
        /* finite input can still overflow the filter when a float file's
         * samples are huge (1e38): refuse rather than hand on infinities */
        if (ct_audio_first_nonfinite(s->tmp, odone) < odone)
            return tg_status_new(TG_ERR_FORMAT,
                                 "%s: resampling to 16 kHz overflowed near %.3f s of the "
                                 "source: its float samples are far outside [-1, 1]",
                                 s->what, (double)s->src_frames / s->in_rate);
        tg_status st = append(s, s->tmp, odone);
        if (st) return st;
        done += idone;
        /* more to come while input is left or the output block was full */
        if ((x ? done >= n : true) && odone < CT_SINK_TMP) return NULL;
    }
}

tg_status ct_sink_push(ct_sink *s, const float *x, size_t n) {
    tg_status st = s->soxr ? resample(s, x, n) : append(s, x, n);
    s->src_frames += n;
    return st;
}

tg_status ct_sink_bad_sample(const ct_sink *s, size_t at, bool inf) {
    size_t i = s->src_frames + at;
    return tg_status_new(TG_ERR_FORMAT,
                         "%s: sample %zu (%.3f s, at the file's %d Hz) is %s; the file holds "
                         "non-finite float samples",
                         s->what, i, (double)i / s->in_rate, s->in_rate,
                         inf ? "infinite" : "NaN");
}

tg_status ct_sink_finish(ct_sink *s, ct_pcm *out) {
    tg_status st = NULL;
    if (s->soxr && (st = resample(s, NULL, 0))) return st;
    if (s->n == 0)
        return tg_status_new(TG_ERR_FORMAT, "%s: no audio samples decoded", s->what);
    if (s->n < s->cap) {
        float *b = tg_realloc(s->buf, s->n * sizeof *b);
        if (b) s->buf = b;   /* a failed shrink keeps the larger block */
    }
    out->samples = s->buf;
    out->n = s->n;
    out->duration_s = (double)s->src_frames / s->in_rate;
    out->source_rate = s->in_rate;
    s->buf = NULL;
    s->n = s->cap = 0;
    return NULL;
}

void ct_sink_free(ct_sink *s) {
    if (!s) return;
    if (s->soxr) soxr_delete(s->soxr);
    tg_free(s->buf);
    tg_free(s->tmp);
    memset(s, 0, sizeof *s);
}

void ct_pcm_free(ct_pcm *p) {
    if (!p) return;
    tg_free(p->samples);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------ the readers */

/* The WAV image at data (a mapping of fd when fd >= 0, whose pages are
 * dropped as they are decoded) in blocks through a sink. */
static tg_status load_wav(const uint8_t *data, size_t size, int fd, const char *what,
                          size_t max_bytes, ct_pcm *out) {
    ct_wav_info w;
    ct_sink sink = {0};
    float *block = NULL;
    tg_status st = ct_wav_header(data, size, what, &w);
    if (st) return st;
    if ((st = ct_sink_check_size(what, (double)w.frames, (int)w.rate, max_bytes))) return st;
    if ((st = ct_sink_init(&sink, what, (int)w.rate, max_bytes, (double)w.frames))) return st;
    block = tg_malloc(CT_SINK_BLOCK * sizeof *block);
    if (!block) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", what);
        goto fail;
    }
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t dropped = (uintptr_t)data;
    for (size_t at = 0; at < w.frames;) {
        size_t k = w.frames - at < CT_SINK_BLOCK ? w.frames - at : CT_SINK_BLOCK;
        bool inf;
        size_t good = ct_wav_decode(&w, at, k, block, &inf);
        if (good < k) {
            st = ct_sink_bad_sample(&sink, good, inf);
            goto fail;
        }
        if ((st = ct_sink_push(&sink, block, k))) goto fail;
        at += k;
        if (fd >= 0 && page > 0) {
            /* the mapping's pages already read are not needed again */
            uintptr_t upto = (uintptr_t)(w.pcm + at * w.block_align) & ~(uintptr_t)(page - 1);
            if (upto > dropped) {
                madvise((void *)dropped, upto - dropped, MADV_DONTNEED);
                dropped = upto;
            }
        }
    }
    if ((st = ct_sink_finish(&sink, out))) goto fail;
    out->source_channels = (int)w.channels;
    snprintf(out->codec, sizeof out->codec, "%s", w.codec);
    ct_sink_free(&sink);
    tg_free(block);
    return NULL;
fail:
    tg_free(block);
    ct_sink_free(&sink);
    return st;
}

static bool is_wav(const uint8_t *h, size_t n) {
    return n >= 12 && (!memcmp(h, "RIFF", 4) || !memcmp(h, "RF64", 4) || !memcmp(h, "BW64", 4) ||
                       !memcmp(h, "RIFX", 4));
}

/* The format that magic bytes announce, for a build without FFmpeg. */
static const char *sniff(const uint8_t *h, size_t n) {
    if (n >= 3 && !memcmp(h, "ID3", 3)) return "MP3";
    if (n >= 4 && !memcmp(h, "fLaC", 4)) return "FLAC";
    if (n >= 4 && !memcmp(h, "OggS", 4)) return "Ogg (Vorbis/Opus)";
    if (n >= 8 && !memcmp(h + 4, "ftyp", 4)) return "MP4/M4A";
    if (n >= 4 && !memcmp(h, "\x1a\x45\xdf\xa3", 4)) return "Matroska/WebM";
    if (n >= 12 && !memcmp(h, "FORM", 4) && (!memcmp(h + 8, "AIFF", 4) || !memcmp(h + 8, "AIFC", 4)))
        return "AIFF";
    if (n >= 4 && !memcmp(h, "caff", 4)) return "CAF";
    if (n >= 5 && !memcmp(h, "#!AMR", 5)) return "AMR";
    if (n >= 4 && !memcmp(h, ".snd", 4)) return "Sun AU";
    if (n >= 8 && !memcmp(h, "\x30\x26\xb2\x75\x8e\x66\xcf\x11", 8)) return "ASF/WMA";
    if (n >= 2 && h[0] == 0xFF && (h[1] & 0xF6) == 0xF0) return "AAC (ADTS)";
    if (n >= 2 && h[0] == 0xFF && (h[1] & 0xE0) == 0xE0) return "MP3";
    return NULL;
}

/* Decodes an opened input (fd or memory), choosing the reader. */
static tg_status load_src(const ct_audio_src *src, const uint8_t *image, size_t max_bytes,
                          ct_pcm *out) {
    const char *what = src->what;
    uint8_t head[16] = {0};
    size_t hn = src->size < sizeof head ? src->size : sizeof head;
    if (src->fd >= 0) {
        ssize_t r = pread(src->fd, head, hn, 0);
        if (r < 0) return tg_status_new(TG_ERR_IO, "reading %s: %s", what, strerror(errno));
        hn = (size_t)r;
    } else {
        memcpy(head, src->mem, hn);
    }
    if (is_wav(head, hn)) {
        tg_status st = load_wav(image, src->size, src->fd, what, max_bytes, out);
        if (!st || tg_status_code(st) != TG_ERR_UNSUPPORTED || !ct_ffmpeg_present()) return st;
        TG_DEBUG("%s; trying FFmpeg", tg_status_message(st));
        tg_status_free(st);
        memset(out, 0, sizeof *out);
        return ct_ffmpeg_decode(src, max_bytes, out);
    }
    if (ct_ffmpeg_present()) return ct_ffmpeg_decode(src, max_bytes, out);
    const char *kind = sniff(head, hn);
    if (kind)
        return tg_status_new(TG_ERR_UNSUPPORTED,
                             "%s looks like %s; this build reads WAV only (built without FFmpeg)",
                             what, kind);
    return tg_status_new(TG_ERR_FORMAT,
                         "%s: not a WAV file (no RIFF magic); this build reads WAV only (built "
                         "without FFmpeg)",
                         what);
}

tg_status ct_pcm_load(const char *path, size_t max_bytes, ct_pcm *out) {
    if (!out) return tg_status_new(TG_ERR_INVALID_ARG, "ct_pcm_load: NULL argument");
    memset(out, 0, sizeof *out);
    if (!path) return tg_status_new(TG_ERR_INVALID_ARG, "ct_pcm_load: NULL path");
    if (!max_bytes) max_bytes = CT_AUDIO_DEFAULT_MAX_BYTES;
    if (!strcmp(path, "-"))
        return tg_status_new(TG_ERR_UNSUPPORTED,
                             "-: standard input is not supported; give the path of an audio "
                             "file");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return tg_status_new(errno == ENOENT || errno == ENOTDIR ? TG_ERR_NOT_FOUND : TG_ERR_IO,
                             "%s: %s", path,
                             errno == ENOENT ? "no such file" : strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return tg_status_new(TG_ERR_INVALID_ARG, "%s: is a directory, not an audio file", path);
    if (!S_ISREG(sb.st_mode))
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "%s: is %s; only regular files are read", path,
                             tg_file_kind(sb.st_mode));
    /* O_NONBLOCK: should the path become a FIFO between stat and open, the
     * open does not wait for a writer; fstat then refuses it */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return tg_status_new(errno == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO, "opening %s: %s",
                             path, strerror(errno));
    tg_status st = NULL;
    void *map = NULL;
    size_t size = 0;
    if (fstat(fd, &sb) != 0) {
        st = tg_status_new(TG_ERR_IO, "reading %s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = tg_status_new(TG_ERR_INVALID_ARG, "%s: is %s; only regular files are read", path,
                           tg_file_kind(sb.st_mode));
        goto done;
    }
    if (sb.st_size == 0) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: empty file, not audio", path);
        goto done;
    }
    if ((uintmax_t)sb.st_size > SIZE_MAX) {
        st = tg_status_new(TG_ERR_UNSUPPORTED, "%s: file too large for this machine", path);
        goto done;
    }
    size = (size_t)sb.st_size;
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        map = NULL;
        st = tg_status_new(TG_ERR_IO, "mapping %s (%zu bytes): %s", path, size, strerror(errno));
        goto done;
    }
    madvise(map, size, MADV_SEQUENTIAL);
    ct_audio_src src = {.fd = fd, .mem = NULL, .size = size, .what = path};
    st = load_src(&src, map, max_bytes, out);
done:
    if (map) munmap(map, size);
    close(fd);
    if (st) memset(out, 0, sizeof *out);
    return st;
}

tg_status ct_pcm_load_memory(const uint8_t *data, size_t size, const char *what,
                             size_t max_bytes, ct_pcm *out) {
    if (!out) return tg_status_new(TG_ERR_INVALID_ARG, "ct_pcm_load_memory: NULL argument");
    memset(out, 0, sizeof *out);
    if (!what) what = "audio";
    if (!data || size == 0) return tg_status_new(TG_ERR_FORMAT, "%s: empty, not audio", what);
    if (!max_bytes) max_bytes = CT_AUDIO_DEFAULT_MAX_BYTES;
    ct_audio_src src = {.fd = -1, .mem = data, .size = size, .what = what};
    tg_status st = load_src(&src, data, max_bytes, out);
    if (st) memset(out, 0, sizeof *out);
    return st;
}

const char *ct_audio_decoder_version(void) {
    return ct_ffmpeg_version(); /* without FFmpeg: the built-in WAV reader's name */
}

bool ct_audio_has_ffmpeg(void) { return ct_ffmpeg_present(); }
