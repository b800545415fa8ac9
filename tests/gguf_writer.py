#!/usr/bin/python3
"""The tests' own GGUF writer and dequantizer, written from the GGUF spec
(ggml's docs/gguf.md) and ggml's block layouts, not from the engine.
Needs numpy (Debian's: run with /usr/bin/python3).

  write(path, kvs, tensors, alignment=32, version=3)
      kvs: [(key, vtype, value)], vtype a V_* constant (V_ARRAY: value is
           (element vtype, list)); tensors: [(name, ggml type, ne, bytes)],
           ne with the fastest dimension first (a (rows, cols) matrix is
           [cols, rows]).
  encode(ggml_type, array (rows, cols) float) -> bytes   (F32, F16, BF16, Q8_0)
  random_blocks(ggml_type, rows, cols, rng) -> bytes      (Q4_0, Q4_K, Q6_K, Q8_0)
  dequantize(ggml_type, bytes, rows, cols) -> float32 (rows, cols)
  stories_gguf(legacy ckpt, tokenizer.bin, out, dtype)   llama2.c -> GGUF

  /usr/bin/python3 tests/gguf_writer.py CKPT TOKENIZER OUT.gguf [f32|f16|q8_0|bf16]

Block layouts (little-endian), with w the value of element j:
  Q8_0 34 B/32: f16 d, int8 q[32]                       w = q d
  Q4_0 18 B/32: f16 d, u8 qs[16]; q[j]=qs[j]&15, q[j+16]=qs[j]>>4;  w = (q-8) d
  Q4_K 144 B/256: f16 d, f16 dmin, u8 scales[12], u8 qs[128]; sub-block j<8
       of 32 has 6-bit scale sc and min m (j<4: sc=s[j]&63, m=s[j+4]&63;
       else sc=(s[j+4]&15)|(s[j-4]>>6)<<4, m=(s[j+4]>>4)|(s[j]>>6)<<4);
       sub-blocks 2p, 2p+1 are the low, high nibbles of qs[32p..32p+31];
       w = (d sc) q - (dmin m)
  Q6_K 210 B/256: u8 ql[128], u8 qh[64], int8 scales[16], f16 d; element
       128h + 32c + l: low 4 bits from ql[64h + 32(c&1) + l] (low nibble for
       c<2, high for c>=2), high 2 bits = (qh[32h + l] >> 2c) & 3; q-32;
       w = (d scale[e//16]) (q - 32)
"""
import struct
import sys

import numpy as np

V_U8, V_I8, V_U16, V_I16, V_U32, V_I32, V_F32, V_BOOL, V_STRING, V_ARRAY, V_U64, V_I64, V_F64 = range(13)
_FMT = {V_U8: "<B", V_I8: "<b", V_U16: "<H", V_I16: "<h", V_U32: "<I", V_I32: "<i", V_F32: "<f",
        V_BOOL: "<B", V_U64: "<Q", V_I64: "<q", V_F64: "<d"}
F32, F16, Q4_0, Q8_0, Q4_K, Q6_K, BF16 = 0, 1, 2, 8, 12, 14, 30
BLOCK = {Q8_0: (32, 34), Q4_0: (32, 18), Q4_K: (256, 144), Q6_K: (256, 210)}
ELEM = {F32: 4, F16: 2, BF16: 2}
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_BYTE = 1, 2, 3, 6


def gstr(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == V_STRING:
        return gstr(v)
    if vtype == V_ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(_FMT[vtype], v)


def tensor_bytes(ggml_type, rows, cols):
    if ggml_type in BLOCK:
        n, b = BLOCK[ggml_type]
        assert cols % n == 0
        return rows * cols // n * b
    return rows * cols * ELEM[ggml_type]


def write(path, kvs, tensors, alignment=32, version=3, magic=b"GGUF"):
    """A GGUF file; returns its bytes too."""
    out = bytearray(magic + struct.pack("<IQQ", version, len(tensors), len(kvs)))
    for key, vtype, v in kvs:
        out += gstr(key) + struct.pack("<I", vtype) + value(vtype, v)
    offset, offsets = 0, []
    for name, gt, ne, data in tensors:
        offsets.append(offset)
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", gt, offset)
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for (name, gt, ne, data), off in zip(tensors, offsets):
        out += data + b"\0" * (-len(data) % alignment)
    if path:
        with open(path, "wb") as f:
            f.write(out)
    return bytes(out)


# ---------------------------------------------------------------- encoding

def f16_bits(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).view(np.uint16)


def bf16_bits(x):
    """round to nearest even on the top 16 bits (NaN kept quiet)"""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r


def round_away(v):
    return np.where(v >= 0, np.floor(v + 0.5), np.ceil(v - 0.5))


def encode(ggml_type, a):
    """(rows, cols) float -> the tensor's bytes; Q8_0 as ggml's reference
    quantizer: d = max|x| / 127 per 32, q = round(x / d) (halves away)."""
    a = np.asarray(a, dtype=np.float32)
    if ggml_type == F32:
        return a.astype("<f4").tobytes()
    if ggml_type == F16:
        return f16_bits(a).astype("<u2").tobytes()
    if ggml_type == BF16:
        return bf16_bits(a).astype("<u2").tobytes()
    if ggml_type == Q8_0:
        rows, cols = a.shape
        assert cols % 32 == 0, "Q8_0 needs whole blocks of 32"
        blocks = a.reshape(rows * cols // 32, 32)
        amax = np.abs(blocks).max(axis=1)
        d = (amax / 127.0).astype(np.float32)
        inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0).astype(np.float32)
        q = round_away(blocks * inv[:, None]).astype(np.int8)
        out = np.zeros((blocks.shape[0], 34), dtype=np.uint8)
        out[:, 0:2] = f16_bits(d).astype("<u2").view(np.uint8).reshape(-1, 2)
        out[:, 2:] = q.view(np.uint8)
        return out.tobytes()
    raise ValueError(f"encode: type {ggml_type}")


def random_blocks(ggml_type, rows, cols, rng, scale=0.02):
    """Random but plausible blocks (scales near `scale`): any bytes are a valid
    block, so the tests need no quantizer for them."""
    n, b = BLOCK[ggml_type]
    nb = rows * cols // n
    raw = rng.integers(0, 256, size=(nb, b), dtype=np.uint8)
    def put_f16(col, vals):
        raw[:, col:col + 2] = f16_bits(vals).astype("<u2").view(np.uint8).reshape(-1, 2)
    if ggml_type == Q8_0:
        put_f16(0, rng.uniform(0.2, 1.0, nb) * scale / 64)
    elif ggml_type == Q4_0:
        put_f16(0, rng.uniform(0.2, 1.0, nb) * scale / 4)
    elif ggml_type == Q4_K:
        put_f16(0, rng.uniform(0.2, 1.0, nb) * scale / 256)
        put_f16(2, rng.uniform(0.2, 1.0, nb) * scale / 64)
    elif ggml_type == Q6_K:
        put_f16(208, rng.uniform(0.2, 1.0, nb) * scale / 2048)
    return raw.tobytes()


# ---------------------------------------------------------------- decoding

def _f16(raw_u8_pairs):
    return np.ascontiguousarray(raw_u8_pairs).view("<u2").reshape(-1).astype(np.uint16).view(np.float16).astype(np.float32)


def dequantize(ggml_type, data, rows, cols):
    """The tensor as float32 (rows, cols), from the layouts in the docstring,
    in float32 with ggml's operation order (d * sc first, then * q)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    if ggml_type == F32:
        return buf.view("<f4").astype(np.float32).reshape(rows, cols)
    if ggml_type == F16:
        return buf.view("<u2").astype(np.uint16).view(np.float16).astype(np.float32).reshape(rows, cols)
    if ggml_type == BF16:
        return (buf.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(rows, cols)
    n, b = BLOCK[ggml_type]
    blk = buf[:rows * cols // n * b].reshape(-1, b)
    if ggml_type == Q8_0:
        d = _f16(blk[:, 0:2])
        q = blk[:, 2:].view(np.int8).astype(np.float32)
        return (q * d[:, None]).reshape(rows, cols)
    if ggml_type == Q4_0:
        d = _f16(blk[:, 0:2])
        qs = blk[:, 2:18]
        q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int32) - 8
        return (q.astype(np.float32) * d[:, None]).reshape(rows, cols)
    if ggml_type == Q4_K:
        d, dmin = _f16(blk[:, 0:2]), _f16(blk[:, 2:4])
        s = blk[:, 4:16].astype(np.int32)
        sc = np.zeros((blk.shape[0], 8), np.int32)
        m = np.zeros((blk.shape[0], 8), np.int32)
        for j in range(8):
            if j < 4:
                sc[:, j], m[:, j] = s[:, j] & 63, s[:, j + 4] & 63
            else:
                sc[:, j] = (s[:, j + 4] & 15) | ((s[:, j - 4] >> 6) << 4)
                m[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
        qs = blk[:, 16:144].astype(np.int32)
        out = np.zeros((blk.shape[0], 256), np.float32)
        for j in range(8):
            p = j // 2
            q = (qs[:, 32 * p:32 * p + 32] >> (4 * (j & 1))) & 15
            d1 = (d * sc[:, j].astype(np.float32)).astype(np.float32)
            m1 = (dmin * m[:, j].astype(np.float32)).astype(np.float32)
            out[:, 32 * j:32 * j + 32] = (d1[:, None] * q.astype(np.float32)).astype(np.float32) - m1[:, None]
        return out.reshape(rows, cols)
    if ggml_type == Q6_K:
        ql, qh = blk[:, 0:128].astype(np.int32), blk[:, 128:192].astype(np.int32)
        scales = blk[:, 192:208].view(np.int8).astype(np.float32)
        d = _f16(blk[:, 208:210])
        out = np.zeros((blk.shape[0], 256), np.float32)
        for e in range(256):
            h, c, l = e // 128, (e // 32) % 4, e % 32
            lo = ql[:, 64 * h + 32 * (c & 1) + l]
            lo = (lo & 15) if c < 2 else (lo >> 4)
            hi = (qh[:, 32 * h + l] >> (2 * c)) & 3
            q = (lo | (hi << 4)) - 32
            out[:, e] = ((d * scales[:, e // 16]).astype(np.float32) * q.astype(np.float32)).astype(np.float32)
        return out.reshape(rows, cols)
    raise ValueError(f"dequantize: type {ggml_type}")


# ---------------------------------------------------------------- llama2.c -> GGUF

def read_legacy(path):
    """stories260K-style llama2.c checkpoint: config and float32 tensors"""
    data = open(path, "rb").read()
    dim, hidden, L, nh, nkv, vocab, seq = struct.unpack("<7i", data[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    hs = dim // nh
    f = np.frombuffer(data, dtype="<f4", offset=28)
    at = [0]
    def take(*shape):
        k = int(np.prod(shape))
        x = f[at[0]:at[0] + k].reshape(shape).astype(np.float32)
        at[0] += k
        return x
    t = {"tok_embeddings": take(vocab, dim), "attn_norm": take(L, dim), "wq": take(L, nh * hs, dim),
         "wk": take(L, nkv * hs, dim), "wv": take(L, nkv * hs, dim), "wo": take(L, dim, nh * hs),
         "ffn_norm": take(L, dim), "w1": take(L, hidden, dim), "w2": take(L, dim, hidden), "w3": take(L, hidden, dim),
         "final_norm": take(dim)}
    take(seq * hs)   # freq_cis, unused
    t["classifier"] = t["tok_embeddings"] if shared else take(vocab, dim)
    cfg = dict(dim=dim, hidden_dim=hidden, n_layers=L, n_heads=nh, n_kv_heads=nkv, vocab_size=vocab,
               seq_len=seq, shared=shared)
    return cfg, t


def read_tokenizer_bin(path, vocab):
    """llama2.c tokenizer.bin: pieces (bytes) and scores"""
    data = open(path, "rb").read()
    at, pieces, scores = 4, [], []
    for _ in range(vocab):
        score, n = struct.unpack_from("<fi", data, at)
        pieces.append(data[at + 8:at + 8 + n])
        scores.append(score)
        at += 8 + n
    return pieces, scores


def llama_vocab_kvs(pieces, scores, bos=1, eos=2, unk=0):
    """GGUF tokenizer metadata for a sentencepiece vocabulary given as
    llama2.c stores it (spaces as ' '): pieces get back their U+2581."""
    toks, types = [], []
    for i, p in enumerate(pieces):
        if i == unk:
            types.append(TOKEN_UNKNOWN)
        elif i in (bos, eos):
            types.append(TOKEN_CONTROL)
        elif len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
            types.append(TOKEN_BYTE)
        else:
            types.append(TOKEN_NORMAL)
        toks.append(p if types[-1] == TOKEN_BYTE else p.replace(b" ", "\u2581".encode()))
    return [("tokenizer.ggml.model", V_STRING, "llama"),
            ("tokenizer.ggml.tokens", V_ARRAY, (V_STRING, toks)),
            ("tokenizer.ggml.scores", V_ARRAY, (V_F32, [float(s) for s in scores])),
            ("tokenizer.ggml.token_type", V_ARRAY, (V_I32, types)),
            ("tokenizer.ggml.bos_token_id", V_U32, bos),
            ("tokenizer.ggml.eos_token_id", V_U32, eos),
            ("tokenizer.ggml.unknown_token_id", V_U32, unk)]


def llama_kvs(cfg, arch="llama", eps=1e-5, theta=10000.0, name="test"):
    hs = cfg["dim"] // cfg["n_heads"]
    return [("general.architecture", V_STRING, arch), ("general.name", V_STRING, name),
            (f"{arch}.context_length", V_U32, cfg["seq_len"]), (f"{arch}.embedding_length", V_U32, cfg["dim"]),
            (f"{arch}.block_count", V_U32, cfg["n_layers"]), (f"{arch}.feed_forward_length", V_U32, cfg["hidden_dim"]),
            (f"{arch}.rope.dimension_count", V_U32, hs), (f"{arch}.attention.head_count", V_U32, cfg["n_heads"]),
            (f"{arch}.attention.head_count_kv", V_U32, cfg["n_kv_heads"]),
            (f"{arch}.attention.layer_norm_rms_epsilon", V_F32, eps), (f"{arch}.rope.freq_base", V_F32, theta)]


def pick_type(dtype, cols):
    """The ggml type of a matrix for an output dtype, with the converter's
    fallback: a Q8_0 row that is not whole blocks of 32 is stored F16."""
    if dtype == "q8_0":
        return Q8_0 if cols % 32 == 0 else F16
    return {"f32": F32, "f16": F16, "bf16": BF16}[dtype]


def llama_tensors(cfg, t, dtype):
    """(name, type, ne, bytes) in llama.cpp's names, matrices in dtype, vectors f32.
    The q/k rows stay in llama2.c's (Meta's) interleaved order: what llama.cpp's
    converter produces by undoing Hugging Face's permutation."""
    out = []
    def mat(name, a):
        gt = pick_type(dtype, a.shape[1])
        out.append((name, gt, [a.shape[1], a.shape[0]], encode(gt, a)))
    def vec(name, a):
        out.append((name, F32, [a.shape[0]], encode(F32, a[None, :])))
    mat("token_embd.weight", t["tok_embeddings"])
    for l in range(cfg["n_layers"]):
        p = f"blk.{l}."
        vec(p + "attn_norm.weight", t["attn_norm"][l])
        mat(p + "attn_q.weight", t["wq"][l])
        mat(p + "attn_k.weight", t["wk"][l])
        mat(p + "attn_v.weight", t["wv"][l])
        mat(p + "attn_output.weight", t["wo"][l])
        vec(p + "ffn_norm.weight", t["ffn_norm"][l])
        mat(p + "ffn_gate.weight", t["w1"][l])
        mat(p + "ffn_down.weight", t["w2"][l])
        mat(p + "ffn_up.weight", t["w3"][l])
    vec("output_norm.weight", t["final_norm"])
    if not cfg["shared"]:
        mat("output.weight", t["classifier"])
    return out


def stories_gguf(ckpt, tokenizer, out, dtype="f32"):
    cfg, t = read_legacy(ckpt)
    pieces, scores = read_tokenizer_bin(tokenizer, cfg["vocab_size"])
    kvs = llama_kvs(cfg) + [("general.file_type", V_U32, {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}[dtype])]
    kvs += llama_vocab_kvs(pieces, scores)
    return write(out, kvs, llama_tensors(cfg, t, dtype))


# ---------------------------------------------------------------- reading back

def read(data):
    """(version, {key: (vtype, value)}, [(name, type, ne, offset)], data_start):
    a plain reader for checking written files."""
    at = [0]
    def take(fmt):
        v = struct.unpack_from(fmt, data, at[0])
        at[0] += struct.calcsize(fmt)
        return v[0]
    def rstr():
        n = take("<Q")
        s = data[at[0]:at[0] + n]
        at[0] += n
        return s
    def rval(vt):
        if vt == V_STRING:
            return rstr()
        if vt == V_ARRAY:
            et, n = take("<I"), take("<Q")
            return [rval(et) for _ in range(n)]
        return take(_FMT[vt])
    assert data[:4] == b"GGUF"
    at[0] = 4
    version, nt, nkv = take("<I"), take("<Q"), take("<Q")
    kvs = {}
    for _ in range(nkv):
        k = rstr().decode()
        vt = take("<I")
        kvs[k] = (vt, rval(vt))
    infos = []
    for _ in range(nt):
        name = rstr().decode()
        nd = take("<I")
        ne = [take("<Q") for _ in range(nd)]
        infos.append((name, take("<I"), ne, take("<Q")))
    align = kvs.get("general.alignment", (V_U32, 32))[1]
    return version, kvs, infos, (at[0] + align - 1) // align * align


if __name__ == "__main__":
    stories_gguf(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "f32")
