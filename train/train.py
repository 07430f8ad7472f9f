#!/usr/bin/python3
"""Train strata's bundled MoE (model.py) on the tokenized corpus; seeded, resumable, time-boxed.

Data: <data>/train/<source>.bin (uint16 token streams from tokenizer.py encode), concatenated; each
step draws `batch` random windows of ctx+1 tokens with an RNG seeded by (seed, step), so a resumed
run sees exactly the batches an uninterrupted run would.
Validation (the definition `strata perplexity` must match): per source, the whole valid/<source>.bin
stream is cut into non-overlapping windows of ctx tokens (a short tail is dropped); every window is
run from position 0 and the tokens at positions 1..ctx-1 are scored (ctx-1 predictions per window).
PPL = exp(mean NLL over scored tokens); "overall" pools all sources' scored tokens.
Checkpoint: <run-dir>/ckpt.pt (model, optimizer, step, config, elapsed), written atomically every
--ckpt-every steps and at exit; a run starts from it when present. Log: <run-dir>/log.jsonl.
"""
import argparse
import dataclasses
import glob
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Config, MoETransformer  # noqa: E402

DATA = "/work/main/build/data/corpus"


def cpu_has_bf16():
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def load_streams(data_dir, split):
    paths = sorted(glob.glob(os.path.join(data_dir, split, "*.bin")))
    if not paths:
        sys.exit(f"no {split}/*.bin under {data_dir}: run train/tokenizer.py encode first")
    return {os.path.basename(p)[:-4]: np.fromfile(p, dtype=np.uint16) for p in paths}


def batch_at(stream, step, seed, batch, ctx):
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, len(stream) - ctx - 1, size=batch)
    w = np.stack([stream[s:s + ctx + 1] for s in starts]).astype(np.int64)
    w = torch.from_numpy(w)
    return w[:, :-1], w[:, 1:]


@torch.no_grad()
def evaluate(model, streams, ctx, max_windows=0, batch=8):
    """Returns ({source: {nll, tokens, ppl}}, overall dict, routing load [n_layer, n_expert] counts)."""
    model.eval()
    c = model.c
    load = torch.zeros(c.n_layer, c.n_expert, dtype=torch.float64)
    res, tot_nll, tot_n = {}, 0.0, 0
    for name, s in streams.items():
        n_win = len(s) // ctx
        if max_windows:
            n_win = min(n_win, max_windows)
        wins = torch.from_numpy(s[:n_win * ctx].astype(np.int64)).view(n_win, ctx)
        nll, n = 0.0, 0
        for i in range(0, n_win, batch):
            x = wins[i:i + batch]
            logits, _, routing = model(x, return_routing=True)
            lp = F.cross_entropy(logits[:, :-1].reshape(-1, c.vocab_size), x[:, 1:].reshape(-1), reduction="sum")
            nll += lp.item()
            n += x[:, 1:].numel()
            for li, ids in enumerate(routing):
                load[li] += torch.bincount(ids.reshape(-1), minlength=c.n_expert).double()
        res[name] = {"nll": nll / max(n, 1), "tokens": n, "ppl": math.exp(nll / max(n, 1))}
        tot_nll, tot_n = tot_nll + nll, tot_n + n
    model.train()
    overall = {"nll": tot_nll / max(tot_n, 1), "tokens": tot_n, "ppl": math.exp(tot_nll / max(tot_n, 1))}
    return res, overall, load


def routing_skew(load):
    """Per layer: max expert share / uniform share, and normalised entropy of the expert load."""
    out = []
    for row in load:
        p = row / row.sum().clamp(min=1)
        ent = -(p[p > 0] * p[p > 0].log()).sum().item() / math.log(len(p))
        out.append({"max_over_uniform": round(p.max().item() * len(p), 3), "entropy": round(ent, 4)})
    return out


def lr_at(step, args):
    """Linear warmup, then either cosine to min_lr over --steps, or WSD: constant until the last
    --decay-frac of --steps, then linear to min_lr. WSD lets a resumed run raise --steps freely
    while still in the constant phase (useful when the time budget is not known in advance)."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    lo = args.lr * args.min_lr_frac
    if args.schedule == "wsd":
        decay_start = int(args.steps * (1 - args.decay_frac))
        if step < decay_start:
            return args.lr
        return args.lr + (lo - args.lr) * min(1.0, (step - decay_start) / max(1, args.steps - decay_start))
    t = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return lo + (args.lr - lo) * 0.5 * (1 + math.cos(math.pi * t))


def save_ckpt(path, model, opt, step, args, elapsed, tokens):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "config": dataclasses.asdict(model.c), "args": vars(args), "elapsed": elapsed,
                "tokens": tokens}, tmp)
    os.replace(tmp, path)


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--run-dir", default="/work/main/build/data/runs/main")
    for f in dataclasses.fields(Config):
        ap.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    ap.add_argument("--batch", type=int, default=8, help="sequences of ctx tokens per step")
    ap.add_argument("--steps", type=int, default=4000, help="total steps (sets the LR schedule)")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--schedule", choices=["wsd", "cosine"], default="wsd")
    ap.add_argument("--decay-frac", type=float, default=0.2, help="WSD: final fraction of steps that decays")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    ap.add_argument("--bf16", choices=["auto", "on", "off"], default="auto",
                    help="bf16 autocast for training matmuls (f32 master weights, residual, softmax, loss, "
                         "router); auto = on when the CPU has AVX512_BF16/AMX (about 1.8x faster there)")
    ap.add_argument("--time-limit", type=float, default=0, help="minutes for this invocation (0 = none)")
    ap.add_argument("--stop-at", type=int, default=0, help="stop (and checkpoint) at this step; 0 = --steps")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-windows", type=int, default=16, help="windows per source for periodic evals")
    ap.add_argument("--ckpt-every", type=int, default=100)
    return ap


def main():
    args = build_parser().parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.run_dir, exist_ok=True)
    ckpt_path = os.path.join(args.run_dir, "ckpt.pt")
    cfg = Config(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Config)})
    ck = None
    if os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        cfg = Config(**ck["config"])  # the checkpoint's shape wins over flags
        print(f"resuming from {ckpt_path} at step {ck['step']}")
    torch.manual_seed(args.seed)
    model = MoETransformer(cfg)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    step, elapsed, tokens = 0, 0.0, 0
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, elapsed, tokens = ck["step"], ck["elapsed"], ck["tokens"]
    use_bf16 = args.bf16 == "on" or (args.bf16 == "auto" and cpu_has_bf16())
    total, active = model.param_counts()
    print(f"config {dataclasses.asdict(cfg)}\nparams {total / 1e6:.2f} M total, {active / 1e6:.2f} M active; "
          f"threads {args.threads}, bf16 autocast {use_bf16}", flush=True)
    train = np.concatenate(list(load_streams(args.data, "train").values()))
    valid = load_streams(args.data, "valid")
    if int(train.max()) >= cfg.vocab_size:
        sys.exit(f"token id {int(train.max())} >= vocab_size {cfg.vocab_size}: tokenizer/model mismatch")
    print(f"train tokens {len(train) / 1e6:.2f} M; valid tokens " +
          ", ".join(f"{k} {len(v)}" for k, v in valid.items()), flush=True)
    log = open(os.path.join(args.run_dir, "log.jsonl"), "a")
    t_start, t_window, tok_window = time.time(), time.time(), 0
    model.train()
    while step < args.steps:
        if args.time_limit and time.time() - t_start > args.time_limit * 60:
            print(f"time limit reached at step {step}")
            break
        if args.stop_at and step >= args.stop_at:
            print(f"--stop-at reached at step {step}")
            break
        lr = lr_at(step, args)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch_at(train, step, args.seed, args.batch, cfg.ctx)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=use_bf16):
            logits, aux, _ = model(x)
        ce = F.cross_entropy(logits.float().reshape(-1, cfg.vocab_size), y.reshape(-1))
        loss = ce + cfg.aux_loss_coef * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        step += 1
        tokens += x.numel()
        tok_window += x.numel()
        if step % args.log_every == 0:
            now = time.time()
            tps = tok_window / (now - t_window)
            elapsed += now - t_window
            t_window, tok_window = now, 0
            rec = {"step": step, "loss": round(ce.item(), 4), "aux": round(aux.item(), 4), "lr": lr,
                   "gnorm": round(gnorm.item(), 3), "tok_s": round(tps, 1), "tokens": tokens,
                   "elapsed_min": round(elapsed / 60, 2)}
            print(json.dumps(rec), flush=True)
            log.write(json.dumps(rec) + "\n")
            log.flush()
        last = step == args.steps
        if step % args.eval_every == 0 or last:
            t0 = time.time()
            per, overall, load = evaluate(model, valid, cfg.ctx, 0 if last else args.eval_windows)
            rec = {"step": step, "eval": {k: round(v["ppl"], 3) for k, v in per.items()},
                   "overall_ppl": round(overall["ppl"], 3), "overall_nll": round(overall["nll"], 5),
                   "scored_tokens": overall["tokens"], "full": last, "routing": routing_skew(load)}
            print(json.dumps(rec), flush=True)
            log.write(json.dumps(rec) + "\n")
            log.flush()
            t_window += time.time() - t0  # keep eval time out of tokens/s
        if step % args.ckpt_every == 0 or last:
            save_ckpt(ckpt_path, model, opt, step, args, elapsed, tokens)
    elapsed += time.time() - t_window
    save_ckpt(ckpt_path, model, opt, step, args, elapsed, tokens)
    print(f"saved {ckpt_path} at step {step} ({tokens / 1e6:.2f} M tokens, {elapsed / 60:.1f} min of training)")


if __name__ == "__main__":
    main()
