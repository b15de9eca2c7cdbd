/*
 * pcaudio_stub.c: a stand-in for libpcaudio.so.0 (Debian's libpcaudio0) in
 * the espeak-ng bundle that espeak_bundle.sh makes.
 *
 * libespeak-ng links libpcaudio for playing sound, and libpcaudio links ALSA
 * and PulseAudio (with them about 10 MB of libraries). The bundle only writes
 * WAV files (`espeak-ng -w`), a mode in which libespeak-ng never opens an
 * audio device, so this stub gives the same symbols and refuses a device.
 * Not here: any playing of sound.
 */
#include <stddef.h>
#include <stdint.h>

struct audio_object;

struct audio_object *create_audio_device_object(const char *device, const char *app,
                                                const char *description) {
    (void)device, (void)app, (void)description;
    return NULL;
}
int audio_object_open(struct audio_object *o, int format, uint32_t rate, uint8_t channels) {
    (void)o, (void)format, (void)rate, (void)channels;
    return -1;
}
void audio_object_close(struct audio_object *o) { (void)o; }
void audio_object_destroy(struct audio_object *o) { (void)o; }
int audio_object_write(struct audio_object *o, const void *data, size_t bytes) {
    (void)o, (void)data, (void)bytes;
    return -1;
}
int audio_object_drain(struct audio_object *o) { (void)o; return 0; }
int audio_object_flush(struct audio_object *o) { (void)o; return 0; }
const char *audio_object_strerror(struct audio_object *o, int error) {
    (void)o, (void)error;
    return "no audio device in this espeak-ng bundle (it writes WAV files only)";
}
