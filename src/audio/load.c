/*
 * load.c: an audio file to the model's input signal, 16 kHz mono float.
 *
 * The seam where more decoders would plug in; today it is the WAV reader
 * (wav.c) followed by resampling (resample.c). Not here: format sniffing of
 * anything but WAV, streaming input.
 */
#include "audio.h"

tg_status ct_audio_load(const char *path, ct_audio *out) {
    tg_status st = ct_wav_read(path, out);
    if (st) return st;
    int rate = out->sample_rate;
    st = ct_audio_resample(out, 16000);
    if (st) {
        ct_audio_free(out);
        return tg_status_wrap(st, "%s (%d Hz)", path, rate);
    }
    return NULL;
}
