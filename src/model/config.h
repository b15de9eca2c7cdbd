/*
 * config.h: the cohere_asr hyperparameters, from either config.json layout
 * (internal).
 *
 * The Hub's remote-code layout (encoder / transf_decoder.config_dict / head /
 * preprocessor) and the native transformers layout (encoder_config,
 * hidden_size, ...) both map to one struct. Dimensions that the weights also
 * carry are checked against the tensor shapes by the loader, not trusted from
 * here; head counts come only from here.
 */
#ifndef CT_CONFIG_H
#define CT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "tg_status.h"

typedef struct ct_config {
    /* encoder */
    int enc_hidden;        /* d_model / hidden_size                   */
    int enc_layers;
    int enc_heads;
    int enc_ff;            /* intermediate size                       */
    int conv_kernel;
    int subsampling_factor;
    int subsampling_channels;
    int n_mels;
    /* decoder */
    int dec_hidden;
    int dec_layers;
    int dec_heads;
    int dec_ff;
    int dec_max_positions; /* 0 when config.json does not say: the position table decides */
    int vocab_size;
    /* tokens (from config.json / generation_config.json when present) */
    int decoder_start_token_id; /* -1 when absent: looked up by name */
    int eos_token_id;           /* -1 when absent */
    int pad_token_id;           /* -1 when absent */
    /* audio */
    int sample_rate;            /* 16000 */
    double max_audio_clip_s;    /* 35 */
    double overlap_chunk_s;     /* 5  */
} ct_config;

/* Parses config.json text; `what` names the file in errors. Rejects a config
 * of another model (model_type other than cohere_asr) and missing or
 * non-positive head counts. */
tg_status ct_config_parse(const char *text, size_t size, const char *what,
                          ct_config *out_config);
/* Reads DIR/config.json and, when present, DIR/generation_config.json. */
tg_status ct_config_load(const char *dir, ct_config *out_config);

#endif
