/*
 * output.h: what the output writers share (internal): UTF-8 stepping and
 * the sentence-end test. The writers themselves are public
 * (cohere_transcribe.h, "outputs"): output_cues.c splits segments into
 * subtitle cues, output_render.c renders txt/srt/vtt/json and escapes
 * lines, output_set.c writes one source's files as a set.
 */
#ifndef CT_OUTPUT_H
#define CT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True for code points that end a sentence: . ! ? and U+2026 U+3002 U+FF01
 * U+FF1F U+FF0E U+061F (Arabic question mark) U+06D4. */
bool ct_is_sentence_end(uint32_t cp);

#endif
