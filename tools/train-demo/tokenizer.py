"""The demo model's tokenizer: SentencePiece BPE with byte fallback and Cohere's control pieces.

The pieces the engine and the prompt look up by name (spec 5.1, 5.2; src/asr/tokenizer.c,
src/asr/session.c) sit at the real model's low ids, as in the fixtures' tokenizer
(shared/reference/make_tokenizer.py): <unk> 0, <|nospeech|> 1, <pad> 2, <|endoftext|> 3,
<|startoftranscript|> 4, <|pnc|> 5, <|nopnc|> 6, <|startofcontext|> 7, <|itn|> 8,
<|noitn|> 9, <|timestamp|> 10, <|notimestamp|> 11, <|diarize|> 12, <|nodiarize|> 13,
<|spkchange|> 14, <|audioseparator|> 15, <|emo:undefined|> 16, then the 14 language tokens
<|en|> 17 ... (the engine accepts those 14), all CONTROL pieces (they decode to nothing).
The BPE pieces follow, "▁" among them (the prompt's first token and decoder_start_token_id).
The real model's ids above 16 (<|en|> = 62, "▁" = 13764) are not kept: nothing looks them up
by number, and a small vocabulary keeps the embedding small.

The BPE is trained on the training sentences (the texts of DATA/train-*.npz) plus every word
of words.txt in lower case and capitalised, so that any sentence of the word list splits into
known pieces. 2048 pieces by default: 256 of them are the byte pieces and 31 the control
pieces, and at 1024 a word took 2.5 tokens on average, at 2048 1.9.

usage: python3 tokenizer.py --data .demo/data --out .demo/tokenizer.model [--vocab 2048]
Not here: tokenizer.json (the engine reads tokenizer.model; transformers is given ids).
"""
import argparse
import glob
import os
import sys
import tempfile

import numpy as np
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import prompt_ids  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LANGS = ["en", "fr", "de", "es", "it", "pt", "nl", "pl", "el", "ar", "ja", "zh", "vi", "ko"]
CONTROLS = ["<|nospeech|>", "<pad>", "<|endoftext|>", "<|startoftranscript|>", "<|pnc|>", "<|nopnc|>",
            "<|startofcontext|>", "<|itn|>", "<|noitn|>", "<|timestamp|>", "<|notimestamp|>",
            "<|diarize|>", "<|nodiarize|>", "<|spkchange|>", "<|audioseparator|>", "<|emo:undefined|>"]
CONTROLS += [f"<|{l}|>" for l in LANGS]


def build(texts, vocab):
    """Returns the serialized ModelProto."""
    T = pb.ModelProto.SentencePiece
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "corpus.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(texts))
        spm.SentencePieceTrainer.train(
            input=os.path.join(tmp, "corpus.txt"), model_prefix=os.path.join(tmp, "bpe"),
            vocab_size=vocab - len(CONTROLS), model_type="bpe", byte_fallback=True,
            character_coverage=1.0, unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1,
            input_sentence_size=2000000, shuffle_input_sentence=False, seed_sentencepiece_size=1000000,
            num_threads=1, minloglevel=2)
        base = pb.ModelProto()
        base.ParseFromString(open(os.path.join(tmp, "bpe.model"), "rb").read())
    m = pb.ModelProto()
    m.CopyFrom(base)
    del m.pieces[:]
    p = m.pieces.add()
    p.piece, p.type, p.score = "<unk>", T.UNKNOWN, 0.0
    for c in CONTROLS:
        p = m.pieces.add()
        p.piece, p.type, p.score = c, T.CONTROL, 0.0
    for q in base.pieces:
        if q.type == T.UNKNOWN:
            continue
        p = m.pieces.add()
        p.CopyFrom(q)
    m.trainer_spec.vocab_size = len(m.pieces)
    del m.trainer_spec.input[:]                     # (temporary paths: the file would differ per run)
    m.trainer_spec.model_prefix = ""
    m.trainer_spec.unk_id, m.trainer_spec.pad_id = 0, 2
    m.trainer_spec.bos_id, m.trainer_spec.eos_id = -1, 3
    m.trainer_spec.pad_piece, m.trainer_spec.eos_piece = "<pad>", "<|endoftext|>"
    return m.SerializeToString()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=2048)
    a = ap.parse_args()
    texts = []
    for f in sorted(glob.glob(os.path.join(a.data, "train-*.npz"))):
        texts += [str(t) for t in np.load(f)["texts"]]
    words = [w.strip() for w in open(os.path.join(HERE, "words.txt"), encoding="utf-8") if w.strip()]
    texts += words + [w[0].upper() + w[1:] for w in words]
    blob = build(texts, a.vocab)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    open(a.out, "wb").write(blob)

    sp = spm.SentencePieceProcessor(model_proto=blob)
    assert sp.get_piece_size() == a.vocab, sp.get_piece_size()
    for i, c in enumerate(["<unk>"] + CONTROLS):
        assert sp.id_to_piece(i) == c and (i == 0 or sp.is_control(i)), (i, c)
    ids = prompt_ids(sp)
    sample = texts[0]
    enc = sp.encode(sample)
    assert sp.decode(enc) == sample, (sample, sp.decode(enc))
    assert not any(sp.is_control(i) or sp.is_unknown(i) for i in enc)
    n_tok = sum(len(sp.encode(t)) for t in texts[:2000])
    n_words = sum(len(t.split()) for t in texts[:2000])
    print(f"{a.out}: {sp.get_piece_size()} pieces, prompt {ids}, "
          f"{n_tok / max(1, n_words):.2f} tokens a word; {sample!r} -> {sp.id_to_piece(enc)}")


if __name__ == "__main__":
    main()
