#!/usr/bin/env python3
"""export.py -- convert Llama-style checkpoints and tokenizers for the C engine.

Writes the engine's own checkpoint format, "LLMW" version 2 (a 256-byte
little-endian header, a tensor directory, then every tensor at a 64-byte
aligned offset; version 1, without the directory, on request: see FORMAT.md),
and llama2.c's tokenizer.bin.

  python3 export.py [options] INPUT OUTPUT        convert a model
  python3 export.py tokenizer INPUT OUTPUT.bin     convert a tokenizer
  python3 export.py random [options] OUTPUT        seeded random checkpoint

Run `python3 export.py --help` for the input kinds and every option.

Needs numpy (and torch only for .pt/.pth inputs). Safetensors files are read
with numpy alone. For use from Python (tests, references):

  cfg, tensors = read_checkpoint(path)   # LLMW or any input kind; float32 arrays

Tensor names used by read_checkpoint() and the writer:
  tok_embeddings (vocab, dim)
  layers.{l}.attn_norm (dim,), layers.{l}.attn_norm_bias (dim,) [norm_bias]
  layers.{l}.wq (n_heads*hs, dim), .wk/.wv (n_kv_heads*hs, dim), .wo (dim, n_heads*hs)
  layers.{l}.q_bias (n_heads*hs,), .k_bias/.v_bias (n_kv_heads*hs,)  [qkv_bias]
  layers.{l}.q_norm (hs,), .k_norm (hs,)  [qk_norm]
  layers.{l}.ffn_norm (dim,), layers.{l}.ffn_norm_bias (dim,) [norm_bias]
  layers.{l}.w1 (hidden, dim) gate, .w2 (dim, hidden) down, .w3 (hidden, dim) up
  layers.{l}.attn_out_norm (dim,) [+ _bias], .ffn_out_norm (dim,) [+ _bias]  [out_norm]
  final_norm (dim,), final_norm_bias (dim,) [norm_bias]
  classifier (vocab, dim)  [only when not shared_classifier]
"""
import argparse
import contextlib
import glob
import json
import math
import os
import re
import struct
import sys

try:
    import numpy as np
except ImportError:  # pragma: no cover - depends on the interpreter
    # The Debian python3 has numpy; a pyenv/venv python3 first on PATH may not.
    _alt = "/usr/bin/python3"
    if (__name__ == "__main__" and os.path.exists(_alt)
            and os.path.realpath(sys.executable) != os.path.realpath(_alt)
            and not os.environ.get("EXPORT_PY_REEXEC")):
        os.environ["EXPORT_PY_REEXEC"] = "1"
        os.execv(_alt, [_alt] + sys.argv)
    sys.stderr.write("export.py: error: numpy is required (try /usr/bin/python3 export.py ...)\n")
    raise SystemExit(1)

PROG = "export.py"

# ----------------------------------------------------------------------------
# the LLMW format

MAGIC = b"LLMW"
VERSION = 2                 # written by default; version 1 is still read and written
HEADER_SIZE = 256
ALIGN = 64
HEADER_FMT = "<4sIII" + "i" * 8 + "III" + "ff" + "IIIII" + "Q"   # 96 bytes, rest reserved
assert struct.calcsize(HEADER_FMT) == 96
HEADER_FIELDS = ("magic", "version", "header_size", "alignment",
                 "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                 "seq_len", "head_size", "norm_type", "norm_pos", "final_norm",
                 "norm_eps", "rope_theta", "rope_layout", "shared_classifier",
                 "weight_type", "group_size", "norm_bias", "file_size")

WT_F32, WT_F16, WT_Q8_0 = 0, 1, 2
WT_Q4_0, WT_Q4_K = 5, 6     # ggml's block layouts (the engine's GGUF types), rows zero-padded
DTYPES = {"f32": WT_F32, "f16": WT_F16, "q8_0": WT_Q8_0, "q4_0": WT_Q4_0, "q4_k": WT_Q4_K}
# a block type's (values per block, bytes per block)
BLOCK_TYPES = {WT_Q4_0: (32, 18), WT_Q4_K: (256, 144)}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
NORM_TYPES = {"rms": 0, "layer": 1}
NORM_POS = {"pre": 0, "post": 1, "peri": 2, "out": 3}
NORM_POS_NAMES = {v: k for k, v in NORM_POS.items()}
ONOFF = {"off": 0, "on": 1}

DEFAULT_EPS = 1e-5
DEFAULT_THETA = 10000.0
DEFAULT_GROUP = 32
MAX_GROUP = 4096            # the engine's q8_0 group size limit
F16_MAX = 65504.0
INT32_MAX = 2**31 - 1


class ExportError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


def first_line(e):
    """An exception's message cut to one line ('' when it has none)."""
    return (str(e).splitlines() or [""])[0]


def log(msg):
    sys.stderr.write(f"{PROG}: {msg}\n")
    sys.stderr.flush()


def align_up(n, a=ALIGN):
    return (n + a - 1) // a * a


def n_groups(cols, group_size):
    return -(-cols // group_size)


# version 2's tensor kinds, numbered in their order within a layer (FORMAT.md)
KINDS = ("tok_embeddings", "attn_norm", "attn_norm_bias", "wq", "wk", "wv", "q_bias", "k_bias",
         "v_bias", "q_norm", "k_norm", "wo", "ffn_norm", "ffn_norm_bias", "w1", "w2", "w3",
         "final_norm", "final_norm_bias", "classifier",
         "attn_out_norm", "attn_out_norm_bias", "ffn_out_norm", "ffn_out_norm_bias")
KIND_IDS = {k: i for i, k in enumerate(KINDS)}
NO_LAYER = 0xFFFFFFFF
ENTRY_FMT = "<IIIIIIQQ"     # kind, layer, type, group, rows, cols, values offset, scales offset
ENTRY_SIZE = struct.calcsize(ENTRY_FMT)
assert ENTRY_SIZE == 40
V2_FMT = "<IIQfffiIII"      # at byte 96: tensor_count, rope_scaling, directory_offset, rope_factor,
V2_FIELDS = ("tensor_count", "rope_scaling", "directory_offset", "rope_factor",   # low/high freq
             "rope_low_freq_factor", "rope_high_freq_factor", "rope_orig_ctx",    # factors, orig
             "qkv_bias", "qk_norm", "out_norm")                                   # ctx, flags
assert struct.calcsize(V2_FMT) == 44
ROPE_SCALING = {"none": 0, "linear": 1, "llama3": 2}
ROPE_SCALING_NAMES = {v: k for k, v in ROPE_SCALING.items()}
V2_DEFAULTS = dict(rope_scaling=0, rope_factor=0.0, rope_low_freq_factor=0.0,
                   rope_high_freq_factor=0.0, rope_orig_ctx=0, qkv_bias=0, qk_norm=0, out_norm=0)


def tensor_plan(cfg):
    """[(name, shape, kind)] in file order; kind 'vec' (always f32) or 'mat'."""
    d, h, L = cfg["dim"], cfg["hidden_dim"], cfg["n_layers"]
    hs, nh, nkv, V = cfg["head_size"], cfg["n_heads"], cfg["n_kv_heads"], cfg["vocab_size"]
    bias = bool(cfg["norm_bias"])
    qkv_bias, qk_norm = bool(cfg.get("qkv_bias")), bool(cfg.get("qk_norm"))
    plan = [("tok_embeddings", (V, d), "mat")]
    for l in range(L):
        p = f"layers.{l}."
        plan.append((p + "attn_norm", (d,), "vec"))
        if bias:
            plan.append((p + "attn_norm_bias", (d,), "vec"))
        plan += [(p + "wq", (nh * hs, d), "mat"), (p + "wk", (nkv * hs, d), "mat"),
                 (p + "wv", (nkv * hs, d), "mat")]
        if qkv_bias:
            plan += [(p + "q_bias", (nh * hs,), "vec"), (p + "k_bias", (nkv * hs,), "vec"),
                     (p + "v_bias", (nkv * hs,), "vec")]
        if qk_norm:
            plan += [(p + "q_norm", (hs,), "vec"), (p + "k_norm", (hs,), "vec")]
        plan.append((p + "wo", (d, nh * hs), "mat"))
        plan.append((p + "ffn_norm", (d,), "vec"))
        if bias:
            plan.append((p + "ffn_norm_bias", (d,), "vec"))
        plan += [(p + "w1", (h, d), "mat"), (p + "w2", (d, h), "mat"), (p + "w3", (h, d), "mat")]
        if cfg.get("out_norm"):   # peri's and out's N2, N4 (kinds 20..23, after w3)
            for n in ("attn_out_norm", "ffn_out_norm"):
                plan.append((p + n, (d,), "vec"))
                if bias:
                    plan.append((p + n + "_bias", (d,), "vec"))
    plan.append(("final_norm", (d,), "vec"))
    if bias:
        plan.append(("final_norm_bias", (d,), "vec"))
    if not cfg["shared_classifier"]:
        plan.append(("classifier", (V, d), "mat"))
    return plan


def matrix_bytes(rows, cols, weight_type, group_size):
    """(bytes of the values, offset of the scales from the values or None, total bytes)."""
    if weight_type == WT_F32:
        return 4 * rows * cols, None, 4 * rows * cols
    if weight_type == WT_F16:
        return 2 * rows * cols, None, 2 * rows * cols
    if weight_type in BLOCK_TYPES:
        qk, size = BLOCK_TYPES[weight_type]
        return rows * n_groups(cols, qk) * size, None, rows * n_groups(cols, qk) * size
    q = rows * cols
    s_off = align_up(q)
    return q, s_off, s_off + 4 * rows * n_groups(cols, group_size)


def matrix_type(cfg, cols):
    """A matrix's storage type: the header's weight_type, except that a version 2
    q4_k file stores a matrix whose rows are not whole superblocks of 256 as q4_0
    (FORMAT.md): padding them to 256 would cost more bytes than q4_0's coarser
    scales lose (stories260K's 64 and 172 columns, stories15M's 288)."""
    wt = cfg["weight_type"]
    if wt == WT_Q4_K and cfg.get("version", VERSION) == 2 and cols % 256:
        return WT_Q4_0
    return wt


def tensor_count(cfg):
    """Tensors in the file (the version 2 directory's entries), without listing them."""
    one, two = (len(tensor_plan(dict(cfg, n_layers=n))) for n in (1, 2))
    return one + (cfg["n_layers"] - 1) * (two - one)


def data_start(cfg):
    """Where the tensors start: after the header (version 1), or after the header and
    the directory, aligned (version 2)."""
    if cfg.get("version", VERSION) == 1:
        return HEADER_SIZE
    return align_up(HEADER_SIZE + ENTRY_SIZE * tensor_count(cfg))


def layout(cfg):
    """[(name, shape, kind, offset, scale_offset|None)] and the file size."""
    out = []
    off = data_start(cfg)
    for name, shape, kind in tensor_plan(cfg):
        off = align_up(off)
        if kind == "vec":
            out.append((name, shape, kind, off, None))
            off += 4 * shape[0]
        else:
            _, s_off, total = matrix_bytes(shape[0], shape[1], matrix_type(cfg, shape[1]), cfg["group_size"])
            out.append((name, shape, kind, off, None if s_off is None else off + s_off))
            off += total
    return out, off


def file_size_of(cfg):
    """layout(cfg)'s file size without listing every layer: all layers take the same
    bytes (each starts 64-byte aligned), so a bogus n_layers costs nothing."""
    one, two = (layout(dict(cfg, n_layers=n, version=1))[1] - HEADER_SIZE for n in (1, 2))
    return data_start(cfg) + one + (cfg["n_layers"] - 1) * (two - one)


def split_name(name):
    """'layers.3.wq' -> ('wq', 3); 'final_norm' -> ('final_norm', NO_LAYER)."""
    if name.startswith("layers."):
        _, l, kind = name.split(".", 2)
        return kind, int(l)
    return name, NO_LAYER


def directory(cfg, entries):
    """The version 2 tensor directory of layout(cfg)'s entries, as bytes."""
    out = []
    for name, shape, kind, off, s_off in entries:
        k, l = split_name(name)
        rows, cols = (1, shape[0]) if kind == "vec" else shape
        wt = WT_F32 if kind == "vec" else matrix_type(cfg, cols)
        group = cfg["group_size"] if wt == WT_Q8_0 else 0
        out.append(struct.pack(ENTRY_FMT, KIND_IDS[k], l, wt, group, rows, cols, off, s_off or 0))
    return b"".join(out)


def pack_header(cfg, file_size):
    vals = dict(V2_DEFAULTS)
    vals.update(cfg)
    version = vals.get("version", VERSION)
    vals.update(magic=MAGIC, version=version, header_size=HEADER_SIZE, alignment=ALIGN,
                file_size=file_size, rope_layout=0)
    head = struct.pack(HEADER_FMT, *[vals[k] for k in HEADER_FIELDS])
    if version == 2:
        vals.update(tensor_count=tensor_count(cfg), directory_offset=HEADER_SIZE)
        head += struct.pack(V2_FMT, *[vals[k] for k in V2_FIELDS])
    return head + b"\0" * (HEADER_SIZE - len(head))


def validate_config(cfg):
    """Raise ExportError naming the first field out of range."""
    for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
              "seq_len", "head_size"):
        v = cfg[k]
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0 or v > INT32_MAX:
            raise ExportError(f"config field {k} = {v!r} must be a positive 32-bit integer")
    if cfg["n_heads"] % cfg["n_kv_heads"]:
        raise ExportError(f"config field n_kv_heads = {cfg['n_kv_heads']} must divide "
                          f"n_heads = {cfg['n_heads']}")
    if cfg["head_size"] % 2:
        raise ExportError(f"config field head_size = {cfg['head_size']} must be even (RoPE pairs)")
    for k in ("norm_type", "final_norm", "shared_classifier", "norm_bias"):
        if k in cfg and cfg[k] not in (0, 1):
            raise ExportError(f"config field {k} = {cfg[k]!r} must be 0 or 1")
    if cfg.get("norm_pos", 0) not in NORM_POS_NAMES:
        raise ExportError(f"config field norm_pos = {cfg['norm_pos']!r} must be 0 pre, 1 post, 2 peri or 3 out")
    if cfg["weight_type"] not in DTYPE_NAMES:
        raise ExportError(f"config field weight_type = {cfg['weight_type']!r} is unknown")
    if cfg["weight_type"] == WT_Q8_0 and not 0 < cfg["group_size"] <= MAX_GROUP:
        raise ExportError(f"--group-size must be in 1..{MAX_GROUP} for q8_0 "
                          f"(got {cfg['group_size']})")
    if not (cfg["norm_eps"] >= 0 and math.isfinite(cfg["norm_eps"])):
        raise ExportError(f"config field norm_eps = {cfg['norm_eps']!r} must be finite and >= 0")
    if not (cfg["rope_theta"] > 0 and math.isfinite(cfg["rope_theta"])):
        raise ExportError(f"config field rope_theta = {cfg['rope_theta']!r} must be finite and > 0")
    version = cfg.get("version", VERSION)
    if version not in (1, 2):
        raise ExportError(f"LLMW version {version!r} is not written (1 or 2)")
    for k in ("qkv_bias", "qk_norm", "out_norm"):
        if cfg.get(k, 0) not in (0, 1):
            raise ExportError(f"config field {k} = {cfg[k]!r} must be 0 or 1")
    rs = cfg.get("rope_scaling", 0)
    if rs not in ROPE_SCALING_NAMES:
        raise ExportError(f"config field rope_scaling = {rs!r} is unknown")
    factors = ("rope_factor",) if rs == 1 else \
        ("rope_factor", "rope_low_freq_factor", "rope_high_freq_factor") if rs == 2 else ()
    for k in factors:
        if not (cfg[k] > 0 and math.isfinite(cfg[k])):
            raise ExportError(f"config field {k} = {cfg[k]!r} must be finite and > 0")
    if rs == 2:
        if not cfg["rope_high_freq_factor"] > cfg["rope_low_freq_factor"]:
            raise ExportError(f"rope_scaling high_freq_factor {cfg['rope_high_freq_factor']} must "
                              f"be above low_freq_factor {cfg['rope_low_freq_factor']}")
        o = cfg["rope_orig_ctx"]
        if not isinstance(o, (int, np.integer)) or isinstance(o, bool) or not 0 < o <= INT32_MAX:
            raise ExportError(f"config field rope_orig_ctx = {o!r} must be a positive 32-bit integer")
    if version == 1:
        need = [k for k in ("rope_scaling", "qkv_bias", "qk_norm", "out_norm") if cfg.get(k)]
        if cfg["head_size"] * cfg["n_heads"] != cfg["dim"]:
            need.append("head_size * n_heads != dim")
        if need:
            raise ExportError(f"LLMW version 1 cannot hold {', '.join(need)}: write version 2")


# ----------------------------------------------------------------------------
# quantization

def round_half_away(x):
    """Round float32 x to the nearest integer, halves away from zero (C roundf)."""
    t = np.trunc(x)
    frac = x - t                       # exact for float32
    return t + np.sign(x) * (np.abs(frac) >= 0.5)


def quantize_q8_0(w, group_size):
    """(rows, cols) float -> (q int8 (rows, cols), scale float32 (rows, ceil(cols/G))).

    Groups run along each row: group j of a row covers columns [j*G, min((j+1)*G, cols)),
    so the last group of a row is short when G does not divide cols. scale = max|w|/127
    (float32), q = round-half-away(w/scale) clamped to [-127, 127], q = 0 when scale = 0.
    """
    w = np.asarray(w, dtype=np.float32)
    rows, cols = w.shape
    ng = n_groups(cols, group_size)
    pad = ng * group_size - cols
    wp = np.pad(w, ((0, 0), (0, pad))) if pad else w
    g = wp.reshape(rows, ng, group_size)
    amax = np.abs(g).max(axis=2)
    scale = (amax / np.float32(127.0)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    x = g / safe[:, :, None]
    q = np.clip(round_half_away(x), -127, 127)
    q[scale == 0] = 0
    q = q.astype(np.int8).reshape(rows, ng * group_size)[:, :cols]
    return np.ascontiguousarray(q), scale


def dequantize_q8_0(q, scale, group_size):
    rows, cols = q.shape
    s = np.repeat(np.asarray(scale, dtype=np.float32), group_size, axis=1)[:, :cols]
    return q.astype(np.float32) * s


def pad_columns(w, qk):
    """(rows, cols) -> (rows, cols rounded up to a multiple of qk), zeros appended."""
    pad = -w.shape[1] % qk
    return np.pad(w, ((0, 0), (0, pad))) if pad else w


def f16_scale(v, name, what):
    """float32 scales -> their f16 bits, refusing one beyond f16's range."""
    big = float(np.abs(v).max(initial=0))
    if not big <= F16_MAX:
        raise ExportError(f"tensor {name} needs a {what} of {big:g}, beyond f16's range (65504): "
                          f"its values are too large for 4 bits; use --dtype q8_0 or f32")
    return _f16_bits(v)


def quantize_q4_0(w, name="matrix"):
    """(rows, cols) float32 -> LLMW q4_0 bytes: each row zero-padded to blocks of 32, then
    ggml's Q4_0 reference rounding (quantize_gguf_q4_0). A padded value is 0, so its code
    is 8, which decodes to exactly 0 whatever the block's d."""
    w = np.asarray(w, dtype=np.float32)
    pick = np.abs(w).max(initial=0)
    f16_scale(np.float32(pick / 8.0), name, "q4_0 block scale")
    return quantize_gguf_q4_0(pad_columns(w, 32))


def dequantize_q4_0(raw, rows, cols):
    """The real columns of LLMW q4_0 bytes, float32, as the engine computes them."""
    return dequantize_gguf(raw, GG_Q4_0, rows, n_groups(cols, 32) * 32)[:, :cols]


Q4K_STEPS = np.float32(-1.0) + np.float32(0.1) * np.arange(21, dtype=np.float32)


def fit_scale_min(x, wt, nmax=15):
    """Per row of x (N, 32) with error weights wt (N, 32) (0: a padded value): the scale
    s >= 0 and offset m <= 0 that make x ~ s * L + m, L = 0..nmax, with small weighted
    squared error: ggml's make_qkx2_quants idea. Start from L spread over [min(x, 0),
    max(x)]; then for 21 stretches of that grid (nmax - 1 .. nmax + 1 steps across the
    range) round x to it and solve the weighted least squares for (s, m) given those L,
    keeping the fit of least error. Returns float32 (s (N,), m (N,))."""
    f32 = np.float32
    real = wt > 0
    lo = np.minimum(np.where(real, x, f32(np.inf)).min(axis=1), f32(0.0))
    hi = np.where(real, x, f32(-np.inf)).max(axis=1)
    hi = np.where(np.isfinite(hi), hi, lo)               # a sub-block of padding only
    flat = hi <= lo
    rng = np.where(flat, f32(1.0), hi - lo)
    u = (x - lo[:, None]) / rng[:, None]                 # 0..1 across [lo, hi]
    wx = wt * x
    sw, sx, sxx = wt.sum(axis=1), wx.sum(axis=1), np.einsum("ij,ij->i", wx, x)
    L = np.empty_like(x)

    def fit(k, least_squares):
        """Codes on the grid of k steps across [lo, hi], then (s, m, weighted squared
        error); the error from sums: sum w (s L + m - x)^2, expanded."""
        np.multiply(u, k, out=L)
        np.rint(L, out=L)
        if k > nmax:                                     # u <= 1: only a stretched grid overflows
            np.minimum(L, f32(nmax), out=L)
        sl, sl2, sxl = np.einsum("ij,ij->i", wt, L), np.einsum("ij,ij,ij->i", wt, L, L), np.einsum("ij,ij->i", wx, L)
        if least_squares:
            D = sw * sl2 - sl * sl
            ok = D > 0
            Ds = np.where(ok, D, f32(1.0))
            sc = (sw * sxl - sx * sl) / Ds
            m = (sl2 * sx - sl * sxl) / Ds
            pos = m > 0                                  # an offset above 0: fit s alone, m = 0
            sc = np.where(pos, sxl / np.where(sl2 > 0, sl2, f32(1.0)), sc)
            m = np.where(pos, f32(0.0), m)
        else:
            ok, sc, m = True, rng / k, lo
        e = sc * sc * sl2 + 2 * sc * m * sl + m * m * sw - 2 * sc * sxl - 2 * m * sx + sxx
        return ok, sc, m, e
    _, best_s, best_m, best = fit(f32(nmax), False)
    for step in Q4K_STEPS:
        ok, sc, m, e = fit(f32(nmax) + step, True)
        better = ok & (e < best)
        best, best_s, best_m = np.where(better, e, best), np.where(better, sc, best_s), np.where(better, m, best_m)
    best_s = np.where(flat, f32(0.0), best_s).astype(f32)
    best_m = np.where(flat, lo, best_m).astype(f32)
    return best_s, best_m


def pack_q4_k_scales(ls, lm):
    """Eight 6-bit scales ls and mins lm (..., 8) -> ggml's 12 bytes (..., 12): bytes 0-3
    scales 0-3, bytes 4-7 mins 0-3, each with bits 4-5 of scale/min j+4 in its top two
    bits; bytes 8-11 scale j+4's low four bits, min j+4's in the high four."""
    out = np.empty(ls.shape[:-1] + (12,), dtype=np.uint8)
    out[..., 0:4] = ls[..., :4] | (ls[..., 4:] >> 4) << 6
    out[..., 4:8] = lm[..., :4] | (lm[..., 4:] >> 4) << 6
    out[..., 8:12] = (ls[..., 4:] & 15) | (lm[..., 4:] & 15) << 4
    return out


def quantize_q4_k(w, name="matrix"):
    """(rows, cols) float32 -> LLMW q4_k bytes: rows zero-padded to superblocks of 256, each
    144 bytes: f16 d, f16 dmin, 12 bytes of eight 6-bit sub-block scales and mins, 128 bytes
    of codes (sub-blocks 2p, 2p + 1 the low and high nibbles of bytes 32p..32p + 31), value
    = d * sc * code - dmin * m. Each sub-block of 32 is fitted (fit_scale_min, error weights
    rms(x) + |x| as ggml's reference; padding weighs 0); then sc = round(63 * s / max s) with
    d = max s / 63, m likewise with dmin, and the codes rounded against the stored d, dmin.
    A sub-block of padding only gets sc = m = 0 and codes 0: it decodes to exactly 0."""
    f32 = np.float32
    w = np.asarray(w, dtype=np.float32)
    rows, cols = w.shape
    x = pad_columns(w, 256)
    nb = x.shape[1] // 256
    real = (np.arange(nb * 256) < cols).reshape(nb * 8, 32)
    x = x.reshape(rows * nb * 8, 32)
    real = np.broadcast_to(real[None], (rows, nb * 8, 32)).reshape(rows * nb * 8, 32)
    n_real = np.maximum(real.sum(axis=1), 1).astype(f32)
    rms = np.sqrt((x * x).sum(axis=1) / n_real)
    wt = np.where(real, rms[:, None] + np.abs(x), f32(0.0)).astype(f32)
    with np.errstate(over="ignore", invalid="ignore"):   # values too large for f16 scales: refused below
        s, m = fit_scale_min(x, wt)
    s, mn = s.reshape(rows, nb, 8), (f32(0.0) - m).reshape(rows, nb, 8)    # mn = -m >= 0 (never -0)
    max_s, max_m = s.max(axis=2), mn.max(axis=2)
    inv_s = np.where(max_s > 0, f32(63.0) / np.where(max_s > 0, max_s, f32(1.0)), f32(0.0)).astype(f32)
    inv_m = np.where(max_m > 0, f32(63.0) / np.where(max_m > 0, max_m, f32(1.0)), f32(0.0)).astype(f32)
    ls = np.minimum(np.rint(inv_s[..., None] * s), 63).astype(np.uint8)
    lm = np.minimum(np.rint(inv_m[..., None] * mn), 63).astype(np.uint8)
    d = f16_scale((max_s / f32(63.0)).astype(f32), name, "q4_k superblock scale")
    dmin = f16_scale((max_m / f32(63.0)).astype(f32), name, "q4_k superblock min")
    d1 = (d.astype(f32)[..., None] * ls.astype(f32)).reshape(-1, 1)
    m1 = (dmin.astype(f32)[..., None] * lm.astype(f32)).reshape(-1, 1)
    L = np.where(d1 > 0, np.clip(np.rint((x + m1) / np.where(d1 > 0, d1, f32(1.0))), 0, 15), 0)
    L = L.astype(np.uint8).reshape(rows, nb, 4, 2, 32)
    out = np.empty((rows, nb, 144), dtype=np.uint8)
    out[..., 0:2] = d.view(np.uint8).reshape(rows, nb, 2)
    out[..., 2:4] = dmin.view(np.uint8).reshape(rows, nb, 2)
    out[..., 4:16] = pack_q4_k_scales(ls, lm)
    out[..., 16:] = (L[:, :, :, 0] | L[:, :, :, 1] << 4).reshape(rows, nb, 128)
    return out.tobytes()


def unpack_q4_k_scales(s):
    """ggml's 12 bytes (..., 12) -> the eight 6-bit scales and mins, each (..., 8)."""
    s = s.astype(np.int32)
    sc = np.concatenate([s[..., 0:4] & 63, (s[..., 8:12] & 15) | (s[..., 0:4] >> 6) << 4], axis=-1)
    mn = np.concatenate([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | (s[..., 4:8] >> 6) << 4], axis=-1)
    return sc, mn


def dequantize_q4_k(raw, rows, cols):
    """The real columns of LLMW q4_k bytes, float32, in the engine's order:
    (d * sc) * code - dmin * m."""
    f32 = np.float32
    nb = n_groups(cols, 256)
    b = np.frombuffer(raw, np.uint8, rows * nb * 144).reshape(rows, nb, 144)
    d = b[..., 0:2].copy().view("<f2").astype(f32)       # (rows, nb, 1)
    dmin = b[..., 2:4].copy().view("<f2").astype(f32)
    sc, mn = unpack_q4_k_scales(b[..., 4:16])
    qs = b[..., 16:].reshape(rows, nb, 4, 32)
    L = np.stack([qs & 15, qs >> 4], axis=3).reshape(rows, nb, 8, 32).astype(f32)
    d1 = (d * sc.astype(f32))[..., None]
    m1 = (dmin * mn.astype(f32))[..., None]
    return (d1 * L - m1).astype(f32).reshape(rows, nb * 256)[:, :cols]


QUANTIZERS = {WT_Q4_0: (quantize_q4_0, dequantize_q4_0), WT_Q4_K: (quantize_q4_k, dequantize_q4_k)}


# ----------------------------------------------------------------------------
# writing

@contextlib.contextmanager
def atomic_output(path):
    """Open a temp file beside `path`; rename it over `path` only on success."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise ExportError(f"output folder {folder} does not exist")
    if os.path.isdir(path):
        raise ExportError(f"output {path} is a directory")
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp{os.getpid()}")
    f = open(tmp, "wb")
    try:
        yield f
        f.flush()
        f.close()
        os.replace(tmp, path)
    except BaseException:
        f.close()
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


ROW_CHUNK_ELEMS = 1 << 22   # write big matrices in ~4M-element slices


def write_matrix(f, name, w, weight_type, group_size):
    """Write one matrix in weight_type; returns the max abs round-trip error."""
    rows, cols = w.shape
    step = max(1, ROW_CHUNK_ELEMS // max(cols, 1))
    err = 0.0
    if weight_type == WT_Q8_0:
        scales = []
        start = f.tell()
        for r0 in range(0, rows, step):
            blk = np.asarray(w[r0:r0 + step], dtype=np.float32)
            q, s = quantize_q8_0(blk, group_size)
            f.write(q.tobytes())
            scales.append(s)
            err = max(err, float(np.abs(dequantize_q8_0(q, s, group_size) - blk).max(initial=0)))
        f.write(b"\0" * (align_up(f.tell() - start) - (f.tell() - start)))
        for s in scales:
            f.write(s.astype("<f4").tobytes())
        return err
    if weight_type in BLOCK_TYPES:
        quantize, dequantize = QUANTIZERS[weight_type]
        for r0 in range(0, rows, step):
            blk = np.asarray(w[r0:r0 + step], dtype=np.float32)
            raw = quantize(blk, name)
            err = max(err, float(np.abs(dequantize(raw, blk.shape[0], cols) - blk).max(initial=0)))
            f.write(raw)
        return err
    for r0 in range(0, rows, step):
        blk = np.asarray(w[r0:r0 + step], dtype=np.float32)
        if weight_type == WT_F16:
            big = float(np.abs(blk).max(initial=0))
            if not big <= F16_MAX:
                raise ExportError(f"tensor {name} has a value of magnitude {big:g}, "
                                  f"beyond the f16 range (65504): use --dtype f32 or q8_0")
            h = blk.astype("<f2")
            err = max(err, float(np.abs(h.astype(np.float32) - blk).max(initial=0)))
            f.write(h.tobytes())
        else:
            f.write(blk.astype("<f4").tobytes())
    return err


class Progress:
    """'tensor n of N, bytes, rate' on one stderr line, redrawn, once a conversion has
    run for a second, and only when stderr is a terminal (a log keeps the summaries).
    EXPORT_PROGRESS=SECONDS shows it on any stderr after that many seconds."""

    def __init__(self, n_tensors, total_bytes, delay=1.0):
        import time
        self.time = time.monotonic
        self.n, self.total, self.delay = n_tensors, total_bytes, delay
        self.t0 = self.last = self.time()
        self.shown = False
        self.on = sys.stderr.isatty()
        forced = os.environ.get("EXPORT_PROGRESS")
        if forced:
            with contextlib.suppress(ValueError):
                self.delay, self.on = float(forced), True

    def update(self, i, done):
        now = self.time()
        if not self.on or now - self.t0 < self.delay or (now - self.last < 0.2 and i < self.n):
            return
        self.last = now
        rate = done / max(now - self.t0, 1e-9) / 2**20
        sys.stderr.write(f"\r{PROG}: tensor {i} of {self.n}, {done / 2**20:.1f} of "
                         f"{self.total / 2**20:.1f} MiB, {rate:.1f} MiB/s  ")
        sys.stderr.flush()
        self.shown = True

    def close(self):
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def write_llmw(path, cfg, src):
    """Write `src` (a Source) as LLMW to `path` with header values from cfg."""
    validate_config(cfg)
    entries, file_size = layout(cfg)
    src.check([(n, s) for n, s, _, _, _ in entries])
    max_err = 0.0
    progress = Progress(len(entries), file_size)
    with atomic_output(path) as f, contextlib.closing(progress):
        f.write(pack_header(cfg, file_size))
        if cfg.get("version", VERSION) == 2:
            f.write(directory(cfg, entries))
        for i, (name, shape, kind, off, _) in enumerate(entries):
            progress.update(i, f.tell())
            f.write(b"\0" * (off - f.tell()))
            arr = src.load(name)
            if tuple(arr.shape) != tuple(shape):
                raise ExportError(f"tensor {src.src_name(name)} has shape {list(arr.shape)}, "
                                  f"expected {list(shape)}")
            if not np.isfinite(arr).all():
                raise ExportError(f"tensor {src.src_name(name)} contains NaN or Inf")
            if kind == "vec":
                f.write(np.asarray(arr, dtype="<f4").tobytes())
            else:
                max_err = max(max_err, write_matrix(f, name, arr, matrix_type(cfg, shape[1]),
                                                    cfg["group_size"]))
            del arr
        progress.update(len(entries), f.tell())
        if f.tell() != file_size:   # a bug, not bad input
            raise ExportError(f"internal error: wrote {f.tell()} bytes, header says {file_size}")
    return file_size, max_err


# ----------------------------------------------------------------------------
# sources: something that yields the canonical tensors of a model

class Source:
    """cfg: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len,
    head_size, norm_eps, rope_theta, shared_classifier, norm_bias (present in the
    input), and optionally norm_type/norm_pos/final_norm/weight_type/group_size.
    entries: canonical name -> (source name, shape, loader() -> float32 array)."""

    def __init__(self, desc, cfg):
        self.desc = desc
        self.cfg = cfg
        self.entries = {}
        self.config_name = "the header"   # what shapes are checked against, for messages

    def add(self, name, src_name, shape, loader):
        self.entries[name] = (src_name, tuple(int(x) for x in shape), loader)

    def src_name(self, name):
        return self.entries[name][0] if name in self.entries else name

    def check(self, wanted):
        for name, shape in wanted:
            if name not in self.entries:
                raise ExportError(f"missing tensor {self.expected_name(name)} in {self.desc}")
            src_name, have, _ = self.entries[name]
            if have != tuple(shape):
                raise ExportError(f"tensor {src_name} has shape {list(have)} but "
                                  f"{self.config_name} implies {list(shape)}")

    def expected_name(self, name):
        return self.src_name(name)

    def load(self, name):
        src_name, shape, loader = self.entries[name]
        a = np.asarray(loader(), dtype=np.float32)
        return a

    def tensors(self):
        """All tensors of the plan as float32 arrays (for read_checkpoint)."""
        cfg = dict(self.cfg)
        cfg.setdefault("weight_type", WT_F32)
        cfg.setdefault("group_size", 0)
        plan = tensor_plan(cfg)
        self.check([(n, s) for n, s, _ in plan])
        return {n: np.array(self.load(n), dtype=np.float32) for n, _, _ in plan}


class SeqLayout:
    """Tensors laid one after another from an offset, each checked against the file
    size as it is placed (so a header claiming huge sizes fails at once)."""

    def __init__(self, path, offset):
        self.path, self.off = path, offset
        self.size = os.path.getsize(path)

    def take(self, name, nbytes):
        start = self.off
        self.off += nbytes
        if self.off > self.size:
            raise ExportError(f"{self.path} is truncated: tensor {name} needs bytes "
                              f"[{start}, {self.off}), the file has {self.size}")
        return start

    def check_end(self):
        """The tensors must end where the file does: extra bytes mean the header does
        not describe this file."""
        if self.off != self.size:
            raise ExportError(f"{self.path} has {self.size - self.off} bytes after the last "
                              f"tensor: the header does not describe this file")


def _mm(path, dtype, offset, shape):
    n = int(np.prod(shape))
    if n == 0:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=tuple(shape))


def _plausible_dims(vals, path, kind):
    names = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len")
    for k, v in zip(names, vals):
        if k == "vocab_size":
            v = abs(v)
        if not 0 < v < (1 << 24):
            raise ExportError(f"{path}: not a {kind} file ({k} = {v} in the header is out of range)")
    dim, _, _, nh, nkv = vals[:5]
    if dim % nh or nh % nkv or (dim // nh) % 2:
        raise ExportError(f"{path}: not a {kind} file (dim {dim}, n_heads {nh}, "
                          f"n_kv_heads {nkv} are inconsistent)")


def _llama2c_cfg(vals, shared):
    dim, hidden, L, nh, nkv, vocab, seq = vals
    return dict(dim=dim, hidden_dim=hidden, n_layers=L, n_heads=nh, n_kv_heads=nkv,
                vocab_size=abs(vocab), seq_len=seq, head_size=dim // nh,
                norm_eps=DEFAULT_EPS, rope_theta=DEFAULT_THETA,
                shared_classifier=int(shared), norm_bias=0)


def load_legacy(path):
    """llama2.c's headerless .bin (version 0)."""
    size = os.path.getsize(path)
    if size < 28:
        raise ExportError(f"{path} is truncated: {size} bytes, shorter than the 28-byte "
                          f"llama2.c header")
    with open(path, "rb") as fh:
        vals = struct.unpack("<7i", fh.read(28))
    _plausible_dims(vals, path, "llama2.c legacy .bin")
    shared = vals[5] > 0
    cfg = _llama2c_cfg(vals, shared)
    d, h, L, nh, nkv, V, S = (cfg[k] for k in ("dim", "hidden_dim", "n_layers", "n_heads",
                                               "n_kv_heads", "vocab_size", "seq_len"))
    hs = cfg["head_size"]
    src = Source(f"llama2.c legacy .bin {path}", cfg)
    lay = SeqLayout(path, 28)
    f4 = np.dtype("<f4")

    def stacked(name, per_layer_shape):
        n = int(np.prod(per_layer_shape))
        off = lay.take(name, 4 * L * n)
        return off, n

    tok = lay.take("token_embedding_table", 4 * V * d)
    offs = {}
    offs["attn_norm"] = stacked("rms_att_weight", (d,))
    offs["wq"] = stacked("wq", (nh * hs, d))
    offs["wk"] = stacked("wk", (nkv * hs, d))
    offs["wv"] = stacked("wv", (nkv * hs, d))
    offs["wo"] = stacked("wo", (d, nh * hs))
    offs["ffn_norm"] = stacked("rms_ffn_weight", (d,))
    offs["w1"] = stacked("w1", (h, d))
    offs["w2"] = stacked("w2", (d, h))
    offs["w3"] = stacked("w3", (h, d))
    fin = lay.take("rms_final_weight", 4 * d)
    lay.take("freq_cis_real", 4 * (S * hs // 2))
    lay.take("freq_cis_imag", 4 * (S * hs // 2))
    cls = None if shared else lay.take("wcls", 4 * V * d)
    lay.check_end()
    shapes = dict(attn_norm=(d,), wq=(nh * hs, d), wk=(nkv * hs, d), wv=(nkv * hs, d),
                  wo=(d, nh * hs), ffn_norm=(d,), w1=(h, d), w2=(d, h), w3=(h, d))
    src.add("tok_embeddings", "token_embedding_table", (V, d), lambda: _mm(path, f4, tok, (V, d)))
    for key, (off, n) in offs.items():
        shp = shapes[key]
        for l in range(L):
            src.add(f"layers.{l}.{key}", f"{key} (layer {l})", shp,
                    lambda off=off, n=n, l=l, shp=shp: _mm(path, f4, off + 4 * n * l, shp))
    src.add("final_norm", "rms_final_weight", (d,), lambda: _mm(path, f4, fin, (d,)))
    if cls is not None:
        src.add("classifier", "wcls", (V, d), lambda: _mm(path, f4, cls, (V, d)))
    return src


def load_ak42(path):
    """llama2.c's versioned files: magic 'ak42', version 1 (fp32) or 2 (Q8_0)."""
    size = os.path.getsize(path)
    if size < 256:
        raise ExportError(f"{path} is truncated: {size} bytes, shorter than the 256-byte "
                          f"llama2.c v1/v2 header")
    with open(path, "rb") as fh:
        head = fh.read(256)
    magic, version = struct.unpack_from("<Ii", head, 0)
    vals = struct.unpack_from("<7i", head, 8)
    shared = head[36]
    if version not in (1, 2):
        raise ExportError(f"{path}: llama2.c file version {version} is not supported (only 1 and 2)")
    _plausible_dims(vals, path, f"llama2.c version {version}")
    if vals[5] < 0:
        raise ExportError(f"{path}: vocab_size {vals[5]} in the version {version} header must be "
                          f"positive (the shared flag says whether there is a classifier)")
    cfg = _llama2c_cfg(vals, shared)
    d, h, L, nh, nkv, V = (cfg[k] for k in ("dim", "hidden_dim", "n_layers", "n_heads",
                                            "n_kv_heads", "vocab_size"))
    hs = cfg["head_size"]
    src = Source(f"llama2.c version {version} file {path}", cfg)
    lay = SeqLayout(path, 256)
    f4 = np.dtype("<f4")
    shapes = dict(wq=(nh * hs, d), wk=(nkv * hs, d), wv=(nkv * hs, d), wo=(d, nh * hs),
                  w1=(h, d), w2=(d, h), w3=(h, d))
    an = lay.take("rms_att_weight", 4 * L * d)   # in the file: so L is bounded from here
    fn = lay.take("rms_ffn_weight", 4 * L * d)
    fin = lay.take("rms_final_weight", 4 * d)
    mats = [("tok_embeddings", "token_embedding_table", (V, d))]
    for key in ("wq", "wk", "wv", "wo", "w1", "w2", "w3"):
        for l in range(L):
            mats.append((f"layers.{l}.{key}", f"{key} (layer {l})", shapes[key]))
    if not shared:
        mats.append(("classifier", "wcls", (V, d)))
    for l in range(L):
        src.add(f"layers.{l}.attn_norm", f"rms_att_weight (layer {l})", (d,),
                lambda l=l: _mm(path, f4, an + 4 * d * l, (d,)))
        src.add(f"layers.{l}.ffn_norm", f"rms_ffn_weight (layer {l})", (d,),
                lambda l=l: _mm(path, f4, fn + 4 * d * l, (d,)))
    src.add("final_norm", "rms_final_weight", (d,), lambda: _mm(path, f4, fin, (d,)))
    if version == 1:
        for name, sname, shp in mats:
            off = lay.take(sname, 4 * shp[0] * shp[1])
            src.add(name, sname, shp, lambda off=off, shp=shp: _mm(path, f4, off, shp))
    else:
        gs = struct.unpack_from("<i", head, 37)[0]
        if gs <= 0:
            raise ExportError(f"{path}: group_size {gs} in the version 2 header must be > 0")
        for name, sname, shp in mats:
            n = shp[0] * shp[1]
            if n % gs:
                raise ExportError(f"{path}: tensor {sname} has {n} elements, not a multiple "
                                  f"of the group size {gs}")
            qo = lay.take(sname + " (int8 values)", n)
            so = lay.take(sname + " (scales)", 4 * (n // gs))

            def deq(qo=qo, so=so, n=n, shp=shp):
                q = _mm(path, np.int8, qo, (n // gs, gs))
                s = _mm(path, f4, so, (n // gs,))
                return (q.astype(np.float32) * s[:, None]).reshape(shp)
            src.add(name, sname, shp, deq)
        cfg["source_group_size"] = gs
    lay.check_end()
    return src


def read_llmw_header(path):
    size = os.path.getsize(path)
    if size < HEADER_SIZE:
        raise ExportError(f"{path} is truncated: {size} bytes, shorter than the 256-byte LLMW header")
    with open(path, "rb") as fh:
        head = fh.read(HEADER_SIZE)
    vals = dict(zip(HEADER_FIELDS, struct.unpack_from(HEADER_FMT, head, 0)))
    if vals["magic"] != MAGIC:
        raise ExportError(f"{path}: not an LLMW file (magic {vals['magic']!r})")
    if vals["version"] not in (1, 2):
        raise ExportError(f"{path}: LLMW version {vals['version']} is not supported (1 and 2 are)")
    if vals["header_size"] != HEADER_SIZE or vals["alignment"] != ALIGN:
        raise ExportError(f"{path}: header_size {vals['header_size']} / alignment "
                          f"{vals['alignment']} must be {HEADER_SIZE} / {ALIGN}")
    if vals["rope_layout"] != 0:
        raise ExportError(f"{path}: rope_layout {vals['rope_layout']} is not supported here (only 0)")
    if vals["version"] == 2:
        vals.update(zip(V2_FIELDS, struct.unpack_from(V2_FMT, head, 96)))
        if any(head[140:]):
            raise ExportError(f"{path}: reserved header bytes 140..255 are not zero")
        for k in ("rope_factor", "rope_low_freq_factor", "rope_high_freq_factor"):
            vals[k] = float(vals[k])
    else:
        vals.update(V2_DEFAULTS)
    vals["norm_eps"] = float(vals["norm_eps"])
    vals["rope_theta"] = float(vals["rope_theta"])
    return vals, size


def load_llmw(path):
    """An LLMW file as a Source (q8_0 / q4 / f16 matrices come back as float32). Version 2's
    directory must list the tensors the header implies, in file order, each inside the
    file and after the one before."""
    hdr, size = read_llmw_header(path)
    cfg = {k: v for k, v in hdr.items() if k not in ("magic", "tensor_count", "directory_offset")}
    try:
        validate_config(cfg)
    except ExportError as e:
        raise ExportError(f"{path}: {e}")
    wt, gs = cfg["weight_type"], cfg["group_size"]
    if hdr["version"] == 2:
        count = tensor_count(cfg)
        dir_off = hdr["directory_offset"]
        if hdr["tensor_count"] != count:
            raise ExportError(f"{path}: tensor_count {hdr['tensor_count']} in the header, the "
                              f"config implies {count}")
        if dir_off < HEADER_SIZE or dir_off + ENTRY_SIZE * count > size:
            raise ExportError(f"{path} is truncated or corrupt: the tensor directory at {dir_off} "
                              f"({count} entries) is not inside the {size}-byte file")
        with open(path, "rb") as fh:
            fh.seek(dir_off)
            raw = fh.read(ENTRY_SIZE * count)
        end = dir_off + ENTRY_SIZE * count
        entries = []
        for i, (name, shape, kind) in enumerate(tensor_plan(cfg)):
            k, l, t, g, rows, cols, off, s_off = struct.unpack_from(ENTRY_FMT, raw, i * ENTRY_SIZE)
            want_k, want_l = split_name(name)
            want_t = WT_F32 if kind == "vec" else matrix_type(cfg, shape[1])
            want = (KIND_IDS[want_k], want_l, want_t, gs if want_t == WT_Q8_0 else 0,
                    *((1, shape[0]) if kind == "vec" else shape))
            if (k, l, t, g, rows, cols) != want:
                raise ExportError(f"{path}: directory entry {i} is (kind {k}, layer {l}, type {t}, "
                                  f"group {g}, {rows} x {cols}), expected {name} {want}")
            _, rel, total = matrix_bytes(rows, cols, want_t, gs)
            if off % ALIGN or off < end or (rel is None and s_off) or \
                    (rel is not None and (s_off % ALIGN or s_off < off + rows * cols)):
                raise ExportError(f"{path}: tensor {name} has offsets {off} / {s_off}: not "
                                  f"64-aligned, overlapping what comes before, or scales "
                                  f"{'missing' if rel is not None else 'where ' + DTYPE_NAMES[want_t] + ' has none'}")
            end = off + total if rel is None else s_off + 4 * rows * n_groups(cols, gs)
            if end > size:
                raise ExportError(f"{path} is truncated: tensor {name} ends at {end}, the file "
                                  f"has {size} bytes")
            entries.append((name, shape, kind, off, None if rel is None else s_off))
        if end != size or hdr["file_size"] != size:
            raise ExportError(f"{path}: {size} bytes, the header says {hdr['file_size']} and the "
                              f"last tensor ends at {end}")
    else:
        file_size = file_size_of(cfg)
        if hdr["file_size"] != file_size:
            raise ExportError(f"{path}: header file_size {hdr['file_size']} does not match the "
                              f"{file_size} bytes its fields imply")
        if size != file_size:
            entries, _ = layout(cfg)   # the size is real, so the layer count is bounded
            last = next((e[0] for e in entries if (e[4] or e[3]) >= size), entries[-1][0])
            raise ExportError(f"{path} is {'truncated' if size < file_size else 'too long'}: "
                              f"{size} bytes, the header says {file_size} (tensor {last})")
        entries, _ = layout(cfg)
    src = Source(f"LLMW file {path}", cfg)
    for name, shape, kind, off, s_off in entries:
        if kind == "vec" or wt == WT_F32:
            fn = lambda off=off, shape=shape: _mm(path, np.dtype("<f4"), off, shape)
        elif wt == WT_F16:
            fn = lambda off=off, shape=shape: _mm(path, np.dtype("<f2"), off, shape).astype(np.float32)
        elif wt in BLOCK_TYPES:
            def fn(off=off, shape=shape, mt=matrix_type(cfg, shape[1])):
                nbytes = matrix_bytes(shape[0], shape[1], mt, gs)[2]
                raw = _mm(path, np.uint8, off, (nbytes,))
                return QUANTIZERS[mt][1](np.asarray(raw).tobytes(), *shape)
        else:
            def fn(off=off, s_off=s_off, shape=shape):
                q = _mm(path, np.int8, off, shape)
                s = _mm(path, np.dtype("<f4"), s_off, (shape[0], n_groups(shape[1], gs)))
                return dequantize_q8_0(q, s, gs)
        src.add(name, name, shape, fn)
    return src


# ---------------------------------------------------------------- safetensors / HF

ST_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}


def _is_count(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


class SafetensorsFile:
    """The header of a safetensors file, checked against the file: every entry has a
    string dtype, a shape of non-negative integers and data_offsets [begin, end] inside
    the data, and no two tensors' bytes overlap. validate() checks a tensor's dtype and
    span before it is read."""

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        if size < 8:
            raise ExportError(f"{path} is truncated: {size} bytes, no safetensors header")
        with open(path, "rb") as fh:
            (hlen,) = struct.unpack("<Q", fh.read(8))
            if hlen > size - 8:
                raise ExportError(f"{path} is truncated: the safetensors header needs "
                                  f"{8 + hlen} bytes, the file has {size}")
            meta = parse_json(fh.read(hlen), f"{path}: safetensors header")
        if not isinstance(meta, dict):
            raise ExportError(f"{path}: bad safetensors header (a JSON {type(meta).__name__}, "
                              f"not an object)")
        self.base = 8 + hlen
        self.tensors = {}
        for name, info in meta.items():
            if name != "__metadata__":
                self.tensors[name] = self._entry(name, info, size - self.base)
        self._check_overlaps()

    def _entry(self, name, info, data_size):
        """(dtype, shape, begin, end) of one header entry, or ExportError."""
        path = self.path
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
            raise ExportError(f"{path}: bad safetensors entry for tensor {name} (want an object "
                              f"with dtype, shape and data_offsets, found {info!r:.80})")
        dtype, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str):
            raise ExportError(f"{path}: tensor {name} has dtype {dtype!r}, not a string")
        if not isinstance(shape, list) or not all(_is_count(x) for x in shape):
            raise ExportError(f"{path}: tensor {name} has shape {shape!r:.80}, not a list of "
                              f"non-negative integers")
        if not (isinstance(offs, list) and len(offs) == 2 and all(_is_count(x) for x in offs)
                and offs[0] <= offs[1]):
            raise ExportError(f"{path}: tensor {name} has data_offsets {offs!r:.80}, not "
                              f"[begin, end] with 0 <= begin <= end")
        if offs[1] > data_size:
            raise ExportError(f"{path} is truncated: tensor {name} needs bytes up to "
                              f"{self.base + offs[1]}, the file has {self.base + data_size}")
        return dtype, tuple(shape), offs[0], offs[1]

    def _check_overlaps(self):
        spans = sorted((b, e, n) for n, (_, _, b, e) in self.tensors.items() if e > b)
        for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
            if b1 < e0:
                raise ExportError(f"{self.path}: tensors {n0} (bytes [{b0}, {e0})) and {n1} "
                                  f"(bytes [{b1}, {e1})) overlap")

    def validate(self, name):
        dtype, shape, b, e = self.tensors[name]
        if dtype not in ST_DTYPES:
            raise ExportError(f"tensor {name} in {self.path} has dtype {dtype}; "
                              f"only F32, F16 and BF16 are supported")
        dt = ST_DTYPES[dtype]
        n = math.prod(shape)   # exact: np.prod would wrap around for hostile shapes
        if e - b != n * dt.itemsize:
            raise ExportError(f"tensor {name} in {self.path}: data_offsets span {e - b} bytes, "
                              f"{dtype} {list(shape)} needs {n * dt.itemsize}")
        return dt, n

    def load(self, name):
        dtype, shape, b, e = self.tensors[name]
        dt, n = self.validate(name)
        a = _mm(self.path, dt, self.base + b, shape)
        if dtype == "BF16":
            return (np.asarray(a).astype(np.uint32) << 16).view(np.float32)
        return np.asarray(a, dtype=np.float32)


# the classes read, and their model_type: Qwen2 adds q/k/v biases, Qwen3 per-head q/k norms
class TorchStateFile:
    """A torch-saved HF state dict (pytorch_model.bin or one of its shards), with
    SafetensorsFile's interface: .tensors {name: (dtype, shape)}, validate, load. The
    pickle is checked before torch.load runs it (see _check_torch_pickles)."""

    def __init__(self, path):
        torch = _torch()
        self.path = path
        self.sd = _state_dict(_torch_load(path), path)
        self.tensors = {}
        for name, t in self.sd.items():
            if not isinstance(t, torch.Tensor):
                raise ExportError(f"{path}: {name} is not a tensor")
            self.tensors[name] = (str(t.dtype), tuple(t.shape))

    def validate(self, name):
        t = self.sd[name]
        if not t.is_floating_point():
            raise ExportError(f"tensor {name} in {self.path} has dtype {t.dtype}; "
                              f"only floating-point tensors are supported")

    def load(self, name):
        self.validate(name)
        torch = _torch()
        return self.sd[name].detach().to(torch.float32).cpu().numpy()


HF_ARCHS = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}


def hf_rope_scaling(conf, key):
    """config.json's rope_scaling (or rope_parameters) as the header's rope fields:
    none/default, linear (factor) or llama3 (factor, low_freq_factor, high_freq_factor,
    original_max_position_embeddings); any other rope_type is refused, named."""
    rs = conf.get(key)
    out = dict(V2_DEFAULTS)
    out = {k: v for k, v in out.items() if k.startswith("rope_")}
    if rs in (None, {}):
        return out
    where = f"config.json: {key}"
    if not isinstance(rs, dict):
        raise ExportError(f"{where} = {rs!r} must be an object")
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return out
    if kind not in ("linear", "llama3"):
        raise ExportError(f"{where}: rope_type {kind!r} is not supported (default, linear, llama3)")
    out["rope_scaling"] = ROPE_SCALING[kind]
    out["rope_factor"] = _cfg_float(rs, "factor", where, None, low_ok=False)
    if kind == "llama3":
        out["rope_low_freq_factor"] = _cfg_float(rs, "low_freq_factor", where, None, low_ok=False)
        out["rope_high_freq_factor"] = _cfg_float(rs, "high_freq_factor", where, None, low_ok=False)
        if not out["rope_high_freq_factor"] > out["rope_low_freq_factor"]:
            raise ExportError(f"{where}: high_freq_factor must be above low_freq_factor")
        out["rope_orig_ctx"] = _cfg_int(rs, "original_max_position_embeddings", where)
    return out


def _no_duplicate_keys(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError(f"duplicate key {k!r}")
        obj[k] = v
    return obj


def parse_json(data, where):
    """JSON text or bytes -> object; ExportError naming `where` for bad UTF-8, bad
    syntax, duplicate keys or nesting too deep to parse."""
    try:
        return json.loads(data, object_pairs_hook=_no_duplicate_keys)
    except (ValueError, RecursionError) as e:   # UnicodeDecodeError is a ValueError
        what = "nested too deeply" if isinstance(e, RecursionError) else first_line(e)
        raise ExportError(f"{where}: not valid JSON ({what})")


def _json(path):
    """A JSON file that must hold an object (dict)."""
    with open(path, "rb") as fh:
        obj = parse_json(fh.read(), path)
    if not isinstance(obj, dict):
        raise ExportError(f"{path}: expected a JSON object, found {type(obj).__name__}")
    return obj


def hf_names(L):
    m = {"tok_embeddings": "model.embed_tokens.weight", "final_norm": "model.norm.weight",
         "final_norm_bias": "model.norm.bias", "classifier": "lm_head.weight"}
    for l in range(L):
        p = f"model.layers.{l}."
        m.update({f"layers.{l}.attn_norm": p + "input_layernorm.weight",
                  f"layers.{l}.attn_norm_bias": p + "input_layernorm.bias",
                  f"layers.{l}.wq": p + "self_attn.q_proj.weight",
                  f"layers.{l}.wk": p + "self_attn.k_proj.weight",
                  f"layers.{l}.wv": p + "self_attn.v_proj.weight",
                  f"layers.{l}.wo": p + "self_attn.o_proj.weight",
                  f"layers.{l}.ffn_norm": p + "post_attention_layernorm.weight",
                  f"layers.{l}.ffn_norm_bias": p + "post_attention_layernorm.bias",
                  f"layers.{l}.w1": p + "mlp.gate_proj.weight",
                  f"layers.{l}.w2": p + "mlp.down_proj.weight",
                  f"layers.{l}.w3": p + "mlp.up_proj.weight",
                  f"layers.{l}.q_bias": p + "self_attn.q_proj.bias",
                  f"layers.{l}.k_bias": p + "self_attn.k_proj.bias",
                  f"layers.{l}.v_bias": p + "self_attn.v_proj.bias",
                  f"layers.{l}.q_norm": p + "self_attn.q_norm.weight",
                  f"layers.{l}.k_norm": p + "self_attn.k_norm.weight"})
    return m


def unpermute_rotary(w, n_heads, head_size):
    """HF half-split rotary row order -> interleaved pairs (inverse of HF's permute).

    HF's convert script maps Meta row 2i+j of a head to row j*hs/2+i
    (w.view(n, hs//2, 2, dim).transpose(1, 2)); this undoes it:
    w.view(n, 2, hs//2, dim).transpose(1, 2)."""
    rows, cols = w.shape
    return np.ascontiguousarray(
        w.reshape(n_heads, 2, head_size // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols))


def permute_rotary(w, n_heads, head_size):
    """Interleaved -> HF half-split (what HF's convert_llama_weights_to_hf does)."""
    rows, cols = w.shape
    return np.ascontiguousarray(
        w.reshape(n_heads, head_size // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols))


def _cfg_int(conf, key, where, default=None):
    """conf[key] (default when absent or null) as a positive 32-bit integer."""
    v = conf.get(key)
    v = default if v is None else v
    if v is None:
        raise ExportError(f"{where}: missing field {key}")
    if not isinstance(v, int) or isinstance(v, bool) or not 0 < v <= INT32_MAX:
        raise ExportError(f"{where}: field {key} = {v!r} must be a positive 32-bit integer")
    return v


def _cfg_float(conf, key, where, default, low=0.0, low_ok=True):
    """conf[key] (default when absent or null) as a finite float >= low (> low
    unless low_ok)."""
    v = conf.get(key)
    v = default if v is None else v
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    try:
        f = float(v) if ok else math.nan
    except OverflowError:   # an integer beyond the float range
        f = math.inf
    if not (math.isfinite(f) and (f >= low if low_ok else f > low)):
        raise ExportError(f"{where}: field {key} = {v!r} must be a finite number "
                          f"{'>=' if low_ok else '>'} {low:g}")
    return f


def _cfg_bool(conf, key, where, default=False):
    v = conf.get(key, default)
    if not isinstance(v, bool):
        raise ExportError(f"{where}: field {key} = {v!r} must be true or false")
    return v


def _cfg_type(conf, key, where, types, what):
    """conf[key] (None when absent) that must be None or of `types`."""
    v = conf.get(key)
    if v is not None and not isinstance(v, types):
        raise ExportError(f"{where}: field {key} = {v!r} must be {what}")
    return v


def _check_layer_count(n_layers, n_tensors, where, key):
    """Every layer has several tensors: a count beyond the tensors there are is bad input
    (and would make the per-layer name tables huge)."""
    if n_layers > n_tensors:
        raise ExportError(f"{where}: field {key} = {n_layers}, but the weights hold only "
                          f"{n_tensors} tensors")


def load_hf(folder):
    cpath = os.path.join(folder, "config.json")
    conf = _json(cpath)
    where = "config.json"
    arch = _cfg_type(conf, "architectures", where, list, "a list of names")
    known = [x for x in (arch or []) if isinstance(x, str) and x in HF_ARCHS]
    if arch is not None and not known:
        raise ExportError(f"config.json: architectures {arch} is not supported "
                          f"(only {', '.join(HF_ARCHS)})")
    family = HF_ARCHS[known[0]] if known else conf.get("model_type", "llama")
    mt = conf.get("model_type", family)
    if mt != family:
        raise ExportError(f"config.json: model_type {mt!r} is not supported with "
                          f"architectures {arch} (expected {family!r})")
    act = conf.get("hidden_act", "silu")
    if act != "silu":
        raise ExportError(f"config.json: hidden_act {act!r} is not supported (only silu)")
    # Llama's attention_bias puts a bias on o_proj too, Qwen3's likewise; Qwen2 has q/k/v
    # biases by construction and no such field
    for k in ("attention_bias", "mlp_bias"):
        if _cfg_bool(conf, k, where):
            raise ExportError(f"config.json: {k} = true is not supported (no o_proj/MLP biases)")
    if _cfg_bool(conf, "use_sliding_window", where):
        raise ExportError("config.json: use_sliding_window = true is not supported (full attention only)")
    lt = _cfg_type(conf, "layer_types", where, list, "a list of names")
    if lt and any(x != "full_attention" for x in lt):
        raise ExportError(f"config.json: layer_types {sorted(set(map(str, lt)))} is not supported "
                          f"(full_attention only)")
    prf = _cfg_float(conf, "partial_rotary_factor", where, 1.0, low_ok=False)
    if prf != 1.0:
        raise ExportError(f"config.json: partial_rotary_factor {prf:g} is not supported (only 1)")
    for k in ("attn_logit_softcapping", "final_logit_softcapping"):
        if conf.get(k) is not None:
            raise ExportError(f"config.json: {k} is not supported")
    d = _cfg_int(conf, "hidden_size", where)
    h = _cfg_int(conf, "intermediate_size", where)
    L = _cfg_int(conf, "num_hidden_layers", where)
    nh = _cfg_int(conf, "num_attention_heads", where)
    nkv = _cfg_int(conf, "num_key_value_heads", where, nh)
    V = _cfg_int(conf, "vocab_size", where)
    S = _cfg_int(conf, "max_position_embeddings", where, 2048)
    if conf.get("head_dim") is None and d % nh:
        raise ExportError(f"config.json: hidden_size {d} is not a multiple of num_attention_heads {nh}")
    hs = _cfg_int(conf, "head_dim", where, d // nh)
    if hs % 2:
        raise ExportError(f"config.json: head_dim {hs} must be even (RoPE pairs)")
    if nh % nkv:
        raise ExportError(f"config.json: num_key_value_heads {nkv} does not divide "
                          f"num_attention_heads {nh}")
    eps = _cfg_float(conf, "rms_norm_eps", where, 1e-6)
    theta = _cfg_float(conf, "rope_theta", where, DEFAULT_THETA, low_ok=False)
    rope = hf_rope_scaling(conf, "rope_scaling")
    rp = _cfg_type(conf, "rope_parameters", where, dict, "an object")  # newer transformers
    if rp:
        theta = _cfg_float(rp, "rope_theta", "config.json: rope_parameters", theta, low_ok=False)
        if rope["rope_scaling"] == 0:
            rope = hf_rope_scaling(conf, "rope_parameters")
    tied = _cfg_bool(conf, "tie_word_embeddings", where)

    # the weights: safetensors (one file or shards), else torch's pytorch_model.bin
    single = os.path.join(folder, "model.safetensors")
    index = os.path.join(folder, "model.safetensors.index.json")
    opener, kind = SafetensorsFile, "safetensors"
    if not os.path.exists(single) and not os.path.exists(index):
        single = os.path.join(folder, "pytorch_model.bin")
        index = os.path.join(folder, "pytorch_model.bin.index.json")
        opener, kind = TorchStateFile, "pytorch_model.bin"
    files = {}
    where_is = {}
    if os.path.exists(index):
        wm = _json(index).get("weight_map")
        if not isinstance(wm, dict):
            raise ExportError(f"{index}: no weight_map object")
        for name, fname in wm.items():
            if not isinstance(fname, str) or fname in ("", ".", "..") \
                    or os.path.basename(fname) != fname:
                raise ExportError(f"{index}: shard {fname!r} for tensor {name} is not a file "
                                  f"name in {folder}")
            p = os.path.join(folder, fname)
            if p not in files:
                if not os.path.isfile(p):
                    raise ExportError(f"{index}: shard {fname} (for tensor {name}) is missing")
                files[p] = opener(p)
            if name not in files[p].tensors:
                raise ExportError(f"{index}: tensor {name} is not in shard {fname}")
            where_is[name] = files[p]
        wdesc = f"{len(files)} {kind} shard(s) in {folder}"
    elif os.path.exists(single):
        sf = opener(single)
        where_is = {n: sf for n in sf.tensors}
        wdesc = f"{single}"
    else:
        raise ExportError(f"{folder}: no model.safetensors, model.safetensors.index.json, "
                          f"pytorch_model.bin or pytorch_model.bin.index.json")
    _check_layer_count(L, len(where_is), where, "num_hidden_layers")
    qkv_bias, qk_norm = family == "qwen2", family == "qwen3"
    allowed_bias = (".self_attn.q_proj.bias", ".self_attn.k_proj.bias", ".self_attn.v_proj.bias")
    for name in where_is:
        if name.endswith(".bias") and ("self_attn" in name or "mlp" in name) \
                and not (qkv_bias and name.endswith(allowed_bias)):
            raise ExportError(f"tensor {name}: linear biases are not supported here "
                              f"(only Qwen2's q/k/v biases)")
    has_bias = "model.layers.0.input_layernorm.bias" in where_is
    if tied and "lm_head.weight" in where_is:
        log("note: tie_word_embeddings is true; lm_head.weight is ignored")
    cfg = dict(dim=d, hidden_dim=h, n_layers=L, n_heads=nh, n_kv_heads=nkv, vocab_size=V,
               seq_len=S, head_size=hs, norm_eps=float(eps), rope_theta=float(theta),
               shared_classifier=int(tied), norm_bias=int(has_bias),
               qkv_bias=int(qkv_bias), qk_norm=int(qk_norm), **rope)
    src = Source(f"Hugging Face {known[0] if known else family} model {folder} ({wdesc})", cfg)
    src.config_name = "config.json"
    names = hf_names(L)
    # HF keeps q/k rows (and so q/k biases and the q/k norm weights within a head) in
    # rotate_half order: each goes to the engine's interleaved pairs
    heads = {"wq": nh, "wk": nkv, "q_bias": nh, "k_bias": nkv, "q_norm": 1, "k_norm": 1}
    for canon, sname in names.items():
        if sname not in where_is:
            continue
        sf = where_is[sname]
        sf.validate(sname)
        shape = sf.tensors[sname][1]
        loader = lambda sf=sf, sname=sname: sf.load(sname)
        n = heads.get(canon.rsplit(".", 1)[-1])
        if n and len(shape) == 2:
            loader = lambda sf=sf, sname=sname, n=n: unpermute_rotary(sf.load(sname), n, hs)
        elif n and len(shape) == 1 and shape[0] == n * hs:
            loader = lambda sf=sf, sname=sname, n=n: \
                unpermute_rotary(sf.load(sname).reshape(-1, 1), n, hs).reshape(-1)
        src.add(canon, sname, shape, loader)
    src.expected_name = lambda n: names.get(n, n)
    return src


# ---------------------------------------------------------------- torch inputs

def llama2c_names(L):
    m = {"tok_embeddings": "tok_embeddings.weight", "final_norm": "norm.weight",
         "final_norm_bias": "norm.bias", "classifier": "output.weight"}
    for l in range(L):
        p = f"layers.{l}."
        m.update({f"layers.{l}.attn_norm": p + "attention_norm.weight",
                  f"layers.{l}.attn_norm_bias": p + "attention_norm.bias",
                  f"layers.{l}.ffn_norm": p + "ffn_norm.weight",
                  f"layers.{l}.ffn_norm_bias": p + "ffn_norm.bias"})
        for k in ("wq", "wk", "wv", "wo"):
            m[f"layers.{l}.{k}"] = p + f"attention.{k}.weight"
        for k in ("w1", "w2", "w3"):
            m[f"layers.{l}.{k}"] = p + f"feed_forward.{k}.weight"
    return m


def _torch():
    try:
        import torch
    except ImportError:
        raise ExportError("torch is required to read .pt/.pth checkpoints (try /usr/bin/python3)")
    return torch


TORCH_PICKLE_GLOBALS = {("collections", "OrderedDict"), ("torch", "Size"),
                        ("torch._utils", "_rebuild_tensor"), ("torch._utils", "_rebuild_tensor_v2"),
                        ("torch._utils", "_rebuild_parameter"),
                        ("torch._utils", "_rebuild_parameter_with_state")}
TORCH_DTYPE_NAMES = {"float32", "float", "float16", "half", "bfloat16", "float64", "double",
                     "int8", "uint8", "int16", "int32", "int64", "bool"}
PICKLE_IMPORTS = ("GLOBAL", "STACK_GLOBAL", "INST", "EXT1", "EXT2", "EXT4")


def _allowed_pickle_global(module, name):
    """Tensors' rebuild functions, storage types, dtypes, OrderedDict: all a
    checkpoint's pickle needs (plain dicts, lists, numbers and strings need none)."""
    return ((module, name) in TORCH_PICKLE_GLOBALS
            or (module == "torch" and (name.endswith("Storage") or name in TORCH_DTYPE_NAMES)))


def _check_torch_pickles(path):
    """Unpickling calls whatever the pickle names, so before torch.load sees the file,
    read (without running) every pickle in the zip and refuse any that imports more
    than _allowed_pickle_global. (torch's weights_only=True cannot be used instead:
    torch 1.13's refuses the floats in every llama2.c model_args.)"""
    import pickletools
    import zipfile
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.filename.endswith(".pkl"):
                    continue
                if info.compress_type != zipfile.ZIP_STORED:
                    raise ExportError(f"{path}: {info.filename} is compressed; torch.save "
                                      f"stores its records uncompressed")
                for op, arg, pos in pickletools.genops(z.read(info)):
                    if op.name not in PICKLE_IMPORTS:
                        continue
                    module, _, name = (arg or "").partition(" ")
                    if op.name != "GLOBAL" or not _allowed_pickle_global(module, name):
                        raise ExportError(f"{path}: {info.filename} would call "
                                          f"{arg or op.name} (byte {pos}); a checkpoint may "
                                          f"hold only tensors and plain data")
    except (zipfile.BadZipFile, ValueError, EOFError, OSError, struct.error) as e:
        raise ExportError(f"{path}: not a torch zip checkpoint ({type(e).__name__}: "
                          f"{first_line(e)})")


def _torch_load(path):
    """torch.load of untrusted data: see _check_torch_pickles."""
    torch = _torch()
    _check_torch_pickles(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # torch raises many kinds for a bad file
        raise ExportError(f"{path}: cannot be read by torch.load ({type(e).__name__}: "
                          f"{first_line(e)})")


def _state_source(desc, cfg, sd, config_name):
    """A Source over a torch state dict with llama2.c/Meta names."""
    torch = _torch()
    L = cfg["n_layers"]
    _check_layer_count(L, len(sd), config_name, "n_layers")
    if cfg["n_heads"] % cfg["n_kv_heads"]:
        raise ExportError(f"{config_name}: n_kv_heads {cfg['n_kv_heads']} does not divide "
                          f"n_heads {cfg['n_heads']}")
    names = llama2c_names(L)
    for k in sd:
        if k.endswith(".bias") and (".attention.w" in k or ".feed_forward.w" in k):
            raise ExportError(f"tensor {k}: linear biases are not supported")
    cfg["norm_bias"] = int("layers.0.attention_norm.bias" in sd)
    src = Source(desc, cfg)
    src.config_name = config_name
    for canon, sname in names.items():
        t = sd.get(sname)
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise ExportError(f"{sname} in {desc} is not a tensor")
        if not t.is_floating_point():
            raise ExportError(f"tensor {sname} in {desc} has dtype {t.dtype}; "
                              f"only floating-point tensors are supported")
        src.add(canon, sname, tuple(t.shape),
                lambda t=t: t.detach().to(torch.float32).cpu().numpy())
    src.expected_name = lambda n: names.get(n, n)
    return src


def _hidden_from_rule(dim, multiple_of, ffn_dim_multiplier=None):
    hidden = 4 * dim
    hidden = int(2 * hidden / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def _hidden_dim(conf, where, dim):
    """hidden_dim, else llama's rule from multiple_of (and ffn_dim_multiplier)."""
    if conf.get("hidden_dim") is not None:
        return _cfg_int(conf, "hidden_dim", where)
    mult = _cfg_float(conf, "ffn_dim_multiplier", where, 1.0, low_ok=False)
    h = _hidden_from_rule(dim, _cfg_int(conf, "multiple_of", where, 256),
                          None if conf.get("ffn_dim_multiplier") is None else mult)
    if not 0 < h <= INT32_MAX:
        raise ExportError(f"{where}: the hidden size from multiple_of / ffn_dim_multiplier "
                          f"is {h}, out of range")
    return h


def _state_dict(obj, where):
    """obj must be a {str: value} mapping (a torch state dict)."""
    if not isinstance(obj, dict) or not all(isinstance(k, str) for k in obj):
        raise ExportError(f"{where}: expected a state dict (names to tensors), "
                          f"found {type(obj).__name__}")
    return obj


def load_pt(path, ckpt=None):
    """llama2.c training checkpoint: {'model_args': ..., 'model': state_dict}."""
    if ckpt is None:
        ckpt = _torch_load(path)
    if not (isinstance(ckpt, dict) and "model_args" in ckpt and "model" in ckpt):
        raise ExportError(f"{path}: not a llama2.c checkpoint (needs 'model_args' and 'model')")
    a = ckpt["model_args"]
    if not isinstance(a, dict):
        raise ExportError(f"{path}: model_args is a {type(a).__name__}, not a dict")
    sd = {}
    for k, v in _state_dict(ckpt["model"], f"{path}: model").items():
        sd[k[len("_orig_mod."):] if k.startswith("_orig_mod.") else k] = v
    where = "model_args"
    d = _cfg_int(a, "dim", where)
    L = _cfg_int(a, "n_layers", where)
    nh = _cfg_int(a, "n_heads", where)
    nkv = _cfg_int(a, "n_kv_heads", where, nh)
    V = _cfg_int(a, "vocab_size", where)
    S = _cfg_int(a, "max_seq_len", where, 2048)
    h = _hidden_dim(a, where, d)
    if d % nh:
        raise ExportError(f"model_args: dim {d} is not a multiple of n_heads {nh}")
    cfg = dict(dim=d, hidden_dim=h, n_layers=L, n_heads=nh, n_kv_heads=nkv,
               vocab_size=V, seq_len=S, head_size=d // nh,
               norm_eps=_cfg_float(a, "norm_eps", where, DEFAULT_EPS),
               rope_theta=_cfg_float(a, "rope_theta", where, DEFAULT_THETA, low_ok=False),
               shared_classifier=0)
    src = _state_source(f"llama2.c checkpoint {path}", cfg, sd, "model_args")
    torch = _torch()
    out = sd.get("output.weight")
    emb = sd.get("tok_embeddings.weight")
    if out is None or (emb is not None and out.shape == emb.shape and out.dtype == emb.dtype
                       and torch.equal(out, emb)):
        cfg["shared_classifier"] = 1
        src.entries.pop("classifier", None)
    return src


def _concat_shards(models, shards):
    """One state dict from Meta's model-parallel shards: norms (1-D) are replicated,
    matrices split along rows, or along columns for tok_embeddings, wo and w2."""
    torch = _torch()
    sd = {}
    for name in models[0]:
        ts = [m.get(name) for m in models]
        if any(t is None for t in ts):
            raise ExportError(f"tensor {name} is missing from some of the {len(models)} shards")
        bad = next((s for s, t in zip(shards, ts) if not isinstance(t, torch.Tensor)), None)
        if bad is not None:
            raise ExportError(f"{name} in {bad} is not a tensor")
        if ts[0].dim() == 1:
            sd[name] = ts[0]
            continue
        axis1 = (name.startswith("tok_embeddings.") or name.endswith(".attention.wo.weight")
                 or name.endswith(".feed_forward.w2.weight"))
        try:
            sd[name] = torch.cat(ts, dim=1 if axis1 else 0)
        except RuntimeError:
            raise ExportError(f"tensor {name}: the shards' pieces {[list(t.shape) for t in ts]} "
                              f"do not concatenate along dim {1 if axis1 else 0}")
    return sd


def load_meta(folder):
    """Meta's consolidated.*.pth + params.json."""
    ppath = os.path.join(folder, "params.json")
    p = _json(ppath)
    where = "params.json"
    if _cfg_bool(p, "use_scaled_rope", where):
        raise ExportError("params.json: use_scaled_rope = true (Llama 3.1 RoPE scaling) is not supported")
    d = _cfg_int(p, "dim", where)
    L = _cfg_int(p, "n_layers", where)
    nh = _cfg_int(p, "n_heads", where)
    nkv = _cfg_int(p, "n_kv_heads", where, nh)
    if d % nh:
        raise ExportError(f"params.json: dim {d} is not a multiple of n_heads {nh}")
    V = p.get("vocab_size", -1)
    V = None if V in (None, -1) else _cfg_int(p, "vocab_size", where)
    S = _cfg_int(p, "max_seq_len", where, 2048)
    eps = _cfg_float(p, "norm_eps", where, DEFAULT_EPS)
    theta = _cfg_float(p, "rope_theta", where, DEFAULT_THETA, low_ok=False)
    shards = sorted(glob.glob(os.path.join(folder, "consolidated.*.pth")))
    if not shards:
        raise ExportError(f"{folder}: no consolidated.*.pth next to params.json")
    log(f"reading {len(shards)} shard(s) with torch")
    models = [_state_dict(_torch_load(s), s) for s in shards]
    sd = models[0] if len(models) == 1 else _concat_shards(models, shards)
    del models
    emb = sd.get("tok_embeddings.weight")
    if V is None:
        if emb is None:
            raise ExportError("missing tensor tok_embeddings.weight (needed for vocab_size -1)")
        V = int(emb.shape[0])
    w1 = sd.get("layers.0.feed_forward.w1.weight")
    h = int(w1.shape[0]) if w1 is not None else _hidden_dim(p, where, d)
    cfg = dict(dim=d, hidden_dim=h, n_layers=L, n_heads=nh, n_kv_heads=nkv, vocab_size=V,
               seq_len=S, head_size=d // nh, norm_eps=eps, rope_theta=theta, shared_classifier=0)
    return _state_source(f"Meta checkpoint {folder} ({len(shards)} shard(s))", cfg, sd, "params.json")


# ---------------------------------------------------------------- detection

def detect(path):
    """A Source for any supported input; logs what was detected."""
    if not os.path.exists(path):
        raise ExportError(f"input {path} does not exist")
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, "config.json")):
            return load_hf(path)
        if os.path.exists(os.path.join(path, "params.json")):
            return load_meta(path)
        raise ExportError(f"{path}: a folder without config.json (Hugging Face) or "
                          f"params.json (Meta)")
    base = os.path.basename(path)
    folder = os.path.dirname(os.path.abspath(path))
    if base == "config.json" or base.endswith(".safetensors") or base == "model.safetensors.index.json":
        if not os.path.exists(os.path.join(folder, "config.json")):
            raise ExportError(f"{path}: no config.json beside it (needed for a Hugging Face model)")
        return load_hf(folder)
    if base == "params.json":
        return load_meta(folder)
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head[:4] == MAGIC:
        return load_llmw(path)
    if len(head) >= 4 and struct.unpack("<I", head[:4])[0] == 0x616b3432:
        return load_ak42(path)
    if head[:4] == b"PK\x03\x04" or head[:1] == b"\x80" or base.endswith((".pt", ".pth")):
        if base.startswith("consolidated.") and os.path.exists(os.path.join(folder, "params.json")):
            return load_meta(folder)
        ckpt = _torch_load(path)
        if isinstance(ckpt, dict) and "model_args" in ckpt:
            return load_pt(path, ckpt)
        if os.path.exists(os.path.join(folder, "params.json")):
            del ckpt
            return load_meta(folder)
        raise ExportError(f"{path}: a torch file that is neither a llama2.c checkpoint "
                          f"(model_args + model) nor a Meta shard (no params.json beside it)")
    return load_legacy(path)


def describe(cfg):
    return (f"dim {cfg['dim']}, hidden {cfg['hidden_dim']}, {cfg['n_layers']} layers, "
            f"{cfg['n_heads']} heads, {cfg['n_kv_heads']} kv heads, head size {cfg['head_size']}, "
            f"vocab {cfg['vocab_size']}, seq_len {cfg['seq_len']}, "
            f"{'shared' if cfg['shared_classifier'] else 'separate'} classifier"
            + (", norm biases" if cfg.get("norm_bias") else "")
            + (", q/k/v biases" if cfg.get("qkv_bias") else "")
            + (", q/k norms" if cfg.get("qk_norm") else "")
            + (", output norms" if cfg.get("out_norm") else "")
            + (f", rope theta {cfg['rope_theta']:g}" if cfg.get("rope_theta", DEFAULT_THETA) != DEFAULT_THETA else "")
            + (f", {ROPE_SCALING_NAMES[cfg['rope_scaling']]} rope scaling x{cfg['rope_factor']:g}"
               if cfg.get("rope_scaling") else ""))


def read_checkpoint(path):
    """(config dict, {name: float32 array}) of any input (LLMW, llama2.c, HF, .pt, Meta).

    config has the LLMW header fields (norm_type 0 rms / 1 layer, norm_pos 0 pre / 1 post /
    2 peri / 3 out,
    final_norm, norm_eps, rope_theta, shared_classifier, weight_type, group_size,
    norm_bias, ...) plus 'format'. Matrices are dequantized; rotary weights are in the
    interleaved layout. 'classifier' is present only when not shared_classifier."""
    src = detect(path)
    cfg = dict(src.cfg)
    fmt = ("llmw" if src.desc.startswith("LLMW") else
           "legacy" if src.desc.startswith("llama2.c legacy") else
           "ak42" if src.desc.startswith("llama2.c version") else
           "hf" if src.desc.startswith("Hugging") else
           "pt" if src.desc.startswith("llama2.c checkpoint") else "meta")
    defaults = dict(norm_type=1 if cfg.get("norm_bias") else 0, norm_pos=0, final_norm=1,
                    rope_layout=0, weight_type=WT_F32, group_size=0, **V2_DEFAULTS)
    for k, v in defaults.items():
        cfg.setdefault(k, v)
    cfg["format"] = fmt
    return cfg, src.tensors()


# ----------------------------------------------------------------------------
# random checkpoints

def random_source(a):
    d, h, L, nh, nkv, V = a.dim, a.hidden_dim, a.layers, a.heads, a.kv_heads, a.vocab
    hs = a.head_size or (d // nh if nh and d % nh == 0 else 0)
    if not hs:
        raise ExportError(f"--dim {d} is not a multiple of --heads {nh}: give --head-size")
    cfg = dict(dim=d, hidden_dim=h, n_layers=L, n_heads=nh, n_kv_heads=nkv, vocab_size=V,
               seq_len=a.seq_len, head_size=hs, norm_eps=DEFAULT_EPS, rope_theta=DEFAULT_THETA,
               shared_classifier=int(a.shared), norm_bias=int(a.norm_bias),
               qkv_bias=int(a.qkv_bias), qk_norm=int(a.qk_norm),
               out_norm=int(a.norm_pos in ("peri", "out")))
    validate_config(dict(cfg, weight_type=WT_F32, group_size=0))
    src = Source(f"random model (seed {a.seed})", cfg)
    plan = tensor_plan(dict(cfg, weight_type=WT_F32, group_size=0))
    emb_std = a.emb_std or d ** -0.25   # logits (x . row) come out with std ~ dim^0.5 * emb_std
    for idx, (name, shape, kind) in enumerate(plan):
        def gen(idx=idx, name=name, shape=shape, kind=kind):
            rng = np.random.default_rng([a.seed, idx])
            if name.endswith(("_norm_bias", "q_bias", "k_bias", "v_bias")):
                mag = rng.uniform(0.05, 0.2, size=shape)
                return (mag * rng.choice([-1.0, 1.0], size=shape)).astype(np.float32)
            if kind == "vec":
                return (1.0 + rng.uniform(-0.2, 0.2, size=shape)).astype(np.float32)
            if name in ("tok_embeddings", "classifier"):
                return (rng.standard_normal(shape) * emb_std).astype(np.float32)
            std = 1.0 / math.sqrt(shape[1])
            if name.endswith((".wo", ".w2")):
                std /= math.sqrt(2.0 * L) ** 0.5
            return (rng.standard_normal(shape) * std).astype(np.float32)
        src.add(name, name, shape, gen)
    return src


# ----------------------------------------------------------------------------
# tokenizers

class BadProtobuf(ExportError):
    """A malformed protobuf; read_sentencepiece_model() adds the file's path."""


def _pb_varint(buf, i):
    shift = v = 0
    while True:
        if i >= len(buf):
            raise BadProtobuf("truncated protobuf")
        if shift >= 70:
            raise BadProtobuf(f"a varint longer than 10 bytes at byte {i}")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, i
        shift += 7


def _pb_fields(buf):
    """Yield (field number, wire type, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _pb_varint(buf, i)
        fnum, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _pb_varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = _pb_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise BadProtobuf(f"unsupported protobuf wire type {wt} (field {fnum})")
        if i > len(buf):
            raise BadProtobuf(f"truncated protobuf (field {fnum} needs {i} bytes, "
                              f"{len(buf)} there)")
        yield fnum, wt, v


def read_sentencepiece_model(path):
    """(pieces, scores, types, bos_id, eos_id) from a sentencepiece ModelProto, no library.

    ModelProto: 1 = repeated SentencePiece {1 piece, 2 score (float), 3 type (1 normal,
    2 unknown, 3 control, 4 user defined, 5 unused, 6 byte)}, 2 = TrainerSpec
    {3 model_type, 40 unk_id, 41 bos_id, 42 eos_id, 43 pad_id}."""
    with open(path, "rb") as fh:
        buf = fh.read()
    try:
        return _sentencepiece_fields(path, buf)
    except BadProtobuf as e:
        raise ExportError(f"{path}: {e}")


def _sentencepiece_fields(path, buf):
    pieces, scores, types = [], [], []
    bos, eos, model_type = 1, 2, 1
    for fnum, wt, v in _pb_fields(buf):
        if fnum == 1 and wt == 2:
            piece, score, typ = "", 0.0, 1
            for f2, w2, v2 in _pb_fields(v):
                if f2 == 1 and w2 == 2:
                    try:
                        piece = v2.decode("utf-8")
                    except UnicodeDecodeError:
                        raise BadProtobuf(f"piece {len(pieces)} is not valid UTF-8 ({v2[:20]!r})")
                elif f2 == 2 and w2 == 5:
                    score = struct.unpack("<f", v2)[0]
                elif f2 == 3 and w2 == 0:
                    typ = v2
            pieces.append(piece)
            scores.append(score)
            types.append(typ)
        elif fnum == 2 and wt == 2:
            for f2, w2, v2 in _pb_fields(v):
                if w2 != 0:
                    continue
                v2 = v2 - (1 << 64) if v2 >= 1 << 63 else v2   # negative int32 ids
                if f2 == 3:
                    model_type = v2
                elif f2 == 41:
                    bos = v2
                elif f2 == 42:
                    eos = v2
    if not pieces:
        raise ExportError(f"{path}: no pieces (not a sentencepiece model?)")
    if model_type != 2:
        log(f"warning: {path} is a sentencepiece model of type {model_type}, not BPE (2); "
            f"the C encoder implements BPE merges")
    return pieces, scores, types, bos, eos


def sentencepiece_vocab(path):
    """(pieces, scores, bos, eos), with the sentencepiece library when it is importable."""
    try:
        import sentencepiece as spm
    except ImportError:
        spm = None
    if spm is not None:
        try:
            sp = spm.SentencePieceProcessor(model_file=path)
        except Exception as e:
            raise ExportError(f"{path}: sentencepiece cannot load it ({first_line(e)})")
        n = sp.vocab_size()
        try:
            pieces = [sp.id_to_piece(i) for i in range(n)]
        except UnicodeDecodeError as e:
            raise ExportError(f"{path}: a piece is not valid UTF-8 ({first_line(e)})")
        return pieces, [sp.get_score(i) for i in range(n)], sp.bos_id(), sp.eos_id()
    pieces, scores, _, bos, eos = read_sentencepiece_model(path)
    return pieces, scores, bos, eos


def _special_token(conf, key, where, p2id):
    """The id of tokenizer_config.json's bos_token / eos_token (a string or an
    {"content": string} object), None when absent or not in the vocabulary."""
    x = conf.get(key)
    c = x.get("content") if isinstance(x, dict) else x
    if c is not None and not isinstance(c, str):
        raise ExportError(f"{where}: field {key} = {x!r:.80} must be a string or "
                          f"an object with a string content")
    return p2id.get(c)


def _vocab_by_id(vocab, path):
    """tokenizer.json's model.vocab ({piece: id}) as {id: piece}; ids non-negative and unique."""
    id2piece = {}
    for piece, i in vocab.items():
        if not _is_count(i):
            raise ExportError(f"{path}: vocab entry {piece!r} has id {i!r}; ids must be "
                              f"non-negative integers")
        if i in id2piece:
            raise ExportError(f"{path}: id {i} used by both {id2piece[i]!r} and {piece!r}")
        id2piece[i] = piece
    return id2piece


def hf_tokenizer_vocab(path):
    """(pieces, scores, bos, eos) from a Llama-2-style HF tokenizer.json.

    Scores come from the merge ranks: a piece that some merge produces gets
    -(1 + rank of the first merge producing it), so merging by highest score (what
    sentencepiece and the C encoder do) applies merges in tokenizer.json's priority
    order. Pieces no merge produces get 0.0 if special/byte tokens (as sentencepiece
    has them) and -(1 + number of merges) otherwise (never a merge result)."""
    data = _json(path)
    model = _cfg_type(data, "model", path, dict, "an object") or {}
    mtype = model.get("type", "BPE" if "merges" in model else None)
    if mtype != "BPE":
        raise ExportError(f"{path}: model.type {mtype!r} is not supported (only BPE of the "
                          f"Llama 2 / sentencepiece kind)")
    pre = json.dumps(data.get("pre_tokenizer"))
    if "ByteLevel" in pre or "ByteLevel" in json.dumps(data.get("decoder")):
        raise ExportError(f"{path}: a byte-level BPE (GPT-2 / Llama 3 style) is not supported; "
                          f"only sentencepiece-style BPE with byte fallback")
    if model.get("byte_fallback") is False:
        log(f"warning: {path}: byte_fallback is false; the C encoder falls back to <0xNN> tokens")
    vocab = model.get("vocab")
    merges = model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        raise ExportError(f"{path}: model.vocab (an object) / model.merges (a list) missing")
    if not vocab:
        raise ExportError(f"{path}: model.vocab is empty")
    id2piece = _vocab_by_id(vocab, path)
    special = set()
    for at in _cfg_type(data, "added_tokens", path, list, "a list") or []:
        i, c = (at.get("id"), at.get("content")) if isinstance(at, dict) else (None, None)
        if not _is_count(i) or not isinstance(c, str):
            raise ExportError(f"{path}: added token {at!r:.80} needs an integer id >= 0 "
                              f"and a string content")
        if i in id2piece and id2piece[i] != c:
            raise ExportError(f"{path}: added token {c!r} reuses id {i} of {id2piece[i]!r}")
        id2piece[i] = c
        if at.get("special"):
            special.add(i)
    n = len(id2piece)
    if sorted(id2piece) != list(range(n)):
        missing = next(i for i in range(n) if i not in id2piece)
        raise ExportError(f"{path}: token ids are not contiguous (id {missing} is missing)")
    pieces = [id2piece[i] for i in range(n)]
    p2id = {p: i for i, p in enumerate(pieces)}
    best = {}
    for rank, m in enumerate(merges):
        parts = m.split(" ") if isinstance(m, str) else m
        if not (isinstance(parts, list) and len(parts) == 2
                and all(isinstance(x, str) for x in parts)):
            raise ExportError(f"{path}: merge #{rank} {m!r:.80} is not a pair of strings")
        tid = p2id.get(parts[0] + parts[1])
        if tid is None:
            raise ExportError(f"{path}: merge #{rank} {m!r} makes {parts[0] + parts[1]!r}, "
                              f"not in the vocabulary")
        best.setdefault(tid, rank)
    scores = []
    for i, p in enumerate(pieces):
        if i in best:
            scores.append(-(1.0 + best[i]))
        elif i in special or (len(p) == 6 and p.startswith("<0x") and p.endswith(">")) \
                or p == model.get("unk_token"):
            scores.append(0.0)
        else:
            scores.append(-(1.0 + len(merges)))

    # BOS / EOS: tokenizer_config.json beside it, else <s> / </s>
    bos = eos = None
    tc = os.path.join(os.path.dirname(os.path.abspath(path)), "tokenizer_config.json")
    if os.path.exists(tc):
        conf = _json(tc)
        bos, eos = (_special_token(conf, k, tc, p2id) for k in ("bos_token", "eos_token"))
    if bos is None:
        bos = p2id.get("<s>")
    if eos is None:
        eos = p2id.get("</s>")
    if bos is None or eos is None:
        raise ExportError(f"{path}: cannot tell the BOS/EOS tokens (no <s>/</s>)")
    return pieces, scores, bos, eos


def check_vocab(path, pieces, scores, bos, eos):
    """What tokenizer.bin needs: some tokens, finite scores, BOS and EOS two of them."""
    if not pieces:
        raise ExportError(f"{path}: no tokens")
    bad = next((i for i, s in enumerate(scores) if not math.isfinite(s)), None)
    if bad is not None:
        raise ExportError(f"{path}: token {bad} {pieces[bad]!r} has score {scores[bad]}; "
                          f"scores must be finite")
    for what, i in (("bos", bos), ("eos", eos)):
        if not 0 <= i < len(pieces):
            raise ExportError(f"{path}: {what} id {i} is not a token id "
                              f"(0..{len(pieces) - 1})")
    if bos == eos:
        raise ExportError(f"{path}: bos and eos are the same token ({bos})")


def tokenizer_bin_bytes(pieces, scores, bos, eos):
    """llama2.c tokenizer.bin: u32 max_token_length, then per token f32 score, u32 len, bytes."""
    toks = []
    for i, p in enumerate(pieces):
        if i == bos:
            p = "\n<s>\n"
        elif i == eos:
            p = "\n</s>\n"
        toks.append(p.replace("\u2581", " ").encode("utf-8"))
    out = [struct.pack("<I", max(len(t) for t in toks))]
    for t, s in zip(toks, scores):
        out.append(struct.pack("<fI", s, len(t)))
        out.append(t)
    return b"".join(out)


# --- byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM2): the LTOK file ---------
# FORMAT.md, "The tokenizer file". Pieces are stored as the raw bytes they
# stand for (GPT-2's bytes-to-unicode map undone); special tokens as their text.

LTOK_MAGIC = b"LTOK"
LTOK_VERSION = 1
LTOK_KIND_BYTE_LEVEL = 1
PRE_GPT2, PRE_LLAMA3, PRE_QWEN2, PRE_SMOLLM = 1, 2, 3, 4
NORM_NONE, NORM_NFC = 0, 1
CHAT_LLAMA2, CHAT_LLAMA3, CHAT_CHATML, CHAT_LLAMA31 = 0, 1, 2, 3
CHAT_NAMES = {CHAT_LLAMA2: "llama2", CHAT_LLAMA3: "llama3", CHAT_CHATML: "chatml", CHAT_LLAMA31: "llama3.1"}
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def bytes_to_unicode():
    """GPT-2's map of the 256 byte values to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def is_byte_level(data):
    """Does this tokenizer.json hold a byte-level BPE (a ByteLevel pre-tokenizer or decoder)?"""
    return '"ByteLevel"' in json.dumps([data.get("pre_tokenizer"), data.get("decoder")])


def _pre_tokenizer_id(path, pre):
    """The LTOK pre_tokenizer of tokenizer.json's pre_tokenizer, or ExportError naming it."""
    def bl(p, regex):
        if not (isinstance(p, dict) and p.get("type") == "ByteLevel"):
            return False
        if p.get("add_prefix_space"):
            raise ExportError(f"{path}: ByteLevel add_prefix_space=true is not supported")
        return bool(p.get("use_regex", True)) == regex
    steps = pre.get("pretokenizers") if isinstance(pre, dict) and pre.get("type") == "Sequence" else [pre]
    if not isinstance(steps, list):
        steps = [steps]
    if len(steps) == 1 and bl(steps[0], True):
        return PRE_GPT2
    if len(steps) == 2 and isinstance(steps[0], dict) and bl(steps[1], False) \
            and steps[0].get("type") == "Split" and not steps[0].get("invert", False) \
            and str(steps[0].get("behavior", "")).lower() == "isolated":
        pattern = (steps[0].get("pattern") or {}).get("Regex")
        if pattern == LLAMA3_PATTERN:
            return PRE_LLAMA3
        if pattern == QWEN2_PATTERN:
            return PRE_QWEN2
        raise ExportError(f"{path}: Split pattern {pattern!r:.120} is not one this engine "
                          f"implements (Llama 3's or Qwen2's)")
    if len(steps) == 2 and isinstance(steps[0], dict) and steps[0].get("type") == "Digits" \
            and steps[0].get("individual_digits") and bl(steps[1], True):
        return PRE_SMOLLM
    raise ExportError(f"{path}: pre_tokenizer {json.dumps(pre)[:160]} is not supported (GPT-2's "
                      f"ByteLevel, Llama 3's or Qwen2's Split + ByteLevel, or SmolLM2's Digits + ByteLevel)")


def _jinja_unescape(s):
    return s.replace("\\n", "\n").replace("\\'", "'").replace('\\"', '"')


def chat_template_of(template, where):
    """(LTOK chat template id, default system prompt or None) from a jinja string."""
    if template is None:
        log(f"warning: {where}: no chat_template; -m chat uses Llama 2's [INST] format")
        return CHAT_LLAMA2, None
    if "<|start_header_id|>" in template:
        # Llama 3.1 and 3.2 open every conversation with a dated system block
        kind = CHAT_LLAMA31 if "Cutting Knowledge Date" in template else CHAT_LLAMA3
    elif "<|im_start|>" in template:
        kind = CHAT_CHATML
    elif "[INST]" in template:
        kind = CHAT_LLAMA2
    else:
        raise ExportError(f"{where}: chat_template is none of Llama 2's, Llama 3's or ChatML "
                          f"(no [INST], <|start_header_id|> or <|im_start|> in it)")
    system = None
    if kind == CHAT_CHATML:
        # a literal system turn, used when the conversation has none:
        # '<|im_start|>system\n...<|im_end|>' with no quote, brace or + inside
        m = re.search(r"<\|im_start\|>system(?:\\n|\n)([^'\"{}+]*?)<\|im_end\|>", template)
        if m:
            system = _jinja_unescape(m.group(1))
    elif kind in (CHAT_LLAMA3, CHAT_LLAMA31) and "system" in template:
        log(f"warning: {where}: the Llama 3 template's default system text (if any) is not "
            f"a literal; none recorded")
    return kind, system


def _config_token(conf, key, where, p2id):
    """tokenizer_config.json's bos_token / eos_token as an id, None when absent/null."""
    x = conf.get(key)
    c = x.get("content") if isinstance(x, dict) else x
    if c is None:
        return None
    if not isinstance(c, str):
        raise ExportError(f"{where}: field {key} = {x!r:.80} must be a string or an object "
                          f"with a string content")
    if c not in p2id:
        raise ExportError(f"{where}: {key} {c!r} is not in the vocabulary")
    return p2id[c]


def _post_processor_bos(post):
    """The special token a TemplateProcessing post-processor puts first, else None."""
    procs = post.get("processors", []) if isinstance(post, dict) and post.get("type") == "Sequence" else [post]
    for p in procs:
        if isinstance(p, dict) and p.get("type") == "TemplateProcessing":
            single = p.get("single") or []
            if single and isinstance(single[0], dict) and "SpecialToken" in single[0]:
                return single[0]["SpecialToken"].get("id")
    return None


def byte_level_tokenizer(path, data):
    """Everything an LTOK file holds, from a byte-level BPE tokenizer.json and the
    tokenizer_config.json / generation_config.json beside it."""
    model = _cfg_type(data, "model", path, dict, "an object") or {}
    if model.get("type", "BPE") != "BPE":
        raise ExportError(f"{path}: model.type {model.get('type')!r} is not supported (BPE only)")
    for k in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(k):
            raise ExportError(f"{path}: model.{k} = {model[k]!r} is not supported")
    if model.get("byte_fallback"):
        raise ExportError(f"{path}: byte_fallback in a byte-level BPE is not supported")
    norm = data.get("normalizer")
    if norm is None:
        normalizer = NORM_NONE
    elif isinstance(norm, dict) and norm.get("type") == "NFC":
        normalizer = NORM_NFC
    else:
        t = norm.get("type") if isinstance(norm, dict) else norm
        raise ExportError(f"{path}: normalizer {t!r} is not supported (none or NFC)")
    pre = _pre_tokenizer_id(path, data.get("pre_tokenizer"))
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list) or not vocab:
        raise ExportError(f"{path}: model.vocab (an object) / model.merges (a list) missing or empty")
    dec = {c: b for b, c in bytes_to_unicode().items()}
    id2piece, flags = _vocab_by_id(vocab, path), {}
    raw = {}
    for i, piece in id2piece.items():
        try:
            raw[i] = bytes(dec[c] for c in piece)
        except KeyError as e:
            raise ExportError(f"{path}: vocab entry {piece!r} (id {i}) has {e.args[0]!r}, "
                              f"not a byte-level character")
    for at in _cfg_type(data, "added_tokens", path, list, "a list") or []:
        i, c = (at.get("id"), at.get("content")) if isinstance(at, dict) else (None, None)
        if not _is_count(i) or not isinstance(c, str) or not c:
            raise ExportError(f"{path}: added token {at!r:.80} needs an integer id >= 0 "
                              f"and a non-empty string content")
        if i in id2piece and id2piece[i] != c:
            raise ExportError(f"{path}: added token {c!r} reuses id {i} of {id2piece[i]!r}")
        id2piece[i] = c
        raw[i] = c.encode("utf-8")
        flags[i] = 1 if at.get("special") else 2
    n = len(id2piece)
    if sorted(id2piece) != list(range(n)):
        missing = next(i for i in range(n) if i not in id2piece)
        raise ExportError(f"{path}: token ids are not contiguous (id {missing} is missing)")
    pieces = [raw[i] for i in range(n)]
    first = {}
    for i, p in enumerate(pieces):
        if p in first:
            raise ExportError(f"{path}: tokens {first[p]} and {i} are the same bytes {p!r}")
        first[p] = i
    missing = [b for b in range(256) if flags.get(first.get(bytes([b]), -1), 0) or bytes([b]) not in first]
    if missing:
        raise ExportError(f"{path}: no token for the byte 0x{missing[0]:02x}: not a byte-level vocabulary")
    p2id = {p: i for i, p in id2piece.items()}
    table = {}
    for rank, m in enumerate(merges):
        parts = m.split(" ") if isinstance(m, str) else m
        if not (isinstance(parts, list) and len(parts) == 2 and all(isinstance(x, str) for x in parts)):
            raise ExportError(f"{path}: merge #{rank} {m!r:.80} is not a pair of strings")
        ids = [p2id.get(x) for x in parts] + [p2id.get(parts[0] + parts[1])]
        if None in ids:
            raise ExportError(f"{path}: merge #{rank} {m!r}: {parts[0] + parts[1]!r} or a part "
                              f"of it is not in the vocabulary")
        if any(flags.get(x) for x in ids):
            raise ExportError(f"{path}: merge #{rank} {m!r} involves an added token")
        table[(ids[0], ids[1])] = (rank, ids[2])   # a repeated pair keeps its last rank, as tokenizers does

    # ids and chat template from tokenizer_config.json / generation_config.json
    folder = os.path.dirname(os.path.abspath(path))
    tc = os.path.join(folder, "tokenizer_config.json")
    conf = _json(tc) if os.path.exists(tc) else {}
    if not conf:
        log(f"warning: no {tc}: no BOS/EOS from it, no chat template")
    piece_ids = {c: i for i, c in id2piece.items()}
    bos = _config_token(conf, "bos_token", tc, piece_ids)
    eos = _config_token(conf, "eos_token", tc, piece_ids)
    gc = os.path.join(folder, "generation_config.json")
    if eos is None and os.path.exists(gc):
        g = _json(gc).get("eos_token_id")
        g = g[0] if isinstance(g, list) and g else g
        if _is_count(g) and g < n:
            eos = g
    post_bos = _post_processor_bos(data.get("post_processor"))
    if "add_bos_token" in conf:
        add_bos = bool(conf["add_bos_token"])
    else:
        add_bos = post_bos is not None
    if add_bos and bos is None:
        bos = piece_ids.get(post_bos)
    if add_bos and bos is None:
        raise ExportError(f"{path}: BOS is added but no bos_token names it")
    template = conf.get("chat_template")
    if isinstance(template, list):   # [{"name": ..., "template": ...}]
        template = next((t.get("template") for t in template
                         if isinstance(t, dict) and t.get("name") == "default"), None)
    if template is not None and not isinstance(template, str):
        raise ExportError(f"{tc}: chat_template must be a string")
    chat, system = chat_template_of(template, tc)
    eot_piece = {CHAT_LLAMA3: "<|eot_id|>", CHAT_LLAMA31: "<|eot_id|>", CHAT_CHATML: "<|im_end|>"}.get(chat)
    eot = piece_ids.get(eot_piece, -1) if eot_piece else -1
    if eot_piece and eot < 0:
        log(f"warning: {path}: no {eot_piece} token: no end-of-turn id")
    return dict(pieces=pieces, flags=[flags.get(i, 0) for i in range(n)], merges=table,
                pre=pre, normalizer=normalizer, ignore_merges=bool(model.get("ignore_merges")),
                add_bos=add_bos, bos=-1 if bos is None else bos, eos=-1 if eos is None else eos,
                eot=eot, chat=chat, system=(system or "").encode("utf-8"))


def ltok_bytes(t):
    """The LTOK file (FORMAT.md) for byte_level_tokenizer()'s dict."""
    pieces, V = t["pieces"], len(t["pieces"])
    order = sorted(range(V), key=lambda i: pieces[i])
    merges = sorted((l, r, rank, res) for (l, r), (rank, res) in t["merges"].items())
    blob = b"".join(pieces)
    ends, e = [], 0
    for p in pieces:
        e += len(p)
        ends.append(e)
    flags = int(t["add_bos"]) | (2 if t["ignore_merges"] else 0)
    header = struct.pack("<4s3I3I2i3iI3I", LTOK_MAGIC, LTOK_VERSION, 64, LTOK_KIND_BYTE_LEVEL,
                         t["pre"], t["normalizer"], flags, V, len(merges),
                         t["bos"], t["eos"], t["eot"], t["chat"], max(len(p) for p in pieces),
                         len(t["system"]), len(blob))
    assert len(header) == 64
    out = [header, bytes(t["flags"]), b"\0" * (-V % 4), struct.pack(f"<{V}I", *ends),
           struct.pack(f"<{V}I", *order)]
    out += [struct.pack("<4I", *m) for m in merges]
    out += [t["system"], blob]
    return b"".join(out)


def convert_tokenizer(inp, outp):
    if os.path.isdir(inp):
        for name in ("tokenizer.model", "tokenizer.json"):
            if os.path.exists(os.path.join(inp, name)):
                inp = os.path.join(inp, name)
                break
        else:
            raise ExportError(f"{inp}: no tokenizer.model or tokenizer.json in it")
    if not os.path.exists(inp):
        raise ExportError(f"input {inp} does not exist")
    if not os.path.isfile(inp):
        raise ExportError(f"input {inp} is not a regular file")
    with open(inp, "rb") as fh:
        first = fh.read(64).lstrip()
    if first[:1] == b"{":
        data = _json(inp)
        if is_byte_level(data):
            log(f"detected a byte-level BPE tokenizer.json: {inp}")
            t = byte_level_tokenizer(inp, data)
            out = ltok_bytes(t)
            with atomic_output(outp) as f:
                f.write(out)
            log(f"wrote {outp}: LTOK, {len(t['pieces'])} tokens, {len(t['merges'])} merges, "
                f"BOS {t['bos']} (added: {int(t['add_bos'])}), EOS {t['eos']}, end of turn {t['eot']}, "
                f"template {CHAT_NAMES[t['chat']]}, default system prompt {len(t['system'])} bytes, "
                f"{len(out)} bytes")
            return
        log(f"detected a Hugging Face tokenizer.json: {inp}")
        pieces, scores, bos, eos = hf_tokenizer_vocab(inp)
    else:
        log(f"detected a sentencepiece model: {inp}")
        pieces, scores, bos, eos = sentencepiece_vocab(inp)
    check_vocab(inp, pieces, scores, bos, eos)
    data = tokenizer_bin_bytes(pieces, scores, bos, eos)
    with atomic_output(outp) as f:
        f.write(data)
    log(f"wrote {outp}: {len(pieces)} tokens (BOS {bos}, EOS {eos}), {len(data)} bytes")


# ----------------------------------------------------------------------------
# GGUF output: llama.cpp's format (`--format gguf`)
#
# Written from the GGUF specification (ggml's docs/gguf.md): a little-endian
# header (magic "GGUF", version 3, tensor count, metadata count), the metadata
# as typed key/value pairs, one info record per tensor (name, dimensions
# innermost first, type, offset into the data section), then the data section
# at the next multiple of general.alignment, each tensor at such a multiple.
# Blocks of 32 values: Q8_0 = f16 scale d + 32 int8 (value = q * d); Q4_0 =
# f16 scale d + 16 bytes whose low nibbles hold values 0..15 and high nibbles
# values 16..31 (value = (nibble - 8) * d). The rounding follows the
# reference quantizers the specification points to, so a file written here
# holds the bytes llama.cpp's own quantizer would write.

GGUF_VERSION = 3
GGUF_ALIGN = 32
GGUF_BLOCK = 32
# tensor types (ggml_type) and metadata value types (gguf_type)
GG_F32, GG_F16, GG_Q4_0, GG_Q8_0 = 0, 1, 2, 8
GGUF_TYPE_NAMES = {GG_F32: "f32", GG_F16: "f16", GG_Q4_0: "q4_0", GG_Q8_0: "q8_0"}
GV_UINT32, GV_INT32, GV_FLOAT32, GV_BOOL, GV_STRING, GV_ARRAY = 4, 5, 6, 7, 8, 9
# general.file_type: llama_ftype of the file's dominant type
GGUF_FILE_TYPE = {GG_F32: 0, GG_F16: 1, GG_Q4_0: 2, GG_Q8_0: 7}
GGUF_DTYPES = {"f32": GG_F32, "f16": GG_F16, "q8_0": GG_Q8_0, "q4_0": GG_Q4_0}
# token types of tokenizer.ggml.token_type
TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE = 1, 2, 3, 4, 5, 6


def _f16_bits(x):
    return np.asarray(x, dtype=np.float32).astype("<f2")


def quantize_gguf_q8_0(blk):
    """(rows, cols) float32, cols a multiple of 32 -> the Q8_0 blocks' bytes, row-major."""
    rows, cols = blk.shape
    x = blk.reshape(rows, cols // GGUF_BLOCK, GGUF_BLOCK)
    amax = np.abs(x).max(axis=2)
    d = (amax / np.float32(127.0)).astype(np.float32)
    inv = np.divide(np.float32(1.0), d, out=np.zeros_like(d), where=d != 0).astype(np.float32)
    v = (x * inv[..., None]).astype(np.float32)
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)   # roundf: half away from zero
    out = np.empty((rows, cols // GGUF_BLOCK, 34), dtype=np.uint8)
    out[..., :2] = _f16_bits(d).view(np.uint8).reshape(rows, cols // GGUF_BLOCK, 2)
    out[..., 2:] = q.view(np.uint8)
    return out.tobytes()


def quantize_gguf_q4_0(blk):
    """(rows, cols) float32, cols a multiple of 32 -> the Q4_0 blocks' bytes: d = the value
    of largest magnitude (the first, on a tie) / -8, nibble = min(15, trunc(x / d + 8.5))."""
    rows, cols = blk.shape
    nb = cols // GGUF_BLOCK
    x = blk.reshape(rows, nb, GGUF_BLOCK)
    pick = np.abs(x).argmax(axis=2)                      # argmax: the first of equal magnitudes
    mx = np.take_along_axis(x, pick[..., None], axis=2)[..., 0]
    mx = np.where(mx == 0, np.float32(0.0), mx)          # an all-zero block: d = 0 / -8 = -0
    d = (mx / np.float32(-8.0)).astype(np.float32)
    inv = np.divide(np.float32(1.0), d, out=np.zeros_like(d), where=d != 0).astype(np.float32)
    v = (x * inv[..., None]).astype(np.float32) + np.float32(8.5)
    n = np.minimum(np.trunc(v), 15).astype(np.uint8)     # (int8_t) cast: toward zero; v >= 0.5 here
    packed = n[..., :16] | (n[..., 16:] << 4)
    out = np.empty((rows, nb, 18), dtype=np.uint8)
    out[..., :2] = _f16_bits(d).view(np.uint8).reshape(rows, nb, 2)
    out[..., 2:] = packed
    return out.tobytes()


def dequantize_gguf(raw, gtype, rows, cols):
    """The float32 values of a tensor's GGUF bytes (the round-trip check, and tests)."""
    if gtype == GG_F32:
        return np.frombuffer(raw, "<f4", rows * cols).reshape(rows, cols)
    if gtype == GG_F16:
        return np.frombuffer(raw, "<f2", rows * cols).astype(np.float32).reshape(rows, cols)
    nb = cols // GGUF_BLOCK
    size = 34 if gtype == GG_Q8_0 else 18
    b = np.frombuffer(raw, np.uint8, rows * nb * size).reshape(rows, nb, size)
    d = b[..., :2].copy().view("<f2").astype(np.float32)       # (rows, nb, 1)
    if gtype == GG_Q8_0:
        q = b[..., 2:].view(np.int8).astype(np.float32)
    else:
        lo, hi = (b[..., 2:] & 15).astype(np.float32), (b[..., 2:] >> 4).astype(np.float32)
        q = np.concatenate([lo, hi], axis=2) - np.float32(8.0)
    return (q * d).astype(np.float32).reshape(rows, cols)


def gguf_tensor_type(name, shape, kind, want):
    """The type a tensor is written in: norms f32; a matrix in `want`, unless its rows are
    not whole blocks of 32 (stories260K's hidden_dim 172): then f16 (write_gguf says so)."""
    if kind == "vec" or want in (GG_F32, GG_F16):
        return GG_F32 if kind == "vec" else want
    return GG_F16 if shape[-1] % GGUF_BLOCK else want


def gguf_tensor_bytes(name, arr, gtype):
    a = np.asarray(arr, dtype=np.float32)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if gtype == GG_F32:
        return a.astype("<f4").tobytes()
    if gtype == GG_F16:
        big = float(np.abs(a).max(initial=0))
        if not big <= F16_MAX:
            raise ExportError(f"tensor {name} has a value of magnitude {big:g}, beyond the f16 "
                              f"range (65504): use --dtype f32")
        return a.astype("<f2").tobytes()
    step = max(1, ROW_CHUNK_ELEMS // a.shape[1])
    q = quantize_gguf_q8_0 if gtype == GG_Q8_0 else quantize_gguf_q4_0
    return b"".join(q(a[r:r + step]) for r in range(0, a.shape[0], step))


def _gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _gguf_kv(key, vtype, value):
    out = _gguf_str(key) + struct.pack("<I", vtype)
    if vtype == GV_STRING:
        return out + _gguf_str(value)
    if vtype == GV_ARRAY:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        if etype == GV_STRING:
            return out + b"".join(_gguf_str(s) for s in items)
        fmt = {GV_UINT32: "<u4", GV_INT32: "<i4", GV_FLOAT32: "<f4"}[etype]
        return out + np.asarray(items, dtype=fmt).tobytes()
    fmt = {GV_UINT32: "<I", GV_INT32: "<i", GV_FLOAT32: "<f", GV_BOOL: "<?"}[vtype]
    return out + struct.pack(fmt, value)


def gguf_arch(cfg):
    """The llama.cpp architecture that holds `cfg`: qwen2 (q/k/v biases), qwen3 (per-head
    q/k norms) or llama (neither)."""
    if cfg.get("qkv_bias") and cfg.get("qk_norm"):
        raise ExportError("--format gguf: q/k/v biases and q/k norms together fit no llama.cpp "
                          "architecture (qwen2 has the biases, qwen3 the norms): write LLMW for this model")
    return "qwen2" if cfg.get("qkv_bias") else "qwen3" if cfg.get("qk_norm") else "llama"


def gguf_tensor_name(name):
    """The engine's canonical tensor name -> llama.cpp's (llama, qwen2 and qwen3 share them)."""
    fixed = {"tok_embeddings": "token_embd.weight", "final_norm": "output_norm.weight",
             "classifier": "output.weight"}
    if name in fixed:
        return fixed[name]
    _, l, part = name.split(".", 2)
    per_layer = {"attn_norm": "attn_norm.weight", "wq": "attn_q.weight", "wk": "attn_k.weight",
                 "wv": "attn_v.weight", "wo": "attn_output.weight", "ffn_norm": "ffn_norm.weight",
                 "w1": "ffn_gate.weight", "w2": "ffn_down.weight", "w3": "ffn_up.weight",
                 "q_bias": "attn_q.bias", "k_bias": "attn_k.bias", "v_bias": "attn_v.bias",
                 "q_norm": "attn_q_norm.weight", "k_norm": "attn_k_norm.weight"}
    if part not in per_layer:
        raise ExportError(f"tensor {name} has no place in a GGUF model")
    return f"blk.{l}.{per_layer[part]}"


def gguf_rows(arch, cfg, name, arr):
    """`arr` in the row order llama.cpp expects. The engine keeps q/k rows (and the q/k
    biases, and a head's q/k norm weights) as interleaved rotary pairs, which is what
    llama.cpp's llama holds; qwen2 and qwen3 rotate halves (NEOX) on rows in Hugging
    Face's order, so those go back to it."""
    part = name.rsplit(".", 1)[-1]
    heads = {"wq": cfg["n_heads"], "wk": cfg["n_kv_heads"], "q_bias": cfg["n_heads"],
             "k_bias": cfg["n_kv_heads"], "q_norm": 1, "k_norm": 1}
    if arch == "llama" or part not in heads:
        return arr
    a = np.asarray(arr, dtype=np.float32)
    if a.ndim == 1:
        return permute_rotary(a.reshape(-1, 1), heads[part], cfg["head_size"]).reshape(-1)
    return permute_rotary(a, heads[part], cfg["head_size"])


def tokenizer_bin_vocab(path):
    """llama2.c's tokenizer.bin -> (pieces in sentencepiece spelling, scores, bos, eos):
    ' ' back to U+2581, and ids 0/1/2 as <unk>/<s>/</s>, as the file implies them."""
    data = open(path, "rb").read()
    if len(data) < 4:
        raise ExportError(f"{path}: too short for a tokenizer.bin")
    pos, pieces, scores = 4, [], []
    while pos < len(data):
        if pos + 8 > len(data):
            raise ExportError(f"{path}: truncated at byte {pos} (token {len(pieces)})")
        score, n = struct.unpack_from("<fi", data, pos)
        if n < 0 or pos + 8 + n > len(data):
            raise ExportError(f"{path}: token {len(pieces)} has length {n}, past the end of the file")
        try:
            text = data[pos + 8:pos + 8 + n].decode("utf-8")
        except UnicodeDecodeError:
            raise ExportError(f"{path}: token {len(pieces)} is not valid UTF-8")
        pieces.append(text.replace(" ", "\u2581"))
        scores.append(score)
        pos += 8 + n
    if len(pieces) < 3:
        raise ExportError(f"{path}: {len(pieces)} tokens; a llama2.c vocabulary has <unk>, <s>, </s> first")
    pieces[:3] = ["<unk>", "<s>", "</s>"]
    return pieces, scores, 1, 2


def gguf_vocab(path):
    """(path, pieces, scores, token types, bos, eos) for tokenizer.ggml.model "llama" from any
    sentencepiece-style tokenizer input: tokenizer.model, a Llama-2-style tokenizer.json,
    llama2.c's tokenizer.bin, or a folder holding one; ("gpt2", path, {...}) from a
    byte-level BPE tokenizer.json (gguf_byte_level_vocab)."""
    if os.path.isdir(path):
        for name in ("tokenizer.model", "tokenizer.json", "tokenizer.bin"):
            if os.path.exists(os.path.join(path, name)):
                path = os.path.join(path, name)
                break
        else:
            raise ExportError(f"{path}: no tokenizer.model, tokenizer.json or tokenizer.bin in it: "
                              f"give --tokenizer")
    if not os.path.isfile(path):
        raise ExportError(f"tokenizer {path} does not exist")
    with open(path, "rb") as fh:
        first = fh.read(64).lstrip()
    if first[:1] == b"{" and is_byte_level(_json(path)):
        return gguf_byte_level_vocab(path)
    if first[:1] == b"{":
        pieces, scores, bos, eos = hf_tokenizer_vocab(path)
    elif path.endswith(".model"):
        pieces, scores, bos, eos = sentencepiece_vocab(path)
    else:
        pieces, scores, bos, eos = tokenizer_bin_vocab(path)
    check_vocab(path, pieces, scores, bos, eos)
    types = []
    for i, p in enumerate(pieces):
        if p == "<unk>":
            types.append(TT_UNKNOWN)
        elif i in (bos, eos) or p == "":
            types.append(TT_CONTROL)
        elif len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            types.append(TT_BYTE)
        else:
            types.append(TT_NORMAL)
    return path, pieces, scores, types, bos, eos


GGUF_PRE_NAMES = {PRE_GPT2: "gpt-2", PRE_LLAMA3: "llama-bpe", PRE_QWEN2: "qwen2", PRE_SMOLLM: "smollm"}


def gguf_byte_level_vocab(path):
    """A byte-level BPE tokenizer.json (GPT-2, Llama 3, Qwen2, SmolLM2) as llama.cpp's
    "gpt2" tokenizer: pieces in GPT-2's byte-to-character spelling (added tokens as their
    text), token types 1 normal / 3 control (special added) / 4 user-defined (other added),
    the merges as "left right" strings in rank order, and tokenizer.ggml.pre naming the
    pre-tokenizer as llama.cpp names it. Returns ("gpt2", path, {...})."""
    t = byte_level_tokenizer(path, _json(path))
    spell = bytes_to_unicode()
    tokens = [p.decode("utf-8") if f else "".join(spell[b] for b in p) for p, f in zip(t["pieces"], t["flags"])]
    types = [{0: TT_NORMAL, 1: TT_CONTROL, 2: TT_USER_DEFINED}[f] for f in t["flags"]]
    merges = [f"{tokens[a]} {tokens[b]}" for (a, b), _ in sorted(t["merges"].items(), key=lambda kv: kv[1][0])]
    tc = os.path.join(os.path.dirname(os.path.abspath(path)), "tokenizer_config.json")
    template = (_json(tc) if os.path.exists(tc) else {}).get("chat_template")
    if isinstance(template, list):   # [{"name": ..., "template": ...}]
        template = next((x.get("template") for x in template if isinstance(x, dict) and x.get("name") == "default"), None)
    return "gpt2", path, dict(tokens=tokens, types=types, merges=merges, pre=GGUF_PRE_NAMES[t["pre"]],
                              bos=t["bos"], eos=t["eos"], eot=t["eot"], add_bos=t["add_bos"],
                              template=template if isinstance(template, str) else None)


def gguf_tokenizer_kv(vocab, vocab_size):
    """The tokenizer.ggml.* pairs of gguf_vocab()'s result for a model of vocab_size rows."""
    if len(vocab) == 3:   # ("gpt2", path, {...})
        v = vocab[2]
        n = len(v["tokens"])
        if n > vocab_size:
            raise ExportError(f"the tokenizer has {n} tokens, more than the model's vocab_size {vocab_size}")
        # the model's extra rows, as llama.cpp's converter fills them: [PADi], type unused
        tokens = v["tokens"] + [f"[PAD{i}]" for i in range(n, vocab_size)]
        types = v["types"] + [TT_UNUSED] * (vocab_size - n)
        kv = [("tokenizer.ggml.model", GV_STRING, "gpt2"),
              ("tokenizer.ggml.pre", GV_STRING, v["pre"]),
              ("tokenizer.ggml.tokens", GV_ARRAY, (GV_STRING, tokens)),
              ("tokenizer.ggml.token_type", GV_ARRAY, (GV_INT32, types)),
              ("tokenizer.ggml.merges", GV_ARRAY, (GV_STRING, v["merges"])),
              ("tokenizer.ggml.add_bos_token", GV_BOOL, bool(v["add_bos"]))]
        for key, i in (("bos", v["bos"]), ("eos", v["eos"]), ("eot", v["eot"])):
            if i >= 0:
                kv.append((f"tokenizer.ggml.{key}_token_id", GV_UINT32, i))
        if v["template"]:
            kv.append(("tokenizer.chat_template", GV_STRING, v["template"]))
        return kv
    _, pieces, scores, types, bos, eos = vocab
    if vocab_size != len(pieces):
        raise ExportError(f"the tokenizer has {len(pieces)} tokens, the model's vocab_size is {vocab_size}")
    kv = [("tokenizer.ggml.model", GV_STRING, "llama"),
          ("tokenizer.ggml.tokens", GV_ARRAY, (GV_STRING, pieces)),
          ("tokenizer.ggml.scores", GV_ARRAY, (GV_FLOAT32, scores)),
          ("tokenizer.ggml.token_type", GV_ARRAY, (GV_INT32, types)),
          ("tokenizer.ggml.bos_token_id", GV_UINT32, bos),
          ("tokenizer.ggml.eos_token_id", GV_UINT32, eos),
          ("tokenizer.ggml.add_bos_token", GV_BOOL, True),
          ("tokenizer.ggml.add_eos_token", GV_BOOL, False)]
    if TT_UNKNOWN in types:
        kv.append(("tokenizer.ggml.unknown_token_id", GV_UINT32, types.index(TT_UNKNOWN)))
    return kv


def gguf_metadata(cfg, vocab, want):
    """The key/value pairs of the file; `vocab` None: no tokenizer (tokenizer.ggml.model
    "none", which llama.cpp loads as a model without a vocabulary)."""
    why = [k for k, ok in (("--norm layer", cfg["norm_type"] == 0), (f"--norm-pos {NORM_POS_NAMES[cfg['norm_pos']]}", cfg["norm_pos"] == 0),
                          ("output norms", not cfg.get("out_norm")),
                          ("--final-norm off", cfg["final_norm"] == 1), ("norm biases", not cfg["norm_bias"]))
           if not ok]
    if why:
        raise ExportError(f"GGUF's llama, qwen2 and qwen3 architectures are pre-RMSNorm with a final norm: "
                          f"they cannot hold {', '.join(why)}")
    arch = gguf_arch(cfg)
    if cfg.get("rope_scaling"):
        raise ExportError(f"--format gguf writes {arch} without rope scaling so far: write LLMW for this model")
    a = arch
    kv = [("general.architecture", GV_STRING, arch),
          ("general.name", GV_STRING, "export.py"),
          ("general.alignment", GV_UINT32, GGUF_ALIGN),
          ("general.file_type", GV_UINT32, GGUF_FILE_TYPE[want]),
          (f"{a}.vocab_size", GV_UINT32, cfg["vocab_size"]),
          (f"{a}.context_length", GV_UINT32, cfg["seq_len"]),
          (f"{a}.embedding_length", GV_UINT32, cfg["dim"]),
          (f"{a}.block_count", GV_UINT32, cfg["n_layers"]),
          (f"{a}.feed_forward_length", GV_UINT32, cfg["hidden_dim"]),
          (f"{a}.attention.head_count", GV_UINT32, cfg["n_heads"]),
          (f"{a}.attention.head_count_kv", GV_UINT32, cfg["n_kv_heads"]),
          (f"{a}.attention.key_length", GV_UINT32, cfg["head_size"]),
          (f"{a}.attention.value_length", GV_UINT32, cfg["head_size"]),
          (f"{a}.rope.dimension_count", GV_UINT32, cfg["head_size"]),
          (f"{a}.rope.freq_base", GV_FLOAT32, cfg["rope_theta"]),
          (f"{a}.attention.layer_norm_rms_epsilon", GV_FLOAT32, cfg["norm_eps"])]
    if vocab is None:
        return kv + [("tokenizer.ggml.model", GV_STRING, "none")]
    return kv + gguf_tokenizer_kv(vocab, cfg["vocab_size"])


def write_gguf(path, cfg, src, want, tok_path):
    """Write `src` as a GGUF llama, qwen2 or qwen3 model with its tokenizer (tok_path None:
    none); returns (bytes, max abs error)."""
    validate_config(dict(cfg, weight_type=WT_F32, group_size=0))
    vocab = gguf_vocab(tok_path) if tok_path else None
    arch = gguf_arch(cfg)
    kv = gguf_metadata(cfg, vocab, want)
    plan = tensor_plan(dict(cfg, norm_bias=0))
    src.check([(n, s) for n, s, _ in plan])
    infos, offset = [], 0
    for name, shape, kind in plan:
        gtype = gguf_tensor_type(gguf_tensor_name(name), shape, kind, want)
        rows, cols = (1, shape[0]) if kind == "vec" else shape
        nbytes = {GG_F32: 4 * rows * cols, GG_F16: 2 * rows * cols,
                  GG_Q8_0: rows * cols // GGUF_BLOCK * 34, GG_Q4_0: rows * cols // GGUF_BLOCK * 18}[gtype]
        infos.append((name, shape, kind, gtype, offset, nbytes))
        offset = -(-(offset + nbytes) // GGUF_ALIGN) * GGUF_ALIGN
    fell = [(gguf_tensor_name(n), s[-1]) for n, s, k, t, _, _ in infos if k == "mat" and t != want]
    if fell:
        log(f"note: {len(fell)} tensor(s) have rows of {sorted(set(c for _, c in fell))} values, not whole "
            f"{GGUF_TYPE_NAMES[want]} blocks of {GGUF_BLOCK}: written as f16 ({', '.join(n for n, _ in fell[:3])}"
            f"{', ...' if len(fell) > 3 else ''})")
    head = [b"GGUF", struct.pack("<IQQ", GGUF_VERSION, len(infos), len(kv))]
    head += [_gguf_kv(*x) for x in kv]
    for name, shape, kind, gtype, off, _ in infos:
        dims = list(reversed(shape))                      # innermost (columns) first
        head.append(_gguf_str(gguf_tensor_name(name)) + struct.pack("<I", len(dims)) +
                    struct.pack("<%dQ" % len(dims), *dims) + struct.pack("<IQ", gtype, off))
    head = b"".join(head)
    data_start = -(-len(head) // GGUF_ALIGN) * GGUF_ALIGN
    max_err = 0.0
    with atomic_output(path) as f:
        f.write(head + b"\0" * (data_start - len(head)))
        for name, shape, kind, gtype, off, nbytes in infos:
            f.write(b"\0" * (data_start + off - f.tell()))
            arr = src.load(name)
            if tuple(arr.shape) != tuple(shape):
                raise ExportError(f"tensor {src.src_name(name)} has shape {list(arr.shape)}, "
                                  f"expected {list(shape)}")
            if not np.isfinite(arr).all():
                raise ExportError(f"tensor {src.src_name(name)} contains NaN or Inf")
            arr = gguf_rows(arch, cfg, name, arr)
            raw = gguf_tensor_bytes(name, arr, gtype)
            if len(raw) != nbytes:   # a bug, not bad input
                raise ExportError(f"internal error: {name} is {len(raw)} bytes, planned {nbytes}")
            if gtype != GG_F32:
                rows, cols = (1, shape[0]) if kind == "vec" else shape
                back = dequantize_gguf(raw, gtype, rows, cols)
                max_err = max(max_err, float(np.abs(back - np.asarray(arr, np.float32).reshape(rows, cols)).max(initial=0)))
            f.write(raw)
            del arr, raw
        size = f.tell()
    if vocab:
        v = vocab[2] if len(vocab) == 3 else dict(tokens=vocab[1], bos=vocab[4], eos=vocab[5], pre="")
        log(f"tokenizer for the GGUF: {vocab[1] if len(vocab) == 3 else vocab[0]} ({len(v['tokens'])} tokens"
            f"{', byte-level BPE, pre-tokenizer ' + v['pre'] if v['pre'] else ''}, BOS {v['bos']}, EOS {v['eos']})")
    else:
        log("note: no tokenizer in the GGUF (tokenizer.ggml.model \"none\"): give --tokenizer to embed one")
    return size, max_err


# ----------------------------------------------------------------------------
# command line

INPUTS_HELP = """\
input kinds (auto-detected; what was detected is printed on stderr):
  llama2.c legacy .bin     headerless: 7 int32 (dim hidden_dim n_layers n_heads
                           n_kv_heads vocab_size seq_len), then float32 weights;
                           vocab_size < 0 means a separate classifier at the end
  llama2.c v1 / v2 .bin    magic "ak42": version 1 fp32, version 2 Q8_0 (dequantized)
  LLMW .bin                this engine's format (re-export: change dtype/flags)
  llama2.c .pt             training checkpoint with model_args and model
  Hugging Face folder      config.json (LlamaForCausalLM with rope_scaling linear or
                           llama3, Qwen2ForCausalLM with q/k/v biases, Qwen3ForCausalLM
                           with q/k norms) + model.safetensors or
                           model.safetensors.index.json (else pytorch_model.bin,
                           read with torch); F32/F16/BF16 tensors;
                           q/k projections, biases and norms are un-permuted to
                           interleaved RoPE
  Meta folder              params.json + consolidated.*.pth (several shards are
                           concatenated)

defaults come from the input: RMSNorm (LayerNorm if it has norm biases), pre-norm,
final norm on, the input's eps (1e-5 for llama2.c files), rope_theta 10000 unless
the input says otherwise.

other commands:
  %(prog)s tokenizer INPUT OUTPUT.bin
      INPUT: sentencepiece tokenizer.model, a Llama-2-style tokenizer.json (BPE with
      byte fallback), or a folder holding one. Writes llama2.c's tokenizer.bin.
      A byte-level BPE tokenizer.json (GPT-2, Llama 3, Qwen2, SmolLM2) becomes an
      LTOK file (FORMAT.md), with BOS/EOS/end of turn and the chat template from
      tokenizer_config.json beside it.
  %(prog)s random [--dim 64 --hidden-dim 172 --layers 2 --heads 4 --kv-heads 2
      --vocab 97 --seq-len 128 --head-size N --seed 0 --shared|--unshared
      --norm-bias --qkv-bias --qk-norm] [model options] OUTPUT
      (--norm-pos peri or out also stores random output norms)
      a seeded random checkpoint (see `%(prog)s random --help`).

A conversion that runs longer than a second shows its progress on stderr (tensor n
of N, bytes, rate) when stderr is a terminal; EXPORT_PROGRESS=SECONDS shows it on any
stderr after that many seconds. Errors print one line and exit 1; no partial output
file is left behind.
"""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(2)


def add_model_options(p, converting=True):
    g = p.add_argument_group("output options")
    g.add_argument("--dtype", choices=list(DTYPES), default="f32",
                   help="matrix storage: f32, f16, q8_0, q4_0 or q4_k (default f32); norms "
                        "stay f32. q4_0: ggml's blocks of 32 (f16 scale, 4-bit codes); q4_k: "
                        "ggml's superblocks of 256 (6-bit sub-block scales and mins); rows "
                        "are zero-padded to whole blocks. --format gguf: f32, f16, q8_0, q4_0")
    g.add_argument("--group-size", type=int, default=DEFAULT_GROUP, metavar="N",
                   help="q8_0 group length along each row (default 32)")
    g.add_argument("--norm", choices=list(NORM_TYPES), default=None,
                   help="norm type written to the header: rms or layer (default: rms, "
                        "or layer when the input has norm biases)")
    g.add_argument("--norm-pos", choices=list(NORM_POS), default=None,
                   help="norm placement: pre (x + F(N(x))), post (N(x + F(x))), peri "
                        "(x + N(F(N(x))), Gemma 2/3) or out (x + N(F(x)), OLMo 2) (default: "
                        "the input's, else pre). `random` stores the output norms for peri and out")
    g.add_argument("--final-norm", choices=list(ONOFF), default=None,
                   help="apply the final norm before the LM head (default: the input's, else on)")
    g.add_argument("--norm-eps", type=float, default=None, metavar="E",
                   help="norm epsilon (default: the input's; 1e-5 for llama2.c files)")
    if converting:
        g.add_argument("--seq-len", type=int, default=None, metavar="N",
                       help="override the context length written to the header")
    g.add_argument("--rope-theta", type=float, default=None, metavar="T",
                   help="override the RoPE base (default: the input's, else 10000)")
    g.add_argument("--llmw-version", type=int, choices=(1, 2), default=VERSION, metavar="V",
                   help="LLMW version to write: 2 (default; a tensor directory, RoPE scaling, "
                        "q/k/v biases, q/k norms) or 1 (for older engines)")


def header_cfg(src_cfg, a):
    cfg = {k: src_cfg[k] for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
                                   "vocab_size", "seq_len", "head_size", "norm_eps",
                                   "rope_theta", "shared_classifier", "norm_bias")}
    has_bias = bool(src_cfg.get("norm_bias"))
    if a.norm == "rms" and has_bias:
        log("note: --norm rms with norm biases: the biases are kept (added after the RMSNorm)")
    cfg["norm_type"] = NORM_TYPES[a.norm] if a.norm else src_cfg.get("norm_type", int(has_bias))
    cfg["norm_pos"] = NORM_POS[a.norm_pos] if a.norm_pos else src_cfg.get("norm_pos", 0)
    cfg["final_norm"] = ONOFF[a.final_norm] if a.final_norm else src_cfg.get("final_norm", 1)
    if a.norm_eps is not None:
        cfg["norm_eps"] = a.norm_eps
    if a.seq_len is not None:
        cfg["seq_len"] = a.seq_len
    if a.rope_theta is not None:
        cfg["rope_theta"] = a.rope_theta
    cfg["rope_layout"] = 0
    for k, v in V2_DEFAULTS.items():
        cfg[k] = src_cfg.get(k, v)
    cfg["version"] = a.llmw_version
    cfg["weight_type"] = DTYPES[a.dtype]
    if cfg["weight_type"] == WT_Q8_0:
        if a.group_size <= 0:
            raise ExportError(f"--group-size must be > 0 (got {a.group_size})")
        cfg["group_size"] = a.group_size
    else:
        cfg["group_size"] = 0
    return cfg


def do_export(src, out, a):
    cfg = header_cfg(src.cfg, a)
    size, err = write_llmw(out, cfg, src)
    extra = f", max abs rounding error {err:.3g}" if cfg["weight_type"] != WT_F32 else ""
    gs = f" group {cfg['group_size']}" if cfg["weight_type"] == WT_Q8_0 else ""
    narrow = sorted({shape[1] for _, shape, kind in tensor_plan(cfg)
                     if kind == "mat" and matrix_type(cfg, shape[1]) != cfg["weight_type"]})
    if narrow:
        gs += f" (rows of {', '.join(map(str, narrow))} as q4_0: not whole superblocks of 256)"
    feats = "".join([f", {ROPE_SCALING_NAMES[cfg['rope_scaling']]} rope scaling x{cfg['rope_factor']:g}"
                     if cfg["rope_scaling"] else "", ", q/k/v biases" if cfg["qkv_bias"] else "",
                     ", q/k norms" if cfg["qk_norm"] else "",
                     ", output norms" if cfg["out_norm"] else ""])
    log(f"wrote {out}: LLMW v{cfg['version']}, {size} bytes, {DTYPE_NAMES[cfg['weight_type']]}{gs}, "
        f"norm {'layer' if cfg['norm_type'] else 'rms'} {NORM_POS_NAMES[cfg['norm_pos']]}, "
        f"final norm {'on' if cfg['final_norm'] else 'off'}, eps {cfg['norm_eps']:g}, "
        f"theta {cfg['rope_theta']:g}{feats}{extra}")


def do_export_gguf(src, out, a):
    if a.group_size != DEFAULT_GROUP:
        raise ExportError("--group-size is for LLMW's q8_0; GGUF's blocks hold 32 values")
    want = GGUF_DTYPES[a.dtype]
    cfg = header_cfg(src.cfg, argparse.Namespace(**dict(vars(a), dtype="f32")))
    arch = gguf_arch(cfg)
    tok = a.tokenizer or (a.input if os.path.isdir(a.input) else None)
    if tok and not a.tokenizer and arch != "llama" and not any(
            os.path.exists(os.path.join(tok, n)) for n in ("tokenizer.model", "tokenizer.json", "tokenizer.bin")):
        tok = None     # a qwen2/qwen3 folder without a tokenizer: the weights alone
    if tok is None and arch == "llama":
        raise ExportError(f"{a.input} holds no tokenizer and a GGUF llama model needs one: give --tokenizer")
    size, err = write_gguf(out, cfg, src, want, tok)
    extra = f", max abs rounding error {err:.3g}" if want != GG_F32 else ""
    log(f"wrote {out}: {size} bytes, GGUF v{GGUF_VERSION} {arch}, {a.dtype}{extra}")


def cmd_convert(argv):
    p = Parser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
               usage="%(prog)s [options] INPUT OUTPUT\n"
                     "       %(prog)s tokenizer INPUT OUTPUT.bin\n"
                     "       %(prog)s random [options] OUTPUT",
               description="Convert a Llama-style checkpoint to the engine's LLMW format "
                           "(version 2; --llmw-version 1 for the older layout).",
               epilog=INPUTS_HELP)
    p.add_argument("input", metavar="INPUT", help="checkpoint file or folder (see input kinds)")
    p.add_argument("output", metavar="OUTPUT", help="the LLMW (or GGUF) file to write")
    p.add_argument("--format", choices=("llmw", "gguf"), default="llmw",
                   help="llmw (default): the engine's own format; gguf: llama.cpp's, with the "
                        "tokenizer inside (architecture llama, qwen2 or qwen3 as the model's q/k/v biases and "
                        "q/k norms say; tensors in f32/f16/q8_0/q4_0)")
    p.add_argument("--tokenizer", metavar="TOK", default=None,
                   help="with --format gguf: the tokenizer to embed (tokenizer.model, a byte-level BPE or a "
                        "Llama-2-style tokenizer.json, llama2.c's tokenizer.bin, or a folder); "
                        "default: the one in the input folder")
    add_model_options(p)
    a = p.parse_args(argv)
    if a.format != "gguf" and a.tokenizer:
        raise ExportError("--tokenizer is for --format gguf (an LLMW file holds no tokenizer)")
    if a.format == "gguf" and a.dtype not in GGUF_DTYPES:
        raise ExportError(f"--dtype {a.dtype} is for LLMW; --format gguf writes f32, f16, q8_0 and q4_0")
    src = detect(a.input)
    log(f"detected {src.desc}: {describe(src.cfg)}")
    if a.format == "gguf":
        do_export_gguf(src, a.output, a)
    else:
        do_export(src, a.output, a)


def cmd_random(argv):
    p = Parser(prog=f"{PROG} random",
               description="Write a seeded random LLMW checkpoint of any shape and variant. "
                           "Linear weights ~ N(0, 1/in_features) (wo, w2 scaled down by "
                           "(2*layers)^-1/4), embeddings/classifier ~ N(0, dim^-1/2), norm "
                           "weights 1 +- 0.2, norm biases +-[0.05, 0.2] (nonzero).")
    p.add_argument("output", metavar="OUTPUT")
    g = p.add_argument_group("shape")
    g.add_argument("--dim", type=int, default=64)
    g.add_argument("--hidden-dim", type=int, default=172)
    g.add_argument("--layers", type=int, default=2)
    g.add_argument("--heads", type=int, default=4)
    g.add_argument("--kv-heads", type=int, default=2)
    g.add_argument("--vocab", type=int, default=97)
    g.add_argument("--seq-len", type=int, default=128)
    g.add_argument("--head-size", type=int, default=0, help="default dim / heads")
    g.add_argument("--seed", type=int, default=0)
    sh = g.add_mutually_exclusive_group()
    sh.add_argument("--shared", dest="shared", action="store_true", default=True,
                    help="LM head = token embedding (default)")
    sh.add_argument("--unshared", dest="shared", action="store_false",
                    help="a separate classifier matrix")
    g.add_argument("--norm-bias", action="store_true", help="store random nonzero norm biases")
    g.add_argument("--qkv-bias", action="store_true", help="store random q, k and v biases (Qwen2)")
    g.add_argument("--qk-norm", action="store_true",
                   help="store random per-head q and k RMSNorm weights (Qwen3)")
    g.add_argument("--emb-std", type=float, default=0.0,
                   help="std of the embedding (and LM head), default dim^-0.25; 0.02 gives flat logits")
    add_model_options(p, converting=False)
    a = p.parse_args(argv)
    src = random_source(a)
    a.seq_len = None            # already in the source config
    if a.norm_bias and a.norm is None:
        a.norm = "layer"
    log(f"random model, seed {a.seed}: {describe(src.cfg)}")
    do_export(src, a.output, a)


def cmd_tokenizer(argv):
    p = Parser(prog=f"{PROG} tokenizer",
               description="Convert a sentencepiece tokenizer.model or a Llama-2-style "
                           "tokenizer.json to llama2.c's tokenizer.bin (int32 max_token_length, "
                           "then per token float32 score, int32 length, bytes; U+2581 -> ' '; "
                           "BOS/EOS written as '\\n<s>\\n' / '\\n</s>\\n'), or a byte-level "
                           "BPE tokenizer.json (GPT-2, Llama 3, Qwen2, SmolLM2) to an LTOK file "
                           "(FORMAT.md).")
    p.add_argument("input", metavar="INPUT")
    p.add_argument("output", metavar="OUTPUT.bin")
    a = p.parse_args(argv)
    convert_tokenizer(a.input, a.output)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] == "tokenizer":
            cmd_tokenizer(argv[1:])
        elif argv and argv[0] == "random":
            cmd_random(argv[1:])
        else:
            cmd_convert(argv)
    except ExportError as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except Exception as e:  # an unexpected failure still gets one line (EXPORT_DEBUG=1: traceback)
        if os.environ.get("EXPORT_DEBUG"):
            raise
        msg = first_line(e)
        sys.stderr.write(f"{PROG}: error: {type(e).__name__}: {msg}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
