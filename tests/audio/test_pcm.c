/*
 * test_pcm.c: ct_pcm_load, the audio files of every format users bring.
 *
 * Compressed files are made at test time by the ffmpeg program from the
 * fixture WAVs (`make deps` installs it); where it is missing, or the build
 * has no FFmpeg, those tests print why and pass. The rest runs in every
 * build: the memory ceiling (checked while decoding, naming the ceiling),
 * the 1 Hz WAV refused before it is allocated, infinite and NaN samples
 * named by their index and time in the source, non-regular inputs (a FIFO
 * is refused without blocking: the test fails on a 5 s alarm), "-", a
 * directory, a text file, and magic bytes of other formats in a WAV-only
 * build.
 *
 * Tolerances: FLAC is lossless, so its samples equal the WAV's exactly (the
 * same int16 / 32768); lossy codecs are compared by the best normalised
 * cross-correlation over a lag of up to 2000 samples (encoder delay), which
 * must exceed 0.9 (measured: 0.99 and more); their length within 0.1 s.
 * A resampled WAV goes through the same libsoxr as before, so 44.1 kHz
 * stereo of a 16 kHz clip correlates above 0.999 at lag 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audio_fixture.h"

static char tmpdir[256];

static void cleanup(void);

/* The test's own folder, made on first use and removed at exit. */
static void setup(void) {
    if (tmpdir[0]) return;
    snprintf(tmpdir, sizeof tmpdir, "%s", "/tmp/ct-test-pcm-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        exit(1);
    }
    atexit(cleanup);
}

static void cleanup(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

static const char *tmp_path(const char *name) {
    setup();
    static char p[8][512];
    static int k;
    char *out = p[k++ % 8];
    snprintf(out, 512, "%s/%s", tmpdir, name);
    return out;
}

static int have_ffmpeg_prog(void) {
    static int have = -1;
    if (have < 0) have = system("ffmpeg -version >/dev/null 2>&1") == 0;
    return have;
}

/* Whether the ffmpeg-made tests can run here; prints why not. */
static int can_encode(const char *test) {
    if (!ct_audio_has_ffmpeg()) {
        printf("  %s: skipped: this build has no FFmpeg (%s)\n", test, ct_audio_decoder_version());
        return 0;
    }
    if (!have_ffmpeg_prog()) {
        printf("  %s: skipped: the ffmpeg program is not installed (make deps)\n", test);
        return 0;
    }
    return 1;
}

static int encode(const char *in, const char *args, const char *out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "timeout 120 ffmpeg -nostdin -loglevel error -y -i '%s' %s '%s'",
             in, args, out);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "%s failed", cmd);
    return rc == 0;
}

static void write_file(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(d, 1, n, f) == n);
    fclose(f);
}

/* The best normalised cross-correlation of a against b over |lag| <= maxlag. */
static double best_corr(const float *a, size_t na, const float *b, size_t nb, int maxlag) {
    double best = -1;
    for (int lag = -maxlag; lag <= maxlag; lag += 1) {
        double ab = 0, aa = 0, bb = 0;
        for (size_t i = 0; i < na; i += 4) {
            long j = (long)i + lag;
            if (j < 0 || (size_t)j >= nb) continue;
            ab += (double)a[i] * b[j];
            aa += (double)a[i] * a[i];
            bb += (double)b[j] * b[j];
        }
        double c = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
        if (c > best) best = c;
    }
    return best;
}

#define A_WAV FIXTURE_DIR "/audio/a.wav"

static void test_wav_through_pcm_load_equals_the_reader(void) {
    ct_audio ref = {0};
    if (!fixture_wav("a.wav", &ref)) return;
    ct_pcm p;
    CHECK_OK(ct_pcm_load(A_WAV, 0, &p));
    CHECK(p.n == ref.n && p.source_rate == 16000 && p.source_channels == 1);
    CHECK(!strcmp(p.codec, "pcm_s16le"));
    CHECK_NEAR(p.duration_s, ref.n / 16000.0, 1e-9);
    CHECK(p.samples && !memcmp(p.samples, ref.samples, ref.n * sizeof(float)));
    ct_pcm_free(&p);
    ct_pcm_free(&p); /* twice is fine */
    ct_audio_free(&ref);
}

static void test_formats_decode_close_to_the_wav(void) {
    if (!can_encode(__func__)) return;
    ct_audio ref = {0};
    if (!fixture_wav("a.wav", &ref)) return;
    static const struct {
        const char *name, *args, *codec;
        int lossless;
    } f[] = {
        {"a.flac", "", "flac", 1},
        {"a.mp3", "-b:a 128k", "mp3", 0},
        {"a.ogg", "-c:a libvorbis", "vorbis", 0},
        {"a.opus", "-c:a libopus -b:a 64k", "opus", 0},
        {"a.m4a", "-c:a aac -b:a 128k", "aac", 0},
        {"a44.wav", "-ar 44100 -ac 2", "pcm_s16le", 0},
        {"a-adpcm.wav", "-c:a adpcm_ms", "adpcm_ms", 0},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const char *path = tmp_path(f[i].name);
        if (!encode(A_WAV, f[i].args, path)) continue;
        ct_pcm p;
        tg_status st = ct_pcm_load(path, 0, &p);
        CHECK_OK(st);
        if (!p.samples) continue;
        CHECK_MSG(!strcmp(p.codec, f[i].codec), "%s: codec %s", f[i].name, p.codec);
        if (f[i].lossless) {
            CHECK(p.n == ref.n && !memcmp(p.samples, ref.samples, ref.n * sizeof(float)));
            printf("  %s: identical to the WAV (%zu samples)\n", f[i].name, p.n);
        } else {
            double c = best_corr(ref.samples, ref.n, p.samples, p.n, 2000);
            CHECK_MSG(c > 0.9, "%s: correlation %.4f", f[i].name, c);
            CHECK_MSG(fabs((double)p.n - (double)ref.n) < 1600, "%s: %zu samples vs %zu",
                      f[i].name, p.n, ref.n);
            printf("  %s: %s, %zu samples, correlation %.4f\n", f[i].name, p.codec, p.n, c);
        }
        ct_pcm_free(&p);
    }
    /* the features of the FLAC are the WAV's: the frontend sees the same */
    ct_pcm p;
    CHECK_OK(ct_pcm_load(tmp_path("a.flac"), 0, &p));
    ct_mel mel;
    CHECK_OK(ct_mel_init(&mel));
    float *fa = NULL, *fb = NULL;
    int ta, va, tb, vb;
    CHECK_OK(ct_mel_compute(&mel, ref.samples, ref.n, &fa, &ta, &va));
    if (p.samples) CHECK_OK(ct_mel_compute(&mel, p.samples, p.n, &fb, &tb, &vb));
    if (fa && fb) CHECK(ta == tb && !memcmp(fa, fb, (size_t)ta * 128 * sizeof(float)));
    tg_free(fa);
    tg_free(fb);
    ct_mel_free(&mel);
    ct_pcm_free(&p);
    ct_audio_free(&ref);
}

static void test_corrupt_truncated_and_no_audio(void) {
    if (!can_encode(__func__)) return;
    const char *mp3 = tmp_path("c.mp3");
    if (!encode(A_WAV, "-b:a 128k", mp3)) return;
    tg_file_map m;
    CHECK_OK(tg_file_map_open(mp3, &m));
    if (!m.data) return;
    /* truncated to half: what is there decodes, shorter */
    const char *half = tmp_path("half.mp3");
    write_file(half, m.data, m.size / 2);
    ct_pcm p;
    CHECK_OK(ct_pcm_load(half, 0, &p));
    CHECK_MSG(p.n > 10000 && p.n < 40000, "half an MP3 gave %zu samples", p.n);
    ct_pcm_free(&p);
    /* garbage after the first bytes of a header: an error naming the file */
    uint8_t junk[4096];
    memcpy(junk, m.data, 64);
    uint32_t r = 7;
    for (size_t i = 64; i < sizeof junk; i++) junk[i] = (uint8_t)((r = r * 1103515245u + 12345u) >> 16);
    const char *bad = tmp_path("bad.mp3");
    write_file(bad, junk, sizeof junk);
    tg_status st = ct_pcm_load(bad, 0, &p);
    /* FFmpeg may find a frame or two in noise; either way, nothing crashes,
     * and an error names the file */
    if (st) {
        CHECK(strstr(tg_status_message(st), bad) != NULL);
        printf("  corrupt MP3: %s\n", tg_status_message(st));
    }
    tg_status_free(st);
    ct_pcm_free(&p);
    tg_file_unmap(&m);
    /* a truncated M4A (its index is at the end): an error naming the file */
    const char *m4a = tmp_path("t.m4a");
    if (encode(A_WAV, "-c:a aac", m4a)) {
        CHECK_OK(tg_file_map_open(m4a, &m));
        const char *cut = tmp_path("cut.m4a");
        if (m.data) write_file(cut, m.data, 200);
        tg_file_unmap(&m);
        st = ct_pcm_load(cut, 0, &p);
        CHECK(st != NULL && strstr(tg_status_message(st), cut) != NULL);
        if (st) printf("  truncated M4A: %s\n", tg_status_message(st));
        tg_status_free(st);
    }
    /* video only */
    const char *vid = tmp_path("video.mkv");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "ffmpeg -nostdin -loglevel error -y -f lavfi -i testsrc=size=32x32:rate=5 -t 1 "
             "-c:v ffv1 '%s'",
             vid);
    if (system(cmd) == 0) {
        CHECK_ERR(ct_pcm_load(vid, 0, &p), TG_ERR_FORMAT, "no audio stream");
        CHECK_ERR(ct_pcm_load(vid, 0, &p), TG_ERR_FORMAT, "video ffv1");
    } else {
        printf("  video-only file: skipped (ffmpeg could not make one)\n");
    }
}

/* A 2x2 24-bit BMP, written by hand so that every FFmpeg build sees an
 * image without the ffmpeg program. */
static void write_bmp(const char *path) {
    uint8_t b[70] = {'B', 'M'};
    b[2] = sizeof b;             /* file size */
    b[10] = 54;                  /* pixel data offset */
    b[14] = 40;                  /* BITMAPINFOHEADER */
    b[18] = 2;                   /* width */
    b[22] = 2;                   /* height */
    b[26] = 1;                   /* planes */
    b[28] = 24;                  /* bits per pixel */
    b[34] = 16;                  /* image size: two rows of 6 bytes padded to 8 */
    memset(b + 54, 0x80, 16);
    write_file(path, b, sizeof b);
}

/* One 32x32 frame of ffmpeg's test pattern, encoded by args. */
static int make_picture(const char *args, const char *path) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "timeout 60 ffmpeg -nostdin -loglevel quiet -y -f lavfi "
             "-i testsrc=size=32x32:duration=1 -frames:v 1 %s '%s'",
             args, path);
    return system(cmd) == 0;
}

/* The refusal of a file whose format FFmpeg knows but that is no audio
 * container: named, with the format detected, TG_ERR_FORMAT. */
static void check_refused(const char *path, const char *format, const char *kind) {
    ct_pcm p = {.n = 7};
    tg_status st = ct_pcm_load(path, 0, &p);
    CHECK_MSG(st != NULL, "%s was read as audio", path);
    CHECK(p.samples == NULL && p.n == 0);
    if (!st) return;
    const char *m = tg_status_message(st);
    CHECK(tg_status_code(st) == TG_ERR_FORMAT);
    CHECK_MSG(strstr(m, path) != NULL, "%s", m);
    CHECK_MSG(strstr(m, "not an audio file") != NULL, "%s", m);
    CHECK_MSG(strstr(m, "only audio formats are read") != NULL, "%s", m);
    CHECK_MSG(strstr(m, format) != NULL, "want %s named: %s", format, m);
    if (kind) CHECK_MSG(strstr(m, kind) != NULL, "want '%s': %s", kind, m);
    printf("  %s\n", m);
    tg_status_free(st);
}

/* Only audio demuxers open an input (issue 12: a fuzzer reached the JPEG XL
 * decoder through the probe): an image, or an MPEG-TS that does hold audio
 * but is no audio container, is refused by its detected format before its
 * demuxer or any decoder runs. */
static void test_images_and_other_containers_are_refused(void) {
    const char *bmp = tmp_path("x.bmp");
    write_bmp(bmp);
    if (!ct_audio_has_ffmpeg()) {
        ct_pcm p;
        CHECK_ERR(ct_pcm_load(bmp, 0, &p), TG_ERR_FORMAT, "reads WAV only");
        return;
    }
    check_refused(bmp, "bmp", "an image");
    const char *noext = tmp_path("picture");
    write_bmp(noext);
    check_refused(noext, "bmp_pipe", "an image");
    if (!can_encode(__func__)) return;
    static const struct {
        const char *name, *args, *format;
    } img[] = {
        {"x.png", "-c:v png", "png"},
        {"x.jxl", "-c:v libjxl", "jpegxl"},
        {"x.jpg", "-c:v mjpeg -pix_fmt yuvj420p", "jpeg"},
    };
    for (size_t i = 0; i < sizeof img / sizeof img[0]; i++) {
        const char *path = tmp_path(img[i].name);
        if (!make_picture(img[i].args, path)) {
            printf("  %s: skipped (this ffmpeg cannot write one)\n", img[i].name);
            continue;
        }
        check_refused(path, img[i].format, "an image");
    }
    const char *ts = tmp_path("a.ts");
    if (encode(A_WAV, "-c:a mp2", ts)) check_refused(ts, "mpegts", NULL);
}

typedef struct load_call {
    const char *path;
    ct_pcm *p;
} load_call;

static void load_at_debug(void *arg) {
    load_call *c = arg;
    tg_log_level level = tg_log_get_level();
    tg_log_set_level(TG_LOG_DEBUG);
    CHECK_OK(ct_pcm_load(c->path, 0, c->p));
    tg_log_set_level(level);
}

/* ct_pcm_load(path) with the debug log (FFmpeg's messages) captured;
 * returns what was logged (tg_free). */
static char *load_logging_debug(const char *path, ct_pcm *p) {
    load_call c = {path, p};
    return check_capture_stderr(load_at_debug, &c);
}

/* What the allow-list must keep: an MP3 with a cover picture (a PNG stream
 * beside the audio), and a Matroska file whose first stream is video, give
 * their audio, while the picture's and the video's decoders are refused
 * when stream probing asks for them; the FLAC in the Matroska equals the
 * WAV sample for sample. */
static void test_audio_beside_pictures_and_video_still_loads(void) {
    if (!can_encode(__func__)) return;
    ct_audio ref = {0};
    if (!fixture_wav("a.wav", &ref)) return;
    const char *png = tmp_path("cover.png"), *mp3 = tmp_path("cover.mp3");
    const char *mkv = tmp_path("av.mkv");
    char args[1024];
    snprintf(args, sizeof args,
             "-i '%s' -map 0:a -map 1:v -c:a libmp3lame -c:v png -disposition:v attached_pic "
             "-id3v2_version 3",
             png);
    if (make_picture("-c:v png", png) && encode(A_WAV, args, mp3)) {
        ct_pcm p;
        char *log = load_logging_debug(mp3, &p);
        CHECK(!strcmp(p.codec, "mp3"));
        /* FFmpeg's own words when stream probing asks for the PNG decoder */
        CHECK_MSG(log && strstr(log, "Codec (png) not on whitelist"), "the PNG decoder ran");
        tg_free(log);
        CHECK_MSG(fabs((double)p.n - (double)ref.n) < 1600, "%zu samples vs %zu", p.n, ref.n);
        ct_pcm_free(&p);
    }
    if (encode(A_WAV,
               "-f lavfi -i testsrc=size=32x32:rate=5:duration=3.3 -map 1:v -map 0:a -c:v ffv1 "
               "-c:a flac",
               mkv)) {
        ct_pcm p;
        char *log = load_logging_debug(mkv, &p);
        CHECK(!strcmp(p.codec, "flac"));
        CHECK_MSG(log && strstr(log, "Codec (ffv1) not on whitelist"), "the FFV1 decoder ran");
        tg_free(log);
        CHECK(p.n == ref.n && p.samples && !memcmp(p.samples, ref.samples, ref.n * sizeof(float)));
        ct_pcm_free(&p);
    }
    ct_audio_free(&ref);
}

static void test_not_audio(void) {
    const char *txt = tmp_path("x.txt");
    const char text[] = "this is not audio, only a few words of text\n";
    write_file(txt, text, sizeof text - 1);
    ct_pcm p = {.n = 9};
    tg_status st = ct_pcm_load(txt, 0, &p);
    CHECK(st != NULL && p.samples == NULL && p.n == 0);
    if (st) {
        const char *m = tg_status_message(st);
        CHECK_MSG(strstr(m, txt) != NULL, "%s", m);
        if (ct_audio_has_ffmpeg())
            CHECK_MSG(strstr(m, "not an audio file FFmpeg can read") != NULL, "%s", m);
        else
            CHECK_MSG(strstr(m, "reads WAV only (built without FFmpeg)") != NULL, "%s", m);
        printf("  %s\n", m);
    }
    tg_status_free(st);
    const char *empty = tmp_path("empty.wav");
    write_file(empty, "", 0);
    CHECK_ERR(ct_pcm_load(empty, 0, &p), TG_ERR_FORMAT, "empty file");
}

static void test_magic_bytes_without_ffmpeg(void) {
    static const struct {
        const char *name, *bytes, *kind;
        size_t n;
    } f[] = {
        {"x.mp3", "ID3\x04\0\0\0\0\0\0\0\0\0\0\0\0", "MP3", 16},
        {"y.mp3", "\xff\xfb\x90\x64\0\0\0\0\0\0\0\0\0\0\0\0", "MP3", 16},
        {"x.flac", "fLaC\0\0\0\x22\0\0\0\0\0\0\0\0", "FLAC", 16},
        {"x.ogg", "OggS\0\x02\0\0\0\0\0\0\0\0\0\0", "Ogg", 16},
        {"x.m4a", "\0\0\0\x20" "ftypM4A \0\0\0\0", "MP4/M4A", 16},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const char *path = tmp_path(f[i].name);
        write_file(path, f[i].bytes, f[i].n);
        ct_pcm p;
        tg_status st = ct_pcm_load(path, 0, &p);
        CHECK(st != NULL);
        if (!ct_audio_has_ffmpeg() && st) {
            char want[600];
            snprintf(want, sizeof want, "%s looks like %s", path, f[i].kind);
            CHECK_MSG(strstr(tg_status_message(st), want) != NULL, "%s",
                      tg_status_message(st));
            CHECK_MSG(strstr(tg_status_message(st), "this build reads WAV only") != NULL, "%s",
                      tg_status_message(st));
        } else if (st) {
            /* FFmpeg reads the header and finds it broken: named, no crash */
            CHECK(strstr(tg_status_message(st), path) != NULL);
        }
        tg_status_free(st);
    }
}

static void put16(uint8_t *p, unsigned v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v) {
    put16(p, v & 0xffff);
    put16(p + 2, v >> 16);
}

/* A WAV image of `frames` frames at `rate` (tag 1: int16 zeros, tag 3:
 * float32 from vals when given); free with tg_free. */
static uint8_t *make_wav(uint32_t rate, unsigned tag, unsigned ch, size_t frames,
                         const float *vals, size_t *out_size) {
    unsigned bits = tag == 3 ? 32 : 16, ba = ch * bits / 8;
    size_t data = frames * ba, size = 44 + data;
    uint8_t *w = tg_calloc(size, 1);
    if (!w) return NULL;
    memcpy(w, "RIFF", 4);
    put32(w + 4, (uint32_t)(size - 8));
    memcpy(w + 8, "WAVEfmt ", 8);
    put32(w + 16, 16);
    put16(w + 20, tag);
    put16(w + 22, ch);
    put32(w + 24, rate);
    put32(w + 28, rate * ba);
    put16(w + 32, ba);
    put16(w + 34, bits);
    memcpy(w + 36, "data", 4);
    put32(w + 40, (uint32_t)data);
    if (vals) memcpy(w + 44, vals, frames * ch * sizeof(float));
    *out_size = size;
    return w;
}

static void test_ceiling_while_decoding(void) {
    /* 60 s at 44.1 kHz: 3.8 MB of output, against a 1 MiB ceiling */
    size_t size;
    uint8_t *w = make_wav(44100, 1, 1, 44100 * 60, NULL, &size);
    if (!w) return;
    const char *path = tmp_path("long44.wav");
    write_file(path, w, size);
    tg_free(w);
    ct_pcm p;
    /* the WAV's exact size is known: refused before decoding */
    CHECK_ERR(ct_pcm_load(path, 1 << 20, &p), TG_ERR_NO_MEMORY, "ceiling of 1 MiB");
    CHECK_ERR(ct_pcm_load(path, 1 << 20, &p), TG_ERR_NO_MEMORY, path);
    CHECK(p.samples == NULL && p.n == 0);
    CHECK_OK(ct_pcm_load(path, 4 << 20, &p));
    CHECK(p.n == 16000 * 60);
    ct_pcm_free(&p);
    if (!can_encode(__func__)) return;
    /* a compressed file is stopped while decoding, at the ceiling */
    const char *mp3 = tmp_path("long.mp3");
    if (!encode(FIXTURE_DIR "/audio/long.wav", "-b:a 32k", mp3)) return;
    tg_status st = ct_pcm_load(mp3, 1 << 20, &p);
    CHECK(tg_status_code(st) == TG_ERR_NO_MEMORY);
    if (st) {
        const char *m = tg_status_message(st);
        CHECK_MSG(strstr(m, "ceiling of 1 MiB") && strstr(m, "stopped decoding") &&
                      strstr(m, mp3),
                  "%s", m);
        printf("  %s\n", m);
    }
    tg_status_free(st);
    CHECK(p.samples == NULL);
}

static void test_one_hertz_wav_is_bounded(void) {
    /* issue 12 item 2: 96 KB of int16 declaring 1 Hz asked for 768 M
     * samples; 140 KB asks for 1.1 G samples (4.5 GB), over the default
     * ceiling: refused before anything is allocated, saying why */
    size_t size;
    uint8_t *w = make_wav(1, 1, 1, 70000, NULL, &size);
    if (!w) return;
    const char *path = tmp_path("1hz.wav");
    write_file(path, w, size);
    ct_pcm p;
    CHECK_ERR(ct_pcm_load(path, 0, &p), TG_ERR_NO_MEMORY,
              "70000 frames at 1 Hz would decode to 1120000000 samples");
    CHECK_ERR(ct_pcm_load(path, 0, &p), TG_ERR_NO_MEMORY, "ceiling of 4 GiB");
    tg_free(w);
    /* under the ceiling, a rate no recording uses is refused too */
    w = make_wav(1, 1, 1, 48000, NULL, &size);
    if (!w) return;
    write_file(path, w, size);
    CHECK_ERR(ct_pcm_load(path, 0, &p), TG_ERR_FORMAT, "sample rate 1 Hz is below 1000 Hz");
    tg_free(w);
}

static void test_nonfinite_sample_named_in_the_source(void) {
    /* issue 12 item 10: an Inf at 44.1 kHz was "sample 15654 is NaN", the
     * index after resampling and the kind after the resampler smeared it */
    size_t n = 44100, size;
    float *v = tg_calloc(n * 2, sizeof *v);
    if (!v) return;
    v[2 * 30000 + 1] = INFINITY;   /* frame 30000, right channel */
    uint8_t *w = make_wav(44100, 3, 2, n, v, &size);
    const char *path = tmp_path("inf.wav");
    if (w) write_file(path, w, size);
    ct_pcm p;
    CHECK_ERR(ct_pcm_load(path, 0, &p), TG_ERR_FORMAT, "sample 30000 (0.680 s, at the file's 44100 Hz) is infinite");
    tg_free(w);
    v[2 * 30000 + 1] = 0;
    v[2 * 12345] = NAN;
    w = make_wav(44100, 3, 2, n, v, &size);
    if (w) write_file(path, w, size);
    CHECK_ERR(ct_pcm_load(path, 0, &p), TG_ERR_FORMAT, "sample 12345 (0.280 s, at the file's 44100 Hz) is NaN");
    tg_free(w);
    tg_free(v);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_pcm: ct_pcm_load blocked on a FIFO\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
    _exit(2);
}

static void test_non_regular_inputs(void) {
    ct_pcm p;
    const char *fifo = tmp_path("fifo.wav");
    CHECK(mkfifo(fifo, 0600) == 0);
    signal(SIGALRM, on_alarm);
    alarm(5);
    CHECK_ERR(ct_pcm_load(fifo, 0, &p), TG_ERR_INVALID_ARG, "is a FIFO; only regular files");
    alarm(0);
    CHECK_ERR(ct_pcm_load("/dev/null", 0, &p), TG_ERR_INVALID_ARG, "/dev/null: is a character device");
    CHECK_ERR(ct_pcm_load(FIXTURE_DIR "/audio", 0, &p), TG_ERR_INVALID_ARG, "audio: is a directory");
    CHECK_ERR(ct_pcm_load("-", 0, &p), TG_ERR_UNSUPPORTED, "standard input is not supported");
    CHECK_ERR(ct_pcm_load(tmp_path("missing.wav"), 0, &p), TG_ERR_NOT_FOUND, "missing.wav: no such file");
    CHECK_ERR(ct_pcm_load(NULL, 0, &p), TG_ERR_INVALID_ARG, "NULL");
}

static void test_memory_input(void) {
    size_t size;
    float v[4] = {0.5f, -0.5f, 0.25f, 0};
    uint8_t *w = make_wav(16000, 3, 1, 4, v, &size);
    if (!w) return;
    ct_pcm p;
    CHECK_OK(ct_pcm_load_memory(w, size, "mem.wav", 0, &p));
    CHECK(p.n == 4 && p.samples && p.samples[0] == 0.5f && p.samples[2] == 0.25f);
    CHECK(!strcmp(p.codec, "pcm_f32le"));
    ct_pcm_free(&p);
    CHECK_ERR(ct_pcm_load_memory(w, 30, "mem.wav", 0, &p), TG_ERR_FORMAT, "mem.wav");
    tg_free(w);
    const char *v0 = ct_audio_decoder_version();
    CHECK(v0 && (ct_audio_has_ffmpeg() ? !strncmp(v0, "FFmpeg libavformat", 18)
                                       : !strcmp(v0, "built-in WAV reader (no FFmpeg)")));
    printf("  decoder: %s\n", v0);
}

TEST_MAIN(T(test_wav_through_pcm_load_equals_the_reader),
          T(test_formats_decode_close_to_the_wav), T(test_corrupt_truncated_and_no_audio),
          T(test_images_and_other_containers_are_refused),
          T(test_audio_beside_pictures_and_video_still_loads),
          T(test_not_audio), T(test_magic_bytes_without_ffmpeg), T(test_ceiling_while_decoding),
          T(test_one_hertz_wav_is_bounded), T(test_nonfinite_sample_named_in_the_source),
          T(test_non_regular_inputs), T(test_memory_input))
