"""./run MODEL -m serve, the OpenAI-compatible HTTP server (issue 27).

Every server here listens on 127.0.0.1 at a port the kernel picks (--port 0,
read back from the "listening on http://HOST:PORT" line), and is stopped with
SIGTERM (its exit status and time checked) or killed at the end of its test.

- The official openai npm client (tests/js, pinned in package-lock.json)
  drives a server: models.list, chat and completions, streamed and not, a
  seed, stop strings, four clients at once, an error as the client sees it.
  Every text at temperature 0 (and with a seed) is the CLI's for the same
  prompt or conversation (./run -m generate / -m chat with -n set so the CLI
  stops where max_tokens does), and each of four requests run together is the
  same request's text served alone: the slots' tokens share one forward pass
  (llm_forward_batch), which must give each the bits of llm_forward alone.
- Python's http.client and raw sockets for what a client must not be able to
  break: malformed and non-UTF-8 JSON, wrong field types, limits (body 413,
  header 431, request line 414, messages, max_tokens against the context),
  an unknown path 404, a wrong method 405, chunked bodies 501, a wrong or
  missing API key 401; a disconnect mid-stream (the log says the request was
  cancelled, and the one slot serves the next request); a slow client
  (--timeout 1: 408 within the timeout while other clients are served); a
  full queue (503); SIGTERM and SIGINT with connections open (exit 0 within 2 s).
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import common
from common import model, run

CKPT = model("stories260K.bin")
TOK = model("tok512.bin")
JS = os.path.join(common.TESTS, "js")
# the node client repeats what the raw tests check in every build
FIRST_BUILD_ONLY = ("test_openai_node_client",)


class Server:
    """./run -m serve on 127.0.0.1, a free port; its stderr kept in self.log."""

    def __init__(self, *args, start_timeout=60):
        self.p = subprocess.Popen([common.RUN, CKPT, "-z", TOK, "-m", "serve", "--host", "127.0.0.1", "--port", "0",
                                   "--threads", "1", *[str(a) for a in args]],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.log = []
        deadline = time.time() + start_timeout
        self.port = None
        while time.time() < deadline:
            line = self.p.stderr.readline().decode("utf-8", "replace")
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.p.kill()
            raise AssertionError("the server did not start:\n" + "".join(self.log))
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self):
        for line in self.p.stderr:
            self.log.append(line.decode("utf-8", "replace"))

    def stop(self, sig=signal.SIGTERM):
        """Signal the server; (exit status, seconds it took)."""
        t0 = time.time()
        self.p.send_signal(sig)
        try:
            rc = self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError("the server did not exit within 10 s of the signal")
        self.reader.join(timeout=5)
        return rc, time.time() - t0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, parsed JSON body) of one request on a fresh connection."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            c.request(method, path, body=data, headers=dict({"Content-Type": "application/json"}, **(headers or {})))
            r = c.getresponse()
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
        finally:
            c.close()

    def raw(self, data, timeout=10, read=True):
        """Send bytes on a fresh socket; the whole answer until the server closes."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(data)
            return read_all(s) if read else b""


def read_all(s):
    out = b""
    while True:
        try:
            b = s.recv(65536)
        except socket.timeout:
            raise AssertionError("the server neither answered nor closed in time; got %r" % out[:200])
        if not b:
            return out
        out += b


def status_of(answer):
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", answer)
    assert m, answer[:200]
    return int(m.group(1))


def error_body(answer):
    """The OpenAI-style error of a raw answer: {"error": {"message", "type", ...}}."""
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    assert isinstance(body["error"]["type"], str) and body["error"]["type"], body
    return body["error"]


# ---------------------------------------------------------------- the CLI's texts

def cli_completion(prompt, n_prompt, max_tokens, *flags):
    """The CLI's continuation of prompt that stops where max_tokens does (it prints the prompt first)."""
    rc, out, err = run([CKPT, "-z", TOK, "-i", prompt, "-n", n_prompt + max_tokens - 1, *flags])
    assert rc == 0, err
    text = out.decode("utf-8")
    assert text.startswith(prompt) and text.endswith("\n"), text
    return text[len(prompt):-1]


def cli_chat_reply(user, n_prompt, max_tokens, *flags):
    """The CLI chat's first reply to user (-n: the positions the reply may fill)."""
    rc, out, err = run([CKPT, "-z", TOK, "-m", "chat", "-i", user, "-n", n_prompt + max_tokens, *flags], input=b"")
    assert rc == 0, err
    text = out.decode("utf-8")
    assert text.startswith("Assistant: "), text
    # "Assistant: REPLY\n", then "User: " when the context has room for another turn
    text = text[len("Assistant: "):]
    text = text[:-len("User: ")] if text.endswith("\nUser: ") else text
    assert text.endswith("\n"), text
    return text[:-1]


# ---------------------------------------------------------------- the official client

def test_openai_node_client():
    if not shutil.which("node"):
        raise AssertionError("node is missing: apt-get install nodejs npm")
    assert os.path.isdir(os.path.join(JS, "node_modules", "openai")), "tests/js/node_modules is missing: run `npm ci` in tests/js"
    with Server("-t", "0", "--parallel", 4) as sv:
        p = subprocess.run(["node", os.path.join(JS, "serve_client.mjs"), f"http://127.0.0.1:{sv.port}/v1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300, cwd=JS)
        assert p.returncode == 0, p.stderr.decode()[-3000:] + "".join(sv.log)[-3000:]
        r = json.loads(p.stdout)
        rc, took = sv.stop()
    assert rc == 0 and took < 2.0, (rc, took)
    assert r["models"] == ["stories260K.bin"]
    # chat: the CLI's reply to the same conversation; streamed == whole
    chat = r["chat"]
    assert chat["role"] == "assistant" and chat["object"] == "chat.completion"
    n_chat = chat["usage"]["prompt_tokens"]
    assert chat["usage"]["total_tokens"] == n_chat + chat["usage"]["completion_tokens"]
    assert chat["usage"]["completion_tokens"] <= 40 and chat["finish"] in ("stop", "length")
    assert chat["text"] == cli_chat_reply("Tell me a story.", n_chat, 40, "-t", "0"), chat
    assert r["chat_stream"]["text"] == chat["text"] and r["chat_stream"]["finish"] == chat["finish"]
    assert r["chat_stream"]["usage"] == chat["usage"]
    # completions: the CLI's continuation; streamed == whole
    cmpl = r["completion"]
    n_prompt = cmpl["usage"]["prompt_tokens"]
    assert cmpl["finish"] == "length" and cmpl["usage"]["completion_tokens"] == 40
    assert cmpl["text"] == cli_completion("Once upon a time", n_prompt, 40, "-t", "0")
    assert r["completion_stream"]["text"] == cmpl["text"] and r["completion_stream"]["finish"] == "length"
    # a seed: the CLI's text with -s and the same temperature and top-p, twice the same
    seeded = cli_completion("Once upon a time", n_prompt, 40, "-t", "1", "-p", "0.9", "-s", "42")
    assert r["seeded"] == [seeded, seeded], (r["seeded"], seeded)
    assert seeded != cmpl["text"]
    # stop: the text up to the first stop string, finish_reason stop
    cut = min(i for i in (cmpl["text"].find("Lily"), cmpl["text"].find("park")) if i >= 0)
    assert r["stopped"] == {"text": cmpl["text"][:cut], "finish": "stop"}, r["stopped"]
    # four at once: each as alone, and alone as the CLI
    conc = r["concurrent"]
    assert conc["together"] == conc["alone"], conc
    for prompt, text in zip(conc["prompts"], conc["alone"]):
        n = len(run([CKPT, "-z", TOK, "-m", "tokenize", "-i", prompt])[1].split())
        assert text == cli_completion(prompt, n, 60, "-t", "0"), prompt
    assert r["error"]["status"] == 400 and "messages" in r["error"]["message"]


# ---------------------------------------------------------------- raw clients

def test_texts_equal_cli_and_alone():
    """Completions at temperature 0 (and a seed) over http.client: the CLI's
    text; eight requests at once on two slots (the queue holds the rest) give
    each its text alone."""
    prompts = ["Once upon a time", "Lily and Ben", "The sun", "A big dog", "Once upon a time", "Sam", "The moon", "Mom"]
    with Server("--parallel", 2) as sv:
        alone = []
        for i, prompt in enumerate(prompts):
            st, body = sv.request("POST", "/v1/completions", {"prompt": prompt, "temperature": 0, "max_tokens": 20 + 7 * i})
            assert st == 200, body
            choice = body["choices"][0]
            assert body["object"] == "text_completion" and body["model"] == "stories260K.bin"
            assert choice["finish_reason"] in ("stop", "length")
            assert body["usage"]["completion_tokens"] <= 20 + 7 * i
            alone.append((choice["text"], body["usage"]))
        for i in (0, 3):
            text, usage = alone[i]
            assert usage["completion_tokens"] == 20 + 7 * i
            assert text == cli_completion(prompts[i], usage["prompt_tokens"], 20 + 7 * i, "-t", "0")
        st, body = sv.request("POST", "/v1/completions", {"prompt": "Sam", "seed": 7, "temperature": 0.8, "top_p": 0.95,
                                                           "top_k": 40, "max_tokens": 30})
        assert st == 200
        assert body["choices"][0]["text"] == cli_completion("Sam", body["usage"]["prompt_tokens"], 30, "-t", "0.8",
                                                            "-p", "0.95", "-k", "40", "-s", "7")
        together = [None] * len(prompts)

        def one(i):
            together[i] = sv.request("POST", "/v1/completions", {"prompt": prompts[i], "temperature": 0,
                                                                  "max_tokens": 20 + 7 * i})
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for i, (st, body) in enumerate(together):
            assert st == 200, body
            assert (body["choices"][0]["text"], body["usage"]) == alone[i], i
        rc, took = sv.stop()
    assert rc == 0 and took < 2.0


BAD_JSON = [
    (b'{"prompt": "x",}', "trailing comma"),
    (b'{"prompt": "\\x"}', "unknown escape"),
    (b'{"prompt": "\\ud800"}', "lone high surrogate"),
    (b'{"prompt": "\\udc00 x"}', "lone low surrogate"),
    (b'{"prompt": "\\ud800\\u0041"}', "high surrogate then not a low one"),
    (b'{"prompt": "\xff"}', "a byte that is not UTF-8"),
    (b'{"prompt": "\xc0\xaf"}', "overlong UTF-8"),
    (b'{"prompt": "\xed\xa0\x80"}', "a surrogate in UTF-8"),
    (b'{"prompt": "a\x01"}', "a control character"),
    (b'{"prompt": "x", "max_tokens": 01}', "a leading zero"),
    (b'{"prompt": \'x\'}', "single quotes"),
    (b'{"prompt": "x"} {}', "text after the value"),
    (b'[' * 200 + b']' * 200, "nested too deeply"),
    (b'{"prompt": "x"', "cut short"),
    (b'', "empty"),
    (b'{"prompt": "\\u0000"}', "NUL"),
    (b'{"prompt": 1e999}', "out of range"),
]

BAD_FIELDS = [
    ("/v1/completions", [1, 2], "JSON object"),
    ("/v1/completions", {"prompt": 5}, "prompt"),
    ("/v1/completions", {"prompt": "x", "temperature": "hot"}, "temperature"),
    ("/v1/completions", {"prompt": "x", "temperature": -1}, "temperature"),
    ("/v1/completions", {"prompt": "x", "top_p": 1.5}, "top_p"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 2.5}, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 600}, "context"),
    ("/v1/completions", {"prompt": "x", "max_completion_tokens": 1000}, "context"),
    ("/v1/completions", {"prompt": "x", "stream": "yes"}, "stream"),
    ("/v1/completions", {"prompt": "x", "stop": ["a"] * 9}, "stop"),
    ("/v1/completions", {"prompt": "x", "stop": [1]}, "stop"),
    ("/v1/completions", {"prompt": "x", "n": 2}, "'n'"),
    ("/v1/completions", {"prompt": "x", "seed": 1.5}, "seed"),
    ("/v1/completions", {"prompt": "Once upon a time " * 200}, "context"),
    ("/v1/chat/completions", {"messages": []}, "messages"),
    ("/v1/chat/completions", {"messages": "hi"}, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}] * 257}, "256"),
    ("/v1/chat/completions", {"messages": [{"role": "robot", "content": "hi"}]}, "role"),
    ("/v1/chat/completions", {"messages": [{"content": "hi"}]}, "role"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
     "last message"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}, "row"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                           {"role": "system", "content": "c"}, {"role": "user", "content": "d"}]}, "system"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "text"),
]


def test_bad_requests():
    """Each bad request gets its status and an OpenAI-style error; the server keeps serving."""
    with Server("--max-body", "64K") as sv:
        for body, why in BAD_JSON:
            st, err = sv.request("POST", "/v1/completions", body)
            assert st == 400 and err["error"]["type"] == "invalid_request_error", (why, st, err)
            assert "JSON" in err["error"]["message"] or "object" in err["error"]["message"], (why, err)
        for path, body, word in BAD_FIELDS:
            st, err = sv.request("POST", path, body)
            assert st == 400 and word in err["error"]["message"], (body if len(str(body)) < 200 else path, st, err)
        # good UTF-8 and a surrogate pair are taken
        st, body = sv.request("POST", "/v1/completions", b'{"prompt": "\\ud83d\\ude00 Gr\xc3\xbc\xc3\x9f", "max_tokens": 3}')
        assert st == 200 and body["usage"]["completion_tokens"] <= 3, body
        # paths and methods
        assert sv.request("GET", "/v1/nothing")[0] == 404
        assert sv.request("GET", "/")[0] == 404
        assert sv.request("GET", "/v1/completions")[0] == 405
        assert sv.request("POST", "/v1/models", {})[0] == 405
        assert sv.request("GET", "/health") == (200, {"status": "ok"})
        assert sv.request("GET", "/v1/models/stories260K.bin") == (200, {"id": "stories260K.bin", "object": "model",
                                                                          "created": 0, "owned_by": "run"})
        assert sv.request("GET", "/v1/models/other.bin")[0] == 404
        # sizes: the body above --max-body (announced, then sent), headers, the request line
        big = json.dumps({"prompt": "x" * (64 << 10)}).encode()
        st, err = sv.request("POST", "/v1/completions", big)
        assert st == 413, st
        a = sv.raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n")
        assert status_of(a) == 413 and error_body(a)["message"]
        a = sv.raw(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
        assert status_of(a) == 431, a[:100]
        a = sv.raw(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status_of(a) == 414, a[:100]
        a = sv.raw(b"GET /health HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(100)) + b"\r\n")
        assert status_of(a) == 431, a[:100]
        # malformed heads, versions, codings
        for head, want in ((b"GARBAGE\r\n\r\n", 400), (b"GET /health HTTP/2.0\r\n\r\n", 400),
                           (b"GET /health HTTP/1.2\r\n\r\n", 505), (b"GET health HTTP/1.1\r\n\r\n", 400),
                           (b"GET /health HTTP/1.1\nHost: x\n\n", 400), (b"GET /health HTTP/1.1\r\nNo colon\r\n\r\n", 400),
                           (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
                           (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400),
                           (b"POST /v1/completions HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400)):
            a = sv.raw(head)
            assert status_of(a) == want, (head, a[:200])
            error_body(a)
        # keep-alive: two requests on one connection, the second pipelined
        a = sv.raw(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert a.count(b"HTTP/1.1 200 OK") == 2 and b"stories260K.bin" in a, a
        assert sv.request("GET", "/health") == (200, {"status": "ok"})
        rc, took = sv.stop()
    assert rc == 0 and took < 2.0


def test_api_key():
    """--api-key: Bearer KEY or 401 (close misses included); /health stays open."""
    with Server("--api-key", "sekrit-42") as sv:
        for headers in ({}, {"Authorization": "Bearer sekrit-43"}, {"Authorization": "Bearer sekrit-4"},
                        {"Authorization": "Bearer sekrit-422"}, {"Authorization": "sekrit-42"},
                        {"Authorization": "Basic sekrit-42"}, {"Authorization": "Bearer " + "s" * 2000}):
            st, err = sv.request("GET", "/v1/models", headers=headers)
            assert st == 401 and err["error"]["type"] == "authentication_error", (headers, st, err)
            st, err = sv.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}, headers=headers)
            assert st == 401, headers
        st, body = sv.request("GET", "/v1/models", headers={"Authorization": "Bearer sekrit-42"})
        assert st == 200 and body["data"][0]["id"] == "stories260K.bin"
        st, body = sv.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2},
                              headers={"Authorization": "Bearer sekrit-42"})
        assert st == 200
        assert sv.request("GET", "/health")[0] == 200
        assert sv.request("GET", "/nope", headers={"Authorization": "Bearer sekrit-42"})[0] == 404
        rc, _ = sv.stop()
    assert rc == 0


def stream_events(answer):
    """The data: payloads of an SSE answer."""
    body = answer.partition(b"\r\n\r\n")[2].decode("utf-8")
    return [line[6:] for line in body.split("\n") if line.startswith("data: ")]


def test_disconnect_mid_stream():
    """A client that leaves mid-stream frees the one slot: the log says its
    request was cancelled before max_tokens, and the next request is served."""
    with Server("--parallel", 1, "-t", "0") as sv:
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 500, "stream": True}).encode()
        req = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        for attempt in range(3):
            with socket.create_connection(("127.0.0.1", sv.port), timeout=10) as s:
                s.sendall(req)
                got = b""
                while b"data: " not in got:
                    b = s.recv(100)
                    assert b, got
                    got += b
                assert got.startswith(b"HTTP/1.1 200 OK") and b"text/event-stream" in got
            # the next request on the same slot
            st, out = sv.request("POST", "/v1/completions", {"prompt": "The cat", "temperature": 0, "max_tokens": 30})
            assert st == 200 and out["usage"]["completion_tokens"] == 30, out
        # a whole stream, read to the end: chunks then [DONE]
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 50, "stream": True}).encode()
        events = stream_events(sv.raw(b"POST /v1/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body))
        assert events[-1] == "[DONE]" and json.loads(events[-2])["choices"][0]["finish_reason"] == "length"
        rc, _ = sv.stop()
    assert rc == 0
    log = "".join(sv.log)
    cancelled = re.findall(r"prompt \d+ \+ completion (\d+) tokens, cancelled", log)
    assert len(cancelled) == 3 and all(int(n) < 500 for n in cancelled), log[-2000:]


def test_slow_client():
    """--timeout 1: a client that sends its head a byte at a time, or stops in
    its body, gets 408 within the timeout (not a byte's timeout per byte)
    while the other clients are served; an idle keep-alive connection is closed."""
    with Server("--timeout", 1, "--parallel", 1) as sv:
        results = {}

        def slow_head():
            with socket.create_connection(("127.0.0.1", sv.port), timeout=10) as s:
                t0 = time.time()
                head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"
                try:
                    for i in range(len(head)):   # at most 0.3 s a byte: each read alone is in time
                        s.sendall(head[i:i + 1])
                        time.sleep(0.3)
                        if time.time() - t0 > 6:
                            break
                except OSError:
                    pass
                results["head"] = (read_all(s), time.time() - t0)

        def slow_body():
            with socket.create_connection(("127.0.0.1", sv.port), timeout=10) as s:
                t0 = time.time()
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
                results["body"] = (read_all(s), time.time() - t0)

        def idle():
            with socket.create_connection(("127.0.0.1", sv.port), timeout=10) as s:
                t0 = time.time()
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                results["idle"] = (read_all(s), time.time() - t0)

        threads = [threading.Thread(target=f) for f in (slow_head, slow_body, idle)]
        for t in threads:
            t.start()
        time.sleep(0.2)
        t0 = time.time()
        st, out = sv.request("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 5})
        assert st == 200 and time.time() - t0 < 1.0, (st, time.time() - t0)
        for t in threads:
            t.join(15)
        for what in ("head", "body"):
            answer, took = results[what]
            assert status_of(answer) == 408 and "in time" in error_body(answer)["message"], (what, answer[:200])
            assert 0.8 < took < 3.0, (what, took)
        answer, took = results["idle"]
        assert answer.count(b"HTTP/1.1 200 OK") == 1 and 0.8 < took < 3.0, (answer, took)
        rc, _ = sv.stop()
    assert rc == 0


def test_queue_full():
    """One slot and a queue of one: of twelve requests sent at once (twelve
    connections opened first, then each request in one write) some get 503
    with an OpenAI-style error, and every other one its whole text."""
    with Server("--parallel", 1, "--queue", 1, "-t", "0") as sv:
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 500}).encode()
        req = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        socks = [socket.create_connection(("127.0.0.1", sv.port), timeout=60) for _ in range(12)]
        for s in socks:
            s.sendall(req)
        answers = [read_all(s) for s in socks]
        for s in socks:
            s.close()
        statuses = sorted(status_of(a) for a in answers)
        assert set(statuses) == {200, 503}, statuses
        texts = {json.loads(a.partition(b"\r\n\r\n")[2])["choices"][0]["text"] for a in answers if status_of(a) == 200}
        assert len(texts) == 1
        for a in answers:
            if status_of(a) == 503:
                err = error_body(a)
                assert err["type"] == "server_busy" and "busy" in err["message"], err
        rc, _ = sv.stop()
    assert rc == 0


def test_signals_with_connections_open():
    """SIGTERM and SIGINT: exit 0 within 2 s with an idle connection, a
    half-sent request and a stream open; the listening line names 127.0.0.1."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        with Server("--parallel", 1) as sv:
            assert any("listening on http://127.0.0.1:%d" % sv.port in line for line in sv.log)
            idle = socket.create_connection(("127.0.0.1", sv.port), timeout=10)
            half = socket.create_connection(("127.0.0.1", sv.port), timeout=10)
            half.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 50\r\n\r\n{")
            body = json.dumps({"prompt": "Once upon a time", "max_tokens": 500, "stream": True}).encode()
            stream = socket.create_connection(("127.0.0.1", sv.port), timeout=10)
            stream.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            time.sleep(0.2)
            rc, took = sv.stop(sig)
            for s in (idle, half, stream):
                s.close()
        assert rc == 0 and took < 2.0, (sig, rc, took)


def test_info_and_bad_flags():
    """--info prints the server's plan: one arena, the work state and K slots."""
    rc, out, err = run([CKPT, "-z", TOK, "-m", "serve", "--parallel", 3, "--ctx", 256, "--info"])
    assert rc == 0, err
    text = out.decode()
    work = int(re.search(r"work state\s+(\d+) bytes", text).group(1))
    m = re.search(r"slots\s+(\d+) bytes .*\(3 x (\d+): kv cache (\d+)", text)
    total = int(re.search(r"server arena\s+(\d+) bytes", text).group(1))
    assert m and int(m.group(1)) == 3 * int(m.group(2)) and total == work + int(m.group(1)), text
    # the KV cache of one slot: 2 (k, v) x layers 5 x context 256 x kv dim 32 x 4 bytes
    assert int(m.group(3)) == 2 * 5 * 256 * 32 * 4, text
    for flags, want in ((["--port", "70000"], "--port"), (["--parallel", "0"], "--parallel"),
                        (["--host", "not-an-address"], "--host"), (["--max-body", "0"], "--max-body"),
                        (["--api-key", ""], "--api-key"), (["--timeout", "0"], "--timeout")):
        rc, out, err = run([CKPT, "-z", TOK, "-m", "serve", "--port", "0", *flags], timeout=20)
        assert rc != 0 and want in err and len(err.strip().splitlines()) <= 4, (flags, rc, err)


def test_chat_turns_rendered():
    """The messages as -m chat lays them in the cache, counted in usage: with
    tok512 (llama2's template, no default system prompt) a user turn is BOS
    "[INST] {user} [/INST]" (llama2.c's text), an earlier assistant message
    its text's ids and the end-of-turn token (EOS), a system message opens the
    first turn in <<SYS>>; each count is the CLI tokenizer's for that text."""
    def count(text):   # ./run -m tokenize: BOS and the text's ids
        rc, out, err = run([CKPT, "-z", TOK, "-m", "tokenize", "-i", text])
        assert rc == 0, err
        return len(out.split())
    with Server() as sv:
        def prompt_tokens(messages):
            st, body = sv.request("POST", "/v1/chat/completions", {"messages": messages, "max_tokens": 1})
            assert st == 200, body
            return body["usage"]["prompt_tokens"]
        u1, a1, u2, system = "Hi there", "Hello! A story?", "Yes, please.", "Be kind."
        assert prompt_tokens([{"role": "user", "content": u1}]) == count(f"[INST] {u1} [/INST]")
        assert prompt_tokens([{"role": "system", "content": system}, {"role": "user", "content": u1}]) == \
            count(f"[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{u1} [/INST]")
        three = [{"role": "user", "content": u1}, {"role": "assistant", "content": a1}, {"role": "user", "content": u2}]
        assert prompt_tokens(three) == count(f"[INST] {u1} [/INST]") + (count(a1) - 1) + 1 + count(f"[INST] {u2} [/INST]")
        parts = [{"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}]
        assert prompt_tokens(parts) == count(f"[INST] {u1} [/INST]")
        rc, _ = sv.stop()
    assert rc == 0
