/*
 * inspect.c: ct_model_inspect, a look at a checkpoint directory without
 * loading it (cohere_transcribe.h; `cohere-transcribe doctor`).
 *
 * It runs the same validating readers a session uses (config.json, the
 * safetensors headers, the tokenizer), so a directory that passes here
 * fails a load only on what needs the weights' bytes (non-finite values,
 * shapes the graphs reject). The weights are mapped but never read: only
 * headers are parsed.
 *
 * Not here: loading onto a backend, checking values.
 */
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "cohere_transcribe.h"
#include "config.h"
#include "safetensors.h"
#include "tokenizer.h"

ct_status ct_model_inspect(const char *dir, ct_model_info *out) {
    if (!dir || !out) return tg_status_new(TG_ERR_INVALID_ARG, "ct_model_inspect: NULL argument");
    memset(out, 0, sizeof *out);
    ct_model_info info = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = NULL;
    size_t size = 0;
    tg_status st = tg_file_read(path, &text, &size);
    if (st) return st;
    info.config_hash = tg_hash64(text, size, 0);
    ct_config cfg;
    st = ct_config_parse(text, size, path, &cfg);
    tg_free(text);
    if (st) return st;
    info.enc_layers = cfg.enc_layers;
    info.enc_hidden = cfg.enc_hidden;
    info.dec_layers = cfg.dec_layers;
    info.dec_hidden = cfg.dec_hidden;
    info.vocab = cfg.vocab_size;

    st_set *set = NULL;
    if ((st = st_open_dir(dir, &set))) return st;
    int count[ST_BOOL + 1] = {0};
    info.n_tensors = st_count(set);
    for (int i = 0; i < info.n_tensors; i++) {
        const st_tensor *t = st_at(set, i);
        int64_t n = 1;
        for (int d = 0; d < t->n_dims; d++) n *= t->shape[d];
        info.n_params += n;
        count[t->dtype]++;
        if (t->file + 1 > info.n_shards) info.n_shards = t->file + 1;
    }
    st_close(set);
    size_t used = 0;
    for (int k = 0; k <= ST_BOOL; k++) {
        if (!count[k]) continue;
        int w = snprintf(info.dtypes + used, sizeof info.dtypes - used, "%s%s x %d",
                         used ? ", " : "", st_dtype_name((st_dtype)k), count[k]);
        if (w < 0 || (size_t)w >= sizeof info.dtypes - used) break;
        used += (size_t)w;
    }

    ct_tokenizer *tok = NULL;
    if ((st = ct_tokenizer_load_dir(dir, &tok))) return st;
    info.tokenizer_size = ct_tokenizer_size(tok);
    ct_tokenizer_free(tok);
    *out = info;
    return NULL;
}
