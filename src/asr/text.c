/*
 * text.c: strict UTF-8 decoding (ct_utf8_next, shared by the tokenizer's
 * byte fallback and the outputs), Python's str.strip() for UTF-8 text and
 * the chunk rejoin of spec 5.4 (see text.h).
 *
 * The set is exactly the code points for which CPython's str.isspace() is
 * true (Unicode White_Space plus the bidirectional classes WS, B and S):
 * U+0009..U+000D, U+001C..U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A,
 * U+2028, U+2029, U+202F, U+205F, U+3000. Invalid UTF-8 is never
 * whitespace. Not here: other Unicode properties.
 */
#include "text.h"

#include <stdint.h>
#include <string.h>

#include "base.h"

static int is_space_cp(unsigned cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
           cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t ct_text_space_at(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) return 0;
    if (u[0] < 0x80) return is_space_cp(u[0]) ? 1 : 0;
    /* every non-ASCII space is 2 (U+0085, U+00A0) or 3 bytes long */
    if ((u[0] & 0xE0) == 0xC0 && n >= 2 && (u[1] & 0xC0) == 0x80) {
        unsigned cp = (unsigned)(u[0] & 0x1F) << 6 | (u[1] & 0x3F);
        return cp >= 0x80 && is_space_cp(cp) ? 2 : 0;
    }
    if ((u[0] & 0xF0) == 0xE0 && n >= 3 && (u[1] & 0xC0) == 0x80 && (u[2] & 0xC0) == 0x80) {
        unsigned cp = (unsigned)(u[0] & 0x0F) << 12 | (unsigned)(u[1] & 0x3F) << 6 | (u[2] & 0x3F);
        return cp >= 0x800 && is_space_cp(cp) ? 3 : 0;
    }
    return 0;
}

char *ct_text_strip(char *t) {
    size_t n = strlen(t), k;
    while ((k = ct_text_space_at(t, n)) > 0) {
        t += k;
        n -= k;
    }
    /* from the end: a space is 1 to 3 bytes; try each length that would
     * start on a character boundary */
    for (;;) {
        size_t cut = 0;
        for (size_t len = 1; len <= 3 && len <= n && !cut; len++)
            if (ct_text_space_at(t + n - len, len) == len) cut = len;
        if (!cut) break;
        n -= cut;
    }
    t[n] = 0;
    return t;
}

tg_status ct_text_join(char *const *texts, int n, const char *sep, char **out_text) {
    *out_text = NULL;
    size_t total = 1, n_sep = strlen(sep);
    for (int i = 0; i < n; i++) total += strlen(texts[i]) + n_sep;
    char *out = tg_malloc(total);
    if (!out) return tg_status_new(TG_ERR_NO_MEMORY, "joining chunk texts: out of memory");
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        char *t = ct_text_strip(texts[i]);
        if (!*t) continue;
        if (k) {
            memcpy(out + k, sep, n_sep);
            k += n_sep;
        }
        size_t len = strlen(t);
        memcpy(out + k, t, len);
        k += len;
    }
    out[k] = 0;
    *out_text = out;
    return NULL;
}

size_t ct_utf8_next(const char *str, size_t n, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 1) {
        *cp = c;
        return 1;
    }
    if (len == 0 || len > n) goto bad;
    uint32_t v = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) goto bad;
        v = v << 6 | (s[i] & 0x3F);
    }
    /* overlong forms, surrogates and values past U+10FFFF are invalid */
    static const uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_for_len[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto bad;
    *cp = v;
    return len;
bad:
    *cp = 0xFFFFFFFFu;
    return 1;
}

size_t ct_utf8_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        uint32_t cp;
        i += ct_utf8_next(s + i, n - i, &cp);
    }
    return k;
}
