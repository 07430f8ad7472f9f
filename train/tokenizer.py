#!/usr/bin/python3
"""Train strata's SentencePiece BPE tokenizer (vocab 4096, byte fallback) and tokenize the corpus.

The model is llama-style so llama.cpp's and strata's SPM tokenizers reproduce it exactly:
  ids 0 <unk>, 1 <s>, 2 </s>, then 256 byte pieces <0x00>..<0xFF>, then merges (score = -rank);
  identity normalisation (no NFKC, spaces kept as they are) and a dummy "▁" prefix, so encoding a
  text is: replace ' ' by '▁', prepend '▁', BPE-merge by piece score, unknown chars -> UTF-8 bytes.
Newlines never occur inside a training sentence (SentencePiece trains per line), so '\n' always
encodes as the byte piece <0x0A>.

`encode` subcommand: tokenizes <corpus>/{train,valid}/<source>.txt into uint16 .bin files beside them
(one stream per file, the whole file encoded at once: exactly what `strata perplexity -f FILE` sees).
"""
import argparse
import glob
import os
import time

import numpy as np
import sentencepiece as spm

DEFAULT_CORPUS = "/work/main/build/data/corpus"


def train(args):
    os.makedirs(os.path.dirname(args.model_prefix), exist_ok=True)
    t0 = time.time()
    spm.SentencePieceTrainer.train(
        input=os.path.join(args.corpus, "train.txt"),
        model_prefix=args.model_prefix,
        model_type="bpe",
        vocab_size=args.vocab_size,
        byte_fallback=True,
        character_coverage=0.9995,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        split_digits=True,
        max_sentence_length=32768,
        input_sentence_size=args.max_sentences,
        shuffle_input_sentence=True,
        seed_sentencepiece_size=1000000,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=args.threads,
        minloglevel=1,
    )
    print(f"trained {args.model_prefix}.model (vocab {args.vocab_size}) in {time.time() - t0:.0f} s")


def encode(args):
    sp = spm.SentencePieceProcessor(model_file=args.model_prefix + ".model")
    if sp.get_piece_size() > 65535:
        raise SystemExit("vocab too large for uint16 token files")
    for path in sorted(glob.glob(os.path.join(args.corpus, "*", "*.txt"))):
        text = open(path, encoding="utf-8").read()
        t0 = time.time()
        ids = np.array(sp.encode(text), dtype=np.uint16)
        ids.tofile(path[:-4] + ".bin")
        print(f"{os.path.relpath(path, args.corpus):18s} {len(text) / 1e6:7.2f} M chars -> {len(ids) / 1e6:7.3f} M tokens "
              f"({len(text.encode('utf-8')) / max(1, len(ids)):.2f} bytes/token, {time.time() - t0:.0f} s)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["train", "encode", "all"])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--model-prefix", default="/work/main/build/data/tokenizer/strata_sp4096")
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--max-sentences", type=int, default=2000000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if args.cmd in ("train", "all"):
        train(args)
    if args.cmd in ("encode", "all"):
        encode(args)


if __name__ == "__main__":
    main()
