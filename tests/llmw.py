"""An independent reader of the engine's LLMW checkpoint format (version 1),
for the tests: the reference (tests/reference.py) and the round trips of
tests/test_export.py read LLMW files through this module, never through
export.py, so a mistake shared by export.py's writer and its reader shows.

Written from the format's description (README.md, "The LLMW format", and the
comments of model.h's loader), not from export.py's code:
  - a 256-byte little-endian header (struct.unpack of the fields below; bytes
    96..255 are reserved and zero);
  - then every tensor at the next multiple of 64 (zero padding before it):
    tok_embeddings, per layer attn_norm [attn_norm_bias] wq wk wv wo ffn_norm
    [ffn_norm_bias] w1 w2 w3, then final_norm [final_norm_bias] and, when
    the classifier is not shared, classifier; the file ends right after the
    last tensor and the header's file_size says so;
  - norm vectors are always float32; matrices are (rows, cols) row-major in
    the header's weight_type: 0 f32, 1 f16, 2 q8_0 = int8 q[rows*cols], then at
    the next 64-aligned offset float32 scale[rows * ceil(cols/G)], group j of
    a row covering columns [j*G, min((j+1)*G, cols)), value = q * scale.

  h, tensors, data = parse(path)  # raw storage: {name: (start, end, raw)}
  h, weights = read(path)         # {name: float32 array}, q8_0/f16 widened
"""
import struct

import numpy as np

HEADER_SIZE = 256
ALIGN = 64
HEADER = [("magic", "4s"), ("version", "I"), ("header_size", "I"), ("alignment", "I"),
          ("dim", "i"), ("hidden_dim", "i"), ("n_layers", "i"), ("n_heads", "i"),
          ("n_kv_heads", "i"), ("vocab_size", "i"), ("seq_len", "i"), ("head_size", "i"),
          ("norm_type", "I"), ("norm_pos", "I"), ("final_norm", "I"), ("norm_eps", "f"),
          ("rope_theta", "f"), ("rope_layout", "I"), ("shared_classifier", "I"),
          ("weight_type", "I"), ("group_size", "I"), ("norm_bias", "I"), ("file_size", "Q")]
F32, F16, Q8_0 = 0, 1, 2


def aligned(offset):
    """The first multiple of ALIGN at or after offset."""
    return -(-offset // ALIGN) * ALIGN


def read_header(data):
    """The header's fields by name, each at the offset the format gives it."""
    assert len(data) >= HEADER_SIZE, f"{len(data)} bytes: shorter than the 256-byte header"
    h, off = {}, 0
    for name, fmt in HEADER:
        (h[name],) = struct.unpack_from("<" + fmt, data, off)
        off += struct.calcsize(fmt)
    assert off == 96, off
    assert h["magic"] == b"LLMW" and h["version"] == 1, (h["magic"], h["version"])
    assert (h["header_size"], h["alignment"]) == (HEADER_SIZE, ALIGN), h
    assert data[96:HEADER_SIZE] == b"\0" * (HEADER_SIZE - 96), "reserved header bytes 96..255 must be zero"
    return h


def tensor_list(h):
    """[(name, shape, is_matrix)] in file order."""
    d, hid, L = h["dim"], h["hidden_dim"], h["n_layers"]
    hs, nh, nkv, V = h["head_size"], h["n_heads"], h["n_kv_heads"], h["vocab_size"]
    bias = ["_bias"] if h["norm_bias"] else []
    out = [("tok_embeddings", (V, d), True)]
    for l in range(L):
        p = f"layers.{l}."
        out += [(p + "attn_norm" + b, (d,), False) for b in [""] + bias]
        out += [(p + "wq", (nh * hs, d), True), (p + "wk", (nkv * hs, d), True),
                (p + "wv", (nkv * hs, d), True), (p + "wo", (d, nh * hs), True)]
        out += [(p + "ffn_norm" + b, (d,), False) for b in [""] + bias]
        out += [(p + "w1", (hid, d), True), (p + "w2", (d, hid), True), (p + "w3", (hid, d), True)]
    out += [("final_norm" + b, (d,), False) for b in [""] + bias]
    if not h["shared_classifier"]:
        out.append(("classifier", (V, d), True))
    return out


def parse(path):
    """(header, {name: (start, end, raw)}, bytes). raw is a float32 or float16
    array of the tensor's shape, or (q int8 (rows, cols), scale float32 (rows, groups))."""
    data = open(path, "rb").read()
    h = read_header(data)
    wt, G = h["weight_type"], h["group_size"]
    assert wt in (F32, F16, Q8_0), f"unknown weight_type {wt}"
    pos, out = HEADER_SIZE, {}
    for name, shape, is_matrix in tensor_list(h):
        start = aligned(pos)
        assert data[pos:start] == b"\0" * (start - pos), f"padding before {name} is not zero"
        n = int(np.prod(shape))
        if not is_matrix or wt == F32:
            raw, end = np.frombuffer(data, "<f4", n, start).reshape(shape), start + 4 * n
        elif wt == F16:
            raw, end = np.frombuffer(data, "<f2", n, start).reshape(shape), start + 2 * n
        else:
            assert G > 0, "q8_0 needs a group size"
            q = np.frombuffer(data, np.int8, n, start).reshape(shape)
            s_start = aligned(start + n)
            assert data[start + n:s_start] == b"\0" * (s_start - start - n), \
                f"padding before the scales of {name} is not zero"
            groups = -(-shape[1] // G)
            scale = np.frombuffer(data, "<f4", shape[0] * groups, s_start).reshape(shape[0], groups)
            raw, end = (q, scale), s_start + 4 * shape[0] * groups
        assert end <= len(data), f"{name} ends at {end}, past the file's {len(data)} bytes"
        out[name] = (start, end, raw)
        pos = end
    assert pos == len(data), f"file has {len(data)} bytes, the tensors end at {pos}"
    assert h["file_size"] == len(data), f"header file_size {h['file_size']}, file {len(data)} bytes"
    return h, out, data


def dequantize(q, scale, group):
    """q8_0 values: column c of row r is q[r, c] * scale[r, c // group], in float32."""
    cols = q.shape[1]
    per_column = scale[:, np.arange(cols) // group]
    return q.astype(np.float32) * per_column


def read(path):
    """(header, {name: float32 array}) with f16 and q8_0 matrices widened."""
    h, tensors, _ = parse(path)
    out = {}
    for name, (_, _, raw) in tensors.items():
        if isinstance(raw, tuple):
            out[name] = dequantize(raw[0], raw[1], h["group_size"])
        else:
            out[name] = raw.astype(np.float32)
    return h, out
