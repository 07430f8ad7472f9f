#!/usr/bin/python3
"""Grammar overhead of an OpenAI-compatible server (strata serve or llama-server): the time per
output token of C concurrent streamed /v1/completions requests with a GBNF `grammar` (the
extension field both servers take) against the same requests without one, in interleaved rounds.
Use a grammar no reply completes within max_tokens (bench/grammars/json_list.gbnf) so that both
runs generate the same number of tokens at the same depths.

  bench/grammar_overhead.py --url http://127.0.0.1:8080 --grammar bench/grammars/json.gbnf -c 1 -c 16

Each request: a prompt from a fixed word list, max_tokens N, temperature 0.8 with seed i (the
same seeds both ways). TPOT = (last token time - first token time) / (tokens - 1), per request;
the round's value is the median over its requests; the overhead is grammar / plain - 1 per round.
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse

WORDS = "the river of time and a small house stood near old road where people walked every day".split()


def one(host, port, body, out, i):
    conn = http.client.HTTPConnection(host, port, timeout=600)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        out[i] = ("error", r.status, r.read()[:200])
        return
    times, buf, n_tokens = [], b"", 0
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if not ev.startswith(b"data: ") or ev[6:] == b"[DONE]":
                continue
            j = json.loads(ev[6:])
            if j.get("usage"):
                n_tokens = j["usage"].get("completion_tokens", 0)
            ch = j.get("choices") or []
            if ch and ch[0].get("text"):
                times.append(time.perf_counter())
    conn.close()
    out[i] = ("ok", times, n_tokens)


def round_tpot(host, port, c, n, grammar, seed0):
    out = [None] * c
    ths = []
    for i in range(c):
        prompt = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(24))
        body = {"prompt": prompt, "max_tokens": n, "temperature": 0.8, "seed": seed0 + i, "stream": True,
                "stream_options": {"include_usage": True}}
        if grammar:
            body["grammar"] = grammar
        t = threading.Thread(target=one, args=(host, port, body, out, i))
        t.start()
        ths.append(t)
    for t in ths:
        t.join()
    tpots, tokens = [], 0
    for o in out:
        if o[0] != "ok":
            raise SystemExit(f"request failed: {o}")
        ts, n_tok = o[1], o[2] or len(o[1])
        tokens += n_tok
        if n_tok >= 3 and len(ts) >= 2:
            tpots.append((ts[-1] - ts[0]) / (n_tok - 1))
    return statistics.median(tpots), tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--grammar", required=True, help="GBNF file")
    ap.add_argument("-c", "--concurrency", type=int, action="append")
    ap.add_argument("-n", "--max-tokens", type=int, default=128)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    grammar = open(a.grammar).read()
    res = []
    for c in a.concurrency or [1]:
        round_tpot(u.hostname, u.port, c, 8, None, 0)  # warm-up
        rows = []
        for r in range(a.rounds):
            plain, np_ = round_tpot(u.hostname, u.port, c, a.max_tokens, None, 100 * r)
            gram, ng = round_tpot(u.hostname, u.port, c, a.max_tokens, grammar, 100 * r)
            rows.append({"plain_ms": plain * 1e3, "grammar_ms": gram * 1e3, "overhead": gram / plain - 1,
                         "plain_tokens": np_, "grammar_tokens": ng})
            print(f"c={c} round {r}: TPOT plain {plain * 1e3:.3f} ms ({np_} tokens), grammar {gram * 1e3:.3f} ms "
                  f"({ng} tokens): overhead {100 * (gram / plain - 1):+.1f}%", flush=True)
        med = statistics.median(x["overhead"] for x in rows)
        print(f"c={c}: median overhead {100 * med:+.1f}%")
        res.append({"concurrency": c, "rounds": rows, "median_overhead": med})
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
