/*
 * test_wav.c: the WAV reader on files synthesised in memory, one per format
 * and layout it claims to read, on malformed files (each must give a clear
 * error naming the file and the problem), and on the fixture clips.
 *
 * Exactness: integer PCM must decode to exactly v / 2^(bits-1) and float
 * formats to exactly their value (float64 rounded once to float32); channel
 * averages are compared within 1e-7, one float32 rounding of the mean.
 */
#include <stdint.h>

#include "audio_fixture.h"

/* ------------------------------------------------------------ the builder */

typedef struct buf {
    uint8_t d[4096];
    size_t n;
} buf;

static void put(buf *b, const void *p, size_t n) {
    memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void put16(buf *b, unsigned v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(b, x, 2);
}
static void put32(buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}
static void put_riff(buf *b) {
    put(b, "RIFF", 4);
    put32(b, 0); /* fixed by finish() */
    put(b, "WAVE", 4);
}
static void finish(buf *b) {
    uint32_t v = (uint32_t)(b->n - 8);
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    memcpy(b->d + 4, x, 4);
}
/* A plain 16-byte fmt chunk; block_align 0 means the consistent value. */
static void put_fmt(buf *b, unsigned tag, unsigned ch, uint32_t rate, unsigned bits,
                    unsigned block_align) {
    if (!block_align) block_align = ch * bits / 8;
    put(b, "fmt ", 4);
    put32(b, 16);
    put16(b, tag);
    put16(b, ch);
    put32(b, rate);
    put32(b, rate * block_align);
    put16(b, block_align);
    put16(b, bits);
}
static void put_fmt_ext(buf *b, unsigned sub, unsigned ch, uint32_t rate, unsigned bits,
                        unsigned valid_bits) {
    static const uint8_t tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                     0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};
    unsigned ba = ch * bits / 8;
    put(b, "fmt ", 4);
    put32(b, 40);
    put16(b, 0xFFFE);
    put16(b, ch);
    put32(b, rate);
    put32(b, rate * ba);
    put16(b, ba);
    put16(b, bits);
    put16(b, 22);
    put16(b, valid_bits);
    put32(b, ch == 2 ? 3 : 4); /* channel mask: FL|FR or FC */
    put16(b, sub);
    put(b, tail, sizeof tail);
}
static void put_chunk(buf *b, const char *id, const void *p, uint32_t n) {
    put(b, id, 4);
    put32(b, n);
    put(b, p, n);
    if (n & 1) b->d[b->n++] = 0;
}

static int parse_ok(const buf *b, ct_audio *a) {
    tg_status st = ct_wav_parse(b->d, b->n, "mem.wav", a);
    CHECK_OK(st);
    return a->samples != NULL;
}

/* ------------------------------------------------------------------ formats */

static void test_pcm16_mono(void) {
    buf b = {0};
    int16_t v[5] = {0, 1, -1, 32767, -32768};
    put_riff(&b);
    put_fmt(&b, 1, 1, 16000, 16, 0);
    put(&b, "data", 4);
    put32(&b, sizeof v);
    for (int i = 0; i < 5; i++) put16(&b, (uint16_t)v[i]);
    finish(&b);
    ct_audio a;
    if (!parse_ok(&b, &a)) return;
    CHECK(a.n == 5 && a.sample_rate == 16000);
    for (int i = 0; i < 5; i++) CHECK(a.samples[i] == (float)v[i] / 32768.0f);
    ct_audio_free(&a);
    CHECK(a.samples == NULL && a.n == 0);
}

static void test_pcm8_unsigned(void) {
    buf b = {0};
    uint8_t v[4] = {128, 0, 255, 64};
    put_riff(&b);
    put_fmt(&b, 1, 1, 8000, 8, 0);
    put_chunk(&b, "data", v, 4);
    finish(&b);
    ct_audio a;
    if (!parse_ok(&b, &a)) return;
    CHECK(a.n == 4 && a.sample_rate == 8000);
    CHECK(a.samples[0] == 0.0f && a.samples[1] == -1.0f);
    CHECK(a.samples[2] == 127.0f / 128.0f && a.samples[3] == -0.5f);
    ct_audio_free(&a);
}

static void test_pcm24_and_pcm32(void) {
    int32_t v24[4] = {0, 8388607, -8388608, -4194304};
    buf b = {0};
    put_riff(&b);
    put_fmt(&b, 1, 1, 48000, 24, 0);
    put(&b, "data", 4);
    put32(&b, 12);
    for (int i = 0; i < 4; i++) {
        uint32_t u = (uint32_t)v24[i];
        uint8_t x[3] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16)};
        put(&b, x, 3);
    }
    finish(&b);
    ct_audio a;
    if (parse_ok(&b, &a)) {
        CHECK(a.n == 4 && a.sample_rate == 48000);
        for (int i = 0; i < 4; i++)
            CHECK_MSG(a.samples[i] == (float)(v24[i] / 8388608.0), "24-bit %d: %.9g", i,
                      a.samples[i]);
        ct_audio_free(&a);
    }
    int32_t v32[4] = {0, INT32_MAX, INT32_MIN, 1 << 30};
    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 1, 1, 16000, 32, 0);
    put(&b, "data", 4);
    put32(&b, 16);
    for (int i = 0; i < 4; i++) put32(&b, (uint32_t)v32[i]);
    finish(&b);
    if (parse_ok(&b, &a)) {
        CHECK(a.n == 4);
        for (int i = 0; i < 4; i++) CHECK(a.samples[i] == (float)(v32[i] / 2147483648.0));
        CHECK(a.samples[2] == -1.0f && a.samples[3] == 0.5f);
        ct_audio_free(&a);
    }
}

static void test_float32_and_float64(void) {
    float f[3] = {0.25f, -0.75f, 1.5f};   /* out-of-range floats pass unchanged */
    buf b = {0};
    put_riff(&b);
    put_fmt(&b, 3, 1, 22050, 32, 0);
    put_chunk(&b, "data", f, sizeof f);
    finish(&b);
    ct_audio a;
    if (parse_ok(&b, &a)) {
        CHECK(a.n == 3 && a.sample_rate == 22050);
        for (int i = 0; i < 3; i++) CHECK(a.samples[i] == f[i]);
        ct_audio_free(&a);
    }
    double d[3] = {0.1, -0.3333333333333333, 1e-30};
    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 3, 1, 44100, 64, 0);
    put_chunk(&b, "data", d, sizeof d);
    finish(&b);
    if (parse_ok(&b, &a)) {
        CHECK(a.n == 3 && a.sample_rate == 44100);
        for (int i = 0; i < 3; i++) CHECK(a.samples[i] == (float)d[i]);
        ct_audio_free(&a);
    }
}

static void test_extensible_pcm_and_float(void) {
    buf b = {0};
    put_riff(&b);
    put_fmt_ext(&b, 1, 1, 16000, 24, 20);   /* 20 valid bits in a 24-bit container */
    uint8_t x[6] = {0x00, 0x00, 0x40, 0x00, 0x00, 0xC0};   /* +0.5, -0.5 */
    put_chunk(&b, "data", x, 6);
    finish(&b);
    ct_audio a;
    if (parse_ok(&b, &a)) {
        CHECK(a.n == 2 && a.samples[0] == 0.5f && a.samples[1] == -0.5f);
        ct_audio_free(&a);
    }
    b.n = 0;
    put_riff(&b);
    put_fmt_ext(&b, 3, 2, 16000, 32, 32);
    float f[4] = {0.5f, 0.25f, -1.0f, 0.0f};
    put_chunk(&b, "data", f, sizeof f);
    finish(&b);
    if (parse_ok(&b, &a)) {
        CHECK(a.n == 2);
        CHECK(a.samples[0] == 0.375f && a.samples[1] == -0.5f);
        ct_audio_free(&a);
    }
}

static void test_channels_are_averaged(void) {
    /* stereo 16-bit: (L + R) / 2 */
    buf b = {0};
    int16_t v[6] = {16384, -16384, 32767, 32767, -32768, 0};
    put_riff(&b);
    put_fmt(&b, 1, 2, 16000, 16, 0);
    put(&b, "data", 4);
    put32(&b, sizeof v);
    for (int i = 0; i < 6; i++) put16(&b, (uint16_t)v[i]);
    finish(&b);
    ct_audio a;
    if (parse_ok(&b, &a)) {
        CHECK(a.n == 3);
        CHECK(a.samples[0] == 0.0f);
        CHECK(a.samples[1] == 32767.0f / 32768.0f);
        CHECK(a.samples[2] == -0.5f);
        ct_audio_free(&a);
    }
    /* 5 channels of 16-bit: the mean of five */
    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 1, 5, 16000, 16, 0);
    put(&b, "data", 4);
    put32(&b, 10);
    int16_t w[5] = {100, 200, 300, 400, -1000};
    for (int i = 0; i < 5; i++) put16(&b, (uint16_t)w[i]);
    finish(&b);
    if (parse_ok(&b, &a)) {
        CHECK(a.n == 1);
        CHECK_NEAR(a.samples[0], 0.0, 1e-7);
        ct_audio_free(&a);
    }
}

static void test_chunks_are_skipped_with_padding(void) {
    /* LIST with an odd size (pad byte), a 'fact' chunk, fmt after a junk
     * chunk, then data with an odd size (8-bit, 3 samples) and a trailing
     * odd chunk after the data */
    buf b = {0};
    put_riff(&b);
    put_chunk(&b, "JUNK", "abc", 3);
    put_chunk(&b, "LIST", "INFOISFT\x05\0\0\0Lavf\0", 17);
    put_fmt(&b, 1, 1, 16000, 8, 0);
    put_chunk(&b, "fact", "\x03\0\0\0", 4);
    uint8_t x[3] = {128, 192, 64};
    put_chunk(&b, "data", x, 3);
    put_chunk(&b, "id3 ", "xyzzy", 5);
    finish(&b);
    ct_audio a;
    if (parse_ok(&b, &a)) {
        CHECK(a.n == 3);
        CHECK(a.samples[0] == 0.0f && a.samples[1] == 0.5f && a.samples[2] == -0.5f);
        ct_audio_free(&a);
    }
    /* the data chunk before fmt is read too */
    b.n = 0;
    put_riff(&b);
    put_chunk(&b, "data", x, 3);
    put_fmt(&b, 1, 1, 16000, 8, 0);
    finish(&b);
    if (parse_ok(&b, &a)) {
        CHECK(a.n == 3 && a.samples[1] == 0.5f);
        ct_audio_free(&a);
    }
}

static void test_sizes_past_the_end(void) {
    /* a streamed file: RIFF and data sizes 0xFFFFFFFF; the frames present
     * are read (with a warning) */
    buf b = {0};
    put_riff(&b);
    put_fmt(&b, 1, 1, 16000, 16, 0);
    put(&b, "data", 4);
    put32(&b, 0xFFFFFFFFu);
    put16(&b, 16384);
    put16(&b, 49152);   /* -16384 */
    b.d[b.n++] = 0x11;  /* half a frame: dropped */
    memcpy(b.d + 4, "\xff\xff\xff\xff", 4);
    ct_audio a;
    if (parse_ok(&b, &a)) {
        CHECK(a.n == 2 && a.samples[0] == 0.5f && a.samples[1] == -0.5f);
        ct_audio_free(&a);
    }
    /* a data chunk with not one whole frame present is an error */
    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 1, 2, 16000, 16, 0);
    put(&b, "data", 4);
    put32(&b, 400);
    put16(&b, 1);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "cut.wav", &a), TG_ERR_FORMAT,
              "cut.wav: truncated data chunk");
}

/* ------------------------------------------------------------- bad input */

static void test_malformed_files_name_the_problem(void) {
    ct_audio a;
    buf b = {0};
    uint8_t s2[2] = {0, 0};

    CHECK_ERR(ct_wav_parse((const uint8_t *)"RIFF", 4, "x.wav", &a), TG_ERR_FORMAT,
              "x.wav: 4 bytes is too short");
    CHECK_ERR(ct_wav_parse(NULL, 0, "empty.wav", &a), TG_ERR_FORMAT, "empty.wav: 0 bytes");

    put(&b, "RIFX", 4);
    put32(&b, 4);
    put(&b, "WAVE", 4);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "be.wav", &a), TG_ERR_UNSUPPORTED, "big-endian");
    memcpy(b.d, "OggS", 4);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.ogg", &a), TG_ERR_FORMAT, "a.ogg: not a WAV file");
    memcpy(b.d, "RF64", 4);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "big.wav", &a), TG_ERR_UNSUPPORTED, "RF64");
    memcpy(b.d, "RIFF", 4);
    memcpy(b.d + 8, "AVI ", 4);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "v.avi", &a), TG_ERR_FORMAT, "not WAVE (form type 'AVI ')");

    b.n = 0;
    put_riff(&b);
    put_chunk(&b, "data", s2, 2);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_FORMAT, "a.wav: fmt chunk missing");

    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 1, 1, 16000, 16, 0);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_FORMAT, "a.wav: data chunk missing");

    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 1, 1, 16000, 16, 0);
    put_chunk(&b, "data", s2, 0);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_FORMAT, "holds no samples");

    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 0x0055, 1, 16000, 16, 0);
    put_chunk(&b, "data", s2, 2);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_UNSUPPORTED,
              "a.wav: unsupported format tag 0x0055 (MP3)");

    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 0x0007, 1, 8000, 8, 0);
    put_chunk(&b, "data", s2, 2);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_UNSUPPORTED, "0x0007 (mu-law)");

    b.n = 0;
    put_riff(&b);
    put_fmt_ext(&b, 0x0002, 1, 16000, 16, 16);
    put_chunk(&b, "data", s2, 2);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_UNSUPPORTED,
              "sub-format 0x0002 (Microsoft ADPCM)");

    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 1, 0, 16000, 16, 2);
    put_chunk(&b, "data", s2, 2);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_FORMAT, "a.wav: 0 channels");

    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 1, 1, 16000, 12, 2);
    put_chunk(&b, "data", s2, 2);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_UNSUPPORTED,
              "a.wav: bits per sample 12 unsupported");

    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 3, 1, 16000, 16, 2);
    put_chunk(&b, "data", s2, 2);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_UNSUPPORTED,
              "bits per sample 16 unsupported for IEEE float");

    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 1, 2, 16000, 16, 2);   /* stereo 16-bit needs 4 */
    put_chunk(&b, "data", s2, 2);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_FORMAT,
              "a.wav: block align 2 does not match 2 channels");

    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 1, 1, 0, 16, 0);
    put_chunk(&b, "data", s2, 2);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_FORMAT, "sample rate 0");

    /* fmt chunk shorter than 16 bytes, and one cut by the end of the file */
    b.n = 0;
    put_riff(&b);
    put_chunk(&b, "fmt ", "\x01\0\x01\0\x80\x3e\0\0", 8);
    put_chunk(&b, "data", s2, 2);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_FORMAT, "fmt chunk is 8 bytes");
    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 1, 1, 16000, 16, 0);
    b.n -= 6;
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_FORMAT, "truncated fmt chunk");

    /* a chunk before the data that runs past the end */
    b.n = 0;
    put_riff(&b);
    put_fmt(&b, 1, 1, 16000, 16, 0);
    put(&b, "LIST", 4);
    put32(&b, 1000);
    put(&b, "abcd", 4);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_FORMAT, "truncated 'LIST' chunk");

    /* extensible with a short extension */
    b.n = 0;
    put_riff(&b);
    put_fmt_ext(&b, 1, 1, 16000, 16, 16);
    b.d[12 + 8 + 16] = 10;   /* cbSize */
    put_chunk(&b, "data", s2, 2);
    finish(&b);
    CHECK_ERR(ct_wav_parse(b.d, b.n, "a.wav", &a), TG_ERR_FORMAT, "extension is 10 bytes");

    CHECK_ERR(ct_wav_read(TEST_DATA_DIR "/tiny/audio/no-such.wav", &a), TG_ERR_NOT_FOUND,
              "no-such.wav");
}

/* ------------------------------------------------------------- fixtures */

static void test_fixture_clips(void) {
    ct_audio a;
    if (fixture_wav("b.wav", &a)) {
        CHECK(a.n == 20480);
        /* 16-bit PCM: every sample is an exact multiple of 1/32768 */
        double peak = 0;
        for (size_t i = 0; i < a.n; i++) {
            CHECK(a.samples[i] * 32768.0f == (float)(int)(a.samples[i] * 32768.0f));
            if (fabs(a.samples[i]) > peak) peak = fabs(a.samples[i]);
        }
        CHECK(peak > 0.01 && peak <= 1.0);
        ct_audio_free(&a);
    }
    if (fixture_wav("a.wav", &a)) {
        CHECK(a.n == 0x1a540 / 2);
        CHECK(a.samples[0] == 0x0d5b / 32768.0f && a.samples[1] == 0x1334 / 32768.0f);
        ct_audio_free(&a);
    }
    if (fixture_wav("long.wav", &a)) {
        CHECK(a.n == 1140800);
        ct_audio_free(&a);
    }
}

static void test_out_of_memory_is_reported(void) {
    buf b = {0};
    put_riff(&b);
    put_fmt(&b, 1, 1, 16000, 16, 0);
    put_chunk(&b, "data", "\x01\x02\x03\x04", 4);
    finish(&b);
    ct_audio a;
    tg_alloc_fail_after(0);
    tg_status st = ct_wav_parse(b.d, b.n, "oom.wav", &a);
    tg_alloc_fail_after(-1);
    CHECK_ERR(st, TG_ERR_NO_MEMORY, "oom.wav: out of memory");
    CHECK(a.samples == NULL && a.n == 0);
}

TEST_MAIN(T(test_pcm16_mono), T(test_pcm8_unsigned), T(test_pcm24_and_pcm32),
          T(test_float32_and_float64), T(test_extensible_pcm_and_float),
          T(test_channels_are_averaged), T(test_chunks_are_skipped_with_padding),
          T(test_sizes_past_the_end), T(test_malformed_files_name_the_problem),
          T(test_fixture_clips), T(test_out_of_memory_is_reported))
