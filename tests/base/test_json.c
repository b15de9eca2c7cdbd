/*
 * test_json.c: tg_json_parse accepts valid documents (not NUL-terminated
 * ones too) and reports bad ones with the source name and the position.
 */
#include <cjson/cJSON.h>

#include "base.h"
#include "check.h"

static void parses_a_valid_document(void) {
    const char *text = "{\"hidden_size\": 1280, \"layers\": [1, 2, 3], \"name\": \"x\"}";
    cJSON *json = NULL;
    CHECK_OK(tg_json_parse(text, strlen(text), "config.json", &json));
    CHECK(json != NULL);
    if (!json) return;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(json, "hidden_size");
    CHECK(cJSON_IsNumber(h) && h->valueint == 1280);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(json, "layers")) == 3);
    tg_json_free(json);
    tg_json_free(NULL);
}

static void size_bounds_the_text(void) {
    /* The text is not NUL-terminated past size: parse only the prefix. */
    const char text[] = "[1,2]GARBAGE";
    cJSON *json = NULL;
    CHECK_OK(tg_json_parse(text, 5, "buf", &json));
    CHECK(cJSON_GetArraySize(json) == 2);
    tg_json_free(json);
    /* Trailing white space and a C string's terminator are fine. */
    CHECK_OK(tg_json_parse("{} \n\t", 5, "ws", &json));
    tg_json_free(json);
    CHECK_OK(tg_json_parse("{}", 3, "nul", &json));
    tg_json_free(json);
}

static void invalid_json_names_source_and_position(void) {
    const char *text = "{\n  \"a\": 1,\n  \"b\": [1, 2,, 3]\n}";
    cJSON *json = (cJSON *)&json;
    tg_status st = tg_json_parse(text, strlen(text), "model/config.json", &json);
    CHECK(tg_status_code(st) == TG_ERR_FORMAT);
    const char *msg = tg_status_message(st);
    CHECK_MSG(strstr(msg, "model/config.json") != NULL, "%s", msg);
    CHECK_MSG(strstr(msg, "line 3") != NULL, "%s", msg);
    CHECK_MSG(strstr(msg, "byte ") != NULL, "%s", msg);
    tg_status_free(st);
    CHECK(json == (cJSON *)&json); /* output untouched */
}

static void trailing_garbage_is_an_error(void) {
    cJSON *json = NULL;
    const char *text = "{\"a\": 1} {\"b\": 2}";
    CHECK_ERR(tg_json_parse(text, strlen(text), "two.json", &json), TG_ERR_FORMAT,
              "two.json: unexpected data after the JSON document at line 1, column 10 (byte 9)");
    CHECK(json == NULL);
}

static void bad_inputs_are_errors(void) {
    cJSON *json = NULL;
    const char *bad[] = {"", "{", "[1,2", "{\"a\" 1}", "nul", "\"unterminated", "{\"a\":}",
                         "[1,]x", "\x01"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_ERR(tg_json_parse(bad[i], strlen(bad[i]), "bad.json", &json), TG_ERR_FORMAT,
                  "bad.json");
    CHECK(json == NULL);
    CHECK_ERR(tg_json_parse(NULL, 3, "null.json", &json), TG_ERR_INVALID_ARG, "null.json");
    CHECK_ERR(tg_json_parse("{}", 2, "x", NULL), TG_ERR_INVALID_ARG, "x");
    CHECK_ERR(tg_json_parse("[", 1, NULL, &json), TG_ERR_FORMAT, "JSON");
}

static void deep_nesting_is_rejected_not_crashing(void) {
    enum { DEPTH = 100000 };
    char *text = tg_malloc(DEPTH + 1);
    CHECK(text != NULL);
    if (!text) return;
    memset(text, '[', DEPTH);
    text[DEPTH] = '\0';
    cJSON *json = NULL;
    CHECK_ERR(tg_json_parse(text, DEPTH, "deep.json", &json), TG_ERR_FORMAT, "deep.json");
    tg_free(text);
}

/* Valid JSON nested past cJSON's limit (1000) is refused as too deep, not
 * called invalid; brackets inside strings do not count. */
static void valid_but_too_deep_json_says_so(void) {
    enum { DEPTH = 1500 };
    char *text = tg_malloc(2 * DEPTH + 16);
    CHECK(text != NULL);
    if (!text) return;
    /* ["[{", [[[...]]]]: brackets inside the string do not count */
    memcpy(text, "[\"[{\",", 6);
    size_t n = 6;
    for (int i = 0; i < DEPTH; i++) text[n++] = '[';
    for (int i = 0; i < DEPTH; i++) text[n++] = ']';
    text[n++] = ']';
    cJSON *json = NULL;
    CHECK_ERR(tg_json_parse(text, n, "deep.json", &json), TG_ERR_FORMAT, "nested deeper than 1000 levels");
    /* a real syntax error at a shallow depth still reads as one */
    CHECK_ERR(tg_json_parse("[[1,]]", 6, "bad.json", &json), TG_ERR_FORMAT, "invalid JSON");
    tg_free(text);
}

TEST_MAIN(T(parses_a_valid_document), T(size_bounds_the_text), T(valid_but_too_deep_json_says_so),
          T(invalid_json_names_source_and_position), T(trailing_garbage_is_an_error),
          T(bad_inputs_are_errors), T(deep_nesting_is_rejected_not_crashing))
