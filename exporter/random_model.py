"""Seeded random checkpoints of any shape and variant (`export.py random`)."""
import math

import numpy as np

from .common import ExportError
from .llmw import DEFAULT_EPS, DEFAULT_THETA, tensor_plan, validate_config, WT_F32
from .source import Source

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
