"""Tokenizer tests.

- `run -m tokenize -z tokenizer.bin -i TEXT` must print [1] + sentencepiece's ids
  (python3-sentencepiece with tokenizer.model, the same Llama 2 vocabulary) for
  every line of tests/data/tokenizer_corpus.txt, multi-line joins of them,
  edge cases and invalid UTF-8;
- tok512.bin (no sentencepiece model exists for it): the ids must equal a
  straightforward Python BPE (the sentencepiece algorithm, checked here against
  sentencepiece on the big vocabulary), stay below 512, and decode back to the text;
- malformed tokenizer files and a tokenizer of the wrong size for a model fail
  with one clear line on stderr;
- build/test_tokenizer_unit (tests/test_tokenizer_unit.c + tokenizer.c tokenizer/*.c; TOKUNIT
  overrides the path) checks the C API: decoding, arena and scratch sizes,
  hostile files, merge rules, speed.

Run with /usr/bin/python3 (Debian's, which has python3-sentencepiece).
"""
import os
import re
import struct
import subprocess
import time

import common

CORPUS = os.path.join(common.TESTS, "data", "tokenizer_corpus.txt")
UNIT = os.path.join(common.ROOT, os.environ.get("TOKUNIT", os.path.join("build", "test_tokenizer_unit")))
BATCH = 30   # corpus lines per test case
# In the first build only (run_tests.py): the corpus line by line, one ./run
# per line (~290 processes for each vocabulary, the slowest part in asan).
# Every build still encodes each line, with the same C code: inside the whole
# corpus as one text and the joined lines of test_multiline_matches_sentencepiece,
# beside the edge cases, invalid UTF-8 and tok512's joined lines and edges.
FIRST_BUILD_ONLY = ("test_corpus_matches_sentencepiece", "test_tok512_corpus")


def corpus_lines():
    with open(CORPUS, "rb") as f:
        text = f.read().decode("utf-8")
    # not splitlines(): lines hold \r, \x0b, \x0c, \x85 and U+2028, which it splits on
    lines = text.split("\n")
    assert lines[-1] == "", "corpus must end with a newline"
    return lines[:-1]


_sp = []


def sp():
    if not _sp:
        try:
            import sentencepiece
        except ImportError:
            raise AssertionError("python3-sentencepiece missing: run the tests with /usr/bin/python3")
        _sp.append(sentencepiece.SentencePieceProcessor(model_file=common.model("tokenizer.model")))
    return _sp[0]


def tokenize(tok, text):
    """Token ids printed by `run -m tokenize -z tok -i text` (text: str or bytes)."""
    arg = text.encode("utf-8") if isinstance(text, str) else text
    cmd = [os.fsencode(common.RUN), b"-m", b"tokenize", b"-z", os.fsencode(tok), b"-i", arg]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    err = p.stderr.decode("utf-8", "replace").strip()
    assert p.returncode == 0, f"run -m tokenize -z {tok} -i {text!r}: exit {p.returncode}: {err}"
    out = p.stdout.decode("ascii").strip()
    assert "\n" not in out, f"expected one line of ids for {text!r}, got {out!r}"
    try:
        return [int(x) for x in out.split()]
    except ValueError:
        raise AssertionError(f"not a list of ids for {text!r}: {out!r}")


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def clip(x, n=300):
    r = repr(x)
    return r if len(r) <= n else r[:n] + f"... ({len(x)} long)"


def compare_with_sentencepiece(cases):
    """cases: (label, text) pairs; asserts run's ids == [1] + sp.encode(text) for each."""
    tok = common.model("tokenizer.bin")
    for label, text in cases:
        want = [1] + sp().encode(text)
        got = tokenize(tok, text)
        if got != want:
            i = first_diff(got, want)
            lo = max(0, i - 5)
            raise AssertionError(
                f"{label}: {clip(text)}\n  run:           {clip(got)}\n  sentencepiece: {clip(want)}\n"
                f"  first difference at index {i}: run {got[lo:i + 5]} vs sentencepiece {want[lo:i + 5]} "
                f"= {[sp().id_to_piece(x) for x in want[lo:i + 5]]}")


# ---------------------------------------------------------------- sentencepiece

def test_corpus_size():
    lines = corpus_lines()
    assert len(lines) >= 220, f"only {len(lines)} corpus lines"
    assert all(lines), "empty corpus line"


def test_corpus_matches_sentencepiece():
    lines = corpus_lines()
    for start in range(0, len(lines), BATCH):
        chunk = [(f"corpus line {start + k + 1}", s) for k, s in enumerate(lines[start:start + BATCH])]
        yield f"lines {start + 1}-{start + len(chunk)}", lambda chunk=chunk: compare_with_sentencepiece(chunk)


def test_multiline_matches_sentencepiece():
    lines = corpus_lines()
    seps = ["\n", "\n\n", " \n ", "\r\n", "\n\t", "\n   \n", "\n\n\n"]
    for n_sep, sep in enumerate(seps):
        cases = []
        for start in range(n_sep, len(lines), 23):
            cases.append((f"lines {start + 1}.. joined by {sep!r}", sep.join(lines[start:start + 4])))
        yield f"joined by {sep!r}", lambda cases=cases: compare_with_sentencepiece(cases)
    yield "whole corpus as one text", lambda: compare_with_sentencepiece(
        [("the corpus joined by newlines", "\n".join(lines))])


EDGE_CASES = [
    "", " ", "  ", "   ", "\n", "\n\n", "\t", " \n ", "a", "-", "--help", "-i", "x ", " x",
    "\nstarts with a newline", "ends with a newline\n", "<s>", "</s>", "<unk>", "<0x41>",
    "\n<s>\n", "<s><s><s>", "\u2581", "\u2581\u2581 two", "\ufffd", "\x01\x02\x03", "\x7f",
    " " * 100, "\t" * 20, "a" + " " * 33 + "b", "\u00e9" * 40, "\U0001F600" * 10,
]


def test_edge_cases_match_sentencepiece():
    compare_with_sentencepiece([(f"edge case {i}", s) for i, s in enumerate(EDGE_CASES)])


INVALID_UTF8 = [
    b"a\xffb", b"\x80", b"caf\xe9", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xe2\x82", b"\xe2\x82x", b"\xf0\x9f\x98",
    b"\xf8\x88\x80\x80\x80", b"ok \xff\xfe ok", b"\xef\xbf\xbe", b"\xc3\xa9\xa9",
]


def test_invalid_utf8_matches_sentencepiece():
    # sentencepiece turns each byte that does not start a well-formed UTF-8
    # sequence into U+FFFD (one per byte), then encodes that
    compare_with_sentencepiece([(f"invalid UTF-8 {i}", b) for i, b in enumerate(INVALID_UTF8)])


def test_long_prompt():
    lines = corpus_lines()
    text, k = "", 0
    while len(text.encode()) < 100_000:
        text += lines[k % len(lines)] + ("\n" if k % 3 else " ")
        k += 1
    text = text.encode()[:100_000].decode("utf-8", "ignore")   # < 128 KiB: one argv string
    t0 = time.time()
    compare_with_sentencepiece([(f"{len(text.encode())} bytes of corpus", text)])
    elapsed = time.time() - t0
    assert elapsed < 20, f"100 KB prompt took {elapsed:.1f} s (run + sentencepiece)"


# ---------------------------------------------------------------- tok512.bin

def read_tokenizer_bin(path):
    """(max_token_length, [(score, piece bytes)]) of a llama2.c tokenizer.bin."""
    with open(path, "rb") as f:
        data = f.read()
    (max_len,) = struct.unpack_from("<i", data, 0)
    off, vocab = 4, []
    while off < len(data):
        score, n = struct.unpack_from("<fi", data, off)
        vocab.append((score, data[off + 8:off + 8 + n]))
        off += 8 + n
    assert off == len(data)
    return max_len, vocab


class RefBPE:
    """sentencepiece's BPE encoding, written plainly (quadratic, for short texts)."""

    def __init__(self, path):
        self.max_len, self.vocab = read_tokenizer_bin(path)
        self.byte = {}
        self.piece = {}
        for i, (score, p) in enumerate(self.vocab):
            m = re.fullmatch(rb"<0x([0-9A-Fa-f]{2})>", p)
            if m and int(m.group(1), 16) not in self.byte:
                self.byte[int(m.group(1), 16)] = i
            elif i > 2 and p not in self.piece:
                self.piece[p] = i

    def encode(self, text):
        if not text:
            return []
        text = text.replace("\u2581", " ")   # sentencepiece's own space symbol is a space
        syms = [b" "] + [c.encode("utf-8") for c in text]
        while True:
            best = None
            for k in range(len(syms) - 1):
                i = self.piece.get(syms[k] + syms[k + 1])
                if i is not None and (best is None or self.vocab[i][0] > best[0]):
                    best = (self.vocab[i][0], k)
            if best is None:
                break
            k = best[1]
            syms[k:k + 2] = [syms[k] + syms[k + 1]]
        ids = []
        for s in syms:
            if s in self.piece:
                ids.append(self.piece[s])
            else:
                ids.extend(self.byte.get(b, 0) for b in s)
        return ids

    def decode(self, ids):
        """Bytes of ids (ids[0] is BOS): a piece's leading space after BOS is dropped."""
        out, prev = b"", None
        for i in ids:
            p = self.vocab[i][1]
            m = re.fullmatch(rb"<0x([0-9A-Fa-f]{2})>", p)
            if m and self.byte.get(int(m.group(1), 16)) == i:
                p = bytes([int(m.group(1), 16)])
            elif prev == 1 and p.startswith(b" "):
                p = p[1:]
            if i > 2:
                out += p
            prev = i
        return out


def test_reference_bpe_matches_sentencepiece():
    # the Python reference is trusted for tok512 only because it agrees with
    # sentencepiece on the Llama 2 vocabulary
    ref = RefBPE(common.model("tokenizer.bin"))
    for n, line in enumerate(corpus_lines() + EDGE_CASES + ["a\nb\n\nc \n d"]):
        want = sp().encode(line)
        got = ref.encode(line)
        assert got == want, f"reference BPE differs on {line!r}:\n  ref {got}\n  sp  {want}"


def check_tok512(cases):
    tok = common.model("tok512.bin")
    ref = RefBPE(tok)
    assert len(ref.vocab) == 512, len(ref.vocab)
    for label, text in cases:
        got = tokenize(tok, text)
        want = [1] + ref.encode(text)
        assert got == want, f"{label}: {clip(text)}\n  run:       {clip(got)}\n  reference: {clip(want)}"
        assert all(0 <= i < 512 for i in got), f"{label}: id out of range in {got}"
        back = ref.decode(got)
        want_back = text.replace("\u2581", " ").encode("utf-8")
        assert back == want_back, f"{label}: {clip(text)} decodes to {clip(back)}"


def test_tok512_corpus():
    lines = corpus_lines()
    for start in range(0, len(lines), 3 * BATCH):
        chunk = [(f"corpus line {start + k + 1}", s) for k, s in enumerate(lines[start:start + 3 * BATCH])]
        yield f"lines {start + 1}-{start + len(chunk)}", lambda chunk=chunk: check_tok512(chunk)


def test_tok512_multiline_and_edges():
    lines = corpus_lines()
    cases = [(f"edge case {i}", s) for i, s in enumerate(EDGE_CASES)]
    cases += [(f"lines {k + 1}.. joined", "\n".join(lines[k:k + 5])) for k in range(0, len(lines), 37)]
    check_tok512(cases)


def test_tok512_byte_fallback():
    tok = common.model("tok512.bin")
    ref = RefBPE(tok)
    # tok512 knows "é" but not "ü", CJK or emoji: those become <0xNN> tokens
    ids = tokenize(tok, "\u00fc")
    assert ids[2:] == [ref.byte[0xC3], ref.byte[0xBC]], ids
    assert tokenize(tok, "\u00e9")[2:] == [ref.piece["\u00e9".encode()]]
    for text in ["\U0001F600 \u4e2d\u6587 \u00fc\u00df", "\u0416\u0438\u0437\u043d\u044c", "\x01\x02\x7f"]:
        ids = tokenize(tok, text)
        assert ref.decode(ids) == text.encode(), f"{text!r} -> {ids} -> {ref.decode(ids)!r}"
    ids = tokenize(tok, "\U0001F600")
    assert ids[2:] == [ref.byte[b] for b in "\U0001F600".encode()], ids


def test_byte_fallback_big():
    # characters outside the Llama vocabulary: their UTF-8 bytes as <0xNN> tokens
    tok = common.model("tokenizer.bin")
    ref = RefBPE(tok)
    for text in ["\U0001F600", "\U0001F1E9\U0001F1EA", "\u2460", "\uff21", "\x7f", "\x01\x1f"]:
        ids = tokenize(tok, text)
        want = [1, ref.piece[b" "]] + [ref.byte[b] for b in text.encode()]
        assert ids == want, f"{text!r}: {ids}, want {want}"
        assert ids == [1] + sp().encode(text), f"{text!r}: {ids} vs sentencepiece {sp().encode(text)}"
        assert ref.decode(ids) == text.encode(), f"{text!r} -> {ids} -> {ref.decode(ids)!r}"


# ---------------------------------------------------------------- bad files

def bad_file_cases():
    """(name, bytes, keyword the error should mention)"""
    with open(common.model("tok512.bin"), "rb") as f:
        good = f.read()
    _, vocab = read_tokenizer_bin(common.model("tok512.bin"))
    boundaries, off = set(), 4
    for _, p in vocab:
        off += 8 + len(p)
        boundaries.add(off)
    e10 = 4 + sum(8 + len(p) for _, p in vocab[:10])
    cases = [("empty", b"", "empty"), ("3 bytes", good[:3], "short"),
             ("header only", good[:4], "entries")]
    for cut in [5, 11, 12, 13, 100, 1001, len(good) // 2, len(good) - 1]:
        while cut in boundaries:
            cut += 1
        cases.append((f"truncated at {cut}", good[:cut], "truncated"))
    neg = bytearray(good)
    neg[e10 + 4:e10 + 8] = struct.pack("<i", -1)
    cases.append(("negative length", bytes(neg), "length"))
    huge = bytearray(good)
    huge[e10 + 4:e10 + 8] = struct.pack("<i", 0x7FFFFFFF)
    cases.append(("huge length", bytes(huge), "length"))
    long_ = bytearray(good)
    long_[e10 + 4:e10 + 8] = struct.pack("<i", 8)   # max_token_length is 7
    cases.append(("length > max_token_length", bytes(long_), "max_token_length"))
    past = bytearray(good)
    past[0:4] = struct.pack("<i", 1000)
    last = len(good) - 8 - len(vocab[-1][1])
    past[last + 4:last + 8] = struct.pack("<i", 500)
    cases.append(("length past the end", bytes(past), "truncated"))
    cases.append(("bad max_token_length", struct.pack("<i", -3) + good[4:], "max_token_length"))
    cases.append(("trailing garbage (3 bytes)", good + b"xyz", "truncated"))
    cases.append(("trailing garbage (8 bytes)", good + b"GARBAGE!", "length"))
    return cases


def check_error(rc, out, err, path, keyword, what):
    lines = [l for l in err.strip().split("\n") if l.strip()]
    assert rc != 0, f"{what}: exit 0 (stdout {out[:80]!r})"
    assert rc > 0, f"{what}: killed by signal {-rc}: {err.strip()}"
    assert len(lines) == 1, f"{what}: want one line on stderr, got {err!r}"
    assert os.path.basename(path) in lines[0], f"{what}: error does not name the file: {lines[0]!r}"
    assert keyword.lower() in lines[0].lower(), f"{what}: error should mention {keyword!r}: {lines[0]!r}"


def test_malformed_tokenizer_files():
    for name, data, keyword in bad_file_cases():
        def case(name=name, data=data, keyword=keyword):
            path = common.scratch("bad_tokenizer_" + re.sub(r"\W+", "_", name).strip("_") + ".bin")
            with open(path, "wb") as f:
                f.write(data)
            rc, out, err = common.run(["-m", "tokenize", "-z", path, "-i", "Hello"])
            check_error(rc, out, err, path, keyword, name)
        yield name, case


def test_missing_tokenizer_file():
    path = common.scratch("no_such_tokenizer.bin")
    if os.path.exists(path):
        os.remove(path)
    rc, out, err = common.run(["-m", "tokenize", "-z", path, "-i", "Hello"])
    check_error(rc, out, err, path, "", "missing file")


def test_wrong_vocab_size_for_model():
    model = common.model("stories260K.bin")   # vocab_size 512
    big = common.model("tokenizer.bin")
    rc, out, err = common.run([model, "-z", big, "-t", "0", "-n", "4", "-i", "Once"])
    check_error(rc, out, err, big, "32000", "tokenizer.bin for stories260K.bin")
    assert "512" in err, f"the error should say what the model expects: {err.strip()!r}"
    # control: the right tokenizer works with the same command line
    rc, out, err = common.run([model, "-z", common.model("tok512.bin"), "-t", "0", "-n", "4", "-i", "Once"])
    assert rc == 0, f"stories260K.bin with tok512.bin: exit {rc}: {err.strip()}"


# ---------------------------------------------------------------- C unit tests

def test_unit_c():
    assert os.path.exists(UNIT), (
        f"{UNIT} missing: build it from tests/test_tokenizer_unit.c tokenizer.c tokenizer/*.c "
        f"(make build/test_tokenizer_unit), or point TOKUNIT at it")
    p = subprocess.run([UNIT, common.MODELS, CORPUS], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=600)
    out = p.stdout.decode("utf-8", "replace")
    failed = [l for l in out.split("\n") if l.startswith("FAIL")]
    assert p.returncode == 0 and not failed, (
        f"{UNIT}: exit {p.returncode}\n{out}{p.stderr.decode('utf-8', 'replace')}")
    assert re.search(r"^\d+ passed, 0 failed$", out, re.M), out
