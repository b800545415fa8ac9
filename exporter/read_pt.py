"""Reader of llama2.c's training checkpoints (.pt: model_args + model), and the Source over
llama2.c/Meta state dicts that the Meta reader shares."""
from .common import ExportError
from .llmw import DEFAULT_EPS, DEFAULT_THETA, INT32_MAX
from .jsonconf import _cfg_float, _cfg_int
from .source import _check_layer_count, Source
from .torchfile import _state_dict, _torch, _torch_load

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
