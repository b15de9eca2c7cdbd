/*
 * output_render.c: one source's transcript as txt, SRT, WebVTT or JSON
 * (ct_render in cohere_transcribe.h), and the line escaping every
 * line-oriented output goes through (ct_escape_line).
 *
 * SRT times are HH:MM:SS,mmm; WebVTT's are MM:SS.mmm, with hours only for
 * a time of an hour or more (both forms are valid WebVTT), and its text has
 * & < > escaped as the format requires. JSON follows
 * schema/transcript.schema.json (CT_TRANSCRIPT_SCHEMA_VERSION) and is built
 * with cJSON, so its strings are escaped by the JSON rules; times there are
 * rounded to the millisecond, as in the subtitles.
 *
 * Not here: choosing file names, writing files (output_set.c).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "cohere_transcribe.h"
#include "output.h"
#include "text.h"

void ct_free(void *p) { tg_free(p); }

/* ------------------------------------------------------------- a buffer */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool failed;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = tg_realloc(b->p, cap);
        if (!q) {
            b->failed = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof tmp) {
        b->failed = true;
        return;
    }
    sb_add(b, tmp, (size_t)k);
}

/* ------------------------------------------------------------- escaping */

char *ct_escape_line(const char *s, bool as_text) {
    if (!s) s = "";
    sbuf b = {0};
    sb_add(&b, "", 0);
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = ct_utf8_next(s + i, n - i, &cp);
        if (as_text && (cp == '\t' || cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f')) {
            sb_add(&b, " ", 1);
        } else if (cp == 0xFFFFFFFFu || cp < 0x20 || cp == 0x7F) {
            sb_printf(&b, "\\x%02x", (unsigned char)s[i]);
        } else if (cp >= 0x80 && cp <= 0x9F) {
            sb_printf(&b, "\\u%04x", (unsigned)cp);
        } else {
            sb_add(&b, s + i, l);
        }
        i += l;
    }
    if (b.failed) {
        tg_free(b.p);
        return NULL;
    }
    return b.p;
}

/* ------------------------------------------------------------- formats */

ct_status ct_format_parse(const char *name, ct_format *out_format) {
    for (int f = 0; f < CT_FORMAT_COUNT; f++)
        if (name && !strcmp(name, ct_format_ext((ct_format)f))) {
            *out_format = (ct_format)f;
            return NULL;
        }
    return tg_status_new(TG_ERR_INVALID_ARG, "unknown format '%s' (use txt, srt, vtt or json)",
                         name ? name : "(null)");
}

const char *ct_format_ext(ct_format f) {
    static const char *ext[CT_FORMAT_COUNT] = {"txt", "srt", "vtt", "json"};
    return (int)f >= 0 && f < CT_FORMAT_COUNT ? ext[f] : "?";
}

static long long to_ms(double t) { return t > 0 ? llround(t * 1000.0) : 0; }

static void sb_time(sbuf *b, double t, bool vtt) {
    long long ms = to_ms(t), h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60;
    if (!vtt)
        sb_printf(b, "%02lld:%02lld:%02lld,%03lld", h, m, s, ms % 1000);
    else if (h)
        sb_printf(b, "%02lld:%02lld:%02lld.%03lld", h, m, s, ms % 1000);
    else
        sb_printf(b, "%02lld:%02lld.%03lld", m, s, ms % 1000);
}

static bool blank(const char *t) {
    for (size_t n = t ? strlen(t) : 0, i = 0; i < n;) {
        size_t k = ct_text_space_at(t + i, n - i);
        if (!k) return false;
        i += k;
    }
    return true;
}

static tg_status render_txt(const ct_transcript *t, sbuf *b) {
    for (int i = 0; i < t->n_segments; i++) {
        if (blank(t->segments[i].text)) continue;
        char *line = ct_escape_line(t->segments[i].text, true);
        if (!line) return tg_status_new(TG_ERR_NO_MEMORY, "out of memory");
        char *kept = ct_text_strip(line);
        sb_str(b, kept);
        sb_str(b, "\n");
        tg_free(line);
    }
    return NULL;
}

static tg_status render_subtitles(const ct_transcript *t, const ct_cue_opts *co, bool vtt,
                                  sbuf *b) {
    ct_cue *cues = NULL;
    int n = 0;
    tg_status st = ct_cues_make(t->segments, t->n_segments, t->duration_s, co, &cues, &n);
    if (st) return st;
    if (vtt) sb_str(b, "WEBVTT\n\n");
    for (int i = 0; i < n; i++) {
        char *line = ct_escape_line(cues[i].text, true);
        if (!line) {
            st = tg_status_new(TG_ERR_NO_MEMORY, "out of memory");
            break;
        }
        if (!vtt) sb_printf(b, "%d\n", i + 1);
        sb_time(b, cues[i].start_s, vtt);
        sb_str(b, " --> ");
        sb_time(b, cues[i].end_s, vtt);
        sb_str(b, "\n");
        for (const char *p = ct_text_strip(line); *p; p++) {
            if (vtt && *p == '&') sb_str(b, "&amp;");
            else if (vtt && *p == '<') sb_str(b, "&lt;");
            else if (vtt && *p == '>') sb_str(b, "&gt;");
            else sb_add(b, p, 1);
        }
        sb_str(b, "\n\n");
        tg_free(line);
    }
    ct_cues_free(cues, n);
    return st;
}

static double ms3(double t) { return round(t * 1000.0) / 1000.0; }
static double ms1(double t) { return round(t * 10.0) / 10.0; }

static tg_status render_json(const ct_transcript *t, sbuf *b) {
    cJSON *root = cJSON_CreateObject(), *options = NULL;
    tg_status st = NULL;
    if (!root) return tg_status_new(TG_ERR_NO_MEMORY, "out of memory");
    if (t->options_json) {
        options = cJSON_Parse(t->options_json);
        if (!options || !cJSON_IsObject(options)) {
            cJSON_Delete(options);
            cJSON_Delete(root);
            return tg_status_new(TG_ERR_INVALID_ARG, "options_json is not a JSON object");
        }
    } else {
        options = cJSON_CreateObject();
    }
    cJSON_AddItemToObject(root, "options", options);
    cJSON_AddNumberToObject(root, "schema_version", CT_TRANSCRIPT_SCHEMA_VERSION);
    cJSON *src = cJSON_AddObjectToObject(root, "source");
    cJSON_AddStringToObject(src, "path", t->source ? t->source : "");
    cJSON_AddNumberToObject(src, "duration_s", ms3(t->duration_s));
    cJSON_AddStringToObject(root, "language", t->language ? t->language : "");
    sbuf text = {0};
    sb_add(&text, "", 0);
    cJSON *segs = cJSON_AddArrayToObject(root, "segments");
    for (int i = 0; i < t->n_segments; i++) {
        const ct_segment *sg = &t->segments[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(segs, o);
        cJSON_AddNumberToObject(o, "start", ms3(sg->start_s));
        cJSON_AddNumberToObject(o, "end", ms3(sg->end_s));
        cJSON_AddStringToObject(o, "text", sg->text ? sg->text : "");
        cJSON *toks = cJSON_AddArrayToObject(o, "tokens");
        for (int k = 0; k < sg->n_tokens; k++)
            cJSON_AddItemToArray(toks, cJSON_CreateNumber(sg->tokens[k]));
        if (!blank(sg->text)) {
            if (text.n) sb_str(&text, " ");
            sb_str(&text, sg->text);
        }
    }
    cJSON_AddStringToObject(root, "text", text.p ? text.p : "");
    tg_free(text.p);
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "path", t->model_path ? t->model_path : "");
    cJSON_AddStringToObject(model, "config_hash", t->model_config_hash ? t->model_config_hash : "");
    cJSON_AddStringToObject(model, "dtype", t->dtype ? t->dtype : "");
    cJSON_AddStringToObject(model, "backend", t->backend ? t->backend : "");
    cJSON *tm = cJSON_AddObjectToObject(root, "timings_ms");
    cJSON_AddNumberToObject(tm, "load", ms1(t->load_ms));
    cJSON_AddNumberToObject(tm, "segment", ms1(t->segment_ms));
    cJSON_AddNumberToObject(tm, "frontend", ms1(t->frontend_ms));
    cJSON_AddNumberToObject(tm, "encoder", ms1(t->encoder_ms));
    cJSON_AddNumberToObject(tm, "decoder", ms1(t->decoder_ms));
    cJSON_AddNumberToObject(tm, "wall", ms1(t->wall_ms));
    cJSON_AddNumberToObject(root, "rtfx",
                            t->wall_ms > 0 ? round(t->duration_s * 1e3 / t->wall_ms * 100) / 100 : 0);
    char *s = cJSON_Print(root);
    if (!s) st = tg_status_new(TG_ERR_NO_MEMORY, "out of memory");
    else {
        sb_str(b, s);
        sb_str(b, "\n");
        cJSON_free(s);
    }
    cJSON_Delete(root);
    return st;
}

ct_status ct_render(ct_format f, const ct_transcript *t, const ct_cue_opts *co,
                    char **out_text, size_t *out_len) {
    if (!t || !out_text || (t->n_segments > 0 && !t->segments))
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_render: bad arguments");
    *out_text = NULL;
    if (out_len) *out_len = 0;
    ct_cue_opts defaults;
    ct_cue_opts_init(&defaults);
    sbuf b = {0};
    sb_add(&b, "", 0);
    tg_status st = NULL;
    switch (f) {
    case CT_FORMAT_TXT: st = render_txt(t, &b); break;
    case CT_FORMAT_SRT: st = render_subtitles(t, co ? co : &defaults, false, &b); break;
    case CT_FORMAT_VTT: st = render_subtitles(t, co ? co : &defaults, true, &b); break;
    case CT_FORMAT_JSON: st = render_json(t, &b); break;
    default: st = tg_status_new(TG_ERR_INVALID_ARG, "ct_render: unknown format %d", (int)f);
    }
    if (!st && b.failed) st = tg_status_new(TG_ERR_NO_MEMORY, "out of memory");
    if (st) {
        tg_free(b.p);
        return tg_status_wrap(st, "rendering %s", ct_format_ext(f));
    }
    *out_text = b.p;
    if (out_len) *out_len = b.n;
    return NULL;
}
