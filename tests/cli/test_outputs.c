/*
 * test_outputs.c: what cohere-transcribe writes, run as a subprocess on
 * the tiny model: a folder tree (an unsupported file in it is ignored,
 * the structure is kept under --output-dir); every output format against
 * its grammar (SRT and WebVTT parse back to the same cues, JSON validates
 * against schema/transcript.schema.json, txt has one line per spoken
 * segment); every --existing policy, including a set left incomplete;
 * silence gives empty transcripts; corrupt, truncated and non-audio files
 * fail alone, named; a device fault fails one file (or none) and the run
 * goes on; the audio memory ceiling; formats other than WAV
 * when the build has FFmpeg (skipped otherwise).
 */
#include <math.h>

#include "cli_harness.h"

#define A_WAV TINY "/audio/a.wav"
#define B_WAV TINY "/audio/b.wav"
#define LONG_WAV TINY "/audio/long.wav"

typedef struct cue {
    long start_ms, end_ms;
    char text[4096];
} cue;

/* SRT: "N\nHH:MM:SS,mmm --> HH:MM:SS,mmm\ntext\n\n"...; -1 on bad grammar. */
static int parse_srt(const char *s, cue *out, int cap) {
    int n = 0;
    while (*s) {
        int idx, h1, m1, s1, ms1, h2, m2, s2, ms2, used = 0;
        if (sscanf(s, "%d\n%2d:%2d:%2d,%3d --> %2d:%2d:%2d,%3d\n%n", &idx, &h1, &m1, &s1, &ms1, &h2,
                   &m2, &s2, &ms2, &used) != 9 || !used || idx != n + 1 || n == cap)
            return -1;
        s += used;
        const char *end = strstr(s, "\n\n");
        if (!end || end == s) return -1;
        out[n].start_ms = ((h1 * 60L + m1) * 60 + s1) * 1000 + ms1;
        out[n].end_ms = ((h2 * 60L + m2) * 60 + s2) * 1000 + ms2;
        snprintf(out[n].text, sizeof out[n].text, "%.*s", (int)(end - s), s);
        if (strchr(out[n].text, '\n')) return -1;
        n++;
        s = end + 2;
    }
    return n;
}

static long vtt_time(const char **p) {
    int a, b, c, ms, used = 0;
    if (sscanf(*p, "%d:%2d:%2d.%3d%n", &a, &b, &c, &ms, &used) == 4 && used) {
        *p += used;
        return ((a * 60L + b) * 60 + c) * 1000 + ms;
    }
    used = 0;
    if (sscanf(*p, "%2d:%2d.%3d%n", &b, &c, &ms, &used) == 3 && used == 9) {
        *p += used;
        return (b * 60L + c) * 1000 + ms;
    }
    return -1;
}

static void unescape_vtt(char *t) {
    static const char *from[3] = {"&amp;", "&lt;", "&gt;"}, to[3] = {'&', '<', '>'};
    for (char *p = t; *p; p++)
        for (int k = 0; k < 3; k++)
            if (!strncmp(p, from[k], strlen(from[k]))) {
                *p = to[k];
                memmove(p + 1, p + strlen(from[k]), strlen(p + strlen(from[k])) + 1);
            }
}

static int parse_vtt(const char *s, cue *out, int cap) {
    if (strncmp(s, "WEBVTT\n\n", 8)) return -1;
    s += 8;
    int n = 0;
    while (*s) {
        if (n == cap) return -1;
        long a = vtt_time(&s);
        if (a < 0 || strncmp(s, " --> ", 5)) return -1;
        s += 5;
        long b = vtt_time(&s);
        if (b < 0 || *s++ != '\n') return -1;
        const char *end = strstr(s, "\n\n");
        if (!end || end == s) return -1;
        out[n].start_ms = a;
        out[n].end_ms = b;
        snprintf(out[n].text, sizeof out[n].text, "%.*s", (int)(end - s), s);
        if (strchr(out[n].text, '<') || strchr(out[n].text, '\n')) return -1;
        unescape_vtt(out[n].text);
        n++;
        s = end + 2;
    }
    return n;
}

static cue cues_a[4096], cues_b[4096];

/* Checks one source's four files against each other and their grammars. */
static void check_set(const char *dir, const char *stem) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s.json", dir, stem);
    CHECK_MSG(h_validate_file(p), "%s", p);
    char *json = h_read(p);
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    double dur = j ? cJSON_GetObjectItem(cJSON_GetObjectItem(j, "source"), "duration_s")->valuedouble : 0;
    int spoken = 0;
    const cJSON *sg;
    cJSON_ArrayForEach(sg, cJSON_GetObjectItem(j, "segments")) {
        const char *t = cJSON_GetObjectItem(sg, "text")->valuestring;
        spoken += t[strspn(t, " ")] != 0;
        CHECK(cJSON_GetObjectItem(sg, "end")->valuedouble <= dur + 1e-9);
    }
    snprintf(p, sizeof p, "%s/%s.srt", dir, stem);
    char *srt = h_read(p);
    snprintf(p, sizeof p, "%s/%s.vtt", dir, stem);
    char *vtt = h_read(p);
    snprintf(p, sizeof p, "%s/%s.txt", dir, stem);
    char *txt = h_read(p);
    CHECK(srt && vtt && txt);
    if (srt && vtt && txt) {
        int na = parse_srt(srt, cues_a, 4096), nb = parse_vtt(vtt, cues_b, 4096);
        CHECK_MSG(na >= 0 && na == nb, "%s: srt %d cues, vtt %d", stem, na, nb);
        for (int i = 0; i < na && na == nb; i++) {
            CHECK(cues_a[i].start_ms == cues_b[i].start_ms && cues_a[i].end_ms == cues_b[i].end_ms);
            CHECK(!strcmp(cues_a[i].text, cues_b[i].text));
            CHECK(cues_a[i].end_ms - cues_a[i].start_ms >= 300 || dur < 0.3);
            CHECK(cues_a[i].end_ms <= (long)llround(dur * 1000));
            if (i) CHECK(cues_a[i].start_ms >= cues_a[i - 1].end_ms);
        }
        int lines = 0;
        for (const char *q = txt; *q; q++) lines += *q == '\n';
        CHECK_MSG(lines == spoken, "%s: %d txt lines, %d spoken segments", stem, lines, spoken);
    }
    cJSON_Delete(j);
    free(json);
    free(srt);
    free(vtt);
    free(txt);
}

static void folder_tree_all_formats(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    h_mkdirs(h_path("in/deep/er"));
    h_copy(A_WAV, h_path("in/a.wav"));
    h_copy(LONG_WAV, h_path("in/deep/Long.WAV"));
    h_copy(B_WAV, h_path("in/deep/er/b.wave"));
    h_write(h_path("in/notes.txt"), "not audio\n", 10);
    h_write(h_path("in/deep/cover.png"), "\x89PNG", 4);
    CHECK(h_run("--model", MODEL, "--formats", "txt", "srt", "vtt", "json", "--output-dir",
                h_path("out"), "--quiet", h_path("in"), NULL) == 0);
    CHECK(h_exists(h_path("out/a.json")) && h_exists(h_path("out/deep/Long.srt")) &&
          h_exists(h_path("out/deep/er/b.vtt")));
    CHECK(!h_exists(h_path("out/notes.txt")) && !h_exists(h_path("out/deep/cover.txt")));
    CHECK(h_count_files(".ct-tmp") == 0);
    check_set(h_path("out"), "a");
    check_set(h_path("out/deep"), "Long");
    check_set(h_path("out/deep/er"), "b");
    /* --no-recursive sees only the top level */
    CHECK(h_run("--model", MODEL, "--text-only", "--no-recursive", h_path("in"), NULL) == 0);
    CHECK(strstr(h_out, "a.wav") == NULL || !strstr(h_out, "Long"));
    h_rmtree();
}

/* Tokens of each segment in a transcript's JSON: n[i] for i < *out_n. */
static void segment_tokens(const char *path, int *n, int cap, int *out_n) {
    char *t = h_read(path);
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    const cJSON *segs = cJSON_GetObjectItem(j, "segments"), *seg;
    *out_n = 0;
    cJSON_ArrayForEach(seg, segs) {
        if (*out_n < cap) n[(*out_n)++] = cJSON_GetArraySize(cJSON_GetObjectItem(seg, "tokens"));
    }
    cJSON_Delete(j);
    free(t);
}

/* A segment that stops at --max-new-tokens without end-of-text is decoded
 * again alone with --max-retry-tokens, and the retry's longer result is
 * kept; with --max-retry-tokens 0 the first result stands. (The tiny model
 * never ends a segment within a few tokens, so every segment hits the limit.) */
static void a_segment_at_the_limit_is_retried(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    int n[64], k = 0;
    CHECK(h_run("--model", MODEL, "--formats", "json", "--output-dir", h_path("first"), "--max-new-tokens", "3",
                "--max-retry-tokens", "0", "--quiet", A_WAV, NULL) == 0);
    segment_tokens(h_path("first/a.json"), n, 64, &k);
    CHECK(k >= 1);
    for (int i = 0; i < k; i++) CHECK_MSG(n[i] == 3, "no retry: segment %d has %d tokens", i, n[i]);
    CHECK(h_run("--model", MODEL, "--formats", "json", "--output-dir", h_path("retried"), "--max-new-tokens",
                "3", "--max-retry-tokens", "7", "--verbose", A_WAV, NULL) == 0);
    int m[64], km = 0;
    segment_tokens(h_path("retried/a.json"), m, 64, &km);
    CHECK(km == k);
    for (int i = 0; i < km; i++) CHECK_MSG(m[i] > 3 && m[i] <= 7, "retried: segment %d has %d tokens", i, m[i]);
    CHECK(h_err_has("retried with --max-retry-tokens"));
    h_rmtree();
}

static int skipped_in_profile(void) {
    char *t = h_read(h_path("prof.json"));
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    cJSON *k = cJSON_GetObjectItem(j, "files_skipped");
    int n = cJSON_IsNumber(k) ? k->valueint : -1;
    cJSON_Delete(j);
    free(t);
    return n;
}

static void every_existing_policy(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    h_mkdirs(h_path("in"));
    h_copy(A_WAV, h_path("in/a.wav"));
    h_copy(B_WAV, h_path("in/b.wav"));
    char prof[700];
    snprintf(prof, sizeof prof, "%s", h_path("prof.json"));
    CHECK(h_run("--model", MODEL, "-q", h_path("in"), NULL) == 0);
    CHECK(h_exists(h_path("in/a.txt")) && h_exists(h_path("in/.b.ct-manifest")));
    /* error (the default): nothing is touched, each input fails */
    CHECK(h_run("--model", MODEL, "-q", h_path("in"), NULL) == 1 && h_err_has("exists"));
    /* skip: both sets are complete */
    CHECK(h_run("--model", MODEL, "-q", "--existing", "skip", "--profile-json", prof, h_path("in"),
                NULL) == 0);
    CHECK(skipped_in_profile() == 2);
    /* a set without its manifest (an interrupted run) is redone */
    CHECK(unlink(h_path("in/.a.ct-manifest")) == 0);
    CHECK(h_run("--model", MODEL, "-q", "--existing", "skip", "--profile-json", prof, h_path("in"),
                NULL) == 0);
    CHECK(skipped_in_profile() == 1 && h_exists(h_path("in/.a.ct-manifest")));
    /* a set missing a format now asked for is redone */
    CHECK(h_run("--model", MODEL, "-q", "--existing", "skip", "--formats", "txt", "json",
                "--profile-json", prof, h_path("in"), NULL) == 0);
    CHECK(skipped_in_profile() == 0 && h_exists(h_path("in/b.json")));
    /* overwrite */
    h_write(h_path("in/a.txt"), "old\n", 4);
    CHECK(h_run("--model", MODEL, "-q", "--existing", "overwrite", h_path("in/a.wav"), NULL) == 0);
    char *t = h_read(h_path("in/a.txt"));
    CHECK(t && strcmp(t, "old\n"));
    free(t);
    /* an output that would replace an input is refused even with overwrite */
    h_copy(B_WAV, h_path("in/c.txt"));
    CHECK(h_run("--model", MODEL, "-q", "--existing", "overwrite", "--formats", "txt",
                h_path("in/c.txt"), NULL) == 1 && h_err_has("input"));
    h_rmtree();
}

static double zero(size_t i) {
    (void)i;
    return 0;
}

static void silence_gives_empty_transcripts(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    h_write_wav(h_path("quiet.wav"), 4 * 16000, zero);
    CHECK(h_run("--model", MODEL, "-q", "--formats", "txt", "srt", "vtt", "json",
                h_path("quiet.wav"), NULL) == 0);
    char *t = h_read(h_path("quiet.txt")), *v = h_read(h_path("quiet.vtt")),
         *s = h_read(h_path("quiet.srt"));
    CHECK(t && !strcmp(t, "") && s && !strcmp(s, "") && v && !strcmp(v, "WEBVTT\n\n"));
    CHECK(h_validate_file(h_path("quiet.json")));
    free(t);
    free(v);
    free(s);
    CHECK(h_run("--model", MODEL, "--text-only", h_path("quiet.wav"), NULL) == 0 &&
          !strcmp(h_out, "\n"));
    h_rmtree();
}

static void bad_files_fail_alone(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    h_mkdirs(h_path("in"));
    h_copy(B_WAV, h_path("in/good.wav"));
    char *a = h_read(A_WAV);
    h_write(h_path("in/truncated.wav"), a, 30);
    char junk[2000];
    memcpy(junk, a, 12);
    for (int i = 12; i < 2000; i++) junk[i] = (char)(i * 37);
    h_write(h_path("in/corrupt.wav"), junk, sizeof junk);
    free(a);
    h_write(h_path("in/text.mp3"), "this is no audio\n", 17);
    CHECK(h_run("--model", MODEL, h_path("in"), NULL) == 1);
    CHECK(h_err_has("truncated.wav") && h_err_has("corrupt.wav") && h_err_has("text.mp3"));
    CHECK(h_exists(h_path("in/good.txt")) && h_exists(h_path("in/.good.ct-manifest")));
    CHECK(!h_exists(h_path("in/truncated.txt")) && !h_exists(h_path("in/corrupt.txt")) &&
          !h_exists(h_path("in/text.txt")));
    CHECK(h_count_files(".ct-tmp") == 0);
    h_rmtree();
}

/* A device fault in the middle of a run (the CLI's test hook,
 * CT_TEST_COMPUTE_FAULT): a fault that strikes twice fails the batch and
 * then its clip run alone, so that file fails, named with the backend's
 * text, and the next file is transcribed on the session's new backends; a
 * fault that strikes once costs nothing (the clip alone succeeds). */
static void a_device_fault_fails_one_file_and_the_run_goes_on(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    h_mkdirs(h_path("in"));
    h_copy(A_WAV, h_path("in/a.wav"));
    h_copy(B_WAV, h_path("in/b.wav"));
    setenv("CT_TEST_COMPUTE_FAULT", "0:2", 1);
    int rc = h_run("--model", MODEL, "--batch-size", "1", "--profile-json", h_path("prof.json"),
                   h_path("in"), NULL);
    CHECK(rc == 1);
    char *prof = h_read(h_path("prof.json"));
    cJSON *j = prof ? cJSON_Parse(prof) : NULL;
    const cJSON *restarts = cJSON_GetObjectItem(j, "backend_restarts");
    CHECK_MSG(cJSON_IsNumber(restarts) && restarts->valuedouble == 2, "profile: %s",
              prof ? prof : "(none)");
    cJSON_Delete(j);
    free(prof);
    bool a_ok = h_exists(h_path("in/a.txt")), b_ok = h_exists(h_path("in/b.txt"));
    CHECK_MSG(a_ok != b_ok, "one file should fail and the other succeed (a %d, b %d)", a_ok, b_ok);
    CHECK(h_err_has(a_ok ? "b.wav" : "a.wav") && h_err_has("injected by tg_backend_fail_after"));
    CHECK(h_count_files(".ct-tmp") == 0);
    setenv("CT_TEST_COMPUTE_FAULT", "0:1", 1);
    rc = h_run("--model", MODEL, "--batch-size", "1", "--existing", "overwrite", h_path("in"),
               NULL);
    unsetenv("CT_TEST_COMPUTE_FAULT");
    CHECK_MSG(rc == 0, "exit %d: %s", rc, h_err);
    CHECK(h_exists(h_path("in/a.txt")) && h_exists(h_path("in/b.txt")));
    h_rmtree();
}

static void the_memory_ceiling_holds(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    /* long.wav: 71 s, 4.5 MB as floats; the ceiling is 1 MB */
    CHECK(h_run("--model", MODEL, "--text-only", "--audio-memory-gb", "0.001", LONG_WAV, B_WAV,
                NULL) == 1);
    CHECK(h_err_has("long.wav"));
    CHECK(strstr(h_out, "b.wav") != NULL); /* the other input went on */
    h_rmtree();
}

/* Other formats, made with the ffmpeg program, when the build decodes them. */
static void other_formats_when_ffmpeg_is_built_in(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    h_run("--version", NULL);
    if (strstr(h_out, "ffmpeg: none") || system("ffmpeg -version >/dev/null 2>&1") != 0) {
        printf("  (no FFmpeg in this build or no ffmpeg program; skipped)\n");
        h_rmtree();
        return;
    }
    static const char *ext[] = {"mp3", "flac", "ogg", "opus", "m4a", NULL};
    h_mkdirs(h_path("in"));
    for (int i = 0; ext[i]; i++) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "ffmpeg -loglevel error -y -i %s '%s'", A_WAV,
                 h_path("in/a_%s.%s", ext[i], ext[i]));
        CHECK(system(cmd) == 0);
    }
    CHECK(h_run("--model", MODEL, "-q", "--formats", "json", h_path("in"), NULL) == 0);
    for (int i = 0; ext[i]; i++) CHECK(h_validate_file(h_path("in/a_%s.json", ext[i])));
    h_rmtree();
}

TEST_MAIN(T(folder_tree_all_formats), T(every_existing_policy), T(silence_gives_empty_transcripts),
          T(bad_files_fail_alone), T(a_device_fault_fails_one_file_and_the_run_goes_on),
          T(the_memory_ceiling_holds),
          T(other_formats_when_ffmpeg_is_built_in), T(a_segment_at_the_limit_is_retried))
