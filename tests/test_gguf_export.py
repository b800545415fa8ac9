"""Tests of `export.py --format gguf`: llama.cpp's file format, written by export.py.

The file is read back here by a small reader written from the GGUF
specification (ggml's docs/gguf.md), not from export.py's writer: the header,
the typed metadata, the tensor infos (dimensions innermost first, offsets
into the data section at multiples of general.alignment) and the block
layouts (Q8_0: f16 d + 32 int8, value q*d; Q4_0: f16 d + 16 bytes, low
nibbles values 0..15, high nibbles 16..31, value (nibble-8)*d). The block
quantizers are checked against bytes worked out by hand from the reference
rounding rules (Q8_0: d = amax/127, q = round half away from zero of x/d;
Q4_0: d = (value of largest magnitude)/-8, nibble = min(15, trunc(x/d + 8.5))).

How the files run in llama.cpp is checked outside CI (the closing note); here
./run reads them, when its GGUF reader is built, in tests/test_gguf.py.
"""
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

import common

BUILD_INDEPENDENT = True
EXPORT = os.path.join(common.ROOT, "export.py")
sys.path.insert(0, common.ROOT)
import exporter.quantizers  # noqa: E402  (the quantizers are unit-tested directly)


# ---------------------------------------------------------------- a reader from the spec

VALUE_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
TYPE_BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 8: (32, 34)}   # ggml type: (values, bytes) per block


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v[0]

    def string(self):
        n = self.take("<Q")
        s = self.d[self.p:self.p + n].decode("utf-8")
        self.p += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        return self.take(VALUE_FORMATS[t])


def read_gguf(path):
    """(metadata {key: value}, tensors {name: (dims, type, raw bytes)}, data start)."""
    data = open(path, "rb").read()
    r = Reader(data)
    assert data[:4] == b"GGUF", data[:4]
    r.p = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    assert version == 3, version
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        assert key not in meta, f"duplicate key {key}"
        meta[key] = r.value(r.take("<I"))
    align = meta.get("general.alignment", 32)
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("<I")
        dims = [r.take("<Q") for _ in range(nd)]
        infos.append((name, dims, r.take("<I"), r.take("<Q")))
    start = -(-r.p // align) * align
    assert data[r.p:start] == b"\0" * (start - r.p), "padding before the data is not zero"
    tensors, ends = {}, []
    for name, dims, t, off in infos:
        assert off % align == 0, f"{name} at offset {off}, not a multiple of {align}"
        per, size = TYPE_BLOCK[t]
        n = int(np.prod(dims))
        assert n % per == 0 and dims[0] % per == 0, f"{name}: rows of {dims[0]} are not whole blocks"
        nbytes = n // per * size
        assert start + off + nbytes <= len(data), f"{name} runs past the end of the file"
        tensors[name] = (dims, t, data[start + off:start + off + nbytes])
        ends.append((off, off + nbytes))
    ends.sort()
    for (a0, a1), (b0, _) in zip(ends, ends[1:]):
        assert a1 <= b0, "tensors overlap"
    return meta, tensors, start


def dequant(dims, t, raw):
    """The tensor's float32 values as (rows, cols) = (dims[1], dims[0]) for a matrix."""
    cols = dims[0]
    rows = int(np.prod(dims[1:])) if len(dims) > 1 else 1
    if t == 0:
        return np.frombuffer(raw, "<f4").reshape(rows, cols)
    if t == 1:
        return np.frombuffer(raw, "<f2").astype(np.float32).reshape(rows, cols)
    out = np.empty(rows * cols, dtype=np.float32)
    size = 34 if t == 8 else 18
    for b in range(rows * cols // 32):
        blk = raw[b * size:(b + 1) * size]
        d = np.float32(np.frombuffer(blk[:2], "<f2")[0])
        if t == 8:
            q = np.frombuffer(blk[2:], np.int8).astype(np.float32)
        else:
            nib = np.frombuffer(blk[2:], np.uint8)
            q = np.concatenate([nib & 15, nib >> 4]).astype(np.float32) - 8
        out[b * 32:(b + 1) * 32] = q * d
    return out.reshape(rows, cols)


def export_gguf(args, out):
    p = subprocess.run([sys.executable, EXPORT, "--format", "gguf"] + args + [out],
                       capture_output=True, text=True)
    return p.returncode, p.stderr


def scratch_dir(name):
    d = common.scratch(os.path.join("gguf_export", name))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


# ---------------------------------------------------------------- blocks by hand

def test_q8_0_block_by_hand():
    # amax 127 -> d = 1.0 (f16 0x3c00); 2.5 -> 3 and -2.5 -> -3 (half away from zero);
    # 0.49 -> 0, -126.5 -> -127, 1.5 -> 2
    x = np.zeros(32, np.float32)
    x[:7] = [127, -127, 2.5, -2.5, 0.49, -126.5, 1.5]
    got = exporter.quantizers.quantize_gguf_q8_0(x.reshape(1, 32))
    want = bytes([0x00, 0x3c]) + bytes(np.array([127, -127, 3, -3, 0, -127, 2] + [0] * 25, np.int8).view(np.uint8))
    assert got == want, (got.hex(), want.hex())
    # an all-zero block: d = 0, every q 0
    assert exporter.quantizers.quantize_gguf_q8_0(np.zeros((1, 32), np.float32)) == b"\0" * 34


def test_q4_0_block_by_hand():
    # the value of largest magnitude is -8 -> d = -8 / -8 = 1.0; nibble = min(15, trunc(x + 8.5))
    x = np.zeros(32, np.float32)
    x[0], x[1], x[2], x[3], x[4] = -8.0, 7.0, 7.9, -0.6, 0.5      # nibbles 0, 15, 15 (16 clamped), 7, 9
    x[16], x[17] = 3.0, -3.0                                     # nibbles 11, 5 (high halves of bytes 0, 1)
    got = exporter.quantizers.quantize_gguf_q4_0(x.reshape(1, 32))
    nib = [0, 15, 15, 7, 9] + [8] * 11 + [11, 5] + [8] * 14
    want = bytes([0x00, 0x3c]) + bytes(nib[j] | nib[j + 16] << 4 for j in range(16))
    assert got == want, (got.hex(), want.hex())
    # the positive maximum: 8 -> d = -1.0 (f16 0xbc00), so 8 -> trunc(-8 + 8.5) = 0
    y = np.zeros(32, np.float32)
    y[5] = 8.0
    got = exporter.quantizers.quantize_gguf_q4_0(y.reshape(1, 32))
    assert got[:2] == bytes([0x00, 0xbc]) and got[2 + 5] & 15 == 0, got.hex()
    # ties of magnitude: the first one sets the sign of d
    z = np.zeros(32, np.float32)
    z[2], z[9] = -4.0, 4.0                                       # d = -4 / -8 = 0.5
    got = exporter.quantizers.quantize_gguf_q4_0(z.reshape(1, 32))
    assert np.frombuffer(got[:2], "<f2")[0] == np.float16(0.5), got.hex()


def test_block_round_trip_bounds():
    """On random rows every value comes back within half a step d (Q4_0: one step, the
    top of its range clamps at nibble 15), plus what storing d as f16 moves the
    largest level: |q| <= 127 (Q4_0: 8) times d's rounding, at most d * 2^-11."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((16, 96)).astype(np.float32)
    for q, t, tol in ((exporter.quantizers.quantize_gguf_q8_0, 8, 0.5 + 127 / 2048), (exporter.quantizers.quantize_gguf_q4_0, 2, 1.0 + 8 / 2048)):
        raw = q(w)
        back = dequant([96, 16], t, raw)
        size = 34 if t == 8 else 18
        d = np.array([abs(np.frombuffer(raw[b * size:b * size + 2], "<f2")[0]) for b in range(16 * 3)],
                     np.float32).reshape(16, 3)
        step = np.repeat(d, 32, axis=1)
        assert (np.abs(back - w) <= tol * step * 1.001 + 1e-7).all(), float(np.abs(back - w).max())


# ---------------------------------------------------------------- whole files

def test_stories260K_gguf_layout_and_values():
    d = scratch_dir("s260")
    legacy = common.model("stories260K.bin")
    tok = common.model("tok512.bin")
    _, ref = read_legacy(legacy)
    pieces = read_tokenizer_bin(tok)
    for dtype, gtype, tol in (("f32", 0, 0.0), ("f16", 1, 2e-3), ("q8_0", 8, 0.02), ("q4_0", 2, 0.3)):
        out = os.path.join(d, dtype + ".gguf")
        rc, err = export_gguf(["--dtype", dtype, "--tokenizer", tok, legacy], out)
        assert rc == 0, err
        meta, tensors, _ = read_gguf(out)
        assert meta["general.architecture"] == "llama"
        assert (meta["llama.embedding_length"], meta["llama.feed_forward_length"], meta["llama.block_count"],
                meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"],
                meta["llama.context_length"], meta["llama.rope.dimension_count"]) == (64, 172, 5, 8, 4, 512, 8)
        assert abs(meta["llama.attention.layer_norm_rms_epsilon"] - 1e-5) < 1e-12
        assert meta["llama.rope.freq_base"] == 10000.0
        assert meta["tokenizer.ggml.model"] == "llama"
        toks = meta["tokenizer.ggml.tokens"]
        assert len(toks) == 512 and toks[:3] == ["<unk>", "<s>", "</s>"]
        # sentencepiece spelling: llama2.c's spaces are U+2581 again
        assert toks[3:] == [p.replace(" ", "\u2581") for p in pieces[3:]]
        types = meta["tokenizer.ggml.token_type"]
        assert types[:3] == [2, 3, 3] and all(t == 6 for t in types[3:259]) and set(types[259:]) == {1}
        assert (meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"]) == (1, 2)
        assert "output.weight" not in tensors    # a shared classifier: llama.cpp reuses token_embd
        assert len(tensors) == 2 + 5 * 9
        for name, (gname, shape) in gguf_names(5).items():
            dims, t, raw = tensors[gname]
            assert dims == list(reversed(shape)), (gname, dims, shape)
            is_matrix = len(shape) == 2
            expect_t = 0 if not is_matrix else (1 if gtype in (8, 2) and shape[1] % 32 else gtype)
            assert t == expect_t, (gname, t, expect_t)
            got = dequant(dims, t, raw).reshape(shape)
            err = np.abs(got - ref[name])
            if t == 0:
                assert (err == 0).all(), (dtype, gname)
            elif t == 1:   # round to nearest f16: within half a unit in the last place
                assert (err <= np.abs(ref[name]) * 2.0 ** -11 + 2.0 ** -25).all(), (dtype, gname, float(err.max()))
            else:
                assert float(err.max()) <= tol, (dtype, gname, float(err.max()))


def test_fallback_is_said():
    d = scratch_dir("fallback")
    rc, err = export_gguf(["--dtype", "q8_0", "--tokenizer", common.model("tok512.bin"),
                           common.model("stories260K.bin")], os.path.join(d, "q8.gguf"))
    assert rc == 0, err
    assert "ffn_down" in err and "f16" in err and "172" in err, err


def test_errors_are_one_line():
    d = scratch_dir("errors")
    legacy, tok = common.model("stories260K.bin"), common.model("tok512.bin")
    cases = [
        (["--format", "gguf", "--tokenizer", tok, "--dtype", "q4_K", legacy, os.path.join(d, "x.gguf")],
         "is for LLMW", False),
        (["--tokenizer", tok, legacy, os.path.join(d, "x.llmw")], "--tokenizer is for", False),
        (["--format", "gguf", legacy, os.path.join(d, "x.gguf")], "give --tokenizer", False),
        (["--format", "gguf", "--tokenizer", common.model("tokenizer.bin"), legacy, os.path.join(d, "x.gguf")],
         "32000 tokens", False),
        (["--format", "gguf", "--norm", "layer", "--tokenizer", tok, legacy, os.path.join(d, "x.gguf")],
         "pre-RMSNorm", False),
        (["--format", "gguf", "--group-size", "64", "--tokenizer", tok, legacy, os.path.join(d, "x.gguf")],
         "blocks hold 32", False),
    ]
    qk = os.path.join(d, "qk.llmw")
    p = subprocess.run([sys.executable, EXPORT, "random", "--qk-norm", "--qkv-bias", "--vocab", "512", qk],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    cases.append((["--format", "gguf", "--tokenizer", tok, qk, os.path.join(d, "x.gguf")], "fit no llama.cpp", False))
    for args, needle, _ in cases:
        p = subprocess.run([sys.executable, EXPORT] + args, capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        assert p.returncode != 0 and needle in lines[-1] and lines[-1].startswith("export.py: error:"), \
            (args, p.returncode, p.stderr)
        assert not any(f.startswith("x") for f in os.listdir(d)), os.listdir(d)


def test_gemma3_sentencepiece_types_as_llama_cpp_writes_them():
    """A gemma3 GGUF's sentencepiece vocabulary typed as llama.cpp's converter types it:
    the tokenizer.model's unknown/control/unused/byte pieces keep their type (checked
    against the sentencepiece library's is_unknown/is_control/is_unused/is_byte), the
    rest normal; added_tokens.json's ids user-defined; tokenizer_config.json's
    added_tokens_decoder control when special or looking special (<unused...>),
    else user-defined with U+2581 as a space; those scored -1000."""
    import json
    import sentencepiece as spm
    from exporter.gguf_writer import gemma3_vocab, gguf_vocab
    d = scratch_dir("gemma3_vocab")
    shutil.copy(common.model("tokenizer.model"), os.path.join(d, "tokenizer.model"))
    json.dump({"<extra>": 100}, open(os.path.join(d, "added_tokens.json"), "w"))
    json.dump({"added_tokens_decoder": {"200": {"content": "<unused0>", "special": False},
                                        "201": {"content": "\u2581hello", "special": False},
                                        "202": {"content": "<start_of_turn>", "special": True}}},
              open(os.path.join(d, "tokenizer_config.json"), "w"))
    _, pieces, scores, types, _, _ = gemma3_vocab(gguf_vocab(d))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(d, "tokenizer.model"))
    for i in range(sp.vocab_size()):
        if i in (100, 200, 201, 202):
            continue
        want = 2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 5 if sp.is_unused(i) else 6 if sp.is_byte(i) else 1
        assert types[i] == want and pieces[i] == sp.id_to_piece(i) and scores[i] == sp.get_score(i), (i, types[i], want)
    assert types[:3] == [2, 3, 3] and types[3] == 6, types[:4]
    assert (pieces[100], types[100], scores[100]) == ("<extra>", 4, -1000.0)
    assert (pieces[200], types[200]) == ("<unused0>", 3)
    assert (pieces[201], types[201]) == (" hello", 4)
    assert (pieces[202], types[202], scores[202]) == ("<start_of_turn>", 3, -1000.0)


# ---------------------------------------------------------------- helpers: the inputs, read here

def read_legacy(path):
    """stories260K's llama2.c legacy file -> (config, {canonical name: array})."""
    data = open(path, "rb").read()
    dim, hidden, L, nh, nkv, vocab, seq = struct.unpack_from("<7i", data, 0)
    hs, kvd = dim // nh, nkv * (dim // nh)
    f = np.frombuffer(data, "<f4", offset=28)
    pos = [0]

    def take(*shape):
        n = int(np.prod(shape))
        a = f[pos[0]:pos[0] + n].reshape(shape)
        pos[0] += n
        return a
    out = {"tok_embeddings": take(abs(vocab), dim)}
    parts = [("attn_norm", (dim,)), ("wq", (dim, dim)), ("wk", (kvd, dim)), ("wv", (kvd, dim)),
             ("wo", (dim, dim)), ("ffn_norm", (dim,)), ("w1", (hidden, dim)), ("w2", (dim, hidden)),
             ("w3", (hidden, dim))]
    for part, shape in parts:
        stacked = take(L, *shape)
        for l in range(L):
            out[f"layers.{l}.{part}"] = stacked[l]
    out["final_norm"] = take(dim)
    return (dim, hidden, L, nh, nkv, vocab, seq), out


def read_tokenizer_bin(path):
    data = open(path, "rb").read()
    pos, out = 4, []
    while pos < len(data):
        _, n = struct.unpack_from("<fi", data, pos)
        out.append(data[pos + 8:pos + 8 + n].decode("utf-8"))
        pos += 8 + n
    return out


def gguf_names(L):
    """canonical name -> (llama.cpp's tensor name, (rows, cols) or (n,)) for stories260K."""
    dim, hidden, kvd = 64, 172, 32
    out = {"tok_embeddings": ("token_embd.weight", (512, dim)), "final_norm": ("output_norm.weight", (dim,))}
    per = {"attn_norm": ("attn_norm", (dim,)), "wq": ("attn_q", (dim, dim)), "wk": ("attn_k", (kvd, dim)),
           "wv": ("attn_v", (kvd, dim)), "wo": ("attn_output", (dim, dim)), "ffn_norm": ("ffn_norm", (dim,)),
           "w1": ("ffn_gate", (hidden, dim)), "w2": ("ffn_down", (dim, hidden)), "w3": ("ffn_up", (hidden, dim))}
    for l in range(L):
        for k, (g, shape) in per.items():
            out[f"layers.{l}.{k}"] = (f"blk.{l}.{g}.weight", shape)
    return out
