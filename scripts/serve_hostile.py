#!/usr/bin/python3
"""strata serve against hostile clients, measured (issue 18): /health latency under idle and
trickling connections, the server's memory while a 200 MB chunked body streams in, a second server on
the same port, and the time SIGTERM takes with streams open (each must end with a final event).

  scripts/serve_hostile.py build/release/tools/strata tests/data/bundled_smoke.gguf [--idle 500 --trickle 64]
"""
import argparse
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time


def start(binary, model, extra=()):
    p = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", "-np", "4", "-c", "4096", *extra],
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, int(m.group(1))
    sys.exit("server did not start")


def rss_kib(pid, key="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def conn(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def health_ms(port):
    t0 = time.monotonic()
    s = conn(port)
    s.settimeout(30)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    got = b""
    while b"}" not in got:
        d = s.recv(4096)
        if not d:
            break
        got += d
    s.close()
    assert got.startswith(b"HTTP/1.1 200"), got
    return (time.monotonic() - t0) * 1e3


def stream(port, out, i):
    s = conn(port)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 4000, "ignore_eos": True, "stream": True})
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
    got = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
        out[i] = got
        if got.endswith(b"0\r\n\r\n"):
            break
    out[i] = got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("model")
    ap.add_argument("--idle", type=int, default=500)
    ap.add_argument("--trickle", type=int, default=64)
    a = ap.parse_args()

    p, port = start(a.binary, a.model)
    try:
        measure(a, p, port)
    finally:
        if p.poll() is None:
            p.kill()


def hostile(port, n_idle, n_trickle):
    """n_idle silent connections and n_trickle sending one header byte per second each."""
    idle = [conn(port) for _ in range(n_idle)]
    trickle = [conn(port) for _ in range(n_trickle)]
    stop = threading.Event()

    def drip():
        head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: "
        k = 0
        while not stop.is_set():
            for s in trickle:
                s.send(head[k:k + 1] if k < len(head) else b"x")
            k += 1
            stop.wait(1.0)
    t = threading.Thread(target=drip, daemon=True)
    t.start()

    def release():
        stop.set()
        t.join()
        for s in idle + trickle:
            s.close()
    return release


def tpot_ms(binary, port, out):
    subprocess.run([binary, "loadtest", "--url", f"http://127.0.0.1:{port}", "--concurrency", "4", "--requests",
                    "16", "-n", "64", "--classes", "short:16", "--json", out], check=True, capture_output=True,
                   timeout=300)
    with open(out) as f:
        return json.load(f)["classes"][0]["tpot_s"]["p50"] * 1e3


def measure(a, p, port):
    release = hostile(port, a.idle, a.trickle)
    time.sleep(1.5)
    lat = sorted(health_ms(port) for _ in range(10))
    print(f"/health under {a.idle} idle + {a.trickle} trickling connections: 10 probes, "
          f"median {lat[5]:.2f} ms, max {lat[-1]:.2f} ms")
    release()

    # 4 streaming clients' TPOT alone and beside the hostile connections, 3 interleaved rounds.
    out = f"/tmp/serve_hostile_{os.getpid()}.json"
    alone, beside = [], []
    for _ in range(3):
        alone.append(tpot_ms(a.binary, port, out))
        release = hostile(port, a.idle, a.trickle)
        time.sleep(0.5)
        beside.append(tpot_ms(a.binary, port, out))
        release()
    os.remove(out)
    ma, mb = sorted(alone)[1], sorted(beside)[1]
    print(f"TPOT p50 of 4 streaming clients, median of 3 rounds: alone {ma:.3f} ms, beside the hostile "
          f"connections {mb:.3f} ms ({mb / ma:.2f}x)")

    # A 200 MB chunked body: refused at the body limit, memory bounded.
    time.sleep(0.2)
    rss0, hwm0 = rss_kib(p.pid), rss_kib(p.pid, "VmHWM")
    s = conn(port)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"10000\r\n" + b"a" * 65536 + b"\r\n"
    sent, answer = 0, b""
    s.setblocking(False)
    t0 = time.monotonic()
    while sent < 200 << 20:
        r, w, _ = select.select([s], [s], [], 5)
        if r:
            break
        try:
            sent += s.send(piece)
        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
            break
    s.setblocking(True)
    s.settimeout(5)
    try:
        while b"}}" not in answer:
            d = s.recv(4096)
            if not d:
                break
            answer += d
    except OSError:
        pass
    s.close()
    status = answer.split(b"\r\n")[0].decode()
    print(f"200 MB chunked body: answered {status!r} after {sent / 2**20:.1f} MiB "
          f"sent ({(time.monotonic() - t0) * 1e3:.0f} ms); server RSS {rss0 / 1024:.1f} -> "
          f"{rss_kib(p.pid) / 1024:.1f} MiB, peak grew {(rss_kib(p.pid, 'VmHWM') - hwm0) / 1024:.1f} MiB")

    # A second server on the same port.
    q = subprocess.run([a.binary, "serve", "-m", a.model, "--port", str(port)], capture_output=True, text=True,
                       timeout=60)
    print(f"second server on port {port}: exit {q.returncode}: {q.stderr.strip().splitlines()[-1]}")

    # SIGTERM with 4 streams open.
    out = [b""] * 4
    ts = [threading.Thread(target=stream, args=(port, out, i)) for i in range(4)]
    for t in ts:
        t.start()
    while not all(b'"text"' in o for o in out):
        time.sleep(0.01)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    took = time.monotonic() - t0
    for t in ts:
        t.join(timeout=10)
    ended = sum(1 for o in out if b"server shutting down" in o and o.endswith(b"0\r\n\r\n"))
    print(f"SIGTERM with 4 streams open: exited in {took * 1e3:.0f} ms (code {p.returncode}); "
          f"{ended}/4 streams ended with the final event")


if __name__ == "__main__":
    main()
