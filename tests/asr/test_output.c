/*
 * test_output.c: the output writers of cohere_transcribe.h ("outputs"):
 * cue splitting by the character, duration, gap and sentence rules, the
 * 0.3 s floor and the media end; SRT and WebVTT time formats (VTT hours
 * only when needed) and escaping; control characters never reach a
 * line-oriented output (issue 12 item 11); an output set appears whole
 * or not at all, and a FIFO in the way is refused; the repetition-loop
 * test on synthetic token streams.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "cohere_transcribe.h"

static ct_cue_opts defaults(void) {
    ct_cue_opts o;
    ct_cue_opts_init(&o);
    return o;
}

static void cues_respect_chars_duration_and_sentences(void) {
    /* 10 s, 100 characters: the char limit and the sentence end cut it */
    const char *text = "One two three four five. Six seven eight nine ten eleven twelve thirteen "
                       "fourteen fifteen sixteen";
    ct_segment sg = {0.0, 10.0, text, NULL, 0};
    ct_cue_opts o = defaults();
    o.max_chars = 40;
    o.max_dur_s = 100;
    ct_cue *c = NULL;
    int n = 0;
    CHECK_OK(ct_cues_make(&sg, 1, 10.0, &o, &c, &n));
    CHECK(n >= 3);
    if (n >= 1) CHECK_MSG(!strcmp(c[0].text, "One two three four five."), "'%s'", c[0].text);
    for (int i = 0; i < n; i++) {
        CHECK(strlen(c[i].text) <= 40);
        CHECK(c[i].end_s - c[i].start_s >= 0.3 - 1e-9);
        CHECK(c[i].end_s <= 10.0);
        if (i) CHECK(c[i].start_s >= c[i - 1].end_s - 1e-9);
    }
    if (n) CHECK_NEAR(c[n - 1].end_s, 10.0, 1e-9);
    ct_cues_free(c, n);
    /* the duration limit */
    o = defaults();
    o.max_dur_s = 2.0;
    CHECK_OK(ct_cues_make(&sg, 1, 10.0, &o, &c, &n));
    for (int i = 0; i < n; i++) CHECK(c[i].end_s - c[i].start_s <= 2.0 + 1e-9);
    CHECK(n >= 5);
    ct_cues_free(c, n);
}

static void cues_split_at_gaps_and_join_close_segments(void) {
    ct_segment sg[3] = {{0.0, 1.0, "Hi", NULL, 0}, {1.2, 2.0, "there", NULL, 0},
                        {5.0, 6.0, "later", NULL, 0}};
    ct_cue_opts o = defaults();
    ct_cue *c = NULL;
    int n = 0;
    CHECK_OK(ct_cues_make(sg, 3, 6.0, &o, &c, &n));
    CHECK(n == 2);
    if (n == 2) {
        CHECK(!strcmp(c[0].text, "Hi there"));
        CHECK(!strcmp(c[1].text, "later"));
        CHECK_NEAR(c[1].start_s, 5.0, 1e-9);
    }
    ct_cues_free(c, n);
}

static void cues_never_short_nor_past_the_end(void) {
    /* a 0.1 s word, and a segment that claims to run past the media */
    ct_segment sg[2] = {{1.0, 1.1, "Yes.", NULL, 0}, {3.0, 9.0, "Tail words.", NULL, 0}};
    ct_cue_opts o = defaults();
    ct_cue *c = NULL;
    int n = 0;
    CHECK_OK(ct_cues_make(sg, 2, 4.0, &o, &c, &n));
    CHECK(n == 2);
    if (n == 2) {
        CHECK_NEAR(c[0].end_s - c[0].start_s, 0.3, 1e-9);
        CHECK(c[1].end_s <= 4.0);
    }
    ct_cues_free(c, n);
    /* silence: nothing */
    ct_segment empty = {0, 4, "  ", NULL, 0};
    CHECK_OK(ct_cues_make(&empty, 1, 4.0, &o, &c, &n));
    CHECK(n == 0);
    ct_cues_free(c, n);
}

static ct_transcript sample(const ct_segment *sg, int n, double dur) {
    ct_transcript t = {.source = "a.wav", .duration_s = dur, .segments = sg, .n_segments = n,
                       .language = "en", .model_path = "m", .model_config_hash = "00",
                       .dtype = "fp32", .backend = "cpu"};
    return t;
}

static void srt_and_vtt_time_formats(void) {
    ct_segment sg[2] = {{61.5, 63.25, "a & b <c>", NULL, 0}, {3725.0, 3727.0, "late", NULL, 0}};
    ct_transcript t = sample(sg, 2, 4000);
    char *s = NULL;
    CHECK_OK(ct_render(CT_FORMAT_SRT, &t, NULL, &s, NULL));
    CHECK_MSG(s && !strcmp(s, "1\n00:01:01,500 --> 00:01:03,250\na & b <c>\n\n"
                              "2\n01:02:05,000 --> 01:02:07,000\nlate\n\n"), "%s", s);
    ct_free(s);
    CHECK_OK(ct_render(CT_FORMAT_VTT, &t, NULL, &s, NULL));
    CHECK_MSG(s && !strcmp(s, "WEBVTT\n\n01:01.500 --> 01:03.250\na &amp; b &lt;c&gt;\n\n"
                              "01:02:05.000 --> 01:02:07.000\nlate\n\n"), "%s", s);
    ct_free(s);
}

static void control_characters_never_reach_lines(void) {
    /* a byte-fallback newline and an escape sequence inside a segment */
    ct_segment sg[1] = {{0, 2, "one\ntwo \x1b[31mred\x7f", NULL, 0}};
    ct_transcript t = sample(sg, 1, 2);
    for (int f = CT_FORMAT_TXT; f <= CT_FORMAT_VTT; f++) {
        char *s = NULL;
        CHECK_OK(ct_render((ct_format)f, &t, NULL, &s, NULL));
        CHECK(s && !strchr(s, 0x1b) && !strchr(s, 0x7f));
        if (f == CT_FORMAT_TXT) CHECK_MSG(s && !strcmp(s, "one two \\x1b[31mred\\x7f\n"), "%s", s);
        ct_free(s);
    }
    char *e = ct_escape_line("a\nb\x1b\xc2\x85\xff", false);
    CHECK_MSG(e && !strcmp(e, "a\\x0ab\\x1b\\u0085\\xff"), "%s", e ? e : "(null)");
    ct_free(e);
}

static void txt_has_one_line_per_spoken_segment(void) {
    ct_segment sg[3] = {{0, 1, " one ", NULL, 0}, {1, 2, "", NULL, 0}, {2, 3, "two", NULL, 0}};
    ct_transcript t = sample(sg, 3, 3);
    char *s = NULL;
    CHECK_OK(ct_render(CT_FORMAT_TXT, &t, NULL, &s, NULL));
    CHECK(s && !strcmp(s, "one\ntwo\n"));
    ct_free(s);
    t.n_segments = 0;
    CHECK_OK(ct_render(CT_FORMAT_TXT, &t, NULL, &s, NULL));
    CHECK(s && !strcmp(s, ""));
    ct_free(s);
    t.options_json = "[1]";
    CHECK_ERR(ct_render(CT_FORMAT_JSON, &t, NULL, &s, NULL), TG_ERR_INVALID_ARG, "options");
}

static void make_tmpdir(char *dir, size_t n) {
    snprintf(dir, n, "/tmp/ct-test-output-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
}

static int count_entries(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int k = -1;
    if (p && fscanf(p, "%d", &k) != 1) k = -1;
    if (p) pclose(p);
    return k;
}

static void output_set_appears_whole_or_not_at_all(void) {
    char dir[64];
    make_tmpdir(dir, sizeof dir);
    const char *exts[2] = {"txt", "srt"};
    ct_output_set *s = NULL;
    CHECK_OK(ct_output_set_begin(dir, "a", &s));
    CHECK_OK(ct_output_set_add(s, "txt", "hello\n", 6));
    /* before commit: only temporary (hidden) files, no set */
    char p[256];
    snprintf(p, sizeof p, "%s/a.txt", dir);
    CHECK(access(p, F_OK) != 0);
    CHECK(!ct_output_set_complete(dir, "a", exts, 1));
    ct_output_set_abandon(s);
    ct_output_set_free(s);
    CHECK(count_entries(dir) == 0);

    CHECK_OK(ct_output_set_begin(dir, "a", &s));
    CHECK_OK(ct_output_set_add(s, "txt", "hello\n", 6));
    CHECK_OK(ct_output_set_add(s, "srt", "", 0));
    CHECK_OK(ct_output_set_commit(s));
    ct_output_set_free(s);
    CHECK(count_entries(dir) == 3); /* a.txt a.srt .a.ct-manifest */
    CHECK(ct_output_set_complete(dir, "a", exts, 2));
    /* json was not asked for when the set was made: not complete for it */
    const char *more[3] = {"txt", "srt", "json"};
    CHECK(!ct_output_set_complete(dir, "a", more, 3));
    /* a file changed since: incomplete */
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("HELLO\n", f);
        fclose(f);
    }
    CHECK(!ct_output_set_complete(dir, "a", exts, 2));
    /* a FIFO where an output goes is refused, not replaced */
    snprintf(p, sizeof p, "%s/b.txt", dir);
    CHECK(mkfifo(p, 0644) == 0);
    CHECK_OK(ct_output_set_begin(dir, "b", &s));
    CHECK_ERR(ct_output_set_add(s, "txt", "x", 1), TG_ERR_IO, "FIFO");
    ct_output_set_free(s);
    struct stat sb;
    CHECK(lstat(p, &sb) == 0 && S_ISFIFO(sb.st_mode));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

static void repetition_block_found_only_after_96_tokens(void) {
    int32_t t[300];
    for (int i = 0; i < 200; i++) t[i] = 1000 + i; /* no repeats */
    CHECK(ct_repetition_block(t, 200) == 0);
    /* a 10-token block four times at the end of 100 tokens */
    for (int i = 60; i < 100; i++) t[i] = 7 + (i - 60) % 10;
    CHECK(ct_repetition_block(t, 100) == 10);
    CHECK(ct_repetition_block(t, 99) == 0);   /* the fourth copy is not complete */
    CHECK(ct_repetition_block(t, 90) == 0);   /* too early (< 96 tokens) */
    /* three copies only */
    for (int i = 0; i < 200; i++) t[i] = 1000 + i;
    for (int i = 70; i < 100; i++) t[i] = 7 + (i - 70) % 10;
    CHECK(ct_repetition_block(t, 100) == 0);
    /* a block of 7 is below the range; of 32 inside it; of 33 above it */
    for (int L = 7; L <= 33; L += 13) {
        int n = 4 * L + 100;
        for (int i = 0; i < 200; i++) t[i] = 1000 + i;
        for (int i = n - 4 * L; i < n; i++) t[i] = 5 + (i - (n - 4 * L)) % L;
        int got = ct_repetition_block(t, n);
        if (L == 7) CHECK(got == 14 || got == 0); /* 7-periodic is also 14-periodic */
        else if (L <= 32) CHECK(got == L);
        else CHECK(got == 0);
    }
}

TEST_MAIN(T(cues_respect_chars_duration_and_sentences), T(cues_split_at_gaps_and_join_close_segments),
          T(cues_never_short_nor_past_the_end), T(srt_and_vtt_time_formats),
          T(control_characters_never_reach_lines), T(txt_has_one_line_per_spoken_segment),
          T(output_set_appears_whole_or_not_at_all), T(repetition_block_found_only_after_96_tokens))
