#!/usr/bin/python3
"""Export a train.py checkpoint + SentencePiece model as a GGUF in llama.cpp's `qwen3moe` layout.

Tensors (ggml ne order; numpy shapes are the reverse):
  token_embd.weight {d, vocab} F16        output_norm.weight {d} F32      output.weight {d, vocab} F16
  blk.N.attn_norm.weight {d} F32          blk.N.attn_q.weight {d, H*hd} F16
  blk.N.attn_k.weight / attn_v.weight {d, Hkv*hd} F16                   blk.N.attn_output.weight {H*hd, d} F16
  blk.N.attn_q_norm.weight / attn_k_norm.weight {hd} F32                blk.N.ffn_norm.weight {d} F32
  blk.N.ffn_gate_inp.weight {d, E} F32 (router kept F32: tiny, and routing decisions are discrete)
  blk.N.ffn_gate_exps.weight / ffn_up_exps.weight {d, ff, E} F16        blk.N.ffn_down_exps.weight {ff, d, E} F16
No q/k permutation: the trainer already uses NEOX RoPE, which is what llama.cpp applies for qwen3moe.
Tokenizer: tokenizer.ggml.model = "llama" (SentencePiece), pieces, scores, token types (1 normal,
2 unknown, 3 control, 6 byte), <unk>=0 <s>=1 </s>=2, add_bos_token false (the trainer never saw BOS),
add_space_prefix true.
--type: f16 (default), f32 (every tensor F32, for exact-reference debugging), q8_0 (every 2-D/3-D weight
Q8_0 except the router), mxfp4_moe (expert banks MXFP4, other 2-D weights Q8_0, router and norms F32:
llama-quantize's MXFP4_MOE mix). Quantization is quant.py's, byte-identical to ggml's reference
quantizers (checked on the shared fixtures); strata's own quantizer should reproduce the same bytes.
"""
import argparse
import os
import sys

import numpy as np
import sentencepiece as spm
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402
import quant  # noqa: E402
from gguf_io import ARRAY, F32, I32, STRING, U32, Raw, Value  # noqa: E402

ARCH = "qwen3moe"


def tokenizer_metadata(sp_path):
    sp = spm.SentencePieceProcessor(model_file=sp_path)
    n = sp.get_piece_size()
    pieces, scores, types = [], [], []
    for i in range(n):
        pieces.append(sp.id_to_piece(i))
        scores.append(float(sp.get_score(i)))
        if sp.is_unknown(i):
            types.append(2)
        elif sp.is_control(i):
            types.append(3)
        elif sp.is_byte(i):
            types.append(6)
        elif sp.is_unused(i):
            types.append(5)
        else:
            types.append(1)
    return n, {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": Value(ARRAY, pieces, STRING),
        "tokenizer.ggml.scores": Value(ARRAY, scores, F32),
        "tokenizer.ggml.token_type": Value(ARRAY, types, I32),
        "tokenizer.ggml.bos_token_id": Value(U32, sp.bos_id()),
        "tokenizer.ggml.eos_token_id": Value(U32, sp.eos_id()),
        "tokenizer.ggml.unknown_token_id": Value(U32, sp.unk_id()),
        "tokenizer.ggml.add_bos_token": False,
        "tokenizer.ggml.add_eos_token": False,
        "tokenizer.ggml.add_space_prefix": True,
        "tokenizer.ggml.remove_extra_whitespaces": False,
    }


FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "mxfp4_moe": 38}  # llama_ftype values


def export(ckpt_path, sp_path, out_path, name, wtype="f16", description=""):
    ck = torch.load(ckpt_path, map_location="cpu")
    c, sd = ck["config"], ck["model"]
    n_vocab, tok_meta = tokenizer_metadata(sp_path)
    if n_vocab != c["vocab_size"]:
        raise SystemExit(f"tokenizer has {n_vocab} pieces but the checkpoint's vocab_size is {c['vocab_size']}")
    meta = {
        "general.architecture": ARCH,
        "general.name": name,
        "general.description": description or (f"strata bundled MoE, trained {ck['step']} steps / "
                                               f"{ck['tokens'] / 1e6:.1f} M tokens on public-domain text"),
        "general.file_type": Value(U32, FILE_TYPE[wtype]),
        f"{ARCH}.context_length": Value(U32, c["ctx"]),
        f"{ARCH}.embedding_length": Value(U32, c["d_model"]),
        f"{ARCH}.block_count": Value(U32, c["n_layer"]),
        f"{ARCH}.feed_forward_length": Value(U32, c["d_ff_expert"]),
        f"{ARCH}.expert_feed_forward_length": Value(U32, c["d_ff_expert"]),
        f"{ARCH}.attention.head_count": Value(U32, c["n_head"]),
        f"{ARCH}.attention.head_count_kv": Value(U32, c["n_head_kv"]),
        f"{ARCH}.attention.key_length": Value(U32, c["head_dim"]),
        f"{ARCH}.attention.value_length": Value(U32, c["head_dim"]),
        f"{ARCH}.rope.dimension_count": Value(U32, c["head_dim"]),
        f"{ARCH}.rope.freq_base": Value(F32, float(c["rope_base"])),
        f"{ARCH}.attention.layer_norm_rms_epsilon": Value(F32, float(c["rms_eps"])),
        f"{ARCH}.expert_count": Value(U32, c["n_expert"]),
        f"{ARCH}.expert_used_count": Value(U32, c["n_expert_used"]),
    }
    meta.update(tok_meta)

    def w(key, keep_f32=False):
        a = sd[key].float().numpy()
        if wtype == "f32" or keep_f32:
            return a.astype(np.float32)
        ne = list(reversed(a.shape))
        if wtype == "mxfp4_moe" and a.ndim == 3:
            return Raw(gguf_io.GGML_MXFP4, ne, quant.quantize_mxfp4(a))
        if wtype in ("q8_0", "mxfp4_moe"):
            return Raw(gguf_io.GGML_Q8_0, ne, quant.quantize_q8_0(a))
        if np.abs(a).max() >= 65504:
            raise SystemExit(f"{key}: values exceed the F16 range; export with --type f32")
        return a.astype(np.float16)

    tensors = [("token_embd.weight", w("tok_emb.weight")),
               ("output_norm.weight", w("out_norm.weight", True)),
               ("output.weight", w("output.weight"))]
    for i in range(c["n_layer"]):
        p, b = f"blk.{i}.", f"blocks.{i}."
        tensors += [
            (p + "attn_norm.weight", w(b + "attn_norm.weight", True)),
            (p + "attn_q.weight", w(b + "attn.wq.weight")),
            (p + "attn_k.weight", w(b + "attn.wk.weight")),
            (p + "attn_v.weight", w(b + "attn.wv.weight")),
            (p + "attn_output.weight", w(b + "attn.wo.weight")),
            (p + "attn_q_norm.weight", w(b + "attn.q_norm.weight", True)),
            (p + "attn_k_norm.weight", w(b + "attn.k_norm.weight", True)),
            (p + "ffn_norm.weight", w(b + "ffn_norm.weight", True)),
            (p + "ffn_gate_inp.weight", w(b + "moe.router.weight", True)),
            (p + "ffn_gate_exps.weight", w(b + "moe.gate")),
            (p + "ffn_up_exps.weight", w(b + "moe.up")),
            (p + "ffn_down_exps.weight", w(b + "moe.down")),
        ]
    gguf_io.write_gguf(out_path, meta, tensors)
    return len(tensors)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", default="/work/main/build/data/runs/main/ckpt.pt")
    ap.add_argument("--tokenizer", default="/work/main/build/data/tokenizer/strata_sp4096.model")
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="strata-moe-31m")
    ap.add_argument("--type", default="f16", choices=sorted(FILE_TYPE), help="weight format (see above)")
    args = ap.parse_args()
    n = export(args.ckpt, args.tokenizer, args.out, args.name, args.type)
    g = gguf_io.GGUFFile(args.out)  # round-trip: the file must parse and hold what we wrote
    assert len(g.tensors) == n and g.metadata["general.architecture"] == ARCH
    print(f"wrote {args.out}: {n} tensors, {len(g.metadata)} metadata keys, {os.path.getsize(args.out) / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
