#!/usr/bin/python3
"""ctest Dashboard.RendersInChromium: the live dashboard in Debian's headless Chromium (issue 18).

Starts `strata serve` (with an API key, given to the page as #key=, and an expert budget so that the
expert tier and the heat map have numbers), opens http://127.0.0.1:PORT/ in headless Chromium, drives
it over the DevTools protocol (a minimal WebSocket client below: stdlib only), sends a few
completions, waits until the page has received several updates and shows the new numbers (tokens
generated, TTFT percentiles, memory, the heat map, the KV pool's blocks and prefix hit rate), and saves a screenshot as OUT_DIR/dashboard.png;
then opens the page without the key, which must ask for it and connect once it is typed in.
Without chromium: skipped (exit 77), or failed when CI=true.

  dashboard_chromium.py STRATA MODEL OUT_DIR
"""
import base64
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

KEY = "dash-test-key"


def skip(msg):
    if os.environ.get("CI") == "true":
        print("FAIL (CI=true):", msg)
        sys.exit(1)
    print("SKIP:", msg)
    sys.exit(77)


def wait_line(stream, pattern, what, timeout=60):
    """The first match of pattern in stream's lines (the rest is drained in the background)."""
    found = []
    done = threading.Event()

    def read():
        for line in stream:
            if not found:
                m = re.search(pattern, line)
                if m:
                    found.append(m)
                    done.set()
        done.set()

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(timeout) or not found:
        sys.exit(f"FAIL: {what} did not start")
    return found[0]


class DevTools:
    """Just enough of RFC 6455 (client side) for the DevTools protocol's JSON messages."""

    def __init__(self, url):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((m[1], int(m[2])), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {m[3]} HTTP/1.1\r\nHost: {m[1]}:{m[2]}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += self.exact(1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            sys.exit(f"FAIL: DevTools WebSocket handshake: {head[:200]!r}")
        self.id = 0

    def exact(self, n):
        out = b""
        while len(out) < n:
            d = self.sock.recv(n - len(out))
            if not d:
                raise ConnectionError("DevTools connection closed")
            out += d
        return out

    def message(self):
        payload = b""
        while True:
            b0, b1 = self.exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self.exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self.exact(8))[0]
            data = self.exact(n)
            op = b0 & 0x0F
            if op == 8:
                raise ConnectionError("DevTools connection closed")
            if op in (0, 1, 2):
                payload += data
                if b0 & 0x80:
                    return json.loads(payload)

    def call(self, method, **params):
        self.id += 1
        data = json.dumps({"id": self.id, "method": method, "params": params}).encode()
        head = bytearray([0x81])
        if len(data) < 126:
            head.append(0x80 | len(data))
        elif len(data) < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", len(data))
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", len(data))
        mask = os.urandom(4)
        self.sock.sendall(bytes(head) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
        while True:
            msg = self.message()
            if msg.get("id") == self.id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]


PAGE_STATE = """JSON.stringify({
  updates: +(document.body.dataset.updates || 0),
  status: document.getElementById('status').textContent,
  uptime: document.getElementById('uptime').textContent,
  gen: document.getElementById('gen-total').textContent,
  gen_tps: document.getElementById('gen-tps').textContent,
  ok: document.getElementById('ok').textContent,
  ttft50: document.getElementById('ttft-p50').textContent,
  tpot99: document.getElementById('tpot-p99').textContent,
  rss: document.getElementById('rss').textContent,
  tier: document.getElementById('tier-use').textContent,
  hit: document.getElementById('hit-rate').textContent,
  heat: document.getElementById('heat-note').textContent,
  slots: document.querySelectorAll('#slots .slot').length,
  lines: document.querySelectorAll('#tps-chart polyline').length,
  kv_free: document.getElementById('kv-free').textContent,
  kv_hit: document.getElementById('kv-hit').textContent,
  kv_rects: document.querySelectorAll('#kv-gauge rect').length
})"""


def main():
    strata, model, out_dir = sys.argv[1:4]
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        skip("chromium not found (apt install chromium)")
    os.makedirs(out_dir, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="strata_chromium_")
    server = subprocess.Popen([strata, "serve", "-m", model, "--port", "0", "-np", "2", "-c", "256", "-t", "1",
                               "--api-key", KEY, "--expert-budget", "256K"], stderr=subprocess.PIPE, text=True)
    browser = None
    try:
        port = int(wait_line(server.stderr, r"listening on http://[^:]+:(\d+)", "strata serve")[1])
        url = f"http://127.0.0.1:{port}/#key={KEY}"
        browser = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                    "--no-first-run", "--no-default-browser-check", f"--user-data-dir={profile}",
                                    "--remote-debugging-port=0", "--window-size=1280,1100", url],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ws = wait_line(browser.stderr, r"DevTools listening on (ws://\S+)", "chromium")[1]
        dport = re.match(r"ws://[^:]+:(\d+)", ws)[1]
        target = None
        for _ in range(100):
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{dport}/json/list", timeout=10))
            target = next((t for t in targets if t.get("type") == "page" and f":{port}/" in t.get("url", "")), None)
            if target:
                break
            time.sleep(0.1)
        if not target:
            sys.exit("FAIL: chromium has no page for the dashboard")
        page = DevTools(target["webSocketDebuggerUrl"])

        def state():  # None while the page is not there yet (the expression throws)
            r = page.call("Runtime.evaluate", expression=PAGE_STATE, returnByValue=True)
            value = r.get("result", {}).get("value")
            return json.loads(value) if isinstance(value, str) else {"not_ready": r}

        def wait(cond, what, timeout=60):
            t0 = time.monotonic()
            while time.monotonic() - t0 < timeout:
                s = state()
                if "not_ready" not in s and cond(s):
                    return s
                time.sleep(0.2)
            sys.exit(f"FAIL: {what}; the page shows {json.dumps(state())}")

        first = wait(lambda s: s["updates"] >= 1, "no update reached the page")
        print("first update:", json.dumps(first))
        # Requests for the numbers to change: one prompt of a few KV blocks twice (the second finds
        # the first's blocks in the prefix cache).
        for prompt in ("Once upon a time there was a fox. " * 6,) * 2:
            body = json.dumps({"prompt": prompt, "max_tokens": 8, "temperature": 0}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                         {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
            urllib.request.urlopen(req, timeout=120).read()
        s = wait(lambda s: s["gen"] == "16" and s["ok"] == "2" and s["updates"] >= first["updates"] + 2,
                 "the page did not show the 2 requests' 16 tokens")
        print("after 2 requests:", json.dumps(s))
        number = re.compile(r"^\d+(\.\d+)?$")
        checks = {
            "status is live": s["status"] == "live",
            "uptime changed": s["uptime"] != first["uptime"] or s["updates"] > first["updates"],
            "TTFT p50 is a positive number of ms": number.match(s["ttft50"]) and float(s["ttft50"]) > 0,
            "TPOT p99 is a number": bool(number.match(s["tpot99"])),
            "tokens/s is a number": bool(number.match(s["gen_tps"])),
            "resident memory shown": bool(re.search(r"\d+(\.\d)? [KMG]iB", s["rss"])),
            "expert tier use shown": "/" in s["tier"],
            "hit rate is a percentage": s["hit"].endswith("%"),
            "heat map drawn": "layers x" in s["heat"],
            "two slots": s["slots"] == 2,
            "throughput chart drawn": s["lines"] >= 1,
            "KV blocks shown": bool(re.match(r"^\d+ / \d+ \(\d+\)$", s["kv_free"])),
            "KV blocks changed (cached after the requests)": s["kv_free"] != first["kv_free"]
            and not s["kv_free"].startswith("0 "),
            "KV prefix hit rate above 0": s["kv_hit"].endswith("%") and float(s["kv_hit"][:-1]) > 0,
            "KV gauge drawn": s["kv_rects"] == 3,
        }
        bad = [k for k, ok in checks.items() if not ok]
        shot = page.call("Page.captureScreenshot", format="png")["data"]
        path = os.path.join(out_dir, "dashboard.png")
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot))
        print(f"screenshot: {path} ({os.path.getsize(path)} bytes)")
        if bad:
            sys.exit("FAIL: " + "; ".join(bad))
        # Without #key= the stream is a 401: the page asks for the key, and connects once it is given.
        page.call("Page.navigate", url=f"http://127.0.0.1:{port}/dashboard")
        wait(lambda s: s["status"] == "API key needed", "the page did not ask for the API key")
        page.call("Runtime.evaluate", expression=f"document.getElementById('key').value = '{KEY}'; "
                  "document.getElementById('keygo').click()")
        wait(lambda s: s["status"] == "live" and s["updates"] >= 1, "the page did not connect with the typed key")
        print("PASS")
    finally:
        if browser:
            browser.kill()
            browser.wait()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
