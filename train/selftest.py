#!/usr/bin/python3
"""Fast checks of train/ (about a minute on one core); exits non-zero on the first failure.

  1. rds.py reads janeaustenr's lazy-load DB (if the package is installed)
  2. quant.py is byte-identical to llama-quantize on the shared fixtures (Q8_0, MXFP4)
  3. reference_forward.py matches llama.cpp's logits for tiny-qwen3moe-f32 (max |d| < 1e-5)
  4. a random tiny model.py checkpoint exported to GGUF (F32) gives the same logits in
     reference_forward.py as in model.py (max |d| < 1e-4), and train.py's validation perplexity
     equals reference_forward.py's window perplexity on the same tokens
"""
import json
import os
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_gguf  # noqa: E402
import gguf_io  # noqa: E402
import quant  # noqa: E402
import reference_forward as rf  # noqa: E402
import train as trainer  # noqa: E402
from model import Config, MoETransformer  # noqa: E402

FIX = os.environ.get("STRATA_FIXTURES", os.path.join(HERE, "..", "..", "shared", "fixtures"))
SP = os.environ.get("STRATA_SP_MODEL", "/work/main/build/data/tokenizer/strata_sp4096.model")


def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg, flush=True)
    if not cond:
        sys.exit(1)


def test_rds():
    rdx = "/usr/lib/R/site-library/janeaustenr/data/Rdata.rdx"
    if not os.path.exists(rdx):
        print("skip rds (r-cran-janeaustenr not installed)")
        return
    import rds
    db = rds.read_lazyload_db(rdx)
    check(len(db["emma"].value) > 10000 and db["emma"].value[0] == "EMMA", "rds: janeaustenr emma parsed")


def test_quant():
    if not os.path.isdir(os.path.join(FIX, "models")):
        print("skip quant/fixture checks (no fixtures)")
        return
    for f32, qf in (("tiny-qwen3moe-f32", "tiny-qwen3moe-Q8_0"), ("tiny-gpt-oss-f32", "tiny-gpt-oss-MXFP4_MOE")):
        a = gguf_io.GGUFFile(os.path.join(FIX, "models", f32 + ".gguf"))
        b = gguf_io.GGUFFile(os.path.join(FIX, "models", qf + ".gguf"))
        n_same = n_all = 0
        for name, (t, ne, off) in b.tensors.items():
            if t not in (gguf_io.GGML_Q8_0, gguf_io.GGML_MXFP4):
                continue
            n = int(np.prod(ne))
            start = b.data_start + off
            theirs = b.data[start:start + n // 32 * gguf_io.GGML_BLOCK[t][1]].tobytes()
            mine = (quant.quantize_mxfp4 if t == gguf_io.GGML_MXFP4 else quant.quantize_q8_0)(a.tensor(name))
            n_same += mine == theirs
            n_all += 1
        check(n_all > 0 and n_same == n_all, f"quant: {n_same}/{n_all} tensors of {qf} byte-identical")


def test_reference_vs_llama():
    js = os.path.join(FIX, "logits", "tiny-qwen3moe-f32__long128.json")
    if not os.path.exists(js):
        print("skip reference vs llama.cpp (no fixtures)")
        return
    toks = json.load(open(js))["tokens"]
    exp = np.fromfile(js[:-5] + ".f32", dtype="<f4").reshape(len(toks), -1)
    ref = rf.QwenMoeRef(os.path.join(FIX, "models", "tiny-qwen3moe-f32.gguf"))
    got = ref.forward(torch.tensor([toks]))[0].numpy()
    d = np.abs(got - exp).max()
    check(d < 1e-5, f"reference_forward vs llama.cpp tiny-qwen3moe-f32 long128: max |d| {d:.2e}")


def test_export_roundtrip():
    if not os.path.exists(SP):
        print(f"skip export round trip (no tokenizer at {SP})")
        return
    torch.manual_seed(0)
    cfg = Config(n_layer=2, d_model=64, n_head=4, n_head_kv=2, head_dim=16, n_expert=8, n_expert_used=2,
                 d_ff_expert=64, ctx=64, rope_base=5000.0)
    m = MoETransformer(cfg)
    with torch.no_grad():  # random norm weights so a dropped norm multiply would show
        for name, p in m.named_parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)
            elif "router" in name:
                p.normal_(0, 0.5)
    m.eval()
    with tempfile.TemporaryDirectory() as tmp:
        ck = os.path.join(tmp, "ckpt.pt")
        opt = torch.optim.AdamW(m.parameters())
        args = trainer.build_parser().parse_args([])
        trainer.save_ckpt(ck, m, opt, 0, args, 0.0, 0)
        out = os.path.join(tmp, "t.gguf")
        export_gguf.export(ck, SP, out, "selftest", "f32")
        ref = rf.QwenMoeRef(out)
        toks = torch.randint(0, cfg.vocab_size, (1, 64), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            a = m(toks)[0][0].double()
        d = (a - ref.forward(toks)[0]).abs().max().item()
        check(d < 1e-4, f"export f32 round trip: model.py vs reference_forward max |d| {d:.2e}")
        stream = np.random.default_rng(2).integers(0, cfg.vocab_size, size=64 * 5 + 17).astype(np.uint16)
        per, _, _ = trainer.evaluate(m, {"x": stream}, cfg.ctx)
        r = rf.window_perplexity(ref, stream, cfg.ctx)
        check(abs(per["x"]["nll"] - r["nll"]) < 1e-5 and per["x"]["tokens"] == r["scored_tokens"],
              f"validation windows: train.py nll {per['x']['nll']:.6f} == reference {r['nll']:.6f}, "
              f"{r['scored_tokens']} scored tokens")


if __name__ == "__main__":
    torch.set_num_threads(1)
    test_rds()
    test_quant()
    test_reference_vs_llama()
    test_export_roundtrip()
    print("all train/ self-tests passed")
