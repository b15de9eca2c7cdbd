/*
 * text.h: UTF-8 decoding, and whitespace trimming of decoded text as
 * Python's str.strip() does it (internal).
 *
 * spec 5.4 rejoins chunk texts with str.strip()/rstrip(), which strip every
 * character for which str.isspace() is true, not only ASCII blanks: NBSP,
 * the ideographic space U+3000 (common in ja/zh text), U+2000..U+200A and
 * the others listed in text.c. A chunk holding only such characters counts
 * as empty there. Not here: any other normalisation of the text.
 */
#ifndef CT_TEXT_H
#define CT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "tg_status.h"

/* Decodes the UTF-8 sequence at s (n bytes left, n >= 1) into *cp and
 * returns its length; an invalid or truncated sequence (an overlong form, a
 * surrogate, a value past U+10FFFF) gives length 1 and *cp = 0xFFFFFFFF. */
size_t ct_utf8_next(const char *s, size_t n, uint32_t *cp);
/* Code points of s[0..n). */
size_t ct_utf8_count(const char *s, size_t n);

/* Byte length of the whitespace character (str.isspace()) that starts s,
 * s holding n bytes; 0 when s does not start with one. */
size_t ct_text_space_at(const char *s, size_t n);
/* Trims str.isspace() characters from both ends of the NUL-terminated UTF-8
 * string t, in place (the end is cut with a NUL). Returns the first kept
 * byte, inside t. */
char *ct_text_strip(char *t);

/* spec 5.4's rejoin of chunk texts (CohereAsrProcessor._reassemble_chunk_
 * texts): texts that strip to nothing are dropped, the rest are stripped
 * and joined with sep (" ", or "" for ja and zh). HF only rstrips the first
 * chunk, keeping the leading space its decoder leaves; our decode leaves
 * none there, and the result is trimmed either way, so every chunk is
 * stripped on both sides. texts[i] are trimmed in place. Returns a new
 * string in *out_text (free with tg_free). */
tg_status ct_text_join(char *const *texts, int n, const char *sep, char **out_text);

#endif
