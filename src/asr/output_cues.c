/*
 * output_cues.c: segments to subtitle cues (ct_cues_make in
 * cohere_transcribe.h), and the sentence-end test of output.h.
 *
 * The model gives no word times, so each word is placed by interpolating
 * its segment's [start, end] over the segment's characters (code points):
 * a word that starts at character c0 and ends at c1 of N spans
 * start + dur*c0/N .. start + dur*c1/N. That is an estimate; the docs say
 * so. Words are cut at whitespace, after CJK sentence punctuation (text
 * without spaces) and every max_chars characters, so no cue outgrows the
 * limits even for a language written without spaces.
 *
 * Not here: line wrapping inside a cue (one line per cue), rendering.
 */
#include <math.h>
#include <string.h>

#include "base.h"
#include "cohere_transcribe.h"
#include "output.h"
#include "text.h"

bool ct_is_sentence_end(uint32_t cp) {
    return cp == '.' || cp == '!' || cp == '?' || cp == 0x2026 || cp == 0x3002 ||
           cp == 0xFF01 || cp == 0xFF1F || cp == 0xFF0E || cp == 0x061F || cp == 0x06D4;
}

void ct_cue_opts_init(ct_cue_opts *o) {
    o->max_chars = 80;
    o->max_dur_s = 6.0;
    o->max_gap_s = 0.6;
    o->min_dur_s = 0.3;
}

void ct_cues_free(ct_cue *cues, int n) {
    for (int i = 0; cues && i < n; i++) tg_free(cues[i].text);
    tg_free(cues);
}

typedef struct word {
    const char *p;     /* into the segment's cleaned copy */
    size_t len;        /* bytes */
    int chars;
    double t0, t1;
    bool space_before; /* separated from the previous word by whitespace */
    bool sentence_end;
} word;

typedef struct builder {
    word *w;
    int n, cap;
    char **copies;     /* the cleaned segment texts the words point into */
    int n_copies;
} builder;

static bool is_cjk_stop(uint32_t cp) { return cp == 0x3002 || cp == 0xFF01 || cp == 0xFF1F; }

/* A closing quote or bracket may follow the sentence's end mark. */
static bool is_closer(uint32_t cp) {
    return cp == '"' || cp == '\'' || cp == ')' || cp == ']' || cp == 0x201D || cp == 0x2019 ||
           cp == 0x300D || cp == 0x300F || cp == 0xFF09;
}

static bool ends_sentence(const char *p, size_t len) {
    uint32_t last = 0, before = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += ct_utf8_next(p + i, len - i, &cp);
        before = last;
        last = cp;
    }
    return ct_is_sentence_end(last) || (is_closer(last) && ct_is_sentence_end(before));
}

static bool push_word(builder *b, const word *w) {
    if (!tg_grow((void **)&b->w, &b->cap, b->n + 1, sizeof(word))) return false;
    b->w[b->n++] = *w;
    return true;
}

/* Cuts one segment into words with interpolated times. */
static bool add_segment(builder *b, const ct_segment *sg, int max_chars) {
    if (!sg->text) return true;
    size_t n = strlen(sg->text);
    char *c = tg_malloc(n + 1);
    if (!c) return false;
    b->copies[b->n_copies++] = c;
    for (size_t i = 0; i <= n; i++) {
        unsigned char ch = (unsigned char)sg->text[i];
        c[i] = (char)((ch && (ch < 0x20 || ch == 0x7F)) ? ' ' : ch);
    }
    size_t total = ct_utf8_count(c, n);
    if (!total) return true;
    double dur = sg->end_s > sg->start_s ? sg->end_s - sg->start_s : 0;
    size_t i = 0, chars = 0;
    bool space = true;
    while (i < n) {
        size_t k = ct_text_space_at(c + i, n - i);
        if (k) {
            i += k;
            chars++;
            space = true;
            continue;
        }
        word w = {.p = c + i, .space_before = space};
        size_t c0 = chars;
        while (i < n && !ct_text_space_at(c + i, n - i) && w.chars < max_chars) {
            uint32_t cp;
            size_t l = ct_utf8_next(c + i, n - i, &cp);
            i += l;
            w.len += l;
            w.chars++;
            chars++;
            if (is_cjk_stop(cp)) break;
        }
        w.t0 = sg->start_s + dur * (double)c0 / (double)total;
        w.t1 = sg->start_s + dur * (double)chars / (double)total;
        w.sentence_end = ends_sentence(w.p, w.len);
        if (!push_word(b, &w)) return false;
        space = false;
    }
    return true;
}

static char *join_words(const word *w, int n) {
    size_t len = 0;
    for (int i = 0; i < n; i++) len += w[i].len + 1;
    char *t = tg_malloc(len + 1), *q = t;
    if (!t) return NULL;
    for (int i = 0; i < n; i++) {
        if (i && w[i].space_before) *q++ = ' ';
        memcpy(q, w[i].p, w[i].len);
        q += w[i].len;
    }
    *q = 0;
    return t;
}

static char *concat(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *t = tg_malloc(la + lb + 2);
    if (!t) return NULL;
    memcpy(t, a, la);
    t[la] = ' ';
    memcpy(t + la + 1, b, lb + 1);
    return t;
}

ct_status ct_cues_make(const ct_segment *segs, int n, double media_end_s,
                       const ct_cue_opts *o, ct_cue **out_cues, int *out_n) {
    if ((!segs && n > 0) || n < 0 || !o || !out_cues || !out_n || o->max_chars < 1 ||
        !(o->max_dur_s > 0) || !(o->max_gap_s >= 0) || !(o->min_dur_s >= 0))
        return tg_status_new(TG_ERR_INVALID_ARG, "ct_cues_make: bad arguments");
    *out_cues = NULL;
    *out_n = 0;
    builder b = {0};
    ct_cue *cues = NULL;
    int n_cues = 0, cap = 0;
    tg_status st = NULL;
    b.copies = tg_calloc((size_t)(n > 0 ? n : 1), sizeof(char *));
    if (!b.copies) goto oom;
    for (int i = 0; i < n; i++)
        if (!add_segment(&b, &segs[i], o->max_chars)) goto oom;

    for (int i = 0; i < b.n;) {
        /* one cue: words [i, j) */
        int j = i + 1, chars = b.w[i].chars;
        while (j < b.n) {
            const word *w = &b.w[j], *prev = &b.w[j - 1];
            int add = w->chars + (w->space_before ? 1 : 0);
            if (prev->sentence_end || w->t0 - prev->t1 > o->max_gap_s ||
                chars + add > o->max_chars || w->t1 - b.w[i].t0 > o->max_dur_s)
                break;
            chars += add;
            j++;
        }
        if (!tg_grow((void **)&cues, &cap, n_cues + 1, sizeof(ct_cue))) goto oom;
        ct_cue *c = &cues[n_cues];
        c->start_s = b.w[i].t0;
        c->end_s = b.w[j - 1].t1;
        if (!(c->text = join_words(&b.w[i], j - i))) goto oom;
        n_cues++;
        i = j;
    }

    /* At least min_dur_s each, never past the end of the media: a short cue
     * is lengthened and the cues after it move later as far as needed (for
     * ordinary speech they do not move at all); a cue with no room left
     * before the end of the media joins the one before it. */
    double end = media_end_s > 0 ? media_end_s : INFINITY;
    for (int i = 0; i < n_cues; i++) {
        ct_cue *c = &cues[i];
        if (i > 0 && c->start_s < cues[i - 1].end_s) c->start_s = cues[i - 1].end_s;
        if (c->end_s < c->start_s + o->min_dur_s) c->end_s = c->start_s + o->min_dur_s;
        if (c->end_s > end) c->end_s = end;
        if (c->start_s > c->end_s) c->start_s = c->end_s;
        if (c->end_s - c->start_s >= o->min_dur_s || i == 0) continue;
        ct_cue *p = &cues[i - 1];
        char *t = concat(p->text, c->text);
        if (!t) goto oom;
        tg_free(p->text);
        tg_free(c->text);
        p->text = t;
        p->end_s = c->end_s;
        memmove(c, c + 1, (size_t)(n_cues - i - 1) * sizeof *c);
        n_cues--;
        i--;
    }
    *out_cues = cues;
    *out_n = n_cues;
    cues = NULL;
    n_cues = 0;
    goto done;
oom:
    st = tg_status_new(TG_ERR_NO_MEMORY, "making subtitle cues: out of memory");
done:
    ct_cues_free(cues, n_cues);
    for (int i = 0; i < b.n_copies; i++) tg_free(b.copies[i]);
    tg_free(b.copies);
    tg_free(b.w);
    return st;
}
