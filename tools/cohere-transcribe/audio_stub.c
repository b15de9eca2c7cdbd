/*
 * audio_stub.c: TEMPORARY stand-in for the audio branch's API
 * (audio_api.h) -- replaced by src/audio at merge; delete this file then.
 *
 * ct_pcm_load reads only 16 kHz PCM16 WAV (channels averaged), with plain
 * C, and checks the memory ceiling against the declared data size before
 * allocating. ct_segment_audio cuts fixed windows of max_dur_s and, for
 * CT_VAD_ENERGY, drops windows whose RMS level (dB re one int16 step, as
 * auditok measures) is below the threshold, so silence gives no segment.
 * Kept small on purpose: the real decoder and VAD are the audio branch's.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audio_api.h"

#define RATE 16000

static uint32_t le32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

void ct_pcm_free(ct_pcm *p) {
    if (!p) return;
    free(p->samples);
    memset(p, 0, sizeof *p);
}

ct_status ct_pcm_load(const char *path, size_t max_bytes, ct_pcm *out) {
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(path, &sb) != 0) return tg_status_new(TG_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return tg_status_new(TG_ERR_IO, "%s: not a regular file", path);
    FILE *f = fopen(path, "rb");
    if (!f) return tg_status_new(TG_ERR_IO, "%s: %s", path, strerror(errno));
    unsigned char h[12], ch[8], fmt[16] = {0};
    tg_status st = NULL;
    bool have_fmt = false;
    if (fread(h, 1, 12, f) != 12 || memcmp(h, "RIFF", 4) || memcmp(h + 8, "WAVE", 4)) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: not a WAV file (this build reads WAV only)", path);
        goto done;
    }
    for (;;) {
        if (fread(ch, 1, 8, f) != 8) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: no data chunk (truncated WAV?)", path);
            goto done;
        }
        uint32_t size = le32(ch + 4);
        if (!memcmp(ch, "fmt ", 4)) {
            if (size < 16 || fread(fmt, 1, 16, f) != 16 || fseek(f, (long)(size - 16 + (size & 1)), SEEK_CUR)) {
                st = tg_status_new(TG_ERR_FORMAT, "%s: bad fmt chunk", path);
                goto done;
            }
            have_fmt = true;
        } else if (!memcmp(ch, "data", 4)) {
            if (!have_fmt) {
                st = tg_status_new(TG_ERR_FORMAT, "%s: data before fmt chunk", path);
                goto done;
            }
            int channels = le16(fmt + 2), bits = le16(fmt + 14);
            uint32_t rate = le32(fmt + 4);
            if (le16(fmt) != 1 || bits != 16 || channels < 1 || rate != RATE) {
                st = tg_status_new(TG_ERR_UNSUPPORTED, "%s: only 16 kHz PCM16 WAV is read by this "
                                   "build (format %u, %d bits, %u Hz)", path, le16(fmt), bits, rate);
                goto done;
            }
            size_t frames = size / (2u * (unsigned)channels);
            if (frames * sizeof(float) > max_bytes) {
                st = tg_status_new(TG_ERR_NO_MEMORY, "%s: %.1f s of audio needs %zu MB decoded, over "
                                   "the --audio-memory-gb ceiling (%zu MB)", path, (double)frames / RATE,
                                   frames * sizeof(float) >> 20, max_bytes >> 20);
                goto done;
            }
            out->samples = malloc((frames ? frames : 1) * sizeof(float));
            int16_t *buf = malloc(4096 * sizeof(int16_t) * (size_t)channels);
            if (!out->samples || !buf) {
                free(buf);
                st = tg_status_new(TG_ERR_NO_MEMORY, "%s: out of memory", path);
                goto done;
            }
            size_t got = 0;
            while (got < frames) {
                size_t want = frames - got < 4096 ? frames - got : 4096;
                size_t k = fread(buf, 2u * (unsigned)channels, want, f);
                for (size_t i = 0; i < k; i++) {
                    float acc = 0;
                    for (int c = 0; c < channels; c++)
                        acc += (int16_t)le16((unsigned char *)&buf[i * (size_t)channels + (size_t)c]);
                    out->samples[got + i] = acc / (32768.0f * (float)channels);
                }
                got += k;
                if (k < want) break; /* truncated: keep the whole frames present */
            }
            free(buf);
            if (got == 0) {
                st = tg_status_new(TG_ERR_FORMAT, "%s: no audio frames (truncated WAV?)", path);
                goto done;
            }
            out->n = got;
            out->duration_s = (double)got / RATE;
            out->source_rate = RATE;
            out->source_channels = channels;
            snprintf(out->codec, sizeof out->codec, "pcm_s16le");
            goto done;
        } else if (fseek(f, (long)(size + (size & 1)), SEEK_CUR)) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: truncated chunk", path);
            goto done;
        }
    }
done:
    fclose(f);
    if (st) ct_pcm_free(out);
    return st;
}

const char *ct_audio_decoder_version(void) { return "built-in WAV reader (stub)"; }
bool ct_audio_has_ffmpeg(void) { return false; }

void ct_vad_options_init(ct_vad_options *o) {
    o->kind = CT_VAD_ENERGY;
    o->min_dur_s = 0.5;
    o->max_dur_s = 30;
    o->max_silence_s = 0.6;
    o->energy_threshold_db = 50;
}

ct_status ct_vad_parse(const char *name, ct_vad_kind *out) {
    if (name && !strcmp(name, "energy")) *out = CT_VAD_ENERGY;
    else if (name && !strcmp(name, "none")) *out = CT_VAD_NONE;
    else return tg_status_new(TG_ERR_INVALID_ARG, "unknown VAD '%s' (use energy or none)", name ? name : "");
    return NULL;
}

void ct_spans_free(ct_span *s) { free(s); }

ct_status ct_segment_audio(const float *x, size_t n, const ct_vad_options *o, ct_span **out_spans,
                           int *out_n) {
    size_t win = (size_t)(o->max_dur_s * RATE);
    if (win < 1) win = 1;
    ct_span *s = calloc(n / win + 1, sizeof *s);
    if (!s) return tg_status_new(TG_ERR_NO_MEMORY, "segmenting: out of memory");
    int k = 0;
    for (size_t a = 0; a < n; a += win) {
        size_t b = a + win < n ? a + win : n;
        double e = 0;
        for (size_t i = a; i < b; i++) e += (double)x[i] * x[i] * 32768.0 * 32768.0;
        double db = 10 * log10(e / (double)(b - a) + 1e-12);
        if (o->kind == CT_VAD_ENERGY && db < o->energy_threshold_db) continue;
        s[k++] = (ct_span){a, b, (double)a / RATE, (double)b / RATE};
    }
    *out_spans = s;
    *out_n = k;
    return NULL;
}
