#!/usr/bin/python3
"""Write the bundled model's card (models/README.md) from the run's own records.

Reads: <data>/corpus/stats.json (sources, sizes, licences), <run>/ckpt.pt (shape, steps, tokens, time),
<run>/log.jsonl (last full validation: per-source perplexity, routing skew per layer, tokens/s),
<data>/ref_ppl_<model>_<source>.json (reference_forward.py ppl for the F16 and quantized exports),
and generates greedy samples from the quantized model with reference_forward.py.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as rf  # noqa: E402

PROMPTS = ["In the beginning", "It is a truth universally acknowledged", "LAWYER, n.",
           "Blessed is the man", "Elizabeth looked at Mr. Darcy and"]
SOURCES = ["austen", "devil", "kjv", "tdavid", "web", "all"]


def load_ppl(data, stem):
    out = {}
    for s in SOURCES:
        p = os.path.join(data, f"ref_ppl_{stem}_{s}.json")
        if os.path.exists(p):
            out[s] = json.load(open(p))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", default="/work/main/build/data")
    ap.add_argument("--run-dir", default="/work/main/build/data/runs/main")
    ap.add_argument("--f16", default="strata-moe-31m-f16")
    ap.add_argument("--quant", default="/work/main/models/strata-moe-31m-mxfp4.gguf")
    ap.add_argument("--tokenizer", default="/work/main/build/data/tokenizer/strata_sp4096.model")
    ap.add_argument("--out", default="/work/main/models/README.md")
    ap.add_argument("--n-predict", type=int, default=40)
    ap.add_argument("--strata-compare", nargs="*", default=[],
                    help="JSON files written by compare_strata.py --json (strata vs the reference)")
    args = ap.parse_args()

    stats = json.load(open(os.path.join(args.data, "corpus", "stats.json")))
    ck = torch.load(os.path.join(args.run_dir, "ckpt.pt"), map_location="cpu")
    c = ck["config"]
    log = [json.loads(line) for line in open(os.path.join(args.run_dir, "log.jsonl"))]
    evals = [r for r in log if r.get("full")]
    last_eval = evals[-1] if evals else None
    speeds = [r["tok_s"] for r in log if "tok_s" in r]
    qstem = os.path.basename(args.quant)[:-5]
    ppl_f16, ppl_q = load_ppl(args.data, args.f16), load_ppl(args.data, qstem)

    L = [f"# {qstem}: strata's bundled Mixture-of-Experts model", "",
         "A small Qwen3-MoE-shaped model trained from scratch by strata's `train/` pipeline on public-domain",
         "English text, so a fresh clone has a real model with real, skewed expert routing and no download.", "",
         "## Shape", "",
         f"- architecture `qwen3moe` (llama.cpp layout), {c['n_layer']} layers, d_model {c['d_model']}, "
         f"{c['n_head']} query heads / {c['n_head_kv']} KV heads of {c['head_dim']}, q/k RMSNorm, NEOX RoPE base "
         f"{c['rope_base']:g}, RMS eps {c['rms_eps']:g}",
         f"- {c['n_expert']} SwiGLU experts (ffn {c['d_ff_expert']}) per layer, top-{c['n_expert_used']} of a "
         "softmax router, weights renormalised; no shared expert",
         f"- vocab {c['vocab_size']} (SentencePiece BPE, byte fallback, no BOS), training context {c['ctx']}",
         f"- file: MXFP4 expert banks, Q8_0 other matrices, F32 norms and router "
         f"({os.path.getsize(args.quant) / 2**20:.1f} MiB)" if os.path.exists(args.quant) else "- file: (missing)",
         "", "## Training", "",
         f"- {ck['step']} steps, {ck['tokens'] / 1e6:.1f} M tokens, {ck['elapsed'] / 60:.0f} min on 2 CPU cores "
         f"(median {sorted(speeds)[len(speeds) // 2] if speeds else 0:.0f} tokens/s), AdamW, "
         f"{ck['args'].get('schedule', 'cosine')} LR schedule peak {ck['args']['lr']}, batch "
         f"{ck['args']['batch']} x {c['ctx']}, seed {ck['args']['seed']}",
         "- reproduce: `train/run_full.sh` (see train/README.md)", "",
         "## Data and licences", "", "| source | train docs | train MB | valid docs | valid MB | licence |",
         "|---|---|---|---|---|---|"]
    for s, st in stats.items():
        L.append(f"| {s} | {st['train']['docs']} | {st['train']['bytes'] / 1e6:.2f} | {st['valid']['docs']} | "
                 f"{st['valid']['bytes'] / 1e6:.3f} | {st['licence']} |")
    L += ["", "Validation = 2% of each source's documents (chapters / dictionary entries), chosen by hash.", "",
          "## Validation perplexity", "",
          f"Non-overlapping windows of {c['ctx']} tokens of each source's validation text, positions 1..{c['ctx'] - 1}"
          " scored (`strata perplexity -c CTX` computes the same). `all` = the concatenated valid.txt.", "",
          "| source | F16 | MXFP4 experts + Q8_0 | Δ |", "|---|---|---|---|"]
    for s in SOURCES:
        a, b = ppl_f16.get(s), ppl_q.get(s)
        if a or b:
            fa = f"{a['ppl']:.2f}" if a else "-"
            fb = f"{b['ppl']:.2f}" if b else "-"
            d = f"{(b['ppl'] / a['ppl'] - 1) * 100:+.2f}%" if a and b else "-"
            L.append(f"| {s} | {fa} | {fb} | {d} |")
    if last_eval:
        L += ["", "## Routing skew per layer (validation text)", "",
              "max/uniform = busiest expert's share of assignments ÷ 1/E; entropy normalised to 1 = uniform.", "",
              "| layer | max/uniform | entropy |", "|---|---|---|"]
        for i, r in enumerate(last_eval["routing"]):
            L.append(f"| {i} | {r['max_over_uniform']:.2f} | {r['entropy']:.3f} |")
    if args.strata_compare:
        L += ["", "## strata vs the PyTorch reference", "",
              "`train/compare_strata.py`: `strata logits` on the fixture's token ids (batch and one token at a time)",
              "and `strata perplexity` on the validation texts, against `reference_forward.py` (float64) on the same file.",
              "", "| file | logits max abs d | mean abs d | argmax | ppl rel. diff (worst source) |", "|---|---|---|---|---|"]
        for f in args.strata_compare:
            r = json.load(open(f))
            lg = max(r["logits"].values(), key=lambda x: x["max_abs"])
            worst = max((v["rel"] for v in r["ppl"].values()), default=float("nan"))
            L.append(f"| {r['model']} | {lg['max_abs']:.3g} | {lg['mean_abs']:.3g} | "
                     f"{lg['argmax_same']}/{lg['argmax_checked']} | {worst:.2e} |")
    if os.path.exists(args.quant):
        ref = rf.QwenMoeRef(args.quant, torch.float32)
        sp = rf.spm_from_gguf_or_file(ref, args.tokenizer)
        L += ["", f"## Samples (greedy, {args.n_predict} tokens, quantized model)", ""]
        for p in PROMPTS:
            toks = sp.encode(p)
            for _ in range(args.n_predict):
                toks.append(int(ref.forward(torch.tensor([toks[-ref.ctx:]]))[0, -1].argmax()))
            L += ["> " + sp.decode(toks).replace("\n", " / "), ""]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    open(args.out, "w").write("\n".join(L) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
