/*
 * test_log.c: log level parsing, CT_LOG read on first use, set/enabled, and
 * that logging from many threads at once is safe (run under TSan to prove
 * it). Output goes to stderr; this test only checks the levels.
 */
#include <pthread.h>
#include <stdlib.h>

#include "base.h"
#include "check.h"

static void level_names_parse(void) {
    static const struct {
        const char *text;
        tg_log_level level;
    } cases[] = {{"debug", TG_LOG_DEBUG}, {"info", TG_LOG_INFO},   {"warn", TG_LOG_WARN},
                 {"error", TG_LOG_ERROR}, {"none", TG_LOG_NONE},   {"DEBUG", TG_LOG_DEBUG},
                 {"Warn", TG_LOG_WARN},   {"warning", TG_LOG_WARN}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_log_level l = TG_LOG_NONE;
        CHECK_MSG(tg_log_parse_level(cases[i].text, &l), "%s", cases[i].text);
        CHECK_MSG(l == cases[i].level, "%s", cases[i].text);
    }
    for (int l = TG_LOG_DEBUG; l <= TG_LOG_NONE; l++) {
        tg_log_level back = TG_LOG_NONE;
        CHECK(tg_log_parse_level(tg_log_level_name((tg_log_level)l), &back));
        CHECK(back == (tg_log_level)l);
    }
}

static void bad_level_names_are_rejected(void) {
    const char *bad[] = {"", "verbose", "2", "debugx", "warn ", NULL};
    for (int i = 0; i < 6; i++) {
        tg_log_level l = TG_LOG_ERROR;
        CHECK(!tg_log_parse_level(bad[i], &l));
        CHECK(l == TG_LOG_ERROR); /* untouched */
    }
}

static void env_is_read_on_first_use(void) {
    /* Runs first (TEST_MAIN order): nothing has logged yet in this process. */
    setenv("CT_LOG", "error", 1);
    CHECK(tg_log_get_level() == TG_LOG_ERROR);
    /* Read once: later changes to the environment are not seen. */
    setenv("CT_LOG", "debug", 1);
    CHECK(tg_log_get_level() == TG_LOG_ERROR);
    CHECK(!tg_log_enabled(TG_LOG_WARN));
    CHECK(tg_log_enabled(TG_LOG_ERROR));
}

static void set_level_controls_enabled(void) {
    tg_log_set_level(TG_LOG_INFO);
    CHECK(tg_log_get_level() == TG_LOG_INFO);
    CHECK(!tg_log_enabled(TG_LOG_DEBUG));
    CHECK(tg_log_enabled(TG_LOG_INFO));
    CHECK(tg_log_enabled(TG_LOG_ERROR));
    tg_log_set_level(TG_LOG_NONE);
    CHECK(!tg_log_enabled(TG_LOG_ERROR));
    CHECK(!tg_log_enabled(TG_LOG_NONE)); /* "none" is not a level to log at */
    TG_ERROR("this line must not appear");
    tg_log_set_level(TG_LOG_WARN);
}

static void *log_from_thread(void *arg) {
    for (int i = 0; i < 50; i++) {
        TG_DEBUG("thread %d line %d (hidden)", *(int *)arg, i);
        if (i % 25 == 0) TG_WARN("thread %d line %d", *(int *)arg, i);
        if (i == 10) tg_log_set_level(TG_LOG_WARN);
    }
    return NULL;
}

static void concurrent_logging_is_safe(void) {
    pthread_t th[4];
    int ids[4] = {0, 1, 2, 3};
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&th[i], NULL, log_from_thread, &ids[i]) == 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    CHECK(tg_log_get_level() == TG_LOG_WARN);
}

TEST_MAIN(T(env_is_read_on_first_use), T(level_names_parse), T(bad_level_names_are_rejected),
          T(set_level_controls_enabled), T(concurrent_logging_is_safe))
