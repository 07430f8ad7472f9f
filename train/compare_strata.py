#!/usr/bin/python3
"""strata vs the PyTorch reference on an exported model: logits and perplexity per validation source.

  train/compare_strata.py --strata build/release/tools/strata -m MODEL.gguf --fixture PREFIX \
      --ref-ppl build/data/ref_ppl_<stem> [--valid-dir build/data/corpus/valid] [--json OUT]

- Logits: `strata logits` (batch and incremental) on PREFIX__logits.json's token ids vs PREFIX__logits.f32
  (make_fixtures.py: float64 reference forward). Reports max / mean |d| and argmax agreement outside
  reference near-ties (top1-top2 gap < 1e-3).
- Perplexity: `strata perplexity --json` on valid/<source>.txt and on valid.txt vs the reference's
  <ref-ppl>_<source>.json / <ref-ppl>_all.json (same windows: the model's ctx, tail dropped).
Prints a Markdown table; --json writes the numbers for the model card.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

SOURCES = ["austen", "devil", "kjv", "tdavid", "web"]


def strata_logits(strata, model, tokens, mode, threads):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "l.f32")
        subprocess.run([strata, "logits", "-m", model, "--tokens", ",".join(map(str, tokens)), "-o", out,
                        "--mode", mode, "-t", str(threads)], check=True, capture_output=True)
        return np.fromfile(out, dtype="<f4")


def strata_ppl(strata, model, text, threads):
    p = subprocess.run([strata, "perplexity", "-m", model, "-f", text, "-t", str(threads), "--json", "-q"],
                       check=True, capture_output=True, text=True)
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--fixture", required=True, help="prefix of __logits.json/.f32")
    ap.add_argument("--ref-ppl", required=True, help="prefix of the reference perplexity JSON files")
    ap.add_argument("--valid-dir", default=os.path.join(os.path.dirname(__file__), "../build/data/corpus/valid"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()

    meta = json.load(open(args.fixture + "__logits.json"))
    n, v = meta["n_tokens"], meta["n_vocab"]
    want = np.fromfile(args.fixture + "__logits.f32", dtype="<f4").reshape(n, v).astype(np.float64)
    gaps = np.array(meta["top1_top2_gap"])
    result = {"model": os.path.basename(args.model), "logits": {}, "ppl": {}}
    print(f"## {os.path.basename(args.model)}\n\n| logits | max abs d | mean abs d | argmax (gap >= 1e-3) |\n|---|---|---|---|")
    for mode in ("batch", "incremental"):
        got = strata_logits(args.strata, args.model, meta["tokens"], mode, args.threads).reshape(n, v)
        d = np.abs(got - want)
        keep = gaps >= 1e-3
        same = int((got.argmax(-1) == np.array(meta["argmax"]))[keep].sum())
        result["logits"][mode] = {"max_abs": float(d.max()), "mean_abs": float(d.mean()),
                                  "argmax_same": same, "argmax_checked": int(keep.sum())}
        print(f"| {mode} | {d.max():.3g} | {d.mean():.3g} | {same}/{int(keep.sum())} |")

    print("\n| text | tokens scored | strata ppl | reference ppl | rel. diff |\n|---|---|---|---|---|")
    for src in SOURCES + ["all"]:
        text = os.path.join(args.valid_dir, f"{src}.txt") if src != "all" else \
            os.path.join(args.valid_dir, "..", "valid.txt")
        ref_file = f"{args.ref_ppl}_{src}.json"
        if not os.path.exists(ref_file):
            print(f"| {src} | missing {ref_file} | | | |")
            continue
        ref = json.load(open(ref_file))
        got = strata_ppl(args.strata, args.model, text, args.threads)
        rel = abs(got["ppl"] - ref["ppl"]) / ref["ppl"]
        result["ppl"][src] = {"strata": got["ppl"], "reference": ref["ppl"], "rel": rel,
                              "scored": got.get("scored_tokens"), "ref_scored": ref["scored_tokens"]}
        flag = "" if got.get("scored_tokens") == ref["scored_tokens"] else " (scored counts differ!)"
        print(f"| {src} | {got.get('scored_tokens')} | {got['ppl']:.4f} | {ref['ppl']:.4f} | {rel:.2e}{flag} |")
    if args.json:
        json.dump(result, open(args.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
