/*
 * json.c: JSON parsing through cJSON (Debian's libcjson) with errors a user
 * can act on.
 *
 * cJSON reports a failed parse as a pointer into the text; this turns it into
 * "config.json: invalid JSON at line 3, column 14 (byte 41) near '...'". Text
 * after the document other than white space is an error too (cJSON would
 * silently ignore it). cJSON allocates with plain malloc, not tg_malloc, so
 * that an injected allocation failure is never misreported as a syntax
 * error; its nesting limit (1000 levels) keeps hostile input off the stack.
 *
 * Not here: typed getters or schema checks (callers know their keys).
 */
#include <cjson/cJSON.h>
#include <stdio.h>

#define TG_STR_(x) #x
#define TG_STR(x) TG_STR_(x)

#include "base.h"

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Fills line and column (1-based) of byte offset off. */
static void locate(const char *text, size_t off, size_t *line, size_t *col) {
    size_t l = 1, c = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* Copies up to 16 printable bytes from text[off..] into buf for context. */
static void excerpt(const char *text, size_t size, size_t off, char buf[17]) {
    size_t n = 0;
    for (size_t i = off; i < size && n < 16; i++) {
        char c = text[i];
        if (c == '\n' || c == '\r') break;
        buf[n++] = (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    buf[n] = '\0';
}

static tg_status syntax_error(const char *text, size_t size, size_t off, const char *what,
                              const char *why) {
    size_t line, col;
    char near[17];
    if (off > size) off = size;
    locate(text, off, &line, &col);
    excerpt(text, size, off, near);
    if (off >= size)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: %s at line %zu, column %zu (byte %zu, end of input)", what,
                             why, line, col, off);
    return tg_status_new(TG_ERR_FORMAT, "%s: %s at line %zu, column %zu (byte %zu) near '%s'",
                         what, why, line, col, off, near);
}

/* Depth of [ and { open at byte off (outside strings): a failed parse at
 * cJSON's nesting limit is valid JSON nested too deeply, not a syntax
 * error, and should say so. */
static size_t depth_at(const char *text, size_t off) {
    size_t depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < off; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return depth;
}

tg_status tg_json_parse(const char *text, size_t size, const char *what,
                        struct cJSON **out_json) {
    if (!what) what = "JSON";
    if (!text || !out_json) return tg_status_new(TG_ERR_INVALID_ARG, "%s: NULL argument", what);
    if (size == 0) return tg_status_new(TG_ERR_FORMAT, "%s: empty input, expected JSON", what);
    const char *end = NULL;
    cJSON *json = cJSON_ParseWithLengthOpts(text, size, &end, 0);
    if (!json) {
        size_t off = end && end >= text ? (size_t)(end - text) : 0;
        if (off > size) off = size;
        if (depth_at(text, off) >= CJSON_NESTING_LIMIT)
            return syntax_error(text, size, off, what,
                                "JSON nested deeper than " TG_STR(CJSON_NESTING_LIMIT) " levels, the most this reader takes,");
        return syntax_error(text, size, off, what, "invalid JSON");
    }
    size_t off = end && end >= text && (size_t)(end - text) <= size ? (size_t)(end - text) : size;
    /* NULs count as white space: callers may pass a C string's terminator. */
    while (off < size && (is_space(text[off]) || text[off] == '\0')) off++;
    if (off < size) {
        cJSON_Delete(json);
        return syntax_error(text, size, off, what, "unexpected data after the JSON document");
    }
    *out_json = json;
    return NULL;
}

void tg_json_free(struct cJSON *json) {
    cJSON_Delete(json);
}
