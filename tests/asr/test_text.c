/*
 * test_text.c: spec 5.4's rejoin of chunk texts against what
 * CohereAsrProcessor._reassemble_chunk_texts gives (Python's str.strip(),
 * which strips Unicode whitespace such as NBSP and U+3000, and drops chunks
 * that strip to nothing), and the strip itself on edge cases.
 */
#include <string.h>

#include "base.h"
#include "check.h"
#include "text.h"

/* Joins copies of in[0..n) with sep and checks the result. */
static void check_join(const char *const *in, int n, const char *sep, const char *want) {
    char *texts[8];
    for (int i = 0; i < n; i++) texts[i] = tg_strdup(in[i]);
    char *out = NULL;
    CHECK_OK(ct_text_join(texts, n, sep, &out));
    CHECK_MSG(out && !strcmp(out, want), "got '%s', want '%s'", out ? out : "(null)", want);
    tg_free(out);
    for (int i = 0; i < n; i++) tg_free(texts[i]);
}

static void join_follows_python_strip(void) {
    /* ASCII: the first chunk keeps nothing at its ends either (see text.h) */
    const char *a[3] = {"Hello there. ", "  ", " How are you?\n"};
    check_join(a, 3, " ", "Hello there. How are you?");
    /* empty chunks are dropped, not joined as double separators */
    const char *b[4] = {"", "one", "", "two"};
    check_join(b, 4, " ", "one two");
    /* ja/zh join with "" */
    const char *c[2] = {"\xE4\xBB\x8A\xE6\x97\xA5\xE3\x81\xAF", " \xE6\x99\xB4\xE3\x82\x8C"};
    check_join(c, 2, "", "\xE4\xBB\x8A\xE6\x97\xA5\xE3\x81\xAF\xE6\x99\xB4\xE3\x82\x8C");
    /* U+3000 and NBSP are whitespace to str.strip(); a chunk of only them is
     * empty: "今日は\u3000" + "\u3000" + "\xa0晴れ" -> "今日は晴れ" */
    const char *d[3] = {"\xE4\xBB\x8A\xE6\x97\xA5\xE3\x81\xAF\xE3\x80\x80", "\xE3\x80\x80",
                        "\xC2\xA0\xE6\x99\xB4\xE3\x82\x8C"};
    check_join(d, 3, "", "\xE4\xBB\x8A\xE6\x97\xA5\xE3\x81\xAF\xE6\x99\xB4\xE3\x82\x8C");
    /* U+2009 (thin space), U+0085 (NEL), U+001F (unit separator) likewise */
    const char *e[3] = {"a\xE2\x80\x89", "\xC2\x85", "\037b"};
    check_join(e, 3, " ", "a b");
    /* nothing at all */
    const char *f[2] = {" ", "\xE3\x80\x80"};
    check_join(f, 2, " ", "");
    check_join(NULL, 0, " ", "");
}

static void strip_keeps_inner_and_non_space(void) {
    char s1[] = "\xE3\x80\x80 a\xE3\x80\x80" "b \xC2\xA0";
    CHECK(!strcmp(ct_text_strip(s1), "a\xE3\x80\x80" "b"));
    /* U+200B (zero width space) and U+FEFF are not str.isspace() */
    char s2[] = "\xE2\x80\x8B" "x\xEF\xBB\xBF";
    CHECK(!strcmp(ct_text_strip(s2), "\xE2\x80\x8B" "x\xEF\xBB\xBF"));
    /* a character ending in a byte that looks like part of a space is kept:
     * U+4E00 is E4 B8 80, and 80 alone or B8 80 is no space */
    char s3[] = "\xE4\xB8\x80";
    CHECK(!strcmp(ct_text_strip(s3), "\xE4\xB8\x80"));
    /* a truncated sequence at the end is not a space */
    char s4[] = "x\xE3\x80";
    CHECK(!strcmp(ct_text_strip(s4), "x\xE3\x80"));
    char s5[] = "";
    CHECK(!strcmp(ct_text_strip(s5), ""));
    CHECK(ct_text_space_at("\xE3\x80\x80", 3) == 3 && ct_text_space_at("\xE3\x80\x80", 2) == 0);
    CHECK(ct_text_space_at("\xC2\xA0", 2) == 2 && ct_text_space_at("\xC2\xA1", 2) == 0);
    CHECK(ct_text_space_at("\xC0\xA0", 2) == 0); /* overlong U+0020 */
    CHECK(ct_text_space_at("\t", 1) == 1 && ct_text_space_at("x", 1) == 0);
}

TEST_MAIN(T(join_follows_python_strip), T(strip_keeps_inner_and_non_space))
