/*
 * transcribe_batch.c: the engine end to end through the public API, the way
 * bench/gpu-vs-transformers.sh compares it with transformers: B independent
 * clips of S seconds transcribed as one batch by ct_transcribe_batch, with
 * a fixed number of new tokens per clip.
 *
 * Per batch size: one session (opened once, weights uploaded once, reported
 * apart as open_ms, with its parts from ct_session_open_times: making the
 * backends, and loading and uploading the weights; the first call's wall
 * time is first_ms, its stages' times first_frontend_ms, first_encoder_ms
 * and first_decoder_ms), two warm-up calls (the first pays kernel loads and
 * plans, the second the CUDA-graph capture of shapes that repeat), then
 * `runs` timed calls; each figure is the median over those. Wall time is
 * taken around the call inside the process, frontend included. One JSON
 * object per batch size goes to stdout (and to --json FILE), for the
 * script's table.
 *
 * The clips are deterministic noise (amplitude 0.1, as the peer's script
 * uses), different per clip. Token counts are fixed by the checkpoint
 * (make_full_random.py --pin-token: greedy emits one token every step and
 * never end-of-text) and by ct_options.ignore_eos when the library has it;
 * the program checks that every clip produced exactly --tokens tokens and
 * says so when not, so a step count is never guessed. Peak memory and the
 * host submit share come from the backend's own counters (tg_backend_stats).
 *
 * --first-tokens N makes the first call (first_ms) stop after N new tokens
 * (ct_session_set_max_new_tokens), the later ones after --tokens: with 1,
 * open_ms + first_ms is the time from nothing to the first token, which is
 * what issue 9's cold- and warm-start targets count; without it the first
 * call runs all --tokens steps and the sum only bounds that from above.
 *
 * Not here: the peer (bench_transformers.py), building the checkpoint.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cohere_transcribe.h"

#define SR 16000
#define MAX_RUNS 15

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Noise from a 64-bit LCG, two uniforms summed (triangular), scaled to 0.1. */
static void fill_clip(float *dst, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) / 9007199254740992.0;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double v = (double)(s >> 11) / 9007199254740992.0;
        dst[i] = (float)(0.1 * (u + v - 1.0) * 1.7);
    }
}

static int usage(void) {
    fprintf(stderr, "usage: bench-transcribe_batch --model DIR [--backend cuda|cpu|auto] [--batches 1,8,32,64]\n"
                    "                              [--seconds 35] [--tokens 128] [--first-tokens N] [--runs 3]\n"
                    "                              [--json FILE]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *model = NULL, *backend = "auto", *batches = "1,8,32,64", *json = NULL;
    double seconds = 35.0;
    int tokens = 128, runs = 3, first_tokens = 0;
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--backend")) backend = v;
        else if (!strcmp(a, "--batches")) batches = v;
        else if (!strcmp(a, "--seconds")) seconds = atof(v);
        else if (!strcmp(a, "--tokens")) tokens = atoi(v);
        else if (!strcmp(a, "--first-tokens")) first_tokens = atoi(v);
        else if (!strcmp(a, "--runs")) runs = atoi(v);
        else if (!strcmp(a, "--json")) json = v;
        else return usage();
    }
    if (!model || seconds <= 0.02 || seconds > 35.0 || tokens <= 0 || runs < 1 || runs > MAX_RUNS ||
        first_tokens < 0 || first_tokens > tokens)
        return usage();
    if (first_tokens == 0) first_tokens = tokens;
    FILE *jf = json ? fopen(json, "w") : NULL;
    if (json && !jf) {
        fprintf(stderr, "bench-transcribe_batch: cannot write %s\n", json);
        return 1;
    }
    if (jf) fputs("[\n", jf);
    int first = 1, rc = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", batches);
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        int B = atoi(tok);
        if (B <= 0 || B > 4096) {
            fprintf(stderr, "bench-transcribe_batch: bad batch size %s\n", tok);
            rc = 2;
            break;
        }
        ct_options o;
        ct_options_init(&o);
        o.model_dir = model;
        o.max_new_tokens = tokens;
        o.batch_size = B;
#ifdef CT_HAVE_IGNORE_EOS
        o.ignore_eos = true;
#endif
        ct_status st = ct_backend_parse(backend, &o.backend);
        ct_session *s = NULL;
        double t0 = now_ms();
        if (!st) st = ct_session_open(&o, &s);
        double open_ms = now_ms() - t0;
        ct_open_times ot;
        ct_session_open_times(s, &ot);
        size_t n = (size_t)(seconds * SR);
        float *pcm = malloc((size_t)B * n * sizeof(float));
        const float **clips = malloc((size_t)B * sizeof *clips);
        size_t *lens = malloc((size_t)B * sizeof *lens);
        ct_result **res = calloc((size_t)B, sizeof *res);
        if (!st && (!pcm || !clips || !lens || !res)) st = tg_status_new(TG_ERR_NO_MEMORY, "out of memory");
        for (int i = 0; !st && i < B; i++) {
            fill_clip(pcm + (size_t)i * n, n, (uint64_t)i + 1);
            clips[i] = pcm + (size_t)i * n;
            lens[i] = n;
        }
        double tot[MAX_RUNS], fe[MAX_RUNS], en[MAX_RUNS], de[MAX_RUNS], sub[MAX_RUNS], first_ms = 0;
        double first_parts[3] = {0, 0, 0}; /* the first call's frontend, encoder, decoder */
        tg_backend_stats first_bs = {0};   /* its backend stats: the first-use host time by part */
        size_t peak = 0;
        int min_tok = 1 << 30, max_tok = 0, first_min = 1 << 30, first_max = 0;
        for (int r = -2; !st && r < runs; r++) {
            ct_session_reset_stats(s);
            if (r == -2 && first_tokens != tokens) st = ct_session_set_max_new_tokens(s, first_tokens);
            if (r == -1 && first_tokens != tokens) st = ct_session_set_max_new_tokens(s, tokens);
            if (st) break;
            double a = now_ms();
            st = ct_transcribe_batch(s, clips, lens, B, res);
            double wall = now_ms() - a;
            if (st) break;
            tg_backend_stats bs;
            ct_session_stats(s, &bs);
            if (bs.mem_peak > peak) peak = bs.mem_peak;
            if (r == -2) { /* kernel loads, plans, first captures */
                first_ms = wall;
                first_parts[0] = res[0]->timings.frontend_ms;
                first_parts[1] = res[0]->timings.encoder_ms;
                first_parts[2] = res[0]->timings.decoder_ms;
                first_bs = bs;
            }
            if (r >= 0) {
                /* the host's share of the backend's compute time */
                sub[r] = bs.compute_us > 0 ? bs.submit_us / bs.compute_us : 0;
                tot[r] = wall;
                fe[r] = res[0]->timings.frontend_ms;
                en[r] = res[0]->timings.encoder_ms;
                de[r] = res[0]->timings.decoder_ms;
            }
            for (int i = 0; i < B; i++) {
                int *lo = r == -2 ? &first_min : &min_tok, *hi = r == -2 ? &first_max : &max_tok;
                if (res[i]->n_tokens < *lo) *lo = res[i]->n_tokens;
                if (res[i]->n_tokens > *hi) *hi = res[i]->n_tokens;
                ct_result_free(res[i]);
                res[i] = NULL;
            }
        }
        if (st) {
            fprintf(stderr, "bench-transcribe_batch: batch %d: %s\n", B, ct_status_message(st));
            ct_status_free(st);
            rc = 1;
        } else {
            double total = median(tot, runs), f = median(fe, runs), e = median(en, runs), d = median(de, runs);
            /* steps: the prefill yields the first token, each step one more */
            int steps = max_tok > 1 ? max_tok - 1 : 1;
            if (min_tok != tokens || max_tok != tokens)
                fprintf(stderr, "bench-transcribe_batch: batch %d: clips made %d..%d tokens, not %d "
                                "(use a checkpoint made with --pin-token)\n", B, min_tok, max_tok, tokens);
            if (first_min != first_tokens || first_max != first_tokens)
                fprintf(stderr, "bench-transcribe_batch: batch %d: the first call made %d..%d tokens, not %d\n", B,
                        first_min, first_max, first_tokens);
            char line[1024];
            snprintf(line, sizeof line,
                     "{\"batch\": %d, \"backend\": \"%s\", \"open_ms\": %.1f, \"backends_ms\": %.1f, "
                     "\"weights_ms\": %.1f, \"weights_gb\": %.3f, \"total_ms\": %.2f, "
                     "\"first_ms\": %.1f, \"first_tokens\": %d, \"first_frontend_ms\": %.2f, \"first_encoder_ms\": %.2f, "
                     "\"first_decoder_ms\": %.2f, \"first_setup_ms\": %.2f, \"first_setup_kernels_ms\": %.2f, "
                     "\"first_setup_plans_ms\": %.2f, \"first_setup_first_launch_ms\": %.2f, "
                     "\"first_setup_graphs_ms\": %.2f, \"first_setup_wait_ms\": %.2f, \"first_alloc_ms\": %.2f, "
                     "\"frontend_ms\": %.2f, \"encoder_ms\": %.2f, \"decoder_ms\": %.2f, "
                     "\"step_ms\": %.4f, "
                     "\"tokens_min\": %d, \"tokens_max\": %d, \"rtfx\": %.1f, \"peak_gib\": %.3f, "
                     "\"host_submit_share\": %.3f, \"runs\": %d}",
                     B, ct_session_backend(s), open_ms, ot.backends_ms, ot.weights_ms,
                     (double)(ot.weights_bytes + ot.mapped_bytes) / 1e9, total, first_ms, first_max, first_parts[0],
                     first_parts[1], first_parts[2], first_bs.setup_us / 1e3, first_bs.setup_kernels_us / 1e3,
                     first_bs.setup_plans_us / 1e3, first_bs.setup_first_us / 1e3, first_bs.setup_graphs_us / 1e3,
                     first_bs.setup_wait_us / 1e3, first_bs.alloc_us / 1e3,
                     f, e, d, d / steps, min_tok, max_tok,
                     B * seconds / (total / 1e3), peak / 1073741824.0, median(sub, runs), runs);
            printf("%s\n", line);
            fflush(stdout);
            if (jf) fprintf(jf, "%s%s", first ? "" : ",\n", line);
            first = 0;
        }
        ct_session_close(s);
        free(pcm);
        free(clips);
        free(lens);
        free(res);
    }
    if (jf) {
        fputs("\n]\n", jf);
        fclose(jf);
    }
    return rc;
}
