"""Reader of llama2.c's .bin checkpoints: the headerless legacy file and the ak42 versions 1 and 2."""
import os
import struct

import numpy as np

from .common import ExportError
from .llmw import DEFAULT_EPS, DEFAULT_THETA
from .source import _mm, SeqLayout, Source


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
