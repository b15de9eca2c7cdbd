/*
 * log.c: the project's single logger, lines "[level] message" on stderr.
 *
 * The level comes from CT_LOG (debug, info, warn, error, none; default warn),
 * read once on first use; tg_log_set_level overrides it. The level is an
 * atomic so that threads may log while another changes it, and each line is
 * written under stdio's stream lock so lines from different threads never
 * interleave.
 *
 * Not here: log files, timestamps, per-module levels or rate limiting.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "base.h"

static atomic_int current_level = TG_LOG_WARN;
static pthread_once_t level_once = PTHREAD_ONCE_INIT;

static const char *const level_names[] = {"debug", "info", "warn", "error", "none"};

bool tg_log_parse_level(const char *text, tg_log_level *out_level) {
    if (!text) return false;
    for (int i = 0; i <= TG_LOG_NONE; i++) {
        if (strcasecmp(text, level_names[i]) == 0) {
            *out_level = (tg_log_level)i;
            return true;
        }
    }
    if (strcasecmp(text, "warning") == 0) {
        *out_level = TG_LOG_WARN;
        return true;
    }
    return false;
}

const char *tg_log_level_name(tg_log_level level) {
    if ((int)level < 0 || level > TG_LOG_NONE) return "?";
    return level_names[level];
}

static void read_env_level(void) {
    const char *env = getenv("CT_LOG");
    tg_log_level level = TG_LOG_WARN;
    if (env && *env && !tg_log_parse_level(env, &level)) {
        fprintf(stderr, "[warn] CT_LOG=%s is not one of debug, info, warn, error, none; "
                        "using warn\n", env);
        level = TG_LOG_WARN;
    }
    atomic_store(&current_level, (int)level);
}

tg_log_level tg_log_get_level(void) {
    pthread_once(&level_once, read_env_level);
    return (tg_log_level)atomic_load_explicit(&current_level, memory_order_relaxed);
}

void tg_log_set_level(tg_log_level level) {
    /* Run the environment read first so it cannot overwrite this later. */
    pthread_once(&level_once, read_env_level);
    if ((int)level < TG_LOG_DEBUG) level = TG_LOG_DEBUG;
    if (level > TG_LOG_NONE) level = TG_LOG_NONE;
    atomic_store(&current_level, (int)level);
}

bool tg_log_enabled(tg_log_level level) {
    return level < TG_LOG_NONE && level >= tg_log_get_level();
}

void tg_logv(tg_log_level level, const char *fmt, va_list ap) {
    if (!tg_log_enabled(level)) return;
    flockfile(stderr);
    fprintf(stderr, "[%s] ", level_names[level]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    funlockfile(stderr);
}

void tg_log(tg_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tg_logv(level, fmt, ap);
    va_end(ap);
}
