"""export.py --dtype q4_0 / q4_K: LLMW's 4-bit types (FORMAT.md, "Matrix storage").

The quantizers are checked against blocks worked out by hand from the format's
rules, round trips are held to error bounds derived from those rules, odd row
lengths (64, 100, 172) show the zero padding, and the engine's own decoding of
every row (build/logits --mode dequant, env LOGITS) equals, bit for bit, the
decoding of tests/llmw.py, a reader written from FORMAT.md, not from export.py.
"""
import os
import struct
import subprocess
import sys

import numpy as np

import common
import llmw

EXPORT = os.path.join(common.ROOT, "export.py")
LOGITS = os.environ.get("LOGITS", os.path.join(common.ROOT, "build", "logits"))
sys.path.insert(0, common.ROOT)
import exporter.common  # noqa: E402
import exporter.quantizers  # noqa: E402  (the quantizers are unit-tested directly)
import exporter.read_llmw  # noqa: E402


def run_export(*args):
    p = subprocess.run([sys.executable, EXPORT] + [str(a) for a in args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stderr


def q4_0_rows(w):
    """LLMW q4_0 bytes of w -> uint8 (rows, blocks, 18)."""
    raw = exporter.quantizers.quantize_q4_0(np.asarray(w, np.float32))
    return np.frombuffer(raw, np.uint8).reshape(len(w), -1, 18)


def q4_K_rows(w):
    raw = exporter.quantizers.quantize_q4_K(np.asarray(w, np.float32))
    return np.frombuffer(raw, np.uint8).reshape(len(w), -1, 144)


# ---------------------------------------------------------------- blocks by hand

def test_q4_0_block_and_padding_by_hand():
    """A row of 40: one whole block and one of 8 values plus 24 of padding.
    Block 0: largest magnitude -4 -> d = -4 / -8 = 0.5 (f16 0x3800); code =
    min(15, trunc(x / 0.5 + 8.5)): -4 -> 0, 3.5 -> 15, 0.25 -> 9 (back as 0.5), -0.3 -> 7.
    Block 1: largest magnitude 2 -> d = 2 / -8 = -0.25 (f16 0xb400): 2 -> 0,
    -1 -> 12; its padding is 0 -> code 8."""
    x = np.zeros((1, 40), np.float32)
    x[0, :5] = [-4.0, 3.5, 0.25, -0.3, 0.0]
    x[0, 16], x[0, 17] = 1.0, -1.0            # codes 10, 6: high nibbles of bytes 0, 1
    x[0, 32], x[0, 33] = 2.0, -1.0
    b = q4_0_rows(x)
    assert b.shape == (1, 2, 18)
    nib0 = [0, 15, 9, 7, 8] + [8] * 11 + [10, 6] + [8] * 14
    want0 = bytes([0x00, 0x38]) + bytes(nib0[j] | nib0[j + 16] << 4 for j in range(16))
    nib1 = [0, 12] + [8] * 30
    want1 = bytes([0x00, 0xb4]) + bytes(nib1[j] | nib1[j + 16] << 4 for j in range(16))
    assert b[0, 0].tobytes() == want0, b[0, 0].tobytes().hex()
    assert b[0, 1].tobytes() == want1, b[0, 1].tobytes().hex()
    back = exporter.quantizers.dequantize_q4_0(b.tobytes(), 1, 40)
    assert back.shape == (1, 40)
    assert list(back[0, :5]) == [-4.0, 3.5, 0.5, -0.5, 0.0] and list(back[0, 32:34]) == [2.0, -1.0]


# Eight sub-blocks whose values lie exactly on their grids: x = (ls/32) L - lm/16 with
# codes L = 0..15 twice (sub-block 3 is constant), so the fit finds them and the
# stored scales are exact: max scale 63/32 -> d = 1/32 (f16 0x2800), max min 63/16
# -> dmin = 1/16 (f16 0x2c00).
HAND_LS = [63, 32, 1, 0, 10, 40, 17, 5]
HAND_LM = [0, 63, 16, 16, 5, 33, 48, 0]


def test_q4_K_superblock_by_hand():
    L = np.tile(np.arange(16, dtype=np.float32), 2)
    x = np.concatenate([np.float32(ls / 32) * L - np.float32(lm / 16) for ls, lm in zip(HAND_LS, HAND_LM)])
    b = q4_K_rows(x.reshape(1, 256))
    assert b.shape == (1, 1, 144)
    blk = b[0, 0].tobytes()
    assert blk[0:4] == bytes([0x00, 0x28, 0x00, 0x2c]), blk[:4].hex()
    # bytes 0-3: ls[j] | (ls[j+4] >> 4) << 6 = 63, 32 | 2 << 6, 1 | 1 << 6, 0 | 0
    # bytes 4-7: lm[j] | (lm[j+4] >> 4) << 6 = 0, 63 | 2 << 6, 16 | 3 << 6, 16
    # bytes 8-11: (ls[j+4] & 15) | (lm[j+4] & 15) << 4 = 10 | 5 << 4, 8 | 1 << 4, 1, 5
    assert blk[4:16] == bytes([0x3f, 0xa0, 0x41, 0x00, 0x00, 0xbf, 0xd0, 0x10, 0x5a, 0x18, 0x01, 0x05]), blk[4:16].hex()
    codes = [l % 16 for l in range(32)]
    want = bytearray()
    for p in range(4):   # sub-blocks 2p (low nibbles) and 2p + 1 (high); sub-block 3 all 0
        hi = [0] * 32 if 2 * p + 1 == 3 else codes
        want += bytes(codes[l] | hi[l] << 4 for l in range(32))
    assert blk[16:] == bytes(want), blk[16:].hex()
    # on the grid, so the round trip is exact
    assert (exporter.quantizers.dequantize_q4_K(blk, 1, 256)[0] == x).all()


# ---------------------------------------------------------------- bounds, odd sizes, edges

def q4_0_bound(b, cols):
    """Per value: one step |d| (the top code clamps at 15: a value at +8|d| lands a step
    away) plus what storing d in f16 moves the extreme level, 8 * |d| * 2^-11."""
    d = np.abs(b[:, :, :2].copy().view("<f2").astype(np.float32))
    return np.repeat(d[:, :, 0], 32, axis=1)[:, :cols] * (1 + 8 / 2048)


def test_round_trip_bounds_odd_sizes():
    rng = np.random.default_rng(3)
    for cols in (64, 100, 172, 256, 300):
        w = rng.standard_normal((7, cols)).astype(np.float32)
        b = q4_0_rows(w)
        back = exporter.quantizers.dequantize_q4_0(b.tobytes(), 7, cols)
        assert (np.abs(back - w) <= q4_0_bound(b, cols) * 1.0001).all(), (cols, float(np.abs(back - w).max()))
        # the padding of the last block: code 8 (decodes to exactly 0)
        pad = np.arange(-(-cols // 32) * 32) >= cols
        codes = np.concatenate([b[:, :, 2:] & 15, b[:, :, 2:] >> 4], axis=2).reshape(7, -1)
        assert (codes[:, pad] == 8).all(), cols
        k = q4_K_rows(w)
        kb = exporter.quantizers.dequantize_q4_K(k.tobytes(), 7, cols)
        # each value within half a step of its sub-block, (d sc) / 2, when it lies inside
        # the sub-block's range [-dmin m, 15 d sc - dmin m]; everywhere within a
        # sixteenth of the row's range (the 6-bit scales cost the rest)
        d = k[:, :, 0:2].copy().view("<f2").astype(np.float32)
        dmin = k[:, :, 2:4].copy().view("<f2").astype(np.float32)
        sc, mn = llmw_scales(k)
        step = np.repeat((d * sc).reshape(7, -1), 32, axis=1)[:, :cols]
        low = -np.repeat((dmin * mn).reshape(7, -1), 32, axis=1)[:, :cols]
        inside = (w >= low) & (w <= low + 15 * step)
        err = np.abs(kb - w)
        assert (err[inside] <= step[inside] / 2 * 1.0001 + 1e-7).all(), (cols, float(err[inside].max()))
        span = (w.max(axis=1) - np.minimum(w.min(axis=1), 0))[:, None]
        assert (err <= span / 16).all(), (cols, float((err / span).max()))
        # sub-blocks of padding only: scale 0, min 0, codes 0
        nsub = -(-cols // 256) * 8
        for j in range(-(-cols // 32), nsub):
            blk, sub = j // 8, j % 8
            assert (sc[:, blk, sub] == 0).all() and (mn[:, blk, sub] == 0).all(), (cols, j)
            q = k[:, blk, 16 + 32 * (sub // 2):16 + 32 * (sub // 2) + 32] >> (4 * (sub % 2)) & 15
            assert (q == 0).all(), (cols, j)
        # the search is worth its time: less squared error than q4_0 at nearly the same size
        e4 = float(((back - w) ** 2).mean())
        ek = float(((kb - w) ** 2).mean())
        print(f"   cols {cols}: mean squared error q4_0 {e4:.4g}, q4_K {ek:.4g}")
        assert ek < e4, (cols, ek, e4)


def llmw_scales(k):
    """The 6-bit scales and mins of q4_K blocks (rows, blocks, 144), by tests/llmw.py."""
    sc = np.stack([llmw.q4_K_scale_min(k[:, :, 4:16], j)[0] for j in range(8)], axis=2)
    mn = np.stack([llmw.q4_K_scale_min(k[:, :, 4:16], j)[1] for j in range(8)], axis=2)
    return sc.astype(np.float32), mn.astype(np.float32)


def test_zero_rows_and_one_huge_value():
    z = np.zeros((2, 172), np.float32)
    b = q4_0_rows(z)
    assert (b[:, :, 2:] == 0x88).all() and (exporter.quantizers.dequantize_q4_0(b.tobytes(), 2, 172) == 0).all()
    k = q4_K_rows(z)
    assert (k == 0).all(), "an all-zero q4_K row is all zero bytes"
    w = np.full((1, 64), 0.01, np.float32)
    w[0, 5] = 1000.0
    b = q4_0_rows(w)
    back = exporter.quantizers.dequantize_q4_0(b.tobytes(), 1, 64)
    assert back[0, 5] == 1000.0                                       # d = 1000 / -8 = -125, exact
    assert (back[0, :32][np.arange(32) != 5] == 0).all()              # 0.01 / -125 + 8.5 -> code 8 -> 0
    assert (np.abs(back[0, 32:] - 0.01) <= 0.01 / 16).all()           # the other block keeps its own d
    kb = exporter.quantizers.dequantize_q4_K(q4_K_rows(w).tobytes(), 1, 64)
    assert abs(kb[0, 5] - 1000.0) <= 1000.0 / 15 / 2 * 1.01, kb[0, 5]
    # too large for an f16 scale: refused, naming the tensor
    big = np.full((1, 32), 1e9, np.float32)
    for q in (exporter.quantizers.quantize_q4_0, exporter.quantizers.quantize_q4_K):
        try:
            q(big, "layers.0.wq")
        except exporter.common.ExportError as e:
            assert "layers.0.wq" in str(e) and "f16" in str(e), e
        else:
            raise AssertionError(f"{q.__name__} took a value of 1e9")


def test_nan_and_inf_refused_one_line():
    d = common.scratch("q4_bad")
    os.makedirs(d, exist_ok=True)
    good = os.path.join(d, "good.llmw")
    rc, err = run_export("random", "--dim", 32, "--hidden-dim", 40, "--layers", 1, "--heads", 2, "--kv-heads", 1,
                         "--vocab", 16, good)
    assert rc == 0, err
    h, tensors, data = llmw.parse(good)
    start = tensors["layers.0.w2"][0]
    for dtype in ("q4_0", "q4_K"):
        for bad in (float("nan"), float("inf")):
            p = os.path.join(d, "bad.llmw")
            with open(p, "wb") as f:
                f.write(data[:start] + struct.pack("<f", bad) + data[start + 4:])
            out = os.path.join(d, "out.llmw")
            rc, err = run_export("--dtype", dtype, p, out)
            lines = err.strip().splitlines()
            assert rc == 1 and lines[-1].startswith("export.py: error:") and "NaN or Inf" in lines[-1], err
            assert "w2" in lines[-1] and not os.path.exists(out), err


# ---------------------------------------------------------------- the engine's decoding

def test_engine_dequant_equals_spec_reader():
    """Every row of every matrix as the engine decodes it (embeddings use these rows)
    equals tests/llmw.py's decoding bit for bit: stories260K (rows of 64 and 172) and a
    random model of rows 48 and 100 with an unshared classifier, in q4_0 and q4_K."""
    assert os.path.exists(LOGITS), f"missing {LOGITS} (build it, or set LOGITS)"
    d = common.scratch("q4_dequant")
    os.makedirs(d, exist_ok=True)
    rnd = os.path.join(d, "random.llmw")
    rc, err = run_export("random", "--dim", 48, "--hidden-dim", 100, "--layers", 2, "--heads", 6, "--kv-heads", 2,
                         "--vocab", 97, "--unshared", "--seed", 9, rnd)
    assert rc == 0, err
    for src in (common.model("stories260K.bin"), rnd):
        for dtype in ("q4_0", "q4_K"):
            path = os.path.join(d, f"{os.path.basename(src)}.{dtype}.llmw")
            rc, err = run_export("--dtype", dtype, src, path)
            assert rc == 0, err
            h, weights = llmw.read(path)
            assert h["weight_type"] == {"q4_0": 5, "q4_K": 6}[dtype] and h["group_size"] == 0
            out = os.path.join(d, "dq.f32")
            rc, so, se = common.run([path, "--mode", "dequant", "--out", out], binary=LOGITS)
            assert rc == 0, se
            got = np.fromfile(out, "<f4")
            names = ["tok_embeddings"] + [f"layers.{l}.{k}" for l in range(h["n_layers"])
                                          for k in ("wq", "wk", "wv", "wo", "w1", "w2", "w3")]
            names += [] if h["shared_classifier"] else ["classifier"]
            want = np.concatenate([weights[n].ravel() for n in names])
            assert got.shape == want.shape, (got.shape, want.shape)
            at = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
            assert at.size == 0, f"{path}: {at.size} values differ, first at {at[0]}: {got[at[0]]} vs {want[at[0]]}"
            # and export.py's own reader (re-export) decodes the same
            src_back = exporter.read_llmw.load_llmw(path)
            for n in names:
                assert (src_back.load(n).view(np.uint32) == weights[n].view(np.uint32)).all(), (path, n)
