/*
 * fuzz_tokenizer.c: libFuzzer target for the tokenizer loaders and decode.
 * Input starting with '{' goes to ct_tokenizer_load_json, anything else to
 * ct_tokenizer_load_model (the protobuf reader). A loaded vocabulary must map
 * each piece back to its id, decode every id alone and a sequence of ids taken
 * from the input bytes, and either build the prompt or refuse; anything else
 * aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_log_set_level(TG_LOG_NONE);
    ct_tokenizer *tok = NULL;
    tg_status st = size > 0 && data[0] == '{'
                       ? ct_tokenizer_load_json((const char *)data, size, "fuzz.json", &tok)
                       : ct_tokenizer_load_model(data, size, "fuzz.model", &tok);
    if (st) {
        if (tok) abort();
        tg_status_free(st);
        return 0;
    }
    int n = ct_tokenizer_size(tok);
    if (n <= 0) abort();
    int32_t ids[64];
    int k = 0;
    for (int i = 0; i < n && i < 256; i++) {
        const char *p = ct_tokenizer_piece(tok, i);
        if (!p || ct_tokenizer_id(tok, p) != i) abort();
        char *text = NULL;
        int32_t id = i;
        st = ct_tokenizer_decode(tok, &id, 1, &text);
        if (st) abort(); /* no allocation failures are injected here */
        tg_free(text);
    }
    for (size_t i = 0; i < size && k < 64; i += 3) ids[k++] = (int32_t)(data[i] % (unsigned)n);
    char *text = NULL;
    st = ct_tokenizer_decode(tok, ids, k, &text);
    if (st) abort();
    tg_free(text);
    int32_t prompt[10];
    int pn = 0;
    st = ct_tokenizer_prompt(tok, "en", 1, prompt, &pn);
    if (!st && pn != 10) abort();
    tg_status_free(st);
    ct_tokenizer_free(tok);
    return 0;
}
