/*
 * status.c: the error records behind tg_status (declared in tg.h).
 *
 * A status is a small heap record {code, message}; NULL means success. It is
 * allocated with plain malloc, not tg_malloc, on purpose: tests inject
 * allocation failures through tg_malloc and still want to read the message the
 * failure produced. When even malloc fails, a static "out of memory" record is
 * handed out instead, so tg_status_new never returns NULL for an error;
 * tg_status_free recognises that record and leaves it alone, and
 * tg_status_wrap cannot add a prefix to it (its message stays generic).
 *
 * Not here: stack traces, nested causes or error chaining beyond the textual
 * "outer: inner" prefixes built by tg_status_wrap. (tg_status_fail_alloc
 * forces the static record so tests can reach that path.)
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

struct tg_status_rec {
    tg_code code;
    char *message;
};

static struct tg_status_rec oom_status = {
    TG_ERR_NO_MEMORY,
    (char *)"out of memory (while reporting an error)",
};

static atomic_bool fail_alloc;

void tg_status_fail_alloc(bool on) {
    atomic_store_explicit(&fail_alloc, on, memory_order_relaxed);
}

/* Formats into a new malloc'd string; NULL when memory is short. Short
 * messages (nearly all) are formatted once, into a stack buffer. */
static char *format_message(const char *fmt, va_list ap) {
    char small[256];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        /* An encoding error in the arguments: keep the format itself rather
         * than lose the whole message. */
        fmt = fmt ? fmt : "";
        size_t len = strlen(fmt);
        char *s = malloc(len + 1);
        if (s) memcpy(s, fmt, len + 1);
        return s;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    if ((size_t)n < sizeof small)
        memcpy(s, small, (size_t)n + 1);
    else
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

/* TG_OK yields NULL: success carries no message. */
tg_status tg_status_new(tg_code code, const char *fmt, ...) {
    if (code == TG_OK) return NULL;
    if (atomic_load_explicit(&fail_alloc, memory_order_relaxed)) return &oom_status;
    tg_status s = malloc(sizeof *s);
    if (!s) return &oom_status;
    va_list ap;
    va_start(ap, fmt);
    s->message = format_message(fmt ? fmt : "", ap);
    va_end(ap);
    if (!s->message) {
        free(s);
        return &oom_status;
    }
    s->code = code;
    return s;
}

tg_status tg_status_wrap(tg_status s, const char *fmt, ...) {
    if (!s || s == &oom_status) return s;
    va_list ap;
    va_start(ap, fmt);
    char *prefix = format_message(fmt ? fmt : "", ap);
    va_end(ap);
    if (!prefix) return s; /* the inner message is still the useful part */
    size_t plen = strlen(prefix), mlen = strlen(s->message);
    char *msg = malloc(plen + 2 + mlen + 1);
    if (msg) {
        memcpy(msg, prefix, plen);
        memcpy(msg + plen, ": ", 2);
        memcpy(msg + plen + 2, s->message, mlen + 1);
        free(s->message);
        s->message = msg;
    }
    free(prefix);
    return s;
}

tg_code tg_status_code(tg_status s) {
    return s ? s->code : TG_OK;
}

const char *tg_status_message(tg_status s) {
    return s ? s->message : "ok";
}

void tg_status_free(tg_status s) {
    if (!s || s == &oom_status) return;
    free(s->message);
    free(s);
}

const char *tg_code_name(tg_code code) {
    switch (code) {
    case TG_OK: return "ok";
    case TG_ERR_INVALID_ARG: return "invalid argument";
    case TG_ERR_NOT_FOUND: return "not found";
    case TG_ERR_IO: return "i/o error";
    case TG_ERR_FORMAT: return "bad format";
    case TG_ERR_NO_MEMORY: return "out of memory";
    case TG_ERR_UNSUPPORTED: return "unsupported";
    case TG_ERR_DEVICE: return "device error";
    case TG_ERR_TIMEOUT: return "timeout";
    case TG_ERR_ABORTED: return "aborted";
    case TG_ERR_INTERNAL: return "internal error";
    }
    return "unknown error code";
}
