/*
 * wav.c: our RIFF/WAVE reader.
 *
 * Reads the formats speech files come in: integer PCM of 8 (unsigned), 16,
 * 24 and 32 bits, IEEE float of 32 and 64 bits, plain or wrapped in
 * WAVE_FORMAT_EXTENSIBLE (sub-format GUID PCM or IEEE float), any number of
 * channels, averaged to mono. Samples become floats in [-1, 1): integers are
 * divided by 2^(bits-1) (int16 / 32768, as the reference's audio loading
 * does), floats are taken as they are.
 *
 * Chunks are walked one by one with their word padding (an odd-sized chunk is
 * followed by one pad byte); unknown chunks (LIST, fact, cue, ...) are
 * skipped, and "fmt " may come after "data". The walk is bounded by the
 * bytes actually present: a RIFF size larger than the file (streamed files
 * often carry 0xFFFFFFFF or a stale size) is not an error.
 *
 * Decision on a data chunk whose size runs past the end of the file (a
 * truncated download, or a streamed writer that never fixed the size): the
 * whole frames present are read and a warning names how many bytes were
 * missing; only a data chunk with not even one whole frame present is an
 * error ("truncated data chunk"). A file with no samples at all is an error,
 * because nothing downstream can use it.
 *
 * Every error names the file (the `what` argument) and the problem. The
 * parser reads only inside [data, data + size) and never trusts a size field
 * before checking it against the bytes present, so arbitrary input is safe
 * (fuzz/fuzz_wav.c).
 *
 * ct_wav_header and ct_wav_decode split the reader so that ct_pcm_load
 * (pcm.c) can decode a mapped file in blocks; ct_wav_parse decodes a whole
 * image at once, as before.
 *
 * Deliberately not here: RF64/BW64 (files over 4 GB), compressed formats
 * (ADPCM, A-law, mu-law, MP3 in WAV), big-endian RIFX, and any resampling
 * (resample.c).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "audio.h"
#include "base.h"

#define WAVE_FORMAT_PCM 0x0001
#define WAVE_FORMAT_IEEE_FLOAT 0x0003
#define WAVE_FORMAT_EXTENSIBLE 0xFFFE

/* The 14 bytes that follow the 2-byte format code in every KSDATAFORMAT
 * sub-format GUID of the WAVE family: 0000-0010-8000-00AA00389B71. */
static const uint8_t guid_tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                      0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

/* A name for the format tags one meets in practice, for the error message. */
static const char *format_tag_name(unsigned tag) {
    switch (tag) {
    case 0x0002: return "Microsoft ADPCM";
    case 0x0006: return "A-law";
    case 0x0007: return "mu-law";
    case 0x0011: return "IMA ADPCM";
    case 0x0031: return "GSM 6.10";
    case 0x0050: return "MPEG";
    case 0x0055: return "MP3";
    case 0x0161: case 0x0162: case 0x0163: return "WMA";
    case 0x00FF: case 0x1610: return "AAC";
    case 0x2000: return "AC-3";
    case 0xF1AC: return "FLAC";
    default: return "unknown";
    }
}

/* Copies a chunk id for messages, with non-printable bytes as '?'. */
static void chunk_name(const uint8_t *p, char out[5]) {
    for (int i = 0; i < 4; i++) out[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
    out[4] = 0;
}

typedef struct wav_fmt {
    unsigned tag;       /* PCM or IEEE float, after unwrapping EXTENSIBLE */
    unsigned channels;
    uint32_t rate;
    unsigned block_align;
    unsigned bits;      /* container bits per sample */
} wav_fmt;

static tg_status parse_fmt(const uint8_t *p, uint32_t size, const char *what, wav_fmt *f) {
    if (size < 16)
        return tg_status_new(TG_ERR_FORMAT, "%s: fmt chunk is %u bytes (need at least 16)",
                             what, size);
    unsigned tag = rd16(p);
    f->channels = rd16(p + 2);
    f->rate = rd32(p + 4);
    f->block_align = rd16(p + 12);
    f->bits = rd16(p + 14);
    if (tag == WAVE_FORMAT_EXTENSIBLE) {
        if (size < 40)
            return tg_status_new(TG_ERR_FORMAT,
                                 "%s: WAVE_FORMAT_EXTENSIBLE fmt chunk is %u bytes (need 40)",
                                 what, size);
        unsigned cb = rd16(p + 16);
        if (cb < 22)
            return tg_status_new(TG_ERR_FORMAT,
                                 "%s: WAVE_FORMAT_EXTENSIBLE extension is %u bytes (need 22)",
                                 what, cb);
        const uint8_t *guid = p + 24;
        if (memcmp(guid + 2, guid_tail, sizeof guid_tail) != 0)
            return tg_status_new(TG_ERR_UNSUPPORTED,
                                 "%s: WAVE_FORMAT_EXTENSIBLE sub-format GUID is not a WAVE "
                                 "format (only PCM and IEEE float are supported)",
                                 what);
        tag = rd16(guid);
        if (tag != WAVE_FORMAT_PCM && tag != WAVE_FORMAT_IEEE_FLOAT)
            return tg_status_new(TG_ERR_UNSUPPORTED,
                                 "%s: unsupported WAVE_FORMAT_EXTENSIBLE sub-format 0x%04X (%s); "
                                 "only PCM and IEEE float are supported",
                                 what, tag, format_tag_name(tag));
    } else if (tag != WAVE_FORMAT_PCM && tag != WAVE_FORMAT_IEEE_FLOAT) {
        return tg_status_new(TG_ERR_UNSUPPORTED,
                             "%s: unsupported format tag 0x%04X (%s); only PCM and IEEE float "
                             "WAV are read (convert it, e.g. ffmpeg -i in -ar 16000 out.wav)",
                             what, tag, format_tag_name(tag));
    }
    f->tag = tag;
    if (f->channels == 0) return tg_status_new(TG_ERR_FORMAT, "%s: 0 channels", what);
    if (f->rate == 0) return tg_status_new(TG_ERR_FORMAT, "%s: sample rate 0", what);
    if (f->rate > INT32_MAX)
        return tg_status_new(TG_ERR_FORMAT, "%s: sample rate %u is out of range", what, f->rate);
    if (tag == WAVE_FORMAT_PCM && f->bits != 8 && f->bits != 16 && f->bits != 24 &&
        f->bits != 32)
        return tg_status_new(TG_ERR_UNSUPPORTED,
                             "%s: bits per sample %u unsupported for PCM (8, 16, 24 or 32)", what,
                             f->bits);
    if (tag == WAVE_FORMAT_IEEE_FLOAT && f->bits != 32 && f->bits != 64)
        return tg_status_new(TG_ERR_UNSUPPORTED,
                             "%s: bits per sample %u unsupported for IEEE float (32 or 64)",
                             what, f->bits);
    unsigned expect = f->channels * (f->bits / 8);
    if (f->block_align != expect)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: block align %u does not match %u channels × %u bits (%u bytes)",
                             what, f->block_align, f->channels, f->bits, expect);
    return NULL;
}

/* One channel value of one frame as a float sample. */
static double decode_one(const uint8_t *p, const wav_fmt *f) {
    if (f->tag == WAVE_FORMAT_IEEE_FLOAT) {
        if (f->bits == 32) {
            uint32_t u = rd32(p);
            float v;
            memcpy(&v, &u, sizeof v);
            return v;
        }
        uint64_t u = (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
        double v;
        memcpy(&v, &u, sizeof v);
        return v;
    }
    switch (f->bits) {
    case 8: return ((int)p[0] - 128) / 128.0;
    case 16: return (int16_t)rd16(p) / 32768.0;
    case 24: {
        int32_t v = (int32_t)((uint32_t)p[0] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 24);
        return (v >> 8) / 8388608.0;
    }
    default: return (int32_t)rd32(p) / 2147483648.0;
    }
}

void ct_audio_free(ct_audio *a) {
    if (!a) return;
    tg_free(a->samples);
    memset(a, 0, sizeof *a);
}

static void codec_name(const wav_fmt *f, char out[16]) {
    if (f->tag == WAVE_FORMAT_IEEE_FLOAT)
        snprintf(out, 16, "pcm_f%ule", f->bits);
    else if (f->bits == 8)
        snprintf(out, 16, "pcm_u8");
    else
        snprintf(out, 16, "pcm_s%ule", f->bits);
}

tg_status ct_wav_header(const uint8_t *data, size_t size, const char *what, ct_wav_info *out) {
    if (!what) what = "WAV";
    memset(out, 0, sizeof *out);
    if (size < 12)
        return tg_status_new(TG_ERR_FORMAT, "%s: %zu bytes is too short for a WAV header", what,
                             size);
    if (!memcmp(data, "RF64", 4) || !memcmp(data, "BW64", 4))
        return tg_status_new(TG_ERR_UNSUPPORTED, "%s: RF64/BW64 WAV (over 4 GB) is not supported",
                             what);
    if (!memcmp(data, "RIFX", 4))
        return tg_status_new(TG_ERR_UNSUPPORTED, "%s: big-endian RIFX WAV is not supported", what);
    if (memcmp(data, "RIFF", 4) != 0)
        return tg_status_new(TG_ERR_FORMAT, "%s: not a WAV file (no RIFF magic)", what);
    if (memcmp(data + 8, "WAVE", 4) != 0) {
        char form[5];
        chunk_name(data + 8, form);
        return tg_status_new(TG_ERR_FORMAT, "%s: RIFF file but not WAVE (form type '%s')", what,
                             form);
    }

    /* walk the chunks inside the RIFF body, bounded by the bytes present */
    size_t end = size;
    uint64_t riff_end = (uint64_t)rd32(data + 4) + 8;
    if (riff_end >= 12 && riff_end < end) end = (size_t)riff_end;
    wav_fmt fmt = {0};
    int have_fmt = 0;
    const uint8_t *pcm = NULL;
    size_t pcm_bytes = 0, pcm_claimed = 0;
    int have_data = 0;
    size_t pos = 12;
    while (pos + 8 <= end) {
        const uint8_t *ch = data + pos;
        uint32_t csize = rd32(ch + 4);
        size_t avail = end - (pos + 8);
        char name[5];
        chunk_name(ch, name);
        if (!memcmp(ch, "fmt ", 4)) {
            if (csize > avail)
                return tg_status_new(TG_ERR_FORMAT,
                                     "%s: truncated fmt chunk (%u bytes, %zu present)", what,
                                     csize, avail);
            if (!have_fmt) {
                tg_status st = parse_fmt(ch + 8, csize, what, &fmt);
                if (st) return st;
                have_fmt = 1;
            }
        } else if (!memcmp(ch, "data", 4)) {
            if (!have_data) {
                have_data = 1;
                pcm = ch + 8;
                pcm_claimed = csize;
                pcm_bytes = csize > avail ? avail : csize;
            }
            if (csize > avail) break;   /* the data ran to the end of the file */
        } else if (csize > avail) {
            /* a truncated trailing chunk after the audio is harmless */
            if (have_data && have_fmt) break;
            return tg_status_new(TG_ERR_FORMAT,
                                 "%s: truncated '%s' chunk (%u bytes, %zu present) before the "
                                 "audio data",
                                 what, name, csize, avail);
        }
        pos += 8 + (size_t)csize + (csize & 1u);
    }
    if (!have_fmt) return tg_status_new(TG_ERR_FORMAT, "%s: fmt chunk missing", what);
    if (!have_data) return tg_status_new(TG_ERR_FORMAT, "%s: data chunk missing", what);

    size_t n = pcm_bytes / fmt.block_align;
    if (pcm_claimed > pcm_bytes) {
        if (n == 0)
            return tg_status_new(TG_ERR_FORMAT,
                                 "%s: truncated data chunk (%zu bytes claimed, %zu present, "
                                 "not one whole frame of %u bytes)",
                                 what, pcm_claimed, pcm_bytes, fmt.block_align);
        TG_WARN("%s: truncated data chunk: %zu bytes claimed, %zu present; reading the %zu "
                "whole frames present",
                what, pcm_claimed, pcm_bytes, n);
    } else if (pcm_bytes % fmt.block_align) {
        TG_WARN("%s: data chunk of %zu bytes is not a whole number of %u-byte frames; "
                "ignoring the last %zu bytes",
                what, pcm_bytes, fmt.block_align, pcm_bytes % fmt.block_align);
    }
    if (n == 0) return tg_status_new(TG_ERR_FORMAT, "%s: data chunk holds no samples", what);
    out->tag = fmt.tag;
    out->channels = fmt.channels;
    out->bits = fmt.bits;
    out->block_align = fmt.block_align;
    out->rate = fmt.rate;
    out->pcm = pcm;
    out->frames = n;
    codec_name(&fmt, out->codec);
    return NULL;
}

/* Frames [first, first + count) to mono. With check, stops at the first
 * frame holding a non-finite value and returns its index (from first). */
static size_t decode_range(const ct_wav_info *w, size_t first, size_t count, float *out,
                           bool check, bool *out_inf) {
    wav_fmt fmt = {.tag = w->tag, .channels = w->channels, .rate = w->rate,
                   .block_align = w->block_align, .bits = w->bits};
    unsigned bps = fmt.bits / 8, nch = fmt.channels;
    check = check && fmt.tag == WAVE_FORMAT_IEEE_FLOAT;
    *out_inf = false;
    for (size_t i = 0; i < count; i++) {
        const uint8_t *fr = w->pcm + (first + i) * fmt.block_align;
        double acc = 0.0;
        for (unsigned c = 0; c < nch; c++) {
            double v = decode_one(fr + c * bps, &fmt);
            /* checked per channel: +Inf and -Inf in two channels would
             * average to a NaN and hide what the file holds; a float64
             * beyond float32's range counts as infinite, which it becomes */
            if (check && !isfinite((float)v)) {
                *out_inf = isinf(v);
                return i;
            }
            acc += v;
        }
        out[i] = nch == 1 ? (float)acc : (float)(acc / nch);
    }
    return count;
}

size_t ct_wav_decode(const ct_wav_info *w, size_t first, size_t count, float *out, bool *out_inf) {
    return decode_range(w, first, count, out, true, out_inf);
}

tg_status ct_wav_parse(const uint8_t *data, size_t size, const char *what, ct_audio *out) {
    if (!what) what = "WAV";
    memset(out, 0, sizeof *out);
    ct_wav_info w;
    tg_status st = ct_wav_header(data, size, what, &w);
    if (st) return st;
    float *s = tg_malloc(w.frames * sizeof *s);
    if (!s)
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory for %zu samples", what,
                             w.frames);
    /* non-finite float samples are kept, as the file holds them: the
     * frontend reports them, and ct_pcm_load checks them in blocks */
    bool inf;
    decode_range(&w, 0, w.frames, s, false, &inf);
    out->samples = s;
    out->n = w.frames;
    out->sample_rate = (int)w.rate;
    return NULL;
}

tg_status ct_wav_read(const char *path, ct_audio *out) {
    tg_file_map map;
    memset(out, 0, sizeof *out);
    tg_status st = tg_file_map_open(path, &map);
    if (st) return st;
    st = ct_wav_parse(map.data, map.size, path, out);
    tg_file_unmap(&map);
    return st;
}
