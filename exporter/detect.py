"""Which reader an input needs (detect), a one-line description, and read_checkpoint for
Python users."""
import os
import struct

from .common import ExportError
from .llmw import DEFAULT_THETA, MAGIC, ROPE_SCALING_NAMES, V2_DEFAULTS, WT_F32
from .read_llama2c import load_ak42, load_legacy
from .read_llmw import load_llmw
from .torchfile import _torch_load
from .read_hf import load_hf
from .read_pt import load_pt
from .read_meta import load_meta

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
            + (" over the whole q and k" if cfg.get("qk_norm_whole") else "")
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
