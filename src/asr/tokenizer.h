/*
 * tokenizer.h: SentencePiece (tokenizer.model protobuf) and tokenizer.json
 * vocabularies, for decoding ids to text and looking up special tokens by name
 * (internal). Decoding follows the HF decoder graph of spec 5.1: "▁" becomes a
 * space, <0xNN> byte pieces are fused into UTF-8 (invalid sequences become
 * U+FFFD), control tokens decode to nothing, and a piece's leading "▁" is
 * dropped while no text has been output yet, as sentencepiece decodes (there
 * is no option: HF's decoder instead keeps one leading space after the
 * prompt's "▁", spec 5.2; the session trims transcripts anyway).
 */
#ifndef CT_TOKENIZER_H
#define CT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "tg_status.h"

typedef struct ct_tokenizer ct_tokenizer;

/* Loads DIR/tokenizer.model, else DIR/tokenizer.json. Free with
 * ct_tokenizer_free. */
tg_status ct_tokenizer_load_dir(const char *dir, ct_tokenizer **out_tok);
tg_status ct_tokenizer_load_model(const uint8_t *data, size_t size, const char *what,
                                  ct_tokenizer **out_tok);
tg_status ct_tokenizer_load_json(const char *text, size_t size, const char *what,
                                 ct_tokenizer **out_tok);
void ct_tokenizer_free(ct_tokenizer *tok);

int ct_tokenizer_size(const ct_tokenizer *tok);
/* The id of a piece by its exact text ("<|en|>", "▁"); -1 when absent. */
int ct_tokenizer_id(const ct_tokenizer *tok, const char *piece);
/* The piece text of id (borrowed); NULL when out of range. */
const char *ct_tokenizer_piece(const ct_tokenizer *tok, int id);
/* True for control/special pieces (decoded to nothing). */
int ct_tokenizer_is_control(const ct_tokenizer *tok, int id);
/* Decodes ids to UTF-8 text; a new string, free with tg_free. */
tg_status ct_tokenizer_decode(const ct_tokenizer *tok, const int32_t *ids, int n,
                              char **out_text);

/* NULL when lang is one of the 14 supported codes (spec 5.2, lower case);
 * otherwise TG_ERR_INVALID_ARG naming it and listing the codes. */
tg_status ct_language_check(const char *lang);

/* The 10-token prompt of spec 5.2 for a language code (one of the 14) and the
 * punctuation flag, looked up by name. out_ids must hold 10. */
tg_status ct_tokenizer_prompt(const ct_tokenizer *tok, const char *lang, int punctuation,
                              int32_t *out_ids, int *out_n);

#endif
