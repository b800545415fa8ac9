"""GGUF input: ./run FILE.gguf with the model and tokenizer from the file.

Files come from the tests' own writer (tests/gguf_writer.py, written from the
GGUF spec); the expected values from llama2.c's published outputs, from
tests/reference.py (float64 PyTorch) fed with the writer's own dequantizer,
and, for each block type, from values worked out by hand from the layouts.
Needs numpy and torch: run under /usr/bin/python3.
"""
import math
import os
import random
import re
import struct
import subprocess
import sys

import numpy as np

import common
from common import model, run, scratch

sys.path.insert(0, common.TESTS)
import gguf_writer as gw  # noqa: E402

LOGITS = os.environ.get("LOGITS", os.path.join(common.ROOT, "build", "logits"))
TOL_EXACT = 1e-4     # f32/f16/bf16 weights: the engine multiplies f32 activations (as test_reference)
TOL_Q16ACT = 1e-3    # the block types: int16 activation codes per 32 (seen: q4_0 5e-5, q4_K 9e-6, q6_K 1.2e-4;
                     # q8_0 took int8 codes until issue 25, 5e-3 then: TOL_Q16ACT now holds it)
TOL_NLL = 0.01       # |mean NLL difference| in nats, the bar for llama.cpp-written files


# the awkward models against the float64 reference once (the quantizers and
# the reference take most of its 20 s); every build checks them through
# test_new_types_same_bits_every_build, bit for bit against the first
FIRST_BUILD_ONLY = ("test_awkward_widths_mixed_types_against_reference",)

# ---------------------------------------------------------------- helpers

_files = {}


def stories(dtype):
    """stories260K with tok512's vocabulary as a GGUF of dtype (written once)"""
    if dtype not in _files:
        path = scratch(f"gguf_stories_{dtype}.gguf")
        gw.stories_gguf(model("stories260K.bin"), model("tok512.bin"), path, dtype)
        _files[dtype] = path
    return _files[dtype]


def engine_logits(path, toks, vocab, mode="prefill", threads=None, repack="on"):
    out = scratch(f"gguf_logits_{os.getpid()}.f32")
    args = [path, "--tokens", ",".join(map(str, toks)), "--mode", mode, "--out", out, "--repack", repack]
    if threads:
        args += ["--threads", threads]
    rc, _, err = run(args, binary=LOGITS)
    assert rc == 0, f"{LOGITS} {path} -> rc {rc}: {err}"
    try:
        return np.fromfile(out, dtype="<f4").reshape(len(toks), vocab)
    finally:
        os.remove(out)


def dequantized_weights(data, cfg_extra=None):
    """reference.py's weight dict from a GGUF's bytes, every tensor through
    the writer's dequantizer (gw.dequantize), independent of the engine."""
    import torch
    import reference
    _, kvs, infos, start = gw.read(data)
    arch = kvs["general.architecture"][1].decode()
    get = lambda k: kvs[f"{arch}.{k}"][1]
    t = {}
    for name, gt, ne, off in infos:
        rows = ne[1] if len(ne) > 1 else 1
        nbytes = gw.tensor_bytes(gt, rows, ne[0])
        a = gw.dequantize(gt, data[start + off:start + off + nbytes], rows, ne[0])
        t[name] = torch.from_numpy(a.astype(np.float64).reshape(-1) if len(ne) == 1 else a.astype(np.float64))
    cfg = dict(dim=get("embedding_length"), hidden_dim=get("feed_forward_length"), n_layers=get("block_count"),
               n_heads=get("attention.head_count"), n_kv_heads=get("attention.head_count_kv"),
               vocab_size=t["token_embd.weight"].shape[0], seq_len=get("context_length"),
               shared_classifier="output.weight" not in t, norm_eps=get("attention.layer_norm_rms_epsilon"),
               rope_theta=get("rope.freq_base"))
    w = reference._empty_weights(cfg)
    w["tok_embeddings"] = t["token_embd.weight"]
    w["classifier"] = t.get("output.weight", w["tok_embeddings"])
    w["final_norm"] = t["output_norm.weight"]
    for l in range(cfg["n_layers"]):
        p = f"blk.{l}."
        w["layers"].append({"att_norm": t[p + "attn_norm.weight"], "att_norm_bias": None,
                            "wq": t[p + "attn_q.weight"], "wk": t[p + "attn_k.weight"], "wv": t[p + "attn_v.weight"],
                            "wo": t[p + "attn_output.weight"], "ffn_norm": t[p + "ffn_norm.weight"],
                            "ffn_norm_bias": None, "w1": t[p + "ffn_gate.weight"], "w2": t[p + "ffn_down.weight"],
                            "w3": t[p + "ffn_up.weight"]})
    return w


def reference_logits(data, toks):
    import reference
    return reference.forward(dequantized_weights(data), toks).numpy()


def rel(got, ref):
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def nll(logits, toks):
    """mean negative log-likelihood of toks[1:] given the logits before them"""
    l = logits.astype(np.float64)
    lse = np.log(np.exp(l - l.max(axis=1, keepdims=True)).sum(axis=1)) + l.max(axis=1)
    return float(np.mean([lse[i] - l[i, toks[i + 1]] for i in range(len(toks) - 1)]))


def tokens(vocab, seed, n=24):
    r = random.Random(seed)
    return [1] + [r.randrange(vocab) for _ in range(n - 1)]


# a random llama-shaped model whose rows are whole K-quant superblocks
RANDOM = dict(dim=256, hidden_dim=512, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=300, seq_len=64, shared=False)


def random_gguf(qtype, seed=7, tok512=False):
    """random Llama weights: matrices as random blocks of qtype (or encoded
    random floats for F32/F16/BF16), norms near 1; with tok512, tok512.bin's
    512 pieces as the file's tokenizer and vocabulary"""
    key = (qtype, tok512)
    if key in _files:
        return _files[key]
    rng = np.random.default_rng(seed)
    c = RANDOM
    kvs = []
    if tok512:
        c = dict(RANDOM, vocab_size=512)
        kvs = gw.llama_vocab_kvs(*gw.read_tokenizer_bin(model("tok512.bin"), 512))
    hs = c["dim"] // c["n_heads"]
    def mat(rows, cols):
        if qtype in gw.BLOCK:
            return qtype, gw.random_blocks(qtype, rows, cols, rng, scale=0.08)
        return qtype, gw.encode(qtype, rng.normal(0, 0.05, (rows, cols)))
    tensors = []
    def add_mat(name, rows, cols):
        gt, data = mat(rows, cols)
        tensors.append((name, gt, [cols, rows], data))
    def add_vec(name, n):
        tensors.append((name, gw.F32, [n], gw.encode(gw.F32, rng.uniform(0.8, 1.2, (1, n)))))
    add_mat("token_embd.weight", c["vocab_size"], c["dim"])
    for l in range(c["n_layers"]):
        p = f"blk.{l}."
        add_vec(p + "attn_norm.weight", c["dim"])
        add_mat(p + "attn_q.weight", c["n_heads"] * hs, c["dim"])
        add_mat(p + "attn_k.weight", c["n_kv_heads"] * hs, c["dim"])
        add_mat(p + "attn_v.weight", c["n_kv_heads"] * hs, c["dim"])
        add_mat(p + "attn_output.weight", c["dim"], c["n_heads"] * hs)
        add_vec(p + "ffn_norm.weight", c["dim"])
        add_mat(p + "ffn_gate.weight", c["hidden_dim"], c["dim"])
        add_mat(p + "ffn_up.weight", c["hidden_dim"], c["dim"])
        add_mat(p + "ffn_down.weight", c["dim"], c["hidden_dim"])
    add_vec("output_norm.weight", c["dim"])
    add_mat("output.weight", c["vocab_size"], c["dim"])
    path = scratch(f"gguf_random_{qtype}{'_tok512' if tok512 else ''}.gguf")
    gw.write(path, gw.llama_kvs(c, eps=1e-5, theta=10000.0) + kvs, tensors)
    _files[key] = path
    return path


# ---------------------------------------------------------------- the hand-worked blocks

def test_block_values_worked_by_hand():
    """The writer's dequantizer (the reference the engine is held to) on
    blocks whose values are worked out literally from the layouts."""
    h = lambda v: struct.pack("<e", v)
    # Q8_0: d = 0.5; q = 1, -2, 127, -128 -> 0.5, -1, 63.5, -64
    blk = h(0.5) + bytes([1, 254, 127, 128]) + bytes(28)
    v = gw.dequantize(gw.Q8_0, blk, 1, 32)[0]
    assert list(v[:4]) == [0.5, -1.0, 63.5, -64.0] and not v[4:].any(), v[:6]
    # Q4_0: d = 2; qs[0] = 0x9F: element 0 = (15 - 8) 2 = 14, element 16 = (9 - 8) 2 = 2;
    # qs[1] = 0x08: element 1 = 0, element 17 = (0 - 8) 2 = -16; every other code 0x88 -> 0
    blk = h(2.0) + bytes([0x9F, 0x08]) + bytes([0x88] * 14)
    v = gw.dequantize(gw.Q4_0, blk, 1, 32)[0]
    assert (v[0], v[16], v[1], v[17]) == (14.0, 2.0, 0.0, -16.0) and not np.delete(v, [0, 16, 1, 17]).any(), v
    # Q4_K: d = 1, dmin = 0.5. s[0] = 3 | 1 << 6: sc0 = 3 and the high bits of sc4;
    # s[4] = 2: m0 = 2; s[8] = 0x25: sc4 = 5 | 16 = 21, m4 = 2 | 0 = 2.
    # qs[0] = 0x7A: element 0 (sub-block 0, low nibble 10) = 3*10 - 0.5*2 = 29;
    # element 32 (sub-block 1, high nibble 7): sc1 = m1 = 0 -> 0.
    # qs[64] = 0x0F: element 128 (sub-block 4, low nibble 15) = 21*15 - 0.5*2 = 314
    s = bytearray(12); s[0] = 3 | 1 << 6; s[4] = 2; s[8] = 0x25
    qs = bytearray(128); qs[0] = 0x7A; qs[64] = 0x0F
    v = gw.dequantize(gw.Q4_K, h(1.0) + h(0.5) + bytes(s) + bytes(qs), 1, 256)[0]
    # element 1 (code 0 in sub-block 0) = -0.5*2 = -1; element 160 (sub-block 5: sc5 = m5 = 0) = 0
    assert (v[0], v[32], v[128], v[1], v[160]) == (29.0, 0.0, 314.0, -1.0, 0.0), (v[0], v[32], v[128], v[1], v[160])
    # Q6_K: d = 0.25, scales[0] = 2, scales[4] = 1, scales[8] = -3.
    # ql[0] = 0x35, qh[0] = 0x32: element 0 = low nibble 5 | (qh bits 0-1 = 2) << 4 = 37 -> 5,
    # times 0.25 * 2 = 2.5; element 64 = high nibble 3 | (bits 4-5 = 3) << 4 = 51 -> 19,
    # times 0.25 * 1 = 4.75; element 128: ql[64] = qh[32] = 0 -> -32, times 0.25 * -3 = 24
    ql = bytearray(128); ql[0] = 0x35
    qh = bytearray(64); qh[0] = 0x32
    sc = bytearray(16); sc[0] = 2; sc[4] = 1; sc[8] = 256 - 3
    v = gw.dequantize(gw.Q6_K, bytes(ql) + bytes(qh) + bytes(sc) + h(0.25), 1, 256)[0]
    assert (v[0], v[64], v[128]) == (2.5, 4.75, 24.0), (v[0], v[64], v[128])
    # BF16: 0x3FC0 is 1.5, 0xC000 is -2
    v = gw.dequantize(gw.BF16, struct.pack("<2H", 0x3FC0, 0xC000), 1, 2)[0]
    assert list(v) == [1.5, -2.0], v


def test_new_block_values_worked_by_hand():
    """The block types after Q6_K: the writer's dequantizer on blocks whose
    values are worked out literally from the layouts (the signs, the 5th
    bit, the IQ4_NL table, Q3_K's packed 6-bit scales, Q2_K's scales/mins)."""
    h = lambda v: struct.pack("<e", v)
    def at(v, idx):
        return tuple(float(v[i]) for i in idx)
    # Q4_1: d = 0.5, m = -1; qs[0] = 0x3A: element 0 = 10*0.5 - 1 = 4, element 16 = 3*0.5 - 1 = 0.5;
    # every other code 0 -> m = -1
    v = gw.dequantize(gw.Q4_1, h(0.5) + h(-1.0) + bytes([0x3A]) + bytes(15), 1, 32)[0]
    assert at(v, (0, 16, 1, 31)) == (4.0, 0.5, -1.0, -1.0), v
    # Q5_0: d = 2; qh bits 0 and 17 set (bytes 01 00 02 00); qs[0] = 0x07, qs[1] = 0x3F:
    # element 0 = (7 | 16) - 16 = 7 -> 14; element 16 = (0 | 0) - 16 -> -32;
    # element 1 = 15 - 16 -> -2; element 17 = (3 | 16) - 16 = 3 -> 6; the rest code 0 -> -32
    v = gw.dequantize(gw.Q5_0, h(2.0) + bytes([1, 0, 2, 0]) + bytes([0x07, 0x3F]) + bytes(14), 1, 32)[0]
    assert at(v, (0, 16, 1, 17, 2)) == (14.0, -32.0, -2.0, 6.0, -32.0), v
    # Q5_1: d = 0.25, m = 1; qh bit 31 (byte 3 = 0x80); qs[15] = 0xF0: element 15 = 0 -> 1,
    # element 31 = 15 | 16 = 31 -> 31*0.25 + 1 = 8.75
    v = gw.dequantize(gw.Q5_1, h(0.25) + h(1.0) + bytes([0, 0, 0, 0x80]) + bytes(15) + bytes([0xF0]), 1, 32)[0]
    assert at(v, (15, 31, 0)) == (1.0, 8.75, 1.0), v
    # IQ4_NL: d = 0.5; qs[0] = 0x80: element 0 = kv[0] = -127 -> -63.5, element 16 = kv[8] = 1 -> 0.5;
    # qs[1] = 0xF7: element 1 = kv[7] = -10 -> -5, element 17 = kv[15] = 113 -> 56.5
    v = gw.dequantize(gw.IQ4_NL, h(0.5) + bytes([0x80, 0xF7]) + bytes(14), 1, 32)[0]
    assert at(v, (0, 16, 1, 17)) == (-63.5, 0.5, -5.0, 56.5), v
    # Q2_K: d = 1, dmin = 0.5. scales[0] = 0x23 (scale 3, min 2), [1] = 0x05 (5, 0), [2] = 0x12 (2, 1),
    # [8] = 0xF1 (1, 15). qs[0] = 0xE7: element 0 (bits 0-1) = 3 -> 3*3 - 0.5*2 = 8; element 32
    # (bits 2-3) = 1, sub-block 2 -> 2*1 - 0.5 = 1.5; qs[16] = 2: element 16, sub-block 1 -> 10;
    # qs[32] = 1: element 128, sub-block 8 -> 1 - 7.5 = -6.5; element 1 (code 0, sub-block 0) -> -1
    sc = bytearray(16); sc[0], sc[1], sc[2], sc[8] = 0x23, 0x05, 0x12, 0xF1
    qs = bytearray(64); qs[0], qs[16], qs[32] = 0xE7, 2, 1
    v = gw.dequantize(gw.Q2_K, bytes(sc) + bytes(qs) + h(1.0) + h(0.5), 1, 256)[0]
    assert at(v, (0, 32, 16, 128, 1)) == (8.0, 1.5, 10.0, -6.5, -1.0), v
    # Q3_K: d = 0.5. Scale 0 = 35 - 32 = 3 (low nibble of s[0] = 3, bits 0-1 of s[8] = 2);
    # scale 8 = 27 - 32 = -5 (high nibble of s[0] = 0xB, bits 4-5 of s[8] = 1): s[0] = 0xB3,
    # s[8] = 0x12; scales 1 and 2 raw 0 -> -32. hmask[0] = 1, qs[0] = 2: element 0 = 2 -> 0.5*3*2 = 3;
    # element 1: low bits 0, high bit clear -> -4 -> -6; element 16 (scale 1) -> 0.5*-32*-4 = 64;
    # element 32 (bits 2-3 of qs[0] = 0, hmask[0] bit 1 clear, scale 2) -> 64;
    # qs[32] = 3, hmask[0] bit 4 clear: element 128 = 3 - 4 = -1, scale 8 -> 0.5*-5*-1 = 2.5
    hm = bytearray(32); hm[0] = 1
    qs = bytearray(64); qs[0], qs[32] = 2, 3
    s = bytearray(12); s[0], s[8] = 0xB3, 0x12
    v = gw.dequantize(gw.Q3_K, bytes(hm) + bytes(qs) + bytes(s) + h(0.5), 1, 256)[0]
    assert at(v, (0, 1, 16, 32, 128)) == (3.0, -6.0, 64.0, 64.0, 2.5), v
    # Q5_K: d = 1, dmin = 0.5; s[0] = 3 (sc0), s[4] = 2 (m0), s[1] = 1 (sc1, m1 = 0); sub-block 7:
    # s[11] = 0x21, s[3] = 0x40 -> sc7 = 1 | 1 << 4 = 17, m7 = 2. qh[0] = 0x83, qs[0] = 0x0A:
    # element 0 = 10 | 16 = 26 -> 3*26 - 1 = 77; element 32 (high nibble 0, bit 1) = 16 -> 16;
    # element 1 (code 0) -> -1; qs[96] = 0x50: element 224 = 5 | 16 = 21 -> 17*21 - 1 = 356
    s = bytearray(12); s[0], s[4], s[1], s[11], s[3] = 3, 2, 1, 0x21, 0x40
    qh = bytearray(32); qh[0] = 0x83
    qs = bytearray(128); qs[0], qs[96] = 0x0A, 0x50
    v = gw.dequantize(gw.Q5_K, h(1.0) + h(0.5) + bytes(s) + bytes(qh) + bytes(qs), 1, 256)[0]
    assert at(v, (0, 32, 1, 224)) == (77.0, 16.0, -1.0, 356.0), v
    # IQ4_XS: d = 0.5; sub-block 0: ls = 2 | 2 << 4 = 34 -> 2 (scales_l[0] = 0x02, scales_h bits 0-1 = 2);
    # sub-block 1: ls 0 -> -32; sub-block 7: ls = 15 | 1 << 4 = 31 -> -1 (scales_l[3] = 0xF0,
    # scales_h bits 14-15 = 1): scales_h = 0x4002. qs[0] = 0xF0: element 0 = 0.5*2*kv[0] = -127,
    # element 16 = kv[15] = 113; element 32 (qs[16] = 0, sub-block 1) = 0.5*-32*-127 = 2032;
    # qs[112] = 0x08: element 224 = 0.5*-1*kv[8] = -0.5, element 240 = 0.5*-1*-127 = 63.5
    qs = bytearray(128); qs[0], qs[112] = 0xF0, 0x08
    v = gw.dequantize(gw.IQ4_XS, h(0.5) + struct.pack("<H", 0x4002) + bytes([0x02, 0, 0, 0xF0]) + bytes(qs), 1, 256)[0]
    assert at(v, (0, 16, 32, 224, 240)) == (-127.0, 113.0, 2032.0, -0.5, 63.5), v


NEW_TYPES = (gw.Q4_1, gw.Q5_0, gw.Q5_1, gw.IQ4_NL, gw.Q2_K, gw.Q3_K, gw.Q5_K, gw.IQ4_XS)


def test_quantizers_round_trip():
    """The writer's quantizers and dequantizers agree: normal values come
    back within each type's error (relative RMS), and in the ranges the
    layouts allow"""
    rng = np.random.default_rng(2)
    a = rng.normal(0, 1, (8, 512)).astype(np.float32)
    bound = {gw.Q4_1: 0.12, gw.Q5_0: 0.07, gw.Q5_1: 0.06, gw.IQ4_NL: 0.12, gw.Q2_K: 0.45, gw.Q3_K: 0.22,
             gw.Q5_K: 0.06, gw.IQ4_XS: 0.12}
    for t in NEW_TYPES:
        b = gw.quantize(t, a)
        assert len(b) == gw.tensor_bytes(t, 8, 512), gw.NAME[t]
        r = gw.dequantize(t, b, 8, 512)
        e = float(np.sqrt(((r - a) ** 2).mean() / (a ** 2).mean()))
        print(f"{gw.NAME[t]}: relative RMS error {e:.3f}")
        assert e <= bound[t], (gw.NAME[t], e)


def test_writer_layout_against_spec():
    """The writer's bytes read back field by field as the spec lays them out:
    magic, version 3, counts, aligned data, and the Q8_0 fallback to F16 for
    ffn_down's 172 columns (not whole blocks of 32), as llama.cpp's converter does."""
    data = open(stories("q8_0"), "rb").read()
    assert data[:4] == b"GGUF" and struct.unpack_from("<IQQ", data, 4)[0] == 3
    version, kvs, infos, start = gw.read(data)
    assert start % 32 == 0
    types = {name: gt for name, gt, ne, off in infos}
    assert types["blk.0.ffn_down.weight"] == gw.F16 and types["blk.0.ffn_gate.weight"] == gw.Q8_0
    assert types["token_embd.weight"] == gw.Q8_0 and types["output_norm.weight"] == gw.F32
    assert all(off % 32 == 0 for _, _, _, off in infos)
    assert len(kvs["tokenizer.ggml.tokens"][1]) == 512


# ---------------------------------------------------------------- stories260K

def test_stories_f32_golden_without_tokenizer():
    """llama2.c's two published outputs, byte for byte, with no -z"""
    path = stories("f32")
    for args, golden in ((["-t", "0", "-n", "200"], "stories260K.greedy200.txt"),
                         (["-t", "1.0", "-p", "0.9", "-s", "133742", "-n", "256"], "stories260K.t1-p0.9-s133742.txt")):
        rc, out, err = run([path] + args)
        assert rc == 0, err
        want = open(model(golden), "rb").read()
        assert out == want, f"{golden}: got {out[:80]!r}..., want {want[:80]!r}..."


def test_stories_tokenizer_from_file_equals_tok512():
    """A prompt encodes to the same ids from the GGUF's arrays as from tok512.bin,
    and -z still wins."""
    path = stories("f32")
    prompt = "Once upon a time, a little cat named Bob\nwent <to> the park"
    a = run([path, "-t", "0", "-n", "60", "-i", prompt])
    b = run([path, "-z", model("tok512.bin"), "-t", "0", "-n", "60", "-i", prompt])
    assert a[0] == 0 and b[0] == 0, a[2] + b[2]
    assert a[1] == b[1] and a[1].startswith(b"Once upon a time, a little cat"), (a[1], b[1])
    rc, _, err = run([path, "-z", scratch("no_such_tokenizer.bin"), "-n", "4"])
    assert rc != 0 and "no_such_tokenizer" in err, err


def test_stories_dtypes_against_dequantizing_reference():
    """f16, bf16, q8_0 (with its F16 fallback) files: logits against the
    float64 reference fed with the writer's dequantized tensors; NLL within 0.01
    (q8_0 too: with int8 activations it was 0.021 off on so small a model)"""
    toks = tokens(512, 5)
    for dtype, tol, tol_nll in (("f32", TOL_EXACT, TOL_NLL), ("f16", TOL_EXACT, TOL_NLL), ("bf16", TOL_EXACT, TOL_NLL),
                                ("q8_0", TOL_Q16ACT, TOL_NLL)):
        path = stories(dtype)
        ref = reference_logits(open(path, "rb").read(), toks)
        got = engine_logits(path, toks, 512)
        r, d = rel(got, ref), abs(nll(got, toks) - nll(ref, toks))
        print(f"stories260K {dtype}: max rel logit diff {r:.2e}, |NLL diff| {d:.2e}")
        assert r <= tol and d <= tol_nll, (dtype, r, d)


def test_stories_q8_0_greedy_text():
    """The q8_0 file tells the f32 story's opening (int8 weights and int16 activations
    change a logit by a few thousandths)"""
    rc, out, err = run([stories("q8_0"), "-t", "0", "-n", "40"])
    assert rc == 0, err
    assert out.startswith(b"Once upon a time, there was a little girl named Lily."), out


# ---------------------------------------------------------------- random models, every block type

def test_random_block_types_against_reference():
    """Q8_0, Q4_0, Q4_K, Q6_K, BF16, F16 and the newer types' random models: logits and NLL against the
    reference on the writer's dequantized tensors, prefill and decode"""
    toks = tokens(RANDOM["vocab_size"], 11)
    for qtype, tol in ((gw.Q8_0, TOL_Q16ACT), (gw.Q4_0, TOL_Q16ACT), (gw.Q4_K, TOL_Q16ACT), (gw.Q6_K, TOL_Q16ACT),
                       (gw.BF16, TOL_EXACT), (gw.F16, TOL_EXACT)) + tuple((t, TOL_Q16ACT) for t in NEW_TYPES):
        path = random_gguf(qtype)
        ref = reference_logits(open(path, "rb").read(), toks)
        got = engine_logits(path, toks, RANDOM["vocab_size"])
        r, d = rel(got, ref), abs(nll(got, toks) - nll(ref, toks))
        print(f"random type {qtype}: max rel logit diff {r:.2e}, |NLL diff| {d:.2e}")
        assert r <= tol and d <= TOL_NLL, (qtype, r, d)


# models of today's awkward widths, as llama-quantize mixes types in them:
# rows of dim (288, 576, 896: not whole 256-blocks) in the 32-block types,
# the rows of hidden_dim (whole 256-blocks) in the K-quants and IQ4_XS
AWKWARD = (
    (dict(dim=288, hidden_dim=768, n_heads=6, n_kv_heads=6),
     dict(emb=gw.Q5_0, q=gw.Q5_0, k=gw.Q5_1, v=gw.IQ4_NL, o=gw.Q4_1, gate=gw.Q5_0, up=gw.Q5_1, down=gw.Q5_K,
          out=gw.Q8_0)),
    (dict(dim=576, hidden_dim=1536, n_heads=9, n_kv_heads=3),
     dict(emb=gw.Q4_1, q=gw.IQ4_NL, k=gw.Q5_0, v=gw.Q5_1, o=gw.Q4_1, gate=gw.IQ4_NL, up=gw.Q5_0, down=gw.Q3_K,
          out=gw.Q5_1)),
    (dict(dim=896, hidden_dim=1024, n_heads=14, n_kv_heads=2),
     dict(emb=gw.IQ4_NL, q=gw.Q5_1, k=gw.Q4_1, v=gw.Q5_0, o=gw.IQ4_NL, gate=gw.Q5_0, up=gw.Q4_1, down=gw.Q2_K,
          out=gw.IQ4_NL)),
    (dict(dim=512, hidden_dim=768, n_heads=8, n_kv_heads=4),
     dict(emb=gw.Q5_K, q=gw.IQ4_XS, k=gw.Q3_K, v=gw.Q2_K, o=gw.Q5_K, gate=gw.IQ4_XS, up=gw.Q3_K, down=gw.IQ4_XS,
          out=gw.Q2_K)),
)


def awkward_gguf(i, seed=17):
    """AWKWARD[i]: random normal weights through the writer's quantizers"""
    key = ("awkward", i)
    if key in _files:
        return _files[key]
    shape, types = AWKWARD[i]
    c = dict(shape, n_layers=2, vocab_size=300, seq_len=64, shared=False)
    hs = c["dim"] // c["n_heads"]
    rng = np.random.default_rng(seed + i)
    tensors = []
    def add_mat(name, t, rows, cols, sd=0.05):
        a = rng.normal(0, sd, (rows, cols)).astype(np.float32)
        tensors.append((name, t, [cols, rows], gw.quantize(t, a) if t in NEW_TYPES else gw.encode(t, a)))
    def add_vec(name, n):
        tensors.append((name, gw.F32, [n], gw.encode(gw.F32, rng.uniform(0.8, 1.2, (1, n)))))
    add_mat("token_embd.weight", types["emb"], c["vocab_size"], c["dim"], 0.5)
    for l in range(c["n_layers"]):
        p = f"blk.{l}."
        add_vec(p + "attn_norm.weight", c["dim"])
        add_mat(p + "attn_q.weight", types["q"], c["n_heads"] * hs, c["dim"])
        add_mat(p + "attn_k.weight", types["k"], c["n_kv_heads"] * hs, c["dim"])
        add_mat(p + "attn_v.weight", types["v"], c["n_kv_heads"] * hs, c["dim"])
        add_mat(p + "attn_output.weight", types["o"], c["dim"], c["n_heads"] * hs)
        add_vec(p + "ffn_norm.weight", c["dim"])
        add_mat(p + "ffn_gate.weight", types["gate"], c["hidden_dim"], c["dim"])
        add_mat(p + "ffn_up.weight", types["up"], c["hidden_dim"], c["dim"])
        add_mat(p + "ffn_down.weight", types["down"], c["dim"], c["hidden_dim"])
    add_vec("output_norm.weight", c["dim"])
    add_mat("output.weight", types["out"], c["vocab_size"], c["dim"], 0.2)
    path = scratch(f"gguf_awkward_{i}.gguf")
    gw.write(path, gw.llama_kvs(c, eps=1e-5, theta=10000.0), tensors)
    _files[key] = path
    return path


def test_awkward_widths_mixed_types_against_reference():
    """dims 288, 576, 896 (rows not whole 256-blocks) and 512, each model
    mixing the new types as llama-quantize's presets do, weights through the
    writer's quantizers: logits and NLL against the float64 reference over
    the dequantized tensors; decode and two threads the same bits"""
    for i in range(len(AWKWARD)):
        path = awkward_gguf(i)
        toks = tokens(300, 5 + i)
        ref = reference_logits(open(path, "rb").read(), toks)
        got = engine_logits(path, toks, 300)
        r, d = rel(got, ref), abs(nll(got, toks) - nll(ref, toks))
        print(f"awkward dim {AWKWARD[i][0]['dim']}: max rel logit diff {r:.2e}, |NLL diff| {d:.2e}")
        assert r <= TOL_Q16ACT and d <= TOL_NLL, (i, r, d)
        for mode, threads in (("decode", None), ("prefill", "2"), ("decode", "2")):
            again = engine_logits(path, toks, 300, mode, threads)
            assert np.array_equal(again.view(np.uint32), got.view(np.uint32)), (i, mode, threads)


def test_new_types_same_bits_every_build():
    """the new types' files: this build's logits (a variant's LOGITS) are
    the optimised build's (build/logits) bit for bit: one float order on
    every target"""
    native = os.path.join(common.ROOT, "build", "logits")
    toks = tokens(RANDOM["vocab_size"], 13, n=9)
    paths = [random_gguf(t) for t in NEW_TYPES] + [awkward_gguf(i) for i in range(len(AWKWARD))]
    for path in paths:
        _, kvs, infos, _ = gw.read(open(path, "rb").read())
        vocab = [ne for name, gt, ne, off in infos if name == "token_embd.weight"][0][1]
        got = engine_logits(path, toks, vocab)
        global LOGITS
        saved, LOGITS = LOGITS, native
        try:
            want = engine_logits(path, toks, vocab)
        finally:
            LOGITS = saved
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), path


def test_prefill_equals_decode_bit_for_bit():
    """Batched prefill, one-token decode, chunked and two threads give the same
    bits, with the 4-bit matrices repacked into panels (where the build does:
    llm_repack) or read in place from the file"""
    toks = tokens(RANDOM["vocab_size"], 3, n=13)
    for qtype in (gw.Q8_0, gw.Q4_0, gw.Q4_K, gw.Q6_K, gw.BF16) + NEW_TYPES:
        path = random_gguf(qtype)
        base = engine_logits(path, toks, RANDOM["vocab_size"], "prefill")
        for mode, threads, repack in (("decode", None, "on"), ("chunked", None, "on"), ("prefill", "2", "on"),
                                      ("decode", "2", "on"), ("prefill", None, "off"), ("decode", "2", "off")):
            got = engine_logits(path, toks, RANDOM["vocab_size"], mode, threads, repack)
            assert np.array_equal(got.view(np.uint32), base.view(np.uint32)), (qtype, mode, threads, repack)


def test_repack_flag_and_info():
    """--repack: where the kernels are AVX-512 VNNI's or AVX2's, --info names
    the RAM the repacked q4_0, q4_K, q6_K, q8_0, q5_0, q5_1, q5_K and iq4_nl matrices take (each
    matrix's rows in panels of sixteen (AVX-512) or eight (AVX2), a row padded
    (q4_0's, q4_K's, iq4_nl's) to whole runs of 144 bytes, a q6_K block's 210 bytes in 212, a q8_0
    block's 34 in 36, a q5_0 block's 22 in 24, q5_1's 24 and q5_K's 176 as they are; each
    matrix 64-aligned); with NEON's dotprod kernels q4_0 and q4_K only (and
    iq4_nl), in panels of four rows, 80 bytes a q4_0 block of four rows, 672
    a q4_K one; none with --repack off or in
    other builds; eval's NLL is the same either way; a bad value is refused in
    one line"""
    c = dict(RANDOM, vocab_size=512)
    hs = c["dim"] // c["n_heads"]
    shapes = [(c["n_heads"] * hs, c["dim"]), (c["n_kv_heads"] * hs, c["dim"]), (c["n_kv_heads"] * hs, c["dim"]),
              (c["dim"], c["n_heads"] * hs), (c["hidden_dim"], c["dim"]), (c["hidden_dim"], c["dim"]),
              (c["dim"], c["hidden_dim"])] * c["n_layers"] + [(c["vocab_size"], c["dim"])]
    align = lambda n: -(-n // 64) * 64
    text = scratch("repack_eval.txt")
    with open(text, "w") as f:
        f.write("Once upon a time, there was a little girl named Lily. She liked to play outside.\n")
    for qtype, block, block_bytes in ((gw.Q4_0, 32, 18), (gw.Q4_K, 256, 144), (gw.Q6_K, 256, 210), (gw.Q8_0, 32, 34),
                                     (gw.Q5_0, 32, 22), (gw.Q5_1, 32, 24), (gw.Q5_K, 256, 176), (gw.IQ4_NL, 32, 18)):
        path = random_gguf(qtype, tok512=True)
        rc, out, err = run([path, "--info"])
        assert rc == 0, err
        info = out.decode()
        kernels = re.search(r", (\S+) kernels\n", err).group(1)   # the configuration goes to stderr
        got = re.search(r"repacked +(\d+) bytes", info)
        panel = 16 if kernels == "avx512+vnni" else 8 if kernels.startswith("avx2") else None   # rows per panel: the lanes
        want = 0
        for rows, cols in shapes:
            row_bytes = cols // block * block_bytes
            slot = {gw.Q6_K: 212, gw.Q8_0: 36, gw.Q5_0: 24, gw.Q5_1: 24, gw.Q5_K: 176}.get(qtype)   # a block's bytes in whole words
            panel_row = cols // block * slot if slot else -(-row_bytes // 144) * 144
            want += align(-(-rows // (panel or 16)) * (panel or 16) * panel_row)
        four = {gw.Q4_0: 80, gw.Q4_K: 672}.get(qtype)   # NEON's four-row panels: a file block's four rows
        if kernels == "neon+dotprod":
            panel = 4 if four else None
            want = sum(align(-(-rows // 4) * (cols // block) * four) for rows, cols in shapes) if four else 0
        if panel:
            assert got and int(got.group(1)) == want, (qtype, got.group(0), want)
            rc, out, err = run([path, "--info", "-m", "eval", "-f", text])
            assert rc == 0 and int(re.search(r"repacked +(\d+) bytes", out.decode()).group(1)) == want, (qtype, out, err)
        else:
            assert not got, (qtype, kernels, info)
        rc, out, err = run([path, "--info", "--repack", "off"])
        assert rc == 0 and b"repacked" not in out, (rc, err)
        nlls = []
        for repack in ("on", "off"):
            rc, out, err = run([path, "-m", "eval", "-f", text, "--repack", repack])
            assert rc == 0, err
            nlls.append(re.search(rb"nll (\S+)", out).group(1))
        assert nlls[0] == nlls[1], nlls
    rc, out, err = run([random_gguf(gw.Q4_0, tok512=True), "--repack", "maybe"])
    assert rc == 2 and err.strip() == "error: --repack expects on or off, got 'maybe'", (rc, err)


# ---------------------------------------------------------------- hostile files

def _base_file():
    """a small valid GGUF (2 layers, dim 32) with tok512's vocabulary"""
    if "hostile" not in _files:
        rng = np.random.default_rng(1)
        c = dict(dim=32, hidden_dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=512, seq_len=32, shared=True)
        t = {"tok_embeddings": rng.normal(0, 0.1, (512, 32)), "final_norm": np.ones(32)}
        for k, shape in (("attn_norm", (2, 32)), ("ffn_norm", (2, 32)), ("wq", (2, 32, 32)), ("wk", (2, 16, 32)),
                         ("wv", (2, 16, 32)), ("wo", (2, 32, 32)), ("w1", (2, 64, 32)), ("w2", (2, 32, 64)),
                         ("w3", (2, 64, 32))):
            t[k] = rng.normal(0, 0.1, shape) if "norm" not in k else np.ones(shape)
        pieces, scores = gw.read_tokenizer_bin(model("tok512.bin"), 512)
        kvs = gw.llama_kvs(c) + gw.llama_vocab_kvs(pieces, scores)
        _files["hostile"] = (c, t, kvs)
    return _files["hostile"]


def _write(name, kvs=None, tensors=None, **kw):
    c, t, base_kvs = _base_file()
    path = scratch(f"gguf_bad_{name}.gguf")
    data = gw.write(None, base_kvs if kvs is None else kvs,
                    gw.llama_tensors(c, t, "f32") if tensors is None else tensors, **kw)
    open(path, "wb").write(data)
    return path, data


def _refused(path, what, must=None):
    rc, out, err = run([path, "-n", "4", "-t", "0"], timeout=60)
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc not in (0, -11, -6) and rc > 0, f"{what}: rc {rc}\n{err}"
    assert len(lines) == 1 and lines[0].startswith("error:"), f"{what}: not one error line:\n{err}"
    assert "Sanitizer" not in err and "runtime error" not in err, f"{what}: {err}"
    if must:
        assert must in err, f"{what}: message lacks {must!r}: {err}"
    return err


def test_hostile_base_file_runs():
    path, _ = _write("ok")
    rc, out, err = run([path, "-n", "8", "-t", "0"])
    assert rc == 0 and out, err


def _field_ends(data):
    """byte offsets where each header field ends (for truncation): the
    fixed header, every key/type/length/count, and every 64th array element"""
    ends = [4, 8, 16, 24]
    at = 24
    nt, nkv = struct.unpack_from("<QQ", data, 8)
    def s(at):
        n = struct.unpack_from("<Q", data, at)[0]
        ends.extend([at + 8, at + 8 + n])
        return at + 8 + n
    for _ in range(nkv):
        at = s(at)
        vt = struct.unpack_from("<I", data, at)[0]
        at += 4
        ends.append(at)
        if vt == gw.V_ARRAY:
            et, cnt = struct.unpack_from("<IQ", data, at)
            at += 12
            ends.append(at)
            for i in range(cnt):
                if et == gw.V_STRING:
                    n = struct.unpack_from("<Q", data, at)[0]
                    if i % 64 == 0:
                        ends.extend([at + 8, at + 8 + n])
                    at += 8 + n
                else:
                    at += struct.calcsize(gw._FMT[et])
            ends.append(at)
        elif vt == gw.V_STRING:
            at = s(at)
        else:
            at += struct.calcsize(gw._FMT[vt])
            ends.append(at)
    for _ in range(nt):
        at = s(at)
        nd = struct.unpack_from("<I", data, at)[0]
        at += 4
        ends.append(at)
        for _ in range(nd + 1):
            at += 8
            ends.append(at)
        at += 4
        ends.append(at)
    return sorted(set(e for e in ends if e < len(data)))


def test_truncated_at_every_header_field():
    path, data = _write("whole")
    ends = _field_ends(data)
    cut = scratch("gguf_bad_cut.gguf")
    cuts = ends + [end - 1 for end in ends[::8]] + [len(data) - 1, len(data) - 100]
    for end in cuts:
        open(cut, "wb").write(data[:end])
        _refused(cut, f"cut at {end} of {len(data)}")
    print(f"{len(cuts)} truncations refused")


def test_huge_and_inconsistent_fields():
    _, data = _write("orig")
    c, t, kvs = _base_file()
    tensors = gw.llama_tensors(c, t, "f32")
    cases = []
    def patch(at, fmt, v):
        d = bytearray(data)
        struct.pack_into(fmt, d, at, v)
        return bytes(d)
    cases.append(("tensor count 2^63", patch(8, "<Q", 1 << 63), "claims"))
    cases.append(("metadata count 2^64-1", patch(16, "<Q", (1 << 64) - 1), "claims"))
    cases.append(("first key length 2^64-1", patch(24, "<Q", (1 << 64) - 1), "truncated"))
    cases.append(("version 1", patch(4, "<I", 1), "version 1"))
    cases.append(("version 4", patch(4, "<I", 4), "version 4"))
    cases.append(("magic only", data[:4], "shorter"))
    def kv_case(name, new_kvs, must=None):
        cases.append((name, gw.write(None, new_kvs, tensors), must))
    # an array count past the file: rewrite the count field in place
    d = gw.write(None, kvs, tensors)
    key = b"tokenizer.ggml.tokens"
    at = d.index(key) + len(key) + 4 + 4
    cases.append(("string array count 2^62", patch_bytes(d, at, "<Q", 1 << 62), "truncated"))
    at = d.index(b"tokenizer.ggml.scores") + len(b"tokenizer.ggml.scores") + 4 + 4
    cases.append(("f32 array count 2^61", patch_bytes(d, at, "<Q", 1 << 61), "truncated"))
    at = d.index(b"general.name") + len(b"general.name") + 4
    cases.append(("string length 2^63", patch_bytes(d, at, "<Q", 1 << 63), "truncated"))
    bad_type = bytearray(gw.write(None, kvs + [("zz.bad", gw.V_U32, 7)], tensors))
    at = bytes(bad_type).index(b"zz.bad") + len(b"zz.bad")
    struct.pack_into("<I", bad_type, at, 99)
    cases.append(("unknown value type 99", bytes(bad_type), "unknown value type"))
    kv_case("nested array", kvs + [("zz.nested", gw.V_ARRAY, (gw.V_ARRAY, []))], "nested")
    kv_case("alignment 0", kvs + [("general.alignment", gw.V_U32, 0)], "alignment")
    kv_case("alignment 24", kvs + [("general.alignment", gw.V_U32, 24)], "alignment")
    kv_case("alignment as string", kvs + [("general.alignment", gw.V_STRING, "32")], "alignment")
    kv_case("architecture gpt2", [(k, vt, "gpt2" if k == "general.architecture" else v) for k, vt, v in kvs],
            "'gpt2' is not supported")
    kv_case("no architecture", [kv for kv in kvs if kv[0] != "general.architecture"], "architecture is missing")
    kv_case("block_count 2^31", [(k, gw.V_U64 if k == "llama.block_count" else vt, 1 << 31 if k == "llama.block_count" else v)
                                 for k, vt, v in kvs], "block_count")
    kv_case("embedding_length as string",
            [(k, gw.V_STRING if k == "llama.embedding_length" else vt, "32" if k == "llama.embedding_length" else v)
             for k, vt, v in kvs], "not an integer")
    kv_case("rope scaling yarn", kvs + [("llama.rope.scaling.type", gw.V_STRING, "yarn")], "yarn")
    kv_case("tokenizer gpt2 over sentencepiece pieces",
            [(k, vt, "gpt2" if k == "tokenizer.ggml.model" else v) for k, vt, v in kvs], "not in GPT-2's byte alphabet")
    kv_case("tokenizer bert", [(k, vt, "bert" if k == "tokenizer.ggml.model" else v) for k, vt, v in kvs],
            "'bert' is not supported")
    # tensors
    def t_case(name, new_tensors, must=None, **kw):
        cases.append((name, gw.write(None, kvs, new_tensors, **kw), must))
    t_case("duplicate tensor", tensors + [tensors[3]], "appears twice")
    t_case("missing tensor", [x for x in tensors if x[0] != "blk.1.ffn_up.weight"], "blk.1.ffn_up.weight is missing")
    t_case("unknown tensor", tensors + [("blk.0.attn_rot.weight", gw.F32, [4], bytes(16))], "attn_rot")
    t_case("layer past block_count", tensors + [("blk.2.attn_norm.weight", gw.F32, [32], bytes(128))], "blk.2")
    t_case("unknown type Q5_K", [(n, 13 if n == "blk.0.attn_q.weight" else gt, ne, d) for n, gt, ne, d in tensors],
           "Q5_K")
    t_case("type 999", [(n, 999 if n == "blk.0.attn_k.weight" else gt, ne, d) for n, gt, ne, d in tensors], "999")
    t_case("F16 norm", [(n, gw.F16 if n == "output_norm.weight" else gt, ne, d[:64] if n == "output_norm.weight" else d)
                        for n, gt, ne, d in tensors], "vector")
    t_case("wrong shape", [(n, gt, [ne[0], ne[1] + 1] if n == "blk.0.attn_v.weight" else ne, d)
                           for n, gt, ne, d in tensors], "inconsistent")
    t_case("five dims", [(n, gt, ne + [1, 1, 1] if n == "blk.0.attn_v.weight" else ne, d) for n, gt, ne, d in tensors],
           "dimensions")
    t_case("zero dims", [(n, gt, [] if n == "blk.0.attn_v.weight" else ne, d) for n, gt, ne, d in tensors],
           "dimensions")
    t_case("huge dims", [(n, gt, [1 << 62, 1 << 62] if n == "blk.0.attn_v.weight" else ne, d) for n, gt, ne, d in tensors],
           "inconsistent")
    t_case("Q4_K not whole blocks", [(n, gw.Q4_K if n == "blk.1.ffn_down.weight" else gt, ne, d) for n, gt, ne, d in tensors],
           "not whole Q4_K blocks")
    # offsets: patch the last tensor info's offset
    d = gw.write(None, kvs, tensors)
    name = tensors[-1][0].encode()
    at = d.index(name) + len(name) + 4 + 8 * len(tensors[-1][2]) + 4
    cases.append(("offset 2^64-32", patch_bytes(d, at, "<Q", (1 << 64) - 32), "past the end"))
    cases.append(("offset misaligned", patch_bytes(d, at, "<Q", struct.unpack_from("<Q", d, at)[0] + 4), "aligned"))
    cases.append(("data cut", d[:-200], "past the end"))
    for name, blob, must in cases:
        p = scratch("gguf_bad_case.gguf")
        open(p, "wb").write(blob)
        err = _refused(p, name, must)
        print(f"{name}: {err.strip()}")


def _gemma3_olmo2_file(arch):
    """(kvs, tensors) of a small gemma3 or olmo2 GGUF in llama.cpp's names (dim 32, 4
    heads of 8, 2 kv heads, 2 layers; gemma3 with a window of 4 on llama.cpp's
    default pattern) and tok512's vocabulary"""
    rng = np.random.default_rng(2)
    c = dict(dim=32, hidden_dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=512, seq_len=32)
    pieces, scores = gw.read_tokenizer_bin(model("tok512.bin"), 512)
    kvs = gw.llama_kvs(c, arch=arch, eps=1e-6) + gw.llama_vocab_kvs(pieces, scores)
    if arch == "gemma3":
        kvs += [("gemma3.attention.key_length", gw.V_U32, 8), ("gemma3.attention.value_length", gw.V_U32, 8),
                ("gemma3.attention.sliding_window", gw.V_U32, 4), ("gemma3.rope.freq_base_swa", gw.V_F32, 10000.0)]
    out = []
    def add(name, *shape):
        a = rng.normal(0, 0.1, shape) if len(shape) == 2 else 1.0 + rng.normal(0, 0.1, shape)
        out.append((name, gw.F32, list(reversed(shape)), gw.encode(gw.F32, a.reshape(-1, shape[-1]))))
    add("token_embd.weight", 512, 32)
    for l in range(2):
        p = f"blk.{l}."
        if arch == "gemma3":
            add(p + "attn_norm.weight", 32)
        add(p + "attn_q.weight", 32, 32)
        add(p + "attn_k.weight", 16, 32)
        add(p + "attn_v.weight", 16, 32)
        add(p + "attn_q_norm.weight", 8 if arch == "gemma3" else 32)
        add(p + "attn_k_norm.weight", 8 if arch == "gemma3" else 16)
        add(p + "attn_output.weight", 32, 32)
        add(p + "post_attention_norm.weight", 32)
        if arch == "gemma3":
            add(p + "ffn_norm.weight", 32)
        add(p + "ffn_gate.weight", 64, 32)
        add(p + "ffn_down.weight", 32, 64)
        add(p + "ffn_up.weight", 64, 32)
        add(p + "post_ffw_norm.weight", 32)
    add("output_norm.weight", 32)
    if arch == "olmo2":
        add("output.weight", 512, 32)
    return kvs, out


def test_gemma3_olmo2_hostile():
    """gemma3 and olmo2 files (tests' own writer, llama.cpp's names) run; each key
    missing, set to what the engine does not do, or tensor missing, extra or of the
    wrong shape is refused in one line naming it."""
    cases = []
    for arch in ("gemma3", "olmo2"):
        kvs, tensors = _gemma3_olmo2_file(arch)
        path = scratch(f"gguf_{arch}_ok.gguf")
        gw.write(path, kvs, tensors)
        rc, out, err = run([path, "-n", "8", "-t", "0"])
        assert rc == 0 and out, err
        rc, _, err = run([path, "--info"])
        assert rc == 0 and ("peri-norm" if arch == "gemma3" else "out-norm") in err, err
        def kv_case(name, new_kvs, must):
            cases.append((f"{arch}: {name}", gw.write(None, new_kvs, tensors), must))
        def t_case(name, new_tensors, must):
            cases.append((f"{arch}: {name}", gw.write(None, kvs, new_tensors), must))
        kv_case("no rms epsilon", [kv for kv in kvs if "layer_norm_rms_epsilon" not in kv[0]],
                f"{arch}.attention.layer_norm_rms_epsilon is missing")
        t_case("no post_ffw_norm", [x for x in tensors if x[0] != "blk.1.post_ffw_norm.weight"],
               "blk.1.post_ffw_norm.weight is missing")
        t_case("q bias", tensors + [("blk.0.attn_q.bias", gw.F32, [32], bytes(128))], "not one a " + arch)
        t_case("rope_freqs", tensors + [("rope_freqs.weight", gw.F32, [4], bytes(16))], "not one a " + arch)
        qn = 32 if arch == "gemma3" else 8   # the other arch's q norm: whole vs one head's
        t_case("q norm shape", [(n, gt, [qn] if n == "blk.0.attn_q_norm.weight" else ne,
                                 bytes(4 * qn) if n == "blk.0.attn_q_norm.weight" else d) for n, gt, ne, d in tensors],
               "blk.0.attn_q_norm.weight has 1 dims")
        if arch == "gemma3":
            kv_case("final softcap", kvs + [("gemma3.final_logit_softcapping", gw.V_F32, 30.0)], "soft-capping")
            kv_case("attn softcap", kvs + [("gemma3.attn_logit_softcapping", gw.V_F32, 50.0)], "soft-capping")
            kv_case("pattern array", kvs + [("gemma3.attention.sliding_window_pattern", gw.V_ARRAY,
                                             (gw.V_BOOL, [1, 0]))], "sliding_window_pattern is an array")
            kv_case("window as string", [(k, gw.V_STRING, "4") if k == "gemma3.attention.sliding_window" else (k, vt, v)
                                         for k, vt, v in kvs], "sliding_window is not an integer")
            kv_case("dummy prefix not a bool", kvs + [("tokenizer.ggml.add_space_prefix", gw.V_STRING, "no")],
                    "add_space_prefix is not a bool")
            t_case("no attn_norm", [x for x in tensors if x[0] != "blk.0.attn_norm.weight"],
                   "blk.0.attn_norm.weight is missing")
        else:
            kv_case("sliding window", kvs + [("olmo2.attention.sliding_window", gw.V_U32, 4)], "OLMo 3")
            kv_case("key_length", [kv for kv in kvs if kv[0] != "olmo2.rope.dimension_count"] +
                    [("olmo2.attention.key_length", gw.V_U32, 4), ("olmo2.attention.value_length", gw.V_U32, 4)],
                    "key_length 4 is not embedding_length / head_count")
            t_case("no output", [x for x in tensors if x[0] != "output.weight"], "output.weight is missing")
            t_case("input norm", tensors + [("blk.0.attn_norm.weight", gw.F32, [32], bytes(128))], "not one a olmo2")
    for name, blob, must in cases:
        p = scratch("gguf_bad_case.gguf")
        open(p, "wb").write(blob)
        err = _refused(p, name, must)
        print(f"{name}: {err.strip()}")


def patch_bytes(d, at, fmt, v):
    b = bytearray(d)
    struct.pack_into(fmt, b, at, v)
    return bytes(b)


def test_runs_past_a_short_context_length():
    """llama.cpp's llama2.c converter writes context_length 128 for any model: as
    llama.cpp does, ./run runs past it when -n asks (with a note), so such a
    stories260K file still prints llama2.c's 200-step text; LLMW keeps its bound."""
    cfg, t = gw.read_legacy(model("stories260K.bin"))
    pieces, scores = gw.read_tokenizer_bin(model("tok512.bin"), cfg["vocab_size"])
    path = scratch("gguf_stories_ctx128.gguf")
    gw.write(path, gw.llama_kvs(dict(cfg, seq_len=128)) + gw.llama_vocab_kvs(pieces, scores),
             gw.llama_tensors(cfg, t, "f32"))
    rc, out, err = run([path, "-t", "0", "-n", "200"])
    assert rc == 0, err
    assert out == open(model("stories260K.greedy200.txt"), "rb").read(), out[:120]
    assert "runs past the 128 positions" in err, err
    rc, out, err = run([path, "-t", "0", "-n", "100"])      # within the trained context: no note
    assert rc == 0 and "runs past" not in err, err


def test_export_py_gguf_runs_to_the_golden_text():
    """export.py --format gguf (f32, with tok512 inside) runs to llama2.c's texts with no -z;
    its q8_0 and q4_0 files load and generate."""
    for dtype in ("f32", "q8_0", "q4_0"):
        path = scratch(f"gguf_export_{dtype}.gguf")
        p = subprocess.run([sys.executable, os.path.join(common.ROOT, "export.py"), "--format", "gguf",
                            "--dtype", dtype, "--tokenizer", model("tok512.bin"), model("stories260K.bin"), path],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        rc, out, err = run([path, "-t", "0", "-n", "200"])
        assert rc == 0 and out.startswith(b"Once upon a time"), err
        if dtype == "f32":
            assert out == open(model("stories260K.greedy200.txt"), "rb").read(), out[:120]
            rc, out, _ = run([path, "-t", "1.0", "-p", "0.9", "-s", "133742", "-n", "256"])
            assert out == open(model("stories260K.t1-p0.9-s133742.txt"), "rb").read(), out[:120]


def test_mmap_off_same_text():
    """A GGUF read into RAM (--mmap off: its tokenizer and the q8_0
    matrices then come from the copy) prints what the mapped file prints"""
    for dtype in ("f32", "f16", "q8_0"):
        outs = []
        for mode in ("on", "off"):
            rc, out, err = run([stories(dtype), "-t", "0.8", "-s", "5", "-n", "120", "-i", "Once upon a time", "--mmap", mode])
            assert rc == 0, err
            outs.append(out)
        assert outs[0] == outs[1] and outs[0].startswith(b"Once upon a time"), (dtype, outs)
