/*
 * test_config.c: both config.json layouts give the same hyperparameters for
 * the tiny model; absent keys take the released model's values; the token ids
 * of generation_config.json apply; and configs of other models, missing head
 * counts, wrong types and inconsistent values are refused with messages that
 * name the file and the key.
 *
 * The bad configs are made by editing the fixture's own config.json with
 * cJSON, so each case differs from a valid file in exactly one place.
 */
#include <cjson/cJSON.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "config.h"

#define TINY TEST_DATA_DIR "/tiny"

static cJSON *load_json(const char *path) {
    char *text = NULL;
    size_t n = 0;
    cJSON *j = NULL;
    tg_status st = tg_file_read(path, &text, &n);
    if (!st) st = tg_json_parse(text, n, path, &j);
    if (st) {
        fprintf(stderr, "%s\n", tg_status_message(st));
        tg_status_free(st);
    }
    tg_free(text);
    return j;
}

/* Parses the JSON document j (consumed) as config.json. */
static tg_status parse_doc(cJSON *j, ct_config *c) {
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    tg_status st = ct_config_parse(text, strlen(text), "edited/config.json", c);
    cJSON_free(text);
    return st;
}

/* Sets obj.path (dotted, intermediate objects must exist) to v, or deletes
 * it when v is NULL. */
static void set_key(cJSON *root, const char *path, cJSON *v) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    cJSON *o = root;
    char *key = buf, *dot;
    while ((dot = strchr(key, '.'))) {
        *dot = 0;
        o = cJSON_GetObjectItemCaseSensitive(o, key);
        key = dot + 1;
    }
    if (!o) {
        fprintf(stderr, "no %s\n", path);
        return;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    if (v) cJSON_AddItemToObject(o, key, v);
}

/* Edits one key of a fixture config and expects an error with needle. */
static void expect_bad(const char *layout, const char *path, cJSON *v, tg_code code,
                       const char *needle) {
    char file[256];
    snprintf(file, sizeof file, TINY "/%s/config.json", layout);
    cJSON *j = load_json(file);
    CHECK(j != NULL);
    if (!j) return;
    set_key(j, path, v);
    ct_config c;
    tg_status st = parse_doc(j, &c);
    CHECK_MSG(st != NULL, "%s: %s edited is accepted", layout, path);
    if (!st) return;
    const char *m = tg_status_message(st);
    CHECK_MSG(tg_status_code(st) == code, "%s %s: %s: %s", layout, path,
              tg_code_name(tg_status_code(st)), m);
    CHECK_MSG(strstr(m, "edited/config.json") != NULL, "no file in '%s'", m);
    CHECK_MSG(!needle || strstr(m, needle), "%s %s: '%s' lacks '%s'", layout, path, m, needle);
    tg_status_free(st);
}

static void check_tiny(const ct_config *c) {
    CHECK(c->enc_hidden == 64 && c->enc_layers == 2 && c->enc_heads == 4 && c->enc_ff == 256);
    CHECK(c->conv_kernel == 9 && c->subsampling_factor == 8 && c->subsampling_channels == 32);
    CHECK(c->n_mels == 128);
    CHECK(c->dec_hidden == 64 && c->dec_layers == 2 && c->dec_heads == 4 && c->dec_ff == 128);
    CHECK(c->dec_max_positions == 1024 && c->vocab_size == 16384);
    CHECK(c->decoder_start_token_id == 13764 && c->eos_token_id == 3 && c->pad_token_id == 2);
    CHECK(c->sample_rate == 16000);
    CHECK(c->max_audio_clip_s == 35.0 && c->overlap_chunk_s == 5.0);
}

static void both_layouts_give_the_tiny_dims(void) {
    ct_config hub, hf;
    memset(&hub, 0xaa, sizeof hub);
    memset(&hf, 0x55, sizeof hf);
    CHECK_OK(ct_config_load(TINY "/hub", &hub));
    CHECK_OK(ct_config_load(TINY "/hf", &hf));
    check_tiny(&hub);
    check_tiny(&hf);
}

/* The remote config has no token ids: they come from generation_config.json,
 * and without it they stay -1 (looked up by name later). */
static void hub_config_alone_has_no_token_ids(void) {
    char *text = NULL;
    size_t n = 0;
    CHECK_OK(tg_file_read(TINY "/hub/config.json", &text, &n));
    ct_config c;
    CHECK_OK(ct_config_parse(text, n, "hub/config.json", &c));
    CHECK(c.decoder_start_token_id == -1 && c.eos_token_id == -1 && c.pad_token_id == -1);
    CHECK(c.enc_ff == 256); /* d_model 64 x ff_expansion_factor 4 */
    tg_free(text);
    /* The native one carries its own. */
    CHECK_OK(tg_file_read(TINY "/hf/config.json", &text, &n));
    CHECK_OK(ct_config_parse(text, n, "hf/config.json", &c));
    CHECK(c.decoder_start_token_id == 13764 && c.eos_token_id == 3 && c.pad_token_id == 2);
    tg_free(text);
}

static void second_model_dims(void) {
    ct_config c;
    CHECK_OK(ct_config_load(TEST_DATA_DIR "/small2/hub", &c));
    CHECK(c.enc_hidden == 80 && c.enc_heads == 2 && c.conv_kernel == 7);
    CHECK(c.subsampling_channels == 24);
    CHECK(c.dec_hidden == 96 && c.dec_heads == 3 && c.dec_ff == 160);
    /* ff_expansion_factor 2 states 160; the weights (192) overrule it in the
     * loader, which is why enc_ff is only a hint for the remote layout. */
    CHECK(c.enc_ff == 160);
}

static void absent_keys_take_released_values(void) {
    const char *native = "{\"model_type\":\"cohere_asr\",\"num_attention_heads\":8}";
    ct_config c;
    CHECK_OK(ct_config_parse(native, strlen(native), "config.json", &c));
    CHECK(c.enc_hidden == 1280 && c.enc_layers == 48 && c.enc_heads == 8 && c.enc_ff == 5120);
    CHECK(c.conv_kernel == 9 && c.subsampling_factor == 8 && c.subsampling_channels == 256);
    CHECK(c.n_mels == 128);
    CHECK(c.dec_hidden == 1024 && c.dec_layers == 8 && c.dec_heads == 8 && c.dec_ff == 4096);
    /* no max_position_embeddings: 0, the weights' position table decides */
    CHECK(c.dec_max_positions == 0 && c.vocab_size == 16384 && c.pad_token_id == 2);
    CHECK(c.decoder_start_token_id == -1 && c.eos_token_id == -1);

    const char *remote = "{\"model_type\":\"cohere_asr\",\"encoder\":{\"n_heads\":8},"
                         "\"transf_decoder\":{\"config_dict\":{\"num_attention_heads\":8}},"
                         "\"encoder_config\":{\"hidden_size\":5}}";
    CHECK_OK(ct_config_parse(remote, strlen(remote), "config.json", &c));
    CHECK(c.enc_hidden == 1280 && c.enc_ff == 5120 && c.subsampling_channels == 256);
    CHECK(c.dec_hidden == 1024 && c.vocab_size == 16384 && c.dec_max_positions == 0);

    /* NeMo's subsampling_conv_channels -1 means d_model. */
    const char *minus = "{\"model_type\":\"cohere_asr\",\"encoder\":{\"n_heads\":4,\"d_model\":"
                        "64,\"subsampling_conv_channels\":-1},\"transf_decoder\":{\"config_dict\":"
                        "{\"num_attention_heads\":8}}}";
    CHECK_OK(ct_config_parse(minus, strlen(minus), "config.json", &c));
    CHECK(c.subsampling_channels == 64);
}

static void other_models_are_refused(void) {
    expect_bad("hub", "model_type", cJSON_CreateString("whisper"), TG_ERR_UNSUPPORTED,
               "\"whisper\" is not supported");
    expect_bad("hf", "model_type", cJSON_CreateString("parakeet"), TG_ERR_UNSUPPORTED,
               "cohere_asr");
    expect_bad("hf", "model_type", NULL, TG_ERR_FORMAT, "no model_type");
    expect_bad("hub", "model_type", cJSON_CreateNumber(1), TG_ERR_FORMAT, "model_type");
    expect_bad("hf", "encoder_config.model_type", cJSON_CreateString("conformer"),
               TG_ERR_FORMAT, "parakeet_encoder");
}

static void missing_or_bad_heads_are_refused(void) {
    expect_bad("hub", "encoder.n_heads", NULL, TG_ERR_FORMAT, "encoder.n_heads is missing");
    expect_bad("hub", "transf_decoder.config_dict.num_attention_heads", NULL, TG_ERR_FORMAT,
               "transf_decoder.config_dict.num_attention_heads is missing");
    expect_bad("hf", "num_attention_heads", NULL, TG_ERR_FORMAT,
               "num_attention_heads is missing");
    expect_bad("hf", "encoder_config.num_attention_heads", NULL, TG_ERR_FORMAT,
               "encoder_config.num_attention_heads is missing");
    expect_bad("hub", "encoder.n_heads", cJSON_CreateNumber(0), TG_ERR_FORMAT, "out of range");
    expect_bad("hf", "num_attention_heads", cJSON_CreateNumber(-4), TG_ERR_FORMAT,
               "out of range");
    expect_bad("hub", "encoder.n_heads", cJSON_CreateNumber(3), TG_ERR_FORMAT,
               "encoder width 64 is not divisible by its 3 heads");
    expect_bad("hub", "transf_decoder.config_dict.num_attention_heads", cJSON_CreateNumber(5),
               TG_ERR_FORMAT, "decoder width 64 is not divisible by its 5 heads");
    expect_bad("hf", "num_key_value_heads", cJSON_CreateNumber(2), TG_ERR_UNSUPPORTED,
               "num_key_value_heads");
    expect_bad("hf", "head_dim", cJSON_CreateNumber(32), TG_ERR_FORMAT, "head_dim");
}

static void wrong_types_and_values_are_refused(void) {
    expect_bad("hub", "encoder.d_model", cJSON_CreateString("64"), TG_ERR_FORMAT,
               "encoder.d_model must be an integer");
    expect_bad("hub", "encoder.n_layers", cJSON_CreateNumber(2.5), TG_ERR_FORMAT,
               "encoder.n_layers must be an integer");
    expect_bad("hf", "hidden_size", cJSON_CreateTrue(), TG_ERR_FORMAT,
               "hidden_size must be an integer");
    expect_bad("hf", "vocab_size", cJSON_CreateNumber(1e12), TG_ERR_FORMAT, "out of range");
    expect_bad("hf", "intermediate_size", cJSON_CreateNumber(0), TG_ERR_FORMAT,
               "intermediate_size");
    expect_bad("hub", "encoder", cJSON_CreateString("x"), TG_ERR_FORMAT, "\"encoder\"");
    expect_bad("hub", "transf_decoder.config_dict", NULL, TG_ERR_FORMAT, "config_dict");
    expect_bad("hf", "encoder_config", cJSON_CreateNumber(1), TG_ERR_FORMAT, "encoder_config");
    expect_bad("hub", "head", cJSON_CreateNumber(1), TG_ERR_FORMAT, "\"head\" must be an object");
    expect_bad("hub", "preprocessor", cJSON_CreateArray(), TG_ERR_FORMAT, "\"preprocessor\"");
    expect_bad("hub", "encoder.ff_expansion_factor", cJSON_CreateNumber(0.3), TG_ERR_FORMAT,
               "ff_expansion_factor");
    expect_bad("hub", "head.num_classes", cJSON_CreateNumber(1000), TG_ERR_FORMAT,
               "vocabulary sizes disagree");
    expect_bad("hub", "encoder.subsampling_factor", cJSON_CreateNumber(6), TG_ERR_UNSUPPORTED,
               "power of two");
    expect_bad("hf", "encoder_config.conv_kernel_size", cJSON_CreateNumber(8),
               TG_ERR_UNSUPPORTED, "even");
    expect_bad("hub", "overlap_chunk_second", cJSON_CreateNumber(40), TG_ERR_FORMAT,
               "overlap_chunk_second");
    expect_bad("hub", "max_audio_clip_s", cJSON_CreateString("35"), TG_ERR_FORMAT,
               "max_audio_clip_s");
    expect_bad("hub", "sample_rate", cJSON_CreateNumber(8000), TG_ERR_FORMAT,
               "preprocessor.sample_rate");
    expect_bad("hf", "eos_token_id", cJSON_CreateNumber(16384), TG_ERR_FORMAT,
               "eos_token_id 16384 is outside the vocabulary");
    expect_bad("hf", "pad_token_id", cJSON_CreateString("2"), TG_ERR_FORMAT, "pad_token_id");

    ct_config c;
    CHECK_ERR(ct_config_parse("[1]", 3, "config.json", &c), TG_ERR_FORMAT, "not a JSON object");
    CHECK_ERR(ct_config_parse("{", 1, "config.json", &c), TG_ERR_FORMAT, "config.json");
    CHECK_ERR(ct_config_parse("", 0, "config.json", &c), TG_ERR_FORMAT, "config.json");
}

/* ------------------------------------------------- generation_config.json */

static char tmp_root[64];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_tmp(void) { nftw(tmp_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void write_file(const char *name, const char *text) {
    if (!tmp_root[0]) {
        snprintf(tmp_root, sizeof tmp_root, "/tmp/ct-test-cfg-XXXXXX");
        if (!mkdtemp(tmp_root)) {
            perror("mkdtemp");
            exit(1);
        }
        atexit(remove_tmp);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp_root, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void generation_config_sets_token_ids(void) {
    write_file("config.json", "{\"model_type\":\"cohere_asr\",\"num_attention_heads\":8,"
                              "\"eos_token_id\":7}");
    ct_config c;
    CHECK_OK(ct_config_load(tmp_root, &c));
    CHECK(c.eos_token_id == 7 && c.decoder_start_token_id == -1);

    /* A list of EOS ids (allowed by HF): the first one is used. */
    write_file("generation_config.json", "{\"decoder_start_token_id\":13764,"
                                         "\"eos_token_id\":[3,5],\"pad_token_id\":null}");
    CHECK_OK(ct_config_load(tmp_root, &c));
    CHECK(c.eos_token_id == 3 && c.decoder_start_token_id == 13764 && c.pad_token_id == 2);

    write_file("generation_config.json", "{\"eos_token_id\":\"3\"}");
    CHECK_ERR(ct_config_load(tmp_root, &c), TG_ERR_FORMAT, "generation_config.json: eos_token_id");
    write_file("generation_config.json", "{\"eos_token_id\":99999}");
    CHECK_ERR(ct_config_load(tmp_root, &c), TG_ERR_FORMAT, "generation_config.json");
    write_file("generation_config.json", "{\"eos_token_id\":");
    CHECK_ERR(ct_config_load(tmp_root, &c), TG_ERR_FORMAT, "generation_config.json");
    write_file("generation_config.json", "[]");
    CHECK_ERR(ct_config_load(tmp_root, &c), TG_ERR_FORMAT, "not a JSON object");

    CHECK_ERR(ct_config_load(TINY "/no-such-model", &c), TG_ERR_NOT_FOUND, "config.json");
}

/* issue 12 item 4: config.json (or generation_config.json) that is a FIFO
 * or /dev/zero fails at once, naming the file, instead of blocking or
 * reading until memory runs out; the alarm turns a hang into a failure. */
static void special_files_as_config_fail_fast(void) {
    char dir[] = "/tmp/ct-test-config-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    char cfg[128], gen[128];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(gen, sizeof gen, "%s/generation_config.json", dir);
    ct_config c;
    alarm(10);
    CHECK(symlink("/dev/zero", cfg) == 0);
    CHECK_ERR(ct_config_load(dir, &c), TG_ERR_INVALID_ARG, "config.json");
    unlink(cfg);
    CHECK(mkfifo(cfg, 0600) == 0);
    CHECK_ERR(ct_config_load(dir, &c), TG_ERR_INVALID_ARG, "a FIFO");
    unlink(cfg);
    /* a good config.json next to a FIFO generation_config.json */
    CHECK(symlink(TINY "/hub/config.json", cfg) == 0);
    CHECK(mkfifo(gen, 0600) == 0);
    CHECK_ERR(ct_config_load(dir, &c), TG_ERR_INVALID_ARG, "generation_config.json");
    alarm(0);
    unlink(gen);
    unlink(cfg);
    rmdir(dir);
}

TEST_MAIN(T(both_layouts_give_the_tiny_dims), T(hub_config_alone_has_no_token_ids),
          T(second_model_dims), T(absent_keys_take_released_values),
          T(other_models_are_refused), T(missing_or_bad_heads_are_refused),
          T(wrong_types_and_values_are_refused), T(generation_config_sets_token_ids),
          T(special_files_as_config_fail_fast))
