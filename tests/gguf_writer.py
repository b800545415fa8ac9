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
  random_blocks(ggml_type, rows, cols, rng) -> bytes      (every block type)
  quantize(ggml_type, array (rows, cols) float) -> bytes  (the block types after Q6_K)
  dequantize(ggml_type, bytes, rows, cols) -> float32 (rows, cols)
  stories_gguf(legacy ckpt, tokenizer.bin, out, dtype)   llama2.c -> GGUF

  /usr/bin/python3 tests/gguf_writer.py CKPT TOKENIZER OUT.gguf [f32|f16|q8_0|bf16|q5_0]

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
  Q4_1 20 B/32: f16 d, f16 m, u8 qs[16]; q as Q4_0's (0..15);      w = q d + m
  Q5_0 22 B/32: f16 d, u32 qh, u8 qs[16]; q[j] = nibble j as Q4_0's | bit j of qh << 4;
       w = (q-16) d
  Q5_1 24 B/32: f16 d, f16 m, u32 qh, u8 qs[16]; q as Q5_0's;     w = q d + m
  IQ4_NL 18 B/32: f16 d, u8 qs[16]; q as Q4_0's;  w = d KV[q], KV = IQ4_VALUES below
  Q2_K 84 B/256: u8 scales[16] (low 4 bits scale, high 4 min, one per 16),
       u8 qs[64], f16 d, f16 dmin; element 128h + 32c + l: q = (qs[32h + l] >> 2c) & 3;
       w = (d (sc & 15)) q - dmin (sc >> 4), sc = scales[e//16]
  Q3_K 110 B/256: u8 hmask[32], u8 qs[64], u8 scales[12], f16 d; element
       128h + 32c + l: low bits (qs[32h + l] >> 2c) & 3, minus 4 unless bit
       4h + c of hmask[l] is set; scale i (6 bits, i < 16): low 4 bits from
       scales[i] & 15 (i < 8) or scales[i-8] >> 4, top 2 from
       (scales[8 + i%4] >> 2(i//4)) & 3, minus 32;  w = (d scale[e//16]) q
  Q5_K 176 B/256: f16 d, f16 dmin, u8 scales[12] (as Q4_K's), u8 qh[32],
       u8 qs[128]; sub-block j: Q4_K's nibble | bit j of qh[l] << 4;
       w = (d sc) q - (dmin m)
  IQ4_XS 136 B/256: f16 d, u16 scales_h, u8 scales_l[4], u8 qs[128]; sub-block
       j of 32: ls = (scales_l[j//2] >> 4(j&1)) & 15 | ((scales_h >> 2j) & 3) << 4,
       codes as IQ4_NL's at qs[16j..16j+15];  w = (d (ls - 32)) KV[q]
"""
import struct
import sys

import numpy as np

V_U8, V_I8, V_U16, V_I16, V_U32, V_I32, V_F32, V_BOOL, V_STRING, V_ARRAY, V_U64, V_I64, V_F64 = range(13)
_FMT = {V_U8: "<B", V_I8: "<b", V_U16: "<H", V_I16: "<h", V_U32: "<I", V_I32: "<i", V_F32: "<f",
        V_BOOL: "<B", V_U64: "<Q", V_I64: "<q", V_F64: "<d"}
F32, F16, Q4_0, Q8_0, Q4_K, Q6_K, BF16 = 0, 1, 2, 8, 12, 14, 30
Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS = 3, 6, 7, 10, 11, 13, 20, 23
BLOCK = {Q8_0: (32, 34), Q4_0: (32, 18), Q4_K: (256, 144), Q6_K: (256, 210),
         Q4_1: (32, 20), Q5_0: (32, 22), Q5_1: (32, 24), IQ4_NL: (32, 18),
         Q2_K: (256, 84), Q3_K: (256, 110), Q5_K: (256, 176), IQ4_XS: (256, 136)}
NAME = {Q8_0: "Q8_0", Q4_0: "Q4_0", Q4_K: "Q4_K", Q6_K: "Q6_K", Q4_1: "Q4_1", Q5_0: "Q5_0", Q5_1: "Q5_1",
        IQ4_NL: "IQ4_NL", Q2_K: "Q2_K", Q3_K: "Q3_K", Q5_K: "Q5_K", IQ4_XS: "IQ4_XS", F32: "F32", F16: "F16", BF16: "BF16"}
IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int32)
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
    elif ggml_type in (Q4_1, Q5_1):   # w = d q + m: m about -d (levels - 1) / 2
        d = rng.uniform(0.2, 1.0, nb) * scale / (4 if ggml_type == Q4_1 else 8)
        put_f16(0, d)
        put_f16(2, -d * (7.5 if ggml_type == Q4_1 else 15.5))
    elif ggml_type == Q5_0:
        put_f16(0, rng.uniform(0.2, 1.0, nb) * scale / 8)
    elif ggml_type == IQ4_NL:
        put_f16(0, rng.uniform(0.2, 1.0, nb) * scale / 64)
    elif ggml_type == Q2_K:   # each sub-block's min about 1.5 its scale (dmin = d): weights about centred
        d = rng.uniform(0.2, 1.0, nb) * scale / 16
        put_f16(80, d)
        put_f16(82, d)
        sc = raw[:, 0:16] & 15
        raw[:, 0:16] = sc | np.minimum(15, (3 * sc.astype(np.int32) + 1) // 2).astype(np.uint8) << 4
    elif ggml_type == Q3_K:
        put_f16(108, rng.uniform(0.2, 1.0, nb) * scale / 64)
    elif ggml_type == Q5_K:
        put_f16(0, rng.uniform(0.2, 1.0, nb) * scale / 512)
        put_f16(2, rng.uniform(0.2, 1.0, nb) * scale / 32)
    elif ggml_type == IQ4_XS:
        put_f16(0, rng.uniform(0.2, 1.0, nb) * scale / 2048)
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
        sc, m = _k_scale_min(blk[:, 4:16])
        qs = blk[:, 16:144].astype(np.int32)
        out = np.zeros((blk.shape[0], 256), np.float32)
        for j in range(8):
            p = j // 2
            q = (qs[:, 32 * p:32 * p + 32] >> (4 * (j & 1))) & 15
            d1 = (d * sc[:, j].astype(np.float32)).astype(np.float32)
            m1 = (dmin * m[:, j].astype(np.float32)).astype(np.float32)
            out[:, 32 * j:32 * j + 32] = (d1[:, None] * q.astype(np.float32)).astype(np.float32) - m1[:, None]
        return out.reshape(rows, cols)
    if ggml_type in (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q5_K, IQ4_XS):
        return _dequantize_new(ggml_type, blk).reshape(rows, cols)
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


def _nibbles(qs):
    """(nb, 16) bytes -> (nb, 32) codes: element j < 16 the low nibble of
    byte j, element j + 16 its high nibble"""
    qs = qs.astype(np.int32)
    return np.concatenate([qs & 15, qs >> 4], axis=1)


def _bits32(qh4):
    """(nb, 4) bytes (a little-endian u32) -> (nb, 32) bits, bit j at column j"""
    h = qh4.astype(np.uint32)
    h = h[:, 0] | h[:, 1] << 8 | h[:, 2] << 16 | h[:, 3] << 24
    return ((h[:, None] >> np.arange(32, dtype=np.uint32)[None, :]) & 1).astype(np.int32)


def _k_scale_min(s):
    """Q4_K's and Q5_K's 12 scale bytes (nb, 12) -> sc, m (nb, 8)"""
    s = s.astype(np.int32)
    sc = np.zeros((s.shape[0], 8), np.int32)
    m = np.zeros((s.shape[0], 8), np.int32)
    for j in range(8):
        if j < 4:
            sc[:, j], m[:, j] = s[:, j] & 63, s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 15) | ((s[:, j - 4] >> 6) << 4)
            m[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc, m


def _q3_scales(s):
    """Q3_K's 12 scale bytes (nb, 12) -> the sixteen scales (nb, 16), -32..31"""
    s = s.astype(np.int32)
    out = np.zeros((s.shape[0], 16), np.int32)
    for i in range(16):
        lo = (s[:, i] & 15) if i < 8 else (s[:, i - 8] >> 4)
        hi = (s[:, 8 + i % 4] >> (2 * (i // 4))) & 3
        out[:, i] = (lo | hi << 4) - 32
    return out


def _codes_2bit(qs, e):
    """Q2_K/Q3_K: the 2-bit field of element e (0..255) from qs (nb, 64)"""
    h, c, l = e // 128, (e // 32) % 4, e % 32
    return (qs[:, 32 * h + l].astype(np.int32) >> (2 * c)) & 3


def _dequantize_new(t, blk):
    """the block types after Q6_K as float32 (nb, block), from the layouts
    in the docstring, in ggml's order (d times the sub-scale, times q, then
    the min)"""
    f = np.float32
    nb = blk.shape[0]
    if t in (Q4_1, Q5_0, Q5_1, IQ4_NL):
        d = _f16(blk[:, 0:2])
        if t == Q4_1:
            return _nibbles(blk[:, 4:20]).astype(f) * d[:, None] + _f16(blk[:, 2:4])[:, None]
        if t == IQ4_NL:
            return d[:, None] * IQ4_VALUES[_nibbles(blk[:, 2:18])].astype(f)
        if t == Q5_0:
            q = _nibbles(blk[:, 6:22]) | _bits32(blk[:, 2:6]) << 4
            return (q - 16).astype(f) * d[:, None]
        q = _nibbles(blk[:, 8:24]) | _bits32(blk[:, 4:8]) << 4
        return q.astype(f) * d[:, None] + _f16(blk[:, 2:4])[:, None]
    out = np.zeros((nb, 256), f)
    if t == Q2_K:
        d, dmin = _f16(blk[:, 80:82]), _f16(blk[:, 82:84])
        sc = blk[:, 0:16].astype(np.int32)
        for e in range(256):
            s = sc[:, e // 16]
            dl = (d * (s & 15).astype(f)).astype(f)
            ml = (dmin * (s >> 4).astype(f)).astype(f)
            out[:, e] = (dl * _codes_2bit(blk[:, 16:80], e).astype(f)).astype(f) - ml
        return out
    if t == Q3_K:
        d = _f16(blk[:, 108:110])
        sc = _q3_scales(blk[:, 96:108])
        for e in range(256):
            h, c, l = e // 128, (e // 32) % 4, e % 32
            high = (blk[:, l].astype(np.int32) >> (4 * h + c)) & 1
            q = _codes_2bit(blk[:, 32:96], e) - np.where(high == 1, 0, 4)
            out[:, e] = (d * sc[:, e // 16].astype(f)).astype(f) * q.astype(f)
        return out
    if t == Q5_K:
        d, dmin = _f16(blk[:, 0:2]), _f16(blk[:, 2:4])
        sc, m = _k_scale_min(blk[:, 4:16])
        qh, qs = blk[:, 16:48].astype(np.int32), blk[:, 48:176].astype(np.int32)
        for j in range(8):
            q = ((qs[:, 32 * (j // 2):32 * (j // 2) + 32] >> (4 * (j & 1))) & 15) | ((qh >> j) & 1) << 4
            d1 = (d * sc[:, j].astype(f)).astype(f)
            m1 = (dmin * m[:, j].astype(f)).astype(f)
            out[:, 32 * j:32 * j + 32] = (d1[:, None] * q.astype(f)).astype(f) - m1[:, None]
        return out
    if t == IQ4_XS:
        d = _f16(blk[:, 0:2])
        sh = blk[:, 2].astype(np.int32) | blk[:, 3].astype(np.int32) << 8
        for j in range(8):
            ls = ((blk[:, 4 + j // 2].astype(np.int32) >> (4 * (j & 1))) & 15) | ((sh >> (2 * j)) & 3) << 4
            dl = (d * (ls - 32).astype(f)).astype(f)
            out[:, 32 * j:32 * j + 32] = dl[:, None] * IQ4_VALUES[_nibbles(blk[:, 8 + 16 * j:24 + 16 * j])].astype(f)
        return out
    raise ValueError(t)


# ---------------------------------------------------------------- quantizers (the types after Q6_K)

def _h(v):
    """f16 values -> (n, 2) bytes, and the values as the f16 rounds them"""
    b = f16_bits(v).astype("<u2")
    return b.view(np.uint8).reshape(-1, 2), b.view(np.float16).astype(np.float32)


def _pack_nibbles(q):
    """(nb, 32) codes 0..15 -> (nb, 16) bytes (Q4_0's order)"""
    q = q.astype(np.uint8)
    return q[:, :16] | (q[:, 16:] << 4)


def _pack_bits32(bits):
    """(nb, 32) bits -> (nb, 4) bytes of a little-endian u32"""
    h = (bits.astype(np.uint64) << np.arange(32, dtype=np.uint64)[None, :]).sum(axis=1).astype("<u4")
    return h.view(np.uint8).reshape(-1, 4)


def _pack_k_scales(sc, m):
    """Q4_K/Q5_K: eight 6-bit scales and mins (nb, 8) -> (nb, 12) bytes"""
    s = np.zeros((sc.shape[0], 12), np.int32)
    for j in range(8):
        if j < 4:
            s[:, j] |= sc[:, j]
            s[:, j + 4] |= m[:, j]
        else:
            s[:, j + 4] |= (sc[:, j] & 15) | (m[:, j] & 15) << 4
            s[:, j - 4] |= (sc[:, j] >> 4) << 6
            s[:, j] |= (m[:, j] >> 4) << 6
    return s.astype(np.uint8)


def _pack_q3_scales(sc):
    """Q3_K: sixteen scales -32..31 (nb, 16) -> (nb, 12) bytes"""
    u = sc.astype(np.int32) + 32
    s = np.zeros((u.shape[0], 12), np.int32)
    for i in range(16):
        if i < 8:
            s[:, i] |= u[:, i] & 15
        else:
            s[:, i - 8] |= (u[:, i] & 15) << 4
        s[:, 8 + i % 4] |= (u[:, i] >> 4) << (2 * (i // 4))
    return s.astype(np.uint8)


def _pack_2bit(q):
    """(nb, 256) 2-bit fields -> qs (nb, 64): element 128h + 32c + l at bits 2c of byte 32h + l"""
    qs = np.zeros((q.shape[0], 64), np.int32)
    for e in range(256):
        h, c, l = e // 128, (e // 32) % 4, e % 32
        qs[:, 32 * h + l] |= q[:, e] << (2 * c)
    return qs.astype(np.uint8)


def _nearest_iq4(v):
    """index of the IQ4_VALUES entry nearest each of v"""
    return np.abs(v[..., None] - IQ4_VALUES.astype(np.float32)).argmin(axis=-1)


def _safe_inv(d):
    return np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0).astype(np.float32)


def _scales_mins(sub, qmax, smax):
    """A K-quant block with mins (Q2_K, Q5_K), round to nearest: sub (blocks,
    sub-blocks, elements); per sub-block x ~ d*sc*q - dmin*mi with q in 0..qmax
    and sc, mi in 0..smax. Returns the f16 bytes of d and dmin, sc, mi, q."""
    mn = np.maximum(-sub.min(axis=2), 0)
    scale = (sub.max(axis=2) + mn) / qmax
    dh, d = _h(scale.max(axis=1) / smax)
    mh, dmin = _h(mn.max(axis=1) / smax)
    sc = np.clip(np.round(scale * _safe_inv(d)[:, None]), 0, smax).astype(np.int32)
    mi = np.clip(np.round(mn * _safe_inv(dmin)[:, None]), 0, smax).astype(np.int32)
    dl = (d[:, None] * sc).astype(np.float32)
    ml = (dmin[:, None] * mi).astype(np.float32)
    q = np.clip(np.round((sub + ml[:, :, None]) * _safe_inv(dl)[:, :, None]), 0, qmax).astype(np.int32)
    return dh, mh, sc, mi, q


def quantize(t, a):
    """(rows, cols) float -> the tensor's bytes in block type t (the types
    after Q6_K), by plain round-to-nearest from the layouts: not ggml's
    search for the best scales, but any valid blocks serve the tests"""
    a = np.asarray(a, dtype=np.float32)
    n, bb = BLOCK[t]
    rows, cols = a.shape
    assert cols % n == 0, f"{NAME[t]} needs whole blocks of {n}"
    x = a.reshape(-1, n)
    nb = x.shape[0]
    out = np.zeros((nb, bb), np.uint8)
    if t in (Q4_1, Q5_1):
        top = 15 if t == Q4_1 else 31
        lo, hi = x.min(axis=1), x.max(axis=1)
        dh, d = _h((hi - lo) / top)
        mh, m = _h(lo)
        q = np.clip(np.round((x - m[:, None]) * _safe_inv(d)[:, None]), 0, top).astype(np.int32)
        out[:, 0:2], out[:, 2:4] = dh, mh
        if t == Q4_1:
            out[:, 4:20] = _pack_nibbles(q)
        else:
            out[:, 4:8] = _pack_bits32(q >> 4)
            out[:, 8:24] = _pack_nibbles(q & 15)
    elif t == Q5_0:
        big = x[np.arange(nb), np.abs(x).argmax(axis=1)]
        dh, d = _h(big / -16)
        q = np.clip(np.round(x * _safe_inv(d)[:, None]) + 16, 0, 31).astype(np.int32)
        out[:, 0:2], out[:, 2:6], out[:, 6:22] = dh, _pack_bits32(q >> 4), _pack_nibbles(q & 15)
    elif t == IQ4_NL:
        big = x[np.arange(nb), np.abs(x).argmax(axis=1)]
        dh, d = _h(big / -127)
        out[:, 0:2], out[:, 2:18] = dh, _pack_nibbles(_nearest_iq4(x * _safe_inv(d)[:, None]))
    elif t == Q2_K:
        dh, mh, sc, mi, q = _scales_mins(x.reshape(nb, 16, 16), 3, 15)
        out[:, 0:16] = (sc | mi << 4).astype(np.uint8)
        out[:, 16:80] = _pack_2bit(q.reshape(nb, 256))
        out[:, 80:82], out[:, 82:84] = dh, mh
    elif t == Q3_K:
        sub = x.reshape(nb, 16, 16)
        scale = sub[np.arange(nb)[:, None], np.arange(16)[None, :], np.abs(sub).argmax(axis=2)] / -4
        big = scale[np.arange(nb), np.abs(scale).argmax(axis=1)]
        dh, d = _h(big / -32)
        sc = np.clip(np.round(scale * _safe_inv(d)[:, None]), -32, 31).astype(np.int32)
        dl = (d[:, None] * sc).astype(np.float32)
        q = np.clip(np.round(sub * _safe_inv(dl)[:, :, None]), -4, 3).astype(np.int32).reshape(nb, 256) + 4
        hmask = np.zeros((nb, 32), np.int32)
        for e in range(256):
            hmask[:, e % 32] |= (q[:, e] >> 2) << (e // 32)
        out[:, 0:32] = hmask.astype(np.uint8)
        out[:, 32:96] = _pack_2bit(q & 3)
        out[:, 96:108] = _pack_q3_scales(sc)
        out[:, 108:110] = dh
    elif t == Q5_K:
        dh, mh, sc, mi, q = _scales_mins(x.reshape(nb, 8, 32), 31, 63)
        qh = np.zeros((nb, 32), np.int32)
        qs = np.zeros((nb, 128), np.int32)
        for j in range(8):
            qh |= (q[:, j] >> 4) << j
            qs[:, 32 * (j // 2):32 * (j // 2) + 32] |= (q[:, j] & 15) << (4 * (j & 1))
        out[:, 0:2], out[:, 2:4], out[:, 4:16] = dh, mh, _pack_k_scales(sc, mi)
        out[:, 16:48], out[:, 48:176] = qh.astype(np.uint8), qs.astype(np.uint8)
    elif t == IQ4_XS:
        sub = x.reshape(nb, 8, 32)
        scale = sub[np.arange(nb)[:, None], np.arange(8)[None, :], np.abs(sub).argmax(axis=2)] / -127
        big = scale[np.arange(nb), np.abs(scale).argmax(axis=1)]
        dh, d = _h(big / -32)
        ls = np.clip(np.round(scale * _safe_inv(d)[:, None]), -32, 31).astype(np.int32)
        dl = (d[:, None] * ls).astype(np.float32)
        idx = _nearest_iq4(sub * _safe_inv(dl)[:, :, None])
        u = ls + 32
        sh = ((u >> 4) << (2 * np.arange(8))[None, :]).sum(axis=1).astype("<u2")
        out[:, 0:2], out[:, 2:4] = dh, sh.view(np.uint8).reshape(-1, 2)
        for j in range(8):
            out[:, 4 + j // 2] |= ((u[:, j] & 15) << (4 * (j & 1))).astype(np.uint8)
            out[:, 8 + 16 * j:24 + 16 * j] = _pack_nibbles(idx[:, j])
    else:
        raise ValueError(f"quantize: type {t}")
    return out.tobytes()


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
    fallback: a Q8_0 (or Q5_0) row that is not whole blocks of 32 is stored F16."""
    if dtype == "q8_0":
        return Q8_0 if cols % 32 == 0 else F16
    if dtype == "q5_0":
        return Q5_0 if cols % 32 == 0 else F16
    return {"f32": F32, "f16": F16, "bf16": BF16}[dtype]


def llama_tensors(cfg, t, dtype):
    """(name, type, ne, bytes) in llama.cpp's names, matrices in dtype, vectors f32.
    The q/k rows stay in llama2.c's (Meta's) interleaved order: what llama.cpp's
    converter produces by undoing Hugging Face's permutation."""
    out = []
    def mat(name, a):
        gt = pick_type(dtype, a.shape[1])
        out.append((name, gt, [a.shape[1], a.shape[0]], quantize(gt, a) if gt == Q5_0 else encode(gt, a)))
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
    kvs = llama_kvs(cfg) + [("general.file_type", V_U32, {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32, "q5_0": 8}[dtype])]
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
