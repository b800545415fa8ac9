"""An independent reader of the engine's LLMW checkpoint format (versions 1
and 2), for the tests: the reference (tests/reference.py) and the round trips
of tests/test_export.py read LLMW files through this module, never through
export.py, so a mistake shared by export.py's writer and its reader shows.

Written from the format's description (FORMAT.md), not from export.py's code:
  - a 256-byte little-endian header (struct.unpack of the fields below);
    version 1 keeps bytes 96..255 zero, version 2 adds tensor_count,
    rope_scaling, directory_offset, the rope factors and original context,
    qkv_bias and qk_norm at 96..135, out_norm at 136, qk_norm_whole at 140,
    Gemma's ffn_act, embed_scale, query_scalar, sliding_window, local_layers
    and rope_local_theta at 144..171, and keeps 172..255 zero;
  - version 1: every tensor at the next multiple of 64 after the header
    (zero padding before it): tok_embeddings, per layer attn_norm
    [attn_norm_bias] wq wk wv wo ffn_norm [ffn_norm_bias] w1 w2 w3, then
    final_norm [final_norm_bias] and, when the classifier is not shared,
    classifier;
  - version 2: a directory of 40-byte entries (kind, layer, type, group, rows,
    cols, values offset, scales offset) at directory_offset, listing each
    tensor with its own type and offsets, in the canonical order (per layer
    also q_bias k_bias v_bias after wv, q_norm k_norm before wo (head_size
    each, or with qk_norm_whole n_heads*head_size and n_kv_heads*head_size), and with
    out_norm attn_out_norm [attn_out_norm_bias] ffn_out_norm
    [ffn_out_norm_bias] after w3: kinds 20..23);
  - the file ends right after the last tensor and the header's file_size says so;
  - norm vectors are always float32; matrices are (rows, cols) row-major in
    the header's weight_type: 0 f32, 1 f16, 2 q8_0 = int8 q[rows*cols], then at
    the next 64-aligned offset float32 scale[rows * ceil(cols/G)], group j of
    a row covering columns [j*G, min((j+1)*G, cols)), value = q * scale;
    5 q4_0 and 6 q4_K = ggml's blocks, each row ceil(cols/QK) whole blocks
    (the last zero-padded), rows back to back, no scales apart: q4_0 QK 32,
    18 bytes (f16 d, 16 bytes: element j < 16 the low nibble of byte j, j + 16
    its high nibble; value d * (code - 8)); q4_K QK 256, 144 bytes (f16 d, f16
    dmin, 12 bytes of 6-bit scales and mins, 128 bytes: sub-blocks 2p and
    2p + 1 the low and high nibbles of bytes 32p..32p+31; value
    (d * sc) * code - dmin * m). In a version 2 q4_K file a matrix whose cols
    is not a multiple of 256 is q4_0 (its directory entry says so).

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
F32, F16, Q8_0, Q4_0, Q4_K = 0, 1, 2, 5, 6
BLOCKS = {Q4_0: (32, 18), Q4_K: (256, 144)}   # values, bytes per block
HEADER_V2 = [("tensor_count", "I"), ("rope_scaling", "I"), ("directory_offset", "Q"),
             ("rope_factor", "f"), ("rope_low_freq_factor", "f"), ("rope_high_freq_factor", "f"),
             ("rope_orig_ctx", "i"), ("qkv_bias", "I"), ("qk_norm", "I"), ("out_norm", "I"),
             ("qk_norm_whole", "I"), ("ffn_act", "I"), ("embed_scale", "f"), ("query_scalar", "f"),
             ("sliding_window", "i"), ("local_layers", "Q"), ("rope_local_theta", "f")]
# version 2's tensor kinds, by number (FORMAT.md's table)
KINDS = ["tok_embeddings", "attn_norm", "attn_norm_bias", "wq", "wk", "wv", "q_bias", "k_bias",
         "v_bias", "q_norm", "k_norm", "wo", "ffn_norm", "ffn_norm_bias", "w1", "w2", "w3",
         "final_norm", "final_norm_bias", "classifier",
         "attn_out_norm", "attn_out_norm_bias", "ffn_out_norm", "ffn_out_norm_bias"]
ENTRY = "<6I2Q"


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
    assert h["magic"] == b"LLMW" and h["version"] in (1, 2), (h["magic"], h["version"])
    assert (h["header_size"], h["alignment"]) == (HEADER_SIZE, ALIGN), h
    if h["version"] == 2:
        for name, fmt in HEADER_V2:
            (h[name],) = struct.unpack_from("<" + fmt, data, off)
            off += struct.calcsize(fmt)
        assert off == 172, off
    else:
        h.update(tensor_count=0, rope_scaling=0, directory_offset=0, rope_factor=0.0,
                 rope_low_freq_factor=0.0, rope_high_freq_factor=0.0, rope_orig_ctx=0,
                 qkv_bias=0, qk_norm=0, out_norm=0, qk_norm_whole=0, ffn_act=0, embed_scale=0.0,
                 query_scalar=0.0, sliding_window=0, local_layers=0, rope_local_theta=0.0)
    assert data[off:HEADER_SIZE] == b"\0" * (HEADER_SIZE - off), f"reserved header bytes {off}..255 must be zero"
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
                (p + "wv", (nkv * hs, d), True)]
        if h.get("qkv_bias"):
            out += [(p + "q_bias", (nh * hs,), False), (p + "k_bias", (nkv * hs,), False),
                    (p + "v_bias", (nkv * hs,), False)]
        if h.get("qk_norm"):
            whole = h.get("qk_norm_whole")
            out += [(p + "q_norm", ((nh if whole else 1) * hs,), False),
                    (p + "k_norm", ((nkv if whole else 1) * hs,), False)]
        out.append((p + "wo", (d, nh * hs), True))
        out += [(p + "ffn_norm" + b, (d,), False) for b in [""] + bias]
        out += [(p + "w1", (hid, d), True), (p + "w2", (d, hid), True), (p + "w3", (hid, d), True)]
        if h.get("out_norm"):
            out += [(p + n + b, (d,), False) for n in ("attn_out_norm", "ffn_out_norm") for b in [""] + bias]
    out += [("final_norm" + b, (d,), False) for b in [""] + bias]
    if not h["shared_classifier"]:
        out.append(("classifier", (V, d), True))
    return out


def matrix_type(h, cols):
    """A matrix's type: the header's weight_type, except in a version 2 q4_K file,
    where a matrix whose rows are not a multiple of 256 is q4_0 (FORMAT.md)."""
    if h["weight_type"] == Q4_K and h["version"] == 2 and cols % 256:
        return Q4_0
    return h["weight_type"]


def parse(path):
    """(header, {name: (start, end, raw)}, bytes). raw is a float32 or float16
    array of the tensor's shape, (q int8 (rows, cols), scale float32 (rows, groups)),
    or a Blocks of a q4 type."""
    data = open(path, "rb").read()
    h = read_header(data)
    wt, G = h["weight_type"], h["group_size"]
    assert wt in (F32, F16, Q8_0, Q4_0, Q4_K), f"unknown weight_type {wt}"
    pos, out = HEADER_SIZE, {}
    wanted = tensor_list(h)
    starts = None
    if h["version"] == 2:
        # the directory: one entry per tensor, in the order tensor_list gives
        assert h["tensor_count"] == len(wanted), (h["tensor_count"], len(wanted))
        d0 = h["directory_offset"]
        assert d0 >= HEADER_SIZE and d0 % 8 == 0, d0
        assert data[pos:d0] == b"\0" * (d0 - pos), "bytes between the header and the directory must be zero"
        starts = []
        for i, (name, shape, is_matrix) in enumerate(wanted):
            kind, layer, typ, group, rows, cols, off, s_off = struct.unpack_from(ENTRY, data, d0 + 40 * i)
            want_layer = int(name.split(".")[1]) if name.startswith("layers.") else 0xFFFFFFFF
            assert KINDS[kind] == name.split(".")[-1] and layer == want_layer, (i, kind, layer, name)
            assert (rows, cols) == (tuple(shape) if is_matrix else (1, shape[0])), (name, rows, cols, shape)
            want_type = matrix_type(h, cols) if is_matrix else F32
            assert typ == want_type and group == (G if want_type == Q8_0 else 0), (name, typ, group)
            starts.append((off, s_off))
        pos = d0 + 40 * len(wanted)
    for i, (name, shape, is_matrix) in enumerate(wanted):
        start = aligned(pos)
        if starts is not None:   # version 2 may leave more room than alignment needs
            assert starts[i][0] >= start and starts[i][0] % ALIGN == 0, (name, starts[i][0], start)
            start = starts[i][0]
        assert data[pos:start] == b"\0" * (start - pos), f"padding before {name} is not zero"
        n = int(np.prod(shape))
        mt = matrix_type(h, shape[1]) if is_matrix else F32
        if not is_matrix or mt == F32:
            raw, end = np.frombuffer(data, "<f4", n, start).reshape(shape), start + 4 * n
        elif mt == F16:
            raw, end = np.frombuffer(data, "<f2", n, start).reshape(shape), start + 2 * n
        elif mt in BLOCKS:
            qk, size = BLOCKS[mt]
            nb = -(-shape[1] // qk)
            b = np.frombuffer(data, np.uint8, shape[0] * nb * size, start).reshape(shape[0], nb, size)
            raw, end = Blocks(mt, b, shape[1]), start + shape[0] * nb * size
            if starts is not None:
                assert starts[i][1] == 0, (name, "q4 types have no scales apart")
        else:
            assert G > 0, "q8_0 needs a group size"
            q = np.frombuffer(data, np.int8, n, start).reshape(shape)
            s_start = aligned(start + n)
            if starts is not None:
                assert starts[i][1] >= s_start and starts[i][1] % ALIGN == 0, (name, starts[i][1])
                s_start = starts[i][1]
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


class Blocks:
    """A q4 matrix's blocks: type, uint8 (rows, blocks, bytes), real columns."""

    def __init__(self, wt, b, cols):
        self.wt, self.b, self.cols = wt, b, cols


def half(b, at):
    """The f16 at bytes at, at+1 of every block, as float32 (rows, blocks, 1)."""
    return b[:, :, at:at + 2].copy().view("<f2").astype(np.float32)


def dequantize_q4_0(b, cols):
    """Element e of a block: code = byte e % 16's low (e < 16) or high nibble; d * (code - 8)."""
    e = np.arange(32)
    code = (b[:, :, 2 + e % 16] >> (4 * (e // 16))) & 15
    return (half(b, 0) * (code.astype(np.float32) - np.float32(8))).reshape(b.shape[0], -1)[:, :cols]


def q4_K_scale_min(s, j):
    """Sub-block j's 6-bit scale and min from the 12 bytes s (rows, blocks, 12)."""
    s = s.astype(np.int32)
    if j < 4:
        return s[..., j] & 63, s[..., j + 4] & 63
    return (s[..., j + 4] & 15) | ((s[..., j - 4] >> 6) << 4), (s[..., j + 4] >> 4) | ((s[..., j] >> 6) << 4)


def dequantize_q4_K(b, cols):
    """Element 32j + l of a superblock: code = nibble j % 2 of byte 16 + 32 (j // 2) + l;
    value (d * sc_j) * code - dmin * m_j, in float32."""
    rows, nb, _ = b.shape
    d, dmin = half(b, 0)[..., 0], half(b, 2)[..., 0]
    out = np.empty((rows, nb, 8, 32), np.float32)
    l = np.arange(32)
    for j in range(8):
        sc, m = q4_K_scale_min(b[:, :, 4:16], j)
        code = (b[:, :, 16 + 32 * (j // 2) + l] >> (4 * (j % 2))) & 15
        d1 = (d * sc.astype(np.float32))[..., None]
        m1 = (dmin * m.astype(np.float32))[..., None]
        out[:, :, j] = d1 * code.astype(np.float32) - m1
    return out.reshape(rows, -1)[:, :cols]


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
        elif isinstance(raw, Blocks):
            out[name] = (dequantize_q4_0 if raw.wt == Q4_0 else dequantize_q4_K)(raw.b, raw.cols)
        else:
            out[name] = raw.astype(np.float32)
    return h, out
