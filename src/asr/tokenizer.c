/*
 * tokenizer.c: the vocabulary of a SentencePiece tokenizer, loaded from
 * tokenizer.model (protobuf) or tokenizer.json, for decoding generated ids
 * and looking special tokens up by name.
 *
 * Only decoding is needed to transcribe (the prompt is built from names), so
 * there is no encoder, no merges table and no normalizer here. Decoding
 * reproduces sentencepiece's Decode, which is what tests/data/tiny/tokenizer/
 * decode.json was made with:
 *   - control (and unknown) pieces produce nothing;
 *   - runs of byte pieces <0xNN> are fused and read as UTF-8, each byte of an
 *     invalid sequence becoming U+FFFD;
 *   - "▁" (U+2581) becomes a space;
 *   - while nothing has been output yet, a piece's leading "▁" is dropped
 *     (with remove_extra_whitespaces, the default and the case of this model,
 *     this repeats for every piece until some text appears, so the prompt's
 *     leading "▁" and a following "▁word" both lose theirs).
 * HF's decoder graph (Replace, ByteFallback, Fuse, Strip(start=1)) differs in
 * one place: it strips one space of the fused text, so a sequence that starts
 * with the prompt's "▁" keeps one leading space there (spec 5.2). Callers that
 * want HF's exact string prepend that space; transcripts are trimmed anyway.
 *
 * The protobuf reader is written here (a few dozen lines, bounds-checked);
 * fields other than the pieces and the two normalizer flags are skipped by
 * wire type. Group wire types, which sentencepiece never writes, are errors.
 */
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "text.h"

/* SentencePiece.Type (sentencepiece_model.proto). */
enum { PT_NORMAL = 1, PT_UNKNOWN = 2, PT_CONTROL = 3, PT_USER = 4, PT_UNUSED = 5, PT_BYTE = 6 };

/* Far above any real vocabulary (16384 here); bounds what bad input can allocate. */
#define TOK_MAX_PIECES (1 << 22)

struct ct_tokenizer {
    int n;
    char **piece;          /* n NUL-terminated strings */
    uint32_t *len;         /* their lengths */
    uint8_t *type;         /* PT_* */
    int *slots;            /* open-addressing hash of piece -> id; -1 empty */
    uint32_t n_slots;      /* a power of two */
    int add_dummy_prefix;  /* normalizer flags that decide the leading space */
    int remove_extra_ws;
    int cap;
};

static const char *const languages[] = {"ar", "de", "el", "en", "es", "fr", "it",
                                        "ja", "ko", "nl", "pl", "pt", "vi", "zh"};
#define N_LANGUAGES ((int)(sizeof languages / sizeof languages[0]))

static const char kSpace[] = "\xE2\x96\x81"; /* U+2581 */

/* ------------------------------------------------------------ building */

static ct_tokenizer *tok_new(void) {
    ct_tokenizer *t = tg_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->add_dummy_prefix = 1;
    t->remove_extra_ws = 1;
    return t;
}

void ct_tokenizer_free(ct_tokenizer *tok) {
    if (!tok) return;
    for (int i = 0; i < tok->n; i++) tg_free(tok->piece[i]);
    tg_free(tok->piece);
    tg_free(tok->len);
    tg_free(tok->type);
    tg_free(tok->slots);
    tg_free(tok);
}

/* Makes room for ids [0, need). New slots are empty (NULL piece). */
static int tok_reserve(ct_tokenizer *t, int need) {
    if (need <= t->cap) return 1;
    int cap = t->cap ? t->cap : 256;
    while (cap < need) cap *= 2;
    char **p = tg_realloc(t->piece, (size_t)cap * sizeof *p);
    if (!p) return 0;
    t->piece = p;
    uint32_t *l = tg_realloc(t->len, (size_t)cap * sizeof *l);
    if (!l) return 0;
    t->len = l;
    uint8_t *ty = tg_realloc(t->type, (size_t)cap);
    if (!ty) return 0;
    t->type = ty;
    for (int i = t->cap; i < cap; i++) {
        t->piece[i] = NULL;
        t->len[i] = 0;
        t->type[i] = 0;
    }
    t->cap = cap;
    return 1;
}

/* Sets piece `id` (replacing what was there). */
static tg_status tok_set(ct_tokenizer *t, int id, const char *s, size_t len, int type,
                         const char *what) {
    if (id < 0 || id >= TOK_MAX_PIECES)
        return tg_status_new(TG_ERR_FORMAT, "%s: token id %d out of range", what, id);
    if (len == 0)
        return tg_status_new(TG_ERR_FORMAT, "%s: token %d is an empty string", what, id);
    if (len > 1024)
        return tg_status_new(TG_ERR_FORMAT, "%s: token %d is %zu bytes long", what, id, len);
    if (memchr(s, 0, len))
        return tg_status_new(TG_ERR_FORMAT, "%s: token %d contains a NUL byte", what, id);
    if (!tok_reserve(t, id + 1))
        return tg_status_new(TG_ERR_NO_MEMORY, "%s: vocabulary: out of memory", what);
    char *copy = tg_malloc(len + 1);
    if (!copy) return tg_status_new(TG_ERR_NO_MEMORY, "%s: vocabulary: out of memory", what);
    memcpy(copy, s, len);
    copy[len] = 0;
    tg_free(t->piece[id]);
    t->piece[id] = copy;
    t->len[id] = (uint32_t)len;
    t->type[id] = (uint8_t)type;
    if (id >= t->n) t->n = id + 1;
    return NULL;
}

static uint32_t hash_piece(const char *s, size_t len) {
    return (uint32_t)tg_hash64(s, len, 0x5eed);
}

static int lookup(const ct_tokenizer *t, const char *s, size_t len) {
    if (!t->slots) return -1;
    uint32_t mask = t->n_slots - 1;
    for (uint32_t h = hash_piece(s, len) & mask;; h = (h + 1) & mask) {
        int id = t->slots[h];
        if (id < 0) return -1;
        if (t->len[id] == len && memcmp(t->piece[id], s, len) == 0) return id;
    }
}

/* Checks that every id has a piece, that no piece appears twice, and builds
 * the name index. */
static tg_status tok_finish(ct_tokenizer *t, const char *what) {
    if (t->n == 0) return tg_status_new(TG_ERR_FORMAT, "%s: the vocabulary is empty", what);
    for (int i = 0; i < t->n; i++)
        if (!t->piece[i])
            return tg_status_new(TG_ERR_FORMAT, "%s: no token has id %d (ids must run 0..%d)",
                                 what, i, t->n - 1);
    uint32_t n_slots = 16;
    while (n_slots < 2u * (uint32_t)t->n) n_slots *= 2;
    t->slots = tg_malloc((size_t)n_slots * sizeof(int));
    if (!t->slots) return tg_status_new(TG_ERR_NO_MEMORY, "%s: piece index: out of memory", what);
    memset(t->slots, 0xff, (size_t)n_slots * sizeof(int));
    t->n_slots = n_slots;
    for (int i = 0; i < t->n; i++) {
        uint32_t mask = n_slots - 1;
        uint32_t h = hash_piece(t->piece[i], t->len[i]) & mask;
        for (;; h = (h + 1) & mask) {
            int id = t->slots[h];
            if (id < 0) break;
            if (t->len[id] == t->len[i] && memcmp(t->piece[id], t->piece[i], t->len[i]) == 0)
                return tg_status_new(TG_ERR_FORMAT, "%s: piece '%s' has two ids, %d and %d",
                                     what, t->piece[i], id, i);
        }
        t->slots[h] = i;
    }
    return NULL;
}

/* A byte piece is exactly "<0xNN>" with two upper-case hex digits. */
static int byte_value(const char *s, uint32_t len) {
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* ------------------------------------------------------------ protobuf */

typedef struct pb {
    const uint8_t *p, *end;
} pb;

static int pb_varint(pb *r, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return 0;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0; /* more than 10 bytes */
}

/* Reads one field key and, for wire type 2, the payload bounds. The value of
 * other wire types is left for pb_skip or the caller. */
static int pb_key(pb *r, uint32_t *field, int *wire) {
    uint64_t k;
    if (!pb_varint(r, &k) || (k >> 3) == 0 || (k >> 3) > 0x1fffffff) return 0;
    *field = (uint32_t)(k >> 3);
    *wire = (int)(k & 7);
    return 1;
}

static int pb_bytes(pb *r, pb *out) {
    uint64_t n;
    if (!pb_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return 0;
    out->p = r->p;
    out->end = r->p + n;
    r->p += n;
    return 1;
}

static int pb_skip(pb *r, int wire) {
    uint64_t v;
    pb sub;
    switch (wire) {
    case 0: return pb_varint(r, &v);
    case 1:
        if (r->end - r->p < 8) return 0;
        r->p += 8;
        return 1;
    case 2: return pb_bytes(r, &sub);
    case 5:
        if (r->end - r->p < 4) return 0;
        r->p += 4;
        return 1;
    default: return 0; /* groups (3, 4) and undefined types */
    }
}

/* SentencePiece { 1: piece, 2: score, 3: type } */
static tg_status parse_piece(ct_tokenizer *t, pb r, int id, const char *what) {
    pb text = {NULL, NULL};
    uint64_t type = PT_NORMAL;
    while (r.p < r.end) {
        uint32_t f;
        int w;
        if (!pb_key(&r, &f, &w)) goto bad;
        if (f == 1 && w == 2) {
            if (!pb_bytes(&r, &text)) goto bad;
        } else if (f == 3 && w == 0) {
            if (!pb_varint(&r, &type)) goto bad;
        } else if ((f == 1 || f == 3) || !pb_skip(&r, w)) {
            goto bad;
        }
    }
    if (type < PT_NORMAL || type > PT_BYTE)
        return tg_status_new(TG_ERR_FORMAT, "%s: piece %d has unknown type %llu", what, id,
                             (unsigned long long)type);
    if (!text.p)
        return tg_status_new(TG_ERR_FORMAT, "%s: piece %d has no text", what, id);
    if (type == PT_BYTE && byte_value((const char *)text.p, (uint32_t)(text.end - text.p)) < 0)
        return tg_status_new(TG_ERR_FORMAT, "%s: byte piece %d is not of the form <0xNN>",
                             what, id);
    return tok_set(t, id, (const char *)text.p, (size_t)(text.end - text.p), (int)type, what);
bad:
    return tg_status_new(TG_ERR_FORMAT, "%s: piece %d is malformed (truncated or corrupt "
                         "protobuf)", what, id);
}

/* NormalizerSpec { 3: add_dummy_prefix, 4: remove_extra_whitespaces } */
static int parse_normalizer(ct_tokenizer *t, pb r) {
    while (r.p < r.end) {
        uint32_t f;
        int w;
        uint64_t v;
        if (!pb_key(&r, &f, &w)) return 0;
        if ((f == 3 || f == 4) && w == 0) {
            if (!pb_varint(&r, &v)) return 0;
            if (f == 3) t->add_dummy_prefix = v != 0;
            else t->remove_extra_ws = v != 0;
        } else if (!pb_skip(&r, w)) {
            return 0;
        }
    }
    return 1;
}

tg_status ct_tokenizer_load_model(const uint8_t *data, size_t size, const char *what,
                                  ct_tokenizer **out_tok) {
    if (!what) what = "tokenizer.model";
    if (!data && size) return tg_status_new(TG_ERR_INVALID_ARG, "%s: no data", what);
    ct_tokenizer *t = tok_new();
    if (!t) return tg_status_new(TG_ERR_NO_MEMORY, "loading %s: out of memory", what);
    tg_status st = NULL;
    pb r = {data, data ? data + size : data};
    int n = 0;
    while (r.p < r.end) {
        uint32_t f;
        int w;
        pb sub;
        size_t at = (size_t)(r.p - data);
        if (!pb_key(&r, &f, &w)) goto bad;
        if (f == 1) { /* repeated SentencePiece pieces */
            if (w != 2 || !pb_bytes(&r, &sub)) goto bad;
            if (n >= TOK_MAX_PIECES) {
                st = tg_status_new(TG_ERR_FORMAT, "%s: more than %d pieces", what,
                                   TOK_MAX_PIECES);
                goto fail;
            }
            st = parse_piece(t, sub, n++, what);
            if (st) goto fail;
        } else if (f == 3 && w == 2) { /* NormalizerSpec */
            if (!pb_bytes(&r, &sub) || !parse_normalizer(t, sub)) goto bad;
        } else if (!pb_skip(&r, w)) {
            goto bad;
        }
        continue;
    bad:
        st = tg_status_new(TG_ERR_FORMAT,
                           "%s: not a SentencePiece model (malformed protobuf at byte %zu of "
                           "%zu)",
                           what, at, size);
        goto fail;
    }
    st = tok_finish(t, what);
    if (st) goto fail;
    *out_tok = t;
    return NULL;
fail:
    ct_tokenizer_free(t);
    return st;
}

/* ---------------------------------------------------------------- JSON */

static int json_id(const cJSON *v, int *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= TOK_MAX_PIECES ||
        v->valuedouble != (double)(int)v->valuedouble)
        return 0;
    *out = (int)v->valuedouble;
    return 1;
}

tg_status ct_tokenizer_load_json(const char *text, size_t size, const char *what,
                                 ct_tokenizer **out_tok) {
    if (!what) what = "tokenizer.json";
    cJSON *root = NULL;
    ct_tokenizer *t = NULL;
    tg_status st = tg_json_parse(text, size, what, &root);
    if (st) return st;
    t = tok_new();
    if (!t) {
        st = tg_status_new(TG_ERR_NO_MEMORY, "loading %s: out of memory", what);
        goto fail;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(model) || !(cJSON_IsObject(vocab) || cJSON_IsArray(vocab))) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: no model.vocab", what);
        goto fail;
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added)) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: added_tokens is not an array", what);
        goto fail;
    }
    /* Ids must be dense, so none can reach the number of entries; checking
     * that first keeps a huge id from allocating a huge table. */
    int total = cJSON_GetArraySize(vocab) + (added ? cJSON_GetArraySize(added) : 0);
    const cJSON *bf = cJSON_GetObjectItemCaseSensitive(model, "byte_fallback");
    int byte_fallback = cJSON_IsTrue(bf);
    const cJSON *e;
    int index = 0;
    cJSON_ArrayForEach(e, vocab) {
        const char *piece;
        int id;
        if (cJSON_IsArray(vocab)) { /* Unigram: [[piece, score], ...] in id order */
            const cJSON *p = cJSON_GetArrayItem(e, 0);
            if (!cJSON_IsArray(e) || !cJSON_IsString(p)) {
                st = tg_status_new(TG_ERR_FORMAT, "%s: model.vocab[%d] is not [piece, score]",
                                   what, index);
                goto fail;
            }
            piece = p->valuestring;
            id = index++;
        } else {
            piece = e->string;
            if (!json_id(e, &id)) {
                st = tg_status_new(TG_ERR_FORMAT, "%s: model.vocab['%s'] is not a valid id",
                                   what, piece);
                goto fail;
            }
        }
        if (id >= total) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: '%s' has id %d but only %d tokens are listed",
                               what, piece, id, total);
            goto fail;
        }
        if (id < t->n && t->piece[id]) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: id %d is given to both '%s' and '%s'", what,
                               id, t->piece[id], piece);
            goto fail;
        }
        size_t len = strlen(piece);
        int type = byte_fallback && byte_value(piece, (uint32_t)len) >= 0 ? PT_BYTE
                                                                          : PT_NORMAL;
        st = tok_set(t, id, piece, len, type, what);
        if (st) goto fail;
    }
    /* Added tokens override the vocabulary's entry for their id; the special
     * ones are skipped by decode (HF skip_special_tokens). */
    cJSON_ArrayForEach(e, added) {
        const cJSON *jid = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        const cJSON *special = cJSON_GetObjectItemCaseSensitive(e, "special");
        int id;
        if (!json_id(jid, &id) || !cJSON_IsString(content)) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: an added_tokens entry lacks id or content",
                               what);
            goto fail;
        }
        if (id >= total) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: added token '%s' has id %d but only %d "
                               "tokens are listed", what, content->valuestring, id, total);
            goto fail;
        }
        st = tok_set(t, id, content->valuestring, strlen(content->valuestring),
                     cJSON_IsTrue(special) ? PT_CONTROL : PT_USER, what);
        if (st) goto fail;
    }
    st = tok_finish(t, what);
    if (st) goto fail;
    tg_json_free(root);
    *out_tok = t;
    return NULL;
fail:
    ct_tokenizer_free(t);
    tg_json_free(root);
    return st;
}

tg_status ct_tokenizer_load_dir(const char *dir, ct_tokenizer **out_tok) {
    tg_status st = NULL;
    size_t n = strlen(dir) + 32;
    char *path = tg_malloc(n);
    char *text = NULL;
    size_t size = 0;
    struct stat sb;
    if (!path)
        return tg_status_new(TG_ERR_NO_MEMORY, "loading the tokenizer of %s: out of memory", dir);
    snprintf(path, n, "%s/tokenizer.model", dir);
    if (stat(path, &sb) == 0) {
        st = tg_file_read(path, &text, &size);
        if (!st) st = ct_tokenizer_load_model((const uint8_t *)text, size, path, out_tok);
        goto done;
    }
    snprintf(path, n, "%s/tokenizer.json", dir);
    if (stat(path, &sb) == 0) {
        st = tg_file_read(path, &text, &size);
        if (!st) st = ct_tokenizer_load_json(text, size, path, out_tok);
        goto done;
    }
    st = tg_status_new(TG_ERR_NOT_FOUND, "%s: neither tokenizer.model nor tokenizer.json found",
                       dir);
done:
    tg_free(text);
    tg_free(path);
    return st;
}

/* ------------------------------------------------------------- queries */

int ct_tokenizer_size(const ct_tokenizer *tok) { return tok ? tok->n : 0; }

int ct_tokenizer_id(const ct_tokenizer *tok, const char *piece) {
    if (!tok || !piece) return -1;
    return lookup(tok, piece, strlen(piece));
}

const char *ct_tokenizer_piece(const ct_tokenizer *tok, int id) {
    if (!tok || id < 0 || id >= tok->n) return NULL;
    return tok->piece[id];
}

int ct_tokenizer_is_control(const ct_tokenizer *tok, int id) {
    if (!tok || id < 0 || id >= tok->n) return 0;
    return tok->type[id] == PT_CONTROL || tok->type[id] == PT_UNKNOWN;
}

/* -------------------------------------------------------------- decode */

typedef struct out_buf {
    char *p;
    size_t n, cap;
} out_buf;

static int out_put(out_buf *o, const void *s, size_t len) {
    if (o->n + len + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 64;
        while (cap < o->n + len + 1) cap *= 2;
        char *p = tg_realloc(o->p, cap);
        if (!p) return 0;
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, len);
    o->n += len;
    o->p[o->n] = 0;
    return 1;
}

/* Writes a run of raw bytes as UTF-8, each invalid byte as U+FFFD. */
static int flush_bytes(out_buf *o, const uint8_t *b, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = ct_utf8_next((const char *)b + i, n - i, &cp);
        if (cp != 0xFFFFFFFFu) {
            if (!out_put(o, b + i, k)) return 0;
            i += k;
        } else {
            if (!out_put(o, "\xEF\xBF\xBD", 3)) return 0;
            i++;
        }
    }
    return 1;
}

tg_status ct_tokenizer_decode(const ct_tokenizer *tok, const int32_t *ids, int n,
                              char **out_text) {
    if (!tok || n < 0 || (n > 0 && !ids))
        return tg_status_new(TG_ERR_INVALID_ARG, "decoding: bad arguments");
    out_buf o = {NULL, 0, 0};
    uint8_t *bytes = tg_malloc((size_t)n + 1);
    size_t n_bytes = 0;
    tg_status st = NULL;
    int strip_bos = tok->add_dummy_prefix || tok->remove_extra_ws;
    int is_bos_ws = 1, bos_ws_seen = 0;
    if (!bytes || !out_put(&o, "", 0)) goto oom;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= tok->n) {
            st = tg_status_new(TG_ERR_INVALID_ARG,
                               "decoding: id %d at position %d is outside the vocabulary "
                               "(0..%d)",
                               id, i, tok->n - 1);
            goto fail;
        }
        int type = tok->type[id];
        if (type == PT_BYTE) {
            bytes[n_bytes++] = (uint8_t)byte_value(tok->piece[id], tok->len[id]);
            continue;
        }
        if (!flush_bytes(&o, bytes, n_bytes)) goto oom;
        n_bytes = 0;
        /* The leading "▁" is a dummy prefix until text appears; without
         * remove_extra_whitespaces only the first one is. */
        if (bos_ws_seen || o.n > 0) is_bos_ws = 0;
        if (type == PT_CONTROL || type == PT_UNKNOWN) {
            bos_ws_seen = 0;
            continue;
        }
        const char *s = tok->piece[id];
        size_t len = tok->len[id];
        bos_ws_seen = 0;
        if (is_bos_ws && strip_bos && len >= 3 && memcmp(s, kSpace, 3) == 0) {
            s += 3;
            len -= 3;
            bos_ws_seen = !tok->remove_extra_ws;
        }
        while (len > 0) {
            const char *m = len >= 3 ? memmem(s, len, kSpace, 3) : NULL;
            size_t k = m ? (size_t)(m - s) : len;
            if (!out_put(&o, s, k)) goto oom;
            if (!m) break;
            if (!out_put(&o, " ", 1)) goto oom;
            s += k + 3;
            len -= k + 3;
        }
    }
    if (!flush_bytes(&o, bytes, n_bytes)) goto oom;
    tg_free(bytes);
    *out_text = o.p;
    return NULL;
oom:
    st = tg_status_new(TG_ERR_NO_MEMORY, "decoding %d tokens: out of memory", n);
fail:
    tg_free(bytes);
    tg_free(o.p);
    return st;
}

/* -------------------------------------------------------------- prompt */

tg_status ct_language_check(const char *lang) {
    int known = 0;
    for (int i = 0; lang && i < N_LANGUAGES && !known; i++) known = !strcmp(lang, languages[i]);
    if (!known) {
        char list[3 * N_LANGUAGES + 1];
        size_t k = 0;
        for (int i = 0; i < N_LANGUAGES; i++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? " " : "", languages[i]);
        return tg_status_new(TG_ERR_INVALID_ARG,
                             "language '%s' is not supported; choose one of: %s",
                             lang ? lang : "(none)", list);
    }
    return NULL;
}

tg_status ct_tokenizer_prompt(const ct_tokenizer *tok, const char *lang, int punctuation,
                              int32_t *out_ids, int *out_n) {
    if (!tok || !out_ids || !out_n)
        return tg_status_new(TG_ERR_INVALID_ARG, "building the prompt: bad arguments");
    tg_status st = ct_language_check(lang);
    if (st) return st;
    char lang_tok[16];
    snprintf(lang_tok, sizeof lang_tok, "<|%s|>", lang);
    /* spec 5.2: CohereAsrProcessor.get_decoder_prompt_ids */
    const char *names[10] = {kSpace,          "<|startofcontext|>",
                             "<|startoftranscript|>", "<|emo:undefined|>",
                             lang_tok,        lang_tok,
                             punctuation ? "<|pnc|>" : "<|nopnc|>",
                             "<|noitn|>",     "<|notimestamp|>",
                             "<|nodiarize|>"};
    int32_t ids[10];
    for (int i = 0; i < 10; i++) {
        int id = ct_tokenizer_id(tok, names[i]);
        if (id < 0)
            return tg_status_new(TG_ERR_NOT_FOUND,
                                 "building the prompt: the tokenizer has no piece '%s' (is "
                                 "this the model's own tokenizer?)",
                                 names[i]);
        ids[i] = id;
    }
    memcpy(out_ids, ids, sizeof ids);
    *out_n = 10;
    return NULL;
}
