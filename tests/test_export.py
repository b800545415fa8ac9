"""Tests of export.py (Python level): the LLMW writer and readers, every input
kind, the tokenizer converter, and the error paths.

Run with the Debian interpreter (numpy, torch, sentencepiece):
  /usr/bin/python3 tests/run_tests.py tests/test_export.py

The LLMW layout is re-derived from the format description (tests/llmw.py),
independently of export.py's own layout code, and every value round trip
reads the written file through that reader, and the llama2.c formats are written here by
hand, so a shared misunderstanding does not pass unnoticed.
"""
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys

import numpy as np

import common
import llmw

BUILD_INDEPENDENT = True  # export.py only: no C build involved
EXPORT = os.path.join(common.ROOT, "export.py")
sys.path.insert(0, common.ROOT)
import exporter.detect  # noqa: E402
import exporter.read_hf  # noqa: E402
import exporter.safetensors  # noqa: E402
import exporter.tok_sentencepiece  # noqa: E402


# ---------------------------------------------------------------- helpers

def scratch_dir(name):
    d = common.scratch(os.path.join("export", name))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def run_export(*args):
    p = subprocess.run([sys.executable, EXPORT] + [str(a) for a in args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def export_ok(*args):
    rc, out, err = run_export(*args)
    assert rc == 0, f"export.py {' '.join(map(str, args))} failed (rc {rc}):\n{err}"
    return err


# LLMW files written by export.py are read back by the tests' own reader
# (tests/llmw.py), never by export.py's layout code
parse_llmw = llmw.parse


def read_legacy(path):
    """Independent reader of llama2.c's legacy .bin: (cfg tuple, {name: array})."""
    data = open(path, "rb").read()
    d, hid, L, nh, nkv, V, S = struct.unpack_from("<7i", data, 0)
    shared = V > 0
    V = abs(V)
    hs = d // nh
    f = np.frombuffer(data, "<f4", (len(data) - 28) // 4, 28)
    pos = 0

    def take(shape):
        nonlocal pos
        n = int(np.prod(shape))
        a = f[pos:pos + n].reshape(shape)
        pos += n
        return a
    t = {"tok_embeddings": take((V, d))}
    for key, shape in (("attn_norm", (d,)), ("wq", (nh * hs, d)), ("wk", (nkv * hs, d)),
                       ("wv", (nkv * hs, d)), ("wo", (d, nh * hs)), ("ffn_norm", (d,)),
                       ("w1", (hid, d)), ("w2", (d, hid)), ("w3", (hid, d))):
        for l in range(L):
            t[f"layers.{l}.{key}"] = take(shape)
    t["final_norm"] = take((d,))
    take((S * hs // 2,))
    take((S * hs // 2,))
    if not shared:
        t["classifier"] = take((V, d))
    assert pos * 4 + 28 == len(data), "legacy size"
    return (d, hid, L, nh, nkv, V, S, shared), t


def write_legacy(path, cfg, t):
    """Write a llama2.c legacy .bin from canonical tensors (test's own writer)."""
    d, hid, L, nh, nkv, V, S, shared = cfg
    hs = d // nh
    with open(path, "wb") as fh:
        fh.write(struct.pack("<7i", d, hid, L, nh, nkv, V if shared else -V, S))
        fh.write(np.asarray(t["tok_embeddings"], "<f4").tobytes())
        for key in ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2", "w3"):
            for l in range(L):
                fh.write(np.asarray(t[f"layers.{l}.{key}"], "<f4").tobytes())
        fh.write(np.asarray(t["final_norm"], "<f4").tobytes())
        fh.write(np.zeros(S * hs // 2 * 2, "<f4").tobytes())
        if not shared:
            fh.write(np.asarray(t["classifier"], "<f4").tobytes())


def stories():
    return common.model("stories260K.bin")


def assert_no_leftovers(folder, allowed):
    extra = sorted(set(os.listdir(folder)) - set(allowed))
    assert not extra, f"files left behind in {folder}: {extra}"


def f32(x):
    return np.float32(x)


# ---------------------------------------------------------------- legacy -> LLMW

def test_legacy_f32_roundtrip_exact():
    d = scratch_dir("legacy_f32")
    out = os.path.join(d, "s.bin")
    err = export_ok(stories(), out)
    assert "legacy" in err and "detected" in err, f"detection not reported on stderr: {err}"
    (dim, hid, L, nh, nkv, V, S, shared), ref = read_legacy(stories())
    cfg, t = llmw.read(out)
    assert sorted(t) == sorted(ref), f"names differ: {sorted(set(t) ^ set(ref))}"
    for k in ref:
        assert t[k].dtype == np.float32 and t[k].shape == ref[k].shape, k
        assert np.array_equal(t[k], ref[k]), f"{k} differs after legacy -> f32 -> tests/llmw.py"
    # and read_checkpoint reads the legacy file itself the same way
    cfg2, t2 = exporter.detect.read_checkpoint(stories())
    assert cfg2["format"] == "legacy" and cfg2["shared_classifier"] == 1
    for k in ref:
        assert np.array_equal(t2[k], ref[k]), f"read_checkpoint(legacy) {k} differs"
    for k, v in dict(dim=64, hidden_dim=172, n_layers=5, n_heads=8, n_kv_heads=4,
                     vocab_size=512, seq_len=512, head_size=8, shared_classifier=1).items():
        assert cfg[k] == v and cfg2[k] == v, f"config {k}: {cfg[k]} / {cfg2[k]}, expected {v}"


def test_header_and_alignment():
    d = scratch_dir("header")
    cases = [("stories_f32", [stories()], dict(weight_type=0, group_size=0)),
             ("stories_f16", [stories(), "--dtype", "f16"], dict(weight_type=1, group_size=0)),
             ("stories_q8", [stories(), "--dtype", "q8_0"], dict(weight_type=2, group_size=32)),
             ("stories_q8_g64", [stories(), "--dtype", "q8_0", "--group-size", "64"],
              dict(weight_type=2, group_size=64)),
             ("flags", [stories(), "--norm", "layer", "--norm-pos", "post", "--final-norm", "off",
                        "--norm-eps", "1e-6", "--seq-len", "100", "--rope-theta", "500000"],
              dict(norm_type=1, norm_pos=1, final_norm=0, norm_eps=f32(1e-6), seq_len=100,
                   rope_theta=500000.0)),
             ("random_bias_unshared_q8", ["random", "--norm-bias", "--unshared", "--dtype", "q8_0",
                                          "--group-size", "24", "--dim", "40", "--heads", "5",
                                          "--kv-heads", "1", "--hidden-dim", "50", "--vocab", "33"],
              dict(norm_bias=1, norm_type=1, shared_classifier=0, weight_type=2, group_size=24,
                   dim=40, n_heads=5, n_kv_heads=1, head_size=8, hidden_dim=50, vocab_size=33)),
             ("random_headsize_f16", ["random", "--dim", "48", "--heads", "4", "--kv-heads", "2",
                                      "--head-size", "16", "--dtype", "f16"],
              dict(head_size=16, dim=48, weight_type=1)),
             ("stories_peri", [stories(), "--norm-pos", "peri"], dict(norm_pos=2, out_norm=0)),
             ("random_peri_bias", ["random", "--norm-pos", "peri", "--norm-bias", "--qk-norm"],
              dict(norm_pos=2, out_norm=1, norm_bias=1, qk_norm=1)),
             ("random_out_q8", ["random", "--norm-pos", "out", "--dtype", "q8_0"],
              dict(norm_pos=3, out_norm=1, norm_bias=0, weight_type=2))]
    for name, args, expect in cases:
        def check(name=name, args=args, expect=expect):
            out = os.path.join(d, name + ".bin")
            if args[0] == "random":
                export_ok(*args, out)
            else:
                export_ok(*args, out)
            h, tensors, data = parse_llmw(out)
            base = dict(magic=b"LLMW", version=2, header_size=256, alignment=64, rope_layout=0,
                        file_size=len(data))
            if args[0] != "random":
                base.update(dim=64, hidden_dim=172, n_layers=5, n_heads=8, n_kv_heads=4,
                            vocab_size=512, seq_len=512, head_size=8, norm_type=0, norm_pos=0,
                            final_norm=1, norm_eps=f32(1e-5), rope_theta=10000.0,
                            shared_classifier=1, norm_bias=0)
            base.update(expect)
            for k, v in base.items():
                assert h[k] == v, f"{name}: header {k} = {h[k]!r}, expected {v!r}"
            assert h["file_size"] == os.path.getsize(out)
            for tname, (start, end, _) in tensors.items():
                assert start % 64 == 0, f"{name}: {tname} at offset {start}, not 64-aligned"
            last = max(e for _, e, _ in tensors.values())
            assert last == len(data), f"{name}: file continues after the last tensor"
            # the reader in export.py agrees with this independent one
            cfg, t = exporter.detect.read_checkpoint(out)
            _, mine = llmw.read(out)
            assert sorted(t) == sorted(mine), f"{name}: read_checkpoint names differ"
            for k in mine:
                assert np.array_equal(t[k], mine[k]), f"{name}: read_checkpoint {k} differs from tests/llmw.py"
        yield name, check


def test_f16_within_tolerance():
    d = scratch_dir("f16")
    out = os.path.join(d, "s16.bin")
    export_ok(stories(), out, "--dtype", "f16")
    _, ref = read_legacy(stories())
    h, raw, _ = parse_llmw(out)
    _, t = llmw.read(out)
    worst = 0.0
    for k, w in ref.items():
        if w.ndim == 1:
            assert raw[k][2].dtype == np.dtype("<f4") and np.array_equal(t[k], w), \
                f"norm {k} must stay f32 and exact"
            continue
        assert raw[k][2].dtype == np.dtype("<f2"), k
        # IEEE round to nearest: exactly numpy's float16 conversion; relative error <= 2^-11
        assert np.array_equal(raw[k][2], w.astype(np.float16)), f"{k}: not round-to-nearest f16"
        err = np.abs(t[k] - w)
        bound = np.abs(w) * 2.0 ** -11 + 2.0 ** -25   # half an ulp (+ subnormal spacing)
        assert (err <= bound).all(), f"{k}: f16 error {err.max()} beyond half an ulp"
        worst = max(worst, float(err.max()))
    assert worst < 1e-3, worst


def q8_row_by_hand(row, G):
    """One row quantized with plain Python loops over explicit column ranges."""
    cols = len(row)
    qs, scales = [], []
    for j in range(0, cols, G):
        grp = [f32(v) for v in row[j:min(j + G, cols)]]
        amax = max(abs(v) for v in grp)
        scale = f32(amax / f32(127.0))
        scales.append(scale)
        for v in grp:
            if scale == 0:
                qs.append(0)
                continue
            x = float(f32(v / scale))                     # float32 division, as C does
            q = int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)   # exact in float64
            qs.append(max(-127, min(127, q)))
    return qs, scales


def test_q8_0_within_tolerance_and_tail_groups():
    (dim, hid, L, *_), ref = read_legacy(stories())
    assert hid == 172
    d = scratch_dir("q8")
    for G in (32, 64):
        out = os.path.join(d, f"s_q8_{G}.bin")
        export_ok(stories(), out, "--dtype", "q8_0", "--group-size", G)
        h, raw, _ = parse_llmw(out)
        _, t = llmw.read(out)
        assert h["group_size"] == G
        for k, w in ref.items():
            if w.ndim == 1:
                assert np.array_equal(t[k], w), f"norm {k} must stay exact f32"
                continue
            q, s = raw[k][2]
            rows, cols = w.shape
            ng = -(-cols // G)
            assert s.shape == (rows, ng), f"{k}: scales shape {s.shape}, expected {(rows, ng)}"
            # per-group bound: |w - q*s| <= s/2 (plus float rounding)
            srep = np.repeat(s, G, axis=1)[:, :cols]
            err = np.abs(t[k] - w)
            assert (err <= srep * 0.5001 + 1e-12).all(), f"{k}: q8_0 error beyond half a step"
            assert np.allclose(t[k], q.astype(np.float32) * srep, rtol=0, atol=0), k
            assert np.abs(q).max() <= 127
        # the tail group of w2 (cols 172): 172 = 5*32 + 12, = 2*64 + 44
        for k in ("layers.0.w2", "layers.4.w2"):
            q, s = raw[k][2]
            for r in (0, 7, dim - 1):
                hq, hs_ = q8_row_by_hand(list(ref[k][r]), G)
                assert list(q[r]) == hq, f"{k} row {r} G {G}: q differs from the hand-computed row"
                assert [float(x) for x in s[r]] == [float(x) for x in hs_], \
                    f"{k} row {r} G {G}: scales differ from the hand-computed ones"
            ng = -(-172 // G)
            last = ref[k][:, (ng - 1) * G:]
            assert np.allclose(s[:, -1], np.abs(last).max(axis=1) / 127, rtol=1e-6), \
                f"{k}: last-group scale is not max|w| over columns {(ng - 1) * G}..171 / 127"


def test_q8_0_explicit_row():
    """A tiny legacy model whose w2 row 0 is written out by hand (hidden 40)."""
    d = scratch_dir("q8_explicit")
    dim, hid, L, nh, nkv, V, S = 8, 40, 1, 2, 2, 4, 4
    rng = np.random.default_rng(5)
    t = {"tok_embeddings": rng.standard_normal((V, dim)).astype(np.float32),
         "layers.0.attn_norm": np.ones(dim, np.float32), "layers.0.ffn_norm": np.ones(dim, np.float32),
         "final_norm": np.ones(dim, np.float32)}
    for k, shp in (("wq", (dim, dim)), ("wk", (dim, dim)), ("wv", (dim, dim)), ("wo", (dim, dim)),
                   ("w1", (hid, dim)), ("w2", (dim, hid)), ("w3", (hid, dim))):
        t[f"layers.0.{k}"] = rng.standard_normal(shp).astype(np.float32)
    u7, u9 = 2.0 ** -7, 2.0 ** -9
    # columns 0..31: k * 2^-7 for k = -16..15, with 127 and half-steps mixed in
    head = [k * u7 for k in range(-16, 16)]
    head[0] = 127 * u7           # max |w| = 127 * 2^-7 -> scale exactly 2^-7
    head[1] = 2.5 * u7           # halves round away from zero: 3, -3 (not 2, -2)
    head[2] = -2.5 * u7
    head[3] = 0.5 * u7
    tail = [127 * u9, -127 * u9, 0.5 * u9, -0.5 * u9, 1.5 * u9, 64 * u9, -3.5 * u9, 0.0]
    row = np.array(head + tail, np.float32)
    t["layers.0.w2"][0] = row
    t["layers.0.w2"][1] = 0.0    # an all-zero row: scale 0, q 0
    src = os.path.join(d, "tiny.bin")
    write_legacy(src, (dim, hid, L, nh, nkv, V, S, True), t)
    # group 32: two groups, [0, 32) and the short tail [32, 40)
    out = os.path.join(d, "tiny_q8_32.bin")
    export_ok(src, out, "--dtype", "q8_0", "--group-size", "32")
    _, raw, _ = parse_llmw(out)
    q, s = raw["layers.0.w2"][2]
    want_q = [127, 3, -3, 1] + list(range(-12, 16)) + [127, -127, 1, -1, 2, 64, -4, 0]
    assert list(q[0]) == want_q, f"group 32: q row 0 = {list(q[0])}, expected {want_q}"
    assert list(s[0]) == [u7, u9], f"group 32: scales {list(s[0])}, expected [2^-7, 2^-9]"
    assert list(q[1]) == [0] * 40 and list(s[1]) == [0.0, 0.0], "an all-zero row"
    # group 64: one short group of 40 columns, scale 2^-7 for all of them
    out = os.path.join(d, "tiny_q8_64.bin")
    export_ok(src, out, "--dtype", "q8_0", "--group-size", "64")
    _, raw, _ = parse_llmw(out)
    q, s = raw["layers.0.w2"][2]
    want_q = [127, 3, -3, 1] + list(range(-12, 16)) + [32, -32, 0, 0, 0, 16, -1, 0]
    assert list(q[0]) == want_q, f"group 64: q row 0 = {list(q[0])}, expected {want_q}"
    assert list(s[0]) == [u7], f"group 64: scales {list(s[0])}"


# ---------------------------------------------------------------- llama2.c v1 / v2

def test_llama2c_versioned_files():
    (dim, hid, L, nh, nkv, V, S, shared), ref = read_legacy(stories())
    d = scratch_dir("ak42")
    head = struct.pack("<Ii7i", 0x616B3432, 1, dim, hid, L, nh, nkv, V, S) + bytes([1])
    order_norms = ([f"layers.{l}.attn_norm" for l in range(L)] +
                   [f"layers.{l}.ffn_norm" for l in range(L)] + ["final_norm"])
    order_mats = ["tok_embeddings"] + [f"layers.{l}.{k}" for k in
                                       ("wq", "wk", "wv", "wo", "w1", "w2", "w3") for l in range(L)]
    v1 = os.path.join(d, "v1.bin")
    with open(v1, "wb") as fh:
        fh.write(head + b"\0" * (256 - len(head)))
        for k in order_norms + order_mats:
            fh.write(ref[k].astype("<f4").tobytes())
    out = os.path.join(d, "v1_llmw.bin")
    err = export_ok(v1, out)
    assert "version 1" in err, err
    _, t = llmw.read(out)
    for k in ref:
        assert np.array_equal(t[k], ref[k]), f"v1: {k} differs"
    # version 2: int8 + per-tensor scales (groups of 64 over the flattened tensor)
    gs = 64
    head2 = struct.pack("<Ii7i", 0x616B3432, 2, dim, hid, L, nh, nkv, V, S) + bytes([1]) + \
        struct.pack("<i", gs)
    v2 = os.path.join(d, "v2.bin")
    deq = {}
    with open(v2, "wb") as fh:
        fh.write(head2 + b"\0" * (256 - len(head2)))
        for k in order_norms:
            fh.write(ref[k].astype("<f4").tobytes())
        for k in order_mats:
            w = ref[k].reshape(-1, gs)
            s = (np.abs(w).max(axis=1) / 127).astype(np.float32)
            q = np.round(w / s[:, None]).astype(np.int8)
            fh.write(q.tobytes())
            fh.write(s.astype("<f4").tobytes())
            deq[k] = (q.astype(np.float32) * s[:, None]).reshape(ref[k].shape)
    out = os.path.join(d, "v2_llmw.bin")
    err = export_ok(v2, out)
    assert "version 2" in err, err
    _, t = llmw.read(out)
    for k in order_norms:
        assert np.array_equal(t[k], ref[k]), f"v2: norm {k} differs"
    for k in order_mats:
        assert np.array_equal(t[k], deq[k]), f"v2: {k} is not the dequantized int8 * scale"
    # a truncated v2 names the tensor
    bad = os.path.join(d, "v2_trunc.bin")
    with open(v2, "rb") as fh, open(bad, "wb") as fo:
        fo.write(fh.read(os.path.getsize(v2) - 1000))
    rc, _, err = run_export(bad, os.path.join(d, "never.bin"))
    assert rc != 0 and "truncated" in err and "w3" in err, err


# ---------------------------------------------------------------- Hugging Face

def hf_permute(w, n_heads):
    """HF's convert_llama_weights_to_hf permute (a torch tensor), as HF writes it."""
    dim1, dim2 = w.shape
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def write_safetensors(path, tensors):
    """{name: torch tensor} -> safetensors (our own writer: header length, JSON, data)."""
    import torch
    meta, blobs, off = {}, [], 0
    for name, t in tensors.items():
        if t.dtype == torch.bfloat16:
            b, dt = t.contiguous().view(torch.int16).numpy().tobytes(), "BF16"
        elif t.dtype == torch.float16:
            b, dt = t.contiguous().numpy().astype("<f2").tobytes(), "F16"
        elif t.dtype == torch.float64:
            b, dt = t.contiguous().numpy().astype("<f8").tobytes(), "F64"
        else:
            b, dt = t.contiguous().numpy().astype("<f4").tobytes(), "F32"
        meta[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    meta["__metadata__"] = {"format": "pt"}
    h = json.dumps(meta).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            fh.write(b)


HF_CFG = dict(dim=64, hidden=96, L=2, nh=4, nkv=2, V=50, S=128)


def make_hf(folder, sharded=False, tied=False, dtype="bf16", seed=0, config_updates=None,
            drop=(), reshape=None):
    """A tiny HF Llama folder. Returns {canonical name: the known interleaved float32
    weights, rounded to the stored dtype}."""
    import torch
    c = HF_CFG
    dim, hid, L, nh, nkv, V = c["dim"], c["hidden"], c["L"], c["nh"], c["nkv"], c["V"]
    hs = dim // nh
    g = torch.Generator().manual_seed(seed)
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]

    def rnd(*shape, scale=0.1):
        return (torch.randn(*shape, generator=g) * scale).to(tdt)
    known, hf = {}, {}
    emb = rnd(V, dim)
    known["tok_embeddings"], hf["model.embed_tokens.weight"] = emb, emb
    for l in range(L):
        p = f"model.layers.{l}."
        wq, wk = rnd(nh * hs, dim), rnd(nkv * hs, dim)
        known[f"layers.{l}.wq"], known[f"layers.{l}.wk"] = wq, wk
        hf[p + "self_attn.q_proj.weight"] = hf_permute(wq, nh)
        hf[p + "self_attn.k_proj.weight"] = hf_permute(wk, nkv)
        for ck, hk, shp in (("wv", "self_attn.v_proj", (nkv * hs, dim)),
                            ("wo", "self_attn.o_proj", (dim, nh * hs)),
                            ("w1", "mlp.gate_proj", (hid, dim)), ("w2", "mlp.down_proj", (dim, hid)),
                            ("w3", "mlp.up_proj", (hid, dim))):
            w = rnd(*shp)
            known[f"layers.{l}.{ck}"] = w
            hf[p + hk + ".weight"] = w
        for ck, hk in (("attn_norm", "input_layernorm"), ("ffn_norm", "post_attention_layernorm")):
            w = (1 + rnd(dim)).to(tdt)
            known[f"layers.{l}.{ck}"] = w
            hf[p + hk + ".weight"] = w
    fn = (1 + rnd(dim)).to(tdt)
    known["final_norm"], hf["model.norm.weight"] = fn, fn
    if not tied:
        cls = rnd(V, dim)
        known["classifier"], hf["lm_head.weight"] = cls, cls
    for name in drop:
        hf.pop(name)
    if reshape:
        name, shape = reshape
        hf[name] = rnd(*shape)
    conf = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": dim,
            "intermediate_size": hid, "num_hidden_layers": L, "num_attention_heads": nh,
            "num_key_value_heads": nkv, "vocab_size": V, "max_position_embeddings": c["S"],
            "rms_norm_eps": 1e-6, "rope_theta": 50000.0, "tie_word_embeddings": tied,
            "hidden_act": "silu", "rope_scaling": None, "torch_dtype": "bfloat16"}
    conf.update(config_updates or {})
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(conf, fh)
    if sharded:
        names = list(hf)
        parts = [names[:len(names) // 3], names[len(names) // 3:2 * len(names) // 3],
                 names[2 * len(names) // 3:]]
        wm = {}
        for i, part in enumerate(parts):
            fname = f"model-{i + 1:05d}-of-{len(parts):05d}.safetensors"
            write_safetensors(os.path.join(folder, fname), {n: hf[n] for n in part})
            wm.update({n: fname for n in part})
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as fh:
            json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, fh)
    else:
        write_safetensors(os.path.join(folder, "model.safetensors"), hf)
    return {k: v.to(torch.float32).numpy() for k, v in known.items()}


def test_hf_roundtrip():
    for sharded in (False, True):
        for tied in (False, True):
            for dtype in (("bf16", "f16", "f32") if not sharded and not tied else ("bf16",)):
                name = f"{'sharded' if sharded else 'single'}_{'tied' if tied else 'untied'}_{dtype}"

                def check(sharded=sharded, tied=tied, dtype=dtype, name=name):
                    d = scratch_dir("hf_" + name)
                    folder = os.path.join(d, "model")
                    # the original weights before rounding to bf16, to state the precision
                    known = make_hf(folder, sharded=sharded, tied=tied, dtype=dtype)
                    out = os.path.join(d, "hf.bin")
                    err = export_ok(folder, out)
                    assert "Hugging Face" in err, err
                    h, raw, _ = parse_llmw(out)
                    assert (h["dim"], h["hidden_dim"], h["n_layers"], h["n_heads"], h["n_kv_heads"],
                            h["vocab_size"], h["seq_len"], h["head_size"]) == (64, 96, 2, 4, 2, 50, 128, 16)
                    assert h["norm_eps"] == f32(1e-6) and h["rope_theta"] == 50000.0, h
                    assert h["shared_classifier"] == int(tied) and h["rope_layout"] == 0
                    cfg, t = llmw.read(out)
                    assert sorted(t) == sorted(known), sorted(set(t) ^ set(known))
                    for k, w in known.items():
                        # the stored values are exactly representable: no loss at all
                        assert np.array_equal(t[k], w), \
                            f"{name}: {k} is not the known interleaved weight"
                    # and read_checkpoint of the folder itself gives the same
                    cfg2, t2 = exporter.detect.read_checkpoint(folder)
                    for k, w in known.items():
                        assert np.array_equal(t2[k], w), f"{name}: read_checkpoint(folder) {k}"
                yield name, check


def test_hf_unpermute_is_inverse_of_hf_permute():
    import torch
    rng = np.random.default_rng(1)
    for nh, hs, dim in ((4, 16, 64), (2, 8, 24), (1, 2, 3)):
        w = rng.standard_normal((nh * hs, dim)).astype(np.float32)
        hfw = hf_permute(torch.from_numpy(w), nh).numpy()
        assert np.array_equal(exporter.read_hf.unpermute_rotary(hfw, nh, hs), w)
        assert np.array_equal(exporter.read_hf.permute_rotary(w, nh, hs), hfw)
        # interleaved pair (2i, 2i+1) of head 0 sits at rows i and i + hs/2 in HF's layout
        if hs >= 4:
            assert np.array_equal(hfw[1], w[2]) and np.array_equal(hfw[hs // 2], w[1])


# ---------------------------------------------------------------- .pt / Meta

def make_pt(path, bias=False, tied=True, prefix=True, seed=0):
    import torch
    args = dict(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=40, hidden_dim=None,
                multiple_of=16, norm_eps=1e-5, max_seq_len=64, dropout=0.0)
    hid = 96   # 4*32 -> int(2*128/3) = 85 -> rounded up to a multiple of 16
    g = torch.Generator().manual_seed(seed)
    sd = {"tok_embeddings.weight": torch.randn(40, 32, generator=g)}
    for l in range(2):
        p = f"layers.{l}."
        sd[p + "attention.wq.weight"] = torch.randn(32, 32, generator=g)
        sd[p + "attention.wk.weight"] = torch.randn(16, 32, generator=g)
        sd[p + "attention.wv.weight"] = torch.randn(16, 32, generator=g)
        sd[p + "attention.wo.weight"] = torch.randn(32, 32, generator=g)
        sd[p + "feed_forward.w1.weight"] = torch.randn(hid, 32, generator=g)
        sd[p + "feed_forward.w2.weight"] = torch.randn(32, hid, generator=g)
        sd[p + "feed_forward.w3.weight"] = torch.randn(hid, 32, generator=g)
        sd[p + "attention_norm.weight"] = 1 + 0.1 * torch.randn(32, generator=g)
        sd[p + "ffn_norm.weight"] = 1 + 0.1 * torch.randn(32, generator=g)
        if bias:
            sd[p + "attention_norm.bias"] = 0.1 * torch.randn(32, generator=g)
            sd[p + "ffn_norm.bias"] = 0.1 * torch.randn(32, generator=g)
    sd["norm.weight"] = 1 + 0.1 * torch.randn(32, generator=g)
    if bias:
        sd["norm.bias"] = 0.1 * torch.randn(32, generator=g)
    sd["output.weight"] = sd["tok_embeddings.weight"] if tied else torch.randn(40, 32, generator=g)
    model = {("_orig_mod." + k if prefix else k): v for k, v in sd.items()}
    torch.save({"model_args": args, "model": model, "iter_num": 10, "best_val_loss": 1.0}, path)
    return sd


PT_TO_CANON = dict(zip(["attention.wq", "attention.wk", "attention.wv", "attention.wo",
                        "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"],
                       ["wq", "wk", "wv", "wo", "w1", "w2", "w3"]))


def pt_canon(sd, shared):
    out = {"tok_embeddings": sd["tok_embeddings.weight"], "final_norm": sd["norm.weight"]}
    if "norm.bias" in sd:
        out["final_norm_bias"] = sd["norm.bias"]
    if not shared:
        out["classifier"] = sd["output.weight"]
    for l in range(2):
        p = f"layers.{l}."
        for a, b in PT_TO_CANON.items():
            out[f"layers.{l}.{b}"] = sd[p + a + ".weight"]
        out[f"layers.{l}.attn_norm"] = sd[p + "attention_norm.weight"]
        out[f"layers.{l}.ffn_norm"] = sd[p + "ffn_norm.weight"]
        if p + "attention_norm.bias" in sd:
            out[f"layers.{l}.attn_norm_bias"] = sd[p + "attention_norm.bias"]
            out[f"layers.{l}.ffn_norm_bias"] = sd[p + "ffn_norm.bias"]
    return {k: v.numpy() for k, v in out.items()}


def test_pt_checkpoint():
    for bias, tied in ((False, True), (True, False)):
        name = f"{'bias' if bias else 'nobias'}_{'tied' if tied else 'untied'}"

        def check(bias=bias, tied=tied, name=name):
            d = scratch_dir("pt_" + name)
            ckpt = os.path.join(d, "ckpt.pt")
            sd = make_pt(ckpt, bias=bias, tied=tied)
            out = os.path.join(d, "pt.bin")
            err = export_ok(ckpt, out)
            assert "llama2.c checkpoint" in err, err
            h, raw, _ = parse_llmw(out)
            assert (h["dim"], h["hidden_dim"], h["n_layers"], h["n_heads"], h["n_kv_heads"],
                    h["vocab_size"], h["seq_len"]) == (32, 96, 2, 4, 2, 40, 64), h
            assert h["shared_classifier"] == int(tied), h
            assert h["norm_bias"] == int(bias) and h["norm_type"] == int(bias), h
            assert h["norm_eps"] == f32(1e-5)
            want = pt_canon(sd, tied)
            _, t = llmw.read(out)
            assert sorted(t) == sorted(want), sorted(set(t) ^ set(want))
            for k, w in want.items():
                assert np.array_equal(t[k], w), f"{name}: {k} differs"
        yield name, check


def test_meta_consolidated():
    import torch
    for n_shards in (1, 2):
        def check(n_shards=n_shards):
            d = scratch_dir(f"meta_{n_shards}")
            sd = make_pt(os.path.join(d, "tmp.pt"), tied=False, prefix=False, seed=3)
            os.remove(os.path.join(d, "tmp.pt"))
            folder = os.path.join(d, "meta")
            os.makedirs(folder)
            params = {"dim": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": -1,
                      "multiple_of": 16, "ffn_dim_multiplier": None, "norm_eps": 1e-5,
                      "rope_theta": 20000.0}
            with open(os.path.join(folder, "params.json"), "w") as fh:
                json.dump(params, fh)
            bf = {k: v.to(torch.bfloat16) for k, v in sd.items()}
            bf["rope.freqs"] = torch.ones(4)
            for s in range(n_shards):
                shard = {}
                for k, v in bf.items():
                    if v.dim() == 1 or n_shards == 1:
                        shard[k] = v.clone()
                        continue
                    axis1 = (k.startswith("tok_embeddings.") or k.endswith(".attention.wo.weight")
                             or k.endswith(".feed_forward.w2.weight"))
                    shard[k] = torch.chunk(v, n_shards, dim=1 if axis1 else 0)[s].clone()
                torch.save(shard, os.path.join(folder, f"consolidated.{s:02d}.pth"))
            out = os.path.join(d, "meta.bin")
            err = export_ok(folder, out, "--seq-len", "256")
            assert "Meta" in err, err
            h, _, _ = parse_llmw(out)
            assert h["vocab_size"] == 40 and h["rope_theta"] == 20000.0 and h["seq_len"] == 256, h
            want = pt_canon({k: v.float() for k, v in bf.items()}, shared=False)
            _, t = llmw.read(out)
            for k, w in want.items():
                assert np.array_equal(t[k], w), f"{n_shards} shard(s): {k} differs"
        yield f"{n_shards}_shards", check


# ---------------------------------------------------------------- random and re-export

def test_random_checkpoints():
    d = scratch_dir("random")
    for shared in (True, False):
        for bias in (False, True):
            for dt in ("f32", "q8_0"):
                name = f"{'shared' if shared else 'unshared'}_{'bias' if bias else 'nobias'}_{dt}"

                def check(shared=shared, bias=bias, dt=dt, name=name):
                    out = os.path.join(d, name + ".bin")
                    args = ["random", "--seed", "7", "--dtype", dt,
                            "--shared" if shared else "--unshared"] + (["--norm-bias"] if bias else [])
                    export_ok(*args, out)
                    cfg, t = llmw.read(out)
                    assert cfg["shared_classifier"] == int(shared) and ("classifier" in t) != shared
                    assert cfg["norm_bias"] == int(bias)
                    for k, v in t.items():
                        assert np.isfinite(v).all(), k
                        if k.endswith("_bias"):
                            assert (np.abs(v) >= 0.049).all() and (np.abs(v) <= 0.2).all(), k
                        elif v.ndim == 1:
                            assert (np.abs(v - 1) <= 0.2).all() and v.std() > 0.01, k
                    # same seed, same bytes; another seed, other bytes
                    out2 = os.path.join(d, name + "_again.bin")
                    export_ok(*args, out2)
                    assert open(out, "rb").read() == open(out2, "rb").read(), "not deterministic"
                    args[2] = "8"
                    export_ok(*args, out2)
                    assert open(out, "rb").read() != open(out2, "rb").read(), "seed ignored"
                yield name, check


def test_random_output_norms():
    """`random --norm-pos peri|out` stores each layer's attn_out_norm and
    ffn_out_norm (with --norm-bias their biases), random around 1, in the
    directory after w3 (kinds 20..23); pre and post store none; version 1
    cannot hold them and says so; a re-export keeps them bit for bit."""
    d = scratch_dir("outnorm")
    names = ("attn_out_norm", "attn_out_norm_bias", "ffn_out_norm", "ffn_out_norm_bias")
    for pos in ("pre", "post", "peri", "out"):
        out = os.path.join(d, pos + ".bin")
        export_ok("random", "--layers", "3", "--norm-pos", pos, "--norm-bias", out)
        h, t = llmw.read(out)
        stored = pos in ("peri", "out")
        assert h["out_norm"] == int(stored) and h["norm_pos"] == ("pre", "post", "peri", "out").index(pos), h
        for l in range(3):
            for n in names:
                assert (f"layers.{l}.{n}" in t) == stored, (pos, l, n, sorted(t))
        if stored:
            g = t["layers.1.ffn_out_norm"]
            assert g.shape == (64,) and (np.abs(g - 1) <= 0.2).all() and g.std() > 0.01, g
            b = t["layers.2.attn_out_norm_bias"]
            assert (np.abs(b) >= 0.049).all() and (np.abs(b) <= 0.2).all(), b
            assert not np.array_equal(t["layers.0.attn_out_norm"], t["layers.0.ffn_out_norm"])
    again = os.path.join(d, "again.bin")
    export_ok(os.path.join(d, "peri.bin"), again)
    assert open(again, "rb").read() == open(os.path.join(d, "peri.bin"), "rb").read(), "re-export differs"
    rc, _, err = run_export("random", "--norm-pos", "out", "--llmw-version", "1", os.path.join(d, "v1.bin"))
    assert rc == 1 and "version 1 cannot hold out_norm" in err, (rc, err)
    assert not os.path.exists(os.path.join(d, "v1.bin"))


def test_reexport_llmw():
    d = scratch_dir("reexport")
    a = os.path.join(d, "a.bin")
    b = os.path.join(d, "b.bin")
    c = os.path.join(d, "c.bin")
    export_ok(stories(), a)
    export_ok(a, b, "--dtype", "q8_0")
    export_ok(stories(), c, "--dtype", "q8_0")
    assert open(b, "rb").read() == open(c, "rb").read(), "LLMW f32 -> q8_0 differs from direct"


# ---------------------------------------------------------------- tokenizers

def test_tokenizer_model_byte_identical():
    d = scratch_dir("tok")
    out = os.path.join(d, "tokenizer.bin")
    export_ok("tokenizer", common.model("tokenizer.model"), out)
    ref = open(common.model("tokenizer.bin"), "rb").read()
    got = open(out, "rb").read()
    assert got == ref, "tokenizer.model -> tokenizer.bin is not byte-identical to the shared file"
    # the library-free protobuf reader gives the same bytes
    pieces, scores, _, bos, eos = exporter.tok_sentencepiece.read_sentencepiece_model(common.model("tokenizer.model"))
    assert exporter.tok_sentencepiece.tokenizer_bin_bytes(pieces, scores, bos, eos) == ref


def parse_tokenizer_bin(data):
    (mx,) = struct.unpack_from("<i", data, 0)
    off, toks, scores = 4, [], []
    while off < len(data):
        s, n = struct.unpack_from("<fi", data, off)
        off += 8
        toks.append(data[off:off + n])
        scores.append(s)
        off += n
    return mx, toks, scores


def llama2c_encode(text, toks, scores, lookup):
    """llama2.c's encode(): dummy prefix, code points / byte fallback, best-score merges."""
    ids = [lookup[b" "]] if text else []
    for ch in text:
        b = ch.encode("utf-8")
        ids += [lookup[b]] if b in lookup else [x + 3 for x in b]
    while True:
        best, at, new = -1e10, -1, -1
        for i in range(len(ids) - 1):
            j = lookup.get(toks[ids[i]] + toks[ids[i + 1]])
            if j is not None and scores[j] > best:
                best, at, new = scores[j], i, j
        if at < 0:
            return ids
        ids[at:at + 2] = [new]


def hf_bpe_encode(text, vocab, ranks):
    """HF BPE (no pre-tokenizer, '▁' prefix and spaces): lowest-rank pair first, leftmost."""
    s = "\u2581" + text.replace(" ", "\u2581")
    parts = []
    for ch in s:
        parts += [ch] if ch in vocab else [f"<0x{b:02X}>" for b in ch.encode("utf-8")]
    while True:
        best, at = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get((parts[i], parts[i + 1]))
            if r is not None and (best is None or r < best):
                best, at = r, i
        if at < 0:
            return [vocab[p] for p in parts]
        parts[at:at + 2] = [parts[at] + parts[at + 1]]


TEXTS = ["Hello world", "Once upon a time, there was a little girl named Lily.", "a  b",
         "x    y", "  leading", "trailing  ", "naïve café 日本語 😀", "def f(x):\n    return x**2\n",
         "tab\there", "multiple\n\nnewlines", "1234567890 3.14159", "Привет мир", "x" * 30,
         "The quick brown fox jumps over the lazy dog.", " ", "ÀÉÎÕÜ ñ ß", "<s> and </s>"]


def synth_tokenizer_json(path, order):
    """A Llama-2 tokenizer.json built from tokenizer.model the way transformers'
    converter does: every split of a piece into two pieces is a merge; order 'score'
    sorts merges by the merged piece's score (newer transformers), 'id' by its id
    (older transformers, as in early Llama-2 tokenizer.json files)."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=common.model("tokenizer.model"))
    n = sp.vocab_size()
    pieces = [sp.id_to_piece(i) for i in range(n)]
    normal = {i for i in range(n) if not (sp.is_control(i) or sp.is_byte(i) or sp.is_unknown(i))}
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for i in sorted(normal):
        p = pieces[i]
        local = sorted((vocab[p[:k]], vocab[p[k:]], i) for k in range(1, len(p))
                       if vocab.get(p[:k]) in normal and vocab.get(p[k:]) in normal)
        merges += local
    if order == "id":
        merges.sort(key=lambda m: m[2])
    else:
        merges.sort(key=lambda m: -sp.get_score(m[2]))
    merges = [f"{pieces[a]} {pieces[b]}" for a, b, _ in merges]
    tj = {"version": "1.0",
          "added_tokens": [{"id": i, "content": pieces[i], "special": True} for i in (0, 1, 2)],
          "normalizer": {"type": "Sequence", "normalizers": [
              {"type": "Prepend", "prepend": "\u2581"},
              {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
          "pre_tokenizer": None,
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "fuse_unk": True,
                    "byte_fallback": True, "vocab": vocab, "merges": merges}}
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(tj, fh, ensure_ascii=False)
    return sp, vocab, merges


def test_tokenizer_json():
    for order in ("score", "id"):
        def check(order=order):
            d = scratch_dir(f"tokjson_{order}")
            tj = os.path.join(d, "tokenizer.json")
            sp, vocab, merges = synth_tokenizer_json(tj, order)
            out = os.path.join(d, "tokenizer.bin")
            err = export_ok("tokenizer", tj, out)
            assert "tokenizer.json" in err, err
            mx, toks, scores = parse_tokenizer_bin(open(out, "rb").read())
            rmx, rtoks, rscores = parse_tokenizer_bin(open(common.model("tokenizer.bin"), "rb").read())
            assert toks == rtoks and mx == rmx, "pieces differ from the shared tokenizer.bin"
            lookup = {}
            for i, t in enumerate(toks):
                lookup.setdefault(t, i)
            ranks = {tuple(m.split(" ")): r for r, m in enumerate(merges)}
            for text in TEXTS:
                ours = llama2c_encode(text, toks, scores, lookup)
                # the converted scores reproduce the json's own merge priority
                hf = hf_bpe_encode(text, vocab, ranks)
                assert ours == hf, f"{order}: {text!r}: {ours} != HF BPE {hf}"
                if order == "score":
                    # and, for merges in score order, sentencepiece itself
                    assert ours == sp.encode(text), f"{text!r}: {ours} != sentencepiece {sp.encode(text)}"
            if order == "score":
                # merge-derived scores order the merged pieces as sentencepiece's scores do
                n = len(scores)
                merged = [i for i in range(n) if scores[i] < 0 and scores[i] > -(1 + len(merges))]
                a = np.array([scores[i] for i in merged])
                b = np.array([rscores[i] for i in merged])
                ia, ib = np.argsort(-a, kind="stable"), np.argsort(-b, kind="stable")
                assert np.array_equal(ia, ib), "merge-rank scores order pieces unlike sentencepiece"
        yield order, check


# ---------------------------------------------------------------- bad input

def expect_failure(args, out, *words):
    folder = os.path.dirname(out)
    before = set(os.listdir(folder))
    rc, stdout, err = run_export(*args)
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc != 0, f"export.py {args} succeeded on bad input:\n{err}"
    assert not os.path.exists(out), f"{out} was left behind"
    assert_no_leftovers(folder, before)
    errs = [l for l in lines if "error" in l]
    assert len(errs) == 1 and "Traceback" not in err, f"expected one error line, got:\n{err}"
    if os.environ.get("SHOW_ERRORS"):
        print("     stderr: " + errs[0])
    for w in words:
        assert w.lower() in errs[0].lower(), f"error line does not mention {w!r}: {errs[0]}"
    return errs[0]


def test_bad_inputs():
    d = scratch_dir("bad")
    out = os.path.join(d, "out", "model.bin")
    os.makedirs(os.path.dirname(out))

    def hf_case(name, **kw):
        folder = os.path.join(d, name)
        shutil.rmtree(folder, ignore_errors=True)
        make_hf(folder, **kw)
        return folder

    def missing_tensor():
        f = hf_case("missing", drop=["model.layers.1.mlp.up_proj.weight"])
        expect_failure([f, out], out, "model.layers.1.mlp.up_proj.weight", "missing")

    def missing_lm_head():
        f = hf_case("missing_head", drop=["lm_head.weight"])
        expect_failure([f, out], out, "lm_head.weight")

    def wrong_shape():
        f = hf_case("shape", reshape=("model.layers.0.self_attn.k_proj.weight", (64, 64)))
        expect_failure([f, out], out, "model.layers.0.self_attn.k_proj.weight", "config.json",
                       "[32, 64]")

    def unsupported_arch():
        f = hf_case("arch", config_updates={"architectures": ["MistralForCausalLM"]})
        expect_failure([f, out], out, "architectures", "MistralForCausalLM")

    def rope_scaling():
        f = hf_case("rope", config_updates={"rope_scaling": {"type": "yarn", "factor": 2.0}})
        expect_failure([f, out], out, "rope_scaling", "yarn")

    def missing_field():
        f = hf_case("field", config_updates={"hidden_size": None})
        expect_failure([f, out], out, "hidden_size")

    def truncated_safetensors():
        f = hf_case("trunc")
        p = os.path.join(f, "model.safetensors")
        size = os.path.getsize(p)
        with open(p, "r+b") as fh:
            fh.truncate(size - 100)
        expect_failure([f, out], out, "truncated", "lm_head.weight")

    def truncated_safetensors_header():
        f = hf_case("trunc_head")
        p = os.path.join(f, "model.safetensors")
        with open(p, "r+b") as fh:
            fh.truncate(50)
        expect_failure([f, out], out, "truncated")

    def missing_shard():
        f = hf_case("shard", sharded=True)
        os.remove(os.path.join(f, "model-00002-of-00003.safetensors"))
        expect_failure([f, out], out, "model-00002-of-00003.safetensors")

    def bad_dtype():
        import torch
        f = hf_case("dtype")
        p = os.path.join(f, "model.safetensors")
        # rewrite with one tensor stored as F64
        from_file = exporter.safetensors.SafetensorsFile(p)
        tensors = {n: torch.from_numpy(np.array(from_file.load(n))) for n in from_file.tensors}
        tensors["model.layers.0.mlp.gate_proj.weight"] = \
            tensors["model.layers.0.mlp.gate_proj.weight"].to(torch.float64)
        write_safetensors(p, tensors)
        expect_failure([f, out], out, "model.layers.0.mlp.gate_proj.weight", "F64")

    def truncated_legacy():
        p = os.path.join(d, "trunc_legacy.bin")
        data = open(stories(), "rb").read()
        with open(p, "wb") as fh:
            fh.write(data[:600000])
        expect_failure([p, out], out, "truncated", "w2")

    def truncated_legacy_header():
        p = os.path.join(d, "tiny_legacy.bin")
        with open(p, "wb") as fh:
            fh.write(b"\1\0\0\0\2\0")
        expect_failure([p, out], out, "truncated")

    def garbage_legacy():
        p = os.path.join(d, "garbage.bin")
        # random bytes from a fixed seed, first byte 0x01: a first byte of
        # 0x80 reads as a torch pickle, a failure with another message
        data = bytearray(random.Random(7).getrandbits(8) for _ in range(4096))
        data[0] = 1
        with open(p, "wb") as fh:
            fh.write(bytes(data))
        expect_failure([p, out], out, "not a llama2.c")

    def bad_dtype_option():
        expect_failure([stories(), out, "--dtype", "q5_1"], out, "--dtype", "q5_1")

    def bad_group_size():
        expect_failure([stories(), out, "--dtype", "q8_0", "--group-size", "0"], out, "group")

    def no_input():
        expect_failure([os.path.join(d, "nope.bin"), out], out, "does not exist")

    def pt_missing():
        import torch
        p = os.path.join(d, "missing.pt")
        make_pt(p)
        ck = torch.load(p)
        del ck["model"]["_orig_mod.layers.1.feed_forward.w3.weight"]
        torch.save(ck, p)
        expect_failure([p, out], out, "layers.1.feed_forward.w3.weight")

    def pt_wrong_shape():
        import torch
        p = os.path.join(d, "shape.pt")
        make_pt(p)
        ck = torch.load(p)
        ck["model"]["_orig_mod.layers.0.feed_forward.w1.weight"] = torch.zeros(80, 32)
        torch.save(ck, p)
        expect_failure([p, out], out, "layers.0.feed_forward.w1.weight", "[96, 32]")

    def tokenizer_unigram():
        p = os.path.join(d, "tokenizer.json")
        with open(p, "w") as fh:
            json.dump({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}, fh)
        o = os.path.join(d, "out", "tok.bin")
        expect_failure(["tokenizer", p, o], o, "Unigram")

    def tokenizer_bytelevel():
        p = os.path.join(d, "tokenizer_bl.json")
        with open(p, "w") as fh:
            json.dump({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                       "pre_tokenizer": {"type": "ByteLevel"}}, fh)
        o = os.path.join(d, "out", "tok.bin")
        expect_failure(["tokenizer", p, o], o, "byte-level")

    def existing_output_kept():
        # a failed export leaves an existing OUTPUT as it was
        o = os.path.join(d, "out", "keep.bin")
        with open(o, "wb") as fh:
            fh.write(b"old")
        rc, _, err = run_export(os.path.join(d, "nope.bin"), o)
        assert rc != 0 and open(o, "rb").read() == b"old", err
        os.remove(o)

    for fn in (missing_tensor, missing_lm_head, wrong_shape, unsupported_arch, rope_scaling,
               missing_field, truncated_safetensors, truncated_safetensors_header, missing_shard,
               bad_dtype, truncated_legacy, truncated_legacy_header, garbage_legacy,
               bad_dtype_option, bad_group_size, no_input, pt_missing, pt_wrong_shape,
               tokenizer_unigram, tokenizer_bytelevel, existing_output_kept):
        yield fn.__name__, fn


def test_help_lists_inputs_and_options():
    rc, out, err = run_export("--help")
    assert rc == 0, err
    for w in ("legacy", "ak42", "LLMW", ".pt", "config.json", "safetensors", "params.json",
              "consolidated", "tokenizer", "random", "--dtype", "--group-size", "--norm",
              "--norm-pos", "--final-norm", "--norm-eps", "--seq-len", "--rope-theta"):
        assert w in out, f"--help does not mention {w}"
    rc, out, err = run_export("random", "--help")
    assert rc == 0, err
    for w in ("--dim", "--hidden-dim", "--layers", "--heads", "--kv-heads", "--vocab", "--seq-len",
              "--seed", "--shared", "--unshared", "--norm-bias", "--dtype", "--head-size"):
        assert w in out, f"random --help does not mention {w}"


def test_hf_unpermute_gives_interleaved_rope():
    """Semantics, not just the index shuffle: HF's rotate_half RoPE on HF-layout q/k gives the
    same attention scores as llama2.c's interleaved-pair RoPE on the converted weights."""
    import torch
    rng = np.random.default_rng(2)
    nh, nkv, hs, dim, theta = 4, 2, 16, 64, 10000.0
    wq = rng.standard_normal((nh * hs, dim))
    wk = rng.standard_normal((nkv * hs, dim))
    hf_q = hf_permute(torch.from_numpy(wq), nh).numpy()
    hf_k = hf_permute(torch.from_numpy(wk), nkv).numpy()
    q_i = exporter.read_hf.unpermute_rotary(hf_q, nh, hs)
    k_i = exporter.read_hf.unpermute_rotary(hf_k, nkv, hs)
    inv = theta ** (-np.arange(0, hs, 2) / hs)          # (hs/2,)

    def rope_hf(v, pos):          # HF: pairs (i, i + hs/2), rotate_half
        v = v.reshape(-1, hs)
        ang = np.concatenate([pos * inv, pos * inv])
        rot = np.concatenate([-v[:, hs // 2:], v[:, :hs // 2]], axis=1)
        return v * np.cos(ang) + rot * np.sin(ang)

    def rope_interleaved(v, pos):  # llama2.c: pairs (2i, 2i+1)
        v = v.reshape(-1, hs // 2, 2)
        c, s = np.cos(pos * inv), np.sin(pos * inv)
        out = np.empty_like(v)
        out[..., 0] = v[..., 0] * c - v[..., 1] * s
        out[..., 1] = v[..., 0] * s + v[..., 1] * c
        return out.reshape(-1, hs)

    x1, x2 = rng.standard_normal(dim), rng.standard_normal(dim)
    for p1, p2 in ((0, 0), (3, 1), (17, 5)):
        s_hf = rope_hf(hf_q @ x1, p1) @ rope_hf(hf_k @ x2, p2).T
        s_il = rope_interleaved(q_i @ x1, p1) @ rope_interleaved(k_i @ x2, p2).T
        assert np.allclose(s_hf, s_il, rtol=1e-10, atol=1e-9), f"scores differ at {p1},{p2}"


def test_stories_via_hf_folder_is_byte_identical():
    """stories260K written as an HF folder (F32, rotary-permuted q/k, tied) converts to
    exactly the bytes of the direct legacy conversion."""
    import torch
    (dim, hid, L, nh, nkv, V, S, shared), t = read_legacy(stories())
    d = scratch_dir("stories_hf")
    folder = os.path.join(d, "hf")
    os.makedirs(folder)
    hf = {"model.embed_tokens.weight": t["tok_embeddings"], "model.norm.weight": t["final_norm"]}
    for l in range(L):
        p = f"model.layers.{l}."
        hf[p + "self_attn.q_proj.weight"] = hf_permute(torch.from_numpy(t[f"layers.{l}.wq"].copy()), nh).numpy()
        hf[p + "self_attn.k_proj.weight"] = hf_permute(torch.from_numpy(t[f"layers.{l}.wk"].copy()), nkv).numpy()
        for a, b in (("self_attn.v_proj", "wv"), ("self_attn.o_proj", "wo"), ("mlp.gate_proj", "w1"),
                     ("mlp.down_proj", "w2"), ("mlp.up_proj", "w3"), ("input_layernorm", "attn_norm"),
                     ("post_attention_layernorm", "ffn_norm")):
            hf[p + a + ".weight"] = t[f"layers.{l}.{b}"]
    write_safetensors(os.path.join(folder, "model.safetensors"),
                      {k: torch.from_numpy(np.array(v)) for k, v in hf.items()})
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": dim, "intermediate_size": hid,
                   "num_hidden_layers": L, "num_attention_heads": nh, "num_key_value_heads": nkv,
                   "vocab_size": V, "max_position_embeddings": S, "rms_norm_eps": 1e-5,
                   "rope_theta": 10000.0, "tie_word_embeddings": True}, fh)
    for dt in ("f32", "q8_0"):
        a, b = os.path.join(d, f"direct_{dt}.bin"), os.path.join(d, f"via_hf_{dt}.bin")
        export_ok(stories(), a, "--dtype", dt)
        export_ok(folder, b, "--dtype", dt)
        assert open(a, "rb").read() == open(b, "rb").read(), f"{dt}: HF route differs from direct"


def test_package_layout():
    """export.py is a thin entry into the exporter package; every module of the package
    says its job in a docstring, stays under 600 lines, appears in the package's
    module list (exporter/__init__.py) and imports only modules listed above it."""
    import ast
    import re
    folder = os.path.join(common.ROOT, "exporter")
    with open(EXPORT) as f:
        assert len(f.read().splitlines()) <= 40, "export.py must stay a thin entry point"
    with open(os.path.join(folder, "__init__.py")) as f:
        listed = re.findall(r"^  ([a-z_0-9]+) {2,}\S", ast.get_docstring(ast.parse(f.read())), re.M)
    files = sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and f != "__init__.py")
    assert sorted(listed) == files, f"exporter/__init__.py lists {sorted(listed)}, the folder holds {files}"
    for i, name in enumerate(listed):
        with open(os.path.join(folder, name + ".py")) as f:
            text = f.read()
        tree = ast.parse(text)
        assert ast.get_docstring(tree), f"exporter/{name}.py has no docstring"
        n = len(text.splitlines())
        assert n <= 600, f"exporter/{name}.py has {n} lines (at most 600)"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.module in listed[:i], f"exporter/{name}.py imports .{node.module}, not listed above it"
