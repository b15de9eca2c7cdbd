/*
 * test_api_block.c: the public audio block of include/cohere_transcribe.h
 * and its copy in src/audio/audio.h are the same text.
 *
 * Why a copy: the functions are implemented in the audio layer, which may
 * not include the asr layer's public header (the layers/ tests hold it to
 * that), so audio.h repeats the block under the same include guard
 * (CT_AUDIO_PUBLIC_BLOCK); whichever header comes first defines the types.
 * Two copies that drift apart would be two different ct_pcm structs, so
 * this test compares them byte for byte, from the opening marker line to
 * the closing one.
 */
#include <string.h>

#include "base.h"
#include "check.h"

#define OPEN_MARK "/* ---- audio files and segments (src/audio) ---- */"
#define CLOSE_MARK "/* ---- end of audio files and segments ---- */"

/* The block of the file at path, as a new string (tg_free); NULL if absent. */
static char *block_of(const char *path) {
    char *text = NULL;
    size_t n = 0;
    CHECK_OK(tg_file_read(path, &text, &n));
    if (!text) return NULL;
    char *a = strstr(text, OPEN_MARK);
    char *b = a ? strstr(a, CLOSE_MARK) : NULL;
    CHECK_MSG(a && b, "%s: the audio block's markers are missing", path);
    char *out = NULL;
    if (a && b) {
        size_t len = (size_t)(b - a) + strlen(CLOSE_MARK);
        out = tg_malloc(len + 1);
        if (out) {
            memcpy(out, a, len);
            out[len] = 0;
        }
    }
    tg_free(text);
    return out;
}

static void test_public_block_matches_audio_h(void) {
    char *pub = block_of(TEST_DATA_DIR "/../../include/cohere_transcribe.h");
    char *own = block_of(TEST_DATA_DIR "/../../src/audio/audio.h");
    CHECK(pub && own);
    if (pub && own) CHECK_MSG(!strcmp(pub, own), "the audio block of include/cohere_transcribe.h "
                                                 "and src/audio/audio.h differ: copy one to the other");
    tg_free(pub);
    tg_free(own);
}

TEST_MAIN(T(test_public_block_matches_audio_h))
