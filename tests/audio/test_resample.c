/*
 * test_resample.c: resampling to 16 kHz keeps a tone's frequency and
 * amplitude, gives the expected length, removes what lies above the new
 * Nyquist frequency, and refuses bad rates.
 *
 * Measurement: the output's interior (edges hold the filter's start-up) is
 * projected onto sin and cos at the tone's frequency; that gives amplitude
 * and phase, and the residual after subtracting the fitted tone must be
 * small. Tolerances: amplitude within 1e-4 relative and residual below 2e-5 of
 * the amplitude (-94 dB): SOXR_HQ is a 20-bit quality (about -120 dB), and we
 * measure about 1e-7 on float32 input.
 */
#include <stdint.h>
#include <unistd.h>

#include "audio_fixture.h"

#define PI 3.14159265358979323846

static int make_tone(ct_audio *a, int rate, double freq, double amp, double seconds) {
    a->n = (size_t)(rate * seconds);
    a->sample_rate = rate;
    a->samples = tg_malloc(a->n * sizeof *a->samples);
    CHECK(a->samples != NULL);
    if (!a->samples) return 0;
    for (size_t i = 0; i < a->n; i++) a->samples[i] = (float)(amp * sin(2 * PI * freq * i / rate + 0.3));
    return 1;
}

/* Fits A·sin(ωt + φ) to x[lo, hi) at frequency freq; returns A and the RMS
 * of what is left. */
static void fit_tone(const float *x, size_t lo, size_t hi, int rate, double freq, double *amp,
                     double *resid_rms) {
    double s = 0, c = 0;
    for (size_t i = lo; i < hi; i++) {
        double w = 2 * PI * freq * i / rate;
        s += x[i] * sin(w);
        c += x[i] * cos(w);
    }
    s *= 2.0 / (double)(hi - lo);
    c *= 2.0 / (double)(hi - lo);
    *amp = sqrt(s * s + c * c);
    double r = 0;
    for (size_t i = lo; i < hi; i++) {
        double w = 2 * PI * freq * i / rate;
        double e = x[i] - (s * sin(w) + c * cos(w));
        r += e * e;
    }
    *resid_rms = sqrt(r / (double)(hi - lo));
}

static void check_tone(int rate, double freq) {
    ct_audio a;
    double amp0 = 0.5;
    if (!make_tone(&a, rate, freq, amp0, 2.0)) return;
    size_t n_in = a.n;
    CHECK_OK(ct_audio_resample(&a, 16000));
    CHECK(a.sample_rate == 16000);
    double want_n = (double)n_in * 16000.0 / rate;
    CHECK_MSG(fabs((double)a.n - want_n) <= 1.0, "%d Hz: %zu samples out, want %.1f", rate, a.n,
              want_n);
    double amp = 0, resid = 0;
    if (a.n > 4000) fit_tone(a.samples, 2000, a.n - 2000, 16000, freq, &amp, &resid);
    printf("  %d Hz → 16 kHz, %.0f Hz tone: amplitude %.6f (want %.1f), residual %.2g\n", rate,
           freq, amp, amp0, resid);
    CHECK_MSG(fabs(amp - amp0) <= 1e-4 * amp0, "amplitude %g", amp);
    CHECK_MSG(resid <= 2e-5 * amp0, "residual %g", resid);
    ct_audio_free(&a);
}

static void test_tone_from_44100(void) { check_tone(44100, 1000.0); }
static void test_tone_from_8000(void) { check_tone(8000, 1000.0); }
static void test_high_tone_from_48000(void) { check_tone(48000, 7000.0); }

static void test_above_nyquist_is_removed(void) {
    ct_audio a;
    if (!make_tone(&a, 44100, 12000.0, 0.5, 1.0)) return;
    CHECK_OK(ct_audio_resample(&a, 16000));
    double r = 0;
    size_t lo = 2000, hi = a.n > 4000 ? a.n - 2000 : lo;
    for (size_t i = lo; i < hi; i++) r += (double)a.samples[i] * a.samples[i];
    double rms = hi > lo ? sqrt(r / (double)(hi - lo)) : 1.0;
    printf("  12 kHz tone at 44.1 kHz → 16 kHz: rms %.2g (was 0.35)\n", rms);
    CHECK_MSG(rms < 1e-4, "alias rms %g", rms);
    ct_audio_free(&a);
}

static void test_same_rate_and_bad_rates(void) {
    ct_audio a;
    if (!make_tone(&a, 16000, 440.0, 0.5, 0.1)) return;
    float *before = a.samples;
    float first = a.samples[5];
    CHECK_OK(ct_audio_resample(&a, 16000));
    CHECK(a.samples == before && a.n == 1600 && a.samples[5] == first);
    CHECK_ERR(ct_audio_resample(&a, 0), TG_ERR_INVALID_ARG, "rate 0");
    a.sample_rate = -5;
    CHECK_ERR(ct_audio_resample(&a, 16000), TG_ERR_INVALID_ARG, "sample rate -5");
    ct_audio_free(&a);
}

/* ct_audio_load: a 16 kHz fixture comes back unchanged, errors name the
 * file. */
static void test_load(void) {
    ct_audio a, b;
    CHECK_OK(ct_audio_load(FIXTURE_DIR "/audio/b.wav", &a));
    if (fixture_wav("b.wav", &b) && a.samples) {
        CHECK(a.n == b.n && a.sample_rate == 16000);
        CHECK(memcmp(a.samples, b.samples, a.n * sizeof *a.samples) == 0);
    }
    ct_audio_free(&a);
    ct_audio_free(&b);
    CHECK_ERR(ct_audio_load(FIXTURE_DIR "/audio/missing.wav", &a), TG_ERR_NOT_FOUND,
              "missing.wav");
    CHECK(a.samples == NULL);
}

/* ct_audio_load of an 8 kHz 16-bit file written to a temporary path: 16 kHz
 * out, twice the samples, the tone kept. */
static void test_load_resamples(void) {
    enum { N = 8000 };
    static uint8_t file[44 + 2 * N];
    const uint32_t rate = 8000, bytes = 2 * N;
    uint8_t hdr[44] = "RIFF....WAVEfmt \x10\0\0\0\x01\0\x01\0........\x02\0\x10\0data....";
    uint32_t riff = 36 + bytes, brate = rate * 2;
    memcpy(hdr + 4, &riff, 4);   /* the test host is little-endian, like WAV */
    memcpy(hdr + 24, &rate, 4);
    memcpy(hdr + 28, &brate, 4);
    memcpy(hdr + 40, &bytes, 4);
    memcpy(file, hdr, 44);
    for (int i = 0; i < N; i++) {
        int16_t v = (int16_t)lrint(16384 * sin(2 * PI * 1000.0 * i / rate + 0.3));
        memcpy(file + 44 + 2 * i, &v, 2);
    }
    char path[256];
    snprintf(path, sizeof path, "/tmp/ct-test-resample-%ld.wav", (long)getpid());
    CHECK_OK(tg_file_write_atomic(path, file, sizeof file));
    ct_audio a;
    CHECK_OK(ct_audio_load(path, &a));
    remove(path);
    if (!a.samples) return;
    CHECK(a.sample_rate == 16000 && a.n == 2 * N);
    double amp = 0, resid = 0;
    fit_tone(a.samples, 2000, a.n - 2000, 16000, 1000.0, &amp, &resid);
    CHECK_MSG(fabs(amp - 0.5) < 1e-3 && resid < 1e-3, "amplitude %g, residual %g", amp, resid);
    ct_audio_free(&a);
}

TEST_MAIN(T(test_load), T(test_load_resamples), T(test_tone_from_44100), T(test_tone_from_8000), T(test_high_tone_from_48000),
          T(test_above_nyquist_is_removed), T(test_same_rate_and_bad_rates))
