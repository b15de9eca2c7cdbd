/*
 * test_status.c: status records: codes, messages, wrap chains, the static
 * out-of-memory record, and that injected allocation failures do not stop a
 * status from carrying its message.
 */
#include "base.h"
#include "check.h"

static void new_carries_code_and_formatted_message(void) {
    tg_status st = tg_status_new(TG_ERR_FORMAT, "tensor '%s' has %d dims", "w", 5);
    CHECK(st != NULL);
    CHECK(tg_status_code(st) == TG_ERR_FORMAT);
    CHECK(strcmp(tg_status_message(st), "tensor 'w' has 5 dims") == 0);
    tg_status_free(st);
}

static void ok_code_and_null_mean_success(void) {
    CHECK(tg_status_new(TG_OK, "ignored") == NULL);
    CHECK(tg_status_code(NULL) == TG_OK);
    CHECK(strcmp(tg_status_message(NULL), "ok") == 0);
    tg_status_free(NULL);
}

static void wrap_chains_prefixes_outermost_first(void) {
    tg_status st = tg_status_new(TG_ERR_NOT_FOUND, "no tensor 'x'");
    st = tg_status_wrap(st, "layer %d", 3);
    st = tg_status_wrap(st, "loading %s", "model.safetensors");
    CHECK(tg_status_code(st) == TG_ERR_NOT_FOUND);
    CHECK(strcmp(tg_status_message(st), "loading model.safetensors: layer 3: no tensor 'x'") == 0);
    tg_status_free(st);
}

static void wrap_of_null_is_null(void) {
    CHECK(tg_status_wrap(NULL, "loading %s", "x") == NULL);
}

static void every_code_has_a_distinct_name(void) {
    for (int a = TG_OK; a <= TG_ERR_INTERNAL; a++) {
        CHECK(tg_code_name((tg_code)a) != NULL);
        CHECK(strcmp(tg_code_name((tg_code)a), "unknown error code") != 0);
        for (int b = a + 1; b <= TG_ERR_INTERNAL; b++)
            CHECK(strcmp(tg_code_name((tg_code)a), tg_code_name((tg_code)b)) != 0);
    }
    CHECK(strcmp(tg_code_name(TG_ERR_NO_MEMORY), "out of memory") == 0);
    CHECK(strcmp(tg_code_name((tg_code)999), "unknown error code") == 0);
}

static void long_messages_are_kept_whole(void) {
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tg_status st = tg_status_wrap(tg_status_new(TG_ERR_IO, "%s", big), "%s", big);
    CHECK(strlen(tg_status_message(st)) == 2 * (sizeof big - 1) + 2);
    tg_status_free(st);
}

static void injected_failures_leave_status_messages_intact(void) {
    /* Statuses use plain malloc, so a test that makes tg_malloc fail still
     * gets the message that explains the failure. */
    tg_alloc_fail_after(0);
    CHECK(tg_malloc(16) == NULL);
    tg_status st = tg_status_wrap(tg_status_new(TG_ERR_NO_MEMORY, "buffer of %d bytes", 16), "ctx");
    tg_alloc_fail_after(-1);
    CHECK(strcmp(tg_status_message(st), "ctx: buffer of 16 bytes") == 0);
    tg_status_free(st);
}

static void oom_status_is_static_and_survives_free_and_wrap(void) {
    tg_status_fail_alloc(true);
    tg_status st = tg_status_new(TG_ERR_IO, "reading %s", "x");
    tg_status other = tg_status_new(TG_ERR_FORMAT, "bad header");
    tg_status_fail_alloc(false);
    CHECK(st != NULL);
    CHECK(st == other); /* the one static record */
    CHECK(tg_status_code(st) == TG_ERR_NO_MEMORY);
    CHECK(strstr(tg_status_message(st), "out of memory") != NULL);
    CHECK(tg_status_wrap(st, "prefix") == st);
    CHECK(strncmp(tg_status_message(st), "prefix", 6) != 0);
    tg_status_free(st);
    tg_status_free(other); /* freeing the static record twice is harmless */
    CHECK(tg_status_code(st) == TG_ERR_NO_MEMORY);
    /* Back to normal once the hook is off. */
    tg_status fresh = tg_status_new(TG_ERR_IO, "fresh");
    CHECK(fresh != st);
    CHECK(strcmp(tg_status_message(fresh), "fresh") == 0);
    tg_status_free(fresh);
}

TEST_MAIN(T(new_carries_code_and_formatted_message), T(ok_code_and_null_mean_success),
          T(wrap_chains_prefixes_outermost_first), T(wrap_of_null_is_null),
          T(every_code_has_a_distinct_name), T(long_messages_are_kept_whole),
          T(injected_failures_leave_status_messages_intact),
          T(oom_status_is_static_and_survives_free_and_wrap))
