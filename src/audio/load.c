/*
 * load.c: an audio file to the model's input signal, 16 kHz mono float, in
 * the internal ct_audio form the session uses.
 *
 * A thin adapter over ct_pcm_load (pcm.c), which reads WAV itself and
 * everything else through FFmpeg when the build has it, in blocks under the
 * default memory ceiling. Not here: the ceiling as an option (callers that
 * need one call ct_pcm_load), streaming input.
 */
#include <string.h>

#include "audio.h"

tg_status ct_audio_load(const char *path, ct_audio *out) {
    memset(out, 0, sizeof *out);
    ct_pcm p;
    tg_status st = ct_pcm_load(path, 0, &p);
    if (st) return st;
    out->samples = p.samples;
    out->n = p.n;
    out->sample_rate = 16000;
    return NULL;
}
