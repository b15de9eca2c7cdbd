/*
 * fuzz_config.c: libFuzzer target for ct_config_parse (config.json of either
 * layout). Any input must be refused with a status or give a config whose
 * dims are positive and whose head counts divide the widths; anything else
 * aborts. generation_config.json goes through the same token-id code and is
 * not fuzzed separately.
 */
#include <stdint.h>
#include <stdlib.h>

#include "base.h"
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_log_set_level(TG_LOG_NONE);
    ct_config c;
    tg_status st = ct_config_parse((const char *)data, size, "fuzz/config.json", &c);
    if (st) {
        tg_status_free(st);
        return 0;
    }
    int dims[] = {c.enc_hidden, c.enc_layers, c.enc_heads, c.enc_ff, c.conv_kernel,
                  c.subsampling_factor, c.subsampling_channels, c.n_mels, c.dec_hidden,
                  c.dec_layers, c.dec_heads, c.dec_ff, c.vocab_size, c.sample_rate};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] <= 0) abort();
    /* 0: the config does not say, the weights' position table decides */
    if (c.dec_max_positions < 0) abort();
    if (c.enc_hidden % c.enc_heads || c.dec_hidden % c.dec_heads) abort();
    if (c.eos_token_id >= c.vocab_size || c.decoder_start_token_id >= c.vocab_size) abort();
    if (!(c.overlap_chunk_s < c.max_audio_clip_s)) abort();
    return 0;
}
