"""make serve-bench: a load run of ./run -m serve (README, "Serving").

For 1, 2, 4 and 8 concurrent streams (each a client that sends streamed
completions one after another, temperature 0, a different prompt each),
against a server with --parallel 8: the aggregate decode rate (completion
tokens of all streams / wall seconds, prefill included), the p50 and p99
time to first token, and failed requests. The server runs on 127.0.0.1 at a
free port and is stopped at the end.

  SERVE_MODEL (default MODELS/stories260K.bin), SERVE_TOK (MODELS/tok512.bin),
  SERVE_THREADS (2), SERVE_REQUESTS (requests per stream, default 24),
  SERVE_MAX_TOKENS (128), SERVE_STREAMS ("1,2,4,8").
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("LLM_MODELS", os.path.join(ROOT, "..", "shared", "models"))
MODEL = os.environ.get("SERVE_MODEL", os.path.join(MODELS, "stories260K.bin"))
TOK = os.environ.get("SERVE_TOK", os.path.join(MODELS, "tok512.bin"))
THREADS = os.environ.get("SERVE_THREADS", "2")
REQUESTS = int(os.environ.get("SERVE_REQUESTS", "24"))
MAX_TOKENS = int(os.environ.get("SERVE_MAX_TOKENS", "128"))
STREAMS = [int(s) for s in os.environ.get("SERVE_STREAMS", "1,2,4,8").split(",")]
PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went", "One day, a bird", "Tom had a red ball",
           "The sun was", "Mom said", "In the park"]


def start():
    p = subprocess.Popen([os.path.join(ROOT, "run"), MODEL, "-z", TOK, "-m", "serve", "--port", "0", "--threads", THREADS,
                          "--parallel", str(max(STREAMS)), "-t", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = p.stderr.readline().decode()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, int(m.group(1))
        if not line:
            break
    p.kill()
    sys.exit("the server did not start")


def one_request(port, prompt):
    """(time to first token, completion tokens) of one streamed completion; raises on failure."""
    body = json.dumps({"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    t0 = time.time()
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}")
    ttft, tokens, done = None, None, False
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            break
        chunk = json.loads(line[6:])
        if ttft is None and chunk["choices"] and chunk["choices"][0]["text"]:
            ttft = time.time() - t0
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
    c.close()
    if not done or tokens is None:
        raise RuntimeError("stream ended early")
    return ttft if ttft is not None else time.time() - t0, tokens


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    p, port = start()
    try:
        one_request(port, "Hello")   # warm up
        print(f"model {os.path.basename(MODEL)}, --threads {THREADS}, --parallel {max(STREAMS)}, "
              f"{REQUESTS} requests a stream of max_tokens {MAX_TOKENS}")
        print("| streams | requests | failed | completion tokens | seconds | aggregate tok/s | p50 TTFT ms | p99 TTFT ms |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        base = None
        for n in STREAMS:
            ttfts, tokens, failed = [], [0], [0]
            lock = threading.Lock()

            def stream(i):
                for k in range(REQUESTS):
                    try:
                        t, c = one_request(port, PROMPTS[(i + k) % len(PROMPTS)])
                        with lock:
                            ttfts.append(t)
                            tokens[0] += c
                    except Exception:
                        with lock:
                            failed[0] += 1
            t0 = time.time()
            threads = [threading.Thread(target=stream, args=(i,)) for i in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            secs = time.time() - t0
            rate = tokens[0] / secs
            base = base or rate
            print(f"| {n} | {n * REQUESTS} | {failed[0]} | {tokens[0]} | {secs:.2f} | {rate:.1f} ({rate / base:.2f}x) | "
                  f"{pct(ttfts, 0.5) * 1e3:.1f} | {pct(ttfts, 0.99) * 1e3:.1f} |", flush=True)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)


if __name__ == "__main__":
    main()
