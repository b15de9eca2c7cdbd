/*
 * test_demo.c: the bundled demo model (models/cohere-demo-en, trained by
 * tools/train-demo) transcribes real, if synthetic, speech: 20 held-out
 * clips (tests/data/demo: sentences and voices it never trained on, FLAC)
 * through the public API on the CPU, scored by word error rate against the
 * sentences they were made from, once with greedy decoding and once with
 * beam search of 4 (ct_options.beam_size). The test fails when a WER is
 * above DEMO_MAX_WER, or when fewer than DEMO_MIN_SAME of the 20 transcripts
 * equal transformers' (fp32, CPU: greedy in the third column of clips.tsv,
 * num_beams=4 in the fourth, written by tools/train-demo/eval.py on the same
 * files); it prints every clip that is not exact. The beam run is also the
 * test of beam search's end-of-text path on a trained model, which the tiny
 * fixture's random weights never reach (tests/model/test_beam.c).
 *
 * This is the check that random weights cannot give: the fixtures compare
 * numbers with transformers, this compares words with speech. The WER here
 * is eval.py's: Levenshtein distance over whitespace-separated words,
 * summed over clips, divided by the reference words; "normalised" lowers
 * the case and drops punctuation first (apostrophes stay).
 *
 * Not here: the 200-clip measurement (tools/train-demo/eval.py) and parity
 * with transformers (the fixtures). Without FFmpeg (no FLAC reader) the
 * test says it is skipped.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cohere_transcribe.h"
#include "ct_audio.h"

#define DEMO_MODEL TEST_DATA_DIR "/../../models/cohere-demo-en"
#define DEMO_DATA TEST_DATA_DIR "/demo"
/* The bar for these 20 clips: issue 11's 10%. The model measures 3.70% on
 * them greedily (6 word errors in 162; 3.17% on all 200, models/cohere-
 * demo-en/README.md), 2.47% with 4 beams (3.03% on all 200); the models
 * before it measured 9.26% and 6.79% here (twenty clips are few). The
 * engine is deterministic on the CPU and must agree with transformers
 * (DEMO_MIN_SAME), so the margin is not a flake's; a broken engine, export
 * or tokenizer (~100%) or the earliest, less trained model (45.7% here)
 * fails. */
#define DEMO_MAX_WER 10.0
/* Transcripts that must equal transformers' to the letter: the same weights
 * in f32 on both sides; one may differ by a near-tie in the argmax. */
#define DEMO_MIN_SAME 19
#define MAX_WORDS 64

/* Splits s (modified) into at most MAX_WORDS words; returns the count. */
static int split_words(char *s, char **w) {
    int n = 0;
    for (char *t = strtok(s, " \t\r\n"); t && n < MAX_WORDS; t = strtok(NULL, " \t\r\n")) w[n++] = t;
    return n;
}

/* Lower case, punctuation removed except apostrophes (common.normalise). */
static void normalise(char *s) {
    char *o = s;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (isalnum(c) || isspace(c) || c == '\'' || c >= 0x80) *o++ = (char)tolower(c);
    }
    *o = 0;
}

/* Word-level Levenshtein distance between ref and hyp; *n_ref gets the
 * reference's word count. */
static int word_errors(const char *ref, const char *hyp, bool norm, int *n_ref) {
    char rb[1024], hb[1024];
    snprintf(rb, sizeof rb, "%s", ref);
    snprintf(hb, sizeof hb, "%s", hyp);
    if (norm) {
        normalise(rb);
        normalise(hb);
    }
    char *r[MAX_WORDS], *h[MAX_WORDS];
    int nr = split_words(rb, r), nh = split_words(hb, h);
    int prev[MAX_WORDS + 1], cur[MAX_WORDS + 1];
    for (int j = 0; j <= nh; j++) prev[j] = j;
    for (int i = 1; i <= nr; i++) {
        cur[0] = i;
        for (int j = 1; j <= nh; j++) {
            int sub = prev[j - 1] + (strcmp(r[i - 1], h[j - 1]) != 0);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(nh + 1));
    }
    *n_ref = nr;
    return prev[nh];
}

static void word_error_rate_counts_words(void) {
    int n = 0;
    CHECK(word_errors("a b c d", "a b c d", false, &n) == 0 && n == 4);
    CHECK(word_errors("a b c d", "a x c", false, &n) == 2 && n == 4);
    CHECK(word_errors("a b", "a b c d", false, &n) == 2 && n == 2);
    CHECK(word_errors("Hello, world.", "hello world", false, &n) == 2);
    CHECK(word_errors("Hello, world.", "hello world", true, &n) == 0);
    CHECK(word_errors("It's red.", "its red", true, &n) == 1);
}

#define N_CLIPS 20

/* The 20 clips with beam_size `beams`, compared with clips.tsv's column
 * `hf_col` (2: greedy, 3: 4 beams; 0 is the file, 1 the sentence), each
 * file alone (batch 0: ct_transcribe_file, the spec's chunking) or in
 * padded batches of `batch` (ct_transcribe_batch: clips of other lengths
 * share the decoder's rows, and one clip finishes while others go on). */
static void run_demo(int beams, int hf_col, int batch) {
    if (!ct_audio_has_ffmpeg()) {
        printf("  skipped: this build has no FFmpeg to read FLAC (%s)\n", ct_audio_decoder_version());
        return;
    }
    FILE *tsv = fopen(DEMO_DATA "/clips.tsv", "r");
    CHECK_MSG(tsv, "cannot open %s", DEMO_DATA "/clips.tsv");
    if (!tsv) return;
    static char lines[N_CLIPS][1024];
    const char *file[N_CLIPS], *ref[N_CLIPS], *hf[N_CLIPS];
    ct_pcm pcm[N_CLIPS] = {0};
    ct_result *res[N_CLIPS] = {0};
    int clips = 0;
    while (clips < N_CLIPS && fgets(lines[clips], sizeof lines[clips], tsv)) {
        char *line = lines[clips];
        line[strcspn(line, "\r\n")] = 0;
        char *col[4] = {line, NULL, NULL, NULL};
        for (int c = 1; c < 4 && col[c - 1]; c++) {
            char *tab = strchr(col[c - 1], '\t');
            if (tab) *tab++ = 0;
            col[c] = tab;
        }
        if (!col[1]) continue;
        file[clips] = col[0];
        ref[clips] = col[1];
        hf[clips++] = col[hf_col];
    }
    fclose(tsv);
    CHECK_MSG(clips == N_CLIPS, "%s lists %d clips, not %d", DEMO_DATA "/clips.tsv", clips, N_CLIPS);
    ct_options o;
    ct_options_init(&o);
    o.model_dir = DEMO_MODEL;
    o.backend = CT_BACKEND_CPU;
    o.n_threads = 2;
    o.beam_size = beams;
    if (batch > 0) o.batch_size = batch;
    ct_session *s = NULL;
    CHECK_OK(ct_session_open(&o, &s));
    for (int i = 0; s && i < clips; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", DEMO_DATA, file[i]);
        if (batch > 0)
            CHECK_OK(ct_pcm_load(path, (size_t)1 << 30, &pcm[i]));
        else
            CHECK_OK(ct_transcribe_file(s, path, &res[i]));
    }
    for (int i = 0; s && batch > 0 && i < clips; i += batch) {
        int n = clips - i < batch ? clips - i : batch;
        const float *a[N_CLIPS];
        size_t len[N_CLIPS];
        for (int k = 0; k < n; k++) {
            a[k] = pcm[i + k].samples;
            len[k] = pcm[i + k].n;
        }
        CHECK_OK(ct_transcribe_batch(s, a, len, n, res + i));
    }
    int exact = 0, same = 0, errs = 0, words = 0, errs_norm = 0, words_norm = 0;
    for (int i = 0; i < clips; i++) {
        const char *hyp = res[i] && res[i]->text ? res[i]->text : "";
        while (*hyp == ' ') hyp++;
        int n = 0, nn = 0;
        int e = word_errors(ref[i], hyp, false, &n);
        errs += e;
        words += n;
        errs_norm += word_errors(ref[i], hyp, true, &nn);
        words_norm += nn;
        if (e == 0) exact++;
        else printf("  %s: \"%s\" -> \"%s\" (%d of %d words wrong)\n", file[i], ref[i], hyp, e, n);
        if (hf[i] && !strcmp(hf[i], hyp)) same++;
        else printf("  %s: transformers said \"%s\"\n", file[i], hf[i] ? hf[i] : "(not in clips.tsv)");
        ct_result_free(res[i]);
        ct_pcm_free(&pcm[i]);
    }
    ct_session_close(s);
    double wer = 100.0 * errs / (words ? words : 1);
    double wer_norm = 100.0 * errs_norm / (words_norm ? words_norm : 1);
    printf("  demo model, %d beam(s), %s: WER %.2f%% (normalised %.2f%%), %d of %d exact, %d as transformers\n",
           beams, batch > 0 ? "batched" : "file by file", wer, wer_norm, exact, clips, same);
    CHECK_MSG(same >= DEMO_MIN_SAME, "%d of %d transcripts equal transformers', not %d", same, clips,
              DEMO_MIN_SAME);
    CHECK_MSG(wer <= DEMO_MAX_WER, "WER %.2f%% is above %.1f%%", wer, DEMO_MAX_WER);
}

static void demo_model_transcribes_held_out_speech(void) { run_demo(1, 2, 0); }
static void demo_model_with_four_beams(void) { run_demo(4, 3, 8); }

TEST_MAIN(T(word_error_rate_counts_words), T(demo_model_transcribes_held_out_speech), T(demo_model_with_four_beams))
