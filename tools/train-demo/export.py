"""Writes a train.py checkpoint as a model folder in the published Hub layout, for our engine.

The folder holds what a user's download of CohereLabs/cohere-transcribe-03-2026 holds and our
engine reads (README, "The checkpoint directory"): config.json in the Hub's remote-code
layout (nested `encoder`, `transf_decoder.config_dict`, `head`, `preprocessor`),
model.safetensors in bf16 with the NeMo-style names (plus the unused
preprocessor.featurizer.* and num_batches_tracked entries that the Hub file has),
tokenizer.model and generation_config.json (decoder_start_token_id = the id of "▁"). The
name mapping is shared/reference/make_fixtures.py's, which transformers' own loader was
checked against. `load_hf` reads such a folder back into transformers'
CohereAsrForConditionalGeneration (by the reverse mapping), so that eval.py runs the very
weights that our engine runs.

usage: python3 export.py --ckpt .demo/ckpt/small.pt --tokenizer .demo/data/tokenizer.model \
         --out models/cohere-demo-en
Not here: the CTC head (training only; dropped), tokenizer.json, a model card (written by
hand from eval.py's numbers).
"""
import argparse
import json
import os
import shutil
import sys

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GUARD, N_FFT, NMEL, PREEMPH, SR, WIN, decoder_positions, mel_filters  # noqa: E402

RULES = [
    ("model.encoder.subsampling.layers.", "encoder.pre_encode.conv."),
    ("model.encoder.subsampling.linear.", "encoder.pre_encode.out."),
    ("model.encoder.layers.", "encoder.layers."),
    ("self_attn.q_proj.", "self_attn.linear_q."), ("self_attn.k_proj.", "self_attn.linear_k."),
    ("self_attn.v_proj.", "self_attn.linear_v."), ("self_attn.o_proj.", "self_attn.linear_out."),
    ("self_attn.relative_k_proj.", "self_attn.linear_pos."),
    ("self_attn.bias_u", "self_attn.pos_bias_u"), ("self_attn.bias_v", "self_attn.pos_bias_v"),
    ("conv.norm.", "conv.batch_norm."),
    ("model.decoder.proj.", "encoder_decoder_proj."),
    ("model.decoder.embed_tokens.weight", "transf_decoder._embedding.token_embedding.weight"),
    ("model.decoder.pos_emb.weight", "transf_decoder._embedding.position_embedding.pos_enc"),
    ("model.decoder.embedding_layernorm.", "transf_decoder._embedding.layer_norm."),
    ("model.decoder.norm.", "transf_decoder._decoder.final_layer_norm."),
    ("model.decoder.layers.", "transf_decoder._decoder.layers."),
    ("input_layernorm.", "layer_norm_1."), ("post_attention_layernorm.", "layer_norm_2."),
    ("final_layernorm.", "layer_norm_3."),
    ("encoder_attn.q_proj.", "second_sub_layer.query_net."), ("encoder_attn.k_proj.", "second_sub_layer.key_net."),
    ("encoder_attn.v_proj.", "second_sub_layer.value_net."),
    ("encoder_attn.o_proj.", "second_sub_layer.out_projection."),
    ("mlp.fc1.", "third_sub_layer.dense_in."), ("mlp.fc2.", "third_sub_layer.dense_out."),
    ("proj_out.", "log_softmax.mlp.layer0."),
]
DEC_SELF = [("self_attn.linear_q.", "first_sub_layer.query_net."), ("self_attn.linear_k.", "first_sub_layer.key_net."),
            ("self_attn.linear_v.", "first_sub_layer.value_net."),
            ("self_attn.linear_out.", "first_sub_layer.out_projection.")]


def to_hub(k):
    for a, b in RULES:
        k = k.replace(a, b)
    if k.startswith("transf_decoder._decoder.layers.") and ".self_attn." in k:
        for a, b in DEC_SELF:
            k = k.replace(a, b)
    return k


def hub_config(cfg, vocab):
    e = cfg["encoder_config"]
    return {
        "model_type": "cohere_asr", "vocab_size": vocab, "max_audio_clip_s": 35, "overlap_chunk_second": 5,
        "sample_rate": SR, "supported_languages": ["en"],
        "encoder": {"feat_in": NMEL, "n_layers": e["num_hidden_layers"], "d_model": e["hidden_size"],
                    "n_heads": e["num_attention_heads"],
                    "ff_expansion_factor": e["intermediate_size"] // e["hidden_size"],
                    "conv_kernel_size": e["conv_kernel_size"], "subsampling": "dw_striding",
                    "subsampling_factor": e["subsampling_factor"],
                    "subsampling_conv_channels": e["subsampling_conv_channels"],
                    "self_attention_model": "rel_pos", "pos_emb_max_len": e["max_position_embeddings"],
                    "xscaling": False, "conv_norm_type": "batch_norm", "use_bias": True},
        "transf_decoder": {"config_dict": {"hidden_size": cfg["hidden_size"], "num_layers": cfg["num_hidden_layers"],
                                           "num_attention_heads": cfg["num_attention_heads"],
                                           "inner_size": cfg["intermediate_size"],
                                           "max_sequence_length": cfg["max_position_embeddings"],
                                           "hidden_act": "relu", "pre_ln": True, "vocab_size": vocab}},
        "head": {"num_classes": vocab, "log_softmax": True},
        "preprocessor": {"sample_rate": SR, "window_size": 0.025, "window_stride": 0.01, "n_fft": N_FFT,
                         "features": NMEL, "window": "hann", "normalize": "per_feature", "dither": 1e-5,
                         "preemph": PREEMPH, "mag_power": 2.0, "log_zero_guard_value": GUARD, "pad_to": 0},
    }


def load_hf(folder, dtype=torch.float32):
    """transformers' CohereAsrForConditionalGeneration holding the weights of an exported folder."""
    from transformers import CohereAsrConfig, CohereAsrForConditionalGeneration
    h = json.load(open(os.path.join(folder, "config.json")))
    g = json.load(open(os.path.join(folder, "generation_config.json")))
    e, d = h["encoder"], h["transf_decoder"]["config_dict"]
    cfg = CohereAsrConfig(
        encoder_config=dict(hidden_size=e["d_model"], num_hidden_layers=e["n_layers"], num_attention_heads=e["n_heads"],
                            intermediate_size=e["d_model"] * e["ff_expansion_factor"],
                            conv_kernel_size=e["conv_kernel_size"], subsampling_factor=e["subsampling_factor"],
                            subsampling_conv_channels=e["subsampling_conv_channels"], num_mel_bins=e["feat_in"],
                            max_position_embeddings=e["pos_emb_max_len"]),
        vocab_size=h["vocab_size"], hidden_size=d["hidden_size"], num_hidden_layers=d["num_layers"],
        num_attention_heads=d["num_attention_heads"], intermediate_size=d["inner_size"],
        max_position_embeddings=d["max_sequence_length"], pad_token_id=g["pad_token_id"],
        eos_token_id=g["eos_token_id"], bos_token_id=g["bos_token_id"],
        decoder_start_token_id=g["decoder_start_token_id"])
    model = CohereAsrForConditionalGeneration(cfg)
    names = {to_hub(k): k for k in model.state_dict()}
    st = load_file(os.path.join(folder, "model.safetensors"))
    sd = {names[k]: v.to(dtype) if v.is_floating_point() else v for k, v in st.items() if k in names}
    missing = set(model.state_dict()) - set(sd)
    if missing:
        raise ValueError(f"{folder}: tensors missing: {sorted(missing)[:5]}")
    model.load_state_dict(sd)
    for k, v in (("decoder_start_token_id", g["decoder_start_token_id"]), ("eos_token_id", g["eos_token_id"]),
                 ("pad_token_id", g["pad_token_id"]), ("bos_token_id", g["bos_token_id"])):
        setattr(model.generation_config, k, v)
    return model.to(dtype).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=a.tokenizer)
    ck = torch.load(a.ckpt, map_location="cpu", weights_only=False)
    cfg = ck["config"]
    vocab = cfg["vocab_size"]
    assert vocab == sp.get_piece_size(), (vocab, sp.get_piece_size())
    start = sp.piece_to_id("\u2581")
    assert cfg["decoder_start_token_id"] == start, (cfg["decoder_start_token_id"], start)

    state = dict(ck["model"])
    pos = "model.decoder.pos_emb.weight"           # small.pt leaves the fixed table out
    if pos not in state:
        state[pos] = decoder_positions(cfg["max_position_embeddings"], cfg["hidden_size"])
    hub = {}
    for k, v in state.items():
        hk = to_hub(k)
        hub[hk] = (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous()  # (BatchNorm's
        # num_batches_tracked stays int64, as in the Hub file)
    hub["preprocessor.featurizer.fb"] = torch.from_numpy(mel_filters())[None].to(torch.bfloat16).contiguous()
    hub["preprocessor.featurizer.window"] = torch.hann_window(WIN, periodic=False).to(torch.bfloat16)
    os.makedirs(a.out, exist_ok=True)
    save_file(hub, os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
    json.dump(hub_config(cfg, vocab), open(os.path.join(a.out, "config.json"), "w"), indent=1)
    json.dump({"decoder_start_token_id": start, "eos_token_id": 3, "bos_token_id": 4, "pad_token_id": 2},
              open(os.path.join(a.out, "generation_config.json"), "w"), indent=1)
    shutil.copy(a.tokenizer, os.path.join(a.out, "tokenizer.model"))
    size = os.path.getsize(os.path.join(a.out, "model.safetensors"))
    print(f"{a.out}: {len(hub)} tensors, model.safetensors {size / 2 ** 20:.2f} MiB, step {ck['step']}")


if __name__ == "__main__":
    main()
