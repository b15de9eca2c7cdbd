/*
 * ffmpeg.c: any audio file FFmpeg's libraries read (libavformat demuxes,
 * libavcodec decodes, libswresample converts the sample format), into the
 * block sink of pcm.c.
 *
 * The first audio stream is decoded frame by frame; each frame becomes
 * interleaved float at the stream's own rate and channel layout (swresample
 * does only the format conversion), its channels are averaged to mono here
 * (spec 4: "multi-channel input is averaged", which a downmix matrix is
 * not), checked for non-finite values, and pushed to the sink, which
 * resamples to 16 kHz with libsoxr and enforces the ceiling as the audio
 * arrives. Resampling is left to the sink so that every reader shares one
 * resampler and a WAV decodes alike with and without FFmpeg.
 *
 * Input comes through our own AVIOContext over the descriptor pcm.c opened
 * (a regular file, checked without blocking) or over memory (the fuzzer),
 * never through FFmpeg's protocols: io_open is refused, so a playlist or
 * concat file cannot make the demuxer open other files or URLs.
 *
 * Only audio reaches FFmpeg's parsers (issue 12: a fuzzer reached the JPEG
 * XL decoder through the probe). The input is probed here, and a format
 * that is no audio container (an image, MPEG-TS, a playlist) is refused by
 * the name FFmpeg detected before its demuxer reads past the probe; the
 * demuxer then runs with that list as its format_whitelist and every audio
 * decoder, and only those, as its codec_whitelist, so the decoders that
 * stream probing opens for a cover picture or a video track are refused
 * too. The audio stream is av_find_best_stream's; other streams are
 * discarded.
 *
 * Bad packets are skipped with one warning that counts them, as the ffmpeg
 * program does (a damaged frame in an MP3 loses milliseconds, not the
 * file); a file from which nothing decodes is an error. A truncated file
 * gives what it holds.
 *
 * FFmpeg's own log goes to our debug log (CT_LOG=debug).
 *
 * Built only when CMake found FFmpeg (CT_HAVE_FFMPEG); otherwise the stubs
 * at the end say so. Not here: video, subtitles, choosing among several
 * audio streams (FFmpeg's best is taken), seeking.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "audio.h"
#include "base.h"
#include "decode.h"

#if CT_HAVE_FFMPEG

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avstring.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <pthread.h>
#include <stdio.h>

#define IO_BUF 32768

typedef struct io_state {
    const ct_audio_src *src;
    int64_t pos;   /* memory input only */
} io_state;

static int io_read(void *opaque, uint8_t *buf, int n) {
    io_state *io = opaque;
    const ct_audio_src *src = io->src;
    if (src->fd < 0) {
        if (io->pos >= (int64_t)src->size) return AVERROR_EOF;
        size_t k = src->size - (size_t)io->pos;
        if (k > (size_t)n) k = (size_t)n;
        memcpy(buf, src->mem + io->pos, k);
        io->pos += (int64_t)k;
        return (int)k;
    }
    for (;;) {
        ssize_t r = read(src->fd, buf, (size_t)n);
        if (r > 0) return (int)r;
        if (r == 0) return AVERROR_EOF;
        if (errno != EINTR) return AVERROR(errno);
    }
}

static int64_t io_seek(void *opaque, int64_t off, int whence) {
    io_state *io = opaque;
    const ct_audio_src *src = io->src;
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE) return (int64_t)src->size;
    if (src->fd >= 0) {
        off_t r = lseek(src->fd, (off_t)off, whence);
        return r < 0 ? AVERROR(errno) : (int64_t)r;
    }
    int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? io->pos : (int64_t)src->size;
    if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) return AVERROR(EINVAL);
    int64_t to = base + off;
    if (to < 0 || to > (int64_t)src->size) return AVERROR(EINVAL);
    io->pos = to;
    return to;
}

/* No file but the one given: refuses what a playlist or concat list names. */
static int refuse_io_open(struct AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                          AVDictionary **options) {
    TG_DEBUG("ffmpeg: refused to open '%s' named inside the input", url);
    return AVERROR(EPERM);
}

static void log_cb(void *avcl, int level, const char *fmt, va_list vl) {
    if (level > AV_LOG_WARNING || !tg_log_enabled(TG_LOG_DEBUG)) return;
    char line[512];
    int prefix = 1;
    va_list cp;
    va_copy(cp, vl);
    av_log_format_line2(avcl, level, fmt, cp, line, sizeof line, &prefix);
    va_end(cp);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    if (n) TG_DEBUG("ffmpeg: %s", line);
}

/* The demuxers an input may be opened with: audio containers (and those of
 * audio-and-video files people transcribe: Matroska/WebM, MP4, ASF/WMA).
 * Names as FFmpeg spells them; a demuxer whose comma-separated names hold
 * one of these matches (av_match_list). */
static const char AUDIO_FORMATS[] = "aac,aiff,asf,au,caf,flac,matroska,mov,mp3,ogg,w64,wav,wv";
/* What the refusal lists for the user. */
#define AUDIO_FORMAT_NAMES \
    "WAV, FLAC, MP3, Ogg (Vorbis, Opus), AAC, MP4/M4A, Matroska/WebM, AIFF, CAF, AU, WMA, WavPack"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char version[256];
/* Every audio decoder's name, comma-separated (the codec_whitelist); made
 * once, kept for the process. NULL when out of memory. */
static char *audio_decoders;

/* Writes the names of the audio decoders into buf (when not NULL) and
 * returns the length of the list. */
static size_t list_audio_decoders(char *buf) {
    size_t n = 0;
    void *it = NULL;
    const AVCodec *c;
    while ((c = av_codec_iterate(&it))) {
        if (c->type != AVMEDIA_TYPE_AUDIO || !av_codec_is_decoder(c)) continue;
        size_t k = strlen(c->name);
        if (buf) {
            if (n) buf[n] = ',';
            memcpy(buf + n + (n ? 1 : 0), c->name, k);
        }
        n += k + (n ? 1 : 0);
    }
    if (buf) buf[n] = 0;
    return n;
}

static void init_once(void) {
    av_log_set_callback(log_cb);
    audio_decoders = av_malloc(list_audio_decoders(NULL) + 1);
    if (audio_decoders) list_audio_decoders(audio_decoders);
    unsigned f = avformat_version(), c = avcodec_version(), r = swresample_version();
    snprintf(version, sizeof version,
             "FFmpeg libavformat %u.%u.%u / libavcodec %u.%u.%u / libswresample %u.%u.%u",
             AV_VERSION_MAJOR(f), AV_VERSION_MINOR(f), AV_VERSION_MICRO(f), AV_VERSION_MAJOR(c),
             AV_VERSION_MINOR(c), AV_VERSION_MICRO(c), AV_VERSION_MAJOR(r), AV_VERSION_MINOR(r),
             AV_VERSION_MICRO(r));
}

bool ct_ffmpeg_present(void) { return true; }

const char *ct_ffmpeg_version(void) {
    pthread_once(&once, init_once);
    return version;
}

static const char *or_unknown(const char *s) { return s ? s : "unknown"; }

static const char *av_err(int e, char buf[AV_ERROR_MAX_STRING_SIZE]) {
    av_strerror(e, buf, AV_ERROR_MAX_STRING_SIZE);
    return buf;
}

/* The decoder's state between frames. */
typedef struct dec_state {
    const char *what;
    ct_sink sink;
    SwrContext *swr;
    int swr_fmt;                /* the input format swr was made for */
    AVChannelLayout swr_layout;
    int rate, channels;
    float *inter, *mono;        /* one frame, interleaved and averaged */
    int inter_cap, mono_cap;
    int bad_packets;
    char first_bad[AV_ERROR_MAX_STRING_SIZE];
} dec_state;

static tg_status setup_swr(dec_state *d, const AVFrame *fr) {
    char eb[AV_ERROR_MAX_STRING_SIZE];
    swr_free(&d->swr);
    av_channel_layout_uninit(&d->swr_layout);
    AVChannelLayout lay = {0};   /* copy() uninits its destination first */
    if (fr->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC)
        av_channel_layout_default(&lay, fr->ch_layout.nb_channels);
    else if (av_channel_layout_copy(&lay, &fr->ch_layout) < 0)
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", d->what);
    /* same layout and rate in and out: only the sample format changes */
    int r = swr_alloc_set_opts2(&d->swr, &lay, AV_SAMPLE_FMT_FLT, fr->sample_rate, &lay,
                                fr->format, fr->sample_rate, 0, NULL);
    if (r >= 0) r = swr_init(d->swr);
    av_channel_layout_uninit(&lay);
    if (r < 0)
        return tg_status_new(TG_ERR_UNSUPPORTED, "%s: converting %s audio of %d channels: %s",
                             d->what, or_unknown(av_get_sample_fmt_name(fr->format)),
                             fr->ch_layout.nb_channels, av_err(r, eb));
    d->swr_fmt = fr->format;
    if (av_channel_layout_copy(&d->swr_layout, &fr->ch_layout) < 0)
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", d->what);
    return NULL;
}

static tg_status take_frame(dec_state *d, const AVFrame *fr) {
    char eb[AV_ERROR_MAX_STRING_SIZE];
    if (fr->nb_samples <= 0) return NULL;
    if (fr->sample_rate != d->rate)
        return tg_status_new(TG_ERR_UNSUPPORTED,
                             "%s: the sample rate changes from %d to %d Hz at %.1f s; not "
                             "supported",
                             d->what, d->rate, fr->sample_rate,
                             (double)d->sink.src_frames / d->rate);
    int ch = fr->ch_layout.nb_channels;
    if (ch <= 0) return tg_status_new(TG_ERR_FORMAT, "%s: a frame with no channels", d->what);
    if (!d->swr || fr->format != d->swr_fmt ||
        av_channel_layout_compare(&fr->ch_layout, &d->swr_layout) != 0) {
        tg_status st = setup_swr(d, fr);
        if (st) return st;
    }
    if (fr->nb_samples > INT32_MAX / ch)
        return tg_status_new(TG_ERR_FORMAT, "%s: a frame of %d samples", d->what, fr->nb_samples);
    int need = fr->nb_samples * ch;
    if (need > d->inter_cap) {
        float *a = tg_realloc(d->inter, (size_t)need * sizeof *a);
        if (!a) return tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", d->what);
        d->inter = a;
        d->inter_cap = need;
    }
    /* sized apart: a later frame may have fewer channels and more samples */
    if (fr->nb_samples > d->mono_cap) {
        float *m = tg_realloc(d->mono, (size_t)fr->nb_samples * sizeof *m);
        if (!m) return tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", d->what);
        d->mono = m;
        d->mono_cap = fr->nb_samples;
    }
    uint8_t *outp = (uint8_t *)d->inter;
    int got = swr_convert(d->swr, &outp, fr->nb_samples, (const uint8_t **)fr->extended_data,
                          fr->nb_samples);
    if (got < 0)
        return tg_status_new(TG_ERR_INTERNAL, "%s: converting samples: %s", d->what,
                             av_err(got, eb));
    for (int i = 0; i < got; i++) {
        const float *v = d->inter + (size_t)i * ch;
        double acc = 0.0;
        for (int c = 0; c < ch; c++) {
            if (!isfinite(v[c])) return ct_sink_bad_sample(&d->sink, (size_t)i, isinf(v[c]));
            acc += v[c];
        }
        d->mono[i] = ch == 1 ? v[0] : (float)(acc / ch);
    }
    d->channels = ch;
    return ct_sink_push(&d->sink, d->mono, (size_t)got);
}

static void count_bad(dec_state *d, int r) {
    if (d->bad_packets++ == 0) av_err(r, d->first_bad);
}

/* Takes every frame the decoder has ready. */
static tg_status drain(dec_state *d, AVCodecContext *dec, AVFrame *fr) {
    for (;;) {
        int r = avcodec_receive_frame(dec, fr);
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return NULL;
        if (r < 0) {
            count_bad(d, r);
            return NULL;
        }
        tg_status st = take_frame(d, fr);
        av_frame_unref(fr);
        if (st) return st;
    }
}

/* Image demuxers: FFmpeg's per-codec image readers are "<codec>_pipe", its
 * file-sequence reader "image2". */
static bool is_image_format(const char *name) {
    size_t n = strlen(name);
    return (n > 5 && !strcmp(name + n - 5, "_pipe")) || !strcmp(name, "image2");
}

/* Probes the input and refuses a format that is no audio container, naming
 * the one detected; *out_format is the audio demuxer to open. */
static tg_status probe_audio_format(AVIOContext *avio, const char *what,
                                    const AVInputFormat **out_format) {
    char eb[AV_ERROR_MAX_STRING_SIZE];
    const AVInputFormat *f = NULL;
    int r = av_probe_input_buffer2(avio, &f, what, NULL, 0, 0);
    if (r < 0 || !f)
        return tg_status_new(TG_ERR_FORMAT, "%s: not an audio file FFmpeg can read (%s)", what,
                             av_err(r < 0 ? r : AVERROR_INVALIDDATA, eb));
    if (av_match_list(f->name, AUDIO_FORMATS, ',') <= 0)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: not an audio file: FFmpeg detects %s%s (%s); only audio "
                             "formats are read (" AUDIO_FORMAT_NAMES ")",
                             what, is_image_format(f->name) ? "an image, " : "", f->name,
                             or_unknown(f->long_name));
    *out_format = f;
    return NULL;
}

/* The demuxer's options: the formats and decoders it may use. */
static tg_status allow_lists(const char *what, AVDictionary **out_opts) {
    *out_opts = NULL;
    if (!audio_decoders || av_dict_set(out_opts, "format_whitelist", AUDIO_FORMATS, 0) < 0 ||
        av_dict_set(out_opts, "codec_whitelist", audio_decoders, 0) < 0) {
        av_dict_free(out_opts);
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", what);
    }
    return NULL;
}

static const char *stream_list(const AVFormatContext *fmt, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = 0;
    for (unsigned i = 0; i < fmt->nb_streams && used + 1 < cap; i++) {
        const AVCodecParameters *p = fmt->streams[i]->codecpar;
        int w = snprintf(buf + used, cap - used, "%s%s %s", i ? ", " : "",
                         or_unknown(av_get_media_type_string(p->codec_type)),
                         avcodec_get_name(p->codec_id));
        if (w < 0) break;
        used += (size_t)w;
    }
    return fmt->nb_streams ? buf : "none";
}

tg_status ct_ffmpeg_decode(const ct_audio_src *src, size_t max_bytes, ct_pcm *out) {
    pthread_once(&once, init_once);
    const char *what = src->what;
    char eb[AV_ERROR_MAX_STRING_SIZE];
    tg_status st = NULL;
    io_state io = {.src = src, .pos = 0};
    AVIOContext *avio = NULL;
    AVFormatContext *fmt = NULL;
    AVCodecContext *dec = NULL;
    AVPacket *pkt = NULL;
    AVFrame *fr = NULL;
    AVDictionary *opts = NULL;
    dec_state d = {.what = what, .swr_fmt = -1};
    memset(out, 0, sizeof *out);
    if (src->fd >= 0 && lseek(src->fd, 0, SEEK_SET) < 0)
        return tg_status_new(TG_ERR_IO, "reading %s: %s", what, strerror(errno));

    uint8_t *iobuf = av_malloc(IO_BUF);
    if (iobuf) avio = avio_alloc_context(iobuf, IO_BUF, 0, &io, io_read, NULL, io_seek);
    if (!avio) {
        av_free(iobuf);
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", what);
    }
    fmt = avformat_alloc_context();
    if (!fmt) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", what);
        goto fail;
    }
    fmt->pb = avio;
    fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    fmt->io_open = refuse_io_open;
    const AVInputFormat *ifmt = NULL;
    if ((st = probe_audio_format(avio, what, &ifmt)) || (st = allow_lists(what, &opts))) goto fail;
    int r = avformat_open_input(&fmt, what, ifmt, &opts);
    if (r < 0) {
        fmt = NULL;   /* freed by avformat_open_input */
        st = tg_status_new(TG_ERR_FORMAT, "%s: not an audio file FFmpeg can read (%s)", what,
                           av_err(r, eb));
        goto fail;
    }
    r = avformat_find_stream_info(fmt, NULL);
    if (r < 0) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: corrupt %s file: reading its streams failed (%s)",
                           what, fmt->iformat->name, av_err(r, eb));
        goto fail;
    }
    const AVCodec *codec = NULL;
    int idx = av_find_best_stream(fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
    if (idx == AVERROR_STREAM_NOT_FOUND) {
        char list[256];
        st = tg_status_new(TG_ERR_FORMAT,
                           "%s: not an audio file FFmpeg can read (no audio stream; the %s "
                           "container holds: %s)",
                           what, fmt->iformat->name, stream_list(fmt, list, sizeof list));
        goto fail;
    }
    if (idx < 0 || !codec || codec->type != AVMEDIA_TYPE_AUDIO) {
        const AVStream *a = NULL;
        for (unsigned i = 0; i < fmt->nb_streams && !a; i++)
            if (fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) a = fmt->streams[i];
        st = tg_status_new(TG_ERR_UNSUPPORTED, "%s: this FFmpeg has no decoder for %s audio",
                           what, a ? avcodec_get_name(a->codecpar->codec_id) : "its");
        goto fail;
    }
    AVStream *as = fmt->streams[idx];
    for (unsigned i = 0; i < fmt->nb_streams; i++)
        if ((int)i != idx) fmt->streams[i]->discard = AVDISCARD_ALL;
    dec = avcodec_alloc_context3(codec);
    if (!dec) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", what);
        goto fail;
    }
    av_dict_free(&opts);
    if ((st = allow_lists(what, &opts))) goto fail;
    if ((r = avcodec_parameters_to_context(dec, as->codecpar)) < 0 ||
        (dec->pkt_timebase = as->time_base, (r = avcodec_open2(dec, codec, &opts)) < 0)) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: cannot open the %s decoder (%s)", what,
                           codec->name, av_err(r, eb));
        goto fail;
    }
    d.rate = dec->sample_rate;
    if (d.rate <= 0 || dec->ch_layout.nb_channels <= 0) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: %s stream of %d Hz and %d channels", what,
                           codec->name, d.rate, dec->ch_layout.nb_channels);
        goto fail;
    }
    /* the declared length sizes the output once; it is a hint (VBR files
     * estimate it), so the ceiling is enforced while decoding, not here */
    double secs = 0;
    if (as->duration > 0 && as->time_base.den > 0)
        secs = (double)as->duration * av_q2d(as->time_base);
    else if (fmt->duration > 0)
        secs = (double)fmt->duration / AV_TIME_BASE;
    if ((st = ct_sink_init(&d.sink, what, d.rate, max_bytes, secs * d.rate))) goto fail;

    pkt = av_packet_alloc();
    fr = av_frame_alloc();
    if (!pkt || !fr) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", what);
        goto fail;
    }
    for (;;) {
        r = av_read_frame(fmt, pkt);
        if (r < 0) {
            if (r != AVERROR_EOF) {
                if (d.sink.src_frames == 0) {
                    st = tg_status_new(TG_ERR_FORMAT, "%s: corrupt %s file (%s)", what,
                                       fmt->iformat->name, av_err(r, eb));
                    goto fail;
                }
                TG_WARN("%s: reading stopped at %.1f s (%s); the file is truncated or "
                        "damaged, using the audio before it",
                        what, (double)d.sink.src_frames / d.rate, av_err(r, eb));
            }
            break;
        }
        if (pkt->stream_index == idx) {
            r = avcodec_send_packet(dec, pkt);
            if (r < 0 && r != AVERROR(EAGAIN)) count_bad(&d, r);
            st = drain(&d, dec, fr);
        }
        av_packet_unref(pkt);
        if (st) goto fail;
    }
    avcodec_send_packet(dec, NULL);
    if ((st = drain(&d, dec, fr))) goto fail;
    if (d.sink.src_frames == 0) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: corrupt %s file: no audio decoded%s%s%s", what,
                           codec->name, d.bad_packets ? " (" : "",
                           d.bad_packets ? d.first_bad : "", d.bad_packets ? ")" : "");
        goto fail;
    }
    if (d.bad_packets)
        TG_WARN("%s: %d %s packets failed to decode (%s); their audio is missing", what,
                d.bad_packets, codec->name, d.first_bad);
    if ((st = ct_sink_finish(&d.sink, out))) goto fail;
    out->source_channels = d.channels ? d.channels : dec->ch_layout.nb_channels;
    snprintf(out->codec, sizeof out->codec, "%s", avcodec_get_name(as->codecpar->codec_id));
fail:
    ct_sink_free(&d.sink);
    swr_free(&d.swr);
    av_channel_layout_uninit(&d.swr_layout);
    tg_free(d.inter);
    tg_free(d.mono);
    av_frame_free(&fr);
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    av_dict_free(&opts);
    avformat_close_input(&fmt);
    if (avio) av_freep(&avio->buffer);
    avio_context_free(&avio);
    if (st) memset(out, 0, sizeof *out);
    return st;
}

#else /* !CT_HAVE_FFMPEG */

bool ct_ffmpeg_present(void) { return false; }

const char *ct_ffmpeg_version(void) { return "built-in WAV reader (no FFmpeg)"; }

tg_status ct_ffmpeg_decode(const ct_audio_src *src, size_t max_bytes, ct_pcm *out) {
    memset(out, 0, sizeof *out);
    return tg_status_new(TG_ERR_UNSUPPORTED, "%s: this build reads WAV only (built without FFmpeg)",
                         src->what);
}

#endif
