/*
 * config.c: cohere_asr hyperparameters from config.json (both layouts) and
 * generation_config.json.
 *
 * Two layouts exist for one model (spec 1.1): the Hub's remote-code config
 * (NeMo names under "encoder", "transf_decoder.config_dict", "head") and the
 * native transformers config ("encoder_config", top-level decoder keys). The
 * layout is told by the presence of "encoder" or "transf_decoder". Keys that
 * are absent take the released model's values (spec 1.2, 1.3), as the native
 * class does, except head counts: the weights cannot tell a wrong head count,
 * so a section that exists must state its own.
 *
 * Every value is type-checked (an integer must be a JSON number with no
 * fraction; booleans and strings are rejected) and range-checked, and each
 * error names the file and the key. What this file does not do: check dims
 * against the weights (the loader does that) or read preprocessor settings
 * other than the sample rate (the feature extractor's numbers are fixed by
 * spec 4).
 */
#include "config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"

/* Far above any real value, low enough that products of two stay in int64. */
#define CFG_MAX_INT (1 << 24)

/* root[key] when it is an object, else NULL. */
static const cJSON *get_obj(const cJSON *root, const char *key) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsObject(o) ? o : NULL;
}

/* Reads obj[key] as an integer in [lo, CFG_MAX_INT]. Absent or null gives def;
 * when required, absence is an error. `section` prefixes the key in messages. */
static tg_status get_int(const cJSON *obj, const char *section, const char *key, int def,
                         int required, int lo, const char *what, int *out) {
    const char *dot = section[0] ? "." : "";
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return tg_status_new(TG_ERR_FORMAT, "%s: %s%s%s is missing", what, section, dot,
                                 key);
        *out = def;
        return NULL;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return tg_status_new(TG_ERR_FORMAT, "%s: %s%s%s must be an integer", what, section,
                             dot, key);
    if (v->valuedouble < lo || v->valuedouble > CFG_MAX_INT)
        return tg_status_new(TG_ERR_FORMAT, "%s: %s%s%s = %.17g is out of range [%d, %d]",
                             what, section, dot, key, v->valuedouble, lo, CFG_MAX_INT);
    *out = (int)v->valuedouble;
    return NULL;
}

/* A token id: absent or null gives -1; HF allows a list for eos_token_id, of
 * which the first is the one generation stops at here. */
static tg_status get_token(const cJSON *obj, const char *key, const char *what, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsArray(v)) {
        if (cJSON_GetArraySize(v) == 0) {
            *out = -1;
            return NULL;
        }
        if (cJSON_GetArraySize(v) > 1)
            TG_DEBUG("%s: %s has several ids; using the first", what, key);
        v = cJSON_GetArrayItem(v, 0);
    }
    if (!v || cJSON_IsNull(v)) return NULL; /* keep what is there */
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < 0 || v->valuedouble > CFG_MAX_INT)
        return tg_status_new(TG_ERR_FORMAT, "%s: %s must be a non-negative integer id", what,
                             key);
    *out = (int)v->valuedouble;
    return NULL;
}

/* A positive number of seconds (or Hz); absent gives def. */
static tg_status get_real(const cJSON *obj, const char *key, double def, double lo,
                          const char *what, double *out) {
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return NULL;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > 1e6)
        return tg_status_new(TG_ERR_FORMAT, "%s: %s must be a number >= %g", what, key, lo);
    *out = v->valuedouble;
    return NULL;
}

#define TRY(expr)              \
    do {                       \
        st = (expr);           \
        if (st) return st;     \
    } while (0)

/* Hub remote-code layout (NeMo names). */
static tg_status parse_remote(const cJSON *root, const char *what, ct_config *c) {
    tg_status st;
    const cJSON *enc = cJSON_GetObjectItemCaseSensitive(root, "encoder");
    const cJSON *td = cJSON_GetObjectItemCaseSensitive(root, "transf_decoder");
    if (!cJSON_IsObject(enc))
        return tg_status_new(TG_ERR_FORMAT, "%s: \"encoder\" must be an object", what);
    if (!cJSON_IsObject(td))
        return tg_status_new(TG_ERR_FORMAT, "%s: \"transf_decoder\" must be an object", what);
    const cJSON *dec = get_obj(td, "config_dict");
    if (!dec)
        return tg_status_new(TG_ERR_FORMAT, "%s: transf_decoder.config_dict must be an object",
                             what);

    TRY(get_int(enc, "encoder", "d_model", 1280, 0, 1, what, &c->enc_hidden));
    TRY(get_int(enc, "encoder", "n_layers", 48, 0, 1, what, &c->enc_layers));
    TRY(get_int(enc, "encoder", "n_heads", 0, 1, 1, what, &c->enc_heads));
    /* NeMo states the FF width as a factor of d_model. */
    const cJSON *ffx = cJSON_GetObjectItemCaseSensitive(enc, "ff_expansion_factor");
    if (!ffx || cJSON_IsNull(ffx)) {
        c->enc_ff = 4 * c->enc_hidden;
    } else {
        double ff = cJSON_IsNumber(ffx) ? ffx->valuedouble * c->enc_hidden : -1;
        if (!(ff >= 1) || ff > CFG_MAX_INT || ff != floor(ff))
            return tg_status_new(TG_ERR_FORMAT,
                                 "%s: encoder.ff_expansion_factor must be a positive number "
                                 "giving an integer width with d_model %d",
                                 what, c->enc_hidden);
        c->enc_ff = (int)ff;
    }
    TRY(get_int(enc, "encoder", "conv_kernel_size", 9, 0, 1, what, &c->conv_kernel));
    TRY(get_int(enc, "encoder", "subsampling_factor", 8, 0, 1, what, &c->subsampling_factor));
    /* NeMo's -1 means "as wide as d_model". */
    TRY(get_int(enc, "encoder", "subsampling_conv_channels", 256, 0, -1, what,
                &c->subsampling_channels));
    if (c->subsampling_channels == -1) c->subsampling_channels = c->enc_hidden;
    if (c->subsampling_channels == 0)
        return tg_status_new(TG_ERR_FORMAT, "%s: encoder.subsampling_conv_channels must be "
                             "positive (or -1)", what);
    TRY(get_int(enc, "encoder", "feat_in", 128, 0, 1, what, &c->n_mels));

    const char *ds = "transf_decoder.config_dict";
    TRY(get_int(dec, ds, "hidden_size", 1024, 0, 1, what, &c->dec_hidden));
    TRY(get_int(dec, ds, "num_layers", 8, 0, 1, what, &c->dec_layers));
    TRY(get_int(dec, ds, "num_attention_heads", 0, 1, 1, what, &c->dec_heads));
    TRY(get_int(dec, ds, "inner_size", 4096, 0, 1, what, &c->dec_ff));
    TRY(get_int(dec, ds, "max_sequence_length", 0, 0, 1, what, &c->dec_max_positions));

    /* The vocabulary is stated up to three times; all that are present must agree. */
    int v_top, v_dec, v_head;
    const cJSON *head = cJSON_GetObjectItemCaseSensitive(root, "head");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "preprocessor");
    if ((head && !cJSON_IsObject(head)) || (pre && !cJSON_IsObject(pre)))
        return tg_status_new(TG_ERR_FORMAT, "%s: \"%s\" must be an object", what,
                             head && !cJSON_IsObject(head) ? "head" : "preprocessor");
    TRY(get_int(root, "", "vocab_size", 0, 0, 1, what, &v_top));
    TRY(get_int(dec, ds, "vocab_size", 0, 0, 1, what, &v_dec));
    TRY(get_int(head, "head", "num_classes", 0, 0, 1, what, &v_head));
    int v = v_head ? v_head : v_dec ? v_dec : v_top ? v_top : 16384;
    if ((v_top && v_top != v) || (v_dec && v_dec != v))
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: vocabulary sizes disagree (vocab_size %d, "
                             "transf_decoder.config_dict.vocab_size %d, head.num_classes %d)",
                             what, v_top, v_dec, v_head);
    c->vocab_size = v;

    int sr_pre = 0;
    TRY(get_int(pre, "preprocessor", "sample_rate", 0, 0, 1, what, &sr_pre));
    TRY(get_int(root, "", "sample_rate", sr_pre ? sr_pre : 16000, 0, 1, what,
                &c->sample_rate));
    if (sr_pre && sr_pre != c->sample_rate)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: sample_rate %d disagrees with preprocessor.sample_rate %d",
                             what, c->sample_rate, sr_pre);
    return NULL;
}

/* Native transformers layout. */
static tg_status parse_native(const cJSON *root, const char *what, ct_config *c) {
    tg_status st;
    const cJSON *enc = cJSON_GetObjectItemCaseSensitive(root, "encoder_config");
    if (enc && !cJSON_IsNull(enc)) {
        if (!cJSON_IsObject(enc))
            return tg_status_new(TG_ERR_FORMAT, "%s: encoder_config must be an object", what);
        const cJSON *mt = cJSON_GetObjectItemCaseSensitive(enc, "model_type");
        if (mt && !(cJSON_IsString(mt) && strcmp(mt->valuestring, "parakeet_encoder") == 0))
            return tg_status_new(TG_ERR_FORMAT,
                                 "%s: encoder_config.model_type must be \"parakeet_encoder\"",
                                 what);
    } else {
        enc = NULL; /* spec 1.1: the class's defaults are the released encoder */
    }
    const char *es = "encoder_config";
    TRY(get_int(enc, es, "hidden_size", 1280, 0, 1, what, &c->enc_hidden));
    TRY(get_int(enc, es, "num_hidden_layers", 48, 0, 1, what, &c->enc_layers));
    TRY(get_int(enc, es, "num_attention_heads", 8, enc != NULL, 1, what, &c->enc_heads));
    TRY(get_int(enc, es, "intermediate_size", 5120, 0, 1, what, &c->enc_ff));
    TRY(get_int(enc, es, "conv_kernel_size", 9, 0, 1, what, &c->conv_kernel));
    TRY(get_int(enc, es, "subsampling_factor", 8, 0, 1, what, &c->subsampling_factor));
    TRY(get_int(enc, es, "subsampling_conv_channels", 256, 0, 1, what,
                &c->subsampling_channels));
    TRY(get_int(enc, es, "num_mel_bins", 128, 0, 1, what, &c->n_mels));
    if (enc) {
        int kv = 0;
        TRY(get_int(enc, es, "num_key_value_heads", 0, 0, 1, what, &kv));
        if (kv && kv != c->enc_heads)
            return tg_status_new(TG_ERR_UNSUPPORTED,
                                 "%s: encoder_config.num_key_value_heads %d differs from "
                                 "num_attention_heads %d (grouped attention is not supported)",
                                 what, kv, c->enc_heads);
    }

    TRY(get_int(root, "", "hidden_size", 1024, 0, 1, what, &c->dec_hidden));
    TRY(get_int(root, "", "num_hidden_layers", 8, 0, 1, what, &c->dec_layers));
    TRY(get_int(root, "", "num_attention_heads", 0, 1, 1, what, &c->dec_heads));
    TRY(get_int(root, "", "intermediate_size", 4096, 0, 1, what, &c->dec_ff));
    TRY(get_int(root, "", "max_position_embeddings", 0, 0, 1, what,
                &c->dec_max_positions));
    TRY(get_int(root, "", "vocab_size", 16384, 0, 1, what, &c->vocab_size));
    int kv = 0;
    TRY(get_int(root, "", "num_key_value_heads", 0, 0, 1, what, &kv));
    if (kv && kv != c->dec_heads)
        return tg_status_new(TG_ERR_UNSUPPORTED,
                             "%s: num_key_value_heads %d differs from num_attention_heads %d "
                             "(grouped attention is not supported)",
                             what, kv, c->dec_heads);
    int head_dim = 0;
    TRY(get_int(root, "", "head_dim", 0, 0, 1, what, &head_dim));
    if (head_dim && head_dim * c->dec_heads != c->dec_hidden)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: head_dim %d x num_attention_heads %d != hidden_size %d", what,
                             head_dim, c->dec_heads, c->dec_hidden);
    c->pad_token_id = 2; /* the class default (spec 1.3) */
    TRY(get_int(root, "", "sample_rate", 16000, 0, 1, what, &c->sample_rate));
    return NULL;
}

static tg_status check_dims(const ct_config *c, const char *what) {
    if (c->enc_hidden % c->enc_heads)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: encoder width %d is not divisible by its %d heads", what,
                             c->enc_hidden, c->enc_heads);
    if (c->dec_hidden % c->dec_heads)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: decoder width %d is not divisible by its %d heads", what,
                             c->dec_hidden, c->dec_heads);
    int f = c->subsampling_factor;
    if (f < 2 || (f & (f - 1)))
        return tg_status_new(TG_ERR_UNSUPPORTED,
                             "%s: subsampling factor %d is not a power of two >= 2", what, f);
    if (c->conv_kernel % 2 == 0)
        return tg_status_new(TG_ERR_UNSUPPORTED,
                             "%s: conv kernel size %d is even (\"same\" padding needs odd)",
                             what, c->conv_kernel);
    if (c->overlap_chunk_s >= c->max_audio_clip_s)
        return tg_status_new(TG_ERR_FORMAT,
                             "%s: overlap_chunk_second %g must be below max_audio_clip_s %g",
                             what, c->overlap_chunk_s, c->max_audio_clip_s);
    const int *ids[] = {&c->decoder_start_token_id, &c->eos_token_id, &c->pad_token_id};
    const char *names[] = {"decoder_start_token_id", "eos_token_id", "pad_token_id"};
    for (int i = 0; i < 3; i++)
        if (*ids[i] >= c->vocab_size)
            return tg_status_new(TG_ERR_FORMAT, "%s: %s %d is outside the vocabulary (%d)",
                                 what, names[i], *ids[i], c->vocab_size);
    return NULL;
}

/* Applies the token ids of a config or generation config. */
static tg_status apply_tokens(const cJSON *root, const char *what, ct_config *c) {
    tg_status st;
    TRY(get_token(root, "decoder_start_token_id", what, &c->decoder_start_token_id));
    TRY(get_token(root, "eos_token_id", what, &c->eos_token_id));
    TRY(get_token(root, "pad_token_id", what, &c->pad_token_id));
    return NULL;
}

tg_status ct_config_parse(const char *text, size_t size, const char *what,
                          ct_config *out_config) {
    cJSON *root = NULL;
    ct_config c;
    memset(&c, 0, sizeof c);
    c.decoder_start_token_id = c.eos_token_id = c.pad_token_id = -1;
    if (!what) what = "config.json";

    tg_status st = tg_json_parse(text, size, what, &root);
    if (st) return st;
    if (!cJSON_IsObject(root)) {
        st = tg_status_new(TG_ERR_FORMAT, "%s: not a JSON object", what);
        goto done;
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (!cJSON_IsString(mt)) {
        st = tg_status_new(TG_ERR_FORMAT,
                           "%s: no model_type; expected \"cohere_asr\" (is this the config of "
                           "a Cohere Transcribe model?)",
                           what);
        goto done;
    }
    if (strcmp(mt->valuestring, "cohere_asr") != 0) {
        st = tg_status_new(TG_ERR_UNSUPPORTED,
                           "%s: model_type \"%s\" is not supported; this program runs "
                           "\"cohere_asr\" (Cohere Transcribe) models only",
                           what, mt->valuestring);
        goto done;
    }
    int remote = cJSON_GetObjectItemCaseSensitive(root, "encoder") != NULL ||
                 cJSON_GetObjectItemCaseSensitive(root, "transf_decoder") != NULL;
    st = remote ? parse_remote(root, what, &c) : parse_native(root, what, &c);
    if (st) goto done;
    st = get_real(root, "max_audio_clip_s", 35.0, 1.0, what, &c.max_audio_clip_s);
    if (st) goto done;
    st = get_real(root, "overlap_chunk_second", 5.0, 0.0, what, &c.overlap_chunk_s);
    if (st) goto done;
    st = apply_tokens(root, what, &c);
    if (st) goto done;
    st = check_dims(&c, what);
    if (st) goto done;
    *out_config = c;
done:
    tg_json_free(root);
    return st;
}

tg_status ct_config_load(const char *dir, ct_config *out_config) {
    tg_status st = NULL;
    char *path = NULL, *text = NULL;
    cJSON *gen = NULL;
    size_t size = 0, n = strlen(dir) + 32;
    ct_config c;

    path = tg_malloc(n);
    if (!path) return tg_status_new(TG_ERR_NO_MEMORY, "loading config from %s: out of memory", dir);
    snprintf(path, n, "%s/config.json", dir);
    st = tg_file_read(path, &text, &size);
    if (st) goto done;
    st = ct_config_parse(text, size, path, &c);
    if (st) goto done;
    tg_free(text);
    text = NULL;

    /* HF generation reads its token ids from here when the file exists. */
    snprintf(path, n, "%s/generation_config.json", dir);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        st = tg_file_read(path, &text, &size);
        if (st) goto done;
        st = tg_json_parse(text, size, path, &gen);
        if (st) goto done;
        if (!cJSON_IsObject(gen)) {
            st = tg_status_new(TG_ERR_FORMAT, "%s: not a JSON object", path);
            goto done;
        }
        st = apply_tokens(gen, path, &c);
        if (st) goto done;
        st = check_dims(&c, path);
        if (st) goto done;
    }
    *out_config = c;
done:
    tg_json_free(gen);
    tg_free(text);
    tg_free(path);
    return st;
}
