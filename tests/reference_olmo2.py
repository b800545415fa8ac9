#!/usr/bin/python3
"""Independent float64 reference of OLMo 2 (Olmo2ForCausalLM), for the tests
of issue 26, item 3. Written from the published architecture (Hugging Face
transformers' modeling_olmo2.py and configuration_olmo2.py, read for the
facts listed here), not from any engine code. numpy only.

A Hugging Face folder (config.json, model.safetensors, F32 or BF16) in HF's
own names and layout. Per token x (positions 0..T-1, all at once):
  x = embed[token]                                  (no embedding scale)
  per layer:  h = x + N2(attn(x));  y = h + N4(mlp(h))
      N2, N4: post_attention_layernorm, post_feedforward_layernorm; no norm
      on a sublayer's input (Olmo2DecoderLayer has no input_layernorm)
  N(z) = w * z / sqrt(mean(z^2) + eps), eps = rms_norm_eps (default 1e-5)
  attn: q = q_norm(q_proj a), k = k_norm(k_proj a): one RMSNorm over the
        whole projection (n_heads*head_dim values for q, n_kv_heads*head_dim
        for k, weights of those lengths), before the split into heads and
        before RoPE; v = v_proj a. head_dim = config head_dim, else
        hidden_size / num_attention_heads. RoPE on (i, i + hs/2) pairs,
        angle pos * theta^(-2i/hs), theta = rope_theta (or
        rope_parameters.rope_theta); scores q.k / sqrt(head_dim), causal;
        query head h reads kv head h // (n_heads / n_kv_heads); o_proj.
  mlp:  down(silu(gate(a)) * up(a))
  final: N(x) with model.norm; logits = lm_head @ x (tie_word_embeddings
        defaults to false: lm_head.weight), embed when tied.

  w = load(folder);  logits = forward(w, tokens)      # (T, vocab) float64
  nll(w, tokens)                                      # mean NLL of tokens[1:]
  write_random_folder(folder, config, seed)           # a random checkpoint

forward() takes `mistakes`, a set of names, each a plausible implementation
error (see MISTAKES), so a test can measure what each one costs.
"""
import json
import os

import numpy as np

import safetensors_io

MISTAKES = {
    "per_head_qk_norm": "q/k norm over each head (Qwen3's), weights sliced per head",
    "no_qk_norm": "no q/k norm",
    "no_output_norms": "the sublayers' output norms left out",
    "input_norms": "a norm (weight 1) on each sublayer's input as well",
    "no_final_norm": "no final norm",
}


read_safetensors = safetensors_io.read_safetensors


def load(folder):
    conf = json.load(open(os.path.join(folder, "config.json")))
    return {"config": conf, "t": read_safetensors(os.path.join(folder, "model.safetensors"))}


def rms(z, w, eps):
    return w * (z / np.sqrt(np.mean(z * z, axis=-1, keepdims=True) + eps))


def rope_half(x, theta):
    """x (T, heads, hs) at positions 0..T-1, pairs (i, i + hs/2)."""
    T, _, hs = x.shape
    freq = theta ** (-2.0 * np.arange(hs // 2) / hs)
    ang = np.arange(T)[:, None] * freq
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., :hs // 2], x[..., hs // 2:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def qk_norm(z, w, heads, hs, eps, mistakes):
    """z (T, heads*hs) through the q or k norm: whole, or (a mistake) per head."""
    if "no_qk_norm" in mistakes:
        return z
    if "per_head_qk_norm" in mistakes:
        T = z.shape[0]
        return rms(z.reshape(T, heads, hs), w.reshape(heads, hs), eps).reshape(T, heads * hs)
    return rms(z, w, eps)


def forward(w, tokens, mistakes=frozenset()):
    c, t = w["config"], w["t"]
    D, nh = c["hidden_size"], c["num_attention_heads"]
    nkv = c.get("num_key_value_heads") or nh
    hs = c.get("head_dim") or D // nh
    eps = c.get("rms_norm_eps", 1e-5)
    theta = (c.get("rope_parameters") or {}).get("rope_theta", c.get("rope_theta", 10000.0))
    emb = t["model.embed_tokens.weight"]
    T = len(tokens)
    hidden = np.arange(T)[None, :] > np.arange(T)[:, None]
    silu = lambda u: u * (0.5 + 0.5 * np.tanh(0.5 * u))   # u / (1 + e^-u), without overflow
    x = emb[np.asarray(tokens)]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        inp = (lambda z: rms(z, 1.0, eps)) if "input_norms" in mistakes else (lambda z: z)
        out = (lambda z, n: z) if "no_output_norms" in mistakes else \
            (lambda z, n: rms(z, t[p + n + ".weight"], eps))
        z = inp(x)
        q = qk_norm(z @ t[a + "q_proj.weight"].T, t[a + "q_norm.weight"], nh, hs, eps, mistakes)
        k = qk_norm(z @ t[a + "k_proj.weight"].T, t[a + "k_norm.weight"], nkv, hs, eps, mistakes)
        v = (z @ t[a + "v_proj.weight"].T).reshape(T, nkv, hs)
        q, k = rope_half(q.reshape(T, nh, hs), theta), rope_half(k.reshape(T, nkv, hs), theta)
        k, v = np.repeat(k, nh // nkv, axis=1), np.repeat(v, nh // nkv, axis=1)
        sc = np.einsum("thd,shd->hts", q, k) / np.sqrt(hs)
        sc = np.where(hidden, -np.inf, sc)
        sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
        sc /= sc.sum(axis=-1, keepdims=True)
        o = np.einsum("hts,shd->thd", sc, v).reshape(T, nh * hs) @ t[a + "o_proj.weight"].T
        x = x + out(o, "post_attention_layernorm")
        z = inp(x)
        f = (silu(z @ t[p + "mlp.gate_proj.weight"].T) * (z @ t[p + "mlp.up_proj.weight"].T)) \
            @ t[p + "mlp.down_proj.weight"].T
        x = x + out(f, "post_feedforward_layernorm")
    if "no_final_norm" not in mistakes:
        x = rms(x, t["model.norm.weight"], eps)
    head = emb if c.get("tie_word_embeddings", False) else t["lm_head.weight"]
    return x @ head.T


def nll(w, tokens, mistakes=frozenset()):
    """Mean negative log-likelihood of tokens[1:] given the ones before."""
    lg = forward(w, tokens, mistakes)
    m = lg.max(axis=-1, keepdims=True)
    lp = lg - m - np.log(np.exp(lg - m).sum(axis=-1, keepdims=True))
    return float(-lp[np.arange(len(tokens) - 1), np.asarray(tokens[1:])].mean())


def write_random_folder(folder, conf, seed, head_gains=(0.4, 2.5), final_gain=1.0, out_gain=1.0,
                        emb_std=1.0):
    """config.json (conf, with the Olmo2 class and model_type) and an F32
    model.safetensors of random weights: matrices N(0, 1/fan_in), each head's
    q and k rows scaled by a gain spread over head_gains (heads of different
    sizes, as a trained model's are: the whole norm and a per-head one then
    differ), o_proj and down_proj times out_gain (what the output norms
    undo), norm weights uniform in [0.7, 1.3] (the final norm's times
    final_gain: sharper logits), embeddings N(0, emb_std^2) (away from 1:
    an input norm would change their scale)."""
    os.makedirs(folder, exist_ok=True)
    rs = np.random.RandomState(seed)
    D, H, L = conf["hidden_size"], conf["intermediate_size"], conf["num_hidden_layers"]
    nh, V = conf["num_attention_heads"], conf["vocab_size"]
    nkv = conf.get("num_key_value_heads") or nh
    hs = conf.get("head_dim") or D // nh
    t = {"model.embed_tokens.weight": rs.normal(0, emb_std, (V, D)),
         "model.norm.weight": rs.uniform(0.7, 1.3, D) * final_gain}
    if not conf.get("tie_word_embeddings", False):
        t["lm_head.weight"] = rs.normal(0, D ** -0.5, (V, D))
    for l in range(L):
        p, a = f"model.layers.{l}.", f"model.layers.{l}.self_attn."
        for name, shape in ((a + "q_proj", (nh * hs, D)), (a + "k_proj", (nkv * hs, D)), (a + "v_proj", (nkv * hs, D)),
                            (a + "o_proj", (D, nh * hs)), (p + "mlp.gate_proj", (H, D)), (p + "mlp.up_proj", (H, D)),
                            (p + "mlp.down_proj", (D, H))):
            t[name + ".weight"] = rs.normal(0, shape[1] ** -0.5, shape)
        for name, n in (("q_proj", nh), ("k_proj", nkv)):
            gains = np.repeat(np.linspace(head_gains[0], head_gains[1], n)[rs.permutation(n)], hs)
            t[a + name + ".weight"] *= gains[:, None]
        t[a + "o_proj.weight"] *= out_gain
        t[p + "mlp.down_proj.weight"] *= out_gain
        for name, n in ((a + "q_norm", nh * hs), (a + "k_norm", nkv * hs), (p + "post_attention_layernorm", D),
                        (p + "post_feedforward_layernorm", D)):
            t[name + ".weight"] = rs.uniform(0.7, 1.3, n)
    safetensors_io.write_hf_folder(folder, t, conf, "Olmo2ForCausalLM", "olmo2")
