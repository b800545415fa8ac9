"""Reader of Meta folders: params.json and consolidated.*.pth shards, concatenated."""
import glob
import os

from .common import ExportError, log
from .llmw import DEFAULT_EPS, DEFAULT_THETA
from .jsonconf import _cfg_bool, _cfg_float, _cfg_int, _json
from .torchfile import _state_dict, _torch, _torch_load
from .read_pt import _hidden_dim, _state_source


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
