/*
 * tg_status.h: the status every fallible call of the project returns (public).
 *
 * NULL means success; anything else is a heap object with a code and a message
 * built where the failure was understood and prefixed on the way up
 * (tg_status_wrap). It is its own header, below the tensor API (tg.h), so that
 * code that only reports errors (files, JSON, audio, the tokenizer, config
 * parsing) does not see tensors, graphs and backends. The implementation is
 * src/base/status.c.
 */
#ifndef TG_STATUS_H
#define TG_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_code {
    TG_OK = 0,
    TG_ERR_INVALID_ARG,  /* a caller passed something malformed            */
    TG_ERR_NOT_FOUND,    /* a file, tensor or name that does not exist     */
    TG_ERR_IO,           /* the operating system refused a read or write   */
    TG_ERR_FORMAT,       /* data on disk is malformed (header, JSON, WAV)  */
    TG_ERR_NO_MEMORY,    /* host or device allocation failed               */
    TG_ERR_UNSUPPORTED,  /* valid, but not implemented here / no device    */
    TG_ERR_DEVICE,       /* a GPU driver or library call failed            */
    TG_ERR_TIMEOUT,      /* a wait ran past its limit                      */
    TG_ERR_ABORTED,      /* the caller's abort callback asked to stop      */
    TG_ERR_INTERNAL,     /* a bug: an invariant did not hold               */
} tg_code;

/* NULL means success. */
typedef struct tg_status_rec *tg_status;

/* Returns a new status; the caller owns it (tg_status_free). Never returns NULL
 * for code != TG_OK: when memory is short a static "out of memory" status is
 * returned, which tg_status_free accepts. */
tg_status tg_status_new(tg_code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefixes "<fmt>: " to the message of s and returns s (ownership passes
 * through). NULL in, NULL out, so `return tg_status_wrap(f(), "loading %s", p);`
 * reads naturally. */
tg_status tg_status_wrap(tg_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* TG_OK for NULL. */
tg_code tg_status_code(tg_status s);
/* "ok" for NULL; the string is owned by s. */
const char *tg_status_message(tg_status s);
/* Accepts NULL. */
void tg_status_free(tg_status s);
/* Name of a code ("invalid argument", ...); static storage. */
const char *tg_code_name(tg_code code);

#ifdef __cplusplus
}
#endif

#endif /* TG_STATUS_H */
