#!/usr/bin/python3
"""Independent float64 PyTorch reference of the forward pass, for the tests.

Written from the model's math, not from the C code. Needs numpy and torch,
which here come from Debian: run it with /usr/bin/python3.

  /usr/bin/python3 tests/reference.py CKPT --tokens 1,5,9 [--norm rms|layer]
      [--norm-pos pre|post|peri|out] [--final-norm on|off] [--norm-eps E] [--qk-norm on|off] --out FILE

writes the logits of every position as raw little-endian float32, shape
(T, vocab), row-major; the tokens sit at positions 0..T-1.

Model (x is one token's hidden vector, positions 0..T-1, all at once with a
causal mask):
  x = embedding[token]
  per layer:  pre   h = x + attn(N1(x));        y = h + ffn(N3(h))
              post  h = N1(x + attn(x));        y = N3(h + ffn(h))
              peri  h = x + N2(attn(N1(x)));    y = h + N4(ffn(N3(h)))
              out   h = x + N2(attn(x));        y = h + N4(ffn(h))
              N1, N3 with att_norm, ffn_norm; N2, N4 with att_out_norm,
              ffn_out_norm, ones (and zero biases) where the checkpoint has none
  optional final norm (default off for post, else on); logits = classifier @ x
  RMSNorm   g * x / sqrt(mean(x^2) + eps)   (no bias, even if the checkpoint has one)
  LayerNorm g * (x - mean) / sqrt(biased var + eps) + b  (torch layer_norm)
            b = 0 unless the checkpoint provides norm biases (legacy never does)
  attn      q,k,v = Wq a + bq, Wk a + bk, Wv a + bv (biases only where the
            checkpoint has them: Qwen2); then, where the checkpoint has q/k norm
            weights (Qwen3), each head of q and k RMS-normed with them (eps the
            norm eps); RoPE (theta 10000 unless the checkpoint says) on
            interleaved pairs (2i, 2i+1) of each head (LLMW, llama2.c) or on
            (i, i + hs/2) (Hugging Face's rotate_half, for HF folders), angle
            pos * f_i with f_i = theta^(-2i/hs), rescaled as HF's
            modeling_rope_utils does: linear f_i / factor; llama3 keeps
            wavelengths 2pi/f_i below orig/high_freq_factor, divides those
            above orig/low_freq_factor by factor, and blends in between with
            s = (orig/wavelength - low) / (high - low): (1 - s) f_i/factor + s f_i;
            query head h reads kv head h // (n_heads / n_kv_heads);
            softmax(q.k / sqrt(hs)) causal; out = Wo concat(heads); the head
            size hs is the checkpoint's (dim / n_heads unless it says)
  ffn       W2 (silu(W1 a) * (W3 a))
All weights are stored as (out_features, in_features), so y = W @ a.

Import use:
  w = load_checkpoint(path)
  logits = forward(w, [1, 5, 9], norm="rms", norm_pos="pre", final_norm=None, eps=1e-5)
  write_random_legacy(path, dim, hidden_dim, n_layers, n_heads, n_kv_heads,
                      vocab, seq_len, seed, shared_classifier)

A Hugging Face folder (config.json + model.safetensors, Llama / Qwen2 /
Qwen3) is read in HF's own layout by load_hf(): HF names, rotate_half RoPE,
no permutation of any weight.

Checkpoint formats: load_checkpoint() sniffs the first bytes and dispatches
through FORMATS (see register_format); the headerless llama2.c legacy format
is the fallback. Every loader returns the same dict (see _empty_weights); the
norm biases are optional entries (None = zero), so a format that carries
LayerNorm biases only has to fill them in.
"""
import argparse
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

import safetensors_io

DTYPE = torch.float64
DEFAULT_EPS = 1e-5
DEFAULT_THETA = 10000.0
LEGACY_HEADER = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len")


# ---------------------------------------------------------------- loading

def _empty_weights(cfg):
    """The in-memory model every loader returns.

    config: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (>0),
            seq_len, shared_classifier; a format may add defaults for
            forward(): norm, norm_pos, final_norm, norm_eps, rope_theta.
    Tensors are float64, (out_features, in_features) for matrices:
      tok_embeddings (vocab, dim); classifier (vocab, dim)
      layers[l]: att_norm (dim), att_norm_bias (dim or None),
                 wq (n_heads*hs, dim), wk, wv (n_kv*hs, dim), wo (dim, n_heads*hs),
                 ffn_norm (dim), ffn_norm_bias (dim or None),
                 w1 (hidden, dim), w2 (dim, hidden), w3 (hidden, dim)
      final_norm (dim); final_norm_bias (dim or None)
    """
    return {"config": dict(cfg), "tok_embeddings": None, "layers": [],
            "final_norm": None, "final_norm_bias": None, "classifier": None}


def _legacy_sizes(cfg):
    """[(name, shape)] of the float32 tensors after the header, in file order."""
    d, h, L = cfg["dim"], cfg["hidden_dim"], cfg["n_layers"]
    nh, nkv, V, S = cfg["n_heads"], cfg["n_kv_heads"], cfg["vocab_size"], cfg["seq_len"]
    hs = d // nh
    out = [("tok_embeddings", (V, d)),
           ("att_norm", (L, d)),
           ("wq", (L, nh * hs, d)),
           ("wk", (L, nkv * hs, d)),
           ("wv", (L, nkv * hs, d)),
           ("wo", (L, d, nh * hs)),
           ("ffn_norm", (L, d)),
           ("w1", (L, h, d)),
           ("w2", (L, d, h)),
           ("w3", (L, h, d)),
           ("final_norm", (d,)),
           ("freq_cis_real", (S, hs // 2)),   # legacy RoPE tables: skipped
           ("freq_cis_imag", (S, hs // 2))]
    if not cfg["shared_classifier"]:
        out.append(("classifier", (V, d)))
    return out


def _check_config(cfg, path):
    for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"):
        if cfg[k] <= 0:
            raise ValueError(f"{path}: bad {k}={cfg[k]}")
    if cfg["dim"] % cfg["n_heads"] or (cfg["dim"] // cfg["n_heads"]) % 2:
        raise ValueError(f"{path}: dim {cfg['dim']} must split into n_heads={cfg['n_heads']} even heads")
    if cfg["n_heads"] % cfg["n_kv_heads"]:
        raise ValueError(f"{path}: n_heads={cfg['n_heads']} not a multiple of n_kv_heads={cfg['n_kv_heads']}")


def load_legacy(path, data):
    """llama2.c legacy: 7 int32 header, float32 tensors, no magic, no biases."""
    if len(data) < 28:
        raise ValueError(f"{path}: too short for a llama2.c header ({len(data)} bytes)")
    hdr = struct.unpack("<7i", data[:28])
    cfg = dict(zip(LEGACY_HEADER, hdr))
    cfg["shared_classifier"] = cfg["vocab_size"] > 0
    cfg["vocab_size"] = abs(cfg["vocab_size"])
    _check_config(cfg, path)
    layout = _legacy_sizes(cfg)
    n_floats = sum(int(np.prod(s)) for _, s in layout)
    expect = 28 + 4 * n_floats
    if len(data) != expect:
        raise ValueError(f"{path}: {len(data)} bytes, but header {hdr} needs exactly {expect}")
    flat = np.frombuffer(data, dtype="<f4", offset=28, count=n_floats)
    t = {}
    off = 0
    for name, shape in layout:
        n = int(np.prod(shape))
        t[name] = torch.from_numpy(flat[off:off + n].astype(np.float64).reshape(shape))
        off += n
    w = _empty_weights(cfg)
    w["tok_embeddings"] = t["tok_embeddings"]
    w["classifier"] = t["tok_embeddings"] if cfg["shared_classifier"] else t["classifier"]
    w["final_norm"] = t["final_norm"]
    for l in range(cfg["n_layers"]):
        w["layers"].append({
            "att_norm": t["att_norm"][l], "att_norm_bias": None,
            "wq": t["wq"][l], "wk": t["wk"][l], "wv": t["wv"][l], "wo": t["wo"][l],
            "ffn_norm": t["ffn_norm"][l], "ffn_norm_bias": None,
            "w1": t["w1"][l], "w2": t["w2"][l], "w3": t["w3"][l],
        })
    return w


# (name, sniff(first 64 bytes) -> bool, loader(path, data) -> weights dict).
# Add the self-describing format here with register_format(); legacy is the
# fallback, because its first bytes are just `dim` and carry no magic.
FORMATS = []


def register_format(name, sniff, loader):
    FORMATS.append((name, sniff, loader))


def load_llmw(path, data):
    """The engine's own format, read (and dequantized) by the tests' own LLMW
    reader (tests/llmw.py, independent of export.py); its header's norm
    settings become forward()'s defaults."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import llmw
    h, t = llmw.read(path)
    if h["rope_layout"] != 0:
        raise ValueError(f"{path}: the reference rotates interleaved pairs only (rope_layout 0)")
    w = _empty_weights({k: h[k] for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
                                          "vocab_size", "seq_len", "shared_classifier", "head_size")})
    w["config"].update(norm=("rms", "layer")[h["norm_type"]], norm_pos=("pre", "post", "peri", "out")[h["norm_pos"]],
                       final_norm=bool(h["final_norm"]), norm_eps=h["norm_eps"], rope_theta=h["rope_theta"],
                       qk_norm_whole=bool(h.get("qk_norm_whole")))
    scaling = {0: None, 1: "linear", 2: "llama3"}[h["rope_scaling"]]
    if scaling:
        w["config"]["rope_scaling"] = dict(rope_type=scaling, factor=h["rope_factor"],
                                           low_freq_factor=h["rope_low_freq_factor"],
                                           high_freq_factor=h["rope_high_freq_factor"],
                                           original_max_position_embeddings=h["rope_orig_ctx"])
    f64 = lambda name: torch.from_numpy(np.asarray(t[name], dtype=np.float64)) if name in t else None
    w["tok_embeddings"] = f64("tok_embeddings")
    w["classifier"] = w["tok_embeddings"] if h["shared_classifier"] else f64("classifier")
    w["final_norm"], w["final_norm_bias"] = f64("final_norm"), f64("final_norm_bias")
    for l in range(h["n_layers"]):
        p = f"layers.{l}."
        w["layers"].append({
            "att_norm": f64(p + "attn_norm"), "att_norm_bias": f64(p + "attn_norm_bias"),
            "wq": f64(p + "wq"), "wk": f64(p + "wk"), "wv": f64(p + "wv"), "wo": f64(p + "wo"),
            "ffn_norm": f64(p + "ffn_norm"), "ffn_norm_bias": f64(p + "ffn_norm_bias"),
            "w1": f64(p + "w1"), "w2": f64(p + "w2"), "w3": f64(p + "w3"),
            "q_bias": f64(p + "q_bias"), "k_bias": f64(p + "k_bias"), "v_bias": f64(p + "v_bias"),
            "q_norm": f64(p + "q_norm"), "k_norm": f64(p + "k_norm"),
            "att_out_norm": f64(p + "attn_out_norm"), "att_out_norm_bias": f64(p + "attn_out_norm_bias"),
            "ffn_out_norm": f64(p + "ffn_out_norm"), "ffn_out_norm_bias": f64(p + "ffn_out_norm_bias"),
        })
    return w


def read_safetensors(path):
    """{name: float64 tensor} of a safetensors file (tests/safetensors_io.py)."""
    return {k: torch.from_numpy(v) for k, v in safetensors_io.read_safetensors(path).items()}


def load_hf(folder):
    """A Hugging Face folder (config.json, model.safetensors) of LlamaForCausalLM,
    Qwen2ForCausalLM or Qwen3ForCausalLM in HF's layout: rotate_half RoPE on
    the weights as stored; rope_scaling, q/k/v biases and q/k norms as the
    config and the tensors give them."""
    import json
    conf = json.load(open(os.path.join(folder, "config.json")))
    t = read_safetensors(os.path.join(folder, "model.safetensors"))
    nh = conf["num_attention_heads"]
    cfg = dict(dim=conf["hidden_size"], hidden_dim=conf["intermediate_size"],
               n_layers=conf["num_hidden_layers"], n_heads=nh,
               n_kv_heads=conf.get("num_key_value_heads") or nh, vocab_size=conf["vocab_size"],
               seq_len=conf.get("max_position_embeddings", 2048),
               shared_classifier=bool(conf.get("tie_word_embeddings", False)),
               head_size=conf.get("head_dim") or conf["hidden_size"] // nh)
    w = _empty_weights(cfg)
    w["config"].update(norm="rms", norm_pos="pre", final_norm=True, rope_layout="half",
                       norm_eps=conf.get("rms_norm_eps", 1e-6), rope_theta=conf.get("rope_theta", 10000.0),
                       rope_scaling=conf.get("rope_scaling"))
    w["tok_embeddings"] = t["model.embed_tokens.weight"]
    w["classifier"] = w["tok_embeddings"] if cfg["shared_classifier"] else t["lm_head.weight"]
    w["final_norm"] = t["model.norm.weight"]
    for l in range(cfg["n_layers"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        w["layers"].append({
            "att_norm": t[p + "input_layernorm.weight"], "att_norm_bias": None,
            "wq": t[a + "q_proj.weight"], "wk": t[a + "k_proj.weight"], "wv": t[a + "v_proj.weight"],
            "wo": t[a + "o_proj.weight"],
            "q_bias": t.get(a + "q_proj.bias"), "k_bias": t.get(a + "k_proj.bias"),
            "v_bias": t.get(a + "v_proj.bias"),
            "q_norm": t.get(a + "q_norm.weight"), "k_norm": t.get(a + "k_norm.weight"),
            "ffn_norm": t[p + "post_attention_layernorm.weight"], "ffn_norm_bias": None,
            "w1": t[p + "mlp.gate_proj.weight"], "w2": t[p + "mlp.down_proj.weight"],
            "w3": t[p + "mlp.up_proj.weight"],
        })
    return w


register_format("llmw", lambda head: head[:4] == b"LLMW", load_llmw)


def load_checkpoint(path):
    if os.path.isdir(path):
        return load_hf(path)
    with open(path, "rb") as f:
        data = f.read()
    for name, sniff, loader in FORMATS:
        if sniff(data[:64]):
            return loader(path, data)
    return load_legacy(path, data)


# ---------------------------------------------------------------- the model

def norm_apply(x, g, b, kind, eps):
    """Normalise each row (one token's hidden vector) of x."""
    if kind == "rms":  # RMSNorm has no bias: a checkpoint's LayerNorm biases are unused
        return g * x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
    if kind == "layer":
        return F.layer_norm(x, (x.shape[-1],), weight=g, bias=b, eps=eps)
    raise ValueError(f"unknown norm {kind!r}")


def rope_freqs(hs, theta, scaling=None):
    """f_i = theta^(-2i/hs), i < hs/2, rescaled by HF's rope_scaling (linear or llama3)."""
    i = torch.arange(hs // 2, dtype=DTYPE)
    freq = theta ** (-2.0 * i / hs)
    kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    if kind == "linear":
        return freq / scaling["factor"]
    if kind == "llama3":
        factor, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        orig = scaling["original_max_position_embeddings"]
        wavelen = 2 * math.pi / freq
        smooth = (orig / wavelen - lo) / (hi - lo)
        blended = (1 - smooth) * freq / factor + smooth * freq
        return torch.where(wavelen < orig / hi, freq, torch.where(wavelen > orig / lo, freq / factor, blended))
    assert kind == "default", f"rope_type {kind!r}"
    return freq


def rope(x, theta, layout="interleaved", scaling=None):
    """x (T, heads, hs) at positions 0..T-1. Pair i (angle pos * f_i, see
    rope_freqs) is (2i, 2i+1) in the interleaved layout (llama2.c, Meta) and
    (i, i + hs/2) in the half-split one (Hugging Face's rotate_half)."""
    T, _, hs = x.shape
    freq = rope_freqs(hs, theta, scaling)                    # (hs/2,)
    ang = torch.arange(T, dtype=DTYPE)[:, None] * freq      # (T, hs/2)
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    first, second = (slice(0, None, 2), slice(1, None, 2)) if layout == "interleaved" else \
                    (slice(0, hs // 2), slice(hs // 2, hs))
    x0, x1 = x[..., first], x[..., second]
    out = torch.empty_like(x)
    out[..., first] = x0 * cos - x1 * sin
    out[..., second] = x0 * sin + x1 * cos
    return out


def attention(a, lw, cfg, theta, eps=DEFAULT_EPS, qk_norm=True):
    T = a.shape[0]
    nh, nkv = cfg["n_heads"], cfg["n_kv_heads"]
    hs = cfg.get("head_size") or cfg["dim"] // nh
    q, k, v = a @ lw["wq"].T, a @ lw["wk"].T, a @ lw["wv"].T
    if lw.get("q_bias") is not None:
        q, k, v = q + lw["q_bias"], k + lw["k_bias"], v + lw["v_bias"]
    whole = qk_norm and lw.get("q_norm") is not None and cfg.get("qk_norm_whole")
    if whole:   # OLMo 2: one RMSNorm over the whole q and the whole k
        q = norm_apply(q, lw["q_norm"], None, "rms", eps)
        k = norm_apply(k, lw["k_norm"], None, "rms", eps)
    q, k, v = q.view(T, nh, hs), k.view(T, nkv, hs), v.view(T, nkv, hs)
    if qk_norm and lw.get("q_norm") is not None and not whole:
        q = norm_apply(q, lw["q_norm"], None, "rms", eps)
        k = norm_apply(k, lw["k_norm"], None, "rms", eps)
    layout = cfg.get("rope_layout", "interleaved")
    scaling = cfg.get("rope_scaling")
    q, k = rope(q, theta, layout, scaling), rope(k, theta, layout, scaling)
    group = nh // nkv
    k = k.repeat_interleave(group, dim=1)   # query head h -> kv head h // group
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hs)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    out = torch.einsum("hts,shd->thd", p, v).reshape(T, nh * hs)
    return out @ lw["wo"].T


def ffn(a, lw):
    return (F.silu(a @ lw["w1"].T) * (a @ lw["w3"].T)) @ lw["w2"].T


def _on_off(v):
    if isinstance(v, str):
        if v not in ("on", "off"):
            raise ValueError(f"final_norm must be on/off, not {v!r}")
        return v == "on"
    return bool(v)


def forward(weights, tokens, norm=None, norm_pos=None, final_norm=None, eps=None, qk_norm=None):
    """Logits (T, vocab), float64, for tokens at positions 0..T-1.

    None for an option means: the checkpoint's config if it names one, else
    the default (rms, pre, eps 1e-5; final norm on for pre, off for post;
    q/k norm on where the checkpoint has its weights). eps is also the q/k
    norm's.
    """
    qk_norm = True if qk_norm is None else _on_off(qk_norm)
    cfg = weights["config"]
    norm = norm or cfg.get("norm", "rms")
    norm_pos = norm_pos or cfg.get("norm_pos", "pre")
    if final_norm is None:
        final_norm = cfg.get("final_norm", norm_pos != "post")
    final_norm = _on_off(final_norm)
    eps = cfg.get("norm_eps", DEFAULT_EPS) if eps is None else float(eps)
    theta = cfg.get("rope_theta", DEFAULT_THETA)
    if norm_pos not in ("pre", "post", "peri", "out"):
        raise ValueError(f"unknown norm position {norm_pos!r}")
    tokens = [int(t) for t in tokens]
    if not tokens:
        raise ValueError("no tokens")
    for t in tokens:
        if not 0 <= t < cfg["vocab_size"]:
            raise ValueError(f"token {t} outside vocab 0..{cfg['vocab_size'] - 1}")

    with torch.no_grad():
        x = weights["tok_embeddings"][torch.tensor(tokens)].to(DTYPE)
        for lw in weights["layers"]:
            def n_att(z):
                return norm_apply(z, lw["att_norm"], lw.get("att_norm_bias"), norm, eps)

            def n_ffn(z):
                return norm_apply(z, lw["ffn_norm"], lw.get("ffn_norm_bias"), norm, eps)

            def n_out(z, which):   # the output norms: weight 1 where the checkpoint has none
                g = lw.get(which)
                g = torch.ones(z.shape[-1], dtype=DTYPE) if g is None else g
                return norm_apply(z, g, lw.get(which + "_bias"), norm, eps)

            def att(z):
                return attention(z, lw, cfg, theta, eps, qk_norm)
            if norm_pos == "pre":
                h = x + att(n_att(x))
                x = h + ffn(n_ffn(h), lw)
            elif norm_pos == "post":
                h = n_att(x + att(x))
                x = n_ffn(h + ffn(h, lw))
            elif norm_pos == "peri":
                h = x + n_out(att(n_att(x)), "att_out_norm")
                x = h + n_out(ffn(n_ffn(h), lw), "ffn_out_norm")
            else:  # out
                h = x + n_out(att(x), "att_out_norm")
                x = h + n_out(ffn(h, lw), "ffn_out_norm")
        if final_norm:
            x = norm_apply(x, weights["final_norm"], weights.get("final_norm_bias"), norm, eps)
        return x @ weights["classifier"].T


def greedy(weights, n_steps, start=1, **opts):
    """Greedy decoding from `start` (BOS): the token list, stopping at BOS or
    after n_steps tokens in total (llama2.c's -n counting)."""
    toks = [start]
    while len(toks) < n_steps:
        nxt = int(torch.argmax(forward(weights, toks, **opts)[-1]))
        if nxt == 1:
            break
        toks.append(nxt)
    return toks


# ---------------------------------------------------------------- random checkpoints

def write_random_legacy(path, dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab,
                        seq_len, seed, shared_classifier):
    """A seeded random llama2.c legacy checkpoint (negative vocab_size when
    the classifier is not shared). Scales keep activations O(1): matrices
    ~N(0, 0.6/sqrt(fan_in)) clamped to 0.02..0.1, norm weights 1 +- 0.2 so
    the norms visibly shape the output; embedding rows ~N(0, s^2) with s
    log-uniform in [0.01, 1] per token, so some tokens start with a mean
    square near eps and a misplaced or ignored eps shows in the logits."""
    assert dim % n_heads == 0 and (dim // n_heads) % 2 == 0 and n_heads % n_kv_heads == 0
    rs = np.random.RandomState(seed)
    hs = dim // n_heads
    L = n_layers

    def normal(std, *shape):
        return rs.normal(0.0, std, size=shape)

    def gains(*shape):
        return 1.0 + rs.uniform(-0.2, 0.2, size=shape)

    mat_std = lambda fan_in: min(0.1, max(0.02, 0.6 / math.sqrt(fan_in)))
    parts = [
        normal(1.0, vocab, dim) * 10 ** rs.uniform(-2, 0, size=(vocab, 1)),  # token_embedding
        gains(L, dim),                                            # rms_att_weight
        normal(mat_std(dim), L, n_heads * hs, dim),               # wq
        normal(mat_std(dim), L, n_kv_heads * hs, dim),            # wk
        normal(mat_std(dim), L, n_kv_heads * hs, dim),            # wv
        normal(mat_std(n_heads * hs), L, dim, n_heads * hs),      # wo
        gains(L, dim),                                            # rms_ffn_weight
        normal(mat_std(dim), L, hidden_dim, dim),                 # w1
        normal(mat_std(hidden_dim), L, dim, hidden_dim),          # w2
        normal(mat_std(dim), L, hidden_dim, dim),                 # w3
        gains(dim),                                               # rms_final_weight
        np.zeros((seq_len, hs // 2)),                             # freq_cis_real (unused)
        np.zeros((seq_len, hs // 2)),                             # freq_cis_imag (unused)
    ]
    if not shared_classifier:
        parts.append(normal(mat_std(dim), vocab, dim))            # classifier
    v = vocab if shared_classifier else -vocab
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", dim, hidden_dim, n_layers, n_heads, n_kv_heads, v, seq_len))
        for p in parts:
            f.write(np.ascontiguousarray(p, dtype="<f4").tobytes())
    return path


# ---------------------------------------------------------------- command line

def parse_tokens(s):
    try:
        return [int(t) for t in s.split(",") if t.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad token list {s!r} (want e.g. 1,5,9)")


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 reference logits for a checkpoint")
    ap.add_argument("checkpoint")
    ap.add_argument("--tokens", type=parse_tokens, required=True)
    ap.add_argument("--norm", choices=("rms", "layer"), default=None)
    ap.add_argument("--norm-pos", choices=("pre", "post", "peri", "out"), default=None)
    ap.add_argument("--final-norm", choices=("on", "off"), default=None)
    ap.add_argument("--norm-eps", type=float, default=None)
    ap.add_argument("--qk-norm", choices=("on", "off"), default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    w = load_checkpoint(a.checkpoint)
    if len(a.tokens) > w["config"]["seq_len"]:
        ap.error(f"{len(a.tokens)} tokens exceed seq_len {w['config']['seq_len']}")
    try:
        logits = forward(w, a.tokens, a.norm, a.norm_pos, a.final_norm, a.norm_eps, a.qk_norm)
    except ValueError as e:
        ap.error(str(e))
    logits.numpy().astype("<f4").tofile(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
