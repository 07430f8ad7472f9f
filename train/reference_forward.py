#!/usr/bin/python3
"""Independent PyTorch forward pass of a `qwen3moe` GGUF (F32/F16 tensors): logits and perplexity.

Written apart from model.py on purpose: it reads only the GGUF (hparams from metadata, weights by
llama.cpp tensor name), so it checks the export as well as serving as strata's oracle.

  logits: run one sequence (token ids at positions 0..n-1, no BOS added) and write
          <out>.f32 = float32 little-endian [n_tokens x n_vocab] row-major (row i = logits after
          token i) and <out>.json = {model, tokens, n_vocab, argmax, top1_top2_gap, dtype}.
  generate: greedy (or --temp) continuation of --text, for model-card samples.
  ppl:    tokenize a text file with the model's SentencePiece vocab (or read a uint16 .bin of ids),
          cut it into non-overlapping windows of ctx tokens (tail dropped), score positions 1..ctx-1
          of each window; print/write {ppl, nll, windows, scored_tokens}. Same definition as
          train.py's validation and `strata perplexity`.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402


class QwenMoeRef:
    def __init__(self, path, dtype=torch.float64):
        g = gguf_io.GGUFFile(path)
        m = g.metadata
        arch = m.get("general.architecture")
        if arch != "qwen3moe":
            raise SystemExit(f"{path}: architecture '{arch}', expected qwen3moe")
        a = "qwen3moe."
        self.meta = m
        self.n_layer = m[a + "block_count"]
        self.n_head, self.n_head_kv = m[a + "attention.head_count"], m[a + "attention.head_count_kv"]
        self.hd = m[a + "attention.key_length"]
        self.n_expert, self.k = m[a + "expert_count"], m[a + "expert_used_count"]
        self.eps = m[a + "attention.layer_norm_rms_epsilon"]
        self.base = m.get(a + "rope.freq_base", 10000.0)
        self.ctx = m[a + "context_length"]
        self.dtype = dtype
        T = lambda n: torch.from_numpy(g.tensor(n)).to(dtype)  # noqa: E731
        self.tok_embd = T("token_embd.weight")  # [vocab, d]
        self.output = T("output.weight") if "output.weight" in g.tensors else self.tok_embd
        self.output_norm = T("output_norm.weight")
        names = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
                 "ffn_norm", "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"]
        self.layers = [{n: T(f"blk.{i}.{n}.weight") for n in names} for i in range(self.n_layer)]
        self.n_vocab = self.tok_embd.shape[0]

    def rms(self, x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x, pos):
        """x [B, T, H, hd]; NEOX: element i pairs with i + hd/2; theta = pos * base^(-2i/hd)."""
        half = self.hd // 2
        freq = self.base ** (-torch.arange(half, dtype=torch.float64) * 2.0 / self.hd)
        ang = (pos.to(torch.float64)[:, None] * freq[None, :]).to(self.dtype)  # [T, half]
        c, s = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]
        x0, x1 = x[..., :half], x[..., half:]
        return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)

    def moe(self, x, L):
        """x [N, d] -> [N, d]: softmax router over all experts, top-k, weights renormalised."""
        p = torch.softmax(x @ L["ffn_gate_inp"].T, dim=-1)
        w, ids = torch.topk(p, self.k, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(self.n_expert):
            tok, slot = (ids == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            xe = x[tok]
            g = xe @ L["ffn_gate_exps"][e].T
            u = xe @ L["ffn_up_exps"][e].T
            out.index_add_(0, tok, ((g * torch.sigmoid(g) * u) @ L["ffn_down_exps"][e].T) * w[tok, slot][:, None])
        return out

    @torch.no_grad()
    def forward(self, tokens):
        """tokens [B, T] int64 at positions 0..T-1 -> logits [B, T, vocab]."""
        B, T = tokens.shape
        if int(tokens.max()) >= self.n_vocab or int(tokens.min()) < 0:
            raise SystemExit(f"token id out of range [0, {self.n_vocab})")
        pos = torch.arange(T)
        x = self.tok_embd[tokens]
        mask = torch.full((T, T), float("-inf"), dtype=self.dtype).triu(1)
        rep = self.n_head // self.n_head_kv
        for L in self.layers:
            h = self.rms(x, L["attn_norm"])
            q = self.rms((h @ L["attn_q"].T).view(B, T, self.n_head, self.hd), L["attn_q_norm"])
            k = self.rms((h @ L["attn_k"].T).view(B, T, self.n_head_kv, self.hd), L["attn_k_norm"])
            v = (h @ L["attn_v"].T).view(B, T, self.n_head_kv, self.hd)
            q, k = self.rope(q, pos), self.rope(k, pos)
            kv_of = torch.arange(self.n_head) // rep  # query head h reads kv head h // rep
            k, v = k[:, :, kv_of], v[:, :, kv_of]
            att = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(self.hd) + mask
            o = torch.einsum("bhts,bshd->bthd", torch.softmax(att, dim=-1), v).reshape(B, T, -1)
            x = x + o @ L["attn_output"].T
            h = self.rms(x, L["ffn_norm"]).reshape(B * T, -1)
            x = x + self.moe(h, L).view(B, T, -1)
        return self.rms(x, self.output_norm) @ self.output.T


def window_perplexity(ref, ids, ctx, batch=4):
    ids = np.asarray(ids, dtype=np.int64)
    n_win = len(ids) // ctx
    if n_win == 0:
        raise SystemExit(f"text has {len(ids)} tokens, fewer than one window of {ctx}")
    wins = torch.from_numpy(ids[:n_win * ctx]).view(n_win, ctx)
    nll = 0.0
    for i in range(0, n_win, batch):
        x = wins[i:i + batch]
        lp = torch.log_softmax(ref.forward(x)[:, :-1].to(torch.float64), dim=-1)
        nll -= lp.gather(-1, x[:, 1:, None]).sum().item()
    n = n_win * (ctx - 1)
    return {"ppl": math.exp(nll / n), "nll": nll / n, "windows": n_win, "scored_tokens": n, "ctx": ctx}


def spm_from_gguf_or_file(ref, sp_path):
    import sentencepiece as spm
    if not sp_path:
        raise SystemExit("--tokenizer (the SentencePiece .model) is needed to tokenize text")
    sp = spm.SentencePieceProcessor(model_file=sp_path)
    pieces = ref.meta["tokenizer.ggml.tokens"]
    if sp.get_piece_size() != len(pieces) or any(sp.id_to_piece(i) != pieces[i] for i in range(len(pieces))):
        raise SystemExit(f"{sp_path} does not match the GGUF's vocabulary")
    return sp


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["logits", "ppl", "generate"])
    ap.add_argument("-n", "--n-predict", type=int, default=64, help="generate: tokens to sample")
    ap.add_argument("--temp", type=float, default=0.0, help="generate: 0 = greedy")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--tokens", help="comma-separated token ids (logits)")
    ap.add_argument("--text", help="text to tokenize (logits) or text file (ppl)")
    ap.add_argument("--bin", help="uint16 token-id file (ppl)")
    ap.add_argument("--tokenizer", default="/work/main/build/data/tokenizer/strata_sp4096.model")
    ap.add_argument("-c", "--ctx", type=int, default=0, help="window for ppl (default: context_length)")
    ap.add_argument("-o", "--out", help="output path stem (logits: .f32 + .json; ppl: .json)")
    ap.add_argument("--f32", action="store_true", help="compute in float32 instead of float64")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ref = QwenMoeRef(args.model, torch.float32 if args.f32 else torch.float64)
    if args.cmd == "logits":
        if args.tokens:
            toks = [int(t) for t in args.tokens.split(",") if t.strip()]
        elif args.text:
            toks = spm_from_gguf_or_file(ref, args.tokenizer).encode(args.text)
        else:
            raise SystemExit("logits needs --tokens or --text")
        logits = ref.forward(torch.tensor([toks]))[0]
        top2 = torch.topk(logits, 2, dim=-1).values
        info = {"model": os.path.basename(args.model), "tokens": toks, "n_vocab": ref.n_vocab,
                "argmax": logits.argmax(-1).tolist(), "top1_top2_gap": (top2[:, 0] - top2[:, 1]).tolist(),
                "dtype": "float32" if args.f32 else "float64", "bos_added": False}
        if args.out:
            logits.to(torch.float32).numpy().astype("<f4").tofile(args.out + ".f32")
            json.dump(info, open(args.out + ".json", "w"), indent=1)
        print(f"{len(toks)} tokens, argmax {info['argmax'][:16]}{' ...' if len(toks) > 16 else ''}")
    elif args.cmd == "generate":
        sp = spm_from_gguf_or_file(ref, args.tokenizer)
        toks = sp.encode(args.text or "")
        g = torch.Generator().manual_seed(args.seed)
        for _ in range(args.n_predict):  # no KV cache: the reference recomputes the window each step
            logits = ref.forward(torch.tensor([toks[-ref.ctx:]]))[0, -1]
            if args.temp <= 0:
                nxt = int(logits.argmax())
            else:
                nxt = int(torch.multinomial(torch.softmax(logits / args.temp, -1), 1, generator=g))
            toks.append(nxt)
        print(sp.decode(toks))
    else:
        if args.bin:
            ids = np.fromfile(args.bin, dtype=np.uint16)
        elif args.text:
            ids = spm_from_gguf_or_file(ref, args.tokenizer).encode(open(args.text, encoding="utf-8").read())
        else:
            raise SystemExit("ppl needs --text FILE or --bin FILE")
        r = window_perplexity(ref, ids, args.ctx or ref.ctx)
        r["model"] = os.path.basename(args.model)
        print(json.dumps(r))
        if args.out:
            json.dump(r, open(args.out + ".json", "w"), indent=1)


if __name__ == "__main__":
    main()
