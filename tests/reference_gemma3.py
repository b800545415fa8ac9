#!/usr/bin/python3
"""Independent float64 reference of Gemma 3's text model (Gemma3ForCausalLM),
for the tests of issue 26, item 2. Written from the published architecture
(Hugging Face transformers' modeling_gemma3.py / configuration_gemma3.py and
masking_utils.py, read for the facts listed here), not from any engine code.
Needs numpy and torch (/usr/bin/python3).

A Hugging Face folder (config.json, model.safetensors) in HF's own names and
layout. Per token x (positions 0..T-1, all at once):
  x = embed[token] * s, s = sqrt(hidden_size) rounded to the checkpoint's
      dtype (torch_dtype: bfloat16 rounds sqrt(640) = 25.298 to 25.25)
  per layer l, of type layer_types[l] ("sliding_attention" or
  "full_attention"; without the key: sliding unless (l + 1) % 6 == 0, from
  sliding_window_pattern when given):
      h = x + N2(attn(N1(x)));  y = h + N4(ffn(N3(h)))      (peri-norm)
      N1..N4: input_layernorm, post_attention_layernorm,
      pre_feedforward_layernorm, post_feedforward_layernorm
  N(z) = z / sqrt(mean(z^2) + eps) * (1 + w)   (the weights are offsets from 1)
  attn: q, k, v projections; each head of q and of k through its own N
        (q_norm, k_norm, also 1 + w); RoPE on (i, i + hs/2) pairs, angle
        pos * base^(-2i/hs), base rope_local_base_freq (default 10000) on
        sliding layers, rope_theta on full ones (rope_scaling, linear, on
        full layers only); scores q.k * query_pre_attn_scalar^-0.5, then
        c * tanh(score / c) when attn_logit_softcapping = c is set; causal,
        and on sliding layers key j is seen by query i only when
        i - j < sliding_window; query head h reads kv head h // group
  ffn:  down(gelu_tanh(gate(a)) * up(a)), gelu_tanh(u) = u/2 (1 + tanh(
        sqrt(2/pi) (u + 0.044715 u^3)))
  final: N(x) with model.norm; logits = embed @ x (tied) or lm_head; then
        c * tanh(logits / c) when final_logit_softcapping = c is set.

  w = load(folder);  logits = forward(w, tokens)      # (T, vocab) float64
  nll(w, tokens)                                      # mean NLL of tokens[1:]
  write_random_folder(folder, config, seed)           # a random checkpoint

forward() takes `mistakes`, a set of names, each a plausible implementation
error (see MISTAKES), so a test can measure what each one costs.
"""
import json
import math
import os

import numpy as np
import torch

import safetensors_io
from reference import read_safetensors   # the same file format as the other families

DTYPE = torch.float64
MISTAKES = {
    "weight_not_offset": "norm weights w instead of 1 + w",
    "no_output_norms": "the sublayers' output norms left out (pre-norm)",
    "window_edge": "a sliding window one position wider (i - j <= window)",
    "local_base_global": "the sliding layers' RoPE base = rope_theta",
    "gelu_erf": "GELU by erf instead of the tanh form",
    "embed_scale_exact": "the embedding scale sqrt(hidden) not rounded to the dtype",
    "no_embed_scale": "no embedding scale",
    "scale_by_head_size": "scores / sqrt(head_dim) instead of query_pre_attn_scalar",
}


def bf16_round(x):
    """float -> nearest bfloat16 (ties to even), back as float."""
    b = np.array([x], dtype=np.float32).view(np.uint32)[0]
    b = (int(b) + 0x7FFF + ((int(b) >> 16) & 1)) & 0xFFFF0000
    return float(np.array([b], dtype=np.uint32).view(np.float32)[0])


def dtype_round(x, dtype):
    if dtype == "bfloat16":
        return bf16_round(x)
    if dtype == "float16":
        return float(np.float16(x))
    return float(np.float32(x))


def layer_types(conf):
    if conf.get("layer_types"):
        return list(conf["layer_types"])
    p = conf.get("sliding_window_pattern", 6)
    return ["sliding_attention" if (l + 1) % p else "full_attention" for l in range(conf["num_hidden_layers"])]


def load(folder):
    conf = json.load(open(os.path.join(folder, "config.json")))
    conf = conf.get("text_config", conf)
    t = read_safetensors(os.path.join(folder, "model.safetensors"))
    t = {k[len("language_model."):] if k.startswith("language_model.") else k: v for k, v in t.items()}
    return {"config": conf, "t": t}


def rms(z, w, eps, mistakes):
    g = w if "weight_not_offset" in mistakes else 1.0 + w
    return z / torch.sqrt(torch.mean(z * z, dim=-1, keepdim=True) + eps) * g


def rope_half(x, base, scaling):
    """x (T, heads, hs) at positions 0..T-1, pairs (i, i + hs/2)."""
    T, _, hs = x.shape
    freq = base ** (-2.0 * torch.arange(hs // 2, dtype=DTYPE) / hs)
    if scaling and scaling.get("rope_type", scaling.get("type")) == "linear":
        freq = freq / scaling["factor"]
    ang = torch.arange(T, dtype=DTYPE)[:, None] * freq
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    a, b = x[..., :hs // 2], x[..., hs // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def forward(w, tokens, mistakes=frozenset()):
    c, t = w["config"], w["t"]
    D, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hs = c.get("head_dim") or D // nh
    eps = c.get("rms_norm_eps", 1e-6)
    types = layer_types(c)
    window = c.get("sliding_window") or 4096
    if "window_edge" in mistakes:
        window += 1
    local = c.get("rope_local_base_freq", 10000.0)
    glob = c.get("rope_theta", 1000000.0)
    if "local_base_global" in mistakes:
        local = glob
    scale = (hs if "scale_by_head_size" in mistakes else c.get("query_pre_attn_scalar", hs)) ** -0.5
    cap_attn, cap_final = c.get("attn_logit_softcapping"), c.get("final_logit_softcapping")
    emb = t["model.embed_tokens.weight"]
    s = math.sqrt(D) if "embed_scale_exact" in mistakes else dtype_round(math.sqrt(D), c.get("torch_dtype", "float32"))
    if "no_embed_scale" in mistakes:
        s = 1.0
    T = len(tokens)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    with torch.no_grad():
        x = emb[torch.tensor(tokens)] * s
        for l, kind in enumerate(types[:c["num_hidden_layers"]]):
            p = f"model.layers.{l}."
            a = p + "self_attn."
            N = lambda z, name: rms(z, t[p + name + ".weight"], eps, mistakes)
            z = N(x, "input_layernorm")
            q = (z @ t[a + "q_proj.weight"].T).view(T, nh, hs)
            k = (z @ t[a + "k_proj.weight"].T).view(T, nkv, hs)
            v = (z @ t[a + "v_proj.weight"].T).view(T, nkv, hs)
            q = rms(q, t[a + "q_norm.weight"], eps, mistakes)
            k = rms(k, t[a + "k_norm.weight"], eps, mistakes)
            sliding = kind == "sliding_attention"
            base, scaling = (local, None) if sliding else (glob, c.get("rope_scaling"))
            q, k = rope_half(q, base, scaling), rope_half(k, base, scaling)
            k = k.repeat_interleave(nh // nkv, dim=1)
            v = v.repeat_interleave(nh // nkv, dim=1)
            sc = torch.einsum("thd,shd->hts", q, k) * scale
            if cap_attn:
                sc = cap_attn * torch.tanh(sc / cap_attn)
            hidden = j > i
            if sliding:
                hidden = hidden | (i - j >= window)
            sc = sc.masked_fill(hidden, float("-inf"))
            o = torch.einsum("hts,shd->thd", torch.softmax(sc, dim=-1), v).reshape(T, nh * hs)
            o = o @ t[a + "o_proj.weight"].T
            x = x + (o if "no_output_norms" in mistakes else N(o, "post_attention_layernorm"))
            z = N(x, "pre_feedforward_layernorm")
            u = z @ t[p + "mlp.gate_proj.weight"].T
            if "gelu_erf" in mistakes:
                g = 0.5 * u * (1.0 + torch.erf(u / math.sqrt(2.0)))
            else:
                g = 0.5 * u * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * u ** 3)))
            f = (g * (z @ t[p + "mlp.up_proj.weight"].T)) @ t[p + "mlp.down_proj.weight"].T
            x = x + (f if "no_output_norms" in mistakes else N(f, "post_feedforward_layernorm"))
        x = rms(x, t["model.norm.weight"], eps, mistakes)
        head = t.get("lm_head.weight", emb)
        logits = x @ head.T
        if cap_final:
            logits = cap_final * torch.tanh(logits / cap_final)
        return logits


def nll(w, tokens, mistakes=frozenset()):
    """Mean negative log-likelihood of tokens[1:] given the ones before."""
    lg = torch.log_softmax(forward(w, tokens, mistakes), dim=-1)
    return float(-lg[torch.arange(len(tokens) - 1), torch.tensor(tokens[1:])].mean())


def write_random_folder(folder, conf, seed, emb_std=None, gate_gain=1.0, final_gain=1.0):
    """config.json (conf, with torch_dtype) and model.safetensors of random
    weights in that dtype (F32 or BF16): matrices N(0, 1/fan_in) (gate_proj
    times gate_gain), norm weights (offsets from 1) uniform in [-0.3, 0.3],
    embeddings N(0, emb_std^2) (default 1/sqrt(D)); the final norm's
    weights around final_gain - 1 (a gain of final_gain: sharper logits,
    so every error shows more in the NLL)."""
    os.makedirs(folder, exist_ok=True)
    rs = np.random.RandomState(seed)
    D, H, L = conf["hidden_size"], conf["intermediate_size"], conf["num_hidden_layers"]
    nh, nkv, V = conf["num_attention_heads"], conf["num_key_value_heads"], conf["vocab_size"]
    hs = conf.get("head_dim") or D // nh
    t = {"model.embed_tokens.weight": rs.normal(0, emb_std or D ** -0.5, (V, D)),
         "model.norm.weight": rs.uniform(-0.3, 0.3, D) + (final_gain - 1.0)}
    for l in range(L):
        p, a = f"model.layers.{l}.", f"model.layers.{l}.self_attn."
        for name, shape in ((a + "q_proj", (nh * hs, D)), (a + "k_proj", (nkv * hs, D)), (a + "v_proj", (nkv * hs, D)),
                            (a + "o_proj", (D, nh * hs)), (p + "mlp.gate_proj", (H, D)), (p + "mlp.up_proj", (H, D)),
                            (p + "mlp.down_proj", (D, H))):
            t[name + ".weight"] = rs.normal(0, shape[1] ** -0.5 * (gate_gain if name.endswith("gate_proj") else 1.0), shape)
        for name, n in ((a + "q_norm", hs), (a + "k_norm", hs), (p + "input_layernorm", D),
                        (p + "post_attention_layernorm", D), (p + "pre_feedforward_layernorm", D),
                        (p + "post_feedforward_layernorm", D)):
            t[name + ".weight"] = rs.uniform(-0.3, 0.3, n)
    safetensors_io.write_hf_folder(folder, t, conf, "Gemma3ForCausalLM", "gemma3_text")
