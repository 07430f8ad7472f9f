#!/usr/bin/python3
"""Soak test of `strata serve` (issue 18; not in CI): N clients for a while, a share of them hanging
up at random moments, mixed prompt lengths, streamed and not, all seeded. Reports server errors
(5xx other than 503-with-Retry-After, broken answers), completed requests whose text differs from
the same request sent alone, what is running / waiting at the end (and the KV block gauges when
/metrics has them), and the server's RSS over time with its slope after the first minute.

  scripts/serve_soak.py build/release/tools/strata tests/data/bundled_smoke.gguf [--seconds 600]
      [--clients 32] [--hangup 0.3] [--csv rss.csv] [--serve-args "-t 1 --expert-budget 256K"]
"""
import argparse
import http.client
import json
import random
import re
import signal
import subprocess
import sys
import threading
import time

WORDS = ("the model reads a long text about tiers of memory experts routing tokens and caches "
         "while the server streams every answer to its many clients").split()


def start(binary, model, extra):
    p = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", "-np", "4", "-c", "1024", *extra],
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, int(m.group(1))
    sys.exit("server did not start")


def specs(n):
    """n seeded requests: prompts of 2..300 words, 4..48 tokens, streamed or not."""
    rng = random.Random(1234)
    out = []
    for i in range(n):
        words = rng.choice((2, 8, 40, 120, 300))
        prompt = " ".join(rng.choice(WORDS) for _ in range(words))
        out.append({"prompt": prompt, "max_tokens": rng.choice((4, 16, 48)), "temperature": 0.8,
                    "seed": 1000 + i, "stream": i % 2 == 1})
    return out


def request(port, spec, hangup_after=None):
    """(status, text, error): text of a completed answer; hangup_after: seconds before closing early."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        c.request("POST", "/v1/completions", json.dumps(spec), {"Content-Type": "application/json"})
        if hangup_after is not None:
            time.sleep(hangup_after)
            c.sock.close()
            return None, None, None
        r = c.getresponse()
        body = r.read().decode()
        if r.status != 200:
            return r.status, None, body[:200]
        if not spec["stream"]:
            return 200, json.loads(body)["choices"][0]["text"], None
        text, done = "", False
        for line in body.split("\n"):
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                j = json.loads(line[6:])
                if j.get("choices"):
                    text += j["choices"][0].get("text", "")
        return (200, text, None) if done else (200, None, "stream without [DONE]")
    except (OSError, http.client.HTTPException, ValueError) as e:
        return None, None, f"{type(e).__name__}: {e}"
    finally:
        c.close()


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in text.split("\n"):
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def slope_mib_per_min(points):
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    den = sum((t - mx) ** 2 for t, _ in points)
    return sum((t - mx) * (v - my) for t, v in points) / den * 60 / (1 << 20) if den else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("model")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--hangup", type=float, default=0.3)
    ap.add_argument("--specs", type=int, default=24)
    ap.add_argument("--csv")
    ap.add_argument("--serve-args", default="", help="more `strata serve` flags, one string")
    a = ap.parse_args()
    server, port = start(a.binary, a.model, a.serve_args.split())
    reqs = specs(a.specs)
    alone = [request(port, s) for s in reqs]  # each request alone, before the load
    bad_alone = [r[2] for r in alone if r[0] != 200]
    if bad_alone:
        sys.exit(f"reference requests failed: {bad_alone[:3]}")
    lock = threading.Lock()
    stats = {"completed": 0, "hangups": 0, "busy_503": 0, "errors": [], "mismatch": 0}
    stop = time.monotonic() + a.seconds

    def client(k):
        rng = random.Random(k)
        while time.monotonic() < stop:
            i = rng.randrange(len(reqs))
            hang = rng.uniform(0.0, 1.5) if rng.random() < a.hangup else None
            status, text, err = request(port, reqs[i], hang)
            with lock:
                if hang is not None:
                    stats["hangups"] += 1
                elif status == 200 and text is not None:
                    stats["completed"] += 1
                    if text != alone[i][1]:
                        stats["mismatch"] += 1
                elif status == 503:
                    stats["busy_503"] += 1
                else:
                    stats["errors"].append(f"{status}: {err}")

    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(a.clients)]
    for t in threads:
        t.start()
    rss = []
    while any(t.is_alive() for t in threads):
        rss.append((time.monotonic() - t0, metrics(port)["strata_process_resident_bytes"]))
        time.sleep(5)
    for t in threads:
        t.join()
    time.sleep(2)  # hung-up requests are cancelled at their next token
    m = metrics(port)
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    after = [(t, v) for t, v in rss if t >= 60] or rss
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("seconds,rss_bytes\n" + "".join(f"{t:.1f},{v:.0f}\n" for t, v in rss))
    kv = {k: v for k, v in m.items() if "kv" in k and "block" in k}
    print(json.dumps({
        "seconds": round(time.monotonic() - t0, 1), "clients": a.clients, "hangup_share": a.hangup,
        "completed": stats["completed"], "hangups": stats["hangups"], "busy_503": stats["busy_503"],
        "server_errors": len(stats["errors"]), "first_errors": stats["errors"][:5],
        "differs_from_alone": stats["mismatch"],
        "end_running": m.get("strata_requests_running"), "end_waiting": m.get("strata_requests_waiting"),
        "cancelled_total": m.get("strata_requests_cancelled_total"), "kv_blocks": kv,
        "rss_mib_first": round(rss[0][1] / (1 << 20), 1) if rss else None,
        "rss_mib_last": round(rss[-1][1] / (1 << 20), 1) if rss else None,
        "rss_slope_mib_per_min_after_60s": round(slope_mib_per_min(after), 3),
    }, indent=1))
    ok = not stats["errors"] and not stats["mismatch"] and m.get("strata_requests_running") == 0 and \
        m.get("strata_requests_waiting") == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
