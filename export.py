#!/usr/bin/env python3
"""export.py -- convert Llama-style checkpoints and tokenizers for the C engine.

Writes the engine's own checkpoint format, "LLMW" version 1 (a 256-byte
little-endian header, then every tensor at a 64-byte aligned offset; see
FORMAT.md / the LLMW section of the README), and llama2.c's tokenizer.bin.

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
  layers.{l}.ffn_norm (dim,), layers.{l}.ffn_norm_bias (dim,) [norm_bias]
  layers.{l}.w1 (hidden, dim) gate, .w2 (dim, hidden) down, .w3 (hidden, dim) up
  final_norm (dim,), final_norm_bias (dim,) [norm_bias]
  classifier (vocab, dim)  [only when not shared_classifier]
"""
import argparse
import contextlib
import glob
import json
import math
import os
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
VERSION = 1
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
DTYPES = {"f32": WT_F32, "f16": WT_F16, "q8_0": WT_Q8_0}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
NORM_TYPES = {"rms": 0, "layer": 1}
NORM_POS = {"pre": 0, "post": 1}
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


def tensor_plan(cfg):
    """[(name, shape, kind)] in file order; kind 'vec' (always f32) or 'mat'."""
    d, h, L = cfg["dim"], cfg["hidden_dim"], cfg["n_layers"]
    hs, nh, nkv, V = cfg["head_size"], cfg["n_heads"], cfg["n_kv_heads"], cfg["vocab_size"]
    bias = bool(cfg["norm_bias"])
    plan = [("tok_embeddings", (V, d), "mat")]
    for l in range(L):
        p = f"layers.{l}."
        plan.append((p + "attn_norm", (d,), "vec"))
        if bias:
            plan.append((p + "attn_norm_bias", (d,), "vec"))
        plan += [(p + "wq", (nh * hs, d), "mat"), (p + "wk", (nkv * hs, d), "mat"),
                 (p + "wv", (nkv * hs, d), "mat"), (p + "wo", (d, nh * hs), "mat")]
        plan.append((p + "ffn_norm", (d,), "vec"))
        if bias:
            plan.append((p + "ffn_norm_bias", (d,), "vec"))
        plan += [(p + "w1", (h, d), "mat"), (p + "w2", (d, h), "mat"), (p + "w3", (h, d), "mat")]
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
    q = rows * cols
    s_off = align_up(q)
    return q, s_off, s_off + 4 * rows * n_groups(cols, group_size)


def layout(cfg):
    """[(name, shape, kind, offset, scale_offset|None)] and the file size."""
    out = []
    off = HEADER_SIZE
    for name, shape, kind in tensor_plan(cfg):
        off = align_up(off)
        if kind == "vec":
            out.append((name, shape, kind, off, None))
            off += 4 * shape[0]
        else:
            _, s_off, total = matrix_bytes(shape[0], shape[1], cfg["weight_type"], cfg["group_size"])
            out.append((name, shape, kind, off, None if s_off is None else off + s_off))
            off += total
    return out, off


def file_size_of(cfg):
    """layout(cfg)'s file size without listing every layer: all layers take the same
    bytes (each starts 64-byte aligned), so a bogus n_layers costs nothing."""
    one, two = (layout(dict(cfg, n_layers=n))[1] for n in (1, 2))
    return one + (cfg["n_layers"] - 1) * (two - one)


def pack_header(cfg, file_size):
    vals = dict(cfg)
    vals.update(magic=MAGIC, version=VERSION, header_size=HEADER_SIZE, alignment=ALIGN,
                file_size=file_size, rope_layout=0)
    head = struct.pack(HEADER_FMT, *[vals[k] for k in HEADER_FIELDS])
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
    for k in ("norm_type", "norm_pos", "final_norm", "shared_classifier", "norm_bias"):
        if k in cfg and cfg[k] not in (0, 1):
            raise ExportError(f"config field {k} = {cfg[k]!r} must be 0 or 1")
    if cfg["weight_type"] not in DTYPE_NAMES:
        raise ExportError(f"config field weight_type = {cfg['weight_type']!r} is unknown")
    if cfg["weight_type"] == WT_Q8_0 and not 0 < cfg["group_size"] <= MAX_GROUP:
        raise ExportError(f"--group-size must be in 1..{MAX_GROUP} for q8_0 "
                          f"(got {cfg['group_size']})")
    if not (cfg["norm_eps"] >= 0 and math.isfinite(cfg["norm_eps"])):
        raise ExportError(f"config field norm_eps = {cfg['norm_eps']!r} must be finite and >= 0")
    if not (cfg["rope_theta"] > 0 and math.isfinite(cfg["rope_theta"])):
        raise ExportError(f"config field rope_theta = {cfg['rope_theta']!r} must be finite and > 0")


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


def write_llmw(path, cfg, src):
    """Write `src` (a Source) as LLMW to `path` with header values from cfg."""
    validate_config(cfg)
    entries, file_size = layout(cfg)
    src.check([(n, s) for n, s, _, _, _ in entries])
    max_err = 0.0
    with atomic_output(path) as f:
        f.write(pack_header(cfg, file_size))
        for name, shape, kind, off, _ in entries:
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
                max_err = max(max_err, write_matrix(f, name, arr, cfg["weight_type"],
                                                    cfg["group_size"]))
            del arr
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
    if vals["version"] != VERSION:
        raise ExportError(f"{path}: LLMW version {vals['version']} is not supported (only {VERSION})")
    if vals["header_size"] != HEADER_SIZE or vals["alignment"] != ALIGN:
        raise ExportError(f"{path}: header_size {vals['header_size']} / alignment "
                          f"{vals['alignment']} must be {HEADER_SIZE} / {ALIGN}")
    if vals["rope_layout"] != 0:
        raise ExportError(f"{path}: rope_layout {vals['rope_layout']} is not supported here (only 0)")
    vals["norm_eps"] = float(vals["norm_eps"])
    vals["rope_theta"] = float(vals["rope_theta"])
    return vals, size


def load_llmw(path):
    """An LLMW file as a Source (q8_0 / f16 matrices come back as float32)."""
    hdr, size = read_llmw_header(path)
    cfg = {k: v for k, v in hdr.items() if k not in ("magic",)}
    try:
        validate_config(cfg)
    except ExportError as e:
        raise ExportError(f"{path}: {e}")
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
    wt, gs = cfg["weight_type"], cfg["group_size"]
    for name, shape, kind, off, s_off in entries:
        if kind == "vec" or wt == WT_F32:
            fn = lambda off=off, shape=shape: _mm(path, np.dtype("<f4"), off, shape)
        elif wt == WT_F16:
            fn = lambda off=off, shape=shape: _mm(path, np.dtype("<f2"), off, shape).astype(np.float32)
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


HF_ALLOWED_ARCH = ("LlamaForCausalLM",)


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
                  f"layers.{l}.w3": p + "mlp.up_proj.weight"})
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
    if arch is not None and not any(a in HF_ALLOWED_ARCH for a in arch if isinstance(a, str)):
        raise ExportError(f"config.json: architectures {arch} is not supported "
                          f"(only LlamaForCausalLM)")
    mt = conf.get("model_type", "llama")
    if mt != "llama":
        raise ExportError(f"config.json: model_type {mt!r} is not supported (only 'llama')")
    if conf.get("rope_scaling") not in (None, {}):
        raise ExportError(f"config.json: rope_scaling {conf['rope_scaling']} is not supported "
                          f"(plain RoPE only)")
    act = conf.get("hidden_act", "silu")
    if act != "silu":
        raise ExportError(f"config.json: hidden_act {act!r} is not supported (only silu)")
    for k in ("attention_bias", "mlp_bias"):
        if _cfg_bool(conf, k, where):
            raise ExportError(f"config.json: {k} = true is not supported (no linear biases)")
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
    rp = _cfg_type(conf, "rope_parameters", where, dict, "an object")  # newer transformers
    if rp:
        if rp.get("rope_type", "default") != "default":
            raise ExportError(f"config.json: rope_parameters {rp} is not supported (plain RoPE only)")
        theta = _cfg_float(rp, "rope_theta", "config.json: rope_parameters", theta, low_ok=False)
    tied = _cfg_bool(conf, "tie_word_embeddings", where)

    # the weights
    single = os.path.join(folder, "model.safetensors")
    index = os.path.join(folder, "model.safetensors.index.json")
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
                files[p] = SafetensorsFile(p)
            if name not in files[p].tensors:
                raise ExportError(f"{index}: tensor {name} is not in shard {fname}")
            where_is[name] = files[p]
        wdesc = f"{len(files)} safetensors shard(s) in {folder}"
    elif os.path.exists(single):
        sf = SafetensorsFile(single)
        where_is = {n: sf for n in sf.tensors}
        wdesc = f"{single}"
    else:
        raise ExportError(f"{folder}: no model.safetensors or model.safetensors.index.json "
                          f"(pytorch_model.bin is not supported)")
    _check_layer_count(L, len(where_is), where, "num_hidden_layers")
    for name in where_is:
        if name.endswith(".bias") and ("self_attn" in name or "mlp" in name):
            raise ExportError(f"tensor {name}: linear biases are not supported")
    has_bias = "model.layers.0.input_layernorm.bias" in where_is
    if tied and "lm_head.weight" in where_is:
        log("note: tie_word_embeddings is true; lm_head.weight is ignored")
    cfg = dict(dim=d, hidden_dim=h, n_layers=L, n_heads=nh, n_kv_heads=nkv, vocab_size=V,
               seq_len=S, head_size=hs, norm_eps=float(eps), rope_theta=float(theta),
               shared_classifier=int(tied), norm_bias=int(has_bias))
    src = Source(f"Hugging Face Llama model {folder} ({wdesc})", cfg)
    src.config_name = "config.json"
    names = hf_names(L)
    for canon, sname in names.items():
        if sname not in where_is:
            continue
        sf = where_is[sname]
        sf.validate(sname)
        shape = sf.tensors[sname][1]
        loader = lambda sf=sf, sname=sname: sf.load(sname)
        if canon.endswith(".wq"):
            loader = lambda sf=sf, sname=sname: unpermute_rotary(sf.load(sname), nh, hs)
        elif canon.endswith(".wk"):
            loader = lambda sf=sf, sname=sname: unpermute_rotary(sf.load(sname), nkv, hs)
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
            + (", norm biases" if cfg.get("norm_bias") else ""))


def read_checkpoint(path):
    """(config dict, {name: float32 array}) of any input (LLMW, llama2.c, HF, .pt, Meta).

    config has the LLMW header fields (norm_type 0 rms / 1 layer, norm_pos 0 pre / 1 post,
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
                    rope_layout=0, weight_type=WT_F32, group_size=0)
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
               shared_classifier=int(a.shared), norm_bias=int(a.norm_bias))
    validate_config(dict(cfg, weight_type=WT_F32, group_size=0))
    src = Source(f"random model (seed {a.seed})", cfg)
    plan = tensor_plan(dict(cfg, weight_type=WT_F32, group_size=0))
    emb_std = a.emb_std or d ** -0.25   # logits (x . row) come out with std ~ dim^0.5 * emb_std
    for idx, (name, shape, kind) in enumerate(plan):
        def gen(idx=idx, name=name, shape=shape, kind=kind):
            rng = np.random.default_rng([a.seed, idx])
            if name.endswith("_bias"):
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
    id2piece = {}
    for piece, i in vocab.items():
        if not _is_count(i):
            raise ExportError(f"{path}: vocab entry {piece!r} has id {i!r}; ids must be "
                              f"non-negative integers")
        if i in id2piece:
            raise ExportError(f"{path}: id {i} used by both {id2piece[i]!r} and {piece!r}")
        id2piece[i] = piece
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
# command line

INPUTS_HELP = """\
input kinds (auto-detected; what was detected is printed on stderr):
  llama2.c legacy .bin     headerless: 7 int32 (dim hidden_dim n_layers n_heads
                           n_kv_heads vocab_size seq_len), then float32 weights;
                           vocab_size < 0 means a separate classifier at the end
  llama2.c v1 / v2 .bin    magic "ak42": version 1 fp32, version 2 Q8_0 (dequantized)
  LLMW .bin                this engine's format (re-export: change dtype/flags)
  llama2.c .pt             training checkpoint with model_args and model
  Hugging Face folder      config.json (LlamaForCausalLM) + model.safetensors or
                           model.safetensors.index.json; F32/F16/BF16 tensors;
                           q/k projections are un-permuted to interleaved RoPE
  Meta folder              params.json + consolidated.*.pth (several shards are
                           concatenated)

defaults come from the input: RMSNorm (LayerNorm if it has norm biases), pre-norm,
final norm on, the input's eps (1e-5 for llama2.c files), rope_theta 10000 unless
the input says otherwise.

other commands:
  %(prog)s tokenizer INPUT OUTPUT.bin
      INPUT: sentencepiece tokenizer.model, a Llama-2-style tokenizer.json (BPE with
      byte fallback), or a folder holding one. Writes llama2.c's tokenizer.bin.
  %(prog)s random [--dim 64 --hidden-dim 172 --layers 2 --heads 4 --kv-heads 2
      --vocab 97 --seq-len 128 --head-size N --seed 0 --shared|--unshared
      --norm-bias] [model options] OUTPUT
      a seeded random checkpoint (see `%(prog)s random --help`).

Errors print one line and exit 1; no partial output file is left behind.
"""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(2)


def add_model_options(p, converting=True):
    g = p.add_argument_group("output options")
    g.add_argument("--dtype", choices=list(DTYPES), default="f32",
                   help="matrix storage: f32, f16 or q8_0 (default f32); norms stay f32")
    g.add_argument("--group-size", type=int, default=DEFAULT_GROUP, metavar="N",
                   help="q8_0 group length along each row (default 32)")
    g.add_argument("--norm", choices=list(NORM_TYPES), default=None,
                   help="norm type written to the header: rms or layer (default: rms, "
                        "or layer when the input has norm biases)")
    g.add_argument("--norm-pos", choices=list(NORM_POS), default=None,
                   help="pre- or post-norm blocks (default pre)")
    g.add_argument("--final-norm", choices=list(ONOFF), default=None,
                   help="apply the final norm before the LM head (default on)")
    g.add_argument("--norm-eps", type=float, default=None, metavar="E",
                   help="norm epsilon (default: the input's; 1e-5 for llama2.c files)")
    if converting:
        g.add_argument("--seq-len", type=int, default=None, metavar="N",
                       help="override the context length written to the header")
    g.add_argument("--rope-theta", type=float, default=None, metavar="T",
                   help="override the RoPE base (default: the input's, else 10000)")


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
    log(f"wrote {out}: {size} bytes, {DTYPE_NAMES[cfg['weight_type']]}{gs}, "
        f"norm {'layer' if cfg['norm_type'] else 'rms'} {'post' if cfg['norm_pos'] else 'pre'}, "
        f"final norm {'on' if cfg['final_norm'] else 'off'}, eps {cfg['norm_eps']:g}, "
        f"theta {cfg['rope_theta']:g}{extra}")


def cmd_convert(argv):
    p = Parser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
               usage="%(prog)s [options] INPUT OUTPUT\n"
                     "       %(prog)s tokenizer INPUT OUTPUT.bin\n"
                     "       %(prog)s random [options] OUTPUT",
               description="Convert a Llama-style checkpoint to the engine's LLMW format "
                           "(version 1).",
               epilog=INPUTS_HELP)
    p.add_argument("input", metavar="INPUT", help="checkpoint file or folder (see input kinds)")
    p.add_argument("output", metavar="OUTPUT", help="the LLMW file to write")
    add_model_options(p)
    a = p.parse_args(argv)
    src = detect(a.input)
    log(f"detected {src.desc}: {describe(src.cfg)}")
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
                           "BOS/EOS written as '\\n<s>\\n' / '\\n</s>\\n').")
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
