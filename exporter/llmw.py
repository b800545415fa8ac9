"""The LLMW format (FORMAT.md): its constants, the tensor plan, the file layout, the header
and tensor directory bytes, and the checks a configuration must pass."""
import math
import struct

import numpy as np

from .common import ExportError

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
DTYPES = {"f32": WT_F32, "f16": WT_F16, "q8_0": WT_Q8_0, "q4_0": WT_Q4_0, "q4_K": WT_Q4_K}
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
V2_FMT = "<IIQfffiIIIIIffiQf"  # at byte 96: tensor_count, rope_scaling, directory_offset, rope_factor,
V2_FIELDS = ("tensor_count", "rope_scaling", "directory_offset", "rope_factor",   # low/high freq
             "rope_low_freq_factor", "rope_high_freq_factor", "rope_orig_ctx",    # factors, orig
             "qkv_bias", "qk_norm", "out_norm", "qk_norm_whole",                  # ctx, flags;
             "ffn_act", "embed_scale", "query_scalar", "sliding_window",          # Gemma's at 144
             "local_layers", "rope_local_theta")
assert struct.calcsize(V2_FMT) == 76
FFN_ACT = {"silu": 0, "gelu_tanh": 1}
GEMMA_FIELDS = ("ffn_act", "embed_scale", "query_scalar", "sliding_window", "local_layers", "rope_local_theta")
ROPE_SCALING = {"none": 0, "linear": 1, "llama3": 2}
ROPE_SCALING_NAMES = {v: k for k, v in ROPE_SCALING.items()}
V2_DEFAULTS = dict(rope_scaling=0, rope_factor=0.0, rope_low_freq_factor=0.0,
                   rope_high_freq_factor=0.0, rope_orig_ctx=0, qkv_bias=0, qk_norm=0, out_norm=0,
                   qk_norm_whole=0, ffn_act=0, embed_scale=0.0, query_scalar=0.0, sliding_window=0,
                   local_layers=0, rope_local_theta=0.0)


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
        if qk_norm:   # one head's weights, or (qk_norm_whole, OLMo 2) the whole q's and k's
            whole = bool(cfg.get("qk_norm_whole"))
            plan += [(p + "q_norm", ((nh if whole else 1) * hs,), "vec"),
                     (p + "k_norm", ((nkv if whole else 1) * hs,), "vec")]
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
    q4_K file stores a matrix whose rows are not whole superblocks of 256 as q4_0
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
    for k in ("qkv_bias", "qk_norm", "out_norm", "qk_norm_whole"):
        if cfg.get(k, 0) not in (0, 1):
            raise ExportError(f"config field {k} = {cfg[k]!r} must be 0 or 1")
    if cfg.get("qk_norm_whole") and not cfg.get("qk_norm"):
        raise ExportError("config field qk_norm_whole = 1 needs qk_norm = 1 (the weights it spans)")
    if cfg.get("ffn_act", 0) not in FFN_ACT.values():
        raise ExportError(f"config field ffn_act = {cfg['ffn_act']!r} is unknown (0 silu, 1 gelu_tanh)")
    for k in ("embed_scale", "query_scalar"):
        if not (cfg.get(k, 0.0) >= 0 and math.isfinite(cfg.get(k, 0.0))):
            raise ExportError(f"config field {k} = {cfg[k]!r} must be 0 (none) or finite and > 0")
    sw, mask = cfg.get("sliding_window", 0), cfg.get("local_layers", 0)
    if not isinstance(sw, (int, np.integer)) or isinstance(sw, bool) or not 0 <= sw <= INT32_MAX:
        raise ExportError(f"config field sliding_window = {sw!r} must be 0 (none) or a positive 32-bit integer")
    if not isinstance(mask, (int, np.integer)) or not 0 <= mask < 1 << min(cfg["n_layers"], 64):
        raise ExportError(f"config field local_layers = {mask!r} must be a mask of layers 0..{min(cfg['n_layers'], 64) - 1}")
    if mask and not sw:
        raise ExportError("config field local_layers needs a sliding_window")
    if sw and not (cfg.get("rope_local_theta", 0.0) > 0 and math.isfinite(cfg["rope_local_theta"])):
        raise ExportError(f"config field rope_local_theta = {cfg.get('rope_local_theta')!r} must be finite and > 0")
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
        need = [k for k in ("rope_scaling", "qkv_bias", "qk_norm", "out_norm", "qk_norm_whole") + GEMMA_FIELDS
                if cfg.get(k)]
        if cfg["head_size"] * cfg["n_heads"] != cfg["dim"]:
            need.append("head_size * n_heads != dim")
        if need:
            raise ExportError(f"LLMW version 1 cannot hold {', '.join(need)}: write version 2")
