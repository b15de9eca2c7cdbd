/*
 * fuzz_audio.c: libFuzzer target for the audio loader on memory input:
 * ct_pcm_load_memory on arbitrary bytes (WAV by our reader, anything else
 * through FFmpeg when the build has it) must succeed with finite samples or
 * return an error; never crash, hang, read out of bounds or leak.
 *
 * The ceiling is 64 MiB so that a header declaring hours of audio is
 * refused (or stopped) quickly rather than decoded; the ceiling's own
 * correctness is tests/audio/test_pcm.c's job.
 *
 * Seeds: fuzz/corpus/fuzz_wav/ serves (WAVs); add small files of other
 * formats to fuzz/corpus/fuzz_audio/.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "audio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_pcm p;
    tg_status st = ct_pcm_load_memory(data, size, "fuzz", (size_t)64 << 20, &p);
    if (st) {
        if (p.samples || p.n) abort();   /* failure leaves the output unset */
        tg_status_free(st);
        return 0;
    }
    if (p.n == 0 || !p.samples || p.source_rate < CT_AUDIO_MIN_RATE) abort();
    volatile double sum = 0.0;
    for (size_t i = 0; i < p.n; i++) {
        if (!isfinite(p.samples[i])) abort();   /* non-finite input is an error */
        sum += p.samples[i];
    }
    (void)sum;
    ct_pcm_free(&p);
    return 0;
}
