#!/usr/bin/python3
"""Write strata test fixtures for a model exported by export_gguf.py (files prefixed `bundled_`).

  <prefix>_tokenizer.json  {"model", "cases": [{"text", "ids"}]}: SentencePiece's own encoding of tricky
                           strings (spaces, newlines, digits, quotes, non-Latin -> byte fallback)
  <prefix>__logits.f32/.json  reference_forward.py logits for fixed ids (float64 compute, f32 LE
                           [n_tokens x n_vocab]) with argmax and top1-top2 gaps
  <prefix>_valid.txt       a small validation excerpt (whole paragraphs from each source's valid split)
  <prefix>__ppl.json       reference perplexity of that excerpt over windows of --ctx (tail dropped)
Fixed ids = the tokenization of a fixed sentence followed by a deterministic pseudo-random run of ids,
so both natural and unnatural contexts are checked.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as rf  # noqa: E402

CASES = ["", " ", "  ", "Hello world", " Hello world", "Hello  world", "hello\nworld", "a\n\nb", "\n",
         "In the beginning God created the heaven and the earth.",
         "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
         "must be in want of a wife.", "CYNIC, n. A blackguard whose faulty vision sees things as they are.",
         "Psalm 119:105 and 3.14159, 2024-11-30", "“Behold,” he said — it’s done.", "tab\there",
         "אֱלֹהִים", "naïve café", "emoji 🙂 end", "ALL CAPS SHOUTING", "trailing space "]
SENTENCE = "The LORD is my shepherd; I shall not want. Mr. Darcy bowed, and Elizabeth smiled."


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--tokenizer", default="/work/main/build/data/tokenizer/strata_sp4096.model")
    ap.add_argument("--valid-dir", default="/work/main/build/data/corpus/valid")
    ap.add_argument("--prefix", required=True, help="e.g. tests/data/bundled_smoke")
    ap.add_argument("--n-random", type=int, default=48)
    ap.add_argument("--valid-chars", type=int, default=3000, help="characters taken per source")
    ap.add_argument("--ctx", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ref = rf.QwenMoeRef(args.model, torch.float64)
    sp = rf.spm_from_gguf_or_file(ref, args.tokenizer)
    name = os.path.basename(args.model)

    cases = [{"text": t, "ids": sp.encode(t)} for t in CASES]
    with open(args.prefix + "_tokenizer.json", "w", encoding="utf-8") as f:  # one case per line
        f.write('{"model": %s, "add_bos": false, "cases": [\n' % json.dumps(name))
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]}\n")

    rng = np.random.default_rng(20261130)
    ids = sp.encode(SENTENCE) + rng.integers(3, ref.n_vocab, size=args.n_random).tolist()
    ids = ids[:ref.ctx]
    logits = ref.forward(torch.tensor([ids]))[0]
    logits.to(torch.float32).numpy().astype("<f4").tofile(args.prefix + "__logits.f32")
    top2 = torch.topk(logits, 2, dim=-1).values
    json.dump({"model": name, "tokens": ids, "n_tokens": len(ids), "n_vocab": ref.n_vocab, "bos_added": False,
               "positions": "0..n_tokens-1, one sequence", "layout": "float32 LE [n_tokens x n_vocab] row-major",
               "compute": "float64 reference_forward.py", "argmax": logits.argmax(-1).tolist(),
               "top1_top2_gap": [round(g, 6) for g in (top2[:, 0] - top2[:, 1]).tolist()]},
              open(args.prefix + "__logits.json", "w"))

    parts = []
    for src in sorted(os.listdir(args.valid_dir)):
        if src.endswith(".txt"):
            text = open(os.path.join(args.valid_dir, src), encoding="utf-8").read()
            cut = text.find("\n", args.valid_chars)
            parts.append(text[:cut if cut > 0 else len(text)].strip("\n"))
    excerpt = "\n\n".join(parts) + "\n"
    open(args.prefix + "_valid.txt", "w", encoding="utf-8").write(excerpt)
    ctx = args.ctx or ref.ctx
    r = rf.window_perplexity(ref, sp.encode(excerpt), ctx)
    r.update({"model": name, "text": os.path.basename(args.prefix + "_valid.txt"), "n_tokens": len(sp.encode(excerpt)),
              "definition": "non-overlapping windows of ctx tokens from token 0, tail dropped, positions "
                            "1..ctx-1 scored, no BOS"})
    json.dump(r, open(args.prefix + "__ppl.json", "w"), indent=1)
    print(f"wrote {args.prefix}_tokenizer.json ({len(cases)} cases), __logits ({len(ids)} x {ref.n_vocab}), "
          f"_valid.txt ({len(excerpt)} chars), __ppl.json (ppl {r['ppl']:.3f} over {r['windows']} windows of {ctx})")


if __name__ == "__main__":
    main()
