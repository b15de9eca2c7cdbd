/*
 * test_tokenizer.c: the fixture tokenizer.model decodes every case of
 * tests/data/tiny/tokenizer/decode.json (made by the sentencepiece library) to
 * the same text; the prompt is the spec 5.2 list; byte fallback, invalid
 * UTF-8 and leading "▁" behave as sentencepiece does; tokenizer.json loads to
 * the same vocabulary; and truncated or garbage protobuf and JSON are refused
 * with errors, never crashes.
 */
#include <cjson/cJSON.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "tokenizer.h"

#define TINY TEST_DATA_DIR "/tiny"
#define SP "\xE2\x96\x81" /* U+2581 */
#define FFFD "\xEF\xBF\xBD"

static ct_tokenizer *load_tiny(void) {
    ct_tokenizer *tok = NULL;
    CHECK_OK(ct_tokenizer_load_dir(TINY "/hub", &tok));
    return tok;
}

static cJSON *load_cases(void) {
    char *text = NULL;
    size_t n = 0;
    cJSON *j = NULL;
    CHECK_OK(tg_file_read(TINY "/tokenizer/decode.json", &text, &n));
    if (text) CHECK_OK(tg_json_parse(text, n, "decode.json", &j));
    tg_free(text);
    return j;
}

/* Decodes the ids of a JSON array; returns a new string or NULL. */
static char *decode_array(const ct_tokenizer *tok, const cJSON *arr) {
    int n = cJSON_GetArraySize(arr);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
    int k = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) ids[k++] = (int32_t)v->valueint;
    char *out = NULL;
    CHECK_OK(ct_tokenizer_decode(tok, ids, n, &out));
    free(ids);
    return out;
}

/* Runs every decode.json case through tok; returns the number checked. */
static int check_all_cases(const ct_tokenizer *tok, const cJSON *j) {
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(j, "cases");
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "ids");
        const cJSON *pieces = cJSON_GetObjectItemCaseSensitive(c, "pieces");
        const char *want = cJSON_GetObjectItemCaseSensitive(c, "decoded")->valuestring;
        char *got = decode_array(tok, ids);
        CHECK_MSG(got && strcmp(got, want) == 0, "case %d:\n got  '%s'\n want '%s'", n,
                  got ? got : "(null)", want);
        tg_free(got);
        /* Pieces and ids agree both ways. */
        for (int i = 0; i < cJSON_GetArraySize(ids); i++) {
            int id = cJSON_GetArrayItem(ids, i)->valueint;
            const char *p = cJSON_GetArrayItem(pieces, i)->valuestring;
            const char *q = ct_tokenizer_piece(tok, id);
            CHECK_MSG(q && strcmp(q, p) == 0, "case %d: id %d is '%s', want '%s'", n, id,
                      q ? q : "(null)", p);
            CHECK(ct_tokenizer_id(tok, p) == id);
        }
        n++;
    }
    return n;
}

static void every_fixture_case_decodes_as_sentencepiece_does(void) {
    ct_tokenizer *tok = load_tiny();
    cJSON *j = load_cases();
    if (tok && j) {
        CHECK(ct_tokenizer_size(tok) == 16384);
        int n = check_all_cases(tok, j);
        CHECK_MSG(n == 44, "%d cases", n);
    }
    cJSON_Delete(j);
    ct_tokenizer_free(tok);
}

static void prompt_is_built_by_name(void) {
    ct_tokenizer *tok = load_tiny();
    if (!tok) return;
    int32_t ids[10];
    int n = 0;
    const int32_t want[10] = {13764, 7, 4, 16, 62, 62, 5, 9, 11, 13};
    CHECK_OK(ct_tokenizer_prompt(tok, "en", 1, ids, &n));
    CHECK(n == 10 && memcmp(ids, want, sizeof want) == 0);
    /* The fixture's own prompt list agrees. */
    cJSON *j = load_cases();
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(j, "prompt_en_pnc"), "ids");
    for (int i = 0; i < 10; i++) CHECK(cJSON_GetArrayItem(p, i)->valueint == want[i]);
    cJSON_Delete(j);

    CHECK_OK(ct_tokenizer_prompt(tok, "en", 0, ids, &n));
    CHECK(ids[6] == ct_tokenizer_id(tok, "<|nopnc|>") && ids[6] == 6);
    CHECK(ids[5] == 62 && ids[7] == 9);
    const char *langs[] = {"ar", "de", "el", "en", "es", "fr", "it",
                           "ja", "ko", "nl", "pl", "pt", "vi", "zh"};
    for (int i = 0; i < 14; i++) {
        char name[16];
        snprintf(name, sizeof name, "<|%s|>", langs[i]);
        CHECK_OK(ct_tokenizer_prompt(tok, langs[i], 1, ids, &n));
        CHECK_MSG(ids[4] == ct_tokenizer_id(tok, name) && ids[5] == ids[4] && ids[4] > 0, "%s",
                  langs[i]);
    }
    ct_tokenizer_free(tok);
}

static void unknown_language_is_an_error_listing_the_valid_ones(void) {
    ct_tokenizer *tok = load_tiny();
    if (!tok) return;
    int32_t ids[10] = {0};
    int n = -1;
    /* <|ru|> may even be in the vocabulary: only the model's 14 are valid. */
    tg_status st = ct_tokenizer_prompt(tok, "ru", 1, ids, &n);
    CHECK(st && tg_status_code(st) == TG_ERR_INVALID_ARG);
    if (st) {
        const char *m = tg_status_message(st);
        CHECK_MSG(strstr(m, "'ru'") && strstr(m, "ar de el en es fr it ja ko nl pl pt vi zh"),
                  "%s", m);
    }
    tg_status_free(st);
    CHECK(n == -1 && ids[0] == 0);
    CHECK_ERR(ct_tokenizer_prompt(tok, "EN", 1, ids, &n), TG_ERR_INVALID_ARG, "'EN'");
    CHECK_ERR(ct_tokenizer_prompt(tok, "", 1, ids, &n), TG_ERR_INVALID_ARG, "choose one of");
    CHECK_ERR(ct_tokenizer_prompt(tok, "en|><|fr", 1, ids, &n), TG_ERR_INVALID_ARG, "not");
    CHECK_ERR(ct_tokenizer_prompt(tok, NULL, 1, ids, &n), TG_ERR_INVALID_ARG, "language");
    ct_tokenizer_free(tok);
}

/* Decodes ids given by piece names. */
static char *decode_pieces(const ct_tokenizer *tok, const char *const *pieces, int n) {
    int32_t ids[32];
    for (int i = 0; i < n; i++) {
        ids[i] = ct_tokenizer_id(tok, pieces[i]);
        CHECK_MSG(ids[i] >= 0, "no piece '%s'", pieces[i]);
    }
    char *out = NULL;
    CHECK_OK(ct_tokenizer_decode(tok, ids, n, &out));
    return out;
}

#define EXPECT_DECODE(tok, want, ...)                                                 \
    do {                                                                              \
        static const char *const ps_[] = {__VA_ARGS__};                               \
        char *got_ = decode_pieces(tok, ps_, (int)(sizeof ps_ / sizeof ps_[0]));      \
        CHECK_MSG(got_ && strcmp(got_, want) == 0, "got '%s', want '%s'",              \
                  got_ ? got_ : "(null)", want);                                      \
        tg_free(got_);                                                                \
    } while (0)

static void bytes_spaces_and_control_pieces(void) {
    ct_tokenizer *tok = load_tiny();
    if (!tok) return;
    /* Byte pieces fuse into UTF-8 across a run. */
    EXPECT_DECODE(tok, "the \xC3\xA9t\xC3\xA9", SP "the", SP, "<0xC3>", "<0xA9>", "t", "<0xC3>",
                  "<0xA9>");
    /* Invalid sequences: each bad byte is one U+FFFD; valid ones around survive. */
    EXPECT_DECODE(tok, FFFD FFFD, "<0xF0>", "<0x9F>");
    EXPECT_DECODE(tok, "the" FFFD "A", SP "the", "<0x80>", "<0x41>");
    EXPECT_DECODE(tok, FFFD FFFD, "<0xC0>", "<0x80>");                  /* overlong */
    EXPECT_DECODE(tok, FFFD FFFD FFFD, "<0xED>", "<0xA0>", "<0x80>");  /* surrogate */
    EXPECT_DECODE(tok, FFFD FFFD FFFD FFFD, "<0xF4>", "<0x90>", "<0x80>", "<0x80>"); /* >U+10FFFF */
    /* A control piece between bytes ends the run. */
    EXPECT_DECODE(tok, FFFD FFFD, "<0xC3>", "<|endoftext|>", "<0xA9>");
    /* Leading "▁" pieces vanish until text appears; later ones are spaces. */
    EXPECT_DECODE(tok, "the", SP, "<|startofcontext|>", SP, SP "the");
    EXPECT_DECODE(tok, "the  the", SP "the", SP, SP "the");
    /* A byte space is text, so the next piece keeps its space. */
    EXPECT_DECODE(tok, "  the", "<0x20>", SP "the");
    /* Control and unknown pieces decode to nothing. */
    EXPECT_DECODE(tok, "", "<unk>", "<|endoftext|>", "<pad>");
    CHECK(ct_tokenizer_is_control(tok, 7) && ct_tokenizer_is_control(tok, 0));
    CHECK(!ct_tokenizer_is_control(tok, 13764) && !ct_tokenizer_is_control(tok, 100));
    CHECK(!ct_tokenizer_is_control(tok, -1) && !ct_tokenizer_is_control(tok, 16384));
    CHECK(ct_tokenizer_piece(tok, 16384) == NULL && ct_tokenizer_piece(tok, -1) == NULL);
    CHECK(ct_tokenizer_id(tok, "no such piece") == -1);

    char *out = NULL;
    CHECK_OK(ct_tokenizer_decode(tok, NULL, 0, &out));
    CHECK(out && out[0] == 0);
    tg_free(out);
    int32_t bad[] = {412, 16384};
    CHECK_ERR(ct_tokenizer_decode(tok, bad, 2, &out), TG_ERR_INVALID_ARG, "id 16384 at position 1");
    int32_t neg[] = {-3};
    CHECK_ERR(ct_tokenizer_decode(tok, neg, 1, &out), TG_ERR_INVALID_ARG, "id -3");
    ct_tokenizer_free(tok);
}

/* --------------------------------------------------------- bad protobuf */

static void expect_bad_model(const uint8_t *b, size_t n, const char *needle) {
    ct_tokenizer *tok = NULL;
    tg_status st = ct_tokenizer_load_model(b, n, "bad.model", &tok);
    CHECK_MSG(st != NULL, "accepted a bad model (%zu bytes)", n);
    CHECK(tok == NULL);
    if (st) {
        CHECK_MSG(tg_status_code(st) == TG_ERR_FORMAT, "%s", tg_status_message(st));
        CHECK_MSG(strstr(tg_status_message(st), "bad.model") &&
                      (!needle || strstr(tg_status_message(st), needle)),
                  "'%s' lacks '%s'", tg_status_message(st), needle ? needle : "bad.model");
    }
    tg_status_free(st);
    ct_tokenizer_free(tok);
}

/* A hand-written ModelProto: three pieces, a trainer_spec to skip, a
 * normalizer_spec, and an unknown fixed64 field. */
static const uint8_t small_model[] = {
    0x0a, 0x0e, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x15, 0, 0, 0, 0, 0x18, 0x02,
    0x0a, 0x07, 0x0a, 0x03, 0xE2, 0x96, 0x81, 0x18, 0x01,
    0x0a, 0x0a, 0x0a, 0x06, '<', '0', 'x', '4', '1', '>', 0x18, 0x06,
    0x12, 0x02, 0x18, 0x02,
    0x1a, 0x04, 0x18, 0x01, 0x20, 0x01,
    0x21, 1, 2, 3, 4, 5, 6, 7, 8,
};

static void hand_made_model_loads(void) {
    ct_tokenizer *tok = NULL;
    CHECK_OK(ct_tokenizer_load_model(small_model, sizeof small_model, "small.model", &tok));
    if (!tok) return;
    CHECK(ct_tokenizer_size(tok) == 3);
    CHECK(ct_tokenizer_id(tok, SP) == 1 && ct_tokenizer_id(tok, "<0x41>") == 2);
    CHECK(ct_tokenizer_is_control(tok, 0));
    int32_t ids[] = {1, 2, 1, 0, 2};
    char *out = NULL;
    CHECK_OK(ct_tokenizer_decode(tok, ids, 5, &out));
    CHECK_MSG(out && strcmp(out, "A A") == 0, "'%s'", out ? out : "");
    tg_free(out);
    int32_t p[10];
    int n;
    CHECK_ERR(ct_tokenizer_prompt(tok, "en", 1, p, &n), TG_ERR_NOT_FOUND, "<|startofcontext|>");
    ct_tokenizer_free(tok);
}

static void truncated_and_garbage_models_are_refused(void) {
    /* Every proper prefix of the hand-made model that cuts a field. */
    int refused = 0;
    for (size_t n = 1; n < sizeof small_model; n++) {
        ct_tokenizer *tok = NULL;
        tg_status st = ct_tokenizer_load_model(small_model, n, "bad.model", &tok);
        if (st) {
            refused++;
            CHECK(tok == NULL && tg_status_code(st) == TG_ERR_FORMAT);
        }
        tg_status_free(st);
        ct_tokenizer_free(tok);
    }
    CHECK_MSG(refused >= (int)sizeof small_model - 6, "only %d prefixes refused", refused);

    /* The real file cut in the middle of a piece. */
    char *raw = NULL;
    size_t n = 0;
    CHECK_OK(tg_file_read(TINY "/hub/tokenizer.model", &raw, &n));
    if (raw) {
        expect_bad_model((const uint8_t *)raw, 1000, "malformed");
        expect_bad_model((const uint8_t *)raw + 1, n - 1, NULL);
        tg_free(raw);
    }
    expect_bad_model(NULL, 0, "empty");
    const uint8_t text[] = "this is not a protobuf";
    expect_bad_model(text, sizeof text - 1, NULL);
    const uint8_t group[] = {0x0b, 0x0c};
    expect_bad_model(group, sizeof group, "malformed");
    const uint8_t varint11[] = {0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                0xff, 0xff, 0xff, 0xff, 0x01};
    expect_bad_model(varint11, sizeof varint11, "malformed");
    const uint8_t field0[] = {0x02, 0x00};
    expect_bad_model(field0, sizeof field0, "malformed");
    const uint8_t past_end[] = {0x0a, 0x7f, 0x0a, 0x01, 'a'};
    expect_bad_model(past_end, sizeof past_end, "malformed");
    const uint8_t bad_type[] = {0x0a, 0x05, 0x0a, 0x01, 'a', 0x18, 0x09};
    expect_bad_model(bad_type, sizeof bad_type, "unknown type 9");
    const uint8_t no_text[] = {0x0a, 0x02, 0x18, 0x01};
    expect_bad_model(no_text, sizeof no_text, "no text");
    const uint8_t empty_text[] = {0x0a, 0x02, 0x0a, 0x00};
    expect_bad_model(empty_text, sizeof empty_text, "empty");
    const uint8_t bad_byte[] = {0x0a, 0x0a, 0x0a, 0x06, '<', '0', 'x', 'Z', 'Z', '>', 0x18, 0x06};
    expect_bad_model(bad_byte, sizeof bad_byte, "<0xNN>");
    const uint8_t dup[] = {0x0a, 0x03, 0x0a, 0x01, 'a', 0x0a, 0x03, 0x0a, 0x01, 'a'};
    expect_bad_model(dup, sizeof dup, "two ids");
    const uint8_t wrong_wire[] = {0x0d, 1, 2, 3, 4};
    expect_bad_model(wrong_wire, sizeof wrong_wire, "malformed");
    const uint8_t nul[] = {0x0a, 0x04, 0x0a, 0x02, 'a', 0};
    expect_bad_model(nul, sizeof nul, "NUL");
}

static void allocation_failures_are_clean(void) {
    int ok = 0;
    for (long k = 0; k < 30; k++) {
        ct_tokenizer *tok = NULL;
        char *out = NULL;
        int32_t ids[] = {1, 2, 2};
        tg_alloc_fail_after(k);
        tg_status st = ct_tokenizer_load_model(small_model, sizeof small_model, "m", &tok);
        if (!st) st = ct_tokenizer_decode(tok, ids, 3, &out);
        tg_alloc_fail_after(-1);
        if (st) {
            CHECK_MSG(tg_status_code(st) == TG_ERR_NO_MEMORY, "k=%ld: %s", k,
                      tg_status_message(st));
        } else {
            ok++;
            CHECK(out && strcmp(out, "AA") == 0);
        }
        tg_status_free(st);
        tg_free(out);
        ct_tokenizer_free(tok);
    }
    CHECK(ok > 0);
}

/* ------------------------------------------------------- tokenizer.json */

static const char small_json[] =
    "{\"version\":\"1.0\",\"added_tokens\":["
    "{\"id\":0,\"content\":\"<unk>\",\"special\":true},"
    "{\"id\":1,\"content\":\"<|en|>\",\"special\":true},"
    "{\"id\":6,\"content\":\"<|new|>\",\"special\":false}],"
    "\"decoder\":{\"type\":\"Sequence\"},"
    "\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{"
    "\"<unk>\":0,\"<|en|>\":1,\"\xE2\x96\x81\":2,\"\xE2\x96\x81hi\":3,\"<0x41>\":4,"
    "\"there\":5},\"merges\":[]}}";

static void tokenizer_json_loads_and_decodes(void) {
    ct_tokenizer *tok = NULL;
    CHECK_OK(ct_tokenizer_load_json(small_json, strlen(small_json), "tokenizer.json", &tok));
    if (!tok) return;
    CHECK(ct_tokenizer_size(tok) == 7);
    CHECK(ct_tokenizer_id(tok, SP "hi") == 3 && ct_tokenizer_id(tok, "<|new|>") == 6);
    CHECK(ct_tokenizer_is_control(tok, 1) && ct_tokenizer_is_control(tok, 0));
    CHECK(!ct_tokenizer_is_control(tok, 6) && !ct_tokenizer_is_control(tok, 4));
    int32_t ids[] = {2, 1, 3, 4, 5, 2, 6, 0};
    char *out = NULL;
    CHECK_OK(ct_tokenizer_decode(tok, ids, 8, &out));
    CHECK_MSG(out && strcmp(out, "hiAthere <|new|>") == 0, "'%s'", out ? out : "");
    tg_free(out);
    ct_tokenizer_free(tok);

    /* Without byte_fallback, "<0x41>" is literal text. */
    char *copy = strdup(small_json);
    char *bf = strstr(copy, "\"byte_fallback\":true");
    memcpy(bf, "\"byte_fallback\":0   ", 20);
    CHECK_OK(ct_tokenizer_load_json(copy, strlen(copy), "tokenizer.json", &tok));
    int32_t one[] = {4};
    if (tok) {
        CHECK_OK(ct_tokenizer_decode(tok, one, 1, &out));
        CHECK(out && strcmp(out, "<0x41>") == 0);
        tg_free(out);
    }
    ct_tokenizer_free(tok);
    free(copy);
}

static void expect_bad_json(const char *text, const char *needle) {
    ct_tokenizer *tok = NULL;
    tg_status st = ct_tokenizer_load_json(text, strlen(text), "tok.json", &tok);
    CHECK_MSG(st != NULL, "accepted %s", text);
    CHECK(tok == NULL);
    if (st)
        CHECK_MSG(strstr(tg_status_message(st), "tok.json") &&
                      strstr(tg_status_message(st), needle),
                  "'%s' lacks '%s'", tg_status_message(st), needle);
    tg_status_free(st);
}

static void bad_tokenizer_json_is_refused(void) {
    expect_bad_json("{\"model\":", "JSON");
    expect_bad_json("{}", "model.vocab");
    expect_bad_json("{\"model\":{\"vocab\":3}}", "model.vocab");
    expect_bad_json("{\"model\":{\"vocab\":{}}}", "empty");
    expect_bad_json("{\"model\":{\"vocab\":{\"a\":0,\"b\":2}}}", "only 2 tokens");
    expect_bad_json("{\"model\":{\"vocab\":{\"a\":0,\"b\":2}},\"added_tokens\":[{\"id\":0,"
                    "\"content\":\"a\"}]}",
                    "no token has id 1");
    expect_bad_json("{\"model\":{\"vocab\":{\"a\":0,\"b\":0}}}", "id 0 is given to both");
    expect_bad_json("{\"model\":{\"vocab\":{\"a\":-1}}}", "model.vocab['a']");
    expect_bad_json("{\"model\":{\"vocab\":{\"a\":0.5}}}", "not a valid id");
    expect_bad_json("{\"model\":{\"vocab\":{\"a\":99999999}}}", "not a valid id");
    expect_bad_json("{\"model\":{\"vocab\":{\"a\":0,\"\":1}}}", "empty");
    expect_bad_json("{\"model\":{\"vocab\":{\"a\":0}},\"added_tokens\":{}}", "added_tokens");
    expect_bad_json("{\"model\":{\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":1}]}",
                    "lacks id or content");
    expect_bad_json("{\"model\":{\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":1,\"content\":"
                    "\"a\"}]}",
                    "two ids");
}

/* The full fixture vocabulary written as tokenizer.json decodes every case
 * exactly as tokenizer.model does. */
static char tmp_root[64];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_tmp(void) { nftw(tmp_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void tokenizer_json_of_the_fixture_matches_the_model(void) {
    ct_tokenizer *model = load_tiny();
    cJSON *cases = load_cases();
    if (!model || !cases) goto done;
    cJSON *root = cJSON_CreateObject();
    cJSON *m = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON_AddTrueToObject(m, "byte_fallback");
    cJSON *vocab = cJSON_AddObjectToObject(m, "vocab");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    for (int i = 0; i < ct_tokenizer_size(model); i++) {
        cJSON_AddNumberToObject(vocab, ct_tokenizer_piece(model, i), i);
        if (ct_tokenizer_is_control(model, i)) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "id", i);
            cJSON_AddStringToObject(a, "content", ct_tokenizer_piece(model, i));
            cJSON_AddTrueToObject(a, "special");
            cJSON_AddItemToArray(added, a);
        }
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    snprintf(tmp_root, sizeof tmp_root, "/tmp/ct-test-tok-XXXXXX");
    if (!mkdtemp(tmp_root)) goto done;
    atexit(remove_tmp);
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmp_root);
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    cJSON_free(text);
    ct_tokenizer *json = NULL;
    CHECK_OK(ct_tokenizer_load_dir(tmp_root, &json)); /* no tokenizer.model there */
    if (json) {
        CHECK(ct_tokenizer_size(json) == 16384);
        CHECK(check_all_cases(json, cases) == 44);
        int32_t ids[10];
        int n;
        CHECK_OK(ct_tokenizer_prompt(json, "en", 1, ids, &n));
        CHECK(ids[0] == 13764 && ids[4] == 62 && ids[9] == 13);
    }
    ct_tokenizer_free(json);
    char empty[300];
    snprintf(empty, sizeof empty, "%s/none", tmp_root);
    mkdir(empty, 0755);
    CHECK_ERR(ct_tokenizer_load_dir(empty, &json), TG_ERR_NOT_FOUND, "tokenizer.model");
done:
    cJSON_Delete(cases);
    ct_tokenizer_free(model);
}

TEST_MAIN(T(every_fixture_case_decodes_as_sentencepiece_does), T(prompt_is_built_by_name),
          T(unknown_language_is_an_error_listing_the_valid_ones),
          T(bytes_spaces_and_control_pieces), T(hand_made_model_loads),
          T(truncated_and_garbage_models_are_refused), T(allocation_failures_are_clean),
          T(tokenizer_json_loads_and_decodes), T(bad_tokenizer_json_is_refused),
          T(tokenizer_json_of_the_fixture_matches_the_model))
