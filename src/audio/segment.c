/*
 * segment.c: 16 kHz audio into the spans to transcribe (ct_segment_audio):
 * voice segments found by energy, auditok-style, or the spec's chunks.
 *
 * Energy (CT_VAD_ENERGY) follows auditok's split(): the signal is cut into
 * analysis windows (10 ms, 160 samples; a last partial window counts); a
 * window's energy is auditok's calculate_energy, 20·log10(RMS) of the
 * samples on the int16 scale (x·32768, as auditok scales float audio), the
 * RMS clipped below at 1e-10, and a window is active when its energy is >=
 * the threshold (50 dB: an int16 RMS of 316, -40 dBFS). A segment is a run
 * of active windows that tolerates inactive runs of at most max_silence
 * (their windows belong to it, trailing ones included, as auditok keeps
 * trailing silence by default); it is cut when it reaches max_dur, and a
 * new one starts at the next active window. A segment whose windows up to
 * its last active one are shorter than min_dur is dropped, except one that
 * directly follows a cut at max_dur (auditok's non-strict min_dur). One
 * deliberate difference: auditok counts the trailing silence it keeps
 * toward min_dur, so a 0.2 s click followed by silence becomes a 0.8 s
 * segment; here the click is dropped. Durations become window counts as auditok does:
 * min_dur rounded up, max_dur and max_silence rounded down. Silence gives
 * no segment at all, so nothing is transcribed from it.
 *
 * None (CT_VAD_NONE) returns the spec 5.4 chunks (chunk.c) as spans: the
 * whole audio up to 30 s, else pieces of at most 35 s cut at quiet points.
 *
 * Not here: model-based VAD, threshold estimation, padding of segments.
 */
#include <math.h>
#include <string.h>

#include "audio.h"
#include "base.h"

#define RATE 16000

void ct_vad_options_init(ct_vad_options *o) {
    memset(o, 0, sizeof *o);
    o->kind = CT_VAD_ENERGY;
    o->min_dur_s = 0.5;
    o->max_dur_s = 30.0;
    o->max_silence_s = 0.6;
    o->energy_threshold_db = 50.0;
    o->analysis_window_s = 0.01;
}

tg_status ct_vad_parse(const char *name, ct_vad_kind *out) {
    if (name && !strcmp(name, "energy")) {
        *out = CT_VAD_ENERGY;
        return NULL;
    }
    if (name && !strcmp(name, "none")) {
        *out = CT_VAD_NONE;
        return NULL;
    }
    return tg_status_new(TG_ERR_INVALID_ARG, "unknown VAD '%s' (energy or none)",
                         name ? name : "(null)");
}

void ct_spans_free(ct_span *s) { tg_free(s); }

/* auditok's energy of one window, in dB. */
static double window_db(const float *x, size_t n) {
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = (double)x[i] * 32768.0;
        ss += v * v;
    }
    double rms = sqrt(ss / (double)n);
    if (!(rms >= 1e-10)) rms = 1e-10;
    return 20.0 * log10(rms);
}

typedef struct span_list {
    ct_span *v;
    int n, cap;
} span_list;

static bool push_span(span_list *l, size_t first, size_t last) {
    if (!tg_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v)) return false;
    l->v[l->n++] = (ct_span){first, last, (double)first / RATE, (double)last / RATE};
    return true;
}

static tg_status energy_spans(const float *x, size_t n, const ct_vad_options *o, span_list *l) {
    double aw = o->analysis_window_s > 0 ? o->analysis_window_s : 0.01;
    size_t win = (size_t)llround(aw * RATE);
    if (win < 1) win = 1;
    /* auditok's _duration_to_nb_windows: ceil for min, floor for max and
     * silence, with a small epsilon against 0.3 / 0.1 = 2.999... */
    long min_len = o->min_dur_s > 0 ? (long)ceil(o->min_dur_s / aw - 1e-9) : 0;
    long max_len = (long)floor(o->max_dur_s / aw + 1e-9);
    long max_sil = (long)floor(o->max_silence_s / aw + 1e-9);
    if (!(o->min_dur_s >= 0) || !(o->max_silence_s >= 0) || max_len < 1 || min_len > max_len ||
        max_sil >= max_len || !isfinite(o->energy_threshold_db))
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "energy VAD: bad parameters (min_dur %g s, max_dur %g s, "
                             "max_silence %g s, threshold %g dB, window %g s): need min_dur <= "
                             "max_dur and max_silence < max_dur, at least one window",
                             o->min_dur_s, o->max_dur_s, o->max_silence_s,
                             o->energy_threshold_db, aw);
    size_t n_win = (n + win - 1) / win;
    bool in = false, after_cut = false;
    size_t start = 0;  /* first window of the current segment */
    long len = 0;      /* its windows, tolerated silence included */
    long sil = 0;      /* inactive windows at its end */
    for (size_t w = 0; w <= n_win; w++) {
        bool end_of_audio = w == n_win;
        bool active = false;
        if (!end_of_audio) {
            size_t a = w * win, b = a + win < n ? a + win : n;
            active = window_db(x + a, b - a) >= o->energy_threshold_db;
        }
        bool deliver = false, cut = false;
        if (!in) {
            if (end_of_audio || !active) {
                after_cut = false;
                continue;
            }
            in = true;
            start = w;
            len = 1;
            sil = 0;
        } else if (end_of_audio) {
            deliver = true;
        } else if (active) {
            len++;
            sil = 0;
        } else if (sil + 1 > max_sil) {
            deliver = true;   /* this window ends it and is not part of it */
        } else {
            len++;
            sil++;
        }
        if (!deliver && len >= max_len) deliver = cut = true;
        if (!deliver) continue;
        if (len - sil >= min_len || after_cut) {
            size_t first = start * win, last = (start + (size_t)len) * win;
            if (last > n) last = n;
            if (!push_span(l, first, last))
                return tg_status_new(TG_ERR_NO_MEMORY, "energy VAD: out of memory");
        }
        in = false;
        after_cut = cut;
    }
    return NULL;
}

tg_status ct_segment_audio(const float *x, size_t n, const ct_vad_options *o, ct_span **out_spans,
                           int *out_n) {
    if (!out_spans || !out_n)
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_segment_audio: NULL argument");
    *out_spans = NULL;
    *out_n = 0;
    if (!o || (n && !x))
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_segment_audio: NULL argument");
    span_list l = {0};
    tg_status st = NULL;
    if (o->kind == CT_VAD_ENERGY) {
        st = energy_spans(x, n, o, &l);
    } else if (o->kind == CT_VAD_NONE) {
        if (n) {
            size_t(*b)[2] = NULL;
            int nb = 0;
            st = ct_split_chunks(x, n, RATE, 35, 5, &b, &nb);
            for (int i = 0; !st && i < nb; i++)
                if (!push_span(&l, b[i][0], b[i][1]))
                    st = tg_status_new(TG_ERR_NO_MEMORY, "segmenting: out of memory");
            tg_free(b);
        }
    } else {
        st = tg_status_new(TG_ERR_INVALID_ARG, "ct_segment_audio: unknown VAD kind %d",
                           (int)o->kind);
    }
    if (st) {
        tg_free(l.v);
        return st;
    }
    if (!l.v) {
        /* zero spans still come back as an array the caller frees */
        l.v = tg_malloc(sizeof *l.v);
        if (!l.v) return tg_status_new(TG_ERR_NO_MEMORY, "segmenting: out of memory");
    }
    *out_spans = l.v;
    *out_n = l.n;
    return NULL;
}
